//! `tclab explain`: a policy's class tree drawn with each class's guaranteed and maximum share, the
//! steady-state allocation a load gets from the discipline's rules, and the same load run through the
//! engine in virtual time, side by side.
//!
//! # The allocation
//!
//! - **HTB** (`sch_htb.c`): a leaf sends at up to its `rate` on its own tokens, whatever its parents say
//!   (green); beyond it, up to its `ceil`, it borrows from the nearest ancestor that is still below its own
//!   rate (the lender), provided every class between them stays below its ceil (yellow). The dequeue
//!   serves the highest priority first (`prio` 0 before 1…), at every level; leaves of one priority
//!   borrowing from one lender share its spare by deficit round robin of their quanta. Both phases are
//!   computed by progressive filling: the leaves that can still grow grow together in proportion to their
//!   quanta until a constraint binds (a leaf's demand or cap, an ancestor's ceil, a lender's rate, the
//!   link), the bound ones stop, the rest go on, priority by priority.
//!
//!   That is the rule as HTB documents it, and an idealisation: a borrowing leaf's own bucket keeps
//!   refilling, so it turns green for a packet now and then and leaves its parent's round robin, and with
//!   the small default bursts the borrowers' split of the excess depends more on those turns than on their
//!   quanta. Measured on this machine's kernel (1:20 rate 3 and 1:30 rate 1 Mbit/s, prio 1, borrowing from
//!   a 10 Mbit/s parent, UDP from iperf3): alone 51:49, where the quanta say 7.5:2.5 Mbit/s; beside a
//!   1 Mbit/s prio-0 class 5.89:2.88, where they say 6.75:2.25 — and tclab's engine under `tclab sim`
//!   gives 50:50 and 5.87:2.84. The simulated column is that engine: where the columns differ, trust
//!   it; a note under the table says where.
//! - **DRR** (`sch_drr.c`), **QFQ** (`sch_qfq.c`), **ETS** (`sch_ets.c`), **PRIO** (`sch_prio.c`): the
//!   strict classes first (PRIO's bands, ETS's strict bands), in band order, each taking what it wants
//!   of what is left; then the link shared among the others by quanta (QFQ: weights), each capped by
//!   its demand.
//! - **HFSC** (`sch_hfsc.c`): each leaf's real-time rate (`rt` m2) first, then each class's total
//!   service shared out top-down by link-sharing m2, never below the real-time service already in it nor
//!   above its upper limit (`ul` m2): the steady state of the curves' second slopes; their first slopes
//!   (bursts) do not last.
//! - CBQ: the simulation alone.
//! - **taprio** (`sch_taprio.c`): no tree, a gate per traffic class: each class's priorities and how
//!   much of the cycle its gate is open, at most that share of the link (less for frames that would
//!   not end before the gate closes: they wait for the next opening); the link speed taprio times
//!   frames by, and the classes whose longest opening no full-size frame fits.
//!
//! # The simulation
//!
//! The engine itself, in virtual time: each loaded leaf gets 1514-byte packets whose `skb->priority` is
//! its classid (HTB, DRR, HFSC, PRIO… take such a packet straight to the class, bypassing filters),
//! either kept backlogged or arriving at the offered rate (intervals uniform in 0.9..1.1 of the mean, from
//! a fixed seed: a strictly periodic source can phase-lock with a token bucket of the same period, and a
//! burstier one moves the other classes' shares where ceilings cap them). The
//! device is dequeued as a NIC of the link's rate (`--link`; without it, a wire far faster than the
//! policy) dequeues it, sleeping until the discipline's wake-up when it holds packets back. The rates are
//! measured over the last three quarters of the run (≥ 100 000 packets' worth, at most 20 s).

use std::collections::BTreeMap;
use std::fmt::Write;
use tclab_core::handle::Handle;
use tclab_core::qdisc::taprio::TaprioOptions;
use tclab_core::qdisc::{ClassOptions, Cx, QdiscOptions};
use tclab_core::{Device, Packet};

const PKT_LEN: u32 = 1514;

/// What each leaf offers: bytes per second, or `None` for backlogged (as much as it can get).
#[derive(Clone, Debug, Default)]
pub struct Load {
    pub offered: BTreeMap<u32, Option<u64>>,
}

/// Parse `--load '1:10=5mbit,1:20=max'`.
pub fn parse_load(s: &str) -> Result<Load, String> {
    let mut load = Load::default();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (class, rate) = part.split_once('=').ok_or_else(|| {
            format!("--load: \"{part}\" is not CLASS=RATE (e.g. 1:10=5mbit or 1:10=max)")
        })?;
        let id = crate::util::get_tc_classid(class.trim())
            .ok_or_else(|| format!("--load: \"{class}\" is not a classid (e.g. 1:10)"))?;
        let rate = match rate.trim() {
            "max" | "backlogged" => None,
            r => Some(
                crate::util::get_rate(r)
                    .filter(|v| *v > 0)
                    .ok_or_else(|| format!("--load: \"{r}\" is not a rate (e.g. 5mbit) or max"))?,
            ),
        };
        if load.offered.insert(id, rate).is_some() {
            return Err(format!("--load: {class} given twice"));
        }
    }
    if load.offered.is_empty() {
        return Err("--load: no class given (e.g. --load 1:10=5mbit,1:20=max)".into());
    }
    Ok(load)
}

/// One class of the tree.
#[derive(Clone, Debug)]
struct Node {
    id: Handle,
    parent: Option<usize>,
    children: Vec<usize>,
    kind: &'static str,
    /// Bytes per second (HTB), 0 when the discipline has none.
    rate: f64,
    ceil: f64,
    prio: u32,
    /// The DRR quantum (HTB, DRR, ETS's sharing bands) or QFQ's weight: the share of a round.
    quantum: f64,
    /// Served before any sharing class, in classid order (PRIO's bands, ETS's strict bands).
    strict: bool,
    /// Leaves: what the load offers (∞ when backlogged; 0 when idle).
    demand: f64,
    alloc: f64,
    simulated: f64,
}

impl Node {
    fn leaf(&self) -> bool {
        self.children.is_empty()
    }
}

struct Tree {
    nodes: Vec<Node>,
}

/// What [`Tree::fill`] asks of a leaf (the tree, the round, the leaf): its own headroom and the groups
/// it shares headroom with (a key and that group's headroom); `None` if it cannot grow.
type Limits<'a> = dyn Fn(&Tree, &Round, usize) -> Option<(f64, Vec<(usize, f64)>)> + 'a;

/// One round of [`Tree::fill`]: nothing grows while every leaf is asked, so what the limits read of the
/// tree is worked out once a round — each class's usage (bottom-up) and which classes lend to a growing
/// leaf. Asked per leaf, they made HTB's rule cubic in the classes: 2 000 subscriber classes took a
/// minute, 10 000 hours.
struct Round {
    /// Usage by node: its leaves' allocations summed.
    usage: Vec<f64>,
    /// By node: the nearest ancestor below its rate of some growing leaf.
    lends: Vec<bool>,
}

impl Tree {
    fn of(dev: &Device) -> Tree {
        let root = dev.root().handle;
        let classes: Vec<_> = dev
            .classes(0)
            .into_iter()
            .filter(|c| c.classid.major() == root.major() && c.classid.minor() != 0)
            .collect();
        let mut nodes: Vec<Node> = classes
            .iter()
            .map(|c| {
                let strict = match &c.options {
                    Some(ClassOptions::Ets(e)) => e.quantum.is_none_or(|q| q == 0),
                    None => c.kind == "prio",
                    _ => false,
                };
                let (rate, ceil, prio, quantum) = match &c.options {
                    Some(ClassOptions::Htb(h)) => (
                        h.rate.rate as f64,
                        h.ceil.rate as f64,
                        h.prio,
                        h.quantum.max(1) as f64,
                    ),
                    Some(ClassOptions::Drr(d)) => {
                        (0.0, 0.0, 0, d.quantum.unwrap_or(PKT_LEN).max(1) as f64)
                    }
                    Some(ClassOptions::Ets(e)) => {
                        (0.0, 0.0, 0, e.quantum.unwrap_or(0).max(1) as f64)
                    }
                    Some(ClassOptions::Qfq(q)) => {
                        (0.0, 0.0, 0, q.weight.unwrap_or(1).max(1) as f64)
                    }
                    // HFSC: real-time m2 as the guarantee, the upper limit's m2 as the ceiling, link
                    // sharing's m2 as the weight.
                    Some(ClassOptions::Hfsc(h)) => (
                        h.rsc.map_or(0.0, |c| c.m2 as f64),
                        h.usc.map_or(0.0, |c| c.m2 as f64),
                        0,
                        h.fsc.map_or(0.0, |c| c.m2 as f64),
                    ),
                    _ => (0.0, 0.0, 0, 1.0),
                };
                Node {
                    id: c.classid,
                    parent: None,
                    children: Vec::new(),
                    kind: c.kind,
                    rate,
                    ceil,
                    prio,
                    quantum,
                    strict,
                    demand: 0.0,
                    alloc: 0.0,
                    simulated: 0.0,
                }
            })
            .collect();
        for (i, c) in classes.iter().enumerate() {
            if let Some(p) = nodes.iter().position(|n| n.id == c.parent) {
                nodes[i].parent = Some(p);
                nodes[p].children.push(i);
            }
        }
        // Drawn in classid order, as people number them.
        let ids: Vec<u32> = nodes.iter().map(|n| n.id.0).collect();
        for n in &mut nodes {
            n.children.sort_by_key(|&c| ids[c]);
        }
        Tree { nodes }
    }

    fn ancestors(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut p = self.nodes[i].parent;
        while let Some(a) = p {
            out.push(a);
            p = self.nodes[a].parent;
        }
        out
    }

    fn usage(&self, i: usize) -> f64 {
        let n = &self.nodes[i];
        if n.leaf() {
            n.alloc
        } else {
            n.children.iter().map(|&c| self.usage(c)).sum()
        }
    }

    /// [`Tree::usage`] of every node at once, summed in the same order (children before parents).
    fn usages(&self) -> Vec<f64> {
        let mut u = vec![0.0; self.nodes.len()];
        let mut stack: Vec<(usize, bool)> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].parent.is_none())
            .map(|i| (i, false))
            .collect();
        while let Some((i, done)) = stack.pop() {
            let n = &self.nodes[i];
            if n.leaf() {
                u[i] = n.alloc;
            } else if done {
                u[i] = n.children.iter().map(|&c| u[c]).sum();
            } else {
                stack.push((i, true));
                stack.extend(n.children.iter().map(|&c| (c, false)));
            }
        }
        u
    }

    fn total(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| n.leaf())
            .map(|n| n.alloc)
            .sum()
    }

    /// Grow the leaves in `grow` together, each in proportion to its quantum, until `limits` says
    /// none can: `limits(tree, leaf)` gives the leaf's own headroom and the groups it shares headroom with
    /// (a key and that group's headroom). Returns when nothing moves.
    fn fill(&mut self, mut grow: Vec<usize>, limits: &Limits, link: f64) {
        const EPS: f64 = 1e-6;
        for _ in 0..10 * self.nodes.len() + 10 {
            // Each leaf's constraints, dropping those that cannot grow at all.
            let mut own = BTreeMap::new();
            let mut groups: BTreeMap<usize, (f64, f64)> = BTreeMap::new(); // key → (headroom, weight)
            let usage = self.usages();
            let mut lends = vec![false; self.nodes.len()];
            for &g in &grow {
                if let Some(a) = self.lender_by(g, &usage) {
                    lends[a] = true;
                }
            }
            let round = Round { usage, lends };
            grow.retain(|&l| match limits(self, &round, l) {
                Some((h, g)) if h > EPS && g.iter().all(|(_, gh)| *gh > EPS) => {
                    own.insert(l, (h, g));
                    true
                }
                _ => false,
            });
            let link_room = link - self.total();
            if grow.is_empty() || link_room <= EPS {
                return;
            }
            let mut delta = f64::INFINITY;
            let mut weight_all = 0.0;
            for &l in &grow {
                let w = self.nodes[l].quantum;
                weight_all += w;
                let (h, g) = &own[&l];
                delta = delta.min(h / w);
                for &(k, gh) in g {
                    let e = groups.entry(k).or_insert((gh, 0.0));
                    e.1 += w;
                }
            }
            for (h, w) in groups.values() {
                delta = delta.min(h / w);
            }
            delta = delta.min(link_room / weight_all);
            if !delta.is_finite() || delta <= 0.0 {
                return;
            }
            for &l in &grow {
                self.nodes[l].alloc += delta * self.nodes[l].quantum;
            }
        }
    }

    /// HTB's steady state (see the module's essay).
    fn allocate_htb(&mut self, link: f64) {
        let leaves: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].leaf())
            .collect();
        let prios: std::collections::BTreeSet<u32> =
            leaves.iter().map(|&l| self.nodes[l].prio).collect();
        // Green: each leaf up to its rate, the link served by priority.
        for &p in &prios {
            let grow: Vec<usize> = leaves
                .iter()
                .copied()
                .filter(|&l| self.nodes[l].prio == p)
                .collect();
            self.fill(
                grow,
                &|t: &Tree, _, l| {
                    let n = &t.nodes[l];
                    // A ceil below the rate wins: HTB_CANT_SEND once the ctokens run out.
                    Some((n.demand.min(n.rate).min(n.ceil) - n.alloc, Vec::new()))
                },
                link,
            );
        }
        // Yellow: borrowing from the nearest ancestor below its rate (the lender), under the ceil of every
        // class on the way. HTB serves by level first (`htb_dequeue` walks levels upwards, priorities
        // within each), and a lender's level is fixed from the top (the top class 7, its inner children
        // 6…): borrowing from a deeper lender comes before borrowing from a higher one. A lender's tokens
        // pay for whatever its subtree borrows, from it or from a lender below it: a lender above
        // another shares its spare with that one's borrowers too.
        for level in 1..8u32 {
            for &p in &prios {
                let grow: Vec<usize> = leaves
                    .iter()
                    .copied()
                    .filter(|&l| self.nodes[l].prio == p)
                    .collect();
                self.fill(
                    grow,
                    &|t: &Tree, round: &Round, l| {
                        let lender = t
                            .lender_by(l, &round.usage)
                            .filter(|&a| t.level(a) == level)?;
                        let n = &t.nodes[l];
                        let mut groups = Vec::new();
                        let mut above = false;
                        for a in t.ancestors(l) {
                            let used = round.usage[a];
                            let an = &t.nodes[a];
                            if !above {
                                groups.push((2 * a, an.ceil - used));
                            }
                            if a == lender || (above && round.lends[a]) {
                                groups.push((2 * a + 1, an.rate - used));
                            }
                            above |= a == lender;
                        }
                        Some((n.demand.min(n.ceil) - n.alloc, groups))
                    },
                    link,
                );
            }
        }
    }

    /// HTB's level of a class: 0 for a leaf; 7 for a top class, one less for each step down.
    fn level(&self, i: usize) -> u32 {
        if self.nodes[i].leaf() {
            0
        } else {
            7 - self.ancestors(i).len() as u32
        }
    }

    /// What class `i` can send at most: for HTB, [`crate::check::htb_maximum`] of its path from the
    /// top class (the smallest ceil on the way up, a top class's rate, or its own rate where that is
    /// more), and whether a top class's rate holds it; other kinds, their ceiling.
    fn maximum(&self, i: usize) -> (f64, bool) {
        let n = &self.nodes[i];
        if n.kind != "htb" {
            return (n.ceil, false);
        }
        let mut path: Vec<(u64, u64)> = std::iter::once(i)
            .chain(self.ancestors(i))
            .map(|a| (self.nodes[a].rate as u64, self.nodes[a].ceil as u64))
            .collect();
        path.reverse();
        let (max, held) = crate::check::htb_maximum(&path);
        (max as f64, held == crate::check::Held::Rate(0))
    }

    /// The nearest ancestor of leaf `l` still below its rate, that it may borrow from (`usage`: each
    /// node's, [`Tree::usages`]).
    fn lender_by(&self, l: usize, usage: &[f64]) -> Option<usize> {
        self.ancestors(l)
            .into_iter()
            .find(|&a| usage[a] < self.nodes[a].rate - 1e-6)
    }

    /// HFSC's steady state: each leaf first gets its real-time rate (the `rt` curve's m2: EDF guarantees
    /// it), then every class's total service is shared out top-down by link-sharing weights (`ls` m2):
    /// at each class, its children get `λ × ls` for the λ that fills the class's share, but never less
    /// than the real-time service already in them nor more than their upper limit (`ul` m2) or demand.
    fn allocate_hfsc(&mut self, link: f64) {
        let leaves: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].leaf())
            .collect();
        // Real time first: each leaf its curve's rate (at most its demand). Curves that together ask
        // for more than the link cannot all meet their deadlines; earliest-deadline-first then serves
        // them in proportion to their rates, not first come first served.
        let wanted: Vec<f64> = leaves
            .iter()
            .map(|&l| self.nodes[l].demand.min(self.nodes[l].rate))
            .collect();
        let total: f64 = wanted.iter().sum();
        let scale = if total > link { link / total } else { 1.0 };
        for (&l, &w) in leaves.iter().zip(&wanted) {
            self.nodes[l].alloc = w * scale;
        }
        let tops: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].parent.is_none())
            .collect();
        self.share_ls(&tops, link);
    }

    /// The leaves under class `i` (itself if it is one).
    fn subtree_leaves(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if self.nodes[j].leaf() {
                out.push(j);
            }
            stack.extend(&self.nodes[j].children);
        }
        out
    }

    /// What a subtree may take at most: its upper limit, its leaves' demand.
    fn subtree_cap(&self, i: usize) -> f64 {
        let n = &self.nodes[i];
        let below = if n.leaf() {
            n.demand
        } else {
            n.children.iter().map(|&c| self.subtree_cap(c)).sum()
        };
        let ul = if n.ceil > 0.0 { n.ceil } else { f64::INFINITY };
        below.min(ul)
    }

    /// Share `total` among the sibling classes `group` by link-sharing weight (see `allocate_hfsc`).
    fn share_ls(&mut self, group: &[usize], total: f64) {
        let floor: Vec<f64> = group.iter().map(|&c| self.usage(c)).collect();
        let cap: Vec<f64> = group
            .iter()
            .zip(&floor)
            .map(|(&c, &f)| {
                if self.nodes[c].quantum > 0.0 {
                    self.subtree_cap(c).max(f)
                } else {
                    f // no link-sharing curve: real-time service only
                }
            })
            .collect();
        let at = |lambda: f64| -> Vec<f64> {
            group
                .iter()
                .enumerate()
                .map(|(k, &c)| (lambda * self.nodes[c].quantum).clamp(floor[k], cap[k]))
                .collect()
        };
        let sum = |v: &[f64]| v.iter().sum::<f64>();
        let shares = if sum(&cap) <= total {
            cap.clone()
        } else {
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            while sum(&at(hi)) < total && hi < 1e18 {
                hi *= 2.0;
            }
            for _ in 0..200 {
                let mid = (lo + hi) / 2.0;
                if sum(&at(mid)) < total {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            at(hi)
        };
        for (k, &c) in group.iter().enumerate() {
            if self.nodes[c].leaf() {
                self.nodes[c].alloc = shares[k];
            } else {
                let children = self.nodes[c].children.clone();
                self.share_ls(&children, shares[k]);
            }
        }
    }

    /// DRR, QFQ, ETS and PRIO: the strict classes first, each in classid order taking what it wants of
    /// what is left; then the link shared by quanta (QFQ: weights) among the rest, each capped by its
    /// demand.
    fn allocate_shared(&mut self, link: f64) {
        let mut strict: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].leaf() && self.nodes[i].strict)
            .collect();
        strict.sort_by_key(|&i| self.nodes[i].id.0);
        for i in strict {
            let room = (link - self.total()).max(0.0);
            self.nodes[i].alloc = self.nodes[i].demand.min(room);
        }
        let shared: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].leaf() && !self.nodes[i].strict)
            .collect();
        self.fill(
            shared,
            &|t: &Tree, _, l| Some((t.nodes[l].demand - t.nodes[l].alloc, Vec::new())),
            link,
        );
    }
}

/// A set of leaf indices as a bitmap: [`simulate`]'s step asks for the next member after a leaf
/// thousands of times a second, which a bitmap answers a word at a time.
struct LeafSet(Vec<u64>);

impl LeafSet {
    fn new(n: usize) -> LeafSet {
        LeafSet(vec![0; n.div_ceil(64)])
    }
    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn remove(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
    /// The least member at or after `from`.
    fn next_from(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut bits = self.0.get(w)? & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            bits = *self.0.get(w)?;
        }
    }
}

/// Run the engine: the loaded leaves' packets through `dev` at `link` bytes/s. Bytes/s each leaf got,
/// and what one packet more or less over the measured window is in bytes/s (the figures' resolution).
fn simulate(
    dev: &mut Device,
    leaves: &[(Handle, Option<u64>)],
    link: f64,
    policy_rate: f64,
) -> (Vec<f64>, f64) {
    let pkt_ns = PKT_LEN as f64 * 1e9 / policy_rate;
    let duration = (100_000.0 * pkt_ns).clamp(2e9, 20e9) as u64;
    let measure_from = duration / 4;
    let mut outstanding = vec![0u32; leaves.len()];
    let mut next_arrival: Vec<Option<u64>> = leaves.iter().map(|(_, r)| r.map(|_| 0)).collect();
    let mut got = vec![0u64; leaves.len()];
    let packet = |i: usize| Packet {
        priority: leaves[i].0 .0,
        tag: i as u64,
        ..Packet::of_len(PKT_LEN)
    };
    let (mut now, mut wire_free) = (0u64, 0u64);
    let mut carry = 0u64;
    let mut guard = 0u64;
    let mut rng = 0x5eed_u64;
    // Each step visits, in classid-list order, only the leaves with something to do: the backlogged
    // ones holding fewer than 16 packets (`refill`) and the rate-driven ones whose next arrival is due
    // (`arrivals`, earliest first). Walking every leaf at every step made an ISP's 2 000 classes take
    // minutes; the order, and so every figure, is what the full walk gives.
    let mut refill = LeafSet::new(leaves.len());
    for i in (0..leaves.len()).filter(|&i| leaves[i].1.is_none()) {
        refill.insert(i);
    }
    let mut arrivals: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> = leaves
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| r.is_some())
        .map(|(i, _)| std::cmp::Reverse((0, i)))
        .collect();
    // A backlogged leaf's packet left the queue (sent or dropped): one to put back.
    let released = |i: usize, outstanding: &mut [u32], refill: &mut LeafSet| {
        if leaves[i].1.is_none() {
            outstanding[i] = outstanding[i].saturating_sub(1);
            refill.insert(i);
        }
    };
    let mut due = LeafSet::new(leaves.len());
    while now < duration && guard < 50_000_000 {
        guard += 1;
        // Arrivals due now.
        while let Some(&std::cmp::Reverse((t, i))) = arrivals.peek() {
            if t > now {
                break;
            }
            arrivals.pop();
            due.insert(i);
        }
        let mut from = 0;
        loop {
            // The next leaf at or after `from` with work: a drop during one leaf's enqueue can give a
            // later leaf room, which the same pass then fills.
            let next = refill.next_from(from);
            let next_due = due.next_from(from);
            let i = match (next, next_due) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(i) => i,
                    None => break,
                },
            };
            from = i + 1;
            match leaves[i].1 {
                None => {
                    // Keep up to 16 packets queued, fewer if the leaf's queue is shorter: the first
                    // refusal ends the filling (and the leaf is tried again at the next step).
                    while outstanding[i] < 16 {
                        let mut cx = Cx::new(now);
                        dev.enqueue(packet(i), &mut cx);
                        outstanding[i] += 1;
                        for d in cx.drops.iter() {
                            released(d.pkt.tag as usize, &mut outstanding, &mut refill);
                        }
                        if !cx.drops.is_empty() {
                            break;
                        }
                    }
                    if outstanding[i] >= 16 {
                        refill.remove(i);
                    }
                }
                Some(rate) => {
                    due.remove(i);
                    // Intervals drawn uniformly from 0.9 to 1.1 of the mean (a fixed seed): a strictly
                    // periodic source can phase-lock with a token bucket of the same period. Spread
                    // over ½..1½ (as before), a prio-0 leaf at 3 Mbit/s beside a borrower capped by its
                    // ceil gave the third leaf 1.78 Mbit/s where the kernel and `tclab sim` give 1.42-1.48
                    // with iperf3's even pacing: a source that bursts lends the capped one less while it
                    // is busy, and the other takes the rest.
                    let mean = (PKT_LEN as u64 * 1_000_000_000).div_ceil(rate);
                    let mut t = next_arrival[i].unwrap_or(0);
                    while t <= now {
                        dev.enqueue(packet(i), &mut Cx::new(now));
                        let u = tclab_core::flow::splitmix64(&mut rng) >> 11;
                        t += mean - mean / 10 + ((mean as u128 * u as u128 / 5) >> 53) as u64;
                    }
                    next_arrival[i] = Some(t);
                    arrivals.push(std::cmp::Reverse((t, i)));
                }
            }
        }
        let mut wake = None;
        if wire_free <= now {
            let mut cx = Cx::new(now);
            match dev.dequeue(&mut cx) {
                Some(p) => {
                    let i = p.tag as usize;
                    released(i, &mut outstanding, &mut refill);
                    if now >= measure_from {
                        got[i] += p.len as u64;
                    }
                    let bits = p.len as u64 * 1_000_000_000 + carry;
                    carry = bits % link as u64;
                    wire_free = now + bits / link as u64;
                }
                None => wake = cx.wake_at,
            }
            for d in cx.drops.iter() {
                released(d.pkt.tag as usize, &mut outstanding, &mut refill);
            }
        }
        // The next event: the wire, a wake-up, an arrival.
        let mut next = duration;
        if wire_free > now {
            next = next.min(wire_free);
        } else if let Some(w) = wake {
            next = next.min(w.max(now + 1));
        } else if wire_free <= now && dev.root().q.stats().qlen > 0 {
            next = next.min(now + 1000);
        }
        if let Some(&std::cmp::Reverse((t, _))) = arrivals.peek() {
            next = next.min(t.max(now + 1));
        }
        if next <= now {
            continue;
        }
        now = next;
    }
    let secs = (duration - measure_from) as f64 / 1e9;
    let rates = got.iter().map(|&b| b as f64 / secs).collect();
    (rates, PKT_LEN as f64 / secs)
}

/// A rate in bit/s for people: `5.00 Mbit/s`.
/// How many classes a note that stands for many names.
const NAMED: usize = 8;

/// The first [`NAMED`] of `items`, joined, and how many more: the list in a note for many classes.
fn first_named(items: impl ExactSizeIterator<Item = String>) -> String {
    let n = items.len();
    let mut s = items.take(NAMED).collect::<Vec<_>>().join(", ");
    if n > NAMED {
        let _ = write!(s, ", … ({} more)", n - NAMED);
    }
    s
}

fn human(bytes_per_sec: f64) -> String {
    let bits = bytes_per_sec * 8.0;
    if bits >= 1e9 {
        format!("{:.2} Gbit/s", bits / 1e9)
    } else if bits >= 1e6 {
        format!("{:.2} Mbit/s", bits / 1e6)
    } else {
        format!("{:.1} kbit/s", bits / 1e3)
    }
}

/// teql's bond (`sch_teql.c`), if a policy made one: the master's state, its slaves in the order it
/// serves them, and what each line carries. `teql_master_xmit` hands each packet to the next slave
/// that is free, so under a light load the lines take packets strictly in turn (1 in N each); once
/// the offer passes N times the slowest line, a packet that finds that line busy goes to the next
/// free one; while teql0 holds a backlog every line is busy, each carries its rate and the bond their
/// sum (the "backlogged" column). `rate` is a slave's line rate (bytes/s), if known.
pub fn teql(engine: &tclab_core::Engine, rate: impl Fn(&str) -> Option<u64>) -> Option<String> {
    use tclab_core::qdisc::teql::MASTER;
    let master = engine.device(MASTER)?;
    let slaves: Vec<&str> = engine
        .teql()?
        .slaves()
        .into_iter()
        .filter_map(|i| engine.device_by_ifindex(i).map(|d| d.name.as_str()))
        .collect();
    if slaves.is_empty() {
        return None;
    }
    let n = slaves.len();
    let mut out = String::new();
    if !master.up {
        let _ = writeln!(
            out,
            "{MASTER}: down, so nothing is routed through it and its slaves ({}) are not bonded: each \
             one's teql0 qdisc is a FIFO for what is routed out of that line alone",
            slaves.join(", ")
        );
        return Some(out);
    }
    let _ = writeln!(
        out,
        "{MASTER}: up, round robin over {n} slave{} in this order (each packet to the next free line)",
        if n == 1 { "" } else { "s" }
    );
    let rates: Vec<Option<u64>> = slaves.iter().map(|s| rate(s)).collect();
    let _ = writeln!(out, "{:<16} {:>14} {:>14}", "slave", "line", "backlogged");
    for (s, r) in slaves.iter().zip(&rates) {
        let r = r.map_or("—".to_string(), |r| human(r as f64));
        let _ = writeln!(out, "{s:<16} {r:>14} {r:>14}");
    }
    let known: Vec<u64> = rates.iter().flatten().copied().collect();
    if known.len() < n {
        let _ = writeln!(
            out,
            "give every slave's line rate (--link DEV=RATE) for the bond's: its lines' sum"
        );
        return Some(out);
    }
    let sum: u64 = known.iter().sum();
    let _ = writeln!(out, "{:<16} {:>14} {:>14}", "bond", "", human(sum as f64));
    let (slow, &min) = slaves
        .iter()
        .zip(&known)
        .min_by_key(|(_, &r)| r)
        .expect("a slave");
    if n > 1 {
        let _ = writeln!(
            out,
            "below {} offered the lines take packets strictly in turn, 1 in {n} each{}",
            human((min * n as u64) as f64),
            if known.iter().all(|&r| r == min) {
                String::new()
            } else {
                format!(
                    "; above it {slow}, the slowest, falls behind: a packet that finds it busy goes \
                     to the next free line, so it carries fewer than 1 in {n}, its rate once {MASTER} \
                     holds a backlog (consecutive packets over unequal lines reorder: tclab check's \
                     teql-unequal-slaves)"
                )
            }
        );
    }
    Some(out)
}

/// The disciplines whose classes share the link (a TBF's or an mq's "classes" are slots for children).
pub const SHARING: &[&str] = &["htb", "hfsc", "drr", "prio", "cbq", "qfq", "ets"];

/// Whether `explain` has something to say of a root of `kind`: classes that share the link, or
/// taprio's gates.
pub fn explains(kind: &str) -> bool {
    SHARING.contains(&kind) || kind == "taprio"
}

/// A taprio root: each traffic class's priorities and its gate's share of the cycle, at most that
/// share of the link. taprio times frames by the device's link speed (`speed`, Mbit/s: ethtool's; 0
/// when it reports none, and the kernel then assumes 10), not by the line: a class whose longest
/// opening is shorter than a full frame at that speed never sends one (the guard band).
fn taprio_gates(
    name: &str,
    handle: Handle,
    t: &TaprioOptions,
    link: Option<u64>,
    speed: u32,
) -> String {
    let mut out = format!("{name}: taprio {handle}  cycle {} ns", t.cycle_time);
    match link {
        Some(l) => {
            let _ = writeln!(out, ", link {} (--link)", human(l as f64));
        }
        None => out.push_str(" (--link RATE for each class's rate)\n"),
    }
    // `taprio_set_picos_per_byte`: SPEED_UNKNOWN (or none) is 10 Mbit/s.
    let known = speed != 0 && speed != u32::MAX;
    let mbit = if known { speed } else { 10 };
    let _ = writeln!(
        out,
        "  frames timed at {mbit} Mbit/s ({})",
        if known {
            "the device's link speed"
        } else {
            "the device reports no link speed; taprio assumes 10: `ethtool -s DEV speed N` sets it"
        }
    );
    // explain's own packets: 1514-byte frames, each taking 1514 × 8 / mbit µs.
    let frame_ns = 1514 * 8 * 1000 / u64::from(mbit);
    let Some(m) = t.mqprio else { return out };
    for tc in 0..u32::from(m.num_tc) {
        let prios: Vec<String> = (0..16)
            .filter(|&p| u32::from(m.map[p]) == tc)
            .map(|p| p.to_string())
            .collect();
        let open = t.open_ns(tc);
        let share = open as f64 / t.cycle_time.max(1) as f64;
        let _ = write!(
            out,
            "  TC {tc} (priorities {}): open {open} ns of the cycle ({:.1} %)",
            if prios.is_empty() {
                "none".to_string()
            } else {
                prios.join(" ")
            },
            share * 100.0
        );
        match link {
            Some(l) => {
                let _ = writeln!(out, ": at most {}", human(l as f64 * share));
            }
            None => out.push('\n'),
        }
        let longest = t.longest_open_ns(tc);
        if open > 0 && longest <= frame_ns {
            let _ = writeln!(
                out,
                "    its longest opening, {longest} ns, is no longer than a 1514-byte frame at \
                 {mbit} Mbit/s ({frame_ns} ns): no full-size frame ever fits before the gate closes"
            );
        }
    }
    out.push_str(
        "  a frame that would not end before its gate closes waits for the next opening: large frames get less\n",
    );
    out
}

/// Explain the policy of `dev`. `link`: the line's rate in bytes/s, if known. `idle`: the leaves the
/// policy's classification sends no packet to, and why ([`crate::check::idle_classes`]): a loaded one
/// gets a note, since its figures are for packets sent to it directly, as the simulation sends them.
pub fn explain(
    dev: &mut Device,
    load: Option<&Load>,
    link: Option<u64>,
    idle: &BTreeMap<u32, crate::check::Idle>,
) -> Result<String, String> {
    let name = dev.name.clone();
    let root_kind = dev.root().q.kind();
    if let QdiscOptions::Taprio(t) = dev.root().q.dump() {
        return Ok(taprio_gates(&name, dev.root().handle, &t, link, dev.speed));
    }
    let mut tree = Tree::of(dev);
    if tree.nodes.is_empty() || !SHARING.contains(&root_kind) {
        return Ok(format!(
            "{name}: root qdisc {root_kind} has no classes to share the link between\n"
        ));
    }
    let leaves: Vec<usize> = (0..tree.nodes.len())
        .filter(|&i| tree.nodes[i].leaf())
        .collect();
    // The load.
    let mut offered: Vec<(Handle, Option<u64>)> = Vec::new();
    match load {
        Some(l) => {
            for (&id, &r) in &l.offered {
                let Some(&i) = leaves.iter().find(|&&i| tree.nodes[i].id.0 == id) else {
                    let what = if tree.nodes.iter().any(|n| n.id.0 == id) {
                        "is an inner class: load its leaves"
                    } else {
                        "is not a class of the root qdisc"
                    };
                    return Err(format!("--load: {} on {name} {what}", Handle(id)));
                };
                tree.nodes[i].demand = r.map_or(f64::INFINITY, |v| v as f64);
                offered.push((tree.nodes[i].id, r));
            }
        }
        None => {
            for &i in &leaves {
                tree.nodes[i].demand = f64::INFINITY;
                offered.push((tree.nodes[i].id, None));
            }
        }
    }
    // The link. Without one, the policy alone shapes: a leaf sends its rate whatever its parents say (a
    // tree whose rates add up to more than a parent's ceil does send more), so nothing caps the total.
    let tops: Vec<usize> = (0..tree.nodes.len())
        .filter(|&i| tree.nodes[i].parent.is_none())
        .collect();
    let policy_rate = tops.iter().map(|&i| tree.nodes[i].ceil).fold(0.0, f64::max);
    let (link, wire, link_note) = match link {
        Some(l) => (
            l as f64,
            l as f64,
            format!("link {} (--link)", human(l as f64)),
        ),
        None if root_kind == "htb" && policy_rate > 0.0 => (
            f64::INFINITY,
            policy_rate * 100.0,
            "no link given: the policy alone shapes (--link RATE for the line's)".to_string(),
        ),
        None => {
            return Err(format!(
                "{name}: {root_kind} has no rate of its own: give the line's rate with --link RATE"
            ))
        }
    };
    let analytic = match root_kind {
        "htb" => {
            tree.allocate_htb(link);
            true
        }
        "hfsc" => {
            tree.allocate_hfsc(link);
            true
        }
        "drr" | "qfq" | "ets" | "prio" => {
            tree.allocate_shared(link);
            true
        }
        _ => false,
    };
    let (sim, resolution) = simulate(
        dev,
        &offered,
        wire,
        if link.is_finite() { link } else { policy_rate },
    );
    for (k, (id, _)) in offered.iter().enumerate() {
        if let Some(i) = tree.nodes.iter().position(|n| n.id == *id) {
            tree.nodes[i].simulated = sim[k];
        }
    }
    // The drawing.
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{name}: {root_kind} {}  {link_note}",
        dev.root().handle
    );
    /// One row: the tree-drawn label and its five figures.
    type Row = (String, [String; 5]);
    fn draw(tree: &Tree, i: usize, prefix: &str, last: bool, analytic: bool, out: &mut Vec<Row>) {
        let n = &tree.nodes[i];
        let branch = if n.parent.is_none() {
            String::new()
        } else if last {
            format!("{prefix}└─ ")
        } else {
            format!("{prefix}├─ ")
        };
        let mut label = format!("{branch}{} {}", n.id, n.kind);
        if n.kind == "htb" && n.leaf() {
            let _ = write!(label, " prio {} quantum {}", n.prio, n.quantum);
        }
        if n.strict {
            label.push_str(" strict");
        } else if matches!(n.kind, "qfq") {
            let _ = write!(label, " weight {}", n.quantum);
        } else if matches!(n.kind, "ets" | "drr") {
            let _ = write!(label, " quantum {}", n.quantum);
        }
        let sum = |f: &dyn Fn(&Node) -> f64| -> f64 {
            let mut s = 0.0;
            let mut stack = vec![i];
            while let Some(j) = stack.pop() {
                let m = &tree.nodes[j];
                if m.leaf() {
                    s += f(m);
                }
                stack.extend(&m.children);
            }
            s
        };
        let rate = |v: f64| if v > 0.0 { human(v) } else { "—".into() };
        let offered = if n.leaf() {
            if n.demand.is_infinite() {
                "backlogged".into()
            } else if n.demand > 0.0 {
                human(n.demand)
            } else {
                "idle".into()
            }
        } else {
            String::new()
        };
        let expected = if analytic {
            human(sum(&|m| m.alloc))
        } else {
            "—".into()
        };
        out.push((
            label,
            [
                rate(n.rate),
                rate(tree.maximum(i).0),
                offered,
                expected,
                human(sum(&|m| m.simulated)),
            ],
        ));
        let child_prefix = if n.parent.is_none() {
            String::new()
        } else if last {
            format!("{prefix}   ")
        } else {
            format!("{prefix}│  ")
        };
        for (k, &c) in n.children.iter().enumerate() {
            draw(
                tree,
                c,
                &child_prefix,
                k + 1 == n.children.len(),
                analytic,
                out,
            );
        }
    }
    let mut tops = tops;
    tops.sort_by_key(|&t| tree.nodes[t].id.0);
    let mut rows = Vec::new();
    for &t in &tops {
        draw(&tree, t, "", true, analytic, &mut rows);
    }
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let pad = |s: &str| format!("{s}{}", " ".repeat(width - s.chars().count()));
    let _ = writeln!(
        out,
        "{} {:>14} {:>14} {:>14} {:>14} {:>14}",
        pad("class"),
        "guaranteed",
        "maximum",
        "offered",
        "expected",
        "simulated"
    );
    for (label, c) in &rows {
        let _ = writeln!(
            out,
            "{} {:>14} {:>14} {:>14} {:>14} {:>14}",
            pad(label),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4]
        );
    }
    if !analytic {
        let _ = writeln!(
            out,
            "(no analytic model for {root_kind}: the simulation's figures alone)"
        );
    }
    // HTB classes whose ceil HTB never lets them reach: the ceil written beside the maximum drawn (one
    // note for many, as for the classes no filter names).
    let mut capped: Vec<(Handle, f64, f64, bool)> = (0..tree.nodes.len())
        .map(|i| {
            let (max, by_top_rate) = tree.maximum(i);
            (tree.nodes[i].id, tree.nodes[i].ceil, max, by_top_rate)
        })
        .filter(|&(_, ceil, max, _)| max < ceil)
        .collect();
    capped.sort_by_key(|c| c.0);
    const CAPPED: &str =
        "HTB lends a class no more than the classes above it pass (each up to its \
                          ceil; a top class, which borrows from nothing, up to its rate)";
    if capped.len() <= 3 {
        for (id, ceil, max, by_top_rate) in &capped {
            let why = if tree.nodes.iter().any(|n| n.id == *id && n.parent.is_none()) {
                "a top class borrows from nothing, so it sends no more than its rate".to_string()
            } else if *by_top_rate {
                format!("{CAPPED}: here the top class's rate")
            } else {
                format!("{CAPPED} (tclab check: ceil-above-parent)")
            };
            let _ = writeln!(
                out,
                "note: {id}'s maximum is {}, though its ceil is written {}: {why}",
                human(*max),
                human(*ceil)
            );
        }
    } else {
        let _ = writeln!(
            out,
            "note: {} classes' maximum is below the ceil written: {}; {CAPPED}",
            capped.len(),
            first_named(capped.iter().map(|(id, ceil, max, _)| {
                format!("{id} {} of {} written", human(*max), human(*ceil))
            }))
        );
    }
    // An inner class whose subtree sends more than its ceil: its children's own rates add up past it.
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.leaf() || n.ceil <= 0.0 || root_kind != "htb" {
            continue;
        }
        let sent: f64 = tree
            .subtree_leaves(i)
            .iter()
            .map(|&l| tree.nodes[l].simulated)
            .sum();
        if sent > n.ceil * 1.02 {
            let _ = writeln!(
                out,
                "note: {}'s children send {} in all, above its ceil {}: HTB lets each send its own \
                 rate without asking the parent (tclab check: rates-exceed-parent)",
                n.id,
                human(sent),
                human(n.ceil)
            );
        }
    }
    // Figures for packets sent directly, by skb->priority: say so where the policy sends none.
    const DIRECT: &str =
        "so its figures are for packets sent to it directly (skb->priority, as the \
                          simulation sends them)";
    // Classes no filter names are said in one note when more than three (a tree built for
    // classification outside tc, or before its filters, has them all).
    let unnamed: Vec<Handle> = offered
        .iter()
        .map(|&(id, _)| id)
        .filter(|id| matches!(idle.get(&id.0), Some(crate::check::Idle::Unnamed)))
        .collect();
    let not_default = if matches!(root_kind, "drr" | "qfq") {
        format!(", and {root_kind} has no default")
    } else {
        " and not the default".to_string()
    };
    let one_unnamed = format!(
        "named by no filter, iptables CLASSIFY rule or skbedit priority action{not_default}: only a \
         packet whose skb->priority is set to it outside the policy (SO_PRIORITY) reaches it (tclab \
         check: unreached-class), {DIRECT}"
    );
    if unnamed.len() > 3 {
        let ids: Vec<String> = unnamed.iter().take(NAMED).map(|c| c.to_string()).collect();
        let more = unnamed.len() - ids.len();
        let _ =
            writeln!(
            out,
            "note: {} classes ({}{}) are named by no filter, iptables CLASSIFY rule or skbedit \
             priority action{not_default}: only packets whose skb->priority is set to one of them \
             outside the policy (SO_PRIORITY) reach them (tclab check: unreached-class), so their \
             figures are for packets sent to them directly (skb->priority, as the simulation sends \
             them)",
            unnamed.len(),
            ids.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
        );
    }
    for (id, _) in &offered {
        let Some(why) = idle.get(&id.0) else {
            continue;
        };
        let _ =
            match why {
                crate::check::Idle::Shadowed(by) => {
                    let at: Vec<&str> = by.iter().take(3).map(|f| f.at.as_str()).collect();
                    let more = by.len().saturating_sub(at.len());
                    writeln!(
                    out,
                    "note: {id} is reached by no filter: every filter naming it is shadowed by an \
                     earlier one ({}{}; tclab check: filter-shadowed), {DIRECT}, and the policy's \
                     filters send it none",
                    at.join("; "),
                    if more > 0 { format!("; {more} more") } else { String::new() }
                )
                }
                crate::check::Idle::Unnamed if unnamed.len() <= 3 => {
                    writeln!(out, "note: {id} is {one_unnamed}")
                }
                crate::check::Idle::Unnamed => Ok(()),
                crate::check::Idle::CaughtAll(at) => writeln!(
                out,
                "note: {id} is the default, but a catch-all filter ({at}) classifies every packet \
                 first and {root_kind} gives the default only what no filter classifies: nothing, \
                 {DIRECT}"
            ),
            };
    }
    // Where the two disagree by more than 2 % and a packet (with thousands of leaves, each gets few
    // packets in the measured window: one more or less is not a disagreement), say so: class by class
    // for a few, in one note for many (a 10 000-class tree gave 1 922 notes of the same explanation).
    const WHY: &str = "the computation applies the classes' rates and the discipline's rule; the \
                       simulation runs everything — leaf qdiscs that shape, bursts, the order of \
                       service (HTB's borrowing turns, HFSC's deadlines) (tclab explain --help)";
    let mut apart: Vec<(Handle, f64, f64)> = tree
        .nodes
        .iter()
        .filter(|n| n.leaf() && analytic)
        .filter(|n| {
            let (a, s) = (n.alloc, n.simulated);
            a.max(s) > 0.0 && (a - s).abs() > 0.02 * a.max(s) + resolution
        })
        .map(|n| (n.id, n.simulated, n.alloc))
        .collect();
    // By classid, as a reader finds them in the table (the tree's own order is the class hash's).
    apart.sort_by_key(|c| c.0);
    if apart.len() <= 3 {
        for (id, s, a) in &apart {
            let _ = writeln!(
                out,
                "note: {id} gets {} in the simulation against {} computed: {WHY}",
                human(*s),
                human(*a)
            );
        }
    } else {
        let _ = writeln!(
            out,
            "note: {} classes get more or less in the simulation than computed: {}; {WHY}",
            apart.len(),
            first_named(apart.iter().map(|(id, s, a)| format!(
                "{id} {} against {}",
                human(*s),
                human(*a)
            )))
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(lines: &[&str]) -> tclab_core::Engine {
        let mut e = tclab_core::Engine::new();
        for l in lines {
            let words: Vec<String> = l.split_whitespace().map(String::from).collect();
            crate::store::apply_record(&mut e, &words).unwrap_or_else(|m| panic!("{l}: {m}"));
        }
        e
    }

    const BOND: &[&str] = &[
        "tc qdisc add dev eth1 root teql0",
        "tc qdisc add dev eth2 root teql0",
        "tc qdisc add dev eth3 root teql0",
        "link set dev teql0 up",
    ];

    #[test]
    fn a_teql_bond_is_its_lines_sum_in_ring_order() {
        let e = policy(BOND);
        // 10, 10 and 2 Mbit/s lines (bytes/s). teql_qdisc_init inserts each slave after the head:
        // added 1, 2, 3, served 1, 3, 2.
        let rate = |d: &str| match d {
            "eth1" | "eth2" => Some(1_250_000),
            "eth3" => Some(250_000),
            _ => None,
        };
        let t = teql(&e, rate).unwrap();
        let order: Vec<&str> = t
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.starts_with("eth"))
            .collect();
        assert_eq!(order, ["eth1", "eth3", "eth2"], "{t}");
        // Backlogged, each line carries its rate: 10 + 10 + 2 = 22 Mbit/s. In turn below 3 × 2.
        assert!(t.contains("bond") && t.contains("22.00 Mbit/s"), "{t}");
        assert!(t.contains("below 6.00 Mbit/s offered"), "{t}");
        assert!(t.contains("eth3, the slowest"), "{t}");
        // Equal lines: no slowest to fall behind.
        let t = teql(&e, |_| Some(1_250_000)).unwrap();
        assert!(t.contains("30.00 Mbit/s") && !t.contains("slowest"), "{t}");
        // A line of unknown rate: no sum.
        let t = teql(&e, |d| (d != "eth2").then_some(1_250_000)).unwrap();
        assert!(
            !t.lines().any(|l| l.starts_with("bond ")) && t.contains("--link DEV=RATE"),
            "{t}"
        );
    }

    #[test]
    fn a_teql_master_down_bonds_nothing_and_no_slaves_says_nothing() {
        let e = policy(&BOND[..3]);
        let t = teql(&e, |_| Some(1_250_000)).unwrap();
        assert!(t.starts_with("teql0: down") && !t.contains("bond "), "{t}");
        // teql loaded by naming it, with no slave: nothing to explain.
        let e = policy(&["link set dev teql0 mtu 1400"]);
        assert!(e.teql().is_some());
        assert_eq!(teql(&e, |_| None), None);
    }
}
