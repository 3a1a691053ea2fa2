//! Timers (`net/ipv4/tcp_timer.c`): the retransmission timer (and the SYN's), the delayed ACK and the
//! zero-window probe. Timers are exact to the nanosecond; due ones fire when the connection is next
//! called (`on_segment`, `poll_transmit`).

use crate::{Connection, Nanos, State, SynTx, TCP_RTO_MAX};

impl Connection {
    pub(crate) fn clear_timers(&mut self) {
        self.rto_at = None;
        self.delack_at = None;
        self.probe_at = None;
        self.probe_pending = false;
    }

    pub(crate) fn run_timers(&mut self, now: Nanos) {
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
