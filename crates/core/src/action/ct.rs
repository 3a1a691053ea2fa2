//! `ct` (`net/sched/act_ct.c`): send the packet through connection tracking from tc — look its
//! connection up (in a zone), optionally `commit` it (confirm the entry, set its mark and labels, NAT
//! it), or `clear` what conntrack attached to the packet. Open vSwitch's and the CNIs' datapaths are
//! built from it: `ct` then a `goto chain` whose flower filters read `ct_state`.
//!
//! tclab's connection is the one its netfilter hooks track; the packet carries the connection's mark
//! ([`Packet::ct_mark`], `None` when untracked), which is as far as an action reaches. So here:
//!
//! - `clear` untracks the packet (`nf_ct_set(skb, NULL, IP_CT_UNTRACKED)`): `ct_mark` becomes `None`,
//!   and a later `connmark`/`ctinfo` finds nothing to restore.
//! - `commit` sets the mark as `tcf_ct_act_set_mark` does — `mark | (ct->mark & ~mask)`: the value's
//!   bits outside the mask are set too, as in the kernel — on the packet's view of its connection (an
//!   untracked packet gets the entry commit would create, with mark 0 before). The mark stays with the
//!   packet for the rest of its pass through tc (a `ctinfo` or `connmark` after it, a filter on the
//!   same device); it is not written back to the host's connection table, so the next packet of the
//!   connection does not see it.
//! - A packet that is neither IPv4 nor IPv6 is dropped and counted (`tcf_ct_skb_nf_family` gives
//!   `NFPROTO_UNSPEC`, `goto drop`).
//! - Otherwise the packet is tracked: one the host's conntrack already tracked (the hooks set
//!   [`Packet::ct_state`]: on egress, or a forwarded packet) keeps its state, as the kernel keeps a
//!   cached `_nfct`; an untracked one gets `+trk+new`, the unconfirmed entry `nf_conntrack_in` makes
//!   for a connection's first packet, and the action's zone ([`Packet::ct_zone`]); an IPv4 packet
//!   conntrack cannot track (no ports where there should be some, an ICMP message that is neither
//!   query nor error) gets `+trk+inv` and nothing to commit. flower's `ct_*` keys read them. The action cannot see the host's connection table, so a later packet of a
//!   connection the host has not yet tracked on this pass (at ingress, before PREROUTING) is `+new`
//!   too, where the kernel's lookup would find it established.
//!
//! - `commit` with `label` sets the connection's labels as `nf_connlabels_replace` does (`(old & ~mask)
//!   | (label & mask)`), on the packet's view ([`Packet::ct_labels`]), which flower's `ct_label` reads;
//!   `clear` takes them away with the connection.
//!
//! Not modelled: zones as separate tables (tclab's conntrack has one; the zone is the packet's label),
//! NAT (the addresses and ports stay; the range is kept and shown), defragmentation, the flow table
//! offload. `mark` and `label` without `commit` are stored and shown
//! but do nothing, as in the kernel.

use super::Control;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use std::net::IpAddr;

/// `TCA_CT_ACT_*`: the `ct_action` flags.
pub const CT_ACT_COMMIT: u16 = 1;
pub const CT_ACT_FORCE: u16 = 2;
pub const CT_ACT_CLEAR: u16 = 4;
pub const CT_ACT_NAT: u16 = 8;
pub const CT_ACT_NAT_SRC: u16 = 16;
pub const CT_ACT_NAT_DST: u16 = 32;

/// The NAT range (`TCA_CT_NAT_*`): addresses of one family, ports in host order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtNat {
    /// `TCA_CT_NAT_IPV4/IPV6_MIN` and `_MAX` (the minimum again when tc sent no maximum).
    pub addr: Option<(IpAddr, IpAddr)>,
    /// `TCA_CT_NAT_PORT_MIN` and `_MAX`.
    pub ports: Option<(u16, u16)>,
}

/// What tc sends (`TCA_CT_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ct {
    pub action: Control,
    /// `TCA_CT_ACTION`: [`CT_ACT_COMMIT`] … [`CT_ACT_NAT_DST`].
    pub ct_action: u16,
    pub zone: u16,
    /// `TCA_CT_MARK` and `TCA_CT_MARK_MASK` (0 when none was given: the kernel then dumps none).
    pub mark: u32,
    pub mark_mask: u32,
    /// `TCA_CT_LABELS` and `_MASK`: 128 bits each, shorter values zero-filled (`nla_memcpy`).
    pub labels: [u8; 16],
    pub labels_mask: [u8; 16],
    pub nat: CtNat,
}

impl Ct {
    pub fn has(&self, flag: u16) -> bool {
        self.ct_action & flag != 0
    }

    /// `tcf_ct_fill_params_nat`'s check (tc refuses the pair first).
    pub fn validate(&self) -> Result<(), KernelError> {
        if self.has(CT_ACT_NAT) && self.has(CT_ACT_NAT_SRC) && self.has(CT_ACT_NAT_DST) {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "dnat and snat can't be enabled at the same time",
            ));
        }
        Ok(())
    }

    /// `tcf_ct_act`: the control code and whether the packet was dropped (counted by the caller).
    pub fn act(&self, pkt: &mut Packet) -> (Control, bool) {
        if self.has(CT_ACT_CLEAR) {
            pkt.ct_mark = None;
            pkt.ct_state = 0;
            pkt.set_ct_zone(0);
            set_labels(pkt, [0; 16]);
            return (self.action, false);
        }
        if !matches!(pkt.protocol, 0x0800 | 0x86dd) {
            return (super::TC_ACT_SHOT, true);
        }
        // `nf_conntrack_in` (or the connection the packet already has, `tcf_ct_skb_nfct_cached`):
        // a packet without one gets the new entry it creates (see the essay), in the action's zone.
        pkt.set_ct_zone(self.zone);
        if pkt.ct_state & Packet::CT_TRACKED == 0 || pkt.ct_state & Packet::CT_INVALID != 0 {
            if pkt.protocol == 0x0800 && !crate::netfilter::conntrack::trackable(&pkt.data) {
                // No connection: `post_ct` without one is what flower sees as +trk+inv, and there is
                // nothing to commit (`if (!ct) goto out_push`).
                pkt.ct_state = Packet::CT_TRACKED | Packet::CT_INVALID;
                return (self.action, false);
            }
            pkt.ct_state = Packet::CT_TRACKED | Packet::CT_NEW;
        }
        if self.has(CT_ACT_COMMIT) {
            let old = pkt.ct_mark.unwrap_or(0);
            // With no mark given the mask is 0 and the connection's mark stays.
            let new = if self.mark_mask == 0 {
                old
            } else {
                self.mark | (old & !self.mark_mask)
            };
            pkt.ct_mark = Some(new);
            // `tcf_ct_act_set_labels`: nothing without a mask, else `nf_connlabels_replace`.
            if self.labels_mask != [0; 16] {
                let old = pkt.ct_labels();
                let m = &self.labels_mask;
                set_labels(
                    pkt,
                    std::array::from_fn(|i| (old[i] & !m[i]) | (self.labels[i] & m[i])),
                );
            }
        }
        (self.action, false)
    }
}

/// The labels of the packet's connection, kept in its extension only when there are some.
pub fn set_labels(pkt: &mut Packet, labels: [u8; 16]) {
    pkt.set_ct_labels(labels);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{TC_ACT_PIPE, TC_ACT_SHOT};

    fn ct(ct_action: u16, mark: u32, mask: u32) -> Ct {
        Ct {
            action: TC_ACT_PIPE,
            ct_action,
            zone: 0,
            mark,
            mark_mask: mask,
            labels: [0; 16],
            labels_mask: [0; 16],
            nat: CtNat {
                addr: None,
                ports: None,
            },
        }
    }

    fn udp() -> Packet {
        Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 200)
    }

    #[test]
    fn commit_sets_the_mark_as_the_kernel_does() {
        // tcf_ct_act_set_mark: 0x42 | (0x1234 & !0xf0) = 0x1246 — the value's 0x02 outside the mask
        // is set as well.
        let mut p = udp();
        p.ct_mark = Some(0x1234);
        assert_eq!(
            ct(CT_ACT_COMMIT, 0x42, 0xf0).act(&mut p),
            (TC_ACT_PIPE, false)
        );
        assert_eq!(p.ct_mark, Some(0x1246));
        // An untracked packet gets the entry commit creates (mark 0 before).
        let mut q = udp();
        ct(CT_ACT_COMMIT, 0x42, !0).act(&mut q);
        assert_eq!(q.ct_mark, Some(0x42));
        // Without commit the mark is not applied; without a mark commit keeps the connection's.
        let mut r = udp();
        r.ct_mark = Some(7);
        ct(0, 0x42, !0).act(&mut r);
        ct(CT_ACT_COMMIT, 0, 0).act(&mut r);
        assert_eq!(r.ct_mark, Some(7));
    }

    #[test]
    fn clear_untracks_and_non_ip_is_dropped() {
        let mut p = udp();
        p.ct_mark = Some(9);
        assert_eq!(ct(CT_ACT_CLEAR, 0, 0).act(&mut p), (TC_ACT_PIPE, false));
        assert_eq!(p.ct_mark, None);
        let mut arp = udp();
        arp.protocol = 0x0806;
        assert_eq!(ct(0, 0, 0).act(&mut arp), (TC_ACT_SHOT, true));
        // clear comes first: a non-IP packet is only untracked.
        assert_eq!(ct(CT_ACT_CLEAR, 0, 0).act(&mut arp), (TC_ACT_PIPE, false));
    }

    #[test]
    fn snat_and_dnat_together_are_refused() {
        let both = ct(
            CT_ACT_COMMIT | CT_ACT_NAT | CT_ACT_NAT_SRC | CT_ACT_NAT_DST,
            0,
            0,
        );
        let e = both.validate().unwrap_err().to_string();
        assert!(
            e.contains("dnat and snat can't be enabled at the same time"),
            "{e}"
        );
        assert!(ct(CT_ACT_COMMIT | CT_ACT_NAT | CT_ACT_NAT_SRC, 0, 0)
            .validate()
            .is_ok());
    }
}
