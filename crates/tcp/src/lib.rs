//! # tclab-tcp: a sans-IO model of Linux TCP for the simulated lab
//!
//! This crate is the TCP that tclab's simulator runs on its hosts. It has no
//! clock, no sockets, no threads and no dependencies: the simulator hands it
//! segments and the virtual time (`on_segment(now, seg)`), asks it what to
//! send (`poll_transmit(now)` until `None`), and asks when it next wants to be
//! woken (`poll_at()`); timers that are due fire inside `poll_transmit` and
//! `on_segment`. Payload bytes are not modelled: a segment carries sequence
//! numbers, flags, a window, options and a payload *length*, which is all a
//! qdisc, a u32 filter on the headers, or a goodput counter needs.
//!
//! ## Driving it
//!
//! * `Connection::client(cfg, now, isn)` / `Connection::server(cfg, isn)`;
//!   `write(bytes)` and `close()` may be called at once, before the handshake
//!   completes: the data and the FIN follow it.
//! * After every `on_segment` and at every `poll_at()` instant, call
//!   `poll_transmit(now)` until it returns `None`; due timers (RTO, SYN
//!   retransmission, delayed ACK, zero-window probe) fire inside it.
//! * `on_local_drop(now, &seg)` takes the refused segment so the model knows
//!   which one was not sent (the local qdisc's `NET_XMIT_DROP`);
//!   `on_local_congestion(now)` is `NET_XMIT_CN`: the segment counts as sent
//!   and the window is reduced (`tcp_enter_cwr`).
//! * Receivers read automatically; `set_autoread(false)` and `read(n)` model
//!   an application that does not keep up (the window closes).
//!
//! ## What is modelled, and after which kernel function
//!
//! The reference is Linux 6.12 (`net/ipv4/tcp_input.c`, `tcp_output.c`,
//! `tcp_timer.c`, `tcp_cong.c`, `tcp_cubic.c`).
//!
//! * **Handshake and options** (`tcp_syn_options`, `tcp_synack_options`,
//!   `tcp_rcv_synsent_state_process`): SYN carries MSS, SACK-permitted,
//!   timestamps and window scale, laid out as Linux does (MSS, SACKOK+TS or
//!   NOP,NOP,TS, NOP+WS: 20 option bytes). The SYN-ACK echoes only what the
//!   SYN offered. The sending MSS is `min(own, peer's)` minus 12 when
//!   timestamps are on (`tcp_sync_mss`), so MTU 1500 gives 1448. The window
//!   scale is the smallest shift that makes the configured receive window fit
//!   in 16 bits (Linux derives it from the buffer limit; see below).
//! * **Slow start** (`tcp_slow_start`): initial cwnd 10 (`TCP_INIT_CWND`),
//!   ABC: cwnd grows by the number of segments each ACK delivers, capped at
//!   ssthresh; the leftover goes to congestion avoidance. Growth only while
//!   cwnd-limited (`tcp_is_cwnd_limited`, `tcp_cwnd_validate`).
//! * **Reno** (`tcp_reno_cong_avoid`, `tcp_cong_avoid_ai`, `tcp_reno_ssthresh`):
//!   one segment per cwnd of ACKed segments; ssthresh = cwnd/2.
//! * **CUBIC** (`tcp_cubic.c`, module defaults): beta 717/1024, C = 0.4
//!   (`bic_scale` 41), fast convergence, TCP friendliness, the kernel's integer
//!   `cubic_root` and once-per-jiffy update with `HZ = 1000`. **HyStart is
//!   modelled** (ACK-train and delay detection, `hystart_update`, with the
//!   `hystart_ack_delay` cushion from the pacing rate Linux computes even
//!   without pacing), as Linux enables it by default.
//! * **Loss detection and recovery** (`tcp_fastretrans_alert`,
//!   `tcp_enter_recovery`, `tcp_cwnd_reduction`): with SACK a SACK scoreboard
//!   (`tcp_sacktag_write_queue`): recovery starts when three segments are
//!   SACKed above the hole (`tcp_time_to_recover`: `sacked_out + 1 >
//!   reordering`, reordering = 3); a segment is lost once three SACKed
//!   segments lie above it (RFC 6675 `IsLost`, which is what Linux's
//!   non-RACK `tcp_mark_head_lost` amounts to). Without SACK, NewReno: three
//!   duplicate ACKs count as "reno SACKs" (`tcp_add_reno_sack`), the head is
//!   retransmitted, each partial ACK retransmits the next head. The cwnd
//!   reduction is **PRR** (RFC 6937) exactly as `tcp_cwnd_reduction`, and at
//!   the end of recovery cwnd = ssthresh (`tcp_end_cwnd_reduction`).
//! * **RTT and RTO** (`tcp_rtt_estimator`, `tcp_set_rto`, `tcp_ack_update_rtt`):
//!   Jacobson/Karels with Linux's twists: RTO = srtt + rttvar where rttvar is
//!   at least `TCP_RTO_MIN` (200 ms) and decays at most once per RTT; so the
//!   RTO of a quiet 20 ms path is 20 ms + 200 ms, not max(200 ms, srtt +
//!   4·mdev). RTT samples come from the send time of the oldest newly acked
//!   never-retransmitted segment (Karn), from SACKed segments, and from the
//!   timestamp echo when only retransmitted data is acked. A valid sample
//!   resets the backoff. RTO is capped at 120 s (`TCP_RTO_MAX`).
//! * **RTO recovery** (`tcp_retransmit_timer`, `tcp_enter_loss`): ssthresh
//!   from the CC module, every un-SACKed segment marked lost, cwnd = 1,
//!   go-back-N from `snd_una` in slow start, RTO doubled each time. CUBIC is
//!   reset on entering Loss (`cubictcp_state`). A timeout repeated before
//!   snd_una advances keeps the ssthresh of the first (`icsk_retransmits`,
//!   which an RTT sample does not clear, unlike the backoff).
//! * **Delayed ACKs** (`__tcp_ack_snd_check`, `tcp_send_delayed_ack`,
//!   `tcp_incr_quickack`): quickack mode for the first
//!   `min(rcv_wnd / (2·rcv_mss), 16)` ACKs, then an ACK when more than one
//!   full segment is unacknowledged (every second segment) or after the 40 ms
//!   delayed-ACK timer (`TCP_DELACK_MIN`). Out-of-order data, data that fills
//!   a hole, duplicates and FIN are acknowledged at once, with up to 3 SACK
//!   blocks (4 without timestamps), the most recent first (`tcp_sack_new_ofo_skb`).
//! * **Flow control**: the receiver advertises free buffer (a fixed
//!   `rcv_wnd`, less data the application has not read when reading is
//!   manual), never shrinking the right edge (`tcp_select_window`), with
//!   receiver SWS avoidance; a window update is sent when reading doubles the
//!   window (`tcp_cleanup_rbuf`). The sender respects `snd_una + snd_wnd`
//!   (`tcp_snd_wnd_test`, `tcp_ack_update_window`) and, facing a zero window
//!   with nothing in flight, sends zero-window probes (`tcp_send_probe0`:
//!   an old sequence number, `snd_una - 1`) with exponential backoff.
//! * **Local congestion** (`__tcp_transmit_skb` → `tcp_enter_cwr`): when the
//!   sender's own qdisc refuses a segment, the segment counts as not sent (or
//!   lost, if later data has already left), the connection enters CWR (PRR
//!   down to ssthresh) and stops sending until the next ACK or timer.
//! * **Close**: FIN after the written bytes (piggybacked on the last data
//!   segment, as `tcp_send_fin` does), FIN_WAIT1/2, CLOSING, TIME_WAIT,
//!   CLOSE_WAIT, LAST_ACK; a byte-count transfer ends with both sides closed.
//! * **Nagle** with Minshall's variant (`tcp_nagle_check`): a sub-MSS segment
//!   waits only while another sub-MSS segment is unacknowledged, unless it
//!   carries the FIN.
//!
//! ## What is left out, compared with Linux
//!
//! * **No pacing, no TSO/GSO/GRO, no TCP small queues**: segments leave as
//!   fast as cwnd and the window allow, one MSS each; the simulator's qdisc
//!   sees MSS-sized packets in bursts. (Linux without `fq` does not pace either,
//!   but TSO makes bursts of up to 64 KB and TSQ limits what sits in the qdisc.)
//! * **No RACK-TLP** (Linux's default loss detection since 4.18): no tail
//!   loss probe, so a tail loss is repaired by the RTO; lost retransmissions
//!   are found only by the RTO. Loss marking is the classic dupthresh rule.
//! * **No F-RTO, no undo** (DSACK, Eifel/timestamps), no D-SACK generation,
//!   no reordering estimation (reordering stays 3), no SACK reneging, no ACK
//!   compression of SACKs (`tcp_comp_sack_nr`): every out-of-order segment is
//!   acknowledged at once.
//! * **Fixed receive window**: no receive-buffer autotuning
//!   (`tcp_rcv_space_adjust`, `tcp_grow_window`); the window is `rcv_wnd` from
//!   the first ACK on (the SYN carries `min(rcv_wnd, 65535)`).
//! * **No slow-start restart after idle**, no cwnd moderation, no ECN, no
//!   PAWS, no MTU probing, no keepalive, no give-up after `tcp_retries2`, no
//!   TIME_WAIT timer (TIME_WAIT is final), no FIN_WAIT2 timeout, no RST
//!   generation (a RST received closes the connection), no TCP Fast Open.
//! * **Timers are exact** to the nanosecond (Linux rounds to jiffies); the
//!   timestamp clock ticks in milliseconds like Linux's `TCP_TS_HZ`.
//! * **Delayed ACK timeout is fixed at 40 ms** (`TCP_ATO_MIN`); the ato
//!   adaptation and pingpong mode of interactive flows are not modelled.
//! * The min-RTT filter keeps the minimum over the whole connection (Linux:
//!   a 5-minute window).

mod cc;

use std::collections::VecDeque;

pub use cc::HZ;

/// Virtual time in nanoseconds. There is no clock: every entry point is told
/// the time.
pub type Nanos = u64;

/// TCP header flags, as on the wire.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    /// ECN-Echo (RFC 3168): the receiver saw a CE mark; on a SYN, "I do ECN".
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced: the sender reacted to an ECE.
    pub const CWR: u8 = 0x80;
}

/// The IP header's ECN field ([`Segment::ecn`]).
pub mod ecn {
    pub const NOT_ECT: u8 = 0;
    pub const ECT0: u8 = 2;
    pub const CE: u8 = 3;
}

const MS: Nanos = 1_000_000;
/// `TCP_RTO_MAX`: 120 s.
pub const TCP_RTO_MAX: Nanos = 120_000 * MS;
/// `TCP_DELACK_MIN` / `TCP_ATO_MIN`: 40 ms.
pub const TCP_DELACK_MIN: Nanos = 40 * MS;
/// `TCP_INFINITE_SSTHRESH`.
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
const TCP_MAX_QUICKACKS: u32 = 16;
/// `sysctl_tcp_reordering`: the dupthresh.
const REORDERING: u32 = 3;
/// `TCP_MSS_DEFAULT`: what a peer that sends no MSS option is assumed to take.
const TCP_MSS_DEFAULT: u32 = 536;
/// Timestamp option length on established segments (NOP, NOP, TS).
const TS_OPTLEN: u32 = 12;

/// TCP options carried by a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr)
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge), most recent first; at most 4
    /// (3 when timestamps are present) so that options fit in 40 bytes.
    pub sack_blocks: Vec<(u32, u32)>,
}

impl TcpOptions {
    /// Option bytes as Linux lays them out (`tcp_options_write`), padded to 4.
    pub fn len(&self) -> u32 {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamps.is_some() {
            n += 12; // SACKOK+TS or NOP,NOP,TS
        } else if self.sack_permitted {
            n += 4; // NOP,NOP,SACKOK
        }
        if self.wscale.is_some() {
            n += 4; // NOP,WS
        }
        if !self.sack_blocks.is_empty() {
            n += 4 + 8 * self.sack_blocks.len() as u32; // NOP,NOP,SACK hdr
        }
        (n + 3) & !3
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One TCP segment, without payload bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Segment {
    pub seq: u32,
    pub ack: u32,
    /// FIN=1 SYN=2 RST=4 PSH=8 ACK=16, see [`flags`].
    pub flags: u8,
    /// As on the wire: scaled by the sender's window scale (not on SYNs).
    pub window: u16,
    pub payload_len: u32,
    pub options: TcpOptions,
    /// The ECN field of the IP header carrying it ([`ecn`]): the sender sets ECT(0) on new data of an
    /// ECN connection; a router's AQM may change it to CE; the receiver reads it.
    pub ecn: u8,
}

impl Segment {
    /// TCP header length: 20 plus the options padded to 4 bytes.
    pub fn header_len(&self) -> u32 {
        20 + self.options.len().min(40)
    }

    /// Sequence space the segment occupies (payload, plus one each for SYN and FIN).
    pub fn seq_len(&self) -> u32 {
        self.payload_len
            .saturating_add((self.flags & flags::SYN != 0) as u32)
            .saturating_add((self.flags & flags::FIN != 0) as u32)
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// The congestion control module (`net.ipv4.tcp_congestion_control`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CongestionControl {
    #[default]
    Cubic,
    Reno,
}

/// Connection configuration. Defaults are Linux's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The MSS this end advertises (MTU − 40 for IPv4). The sending MSS is
    /// the smaller of both ends' and loses 12 bytes to timestamps.
    pub mss: u32,
    pub cc: CongestionControl,
    /// Initial congestion window in segments (`TCP_INIT_CWND` = 10, RFC 6928).
    pub initial_cwnd: u32,
    /// `TCP_RTO_MIN` = 200 ms.
    pub min_rto: Nanos,
    /// `TCP_TIMEOUT_INIT` = 1 s.
    pub initial_rto: Nanos,
    pub delayed_ack: bool,
    /// Receive window in bytes (fixed; the window scale is chosen to fit it).
    pub rcv_wnd: u32,
    pub timestamps: bool,
    pub sack: bool,
    /// CUBIC's HyStart (module parameter `hystart`, on in Linux).
    pub hystart: bool,
    /// `net.ipv4.tcp_ecn = 1`: ask for ECN on connections this end opens (RFC 3168). Either way, an end
    /// accepts ECN when the peer's SYN asks for it (Linux's default `tcp_ecn = 2`).
    pub ecn: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: 1460,
            cc: CongestionControl::Cubic,
            initial_cwnd: 10,
            min_rto: 200 * MS,
            initial_rto: 1000 * MS,
            delayed_ack: true,
            rcv_wnd: 6 * 1024 * 1024,
            timestamps: true,
            sack: true,
            hystart: true,
            ecn: false,
        }
    }
}

impl Config {
    /// Defaults with the advertised MSS derived from the device MTU
    /// (`tcp_mtu_to_mss`: MTU − 20 IPv4 − 20 TCP).
    pub fn mss_from_mtu(mtu: u32) -> Config {
        Config {
            // tcp_mtu_to_mss, clamped to tcp_min_snd_mss (48).
            mss: mtu.saturating_sub(40).max(48),
            ..Config::default()
        }
    }
}

/// TCP connection states (RFC 793, as `tcp_states.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

/// Congestion-avoidance states (`enum tcp_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CaState {
    Open,
    Disorder,
    Cwr,
    Recovery,
    Loss,
}

/// Counters and the current state of a connection (after `tcp_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpStats {
    pub state: State,
    pub ca_state: CaState,
    /// Sending MSS in use (payload bytes per full segment).
    pub mss: u32,
    /// Bytes the application wrote.
    pub bytes_written: u64,
    /// Payload bytes sent, retransmissions included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Payload bytes retransmitted (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Payload bytes cumulatively acknowledged by the peer (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// Payload bytes received in order and handed to the application
    /// (`tcpi_bytes_received`).
    pub bytes_delivered: u64,
    /// Bytes the application has read (equals `bytes_delivered` with auto-read).
    pub bytes_read: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub data_segs_out: u64,
    /// Segments retransmitted (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// RTO expirations with data outstanding.
    pub timeouts: u64,
    /// Entries into fast recovery.
    pub fast_retransmits: u64,
    /// Segments the local qdisc refused.
    pub local_drops: u64,
    /// Zero-window probes sent.
    pub zero_window_probes: u64,
    /// Congestion window, segments.
    pub cwnd: u32,
    pub ssthresh: u32,
    pub srtt_ns: u64,
    /// Mean deviation (RFC 6298 RTTVAR, Linux `mdev_us/4` as `tcpi_rttvar`).
    pub rttvar_ns: u64,
    /// Current retransmission timeout including backoff.
    pub rto_ns: u64,
    /// Minimum RTT seen; 0 before any sample.
    pub min_rtt_ns: u64,
    pub backoff: u32,
    pub packets_out: u32,
    pub in_flight: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// Peer's window in bytes.
    pub snd_wnd: u64,
    /// Window this end last advertised, in bytes.
    pub rcv_wnd: u64,
    /// Duplicate ACKs received.
    pub dupacks_in: u64,
}

/// One sent segment in the retransmission queue (an skb in `tcp_rtx_queue`).
#[derive(Clone, Debug)]
struct TxSeg {
    start: u64,
    /// End of the payload (excluding the FIN).
    end: u64,
    fin: bool,
    /// Last (re)transmission time.
    sent_at: Nanos,
    /// Ever retransmitted (Karn: no RTT sample from it).
    ever_retrans: bool,
    sacked: bool,
    lost: bool,
    /// A retransmission is in flight (`TCPCB_SACKED_RETRANS`).
    retrans: bool,
}

impl TxSeg {
    fn seq_end(&self) -> u64 {
        self.end + self.fin as u64
    }
    fn len(&self) -> u32 {
        (self.end - self.start) as u32
    }
}

/// What the SYN/SYN-ACK state machine still owes the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SynTx {
    None,
    Syn,
    SynAck,
}

/// A TCP connection (one end).
#[derive(Clone, Debug)]
pub struct Connection {
    cfg: Config,
    state: State,

    // ---- send side; sequence numbers are absolute u64, 0 = our SYN ----
    iss: u32,
    snd_una: u64,
    snd_nxt: u64,
    /// Sequence number after the last written byte (1 + written).
    write_end: u64,
    /// FIN queued (close called); its sequence number is `write_end`.
    fin_queued: bool,
    fin_sent: bool,
    snd_wnd: u64,
    max_window: u64,
    snd_wl1: u64,
    snd_wscale: u8,
    rcv_wscale: u8,
    ws_ok: bool,
    /// ECN was negotiated on the handshake (`TCP_ECN_OK`).
    ecn_ok: bool,
    /// The receiver saw CE and echoes ECE until the sender's CWR (`TCP_ECN_DEMAND_CWR`).
    ecn_demand_cwr: bool,
    /// The next new data segment carries CWR (`TCP_ECN_QUEUE_CWR`).
    ecn_queue_cwr: bool,
    /// Segments received with CE, and ECE-marked ACKs that reduced the window.
    pub ce_received: u64,
    pub ece_reductions: u64,
    ts_ok: bool,
    sack_ok: bool,
    /// Sending MSS (payload bytes).
    mss: u32,
    /// Highest sent sub-MSS segment end (`snd_sml`, Minshall).
    snd_sml: u64,
    rtx: VecDeque<TxSeg>,
    packets_out: u32,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,
    /// Lost segments not yet retransmitted.
    lost_pending: u32,
    syn_tx: SynTx,
    syn_sent_at: Nanos,
    syn_retransmitted: bool,

    // ---- congestion control ----
    cwnd: u32,
    ssthresh: u32,
    cwnd_cnt: u32,
    ca_state: CaState,
    high_seq: u64,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    is_cwnd_limited: bool,
    max_packets_out: u32,
    cwnd_usage_seq: u64,
    cubic: cc::Cubic,

    // ---- RTT (Linux's scaled fields, in ns) ----
    srtt8: u64,
    mdev4: u64,
    mdev_max4: u64,
    rttvar4: u64,
    rtt_seq: u64,
    min_rtt: u64,
    rto: Nanos,
    backoff: u32,
    /// RTO expirations since snd_una last advanced (`icsk_retransmits`): unlike the backoff, an RTT
    /// sample does not clear it, so `enter_loss` can tell a repeated timeout in one Loss episode.
    rto_retransmits: u32,

    // ---- timers ----
    rto_at: Option<Nanos>,
    delack_at: Option<Nanos>,
    probe_at: Option<Nanos>,
    probe_pending: bool,
    probes_out: u32,
    /// Local qdisc refused a segment: no data until the next ACK or timer.
    local_block: bool,
    /// TCP small queues: the host holds enough of this socket's data below it (`TSQ_THROTTLED`); data
    /// waits, pure ACKs still go.
    tsq_throttled: bool,

    // ---- receive side; absolute u64, 0 = peer's SYN ----
    irs: u32,
    have_irs: bool,
    rcv_nxt: u64,
    /// rcv_nxt when the last ACK was sent.
    rcv_wup: u64,
    /// Window (bytes) advertised in the last ACK.
    rcv_wnd_adv: u64,
    ooo: Vec<(u64, u64)>,
    sack_recent: Vec<(u64, u64)>,
    peer_fin: Option<u64>,
    fin_received: bool,
    unread: u64,
    autoread: bool,
    ack_pending: bool,
    ack_now: bool,
    quick: u32,
    rcv_mss: u32,
    first_data_seen: bool,
    ts_recent: u32,

    // ---- counters ----
    written: u64,
    bytes_sent: u64,
    bytes_retrans: u64,
    bytes_acked: u64,
    bytes_delivered: u64,
    bytes_read: u64,
    segs_out: u64,
    segs_in: u64,
    data_segs_out: u64,
    retransmits: u64,
    timeouts: u64,
    fast_retransmits: u64,
    local_drops: u64,
    zwp_sent: u64,
    dupacks_in: u64,
}

/// Signed distance from `reference` (a u32 on the wire) to `wire`.
fn seq_delta(wire: u32, reference: u32) -> i64 {
    wire.wrapping_sub(reference) as i32 as i64
}

impl Connection {
    fn new(cfg: Config, isn: u32, state: State) -> Connection {
        let mut rcv_wscale = 0u8;
        while rcv_wscale < 14 && (cfg.rcv_wnd as u64 >> rcv_wscale) > 65535 {
            rcv_wscale += 1;
        }
        let mss = cfg.mss.max(88);
        let rcv_mss = mss.min(cfg.rcv_wnd / 2).clamp(88, TCP_MSS_DEFAULT);
        let cwnd = cfg.initial_cwnd.max(1);
        let rto = cfg.initial_rto;
        let hystart = cfg.hystart;
        Connection {
            state,
            iss: isn,
            snd_una: 0,
            snd_nxt: 0,
            write_end: 1,
            fin_queued: false,
            fin_sent: false,
            snd_wnd: 0,
            max_window: 0,
            snd_wl1: 0,
            snd_wscale: 0,
            rcv_wscale,
            ws_ok: false,
            ts_ok: false,
            sack_ok: false,
            mss,
            snd_sml: 0,
            rtx: VecDeque::new(),
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            lost_pending: 0,
            syn_tx: SynTx::None,
            syn_sent_at: 0,
            syn_retransmitted: false,
            cwnd,
            ssthresh: TCP_INFINITE_SSTHRESH,
            cwnd_cnt: 0,
            ca_state: CaState::Open,
            high_seq: 0,
            prior_cwnd: 0,
            prr_delivered: 0,
            prr_out: 0,
            is_cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            cubic: cc::Cubic::new(hystart),
            srtt8: 0,
            mdev4: 0,
            mdev_max4: 0,
            rttvar4: 0,
            rtt_seq: 0,
            min_rtt: 0,
            rto,
            backoff: 0,
            rto_retransmits: 0,
            rto_at: None,
            delack_at: None,
            probe_at: None,
            probe_pending: false,
            probes_out: 0,
            local_block: false,
            tsq_throttled: false,
            irs: 0,
            have_irs: false,
            rcv_nxt: 0,
            rcv_wup: 0,
            rcv_wnd_adv: 0,
            ooo: Vec::new(),
            sack_recent: Vec::new(),
            peer_fin: None,
            fin_received: false,
            unread: 0,
            autoread: true,
            ack_pending: false,
            ack_now: false,
            ecn_ok: false,
            ecn_demand_cwr: false,
            ecn_queue_cwr: false,
            ce_received: 0,
            ece_reductions: 0,
            quick: 0,
            rcv_mss,
            first_data_seen: false,
            ts_recent: 0,
            written: 0,
            bytes_sent: 0,
            bytes_retrans: 0,
            bytes_acked: 0,
            bytes_delivered: 0,
            bytes_read: 0,
            segs_out: 0,
            segs_in: 0,
            data_segs_out: 0,
            retransmits: 0,
            timeouts: 0,
            fast_retransmits: 0,
            local_drops: 0,
            zwp_sent: 0,
            dupacks_in: 0,
            cfg,
        }
    }

    /// Active open: the first `poll_transmit` gives the SYN.
    pub fn client(cfg: Config, now: Nanos, isn: u32) -> Connection {
        let mut c = Connection::new(cfg, isn, State::SynSent);
        c.syn_tx = SynTx::Syn;
        c.syn_sent_at = now;
        c
    }

    /// Passive open: answers the first SYN it gets.
    pub fn server(cfg: Config, isn: u32) -> Connection {
        Connection::new(cfg, isn, State::Listen)
    }

    /// The application makes `bytes` more bytes available to send.
    /// Ignored after `close`.
    pub fn write(&mut self, bytes: u64) {
        if self.fin_queued || matches!(self.state, State::Closed | State::TimeWait) {
            return;
        }
        self.written = self.written.saturating_add(bytes);
        self.write_end = self.write_end.saturating_add(bytes);
    }

    /// Send a FIN after all written data (`tcp_close` → `tcp_send_fin`).
    pub fn close(&mut self) {
        if self.fin_queued {
            return;
        }
        match self.state {
            State::Listen => {
                self.state = State::Closed;
                self.clear_timers();
            }
            State::SynSent => {
                // Queued: the FIN follows the data once established.
                self.fin_queued = true;
            }
            State::Closed | State::TimeWait => {}
            _ => {
                self.fin_queued = true;
                self.state = match self.state {
                    State::CloseWait => State::LastAck,
                    State::SynReceived | State::Established => State::FinWait1,
                    s => s,
                };
            }
        }
    }

    /// Manual reading: when `false`, received bytes stay in the receive
    /// buffer (closing the advertised window) until [`Connection::read`].
    pub fn set_autoread(&mut self, on: bool) {
        self.autoread = on;
        if on {
            self.read(u64::MAX);
        }
    }

    /// The application reads up to `max` bytes; returns how many it got.
    /// Sends a window update when the window has at least doubled
    /// (`tcp_cleanup_rbuf`).
    pub fn read(&mut self, max: u64) -> u64 {
        let n = self.unread.min(max);
        if n == 0 {
            return 0;
        }
        let before = self.cur_rcv_window();
        self.unread -= n;
        self.bytes_read += n;
        if self.have_irs && !self.fin_received {
            let new = self.select_window_bytes();
            if 2 * before <= self.cfg.rcv_wnd as u64 && new >= 2 * before && new > 0 {
                self.ack_now = true;
            }
        }
        n
    }

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Sending MSS in use.
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// The connection is finished: closed, or in TIME_WAIT.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::TimeWait)
    }

    /// The peer has sent its FIN and everything before it was delivered.
    pub fn peer_closed(&self) -> bool {
        self.fin_received
    }

    /// Earliest pending timer (RTO/SYN retransmit, delayed ACK, zero-window probe).
    pub fn poll_at(&self) -> Option<Nanos> {
        [self.rto_at, self.delack_at, self.probe_at]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn stats(&self) -> TcpStats {
        TcpStats {
            state: self.state,
            ca_state: self.ca_state,
            mss: self.mss,
            bytes_written: self.written,
            bytes_sent: self.bytes_sent,
            bytes_retrans: self.bytes_retrans,
            bytes_acked: self.bytes_acked,
            bytes_delivered: self.bytes_delivered,
            bytes_read: self.bytes_read,
            segs_out: self.segs_out,
            segs_in: self.segs_in,
            data_segs_out: self.data_segs_out,
            retransmits: self.retransmits,
            timeouts: self.timeouts,
            fast_retransmits: self.fast_retransmits,
            local_drops: self.local_drops,
            zero_window_probes: self.zwp_sent,
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            srtt_ns: self.srtt8 >> 3,
            rttvar_ns: self.mdev4 >> 2,
            rto_ns: self.rto,
            min_rtt_ns: self.min_rtt,
            backoff: self.backoff,
            packets_out: self.packets_out,
            in_flight: self.in_flight(),
            sacked_out: self.sacked_out,
            lost_out: self.lost_out,
            retrans_out: self.retrans_out,
            snd_wnd: self.snd_wnd,
            rcv_wnd: self.rcv_wnd_adv,
            dupacks_in: self.dupacks_in,
        }
    }

    /// Consistency of the internal counters with the retransmission queue
    /// (for tests and fuzzing).
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let sacked = self.rtx.iter().filter(|t| t.sacked).count() as u32;
        let lost = self.rtx.iter().filter(|t| t.lost).count() as u32;
        let retrans = self.rtx.iter().filter(|t| t.retrans).count() as u32;
        let pending = self
            .rtx
            .iter()
            .filter(|t| t.lost && !t.retrans && !t.sacked)
            .count() as u32;
        let check = |name: &str, a: u32, b: u32| {
            if a == b {
                Ok(())
            } else {
                Err(format!("{name}: counter {a} != queue {b}"))
            }
        };
        check("packets_out", self.packets_out, self.rtx.len() as u32)?;
        if self.sack_ok {
            check("sacked_out", self.sacked_out, sacked)?;
        } else if self.sacked_out > self.packets_out {
            return Err("reno sacked_out > packets_out".into());
        }
        check("lost_out", self.lost_out, lost)?;
        check("retrans_out", self.retrans_out, retrans)?;
        check("lost_pending", self.lost_pending, pending)?;
        if self.snd_una > self.snd_nxt {
            return Err("snd_una > snd_nxt".into());
        }
        let mut prev = self.snd_una;
        for t in &self.rtx {
            if t.start < prev.min(t.start) || t.end < t.start {
                return Err("queue out of order".into());
            }
            prev = t.seq_end();
        }
        if prev > self.snd_nxt {
            return Err("queue beyond snd_nxt".into());
        }
        if self.cwnd == 0 {
            return Err("cwnd 0".into());
        }
        Ok(())
    }

    fn clear_timers(&mut self) {
        self.rto_at = None;
        self.delack_at = None;
        self.probe_at = None;
        self.probe_pending = false;
    }

    // ------------------------------------------------------------ helpers

    /// `tcp_packets_in_flight()`.
    fn in_flight(&self) -> u32 {
        (self
            .packets_out
            .saturating_sub(self.sacked_out + self.lost_out))
            + self.retrans_out
    }

    fn snd_wire(&self, abs: u64) -> u32 {
        self.iss.wrapping_add(abs as u32)
    }

    fn rcv_wire(&self, abs: u64) -> u32 {
        self.irs.wrapping_add(abs as u32)
    }

    /// Absolute send-space sequence of a wire value, near `snd_una`.
    fn snd_abs(&self, wire: u32) -> Option<u64> {
        let d = seq_delta(wire, self.snd_wire(self.snd_una));
        let v = self.snd_una as i64 + d;
        (v >= 0).then_some(v as u64)
    }

    /// Absolute receive-space sequence of a wire value, near `rcv_nxt`.
    fn rcv_abs(&self, wire: u32) -> i64 {
        self.rcv_nxt as i64 + seq_delta(wire, self.rcv_wire(self.rcv_nxt))
    }

    fn in_cwnd_reduction(&self) -> bool {
        matches!(self.ca_state, CaState::Cwr | CaState::Recovery)
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn ts_now(now: Nanos) -> u32 {
        (now / MS) as u32
    }

    /// Receive buffer space (`tcp_space` for a fixed buffer).
    fn free_space(&self) -> u64 {
        let ooo: u64 = self.ooo.iter().map(|(s, e)| e - s).sum();
        (self.cfg.rcv_wnd as u64).saturating_sub(self.unread + ooo)
    }

    /// `__tcp_select_window()` + `tcp_select_window()`: the right edge never
    /// moves left; receiver SWS avoidance; rounded to the window scale.
    fn select_window_bytes(&self) -> u64 {
        let full = self.cfg.rcv_wnd as u64;
        let mut free = self.free_space();
        let mss = self.rcv_mss as u64;
        if free < full / 2 && free < mss {
            free = 0;
        }
        let cur = self.cur_rcv_window();
        let mut win = free.max(cur);
        let gran = 1u64 << self.rcv_wscale;
        if win > cur {
            win = win / gran * gran;
        }
        win.min(65535u64 << self.rcv_wscale)
    }

    /// `tcp_receive_window()`: what remains of the last advertised window.
    fn cur_rcv_window(&self) -> u64 {
        (self.rcv_wup + self.rcv_wnd_adv).saturating_sub(self.rcv_nxt)
    }

    /// `tcp_update_pacing_rate()`: bytes per second (used by HyStart only).
    fn pacing_rate(&self) -> u64 {
        if self.srtt8 == 0 {
            return 0;
        }
        let ratio = if self.cwnd < self.ssthresh / 2 {
            200
        } else {
            120
        };
        let srtt8_us = (self.srtt8 / 1000).max(1);
        (self.mss as u64 * 80_000 * ratio * self.cwnd.max(self.packets_out) as u64) / srtt8_us
    }

    // ------------------------------------------------------------ RTT

    /// `tcp_rtt_estimator()` + `tcp_set_rto()`, in ns.
    fn rtt_estimator(&mut self, m: u64) {
        let m = m.max(1);
        let rto_min = self.cfg.min_rto;
        if self.srtt8 != 0 {
            let mut err = m as i64 - (self.srtt8 >> 3) as i64;
            self.srtt8 = (self.srtt8 as i64 + err).max(1) as u64;
            if err < 0 {
                err = -err;
                err -= (self.mdev4 >> 2) as i64;
                if err > 0 {
                    err >>= 3;
                }
            } else {
                err -= (self.mdev4 >> 2) as i64;
            }
            self.mdev4 = (self.mdev4 as i64 + err).max(0) as u64;
            if self.mdev4 > self.mdev_max4 {
                self.mdev_max4 = self.mdev4;
                if self.mdev_max4 > self.rttvar4 {
                    self.rttvar4 = self.mdev_max4;
                }
            }
            if self.snd_una > self.rtt_seq {
                if self.mdev_max4 < self.rttvar4 {
                    self.rttvar4 -= (self.rttvar4 - self.mdev_max4) >> 2;
                }
                self.rtt_seq = self.snd_nxt;
                self.mdev_max4 = rto_min;
            }
        } else {
            self.srtt8 = m << 3;
            self.mdev4 = m << 1;
            self.rttvar4 = self.mdev4.max(rto_min);
            self.mdev_max4 = self.rttvar4;
            self.rtt_seq = self.snd_nxt;
        }
        self.rto = ((self.srtt8 >> 3) + self.rttvar4).min(TCP_RTO_MAX);
        if self.min_rtt == 0 || m < self.min_rtt {
            self.min_rtt = m;
        }
    }

    /// `tcp_ack_update_rtt()`: a valid sample also resets the backoff.
    fn ack_update_rtt(&mut self, sample: Option<u64>) {
        if let Some(m) = sample {
            self.rtt_estimator(m);
            self.backoff = 0;
        }
    }

    fn rearm_rto(&mut self, now: Nanos) {
        if self.packets_out == 0 && self.syn_tx == SynTx::None && !self.syn_outstanding() {
            self.rto_at = None;
        } else {
            self.rto_at = Some(now + self.rto);
        }
    }

    fn syn_outstanding(&self) -> bool {
        matches!(self.state, State::SynSent | State::SynReceived) && self.snd_una == 0
    }

    // ------------------------------------------------------------ input

    /// A segment arrived from the peer. Never panics on any input.
    pub fn on_segment(&mut self, now: Nanos, seg: &Segment) {
        self.run_timers(now);
        self.segs_in += 1;
        match self.state {
            State::Closed => {}
            State::Listen => self.rcv_listen(now, seg),
            State::SynSent => self.rcv_synsent(now, seg),
            _ => self.rcv_established(now, seg),
        }
    }

    fn rcv_listen(&mut self, now: Nanos, seg: &Segment) {
        if seg.has(flags::RST) || seg.has(flags::ACK) || !seg.has(flags::SYN) {
            return;
        }
        self.irs = seg.seq;
        self.have_irs = true;
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.negotiate(&seg.options, true);
        // `tcp_ecn_create_request`: a SYN with ECE and CWR asks for ECN.
        self.ecn_ok = seg.has(flags::ECE) && seg.has(flags::CWR);
        self.snd_wnd = seg.window as u64; // SYN windows are never scaled
        self.max_window = self.snd_wnd;
        if let Some((tsval, _)) = seg.options.timestamps {
            self.ts_recent = tsval;
        }
        self.state = State::SynReceived;
        self.syn_tx = SynTx::SynAck;
        self.syn_sent_at = now;
    }

    /// Option negotiation from the peer's SYN or SYN-ACK (`tcp_parse_options`,
    /// `tcp_sync_mss`).
    fn negotiate(&mut self, o: &TcpOptions, we_are_server: bool) {
        let peer_mss = o.mss.map(|m| m as u32).unwrap_or(TCP_MSS_DEFAULT).max(88);
        self.ts_ok = self.cfg.timestamps && o.timestamps.is_some();
        self.sack_ok = self.cfg.sack && o.sack_permitted;
        self.ws_ok = o.wscale.is_some();
        if self.ws_ok {
            self.snd_wscale = o.wscale.unwrap_or(0).min(14);
        } else {
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
        }
        let _ = we_are_server;
        let mut mss = self.cfg.mss.min(peer_mss);
        if self.ts_ok {
            mss = mss.saturating_sub(TS_OPTLEN);
        }
        self.mss = mss.max(48);
        // tcp_initialize_rcv_mss()
        self.rcv_mss = self
            .cfg
            .mss
            .min(peer_mss)
            .min(self.cfg.rcv_wnd / 2)
            .clamp(88, TCP_MSS_DEFAULT);
    }

    fn rcv_synsent(&mut self, now: Nanos, seg: &Segment) {
        let ack_ok = seg.has(flags::ACK) && seg.ack == self.snd_wire(1);
        if seg.has(flags::RST) {
            if ack_ok {
                self.state = State::Closed;
                self.clear_timers();
            }
            return;
        }
        if !seg.has(flags::SYN) || !ack_ok {
            return; // simultaneous open and bad ACKs are ignored
        }
        self.irs = seg.seq;
        self.have_irs = true;
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.negotiate(&seg.options, false);
        // `tcp_ecn_rcv_synack`: ECE without CWR on the SYN-ACK accepts ours.
        self.ecn_ok = self.cfg.ecn && seg.has(flags::ECE) && !seg.has(flags::CWR);
        if let Some((tsval, _)) = seg.options.timestamps {
            self.ts_recent = tsval;
        }
        self.snd_una = 1;
        self.rto_retransmits = 0;
        self.snd_wl1 = 0;
        self.snd_wnd = seg.window as u64;
        self.max_window = self.snd_wnd;
        self.syn_tx = SynTx::None;
        // RTT from the handshake (tcp_synack_rtt_meas / FLAG_SYN_ACKED)
        if !self.syn_retransmitted {
            self.ack_update_rtt(Some(now.saturating_sub(self.syn_sent_at)));
        } else {
            self.rto = self.cfg.initial_rto; // RFC 6298 5.7, approximately
        }
        self.backoff = 0;
        self.state = State::Established;
        self.established(now);
        self.ack_now = true;
        self.rto_at = None;
        if self.fin_queued {
            self.state = State::FinWait1;
        }
        // data on the SYN-ACK is not modelled (no TFO)
    }

    /// `tcp_init_transfer()`: cwnd and CC state at the start of data.
    fn established(&mut self, now: Nanos) {
        self.cwnd = self.cfg.initial_cwnd.max(1);
        self.cubic = cc::Cubic::new(self.cfg.hystart);
        self.cubic.hystart_reset(now, self.snd_nxt);
    }

    fn rcv_established(&mut self, now: Nanos, seg: &Segment) {
        let len = seg.payload_len as u64;
        let seq = self.rcv_abs(seg.seq);
        let fin = seg.has(flags::FIN);
        let end = seq + len as i64 + fin as i64;
        let rcv_wup = self.rcv_wup as i64;
        let win_right = (self.rcv_nxt + self.cur_rcv_window()) as i64;

        // A retransmitted SYN (our SYN-ACK was lost): answer it again.
        if seg.has(flags::SYN) {
            if self.state == State::SynReceived && seg.seq == self.irs && !seg.has(flags::ACK) {
                self.syn_tx = SynTx::SynAck;
            } else {
                self.ack_now = true;
            }
            return;
        }
        // tcp_sequence(): acceptable if it touches [rcv_wup, rcv_nxt + window]
        let acceptable = end >= rcv_wup && seq <= win_right.max(self.rcv_nxt as i64);
        if seg.has(flags::RST) {
            if acceptable {
                self.state = State::Closed;
                self.clear_timers();
                self.rtx.clear();
                self.packets_out = 0;
                self.sacked_out = 0;
                self.lost_out = 0;
                self.retrans_out = 0;
                self.lost_pending = 0;
            }
            return;
        }
        if !acceptable {
            self.ack_now = true; // tcp_send_dupack
            return;
        }
        if !seg.has(flags::ACK) {
            return;
        }
        // Timestamps: tcp_store_ts_recent() when the segment covers rcv_wup.
        if self.ts_ok {
            if let Some((tsval, _)) = seg.options.timestamps {
                if seq <= rcv_wup {
                    self.ts_recent = tsval;
                }
            }
        }
        if self.state == State::SynReceived {
            if seg.ack == self.snd_wire(1) {
                self.snd_una = 1;
                self.rto_retransmits = 0;
                self.syn_tx = SynTx::None;
                if !self.syn_retransmitted {
                    self.ack_update_rtt(Some(now.saturating_sub(self.syn_sent_at)));
                }
                self.backoff = 0;
                self.snd_wnd = (seg.window as u64) << self.snd_wscale;
                self.max_window = self.max_window.max(self.snd_wnd);
                self.snd_wl1 = seq.max(0) as u64;
                self.state = if self.fin_queued {
                    State::FinWait1
                } else {
                    State::Established
                };
                self.rto_at = None;
                self.established(now);
            } else {
                return;
            }
        }
        if !self.process_ack(now, seg, seq) {
            return;
        }
        if self.state == State::Closed {
            return;
        }
        if self.ecn_ok && len > 0 {
            // `tcp_ecn_accept_cwr`, then `tcp_ecn_check_ce`.
            if seg.has(flags::CWR) {
                self.ecn_demand_cwr = false;
            }
            if seg.ecn == ecn::CE {
                self.ce_received += 1;
                if !self.ecn_demand_cwr {
                    self.ecn_demand_cwr = true;
                    self.incr_quickack();
                }
                self.ack_now = true;
            }
        }
        if len > 0 || fin {
            self.process_data(now, seq, len, fin);
        }
    }

    /// `tcp_ack()`; `false` means the segment is to be discarded.
    fn process_ack(&mut self, now: Nanos, seg: &Segment, seq: i64) -> bool {
        let Some(ack) = self.snd_abs(seg.ack) else {
            return true;
        };
        if ack > self.snd_nxt {
            self.ack_now = true; // ACK of unsent data: discarded, answered
            return false;
        }
        if ack < self.snd_una {
            return true; // old ACK: ignored, data still processed
        }
        self.local_block = false;
        // `tcp_try_to_open` → `tcp_enter_cwr` on FLAG_ECE: once per window, in the Open or Disorder
        // state; loss recovery already reduces the window.
        if self.ecn_ok
            && seg.has(flags::ECE)
            && self.ca_state < CaState::Cwr
            && self.can_send_data()
        {
            self.ece_reductions += 1;
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
        }
        let prior_snd_una = self.snd_una;
        let prior_in_flight = self.in_flight();
        let mut flag_win_update = false;
        // tcp_ack_update_window()
        let nwin = (seg.window as u64) << self.snd_wscale;
        let seq_u = seq.max(0) as u64;
        if ack > self.snd_una
            || seq_u > self.snd_wl1
            || (seq_u == self.snd_wl1 && (nwin > self.snd_wnd || nwin == 0))
        {
            if self.snd_wnd != nwin {
                flag_win_update = true;
            }
            self.snd_wnd = nwin;
            self.snd_wl1 = seq_u;
            self.max_window = self.max_window.max(nwin);
        }

        // SACK processing (tcp_sacktag_write_queue)
        let mut newly_sacked = 0u32;
        let mut sack_rtt: Option<u64> = None;
        let mut ca_rtt_sent: Option<Nanos> = None;
        if self.sack_ok && !seg.options.sack_blocks.is_empty() {
            for &(l, r) in seg.options.sack_blocks.iter().take(4) {
                let (Some(s), Some(e)) = (self.snd_abs(l), self.snd_abs(r)) else {
                    continue;
                };
                if s >= e || s < ack.max(self.snd_una) || e > self.snd_nxt {
                    continue; // D-SACK or bogus
                }
                let i0 = self.rtx.partition_point(|t| t.start < s);
                let mut i = i0;
                while i < self.rtx.len() {
                    let t = &mut self.rtx[i];
                    if t.start >= e {
                        break;
                    }
                    if t.seq_end() <= e && !t.sacked {
                        t.sacked = true;
                        newly_sacked += 1;
                        if !t.ever_retrans {
                            let rtt = now.saturating_sub(t.sent_at);
                            sack_rtt = Some(sack_rtt.map_or(rtt, |x: u64| x.max(rtt)));
                            ca_rtt_sent = Some(ca_rtt_sent.map_or(t.sent_at, |x| x.max(t.sent_at)));
                        }
                        if t.lost {
                            t.lost = false;
                            self.lost_out -= 1;
                            if !t.retrans {
                                self.lost_pending -= 1;
                            }
                        }
                        if t.retrans {
                            t.retrans = false;
                            self.retrans_out -= 1;
                        }
                        self.sacked_out += 1;
                    }
                    i += 1;
                }
            }
        }

        // tcp_clean_rtx_queue()
        let mut acked_pkts = 0u32;
        let mut acked_sacked_before = 0u32;
        let mut seq_rtt: Option<u64> = None;
        let mut any_retrans_acked = false;
        let mut fin_acked = false;
        while let Some(t) = self.rtx.front() {
            if t.seq_end() > ack {
                break;
            }
            let t = self.rtx.pop_front().unwrap_or_else(|| unreachable!());
            acked_pkts += 1;
            self.packets_out -= 1;
            if t.sacked {
                self.sacked_out -= 1;
                acked_sacked_before += 1;
            }
            if t.lost {
                self.lost_out -= 1;
                if !t.retrans {
                    self.lost_pending -= 1;
                }
            }
            if t.retrans {
                self.retrans_out -= 1;
            }
            if t.ever_retrans {
                any_retrans_acked = true;
            } else if !t.sacked {
                if seq_rtt.is_none() {
                    seq_rtt = Some(now.saturating_sub(t.sent_at));
                }
                ca_rtt_sent = Some(ca_rtt_sent.map_or(t.sent_at, |x| x.max(t.sent_at)));
            }
            if t.fin {
                fin_acked = true;
            }
        }
        let snd_una_advanced = ack > self.snd_una;
        if snd_una_advanced {
            let data_end = ack.min(self.write_end);
            if data_end > self.snd_una {
                self.bytes_acked += data_end - self.snd_una.max(1);
            }
            self.snd_una = ack;
            self.probes_out = 0;
            self.rto_retransmits = 0;
        }
        // Partially acked head segment: trim it (tcp_trim_head).
        if let Some(t) = self.rtx.front_mut() {
            if t.start < ack && ack < t.end {
                t.start = ack;
            }
        }
        let data_acked = acked_pkts > 0;
        let delivered = (acked_pkts - acked_sacked_before) + newly_sacked;

        // RTT: seq_rtt, else SACK RTT, else the timestamp echo.
        let mut rtt = seq_rtt.or(sack_rtt);
        if rtt.is_none() && self.ts_ok && (data_acked && any_retrans_acked) {
            if let Some((_, tsecr)) = seg.options.timestamps {
                let d = Self::ts_now(now).wrapping_sub(tsecr);
                if tsecr != 0 && d < 0x7fff_ffff {
                    rtt = Some((d.max(1) as u64) * MS);
                }
            }
        }
        self.ack_update_rtt(rtt);
        let ca_rtt_us = ca_rtt_sent.map(|s| now.saturating_sub(s) / 1000);
        if data_acked && self.cfg.cc == CongestionControl::Cubic {
            if let Some(ss) = self.cubic.acked(
                now,
                ca_rtt_us,
                self.cwnd,
                self.ssthresh,
                self.snd_una,
                self.snd_nxt,
                self.pacing_rate(),
            ) {
                self.ssthresh = ss;
            }
        }

        // Reno "SACKs": duplicate ACKs count as sacked segments.
        let is_dup = !snd_una_advanced
            && seg.payload_len == 0
            && !seg.has(flags::FIN)
            && !flag_win_update
            && self.packets_out > 0;
        if is_dup {
            self.dupacks_in += 1;
        }
        if !self.sack_ok {
            if snd_una_advanced && self.sacked_out > 0 {
                // tcp_remove_reno_sacks()
                let dec = acked_pkts.saturating_sub(1).min(self.sacked_out);
                self.sacked_out -= dec;
                if self.ca_state != CaState::Recovery {
                    self.sacked_out = 0;
                }
            }
            if is_dup {
                // tcp_add_reno_sack(): capped so packets_out > sacked_out
                self.sacked_out = (self.sacked_out + 1).min(self.packets_out.saturating_sub(1));
            }
            self.sacked_out = self.sacked_out.min(self.packets_out);
        }

        if snd_una_advanced {
            if self.packets_out > 0 {
                self.rearm_rto(now);
            } else {
                self.rto_at = None;
            }
        }

        if fin_acked {
            self.on_fin_acked();
        }

        // tcp_fastretrans_alert()
        let dubious = is_dup || newly_sacked > 0 || self.ca_state != CaState::Open;
        let mut newly_lost = 0;
        if dubious {
            newly_lost = self.fastretrans_alert(now, prior_snd_una, is_dup, snd_una_advanced);
        }
        // tcp_cong_control()
        if self.in_cwnd_reduction() {
            self.cwnd_reduction(delivered, newly_lost, snd_una_advanced);
        } else if data_acked {
            self.cong_avoid(now, delivered.max(1));
        }
        let _ = prior_in_flight;
        if self.packets_out == 0 && self.snd_nxt < self.send_limit_end() && self.snd_wnd == 0 {
            self.arm_probe(now);
        }
        true
    }

    fn on_fin_acked(&mut self) {
        match self.state {
            State::FinWait1 => self.state = State::FinWait2,
            State::Closing => {
                self.state = State::TimeWait;
                self.clear_timers();
            }
            State::LastAck => {
                self.state = State::Closed;
                self.clear_timers();
            }
            _ => {}
        }
    }

    /// `tcp_fastretrans_alert()`; returns the number of segments newly marked lost.
    fn fastretrans_alert(
        &mut self,
        now: Nanos,
        prior_snd_una: u64,
        is_dup: bool,
        una_advanced: bool,
    ) -> u32 {
        let _ = prior_snd_una;
        // D. exit conditions
        match self.ca_state {
            CaState::Cwr if self.snd_una > self.high_seq => {
                self.end_cwnd_reduction();
                self.ca_state = CaState::Open;
            }
            CaState::Recovery if self.snd_una >= self.high_seq => {
                if !self.sack_ok {
                    self.sacked_out = 0;
                }
                self.end_cwnd_reduction();
                self.ca_state = CaState::Open;
            }
            CaState::Loss if self.snd_una >= self.high_seq => {
                self.ca_state = CaState::Open;
            }
            _ => {}
        }
        let mut newly_lost = 0;
        match self.ca_state {
            CaState::Recovery => {
                if una_advanced && !self.sack_ok {
                    // NewReno partial ACK: the new head is lost
                    newly_lost += self.mark_head_lost();
                }
                if self.sack_ok {
                    newly_lost += self.mark_lost_sack();
                }
            }
            CaState::Loss => {
                if self.sack_ok {
                    newly_lost += self.mark_lost_sack();
                }
            }
            _ => {
                if self.sack_ok {
                    newly_lost += self.mark_lost_sack();
                }
                // tcp_time_to_recover()
                let time_to_recover = self.lost_out > 0 || self.sacked_out + 1 > REORDERING;
                if !time_to_recover {
                    // tcp_try_to_open()
                    if self.ca_state != CaState::Cwr {
                        self.ca_state = if self.sacked_out > 0 || self.retrans_out > 0 {
                            CaState::Disorder
                        } else {
                            CaState::Open
                        };
                    }
                    return newly_lost;
                }
                self.enter_recovery(now);
                newly_lost += self.mark_head_lost();
                if self.sack_ok {
                    newly_lost += self.mark_lost_sack();
                }
            }
        }
        let _ = is_dup;
        newly_lost
    }

    /// `tcp_enter_recovery()` + `tcp_init_cwnd_reduction()`.
    fn enter_recovery(&mut self, _now: Nanos) {
        self.fast_retransmits += 1;
        if self.ca_state < CaState::Cwr {
            self.init_cwnd_reduction();
        }
        self.ca_state = CaState::Recovery;
    }

    fn init_cwnd_reduction(&mut self) {
        // `tcp_ecn_queue_cwr`: tell an ECN peer its echo was heard.
        if self.ecn_ok {
            self.ecn_queue_cwr = true;
        }
        self.high_seq = self.snd_nxt;
        self.cwnd_cnt = 0;
        self.prior_cwnd = self.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.ssthresh = self.ca_ssthresh();
    }

    /// The CC module's `ssthresh()`.
    fn ca_ssthresh(&mut self) -> u32 {
        match self.cfg.cc {
            CongestionControl::Reno => (self.cwnd >> 1).max(2),
            CongestionControl::Cubic => self.cubic.ssthresh(self.cwnd),
        }
    }

    /// `tcp_cwnd_reduction()`: Proportional Rate Reduction.
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, una_advanced: bool) {
        if newly_acked_sacked == 0 || self.prior_cwnd == 0 {
            return;
        }
        let in_flight = self.in_flight() as i64;
        let delta = self.ssthresh as i64 - in_flight;
        self.prr_delivered += newly_acked_sacked;
        let mut sndcnt: i64;
        if delta < 0 {
            let dividend =
                self.ssthresh as u64 * self.prr_delivered as u64 + self.prior_cwnd as u64 - 1;
            sndcnt = (dividend / self.prior_cwnd as u64) as i64 - self.prr_out as i64;
        } else {
            sndcnt =
                (self.prr_delivered as i64 - self.prr_out as i64).max(newly_acked_sacked as i64);
            if una_advanced && newly_lost == 0 {
                sndcnt += 1;
            }
            sndcnt = sndcnt.min(delta);
        }
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.cwnd = (in_flight + sndcnt).clamp(1, u32::MAX as i64) as u32;
    }

    /// `tcp_end_cwnd_reduction()`.
    fn end_cwnd_reduction(&mut self) {
        if self.ssthresh < TCP_INFINITE_SSTHRESH {
            self.cwnd = self.ssthresh;
        }
    }

    /// `tcp_cong_avoid()`: the CC module's `cong_avoid`, only when cwnd-limited.
    fn cong_avoid(&mut self, now: Nanos, acked: u32) {
        // tcp_is_cwnd_limited()
        let limited =
            self.is_cwnd_limited || (self.in_slow_start() && self.cwnd < 2 * self.max_packets_out);
        if !limited {
            return;
        }
        let mut acked = acked;
        if self.in_slow_start() {
            acked = cc::tcp_slow_start(&mut self.cwnd, self.ssthresh, acked);
            if acked == 0 {
                return;
            }
        }
        match self.cfg.cc {
            CongestionControl::Reno => {
                let w = self.cwnd;
                cc::tcp_cong_avoid_ai(&mut self.cwnd, &mut self.cwnd_cnt, w, acked);
            }
            CongestionControl::Cubic => {
                self.cubic.update(now, self.cwnd, acked);
                let w = self.cubic.cnt;
                cc::tcp_cong_avoid_ai(&mut self.cwnd, &mut self.cwnd_cnt, w, acked);
            }
        }
    }

    fn mark_lost(&mut self, i: usize) -> bool {
        let t = &mut self.rtx[i];
        if t.sacked || t.lost {
            return false;
        }
        t.lost = true;
        self.lost_out += 1;
        if t.retrans {
            // A retransmission counted lost is no longer in flight.
            t.retrans = false;
            self.retrans_out -= 1;
        }
        self.lost_pending += 1;
        true
    }

    /// Mark the head segment lost (the fast retransmit).
    fn mark_head_lost(&mut self) -> u32 {
        if self.rtx.is_empty() {
            return 0;
        }
        if self.rtx[0].retrans {
            return 0; // already retransmitted in this recovery
        }
        self.mark_lost(0) as u32
    }

    /// RFC 6675 `IsLost()`: un-SACKed segments with at least dupthresh
    /// SACKed segments above them. Retransmitted segments are left alone
    /// (their loss is found by the RTO, as RACK is not modelled).
    fn mark_lost_sack(&mut self) -> u32 {
        if self.sacked_out < REORDERING {
            return 0;
        }
        let mut above = 0u32;
        let mut n = 0;
        for i in (0..self.rtx.len()).rev() {
            let t = &self.rtx[i];
            if t.sacked {
                above += 1;
                continue;
            }
            if above >= REORDERING {
                if t.lost || t.retrans || t.ever_retrans {
                    // everything below was already handled in an earlier pass
                    if t.lost && !t.retrans {
                        continue;
                    }
                    continue;
                }
                if self.mark_lost(i) {
                    n += 1;
                }
            }
        }
        n
    }

    /// Receive data (`tcp_data_queue`), and schedule the ACK (`__tcp_ack_snd_check`).
    fn process_data(&mut self, now: Nanos, seq: i64, len: u64, fin: bool) {
        if self.fin_received {
            // Anything after the FIN: just acknowledge.
            self.ack_now = true;
            return;
        }
        let rcv_nxt = self.rcv_nxt as i64;
        let data_end = seq + len as i64;
        if len > 0 {
            // tcp_measure_rcv_mss()
            if len as u32 >= self.rcv_mss {
                self.rcv_mss = (len as u32).min(self.cfg.mss);
            }
            // tcp_event_data_recv(): the first data starts quickack mode
            if !self.first_data_seen {
                self.first_data_seen = true;
                self.incr_quickack();
            }
        }
        let win_right = (self.rcv_nxt + self.cur_rcv_window().max(self.free_space())) as i64;
        if data_end <= rcv_nxt && len > 0 {
            // Duplicate: tcp_data_queue out_of_window → quickack + dupack.
            self.incr_quickack();
            self.ack_now = true;
            return;
        }
        let s = seq.max(rcv_nxt);
        let e = data_end.min(win_right);
        let had_ooo = !self.ooo.is_empty();
        if s < e {
            if s == rcv_nxt {
                // in order
                let mut new_nxt = e as u64;
                // merge the out-of-order queue (tcp_ofo_queue)
                while let Some(&(os, oe)) = self.ooo.first() {
                    if os > new_nxt {
                        break;
                    }
                    new_nxt = new_nxt.max(oe);
                    self.ooo.remove(0);
                }
                let got = new_nxt - self.rcv_nxt;
                self.rcv_nxt = new_nxt;
                self.deliver(got);
                self.sack_recent.retain(|&(_, be)| be > new_nxt);
                if had_ooo {
                    // RFC 5681 4.2: ACK at once when a gap is filled
                    self.ack_now = true;
                }
            } else {
                // out of order: queue, SACK, immediate ACK (tcp_data_queue_ofo)
                self.ooo_insert(s as u64, e as u64);
                self.incr_quickack();
                self.ack_now = true;
            }
        } else if len > 0 {
            // Beyond the window: drop, ACK at once.
            self.ack_now = true;
        }
        if fin {
            let fin_seq = data_end.max(0) as u64;
            self.peer_fin = Some(fin_seq);
        }
        if let Some(f) = self.peer_fin {
            if self.rcv_nxt == f && !self.fin_received {
                self.rcv_nxt += 1;
                self.fin_received = true;
                self.ack_now = true; // tcp_fin(): ACK the FIN at once (model)
                self.state = match self.state {
                    State::Established | State::SynReceived => State::CloseWait,
                    State::FinWait1 => State::Closing,
                    State::FinWait2 => {
                        self.clear_timers();
                        State::TimeWait
                    }
                    s => s,
                };
                // A FIN_WAIT1 whose FIN was acked by this very segment is
                // already in FIN_WAIT2 and goes to TIME_WAIT above.
            }
        }
        if len > 0 && !self.ack_now {
            self.ack_pending = true;
            // __tcp_ack_snd_check()
            let more_than_one = self.rcv_nxt - self.rcv_wup > self.rcv_mss as u64;
            if more_than_one || self.quick > 0 || !self.cfg.delayed_ack {
                self.ack_now = true;
            } else if self.delack_at.is_none() {
                self.delack_at = Some(now + TCP_DELACK_MIN);
            }
        }
    }

    fn deliver(&mut self, got: u64) {
        // Sequence space counts payload only here (FIN handled separately).
        self.bytes_delivered += got;
        if self.autoread {
            self.bytes_read += got;
        } else {
            self.unread += got;
        }
    }

    fn incr_quickack(&mut self) {
        let mut q = self.cfg.rcv_wnd / (2 * self.rcv_mss.max(1));
        if q == 0 {
            q = 2;
        }
        q = q.min(TCP_MAX_QUICKACKS);
        if q > self.quick {
            self.quick = q;
        }
    }

    fn ooo_insert(&mut self, s: u64, e: u64) {
        // merge into the sorted, disjoint interval list
        let mut ns = s;
        let mut ne = e;
        let mut out = Vec::with_capacity(self.ooo.len() + 1);
        let mut placed = false;
        for &(a, b) in &self.ooo {
            if b < ns {
                out.push((a, b));
            } else if a > ne {
                if !placed {
                    out.push((ns, ne));
                    placed = true;
                }
                out.push((a, b));
            } else {
                ns = ns.min(a);
                ne = ne.max(b);
            }
        }
        if !placed {
            out.push((ns, ne));
        }
        self.ooo = out;
        // tcp_sack_new_ofo_skb(): the block holding this segment goes first
        self.sack_recent.retain(|&(a, b)| b < ns || a > ne);
        self.sack_recent.insert(0, (ns, ne));
        self.sack_recent.truncate(4);
    }

    // ------------------------------------------------------------ timers

    fn run_timers(&mut self, now: Nanos) {
        if let Some(t) = self.delack_at {
            if t <= now {
                self.delack_at = None;
                if self.ack_pending {
                    self.ack_now = true;
                }
            }
        }
        if let Some(t) = self.probe_at {
            if t <= now {
                self.probe_at = None;
                self.local_block = false;
                self.probe_timer(now);
            }
        }
        if let Some(t) = self.rto_at {
            if t <= now {
                self.rto_at = None;
                self.local_block = false;
                self.retransmit_timer(now);
            }
        }
    }

    /// `tcp_retransmit_timer()`.
    fn retransmit_timer(&mut self, now: Nanos) {
        match self.state {
            State::SynSent => {
                self.syn_tx = SynTx::Syn;
                self.syn_retransmitted = true;
                self.retransmits += 1;
                self.rto_retransmits += 1;
                self.backoff += 1;
                self.rto = (self.rto * 2).min(TCP_RTO_MAX);
                return;
            }
            State::SynReceived if self.snd_una == 0 => {
                self.syn_tx = SynTx::SynAck;
                self.syn_retransmitted = true;
                self.retransmits += 1;
                self.rto_retransmits += 1;
                self.backoff += 1;
                self.rto = (self.rto * 2).min(TCP_RTO_MAX);
                return;
            }
            _ => {}
        }
        if self.packets_out == 0 {
            return;
        }
        self.timeouts += 1;
        self.enter_loss();
        // tcp_update_rto_stats()
        self.rto_retransmits += 1;
        self.backoff += 1;
        // The head is retransmitted now (it is lost; cwnd = 1 allows it);
        // the timer is re-armed with the doubled RTO when it leaves.
        self.rto = (self.rto * 2).min(TCP_RTO_MAX);
        let _ = now;
    }

    /// `tcp_enter_loss()`, called by the retransmission timer before `rto_retransmits` counts this
    /// expiry.
    fn enter_loss(&mut self) {
        // tcp_timeout_mark_lost(): every un-SACKed segment is lost (a lost retransmission is lost again)
        for i in 0..self.rtx.len() {
            if self.rtx[i].lost && self.rtx[i].retrans {
                self.rtx[i].retrans = false;
                self.retrans_out -= 1;
                self.lost_pending += 1;
            } else {
                self.mark_lost(i);
            }
        }
        // Reduce ssthresh unless it was already reduced in this window: a repeated timeout in the same
        // Loss episode (snd_una has not moved since the last one) keeps it.
        if self.ca_state <= CaState::Disorder
            || self.high_seq <= self.snd_una
            || (self.ca_state == CaState::Loss && self.rto_retransmits == 0)
        {
            self.prior_cwnd = self.cwnd;
            self.ssthresh = self.ca_ssthresh();
        }
        self.cwnd = self.in_flight() + 1;
        self.cwnd_cnt = 0;
        if self.cfg.cc == CongestionControl::Cubic {
            // cubictcp_state(TCP_CA_Loss)
            self.cubic.reset();
            let nxt = self.snd_nxt;
            self.cubic.hystart_reset(0, nxt);
        }
        if !self.sack_ok {
            self.sacked_out = 0;
        }
        self.ca_state = CaState::Loss;
        self.high_seq = self.snd_nxt;
        // tcp_ecn_queue_cwr(): an ECN peer hears of the reduction on the next new data.
        if self.ecn_ok {
            self.ecn_queue_cwr = true;
        }
    }

    /// The zero-window probe timer (`tcp_probe_timer`).
    fn probe_timer(&mut self, now: Nanos) {
        if self.packets_out > 0 || self.snd_nxt >= self.send_limit_end() {
            self.probes_out = 0;
            return;
        }
        self.probe_pending = true;
        self.probes_out += 1;
        let _ = now;
    }

    fn arm_probe(&mut self, now: Nanos) {
        if self.probe_at.is_none() {
            let base = self.rto.max(self.cfg.min_rto);
            let when = base
                .saturating_mul(1u64 << self.probes_out.min(20))
                .min(TCP_RTO_MAX);
            self.probe_at = Some(now + when);
        }
    }

    // ------------------------------------------------------------ output

    /// End of what may be sent: written data (+ the FIN if closed).
    fn send_limit_end(&self) -> u64 {
        self.write_end + self.fin_queued as u64
    }

    fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::LastAck
                | State::Closing
        )
    }

    /// Build a segment carrying our current ACK state (`tcp_transmit_skb`).
    fn build(&mut self, now: Nanos, seq_abs: u64, len: u32, fl: u8) -> Segment {
        let syn = fl & flags::SYN != 0;
        let mut options = TcpOptions::default();
        if syn {
            options.mss = Some(self.cfg.mss.min(65535) as u16);
            let server = self.have_irs;
            if self.cfg.timestamps && (!server || self.ts_ok) {
                options.timestamps =
                    Some((Self::ts_now(now), if server { self.ts_recent } else { 0 }));
            }
            if self.cfg.sack && (!server || self.sack_ok) {
                options.sack_permitted = true;
            }
            if !server || self.ws_ok {
                options.wscale = Some(self.rcv_wscale);
            }
        } else {
            if self.ts_ok {
                options.timestamps = Some((Self::ts_now(now), self.ts_recent));
            }
            if self.sack_ok && !self.sack_recent.is_empty() {
                let max = if self.ts_ok { 3 } else { 4 };
                options.sack_blocks = self
                    .sack_recent
                    .iter()
                    .take(max)
                    .map(|&(a, b)| (self.rcv_wire(a), self.rcv_wire(b)))
                    .collect();
            }
        }
        let mut flags_out = fl;
        if syn {
            if self.have_irs {
                if self.ecn_ok {
                    flags_out |= flags::ECE; // SYN-ACK accepting ECN
                }
            } else if self.cfg.ecn {
                flags_out |= flags::ECE | flags::CWR; // SYN asking for it
            }
        } else if self.ecn_ok && self.ecn_demand_cwr {
            flags_out |= flags::ECE;
        }
        let window;
        if self.have_irs {
            flags_out |= flags::ACK;
            let win = self.select_window_bytes();
            if syn {
                window = win.min(65535) as u16;
                self.rcv_wnd_adv = window as u64;
            } else {
                window = (win >> self.rcv_wscale).min(65535) as u16;
                self.rcv_wnd_adv = (window as u64) << self.rcv_wscale;
            }
            // tcp_event_ack_sent()
            if self.ack_pending && self.quick > 0 {
                self.quick -= 1;
            }
            self.rcv_wup = self.rcv_nxt;
            self.ack_pending = false;
            self.ack_now = false;
            self.delack_at = None;
        } else {
            window = self.select_window_bytes().min(65535) as u16;
        }
        self.segs_out += 1;
        Segment {
            seq: self.snd_wire(seq_abs),
            ack: if self.have_irs {
                self.rcv_wire(self.rcv_nxt)
            } else {
                0
            },
            flags: flags_out,
            window,
            payload_len: len,
            options,
            ecn: ecn::NOT_ECT,
        }
    }

    /// What to send now; call until `None` after every event. Due timers
    /// fire here.
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Segment> {
        self.run_timers(now);
        if self.state == State::Closed {
            return None;
        }
        // SYN / SYN-ACK
        match self.syn_tx {
            SynTx::Syn => {
                self.syn_tx = SynTx::None;
                self.syn_sent_at = now;
                self.snd_nxt = self.snd_nxt.max(1);
                self.rto_at = Some(now + self.rto);
                return Some(self.build(now, 0, 0, flags::SYN));
            }
            SynTx::SynAck => {
                self.syn_tx = SynTx::None;
                self.syn_sent_at = now;
                self.snd_nxt = self.snd_nxt.max(1);
                self.rto_at = Some(now + self.rto);
                return Some(self.build(now, 0, 0, flags::SYN));
            }
            SynTx::None => {}
        }
        if matches!(
            self.state,
            State::Listen | State::SynSent | State::SynReceived
        ) {
            return None;
        }
        if !self.local_block && !self.tsq_throttled && self.can_send_data() {
            if self.probe_pending {
                // tcp_send_probe0() → tcp_write_wakeup(): send what fits in
                // a non-zero window, else a probe with an old sequence number.
                self.probe_pending = false;
                let room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
                if room > 0 {
                    if let Some(seg) = self.send_new(now, true) {
                        return Some(seg);
                    }
                } else if self.snd_nxt < self.send_limit_end() {
                    self.zwp_sent += 1;
                    let seq = self.snd_una.saturating_sub(1);
                    let seg = self.build(now, seq, 0, 0);
                    self.arm_probe(now);
                    return Some(seg);
                }
            }
            if let Some(seg) = self.retransmit_lost(now) {
                return Some(seg);
            }
            if let Some(seg) = self.send_new(now, false) {
                return Some(seg);
            }
        }
        if self.ack_now && self.have_irs {
            return Some(self.build(now, self.snd_nxt, 0, 0));
        }
        None
    }

    /// `tcp_xmit_retransmit_queue()`: lost segments first, within cwnd.
    fn retransmit_lost(&mut self, now: Nanos) -> Option<Segment> {
        if self.lost_pending == 0 || self.in_flight() >= self.cwnd {
            return None;
        }
        let i = self
            .rtx
            .iter()
            .position(|t| t.lost && !t.retrans && !t.sacked)?;
        let t = &mut self.rtx[i];
        t.retrans = true;
        t.ever_retrans = true;
        t.sent_at = now;
        let (start, len, fin) = (t.start, t.len(), t.fin);
        self.retrans_out += 1;
        self.lost_pending -= 1;
        if self.in_cwnd_reduction() {
            self.prr_out += 1;
        }
        self.retransmits += 1;
        self.bytes_retrans += len as u64;
        self.bytes_sent += len as u64;
        if len > 0 {
            self.data_segs_out += 1;
        }
        if i == 0 || self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
        let fl = if fin { flags::FIN } else { 0 };
        Some(self.build(now, start, len, fl))
    }

    /// `tcp_write_xmit()`: new data within cwnd and the peer's window.
    /// `wakeup` (`tcp_write_wakeup`) sends whatever fits in the window.
    fn send_new(&mut self, now: Nanos, wakeup: bool) -> Option<Segment> {
        let limit = self.send_limit_end();
        if self.snd_nxt >= limit || self.fin_sent {
            return None;
        }
        let avail = self.write_end.saturating_sub(self.snd_nxt);
        let in_flight = self.in_flight();
        if in_flight >= self.cwnd && !wakeup {
            self.cwnd_validate(true);
            return None;
        }
        let wnd_end = self.snd_una + self.snd_wnd;
        let room = wnd_end.saturating_sub(self.snd_nxt);
        let mss = self.mss as u64;
        let mut len = avail.min(mss);
        let fin_here = self.fin_queued && self.snd_nxt + len == self.write_end;
        if len > room {
            // tcp_snd_wnd_test() fails; send what fits only if it is at
            // least half the largest window seen (sender SWS avoidance).
            if room > 0 && (wakeup || room >= self.max_window / 2) {
                len = room;
            } else {
                if self.packets_out == 0 {
                    self.arm_probe(now);
                }
                return None;
            }
        }
        let fin = fin_here && self.snd_nxt + len == self.write_end;
        if len < mss && len > 0 && !fin && !wakeup {
            // Nagle, Minshall's variant (tcp_nagle_check / tcp_minshall_check)
            if self.snd_sml > self.snd_una && self.packets_out > 0 {
                return None;
            }
        }
        if len == 0 && !fin {
            return None;
        }
        let start = self.snd_nxt;
        let end = start + len;
        self.snd_nxt = end + fin as u64;
        if fin {
            self.fin_sent = true;
        }
        if len < mss && len > 0 {
            self.snd_sml = end;
        }
        let was_empty = self.packets_out == 0;
        self.rtx.push_back(TxSeg {
            start,
            end,
            fin,
            sent_at: now,
            ever_retrans: false,
            sacked: false,
            lost: false,
            retrans: false,
        });
        self.packets_out += 1;
        if self.in_cwnd_reduction() {
            self.prr_out += 1;
        }
        self.bytes_sent += len;
        if len > 0 {
            self.data_segs_out += 1;
        }
        self.probe_at = None;
        self.probes_out = 0;
        if was_empty || self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
        let limited = self.in_flight() >= self.cwnd;
        self.cwnd_validate(limited);
        let mut fl = if fin { flags::FIN } else { 0 };
        if len > 0 && self.snd_nxt >= self.write_end {
            fl |= flags::PSH; // tcp_push() marks the last segment of a write
        }
        // `tcp_ecn_send`: new data is ECT(0), and carries a queued CWR (retransmissions and pure ACKs
        // are Not-ECT).
        if self.ecn_ok && len > 0 && self.ecn_queue_cwr {
            fl |= flags::CWR;
            self.ecn_queue_cwr = false;
        }
        let mut seg = self.build(now, start, len as u32, fl);
        if self.ecn_ok && len > 0 {
            seg.ecn = ecn::ECT0;
        }
        Some(seg)
    }

    /// `tcp_cwnd_validate()`: remember whether the window was used.
    fn cwnd_validate(&mut self, is_cwnd_limited: bool) {
        if self.snd_una >= self.cwnd_usage_seq
            || is_cwnd_limited
            || (!self.is_cwnd_limited && self.packets_out > self.max_packets_out)
        {
            self.is_cwnd_limited = is_cwnd_limited;
            self.max_packets_out = self.packets_out;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// The local qdisc refused `seg` (`NET_XMIT_DROP`): `tcp_enter_cwr()`,
    /// the segment is taken back (or marked lost if later data already
    /// left), and sending pauses until the next ACK or timer.
    /// TCP small queues (`tcp_small_queue_check`): the driver says whether the host's queues below this
    /// socket (qdisc and NIC) already hold as much of its data as Linux allows (`tsq_limit`); while they
    /// do, `poll_transmit` sends no data, only ACKs and control segments.
    pub fn set_tsq_throttled(&mut self, throttled: bool) {
        self.tsq_throttled = throttled;
    }

    /// The bytes (of skb truesize) Linux lets a socket keep in the queues below it,
    /// `tcp_small_queue_check`: `max(2 × truesize, pacing rate >> 10)` — about a millisecond of data at the
    /// pacing rate (`sk_pacing_shift` = 10) — at most `tcp_limit_output_bytes` (1 MiB). The pacing rate is
    /// `tcp_update_pacing_rate`'s, unlimited before the first RTT sample. `truesize` is that of one
    /// full-sized segment's skb, which the driver knows.
    pub fn tsq_limit(&self, truesize: u64) -> u64 {
        const TCP_LIMIT_OUTPUT_BYTES: u64 = 16 * 65536;
        let rate = match self.pacing_rate() {
            0 => u64::MAX,
            r => r,
        };
        (rate >> 10).max(2 * truesize).min(TCP_LIMIT_OUTPUT_BYTES)
    }

    /// Payload bytes delivered in order to the application, without building the whole [`TcpStats`].
    pub fn bytes_delivered(&self) -> u64 {
        self.bytes_delivered
    }

    /// Segments sent and not yet acknowledged (`packets_out`), without building the whole [`TcpStats`].
    pub fn packets_out(&self) -> u32 {
        self.packets_out
    }

    /// Bytes the application wrote that are not acknowledged yet (the send buffer's fill).
    pub fn unacked_written(&self) -> u64 {
        self.written.saturating_sub(self.bytes_acked)
    }

    /// `tcp_small_queue_check` always lets a segment go when the retransmission queue holds at most one.
    pub fn tsq_exempt(&self) -> bool {
        self.packets_out <= 1
    }

    /// The local qdisc queued a segment but answered `NET_XMIT_CN`: the segment counts as sent, and the
    /// window is reduced as `tcp_enter_cwr` does.
    pub fn on_local_congestion(&mut self, _now: Nanos) {
        if self.ca_state < CaState::Cwr && self.can_send_data() {
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
        }
    }

    pub fn on_local_drop(&mut self, now: Nanos, seg: &Segment) {
        self.local_drops += 1;
        self.local_block = true;
        if seg.payload_len > 0 || seg.has(flags::FIN) {
            if let Some(start) = self.snd_abs(seg.seq) {
                if let Ok(i) = self.rtx.binary_search_by(|t| t.start.cmp(&start)) {
                    let last = i + 1 == self.rtx.len();
                    let t = &self.rtx[i];
                    let never_retrans = !t.ever_retrans;
                    if last && never_retrans && !t.sacked {
                        // Not sent: roll back snd_nxt.
                        let t = self.rtx.pop_back().unwrap_or_else(|| unreachable!());
                        self.packets_out -= 1;
                        self.snd_nxt = t.start;
                        if t.fin {
                            self.fin_sent = false;
                        }
                        self.bytes_sent = self.bytes_sent.saturating_sub(t.len() as u64);
                        self.data_segs_out = self.data_segs_out.saturating_sub(1);
                        if self.prr_out > 0 && self.in_cwnd_reduction() {
                            self.prr_out -= 1;
                        }
                    } else if self.rtx[i].retrans {
                        // A refused retransmission is still to be sent.
                        self.rtx[i].retrans = false;
                        self.retrans_out -= 1;
                        self.lost_pending += 1;
                    } else {
                        self.mark_lost(i);
                    }
                }
            }
        }
        if self.ca_state < CaState::Cwr && self.can_send_data() {
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
        }
        // If nothing is in flight no ACK will come: retry on a timer.
        if self.packets_out == 0 {
            self.rto_at = None;
            self.probe_at = Some(now + self.cfg.min_rto);
        } else if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rto);
        }
    }
}
