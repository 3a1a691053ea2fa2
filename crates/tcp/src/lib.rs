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
//!   `write(bytes)` (a blocking write: its bytes enter the send buffer as it
//!   takes them) and `close()` may be called at once, before the handshake
//!   completes: the data and the FIN follow it. An application that writes as
//!   iperf3 does calls `try_write(now, n)` (non-blocking: returns what was
//!   copied) whenever `writable()` holds.
//! * After every `on_segment` and at every `poll_at()` instant, call
//!   `poll_transmit(now)` until it returns `None`; due timers (RTO, SYN
//!   retransmission, delayed ACK, zero-window probe) fire inside it.
//! * `on_local_drop(now, &seg)` takes the refused segment so the model knows
//!   which one was not sent (the local qdisc's `NET_XMIT_DROP`); hand each
//!   segment to the qdisc before polling for the next, as `tcp_write_xmit`
//!   does, so that a refused one is the last built and is taken back whole;
//!   `on_local_congestion(now)` is `NET_XMIT_CN`: the segment counts as sent
//!   and the window is reduced (`tcp_enter_cwr`).
//! * Receivers read automatically; `set_autoread(now, false)` and `read(now, n)` model
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
//!   (`tcp_sacktag_write_queue`) and **RACK-TLP** (RFC 8985, Linux's default
//!   `tcp_recovery = 1`, `tcp_early_retrans = 3`; `rack.rs`): a segment is
//!   lost once one sent after it was delivered and a reordering window
//!   (min RTT / 4, or none once recovering or three segments are SACKed)
//!   has passed, retransmissions included (`TCPLostRetransmit`); recovery
//!   starts when a loss is proven; a tail loss draws a probe after about
//!   two RTTs (`TCPLossProbes`, `TCPLossProbeRecovery`), not an RTO. With
//!   `Config::rack` off, the dupthresh rule: recovery when three segments
//!   are SACKed above the hole (`tcp_time_to_recover`: `sacked_out + 1 >
//!   reordering`, reordering = 3), a segment lost once three SACKed
//!   segments lie above it (RFC 6675 `IsLost`, which is what Linux's
//!   non-RACK `tcp_mark_head_lost` amounts to). Without SACK, NewReno: three
//!   duplicate ACKs count as "reno SACKs" (`tcp_add_reno_sack`), the head is
//!   retransmitted, each partial ACK retransmits the next head. The cwnd
//!   reduction is **PRR** (RFC 6937) exactly as `tcp_cwnd_reduction`, and at
//!   the end of recovery cwnd = ssthresh (`tcp_end_cwnd_reduction`).
//! * **D-SACK and undo** (`undo.rs`, RFC 2883 as Linux): the receiver
//!   reports a duplicate first in its SACK blocks (`tcp_dsack_set`); the
//!   sender reads it (`tcp_check_dsack`) and undoes a window reduction that
//!   proves spurious — every retransmission D-SACKed, or an ACK echoing a
//!   timestamp older than the first retransmission (`tcp_try_undo_recovery`,
//!   `_dsack`, `_partial`, `_loss`); RACK's window grows a step per round
//!   trip with a D-SACK after reordering (`tcp_rack_update_reo_wnd`), and
//!   the reordering degree (`tp->reordering`, 3 at first) grows to the
//!   distance seen (`tcp_check_sack_reordering`). **F-RTO** (`tcp_frto =
//!   2`, `Config::frto`): after a timeout, the first ACK that advances
//!   snd_una sends new data; never-retransmitted data delivered after it
//!   shows the timeout spurious (`TCPSpuriousRTOs`), and it is undone.
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
//!   which an RTT sample does not clear, unlike the backoff). A timeout ends
//!   a loss probe's episode. When the host's qdisc refuses the head's
//!   retransmission, the timer comes back in `TCP_RESOURCE_PROBE_INTERVAL`
//!   (500 ms) with no backoff (Linux 6.12).
//! * **Delayed ACKs** (`__tcp_ack_snd_check`, `tcp_send_delayed_ack`,
//!   `tcp_incr_quickack`): quickack mode for the first
//!   `min(rcv_wnd / (2·rcv_mss), 16)` ACKs, then an ACK when more than one
//!   full segment is unacknowledged (every second segment) or after the 40 ms
//!   delayed-ACK timer (`TCP_DELACK_MIN`). The every-second-segment ACK waits
//!   while the data lies unread and the window's right edge cannot advance,
//!   and goes when the application reads (`tcp_cleanup_rbuf`). Out-of-order data, data that fills
//!   a hole, duplicates and FIN are acknowledged at once, with up to 3 SACK
//!   blocks (4 without timestamps), the most recent first (`tcp_sack_new_ofo_skb`).
//!   In-order data that ends a write (a full-sized segment with PSH) or comes
//!   short of the MSS is acknowledged as soon as the application has read
//!   everything (`ICSK_ACK_PUSHED`, `tcp_cleanup_rbuf`; Linux 6.12).
//! * **Flow control**: the receiver advertises its free buffer, at most
//!   `rcv_ssthresh`, never shrinking the right edge (`tcp_select_window`),
//!   zero below 1/16 of the buffer or one segment; a window update is sent
//!   when reading doubles the window (`tcp_cleanup_rbuf`). The buffer is
//!   autotuned (`rcvbuf.rs`: `tcp_rmem`, `tcp_rcv_space_adjust`,
//!   `tcp_grow_window`, the receiver's RTT; `SO_RCVBUF` fixes it), and the
//!   window scale is picked from `tcp_rmem[2]` (`tcp_select_initial_window`).
//!   While `tcp_grow_window` opens the window, every segment is ACKed. The sender respects `snd_una + snd_wnd`
//!   (`tcp_snd_wnd_test`, `tcp_ack_update_window`) and, facing a zero window
//!   with nothing in flight, sends zero-window probes (`tcp_send_probe0`:
//!   an old sequence number, `snd_una - 1`) with exponential backoff.
//! * **Local congestion** (`__tcp_transmit_skb` → `tcp_enter_cwr`): when the
//!   sender's own qdisc refuses a segment, the segment counts as not sent:
//!   snd_nxt, the departure time and Minshall's mark go back (or it is lost,
//!   if a batching driver let later data leave), the connection enters CWR
//!   (PRR down to ssthresh) and stops sending until the next ACK or timer —
//!   the zero-window probe timer when nothing is in flight
//!   (`tcp_check_probe_timer`, then `TCP_RESOURCE_PROBE_INTERVAL`).
//! * **Close**: FIN after the written bytes (piggybacked on the last data
//!   segment, as `tcp_send_fin` does), FIN_WAIT1/2, CLOSING, TIME_WAIT,
//!   CLOSE_WAIT, LAST_ACK; a byte-count transfer ends with both sides closed.
//! * **BBR** (`bbr.rs`, `tcp_bbr.c` of Linux 6.12, BBR v1) over the delivery
//!   rate estimator (`rate.rs`, `tcp_rate.c`): startup, drain, the ProbeBW gain
//!   cycle, ProbeRTT, the long-term policer estimator, ACK aggregation; it sets
//!   cwnd and the pacing rate on every ACK (no PRR) and asks for pacing.
//! * **ECN** (RFC 3168, `tcp_ecn_*` of `tcp_input.c` and `tcp_output.c`): a client with `Config::ecn`
//!   (`tcp_ecn = 1`) asks on its SYN, a server accepts a Not-ECT SYN that asks (Linux's default
//!   `tcp_ecn = 2`); a retransmitted SYN no longer asks (`tcp_ecn_fallback`). New data is ECT(0); the
//!   receiver checks each new data segment (`tcp_ecn_check_ce`): a CE mark sets ECE on its ACKs
//!   (quickack for two) until a segment with CWR arrives (`tcp_ecn_accept_cwr`, which ACKs data at
//!   once). An ACK with ECE makes the sender reduce its window once per window (`tcp_try_to_open` →
//!   `tcp_enter_cwr`, PRR) and set CWR on its next new data; `delivered_ce` counts the packets such
//!   ACKs delivered (`TCPDeliveredCE`).
//! * **DCTCP** (`dctcp.rs`, `tcp_dctcp.c`): Reno reducing its window by alpha/2 once per window, alpha
//!   the EWMA (g = 1/16) of the fraction of packets marked CE, which its receiver echoes exactly (an
//!   immediate ACK on every change of CE state); every segment ECT(0); Reno without ECN.
//! * **Pacing** (`pacing.rs`, Linux 6.12): `sk_pacing_rate` (×2 the window's
//!   rate in slow start, ×1.2 after), departure times on every segment, moved on
//!   by each data segment at that rate when the socket is paced — by a sch_fq
//!   that took its packets (`set_paced_by_fq`) or by itself when it asked
//!   (`Config::max_pacing_rate`, `SO_MAX_PACING_RATE`: internal pacing). As in
//!   Linux, CUBIC, Reno and DCTCP over other qdiscs are not paced — unless BBR
//!   initialised the socket before the application chose them (`Config::paced`).
//! * **GSO skbs** (`tso.rs`, `tcp_tso_autosize`): new data leaves in segments
//!   of several MSS (`Segment::gso_size`), about a millisecond of data at the
//!   pacing rate (more on short paths), at least 2 MSS, at most 64 KB and half
//!   the window; the driver's device cuts them into frames (a veth passes them
//!   whole). A short skb waits for an ACK due within a millisecond when the last
//!   write was recent (`tcp_tso_should_defer`). One MSS per retransmission.
//! * **Nagle** with Minshall's variant (`tcp_nagle_check`): a sub-MSS segment
//!   waits only while another sub-MSS segment is unacknowledged, unless it
//!   carries the FIN or is not the write queue's last skb.
//! * **The send buffer** (`sndbuf.rs`): `sk_sndbuf` from `tcp_wmem` grown by
//!   `tcp_sndbuf_expand` (2 × cwnd × 2 304 bytes, BBR 3 ×), filled by the
//!   truesize of the written and unacknowledged skbs; a write stops when it is
//!   full and the writer wakes when a third is free; each write ends with PSH
//!   on its last unsent skb (`tcp_push`), and segments follow the skbs' edges.
//!
//! ## What is left out, compared with Linux
//!
//! * **No GRO** on the receiving side: segments arrive one MSS each. TCP small
//!   queues is the driver's (`tsq_limit`, `set_tsq_throttled`).
//! * **No SACK reneging**, no ACK
//!   compression of SACKs (`tcp_comp_sack_nr`): every out-of-order segment is
//!   acknowledged at once. A D-SACK's segments are not counted delivered for
//!   PRR and the rate sample (`sack_delivered`).
//! * **Receive memory** is counted in window bytes through the scaling ratio,
//!   not per skb: no queue collapsing or pruning (`tcp_prune_queue`,
//!   `tcp_clamp_window`), no memory pressure. The send buffer is modelled per
//!   skb (`sndbuf.rs`) but without memory pressure or autocorking.
//! * **No slow-start restart after idle**, no cwnd moderation, no AccECN, no
//!   PAWS, no MTU probing, no keepalive, no give-up after `tcp_retries2`, no
//!   TIME_WAIT timer (TIME_WAIT is final), no FIN_WAIT2 timeout, no RST
//!   generation (a RST received closes the connection), no TCP Fast Open.
//! * **Timers are exact** to the nanosecond (Linux rounds to jiffies); the
//!   timestamp clock ticks in milliseconds like Linux's `TCP_TS_HZ`.
//! * **Delayed ACK timeout is fixed at 40 ms** (`TCP_ATO_MIN`); the ato
//!   adaptation and pingpong mode of interactive flows are not modelled.
//! * The min-RTT filter keeps the minimum over the whole connection (Linux:
//!   a 5-minute window).
//!
//! ## Where each piece lives
//!
//! The files follow Linux's split of its TCP:
//!
//! * `lib.rs`: the public types, the connection's state (`struct tcp_sock`)
//!   and the small helpers `include/net/tcp.h` holds (packets in flight,
//!   sequence-number conversions, receive-buffer space).
//! * `socket.rs` (`tcp.c`): what the application calls: open, write, close,
//!   read, the counters (`tcp_get_info`).
//! * `segment.rs`: segments and their options as the simulator carries them.
//! * `sndbuf.rs` (`tcp.c`'s `tcp_sendmsg_locked`, `tcp_input.c`'s `tcp_sndbuf_expand`): the send
//!   buffer, the write queue's skbs, when a writer waits, and where PSH goes.
//! * `input.rs` (`tcp_input.c`): the receive path: the handshake, ACK
//!   processing with the SACK scoreboard, RTT estimation, data reception and
//!   the ACKs it owes.
//! * `recovery.rs` (`tcp_input.c`'s loss recovery): the congestion state
//!   machine (`tcp_fastretrans_alert`), loss marking, PRR, entering Loss.
//! * `rack.rs` (`tcp_recovery.c` and the loss probe of `tcp_output.c`):
//!   RACK-TLP.
//! * `output.rs` (`tcp_output.c`): what to send now, building segments, the
//!   receive window advertised, TCP small queues, the local qdisc's verdicts.
//! * `tso.rs` (`tcp_output.c`'s TSO sizing): how many segments one skb carries.
//! * `rcvbuf.rs` (`tcp_input.c`'s receive-buffer tuning): the buffer, its
//!   window clamp and `rcv_ssthresh`, autotuning.
//! * `timer.rs` (`tcp_timer.c`): the retransmission timer (which RACK's
//!   reordering timer and the loss probe share), delayed-ACK and
//!   zero-window-probe timers.
//! * `cong.rs` (`tcp_cong.c`): the congestion control modules' interface,
//!   slow start and additive increase; `reno.rs`, `cubic.rs`
//!   (`tcp_cubic.c`), `dctcp.rs` (`tcp_dctcp.c`, with the receiver's CE
//!   echo) and `bbr.rs`: one file per module.

mod bbr;
mod cong;
mod cubic;
mod dctcp;
mod input;
mod output;
mod pacing;
mod rack;
mod rate;
mod rcvbuf;
mod recovery;
mod reno;
mod segment;
mod sndbuf;
mod socket;
mod timer;
mod tso;
mod undo;

/// The tests' random draws: a fixed 64-bit LCG (Knuth's MMIX constants), its high bits reduced to
/// `0..n` (`0` for `n == 0`), so that a randomised test is the same on every run.
#[cfg(test)]
fn test_draws(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |n: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % n.max(1)
    }
}

use std::collections::VecDeque;

pub use bbr::{BbrInfo, BbrMode};
pub use cong::HZ;
pub use cubic::HystartStats;
pub use pacing::PacingStatus;
pub use segment::{ecn, flags, SackBlocks, Segment, TcpOptions};
pub use socket::TcpStats;
pub use undo::UndoStats;

/// Virtual time in nanoseconds. There is no clock: every entry point is told
/// the time.
pub type Nanos = u64;

const MS: Nanos = 1_000_000;
/// `TCP_RTO_MAX`: 120 s.
pub const TCP_RTO_MAX: Nanos = 120_000 * MS;
/// `TCP_DELACK_MIN` / `TCP_ATO_MIN`: 40 ms.
pub const TCP_DELACK_MIN: Nanos = 40 * MS;
/// `TCP_INFINITE_SSTHRESH`.
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// `TCP_RTO_MIN` (the constant, not the route's `rto_min`): the loss probe's delayed-ACK allowance.
const TCP_RTO_MIN: Nanos = 200 * MS;
/// `TCP_TIMEOUT_MIN`: 2 jiffies, the slack RACK's and the loss probe's timers add.
const TCP_TIMEOUT_MIN: Nanos = 2 * MS;
/// `TCP_TIMEOUT_INIT`: the loss probe's timeout before any RTT sample.
const TCP_TIMEOUT_INIT: Nanos = 1000 * MS;
/// `TCP_RESOURCE_PROBE_INTERVAL` (HZ/2): the probe timer's wait after the local qdisc refused its segment.
const TCP_RESOURCE_PROBE_INTERVAL: Nanos = 500 * MS;
const TCP_MAX_QUICKACKS: u32 = 16;
/// `sysctl_tcp_reordering`: the dupthresh.
const REORDERING: u32 = 3;
/// `TCP_MSS_DEFAULT`: what a peer that sends no MSS option is assumed to take.
const TCP_MSS_DEFAULT: u32 = 536;
/// Timestamp option length on established segments (NOP, NOP, TS).
const TS_OPTLEN: u32 = 12;

/// The congestion control module (`net.ipv4.tcp_congestion_control`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CongestionControl {
    #[default]
    Cubic,
    Reno,
    /// BBR v1 (`tcp_bbr.c`): paces itself unless a sch_fq does.
    Bbr,
    /// DCTCP (`tcp_dctcp.c`): asks for ECN whatever `Config::ecn` says, and falls back to Reno without it.
    Dctcp,
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
    /// `net.ipv4.tcp_rmem` (min, default, max): the receive buffer starts at the default and grows by
    /// autotuning up to the max (`rcvbuf.rs`); the window scale fits the max.
    pub rmem: [u32; 3],
    /// `net.core.rmem_max`: the most `SO_RCVBUF` may ask for; the window scale fits the larger of it
    /// and `rmem[2]`.
    pub rmem_max: u32,
    /// `SO_RCVBUF` as the application sets it (iperf3's `-w`), 0 for none: the buffer is twice this and
    /// does not grow.
    pub rcvbuf: u32,
    /// `net.ipv4.tcp_wmem` (min, default, max): the send buffer starts at the default and grows with
    /// cwnd up to the max (`sndbuf.rs`; the min matters only under memory pressure, not modelled).
    pub wmem: [u32; 3],
    /// `net.core.wmem_max`: the most `SO_SNDBUF` may ask for.
    pub wmem_max: u32,
    /// `SO_SNDBUF` as the application sets it, 0 for none: the buffer is twice this and does not grow.
    pub sndbuf: u32,
    /// `net.ipv4.tcp_notsent_lowat` (or `TCP_NOTSENT_LOWAT`): a write stops once this many bytes are
    /// written and unsent, and the writer wakes when half as many remain. Unlimited by default.
    pub notsent_lowat: u32,
    pub timestamps: bool,
    pub sack: bool,
    /// CUBIC's HyStart (module parameter `hystart`, on in Linux).
    pub hystart: bool,
    /// `net.ipv4.tcp_ecn = 1`: ask for ECN on connections this end opens (RFC 3168). Either way, an end
    /// accepts ECN when the peer's Not-ECT SYN asks for it (Linux's default `tcp_ecn = 2`). DCTCP asks
    /// and accepts whatever this says.
    pub ecn: bool,
    /// RACK loss detection (`net.ipv4.tcp_recovery = 1`, Linux's default): a segment is lost once one
    /// sent after it was delivered and a reordering window has passed (RFC 8985). Off: the dupthresh
    /// rule (three SACKed segments above a hole). SACK connections only.
    pub rack: bool,
    /// Tail loss probes (`net.ipv4.tcp_early_retrans = 3`, Linux's default): when ACKs stop in the Open
    /// or CWR state, one segment is sent after about two RTTs to draw an ACK that RACK can read, before
    /// the RTO would fire. SACK connections only.
    pub tlp: bool,
    /// F-RTO (`net.ipv4.tcp_frto = 2`, Linux's default; RFC 5682 with SACK): after a timeout, new data
    /// before more retransmissions, and the timeout undone if never-retransmitted data is then
    /// delivered (undo.rs).
    pub frto: bool,
    /// `SO_MAX_PACING_RATE` in bytes per second (iperf3's `--fq-rate`), 0 for none: caps the pacing rate,
    /// and asks for pacing (`SK_PACING_NEEDED`): the socket paces itself unless a sch_fq does.
    pub max_pacing_rate: u64,
    /// The socket paces itself from the start (`SK_PACING_NEEDED`), with no cap on its rate. This is what
    /// a pacing congestion control leaves behind when it initialised the socket and the application then
    /// switched to another: `bbr_init` sets `sk_pacing_status` and `tcp_reinit_congestion_control` never
    /// clears it. iperf3 sets `-C` after `connect()`; over a veth the handshake has completed by then,
    /// so on a host whose default is BBR `iperf3 -C cubic` runs a paced CUBIC (docs/KERNEL_VS_SIM.md).
    pub paced: bool,
    /// `sk_gso_max_size`: the most bytes of one GSO skb, the route device's `gso_max_size` (65536)
    /// less `MAX_TCP_HEADER + 1` (`sk_dst_gso_max_size`); see `tso.rs`.
    pub gso_max_size: u32,
    /// `sk_gso_max_segs`: the most segments of one skb, copied from the route's device at connect
    /// (`sk_setup_caps`; Linux devices have 65535). 1, the default here, sends one MSS per skb, as `ip
    /// link set DEV gso_max_segs 1` does: a connection given no device has no GSO. The simulator copies
    /// its interface's.
    pub gso_max_segs: u32,
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
            rmem: [4096, 131072, 6 << 20],
            rmem_max: 212_992,
            rcvbuf: 0,
            wmem: [4096, 16384, 4 << 20],
            wmem_max: 212_992,
            sndbuf: 0,
            notsent_lowat: u32::MAX,
            timestamps: true,
            sack: true,
            hystart: true,
            ecn: false,
            rack: true,
            tlp: true,
            frto: true,
            max_pacing_rate: 0,
            paced: false,
            gso_max_size: 65536 - tso::GSO_HEADROOM,
            gso_max_segs: 1,
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
    // The delivery state when it was sent (`tx` of `tcp_skb_cb`, rate.rs); times in µs.
    tx_delivered: u32,
    /// 0 once SACKed (sampled already).
    tx_delivered_mstamp: u64,
    tx_first_tx_mstamp: u64,
    tx_app_limited: bool,
    /// The last segment of an skb marked PSH by `tcp_push` (its retransmissions carry PSH too).
    psh: bool,
    /// The last segment of its skb (`sndbuf.rs` counts the queue's skbs by it).
    skb_end: bool,
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
///
/// Laid out by hand (`repr(C)`), as Linux 6.8 groups `struct tcp_sock` into cache-line groups
/// (`__cacheline_group_begin(tcp_sock_read_tx)`…): what every segment touches in either direction
/// first, then the sender's and the receiver's working sets, and the counters of rare events last.
/// With 2 000 sockets (bench-isp) none stays in cache between its segments, and each line a segment
/// touches is a miss; Rust's own order (by alignment) spread the hot fields over all 24 lines.
/// Each group lists its fields largest alignment first, so none is padded.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Connection {
    // ---- every segment, either way: the ACK fields, the timers, what poll_transmit tests ----
    cfg: Config,
    snd_una: u64,
    snd_nxt: u64,
    rcv_nxt: u64,
    /// rcv_nxt when the last ACK was sent.
    rcv_wup: u64,
    /// Window (bytes) advertised in the last ACK (`tp->rcv_wnd`).
    rcv_wnd_adv: u64,
    segs_in: u64,
    segs_out: u64,
    /// The retransmission timer (`icsk_timeout`), which RACK's reordering timer and the loss probe
    /// also use: `xmit_timer` says which is armed (`icsk_pending`).
    rto_at: Option<Nanos>,
    delack_at: Option<Nanos>,
    probe_at: Option<Nanos>,
    /// The pacing timer (internal pacing): when held data may leave.
    pacing_at: Option<Nanos>,
    snd_wnd: u64,
    snd_wl1: u64,
    max_window: u64,
    /// The rate sample of the ACK being processed.
    rs: rate::RateSample,
    undo: undo::Undo,
    bytes_delivered: u64,
    /// ACKs owed before the next segment: DCTCP's ACK of the data before a CE state change. Boxed,
    /// as `tlp_out`: `poll_transmit` tests both each call, and reads one word each instead of
    /// two 80-byte values (a probe or an owed ACK is rare).
    ack_out: Option<Box<Segment>>,
    /// A probe the loss-probe timer built, for the next `poll_transmit`.
    tlp_out: Option<Box<Segment>>,
    iss: u32,
    irs: u32,
    ts_recent: u32,
    /// Sending MSS (payload bytes).
    mss: u32,
    state: State,
    snd_wscale: u8,
    rcv_wscale: u8,
    ts_ok: bool,
    sack_ok: bool,
    /// ECN was negotiated on the handshake (`TCP_ECN_OK`).
    ecn_ok: bool,
    syn_tx: SynTx,
    xmit_timer: XmitTimer,
    probe_pending: bool,
    /// Local qdisc refused a segment: no data until the next ACK or timer.
    local_block: bool,
    /// TCP small queues: the host holds enough of this socket's data below it (`TSQ_THROTTLED`); data
    /// waits, pure ACKs still go.
    tsq_throttled: bool,
    /// The segment `poll_transmit` returned last is `tcp_write_wakeup`'s (the zero-window probe timer's).
    wakeup_out: bool,
    /// The retransmission `rto_rexmit` waits for is the segment `poll_transmit` returned last (its
    /// fate is known by the next call: `on_local_drop` comes first).
    rto_rexmit_built: bool,
    ack_pending: bool,
    ack_now: bool,
    /// `sk_pacing_status`.
    pacing_status: PacingStatus,
    /// The congestion control module and its state (`icsk_ca_ops`, `icsk_ca_priv`). Last of the
    /// group, against the alignment order (at most 7 bytes of padding before it): its variant byte
    /// comes first (`repr(u8)`) and is what the receiver reads; the module's state after it is the
    /// sender's.
    ca: cong::Ca,

    // ---- the sender: ACKs, the retransmission queue, congestion control, RTT, rate, RACK ----
    /// Sequence number after the last written byte (1 + written).
    write_end: u64,
    mdev_max4: u64,
    /// The RTO and backoff before the last expiry, while the head's retransmission that expiry calls
    /// for has not been taken by the host's qdisc: a refusal puts them back (`tcp_retransmit_timer`
    /// backs off only a retransmission that left).
    rto_rexmit: Option<(Nanos, u32)>,
    /// The send buffer and the write queue's skbs (sndbuf.rs).
    snd: sndbuf::SndBuf,
    /// Highest sent sub-MSS segment end (`snd_sml`, Minshall).
    snd_sml: u64,
    /// `snd_sml` before the last new data was built: a refused segment leaves it as it was.
    prior_snd_sml: u64,
    rtx: VecDeque<TxSeg>,
    high_seq: u64,
    cwnd_usage_seq: u64,
    srtt8: u64,
    mdev4: u64,
    rttvar4: u64,
    rtt_seq: u64,
    min_rtt: u64,
    rto: Nanos,
    /// `tp->delivered_mstamp`, µs.
    delivered_mstamp: u64,
    /// `tp->first_tx_mstamp`, µs.
    first_tx_mstamp: u64,
    /// `tcp_wstamp_ns`: the earliest departure time of the next segment.
    wstamp: Nanos,
    /// `wstamp` before the segment being sent was stamped (`prior_wstamp`).
    prior_wstamp: Nanos,
    /// The departure time of the last segment `poll_transmit` returned.
    tx_tstamp: Nanos,
    rack: rack::Rack,
    /// Highest SACKed sequence end (`tcp_highest_sack_seq` while `sacked_out` > 0).
    highest_sack: u64,
    /// snd_nxt when the outstanding loss probe left; 0 = none (`tlp_high_seq`).
    tlp_high_seq: u64,
    written: u64,
    bytes_sent: u64,
    bytes_acked: u64,
    data_segs_out: u64,
    psh_segs_out: u64,
    /// The valid blocks of the last ACK whose SACKs were tagged, in sequence order, (0, 0) unused
    /// (`recv_sack_cache`): every segment within one is SACKed. Cleared when the queue's segments
    /// change bounds (a head trimmed, a refused tail rolled back).
    sack_cache: [(u64, u64); 4],
    /// The peer's MSS option (`rx_opt.mss_clamp`), which `tcp_sndbuf_expand` sizes segments by.
    mss_clamp: u32,
    packets_out: u32,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,
    /// Lost segments not yet retransmitted.
    lost_pending: u32,
    cwnd: u32,
    ssthresh: u32,
    cwnd_cnt: u32,
    prior_cwnd: u32,
    prr_delivered: u32,
    prr_out: u32,
    max_packets_out: u32,
    backoff: u32,
    /// RTO expirations since snd_una last advanced (`icsk_retransmits`): unlike the backoff, an RTT
    /// sample does not clear it, so `enter_loss` can tell a repeated timeout in one Loss episode.
    rto_retransmits: u32,
    /// `tp->delivered`: packets delivered (ACKed or SACKed) so far.
    delivered: u32,
    /// `tp->app_limited`: application-limited until `delivered` passes this (0: not).
    app_limited: u32,
    /// `tp->lost`: packets marked lost so far.
    lost_total: u32,
    /// The reordering degree in segments (`tp->reordering`): `net.ipv4.tcp_reordering` (3), raised
    /// by reordering seen (`tcp_check_sack_reordering`).
    reordering: u32,
    /// `tp->delivered_ce`: packets delivered by ACKs that carried ECE.
    delivered_ce: u32,
    probes_out: u32,
    /// FIN queued (close called); its sequence number is `write_end`.
    fin_queued: bool,
    fin_sent: bool,
    ca_state: CaState,
    is_cwnd_limited: bool,
    /// That probe retransmitted data rather than sending new data (`tlp_retrans`).
    tlp_retrans: bool,

    // ---- the receiver: data, out-of-order ranges, the receive buffer ----
    /// The receive buffer and its autotuning (rcvbuf.rs).
    rb: rcvbuf::RcvBuf,
    ooo: Vec<(u64, u64)>,
    sack_recent: Vec<(u64, u64)>,
    peer_fin: Option<u64>,
    unread: u64,
    bytes_read: u64,
    quick: u32,
    rcv_mss: u32,
    /// `icsk_ack.last_seg_size`: a short segment's payload, to take the MSS from two in a row.
    last_seg_size: u32,
    have_irs: bool,
    fin_received: bool,
    autoread: bool,
    /// `ICSK_ACK_PUSHED`: the data received since the last ACK ended a write (PSH on a full-sized
    /// segment) or came short of the MSS; ACK once the application has read it all (`tcp_cleanup_rbuf`).
    ack_pushed: bool,
    first_data_seen: bool,

    // ---- cold: counters of rare events, the handshake, ECN, statistics ----
    /// Segments received with CE, and ECE-marked ACKs that reduced the window.
    pub ce_received: u64,
    pub ece_reductions: u64,
    syn_sent_at: Nanos,
    /// `sk_pacing_rate` as a `cong_control` module (BBR) sets it, bytes/s.
    sk_pacing_rate: u64,
    undo_stats: undo::UndoStats,
    /// HyStart's exits (cubic.rs).
    hystart_stats: cubic::HystartStats,
    bytes_retrans: u64,
    retransmits: u64,
    timeouts: u64,
    fast_retransmits: u64,
    local_drops: u64,
    zwp_sent: u64,
    dupacks_in: u64,
    lost_retransmits: u64,
    loss_probes: u64,
    loss_probe_recoveries: u64,
    reord_seen: u64,
    ws_ok: bool,
    /// The receiver saw CE and echoes ECE until the sender's CWR (`TCP_ECN_DEMAND_CWR`).
    ecn_demand_cwr: bool,
    /// The next new data segment carries CWR (`TCP_ECN_QUEUE_CWR`).
    ecn_queue_cwr: bool,
    /// An ECT or CE data segment has arrived (`TCP_ECN_SEEN`).
    ecn_seen: bool,
    syn_retransmitted: bool,
}

// The per-segment group and the congestion module's variant byte within seven lines (448 bytes),
// where bench-isp's cachegrind counts were taken (docs/BENCHMARKS.md): a field added to the group
// costs every socket's every segment.
const _: () = assert!(std::mem::offset_of!(Connection, ca) < 448);

/// Where the sender's group starts: a socket's every-segment group is the lines before it, which a
/// caller may prefetch ahead of a segment (the simulator's event loop).
pub const SENDER_GROUP: usize = std::mem::offset_of!(Connection, write_end);

/// What the retransmission timer is armed for (`ICSK_TIME_*` in `icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XmitTimer {
    /// The RTO (`ICSK_TIME_RETRANS`).
    Retrans,
    /// RACK's reordering timer (`ICSK_TIME_REO_TIMEOUT`).
    ReoTimeout,
    /// The tail loss probe (`ICSK_TIME_LOSS_PROBE`).
    LossProbe,
}

/// `sock_setsockopt(SO_SNDBUF/SO_RCVBUF)` (`__sock_set_sndbuf`/`__sock_set_rcvbuf`): the value asked
/// for, at most `max` (`wmem_max`/`rmem_max`), doubled for the skb overhead, at least `min`.
fn sock_set_buf(val: u32, max: u32, min: u32) -> u32 {
    (val.min(max).min(i32::MAX as u32 / 2) * 2).max(min)
}

/// Signed distance from `reference` (a u32 on the wire) to `wire`.
fn seq_delta(wire: u32, reference: u32) -> i64 {
    wire.wrapping_sub(reference) as i32 as i64
}

/// Helpers used across the files (`include/net/tcp.h`'s inline functions).
impl Connection {
    /// `tcp_packets_in_flight()`.
    #[inline]
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

    fn syn_outstanding(&self) -> bool {
        matches!(self.state, State::SynSent | State::SynReceived) && self.snd_una == 0
    }

    /// End of what may be sent: written data (+ the FIN if closed).
    #[inline]
    fn send_limit_end(&self) -> u64 {
        self.write_end + self.fin_queued as u64
    }

    #[inline]
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

    /// `tcp_highest_sack_seq()`: the end of the highest SACKed segment, or `snd_una` when nothing is
    /// SACKed.
    fn fack(&self, snd_una: u64) -> u64 {
        if self.sacked_out == 0 {
            snd_una
        } else {
            self.highest_sack.max(snd_una)
        }
    }

    /// `tcp_receive_window()`: what remains of the last advertised window.
    fn cur_rcv_window(&self) -> u64 {
        (self.rcv_wup + self.rcv_wnd_adv).saturating_sub(self.rcv_nxt)
    }
}
