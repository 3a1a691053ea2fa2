//! The queueing-discipline interface and the kernel's counters.
//!
//! A qdisc is driven by three calls, as `struct Qdisc_ops` in `include/net/sch_generic.h`:
//! `enqueue` takes a packet (or drops it), `dequeue` gives one back when the discipline allows, `peek` shows
//! the next one without taking it. Every call receives a [`Cx`] carrying `now`; a shaper that holds packets
//! it may not send yet records in [`Cx::schedule`] the time it wants to be asked again — the kernel's
//! `qdisc_watchdog_schedule_ns`. Classful disciplines also implement [`ClassOps`] (graft, leaf, find,
//! change, delete, walk), the kernel's `struct Qdisc_class_ops`.
//!
//! Configuration follows the kernel's three steps: tc builds an options value ([`QdiscOptions`]), the qdisc
//! validates all of it, and only then applies it whole (`change`), so a refused change leaves no trace.

/// The plain [`Qdisc::enqueue`] and [`Qdisc::dequeue`] of a discipline that queues boxes (it writes
/// `enqueue_skb` and `dequeue_skb`): the packet boxed from `cx.skbs`, and unboxed into it.
macro_rules! by_value_through_boxes {
    () => {
        fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
            let pkt = cx.skbs.boxed(pkt);
            self.enqueue_skb(pkt, cx)
        }

        fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
            let pkt = self.dequeue_skb(cx)?;
            Some(cx.skbs.unbox(pkt))
        }
    };
}
pub(crate) use by_value_through_boxes;

pub mod cake;
pub mod cbq;
pub mod cbs;
pub mod choke;
pub(crate) mod class_hash;
pub(crate) mod class_table;
pub mod cobalt;
pub mod codel;
pub mod codel_impl;
pub mod drr;
pub mod etf;
pub mod ets;
pub mod fifo;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod gred;
pub mod hfsc;
pub mod hhf;
pub mod htb;
pub mod ingress;
pub mod mq;
pub mod mqprio;
pub mod multiq;
pub mod netem;
pub mod netem_dist;
pub mod noqueue;
pub(crate) mod packet_lists;
pub mod pfifo_fast;
pub mod pie;
pub mod pie_impl;
pub mod plug;
pub mod prio;
pub mod qfq;
pub mod red;
pub mod red_impl;
pub mod sfb;
pub mod sfq;
pub mod skbprio;
pub mod taprio;
pub mod tbf;
pub mod teql;
pub(crate) mod treap;

use crate::error::{Errno, KernelError, Warning};
use crate::filter::Block;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// The per-call context and the drop list live in [`crate::cx`], below qdiscs, filters and actions.
pub use crate::cx::{Cx, DropReason, Dropped, Drops};

/// What an enqueue did, as the kernel's `NET_XMIT_*` codes and the `__NET_XMIT_*` flags a qdisc adds for
/// its parents (`include/linux/netdevice.h`, `include/net/sch_generic.h`). Which packets were dropped, if
/// any, is in [`Cx::drops`]; the verdict only says what the sender should make of it.
///
/// A parent propagates a child's verdict unchanged and counts a drop exactly when
/// [`Verdict::counts_drop`] says so (`net_xmit_drop_count`); the root's caller sees
/// [`Verdict::to_sender`] (`q->enqueue(…) & NET_XMIT_MASK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `NET_XMIT_SUCCESS`: the arriving packet is queued (another one may have been dropped to make room:
    /// SFQ dropping from a longer flow answers success).
    Success,
    /// `NET_XMIT_DROP`: the arriving packet was dropped.
    Drop,
    /// `NET_XMIT_CN`, congestion notified: a packet of the arriving packet's own flow was dropped — the
    /// arriving one or an older one (SFQ `headdrop`: the arriving packet is queued, the flow's head is
    /// gone). Parents count it as a drop; a TCP sender takes it as sent and reduces its window.
    Cn,
    /// `NET_XMIT_SUCCESS | __NET_XMIT_STOLEN`: an action took the packet (`stolen`, `queued`, `trap`,
    /// a mirred redirect). Gone, but nobody counts a drop.
    Stolen,
    /// `NET_XMIT_SUCCESS | __NET_XMIT_BYPASS`: classification dropped the packet (an action returned
    /// `TC_ACT_SHOT`, or no class took it). Counted as a drop by the qdisc and its parents, but the
    /// sender is told success, as `dev_queue_xmit` masks the flag away.
    Bypass,
}

impl Verdict {
    /// `net_xmit_drop_count(ret)` for a verdict other than success: does a parent count a drop?
    pub fn counts_drop(self) -> bool {
        !matches!(self, Verdict::Success | Verdict::Stolen)
    }

    /// What `dev_queue_xmit` returns to the sender: the code without the qdisc-internal flags.
    pub fn to_sender(self) -> Verdict {
        match self {
            Verdict::Stolen | Verdict::Bypass => Verdict::Success,
            v => v,
        }
    }
}

/// Drops counted by reason (kept beside, never inside, the counters `tc -s` prints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts(#[serde(with = "crate::snapshot::array")] [u64; DropReason::ALL.len()]);

impl DropCounts {
    pub fn add(&mut self, reason: DropReason) {
        self.0[reason as usize] += 1;
    }
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The reasons with a non-zero count, in [`DropReason::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// The counters `tc -s` prints: `struct gnet_stats_basic` and `struct gnet_stats_queue`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    /// Bytes and packets dequeued (sent).
    pub bytes: u64,
    pub packets: u64,
    /// Packets dropped: refused at enqueue, or removed later.
    pub drops: u32,
    /// Times the discipline held a packet back because a rate limit said no.
    pub overlimits: u32,
    pub requeues: u32,
    /// Bytes and packets queued now.
    pub backlog: u32,
    pub qlen: u32,
}

impl QdiscStats {
    /// `bstats_update`: the packet's bytes as charged, and its segments if it is a GSO packet.
    pub fn count_sent(&mut self, pkt: &Packet) {
        self.bytes += pkt.len as u64;
        self.packets += pkt.bstats_packets();
    }
    pub fn count_queued(&mut self, pkt: &Packet) {
        self.backlog = self.backlog.wrapping_add(pkt.len);
        self.qlen += 1;
    }
    pub fn count_unqueued(&mut self, pkt: &Packet) {
        self.backlog = self.backlog.wrapping_sub(pkt.len);
        self.qlen -= 1;
    }
    /// Apply a child's `qdisc_tree_reduce_backlog` (packets, bytes) to these counters: the packets
    /// leave the queue and, when positive, count as this qdisc's drops too (`__qdisc_qstats_drop` on
    /// every ancestor), so a root shows the drops of the AQMs and purges below it.
    pub fn reduce(&mut self, (packets, bytes): (i64, i64)) {
        // Nearly every call on the packet path has nothing to take off: skip the clamping arithmetic.
        if packets == 0 && bytes == 0 {
            return;
        }
        self.qlen = (self.qlen as i64 - packets).max(0) as u32;
        self.backlog = (self.backlog as i64 - bytes).max(0) as u32;
        self.drops = self
            .drops
            .wrapping_add(packets.clamp(0, u32::MAX as i64) as u32);
    }
}

/// The packet `qdisc_peek_dequeued` holds (the kernel's `gso_skb`): a discipline that can only tell its
/// next packet by choosing it (HTB, CBQ) answers a parent's peek by dequeuing and holding the packet,
/// counted in its queue again, until the next dequeue. `P` is `Packet`, or `Box<Packet>` for a
/// discipline that queues boxes (HTB).
pub struct Peeked<P = Packet>(Option<P>);

impl<P> Default for Peeked<P> {
    fn default() -> Self {
        Peeked(None)
    }
}

impl<P: std::borrow::Borrow<Packet>> Peeked<P> {
    /// `qdisc_dequeue_peeked`: the held packet, if any, taken off the counters.
    pub fn take(&mut self, stats: &mut QdiscStats) -> Option<P> {
        let p = self.0.take()?;
        stats.qlen = stats.qlen.saturating_sub(1);
        stats.backlog = stats.backlog.saturating_sub(p.borrow().len);
        Some(p)
    }
    /// Hold a packet just dequeued for a peek, counting it in the queue again.
    pub fn hold(&mut self, p: P, stats: &mut QdiscStats) {
        stats.qlen += 1;
        stats.backlog += p.borrow().len;
        self.0 = Some(p);
    }
    pub fn get(&self) -> Option<&Packet> {
        self.0.as_ref().map(|p| p.borrow())
    }
    pub fn clear(&mut self) {
        self.0 = None;
    }
}

/// A discipline that can tell its next packet only by choosing it (an AQM deciding drops, netem's clock,
/// HTB's scheduler): a parent's peek chooses and holds it (`qdisc_peek_dequeued`), and the next dequeue
/// returns the held packet (`qdisc_dequeue_peeked`). Implement the two accessors; `Qdisc::dequeue` and
/// `Qdisc::peek` become `dequeue_peeked` and `peek_dequeued`.
pub trait PeekDequeued {
    /// The held packet's slot and the counters it is counted in.
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats);
    /// The discipline's own dequeue.
    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet>;

    fn dequeue_peeked(&mut self, cx: &mut Cx) -> Option<Packet> {
        let (slot, stats) = self.held();
        if let Some(p) = slot.take(stats) {
            return Some(p);
        }
        self.dequeue_fresh(cx)
    }

    fn peek_dequeued(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.held().0.get().is_none() {
            let p = self.dequeue_fresh(cx)?;
            let (slot, stats) = self.held();
            slot.hold(p, stats);
        }
        self.held().0.get()
    }
}

/// Per-device facts a qdisc may need when it is created: `dev->tx_queue_len`, `psched_mtu(dev)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevEnv {
    /// `dev->real_num_tx_queues` (mq makes a class for each).
    pub txqueues: u32,
    pub txqueuelen: u32,
    pub mtu: u32,
    /// Link-layer header length, added to the mtu by `psched_mtu`.
    pub hard_header_len: u32,
    /// The link speed in Mbit/s as ethtool reports it (`ethtool_link_ksettings`'s `speed`), 0 where
    /// the device reports none; taprio and cbs time frames by it.
    pub speed: u32,
    /// The device has a PTP clock and runs taprio's schedule itself (netdevsim's mock PHC and
    /// `TC_SETUP_QDISC_TAPRIO`): what taprio's full offload needs.
    pub taprio_offload: bool,
}

impl DevEnv {
    pub fn psched_mtu(&self) -> u32 {
        // An unsigned int in the kernel: a huge mtu wraps rather than panics.
        self.mtu.wrapping_add(self.hard_header_len)
    }
}

/// The options of every discipline tclab knows, as the kernel receives them from tc (after tc has turned
/// `burst 10k` into ticks and so on). `dump()` returns the same type, so the store and `tc qdisc show` read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QdiscOptions {
    Pfifo(fifo::FifoOptions),
    Bfifo(fifo::FifoOptions),
    PfifoHeadDrop(fifo::FifoOptions),
    PfifoFast,
    Noqueue,
    Tbf(tbf::TbfOptions),
    Htb(htb::HtbOptions),
    Sfq(sfq::SfqOptions),
    Prio(prio::PrioOptions),
    Cbq(cbq::CbqOptions),
    /// DRR has no qdisc options (`drr_parse_opt` sends none).
    Drr,
    Ingress,
    Clsact,
    Codel(codel::CodelOptions),
    FqCodel(fq_codel::FqCodelOptions),
    /// mq has no options (`mq_dump` sends none).
    Mq,
    Netem(netem::NetemOptions),
    Hfsc(hfsc::HfscOptions),
    Cake(cake::CakeOptions),
    Hhf(hhf::HhfOptions),
    Ets(ets::EtsOptions),
    /// QFQ has no qdisc options.
    Qfq,
    Skbprio(skbprio::SkbprioOptions),
    Plug(plug::PlugOptions),
    Red(red::RedOptions),
    /// CHOKe's options are RED's (`struct tc_red_qopt`), the thresholds in packets.
    Choke(red::RedOptions),
    Gred(gred::GredOptions),
    Sfb(sfb::SfbOptions),
    Multiq(multiq::MultiqOptions),
    Pie(pie::PieOptions),
    FqPie(fq_pie::FqPieOptions),
    Fq(fq::FqOptions),
    Cbs(cbs::CbsOptions),
    Etf(etf::EtfOptions),
    /// teql has no options.
    Teql,
    Mqprio(mqprio::MqprioOptions),
    Taprio(taprio::TaprioOptions),
}

impl QdiscOptions {
    pub fn kind(&self) -> &'static str {
        match self {
            QdiscOptions::Pfifo(_) => "pfifo",
            QdiscOptions::Bfifo(_) => "bfifo",
            QdiscOptions::PfifoHeadDrop(_) => "pfifo_head_drop",
            QdiscOptions::PfifoFast => "pfifo_fast",
            QdiscOptions::Noqueue => "noqueue",
            QdiscOptions::Tbf(_) => "tbf",
            QdiscOptions::Htb(_) => "htb",
            QdiscOptions::Sfq(_) => "sfq",
            QdiscOptions::Prio(_) => "prio",
            QdiscOptions::Cbq(_) => "cbq",
            QdiscOptions::Drr => "drr",
            QdiscOptions::Ingress => "ingress",
            QdiscOptions::Clsact => "clsact",
            QdiscOptions::Codel(_) => "codel",
            QdiscOptions::FqCodel(_) => "fq_codel",
            QdiscOptions::Mq => "mq",
            QdiscOptions::Netem(_) => "netem",
            QdiscOptions::Hfsc(_) => "hfsc",
            QdiscOptions::Cake(_) => "cake",
            QdiscOptions::Hhf(_) => "hhf",
            QdiscOptions::Ets(_) => "ets",
            QdiscOptions::Qfq => "qfq",
            QdiscOptions::Skbprio(_) => "skbprio",
            QdiscOptions::Red(_) => "red",
            QdiscOptions::Choke(_) => "choke",
            QdiscOptions::Gred(_) => "gred",
            QdiscOptions::Sfb(_) => "sfb",
            QdiscOptions::Multiq(_) => "multiq",
            QdiscOptions::Pie(_) => "pie",
            QdiscOptions::FqPie(_) => "fq_pie",
            QdiscOptions::Fq(_) => "fq",
            QdiscOptions::Cbs(_) => "cbs",
            QdiscOptions::Etf(_) => "etf",
            QdiscOptions::Teql => "teql0",
            QdiscOptions::Mqprio(_) => "mqprio",
            QdiscOptions::Taprio(_) => "taprio",
            QdiscOptions::Plug(_) => "plug",
        }
    }
}

/// One discipline the engine can build: its name (tc's kind) and `ops->init`.
pub struct QdiscKind {
    pub name: &'static str,
    /// Build the discipline from its options (validated whole first) for a qdisc with this handle.
    #[allow(clippy::type_complexity)]
    pub create: fn(
        Handle,
        &QdiscOptions,
        &DevEnv,
        Nanos,
    ) -> Result<(Box<dyn Qdisc>, Vec<Warning>), KernelError>,
}

/// Every discipline the engine has. A kind is its file in this folder (its algorithm and its `KIND`),
/// a [`QdiscOptions`] variant, and a line here.
pub const KINDS: &[QdiscKind] = &[
    fifo::PFIFO,
    fifo::BFIFO,
    fifo::PFIFO_HEAD_DROP,
    pfifo_fast::KIND,
    noqueue::KIND,
    tbf::KIND,
    htb::KIND,
    sfq::KIND,
    prio::KIND,
    cbq::KIND,
    drr::KIND,
    ingress::INGRESS,
    ingress::CLSACT,
    codel::KIND,
    fq_codel::KIND,
    mq::KIND,
    netem::KIND,
    hfsc::KIND,
    cake::KIND,
    hhf::KIND,
    ets::KIND,
    qfq::KIND,
    skbprio::KIND,
    plug::KIND,
    red::KIND,
    choke::KIND,
    gred::KIND,
    sfb::KIND,
    multiq::KIND,
    pie::KIND,
    fq_pie::KIND,
    fq::KIND,
    cbs::KIND,
    etf::KIND,
    teql::KIND,
    mqprio::KIND,
    taprio::KIND,
];

/// A qdisc with one class, `handle:1`, whose leaf is its queue (TBF, RED): that class as `tc class
/// show` lists it.
pub(crate) fn one_child_walk(
    kind: &'static str,
    handle: Handle,
    child: &Option<Sched>,
) -> Vec<ClassInfo> {
    vec![ClassInfo {
        kind,
        classid: Handle(handle.0 | 1),
        parent: handle,
        leaf: child
            .as_ref()
            .map(|c| c.handle)
            .filter(|h| *h != Handle::UNSPEC),
        options: None,
        stats: child.as_ref().map(|c| c.q.stats()).unwrap_or_default(),
        htb_xstats: None,
        xstats: None,
    }]
}

/// `qdisc_change`'s answer for a discipline without `change` given options (ETF, mqprio).
pub(crate) fn change_not_supported() -> KernelError {
    KernelError::msg(
        Errno::NotSupported,
        "Change operation not supported by specified qdisc",
    )
}

/// Enqueue into the one child of a qdisc that has one (TBF, CBS): the child's verdict passed on (a drop
/// it counts, counted here too), the parent's queue counters kept.
pub(crate) fn one_child_enqueue(
    child: &mut Sched,
    stats: &mut QdiscStats,
    pkt: Packet,
    cx: &mut Cx,
) -> Verdict {
    let len = pkt.len;
    let mark = cx.tree_reduced;
    let v = child.q.enqueue(pkt, cx);
    stats.reduce(cx.reduced_since(mark));
    if v != Verdict::Success {
        if v.counts_drop() {
            stats.drops += 1;
        }
        return v;
    }
    stats.backlog += len;
    stats.qlen += 1;
    Verdict::Success
}

/// Graft `new` as the one child: the old child is returned, and the parent's queue counters become
/// the new child's.
pub(crate) fn one_child_graft(
    child: &mut Option<Sched>,
    stats: &mut QdiscStats,
    new: Option<Sched>,
) -> Option<Sched> {
    let old = std::mem::replace(child, new);
    let s = child.as_ref().map(|c| c.q.stats()).unwrap_or_default();
    stats.backlog = s.backlog;
    stats.qlen = s.qlen;
    old
}

/// The discipline named `name`.
pub fn kind(name: &str) -> Option<&'static QdiscKind> {
    KINDS.iter().find(|k| k.name == name)
}

/// A `create` given another kind's options: a bug in the caller, answered as the kernel answers a
/// malformed request rather than with a panic.
fn wrong_kind() -> KernelError {
    KernelError::msg(Errno::Invalid, "options of another qdisc kind")
}

/// Class options, per classful discipline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClassOptions {
    Htb(htb::HtbClassOptions),
    Cbq(cbq::CbqClassOptions),
    Drr(drr::DrrClassOptions),
    Hfsc(hfsc::HfscClassOptions),
    Ets(ets::EtsClassOptions),
    Qfq(qfq::QfqClassOptions),
}

/// Discipline-specific statistics (`TCA_XSTATS`) of a qdisc or a class, other than HTB's.
#[derive(Clone, Debug, PartialEq)]
pub enum Xstats {
    /// `struct tc_cbq_xstats`.
    Cbq(cbq::CbqXstats),
    /// `struct tc_drr_stats` (classes only).
    Drr(drr::DrrXstats),
    /// `struct tc_codel_xstats`.
    Codel(codel::CodelXstats),
    /// `struct tc_fq_codel_xstats` of the qdisc.
    FqCodel(fq_codel::FqCodelXstats),
    /// `struct tc_fq_codel_xstats` of one flow (a class).
    FqCodelFlow(fq_codel::FqCodelFlowXstats),
    /// `struct tc_hfsc_stats` (classes only).
    Hfsc(hfsc::HfscXstats),
    /// CAKE's qdisc counters and per-tin table (`TCA_CAKE_STATS_*`); boxed, being ten times the size of
    /// the others (every listed class carries an `Xstats`).
    Cake(Box<cake::CakeXstats>),
    /// CAKE's counters of one queue (a class).
    CakeFlow(cake::CakeFlowXstats),
    /// `struct tc_hhf_xstats`.
    Hhf(hhf::HhfXstats),
    /// `struct tc_red_xstats`.
    Red(red::RedXstats),
    /// `struct tc_sfb_xstats`.
    Sfb(sfb::SfbXstats),
    /// `struct tc_choke_xstats`.
    Choke(choke::ChokeXstats),
    /// `struct tc_pie_xstats`.
    Pie(pie::PieXstats),
    /// `struct tc_fq_pie_xstats`.
    FqPie(fq_pie::FqPieXstats),
    /// `struct tc_fq_qd_stats`.
    Fq(fq::FqXstats),
}

/// Extra per-class counters (`tc -s class show`): HTB's `struct tc_htb_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbXstats {
    pub lends: u32,
    pub borrows: u32,
    pub giants: u32,
    /// Tokens and ctokens in psched ticks (64 ns), as the kernel reports them.
    pub tokens: i32,
    pub ctokens: i32,
}

/// One class as `tc class show` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassInfo {
    pub kind: &'static str,
    pub classid: Handle,
    /// The parent class, or the qdisc handle for a class at the top.
    pub parent: Handle,
    /// Handle of the leaf qdisc if it has a visible one (non-zero handle).
    pub leaf: Option<Handle>,
    pub options: Option<ClassOptions>,
    pub stats: QdiscStats,
    pub htb_xstats: Option<HtbXstats>,
    /// Other disciplines' extra counters.
    pub xstats: Option<Xstats>,
}

impl ClassInfo {
    /// A flow queue listed as a class (sfq's, fq_codel's, cake's): it exists while the flow is active,
    /// has no configuration and reports queue counters only (no bytes sent).
    pub fn is_flow_queue(&self) -> bool {
        lists_flow_queues(self.kind)
    }
}

/// Does a discipline of this kind list its flow queues as its classes (and nothing else)?
pub fn lists_flow_queues(kind: &str) -> bool {
    matches!(kind, "sfq" | "fq_codel" | "cake")
}

/// A qdisc attached somewhere: its handle (0 for the invisible defaults the kernel creates), its parent, and
/// the discipline itself.
pub struct Sched {
    pub handle: Handle,
    pub parent: Handle,
    pub q: Box<dyn Qdisc>,
    /// The qdisc's size table (`stab`), if it was given one.
    pub stab: Option<crate::stab::SizeTable>,
    /// `dev_requeue_skb`'s count: packets the driver handed back to this root (teql0's
    /// `teql_master_xmit` with every slave busy), added to the qdisc's own in its statistics.
    pub requeues: u32,
}

impl Sched {
    pub fn new(handle: Handle, parent: Handle, q: Box<dyn Qdisc>) -> Sched {
        Sched {
            handle,
            parent,
            q,
            stab: None,
            requeues: 0,
        }
    }

    /// The qdisc's statistics with the requeues the driver made.
    pub fn stats(&self) -> QdiscStats {
        let mut s = self.q.stats();
        s.requeues += self.requeues;
        s
    }
}

pub trait Qdisc {
    fn kind(&self) -> &'static str;
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict;
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet>;
    /// [`Qdisc::enqueue`] of a packet in its box, as the kernel's enqueue takes an skb pointer: a
    /// parent hands its child the box, and a discipline that queues boxes (FIFOs, pfifo_fast, HTB,
    /// fq_codel) moves the packet through the tree as 8 bytes, where by value each layer copies its
    /// 120. Such a discipline overrides this and [`Qdisc::dequeue_skb`], and makes its `enqueue` and
    /// `dequeue` box and unbox through `cx.skbs`. The default takes the packet out (its box kept in
    /// `cx.skbs` for the next one) and calls `enqueue`, so every discipline takes either.
    fn enqueue_skb(&mut self, pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        let pkt = cx.skbs.unbox(pkt);
        self.enqueue(pkt, cx)
    }
    /// [`Qdisc::dequeue`] giving the packet in its box (see [`Qdisc::enqueue_skb`]); the default boxes
    /// what `dequeue` gives, in a box from `cx.skbs`.
    fn dequeue_skb(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        let pkt = self.dequeue(cx)?;
        Some(cx.skbs.boxed(pkt))
    }
    /// The packet the next `dequeue` would return, without taking it.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet>;
    /// Drop everything queued (`qdisc_reset`), keeping configuration and cumulative counters.
    fn reset(&mut self);
    fn stats(&self) -> QdiscStats;
    /// Packets queued (`sch->q.qlen`), what a parent asks on every packet: a FIFO answers it without
    /// copying out all its counters.
    fn qlen(&self) -> u32 {
        self.stats().qlen
    }
    /// Whether a dequeue now would give nothing and change nothing (no counter, drop, wake-up or
    /// other state), so that a driver may leave it unasked: an empty FIFO's, whose kernel dequeue
    /// takes the head of an empty list and counts nothing (`qdisc_dequeue_head`,
    /// `pfifo_fast_dequeue`). False unless the discipline knows: an empty fq_codel's dequeue still
    /// walks its flow lists and empties them (and `codel_dequeue` clears each flow's `dropping`).
    fn dequeue_idle(&self) -> bool {
        false
    }
    /// The options as `tc qdisc show` would read them back.
    fn dump(&self) -> QdiscOptions;
    /// Validate `opts` whole, then apply them (`ops->change`).
    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError>;
    /// clsact's egress hook (`sch_handle_egress`) on a packet about to reach the root qdisc: `None` lets
    /// it go on, else the verdict for the sender. Only clsact has one.
    fn egress_hook(&mut self, _pkt: &mut Packet, _cx: &mut Cx) -> Option<Verdict> {
        None
    }
    /// `fifo_set_limit`: used by TBF to resize its default child.
    /// `fifo_set_limit` (used by TBF on its child): only FIFOs change; others ignore it, as in the kernel.
    fn set_limit(&mut self, _limit: u32) {}
    /// Its state for a snapshot ([`crate::snapshot`]): `None` if the discipline has no snapshot form,
    /// or holds packets.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Seed the deterministic generator a randomised discipline draws from (SFQ's perturbation).
    fn set_seed(&mut self, _seed: u64) {}
    /// Its children sit on the device's transmit queues themselves, each held by its queue as well
    /// (a full-offload taprio: `taprio_attach`, `taprio_graft`), so `tc` lists their refcount 2.
    fn children_on_txqs(&self) -> bool {
        false
    }
    /// The device changed (`NETDEV_CHANGE`: a new link speed): taprio's and cbs's notifiers read
    /// its speed again.
    fn link_changed(&mut self, _env: &DevEnv) {}
    /// The size table a command gave this qdisc (its overhead; `None`: no table), after the command
    /// made the qdisc or, `options_given`, changed it: for a qdisc that reads its own table
    /// (taprio). Returns the extack warning the command leaves, if that depends on the table.
    fn root_stab(&mut self, _overhead: Option<i32>, _options_given: bool) -> Option<Warning> {
        None
    }
    /// Extra counters for `tc -s qdisc show` (`dump_stats`), if the discipline has any.
    fn xstats(&self) -> Option<Xstats> {
        None
    }
    fn classes(&self) -> Option<&dyn ClassOps> {
        None
    }
    /// Does the qdisc keep its default children visible in `tc qdisc show` (`qdisc_hash_add` of each, as
    /// mq does for its per-queue qdiscs)?
    fn hashes_children(&self) -> bool {
        false
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        None
    }
    /// The one filter block of a discipline that takes filters at the qdisc only (minor 0: PRIO,
    /// SFQ, fq_codel, CAKE, DRR, QFQ…, whose `cops->tcf_block` answers for `cl == 0` alone). The
    /// defaults of `block`, `block_mut` and `blocks_mut` serve such a discipline through these two;
    /// one with blocks per class (HTB, HFSC, CBQ) or two hooks (clsact) overrides those instead.
    fn own_block(&self) -> Option<&Block> {
        None
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        None
    }
    /// The filter block `tc filter … parent CLASSID` names: the qdisc's own (minor 0) or one class's
    /// (`cops->tcf_block`). `None`: this discipline takes no filters there.
    fn block(&self, classid: Handle) -> Option<&Block> {
        self.own_block().filter(|_| classid.minor() == 0)
    }
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        if classid.minor() != 0 {
            return None;
        }
        self.own_block_mut()
    }
    /// Every block the qdisc owns, so that their actions can be released when it goes.
    fn blocks_mut(&mut self) -> Vec<&mut Block> {
        self.own_block_mut().into_iter().collect()
    }
    /// What `tc filter … parent CLASSID` gets when `block_mut` has no block there: the kernel's
    /// `cops->tcf_block` returning NULL (EINVAL, with the discipline's message if it sets one).
    fn no_block_error(&self) -> KernelError {
        KernelError::msg(
            crate::error::Errno::NotSupported,
            "Class doesn't support blocks",
        )
    }
}

/// `struct Qdisc_class_ops`.
/// A discipline whose "classes" are its flow queues (fq_codel's, CAKE's, skbprio's): listed by `tc class
/// show` and counted, but never found, grafted, changed or deleted — their `find` answers 0, as the
/// kernel's `fq_codel_find`/`cake_find` do. Implementing `flow_walk` gives the whole [`ClassOps`].
pub trait FlowClasses {
    /// The active flow queues, as `tc class show` lists them.
    fn flow_walk(&self, now: Nanos) -> Vec<ClassInfo>;
}

impl<T: FlowClasses> ClassOps for T {
    fn find(&self, _classid: Handle) -> bool {
        false
    }
    fn leaf(&self, _classid: Handle) -> Option<&Sched> {
        None
    }
    fn leaf_mut(&mut self, _classid: Handle) -> Option<&mut Sched> {
        None
    }
    fn graft(
        &mut self,
        _classid: Handle,
        _new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
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
    fn walk(&self, now: Nanos) -> Vec<ClassInfo> {
        self.flow_walk(now)
    }
    fn children(&self) -> Vec<&Sched> {
        Vec::new()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        Vec::new()
    }
}

pub trait ClassOps {
    /// Does the class exist?
    fn find(&self, classid: Handle) -> bool;
    /// The qdisc under a class (`cops->leaf`); `None` for an inner class.
    fn leaf(&self, classid: Handle) -> Option<&Sched>;
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched>;
    /// The qdisc attached to a class, inner or not, as `qdisc_lookup` finds it in the device's hash:
    /// HFSC keeps an inner class's old leaf qdisc attached (purged, still listed and changeable);
    /// every other discipline's is its `leaf`.
    fn attached(&self, classid: Handle) -> Option<&Sched> {
        self.leaf(classid)
    }
    fn attached_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.leaf_mut(classid)
    }
    /// Put `new` under `classid` (or the default qdisc if `None`) and return the previous one.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError>;
    /// Create (`create` true) or modify a class.
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: &ClassOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError>;
    fn delete_class(&mut self, classid: Handle) -> Result<(), KernelError>;
    /// Every class, in the order the kernel's walk reports them.
    fn walk(&self, now: Nanos) -> Vec<ClassInfo>;
    /// [`ClassOps::walk`] one class at a time, for a listing that prints each as it comes: a discipline
    /// with thousands of classes (HTB) builds them one by one instead of a vector of them all.
    fn walk_each(&self, now: Nanos, f: &mut dyn FnMut(&ClassInfo)) {
        for c in self.walk(now) {
            f(&c);
        }
    }
    /// Every visible or invisible child qdisc, for tree searches.
    fn children(&self) -> Vec<&Sched>;
    fn children_mut(&mut self) -> Vec<&mut Sched>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device on a fresh engine with `root` (or its default noqueue), and under HTB's class 1:1
    /// (1 Gbit/s) the leaf `leaf` if given.
    fn tree(root: Option<QdiscOptions>, leaf: Option<QdiscOptions>) -> crate::Engine {
        use crate::engine::Flags;
        let mut e = crate::Engine::new();
        e.add_device("eth0", 1500, 1000);
        let add = |e: &mut crate::Engine, parent, handle, q: &QdiscOptions| {
            e.modify_qdisc("eth0", parent, handle, Some(q), Flags::ADD, 0)
                .unwrap();
        };
        if let Some(root) = root {
            add(&mut e, Handle::ROOT, Handle::new(1, 0), &root);
        }
        if e.device("eth0").unwrap().root().q.kind() == "htb" {
            let rate = crate::units::RateSpec {
                rate: 125_000_000,
                ..Default::default()
            };
            let class = ClassOptions::Htb(htb::HtbClassOptions {
                rate,
                ceil: rate,
                // 640 µs of tokens (80 KB): every packet of the test may leave at once.
                buffer: 10_000,
                cbuffer: 10_000,
                quantum: 1500,
                prio: 0,
                level: 0,
            });
            let (parent, id) = (Handle::new(1, 0), Handle::new(1, 1));
            e.modify_class("eth0", parent, id, &class, Flags::ADD, 0)
                .unwrap();
            if let Some(leaf) = leaf {
                add(&mut e, id, Handle::new(2, 0), &leaf);
            }
        }
        e
    }

    /// Packets a tree is given in their boxes come out in the same boxes, in order and unchanged,
    /// through every discipline that queues boxes (noqueue, pfifo_fast, pfifo, HTB with its default pfifo leaf,
    /// fq_codel, HTB over fq_codel): no layer copied them out. Through SFQ, which takes packets by
    /// value, under HTB they come out equal and in order, in boxes from the context's cache; a box
    /// handed in the plain way (`Device::enqueue`) comes back the plain way too.
    #[test]
    fn a_boxed_packet_leaves_the_tree_in_the_box_it_came_in() {
        let htb = || {
            Some(QdiscOptions::Htb(htb::HtbOptions {
                defcls: 1,
                ..Default::default()
            }))
        };
        let fq_codel = || Some(QdiscOptions::FqCodel(Default::default()));
        let trees = [
            ("noqueue", None, None, true),
            ("pfifo_fast", Some(QdiscOptions::PfifoFast), None, true),
            (
                "pfifo",
                Some(QdiscOptions::Pfifo(Default::default())),
                None,
                true,
            ),
            ("htb", htb(), None, true),
            ("fq_codel", fq_codel(), None, true),
            ("htb over fq_codel", htb(), fq_codel(), true),
            (
                "htb over sfq",
                htb(),
                Some(QdiscOptions::Sfq(Default::default())),
                false,
            ),
        ];
        for (name, root, leaf, same_box) in trees {
            let mut e = tree(root, leaf);
            let dev = e.device_mut("eth0").unwrap();
            let mut cx = Cx::new(0);
            let sent: Vec<Box<Packet>> = (0..3u64)
                .map(|i| {
                    Box::new(Packet {
                        tag: i + 1,
                        ..Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 1000)
                    })
                })
                .collect();
            let expect: Vec<Packet> = sent
                .iter()
                .map(|p| Packet {
                    enqueue_ns: 5,
                    ..Packet::clone(p)
                })
                .collect();
            let at: Vec<*const Packet> = sent.iter().map(|p| &**p as *const Packet).collect();
            for p in sent {
                cx.reset(5);
                assert_eq!(dev.enqueue_skb(p, &mut cx), Verdict::Success, "{name}");
            }
            for (i, want) in expect.iter().enumerate() {
                cx.reset(10);
                let got = dev
                    .dequeue_skb(&mut cx)
                    .unwrap_or_else(|| panic!("{name}: packet {i}"));
                // (Through SFQ a box from the cache: which one is the cache's business.)
                assert!(
                    !same_box || std::ptr::eq(&*got, at[i]),
                    "{name}: packet {i} in the box it came in"
                );
                // The hashing disciplines leave the flow hash they computed on the packet (`skb->hash`).
                assert_eq!(
                    Packet {
                        leaf_class: 0,
                        hash: 0,
                        ..*got
                    },
                    *want,
                    "{name}: packet {i}"
                );
            }
            assert!(dev.dequeue_skb(&mut cx).is_none(), "{name}: empty");
            cx.reset(20);
            dev.enqueue(expect[0].clone(), &mut cx);
            let got = dev.dequeue(&mut cx).map(|p| Packet {
                leaf_class: 0,
                hash: 0,
                ..p
            });
            assert_eq!(
                got.as_ref(),
                Some(&Packet {
                    enqueue_ns: 20,
                    ..expect[0].clone()
                }),
                "{name}"
            );
        }
    }

    /// The cache gives back the boxes it was given, the last first (its lines still in cache), and
    /// keeps no more than `KEEP`.
    #[test]
    fn the_box_cache_reuses_boxes_and_keeps_a_bounded_number() {
        let mut skbs = crate::packet::SkbCache::default();
        let b = skbs.boxed(Packet::of_len(100));
        let at = &*b as *const Packet;
        assert_eq!(skbs.unbox(b), Packet::of_len(100));
        let again = skbs.boxed(Packet::of_len(60));
        assert!(std::ptr::eq(&*again, at), "the box is reused");
        assert_eq!(*again, Packet::of_len(60));
        for _ in 0..crate::packet::SkbCache::KEEP + 10 {
            skbs.recycle(Box::default());
        }
        assert_eq!(skbs.len(), crate::packet::SkbCache::KEEP);
    }

    /// A driver keeps one context for its calls (`tclab_sim`'s `Network`), so `reset` must leave
    /// nothing of the last call behind: no drops, no mirred nest or skip flag, no duplicates, no wake-up.
    #[test]
    fn reset_makes_a_used_context_as_new_makes_one() {
        let mut cx = Cx::new(1);
        cx.schedule(7);
        cx.reduce_backlog(1, 100);
        cx.drop_arriving(Packet::of_len(100), DropReason::TailDrop);
        cx.push_to_root(Packet::of_len(60));
        cx.mirred.set_nest(vec!["ifb0".into()], 2);
        cx.mirred.set_skip_classify();
        cx.leaf = 0x10001;
        cx.matched = Some(crate::filter::FilterMatch {
            kind: "u32",
            chain: 0,
            pref: 1,
        });
        cx.pacing_fq = true;
        cx.gso_split = 3;
        cx.reset(5);
        assert_eq!(format!("{cx:?}"), format!("{:?}", Cx::new(5)));
        assert!(
            !cx.mirred.take_skip_classify(),
            "the skip flag is not inherited"
        );
    }
}
