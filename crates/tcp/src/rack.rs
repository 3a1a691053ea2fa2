//! RACK-TLP (RFC 8985), as Linux 6.x runs it by default (`net.ipv4.tcp_recovery = 1`,
//! `net.ipv4.tcp_early_retrans = 3`): RACK's time-based loss detection (`net/ipv4/tcp_recovery.c`) and
//! the tail loss probe (`tcp_schedule_loss_probe`, `tcp_send_loss_probe` in `tcp_output.c`,
//! `tcp_process_tlp_ack` in `tcp_input.c`). SACK connections only.
//!
//! **RACK** remembers the most recently sent segment that was delivered — cumulatively acknowledged or
//! SACKed — (`rack.mstamp`, its send time, with its end sequence to order segments sent in the same
//! instant) and the RTT that delivery measured (`rack.rtt`). A segment sent before it and still not
//! delivered is lost once `rack.rtt + reo_wnd` has passed since it was sent: the reordering window
//! `reo_wnd` is a quarter of the min RTT (at most srtt), or 0 while no reordering was ever seen and
//! either the connection is already recovering or three segments are SACKed (the dupthresh case).
//! Where time remains, the reordering timer fires when it has passed (plus `TCP_TIMEOUT_MIN`). As
//! send times include retransmissions, a retransmission that is lost again is found the same way —
//! when something sent after it is delivered — instead of by the RTO (`TCPLostRetransmit`).
//!
//! **The tail loss probe**: when the last segments of a flight are lost no SACK comes back to trigger
//! RACK. In the Open and CWR states each transmission and each ACK that acknowledges data arm a probe
//! timeout, `PTO = 2·srtt + 2 ms` (`+ TCP_RTO_MIN` with a single segment out, for the peer's delayed
//! ACK), never later than the RTO. When it fires, one segment goes out whatever cwnd says: new data if
//! the peer's window takes it, else the last segment again (`TCPLossProbes`). Its ACK — a SACK above
//! the hole — lets RACK repair the tail by fast recovery instead of a timeout. An episode in which the
//! probe retransmitted data ends when an ACK acknowledges beyond it (the loss was real: the window is
//! reduced as in CWR, `TCPLossProbeRecovery`) or a pure duplicate ACK shows both the original and the
//! probe arrived. At most one probe is out at a time.
//!
//! The reordering window grows on D-SACKs (`tcp_rack_update_reo_wnd`, undo.rs): by a quarter of the
//! min RTT for each round trip that brought one after reordering was seen, up to srtt, back to one
//! quarter after 16 recoveries without.
//!
//! Not modelled: `skb_still_in_host_queue` (a probe is not held back because the original still waits
//! in the sender's own qdisc; TCP small queues still hold it back).

use crate::output::SendMode;
use crate::{
    CaState, Connection, Nanos, XmitTimer, TCP_RTO_MIN, TCP_TIMEOUT_INIT, TCP_TIMEOUT_MIN,
};

/// RACK's state (`tp->rack`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Rack {
    /// Send time of the most recently sent segment delivered so far (`rack.mstamp`), 0 before any.
    xmit_time: Nanos,
    /// Its end sequence, to order segments sent in the same instant (`rack.end_seq`).
    end_seq: u64,
    /// The RTT that the last delivery measured (`rack.rtt_us`).
    rtt: Nanos,
    /// Advanced since the last loss detection (`rack.advanced`).
    pub(crate) advanced: bool,
    /// The reordering window in quarters of the min RTT (`rack.reo_wnd_steps`), 1 to 255.
    reo_wnd_steps: u8,
    /// A D-SACK came after reordering was seen: widen the window (`rack.dsack_seen`).
    pub(crate) dsack_seen: bool,
    /// `delivered` when the window last grew: one step per round trip (`rack.last_delivered`).
    last_delivered: u32,
    /// Recoveries the widened window outlives (`rack.reo_wnd_persist`).
    pub(crate) reo_wnd_persist: u8,
}

impl Rack {
    /// `tcp_init_sock()`: one step.
    pub(crate) fn new() -> Rack {
        Rack {
            reo_wnd_steps: 1,
            ..Rack::default()
        }
    }
}

/// `tcp_skb_sent_after()`: (t1, seq1) was sent after (t2, seq2).
fn sent_after(t1: Nanos, t2: Nanos, seq1: u64, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Connection {
    /// RACK runs on this connection (`tcp_is_rack` and SACK).
    pub(crate) fn rack_on(&self) -> bool {
        self.cfg.rack && self.sack_ok
    }

    /// `tcp_rack_advance()`: a segment was delivered (newly SACKed, or cumulatively acknowledged without
    /// a SACK first). A retransmitted one that comes back sooner than the min RTT may be the original's
    /// delivery, so it does not count.
    pub(crate) fn rack_advance(
        &mut self,
        ever_retrans: bool,
        end_seq: u64,
        xmit_time: Nanos,
        now: Nanos,
    ) {
        let rtt = now.saturating_sub(xmit_time);
        let min_rtt = if self.min_rtt == 0 {
            u64::MAX
        } else {
            self.min_rtt
        };
        if ever_retrans && rtt < min_rtt {
            return;
        }
        self.rack.advanced = true;
        self.rack.rtt = rtt;
        if sent_after(xmit_time, self.rack.xmit_time, end_seq, self.rack.end_seq) {
            self.rack.xmit_time = xmit_time;
            self.rack.end_seq = end_seq;
        }
    }

    /// `tcp_rack_reo_wnd()`: the reordering window, `reo_wnd_steps` quarters of the min RTT (at most
    /// srtt). Without reordering seen, none once the connection recovers or the dupthresh is met:
    /// loss is then assumed at once.
    fn rack_reo_wnd(&self) -> Nanos {
        if self.reord_seen == 0
            && (self.ca_state >= CaState::Recovery || self.sacked_out >= self.reordering)
        {
            return 0;
        }
        let min_rtt = if self.min_rtt == 0 {
            u64::MAX
        } else {
            self.min_rtt
        };
        ((min_rtt >> 2).saturating_mul(self.rack.reo_wnd_steps as u64)).min(self.srtt8 >> 3)
    }

    /// `tcp_rack_update_reo_wnd()`, on every ACK: a D-SACK after reordering adds a step, at most one
    /// per round trip (a D-SACK for data sent before the last step is ignored), and keeps the window
    /// for `TCP_RACK_RECOVERY_THRESH` recoveries; once those are spent it falls back to one step.
    pub(crate) fn rack_update_reo_wnd(&mut self, prior_delivered: u32) {
        if prior_delivered == 0 {
            return;
        }
        if (prior_delivered.wrapping_sub(self.rack.last_delivered) as i32) < 0 {
            self.rack.dsack_seen = false;
        }
        if self.rack.dsack_seen {
            self.rack.reo_wnd_steps = self.rack.reo_wnd_steps.saturating_add(1);
            self.rack.dsack_seen = false;
            self.rack.last_delivered = self.delivered;
            self.rack.reo_wnd_persist = crate::undo::TCP_RACK_RECOVERY_THRESH;
        } else if self.rack.reo_wnd_persist == 0 {
            self.rack.reo_wnd_steps = 1;
        }
    }

    /// `tcp_rack_skb_timeout()`: time left before a segment sent at `sent_at` counts as
    /// lost; negative or zero once it does.
    pub(crate) fn rack_skb_timeout(&self, sent_at: Nanos, now: Nanos, reo_wnd: Nanos) -> i64 {
        (self.rack.rtt + reo_wnd) as i64 - now.saturating_sub(sent_at) as i64
    }

    /// `tcp_rack_detect_loss()`: marks lost every undelivered segment sent before RACK's reference whose
    /// time is up. Returns the longest time left among the others (0: none) and how many segments were
    /// newly marked lost (a lost retransmission counts). Linux walks its send-time-ordered list and
    /// stops at the first segment not sent before the reference. This queue is in sequence order, so
    /// the walk stops at the first original (never retransmitted) segment not sent before it: new
    /// data leaves in sequence order, a retransmission after its original, and departure stamps
    /// never go back (a refused tail's rollback returns to its own, the latest), so every segment
    /// after that one was sent no earlier, and a tie in time goes to the higher sequence.
    fn rack_detect_loss(&mut self, now: Nanos) -> (Nanos, u32) {
        let reo_wnd = self.rack_reo_wnd();
        let mut timeout = 0;
        let mut lost = 0;
        for i in 0..self.rtx.len() {
            let t = &self.rtx[i];
            // SACKed segments, and lost ones not retransmitted yet, left the time-ordered list.
            if t.sacked || (t.lost && !t.retrans) {
                continue;
            }
            if !sent_after(
                self.rack.xmit_time,
                t.sent_at,
                self.rack.end_seq,
                t.seq_end(),
            ) {
                if !t.ever_retrans {
                    break;
                }
                continue;
            }
            let remaining = self.rack_skb_timeout(t.sent_at, now, reo_wnd);
            if remaining <= 0 {
                lost += self.mark_lost(i) as u32;
            } else {
                timeout = timeout.max(remaining as Nanos);
            }
        }
        (timeout, lost)
    }

    /// `tcp_rack_mark_lost()` (through `tcp_identify_packet_loss`): detect losses if RACK advanced
    /// since last time, and arm the reordering timer for segments whose time is not up yet (replacing
    /// the RTO or probe timer, never later than an RTO from now). Returns whether it armed the timer,
    /// whether a retransmission was found lost, and how many segments were newly marked lost.
    pub(crate) fn rack_mark_lost(&mut self, now: Nanos) -> (bool, bool, u32) {
        if !self.rack.advanced {
            return (false, false, 0);
        }
        self.rack.advanced = false;
        let prior_retrans = self.retrans_out;
        let (timeout, lost) = self.rack_detect_loss(now);
        if timeout > 0 {
            let when = (timeout + TCP_TIMEOUT_MIN).min(self.rto);
            self.arm_xmit_timer(XmitTimer::ReoTimeout, now + when);
        }
        (timeout > 0, prior_retrans > self.retrans_out, lost)
    }

    /// `tcp_rack_reo_timeout()`: the reordering timer fired. Segments whose time is up are lost; if any
    /// is, recovery starts (with one PRR step) and they are retransmitted. The RTO is armed again from
    /// the head's send time.
    pub(crate) fn rack_reo_timeout(&mut self, now: Nanos) {
        // It retransmits at once (`tcp_xmit_retransmit_queue`), whatever F-RTO held back.
        self.undo.hold_rexmit = false;
        let prior_in_flight = self.in_flight();
        let (_, lost) = self.rack_detect_loss(now);
        if prior_in_flight != self.in_flight() && self.ca_state != CaState::Recovery {
            self.enter_recovery(now, false);
            self.cwnd_reduction(1, lost, false);
        }
        if self.xmit_timer != XmitTimer::Retrans {
            self.rearm_rto(now);
        }
    }

    /// `tcp_schedule_loss_probe()`: in the Open and CWR states, arm the probe timer: 2·srtt plus
    /// `TCP_TIMEOUT_MIN`, or plus `TCP_RTO_MIN` when a single segment is out (the peer may delay its
    /// ACK), 1 s before any RTT sample; never later than the RTO would fire (`advancing_rto`: an RTO
    /// from now, else from the head's send time). Returns false when no probe applies.
    pub(crate) fn schedule_loss_probe(&mut self, now: Nanos, advancing_rto: bool) -> bool {
        if !self.cfg.tlp
            || self.packets_out == 0
            || !self.sack_ok
            || !matches!(self.ca_state, CaState::Open | CaState::Cwr)
        {
            return false;
        }
        let mut timeout = if self.srtt8 != 0 {
            (self.srtt8 >> 2)
                + if self.packets_out == 1 {
                    TCP_RTO_MIN
                } else {
                    TCP_TIMEOUT_MIN
                }
        } else {
            TCP_TIMEOUT_INIT
        };
        let rto_delta = if advancing_rto {
            self.rto as i64
        } else {
            self.rto_delta(now)
        };
        if rto_delta > 0 {
            timeout = timeout.min(rto_delta as Nanos);
        }
        self.arm_xmit_timer(XmitTimer::LossProbe, now + timeout);
        true
    }

    /// `tcp_rto_delta_us()`: how far in the future the RTO falls, counted from the head's send time.
    pub(crate) fn rto_delta(&self, now: Nanos) -> i64 {
        let head = self.rtx.front().map_or(now, |t| t.sent_at);
        (head + self.rto) as i64 - now as i64
    }

    /// `tcp_send_loss_probe()`: the probe timer fired. Unless a probe is already out, send one segment
    /// whatever cwnd allows — new data if the peer's window takes a full segment of it, else the last
    /// segment sent again — and arm the RTO. The segment waits in `tlp_out` for `poll_transmit`.
    pub(crate) fn send_loss_probe(&mut self, now: Nanos) {
        let mut sent = false;
        if self.tlp_high_seq == 0 && !self.tsq_throttled && self.can_send_data() {
            self.tlp_retrans = false;
            let len = self
                .write_end
                .saturating_sub(self.snd_nxt)
                .min(self.mss as u64);
            let has_new = self.snd_nxt < self.send_limit_end() && !self.fin_sent;
            if has_new && self.snd_nxt + len <= self.snd_una + self.snd_wnd {
                // tcp_write_xmit(push_one = 2): one new segment, Nagle off, cwnd not consulted.
                self.tlp_out = self.send_new(now, SendMode::Probe).map(Box::new);
                sent = self.tlp_out.is_some();
            } else if !self.rtx.is_empty() {
                // __tcp_retransmit_skb() of the last segment: not counted in retrans_out.
                self.tlp_out = Some(Box::new(self.retransmit(now, self.rtx.len() - 1, false)));
                self.tlp_retrans = true;
                sent = true;
            }
        }
        if sent {
            self.tlp_high_seq = self.snd_nxt;
            self.loss_probes += 1;
            // The probe timer is no longer pending: the RTO counts from now.
            self.xmit_timer = XmitTimer::Retrans;
        }
        self.rearm_rto(now);
    }

    /// `tcp_process_tlp_ack()`: an ACK during a probe episode. A probe of new data needs nothing more.
    /// After a retransmitted probe, an ACK beyond the probe means the original was lost and the probe
    /// repaired it: the window is reduced once, as in CWR. A D-SACK of the probe, or a pure duplicate
    /// ACK, means the original and the probe both arrived: no loss.
    pub(crate) fn process_tlp_ack(
        &mut self,
        ack: u64,
        una_advanced: bool,
        not_dup: bool,
        sacked: bool,
        dsack_tlp: bool,
    ) {
        if ack < self.tlp_high_seq {
            return;
        }
        if !self.tlp_retrans || dsack_tlp {
            // A probe of new data acknowledged, or a D-SACK of the probe: both copies arrived.
            self.tlp_high_seq = 0;
        } else if ack > self.tlp_high_seq {
            self.init_cwnd_reduction();
            self.ca_state = CaState::Cwr;
            self.end_cwnd_reduction();
            self.try_keep_open();
            self.loss_probe_recoveries += 1;
        } else if !(una_advanced || not_dup || sacked) {
            self.tlp_high_seq = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, Connection, TxSeg, MS};

    /// The walk as it was before it stopped early: every segment tested.
    fn full_walk(c: &mut Connection, now: u64) -> (u64, u32) {
        let reo_wnd = c.rack_reo_wnd();
        let (mut timeout, mut lost) = (0, 0);
        for i in 0..c.rtx.len() {
            let t = &c.rtx[i];
            if t.sacked || (t.lost && !t.retrans) {
                continue;
            }
            if !super::sent_after(c.rack.xmit_time, t.sent_at, c.rack.end_seq, t.seq_end()) {
                continue;
            }
            let remaining = c.rack_skb_timeout(t.sent_at, now, reo_wnd);
            if remaining <= 0 {
                lost += c.mark_lost(i) as u32;
            } else {
                timeout = timeout.max(remaining as u64);
            }
        }
        (timeout, lost)
    }

    /// `rack_detect_loss` stops at the first original segment not sent before RACK's reference; on
    /// queues sent as a connection sends (new data in sequence order, two segments of an skb in the
    /// same instant, retransmissions of lost segments interleaved later, the clock never going
    /// back) it marks and times exactly what testing every segment does. Retransmissions of low
    /// sequence sent after the reference come before originals sent before it: a stop at any segment
    /// not sent before the reference, retransmitted or not, would miss those originals.
    #[test]
    fn the_walk_stops_where_testing_every_segment_finds_nothing_more() {
        let mut draw = crate::test_draws(42);
        let mss = 1000;
        let (mut stopped_early, mut late_retrans_first) = (0, 0);
        for round in 0..300 {
            let mut c = Connection::client(Config::default(), 0, 1);
            c.min_rtt = 20 * MS;
            c.srtt8 = 8 * 25 * MS;
            c.reord_seen = draw(2);
            let mut clock = 1_000_000;
            let mut retrans = 0;
            for k in 0..40u64 {
                // One send event: a new segment (two of an skb share its time), and sometimes a
                // lost one of lower sequence retransmitted at the same clock.
                if k % 2 == 0 {
                    clock += draw(3) * MS / 2;
                }
                c.rtx.push_back(TxSeg {
                    start: k * mss,
                    end: (k + 1) * mss,
                    fin: false,
                    sent_at: clock,
                    ever_retrans: false,
                    sacked: false,
                    lost: false,
                    retrans: false,
                    tx_delivered: 0,
                    tx_delivered_mstamp: 0,
                    tx_first_tx_mstamp: 0,
                    tx_app_limited: false,
                    psh: false,
                    skb_end: true,
                });
                match draw(6) {
                    0 => c.rtx[k as usize].sacked = true,
                    1 => c.rtx[k as usize].lost = true,
                    _ => {}
                }
                if k > 4 && draw(4) == 0 {
                    let j = draw(k) as usize;
                    let t = &mut c.rtx[j];
                    if t.lost && !t.retrans {
                        clock += draw(2) * MS / 4;
                        (t.retrans, t.ever_retrans, t.sent_at) = (true, true, clock);
                        retrans += 1;
                    }
                }
            }
            c.retrans_out = retrans;
            c.packets_out = 40;
            // The reference: a segment delivered, with the RTT it measured.
            let r = draw(40) as usize;
            (c.rack.xmit_time, c.rack.end_seq) = (c.rtx[r].sent_at, c.rtx[r].seq_end());
            c.rack.rtt = 20 * MS + draw(10) * MS;
            let now = c.rack.xmit_time + draw(40) * MS;
            let mut want = c.clone();
            let full = full_walk(&mut want, now);
            assert_eq!(c.rack_detect_loss(now), full, "round {round}");
            for (a, b) in c.rtx.iter().zip(&want.rtx) {
                assert_eq!((a.lost, a.retrans), (b.lost, b.retrans), "round {round}");
            }
            assert_eq!(
                (c.lost_out, c.retrans_out, c.lost_pending, c.lost_total),
                (
                    want.lost_out,
                    want.retrans_out,
                    want.lost_pending,
                    want.lost_total
                ),
                "round {round}"
            );
            // What the queue tested: the walk stopped before its end, and a retransmission not
            // sent before the reference came before an original that was.
            let live: Vec<&TxSeg> = want
                .rtx
                .iter()
                .filter(|t| !(t.sacked || (t.lost && !t.retrans)))
                .collect();
            let before = |t: &TxSeg| {
                super::sent_after(c.rack.xmit_time, t.sent_at, c.rack.end_seq, t.seq_end())
            };
            let stop = live.iter().position(|t| !t.ever_retrans && !before(t));
            stopped_early += stop.is_some_and(|i| i + 1 < live.len()) as u32;
            let first_late = live.iter().position(|t| !before(t));
            late_retrans_first += first_late.is_some_and(|i| {
                live[i].ever_retrans && live[i..].iter().any(|t| !t.ever_retrans && before(t))
            }) as u32;
        }
        assert!(stopped_early > 100, "walks stopped early: {stopped_early}");
        assert!(
            late_retrans_first > 10,
            "late retransmissions first: {late_retrans_first}"
        );
    }
}
