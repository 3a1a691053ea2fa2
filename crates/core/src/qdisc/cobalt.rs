//! COBALT — "CoDel and BLUE Alternate" — the AQM on every flow of CAKE, after the `cobalt_*` functions of
//! `net/sched/sch_cake.c` (Jonathan Morton).
//!
//! # The algorithm
//!
//! Two controllers run side by side on one queue.
//!
//! - **CoDel** (see [`super::codel_impl`]) signals a *responsive* flow: once the sojourn time of the
//!   packets it dequeues has stayed above `target` for an `interval`, it marks (ECN) or drops, and the
//!   next signal comes `interval / sqrt(count)` later. COBALT's version differs from the reference in
//!   three ways. It always marks when the packet is ECN-capable (no `ecn` switch). It has no separate
//!   `first_above_time`: `drop_next` does double duty, so entering the dropping state schedules the first
//!   signal one interval on, and the same scheduled time decays the count after the queue recovers
//!   (the count falls by one for each interval that passes without a signal, instead of CoDel's restart
//!   rule). And "above target" also requires the sojourn to exceed four MTU-times and two MTU-times per
//!   bulk flow (in ingress mode), so a slow link's serialisation is not mistaken for a standing queue.
//! - **BLUE** signals an *unresponsive* flow, one that keeps the queue full whatever CoDel does. Each
//!   time the queue overflows (CAKE drops from the flow with the largest backlog) the drop probability
//!   `p_drop` rises by 1/256, at most once per `target`; each time the flow is found empty it falls by
//!   1/4096, again at most once per `target`. Every dequeued packet is then dropped with probability
//!   `p_drop` — never marked: BLUE is for flows that ignore marks.
//!
//! # The arithmetic
//!
//! Times are nanoseconds (`ktime_t`). `1/sqrt(count)` is a Q0.32 value; for counts below 16 it comes from
//! the kernel's table of eight-Newton-step values (the single step is too coarse there), above from one
//! Newton step ([`newton_step_q32`], shared with CoDel). The interval is scaled with `reciprocal_scale`,
//! which takes a 32-bit interval: as in the kernel, an interval above 4.29 s (the `interplanetary`
//! preset) is truncated to its low 32 bits there.
//!
//! # Invariants
//!
//! - `count == 0` outside an episode; then `drop_next` is an activity timeout (`now + interval`).
//! - A flow that saw no packet for an interval (its activity timeout expired) enters the dropping state
//!   with `drop_next = now`: its second packet above target is signalled at once, not an interval
//!   later. The kernel behaves so, and tclab keeps it.
//! - `p_drop` saturates at `u32::MAX` rising and at 0 falling.

use super::codel_impl::{newton_step_q32, reciprocal_scale, set_ce};
use crate::packet::Packet;

/// `struct cobalt_params`: one tin's settings (nanoseconds; probabilities in Q0.32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CobaltParams {
    pub interval: u64,
    pub target: u64,
    /// The time one MTU takes at the tin's rate.
    pub mtu_time: u64,
    pub p_inc: u32,
    pub p_dec: u32,
}

/// `struct cobalt_vars`: one flow's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CobaltVars {
    pub count: u32,
    /// Q0.32 `1/sqrt(count)`.
    pub rec_inv_sqrt: u32,
    /// The next scheduled signal (dropping), or when the state decays (idle). Nanoseconds.
    pub drop_next: i64,
    pub blue_timer: i64,
    /// BLUE's drop probability, Q0.32.
    pub p_drop: u32,
    pub dropping: bool,
    /// The last packet looked at was ECN-marked.
    pub ecn_marked: bool,
}

/// `inv_sqrt_cache`: 1/sqrt(count) for counts 0..16, from eight Newton steps (0 and 1 are both "1.0").
const INV_SQRT_CACHE: [u32; 16] = [
    !0, !0, 3037000500, 2479700525, 2147483647, 1920767767, 1753413056, 1623345051, 1518500250,
    1431655765, 1358187914, 1294981364, 1239850263, 1191209601, 1147878294, 1108955788,
];

impl CobaltVars {
    /// `cobalt_invsqrt`.
    fn invsqrt(&mut self) {
        self.rec_inv_sqrt = match INV_SQRT_CACHE.get(self.count as usize) {
            Some(&v) => v,
            None => newton_step_q32(self.count, self.rec_inv_sqrt) as u32,
        };
    }

    /// `cobalt_queue_full`: the queue overflowed and this flow paid. BLUE's probability rises (at most
    /// once per target) and CoDel's dropping state starts at once. True when BLUE went from quiet to
    /// active (the tin counts the flow unresponsive).
    pub fn queue_full(&mut self, p: &CobaltParams, now: i64) -> bool {
        let mut up = false;
        if now.wrapping_sub(self.blue_timer) > p.target as i64 {
            up = self.p_drop == 0;
            self.p_drop = self.p_drop.checked_add(p.p_inc).unwrap_or(!0);
            self.blue_timer = now;
        }
        self.dropping = true;
        self.drop_next = now;
        if self.count == 0 {
            self.count = 1;
        }
        up
    }

    /// `cobalt_queue_empty`: the flow was served and found empty. BLUE's probability falls (at most once
    /// per target), the dropping state ends, the count decays by one if its time has come. True when BLUE
    /// went from active to quiet.
    pub fn queue_empty(&mut self, p: &CobaltParams, now: i64) -> bool {
        let mut down = false;
        if self.p_drop != 0 && now.wrapping_sub(self.blue_timer) > p.target as i64 {
            self.p_drop = self.p_drop.saturating_sub(p.p_dec);
            self.blue_timer = now;
            down = self.p_drop == 0;
        }
        self.dropping = false;
        if self.count != 0 && now.wrapping_sub(self.drop_next) >= 0 {
            self.count -= 1;
            self.invsqrt();
            self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
        }
        down
    }

    /// `cobalt_should_drop`: look at a freshly dequeued packet that waited since `enqueued`; mark it
    /// (setting CE) or answer true to drop it. `bulk_flows` is the tin's bulk flow count in ingress mode,
    /// 0 otherwise; `random` is a fresh `get_random_u32()` for BLUE.
    pub fn should_drop(
        &mut self,
        p: &CobaltParams,
        now: i64,
        pkt: &mut Packet,
        enqueued: i64,
        bulk_flows: u32,
        random: u32,
    ) -> bool {
        let sojourn = now.wrapping_sub(enqueued).max(0) as u64;
        let mut schedule = now.wrapping_sub(self.drop_next);
        let over_target = sojourn > p.target
            && sojourn > p.mtu_time.wrapping_mul(bulk_flows as u64).wrapping_mul(2)
            && sojourn > p.mtu_time.wrapping_mul(4);
        let mut next_due = self.count != 0 && schedule >= 0;
        let mut drop = false;
        self.ecn_marked = false;

        if over_target {
            if !self.dropping {
                self.dropping = true;
                self.drop_next = control(now, p.interval, self.rec_inv_sqrt);
            }
            if self.count == 0 {
                self.count = 1;
            }
        } else if self.dropping {
            self.dropping = false;
        }

        if next_due && self.dropping {
            // Mark if the packet can carry it, otherwise drop.
            self.ecn_marked = set_ce(pkt);
            drop = !self.ecn_marked;
            self.count = self.count.checked_add(1).unwrap_or(self.count);
            self.invsqrt();
            self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
            schedule = now.wrapping_sub(self.drop_next);
        } else {
            while next_due {
                self.count -= 1;
                self.invsqrt();
                self.drop_next = control(self.drop_next, p.interval, self.rec_inv_sqrt);
                schedule = now.wrapping_sub(self.drop_next);
                next_due = self.count != 0 && schedule >= 0;
            }
        }

        // BLUE; deliberately without ECN.
        if self.p_drop != 0 {
            drop |= random < self.p_drop;
        }

        // drop_next doubles as an activity timeout.
        if self.count == 0 {
            self.drop_next = now.wrapping_add(p.interval as i64);
        } else if schedule > 0 && !drop {
            self.drop_next = now;
        }
        drop
    }
}

/// `cobalt_control`: `t + interval / sqrt(count)`.
pub fn control(t: i64, interval: u64, rec_inv_sqrt: u32) -> i64 {
    t.wrapping_add(reciprocal_scale(interval as u32, rec_inv_sqrt) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn params() -> CobaltParams {
        CobaltParams {
            interval: 100 * MS as u64,
            target: 5 * MS as u64,
            mtu_time: 0,
            p_inc: 1 << 24,
            p_dec: 1 << 20,
        }
    }

    fn ect_packet() -> Packet {
        let mut data = vec![0u8; 20];
        data[0] = 0x45;
        data[1] = 0x02; // ECT(0)
        Packet {
            data,
            len: 1514,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    #[test]
    fn the_cache_agrees_with_newton_steps_where_they_take_over() {
        // Above the cache a single step refines the previous value: from count 15's cached value
        // (0.25820), one step at count 16 gives x/2·(3 − 16x²) = 0.24960 by hand, within 0.2 % of
        // 1/sqrt(16) = 0.25 = 2^30 in Q0.32.
        let v = newton_step_q32(16, INV_SQRT_CACHE[15]) as u32;
        let exact = 1u64 << 30;
        assert!(
            (v as i64 - exact as i64).unsigned_abs() < exact / 500,
            "{v}"
        );
        assert!(v < exact as u32, "one step from above undershoots: {v}");
        // The cached 1/sqrt(4) is exactly 0.5 in Q0.32 less one unit: 2147483647.
        assert_eq!(INV_SQRT_CACHE[4], (1u32 << 31) - 1);
    }

    #[test]
    fn first_signal_comes_one_interval_after_the_sojourn_exceeds_target() {
        // A flow whose earlier episode has decayed holds count 0's cached "1.0" (2^32−1). Hand-derived:
        // at 10 ms the sojourn is 10 ms > 5 ms target → dropping, drop_next = now + 100 ms × (2^32−1)/2^32
        // = now + 99 999 999 ns, and nothing is signalled yet.
        // A packet below target at 9 ms arms the activity timeout (drop_next = 9 + 100 ms).
        let p = params();
        let mut v = CobaltVars {
            rec_inv_sqrt: !0,
            ..Default::default()
        };
        assert!(!v.should_drop(&p, 9 * MS, &mut ect_packet(), 9 * MS, 0, u32::MAX));
        assert_eq!(v.drop_next, 109 * MS);
        let mut pkt = ect_packet();
        assert!(!v.should_drop(&p, 10 * MS, &mut pkt, 0, 0, u32::MAX));
        assert!(v.dropping);
        assert_eq!(v.count, 1);
        assert_eq!(v.drop_next, 10 * MS + 99_999_999);
        assert!(!v.ecn_marked);
        // At drop_next the ECN-capable packet is marked, not dropped; count 2; next signal
        // interval/sqrt(2) later: 100 ms × 3037000500 / 2^32 = 70 710 678 ns.
        let t = v.drop_next;
        let mut pkt = ect_packet();
        assert!(!v.should_drop(&p, t, &mut pkt, t - 10 * MS, 0, u32::MAX));
        assert!(v.ecn_marked);
        assert_eq!(pkt.data[1] & 3, 3, "CE set");
        assert_eq!(v.count, 2);
        assert_eq!(v.drop_next, t + 70_710_678);
        // A Not-ECT packet at the next due time is dropped.
        let t = v.drop_next;
        let mut pkt = ect_packet();
        pkt.data[1] = 0;
        assert!(v.should_drop(&p, t, &mut pkt, t - 10 * MS, 0, u32::MAX));
        assert_eq!(v.count, 3);
    }

    #[test]
    fn after_an_idle_interval_the_second_packet_above_target_is_signalled() {
        // drop_next is also an activity timeout: when it lies in the past (the flow saw no packet for an
        // interval — here a fresh flow, drop_next 0), entering the dropping state leaves drop_next = now,
        // so the next packet above target is signalled at once (the kernel's behaviour, kept).
        let p = params();
        let mut v = CobaltVars::default();
        assert!(!v.should_drop(&p, 10 * MS, &mut ect_packet(), 0, 0, u32::MAX));
        assert_eq!(v.drop_next, 10 * MS);
        let mut pkt = ect_packet();
        pkt.data[1] = 0;
        assert!(v.should_drop(&p, 11 * MS, &mut pkt, 0, 0, u32::MAX));
    }

    #[test]
    fn blue_rises_once_per_target_on_overflow_and_falls_on_empty() {
        // Hand-derived: overflows at 0, 1, 2 … 19 ms with target 5 ms raise p_drop only when more than
        // 5 ms passed since the last rise: at 0 (timer starts at 0, so 0 − 0 is not > 5 ms: no), 6, 12,
        // 18 ms → 3 rises of 2^24 (3/256).
        let p = params();
        let mut v = CobaltVars::default();
        let mut ups = 0;
        for ms in 0..20 {
            ups += v.queue_full(&p, ms * MS) as u32;
        }
        assert_eq!(v.p_drop, 3 << 24);
        assert_eq!(ups, 1, "only the first rise turns BLUE on");
        assert!(v.dropping);
        // Empty at 30 ms (12 ms after the last rise): falls by 2^20; empty again at 31 ms: too soon.
        assert!(!v.queue_empty(&p, 30 * MS));
        assert_eq!(v.p_drop, (3 << 24) - (1 << 20));
        v.queue_empty(&p, 31 * MS);
        assert_eq!(v.p_drop, (3 << 24) - (1 << 20));
        // BLUE drops a packet whose random draw is below p_drop, even a marked-capable one.
        let mut pkt = ect_packet();
        let drop = v.should_drop(&p, 40 * MS, &mut pkt, 40 * MS, 0, 0);
        assert!(drop);
        let mut pkt = ect_packet();
        assert!(!v.should_drop(&p, 41 * MS, &mut pkt, 41 * MS, 0, u32::MAX));
    }

    #[test]
    fn the_count_decays_one_per_interval_when_the_queue_recovers() {
        // Build count 3 by two signals, then let the sojourn fall below target: each look at or after
        // drop_next takes one off the count and schedules the next decay interval/sqrt(count) later.
        let p = params();
        let mut v = CobaltVars::default();
        let mut pkt = ect_packet();
        v.should_drop(&p, 0, &mut pkt, -10 * MS, 0, u32::MAX);
        for _ in 0..2 {
            let t = v.drop_next;
            v.should_drop(&p, t, &mut ect_packet(), t - 10 * MS, 0, u32::MAX);
        }
        assert_eq!(v.count, 3);
        // Below target, well past drop_next: the while loop decays until drop_next is in the future.
        let t = v.drop_next + 1000 * MS;
        v.should_drop(&p, t, &mut ect_packet(), t, 0, u32::MAX);
        assert!(!v.dropping);
        assert_eq!(v.count, 0);
        assert_eq!(
            v.drop_next,
            t + 100 * MS,
            "idle: drop_next is the activity timeout"
        );
    }
}
