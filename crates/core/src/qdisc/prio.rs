//! PRIO — strict priority bands, after `net/sched/sch_prio.c`.
//!
//! `bands` child qdiscs (2 to 16, three by default), each the leaf of a class `handle:1` … `handle:bands`.
//! Dequeue always asks band 0 first, then band 1, and so on: as long as band 0 has a packet, band 1 waits.
//! Nothing is shaped and nothing is shared — a busy high band starves the lower ones, which is the point
//! (interactive traffic first) and the danger (give the high band little traffic, or a shaper above it).
//!
//! A packet's band comes, without filters, from `skb->priority`: if its major number is this qdisc's handle
//! its minor names the class (band = minor − 1, out of range → the band of priority 0); otherwise
//! `priomap[priority & 15]`, where the socket priority Linux derives from the IP TOS byte makes
//! "minimise delay" land in band 0 with the default map `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1` (the map
//! pfifo_fast also uses). Filters, when attached, decide first: a result's minor names the band, and an
//! action that drops the packet drops it here.
//!
//! Each band starts with a `pfifo` of `txqueuelen` packets, invisible in `tc qdisc show`; any qdisc can be
//! grafted in its place (`tc qdisc add … parent 1:2 handle 20: sfq`).

use super::fifo::Fifo;
use super::pfifo_fast::PRIOMAP;
use super::{ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, Sched, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `TCQ_PRIO_BANDS`.
pub const MAX_BANDS: i32 = 16;
/// `TCQ_MIN_PRIO_BANDS`.
pub const MIN_BANDS: i32 = 2;
/// `TC_PRIO_MAX`.
pub const TC_PRIO_MAX: u32 = 15;

/// `struct tc_prio_qopt`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioOptions {
    /// An `int` in the kernel's struct: tc passes whatever number it was given, the kernel checks it.
    pub bands: i32,
    pub priomap: [u8; 16],
}

impl Default for PrioOptions {
    fn default() -> Self {
        PrioOptions {
            bands: 3,
            priomap: PRIOMAP,
        }
    }
}

#[derive(Serialize, Deserialize)]
pub struct Prio {
    handle: Handle,
    bands: usize,
    prio2band: [u8; 16],
    /// One child per band; always `bands` of them.
    queues: Vec<Sched>,
    stats: QdiscStats,
    /// The qdisc's filters (`q->block`; PRIO's bands take none of their own).
    block: Block,
}

impl Prio {
    /// `prio_init`: PRIO requires options (tc always sends them).
    pub fn new(handle: Handle, opts: &PrioOptions, env: &DevEnv) -> Result<Prio, KernelError> {
        let mut q = Prio {
            handle,
            bands: 0,
            prio2band: [0; 16],
            queues: Vec::new(),
            stats: QdiscStats::default(),
            block: Block::default(),
        };
        q.tune(opts, env)?;
        Ok(q)
    }

    fn default_child(&self, band: usize, env: &DevEnv) -> Sched {
        Sched::new(
            Handle::UNSPEC,
            Handle(self.handle.0 | (band as u32 + 1)),
            Box::new(Fifo::pfifo(env.txqueuelen.max(1))),
        )
    }

    /// `prio_tune`: validate everything, then resize the band array (new bands get a default pfifo,
    /// removed bands are purged).
    fn tune(&mut self, o: &PrioOptions, env: &DevEnv) -> Result<(), KernelError> {
        if o.bands > MAX_BANDS || o.bands < MIN_BANDS {
            return Err(KernelError::new(Errno::Invalid));
        }
        if o.priomap.iter().any(|&b| b as i32 >= o.bands) {
            return Err(KernelError::new(Errno::Invalid));
        }
        let bands = o.bands as usize;
        self.prio2band = o.priomap;
        for gone in self.queues.drain(bands.min(self.queues.len())..) {
            let s = gone.q.stats();
            self.stats.qlen -= s.qlen;
            self.stats.backlog -= s.backlog;
        }
        for band in self.queues.len()..bands {
            let child = self.default_child(band, env);
            self.queues.push(child);
        }
        self.bands = bands;
        Ok(())
    }

    /// `prio_classify` (the band index, 0-based), or `None` when a filter's action dropped the packet.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<usize, Verdict> {
        let mut band = pkt.priority;
        if band >> 16 != self.handle.0 >> 16 {
            match crate::filter::classify(&self.block, pkt, cx) {
                FilterVerdict::Shot => return Err(Verdict::Bypass),
                FilterVerdict::Stolen => return Err(Verdict::Stolen),
                FilterVerdict::Classified { classid, .. } => band = classid,
                FilterVerdict::Unclassified => {
                    if band >> 16 != 0 {
                        band = 0;
                    }
                    return Ok(self.prio2band[(band & TC_PRIO_MAX) as usize] as usize);
                }
            }
        }
        let minor = band & 0xffff;
        Ok(match minor.checked_sub(1) {
            Some(b) if (b as usize) < self.bands => b as usize,
            _ => self.prio2band[0] as usize,
        })
    }

    fn band_of(&self, classid: Handle) -> Option<usize> {
        if classid.qdisc() != self.handle {
            return None;
        }
        let minor = classid.minor() as usize;
        (minor >= 1 && minor <= self.bands).then(|| minor - 1)
    }
}

impl Prio {
    /// The dequeue itself; [`Qdisc::dequeue`] wraps it to follow its children's drops.
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Packet> {
        for band in 0..self.bands {
            if let Some(pkt) = self.queues[band].q.dequeue(cx) {
                self.stats.count_unqueued(&pkt);
                self.stats.count_sent(&pkt);
                return Some(pkt);
            }
        }
        None
    }
}

impl Qdisc for Prio {
    fn kind(&self) -> &'static str {
        "prio"
    }
    /// Its bands save themselves inside it.
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }
    /// `prio_tcf_block`: filters attach to the qdisc only, not to its bands.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let band = match self.classify(&mut pkt, cx) {
            Ok(band) => band,
            Err(v) => {
                // `__NET_XMIT_BYPASS`: an action shot it and the qdisc counts a drop; stolen: not.
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Action);
                }
                return v;
            }
        };
        cx.tag_leaf(&mut pkt, self.handle.0 | (band as u32 + 1));
        let len = pkt.len;
        let mark = cx.tree_reduced;
        let v = self.queues[band].q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        match v {
            Verdict::Success => {
                self.stats.backlog += len;
                self.stats.qlen += 1;
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

    /// `prio_dequeue`: the first band with a packet.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        // A child that dropped packets while dequeuing (an AQM) took them off its counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        let band = (0..self.bands).find(|&b| self.queues[b].q.peek(cx).is_some())?;
        self.queues[band].q.peek(cx)
    }

    fn reset(&mut self) {
        for s in &mut self.queues {
            s.q.reset();
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Prio(PrioOptions {
            bands: self.bands as i32,
            priomap: self.prio2band,
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Prio(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        self.tune(o, env)?;
        Ok(Vec::new())
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }

    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

impl ClassOps for Prio {
    fn find(&self, classid: Handle) -> bool {
        self.band_of(classid).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.band_of(classid).map(|b| &self.queues[b])
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.band_of(classid).map(|b| &mut self.queues[b])
    }

    /// `prio_graft`: `None` puts a default pfifo back.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let band = self
            .band_of(classid)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        let new = new.unwrap_or_else(|| self.default_child(band, env));
        let old = std::mem::replace(&mut self.queues[band], new);
        let s = old.q.stats();
        self.stats.qlen -= s.qlen;
        self.stats.backlog -= s.backlog;
        Ok(Some(old))
    }

    /// PRIO's classes are fixed by `bands`: the kernel has no `change` class operation for it.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: &ClassOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }

    fn delete_class(&mut self, _classid: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }

    /// `prio_walk` + `prio_dump_class(_stats)`: one class per band, counters of its leaf.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.queues
            .iter()
            .enumerate()
            .map(|(b, s)| ClassInfo {
                kind: "prio",
                classid: Handle(self.handle.0 | (b as u32 + 1)),
                parent: self.handle,
                leaf: (s.handle != Handle::UNSPEC).then_some(s.handle),
                options: None,
                stats: s.q.stats(),
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
    name: "prio",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Prio(o) => Ok((Box::new(Prio::new(handle, o, env)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::pfifo_fast::tos_to_priority;

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

    fn pkt(priority: u32) -> Packet {
        Packet {
            priority,
            ..Packet::of_len(100)
        }
    }

    #[test]
    fn classify_as_prio_classify_does_without_filters() {
        let q = Prio::new(Handle::new(1, 0), &PrioOptions::default(), &env()).unwrap();
        // TOS 0x10 → priority 6 → priomap[6] = 0; priority 0 → 1; TOS 0x08 → priority 2 → band 2.
        assert_eq!(
            q.classify(&mut pkt(tos_to_priority(0x10)), &mut Cx::new(0)),
            Ok(0)
        );
        assert_eq!(q.classify(&mut pkt(0), &mut Cx::new(0)), Ok(1));
        assert_eq!(
            q.classify(&mut pkt(tos_to_priority(0x08)), &mut Cx::new(0)),
            Ok(2)
        );
        // priority = 1:3 names class 1:3 → band 2; 1:9 is out of range → band of priority 0 (priomap[0]=1).
        assert_eq!(q.classify(&mut pkt(0x0001_0003), &mut Cx::new(0)), Ok(2));
        assert_eq!(q.classify(&mut pkt(0x0001_0009), &mut Cx::new(0)), Ok(1));
        // Another qdisc's major: treated as priority 0 → priomap[0] = 1. Low bits only otherwise: 16+6 → 6.
        assert_eq!(q.classify(&mut pkt(0x0002_0006), &mut Cx::new(0)), Ok(1));
        assert_eq!(q.classify(&mut pkt(22), &mut Cx::new(0)), Ok(0));
    }

    #[test]
    fn bands_and_priomap_are_checked_before_anything_changes() {
        let mut q = Prio::new(Handle::new(1, 0), &PrioOptions::default(), &env()).unwrap();
        for bands in [1, 17, 1024, -1] {
            let o = PrioOptions {
                bands,
                priomap: [0; 16],
            };
            assert!(q.change(&QdiscOptions::Prio(o), &env(), 0).is_err());
        }
        let mut o = PrioOptions::default();
        o.priomap[4] = 3;
        assert!(q.change(&QdiscOptions::Prio(o), &env(), 0).is_err());
        assert_eq!(q.dump(), QdiscOptions::Prio(PrioOptions::default()));
        assert_eq!(q.walk(0).len(), 3);
    }
}
