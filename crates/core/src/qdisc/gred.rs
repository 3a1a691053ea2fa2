//! `gred` — Generic RED, after `net/sched/sch_gred.c`: up to 16 RED queues sharing one FIFO.
//!
//! # The algorithm
//!
//! GRED is RED with drop precedence. Packets carry a drop precedence (DP) in the low four bits of
//! `skb->tc_index`; each DP has a *virtual queue* (VQ) with its own RED parameters — thresholds, limit,
//! probability — so that, in one physical FIFO, out-of-profile traffic (a high DP with low thresholds)
//! is dropped early while in-profile traffic still gets through. This is how DiffServ's Assured
//! Forwarding (RFC 2597: three drop precedences per class) was built on Linux. A packet whose DP has no
//! VQ goes to the `default` VQ; if that one is not configured either, it passes untouched, subject only
//! to the qdisc's byte `limit`.
//!
//! Three ways of averaging:
//!
//! - **plain** (no `grio`): each VQ averages its own backlog, as RED does;
//! - **RIO** (`grio`, "RED with In/Out", Clark and Fang 1998): each VQ has a `prio`, and the average a
//!   VQ's decision uses is its own plus those of every busy VQ of a better (lower) prio — so congestion
//!   from in-profile traffic makes out-of-profile traffic drop first;
//! - **WRED** (`grio` with two VQs of the same prio, chosen automatically): one shared average of the
//!   whole queue's backlog, each VQ deciding with its own thresholds.
//!
//! Then as RED: below `min` queue, between `min` and `max` drop (or with `ecn` mark) with a probability,
//! at `max` and above always; a VQ over its own byte `limit` tail-drops (`pdrop`).
//!
//! # Configuration, as the kernel's
//!
//! `tc qdisc add … gred setup vqs N default D [grio] [limit BYTES] [ecn] [harddrop]` builds the table
//! (no VQ yet: everything passes); each VQ is then configured with `tc qdisc change … gred vq I limit …
//! min … max … avpkt …` — configuring a VQ at `add` is refused, as is configuring both in one request.
//! Flags are the table's (`setup … ecn`) or each VQ's, never both.
//!
//! # What tclab models and how
//!
//! All of the above with the RED law of [`super::red_impl`], the kernel's counters per VQ and the
//! per-VQ lines of `tc -s qdisc show` (average, backlog, early/forced/pdrop drops, marks, packets and
//! bytes in). The DP comes from [`Packet::tc_index`], which an ingress or clsact filter sets (`classid
//! :N` puts N there, as `tc_run` does). The average `tc -s` shows for an idle VQ is decayed to the time
//! of the qdisc's last packet event: a dump has no clock of its own.

use super::red::{TC_RED_ECN, TC_RED_HARDDROP};
use super::red_impl::{check_params, RedAction, RedParms, RedVars, RED_STAB_SIZE};
use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::flow::splitmix64;
use crate::packet::Packet;
use crate::qdisc::codel_impl::set_ce;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `MAX_DPs`: virtual queues per qdisc.
pub const MAX_DPS: u32 = 16;
/// `GRED_DEF_PRIO`: the prio of a VQ outside RIO mode, or configured without one.
const DEF_PRIO: u8 = (MAX_DPS / 2) as u8;
/// `GRED_VQ_RED_FLAGS`: the flags a VQ may carry.
const VQ_RED_FLAGS: u32 = (TC_RED_ECN | TC_RED_HARDDROP) as u32;

/// `struct tc_gred_sopt` and `TCA_GRED_LIMIT`: what `gred setup` sends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredSetup {
    pub dps: u32,
    pub def_dp: u32,
    pub grio: bool,
    /// Table-wide RED flags (ecn, harddrop).
    pub flags: u8,
    /// The qdisc's byte limit; `None` keeps it (at creation: txqueuelen × psched_mtu).
    pub limit: Option<u32>,
}

/// `struct tc_gred_qopt` with the `Stab` table, `max_P` and the VQ's flags: what `gred vq I …` sends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredVqOptions {
    pub dp: u32,
    pub limit: u32,
    pub qth_min: u32,
    pub qth_max: u32,
    pub wlog: u8,
    pub plog: u8,
    pub scell_log: u8,
    /// 0: no prio given (RIO then uses the default VQ's).
    pub prio: u8,
    pub stab: Vec<u8>,
    pub max_p: u32,
    /// `TCA_GRED_VQ_FLAGS` (tc always sends them, 0 without `ecn`/`harddrop`).
    pub flags: u32,
}

/// One VQ as `gred_dump` reports it: its parameters and counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredVqDump {
    pub dp: u32,
    pub prio: u8,
    pub limit: u32,
    pub qth_min: u32,
    pub qth_max: u32,
    pub wlog: u8,
    pub plog: u8,
    pub scell_log: u8,
    pub max_p: u32,
    pub flags: u32,
    /// Bytes the VQ's decisions see (the whole queue's in WRED mode).
    pub backlog: u32,
    /// The average, in bytes.
    pub qave: u32,
    pub bytesin: u64,
    pub packetsin: u32,
    pub prob_drop: u32,
    pub prob_mark: u32,
    pub forced_drop: u32,
    pub forced_mark: u32,
    pub pdrop: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "gred", rename_all = "snake_case")]
pub enum GredOptions {
    /// `gred setup …`: the table.
    Setup(GredSetup),
    /// `gred vq I …`: one virtual queue (a change only).
    Vq(GredVqOptions),
    /// What the qdisc reports: the table (with its limit) and its VQs.
    Dump {
        setup: GredSetup,
        vqs: Vec<GredVqDump>,
    },
}

/// `struct gred_sched_data`.
#[derive(Serialize, Deserialize)]
struct Vq {
    limit: u32,
    red_flags: u32,
    bytesin: u64,
    packetsin: u32,
    backlog: u32,
    prio: u8,
    parms: RedParms,
    vars: RedVars,
    /// The options as given, for the dump's thresholds and max_P's origin.
    opts: GredVqOptions,
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: every VQ's RED state and counters.
#[derive(Serialize, Deserialize)]
pub struct Gred {
    tab: [Option<Box<Vq>>; MAX_DPS as usize],
    dps: u32,
    def: u32,
    red_flags: u8,
    rio: bool,
    wred: bool,
    /// WRED mode's shared average and idle start.
    wred_set: RedVars,
    limit: u32,
    #[serde(skip)]
    queue: VecDeque<Packet>,
    stats: QdiscStats,
    rng: u64,
    /// The time of the last enqueue or dequeue, for the dump's average of an idle VQ.
    last_event: Nanos,
}

fn too_many() -> KernelError {
    KernelError::invalid("sch_gred: number of virtual queues too high")
}

impl Gred {
    /// `gred_init`: a table, no VQ.
    pub fn new(o: &GredOptions, env: &DevEnv, now: Nanos) -> Result<Gred, KernelError> {
        let GredOptions::Setup(s) = o else {
            return Err(KernelError::invalid(
                "sch_gred: virtual queue configuration can't be specified at initialization time",
            ));
        };
        let mut q = Gred {
            tab: Default::default(),
            dps: 0,
            def: 0,
            red_flags: 0,
            rio: false,
            wred: false,
            wred_set: RedVars::default(),
            limit: s
                .limit
                .unwrap_or_else(|| env.txqueuelen.wrapping_mul(env.psched_mtu())),
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
            rng: 0x6752_4544,
            last_event: now,
        };
        q.change_table_def(s)?;
        Ok(q)
    }

    /// `gred_per_vq_red_flags_used`.
    fn per_vq_flags_used(&self) -> bool {
        self.red_flags == 0 && self.tab.iter().flatten().any(|v| v.red_flags != 0)
    }

    /// `gred_wred_mode_check`: two VQs of the same prio.
    fn same_prio_twice(&self) -> bool {
        let vqs: Vec<u8> = self.tab[..self.dps as usize]
            .iter()
            .flatten()
            .map(|v| v.prio)
            .collect();
        vqs.iter()
            .enumerate()
            .any(|(i, p)| vqs[i + 1..].contains(p))
    }

    /// `gred_change_table_def`: checked, then applied.
    fn change_table_def(&mut self, s: &GredSetup) -> Result<(), KernelError> {
        if s.dps > MAX_DPS {
            return Err(too_many());
        }
        if s.dps == 0 {
            return Err(KernelError::invalid(
                "sch_gred: number of virtual queues can't be 0",
            ));
        }
        if s.def_dp >= s.dps {
            return Err(KernelError::invalid(
                "sch_gred: default virtual queue above virtual queue count",
            ));
        }
        if s.flags != 0 && self.per_vq_flags_used() {
            return Err(KernelError::invalid(
                "sch_gred: can't set per-Qdisc RED flags when per-virtual queue flags are used",
            ));
        }
        if let Some(l) = s.limit {
            self.limit = l;
        }
        self.dps = s.dps;
        self.def = s.def_dp;
        let flags_changed = self.red_flags != s.flags;
        self.red_flags = s.flags;
        self.rio = s.grio;
        self.wred = s.grio && self.same_prio_twice();
        if flags_changed {
            for v in self.tab[..s.dps as usize].iter_mut().flatten() {
                v.red_flags = s.flags as u32 & VQ_RED_FLAGS;
            }
        }
        // VQs past the new count are destroyed ("Destroying shadowed VQ").
        for v in self.tab[s.dps as usize..].iter_mut() {
            *v = None;
        }
        Ok(())
    }

    /// `gred_change` with VQ options: validated whole, then applied.
    fn change_vq(&mut self, o: &GredVqOptions) -> Result<(), KernelError> {
        if o.dp >= self.dps {
            return Err(KernelError::invalid(
                "sch_gred: virtual queue index above virtual queue count",
            ));
        }
        // `gred_vqs_validate` (tc sends one entry: this VQ with its flags).
        if self.red_flags != 0 && self.red_flags as u32 != o.flags {
            return Err(KernelError::invalid(
                "sch_gred: can't change per-virtual queue RED flags when per-Qdisc flags are used",
            ));
        }
        if o.flags & !VQ_RED_FLAGS != 0 {
            return Err(KernelError::invalid(
                "sch_gred: invalid RED flags specified",
            ));
        }
        if o.stab.len() < RED_STAB_SIZE
            || !check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, &o.stab)
        {
            return Err(KernelError::invalid("sch_gred: invalid RED parameters"));
        }
        let prio = if !self.rio {
            DEF_PRIO
        } else if o.prio == 0 {
            self.tab[self.def as usize]
                .as_ref()
                .map_or(DEF_PRIO, |d| d.prio)
        } else {
            o.prio
        };
        let limit = o.limit.min(self.limit);
        let parms = RedParms::new(
            o.qth_min,
            o.qth_max,
            o.wlog,
            o.plog,
            o.scell_log,
            &o.stab,
            o.max_p,
        );
        let table_flags = self.red_flags as u32 & VQ_RED_FLAGS;
        let v = self.tab[o.dp as usize].get_or_insert_with(|| {
            Box::new(Vq {
                limit: 0,
                red_flags: table_flags,
                bytesin: 0,
                packetsin: 0,
                backlog: 0,
                prio: DEF_PRIO,
                parms: parms.clone(),
                vars: RedVars::default(),
                opts: o.clone(),
                prob_drop: 0,
                prob_mark: 0,
                forced_drop: 0,
                forced_mark: 0,
                pdrop: 0,
            })
        });
        v.prio = prio;
        v.limit = limit;
        if v.backlog == 0 {
            v.vars.idle_since = None;
        }
        v.parms = parms;
        // `red_set_vars`: the average starts again; the idle state and qR stay.
        v.vars.qavg = 0;
        v.vars.qcount = -1;
        v.opts = o.clone();
        // `gred_vqs_apply`.
        v.red_flags = o.flags;
        if self.rio {
            self.wred = self.same_prio_twice();
        }
        Ok(())
    }

    /// The VQ a packet's DP selects, else the default one, as an index; `None` when neither exists.
    fn vq_of(&self, pkt: &Packet) -> Option<usize> {
        let dp = (pkt.tc_index as u32 & (MAX_DPS - 1)) as usize;
        if (dp as u32) < self.dps && self.tab[dp].is_some() {
            return Some(dp);
        }
        self.tab[self.def as usize]
            .as_ref()
            .map(|_| self.def as usize)
    }

    /// `gred_backlog`.
    fn backlog_for(&self, i: usize) -> u32 {
        if self.wred {
            self.stats.backlog
        } else {
            self.tab[i].as_ref().map_or(0, |v| v.backlog)
        }
    }

    fn tail_drop(&mut self, pkt: Packet, cx: &mut Cx, reason: DropReason) -> Verdict {
        self.stats.drops += 1;
        cx.drop_arriving(pkt, reason);
        Verdict::Drop
    }

    fn dump_vq(&self, v: &Vq, i: usize) -> GredVqDump {
        let vars = if self.wred { &self.wred_set } else { &v.vars };
        let qavg = if vars.idle_since.is_some() {
            vars.calc_qavg(&v.parms, 0, self.last_event)
        } else {
            vars.qavg
        };
        GredVqDump {
            dp: i as u32,
            prio: v.prio,
            limit: v.limit,
            qth_min: v.opts.qth_min,
            qth_max: v.opts.qth_max,
            wlog: v.opts.wlog,
            plog: v.opts.plog,
            scell_log: v.opts.scell_log,
            max_p: v.parms.max_p,
            flags: v.red_flags,
            backlog: self.backlog_for(i),
            qave: (qavg >> v.parms.wlog) as u32,
            bytesin: v.bytesin,
            packetsin: v.packetsin,
            prob_drop: v.prob_drop,
            prob_mark: v.prob_mark,
            forced_drop: v.forced_drop,
            forced_mark: v.forced_mark,
            pdrop: v.pdrop,
        }
    }
}

impl Qdisc for Gred {
    fn kind(&self) -> &'static str {
        "gred"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.queue.is_empty())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `gred_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        self.last_event = cx.now;
        let Some(i) = self.vq_of(&pkt) else {
            // No VQ for its DP and no default VQ: it passes, within the qdisc's limit.
            if self.stats.backlog as u64 + pkt.len as u64 <= self.limit as u64 {
                self.stats.count_queued(&pkt);
                self.queue.push_back(pkt);
                return Verdict::Success;
            }
            return self.tail_drop(pkt, cx, DropReason::TailDrop);
        };
        // A packet sent to the default VQ is told so (for its dequeue).
        pkt.tc_index = (pkt.tc_index & !(MAX_DPS as u16 - 1)) | i as u16;
        // RIO: the averages of the busy VQs of a better prio add to this one's.
        let mut extra = 0u64;
        if !self.wred && self.rio {
            let prio = self.tab[i].as_ref().map_or(DEF_PRIO, |v| v.prio);
            extra = self.tab[..self.dps as usize]
                .iter()
                .flatten()
                .filter(|o| o.prio < prio && o.vars.idle_since.is_none())
                .map(|o| o.vars.qavg)
                .sum();
        }
        let backlog = self.backlog_for(i);
        let (wred, wred_set) = (self.wred, &mut self.wred_set);
        let Some(v) = self.tab[i].as_mut() else {
            // (`vq_of` found it: not reached, but never a packet lost uncounted.)
            return self.tail_drop(pkt, cx, DropReason::TailDrop);
        };
        v.packetsin = v.packetsin.wrapping_add(1);
        v.bytesin += pkt.len as u64;
        if wred {
            v.vars.qavg = wred_set.qavg;
            v.vars.idle_since = wred_set.idle_since;
        }
        v.vars.qavg = v.vars.calc_qavg(&v.parms, backlog, cx.now);
        v.vars.idle_since = None;
        if wred {
            wred_set.qavg = v.vars.qavg;
            wred_set.idle_since = None;
        }
        let rng = &mut self.rng;
        let qavg = v.vars.qavg + extra;
        let action = v
            .vars
            .action(&v.parms, qavg, &mut || (splitmix64(rng) >> 32) as u32);
        let ecn = v.red_flags & TC_RED_ECN as u32 != 0;
        let congestion_drop = match action {
            RedAction::DontMark => false,
            RedAction::ProbMark => {
                self.stats.overlimits += 1;
                if ecn && set_ce(&mut pkt) {
                    v.prob_mark += 1;
                    false
                } else {
                    v.prob_drop += 1;
                    true
                }
            }
            RedAction::HardMark => {
                self.stats.overlimits += 1;
                let harddrop = v.red_flags & TC_RED_HARDDROP as u32 != 0;
                if !harddrop && ecn && set_ce(&mut pkt) {
                    v.forced_mark += 1;
                    false
                } else {
                    v.forced_drop += 1;
                    true
                }
            }
        };
        if congestion_drop {
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Aqm);
            return Verdict::Cn;
        }
        if backlog as u64 + pkt.len as u64 <= v.limit as u64 {
            v.backlog += pkt.len;
            self.stats.count_queued(&pkt);
            self.queue.push_back(pkt);
            return Verdict::Success;
        }
        v.pdrop += 1;
        self.tail_drop(pkt, cx, DropReason::TailDrop)
    }

    /// `gred_dequeue`: the FIFO's head; the VQ it came from may start an idle period.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.last_event = cx.now;
        let pkt = self.queue.pop_front()?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        let dp = (pkt.tc_index as u32 & (MAX_DPS - 1)) as usize;
        let queue_empty = self.stats.backlog == 0;
        if (dp as u32) < self.dps {
            if let Some(v) = self.tab[dp].as_mut() {
                // A VQ reconfigured while packets were queued can be short of them ("screwing up
                // backlog" in the kernel's words): saturate rather than wrap.
                v.backlog = v.backlog.saturating_sub(pkt.len);
                if self.wred {
                    if queue_empty {
                        self.wred_set.idle_since = Some(cx.now);
                    }
                } else if v.backlog == 0 {
                    v.vars.idle_since = Some(cx.now);
                }
            }
        }
        Some(pkt)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.queue.front()
    }

    /// `gred_reset`.
    fn reset(&mut self) {
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        for v in self.tab[..self.dps as usize].iter_mut().flatten() {
            v.vars.restart();
            v.backlog = 0;
        }
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `gred_dump`.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Gred(GredOptions::Dump {
            setup: GredSetup {
                dps: self.dps,
                def_dp: self.def,
                grio: self.rio,
                flags: self.red_flags,
                limit: Some(self.limit),
            },
            vqs: self
                .tab
                .iter()
                .enumerate()
                .filter_map(|(i, v)| Some(self.dump_vq(v.as_ref()?, i)))
                .collect(),
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Gred(GredOptions::Setup(s)) => self.change_table_def(s),
            QdiscOptions::Gred(GredOptions::Vq(v)) => self.change_vq(v),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
        .map(|_| Vec::new())
    }

    fn set_seed(&mut self, seed: u64) {
        self.rng = seed ^ 0x6752_4544;
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "gred",
    create: |_handle, opts, env, now| match opts {
        QdiscOptions::Gred(o) => Ok((Box::new(Gred::new(o, env, now)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_vqs_is_the_kernels_error() {
        let env = DevEnv {
            txqueues: 1,
            txqueuelen: 1000,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        };
        let setup = |dps, def_dp| {
            GredOptions::Setup(GredSetup {
                dps,
                def_dp,
                ..Default::default()
            })
        };
        assert_eq!(
            Gred::new(&setup(17, 1), &env, 0)
                .err()
                .map(|e| e.to_string()),
            Some(too_many().to_string())
        );
        assert!(Gred::new(&setup(16, 16), &env, 0).is_err());
        let q = Gred::new(&setup(16, 15), &env, 0).expect("16 VQs, default 15");
        // tx_queue_len × (mtu + Ethernet header).
        assert_eq!(q.limit, 1_514_000);
    }
}
