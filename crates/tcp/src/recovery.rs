//! Loss recovery (`net/ipv4/tcp_input.c`): the congestion state machine run on dubious ACKs
//! (`tcp_fastretrans_alert`: Open, Disorder, CWR, Recovery, Loss), marking segments lost (RACK in
//! `rack.rs`; with it off the dupthresh rule with SACK, NewReno's head without), the cwnd reduction of
//! Recovery and CWR (PRR, RFC 6937), and entering Loss on a retransmission timeout (`tcp_enter_loss`).

use crate::undo::AckFlags;
use crate::{CaState, Connection, Nanos, REORDERING, TCP_INFINITE_SSTHRESH};

impl Connection {
    /// `tcp_fastretrans_alert()`, on a dubious ACK: leave a state whose episode is over (undoing it if
    /// it proved spurious, undo.rs), find losses (RACK, or without it the dupthresh rule and NewReno's
    /// head), and enter Recovery when something is lost. Returns the number of segments newly marked
    /// lost; clears `set_xmit_timer` when RACK armed its reordering timer instead.
    pub(crate) fn fastretrans_alert(
        &mut self,
        now: Nanos,
        prior_snd_una: u64,
        f: AckFlags,
        set_xmit_timer: &mut bool,
    ) -> u32 {
        let una_advanced = self.snd_una > prior_snd_una;
        let ece = f.ece;
        // A. An ECN echo's reduction is not to be undone.
        if ece {
            self.set_prior_ssthresh(0);
        }
        // D. exit conditions
        if self.ca_state == CaState::Open {
            self.undo_open();
        } else if self.snd_una >= self.high_seq {
            match self.ca_state {
                CaState::Cwr if self.snd_una != self.high_seq => {
                    self.end_cwnd_reduction();
                    self.ca_state = CaState::Open;
                }
                CaState::Recovery => {
                    if !self.sack_ok {
                        self.sacked_out = 0;
                    }
                    if self.try_undo_recovery() {
                        return 0;
                    }
                    self.end_cwnd_reduction();
                }
                _ => {}
            }
        }
        let rack = self.rack_on();
        let mut newly_lost = 0;
        // E. process the state
        match self.ca_state {
            CaState::Recovery => {
                if una_advanced && self.try_undo_partial(prior_snd_una) {
                    self.undo.hold_rexmit = true;
                    return 0;
                }
                if self.try_undo_dsack() {
                    self.try_to_open(ece);
                }
                if rack {
                    newly_lost += self.identify_packet_loss(now, set_xmit_timer).1;
                } else if self.sack_ok {
                    newly_lost += self.mark_lost_sack();
                } else if una_advanced && self.ca_state == CaState::Recovery {
                    // NewReno partial ACK: the new head is lost
                    newly_lost += self.mark_head_lost();
                }
                if self.ca_state != CaState::Recovery {
                    // Undone: a loss still evident starts a new recovery (reordering, then loss).
                    if self.time_to_recover(rack) {
                        self.enter_recovery(now, ece);
                    }
                }
                return newly_lost;
            }
            CaState::Loss => {
                self.process_loss(prior_snd_una, f);
                if !rack {
                    if self.ca_state == CaState::Loss && self.sack_ok {
                        newly_lost += self.mark_lost_sack();
                    }
                    if self.ca_state == CaState::Loss {
                        return newly_lost;
                    }
                } else {
                    let (lost_retrans, n) = self.identify_packet_loss(now, set_xmit_timer);
                    newly_lost += n;
                    if !(self.ca_state == CaState::Open || lost_retrans) {
                        return newly_lost;
                    }
                }
                // Undone, or retransmissions were lost: on to Recovery, as from Open.
            }
            _ => {}
        }
        if self.ca_state <= CaState::Disorder {
            self.try_undo_dsack();
        }
        if rack {
            newly_lost += self.identify_packet_loss(now, set_xmit_timer).1;
        } else if self.sack_ok {
            newly_lost += self.mark_lost_sack();
        }
        if !self.time_to_recover(rack) {
            self.try_to_open(ece);
            return newly_lost;
        }
        self.enter_recovery(now, ece);
        if !rack {
            newly_lost += self.mark_head_lost();
            if self.sack_ok {
                newly_lost += self.mark_lost_sack();
            }
        }
        newly_lost
    }

    /// `tcp_time_to_recover()`: a loss is proven, or (without RACK) more segments are SACKed than the
    /// reordering degree.
    fn time_to_recover(&self, rack: bool) -> bool {
        self.lost_out > 0 || (!rack && self.sacked_out + 1 > self.reordering)
    }

    /// `tcp_identify_packet_loss()` with RACK: returns whether a retransmission was found lost
    /// (`FLAG_LOST_RETRANS`) and how many segments were newly marked lost.
    fn identify_packet_loss(&mut self, now: Nanos, set_xmit_timer: &mut bool) -> (bool, u32) {
        if self.rtx.is_empty() {
            return (false, 0);
        }
        let (armed, lost_retrans, lost) = self.rack_mark_lost(now);
        if armed {
            *set_xmit_timer = false;
        }
        (lost_retrans, lost)
    }

    /// `tcp_try_to_open()`: an ECN echo reduces the window (`tcp_enter_cwr`: once, unless a reduction
    /// is under way); otherwise Open or Disorder.
    fn try_to_open(&mut self, ece: bool) {
        if ece && self.ca_state < CaState::Cwr {
            self.ece_reductions += 1;
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
        }
        if self.ca_state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// `tcp_try_keep_open()`: Open, or Disorder while anything is SACKed, lost or retransmitted.
    pub(crate) fn try_keep_open(&mut self) {
        let any_retrans = self.retrans_out > 0 || self.rtx.front().is_some_and(|t| t.ever_retrans);
        let state = if self.sacked_out + self.lost_out > 0 || any_retrans {
            CaState::Disorder
        } else {
            CaState::Open
        };
        if self.ca_state != state {
            self.ca_state = state;
            self.high_seq = self.snd_nxt;
        }
    }

    /// `tcp_enter_recovery()`: a new undo episode (undo.rs); the window is reduced unless a reduction
    /// is already under way (CWR, Recovery), and then, unless an ECN echo asked for it, may be undone.
    pub(crate) fn enter_recovery(&mut self, _now: Nanos, ece: bool) {
        self.fast_retransmits += 1;
        self.set_prior_ssthresh(0);
        self.init_undo();
        if !self.in_cwnd_reduction() {
            if !ece {
                let prior = self.current_ssthresh();
                self.set_prior_ssthresh(prior);
            }
            self.init_cwnd_reduction();
        }
        // `tcp_set_ca_state` → `dctcp_state`: entering Recovery halves the window.
        if self.ca_state != CaState::Recovery {
            self.dctcp_react_to_loss();
        }
        self.ca_state = CaState::Recovery;
    }

    pub(crate) fn init_cwnd_reduction(&mut self) {
        // `tcp_ecn_queue_cwr`: tell an ECN peer its echo was heard.
        if self.ecn_ok {
            self.ecn_queue_cwr = true;
        }
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = 0;
        self.cwnd_cnt = 0;
        self.prior_cwnd = self.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.ssthresh = self.ca_ssthresh();
    }

    /// `tcp_cwnd_reduction()`: Proportional Rate Reduction.
    pub(crate) fn cwnd_reduction(
        &mut self,
        newly_acked_sacked: u32,
        newly_lost: u32,
        una_advanced: bool,
    ) {
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
    pub(crate) fn end_cwnd_reduction(&mut self) {
        // A `cong_control` module (BBR) restores its own cwnd.
        if self.ssthresh < TCP_INFINITE_SSTHRESH && !self.ca_is_bbr() {
            self.cwnd = self.ssthresh;
        }
    }

    /// `tcp_mark_skb_lost()`: the segment at `i` is lost — or, if it was lost and retransmitted, the
    /// retransmission is (`TCPLostRetransmit`): it is to be sent again. Returns whether this is news.
    pub(crate) fn mark_lost(&mut self, i: usize) -> bool {
        let t = &mut self.rtx[i];
        if t.sacked {
            return false;
        }
        if t.lost {
            if !t.retrans {
                return false;
            }
            t.retrans = false;
            self.retrans_out -= 1;
            self.lost_pending += 1;
            self.lost_retransmits += 1;
            self.lost_total = self.lost_total.wrapping_add(1);
            return true;
        }
        t.lost = true;
        self.lost_total = self.lost_total.wrapping_add(1);
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

    /// RFC 6675 `IsLost()`, without RACK: un-SACKed segments with at least dupthresh
    /// SACKed segments above them. Retransmitted segments are left alone
    /// (their loss is found by the RTO).
    fn mark_lost_sack(&mut self) -> u32 {
        if self.sacked_out < self.reordering {
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
            if above >= self.reordering {
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

    /// `tcp_enter_loss()`, called by the retransmission timer before `rto_retransmits` counts this
    /// expiry.
    pub(crate) fn enter_loss(&mut self, now: Nanos) {
        let new_recovery = self.ca_state < CaState::Recovery;
        // tcp_timeout_mark_lost(): every un-SACKed segment is lost (a lost retransmission is lost
        // again), but for the head RACK spares those sent less than its RTT ago.
        let rack = self.rack_on();
        for i in 0..self.rtx.len() {
            if rack && i != 0 && self.rack_skb_timeout(self.rtx[i].sent_at, now, 0) > 0 {
                continue;
            }
            self.mark_lost(i);
        }
        // Reduce ssthresh unless it was already reduced in this window: a repeated timeout in the same
        // Loss episode (snd_una has not moved since the last one) keeps it. A new reduction is a new
        // undo episode.
        if self.ca_state <= CaState::Disorder
            || self.high_seq <= self.snd_una
            || (self.ca_state == CaState::Loss && self.rto_retransmits == 0)
        {
            let prior = self.current_ssthresh();
            self.set_prior_ssthresh(prior);
            self.init_undo();
            self.prior_cwnd = self.cwnd;
            self.ssthresh = self.ca_ssthresh();
            // CA_EVENT_LOSS
            self.dctcp_react_to_loss();
        }
        // A timeout in Disorder after many SACKs: the reordering degree was overestimated.
        if self.ca_state <= CaState::Disorder && self.sacked_out >= REORDERING {
            self.reordering = self.reordering.min(REORDERING);
        }
        self.cwnd = self.in_flight() + 1;
        self.cwnd_cnt = 0;
        self.ca.on_loss(self.snd_nxt);
        self.bbr_on_loss();
        if !self.sack_ok {
            self.sacked_out = 0;
        }
        self.frto_on_timeout(new_recovery);
        self.ca_state = CaState::Loss;
        self.high_seq = self.snd_nxt;
        // A loss probe's episode ends with the timeout: its ACK proves nothing now.
        self.tlp_high_seq = 0;
        // tcp_ecn_queue_cwr(): an ECN peer hears of the reduction on the next new data.
        if self.ecn_ok {
            self.ecn_queue_cwr = true;
        }
    }
}
