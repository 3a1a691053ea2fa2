//! pfifo and bfifo — the simplest queues, after `net/sched/sch_fifo.c`.
//!
//! Packets leave in the order they came. The only parameter is the limit: a number of packets for pfifo, a
//! number of bytes for bfifo. A packet that would exceed it is dropped at the tail (the arriving one), so
//! the queue never holds more than `limit`. Without an explicit limit the kernel takes the device's
//! `txqueuelen` in packets, or `txqueuelen * (mtu + link header)` bytes for bfifo — which is why a default
//! HTB leaf on a 1000-packet device can hold more than a minute of traffic at 180 kbit (seed 000).
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FifoUnit {
    Packets,
    Bytes,
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
            FifoUnit::Packets => env.txqueuelen,
            FifoUnit::Bytes => env.txqueuelen.saturating_mul(env.psched_mtu()),
        })
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    fn fits(&self, pkt: &Packet) -> bool {
        match self.unit {
            FifoUnit::Packets => self.stats.qlen < self.limit,
            FifoUnit::Bytes => self.stats.backlog as u64 + pkt.len as u64 <= self.limit as u64,
        }
    }
}

impl Qdisc for Fifo {
    fn kind(&self) -> &'static str {
        match self.unit {
            FifoUnit::Packets => "pfifo",
            FifoUnit::Bytes => "bfifo",
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

    fn dump(&self) -> QdiscOptions {
        let o = FifoOptions {
            limit: Some(self.limit),
        };
        match self.unit {
            FifoUnit::Packets => QdiscOptions::Pfifo(o),
            FifoUnit::Bytes => QdiscOptions::Bfifo(o),
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
            | (FifoUnit::Bytes, QdiscOptions::Bfifo(o)) => o,
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
