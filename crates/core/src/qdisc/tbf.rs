//! TBF — the token bucket filter, after `net/sched/sch_tbf.c`.
//!
//! Tokens are kept as *time*: `tokens` nanoseconds of sending at `rate`, at most `buffer` (the burst). A
//! packet of `len` bytes costs `l2t(len)` nanoseconds of tokens. Between two dequeues the bucket refills by the
//! time that passed. The head packet may leave when, after refilling, the bucket would not go negative; so
//! for any interval the bytes sent satisfy
//!
//! ```text
//!     s_i + ... + s_k <= B + R * (t_k - t_i)
//! ```
//!
//! With a `peakrate` a second bucket, `mtu` deep, bounds how fast the burst itself may drain:
//! `s_i + ... + s_k <= M + P * (t_k - t_i)`. A packet that may not leave yet stays at the head: TBF asks to
//! be woken when the deficit will have been refilled and counts an overlimit. It MUST NOT send a later,
//! shorter packet first — reordering would break TCP.
//!
//! Packets larger than `max_size` (the burst, or the peak bucket if smaller) can never be sent and are dropped
//! on arrival — except a GSO super-packet whose frames would fit: it is segmented and each frame queued on
//! its own (`tbf_segment`). The queue itself is the child qdisc, a bfifo of `limit` bytes unless another qdisc is grafted
//! under class `handle:1`. The bucket starts full, so the first `burst` bytes leave at line speed — the spike
//! seed 000 saw with a huge burst.

use super::fifo::Fifo;
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions,
    QdiscStats, Sched, Verdict,
};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::units::{ns_to_ticks, ticks_to_ns, RateCfg, RateSpec};
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `struct tc_tbf_qopt` plus `TCA_TBF_BURST`/`TCA_TBF_PBURST`, as tc sends them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TbfOptions {
    pub rate: RateSpec,
    /// `rate == 0` means no peak rate.
    pub peakrate: RateSpec,
    /// Bytes the child bfifo may hold.
    pub limit: u32,
    /// Bucket depth in psched ticks (tc's rounding).
    pub buffer: u32,
    /// Peak bucket depth in psched ticks.
    pub mtu: u32,
    /// The burst in bytes, when tc sent it (it always does); the kernel then recomputes `buffer` from it.
    pub burst: Option<u32>,
    pub pburst: Option<u32>,
}

#[derive(Serialize, Deserialize)]
pub struct Tbf {
    // parameters
    limit: u32,
    max_size: u32,
    rate: RateCfg,
    peak: Option<RateCfg>,
    /// Bucket depths in ns.
    buffer: i64,
    mtu: i64,
    // variables
    tokens: i64,
    ptokens: i64,
    /// Time of the last send (`t_c`).
    t_c: Nanos,
    /// The child; `None` is the kernel's noop qdisc (drops everything) after its child was deleted.
    child: Option<Sched>,
    handle: Handle,
    stats: QdiscStats,
    /// The packet a parent's peek dequeued (`gso_skb`), next out.
    #[serde(skip)]
    peeked: Peeked,
}

impl Tbf {
    pub fn new(
        handle: Handle,
        opts: &TbfOptions,
        env: &DevEnv,
        now: Nanos,
    ) -> Result<(Tbf, Vec<Warning>), KernelError> {
        let mut q = Tbf {
            limit: 0,
            max_size: 0,
            rate: RateCfg::default(),
            peak: None,
            buffer: 0,
            mtu: 0,
            tokens: 0,
            ptokens: 0,
            t_c: now,
            child: None,
            handle,
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        };
        let w = q.apply(opts, env)?;
        Ok((q, w))
    }

    /// `tbf_change`: validate everything, then apply.
    fn apply(&mut self, o: &TbfOptions, _env: &DevEnv) -> Result<Vec<Warning>, KernelError> {
        let rate = RateCfg::new(&o.rate);
        let mut buffer = ticks_to_ns(o.buffer as u64).min(u32::MAX as u64);
        let mut mtu = ticks_to_ns(o.mtu as u64).min(u32::MAX as u64);
        let mut max_size: u64 = match o.burst {
            Some(burst) => {
                buffer = rate.l2t_ns(burst);
                burst as u64
            }
            None => rate.ns_t2l(buffer).min(u32::MAX as u64),
        };
        let peak = if o.peakrate.rate != 0 {
            let peak = RateCfg::new(&o.peakrate);
            if peak.rate_bytes_ps <= rate.rate_bytes_ps {
                // The kernel only logs "sch_tbf: peakrate %llu is lower than or equals to rate %llu !"
                return Err(KernelError::new(Errno::Invalid));
            }
            match o.pburst {
                Some(pburst) => {
                    max_size = max_size.min(pburst as u64);
                    mtu = peak.l2t_ns(pburst);
                }
                None => max_size = max_size.min(peak.ns_t2l(mtu)),
            }
            Some(peak)
        } else {
            None
        };
        if max_size == 0 {
            return Err(KernelError::new(Errno::Invalid));
        }
        // Apply.
        match &mut self.child {
            Some(c) => c.q.set_limit(o.limit),
            None if o.limit > 0 => {
                self.child = Some(Sched::new(
                    Handle::UNSPEC,
                    Handle(self.handle.0 | 1),
                    Box::new(Fifo::bfifo(o.limit)),
                ))
            }
            None => {}
        }
        self.limit = o.limit;
        self.mtu = mtu as i64;
        self.max_size = max_size as u32;
        self.buffer = buffer as i64;
        self.tokens = self.buffer;
        self.ptokens = self.mtu;
        self.rate = rate;
        self.peak = peak;
        Ok(Vec::new())
    }
}

impl Tbf {
    /// The dequeue itself; [`Qdisc::dequeue`] wraps it to follow its children's drops.
    fn dequeue_own(&mut self, cx: &mut Cx) -> Option<Packet> {
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        let child = self.child.as_mut()?;
        let len = child.q.peek(cx)?.len;
        let now = cx.now;
        let elapsed = (now.saturating_sub(self.t_c) as i64).min(self.buffer);
        let mut ptoks = 0i64;
        if let Some(peak) = &self.peak {
            ptoks = (elapsed + self.ptokens).min(self.mtu) - peak.l2t_ns(len) as i64;
        }
        let toks = (elapsed + self.tokens).min(self.buffer) - self.rate.l2t_ns(len) as i64;
        if (toks | ptoks) >= 0 {
            let pkt = child.q.dequeue(cx)?;
            self.t_c = now;
            self.tokens = toks;
            self.ptokens = ptoks;
            self.stats.backlog -= pkt.len;
            self.stats.qlen -= 1;
            self.stats.count_sent(&pkt);
            return Some(pkt);
        }
        cx.schedule(now + (-toks).max(-ptoks) as u64);
        self.stats.overlimits += 1;
        None
    }

    /// `tbf_segment`: a GSO packet too large for the bucket whose frames are not is segmented, and each
    /// frame is offered to the child on its own (charged its own length: no size table). The packet counts
    /// as queued if any frame was; the ancestors, which will count one packet of the whole length, are told
    /// the difference (`qdisc_tree_reduce_backlog(sch, 1 - nb, prev_len - len)`).
    fn segment(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let prev_len = pkt.len;
        let (mut nb, mut len) = (0u32, 0u32);
        let segs = pkt.gso_segment();
        cx.gso_split += segs.len() as u32 - 1;
        for seg in segs {
            let seg_len = seg.len;
            let v = match self.child.as_mut() {
                Some(child) => {
                    let mark = cx.tree_reduced;
                    let v = child.q.enqueue(seg, cx);
                    self.stats.reduce(cx.reduced_since(mark));
                    v
                }
                None => {
                    cx.drop_arriving(seg, DropReason::Unclassified);
                    Verdict::Cn
                }
            };
            if v == Verdict::Success {
                nb += 1;
                len += seg_len;
            } else if v.counts_drop() {
                self.stats.drops += 1;
            }
        }
        if nb == 0 {
            return Verdict::Drop;
        }
        self.stats.qlen += nb;
        self.stats.backlog += len;
        cx.reduce_backlog(1 - nb as i64, prev_len as i64 - len as i64);
        Verdict::Success
    }
}

impl Qdisc for Tbf {
    fn kind(&self) -> &'static str {
        "tbf"
    }

    /// Its child saves itself inside it.
    fn save(&self) -> Option<Vec<u8>> {
        self.peeked
            .get()
            .is_none()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `tbf_enqueue`: a packet the bucket could never pass is dropped; the rest go to the child, whose
    /// verdict is passed on (a drop counted when `net_xmit_drop_count` says so).
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let len = pkt.len;
        if len > self.max_size {
            if pkt.is_gso() && pkt.gso_frame_max() <= self.max_size {
                return self.segment(pkt, cx);
            }
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Overlimit);
            return Verdict::Drop;
        }
        let Some(child) = self.child.as_mut() else {
            // `noop_enqueue` drops it and answers NET_XMIT_CN.
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Unclassified);
            return Verdict::Cn;
        };
        super::one_child_enqueue(child, &mut self.stats, pkt, cx)
    }

    /// `tbf_dequeue`: the child's head leaves if both buckets hold its cost; otherwise TBF asks to be
    /// woken when they will, and counts an overlimit. A packet held by a parent's peek goes first.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        // A child that dropped packets while dequeuing (an AQM) took them off its counters; take them
        // off ours (`qdisc_tree_reduce_backlog`).
        let mark = cx.tree_reduced;
        let p = self.dequeue_own(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`, as the kernel's TBF peeks: the packet is dequeued (tokens charged, counted
    /// as sent) and held for the next dequeue, so a parent sees only a packet the buckets let go now.
    /// A head the tokens do not allow yet is not shown: the watchdog is armed instead, as `tbf_dequeue`
    /// arms it. (Showing it would let DRR charge a deficit for a packet that then does not come.)
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    fn reset(&mut self) {
        self.peeked.clear();
        if let Some(c) = self.child.as_mut() {
            c.q.reset();
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.tokens = self.buffer;
        self.ptokens = self.mtu;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `tbf_dump`: burst and mtu go back as ticks; the rates as the kernel kept them.
    fn dump(&self) -> QdiscOptions {
        let spec = RateCfg::spec;
        QdiscOptions::Tbf(TbfOptions {
            rate: spec(&self.rate),
            peakrate: self.peak.as_ref().map(spec).unwrap_or_default(),
            limit: self.limit,
            buffer: ns_to_ticks(self.buffer as u64) as u32,
            mtu: ns_to_ticks(self.mtu as u64) as u32,
            burst: None,
            pburst: None,
        })
    }

    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Tbf(o) => self.apply(o, env),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
}

/// TBF has one class, `handle:1`, whose leaf is the queue. `tbf_find` answers yes for every classid of
/// the qdisc, so a child added with `parent 1:` (or `1:5`) is grafted as with `parent 1:1`.
impl ClassOps for Tbf {
    fn find(&self, _classid: Handle) -> bool {
        true
    }
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.find(classid).then_some(())?;
        self.child.as_ref()
    }
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.find(classid).then_some(())?;
        self.child.as_mut()
    }
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        if !self.find(classid) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified class not found",
            ));
        }
        Ok(super::one_child_graft(
            &mut self.child,
            &mut self.stats,
            new,
        ))
    }
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: &ClassOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn delete_class(&mut self, _: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn walk(&self, _now: Nanos) -> Vec<ClassInfo> {
        super::one_child_walk("tbf", self.handle, &self.child)
    }
    fn children(&self) -> Vec<&Sched> {
        self.child.iter().collect()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.child.iter_mut().collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "tbf",
    create: |handle, opts, env, now| match opts {
        QdiscOptions::Tbf(o) => {
            let (q, w) = Tbf::new(handle, o, env, now)?;
            Ok((Box::new(q), w))
        }
        _ => Err(super::wrong_kind()),
    },
};
