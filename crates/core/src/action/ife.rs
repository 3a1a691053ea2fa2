//! `ife` (`net/sched/act_ife.c`, `net/ife/ife.c`): Inter-FE encapsulation (RFC 8013): carry a packet's
//! metadata (mark, priority, tc_index) to another box inside an outer Ethernet frame, and restore it
//! there.
//!
//! `encode` wraps the whole frame: outer Ethernet header (EtherType 0xED3E unless `type` says otherwise),
//! a 2-byte total metadata length, one TLV per metadatum (type, length = 4 + data, data padded to 4),
//! then the original frame, its Ethernet header included. `allow X` encodes the packet's own value,
//! `use X V` the value V; a value of 0 is not encoded, and a packet with nothing to encode passes
//! unwrapped (counted as an overlimit, as the kernel does). `decode` undoes it: each known TLV sets
//! the packet's field (an unknown one counts an overlimit), the inner Ethernet header gives the
//! protocol, and a malformed header drops the packet (a counted drop).
//!
//! In tclab the outer frame's network header is the IFE header, so after `encode` a packet's `data`
//! starts with the metadata length, and its protocol is the IFE EtherType. tclab packets carry no
//! MAC addresses: the inner header written has zero addresses, `dst`/`src` are kept for the listing
//! only. Lengths change as `vlan`'s do ([`super::resize_frame`]). The kernel's drop of an encoded
//! packet over the device's MTU (egress) is not modelled: an action does not see its device.

use super::{resize_frame, Control, TC_ACT_SHOT};
use crate::packet::Packet;

/// `ETH_P_IFE`.
pub const ETH_P_IFE: u16 = 0xed3e;
/// `IFE_META_*`.
pub const META_SKBMARK: u16 = 1;
pub const META_PRIO: u16 = 3;
pub const META_TCINDEX: u16 = 5;
const ETH_HLEN: usize = 14;

/// One metadatum: allowed (the packet's own value is sent) or used (a fixed value is sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    /// `IFE_META_*`.
    pub id: u16,
    /// `use`'s value; `None` for `allow`.
    pub value: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ife {
    pub action: Control,
    pub encode: bool,
    /// The metadata list: for `encode` as given, in `IFE_META_*` order; `None` when the command sent
    /// none (`decode`: the kernel then allows every kind it knows).
    pub meta: Option<Vec<Meta>>,
    pub dst: Option<[u8; 6]>,
    pub src: Option<[u8; 6]>,
    /// `TCA_IFE_TYPE`; for `encode`, `ETH_P_IFE` when not given.
    pub eth_type: Option<u16>,
}

impl Ife {
    /// The metadata the kernel keeps: as given, or all it knows (mark, tcindex, prio) when none was.
    pub fn kept_meta(&self) -> Vec<Meta> {
        self.meta.clone().unwrap_or_else(|| {
            [META_SKBMARK, META_TCINDEX, META_PRIO]
                .map(|id| Meta { id, value: None })
                .to_vec()
        })
    }

    /// `p->eth_type`: the encoding EtherType (0 for `decode`, which keeps none).
    pub fn kept_type(&self) -> u16 {
        if self.encode {
            self.eth_type.unwrap_or(ETH_P_IFE)
        } else {
            0
        }
    }

    /// `tcf_ife_act`: the control code, whether it counts a drop, whether an overlimit.
    pub fn act(&self, pkt: &mut Packet, at_ingress: bool) -> (Control, bool, bool) {
        if self.encode {
            self.encode(pkt, at_ingress)
        } else {
            self.decode(pkt, at_ingress)
        }
    }

    /// `tcf_ife_encode`.
    fn encode(&self, pkt: &mut Packet, at_ingress: bool) -> (Control, bool, bool) {
        let mut tlvs = Vec::new();
        for m in self.kept_meta() {
            let own = match m.id {
                META_SKBMARK => pkt.mark,
                META_PRIO => pkt.priority,
                _ => u32::from(pkt.tc_index),
            };
            let v = m.value.unwrap_or(own);
            if v == 0 {
                // `ife_encode_meta_*`: nothing to say.
                continue;
            }
            let data: Vec<u8> = if m.id == META_TCINDEX {
                (v as u16).to_be_bytes().to_vec()
            } else {
                v.to_be_bytes().to_vec()
            };
            tlvs.extend_from_slice(&m.id.to_be_bytes());
            tlvs.extend_from_slice(&(data.len() as u16 + 4).to_be_bytes());
            tlvs.extend_from_slice(&data);
            tlvs.resize(tlvs.len().next_multiple_of(4), 0);
        }
        if tlvs.is_empty() {
            return (self.action, false, true);
        }
        if self.action == TC_ACT_SHOT {
            return (TC_ACT_SHOT, true, false);
        }
        let metalen = (tlvs.len() + 2) as u16;
        let mut head = metalen.to_be_bytes().to_vec();
        head.extend_from_slice(&tlvs);
        // The inner Ethernet header: no addresses in a tclab packet, its EtherType.
        head.extend_from_slice(&[0; 12]);
        head.extend_from_slice(&pkt.skb_protocol().to_be_bytes());
        pkt.data.splice(..0, head);
        pkt.protocol = self.kept_type();
        resize_frame(pkt, i32::from(metalen) + ETH_HLEN as i32, at_ingress);
        (self.action, false, false)
    }

    /// `tcf_ife_decode`.
    fn decode(&self, pkt: &mut Packet, at_ingress: bool) -> (Control, bool, bool) {
        let drop = (TC_ACT_SHOT, true, false);
        // `ife_decode`: the length, then the metadata and the inner Ethernet header in the packet.
        if !pkt.materialise(2) {
            return drop;
        }
        let metalen = usize::from(u16::from_be_bytes([pkt.data[0], pkt.data[1]]));
        if metalen < 2 || !pkt.materialise(metalen + ETH_HLEN) {
            return drop;
        }
        let mut over = false;
        let known = self.kept_meta();
        let mut at = 2;
        while at < metalen {
            // `ife_tlv_meta_decode`: a header, a length of at least 4, within the metadata.
            if at + 4 > metalen {
                return drop;
            }
            let d = &pkt.data;
            let kind = u16::from_be_bytes([d[at], d[at + 1]]);
            let tlen = usize::from(u16::from_be_bytes([d[at + 2], d[at + 3]]));
            if tlen < 4 || at + tlen.next_multiple_of(4) > metalen {
                return drop;
            }
            let v = &d[at + 4..at + tlen];
            let be = |n: usize| v.iter().take(n).fold(0u32, |a, b| a << 8 | u32::from(*b));
            match kind {
                _ if !known.iter().any(|m| m.id == kind) => over = true,
                META_SKBMARK => pkt.mark = be(4),
                META_PRIO => pkt.priority = be(4),
                META_TCINDEX => pkt.tc_index = be(2) as u16,
                _ => over = true,
            }
            at += tlen.next_multiple_of(4);
        }
        let inner = metalen + ETH_HLEN;
        pkt.protocol = u16::from_be_bytes([pkt.data[inner - 2], pkt.data[inner - 1]]);
        pkt.data.drain(..inner);
        resize_frame(pkt, -(inner as i32), at_ingress);
        (self.action, false, over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn ife(encode: bool, meta: Option<Vec<Meta>>) -> Ife {
        Ife {
            action: TC_ACT_PIPE,
            encode,
            meta,
            dst: None,
            src: None,
            eth_type: None,
        }
    }

    #[test]
    fn encode_then_decode_carries_the_metadata_across() {
        let enc = ife(
            true,
            Some(vec![
                Meta {
                    id: META_SKBMARK,
                    value: None,
                },
                Meta {
                    id: META_PRIO,
                    value: Some(7),
                },
                Meta {
                    id: META_TCINDEX,
                    value: None,
                },
            ]),
        );
        let orig = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 500);
        let mut p = orig.clone();
        p.mark = 0x1234;
        p.tc_index = 9;
        assert_eq!(enc.act(&mut p, false), (TC_ACT_PIPE, false, false));
        // 2 + three TLVs of 8 bytes = 26 bytes of metadata, then 14 of inner header.
        assert_eq!(&p.data[..2], &26u16.to_be_bytes());
        assert_eq!(&p.data[2..10], &[0, 1, 0, 8, 0, 0, 0x12, 0x34], "mark");
        assert_eq!(
            &p.data[10..18],
            &[0, 3, 0, 8, 0, 0, 0, 7],
            "prio: the used value"
        );
        assert_eq!(
            &p.data[18..26],
            &[0, 5, 0, 6, 0, 9, 0, 0],
            "tcindex, padded"
        );
        assert_eq!(&p.data[38..40], &[0x08, 0x00], "inner EtherType");
        assert_eq!((p.protocol, p.wire_len()), (ETH_P_IFE, Some(540)));
        // The receiving side: fields restored, the original packet back.
        let mut q = Packet {
            data: p.data.clone(),
            len: 540,
            protocol: ETH_P_IFE,
            ..Packet::default()
        };
        assert_eq!(
            ife(false, None).act(&mut q, true),
            (TC_ACT_PIPE, false, false)
        );
        assert_eq!((q.mark, q.priority, q.tc_index), (0x1234, 7, 9));
        assert_eq!((&q.data, q.protocol, q.len), (&orig.data, 0x0800, 500));
    }

    #[test]
    fn nothing_to_encode_passes_unwrapped_and_bad_headers_drop() {
        let enc = ife(
            true,
            Some(vec![Meta {
                id: META_SKBMARK,
                value: None,
            }]),
        );
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        let before = p.clone();
        assert_eq!(enc.act(&mut p, false), (TC_ACT_PIPE, false, true), "mark 0");
        assert_eq!(p, before);
        // Decoding an IPv4 packet: its first bytes read as a metadata length of 0x4500.
        assert_eq!(
            ife(false, None).act(&mut p, true),
            (TC_ACT_SHOT, true, false)
        );
        // A TLV whose length runs past the metadata.
        let mut bad = Packet::of_len(200);
        bad.data = vec![0, 10, 0, 1, 0, 12, 0, 0, 0, 0];
        assert!(ife(false, None).act(&mut bad, true).1, "a counted drop");
    }
}
