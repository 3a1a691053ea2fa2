//! The CoDel control law, shared by `codel` and `fq_codel` as the kernel shares `include/net/codel_impl.h`;
//! CAKE's COBALT ([`super::cobalt`]) reuses its Newton step, its scaling and its ECN marking.
//!
//! # The algorithm
//!
//! CoDel ("controlled delay", Nichols and Jacobson, RFC 8289) watches the *sojourn time* of each packet it
//! dequeues — how long the packet waited — rather than the length of the queue. A queue that drains within
//! one `interval` (100 ms) is a good queue, absorbing a burst; a queue whose minimum sojourn stays above
//! `target` (5 ms) for a whole interval is a standing queue, which only adds delay. When that happens CoDel
//! enters the *dropping state*: it drops (or ECN-marks) the packet at the head, and schedules the next
//! drop at `interval / sqrt(count)` after the previous one, so the drop rate rises until the senders back
//! off and the sojourn falls below target, which ends the dropping state. If the queue goes bad again soon
//! after (within 16 intervals of the last scheduled drop) the count resumes near where it left off, so the
//! law does not restart from a drop rate it already knows is too low.
//!
//! Two guards keep it from acting on noise: nothing is dropped while the backlog is at most one MTU (a
//! single packet in the queue is never "standing"), and the first drop waits a full interval above target.
//!
//! # The arithmetic
//!
//! Times are the kernel's `codel_time_t`: nanoseconds shifted right by [`CODEL_SHIFT`] (≈1.024 µs units),
//! in a wrapping `u32` compared by signed difference. `1/sqrt(count)` is kept as a Q0.16 reciprocal
//! (`rec_inv_sqrt`) refined by one Newton step per count change (`codel_Newton_step`), and the interval is
//! scaled by it with `reciprocal_scale`, exactly as the kernel does, so drop times agree with Linux to the
//! unit.
//!
//! # Invariants
//!
//! - `dropping` implies `count ≥ 1` and `drop_next` is the time of the next scheduled drop.
//! - `first_above_time == 0` means the sojourn was below target (or the backlog ≤ MTU) at the last look.
//! - A caller's queue counters (backlog) are updated by its own dequeue; [`CodelQueue::backlog`] is read
//!   after each dequeue, as the kernel passes `&sch->qstats.backlog`.

use crate::packet::Packet;
use crate::Nanos;
use std::borrow::{Borrow, BorrowMut};

/// `codel_time_t`'s unit: 2^10 ns.
pub const CODEL_SHIFT: u32 = 10;
/// `CODEL_DISABLED_THRESHOLD`: `ce_threshold` off.
pub const CODEL_DISABLED_THRESHOLD: u32 = i32::MAX as u32;
const REC_INV_SQRT_BITS: u32 = 16;
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;

/// `codel_get_time()` at `now`.
pub fn codel_time(now: Nanos) -> u32 {
    (now >> CODEL_SHIFT) as u32
}

/// A time in microseconds (as tc sends it) into `codel_time_t` (`(us * NSEC_PER_USEC) >> CODEL_SHIFT`).
pub fn us_to_codel(us: u32) -> u32 {
    ((us as u64 * 1000) >> CODEL_SHIFT) as u32
}

/// `codel_time_to_us`.
pub fn codel_to_us(t: u32) -> u32 {
    (((t as u64) << CODEL_SHIFT) / 1000) as u32
}

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}
fn after_eq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// `struct codel_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodelParams {
    pub target: u32,
    pub ce_threshold: u32,
    pub interval: u32,
    /// `psched_mtu(dev)`: no drop while the backlog is at most this.
    pub mtu: u32,
    pub ecn: bool,
    pub ce_threshold_selector: u8,
    pub ce_threshold_mask: u8,
}

impl CodelParams {
    /// `codel_params_init`: interval 100 ms, target 5 ms, no CE threshold, no ECN.
    pub fn new(mtu: u32) -> CodelParams {
        CodelParams {
            target: us_to_codel(5_000),
            ce_threshold: CODEL_DISABLED_THRESHOLD,
            interval: us_to_codel(100_000),
            mtu,
            ecn: false,
            ce_threshold_selector: 0,
            ce_threshold_mask: 0,
        }
    }
}

/// `struct codel_vars`: one queue's control state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodelVars {
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
    pub rec_inv_sqrt: u16,
    pub first_above_time: u32,
    pub drop_next: u32,
    /// Sojourn time of the last packet looked at.
    pub ldelay: u32,
}

/// `struct codel_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodelStats {
    pub maxpacket: u32,
    /// Drops since the caller last reported them to its parents (`qdisc_tree_reduce_backlog`).
    pub drop_count: u32,
    pub drop_len: u32,
    pub ecn_mark: u32,
    pub ce_mark: u32,
}

/// What CoDel needs of the queue it controls.
pub trait CodelQueue {
    /// How the queue holds a packet: `Packet`, or `Box<Packet>` where packets travel boxed (fq_codel,
    /// [`crate::qdisc::Qdisc::enqueue_skb`]), handed back as it was held.
    type Pkt: BorrowMut<Packet>;
    /// Take the head packet, updating the caller's counters (`dequeue_func`).
    fn dequeue(&mut self) -> Option<Self::Pkt>;
    /// The backlog CoDel compares with the MTU (the whole qdisc's, for fq_codel).
    fn backlog(&self) -> u32;
    /// `drop_func`: a packet CoDel dropped (the caller counts it and hands it to the driver).
    fn drop(&mut self, pkt: Self::Pkt);
}

impl CodelVars {
    /// The statistics' `drop_next`: microseconds from `now` to the next scheduled drop (negative when
    /// overdue), or 0 outside the dropping state (`codel_dump_stats`, `fq_codel_dump_class_stats`).
    pub fn drop_next_us(&self, now: Nanos) -> i32 {
        if !self.dropping {
            return 0;
        }
        let delta = self.drop_next.wrapping_sub(codel_time(now)) as i32;
        if delta >= 0 {
            codel_to_us(delta as u32) as i32
        } else {
            -(codel_to_us(delta.unsigned_abs()) as i32)
        }
    }

    /// `codel_Newton_step`: refine `rec_inv_sqrt` ≈ 1/sqrt(count) (Q0.16, kept as the high half of
    /// [`newton_step_q32`]'s Q0.32).
    pub fn newton_step(&mut self) {
        let invsqrt = (self.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
        self.rec_inv_sqrt = (newton_step_q32(self.count, invsqrt) >> REC_INV_SQRT_SHIFT) as u16;
    }
}

/// One Newton step towards `1/sqrt(count)` on a Q0.32 estimate: `x/2 · (3 − count·x²)`, in the
/// kernel's order of shifts (CoDel's `codel_Newton_step`, COBALT's `cobalt_newton_step`). The result is
/// not truncated: each caller keeps the bits its own precision holds.
pub fn newton_step_q32(count: u32, invsqrt: u32) -> u64 {
    let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
    let mut val = (3u64 << 32).wrapping_sub(count as u64 * invsqrt2 as u64);
    val >>= 2; // room for the multiply below
    val.wrapping_mul(invsqrt as u64) >> (32 - 2 + 1)
}

/// `reciprocal_scale(val, ep_ro)`: `val · ep_ro / 2^32`, the interval scaled by a Q0.32 `1/sqrt(count)`.
pub fn reciprocal_scale(val: u32, ep_ro: u32) -> u32 {
    ((val as u64 * ep_ro as u64) >> 32) as u32
}

/// `codel_control_law`: `t + interval / sqrt(count)`.
pub fn control_law(t: u32, interval: u32, rec_inv_sqrt: u16) -> u32 {
    t.wrapping_add(reciprocal_scale(
        interval,
        (rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT,
    ))
}

/// `INET_ECN_set_ce` on an IPv4 packet: ECT(0)/ECT(1) become CE (the header checksum updated as
/// `ipv4_change_dsfield` does); a packet already CE counts as marked; Not-ECT or non-IPv4 cannot be.
pub fn set_ce(pkt: &mut Packet) -> bool {
    if pkt.protocol != 0x0800 || pkt.data.len() < 20 || pkt.data[0] >> 4 != 4 {
        return false;
    }
    match pkt.data[1] & 3 {
        0 => false,
        3 => true,
        _ => {
            ipv4_change_dsfield(&mut pkt.data, !0, 3);
            true
        }
    }
}

/// `ipv4_change_dsfield`: the TOS byte becomes `(tos & mask) | value`, and the header checksum follows
/// (RFC 1624's incremental update). `data` is an IPv4 header of at least 20 bytes.
pub fn ipv4_change_dsfield(data: &mut [u8], mask: u8, value: u8) {
    let old = u16::from_be_bytes([data[0], data[1]]);
    data[1] = (data[1] & mask) | value;
    let new = u16::from_be_bytes([data[0], data[1]]);
    // HC' = ~(~HC + ~m + m').
    let hc = u16::from_be_bytes([data[10], data[11]]);
    let mut sum = (!hc as u32) + (!old as u32) + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    data[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

fn should_drop<P: Borrow<Packet>>(
    pkt: Option<&P>,
    backlog: u32,
    vars: &mut CodelVars,
    params: &CodelParams,
    stats: &mut CodelStats,
    now: u32,
) -> bool {
    let Some(pkt) = pkt else {
        vars.first_above_time = 0;
        return false;
    };
    let pkt = pkt.borrow();
    vars.ldelay = now.wrapping_sub(codel_time(pkt.enqueue_ns));
    stats.maxpacket = stats.maxpacket.max(pkt.len);
    if !after_eq(vars.ldelay, params.target) || backlog <= params.mtu {
        // Went below: stay below for at least an interval.
        vars.first_above_time = 0;
        return false;
    }
    if vars.first_above_time == 0 {
        // Just went above: if it stays above for an interval, dropping is allowed.
        vars.first_above_time = now.wrapping_add(params.interval);
        false
    } else {
        after(now, vars.first_above_time)
    }
}

/// `codel_dequeue`: the next packet CoDel lets through from `q`, dropping (or marking) on the way as the
/// control law says. The packet's `enqueue_ns` must be when it entered this queue.
///
/// Inlined into its caller for the common case, a packet let through with no state to change (the
/// caller's queue hands it straight to the caller's result, not copied through this function's); the
/// dropping state and its control law run out of line in [`codel_drop_path`].
#[inline]
pub fn codel_dequeue<Q: CodelQueue>(
    q: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now_ns: Nanos,
) -> Option<Q::Pkt> {
    let mut pkt = q.dequeue();
    if pkt.is_none() {
        vars.first_above_time = 0;
        vars.dropping = false;
        return None;
    }
    let now = codel_time(now_ns);
    let drop = should_drop(pkt.as_ref(), q.backlog(), vars, params, stats, now);
    if vars.dropping || drop {
        pkt = codel_drop_path(q, params, vars, stats, now, pkt, drop);
    }
    if let Some(p) = pkt.as_mut() {
        if after(vars.ldelay, params.ce_threshold) {
            ce_threshold_mark(p.borrow_mut(), params, stats);
        }
    }
    pkt
}

/// `ce_threshold` exceeded: mark the packet (if its DSCP is selected), as `codel_dequeue`'s end does.
#[inline(never)]
fn ce_threshold_mark(p: &mut Packet, params: &CodelParams, stats: &mut CodelStats) {
    let set = if params.ce_threshold_mask != 0 {
        p.ipv4_tos()
            .is_some_and(|ds| ds & params.ce_threshold_mask == params.ce_threshold_selector)
    } else {
        true
    };
    if set && set_ce(p) {
        stats.ce_mark += 1;
    }
}

/// The part of `codel_dequeue` for a queue in (or entering) the dropping state: drops and marks as the
/// control law says, and returns the packet to let through.
#[inline(never)]
fn codel_drop_path<Q: CodelQueue>(
    q: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now: u32,
    mut pkt: Option<Q::Pkt>,
    drop: bool,
) -> Option<Q::Pkt> {
    'end: {
        if vars.dropping {
            if !drop {
                // Sojourn below target: leave the dropping state.
                vars.dropping = false;
            } else if after_eq(now, vars.drop_next) {
                // Time for the next drop, perhaps several: a large backlog may need them now.
                while vars.dropping && after_eq(now, vars.drop_next) {
                    vars.count = vars.count.wrapping_add(1);
                    vars.newton_step();
                    let Some(mut p) = pkt.take() else { break };
                    if params.ecn && set_ce(p.borrow_mut()) {
                        stats.ecn_mark += 1;
                        vars.drop_next =
                            control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                        pkt = Some(p);
                        break 'end;
                    }
                    stats.drop_len = stats.drop_len.wrapping_add(p.borrow().len);
                    q.drop(p);
                    stats.drop_count += 1;
                    pkt = q.dequeue();
                    if !should_drop(pkt.as_ref(), q.backlog(), vars, params, stats, now) {
                        vars.dropping = false;
                    } else {
                        vars.drop_next =
                            control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    }
                }
            }
        } else if drop {
            let mut p = pkt.take().expect("a packet was dequeued");
            if params.ecn && set_ce(p.borrow_mut()) {
                stats.ecn_mark += 1;
                pkt = Some(p);
            } else {
                stats.drop_len = stats.drop_len.wrapping_add(p.borrow().len);
                q.drop(p);
                stats.drop_count += 1;
                pkt = q.dequeue();
                should_drop(pkt.as_ref(), q.backlog(), vars, params, stats, now);
            }
            vars.dropping = true;
            // Back above target soon after the last cycle: resume near the drop rate that controlled
            // the queue then.
            let delta = vars.count.wrapping_sub(vars.lastcount);
            if delta > 1
                && !after_eq(
                    now.wrapping_sub(vars.drop_next),
                    params.interval.wrapping_mul(16),
                )
            {
                vars.count = delta;
                vars.newton_step();
            } else {
                vars.count = 1;
                vars.rec_inv_sqrt = (!0u32 >> REC_INV_SQRT_SHIFT) as u16;
            }
            vars.lastcount = vars.count;
            vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
        }
    }
    pkt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Newton iteration `x ← x/2 · (3 − count·x²)` in Q0.16 converges to 1/sqrt(count): from 1.0
    /// (0xffff), count 2 goes 0.5, 0.625, 0.6934, … 0.7071 (46341/65536); six steps per count suffice
    /// to come within 1 % for every count up to 100.
    #[test]
    fn newton_steps_approach_the_reciprocal_square_root() {
        let mut v = CodelVars {
            count: 1,
            rec_inv_sqrt: 0xffff,
            ..Default::default()
        };
        for count in 2..=100u32 {
            v.count = count;
            for _ in 0..6 {
                v.newton_step();
            }
            let want = 65536.0 / (count as f64).sqrt();
            let got = v.rec_inv_sqrt as f64;
            assert!(
                (got - want).abs() / want < 0.01,
                "count {count}: {got} vs {want}"
            );
        }
    }

    /// control_law(t, 100 ms, 1/sqrt(4)) = t + 50 ms (in codel units: 97656 >> 1).
    #[test]
    fn control_law_scales_the_interval() {
        let interval = us_to_codel(100_000);
        assert_eq!(interval, 97_656);
        let next = control_law(1000, interval, 0x8000);
        assert_eq!(next, 1000 + 48_828);
    }

    #[test]
    fn ce_marking_keeps_the_checksum_valid() {
        let mut hdr = vec![
            0x45, 0x02, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0, 0, 10, 0, 0, 1, 10, 0,
            0, 2,
        ];
        let csum = |h: &[u8]| {
            let mut s: u32 = h
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
                .sum();
            while s >> 16 != 0 {
                s = (s & 0xffff) + (s >> 16);
            }
            !(s as u16)
        };
        let c = csum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        let mut p = Packet {
            data: hdr,
            len: 98,
            protocol: 0x0800,
            ..Default::default()
        };
        assert!(set_ce(&mut p));
        assert_eq!(p.data[1] & 3, 3);
        assert_eq!(csum(&p.data), 0, "checksum still verifies");
        p.data[1] = 0;
        assert!(!set_ce(&mut p), "Not-ECT cannot be marked");
    }
}
