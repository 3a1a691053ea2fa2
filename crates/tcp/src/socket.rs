//! The application's side of a connection (`net/ipv4/tcp.c`): opening, writing, closing, reading, and
//! the counters `tcp_get_info` reports.

use crate::cong::Ca;
use crate::rack::Rack;
use crate::{
    CaState, Config, Connection, Nanos, State, SynTx, XmitTimer, TCP_INFINITE_SSTHRESH,
    TCP_MSS_DEFAULT,
};
use std::collections::VecDeque;

/// Counters and the current state of a connection (after `tcp_info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpStats {
    pub state: State,
    pub ca_state: CaState,
    /// Sending MSS in use (payload bytes per full segment).
    pub mss: u32,
    /// Bytes the application wrote (copied into the send buffer).
    pub bytes_written: u64,
    /// The send buffer (`sk_sndbuf`, `ss`'s `skmem` tb), bytes of truesize.
    pub sndbuf: u32,
    /// The truesize of the written and unacknowledged skbs (`sk_wmem_queued`, `skmem` w).
    pub wmem_queued: u64,
    /// Written bytes not yet sent (`ss`'s `notsent`).
    pub notsent: u64,
    /// Data segments sent with PSH, retransmissions included (a capture's `[P.]` count).
    pub psh_segs_out: u64,
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
    /// The receive buffer (`sk_rcvbuf`, `ss`'s `skmem` rb), bytes of truesize.
    pub rcvbuf: u32,
    /// The window the buffer may be offered up to (`window_clamp`).
    pub window_clamp: u32,
    /// `tcpi_rcv_ssthresh`: how far the offered window has opened.
    pub rcv_ssthresh: u32,
    /// `tcpi_rcv_space`: bytes the application read in the last receiver RTT measured.
    pub rcv_space: u32,
    /// `tcpi_rcv_rtt`: the receiver's RTT estimate, µs (0 before a sample).
    pub rcv_rtt_us: u32,
    /// Duplicate ACKs received.
    pub dupacks_in: u64,
    /// Retransmissions found lost (RACK, or a timeout) and sent again (`TCPLostRetransmit`).
    pub lost_retransmits: u64,
    /// Tail loss probes sent (`TCPLossProbes`).
    pub loss_probes: u64,
    /// Loss probes that repaired a loss: the window was reduced (`TCPLossProbeRecovery`).
    pub loss_probe_recoveries: u64,
    /// Reordering seen: an original segment delivered below one SACKed before it (`reord_seen`,
    /// `TCPSACKReorder`); it opens RACK's reordering window.
    pub reord_seen: u64,
    /// The reordering degree in segments (`tcpi_reordering`).
    pub reordering: u32,
    /// D-SACKs sent and received, and the window reductions undone (undo.rs).
    pub undo: crate::UndoStats,
    /// How CUBIC's HyStart ended slow start (cubic.rs).
    pub hystart: crate::HystartStats,
    /// Packets delivered by ACKs that carried ECE (`tcpi_delivered_ce`, `TCPDeliveredCE`).
    pub delivered_ce: u32,
    /// Data segments received with CE.
    pub ce_received: u64,
    /// Window reductions for an ECN echo (`tcp_enter_cwr` on ECE).
    pub ece_reductions: u64,
    /// DCTCP's alpha in 1/1024 while DCTCP runs (`ss -i`'s `dctcp:(…,alpha:…)`).
    pub dctcp_alpha: Option<u32>,
}

impl Connection {
    fn new(cfg: Config, isn: u32, state: State) -> Connection {
        // tcp_connect_init(): the client's SYN offers what its buffer holds in whole advertised MSSs
        // (a server offers again from its listener's, `rcv_listen`).
        let mut rb = crate::rcvbuf::RcvBuf::new(&cfg);
        let (rcv_wnd, rcv_wscale) = rb.select_initial_window(cfg.mss, true);
        let mss = cfg.mss.max(88);
        let rcv_mss = mss.min(rcv_wnd / 2).clamp(88, TCP_MSS_DEFAULT);
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
            mss_clamp: cfg.mss,
            snd: crate::sndbuf::SndBuf::new(&cfg),
            snd_sml: 0,
            prior_snd_sml: 0,
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
            ca: Ca::new(cfg.cc, hystart, isn as u64),
            srtt8: 0,
            mdev4: 0,
            mdev_max4: 0,
            rttvar4: 0,
            rtt_seq: 0,
            min_rtt: 0,
            rto,
            backoff: 0,
            rto_retransmits: 0,
            rto_rexmit: None,
            rto_rexmit_built: false,
            rto_at: None,
            xmit_timer: XmitTimer::Retrans,
            delack_at: None,
            probe_at: None,
            probe_pending: false,
            probes_out: 0,
            local_block: false,
            wakeup_out: false,
            tsq_throttled: false,
            pacing_status: if cfg.max_pacing_rate != 0 || cfg.paced {
                crate::PacingStatus::Needed
            } else {
                crate::PacingStatus::None
            },
            delivered: 0,
            delivered_mstamp: 0,
            first_tx_mstamp: 0,
            app_limited: 0,
            lost_total: 0,
            rs: Default::default(),
            sk_pacing_rate: 0,
            wstamp: 0,
            prior_wstamp: 0,
            tx_tstamp: 0,
            pacing_at: None,
            rack: Rack::new(),
            highest_sack: 0,
            sack_cache: Default::default(),
            tlp_high_seq: 0,
            tlp_retrans: false,
            tlp_out: None,
            irs: 0,
            have_irs: false,
            rcv_nxt: 0,
            rcv_wup: 0,
            rcv_wnd_adv: rcv_wnd as u64,
            rb,
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
            ecn_seen: false,
            delivered_ce: 0,
            ack_out: None,
            ce_received: 0,
            ece_reductions: 0,
            quick: 0,
            rcv_mss,
            ack_pushed: false,
            last_seg_size: 0,
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
            psh_segs_out: 0,
            retransmits: 0,
            timeouts: 0,
            fast_retransmits: 0,
            local_drops: 0,
            zwp_sent: 0,
            dupacks_in: 0,
            lost_retransmits: 0,
            loss_probes: 0,
            loss_probe_recoveries: 0,
            reord_seen: 0,
            reordering: crate::REORDERING,
            undo: Default::default(),
            undo_stats: Default::default(),
            hystart_stats: Default::default(),
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

    /// Send a FIN after all written data (`tcp_close` → `tcp_send_fin`).
    pub fn close(&mut self) {
        if self.fin_queued || self.close_waits_for_write() {
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
    pub fn set_autoread(&mut self, now: Nanos, on: bool) {
        self.autoread = on;
        if on {
            self.read(now, u64::MAX);
        }
    }

    /// The application reads up to `max` bytes; returns how many it got.
    /// Autotunes the buffer, and sends a window update when the window has at least doubled
    /// (`tcp_cleanup_rbuf`).
    pub fn read(&mut self, now: Nanos, max: u64) -> u64 {
        let n = self.unread.min(max);
        if n == 0 {
            return 0;
        }
        self.unread -= n;
        self.bytes_read += n;
        self.after_read(now);
        n
    }

    /// What `tcp_recvmsg` does after copying: `tcp_rcv_space_adjust`, then `tcp_cleanup_rbuf`'s ACKs:
    /// the every-second-segment ACK that `__tcp_ack_snd_check` held back while the data lay unread (the
    /// window's right edge could not advance), pushed data read to the end, and the window update when
    /// the window offered would at least double.
    pub(crate) fn after_read(&mut self, now: Nanos) {
        if !self.have_irs || self.fin_received || self.state == State::SynReceived {
            return;
        }
        self.rcv_space_adjust(now);
        if self.ack_pending
            && (self.rcv_nxt - self.rcv_wup > self.rcv_mss as u64 || self.pushed_and_read())
        {
            self.ack_now = true;
        }
        let before = self.cur_rcv_window();
        if 2 * before <= self.rb.window_clamp as u64 {
            let new = self.raw_select_window();
            if new > 0 && new >= 2 * before {
                self.ack_now = true;
            }
        }
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
    #[inline]
    pub fn poll_at(&self) -> Option<Nanos> {
        // The least of those set, without an iterator: the simulator asks after every event.
        let timers = [self.rto_at, self.delack_at, self.probe_at, self.pacing_at];
        let at = timers.map(|t| t.unwrap_or(Nanos::MAX));
        timers
            .iter()
            .any(Option::is_some)
            .then_some(at[0].min(at[1]).min(at[2]).min(at[3]))
    }

    pub fn stats(&self) -> TcpStats {
        let (sndbuf, wmem_queued, notsent) = self.sndbuf_stats();
        TcpStats {
            sndbuf,
            wmem_queued,
            notsent,
            psh_segs_out: self.psh_segs_out,
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
            rcvbuf: self.rb.rcvbuf,
            window_clamp: self.rb.window_clamp,
            rcv_ssthresh: self.rb.rcv_ssthresh,
            rcv_space: self.rb.space,
            rcv_rtt_us: self.rb.rtt_us8 >> 3,
            dupacks_in: self.dupacks_in,
            lost_retransmits: self.lost_retransmits,
            loss_probes: self.loss_probes,
            loss_probe_recoveries: self.loss_probe_recoveries,
            reord_seen: self.reord_seen,
            reordering: self.reordering,
            undo: self.undo_stats,
            hystart: self.hystart_stats,
            delivered_ce: self.delivered_ce,
            ce_received: self.ce_received,
            ece_reductions: self.ece_reductions,
            dctcp_alpha: self.dctcp_alpha(),
        }
    }

    /// Payload bytes delivered in order to the application, without building the whole [`TcpStats`].
    pub fn bytes_delivered(&self) -> u64 {
        self.bytes_delivered
    }

    /// Segments sent and not yet acknowledged (`packets_out`), without building the whole [`TcpStats`].
    pub fn packets_out(&self) -> u32 {
        self.packets_out
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
        self.check_sndbuf()
    }
}
