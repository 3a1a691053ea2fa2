//! `mpls` (`net/sched/act_mpls.c`): push, pop or rewrite an MPLS label stack entry, or decrement its TTL.
//!
//! A label stack entry (LSE) is 32 bits: label (20), traffic class (3), bottom of stack (1), TTL (8).
//! After a push the kernel's network header is the new LSE (`skb_mpls_push` sets it there and
//! `skb->protocol` to `mpls_uc`/`mpls_mc`), so in a tclab packet, whose bytes start at the network
//! header, the LSE is the first 4 bytes of `data` and `protocol` is the MPLS EtherType. The packet's
//! VLAN tags stay in front of it (the kernel writes the EtherType into the Ethernet header itself, which
//! with an in-header tag would be the tag's TPID; tclab keeps the frame well formed instead).
//!
//! - `push` (`skb_mpls_push`): a new LSE in front: label as given, TTL as given or 255 (the kernel's
//!   default without an MPLS sysctl), TC and BOS as given; without `bos`, the bottom-of-stack bit is set
//!   when the packet was not MPLS already. 4 bytes more.
//! - `pop` (`skb_mpls_pop`): the outermost LSE goes and `protocol` becomes the one given (the next
//!   header's: `ipv4`, or `mpls_uc` for an inner label). A packet that is not MPLS is left as it is.
//!   4 bytes less.
//! - `modify`: the given fields of the outermost LSE are replaced; `dec_ttl` decrements its TTL. Both
//!   drop (a counted drop, `TC_ACT_SHOT`) a packet that is not MPLS, and `dec_ttl` one whose TTL reaches
//!   0.
//!
//! A length change shows as `vlan`'s does ([`super::resize_frame`]): at ingress in `len`, on egress in
//! what leaves the root. `mac_push` (a label in front of the Ethernet header, for pseudowires) is
//! refused: a tclab packet's link header is not something a label can go in front of.

use super::{resize_frame, Control, TC_ACT_SHOT};
use crate::error::{Errno, KernelError};
use crate::packet::Packet;

/// `TCA_MPLS_ACT_*`.
pub const ACT_POP: u32 = 1;
pub const ACT_PUSH: u32 = 2;
pub const ACT_MODIFY: u32 = 3;
pub const ACT_DEC_TTL: u32 = 4;
pub const ACT_MAC_PUSH: u32 = 5;

pub const ETH_P_MPLS_UC: u16 = 0x8847;
pub const ETH_P_MPLS_MC: u16 = 0x8848;
/// `MPLS_LABEL_IMPLNULL`: the implicit null label, never written into a packet.
const LABEL_IMPLNULL: u32 = 3;
const LABEL_MASK: u32 = 0xfffff;
/// `MPLS_HLEN`.
const HLEN: usize = 4;
/// `ACT_MPLS_TTL_DEFAULT`.
const TTL_DEFAULT: u8 = 255;

/// `eth_p_mpls`.
pub fn eth_p_mpls(proto: u16) -> bool {
    proto == ETH_P_MPLS_UC || proto == ETH_P_MPLS_MC
}

/// What tc sends: `struct tc_mpls`'s `m_action` and the `TCA_MPLS_*` attributes it gave.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mpls {
    pub action: Control,
    /// `TCA_MPLS_ACT_*`.
    pub op: u32,
    pub label: Option<u32>,
    pub tc: Option<u8>,
    pub ttl: Option<u8>,
    pub bos: Option<u8>,
    pub proto: Option<u16>,
}

fn invalid(msg: &str) -> KernelError {
    KernelError::invalid(format!("act_mpls: {msg}"))
}

impl Mpls {
    /// The attribute policy, then `tcf_mpls_init`'s checks against the operation.
    pub fn validate(&self) -> Result<(), KernelError> {
        if self
            .label
            .is_some_and(|l| l & !LABEL_MASK != 0 || l == LABEL_IMPLNULL)
        {
            return Err(invalid("MPLS label out of range"));
        }
        if self.tc.is_some_and(|t| t > 7) || self.bos.is_some_and(|b| b > 1) || self.ttl == Some(0)
        {
            return Err(KernelError::invalid("integer out of range"));
        }
        let fields =
            self.label.is_some() || self.ttl.is_some() || self.tc.is_some() || self.bos.is_some();
        match self.op {
            ACT_POP => match self.proto {
                None => Err(invalid("Protocol must be set for MPLS pop")),
                // `eth_proto_is_802_3`: an EtherType, not an 802.3 length.
                Some(p) if p < 0x0600 => Err(invalid("Invalid protocol type for MPLS pop")),
                Some(_) if fields => Err(invalid(
                    "Label, TTL, TC or BOS cannot be used with MPLS pop",
                )),
                Some(_) => Ok(()),
            },
            ACT_DEC_TTL if fields || self.proto.is_some() => Err(invalid(
                "Label, TTL, TC, BOS or protocol cannot be used with MPLS dec_ttl",
            )),
            ACT_DEC_TTL => Ok(()),
            ACT_PUSH | ACT_MAC_PUSH => {
                if self.label.is_none() {
                    return Err(invalid("Label is required for MPLS push"));
                }
                if self.proto.is_some_and(|p| !eth_p_mpls(p)) {
                    return Err(KernelError::msg(
                        Errno::ProtoNotSupported,
                        "act_mpls: Protocol must be an MPLS type for MPLS push",
                    ));
                }
                if self.op == ACT_MAC_PUSH {
                    return Err(KernelError::msg(
                        Errno::NotSupported,
                        "tclab does not support mpls mac_push yet",
                    ));
                }
                Ok(())
            }
            ACT_MODIFY if self.proto.is_some() => {
                Err(invalid("Protocol cannot be used with MPLS modify"))
            }
            ACT_MODIFY => Ok(()),
            _ => Err(invalid("Unknown MPLS action")),
        }
    }

    /// The TTL the kernel keeps (`tcfm_ttl`): as given, 255 for a push without one, else none (0).
    pub fn kept_ttl(&self) -> u8 {
        match self.ttl {
            Some(t) => t,
            None if self.op == ACT_PUSH || self.op == ACT_MAC_PUSH => TTL_DEFAULT,
            None => 0,
        }
    }

    /// The protocol the kernel keeps (`tcfm_proto`): as given, else `mpls_uc`.
    pub fn kept_proto(&self) -> u16 {
        self.proto.unwrap_or(ETH_P_MPLS_UC)
    }

    /// `tcf_mpls_get_lse`: `lse` with the configured fields written in; `set_bos` sets the
    /// bottom-of-stack bit when `bos` was not given.
    fn lse(&self, lse: u32, set_bos: bool) -> u32 {
        let mut v = lse;
        if let Some(l) = self.label {
            v = (v & !(LABEL_MASK << 12)) | l << 12;
        }
        let ttl = self.kept_ttl();
        if ttl != 0 {
            v = (v & !0xff) | u32::from(ttl);
        }
        if let Some(t) = self.tc {
            v = (v & !(7 << 9)) | u32::from(t) << 9;
        }
        match self.bos {
            Some(b) => v = (v & !(1 << 8)) | u32::from(b) << 8,
            None if set_bos => v |= 1 << 8,
            None => {}
        }
        v
    }

    /// `tcf_mpls_act`: the control code, and whether the action dropped the packet (a counted drop).
    /// `at_ingress` is `skb_at_tc_ingress`, for where a length change shows.
    pub fn act(&self, pkt: &mut Packet, at_ingress: bool) -> (Control, bool) {
        let drop = (TC_ACT_SHOT, true);
        match self.op {
            ACT_POP => {
                if !eth_p_mpls(pkt.protocol) {
                    return (self.action, false);
                }
                if !pkt.materialise(HLEN) {
                    return drop;
                }
                pkt.data.drain(..HLEN);
                pkt.protocol = self.kept_proto();
                resize_frame(pkt, -(HLEN as i32), at_ingress);
            }
            ACT_PUSH => {
                let lse = self.lse(0, !eth_p_mpls(pkt.protocol));
                pkt.data.splice(..0, lse.to_be_bytes());
                pkt.protocol = self.kept_proto();
                resize_frame(pkt, HLEN as i32, at_ingress);
            }
            ACT_MODIFY | ACT_DEC_TTL => {
                // `pskb_may_pull` of the LSE, then `skb_mpls_update_lse`'s protocol check.
                if !eth_p_mpls(pkt.protocol) || !pkt.materialise(HLEN) {
                    return drop;
                }
                let old = u32::from_be_bytes([pkt.data[0], pkt.data[1], pkt.data[2], pkt.data[3]]);
                let new = if self.op == ACT_MODIFY {
                    self.lse(old, false)
                } else {
                    // `skb_mpls_dec_ttl`: a TTL that reaches 0 (or was 0) drops the packet.
                    let ttl = (old & 0xff) as u8;
                    if ttl <= 1 {
                        return drop;
                    }
                    (old & !0xff) | u32::from(ttl - 1)
                };
                pkt.data[..HLEN].copy_from_slice(&new.to_be_bytes());
            }
            // Refused by `validate`.
            _ => return drop,
        }
        (self.action, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn mpls(op: u32) -> Mpls {
        Mpls {
            action: TC_ACT_PIPE,
            op,
            label: None,
            tc: None,
            ttl: None,
            bos: None,
            proto: None,
        }
    }

    fn lse(p: &Packet) -> u32 {
        u32::from_be_bytes(p.data[..4].try_into().unwrap())
    }

    #[test]
    fn push_push_pop_pop_gives_the_packet_back() {
        let orig = Packet::udp4([10, 0, 0, 1], 1000, [10, 0, 0, 2], 2000, 0, 1000);
        let mut p = orig.clone();
        let mut push = mpls(ACT_PUSH);
        push.label = Some(20);
        assert_eq!(push.act(&mut p, false), (TC_ACT_PIPE, false));
        // label 20 << 12, TC 0, BOS set (the packet was IPv4), TTL 255.
        assert_eq!(lse(&p), 20 << 12 | 1 << 8 | 255);
        assert_eq!(
            (p.protocol, p.len, p.wire_len()),
            (ETH_P_MPLS_UC, 1000, Some(1004))
        );
        assert_eq!(&p.data[4..], &orig.data[..]);
        // A second label over an MPLS packet: BOS clear; TC and TTL as given.
        let mut outer = mpls(ACT_PUSH);
        outer.label = Some(0xfffff);
        outer.tc = Some(5);
        outer.ttl = Some(64);
        outer.act(&mut p, false);
        assert_eq!(lse(&p), 0xfffff << 12 | 5 << 9 | 64);
        assert_eq!(p.wire_len(), Some(1008));
        let mut pop = mpls(ACT_POP);
        pop.proto = Some(ETH_P_MPLS_UC);
        pop.act(&mut p, false);
        assert_eq!(
            (lse(&p), p.protocol),
            (20 << 12 | 1 << 8 | 255, ETH_P_MPLS_UC)
        );
        pop.proto = Some(0x0800);
        pop.act(&mut p, false);
        assert_eq!(
            (&p.data, p.protocol, p.wire_len()),
            (&orig.data, 0x0800, Some(1000))
        );
        // Popping an IPv4 packet changes nothing.
        assert_eq!(pop.act(&mut p, false), (TC_ACT_PIPE, false));
        assert_eq!(p.data, orig.data);
    }

    #[test]
    fn modify_and_dec_ttl_rewrite_the_outer_entry_and_drop_what_is_not_mpls() {
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 200);
        let mut m = mpls(ACT_MODIFY);
        m.label = Some(77);
        assert_eq!(m.act(&mut p, true), (TC_ACT_SHOT, true), "IPv4 is not MPLS");
        assert_eq!(mpls(ACT_DEC_TTL).act(&mut p, true), (TC_ACT_SHOT, true));
        let mut push = mpls(ACT_PUSH);
        push.label = Some(20);
        push.ttl = Some(2);
        push.tc = Some(3);
        push.act(&mut p, true);
        // At ingress the 4 bytes count at once.
        assert_eq!((p.len, p.wire_len()), (204, None));
        // modify: label replaced, TC, BOS and TTL kept (no TTL given: none kept for modify).
        m.act(&mut p, true);
        assert_eq!(lse(&p), 77 << 12 | 3 << 9 | 1 << 8 | 2);
        m.bos = Some(0);
        m.act(&mut p, true);
        assert_eq!(lse(&p), 77 << 12 | 3 << 9 | 2);
        assert_eq!(mpls(ACT_DEC_TTL).act(&mut p, true), (TC_ACT_PIPE, false));
        assert_eq!(lse(&p) & 0xff, 1);
        // TTL 1 → 0: dropped, the entry left as it was.
        assert_eq!(mpls(ACT_DEC_TTL).act(&mut p, true), (TC_ACT_SHOT, true));
        assert_eq!(lse(&p) & 0xff, 1);
    }

    #[test]
    fn kernel_refusals() {
        let e = |m: Mpls| m.validate().unwrap_err();
        let mut pop = mpls(ACT_POP);
        assert_eq!(
            e(pop.clone()).to_string(),
            "Error: act_mpls: Protocol must be set for MPLS pop."
        );
        pop.proto = Some(0x0800);
        assert!(pop.validate().is_ok());
        pop.ttl = Some(3);
        assert!(e(pop).to_string().contains("cannot be used with MPLS pop"));
        let mut push = mpls(ACT_PUSH);
        assert!(e(push.clone()).to_string().contains("Label is required"));
        push.label = Some(3);
        assert!(e(push.clone())
            .to_string()
            .contains("MPLS label out of range"));
        push.label = Some(0x100000);
        assert!(e(push.clone())
            .to_string()
            .contains("MPLS label out of range"));
        push.label = Some(16);
        push.proto = Some(0x0800);
        assert_eq!(e(push.clone()).errno, Errno::ProtoNotSupported);
        push.proto = Some(ETH_P_MPLS_MC);
        assert!(push.validate().is_ok());
        let mut m = mpls(ACT_MODIFY);
        m.proto = Some(ETH_P_MPLS_UC);
        assert!(e(m)
            .to_string()
            .contains("Protocol cannot be used with MPLS modify"));
        let mut d = mpls(ACT_DEC_TTL);
        d.bos = Some(1);
        assert!(e(d).to_string().contains("MPLS dec_ttl"));
        let mut mac = mpls(ACT_MAC_PUSH);
        mac.label = Some(16);
        assert_eq!(e(mac).errno, Errno::NotSupported);
    }
}
