//! HFSC — the hierarchical fair service curve scheduler, after `net/sched/sch_hfsc.c` (Stoica, Zhang and
//! Ng, SIGCOMM '97; ported from ALTQ by Patrick McHardy, upper limit by Oleg Cherevko).
//!
//! **Service curves.** A class is not given a rate but a *service curve*: a lower bound on the bytes it
//! must have been able to send in any interval during which it was backlogged. tc describes a curve by two
//! linear segments, `m1` for the first `d` and `m2` after it, or by the equivalent `umax dmax rate` ("a
//! packet of `umax` bytes leaves within `dmax`, and the long-run rate is `rate`"). A concave curve (`m1 >
//! m2`) promises a burst: `rt m1 10mbit d 20ms m2 1mbit` sends its first 25 000 bytes within 20 ms of
//! becoming backlogged, then 1 Mbit/s. A convex one (`m1 < m2`) delays the service: nothing before `d`.
//!
//! **Decoupled delay and bandwidth.** With a rate-only scheduler (HTB, CBQ) the delay a class sees is tied
//! to its rate: a 64 kbit/s VoIP class waits about one 1500-byte packet time at 64 kbit/s, 190 ms, for its
//! turn. HFSC's two-piece curve separates them: the first segment fixes the delay (`umax 200 dmax 5ms`),
//! the second the bandwidth (`rate 64kbit`), and the guarantee holds as long as the real-time curves of all
//! classes together stay below the link's capacity.
//!
//! **Three curves, two criteria.** Each class may have:
//!
//! - `rt`, the *real-time* curve. When a class becomes backlogged, its *deadline curve* is the minimum of
//!   its previous one and the rt curve started at (now, bytes sent under rt so far) (`rtsc_min`); the
//!   *eligible curve* is the same for a concave curve, and its second segment alone for a convex one. A
//!   class is *eligible* when the eligible curve says it may already have sent what it has (`cl_e ≤ now`);
//!   its *deadline* is when the curve reaches that plus its next packet (`cl_d`). Dequeue first serves the
//!   eligible class with the earliest deadline (earliest deadline first). Only leaves have rt curves that
//!   matter.
//! - `ls`, the *link-sharing* curve, whose slope sets a class's share of what the real-time criterion
//!   leaves. Each class keeps a *virtual time* (`cl_vt`): its virtual curve's inverse at the bytes it has
//!   sent in total (`cl_total`), so a class with twice the `ls` slope advances half as fast. When no class
//!   is eligible, dequeue walks from the root, at each level taking the active child with the smallest
//!   virtual time, down to a leaf: excess capacity is split among siblings in proportion to their `ls` m2.
//!   A class joining a busy parent starts at the average of its siblings' smallest and largest virtual
//!   times (`init_vf`), so it can neither claim past service nor be starved; every period of activity of a
//!   parent has its number (`cl_vtperiod`).
//! - `ul`, the *upper limit*: a curve the class's total service may never exceed. Its inverse at the bytes
//!   sent is the class's *fit time* (`cl_myf`); link sharing skips a class (and everything under it) until
//!   `cl_f = max(own fit time, earliest fit time among its children) ≤ now`. `sc` sets `rt` and `ls` at once.
//!
//! **Why `ul` is how people shape with it.** Real-time service is never limited by `ls` or `ul`: it is what
//! the class is owed. Link sharing alone is work-conserving — a lone backlogged class takes the whole link
//! whatever its `ls` says. Only `ul` makes HFSC hold packets while the link is idle, which is what a shaper
//! below the line rate must do (the classic script: a root class `ls m2 LINE ul m2 LINE` with LINE a little
//! below the modem's rate, so the queue builds here and not in the modem). Then dequeue may find packets but
//! no class it may serve; it counts an overlimit and asks to be woken at the earliest eligible time or fit
//! time (`hfsc_schedule_watchdog`, [`Cx::schedule`]).
//!
//! **Arithmetic.** Time is the kernel's psched clock (`psched_get_time`: ns >> 6, 64 ns ticks); bytes are
//! bytes. Slopes are kept scaled, `sm = bytes/tick << SM_SHIFT` (24) and the inverse `ism = ticks/byte <<
//! ISM_SHIFT` (14), and every conversion rounds as the kernel's `m2sm`, `m2ism`, `d2dx`, `sm2m`, `dx2d`,
//! `seg_x2y` and `seg_y2x` do, in wrapping 64-bit integers, so that the curves `tc class show` reads back
//! (`m1 2464Kbit d 5ms`) and the order of service match Linux's to the tick.
//!
//! **Structure.** Every inner class has two trees of its active children, by virtual time and by fit
//! time, keyed by (value, insertion order), which orders equal keys as the kernel's rb-tree insertions
//! do. The kernel keeps the backlogged real-time classes in one tree by eligible time and scans it for
//! the earliest deadline among the eligible ones, O(N) per packet; tclab splits it at the last time it
//! looked: classes not yet eligible by (e, order), eligible ones by (d, e, order), so the same class is
//! found as the first of the second set (seed 002's scaling: 10 000 `sc` leaves cost 0.9 µs a packet
//! instead of 14 µs). All four are treaps ([`super::treap`]) whose nodes live in per-qdisc arrays
//! indexed like the classes, with their first and last elements at hand: link sharing among many equal
//! classes is a round robin (take the first, put it back last), which costs a B-tree a walk down its
//! right edge and a rebalance of its left edge on every packet, and costs a treap O(1) expected (10 000
//! `ls` leaves went from 240 to 133 ns a packet, `sc` leaves from 401 to 176). Levels are kept from a
//! per-class count of children per level, so adding a class under a parent with thousands of children
//! costs O(depth), where the kernel walks the children list; the levels are the same.
//!
//! **Classes and classification.** The qdisc has a root class whose id is the qdisc's handle (`class hfsc
//! 1: root`); while it has no children it is itself a leaf and takes every unclassified packet if `default`
//! is 0. Any class may have children (no depth limit); a class gaining its first child loses its queue,
//! and a parent with only an `rt` curve is upgraded to `sc` ("Forced curve change on parent 'rt' to 'sc'").
//! `hfsc_classify`: a `skb->priority` naming a leaf of this qdisc, then the filters of the root and, when
//! one names an inner class lower in the tree, that class's filters; then the `default` class if it is a
//! leaf. Anything else is dropped and counted (`__NET_XMIT_BYPASS`). A new class needs `rt` or `ls`
//! (tc also refuses `ul` without `ls`); a curve with both slopes zero counts as absent.
//!
//! **Counters.** `tc -s class show` prints per class the bytes and packets it sent, its queue, and HFSC's
//! `period` (virtual-time periods), `work` (bytes sent in total), `rtwork` (bytes sent by the real-time
//! criterion) and `level`. The qdisc counts an overlimit each time it holds packets back.
//!
//! Not modelled: rate estimators, and `qdisc_warn_nonwc`'s log line (a non-work-conserving child simply
//! makes the dequeue return nothing, as in the kernel).

use super::class_hash::ClassHash;
use super::fifo::Fifo;
use super::treap::{Forest, Tree};
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions,
    QdiscStats, Sched, Verdict, Xstats,
};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::units::PSCHED_SHIFT;
use crate::{Nanos, NSEC_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `SM_SHIFT`: scale of a slope in bytes per tick.
pub const SM_SHIFT: u32 = 30 - PSCHED_SHIFT;
/// `ISM_SHIFT`: scale of an inverse slope in ticks per byte.
pub const ISM_SHIFT: u32 = 8 + PSCHED_SHIFT;
const SM_MASK: u64 = (1 << SM_SHIFT) - 1;
const ISM_MASK: u64 = (1 << ISM_SHIFT) - 1;
/// `PSCHED_TICKS_PER_SEC`.
pub const PSCHED_TICKS_PER_SEC: u64 = NSEC_PER_SEC >> PSCHED_SHIFT;
/// `HT_INFINITY`.
pub const HT_INFINITY: u64 = u64::MAX;
const USEC_PER_SEC: u64 = 1_000_000;

const HFSC_RSC: u8 = 0x1;
const HFSC_FSC: u8 = 0x2;
const HFSC_USC: u8 = 0x4;

/// `struct tc_service_curve`: slopes in bytes per second, `d` in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCurve {
    pub m1: u32,
    pub d: u32,
    pub m2: u32,
}

/// `struct tc_hfsc_qopt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscOptions {
    /// Minor number of the default class.
    pub defcls: u16,
}

/// `TCA_HFSC_RSC`, `TCA_HFSC_FSC`, `TCA_HFSC_USC`: the curves tc sends (or the kernel dumps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscClassOptions {
    pub rsc: Option<ServiceCurve>,
    pub fsc: Option<ServiceCurve>,
    pub usc: Option<ServiceCurve>,
}

/// `struct tc_hfsc_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscXstats {
    pub work: u64,
    pub rtwork: u64,
    pub period: u32,
    pub level: u32,
}

// ---------------------------------------------------------------------------------------------
// The kernel's fixed-point service-curve arithmetic
// ---------------------------------------------------------------------------------------------

/// `seg_x2y`: `x * sm >> SM_SHIFT`, split so that it does not overflow.
pub fn seg_x2y(x: u64, sm: u64) -> u64 {
    (x >> SM_SHIFT)
        .wrapping_mul(sm)
        .wrapping_add(((x & SM_MASK).wrapping_mul(sm)) >> SM_SHIFT)
}

/// `seg_y2x`: `y * ism >> ISM_SHIFT`; 0 for 0, infinite for an infinite inverse slope.
pub fn seg_y2x(y: u64, ism: u64) -> u64 {
    if y == 0 {
        0
    } else if ism == HT_INFINITY {
        HT_INFINITY
    } else {
        (y >> ISM_SHIFT)
            .wrapping_mul(ism)
            .wrapping_add(((y & ISM_MASK).wrapping_mul(ism)) >> ISM_SHIFT)
    }
}

/// `m2sm`: bytes/s to scaled bytes/tick, rounded up.
pub fn m2sm(m: u32) -> u64 {
    ((m as u64) << SM_SHIFT).div_ceil(PSCHED_TICKS_PER_SEC)
}

/// `m2ism`: bytes/s to scaled ticks/byte, rounded up; infinite for 0.
pub fn m2ism(m: u32) -> u64 {
    if m == 0 {
        HT_INFINITY
    } else {
        (PSCHED_TICKS_PER_SEC << ISM_SHIFT).div_ceil(m as u64)
    }
}

/// `d2dx`: microseconds to ticks, rounded up.
pub fn d2dx(d: u32) -> u64 {
    (d as u64 * PSCHED_TICKS_PER_SEC).div_ceil(USEC_PER_SEC)
}

/// `sm2m`: scaled bytes/tick back to bytes/s (what `tc class show` reads).
pub fn sm2m(sm: u64) -> u32 {
    (sm.wrapping_mul(PSCHED_TICKS_PER_SEC) >> SM_SHIFT) as u32
}

/// `dx2d`: ticks back to microseconds.
pub fn dx2d(dx: u64) -> u32 {
    (dx.wrapping_mul(USEC_PER_SEC) / PSCHED_TICKS_PER_SEC) as u32
}

/// `struct internal_sc`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct InternalSc {
    sm1: u64,
    ism1: u64,
    dx: u64,
    dy: u64,
    sm2: u64,
    ism2: u64,
}

impl InternalSc {
    /// `sc2isc`.
    fn new(sc: &ServiceCurve) -> InternalSc {
        let sm1 = m2sm(sc.m1);
        let dx = d2dx(sc.d);
        InternalSc {
            sm1,
            ism1: m2ism(sc.m1),
            dx,
            dy: seg_x2y(dx, sm1),
            sm2: m2sm(sc.m2),
            ism2: m2ism(sc.m2),
        }
    }

    /// `hfsc_dump_sc`.
    fn dump(&self) -> ServiceCurve {
        ServiceCurve {
            m1: sm2m(self.sm1),
            d: dx2d(self.dx),
            m2: sm2m(self.sm2),
        }
    }
}

/// `struct runtime_sc`: a curve anchored at (x, y).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeSc {
    x: u64,
    y: u64,
    sm1: u64,
    ism1: u64,
    dx: u64,
    dy: u64,
    sm2: u64,
    ism2: u64,
}

impl RuntimeSc {
    /// `rtsc_init`.
    fn new(isc: &InternalSc, x: u64, y: u64) -> RuntimeSc {
        RuntimeSc {
            x,
            y,
            sm1: isc.sm1,
            ism1: isc.ism1,
            dx: isc.dx,
            dy: isc.dy,
            sm2: isc.sm2,
            ism2: isc.ism2,
        }
    }

    /// `rtsc_y2x`: when the curve reaches `y` bytes.
    fn y2x(&self, y: u64) -> u64 {
        if y < self.y {
            self.x
        } else if y <= self.y.wrapping_add(self.dy) {
            if self.dy == 0 {
                self.x.wrapping_add(self.dx)
            } else {
                self.x.wrapping_add(seg_y2x(y - self.y, self.ism1))
            }
        } else {
            self.x
                .wrapping_add(self.dx)
                .wrapping_add(seg_y2x(y - self.y - self.dy, self.ism2))
        }
    }

    /// `rtsc_x2y`: the bytes the curve reaches at `x`.
    fn x2y(&self, x: u64) -> u64 {
        if x <= self.x {
            self.y
        } else if x <= self.x.wrapping_add(self.dx) {
            self.y.wrapping_add(seg_x2y(x - self.x, self.sm1))
        } else {
            self.y
                .wrapping_add(self.dy)
                .wrapping_add(seg_x2y(x - self.x - self.dx, self.sm2))
        }
    }

    /// `rtsc_min`: this curve becomes the minimum of itself and `isc` started at (x, y).
    fn min(&mut self, isc: &InternalSc, x: u64, y: u64) {
        if isc.sm1 <= isc.sm2 {
            // Convex: the new curve is below from its start or never.
            if self.x2y(x) < y {
                return;
            }
            self.x = x;
            self.y = y;
            return;
        }
        // Concave: compare at x and at x + dx.
        let y1 = self.x2y(x);
        if y1 <= y {
            return;
        }
        let y2 = self.x2y(x.wrapping_add(isc.dx));
        if y2 >= y.wrapping_add(isc.dy) {
            self.x = x;
            self.y = y;
            self.dx = isc.dx;
            self.dy = isc.dy;
            return;
        }
        // They intersect: seg_x2y(dx, sm1) == seg_x2y(dx, sm2) + (y1 - y).
        let mut dx = ((y1 - y) << SM_SHIFT) / (isc.sm1 - isc.sm2);
        if self.x.wrapping_add(self.dx) > x {
            dx = dx.wrapping_add(self.x.wrapping_add(self.dx) - x);
        }
        self.x = x;
        self.y = y;
        self.dx = dx;
        self.dy = seg_x2y(dx, isc.sm1);
    }
}

// ---------------------------------------------------------------------------------------------
// Classes and the scheduler
// ---------------------------------------------------------------------------------------------

/// A parent's tree key: the value in the high half, the insertion order in the low half.
fn tree_key(v: u64, seq: u64) -> u128 {
    ((v as u128) << 64) | seq as u128
}

/// A class's part of the eligible tree: not yet eligible, keyed (e, order), or eligible, keyed
/// (d, e, order).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum ElPos {
    Pending,
    Ready,
}

/// `struct hfsc_class`. Laid out by hand, hottest first, one cache line a group (`repr(C)`, aligned
/// to a line): with thousands of classes each packet's walk down the trees and `update_vf` miss the
/// cache on every line of a class they touch, so the fields of the per-packet path share as few lines
/// as possible.
#[repr(C, align(64))]
#[derive(Serialize, Deserialize)]
struct Class {
    // Line 1: what the trees' walks read.
    /// Fit time (ticks): the class may be served by link sharing once `f ≤ now`.
    f: u64,
    /// Virtual time.
    vt: u64,
    parent: Option<usize>,
    /// Whether this class is in its parent's virtual-time tree, and in its fit-time tree.
    in_vt_tree: bool,
    in_cf_tree: bool,
    level: u32,
    nactive: u32,
    // Line 2: what `update_vf` reads and writes besides.
    /// `cl_total`: bytes sent (by either criterion).
    total: u64,
    /// Intra-period cumulative virtual-time adjustment.
    vtadj: u64,
    /// Own fit time (upper limit) and children's earliest fit time.
    myf: u64,
    cfmin: u64,
    /// Smallest virtual time among children fit for link sharing (monotonic within a period).
    cvtmin: u64,
    // Line 3: the virtual curve.
    virtual_: RuntimeSc,
    // Line 4 on: the queue, the real-time state, counters.
    flags: u8,
    /// `cl->qdisc`: the leaf queue. Kept (purged) when the class becomes inner, as the kernel keeps it.
    q: Sched,
    /// `cl_cumul`: bytes sent by the real-time criterion.
    cumul: u64,
    /// Deadline and eligible time (ticks).
    d: u64,
    e: u64,
    /// This class's place in the eligible tree.
    el_pos: Option<ElPos>,
    bytes: u64,
    packets: u64,
    deadline: RuntimeSc,
    eligible: RuntimeSc,
    ulimit: RuntimeSc,
    // Cold: the parameters, the children, the rest.
    classid: u32,
    rsc: InternalSc,
    fsc: InternalSc,
    usc: InternalSc,
    /// Children per level (`level` is one more than the highest non-empty entry).
    child_levels: Vec<u32>,
    /// Roots of the trees of active children by virtual time and by fit time (nodes in the qdisc's
    /// `vt_nodes` and `cf_nodes`; the key is the time and the insertion order packed into one `u128`).
    vt_tree: Tree,
    cf_tree: Tree,
    /// Largest virtual time seen among the children.
    cvtoff: u64,
    vtperiod: u32,
    parentperiod: u32,
    drops: u32,
}

impl Class {
    fn new(classid: u32, parent: Option<usize>, q: Sched) -> Class {
        Class {
            classid,
            parent,
            level: 0,
            child_levels: Vec::new(),
            q,
            flags: 0,
            rsc: InternalSc::default(),
            fsc: InternalSc::default(),
            usc: InternalSc::default(),
            total: 0,
            cumul: 0,
            d: 0,
            e: 0,
            vt: 0,
            f: 0,
            myf: 0,
            cfmin: 0,
            cvtmin: 0,
            vtadj: 0,
            cvtoff: 0,
            deadline: RuntimeSc::default(),
            eligible: RuntimeSc::default(),
            virtual_: RuntimeSc::default(),
            ulimit: RuntimeSc::default(),
            vtperiod: 0,
            parentperiod: 0,
            nactive: 0,
            el_pos: None,
            in_vt_tree: false,
            in_cf_tree: false,
            vt_tree: Tree::EMPTY,
            cf_tree: Tree::EMPTY,
            bytes: 0,
            packets: 0,
            drops: 0,
        }
    }

    fn options(&self) -> HfscClassOptions {
        let get = |flag: u8, sc: &InternalSc| (self.flags & flag != 0).then(|| sc.dump());
        HfscClassOptions {
            rsc: get(HFSC_RSC, &self.rsc),
            fsc: get(HFSC_FSC, &self.fsc),
            usc: get(HFSC_USC, &self.usc),
        }
    }

    /// `hfsc_change_rsc`.
    fn change_rsc(&mut self, sc: &ServiceCurve, cur_time: u64) {
        self.rsc = InternalSc::new(sc);
        self.deadline = RuntimeSc::new(&self.rsc, cur_time, self.cumul);
        self.eligible = self.deadline;
        if self.rsc.sm1 <= self.rsc.sm2 {
            self.eligible.dx = 0;
            self.eligible.dy = 0;
        }
        self.flags |= HFSC_RSC;
    }

    /// `hfsc_change_fsc`.
    fn change_fsc(&mut self, sc: &ServiceCurve) {
        self.fsc = InternalSc::new(sc);
        self.virtual_ = RuntimeSc::new(&self.fsc, self.vt, self.total);
        self.flags |= HFSC_FSC;
    }

    /// `hfsc_change_usc`.
    fn change_usc(&mut self, sc: &ServiceCurve, cur_time: u64) {
        self.usc = InternalSc::new(sc);
        self.ulimit = RuntimeSc::new(&self.usc, cur_time, self.total);
        self.flags |= HFSC_USC;
    }

    /// `hfsc_upgrade_rt`: an inner class needs a link-sharing curve; it takes its real-time one.
    fn upgrade_rt(&mut self) {
        self.fsc = self.rsc;
        self.virtual_ = RuntimeSc::new(&self.fsc, self.vt, self.total);
        self.flags |= HFSC_FSC;
    }

    fn qlen(&self) -> u32 {
        self.q.q.stats().qlen
    }
}

/// In a snapshot ([`crate::snapshot`]): all of it (the trees' arenas, draws and horizon included),
/// saved only with nothing queued.
#[derive(Serialize, Deserialize)]
pub struct Hfsc {
    handle: Handle,
    defcls: u16,
    /// Classes in an arena; the root class is index 0, found (like the others) by minor. The
    /// arena, the class hash and the per-class tree nodes are saved as byte strings of their own,
    /// which a filter listing's decode skips (`crate::snapshot::FilterListing`).
    #[serde(with = "crate::snapshot::classes")]
    classes: Vec<Option<Class>>,
    free: Vec<usize>,
    /// Arena index + 1 by classid minor (0: none).
    by_minor: Vec<u32>,
    #[serde(with = "crate::snapshot::classes")]
    hash: ClassHash,
    /// `q->eligible`, in two parts: the backlogged real-time classes not yet eligible at `el_horizon`,
    /// by (eligible time, insertion order), and those that are, by (deadline, eligible time, insertion
    /// order). `eltree_get_mindl` is then the first of the second part instead of a scan.
    el_pending: Forest<u128>,
    el_pending_tree: Tree,
    el_ready: Forest<(u64, u64, u64)>,
    el_ready_tree: Tree,
    /// Every class's node in its parent's trees of active children (the roots are in the parents).
    #[serde(with = "crate::snapshot::classes")]
    vt_nodes: Forest<u128>,
    #[serde(with = "crate::snapshot::classes")]
    cf_nodes: Forest<u128>,
    el_horizon: u64,
    seq: u64,
    /// Filter blocks: the root's at the qdisc handle, a class's at its classid.
    blocks: BTreeMap<u32, Block>,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
}

const ROOT: usize = 0;

fn ticks(now: Nanos) -> u64 {
    now >> PSCHED_SHIFT
}

impl Hfsc {
    /// `hfsc_init_qdisc`: the root class with its default pfifo.
    pub fn new(handle: Handle, opts: &HfscOptions, env: &DevEnv) -> Hfsc {
        let mut hash = ClassHash::new();
        hash.insert(handle.0);
        hash.grow();
        let root = Class::new(handle.0, None, Self::default_leaf(handle.0, env.txqueuelen));
        Hfsc {
            handle,
            defcls: opts.defcls,
            classes: vec![Some(root)],
            free: Vec::new(),
            by_minor: vec![1],
            hash,
            el_pending: Forest::new(),
            el_pending_tree: Tree::EMPTY,
            el_ready: Forest::new(),
            el_ready_tree: Tree::EMPTY,
            vt_nodes: Forest::new(),
            cf_nodes: Forest::new(),
            el_horizon: 0,
            seq: 0,
            blocks: BTreeMap::new(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        }
    }

    fn default_leaf(classid: u32, limit: u32) -> Sched {
        // `qdisc_create_dflt(…, &pfifo_qdisc_ops, classid)`: a pfifo of txqueuelen packets, handle 0.
        Sched::new(
            Handle::UNSPEC,
            Handle(classid),
            Box::new(Fifo::pfifo(limit)),
        )
    }

    fn c(&self, i: usize) -> &Class {
        self.classes[i].as_ref().expect("live class index")
    }
    fn cm(&mut self, i: usize) -> &mut Class {
        self.classes[i].as_mut().expect("live class index")
    }

    /// `hfsc_find_class`.
    fn find_idx(&self, classid: u32) -> Option<usize> {
        if classid & 0xffff_0000 != self.handle.0 {
            return None;
        }
        match self.by_minor.get((classid & 0xffff) as usize) {
            Some(&slot) if slot != 0 => Some(slot as usize - 1),
            _ => None,
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    // --- the eligible tree -------------------------------------------------------------------

    fn eltree_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let (e, d) = (self.c(i).e, self.c(i).d);
        let pos = if e <= self.el_horizon {
            self.el_ready
                .insert(&mut self.el_ready_tree, i as u32, (d, e, s));
            ElPos::Ready
        } else {
            self.el_pending
                .insert(&mut self.el_pending_tree, i as u32, tree_key(e, s));
            ElPos::Pending
        };
        self.cm(i).el_pos = Some(pos);
    }

    fn eltree_remove(&mut self, i: usize) {
        match self.cm(i).el_pos.take() {
            Some(ElPos::Pending) => self.el_pending.remove(&mut self.el_pending_tree, i as u32),
            Some(ElPos::Ready) => self.el_ready.remove(&mut self.el_ready_tree, i as u32),
            None => {}
        }
    }

    fn eltree_update(&mut self, i: usize) {
        self.eltree_remove(i);
        self.eltree_insert(i);
    }

    /// `eltree_get_mindl`: among the eligible classes (`cl_e ≤ cur_time`), the one with the earliest
    /// deadline — the first in eligible-tree order among equal deadlines, as the kernel's scan finds it.
    fn eltree_get_mindl(&mut self, cur_time: u64) -> Option<usize> {
        if cur_time < self.el_horizon {
            // Time went back (never on a driver's monotonic clock): everything is pending again.
            let ready: Vec<u32> = self.el_ready.iter(&self.el_ready_tree).collect();
            self.el_ready_tree = Tree::EMPTY;
            for i in ready {
                let (_, e, s) = self.el_ready.key(i);
                self.el_pending
                    .insert(&mut self.el_pending_tree, i, tree_key(e, s));
                self.cm(i as usize).el_pos = Some(ElPos::Pending);
            }
        }
        self.el_horizon = cur_time;
        while let Some(i) = self.el_pending_tree.first() {
            let key = self.el_pending.key(i);
            let e = (key >> 64) as u64;
            if e > cur_time {
                break;
            }
            self.el_pending.remove(&mut self.el_pending_tree, i);
            let d = self.c(i as usize).d;
            self.el_ready
                .insert(&mut self.el_ready_tree, i, (d, e, key as u64));
            self.cm(i as usize).el_pos = Some(ElPos::Ready);
        }
        self.el_ready_tree.first().map(|i| i as usize)
    }

    /// `eltree_get_minel`'s eligible time: the earliest among the backlogged real-time classes.
    fn eltree_min_e(&self) -> Option<u64> {
        let ready = self
            .el_ready
            .iter(&self.el_ready_tree)
            .map(|i| self.el_ready.key(i).1)
            .min();
        let pending = self
            .el_pending_tree
            .first()
            .map(|i| (self.el_pending.key(i) >> 64) as u64);
        ready.into_iter().chain(pending).min()
    }

    // --- the parents' trees ------------------------------------------------------------------

    fn vttree_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let (vt, p) = (self.c(i).vt, self.c(i).parent.expect("a child"));
        let parent = self.classes[p].as_mut().expect("live class index");
        self.vt_nodes
            .insert(&mut parent.vt_tree, i as u32, tree_key(vt, s));
        self.cm(i).in_vt_tree = true;
    }

    fn vttree_remove(&mut self, i: usize) {
        if std::mem::take(&mut self.cm(i).in_vt_tree) {
            let p = self.c(i).parent.expect("a child");
            let parent = self.classes[p].as_mut().expect("live class index");
            self.vt_nodes.remove(&mut parent.vt_tree, i as u32);
        }
    }

    fn vttree_update(&mut self, i: usize) {
        self.vttree_remove(i);
        self.vttree_insert(i);
    }

    fn cftree_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let (f, p) = (self.c(i).f, self.c(i).parent.expect("a child"));
        let parent = self.classes[p].as_mut().expect("live class index");
        self.cf_nodes
            .insert(&mut parent.cf_tree, i as u32, tree_key(f, s));
        self.cm(i).in_cf_tree = true;
    }

    fn cftree_remove(&mut self, i: usize) {
        if std::mem::take(&mut self.cm(i).in_cf_tree) {
            let p = self.c(i).parent.expect("a child");
            let parent = self.classes[p].as_mut().expect("live class index");
            self.cf_nodes.remove(&mut parent.cf_tree, i as u32);
        }
    }

    fn cftree_update(&mut self, i: usize) {
        self.cftree_remove(i);
        self.cftree_insert(i);
    }

    /// `update_cfmin`.
    fn update_cfmin(&mut self, i: usize) {
        let m = self
            .c(i)
            .cf_tree
            .first()
            .map_or(0, |c| (self.cf_nodes.key(c) >> 64) as u64);
        self.cm(i).cfmin = m;
    }

    /// `vttree_firstfit`: the active child with the smallest virtual time that fits at `cur_time`.
    fn vttree_firstfit(&self, i: usize, cur_time: u64) -> Option<usize> {
        self.vt_nodes
            .iter(&self.c(i).vt_tree)
            .map(|c| c as usize)
            .find(|&c| self.c(c).f <= cur_time)
    }

    /// `vttree_get_minvt`: the leaf link sharing serves now, descending by smallest virtual time.
    fn vttree_get_minvt(&mut self, cur_time: u64) -> Option<usize> {
        if self.c(ROOT).cfmin > cur_time {
            return None;
        }
        let mut cl = ROOT;
        while self.c(cl).level > 0 {
            cl = self.vttree_firstfit(cl, cur_time)?;
            let (vt, p) = (self.c(cl).vt, self.c(cl).parent.expect("a child"));
            if self.c(p).cvtmin < vt {
                self.cm(p).cvtmin = vt;
            }
        }
        Some(cl)
    }

    // --- real-time criterion -----------------------------------------------------------------

    /// `init_ed`: a class becomes backlogged under its real-time curve.
    fn init_ed(&mut self, i: usize, next_len: u32, cur_time: u64) {
        let cl = self.cm(i);
        let (rsc, cumul) = (cl.rsc, cl.cumul);
        cl.deadline.min(&rsc, cur_time, cumul);
        cl.eligible = cl.deadline;
        if rsc.sm1 <= rsc.sm2 {
            cl.eligible.dx = 0;
            cl.eligible.dy = 0;
        }
        cl.e = cl.eligible.y2x(cumul);
        cl.d = cl.deadline.y2x(cumul.wrapping_add(next_len as u64));
        self.eltree_insert(i);
    }

    /// `update_ed`.
    fn update_ed(&mut self, i: usize, next_len: u32) {
        let cl = self.cm(i);
        cl.e = cl.eligible.y2x(cl.cumul);
        cl.d = cl.deadline.y2x(cl.cumul.wrapping_add(next_len as u64));
        self.eltree_update(i);
    }

    /// `update_d`.
    fn update_d(&mut self, i: usize, next_len: u32) {
        let cl = self.cm(i);
        cl.d = cl.deadline.y2x(cl.cumul.wrapping_add(next_len as u64));
        // Only the part of the eligible tree ordered by deadline needs to hear of it.
        if let (Some(ElPos::Ready), d) = (cl.el_pos, cl.d) {
            let (_, e, s) = self.el_ready.key(i as u32);
            self.el_ready.remove(&mut self.el_ready_tree, i as u32);
            self.el_ready
                .insert(&mut self.el_ready_tree, i as u32, (d, e, s));
        }
    }

    // --- link-sharing criterion --------------------------------------------------------------

    /// `init_vf`: a class (and, going up, every ancestor that was idle) becomes active for link sharing.
    fn init_vf(&mut self, mut i: usize, now: Nanos) {
        let mut cur_time = 0u64;
        let mut go_active = true;
        while let Some(p) = self.c(i).parent {
            go_active = go_active && {
                let cl = self.cm(i);
                cl.nactive += 1;
                cl.nactive == 1
            };
            if go_active {
                if let Some(max_i) = self.c(p).vt_tree.last() {
                    let max_i = max_i as usize;
                    // The average of the smallest and largest virtual times among the siblings; within
                    // the parent's same period a class's virtual time never goes back.
                    let mut vt = self.c(max_i).vt;
                    let (cvtmin, pperiod) = (self.c(p).cvtmin, self.c(p).vtperiod);
                    if cvtmin != 0 {
                        vt = cvtmin.wrapping_add(vt) / 2;
                    }
                    let cl = self.cm(i);
                    if pperiod != cl.parentperiod || vt > cl.vt {
                        cl.vt = vt;
                    }
                } else {
                    // The first child of a new backlog period of the parent.
                    let cvtoff = self.c(p).cvtoff;
                    self.cm(i).vt = cvtoff;
                    self.cm(p).cvtmin = 0;
                }
                let (pperiod, pnactive) = (self.c(p).vtperiod, self.c(p).nactive);
                let cl = self.cm(i);
                let (fsc, vt, total) = (cl.fsc, cl.vt, cl.total);
                cl.virtual_.min(&fsc, vt, total);
                cl.vtadj = 0;
                cl.vtperiod = cl.vtperiod.wrapping_add(1);
                cl.parentperiod = pperiod;
                if pnactive == 0 {
                    cl.parentperiod = cl.parentperiod.wrapping_add(1);
                }
                cl.f = 0;
                self.vttree_insert(i);
                self.cftree_insert(i);
                if self.c(i).flags & HFSC_USC != 0 {
                    if cur_time == 0 {
                        cur_time = ticks(now);
                    }
                    let cl = self.cm(i);
                    let (usc, total) = (cl.usc, cl.total);
                    cl.ulimit.min(&usc, cur_time, total);
                    cl.myf = cl.ulimit.y2x(total);
                }
            }
            let f = self.c(i).myf.max(self.c(i).cfmin);
            if f != self.c(i).f {
                self.cm(i).f = f;
                self.cftree_update(i);
            }
            self.update_cfmin(p);
            i = p;
        }
    }

    /// `update_vf`: `len` bytes left through class `i`; the ancestors' virtual times and fit times
    /// follow, and classes whose last packet this was go passive.
    fn update_vf(&mut self, mut i: usize, len: u32) {
        let mut go_passive = {
            let cl = self.c(i);
            cl.qlen() == 0 && cl.flags & HFSC_FSC != 0 && cl.nactive != 0
        };
        while let Some(p) = self.c(i).parent {
            let cl = self.cm(i);
            cl.total = cl.total.wrapping_add(len as u64);
            if cl.flags & HFSC_FSC == 0 || cl.nactive == 0 {
                i = p;
                continue;
            }
            go_passive = go_passive && {
                cl.nactive -= 1;
                cl.nactive == 0
            };
            cl.vt = cl.virtual_.y2x(cl.total).wrapping_add(cl.vtadj);
            // A class skipped while it did not fit lags behind the parent's cvtmin: catch it up.
            let cvtmin = self.c(p).cvtmin;
            let cl = self.cm(i);
            if cl.vt < cvtmin {
                cl.vtadj = cl.vtadj.wrapping_add(cvtmin - cl.vt);
                cl.vt = cvtmin;
            }
            if go_passive {
                let vt = cl.vt;
                if vt > self.c(p).cvtoff {
                    self.cm(p).cvtoff = vt;
                }
                self.vttree_remove(i);
                self.cftree_remove(i);
                self.update_cfmin(p);
                i = p;
                continue;
            }
            self.vttree_update(i);
            let cl = self.cm(i);
            if cl.flags & HFSC_USC != 0 {
                cl.myf = cl.ulimit.y2x(cl.total);
            }
            let f = cl.myf.max(cl.cfmin);
            if f != cl.f {
                cl.f = f;
                self.cftree_update(i);
                self.update_cfmin(p);
            }
            i = p;
        }
    }

    /// `hfsc_qlen_notify`: class `i`'s queue emptied other than by dequeue (purged, grafted over).
    fn qlen_notify(&mut self, i: usize) {
        if self.c(i).nactive != 0 {
            self.update_vf(i, 0);
        }
        if self.c(i).flags & HFSC_RSC != 0 {
            self.eltree_remove(i);
        }
    }

    /// `qdisc_purge_queue` of class `i`'s queue: reset it, take its packets off our counters, notify.
    fn purge(&mut self, i: usize) {
        let s = self.c(i).q.q.stats();
        self.cm(i).q.q.reset();
        self.stats.reduce((s.qlen as i64, s.backlog as i64));
        if s.qlen != 0 {
            self.qlen_notify(i);
        }
    }

    /// `hfsc_adjust_levels`, from a per-level count of children: a class's level changed from `old`
    /// to `new` (None: it is gone / new); the ancestors follow.
    fn child_level_changed(&mut self, parent: usize, old: Option<u32>, new: Option<u32>) {
        let mut p = parent;
        let (mut old, mut new) = (old, new);
        loop {
            let cl = self.cm(p);
            if let Some(o) = old {
                cl.child_levels[o as usize] -= 1;
            }
            if let Some(n) = new {
                let n = n as usize;
                if cl.child_levels.len() <= n {
                    cl.child_levels.resize(n + 1, 0);
                }
                cl.child_levels[n] += 1;
            }
            while cl.child_levels.last() == Some(&0) {
                cl.child_levels.pop();
            }
            let level = cl.child_levels.len() as u32;
            let before = cl.level;
            if level == before {
                return;
            }
            cl.level = level;
            match cl.parent {
                Some(pp) => {
                    (old, new) = (Some(before), Some(level));
                    p = pp;
                }
                None => return,
            }
        }
    }

    /// `hfsc_classify`: the leaf, or the verdict for a packet no leaf takes (`Bypass`: counted as a
    /// drop; `Stolen`: an action took it).
    fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<usize, Verdict> {
        if (pkt.priority ^ self.handle.0) & 0xffff_0000 == 0 {
            if let Some(i) = self.find_idx(pkt.priority) {
                if self.c(i).level == 0 {
                    return Ok(i);
                }
            }
        }
        let mut head_level = self.c(ROOT).level;
        let mut block = self.blocks.get(&self.handle.0);
        while let Some(b) = block {
            match crate::filter::classify(b, pkt, cx) {
                FilterVerdict::Unclassified => break,
                FilterVerdict::Shot => return Err(Verdict::Bypass),
                FilterVerdict::Stolen => return Err(Verdict::Stolen),
                FilterVerdict::Classified { classid, .. } => {
                    let Some(i) = self.find_idx(classid) else {
                        break; // a filter selected an invalid classid
                    };
                    let level = self.c(i).level;
                    if level >= head_level {
                        break; // filters may only point downwards
                    }
                    if level == 0 {
                        return Ok(i);
                    }
                    block = self.blocks.get(&classid);
                    head_level = level;
                }
            }
        }
        match self.find_idx(self.handle.0 | self.defcls as u32) {
            Some(i) if self.c(i).level == 0 => Ok(i),
            _ => Err(Verdict::Bypass),
        }
    }

    /// `hfsc_schedule_watchdog`: wake at the earliest eligible time or the root's earliest fit time.
    fn schedule_watchdog(&self, cx: &mut Cx) {
        let mut next = self.eltree_min_e().unwrap_or(0);
        let cfmin = self.c(ROOT).cfmin;
        if cfmin != 0 && (next == 0 || next > cfmin) {
            next = cfmin;
        }
        if next != 0 {
            let at = next.saturating_mul(1 << PSCHED_SHIFT);
            cx.schedule(at.max(cx.now + 1));
        }
    }

    /// `hfsc_dequeue` (without the peeked packet).
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Packet> {
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        if self.stats.qlen == 0 {
            return None;
        }
        let cur_time = ticks(cx.now);
        loop {
            // Real time first: the eligible class with the earliest deadline; else link sharing.
            let (i, realtime) = match self.eltree_get_mindl(cur_time) {
                Some(i) => (i, true),
                None => match self.vttree_get_minvt(cur_time) {
                    Some(i) => (i, false),
                    None => {
                        self.stats.overlimits += 1;
                        self.schedule_watchdog(cx);
                        return None;
                    }
                },
            };
            let Some(pkt) = self.cm(i).q.q.dequeue(cx) else {
                if self.c(i).qlen() == 0 {
                    // The child emptied itself (an AQM dropped its last packets): what its
                    // `qdisc_tree_reduce_backlog` would have told us through `qlen_notify`.
                    self.qlen_notify(i);
                    continue;
                }
                // `qdisc_warn_nonwc`: a non-work-conserving child; it asked for its own wake-up.
                return None;
            };
            let (len, segs) = (pkt.len, pkt.bstats_packets());
            let cl = self.cm(i);
            cl.bytes += len as u64;
            cl.packets += segs;
            self.update_vf(i, len);
            if realtime {
                let cl = self.cm(i);
                cl.cumul = cl.cumul.wrapping_add(len as u64);
            }
            if self.c(i).flags & HFSC_RSC != 0 {
                if self.c(i).qlen() != 0 {
                    let next_len = self.cm(i).q.q.peek(cx).map_or(0, |p| p.len);
                    if self.c(i).qlen() != 0 {
                        if realtime {
                            self.update_ed(i, next_len);
                        } else {
                            self.update_d(i, next_len);
                        }
                    }
                } else {
                    self.eltree_remove(i);
                }
            }
            self.stats.count_unqueued(&pkt);
            self.stats.count_sent(&pkt);
            return Some(pkt);
        }
    }

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

    fn block_key(&self, classid: Handle) -> u32 {
        if classid.minor() == 0 {
            self.handle.0
        } else {
            classid.0
        }
    }

    /// Is a class named by a filter that holds it (`qdisc_class_in_use`)? `hfsc_bind_tcf` takes no
    /// hold when the class owning the filter's block is not above the class named (its level is not
    /// higher): such a filter is never consulted on the way to that class (a leaf's filters, or a
    /// sibling's), so the class may be deleted under it. Levels are read now, where the kernel read them
    /// when the filter was added: the same answer unless the tree's shape changed in between.
    fn bound(&self, classid: u32) -> bool {
        let Some(level) = self.find_idx(classid).map(|i| self.c(i).level) else {
            return false;
        };
        self.blocks.iter().any(|(&owner, b)| {
            let owner_level = self.find_idx(owner).map_or(u32::MAX, |i| self.c(i).level);
            owner_level > level && b.binds(classid)
        })
    }

    /// The service curves of a class, as `tc class show` reads them (tests).
    pub fn class_options(&self, classid: Handle) -> Option<HfscClassOptions> {
        Some(self.c(self.find_idx(classid.0)?).options())
    }

    /// HFSC's counters of a class (tests).
    pub fn class_xstats(&self, classid: Handle) -> Option<HfscXstats> {
        let c = self.c(self.find_idx(classid.0)?);
        Some(HfscXstats {
            work: c.total,
            rtwork: c.cumul,
            period: c.vtperiod,
            level: c.level,
        })
    }
}

impl Qdisc for Hfsc {
    fn kind(&self) -> &'static str {
        "hfsc"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let i = match self.classify(&mut pkt, cx) {
            Ok(i) => i,
            Err(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Unclassified);
                }
                return v;
            }
        };
        let len = pkt.len;
        cx.tag_leaf(&mut pkt, self.c(i).classid);
        let first = self.c(i).qlen() == 0;
        let mark = cx.tree_reduced;
        let v = self.cm(i).q.q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        if v != Verdict::Success {
            if v.counts_drop() {
                self.cm(i).drops += 1;
                self.stats.drops += 1;
            }
            return v;
        }
        self.stats.backlog = self.stats.backlog.wrapping_add(len);
        self.stats.qlen += 1;
        let cl = self.c(i);
        let in_trees = (cl.flags & HFSC_FSC != 0 && cl.nactive != 0)
            || (cl.flags & HFSC_RSC != 0 && cl.el_pos.is_some());
        if first && !in_trees {
            let flags = cl.flags;
            if flags & HFSC_RSC != 0 {
                self.init_ed(i, len, ticks(cx.now));
            }
            if flags & HFSC_FSC != 0 {
                self.init_vf(i, cx.now);
            }
            // Isolate the head, so that a head drop before the first dequeue cannot invalidate
            // the deadline.
            if flags & HFSC_RSC != 0 {
                self.cm(i).q.q.peek(cx);
            }
        }
        Verdict::Success
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    /// `hfsc_reset_qdisc`: every class's state and queue back to zero; curves and counters stay.
    fn reset(&mut self) {
        self.peeked.clear();
        for cl in self.classes.iter_mut().flatten() {
            cl.total = 0;
            cl.cumul = 0;
            cl.d = 0;
            cl.e = 0;
            cl.vt = 0;
            cl.vtadj = 0;
            cl.cvtmin = 0;
            cl.cvtoff = 0;
            cl.vtperiod = 0;
            cl.parentperiod = 0;
            cl.f = 0;
            cl.myf = 0;
            cl.cfmin = 0;
            cl.nactive = 0;
            cl.vt_tree = Tree::EMPTY;
            cl.cf_tree = Tree::EMPTY;
            cl.el_pos = None;
            cl.in_vt_tree = false;
            cl.in_cf_tree = false;
            cl.q.q.reset();
            if cl.flags & HFSC_RSC != 0 {
                cl.deadline = RuntimeSc::new(&cl.rsc, 0, 0);
            }
            if cl.flags & HFSC_FSC != 0 {
                cl.virtual_ = RuntimeSc::new(&cl.fsc, 0, 0);
            }
            if cl.flags & HFSC_USC != 0 {
                cl.ulimit = RuntimeSc::new(&cl.usc, 0, 0);
            }
        }
        self.el_pending_tree = Tree::EMPTY;
        self.el_ready_tree = Tree::EMPTY;
        self.el_horizon = 0;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Hfsc(HfscOptions {
            defcls: self.defcls,
        })
    }

    /// `hfsc_change_qdisc`: only the default class.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Hfsc(o) = opts else {
            return Err(super::wrong_kind());
        };
        self.defcls = o.defcls;
        Ok(Vec::new())
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }

    /// `hfsc_tcf_block`: the root class's block for the qdisc, else the class's own.
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

/// The block of a class no filter was ever attached to.
fn empty_block() -> &'static Block {
    thread_local! {
        static EMPTY: &'static Block = Box::leak(Box::default());
    }
    EMPTY.with(|b| *b)
}

impl ClassOps for Hfsc {
    fn find(&self, classid: Handle) -> bool {
        self.find_idx(classid.0).is_some()
    }

    /// `hfsc_class_leaf`: only a class at level 0 has a leaf qdisc.
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        let c = self.c(self.find_idx(classid.0)?);
        (c.level == 0).then_some(&c.q)
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        let i = self.find_idx(classid.0)?;
        let c = self.cm(i);
        (c.level == 0).then_some(&mut c.q)
    }

    /// An inner class keeps its old leaf qdisc (`cl->qdisc`, purged when the class gained a child): the
    /// kernel's hash still holds it, so `tc qdisc show` lists it and `qdisc_lookup` finds it.
    fn attached(&self, classid: Handle) -> Option<&Sched> {
        Some(&self.c(self.find_idx(classid.0)?).q)
    }

    fn attached_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        let i = self.find_idx(classid.0)?;
        Some(&mut self.cm(i).q)
    }

    /// `hfsc_graft_class`: only a leaf; `None` puts back the default pfifo. The old queue is purged.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let i = self
            .find_idx(classid.0)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        if self.c(i).level > 0 {
            return Err(KernelError::new(Errno::Invalid));
        }
        let new = new.unwrap_or_else(|| Self::default_leaf(classid.0, env.txqueuelen));
        let mut old = std::mem::replace(&mut self.cm(i).q, new);
        let s = old.q.stats();
        old.q.reset();
        self.stats.reduce((s.qlen as i64, s.backlog as i64));
        if s.qlen != 0 {
            self.qlen_notify(i);
        }
        Ok(Some(old))
    }

    /// `hfsc_change_class`.
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let ClassOptions::Hfsc(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        // A curve with two zero slopes is no curve.
        let some = |sc: Option<ServiceCurve>| sc.filter(|s| s.m1 != 0 || s.m2 != 0);
        let (rsc, fsc, usc) = (some(o.rsc), some(o.fsc), some(o.usc));
        let cur_time = ticks(now);

        if let Some(i) = self.find_idx(classid.0) {
            if parent.0 != 0 {
                match self.c(i).parent {
                    Some(p) if self.c(p).classid != parent.0 => {
                        return Err(KernelError::new(Errno::Invalid))
                    }
                    None if parent != Handle::ROOT => return Err(KernelError::new(Errno::Invalid)),
                    _ => {}
                }
            }
            let old_flags = self.c(i).flags;
            let cl = self.cm(i);
            if let Some(sc) = &rsc {
                cl.change_rsc(sc, cur_time);
            }
            if let Some(sc) = &fsc {
                cl.change_fsc(sc);
            }
            if let Some(sc) = &usc {
                cl.change_usc(sc, cur_time);
            }
            if self.c(i).qlen() != 0 {
                let mut cx = Cx::new(now);
                let len = self.cm(i).q.q.peek(&mut cx).map_or(0, |p| p.len);
                if self.c(i).qlen() != 0 {
                    let flags = self.c(i).flags;
                    if flags & HFSC_RSC != 0 {
                        if old_flags & HFSC_RSC != 0 {
                            self.update_ed(i, len);
                        } else {
                            self.init_ed(i, len, cur_time);
                        }
                    }
                    if flags & HFSC_FSC != 0 {
                        if old_flags & HFSC_FSC != 0 {
                            self.update_vf(i, 0);
                        } else {
                            self.init_vf(i, now);
                        }
                    }
                }
            }
            return Ok(Vec::new());
        }

        if parent == Handle::ROOT {
            return Err(KernelError::new(Errno::Exists));
        }
        let p = if parent.0 != 0 {
            self.find_idx(parent.0)
                .ok_or_else(|| KernelError::new(Errno::NoEntry))?
        } else {
            ROOT
        };
        if classid.0 == 0 || classid.qdisc() != self.handle {
            return Err(KernelError::new(Errno::Invalid));
        }
        if rsc.is_none() && fsc.is_none() {
            return Err(KernelError::new(Errno::Invalid));
        }

        let mut cl = Class::new(
            classid.0,
            Some(p),
            Self::default_leaf(classid.0, env.txqueuelen),
        );
        if let Some(sc) = &rsc {
            cl.change_rsc(sc, 0);
        }
        if let Some(sc) = &fsc {
            cl.change_fsc(sc);
        }
        if let Some(sc) = &usc {
            cl.change_usc(sc, 0);
        }
        let mut warnings = Vec::new();
        if self.c(p).flags & HFSC_FSC == 0 && p != ROOT {
            warnings.push(Warning(
                "Forced curve change on parent 'rt' to 'sc'".to_string(),
            ));
            self.cm(p).upgrade_rt();
        }
        let i = self.alloc(cl);
        let minor = classid.minor() as usize;
        if self.by_minor.len() <= minor {
            self.by_minor.resize(minor + 1, 0);
        }
        self.by_minor[minor] = i as u32 + 1;
        self.hash.insert(classid.0);
        if self.c(p).level == 0 {
            self.purge(p);
        }
        self.child_level_changed(p, None, Some(0));
        self.hash.grow();
        Ok(warnings)
    }

    /// `hfsc_delete_class`: not an inner class, not the root, not a class a filter names.
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError> {
        let i = self
            .find_idx(classid.0)
            .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
        if self.c(i).level > 0 || i == ROOT || self.bound(classid.0) {
            return Err(KernelError::msg(Errno::Busy, "HFSC class in use"));
        }
        let p = self.c(i).parent.expect("not the root");
        self.purge(i);
        // Whatever trees it may still be in (an idle class is in none).
        self.eltree_remove(i);
        self.vttree_remove(i);
        self.cftree_remove(i);
        self.child_level_changed(p, Some(0), None);
        self.hash.remove(classid.0);
        self.by_minor[classid.minor() as usize] = 0;
        self.blocks.remove(&classid.0);
        self.classes[i] = None;
        self.free.push(i);
        Ok(())
    }

    /// `hfsc_walk` + `hfsc_dump_class(_stats)`, in class-hash order.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.hash
            .walk()
            .filter_map(|id| self.find_idx(id))
            .map(|i| {
                let c = self.c(i);
                let q = c.q.q.stats();
                ClassInfo {
                    kind: "hfsc",
                    classid: Handle(c.classid),
                    parent: c.parent.map_or(Handle::ROOT, |p| Handle(self.c(p).classid)),
                    leaf: (c.level == 0 && c.q.handle != Handle::UNSPEC).then_some(c.q.handle),
                    options: Some(ClassOptions::Hfsc(c.options())),
                    stats: QdiscStats {
                        bytes: c.bytes,
                        packets: c.packets,
                        drops: c.drops,
                        overlimits: 0,
                        requeues: 0,
                        backlog: q.backlog,
                        qlen: q.qlen,
                    },
                    htb_xstats: None,
                    xstats: Some(Xstats::Hfsc(HfscXstats {
                        work: c.total,
                        rtwork: c.cumul,
                        period: c.vtperiod,
                        level: c.level,
                    })),
                }
            })
            .collect()
    }

    /// Every class's queue, inner classes' purged ones included (the kernel keeps them attached).
    fn children(&self) -> Vec<&Sched> {
        self.classes.iter().flatten().map(|c| &c.q).collect()
    }

    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.classes
            .iter_mut()
            .flatten()
            .map(|c| &mut c.q)
            .collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "hfsc",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Hfsc(o) => Ok((Box::new(Hfsc::new(handle, o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_as_the_kernel() {
        // 20 kbit/s = 2500 B/s reads back as 2500 (tc prints 20Kbit).
        assert_eq!(m2sm(2500), 2685);
        assert_eq!(sm2m(m2sm(2500)), 2500);
        // umax 1540 dmax 5ms: m1 = 308000 B/s, d = 5000 µs.
        assert_eq!(sm2m(m2sm(308_000)), 308_000);
        assert_eq!(d2dx(5000), 78_125_000 / 1000);
        assert_eq!(dx2d(d2dx(5000)), 5000);
        assert_eq!(m2ism(0), HT_INFINITY);
        assert_eq!(seg_y2x(0, HT_INFINITY), 0);
        assert_eq!(seg_y2x(1, HT_INFINITY), HT_INFINITY);
        // 1 s at 1 MB/s is 10^6 bytes, to within the rounding of sm.
        let sm = m2sm(1_000_000);
        let y = seg_x2y(PSCHED_TICKS_PER_SEC, sm);
        assert!((1_000_000..1_000_002).contains(&y), "{y}");
        let x = seg_y2x(1_000_000, m2ism(1_000_000));
        assert!(x.abs_diff(PSCHED_TICKS_PER_SEC) <= 1, "{x}");
    }

    #[test]
    fn rtsc_min_of_concave_curves() {
        // 10 Mbit/s for 20 ms then 1 Mbit/s, started at 0.
        let isc = InternalSc::new(&ServiceCurve {
            m1: 1_250_000,
            d: 20_000,
            m2: 125_000,
        });
        let mut rt = RuntimeSc::new(&isc, 0, 0);
        // 25 000 bytes at the end of the first segment.
        let y = rt.x2y(d2dx(20_000));
        assert!(y.abs_diff(25_000) <= 1, "{y}");
        // The same curve restarted later and higher is above: no change.
        let before = rt;
        rt.min(&isc, d2dx(1_000_000), 1_000_000);
        assert_eq!(rt, before);
        // Restarted at 1 s after only 30 000 bytes: the new curve is below and replaces the old.
        rt.min(&isc, PSCHED_TICKS_PER_SEC, 30_000);
        assert_eq!((rt.x, rt.y, rt.dx), (PSCHED_TICKS_PER_SEC, 30_000, isc.dx));
    }
}
