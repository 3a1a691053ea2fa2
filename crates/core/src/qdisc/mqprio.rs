//! `mqprio` (`sch_mqprio.c`, software mode `hw 0`): `mq` with traffic classes.
//!
//! Like `mq`, it is the root of a multiqueue device and keeps a qdisc per transmit queue (the default
//! one, pfifo_fast), listed as classes `handle:1…N`. On top it sets the device's traffic classes: a map
//! from the packet's priority (`skb->priority & 15`) to a class, and per class a range of queues
//! (`count@offset`). `netdev_pick_tx` then hashes a flow onto a queue of its class's range
//! (`skb_tx_hash`), unless an action chose the queue. The classes are listed too, as `handle:ffe0+tc`
//! at the root, each queue's class under the traffic class it belongs to; a traffic class's counters
//! are its queues'. The queues are served in turn, as `mq` serves them.
//!
//! `hw 1` (the tc default) asks the NIC to do this; tclab's devices have no offload, so it is refused
//! as on a device without `ndo_setup_tc`, and so with it the offload-only `mode`, `shaper` and rates.

use super::mq::Mq;
use super::{ClassInfo, ClassOps, Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats, Sched, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `TC_QOPT_MAX_QUEUE` / `TC_MAX_QUEUE`.
pub const MAX_QUEUE: usize = 16;
/// `TC_H_MIN_PRIORITY`: the first traffic class's minor.
const MIN_PRIORITY: u32 = 0xffe0;

/// `struct tc_mqprio_qopt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqprioOptions {
    pub num_tc: u8,
    pub map: [u8; MAX_QUEUE],
    pub hw: u8,
    pub count: [u16; MAX_QUEUE],
    pub offset: [u16; MAX_QUEUE],
}

fn lib_invalid(msg: String) -> KernelError {
    KernelError::invalid(format!("sch_mqprio_lib: {msg}"))
}

impl MqprioOptions {
    /// `mqprio_parse_opt` (`mqprio_validate_qopt`, then the offload check) on a device with `txqueues`.
    pub fn validate(&self, txqueues: u32) -> Result<(), KernelError> {
        self.validate_qopt(txqueues, false)?;
        if self.hw != 0 {
            return Err(KernelError::invalid(
                "Device does not support hardware offload",
            ));
        }
        Ok(())
    }

    /// `mqprio_validate_qopt` (sch_mqprio_lib.c, shared with taprio, which lets the queue ranges
    /// overlap in txtime-assist mode).
    pub fn validate_qopt(&self, txqueues: u32, allow_overlap: bool) -> Result<(), KernelError> {
        let n = usize::from(self.num_tc);
        if n > MAX_QUEUE {
            return Err(KernelError::invalid(
                "Number of traffic classes is outside valid range",
            ));
        }
        if self.map.iter().any(|&tc| tc >= self.num_tc) {
            return Err(KernelError::invalid(
                "Invalid traffic class in priority to traffic class mapping",
            ));
        }
        // `mqprio_validate_queue_counts`; with `hw 1` the driver would check them (a device without
        // offload: `validate` refuses `hw 1` after this).
        for i in (0..n).filter(|_| self.hw == 0) {
            let (c, o) = (u32::from(self.count[i]), u32::from(self.offset[i]));
            if c == 0 {
                return Err(lib_invalid(format!("No queues for TC {i}")));
            }
            if o >= txqueues || o + c > txqueues {
                return Err(lib_invalid(format!(
                    "Queues {c}:{o} for TC {i} exceed the {txqueues} TX queues available"
                )));
            }
            for j in (i + 1..n).filter(|_| !allow_overlap) {
                let (cj, oj) = (u32::from(self.count[j]), u32::from(self.offset[j]));
                if o < oj + cj && oj < o + c {
                    return Err(lib_invalid(format!(
                        "TC {i} queues {c}@{o} overlap with TC {j} queues {cj}@{oj}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// In a snapshot ([`crate::snapshot`]): its mq and the traffic classes.
#[derive(Serialize, Deserialize)]
pub struct Mqprio {
    mq: Mq,
    handle: Handle,
    opts: MqprioOptions,
}

impl Mqprio {
    /// `mqprio_init` (after the engine's root-only check).
    pub fn new(handle: Handle, o: &MqprioOptions, env: &DevEnv) -> Result<Mqprio, KernelError> {
        // `netif_is_multiqueue`.
        if env.txqueues <= 1 {
            return Err(KernelError::new(Errno::NotSupported));
        }
        o.validate(env.txqueues)?;
        Ok(Mqprio {
            mq: Mq::new(handle, env)?,
            handle,
            opts: *o,
        })
    }

    /// The traffic class of transmit queue `q` (0-based): `netdev_txq_to_tc`.
    fn tc_of_queue(&self, q: usize) -> Option<usize> {
        (0..usize::from(self.opts.num_tc)).find(|&tc| {
            let o = usize::from(self.opts.offset[tc]);
            (o..o + usize::from(self.opts.count[tc])).contains(&q)
        })
    }

    /// A traffic-class classid's class, if it is one.
    fn tc_class(&self, classid: Handle) -> Option<usize> {
        let m = classid.minor() as u32;
        (classid.major() == self.handle.major()
            && (MIN_PRIORITY..MIN_PRIORITY + u32::from(self.opts.num_tc)).contains(&m))
        .then(|| (m - MIN_PRIORITY) as usize)
    }
}

impl Qdisc for Mqprio {
    fn kind(&self) -> &'static str {
        "mqprio"
    }

    /// Its queues' qdiscs save themselves inside it (or refuse while they hold packets).
    fn save(&self) -> Option<Vec<u8>> {
        crate::snapshot::save(self)
    }

    /// `netdev_pick_tx` with the device's traffic classes.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let tc = usize::from(self.opts.map[(pkt.priority & 15) as usize]);
        let (first, count) = (
            usize::from(self.opts.offset[tc]),
            usize::from(self.opts.count[tc]),
        );
        self.mq.enqueue_in(first, count, pkt, cx)
    }
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.mq.dequeue(cx)
    }
    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.mq.peek(cx)
    }
    fn reset(&mut self) {
        self.mq.reset();
    }
    fn stats(&self) -> QdiscStats {
        self.mq.stats()
    }
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Mqprio(self.opts)
    }
    /// `mqprio_qdisc_ops` has no `change`, and tc always sends mqprio's options: `qdisc_change`
    /// refuses a change or a replace of the same handle (a new handle makes a new qdisc).
    fn change(
        &mut self,
        _: &QdiscOptions,
        _: &DevEnv,
        _: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(super::change_not_supported())
    }
    fn set_seed(&mut self, seed: u64) {
        self.mq.set_seed(seed);
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

/// `mqprio_class_ops`: the queues' classes are mq's; the traffic classes are virtual.
impl ClassOps for Mqprio {
    fn find(&self, classid: Handle) -> bool {
        self.tc_class(classid).is_some() || self.mq.find(classid)
    }
    fn leaf(&self, classid: Handle) -> Option<&Sched> {
        self.mq.leaf(classid)
    }
    fn leaf_mut(&mut self, classid: Handle) -> Option<&mut Sched> {
        self.mq.leaf_mut(classid)
    }
    /// `mqprio_graft`: a queue's class only (a traffic class has no queue: `EINVAL`).
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<Sched>,
        env: &DevEnv,
    ) -> Result<Option<Sched>, KernelError> {
        if self.tc_class(classid).is_some() {
            return Err(KernelError::new(Errno::Invalid));
        }
        self.mq.graft(classid, new, env)
    }
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: &super::ClassOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    fn delete_class(&mut self, _classid: Handle) -> Result<(), KernelError> {
        Err(KernelError::new(Errno::NotSupported))
    }
    /// `mqprio_walk` and `mqprio_dump_class`: the traffic classes at the root (their counters the sum
    /// of their queues'), then each queue under its traffic class (`parent 0:` if in none).
    fn walk(&self, now: Nanos) -> Vec<ClassInfo> {
        let queues = self.mq.walk(now);
        let mut out: Vec<ClassInfo> = (0..usize::from(self.opts.num_tc))
            .map(|tc| {
                let mut stats = QdiscStats::default();
                for (i, q) in queues.iter().enumerate() {
                    if self.tc_of_queue(i) == Some(tc) {
                        stats.bytes += q.stats.bytes;
                        stats.packets += q.stats.packets;
                        stats.drops += q.stats.drops;
                        stats.overlimits += q.stats.overlimits;
                        stats.backlog += q.stats.backlog;
                        stats.qlen += q.stats.qlen;
                    }
                }
                ClassInfo {
                    kind: "mqprio",
                    classid: Handle(self.handle.0 | (MIN_PRIORITY + tc as u32)),
                    parent: Handle::ROOT,
                    leaf: None,
                    options: None,
                    stats,
                    htb_xstats: None,
                    xstats: None,
                }
            })
            .collect();
        out.extend(queues.into_iter().enumerate().map(|(i, mut c)| {
            c.kind = "mqprio";
            c.parent = self.tc_of_queue(i).map_or(Handle(0), |tc| {
                Handle(self.handle.0 | (MIN_PRIORITY + tc as u32))
            });
            c
        }));
        out
    }
    fn children(&self) -> Vec<&Sched> {
        self.mq.children()
    }
    fn children_mut(&mut self) -> Vec<&mut Sched> {
        self.mq.children_mut()
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "mqprio",
    create: |handle, opts, env, _now| match opts {
        QdiscOptions::Mqprio(o) => Ok((Box::new(Mqprio::new(handle, o, env)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn env(txqueues: u32) -> DevEnv {
        DevEnv {
            txqueues,
            txqueuelen: 1000,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        }
    }

    /// 3 traffic classes on 8 queues: TC 0 → 0..4, TC 1 → 4..6, TC 2 → 6..8; priority p → TC p % 3.
    fn opts() -> MqprioOptions {
        let mut o = MqprioOptions {
            num_tc: 3,
            ..MqprioOptions::default()
        };
        for p in 0..16 {
            o.map[p] = (p % 3) as u8;
        }
        o.count[..3].copy_from_slice(&[4, 2, 2]);
        o.offset[..3].copy_from_slice(&[0, 4, 6]);
        o
    }

    #[test]
    fn a_priority_lands_in_its_traffic_class_queues() {
        let mut q = Mqprio::new(Handle(0x10000), &opts(), &env(8)).unwrap();
        let mut cx = Cx::new(0);
        for port in 0..200u16 {
            let mut p = Packet::udp4([10, 0, 0, 1], 1000 + port, [10, 0, 0, 2], 80, 0, 100);
            p.priority = u32::from(port % 3);
            q.enqueue(p, &mut cx);
        }
        // Per queue: how many packets it holds; every packet in its class's range.
        let held: Vec<u32> = q.children().iter().map(|s| s.q.stats().qlen).collect();
        let tc_total = |r: std::ops::Range<usize>| held[r].iter().sum::<u32>();
        assert_eq!(
            (tc_total(0..4), tc_total(4..6), tc_total(6..8)),
            (67, 67, 66)
        );
        assert!(
            held.iter().all(|&n| n > 0),
            "flows spread over each range: {held:?}"
        );
        let classes = q.walk(0);
        assert_eq!(classes.len(), 3 + 8);
        assert_eq!(classes[1].classid, Handle(0x1ffe1));
        assert_eq!(classes[1].stats.qlen, 67, "TC 1's counters are its queues'");
        assert_eq!(classes[3 + 5].parent, Handle(0x1ffe1), "queue 6 is TC 1's");
    }

    #[test]
    fn kernel_refusals() {
        let e = |o: MqprioOptions, n| Mqprio::new(Handle(0x10000), &o, &env(n)).err().unwrap();
        assert_eq!(e(opts(), 1).errno, Errno::NotSupported, "one queue");
        let mut o = opts();
        o.offset[2] = 5;
        assert_eq!(
            e(o, 8).to_string(),
            "Error: sch_mqprio_lib: TC 1 queues 2@4 overlap with TC 2 queues 2@5."
        );
        let mut o = opts();
        o.count[2] = 3;
        assert!(e(o, 8)
            .to_string()
            .contains("Queues 3:6 for TC 2 exceed the 8 TX queues"));
        let mut o = opts();
        o.map[15] = 3;
        assert!(e(o, 8).to_string().contains("Invalid traffic class"));
        let mut o = opts();
        o.hw = 1;
        assert!(e(o, 8)
            .to_string()
            .contains("does not support hardware offload"));
    }
}
