//! SFQ — stochastic fairness queueing, after `net/sched/sch_sfq.c` (Paul McKenney's algorithm, Alexey
//! Kuznetsov's and Eric Dumazet's implementation).
//!
//! Every packet is hashed — addresses, protocol and ports, keyed with a secret *perturbation* — into one of
//! `divisor` buckets. A bucket points at a *slot* (a flow) holding that flow's packets in FIFO order; at most
//! `flows` slots exist, each holding at most `depth` packets, and the whole qdisc at most `limit`. The active
//! slots form a ring; dequeue serves it round robin by *deficit*: a slot's `allot` starts at `quantum`
//! bytes, each packet sent subtracts its length, and a slot whose allot is spent gives its turn to the next
//! one and gets `quantum` more for its next turn. N backlogged flows therefore share the link equally in
//! bytes whatever their packet sizes, and a flow that floods only ever fills its own slot.
//!
//! When the qdisc is full, the packet dropped is taken from the *longest* slot — the flow responsible for
//! the congestion pays for it (from its tail, or from its head with `headdrop`). The kernel finds that slot
//! in O(1) by keeping the slots in lists by depth (`dep[]`), newest first; tclab keeps the same lists so that
//! among equally long slots it picks the one the kernel picks.
//!
//! Collisions are what "stochastic" means: two flows hashed into one bucket share a slot. Re-drawing the
//! secret every `perturb` seconds moves them apart; queued packets are rehashed then so that no flow is
//! reordered. The kernel draws the secret from `get_random_bytes`; tclab draws it from a generator seeded by
//! [`Sfq::set_seed`] (a fixed default), so that a run is reproducible.
//!
//! Deliberately not modelled: RED on each flow (`redflowlimit`): its parameters are accepted, validated and
//! shown as the kernel shows them, but packets are not marked or dropped early. Filters attached to SFQ
//! (`tc filter add … parent 10: flow hash keys …`) choose the bucket instead of the hash.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::flow::{flow_keys, keyed_hash, splitmix64};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::{Nanos, NSEC_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `SFQ_MAX_DEPTH`: most packets one flow may hold.
pub const MAX_DEPTH: u32 = 127;
pub const DEFAULT_FLOWS: u32 = 128;
/// `SFQ_MAX_FLOWS`: slot numbers and depth-list heads share one 16-bit index space.
pub const MAX_FLOWS: u32 = 0x10000 - MAX_DEPTH - 1;
pub const DEFAULT_DIVISOR: u32 = 1024;
const EMPTY_SLOT: u16 = 0xffff;
/// The generator's seed when nobody sets one.
pub const DEFAULT_SEED: u64 = 0x5f9_5eed;

/// RED per flow, as tc sends it (`struct tc_sfq_qopt_v1` minus the v0 part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfqRed {
    /// `redflowlimit`, in bytes.
    pub limit: u32,
    pub qth_min: u32,
    pub qth_max: u32,
    pub wlog: u8,
    pub plog: u8,
    pub scell_log: u8,
    /// Maximum marking probability × 2^32.
    pub max_p: u32,
    /// `TC_RED_ECN` (1), `TC_RED_HARDDROP` (2).
    pub flags: u8,
}

/// `struct tc_sfq_qopt_v1`. Zero means "keep the current value" for the numeric fields, as in the kernel;
/// `headdrop` and `red` are always taken. `dump()` returns the values in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfqOptions {
    /// Bytes per round for each flow.
    pub quantum: u32,
    /// Seconds between two draws of the hash secret; 0: never.
    pub perturb_period: i32,
    /// Packets in the whole qdisc.
    pub limit: u32,
    /// Hash buckets (a power of two, at most 65536).
    pub divisor: u32,
    /// Slots (flows) at most.
    pub flows: u32,
    /// Packets per flow at most.
    pub depth: u32,
    pub headdrop: bool,
    pub red: Option<SfqRed>,
}

/// One flow: its packets and its place in the ring of active slots.
#[derive(Default, Serialize, Deserialize)]
struct Slot {
    #[serde(skip)]
    packets: VecDeque<Packet>,
    /// Next active slot in the round-robin ring.
    next: u16,
    /// The bucket that points here.
    hash: u16,
    /// Bytes this slot may still send in the current round.
    allot: i64,
    backlog: u32,
}

#[derive(Serialize, Deserialize)]
pub struct Sfq {
    // parameters
    limit: u32,
    divisor: u32,
    headdrop: bool,
    maxdepth: u32,
    maxflows: u32,
    quantum: u32,
    perturb_period_s: i32,
    red: Option<SfqRed>,
    // state
    /// The hash secret, and the generator it is drawn from.
    perturbation: [u64; 2],
    rng: u64,
    next_perturb: Option<Nanos>,
    /// bucket → slot, `EMPTY_SLOT` if none.
    #[serde(with = "sparse_ht")]
    ht: Vec<u16>,
    slots: Vec<Slot>,
    /// Doubly linked lists of slots by depth: indices `0..slots.len()` are slots, `slots.len() + d` is
    /// the head of the list of slots holding `d` packets (`dep[0]` are the free slots). The kernel puts
    /// the heads at `SFQ_MAX_FLOWS + d`; after the slots, the tables are sized by the flows (128 by
    /// default), not by 65 536 (256 KiB a qdisc, and as much in a store's snapshot).
    dep_next: Vec<u16>,
    dep_prev: Vec<u16>,
    /// Depth of the longest slot.
    cur_depth: u32,
    /// The slot served last; its `next` is the one served next. `None`: no active slot.
    tail: Option<u16>,
    stats: QdiscStats,
    /// This qdisc's handle, for `skb->priority` naming one of its buckets.
    handle: Handle,
    /// Filters attached to the qdisc (`q->filter_list`), e.g. `flow hash keys …`.
    block: Block,
}

/// `ht` in a snapshot: its length and only the buckets that point at a slot — none in a store's SFQ,
/// which queues nothing. 1 024 empty buckets were 3 KB of varints a qdisc, and decoding them made a
/// cold read of 10 000 SFQ leaves slower than replaying the journal.
mod sparse_ht {
    use super::EMPTY_SLOT;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(ht: &[u16], s: S) -> Result<S::Ok, S::Error> {
        let used: Vec<(u32, u16)> = (0u32..)
            .zip(ht)
            .filter(|(_, &x)| x != EMPTY_SLOT)
            .map(|(i, &x)| (i, x))
            .collect();
        (ht.len() as u32, used).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
        let (len, used) = <(u32, Vec<(u32, u16)>)>::deserialize(d)?;
        // The divisor's bound (sfq_change): no allocation from a length no SFQ has.
        if len > 65536 {
            return Err(D::Error::custom("sfq: more than 65 536 buckets"));
        }
        let mut ht = vec![EMPTY_SLOT; len as usize];
        for (i, x) in used {
            *ht.get_mut(i as usize)
                .ok_or_else(|| D::Error::custom("sfq: a bucket past the divisor"))? = x;
        }
        Ok(ht)
    }
}

impl Sfq {
    /// `sfq_init`: the defaults, then the options if tc sent any.
    pub fn new(
        opts: Option<&SfqOptions>,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<(Sfq, Vec<Warning>), KernelError> {
        let mut q = Sfq {
            limit: MAX_DEPTH,
            divisor: DEFAULT_DIVISOR,
            headdrop: false,
            maxdepth: MAX_DEPTH,
            maxflows: DEFAULT_FLOWS,
            quantum: env.psched_mtu().clamp(256, 1 << 20),
            perturb_period_s: 0,
            red: None,
            perturbation: [0; 2],
            rng: DEFAULT_SEED,
            next_perturb: None,
            ht: Vec::new(),
            slots: Vec::new(),
            dep_next: Vec::new(),
            dep_prev: Vec::new(),
            cur_depth: 0,
            tail: None,
            stats: QdiscStats::default(),
            handle: Handle::UNSPEC,
            block: Block::default(),
        };
        q.draw_secret();
        if let Some(o) = opts {
            q.apply(o, now)?;
        }
        q.ht = vec![EMPTY_SLOT; q.divisor as usize];
        q.slots = (0..q.maxflows).map(|_| Slot::default()).collect();
        let nodes = q.slots.len() + MAX_DEPTH as usize + 1;
        q.dep_next = vec![0; nodes];
        q.dep_prev = vec![0; nodes];
        for d in 0..=MAX_DEPTH as usize {
            let head = (q.slots.len() + d) as u16;
            q.dep_next[head as usize] = head;
            q.dep_prev[head as usize] = head;
        }
        for x in 0..q.maxflows as u16 {
            q.link(x);
        }
        Ok((q, Vec::new()))
    }

    /// Seed the generator the perturbation secret is drawn from, and draw a new secret from it. The engine
    /// (or a test) calls this with the run's seed; without it the default seed is used.
    pub fn set_seed(&mut self, seed: u64) {
        self.rng = seed;
        self.draw_secret();
        if self.tail.is_some() {
            // Outside any call: what a re-seed drops is freed at once.
            self.rehash(&mut Cx::new(0));
        }
    }

    fn draw_secret(&mut self) {
        self.perturbation = [splitmix64(&mut self.rng), splitmix64(&mut self.rng)];
    }

    /// `sfq_perturbation`, run when its timer is due: a new secret, queued packets rehashed.
    fn perturb_if_due(&mut self, cx: &mut Cx) {
        let Some(at) = self.next_perturb else { return };
        let now = cx.now;
        if now < at {
            return;
        }
        self.draw_secret();
        if self.tail.is_some() {
            self.rehash(cx);
        }
        self.next_perturb = Some(now + self.perturb_period_s as u64 * NSEC_PER_SEC);
    }

    fn hash(&self, pkt: &Packet) -> u32 {
        keyed_hash(self.perturbation, &flow_keys(pkt)) & (self.divisor - 1)
    }

    /// Tell the qdisc its handle (the engine does, once it is known).
    pub fn with_handle(mut self, handle: Handle) -> Sfq {
        self.handle = handle;
        self
    }

    /// `sfq_classify`: the bucket (0-based) for a packet, or `None` to drop it. `skb->priority` naming a
    /// bucket of this qdisc comes first; then, if filters are attached, their result's minor names the
    /// bucket (1..=divisor) and a packet no filter matched is dropped, as in the kernel; without filters,
    /// the keyed hash decides. `Err` is the verdict for a packet not to be queued: `Bypass` (dropped,
    /// counted) or `Stolen` (an action took it).
    fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<u32, Verdict> {
        let minor = pkt.priority & 0xffff;
        if self.handle != Handle::UNSPEC
            && pkt.priority & 0xffff_0000 == self.handle.0
            && (1..=self.divisor).contains(&minor)
        {
            return Ok(minor - 1);
        }
        if self.block.filter_list_is_empty() {
            return Ok(self.hash(pkt));
        }
        match crate::filter::classify(&self.block, pkt, cx) {
            FilterVerdict::Classified { classid, .. } => {
                let m = classid & 0xffff;
                if (1..=self.divisor).contains(&m) {
                    Ok(m - 1)
                } else {
                    Err(Verdict::Bypass)
                }
            }
            FilterVerdict::Stolen => Err(Verdict::Stolen),
            FilterVerdict::Shot | FilterVerdict::Unclassified => Err(Verdict::Bypass),
        }
    }

    // ----- the depth lists (`sfq_link`, `sfq_dec`, `sfq_inc`) -----

    fn qlen_of(&self, x: u16) -> u32 {
        self.slots[x as usize].packets.len() as u32
    }

    /// The index of the head of the list of slots holding `d` packets (`SFQ_MAX_FLOWS + d` in the
    /// kernel; here just after the slots, whose number init fixes).
    fn dep_head(&self, d: u32) -> usize {
        self.slots.len() + d as usize
    }

    /// Put slot `x` at the head of the list for its current depth.
    fn link(&mut self, x: u16) {
        let head = self.dep_head(self.qlen_of(x)) as u16;
        let n = self.dep_next[head as usize];
        self.dep_prev[x as usize] = head;
        self.dep_next[x as usize] = n;
        self.dep_next[head as usize] = x;
        self.dep_prev[n as usize] = x;
    }

    fn unlink(&mut self, x: u16) {
        let (p, n) = (self.dep_prev[x as usize], self.dep_next[x as usize]);
        self.dep_next[p as usize] = n;
        self.dep_prev[n as usize] = p;
    }

    /// Called after a packet left slot `x`.
    fn dec(&mut self, x: u16) {
        self.unlink(x);
        let d = self.qlen_of(x);
        let head = self.dep_head(d + 1);
        if self.dep_next[head] as usize == head && self.cur_depth == d + 1 {
            self.cur_depth = d;
        }
        self.link(x);
    }

    /// Called after a packet joined slot `x`.
    fn inc(&mut self, x: u16) {
        self.unlink(x);
        self.link(x);
        self.cur_depth = self.cur_depth.max(self.qlen_of(x));
    }

    /// `sfq_drop`: make room by dropping from the longest slot. Returns the slot, the packet dropped, and
    /// whether that slot held only this packet or it was taken from the tail (so that, if the slot is the
    /// arriving packet's, the caller knows the packet dropped is the one that just arrived).
    fn drop_from_longest(&mut self) -> Option<(u16, Packet, bool)> {
        let d = self.cur_depth;
        let x = if d > 1 {
            self.dep_next[self.dep_head(d)]
        } else if d == 1 {
            // Every slot holds one packet: drop the next one the round robin would serve.
            let tail = self.tail?;
            let x = self.slots[tail as usize].next;
            if self.slots[x as usize].next == x {
                self.tail = None;
            } else {
                self.slots[tail as usize].next = self.slots[x as usize].next;
            }
            let h = self.slots[x as usize].hash;
            self.ht[h as usize] = EMPTY_SLOT;
            x
        } else {
            return None;
        };
        let slot = &mut self.slots[x as usize];
        let newest = !self.headdrop || slot.packets.len() == 1;
        let pkt = if self.headdrop {
            slot.packets.pop_front()
        } else {
            slot.packets.pop_back()
        }?;
        slot.backlog -= pkt.len;
        self.dec(x);
        self.stats.count_unqueued(&pkt);
        self.stats.drops += 1;
        Some((x, pkt, newest))
    }

    /// `sfq_rehash`: after a new secret, move every queued packet to the slot its new hash names, keeping
    /// the order in which they were queued within each old slot.
    fn rehash(&mut self, cx: &mut Cx) {
        let mut all = Vec::new();
        for i in 0..self.slots.len() {
            if self.slots[i].packets.is_empty() {
                continue;
            }
            while let Some(p) = self.slots[i].packets.pop_front() {
                self.dec(i as u16);
                all.push(p);
            }
            self.slots[i].backlog = 0;
            let h = self.slots[i].hash;
            self.ht[h as usize] = EMPTY_SLOT;
        }
        self.tail = None;
        for pkt in all {
            let hash = self.hash(&pkt) as usize;
            let mut x = self.ht[hash];
            if x == EMPTY_SLOT {
                x = self.dep_next[self.dep_head(0)];
                if x as usize >= self.slots.len() {
                    self.stats.count_unqueued(&pkt);
                    self.stats.drops += 1;
                    cx.drop_queued(pkt, DropReason::MaxFlows);
                    continue;
                }
                self.ht[hash] = x;
                self.slots[x as usize].hash = hash as u16;
            } else if self.qlen_of(x) >= self.maxdepth {
                self.stats.count_unqueued(&pkt);
                self.stats.drops += 1;
                cx.drop_queued(pkt, DropReason::TailDrop);
                continue;
            }
            let slot = &mut self.slots[x as usize];
            slot.backlog += pkt.len;
            slot.packets.push_back(pkt);
            self.inc(x);
            if self.qlen_of(x) == 1 {
                self.activate(x);
            }
        }
    }

    /// A slot that just got its first packet joins the end of the ring with a fresh quantum.
    fn activate(&mut self, x: u16) {
        match self.tail {
            None => self.slots[x as usize].next = x,
            Some(t) => {
                self.slots[x as usize].next = self.slots[t as usize].next;
                self.slots[t as usize].next = x;
            }
        }
        self.tail = Some(x);
        self.slots[x as usize].allot = self.quantum as i64;
    }

    /// Validate and apply options (`sfq_change`); nothing changes on error.
    fn apply(&mut self, o: &SfqOptions, now: Nanos) -> Result<(), KernelError> {
        if o.divisor != 0 && (!o.divisor.is_power_of_two() || o.divisor > 65536) {
            return Err(KernelError::new(Errno::Invalid));
        }
        if (o.quantum as i32) < 0 {
            return Err(KernelError::invalid("sch_sfq: invalid quantum"));
        }
        if o.quantum > 1 << 20 {
            return Err(KernelError::invalid("sch_sfq: quantum too large"));
        }
        // The kernel keeps the period in jiffies; INT_MAX / HZ with HZ = 1000.
        if o.perturb_period < 0 || o.perturb_period > i32::MAX / 1000 {
            return Err(KernelError::invalid("sch_sfq: invalid perturb period"));
        }
        if let Some(r) = &o.red {
            if r.wlog >= 32 || r.scell_log >= 32 || r.qth_max < r.qth_min {
                return Err(KernelError::new(Errno::Invalid));
            }
        }
        let mut quantum = self.quantum;
        let mut maxflows = self.maxflows;
        let mut divisor = self.divisor;
        let mut maxdepth = self.maxdepth;
        let mut limit = self.limit;
        if o.quantum != 0 {
            quantum = o.quantum.max(256);
        }
        if o.flows != 0 {
            maxflows = o.flows.min(MAX_FLOWS);
        }
        if o.divisor != 0 {
            divisor = o.divisor;
            maxflows = maxflows.min(divisor);
        }
        if o.depth != 0 {
            maxdepth = o.depth.min(MAX_DEPTH);
        }
        if o.limit != 0 {
            limit = o.limit.min(maxdepth * maxflows);
            maxflows = maxflows.min(limit);
        }
        if limit == 1 {
            return Err(KernelError::invalid("sch_sfq: invalid limit"));
        }
        // A change may not resize the tables the kernel allocated at init: sfq_change keeps them.
        if !self.slots.is_empty() {
            maxflows = maxflows.min(self.slots.len() as u32);
            divisor = self.divisor;
        }
        self.limit = limit;
        self.divisor = divisor;
        self.headdrop = o.headdrop;
        self.maxdepth = maxdepth;
        self.maxflows = maxflows;
        self.perturb_period_s = o.perturb_period;
        self.quantum = quantum;
        if o.red.is_some() {
            self.red = o.red;
        }
        while self.stats.qlen > self.limit {
            // Packets dropped by a change are freed at once (`rtnl_kfree_skbs`): no driver hears of them.
            if self.drop_from_longest().is_none() {
                break;
            }
        }
        self.next_perturb = None;
        if self.perturb_period_s > 0 {
            self.next_perturb = Some(now + self.perturb_period_s as u64 * NSEC_PER_SEC);
            self.draw_secret();
        }
        Ok(())
    }

    /// Packets queued in each active slot, in round-robin order from the next to be served (for tests and
    /// the checker).
    pub fn flow_lengths(&self) -> Vec<usize> {
        let Some(t) = self.tail else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut x = self.slots[t as usize].next;
        loop {
            out.push(self.slots[x as usize].packets.len());
            if x == t {
                break;
            }
            x = self.slots[x as usize].next;
        }
        out
    }
}

impl Qdisc for Sfq {
    fn kind(&self) -> &'static str {
        "sfq"
    }
    fn save(&self) -> Option<Vec<u8>> {
        self.slots
            .iter()
            .all(|s| s.packets.is_empty())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }
    /// `sfq_tcf_block`: filters attach to the qdisc, not to its flows.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    /// `sfq_enqueue`. Every drop names its packet in `cx.drops`; the verdict is the kernel's: `Drop`
    /// when the arriving packet was refused, `Cn` when a packet of its own flow went (the arriving one
    /// or, with `headdrop`, the flow's oldest), `Success` when it is queued and only another flow paid.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.perturb_if_due(cx);
        let hash = match self.classify(&mut pkt, cx) {
            Ok(hash) => hash,
            Err(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Unclassified);
                }
                return v;
            }
        };
        let mut x = self.ht[hash as usize];
        if x == EMPTY_SLOT {
            x = self.dep_next[self.dep_head(0)];
            if x as usize >= self.slots.len() {
                self.stats.drops += 1;
                cx.drop_arriving(pkt, DropReason::MaxFlows);
                return Verdict::Drop;
            }
            self.ht[hash as usize] = x;
            self.slots[x as usize].hash = hash as u16;
            self.slots[x as usize].backlog = 0;
        } else if self.qlen_of(x) >= self.maxdepth {
            // The flow is at its depth: drop the newcomer, or its oldest packet with headdrop.
            self.stats.drops += 1;
            if !self.headdrop {
                cx.drop_arriving(pkt, DropReason::TailDrop);
                return Verdict::Drop;
            }
            let slot = &mut self.slots[x as usize];
            let Some(head) = slot.packets.pop_front() else {
                cx.drop_arriving(pkt, DropReason::TailDrop);
                return Verdict::Drop;
            };
            slot.backlog = slot.backlog - head.len + pkt.len;
            self.stats.backlog = self.stats.backlog - head.len + pkt.len;
            // One packet in, one out: the ancestors correct their bytes by the difference, and count
            // a drop (NET_XMIT_CN) without counting the arriving packet in their queue.
            cx.reduce_backlog(0, head.len as i64 - pkt.len as i64);
            slot.packets.push_back(pkt);
            cx.drop_queued(head, DropReason::HeadDrop);
            return Verdict::Cn;
        }
        let len = pkt.len;
        self.stats.count_queued(&pkt);
        let slot = &mut self.slots[x as usize];
        slot.backlog += len;
        slot.packets.push_back(pkt);
        self.inc(x);
        if self.qlen_of(x) == 1 {
            self.activate(x);
        }
        if self.stats.qlen <= self.limit {
            return Verdict::Success;
        }
        // Full: the longest flow pays (`sfq_drop`). If that was this packet's own flow the kernel answers
        // NET_XMIT_CN (a drop, for the parent) and corrects the ancestors' bytes by the difference;
        // otherwise it answers success and takes the dropped packet off the ancestors' counters
        // (`qdisc_tree_reduce_backlog`).
        let Some((victim_slot, victim, newest)) = self.drop_from_longest() else {
            return Verdict::Success;
        };
        let dropped = victim.len as i64;
        let own = victim_slot == x;
        if own && newest {
            cx.drop_arriving(victim, DropReason::Overlimit);
        } else {
            cx.drop_queued(victim, DropReason::Overlimit);
        }
        if own {
            cx.reduce_backlog(0, dropped - len as i64);
            return Verdict::Cn;
        }
        cx.reduce_backlog(1, dropped);
        Verdict::Success
    }

    /// `sfq_dequeue`.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.perturb_if_due(cx);
        let mut tail = self.tail?;
        let mut a;
        loop {
            a = self.slots[tail as usize].next;
            if self.slots[a as usize].allot > 0 {
                break;
            }
            // This flow has spent its quantum: it waits for the next round.
            tail = a;
            self.tail = Some(a);
            self.slots[a as usize].allot += self.quantum as i64;
        }
        let slot = &mut self.slots[a as usize];
        let pkt = slot.packets.pop_front()?;
        slot.backlog -= pkt.len;
        self.dec(a);
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        let slot = &mut self.slots[a as usize];
        if slot.packets.is_empty() {
            let h = slot.hash;
            let next_a = slot.next;
            self.ht[h as usize] = EMPTY_SLOT;
            if a == next_a {
                self.tail = None;
            } else {
                self.slots[tail as usize].next = next_a;
            }
        } else {
            slot.allot -= pkt.len as i64;
        }
        Some(pkt)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        // The slot the next dequeue serves: the first one after the tail with allot left, or, if all
        // have spent theirs, the one after the tail (it gets a new quantum first).
        let tail = self.tail?;
        let mut x = self.slots[tail as usize].next;
        let start = x;
        loop {
            if self.slots[x as usize].allot > 0 {
                break;
            }
            x = self.slots[x as usize].next;
            if x == start {
                break;
            }
        }
        self.slots[x as usize].packets.front()
    }

    fn reset(&mut self) {
        let mut cx = Cx::new(0);
        let next = self.next_perturb.take();
        let sent = (self.stats.bytes, self.stats.packets);
        while self.dequeue(&mut cx).is_some() {}
        (self.stats.bytes, self.stats.packets) = sent;
        self.next_perturb = next;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Sfq(SfqOptions {
            quantum: self.quantum,
            perturb_period: self.perturb_period_s,
            limit: self.limit,
            divisor: self.divisor,
            flows: self.maxflows,
            depth: self.maxdepth,
            headdrop: self.headdrop,
            red: self.red,
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Sfq(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        self.apply(o, now)?;
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        Sfq::set_seed(self, seed);
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "sfq",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Sfq(o) => {
            let (q, w) = Sfq::new(Some(o), env, now)?;
            Ok((Box::new(q.with_handle(handle)), w))
        }
        _ => Err(super::wrong_kind()),
    },
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

    fn udp(src: u32, sport: u16, len: u32) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[9] = 17;
        d[12..16].copy_from_slice(&src.to_be_bytes());
        d[16..20].copy_from_slice(&0x0a00_0001u32.to_be_bytes());
        d[20..22].copy_from_slice(&sport.to_be_bytes());
        d[22..24].copy_from_slice(&5001u16.to_be_bytes());
        Packet {
            data: d,
            len,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    #[test]
    fn defaults_are_the_kernels() {
        // sfq_init: limit = depth = 127, 128 flows, 1024 buckets, quantum = psched_mtu = 1500 + 14.
        let (q, _) = Sfq::new(None, &env(), 0).unwrap();
        let QdiscOptions::Sfq(o) = q.dump() else {
            panic!()
        };
        assert_eq!(
            (o.limit, o.depth, o.flows, o.divisor, o.quantum),
            (127, 127, 128, 1024, 1514)
        );
    }

    #[test]
    fn limit_is_capped_by_depth_times_flows_and_flows_by_limit() {
        // sfq_change: limit = min(limit, depth * flows); flows = min(flows, limit).
        let o = SfqOptions {
            limit: 10_000,
            depth: 10,
            flows: 16,
            ..Default::default()
        };
        let (q, _) = Sfq::new(Some(&o), &env(), 0).unwrap();
        assert_eq!((q.limit, q.maxflows), (160, 16));
        let o = SfqOptions {
            limit: 8,
            ..Default::default()
        };
        let (q, _) = Sfq::new(Some(&o), &env(), 0).unwrap();
        assert_eq!((q.limit, q.maxflows), (8, 8));
    }

    #[test]
    fn divisor_must_be_a_power_of_two_and_limit_one_is_refused() {
        for bad in [3u32, 1000, 131072] {
            let o = SfqOptions {
                divisor: bad,
                ..Default::default()
            };
            assert!(Sfq::new(Some(&o), &env(), 0).is_err(), "divisor {bad}");
        }
        let o = SfqOptions {
            limit: 1,
            ..Default::default()
        };
        assert!(Sfq::new(Some(&o), &env(), 0).is_err());
    }

    #[test]
    fn truncated_and_non_ip_packets_hash_without_panicking() {
        let mut p = udp(1, 1, 100);
        for n in 0..p.data.len() {
            let mut t = p.clone();
            t.data.truncate(n);
            flow_keys(&t);
        }
        p.data[0] = 0x43; // IHL 3 < 5
        assert_eq!(*flow_keys(&p), [0x0800]);
        p.protocol = 0x0806;
        assert_eq!(*flow_keys(&p), [0x0806], "non-IP: keyed by EtherType only");
    }

    #[test]
    fn both_directions_of_a_flow_share_keys_and_fragments_lose_ports() {
        let a = udp(0x0a00_0002, 1234, 100);
        let mut b = a.clone();
        // Swap addresses and ports.
        b.data[12..16].copy_from_slice(&0x0a00_0001u32.to_be_bytes());
        b.data[16..20].copy_from_slice(&0x0a00_0002u32.to_be_bytes());
        b.data[20..22].copy_from_slice(&5001u16.to_be_bytes());
        b.data[22..24].copy_from_slice(&1234u16.to_be_bytes());
        assert_eq!(flow_keys(&a), flow_keys(&b));
        let mut f = a.clone();
        f.data[6] = 0x20; // More Fragments
        assert_eq!(*flow_keys(&f).last().unwrap(), 0, "no ports in a fragment");
    }

    #[test]
    fn the_secret_changes_every_perturb_seconds_and_is_reproducible() {
        let o = SfqOptions {
            perturb_period: 10,
            ..Default::default()
        };
        let (mut q, _) = Sfq::new(Some(&o), &env(), 0).unwrap();
        let first = q.perturbation;
        let mut cx = Cx::new(9 * NSEC_PER_SEC);
        q.enqueue(udp(1, 1, 100), &mut cx);
        assert_eq!(q.perturbation, first, "not yet due at 9 s");
        let mut cx = Cx::new(10 * NSEC_PER_SEC);
        q.dequeue(&mut cx);
        assert_ne!(q.perturbation, first, "re-drawn at 10 s");
        let (mut again, _) = Sfq::new(Some(&o), &env(), 0).unwrap();
        again.perturb_if_due(&mut Cx::new(10 * NSEC_PER_SEC));
        assert_eq!(again.perturbation, q.perturbation, "same seed, same draws");
    }

    #[test]
    fn the_tables_are_sized_by_the_flows_and_the_most_flows_still_work() {
        // The kernel's sfq_sched_data holds dep[SFQ_MAX_DEPTH + 1] and maxflows slots; tclab's depth
        // lists were 65 536 entries each whatever the flows, 256 KiB a qdisc and 135 KB of a store's
        // snapshot (1.35 GB for 10 000 SFQ leaves). Default: 128 slots + 128 heads, and a snapshot
        // without the 1 024 empty buckets.
        let (q, _) = Sfq::new(None, &env(), 0).unwrap();
        assert_eq!(q.dep_next.len(), 128 + MAX_DEPTH as usize + 1);
        let saved = crate::snapshot::save(&q).unwrap();
        assert!(saved.len() < 3 << 10, "{} bytes", saved.len());
        // SFQ_MAX_FLOWS slots: the heads end at index 65 535, still a u16. Three flows queue and
        // leave in round robin (a quantum, 1514 bytes, each turn), the second packet of one waits its turn, and the slots come back free.
        let o = SfqOptions {
            flows: MAX_FLOWS,
            divisor: 65536,
            // (flows = min(flows, limit): a limit above them keeps them all.)
            limit: 200_000,
            ..Default::default()
        };
        let (mut q, _) = Sfq::new(Some(&o), &env(), 0).unwrap();
        assert_eq!(q.dep_next.len(), 0x10000);
        let mut cx = Cx::new(0);
        for (src, n) in [(1, 2), (2, 1), (3, 1)] {
            for _ in 0..n {
                assert!(matches!(
                    q.enqueue(udp(src, 1, 1514), &mut cx),
                    Verdict::Success
                ));
            }
        }
        let mut order = Vec::new();
        while let Some(p) = q.dequeue(&mut cx) {
            order.push(p.data[15]);
        }
        assert_eq!(order, [1, 2, 3, 1]);
        assert_eq!(q.stats.qlen, 0);
        assert_eq!(q.cur_depth, 0);
    }

    #[test]
    fn a_restored_sfq_picks_the_same_slots_and_serves_in_the_same_order() {
        // After traffic the free slots are in the order the flows emptied them, and the next flow
        // takes the first: the snapshot keeps that order and rebuilds the empty buckets.
        let mut cx = Cx::new(0);
        let (mut q, _) = Sfq::new(None, &env(), 0).unwrap();
        for src in [5, 6, 7, 6] {
            q.enqueue(udp(src, 1, 1514), &mut cx);
        }
        while q.dequeue(&mut cx).is_some() {}
        let saved = q.save().expect("nothing queued: a snapshot form");
        let mut r: Sfq = postcard::from_bytes(&saved).unwrap();
        assert_eq!(r.ht, q.ht);
        assert!(r.ht.iter().all(|&x| x == EMPTY_SLOT));
        let mut order = |q: &mut Sfq| {
            for src in [9, 8, 9, 10] {
                q.enqueue(udp(src, 2, 1514), &mut cx);
            }
            let slots: Vec<u16> = q.ht.iter().copied().filter(|&x| x != EMPTY_SLOT).collect();
            let mut out = Vec::new();
            while let Some(p) = q.dequeue(&mut cx) {
                out.push(p.data[15]);
            }
            (slots, out)
        };
        assert_eq!(order(&mut r), order(&mut q));
        // A length no SFQ has is refused, not allocated.
        let bad = postcard::to_allocvec(&(70_000u32, Vec::<(u32, u16)>::new())).unwrap();
        assert!(postcard::from_bytes::<Wrapped>(&bad).is_err());
        let ok = postcard::to_allocvec(&(16u32, vec![(3u32, 7u16)])).unwrap();
        let Wrapped(ht) = postcard::from_bytes(&ok).unwrap();
        assert_eq!((ht.len(), ht[3], ht[4]), (16, 7, EMPTY_SLOT));
    }

    #[derive(serde::Deserialize)]
    struct Wrapped(#[serde(with = "sparse_ht")] Vec<u16>);
}
