//! `connmark` (`net/sched/act_connmark.c`): restore the packet's mark from its connection's mark — what
//! `iptables -j CONNMARK --restore-mark` does, but at tc's hook (typically on ingress, so that `fw` filters
//! see a mark that netfilter saved on the connection earlier).
//!
//! The kernel takes the packet's connection (the skb's `_nfct`, set when netfilter's conntrack saw it);
//! when there is one, `skb->mark` becomes its mark and the action counts it (as an overlimit, the kernel's
//! way of counting marked packets). tclab carries that connection's mark on the packet (`ct_mark`, set by
//! the netfilter hooks). With no entry — an untracked packet, a packet that is not IPv4/IPv6 or is shorter
//! than an IP header — nothing changes: the action answers its control code (`pipe` by default).
//!
//! Not modelled: the kernel's fallback lookup by tuple in the action's `zone` for a packet conntrack has
//! not seen yet (tc's ingress hook runs before netfilter's PREROUTING); such a packet is untracked here.

use super::Control;
use crate::packet::Packet;

#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Connmark {
    pub action: Control,
    /// The conntrack zone to look the connection up in.
    pub zone: u16,
}

impl Connmark {
    /// `tcf_connmark_act`. Returns the control code and whether a connection's mark was restored.
    pub fn act(&self, pkt: &mut Packet) -> (Control, bool) {
        let ip_header = match pkt.protocol {
            0x0800 => 20,
            0x86dd => 40,
            _ => return (self.action, false),
        };
        if (pkt.len as usize) < ip_header {
            return (self.action, false);
        }
        match pkt.ct_mark {
            Some(mark) => {
                pkt.mark = mark;
                (self.action, true)
            }
            None => (self.action, false),
        }
    }
}
