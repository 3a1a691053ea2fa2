//! DCTCP (`net/ipv4/tcp_dctcp.c` and `tcp_dctcp.h` of Linux 6.12, RFC 8257): Reno whose window reduction
//! follows the fraction of packets the network marked CE, not the mere fact of a mark.
//!
//! * **The sender** keeps `alpha`, an EWMA of the fraction of its delivered packets whose ACK carried
//!   ECE, in units of 1/1024: once per window of data (when `snd_una` passes `next_seq`),
//!   `alpha = alpha − alpha/16 + 64 · delivered_ce / delivered` (`dctcp_shift_g = 4`, g = 1/16; the
//!   subtraction takes the whole of an alpha below 16, `min_not_zero`). It starts at 1024
//!   (`dctcp_alpha_on_init`), so the first mark halves the window. An ECE reduces the window as any ECN
//!   echo does — once per window, in the CWR state (`tcp_enter_cwr`) — but to
//!   `cwnd − cwnd · alpha / 2` (`dctcp_ssthresh`). A loss halves it as Reno does (`dctcp_react_to_loss`,
//!   on entering Recovery and on a timeout). Congestion avoidance is Reno's.
//! * **The receiver** echoes CE exactly (`dctcp_ece_ack_update`): ECE is set on its ACKs while the last
//!   data segment was CE and cleared when one was not, and each change of that state is ACKed at once;
//!   when an ACK was being delayed, it is sent first for the data before the change, with the old state.
//! * Every segment is ECT(0), ACKs and retransmissions too (`TCP_CONG_NEEDS_ECN`: the socket's ECN bits
//!   are set once); a DCTCP end asks for ECN on its SYN whatever `tcp_ecn` says and accepts an ECT SYN
//!   that asks. Without ECN negotiated it falls back to Reno and sends Not-ECT (`dctcp_init`).
//!
//! Not modelled: PLB (`tcp_plb`: rehashing the flow's path, off by default). `loss_cwnd`, which only the
//! undo of a spurious reduction reads (`dctcp_cwnd_undo`), is the socket's cwnd at the cut (undo.rs).

use crate::cong::Ca;
use crate::reno::Reno;
use crate::{Connection, Nanos};

/// `DCTCP_MAX_ALPHA`: alpha is in units of 1/1024.
pub const DCTCP_MAX_ALPHA: u32 = 1024;
/// `dctcp_shift_g`: g = 1/2^4.
const DCTCP_SHIFT_G: u32 = 4;

/// `struct dctcp`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dctcp {
    /// `tp->delivered` and `tp->delivered_ce` when the window being measured began.
    old_delivered: u32,
    old_delivered_ce: u32,
    /// `rcv_nxt` after the last data segment the receiver's CE state machine saw.
    pub(crate) prior_rcv_nxt: u64,
    /// The EWMA of the marked fraction, 0..=1024.
    pub(crate) alpha: u32,
    /// The window ends when `snd_una` reaches this.
    next_seq: u64,
    /// The receiver's state: the last data segment was CE.
    pub(crate) ce_state: bool,
}

impl Dctcp {
    /// `dctcp_init` once ECN is negotiated (the fallback to Reno is the caller's).
    pub(crate) fn new(snd_nxt: u64, rcv_nxt: u64, delivered: u32, delivered_ce: u32) -> Dctcp {
        Dctcp {
            old_delivered: delivered,
            old_delivered_ce: delivered_ce,
            prior_rcv_nxt: rcv_nxt,
            alpha: DCTCP_MAX_ALPHA,
            next_seq: snd_nxt,
            ce_state: false,
        }
    }

    /// `dctcp_ssthresh`: cwnd reduced by alpha/2, at least 2.
    pub(crate) fn ssthresh(&self, cwnd: u32) -> u32 {
        let cut = ((cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (cwnd - cut).max(2)
    }

    /// `dctcp_update_alpha` (`in_ack_event`): at the end of a window, fold the window's marked fraction
    /// into alpha and start the next window.
    pub(crate) fn update_alpha(
        &mut self,
        snd_una: u64,
        snd_nxt: u64,
        delivered: u32,
        delivered_ce: u32,
    ) {
        if snd_una < self.next_seq {
            return;
        }
        let d = delivered.wrapping_sub(self.old_delivered);
        let mut ce = delivered_ce.wrapping_sub(self.old_delivered_ce);
        let mut alpha = self.alpha;
        // alpha = (1 − g) · alpha + g · F
        let dec = alpha >> DCTCP_SHIFT_G;
        alpha -= if dec == 0 { alpha } else { dec };
        if ce > 0 {
            ce <<= 10 - DCTCP_SHIFT_G;
            ce /= d.max(1);
            alpha = (alpha + ce).min(DCTCP_MAX_ALPHA);
        }
        self.alpha = alpha;
        self.next_seq = snd_nxt;
        self.old_delivered = delivered;
        self.old_delivered_ce = delivered_ce;
    }

    /// `dctcp_react_to_loss`: a loss halves the window, as Reno's.
    pub(crate) fn loss_ssthresh(cwnd: u32) -> u32 {
        (cwnd >> 1).max(2)
    }
}

impl Connection {
    /// `tcp_ca_needs_ecn`: the module is DCTCP (and has not fallen back to Reno).
    pub(crate) fn ca_needs_ecn(&self) -> bool {
        matches!(self.ca, Ca::Dctcp(_))
    }

    /// `dctcp_init` at the start of data (`tcp_init_transfer`): with ECN negotiated a fresh state, else
    /// Reno (`dctcp_reno`), whose segments are Not-ECT.
    pub(crate) fn dctcp_init(&mut self) {
        if !self.ca_needs_ecn() {
            return;
        }
        self.ca = if self.ecn_ok {
            Ca::Dctcp(Dctcp::new(
                self.snd_nxt,
                self.rcv_nxt,
                self.delivered,
                self.delivered_ce,
            ))
        } else {
            Ca::Reno(Reno)
        };
    }

    /// `in_ack_event` (`dctcp_update_alpha`), with `delivered` and `delivered_ce` as `tcp_ack` has them
    /// then: this ACK's SACKed packets counted, its cumulatively acknowledged ones not yet.
    pub(crate) fn ca_in_ack_event(&mut self, snd_una: u64, delivered: u32, delivered_ce: u32) {
        let snd_nxt = self.snd_nxt;
        if let Ca::Dctcp(d) = &mut self.ca {
            d.update_alpha(snd_una, snd_nxt, delivered, delivered_ce);
        }
    }

    /// `dctcp_state(TCP_CA_Recovery)` and `CA_EVENT_LOSS`: a loss halves the window (after the module's
    /// `ssthresh` has been asked).
    pub(crate) fn dctcp_react_to_loss(&mut self) {
        if self.ca_needs_ecn() {
            self.ssthresh = Dctcp::loss_ssthresh(self.cwnd);
        }
    }

    /// `CA_EVENT_ECN_IS_CE` / `CA_EVENT_ECN_NO_CE` on a new data segment (`dctcp_ece_ack_update`): a change
    /// of CE state is ACKed at once; an ACK that was being delayed goes first, for the data before this
    /// segment and with the old state's ECE. ECE then follows the new state (`dctcp_ece_ack_cwr`).
    pub(crate) fn dctcp_ece_ack_update(&mut self, now: Nanos, ce: bool) {
        let Ca::Dctcp(d) = &self.ca else {
            return;
        };
        let (old, prior) = (d.ce_state, d.prior_rcv_nxt);
        if old != ce {
            if self.delack_at.is_some() {
                self.ecn_demand_cwr = old;
                self.send_ack_for(now, prior);
            }
            self.ack_now = true;
        }
        let rcv_nxt = self.rcv_nxt;
        if let Ca::Dctcp(d) = &mut self.ca {
            d.prior_rcv_nxt = rcv_nxt;
            d.ce_state = ce;
        }
        self.ecn_demand_cwr = ce;
    }

    /// DCTCP's alpha in 1/1024 (`dctcp_get_info`'s `dctcp_alpha`), when it runs.
    pub fn dctcp_alpha(&self) -> Option<u32> {
        match &self.ca {
            Ca::Dctcp(d) => Some(d.alpha),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One window of `delivered` packets, `ce` of them echoed, ending the window.
    fn window(d: &mut Dctcp, seq: &mut u64, tot: &mut (u32, u32), delivered: u32, ce: u32) {
        tot.0 += delivered;
        tot.1 += ce;
        *seq += delivered as u64;
        d.update_alpha(*seq, *seq, tot.0, tot.1);
    }

    /// By hand from `dctcp_update_alpha`: alpha starts at 1024; half the packets of each window marked
    /// adds (5 << 6) / 10 = 32 and the decay takes alpha >> 4: 1024 − 64 + 32 = 992, 992 − 62 + 32 = 962,
    /// 962 − 60 + 32 = 934. It stops where alpha >> 4 = 32, the first value in 512..=527: the EWMA holds
    /// the marked fraction 1/2 as 1024 · 1/2 = 512, within the 1/16 the integer decay leaves.
    #[test]
    fn alpha_converges_to_the_marked_fraction() {
        let mut d = Dctcp::new(0, 0, 0, 0);
        let (mut seq, mut tot) = (0, (0, 0));
        let mut seen = vec![];
        for _ in 0..3 {
            window(&mut d, &mut seq, &mut tot, 10, 5);
            seen.push(d.alpha);
        }
        assert_eq!(seen, [992, 962, 934]);
        for _ in 0..60 {
            window(&mut d, &mut seq, &mut tot, 10, 5);
        }
        assert!((512..=527).contains(&d.alpha), "alpha {}", d.alpha);
        let settled = d.alpha;
        window(&mut d, &mut seq, &mut tot, 10, 5);
        assert_eq!(
            d.alpha, settled,
            "a fixed point: alpha >> 4 = 32 is what a window adds"
        );
        // ssthresh = cwnd − cwnd · alpha / 2048: about three quarters of the window.
        assert_eq!(d.ssthresh(100), 100 - ((100 * settled) >> 11));
        assert!((74..=76).contains(&d.ssthresh(100)));
    }

    /// Every second window fully marked: the mean fraction is 1/2, and alpha swings around 512. In the
    /// steady cycle, after a clean window x = h − h/16 and after a marked one h = x − x/16 + 64, so
    /// x = (15/16)² x + 60: x = 60 · 256 / 31 = 495.5 and h = 528.5 without truncation. The kernel's
    /// `alpha >> 4` floors, taking up to 1 less each step, so x ≤ (60 + 1 + 15/16) · 256 / 31 = 511.5
    /// and h ≤ x · 15/16 + 65. The integer cycle: 543 − (543 >> 4 = 33) = 510, 510 − 31 + 64 = 543.
    #[test]
    fn alpha_of_every_second_window_marked() {
        let mut d = Dctcp::new(0, 0, 0, 0);
        let (mut seq, mut tot) = (0, (0, 0));
        for _ in 0..100 {
            window(&mut d, &mut seq, &mut tot, 20, 20);
            window(&mut d, &mut seq, &mut tot, 20, 0);
        }
        let low = d.alpha;
        window(&mut d, &mut seq, &mut tot, 20, 20);
        let high = d.alpha;
        assert!((495..=512).contains(&low), "after a clean window {low}");
        assert!((528..=545).contains(&high), "after a marked window {high}");
        assert_eq!((low, high), (510, 543));
    }

    /// The window ends only once snd_una reaches `next_seq`; an ACK before that changes nothing. An
    /// alpha below 16 decays to 0 at once (`min_not_zero`), and a window without marks never raises it.
    #[test]
    fn once_per_window_and_the_decay_to_zero() {
        let mut d = Dctcp::new(100, 0, 0, 0);
        d.update_alpha(99, 200, 5, 5);
        assert_eq!(d.alpha, 1024, "window not over");
        d.update_alpha(100, 200, 5, 5);
        assert_eq!(
            d.alpha,
            1024 - 64 + 64,
            "all marked: 1024 − 64 + (5 << 6) / 5"
        );
        d.alpha = 15;
        d.update_alpha(200, 300, 10, 5);
        assert_eq!(d.alpha, 0);
        assert_eq!(d.ssthresh(10), 10, "alpha 0: no reduction");
        assert_eq!(d.ssthresh(2), 2);
        d.alpha = 1024;
        assert_eq!(d.ssthresh(10), 5, "alpha 1: halved");
        assert_eq!(d.ssthresh(3), 2, "at least 2");
    }
}
