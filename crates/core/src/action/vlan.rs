//! `vlan` (`net/sched/act_vlan.c`): push, pop or modify an 802.1Q/802.1ad tag.
//!
//! The kernel keeps a packet's outermost tag out of its bytes when it can (the *accelerated* tag,
//! `skb->vlan_tci`), and writes it into the frame only when the device sends it; further tags sit in the
//! link header. tclab's packets start at the network header, so both kinds are metadata of the packet:
//! [`Packet::vlan`] the accelerated tag, which `len` does not count (`qdisc_pkt_len` does not either),
//! and [`Packet::vlan_inline`] the tags in the header, 4 bytes of `len` each.
//!
//! - `push` (`skb_vlan_push`): an accelerated tag already there moves into the header (the packet grows
//!   by 4 bytes), and the new tag becomes the accelerated one: pushing onto an untagged packet changes no
//!   length, a second push (QinQ) adds 4 bytes.
//! - `pop` (`skb_vlan_pop`): the accelerated tag goes, else the outermost header tag (4 bytes less); then
//!   a header tag left outermost becomes the accelerated one. An untagged packet is left as it is.
//! - `modify`: a tagged packet's outermost tag gets the new VLAN id (and priority, if one was given) and
//!   protocol, and becomes the accelerated tag; an untagged packet is left as it is.
//!
//! The qdisc that classified the packet charged it by its length at its root (`qdisc_pkt_len`, computed
//! once at `__dev_xmit_skb`), so on egress a length change shows in `wire_len` (what leaves the root)
//! and not in the charge; at ingress, before any root has measured it, in `len` itself. After a push,
//! `tcf_classify` sees the tag's protocol ([`Packet::tc_protocol`]): a later filter of `protocol ip`
//! no longer matches, one of `protocol 802.1Q` does.
//!
//! `pop_eth`/`push_eth` (removing or adding the Ethernet header itself) are refused: a tclab packet's
//! link header is not something it can lose.

use super::{Control, TC_ACT_SHOT};
use crate::error::{Errno, KernelError};
use crate::packet::{Packet, VlanTag};

/// `TCA_VLAN_ACT_*`.
pub const ACT_POP: u32 = 1;
pub const ACT_PUSH: u32 = 2;
pub const ACT_MODIFY: u32 = 3;
pub const ACT_POP_ETH: u32 = 4;
pub const ACT_PUSH_ETH: u32 = 5;

pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
/// `VLAN_VID_MASK`; 4095 itself is reserved.
const VID_MASK: u16 = 0x0fff;
const PRIO_SHIFT: u16 = 13;
const VLAN_HLEN: u32 = 4;

/// What tc sends (`struct tc_vlan`'s `v_action`, `TCA_VLAN_PUSH_*`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Vlan {
    pub action: Control,
    /// `TCA_VLAN_ACT_*`; 0 when the command named none (the kernel refuses it).
    pub op: u32,
    pub id: Option<u16>,
    pub proto: Option<u16>,
    pub prio: Option<u8>,
    pub dst_mac: Option<[u8; 6]>,
    pub src_mac: Option<[u8; 6]>,
}

impl Vlan {
    /// `tcf_vlan_init`'s checks.
    pub fn validate(&self) -> Result<(), KernelError> {
        match self.op {
            ACT_POP => Ok(()),
            ACT_PUSH | ACT_MODIFY => {
                let id = self.id.ok_or_else(|| KernelError::new(Errno::Invalid))?;
                if id >= VID_MASK {
                    return Err(KernelError::new(Errno::Range));
                }
                match self.proto {
                    None | Some(ETH_P_8021Q | ETH_P_8021AD) => Ok(()),
                    Some(_) => Err(KernelError::new(Errno::ProtoNotSupported)),
                }
            }
            ACT_POP_ETH | ACT_PUSH_ETH => Err(KernelError::msg(
                Errno::NotSupported,
                "tclab does not support vlan pop_eth and push_eth yet",
            )),
            _ => Err(KernelError::new(Errno::Invalid)),
        }
    }

    /// The protocol the kernel keeps (802.1Q unless given).
    pub fn push_proto(&self) -> u16 {
        self.proto.unwrap_or(ETH_P_8021Q)
    }

    /// Whether the dump carries the priority (`tcfv_push_prio_exists`: given, or a push).
    pub fn prio_dumped(&self) -> bool {
        self.prio.is_some() || self.op == ACT_PUSH
    }

    /// `tcf_vlan_act`. `at_ingress` is `skb_at_tc_ingress`: whether a length change is charged from
    /// here on (ingress) or only seen when the packet leaves its root (egress).
    pub fn act(&self, pkt: &mut Packet, at_ingress: bool) -> Control {
        let id = self.id.unwrap_or(0);
        match self.op {
            ACT_POP => {
                if pkt.vlan().is_some() {
                    pkt.set_vlan(None);
                } else {
                    if pkt.pop_vlan_inline().is_none() {
                        return self.action;
                    }
                    resize(pkt, -1, at_ingress);
                }
                // The next tag, if in the header, becomes the accelerated one.
                if let Some(next) = pkt.pop_vlan_inline() {
                    pkt.set_vlan(Some(next));
                    resize(pkt, -1, at_ingress);
                }
            }
            ACT_PUSH => {
                if let Some(old) = pkt.vlan() {
                    pkt.push_vlan_inline(old);
                    resize(pkt, 1, at_ingress);
                }
                let prio = u16::from(self.prio.unwrap_or(0));
                pkt.set_vlan(Some(VlanTag {
                    proto: self.push_proto(),
                    tci: id | prio << PRIO_SHIFT,
                }));
            }
            ACT_MODIFY => {
                let old = match pkt.vlan() {
                    Some(t) => t,
                    None => match pkt.pop_vlan_inline() {
                        Some(t) => {
                            resize(pkt, -1, at_ingress);
                            t
                        }
                        None => return self.action,
                    },
                };
                let mut tci = (old.tci & !VID_MASK) | id;
                if let Some(p) = self.prio {
                    tci = (tci & !(7 << PRIO_SHIFT)) | u16::from(p) << PRIO_SHIFT;
                }
                pkt.set_vlan(Some(VlanTag {
                    proto: self.push_proto(),
                    tci,
                }));
            }
            // Refused by `validate`.
            _ => return TC_ACT_SHOT,
        }
        self.action
    }
}

/// Grow or shrink the packet by `tags` header tags.
fn resize(pkt: &mut Packet, tags: i32, at_ingress: bool) {
    super::resize_frame(pkt, tags * VLAN_HLEN as i32, at_ingress);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn vlan(op: u32, id: Option<u16>, proto: Option<u16>, prio: Option<u8>) -> Vlan {
        Vlan {
            action: TC_ACT_PIPE,
            op,
            id,
            proto,
            prio,
            dst_mac: None,
            src_mac: None,
        }
    }

    #[test]
    fn push_then_push_is_qinq_and_grows_by_one_header_tag() {
        let mut p = Packet::of_len(1000);
        let inner = vlan(ACT_PUSH, Some(100), None, Some(3));
        let outer = vlan(ACT_PUSH, Some(7), Some(ETH_P_8021AD), None);
        assert_eq!(inner.act(&mut p, false), TC_ACT_PIPE);
        // The accelerated tag: 3 << 13 | 100, nothing added to the packet's bytes.
        assert_eq!(
            p.vlan(),
            Some(VlanTag {
                proto: ETH_P_8021Q,
                tci: 0x6064
            })
        );
        assert_eq!((p.len, p.wire_len()), (1000, None));
        assert_eq!(p.tc_protocol(), ETH_P_8021Q);
        outer.act(&mut p, false);
        // The first tag went into the header: 4 bytes, seen when the packet leaves its root.
        assert_eq!(
            p.vlan(),
            Some(VlanTag {
                proto: ETH_P_8021AD,
                tci: 7
            })
        );
        assert_eq!(
            p.vlan_inline(),
            [VlanTag {
                proto: ETH_P_8021Q,
                tci: 0x6064
            }]
        );
        assert_eq!((p.len, p.wire_len()), (1000, Some(1004)));
        assert_eq!(
            (p.skb_protocol(), p.tc_protocol()),
            (ETH_P_8021Q, ETH_P_8021AD)
        );
        // Pop: the accelerated tag goes, the header tag becomes the accelerated one.
        vlan(ACT_POP, None, None, None).act(&mut p, false);
        assert_eq!(
            p.vlan(),
            Some(VlanTag {
                proto: ETH_P_8021Q,
                tci: 0x6064
            })
        );
        assert!(p.vlan_inline().is_empty());
        assert_eq!(p.wire_len(), Some(1000));
        vlan(ACT_POP, None, None, None).act(&mut p, false);
        assert_eq!((p.vlan(), p.tc_protocol()), (None, 0x0800));
        // Popping an untagged packet changes nothing.
        vlan(ACT_POP, None, None, None).act(&mut p, false);
        assert_eq!((p.vlan(), p.wire_len()), (None, Some(1000)));
    }

    #[test]
    fn ingress_changes_count_at_once() {
        let mut p = Packet::of_len(500);
        p.set_vlan_inline(vec![VlanTag {
            proto: ETH_P_8021Q,
            tci: 5,
        }]);
        vlan(ACT_POP, None, None, None).act(&mut p, true);
        assert_eq!((p.len, p.wire_len(), p.vlan()), (496, None, None));
    }

    #[test]
    fn modify_keeps_priority_unless_given() {
        let mut p = Packet::of_len(100);
        // Untagged: no-op.
        vlan(ACT_MODIFY, Some(9), None, None).act(&mut p, false);
        assert_eq!(p.vlan(), None);
        p.set_vlan(Some(VlanTag {
            proto: ETH_P_8021AD,
            tci: 5 << 13 | 1 << 12 | 20,
        }));
        vlan(ACT_MODIFY, Some(9), None, None).act(&mut p, false);
        // VID replaced, priority and DEI kept, protocol 802.1Q (the default).
        assert_eq!(
            p.vlan(),
            Some(VlanTag {
                proto: ETH_P_8021Q,
                tci: 5 << 13 | 1 << 12 | 9
            })
        );
        vlan(ACT_MODIFY, Some(9), None, Some(0)).act(&mut p, false);
        assert_eq!(p.vlan().unwrap().tci, 1 << 12 | 9);
        // A header tag is taken out and becomes the accelerated one (4 bytes less).
        let mut q = Packet::of_len(100);
        q.set_vlan_inline(vec![VlanTag {
            proto: ETH_P_8021Q,
            tci: 1,
        }]);
        vlan(ACT_MODIFY, Some(2), None, None).act(&mut q, true);
        assert_eq!(
            (q.vlan().unwrap().tci, q.vlan_inline().len(), q.len),
            (2, 0, 96)
        );
    }

    #[test]
    fn kernel_refusals() {
        let e = |v: Vlan| v.validate().unwrap_err().errno;
        assert_eq!(e(vlan(ACT_PUSH, None, None, None)), Errno::Invalid);
        assert_eq!(e(vlan(ACT_PUSH, Some(4095), None, None)), Errno::Range);
        assert!(vlan(ACT_PUSH, Some(4094), None, None).validate().is_ok());
        assert_eq!(
            e(vlan(ACT_MODIFY, Some(1), Some(0x0800), None)),
            Errno::ProtoNotSupported
        );
        assert_eq!(e(vlan(0, None, None, None)), Errno::Invalid);
        assert_eq!(e(vlan(ACT_POP_ETH, None, None, None)), Errno::NotSupported);
    }
}
