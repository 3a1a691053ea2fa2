//! HTB — the hierarchical token bucket, after `net/sched/sch_htb.c` (HTB3, Martin Devera).
//!
//! Classes form a tree up to eight levels deep. Each class has two token buckets: `rate` (guaranteed) with
//! depth `buffer`, and `ceil` (the most it may ever use) with depth `cbuffer`. Tokens are time, as in TBF.
//! Their balance puts every class in one of three modes:
//!
//! - **can send** (green): rate tokens ≥ 0 — it sends on its own;
//! - **may borrow** (yellow): rate tokens < 0 but ceil tokens ≥ 0 — it may send only with tokens borrowed
//!   from an ancestor that can send;
//! - **can't send** (red): ceil tokens < 0.
//!
//! Only leaves hold packets. When a packet leaves class C that was served by ancestor A (the level the
//! dequeue found a green class at), every class from C up to the root is charged: those at or above A's level
//! pay rate tokens ("lends" at A), those below only pay ceil tokens and count a "borrow". All pay ceil tokens.
//!
//! The structure is what makes the cost per packet close to O(log N) rather than O(N) (seed 002):
//!
//! - per level, a **wait queue** of non-green classes ordered by the time their mode will change
//!   (`pq_key`); the dequeue first promotes the classes whose time has come;
//! - per level and priority, a **row**: the green classes at that level with a backlogged descendant of that
//!   priority, and a bit in `row_mask[level]` if the row is non-empty;
//! - per inner class and priority, a **feed**: its yellow children that want to borrow at that priority.
//!
//! Dequeue takes the lowest level, then the lowest priority with a bit set, then descends from the row
//! through feeds to a leaf (`htb_lookup_leaf`). Within one priority the choice is deficit round robin: each
//! leaf may send `quantum` bytes before the row's pointer moves on. Rows and feeds are ordered by classid and
//! the round-robin pointer is kept as a classid, as the kernel keeps `ptr` and `last_ptr_id`.
//!
//! Where the kernel uses rb-trees, tclab uses what is cheaper for the same order. Rows and feeds are bitmaps
//! over the 16-bit classid minor (`MinorSet`): the next class after the pointer is a few word operations,
//! where a tree costs O(log N) cache misses per packet. A class is found by its minor in a table. The wait
//! queues are binary min-heaps keyed by (time, insertion order) with lazy removal (`WaitQueue`): keys
//! arrive almost in time order, so a push rarely climbs, and a class leaving the queue only forgets its
//! entry. (A B-tree set searched every node from the left for keys bound for its right end; an indexed
//! heap, which moves entries to remove them, measured slower than the B-tree.)
//!
//! Unclassified packets go to the `default` class if it is a leaf, otherwise to the direct queue, which is
//! sent before anything else and is not shaped at all (`direct_packets_stat` counts them).
//!
//! Hysteresis (the kernel's `htb_hysteresis` module parameter) is off, as in the kernel's default build.
//! What is deliberately not modelled: hardware offload, rate estimators, the 2-jiffy limit on event
//! processing (virtual time has no jiffies).

use super::class_hash::ClassHash;
use super::fifo::Fifo;
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, HtbXstats, Peeked, Qdisc,
    QdiscOptions, QdiscStats, Sched, Verdict,
};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::Block;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::units::{ns_to_ticks, ticks_to_ns, RateCfg, RateSpec};
use crate::{Nanos, NSEC_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::VecDeque;

pub const MAXDEPTH: usize = 8;
pub const NUMPRIO: usize = 8;
/// `HTB_VER`: 3.17.
pub const VERSION: u32 = 0x30011;

/// `struct tc_htb_glob` and `TCA_HTB_DIRECT_QLEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbOptions {
    pub r2q: u32,
    /// Minor number of the default class (`default 20` is 0x20).
    pub defcls: u32,
    /// `None` takes the device's txqueuelen.
    pub direct_qlen: Option<u32>,
    pub version: u32,
    /// Read back only: packets that went through the direct queue.
    #[serde(default)]
    pub direct_pkts: u32,
}

impl Default for HtbOptions {
    fn default() -> Self {
        HtbOptions {
            r2q: 10,
            defcls: 0,
            direct_qlen: None,
            version: VERSION,
            direct_pkts: 0,
        }
    }
}

/// `struct tc_htb_opt` (+ 64-bit rates): a class as tc sends it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClassOptions {
    pub rate: RateSpec,
    pub ceil: RateSpec,
    /// Bucket depths in psched ticks.
    pub buffer: u32,
    pub cbuffer: u32,
    /// 0: computed from rate / r2q.
    pub quantum: u32,
    pub prio: u32,
    /// Read back only.
    #[serde(default)]
    pub level: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Mode {
    CantSend,
    MayBorrow,
    CanSend,
}

/// An ordered set of classes with a round-robin pointer: a row (`struct htb_prio`) or an inner class's feed
/// (`struct htb_prio` in `inner.clprio`). The pointer is a classid; `last_ptr_id` remembers where a removed
/// pointer was so that the round robin resumes after it.
#[derive(Default, Debug, Serialize, Deserialize)]
struct RoundRobin {
    members: MinorSet,
    ptr: Option<u32>,
    last_ptr_id: u32,
}

impl RoundRobin {
    /// `htb_next_rr`.
    fn advance(&mut self) {
        if let Some(p) = self.ptr {
            self.ptr = self.members.next_after(p);
        }
    }
}

/// The classids of one HTB qdisc, ordered as the kernel's rb-trees order them. They share the qdisc's major,
/// so the order is that of the 16-bit minor, and the set is a three-level bitmap over the minors: a bit per
/// minor in 64-bit words, a bit per non-empty word, a bit per non-empty group of 64 words. Insert, remove,
/// first and "first at or after" are a few word operations whatever the number of classes, where a search
/// tree costs O(log N) cache misses per step of the round robin. Words are allocated 64 at a time (4096
/// minors) on first use, so a set whose classes are numbered close together stays small.
#[derive(Default, Debug, Serialize, Deserialize)]
struct MinorSet {
    /// The major shared by every member (the qdisc's handle).
    major: u32,
    /// Bit `g`: `summary[g] != 0`.
    top: u16,
    /// Bit `w` of `summary[g]`: word `w` of `words[g]` is non-zero.
    summary: [u64; 16],
    /// Group `g` holds the minors `g * 4096 ..`, bit `b` of word `w` is minor `g * 4096 + w * 64 + b`.
    #[serde(with = "crate::snapshot::words")]
    words: [Option<Box<[u64; 64]>>; 16],
}

impl MinorSet {
    fn split(classid: u32) -> (usize, usize, u32) {
        let m = classid & 0xffff;
        ((m >> 12) as usize, ((m >> 6) & 63) as usize, m & 63)
    }

    fn is_empty(&self) -> bool {
        self.top == 0
    }

    fn insert(&mut self, classid: u32) {
        self.major = classid & 0xffff_0000;
        let (g, w, b) = Self::split(classid);
        self.words[g].get_or_insert_with(|| Box::new([0; 64]))[w] |= 1 << b;
        self.summary[g] |= 1 << w;
        self.top |= 1 << g;
    }

    fn remove(&mut self, classid: u32) {
        let (g, w, b) = Self::split(classid);
        if let Some(words) = self.words[g].as_mut() {
            words[w] &= !(1 << b);
            if words[w] == 0 {
                self.summary[g] &= !(1 << w);
                if self.summary[g] == 0 {
                    self.top &= !(1 << g);
                }
            }
        }
    }

    fn contains(&self, classid: u32) -> bool {
        let (g, w, b) = Self::split(classid);
        classid & 0xffff_0000 == self.major
            && self.words[g]
                .as_ref()
                .is_some_and(|words| words[w] & (1 << b) != 0)
    }

    /// The first member (`rb_first`).
    fn first(&self) -> Option<u32> {
        self.at_or_after(self.major)
    }

    /// The first member not below `classid` (`htb_id_find_next_upper`).
    fn at_or_after(&self, classid: u32) -> Option<u32> {
        if self.top == 0 || classid & 0xffff_0000 != self.major {
            // Members all share `major`; a different major is wholly below or above them.
            return (classid < self.major && self.top != 0)
                .then(|| self.at_or_after(self.major))
                .flatten();
        }
        let (g, w, b) = Self::split(classid);
        // The rest of the word, then the rest of the group, then the next groups.
        if let Some(words) = self.words[g].as_ref() {
            let bits = words[w] & (!0u64 << b);
            if bits != 0 {
                return Some(self.compose(g, w, bits.trailing_zeros()));
            }
        }
        let later = if w == 63 {
            0
        } else {
            self.summary[g] & (!0u64 << (w + 1))
        };
        if later != 0 {
            return Some(self.lowest_in_word(g, later.trailing_zeros() as usize));
        }
        let groups = if g == 15 {
            0
        } else {
            self.top & (!0u16 << (g + 1))
        };
        if groups != 0 {
            let g = groups.trailing_zeros() as usize;
            return Some(self.lowest_in_word(g, self.summary[g].trailing_zeros() as usize));
        }
        None
    }

    /// The first member above `classid` (`rb_next`).
    fn next_after(&self, classid: u32) -> Option<u32> {
        if classid & 0xffff == 0xffff {
            return None;
        }
        self.at_or_after(classid + 1)
    }

    fn lowest_in_word(&self, g: usize, w: usize) -> u32 {
        let words = self.words[g]
            .as_ref()
            .expect("summary bit of an allocated group");
        self.compose(g, w, words[w].trailing_zeros())
    }

    fn compose(&self, g: usize, w: usize, b: u32) -> u32 {
        self.major | (g as u32) << 12 | (w as u32) << 6 | b
    }
}

#[derive(Serialize, Deserialize)]
struct Class {
    classid: u32,
    parent: Option<usize>,
    level: u8,
    children: u32,
    // parameters
    rate: RateCfg,
    ceil: RateCfg,
    buffer: i64,
    cbuffer: i64,
    mbuffer: i64,
    quantum: u32,
    prio: u8,
    // variables
    tokens: i64,
    ctokens: i64,
    t_c: Nanos,
    mode: Mode,
    /// Bit per priority this class is active at (a leaf: one bit; an inner class: its feeds).
    prio_activity: u8,
    /// Key in the wait queue of its level while not green: (time of mode change, insertion order).
    pq_key: Option<(Nanos, u64)>,
    // leaf
    leaf: Option<Sched>,
    deficit: [i32; MAXDEPTH],
    // inner
    feeds: Option<Box<[RoundRobin; NUMPRIO]>>,
    // counters
    bstats: QdiscStats,
    drops: u32,
    overlimits: u32,
    lends: u32,
    borrows: u32,
}

#[derive(Default, Serialize, Deserialize)]
struct Level {
    rows: [RoundRobin; NUMPRIO],
    wait: WaitQueue,
}

/// A level's wait queue (the kernel's `wait_pq` rb-tree): the non-green classes ordered by
/// (time of mode change, insertion order), each entry `(time, seq, class index)`. A binary min-heap with
/// lazy removal: a class leaving the queue only forgets its entry (`live[i]` no longer names its `seq`),
/// and dead entries are dropped when they reach the top, so `first` always answers the earliest live
/// entry — the same entry, in the same order, as an ordered set of the live entries. Keys arrive nearly
/// in time order, so a push rarely climbs; a B-tree searched each node from the left for a key bound for
/// its right end cost about 600 instructions an insert at 10 000 classes (docs/BENCHMARKS.md).
/// It saves and loads as the ordered set of its live entries.
///
/// The heap holds an entry as one `u128`, time in the high word and `seq << 16 | class index` in the
/// low one, so the order is the triple's; a pop moves 16 bytes a level instead of 24 and compares
/// once, without branches (as a pair of words it compared with branches and cost more than the
/// triple). An index fits 16 bits: one HTB holds at most 65 536 classes (minors 0 to ffff) and
/// `alloc` gives a deleted class's slot to the next class (tests/shaping.rs, `htb_widest_tree_…`).
/// `seq` counts mode changes and starts again at 1 after `SEQ_MAX` (48 bits): 2^48 of them is about
/// a century of simulated time at bench-isp's 82 000 a second, and past it only classes waiting for
/// the same time could change order.
#[derive(Default)]
struct WaitQueue {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<u128>>,
    /// By class index: the `seq` of its live entry, 0 for none (`seq` starts at 1).
    live: Vec<u64>,
    /// Live entries (the heap holds these and the dead ones).
    len: usize,
}

impl WaitQueue {
    /// The highest `seq` an entry holds.
    const SEQ_MAX: u64 = (1 << 48) - 1;

    fn insert(&mut self, key: Nanos, seq: u64, i: usize) {
        if self.live.len() <= i {
            self.live.resize(i + 1, 0);
        }
        debug_assert_eq!(self.live[i], 0, "a class waits once");
        debug_assert!(i <= 0xffff && seq <= Self::SEQ_MAX, "an entry holds both");
        self.live[i] = seq;
        self.len += 1;
        self.heap.push(std::cmp::Reverse(
            (key as u128) << 64 | (seq << 16 | i as u64) as u128,
        ));
    }

    /// An entry's `(time, seq, class index)`.
    fn unpack(e: u128) -> (Nanos, u64, usize) {
        let w = e as u64;
        ((e >> 64) as u64, w >> 16, (w & 0xffff) as usize)
    }

    fn remove(&mut self, seq: u64, i: usize) {
        if self.live.get(i) == Some(&seq) {
            self.live[i] = 0;
            self.len -= 1;
            // Dead entries wait for their time to reach the top; should they outnumber the live ones
            // many times over (classes leaving the queue long before their time), drop them at once.
            if self.heap.len() > 4 * self.len + 64 {
                let live = &self.live;
                self.heap.retain(|std::cmp::Reverse(e)| {
                    let (_, s, c) = Self::unpack(*e);
                    live.get(c) == Some(&s)
                });
            }
        }
    }

    /// The earliest live entry, dead ones above it dropped.
    fn first(&mut self) -> Option<(Nanos, u64, usize)> {
        while let Some(&std::cmp::Reverse(e)) = self.heap.peek() {
            let (key, seq, i) = Self::unpack(e);
            if self.live[i] == seq {
                return Some((key, seq, i));
            }
            self.heap.pop();
        }
        None
    }

    /// Remove the entry `first` answered.
    fn pop_first(&mut self) {
        if let Some(std::cmp::Reverse(e)) = self.heap.pop() {
            let i = Self::unpack(e).2;
            self.live[i] = 0;
            self.len -= 1;
        }
    }

    /// The live entries in order, as the ordered set they stand for.
    fn entries(&self) -> Vec<(Nanos, u64, usize)> {
        let mut v: Vec<_> = self
            .heap
            .iter()
            .map(|&std::cmp::Reverse(e)| Self::unpack(e))
            .filter(|&(_, s, c)| self.live[c] == s)
            .collect();
        v.sort_unstable();
        v
    }
}

/// Saved as the ordered set of live entries (`BTreeSet<(Nanos, u64, usize)>`'s form: a sequence in
/// ascending order), as before the heap.
impl Serialize for WaitQueue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entries().serialize(s)
    }
}

impl<'de> Deserialize<'de> for WaitQueue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut q = WaitQueue::default();
        for (key, seq, i) in Vec::<(Nanos, u64, usize)>::deserialize(d)? {
            // An index past what one HTB can hold (arena slots 0 to 65 535) would size `live` from it, and
            // neither it nor `seq` would fit an entry.
            if seq == 0
                || seq > WaitQueue::SEQ_MAX
                || i > 0xffff
                || q.live.get(i).is_some_and(|&s| s != 0)
            {
                return Err(serde::de::Error::custom(
                    "htb wait queue: a class twice, past 65 535, or seq 0 or past 2^48",
                ));
            }
            q.insert(key, seq, i);
        }
        Ok(q)
    }
}

/// What `htb_activate_prios` and `htb_deactivate_prios` read of each class on their way up, read once.
#[derive(Clone, Copy)]
struct Climb {
    mode: Mode,
    parent: Option<usize>,
    classid: u32,
    level: u8,
}

impl Climb {
    fn of(c: &Class) -> Climb {
        Climb {
            mode: c.mode,
            parent: c.parent,
            classid: c.classid,
            level: c.level,
        }
    }
}

/// Where a round robin lives: a row of a level, or the feed of an inner class.
#[derive(Clone, Copy)]
enum RrAt {
    Row(usize),
    Feed(usize),
}

#[derive(Serialize, Deserialize)]
pub struct Htb {
    /// A packet taken out by `peek` and held for the next dequeue.
    #[serde(skip)]
    peeked: Peeked<Box<Packet>>,
    handle: Handle,
    // parameters
    r2q: u32,
    defcls: u32,
    direct_qlen: u32,
    /// The device's txqueuelen: the limit of the default pfifo under each leaf.
    leaf_limit: u32,
    // classes: an arena, found by classid; `hash` reproduces the kernel's class-hash walk order.
    // `classes` and `hash` saved as byte strings of their own, which a root filter listing skips.
    #[serde(with = "crate::snapshot::classes")]
    classes: Vec<Option<Class>>,
    free: Vec<usize>,
    /// Arena index + 1 of each class by minor (0: no class), grown up to the highest minor in use.
    by_minor: Vec<u32>,
    #[serde(with = "crate::snapshot::classes")]
    hash: ClassHash,
    // scheduler state
    levels: [Level; MAXDEPTH],
    row_mask: [u8; MAXDEPTH],
    near_ev_cache: [Nanos; MAXDEPTH],
    /// The least of `near_ev_cache`, or 0 when not known (after a load or a reset): while `now` is
    /// before it and no class is in a row, a dequeue has nothing to promote or serve and only wants
    /// the earliest event, which this is (see `dequeue_own`). Not saved: a loaded qdisc works it out
    /// at its first dequeue.
    #[serde(skip)]
    near_ev_min: Nanos,
    wait_seq: u64,
    /// Boxed, as the leaves' queues are ([`Qdisc::enqueue_skb`]).
    #[serde(skip)]
    direct: VecDeque<Box<Packet>>,
    direct_pkts: u32,
    stats: QdiscStats,
    now: Nanos,
    /// Filter blocks by classid: the qdisc's own at its handle, a class's at the class's id.
    blocks: BTreeMap<u32, Block>,
}

enum Target {
    Direct,
    Leaf(usize),
    /// An action shot it (`Bypass`) or took it (`Stolen`).
    Refused(Verdict),
}

impl Htb {
    pub fn new(handle: Handle, opts: &HtbOptions, env: &DevEnv) -> Result<Htb, KernelError> {
        if opts.version != VERSION >> 16 && opts.version != VERSION {
            return Err(KernelError::new(Errno::Invalid));
        }
        let direct_qlen = opts.direct_qlen.unwrap_or(env.txqueuelen).max(2);
        Ok(Htb {
            peeked: Peeked::default(),
            handle,
            r2q: opts.r2q.max(1),
            defcls: opts.defcls,
            direct_qlen,
            leaf_limit: env.txqueuelen,
            classes: Vec::new(),
            free: Vec::new(),
            by_minor: Vec::new(),
            hash: ClassHash::new(),
            levels: Default::default(),
            row_mask: [0; MAXDEPTH],
            near_ev_cache: [0; MAXDEPTH],
            near_ev_min: 0,
            wait_seq: 0,
            direct: VecDeque::new(),
            direct_pkts: 0,
            stats: QdiscStats::default(),
            now: 0,
            blocks: BTreeMap::new(),
        })
    }

    fn cl(&self, i: usize) -> &Class {
        self.classes[i].as_ref().expect("live class index")
    }
    fn cl_mut(&mut self, i: usize) -> &mut Class {
        self.classes[i].as_mut().expect("live class index")
    }
    /// What `tc class show` lists of the class at arena index `i` (`htb_dump_class`, `htb_dump_class_stats`).
    fn class_info(&self, i: usize) -> ClassInfo {
        let c = self.cl(i);
        let mut stats = c.bstats;
        stats.drops = c.drops;
        stats.overlimits = c.overlimits;
        if let Some(l) = &c.leaf {
            let s = l.q.stats();
            stats.qlen = s.qlen;
            stats.backlog = s.backlog;
        }
        let clamp = |ns: i64| {
            (ns >> crate::units::PSCHED_SHIFT).clamp(i32::MIN as i64, i32::MAX as i64) as i32
        };
        ClassInfo {
            kind: "htb",
            classid: Handle(c.classid),
            parent: c
                .parent
                .map_or(Handle::ROOT, |p| Handle(self.cl(p).classid)),
            leaf: c
                .leaf
                .as_ref()
                .map(|l| l.handle)
                .filter(|h| *h != Handle::UNSPEC),
            options: Some(ClassOptions::Htb(self.class_options(c))),
            stats,
            htb_xstats: Some(HtbXstats {
                lends: c.lends,
                borrows: c.borrows,
                giants: 0,
                tokens: clamp(c.tokens),
                ctokens: clamp(c.ctokens),
            }),
            xstats: None,
        }
    }

    fn find_idx(&self, classid: u32) -> Option<usize> {
        if classid & 0xffff_0000 != self.handle.0 {
            return None;
        }
        match self.by_minor.get((classid & 0xffff) as usize) {
            Some(&slot) if slot != 0 => Some(slot as usize - 1),
            _ => None,
        }
    }

    fn rr(&mut self, at: RrAt, prio: usize) -> &mut RoundRobin {
        match at {
            RrAt::Row(level) => &mut self.levels[level].rows[prio],
            RrAt::Feed(i) => &mut self
                .cl_mut(i)
                .feeds
                .as_mut()
                .expect("inner class has feeds")[prio],
        }
    }

    /// `htb_classify`: `skb->priority` naming this qdisc or one of its
    /// leaves; else the filters — the qdisc's, then those of each inner class a filter names, until one
    /// names a leaf; then the default class, then the direct queue.
    fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Target {
        let id = pkt.priority;
        if id == self.handle.0 {
            return Target::Direct;
        }
        // A priority naming a leaf needs no filter block: look one up only when it does not.
        let named = (id != 0).then(|| self.find_idx(id)).flatten();
        let mut block = match named {
            Some(i) if self.cl(i).level == 0 => return Target::Leaf(i),
            Some(_) => self.blocks.get(&id),
            None => self.blocks.get(&self.handle.0),
        };
        while let Some(b) = block {
            match crate::filter::classify(b, pkt, cx) {
                crate::filter::Verdict::Unclassified => break,
                crate::filter::Verdict::Shot => return Target::Refused(Verdict::Bypass),
                crate::filter::Verdict::Stolen => return Target::Refused(Verdict::Stolen),
                crate::filter::Verdict::Classified { classid, .. } => {
                    if classid == self.handle.0 {
                        return Target::Direct;
                    }
                    let Some(i) = self.find_idx(classid) else {
                        break;
                    };
                    if self.cl(i).level == 0 {
                        return Target::Leaf(i);
                    }
                    block = self.blocks.get(&classid);
                }
            }
        }
        match self.find_idx(self.handle.0 | (self.defcls & 0xffff)) {
            Some(i) if self.defcls != 0 && self.cl(i).level == 0 => Target::Leaf(i),
            _ => Target::Direct,
        }
    }

    // ----- activity: rows and feeds -----

    /// `htb_add_class_to_row`: class `classid` of `level`.
    fn add_to_row(&mut self, level: usize, classid: u32, mask: u8) {
        self.row_mask[level] |= mask;
        for prio in bits(mask) {
            self.levels[level].rows[prio].members.insert(classid);
        }
    }

    /// `htb_remove_class_from_row`.
    fn remove_from_row(&mut self, level: usize, classid: u32, mask: u8) {
        let mut emptied = 0u8;
        for prio in bits(mask) {
            let row = &mut self.levels[level].rows[prio];
            if row.ptr == Some(classid) {
                row.advance();
            }
            row.members.remove(classid);
            if row.members.is_empty() {
                emptied |= 1 << prio;
            }
        }
        self.row_mask[level] &= !emptied;
    }

    /// `htb_activate_prios`: make the class's priorities visible to its ancestors' feeds, or to its row.
    /// Each class on the way up is looked up once (twice a packet in a borrowing tree).
    fn activate_prios(&mut self, i: usize) {
        let mut mask = self.cl(i).prio_activity;
        let mut at = Climb::of(self.cl(i));
        while at.mode == Mode::MayBorrow && mask != 0 {
            let Some(p) = at.parent else { break };
            let pc = self.cl_mut(p);
            let feeds = pc.feeds.as_mut().expect("parent is inner");
            for prio in bits(mask) {
                let feed = &mut feeds[prio];
                if !feed.members.is_empty() {
                    // The parent is already active at this priority.
                    mask &= !(1 << prio);
                }
                feed.members.insert(at.classid);
            }
            pc.prio_activity |= mask;
            at = Climb::of(pc);
        }
        if at.mode == Mode::CanSend && mask != 0 {
            self.add_to_row(at.level as usize, at.classid, mask);
        }
    }

    /// `htb_deactivate_prios`.
    fn deactivate_prios(&mut self, i: usize) {
        let mut mask = self.cl(i).prio_activity;
        let mut at = Climb::of(self.cl(i));
        while at.mode == Mode::MayBorrow && mask != 0 {
            let Some(p) = at.parent else { break };
            let pc = self.cl_mut(p);
            let feeds = pc.feeds.as_mut().expect("parent is inner");
            let m = mask;
            mask = 0;
            for prio in bits(m) {
                let feed = &mut feeds[prio];
                if feed.ptr == Some(at.classid) {
                    feed.last_ptr_id = at.classid;
                    feed.ptr = None;
                }
                feed.members.remove(at.classid);
                if feed.members.is_empty() {
                    mask |= 1 << prio;
                }
            }
            pc.prio_activity &= !mask;
            at = Climb::of(pc);
        }
        if at.mode == Mode::CanSend && mask != 0 {
            self.remove_from_row(at.level as usize, at.classid, mask);
        }
    }

    /// `htb_activate`: a leaf got its first packet.
    fn activate(&mut self, i: usize) {
        if self.cl(i).prio_activity == 0 {
            let prio = self.cl(i).prio;
            self.cl_mut(i).prio_activity = 1 << prio;
            self.activate_prios(i);
        }
    }

    /// `htb_deactivate`: a leaf became empty.
    fn deactivate(&mut self, i: usize) {
        if self.cl(i).prio_activity != 0 {
            self.deactivate_prios(i);
            self.cl_mut(i).prio_activity = 0;
        }
    }

    // ----- modes and the wait queue -----

    /// `htb_class_mode`: the mode the class would have after `diff` more ns of tokens; on a non-green
    /// answer `diff` becomes the time until the mode can change.
    fn class_mode(c: &Class, diff: &mut i64) -> Mode {
        let toks = c.ctokens + *diff;
        if toks < 0 {
            *diff = -toks;
            return Mode::CantSend;
        }
        let toks = c.tokens + *diff;
        if toks >= 0 {
            return Mode::CanSend;
        }
        *diff = -toks;
        Mode::MayBorrow
    }

    /// `htb_change_class_mode`.
    fn change_class_mode(&mut self, i: usize, diff: &mut i64) {
        let new_mode = Self::class_mode(self.cl(i), diff);
        if new_mode != self.cl(i).mode {
            self.set_class_mode(i, new_mode);
        }
    }

    /// The rest of `htb_change_class_mode` once the new mode, a different one, is known.
    fn set_class_mode(&mut self, i: usize, new_mode: Mode) {
        let c = self.cl_mut(i);
        if new_mode == Mode::CantSend {
            c.overlimits += 1;
            self.stats.overlimits += 1;
        }
        let c = self.cl_mut(i);
        let old_mode = c.mode;
        if c.prio_activity != 0 {
            if old_mode != Mode::CantSend {
                self.deactivate_prios(i);
            }
            self.cl_mut(i).mode = new_mode;
            if new_mode != Mode::CantSend {
                self.activate_prios(i);
            }
        } else {
            c.mode = new_mode;
        }
    }

    /// `htb_add_to_wait_tree`.
    fn add_to_wait(&mut self, i: usize, delay: i64) {
        let mut key = self.now.saturating_add(delay.max(0) as u64);
        if key == self.now {
            key += 1;
        }
        let level = self.cl(i).level as usize;
        if self.near_ev_cache[level] > key {
            self.near_ev_cache[level] = key;
            self.near_ev_min = self.near_ev_min.min(key);
        }
        self.wait_seq = if self.wait_seq >= WaitQueue::SEQ_MAX {
            1
        } else {
            self.wait_seq + 1
        };
        let seq = self.wait_seq;
        self.levels[level].wait.insert(key, seq, i);
        self.cl_mut(i).pq_key = Some((key, seq));
    }

    fn remove_from_wait(&mut self, i: usize) {
        if let Some((_, seq)) = self.cl_mut(i).pq_key.take() {
            let level = self.cl(i).level as usize;
            self.levels[level].wait.remove(seq, i);
        }
    }

    /// `htb_do_events`: promote the classes of `level` whose mode-change time has come; return the next
    /// event time at this level, or 0 if none.
    fn do_events(&mut self, level: usize) -> Nanos {
        loop {
            let Some((key, _, i)) = self.levels[level].wait.first() else {
                return 0;
            };
            if key > self.now {
                return key;
            }
            self.levels[level].wait.pop_first();
            self.cl_mut(i).pq_key = None;
            let c = self.cl(i);
            let mut diff = (self.now.saturating_sub(c.t_c) as i64).min(c.mbuffer);
            self.change_class_mode(i, &mut diff);
            if self.cl(i).mode != Mode::CanSend {
                self.add_to_wait(i, diff);
            }
        }
    }

    // ----- charging -----

    /// `htb_charge_class`: account `bytes` sent by leaf `i`, served at `level`, up to the root.
    fn charge_class(&mut self, leaf: usize, level: u8, pkt: &Packet) {
        let bytes = pkt.len;
        let now = self.now;
        let mut cur = Some(leaf);
        while let Some(i) = cur {
            let c = self.cl_mut(i);
            let diff = (now.saturating_sub(c.t_c) as i64).min(c.mbuffer);
            if c.level >= level {
                if c.level == level {
                    c.lends += 1;
                }
                let toks = (c.tokens + diff).min(c.buffer) - c.rate.l2t_ns(bytes) as i64;
                c.tokens = if toks <= -c.mbuffer {
                    1 - c.mbuffer
                } else {
                    toks
                };
            } else {
                c.borrows += 1;
                c.tokens += diff;
            }
            let toks = (c.ctokens + diff).min(c.cbuffer) - c.ceil.l2t_ns(bytes) as i64;
            c.ctokens = if toks <= -c.mbuffer {
                1 - c.mbuffer
            } else {
                toks
            };
            c.t_c = now;
            if c.level > 0 {
                c.bstats.count_sent(pkt);
            }
            cur = c.parent;

            // Most charges leave the mode as it was: test that here, and take the slow path (rows,
            // feeds, the wait queue) only for a change.
            let old_mode = c.mode;
            let mut diff = 0;
            let new_mode = Self::class_mode(c, &mut diff);
            if new_mode == old_mode {
                continue;
            }
            self.set_class_mode(i, new_mode);
            if old_mode != Mode::CanSend {
                self.remove_from_wait(i);
            }
            if new_mode != Mode::CanSend {
                self.add_to_wait(i, diff);
            }
        }
    }

    // ----- dequeue -----

    /// `htb_lookup_leaf`: descend from the row of (`level`, `prio`) through feeds to the leaf whose turn it
    /// is, repairing round-robin pointers on the way. Inline, the common case: the row's pointer names
    /// a leaf in the row (what the descent's first step finds then).
    #[inline]
    fn lookup_leaf(&mut self, level: usize, prio: usize) -> Option<usize> {
        let rr = &self.levels[level].rows[prio];
        let leaf = rr
            .ptr
            .filter(|&id| rr.members.contains(id))
            .and_then(|id| self.find_idx(id))
            .filter(|&i| self.cl(i).level == 0);
        if leaf.is_some() {
            self.levels[level].rows[prio].last_ptr_id = 0;
            return leaf;
        }
        self.lookup_leaf_descend(level, prio)
    }

    /// [`Htb::lookup_leaf`] whole: from the row through the feeds.
    #[inline(never)]
    fn lookup_leaf_descend(&mut self, level: usize, prio: usize) -> Option<usize> {
        // The inner classes whose feeds the descent went through; depth 0 is the row.
        let mut feeds = [0usize; MAXDEPTH];
        let at = |sp: usize, feeds: &[usize; MAXDEPTH]| {
            if sp == 0 {
                RrAt::Row(level)
            } else {
                RrAt::Feed(feeds[sp])
            }
        };
        let mut sp = 0usize;
        for _ in 0..65535 {
            let rr = self.rr(at(sp, &feeds), prio);
            if rr.ptr.is_none() && rr.last_ptr_id != 0 {
                let id = rr.last_ptr_id;
                rr.ptr = rr.members.at_or_after(id);
            }
            rr.last_ptr_id = 0;
            match rr.ptr {
                None => {
                    // At the right end: rewind, and move the level above on.
                    rr.ptr = rr.members.first();
                    if sp > 0 {
                        sp -= 1;
                        let up = self.rr(at(sp, &feeds), prio);
                        up.ptr?;
                        up.advance();
                    } else if rr.ptr.is_none() {
                        return None;
                    }
                }
                Some(id) => {
                    if !rr.members.contains(id) {
                        return None;
                    }
                    let i = self.find_idx(id)?;
                    if self.cl(i).level == 0 {
                        return Some(i);
                    }
                    sp += 1;
                    if sp >= MAXDEPTH {
                        return None;
                    }
                    feeds[sp] = i;
                }
            }
        }
        None
    }

    /// The round robin a leaf found at `level` advances: its parent's feed, or the level-0 row.
    fn rr_of_leaf(&self, i: usize, level: usize) -> RrAt {
        if level > 0 {
            RrAt::Feed(
                self.cl(i)
                    .parent
                    .expect("a leaf served by borrowing has a parent"),
            )
        } else {
            RrAt::Row(0)
        }
    }

    /// `htb_dequeue_tree`.
    fn dequeue_tree(&mut self, prio: usize, level: usize, cx: &mut Cx) -> Option<Box<Packet>> {
        let mut start = self.lookup_leaf(level, prio);
        let mut cur = start;
        // The leaf's box is returned as it came.
        let mut out: Option<Box<Packet>>;
        let i = loop {
            let i = cur?;
            if self.leaf_qlen(i) == 0 {
                // Empty leaf (its qdisc dropped, or it was grafted): deactivate and skip it.
                self.deactivate(i);
                if self.row_mask[level] & (1 << prio) == 0 {
                    return None;
                }
                let next = self.lookup_leaf(level, prio);
                if cur == start {
                    start = next;
                }
                cur = next;
                continue;
            }
            out = self
                .cl_mut(i)
                .leaf
                .as_mut()
                .and_then(|l| l.q.dequeue_skb(cx));
            if out.is_some() {
                break i;
            }
            // A non-work-conserving leaf (e.g. TBF) said "not now": try the next class.
            let at = self.rr_of_leaf(i, level);
            self.rr(at, prio).advance();
            cur = self.lookup_leaf(level, prio);
            if cur == start {
                return None;
            }
        };
        let pkt = out.as_ref()?;
        let at = self.rr_of_leaf(i, level);
        let c = self.cl_mut(i);
        c.bstats.count_sent(pkt);
        c.deficit[level] -= pkt.len as i32;
        if c.deficit[level] < 0 {
            c.deficit[level] += c.quantum as i32;
            self.rr(at, prio).advance();
        }
        if self.leaf_qlen(i) == 0 {
            self.deactivate(i);
        }
        self.charge_class(i, level as u8, pkt);
        out
    }

    /// Packets in leaf `i`'s qdisc (`cl->leaf.q->q.qlen`).
    fn leaf_qlen(&self, i: usize) -> u32 {
        self.cl(i).leaf.as_ref().map_or(0, |l| l.q.qlen())
    }

    // ----- configuration -----

    fn alloc(&mut self, c: Class) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.classes[i] = Some(c);
                i
            }
            None => {
                self.classes.push(Some(c));
                self.classes.len() - 1
            }
        }
    }

    fn default_leaf(classid: u32, env: &DevEnv) -> Sched {
        Sched::new(
            Handle::UNSPEC,
            Handle(classid),
            Box::new(Fifo::pfifo(env.txqueuelen)),
        )
    }

    /// Remove `n` packets and `bytes` from the counters of the qdisc (`qdisc_tree_reduce_backlog`).
    fn reduce_backlog(&mut self, qlen: u32, backlog: u32) {
        self.stats.qlen -= qlen;
        self.stats.backlog -= backlog;
    }

    fn class_options(&self, c: &Class) -> HtbClassOptions {
        let spec = RateCfg::spec;
        HtbClassOptions {
            rate: spec(&c.rate),
            ceil: spec(&c.ceil),
            buffer: ns_to_ticks(c.buffer as u64) as u32,
            cbuffer: ns_to_ticks(c.cbuffer as u64) as u32,
            quantum: c.quantum,
            prio: c.prio as u32,
            level: c.level as u32,
        }
    }
}

/// Bit positions set in `mask`, lowest first (`ffz(~m)` in a loop).
fn bits(mut mask: u8) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let b = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        (b < 8).then_some(b)
    })
}

impl Htb {
    /// The dequeue itself; [`Qdisc::dequeue`] wraps it to follow its children's drops.
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        // `qdisc_dequeue_peeked`: a packet a parent peeked at is the next one out.
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        if let Some(pkt) = self.direct.pop_front() {
            self.stats.count_unqueued(&pkt);
            self.stats.count_sent(&pkt);
            return Some(pkt);
        }
        if self.stats.qlen == 0 {
            return None;
        }
        self.now = cx.now;
        let mut next_event = self.now + 5 * NSEC_PER_SEC;
        // No level's event due and no class in a row (every backlogged class waits on its tokens): the
        // loop below would promote and serve nothing, and find the earliest event, `near_ev_min`.
        if self.now < self.near_ev_min && self.row_mask == [0; MAXDEPTH] && !shortcut_off() {
            cx.schedule(next_event.min(self.near_ev_min));
            return None;
        }
        for level in 0..MAXDEPTH {
            let mut event = self.near_ev_cache[level];
            if self.now >= event {
                event = self.do_events(level);
                if event == 0 {
                    event = self.now + NSEC_PER_SEC;
                }
                self.near_ev_cache[level] = event;
            }
            next_event = next_event.min(event);
            let mut m = self.row_mask[level];
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= !(1 << prio);
                let out = self.dequeue_tree(prio, level, cx);
                if let Some(pkt) = out.as_ref() {
                    self.stats.count_unqueued(pkt);
                    self.stats.count_sent(pkt);
                    self.near_ev_min = self.near_ev_cache.iter().copied().min().unwrap_or(0);
                    return out;
                }
            }
        }
        self.near_ev_min = self.near_ev_cache.iter().copied().min().unwrap_or(0);
        if next_event > self.now {
            cx.schedule(next_event);
        } else {
            cx.schedule(self.now + 1);
        }
        None
    }
}

impl Qdisc for Htb {
    fn kind(&self) -> &'static str {
        "htb"
    }

    /// Its leaves save themselves inside it (and refuse if they hold packets).
    fn save(&self) -> Option<Vec<u8>> {
        (self.direct.is_empty() && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    super::by_value_through_boxes!();

    fn enqueue_skb(&mut self, mut pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        let len = pkt.len;
        match self.classify(&mut pkt, cx) {
            Target::Refused(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving_skb(pkt, DropReason::Action);
                }
                return v;
            }
            Target::Direct => {
                if (self.direct.len() as u32) < self.direct_qlen {
                    self.direct.push_back(pkt);
                    self.direct_pkts += 1;
                } else {
                    self.stats.drops += 1;
                    cx.drop_arriving_skb(pkt, DropReason::TailDrop);
                    return Verdict::Drop;
                }
            }
            Target::Leaf(i) => {
                cx.tag_leaf(&mut pkt, self.cl(i).classid);
                let mark = cx.tree_reduced;
                let v = match self.cl_mut(i).leaf.as_mut() {
                    Some(leaf) => leaf.q.enqueue_skb(pkt, cx),
                    None => {
                        cx.drop_arriving_skb(pkt, DropReason::Unclassified);
                        Verdict::Drop
                    }
                };
                self.stats.reduce(cx.reduced_since(mark));
                if v != Verdict::Success {
                    // `net_xmit_drop_count`: a stolen packet is no drop.
                    if v.counts_drop() {
                        self.stats.drops += 1;
                        self.cl_mut(i).drops += 1;
                    }
                    return v;
                }
                self.activate(i);
            }
        }
        self.stats.backlog += len;
        self.stats.qlen += 1;
        Verdict::Success
    }

    fn dequeue_skb(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        // A child that dropped packets while dequeuing (an AQM) took them off its counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`: HTB cannot tell its next packet without choosing it, so a peek dequeues it
    /// and holds it (counted in the queue again) until the next dequeue — how a TBF or DRR parent sees it.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue_skb(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    fn reset(&mut self) {
        self.peeked.clear();
        for c in self.classes.iter_mut().flatten() {
            if let Some(l) = c.leaf.as_mut() {
                l.q.reset();
            }
            if let Some(f) = c.feeds.as_mut() {
                for rr in f.iter_mut() {
                    *rr = RoundRobin::default();
                }
            }
            c.prio_activity = 0;
            c.pq_key = None;
            c.mode = Mode::CanSend;
        }
        self.levels = Default::default();
        self.row_mask = [0; MAXDEPTH];
        self.near_ev_cache = [0; MAXDEPTH];
        self.near_ev_min = 0;
        self.direct.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Htb(HtbOptions {
            r2q: self.r2q,
            defcls: self.defcls,
            direct_qlen: Some(self.direct_qlen),
            version: VERSION,
            direct_pkts: self.direct_pkts,
        })
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::msg(
            Errno::NotSupported,
            "Change operation not supported by specified qdisc",
        ))
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
    /// `htb_tcf_block`: the qdisc's block (minor 0) or a class's; an absent block reads as empty.
    fn block(&self, classid: Handle) -> Option<&Block> {
        self.blocks
            .get(&self.block_key(classid))
            .or(Some(empty_block()))
    }
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        let k = self.block_key(classid);
        Some(self.blocks.entry(k).or_default())
    }
    fn blocks_mut(&mut self) -> Vec<&mut Block> {
        self.blocks.values_mut().collect()
    }
}

/// The block of a class or qdisc no filter was ever attached to.
fn empty_block() -> &'static Block {
    thread_local! {
        static EMPTY: &'static Block = Box::leak(Box::default());
    }
    EMPTY.with(|b| *b)
}

impl Htb {
    fn block_key(&self, classid: Handle) -> u32 {
        if classid.minor() == 0 {
            self.handle.0
        } else {
            classid.0
        }
    }
}

impl ClassOps for Htb {
    fn find(&self, classid: Handle) -> bool {
        self.find_idx(classid.0).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.cl(self.find_idx(classid.0)?).leaf.as_ref()
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        let i = self.find_idx(classid.0)?;
        self.cl_mut(i).leaf.as_mut()
    }

    /// `htb_graft`: only a leaf takes a qdisc; `None` puts back the default pfifo.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let i = self
            .find_idx(classid.0)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        if self.cl(i).level != 0 {
            return Err(KernelError::new(Errno::Invalid));
        }
        let new = new.unwrap_or_else(|| Self::default_leaf(classid.0, env));
        let old = self.cl_mut(i).leaf.replace(new);
        if let Some(old) = &old {
            let s = old.q.stats();
            self.reduce_backlog(s.qlen, s.backlog);
        }
        self.deactivate(i);
        Ok(old)
    }

    /// `htb_change_class`.
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let ClassOptions::Htb(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        if o.rate.rate == 0 || o.ceil.rate == 0 {
            return Err(KernelError::new(Errno::Invalid));
        }
        let rate = RateCfg::new(&o.rate);
        let ceil = RateCfg::new(&o.ceil);
        let idx = match self.find_idx(classid.0) {
            Some(i) => i,
            None => {
                // A new class: validate, then link it in. `classid 1:` (minor 0) is a class like
                // any other: htb_change_class refuses only 0 and another qdisc's major.
                if classid.0 == 0 || classid.qdisc() != self.handle {
                    return Err(KernelError::new(Errno::Invalid));
                }
                let parent_idx = if parent.is_root() {
                    None
                } else {
                    self.find_idx(parent.0)
                };
                if let Some(p) = parent_idx {
                    if let Some(pp) = self.cl(p).parent {
                        if self.cl(pp).level < 2 {
                            return Err(KernelError::invalid("sch_htb: tree is too deep"));
                        }
                    }
                }
                let c = Class {
                    classid: classid.0,
                    parent: parent_idx,
                    level: 0,
                    children: 0,
                    rate,
                    ceil,
                    buffer: 0,
                    cbuffer: 0,
                    mbuffer: 60 * NSEC_PER_SEC as i64,
                    quantum: 0,
                    prio: 0,
                    tokens: ticks_to_ns(o.buffer as u64) as i64,
                    ctokens: ticks_to_ns(o.cbuffer as u64) as i64,
                    t_c: now,
                    mode: Mode::CanSend,
                    prio_activity: 0,
                    pq_key: None,
                    leaf: Some(Self::default_leaf(classid.0, env)),
                    deficit: [0; MAXDEPTH],
                    feeds: None,
                    bstats: QdiscStats::default(),
                    drops: 0,
                    overlimits: 0,
                    lends: 0,
                    borrows: 0,
                };
                if let Some(p) = parent_idx {
                    if self.cl(p).level == 0 {
                        // The parent was a leaf: its queue goes, it becomes an inner class.
                        self.now = now;
                        self.deactivate(p);
                        self.remove_from_wait(p);
                        let parent_level = self
                            .cl(p)
                            .parent
                            .map_or(MAXDEPTH as u8, |pp| self.cl(pp).level)
                            - 1;
                        let old = self.cl_mut(p).leaf.take();
                        if let Some(old) = old {
                            let s = old.q.stats();
                            self.reduce_backlog(s.qlen, s.backlog);
                        }
                        let pc = self.cl_mut(p);
                        pc.level = parent_level;
                        pc.feeds = Some(Box::default());
                        pc.mode = Mode::CanSend;
                    }
                    self.cl_mut(p).children += 1;
                }
                let i = self.alloc(c);
                let minor = classid.minor() as usize;
                if self.by_minor.len() <= minor {
                    self.by_minor.resize(minor + 1, 0);
                }
                self.by_minor[minor] = i as u32 + 1;
                self.hash.insert(classid.0);
                i
            }
        };
        let mut warnings = Vec::new();
        let r2q = self.r2q;
        let c = self.cl_mut(idx);
        c.rate = rate;
        c.ceil = ceil;
        if c.level == 0 {
            let computed = (rate.rate_bytes_ps / r2q as u64).min(i32::MAX as u64) as u32;
            c.quantum = computed;
            let mut warn = None;
            if o.quantum == 0 && computed < 1000 {
                warn = Some("small");
                c.quantum = 1000;
            }
            if o.quantum == 0 && computed > 200_000 {
                warn = Some("big");
                c.quantum = 200_000;
            }
            if o.quantum != 0 {
                c.quantum = o.quantum;
            }
            c.prio = o.prio.min(NUMPRIO as u32 - 1) as u8;
            if let Some(w) = warn {
                warnings.push(Warning(format!(
                    "sch_htb: quantum of class {:X} is {w}. Consider r2q change",
                    classid.0
                )));
            }
        }
        c.buffer = ticks_to_ns(o.buffer as u64) as i64;
        c.cbuffer = ticks_to_ns(o.cbuffer as u64) as i64;
        self.hash.grow();
        Ok(warnings)
    }

    /// `htb_delete`: only a class without children and that no filter names (`qdisc_class_in_use`:
    /// `htb_bind_filter` counts every filter of the qdisc's blocks bound to it, whatever its level);
    /// a parent left childless becomes a leaf again.
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError> {
        let i = self
            .find_idx(classid.0)
            .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
        if self.cl(i).children != 0 || self.blocks.values().any(|b| b.binds(classid.0)) {
            return Err(KernelError::msg(Errno::Busy, "HTB class in use"));
        }
        if let Some(leaf) = self.cl_mut(i).leaf.as_mut() {
            let s = leaf.q.stats();
            leaf.q.reset();
            self.reduce_backlog(s.qlen, s.backlog);
        }
        self.deactivate(i);
        self.remove_from_wait(i);
        let parent = self.cl(i).parent;
        self.by_minor[classid.minor() as usize] = 0;
        self.blocks.remove(&classid.0);
        self.hash.remove(classid.0);
        self.classes[i] = None;
        self.free.push(i);
        if let Some(p) = parent {
            let pc = self.cl_mut(p);
            pc.children -= 1;
            if pc.children == 0 {
                // `htb_parent_to_leaf`.
                let pid = pc.classid;
                self.remove_from_wait(p);
                let pc = self.cl_mut(p);
                pc.level = 0;
                pc.feeds = None;
                pc.prio_activity = 0;
                pc.tokens = pc.buffer;
                pc.ctokens = pc.cbuffer;
                pc.mode = Mode::CanSend;
                pc.deficit = [0; MAXDEPTH];
                let (now, limit) = (self.now, self.leaf_limit);
                let pc = self.cl_mut(p);
                pc.t_c = now;
                // The kernel installs the default pfifo it allocated beforehand.
                pc.leaf = Some(Sched::new(
                    Handle::UNSPEC,
                    Handle(pid),
                    Box::new(Fifo::pfifo(limit)),
                ));
            }
        }
        Ok(())
    }

    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.hash
            .walk()
            .filter_map(|id| self.find_idx(id))
            .map(|i| self.class_info(i))
            .collect()
    }

    fn walk_each(&self, _now: Nanos, f: &mut dyn FnMut(&ClassInfo)) {
        for i in self.hash.walk().filter_map(|id| self.find_idx(id)) {
            f(&self.class_info(i));
        }
    }

    fn children(&self) -> Vec<&Sched> {
        self.classes
            .iter()
            .flatten()
            .filter_map(|c| c.leaf.as_ref())
            .collect()
    }

    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.classes
            .iter_mut()
            .flatten()
            .filter_map(|c| c.leaf.as_mut())
            .collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "htb",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Htb(o) => Ok((Box::new(Htb::new(handle, o, env)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

/// Whether `dequeue_own` must run the level loop even when nothing is due: a test's switch, to compare
/// the shortcut with the loop; always false outside tests.
#[cfg(not(test))]
#[inline(always)]
fn shortcut_off() -> bool {
    false
}

#[cfg(test)]
fn shortcut_off() -> bool {
    tests::no_shortcut()
}

#[cfg(test)]
mod tests {
    use super::{MinorSet, WaitQueue};
    use std::collections::BTreeSet;

    thread_local! {
        static NO_SHORTCUT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Whether this test thread runs every dequeue through the level loop (`dequeue_own`'s shortcut off).
    pub(super) fn no_shortcut() -> bool {
        NO_SHORTCUT.with(|c| c.get())
    }

    /// `dequeue_own`'s shortcut (nothing due, no class in a row: only the earliest event wanted)
    /// changes nothing: a three-class tree (1:1 at 10 Mbit/s over 1:10 at 3 Mbit/s ceil 10 and 1:20 at
    /// 2 Mbit/s ceil 5) fed random bursts of random sizes, dequeued by a 100 Mbit/s link and by every
    /// wake-up it asks for, gives the same packets at the same times, the same wake-ups and the same
    /// counters with the shortcut and without it; and the shortcut is taken often. Again with classes
    /// changed while packets wait (`near_ev_min` is a cache of `near_ev_cache`, which `tc class`
    /// commands at run time, as `tclab live` takes them, must not leave stale): at 1 s 1:10's rates
    /// cut to 1 and 2 Mbit/s, at 1.5 s a class 1:30 added under the leaf 1:20 (which turns inner,
    /// `htb_change_class`), at 2.2 s 1:30 deleted (1:20 a leaf again, `htb_parent_to_leaf`); what
    /// is sent then differs from the run without changes.
    #[test]
    fn the_idle_dequeue_shortcut_changes_nothing() {
        use crate::engine::Flags;
        use crate::handle::Handle;
        use crate::qdisc::htb::{HtbClassOptions, HtbOptions};
        use crate::qdisc::{ClassOptions, Cx, QdiscOptions};
        use crate::units::RateSpec;
        use crate::{Engine, Packet, NSEC_PER_SEC};

        /// What a run shows: (time, tag, length) of each packet sent, each dequeue's wake-up, the
        /// qdisc's counters.
        type Seen = (Vec<(u64, u64, u32)>, Vec<Option<u64>>, String);

        fn run(shortcut: bool, changes: bool) -> Seen {
            NO_SHORTCUT.with(|c| c.set(!shortcut));
            let mut e = Engine::new();
            e.add_device("eth0", 1500, 1000);
            let root = QdiscOptions::Htb(HtbOptions {
                defcls: 0x10,
                version: 3,
                ..Default::default()
            });
            let q = Handle::new(1, 0);
            e.modify_qdisc("eth0", Handle::ROOT, q, Some(&root), Flags::ADD, 0)
                .unwrap();
            let rate = |bits: u64| RateSpec {
                rate: bits / 8,
                ..Default::default()
            };
            for (parent, minor, r, c, prio) in [
                (q, 1, 10_000_000, 10_000_000, 0),
                (Handle::new(1, 1), 0x10, 3_000_000, 10_000_000, 1),
                (Handle::new(1, 1), 0x20, 2_000_000, 5_000_000, 0),
            ] {
                let o = HtbClassOptions {
                    rate: rate(r),
                    ceil: rate(c),
                    buffer: 20_000,
                    cbuffer: 20_000,
                    prio,
                    ..Default::default()
                };
                let (id, opts) = (Handle::new(1, minor), ClassOptions::Htb(o));
                e.modify_class("eth0", parent, id, &opts, Flags::ADD, 0)
                    .unwrap();
            }
            let (mut out, mut wakes) = (Vec::new(), Vec::new());
            let (mut now, mut link_free, mut wake) = (0u64, 0u64, None::<u64>);
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let mut next_burst = 0u64;
            let mut step = 0;
            let class = |r: u64, c: u64| {
                let o = HtbClassOptions {
                    rate: rate(r),
                    ceil: rate(c),
                    buffer: 20_000,
                    cbuffer: 20_000,
                    ..Default::default()
                };
                ClassOptions::Htb(o)
            };
            let (c10, c20, c30) = (
                Handle::new(1, 0x10),
                Handle::new(1, 0x20),
                Handle::new(1, 0x30),
            );
            let at = [NSEC_PER_SEC, 3 * NSEC_PER_SEC / 2, 11 * NSEC_PER_SEC / 5];
            while now < 3 * NSEC_PER_SEC {
                if changes && step < at.len() && now >= at[step] {
                    match step {
                        0 => e.modify_class(
                            "eth0",
                            Handle::new(1, 1),
                            c10,
                            &class(1_000_000, 2_000_000),
                            Flags::CHANGE,
                            now,
                        ),
                        1 => e.modify_class(
                            "eth0",
                            c20,
                            c30,
                            &class(1_000_000, 5_000_000),
                            Flags::ADD,
                            now,
                        ),
                        _ => e.delete_class("eth0", c20, c30).map(|()| Vec::new()),
                    }
                    .unwrap();
                    step += 1;
                }
                let dev = e.device_mut("eth0").unwrap();
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                if now == next_burst {
                    for _ in 0..1 + next() % 6 {
                        let x = next();
                        let minor = [0x10, 0x20, 0x30][(x % 3) as usize];
                        let pkt = Packet {
                            tag: x % 1000,
                            // `skb->priority` naming a class sends the packet there (htb_classify).
                            priority: (1 << 16) | minor,
                            ..Packet::of_len(64 + (x >> 20) as u32 % 1450)
                        };
                        dev.enqueue(pkt, &mut Cx::new(now));
                    }
                    next_burst = now + 1 + (next() >> 33) % 4_000_000;
                }
                if now >= link_free {
                    let mut cx = Cx::new(now);
                    let p = dev.dequeue(&mut cx);
                    wakes.push(cx.wake_at);
                    match p {
                        Some(p) => {
                            out.push((now, p.tag, p.len));
                            link_free = now + p.len as u64 * 80;
                            wake = None;
                        }
                        None => wake = cx.wake_at,
                    }
                }
                let mut t = next_burst;
                if link_free > now {
                    t = t.min(link_free);
                }
                if let Some(w) = wake.filter(|&w| w > now) {
                    t = t.min(w);
                }
                now = t.max(now + 1);
            }
            let stats = format!("{:?}", e.device("eth0").unwrap().root().q.stats());
            NO_SHORTCUT.with(|c| c.set(false));
            (out, wakes, stats)
        }
        let mut sent = Vec::new();
        for changes in [false, true] {
            let with = run(true, changes);
            let without = run(false, changes);
            assert!(with.0.len() > 1_000, "packets sent: {}", with.0.len());
            let idle = with.1.iter().filter(|w| w.is_some()).count();
            assert!(idle > 1_000, "dequeues that found nothing to send: {idle}");
            assert_eq!(with.0, without.0, "the packets and their times ({changes})");
            assert_eq!(with.1, without.1, "each dequeue's wake-up ({changes})");
            assert_eq!(with.2, without.2, "the counters ({changes})");
            sent.push(with.0);
        }
        assert_ne!(sent[0], sent[1], "the changes change what is sent");
    }

    /// The lazy heap answers as the ordered set it replaces (the kernel's rb-tree order: time, then
    /// insertion), and saves as that set's bytes, on a deterministic random walk of inserts, removes and
    /// pops of the first entry, times mostly rising as HTB's do, some equal, some earlier.
    #[test]
    fn wait_queue_orders_and_saves_like_the_ordered_set() {
        let mut q = WaitQueue::default();
        let mut model: BTreeSet<(u64, u64, usize)> = BTreeSet::new();
        let mut seq_of = vec![0u64; 300];
        let (mut seq, mut now) = (0u64, 1_000u64);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..100_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x >> 8) as usize % seq_of.len();
            match x % 4 {
                0 | 1 if seq_of[i] == 0 => {
                    seq += 1;
                    let key = match (x >> 30) % 8 {
                        0 => now,
                        1 => now.saturating_sub((x >> 40) % 500),
                        _ => now + (x >> 40) % 10_000,
                    };
                    q.insert(key, seq, i);
                    model.insert((key, seq, i));
                    seq_of[i] = seq;
                }
                2 if seq_of[i] != 0 => {
                    let e = *model.iter().find(|e| e.2 == i).unwrap();
                    q.remove(seq_of[i], i);
                    model.remove(&e);
                    seq_of[i] = 0;
                }
                _ => {
                    now += (x >> 50) % 64;
                    if let Some(&(key, s, c)) = model.first() {
                        if key <= now {
                            assert_eq!(q.first(), Some((key, s, c)));
                            q.pop_first();
                            model.remove(&(key, s, c));
                            seq_of[c] = 0;
                        }
                    }
                }
            }
            assert_eq!(q.first(), model.first().copied(), "step {step}");
            assert_eq!(q.len, model.len());
            if step % 5_000 == 0 {
                assert_eq!(q.entries(), model.iter().copied().collect::<Vec<_>>());
                let bytes = postcard::to_allocvec(&q).unwrap();
                assert_eq!(bytes, postcard::to_allocvec(&model).unwrap());
                let back: WaitQueue = postcard::from_bytes(&bytes).unwrap();
                assert_eq!(back.entries(), q.entries());
            }
        }
        // A saved queue naming a class twice, or an index no HTB has, is refused, not loaded.
        for bad in [
            vec![(5u64, 1u64, 3usize), (6, 2, 3)],
            vec![(5, 1, 1 << 40)],
            vec![(5, 0, 3)],
            vec![(5, WaitQueue::SEQ_MAX + 1, 3)],
        ] {
            let bytes = postcard::to_allocvec(&bad).unwrap();
            assert!(
                postcard::from_bytes::<WaitQueue>(&bytes).is_err(),
                "{bad:?}"
            );
        }
        // The widest entries (the last index, the last `seq`) come back whole and in order: an entry
        // packs both into one word.
        let mut q = WaitQueue::default();
        let max = WaitQueue::SEQ_MAX;
        q.insert(7, max, 0xffff);
        q.insert(7, max - 1, 0xfffe);
        q.insert(6, max - 2, 0);
        for want in [(6, max - 2, 0), (7, max - 1, 0xfffe), (7, max, 0xffff)] {
            assert_eq!(q.first(), Some(want));
            q.pop_first();
        }
        assert_eq!(q.first(), None);
        // Dead entries are dropped once they far outnumber the live ones: classes that leave the queue
        // long before their time do not make it grow without end.
        let mut q = WaitQueue::default();
        for i in 0..1_000 {
            q.insert(1_000_000 + i as u64, i as u64 + 1, i);
        }
        for i in 0..1_000 {
            q.remove(i as u64 + 1, i);
        }
        assert!(q.heap.len() <= 64, "{} dead entries kept", q.heap.len());
        assert_eq!((q.len, q.first()), (0, None));
    }

    /// The bitmap answers as the ordered set it replaces, on a deterministic random walk of inserts and
    /// removes spread over the whole minor range and clustered at its ends.
    #[test]
    fn minor_set_orders_like_a_search_tree() {
        let major = 0x0007_0000u32;
        let mut set = MinorSet::default();
        let mut model = BTreeSet::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let minor = match step % 3 {
                0 => (x >> 20) as u32 & 0xffff,
                1 => (x >> 20) as u32 & 0x7f,
                _ => 0xffff - ((x >> 20) as u32 & 0x7f),
            };
            let id = major | minor;
            if x & 1 == 0 {
                set.insert(id);
                model.insert(id);
            } else {
                set.remove(id);
                model.remove(&id);
            }
            let probe = major | ((x >> 40) as u32 & 0xffff);
            assert_eq!(set.is_empty(), model.is_empty());
            assert_eq!(set.contains(probe), model.contains(&probe));
            assert_eq!(set.first(), model.first().copied());
            assert_eq!(set.at_or_after(probe), model.range(probe..).next().copied());
            assert_eq!(
                set.next_after(probe),
                model.range(probe + 1..).next().copied()
            );
            assert_eq!(set.next_after(major | 0xffff), None);
            assert_eq!(set.at_or_after(major - 1), model.first().copied());
            assert_eq!(set.at_or_after(major + 0x1_0000), None);
        }
    }
}
