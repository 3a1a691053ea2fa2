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
//! Each entry also has a byte budget per class (`taprio_set_budgets`): what its gate's open time, from
//! the entry's start to where the gate closes, lets through at the link speed. Every packet sent in
//! the entry is taken from every class's budget, and a packet that would leave its class's budget
//! below zero stays queued (`taprio_update_budgets`) — what keeps an interval to its bytes when the
//! wire is faster than the speed the device reports. A class whose gate never closes has no budget and
//! no guard band. When nothing may go, the watchdog is set to the next entry's start.
//!
//! The link speed is ethtool's (`tclab link set dev DEV speed N`, a script's `ethtool -s DEV speed N`,
//! a scenario link's rate), read when the qdisc is made or changed (`taprio_set_picos_per_byte`); a
//! device that reports none counts as 10 Mbit/s (`SPEED_10`: 800 ns a byte), as for cbs.
//!
//! `max-sdu` (one per class, 0 for none) drops at enqueue a frame longer than the class's SDU plus the
//! link header; the kernel also lowers each class's limit to what its longest open window can send at
//! the link speed (`taprio_update_queue_max_sdu`), and the dump lists that limit. A size table on the
//! root (`tc qdisc add … root stab overhead N taprio …`) takes its overhead off each window's length
//! first (the frame held to one byte past the link header), while a frame is still judged by its real
//! length; the table is the one `taprio_change` sees — a new qdisc's (`qdisc_create` sets it before
//! init), a changed one's previous table (`qdisc_change` swaps it after) — and without one every
//! change leaves the warning "Size table not specified, frame length estimations may be inaccurate"
//! ([`Qdisc::root_stab`]). A GSO packet over its limit is segmented and its frames offered alone
//! (`taprio_enqueue_segmented`).
//!
//! A new schedule given to a running qdisc (`tc qdisc change|replace` with a schedule) waits as the
//! admin schedule behind the operational one, listed after it, until `advance_sched` switches them
//! (`should_change_schedules`): at the first entry end of the old schedule from which the next entry
//! would end at or past the new base time (less the old `cycle-time-extension`, when positive: the old
//! schedule's last cycle gives way to the new one's first entry that much sooner), or at the new
//! schedule's start if that comes sooner. From the switch the new first entry runs until its start
//! plus its interval; then the new schedule goes on from its start. A qdisc whose first schedule has
//! not started yet takes the new one at once.
//!
//! `flags 0x1` (txtime-assist) does not gate the dequeue: the schedule is not run, every gate stays
//! open, and each packet is given a launch time instead (`skb->tstamp`, `get_packet_txtime`) — the
//! first time from now + `txtime-delay` at which its class's gate is open long enough for it, after the
//! packets already given that interval — for an `etf` child to hold it until then; a packet with no
//! such time in the cycle is dropped. Its classes' queue ranges may overlap. `flags 0x2` (full
//! offload) needs a NIC with a PTP clock that takes the schedule: a netdevsim port (`type
//! netdevsim`, tdc's device) has both, any other tclab device neither, so there it is refused as the
//! kernel refuses it. Offloaded, the NIC runs the gates (modelled by the same schedule), the clock
//! is the NIC's (none dumped), the children sit on the transmit queues themselves (`taprio_attach`:
//! `tc` lists them with refcount 2, the root with none), and max-sdu is refused (netdevsim reports
//! no queueMaxSDU support).
//!
//! In txtime-assist mode the admin schedule is switched to by launch times, not the clock
//! (`get_packet_txtime`): once a packet's earliest launch time is past its base time, and for one
//! packet whenever the launch time found is; an interval that ends at the cycle's end is stretched
//! to the admin schedule's base when that lies within `cycle-time-extension` (`get_interval_end_time`).
//!
//! Frame preemption (`fp`) never reaches it: tc 6.1 does not know the word, and 6.12 takes a
//! preemptible class only fully offloaded onto a device with ethtool's MAC merge
//! (`taprio_parse_tc_entries`), which no tclab device has.
//!
//! Not modelled: `cycle-time` longer than the entries (the last entry is held to the cycle's end here; the kernel
//! starts the next cycle at the last entry's end), and a frame's switch to the admin schedule without a packet
//! (the switch is applied at the first enqueue or dequeue at or after its time, so a listing of an idle
//! qdisc may still show it waiting).

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
/// `TAPRIO_PICOS_PER_BYTE_MIN`: the floor that keeps a 60-byte frame longer than a nanosecond.
const PICOS_PER_BYTE_MIN: u64 = 17;
/// `ETH_ZLEN`: an interval must let the shortest frame out.
const ETH_ZLEN: u64 = 60;
const INT_MAX: i64 = i32::MAX as i64;
/// `ETH_MAX_MTU`: the largest MTU a veth (and netdevsim) takes, the `max_mtu` max-sdu is held to.
const MAX_MTU: u32 = 65_535;
/// The link header a frame's length counts beside its SDU (`dev->hard_header_len`, Ethernet's).
const HARD_HEADER_LEN: u32 = 14;
/// The classes a schedule can gate (`TC_MAX_QUEUE`).
const TC_MAX: usize = 16;
/// A class's budget when its gate never closes (`INT_MAX`: never spent).
const UNLIMITED: i64 = INT_MAX;

/// `taprio_set_picos_per_byte`: picoseconds a byte at `speed` Mbit/s (10 when the device reports
/// none), held at the floor for a speed past 470 Gbit/s, with the kernel's warning then.
pub fn picos_per_byte(speed: u32) -> (u64, Option<Warning>) {
    let speed = if speed == 0 || speed == u32::MAX {
        10
    } else {
        speed
    };
    // (USEC_PER_SEC * 8) / speed in an int.
    let ppb = 8_000_000 / u64::from(speed);
    if ppb < PICOS_PER_BYTE_MIN {
        let w = Warning(format!(
            "sch_taprio: Link speed {} is too high. Schedule may be inaccurate",
            speed as i32
        ));
        return (PICOS_PER_BYTE_MIN, Some(w));
    }
    (ppb, None)
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
    /// `TCA_TAPRIO_ATTR_TC_ENTRY`'s max SDU of classes 0, 1, … (`max-sdu`; 0: none); what tc sends,
    /// and in a dump every class's limit in force, empty when none was ever asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub max_sdu: Vec<u32>,
    /// `TCA_TAPRIO_ATTR_ADMIN_SCHED` in a dump: the schedule waiting to replace this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<Box<AdminSchedule>>,
}

/// A waiting schedule as the kernel dumps it (`dump_schedule`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminSchedule {
    pub base_time: i64,
    pub cycle_time: i64,
    pub cycle_time_extension: i64,
    pub entries: Vec<SchedEntry>,
}

/// A schedule: the entries, each one's span within the cycle and how long each class's gate stays
/// open from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Schedule {
    base_time: i64,
    cycle_time: i64,
    cycle_time_extension: i64,
    entries: Vec<SchedEntry>,
    /// Each entry's length within the cycle: its interval cut at the cycle's end, the last one held to
    /// it.
    span: Vec<u64>,
    /// `gate_duration`: from each entry's start, how long each class's gate stays open (the intervals
    /// of the entries that keep it open, around the cycle; 0 where the entry closes it).
    gate_duration: Vec<[u64; TC_MAX]>,
    /// `max_open_gate_duration`: each class's longest such window.
    max_open: [u64; TC_MAX],
    /// `max_frm_len`: the longest frame each class may queue (`u32::MAX`: any).
    max_frm_len: [u32; TC_MAX],
    /// `sched->max_sdu` as dumped: the limit in force, 0 for none.
    max_sdu: [u32; TC_MAX],
    /// When the gates start following the entries (`taprio_get_start_time`).
    start: Nanos,
    /// When this schedule took over: its first entry runs from here to `start` plus its interval (the
    /// start itself for a first schedule; before it every gate is open).
    switch_at: Nanos,
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

/// `taprio_calculate_gate_durations`: for each entry and class, the intervals from that entry on
/// (around the cycle, back to it at most) while the class's gate stays open; and each class's longest.
fn gate_durations(entries: &[SchedEntry]) -> (Vec<[u64; TC_MAX]>, [u64; TC_MAX]) {
    let n = entries.len();
    let mut max_open = [0u64; TC_MAX];
    let durations = (0..n)
        .map(|i| {
            let mut d = [0u64; TC_MAX];
            let mut still_open = entries[i].gate_mask;
            for k in 0..n {
                if still_open == 0 {
                    break;
                }
                let cur = &entries[(i + k) % n];
                for (tc, dur) in d.iter_mut().enumerate() {
                    if still_open & (1 << tc) == 0 {
                        continue;
                    }
                    if cur.gate_mask & (1 << tc) != 0 {
                        *dur += u64::from(cur.interval);
                    } else {
                        still_open &= !(1 << tc);
                    }
                }
            }
            for (m, &x) in max_open.iter_mut().zip(&d) {
                *m = (*m).max(x);
            }
            d
        })
        .collect();
    (durations, max_open)
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

    /// The longest single opening of traffic class `tc`'s gate, in ns, as the schedule runs: entries
    /// in a row that open it, around the end of the cycle into the next (the whole cycle when no entry
    /// closes it). Entries the cycle cuts to nothing are skipped: they never run.
    pub fn longest_open_ns(&self, tc: u32) -> u64 {
        let cycle = self.cycle_time.max(0) as u64;
        let runs: Vec<(u64, bool)> = spans(&self.entries, cycle)
            .into_iter()
            .zip(&self.entries)
            .filter(|(s, _)| *s > 0)
            .map(|(s, e)| (s, e.gate_mask & (1 << tc) != 0))
            .collect();
        if runs.iter().all(|r| r.1) {
            return runs.iter().map(|r| r.0).sum();
        }
        // Twice round, so that an opening across the cycle's end is counted whole.
        let (mut best, mut cur) = (0, 0);
        for &(s, open) in runs.iter().chain(&runs) {
            cur = if open { cur + s } else { 0 };
            best = best.max(cur);
        }
        best
    }
}

impl Schedule {
    /// The schedule of `o` (cycle `cycle_time`) given at `now`, its classes' frame limits from the
    /// user's `max_sdu` at `ppb` picoseconds a byte less the root size table's `overhead`
    /// (`taprio_update_queue_max_sdu`).
    fn new(
        o: &TaprioOptions,
        cycle_time: i64,
        now: Nanos,
        max_sdu: &[u32; TC_MAX],
        ppb: u64,
        overhead: Option<i32>,
        num_tc: usize,
    ) -> Schedule {
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
        let (gate_duration, max_open) = gate_durations(&o.entries);
        let start = start.max(0) as Nanos;
        let mut s = Schedule {
            base_time: o.base_time,
            cycle_time,
            cycle_time_extension: o.cycle_time_extension,
            entries: o.entries.clone(),
            span,
            gate_duration,
            max_open,
            max_frm_len: [u32::MAX; TC_MAX],
            max_sdu: [0; TC_MAX],
            start,
            switch_at: start,
            next_txtime,
        };
        s.update_max_sdu(max_sdu, ppb, overhead, num_tc);
        s
    }

    /// `taprio_update_queue_max_sdu`: each class's limit, the user's or what its longest window
    /// sends at the link speed, whichever is less (none for a class whose gate never closes). With a
    /// size table on the root, its `overhead` (L1 bytes the table adds to every frame) comes off the
    /// window's length first, the frame held to at least one byte past the link header.
    /// Only the device's `num_tc` classes have one (the others, which no priority maps to, none).
    fn update_max_sdu(
        &mut self,
        from_user: &[u32; TC_MAX],
        ppb: u64,
        overhead: Option<i32>,
        num_tc: usize,
    ) {
        for (tc, &given) in from_user.iter().enumerate() {
            if tc >= num_tc {
                (self.max_frm_len[tc], self.max_sdu[tc]) = (u32::MAX, 0);
                continue;
            }
            let user = if given == 0 { u32::MAX } else { given };
            let dynamic = if self.max_open[tc] == self.cycle_time as u64 {
                u32::MAX
            } else {
                // duration_to_length, then less the link header (a never-open class wraps past
                // max_mtu to "none", as the kernel's u32 does).
                let mut frm = (self.max_open[tc] * 1000 / ppb) as u32;
                if let Some(o) = overhead {
                    // u32 less an int, then max_t(int, …, hard_header_len + 1).
                    frm =
                        (frm.wrapping_sub(o as u32) as i32).max(HARD_HEADER_LEN as i32 + 1) as u32;
                }
                match frm.wrapping_sub(HARD_HEADER_LEN) {
                    sdu if sdu > MAX_MTU => u32::MAX,
                    sdu => sdu,
                }
            };
            let sdu = user.min(dynamic);
            (self.max_frm_len[tc], self.max_sdu[tc]) = if sdu == u32::MAX {
                (u32::MAX, 0)
            } else {
                (sdu + HARD_HEADER_LEN, sdu)
            };
        }
    }

    /// The entry in force at `t`; `None` before the schedule takes over.
    fn slot(&self, t: Nanos) -> Option<Slot> {
        if t < self.switch_at {
            return None;
        }
        // The first entry runs from the switch to the start plus its span (setup_first_end_time).
        let first_end = self.start + self.span[0];
        if t < first_end {
            return Some(Slot {
                idx: 0,
                begin: self.switch_at,
                end: first_end,
            });
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

    /// `gate_close_time`: when the gate of `tc`, open in `slot`, closes — the entry's start (the
    /// schedule's start for a first entry run long) plus the class's gate duration from it; `None` if
    /// it never closes.
    fn close_time(&self, slot: Slot, tc: usize) -> Option<Nanos> {
        let d = self.gate_duration[slot.idx][tc];
        (d != self.cycle_time as u64).then(|| slot.begin.max(self.start) + d)
    }

    /// `taprio_set_budgets`: the bytes each class may send in the entry `idx`.
    fn budgets(&self, idx: usize, ppb: u64) -> [i64; TC_MAX] {
        let mut b = [0; TC_MAX];
        for (tc, budget) in b.iter_mut().enumerate() {
            let d = self.gate_duration[idx][tc];
            *budget = if d == self.cycle_time as u64 {
                UNLIMITED
            } else {
                // An int in the kernel.
                (d * 1000 / ppb).min(INT_MAX as u64) as i64
            };
        }
        b
    }

    /// When an admin schedule `new`, given at `now`, takes over from this running one
    /// (`advance_sched`'s `should_change_schedules`): at the end of the entry in force if the next
    /// would end at or past the new base time less this schedule's extension, else at a later entry
    /// end — or at the new start if that comes before the entry in force ends (the timer set to the
    /// earlier of the two, `taprio_start_sched`).
    fn switch_time(&self, new: &Schedule, now: Nanos) -> Nanos {
        let Some(cur) = self.slot(now) else {
            return new.start;
        };
        if new.start < cur.end {
            return new.start;
        }
        // The entry whose end is the first at or past the target begins at the switch. A negative
        // extension asks nothing the simple case (`next_base_time <= end_time`) does not.
        let target = new
            .base_time
            .saturating_sub(self.cycle_time_extension.max(0));
        if target <= cur.end as i64 {
            return cur.end;
        }
        self.slot(target as Nanos - 1)
            .map_or(cur.end, |s| s.begin.max(cur.end))
    }

    /// The schedule as the kernel dumps it.
    fn dump(&self) -> AdminSchedule {
        AdminSchedule {
            base_time: self.base_time,
            cycle_time: self.cycle_time,
            cycle_time_extension: self.cycle_time_extension,
            entries: self.entries.clone(),
        }
    }

    /// `get_interval_end_time`: the interval's end, cut at the cycle's — or, where an admin schedule
    /// (`admin_base`) starts within this one's cycle-time-extension past the cycle's end, at its base.
    fn interval_end(&self, entry: usize, intv_start: i64, admin_base: Option<i64>) -> i64 {
        let elapsed = (intv_start - self.base_time).rem_euclid(self.cycle_time);
        let cycle_end = intv_start + self.cycle_time - elapsed;
        let intv_end = intv_start + i64::from(self.entries[entry].interval);
        match admin_base {
            _ if intv_end < cycle_end => intv_end,
            Some(b) if b > cycle_end && b < cycle_end + self.cycle_time_extension => b,
            _ => cycle_end,
        }
    }

    /// `find_entry_to_transmit` (validate_interval false): the entry whose gate lets class `tc` send
    /// a packet of `dur` ns at or after `time`, and that interval's start and end.
    fn entry_to_transmit(
        &self,
        tc: u32,
        dur: i64,
        time: i64,
        admin_base: Option<i64>,
    ) -> Option<(usize, i64, i64)> {
        let cycle = self.cycle_time;
        let elapsed = (time - self.base_time).rem_euclid(cycle);
        let mut intv_end = time - elapsed;
        let cycle_end = intv_end + cycle;
        let mut found = None;
        let mut available = false;
        let mut earliest = i64::MAX;
        for (i, e) in self.entries.iter().enumerate() {
            let intv_start = intv_end;
            intv_end = self.interval_end(i, intv_start, admin_base);
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
    /// from `minimum` on; 0 when the schedule has none for it. Before the base time every gate is
    /// open.
    fn packet_txtime(
        &mut self,
        tc: u32,
        dur: i64,
        minimum: i64,
        admin: Option<&mut Schedule>,
    ) -> i64 {
        if minimum < self.base_time {
            return minimum;
        }
        self.next_launch(tc, dur, minimum, admin)
    }

    /// `get_packet_txtime`'s loop: interval after interval until the packet fits one; a launch time
    /// past the admin schedule's base time is the admin schedule's to give.
    fn next_launch(
        &mut self,
        tc: u32,
        dur: i64,
        mut minimum: i64,
        mut admin: Option<&mut Schedule>,
    ) -> i64 {
        loop {
            let admin_base = admin.as_ref().map(|a| a.base_time);
            let Some((i, intv_start, intv_end)) =
                self.entry_to_transmit(tc, dur, minimum, admin_base)
            else {
                return 0;
            };
            let txtime = self.next_txtime[i].max(minimum).max(intv_start);
            if let Some(a) = admin.as_deref_mut() {
                if txtime > a.base_time {
                    return a.next_launch(tc, dur, minimum, None);
                }
            }
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

/// In a snapshot ([`crate::snapshot`]): the schedules in force and waiting, the budgets and each
/// class's next queue; its queues' qdiscs save themselves inside its mq.
#[derive(Serialize, Deserialize)]
pub struct Taprio {
    mq: Mq,
    txqueues: usize,
    mqprio: MqprioOptions,
    clockid: i32,
    flags: u32,
    txtime_delay: u32,
    /// `picos_per_byte` at the device's link speed when the qdisc was made or last changed.
    ppb: u64,
    /// `q->max_sdu`: the user's limit per class (0: none).
    max_sdu: [u32; TC_MAX],
    /// The operational schedule, and the admin one waiting to replace it with when it will.
    sched: Schedule,
    admin: Option<(Schedule, Nanos)>,
    /// The entry instance (its start and index) whose budgets `budget` holds, and the budgets left.
    budget_of: Option<(Nanos, usize)>,
    budget: [i64; TC_MAX],
    /// Packets taprio dropped itself (over max-sdu, or no launch time).
    drops: u32,
    /// `q->cur_txq[tc]`: the queue of each class served next.
    cur_txq: [usize; 16],
    /// The overhead of the root's size table (`q->root->stab`), as the last change read it.
    stab_overhead: Option<i32>,
    /// Made by the command being applied, whose size table `qdisc_create` set before init.
    fresh: bool,
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
        env: &DevEnv,
        old: Option<&Taprio>,
        ppb: u64,
    ) -> Result<(MqprioOptions, i64), KernelError> {
        let txqueues = env.txqueues;
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
        // taprio_parse_tc_entry.
        if self.max_sdu.iter().any(|&v| v > MAX_MTU) {
            return Err(modmsg(Errno::Range, "TC max SDU exceeds device max MTU"));
        }
        // parse_taprio_schedule.
        if !(0..=INT_MAX).contains(&self.cycle_time) {
            return Err(KernelError::invalid("'cycle_time' is too big"));
        }
        let min = ETH_ZLEN * ppb / 1000;
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
            if !env.taprio_offload {
                return Err(KernelError::msg(
                    Errno::NotSupported,
                    "Device does not have a PTP clock",
                ));
            }
            // taprio_enable_offload: netdevsim reports no queueMaxSDU support (no TC_QUERY_CAPS).
            let max_sdu = merge_max_sdu(&old.map_or([0; TC_MAX], |q| q.max_sdu), &self.max_sdu);
            if max_sdu.iter().any(|&v| v != 0) {
                return Err(modmsg(
                    Errno::NotSupported,
                    "Device does not handle queueMaxSDU",
                ));
            }
        } else {
            self.check_clockid(old)?;
        }
        if self.txtime_delay.is_some() && flags & FLAG_TXTIME_ASSIST == 0 {
            return Err(modmsg(
                Errno::Invalid,
                "txtime-delay can only be set when txtime-assist mode is enabled",
            ));
        }
        Ok((mqprio, cycle))
    }

    /// `taprio_parse_clockid` without full offload.
    fn check_clockid(&self, old: Option<&Taprio>) -> Result<(), KernelError> {
        match self.clockid {
            None => Err(KernelError::invalid("Specifying a 'clockid' is mandatory")),
            Some(c) if c < 0 || old.is_some_and(|q| q.clockid != c) => Err(KernelError::msg(
                Errno::NotSupported,
                "Changing the 'clockid' of a running schedule is not supported",
            )),
            Some(c) if !CLOCKIDS.contains(&c) => Err(KernelError::invalid("Invalid 'clockid'")),
            Some(_) => Ok(()),
        }
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
        let ppb = picos_per_byte(env.speed).0;
        let (mqprio, cycle) = o.check(env, None, ppb)?;
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
        let max_sdu = merge_max_sdu(&[0; TC_MAX], &o.max_sdu);
        Ok(Taprio {
            mq,
            txqueues: env.txqueues as usize,
            mqprio,
            clockid: o.clockid.unwrap_or(-1),
            flags: o.flags(),
            txtime_delay: o.txtime_delay.unwrap_or(0),
            ppb,
            max_sdu,
            sched: Schedule::new(o, cycle, now, &max_sdu, ppb, None, mqprio.num_tc.into()),
            admin: None,
            budget_of: None,
            budget: [0; TC_MAX],
            drops: 0,
            cur_txq,
            stab_overhead: None,
            fresh: true,
        })
    }

    /// Both schedules' class limits worked out anew (`taprio_update_queue_max_sdu` on each).
    fn update_limits(&mut self) {
        let (stab, num_tc) = (self.stab_overhead, self.mqprio.num_tc.into());
        self.sched
            .update_max_sdu(&self.max_sdu, self.ppb, stab, num_tc);
        if let Some((a, _)) = self.admin.as_mut() {
            a.update_max_sdu(&self.max_sdu, self.ppb, stab, num_tc);
        }
    }

    fn txtime_assist(&self) -> bool {
        self.flags & FLAG_TXTIME_ASSIST != 0
    }

    fn tc_of(&self, pkt: &Packet) -> u32 {
        u32::from(self.mqprio.map[(pkt.priority & 15) as usize])
    }

    /// `length_to_duration`: ns on the wire for `len` bytes at the link speed.
    fn duration(&self, len: u32) -> u64 {
        u64::from(len) * self.ppb / 1000
    }

    /// `advance_sched`'s `switch_schedules`, due by `now`.
    fn switch_due(&mut self, now: Nanos) {
        if self.admin.as_ref().is_some_and(|(_, at)| *at <= now) {
            if let Some((s, _)) = self.admin.take() {
                self.sched = s;
            }
        }
    }

    /// `taprio_dequeue_from_txq`: queue `i`'s head, if its class's gate is open, it can be sent whole
    /// before the gate closes (the guard band) and the entry's budget for its class covers it.
    fn dequeue_from_txq(
        &mut self,
        i: usize,
        slot: Option<Slot>,
        gate_mask: u32,
        cx: &mut Cx,
    ) -> Option<Packet> {
        let assist = self.txtime_assist();
        let (map, num_tc, ppb) = (self.mqprio.map, usize::from(self.mqprio.num_tc), self.ppb);
        let (sched, budget) = (&self.sched, &mut self.budget);
        let child = self.mq.queue_mut(i)?;
        if !assist {
            let head = child.q.peek(cx)?;
            let tc = usize::from(map[(head.priority & 15) as usize]);
            if gate_mask & (1 << tc) == 0 {
                return None;
            }
            // No entry (before the start) or one that opens every gate: no guard band, no budget.
            if let Some(slot) = slot.filter(|_| gate_mask != u32::MAX) {
                let len = head.len;
                let guard = cx.now + u64::from(len) * ppb / 1000;
                // taprio_entry_allows_tx: the frame must end before the gate closes.
                if sched
                    .close_time(slot, tc)
                    .is_some_and(|close| guard >= close)
                {
                    return None;
                }
                // taprio_update_budgets: every class's budget pays, even when this one falls short.
                let mut left = 0;
                for (c, b) in budget.iter_mut().enumerate().take(num_tc) {
                    if *b != UNLIMITED {
                        *b -= i64::from(len);
                    }
                    if c == tc {
                        left = *b;
                    }
                }
                if left < 0 {
                    return None;
                }
            }
        }
        child.q.dequeue(cx)
    }

    /// `taprio_enqueue_one` after the max-SDU check: in txtime-assist mode the packet's launch time
    /// first (none: dropped), then its class's queues.
    fn enqueue_one(&mut self, mut pkt: Packet, tc: u32, cx: &mut Cx) -> Verdict {
        if self.txtime_assist() {
            let minimum = (cx.now as i64 + i64::from(self.txtime_delay)).max(pkt.tstamp as i64);
            let dur = self.duration(pkt.len) as i64;
            // switch_schedules once the earliest launch time is past the admin schedule's base.
            if self
                .admin
                .as_ref()
                .is_some_and(|(a, _)| minimum > a.base_time)
            {
                if let Some((a, _)) = self.admin.take() {
                    self.sched = a;
                }
            }
            let admin = self.admin.as_mut().map(|(a, _)| a);
            let t = self.sched.packet_txtime(tc, dur, minimum, admin);
            if t <= 0 {
                // No interval in the cycle fits it (etf would refuse the time as well).
                self.drops += 1;
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

    /// `taprio_skb_exceeds_queue_max_sdu`: the frame (its real length, not a size table's) against
    /// its class's limit in the operational schedule.
    fn exceeds_max_sdu(&self, pkt: &Packet, tc: u32) -> bool {
        pkt.wire_len().unwrap_or(pkt.len) > self.sched.max_frm_len[tc as usize]
    }

    /// `taprio_enqueue_segmented`: a GSO packet over its class's limit is cut into frames, each
    /// dropped if still over it, else queued; the ancestors are told the difference.
    fn enqueue_segmented(&mut self, pkt: Packet, tc: u32, cx: &mut Cx) -> Verdict {
        let prev_len = pkt.len;
        let (mut nb, mut len) = (0u32, 0u32);
        for seg in pkt.gso_segment() {
            let seg_len = seg.len;
            let v = if self.exceeds_max_sdu(&seg, tc) {
                self.drops += 1;
                cx.drop_arriving(seg, super::DropReason::Overlimit);
                Verdict::Drop
            } else {
                self.enqueue_one(seg, tc, cx)
            };
            if v == Verdict::Success {
                nb += 1;
                len += seg_len;
            }
        }
        if nb == 0 {
            return Verdict::Drop;
        }
        cx.reduce_backlog(1 - nb as i64, prev_len as i64 - len as i64);
        Verdict::Success
    }
}

/// `taprio_parse_tc_entries`: the classes tc names take their new max SDU, the others keep theirs.
fn merge_max_sdu(old: &[u32; TC_MAX], given: &[u32]) -> [u32; TC_MAX] {
    let mut m = *old;
    for (slot, &v) in m.iter_mut().zip(given) {
        *slot = v;
    }
    m
}

impl Qdisc for Taprio {
    fn kind(&self) -> &'static str {
        "taprio"
    }

    /// Its queues' qdiscs save themselves inside it (or refuse while they hold packets).
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }

    /// `taprio_enqueue` after `netdev_pick_tx` with the classes' queues: a frame over its class's max
    /// SDU dropped (a GSO packet segmented first), then `taprio_enqueue_one`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        self.switch_due(cx.now);
        let tc = self.tc_of(&pkt);
        if self.exceeds_max_sdu(&pkt, tc) {
            if pkt.is_gso() {
                return self.enqueue_segmented(pkt, tc, cx);
            }
            self.drops += 1;
            cx.drop_arriving(pkt, super::DropReason::Overlimit);
            return Verdict::Drop;
        }
        self.enqueue_one(pkt, tc, cx)
    }

    /// `taprio_dequeue`, `taprio_dequeue_tc_priority`: the highest open class first, its queues in
    /// turn.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.switch_due(cx.now);
        // txtime-assist runs no schedule: every gate open, as before a schedule starts.
        let slot = if self.txtime_assist() {
            None
        } else {
            self.sched.slot(cx.now)
        };
        // advance_sched's taprio_set_budgets as an entry begins.
        if let Some(s) = slot {
            if self.budget_of != Some((s.begin, s.idx)) {
                self.budget_of = Some((s.begin, s.idx));
                self.budget = self.sched.budgets(s.idx, self.ppb);
            }
        }
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
        // Held back by a gate: ask again when the next entry begins or the admin schedule takes
        // over (advance_sched's timer).
        if self.mq.stats().qlen > 0 {
            let next = slot
                .map(|s| s.end)
                .into_iter()
                .chain(
                    self.admin
                        .as_ref()
                        .map(|a| a.1)
                        .filter(|&t| t != Nanos::MAX),
                )
                .min();
            if let Some(t) = next {
                cx.wake_at = Some(cx.wake_at.map_or(t, |w| w.min(t)));
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
    /// The queues' counters and taprio's own drops (`qdisc_drop` on the root).
    fn stats(&self) -> QdiscStats {
        let mut s = self.mq.stats();
        s.drops += self.drops;
        s
    }
    /// `taprio_dump`: the device's mapping, the clock (none with full offload), flags and txtime
    /// delay when set, the classes' max SDU in force (only when one was asked for: see the tc
    /// printer), the operational schedule and the admin one waiting.
    fn dump(&self) -> QdiscOptions {
        let s = self.sched.dump();
        QdiscOptions::Taprio(TaprioOptions {
            mqprio: Some(self.mqprio),
            clockid: (self.flags & FLAG_FULL_OFFLOAD == 0).then_some(self.clockid),
            flags: (self.flags != 0).then_some(self.flags),
            txtime_delay: (self.txtime_delay != 0).then_some(self.txtime_delay),
            base_time: s.base_time,
            cycle_time: s.cycle_time,
            cycle_time_extension: s.cycle_time_extension,
            entries: s.entries,
            max_sdu: if self.max_sdu.iter().any(|&v| v != 0) {
                self.sched.max_sdu.to_vec()
            } else {
                Vec::new()
            },
            admin: self.admin.as_ref().map(|(a, _)| Box::new(a.dump())),
        })
    }
    /// `taprio_change` on a running qdisc: flags, clock and mapping stay; the link speed is read
    /// again; a new schedule becomes the admin schedule, to take over when `advance_sched` switches
    /// (in txtime-assist mode when `get_packet_txtime` does; before the first schedule has started it
    /// replaces it at once).
    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Taprio(o) = opts else {
            return Err(super::wrong_kind());
        };
        let (ppb, warning) = picos_per_byte(env.speed);
        let (_, cycle) = o.check(env, Some(self), ppb)?;
        if let Some(d) = o.txtime_delay {
            self.txtime_delay = d;
        }
        self.ppb = ppb;
        // Only the new schedule's limits are worked out (the running one keeps its own).
        self.max_sdu = merge_max_sdu(&self.max_sdu, &o.max_sdu);
        let num_tc = self.mqprio.num_tc.into();
        let new = Schedule::new(
            o,
            cycle,
            now,
            &self.max_sdu,
            ppb,
            self.stab_overhead,
            num_tc,
        );
        if self.txtime_assist() {
            // The admin schedule, switched to by get_packet_txtime (never by the clock).
            self.admin = Some((new, Nanos::MAX));
        } else if now < self.sched.switch_at {
            self.sched = new;
            self.admin = None;
        } else {
            let mut new = new;
            let at = self.sched.switch_time(&new, now);
            new.switch_at = at;
            self.admin = Some((new, at));
        }
        Ok(warning.into_iter().collect())
    }
    fn set_seed(&mut self, seed: u64) {
        self.mq.set_seed(seed);
    }
    /// `taprio_dev_notifier`: the link speed read again, both schedules' limits worked out anew.
    fn link_changed(&mut self, env: &DevEnv) {
        self.ppb = picos_per_byte(env.speed).0;
        self.update_limits();
    }
    /// The root's size table as `taprio_change` reads it (`q->root->stab`). A new qdisc's table is
    /// in place before `taprio_init` runs (`qdisc_create`), so its limits count the overhead and it
    /// warns only without one; a change runs before `qdisc_change` replaces the table, so it warns,
    /// and works out its limits, by the table it had. The message is the last the extack holds.
    fn root_stab(&mut self, overhead: Option<i32>, options_given: bool) -> Option<Warning> {
        let seen = if std::mem::take(&mut self.fresh) {
            self.stab_overhead = overhead;
            self.update_limits();
            overhead
        } else {
            std::mem::replace(&mut self.stab_overhead, overhead)
        };
        (options_given && seen.is_none()).then(|| {
            Warning(
                "sch_taprio: Size table not specified, frame length estimations may be inaccurate"
                    .into(),
            )
        })
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
    /// Full offload: `taprio_attach` puts the children on the transmit queues themselves.
    fn children_on_txqs(&self) -> bool {
        self.flags & FLAG_FULL_OFFLOAD != 0
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "taprio",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Taprio(o) => {
            let q = Taprio::new(handle, o, env, now)?;
            let warning = picos_per_byte(env.speed).1;
            Ok((Box::new(q), warning.into_iter().collect()))
        }
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
            speed: 0,
            taprio_offload: false,
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

    /// Serve `q` from `t` to `until` as a 10 Mbit/s wire (the speed taprio assumes of a device
    /// without one: 800 ns a byte): each packet's start and end.
    fn serve(q: &mut Taprio, t: Nanos, until: Nanos) -> Vec<(Nanos, Nanos, u32)> {
        serve_at(q, t, until, 800_000)
    }

    /// Serve `q` as a wire taking `ps_per_byte` picoseconds a byte.
    fn serve_at(
        q: &mut Taprio,
        mut t: Nanos,
        until: Nanos,
        ps_per_byte: u64,
    ) -> Vec<(Nanos, Nanos, u32)> {
        let mut sent = Vec::new();
        while t < until {
            let mut cx = Cx::new(t);
            match q.dequeue(&mut cx) {
                Some(p) => {
                    let end = t + ps_per_byte * u64::from(p.len) / 1000;
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
        // 100-byte frames take 80 µs: 50 would fill TC 0's 4 ms exactly, but a frame must end before
        // the gate closes (taprio_entry_allows_tx: strictly before), so the 50th waits: 49 a cycle,
        // 490 in 10 cycles.
        let sent = serve(&mut q, 10 * MS, 110 * MS);
        assert_eq!(sent.len(), 490);
        for (i, (start, end, _)) in sent.iter().enumerate() {
            let cycle = 10 * MS + (i as u64 / 49) * 10 * MS;
            assert_eq!(*start, cycle + (i as u64 % 49) * 80_000, "packet {i}");
            assert!(*end < cycle + 4 * MS);
        }
    }

    #[test]
    fn a_class_s_longest_opening_runs_round_the_cycle() {
        // TC 0 open 2 ms, TC 1 5 ms, TC 0 3 ms: TC 0's last 3 ms and the next cycle's first 2 are one
        // opening of 5 ms; a cycle-time of 8 ms cuts the last entry to 1 ms (3 ms with the wrap).
        let e = |gate_mask, ms: u32| SchedEntry {
            cmd: 0,
            gate_mask,
            interval: ms * 1_000_000,
        };
        let mut t = TaprioOptions {
            entries: vec![e(1, 2), e(2, 5), e(1, 3)],
            cycle_time: 10_000_000,
            ..TaprioOptions::default()
        };
        assert_eq!(
            (t.longest_open_ns(0), t.longest_open_ns(1)),
            (5 * MS, 5 * MS)
        );
        t.cycle_time = 8_000_000;
        assert_eq!(
            (t.longest_open_ns(0), t.longest_open_ns(1)),
            (3 * MS, 5 * MS)
        );
        // Open in every entry: the whole cycle; in none: nothing.
        t.entries = vec![e(3, 2), e(1, 6)];
        assert_eq!(
            (t.longest_open_ns(0), t.longest_open_ns(1)),
            (8 * MS, 2 * MS)
        );
        assert_eq!(t.longest_open_ns(2), 0);
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

    /// One class open 1 ms of every 4 (TC 0), the other the rest (TC 1), on a device of `speed`
    /// Mbit/s; the schedule starts at 4 ms (made at 0 with base time 0).
    fn one_in_four(speed: u32, max_sdu: Vec<u32>) -> Taprio {
        let mut o = opts(None);
        o.entries[0].interval = 1_000_000;
        o.entries[1].interval = 3_000_000;
        o.max_sdu = max_sdu;
        Taprio::new(Handle(0x10000), &o, &DevEnv { speed, ..env(4) }, 0).unwrap()
    }

    /// Bytes of the packets sent in each 4 ms cycle from 4 ms to `until`.
    fn bytes_per_cycle(sent: &[(Nanos, Nanos, u32)], q_len: u32, until: Nanos) -> Vec<u64> {
        let mut v = vec![0u64; ((until - 4 * MS) / (4 * MS)) as usize];
        for (start, _, _) in sent {
            v[((start - 4 * MS) / (4 * MS)) as usize] += u64::from(q_len);
        }
        v
    }

    #[test]
    fn an_entry_sends_no_more_than_its_budget() {
        // A gate open 1 ms every 4 ms at 100 Mbit/s (80 ps… 80 000 ps a byte): a budget of
        // 1 ms × 1000 / 80 000 = 12 500 bytes (taprio_set_budgets). On a wire ten times faster the
        // guard band (each 100-byte frame reckoned at 8 µs) would let ~1 250 frames out in the
        // millisecond; the budget stops them at 125 frames, 12 500 bytes, every cycle.
        let mut q = one_in_four(100, Vec::new());
        let mut cx = Cx::new(0);
        for _ in 0..2000 {
            q.enqueue(packet(0, 100), &mut cx);
        }
        let sent = serve_at(&mut q, 4 * MS, 40 * MS, 8_000);
        assert_eq!(bytes_per_cycle(&sent, 100, 40 * MS), vec![12_500; 9]);
        // 1 000-byte frames: 12 fit (12 000 bytes); the 13th would leave -500 and stays.
        let mut q = one_in_four(100, Vec::new());
        for _ in 0..200 {
            q.enqueue(packet(0, 1000), &mut cx);
        }
        let sent = serve_at(&mut q, 4 * MS, 40 * MS, 8_000);
        assert_eq!(bytes_per_cycle(&sent, 1000, 40 * MS), vec![12_000; 9]);
        // At the link's own speed the guard band binds first: the 125th 8-µs frame would end just
        // as the gate closes, so 124 go (taprio_entry_allows_tx: strictly before).
        let mut q = one_in_four(100, Vec::new());
        for _ in 0..2000 {
            q.enqueue(packet(0, 100), &mut cx);
        }
        let sent = serve_at(&mut q, 4 * MS, 40 * MS, 80_000);
        assert_eq!(bytes_per_cycle(&sent, 100, 40 * MS), vec![12_400; 9]);
    }

    #[test]
    fn a_frame_over_its_class_max_sdu_is_dropped_and_counted() {
        // max-sdu 1500 for TC 0: the longest frame is 1 500 + 14 bytes (taprio_update_queue_max_sdu).
        let mut q = one_in_four(1000, vec![1500]);
        let mut cx = Cx::new(0);
        assert_eq!(q.enqueue(packet(0, 1600), &mut cx), Verdict::Drop);
        assert_eq!(q.enqueue(packet(0, 1515), &mut cx), Verdict::Drop);
        assert_eq!(q.enqueue(packet(0, 1514), &mut cx), Verdict::Success);
        // TC 1 has no limit of its own, and its 3-ms window at 1 Gbit/s sends 375 000 bytes: past
        // the device's largest MTU, so no limit from the schedule either.
        assert_eq!(q.enqueue(packet(1, 9000), &mut cx), Verdict::Success);
        let st = q.stats();
        assert_eq!((st.drops, st.qlen), (2, 2));
        assert_eq!(cx.drops.len(), 2);
        assert!(cx
            .drops
            .iter()
            .all(|d| d.reason == super::super::DropReason::Overlimit));
        // The dump lists every class's limit in force, since one was asked for.
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!(&d.max_sdu[..2], &[1500, 0]);
    }

    #[test]
    fn a_short_window_limits_its_class_frames() {
        // TC 0 open 100 µs of 1 ms at 100 Mbit/s: at most 1 250 bytes in its window, so frames
        // over 1 250 are dropped (max SDU 1 236) though no max-sdu was given for it.
        let mut o = opts(None);
        o.entries[0].interval = 100_000;
        o.entries[1].interval = 900_000;
        o.max_sdu = vec![0, 1500];
        let mut q = Taprio::new(
            Handle(0x10000),
            &o,
            &DevEnv {
                speed: 100,
                ..env(4)
            },
            0,
        )
        .unwrap();
        let mut cx = Cx::new(0);
        assert_eq!(q.enqueue(packet(0, 1251), &mut cx), Verdict::Drop);
        assert_eq!(q.enqueue(packet(0, 1250), &mut cx), Verdict::Success);
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!(&d.max_sdu[..3], &[1236, 1500, 0]);
        // At 1 Gbit/s the window holds 12 500 bytes: the limit lifts (a new speed, the notifier).
        q.link_changed(&DevEnv {
            speed: 1000,
            ..env(4)
        });
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!(&d.max_sdu[..2], &[12_486, 1500]);
    }

    /// TC 0 open 100 µs of each 1 ms, TC 1 the rest, on a device of 100 Mbit/s.
    fn short_window() -> (TaprioOptions, DevEnv) {
        let mut o = opts(None);
        o.entries[0].interval = 100_000;
        o.entries[1].interval = 900_000;
        let env100 = DevEnv {
            speed: 100,
            ..env(4)
        };
        (o, env100)
    }

    #[test]
    fn a_root_size_tables_overhead_comes_off_a_short_windows_limit() {
        // taprio_update_queue_max_sdu with a size table: TC 0's window of 100 µs at 100 Mbit/s
        // holds 1 250 bytes (duration_to_length); less the table's 24 bytes of overhead, 1 226,
        // the frame limit (skb->len, the real length, against max_frm_len), max SDU 1 212.
        let (o, env100) = short_window();
        let mut q = Taprio::new(Handle(0x10000), &o, &env100, 0).unwrap();
        // Made with the table: qdisc_create set it before taprio_init, so no warning.
        assert_eq!(q.root_stab(Some(24), true), None);
        let mut cx = Cx::new(0);
        assert_eq!(q.enqueue(packet(0, 1227), &mut cx), Verdict::Drop);
        assert_eq!(q.enqueue(packet(0, 1226), &mut cx), Verdict::Success);
        assert_eq!(
            &q.sched.max_sdu[..2],
            &[1212, 11_212],
            "1 250 - 24 - 14; TC 1's 900 µs: 11 250 - 24 - 14"
        );
        // An overhead past the window: max_t(int, …, hard_header_len + 1) keeps a 1-byte SDU.
        let mut q = Taprio::new(Handle(0x10000), &o, &env100, 0).unwrap();
        q.root_stab(Some(5000), true);
        assert_eq!(q.sched.max_sdu[0], 1);
        // A negative overhead adds to the window: 1 250 + 100 - 14.
        let mut q = Taprio::new(Handle(0x10000), &o, &env100, 0).unwrap();
        q.root_stab(Some(-100), true);
        assert_eq!(q.sched.max_sdu[0], 1336);
    }

    #[test]
    fn a_change_reads_the_size_table_it_replaces() {
        // qdisc_change runs taprio_change before it swaps the table: a change that brings a table
        // warns (the old one was none) and its admin schedule's limits ignore the new overhead; the
        // next change reads it. Made without a table: the warning at once.
        let (o, env100) = short_window();
        let warn =
            "sch_taprio: Size table not specified, frame length estimations may be inaccurate";
        let mut q = Taprio::new(Handle(0x10000), &o, &env100, 0).unwrap();
        assert_eq!(q.root_stab(None, true).map(|w| w.0), Some(warn.into()));
        let mut c = o.clone();
        c.mqprio = None;
        c.base_time = 50 * MS as i64;
        q.change(&QdiscOptions::Taprio(c.clone()), &env100, 5 * MS)
            .unwrap();
        assert_eq!(q.root_stab(Some(24), true).map(|w| w.0), Some(warn.into()));
        let admin_sdu = |q: &Taprio| q.admin.as_ref().map(|(a, _)| a.max_sdu[0]);
        assert_eq!(admin_sdu(&q), Some(1236), "the old (no) table: 1 250 - 14");
        q.change(&QdiscOptions::Taprio(c), &env100, 6 * MS).unwrap();
        assert_eq!(q.root_stab(Some(24), true), None);
        assert_eq!(admin_sdu(&q), Some(1212), "now the table's 24 bytes off");
        // A table changed alone (no options): no taprio_change, no warning.
        assert_eq!(q.root_stab(None, false), None);
    }

    /// The running schedule of `a_new_schedule_waits_as_admin_until_its_base_time` with a
    /// cycle-time-extension of `ext` ns, changed at 12 ms to TC 0 alone for a 10 ms cycle from base
    /// time 33 ms.
    fn changed_with_extension(ext: i64) -> Taprio {
        let mut o = opts(None);
        o.cycle_time_extension = ext;
        let mut q = Taprio::new(Handle(0x10000), &o, &env(4), 0).unwrap();
        let mut c = opts(None);
        c.mqprio = None;
        c.base_time = 33 * MS as i64;
        c.entries = vec![SchedEntry {
            cmd: 0,
            gate_mask: 1,
            interval: 10_000_000,
        }];
        q.change(&QdiscOptions::Taprio(c), &env(4), 12 * MS)
            .unwrap();
        q
    }

    /// When that change takes over.
    fn switch_with_extension(ext: i64) -> Nanos {
        changed_with_extension(ext)
            .admin
            .as_ref()
            .map(|a| a.1)
            .unwrap()
    }

    #[test]
    fn the_cycle_time_extension_brings_the_switch_an_entry_earlier() {
        // Entries end at 14, 20, 24, 30, 34 ms. should_change_schedules, at each entry's end, with
        // the next entry's end E: switch if 33 ms <= E, or 33 ms <= E + the running schedule's
        // extension. Without one: at 30 ms (E = 34). With 5 ms: at 24 ms (E = 30, 30 + 5 >= 33),
        // so TC 1's 24-30 ms entry never runs and the new first entry opens TC 0 from 24 ms to
        // 33 + 10 ms. 2 ms is not enough at 24 ms (32 < 33): 30 ms. A negative extension changes
        // nothing (the simple case decides first).
        assert_eq!(switch_with_extension(0), 30 * MS);
        assert_eq!(switch_with_extension(5 * MS as i64), 24 * MS);
        assert_eq!(switch_with_extension(3 * MS as i64), 24 * MS, "30 + 3 = 33");
        assert_eq!(switch_with_extension(2 * MS as i64), 30 * MS);
        assert_eq!(switch_with_extension(-5 * MS as i64), 30 * MS);
        // 12 ms: at 14 ms the next entry ends at 20, 20 + 12 < 33; at 20 ms, 24 + 12 >= 33. 13 ms:
        // at 14 ms already (20 + 13 = 33), the end of the entry running when the change came.
        assert_eq!(switch_with_extension(12 * MS as i64), 20 * MS);
        assert_eq!(switch_with_extension(13 * MS as i64), 14 * MS);
        // Served from 24.5 ms, a packet of each class queued: with 5 ms the new schedule runs, TC 0
        // goes at once and TC 1 never; without, TC 1's old entry (24-30 ms) runs, TC 0 waits for
        // the switch at 30 ms. 100 bytes take 80 µs at the 10 Mbit/s taprio assumes.
        let served = |ext: i64| {
            let mut q = changed_with_extension(ext);
            let mut cx = Cx::new(24_500_000);
            q.enqueue(packet(1, 100), &mut cx);
            q.enqueue(packet(0, 100), &mut cx);
            serve(&mut q, 24_500_000, 60 * MS)
        };
        assert_eq!(served(5 * MS as i64), [(24_500_000, 24_580_000, 0)]);
        assert_eq!(
            served(0),
            [(24_500_000, 24_580_000, 1), (30 * MS, 30 * MS + 80_000, 0)]
        );
    }

    #[test]
    fn a_new_schedule_waits_as_admin_until_its_base_time() {
        // Running from 10 ms: TC 0 for 4 ms, TC 1 for 6 ms. At 12 ms a change brings TC 1 alone for
        // the whole cycle from base time 31 ms. The old schedule's entries end at 14, 20, 24, 30 ms;
        // at 24 ms the next entry would end at 30 ms, before 31: no switch; at 30 ms the next would
        // end at 34 ms, past 31: the switch (should_change_schedules), the new first entry running
        // from 30 ms to 31 + 10 ms.
        let mut q = Taprio::new(Handle(0x10000), &opts(None), &env(4), 0).unwrap();
        let mut o = opts(None);
        o.mqprio = None;
        o.base_time = 31 * MS as i64;
        o.entries = vec![SchedEntry {
            cmd: 0,
            gate_mask: 2,
            interval: 10_000_000,
        }];
        q.change(&QdiscOptions::Taprio(o), &env(4), 12 * MS)
            .unwrap();
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!((d.base_time, d.entries.len()), (0, 2), "still operational");
        let admin = d.admin.expect("the admin schedule listed");
        assert_eq!(
            (admin.base_time, admin.cycle_time),
            (31 * MS as i64, 10 * MS as i64)
        );
        assert_eq!(q.admin.as_ref().map(|a| a.1), Some(30 * MS));
        // TC 0 still goes in its 20-24 ms entry; from 30 ms its gate never opens again.
        let mut cx = Cx::new(12 * MS);
        for _ in 0..3 {
            q.enqueue(packet(0, 100), &mut cx);
        }
        let sent = serve(&mut q, 20 * MS, 23 * MS);
        assert_eq!(sent.len(), 3);
        q.enqueue(packet(0, 100), &mut cx);
        q.enqueue(packet(1, 100), &mut cx);
        let sent = serve(&mut q, 25 * MS, 60 * MS);
        assert_eq!(sent, [(25 * MS, 25 * MS + 80_000, 1)], "TC 1 only");
        let mut cx = Cx::new(60 * MS);
        assert!(q.dequeue(&mut cx).is_none());
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!(
            (d.base_time, d.entries.len(), d.admin),
            (31 * MS as i64, 1, None)
        );
    }

    #[test]
    fn a_change_before_the_start_replaces_the_schedule() {
        // Made at 0, starting at 10 ms: a change at 5 ms takes effect at once (no operational
        // schedule yet in the kernel: the admin one is replaced).
        let mut q = Taprio::new(Handle(0x10000), &opts(None), &env(4), 0).unwrap();
        let mut o = opts(None);
        o.mqprio = None;
        o.entries.swap(0, 1);
        q.change(&QdiscOptions::Taprio(o), &env(4), 5 * MS).unwrap();
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!((d.entries[0].gate_mask, d.admin), (2, None));
    }

    #[test]
    fn the_link_speed_sets_the_time_a_byte_takes() {
        assert_eq!(picos_per_byte(0), (800_000, None), "SPEED_10 without one");
        assert_eq!(picos_per_byte(100).0, 80_000);
        assert_eq!(picos_per_byte(470_588).0, 17);
        let (ppb, w) = picos_per_byte(1_000_000);
        assert_eq!(ppb, 17);
        assert_eq!(
            w.unwrap().0,
            "sch_taprio: Link speed 1000000 is too high. Schedule may be inaccurate"
        );
        // At 1 Gbit/s a 60-byte frame takes 480 ns: an interval of 480 is enough, 479 is not.
        let mut o = opts(None);
        o.entries[0].interval = 480;
        let fast = DevEnv {
            speed: 1000,
            ..env(4)
        };
        assert!(Taprio::new(Handle(0x10000), &o, &fast, 0).is_ok());
        o.entries[0].interval = 479;
        assert!(Taprio::new(Handle(0x10000), &o, &fast, 0).is_err());
    }

    #[test]
    fn txtime_assist_switches_to_the_admin_schedule_by_launch_time() {
        // Running from 20 ms (made at 10 ms): TC 0 for 4 ms, TC 1 for 6 ms. At 20 ms a change brings
        // TC 0 alone, from base time 100 ms.
        let mut o = opts(Some(FLAG_TXTIME_ASSIST));
        o.mqprio.as_mut().unwrap().offset[1] = 0;
        let mut q = Taprio::new(Handle(0x10000), &o, &env(4), 10 * MS).unwrap();
        let mut new = opts(Some(FLAG_TXTIME_ASSIST));
        new.mqprio = None;
        new.base_time = 100 * MS as i64;
        new.entries = vec![SchedEntry {
            cmd: 0,
            gate_mask: 1,
            interval: 10_000_000,
        }];
        q.change(&QdiscOptions::Taprio(new), &env(4), 20 * MS)
            .unwrap();
        let launch = |q: &mut Taprio, prio: u32, earliest: Nanos| {
            let mut cx = Cx::new(20 * MS);
            let mut p = packet(prio, 100);
            p.tstamp = earliest;
            let v = q.enqueue(p, &mut cx);
            (v == Verdict::Success).then(|| q.dequeue(&mut cx).unwrap().tstamp)
        };
        // A TC 1 packet from 97 ms goes at once (the old schedule's TC 1 window, 94-100 ms); one
        // from 99.95 ms would end past that window (80 us), and the next one opens at 104 ms, past
        // the admin schedule's base, which has none for TC 1: no launch time, dropped.
        assert_eq!(launch(&mut q, 1, 97 * MS), Some(97 * MS));
        assert_eq!(launch(&mut q, 1, 99_950_000), None);
        // A TC 0 packet from 97 ms: the old schedule's TC 0 window at 100 ms (not past the base).
        assert_eq!(launch(&mut q, 0, 97 * MS), Some(100 * MS));
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert!(d.admin.is_some(), "not switched yet");
        // From 155 ms the admin schedule is operational: TC 0 at once.
        assert_eq!(launch(&mut q, 0, 155 * MS), Some(155 * MS));
        let QdiscOptions::Taprio(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!((d.base_time, d.admin), (100 * MS as i64, None));
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
