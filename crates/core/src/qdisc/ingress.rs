//! The ingress qdisc (`net/sched/sch_ingress.c`): not a queue but a hook on arrival.
//!
//! It holds a filter block (`tc filter add dev eth0 parent ffff: …`) run on every packet the device
//! receives, before forwarding. Filters there can only act — police, mark, drop; nothing waits, since a
//! device cannot delay what it has already received. Seed 004's downlink policer lives here: `police rate
//! 800kbit burst 10k drop` drops what arrives faster than the rate so that TCP senders slow down and the
//! ISP's queue stays short.
//!
//! In tclab the driver hands a received packet to [`Qdisc::enqueue`]; a packet that is not dropped is
//! immediately available from [`Qdisc::dequeue`] and goes on its way (`Device::receive` does both).
//! Counters: `Sent` counts packets that passed, `dropped` those an action shot.

use super::{Cx, DevEnv, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{KernelError, Warning};
use crate::filter::{self, Block};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;

#[derive(Default)]
pub struct Ingress {
    block: Block,
    stats: QdiscStats,
    /// The packet that just passed, waiting to be taken by `dequeue`.
    passed: Option<Packet>,
}

impl Qdisc for Ingress {
    fn kind(&self) -> &'static str {
        "ingress"
    }

    /// `tcf_classify` at `sch_handle_ingress`: drop, or let through.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        match filter::classify(&self.block, &mut pkt, cx.now) {
            filter::Verdict::Shot | filter::Verdict::Stolen => {
                self.stats.drops += 1;
                Verdict::Drop
            }
            _ => {
                self.stats.count_sent(&pkt);
                self.passed = Some(pkt);
                Verdict::Success
            }
        }
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Option<Packet> {
        self.passed.take()
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.passed.as_ref()
    }

    fn reset(&mut self) {
        self.passed = None;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Ingress
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Ok(Vec::new())
    }

    /// Every class number of ingress names the one block (`ingress_tcf_block`).
    fn block(&self, _classid: Handle) -> Option<&Block> {
        Some(&self.block)
    }

    fn block_mut(&mut self, _classid: Handle) -> Option<&mut Block> {
        Some(&mut self.block)
    }

    fn blocks_mut(&mut self) -> Vec<&mut Block> {
        vec![&mut self.block]
    }
}
