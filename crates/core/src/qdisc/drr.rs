//! DRR — deficit round robin, after `net/sched/sch_drr.c`.
//!
//! Shreedhar and Varghese's algorithm ("Efficient Fair Queueing using Deficit Round Robin", 1995) shares
//! a link between queues in proportion to per-queue *quanta*, in O(1) work per packet and without
//! knowing packet sizes in advance. Each class has a quantum (bytes it may send per round) and a deficit
//! counter (bytes it may still send this round). The classes with packets form the *active list*:
//!
//! - **enqueue**: the packet goes to its class's child qdisc; a class that was not on the active list is
//!   appended to its tail with `deficit = quantum`.
//! - **dequeue**: look at the head class's next packet. If it fits in the deficit, the deficit pays for
//!   it and the packet leaves (the class leaves the list when its queue empties, so an idle class carries
//!   no credit over to its next busy period). If not, the class earns one more quantum and goes to the
//!   tail; the next class is asked. A packet larger than the quantum therefore waits for several rounds
//!   while the deficit accumulates — it is never stuck — and a round trip of the list ends with every
//!   backlogged class having sent about one quantum's worth, so over a long backlogged interval class
//!   shares approach `quantum_i / Σ quantum`, each class being at most one quantum plus one maximal packet
//!   ahead of or behind its share at any time.
//!
//! The kernel's version is a classful qdisc with a flat set of classes (`tc class add … drr [quantum
//! SIZE]`): no hierarchy (a class's parent is always the root), no default class. The quantum defaults to
//! `psched_mtu(dev)` (MTU plus link-layer header), is clamped to 256 B … 1 MiB, and 0 is refused. Each
//! class starts with a `pfifo` of `txqueuelen` packets (invisible in `tc qdisc show`), which any qdisc can
//! replace. Classification (`drr_classify`): a `skb->priority` whose major number is the qdisc's handle
//! and that names an existing class wins; otherwise the filters attached to the qdisc (and only there:
//! classes take no filters) decide. A packet that no filter classifies, or whose class does not exist, is
//! dropped and counted as a drop of the qdisc (`__NET_XMIT_BYPASS`); an action that steals it makes it
//! vanish uncounted. A class that filters name (are bound to) cannot be deleted (`EBUSY`).
//!
//! `tc -s class show` reports per class the bytes and packets sent through it, the queue counters of its
//! child, and the `deficit` (only while the class has packets; 0 otherwise). The qdisc itself has no
//! options to show or change. Its `peek` is `qdisc_peek_dequeued`: it runs the round-robin step and keeps
//! the packet aside, still counted in the backlog, for the next `dequeue`.

use super::class_hash::ClassHash;
use super::class_table::ClassTable;
use super::fifo::Fifo;
use super::{ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, Sched, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The smallest quantum the kernel keeps (`clamp_t(u32, quantum, 256, 1 << 20)`).
pub const MIN_QUANTUM: u32 = 256;
/// The largest.
pub const MAX_QUANTUM: u32 = 1 << 20;

/// `TCA_DRR_QUANTUM`, the only class option; `None` when tc sends none (`tc class add … drr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClassOptions {
    pub quantum: Option<u32>,
}

/// `struct tc_drr_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrXstats {
    pub deficit: u32,
}

/// `struct drr_class`.
#[derive(Serialize, Deserialize)]
struct DrrClass {
    quantum: u32,
    deficit: u32,
    /// The child qdisc (`cl->qdisc`).
    q: Sched,
    /// `cl->bstats`: what left through this class.
    bytes: u64,
    packets: u64,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: no active list, no peeked packet.
#[derive(Serialize, Deserialize)]
pub struct Drr {
    handle: Handle,
    /// By classid; the walk order is `hash`'s. Both saved as byte strings of their own, which a
    /// filter listing's decode skips: no class has filters (`crate::snapshot::FilterListing`).
    #[serde(with = "crate::snapshot::classes")]
    classes: ClassTable<DrrClass>,
    #[serde(with = "crate::snapshot::classes")]
    hash: ClassHash,
    /// `q->active`: classids of the classes with packets, in service order.
    active: VecDeque<u32>,
    /// Sent bytes/packets and drops; qlen and backlog are the children's (plus `peeked`).
    stats: QdiscStats,
    /// `sch->gso_skb`: the packet `peek` dequeued and keeps for the next `dequeue`.
    #[serde(skip)]
    peeked: Option<Packet>,
    /// The qdisc's filters (`q->block`; classes have none).
    block: Block,
}

fn class_not_found() -> KernelError {
    KernelError::msg(Errno::NoEntry, "Specified class not found")
}

impl Drr {
    /// `drr_init_qdisc`: no options, no classes.
    pub fn new(handle: Handle) -> Drr {
        Drr {
            handle,
            classes: ClassTable::new(),
            hash: ClassHash::new(),
            active: VecDeque::new(),
            stats: QdiscStats::default(),
            peeked: None,
            block: Block::default(),
        }
    }

    fn default_child(classid: u32, env: &DevEnv) -> Sched {
        Fifo::default_child(classid, env)
    }

    fn deactivate(&mut self, classid: u32) {
        self.active.retain(|&c| c != classid);
    }

    /// `drr_classify`: the class, or the verdict for a packet not to be queued: `Bypass` when the qdisc
    /// counts it as a drop (`__NET_XMIT_BYPASS`: no class, or an action shot it), `Stolen` when an action
    /// took it.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<u32, Verdict> {
        classify_flat(
            self.handle,
            &self.block,
            |id| self.classes.contains_key(&id),
            pkt,
            cx,
        )
    }

    /// `drr_dequeue` proper (without the peeked packet).
    fn dequeue_rr(&mut self, cx: &mut Cx) -> Option<Packet> {
        loop {
            let &id = self.active.front()?;
            let cl = self.classes.get_mut(&id).expect("active class exists");
            let Some(len) = cl.q.q.peek(cx).map(|p| p.len) else {
                if cl.q.q.stats().qlen == 0 {
                    // The child emptied itself behind our back: what `qlen_notify` does.
                    self.active.pop_front();
                    continue;
                }
                // A non-work-conserving child holds its packets back: the kernel warns
                // (`qdisc_warn_nonwc`) and the whole qdisc waits.
                return None;
            };
            if len <= cl.deficit {
                cl.deficit -= len;
                let pkt = cl.q.q.dequeue(cx)?;
                if cl.q.q.stats().qlen == 0 {
                    self.active.pop_front();
                }
                cl.bytes += pkt.len as u64;
                cl.packets += pkt.bstats_packets();
                self.stats.count_sent(&pkt);
                return Some(pkt);
            }
            // The kernel's u32 would wrap only for packets near 4 GiB; saturating keeps even those
            // moving (and debug builds from panicking).
            cl.deficit = cl.deficit.saturating_add(cl.quantum);
            self.active.rotate_left(1);
        }
    }

    /// The deficit of a class (tests and `tc -s class show`).
    pub fn deficit(&self, classid: Handle) -> Option<u32> {
        self.classes.get(&classid.0).map(|c| c.deficit)
    }
}

/// The classification of a flat set of classes with filters at the qdisc only (`drr_classify`,
/// `qfq_classify`): a `skb->priority` naming an existing class of this qdisc wins; otherwise the filters
/// decide. No class (unclassified, or a result naming none) or an action that shot the packet: `Bypass`
/// (a drop the qdisc counts); an action that took it: `Stolen`.
pub(crate) fn classify_flat(
    handle: Handle,
    block: &Block,
    exists: impl Fn(u32) -> bool,
    pkt: &mut Packet,
    cx: &mut Cx,
) -> Result<u32, Verdict> {
    if (pkt.priority ^ handle.0) & 0xffff_0000 == 0 && exists(pkt.priority) {
        return Ok(pkt.priority);
    }
    match crate::filter::classify(block, pkt, cx) {
        FilterVerdict::Unclassified | FilterVerdict::Shot => Err(Verdict::Bypass),
        FilterVerdict::Stolen => Err(Verdict::Stolen),
        FilterVerdict::Classified { classid, .. } if exists(classid) => Ok(classid),
        FilterVerdict::Classified { .. } => Err(Verdict::Bypass),
    }
}

/// A packet classification did not queue: a drop of the qdisc if the verdict counts one (`Bypass`:
/// no class, or an action shot it), with the packet in the drop list; nothing for `Stolen`.
pub(crate) fn refuse_unclassified(
    stats: &mut QdiscStats,
    pkt: Packet,
    v: Verdict,
    reason: DropReason,
    cx: &mut Cx,
) -> Verdict {
    if v.counts_drop() {
        stats.drops += 1;
        cx.drop_arriving(pkt, reason);
    }
    v
}

/// `qdisc_enqueue` to a class's child from a parent that keeps its own qlen and backlog (ETS, QFQ):
/// what the child removed to make room comes off the parent's counters too, and a refusal that counts
/// as a drop is one of the parent's. `Ok` when the child queued the packet.
pub(crate) fn enqueue_child(
    stats: &mut QdiscStats,
    child: &mut dyn Qdisc,
    pkt: Packet,
    cx: &mut Cx,
) -> Result<(), Verdict> {
    let mark = cx.tree_reduced;
    let v = child.enqueue(pkt, cx);
    stats.reduce(cx.reduced_since(mark));
    if v == Verdict::Success {
        return Ok(());
    }
    if v.counts_drop() {
        stats.drops += 1;
    }
    Err(v)
}

impl Drr {
    /// The dequeue itself; [`Qdisc::dequeue`] wraps it to follow its children's drops.
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Packet> {
        if let Some(p) = self.peeked.take() {
            return Some(p);
        }
        self.dequeue_rr(cx)
    }
}

impl Qdisc for Drr {
    fn kind(&self) -> &'static str {
        "drr"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.active.is_empty() && self.peeked.is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `drr_tcf_block`: filters attach to the qdisc only ("DRR classid must be zero").
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }
    fn no_block_error(&self) -> KernelError {
        KernelError::invalid("DRR classid must be zero")
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let id = match self.classify(&mut pkt, cx) {
            Ok(id) => id,
            Err(v) => {
                return refuse_unclassified(&mut self.stats, pkt, v, DropReason::Unclassified, cx)
            }
        };
        cx.tag_leaf(&mut pkt, id);
        let cl = self
            .classes
            .get_mut(&id)
            .expect("classified to an existing class");
        // DRR's own qlen and backlog are its classes' sums (see `stats`): a child's tree reduction needs
        // no bookkeeping here.
        match cl.q.q.enqueue(pkt, cx) {
            Verdict::Success => {
                if !self.active.contains(&id) {
                    self.active.push_back(id);
                    cl.deficit = cl.quantum;
                }
                Verdict::Success
            }
            v => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                }
                v
            }
        }
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        // A child that dropped packets while dequeuing (an AQM) took them off its counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.is_none() {
            self.peeked = self.dequeue_rr(cx);
        }
        self.peeked.as_ref()
    }

    /// `drr_reset_qdisc` (and `qdisc_reset` dropping the peeked packet): queues empty, the active list
    /// with them; quanta, deficits and counters stay.
    fn reset(&mut self) {
        for cl in self.classes.values_mut() {
            cl.q.q.reset();
        }
        self.active.clear();
        self.peeked = None;
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        s.qlen = 0;
        s.backlog = 0;
        for cl in self.classes.values() {
            let c = cl.q.q.stats();
            s.qlen += c.qlen;
            s.backlog = s.backlog.wrapping_add(c.backlog);
        }
        if let Some(p) = &self.peeked {
            s.qlen += 1;
            s.backlog = s.backlog.wrapping_add(p.len);
        }
        s
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Drr
    }

    /// DRR has no `change` operation; tc never sends it options, so a change is a no-op.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Drr => Ok(Vec::new()),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }

    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

impl ClassOps for Drr {
    fn find(&self, classid: Handle) -> bool {
        self.classes.contains_key(&classid.0)
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.classes.get(&classid.0).map(|c| &c.q)
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.classes.get_mut(&classid.0).map(|c| &mut c.q)
    }

    /// `drr_graft_class`: `None` puts a default pfifo back. The old child's packets are purged, which
    /// takes the class off the active list (`qdisc_purge_queue` → `drr_qlen_notify`).
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let cl = self
            .classes
            .get_mut(&classid.0)
            .ok_or_else(class_not_found)?;
        let new = new.unwrap_or_else(|| Self::default_child(classid.0, env));
        let mut old = std::mem::replace(&mut cl.q, new);
        old.q.reset();
        self.deactivate(classid.0);
        Ok(Some(old))
    }

    /// `drr_change_class`: create a class, or change an existing one's quantum (only if one is given).
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let ClassOptions::Drr(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let quantum = match o.quantum {
            Some(0) => return Err(KernelError::invalid("Specified DRR quantum cannot be zero")),
            Some(q) => q.clamp(MIN_QUANTUM, MAX_QUANTUM),
            None => env.psched_mtu().clamp(MIN_QUANTUM, MAX_QUANTUM),
        };
        if let Some(cl) = self.classes.get_mut(&classid.0) {
            if o.quantum.is_some() {
                cl.quantum = quantum;
            }
            return Ok(Vec::new());
        }
        self.classes.insert(
            classid.0,
            DrrClass {
                quantum,
                deficit: 0,
                q: Self::default_child(classid.0, env),
                bytes: 0,
                packets: 0,
            },
        );
        self.hash.insert(classid.0);
        self.hash.grow();
        Ok(Vec::new())
    }

    /// `drr_delete_class`: refused while a filter is bound to the class; otherwise its queue is purged.
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError> {
        if !self.classes.contains_key(&classid.0) {
            return Err(KernelError::new(Errno::NoEntry));
        }
        if self.block.binds(classid.0) {
            return Err(KernelError::msg(Errno::Busy, "DRR class is in use"));
        }
        self.deactivate(classid.0);
        self.classes.remove(&classid.0);
        self.hash.remove(classid.0);
        Ok(())
    }

    /// `drr_walk` + `drr_dump_class(_stats)`: every class at the root, in hash order.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.hash
            .walk()
            .filter_map(|id| {
                let cl = self.classes.get(&id)?;
                let leaf = cl.q.q.stats();
                Some(ClassInfo {
                    kind: "drr",
                    classid: Handle(id),
                    parent: Handle::ROOT,
                    leaf: (cl.q.handle != Handle::UNSPEC).then_some(cl.q.handle),
                    options: Some(ClassOptions::Drr(DrrClassOptions {
                        quantum: Some(cl.quantum),
                    })),
                    stats: QdiscStats {
                        bytes: cl.bytes,
                        packets: cl.packets,
                        ..leaf
                    },
                    htb_xstats: None,
                    xstats: Some(Xstats::Drr(DrrXstats {
                        deficit: if leaf.qlen != 0 { cl.deficit } else { 0 },
                    })),
                })
            })
            .collect()
    }

    fn children(&self) -> Vec<&Sched> {
        self.classes.values().map(|c| &c.q).collect()
    }

    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.classes.values_mut().map(|c| &mut c.q).collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "drr",
    create: |handle, _opts, _env, _now| Ok((Box::new(Drr::new(handle)), Vec::new())),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> DevEnv {
        DevEnv {
            txqueues: 1,
            txqueuelen: 1000,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        }
    }

    fn add(q: &mut Drr, minor: u16, quantum: Option<u32>) -> Result<Vec<Warning>, KernelError> {
        q.change_class(
            Handle::new(1, minor),
            Handle::new(1, 0),
            &ClassOptions::Drr(DrrClassOptions { quantum }),
            &env(),
            0,
        )
    }

    fn quantum(q: &Drr, minor: u16) -> u32 {
        q.classes[&Handle::new(1, minor).0].quantum
    }

    #[test]
    fn quantum_defaults_clamps_and_refuses_zero() {
        let mut q = Drr::new(Handle::new(1, 0));
        add(&mut q, 1, None).unwrap();
        // psched_mtu = 1500 + 14.
        assert_eq!(quantum(&q, 1), 1514);
        add(&mut q, 2, Some(100)).unwrap();
        assert_eq!(quantum(&q, 2), 256);
        add(&mut q, 3, Some(5 << 20)).unwrap();
        assert_eq!(quantum(&q, 3), 1 << 20);
        let e = add(&mut q, 4, Some(0)).unwrap_err();
        assert_eq!(e.errno, Errno::Invalid);
        assert!(!q.find(Handle::new(1, 4)));
        // Changing without a quantum keeps it; zero is refused and changes nothing.
        add(&mut q, 2, None).unwrap();
        assert_eq!(quantum(&q, 2), 256);
        assert!(add(&mut q, 2, Some(0)).is_err());
        assert_eq!(quantum(&q, 2), 256);
        add(&mut q, 2, Some(3000)).unwrap();
        assert_eq!(quantum(&q, 2), 3000);
    }

    #[test]
    fn priority_naming_a_class_classifies_without_filters() {
        let mut q = Drr::new(Handle::new(1, 0));
        add(&mut q, 1, None).unwrap();
        let mut cx = Cx::new(0);
        let pkt = |priority| Packet {
            priority,
            ..Packet::of_len(100)
        };
        assert_eq!(q.enqueue(pkt(0x0001_0001), &mut cx), Verdict::Success);
        // 1:2 does not exist, 2:1 is another qdisc's, 0 names nothing: no filter → dropped, counted;
        // `drr_enqueue` returns `NET_XMIT_SUCCESS | __NET_XMIT_BYPASS` and the packet is in the drop list.
        for p in [0x0001_0002, 0x0002_0001, 0] {
            assert_eq!(q.enqueue(pkt(p), &mut cx), Verdict::Bypass);
        }
        assert_eq!(cx.drops.len(), 3);
        assert!(cx
            .drops
            .iter()
            .all(|d| d.arriving && d.reason == DropReason::Unclassified));
        let s = q.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (1, 100, 3));
    }
}
