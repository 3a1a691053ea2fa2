//! The receive path (`net/ipv4/tcp_input.c`): the handshake's answers, ACK processing (`tcp_ack`: the
//! window, the SACK scoreboard, the retransmission queue cleaned, RTT samples), the RTT estimator and
//! RTO, and data reception with the ACKs it calls for (delayed ACKs, quickack, SACK blocks).

use crate::{
    ecn, flags, CaState, Connection, Nanos, Segment, State, SynTx, TcpOptions, XmitTimer, MS,
    TCP_DELACK_MIN, TCP_MAX_QUICKACKS, TCP_MSS_DEFAULT, TCP_RTO_MAX, TS_OPTLEN,
};

impl Connection {
    /// A segment arrived from the peer. Never panics on any input.
    ///
    /// Inline (into the simulator's socket): a call layer less for every segment; the handshake's
    /// states are out of line.
    #[inline]
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

    #[inline(never)]
    fn rcv_listen(&mut self, now: Nanos, seg: &Segment) {
        if seg.has(flags::RST) || seg.has(flags::ACK) || !seg.has(flags::SYN) {
            return;
        }
        self.irs = seg.seq;
        self.have_irs = true;
        self.rcv_nxt = 1;
        self.rcv_wup = 1;
        self.negotiate(&seg.options, true);
        // tcp_openreq_init_rwin(): the SYN-ACK offers the buffer in whole segments less the timestamps.
        let (rcv_wnd, rcv_wscale) = self
            .rb
            .select_initial_window(self.advmss(), seg.options.wscale.is_some());
        self.rcv_wnd_adv = rcv_wnd as u64;
        self.rcv_wscale = rcv_wscale;
        // `tcp_ecn_create_request`: a SYN with ECE and CWR asks for ECN; an ECT SYN asking is refused
        // (it would be a broken middlebox's doing) unless this end runs DCTCP.
        self.ecn_ok = seg.has(flags::ECE)
            && seg.has(flags::CWR)
            && (seg.ecn == ecn::NOT_ECT || self.ca_needs_ecn());
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
            self.rb.window_clamp = self.rb.window_clamp.min(65535);
        }
        let _ = we_are_server;
        // tcp_mtu_to_mss: the floor (tcp_min_snd_mss, 48) holds before the options are taken off, so
        // the smallest segment with timestamps carries 36 bytes and fits an 88-byte MTU.
        let mut mss = self.cfg.mss.min(peer_mss).max(48);
        if self.ts_ok {
            mss -= TS_OPTLEN;
        }
        self.mss = mss;
        self.mss_clamp = self.cfg.mss.min(peer_mss);
        // tcp_initialize_rcv_mss()
        self.rcv_mss = self
            .cfg
            .mss
            .min(peer_mss)
            .min((self.rcv_wnd_adv / 2) as u32)
            .clamp(88, TCP_MSS_DEFAULT);
    }

    #[inline(never)]
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
        self.ecn_ok = self.wants_ecn() && seg.has(flags::ECE) && !seg.has(flags::CWR);
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
        self.dctcp_init();
        self.ack_now = true;
        self.clear_xmit_timer();
        if self.fin_queued {
            self.state = State::FinWait1;
        }
        // data on the SYN-ACK is not modelled (no TFO)
    }

    /// `tcp_init_transfer()`: cwnd and CC state at the start of data.
    fn established(&mut self, now: Nanos) {
        self.init_buffer_space(now);
        self.cwnd = self.cfg.initial_cwnd.max(1);
        self.ca.init(now, self.snd_nxt);
        if self.ca_is_bbr() {
            self.bbr_init(now);
        }
        self.init_sndbuf();
    }

    fn rcv_established(&mut self, now: Nanos, seg: &Segment) {
        let len = seg.payload_len as u64;
        let seq = self.rcv_abs(seg.seq);
        let fin = seg.has(flags::FIN);
        let end = seq + len as i64 + fin as i64;
        let rcv_wup = self.rcv_wup as i64;
        let win_right = (self.rcv_nxt + self.cur_rcv_window()) as i64;
        let completes_handshake = self.state == State::SynReceived;

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
                self.sack_cache = Default::default();
                self.snd.rtx_skbs = 0;
                self.packets_out = 0;
                self.sacked_out = 0;
                self.lost_out = 0;
                self.retrans_out = 0;
                self.lost_pending = 0;
            }
            return;
        }
        if !acceptable {
            // tcp_send_dupack(): old data is reported as a D-SACK.
            if len > 0 && seq < self.rcv_nxt as i64 {
                self.dsack_set(seq.max(0) as u64, (end.max(0) as u64).min(self.rcv_nxt));
            }
            self.ack_now = true;
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
                self.clear_xmit_timer();
                self.established(now);
            } else {
                return;
            }
        }
        if !self.process_ack(now, seg, seq) {
            return;
        }
        self.snd.ack_check = true;
        // Linux's server runs `tcp_ack` on the ACK that completes the handshake before
        // `tcp_init_transfer` initialises the module: DCTCP starts after it.
        if completes_handshake {
            self.dctcp_init();
        }
        if self.state == State::Closed {
            return;
        }
        // (tcp_rcv_established's: not the ACK that completes the handshake)
        if !completes_handshake {
            self.rcv_rtt_measure_ts(now, len, seg.options.timestamps.map(|t| t.1));
        }
        if len > 0 || fin {
            self.process_data(now, seq, seg, fin);
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
        // FLAG_ECE (`tcp_ecn_rcv_ecn_echo`): the ACK is dubious, and `tcp_try_to_open` reduces the window.
        let ece = self.ecn_ok && seg.has(flags::ECE) && !seg.has(flags::SYN);
        let has_sack = self.sack_ok && !seg.options.sack_blocks.is_empty();
        // Nothing out, nothing newly acknowledged: `tcp_ack`'s `no_queue` (`!prior_packets`), every
        // segment of a one-way transfer's receiver. Without SACK blocks, ECE, a probe episode, a
        // recovery state or BBR's per-ACK model the path below would only update the window, tell
        // the module, take the ACK's timestamp echo and reset the rate sample: that, here.
        if ack == self.snd_una
            && self.packets_out == 0
            && self.rtx.is_empty()
            && !has_sack
            && !ece
            && self.tlp_high_seq == 0
            && self.ca_state == CaState::Open
            && !self.ca_is_bbr()
        {
            self.ack_nothing_out(now, seg, seq, ack);
            return true;
        }
        let prior_fack = self.fack(self.snd_una);
        // What was lost before this ACK (for the rate sample).
        let lost_before = self.lost_total;
        let prior_una = self.snd_una;
        let flag_win_update = self.ack_begin(seg, seq, ack);

        // SACK processing (tcp_sacktag_write_queue): the valid blocks, in sequence order.
        let mut newly_sacked = 0u32;
        let mut sack_rtt: Option<u64> = None;
        let mut ca_rtt_sent: Option<Nanos> = None;
        let mut dsack = crate::undo::Dsack::default();
        // FLAG_ORIG_SACK_ACKED, for F-RTO.
        let mut orig_sack_acked = false;
        if has_sack {
            // tcp_check_dsack(): is the first block a duplicate's report?
            let mut raw = [(0u64, 0u64); 2];
            let mut nraw = 0;
            for &(l, r) in seg.options.sack_blocks.iter().take(2) {
                let (Some(s), Some(e)) = (self.snd_abs(l), self.snd_abs(r)) else {
                    break;
                };
                raw[nraw] = (s, e);
                nraw += 1;
            }
            dsack = self.check_dsack(&raw[..nraw], ack, prior_una);
            let mut blocks = [(0u64, 0u64); 4];
            let mut n = 0;
            for &(l, r) in seg.options.sack_blocks.iter().take(4) {
                let (Some(s), Some(e)) = (self.snd_abs(l), self.snd_abs(r)) else {
                    continue;
                };
                if s >= e || s < ack.max(self.snd_una) || e > self.snd_nxt {
                    continue; // D-SACK or bogus
                }
                blocks[n] = (s, e);
                n += 1;
            }
            blocks[..n].sort_unstable();
            let mut fack = self.fack(ack);
            // The lowest original (never retransmitted) segment newly SACKed below the highest SACK:
            // it was reordered, not lost (`state->reord`).
            let mut reord = self.snd_nxt;
            // Linux's `recv_sack_cache`: the segments within a block the last tagging walked were
            // SACKed then and still are, so a block inside one is skipped, and a block that grew
            // from one is walked from past it. A block tags the segments that start at or after its
            // left edge and end by its right one.
            let cache = self.sack_cache;
            for &(s, e) in &blocks[..n] {
                let covered = cache.iter().fold(
                    0,
                    |m, &(cs, ce)| if cs <= s && s < ce { m.max(ce) } else { m },
                );
                if e <= covered {
                    continue;
                }
                let mut i = self
                    .rtx
                    .partition_point(|t| t.start < s || t.seq_end() <= covered);
                while i < self.rtx.len() {
                    let t = &mut self.rtx[i];
                    if t.start >= e {
                        break;
                    }
                    if t.seq_end() <= e && !t.sacked {
                        // tcp_sacktag_one()
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
                        let (ever, start, end, sent) =
                            (t.ever_retrans, t.start, t.seq_end(), t.sent_at);
                        if !ever && start < fack {
                            reord = reord.min(start);
                        }
                        orig_sack_acked |= !ever && end <= self.high_seq;
                        fack = fack.max(end);
                        crate::rate::skb_delivered(&mut self.rs, &mut self.first_tx_mstamp, t);
                        t.tx_delivered_mstamp = 0;
                        self.rack_advance(ever, end, sent, now);
                    }
                    i += 1;
                }
            }
            self.sack_cache = blocks;
            self.highest_sack = fack;
            self.check_sack_reordering(reord);
        }
        // `tcp_in_ack_event`: the module sees snd_una moved and this ACK's SACKed packets delivered;
        // those it acknowledges cumulatively count after (`tcp_clean_rtx_queue`).
        let sack_ce = if ece { newly_sacked } else { 0 };
        self.ca_in_ack_event(
            ack,
            self.delivered.wrapping_add(newly_sacked),
            self.delivered_ce.wrapping_add(sack_ce),
        );
        self.ecn_accept_cwr(seg);
        // The echo of this ACK's timestamp, to tell a retransmission acknowledged for its original.
        let tsecr = seg.options.timestamps.map_or(0, |(_, e)| e);

        // tcp_clean_rtx_queue()
        let mut acked_pkts = 0u32;
        let mut acked_sacked_before = 0u32;
        let mut seq_rtt: Option<u64> = None;
        let mut any_retrans_acked = false;
        let mut fin_acked = false;
        // The lowest original segment acknowledged without a SACK first: below the highest SACK, the
        // hole it filled was reordering.
        let mut reord = self.snd_nxt;
        while let Some(t) = self.rtx.front() {
            if t.seq_end() > ack {
                break;
            }
            let t = self.rtx.pop_front().unwrap_or_else(|| unreachable!());
            self.snd.rtx_skbs -= t.skb_end as u32;
            crate::rate::skb_delivered(&mut self.rs, &mut self.first_tx_mstamp, &t);
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
                orig_sack_acked = true;
                if seq_rtt.is_none() {
                    seq_rtt = Some(now.saturating_sub(t.sent_at));
                }
                ca_rtt_sent = Some(ca_rtt_sent.map_or(t.sent_at, |x| x.max(t.sent_at)));
            }
            if t.fin {
                fin_acked = true;
            }
            if !t.sacked && self.sack_ok {
                if !t.ever_retrans {
                    reord = reord.min(t.start);
                }
                // Delivered now, unless the echo predates the retransmission: then the original was
                // (tcp_skb_spurious_retrans).
                let spurious = t.ever_retrans
                    && self.ts_ok
                    && tsecr != 0
                    && (tsecr.wrapping_sub(Self::ts_now(t.sent_at)) as i32) < 0;
                if !spurious {
                    self.rack_advance(t.ever_retrans, t.seq_end(), t.sent_at, now);
                }
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
            self.rto_rexmit = None;
        }
        // Partially acked head segment: trim it (tcp_trim_head).
        if let Some(t) = self.rtx.front_mut() {
            if t.start < ack && ack < t.end {
                t.start = ack;
                // It may now lie inside a cached block without having been SACKed.
                self.sack_cache = Default::default();
            }
        }
        let data_acked = acked_pkts > 0;
        let delivered = (acked_pkts - acked_sacked_before) + newly_sacked;
        self.delivered = self.delivered.wrapping_add(delivered);
        if ece {
            self.delivered_ce = self.delivered_ce.wrapping_add(delivered);
        }

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
        // A hole below the highest SACK filled by an original: reordering.
        if data_acked && reord < prior_fack {
            self.check_sack_reordering(reord);
        }
        // FLAG_SET_XMIT_TIMER: arm the probe or RTO timer again when data was acknowledged, or when a
        // SACK measured an RTT from data sent before the head's last (re)transmission.
        let mut set_xmit_timer = data_acked
            || (rtt.is_some()
                && sack_rtt.is_some_and(|r| {
                    self.rtx
                        .front()
                        .is_some_and(|h| r > now.saturating_sub(h.sent_at))
                }));
        let ca_rtt_us = ca_rtt_sent.map(|s| now.saturating_sub(s) / 1000);
        self.rs.rtt_us = ca_rtt_us.map_or(-1, |r| r as i64);
        // FLAG_ACK_MAYBE_DELAYED: one runt segment ACKed alone, probably by a delayed ACK.
        self.rs.is_ack_delayed = seq_rtt.is_some()
            && acked_pkts == 1
            && acked_sacked_before == 0
            && newly_sacked == 0
            && ack - prior_una < self.mss as u64
            && self.rs.prior_delivered.wrapping_add(1) == self.delivered;
        if data_acked {
            if let Some(exit) = self.ca.acked(
                now,
                ca_rtt_us,
                self.cwnd,
                self.ssthresh,
                self.snd_una,
                self.snd_nxt,
                // Read by HyStart's ACK train alone, in slow start (a division saved otherwise).
                if self.cwnd < self.ssthresh {
                    self.pacing_rate()
                } else {
                    0
                },
                self.pacing_status != crate::PacingStatus::None,
            ) {
                let (crate::cubic::HystartExit::Train(ss) | crate::cubic::HystartExit::Delay(ss)) =
                    exit;
                self.ssthresh = ss;
                self.hystart_stats.count(exit);
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

        self.rack_update_reo_wnd(self.rs.prior_delivered);
        if self.tlp_high_seq != 0 {
            let not_dup = seg.payload_len > 0 || flag_win_update || data_acked;
            self.process_tlp_ack(ack, snd_una_advanced, not_dup, newly_sacked > 0, dsack.tlp);
        }

        if fin_acked {
            self.on_fin_acked();
        }

        // tcp_fastretrans_alert()
        let dubious =
            is_dup || newly_sacked > 0 || ece || dsack.seen || self.ca_state != CaState::Open;
        let mut newly_lost = 0;
        if dubious {
            let f = crate::undo::AckFlags {
                ece,
                data_sacked: newly_sacked > 0,
                dup: is_dup,
                orig_sack_acked,
            };
            newly_lost = self.fastretrans_alert(now, prior_una, f, &mut set_xmit_timer);
        }
        // tcp_set_xmit_timer()
        if set_xmit_timer && !self.schedule_loss_probe(now, true) {
            self.rearm_rto(now);
        }
        self.rate_gen(now, delivered, self.lost_total.wrapping_sub(lost_before));
        // tcp_cong_control(): a `cong_control` module (BBR) does it all.
        if self.ca_is_bbr() {
            self.bbr_main(now);
        } else if self.in_cwnd_reduction() {
            self.cwnd_reduction(delivered, newly_lost, snd_una_advanced);
        } else if data_acked {
            self.cong_avoid(now, delivered.max(1));
        }
        if self.packets_out == 0 && self.snd_nxt < self.send_limit_end() && self.snd_wnd == 0 {
            self.arm_probe(now);
        }
        true
    }

    /// What every ACK that is not discarded starts with: the rate sample it builds (tcp_rate.c) reset,
    /// the send window updated (`tcp_ack_update_window`: by a newer segment or a newer ACK), the
    /// timestamp echo kept for undo, and retransmissions held by the last ACK let go. Returns whether
    /// the window changed (`FLAG_WIN_UPDATE`).
    #[inline]
    fn ack_begin(&mut self, seg: &Segment, seq: i64, ack: u64) -> bool {
        self.rs = crate::rate::RateSample {
            prior_in_flight: self.in_flight(),
            ..Default::default()
        };
        self.undo.rcv_tsecr = if self.ts_ok {
            seg.options.timestamps.map_or(0, |(_, e)| e)
        } else {
            0
        };
        self.undo.hold_rexmit = false;
        let nwin = (seg.window as u64) << self.snd_wscale;
        let seq_u = seq.max(0) as u64;
        let mut flag_win_update = false;
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
        flag_win_update
    }

    /// `tcp_ecn_accept_cwr` (on pure ACKs too, since Linux 5.x): the peer has reduced its window;
    /// data with CWR is ACKed at once, as the sender's window may be down to one segment.
    #[inline]
    fn ecn_accept_cwr(&mut self, seg: &Segment) {
        if seg.has(flags::CWR) {
            self.ecn_demand_cwr = false;
            if seg.payload_len > 0 || seg.has(flags::FIN) {
                self.ack_now = true;
            }
        }
    }

    /// `process_ack` when nothing is out and the ACK acknowledges nothing (its caller's tests): the
    /// same writes as the full path's, in its order, less the steps that find nothing to do (no
    /// queue to clean or tag, no RTT sample, no duplicate ACK with nothing out, no loss to detect,
    /// no cwnd to grow). Linux's `tcp_ack` skips them the same way (`goto no_queue`); this model
    /// still resets the rate sample and asks for the window probe as its full path does.
    fn ack_nothing_out(&mut self, now: Nanos, seg: &Segment, seq: i64, ack: u64) {
        self.ack_begin(seg, seq, ack);
        self.ca_in_ack_event(ack, self.delivered, self.delivered_ce);
        self.ecn_accept_cwr(seg);
        if !self.sack_ok {
            self.sacked_out = self.sacked_out.min(self.packets_out);
        }
        self.rate_gen(now, 0, 0);
        if self.snd_nxt < self.send_limit_end() && self.snd_wnd == 0 {
            self.arm_probe(now);
        }
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

    /// `tcp_rearm_rto()`: the RTO from now — or, when it replaces RACK's reordering timer or the loss
    /// probe's, from the head's send time (`tcp_rto_delta_us`), so that those timers do not put the
    /// RTO off. Nothing out: no timer.
    pub(crate) fn rearm_rto(&mut self, now: Nanos) {
        if self.packets_out == 0 && self.syn_tx == SynTx::None && !self.syn_outstanding() {
            self.clear_xmit_timer();
            return;
        }
        let mut rto = self.rto;
        if self.xmit_timer != XmitTimer::Retrans {
            rto = self.rto_delta(now).max(1) as Nanos;
        }
        self.reset_xmit_timer(now + rto);
    }

    /// Receive data (`tcp_data_queue`), and schedule the ACK (`__tcp_ack_snd_check`). `seq` is the
    /// segment's absolute sequence number.
    fn process_data(&mut self, now: Nanos, seq: i64, seg: &Segment, fin: bool) {
        let (len, ecn_field) = (seg.payload_len as u64, seg.ecn);
        if self.fin_received {
            // Anything after the FIN: just acknowledge.
            self.ack_now = true;
            return;
        }
        let rcv_nxt = self.rcv_nxt as i64;
        let data_end = seq + len as i64;
        if len > 0 {
            // tcp_measure_rcv_mss(): a GSO packet a veth passed whole is measured by its gso_size.
            let seg_len = seg.measured_len();
            self.measure_scaling_ratio(seg_len);
            if seg_len >= self.rcv_mss {
                self.rcv_mss = seg_len.min(self.cfg.mss);
            }
            // tcp_event_data_recv(): the first data starts quickack mode
            if !self.first_data_seen {
                self.first_data_seen = true;
                self.incr_quickack();
            }
        }
        let win_right =
            (self.rcv_nxt + self.cur_rcv_window().max(self.tcp_space().max(0) as u64)) as i64;
        if data_end <= rcv_nxt && len > 0 {
            // Duplicate: tcp_data_queue reports it (D-SACK), then out_of_window → quickack + dupack.
            self.dsack_set(seq.max(0) as u64, data_end as u64);
            self.incr_quickack();
            self.ack_now = true;
            return;
        }
        let s = seq.max(rcv_nxt);
        let e = data_end.min(win_right);
        let had_ooo = !self.ooo.is_empty();
        if s < e {
            if seq < rcv_nxt {
                // Partial packet, seq < rcv_nxt < end: its head is a duplicate.
                self.dsack_set(seq.max(0) as u64, self.rcv_nxt);
            }
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
                // tcp_event_data_recv(), then the application's read when it reads as data comes
                self.measure_push(seg);
                self.rcv_rtt_measure(now);
                self.ecn_check_ce(now, ecn_field);
                if e - s >= 128 {
                    self.grow_window((e - s).min(u32::MAX as i64) as u32);
                }
                self.deliver(now, got);
                self.sack_recent.retain(|&(_, be)| be > new_nxt);
                if had_ooo {
                    // RFC 5681 4.2: ACK at once when a gap is filled
                    self.ack_now = true;
                }
            } else {
                // out of order: queue, SACK, immediate ACK (tcp_data_queue_ofo, which opens the window
                // on SACK connections too; __tcp_ack_snd_check ACKs while the ofo queue is not empty).
                // No quickack mode: Linux 4.18 dropped it for out-of-order data (a3893637e1eb, "tcp: do
                // not force quickack when receiving out-of-order packets"), so once the hole is filled
                // the receiver ACKs every second segment again.
                self.ecn_check_ce(now, ecn_field);
                if self.sack_ok {
                    self.grow_window((e - s).min(u32::MAX as i64) as u32);
                }
                self.dsack_ofo(s as u64, e as u64);
                self.ooo_insert(s as u64, e as u64);
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
            // ... and the right edge advances far enough (or the application has read everything)
            let more_than_one = self.rcv_nxt - self.rcv_wup > self.rcv_mss as u64
                && (self.unread == 0 || self.raw_select_window() >= self.rcv_wnd_adv);
            if more_than_one || self.quick > 0 || !self.cfg.delayed_ack || self.pushed_and_read() {
                self.ack_now = true;
            } else if self.delack_at.is_none() {
                self.delack_at = Some(now + TCP_DELACK_MIN);
            }
        }
    }

    /// `tcp_measure_rcv_mss()`'s push marks (Linux 6.12), on in-order data: a full-sized segment with
    /// PSH — the end of an application's write — sets `ICSK_ACK_PUSHED`; so does a shorter one, unless
    /// it is the second of that size in a row without PSH, FIN or SYN (then it is the peer's MSS).
    fn measure_push(&mut self, seg: &Segment) {
        // TCP_REMNANT: FIN, URG, SYN, PSH.
        const REMNANT: u8 = flags::FIN | 0x20 | flags::SYN | flags::PSH;
        let lss = std::mem::take(&mut self.last_seg_size);
        if seg.measured_len() >= self.rcv_mss {
            self.ack_pushed |= seg.has(flags::PSH);
            return;
        }
        let len = seg.payload_len + seg.header_len();
        if len >= TCP_MSS_DEFAULT + 20 || (len >= 88 + 20 && seg.flags & REMNANT == 0) {
            let len = len - (20 + if self.ts_ok { TS_OPTLEN } else { 0 });
            self.last_seg_size = len;
            if len == lss {
                self.rcv_mss = len;
                return;
            }
        }
        self.ack_pushed = true;
    }

    /// `tcp_cleanup_rbuf()`'s ACK for pushed data: the application has read everything there is,
    /// out-of-order data included (`sk_rmem_alloc` is 0). Interactive (pingpong) mode is not modelled.
    pub(crate) fn pushed_and_read(&self) -> bool {
        self.ack_pushed && self.unread == 0 && self.ooo.is_empty()
    }

    fn deliver(&mut self, now: Nanos, got: u64) {
        // Sequence space counts payload only here (FIN handled separately).
        self.bytes_delivered += got;
        if self.autoread {
            self.bytes_read += got;
            self.rcv_space_adjust(now);
        } else {
            self.unread += got;
        }
    }

    fn incr_quickack(&mut self) {
        self.enter_quickack_mode(TCP_MAX_QUICKACKS);
    }

    /// `tcp_incr_quickack(sk, max)`: ACK the next segments at once, as many as half the window holds,
    /// at most `max`.
    fn enter_quickack_mode(&mut self, max: u32) {
        let mut q =
            (self.rcv_wnd_adv / (2 * self.rcv_mss.max(1) as u64)).min(u32::MAX as u64) as u32;
        if q == 0 {
            q = 2;
        }
        q = q.min(max);
        if q > self.quick {
            self.quick = q;
        }
    }

    /// `tcp_ecn_check_ce` on new data (in order or not; never on a duplicate): CE asks for ECE until the
    /// peer's CWR, with two quick ACKs; Not-ECT after ECT was seen is likely a retransmission, also
    /// worth two quick ACKs. DCTCP's receiver tracks the CE state itself (`dctcp_ece_ack_update`).
    #[inline]
    fn ecn_check_ce(&mut self, now: Nanos, ecn_field: u8) {
        if self.ecn_ok {
            self.ecn_check_ce_ecn(now, ecn_field);
        }
    }

    /// `ecn_check_ce` on an ECN connection (out of line: most connections are not).
    #[inline(never)]
    fn ecn_check_ce_ecn(&mut self, now: Nanos, ecn_field: u8) {
        match ecn_field {
            ecn::NOT_ECT => {
                if self.ecn_seen {
                    self.enter_quickack_mode(2);
                }
            }
            ecn::CE => {
                self.ce_received += 1;
                self.dctcp_ece_ack_update(now, true);
                if !self.ecn_demand_cwr {
                    self.enter_quickack_mode(2);
                    self.ecn_demand_cwr = true;
                }
                self.ecn_seen = true;
            }
            _ => {
                self.dctcp_ece_ack_update(now, false);
                self.ecn_seen = true;
            }
        }
    }

    fn ooo_insert(&mut self, s: u64, e: u64) {
        let (ns, ne) = merge_block(&mut self.ooo, s, e);
        // tcp_sack_new_ofo_skb(): the block holding this segment goes first
        self.sack_recent.retain(|&(a, b)| b < ns || a > ne);
        self.sack_recent.insert(0, (ns, ne));
        self.sack_recent.truncate(4);
    }
}

/// Merge `[s, e]` into a sorted list of disjoint blocks that do not touch, in place, and return the
/// block that now holds it: the blocks from the first that reaches `s` to the last that starts by `e`
/// become one with it. (A new list a call was an allocation per out-of-order segment.)
fn merge_block(list: &mut Vec<(u64, u64)>, s: u64, e: u64) -> (u64, u64) {
    let i = list.partition_point(|&(_, b)| b < s);
    let j = i + list[i..].partition_point(|&(a, _)| a <= e);
    if i == j {
        list.insert(i, (s, e));
        return (s, e);
    }
    let merged = (s.min(list[i].0), e.max(list[j - 1].1));
    list[i] = merged;
    list.drain(i + 1..j);
    merged
}

#[cfg(test)]
mod tests {
    use super::merge_block;

    /// The list the merge gave before it was done in place: rebuilt, each block kept, placed or
    /// merged in one pass.
    fn rebuilt(list: &[(u64, u64)], s: u64, e: u64) -> (Vec<(u64, u64)>, (u64, u64)) {
        let (mut ns, mut ne) = (s, e);
        let mut out = Vec::new();
        let mut placed = false;
        for &(a, b) in list {
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
        (out, (ns, ne))
    }

    #[test]
    fn merges_as_the_rebuilt_list() {
        // Blocks of a small space, so that segments touch, overlap, straddle several blocks and fall
        // in gaps; a fixed LCG for the draws.
        let mut draw = crate::test_draws(26);
        for _ in 0..200 {
            let mut list = Vec::new();
            for _ in 0..40 {
                let s = draw(500);
                let e = s + draw(30);
                let (want, held) = rebuilt(&list, s, e);
                assert_eq!(merge_block(&mut list, s, e), held, "[{s}, {e}]");
                assert_eq!(list, want, "[{s}, {e}]");
            }
        }
    }
}

#[cfg(test)]
mod sack_cache_tests {
    use crate::segment::{flags, Segment, TcpOptions};
    use crate::{Config, Connection, MS};

    /// The state compared: everything but the cache itself.
    fn scoreboard(c: &Connection) -> String {
        let mut c = c.clone();
        c.sack_cache = Default::default();
        format!("{c:?}")
    }

    /// The SACK cache (`sack_cache`) changes nothing: a sender that skips blocks within the last
    /// tagged ACK's blocks ends each ACK in the state of one whose cache is emptied before every ACK,
    /// so that it walks every block in full, as the walk did before the cache. Checked on random ACK
    /// sequences (a fixed LCG): the blocks' edges on segment boundaries or anywhere, repeated, grown
    /// at either edge, partly below the cumulative ACK or past snd_nxt, up to four; cumulative ACKs
    /// that move by whole segments or into one (trimming the head); retransmissions and timeouts
    /// between ACKs. The whole connection is compared (scoreboard, counters, RACK, the rate sample,
    /// timers), and what it sends.
    #[test]
    fn skipping_cached_blocks_leaves_the_state_of_the_full_walk() {
        let mut draw = crate::test_draws(43);
        let (mut within, mut grown, mut trims, mut rtos) = (0u32, 0u32, 0u32, 0u64);
        for round in 0..150 {
            let cfg = Config {
                timestamps: draw(2) == 0,
                ..Config::default()
            };
            let mut c = Connection::client(cfg.clone(), 0, 1000);
            let mut srv = Connection::server(cfg, 7000);
            let syn = c.poll_transmit(0).unwrap();
            srv.on_segment(MS, &syn);
            let synack = srv.poll_transmit(MS).unwrap();
            let mut now = 2 * MS;
            c.on_segment(now, &synack);
            c.write(400 * c.mss as u64);
            c.cwnd = 40 + draw(60) as u32;
            let mss = c.mss as u64;
            let mut r = c.clone();
            let srv_seq = synack.seq.wrapping_add(1);
            let mut prev: Vec<(u64, u64)> = Vec::new();
            let aligned = draw(2) == 0;
            for step in 0..120 {
                now += draw(3) * MS / 2 + 1000;
                if draw(40) == 0 {
                    now += 1500 * MS; // past the RTO: Loss, and the queue marked lost
                }
                // What the sender sends now (new data, retransmissions, probes), the same for both.
                loop {
                    let (a, b) = (c.poll_transmit(now), r.poll_transmit(now));
                    assert_eq!(a, b, "round {round} step {step}");
                    if a.is_none() {
                        break;
                    }
                }
                let (una, nxt) = (c.snd_una, c.snd_nxt);
                if nxt <= una + 1 {
                    break;
                }
                let edge = |v: u64| {
                    if aligned {
                        // Below una (a block partly under the cumulative ACK) the
                        // rounding wraps, as it did in the release build it was written in.
                        una.wrapping_add(v.wrapping_sub(una) / mss * mss)
                    } else {
                        v
                    }
                };
                let mut ack = una;
                match (draw(4), prev.first()) {
                    (0, _) => ack = edge(una + draw(nxt - una + 1)).min(nxt),
                    // Into the last ACK's first block: a head that straddled its left edge, trimmed.
                    (1, Some(&(s, e))) if s < e => ack = (s + draw(e - s)).clamp(una, nxt),
                    _ => {}
                }
                trims += ((ack - una) % mss != 0) as u32;
                let mut blocks: Vec<(u64, u64)> = Vec::new();
                for &(s, e) in prev.iter().take(3) {
                    match draw(4) {
                        0 => {}
                        1 => blocks.push((s, e.wrapping_add(edge(draw(4 * mss))).min(nxt + mss))),
                        2 => blocks.push((edge(s.saturating_sub(draw(3 * mss))), e)),
                        _ => blocks.push((s, e)),
                    }
                }
                if draw(3) > 0 {
                    let s = match draw(4) {
                        0 => ack,
                        _ => edge(ack + draw(nxt - ack + 1)),
                    };
                    let e = edge(s + 1 + draw(8 * mss)).max(s + 1).min(nxt + draw(2));
                    blocks.insert(0, (s, e));
                }
                blocks.truncate(4);
                // What the cache will skip, for the count below.
                for &(s, e) in &blocks {
                    let inside = |&(cs, ce): &(u64, u64)| cs <= s && s < ce;
                    if c.sack_cache.iter().any(|b| inside(b) && e <= b.1) {
                        within += 1;
                    } else if c.sack_cache.iter().any(inside) {
                        grown += 1;
                    }
                }
                let seg = Segment {
                    seq: srv_seq,
                    ack: c.snd_wire(ack),
                    flags: flags::ACK,
                    window: 65535,
                    options: TcpOptions {
                        sack_blocks: blocks
                            .iter()
                            .map(|&(s, e)| (c.snd_wire(s), c.snd_wire(e)))
                            .collect(),
                        ..TcpOptions::default()
                    },
                    ..Segment::default()
                };
                r.sack_cache = Default::default();
                c.on_segment(now, &seg);
                r.on_segment(now, &seg);
                assert_eq!(scoreboard(&c), scoreboard(&r), "round {round} step {step}");
                prev = blocks;
            }
            rtos += c.timeouts;
        }
        // The cache was used (blocks skipped whole, blocks walked from past a cached one), heads were
        // trimmed, and timeouts marked the queue lost.
        assert!(within > 2000, "blocks within the cache: {within}");
        assert!(grown > 2000, "blocks grown from a cached one: {grown}");
        assert!(trims > 1000, "heads trimmed: {trims}");
        assert!(rtos > 50, "timeouts: {rtos}");
    }
}
