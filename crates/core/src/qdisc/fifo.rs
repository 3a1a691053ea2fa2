//! pfifo, bfifo and pfifo_head_drop — the simplest queues, after `net/sched/sch_fifo.c`.
//!
//! Packets leave in the order they came. The only parameter is the limit: a number of packets for pfifo
//! and pfifo_head_drop, a number of bytes for bfifo. pfifo and bfifo drop a packet that would exceed it at
//! the tail (the arriving one), so the queue never holds more than `limit`. pfifo_head_drop
//! (`pfifo_tail_enqueue`) keeps the arriving packet and drops the oldest instead: the queue holds the
//! newest `limit` packets, so under overload a packet waits at most `limit` arrivals rather than `limit`
//! transmissions. That head drop counts in `drops`, the backlog changes by the two lengths' difference,
//! which the ancestors take off theirs too (`qdisc_tree_reduce_backlog(sch, 0, …)`), and the answer is
//! NET_XMIT_CN; with `limit 0` the arriving packet is dropped (the kernel's fix of 2025: there is no head
//! to drop). Without an explicit limit the kernel takes the device's `txqueuelen` in packets, or
//! `txqueuelen * (mtu + link header)` bytes for bfifo — which is why a default HTB leaf on a 1000-packet
//! device can hold more than a minute of traffic at 180 kbit (seed 000).
//!
//! The same struct serves as the invisible default child the kernel creates under classes (HTB leaves, TBF).

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FifoOptions {
    /// Packets (pfifo) or bytes (bfifo); `None` takes the device default.
    pub limit: Option<u32>,
}

/// What the limit counts, and which packet goes when it is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FifoUnit {
    /// pfifo: packets; the arriving one is dropped.
    Packets,
    /// bfifo: bytes; the arriving one is dropped.
    Bytes,
    /// pfifo_head_drop: packets; the oldest one is dropped.
    PacketsHeadDrop,
}

#[derive(Serialize, Deserialize)]
pub struct Fifo {
    // parameters
    unit: FifoUnit,
    limit: u32,
    // state
    /// The packets in their boxes ([`Qdisc::enqueue_skb`]): a packet moves in and out as a pointer.
    #[serde(skip)]
    queue: VecDeque<Box<Packet>>,
    stats: QdiscStats,
}

impl Fifo {
    pub fn new(unit: FifoUnit, opts: &FifoOptions, env: &DevEnv) -> Fifo {
        let mut q = Fifo {
            unit,
            limit: 0,
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
        };
        q.limit = q.resolve_limit(opts, env);
        q
    }

    /// The invisible child a class starts with: `qdisc_create_dflt(…, &pfifo_qdisc_ops, classid)`, a pfifo
    /// of `tx_queue_len` packets with handle 0 whose parent is the class (DRR, ETS, QFQ).
    pub fn default_child(classid: u32, env: &DevEnv) -> super::Sched {
        super::Sched::new(
            crate::handle::Handle::UNSPEC,
            crate::handle::Handle(classid),
            Box::new(Fifo::pfifo(env.txqueuelen)),
        )
    }

    /// A pfifo with an explicit limit, as `fifo_create_dflt` makes for classes.
    pub fn pfifo(limit: u32) -> Fifo {
        Fifo {
            unit: FifoUnit::Packets,
            limit,
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
        }
    }

    pub fn bfifo(limit: u32) -> Fifo {
        Fifo {
            unit: FifoUnit::Bytes,
            limit,
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
        }
    }

    fn resolve_limit(&self, opts: &FifoOptions, env: &DevEnv) -> u32 {
        opts.limit.unwrap_or(match self.unit {
            FifoUnit::Packets | FifoUnit::PacketsHeadDrop => env.txqueuelen,
            FifoUnit::Bytes => env.txqueuelen.saturating_mul(env.psched_mtu()),
        })
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    fn fits(&self, pkt: &Packet) -> bool {
        match self.unit {
            FifoUnit::Packets | FifoUnit::PacketsHeadDrop => self.stats.qlen < self.limit,
            FifoUnit::Bytes => self.stats.backlog as u64 + pkt.len as u64 <= self.limit as u64,
        }
    }

    /// `pfifo_tail_enqueue` on a full queue: the oldest packet is dropped (`__qdisc_queue_drop_head`,
    /// counted by `qdisc_qstats_drop`) and the arriving one queued. qlen is unchanged, so the ancestors
    /// keep theirs and take off only the bytes' difference; NET_XMIT_CN makes them count the drop.
    fn drop_head_for(&mut self, pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        let Some(head) = self.queue.pop_front() else {
            // qlen counts this queue, so a full one has a head; were it empty, drop the arrival.
            cx.drop_arriving_skb(pkt, DropReason::TailDrop);
            return Verdict::Drop;
        };
        self.stats.count_unqueued(&head);
        self.stats.drops += 1;
        cx.reduce_backlog(0, head.len as i64 - pkt.len as i64);
        self.stats.count_queued(&pkt);
        self.queue.push_back(pkt);
        cx.drop_queued_skb(head, DropReason::HeadDrop);
        Verdict::Cn
    }
}

impl Qdisc for Fifo {
    fn kind(&self) -> &'static str {
        match self.unit {
            FifoUnit::Packets => "pfifo",
            FifoUnit::Bytes => "bfifo",
            FifoUnit::PacketsHeadDrop => "pfifo_head_drop",
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.queue
            .is_empty()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    super::by_value_through_boxes!();

    fn enqueue_skb(&mut self, pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        if !self.fits(&pkt) {
            // pfifo_head_drop makes room, unless its limit is 0: then, as the others, it drops the arrival.
            if self.unit == FifoUnit::PacketsHeadDrop && self.limit > 0 {
                return self.drop_head_for(pkt, cx);
            }
            self.stats.drops += 1;
            cx.drop_arriving_skb(pkt, DropReason::TailDrop);
            return Verdict::Drop;
        }
        self.stats.count_queued(&pkt);
        self.queue.push_back(pkt);
        Verdict::Success
    }

    fn dequeue_skb(&mut self, _cx: &mut Cx) -> Option<Box<Packet>> {
        let pkt = self.queue.pop_front()?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.queue.front().map(|b| &**b)
    }

    fn reset(&mut self) {
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn qlen(&self) -> u32 {
        self.stats.qlen
    }

    fn dequeue_idle(&self) -> bool {
        self.queue.is_empty()
    }

    fn dump(&self) -> QdiscOptions {
        let o = FifoOptions {
            limit: Some(self.limit),
        };
        match self.unit {
            FifoUnit::Packets => QdiscOptions::Pfifo(o),
            FifoUnit::Bytes => QdiscOptions::Bfifo(o),
            FifoUnit::PacketsHeadDrop => QdiscOptions::PfifoHeadDrop(o),
        }
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let o = match (self.unit, opts) {
            (FifoUnit::Packets, QdiscOptions::Pfifo(o))
            | (FifoUnit::Bytes, QdiscOptions::Bfifo(o))
            | (FifoUnit::PacketsHeadDrop, QdiscOptions::PfifoHeadDrop(o)) => o,
            _ => return Err(KernelError::new(Errno::Invalid)),
        };
        self.limit = self.resolve_limit(o, env);
        Ok(Vec::new())
    }

    fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }
}

/// `pfifo`: a limit in packets.
pub const PFIFO: super::QdiscKind = super::QdiscKind {
    name: "pfifo",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Pfifo(o) => Ok((Box::new(Fifo::new(FifoUnit::Packets, o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

/// `pfifo_head_drop`: a limit in packets, the oldest dropped to admit the newest.
pub const PFIFO_HEAD_DROP: super::QdiscKind = super::QdiscKind {
    name: "pfifo_head_drop",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::PfifoHeadDrop(o) => Ok((
            Box::new(Fifo::new(FifoUnit::PacketsHeadDrop, o, env)),
            Vec::new(),
        )),
        _ => Err(super::wrong_kind()),
    },
};

/// `bfifo`: a limit in bytes.
pub const BFIFO: super::QdiscKind = super::QdiscKind {
    name: "bfifo",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Bfifo(o) => Ok((Box::new(Fifo::new(FifoUnit::Bytes, o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: DevEnv = DevEnv {
        txqueues: 1,
        txqueuelen: 1000,
        mtu: 1500,
        hard_header_len: 14,
        speed: 0,
        taprio_offload: false,
    };

    #[test]
    fn pfifo_drops_the_arrival_beyond_limit_and_keeps_order() {
        let mut q = Fifo::new(FifoUnit::Packets, &FifoOptions { limit: Some(3) }, &ENV);
        let mut cx = Cx::new(0);
        for i in 0..5 {
            let v = q.enqueue(
                Packet {
                    tag: i,
                    len: 100,
                    ..Default::default()
                },
                &mut cx,
            );
            assert_eq!(
                v,
                if i < 3 {
                    Verdict::Success
                } else {
                    Verdict::Drop
                },
                "packet {i}"
            );
        }
        assert_eq!(q.stats().drops, 2);
        assert_eq!(q.stats().backlog, 300);
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        assert_eq!(
            order,
            vec![0, 1, 2],
            "FIFO order, the late arrivals dropped"
        );
        assert_eq!(
            (q.stats().packets, q.stats().bytes, q.stats().qlen),
            (3, 300, 0)
        );
    }

    /// Hand-derived from sch_fifo.c's `pfifo_tail_enqueue`: with `limit 3`, packets 0-2 are queued
    /// (NET_XMIT_SUCCESS); packets 3 and 4 each find the queue full, so the head (0, then 1) is dropped
    /// (`__qdisc_queue_drop_head`, one drop each) and the arrival queued, answered NET_XMIT_CN. The
    /// backlog is the newest three's bytes, and the ancestors are told the bytes' difference with no
    /// packet (`qdisc_tree_reduce_backlog(sch, 0, prev_backlog - backlog)`).
    #[test]
    fn pfifo_head_drop_drops_the_oldest_and_keeps_the_newest() {
        let mut q = Fifo::new(
            FifoUnit::PacketsHeadDrop,
            &FifoOptions { limit: Some(3) },
            &ENV,
        );
        let mut cx = Cx::new(0);
        let verdicts: Vec<Verdict> = (0..5u64)
            .map(|i| {
                let p = Packet {
                    tag: i,
                    len: 100 * (i as u32 + 1),
                    ..Default::default()
                };
                q.enqueue_skb(Box::new(p), &mut cx)
            })
            .collect();
        use Verdict::{Cn, Success};
        assert_eq!(verdicts, [Success, Success, Success, Cn, Cn]);
        let s = q.stats();
        assert_eq!((s.drops, s.qlen, s.backlog), (2, 3, 300 + 400 + 500));
        // 400 in for 100 out, 500 in for 200 out: the ancestors' bytes grow by 600, their qlen stays.
        assert_eq!(cx.tree_reduced, (0, (100 - 400) + (200 - 500)));
        let gone: Vec<(u64, DropReason, bool)> = cx
            .drops
            .take()
            .into_iter()
            .map(|d| (d.pkt.tag, d.reason, d.arriving))
            .collect();
        assert_eq!(
            gone,
            [
                (0, DropReason::HeadDrop, false),
                (1, DropReason::HeadDrop, false)
            ],
            "the two oldest, queued packets, not the arrivals"
        );
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        assert_eq!(order, [2, 3, 4], "the newest three, in order");
        assert_eq!((q.stats().packets, q.stats().bytes), (3, 1200));
    }

    #[test]
    fn pfifo_head_drop_with_limit_0_drops_the_arrival_and_defaults_to_txqueuelen() {
        // The kernel's 2025 fix (647cef20e649): with limit 0 there is no head, the arrival is dropped.
        let opts = FifoOptions { limit: Some(0) };
        let mut q = Fifo::new(FifoUnit::PacketsHeadDrop, &opts, &ENV);
        let mut cx = Cx::new(0);
        assert_eq!(q.enqueue(Packet::of_len(100), &mut cx), Verdict::Drop);
        assert_eq!((q.stats().drops, q.stats().qlen), (1, 0));
        let d = cx.drops.take();
        assert!(d.len() == 1 && d[0].arriving && d[0].reason == DropReason::TailDrop);
        let q = Fifo::new(FifoUnit::PacketsHeadDrop, &FifoOptions::default(), &ENV);
        assert_eq!(q.limit(), 1000, "fifo_hd_init: tx_queue_len packets");
        assert_eq!(q.kind(), "pfifo_head_drop");
        assert_eq!(
            q.dump(),
            QdiscOptions::PfifoHeadDrop(FifoOptions { limit: Some(1000) })
        );
    }

    #[test]
    fn bfifo_counts_bytes_and_defaults_to_txqueuelen_times_link_mtu() {
        let q = Fifo::new(FifoUnit::Bytes, &FifoOptions::default(), &ENV);
        assert_eq!(
            q.limit(),
            1000 * 1514,
            "sch_fifo.c: tx_queue_len * psched_mtu(dev)"
        );
        let mut q = Fifo::new(FifoUnit::Bytes, &FifoOptions { limit: Some(3000) }, &ENV);
        let mut cx = Cx::new(0);
        assert_eq!(q.enqueue(Packet::of_len(1500), &mut cx), Verdict::Success);
        assert_eq!(q.enqueue(Packet::of_len(1500), &mut cx), Verdict::Success);
        assert_eq!(
            q.enqueue(Packet::of_len(1), &mut cx),
            Verdict::Drop,
            "3001 bytes exceed 3000"
        );
    }
}
