//! CBQ — class-based queueing, after `net/sched/sch_cbq.c` as it was before Linux 6.3 removed it
//! (Alexey Kuznetsov's implementation of Floyd and Jacobson, "Link-sharing and Resource Management Models
//! for Packet Networks", 1995).
//!
//! Classes form a tree under a root "link" class that stands for the whole `bandwidth` of the device. Each
//! class has a `rate`. CBQ does not count tokens as HTB does: it *measures idle time*. When a class sends a
//! packet of `len` bytes, the time since its previous packet minus the time `len` takes at the class's rate
//! is its `idle` — positive if the class sends slower than its rate, negative if faster. An exponentially
//! weighted average of it, `avgidle` (weight 2^-`ewma`), says whether the class is *underlimit* (avgidle >
//! 0) or *overlimit*; it is capped at `maxidle` (the burst a quiet class may save up, from `maxburst`) and
//! floored at `minidle`. An overlimit class gets an `undertime`: the moment its average will be back at
//! zero. Time is the kernel's psched ticks of 64 ns, and "sending" is measured at the next dequeue, which
//! on a busy link is when the previous packet left (the kernel's "time integrator").
//!
//! Scheduling is weighted round robin inside strict priorities: the classes with backlog sit in one ring
//! per priority (`prio` 1..8, 1 first); each class may send `quantum` bytes per round, its quantum being
//! its `allot` scaled by its `weight` relative to the other classes of its priority. A class may send if it
//! is underlimit, or — unless `bounded` — if an ancestor it may *borrow* from is underlimit, and that
//! ancestor's level is at most the *top level*. The top-level cutoff is the link-sharing guideline of the
//! paper: borrow only from ancestors at the lowest level that still has underlimit classes with backlog, so
//! that a class lends to its own subtree first. If every class is blocked, the cutoff is lifted and the
//! round repeated; if still nothing may send, the qdisc asks to be woken when the first class becomes
//! underlimit again (the kernel's watchdog). An `isolated` class does not lend to others: its usage is not
//! charged to its parent.
//!
//! Every class, inner ones included, has a leaf qdisc (a pfifo by default): packets classified to an inner
//! class — or to the root when nothing matched and no `defmap` default exists — queue there.
//!
//! Classification without filters follows `cbq_classify`: `skb->priority` naming one of our classes picks
//! it; otherwise the defaults (`split`/`defmap`) of the root by logical priority, else the root itself.
//! Filters attach to the qdisc and to each class; classification walks them as `cbq_classify` does.
//!
//! Not modelled: the overlimit strategies and policing that were removed from the kernel long before CBQ
//! itself, rate estimators, and `TCA_CBQ_OVL_STRATEGY`/`TCA_CBQ_POLICE` (refused, as the kernel did).

use super::class_hash::ClassHash;
use super::fifo::Fifo;
use super::{ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats};
use super::{DropReason, Peeked, Sched, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::units::{LinkLayer, RateSpec, PSCHED_SHIFT};
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `TC_CBQ_MAXPRIO`: priorities 1..8 as tc numbers them (0..7 inside); 8 is "no-transmit".
pub const MAXPRIO: u8 = 8;
/// `TC_CBQ_MAXLEVEL`.
pub const MAXLEVEL: u8 = 8;
/// `TC_CBQ_DEF_EWMA`.
pub const DEF_EWMA: u8 = 5;
const TC_PRIO_MAX: u32 = 15;
const TC_PRIO_BESTEFFORT: usize = 0;

/// `TCF_CBQ_LSS_*` bits of [`CbqLss::flags`] and [`CbqLss::change`].
pub const LSS_BOUNDED: u8 = 1;
pub const LSS_ISOLATED: u8 = 2;
pub const LSS_FLAGS: u32 = 1;
pub const LSS_EWMA: u32 = 2;
pub const LSS_MAXIDLE: u32 = 4;
pub const LSS_MINIDLE: u32 = 8;
pub const LSS_OFFTIME: u32 = 0x10;
pub const LSS_AVPKT: u32 = 0x20;

/// `struct tc_ratespec` plus the cell size of the rate table tc computed (`cell_log`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbqRate {
    pub spec: RateSpec,
    pub cell_log: u8,
}

/// `struct tc_cbq_lssopt`: link-sharing parameters; `change` says which fields to apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbqLss {
    pub change: u32,
    pub flags: u8,
    pub ewma_log: u8,
    pub level: u8,
    /// Ticks, scaled by 2^ewma_log.
    pub maxidle: u32,
    pub minidle: u32,
    /// Ticks.
    pub offtime: u32,
    pub avpkt: u32,
}

/// `struct tc_cbq_wrropt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbqWrr {
    pub allot: u32,
    /// 1..8 (8: no-transmit); 0 keeps the current one.
    pub priority: u8,
    pub cpriority: u8,
    /// Relative share within the priority (tc's default: the rate in bytes/s).
    pub weight: u32,
}

/// `struct tc_cbq_fopt`: the split node and the logical priorities this class is the default for there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbqFopt {
    pub split: u32,
    pub defmap: u32,
    pub defchange: u32,
}

/// The attributes tc sends for a CBQ qdisc or class (`TCA_CBQ_*`), each optional as in netlink.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbqOptions {
    pub rate: Option<CbqRate>,
    pub lss: Option<CbqLss>,
    pub wrr: Option<CbqWrr>,
    pub fopt: Option<CbqFopt>,
}

pub type CbqClassOptions = CbqOptions;

/// `struct tc_cbq_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CbqXstats {
    pub borrows: u32,
    pub overactions: u32,
    pub avgidle: i32,
    pub undertime: i32,
}

/// tc's rate table (`tc_calc_rtable`): ticks to send `(i + 1) << cell_log` bytes, for i in 0..256.
#[derive(Serialize, Deserialize)]
struct RateTable {
    rate: CbqRate,
    #[serde(with = "crate::snapshot::array")]
    data: [u32; 256],
}

/// `tc_calc_xmittime` as tc 6.1 computes it: whole microseconds, then 15.625 ticks each.
fn xmit_ticks(rate: u64, size: u32) -> u32 {
    let us = (1e6 * (size as f64 / rate as f64)).min(u32::MAX as f64) as u32;
    (us as f64 * 15.625).min(u32::MAX as f64) as u32
}

impl RateTable {
    /// `qdisc_get_rtab`: the kernel refuses a zero rate and a cell_log of 0 or ≥ 32.
    fn new(rate: &CbqRate) -> Result<RateTable, KernelError> {
        if rate.spec.rate == 0 || rate.cell_log == 0 || rate.cell_log >= 32 {
            return Err(KernelError::invalid(
                "Invalid rate table parameters for searching",
            ));
        }
        let mut data = [0u32; 256];
        for (i, d) in data.iter_mut().enumerate() {
            let mut sz = ((i as u64 + 1) << rate.cell_log).min(u32::MAX as u64) as u32;
            sz = sz.max(rate.spec.mpu as u32);
            if rate.spec.linklayer == LinkLayer::Atm {
                sz = sz.div_ceil(48).saturating_mul(53);
            }
            *d = xmit_ticks(rate.spec.rate, sz);
        }
        Ok(RateTable { rate: *rate, data })
    }

    /// `qdisc_l2t`: ticks to send `len` bytes (cell_align is −1, as tc sets it).
    fn l2t(&self, len: u32) -> i64 {
        let slot = (len as i64 - 1 + self.rate.spec.overhead as i64).max(0) >> self.rate.cell_log;
        if slot > 255 {
            self.data[255] as i64 * (slot >> 8) + self.data[(slot & 0xff) as usize] as i64
        } else {
            self.data[slot as usize] as i64
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Class {
    classid: u32,
    /// Filters attached to this class (`cl->block`; the root's are the qdisc's).
    block: Block,
    // tree
    tparent: Option<usize>,
    /// The class this one's usage is charged to (None if isolated or the root).
    share: Option<usize>,
    /// The class it may borrow from (None if bounded or the root).
    borrow: Option<usize>,
    children: usize,
    split: Option<usize>,
    defmap: u32,
    /// For split nodes: the class by logical priority (TC_PRIO_*).
    defaults: [Option<usize>; 16],
    q: Sched,
    // parameters
    rtab: RateTable,
    priority: u8,
    cpriority: u8,
    priority2: u8,
    ewma_log: u8,
    maxidle: i64,
    offtime: i64,
    minidle: i64,
    avpkt: u32,
    allot: i64,
    quantum: i64,
    weight: i64,
    // state
    level: u8,
    last: i64,
    undertime: i64,
    avgidle: i64,
    deficit: i64,
    delayed: bool,
    next_alive: Option<usize>,
    bytes: u64,
    packets: u64,
    drops: u32,
    overlimits: u32,
    borrows: u32,
    overactions: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: no peeked packet, each class's child saves
/// its own queue or refuses. The active rings come with it: a class drained by its last dequeue stays
/// in its ring until the next pass unlinks it, as in the kernel.
#[derive(Serialize, Deserialize)]
pub struct Cbq {
    /// A packet taken out by `peek` and held for the next dequeue.
    #[serde(skip)]
    peeked: Peeked,
    handle: Handle,
    mtu: u32,
    /// Slot 0 is the root ("link") class.
    classes: Vec<Option<Class>>,
    hash: ClassHash,
    nclasses: [u32; MAXPRIO as usize + 1],
    quanta: [i64; MAXPRIO as usize + 1],
    activemask: u32,
    /// Per priority, the tail of the ring of classes with backlog.
    active: [Option<usize>; MAXPRIO as usize + 1],
    tx_class: Option<usize>,
    tx_borrowed: Option<usize>,
    tx_len: u32,
    /// Ticks, cached at the last dequeue.
    now: i64,
    wd_expires: i64,
    toplevel: u8,
    hgenerator: u32,
    stats: QdiscStats,
}

const LINK: usize = 0;

fn ticks(ns: Nanos) -> i64 {
    (ns >> PSCHED_SHIFT) as i64
}

impl Cbq {
    /// `cbq_init`: the root class from the qdisc's rate and link-sharing options.
    pub fn new(
        handle: Handle,
        o: &CbqOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Cbq, KernelError> {
        let rate = o.rate.ok_or_else(|| KernelError::new(Errno::Invalid))?;
        let rtab = RateTable::new(&rate)?;
        let allot = env.psched_mtu() as i64;
        let link = Class {
            classid: handle.0,
            block: Block::default(),
            tparent: None,
            share: None,
            borrow: None,
            children: 0,
            split: None,
            defmap: 0,
            defaults: [None; 16],
            q: Sched::new(
                Handle::UNSPEC,
                handle,
                Box::new(Fifo::pfifo(env.txqueuelen.max(1))),
            ),
            weight: rtab.rate.spec.rate as i64,
            rtab,
            priority: MAXPRIO - 1,
            cpriority: MAXPRIO - 1,
            priority2: MAXPRIO - 1,
            ewma_log: DEF_EWMA,
            maxidle: 0,
            offtime: 0,
            minidle: -0x7fff_ffff,
            avpkt: (allot / 2) as u32,
            allot,
            quantum: allot,
            level: 0,
            last: 0,
            undertime: 0,
            avgidle: 0,
            deficit: 0,
            delayed: false,
            next_alive: None,
            bytes: 0,
            packets: 0,
            drops: 0,
            overlimits: 0,
            borrows: 0,
            overactions: 0,
        };
        let mut q = Cbq {
            peeked: Peeked::default(),
            handle,
            mtu: env.mtu,
            classes: vec![Some(link)],
            hash: ClassHash::new(),
            nclasses: [0; MAXPRIO as usize + 1],
            quanta: [0; MAXPRIO as usize + 1],
            activemask: 0,
            active: [None; MAXPRIO as usize + 1],
            tx_class: None,
            tx_borrowed: None,
            tx_len: 0,
            now: ticks(now),
            wd_expires: 0,
            toplevel: MAXLEVEL,
            hgenerator: 0,
            stats: QdiscStats::default(),
        };
        q.hash.insert(handle.0);
        if let Some(lss) = &o.lss {
            q.set_lss(LINK, lss);
        }
        q.addprio(LINK);
        Ok(q)
    }

    fn cl(&self, i: usize) -> &Class {
        self.classes[i].as_ref().expect("live class index")
    }

    fn cl_mut(&mut self, i: usize) -> &mut Class {
        self.classes[i].as_mut().expect("live class index")
    }

    fn lookup(&self, classid: u32) -> Option<usize> {
        self.classes
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.classid == classid))
    }

    fn leaf_qlen(&self, i: usize) -> u32 {
        self.cl(i).q.q.stats().qlen
    }

    // ----- classification -----

    /// `cbq_classify`: the class for a packet, or the verdict when a filter's action took it
    /// (`Bypass`: shot, counted as a drop; `Stolen`: not counted). Filters of the
    /// root come first; a result naming an inner class continues with that class's filters, as long as
    /// the level goes down.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<usize, Verdict> {
        let prio = pkt.priority;
        if (prio ^ self.handle.0) >> 16 == 0 {
            if let Some(i) = self.lookup(prio) {
                return Ok(i);
            }
        }
        let mut head = LINK;
        loop {
            if self.cl(head).block.filter_list_is_empty() {
                break;
            }
            let res = match crate::filter::classify(&self.cl(head).block, pkt, cx) {
                FilterVerdict::Unclassified => break,
                FilterVerdict::Shot => return Err(Verdict::Bypass),
                FilterVerdict::Stolen => return Err(Verdict::Stolen),
                FilterVerdict::Classified { classid, .. } => classid,
            };
            let defmap = &self.cl(head).defaults;
            let found = if res >> 16 != 0 {
                self.lookup(res)
            } else {
                defmap[(res & TC_PRIO_MAX) as usize].or(defmap[TC_PRIO_BESTEFFORT])
            };
            let Some(cl) = found else { break };
            if self.cl(cl).level >= self.cl(head).level {
                break;
            }
            if self.cl(cl).level == 0 {
                return Ok(cl);
            }
            head = cl;
        }
        if prio >> 16 != 0 {
            return Ok(head);
        }
        let d = &self.cl(head).defaults;
        Ok(d[(prio & TC_PRIO_MAX) as usize]
            .or(d[TC_PRIO_BESTEFFORT])
            .unwrap_or(head))
    }

    // ----- the active rings -----

    /// `cbq_activate_class`: append to the ring of its priority.
    fn activate(&mut self, i: usize) {
        let prio = self.cl(i).cpriority as usize;
        let tail = self.active[prio];
        self.active[prio] = Some(i);
        match tail {
            Some(t) => {
                let n = self.cl(t).next_alive;
                self.cl_mut(i).next_alive = n;
                self.cl_mut(t).next_alive = Some(i);
            }
            None => {
                self.cl_mut(i).next_alive = Some(i);
                self.activemask |= 1 << prio;
            }
        }
    }

    /// `cbq_deactivate_class`.
    fn deactivate(&mut self, this: usize) {
        let prio = self.cl(this).cpriority as usize;
        let Some(mut prev) = self.active[prio] else {
            return;
        };
        loop {
            let Some(cl) = self.cl(prev).next_alive else {
                return;
            };
            if cl == this {
                let n = self.cl(cl).next_alive;
                self.cl_mut(prev).next_alive = n;
                self.cl_mut(cl).next_alive = None;
                if Some(cl) == self.active[prio] {
                    self.active[prio] = Some(prev);
                    if cl == prev {
                        self.active[prio] = None;
                        self.activemask &= !(1 << prio);
                    }
                }
                return;
            }
            prev = cl;
            if Some(prev) == self.active[prio] {
                return;
            }
        }
    }

    // ----- link sharing -----

    /// `cbq_mark_toplevel`: a packet arrived in class `i`: lower the cutoff to the level of the first
    /// underlimit class on its borrow chain.
    fn mark_toplevel(&mut self, mut i: usize, now: i64) {
        let toplevel = self.toplevel;
        if toplevel <= self.cl(i).level {
            return;
        }
        loop {
            if self.cl(i).undertime < now {
                self.toplevel = self.cl(i).level;
                return;
            }
            match self.cl(i).borrow {
                Some(b) if toplevel > self.cl(b).level => i = b,
                _ => return,
            }
        }
    }

    /// `cbq_update`: account the packet sent at the previous dequeue to its class and every class it is
    /// charged to, updating their average idle time and undertime.
    fn update(&mut self) {
        let Some(this) = self.tx_class.take() else {
            return;
        };
        let len = self.tx_len;
        let link_l2t = self.cl(LINK).rtab.l2t(len);
        let now = self.now + link_l2t;
        let mut cur = Some(this);
        while let Some(i) = cur {
            let c = self.cl_mut(i);
            let mut avgidle = c.avgidle;
            c.packets += 1;
            c.bytes += len as u64;
            let mut idle = now - c.last;
            if idle as u64 > 128 * 1024 * 1024 {
                avgidle = c.maxidle;
            } else {
                idle -= c.rtab.l2t(len);
                // avgidle is scaled by 2^ewma: true_avg := (1-W) true_avg + W idle.
                avgidle += idle - (avgidle >> c.ewma_log);
            }
            if avgidle <= 0 {
                if avgidle < c.minidle {
                    avgidle = c.minidle;
                }
                c.avgidle = avgidle;
                // Back to zero after (1 - W) * (-avgidle), plus this packet at the class's own rate
                // rather than the link's (which has already passed).
                let mut wait = (-avgidle) - ((-avgidle) >> c.ewma_log);
                wait -= link_l2t;
                wait += c.rtab.l2t(len);
                c.undertime = now + wait;
            } else {
                c.undertime = 0;
                c.avgidle = avgidle.min(c.maxidle);
            }
            if now - c.last > 0 {
                c.last = now;
            }
            cur = c.share;
        }
        // cbq_update_toplevel: a class that keeps its backlog regenerates the cutoff.
        if let Some(mut b) = self.tx_borrowed {
            if self.classes.get(b).is_some_and(Option::is_some)
                && self.toplevel >= self.cl(b).level
                && self.leaf_qlen(this) > 1
            {
                loop {
                    if self.cl(b).undertime == 0 {
                        self.toplevel = self.cl(b).level;
                        break;
                    }
                    match self.cl(b).borrow {
                        Some(n) => b = n,
                        None => break,
                    }
                }
            }
        }
    }

    /// `cbq_overlimit`: class `i` may not send and has nobody to borrow from: put it to sleep until
    /// its undertime (plus `offtime`), and note when the watchdog should fire.
    fn overlimit(&mut self, i: usize) {
        let now = self.now;
        let c = self.cl_mut(i);
        let mut delay = c.undertime - now;
        if !c.delayed {
            delay += c.offtime;
            if c.avgidle < 0 {
                delay -= (-c.avgidle) - ((-c.avgidle) >> c.ewma_log);
            }
            if c.avgidle < c.minidle {
                c.avgidle = c.minidle;
            }
            if delay <= 0 {
                delay = 1;
            }
            c.undertime = now + delay;
            c.overactions += 1;
            c.delayed = true;
        }
        if self.wd_expires == 0 || self.wd_expires > delay {
            self.wd_expires = delay;
        }
        // Wake up by the rate really available (an ancestor's), not the leaf's, which may be tiny.
        if self.toplevel == MAXLEVEL {
            let mut base = self.wd_expires;
            let mut b = self.cl(i).borrow;
            while let Some(x) = b {
                let mut d = self.cl(x).undertime - now;
                if d < base {
                    if d <= 0 {
                        d = 1;
                    }
                    base = d;
                }
                b = self.cl(x).borrow;
            }
            self.wd_expires = base;
        }
    }

    /// `cbq_under_limit`: the class (itself or an ancestor it borrows from) that lets `i` send now.
    fn under_limit(&mut self, i: usize) -> Option<usize> {
        let now = self.now;
        if self.cl(i).tparent.is_none() {
            return Some(i);
        }
        let c = self.cl_mut(i);
        if c.undertime == 0 || now >= c.undertime {
            c.delayed = false;
            return Some(i);
        }
        let mut cl = i;
        loop {
            let Some(b) = self.cl(cl).borrow else {
                self.cl_mut(i).overlimits += 1;
                self.overlimit(i);
                return None;
            };
            cl = b;
            if self.cl(cl).level > self.toplevel {
                return None;
            }
            let c = self.cl(cl);
            if !(c.undertime != 0 && now < c.undertime) {
                break;
            }
        }
        self.cl_mut(cl).delayed = false;
        Some(cl)
    }

    /// `cbq_dequeue_prio`: weighted round robin over the ring of one priority.
    fn dequeue_prio(&mut self, prio: usize, cx: &mut Cx) -> Option<Packet> {
        let mut cl_tail = self.active[prio]?;
        let mut cl_prev = cl_tail;
        let mut cl = self.cl(cl_prev).next_alive?;
        loop {
            let mut deficit = false;
            loop {
                let mut skip = false;
                let mut borrow = cl;
                if self.leaf_qlen(cl) > 0 {
                    match self.under_limit(cl) {
                        Some(b) => borrow = b,
                        None => skip = true,
                    }
                }
                if !skip && self.cl(cl).deficit <= 0 {
                    // Allotment for this round spent: top up and pass the turn.
                    deficit = true;
                    let c = self.cl_mut(cl);
                    c.deficit += c.quantum;
                } else if !skip {
                    match self.cl_mut(cl).q.q.dequeue(cx) {
                        None => skip = true,
                        Some(pkt) => {
                            let len = pkt.len;
                            self.cl_mut(cl).deficit -= len as i64;
                            self.tx_class = Some(cl);
                            self.tx_borrowed = Some(borrow);
                            if borrow != cl {
                                self.cl_mut(borrow).borrows += 1;
                                self.cl_mut(cl).borrows += 1;
                            }
                            self.tx_len = len;
                            if self.cl(cl).deficit <= 0 {
                                self.active[prio] = Some(cl);
                                if let Some(n) = self.cl(cl).next_alive {
                                    let c = self.cl_mut(n);
                                    c.deficit += c.quantum;
                                }
                            }
                            return Some(pkt);
                        }
                    }
                }
                if skip && (self.leaf_qlen(cl) == 0 || prio != self.cl(cl).cpriority as usize) {
                    // Empty or penalized: unlink it from the ring.
                    let n = self.cl(cl).next_alive;
                    self.cl_mut(cl_prev).next_alive = n;
                    self.cl_mut(cl).next_alive = None;
                    if cl == cl_tail {
                        cl_tail = cl_prev;
                        if cl == cl_tail {
                            self.active[prio] = None;
                            self.activemask &= !(1 << prio);
                            if self.leaf_qlen(cl) > 0 {
                                self.activate(cl);
                            }
                            return None;
                        }
                        self.active[prio] = Some(cl_tail);
                    }
                    if self.leaf_qlen(cl) > 0 {
                        self.activate(cl);
                    }
                    cl = cl_prev;
                }
                cl_prev = cl;
                cl = self.cl(cl).next_alive?;
                if cl_prev == cl_tail {
                    break;
                }
            }
            if !deficit {
                break;
            }
        }
        self.active[prio] = Some(cl_prev);
        None
    }

    // ----- configuration -----

    /// `cbq_set_lss`.
    fn set_lss(&mut self, i: usize, lss: &CbqLss) {
        let tparent = self.cl(i).tparent;
        let c = self.cl_mut(i);
        if lss.change & LSS_FLAGS != 0 {
            c.share = if lss.flags & LSS_ISOLATED != 0 {
                None
            } else {
                tparent
            };
            c.borrow = if lss.flags & LSS_BOUNDED != 0 {
                None
            } else {
                tparent
            };
        }
        if lss.change & LSS_EWMA != 0 {
            c.ewma_log = lss.ewma_log;
        }
        if lss.change & LSS_AVPKT != 0 {
            c.avpkt = lss.avpkt;
        }
        if lss.change & LSS_MINIDLE != 0 {
            c.minidle = -(lss.minidle as i64);
        }
        if lss.change & LSS_MAXIDLE != 0 {
            c.maxidle = lss.maxidle as i64;
            c.avgidle = lss.maxidle as i64;
        }
        if lss.change & LSS_OFFTIME != 0 {
            c.offtime = lss.offtime as i64;
        }
    }

    /// `cbq_normalize_quanta`: quantum = weight × allot × n / Σ weights, within the priority.
    fn normalize_quanta(&mut self, prio: usize) {
        if self.quanta[prio] == 0 {
            return;
        }
        let (n, sum, mtu) = (
            self.nclasses[prio] as i64,
            self.quanta[prio],
            self.mtu as i64,
        );
        for c in self.classes.iter_mut().flatten() {
            if c.priority as usize == prio {
                c.quantum = c.weight.saturating_mul(c.allot).saturating_mul(n) / sum;
            }
            if c.quantum <= 0 || c.quantum > 32 * mtu {
                // The kernel warns "class has bad quantum, repaired."
                c.quantum = mtu / 2 + 1;
            }
        }
    }

    fn addprio(&mut self, i: usize) {
        let (p, w) = (self.cl(i).priority as usize, self.cl(i).weight);
        self.nclasses[p] += 1;
        self.quanta[p] += w;
        self.normalize_quanta(p);
    }

    fn rmprio(&mut self, i: usize) {
        let (p, w) = (self.cl(i).priority as usize, self.cl(i).weight);
        self.nclasses[p] -= 1;
        self.quanta[p] -= w;
        self.normalize_quanta(p);
    }

    /// `cbq_set_wrr`.
    fn set_wrr(&mut self, i: usize, wrr: &CbqWrr) {
        let c = self.cl_mut(i);
        if wrr.allot != 0 {
            c.allot = wrr.allot as i64;
        }
        if wrr.weight != 0 {
            c.weight = wrr.weight as i64;
        }
        if wrr.priority != 0 {
            c.priority = wrr.priority - 1;
            c.cpriority = c.priority;
            if c.priority >= c.priority2 {
                c.priority2 = MAXPRIO - 1;
            }
        }
        self.addprio(i);
    }

    /// `cbq_adjust_levels`: a class's level is one more than its highest child's, up to the root.
    fn adjust_levels(&mut self, from: Option<usize>) {
        let mut cur = from;
        while let Some(i) = cur {
            let level = self
                .classes
                .iter()
                .flatten()
                .filter(|c| c.tparent == Some(i))
                .map(|c| c.level)
                .max()
                .unwrap_or(0);
            self.cl_mut(i).level = level + 1;
            cur = self.cl(i).tparent;
        }
    }

    /// `cbq_sync_defmap`: recompute the split node's defaults after class `i`'s defmap changed.
    fn sync_defmap(&mut self, i: usize) {
        let Some(split) = self.cl(i).split else {
            return;
        };
        for p in 0..=TC_PRIO_MAX as usize {
            if self.cl(split).defaults[p] == Some(i) && self.cl(i).defmap & (1 << p) == 0 {
                self.cl_mut(split).defaults[p] = None;
            }
        }
        for p in 0..=TC_PRIO_MAX as usize {
            if self.cl(split).defaults[p].is_some() {
                continue;
            }
            let mut level = self.cl(split).level;
            let mut best = None;
            for id in self.hash.walk() {
                let Some(c) = self.lookup(id) else { continue };
                let cc = self.cl(c);
                if cc.split == Some(split) && cc.level < level && cc.defmap & (1 << p) != 0 {
                    best = Some(c);
                    level = cc.level;
                }
            }
            self.cl_mut(split).defaults[p] = best;
        }
    }

    /// `cbq_change_defmap`.
    fn change_defmap(&mut self, i: usize, mut splitid: u32, def: u32, mask: u32) {
        let mut split = None;
        if splitid == 0 {
            let Some(s) = self.cl(i).split else { return };
            split = Some(s);
            splitid = self.cl(s).classid;
        }
        if split.map(|s| self.cl(s).classid) != Some(splitid) {
            split = None;
            let mut p = self.cl(i).tparent;
            while let Some(x) = p {
                if self.cl(x).classid == splitid {
                    split = Some(x);
                    break;
                }
                p = self.cl(x).tparent;
            }
        }
        let Some(split) = split else { return };
        if self.cl(i).split != Some(split) {
            self.cl_mut(i).defmap = 0;
            self.sync_defmap(i);
            let c = self.cl_mut(i);
            c.split = Some(split);
            c.defmap = def & mask;
        } else {
            let c = self.cl_mut(i);
            c.defmap = (c.defmap & !mask) | (def & mask);
        }
        self.sync_defmap(i);
    }

    fn options_of(&self, i: usize) -> CbqOptions {
        let c = self.cl(i);
        let mut flags = 0;
        if c.borrow.is_none() {
            flags |= LSS_BOUNDED;
        }
        if c.share.is_none() {
            flags |= LSS_ISOLATED;
        }
        CbqOptions {
            rate: Some(c.rtab.rate),
            lss: Some(CbqLss {
                change: !0,
                flags,
                ewma_log: c.ewma_log,
                level: c.level,
                maxidle: c.maxidle as u32,
                minidle: (-c.minidle) as u32,
                offtime: c.offtime as u32,
                avpkt: c.avpkt,
            }),
            wrr: Some(CbqWrr {
                allot: c.allot as u32,
                priority: c.priority + 1,
                cpriority: c.cpriority + 1,
                weight: c.weight as u32,
            }),
            fopt: (c.split.is_some() || c.defmap != 0).then(|| CbqFopt {
                split: c.split.map_or(0, |s| self.cl(s).classid),
                defmap: c.defmap,
                defchange: !0,
            }),
        }
    }

    fn xstats_of(&self, i: usize, with_undertime: bool) -> CbqXstats {
        let c = self.cl(i);
        CbqXstats {
            borrows: c.borrows,
            overactions: c.overactions,
            avgidle: c.avgidle as i32,
            undertime: if with_undertime && c.undertime != 0 {
                (c.undertime - self.now) as i32
            } else {
                0
            },
        }
    }

    /// Bytes and packets each class has been charged (its own and its subtree's), for tests.
    pub fn class_bytes(&self, classid: Handle) -> Option<u64> {
        self.lookup(classid.0).map(|i| self.cl(i).bytes)
    }
}

impl Cbq {
    /// The dequeue itself; [`Qdisc::dequeue`] wraps it to follow its children's drops.
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Packet> {
        // `qdisc_dequeue_peeked`: a packet a parent peeked at is the next one out.
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        let now = ticks(cx.now);
        if self.tx_class.is_some() {
            self.update();
        }
        self.now = now;
        loop {
            self.wd_expires = 0;
            let mut mask = self.activemask & 0xff;
            while mask != 0 {
                let prio = mask.trailing_zeros() as usize;
                mask &= !(1 << prio);
                if let Some(pkt) = self.dequeue_prio(prio, cx) {
                    self.stats.qlen -= 1;
                    self.stats.count_sent(&pkt);
                    return Some(pkt);
                }
            }
            // Everything is blocked: lift the top-level cutoff and the root's limit, and try again.
            if self.toplevel == MAXLEVEL && self.cl(LINK).undertime == 0 {
                break;
            }
            self.toplevel = MAXLEVEL;
            self.cl_mut(LINK).undertime = 0;
        }
        if self.stats.qlen > 0 {
            self.stats.overlimits += 1;
            if self.wd_expires > 0 {
                cx.schedule(((now + self.wd_expires) as u64) << PSCHED_SHIFT);
            }
        }
        None
    }
}

impl Cbq {
    /// Is class `i` named by a filter that holds it (`cl->filters`, which `cbq_delete` refuses to
    /// delete under)? `cbq_bind_filter` takes no hold for a filter of a class's block whose level is
    /// not above the class named; the qdisc's own filters (the link class's block) always hold. Levels
    /// are read now, where the kernel read them when the filter was added, as HFSC's `bound` does.
    fn bound(&self, i: usize, classid: u32) -> bool {
        let level = self.cl(i).level;
        self.classes
            .iter()
            .enumerate()
            .filter_map(|(j, c)| Some((j, c.as_ref()?)))
            .any(|(j, c)| (j == LINK || c.level > level) && c.block.binds(classid))
    }
}

impl Qdisc for Cbq {
    fn kind(&self) -> &'static str {
        "cbq"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.peeked.get().is_none() && self.stats.qlen == 0)
            .then(|| crate::snapshot::save(self))
            .flatten()
    }
    /// `cbq_tcf_block`: the qdisc's own filters (minor 0) or a class's.
    fn block(&self, classid: Handle) -> Option<&Block> {
        let i = if classid.minor() == 0 {
            Some(LINK)
        } else {
            self.lookup(classid.0)
        };
        i.map(|i| &self.cl(i).block)
    }
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        let i = if classid.minor() == 0 {
            Some(LINK)
        } else {
            self.lookup(classid.0)
        };
        i.map(|i| &mut self.cl_mut(i).block)
    }
    fn blocks_mut(&mut self) -> Vec<&mut Block> {
        self.classes
            .iter_mut()
            .flatten()
            .map(|c| &mut c.block)
            .collect()
    }

    /// `cbq_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let cl = match self.classify(&mut pkt, cx) {
            Ok(cl) => cl,
            Err(v) => {
                // `__NET_XMIT_BYPASS`: a filter's action shot the packet, a drop; stolen: not one.
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Action);
                }
                return v;
            }
        };
        cx.tag_leaf(&mut pkt, self.cl_mut(cl).classid);
        let now = ticks(cx.now);
        let mark = cx.tree_reduced;
        let v = self.cl_mut(cl).q.q.enqueue(pkt, cx);
        self.stats.reduce(cx.reduced_since(mark));
        match v {
            Verdict::Success => {
                // CBQ counts packets, not bytes: the kernel never updates its backlog.
                self.stats.qlen += 1;
                self.mark_toplevel(cl, now);
                if self.cl(cl).next_alive.is_none() {
                    self.activate(cl);
                }
                Verdict::Success
            }
            v => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    self.mark_toplevel(cl, now);
                    self.cl_mut(cl).drops += 1;
                }
                v
            }
        }
    }

    /// `cbq_dequeue`.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        // A child that dropped packets while dequeuing (an AQM) took them off its counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`: CBQ cannot tell its next packet without choosing it, so a peek dequeues it
    /// and holds it (counted in the queue again) until the next dequeue — how a TBF or DRR parent sees it.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    /// `cbq_reset`.
    fn reset(&mut self) {
        self.peeked.clear();
        self.activemask = 0;
        self.tx_class = None;
        self.tx_borrowed = None;
        self.toplevel = MAXLEVEL;
        self.active = [None; MAXPRIO as usize + 1];
        for c in self.classes.iter_mut().flatten() {
            c.q.q.reset();
            c.next_alive = None;
            c.undertime = 0;
            c.avgidle = c.maxidle;
            c.deficit = c.quantum;
            c.cpriority = c.priority;
        }
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Cbq(self.options_of(LINK))
    }

    /// CBQ has no `change` operation for the qdisc itself.
    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::invalid(
            "Change operation not supported by specified qdisc",
        ))
    }

    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::Cbq(self.xstats_of(LINK, false)))
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }

    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

impl ClassOps for Cbq {
    fn find(&self, classid: Handle) -> bool {
        self.lookup(classid.0).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.lookup(classid.0).map(|i| &self.cl(i).q)
    }

    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        let i = self.lookup(classid.0)?;
        Some(&mut self.cl_mut(i).q)
    }

    /// `cbq_graft`: any class, inner ones included, has a qdisc.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let i = self
            .lookup(classid.0)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified class not found"))?;
        let new = new.unwrap_or_else(|| {
            Sched::new(
                Handle::UNSPEC,
                classid,
                Box::new(Fifo::pfifo(env.txqueuelen.max(1))),
            )
        });
        let old = std::mem::replace(&mut self.cl_mut(i).q, new);
        let s = old.q.stats();
        self.stats.qlen -= s.qlen.min(self.stats.qlen);
        if s.qlen > 0 {
            self.deactivate(i);
        }
        Ok(Some(old))
    }

    /// `cbq_change_class`: validate everything, then create or modify.
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let ClassOptions::Cbq(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        if let Some(i) = (classid.0 != 0).then(|| self.lookup(classid.0)).flatten() {
            if parent.0 != 0 {
                match self.cl(i).tparent {
                    Some(p) if self.cl(p).classid != parent.0 => {
                        return Err(KernelError::new(Errno::Invalid))
                    }
                    None if parent != Handle::ROOT => return Err(KernelError::new(Errno::Invalid)),
                    _ => {}
                }
            }
            let rtab = o.rate.as_ref().map(RateTable::new).transpose()?;
            if self.cl(i).next_alive.is_some() {
                self.deactivate(i);
            }
            if let Some(r) = rtab {
                self.cl_mut(i).rtab = r;
            }
            if let Some(lss) = &o.lss {
                self.set_lss(i, lss);
            }
            if let Some(wrr) = &o.wrr {
                self.rmprio(i);
                self.set_wrr(i, wrr);
            }
            if let Some(f) = &o.fopt {
                self.change_defmap(i, f.split, f.defmap, f.defchange);
            }
            if self.leaf_qlen(i) > 0 {
                self.activate(i);
            }
            return Ok(Vec::new());
        }
        if parent == Handle::ROOT {
            return Err(KernelError::new(Errno::Invalid));
        }
        let (Some(rate), Some(lss), Some(wrr)) = (o.rate, o.lss, o.wrr) else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let rtab = RateTable::new(&rate)?;
        let classid = if classid.0 != 0 {
            if (classid.0 ^ self.handle.0) >> 16 != 0 || self.lookup(classid.0).is_some() {
                return Err(KernelError::new(Errno::Invalid));
            }
            classid.0
        } else {
            let base = self.handle.0 | 0x8000;
            let mut found = None;
            for _ in 0..0x8000 {
                self.hgenerator += 1;
                if self.hgenerator >= 0x8000 {
                    self.hgenerator = 1;
                }
                if self.lookup(base | self.hgenerator).is_none() {
                    found = Some(base | self.hgenerator);
                    break;
                }
            }
            // ENOSR in the kernel; tclab's nearest errno.
            found.ok_or_else(|| KernelError::new(Errno::NoBuffers))?
        };
        let tparent = if parent.0 != 0 {
            self.lookup(parent.0)
                .ok_or_else(|| KernelError::new(Errno::Invalid))?
        } else {
            LINK
        };
        let pc = self.cl(tparent);
        let allot = pc.allot;
        let cl = Class {
            classid,
            block: Block::default(),
            tparent: Some(tparent),
            share: (tparent != LINK).then_some(tparent),
            borrow: Some(tparent),
            children: 0,
            split: None,
            defmap: 0,
            defaults: [None; 16],
            q: Sched::new(
                Handle::UNSPEC,
                Handle(classid),
                Box::new(Fifo::pfifo(env.txqueuelen.max(1))),
            ),
            weight: rtab.rate.spec.rate as i64,
            rtab,
            priority: 0,
            cpriority: 0,
            priority2: 0,
            ewma_log: 0,
            maxidle: 0,
            offtime: 0,
            minidle: -0x7fff_ffff,
            avpkt: 0,
            allot,
            quantum: allot,
            level: 0,
            last: 0,
            undertime: 0,
            avgidle: 0,
            deficit: 0,
            delayed: false,
            next_alive: None,
            bytes: 0,
            packets: 0,
            drops: 0,
            overlimits: 0,
            borrows: 0,
            overactions: 0,
        };
        let i = match self.classes.iter().position(Option::is_none) {
            Some(free) => {
                self.classes[free] = Some(cl);
                free
            }
            None => {
                self.classes.push(Some(cl));
                self.classes.len() - 1
            }
        };
        self.hash.insert(classid);
        self.cl_mut(tparent).children += 1;
        self.adjust_levels(Some(tparent));
        self.set_lss(i, &lss);
        self.set_wrr(i, &wrr);
        let (ewma, maxidle, avpkt) = {
            let l = self.cl(LINK);
            (l.ewma_log, l.maxidle, l.avpkt)
        };
        let c = self.cl_mut(i);
        if c.ewma_log == 0 {
            c.ewma_log = ewma;
        }
        if c.maxidle == 0 {
            c.maxidle = maxidle;
        }
        if c.avpkt == 0 {
            c.avpkt = avpkt;
        }
        if let Some(f) = &o.fopt {
            self.change_defmap(i, f.split, f.defmap, f.defchange);
        }
        self.hash.grow();
        Ok(Vec::new())
    }

    /// `cbq_delete`: not the root, not a class with children.
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError> {
        let i = self
            .lookup(classid.0)
            .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
        if i == LINK || self.cl(i).children > 0 || self.bound(i, classid.0) {
            return Err(KernelError::new(Errno::Busy));
        }
        let qlen = self.leaf_qlen(i);
        self.cl_mut(i).q.q.reset();
        self.stats.qlen -= qlen.min(self.stats.qlen);
        if self.cl(i).next_alive.is_some() {
            self.deactivate(i);
        }
        if self.tx_borrowed == Some(i) {
            self.tx_borrowed = self.tx_class;
        }
        if self.tx_class == Some(i) {
            self.tx_class = None;
            self.tx_borrowed = None;
        }
        self.hash.remove(classid.0);
        let tparent = self.cl(i).tparent;
        if let Some(p) = tparent {
            self.cl_mut(p).children -= 1;
        }
        self.cl_mut(i).defmap = 0;
        self.sync_defmap(i);
        self.rmprio(i);
        // Nobody may keep pointing at the removed slot.
        for c in self.classes.iter_mut().flatten() {
            for d in c.defaults.iter_mut() {
                if *d == Some(i) {
                    *d = None;
                }
            }
            if c.split == Some(i) {
                c.split = None;
            }
        }
        self.classes[i] = None;
        self.adjust_levels(tparent);
        Ok(())
    }

    /// `cbq_walk` + `cbq_dump_class(_stats)`.
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        self.hash
            .walk()
            .filter_map(|id| self.lookup(id))
            .map(|i| {
                let c = self.cl(i);
                let stats = QdiscStats {
                    bytes: c.bytes,
                    packets: c.packets,
                    drops: c.drops,
                    overlimits: c.overlimits,
                    requeues: 0,
                    backlog: 0,
                    qlen: c.q.q.stats().qlen,
                };
                ClassInfo {
                    kind: "cbq",
                    classid: Handle(c.classid),
                    parent: c
                        .tparent
                        .map_or(Handle::ROOT, |p| Handle(self.cl(p).classid)),
                    leaf: (c.q.handle != Handle::UNSPEC).then_some(c.q.handle),
                    options: Some(ClassOptions::Cbq(self.options_of(i))),
                    stats,
                    htb_xstats: None,
                    xstats: Some(Xstats::Cbq(self.xstats_of(i, true))),
                }
            })
            .collect()
    }

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
    name: "cbq",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Cbq(o) => Ok((Box::new(Cbq::new(handle, o, env, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
