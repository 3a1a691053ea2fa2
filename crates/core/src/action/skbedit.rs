//! `skbedit` (`net/sched/act_skbedit.c`): rewrite packet metadata — the firewall mark (under a mask), the
//! priority (which a classful qdisc may read as a classid), the transmit queue, the packet type — then
//! answer its control code (`pipe` by default, so the next action runs).

use super::Control;
use crate::packet::Packet;

#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Skbedit {
    pub action: Control,
    pub queue_mapping: Option<u16>,
    pub priority: Option<u32>,
    pub mark: Option<u32>,
    pub mask: Option<u32>,
    /// `PACKET_HOST` 0, `BROADCAST` 1, `MULTICAST` 2, `OTHERHOST` 3.
    pub ptype: Option<u16>,
    /// `SKBEDIT_F_INHERITDSFIELD`: priority from the DS field.
    pub inherit_dsfield: bool,
}

impl Skbedit {
    /// `tcf_skbedit_act`.
    pub fn act(&self, pkt: &mut Packet) -> Control {
        if self.inherit_dsfield {
            if let Some(tos) = pkt.ipv4_tos() {
                pkt.priority = (tos >> 2) as u32;
            }
        }
        if let Some(q) = self.queue_mapping {
            // The kernel ignores a queue the device does not have; [`crate::qdisc::mq::pick_tx`] does,
            // as it knows the device's queues.
            pkt.set_queue_mapping(Some(q));
        }
        if let Some(p) = self.priority {
            pkt.priority = p;
        }
        if let Some(m) = self.mark {
            let mask = self.mask.unwrap_or(u32::MAX);
            pkt.mark = (pkt.mark & !mask) | (m & mask);
        }
        self.action
    }
}
