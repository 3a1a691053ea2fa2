//! The send path (`net/ipv4/tcp_output.c`): what to send now (`tcp_write_xmit`,
//! `tcp_xmit_retransmit_queue`, zero-window probes), each segment built with the ACK state, options and
//! the receive window it advertises (`tcp_transmit_skb`, `tcp_select_window`), TCP small queues, and the
//! local qdisc's verdicts on what was sent.

use crate::{
    ecn, flags, CaState, Connection, Nanos, Segment, State, SynTx, TcpOptions, TxSeg, XmitTimer,
    TCP_RESOURCE_PROBE_INTERVAL,
};

/// How `send_new` treats cwnd, Nagle and a window too small for a full segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// `tcp_write_xmit`: within cwnd, Nagle, sender SWS avoidance.
    Normal,
    /// `tcp_write_wakeup` (zero-window probe): whatever fits in the window.
    Wakeup,
    /// The loss probe (`tcp_write_xmit` with `push_one = 2`): one segment whatever cwnd says.
    Probe,
}

impl Connection {
    /// `__tcp_select_window()`: the free buffer, no more than `rcv_ssthresh`, rounded up to the window
    /// scale; 0 once less than 1/16 of the buffer or one segment is free (then quickack ends, as the
    /// kernel's `icsk_ack.quick = 0` when less than half is free).
    pub(crate) fn raw_select_window(&mut self) -> u64 {
        let mut mss = self.rcv_mss as i64;
        let mut free = self.tcp_space();
        let allowed = self.rb.full_space();
        let full = (self.rb.window_clamp as i64).min(allowed);
        if mss > full {
            mss = full;
            if mss <= 0 {
                return 0;
            }
        }
        let gran = 1i64 << self.rcv_wscale;
        if free < full >> 1 {
            self.quick = 0;
            free = free.max(0) / gran * gran;
            if free < allowed >> 4 || free < mss {
                return 0;
            }
        }
        free = free.min(self.rb.rcv_ssthresh as i64);
        if self.rcv_wscale > 0 {
            // Rounded up to the scale by shifts, not a signed division: `free` is not negative here
            // (`full` is not, as `mss` is not, so neither branch above leaves it below zero).
            let w = self.rcv_wscale;
            return ((free.max(0) as u64 + (gran as u64 - 1)) >> w) << w;
        }
        // Unscaled: a multiple of the MSS, kept while within one MSS of the free space.
        let cur = self.rcv_wnd_adv as i64;
        if cur <= free - mss || cur > free {
            (free / mss * mss) as u64
        } else if mss == full && free > cur + (full >> 1) {
            free as u64
        } else {
            cur as u64
        }
    }

    /// `tcp_select_window()` in bytes: never moves the right edge left (`tcp_shrink_window` = 0), at
    /// most 65535 scaled.
    pub(crate) fn select_window_bytes(&mut self) -> u64 {
        let cur = self.cur_rcv_window();
        let mut win = self.raw_select_window();
        if win < cur {
            let gran = 1u64 << self.rcv_wscale;
            win = cur.div_ceil(gran) * gran;
        }
        win.min(65535u64 << self.rcv_wscale)
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
            // A D-SACK goes first and once (`tcp_options_write` clears `rx_opt.dsack`).
            let dsack = self.undo.dsack_block.take().filter(|_| self.sack_ok);
            if self.sack_ok && (dsack.is_some() || !self.sack_recent.is_empty()) {
                let max = if self.ts_ok { 3 } else { 4 };
                // Pushed in place, not an iterator chain collected: every ACK of a recovery carries
                // blocks.
                let recent =
                    &self.sack_recent[..self.sack_recent.len().min(max - dsack.is_some() as usize)];
                for &(a, b) in dsack.iter().chain(recent) {
                    // A block ending where an out-of-order FIN sits covers the FIN too, as the
                    // kernel's SACKs its skb (end_seq counts the FIN): the queue keeps data only.
                    let b = b + (self.peer_fin == Some(b)) as u64;
                    options
                        .sack_blocks
                        .push((self.rcv_wire(a), self.rcv_wire(b)));
                }
            }
        }
        let mut flags_out = fl;
        if syn {
            if self.have_irs {
                if self.ecn_ok {
                    flags_out |= flags::ECE; // SYN-ACK accepting ECN
                }
            } else if self.wants_ecn() && !self.syn_retransmitted {
                // SYN asking for it; not again on a retransmitted SYN (`tcp_ecn_clear_syn`: the
                // first may have been dropped for asking).
                flags_out |= flags::ECE | flags::CWR;
            }
        } else if self.ecn_ok && self.ecn_demand_cwr {
            flags_out |= flags::ECE;
        }
        let window;
        if self.have_irs {
            flags_out |= flags::ACK;
            if syn {
                // SYN windows are never scaled: the initial window (tcp_select_initial_window).
                window = self.rcv_wnd_adv.min(65535) as u16;
            } else {
                let win = self.select_window_bytes();
                window = (win >> self.rcv_wscale).min(65535) as u16;
                self.rcv_wnd_adv = (window as u64) << self.rcv_wscale;
            }
            // tcp_event_ack_sent()
            if self.ack_pending && self.quick > 0 {
                self.quick -= 1;
            }
            self.rcv_wup = self.rcv_nxt;
            self.ack_pending = false;
            self.ack_pushed = false;
            self.ack_now = false;
            self.delack_at = None;
        } else {
            window = self.rcv_wnd_adv.min(65535) as u16;
        }
        self.segs_out += 1;
        self.stamp_departure(now);
        Segment {
            gso_size: 0,
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
            // A module that needs ECN (DCTCP) sets ECT(0) on the socket: every segment has it.
            ecn: if self.ca_needs_ecn() {
                ecn::ECT0
            } else {
                ecn::NOT_ECT
            },
        }
    }

    /// `net.ipv4.tcp_ecn = 1` or a module that needs ECN: ask for it on the SYN.
    pub(crate) fn wants_ecn(&self) -> bool {
        self.cfg.ecn || self.ca_needs_ecn()
    }

    /// `__tcp_send_ack(sk, rcv_nxt)` for an older `rcv_nxt` (DCTCP's ACK of the data before a CE state
    /// change): sent before anything else; the delayed ACK stays owed for the rest
    /// (`tcp_event_ack_sent` returns early for it).
    pub(crate) fn send_ack_for(&mut self, now: Nanos, ack_abs: u64) {
        let kept = (self.ack_pending, self.ack_now, self.delack_at, self.quick);
        let mut seg = self.build(now, self.snd_nxt, 0, 0);
        seg.ack = self.rcv_wire(ack_abs);
        (self.ack_pending, self.ack_now, self.delack_at, self.quick) = kept;
        self.ack_out = Some(Box::new(seg));
    }

    /// What to send now; call until `None` after every event. Due timers
    /// fire here.
    ///
    /// Inline (into the simulator's socket, across the crate boundary) down to the tests that find
    /// nothing to send, which about half the calls end with; what builds a segment is out of line.
    #[inline]
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Segment> {
        let rto_rexmit_built = std::mem::take(&mut self.rto_rexmit_built);
        let seg = self.transmit(now);
        if rto_rexmit_built {
            if seg.is_none() {
                // Nothing built: the expiry's retransmission is still the last segment.
                self.rto_rexmit_built = true;
            } else {
                // Another segment asked for: the qdisc took the retransmission, its backoff stands.
                self.rto_rexmit = None;
            }
        }
        seg
    }

    #[inline]
    fn transmit(&mut self, now: Nanos) -> Option<Segment> {
        self.run_timers(now);
        self.wakeup_out = false;
        if self.state == State::Closed {
            return None;
        }
        if let Some(seg) = self.ack_out.take() {
            return Some(*seg);
        }
        // SYN / SYN-ACK
        // (`build` makes a SYN a SYN-ACK once the peer's SYN is known.)
        if self.syn_tx != SynTx::None {
            return Some(self.send_syn(now));
        }
        if matches!(
            self.state,
            State::Listen | State::SynSent | State::SynReceived
        ) {
            return None;
        }
        // The loss probe the timer built.
        if let Some(seg) = self.tlp_out.take() {
            return Some(*seg);
        }
        // A blocking writer copies what the buffer takes before the data goes out; after an ACK's data,
        // `tcp_check_space` may wake it, and what it then writes goes out too.
        self.resume_writer(now);
        if let Some(seg) = self.transmit_data(now) {
            return Some(seg);
        }
        if std::mem::take(&mut self.snd.ack_check) {
            self.check_space();
            if self.resume_writer(now) {
                if let Some(seg) = self.transmit_data_woken(now) {
                    return Some(seg);
                }
            }
        }
        if self.ack_now && self.have_irs {
            return Some(self.build(now, self.snd_nxt, 0, 0));
        }
        None
    }

    /// The SYN, or the SYN-ACK once the peer's SYN is known.
    #[inline(never)]
    fn send_syn(&mut self, now: Nanos) -> Segment {
        self.syn_tx = SynTx::None;
        self.syn_sent_at = now;
        self.snd_nxt = self.snd_nxt.max(1);
        self.reset_xmit_timer(now + self.rto);
        self.build(now, 0, 0, flags::SYN)
    }

    /// `transmit_data` for what a woken writer wrote: rare, so not inlined a second time.
    #[inline(never)]
    fn transmit_data_woken(&mut self, now: Nanos) -> Option<Segment> {
        self.transmit_data(now)
    }

    /// `tcp_write_xmit`/`tcp_xmit_retransmit_queue` and the probe timer's sends: the next data segment,
    /// unless something holds the socket (a local refusal, TSQ, pacing).
    ///
    /// Inline, as are `retransmit_lost`'s and `send_new`'s first tests: about half the calls find nothing
    /// to send (a receiver with no data, a sender at its cwnd asked once more after each segment), and
    /// then only these tests run, without the calls and the frames of the bodies that build a segment.
    #[inline]
    fn transmit_data(&mut self, now: Nanos) -> Option<Segment> {
        if self.local_block || self.tsq_throttled || !self.can_send_data() || self.pacing_holds(now)
        {
            return None;
        }
        if self.probe_pending {
            if let Some(seg) = self.write_wakeup(now) {
                return Some(seg);
            }
        }
        // F-RTO: new data first on this ACK; then maybe no retransmission until the next.
        if self.undo.rexmit_new {
            if let Some(seg) = self.send_new(now, SendMode::Normal) {
                return Some(seg);
            }
            self.frto_new_data_done();
        }
        if !self.undo.hold_rexmit {
            if let Some(seg) = self.retransmit_lost(now) {
                return Some(seg);
            }
        }
        self.send_new(now, SendMode::Normal)
    }

    /// tcp_send_probe0() → tcp_write_wakeup(): send what fits in a non-zero window, else a probe with an
    /// old sequence number.
    #[inline(never)]
    fn write_wakeup(&mut self, now: Nanos) -> Option<Segment> {
        self.probe_pending = false;
        let room = (self.snd_una + self.snd_wnd).saturating_sub(self.snd_nxt);
        if room > 0 {
            if let Some(seg) = self.send_new(now, SendMode::Wakeup) {
                self.wakeup_out = true;
                return Some(seg);
            }
        } else if self.snd_nxt < self.send_limit_end() {
            self.zwp_sent += 1;
            let seq = self.snd_una.saturating_sub(1);
            let seg = self.build(now, seq, 0, 0);
            self.arm_probe(now);
            return Some(seg);
        }
        None
    }

    /// `tcp_xmit_retransmit_queue()`: lost segments first, within cwnd.
    #[inline]
    fn retransmit_lost(&mut self, now: Nanos) -> Option<Segment> {
        if self.lost_pending == 0 || self.in_flight() >= self.cwnd {
            return None;
        }
        self.retransmit_first_lost(now)
    }

    #[inline(never)]
    fn retransmit_first_lost(&mut self, now: Nanos) -> Option<Segment> {
        let i = self
            .rtx
            .iter()
            .position(|t| t.lost && !t.retrans && !t.sacked)?;
        let seg = self.retransmit(now, i, true);
        self.rto_rexmit_built = i == 0 && self.rto_rexmit.is_some();
        if self.in_cwnd_reduction() {
            self.prr_out += 1;
        }
        // The head's retransmission restarts the RTO, unless RACK's reordering timer is pending.
        if (i == 0 && self.xmit_timer != XmitTimer::ReoTimeout) || self.rto_at.is_none() {
            self.reset_xmit_timer(now + self.rto);
        }
        Some(seg)
    }

    /// `__tcp_retransmit_skb()`: send the segment at `i` again. `lost`: it is a lost segment's
    /// retransmission, in flight again (`tcp_retransmit_skb`: `TCPCB_SACKED_RETRANS`, `retrans_out`);
    /// a loss probe's is not.
    pub(crate) fn retransmit(&mut self, now: Nanos, i: usize, lost: bool) -> Segment {
        self.split_rtx_skb(i);
        let t = &mut self.rtx[i];
        t.retrans |= lost;
        t.ever_retrans = true;
        t.sent_at = now;
        let (start, len, fin, psh) = (t.start, t.len(), t.fin, t.psh);
        if lost {
            self.retrans_out += 1;
            self.lost_pending -= 1;
            // tcp_retransmit_skb(): the undo bookkeeping (a loss probe's does not count).
            self.undo_on_retransmit(Self::ts_now(now));
        }
        self.retransmits += 1;
        self.bytes_retrans += len as u64;
        self.bytes_sent += len as u64;
        if len > 0 {
            self.data_segs_out += 1;
        }
        let mut fl = if fin { flags::FIN } else { 0 };
        if psh {
            fl |= flags::PSH;
            self.psh_segs_out += 1;
        }
        let seg = self.build(now, start, len, fl);
        // The skb's send time (`skb_mstamp_ns`, for RTT samples and RACK) is its departure time.
        self.rtx[i].sent_at = self.tx_tstamp;
        self.rate_skb_sent(i, false);
        self.advance_departure(len);
        seg
    }

    /// `tcp_write_xmit()`: new data within cwnd and the peer's window. `SendMode::Wakeup`
    /// (`tcp_write_wakeup`) sends whatever fits in the window; `SendMode::Probe` one segment whatever
    /// cwnd says (`push_one = 2`, the loss probe).
    #[inline]
    pub(crate) fn send_new(&mut self, now: Nanos, mode: SendMode) -> Option<Segment> {
        if self.snd_nxt >= self.send_limit_end() || self.fin_sent {
            return None;
        }
        if self.in_flight() >= self.cwnd && mode == SendMode::Normal {
            self.cwnd_validate(true);
            return None;
        }
        self.send_new_skb(now, mode)
    }

    /// `send_new` past its first tests: something written is unsent, and cwnd has room (or need not).
    #[inline(never)]
    fn send_new_skb(&mut self, now: Nanos, mode: SendMode) -> Option<Segment> {
        let wakeup = mode == SendMode::Wakeup;
        // The write queue's head skb: a segment never takes bytes of two (`tcp_write_xmit` sends skb by
        // skb), and only the last skb waits for Nagle (the others go with `TCP_NAGLE_PUSH`).
        let head_end = self.snd.wq.front().map_or(self.write_end, |s| s.end);
        let last = self.snd.wq.len() <= 1;
        let avail = head_end.saturating_sub(self.snd_nxt);
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
        let mut fin = fin_here && self.snd_nxt + len == self.write_end;
        if len < mss && len > 0 && !fin && mode == SendMode::Normal && last {
            // Nagle, Minshall's variant (tcp_nagle_check / tcp_minshall_check)
            if self.snd_sml > self.snd_una && self.packets_out > 0 {
                return None;
            }
        }
        if len == 0 && !fin {
            return None;
        }
        // One skb of several segments (tso.rs), when the first is a full one; unless it waits for a
        // fuller one (tcp_tso_should_defer). `avail` is the head skb's (sndbuf.rs: the write queue's
        // skbs, `tcp_xmit_size_goal` long as sendmsg built them).
        if mode == SendMode::Normal && len == mss && !fin {
            // `tcp_tso_segs`, once for both uses.
            let segs = self.tso_segs();
            let skb_len = avail;
            if skb_len > mss {
                if let Some(cwnd_limited) = self.tso_should_defer(now, skb_len, room, last, segs) {
                    if cwnd_limited {
                        self.cwnd_validate(true);
                    }
                    return None;
                }
            }
            len = self.tso_len(avail, room, segs);
            fin = self.fin_queued && self.snd_nxt + len == self.write_end;
        }
        let start = self.snd_nxt;
        let end = start + len;
        // The head skb leaves whole, or is cut (`tso_fragment`): the rest stays as the new head.
        let psh = match self.snd.wq.front() {
            Some(s) if s.end == end => self.snd.wq.pop_front().is_some_and(|s| s.psh),
            _ => false,
        };
        self.snd_nxt = end + fin as u64;
        if fin {
            self.fin_sent = true;
        }
        self.prior_snd_sml = self.snd_sml;
        if !len.is_multiple_of(mss) {
            self.snd_sml = end; // tcp_minshall_update
        }
        let was_empty = self.packets_out == 0;
        // The retransmission queue keeps one entry per segment (tcp_skb_pcount of them).
        let first = self.rtx.len();
        let mut seg_start = start;
        loop {
            let seg_end = (seg_start + mss).min(end);
            self.rtx.push_back(TxSeg {
                start: seg_start,
                end: seg_end,
                fin: fin && seg_end == end,
                sent_at: now,
                ever_retrans: false,
                sacked: false,
                lost: false,
                retrans: false,
                tx_delivered: 0,
                tx_delivered_mstamp: 0,
                tx_first_tx_mstamp: 0,
                tx_app_limited: false,
                psh: psh && seg_end == end,
                skb_end: seg_end == end,
            });
            seg_start = seg_end;
            if seg_start >= end {
                break;
            }
        }
        let pcount = (self.rtx.len() - first) as u32;
        self.packets_out += pcount;
        self.snd.rtx_skbs += 1;
        if self.in_cwnd_reduction() {
            self.prr_out += pcount;
        }
        self.bytes_sent += len;
        if len > 0 {
            self.data_segs_out += pcount as u64;
        }
        self.probe_at = None;
        self.probes_out = 0;
        // tcp_event_new_data_sent(): the first segment out, or one sent while a probe is pending, arms
        // the RTO; then tcp_write_xmit arms the loss probe (one per tail loss episode). The probe's own
        // segment leaves that to tcp_send_loss_probe.
        if mode != SendMode::Probe {
            if was_empty || self.xmit_timer == XmitTimer::LossProbe || self.rto_at.is_none() {
                self.rearm_rto(now);
            }
            if mode == SendMode::Normal {
                self.schedule_loss_probe(now, false);
            }
        }
        let limited = self.in_flight() >= self.cwnd;
        self.cwnd_validate(limited);
        // tcp_event_new_data_sent().
        self.check_space();
        let mut fl = if fin { flags::FIN } else { 0 };
        if len > 0 && psh {
            fl |= flags::PSH;
            self.psh_segs_out += 1;
        }
        // `tcp_ecn_send`: new data is ECT(0), and carries a queued CWR (retransmissions and pure ACKs
        // are Not-ECT).
        if self.ecn_ok && len > 0 && self.ecn_queue_cwr {
            fl |= flags::CWR;
            self.ecn_queue_cwr = false;
        }
        let mut seg = self.build(now, start, len as u32, fl);
        self.segs_out += pcount as u64 - 1;
        if pcount > 1 {
            seg.gso_size = self.mss;
        }
        if was_empty && self.retrans_out == 0 && self.ca_is_bbr() {
            // tcp_event_data_sent: CA_EVENT_TX_START.
            self.bbr_tx_start(now);
        }
        // The skb's segments leave together: one departure time and one delivery state
        // (`tcp_rate_skb_sent` per skb), written in one pass.
        let sent = crate::rate::us(self.tx_tstamp);
        if was_empty {
            self.first_tx_mstamp = sent;
            self.delivered_mstamp = sent;
        }
        let app_limited = self.app_limited != 0;
        for t in self.rtx.range_mut(first..) {
            t.sent_at = self.tx_tstamp;
            t.tx_first_tx_mstamp = self.first_tx_mstamp;
            t.tx_delivered_mstamp = self.delivered_mstamp;
            t.tx_delivered = self.delivered;
            t.tx_app_limited = app_limited;
        }
        self.advance_departure(len as u32);
        if self.ecn_ok && len > 0 {
            seg.ecn = ecn::ECT0;
        }
        Some(seg)
    }

    /// `tcp_fragment` before a retransmission of one MSS: the segment at `i` becomes an skb of its own.
    fn split_rtx_skb(&mut self, i: usize) {
        for k in [i.checked_sub(1), Some(i)].into_iter().flatten() {
            if !self.rtx[k].skb_end {
                self.rtx[k].skb_end = true;
                self.snd.rtx_skbs += 1;
            }
        }
    }

    /// `tcp_cwnd_validate()`: remember whether the window was used.
    #[inline]
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

    /// TCP small queues (`tcp_small_queue_check`): the driver says whether the host's queues below this
    /// socket (qdisc and NIC) already hold as much of its data as Linux allows (`tsq_limit`); while they
    /// do, `poll_transmit` sends no data, only ACKs and control segments.
    pub fn set_tsq_throttled(&mut self, throttled: bool) {
        self.tsq_throttled = throttled;
    }

    /// The bytes (of skb truesize) Linux lets a socket keep in the queues below it,
    /// `tcp_small_queue_check`: `max(2 × truesize, pacing rate >> 10)` — about a millisecond of data at the
    /// pacing rate (`sk_pacing_shift` = 10) — at most `tcp_limit_output_bytes` (1 MiB) unless the socket
    /// is paced. The pacing rate is `tcp_update_pacing_rate`'s, unlimited before the first RTT sample.
    /// `truesize` is the truesize of one full-sized skb of the segments given (`tcp_tso_segs`' count),
    /// which the driver knows. The pacing rate is worked out once for both.
    pub fn tsq_limit(&self, truesize: impl FnOnce(u32) -> u64) -> u64 {
        const TCP_LIMIT_OUTPUT_BYTES: u64 = 16 * 65536;
        let rate = self.pacing_rate();
        let truesize = truesize(self.tso_segs_at(rate));
        let rate = match rate {
            0 => u64::MAX,
            r => r,
        };
        let limit = (rate >> 10).max(2 * truesize);
        if self.pacing_status == crate::PacingStatus::None {
            limit.min(TCP_LIMIT_OUTPUT_BYTES)
        } else {
            limit
        }
    }

    /// `tcp_small_queue_check` always lets a segment go when the retransmission queue holds at most one.
    #[inline]
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

    /// The local qdisc refused `seg` (`NET_XMIT_DROP`): `__tcp_transmit_skb` calls `tcp_enter_cwr` and
    /// returns the error, and the sender stops (`tcp_write_xmit`'s `break`, `tcp_xmit_retransmit_queue`'s)
    /// until the next ACK or timer.
    ///
    /// A driver that hands each segment down before it asks for the next, as the kernel does, always
    /// refuses the last one built. New data then stays at the head of the write queue, unsent: snd_nxt
    /// back to its start, the departure time and Minshall's mark as they were (`tcp_event_new_data_sent`,
    /// `tcp_update_skb_after_send` and `tcp_minshall_update` run only for an skb the qdisc took). The
    /// counters `__tcp_transmit_skb` moved before the attempt stay moved (`bytes_sent`, `data_segs_out`,
    /// as `tcpi_bytes_sent` counts it; a refused retransmission counts in `total_retrans`). A refused
    /// retransmission is still to be sent; a refused loss probe is no probe. If later data already
    /// left (a driver that hands down a batch), the refused segment is lost instead.
    pub fn on_local_drop(&mut self, now: Nanos, seg: &Segment) {
        self.local_drops += 1;
        if seg.payload_len > 0 || seg.has(flags::FIN) {
            // A refused pure ACK stops nothing: it left no write queue.
            self.local_block = true;
            self.refused(seg);
        }
        if self.ca_state < CaState::Cwr && self.can_send_data() {
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
        }
        if self.packets_out == 0 {
            // Nothing in flight, so no ACK will come: `tcp_write_xmit` returns true and
            // `tcp_check_probe_timer` arms the zero-window probe timer at `tcp_probe0_base`; its
            // `tcp_write_wakeup` sends the segment (`tcp_send_probe0` waits
            // `TCP_RESOURCE_PROBE_INTERVAL` after another refusal).
            self.clear_xmit_timer();
            let wait = if self.wakeup_out {
                TCP_RESOURCE_PROBE_INTERVAL
            } else {
                self.rto.max(self.cfg.min_rto)
            };
            self.probe_at = Some(now + wait);
        } else if self.rto_at.is_none() {
            self.reset_xmit_timer(now + self.rto);
        }
        if std::mem::take(&mut self.rto_rexmit_built) {
            // tcp_retransmit_timer(): the expiry's retransmission refused by local congestion: no
            // backoff, and the timer again in TCP_RESOURCE_PROBE_INTERVAL (Linux 6.12).
            if let Some((rto, backoff)) = self.rto_rexmit.take() {
                (self.rto, self.backoff) = (rto, backoff);
                self.reset_xmit_timer(now + TCP_RESOURCE_PROBE_INTERVAL);
            }
        }
    }

    /// Take back the data segment `seg` the qdisc refused (see `on_local_drop`).
    fn refused(&mut self, seg: &Segment) {
        let Some(start) = self.snd_abs(seg.seq) else {
            return;
        };
        let Ok(i) = self.rtx.binary_search_by(|t| t.start.cmp(&start)) else {
            return;
        };
        // The queue's entries the segment covers: several for a GSO segment, one for a FIN alone.
        let end = start + seg.payload_len as u64;
        let j = i + self
            .rtx
            .range(i..)
            .take_while(|t| t.start < end)
            .count()
            .max(1);
        let tail = j == self.rtx.len();
        // A loss probe refused (`tcp_send_loss_probe` skips `probe_sent`): no episode, not counted.
        let probe = tail && self.tlp_high_seq != 0 && self.tlp_high_seq == self.snd_nxt;
        if probe {
            self.tlp_high_seq = 0;
            self.loss_probes -= 1;
        }
        let untouched = self
            .rtx
            .range(i..j)
            .all(|t| !t.ever_retrans && !t.sacked && !t.lost);
        if tail && untouched {
            let n = (j - i) as u32;
            // The skb never left the write queue: its head again.
            let last = &self.rtx[j - 1];
            self.snd.wq.push_front(crate::sndbuf::WqSkb {
                end: last.end,
                psh: last.psh,
            });
            self.snd.rtx_skbs -= self.rtx.range(i..j).filter(|t| t.skb_end).count() as u32;
            self.snd_nxt = start;
            if self.rtx[j - 1].fin {
                self.fin_sent = false;
            }
            // Its departure stamp, before `tcp_update_skb_after_send` would have moved it on.
            self.wstamp = self.rtx[i].sent_at;
            self.snd_sml = self.prior_snd_sml;
            self.rtx.truncate(i);
            // Its data may be sent again in other segments, which no SACK has tagged.
            self.sack_cache = Default::default();
            self.packets_out -= n;
            if self.in_cwnd_reduction() {
                self.prr_out = self.prr_out.saturating_sub(n);
            }
        } else if j == i + 1 && self.rtx[i].retrans {
            self.rtx[i].retrans = false;
            self.retrans_out -= 1;
            self.lost_pending += 1;
        } else if !(probe && self.tlp_retrans) {
            for k in i..j {
                if !self.rtx[k].sacked && !self.rtx[k].lost {
                    self.mark_lost(k);
                }
            }
        }
    }
}
