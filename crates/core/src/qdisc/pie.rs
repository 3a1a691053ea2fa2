//! `pie` — Proportional Integral controller Enhanced (RFC 8033), after `net/sched/sch_pie.c`.
//!
//! # The algorithm
//!
//! A FIFO of at most `limit` packets whose arrivals are dropped — or CE-marked with `ecn` while the
//! probability is at most 10 % — at random with a probability that a controller updates every
//! `tupdate` to hold the queueing delay at `target` (the law, with its de-randomised drops and burst
//! allowance, is in [`super::pie_impl`], shared with `fq_pie`). A full queue drops the arrival and
//! counts an overlimit. The first update comes 500 ms after the qdisc is created, then one every
//! `tupdate`.
//!
//! # What tclab models and how
//!
//! The kernel's qdisc and counters (`tc -s`: `prob`, `delay`, `avg_dq_rate` with the estimator,
//! `pkts_in overlimit dropped maxq ecn_mark`). The timer runs lazily: at the first enqueue or dequeue
//! after each expiry the update runs once per expiry passed (between packets the backlog and the delay
//! samples do not change, so the result is the timer's). Each packet's enqueue time is kept beside it in
//! psched ticks. A `change` that lowers `limit` drops from the head, as the kernel does. Random numbers
//! come from the run's seed.

use super::pie_impl::{ns2ticks, PieParams, PieVars, MAX_PROB};
use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict, Xstats};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::splitmix64;
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What tc sends (`TCA_PIE_*`): only what was given. Times in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieOptions {
    pub limit: Option<u32>,
    pub target: Option<u32>,
    pub tupdate: Option<u32>,
    pub alpha: Option<u32>,
    pub beta: Option<u32>,
    pub ecn: Option<u32>,
    pub bytemode: Option<u32>,
    pub dq_rate_estimator: Option<u32>,
}

/// `struct tc_pie_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PieXstats {
    /// Drop probability, scaled by 2^64.
    pub prob: u64,
    /// Current delay, µs.
    pub delay: u32,
    /// Bytes per second, with the estimator.
    pub avg_dq_rate: u32,
    pub dq_rate_estimating: bool,
    pub packets_in: u32,
    pub dropped: u32,
    pub overlimit: u32,
    pub maxq: u32,
    pub ecn_mark: u32,
}

/// `usecs_to_jiffies` at HZ 1000 (rounding up).
pub fn usecs_to_jiffies(us: u32) -> u32 {
    us.div_ceil(1000)
}

/// The options applied to `params` (`pie_change`).
pub fn apply_options(params: &mut PieParams, o: &PieOptions) {
    if let Some(t) = o.target {
        params.target = ns2ticks(t as u64 * 1000);
    }
    if let Some(t) = o.tupdate {
        params.tupdate = usecs_to_jiffies(t);
    }
    if let Some(l) = o.limit {
        params.limit = l;
    }
    if let Some(a) = o.alpha {
        params.alpha = a;
    }
    if let Some(b) = o.beta {
        params.beta = b;
    }
    if let Some(e) = o.ecn {
        params.ecn = e != 0;
    }
    if let Some(b) = o.bytemode {
        params.bytemode = b != 0;
    }
    if let Some(d) = o.dq_rate_estimator {
        params.dq_rate_estimator = d != 0;
    }
}

/// The options as `pie_dump` reports them.
pub fn dump_options(p: &PieParams) -> PieOptions {
    PieOptions {
        limit: Some(p.limit),
        target: Some(((p.target << 6) as u32) / 1000),
        tupdate: Some(p.tupdate * 1000),
        alpha: Some(p.alpha),
        beta: Some(p.beta),
        ecn: Some(p.ecn as u32),
        bytemode: Some(p.bytemode as u32),
        dq_rate_estimator: Some(p.dq_rate_estimator as u32),
    }
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: its drop probability, delay estimate and
/// update timer come with it.
#[derive(Serialize, Deserialize)]
pub struct Pie {
    params: PieParams,
    vars: PieVars,
    /// Packets and their enqueue time in psched ticks.
    #[serde(skip)]
    queue: VecDeque<(Packet, u64)>,
    mtu: u32,
    packets_in: u32,
    dropped: u32,
    overlimit: u32,
    maxq: u32,
    ecn_mark: u32,
    stats: QdiscStats,
    rng: u64,
    next_update: Nanos,
}

impl Pie {
    pub fn new(o: &PieOptions, env: &DevEnv, now: Nanos) -> Pie {
        let mut params = PieParams::default();
        apply_options(&mut params, o);
        Pie {
            params,
            vars: PieVars::default(),
            queue: VecDeque::new(),
            mtu: env.mtu + env.hard_header_len,
            packets_in: 0,
            dropped: 0,
            overlimit: 0,
            maxq: 0,
            ecn_mark: 0,
            stats: QdiscStats::default(),
            rng: 0x9_1e,
            next_update: now + 500_000_000,
        }
    }

    /// `pie_timer`, for every expiry up to `now`.
    fn run_timer(&mut self, now: Nanos) {
        while self.next_update <= now {
            self.vars
                .calculate_probability(&self.params, self.stats.backlog);
            if self.params.tupdate == 0 {
                self.next_update = Nanos::MAX;
                break;
            }
            self.next_update += self.params.tupdate as u64 * 1_000_000;
        }
    }
}

impl Qdisc for Pie {
    fn kind(&self) -> &'static str {
        "pie"
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.queue
            .is_empty()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `pie_qdisc_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.run_timer(cx.now);
        let mut enqueue = false;
        if self.stats.qlen >= self.params.limit {
            self.overlimit += 1;
        } else {
            let rng = &mut self.rng;
            let mut rnd = || splitmix64(rng);
            if !self.vars.drop_early(
                &self.params,
                self.stats.backlog,
                pkt.len,
                self.mtu,
                &mut rnd,
            ) {
                enqueue = true;
            } else if self.params.ecn && self.vars.prob <= MAX_PROB / 10 && set_ce(&mut pkt) {
                self.ecn_mark += 1;
                enqueue = true;
            }
        }
        if enqueue {
            self.packets_in += 1;
            if self.stats.qlen > self.maxq {
                self.maxq = self.stats.qlen;
            }
            self.stats.qlen += 1;
            self.stats.backlog += pkt.len;
            self.queue.push_back((pkt, ns2ticks(cx.now)));
            return Verdict::Success;
        }
        self.dropped += 1;
        self.vars.accu_prob = 0;
        self.stats.drops += 1;
        let reason = if self.stats.qlen >= self.params.limit {
            DropReason::TailDrop
        } else {
            DropReason::Aqm
        };
        cx.drop_arriving(pkt, reason);
        Verdict::Drop
    }

    /// `pie_qdisc_dequeue`.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.run_timer(cx.now);
        let (p, enq) = self.queue.pop_front()?;
        self.stats.qlen -= 1;
        self.stats.backlog -= p.len;
        self.stats.bytes += p.len as u64;
        self.stats.packets += p.bstats_packets();
        self.vars.process_dequeue(
            &self.params,
            ns2ticks(cx.now),
            enq,
            p.len,
            self.stats.backlog,
        );
        Some(p)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.queue.front().map(|(p, _)| p)
    }

    /// `pie_reset`.
    fn reset(&mut self) {
        self.queue.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
        self.vars = PieVars::default();
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn xstats(&self) -> Option<Xstats> {
        Some(Xstats::Pie(PieXstats {
            prob: self.vars.prob << 8,
            delay: ((self.vars.qdelay << 6) as u32) / 1000,
            avg_dq_rate: if self.params.dq_rate_estimator {
                ((self.vars.avg_dq_rate as u64 * (1_000_000_000 >> 6)) >> 8) as u32
            } else {
                0
            },
            dq_rate_estimating: self.params.dq_rate_estimator,
            packets_in: self.packets_in,
            dropped: self.dropped,
            overlimit: self.overlimit,
            maxq: self.maxq,
            ecn_mark: self.ecn_mark,
        }))
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Pie(dump_options(&self.params))
    }

    /// `pie_change`: a lower limit drops packets from the head.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Pie(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        apply_options(&mut self.params, o);
        while self.stats.qlen > self.params.limit {
            let Some((p, _)) = self.queue.pop_front() else {
                break;
            };
            self.stats.qlen -= 1;
            self.stats.backlog -= p.len;
            self.stats.drops += 1;
        }
        Ok(Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        self.rng = seed ^ 0x50_4945;
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "pie",
    create: |_handle, opts, env, now| match opts {
        QdiscOptions::Pie(o) => Ok((Box::new(Pie::new(o, env, now)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};
