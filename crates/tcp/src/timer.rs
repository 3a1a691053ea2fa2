//! Timers (`net/ipv4/tcp_timer.c`): the retransmission timer (and the SYN's), the delayed ACK and the
//! zero-window probe. Timers are exact to the nanosecond; due ones fire when the connection is next
//! called (`on_segment`, `poll_transmit`).

use crate::{Connection, Nanos, State, SynTx, XmitTimer, TCP_RTO_MAX};

impl Connection {
    pub(crate) fn clear_timers(&mut self) {
        self.clear_xmit_timer();
        self.delack_at = None;
        self.probe_at = None;
        self.probe_pending = false;
    }

    /// Fire the timers due by `now`. Called on every segment in and every `poll_transmit`, so the check
    /// stays small and the handlers out of line.
    #[inline]
    pub(crate) fn run_timers(&mut self, now: Nanos) {
        let due = |t: Option<Nanos>| t.is_some_and(|t| t <= now);
        if due(self.delack_at) || due(self.probe_at) || due(self.rto_at) {
            self.fire_timers(now);
        }
        // The pacing timer (`tcp_pace_kick`) only lets held data go: `poll_transmit` checks again.
        if due(self.pacing_at) {
            self.pacing_at = None;
        }
    }

    #[cold]
    #[inline(never)]
    fn fire_timers(&mut self, now: Nanos) {
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
                // tcp_write_timer_handler(): the RACK and probe handlers run with their timer still
                // pending (it decides how tcp_rearm_rto counts).
                match self.xmit_timer {
                    XmitTimer::Retrans => self.retransmit_timer(now),
                    XmitTimer::ReoTimeout => self.rack_reo_timeout(now),
                    XmitTimer::LossProbe => self.send_loss_probe(now),
                }
            }
        }
    }

    /// Arm the retransmission timer for `kind` at `at` (`inet_csk_reset_xmit_timer`).
    pub(crate) fn arm_xmit_timer(&mut self, kind: XmitTimer, at: Nanos) {
        self.rto_at = Some(at);
        self.xmit_timer = kind;
    }

    /// The RTO at `at`.
    pub(crate) fn reset_xmit_timer(&mut self, at: Nanos) {
        self.arm_xmit_timer(XmitTimer::Retrans, at);
    }

    /// `inet_csk_clear_xmit_timer()`.
    pub(crate) fn clear_xmit_timer(&mut self) {
        self.rto_at = None;
        self.xmit_timer = XmitTimer::Retrans;
    }

    /// `tcp_retransmit_timer()`.
    fn retransmit_timer(&mut self, now: Nanos) {
        // The SYN or SYN-ACK goes again.
        let syn = match self.state {
            State::SynSent => Some(SynTx::Syn),
            State::SynReceived if self.snd_una == 0 => Some(SynTx::SynAck),
            _ => None,
        };
        if let Some(syn) = syn {
            self.syn_tx = syn;
            self.syn_retransmitted = true;
            self.retransmits += 1;
            self.rto_retransmits += 1;
            self.backoff += 1;
            self.rto = (self.rto * 2).min(TCP_RTO_MAX);
            return;
        }
        if self.packets_out == 0 {
            return;
        }
        self.timeouts += 1;
        self.enter_loss(now);
        // tcp_update_rto_stats()
        self.rto_retransmits += 1;
        // The head is retransmitted next (it is lost; cwnd = 1 allows it); the timer is re-armed with
        // the doubled RTO when it leaves — unless the host's qdisc refuses it (`on_local_drop`).
        self.rto_rexmit = Some((self.rto, self.backoff));
        self.backoff += 1;
        self.rto = (self.rto * 2).min(TCP_RTO_MAX);
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

    pub(crate) fn arm_probe(&mut self, now: Nanos) {
        if self.probe_at.is_none() {
            let base = self.rto.max(self.cfg.min_rto);
            let when = base
                .saturating_mul(1u64 << self.probes_out.min(20))
                .min(TCP_RTO_MAX);
            self.probe_at = Some(now + when);
        }
    }
}
