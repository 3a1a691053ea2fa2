//! `fq_codel` — fair queueing with CoDel on every flow, after `net/sched/sch_fq_codel.c` (Eric Dumazet;
//! RFC 8290). The default qdisc of most Linux distributions, and the leaf of sqm-scripts, OpenWrt and
//! LibreQoS.
//!
//! # The algorithm
//!
//! Each packet is hashed (its flow keys, keyed with a secret) into one of `flows` queues, unless
//! `skb->priority` or an attached filter names the flow. Each queue has its own CoDel state, so one flow's
//! standing queue is controlled without touching the others. Dequeue is deficit round robin by `quantum`
//! bytes over two lists: a flow that was idle and gets a packet joins the *new* list, served first; once
//! its deficit is spent it moves to the tail of the *old* list. A flow that empties while on the new list
//! moves to the old list once more (it cannot starve the old flows by coming back as new), and leaves the
//! lists only when found empty on the old list. This is the *sparse flow* optimisation: a flow that sends
//! less than its quantum per round — a ping, a DNS query, an ACK stream — always finds itself new and
//! jumps the queue, so it sees almost no queueing delay however loaded the bulk flows are.
//!
//! When the whole qdisc exceeds `limit` packets (or `memory_limit` bytes of buffers), the drop falls on the
//! fattest flow (the one with the largest backlog): half of its backlog, at most `drop_batch` packets,
//! from its head — and its CoDel count is raised by as many, to make its signal stronger. If the arriving
//! packet's own flow paid, the answer is `NET_XMIT_CN`.
//!
//! # What tclab models and how
//!
//! - Buffers: the kernel counts `skb->truesize` against `memory_limit`; tclab counts the packet's length
//!   plus a fixed 256-byte `sk_buff` overhead (a real truesize depends on the driver's allocation).
//! - The hash: the kernel uses `skb_get_hash` (keyed with the boot's random `hashrnd`, computed once per
//!   skb and kept in `skb->hash`); tclab reads the packet's `hash` likewise ([`crate::flow::skb_get_hash`]:
//!   the simulator sets it when it makes the packet, with one key per run), and for a packet without one
//!   hashes the same flow keys with a secret drawn from the run's seed ([`Qdisc::set_seed`]).
//! - Every packet CoDel or the overlimit path drops is named in `Cx::drops` (AQM or overlimit) and taken off
//!   the ancestors' counters.
//! - Memory, as the kernel lays it out and for the same reason (tens of thousands of flows): the packets
//!   of all flows in one slab with per-flow FIFO links ([`super::packet_lists`], the kernel's `skb->next`
//!   lists), the new and old lists threaded through the flows (the kernel's `flowchain`), a flow's state
//!   in one 48-byte entry and its backlog in a dense array beside (`q->backlogs`, for the fat-flow scan).
//!   The lists say which flows the next dequeues serve, so each dequeue prefetches the state of the flow
//!   two places on and the head packet of the next one. The flow table is made by the first packet (the
//!   kernel's `fq_codel_init` makes it at once): an idle fq_codel holds none.

use super::codel_impl::{
    codel_dequeue, codel_to_us, us_to_codel, CodelParams, CodelQueue, CodelStats, CodelVars,
    CODEL_DISABLED_THRESHOLD,
};
use super::packet_lists::{prefetch, PacketList, PacketLists};
use super::{
    ClassInfo, ClassOps, Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions, QdiscStats, Verdict,
    Xstats,
};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::flow::{skb_get_hash, splitmix64};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `FQ_CODEL_QUANTUM_MAX`.
pub const QUANTUM_MAX: u32 = 1 << 20;
/// The per-packet buffer overhead tclab charges against `memory_limit` (see the essay).
const SKB_OVERHEAD: u32 = 256;
pub const DEFAULT_SEED: u64 = 0x0f0c_0de1_5eed;

/// What tc sends (`TCA_FQ_CODEL_*`): each attribute present or not; times in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelOptions {
    pub limit: Option<u32>,
    pub flows: Option<u32>,
    pub quantum: Option<u32>,
    pub target: Option<u32>,
    pub interval: Option<u32>,
    pub ecn: Option<bool>,
    pub ce_threshold: Option<u32>,
    /// `(selector, mask)`.
    pub ce_threshold_selector: Option<(u8, u8)>,
    pub memory_limit: Option<u32>,
    pub drop_batch: Option<u32>,
}

/// `struct tc_fq_codel_qd_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCodelXstats {
    pub maxpacket: u32,
    pub drop_overlimit: u32,
    pub ecn_mark: u32,
    pub new_flow_count: u32,
    pub new_flows_len: u32,
    pub old_flows_len: u32,
    pub ce_mark: u32,
    pub memory_usage: u32,
    pub drop_overmemory: u32,
}

/// `struct tc_fq_codel_cl_stats`: one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCodelFlowXstats {
    pub deficit: i32,
    /// Microseconds.
    pub ldelay: u32,
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
    /// Microseconds to the next drop (negative: overdue).
    pub drop_next: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum List {
    New,
    Old,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Flow {
    /// The flow's packets, in the qdisc's `queued`.
    #[serde(skip)]
    packets: PacketList,
    deficit: i32,
    vars: CodelVars,
    /// Which list the flow is on (`flowchain`), if any, and the next flow on it.
    on: Option<List>,
    next: u32,
}

/// The end of a flow list.
const NO_FLOW: u32 = u32::MAX;

/// A list of flows linked through `Flow::next`, as the kernel's `flowchain` list heads link them: a
/// flow moves from one list to another without touching any memory but the two lists' ends.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct FlowList {
    head: u32,
    tail: u32,
    len: u32,
}

impl FlowList {
    const EMPTY: FlowList = FlowList {
        head: NO_FLOW,
        tail: NO_FLOW,
        len: 0,
    };

    fn front(&self) -> Option<u32> {
        (self.head != NO_FLOW).then_some(self.head)
    }

    fn push_back(&mut self, flows: &mut [Flow], i: u32) {
        flows[i as usize].next = NO_FLOW;
        if self.tail == NO_FLOW {
            self.head = i;
        } else {
            flows[self.tail as usize].next = i;
        }
        self.tail = i;
        self.len += 1;
    }

    fn pop_front(&mut self, flows: &[Flow]) {
        if let Some(i) = self.front() {
            self.head = flows[i as usize].next;
            if self.head == NO_FLOW {
                self.tail = NO_FLOW;
            }
            self.len -= 1;
        }
    }
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the flow table once a packet made it, each
/// flow's CoDel state, deficit and place in the lists (not its packets: there are none).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FqCodel {
    handle: Handle,
    flows: Vec<Flow>,
    /// How many flows there are (`flows_cnt`). The table is allocated by the first packet: a policy
    /// of 20 000 idle fq_codel leaves (LibreQoS's circuits) does not hold 20 000 tables of 1 024.
    flows_cnt: u32,
    /// Every flow's packets, in one slab.
    #[serde(skip, default = "PacketLists::new")]
    queued: PacketLists,
    /// Bytes queued per flow, apart from the flows as the kernel keeps them: the fat-flow drop scans
    /// them all (4 bytes a flow, not a whole entry).
    backlogs: Vec<u32>,
    new_flows: FlowList,
    old_flows: FlowList,
    limit: u32,
    quantum: u32,
    drop_batch: u32,
    memory_limit: u32,
    params: CodelParams,
    cstats: CodelStats,
    memory_usage: u32,
    drop_overmemory: u32,
    drop_overlimit: u32,
    new_flow_count: u32,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked<Box<Packet>>,
    block: Block,
    secret: [u64; 2],
    last_now: Nanos,
}

/// One flow's queue as CoDel sees it: the flow's packets, the qdisc's counters.
struct FlowQueue<'a> {
    queued: &'a mut PacketLists,
    packets: &'a mut PacketList,
    flow_backlog: &'a mut u32,
    memory_usage: &'a mut u32,
    stats: &'a mut QdiscStats,
    cx: &'a mut Cx,
}

impl CodelQueue for FlowQueue<'_> {
    /// Boxed: a packet enters and leaves its flow as a pointer ([`Qdisc::enqueue_skb`]).
    type Pkt = Box<Packet>;
    /// `dequeue_func`.
    fn dequeue(&mut self) -> Option<Box<Packet>> {
        let p = self.queued.pop_front(self.packets)?;
        *self.flow_backlog -= p.len;
        *self.memory_usage -= p.len + SKB_OVERHEAD;
        self.stats.count_unqueued(&p);
        Some(p)
    }
    fn backlog(&self) -> u32 {
        self.stats.backlog
    }
    /// `drop_func`.
    fn drop(&mut self, pkt: Box<Packet>) {
        self.stats.drops += 1;
        let pkt = self.cx.skbs.unbox(pkt);
        self.cx.drop_queued(pkt, DropReason::Aqm);
    }
}

/// `fq_codel_classify` / `fq_pie_classify`: the flow (1-based) a packet goes to — `skb->priority` naming
/// one of this qdisc's flows, else the filters' class minor, else the packet's flow hash
/// (`skb_get_hash`: the one it carries, or computed here with `secret`) scaled to `flows_cnt`
/// (`reciprocal_scale`). `Err` with the verdict when a filter drops or steals it or names no
/// flow.
pub(crate) fn classify_flow(
    handle: Handle,
    flows_cnt: u32,
    block: &Block,
    secret: [u64; 2],
    pkt: &mut Packet,
    cx: &mut Cx,
) -> Result<u32, Verdict> {
    let n = flows_cnt;
    let minor = pkt.priority & 0xffff;
    if handle != Handle::UNSPEC && pkt.priority & 0xffff_0000 == handle.0 && minor > 0 && minor <= n
    {
        return Ok(minor);
    }
    if block.filter_list_is_empty() {
        let h = skb_get_hash(pkt, secret);
        return Ok(((h as u64 * n as u64) >> 32) as u32 + 1);
    }
    match crate::filter::classify(block, pkt, cx) {
        FilterVerdict::Classified { classid, .. } => {
            let m = classid & 0xffff;
            if m <= n && m > 0 {
                Ok(m)
            } else {
                Err(Verdict::Bypass)
            }
        }
        FilterVerdict::Stolen => Err(Verdict::Stolen),
        FilterVerdict::Shot | FilterVerdict::Unclassified => Err(Verdict::Bypass),
    }
}

impl FqCodel {
    /// `fq_codel_init`: the defaults, then the options.
    pub fn new(handle: Handle, o: &FqCodelOptions, env: &DevEnv) -> Result<FqCodel, KernelError> {
        let mtu = env.psched_mtu().min(QUANTUM_MAX);
        let mut params = CodelParams::new(mtu);
        params.ecn = true;
        let mut q = FqCodel {
            handle,
            flows: Vec::new(),
            flows_cnt: 0,
            queued: PacketLists::new(),
            backlogs: Vec::new(),
            new_flows: FlowList::EMPTY,
            old_flows: FlowList::EMPTY,
            limit: 10 * 1024,
            // `psched_mtu`, unclamped: only a quantum the user gives is raised to 256.
            quantum: mtu,
            drop_batch: 64,
            memory_limit: 32 << 20,
            params,
            cstats: CodelStats::default(),
            memory_usage: 0,
            drop_overmemory: 0,
            drop_overlimit: 0,
            new_flow_count: 0,
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
            block: Block::default(),
            secret: [0; 2],
            last_now: 0,
        };
        let flows = q.validate(o, true)?.unwrap_or(1024);
        q.apply(o);
        q.flows_cnt = flows;
        q.set_seed(DEFAULT_SEED);
        Ok(q)
    }

    /// The checks of `fq_codel_change` that come before anything is applied; the flow count if given.
    fn validate(&self, o: &FqCodelOptions, init: bool) -> Result<Option<u32>, KernelError> {
        if let Some(f) = o.flows {
            if !init || f == 0 || f > 65536 {
                return Err(KernelError::new(Errno::Invalid));
            }
        }
        if o.quantum.is_some_and(|q| q.max(256) > QUANTUM_MAX) {
            return Err(KernelError::msg(Errno::Invalid, "Invalid quantum"));
        }
        Ok(o.flows)
    }

    fn apply(&mut self, o: &FqCodelOptions) {
        if let Some(t) = o.target {
            self.params.target = us_to_codel(t);
        }
        if let Some(c) = o.ce_threshold {
            self.params.ce_threshold = us_to_codel(c);
        }
        if let Some((sel, mask)) = o.ce_threshold_selector {
            self.params.ce_threshold_selector = sel;
            self.params.ce_threshold_mask = mask;
        }
        if let Some(i) = o.interval {
            self.params.interval = us_to_codel(i);
        }
        if let Some(l) = o.limit {
            self.limit = l;
        }
        if let Some(e) = o.ecn {
            self.params.ecn = e;
        }
        if let Some(q) = o.quantum {
            self.quantum = q.max(256);
        }
        if let Some(b) = o.drop_batch {
            self.drop_batch = b.max(1);
        }
        if let Some(m) = o.memory_limit {
            self.memory_limit = m.min(1 << 31);
        }
    }

    /// `fq_codel_classify`: the flow (1-based), or the verdict for a packet not to be queued.
    fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Result<u32, Verdict> {
        classify_flow(
            self.handle,
            self.flows_cnt,
            &self.block,
            self.secret,
            pkt,
            cx,
        )
    }

    /// `fq_codel_drop`: drop half of the fattest flow's backlog (at most `max_packets`) from its head.
    /// Returns the flow and the packets and bytes dropped.
    fn drop_fattest(&mut self, max_packets: u32, cx: &mut Cx) -> (usize, u32, u32) {
        let mut idx = 0;
        let mut maxbacklog = 0;
        for (i, &b) in self.backlogs.iter().enumerate() {
            if b > maxbacklog {
                maxbacklog = b;
                idx = i;
            }
        }
        let threshold = maxbacklog >> 1;
        let flow = &mut self.flows[idx];
        let (mut len, mut n, mut mem) = (0u32, 0u32, 0u32);
        while let Some(p) = self.queued.pop_front(&mut flow.packets) {
            len += p.len;
            mem += p.len + SKB_OVERHEAD;
            n += 1;
            let p = cx.skbs.unbox(p);
            cx.drop_queued(p, DropReason::Overlimit);
            if n >= max_packets || len >= threshold {
                break;
            }
        }
        flow.vars.count = flow.vars.count.wrapping_add(n);
        self.backlogs[idx] -= len;
        self.memory_usage -= mem;
        self.stats.drops += n;
        self.stats.backlog -= len;
        self.stats.qlen -= n;
        (idx, n, len)
    }

    /// `__fq_codel_dequeue`.
    fn dequeue_inner(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        self.last_now = cx.now;
        let now = cx.now;
        loop {
            let (list, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(i), _) => (List::New, i),
                (None, Some(i)) => (List::Old, i),
                (None, None) => break,
            };
            let flow = &mut self.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += self.quantum as i32;
                self.pop(list);
                self.flows[idx as usize].on = Some(List::Old);
                self.old_flows.push_back(&mut self.flows, idx);
                continue;
            }
            let mut q = FlowQueue {
                queued: &mut self.queued,
                packets: &mut flow.packets,
                flow_backlog: &mut self.backlogs[idx as usize],
                memory_usage: &mut self.memory_usage,
                stats: &mut self.stats,
                cx,
            };
            let p = codel_dequeue(&mut q, &self.params, &mut flow.vars, &mut self.cstats, now);
            if let Some(sent) = &p {
                flow.deficit -= sent.len as i32;
                self.stats.count_sent(sent);
                self.dequeued(cx);
                return p;
            }
            // Force a pass through the old flows to prevent starvation.
            self.pop(list);
            if list == List::New && self.old_flows.len != 0 {
                self.flows[idx as usize].on = Some(List::Old);
                self.old_flows.push_back(&mut self.flows, idx);
            } else {
                self.flows[idx as usize].on = None;
            }
        }
        self.dequeued(cx);
        None
    }

    /// The end of every dequeue: prefetch for the next, and tell the parents of CoDel's drops.
    fn dequeued(&mut self, cx: &mut Cx) {
        self.prefetch_next();
        // `fq_codel_dequeue_drop`.
        if self.cstats.drop_count > 0 {
            cx.reduce_backlog(self.cstats.drop_count as i64, self.cstats.drop_len as i64);
            self.cstats.drop_count = 0;
            self.cstats.drop_len = 0;
        }
    }

    /// The flows the next dequeues serve are known, in list order: start fetching their state now, so
    /// that with tens of thousands of flows (a table far larger than the cache) those dequeues do not
    /// wait for memory. Two stages: the state of the flow two places on, and the head packet of the one
    /// after the front, whose state the previous call fetched. (Behaviour is unchanged; see the README's
    /// fq_codel benchmark for what it saves.)
    fn prefetch_next(&self) {
        // The flow after `i` in the new list followed by the old one.
        let after = |i: u32| match self.flows[i as usize].next {
            NO_FLOW if self.flows[i as usize].on == Some(List::New) => self.old_flows.front(),
            NO_FLOW => None,
            n => Some(n),
        };
        let Some(second) = self
            .new_flows
            .front()
            .or(self.old_flows.front())
            .and_then(after)
        else {
            return;
        };
        self.queued
            .prefetch_head(&self.flows[second as usize].packets);
        if let Some(third) = after(second) {
            prefetch(&self.flows[third as usize]);
        }
    }

    fn pop(&mut self, list: List) {
        match list {
            List::New => self.new_flows.pop_front(&self.flows),
            List::Old => self.old_flows.pop_front(&self.flows),
        }
    }

    fn flow_xstats(&self, i: usize) -> FqCodelFlowXstats {
        let f = &self.flows[i];
        FqCodelFlowXstats {
            deficit: f.deficit,
            ldelay: codel_to_us(f.vars.ldelay),
            count: f.vars.count,
            lastcount: f.vars.lastcount,
            dropping: f.vars.dropping,
            drop_next: f.vars.drop_next_us(self.last_now),
        }
    }

    /// Packets queued in each flow (tests, and `tc -s class show`).
    pub fn flow_lengths(&self) -> Vec<usize> {
        self.flows
            .iter()
            .map(|f| f.packets.len() as usize)
            .collect()
    }
}

impl Qdisc for FqCodel {
    fn kind(&self) -> &'static str {
        "fq_codel"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0
            && self.peeked.get().is_none()
            && self.flows.iter().all(|f| f.packets.len() == 0))
        .then(|| crate::snapshot::save(self))
        .flatten()
    }

    /// `fq_codel_tcf_block`: filters attach to the qdisc, not to its flows.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    super::by_value_through_boxes!();

    /// `fq_codel_enqueue`, the packet in its box.
    fn enqueue_skb(&mut self, mut pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        self.last_now = cx.now;
        let idx = match self.classify(&mut pkt, cx) {
            Ok(i) => i as usize - 1,
            Err(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving_skb(pkt, DropReason::Unclassified);
                }
                return v;
            }
        };
        pkt.enqueue_ns = cx.now;
        let len = pkt.len;
        // The buffer memory a packet is charged (see the essay); taken back from its length at dequeue.
        let mem = len + SKB_OVERHEAD;
        if self.flows.is_empty() {
            self.flows = (0..self.flows_cnt).map(|_| Flow::default()).collect();
            self.backlogs = vec![0; self.flows_cnt as usize];
        }
        let flow = &mut self.flows[idx];
        self.queued.push_back(&mut flow.packets, pkt);
        self.backlogs[idx] += len;
        self.stats.backlog += len;
        if flow.on.is_none() {
            flow.on = Some(List::New);
            flow.deficit = self.quantum as i32;
            self.new_flows.push_back(&mut self.flows, idx as u32);
            self.new_flow_count += 1;
        }
        self.memory_usage += mem;
        let memory_limited = self.memory_usage > self.memory_limit;
        self.stats.qlen += 1;
        if self.stats.qlen <= self.limit && !memory_limited {
            return Verdict::Success;
        }
        let prev_qlen = self.stats.qlen;
        let prev_backlog = self.stats.backlog;
        let (fat, _, _) = self.drop_fattest(self.drop_batch, cx);
        let dropped = prev_qlen - self.stats.qlen;
        let dropped_bytes = prev_backlog - self.stats.backlog;
        self.drop_overlimit += dropped;
        if memory_limited {
            self.drop_overmemory += dropped;
        }
        if fat == idx {
            // Our own flow paid: the parents do not count the arriving packet (NET_XMIT_CN).
            cx.reduce_backlog(dropped as i64 - 1, dropped_bytes as i64 - len as i64);
            return Verdict::Cn;
        }
        cx.reduce_backlog(dropped as i64, dropped_bytes as i64);
        Verdict::Success
    }

    /// `qdisc_dequeue_peeked`: a packet a parent peeked at is the next one out.
    fn dequeue_skb(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        self.dequeue_inner(cx)
    }

    /// `qdisc_peek_dequeued`: the packet is chosen (the discipline's decisions made) and held.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue_inner(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    /// `fq_codel_reset`.
    fn reset(&mut self) {
        self.peeked.clear();
        self.new_flows = FlowList::EMPTY;
        self.old_flows = FlowList::EMPTY;
        for f in &mut self.flows {
            *f = Flow::default();
        }
        self.queued.clear();
        self.backlogs.iter_mut().for_each(|b| *b = 0);
        self.memory_usage = 0;
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `fq_codel_dump`.
    fn dump(&self) -> QdiscOptions {
        let ce = self.params.ce_threshold != CODEL_DISABLED_THRESHOLD;
        QdiscOptions::FqCodel(FqCodelOptions {
            limit: Some(self.limit),
            flows: Some(self.flows_cnt),
            quantum: Some(self.quantum),
            target: Some(codel_to_us(self.params.target)),
            interval: Some(codel_to_us(self.params.interval)),
            ecn: Some(self.params.ecn),
            ce_threshold: ce.then(|| codel_to_us(self.params.ce_threshold)),
            ce_threshold_selector: ce.then_some((
                self.params.ce_threshold_selector,
                self.params.ce_threshold_mask,
            )),
            memory_limit: Some(self.memory_limit),
            drop_batch: Some(self.drop_batch),
        })
    }

    /// `fq_codel_change`: validate, apply, then drop from the head until the queue fits.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::FqCodel(o) = opts else {
            return Err(KernelError::invalid("Invalid qdisc name"));
        };
        self.validate(o, false)?;
        self.apply(o);
        let mut cx = Cx::new(now);
        while self.stats.qlen > self.limit || self.memory_usage > self.memory_limit {
            if self.dequeue_inner(&mut cx).is_none() {
                break;
            }
        }
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
    }

    /// `fq_codel_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::FqCodel(FqCodelXstats {
            maxpacket: self.cstats.maxpacket,
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.cstats.ecn_mark,
            new_flow_count: self.new_flow_count,
            new_flows_len: self.new_flows.len,
            old_flows_len: self.old_flows.len,
            ce_mark: self.cstats.ce_mark,
            memory_usage: self.memory_usage,
            drop_overmemory: self.drop_overmemory,
        }))
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

/// The flows as classes (`fq_codel_class_ops`): listed and counted, but not configurable.
impl super::FlowClasses for FqCodel {
    /// `fq_codel_walk`: the flows on a list, as classes `handle:N` (1-based).
    fn flow_walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        // The flows on a list, in the order of their index as the kernel's walk finds them, found from
        // the two lists rather than by reading the whole table: 48 KB of 1 024 flows for the few a leaf
        // has in use (a thousand subscribers' leaves listed by `tc -s class show` read 48 MB, a miss
        // every line).
        let mut on = Vec::with_capacity((self.new_flows.len + self.old_flows.len) as usize);
        for list in [&self.new_flows, &self.old_flows] {
            let mut i = list.head;
            while i != NO_FLOW {
                on.push(i as usize);
                i = self.flows[i as usize].next;
            }
        }
        on.sort_unstable();
        let mut out = Vec::new();
        for i in on {
            let f = &self.flows[i];
            let mut stats = QdiscStats {
                qlen: f.packets.len(),
                backlog: self.backlogs[i],
                ..Default::default()
            };
            stats.drops = 0;
            out.push(ClassInfo {
                kind: "fq_codel",
                classid: Handle(self.handle.0 | (i as u32 + 1)),
                parent: self.handle,
                leaf: None,
                options: None,
                stats,
                htb_xstats: None,
                xstats: Some(Xstats::FqCodelFlow(self.flow_xstats(i))),
            });
        }
        out
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "fq_codel",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::FqCodel(o) => Ok((Box::new(FqCodel::new(handle, o, env)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::super::FlowClasses;
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

    /// The essay's layout claim: a flow's state is one 48-byte entry (its backlog lives apart).
    #[test]
    fn a_flow_is_48_bytes() {
        assert_eq!(std::mem::size_of::<super::Flow>(), 48);
    }

    /// `fq_codel_walk` lists every flow on the new or the old list, in index order, whatever order the
    /// lists hold them in: the walk finds them from the lists, the kernel's by scanning the table.
    #[test]
    fn the_walk_lists_the_flows_on_a_list_in_index_order() {
        let env = env();
        let mut q = FqCodel::new(Handle(0x10000), &FqCodelOptions::default(), &env).unwrap();
        let mut cx = Cx::new(0);
        // Flows 1000, 3, 500 and 7 (1-based: hash / 2^22 + 1), new in that order; two packets for
        // 1000 (of 1000 bytes) and for 3.
        for (flow, len) in [
            (1000u32, 1000),
            (1000, 1000),
            (3, 100),
            (500, 100),
            (7, 100),
            (3, 100),
        ] {
            let mut p = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, len);
            p.hash = (flow - 1) << 22;
            let _ = q.enqueue(p, &mut cx);
        }
        // Flow 1000 sends both its packets and overdraws its deficit; the third dequeue moves it,
        // empty, to the old list and sends flow 3's first.
        for _ in 0..3 {
            assert!(q.dequeue(&mut cx).is_some());
        }
        let scanned: Vec<u32> = (0..q.flows.len())
            .filter(|&i| q.flows[i].on.is_some())
            .map(|i| i as u32 + 1)
            .collect();
        let walked: Vec<u32> = q
            .flow_walk(0)
            .iter()
            .map(|c| c.classid.0 & 0xffff)
            .collect();
        assert_eq!(walked, scanned);
        assert_eq!(walked, [3, 7, 500, 1000]);
        assert!(
            q.old_flows.len > 0 && q.new_flows.len > 0,
            "both lists in use"
        );
        let backlog: Vec<u32> = q.flow_walk(0).iter().map(|c| c.stats.backlog).collect();
        assert_eq!(backlog.iter().filter(|&&b| b > 0).count(), 3, "{backlog:?}");
    }

    /// `skb->hash`: a packet that carries its hash goes to the flow `reciprocal_scale` of that hash
    /// names (fq_codel_hash), whatever the qdisc's own secret; one without is hashed with the secret.
    #[test]
    fn a_carried_hash_names_the_flow() {
        let env = env();
        let active = |seed: u64, hash: u32| {
            let mut q = FqCodel::new(Handle(0x10000), &FqCodelOptions::default(), &env).unwrap();
            q.set_seed(seed);
            let mut p = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 100);
            p.hash = hash;
            let _ = q.enqueue(p, &mut Cx::new(0));
            let flows: Vec<u32> = q
                .flow_walk(0)
                .iter()
                .map(|c| c.classid.0 & 0xffff)
                .collect();
            flows
        };
        // 1024 flows: 0x8000_0000 is half way, flow 513; 0x0040_0000 is 1/1024 of the way, flow 2.
        for seed in [1, 2, 3] {
            assert_eq!(active(seed, 0x8000_0000), vec![513]);
            assert_eq!(active(seed, 0x0040_0000), vec![2]);
        }
        // Without a hash, the secret decides: the same packet lands in other flows under other seeds.
        let own: Vec<Vec<u32>> = (1..=8).map(|seed| active(seed, 0)).collect();
        assert!(own.iter().any(|f| f != &own[0]), "{own:?}");
    }
}
