//! `gate` (`net/sched/act_gate.c`): 802.1Qci per-stream gating: a cyclic schedule of open and closed
//! intervals; a packet that meets a closed gate, or an open one whose interval has already passed its
//! `max-octets`, is dropped.
//!
//! The kernel runs the schedule on an hrtimer. When the action is made (or replaced) at time `now`, the
//! schedule starts at `base-time` if that is still ahead, else at the next whole cycle after it
//! (`base + (n + 1) × cycle-time`, `gate_get_start_time`); until then the gate is *pending* and every
//! packet passes. From the start the timer applies the entries one after another, each for its
//! interval, and wraps to the first after the last: the schedule repeats every *sum of the intervals*
//! (`cycle-time` only places the start, and would re-align a late timer, which virtual time never is).
//! Each open interval counts the bytes that passed (`qdisc_pkt_len`) against its `max-octets`, from 0
//! at the interval's start.
//!
//! tclab computes the gate's state at the packet's time (`Cx::now`, nanoseconds) instead of running a
//! timer: which repetition and which entry `now` falls in, the octets counted per (repetition, entry).
//! Every clock (`clockid`: TAI by default) is the one virtual clock; base times are on it.

use super::Control;
#[cfg(doc)]
use super::TC_ACT_SHOT;
use crate::error::KernelError;
use crate::Nanos;

/// `CLOCK_TAI`, the kernel's default clock for the schedule.
pub const CLOCK_TAI: i32 = 11;

/// One `sched-entry`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GateEntry {
    pub open: bool,
    /// Nanoseconds; the kernel refuses 0.
    pub interval: u32,
    /// Internal priority value; -1 is the wildcard (tclab has no receive queues to steer to).
    pub ipv: i32,
    /// Bytes an open interval lets through; -1 is no limit.
    pub max_octets: i32,
}

/// What tc sends (`TCA_GATE_*`); after a replace, what the kernel kept from the action before for
/// what the command left out.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Gate {
    pub action: Control,
    pub priority: Option<i32>,
    pub flags: Option<u32>,
    pub base_time: Option<u64>,
    pub cycle_time: Option<u64>,
    pub cycle_time_ext: Option<u64>,
    pub clockid: Option<i32>,
    pub entries: Vec<GateEntry>,
}

impl Gate {
    /// `tcf_gate_init`'s checks; `created`: the command makes the action (a replace may leave the
    /// entries out and keep the old ones).
    pub fn validate(&self, created: bool) -> Result<(), KernelError> {
        if let Some(c) = self.clockid {
            // CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME, CLOCK_TAI.
            if ![0, 1, 7, CLOCK_TAI].contains(&c) {
                return Err(KernelError::invalid("Invalid 'clockid'"));
            }
        }
        if self.entries.iter().any(|e| e.interval == 0) {
            return Err(KernelError::invalid("Invalid interval for schedule entry"));
        }
        if created && self.entries.is_empty() {
            return Err(KernelError::invalid("The entry list is empty"));
        }
        Ok(())
    }

    /// A replace: what the command gave, the old action's values for the rest (the entries, and with
    /// them their cycle time, when it gave none).
    pub fn replacing(&self, old: &Gate) -> Gate {
        let reuse = self.entries.is_empty();
        Gate {
            action: self.action,
            priority: self.priority.or(old.priority),
            flags: self.flags.or(old.flags),
            base_time: self.base_time.or(old.base_time),
            cycle_time: if reuse {
                self.cycle_time.or(old.cycle_time)
            } else {
                self.cycle_time
            },
            cycle_time_ext: self.cycle_time_ext.or(old.cycle_time_ext),
            clockid: self.clockid.or(old.clockid),
            entries: if reuse {
                old.entries.clone()
            } else {
                self.entries.clone()
            },
        }
    }

    /// The sum of the entries' intervals: the period the schedule repeats with.
    fn period(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.interval)).sum()
    }

    /// `tcfg_cycletime`: as given, else the sum of the intervals.
    pub fn kept_cycle_time(&self) -> u64 {
        self.cycle_time.filter(|c| *c != 0).unwrap_or(self.period())
    }

    /// `gate_get_start_time` at `now`.
    fn start(&self, now: Nanos) -> Nanos {
        let base = self.base_time.unwrap_or(0);
        if base > now {
            return base;
        }
        let cycle = self.kept_cycle_time().max(1);
        base + ((now - base) / cycle + 1) * cycle
    }
}

/// The schedule's state of one action: when it started, and the octets of the current open interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GateState {
    start: Nanos,
    /// (repetition, entry) whose octets `octets` counts.
    window: (u64, usize),
    octets: i64,
}

impl GateState {
    /// The state an action of any kind starts with: a gate's schedule, else nothing.
    pub(crate) fn new_for(p: &super::ActionParams, now: Nanos) -> GateState {
        match p {
            super::ActionParams::Gate(g) => GateState::new(g, now),
            _ => GateState::default(),
        }
    }

    /// The schedule set up when the action is made or replaced at `now`.
    pub fn new(g: &Gate, now: Nanos) -> GateState {
        GateState {
            start: g.start(now),
            window: (u64::MAX, 0),
            octets: 0,
        }
    }

    /// `tcf_gate_act` at `now` for a packet of `len` bytes: `Ok` with the action's control code when
    /// the gate lets the packet through, `Err(over)` when it drops it (a counted drop, with an
    /// overlimit too when `over`: past `max-octets`), answering [`TC_ACT_SHOT`].
    pub fn act(&mut self, g: &Gate, len: u32, now: Nanos) -> Result<Control, bool> {
        let period = g.period();
        if now < self.start || period == 0 {
            // Pending: the schedule has not started.
            return Ok(g.action);
        }
        let rep = (now - self.start) / period;
        let mut off = (now - self.start) % period;
        let mut i = 0;
        while off >= u64::from(g.entries[i].interval) {
            off -= u64::from(g.entries[i].interval);
            i += 1;
        }
        let e = &g.entries[i];
        if !e.open {
            return Err(false);
        }
        if e.max_octets >= 0 {
            if self.window != (rep, i) {
                self.window = (rep, i);
                self.octets = 0;
            }
            self.octets += i64::from(len);
            if self.octets > i64::from(e.max_octets) {
                return Err(true);
            }
        }
        Ok(g.action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn entry(open: bool, interval: u32, max_octets: i32) -> GateEntry {
        GateEntry {
            open,
            interval,
            ipv: -1,
            max_octets,
        }
    }

    fn gate(base: Option<u64>, cycle: Option<u64>, entries: Vec<GateEntry>) -> Gate {
        Gate {
            action: TC_ACT_PIPE,
            priority: None,
            flags: None,
            base_time: base,
            cycle_time: cycle,
            cycle_time_ext: None,
            clockid: None,
            entries,
        }
    }

    #[test]
    fn open_and_closed_intervals_repeat_from_the_start() {
        // Open 300 ns, closed 700 ns; base 5 000 ns ahead of installation at 1 000.
        let g = gate(
            Some(5_000),
            None,
            vec![entry(true, 300, -1), entry(false, 700, -1)],
        );
        let mut s = GateState::new(&g, 1_000);
        let mut at = |t| s.act(&g, 100, t);
        assert_eq!(at(4_999), Ok(TC_ACT_PIPE), "pending before the start");
        assert_eq!(at(5_000), Ok(TC_ACT_PIPE));
        assert_eq!(at(5_299), Ok(TC_ACT_PIPE));
        assert_eq!(at(5_300), Err(false), "closed");
        assert_eq!(at(5_999), Err(false));
        assert_eq!(at(6_000), Ok(TC_ACT_PIPE), "second repetition");
        assert_eq!(at(1_005_150), Ok(TC_ACT_PIPE));
        assert_eq!(at(1_005_650), Err(false));
    }

    #[test]
    fn a_base_in_the_past_starts_at_the_next_cycle() {
        // Installed at 2 500 with base 0 and cycle 1 000: the schedule starts at 3 000.
        let g = gate(
            None,
            Some(1_000),
            vec![entry(false, 100, -1), entry(true, 400, -1)],
        );
        let mut s = GateState::new(&g, 2_500);
        assert_eq!(s.act(&g, 1, 2_999), Ok(TC_ACT_PIPE), "pending");
        assert_eq!(s.act(&g, 1, 3_050), Err(false));
        // The repetition is the intervals' sum (500), not the cycle time.
        assert_eq!(s.act(&g, 1, 3_450), Ok(TC_ACT_PIPE));
        assert_eq!(s.act(&g, 1, 3_550), Err(false));
        assert_eq!(g.kept_cycle_time(), 1_000);
    }

    #[test]
    fn max_octets_per_open_interval() {
        let g = gate(
            None,
            None,
            vec![entry(true, 1_000, 2_500), entry(false, 1_000, -1)],
        );
        let mut s = GateState::new(&g, 0);
        // Starts at 2 000 (base 0, cycle = 2 000).
        let r: Vec<_> = (0..4).map(|k| s.act(&g, 1_000, 2_000 + k)).collect();
        assert_eq!(
            r,
            [Ok(TC_ACT_PIPE), Ok(TC_ACT_PIPE), Err(true), Err(true)],
            "2 500 bytes: two packets of 1 000"
        );
        // The next open interval counts from 0 again.
        assert_eq!(s.act(&g, 1_000, 4_000), Ok(TC_ACT_PIPE));
    }

    #[test]
    fn replace_keeps_what_it_does_not_give() {
        let mut old = gate(Some(200), Some(9_000), vec![entry(true, 10, -1)]);
        old.priority = Some(3);
        let new = gate(Some(400), None, vec![]);
        let r = new.replacing(&old);
        assert_eq!(
            (r.base_time, r.cycle_time, r.priority, r.entries.len()),
            (Some(400), Some(9_000), Some(3), 1)
        );
        assert!(new.validate(false).is_ok());
        assert_eq!(
            new.validate(true).unwrap_err().to_string(),
            "Error: The entry list is empty."
        );
        assert!(gate(None, None, vec![entry(true, 0, -1)])
            .validate(true)
            .unwrap_err()
            .to_string()
            .contains("Invalid interval"));
    }
}
