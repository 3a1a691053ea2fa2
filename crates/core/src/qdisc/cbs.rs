//! CBS, the credit-based shaper of IEEE 802.1Q-2014 §8.6.8.2 (Qav), in software (`sch_cbs.c`).
//!
//! A class of audio/video traffic may send while its *credit* is not negative. Credit grows at
//! `idleslope` while packets wait and shrinks at `sendslope` (negative: idleslope − port rate) while one
//! is sent; it is kept within `[locredit, hicredit]`. Sending a packet of `len` bytes costs
//! `len × sendslope / port_rate` credits, and the next packet may not start before this one has left the
//! port (`last = now + len / port_rate`). When credit is negative the queue waits until it has earned
//! back to 0 at `idleslope` (a watchdog wake-up). Over a long run the class therefore gets exactly
//! `idleslope` when sendslope = idleslope − port rate, whatever the packet sizes. When the queue empties
//! with positive credit, the credit drops to 0 at the next arrival (no saving up while idle).
//!
//! Slopes are given in kbit/s and kept in bytes/s (× 125); credits are bytes. The port rate is the
//! device's link speed as ethtool reports it when the qdisc is made or changed (`cbs_set_port_rate`);
//! for a device that reports none it is the kernel's fallback, 10 Mbit/s (`SPEED_10`). (The kernel
//! works it out in an int, which overflows past 17 Gbit/s; tclab in 64 bits.) Packets queue in a child qdisc: a `pfifo` of the
//! device's `txqueuelen` packets, visible in `tc qdisc show` as `pfifo 0: parent X:`. Hardware
//! offload (`offload 1`) is refused, as on a device without `ndo_setup_tc`.

use super::fifo::Fifo;
use super::{
    ClassInfo, ClassOps, ClassOptions, Cx, DevEnv, DropReason, Peeked, Qdisc, QdiscOptions,
    QdiscStats, Sched, Verdict,
};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `BYTES_PER_KBIT`.
const BYTES_PER_KBIT: i64 = 125;
/// `SPEED_10` (Mbit/s) × 1000 × `BYTES_PER_KBIT`: the port rate of a device without a link speed.
pub const DEFAULT_PORT_RATE: i64 = 10 * 1000 * BYTES_PER_KBIT;

/// `cbs_set_port_rate`: bytes a second at the link speed (Mbit/s; 0 for none: `SPEED_10`).
fn port_rate(speed: u32) -> i64 {
    match speed {
        0 | u32::MAX => DEFAULT_PORT_RATE,
        s => i64::from(s) * 1000 * BYTES_PER_KBIT,
    }
}
const NSEC_PER_SEC: i64 = 1_000_000_000;

/// `struct tc_cbs_qopt`: credits in bytes, slopes in kbit/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbsOptions {
    pub offload: u8,
    pub hicredit: i32,
    pub locredit: i32,
    pub idleslope: i32,
    pub sendslope: i32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued (the child saves its own queue or
/// refuses): the credits and the last departure come with it.
#[derive(Serialize, Deserialize)]
pub struct Cbs {
    // Parameters.
    hicredit: i64,
    locredit: i64,
    /// Bytes per second.
    idleslope: i64,
    sendslope: i64,
    port_rate: i64,
    // Variables.
    /// When the last packet sent leaves the port (ns); credit is counted from it while waiting.
    last: i64,
    credits: i64,
    child: Option<Sched>,
    handle: Handle,
    txqueuelen: u32,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
}

impl Cbs {
    pub fn new(
        handle: Handle,
        o: &CbsOptions,
        env: &DevEnv,
    ) -> Result<(Cbs, Vec<Warning>), KernelError> {
        let mut q = Cbs {
            hicredit: 0,
            locredit: 0,
            idleslope: 0,
            sendslope: 0,
            port_rate: port_rate(env.speed),
            last: 0,
            credits: 0,
            child: Some(Self::default_child(handle, env.txqueuelen)),
            handle,
            txqueuelen: env.txqueuelen,
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        };
        q.apply(o)?;
        Ok((q, Vec::new()))
    }

    /// `qdisc_create_dflt(…, &pfifo_qdisc_ops, sch->handle)`: a pfifo of `txqueuelen` packets.
    fn default_child(handle: Handle, txqueuelen: u32) -> Sched {
        Sched::new(Handle::UNSPEC, handle, Box::new(Fifo::pfifo(txqueuelen)))
    }

    /// `cbs_change`.
    fn apply(&mut self, o: &CbsOptions) -> Result<(), KernelError> {
        if o.offload != 0 {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Specified device does not support cbs offload",
            ));
        }
        self.hicredit = i64::from(o.hicredit);
        self.locredit = i64::from(o.locredit);
        self.idleslope = i64::from(o.idleslope) * BYTES_PER_KBIT;
        self.sendslope = i64::from(o.sendslope) * BYTES_PER_KBIT;
        Ok(())
    }

    /// `cbs_dequeue_soft`.
    fn dequeue_soft(&mut self, cx: &mut Cx) -> Option<Packet> {
        if let Some(p) = self.peeked.take(&mut self.stats) {
            return Some(p);
        }
        let now = cx.now as i64;
        if now < self.last {
            // The previous packet is still being sent.
            cx.schedule(self.last as u64);
            return None;
        }
        if self.credits < 0 {
            let earned = (now - self.last) * self.idleslope / NSEC_PER_SEC;
            self.credits = (self.credits + earned).min(self.hicredit);
            if self.credits < 0 {
                if self.idleslope > 0 {
                    // delay_from_credits divides down, and timediff_to_credits then earns a credit
                    // short of 0 (one credit at 30 Mbit/s is 266.7 ns: 266 ns earn none). The
                    // kernel's timer, always a little late, gets past it; virtual time is exact and
                    // would wake at the same instant for ever, so the delay is rounded up: the first
                    // nanosecond at which the credit is back.
                    let delay =
                        (-self.credits * NSEC_PER_SEC + self.idleslope - 1) / self.idleslope;
                    cx.schedule((now + delay) as u64);
                }
                self.last = now;
                return None;
            }
        }
        let pkt = self.child.as_mut()?.q.dequeue(cx)?;
        self.stats.backlog -= pkt.len;
        self.stats.qlen -= 1;
        self.stats.count_sent(&pkt);
        let len = i64::from(pkt.len);
        let cost = len * self.sendslope / self.port_rate;
        self.credits = (self.credits + cost).max(self.locredit);
        self.last = now + len * NSEC_PER_SEC / self.port_rate;
        Some(pkt)
    }
}

impl Qdisc for Cbs {
    fn kind(&self) -> &'static str {
        "cbs"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.peeked.get().is_none() && self.stats.qlen == 0)
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `cbs_enqueue_soft`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        if self.stats.qlen == 0 && self.credits > 0 {
            // No credit saved up while nothing waited.
            self.credits = 0;
            self.last = cx.now as i64;
        }
        let Some(child) = self.child.as_mut() else {
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Unclassified);
            return Verdict::Drop;
        };
        super::one_child_enqueue(child, &mut self.stats, pkt, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let mark = cx.tree_reduced;
        let p = self.dequeue_soft(cx);
        self.stats.reduce(cx.reduced_since(mark));
        p
    }

    /// `qdisc_peek_dequeued`.
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.get().is_none() {
            let p = self.dequeue(cx)?;
            self.peeked.hold(p, &mut self.stats);
        }
        self.peeked.get()
    }

    /// `qdisc_reset_queue`.
    fn reset(&mut self) {
        self.peeked.clear();
        if let Some(c) = self.child.as_mut() {
            c.q.reset();
        }
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    /// `cbs_dump`: the slopes back in kbit/s.
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Cbs(CbsOptions {
            offload: 0,
            hicredit: self.hicredit as i32,
            locredit: self.locredit as i32,
            idleslope: (self.idleslope / BYTES_PER_KBIT) as i32,
            sendslope: (self.sendslope / BYTES_PER_KBIT) as i32,
        })
    }

    /// `cbs_dev_notifier`.
    fn link_changed(&mut self, env: &DevEnv) {
        self.port_rate = port_rate(env.speed);
    }
    fn change(
        &mut self,
        opts: &QdiscOptions,
        env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        match opts {
            QdiscOptions::Cbs(o) => self.apply(o).map(|()| {
                self.port_rate = port_rate(env.speed);
                Vec::new()
            }),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    fn classes(&self) -> Option<&dyn ClassOps> {
        Some(self)
    }
    fn classes_mut(&mut self) -> Option<&mut dyn ClassOps> {
        Some(self)
    }
    fn hashes_children(&self) -> bool {
        true
    }
}

/// One class (`cbs_class_ops`): its leaf is the child qdisc.
impl ClassOps for Cbs {
    fn find(&self, _classid: Handle) -> bool {
        true
    }
    fn leaf(&self, _classid: Handle) -> Option<&Sched> {
        self.child.as_ref()
    }
    fn leaf_mut(&mut self, _classid: Handle) -> Option<&mut Sched> {
        self.child.as_mut()
    }
    /// `cbs_graft`: no qdisc given puts a default pfifo back.
    fn graft(
        &mut self,
        _classid: Handle,
        new: Option<Sched>,
        _env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        let new = new.or_else(|| Some(Self::default_child(self.handle, self.txqueuelen)));
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
        super::one_child_walk("cbs", self.handle, &self.child)
    }
    fn children(&self) -> Vec<&Sched> {
        self.child.iter().collect()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.child.iter_mut().collect()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "cbs",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Cbs(o) => {
            let (q, w) = Cbs::new(handle, o, env)?;
            Ok((Box::new(q), w))
        }
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

    /// A backlogged queue of 1 000-byte packets, dequeued whenever allowed, for `until` ns: bytes out.
    fn run(o: &CbsOptions, until: u64) -> u64 {
        let (mut q, _) = Cbs::new(Handle(0x10000), o, &ENV).unwrap();
        let mut now = 0u64;
        for _ in 0..900 {
            let _ = q.enqueue(Packet::of_len(1000), &mut Cx::new(0));
        }
        let mut sent = 0;
        while now < until {
            let mut cx = Cx::new(now);
            match q.dequeue(&mut cx) {
                Some(p) => sent += u64::from(p.len),
                None => now = cx.wake_at.expect("a wake-up while backlogged"),
            }
        }
        sent
    }

    #[test]
    fn a_backlogged_class_gets_its_idleslope() {
        // 2 Mbit/s of a 10 Mbit/s port: sendslope = 2000 − 10 000 kbit/s.
        let o = CbsOptions {
            idleslope: 2000,
            sendslope: -8000,
            hicredit: 1000,
            locredit: -8000,
            offload: 0,
        };
        // Each packet costs 1000 × 8000/10000 = 800 credits, earned back in 3.2 ms at 250 000 B/s
        // after its 0.8 ms on the port: one packet per 4 ms, 250 in a second, 2 Mbit/s exactly.
        assert_eq!(run(&o, 1_000_000_000), 250_000);
    }

    #[test]
    fn offload_is_refused_and_slopes_dump_in_kbit() {
        let mut o = CbsOptions {
            idleslope: 666,
            sendslope: -9334,
            ..CbsOptions::default()
        };
        let (q, _) = Cbs::new(Handle(0x10000), &o, &ENV).unwrap();
        assert_eq!(q.dump(), QdiscOptions::Cbs(o));
        o.offload = 1;
        assert_eq!(
            Cbs::new(Handle(0x10000), &o, &ENV).err().unwrap().errno,
            Errno::NotSupported
        );
    }
}
