//! PIE's control law (Proportional Integral controller Enhanced, RFC 8033), after `include/net/pie.h` and
//! the functions `sch_pie.c` exports to `fq_pie`: `pie_drop_early`, `pie_process_dequeue`,
//! `pie_calculate_probability`.
//!
//! # The law
//!
//! PIE controls the *queueing delay* rather than the queue length. Every `tupdate` (15 ms) it updates a
//! drop probability from the current delay estimate `qdelay` and the previous one:
//!
//! `p ← p + α·(qdelay − target) + β·(qdelay − qdelay_old)`
//!
//! — the integral term pushes the delay to `target` (15 ms), the proportional term damps its swings. α and
//! β (2 and 20, in units of 1/16 Hz) are scaled down while `p` is small (by 2, then by 4 per decade below
//! 10 %), so the controller is gentle near zero and quick when congested; an increase is capped at 2 %
//! per update above 10 %; a delay over 250 ms adds 2 %; with no delay at all `p` decays by 1/64.
//!
//! The delay comes from each dequeued packet's time in the queue (the default), or from the backlog
//! divided by a measured departure rate (`dq_rate_estimator`: bytes counted over 16 KB departures).
//!
//! On enqueue a packet is dropped early with probability `p` — scaled by its size in `bytemode` — except
//! during the burst allowance (150 ms after the queue was last quiet), when the delay is below half
//! `target` and `p` below 20 %, or when fewer than two MTUs are queued. The drops are de-randomised:
//! probabilities accumulate in `accu_prob`, no drop below 0.85 and a certain drop at 8.5.
//!
//! # What tclab models and how
//!
//! The kernel's arithmetic: probabilities as u64 fractions of `MAX_PROB` = 2^56, times in psched ticks
//! (64 ns), the wrapping unsigned differences it computes with. The random numbers come from a seeded
//! generator; the caller passes `now` and runs [`PieVars::calculate_probability`] on its timer.

use crate::Nanos;

/// `MAX_PROB`: probability 1.
pub const MAX_PROB: u64 = u64::MAX >> 8;
const QUEUE_THRESHOLD: u32 = 16384;
const PIE_SCALE: u32 = 8;
/// `PSCHED_TICKS_PER_SEC`: ticks of 64 ns.
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> 6;

/// `PSCHED_NS2TICKS`.
pub fn ns2ticks(ns: Nanos) -> u64 {
    ns >> 6
}

/// `struct pie_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PieParams {
    /// Target delay, in psched ticks.
    pub target: u64,
    /// The update period, in jiffies (ms).
    pub tupdate: u32,
    pub limit: u32,
    pub alpha: u32,
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    pub dq_rate_estimator: bool,
}

impl Default for PieParams {
    /// `pie_params_init`.
    fn default() -> Self {
        PieParams {
            target: ns2ticks(15_000_000),
            tupdate: 15,
            limit: 1000,
            alpha: 2,
            beta: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

/// `struct pie_vars`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PieVars {
    pub qdelay: u64,
    pub qdelay_old: u64,
    pub burst_time: u64,
    /// `DTIME_INVALID` as `None`.
    pub dq_tstamp: Option<u64>,
    pub prob: u64,
    pub accu_prob: u64,
    /// `DQCOUNT_INVALID` as `None`.
    pub dq_count: Option<u64>,
    pub avg_dq_rate: u32,
    pub backlog_old: u32,
}

impl Default for PieVars {
    /// `pie_vars_init` (and zeroed probability and delays, as a new qdisc has them).
    fn default() -> Self {
        PieVars {
            qdelay: 0,
            qdelay_old: 0,
            burst_time: ns2ticks(150_000_000),
            dq_tstamp: None,
            prob: 0,
            accu_prob: 0,
            dq_count: None,
            avg_dq_rate: 0,
            backlog_old: 0,
        }
    }
}

impl PieVars {
    /// `pie_vars_init`: the burst allowance and the estimator restart; probability and delays stay.
    fn reinit(&mut self) {
        self.burst_time = ns2ticks(150_000_000);
        self.dq_tstamp = None;
        self.accu_prob = 0;
        self.dq_count = None;
        self.avg_dq_rate = 0;
    }

    /// `pie_drop_early`: whether an arriving packet of `packet_size` bytes is dropped, with `backlog`
    /// bytes queued, on a device of `mtu` (`psched_mtu`); `random` gives 64 random bits.
    pub fn drop_early(
        &mut self,
        params: &PieParams,
        backlog: u32,
        packet_size: u32,
        mtu: u32,
        random: &mut impl FnMut() -> u64,
    ) -> bool {
        let mtu = mtu.clamp(1, 1 << 20);
        if self.burst_time > 0 {
            return false;
        }
        if self.qdelay < params.target / 2 && self.prob < MAX_PROB / 5 {
            return false;
        }
        if backlog < 2 * mtu {
            return false;
        }
        let local_prob = if params.bytemode && packet_size <= mtu {
            packet_size as u64 * (self.prob / mtu as u64)
        } else {
            self.prob
        };
        if local_prob == 0 {
            self.accu_prob = 0;
        } else {
            self.accu_prob = self.accu_prob.wrapping_add(local_prob);
        }
        if self.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if self.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        if (random() >> 8) < local_prob {
            self.accu_prob = 0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue`: the delay sample of a departing packet queued at `enqueued` (ticks), or
    /// the departure-rate estimate; and the burst allowance running down. `backlog` is what remains.
    pub fn process_dequeue(
        &mut self,
        params: &PieParams,
        now_ticks: u64,
        enqueued: u64,
        len: u32,
        backlog: u32,
    ) {
        let mut dtime: u64 = 0;
        if !params.dq_rate_estimator {
            self.qdelay = if backlog != 0 {
                now_ticks.wrapping_sub(enqueued)
            } else {
                0
            };
            if let Some(t) = self.dq_tstamp {
                dtime = now_ticks.wrapping_sub(t) as u32 as u64;
            }
            self.dq_tstamp = Some(now_ticks);
            if dtime == 0 {
                return;
            }
        } else {
            if backlog >= QUEUE_THRESHOLD && self.dq_count.is_none() {
                self.dq_tstamp = Some(now_ticks);
                self.dq_count = Some(0);
            }
            let Some(c) = self.dq_count else {
                return;
            };
            let c = c + len as u64;
            self.dq_count = Some(c);
            if c < QUEUE_THRESHOLD as u64 {
                return;
            }
            let count = ((c as u32) << PIE_SCALE) as u64;
            dtime = now_ticks.wrapping_sub(self.dq_tstamp.unwrap_or(now_ticks)) as u32 as u64;
            if dtime == 0 {
                return;
            }
            let count = (count / dtime) as u32;
            self.avg_dq_rate = if self.avg_dq_rate == 0 {
                count
            } else {
                (self.avg_dq_rate - (self.avg_dq_rate >> 3)) + (count >> 3)
            };
            if backlog < QUEUE_THRESHOLD {
                self.dq_count = None;
            } else {
                self.dq_count = Some(0);
                self.dq_tstamp = Some(now_ticks);
            }
        }
        // The burst allowance runs down with the time between departures.
        if self.burst_time > 0 {
            self.burst_time = self.burst_time.saturating_sub(dtime);
        }
    }

    /// `pie_calculate_probability`, run every `tupdate` with the queue's `backlog` in bytes.
    pub fn calculate_probability(&mut self, params: &PieParams, backlog: u32) {
        let (qdelay, qdelay_old);
        if params.dq_rate_estimator {
            qdelay_old = self.qdelay;
            self.qdelay_old = self.qdelay;
            qdelay = if self.avg_dq_rate > 0 {
                ((backlog as u64) << PIE_SCALE) / self.avg_dq_rate as u64
            } else {
                0
            };
        } else {
            qdelay = self.qdelay;
            qdelay_old = self.qdelay_old;
        }
        let mut update_prob = !(qdelay == 0 && backlog != 0);
        let mut alpha = (params.alpha as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
        let mut beta = (params.beta as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
        // Scale α and β down while the probability is small: by 2 below 10 %, then by 4 per decade.
        if self.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power: u64 = 100;
            while self.prob < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        // The kernel computes in u64 and keeps the result in an s64: a delay below target wraps to a
        // negative term.
        let mut delta: i64 = 0;
        delta = delta.wrapping_add(alpha.wrapping_mul(qdelay.wrapping_sub(params.target)) as i64);
        delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);
        let oldprob = self.prob;
        // Steps of at most 2 % once above 10 %.
        if delta > (MAX_PROB / (100 / 2)) as i64 && self.prob >= MAX_PROB / 10 {
            delta = ((MAX_PROB / 100) * 2) as i64;
        }
        // Non-linear drop: 2 % more when the delay is over 250 ms.
        if qdelay > ns2ticks(250_000_000) {
            delta = delta.wrapping_add((MAX_PROB / (100 / 2)) as i64);
        }
        self.prob = self.prob.wrapping_add(delta as u64);
        if delta > 0 {
            if self.prob < oldprob {
                self.prob = MAX_PROB;
                update_prob = false;
            }
        } else if self.prob > oldprob {
            self.prob = 0;
        }
        // No delay now or before: decay by 1/64.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.prob -= self.prob / 64;
        }
        self.qdelay = qdelay;
        self.backlog_old = backlog;
        // Quiet and no probability: the burst allowance is given back.
        if self.qdelay < params.target / 2
            && self.qdelay_old < params.target / 2
            && self.prob == 0
            && (!params.dq_rate_estimator || self.avg_dq_rate > 0)
        {
            self.reinit();
        }
        if !params.dq_rate_estimator {
            self.qdelay_old = qdelay;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_update_at_twice_the_target_delay() {
        // qdelay 30 ms against target 15 ms, p = 0: α = 2·(MAX_PROB/15625000) >> 4, halved (p < 10 %),
        // then quartered for each decade p is below 1 %, 0.1 %, … 0.0001 % (five times: power runs
        // 100 → 10^7); the same for β. delta = α·(30 ms − 15 ms) + β·(30 ms − 0) in ticks.
        let params = PieParams::default();
        let mut v = PieVars {
            qdelay: ns2ticks(30_000_000),
            qdelay_old: 0,
            ..Default::default()
        };
        v.calculate_probability(&params, 100_000);
        let unit = MAX_PROB / PSCHED_TICKS_PER_SEC;
        let alpha = ((2 * unit) >> 4) >> 1 >> 10;
        let beta = ((20 * unit) >> 4) >> 1 >> 10;
        let want =
            alpha * (ns2ticks(30_000_000) - ns2ticks(15_000_000)) + beta * ns2ticks(30_000_000);
        assert_eq!(v.prob, want);
        assert_eq!(v.qdelay_old, ns2ticks(30_000_000));
    }

    #[test]
    fn no_early_drop_in_the_burst_allowance_or_below_two_mtus() {
        let params = PieParams::default();
        let mut v = PieVars {
            prob: MAX_PROB / 2,
            qdelay: ns2ticks(100_000_000),
            ..Default::default()
        };
        let mut rnd = || 0u64;
        assert!(
            !v.drop_early(&params, 1_000_000, 1500, 1514, &mut rnd),
            "burst allowance"
        );
        v.burst_time = 0;
        assert!(
            !v.drop_early(&params, 3000, 1500, 1514, &mut rnd),
            "under 2 MTU"
        );
        // De-randomisation: with p = ½ nothing drops until accu_prob reaches 0.85; then a zero draw
        // drops.
        assert!(
            !v.drop_early(&params, 1_000_000, 1500, 1514, &mut rnd),
            "accu 0.5"
        );
        assert!(
            v.drop_early(&params, 1_000_000, 1500, 1514, &mut rnd),
            "accu 1.0, draw 0"
        );
        assert_eq!(v.accu_prob, 0);
    }
}
