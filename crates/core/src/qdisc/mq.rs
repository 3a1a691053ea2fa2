//! `mq` — one qdisc per transmit queue of a multiqueue device, after `net/sched/sch_mq.c`.
//!
//! A NIC with several transmit queues (one per CPU, typically) lets each CPU queue packets without taking
//! a lock shared with the others. `mq` is the root that exposes them: it has a class `handle:N` for each
//! queue N (1-based), each with its own qdisc — at first the device's default qdisc (pfifo_fast here),
//! listed by `tc qdisc show` with handle `0:` — and that is where an ISP's tree goes: LibreQoS puts an
//! HTB under every `7FFF:N`, with each circuit's class in one of them.
//!
//! `dev_queue_xmit` picks the queue of a packet (`skb_tx_hash`: the flow hash scaled to the number of
//! queues, so a flow keeps to one queue) and enqueues on that queue's qdisc directly; `mq` itself queues
//! nothing and its counters are the sum of its children's. tclab gives the choice to `mq`'s enqueue, with
//! the flow hash keyed by the run's seed, and its dequeue serves the queues in turn, as the NIC's rings
//! share the one wire.
//!
//! `mq` must be the root (`EOPNOTSUPP` otherwise) of a device with more than one queue (`ip link add …
//! numtxqueues N`); a qdisc deleted from a queue leaves `noop` there (every packet dropped), as the kernel
//! does, until another is grafted.

use super::pfifo_fast::PfifoFast;
use super::{
    ClassInfo, ClassOps, Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Sched, Verdict,
};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::{flow_hash, splitmix64};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;

#[derive(serde::Serialize)]
pub struct Mq {
    handle: Handle,
    /// The kind its classes are listed as (taprio lists mq's queues as its own).
    class_kind: &'static str,
    queues: Vec<Sched>,
    /// The queue served next.
    next: usize,
    secret: [u64; 2],
}

/// `noop_qdisc`: what a queue holds after its qdisc is deleted (mq, multiq).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Noop;

impl Qdisc for Noop {
    fn kind(&self) -> &'static str {
        "noop"
    }
    /// Holds nothing, ever.
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        cx.drop_arriving(pkt, DropReason::TailDrop);
        Verdict::Cn
    }
    fn dequeue(&mut self, _cx: &mut Cx) -> Option<Packet> {
        None
    }
    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        None
    }
    fn reset(&mut self) {}
    fn stats(&self) -> QdiscStats {
        QdiscStats::default()
    }
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Noqueue
    }
    fn change(
        &mut self,
        _: &QdiscOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
}

/// `netdev_pick_tx`: the transmit queue (0-based) of `pkt` on a device with `queues` queues — the one an
/// action chose, if the device has it (`act_skbedit` checks `real_num_tx_queues`), else `skb_tx_hash`:
/// the packet's flow hash (`skb_get_hash`: the one it carries, or computed with `secret`) scaled to the
/// queues, so that a flow keeps to one queue.
pub(crate) fn pick_tx(pkt: &Packet, queues: usize, secret: [u64; 2]) -> usize {
    match pkt.queue_mapping() {
        Some(q) if (q as usize) < queues => q as usize,
        _ => ((flow_hash(pkt, secret) as u64 * queues as u64) >> 32) as usize,
    }
}

impl Mq {
    /// `mq_init`: a default qdisc for every transmit queue.
    pub fn new(handle: Handle, env: &DevEnv) -> Result<Mq, KernelError> {
        Mq::with_leaves(handle, env, "mq", || Box::new(PfifoFast::new(env)))
    }

    /// mq's queues with `leaf()` on each, its classes listed as `class_kind`'s (taprio gives its
    /// queues a pfifo).
    pub(crate) fn with_leaves(
        handle: Handle,
        env: &DevEnv,
        class_kind: &'static str,
        leaf: impl Fn() -> Box<dyn Qdisc>,
    ) -> Result<Mq, KernelError> {
        if env.txqueues <= 1 {
            return Err(KernelError::new(Errno::NotSupported));
        }
        let queues = (1..=env.txqueues)
            .map(|n| Sched::new(Handle::UNSPEC, Handle(handle.0 | n), leaf()))
            .collect();
        let mut q = Mq {
            handle,
            class_kind,
            queues,
            next: 0,
            secret: [0; 2],
        };
        q.set_seed(0x6d71_5eed);
        Ok(q)
    }

    /// Enqueue on the queue `netdev_pick_tx` picks among `first..first + count` (mqprio's traffic
    /// class: `skb_tx_hash` within the class's queues), or on the one an action chose.
    pub(crate) fn enqueue_in(
        &mut self,
        first: usize,
        count: usize,
        pkt: Packet,
        cx: &mut Cx,
    ) -> Verdict {
        let i = match pkt.queue_mapping() {
            Some(q) if (q as usize) < self.queues.len() => q as usize,
            _ => first + pick_tx(&pkt, count, self.secret),
        };
        self.queues[i].q.enqueue(pkt, cx)
    }

    /// Transmit queue `i`'s qdisc (0-based; taprio serves the queues itself).
    pub(crate) fn queue_mut(&mut self, i: usize) -> Option<&mut Sched> {
        self.queues.get_mut(i)
    }

    fn queue_of(&self, classid: Handle) -> Option<usize> {
        let n = classid.minor() as usize;
        (classid.major() == self.handle.major() && n >= 1 && n <= self.queues.len()).then(|| n - 1)
    }
}

/// [`Mq`] as a snapshot holds it ([`crate::snapshot`]): its class kind as text, read back as the
/// registry's own name.
#[derive(serde::Deserialize)]
struct SavedMq {
    handle: Handle,
    class_kind: String,
    queues: Vec<Sched>,
    next: usize,
    secret: [u64; 2],
}

impl<'de> serde::Deserialize<'de> for Mq {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Mq, D::Error> {
        use serde::de::Error;
        let s = SavedMq::deserialize(d)?;
        let class_kind = super::kind(&s.class_kind)
            .map(|k| k.name)
            .ok_or_else(|| D::Error::custom(format!("unknown kind {}", s.class_kind)))?;
        Ok(Mq {
            handle: s.handle,
            class_kind,
            queues: s.queues,
            next: s.next,
            secret: s.secret,
        })
    }
}

impl Qdisc for Mq {
    fn kind(&self) -> &'static str {
        "mq"
    }

    /// Its queues' qdiscs save themselves inside it.
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }

    /// `netdev_pick_tx`: the packet's queue, then that queue's qdisc.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let n = self.queues.len();
        self.enqueue_in(0, n, pkt, cx)
    }

    /// The queues served in turn: the first one with a packet to send, from where the last turn ended.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let n = self.queues.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(p) = self.queues[i].q.dequeue(cx) {
                self.next = (i + 1) % n;
                return Some(p);
            }
        }
        None
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        let n = self.queues.len();
        let i = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| self.queues[i].q.peek(cx).is_some())?;
        self.queues[i].q.peek(cx)
    }

    fn reset(&mut self) {
        for q in &mut self.queues {
            q.q.reset();
        }
    }

    /// `mq_dump`: the sum of the queues' counters.
    fn stats(&self) -> QdiscStats {
        let mut s = QdiscStats::default();
        for q in &self.queues {
            let c = q.q.stats();
            s.bytes += c.bytes;
            s.packets += c.packets;
            s.drops += c.drops;
            s.overlimits += c.overlimits;
            s.requeues += c.requeues;
            s.backlog += c.backlog;
            s.qlen += c.qlen;
        }
        s
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Mq
    }

    fn change(
        &mut self,
        _: &QdiscOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
    fn hashes_children(&self) -> bool {
        true
    }
}

/// The transmit queues as classes (`mq_class_ops`): graftable, not configurable.
impl ClassOps for Mq {
    fn find(&self, classid: Handle) -> bool {
        self.queue_of(classid).is_some()
    }
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.queue_of(classid).map(|i| &self.queues[i])
    }
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.queue_of(classid).map(|i| &mut self.queues[i])
    }
    /// `mq_graft`: the new qdisc, or `noop` when one is deleted.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let i = self
            .queue_of(classid)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        let new = new.unwrap_or_else(|| Sched::new(Handle::UNSPEC, classid, Box::new(Noop)));
        Ok(Some(std::mem::replace(&mut self.queues[i], new)))
    }
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: &super::ClassOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn delete_class(&mut self, _classid: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    /// `mq_walk` and `mq_dump_class`: one class per queue, a child of the root, its leaf the queue's qdisc.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| ClassInfo {
                kind: self.class_kind,
                classid: Handle(self.handle.0 | (i as u32 + 1)),
                parent: Handle::ROOT,
                leaf: (q.handle != Handle::UNSPEC).then_some(q.handle),
                options: None,
                stats: q.q.stats(),
                htb_xstats: None,
                xstats: None,
            })
            .collect()
    }
    fn children(&self) -> Vec<&Sched> {
        self.queues.iter().collect()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.queues.iter_mut().collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "mq",
    create: |handle, _opts, env, _now| Ok((Box::new(Mq::new(handle, env)?), Vec::new())),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// `skb_tx_hash` scales the packet's own hash when it carries one (the secret does not matter), and
    /// an action's queue_mapping within range overrides it.
    #[test]
    fn the_queue_follows_the_carried_hash() {
        let mut p = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 100);
        p.hash = 0xc000_0000; // three quarters of the way: queue 3 of 4, queue 6 of 8
        assert_eq!(pick_tx(&p, 4, [1, 2]), 3);
        assert_eq!(pick_tx(&p, 8, [5, 6]), 6);
        p.set_queue_mapping(Some(1));
        assert_eq!(pick_tx(&p, 4, [1, 2]), 1);
        p.set_queue_mapping(Some(9)); // past the device's queues: the hash again
        assert_eq!(pick_tx(&p, 4, [1, 2]), 3);
    }
}
