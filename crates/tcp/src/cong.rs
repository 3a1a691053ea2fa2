//! The congestion control modules' interface (`net/ipv4/tcp_cong.c`): which module a connection runs
//! (`icsk_ca_ops`, chosen by [`CongestionControl`]) and what the stack asks of it — `ssthresh` on a
//! loss, `cong_avoid` on an ACK, the Loss state's reset, `acked` with the ACK's RTT — with slow start and
//! additive increase, which every module shares. One file per module: `reno.rs`, `cubic.rs`, `dctcp.rs`,
//! `bbr.rs` (a `cong_control` module: it sets cwnd and the pacing rate itself, see `Connection::bbr_main`).
//!
//! The kernel's CUBIC counts time in jiffies; this model fixes `HZ = 1000`
//! (one jiffy = 1 ms of virtual time). Debian's kernels run with `HZ = 250`,
//! which only coarsens the once-per-jiffy update of `ca->cnt`.

use crate::cubic::Cubic;
use crate::dctcp::Dctcp;
use crate::reno::Reno;
use crate::{CongestionControl, Connection, Nanos};

/// Jiffies per second of the modelled kernel.
pub const HZ: u64 = 1000;
const NS_PER_JIFFY: u64 = 1_000_000_000 / HZ;

pub(crate) fn jiffies(now: Nanos) -> u64 {
    now / NS_PER_JIFFY
}

/// `tcp_slow_start()`: ABC, cwnd grows by the number of segments acked, up to
/// ssthresh; returns the acked segments left over for congestion avoidance.
pub(crate) fn tcp_slow_start(cwnd: &mut u32, ssthresh: u32, acked: u32) -> u32 {
    let new = cwnd.saturating_add(acked).min(ssthresh);
    let used = new.saturating_sub(*cwnd);
    *cwnd = new.max(*cwnd);
    acked.saturating_sub(used)
}

/// `tcp_cong_avoid_ai()`: cwnd += 1 for every `w` segments acked.
pub(crate) fn tcp_cong_avoid_ai(cwnd: &mut u32, cwnd_cnt: &mut u32, w: u32, acked: u32) {
    let w = w.max(1);
    if *cwnd_cnt >= w {
        *cwnd_cnt = 0;
        *cwnd = cwnd.saturating_add(1);
    }
    *cwnd_cnt = cwnd_cnt.saturating_add(acked);
    if *cwnd_cnt >= w {
        let delta = *cwnd_cnt / w;
        *cwnd_cnt -= delta * w;
        *cwnd = cwnd.saturating_add(delta);
    }
}

/// A connection's congestion control module and its private state (`icsk_ca_priv`).
///
/// `repr(u8)`: the variant is a byte at the front rather than a niche somewhere inside CUBIC's
/// state, so that a receiver asking which module runs (`ca_is_bbr`, DCTCP's checks) reads the line
/// `Connection` places it on, among its per-segment fields, and not CUBIC's lines.
#[derive(Clone, Debug)]
#[repr(u8)]
pub(crate) enum Ca {
    Reno(Reno),
    Cubic(Cubic),
    /// Its state is set when the handshake has negotiated ECN (`Connection::dctcp_init`); without ECN
    /// the connection runs Reno instead (`dctcp_reno`).
    Dctcp(Dctcp),
    Bbr(Box<crate::bbr::Bbr>),
}

impl Ca {
    /// `seed`: for a module's random choices (BBR's gain cycle start).
    pub(crate) fn new(cc: CongestionControl, hystart: bool, seed: u64) -> Ca {
        match cc {
            CongestionControl::Reno => Ca::Reno(Reno),
            CongestionControl::Cubic => Ca::Cubic(Cubic::new(hystart)),
            CongestionControl::Dctcp => Ca::Dctcp(Dctcp::default()),
            CongestionControl::Bbr => Ca::Bbr(Box::new(crate::bbr::Bbr::new(seed))),
        }
    }

    /// `init`, when data transfer starts (`tcp_init_transfer`): a fresh state.
    pub(crate) fn init(&mut self, now: Nanos, snd_nxt: u64) {
        if let Ca::Cubic(c) = self {
            *c = Cubic::new(c.hystart);
            c.hystart_reset(now, snd_nxt);
        }
    }

    /// `ssthresh`: the slow-start threshold after a loss or an ECN echo, from the current cwnd.
    pub(crate) fn ssthresh(&mut self, cwnd: u32) -> u32 {
        match self {
            Ca::Reno(r) => r.ssthresh(cwnd),
            Ca::Cubic(c) => c.ssthresh(cwnd),
            Ca::Dctcp(d) => d.ssthresh(cwnd),
            // (Connection::ca_ssthresh asks BBR itself.)
            Ca::Bbr(_) => crate::TCP_INFINITE_SSTHRESH,
        }
    }

    /// `set_state(TCP_CA_Loss)`: a retransmission timeout.
    pub(crate) fn on_loss(&mut self, snd_nxt: u64) {
        if let Ca::Cubic(c) = self {
            // cubictcp_state(TCP_CA_Loss)
            c.reset();
            c.hystart_reset(0, snd_nxt);
        }
    }

    /// `pkts_acked`: an ACK that acknowledged data, with the RTT of the most recently sent segment it
    /// covers; returns how the module ended slow start (HyStart), its cwnd the new ssthresh.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn acked(
        &mut self,
        now: Nanos,
        rtt_us: Option<u64>,
        cwnd: u32,
        ssthresh: u32,
        snd_una: u64,
        snd_nxt: u64,
        pacing_rate: u64,
        paced: bool,
    ) -> Option<crate::cubic::HystartExit> {
        match self {
            Ca::Reno(_) | Ca::Dctcp(_) | Ca::Bbr(_) => None,
            Ca::Cubic(c) => c.acked(
                now,
                rtt_us,
                cwnd,
                ssthresh,
                snd_una,
                snd_nxt,
                pacing_rate,
                paced,
            ),
        }
    }
}

impl Connection {
    /// The module's `ssthresh()`.
    pub(crate) fn ca_ssthresh(&mut self) -> u32 {
        if let Some(s) = self.bbr_ssthresh() {
            return s;
        }
        self.ca.ssthresh(self.cwnd)
    }

    /// `tcp_cong_avoid()` with the part every module's `cong_avoid` begins with: grow only when
    /// cwnd-limited (`tcp_is_cwnd_limited`), slow start first (`tcp_slow_start`), then the module's
    /// congestion avoidance with what is left.
    pub(crate) fn cong_avoid(&mut self, now: Nanos, acked: u32) {
        let limited =
            self.is_cwnd_limited || (self.in_slow_start() && self.cwnd < 2 * self.max_packets_out);
        if !limited {
            return;
        }
        let mut acked = acked;
        if self.in_slow_start() {
            acked = tcp_slow_start(&mut self.cwnd, self.ssthresh, acked);
            if acked == 0 {
                return;
            }
        }
        match &mut self.ca {
            Ca::Bbr(_) => {}
            // DCTCP's `cong_avoid` is `tcp_reno_cong_avoid`.
            Ca::Reno(_) | Ca::Dctcp(_) => {
                Reno::cong_avoid(&mut self.cwnd, &mut self.cwnd_cnt, acked)
            }
            Ca::Cubic(c) => {
                c.update(now, self.cwnd, acked);
                let w = c.cnt;
                tcp_cong_avoid_ai(&mut self.cwnd, &mut self.cwnd_cnt, w, acked);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_abc() {
        let mut cwnd = 10;
        assert_eq!(tcp_slow_start(&mut cwnd, 100, 2), 0);
        assert_eq!(cwnd, 12);
        // crossing ssthresh leaves the remainder for congestion avoidance
        assert_eq!(tcp_slow_start(&mut cwnd, 13, 3), 2);
        assert_eq!(cwnd, 13);
    }
}
