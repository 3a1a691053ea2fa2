//! teql, the "true link equalizer" (`sch_teql.c`), as far as one device sees it.
//!
//! In the kernel, loading the module makes a master device `teql0` and a qdisc kind of the same name;
//! each device that takes `teql0` as its root becomes a slave, and the master sends its packets round
//! robin over its slaves. On a slave, the qdisc is a plain FIFO of `txqueuelen` packets (the length
//! when it was made, here; the kernel reads the device's current one), drop-tail, whose `peek` finds
//! nothing (it is meant to be a root). tclab has no master device: packets sent to a slave directly
//! queue in that FIFO, and nothing equalizes across devices. The kernel's refusal of `teql0` anywhere
//! but at the root, and of a slave whose header or MTU do not fit the master, need the parent and the
//! master, which a tclab qdisc does not see: not made. It has no options, and no `change`.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use std::collections::VecDeque;

pub struct Teql {
    limit: u32,
    queue: VecDeque<Packet>,
    stats: QdiscStats,
}

impl Qdisc for Teql {
    fn kind(&self) -> &'static str {
        "teql0"
    }

    /// `teql_enqueue`: below the device's queue length, else a drop.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        if (self.queue.len() as u32) < self.limit {
            self.stats.count_queued(&pkt);
            self.queue.push_back(pkt);
            return Verdict::Success;
        }
        self.stats.drops += 1;
        cx.drop_arriving(pkt, DropReason::TailDrop);
        Verdict::Drop
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Option<Packet> {
        let pkt = self.queue.pop_front()?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        Some(pkt)
    }

    /// `teql_peek`: nothing (teql is meant to be a root).
    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        None
    }

    fn reset(&mut self) {
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Teql
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(super::change_not_supported())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "teql0",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Teql => Ok((
            Box::new(Teql {
                limit: env.txqueuelen,
                queue: VecDeque::new(),
                stats: QdiscStats::default(),
            }),
            Vec::new(),
        )),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_of_txqueuelen_packets_that_peeks_nothing() {
        let env = DevEnv {
            txqueues: 1,
            txqueuelen: 3,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        };
        let (mut q, _) =
            (KIND.create)(crate::handle::Handle(0x10000), &QdiscOptions::Teql, &env, 0).unwrap();
        let mut cx = Cx::new(0);
        let v: Vec<_> = (0..4u64)
            .map(|tag| {
                q.enqueue(
                    Packet {
                        tag,
                        ..Packet::of_len(100)
                    },
                    &mut cx,
                )
            })
            .collect();
        assert_eq!(v[..3], [Verdict::Success; 3]);
        assert_eq!(v[3], Verdict::Drop, "the fourth is over txqueuelen 3");
        assert!(q.peek(&mut cx).is_none());
        let tags: Vec<_> = std::iter::from_fn(|| q.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        assert_eq!(tags, [0, 1, 2]);
        assert_eq!((q.stats().drops, q.stats().packets), (1, 3));
    }
}
