//! pfifo_fast — Linux's historical default, after `pfifo_fast_*` in `net/sched/sch_generic.c`.
//!
//! Three FIFO bands; band 0 is always emptied before band 1, and band 1 before band 2. The band of a packet
//! is `priomap[skb->priority & 15]`, and a socket's priority comes from the IP TOS byte through the kernel's
//! `ip_tos2prio` table, so "minimise delay" (TOS 0x10, interactive ssh) lands in band 0 and "maximise
//! throughput" (0x08, bulk) in band 2. Each band holds up to `txqueuelen` packets. Nothing is configurable:
//! the priomap is fixed, and tc shows it.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use std::collections::VecDeque;

pub const BANDS: usize = 3;
/// `sch_default_prio2band`.
pub const PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

/// `ip_tos2prio` (net/ipv4/route.c), indexed by `(tos & 0x1e) >> 1`: the socket priority Linux gives a TOS.
pub const IP_TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];

/// `rt_tos2priority`.
pub fn tos_to_priority(tos: u8) -> u32 {
    IP_TOS2PRIO[((tos & 0x1e) >> 1) as usize] as u32
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct PfifoFast {
    limit_per_band: u32,
    /// The packets in their boxes ([`Qdisc::enqueue_skb`]): every simulated host's default qdisc, so
    /// every packet it sends moves in and out as a pointer.
    #[serde(skip)]
    bands: [VecDeque<Box<Packet>>; BANDS],
    stats: QdiscStats,
}

impl PfifoFast {
    pub fn new(env: &DevEnv) -> PfifoFast {
        PfifoFast {
            limit_per_band: env.txqueuelen,
            bands: Default::default(),
            stats: QdiscStats::default(),
        }
    }

    pub fn band_of(pkt: &Packet) -> usize {
        PRIOMAP[(pkt.priority & 15) as usize] as usize
    }
}

impl Qdisc for PfifoFast {
    fn kind(&self) -> &'static str {
        "pfifo_fast"
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.bands
            .iter()
            .all(VecDeque::is_empty)
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    super::by_value_through_boxes!();

    fn enqueue_skb(&mut self, pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        let band = Self::band_of(&pkt);
        if self.bands[band].len() as u32 >= self.limit_per_band {
            self.stats.drops += 1;
            cx.drop_arriving_skb(pkt, DropReason::TailDrop);
            return Verdict::Drop;
        }
        self.stats.count_queued(&pkt);
        self.bands[band].push_back(pkt);
        Verdict::Success
    }

    fn dequeue_skb(&mut self, _cx: &mut Cx) -> Option<Box<Packet>> {
        let pkt = self.bands.iter_mut().find_map(|b| b.pop_front())?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.bands.iter().find_map(|b| b.front()).map(|b| &**b)
    }

    fn reset(&mut self) {
        self.bands.iter_mut().for_each(VecDeque::clear);
        self.stats.backlog = 0;
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dequeue_idle(&self) -> bool {
        self.bands.iter().all(VecDeque::is_empty)
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::PfifoFast
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        // pfifo_fast has no change operation in the kernel; tc sends it no options, so nothing to do.
        Ok(Vec::new())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "pfifo_fast",
    create: |_handle, _opts, env, _now| Ok((Box::new(PfifoFast::new(env)), Vec::new())),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tos_lowdelay_goes_first_and_bulk_last() {
        // Hand-derived from ip_tos2prio and the priomap: TOS 0x10 → prio 6 → band 0; 0x00 → 0 → band 1;
        // 0x08 (throughput) → prio 4... no: (0x08 & 0x1e) >> 1 = 4 → prio 2 → band 2.
        assert_eq!(tos_to_priority(0x10), 6);
        assert_eq!(tos_to_priority(0x08), 2);
        let env = DevEnv {
            txqueues: 1,
            txqueuelen: 10,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        };
        let mut q = PfifoFast::new(&env);
        let mut cx = Cx::new(0);
        for (tag, tos) in [(0u64, 0x08u8), (1, 0x00), (2, 0x10), (3, 0x00)] {
            let p = Packet {
                tag,
                len: 100,
                priority: tos_to_priority(tos),
                ..Default::default()
            };
            q.enqueue(p, &mut cx);
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        assert_eq!(
            order,
            vec![2, 1, 3, 0],
            "band 0 (lowdelay), then band 1 in order, then band 2 (bulk)"
        );
    }
}
