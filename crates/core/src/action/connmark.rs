//! `connmark` (`net/sched/act_connmark.c`): restore the packet's mark from its connection's mark — what
//! `iptables -j CONNMARK --restore-mark` does, but at tc's hook (typically on ingress, so that `fw` filters
//! see a mark that netfilter saved on the connection earlier).
//!
//! The kernel looks the packet up in the conntrack table of the action's `zone`; when an entry exists,
//! `skb->mark` becomes its mark and the action counts it (as an overlimit, the kernel's way of counting
//! marked packets). With no entry — an untracked packet, a packet that is not IPv4/IPv6 or is shorter than
//! an IP header — nothing changes. tclab's packet path has no connection tracking yet, so every packet is
//! untracked here: the action answers its control code (`pipe` by default) and leaves the mark alone,
//! which is exactly what the kernel does for untracked packets.

use super::Control;
use crate::packet::Packet;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
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
        // No conntrack entry exists for any tclab packet (see the module comment): no change.
        (self.action, false)
    }
}
