//! `taprio` (`sch_taprio.c`, software mode): IEEE 802.1Qbv's time-aware shaper — a gate per traffic
//! class, opened and closed by a schedule that repeats every cycle.
//!
//! The traffic classes are mqprio's (`num_tc`, the priority `map`, each class's `count@offset` range of
//! transmit queues); each queue holds a `pfifo` (classes `handle:1…N`, one per queue). A packet goes to
//! a queue of its class (`netdev_pick_tx`: the flow hash within the range). The schedule is a list of
//! entries `sched-entry S GATEMASK INTERVAL`: for INTERVAL ns the classes whose bit is in GATEMASK may
//! send. It starts at `base-time` if that is still to come, else at the first cycle boundary after
//! now (`taprio_get_start_time`); until then every gate is open (802.1Qbv's AdminGateStates). The
//! cycle is `cycle-time`, by default the sum of the intervals; entries past it are cut at its end.
//!
//! Dequeue (`taprio_dequeue_tc_priority`, Linux 6.4 on): the highest open class first, its queues in
//! turn; the packet at a queue's head goes only if its class's gate is open and it can be sent whole
//! before the gate closes — the guard band: now + its length at the link speed must not pass the time
//! the class's gate closes, which may be several entries on (a class open in consecutive entries, even
//! across the cycle's end, has one long window; one open in every entry has no guard band at all).
//! When nothing may go, the watchdog is set to the next entry's start. The link speed is ethtool's;
//! tclab's devices report none, so it is the kernel's fallback for such a device, 10 Mbit/s
//! (`SPEED_10`: 800 ps a bit… 800 ns a byte), as for cbs.
//!
//! `flags 0x1` (txtime-assist) does not gate the dequeue: the schedule is not run, every gate stays
//! open, and each packet is given a launch time instead (`skb->tstamp`, `get_packet_txtime`) — the
//! first time from now + `txtime-delay` at which its class's gate is open long enough for it, after the
//! packets already given that interval — for an `etf` child to hold it until then; a packet with no
//! such time in the cycle is dropped. Its classes' queue ranges may overlap. `flags 0x2` (full
//! offload) needs a NIC with a PTP clock; tclab's devices have none, so it is refused as the kernel
//! refuses it on such a device.
//!
//! Not modelled: the per-entry byte budget (with the wire serialising at the link speed, the guard
//! band already bounds what an interval sends), an admin schedule waiting behind the operational one (a
//! change replaces the schedule, listed at once as operational), `cycle-time` longer than the entries
//! (the last entry is held to the cycle's end here; the kernel starts the next cycle at the last entry's
//! end), max-sdu and frame preemption (iproute2 6.1 has no words for them).

use super::mq::Mq;
use super::mqprio::MqprioOptions;
use super::{ClassOps, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `TCA_TAPRIO_ATTR_FLAG_TXTIME_ASSIST`, `_FULL_OFFLOAD`.
pub const FLAG_TXTIME_ASSIST: u32 = 1;
pub const FLAG_FULL_OFFLOAD: u32 = 2;
/// The clocks `taprio_parse_clockid` takes: REALTIME, MONOTONIC, BOOTTIME, TAI.
const CLOCKIDS: [i32; 4] = [0, 1, 7, 11];
/// `SPEED_10`'s picoseconds a byte (`taprio_set_picos_per_byte` on a device without a link speed).
const PICOS_PER_BYTE: u64 = 800_000;
/// `ETH_ZLEN`: an interval must let the shortest frame out.
const ETH_ZLEN: u64 = 60;
const INT_MAX: i64 = i32::MAX as i64;

/// `length_to_duration`: ns on the wire for `len` bytes.
fn duration(len: u64) -> u64 {
    len * PICOS_PER_BYTE / 1000
}

/// One `sched-entry`: the command (`S`, 0: set gates), the gates it opens, for how long (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedEntry {
    pub cmd: u8,
    pub gate_mask: u32,
    pub interval: u32,
}

/// What tc sends (`TCA_TAPRIO_ATTR_*`), and what the kernel dumps: then `mqprio` is the device's
/// mapping, `cycle_time` the schedule's (computed when none was given).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaprioOptions {
    /// `TCA_TAPRIO_ATTR_PRIOMAP`.
    pub mqprio: Option<MqprioOptions>,
    pub clockid: Option<i32>,
    pub flags: Option<u32>,
    pub txtime_delay: Option<u32>,
    pub base_time: i64,
    pub cycle_time: i64,
    pub cycle_time_extension: i64,
    pub entries: Vec<SchedEntry>,
}

/// The schedule in force: the entries, and each one's span within the cycle.
#[derive(Clone, Debug)]
struct Schedule {
    base_time: i64,
    cycle_time: i64,
    cycle_time_extension: i64,
    entries: Vec<SchedEntry>,
    /// Each entry's length within the cycle: its interval cut at the cycle's end, the last one held to
    /// it.
    span: Vec<u64>,
    /// When the gates start following the entries (`taprio_get_start_time`).
    start: Nanos,
    /// `entry->next_txtime` (txtime-assist): the earliest launch time left in each entry's interval.
    next_txtime: Vec<i64>,
}

/// The entry in force at a time: its index and when it began and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    idx: usize,
    begin: Nanos,
    end: Nanos,
}

/// Each entry's length within a cycle of `cycle` ns: its interval cut at the cycle's end, the last
/// one that runs held to it.
fn spans(entries: &[SchedEntry], cycle: u64) -> Vec<u64> {
    let mut acc = 0u64;
    let mut span: Vec<u64> = entries
        .iter()
        .map(|e| {
            let s = u64::from(e.interval).min(cycle - acc);
            acc += s;
            s
        })
        .collect();
    if let Some(last) = span.iter_mut().rev().find(|s| **s > 0) {
        *last += cycle - acc;
    }
    span
}

impl TaprioOptions {
    /// How long traffic class `tc`'s gate is open in each cycle, in ns, as the schedule runs (of a
    /// dumped schedule, whose `cycle_time` is set).
    pub fn open_ns(&self, tc: u32) -> u64 {
        let cycle = self.cycle_time.max(0) as u64;
        spans(&self.entries, cycle)
            .iter()
            .zip(&self.entries)
            .filter(|(_, e)| e.gate_mask & (1 << tc) != 0)
            .map(|(s, _)| s)
            .sum()
    }
}

impl Schedule {
    fn new(o: &TaprioOptions, cycle_time: i64, now: Nanos) -> Schedule {
        let span = spans(&o.entries, cycle_time as u64);
        // taprio_get_start_time: the base time if it is to come, else the next cycle's start.
        let (now_i, base) = (now as i64, o.base_time);
        let start = if base > now_i {
            base
        } else {
            base + ((now_i - base) / cycle_time + 1) * cycle_time
        };
        // setup_txtime: each entry's first launch time is its start in the first cycle.
        let mut t = start;
        let next_txtime = o
            .entries
            .iter()
            .map(|e| {
                let here = t;
                t += i64::from(e.interval);
                here
            })
            .collect();
        Schedule {
            base_time: o.base_time,
            cycle_time,
            cycle_time_extension: o.cycle_time_extension,
            entries: o.entries.clone(),
            span,
            start: start.max(0) as Nanos,
            next_txtime,
        }
    }

    /// The entry in force at `t`; `None` before the schedule starts.
    fn slot(&self, t: Nanos) -> Option<Slot> {
        if t < self.start {
            return None;
        }
        let cycle = self.cycle_time as u64;
        let cycle_start = t - (t - self.start) % cycle;
        let mut begin = cycle_start;
        for (idx, &s) in self.span.iter().enumerate() {
            if t < begin + s {
                return Some(Slot {
                    idx,
                    begin,
                    end: begin + s,
                });
            }
            begin += s;
        }
        None
    }

    /// When the gate of `tc`, open in `slot`, closes: the end of the run of entries that keep it open,
    /// across the cycle's end too (`taprio_calculate_gate_durations`); `None` if it never closes.
    fn close_time(&self, slot: Slot, tc: u32) -> Option<Nanos> {
        let n = self.entries.len();
        let mut open = slot.end - slot.begin;
        for k in 1..n {
            let i = (slot.idx + k) % n;
            if self.span[i] > 0 && self.entries[i].gate_mask & (1 << tc) == 0 {
                return Some(slot.begin + open);
            }
            open += self.span[i];
        }
        None
    }

    /// `get_interval_end_time` without an admin schedule: the interval's end, cut at the cycle's.
    fn interval_end(&self, entry: usize, intv_start: i64) -> i64 {
        let elapsed = (intv_start - self.base_time).rem_euclid(self.cycle_time);
        let cycle_end = intv_start + self.cycle_time - elapsed;
        (intv_start + i64::from(self.entries[entry].interval)).min(cycle_end)
    }

    /// `find_entry_to_transmit` (validate_interval false): the entry whose gate lets class `tc` send
    /// a packet of `dur` ns at or after `time`, and that interval's start and end.
    fn entry_to_transmit(&self, tc: u32, dur: i64, time: i64) -> Option<(usize, i64, i64)> {
        let cycle = self.cycle_time;
        let elapsed = (time - self.base_time).rem_euclid(cycle);
        let mut intv_end = time - elapsed;
        let cycle_end = intv_end + cycle;
        let mut found = None;
        let mut available = false;
        let mut earliest = i64::MAX;
        for (i, e) in self.entries.iter().enumerate() {
            let intv_start = intv_end;
            intv_end = self.interval_end(i, intv_start);
            if intv_start > cycle_end {
                break;
            }
            if e.gate_mask & (1 << tc) == 0 || dur > i64::from(e.interval) {
                continue;
            }
            let txtime = self.next_txtime[i];
            if txtime < time {
                let transmit_end = time + dur;
                if (intv_start < time && transmit_end < intv_end) || intv_start > time {
                    return Some((i, intv_start, intv_end));
                } else if !available {
                    available = true;
                    found = Some((i, intv_start + cycle, intv_end + cycle));
                }
            } else if txtime < earliest && !available {
                earliest = txtime;
                let n = (txtime - intv_start) / cycle;
                found = Some((i, intv_start + n * cycle, intv_end + n * cycle));
            }
        }
        found
    }

    /// `get_packet_txtime`: the launch time of a packet of class `tc`, `dur` ns long, that may leave
    /// from `minimum` on; 0 when the schedule has none for it.
    fn packet_txtime(&mut self, tc: u32, dur: i64, mut minimum: i64) -> i64 {
        if minimum < self.base_time {
            return minimum;
        }
        loop {
            let Some((i, intv_start, intv_end)) = self.entry_to_transmit(tc, dur, minimum) else {
                return 0;
            };
            let txtime = self.next_txtime[i].max(minimum).max(intv_start);
            let transmit_end = txtime + dur;
            minimum = transmit_end;
            if transmit_end > intv_end {
                self.next_txtime[i] = intv_start + self.cycle_time;
                continue;
            }
            self.next_txtime[i] = transmit_end;
            return txtime;
        }
    }
}

pub struct Taprio {
    mq: Mq,
    txqueues: usize,
    mqprio: MqprioOptions,
    clockid: i32,
    flags: u32,
    txtime_delay: u32,
    sched: Schedule,
    /// `q->cur_txq[tc]`: the queue of each class served next.
    cur_txq: [usize; 16],
}

/// `NL_SET_ERR_MSG_MOD`'s prefix.
fn modmsg(errno: Errno, msg: &str) -> KernelError {
    KernelError::msg(errno, format!("sch_taprio: {msg}"))
}

impl TaprioOptions {
    fn flags(&self) -> u32 {
        self.flags.unwrap_or(0)
    }

    /// `taprio_change`'s checks, in its order, on a device with `txqueues` queues, for a new qdisc or
    /// over `old`. Returns the mapping and the schedule's cycle time.
    fn check(
        &self,
        txqueues: u32,
        old: Option<&Taprio>,
    ) -> Result<(MqprioOptions, i64), KernelError> {
        let flags = self.flags();
        if old.is_some_and(|q| q.flags != flags) {
            return Err(modmsg(
                Errno::NotSupported,
                "Changing 'flags' of a running schedule is not supported",
            ));
        }
        if flags & !(FLAG_TXTIME_ASSIST | FLAG_FULL_OFFLOAD) != 0
            || flags & (FLAG_TXTIME_ASSIST | FLAG_FULL_OFFLOAD)
                == FLAG_TXTIME_ASSIST | FLAG_FULL_OFFLOAD
        {
            return Err(modmsg(Errno::Invalid, "Specified 'flags' are not valid"));
        }
        // taprio_parse_mqprio_opt.
        let mqprio = match (&self.mqprio, old) {
            (None, None) => {
                return Err(KernelError::invalid("'mqprio' configuration is necessary"))
            }
            (None, Some(q)) => q.mqprio,
            (Some(m), _) => {
                if u32::from(m.num_tc) > txqueues {
                    return Err(KernelError::invalid(
                        "Number of traffic classes is greater than number of HW queues",
                    ));
                }
                let m = MqprioOptions { hw: 0, ..*m };
                m.validate_qopt(txqueues, flags & FLAG_TXTIME_ASSIST != 0)?;
                if old.is_some_and(|q| q.mqprio != m) {
                    return Err(KernelError::msg(
                        Errno::NotSupported,
                        "Changing the traffic mapping of a running schedule is not supported",
                    ));
                }
                m
            }
        };
        // parse_taprio_schedule.
        if !(0..=INT_MAX).contains(&self.cycle_time) {
            return Err(KernelError::invalid("'cycle_time' is too big"));
        }
        let min = duration(ETH_ZLEN);
        if self.entries.iter().any(|e| u64::from(e.interval) < min) {
            return Err(KernelError::invalid("Invalid interval for schedule entry"));
        }
        let mut cycle = self.cycle_time;
        if cycle == 0 {
            cycle = self.entries.iter().map(|e| i64::from(e.interval)).sum();
            if cycle > INT_MAX {
                return Err(KernelError::invalid("'cycle_time' is too big"));
            }
        }
        if (cycle as u64) < self.entries.len() as u64 * min {
            return Err(KernelError::invalid("'cycle_time' is too small"));
        }
        if self.entries.is_empty() {
            return Err(KernelError::invalid(
                "There should be at least one entry in the schedule",
            ));
        }
        // taprio_parse_clockid.
        if flags & FLAG_FULL_OFFLOAD != 0 {
            if self.clockid.is_some() {
                return Err(KernelError::invalid(
                    "The 'clockid' cannot be specified for full offload",
                ));
            }
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Device does not have a PTP clock",
            ));
        }
        match self.clockid {
            None => return Err(KernelError::invalid("Specifying a 'clockid' is mandatory")),
            Some(c) if c < 0 || old.is_some_and(|q| q.clockid != c) => {
                return Err(KernelError::msg(
                    Errno::NotSupported,
                    "Changing the 'clockid' of a running schedule is not supported",
                ))
            }
            Some(c) if !CLOCKIDS.contains(&c) => {
                return Err(KernelError::invalid("Invalid 'clockid'"))
            }
            Some(_) => {}
        }
        if self.txtime_delay.is_some() && flags & FLAG_TXTIME_ASSIST == 0 {
            return Err(modmsg(
                Errno::Invalid,
                "txtime-delay can only be set when txtime-assist mode is enabled",
            ));
        }
        Ok((mqprio, cycle))
    }
}

impl Taprio {
    /// `taprio_init` (after the engine's root-only check), then `taprio_change`.
    pub fn new(
        handle: Handle,
        o: &TaprioOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Taprio, KernelError> {
        if env.txqueues <= 1 {
            return Err(modmsg(
                Errno::NotSupported,
                "Multi-queue device is required",
            ));
        }
        let (mqprio, cycle) = o.check(env.txqueues, None)?;
        let limit = env.txqueuelen.max(1);
        let mq = Mq::with_leaves(handle, env, "taprio", || {
            Box::new(super::fifo::Fifo::new(
                super::fifo::FifoUnit::Packets,
                &super::fifo::FifoOptions { limit: Some(limit) },
                env,
            ))
        })?;
        let mut cur_txq = [0; 16];
        for (c, off) in cur_txq.iter_mut().zip(mqprio.offset) {
            *c = usize::from(off);
        }
        Ok(Taprio {
            mq,
            txqueues: env.txqueues as usize,
            mqprio,
            clockid: o.clockid.unwrap_or(-1),
            flags: o.flags(),
            txtime_delay: o.txtime_delay.unwrap_or(0),
            sched: Schedule::new(o, cycle, now),
            cur_txq,
        })
    }

    fn txtime_assist(&self) -> bool {
        self.flags & FLAG_TXTIME_ASSIST != 0
    }

    fn tc_of(&self, pkt: &Packet) -> u32 {
        u32::from(self.mqprio.map[(pkt.priority & 15) as usize])
    }

    /// `taprio_dequeue_from_txq`: queue `i`'s head, if its class's gate lets it go whole now.
    fn dequeue_from_txq(
        &mut self,
        i: usize,
        slot: Option<Slot>,
        gate_mask: u32,
        cx: &mut Cx,
    ) -> Option<Packet> {
        let assist = self.txtime_assist();
        let (map, sched) = (self.mqprio.map, &self.sched);
        let child = self.mq.queue_mut(i)?;
        if !assist {
            let head = child.q.peek(cx)?;
            let tc = u32::from(map[(head.priority & 15) as usize]);
            if gate_mask & (1 << tc) == 0 {
                return None;
            }
            let guard = cx.now + duration(u64::from(head.len));
            if let Some(close) = slot.and_then(|s| sched.close_time(s, tc)) {
                if guard > close {
                    return None;
                }
            }
        }
        child.q.dequeue(cx)
    }
}

impl Qdisc for Taprio {
    fn kind(&self) -> &'static str {
        "taprio"
    }

    /// `netdev_pick_tx` with the classes' queues, then `taprio_enqueue_one`: in txtime-assist mode the
    /// packet's launch time first (none: dropped).
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let tc = self.tc_of(&pkt);
        if self.txtime_assist() {
            let minimum = (cx.now as i64 + i64::from(self.txtime_delay)).max(pkt.tstamp as i64);
            let dur = duration(u64::from(pkt.len)) as i64;
            let t = self.sched.packet_txtime(tc, dur, minimum);
            if t <= 0 {
                // No interval in the cycle fits it (etf would refuse the time as well).
                cx.drop_arriving(pkt, super::DropReason::Overlimit);
                return Verdict::Drop;
            }
            pkt.tstamp = t as Nanos;
        }
        let tc = tc as usize;
        let (first, count) = (
            usize::from(self.mqprio.offset[tc]),
            usize::from(self.mqprio.count[tc]),
        );
        self.mq.enqueue_in(first, count, pkt, cx)
    }

    /// `taprio_dequeue`, `taprio_dequeue_tc_priority`: the highest open class first, its queues in
    /// turn.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        // txtime-assist runs no schedule: every gate open, as before a schedule starts.
        let slot = if self.txtime_assist() {
            None
        } else {
            self.sched.slot(cx.now)
        };
        let gate_mask = slot.map_or(u32::MAX, |s| self.sched.entries[s.idx].gate_mask);
        for tc in (0..usize::from(self.mqprio.num_tc)).rev() {
            if gate_mask & (1 << tc) == 0 {
                continue;
            }
            let (off, cnt) = (
                usize::from(self.mqprio.offset[tc]),
                usize::from(self.mqprio.count[tc]),
            );
            let first = self.cur_txq[tc];
            loop {
                let p = self.dequeue_from_txq(self.cur_txq[tc], slot, gate_mask, cx);
                // taprio_next_tc_txq.
                let mut next = self.cur_txq[tc] + 1;
                if next == off + cnt {
                    next = off;
                }
                if next >= self.txqueues {
                    next = first;
                }
                self.cur_txq[tc] = next;
                if p.is_some() {
                    return p;
                }
                if next == first {
                    break;
                }
            }
        }
        // Held back by a gate: ask again when the next entry begins (advance_sched's timer).
        if let Some(s) = slot {
            if self.mq.stats().qlen > 0 {
                cx.wake_at = Some(cx.wake_at.map_or(s.end, |w| w.min(s.end)));
            }
        }
        None
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.mq.peek(cx)
    }
    fn reset(&mut self) {
        self.mq.reset();
    }
    fn stats(&self) -> QdiscStats {
        self.mq.stats()
    }
    /// `taprio_dump`: the device's mapping, the clock (none with full offload), flags and txtime
    /// delay when set, the schedule.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Taprio(TaprioOptions {
            mqprio: Some(self.mqprio),
            clockid: Some(self.clockid),
            flags: (self.flags != 0).then_some(self.flags),
            txtime_delay: (self.txtime_delay != 0).then_some(self.txtime_delay),
            base_time: self.sched.base_time,
            cycle_time: self.sched.cycle_time,
            cycle_time_extension: self.sched.cycle_time_extension,
            entries: self.sched.entries.clone(),
        })
    }
    /// `taprio_change` on a running qdisc: flags, clock and mapping stay; a new schedule replaces the
    /// old one from its start time.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Taprio(o) = opts else {
            return Err(super::wrong_kind());
        };
        let (_, cycle) = o.check(env.txqueues, Some(self))?;
        if let Some(d) = o.txtime_delay {
            self.txtime_delay = d;
        }
        self.sched = Schedule::new(o, cycle, now);
        Ok(Vec::new())
    }
    fn set_seed(&mut self, seed: u64) {
        self.mq.set_seed(seed);
    }
    /// `taprio_class_ops`: a class per transmit queue, mq's.
    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(&self.mq)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(&mut self.mq)
    }
    fn hashes_children(&self) -> bool {
        true
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "taprio",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Taprio(o) => Ok((Box::new(Taprio::new(handle, o, env, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn env(txqueues: u32) -> DevEnv {
        DevEnv {
            txqueues,
            txqueuelen: 10_000,
            mtu: 1500,
            hard_header_len: 14,
        }
    }

    /// Two classes on 4 queues: priority 1 → TC 1 (queue 1), the rest → TC 0 (queue 0). The gates:
    /// TC 0 for 4 ms, then TC 1 for 6 ms, a 10 ms cycle from base time 0.
    fn opts(flags: Option<u32>) -> TaprioOptions {
        let mut m = MqprioOptions {
            num_tc: 2,
            ..MqprioOptions::default()
        };
        m.map[1] = 1;
        m.count[..2].copy_from_slice(&[1, 1]);
        m.offset[..2].copy_from_slice(&[0, 1]);
        TaprioOptions {
            mqprio: Some(m),
            clockid: Some(11),
            flags,
            entries: vec![
                SchedEntry {
                    cmd: 0,
                    gate_mask: 1,
                    interval: 4_000_000,
                },
                SchedEntry {
                    cmd: 0,
                    gate_mask: 2,
                    interval: 6_000_000,
                },
            ],
            ..TaprioOptions::default()
        }
    }

    fn packet(prio: u32, len: u32) -> Packet {
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, len);
        p.priority = prio;
        p
    }

    /// Serve `q` from `t` to `until` as a 10 Mbit/s wire (the speed taprio assumes: 800 ns a byte):
    /// each packet's start and end.
    fn serve(q: &mut Taprio, mut t: Nanos, until: Nanos) -> Vec<(Nanos, Nanos, u32)> {
        let mut sent = Vec::new();
        while t < until {
            let mut cx = Cx::new(t);
            match q.dequeue(&mut cx) {
                Some(p) => {
                    let end = t + 800 * u64::from(p.len);
                    sent.push((t, end, p.priority));
                    t = end;
                }
                None => match cx.wake_at {
                    Some(w) => t = w,
                    None => break,
                },
            }
        }
        sent
    }

    #[test]
    fn a_class_sends_exactly_while_its_gate_is_open() {
        // Made at 0 with base time 0: the schedule starts at the next cycle, 10 ms.
        let mut q = Taprio::new(Handle(0x10000), &opts(None), &env(4), 0).unwrap();
        let mut cx = Cx::new(0);
        for _ in 0..2000 {
            q.enqueue(packet(0, 100), &mut cx);
        }
        // 100-byte frames take 80 µs: 50 fill TC 0's 4 ms exactly (the last ends as the gate
        // closes), so 10 cycles send 500 of them — 10 Mbit/s × 4/10 = 4 Mbit/s, to the byte.
        let sent = serve(&mut q, 10 * MS, 110 * MS);
        assert_eq!(sent.len(), 500);
        for (i, (start, end, _)) in sent.iter().enumerate() {
            let cycle = 10 * MS + (i as u64 / 50) * 10 * MS;
            assert_eq!(*start, cycle + (i as u64 % 50) * 80_000, "packet {i}");
            assert!(*end <= cycle + 4 * MS);
        }
    }

    #[test]
    fn the_guard_band_keeps_a_frame_that_would_overrun_the_gate() {
        let mut q = Taprio::new(Handle(0x10000), &opts(None), &env(4), 0).unwrap();
        let mut cx = Cx::new(0);
        for _ in 0..10 {
            q.enqueue(packet(0, 1514), &mut cx);
        }
        // 1514 bytes take 1.2112 ms: three fit in 4 ms (3.6336), the fourth waits for the next cycle.
        let sent = serve(&mut q, 10 * MS, 30 * MS);
        let starts: Vec<Nanos> = sent.iter().map(|s| s.0).collect();
        assert_eq!(
            starts,
            [
                10 * MS,
                10 * MS + 1_211_200,
                10 * MS + 2_422_400,
                20 * MS,
                20 * MS + 1_211_200,
                20 * MS + 2_422_400
            ]
        );
    }

    #[test]
    fn gates_open_before_the_start_and_the_higher_class_first() {
        let mut q = Taprio::new(Handle(0x10000), &opts(None), &env(4), 0).unwrap();
        let mut cx = Cx::new(0);
        q.enqueue(packet(0, 100), &mut cx);
        q.enqueue(packet(1, 100), &mut cx);
        // Before 10 ms every gate is open; TC 1 goes first.
        let sent = serve(&mut q, 0, MS);
        assert_eq!(
            sent.iter().map(|s| s.2).collect::<Vec<_>>(),
            [1, 0],
            "{sent:?}"
        );
        // From the start TC 1 waits for its entry (14 ms), TC 0 goes at once.
        q.enqueue(packet(1, 100), &mut cx);
        q.enqueue(packet(0, 100), &mut cx);
        let sent = serve(&mut q, 10 * MS, 20 * MS);
        assert_eq!(
            sent,
            [
                (10 * MS, 10 * MS + 80_000, 0),
                (14 * MS, 14 * MS + 80_000, 1)
            ]
        );
    }

    #[test]
    fn txtime_assist_gives_launch_times_inside_the_intervals() {
        let mut o = opts(Some(FLAG_TXTIME_ASSIST));
        // Overlapping queue ranges are allowed in this mode.
        o.mqprio.as_mut().unwrap().offset[1] = 0;
        let mut q = Taprio::new(Handle(0x10000), &o, &env(4), 10 * MS).unwrap();
        // Made at 10 ms: the schedule's first cycle is at 20 ms (each entry's first launch time).
        let mut cx = Cx::new(20 * MS);
        for _ in 0..51 {
            q.enqueue(packet(0, 100), &mut cx);
        }
        // TC 1's first launch is its entry's start, 24 ms.
        q.enqueue(packet(1, 100), &mut cx);
        let mut stamps = Vec::new();
        while let Some(p) = q.dequeue(&mut cx) {
            stamps.push(p.tstamp);
        }
        // 50 packets of 80 µs back to back from 20 ms fill TC 0's 4 ms; the 51st goes at 30 ms.
        for (i, t) in stamps[..50].iter().enumerate() {
            assert_eq!(*t, 20 * MS + i as u64 * 80_000);
        }
        assert_eq!(stamps[50], 30 * MS);
        assert_eq!(stamps[51], 24 * MS);
        // Before the base time every gate is open: the launch time is now + txtime-delay.
        o.base_time = 50 * MS as i64;
        o.txtime_delay = Some(300);
        let mut q = Taprio::new(Handle(0x10000), &o, &env(4), 0).unwrap();
        let mut cx = Cx::new(MS);
        q.enqueue(packet(1, 100), &mut cx);
        assert_eq!(q.dequeue(&mut cx).unwrap().tstamp, MS + 300);
    }

    #[test]
    fn kernel_refusals() {
        let e = |o: TaprioOptions, n: u32| {
            Taprio::new(Handle(0x10000), &o, &env(n), 0)
                .err()
                .unwrap()
                .to_string()
        };
        assert!(e(opts(None), 1).contains("Multi-queue device is required"));
        let mut o = opts(None);
        o.entries.clear();
        assert!(e(o, 4).contains("at least one entry"));
        let mut o = opts(None);
        o.entries[0].interval = 47_999;
        assert!(
            e(o, 4).contains("Invalid interval for schedule entry"),
            "60 bytes at 10 Mbit/s take 48 µs"
        );
        let mut o = opts(None);
        o.cycle_time = 1 << 32;
        assert!(e(o, 4).contains("'cycle_time' is too big"));
        let mut o = opts(None);
        o.mqprio.as_mut().unwrap().offset[1] = 0;
        assert!(e(o, 4).contains("overlap"));
        let mut o = opts(None);
        o.mqprio.as_mut().unwrap().num_tc = 5;
        assert!(e(o, 4).contains("greater than number of HW queues"));
        assert!(e(opts(Some(3)), 4).contains("'flags' are not valid"));
        let mut o = opts(Some(FLAG_FULL_OFFLOAD));
        o.clockid = None;
        assert!(e(o, 4).contains("Device does not have a PTP clock"));
        let mut o = opts(None);
        o.clockid = None;
        assert!(e(o, 4).contains("'clockid' is mandatory"));
        let mut o = opts(None);
        o.txtime_delay = Some(5);
        assert!(e(o, 4).contains("txtime-delay can only be set"));
    }
}
