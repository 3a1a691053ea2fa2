//! `multiq` — a band per hardware transmit queue, after `net/sched/sch_multiq.c`.
//!
//! # The algorithm
//!
//! Written for NICs whose transmit queues can stop one at a time (Intel's, 2008): with one root FIFO, a
//! stopped queue blocks every packet behind its head (head-of-line blocking). `multiq` keeps one band —
//! a child qdisc, a pfifo at first — per transmit queue the device has, puts each packet in the band of
//! the queue `dev_queue_xmit` picked for it (`skb->queue_mapping`: the flow hash, or what a filter's
//! `skbedit queue_mapping N` set, which is what multiq exists for), and dequeues round robin over the
//! bands whose queue is not stopped. Filters on the qdisc run only for their actions: the class they name
//! is ignored, and a `drop` or `stolen` verdict removes the packet.
//!
//! The device must be multiqueue (`ip link add … numtxqueues N`, N > 1; `EOPNOTSUPP` otherwise); the
//! bands are as many as its queues (tc sends none: `multiq` has no options) and `tc qdisc show` prints
//! `bands N/M`. Bands are classes `handle:1`…`handle:N`, each graftable; deleting a band's qdisc leaves
//! `noop` there (every packet dropped).
//!
//! # What tclab models and how
//!
//! All of it, with the device's queues never stopped (tclab's devices have one wire, always ready when
//! asked), so the round robin is plain: one packet per band in turn. The flow hash is keyed by the run's
//! seed, as `mq`'s is.

use super::fifo::Fifo;
use super::mq::{pick_tx, Noop};
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats,
    Sched, Verdict,
};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{self, Block};
use crate::flow::splitmix64;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `struct tc_multiq_qopt` as the kernel dumps it (tc sends zeros).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiqOptions {
    pub bands: u16,
    pub max_bands: u16,
}

/// In a snapshot ([`crate::snapshot`]): its bands' qdiscs, the band served next, its filters.
#[derive(Serialize, Deserialize)]
pub struct Multiq {
    handle: Handle,
    queues: Vec<Sched>,
    curband: usize,
    block: Block,
    stats: QdiscStats,
    secret: [u64; 2],
}

impl Multiq {
    /// `multiq_init` + `multiq_tune`: a default pfifo per transmit queue.
    pub fn new(handle: Handle, env: &DevEnv) -> Result<Multiq, KernelError> {
        if env.txqueues <= 1 {
            return Err(KernelError::new(Errno::NotSupported));
        }
        let mut q = Multiq {
            handle,
            queues: (1..=env.txqueues)
                .map(|n| Fifo::default_child(handle.0 | n, env))
                .collect(),
            curband: 0,
            block: Block::default(),
            stats: QdiscStats::default(),
            secret: [0; 2],
        };
        q.set_seed(0x6d75_6c74);
        Ok(q)
    }

    fn band_of(&self, classid: Handle) -> Option<usize> {
        let n = classid.minor() as usize;
        (n >= 1 && n <= self.queues.len()).then(|| n - 1)
    }
}

impl Qdisc for Multiq {
    fn kind(&self) -> &'static str {
        "multiq"
    }

    /// Its queues' qdiscs save themselves inside it (or refuse while they hold packets).
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }

    /// `multiq_enqueue`: the filters' actions, then the band of the packet's transmit queue.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        if !self.block.filter_list_is_empty() {
            match filter::classify(&self.block, &mut pkt, cx) {
                filter::Verdict::Shot => {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Action);
                    return Verdict::Bypass;
                }
                filter::Verdict::Stolen => return Verdict::Stolen,
                _ => {}
            }
        }
        let band = pick_tx(&pkt, self.queues.len(), self.secret);
        let len = pkt.len;
        let mark = cx.tree_reduced;
        let v = self.queues[band].q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        if v == Verdict::Success {
            self.stats.qlen += 1;
            self.stats.backlog += len;
        } else if v.counts_drop() {
            self.stats.drops += 1;
        }
        v
    }

    /// `multiq_dequeue`: round robin, starting after the band served last.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let n = self.queues.len();
        for _ in 0..n {
            self.curband = (self.curband + 1) % n;
            let mark = cx.tree_reduced;
            let p = self.queues[self.curband].q.dequeue(cx);
            self.stats.reduce(cx.reduced_since(mark));
            if let Some(p) = p {
                self.stats.count_unqueued(&p);
                self.stats.count_sent(&p);
                return Some(p);
            }
        }
        None
    }

    /// `multiq_peek`: the packet the next dequeue would take.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        let n = self.queues.len();
        let i = (1..=n)
            .map(|k| (self.curband + k) % n)
            .find(|&i| self.queues[i].q.peek(cx).is_some())?;
        self.queues[i].q.peek(cx)
    }

    /// `multiq_reset`.
    fn reset(&mut self) {
        for q in &mut self.queues {
            q.q.reset();
        }
        self.curband = 0;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `multiq_dump`.
    fn dump(&self) -> QdiscOptions {
        let n = self.queues.len() as u16;
        QdiscOptions::Multiq(MultiqOptions {
            bands: n,
            max_bands: n,
        })
    }

    /// `multiq_tune` on a change: the bands follow the device's queues, which tclab's devices do not
    /// change under a qdisc, so nothing moves.
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

    /// `multiq_tcf_block`: filters on the qdisc only.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }
}

/// The bands as classes: graftable, fixed in number.
impl ClassOps for Multiq {
    fn find(&self, classid: Handle) -> bool {
        self.band_of(classid).is_some()
    }
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.band_of(classid).map(|i| &self.queues[i])
    }
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.band_of(classid).map(|i| &mut self.queues[i])
    }
    /// `multiq_graft`: the new qdisc, or `noop` when one is deleted; the old one's packets leave the
    /// counters.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let i = self
            .band_of(classid)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        let new = new.unwrap_or_else(|| Sched::new(Handle::UNSPEC, classid, Box::new(Noop)));
        let old = std::mem::replace(&mut self.queues[i], new);
        let s = old.q.stats();
        self.stats.qlen -= s.qlen;
        self.stats.backlog -= s.backlog;
        Ok(Some(old))
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
    /// `multiq_walk` + `multiq_dump_class`: a class per band, its leaf the band's qdisc.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| ClassInfo {
                kind: "multiq",
                classid: Handle(self.handle.0 | (i as u32 + 1)),
                parent: self.handle,
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
    name: "multiq",
    create: |handle, _opts, env, _now| Ok((Box::new(Multiq::new(handle, env)?), Vec::new())),
};
