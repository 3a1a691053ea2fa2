//! `fq` — the Fair Queue packet scheduler with per-flow pacing, after `net/sched/sch_fq.c` of Linux 6.12
//! (Eric Dumazet). Meant for a host's own traffic: the default qdisc of many distributions and the
//! companion BBR was designed with.
//!
//! # The algorithm
//!
//! A *flow* is a socket: every packet of one socket (`skb->sk`) goes to that socket's flow, whatever its
//! addresses. A packet with no socket — forwarded, a copy — or from an unconnected socket (`TCP_CLOSE`,
//! UDP's `sendto`, ping) is an *orphan*, put in one of `orphan_mask + 1` flows by its flow hash. Flows are
//! made on their first packet, kept in `buckets` hash buckets (red-black trees by socket in the kernel),
//! and collected once they have been empty for three seconds, at most eight at a time, when a lookup
//! passes them (`fq_gc`).
//!
//! Each flow is a queue ordered by departure time. A packet's *time to send* is its `skb->tstamp` when
//! the sender stamped an earliest departure time (a pacing TCP does, from `sk_pacing_rate`), else now;
//! one stamped beyond `horizon` is dropped (`horizon_drop`, the default) or brought back to it
//! (`horizon_cap`). A flow holds at most `flow_limit` packets; each of three priority *bands* (by
//! `skb->priority` through the priomap, as pfifo_fast's) at most `limit` packets.
//!
//! Dequeue serves the bands by weighted round robin (weights 589 824, 196 608 and 65 536 bytes a turn)
//! and, inside a band, its flows by deficit round robin with a `quantum` of credit a round. A flow that
//! was empty and gets a packet joins the band's *new* list, served before the *old* list, with
//! `initial_quantum` of credit when it is new and at least `quantum` if it was idle for `refill_delay`
//! (fq_codel's sparse-flow idea: a flow that sends little goes first). A flow that empties on the new
//! list passes once through the old list before it is detached.
//!
//! Pacing: a flow whose head packet may not leave yet — its time to send, or the flow's own
//! `time_next_packet` — is *throttled*: taken off the lists into a tree ordered by that time, and put
//! back at the tail of its band's old list when the time comes; the qdisc's watchdog is set for the
//! earliest. After each packet of a flow the next one's earliest time is set from a rate: `maxrate`
//! (the qdisc's cap on every flow), and for a packet with no departure time the socket's
//! `sk_pacing_rate` too. A flow at a rate above `low_rate_threshold` is paced a quantum at a time (a
//! packet counts as at least `quantum` bytes, and only once its credit is spent); below it, packet by
//! packet. A packet that leaves more than `ce_threshold` after its time is CE-marked.
//!
//! A *fast path* (`q->internal`) takes a packet due now when nothing else is eligible and fewer than 8
//! wait there, unless `maxrate` is set: it is served before any flow.
//!
//! The qdisc tells a socket whose packet it sees, when pacing is on, that the qdisc paces it
//! (`sk_pacing_status = SK_PACING_FQ`); its TCP then stamps departure times and leaves the waiting to fq
//! instead of pacing internally ([`Cx::pacing_fq`]).
//!
//! # What tclab models and how
//!
//! - Sockets are [`Packet::sk`], the driver's numbers; a socket is never reallocated, so the kernel's
//!   `socket_hash` check (a recycled socket's flow refilled) never fires. The orphan hash is the flow
//!   dissector's keyed hash ([`crate::flow`]) with a secret from the run's seed (`skb_get_hash`).
//! - The kernel's per-bucket red-black trees become one ordered map by (bucket, socket); `fq_gc` looks at
//!   the flows of the looked-up bucket in key order, where the kernel looks along the tree's search path
//!   (the same flows when a bucket holds a few, the usual case with 1 024 buckets).
//! - Time is the caller's `now`; jiffies are milliseconds (HZ = 1000) for the flows' ages and
//!   `refill_delay`, as tclab's other disciplines count them. The watchdog is asked for the exact time
//!   (the kernel's `timer_slack` only widens the hrtimer's window).
//! - `change` checks every option before it applies any: the kernel's `fq_change` applies the valid ones
//!   before it answers EINVAL for a bad `buckets` or `pacing` value.
//! - `tc -s`'s `next_packet_delay` counts from the qdisc's last enqueue or dequeue (a dump has no clock
//!   here), where the kernel counts from the dump.
//! - Drops when `change` lowers `limit` take packets through dequeue, as the kernel's
//!   `qdisc_dequeue_internal` does (counted as sent, and only packets due now).

use super::PeekDequeued;
use super::{Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::{flow_keys, keyed_hash, splitmix64};
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// `FQ_BANDS`.
pub const BANDS: usize = 3;
/// `FQ_MIN_WEIGHT`: a band's weight may not be smaller.
pub const MIN_WEIGHT: i32 = 16384;
/// `sch_default_prio2band`: pfifo_fast's map of `skb->priority` to a band.
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// The bands' default weights (bytes of credit a turn): 9, 3 and 1 × 64 KiB.
pub const DEFAULT_WEIGHTS: [i32; BANDS] = [9 << 16, 3 << 16, 1 << 16];
/// `FQ_GC_MAX`: flows collected per lookup at most.
const GC_MAX: usize = 8;
/// `FQ_GC_AGE` in jiffies (3 s at HZ 1000).
const GC_AGE: u64 = 3000;
const NSEC_PER_SEC: u64 = 1_000_000_000;
const NSEC_PER_USEC: u64 = 1_000;
/// The kernel's `~0UL` for a rate: no limit.
const NO_RATE: u64 = u64::MAX;
/// The kernel's `~0ULL` for `time_next_delayed_flow`: no throttled flow.
const NEVER: u64 = u64::MAX;
pub const DEFAULT_SEED: u64 = 0xf9_5eed;

/// What tc sends (`TCA_FQ_*`): each attribute present or not. Times as the kernel takes them: µs, except
/// `timer_slack` in ns. `dump` fills every one, as `fq_dump` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqOptions {
    /// `TCA_FQ_PLIMIT`: packets per band.
    pub limit: Option<u32>,
    pub flow_limit: Option<u32>,
    pub quantum: Option<u32>,
    pub initial_quantum: Option<u32>,
    /// `TCA_FQ_RATE_ENABLE`: pacing (0 or 1).
    pub rate_enable: Option<u32>,
    /// `TCA_FQ_FLOW_DEFAULT_RATE`: obsolete, accepted and ignored (the kernel logs a warning).
    pub default_rate: Option<u32>,
    /// `TCA_FQ_FLOW_MAX_RATE` in bytes/s; `u32::MAX` for none.
    pub maxrate: Option<u32>,
    pub buckets_log: Option<u32>,
    pub refill_delay: Option<u32>,
    pub orphan_mask: Option<u32>,
    pub low_rate_threshold: Option<u32>,
    pub ce_threshold: Option<u32>,
    pub timer_slack: Option<u32>,
    pub horizon: Option<u32>,
    /// `TCA_FQ_HORIZON_DROP`: 1 drop, 0 cap.
    pub horizon_drop: Option<u8>,
    /// `TCA_FQ_PRIOMAP` (Linux 6.7+): the band of each `skb->priority & 15`.
    pub priomap: Option<[u8; 16]>,
    /// `TCA_FQ_WEIGHTS` (Linux 6.7+): each band's credit a turn.
    pub weights: Option<[i32; BANDS]>,
}

/// `struct tc_fq_qd_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqXstats {
    pub gc_flows: u64,
    /// Always 0 since Linux 6.7 (the old high-priority queue is gone).
    pub highprio_packets: u64,
    /// Always 0 (no longer counted).
    pub tcp_retrans: u64,
    pub throttled: u64,
    pub flows_plimit: u64,
    pub pkts_too_long: u64,
    pub allocation_errors: u64,
    /// Nanoseconds until the earliest throttled flow may send, timer slack included; ≤ 0 when none.
    pub time_next_delayed_flow: i64,
    pub flows: u32,
    pub inactive_flows: u32,
    pub throttled_flows: u32,
    pub unthrottle_latency_ns: u32,
    pub ce_mark: u64,
    pub horizon_drops: u64,
    pub horizon_caps: u64,
    pub fastpath_packets: u64,
    pub band_drops: [u64; BANDS],
    pub band_pkt_count: [u32; BANDS],
}

/// A queued packet and what `fq_skb_cb` keeps with it.
struct Queued {
    pkt: Packet,
    time_to_send: Nanos,
    band: u8,
}

/// Where a flow is: on a band's new or old list, in the throttled tree (its key there), or detached
/// (on no list; `age` in jiffies when it was detached, or made).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum State {
    Listed,
    Throttled((Nanos, u64)),
    Detached { age: u64 },
}

/// `struct fq_flow`: a queue ordered by time to send — a list while packets come in order (the usual
/// case), a tree for the ones that come earlier than the list's tail.
#[derive(Serialize, Deserialize)]
struct Flow {
    #[serde(skip)]
    head: VecDeque<Queued>,
    /// Out-of-order packets by (time to send, arrival): ties leave in arrival order.
    #[serde(skip)]
    t_root: BTreeMap<(Nanos, u64), Queued>,
    qlen: u32,
    credit: i32,
    band: u8,
    state: State,
    time_next_packet: Nanos,
}

impl Flow {
    fn new(credit: i32, age: u64) -> Flow {
        Flow {
            head: VecDeque::new(),
            t_root: BTreeMap::new(),
            qlen: 0,
            credit,
            band: 0,
            state: State::Detached { age },
            time_next_packet: 0,
        }
    }

    /// `flow_queue_add`.
    fn add(&mut self, q: Queued, seq: u64) {
        if self
            .head
            .back()
            .is_none_or(|t| q.time_to_send >= t.time_to_send)
        {
            self.head.push_back(q);
        } else {
            self.t_root.insert((q.time_to_send, seq), q);
        }
    }

    /// `fq_peek`: the earlier of the list's head and the tree's first; true if it is the tree's.
    fn peek(&self) -> Option<(&Queued, bool)> {
        match (self.t_root.values().next(), self.head.front()) {
            (None, h) => h.map(|h| (h, false)),
            (Some(t), None) => Some((t, true)),
            (Some(t), Some(h)) if t.time_to_send < h.time_to_send => Some((t, true)),
            (_, Some(h)) => Some((h, false)),
        }
    }

    /// `fq_erase_head` of what `peek` answered.
    fn take(&mut self, from_tree: bool) -> Option<Queued> {
        if from_tree {
            self.t_root.pop_first().map(|(_, q)| q)
        } else {
            self.head.pop_front()
        }
    }
}

/// `struct fq_perband_flows`.
#[derive(Default, Serialize, Deserialize)]
struct Band {
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    credit: i32,
    quantum: i32,
}

/// The fast-path flow (`q->internal`): not hashed, never throttled.
#[derive(Default)]
struct Internal {
    head: VecDeque<Queued>,
    t_root: BTreeMap<(Nanos, u64), Queued>,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the flows come with it (their credit,
/// age, pacing time and place in the lists and the garbage collector's trees), not their packets.
#[derive(Serialize, Deserialize)]
pub struct Fq {
    // Parameters.
    limit: u32,
    flow_plimit: u32,
    quantum: u32,
    initial_quantum: u32,
    /// Jiffies.
    flow_refill_delay: u64,
    /// Bytes/s; `NO_RATE` for none.
    flow_max_rate: u64,
    /// Nanoseconds.
    ce_threshold: u64,
    horizon: u64,
    orphan_mask: u32,
    low_rate_threshold: u32,
    rate_enable: bool,
    fq_trees_log: u32,
    horizon_drop: bool,
    prio2band: [u8; 16],
    timer_slack: u32,
    secret: [u64; 2],

    // Variables.
    band_nr: usize,
    bands: [Band; BANDS],
    #[serde(skip)]
    internal: Internal,
    /// Every flow, by index; `None` for a collected one (its slot reused first).
    flows: Vec<Option<Flow>>,
    free: Vec<u32>,
    /// The hash buckets' trees: (bucket, key) → flow.
    index: BTreeMap<(u32, u64), u32>,
    /// Throttled flows by (time_next_packet, order of throttling).
    delayed: BTreeMap<(Nanos, u64), u32>,
    time_next_delayed_flow: Nanos,
    unthrottle_latency_ns: u64,
    band_pkt_count: [u32; BANDS],
    nflows: u32,
    inactive_flows: u32,
    throttled_flows: u32,
    seq: u64,
    /// The time of the latest call (ages at `change`, `next_packet_delay`).
    last_now: Nanos,
    x: FqXstats,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
}

/// Milliseconds: the kernel's jiffies at HZ 1000.
fn jiffies(now: Nanos) -> u64 {
    now / 1_000_000
}

/// `time_after(a, b)`.
fn time_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

/// `hash_64(val, bits)` (the golden-ratio multiplicative hash `hash_ptr` uses).
fn hash_64(val: u64, bits: u32) -> u32 {
    (val.wrapping_mul(0x61c8_8646_80b5_83eb) >> (64 - bits)) as u32
}

/// `usecs_to_jiffies` at HZ 1000: rounded up.
fn usecs_to_jiffies(us: u32) -> u64 {
    us.div_ceil(1000) as u64
}

impl Fq {
    /// `fq_init`: the defaults, then the options.
    pub fn new(o: &FqOptions, env: &DevEnv) -> Result<Fq, KernelError> {
        let mtu = env.psched_mtu().clamp(1, 1 << 20);
        let mut bands: [Band; BANDS] = Default::default();
        for (b, w) in bands.iter_mut().zip(DEFAULT_WEIGHTS) {
            b.quantum = w;
        }
        let mut q = Fq {
            limit: 10000,
            flow_plimit: 100,
            quantum: (2 * mtu).clamp(256, 1 << 20),
            initial_quantum: (10 * mtu).min(1 << 20),
            flow_refill_delay: 40,
            flow_max_rate: NO_RATE,
            ce_threshold: NSEC_PER_USEC * u32::MAX as u64,
            horizon: 10 * NSEC_PER_SEC,
            orphan_mask: 1024 - 1,
            low_rate_threshold: 550000 / 8,
            rate_enable: true,
            fq_trees_log: 10,
            horizon_drop: true,
            prio2band: DEFAULT_PRIOMAP,
            timer_slack: 10_000,
            secret: [0; 2],
            band_nr: 0,
            bands,
            internal: Internal::default(),
            flows: Vec::new(),
            free: Vec::new(),
            index: BTreeMap::new(),
            delayed: BTreeMap::new(),
            time_next_delayed_flow: NEVER,
            unthrottle_latency_ns: 0,
            band_pkt_count: [0; BANDS],
            nflows: 0,
            inactive_flows: 0,
            throttled_flows: 0,
            seq: 0,
            last_now: 0,
            x: FqXstats::default(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        };
        q.validate(o)?;
        q.apply(o);
        q.set_seed(DEFAULT_SEED);
        Ok(q)
    }

    /// The checks of `fq_change` (and of its netlink policy) that can refuse an option.
    fn validate(&self, o: &FqOptions) -> Result<(), KernelError> {
        // `NLA_POLICY_FULL_RANGE(NLA_U32, { .max = 1 << 20 })`, parsed without an extack.
        if o.initial_quantum.is_some_and(|v| v > 1 << 20) {
            return Err(KernelError::new(Errno::Range));
        }
        // `quantum > 0 && quantum <= (1 << 20)`, else refused (not clamped as fq_codel's is).
        if o.quantum.is_some_and(|v| v == 0 || v > 1 << 20) {
            return Err(KernelError::invalid("sch_fq: invalid quantum"));
        }
        if o.buckets_log.is_some_and(|v| !(1..=18).contains(&v)) {
            return Err(KernelError::new(Errno::Invalid));
        }
        if o.rate_enable.is_some_and(|v| v > 1) {
            return Err(KernelError::new(Errno::Invalid));
        }
        if let Some(m) = o.priomap {
            if let Some((i, b)) = m.iter().enumerate().find(|(_, b)| **b as usize >= BANDS) {
                return Err(KernelError::msg(
                    Errno::Invalid,
                    format!("FQ priomap field {i} maps to a too high band {b}"),
                ));
            }
        }
        if let Some(w) = o.weights {
            if let Some(v) = w.iter().find(|v| **v < MIN_WEIGHT) {
                return Err(KernelError::msg(
                    Errno::Invalid,
                    format!("Weight {v} less that minimum allowed {MIN_WEIGHT}"),
                ));
            }
        }
        Ok(())
    }

    /// `fq_change` after its checks.
    fn apply(&mut self, o: &FqOptions) {
        if let Some(v) = o.limit {
            self.limit = v;
        }
        if let Some(v) = o.flow_limit {
            self.flow_plimit = v;
        }
        if let Some(v) = o.quantum {
            self.quantum = v;
        }
        if let Some(v) = o.initial_quantum {
            self.initial_quantum = v;
        }
        if let Some(v) = o.maxrate {
            self.flow_max_rate = if v == u32::MAX { NO_RATE } else { v as u64 };
        }
        if let Some(v) = o.low_rate_threshold {
            self.low_rate_threshold = v;
        }
        if let Some(v) = o.rate_enable {
            self.rate_enable = v == 1;
        }
        if let Some(v) = o.refill_delay {
            self.flow_refill_delay = usecs_to_jiffies(v);
        }
        if let Some(m) = o.priomap {
            self.prio2band = m;
        }
        if let Some(w) = o.weights {
            for (b, w) in self.bands.iter_mut().zip(w) {
                b.quantum = w;
            }
        }
        if let Some(v) = o.orphan_mask {
            self.orphan_mask = v;
        }
        if let Some(v) = o.ce_threshold {
            self.ce_threshold = NSEC_PER_USEC * v as u64;
        }
        if let Some(v) = o.timer_slack {
            self.timer_slack = v;
        }
        if let Some(v) = o.horizon {
            self.horizon = NSEC_PER_USEC * v as u64;
        }
        if let Some(v) = o.horizon_drop {
            self.horizon_drop = v != 0;
        }
        if let Some(log) = o.buckets_log {
            self.resize(log);
        }
    }

    /// `fq_resize`/`fq_rehash`: the flows into `1 << log` buckets; flows due for collection are freed.
    fn resize(&mut self, log: u32) {
        if log == self.fq_trees_log {
            return;
        }
        self.fq_trees_log = log;
        let old = std::mem::take(&mut self.index);
        let now_j = jiffies(self.last_now);
        for ((_, key), i) in old {
            if self.gc_candidate(i, now_j) {
                self.collect(i);
                continue;
            }
            self.index.insert((hash_64(key, log), key), i);
        }
    }

    fn flow(&self, i: u32) -> &Flow {
        self.flows[i as usize].as_ref().expect("a live flow")
    }
    fn flow_mut(&mut self, i: u32) -> &mut Flow {
        self.flows[i as usize].as_mut().expect("a live flow")
    }

    /// `fq_gc_candidate`: detached for more than `FQ_GC_AGE`.
    fn gc_candidate(&self, i: u32, now_j: u64) -> bool {
        matches!(self.flow(i).state,
            State::Detached { age } if time_after(now_j, age.wrapping_add(GC_AGE)))
    }

    /// Free a detached flow's slot (counters as `fq_gc` keeps them).
    fn collect(&mut self, i: u32) {
        self.flows[i as usize] = None;
        self.free.push(i);
        self.nflows -= 1;
        self.inactive_flows -= 1;
        self.x.gc_flows += 1;
    }

    /// `fq_gc`: collect up to 8 flows of `bucket` that have been detached for 3 s, stopping at `key`'s.
    fn gc(&mut self, bucket: u32, key: u64, now_j: u64) {
        let mut found = Vec::new();
        for (&(_, k), &i) in self.index.range((bucket, 0)..=(bucket, u64::MAX)) {
            if k == key {
                break;
            }
            if self.gc_candidate(i, now_j) {
                found.push((k, i));
                if found.len() == GC_MAX {
                    break;
                }
            }
        }
        for (k, i) in found {
            self.index.remove(&(bucket, k));
            self.collect(i);
        }
    }

    /// `fq_fastpath_check`: may the packet skip the flows?
    fn fastpath_ok(&self, tts: Nanos, now: Nanos) -> bool {
        if tts > now {
            return false;
        }
        if self.stats.qlen != 0 {
            if self.nflows != self.inactive_flows + self.throttled_flows {
                return false;
            }
            if self.internal_qlen() >= 8 {
                return false;
            }
            if self.time_next_delayed_flow <= now {
                return false;
            }
        }
        // (A non-TCP socket with SO_MAX_PACING_RATE would also be refused here; the simulated sockets
        // that set a pacing rate are TCP.)
        self.flow_max_rate == NO_RATE
    }

    fn internal_qlen(&self) -> u32 {
        (self.internal.head.len() + self.internal.t_root.len()) as u32
    }

    /// `fq_classify`: the flow index, or `None` for the fast path. Tells the socket it is paced here.
    fn classify(&mut self, pkt: &Packet, tts: Nanos, cx: &mut Cx) -> Option<u32> {
        let now = cx.now;
        let key = if pkt.sk == 0 {
            let h = keyed_hash(self.secret, &flow_keys(pkt)) & self.orphan_mask;
            ((h as u64) << 1) | 1
        } else {
            (pkt.sk as u64) << 1
        };
        let own_socket = pkt.sk != 0;
        if self.fastpath_ok(tts, now) {
            self.x.fastpath_packets += 1;
            if own_socket && self.rate_enable {
                cx.pacing_fq = true;
            }
            return None;
        }
        let bucket = hash_64(key, self.fq_trees_log);
        let now_j = jiffies(now);
        self.gc(bucket, key, now_j);
        if let Some(&i) = self.index.get(&(bucket, key)) {
            return Some(i);
        }
        let f = Flow::new(self.initial_quantum as i32, now_j | 1);
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(f);
                i
            }
            None => {
                self.flows.push(Some(f));
                self.flows.len() as u32 - 1
            }
        };
        if own_socket && self.rate_enable {
            cx.pacing_fq = true;
        }
        self.index.insert((bucket, key), i);
        self.nflows += 1;
        self.inactive_flows += 1;
        Some(i)
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// `fq_flow_set_throttled`.
    fn set_throttled(&mut self, i: u32) {
        let seq = self.next_seq();
        let f = self.flow_mut(i);
        let key = (f.time_next_packet, seq);
        f.state = State::Throttled(key);
        self.delayed.insert(key, i);
        self.throttled_flows += 1;
        self.x.throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(key.0);
    }

    /// `fq_flow_unset_throttled`: back to the tail of its band's old list.
    fn unset_throttled(&mut self, i: u32) {
        if let State::Throttled(key) = self.flow(i).state {
            self.delayed.remove(&key);
        }
        self.throttled_flows -= 1;
        self.add_tail(i, false);
    }

    /// `fq_flow_add_tail`.
    fn add_tail(&mut self, i: u32, new: bool) {
        let f = self.flow_mut(i);
        f.state = State::Listed;
        let b = &mut self.bands[f.band as usize];
        if new {
            b.new_flows.push_back(i);
        } else {
            b.old_flows.push_back(i);
        }
    }

    /// `fq_check_throttled`: flows whose time has come go back to their lists.
    fn check_throttled(&mut self, now: Nanos) {
        if self.time_next_delayed_flow > now {
            return;
        }
        let sample = now - self.time_next_delayed_flow;
        self.unthrottle_latency_ns -= self.unthrottle_latency_ns >> 3;
        self.unthrottle_latency_ns += sample >> 3;
        self.time_next_delayed_flow = NEVER;
        while let Some((&(t, _), &i)) = self.delayed.first_key_value() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.unset_throttled(i);
        }
    }

    /// `fq_dequeue`.
    fn dequeue_inner(&mut self, cx: &mut Cx) -> Option<Packet> {
        if self.stats.qlen == 0 {
            return None;
        }
        let internal = match (
            self.internal.t_root.values().next(),
            self.internal.head.front(),
        ) {
            (Some(t), Some(h)) => Some(t.time_to_send < h.time_to_send),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        };
        if let Some(from_tree) = internal {
            let q = if from_tree {
                self.internal.t_root.pop_first().map(|(_, q)| q)
            } else {
                self.internal.head.pop_front()
            }?;
            self.stats.count_unqueued(&q.pkt);
            self.stats.count_sent(&q.pkt);
            return Some(q.pkt);
        }
        let now = cx.now;
        self.last_now = now;
        self.check_throttled(now);
        let mut retry = 0;
        let (i, q) = 'found: loop {
            let band = &self.bands[self.band_nr];
            let head = if band.credit <= 0 {
                None
            } else if let Some(&i) = band.new_flows.front() {
                Some((i, true))
            } else {
                band.old_flows.front().map(|&i| (i, false))
            };
            let Some((i, on_new)) = head else {
                // The next band with credit, each refilled by its weight on the way.
                loop {
                    retry += 1;
                    if retry > BANDS {
                        if self.time_next_delayed_flow != NEVER {
                            cx.schedule(self.time_next_delayed_flow);
                        }
                        return None;
                    }
                    self.band_nr = (self.band_nr + 1) % BANDS;
                    let b = &mut self.bands[self.band_nr];
                    b.credit = (b.credit + b.quantum).min(b.quantum);
                    if b.credit > 0 {
                        break;
                    }
                    retry = 0;
                }
                continue;
            };
            retry = 0;
            let quantum = self.quantum as i32;
            let band_nr = self.band_nr;
            let pop = |s: &mut Self| {
                let b = &mut s.bands[band_nr];
                if on_new {
                    b.new_flows.pop_front();
                } else {
                    b.old_flows.pop_front();
                }
            };
            let f = self.flow_mut(i);
            if f.credit <= 0 {
                f.credit += quantum;
                pop(self);
                self.add_tail(i, false);
                continue;
            }
            let Some((tts, from_tree)) = f.peek().map(|(h, t)| (h.time_to_send, t)) else {
                pop(self);
                // Force a pass through the old flows to prevent starvation.
                if on_new {
                    self.add_tail(i, false);
                } else {
                    self.flow_mut(i).state = State::Detached {
                        age: jiffies(now) | 1,
                    };
                }
                continue;
            };
            let time_next_packet = tts.max(f.time_next_packet);
            if now < time_next_packet {
                f.time_next_packet = time_next_packet;
                pop(self);
                self.set_throttled(i);
                continue;
            }
            let mut q = f.take(from_tree).expect("the peeked packet");
            f.qlen -= 1;
            if f.qlen == 0 {
                self.inactive_flows += 1;
            }
            if now
                .wrapping_sub(time_next_packet)
                .wrapping_sub(self.ce_threshold) as i64
                > 0
            {
                super::codel_impl::set_ce(&mut q.pkt);
                self.x.ce_mark += 1;
            }
            self.band_pkt_count[q.band as usize] -= 1;
            break 'found (i, q);
        };
        self.stats.count_unqueued(&q.pkt);
        let mut plen = q.pkt.len;
        let band_nr = self.band_nr;
        self.bands[band_nr].credit -= plen as i32;
        let (rate_enable, max_rate, low, quantum) = (
            self.rate_enable,
            self.flow_max_rate,
            self.low_rate_threshold as u64,
            self.quantum,
        );
        let f = self.flow_mut(i);
        f.credit -= plen as i32;
        let mut too_long = false;
        if rate_enable {
            let mut rate = max_rate;
            let mut pace = true;
            // With a departure time from the sender, only the qdisc's maxrate paces the flow here.
            if q.pkt.tstamp == 0 {
                if q.pkt.sk != 0 && q.pkt.pacing_rate != 0 {
                    rate = rate.min(q.pkt.pacing_rate);
                }
                if rate <= low {
                    f.credit = 0;
                } else {
                    plen = plen.max(quantum);
                    pace = f.credit <= 0;
                }
            }
            if pace && rate != NO_RATE {
                // (A rate of 0 leaves the length in ns, which the clamp below turns into a second.)
                let byte_ns = plen as u64 * NSEC_PER_SEC;
                let mut len = byte_ns.checked_div(rate).unwrap_or(byte_ns);
                // The socket's rate may change: never hold a flow more than a second.
                if len > NSEC_PER_SEC {
                    len = NSEC_PER_SEC;
                    too_long = true;
                }
                // Late dequeues (timer drift) are made up for, by half a packet's time at most.
                if f.time_next_packet != 0 {
                    len -= (len / 2).min(now.saturating_sub(f.time_next_packet));
                }
                f.time_next_packet = now + len;
            }
        }
        if too_long {
            self.x.pkts_too_long += 1;
        }
        self.stats.count_sent(&q.pkt);
        Some(q.pkt)
    }

    /// Drop everything queued (`fq_reset`): flows freed, counters of the queue zeroed.
    fn purge(&mut self) {
        self.internal = Internal::default();
        self.flows.clear();
        self.free.clear();
        self.index.clear();
        self.delayed.clear();
        for b in &mut self.bands {
            b.new_flows.clear();
            b.old_flows.clear();
        }
        self.band_pkt_count = [0; BANDS];
        self.nflows = 0;
        self.inactive_flows = 0;
        self.throttled_flows = 0;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn options(&self) -> FqOptions {
        FqOptions {
            limit: Some(self.limit),
            flow_limit: Some(self.flow_plimit),
            quantum: Some(self.quantum),
            initial_quantum: Some(self.initial_quantum),
            rate_enable: Some(self.rate_enable as u32),
            default_rate: None,
            maxrate: Some(self.flow_max_rate.min(u32::MAX as u64) as u32),
            buckets_log: Some(self.fq_trees_log),
            // `jiffies_to_usecs`.
            refill_delay: Some((self.flow_refill_delay * 1000).min(u32::MAX as u64) as u32),
            orphan_mask: Some(self.orphan_mask),
            low_rate_threshold: Some(self.low_rate_threshold),
            ce_threshold: Some((self.ce_threshold / NSEC_PER_USEC) as u32),
            timer_slack: Some(self.timer_slack),
            horizon: Some((self.horizon / NSEC_PER_USEC) as u32),
            horizon_drop: Some(self.horizon_drop as u8),
            priomap: Some(self.prio2band),
            weights: Some([
                self.bands[0].quantum,
                self.bands[1].quantum,
                self.bands[2].quantum,
            ]),
        }
    }
}

impl PeekDequeued for Fq {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }
    fn dequeue_fresh(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_inner(cx)
    }
}

impl Qdisc for Fq {
    fn kind(&self) -> &'static str {
        "fq"
    }

    fn save(&self) -> Option<Vec<u8>> {
        let empty =
            |head: &VecDeque<Queued>, tree: &BTreeMap<_, _>| head.is_empty() && tree.is_empty();
        (self.stats.qlen == 0
            && self.peeked.get().is_none()
            && empty(&self.internal.head, &self.internal.t_root)
            && self
                .flows
                .iter()
                .flatten()
                .all(|f| empty(&f.head, &f.t_root)))
        .then(|| crate::snapshot::save(self))
        .flatten()
    }

    /// `fq_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        let now = cx.now;
        self.last_now = now;
        let band = self.prio2band[(pkt.priority & 15) as usize];
        if self.band_pkt_count[band as usize] >= self.limit {
            self.x.band_drops[band as usize] += 1;
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::TailDrop);
            return Verdict::Drop;
        }
        let tts = if pkt.tstamp == 0 {
            now
        } else {
            if pkt.tstamp as i64 > now.wrapping_add(self.horizon) as i64 {
                if self.horizon_drop {
                    self.x.horizon_drops += 1;
                    self.stats.drops += 1;
                    cx.drop_arriving(pkt, DropReason::Overlimit);
                    return Verdict::Drop;
                }
                self.x.horizon_caps += 1;
                pkt.tstamp = now + self.horizon;
            }
            pkt.tstamp
        };
        pkt.enqueue_ns = now;
        let seq = self.next_seq();
        let Some(i) = self.classify(&pkt, tts, cx) else {
            self.stats.count_queued(&pkt);
            let q = Queued {
                pkt,
                time_to_send: tts,
                band,
            };
            let int = &mut self.internal;
            if int.head.back().is_none_or(|t| tts >= t.time_to_send) {
                int.head.push_back(q);
            } else {
                int.t_root.insert((tts, seq), q);
            }
            return Verdict::Success;
        };
        let (plimit, refill, quantum) = (self.flow_plimit, self.flow_refill_delay, self.quantum);
        if self.flow(i).qlen >= plimit {
            self.x.flows_plimit += 1;
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::TailDrop);
            return Verdict::Drop;
        }
        let f = self.flow_mut(i);
        let detached = match f.state {
            State::Detached { age } => {
                if time_after(jiffies(now), age.wrapping_add(refill)) {
                    f.credit = f.credit.max(quantum as i32);
                }
                true
            }
            _ => false,
        };
        f.band = band;
        if detached {
            self.add_tail(i, true);
        }
        self.band_pkt_count[band as usize] += 1;
        self.stats.count_queued(&pkt);
        let f = self.flows[i as usize].as_mut().expect("a live flow");
        if f.qlen == 0 {
            self.inactive_flows -= 1;
        }
        f.qlen += 1;
        f.add(
            Queued {
                pkt,
                time_to_send: tts,
                band,
            },
            seq,
        );
        Verdict::Success
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    fn reset(&mut self) {
        self.peeked.clear();
        self.purge();
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Fq(self.options())
    }

    /// `fq_change`: the options, then packets over the new limit dropped through dequeue.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Fq(o) = opts else {
            return Err(KernelError::invalid("Invalid qdisc name"));
        };
        self.validate(o)?;
        self.last_now = now;
        self.apply(o);
        let mut cx = Cx::new(now);
        while self.stats.qlen > self.limit {
            if self.dequeue_peeked(&mut cx).is_none() {
                break;
            }
        }
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
    }

    /// `fq_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        let mut x = self.x;
        x.flows = self.nflows;
        x.inactive_flows = self.inactive_flows;
        x.throttled_flows = self.throttled_flows;
        x.unthrottle_latency_ns = self.unthrottle_latency_ns.min(u32::MAX as u64) as u32;
        x.band_pkt_count = self.band_pkt_count;
        // The kernel reports `time_next_delayed_flow + timer_slack - now`, which with none throttled
        // (~0) is negative on any running system; tc prints it only when positive.
        x.time_next_delayed_flow = if self.time_next_delayed_flow == NEVER {
            -1
        } else {
            (self.time_next_delayed_flow + self.timer_slack as u64) as i64 - self.last_now as i64
        };
        Some(Xstats::Fq(x))
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "fq",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Fq(o) => Ok((Box::new(Fq::new(o, env)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
