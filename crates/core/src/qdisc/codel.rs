//! `codel` — one FIFO under the CoDel control law, after `net/sched/sch_codel.c`.
//!
//! Packets are stamped when they arrive and queued in order; the only enqueue-time drop is the tail drop
//! at `limit` packets (counted as `drop_overlimit`), which with CoDel in charge should never happen. Every
//! decision is made at dequeue: [`codel_dequeue`] looks at the head packet's sojourn time and, once it has
//! stayed above `target` for an `interval`, drops (or, with `ecn`, marks) at the rising rate of the control
//! law until the standing queue is gone (see `codel_impl.rs` for the algorithm and its arithmetic).
//!
//! Packets dropped at dequeue are handed to the driver in `Cx::drops` (reason AQM) and taken off the
//! ancestors' counters (`qdisc_tree_reduce_backlog`). A parent that must know the next packet before it
//! commits (TBF, DRR) peeks with `qdisc_peek_dequeued`: the packet is chosen — CoDel's decisions made —
//! and held until the next dequeue.

use super::codel_impl::{
    codel_dequeue, codel_to_us, us_to_codel, CodelParams, CodelQueue, CodelStats, CodelVars,
    CODEL_DISABLED_THRESHOLD,
};
use super::PeekDequeued;
use super::{Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `DEFAULT_CODEL_LIMIT`.
pub const DEFAULT_LIMIT: u32 = 1000;

/// What tc sends (`TCA_CODEL_*`): each attribute present or not; times in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodelOptions {
    pub limit: Option<u32>,
    pub target: Option<u32>,
    pub interval: Option<u32>,
    pub ecn: Option<bool>,
    pub ce_threshold: Option<u32>,
}

/// `struct tc_codel_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelXstats {
    pub maxpacket: u32,
    pub count: u32,
    pub lastcount: u32,
    /// Microseconds.
    pub ldelay: u32,
    /// Microseconds from now to the next scheduled drop (negative: overdue), when dropping.
    pub drop_next: i32,
    pub drop_overlimit: u32,
    pub ecn_mark: u32,
    pub dropping: bool,
    pub ce_mark: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued; its control state (dropping, count, the
/// next drop's time) comes with it.
#[derive(Serialize, Deserialize)]
pub struct Codel {
    limit: u32,
    params: CodelParams,
    vars: CodelVars,
    cstats: CodelStats,
    drop_overlimit: u32,
    #[serde(skip)]
    queue: VecDeque<Packet>,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
    /// The last time the qdisc was called: `drop_next` in the statistics is relative to it.
    last_now: Nanos,
}

/// The queue CoDel dequeues from: the FIFO and the qdisc's counters; drops go to the call's drop list.
struct Fifo<'a> {
    queue: &'a mut VecDeque<Packet>,
    stats: &'a mut QdiscStats,
    cx: &'a mut Cx,
}

impl CodelQueue for Fifo<'_> {
    type Pkt = Packet;
    fn dequeue(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        self.stats.count_unqueued(&p);
        Some(p)
    }
    fn backlog(&self) -> u32 {
        self.stats.backlog
    }
    fn drop(&mut self, pkt: Packet) {
        self.stats.drops += 1;
        self.cx.drop_queued(pkt, DropReason::Aqm);
    }
}

/// Validate then apply `TCA_CODEL_*` (`codel_change` has no refusals beyond netlink's).
fn apply(limit: &mut u32, params: &mut CodelParams, o: &CodelOptions) {
    if let Some(t) = o.target {
        params.target = us_to_codel(t);
    }
    if let Some(c) = o.ce_threshold {
        params.ce_threshold = us_to_codel(c);
    }
    if let Some(i) = o.interval {
        params.interval = us_to_codel(i);
    }
    if let Some(l) = o.limit {
        *limit = l;
    }
    if let Some(e) = o.ecn {
        params.ecn = e;
    }
}

impl Codel {
    pub fn new(o: &CodelOptions, env: &DevEnv) -> Codel {
        let mut q = Codel {
            limit: DEFAULT_LIMIT,
            params: CodelParams::new(env.psched_mtu().min(1 << 20)),
            vars: CodelVars::default(),
            cstats: CodelStats::default(),
            drop_overlimit: 0,
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
            last_now: 0,
        };
        apply(&mut q.limit, &mut q.params, o);
        q
    }

    /// `codel_qdisc_dequeue`, after the held packet.
    fn dequeue_inner(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.last_now = cx.now;
        let now = cx.now;
        let mut fifo = Fifo {
            queue: &mut self.queue,
            stats: &mut self.stats,
            cx,
        };
        let pkt = codel_dequeue(
            &mut fifo,
            &self.params,
            &mut self.vars,
            &mut self.cstats,
            now,
        );
        if self.cstats.drop_count > 0 {
            cx.reduce_backlog(self.cstats.drop_count as i64, self.cstats.drop_len as i64);
            self.cstats.drop_count = 0;
            self.cstats.drop_len = 0;
        }
        if let Some(p) = &pkt {
            self.stats.count_sent(p);
        }
        pkt
    }
}

impl PeekDequeued for Codel {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }
    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_inner(cx)
    }
}

impl Qdisc for Codel {
    fn kind(&self) -> &'static str {
        "codel"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.queue.is_empty() && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `codel_qdisc_enqueue`: stamp and queue, or tail-drop at the limit.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.last_now = cx.now;
        if self.stats.qlen < self.limit {
            pkt.enqueue_ns = cx.now;
            self.stats.count_queued(&pkt);
            self.queue.push_back(pkt);
            return Verdict::Success;
        }
        self.drop_overlimit += 1;
        self.stats.drops += 1;
        cx.drop_arriving(pkt, DropReason::Overlimit);
        Verdict::Drop
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    /// `qdisc_peek_dequeued`: the packet is chosen (the discipline's decisions made) and held.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    fn reset(&mut self) {
        self.peeked.clear();
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.vars = CodelVars::default();
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Codel(CodelOptions {
            limit: Some(self.limit),
            target: Some(codel_to_us(self.params.target)),
            interval: Some(codel_to_us(self.params.interval)),
            ecn: Some(self.params.ecn),
            ce_threshold: (self.params.ce_threshold != CODEL_DISABLED_THRESHOLD)
                .then(|| codel_to_us(self.params.ce_threshold)),
        })
    }

    /// `codel_change`: apply, then drop from the head until the queue fits the new limit.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Codel(o) = opts else {
            return Err(KernelError::invalid("Invalid qdisc name"));
        };
        apply(&mut self.limit, &mut self.params, o);
        while self.stats.qlen > self.limit {
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            self.stats.count_unqueued(&p);
            self.stats.drops += 1;
        }
        Ok(Vec::new())
    }

    /// `codel_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        let x = CodelXstats {
            maxpacket: self.cstats.maxpacket,
            count: self.vars.count,
            lastcount: self.vars.lastcount,
            ldelay: codel_to_us(self.vars.ldelay),
            drop_next: self.vars.drop_next_us(self.last_now),
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.cstats.ecn_mark,
            dropping: self.vars.dropping,
            ce_mark: self.cstats.ce_mark,
        };
        Some(Xstats::Codel(x))
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "codel",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Codel(o) => Ok((Box::new(Codel::new(o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
