//! `sfb` — Stochastic Fair Blue, after `net/sched/sch_sfb.c` (Feng, Kandlur, Saha, Shin: "Blue: A New
//! Class of Active Queue Management Algorithms", 1999, and "Stochastic Fair Blue", 2001).
//!
//! # The algorithm
//!
//! BLUE manages a queue by its events rather than its length: a marking probability `p` rises by
//! `increment` each time the queue overflows its target and falls by `decrement` each time it runs
//! empty, so it settles where the offered load just fits. SFB keeps one such probability per *bin* and
//! spreads flows over bins with a Bloom filter: `L = 8` levels of `N = 16` bins, a flow's 32-bit hash cut
//! into eight 4-bit indices, one bin per level. Every bin counts the packets queued of the flows that map
//! to it. On arrival, each of the packet's eight bins updates its `p` (empty: minus `decrement`; at or
//! over `target` packets: plus `increment`), and the packet is marked — CE, or dropped if it cannot carry
//! CE — with the *smallest* of the eight probabilities: a well-behaved flow shares at least one bin with
//! no aggressive flow, so its probability stays low, while an unresponsive flow drives every one of its
//! bins to 1.
//!
//! A flow whose smallest probability reaches 1 is declared *inelastic* and is no longer marked but rate
//! limited: `penalty_rate` packets per second with a `penalty_burst`, the rest dropped. Past a
//! probability of ½ the marking turns into dropping (`earlydrop`) at twice the excess, since a flow that
//! ignores marks that often is not responding. A packet whose bins all hold `max` packets is dropped
//! (`bucketdrop`), one arriving when the queue holds `limit` packets too (`queuedrop`).
//!
//! Because a hash can make a good flow share all eight bins with bad ones, the hash is changed every
//! `rehash` (Section 4.4 of the paper: moving hash functions), with two sets of bins: for the `db` time
//! before a change, inelastic flows are accounted in both, so that the new set is warm when it takes over.
//!
//! # What tclab models and how
//!
//! All of the above, with the kernel's Q0.16 probabilities, its defaults (tc's: `increment 0.0005`,
//! `decrement 0.00005`, `target 20`, `max 25`, `rehash 600s`, `db 60s`, `penalty_rate 10`,
//! `penalty_burst 20`), its pfifo child of `limit` packets (class `:1`, graftable) and its counters
//! (`earlydrop penaltydrop bucketdrop queuedrop childdrop marked`, then `maxqlen maxprob avgprob` of the
//! current bins). Flows are the flow dissector's keys hashed with a per-set secret drawn from the run's
//! seed; filters on the qdisc may choose the flow instead (their class minor is hashed). Time is jiffies
//! at HZ = 1000. The two hashes of a queued packet ride with it (`Packet::cb`), as in the skb's cb.

use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats,
    Sched, Verdict, Xstats,
};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{self, Block};
use crate::flow::{flow_keys, keyed_hash, splitmix64};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::qdisc::fifo::Fifo;
use crate::Nanos;
use serde::{Deserialize, Serialize};

const BUCKET_SHIFT: u32 = 4;
const NUMBUCKETS: usize = 1 << BUCKET_SHIFT;
const BUCKET_MASK: u32 = NUMBUCKETS as u32 - 1;
const LEVELS: usize = 32 / BUCKET_SHIFT as usize;
/// `SFB_MAX_PROB`: probability 1 in Q0.16 (65535/65536).
pub const MAX_PROB: u32 = 0xffff;
/// Jiffies per second (tclab's HZ).
const HZ: u64 = 1000;

/// `struct tc_sfb_qopt`: what tc sends and the kernel dumps (times in ms, probabilities in Q0.16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfbOptions {
    pub rehash_interval: u32,
    pub warmup_time: u32,
    /// Packets the queue may hold (0: the device's txqueuelen).
    pub limit: u32,
    /// A packet whose bins all hold this many packets is dropped.
    pub max: u32,
    /// The bin occupancy above which a bin's probability rises (`target`).
    pub bin_size: u32,
    pub increment: u32,
    pub decrement: u32,
    pub penalty_rate: u32,
    pub penalty_burst: u32,
}

/// `struct tc_sfb_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfbXstats {
    pub earlydrop: u32,
    pub penaltydrop: u32,
    pub bucketdrop: u32,
    pub queuedrop: u32,
    pub childdrop: u32,
    pub marked: u32,
    pub maxqlen: u32,
    pub maxprob: u32,
    pub avgprob: u32,
}

/// `struct sfb_bucket`: a virtual queue's length and its marking probability.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Bin {
    qlen: u16,
    p_mark: u16,
}

/// `struct sfb_bins`: one set of bins and the secret of its hash.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Bins {
    perturbation: [u64; 2],
    bins: [[Bin; NUMBUCKETS]; LEVELS],
}

/// The bins a 32-bit hash selects, level by level.
fn bin_indices(hash: u32) -> impl Iterator<Item = (usize, usize)> {
    (0..LEVELS).map(move |l| {
        (
            l,
            ((hash >> (l as u32 * BUCKET_SHIFT)) & BUCKET_MASK) as usize,
        )
    })
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued (the child saves its own queue or
/// refuses): both sets of bins with their marking probabilities, the tokens and the rehash clock.
#[derive(Serialize, Deserialize)]
pub struct Sfb {
    handle: Handle,
    child: Option<Sched>,
    block: Block,
    opts: SfbOptions,
    limit: u32,
    rehash_time: u64,
    token_time: u64,
    tokens_avail: u32,
    slot: usize,
    double_buffering: bool,
    bins: [Bins; 2],
    x: SfbXstats,
    stats: QdiscStats,
    rng: u64,
}

/// Jiffies at `now`.
fn jiffies(now: Nanos) -> u64 {
    now / (1_000_000_000 / HZ)
}

impl Sfb {
    pub fn new(handle: Handle, o: &SfbOptions, env: &DevEnv, now: Nanos) -> Sfb {
        let mut q = Sfb {
            handle,
            child: None,
            block: Block::default(),
            opts: *o,
            limit: 0,
            rehash_time: 0,
            token_time: 0,
            tokens_avail: 0,
            slot: 0,
            double_buffering: false,
            bins: Default::default(),
            x: SfbXstats::default(),
            stats: QdiscStats::default(),
            rng: 0x5f_b5eed,
        };
        q.apply(o, env, now);
        q
    }

    /// `sfb_change`: a new pfifo child of `limit` packets (the old one's packets purged), the
    /// parameters, and fresh bins.
    fn apply(&mut self, o: &SfbOptions, env: &DevEnv, now: Nanos) {
        let limit = if o.limit == 0 {
            env.txqueuelen
        } else {
            o.limit
        };
        self.child = Some(Sched::new(
            Handle::UNSPEC,
            Handle(self.handle.0 | 1),
            Box::new(Fifo::pfifo(limit)),
        ));
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.opts = *o;
        self.limit = limit;
        self.rehash_time = jiffies(now);
        self.tokens_avail = o.penalty_burst;
        self.token_time = jiffies(now);
        self.slot = 0;
        self.double_buffering = false;
        self.bins = Default::default();
        self.init_perturbation(0);
        self.init_perturbation(1);
    }

    fn init_perturbation(&mut self, slot: usize) {
        self.bins[slot].perturbation = [splitmix64(&mut self.rng), splitmix64(&mut self.rng)];
    }

    /// `sfb_swap_slot`: the inactive set gets a new secret and becomes the active one.
    fn swap_slot(&mut self) {
        self.init_perturbation(self.slot);
        self.slot ^= 1;
        self.double_buffering = false;
    }

    /// `skb_get_hash_perturb` with the set's secret; never 0 (0 means "not in this set").
    fn flow_hash(&self, pkt: &Packet, slot: usize) -> u32 {
        keyed_hash(self.bins[slot].perturbation, &flow_keys(pkt)).max(1)
    }

    /// Each bin of `hash` in `slot`: an empty one lowers its probability, a full one raises it. Returns
    /// the smallest occupancy and probability among them.
    fn update_bins(&mut self, hash: u32, slot: usize) -> (u32, u32) {
        let (inc, dec, target) = (self.opts.increment, self.opts.decrement, self.opts.bin_size);
        let (mut minqlen, mut p_min) = (u32::MAX, u32::MAX);
        for (l, i) in bin_indices(hash) {
            let b = &mut self.bins[slot].bins[l][i];
            if b.qlen == 0 {
                b.p_mark = (b.p_mark as u32).saturating_sub(dec) as u16;
            } else if b.qlen as u32 >= target {
                b.p_mark = (b.p_mark as u32 + inc).min(MAX_PROB) as u16;
            }
            minqlen = minqlen.min(b.qlen as u32);
            p_min = p_min.min(b.p_mark as u32);
        }
        (minqlen, p_min)
    }

    /// `increment_qlen` / `decrement_qlen` over the sets a packet was hashed into.
    fn count_in_bins(&mut self, hashes: [u32; 2], up: bool) {
        for (slot, h) in hashes.into_iter().enumerate() {
            if h == 0 {
                continue;
            }
            for (l, i) in bin_indices(h) {
                let b = &mut self.bins[slot].bins[l][i];
                b.qlen = if up {
                    b.qlen.saturating_add(1)
                } else {
                    b.qlen.saturating_sub(1)
                };
            }
        }
    }

    /// `sfb_rate_limit`: whether an inelastic flow's packet is over `penalty_rate`/`penalty_burst`.
    fn over_penalty_rate(&mut self, now: Nanos) -> bool {
        let (rate, burst) = (self.opts.penalty_rate, self.opts.penalty_burst);
        if rate == 0 || burst == 0 {
            return true;
        }
        if self.tokens_avail < 1 {
            let j = jiffies(now);
            let age = (10 * HZ).min(j.saturating_sub(self.token_time));
            self.tokens_avail = ((age * rate as u64) / HZ).min(burst as u64) as u32;
            self.token_time = j;
            if self.tokens_avail < 1 {
                return true;
            }
        }
        self.tokens_avail -= 1;
        false
    }

    /// `sfb_compute_qlen`: the largest occupancy, largest and mean probability of the active set.
    fn compute_qlen(&self) -> (u32, u32, u32) {
        let all = self.bins[self.slot].bins.iter().flatten();
        let (mut qlen, mut prob, mut total) = (0u32, 0u32, 0u32);
        for b in all {
            qlen = qlen.max(b.qlen as u32);
            prob = prob.max(b.p_mark as u32);
            total += b.p_mark as u32;
        }
        (qlen, prob, total / (LEVELS * NUMBUCKETS) as u32)
    }

    fn drop_arriving(&mut self, pkt: Packet, cx: &mut Cx, reason: DropReason) -> Verdict {
        self.stats.drops += 1;
        cx.drop_arriving(pkt, reason);
        Verdict::Cn
    }
}

impl Qdisc for Sfb {
    fn kind(&self) -> &'static str {
        "sfb"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0)
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `sfb_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        if self.stats.qlen >= self.limit {
            self.stats.overlimits += 1;
            self.x.queuedrop += 1;
            return self.drop_arriving(pkt, cx, DropReason::TailDrop);
        }
        let now_j = jiffies(cx.now);
        let rehash = self.opts.rehash_interval as u64;
        if rehash > 0 {
            let limit = self.rehash_time + rehash;
            if now_j > limit {
                self.swap_slot();
                self.rehash_time = now_j;
            } else if !self.double_buffering
                && self.opts.warmup_time > 0
                && now_j > limit.saturating_sub(self.opts.warmup_time as u64)
            {
                self.double_buffering = true;
            }
        }
        let mut slot = self.slot;
        let hash = if self.block.filter_list_is_empty() {
            self.flow_hash(&pkt, slot)
        } else {
            match filter::classify(&self.block, &mut pkt, cx) {
                filter::Verdict::Classified { classid, .. } => {
                    keyed_hash(self.bins[slot].perturbation, &[(classid & 0xffff) as u64]).max(1)
                }
                filter::Verdict::Stolen => return Verdict::Stolen,
                filter::Verdict::Shot | filter::Verdict::Unclassified => {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Unclassified);
                    return Verdict::Bypass;
                }
            }
        };
        pkt.cb[slot] = hash;
        let (minqlen, p_min) = self.update_bins(hash, slot);
        slot ^= 1;
        pkt.cb[slot] = 0;
        if minqlen >= self.opts.max {
            self.stats.overlimits += 1;
            self.x.bucketdrop += 1;
            return self.drop_arriving(pkt, cx, DropReason::Overlimit);
        }
        if p_min >= MAX_PROB {
            // Inelastic: rate limited, and in both sets while the next one warms up.
            if self.double_buffering {
                let h = self.flow_hash(&pkt, slot);
                pkt.cb[slot] = h;
                self.update_bins(h, slot);
            }
            if self.over_penalty_rate(cx.now) {
                self.stats.overlimits += 1;
                self.x.penaltydrop += 1;
                return self.drop_arriving(pkt, cx, DropReason::Overlimit);
            }
        } else {
            let r = (splitmix64(&mut self.rng) as u16) as u32 & MAX_PROB;
            if r < p_min {
                if p_min > MAX_PROB / 2 && r < (p_min - MAX_PROB / 2) * 2 {
                    // Marked that often, the flow is unresponsive or the link badly congested.
                    self.x.earlydrop += 1;
                    return self.drop_arriving(pkt, cx, DropReason::Aqm);
                }
                if set_ce(&mut pkt) {
                    self.x.marked += 1;
                } else {
                    self.x.earlydrop += 1;
                    return self.drop_arriving(pkt, cx, DropReason::Aqm);
                }
            }
        }
        let (len, hashes) = (pkt.len, pkt.cb);
        let Some(child) = self.child.as_mut() else {
            // `noop_enqueue`: the child was deleted.
            self.x.childdrop += 1;
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Unclassified);
            return Verdict::Cn;
        };
        let mark = cx.tree_reduced;
        let v = child.q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        if v == Verdict::Success {
            self.stats.backlog += len;
            self.stats.qlen += 1;
            self.count_in_bins(hashes, true);
        } else if v.counts_drop() {
            self.x.childdrop += 1;
            self.stats.drops += 1;
        }
        v
    }

    /// `sfb_dequeue`: the child's packet, taken out of its bins.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let mark = cx.tree_reduced;
        let p = self.child.as_mut().and_then(|c| c.q.dequeue(cx));
        self.stats.reduce(cx.reduced_since(mark));
        let p = p?;
        self.stats.count_unqueued(&p);
        self.stats.count_sent(&p);
        self.count_in_bins(p.cb, false);
        Some(p)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.child.as_mut()?.q.peek(cx)
    }

    /// `sfb_reset`.
    fn reset(&mut self) {
        if let Some(c) = self.child.as_mut() {
            c.q.reset();
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.slot = 0;
        self.double_buffering = false;
        self.bins = Default::default();
        self.init_perturbation(0);
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `sfb_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        let (maxqlen, maxprob, avgprob) = self.compute_qlen();
        Some(Xstats::Sfb(SfbXstats {
            maxqlen,
            maxprob,
            avgprob,
            ..self.x
        }))
    }

    /// `sfb_dump`: the options with the limit in effect.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Sfb(SfbOptions {
            limit: self.limit,
            ..self.opts
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Sfb(o) => {
                self.apply(o, env, now);
                Ok(Vec::new())
            }
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn set_seed(&mut self, seed: u64) {
        self.rng = seed ^ 0x5f_b5eed;
        self.init_perturbation(0);
        self.init_perturbation(1);
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }

    /// `sfb_tcf_block`: filters on the qdisc only.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }
}

/// SFB's one class is its child; `sfb_find` answers for any classid, and `sfb_dump_class` fails, so
/// `tc class show` lists nothing.
impl ClassOps for Sfb {
    fn find(&self, _classid: Handle) -> bool {
        true
    }
    fn leaf(&self, _classid: Handle) -> Option<&Sched> {
        self.child.as_ref()
    }
    fn leaf_mut(&mut self, _classid: Handle) -> Option<&mut Sched> {
        self.child.as_mut()
    }
    fn graft(
        &mut self,
        _classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        Ok(super::one_child_graft(
            &mut self.child,
            &mut self.stats,
            new,
        ))
    }
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: &ClassOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NoSys))
    }
    fn delete_class(&mut self, _: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NoSys))
    }
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        Vec::new()
    }
    fn children(&self) -> Vec<&Sched> {
        self.child.iter().collect()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.child.iter_mut().collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "sfb",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Sfb(o) => Ok((Box::new(Sfb::new(handle, o, env, now)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
