//! `hhf` — Heavy-Hitter Filter, after `net/sched/sch_hhf.c` (Terry Lam, Nandita Dukkipati).
//!
//! # The algorithm
//!
//! HHF separates the few flows that carry most of the bytes — heavy hitters — from everything else, and
//! serves the two groups by weighted deficit round robin: one bucket for the heavy hitters, one for the
//! rest, the rest weighted `non_hh_weight` (2) quanta to the heavy hitters' one. Short flows (a page
//! load, a DNS answer, an ACK stream) thus never wait behind a bulk transfer, without the per-flow state
//! of fq_codel: HHF keeps state only for the heavy hitters.
//!
//! Heavy hitters are found by a *multi-stage filter*: four arrays of 1024 byte counters, each indexed by
//! 10 bits of the packet's flow hash (the fourth by the XOR of the three others and the hash's top bits).
//! Every packet adds its length to its four counters; a flow whose four counters all exceed `admit_bytes`
//! (128 KB) within one `reset_timeout` (40 ms: so the default catches flows above 25 Mbit/s) is a heavy
//! hitter and enters the exact-match table T (1024 chains, at most `hh_limit` 2048 entries); a flow not
//! seen for `evict_timeout` (1 s) leaves it. Two refinements from the paper: *shielding* — a flow in T
//! no longer touches the counters — and *conservative update* — each counter is raised only to the
//! minimum of the four plus the packet, so light flows sharing a counter with a heavy one do not inflate
//! it. The arrays are zeroed lazily (a valid bit per counter) every `reset_timeout`.
//!
//! The buckets behave as fq_codel's flows: a non-heavy bucket that empties re-enters on the *new* list
//! and is served first; the heavy bucket always goes to the *old* list. Over `limit` packets, the head
//! of the heavy bucket is dropped first.
//!
//! # What tclab models and how
//!
//! - Time is the kernel's jiffies at HZ = 1000 (`now` in milliseconds, wrapping 32-bit), as the timeouts
//!   are configured in jiffies (`usecs_to_jiffies`, rounding up).
//! - The flow hash is `skb_get_hash_perturb` with a boot-random key; tclab keys the flow keys with a
//!   secret from the run's seed.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::{flow_keys, keyed_hash, splitmix64};
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

const HH_FLOWS_CNT: usize = 1024;
const HHF_ARRAYS_CNT: usize = 4;
const HHF_ARRAYS_LEN: usize = 1024;
const HHF_BIT_MASK_LEN: u32 = 10;
const HHF_BIT_MASK: u32 = 0x3ff;
const HH: usize = 0;
const NON_HH: usize = 1;
pub const DEFAULT_SEED: u64 = 0x4866_5eed;

/// What tc sends (`TCA_HHF_*`); times in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HhfOptions {
    pub limit: Option<u32>,
    pub quantum: Option<u32>,
    pub hh_limit: Option<u32>,
    pub reset_timeout: Option<u32>,
    pub admit_bytes: Option<u32>,
    pub evict_timeout: Option<u32>,
    pub non_hh_weight: Option<u32>,
}

/// `struct tc_hhf_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HhfXstats {
    pub drop_overlimit: u32,
    pub hh_overlimit: u32,
    pub hh_tot_count: u32,
    pub hh_cur_count: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum List {
    New,
    Old,
}

#[derive(Default, Serialize, Deserialize)]
struct Bucket {
    #[serde(skip)]
    packets: VecDeque<Packet>,
    deficit: i32,
    on: Option<List>,
}

/// A heavy hitter in table T.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct HhFlow {
    hash: u32,
    hit: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the heavy-hitter table, the counting
/// arrays and their reset clock, the buckets' deficits and lists.
#[derive(Serialize, Deserialize)]
pub struct Hhf {
    buckets: [Bucket; 2],
    /// The order of the bucket list: new first, then old.
    new_list: VecDeque<usize>,
    old_list: VecDeque<usize>,
    limit: u32,
    quantum: u32,
    hh_flows_limit: u32,
    /// Jiffies.
    reset_timeout: u32,
    admit_bytes: u32,
    evict_timeout: u32,
    non_hh_weight: u32,
    hh_flows: Vec<Vec<HhFlow>>,
    hh_overlimit: u32,
    hh_total: u32,
    hh_current: u32,
    #[serde(with = "crate::snapshot::grid")]
    arrays: [[u32; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT],
    #[serde(with = "crate::snapshot::grid")]
    valid: [[bool; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT],
    arrays_reset: u32,
    drop_overlimit: u32,
    stats: QdiscStats,
    secret: [u64; 2],
}

/// `usecs_to_jiffies` at HZ 1000: rounded up.
fn us_to_jiffies(us: u32) -> u32 {
    us.div_ceil(1000)
}

fn jiffies(now: Nanos) -> u32 {
    (now / 1_000_000) as u32
}

/// `hhf_time_before(a, b)`.
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl Hhf {
    /// `hhf_init`.
    pub fn new(o: &HhfOptions, env: &DevEnv, now: Nanos) -> Result<Hhf, KernelError> {
        let mut q = Hhf {
            buckets: [Bucket::default(), Bucket::default()],
            new_list: VecDeque::new(),
            old_list: VecDeque::new(),
            limit: 1000,
            quantum: env.psched_mtu().clamp(256, 1 << 20),
            hh_flows_limit: 2 * HH_FLOWS_CNT as u32,
            reset_timeout: 40,
            admit_bytes: 131072,
            evict_timeout: 1000,
            non_hh_weight: 2,
            hh_flows: vec![Vec::new(); HH_FLOWS_CNT],
            hh_overlimit: 0,
            hh_total: 0,
            hh_current: 0,
            arrays: [[0; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT],
            valid: [[false; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT],
            arrays_reset: jiffies(now),
            drop_overlimit: 0,
            stats: QdiscStats::default(),
            secret: [0; 2],
        };
        q.apply(o, &mut Cx::new(now))?;
        q.set_seed(DEFAULT_SEED);
        Ok(q)
    }

    /// `hhf_change`: validated whole first, then applied; a lowered limit drops from the head.
    fn apply(&mut self, o: &HhfOptions, cx: &mut Cx) -> Result<(), KernelError> {
        if o.hh_limit.is_some_and(|v| v > 2 * HH_FLOWS_CNT as u32) {
            return Err(KernelError::msg(
                Errno::Range,
                "Attribute failed policy validation",
            ));
        }
        let quantum = o.quantum.map_or(self.quantum, |q| q.max(256));
        let weight = o.non_hh_weight.unwrap_or(self.non_hh_weight);
        let non_hh = quantum as u64 * weight as u64;
        if non_hh == 0 || non_hh > i32::MAX as u64 {
            return Err(KernelError::new(Errno::Invalid));
        }
        if let Some(l) = o.limit {
            self.limit = l;
        }
        self.quantum = quantum;
        self.non_hh_weight = weight;
        if let Some(v) = o.hh_limit {
            self.hh_flows_limit = v;
        }
        if let Some(us) = o.reset_timeout {
            self.reset_timeout = us_to_jiffies(us);
        }
        if let Some(v) = o.admit_bytes {
            self.admit_bytes = v;
        }
        if let Some(us) = o.evict_timeout {
            self.evict_timeout = us_to_jiffies(us);
        }
        while self.stats.qlen > self.limit {
            match self.dequeue_inner() {
                Some(p) => {
                    cx.reduce_backlog(1, p.len as i64);
                    cx.drop_queued(p, DropReason::Overlimit);
                }
                None => break,
            }
        }
        Ok(())
    }

    /// `seek_list`: the heavy hitter `hash` in its chain, expired entries removed on the way (all but
    /// the chain's last, kept for reuse).
    fn seek(&mut self, pos: usize, hash: u32, now: u32) -> Option<usize> {
        let mut i = 0;
        while i < self.hh_flows[pos].len() {
            let f = self.hh_flows[pos][i];
            if before(f.hit.wrapping_add(self.evict_timeout), now) {
                if i + 1 == self.hh_flows[pos].len() {
                    return None;
                }
                self.hh_flows[pos].remove(i);
                self.hh_current -= 1;
                continue;
            }
            if f.hash == hash {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// `alloc_new_hh`: an expired entry of the chain, or a new one within `hh_limit`.
    fn alloc(&mut self, pos: usize, now: u32) -> Option<usize> {
        let evict = self.evict_timeout;
        if let Some(i) = self.hh_flows[pos]
            .iter()
            .position(|f| before(f.hit.wrapping_add(evict), now))
        {
            return Some(i);
        }
        if self.hh_current >= self.hh_flows_limit {
            self.hh_overlimit += 1;
            return None;
        }
        self.hh_current += 1;
        self.hh_flows[pos].push(HhFlow { hash: 0, hit: 0 });
        Some(self.hh_flows[pos].len() - 1)
    }

    /// `hhf_classify`: the heavy hitters' bucket or the others'.
    fn classify(&mut self, pkt: &Packet, now_ns: Nanos) -> usize {
        let now = jiffies(now_ns);
        if before(self.arrays_reset.wrapping_add(self.reset_timeout), now) {
            self.valid = [[false; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT];
            self.arrays_reset = now;
        }
        let hash = keyed_hash(self.secret, &flow_keys(pkt));
        let pos = (hash & HHF_BIT_MASK) as usize;
        if let Some(i) = self.seek(pos, hash, now) {
            self.hh_flows[pos][i].hit = now;
            return HH;
        }
        // The multi-stage filter: three 10-bit chunks of the hash, and their XOR with the rest.
        let mut filter_pos = [0usize; HHF_ARRAYS_CNT];
        let (mut tmp, mut xorsum) = (hash, 0u32);
        for p in filter_pos.iter_mut().take(HHF_ARRAYS_CNT - 1) {
            *p = (tmp & HHF_BIT_MASK) as usize;
            xorsum ^= *p as u32;
            tmp >>= HHF_BIT_MASK_LEN;
        }
        filter_pos[HHF_ARRAYS_CNT - 1] = (xorsum ^ tmp) as usize & (HHF_ARRAYS_LEN - 1);
        let mut min = u32::MAX;
        for (i, &p) in filter_pos.iter().enumerate() {
            if !self.valid[i][p] {
                self.arrays[i][p] = 0;
                self.valid[i][p] = true;
            }
            min = min.min(self.arrays[i][p].wrapping_add(pkt.len));
        }
        if min > self.admit_bytes {
            // A new heavy hitter: shielded from the counters from now on.
            let Some(i) = self.alloc(pos, now) else {
                return NON_HH;
            };
            self.hh_flows[pos][i] = HhFlow { hash, hit: now };
            self.hh_total += 1;
            return HH;
        }
        // Conservative update.
        for (i, &p) in filter_pos.iter().enumerate() {
            if self.arrays[i][p] < min {
                self.arrays[i][p] = min;
            }
        }
        NON_HH
    }

    fn weight(&self, b: usize) -> i32 {
        let w = if b == HH { 1 } else { self.non_hh_weight };
        (w * self.quantum) as i32
    }

    /// `hhf_drop`: the heavy hitters' head first.
    fn drop_one(&mut self, cx: &mut Cx) -> usize {
        let b = if self.buckets[HH].packets.is_empty() {
            NON_HH
        } else {
            HH
        };
        if let Some(p) = self.buckets[b].packets.pop_front() {
            self.stats.qlen -= 1;
            self.stats.backlog -= p.len;
            self.stats.drops += 1;
            cx.drop_queued(p, DropReason::Overlimit);
        }
        b
    }

    fn list(&mut self, l: List) -> &mut VecDeque<usize> {
        match l {
            List::New => &mut self.new_list,
            List::Old => &mut self.old_list,
        }
    }

    fn move_tail(&mut self, b: usize, to: List) {
        if let Some(from) = self.buckets[b].on {
            self.list(from).retain(|&x| x != b);
        }
        self.list(to).push_back(b);
        self.buckets[b].on = Some(to);
    }

    /// `hhf_dequeue`.
    fn dequeue_inner(&mut self) -> Option<Packet> {
        loop {
            let (head, b) = match (self.new_list.front(), self.old_list.front()) {
                (Some(&b), _) => (List::New, b),
                (None, Some(&b)) => (List::Old, b),
                (None, None) => return None,
            };
            if self.buckets[b].deficit <= 0 {
                self.buckets[b].deficit += self.weight(b);
                self.move_tail(b, List::Old);
                continue;
            }
            match self.buckets[b].packets.pop_front() {
                Some(p) => {
                    self.stats.qlen -= 1;
                    self.stats.backlog -= p.len;
                    self.stats.count_sent(&p);
                    self.buckets[b].deficit -= p.len as i32;
                    return Some(p);
                }
                None => {
                    // Force a pass through the old list to prevent starvation.
                    if head == List::New && !self.old_list.is_empty() {
                        self.move_tail(b, List::Old);
                    } else {
                        self.list(head).pop_front();
                        self.buckets[b].on = None;
                    }
                }
            }
        }
    }

    /// Packets queued in the heavy hitters' and the others' buckets (tests).
    pub fn bucket_lengths(&self) -> (usize, usize) {
        (
            self.buckets[HH].packets.len(),
            self.buckets[NON_HH].packets.len(),
        )
    }
}

impl Qdisc for Hhf {
    fn kind(&self) -> &'static str {
        "hhf"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.buckets.iter().all(|b| b.packets.is_empty()))
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `hhf_enqueue`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let b = self.classify(&pkt, cx.now);
        let len = pkt.len;
        self.buckets[b].packets.push_back(pkt);
        self.stats.backlog += len;
        if self.buckets[b].on.is_none() {
            let to = if b == HH { List::Old } else { List::New };
            self.move_tail(b, to);
            self.buckets[b].deficit = self.weight(b);
        }
        self.stats.qlen += 1;
        if self.stats.qlen <= self.limit {
            return Verdict::Success;
        }
        self.drop_overlimit += 1;
        let prev_backlog = self.stats.backlog;
        if self.drop_one(cx) == b {
            // Our own bucket paid: congestion notified, the parents do not count the arrival.
            return Verdict::Cn;
        }
        cx.reduce_backlog(1, (prev_backlog - self.stats.backlog) as i64);
        Verdict::Success
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Option<Packet> {
        self.dequeue_inner()
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        // The bucket dequeue would serve: the first non-empty of the lists' order.
        let order: Vec<usize> = self
            .new_list
            .iter()
            .chain(self.old_list.iter())
            .copied()
            .collect();
        order
            .into_iter()
            .find_map(|b| self.buckets[b].packets.front().map(|_| b))
            .and_then(|b| self.buckets[b].packets.front())
    }

    /// `hhf_reset`: every packet freed, the classifier forgotten.
    fn reset(&mut self) {
        for b in &mut self.buckets {
            *b = Bucket::default();
        }
        self.new_list.clear();
        self.old_list.clear();
        for c in &mut self.hh_flows {
            c.clear();
        }
        self.hh_current = 0;
        self.valid = [[false; HHF_ARRAYS_LEN]; HHF_ARRAYS_CNT];
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `hhf_dump`.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Hhf(HhfOptions {
            limit: Some(self.limit),
            quantum: Some(self.quantum),
            hh_limit: Some(self.hh_flows_limit),
            reset_timeout: Some(self.reset_timeout * 1000),
            admit_bytes: Some(self.admit_bytes),
            evict_timeout: Some(self.evict_timeout * 1000),
            non_hh_weight: Some(self.non_hh_weight),
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Hhf(o) = opts else {
            return Err(KernelError::invalid("Invalid qdisc name"));
        };
        self.apply(o, &mut Cx::new(now))?;
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        let mut s = seed;
        self.secret = [splitmix64(&mut s), splitmix64(&mut s)];
    }

    /// `hhf_dump_stats`.
    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::Hhf(HhfXstats {
            drop_overlimit: self.drop_overlimit,
            hh_overlimit: self.hh_overlimit,
            hh_tot_count: self.hh_total,
            hh_cur_count: self.hh_current,
        }))
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "hhf",
    create: |_handle, opts, env, now| match opts {
        QdiscOptions::Hhf(o) => Ok((Box::new(Hhf::new(o, env, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
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

    fn flow(sport: u16, len: u32) -> Packet {
        Packet::udp4([10, 0, 0, 1], sport, [10, 0, 0, 2], 80, 0, len)
    }

    #[test]
    fn a_flow_past_admit_bytes_within_the_reset_timeout_becomes_a_heavy_hitter() {
        // admit_bytes 128 KB: a flow sending 1514-byte packets in the same 40 ms crosses it at its
        // 87th packet (87 × 1514 = 131 718 > 131 072, 86 × 1514 = 130 204 is not): packets 1..86 go to
        // the non-heavy bucket, the 87th and all later ones to the heavy hitters'.
        let mut q = Hhf::new(&HhfOptions::default(), &ENV, 0).unwrap();
        for k in 1..=100u32 {
            q.enqueue(flow(1000, 1514), &mut Cx::new(1_000_000));
            let (hh, non) = q.bucket_lengths();
            if k <= 86 {
                assert_eq!((hh, non), (0, k as usize), "packet {k}");
            } else {
                assert_eq!((hh, non), (k as usize - 86, 86), "packet {k}");
            }
        }
        let Some(Xstats::Hhf(x)) = q.xstats() else {
            panic!()
        };
        assert_eq!((x.hh_tot_count, x.hh_cur_count), (1, 1));
        // Drained, then 10 more of the heavy hitter and 10 of a light flow: the light flow stays out of
        // T, its bucket re-enters on the new list with 2 quanta (non_hh_weight) against the heavy
        // bucket's 1 on the old list: the first two packets out are light, the third heavy.
        while q.dequeue(&mut Cx::new(2_000_000)).is_some() {}
        for _ in 0..10 {
            q.enqueue(flow(1000, 1514), &mut Cx::new(3_000_000));
            q.enqueue(flow(2000, 1514), &mut Cx::new(3_000_000));
        }
        assert_eq!(q.bucket_lengths(), (10, 10));
        let sport = |p: &Packet| u16::from_be_bytes([p.data[20], p.data[21]]);
        let out: Vec<u16> = (0..6)
            .map(|_| sport(&q.dequeue(&mut Cx::new(4_000_000)).unwrap()))
            .collect();
        assert_eq!(out, vec![2000, 2000, 1000, 2000, 2000, 1000]);
    }

    #[test]
    fn the_counters_reset_every_reset_timeout() {
        // 50 packets (75 700 bytes) every 41 ms never reach 128 KB within one 40 ms window.
        let mut q = Hhf::new(&HhfOptions::default(), &ENV, 0).unwrap();
        for w in 0..10u64 {
            for _ in 0..50 {
                q.enqueue(flow(1000, 1514), &mut Cx::new(w * 41_000_000));
            }
            while q.dequeue(&mut Cx::new(w * 41_000_000)).is_some() {}
        }
        let Some(Xstats::Hhf(x)) = q.xstats() else {
            panic!()
        };
        assert_eq!(x.hh_tot_count, 0);
    }

    #[test]
    fn over_the_limit_the_heavy_hitters_pay() {
        let mut q = Hhf::new(
            &HhfOptions {
                limit: Some(100),
                ..Default::default()
            },
            &ENV,
            0,
        )
        .unwrap();
        for _ in 0..100 {
            q.enqueue(flow(1000, 1514), &mut Cx::new(0)); // 14 heavy-hitter packets at the end
        }
        let mut cx = Cx::new(0);
        // A light packet over the limit: a heavy hitter's head is dropped, the light one is queued.
        assert_eq!(q.enqueue(flow(3000, 100), &mut cx), Verdict::Success);
        assert_eq!(cx.drops.len(), 1);
        assert_eq!(q.stats().qlen, 100);
        let (hh, _) = q.bucket_lengths();
        assert_eq!(hh, 13);
    }

    #[test]
    fn impossible_settings_are_refused() {
        let bad = |o: HhfOptions| Hhf::new(&o, &ENV, 0).is_err();
        assert!(bad(HhfOptions {
            hh_limit: Some(2049),
            ..Default::default()
        }));
        assert!(bad(HhfOptions {
            non_hh_weight: Some(0),
            ..Default::default()
        }));
        assert!(bad(HhfOptions {
            quantum: Some(1 << 30),
            non_hh_weight: Some(4),
            ..Default::default()
        }));
    }
}
