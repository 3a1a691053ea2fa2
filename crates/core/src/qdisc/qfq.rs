//! QFQ — Quick Fair Queueing Plus, after `net/sched/sch_qfq.c` (Checconi, Rizzo and Valente, "QFQ:
//! Efficient Packet Scheduling with Tight Bandwidth Distribution Guarantees"; Valente, "Reducing the
//! Execution Time of Fair-Queueing Schedulers").
//!
//! **What it promises.** Each class has a weight `w` (1 … 1024) and a maximum packet length `lmax`
//! (512 B … 64 KiB). Backlogged classes share the link in proportion to their weights, and — unlike DRR,
//! whose error grows with the number of classes — each class's service stays within a few `lmax` of what
//! the ideal fluid system (WF²Q+) would have given it, at O(1) cost per packet whatever the number of
//! classes.
//!
//! **Virtual time.** The scheduler keeps a system virtual time `V`, advanced by `len / Σw` for every
//! packet sent (`V += len · iwsum`, with `iwsum = 2^30 / Σw`: all times are fixed point with 30
//! fractional bits). A schedulable entity gets a start `S` and a finish `F = S + budget / w` when it
//! becomes busy: `S = max(V, previous F)`. It is *eligible* while `S ≤ V`, and among eligible entities
//! the smallest `F` goes first. That is WF²Q+, and done exactly it needs a sorted structure: O(log N).
//!
//! **Aggregates (QFQ+).** Classes with the same weight and `lmax` are put together, up to 8 of them (or
//! `txqueuelen + 1` rounded down to a power of two, if smaller), into an *aggregate*, which is what
//! gets timestamps. An aggregate of `n` classes has weight `n·w` and a budget of `n·lmax` bytes per
//! turn; inside it the classes take turns by DRR with quantum `lmax`. When its turn ends (budget spent
//! or no packet fits) it is charged what it really sent, `F = S + sent / (n·w)`, and rescheduled with
//! `S = F`; a newly busy aggregate starts from `V` (or from the finish of a blocking group, see below).
//!
//! **Groups and slots: the O(1) part.** An aggregate belongs for life to group `i = ⌈log2(budget /
//! weight)⌉` (scaled; 25 groups), whose *slot size* is `σᵢ = 2^(min_slot_shift + i)`. Within a group
//! timestamps are rounded down to a multiple of `σᵢ`, and the busy aggregates sit in a ring of 32
//! *slots* by rounded start (a bitmap `full_slots` finds the first busy one with one `ffs`). A group's
//! own `S` is its first slot's, its `F = S + 2σᵢ`. Each busy group is in one of four sets, kept as
//! bitmaps indexed by group: eligible or ineligible (`S ≤ V`), ready or blocked (blocked: a lower-index
//! eligible group finishes earlier). The invariant that makes it O(1): the eligible-ready groups are
//! ordered by `F` as they are by index, so the next aggregate is the head of the first slot of the
//! lowest set bit of `ER`. Sending moves `V`; the groups whose slot boundary `V` crossed become
//! eligible (one mask from the highest flipped bit of `V >> min_slot_shift`), and a group leaving `ER`
//! unblocks the groups below it. Every step is a handful of bit operations: no loop over classes,
//! aggregates or groups, which is what "QFQ flat" in the benchmark shows.
//!
//! **Packets larger than `lmax`.** The kernel does not drop them: the class moves to an aggregate with
//! `lmax` equal to the packet's length (visible as `maxpkt` in `tc class show`), unless the length is
//! above 64 KiB (a size table's overhead can make it so), in which case the packet is dropped and
//! counted as a drop of the qdisc.
//!
//! **Configuration.** `tc class add … qfq [weight W] [maxpkt BYTES]`: the weight defaults to 1, `lmax` to
//! `psched_mtu` (refused if that is outside 512 … 65536: a jumbo or tiny MTU needs `maxpkt`); the sum of
//! weights may not exceed 65536. Classes are flat (the parent is the root), each starting with a `pfifo`
//! of `txqueuelen` packets. Classification as DRR: a `skb->priority` naming a class, then the qdisc's
//! filters; unclassified packets are dropped. `tc -s class show` counts a class's bytes and packets when
//! they are **enqueued** (the kernel updates the class's `bstats` in `qfq_enqueue`), its queue figures
//! from its child. The qdisc has no options.
//!
//! Where the kernel leaves a case to a `BUG_ON` or a stale local (a child that empties itself while being
//! peeked), this port takes the class off its aggregate and starts the dequeue again.

use super::class_hash::ClassHash;
use super::class_table::ClassTable;
use super::drr::{classify_flat, enqueue_child, refuse_unclassified};
use super::fifo::Fifo;
use super::{ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, PeekDequeued, Peeked, Sched, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::Block;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `QFQ_MAX_SLOTS`: the slots of a group's ring.
const MAX_SLOTS: u64 = 32;
/// `QFQ_MAX_INDEX`: the highest group index.
const MAX_INDEX: usize = 24;
/// `QFQ_MAX_WEIGHT`.
pub const MAX_WEIGHT: u32 = 1 << 10;
/// `QFQ_MAX_WSUM`: the sum of all classes' weights.
pub const MAX_WSUM: u32 = 64 * MAX_WEIGHT;
/// `FRAC_BITS`, `ONE_FP`.
const FRAC_BITS: u32 = 30;
const ONE_FP: u64 = 1 << FRAC_BITS;
/// `QFQ_MTU_SHIFT`.
const MTU_SHIFT: u32 = 16;
/// `QFQ_MIN_LMAX`, `QFQ_MAX_LMAX`.
pub const MIN_LMAX: u32 = 512;
pub const MAX_LMAX: u32 = 1 << MTU_SHIFT;
/// `QFQ_MAX_AGG_CLASSES`.
const MAX_AGG_CLASSES: u64 = 8;

/// The group sets (`enum qfq_state`): eligible/ineligible × ready/blocked.
const ER: usize = 0;
const IR: usize = 1;
const EB: usize = 2;
const IB: usize = 3;

/// `TCA_QFQ_WEIGHT` and `TCA_QFQ_LMAX` of a class, each `None` when tc does not send it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QfqClassOptions {
    pub weight: Option<u32>,
    pub lmax: Option<u32>,
}

/// `struct qfq_class`.
#[derive(Serialize, Deserialize)]
struct QfqClass {
    q: Sched,
    /// The aggregate it belongs to (an index into `Qfq::aggs`).
    agg: usize,
    /// DRR deficit within the aggregate.
    deficit: i64,
    /// On its aggregate's active list.
    active: bool,
    /// `cl->bstats`, counted at enqueue.
    bytes: u64,
    packets: u64,
}

/// `struct qfq_aggregate`.
#[derive(Serialize, Deserialize)]
struct Agg {
    /// Exact timestamps.
    s: u64,
    f: u64,
    grp: Option<usize>,
    class_weight: u32,
    /// Also the DRR quantum of its classes.
    lmax: u32,
    /// `ONE_FP / (class_weight · num_classes)`.
    inv_w: u32,
    budgetmax: u32,
    initial_budget: u32,
    budget: u32,
    num_classes: u32,
    /// The DRR queue of its classes with packets.
    active: VecDeque<u32>,
}

/// `struct qfq_group`.
#[derive(Serialize, Deserialize)]
struct Group {
    /// Approximate (slot-rounded) timestamps.
    s: u64,
    f: u64,
    slot_shift: u32,
    index: usize,
    /// The ring position of slot 0.
    front: u64,
    /// Bit k: slot k (from `front`) is not empty.
    full_slots: u64,
    /// Each slot's aggregates, the head last (`hlist_add_head`).
    slots: [Vec<usize>; MAX_SLOTS as usize],
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued.
#[derive(Serialize, Deserialize)]
pub struct Qfq {
    handle: Handle,
    /// Both saved as byte strings of their own, which a filter listing's decode skips: no class has
    /// filters (`crate::snapshot::FilterListing`).
    #[serde(with = "crate::snapshot::classes")]
    classes: ClassTable<QfqClass>,
    #[serde(with = "crate::snapshot::classes")]
    hash: ClassHash,
    /// The aggregates; freed entries are reused (lowest index last freed first).
    aggs: Vec<Option<Agg>>,
    free_aggs: Vec<usize>,
    /// `nonfull_aggs`: aggregates with room for another class, the head first.
    nonfull: Vec<usize>,
    // virtual time
    v: u64,
    old_v: u64,
    in_serv: Option<usize>,
    wsum: u32,
    iwsum: u32,
    bitmaps: [u64; 4],
    groups: Vec<Group>,
    min_slot_shift: u32,
    max_agg_classes: u32,
    /// `sch->q` qlen and backlog, sent bytes and packets, drops.
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
    block: Block,
}

/// `qfq_gt`: a > b in wrapping arithmetic.
fn gt(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

/// `qfq_round_down`.
fn round_down(ts: u64, shift: u32) -> u64 {
    ts & !((1u64 << shift) - 1)
}

/// `mask_from`: the bits of `bitmap` at `from` and above.
fn mask_from(bitmap: u64, from: usize) -> u64 {
    bitmap & !((1u64 << from) - 1)
}

/// `__ffs` of a non-zero bitmap.
fn ffs(bitmap: u64) -> usize {
    bitmap.trailing_zeros() as usize
}

/// `qfq_calc_index`: the group of an aggregate, `log2(maxlen / weight)` scaled and rounded up.
fn calc_index(inv_w: u32, maxlen: u32, min_slot_shift: u32) -> usize {
    let slot_size = maxlen as u64 * inv_w as u64;
    let size_map = slot_size >> min_slot_shift;
    if size_map == 0 {
        return 0;
    }
    let mut index = 64 - size_map.leading_zeros() as i64;
    if slot_size == 1u64 << (index + min_slot_shift as i64 - 1) {
        index -= 1;
    }
    index.clamp(0, MAX_INDEX as i64) as usize
}

enum Reason {
    Enqueue,
    Requeue,
}

/// What the head class of an aggregate has to send.
enum Head {
    /// A packet of this length from this class.
    Packet(u32, u32),
    /// The class's child holds its packets back (not work-conserving).
    Held,
    /// The class's child emptied itself; the class must leave its aggregate.
    Emptied(u32),
}

impl Qfq {
    /// `qfq_init_qdisc`.
    pub fn new(handle: Handle, env: &DevEnv) -> Qfq {
        let max_classes = (env.txqueuelen as u64 + 1).min(MAX_AGG_CLASSES);
        let max_cl_shift = 63 - max_classes.leading_zeros();
        let min_slot_shift = FRAC_BITS + MTU_SHIFT + max_cl_shift - MAX_INDEX as u32;
        Qfq {
            handle,
            classes: ClassTable::new(),
            hash: ClassHash::new(),
            aggs: Vec::new(),
            free_aggs: Vec::new(),
            nonfull: Vec::new(),
            v: 0,
            old_v: 0,
            in_serv: None,
            wsum: 0,
            iwsum: 0,
            bitmaps: [0; 4],
            groups: (0..=MAX_INDEX)
                .map(|i| Group {
                    s: 0,
                    f: 0,
                    slot_shift: min_slot_shift + i as u32,
                    index: i,
                    front: 0,
                    full_slots: 0,
                    slots: Default::default(),
                })
                .collect(),
            min_slot_shift,
            max_agg_classes: 1 << max_cl_shift,
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
            block: Block::default(),
        }
    }

    fn agg(&self, a: usize) -> &Agg {
        self.aggs[a].as_ref().expect("a live aggregate")
    }

    fn agg_mut(&mut self, a: usize) -> &mut Agg {
        self.aggs[a].as_mut().expect("a live aggregate")
    }

    fn grp_of(&self, a: usize) -> usize {
        self.agg(a)
            .grp
            .expect("an aggregate with classes has a group")
    }

    fn cl(&mut self, id: u32) -> &mut QfqClass {
        self.classes.get_mut(&id).expect("a class of this qdisc")
    }

    /// The weight and `lmax` of a class (tests, `tc class show`).
    pub fn class_params(&self, classid: Handle) -> Option<(u32, u32)> {
        let cl = self.classes.get(&classid.0)?;
        let a = self.agg(cl.agg);
        Some((a.class_weight, a.lmax))
    }

    // ---- aggregates ------------------------------------------------------------------------------

    /// `qfq_init_agg`: a new, empty aggregate at the head of the non-full list.
    fn init_agg(&mut self, lmax: u32, weight: u32) -> usize {
        let agg = Agg {
            s: 0,
            f: 0,
            grp: None,
            class_weight: weight,
            lmax,
            inv_w: 0,
            budgetmax: 0,
            initial_budget: 0,
            budget: 0,
            num_classes: 0,
            active: VecDeque::new(),
        };
        let a = match self.free_aggs.pop() {
            Some(a) => {
                self.aggs[a] = Some(agg);
                a
            }
            None => {
                self.aggs.push(Some(agg));
                self.aggs.len() - 1
            }
        };
        self.nonfull.insert(0, a);
        a
    }

    /// `qfq_find_agg`.
    fn find_agg(&self, lmax: u32, weight: u32) -> Option<usize> {
        self.nonfull.iter().copied().find(|&a| {
            let agg = self.agg(a);
            agg.lmax == lmax && agg.class_weight == weight
        })
    }

    /// `qfq_update_agg`: the aggregate's budget, weight and (first time) group for `n` classes.
    fn update_agg(&mut self, a: usize, n: u32) {
        let max = self.max_agg_classes;
        if n == max {
            self.nonfull.retain(|&x| x != a);
        }
        if self.agg(a).num_classes > n && n == max - 1 {
            self.nonfull.insert(0, a);
        }
        let min_slot_shift = self.min_slot_shift;
        let agg = self.agg_mut(a);
        agg.budgetmax = n * agg.lmax;
        agg.inv_w = (ONE_FP / (agg.class_weight as u64 * n as u64)) as u32;
        if agg.grp.is_none() {
            agg.grp = Some(calc_index(agg.inv_w, agg.budgetmax, min_slot_shift));
        }
        let delta = agg.class_weight as i64 * (n as i64 - agg.num_classes as i64);
        agg.num_classes = n;
        self.wsum = (self.wsum as i64 + delta) as u32;
        self.iwsum = (ONE_FP / self.wsum as u64) as u32;
    }

    /// `qfq_add_to_agg`.
    fn add_to_agg(&mut self, a: usize, id: u32) {
        self.cl(id).agg = a;
        let n = self.agg(a).num_classes + 1;
        self.update_agg(a, n);
        if self.cl(id).q.q.stats().qlen > 0 {
            self.cl(id).active = true;
            let agg = self.agg_mut(a);
            agg.active.push_back(id);
            if agg.active.front() == Some(&id) && self.in_serv != Some(a) {
                self.activate_agg(a, Reason::Enqueue);
            }
        }
    }

    /// `qfq_destroy_agg`.
    fn destroy_agg(&mut self, a: usize) {
        self.nonfull.retain(|&x| x != a);
        self.wsum -= self.agg(a).class_weight;
        if self.wsum != 0 {
            self.iwsum = (ONE_FP / self.wsum as u64) as u32;
        }
        if self.in_serv == Some(a) {
            self.in_serv = self.choose_next_agg();
        }
        self.aggs[a] = None;
        self.free_aggs.push(a);
    }

    /// `qfq_deactivate_class`: off its aggregate's DRR queue; the aggregate leaves the schedule when
    /// that empties.
    fn deactivate_class(&mut self, id: u32) {
        let cl = self.cl(id);
        cl.active = false;
        let a = cl.agg;
        let agg = self.agg_mut(a);
        agg.active.retain(|&c| c != id);
        if agg.active.is_empty() {
            self.deactivate_agg(a);
        }
    }

    /// `qfq_rm_from_agg`.
    fn rm_from_agg(&mut self, id: u32) {
        let a = self.cl(id).agg;
        let n = self.agg(a).num_classes;
        if n == 1 {
            self.destroy_agg(a);
        } else {
            self.update_agg(a, n - 1);
        }
    }

    /// `qfq_deact_rm_from_agg`.
    fn deact_rm_from_agg(&mut self, id: u32) {
        if self.cl(id).active {
            self.deactivate_class(id);
        }
        self.rm_from_agg(id);
    }

    /// `qfq_change_agg`: move a class to the aggregate of (`lmax`, `weight`).
    fn change_agg(&mut self, id: u32, weight: u32, lmax: u32) -> Result<(), KernelError> {
        if lmax > MAX_LMAX {
            return Err(KernelError::new(Errno::Invalid));
        }
        let a = match self.find_agg(lmax, weight) {
            Some(a) => a,
            None => self.init_agg(lmax, weight),
        };
        self.deact_rm_from_agg(id);
        self.add_to_agg(a, id);
        Ok(())
    }

    /// A class's child emptied or was purged (`qfq_qlen_notify`).
    fn qlen_notify(&mut self, id: u32) {
        if self.cl(id).active {
            self.deactivate_class(id);
        }
    }

    // ---- groups, slots, virtual time --------------------------------------------------------------

    /// `qfq_calc_state`.
    fn calc_state(&self, g: usize) -> usize {
        let grp = &self.groups[g];
        let mut state = gt(grp.s, self.v) as usize;
        let mask = mask_from(self.bitmaps[ER], grp.index);
        if mask != 0 && gt(grp.f, self.groups[ffs(mask)].f) {
            state |= EB;
        }
        state
    }

    /// `qfq_move_groups`.
    fn move_groups(&mut self, mask: u64, src: usize, dst: usize) {
        self.bitmaps[dst] |= self.bitmaps[src] & mask;
        self.bitmaps[src] &= !mask;
    }

    fn clear_bit(&mut self, g: usize, sets: &[usize]) {
        for &s in sets {
            self.bitmaps[s] &= !(1u64 << g);
        }
    }

    fn set_state(&mut self, g: usize) {
        let s = self.calc_state(g);
        self.bitmaps[s] |= 1u64 << g;
    }

    /// `qfq_unblock_groups`.
    fn unblock_groups(&mut self, index: usize, old_f: u64) {
        let mask = mask_from(self.bitmaps[ER], index + 1);
        if mask != 0 && !gt(self.groups[ffs(mask)].f, old_f) {
            return;
        }
        let mask = (1u64 << index) - 1;
        self.move_groups(mask, EB, ER);
        self.move_groups(mask, IB, IR);
    }

    /// `qfq_make_eligible`: the groups whose slot boundary V crossed become eligible. (The kernel's
    /// `fls` takes an `unsigned int`: only the low 32 bits of the flipped slots count.)
    fn make_eligible(&mut self) {
        let vslot = self.v >> self.min_slot_shift;
        let old_vslot = self.old_v >> self.min_slot_shift;
        if vslot != old_vslot {
            let last_flip_pos = 32 - ((vslot ^ old_vslot) as u32).leading_zeros();
            let mask = if last_flip_pos > 31 {
                !0
            } else {
                (1u64 << last_flip_pos) - 1
            };
            self.move_groups(mask, IR, ER);
            self.move_groups(mask, IB, EB);
        }
    }

    /// `qfq_slot_insert`: into the slot of `rounded_s`, at most `MAX_SLOTS - 2` ahead (shifting the
    /// aggregate's timestamps back if it would be further).
    fn slot_insert(&mut self, g: usize, a: usize, rounded_s: u64) {
        let (grp_s, shift) = (self.groups[g].s, self.groups[g].slot_shift);
        let mut slot = rounded_s.wrapping_sub(grp_s) >> shift;
        if slot > MAX_SLOTS - 2 {
            let delta = rounded_s
                .wrapping_sub(grp_s)
                .wrapping_sub((MAX_SLOTS - 2) << shift);
            let agg = self.agg_mut(a);
            agg.s = agg.s.wrapping_sub(delta);
            agg.f = agg.f.wrapping_sub(delta);
            slot = MAX_SLOTS - 2;
        }
        let grp = &mut self.groups[g];
        let i = ((grp.front + slot) % MAX_SLOTS) as usize;
        grp.slots[i].push(a);
        grp.full_slots |= 1u64 << slot;
    }

    /// `qfq_slot_head`.
    fn slot_head(&self, g: usize) -> Option<usize> {
        let grp = &self.groups[g];
        grp.slots[grp.front as usize].last().copied()
    }

    /// `qfq_front_slot_remove`.
    fn front_slot_remove(&mut self, g: usize) {
        let grp = &mut self.groups[g];
        let front = &mut grp.slots[grp.front as usize];
        front.pop();
        if front.is_empty() {
            grp.full_slots &= !1;
        }
    }

    /// `qfq_slot_scan`: the head of the first busy slot, which becomes slot 0.
    fn slot_scan(&mut self, g: usize) -> Option<usize> {
        let grp = &mut self.groups[g];
        if grp.full_slots == 0 {
            return None;
        }
        let i = grp.full_slots.trailing_zeros() as u64;
        if i > 0 {
            grp.front = (grp.front + i) % MAX_SLOTS;
            grp.full_slots >>= i;
        }
        self.slot_head(g)
    }

    /// `qfq_slot_rotate`: the group's start moves back to `rounded_s`; the ring turns with it.
    fn slot_rotate(&mut self, g: usize, rounded_s: u64) {
        let grp = &mut self.groups[g];
        let i = (grp.s.wrapping_sub(rounded_s) >> grp.slot_shift) as u32;
        grp.full_slots = grp.full_slots.checked_shl(i).unwrap_or(0);
        grp.front = ((grp.front as u32).wrapping_sub(i) % MAX_SLOTS as u32) as u64;
    }

    /// `qfq_update_eligible`: if nothing is eligible, V jumps to the first ineligible group's start.
    fn update_eligible(&mut self) {
        let ineligible = self.bitmaps[IR] | self.bitmaps[IB];
        if ineligible != 0 {
            if self.bitmaps[ER] == 0 {
                let s = self.groups[ffs(ineligible)].s;
                if gt(s, self.v) {
                    self.v = s;
                }
            }
            self.make_eligible();
        }
    }

    /// `qfq_choose_next_agg`: the head of the first slot of the first eligible-ready group.
    fn choose_next_agg(&mut self) -> Option<usize> {
        self.update_eligible();
        self.old_v = self.v;
        if self.bitmaps[ER] == 0 {
            return None;
        }
        let g = ffs(self.bitmaps[ER]);
        let old_f = self.groups[g].f;
        let a = self.slot_head(g)?;
        self.front_slot_remove(g);
        match self.slot_scan(g) {
            None => self.clear_bit(g, &[ER]),
            Some(next) => {
                let shift = self.groups[g].slot_shift;
                let rounded_s = round_down(self.agg(next).s, shift);
                if self.groups[g].s == rounded_s {
                    return Some(a);
                }
                self.groups[g].s = rounded_s;
                self.groups[g].f = rounded_s.wrapping_add(2u64 << shift);
                self.clear_bit(g, &[ER]);
                self.set_state(g);
            }
        }
        self.unblock_groups(g, old_f);
        Some(a)
    }

    /// `qfq_update_start`: a newly busy aggregate starts at V, or at its old finish if that is still
    /// ahead and not stale, or no earlier than a blocking group's finish.
    fn update_start(&mut self, a: usize) {
        let g = self.grp_of(a);
        let shift = self.groups[g].slot_shift;
        let f = self.agg(a).f;
        let rounded_f = round_down(f, shift);
        let limit = round_down(self.v, shift).wrapping_add(1u64 << shift);
        let s = if !gt(f, self.v) || gt(rounded_f, limit) {
            let mask = mask_from(self.bitmaps[ER], self.groups[g].index);
            let next_f = (mask != 0).then(|| self.groups[ffs(mask)].f);
            match next_f {
                Some(nf) if gt(rounded_f, nf) => {
                    if gt(limit, nf) {
                        nf
                    } else {
                        limit
                    }
                }
                _ => self.v,
            }
        } else {
            f
        };
        self.agg_mut(a).s = s;
    }

    /// `qfq_update_agg_ts`.
    fn update_agg_ts(&mut self, a: usize, reason: Reason) {
        match reason {
            Reason::Enqueue => self.update_start(a),
            Reason::Requeue => {
                let agg = self.agg_mut(a);
                agg.s = agg.f;
            }
        }
        let agg = self.agg_mut(a);
        agg.f = agg.s.wrapping_add(agg.budgetmax as u64 * agg.inv_w as u64);
    }

    /// `qfq_schedule_agg`.
    fn schedule_agg(&mut self, a: usize) {
        let g = self.grp_of(a);
        let shift = self.groups[g].slot_shift;
        let agg_s = self.agg(a).s;
        let rounded_s = round_down(agg_s, shift);
        let update = if self.groups[g].full_slots != 0 {
            if gt(self.groups[g].s, agg_s) {
                self.slot_rotate(g, rounded_s);
                self.clear_bit(g, &[IR, IB]);
                true
            } else {
                false
            }
        } else {
            if self.bitmaps[ER] == 0 && gt(rounded_s, self.v) && self.in_serv.is_none() {
                self.v = rounded_s;
            }
            true
        };
        if update {
            self.groups[g].s = rounded_s;
            self.groups[g].f = rounded_s.wrapping_add(2u64 << shift);
            self.set_state(g);
        }
        self.slot_insert(g, a, rounded_s);
    }

    /// `qfq_activate_agg`.
    fn activate_agg(&mut self, a: usize, reason: Reason) {
        let agg = self.agg_mut(a);
        agg.budget = agg.budgetmax;
        agg.initial_budget = agg.budgetmax;
        self.update_agg_ts(a, reason);
        if self.in_serv.is_none() {
            self.in_serv = Some(a);
            self.v = self.agg(a).s;
            self.old_v = self.v;
        } else if self.in_serv != Some(a) {
            self.schedule_agg(a);
        }
    }

    /// `qfq_slot_remove`.
    fn slot_remove(&mut self, g: usize, a: usize) {
        let rounded_s = round_down(self.agg(a).s, self.groups[g].slot_shift);
        let grp = &mut self.groups[g];
        let offset = (rounded_s.wrapping_sub(grp.s) >> grp.slot_shift) as u32 as u64;
        let i = ((grp.front + offset) % MAX_SLOTS) as usize;
        if let Some(pos) = grp.slots[i].iter().position(|&x| x == a) {
            grp.slots[i].remove(pos);
            if grp.slots[i].is_empty() {
                grp.full_slots &= !1u64.checked_shl(offset as u32).unwrap_or(0);
            }
        }
    }

    /// `qfq_deactivate_agg`: an aggregate with no more packets leaves the schedule.
    fn deactivate_agg(&mut self, a: usize) {
        if self.in_serv == Some(a) {
            self.charge_actual_service(a);
            self.in_serv = self.choose_next_agg();
            return;
        }
        let g = self.grp_of(a);
        let agg = self.agg_mut(a);
        agg.f = agg.s;
        self.slot_remove(g, a);
        let index = self.groups[g].index;
        if self.groups[g].full_slots == 0 {
            self.clear_bit(g, &[IR, EB, IB]);
            let er = self.bitmaps[ER];
            if er & (1u64 << index) != 0 && er & !((1u64 << index) - 1) == 0 {
                let below = er & ((1u64 << index) - 1);
                let mask = if below != 0 {
                    !((1u64 << (63 - below.leading_zeros())) - 1)
                } else {
                    !0
                };
                self.move_groups(mask, EB, ER);
                self.move_groups(mask, IB, IR);
            }
            self.clear_bit(g, &[ER]);
        } else if self.groups[g].slots[self.groups[g].front as usize].is_empty() {
            let Some(next) = self.slot_scan(g) else {
                return;
            };
            let shift = self.groups[g].slot_shift;
            let rounded_s = round_down(self.agg(next).s, shift);
            if self.groups[g].s != rounded_s {
                self.clear_bit(g, &[ER, IR, EB, IB]);
                self.groups[g].s = rounded_s;
                self.groups[g].f = rounded_s.wrapping_add(2u64 << shift);
                self.set_state(g);
            }
        }
    }

    /// `charge_actual_service`: F from what the aggregate really sent in its turn.
    fn charge_actual_service(&mut self, a: usize) {
        let agg = self.agg_mut(a);
        let received = agg
            .budgetmax
            .min(agg.initial_budget.wrapping_sub(agg.budget));
        agg.f = agg.s.wrapping_add(received as u64 * agg.inv_w as u64);
    }

    // ---- the packet path --------------------------------------------------------------------------

    /// `qfq_peek_skb`: the head class of an aggregate and its next packet's length.
    fn peek_head(&mut self, a: usize, cx: &mut Cx) -> Head {
        let Some(&id) = self.agg(a).active.front() else {
            return Head::Held;
        };
        let child = &mut self.cl(id).q.q;
        match child.peek(cx).map(|p| p.len) {
            Some(len) => Head::Packet(id, len),
            None if child.stats().qlen == 0 => Head::Emptied(id),
            None => Head::Held,
        }
    }

    /// `agg_dequeue`: the head class sends; DRR inside the aggregate.
    fn agg_dequeue(&mut self, a: usize, id: u32, len: u32, cx: &mut Cx) -> Option<Packet> {
        let lmax = self.agg(a).lmax as i64;
        let cl = self.cl(id);
        let pkt = cl.q.q.dequeue(cx)?;
        cl.deficit -= len as i64;
        let rotate = if cl.q.q.stats().qlen == 0 {
            cl.active = false;
            self.agg_mut(a).active.retain(|&c| c != id);
            false
        } else {
            let next = cl.q.q.peek(cx).map_or(0, |p| p.len) as i64;
            if cl.deficit < next {
                cl.deficit += lmax;
                true
            } else {
                false
            }
        };
        if rotate {
            let active = &mut self.agg_mut(a).active;
            active.retain(|&c| c != id);
            active.push_back(id);
        }
        Some(pkt)
    }

    /// One attempt of `qfq_dequeue`; `Err(())` asks for another (a class left its aggregate).
    fn try_dequeue(&mut self, cx: &mut Cx) -> Result<Option<Packet>, ()> {
        let Some(mut a) = self.in_serv else {
            return Ok(None);
        };
        let mut head = if self.agg(a).active.is_empty() {
            Head::Held
        } else {
            self.peek_head(a, cx)
        };
        if let Head::Emptied(id) = head {
            self.qlen_notify(id);
            return Err(());
        }
        let len = match head {
            Head::Packet(_, len) => len,
            _ => 0,
        };
        if len == 0 || self.agg(a).budget < len {
            self.charge_actual_service(a);
            let agg = self.agg_mut(a);
            agg.budget = agg.budgetmax;
            agg.initial_budget = agg.budgetmax;
            if !agg.active.is_empty() {
                self.update_agg_ts(a, Reason::Requeue);
                self.schedule_agg(a);
            } else if self.stats.qlen == 0 {
                self.in_serv = None;
                return Ok(None);
            }
            self.in_serv = self.choose_next_agg();
            let Some(next) = self.in_serv else {
                return Ok(None);
            };
            a = next;
            head = self.peek_head(a, cx);
            if let Head::Emptied(id) = head {
                self.qlen_notify(id);
                return Err(());
            }
        }
        let Head::Packet(id, len) = head else {
            return Ok(None);
        };
        let Some(pkt) = self.agg_dequeue(a, id, len, cx) else {
            return Ok(None);
        };
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        let agg = self.agg_mut(a);
        agg.budget = agg.budget.saturating_sub(len);
        self.v = self.v.wrapping_add(len as u64 * self.iwsum as u64);
        Ok(Some(pkt))
    }

    fn deactivate_all(&mut self) {
        let ids: Vec<u32> = self.hash.walk().collect();
        for id in ids {
            if self.cl(id).active {
                self.deactivate_class(id);
            }
            self.cl(id).q.q.reset();
        }
    }
}

impl PeekDequeued for Qfq {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }

    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet> {
        let mark = cx.tree_reduced;
        let p = loop {
            if let Ok(p) = self.try_dequeue(cx) {
                break p;
            }
        };
        self.stats.reduce(cx.reduced_since(mark));
        p
    }
}

impl Qdisc for Qfq {
    fn kind(&self) -> &'static str {
        "qfq"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `qfq_tcf_block`: filters attach to the qdisc only.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    /// `qfq_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let classes = &self.classes;
        let id = match classify_flat(
            self.handle,
            &self.block,
            |c| classes.contains_key(&c),
            &mut pkt,
            cx,
        ) {
            Ok(id) => id,
            Err(v) => {
                return refuse_unclassified(&mut self.stats, pkt, v, DropReason::Unclassified, cx)
            }
        };
        cx.tag_leaf(&mut pkt, id);
        let len = pkt.len;
        let a = self.cl(id).agg;
        if self.agg(a).lmax < len {
            // The class grows into an aggregate whose lmax is this packet's length, if it can.
            let weight = self.agg(a).class_weight;
            if self.change_agg(id, weight, len).is_err() {
                self.stats.drops += 1;
                cx.drop_arriving(pkt, DropReason::Overlimit);
                return Verdict::Drop;
            }
        }
        let segs = pkt.bstats_packets();
        let cl = self.classes.get_mut(&id).expect("a class of this qdisc");
        if let Err(v) = enqueue_child(&mut self.stats, &mut *cl.q.q, pkt, cx) {
            return v;
        }
        let cl = self.cl(id);
        cl.bytes += len as u64;
        cl.packets += segs;
        let (active, qlen, deficit, a) = (cl.active, cl.q.q.stats().qlen, cl.deficit, cl.agg);
        self.stats.backlog = self.stats.backlog.wrapping_add(len);
        self.stats.qlen += 1;
        let lmax = self.agg(a).lmax;
        let agg = self.agg_mut(a);
        if active {
            // The packet is the class's head (it had none) and the class heads the aggregate without
            // the deficit to send it: its turn is over.
            if qlen == 1 && agg.active.front() == Some(&id) && deficit < len as i64 {
                agg.active.pop_front();
                agg.active.push_back(id);
            }
            return Verdict::Success;
        }
        agg.active.push_back(id);
        let first = agg.active.front() == Some(&id);
        let cl = self.cl(id);
        cl.deficit = lmax as i64;
        cl.active = true;
        if first && self.in_serv != Some(a) {
            self.activate_agg(a, Reason::Enqueue);
        }
        Verdict::Success
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    /// `qfq_reset_qdisc` and `qdisc_reset`.
    fn reset(&mut self) {
        self.deactivate_all();
        self.peeked.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// QFQ dumps no options.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Qfq
    }

    /// QFQ has no `change` operation; tc never sends it options, so a change is a no-op.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Qfq => Ok(Vec::new()),
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

/// The netlink policy's refusal of a value outside its range.
fn out_of_range() -> KernelError {
    KernelError::msg(Errno::Range, "integer out of range")
}

impl ClassOps for Qfq {
    fn find(&self, classid: Handle) -> bool {
        self.classes.contains_key(&classid.0)
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.classes.get(&classid.0).map(|c| &c.q)
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.classes.get_mut(&classid.0).map(|c| &mut c.q)
    }

    /// `qfq_graft_class`: `None` puts a default pfifo back; the old child's packets are purged.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        if !self.classes.contains_key(&classid.0) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified class not found",
            ));
        }
        let new = new.unwrap_or_else(|| Fifo::default_child(classid.0, env));
        let mut old = std::mem::replace(&mut self.cl(classid.0).q, new);
        let s = old.q.stats();
        old.q.reset();
        self.stats.reduce((s.qlen as i64, s.backlog as i64));
        self.qlen_notify(classid.0);
        Ok(Some(old))
    }

    /// `qfq_change_class`: create a class or move it to the aggregate of its new weight and lmax.
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let ClassOptions::Qfq(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        if o.weight.is_some_and(|w| !(1..=MAX_WEIGHT).contains(&w))
            || o.lmax.is_some_and(|l| !(MIN_LMAX..=MAX_LMAX).contains(&l))
        {
            return Err(out_of_range());
        }
        let weight = o.weight.unwrap_or(1);
        let lmax = match o.lmax {
            Some(l) => l,
            None => {
                let mtu = env.psched_mtu();
                if !(MIN_LMAX..=MAX_LMAX).contains(&mtu) {
                    return Err(KernelError::invalid(
                        "sch_qfq: MTU size out of bounds for qfq",
                    ));
                }
                mtu
            }
        };
        let weight = (ONE_FP / (ONE_FP / weight as u64)) as u32;
        let existing = self.classes.get(&classid.0).map(|c| {
            let a = self.agg(c.agg);
            (a.class_weight, a.lmax)
        });
        if existing == Some((weight, lmax)) {
            return Ok(Vec::new());
        }
        let delta_w = weight as i64 - existing.map_or(0, |e| e.0 as i64);
        if self.wsum as i64 + delta_w > MAX_WSUM as i64 {
            return Err(KernelError::invalid(format!(
                "sch_qfq: total weight out of range ({delta_w} + {})\n",
                self.wsum
            )));
        }
        let a = match self.find_agg(lmax, weight) {
            Some(a) => a,
            None => self.init_agg(lmax, weight),
        };
        if existing.is_some() {
            self.deact_rm_from_agg(classid.0);
        } else {
            self.classes.insert(
                classid.0,
                QfqClass {
                    q: Fifo::default_child(classid.0, env),
                    agg: a,
                    deficit: lmax as i64,
                    active: false,
                    bytes: 0,
                    packets: 0,
                },
            );
            self.hash.insert(classid.0);
        }
        self.add_to_agg(a, classid.0);
        self.hash.grow();
        Ok(Vec::new())
    }

    /// `qfq_delete_class`: refused while a filter is bound to it; otherwise its queue is purged.
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError> {
        if !self.classes.contains_key(&classid.0) {
            return Err(KernelError::new(Errno::NoEntry));
        }
        if self.block.binds(classid.0) {
            return Err(KernelError::msg(Errno::Busy, "sch_qfq: QFQ class in use"));
        }
        let cl = self.cl(classid.0);
        let s = cl.q.q.stats();
        cl.q.q.reset();
        self.stats.reduce((s.qlen as i64, s.backlog as i64));
        self.qlen_notify(classid.0);
        self.hash.remove(classid.0);
        self.rm_from_agg(classid.0);
        self.classes.remove(&classid.0);
        Ok(())
    }

    /// `qfq_walk` + `qfq_dump_class(_stats)`: weight and maxpkt; bytes and packets as enqueued, the
    /// queue figures of the child.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.hash
            .walk()
            .filter_map(|id| {
                let cl = self.classes.get(&id)?;
                let agg = self.agg(cl.agg);
                Some(ClassInfo {
                    kind: "qfq",
                    classid: Handle(id),
                    parent: Handle::ROOT,
                    leaf: (cl.q.handle != Handle::UNSPEC).then_some(cl.q.handle),
                    options: Some(ClassOptions::Qfq(QfqClassOptions {
                        weight: Some(agg.class_weight),
                        lmax: Some(agg.lmax),
                    })),
                    stats: QdiscStats {
                        bytes: cl.bytes,
                        packets: cl.packets,
                        ..cl.q.q.stats()
                    },
                    htb_xstats: None,
                    xstats: None,
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
    name: "qfq",
    create: |handle, _opts, env, _now| Ok((Box::new(Qfq::new(handle, env)), Vec::new())),
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

    fn add(
        q: &mut Qfq,
        minor: u16,
        weight: Option<u32>,
        lmax: Option<u32>,
        env: &DevEnv,
    ) -> Result<Vec<Warning>, KernelError> {
        q.change_class(
            Handle::new(1, minor),
            Handle::ROOT,
            &ClassOptions::Qfq(QfqClassOptions { weight, lmax }),
            env,
            0,
        )
    }

    #[test]
    fn group_index_is_log2_of_budget_over_weight() {
        // txqueuelen 1000: 8 classes an aggregate, min_slot_shift = 30 + 16 + 3 - 24 = 25.
        let q = Qfq::new(Handle::new(1, 0), &ENV);
        assert_eq!((q.min_slot_shift, q.max_agg_classes), (25, 8));
        // lmax 1514, weight 1: 1514 · 2^30 >> 25 = 48 448 → fls 16, not a power of two → group 16.
        assert_eq!(calc_index((ONE_FP) as u32, 1514, 25), 16);
        // 2048 · 2^30 / 2^25 = 65 536 = 2^16 exactly → 17 − 1 = 16.
        assert_eq!(calc_index(ONE_FP as u32, 2048, 25), 16);
        // Weight 1024 and lmax 512: 512 · 2^20 >> 25 = 16 → group 4 (2^4 exactly: 5 − 1).
        assert_eq!(calc_index((ONE_FP / 1024) as u32, 512, 25), 4);
        // The largest budget, 8 · 64 KiB at weight 1: 2^19 · 2^30 >> 25 = 2^24 → group 24, the last.
        assert_eq!(calc_index(ONE_FP as u32, 8 << 16, 25), 24);
    }

    #[test]
    fn class_limits_and_defaults_as_the_kernel_has_them() {
        let mut q = Qfq::new(Handle::new(1, 0), &ENV);
        add(&mut q, 1, None, None, &ENV).unwrap();
        assert_eq!(q.class_params(Handle::new(1, 1)), Some((1, 1514)));
        for (w, l) in [
            (Some(0), None),
            (Some(1025), None),
            (None, Some(511)),
            (None, Some(65537)),
        ] {
            let e = add(&mut q, 2, w, l, &ENV).unwrap_err();
            assert_eq!(
                (e.errno, e.msg.as_deref()),
                (Errno::Range, Some("integer out of range"))
            );
        }
        // An MTU whose psched_mtu is outside 512 … 65536 needs an explicit maxpkt.
        for mtu in [256, 2_147_483_647] {
            let env = DevEnv { mtu, ..ENV };
            let e = add(&mut q, 2, Some(100), None, &env).unwrap_err();
            assert_eq!(
                e.msg.as_deref(),
                Some("sch_qfq: MTU size out of bounds for qfq")
            );
            add(&mut q, 2, Some(100), Some(2000), &env).unwrap();
            q.delete_class(Handle::new(1, 2)).unwrap();
        }
        // Weights add up to at most 65 536: 1 + 64 · 1024 is one too many.
        for minor in 2..=64 {
            add(&mut q, minor, Some(1024), None, &ENV).unwrap();
        }
        let e = add(&mut q, 65, Some(1024), None, &ENV).unwrap_err();
        assert_eq!(
            e.msg.as_deref(),
            Some("sch_qfq: total weight out of range (1024 + 64513)\n")
        );
        assert!(!q.find(Handle::new(1, 65)));
        assert_eq!(q.wsum, 1 + 63 * 1024);
        // Changing a class moves it between aggregates; the weight sum follows.
        add(&mut q, 1, Some(1024), None, &ENV).unwrap();
        assert_eq!(q.wsum, 64 * 1024);
        assert_eq!(q.class_params(Handle::new(1, 1)), Some((1024, 1514)));
    }
}
