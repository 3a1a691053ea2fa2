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
//! Counters, as `tc_run` keeps them: `Sent` counts every packet the filters see, before they classify it —
//! passed, shot or stolen (`mini_qdisc_bstats_cpu_update`) — and `dropped` those an action shot
//! (`TC_ACT_SHOT` only: a packet an action stole, redirected to an ifb say, is gone without being a
//! drop). With no filter on chain 0 the kernel has no mini-qdisc on the hook and counts nothing. A
//! received packet's bytes are its length at the hook, where the Ethernet header has already been
//! pulled (`qdisc_pkt_len` = `skb->len`: the IP packet), and so are what its actions count and police
//! (`Packet::hook_len`); clsact's egress hook sees whole frames.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::action::{TC_ACT_OK, TC_ACT_RECLASSIFY};
use crate::error::{KernelError, Warning};
use crate::filter::{self, Block};
use crate::handle::Handle;
use crate::host::ETH_HLEN;
use crate::packet::Packet;
use crate::Nanos;

#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Ingress {
    /// `clsact`: the same hook with a second block run on transmit, before the root qdisc.
    clsact: bool,
    block: Block,
    egress: Block,
    stats: QdiscStats,
    /// The packet that just passed, waiting to be taken by `dequeue`.
    #[serde(skip)]
    passed: Option<Packet>,
}

impl Ingress {
    pub fn clsact() -> Ingress {
        Ingress {
            clsact: true,
            ..Default::default()
        }
    }
}

/// `tc_run`'s counting: a hook with filters on chain 0 counts every packet it sees, `len` bytes.
fn count_seen(stats: &mut QdiscStats, block: &Block, len: u32) {
    if !block.filter_list_is_empty() {
        stats.bytes += len as u64;
        stats.packets += 1;
    }
}

/// `tc_run`: a filter's `ok` or `reclassify` verdict leaves the class minor in `skb->tc_index`.
fn set_tc_index(pkt: &mut Packet, v: &filter::Verdict) {
    if let filter::Verdict::Classified { classid, control } = *v {
        if control == TC_ACT_OK || control == TC_ACT_RECLASSIFY {
            pkt.tc_index = classid as u16;
        }
    }
}

/// `TC_H_MIN_INGRESS`.
pub(crate) const MIN_INGRESS: u16 = 0xfff2;
/// `TC_H_MIN_EGRESS`.
pub(crate) const MIN_EGRESS: u16 = 0xfff3;

impl Qdisc for Ingress {
    fn kind(&self) -> &'static str {
        if self.clsact {
            "clsact"
        } else {
            "ingress"
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.passed
            .is_none()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `tc_run` at `sch_handle_ingress`: count, then drop, steal, or let through.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Verdict {
        // The Ethernet header is pulled before the hook (`eth_type_trans`): it counts `skb->len`, the
        // network packet, as the actions on it do (`Packet::hook_len`).
        count_seen(
            &mut self.stats,
            &self.block,
            pkt.len.saturating_sub(ETH_HLEN),
        );
        match filter::classify(&self.block, &mut pkt, cx) {
            filter::Verdict::Shot => {
                self.stats.drops += 1;
                cx.drop_arriving(pkt, DropReason::Action);
                Verdict::Drop
            }
            filter::Verdict::Stolen => Verdict::Stolen,
            v => {
                set_tc_index(&mut pkt, &v);
                self.passed = Some(pkt);
                Verdict::Success
            }
        }
    }

    /// `sch_handle_egress`: a clsact's egress filters on a packet about to be queued, counted as at
    /// ingress (the same qdisc's counters). `None` lets it go on to the root qdisc; otherwise the
    /// verdict `dev_queue_xmit` returns: `Drop` for an action that shot it, `Stolen` for one that took
    /// it.
    fn egress_hook(&mut self, pkt: &mut Packet, cx: &mut Cx) -> Option<Verdict> {
        if !self.clsact {
            return None;
        }
        count_seen(&mut self.stats, &self.egress, pkt.len);
        match filter::classify(&self.egress, pkt, cx) {
            filter::Verdict::Shot => {
                self.stats.drops += 1;
                Some(Verdict::Drop)
            }
            filter::Verdict::Stolen => Some(Verdict::Stolen),
            v => {
                set_tc_index(pkt, &v);
                None
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
        if self.clsact {
            QdiscOptions::Clsact
        } else {
            QdiscOptions::Ingress
        }
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Ok(Vec::new())
    }

    /// Every class number of ingress names the one block (`ingress_tcf_block`); clsact's `ffff:fff3`
    /// names its egress block.
    fn block(&self, classid: Handle) -> Option<&Block> {
        if self.clsact && classid.minor() == MIN_EGRESS {
            return Some(&self.egress);
        }
        Some(&self.block)
    }

    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        if self.clsact && classid.minor() == MIN_EGRESS {
            return Some(&mut self.egress);
        }
        Some(&mut self.block)
    }

    fn blocks_mut(&mut self) -> Vec<&mut Block> {
        vec![&mut self.block, &mut self.egress]
    }
}

pub const INGRESS: super::QdiscKind = super::QdiscKind {
    name: "ingress",
    create: |_handle, _opts, _env, _now| Ok((Box::new(Ingress::default()), Vec::new())),
};

pub const CLSACT: super::QdiscKind = super::QdiscKind {
    name: "clsact",
    create: |_handle, _opts, _env, _now| Ok((Box::new(Ingress::clsact()), Vec::new())),
};
