//! `fq_pie` — flow queueing with PIE per flow, after `net/sched/sch_fq_pie.c` (RFC 8033 with the
//! FQ-CoDel scheduler of RFC 8290).
//!
//! # The algorithm
//!
//! Packets are hashed into `flows` queues (1024) as fq_codel hashes them — or placed by `skb->priority`
//! or a filter naming a flow — and the queues are served by deficit round robin with fq_codel's
//! new/old lists: a queue that becomes active goes to the new list with a quantum (one MTU) and is served
//! before the old ones, so a sparse flow's packets leave at once. Each queue runs its own PIE controller
//! ([`super::pie_impl`]): the early-drop decision on enqueue uses that flow's backlog and probability, and
//! every `tupdate` the timer updates every flow's probability (2048 flows a tick at most, as the kernel
//! splits the walk). ECN marks replace drops while the flow's probability is at most `ecn_prob` %
//! (10). Over `limit` packets (10 240) the arrival is dropped; over `memory_limit` (32 MB of buffers)
//! the kernel only counts `overmemory`.
//!
//! # What tclab models and how
//!
//! The kernel's scheduler, controller and counters (`tc -s`: `pkts_in overlimit overmemory dropped
//! ecn_mark new_flow_count new_flows_len old_flows_len memory_used`). A buffer's memory is its length plus
//! 256 bytes of `sk_buff`, as fq_codel counts it. The classification is fq_codel's (`classify_flow`).
//! The timer runs lazily, as `pie`'s does, at the first packet after each expiry. Random numbers and the
//! flow hash's key come from the run's seed.

use super::fq_codel::classify_flow;
use super::pie::{apply_options, PieOptions};
use super::pie_impl::{ns2ticks, PieParams, PieVars, MAX_PROB};
use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::filter::Block;
use crate::flow::splitmix64;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

const SKB_OVERHEAD: u32 = 256;

/// What tc sends (`TCA_FQ_PIE_*`): only what was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqPieOptions {
    pub pie: PieOptions,
    pub flows: Option<u32>,
    pub quantum: Option<u32>,
    pub memory_limit: Option<u32>,
    pub ecn_prob: Option<u32>,
}

/// `struct tc_fq_pie_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqPieXstats {
    pub packets_in: u32,
    pub dropped: u32,
    pub overlimit: u32,
    pub overmemory: u32,
    pub ecn_mark: u32,
    pub new_flow_count: u32,
    pub new_flows_len: u32,
    pub old_flows_len: u32,
    pub memory_usage: u32,
}

#[derive(Default, Serialize, Deserialize)]
struct Flow {
    /// Packets, their enqueue time (ticks) and buffer memory.
    #[serde(skip)]
    packets: VecDeque<(Packet, u64, u32)>,
    vars: PieVars,
    deficit: i32,
    backlog: u32,
    on_list: bool,
}

impl Flow {
    /// As the table made it: no packet, no deficit, off the lists, PIE's initial state.
    fn is_initial(&self) -> bool {
        self.packets.is_empty()
            && self.deficit == 0
            && self.backlog == 0
            && !self.on_list
            && self.vars == PieVars::default()
    }
}

/// The flow table in a snapshot: its length and the flows that left their initial state, by index.
/// Whole, 2 000 idle fq_pie leaves of 1 024 flows made a 35 MB snapshot that took longer to load
/// than replaying the commands that built them.
mod sparse_flows {
    use super::Flow;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(flows: &[Flow], s: S) -> Result<S::Ok, S::Error> {
        let used: Vec<(u32, &Flow)> = (0u32..)
            .zip(flows)
            .filter(|(_, f)| !f.is_initial())
            .collect();
        (flows.len() as u32, used).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Flow>, D::Error> {
        let (n, used) = <(u32, Vec<(u32, Flow)>)>::deserialize(d)?;
        // `fq_pie_init`'s bound on the flows.
        if n > 65536 {
            return Err(D::Error::custom(format!("{n} flows")));
        }
        let mut flows: Vec<Flow> = (0..n).map(|_| Flow::default()).collect();
        for (i, f) in used {
            *flows
                .get_mut(i as usize)
                .ok_or_else(|| D::Error::custom(format!("flow {i} of {n}")))? = f;
        }
        Ok(flows)
    }
}

/// `fq_pie_policy`'s range for the quantum: 1 .. 2^20.
fn check_quantum(o: &FqPieOptions) -> Result<(), KernelError> {
    if o.quantum.is_some_and(|v| v == 0 || v > 1 << 20) {
        return Err(KernelError::msg(Errno::Range, "integer out of range"));
    }
    Ok(())
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: every flow's PIE state and deficit, the
/// flow lists and the update timer come with it.
#[derive(Serialize, Deserialize)]
pub struct FqPie {
    handle: Handle,
    #[serde(with = "sparse_flows")]
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    params: PieParams,
    limit: u32,
    quantum: u32,
    memory_limit: u32,
    ecn_prob: u32,
    memory_usage: u32,
    mtu: u32,
    packets_in: u32,
    dropped: u32,
    overlimit: u32,
    overmemory: u32,
    ecn_mark: u32,
    new_flow_count: u32,
    stats: QdiscStats,
    block: Block,
    secret: [u64; 2],
    rng: u64,
    next_update: Nanos,
    cursor: usize,
}

impl FqPie {
    /// `fq_pie_init` then `fq_pie_change`.
    pub fn new(
        handle: Handle,
        o: &FqPieOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<FqPie, KernelError> {
        let flows_cnt = o.flows.unwrap_or(1024);
        if flows_cnt == 0 || flows_cnt > 65536 {
            return Err(KernelError::invalid(
                "sch_fq_pie: Number of flows must range in [1..65536]",
            ));
        }
        check_quantum(o)?;
        let mtu = env.mtu + env.hard_header_len;
        let mut q = FqPie {
            handle,
            flows: (0..flows_cnt).map(|_| Flow::default()).collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            params: PieParams {
                limit: 10 * 1024,
                ..PieParams::default()
            },
            limit: 10 * 1024,
            // `psched_mtu`, unclamped: only a quantum the user gives is raised to 256.
            quantum: mtu,
            memory_limit: 32 << 20,
            ecn_prob: 10,
            memory_usage: 0,
            mtu,
            packets_in: 0,
            dropped: 0,
            overlimit: 0,
            overmemory: 0,
            ecn_mark: 0,
            new_flow_count: 0,
            stats: QdiscStats::default(),
            block: Block::default(),
            // Until set_seed: constants grouped as what they spell (ASCII "fqpie", "fq pie").
            #[allow(clippy::unusual_byte_groupings)]
            secret: [0x6671_7069_65, 0x0fed_cba9],
            #[allow(clippy::unusual_byte_groupings)]
            rng: 0xf9_1e,
            next_update: now + 500_000_000,
            cursor: 0,
        };
        q.apply(o);
        Ok(q)
    }

    /// The probability of flow `i` (0-based), scaled by `MAX_PROB` (tests, `tc -s class show`).
    pub fn flow_prob(&self, i: usize) -> u64 {
        self.flows.get(i).map_or(0, |f| f.vars.prob)
    }

    fn apply(&mut self, o: &FqPieOptions) {
        apply_options(&mut self.params, &o.pie);
        if let Some(l) = o.pie.limit {
            self.limit = l;
        }
        if let Some(v) = o.quantum {
            self.quantum = v.max(256);
        }
        if let Some(v) = o.memory_limit {
            self.memory_limit = v;
        }
        if let Some(v) = o.ecn_prob {
            self.ecn_prob = v;
        }
    }

    /// `fq_pie_timer`, for every expiry up to `now`: 2048 flows a tick, the next tick at once while
    /// flows remain, then after `tupdate`.
    fn run_timer(&mut self, now: Nanos) {
        while self.next_update <= now {
            let n = (self.flows.len() - self.cursor).min(2048);
            for _ in 0..n {
                let f = &mut self.flows[self.cursor];
                f.vars.calculate_probability(&self.params, f.backlog);
                self.cursor += 1;
            }
            let mut next = 0;
            if self.cursor >= self.flows.len() {
                self.cursor = 0;
                next = self.params.tupdate as u64 * 1_000_000;
            }
            if self.params.tupdate == 0 {
                self.next_update = Nanos::MAX;
                break;
            }
            // A timer re-armed for "now" fires on the next jiffy.
            self.next_update += next.max(1_000_000);
        }
    }
}

impl Qdisc for FqPie {
    fn kind(&self) -> &'static str {
        "fq_pie"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.flows.iter().all(|f| f.packets.is_empty()))
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    /// `fq_pie_qdisc_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.run_timer(cx.now);
        let idx = match classify_flow(
            self.handle,
            self.flows.len() as u32,
            &self.block,
            self.secret,
            &mut pkt,
            cx,
        ) {
            Ok(i) => i as usize - 1,
            Err(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                }
                cx.drop_arriving(pkt, DropReason::Unclassified);
                return v;
            }
        };
        let mem = pkt.len + SKB_OVERHEAD;
        let memory_limited = self.memory_usage > self.memory_limit.saturating_add(mem);
        let mut enqueue = false;
        if self.stats.qlen >= self.limit {
            self.overlimit += 1;
        } else {
            if memory_limited {
                self.overmemory += 1;
            }
            let (params, mtu, ecn_prob) = (self.params, self.mtu, self.ecn_prob);
            let rng = &mut self.rng;
            let f = &mut self.flows[idx];
            if !f
                .vars
                .drop_early(&params, f.backlog, pkt.len, mtu, &mut || splitmix64(rng))
            {
                enqueue = true;
            } else if params.ecn
                && f.vars.prob <= (MAX_PROB / 100) * ecn_prob as u64
                && set_ce(&mut pkt)
            {
                self.ecn_mark += 1;
                enqueue = true;
            }
        }
        if enqueue {
            self.packets_in += 1;
            self.memory_usage += mem;
            self.stats.backlog += pkt.len;
            self.stats.qlen += 1;
            let f = &mut self.flows[idx];
            if !f.on_list {
                f.on_list = true;
                f.deficit = self.quantum as i32;
                f.backlog = 0;
                self.new_flows.push_back(idx);
                self.new_flow_count += 1;
            }
            f.backlog += pkt.len;
            f.packets.push_back((pkt, ns2ticks(cx.now), mem));
            return Verdict::Success;
        }
        self.dropped += 1;
        self.flows[idx].vars.accu_prob = 0;
        self.stats.drops += 1;
        let reason = if self.stats.qlen >= self.limit {
            DropReason::TailDrop
        } else {
            DropReason::Aqm
        };
        cx.drop_arriving(pkt, reason);
        Verdict::Cn
    }

    /// `fq_pie_qdisc_dequeue`: DRR over the new, then the old flows.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.run_timer(cx.now);
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let f = &mut self.flows[idx];
            if f.deficit <= 0 {
                f.deficit += self.quantum as i32;
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(idx);
                continue;
            }
            let Some((p, enq, mem)) = f.packets.pop_front() else {
                // Empty: a new flow moves to the old list once (if there are old flows), else leaves.
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                if from_new && !self.old_flows.is_empty() {
                    self.old_flows.push_back(idx);
                } else {
                    f.on_list = false;
                }
                continue;
            };
            self.stats.backlog -= p.len;
            self.stats.qlen -= 1;
            self.stats.bytes += p.len as u64;
            self.stats.packets += p.bstats_packets();
            f.deficit -= p.len as i32;
            f.backlog -= p.len;
            self.memory_usage -= mem;
            f.vars
                .process_dequeue(&self.params, ns2ticks(cx.now), enq, p.len, f.backlog);
            return Some(p);
        }
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        let idx = *self.new_flows.front().or(self.old_flows.front())?;
        self.flows[idx].packets.front().map(|(p, _, _)| p)
    }

    /// `fq_pie_reset`.
    fn reset(&mut self) {
        for f in self.flows.iter_mut() {
            *f = Flow::default();
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.memory_usage = 0;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::FqPie(FqPieXstats {
            packets_in: self.packets_in,
            dropped: self.dropped,
            overlimit: self.overlimit,
            overmemory: self.overmemory,
            ecn_mark: self.ecn_mark,
            new_flow_count: self.new_flow_count,
            new_flows_len: self.new_flows.len() as u32,
            old_flows_len: self.old_flows.len() as u32,
            memory_usage: self.memory_usage,
        }))
    }

    /// `fq_pie_dump`.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::FqPie(FqPieOptions {
            pie: PieOptions {
                limit: Some(self.limit),
                ..super::pie::dump_options(&self.params)
            },
            flows: Some(self.flows.len() as u32),
            quantum: Some(self.quantum),
            memory_limit: Some(self.memory_limit),
            ecn_prob: Some(self.ecn_prob),
        })
    }

    /// `fq_pie_change`: the number of flows is fixed at creation.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::FqPie(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        check_quantum(o)?;
        if o.flows.is_some() {
            return Err(KernelError::invalid(
                "sch_fq_pie: Number of flows cannot be changed",
            ));
        }
        self.apply(o);
        // Over the new limit: dropped from the heads, as `qdisc_dequeue_internal` takes them.
        let mut cx = Cx::new(0);
        while self.stats.qlen > self.limit {
            let Some(p) = self.dequeue(&mut cx) else {
                break;
            };
            self.stats.packets -= 1;
            self.stats.bytes -= p.len as u64;
            self.stats.drops += 1;
        }
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
        self.rng = splitmix64(&mut s);
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "fq_pie",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::FqPie(o) => Ok((Box::new(FqPie::new(handle, o, env, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
