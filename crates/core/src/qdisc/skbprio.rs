//! skbprio — SKB priority queue, after `net/sched/sch_skbprio.c`.
//!
//! A FIFO per `skb->priority` (0 … 63; larger priorities count as 63) under one packet limit (64 by
//! default). Dequeue always serves the highest non-empty priority. When the qdisc is full, an arriving
//! packet does not simply fall off the tail: if its priority is higher than the lowest one queued, the
//! newest packet of that lowest priority is dropped to make room (the enqueue answers `NET_XMIT_CN`);
//! otherwise the arriving packet is dropped. It was designed as a DoS defence: under attack the queue
//! fills with the packets a classifier marked most valuable. The highest and lowest busy priorities are
//! tracked as the kernel tracks them, so the common paths cost O(1) and only emptying a priority scans.
//!
//! `tc class show` lists 64 classes (`handle:1` … `handle:40`), one per priority, with no options and only
//! queue counters (drops, overlimits, backlog); they cannot be changed, grafted or given filters.

use super::{ClassInfo, ClassOps, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, PeekDequeued, Peeked, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `SKBPRIO_MAX_PRIORITY`.
pub const MAX_PRIORITY: usize = 64;

/// `struct tc_skbprio_qopt`, sent only when tc is given a `limit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkbprioOptions {
    pub limit: Option<u32>,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the per-priority counters and the
/// highest and lowest priorities seen.
#[derive(Serialize, Deserialize)]
pub struct Skbprio {
    handle: Handle,
    limit: u32,
    #[serde(skip, default = "no_queues")]
    queues: Vec<VecDeque<Packet>>,
    /// Per priority: backlog, drops, overlimits (`q->qstats`).
    qstats: Vec<QdiscStats>,
    highest: usize,
    lowest: usize,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
}

/// One empty queue per priority.
fn no_queues() -> Vec<VecDeque<Packet>> {
    vec![VecDeque::new(); MAX_PRIORITY]
}

impl Skbprio {
    /// `skbprio_init`.
    pub fn new(handle: Handle, o: &SkbprioOptions) -> Skbprio {
        Skbprio {
            handle,
            limit: o.limit.unwrap_or(64),
            queues: vec![VecDeque::new(); MAX_PRIORITY],
            qstats: vec![QdiscStats::default(); MAX_PRIORITY],
            highest: 0,
            lowest: MAX_PRIORITY - 1,
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        }
    }

    /// `calc_new_high_prio`.
    fn new_high(&self) -> usize {
        (self.lowest..self.highest)
            .rev()
            .find(|&p| !self.queues[p].is_empty())
            .unwrap_or(0)
    }

    /// `calc_new_low_prio`.
    fn new_low(&self) -> usize {
        (self.lowest + 1..=self.highest)
            .find(|&p| !self.queues[p].is_empty())
            .unwrap_or(MAX_PRIORITY - 1)
    }

    fn queue(&mut self, prio: usize, pkt: Packet) {
        self.stats.backlog = self.stats.backlog.wrapping_add(pkt.len);
        self.qstats[prio].backlog = self.qstats[prio].backlog.wrapping_add(pkt.len);
        self.queues[prio].push_back(pkt);
    }

    fn count_drop(&mut self, prio: usize) {
        self.stats.drops += 1;
        self.qstats[prio].drops += 1;
        self.qstats[prio].overlimits += 1;
    }
}

impl PeekDequeued for Skbprio {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }

    /// `skbprio_dequeue`.
    fn dequeue_fresh(&mut self, _cx: &mut Cx) -> Option<Packet> {
        let hp = self.highest;
        let pkt = self.queues[hp].pop_front()?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        self.qstats[hp].backlog = self.qstats[hp].backlog.wrapping_sub(pkt.len);
        if self.queues[hp].is_empty() {
            if self.lowest == self.highest {
                self.highest = 0;
                self.lowest = MAX_PRIORITY - 1;
            } else {
                self.highest = self.new_high();
            }
        }
        Some(pkt)
    }
}

impl Qdisc for Skbprio {
    fn kind(&self) -> &'static str {
        "skbprio"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.queues.iter().all(VecDeque::is_empty) && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `skbprio_enqueue`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let prio = (pkt.priority as usize).min(MAX_PRIORITY - 1);
        if self.stats.qlen < self.limit {
            self.queue(prio, pkt);
            self.highest = self.highest.max(prio);
            self.lowest = self.lowest.min(prio);
            self.stats.qlen += 1;
            return Verdict::Success;
        }
        let lp = self.lowest;
        if prio <= lp {
            self.count_drop(prio);
            cx.drop_arriving(pkt, DropReason::Overlimit);
            return Verdict::Drop;
        }
        self.queue(prio, pkt);
        let Some(gone) = self.queues[lp].pop_back() else {
            // The kernel's BUG_ON: the lowest priority is always busy when the qdisc is full.
            return Verdict::Success;
        };
        self.stats.backlog = self.stats.backlog.wrapping_sub(gone.len);
        self.qstats[lp].backlog = self.qstats[lp].backlog.wrapping_sub(gone.len);
        self.count_drop(lp);
        // One in, one out: qlen is unchanged; the parents hear of the drop through the verdict (CN).
        cx.drop_queued(gone, DropReason::Overlimit);
        if self.queues[lp].is_empty() {
            if self.lowest == self.highest {
                self.lowest = prio;
                self.highest = prio;
            } else {
                self.lowest = self.new_low();
            }
        }
        self.highest = self.highest.max(prio);
        Verdict::Cn
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    /// `skbprio_reset`: the per-priority counters are cleared too.
    fn reset(&mut self) {
        self.queues.iter_mut().for_each(VecDeque::clear);
        self.qstats
            .iter_mut()
            .for_each(|s| *s = QdiscStats::default());
        self.highest = 0;
        self.lowest = MAX_PRIORITY - 1;
        self.peeked.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Skbprio(SkbprioOptions {
            limit: Some(self.limit),
        })
    }

    /// `skbprio_change`: the limit (tc sends options only with one).
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Skbprio(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        if let Some(l) = o.limit {
            self.limit = l;
        }
        Ok(Vec::new())
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }

    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

/// `skbprio_class_ops`: a walk and counters; `find` finds nothing, so nothing else applies.
impl super::FlowClasses for Skbprio {
    /// `skbprio_walk` + `skbprio_dump_class_stats`: per priority, queue counters only.
    fn flow_walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        (0..MAX_PRIORITY)
            .map(|p| ClassInfo {
                kind: "skbprio",
                classid: Handle(self.handle.0 | (p as u32 + 1)),
                parent: self.handle,
                leaf: None,
                options: None,
                stats: self.qstats[p],
                htb_xstats: None,
                xstats: None,
            })
            .collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "skbprio",
    create: |handle, opts, _env, _now| match opts {
        QdiscOptions::Skbprio(o) => Ok((Box::new(Skbprio::new(handle, o)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(priority: u32, tag: u64) -> Packet {
        Packet {
            priority,
            tag,
            ..Packet::of_len(100)
        }
    }

    #[test]
    fn full_queue_drops_the_newest_of_the_lowest_priority() {
        let mut q = Skbprio::new(Handle::new(1, 0), &SkbprioOptions { limit: Some(3) });
        let mut cx = Cx::new(0);
        for (prio, tag) in [(5, 1), (5, 2), (9, 3)] {
            assert_eq!(q.enqueue(pkt(prio, tag), &mut cx), Verdict::Success);
        }
        // Full. Priority 5 is the lowest queued: a priority-2 packet is dropped itself…
        assert_eq!(q.enqueue(pkt(2, 4), &mut cx), Verdict::Drop);
        // …a priority-7 one pushes out the newest priority-5 packet (tag 2).
        assert_eq!(q.enqueue(pkt(7, 5), &mut cx), Verdict::Cn);
        let dropped: Vec<u64> = cx.drops.iter().map(|d| d.pkt.tag).collect();
        assert_eq!(dropped, [4, 2]);
        // 100 → 63: anything above 63 is 63, the highest, served first. Full again: 5's last goes.
        assert_eq!(q.enqueue(pkt(100, 6), &mut cx), Verdict::Cn);
        let mut out = Vec::new();
        while let Some(p) = q.dequeue(&mut cx) {
            out.push(p.tag);
        }
        assert_eq!(out, [6, 3, 5]);
        let s = q.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 3, 3));
        assert_eq!(q.walk(0)[5].stats.drops, 2);
    }
}
