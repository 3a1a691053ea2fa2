//! ETS — Enhanced Transmission Selection, after `net/sched/sch_ets.c`.
//!
//! IEEE 802.1Qaz divides a port between traffic classes in two ways at once: some classes are served by
//! strict priority, the others share what the strict ones leave by configured proportions. The kernel's
//! ETS is PRIO and DRR in one qdisc. It has `bands` classes (1 to 16), `handle:1` … `handle:bands`; the
//! first `strict` of them are strict, the rest are *bandwidth-sharing* bands with a quantum each.
//!
//! - **dequeue**: band 0 first, then band 1, … up to the last strict band — as in PRIO, a strict band
//!   with a packet always goes before everything after it. Only when every strict band is empty are the
//!   sharing bands asked, by deficit round robin over the *active list* (the sharing bands with packets,
//!   in the order they became busy): the head band sends its next packet if it fits in its deficit and
//!   pays for it; if not, it earns one more quantum and goes to the tail. A band leaves the list when its
//!   queue empties, so idle time earns nothing. Over a long backlogged interval the sharing bands' bytes
//!   stand in proportion to their quanta, each within one quantum plus one packet of its share.
//! - **enqueue**: the band comes from `skb->priority` when its major number is this qdisc's handle
//!   (minor − 1; out of range → the band of priority 0); otherwise from the filters attached to the qdisc
//!   (a result's minor names the band, the same way); otherwise — no filter, or none matched — from
//!   `priomap[priority & 15]` (a priority with a major number counts as 0). Unlike PRIO the default map
//!   sends every priority to the **last** band, so an unconfigured ETS is one FIFO. A sharing band that
//!   was idle joins the active list's tail with `deficit = quantum`.
//!
//! Configuration is whole, through the qdisc (`tc qdisc add … ets [bands N] [strict S] [quanta Q…]
//! [priomap P…]`): quanta name the sharing bands in order from band `strict`; a sharing band without one
//! gets `psched_mtu` (MTU plus link header). Every quantum is clamped to 256 B … 1 MiB. Classes cannot be
//! added or deleted; `tc class change … ets quantum Q` changes a sharing band's quantum (a strict band has
//! none: refused). A change that removes bands purges their queues; a band turning from strict to sharing
//! with packets joins the active list with a fresh deficit, one turning strict leaves it.
//!
//! Each band starts with a `pfifo` of `txqueuelen` packets (invisible in `tc qdisc show`), which any qdisc
//! can replace. A class's counters are those of its child qdisc. `peek` is `qdisc_peek_dequeued`: the
//! choice is made and the packet held for the next dequeue.

use super::drr::{enqueue_child, refuse_unclassified};
use super::fifo::Fifo;
use super::{ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, PeekDequeued, Peeked, Sched, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `TCQ_ETS_MAX_BANDS`.
pub const MAX_BANDS: u8 = 16;
/// `TC_PRIO_MAX`.
const TC_PRIO_MAX: usize = 15;
/// `ets_quantum_parse` clamps every quantum to this range.
pub const MIN_QUANTUM: u32 = 256;
pub const MAX_QUANTUM: u32 = 1 << 20;

/// `TCA_ETS_*` as tc sends them and as the kernel dumps them. tc sends only the quanta and priomap
/// entries it was given; the dump has one quantum per sharing band and all 16 priomap entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsOptions {
    /// `TCA_ETS_NBANDS` (a u8: tc's `bands`, or the count of strict bands and quanta).
    pub nbands: u8,
    /// `TCA_ETS_NSTRICT`; 0 is not sent (nor dumped).
    pub nstrict: u8,
    /// `TCA_ETS_QUANTA`: the quanta of bands `nstrict`, `nstrict + 1`, …
    pub quanta: Vec<u32>,
    /// `TCA_ETS_PRIOMAP`: the bands of priorities 0, 1, …
    pub priomap: Vec<u8>,
}

/// `TCA_ETS_QUANTA_BAND` of a class; `None` when tc sends no quantum (and, dumped, for a strict band).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsClassOptions {
    pub quantum: Option<u32>,
}

/// `struct ets_class`.
#[derive(Serialize, Deserialize)]
struct Band {
    /// The child qdisc.
    q: Sched,
    /// 0 for a strict band.
    quantum: u32,
    deficit: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued.
#[derive(Serialize, Deserialize)]
pub struct Ets {
    handle: Handle,
    // parameters
    nstrict: usize,
    prio2band: [u8; 16],
    // state
    /// `nbands` of them.
    bands: Vec<Band>,
    /// `q->active`: the sharing bands with packets, in service order.
    active: VecDeque<usize>,
    /// The qdisc's own qlen and backlog (`sch->q`), sent bytes and packets, drops.
    stats: QdiscStats,
    /// The packet a parent's peek chose (`sch->gso_skb`).
    #[serde(skip)]
    peeked: Peeked,
    /// The qdisc's filters (`q->block`; the bands take none).
    block: Block,
}

/// `NL_SET_ERR_MSG_MOD` of sch_ets.
fn refuse(msg: &str) -> KernelError {
    KernelError::invalid(format!("sch_ets: {msg}"))
}

fn clamp_quantum(q: u32) -> u32 {
    q.clamp(MIN_QUANTUM, MAX_QUANTUM)
}

/// What `ets_qdisc_change` checks and computes before it changes anything.
struct Tuned {
    nbands: usize,
    nstrict: usize,
    quanta: [u32; MAX_BANDS as usize],
    priomap: [u8; 16],
}

impl Ets {
    /// `ets_qdisc_init`: options are required (tc always sends them).
    pub fn new(handle: Handle, opts: &EtsOptions, env: &DevEnv) -> Result<Ets, KernelError> {
        let mut q = Ets {
            handle,
            nstrict: 0,
            prio2band: [0; 16],
            bands: Vec::new(),
            active: VecDeque::new(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
            block: Block::default(),
        };
        let t = Self::check(opts, env)?;
        q.apply(t, env);
        Ok(q)
    }

    /// The validation half of `ets_qdisc_change`, with the kernel's messages in its order.
    fn check(o: &EtsOptions, env: &DevEnv) -> Result<Tuned, KernelError> {
        let nbands = o.nbands as usize;
        if nbands < 1 || nbands > MAX_BANDS as usize {
            return Err(refuse("Invalid number of bands"));
        }
        let nstrict = o.nstrict as usize;
        if nstrict > nbands {
            return Err(refuse("Invalid number of strict bands"));
        }
        // Unless overridden, traffic goes to the last band.
        let mut priomap = [(nbands - 1) as u8; 16];
        for (prio, &band) in o.priomap.iter().enumerate() {
            if prio > TC_PRIO_MAX {
                return Err(refuse("Too many priorities in ETS priomap"));
            }
            if band as usize >= nbands {
                return Err(refuse("Invalid band number in ETS priomap"));
            }
            priomap[prio] = band;
        }
        let mut quanta = [0u32; MAX_BANDS as usize];
        for (i, &q) in o.quanta.iter().enumerate() {
            let band = nstrict + i;
            if band >= nbands {
                return Err(refuse("ETS quanta has more values than bands"));
            }
            quanta[band] = clamp_quantum(q);
        }
        for q in &mut quanta[nstrict..nbands] {
            if *q == 0 {
                *q = clamp_quantum(env.psched_mtu());
            }
        }
        Ok(Tuned {
            nbands,
            nstrict,
            quanta,
            priomap,
        })
    }

    /// The commit half of `ets_qdisc_change`.
    fn apply(&mut self, t: Tuned, env: &DevEnv) {
        // Removed bands: off the active list, their queues purged (taken off our counters).
        for (i, gone) in self
            .bands
            .drain(t.nbands.min(self.bands.len())..)
            .enumerate()
        {
            let band = t.nbands + i;
            self.active.retain(|&b| b != band);
            let s = gone.q.q.stats();
            self.stats.reduce((s.qlen as i64, s.backlog as i64));
        }
        // Bands that stop being strict and hold packets join the active list with a fresh deficit;
        // bands that become strict leave it.
        for band in t.nstrict..self.nstrict.min(self.bands.len()) {
            if self.bands[band].q.q.stats().qlen != 0 {
                self.active.push_back(band);
                self.bands[band].deficit = t.quanta[band];
            }
        }
        for band in self.nstrict..t.nstrict {
            self.active.retain(|&b| b != band);
        }
        self.nstrict = t.nstrict;
        self.prio2band = t.priomap;
        for (b, band) in self.bands.iter_mut().enumerate() {
            band.quantum = t.quanta[b];
        }
        for b in self.bands.len()..t.nbands {
            self.bands.push(Band {
                q: Fifo::default_child(self.class_id(b), env),
                quantum: t.quanta[b],
                deficit: 0,
            });
        }
    }

    fn class_id(&self, band: usize) -> u32 {
        self.handle.0 | (band as u32 + 1)
    }

    fn is_strict(&self, band: usize) -> bool {
        band < self.nstrict
    }

    /// `ets_class_find`: the band of a classid (its minor only, as the kernel looks).
    fn band_of(&self, classid: Handle) -> Option<usize> {
        let band = (classid.minor() as usize).checked_sub(1)?;
        (band < self.bands.len()).then_some(band)
    }

    /// `ets_classify`: the band (0-based), or the verdict for a packet not to be queued (`Bypass`: an
    /// action shot it, counted as a drop; `Stolen`: an action took it).
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
                    return Ok(self.prio2band[band as usize & TC_PRIO_MAX] as usize);
                }
            }
        }
        Ok(match (band & 0xffff).checked_sub(1) {
            Some(b) if (b as usize) < self.bands.len() => b as usize,
            _ => self.prio2band[0] as usize,
        })
    }

    /// A band's queue was emptied or purged (`ets_class_qlen_notify`): off the active list.
    fn qlen_notify(&mut self, band: usize) {
        if !self.is_strict(band) {
            self.active.retain(|&b| b != band);
        }
    }

    /// The deficit of a class, for tests.
    pub fn deficit(&self, classid: Handle) -> Option<u32> {
        self.band_of(classid).map(|b| self.bands[b].deficit)
    }

    fn sent(&mut self, pkt: Packet) -> Option<Packet> {
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        Some(pkt)
    }

    /// `ets_qdisc_dequeue`: the strict bands in order, then DRR over the active list.
    fn dequeue_bands(&mut self, cx: &mut Cx) -> Option<Packet> {
        loop {
            for band in 0..self.nstrict {
                if let Some(pkt) = self.bands[band].q.q.dequeue(cx) {
                    return self.sent(pkt);
                }
            }
            let &band = self.active.front()?;
            let cl = &mut self.bands[band];
            let Some(len) = cl.q.q.peek(cx).map(|p| p.len) else {
                if cl.q.q.stats().qlen == 0 {
                    // The child emptied itself (an AQM dropped its last packets): what the kernel's
                    // `qlen_notify` does.
                    self.qlen_notify(band);
                    continue;
                }
                // A non-work-conserving child holds its packets back (`qdisc_warn_nonwc`).
                return None;
            };
            if len <= cl.deficit {
                cl.deficit -= len;
                let pkt = cl.q.q.dequeue(cx)?;
                if cl.q.q.stats().qlen == 0 {
                    self.active.pop_front();
                }
                return self.sent(pkt);
            }
            // A u32 in the kernel; saturating keeps a packet near 4 GiB moving without a debug panic.
            cl.deficit = cl.deficit.saturating_add(cl.quantum);
            self.active.rotate_left(1);
        }
    }
}

impl PeekDequeued for Ets {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }

    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet> {
        // Children that drop while dequeuing (an AQM) took those packets off their counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_bands(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }
}

impl Qdisc for Ets {
    fn kind(&self) -> &'static str {
        "ets"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.active.is_empty() && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `ets_qdisc_tcf_block`: filters attach to the qdisc only.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }
    fn no_block_error(&self) -> KernelError {
        KernelError::invalid("ETS classid must be zero")
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let band = match self.classify(&mut pkt, cx) {
            Ok(band) => band,
            Err(v) => return refuse_unclassified(&mut self.stats, pkt, v, DropReason::Action, cx),
        };
        cx.tag_leaf(&mut pkt, self.handle.0 | (band as u32 + 1));
        let len = pkt.len;
        if let Err(v) = enqueue_child(&mut self.stats, &mut *self.bands[band].q.q, pkt, cx) {
            return v;
        }
        if !self.is_strict(band) && !self.active.contains(&band) {
            self.active.push_back(band);
            self.bands[band].deficit = self.bands[band].quantum;
        }
        self.stats.backlog = self.stats.backlog.wrapping_add(len);
        self.stats.qlen += 1;
        Verdict::Success
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    /// `ets_qdisc_reset` and `qdisc_reset`: queues and the active list empty; configuration and
    /// cumulative counters stay.
    fn reset(&mut self) {
        self.active.clear();
        for b in &mut self.bands {
            b.q.q.reset();
        }
        self.peeked.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `ets_qdisc_dump`.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Ets(EtsOptions {
            nbands: self.bands.len() as u8,
            nstrict: self.nstrict as u8,
            quanta: self.bands[self.nstrict..]
                .iter()
                .map(|b| b.quantum)
                .collect(),
            priomap: self.prio2band.to_vec(),
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Ets(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let t = Self::check(o, env)?;
        self.apply(t, env);
        Ok(Vec::new())
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }

    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

impl ClassOps for Ets {
    fn find(&self, classid: Handle) -> bool {
        self.band_of(classid).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.band_of(classid).map(|b| &self.bands[b].q)
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.band_of(classid).map(|b| &mut self.bands[b].q)
    }

    /// `ets_class_graft`: `None` puts a default pfifo back; the old child's packets are purged, which
    /// takes the band off the active list and its packets off our counters.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let band = self
            .band_of(classid)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        let new = new.unwrap_or_else(|| Fifo::default_child(self.class_id(band), env));
        let mut old = std::mem::replace(&mut self.bands[band].q, new);
        let s = old.q.stats();
        old.q.reset();
        if s.qlen != 0 {
            self.qlen_notify(band);
        }
        self.stats.reduce((s.qlen as i64, s.backlog as i64));
        Ok(Some(old))
    }

    /// `ets_class_change`: only an existing band's quantum changes.
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        opts: &ClassOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let Some(band) = self.band_of(classid) else {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Fine-grained class addition and removal is not supported",
            ));
        };
        let ClassOptions::Ets(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let Some(q) = o.quantum else {
            // Nothing to configure.
            return Ok(Vec::new());
        };
        if self.is_strict(band) {
            return Err(KernelError::invalid(
                "Strict bands do not have a configurable quantum",
            ));
        }
        self.bands[band].quantum = clamp_quantum(q);
        Ok(Vec::new())
    }

    /// ETS has no `delete` class operation.
    fn delete_class(&mut self, _classid: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }

    /// `ets_qdisc_walk` + `ets_class_dump(_stats)`: one class per band at the root, a sharing band's
    /// quantum, the counters of its child.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.bands
            .iter()
            .enumerate()
            .map(|(b, band)| ClassInfo {
                kind: "ets",
                classid: Handle(self.class_id(b)),
                parent: Handle::ROOT,
                leaf: (band.q.handle != Handle::UNSPEC).then_some(band.q.handle),
                options: Some(ClassOptions::Ets(EtsClassOptions {
                    quantum: (!self.is_strict(b)).then_some(band.quantum),
                })),
                stats: band.q.q.stats(),
                htb_xstats: None,
                xstats: None,
            })
            .collect()
    }

    fn children(&self) -> Vec<&Sched> {
        self.bands.iter().map(|b| &b.q).collect()
    }

    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.bands.iter_mut().map(|b| &mut b.q).collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "ets",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Ets(o) => Ok((Box::new(Ets::new(handle, o, env)?), Vec::new())),
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

    fn opts(nbands: u8, nstrict: u8, quanta: &[u32], priomap: &[u8]) -> EtsOptions {
        EtsOptions {
            nbands,
            nstrict,
            quanta: quanta.to_vec(),
            priomap: priomap.to_vec(),
        }
    }

    fn ets(o: &EtsOptions) -> Result<Ets, KernelError> {
        Ets::new(Handle::new(1, 0), o, &ENV)
    }

    #[test]
    fn defaults_as_ets_qdisc_change_fills_them() {
        // bands 3 strict 1 quanta 1000: band 1 gets 1000, band 2 psched_mtu = 1514; the priomap not
        // given sends everything to the last band (2).
        let q = ets(&opts(3, 1, &[1000], &[])).unwrap();
        assert_eq!(
            q.dump(),
            QdiscOptions::Ets(opts(3, 1, &[1000, 1514], &[2; 16]))
        );
        // A quantum below 256 is raised to 256, above 1 MiB lowered to it (ets_quantum_parse).
        let q = ets(&opts(2, 0, &[1, 5 << 20], &[])).unwrap();
        assert_eq!(
            q.dump(),
            QdiscOptions::Ets(opts(2, 0, &[256, 1 << 20], &[1; 16]))
        );
    }

    #[test]
    fn the_kernel_refuses_with_its_messages_and_keeps_the_old_state() {
        let mut q = ets(&opts(3, 1, &[1000], &[0, 1, 2])).unwrap();
        let before = q.dump();
        for (o, msg) in [
            (opts(0, 0, &[], &[]), "Invalid number of bands"),
            (opts(17, 0, &[], &[]), "Invalid number of bands"),
            (opts(2, 3, &[], &[]), "Invalid number of strict bands"),
            (
                opts(2, 0, &[], &[0; 17]),
                "Too many priorities in ETS priomap",
            ),
            (
                opts(2, 0, &[], &[0, 2]),
                "Invalid band number in ETS priomap",
            ),
            (
                opts(2, 1, &[500, 500], &[]),
                "ETS quanta has more values than bands",
            ),
        ] {
            let e = q.change(&QdiscOptions::Ets(o), &ENV, 0).unwrap_err();
            assert_eq!(
                (e.errno, e.msg.as_deref()),
                (Errno::Invalid, Some(format!("sch_ets: {msg}").as_str()))
            );
            assert_eq!(q.dump(), before);
        }
    }

    #[test]
    fn class_change_touches_only_sharing_quanta() {
        let mut q = ets(&opts(3, 1, &[1000, 2000], &[])).unwrap();
        let change = |q: &mut Ets, minor, quantum| {
            q.change_class(
                Handle::new(1, minor),
                Handle::ROOT,
                &ClassOptions::Ets(EtsClassOptions { quantum }),
                &ENV,
                0,
            )
        };
        change(&mut q, 2, Some(3000)).unwrap();
        change(&mut q, 3, Some(100)).unwrap(); // clamped to 256
        change(&mut q, 1, None).unwrap(); // nothing to configure, even on a strict band
        let e = change(&mut q, 1, Some(1500)).unwrap_err();
        assert_eq!(
            e.msg.as_deref(),
            Some("Strict bands do not have a configurable quantum")
        );
        let e = change(&mut q, 4, Some(1500)).unwrap_err();
        assert_eq!(e.errno, Errno::NotSupported);
        assert_eq!(
            q.dump(),
            QdiscOptions::Ets(opts(3, 1, &[3000, 256], &[2; 16]))
        );
        assert_eq!(
            q.delete_class(Handle::new(1, 2)).unwrap_err().errno,
            Errno::NotSupported
        );
    }

    #[test]
    fn classify_as_ets_classify_does_without_filters() {
        // bands 4, priomap 3 2 1 0 (priorities 4.. → band 3, the last).
        let q = ets(&opts(4, 0, &[], &[3, 2, 1, 0])).unwrap();
        let band = |priority| {
            let mut p = Packet {
                priority,
                ..Packet::of_len(100)
            };
            q.classify(&mut p, &mut Cx::new(0)).unwrap()
        };
        assert_eq!(band(0), 3);
        assert_eq!(band(3), 0);
        assert_eq!(band(9), 3);
        // 16 + 1: only the low four bits count → priority 1 → band 2.
        assert_eq!(band(17), 2);
        // 1:2 names band 1 directly; 1:9 is past the bands → priomap[0] = 3; 2:1 is another qdisc's
        // major: priority 0 → 3.
        assert_eq!(band(0x0001_0002), 1);
        assert_eq!(band(0x0001_0009), 3);
        assert_eq!(band(0x0002_0001), 3);
    }
}
