//! `cake` — Common Applications Kept Enhanced, after `net/sched/sch_cake.c` (Morton, Høiland-Jørgensen,
//! Täht et al.; "Piece of CAKE", LANMAN 2018). The default of sqm-scripts' `piece_of_cake` and
//! `layer_cake`, of OpenWrt's SQM and of LibreQoS's circuits.
//!
//! # The algorithm
//!
//! CAKE puts four mechanisms that usually take a tree of qdiscs into one:
//!
//! - **A shaper without bursts.** With `bandwidth RATE` every dequeued packet advances a "time of the
//!   next packet" by its length at the rate (`time_next_packet += len × rate_ns >> rate_shft`); nothing
//!   leaves before that time. There is no token bucket and hence no burst to size: the shaper works in
//!   deficit mode, like `sch_fq`. A failsafe clock running at 1.5× the rate limits how far a late shaper
//!   can fall behind. `unlimited` (the default) turns the shaper off; `autorate-ingress` estimates the
//!   rate from the arrival pattern (bursts of back-to-back packets measure the upstream link) and sets
//!   15/16 of it.
//! - **Diffserv tins.** The DSCP (or `fwmark`, `skb->priority`, a filter) chooses a *tin*. diffserv3
//!   (default): Bulk (CS1, LE) at rate/16, Best Effort at the rate, Voice (CS7, CS6, EF, VA, TOS4) at
//!   rate/4; diffserv4 adds Video at rate/2; diffserv8 and precedence have eight tins, each 7/8 of the
//!   previous one; besteffort has one. A tin's rate is a *threshold*, not a limit: while a tin stays
//!   below it, it has priority; above it, it competes by its weight (its `tin_quantum`). Shaped, the tin
//!   served is the highest one whose own schedule says it may send, else the one due earliest;
//!   unlimited, the tins share by deficit round robin of their quanta.
//! - **Flow isolation (DRR++).** In each tin packets are hashed into 1024 queues by an 8-way
//!   set-associative hash (a flow whose slot is taken by another flow finds a free way of the same set,
//!   so collisions are rare below a few hundred flows). Queues are served by deficit round robin with
//!   sparse-flow priority as in fq_codel: a queue that becomes active joins the *new* list and is served
//!   before the *old* (bulk) ones. `triple-isolate` (default) also divides each flow's quantum by the
//!   number of bulk flows its source host — or its destination host, whichever has more — has, so a host
//!   with 16 flows gets as much as a host with one; `dual-srchost`/`dual-dsthost` do this for one side,
//!   `srchost`/`dsthost`/`hosts` isolate hosts only, `flows` flows only, `flowblind` nothing.
//! - **COBALT per queue** ([`super::cobalt`]): CoDel for responsive flows, BLUE for unresponsive ones.
//!   A queue that empties keeps its AQM state on the *decaying* list until the state has decayed. When
//!   the buffer (`memlimit`, by default 4 × the bandwidth-delay product at rtt×4 and at least 4 MB)
//!   overflows, the longest queue of any tin loses its head packet (a max-heap over all queues' backlogs,
//!   rebuilt lazily) and BLUE's probability for that flow rises.
//!
//! Around them: **overhead compensation** (each packet is charged `len − 14 + overhead` bytes when an
//! overhead is set, at least `mpu`, then rounded up to whole 53-byte ATM cells of 48 bytes payload for
//! `atm`, or plus one byte per 64 for PTM's 64b/65b coding), so the shaper can run at 100 % of a DSL
//! line's sync rate; and the **ACK filter**, which drops a queued pure TCP ACK made redundant by a
//! newer one of the same connection just enqueued (never one carrying data, ECN echo changes, unknown
//! options or SACK information the newer one lacks).
//!
//! # What tclab models and how
//!
//! - Every path of the kernel's `cake_enqueue`/`cake_dequeue`, in the kernel's integer arithmetic and
//!   order, with time in nanoseconds. The counters `tc -s qdisc|class show` prints are the kernel's.
//! - Hashes: the kernel hashes with `flow_hash_from_keys` (jhash, boot-random key); tclab keys the same
//!   flow keys (and, for hosts, the same addresses) with a secret drawn from the run's seed. The random
//!   draws (BLUE's, the quantum dither) come from a generator seeded the same way.
//! - Buffers: `truesize` is the packet's length plus a fixed 256-byte `sk_buff` overhead.
//! - GSO: a simulated host's TCP hands its qdisc GSO super-packets. With `split-gso` (the default) each is
//!   cut into its frames at enqueue, each queued with its own time and charge, as `cake_enqueue` does;
//!   with `no-split-gso` it stays whole, charged the overhead of every frame (`cake_overhead`). The
//!   network offset is always the 14-byte Ethernet header.
//! - `nat`: the kernel looks the pre-NAT addresses up in conntrack; tclab's hosts do not NAT, so the
//!   conntrack tuple equals the packet's addresses and `nat` changes nothing (as on a router without NAT).
//! - The kernel never sets `last_reconfig_time`, so autorate reconfigures on every measurement after the
//!   first 250 ms; tclab does the same.
//! - Leftover packets of tins a `change` removes are freed without telling the parents, as the kernel's
//!   `cake_clear_tin` does.
//! - Memory: `cake_init` allocates every tin's 1 024 queues at once; tclab makes a tin's queues, tags
//!   and hosts with its first packet, and the overflow heap with the instance's first, so an idle CAKE
//!   costs a few hundred bytes instead of ~0.9 MB (LibreQoS puts one on each of tens of thousands of
//!   circuits). Queues not made yet count as empty in the heap.
//!
//! # Invariants
//!
//! - A queue is on exactly one of its tin's lists (new, old, decaying) iff its `set` is not `None`;
//!   `sparse_flow_count + bulk_flow_count + decaying_flow_count` counts them (a `SparseWait` queue is on
//!   the old list and counted sparse).
//! - `buffer_used` is the sum of the queued packets' truesizes; `stats.backlog` the sum of their lengths
//!   and of each tin's `tin_backlog` and of each queue's `backlogs` entry.

use super::cobalt::{CobaltParams, CobaltVars};
use super::{
    ClassInfo, ClassOps, Cx, DevEnv, DropReason, PeekDequeued, Peeked, Qdisc, QdiscOptions,
    QdiscStats, Verdict, Xstats,
};
use crate::error::{KernelError, Warning};
use crate::filter::{Block, Verdict as FilterVerdict};
use crate::flow::{flow_keys, host_addrs, keyed_hash, splitmix64};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `CAKE_QUEUES`: queues per tin.
pub const QUEUES: usize = 1024;
/// `CAKE_SET_WAYS`.
const SET_WAYS: usize = 8;
/// `CAKE_MAX_TINS`.
pub const MAX_TINS: usize = 8;
/// The per-packet buffer overhead charged against the memory limit (see the essay).
const SKB_OVERHEAD: u32 = 256;
/// The network header's offset in a tclab packet: the Ethernet header.
const NETWORK_OFFSET: u32 = 14;
pub const DEFAULT_SEED: u64 = 0xca4e_5eed;

/// `CAKE_DIFFSERV_*`.
pub mod diffserv {
    pub const DIFFSERV3: u32 = 0;
    pub const DIFFSERV4: u32 = 1;
    pub const DIFFSERV8: u32 = 2;
    pub const BESTEFFORT: u32 = 3;
    pub const PRECEDENCE: u32 = 4;
    pub const MAX: u32 = 5;
}

/// `CAKE_FLOW_*`: bit 0 source host, bit 1 destination host, bit 2 flows.
pub mod flow_mode {
    pub const NONE: u32 = 0;
    pub const SRC_IP: u32 = 1;
    pub const DST_IP: u32 = 2;
    pub const HOSTS: u32 = 3;
    pub const FLOWS: u32 = 4;
    pub const DUAL_SRC: u32 = 5;
    pub const DUAL_DST: u32 = 6;
    pub const TRIPLE: u32 = 7;
    pub const MAX: u32 = 8;
    /// `CAKE_FLOW_MASK`.
    pub const MASK: u32 = 63;
    /// `CAKE_FLOW_NAT_FLAG`.
    pub const NAT_FLAG: u32 = 64;
}

/// `CAKE_ATM_*`.
pub mod atm {
    pub const NONE: u32 = 0;
    pub const ATM: u32 = 1;
    pub const PTM: u32 = 2;
}

/// `CAKE_ACK_*`.
pub mod ack {
    pub const NONE: u32 = 0;
    pub const FILTER: u32 = 1;
    pub const AGGRESSIVE: u32 = 2;
}

const FLAG_OVERHEAD: u16 = 1 << 0;
const FLAG_AUTORATE_INGRESS: u16 = 1 << 1;
const FLAG_INGRESS: u16 = 1 << 2;
const FLAG_WASH: u16 = 1 << 3;
const FLAG_SPLIT_GSO: u16 = 1 << 4;

/// What tc sends (`TCA_CAKE_*`): each attribute present or not. Rates in bytes per second, times in
/// microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeOptions {
    pub base_rate: Option<u64>,
    pub diffserv_mode: Option<u32>,
    pub atm: Option<u32>,
    pub flow_mode: Option<u32>,
    pub overhead: Option<i32>,
    /// `TCA_CAKE_RAW` present: no overhead compensation (the kernel dumps it when no overhead is set).
    #[serde(default)]
    pub raw: bool,
    pub mpu: Option<u32>,
    pub rtt: Option<u32>,
    pub target: Option<u32>,
    pub autorate: Option<u32>,
    pub memory: Option<u32>,
    pub nat: Option<u32>,
    pub wash: Option<u32>,
    pub ingress: Option<u32>,
    pub ack_filter: Option<u32>,
    pub split_gso: Option<u32>,
    pub fwmark: Option<u32>,
}

/// One tin's `TCA_CAKE_TIN_STATS_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CakeTinXstats {
    pub threshold_rate: u64,
    pub sent_bytes: u64,
    pub backlog_bytes: u32,
    pub target_us: u32,
    pub interval_us: u32,
    pub sent_packets: u32,
    pub dropped_packets: u32,
    pub ecn_marked_packets: u32,
    pub acks_dropped_packets: u32,
    pub peak_delay_us: u32,
    pub avg_delay_us: u32,
    pub base_delay_us: u32,
    pub way_indirect_hits: u32,
    pub way_misses: u32,
    pub way_collisions: u32,
    pub sparse_flows: u32,
    pub bulk_flows: u32,
    pub unresponsive_flows: u32,
    pub max_skblen: u32,
    pub flow_quantum: u32,
}

/// `cake_dump_stats`: the qdisc's counters and its tins' (in `tin_order`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CakeXstats {
    pub capacity_estimate: u64,
    pub memory_limit: u32,
    pub memory_used: u32,
    pub avg_netoff: u32,
    pub max_netlen: u32,
    pub max_adjlen: u32,
    pub min_netlen: u32,
    pub min_adjlen: u32,
    pub tin_count: usize,
    pub tins: [CakeTinXstats; MAX_TINS],
}

/// `cake_dump_class_stats`: one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CakeFlowXstats {
    pub deficit: i32,
    pub dropping: bool,
    pub count: u32,
    pub p_drop: u32,
    /// Microseconds since BLUE last moved (present when `p_drop` is not 0).
    pub blue_timer_us: Option<i32>,
    /// `now − drop_next` in microseconds (present while dropping).
    pub drop_next_us: Option<i32>,
}

/// `CAKE_SET_*`: which rotation a queue is in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
enum FlowSet {
    #[default]
    None,
    Sparse,
    /// Counted sparse, actually in the bulk rotation.
    SparseWait,
    Bulk,
    Decaying,
}

/// A tin's three lists (`new_flows`, `old_flows`, `decaying_flows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Chain {
    New = 0,
    Old = 1,
    Decaying = 2,
}

const NIL: u16 = u16::MAX;

struct Queued {
    pkt: Packet,
    /// Nanoseconds.
    enqueued: i64,
    /// `cobalt_skb_cb.adjusted_len`: the length the shaper charges.
    adjusted_len: u32,
    truesize: u32,
}

#[derive(Default, Serialize, Deserialize)]
struct Flow {
    /// Empty in a snapshot (a cake holding packets has none).
    #[serde(skip)]
    queue: VecDeque<Queued>,
    deficit: i32,
    dropped: u32,
    cvars: CobaltVars,
    srchost: u16,
    dsthost: u16,
    set: FlowSet,
    /// The list the queue is on (`flowchain`), and its neighbours there.
    chain: Option<Chain>,
    prev: u16,
    next: u16,
}

#[derive(Clone, Copy, Default, Serialize, Deserialize)]
struct Host {
    srchost_tag: u32,
    dsthost_tag: u32,
    srchost_bulk_flow_count: u16,
    dsthost_bulk_flow_count: u16,
}

/// `struct cake_tin_data`.
#[derive(Serialize, Deserialize)]
struct Tin {
    flows: Vec<Flow>,
    backlogs: Vec<u32>,
    tags: Vec<u32>,
    hosts: Vec<Host>,
    /// Head and tail of each [`Chain`].
    lists: [(u16, u16); 3],
    flow_quantum: u16,
    cparams: CobaltParams,
    drop_overlimit: u32,
    bulk_flow_count: u16,
    sparse_flow_count: u16,
    decaying_flow_count: u16,
    unresponsive_flow_count: u16,
    max_skblen: u32,
    time_next_packet: i64,
    tin_rate_ns: u64,
    tin_rate_bps: u64,
    tin_rate_shft: u16,
    tin_quantum: u16,
    tin_deficit: i32,
    tin_backlog: u32,
    tin_dropped: u32,
    tin_ecn_mark: u32,
    packets: u32,
    bytes: u64,
    ack_drops: u32,
    avge_delay: u64,
    peak_delay: u64,
    base_delay: u64,
    way_directs: u32,
    way_hits: u32,
    way_misses: u32,
    way_collisions: u32,
}

impl Tin {
    /// A tin without its queues: [`Tin::ensure`] makes them when the first packet comes (a policy of
    /// 20 000 idle CAKE leaves, LibreQoS's circuits, does not hold 160 000 tables of 1 024).
    fn new() -> Tin {
        Tin {
            flows: Vec::new(),
            backlogs: Vec::new(),
            tags: Vec::new(),
            hosts: Vec::new(),
            lists: [(NIL, NIL); 3],
            flow_quantum: 0,
            cparams: CobaltParams::default(),
            drop_overlimit: 0,
            bulk_flow_count: 0,
            sparse_flow_count: 0,
            decaying_flow_count: 0,
            unresponsive_flow_count: 0,
            max_skblen: 0,
            time_next_packet: 0,
            tin_rate_ns: 0,
            tin_rate_bps: 0,
            tin_rate_shft: 0,
            tin_quantum: 0,
            tin_deficit: 0,
            tin_backlog: 0,
            tin_dropped: 0,
            tin_ecn_mark: 0,
            packets: 0,
            bytes: 0,
            ack_drops: 0,
            avge_delay: 0,
            peak_delay: 0,
            base_delay: 0,
            way_directs: 0,
            way_hits: 0,
            way_misses: 0,
            way_collisions: 0,
        }
    }

    fn active_flows(&self) -> u32 {
        self.sparse_flow_count as u32 + self.bulk_flow_count as u32
    }

    fn list_head(&self, c: Chain) -> Option<usize> {
        let h = self.lists[c as usize].0;
        (h != NIL).then_some(h as usize)
    }

    /// `list_del_init`.
    fn unlink(&mut self, i: usize) {
        let Some(c) = self.flows[i].chain.take() else {
            return;
        };
        let (prev, next) = (self.flows[i].prev, self.flows[i].next);
        if prev == NIL {
            self.lists[c as usize].0 = next;
        } else {
            self.flows[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[c as usize].1 = prev;
        } else {
            self.flows[next as usize].prev = prev;
        }
        self.flows[i].prev = NIL;
        self.flows[i].next = NIL;
    }

    /// `list_move_tail` (and `list_add_tail` for a queue on no list).
    fn move_tail(&mut self, i: usize, c: Chain) {
        self.unlink(i);
        let tail = self.lists[c as usize].1;
        self.flows[i].prev = tail;
        self.flows[i].next = NIL;
        self.flows[i].chain = Some(c);
        if tail == NIL {
            self.lists[c as usize].0 = i as u16;
        } else {
            self.flows[tail as usize].next = i as u16;
        }
        self.lists[c as usize].1 = i as u16;
    }

    fn dual_src(mode: u32) -> bool {
        mode & flow_mode::DUAL_SRC == flow_mode::DUAL_SRC
    }
    fn dual_dst(mode: u32) -> bool {
        mode & flow_mode::DUAL_DST == flow_mode::DUAL_DST
    }

    fn inc_host_bulk(&mut self, i: usize, mode: u32) {
        let (s, d) = (
            self.flows[i].srchost as usize,
            self.flows[i].dsthost as usize,
        );
        if Self::dual_src(mode) && (self.hosts[s].srchost_bulk_flow_count as usize) < QUEUES {
            self.hosts[s].srchost_bulk_flow_count += 1;
        }
        if Self::dual_dst(mode) && (self.hosts[d].dsthost_bulk_flow_count as usize) < QUEUES {
            self.hosts[d].dsthost_bulk_flow_count += 1;
        }
    }

    fn dec_host_bulk(&mut self, i: usize, mode: u32) {
        let (s, d) = (
            self.flows[i].srchost as usize,
            self.flows[i].dsthost as usize,
        );
        if Self::dual_src(mode) && self.hosts[s].srchost_bulk_flow_count > 0 {
            self.hosts[s].srchost_bulk_flow_count -= 1;
        }
        if Self::dual_dst(mode) && self.hosts[d].dsthost_bulk_flow_count > 0 {
            self.hosts[d].dsthost_bulk_flow_count -= 1;
        }
    }

    /// `cake_get_flow_quantum`: the tin's flow quantum divided by the busier host's bulk flow count,
    /// dithered by a random 16-bit fraction so the rounding does not accumulate.
    fn flow_quantum_for(&self, i: usize, mode: u32, dither: u16) -> i32 {
        let f = &self.flows[i];
        let mut load: u16 = 1;
        if Self::dual_src(mode) {
            load = load.max(self.hosts[f.srchost as usize].srchost_bulk_flow_count);
        }
        if Self::dual_dst(mode) {
            load = load.max(self.hosts[f.dsthost as usize].dsthost_bulk_flow_count);
        }
        let div = 65535 / load as u32; // quantum_div[load]
        ((self.flow_quantum as u32 * div + dither as u32) >> 16) as i32
    }

    /// `cake_hash`'s set-associative lookup: the queue of `flow_hash`, allocating a way of its set (and
    /// host slots for the dual modes) if the flow has none.
    /// The tin's queues, hash tags and hosts, made on first use (`cake_init` makes them at once).
    fn ensure(&mut self) {
        if self.flows.is_empty() {
            self.flows = (0..QUEUES)
                .map(|_| Flow {
                    prev: NIL,
                    next: NIL,
                    ..Default::default()
                })
                .collect();
            self.backlogs = vec![0; QUEUES];
            self.tags = vec![0; QUEUES];
            self.hosts = vec![Host::default(); QUEUES];
        }
    }

    fn lookup(&mut self, flow_hash: u32, src_hash: u32, dst_hash: u32, mode: u32) -> usize {
        self.ensure();
        let reduced = flow_hash as usize % QUEUES;
        if self.tags[reduced] == flow_hash && self.flows[reduced].set != FlowSet::None {
            self.way_directs += 1;
            return reduced;
        }
        let inner = reduced % SET_WAYS;
        let outer = reduced - inner;
        let (mut alloc_src, mut alloc_dst) = (false, false);
        let mut k = inner;
        let mut found = None;
        for i in 0..SET_WAYS {
            if self.tags[outer + k] == flow_hash {
                if i > 0 {
                    self.way_hits += 1;
                }
                if self.flows[outer + k].set == FlowSet::None {
                    alloc_src = Self::dual_src(mode);
                    alloc_dst = Self::dual_dst(mode);
                }
                found = Some(outer + k);
                break;
            }
            k = (k + 1) % SET_WAYS;
        }
        if found.is_none() {
            for _ in 0..SET_WAYS {
                if self.flows[outer + k].set == FlowSet::None {
                    self.way_misses += 1;
                    alloc_src = Self::dual_src(mode);
                    alloc_dst = Self::dual_dst(mode);
                    found = Some(outer + k);
                    break;
                }
                k = (k + 1) % SET_WAYS;
            }
        }
        let idx = match found {
            Some(i) => i,
            None => {
                // Every way busy: share the original way, re-tagging its hosts.
                self.way_collisions += 1;
                alloc_src = Self::dual_src(mode);
                alloc_dst = Self::dual_dst(mode);
                if self.flows[outer + k].set == FlowSet::Bulk {
                    self.dec_host_bulk(outer + k, mode);
                }
                outer + k
            }
        };
        self.tags[idx] = flow_hash;
        if alloc_src {
            let slot = host_slot(
                &self.hosts,
                src_hash,
                |h| h.srchost_tag,
                |h| h.srchost_bulk_flow_count,
            );
            self.hosts[slot].srchost_tag = src_hash;
            self.flows[idx].srchost = slot as u16;
            if self.flows[idx].set == FlowSet::Bulk && Self::dual_src(mode) {
                let h = &mut self.hosts[slot];
                if (h.srchost_bulk_flow_count as usize) < QUEUES {
                    h.srchost_bulk_flow_count += 1;
                }
            }
        }
        if alloc_dst {
            let slot = host_slot(
                &self.hosts,
                dst_hash,
                |h| h.dsthost_tag,
                |h| h.dsthost_bulk_flow_count,
            );
            self.hosts[slot].dsthost_tag = dst_hash;
            self.flows[idx].dsthost = slot as u16;
            if self.flows[idx].set == FlowSet::Bulk && Self::dual_dst(mode) {
                let h = &mut self.hosts[slot];
                if (h.dsthost_bulk_flow_count as usize) < QUEUES {
                    h.dsthost_bulk_flow_count += 1;
                }
            }
        }
        idx
    }

    fn stats(&self) -> CakeTinXstats {
        let us = |ns: u64| (ns / 1000) as u32;
        CakeTinXstats {
            threshold_rate: self.tin_rate_bps,
            sent_bytes: self.bytes,
            backlog_bytes: self.tin_backlog,
            target_us: us(self.cparams.target),
            interval_us: us(self.cparams.interval),
            sent_packets: self.packets,
            dropped_packets: self.tin_dropped,
            ecn_marked_packets: self.tin_ecn_mark,
            acks_dropped_packets: self.ack_drops,
            peak_delay_us: us(self.peak_delay),
            avg_delay_us: us(self.avge_delay),
            base_delay_us: us(self.base_delay),
            way_indirect_hits: self.way_hits,
            way_misses: self.way_misses,
            way_collisions: self.way_collisions,
            sparse_flows: self.sparse_flow_count as u32 + self.decaying_flow_count as u32,
            bulk_flows: self.bulk_flow_count as u32,
            unresponsive_flows: self.unresponsive_flow_count as u32,
            max_skblen: self.max_skblen,
            flow_quantum: self.flow_quantum as u32,
        }
    }
}

/// The host slot of `hash` in its set: the way already tagged with it, else the first way (from the
/// set's start position onwards, as the kernel's loop continues) with no bulk flow, else the last way
/// looked at.
fn host_slot(
    hosts: &[Host],
    hash: u32,
    tag: impl Fn(&Host) -> u32,
    bulk: impl Fn(&Host) -> u16,
) -> usize {
    let idx = hash as usize % QUEUES;
    let inner = idx % SET_WAYS;
    let outer = idx - inner;
    let mut k = inner;
    for _ in 0..SET_WAYS {
        if tag(&hosts[outer + k]) == hash {
            return outer + k;
        }
        k = (k + 1) % SET_WAYS;
    }
    for _ in 0..SET_WAYS {
        if bulk(&hosts[outer + k]) == 0 {
            break;
        }
        k = (k + 1) % SET_WAYS;
    }
    outer + k
}

/// The DSCP → tin tables.
const PRECEDENCE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (i / 8) as u8;
        i += 1;
    }
    t
};
#[rustfmt::skip]
const DIFFSERV8: [u8; 64] = [
    2, 0, 1, 2, 4, 2, 2, 2, 1, 2, 1, 2, 1, 2, 1, 2,
    5, 2, 4, 2, 4, 2, 4, 2, 3, 2, 3, 2, 3, 2, 3, 2,
    6, 2, 3, 2, 3, 2, 3, 2, 6, 2, 2, 2, 6, 2, 6, 2,
    7, 2, 2, 2, 2, 2, 2, 2, 7, 2, 2, 2, 2, 2, 2, 2,
];
#[rustfmt::skip]
const DIFFSERV4: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0,
    3, 0, 2, 0, 2, 0, 2, 0, 3, 0, 0, 0, 3, 0, 3, 0,
    3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
];
#[rustfmt::skip]
const DIFFSERV3: [u8; 64] = [
    0, 1, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2, 0,
    2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
];
const BESTEFFORT: [u8; 64] = [0; 64];
const NORMAL_ORDER: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
/// Bulk is tin 1 internally and shown first.
const BULK_ORDER: [u8; 4] = [1, 0, 2, 3];

/// A cake's DSCP and order tables in a snapshot: which of the constants above (they differ in
/// content), by position.
mod tables {
    use super::*;
    use serde::de::Error as _;
    use serde::{Deserializer, Serializer};

    /// The order's type by another name: serde borrows a field written `&[u8]` from the input,
    /// which this one is not.
    pub type Order = &'static [u8];

    const INDEXES: [&[u8; 64]; 5] = [&PRECEDENCE, &DIFFSERV8, &DIFFSERV4, &DIFFSERV3, &BESTEFFORT];
    const ORDERS: [&[u8]; 2] = [&NORMAL_ORDER, &BULK_ORDER];

    fn position<T: PartialEq + ?Sized, E: serde::ser::Error>(all: &[&T], t: &T) -> Result<u8, E> {
        all.iter()
            .position(|a| *a == t)
            .map(|i| i as u8)
            .ok_or_else(|| E::custom("cake: a table of no known kind"))
    }

    pub mod index {
        use super::*;
        pub fn serialize<S: Serializer>(t: &&'static [u8; 64], s: S) -> Result<S::Ok, S::Error> {
            position(&INDEXES, *t)?.serialize(s)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static [u8; 64], D::Error> {
            let i = u8::deserialize(d)? as usize;
            INDEXES
                .get(i)
                .copied()
                .ok_or_else(|| D::Error::custom("cake: no such table"))
        }
    }

    pub mod order {
        use super::*;
        pub fn serialize<S: Serializer>(t: &&'static [u8], s: S) -> Result<S::Ok, S::Error> {
            position(&ORDERS, *t)?.serialize(s)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static [u8], D::Error> {
            let i = u8::deserialize(d)? as usize;
            ORDERS
                .get(i)
                .copied()
                .ok_or_else(|| D::Error::custom("cake: no such order"))
        }
    }
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: its flows' state kept, their queues empty.
#[derive(Serialize, Deserialize)]
pub struct Cake {
    handle: Handle,
    tins: Vec<Tin>,
    /// `overflow_heap`: (tin, queue) pairs, a max-heap by backlog when `overflow_timeout` is not 0.
    heap: Vec<(u8, u16)>,
    /// Each queue's place in `heap`, by tin and queue (`tin * QUEUES + queue`).
    overflow_idx: Vec<u16>,
    overflow_timeout: u16,
    tin_cnt: usize,
    tin_mode: u32,
    flow_mode: u32,
    ack_filter: u32,
    atm_mode: u32,
    fwmark_mask: u32,
    fwmark_shft: u32,
    rate_shft: u16,
    time_next_packet: i64,
    failsafe_next_packet: i64,
    rate_ns: u64,
    rate_bps: u64,
    rate_flags: u16,
    rate_overhead: i16,
    rate_mpu: u16,
    /// Microseconds.
    interval: u64,
    target: u64,
    buffer_used: u32,
    buffer_max_used: u32,
    buffer_limit: u32,
    buffer_config_limit: u32,
    cur_tin: usize,
    cur_flow: usize,
    #[serde(with = "tables::index")]
    tin_index: &'static [u8; 64],
    #[serde(with = "tables::order")]
    tin_order: tables::Order,
    last_packet_time: i64,
    avg_window_begin: i64,
    avg_packet_interval: u64,
    avg_window_bytes: u64,
    avg_peak_bandwidth: u64,
    last_reconfig_time: i64,
    avg_netoff: u32,
    max_netlen: u16,
    max_adjlen: u16,
    min_netlen: u16,
    min_adjlen: u16,
    /// `sch->limit` (packets) and `psched_mtu(dev)`.
    limit: u32,
    mtu: u32,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
    block: Block,
    secret: [u64; 2],
    rng: u64,
    last_now: i64,
}

/// `cake_ewma`.
fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

impl Cake {
    /// `cake_init`: the defaults, the options, then the tins.
    pub fn new(handle: Handle, o: &CakeOptions, env: &DevEnv) -> Cake {
        let mut q = Cake {
            handle,
            tins: Vec::new(),
            heap: Vec::new(),
            overflow_idx: Vec::new(),
            overflow_timeout: 0,
            tin_cnt: 0,
            tin_mode: diffserv::DIFFSERV3,
            flow_mode: flow_mode::TRIPLE,
            ack_filter: ack::NONE,
            atm_mode: atm::NONE,
            fwmark_mask: 0,
            fwmark_shft: 0,
            rate_shft: 0,
            time_next_packet: 0,
            failsafe_next_packet: 0,
            rate_ns: 0,
            rate_bps: 0,
            rate_flags: FLAG_SPLIT_GSO,
            rate_overhead: 0,
            rate_mpu: 0,
            interval: 100_000,
            target: 5_000,
            buffer_used: 0,
            buffer_max_used: 0,
            buffer_limit: 0,
            buffer_config_limit: 0,
            cur_tin: 0,
            cur_flow: 0,
            tin_index: &DIFFSERV3,
            tin_order: &BULK_ORDER,
            last_packet_time: 0,
            avg_window_begin: 0,
            avg_packet_interval: 0,
            avg_window_bytes: 0,
            avg_peak_bandwidth: 0,
            last_reconfig_time: 0,
            avg_netoff: 0,
            max_netlen: 0,
            max_adjlen: 0,
            min_netlen: 0,
            min_adjlen: 0,
            limit: 10240,
            mtu: env.psched_mtu(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
            block: Block::default(),
            secret: [0; 2],
            rng: 0,
            last_now: 0,
        };
        q.apply(o);
        q.tins = (0..MAX_TINS).map(|_| Tin::new()).collect();
        q.reconfigure(&mut Cx::new(0));
        q.avg_peak_bandwidth = q.rate_bps;
        q.min_netlen = !0;
        q.min_adjlen = !0;
        q.set_seed(DEFAULT_SEED);
        q
    }

    /// `cake_change` without the reconfiguration: every attribute present is applied (the kernel refuses
    /// none of them).
    fn apply(&mut self, o: &CakeOptions) {
        let mut mode = self.flow_mode;
        if let Some(n) = o.nat {
            mode &= !flow_mode::NAT_FLAG;
            if n != 0 {
                mode |= flow_mode::NAT_FLAG;
            }
        }
        if let Some(r) = o.base_rate {
            self.rate_bps = r;
        }
        if let Some(d) = o.diffserv_mode {
            self.tin_mode = d;
        }
        let mut flags = self.rate_flags;
        let set = |flags: &mut u16, bit: u16, on: Option<u32>| match on {
            Some(0) => *flags &= !bit,
            Some(_) => *flags |= bit,
            None => {}
        };
        set(&mut flags, FLAG_WASH, o.wash);
        if let Some(f) = o.flow_mode {
            mode = (mode & flow_mode::NAT_FLAG) | (f & flow_mode::MASK);
        }
        if let Some(a) = o.atm {
            self.atm_mode = a;
        }
        if let Some(v) = o.overhead {
            self.rate_overhead = v as i16;
            flags |= FLAG_OVERHEAD;
            self.reset_len_stats();
        }
        if o.raw {
            flags &= !FLAG_OVERHEAD;
            self.reset_len_stats();
        }
        if let Some(m) = o.mpu {
            self.rate_mpu = m as u16;
        }
        if let Some(r) = o.rtt {
            self.interval = r.max(1) as u64;
        }
        if let Some(t) = o.target {
            self.target = t.max(1) as u64;
        }
        set(&mut flags, FLAG_AUTORATE_INGRESS, o.autorate);
        set(&mut flags, FLAG_INGRESS, o.ingress);
        if let Some(a) = o.ack_filter {
            self.ack_filter = a;
        }
        if let Some(m) = o.memory {
            self.buffer_config_limit = m;
        }
        set(&mut flags, FLAG_SPLIT_GSO, o.split_gso);
        if let Some(m) = o.fwmark {
            self.fwmark_mask = m;
            self.fwmark_shft = if m != 0 { m.trailing_zeros() } else { 0 };
        }
        self.rate_flags = flags;
        self.flow_mode = mode;
    }

    fn reset_len_stats(&mut self) {
        self.max_netlen = 0;
        self.max_adjlen = 0;
        self.min_netlen = !0;
        self.min_adjlen = !0;
    }

    /// `cake_set_rate`: a tin's time per byte (`rate_ns >> rate_shft`), flow quantum and COBALT timing.
    fn set_rate(&mut self, tin: usize, rate: u64) {
        const MIN_RATE: u64 = 64;
        let (target_ns, rtt_ns) = (self.target * 1000, self.interval * 1000);
        let b = &mut self.tins[tin];
        let mut rate_shft: u16 = 0;
        let mut rate_ns: u64 = 0;
        b.flow_quantum = 1514;
        if rate != 0 {
            b.flow_quantum = (rate >> 12).clamp(300, 1514) as u16;
            rate_shft = 34;
            rate_ns = (1_000_000_000u64 << rate_shft) / rate.max(MIN_RATE);
            while rate_ns >> 34 != 0 {
                rate_ns >>= 1;
                rate_shft -= 1;
            }
        }
        b.tin_rate_bps = rate;
        b.tin_rate_ns = rate_ns;
        b.tin_rate_shft = rate_shft;
        let byte_target_ns = (self.mtu as u64 * rate_ns) >> rate_shft;
        b.cparams.target = (byte_target_ns * 3 / 2).max(target_ns);
        b.cparams.interval = (rtt_ns + b.cparams.target - target_ns).max(b.cparams.target * 2);
        b.cparams.mtu_time = byte_target_ns;
        b.cparams.p_inc = 1 << 24; // 1/256
        b.cparams.p_dec = 1 << 20; // 1/4096
    }

    /// `cake_config_*` and `cake_reconfigure`.
    fn reconfigure(&mut self, cx: &mut Cx) {
        let rate = self.rate_bps;
        match self.tin_mode {
            diffserv::BESTEFFORT => {
                self.tin_cnt = 1;
                self.tin_index = &BESTEFFORT;
                self.tin_order = &NORMAL_ORDER;
                self.set_rate(0, rate);
                self.tins[0].tin_quantum = 65535;
            }
            diffserv::PRECEDENCE | diffserv::DIFFSERV8 => {
                self.tin_cnt = 8;
                self.tin_index = if self.tin_mode == diffserv::PRECEDENCE {
                    &PRECEDENCE
                } else {
                    &DIFFSERV8
                };
                self.tin_order = &NORMAL_ORDER;
                let (mut rate, mut quantum) = (rate, 256u32);
                for i in 0..8 {
                    self.set_rate(i, rate);
                    self.tins[i].tin_quantum = quantum.max(1) as u16;
                    rate = rate.wrapping_mul(7) >> 3;
                    quantum = (quantum * 7) >> 3;
                }
            }
            diffserv::DIFFSERV4 => {
                self.tin_cnt = 4;
                self.tin_index = &DIFFSERV4;
                self.tin_order = &BULK_ORDER;
                for (i, shift) in [0, 4, 1, 2].into_iter().enumerate() {
                    self.set_rate(i, rate >> shift);
                    self.tins[i].tin_quantum = 1024 >> shift;
                }
            }
            _ => {
                self.tin_cnt = 3;
                self.tin_index = &DIFFSERV3;
                self.tin_order = &BULK_ORDER;
                for (i, shift) in [0, 4, 2].into_iter().enumerate() {
                    self.set_rate(i, rate >> shift);
                    self.tins[i].tin_quantum = 1024 >> shift;
                }
            }
        }
        for c in self.tin_cnt..MAX_TINS {
            self.clear_tin(c, cx);
            self.tins[c].cparams.mtu_time = self.tins[0].cparams.mtu_time;
        }
        self.rate_ns = self.tins[0].tin_rate_ns;
        self.rate_shft = self.tins[0].tin_rate_shft;
        self.buffer_limit = if self.buffer_config_limit != 0 {
            self.buffer_config_limit
        } else if self.rate_bps != 0 {
            let t = self.rate_bps.wrapping_mul(self.interval) / (1_000_000 / 4);
            (t as u32).max(4 << 20)
        } else {
            !0
        };
        self.buffer_limit = self.buffer_limit.min(
            self.limit
                .wrapping_mul(self.mtu)
                .max(self.buffer_config_limit),
        );
    }

    /// `cake_clear_tin`: free whatever a tin no longer in use still holds.
    fn clear_tin(&mut self, tin: usize, cx: &mut Cx) {
        self.cur_tin = tin;
        for f in 0..QUEUES {
            self.cur_flow = f;
            while let Some(q) = self.dequeue_one() {
                cx.drop_queued(q.pkt, DropReason::Overlimit);
            }
        }
    }

    fn random_u32(&mut self) -> u32 {
        (splitmix64(&mut self.rng) >> 32) as u32
    }

    /// `cake_calc_overhead`: the length the shaper charges for a packet of `len` bytes.
    fn calc_overhead(&mut self, len: u32) -> u32 {
        let mut len = len;
        if self.rate_flags & FLAG_OVERHEAD != 0 {
            len = len.wrapping_sub(NETWORK_OFFSET);
        }
        self.max_netlen = self.max_netlen.max(len as u16);
        self.min_netlen = self.min_netlen.min(len as u16);
        let mut len = (len as i32 + self.rate_overhead as i32).max(self.rate_mpu as i32) as u32;
        match self.atm_mode {
            atm::ATM => len = len.div_ceil(48) * 53,
            atm::PTM => len += len.div_ceil(64),
            _ => {}
        }
        self.max_adjlen = self.max_adjlen.max(len as u16);
        self.min_adjlen = self.min_adjlen.min(len as u16);
        len
    }

    /// `cake_overhead`: the EWMA of the network offset, then the charged length; a GSO packet is
    /// charged as its frames: every full one's overhead, then the last's.
    fn overhead(&mut self, pkt: &Packet) -> u32 {
        self.avg_netoff = ewma(self.avg_netoff as u64, (NETWORK_OFFSET as u64) << 16, 8) as u32;
        if !pkt.is_gso() {
            return self.calc_overhead(pkt.len);
        }
        // `pkt.len` is the sum of the frames (qdisc_pkt_len_init), all but the last of `frame` bytes.
        let segs = pkt.gso_segs.max(1) as u32;
        let frame = pkt.gso_frame_max();
        let last = pkt.len.saturating_sub(frame * (segs - 1));
        let full = self.calc_overhead(frame);
        full * (segs - 1) + self.calc_overhead(last)
    }

    /// `cake_handle_diffserv`: the packet's DSCP, cleared from the header if `wash`.
    fn handle_diffserv(pkt: &mut Packet, wash: bool) -> u8 {
        match pkt.protocol {
            0x0800 => {
                let Some(&tos) = pkt.data.get(1) else {
                    return 0;
                };
                let dscp = tos >> 2;
                if wash && dscp != 0 {
                    if pkt.data.len() < 20 {
                        return 0;
                    }
                    super::codel_impl::ipv4_change_dsfield(&mut pkt.data, 3, 0);
                }
                dscp
            }
            0x86dd => {
                if pkt.data.len() < 2 {
                    return 0;
                }
                let tclass = ((pkt.data[0] & 0x0f) << 4) | (pkt.data[1] >> 4);
                let dscp = tclass >> 2;
                if wash && dscp != 0 {
                    if pkt.data.len() < 40 {
                        return 0;
                    }
                    let kept = tclass & 3;
                    pkt.data[0] &= 0xf0;
                    pkt.data[1] = (pkt.data[1] & 0x0f) | (kept << 4);
                }
                dscp
            }
            0x0806 => 0x38, // ARP: CS7, network control
            _ => 0,
        }
    }

    /// `cake_select_tin`.
    fn select_tin(&self, pkt: &mut Packet) -> usize {
        let mark = (pkt.mark & self.fwmark_mask) >> self.fwmark_shft;
        let wash = self.rate_flags & FLAG_WASH != 0;
        let mut dscp = if wash {
            Self::handle_diffserv(pkt, true)
        } else {
            0
        };
        let minor = pkt.priority & 0xffff;
        if self.tin_mode == diffserv::BESTEFFORT {
            0
        } else if mark != 0 && mark as usize <= self.tin_cnt {
            self.tin_order[mark as usize - 1] as usize
        } else if pkt.priority & 0xffff_0000 == self.handle.0
            && minor > 0
            && minor as usize <= self.tin_cnt
        {
            self.tin_order[minor as usize - 1] as usize
        } else {
            if !wash {
                dscp = Self::handle_diffserv(pkt, false);
            }
            let tin = self.tin_index[dscp as usize & 63] as usize;
            if tin >= self.tin_cnt {
                0
            } else {
                tin
            }
        }
    }

    /// `cake_classify`: the tin and queue, or the verdict for a packet not to be queued.
    fn classify(&mut self, pkt: &mut Packet, cx: &mut Cx) -> Result<(usize, usize), Verdict> {
        let (mut flow, mut host) = (0u32, 0u32);
        if !self.block.filter_list_is_empty() {
            match crate::filter::classify(&self.block, pkt, cx) {
                FilterVerdict::Classified { classid, .. } => {
                    if classid & 0xffff <= QUEUES as u32 {
                        flow = classid & 0xffff;
                    }
                    if classid & 0xffff_0000 <= (QUEUES as u32) << 16 {
                        host = classid >> 16;
                    }
                }
                FilterVerdict::Stolen => return Err(Verdict::Stolen),
                FilterVerdict::Shot => return Err(Verdict::Bypass),
                FilterVerdict::Unclassified => {}
            }
        }
        let tin = self.select_tin(pkt);
        Ok((tin, self.hash(tin, pkt, flow, host)))
    }

    /// `cake_hash`: the queue of the packet in its tin.
    fn hash(&mut self, tin: usize, pkt: &Packet, flow_override: u32, host_override: u32) -> usize {
        let mode = self.flow_mode & flow_mode::MASK;
        if mode == flow_mode::NONE {
            return 0;
        }
        let hash_flows = flow_override == 0 && mode & flow_mode::FLOWS != 0;
        let hash_hosts = host_override == 0 && mode & flow_mode::HOSTS != 0;
        let mut flow_hash = 0u32;
        let (mut src_hash, mut dst_hash) = (0u32, 0u32);
        if hash_hosts {
            if let Some((src, dst)) = host_addrs(pkt) {
                src_hash = keyed_hash(self.secret, &src);
                dst_hash = keyed_hash(self.secret, &dst);
            }
        }
        if hash_flows {
            flow_hash = keyed_hash(self.secret, &flow_keys(pkt));
        }
        if flow_override != 0 {
            flow_hash = flow_override - 1;
        }
        if host_override != 0 {
            src_hash = host_override - 1;
            dst_hash = host_override - 1;
        }
        if mode & flow_mode::FLOWS == 0 {
            if mode & flow_mode::SRC_IP != 0 {
                flow_hash ^= src_hash;
            }
            if mode & flow_mode::DST_IP != 0 {
                flow_hash ^= dst_hash;
            }
        }
        self.tins[tin].lookup(flow_hash, src_hash, dst_hash, mode)
    }

    /// `cake_advance_shaper`: charge a packet's adjusted length to its tin's and the global schedule.
    fn advance_shaper(&mut self, tin: usize, len: u32, now: i64, drop: bool) -> u32 {
        if self.rate_ns != 0 {
            let b = &mut self.tins[tin];
            let tin_dur = ((len as u64).wrapping_mul(b.tin_rate_ns) >> b.tin_rate_shft) as i64;
            let global_dur = ((len as u64).wrapping_mul(self.rate_ns) >> self.rate_shft) as i64;
            let failsafe_dur = global_dur + (global_dur >> 1);
            if b.time_next_packet < now {
                b.time_next_packet += tin_dur;
            } else if b.time_next_packet < now + tin_dur {
                b.time_next_packet = now + tin_dur;
            }
            self.time_next_packet += global_dur;
            if !drop {
                self.failsafe_next_packet += failsafe_dur;
            }
        }
        len
    }

    /// The overflow heap and each queue's place in it, made with the first packet (see [`Tin::new`]):
    /// every (tin, queue), the queues of tins not used yet holding nothing.
    fn ensure_heap(&mut self) {
        if self.heap.is_empty() {
            self.heap = (0..QUEUES * MAX_TINS)
                .map(|k| ((k % MAX_TINS) as u8, (k / MAX_TINS) as u16))
                .collect();
            self.overflow_idx = (0..MAX_TINS * QUEUES)
                .map(|k| ((k % QUEUES) * MAX_TINS + k / QUEUES) as u16)
                .collect();
        }
    }

    /// Where queue `b` of tin `t` is in the heap.
    fn heap_pos(&self, t: usize, b: usize) -> usize {
        self.overflow_idx[t * QUEUES + b] as usize
    }

    fn heap_backlog(&self, i: usize) -> u32 {
        let (t, b) = self.heap[i];
        self.tins[t as usize]
            .backlogs
            .get(b as usize)
            .copied()
            .unwrap_or(0)
    }

    fn heap_swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        let (ti, bi) = self.heap[i];
        let (tj, bj) = self.heap[j];
        self.overflow_idx[ti as usize * QUEUES + bi as usize] = i as u16;
        self.overflow_idx[tj as usize * QUEUES + bj as usize] = j as u16;
    }

    /// `cake_heapify`: sift entry `i` down.
    fn heapify(&mut self, mut i: usize) {
        let n = self.heap.len();
        let mut mb = self.heap_backlog(i);
        let mut m = i;
        loop {
            let l = 2 * m + 1;
            let r = l + 1;
            if l < n {
                let lb = self.heap_backlog(l);
                if lb > mb {
                    m = l;
                    mb = lb;
                }
            }
            if r < n {
                let rb = self.heap_backlog(r);
                if rb > mb {
                    m = r;
                    mb = rb;
                }
            }
            if m == i {
                break;
            }
            self.heap_swap(i, m);
            i = m;
        }
    }

    /// `cake_heapify_up`.
    fn heapify_up(&mut self, mut i: usize) {
        while i > 0 && i < self.heap.len() {
            let p = (i - 1) >> 1;
            if self.heap_backlog(i) > self.heap_backlog(p) {
                self.heap_swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    /// `cake_drop`: drop the head of the longest queue of any tin. Returns (tin, queue), or `None` if
    /// the heap found nothing to drop.
    fn drop_longest(&mut self, now: i64, cx: &mut Cx) -> Option<(usize, usize)> {
        if self.heap.is_empty() {
            return None;
        }
        if self.overflow_timeout == 0 {
            for i in (0..self.heap.len() / 2).rev() {
                self.heapify(i);
            }
        }
        self.overflow_timeout = 65535;
        let (t, idx) = self.heap[0];
        let (tin, idx) = (t as usize, idx as usize);
        let b = &mut self.tins[tin];
        let Some(q) = b.flows.get_mut(idx).and_then(|f| f.queue.pop_front()) else {
            // The heap has gone wrong: rebuild it next time.
            self.overflow_timeout = 0;
            return None;
        };
        let p = b.cparams;
        if b.flows[idx].cvars.queue_full(&p, now) {
            b.unresponsive_flow_count = b.unresponsive_flow_count.wrapping_add(1);
        }
        let len = q.pkt.len;
        self.buffer_used -= q.truesize;
        b.backlogs[idx] -= len;
        b.tin_backlog -= len;
        self.stats.backlog -= len;
        b.flows[idx].dropped += 1;
        b.tin_dropped += 1;
        self.stats.drops += 1;
        if self.rate_flags & FLAG_INGRESS != 0 {
            self.advance_shaper(tin, q.adjusted_len, now, true);
        }
        cx.drop_queued(q.pkt, DropReason::Overlimit);
        self.stats.qlen -= 1;
        self.heapify(0);
        Some((tin, idx))
    }

    /// `cake_dequeue_one`: the head of the current queue.
    fn dequeue_one(&mut self) -> Option<Queued> {
        let (tin, f) = (self.cur_tin, self.cur_flow);
        let b = &mut self.tins[tin];
        let q = b.flows.get_mut(f)?.queue.pop_front()?;
        let len = q.pkt.len;
        b.backlogs[f] -= len;
        b.tin_backlog -= len;
        self.stats.backlog -= len;
        self.buffer_used -= q.truesize;
        self.stats.qlen -= 1;
        if self.overflow_timeout != 0 {
            let i = self.heap_pos(tin, f);
            self.heapify(i);
        }
        Some(q)
    }

    /// `cake_dequeue`.
    fn dequeue_inner(&mut self, cx: &mut Cx) -> Option<Packet> {
        let now = cx.now as i64;
        self.last_now = now;
        let mode = self.flow_mode;
        let ingress = self.rate_flags & FLAG_INGRESS != 0;
        let mut first_flow = true;
        // Each pass of 'begin either returns, or removes an empty queue from a list, or drops a packet:
        // bounded by the packets and queues there are; the guard only turns a bookkeeping bug into an
        // empty dequeue instead of a hang.
        let mut guard = 4 * (self.stats.qlen as usize + QUEUES * MAX_TINS) + 64;
        'begin: loop {
            guard = guard.checked_sub(1)?;
            if self.stats.qlen == 0 {
                return None;
            }
            // The global hard shaper.
            if self.time_next_packet > now && self.failsafe_next_packet > now {
                self.stats.overlimits += 1;
                cx.schedule(self.time_next_packet.min(self.failsafe_next_packet) as Nanos);
                return None;
            }
            // Choose a tin.
            if self.rate_ns == 0 {
                // Unlimited: deficit round robin over the tins.
                let (mut wrapped, mut empty) = (false, true);
                loop {
                    let b = &mut self.tins[self.cur_tin];
                    if b.tin_deficit >= 0 && b.active_flows() != 0 {
                        break;
                    }
                    if b.tin_deficit <= 0 {
                        b.tin_deficit += b.tin_quantum as i32;
                    }
                    if b.active_flows() != 0 {
                        empty = false;
                    }
                    self.cur_tin += 1;
                    if self.cur_tin >= self.tin_cnt {
                        self.cur_tin = 0;
                        if wrapped {
                            if empty {
                                return None;
                            }
                        } else {
                            wrapped = true;
                        }
                    }
                }
            } else {
                // Shaped: the highest tin whose schedule allows it, else the one due earliest.
                let mut best_time = i64::MAX;
                let mut best_tin = 0;
                for (i, b) in self.tins[..self.tin_cnt].iter().enumerate() {
                    if b.active_flows() > 0 {
                        let t = b.time_next_packet - now;
                        if t <= 0 || t <= best_time {
                            best_time = t;
                            best_tin = i;
                        }
                    }
                }
                self.cur_tin = best_tin;
                if self.tins[best_tin].active_flows() == 0 {
                    return None;
                }
            }
            let tin = self.cur_tin;
            'retry: loop {
                guard = guard.checked_sub(1)?;
                let b = &mut self.tins[tin];
                let chain = if first_flow && b.list_head(Chain::Decaying).is_some() {
                    Chain::Decaying
                } else if b.list_head(Chain::New).is_some() {
                    Chain::New
                } else if b.list_head(Chain::Old).is_some() {
                    Chain::Old
                } else if b.list_head(Chain::Decaying).is_some() {
                    Chain::Decaying
                } else {
                    continue 'begin;
                };
                let f = b.list_head(chain).unwrap_or(0);
                self.cur_flow = f;
                first_flow = false;

                // Flow isolation (DRR++).
                if b.flows[f].deficit <= 0 {
                    if b.flows[f].set == FlowSet::Sparse {
                        if !b.flows[f].queue.is_empty() {
                            b.sparse_flow_count -= 1;
                            b.bulk_flow_count += 1;
                            b.inc_host_bulk(f, mode);
                            b.flows[f].set = FlowSet::Bulk;
                        } else {
                            // In the bulk rotation for its deficit, still counted sparse.
                            b.flows[f].set = FlowSet::SparseWait;
                        }
                    }
                    let dither = (self.random_u32() >> 16) as u16;
                    let b = &mut self.tins[tin];
                    b.flows[f].deficit += b.flow_quantum_for(f, mode, dither);
                    b.move_tail(f, Chain::Old);
                    continue 'retry;
                }

                // A packet through the AQM.
                let q = loop {
                    let Some(mut q) = self.dequeue_one() else {
                        // The queue was empty after all.
                        let b = &mut self.tins[tin];
                        let p = b.cparams;
                        if b.flows[f].cvars.queue_empty(&p, now) {
                            b.unresponsive_flow_count = b.unresponsive_flow_count.wrapping_sub(1);
                        }
                        let cv = b.flows[f].cvars;
                        if cv.p_drop != 0 || cv.count != 0 || now < cv.drop_next {
                            // Keep its state on the decaying list until it has decayed to rest.
                            b.move_tail(f, Chain::Decaying);
                            match b.flows[f].set {
                                FlowSet::Bulk => {
                                    b.bulk_flow_count -= 1;
                                    b.dec_host_bulk(f, mode);
                                    b.decaying_flow_count += 1;
                                }
                                FlowSet::Sparse | FlowSet::SparseWait => {
                                    b.sparse_flow_count -= 1;
                                    b.decaying_flow_count += 1;
                                }
                                _ => {}
                            }
                            b.flows[f].set = FlowSet::Decaying;
                        } else {
                            b.unlink(f);
                            match b.flows[f].set {
                                FlowSet::Sparse | FlowSet::SparseWait => b.sparse_flow_count -= 1,
                                FlowSet::Bulk => {
                                    b.bulk_flow_count -= 1;
                                    b.dec_host_bulk(f, mode);
                                }
                                _ => b.decaying_flow_count = b.decaying_flow_count.wrapping_sub(1),
                            }
                            b.flows[f].set = FlowSet::None;
                        }
                        continue 'begin;
                    };
                    let random = self.random_u32();
                    let b = &mut self.tins[tin];
                    let bulk = if ingress { b.bulk_flow_count as u32 } else { 0 };
                    let p = b.cparams;
                    let drop = b.flows[f]
                        .cvars
                        .should_drop(&p, now, &mut q.pkt, q.enqueued, bulk, random);
                    // The last packet of a queue is delivered even when COBALT would drop it.
                    if !drop || b.flows[f].queue.is_empty() {
                        break q;
                    }
                    if ingress {
                        let len = self.advance_shaper(tin, q.adjusted_len, now, true) as i32;
                        let b = &mut self.tins[tin];
                        b.flows[f].deficit -= len;
                        b.tin_deficit -= len;
                    }
                    let b = &mut self.tins[tin];
                    b.flows[f].dropped += 1;
                    b.tin_dropped += 1;
                    cx.reduce_backlog(1, q.pkt.len as i64);
                    self.stats.drops += 1;
                    cx.drop_queued(q.pkt, DropReason::Aqm);
                    if ingress {
                        continue 'retry;
                    }
                };

                let b = &mut self.tins[tin];
                if b.flows[f].cvars.ecn_marked {
                    b.tin_ecn_mark += 1;
                }
                self.stats.count_sent(&q.pkt);
                let delay = (now - q.enqueued).max(0) as u64;
                b.avge_delay = ewma(b.avge_delay, delay, 8);
                b.peak_delay = ewma(
                    b.peak_delay,
                    delay,
                    if delay > b.peak_delay { 2 } else { 8 },
                );
                b.base_delay = ewma(
                    b.base_delay,
                    delay,
                    if delay < b.base_delay { 2 } else { 8 },
                );
                let len = self.advance_shaper(tin, q.adjusted_len, now, false) as i32;
                let b = &mut self.tins[tin];
                b.flows[f].deficit -= len;
                b.tin_deficit -= len;

                if self.time_next_packet > now && self.stats.qlen > 0 {
                    cx.schedule(self.time_next_packet.min(self.failsafe_next_packet) as Nanos);
                } else if self.stats.qlen == 0 {
                    if let Some(b) = self.tins[..self.tin_cnt]
                        .iter()
                        .find(|b| b.decaying_flow_count > 0)
                    {
                        cx.schedule((now + b.cparams.target as i64) as Nanos);
                    }
                }
                if self.overflow_timeout > 0 {
                    self.overflow_timeout -= 1;
                }
                return Some(q.pkt);
            }
        }
    }

    /// The autorate-ingress estimator, at each enqueue.
    fn estimate_capacity(&mut self, now: i64, cx: &mut Cx) {
        if self.rate_flags & FLAG_AUTORATE_INGRESS == 0 {
            self.avg_window_bytes = 0;
            self.last_packet_time = now;
            return;
        }
        let packet_interval = ((now - self.last_packet_time).max(0) as u64).min(1_000_000_000);
        // Filter out short-term bursts (wifi aggregation).
        let shift = if packet_interval > self.avg_packet_interval {
            2
        } else {
            8
        };
        self.avg_packet_interval = ewma(self.avg_packet_interval, packet_interval, shift);
        self.last_packet_time = now;
        if packet_interval > self.avg_packet_interval {
            let window = (now - self.avg_window_begin).max(1) as u64;
            let b = self.avg_window_bytes.wrapping_mul(1_000_000_000) / window;
            let shift = if b > self.avg_peak_bandwidth { 2 } else { 8 };
            self.avg_peak_bandwidth = ewma(self.avg_peak_bandwidth, b, shift);
            self.avg_window_bytes = 0;
            self.avg_window_begin = now;
            if now > self.last_reconfig_time + 250_000_000 {
                self.rate_bps = (self.avg_peak_bandwidth * 15) >> 4;
                self.reconfigure(cx);
            }
        }
    }

    fn flow_xstats(&self, tin: usize, f: usize) -> CakeFlowXstats {
        let fl = &self.tins[tin].flows[f];
        let us = |ns: i64| (ns / 1000) as i32;
        CakeFlowXstats {
            deficit: fl.deficit,
            dropping: fl.cvars.dropping,
            count: fl.cvars.count,
            p_drop: fl.cvars.p_drop,
            blue_timer_us: (fl.cvars.p_drop != 0).then(|| us(self.last_now - fl.cvars.blue_timer)),
            drop_next_us: fl
                .cvars
                .dropping
                .then(|| us(self.last_now - fl.cvars.drop_next)),
        }
    }

    /// Bytes each tin (in the kernel's internal order) has sent: for tests.
    pub fn tin_bytes(&self) -> Vec<u64> {
        self.tins[..self.tin_cnt].iter().map(|b| b.bytes).collect()
    }

    /// Per tin, the COBALT parameters (target, interval, mtu_time in ns), the rate and the flow quantum.
    pub fn tin_params(&self) -> Vec<(CobaltParams, u64, u16)> {
        self.tins[..self.tin_cnt]
            .iter()
            .map(|b| (b.cparams, b.tin_rate_bps, b.flow_quantum))
            .collect()
    }

    /// The length the shaper charges for a packet of `len` bytes with the current overhead settings.
    pub fn charged_len(&mut self, len: u32) -> u32 {
        self.calc_overhead(len)
    }

    /// BLUE's drop probability of the queue a packet of this flow would use (tests).
    pub fn p_drop_of(&self, tin: usize, queue: usize) -> u32 {
        self.tins[tin].flows[queue].cvars.p_drop
    }
}

// ---------------------------------------------------------------------------------------------------
// The ACK filter
// ---------------------------------------------------------------------------------------------------

/// The parts of a TCP/IP packet the ACK filter compares.
struct TcpView<'a> {
    version: u8,
    src: &'a [u8],
    dst: &'a [u8],
    /// IP payload length (TCP header and data).
    seglen: u32,
    tcp: &'a [u8],
}

const TCPOPT_EOL: u8 = 0;
const TCPOPT_NOP: u8 = 1;
const TCPOPT_SACK: u8 = 5;
const TCPOPT_TIMESTAMP: u8 = 8;
const TCPOPT_MD5SIG: u8 = 19;
const TCP_ACK: u8 = 0x10;
const TCP_SYN: u8 = 0x02;
const TCP_ECE_CWR: u8 = 0xc0;

impl<'a> TcpView<'a> {
    /// `cake_get_tcphdr` and `cake_get_iphdr`: IPv4, IPv6 and 6in4; the whole TCP header must be there.
    fn parse(pkt: &'a Packet) -> Option<TcpView<'a>> {
        let d = &pkt.data;
        let first = *d.first()?;
        let (version, src, dst, seglen, mut at, proto) = match first >> 4 {
            4 => {
                if d.len() < 20 {
                    return None;
                }
                let ihl = (first & 0x0f) as usize * 4;
                let total = u16::from_be_bytes([d[2], d[3]]) as u32;
                if d[9] == 41 {
                    // 6in4.
                    let v6 = d.get(ihl..ihl + 40)?;
                    if v6[0] >> 4 != 6 {
                        return None;
                    }
                    let plen = u16::from_be_bytes([v6[4], v6[5]]) as u32;
                    (6, &v6[8..24], &v6[24..40], plen, ihl + 40, v6[6])
                } else {
                    (
                        4,
                        &d[12..16],
                        &d[16..20],
                        total.wrapping_sub(ihl as u32),
                        ihl,
                        d[9],
                    )
                }
            }
            6 => {
                if d.len() < 40 {
                    return None;
                }
                let plen = u16::from_be_bytes([d[4], d[5]]) as u32;
                (6, &d[8..24], &d[24..40], plen, 40, d[6])
            }
            _ => return None,
        };
        if proto != 6 {
            return None;
        }
        let head = d.get(at..at + 20)?;
        let doff = (head[12] >> 4) as usize * 4;
        if doff < 20 {
            return None;
        }
        let tcp = d.get(at..at + doff.min(64))?;
        at += 0;
        let _ = at;
        Some(TcpView {
            version,
            src,
            dst,
            seglen,
            tcp,
        })
    }

    fn sport(&self) -> u16 {
        u16::from_be_bytes([self.tcp[0], self.tcp[1]])
    }
    fn dport(&self) -> u16 {
        u16::from_be_bytes([self.tcp[2], self.tcp[3]])
    }
    fn ack_seq(&self) -> u32 {
        u32::from_be_bytes([self.tcp[8], self.tcp[9], self.tcp[10], self.tcp[11]])
    }
    fn flags(&self) -> u8 {
        self.tcp[13]
    }
    fn hdrlen(&self) -> u32 {
        (self.tcp[12] >> 4) as u32 * 4
    }

    /// Walk the options as `tcp_parse_options` does: (kind, value bytes) until EOL or a malformed one.
    fn options(&self) -> Vec<(u8, &'a [u8])> {
        let mut out = Vec::new();
        let opts = &self.tcp[20.min(self.tcp.len())..];
        let mut i = 0;
        while i < opts.len() {
            let kind = opts[i];
            if kind == TCPOPT_EOL {
                break;
            }
            if kind == TCPOPT_NOP {
                i += 1;
                continue;
            }
            let Some(&size) = opts.get(i + 1) else { break };
            let size = size as usize;
            if size < 2 || size > opts.len() - i {
                break;
            }
            out.push((kind, &opts[i + 2..i + size]));
            i += size;
        }
        out
    }

    fn option(&self, kind: u8) -> Option<&'a [u8]> {
        self.options()
            .into_iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v)
    }

    fn timestamps(&self) -> (u32, u32) {
        match self.option(TCPOPT_TIMESTAMP) {
            Some(v) if v.len() == 8 => (
                u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                u32::from_be_bytes([v[4], v[5], v[6], v[7]]),
            ),
            _ => (0, 0),
        }
    }

    /// The SACK blocks (start, end), if the option is there with at least one block.
    fn sacks(&self) -> Vec<(u32, u32)> {
        let Some(v) = self.option(TCPOPT_SACK) else {
            return Vec::new();
        };
        v.chunks_exact(8)
            .map(|c| {
                (
                    u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    u32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect()
    }

    /// `cake_tcph_may_drop`: a pure ACK (no SYN/FIN/RST/URG/PSH, reserved bits clear) whose options are
    /// all known harmless, with timestamps not newer than the triggering packet's.
    fn may_drop(&self, tsval_new: u32, tsecr_new: u32) -> bool {
        if self.tcp[12] & 0x0f != 0 || self.flags() & 0x3f != TCP_ACK {
            return false;
        }
        // A malformed option list ends the walk (and the packet may still be dropped), as the kernel's.
        for (kind, v) in self.options() {
            match kind {
                TCPOPT_MD5SIG => {}
                TCPOPT_SACK => {
                    if (v.len() + 2) % 8 != 2 {
                        return false;
                    }
                }
                TCPOPT_TIMESTAMP => {
                    if v.len() != 8 {
                        return false;
                    }
                    let tsval = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
                    let tsecr = u32::from_be_bytes([v[4], v[5], v[6], v[7]]);
                    if after(tsval, tsval_new) || after(tsecr, tsecr_new) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
        true
    }
}

/// `after(a, b)` on sequence numbers.
fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

/// `cake_tcph_sack_compare(a, b)`: −1 if A SACKs something B does not (or a DSACK), 1 if B SACKs
/// strictly more bytes covering all of A's, 0 if equal.
fn sack_compare(a: &TcpView, b: &TcpView) -> i32 {
    let (sa, sb) = (a.sacks(), b.sacks());
    match (sa.is_empty(), sb.is_empty()) {
        (false, true) => return -1,
        (true, false) => return 1,
        (true, true) => return 0,
        _ => {}
    }
    let ack_a = a.ack_seq();
    let bytes_b: u32 = sb
        .iter()
        .fold(0u32, |s, (st, en)| s.wrapping_add(en.wrapping_sub(*st)));
    let mut bytes_a = 0u32;
    for &(start_a, end_a) in &sa {
        if after(ack_a, start_a) {
            return -1; // DSACK: always greater, never dropped
        }
        bytes_a = bytes_a.wrapping_add(end_a.wrapping_sub(start_a));
        let covered = sb
            .iter()
            .any(|&(start_b, end_b)| !after(start_b, start_a) && !after(end_a, end_b));
        if !covered {
            return -1;
        }
    }
    if bytes_b > bytes_a {
        1
    } else {
        0
    }
}

impl Cake {
    /// `cake_ack_filter`: with a packet just added at the tail of queue `f`, the queued pure ACK it makes
    /// redundant, taken out of the queue.
    fn ack_filter_take(&mut self, tin: usize, f: usize) -> Option<Queued> {
        let aggressive = self.ack_filter == ack::AGGRESSIVE;
        let queue = &self.tins[tin].flows[f].queue;
        if queue.len() < 2 {
            return None;
        }
        let tail = TcpView::parse(&queue.back()?.pkt)?;
        let (tsval, tsecr) = tail.timestamps();
        // The triggering packet need only have ACK set, and not SYN.
        if tail.flags() & (TCP_ACK | TCP_SYN) != TCP_ACK {
            return None;
        }
        let mut elig: Option<(usize, u8)> = None;
        let mut num_found = 0;
        let mut chosen = None;
        for (i, q) in queue.iter().enumerate().take(queue.len() - 1) {
            let Some(c) = TcpView::parse(&q.pkt) else {
                continue;
            };
            if c.version != tail.version
                || c.sport() != tail.sport()
                || c.dport() != tail.dport()
                || c.src != tail.src
                || c.dst != tail.dst
            {
                continue;
            }
            // ECE/CWR changed since the eligible ACK: dropping it would lose that information.
            if let Some((_, flags)) = elig {
                if c.flags() & TCP_ECE_CWR != flags {
                    elig = None;
                    num_found -= 1;
                }
            }
            if !c.may_drop(tsval, tsecr)
                || c.seglen.wrapping_sub(c.hdrlen()) != 0
                || after(c.ack_seq(), tail.ack_seq())
            {
                continue;
            }
            let cmp = sack_compare(&c, &tail);
            if cmp < 0 || (c.ack_seq() == tail.ack_seq() && cmp == 0) {
                continue;
            }
            if elig.is_none() {
                elig = Some((i, c.flags() & TCP_ECE_CWR));
            }
            num_found += 1;
            if num_found > 1 {
                chosen = elig.map(|(i, _)| i);
                break;
            }
        }
        if chosen.is_none() {
            // One eligible ACK: aggressive mode drops it if it sits right before the new packet with the
            // same ECN flags.
            if let Some((i, flags)) = elig {
                if aggressive && i + 2 == queue.len() && flags == tail.flags() & TCP_ECE_CWR {
                    chosen = Some(i);
                }
            }
        }
        let i = chosen?;
        self.tins[tin].flows[f].queue.remove(i)
    }
}

impl Cake {
    /// `cake_enqueue`'s path for a packet queued whole (not GSO, or `no-split-gso`), with the ACK filter.
    fn enqueue_whole(&mut self, pkt: Packet, tin: usize, idx: usize, now: i64, cx: &mut Cx) {
        let len = pkt.len;
        let adjusted_len = self.overhead(&pkt);
        let truesize = len + SKB_OVERHEAD;
        self.tins[tin].flows[idx].queue.push_back(Queued {
            pkt,
            enqueued: now,
            adjusted_len,
            truesize,
        });
        let acked = if self.ack_filter != ack::NONE {
            self.ack_filter_take(tin, idx)
        } else {
            None
        };
        let mut ack_len = 0;
        if let Some(a) = acked {
            ack_len = a.pkt.len;
            let b = &mut self.tins[tin];
            b.ack_drops += 1;
            self.stats.drops += 1;
            b.bytes += ack_len as u64;
            self.buffer_used = self
                .buffer_used
                .wrapping_add(truesize)
                .wrapping_sub(a.truesize);
            if self.rate_flags & FLAG_INGRESS != 0 {
                self.advance_shaper(tin, a.adjusted_len, now, true);
            }
            cx.reduce_backlog(1, ack_len as i64);
            cx.drop_queued(a.pkt, DropReason::AckFilter);
        } else {
            self.stats.qlen += 1;
            self.buffer_used += truesize;
        }
        let delta = len.wrapping_sub(ack_len);
        let b = &mut self.tins[tin];
        b.packets += 1;
        b.bytes = b.bytes.wrapping_add(delta as i32 as i64 as u64);
        b.backlogs[idx] = b.backlogs[idx].wrapping_add(delta);
        b.tin_backlog = b.tin_backlog.wrapping_add(delta);
        self.stats.backlog = self.stats.backlog.wrapping_add(delta);
        self.avg_window_bytes = self
            .avg_window_bytes
            .wrapping_add(delta as i32 as i64 as u64);
    }

    /// The rest of `cake_enqueue` once the packet (or its frames) are queued: the overflow heap, the
    /// capacity estimate, the flow's place in the chains, and drops while the buffer is over its limit.
    fn after_enqueue(
        &mut self,
        tin: usize,
        idx: usize,
        now: i64,
        len: u32,
        cx: &mut Cx,
    ) -> Verdict {
        if self.overflow_timeout != 0 {
            let i = self.heap_pos(tin, idx);
            self.heapify_up(i);
        }
        self.estimate_capacity(now, cx);

        // The flow chain.
        let mode = self.flow_mode;
        let set = self.tins[tin].flows[idx].set;
        if set == FlowSet::None || set == FlowSet::Decaying {
            let dither = (self.random_u32() >> 16) as u16;
            let b = &mut self.tins[tin];
            if set == FlowSet::Decaying {
                b.decaying_flow_count = b.decaying_flow_count.wrapping_sub(1);
            }
            b.move_tail(idx, Chain::New);
            b.flows[idx].set = FlowSet::Sparse;
            b.sparse_flow_count += 1;
            b.flows[idx].deficit = b.flow_quantum_for(idx, mode, dither);
        } else if set == FlowSet::SparseWait {
            let b = &mut self.tins[tin];
            b.flows[idx].set = FlowSet::Bulk;
            b.sparse_flow_count -= 1;
            b.bulk_flow_count += 1;
            b.inc_host_bulk(idx, mode);
        }

        self.buffer_max_used = self.buffer_max_used.max(self.buffer_used);
        if self.buffer_used <= self.buffer_limit {
            return Verdict::Success;
        }
        let (prev_qlen, prev_backlog) = (self.stats.qlen, self.stats.backlog);
        let mut same_flow = false;
        while self.buffer_used > self.buffer_limit {
            match self.drop_longest(now, cx) {
                Some(dropped) => same_flow |= dropped == (tin, idx),
                None if self.overflow_timeout == 0 && self.stats.qlen > 0 => continue,
                None => break,
            }
        }
        let dropped = prev_qlen - self.stats.qlen;
        let dropped_bytes = prev_backlog - self.stats.backlog;
        self.tins[tin].drop_overlimit += dropped;
        if same_flow {
            cx.reduce_backlog(dropped as i64 - 1, dropped_bytes as i64 - len as i64);
            return Verdict::Cn;
        }
        cx.reduce_backlog(dropped as i64, dropped_bytes as i64);
        Verdict::Success
    }
}

impl PeekDequeued for Cake {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }
    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_inner(cx)
    }
}

impl Qdisc for Cake {
    fn kind(&self) -> &'static str {
        "cake"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.stats.qlen == 0 && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `cake_tcf_block`: filters attach to the qdisc, not to its queues.
    fn own_block(&self) -> Option<&Block> {
        Some(&self.block)
    }
    fn own_block_mut(&mut self) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    /// `cake_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let now = cx.now as i64;
        self.last_now = now;
        let (tin, idx) = match self.classify(&mut pkt, cx) {
            Ok(t) => t,
            Err(v) => {
                if v.counts_drop() {
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Unclassified);
                }
                return v;
            }
        };
        let len = pkt.len;
        self.ensure_heap();

        // Keep the shaper's state from going stale.
        if self.tins[tin].tin_backlog == 0 {
            let b = &mut self.tins[tin];
            if b.time_next_packet < now {
                b.time_next_packet = now;
            }
            if self.stats.qlen == 0 {
                if self.time_next_packet < now {
                    self.failsafe_next_packet = now;
                    self.time_next_packet = now;
                } else if self.time_next_packet > now && self.failsafe_next_packet > now {
                    self.stats.overlimits += 1;
                    cx.schedule(self.time_next_packet.min(self.failsafe_next_packet) as Nanos);
                }
            }
        }
        let b = &mut self.tins[tin];
        b.max_skblen = b.max_skblen.max(len);

        if pkt.is_gso() && self.rate_flags & FLAG_SPLIT_GSO != 0 {
            // `split-gso`: the frames queued one by one, so the shaper, COBALT and the flows see frames
            // (and no ACK filter runs: a super-packet carries data). The ancestors, which count one
            // packet of `len` bytes, are told the difference.
            let (mut numsegs, mut slen) = (0u32, 0u32);
            let segs = pkt.gso_segment();
            cx.gso_split += segs.len() as u32 - 1;
            for seg in segs {
                let seg_len = seg.len;
                let adjusted_len = self.overhead(&seg);
                let truesize = seg_len + SKB_OVERHEAD;
                self.tins[tin].flows[idx].queue.push_back(Queued {
                    pkt: seg,
                    enqueued: now,
                    adjusted_len,
                    truesize,
                });
                self.stats.qlen += 1;
                self.buffer_used += truesize;
                self.tins[tin].packets += 1;
                numsegs += 1;
                slen += seg_len;
            }
            let b = &mut self.tins[tin];
            b.bytes += slen as u64;
            b.backlogs[idx] = b.backlogs[idx].wrapping_add(slen);
            b.tin_backlog = b.tin_backlog.wrapping_add(slen);
            self.stats.backlog = self.stats.backlog.wrapping_add(slen);
            self.avg_window_bytes = self.avg_window_bytes.wrapping_add(slen as u64);
            cx.reduce_backlog(1 - numsegs as i64, len as i64 - slen as i64);
        } else {
            self.enqueue_whole(pkt, tin, idx, now, cx);
        }
        self.after_enqueue(tin, idx, now, len, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    /// `cake_reset`: every tin cleared.
    fn reset(&mut self) {
        self.peeked.clear();
        let mut cx = Cx::new(0);
        for c in 0..MAX_TINS {
            self.clear_tin(c, &mut cx);
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `cake_dump`.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Cake(CakeOptions {
            base_rate: Some(self.rate_bps),
            flow_mode: Some(self.flow_mode & flow_mode::MASK),
            rtt: Some(self.interval as u32),
            target: Some(self.target as u32),
            memory: Some(self.buffer_config_limit),
            autorate: Some((self.rate_flags & FLAG_AUTORATE_INGRESS != 0) as u32),
            ingress: Some((self.rate_flags & FLAG_INGRESS != 0) as u32),
            ack_filter: Some(self.ack_filter),
            nat: Some((self.flow_mode & flow_mode::NAT_FLAG != 0) as u32),
            diffserv_mode: Some(self.tin_mode),
            wash: Some((self.rate_flags & FLAG_WASH != 0) as u32),
            overhead: Some(self.rate_overhead as i32),
            raw: self.rate_flags & FLAG_OVERHEAD == 0,
            atm: Some(self.atm_mode),
            mpu: Some(self.rate_mpu as u32),
            split_gso: Some((self.rate_flags & FLAG_SPLIT_GSO != 0) as u32),
            fwmark: Some(self.fwmark_mask),
        })
    }

    /// `cake_change`: every attribute applied, then the tins reconfigured.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Cake(o) = opts else {
            return Err(KernelError::invalid("Invalid qdisc name"));
        };
        self.apply(o);
        let mut cx = Cx::new(now);
        self.reconfigure(&mut cx);
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
        self.rng = splitmix64(&mut s);
    }

    /// `cake_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        let mut tins = [CakeTinXstats::default(); MAX_TINS];
        for (i, t) in tins.iter_mut().enumerate().take(self.tin_cnt) {
            *t = self.tins[self.tin_order[i] as usize].stats();
        }
        Some(Xstats::Cake(Box::new(CakeXstats {
            capacity_estimate: self.avg_peak_bandwidth,
            memory_limit: self.buffer_limit,
            memory_used: self.buffer_max_used,
            avg_netoff: (self.avg_netoff + 0x8000) >> 16,
            max_netlen: self.max_netlen as u32,
            max_adjlen: self.max_adjlen as u32,
            min_netlen: self.min_netlen as u32,
            min_adjlen: self.min_adjlen as u32,
            tin_count: self.tin_cnt,
            tins,
        })))
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

/// The queues as classes (`cake_class_ops`): listed and counted, never configurable.
impl super::FlowClasses for Cake {
    /// `cake_walk`: the queues on a list, as classes `handle:(i·1024 + j + 1)` with tins in `tin_order`.
    fn flow_walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        let mut out = Vec::new();
        for i in 0..self.tin_cnt {
            let tin = self.tin_order[i] as usize;
            let b = &self.tins[tin];
            for (j, f) in b.flows.iter().enumerate() {
                if f.chain.is_none() {
                    continue;
                }
                let stats = QdiscStats {
                    qlen: f.queue.len() as u32,
                    backlog: b.backlogs[j],
                    drops: f.dropped,
                    ..Default::default()
                };
                out.push(ClassInfo {
                    kind: "cake",
                    classid: Handle(self.handle.0 | (i * QUEUES + j + 1) as u32),
                    parent: self.handle,
                    leaf: None,
                    options: None,
                    stats,
                    htb_xstats: None,
                    xstats: Some(Xstats::CakeFlow(self.flow_xstats(tin, j))),
                });
            }
        }
        out
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "cake",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Cake(o) => Ok((Box::new(Cake::new(handle, o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
