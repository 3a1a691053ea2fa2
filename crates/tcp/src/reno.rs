//! Reno (`tcp_reno_ssthresh`, `tcp_reno_cong_avoid` in `net/ipv4/tcp_cong.c`): ssthresh = cwnd / 2
//! (at least 2); in congestion avoidance one segment more per cwnd of acknowledged segments.

use crate::cong::tcp_cong_avoid_ai;

/// Reno keeps no state of its own.
#[derive(Clone, Debug)]
pub(crate) struct Reno;

impl Reno {
    pub(crate) fn ssthresh(&self, cwnd: u32) -> u32 {
        (cwnd >> 1).max(2)
    }

    /// `tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked)`: cwnd + 1 per cwnd of acknowledged segments.
    pub(crate) fn cong_avoid(cwnd: &mut u32, cwnd_cnt: &mut u32, acked: u32) {
        let w = *cwnd;
        tcp_cong_avoid_ai(cwnd, cwnd_cnt, w, acked);
    }
}
