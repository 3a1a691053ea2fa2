//! CUBIC (`net/ipv4/tcp_cubic.c`, module defaults) with HyStart, in the kernel's integer arithmetic:
//! beta 717/1024, C = 0.4 (`bic_scale` 41), fast convergence, TCP friendliness, `cubic_root` and the
//! once-per-jiffy update of `ca->cnt`. Time is in jiffies of [`HZ`](crate::HZ) = 1000.

use crate::cong::{jiffies, HZ};
use crate::Nanos;

const BICTCP_BETA_SCALE: u32 = 1024;
const BICTCP_HZ: u32 = 10;
/// `beta = 717` (717/1024 ≈ 0.7): the multiplicative decrease.
pub const CUBIC_BETA: u32 = 717;
/// `bic_scale = 41`: C = 41/1024 · 10 ≈ 0.4 through `cube_rtt_scale`.
const BIC_SCALE: u32 = 41;
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_ACK_DELTA_US: u64 = 2000;
const HYSTART_MIN_SAMPLES: u8 = 8;
const HYSTART_DELAY_MIN: u32 = 4000;
const HYSTART_DELAY_MAX: u32 = 16000;
/// `sk_gso_max_size` used by `hystart_ack_delay()`.
const GSO_MAX_SIZE: u64 = 65536;

const fn beta_scale() -> u32 {
    8 * (BICTCP_BETA_SCALE + CUBIC_BETA) / 3 / (BICTCP_BETA_SCALE - CUBIC_BETA)
}
const CUBE_RTT_SCALE: u64 = BIC_SCALE as u64 * 10;
const CUBE_FACTOR: u64 = (1u64 << (10 + 3 * BICTCP_HZ)) / (BIC_SCALE as u64 * 10);

/// How HyStart ended slow start, and at what cwnd (the new ssthresh): its ACK-train or its
/// delay-increase detector, which `nstat` counts apart (`TCPHystartTrainDetect`/`TrainCwnd`,
/// `TCPHystartDelayDetect`/`DelayCwnd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HystartExit {
    Train(u32),
    Delay(u32),
}

/// The HyStart counters, as `nstat` names Linux's: exits found by each detector, and the cwnds
/// they ended slow start at, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HystartStats {
    pub train_detect: u64,
    pub train_cwnd: u64,
    pub delay_detect: u64,
    pub delay_cwnd: u64,
}

impl HystartStats {
    pub(crate) fn count(&mut self, exit: HystartExit) {
        match exit {
            HystartExit::Train(c) => {
                self.train_detect += 1;
                self.train_cwnd += c as u64;
            }
            HystartExit::Delay(c) => {
                self.delay_detect += 1;
                self.delay_cwnd += c as u64;
            }
        }
    }
}

/// `struct bictcp`, times in jiffies (ms) and microseconds as in the kernel.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cubic {
    pub cnt: u32,
    pub last_max_cwnd: u32,
    pub last_cwnd: u32,
    pub last_time: u64,
    pub origin_point: u32,
    /// K in units of 1/1024 s.
    pub k: u64,
    pub delay_min_us: u32,
    /// Jiffies; 0 means "no epoch" exactly as the kernel (time 0 is never an
    /// epoch start because the handshake takes at least one RTT).
    pub epoch_start: u64,
    pub ack_cnt: u32,
    pub tcp_cwnd: u32,
    // HyStart
    pub hystart: bool,
    pub found: bool,
    pub sample_cnt: u8,
    pub round_start_us: u64,
    pub end_seq: u64,
    pub last_ack_us: u64,
    pub curr_rtt_us: u32,
}

/// `cubic_root()`: table lookup plus one Newton-Raphson step, as the kernel
/// (average error about 0.2 %).
pub(crate) fn cubic_root(a: u64) -> u32 {
    const V: [u8; 64] = [
        0, 54, 54, 54, 118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156, 157, 161, 164,
        168, 170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199, 200, 202, 204, 206, 209,
        211, 213, 215, 217, 219, 221, 222, 224, 225, 227, 229, 231, 232, 234, 236, 237, 239, 240,
        242, 244, 245, 246, 248, 250, 251, 252, 254,
    ];
    let b = 64 - a.leading_zeros(); // fls64
    if b < 7 {
        return (V[a as usize] as u32 + 35) >> 6;
    }
    let b = ((b * 84) >> 8) - 1;
    let shift = ((a >> (b * 3)) as usize).min(63);
    let mut x: u32 = ((V[shift] as u32 + 10) << b) >> 6;
    let x64 = x as u64;
    let den = (x64 * x64.saturating_sub(1)).max(1);
    x = (2 * x64 + a / den).min(u32::MAX as u64 / 341) as u32;
    (x * 341) >> 10
}

impl Cubic {
    pub fn new(hystart: bool) -> Cubic {
        Cubic {
            hystart,
            curr_rtt_us: u32::MAX,
            ..Cubic::default()
        }
    }

    /// `bictcp_reset()`: everything but HyStart's round state.
    pub fn reset(&mut self) {
        let keep = (
            self.hystart,
            self.round_start_us,
            self.end_seq,
            self.last_ack_us,
            self.curr_rtt_us,
            self.sample_cnt,
        );
        *self = Cubic::default();
        self.hystart = keep.0;
        self.round_start_us = keep.1;
        self.end_seq = keep.2;
        self.last_ack_us = keep.3;
        self.curr_rtt_us = keep.4;
        self.sample_cnt = keep.5;
        self.found = false;
    }

    /// `bictcp_hystart_reset()`.
    pub fn hystart_reset(&mut self, now: Nanos, snd_nxt: u64) {
        self.round_start_us = now / 1000;
        self.last_ack_us = now / 1000;
        self.end_seq = snd_nxt;
        self.curr_rtt_us = u32::MAX;
        self.sample_cnt = 0;
    }

    /// `cubictcp_recalc_ssthresh()`: fast convergence and beta.
    pub fn ssthresh(&mut self, cwnd: u32) -> u32 {
        self.epoch_start = 0;
        if cwnd < self.last_max_cwnd {
            // fast_convergence = 1
            self.last_max_cwnd = ((cwnd as u64 * (BICTCP_BETA_SCALE + CUBIC_BETA) as u64)
                / (2 * BICTCP_BETA_SCALE) as u64) as u32;
        } else {
            self.last_max_cwnd = cwnd;
        }
        (((cwnd as u64 * CUBIC_BETA as u64) / BICTCP_BETA_SCALE as u64) as u32).max(2)
    }

    /// `bictcp_update()`: compute `cnt`, the number of acked segments per
    /// cwnd increment, from the cubic curve and the Reno-friendly estimate.
    pub fn update(&mut self, now: Nanos, cwnd: u32, acked: u32) {
        let j = jiffies(now);
        self.ack_cnt = self.ack_cnt.wrapping_add(acked);
        if self.last_cwnd == cwnd && j.saturating_sub(self.last_time) <= HZ / 32 {
            return;
        }
        let friendly_only = self.epoch_start != 0 && j == self.last_time;
        if !friendly_only {
            self.last_cwnd = cwnd;
            self.last_time = j;
            if self.epoch_start == 0 {
                self.epoch_start = j.max(1);
                self.ack_cnt = acked;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.k = 0;
                    self.origin_point = cwnd;
                } else {
                    self.k =
                        cubic_root(CUBE_FACTOR.saturating_mul((self.last_max_cwnd - cwnd) as u64))
                            as u64;
                    self.origin_point = self.last_max_cwnd;
                }
            }
            // t = (now - epoch_start + delay_min) in 1/1024 s
            let mut t = j.saturating_sub(self.epoch_start);
            t += (self.delay_min_us as u64).div_ceil(1_000_000 / HZ); // usecs_to_jiffies
            t = (t << BICTCP_HZ) / HZ;
            let offs = t.abs_diff(self.k) as u128;
            let delta = ((CUBE_RTT_SCALE as u128 * offs * offs * offs) >> (10 + 3 * BICTCP_HZ))
                .min(u32::MAX as u128) as u32;
            let target = if t < self.k {
                self.origin_point.saturating_sub(delta)
            } else {
                self.origin_point.saturating_add(delta)
            };
            self.cnt = if target > cwnd {
                cwnd / (target - cwnd)
            } else {
                100u32.saturating_mul(cwnd)
            };
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }
        // TCP friendliness
        let delta = (cwnd.saturating_mul(beta_scale())) >> 3;
        if delta > 0 {
            while self.ack_cnt > delta {
                self.ack_cnt -= delta;
                self.tcp_cwnd = self.tcp_cwnd.saturating_add(1);
            }
        }
        if self.tcp_cwnd > cwnd {
            let d = self.tcp_cwnd - cwnd;
            let max_cnt = cwnd / d;
            if self.cnt > max_cnt {
                self.cnt = max_cnt;
            }
        }
        self.cnt = self.cnt.max(2);
    }

    /// `cubictcp_acked()` and `hystart_update()`. `rtt_us` is the RTT of the
    /// most recently sent segment this ACK covers. Returns the exit (its cwnd the
    /// new ssthresh) if HyStart found it.
    #[allow(clippy::too_many_arguments)]
    pub fn acked(
        &mut self,
        now: Nanos,
        rtt_us: Option<u64>,
        cwnd: u32,
        ssthresh: u32,
        snd_una: u64,
        snd_nxt: u64,
        pacing_rate: u64,
        paced: bool,
    ) -> Option<HystartExit> {
        let rtt_us = rtt_us?;
        let j = jiffies(now);
        if self.epoch_start != 0 && j.saturating_sub(self.epoch_start) < HZ {
            return None;
        }
        let delay = rtt_us.clamp(1, u32::MAX as u64) as u32;
        if self.delay_min_us == 0 || self.delay_min_us > delay {
            self.delay_min_us = delay;
        }
        if self.found || cwnd >= ssthresh || !self.hystart {
            return None;
        }
        // hystart_update()
        if snd_una > self.end_seq {
            self.hystart_reset(now, snd_nxt);
        }
        if cwnd < HYSTART_LOW_WINDOW {
            return None;
        }
        let now_us = now / 1000;
        let mut exit = None;
        // ACK-train detection
        if now_us.saturating_sub(self.last_ack_us) <= HYSTART_ACK_DELTA_US {
            self.last_ack_us = now_us;
            let ack_delay = (GSO_MAX_SIZE * 4 * 1_000_000)
                .checked_div(pacing_rate)
                .map_or(0, |d| d.min(1000));
            // Pacing may have delayed the train by up to half an RTT in slow start, so only an unpaced
            // socket's threshold is halved (`sk_pacing_status == SK_PACING_NONE`).
            let threshold = (self.delay_min_us as u64 + ack_delay) >> (!paced as u32);
            if now_us.saturating_sub(self.round_start_us) > threshold {
                self.found = true;
                exit = Some(HystartExit::Train(cwnd));
            }
        }
        // Delay increase detection
        if self.curr_rtt_us > delay {
            self.curr_rtt_us = delay;
        }
        if self.sample_cnt < HYSTART_MIN_SAMPLES {
            self.sample_cnt += 1;
        } else {
            let thresh = (self.delay_min_us >> 3).clamp(HYSTART_DELAY_MIN, HYSTART_DELAY_MAX);
            if self.curr_rtt_us as u64 > self.delay_min_us as u64 + thresh as u64 {
                self.found = true;
                exit = Some(HystartExit::Delay(cwnd));
            }
        }
        exit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubic_root_is_close() {
        // The kernel claims ~0.2 % average error; check a spread of values
        // stays within 2 % (the table is coarse for small inputs).
        for a in [1000u64, 12345, 1 << 20, 987654321, 1 << 40, 3 << 50] {
            let r = cubic_root(a) as f64;
            let exact = (a as f64).cbrt();
            assert!(
                (r - exact).abs() / exact < 0.02,
                "a={a} r={r} exact={exact}"
            );
        }
    }

    /// hystart_update's ACK train (tcp_cubic.c, 6.12): on an unpaced socket the train must outlast half
    /// of delay_min plus the ACK-delay allowance, on a paced one the whole of it (pacing may spread a
    /// round's sends over half an RTT in slow start). delay_min 10 ms and a pacing rate of 1 GB/s (an
    /// allowance of 65 536 × 4 × 10^6 / 10^9 = 262 µs): thresholds (10 000 + 262) / 2 = 5 131 µs unpaced
    /// and 10 262 µs paced. With an ACK every millisecond from the round's start, the unpaced train ends
    /// slow start at the ACK 6 ms in, the paced one at 11 ms.
    #[test]
    fn a_paced_sockets_ack_train_must_last_the_whole_min_rtt() {
        for (paced, exit_ms) in [(false, 6u64), (true, 11)] {
            let mut c = Cubic::new(true);
            let ack = |c: &mut Cubic, ms: u64| {
                // From 1 s; snd_una 1 past end_seq 0 starts the round at the first ACK; cwnd 20.
                c.acked(
                    (1000 + ms) * crate::MS,
                    Some(10_000),
                    20,
                    u32::MAX,
                    1,
                    100,
                    1_000_000_000,
                    paced,
                )
            };
            let mut ms = 0;
            let mut exit = ack(&mut c, ms);
            while exit.is_none() && ms < 20 {
                ms += 1;
                exit = ack(&mut c, ms);
            }
            assert_eq!(
                (exit, ms),
                (Some(HystartExit::Train(20)), exit_ms),
                "paced: {paced}"
            );
        }
    }

    #[test]
    fn kernel_constants() {
        // beta_scale = 8*(1024+717)/3/(1024-717) = 13928/3/307 = 4642/307 = 15
        assert_eq!(beta_scale(), 15);
        // cube_factor = 2^40 / 410
        assert_eq!(CUBE_FACTOR, 2681735677);
    }
}
