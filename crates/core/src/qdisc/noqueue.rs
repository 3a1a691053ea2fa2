//! noqueue — the root of virtual devices (veth, dummy, loopback) until a policy is attached.
//!
//! Linux sends such a device's packets straight to the driver, which cannot be busy. tclab models that as
//! a queue without limit that the driver empties as fast as its link allows; it never drops and never
//! delays. It has no options and, having handle 0, cannot be deleted.
//!
//! Its `Sent` counters stay 0 as the kernel's: noqueue_qdisc_ops has no enqueue, so dev_queue_xmit hands
//! the packet to the driver without touching a qdisc's bstats (`tc -s qdisc show dev lo` reads `Sent 0
//! bytes 0 pkt` after pings). Its queue length and backlog do count the packets waiting for the modelled
//! driver: the simulator reads them to know the device is busy and plots them as the interface's backlog.

use super::{Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use std::collections::VecDeque;

#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Noqueue {
    /// Boxed ([`Qdisc::enqueue_skb`]): a veth's packets pass through as pointers.
    #[serde(skip)]
    queue: VecDeque<Box<Packet>>,
    stats: QdiscStats,
}

impl Qdisc for Noqueue {
    fn kind(&self) -> &'static str {
        "noqueue"
    }
    fn save(&self) -> Option<Vec<u8>> {
        self.queue
            .is_empty()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }
    super::by_value_through_boxes!();
    fn enqueue_skb(&mut self, pkt: Box<Packet>, _cx: &mut Cx) -> Verdict {
        self.stats.count_queued(&pkt);
        self.queue.push_back(pkt);
        Verdict::Success
    }
    fn dequeue_skb(&mut self, _cx: &mut Cx) -> Option<Box<Packet>> {
        let pkt = self.queue.pop_front()?;
        self.stats.count_unqueued(&pkt);
        Some(pkt)
    }
    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.queue.front().map(|b| &**b)
    }
    fn reset(&mut self) {
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }
    fn stats(&self) -> QdiscStats {
        self.stats
    }
    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Noqueue
    }
    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Ok(Vec::new())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "noqueue",
    create: |_handle, _opts, _env, _now| Ok((Box::new(Noqueue::default()), Vec::new())),
};
