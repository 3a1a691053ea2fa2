//! `red` — Random Early Detection, after `net/sched/sch_red.c`.
//!
//! # The algorithm
//!
//! RED keeps a queue short on average while absorbing bursts: it watches an exponentially weighted
//! average of its backlog (in bytes) and, once that average passes `min`, drops — or with `ecn` marks —
//! arriving packets at random, with a probability rising to `probability` at `max` and to certainty
//! beyond. Senders slow down at the first loss, well before the queue is full, and because the marks are
//! random they hit the senders in proportion to their share of the traffic. The control law itself
//! (average, thresholds, the count-spread probability, idle-time decay, adaptive `max_P`) is in
//! [`super::red_impl`], shared with the other RED-based disciplines.
//!
//! The queue is a child qdisc — a `bfifo` of `limit` bytes, class `handle:1`, replaceable by grafting —
//! and RED decides before the child sees the packet:
//!
//! - **below `min`**: queue it;
//! - **between** (`ProbMark`) or **above `max`** (`HardMark`): without `ecn`, drop it (an early or a
//!   forced drop); with `ecn`, set CE on an ECN-capable packet and queue it, drop a Not-ECT packet — unless
//!   `nodrop`, which queues it unmarked; `harddrop` drops above `max` even with `ecn`;
//! - a packet the child refuses (its limit) is a `pdrop`.
//!
//! Each early decision also counts an overlimit. The queue going empty starts an idle period, ended by
//! the next arrival, whose average decays by the idle time (`Stab`). With `adaptive`, a timer every
//! 500 ms moves `max_P` towards keeping the average in the middle of the band.
//!
//! # What tclab models and how
//!
//! Everything above, with the kernel's counters: `tc -s` shows `marked` (probabilistic + forced marks),
//! `early` (probabilistic + forced drops), `pdrop` and `other` (always 0 since `->drop` is gone). The
//! adaptive timer runs lazily: at the first enqueue or dequeue after each 500 ms boundary the algorithm
//! runs once per boundary passed, with the state it would have had then (nothing but the idle decay
//! changes between packets, and that is computed from the boundary's time). RED's `qevent`s (filters
//! run on early drops and marks) are accepted by tc's grammar but not run. Random numbers come from the
//! run's seed.

use super::red_impl::{check_params, RedAction, RedParms, RedVars};
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats,
    Sched, Verdict, Xstats,
};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::splitmix64;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::qdisc::fifo::Fifo;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `TC_RED_*` flags.
pub const TC_RED_ECN: u8 = 1;
pub const TC_RED_HARDDROP: u8 = 2;
pub const TC_RED_ADAPTATIVE: u8 = 4;
pub const TC_RED_NODROP: u8 = 8;

/// The adaptive timer's period (`HZ/2`).
const ADAPT_PERIOD: Nanos = 500_000_000;

/// What tc sends: `struct tc_red_qopt`, the `Stab` table, `max_P` and the flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedOptions {
    /// Bytes the child bfifo may hold (0: keep the child as it is).
    pub limit: u32,
    pub qth_min: u32,
    pub qth_max: u32,
    pub wlog: u8,
    pub plog: u8,
    pub scell_log: u8,
    pub stab: Vec<u8>,
    /// Probability at `max`, scaled by 2^32 (0: from Plog).
    pub max_p: u32,
    pub flags: u8,
}

/// `struct tc_red_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedXstats {
    pub early: u32,
    pub pdrop: u32,
    pub other: u32,
    pub marked: u32,
}

/// In a snapshot ([`crate::snapshot`]): all of it (the child saves its own queue, or refuses).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Red {
    handle: Handle,
    limit: u32,
    flags: u8,
    parms: RedParms,
    vars: RedVars,
    /// The child; `None` is the noop qdisc (drops everything) after its child was deleted.
    child: Option<Sched>,
    /// Counters: probabilistic and forced drops and marks, child refusals.
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
    stats: QdiscStats,
    rng: u64,
    /// The adaptive timer's next expiry, when `adaptive`.
    next_adapt: Option<Nanos>,
    /// The options as given, for `dump` (tc prints the thresholds back).
    opts: RedOptions,
}

impl Red {
    pub fn new(handle: Handle, o: &RedOptions, now: Nanos) -> Result<Red, KernelError> {
        let mut q = Red {
            handle,
            limit: 0,
            flags: 0,
            parms: RedParms::new(0, 0, 0, 0, 0, &[], 0),
            vars: RedVars::default(),
            child: None,
            prob_drop: 0,
            prob_mark: 0,
            forced_drop: 0,
            forced_mark: 0,
            pdrop: 0,
            stats: QdiscStats::default(),
            // Until set_seed: a constant grouped as the words it spells.
            #[allow(clippy::unusual_byte_groupings)]
            rng: 0x5eed_0f_4ed,
            next_adapt: None,
            opts: o.clone(),
        };
        q.apply(o, now)?;
        Ok(q)
    }

    /// `__red_change`: checked first, then applied whole.
    fn apply(&mut self, o: &RedOptions, now: Nanos) -> Result<(), KernelError> {
        if o.stab.len() < super::red_impl::RED_STAB_SIZE
            || !check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, &o.stab)
        {
            return Err(KernelError::new(Errno::Invalid));
        }
        if o.flags & TC_RED_NODROP != 0 && o.flags & TC_RED_ECN == 0 {
            return Err(KernelError::invalid(
                "sch_red: nodrop mode is only meaningful with ECN",
            ));
        }
        self.flags = o.flags;
        self.limit = o.limit;
        if o.limit > 0 {
            // A new bfifo of `limit` bytes; the old child's packets are purged.
            self.child = Some(Sched::new(
                Handle::UNSPEC,
                Handle(self.handle.0 | 1),
                Box::new(Fifo::bfifo(o.limit)),
            ));
            self.stats.backlog = 0;
            self.stats.qlen = 0;
        }
        self.parms = RedParms::new(
            o.qth_min,
            o.qth_max,
            o.wlog,
            o.plog,
            o.scell_log,
            &o.stab,
            o.max_p,
        );
        self.vars.restart();
        self.next_adapt = (o.flags & TC_RED_ADAPTATIVE != 0).then_some(now + ADAPT_PERIOD);
        if self.child.as_ref().is_none_or(|c| c.q.stats().qlen == 0) {
            self.vars.idle_since = Some(now);
        }
        self.opts = o.clone();
        Ok(())
    }

    fn use_ecn(&self) -> bool {
        self.flags & TC_RED_ECN != 0
    }

    /// `red_adaptative_timer`, for every period that ended by `now`.
    fn run_adapt_timer(&mut self, now: Nanos) {
        while let Some(t) = self.next_adapt.filter(|t| *t <= now) {
            self.vars.adapt(&mut self.parms, t);
            self.next_adapt = Some(t + ADAPT_PERIOD);
        }
    }

    fn child_backlog(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.q.stats().backlog)
    }

    /// The probabilistic or forced decision on `pkt`: `Ok` to queue it (perhaps CE-marked), `Err` to
    /// drop it.
    fn decide(&mut self, action: RedAction, pkt: &mut Packet) -> Result<(), ()> {
        let (drops, marks) = match action {
            RedAction::DontMark => return Ok(()),
            RedAction::ProbMark => {
                self.stats.overlimits += 1;
                if !self.use_ecn() {
                    self.prob_drop += 1;
                    return Err(());
                }
                (&mut self.prob_drop, &mut self.prob_mark)
            }
            RedAction::HardMark => {
                self.stats.overlimits += 1;
                if self.flags & TC_RED_HARDDROP != 0 || !self.use_ecn() {
                    self.forced_drop += 1;
                    return Err(());
                }
                (&mut self.forced_drop, &mut self.forced_mark)
            }
        };
        if set_ce(pkt) {
            *marks += 1;
            Ok(())
        } else if self.flags & TC_RED_NODROP == 0 {
            *drops += 1;
            Err(())
        } else {
            // A Not-ECT packet in ECN nodrop mode is queued.
            Ok(())
        }
    }

    fn xstats_now(&self) -> RedXstats {
        RedXstats {
            early: self.prob_drop + self.forced_drop,
            pdrop: self.pdrop,
            other: 0,
            marked: self.prob_mark + self.forced_mark,
        }
    }
}

impl Qdisc for Red {
    fn kind(&self) -> &'static str {
        "red"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (true).then(|| crate::snapshot::save(self)).flatten()
    }

    /// `red_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.run_adapt_timer(cx.now);
        self.vars.qavg = self
            .vars
            .calc_qavg(&self.parms, self.child_backlog(), cx.now);
        self.vars.idle_since = None;
        let qavg = self.vars.qavg;
        let rng = &mut self.rng;
        let action = self
            .vars
            .action(&self.parms, qavg, &mut || (splitmix64(rng) >> 32) as u32);
        if self.decide(action, &mut pkt).is_err() {
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Aqm);
            return Verdict::Cn;
        }
        let len = pkt.len;
        let Some(child) = self.child.as_mut() else {
            // `noop_enqueue`.
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Unclassified);
            return Verdict::Cn;
        };
        let mark = cx.tree_reduced;
        let v = child.q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        if v == Verdict::Success {
            self.stats.backlog += len;
            self.stats.qlen += 1;
        } else if v.counts_drop() {
            self.pdrop += 1;
            self.stats.drops += 1;
        }
        v
    }

    /// `red_dequeue`: the child's head; an empty queue starts an idle period.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.run_adapt_timer(cx.now);
        let mark = cx.tree_reduced;
        let p = self.child.as_mut().and_then(|c| c.q.dequeue(cx));
        self.stats.reduce(cx.reduced_since(mark));
        match &p {
            Some(p) => {
                self.stats.bytes += p.len as u64;
                self.stats.packets += p.bstats_packets();
                self.stats.backlog = self.stats.backlog.saturating_sub(p.len);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
            }
            None => {
                if self.vars.idle_since.is_none() {
                    self.vars.idle_since = Some(cx.now);
                }
            }
        }
        p
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.child.as_mut()?.q.peek(cx)
    }

    /// `red_reset`.
    fn reset(&mut self) {
        if let Some(c) = self.child.as_mut() {
            c.q.reset();
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.vars.restart();
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::Red(self.xstats_now()))
    }

    /// `red_dump`: the options, `max_P` as adaptive RED has moved it.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Red(RedOptions {
            max_p: self.parms.max_p,
            stab: Vec::new(),
            ..self.opts.clone()
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Red(o) => self.apply(o, now).map(|_| Vec::new()),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn set_seed(&mut self, seed: u64) {
        self.rng = seed ^ 0x52_4544;
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

/// RED has one class, `handle:1`, whose leaf is the queue. `red_find` returns it for any classid, so a
/// child grafted at `parent 6:` (mininet's TCLink writes that under its RED) or `6:5` lands there too;
/// the class is listed as `6:1` (`red_dump_class`).
impl ClassOps for Red {
    fn find(&self, _classid: Handle) -> bool {
        true
    }
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.find(classid).then_some(())?;
        self.child.as_ref()
    }
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.find(classid).then_some(())?;
        self.child.as_mut()
    }
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        if !self.find(classid) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified class not found",
            ));
        }
        Ok(super::one_child_graft(
            &mut self.child,
            &mut self.stats,
            new,
        ))
    }
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: &ClassOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn delete_class(&mut self, _: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        super::one_child_walk("red", self.handle, &self.child)
    }
    fn children(&self) -> Vec<&Sched> {
        self.child.iter().collect()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.child.iter_mut().collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "red",
    create: |handle, opts, _env, now| match opts {
        QdiscOptions::Red(o) => Ok((Box::new(Red::new(handle, o, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
