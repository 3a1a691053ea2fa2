//! Random Early Detection's control law, after `include/net/red.h` (Floyd and Jacobson, "Random Early
//! Detection Gateways for Congestion Avoidance", 1993), shared by `red` and, later, `choke` and `gred`.
//!
//! # The law
//!
//! On every arrival RED updates an exponentially weighted average of the queue's backlog,
//! `avg ← avg + W·(backlog − avg)` with `W = 2^−Wlog`, kept as a fixed-point number with its point at
//! `Wlog` so that the update is one shift and two additions. Below `qth_min` nothing happens; at or above
//! `qth_max` every packet is marked (dropped, or CE-marked with ECN); between them a packet is marked with a
//! probability that grows linearly from 0 at `qth_min` to `max_P` at `qth_max`, spread out by the
//! count of packets since the last mark: the kernel draws a random `qR` uniform in
//! `[0, (qth_max−qth_min)/max_P)` after each mark and marks again when
//! `(avg − qth_min)·count ≥ qR` — Fig. 17 of the paper, without a division.
//!
//! While the queue is idle the average must still decay: on the first arrival after an idle period the
//! kernel looks the idle time up in `Stab`, a 256-entry table tc computes (`tc_red_eval_idle_damping`)
//! of how many halvings `(1−W)^(idle/xmit_time)` amounts to, indexed by `idle >> Scell_log` µs; short
//! idle times the table rounds to zero are approximated linearly.
//!
//! Adaptive RED (Floyd, Gummadi, Shenker 2001) moves `max_P` every 500 ms to keep the average between
//! `qth_min + 0.4·(qth_max−qth_min)` and `+0.6·…`: additively up by `min(1 %, max_P/4)` (to at most
//! 50 %), multiplicatively down by 0.9 (to at least 1 %).
//!
//! # What tclab models and how
//!
//! The arithmetic is the kernel's: 32-bit `max_P` scaled by 2^32, `reciprocal_value`/`reciprocal_divide`
//! for `qR`, the `Stab` lookup and its linear approximation, `MAX_P_ALPHA`. The random numbers come from
//! a generator seeded from the run's seed (the kernel's `get_random_u32`), so a run repeats exactly.
//! Time is the caller's `now`; the idle time is measured in µs as `ktime_us_delta` measures it.

use crate::Nanos;

pub const RED_STAB_SIZE: usize = 256;
const RED_ONE_PERCENT: u32 = ((1u64 << 32) as f64 / 100.0 + 0.5) as u32;
const MAX_P_MIN: u32 = RED_ONE_PERCENT;
const MAX_P_MAX: u32 = 50 * RED_ONE_PERCENT;

/// `struct reciprocal_value`: division by a constant as a multiply and two shifts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reciprocal {
    m: u32,
    sh1: u8,
    sh2: u8,
}

/// `fls`: the position of the highest set bit, 1-based; 0 for 0.
fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

impl Reciprocal {
    /// `reciprocal_value(d)`, d ≥ 1.
    pub fn new(d: u32) -> Reciprocal {
        let d = d.max(1);
        let l = fls(d - 1);
        let m = ((1u64 << 32) * ((1u64 << l) - d as u64)) / d as u64 + 1;
        Reciprocal {
            m: m as u32,
            sh1: l.min(1) as u8,
            sh2: l.saturating_sub(1) as u8,
        }
    }

    /// `reciprocal_divide(a, R)`: `a / d`.
    pub fn divide(&self, a: u32) -> u32 {
        let t = ((a as u64 * self.m as u64) >> 32) as u32;
        (t + ((a - t) >> self.sh1)) >> self.sh2
    }
}

/// `red_maxp`: `max_P` for a `Plog`, before it is multiplied by the threshold distance.
fn red_maxp(plog: u8) -> u32 {
    if plog < 32 {
        u32::MAX >> plog
    } else {
        u32::MAX
    }
}

/// `struct red_parms`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RedParms {
    /// Thresholds, scaled by 2^Wlog.
    pub qth_min: u32,
    pub qth_max: u32,
    scell_max: u32,
    /// Probability at `qth_max`, scaled by 2^32.
    pub max_p: u32,
    max_p_reciprocal: Reciprocal,
    qth_delta: u32,
    target_min: u32,
    target_max: u32,
    pub scell_log: u8,
    pub wlog: u8,
    pub plog: u8,
    #[serde(with = "crate::snapshot::array")]
    stab: [u8; RED_STAB_SIZE],
}

/// `red_check_params`: whether the kernel accepts these (it answers EINVAL otherwise).
pub fn check_params(qth_min: u32, qth_max: u32, wlog: u8, scell_log: u8, stab: &[u8]) -> bool {
    fls(qth_min) + (wlog as u32) < 32
        && fls(qth_max) + (wlog as u32) < 32
        && scell_log < 32
        && qth_max >= qth_min
        && stab.iter().all(|&s| s < 32)
}

impl RedParms {
    /// `red_set_parms`. `max_p` 0 means "from Plog".
    pub fn new(
        qth_min: u32,
        qth_max: u32,
        wlog: u8,
        plog: u8,
        scell_log: u8,
        stab: &[u8],
        max_p: u32,
    ) -> RedParms {
        let mut delta = qth_max as i64 - qth_min as i64;
        if delta <= 0 {
            delta = 1;
        }
        let delta = delta as u32;
        let max_p = if max_p == 0 {
            red_maxp(plog).wrapping_mul(delta)
        } else {
            max_p
        };
        let mut table = [0u8; RED_STAB_SIZE];
        for (t, s) in table.iter_mut().zip(stab) {
            *t = *s;
        }
        RedParms {
            qth_min: qth_min << wlog,
            qth_max: qth_max << wlog,
            scell_max: 255u32.wrapping_shl(scell_log as u32),
            max_p,
            max_p_reciprocal: Reciprocal::new((max_p / delta).max(1)),
            qth_delta: delta,
            target_min: qth_min + 2 * (delta / 5),
            target_max: qth_min + 3 * (delta / 5),
            scell_log,
            wlog,
            plog,
            stab: table,
        }
    }
}

/// `struct red_vars`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RedVars {
    /// Packets since the last mark (−1: none since the average last left the band).
    pub qcount: i32,
    /// The cached random number.
    pub qr: u32,
    /// Average backlog, scaled by 2^Wlog.
    pub qavg: u64,
    /// Start of the current idle period.
    pub idle_since: Option<Nanos>,
}

impl Default for RedVars {
    fn default() -> Self {
        RedVars {
            qcount: -1,
            qr: 0,
            qavg: 0,
            idle_since: None,
        }
    }
}

/// What [`RedVars::action`] decides for an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedAction {
    DontMark,
    /// Between the thresholds, chosen by probability.
    ProbMark,
    /// At or above `qth_max`.
    HardMark,
}

impl RedVars {
    /// `red_set_vars` / `red_restart`.
    pub fn restart(&mut self) {
        *self = RedVars::default();
    }

    /// `red_calc_qavg_from_idle_time`.
    fn qavg_from_idle_time(&self, p: &RedParms, now: Nanos) -> u64 {
        let since = self.idle_since.unwrap_or(now);
        let delta_us = (now.saturating_sub(since) / 1000) as i64;
        let us_idle = delta_us.min(p.scell_max as i64) as u64;
        let shift = p.stab[((us_idle >> p.scell_log) as usize) & (RED_STAB_SIZE - 1)];
        if shift != 0 {
            self.qavg >> shift
        } else {
            // The first part of the exponent, approximated by a line.
            let us = (self.qavg.wrapping_mul(us_idle)) >> p.scell_log;
            if us < self.qavg >> 1 {
                self.qavg - us
            } else {
                self.qavg >> 1
            }
        }
    }

    /// `red_calc_qavg`: the new average for a backlog of `backlog` bytes.
    pub fn calc_qavg(&self, p: &RedParms, backlog: u32, now: Nanos) -> u64 {
        if self.idle_since.is_none() {
            // avg + W·(backlog − avg), the average scaled by 2^Wlog.
            (self.qavg + backlog as u64).wrapping_sub(self.qavg >> p.wlog)
        } else {
            self.qavg_from_idle_time(p, now)
        }
    }

    /// `red_action`, with `random` the kernel's `get_random_u32`.
    pub fn action(
        &mut self,
        p: &RedParms,
        qavg: u64,
        random: &mut impl FnMut() -> u32,
    ) -> RedAction {
        if qavg < p.qth_min as u64 {
            self.qcount = -1;
            return RedAction::DontMark;
        }
        if qavg >= p.qth_max as u64 {
            self.qcount = -1;
            return RedAction::HardMark;
        }
        if self.between_thresholds(p, qavg, random) {
            RedAction::ProbMark
        } else {
            RedAction::DontMark
        }
    }

    /// `red_action`'s case between the thresholds (CHOKe runs it on its own): one more packet since
    /// the last mark; whether this one is marked (`red_mark_probability`), a new `qR` drawn after a mark
    /// or on entering the band.
    pub fn between_thresholds(
        &mut self,
        p: &RedParms,
        qavg: u64,
        random: &mut impl FnMut() -> u32,
    ) -> bool {
        self.qcount += 1;
        if self.qcount != 0 {
            // max_P·(avg − min)/(max − min) ≥ qR/count, divisionless.
            let lhs = (qavg.saturating_sub(p.qth_min as u64) >> p.wlog) * self.qcount as u64;
            if lhs >= self.qr as u64 {
                self.qcount = 0;
                self.qr = p.max_p_reciprocal.divide(random());
                return true;
            }
        } else {
            self.qr = p.max_p_reciprocal.divide(random());
        }
        false
    }

    /// `red_adaptative_algo`: every 500 ms, `max_P` follows the average towards the target band.
    pub fn adapt(&self, p: &mut RedParms, now: Nanos) {
        let qavg = if self.idle_since.is_some() {
            self.qavg_from_idle_time(p, now)
        } else {
            self.qavg
        } >> p.wlog;
        if qavg > p.target_max as u64 && p.max_p <= MAX_P_MAX {
            p.max_p += MAX_P_MIN.min(p.max_p / 4);
        } else if qavg < p.target_min as u64 && p.max_p >= MAX_P_MIN {
            p.max_p = (p.max_p / 10) * 9;
        }
        let d = ((p.max_p as u64 + p.qth_delta as u64 / 2) / p.qth_delta as u64) as u32;
        p.max_p_reciprocal = Reciprocal::new(d.max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reciprocal_division_is_exact_division() {
        // reciprocal_divide(a, reciprocal_value(d)) == a / d for every a (lib/reciprocal_div.c).
        for d in [1u32, 2, 3, 7, 10, 1000, 65_537, 1 << 31, u32::MAX] {
            let r = Reciprocal::new(d);
            for a in [
                0u32,
                1,
                2,
                99,
                12_345,
                1 << 20,
                u32::MAX / 3,
                u32::MAX - 1,
                u32::MAX,
            ] {
                assert_eq!(r.divide(a), a / d, "{a} / {d}");
            }
        }
    }

    #[test]
    fn the_average_moves_by_w_per_arrival() {
        // Wlog 9 (W = 1/512): from 0, one arrival at 1500 bytes of backlog leaves avg = 1500/512 bytes,
        // i.e. 1500 in the scaled value; a second at the same backlog adds 1500 − 1500/512 (rounded down).
        let p = RedParms::new(100_000, 300_000, 9, 21, 0, &[], 0);
        let mut v = RedVars::default();
        v.qavg = v.calc_qavg(&p, 1500, 0);
        assert_eq!(v.qavg, 1500);
        v.qavg = v.calc_qavg(&p, 1500, 0);
        assert_eq!(v.qavg, 1500 + 1500 - 1500 / 512);
    }

    #[test]
    fn no_marks_below_min_all_above_max() {
        let p = RedParms::new(100_000, 300_000, 9, 21, 0, &[], 0);
        let mut v = RedVars::default();
        let mut rnd = || 12345u32;
        assert_eq!(
            v.action(&p, (99_999u64) << 9, &mut rnd),
            RedAction::DontMark
        );
        assert_eq!(
            v.action(&p, (300_000u64) << 9, &mut rnd),
            RedAction::HardMark
        );
        assert_eq!(v.qcount, -1);
    }
}
