//! `choke` — CHOose and Keep for responsive flows, CHOose and Kill for unresponsive ones, after
//! `net/sched/sch_choke.c` (Pan, Prabhakar, Psounis, "CHOKe: a stateless AQM scheme for approximating
//! fair bandwidth allocation", INFOCOM 2000).
//!
//! # The algorithm
//!
//! CHOKe is RED with one more test that penalises the flows that fill the queue, without keeping any
//! per-flow state. Its average is RED's, of the queue length in *packets*. While the average is above
//! `min`, every arriving packet is compared with one drawn at random from the queue: if both belong to the
//! same flow (same addresses, protocol and ports), *both* are dropped — a flow with many packets queued is
//! likely to be drawn, so an unresponsive flood loses packets in proportion to its share of the queue.
//! Otherwise RED decides: above `max` a forced drop (or a CE mark with `ecn`), between the thresholds a
//! drop or mark with RED's count-spread probability. A packet that survives is queued if the queue holds
//! fewer than `limit` packets.
//!
//! The queue is a ring of `limit + 1` rounded up to a power of two; a packet dropped from the middle
//! leaves a hole, skipped at dequeue and reused when it reaches the head or tail. The random draw tries
//! three positions and falls back to the head if all three are holes.
//!
//! # What tclab models and how
//!
//! The kernel's ring, holes, draw and counters (`tc -s`: `marked early pdrop other matched`). The flow
//! comparison uses tclab's flow dissector (`flow.rs`), whose keys are the same for both directions of a
//! connection where the kernel's digest is not — in one queue the two directions meet only on a bridge.
//! The random draws come from the run's seed. The dropped queued packet's sender is told (the drop list),
//! and the parents' counters follow (`qdisc_tree_reduce_backlog`).

use super::red::{RedOptions, TC_RED_ECN, TC_RED_HARDDROP};
use super::red_impl::{check_params, RedParms, RedVars, RED_STAB_SIZE};
use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::{flow_keys, splitmix64};
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `CHOKE_MAX_QUEUE`.
pub const CHOKE_MAX_QUEUE: u32 = 128 * 1024 - 1;

/// `struct tc_choke_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChokeXstats {
    pub early: u32,
    pub pdrop: u32,
    pub other: u32,
    pub marked: u32,
    pub matched: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the ring's size, RED's average and the
/// generator come with it.
#[derive(Serialize, Deserialize)]
pub struct Choke {
    limit: u32,
    flags: u8,
    parms: RedParms,
    vars: RedVars,
    /// The ring (`tab`), its mask, head and tail; `None` slots are holes.
    #[serde(with = "crate::snapshot::empty_slots")]
    tab: Vec<Option<Packet>>,
    head: usize,
    tail: usize,
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
    matched: u32,
    stats: QdiscStats,
    rng: u64,
    opts: RedOptions,
}

impl Choke {
    pub fn new(o: &RedOptions, now: Nanos) -> Result<Choke, KernelError> {
        let mut q = Choke {
            limit: 0,
            flags: 0,
            parms: RedParms::new(0, 0, 0, 0, 0, &[], 0),
            vars: RedVars::default(),
            tab: Vec::new(),
            head: 0,
            tail: 0,
            prob_drop: 0,
            prob_mark: 0,
            forced_drop: 0,
            forced_mark: 0,
            pdrop: 0,
            matched: 0,
            stats: QdiscStats::default(),
            // Until set_seed: a constant grouped as the words it spells.
            #[allow(clippy::unusual_byte_groupings)]
            rng: 0xc40_6e,
            opts: o.clone(),
        };
        q.apply(o, now)?;
        Ok(q)
    }

    fn mask(&self) -> usize {
        self.tab.len().saturating_sub(1)
    }

    /// `choke_len`: slots between head and tail, holes included.
    fn ring_len(&self) -> usize {
        self.tail.wrapping_sub(self.head) & self.mask()
    }

    /// `choke_change`: checked, then applied; a ring of another size takes the queued packets over in
    /// order (those that no longer fit are dropped).
    fn apply(&mut self, o: &RedOptions, now: Nanos) -> Result<(), KernelError> {
        if o.stab.len() < RED_STAB_SIZE
            || !check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, &o.stab)
            || o.limit > CHOKE_MAX_QUEUE
        {
            return Err(KernelError::new(Errno::Invalid));
        }
        let size = (o.limit as usize + 1).next_power_of_two();
        if size != self.tab.len() {
            let mut queued = Vec::new();
            while self.head != self.tail {
                if let Some(p) = self.tab[self.head].take() {
                    queued.push(p);
                }
                self.head = (self.head + 1) & self.mask();
            }
            let mut tab: Vec<Option<Packet>> = (0..size).map(|_| None).collect();
            let mut tail = 0;
            for p in queued {
                if tail < size - 1 {
                    tab[tail] = Some(p);
                    tail += 1;
                } else {
                    self.stats.qlen = self.stats.qlen.saturating_sub(1);
                    self.stats.backlog = self.stats.backlog.saturating_sub(p.len);
                    self.stats.drops += 1;
                }
            }
            self.tab = tab;
            self.head = 0;
            self.tail = tail;
        }
        self.flags = o.flags;
        self.limit = o.limit;
        self.parms = RedParms::new(
            o.qth_min,
            o.qth_max,
            o.wlog,
            o.plog,
            o.scell_log,
            &o.stab,
            o.max_p,
        );
        self.vars.restart();
        if self.head == self.tail {
            self.vars.idle_since = Some(now);
        }
        self.opts = o.clone();
        Ok(())
    }

    fn random(&mut self) -> u32 {
        (splitmix64(&mut self.rng) >> 32) as u32
    }

    /// `choke_zap_head_holes`.
    fn zap_head_holes(&mut self) {
        loop {
            self.head = (self.head + 1) & self.mask();
            if self.head == self.tail || self.tab[self.head].is_some() {
                break;
            }
        }
    }

    /// `choke_zap_tail_holes`.
    fn zap_tail_holes(&mut self) {
        loop {
            self.tail = self.tail.wrapping_sub(1) & self.mask();
            if self.head == self.tail || self.tab[self.tail].is_some() {
                break;
            }
        }
    }

    /// `choke_peek_random`: three tries at a random slot, then the head.
    fn peek_random(&mut self) -> usize {
        let len = self.ring_len() as u64;
        for _ in 0..3 {
            let r = self.random() as u64;
            // get_random_u32_below(len): the high half of r·len.
            let idx = (self.head + ((r * len) >> 32) as usize) & self.mask();
            if self.tab[idx].is_some() {
                return idx;
            }
        }
        self.head
    }

    /// `choke_drop_by_idx`: the queued packet becomes a hole.
    fn drop_by_idx(&mut self, idx: usize, cx: &mut Cx) {
        let Some(p) = self.tab[idx].take() else {
            return;
        };
        if idx == self.head {
            self.zap_head_holes();
        }
        if idx == self.tail {
            self.zap_tail_holes();
        }
        self.stats.qlen -= 1;
        self.stats.backlog -= p.len;
        self.stats.drops += 1;
        cx.reduce_backlog(1, p.len as i64);
        cx.drop_queued(p, DropReason::Aqm);
    }

    fn use_ecn(&self) -> bool {
        self.flags & TC_RED_ECN != 0
    }
}

impl Qdisc for Choke {
    fn kind(&self) -> &'static str {
        "choke"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.tab.iter().all(Option::is_none))
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `choke_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.vars.qavg = self.vars.calc_qavg(&self.parms, self.stats.qlen, cx.now);
        self.vars.idle_since = None;
        let qavg = self.vars.qavg;
        let mut congestion = false;
        if qavg <= self.parms.qth_min as u64 {
            self.vars.qcount = -1;
        } else {
            // Draw a packet at random from the queue and compare flows.
            if self.head != self.tail {
                let idx = self.peek_random();
                let same = self.tab[idx]
                    .as_ref()
                    .is_some_and(|o| o.protocol == pkt.protocol && flow_keys(o) == flow_keys(&pkt));
                if same {
                    self.matched += 1;
                    self.drop_by_idx(idx, cx);
                    congestion = true;
                }
            }
            if !congestion {
                if qavg > self.parms.qth_max as u64 {
                    self.vars.qcount = -1;
                    self.stats.overlimits += 1;
                    if self.flags & TC_RED_HARDDROP != 0 || !self.use_ecn() || !set_ce(&mut pkt) {
                        self.forced_drop += 1;
                        congestion = true;
                    } else {
                        self.forced_mark += 1;
                    }
                } else {
                    let (parms, rng) = (&self.parms, &mut self.rng);
                    let mut rnd = || (splitmix64(rng) >> 32) as u32;
                    if self.vars.between_thresholds(parms, qavg, &mut rnd) {
                        self.stats.overlimits += 1;
                        if !self.use_ecn() || !set_ce(&mut pkt) {
                            self.prob_drop += 1;
                            congestion = true;
                        } else {
                            self.prob_mark += 1;
                        }
                    }
                }
            }
        }
        if congestion {
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Aqm);
            return Verdict::Cn;
        }
        if self.stats.qlen < self.limit {
            self.stats.qlen += 1;
            self.stats.backlog += pkt.len;
            let tail = self.tail;
            self.tab[tail] = Some(pkt);
            self.tail = (tail + 1) & self.mask();
            return Verdict::Success;
        }
        self.pdrop += 1;
        self.stats.drops += 1;
        cx.drop_arriving(pkt, DropReason::TailDrop);
        Verdict::Drop
    }

    /// `choke_dequeue`: the head, skipping holes; an empty queue starts an idle period.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        if self.head == self.tail {
            if self.vars.idle_since.is_none() {
                self.vars.idle_since = Some(cx.now);
            }
            return None;
        }
        let p = self.tab[self.head].take();
        self.zap_head_holes();
        let p = p?;
        self.stats.qlen -= 1;
        self.stats.backlog -= p.len;
        self.stats.bytes += p.len as u64;
        self.stats.packets += p.bstats_packets();
        Some(p)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        if self.head == self.tail {
            return None;
        }
        self.tab[self.head].as_ref()
    }

    /// `choke_reset`.
    fn reset(&mut self) {
        for s in self.tab.iter_mut() {
            *s = None;
        }
        self.head = 0;
        self.tail = 0;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
        self.vars.restart();
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::Choke(ChokeXstats {
            early: self.prob_drop + self.forced_drop,
            pdrop: self.pdrop,
            other: 0,
            marked: self.prob_mark + self.forced_mark,
            matched: self.matched,
        }))
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Choke(RedOptions {
            max_p: self.parms.max_p,
            stab: Vec::new(),
            ..self.opts.clone()
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Choke(o) => self.apply(o, now).map(|_| Vec::new()),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn set_limit(&mut self, _limit: u32) {}

    fn set_seed(&mut self, seed: u64) {
        self.rng = seed ^ 0x43_484f_4b45;
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "choke",
    create: |_handle, opts, _env, now| match opts {
        QdiscOptions::Choke(o) => Ok((Box::new(Choke::new(o, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
