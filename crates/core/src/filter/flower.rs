//! flower (`net/sched/cls_flower.c`): match a packet on the fields a flow dissector finds in it — EtherType,
//! VLAN tags, MPLS labels, addresses, IP protocol, TOS and TTL, ports and port ranges, TCP flags, ICMP
//! type and code, conntrack state and tunnel metadata — each under a mask, in one lookup per *mask* rather than one test
//! per filter.
//!
//! A filter is a key and a mask over the same structure ([`FlowKey`]), built from the attributes tc sends
//! as `fl_set_key` builds them: a field the command named gets its value and its mask (all ones unless the
//! command gave one), every other field a zero mask. Filters with the same mask share one entry in the
//! instance's *mask list* (`head->masks`, in the order the masks first appeared), and each mask keeps its
//! filters in a table keyed by `key & mask` (`fl_set_masked_key`). Two filters with the same masked key
//! under one mask cannot coexist: the second `add` is refused (`EEXIST`). Classification (`fl_classify`)
//! dissects the packet once into a [`FlowKey`], then for each mask in list order looks the masked packet
//! key up in that mask's table; the first filter found runs its actions, and what they answer is the
//! instance's answer (`continue` passes on to the next instance, not to the next mask). A mask with a port
//! range (`dst_port 1000-2000`) cannot be looked up directly, since the packet has a port and the filter a
//! range: the kernel walks the mask's filters in the order they were added, and for each whose range holds
//! the packet's port, looks the packet key up with that filter's range in place (`fl_lookup_range`).
//!
//! What a tclab packet carries, and therefore what can match. [`Packet::data`] starts at the network
//! header, so the EtherType is `Packet::protocol`. The Ethernet addresses are those of the frame a
//! packet arrived in ([`Packet::eth_addrs`]: `tclab live` keeps them), compared as the kernel compares
//! `eth_hdr(skb)`; a simulated packet has no frame, so for it a filter with `dst_mac` or `src_mac`
//! never matches (its mask is skipped), where the kernel would compare the addresses its stack wrote.
//! `indev` never matches, as with u32 and fw: a tclab packet carries no input device. The rest is
//! dissected as `fl_classify` does it:
//!
//! - VLAN tags (`__skb_flow_dissect`'s VLAN case): the accelerated tag ([`Packet::vlan`]) and then
//!   those in the link header ([`Packet::vlan_inline`]) fill `vlan` and `cvlan`, each with the EtherType
//!   that follows it, and `num_of_vlans` counts them. A `vlan push` gives a packet its tags (in live mode
//!   so does the wire); a filter's protocol 802.1Q/802.1ad is compared with the outer tag's TPID.
//! - IPv4 and IPv6 with flower's flags: IPv6 extension headers (hop-by-hop, routing, destination
//!   options, fragment) are walked; a fragment sets `ip_flags frag` (and `firstfrag` when its offset is
//!   0) and carries no ports, TCP flags or ICMP fields, since flower does not ask to parse the first
//!   fragment; a header cut short leaves the fields it would have filled at zero.
//! - Conntrack (`skb_flow_dissect_ct`): `ct_state`, `ct_zone`, `ct_mark` and `ct_label` from the
//!   connection the packet carries ([`Packet::ct_state`], set by the netfilter hooks while the host's
//!   netfilter is in use, as the kernel registers conntrack's hooks only for a user, and by the `ct`
//!   action, with `ct_zone`, `ct_mark` and [`Packet::ct_labels`]); an untracked packet's are zero, so
//!   only `-trk` matches it. The hooks' connections have no labels; `ct commit label` gives some.
//! - Tunnel metadata (`skb_flow_dissect_tunnel_info`): the `enc_*` keys from the tunnel a `tunnel_key
//!   set` attached ([`Packet::tunnel`]): outer addresses and their family, key id (0 without one),
//!   UDP destination port, TOS and TTL; zero without a tunnel, so `enc_key_id 0` takes such a packet,
//!   as the kernel's zeroed key does. Its options (Geneve, VXLAN, ERSPAN) as the bytes the kernel
//!   keeps, for `geneve_opts`, `vxlan_opts`, `erspan_opts` and `gtp_opts` ([`super::flower_opts`]).
//!
//! - MPLS (`__skb_flow_dissect_mpls`): a packet of protocol `mpls_uc`/`mpls_mc` (an `mpls push` makes
//!   one; its entries are the first bytes of [`Packet::data`]) has its label stack read entry by entry,
//!   up to the bottom of the stack or [`MPLS_MAX`] entries, each entry's presence a bit of the key
//!   (`used_lses`): a filter on depth 2 never takes a one-label packet. What lies under the stack is
//!   not dissected, as in the kernel.
//!
//! - ARP and RARP (`__skb_flow_dissect_arp`): an Ethernet/IPv4 request or reply gives `arp_sip`,
//!   `arp_tip`, `arp_op` (the opcode's low byte), `arp_sha` and `arp_tha`; any other ARP message
//!   leaves them zero. tclab's simulated hosts send no ARP; live frames bring it.
//!
//! - PPPoE sessions (`__skb_flow_dissect`'s `ETH_P_PPP_SES` case, `tclab live`'s frames): a valid
//!   session header gives `pppoe_sid`, `ppp_proto` and the session's type, and IPv4, IPv6 or MPLS
//!   inside are dissected on as above (the EtherType key becomes theirs); every `protocol ppp_ses`
//!   filter matches the session's type, so none takes a frame whose session header is not valid.
//!
//! Hardware offload: no tclab device offloads filters, so every filter runs in software and is reported
//! `not_in_hw` (`in_hw_count` 0); `skip_sw` asks for a filter that runs only in hardware, which a block of
//! such devices cannot place (`EOPNOTSUPP`, as `tc_setup_cb_add` answers for a block with a device that
//! cannot offload), and `skip_sw` together with `skip_hw` is no valid combination (`EINVAL`).

use super::flower_opts::{EncOpts, EncOptsSpec};
use super::NO_MATCH;
use super::{Exts, ExtsSpec, TcfResult, CLS_FLAGS_NOT_IN_HW, CLS_FLAGS_SKIP_HW, CLS_FLAGS_SKIP_SW};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::wire::{be16, byte, Ipv4};
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `TCA_CLS_FLAGS_VERBOSE`: kept and dumped, never printed by tc.
pub const CLS_FLAGS_VERBOSE: u32 = 16;

/// `FLOW_DIS_IS_FRAGMENT` and `FLOW_DIS_FIRST_FRAG` (the same bits as `TCA_FLOWER_KEY_FLAGS_*`).
pub const FLAG_IS_FRAGMENT: u8 = 1;
pub const FLAG_FIRST_FRAG: u8 = 2;

/// `control.addr_type`: which address pair the key holds.
pub const ADDR_IPV4: u8 = 1;
pub const ADDR_IPV6: u8 = 2;

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
pub use crate::action::mpls::{ETH_P_MPLS_MC, ETH_P_MPLS_UC};
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_PPP_SES: u16 = 0x8864;
/// PPP protocol numbers (`linux/ppp_defs.h`) that carry what the dissector reads on.
pub const PPP_IP: u16 = 0x21;
pub const PPP_IPV6: u16 = 0x57;
pub const PPP_MPLS_UC: u16 = 0x0281;
pub const PPP_MPLS_MC: u16 = 0x0283;
pub const ETH_P_RARP: u16 = 0x8035;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_SCTP: u8 = 132;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_ICMPV6: u8 = 58;

/// `struct flow_dissector_key_vlan`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VlanKey {
    pub id: u16,
    pub prio: u8,
    pub tpid: u16,
    pub eth_type: u16,
}

/// `FLOW_DIS_MPLS_MAX`: the label stack entries the dissector reads.
pub const MPLS_MAX: usize = 7;

/// `struct flow_dissector_mpls_lse`: one label stack entry's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MplsLse {
    pub label: u32,
    pub tc: u8,
    pub bos: u8,
    pub ttl: u8,
}

impl MplsLse {
    fn and(&self, m: &MplsLse) -> MplsLse {
        MplsLse {
            label: self.label & m.label,
            tc: self.tc & m.tc,
            bos: self.bos & m.bos,
            ttl: self.ttl & m.ttl,
        }
    }
}

/// `struct fl_flow_key`, the fields tclab dissects: the packet's key, a filter's key, or a mask (a field
/// of a mask is all ones where the field counts). Ports, EtherTypes and flags in host order. In a
/// snapshot ([`crate::snapshot`]) its addresses up to their last byte that is not zero: an IPv4
/// filter fills 4 of 16 bytes, most keys and masks have no Ethernet or ARP part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlowKey {
    /// `meta.ingress_ifindex`: the device a packet came in on (`indev`); 0 in a packet's key, as tclab
    /// packets carry no input device.
    pub ingress_ifindex: u32,
    #[serde(with = "crate::snapshot::zero_padded")]
    pub eth_dst: [u8; 6],
    #[serde(with = "crate::snapshot::zero_padded")]
    pub eth_src: [u8; 6],
    /// `num_of_vlans`: how many VLAN tags the packet carries (the accelerated one and those in its
    /// link header; a `vlan` action puts them there).
    pub num_of_vlans: u8,
    /// `basic.n_proto`.
    pub n_proto: u16,
    /// `basic.ip_proto`.
    pub ip_proto: u8,
    /// `control.addr_type`: [`ADDR_IPV4`], [`ADDR_IPV6`] or 0.
    pub addr_type: u8,
    /// `control.flags`: [`FLAG_IS_FRAGMENT`], [`FLAG_FIRST_FRAG`].
    pub ip_flags: u8,
    pub vlan: VlanKey,
    pub cvlan: VlanKey,
    /// IPv4 addresses in the first 4 bytes, IPv6 in all 16 (the kernel's union of the two).
    #[serde(with = "crate::snapshot::zero_padded")]
    pub src: [u8; 16],
    #[serde(with = "crate::snapshot::zero_padded")]
    pub dst: [u8; 16],
    pub tos: u8,
    pub ttl: u8,
    /// `tp`: source and destination ports (TCP, UDP, SCTP, DCCP, UDP-Lite; the SPI's halves for ESP).
    pub sport: u16,
    pub dport: u16,
    /// `tcp.flags`: the 12 bits after the data offset.
    pub tcp_flags: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// `tp_range`: [source, destination] minimum and maximum ports of a range filter.
    pub port_min: [u16; 2],
    pub port_max: [u16; 2],
    /// `enc_control.addr_type`: the family of the tunnel's addresses ([`ADDR_IPV4`], [`ADDR_IPV6`]).
    pub enc_addr_type: u8,
    /// `enc_ipv4`/`enc_ipv6`: the tunnel's outer addresses, as `src` and `dst` hold the packet's.
    #[serde(with = "crate::snapshot::zero_padded")]
    pub enc_src: [u8; 16],
    #[serde(with = "crate::snapshot::zero_padded")]
    pub enc_dst: [u8; 16],
    /// `enc_key_id.keyid`: the tunnel key (VNI, GRE key).
    pub enc_key_id: u32,
    /// `enc_tp.dst`: the tunnel's UDP destination port.
    pub enc_dst_port: u16,
    /// `enc_ip`: the outer TOS and TTL.
    pub enc_tos: u8,
    pub enc_ttl: u8,
    /// `enc_opts`: the tunnel's options.
    pub enc_opts: EncOpts,
    /// `ct.ct_state`: `TCA_FLOWER_KEY_CT_FLAGS_*` ([`Packet::CT_TRACKED`] …).
    pub ct_state: u16,
    pub ct_zone: u16,
    pub ct_mark: u32,
    #[serde(with = "crate::snapshot::zero_padded")]
    pub ct_labels: [u8; 16],
    /// `arp`: sender and target protocol addresses, the opcode's low byte, sender and target hardware
    /// addresses.
    pub arp_sip: [u8; 4],
    pub arp_tip: [u8; 4],
    pub arp_op: u8,
    #[serde(with = "crate::snapshot::zero_padded")]
    pub arp_sha: [u8; 6],
    #[serde(with = "crate::snapshot::zero_padded")]
    pub arp_tha: [u8; 6],
    /// `pppoe`: the session id, the PPP protocol, and `type` (ETH_P_PPP_SES once a session header
    /// was read: it tells a PPPoE packet apart once `n_proto` is the protocol inside).
    pub pppoe_sid: u16,
    pub ppp_proto: u16,
    pub pppoe_type: u16,
    /// `mpls.ls`: the label stack, outermost first.
    pub mpls: [MplsLse; MPLS_MAX],
    /// `mpls.used_lses`: bit i for each entry the packet has (the filter names).
    pub mpls_used: u8,
}

fn and6(a: [u8; 6], b: [u8; 6]) -> [u8; 6] {
    std::array::from_fn(|i| a[i] & b[i])
}
fn and16(a: [u8; 16], b: [u8; 16]) -> [u8; 16] {
    std::array::from_fn(|i| a[i] & b[i])
}

impl VlanKey {
    fn and(&self, m: &VlanKey) -> VlanKey {
        VlanKey {
            id: self.id & m.id,
            prio: self.prio & m.prio,
            tpid: self.tpid & m.tpid,
            eth_type: self.eth_type & m.eth_type,
        }
    }
}

impl FlowKey {
    /// `fl_set_masked_key`: every field under the mask.
    pub fn and(&self, m: &FlowKey) -> FlowKey {
        FlowKey {
            ingress_ifindex: self.ingress_ifindex & m.ingress_ifindex,
            eth_dst: and6(self.eth_dst, m.eth_dst),
            eth_src: and6(self.eth_src, m.eth_src),
            num_of_vlans: self.num_of_vlans & m.num_of_vlans,
            n_proto: self.n_proto & m.n_proto,
            ip_proto: self.ip_proto & m.ip_proto,
            addr_type: self.addr_type & m.addr_type,
            ip_flags: self.ip_flags & m.ip_flags,
            vlan: self.vlan.and(&m.vlan),
            cvlan: self.cvlan.and(&m.cvlan),
            src: and16(self.src, m.src),
            dst: and16(self.dst, m.dst),
            tos: self.tos & m.tos,
            ttl: self.ttl & m.ttl,
            sport: self.sport & m.sport,
            dport: self.dport & m.dport,
            tcp_flags: self.tcp_flags & m.tcp_flags,
            icmp_type: self.icmp_type & m.icmp_type,
            icmp_code: self.icmp_code & m.icmp_code,
            port_min: [
                self.port_min[0] & m.port_min[0],
                self.port_min[1] & m.port_min[1],
            ],
            port_max: [
                self.port_max[0] & m.port_max[0],
                self.port_max[1] & m.port_max[1],
            ],
            enc_addr_type: self.enc_addr_type & m.enc_addr_type,
            enc_src: and16(self.enc_src, m.enc_src),
            enc_dst: and16(self.enc_dst, m.enc_dst),
            enc_key_id: self.enc_key_id & m.enc_key_id,
            enc_dst_port: self.enc_dst_port & m.enc_dst_port,
            enc_tos: self.enc_tos & m.enc_tos,
            enc_ttl: self.enc_ttl & m.enc_ttl,
            enc_opts: self.enc_opts.and(&m.enc_opts),
            ct_state: self.ct_state & m.ct_state,
            ct_zone: self.ct_zone & m.ct_zone,
            ct_mark: self.ct_mark & m.ct_mark,
            ct_labels: and16(self.ct_labels, m.ct_labels),
            arp_sip: std::array::from_fn(|i| self.arp_sip[i] & m.arp_sip[i]),
            arp_tip: std::array::from_fn(|i| self.arp_tip[i] & m.arp_tip[i]),
            arp_op: self.arp_op & m.arp_op,
            arp_sha: and6(self.arp_sha, m.arp_sha),
            arp_tha: and6(self.arp_tha, m.arp_tha),
            pppoe_sid: self.pppoe_sid & m.pppoe_sid,
            ppp_proto: self.ppp_proto & m.ppp_proto,
            pppoe_type: self.pppoe_type & m.pppoe_type,
            mpls: std::array::from_fn(|i| self.mpls[i].and(&m.mpls[i])),
            mpls_used: self.mpls_used & m.mpls_used,
        }
    }

    /// Does this mask range over source (`0`) or destination (`1`) ports (`TCA_FLOWER_MASK_FLAGS_RANGE`)?
    fn has_range(&self, end: usize) -> bool {
        self.port_min[end] != 0 && self.port_max[end] != 0
    }

    /// The key `__skb_flow_dissect` finds in `pkt` with flower's dissector (see the module's essay).
    pub fn dissect(pkt: &Packet) -> FlowKey {
        let mut k = FlowKey {
            n_proto: pkt.protocol,
            ..Default::default()
        };
        // `FLOW_DISSECTOR_KEY_ETH_ADDRS`: the frame's addresses (`eth_hdr(skb)`), where there is a frame.
        if let Some(a) = pkt.eth_addrs() {
            k.eth_dst.copy_from_slice(&a[..6]);
            k.eth_src.copy_from_slice(&a[6..]);
        }
        k.tunnel_info(pkt);
        // `skb_flow_dissect_ct`: an untracked packet leaves the key zero.
        if pkt.ct_state != 0 {
            k.ct_state = pkt.ct_state as u16;
            k.ct_zone = pkt.ct_zone();
            k.ct_mark = pkt.ct_mark.unwrap_or(0);
            k.ct_labels = pkt.ct_labels();
        }
        // `__skb_flow_dissect`'s VLAN case: the accelerated tag first, then those in the header; the
        // first two fill `vlan` and `cvlan`, each with the EtherType that follows it.
        let accel = pkt.vlan();
        let tags: Vec<_> = accel.iter().chain(pkt.vlan_inline()).collect();
        for (i, t) in tags.iter().enumerate() {
            let key = VlanKey {
                id: t.tci & 0x0fff,
                prio: (t.tci >> 13) as u8,
                tpid: t.proto,
                eth_type: tags.get(i + 1).map_or(pkt.protocol, |n| n.proto),
            };
            match i {
                0 => k.vlan = key,
                1 => k.cvlan = key,
                _ => {}
            }
        }
        k.num_of_vlans = tags.len().min(255) as u8;
        // A PPPoE session's keys, then the protocol it carries from after its header on.
        let (n_proto, d) = match pkt.protocol {
            ETH_P_PPP_SES => match k.dissect_pppoe(&pkt.data) {
                Some(inner) => inner,
                None => return k,
            },
            p => (p, &pkt.data[..]),
        };
        k.n_proto = n_proto;
        let (proto, l4) = match n_proto {
            ETH_P_IP => {
                let Some(ip) = Ipv4::parse(d) else {
                    return k;
                };
                k.addr_type = ADDR_IPV4;
                k.src[..4].copy_from_slice(&ip.src().to_be_bytes());
                k.dst[..4].copy_from_slice(&ip.dst().to_be_bytes());
                k.tos = ip.tos();
                k.ttl = ip.ttl();
                k.ip_proto = ip.protocol();
                if ip.is_fragment() {
                    // `goto out_good`: flower does not ask for the first fragment's ports.
                    k.ip_flags = FLAG_IS_FRAGMENT;
                    if ip.frag_offset() == 0 {
                        k.ip_flags |= FLAG_FIRST_FRAG;
                    }
                    return k;
                }
                (ip.protocol(), ip.header_len())
            }
            ETH_P_IPV6 => {
                if d.len() < 40 || d[0] >> 4 != 6 {
                    return k;
                }
                k.addr_type = ADDR_IPV6;
                k.src.copy_from_slice(&d[8..24]);
                k.dst.copy_from_slice(&d[24..40]);
                // `ipv6_get_dsfield`: the traffic class straddles the first two bytes.
                k.tos = (u16::from_be_bytes([d[0], d[1]]) >> 4) as u8;
                k.ttl = d[7];
                let mut proto = d[6];
                let mut off = 40usize;
                loop {
                    k.ip_proto = proto;
                    match proto {
                        // NEXTHDR_HOP, NEXTHDR_ROUTING, NEXTHDR_DEST.
                        0 | 43 | 60 => {
                            let (Some(next), Some(len)) =
                                (byte(d, off as i64), byte(d, off as i64 + 1))
                            else {
                                return k;
                            };
                            proto = next;
                            off += (len as usize + 1) << 3;
                        }
                        // NEXTHDR_FRAGMENT.
                        44 => {
                            let (Some(next), Some(frag)) =
                                (byte(d, off as i64), be16(d, off as i64 + 2))
                            else {
                                return k;
                            };
                            k.ip_proto = next;
                            k.ip_flags = FLAG_IS_FRAGMENT;
                            if frag & 0xfff8 == 0 {
                                k.ip_flags |= FLAG_FIRST_FRAG;
                            }
                            return k;
                        }
                        _ => break,
                    }
                }
                (proto, off)
            }
            ETH_P_MPLS_UC | ETH_P_MPLS_MC => {
                k.dissect_mpls(d);
                return k;
            }
            ETH_P_ARP | ETH_P_RARP => {
                k.dissect_arp(d);
                return k;
            }
            _ => return k,
        };
        let l4 = l4 as i64;
        // `proto_ports_offset`: where the ports are, for the protocols that have them.
        let ports_at = match proto {
            6 | 17 | 33 | 50 | 132 | 136 => Some(l4),
            51 => Some(l4 + 4),
            _ => None,
        };
        if let Some(at) = ports_at {
            if let (Some(s), Some(t)) = (be16(d, at), be16(d, at + 2)) {
                (k.sport, k.dport) = (s, t);
            }
        }
        match proto {
            IPPROTO_TCP => {
                // `__skb_flow_dissect_tcp`: a header that claims to be shorter than 20 bytes has no flags.
                if let (Some(_), Some(w)) = (byte(d, l4 + 19), be16(d, l4 + 12)) {
                    if (w >> 12) >= 5 {
                        k.tcp_flags = w & 0x0fff;
                    }
                }
            }
            IPPROTO_ICMP | IPPROTO_ICMPV6 => {
                if let (Some(t), Some(c)) = (byte(d, l4), byte(d, l4 + 1)) {
                    (k.icmp_type, k.icmp_code) = (t, c);
                }
            }
            _ => {}
        }
        k
    }
}

impl FlowKey {
    /// `__skb_flow_dissect_mpls`, entry after entry (`FLOW_DISSECT_RET_PROTO_AGAIN`) until the bottom
    /// of the stack or [`MPLS_MAX`] entries; what lies under the stack is not dissected. An entry cut
    /// short ends the walk with the entries before it.
    fn dissect_mpls(&mut self, d: &[u8]) {
        for i in 0..MPLS_MAX {
            let Some(e) = d.get(4 * i..4 * i + 4) else {
                return;
            };
            let e = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            self.mpls[i] = MplsLse {
                label: e >> 12,
                tc: ((e >> 9) & 7) as u8,
                bos: ((e >> 8) & 1) as u8,
                ttl: e as u8,
            };
            self.mpls_used |= 1 << i;
            if e & 0x100 != 0 {
                return;
            }
        }
    }

    /// `__skb_flow_dissect`'s PPPoE session case: a valid session header (version 1, type 1, code 0)
    /// and its PPP protocol (one byte when compressed) give `pppoe`'s keys; IPv4, IPv6 and MPLS go on
    /// to be dissected from after the header (returned), another valid PPP protocol stops there, and
    /// an invalid header or protocol leaves the keys zero.
    fn dissect_pppoe<'a>(&mut self, d: &'a [u8]) -> Option<(u16, &'a [u8])> {
        let h = d.get(..8)?;
        if h[0] != 0x11 || h[1] != 0 {
            return None;
        }
        let mut ppp = u16::from_be_bytes([h[6], h[7]]);
        let mut hlen = 8;
        if ppp & 0x0100 != 0 {
            // The low bit of the first octet: the field was compressed to one byte.
            ppp >>= 8;
            hlen = 7;
        }
        let inner = match ppp {
            PPP_IP => Some(ETH_P_IP),
            PPP_IPV6 => Some(ETH_P_IPV6),
            PPP_MPLS_UC => Some(ETH_P_MPLS_UC),
            PPP_MPLS_MC => Some(ETH_P_MPLS_MC),
            // `ppp_proto_is_valid`: an odd low byte and an even high one.
            p if p & 0x0101 == 0x0001 => None,
            _ => return None,
        };
        self.pppoe_sid = u16::from_be_bytes([h[2], h[3]]);
        self.ppp_proto = ppp;
        self.pppoe_type = ETH_P_PPP_SES;
        inner.map(|p| (p, &d[hlen..]))
    }

    /// `__skb_flow_dissect_arp`: Ethernet/IPv4 ARP requests and replies only; anything else (another
    /// hardware or protocol type, other lengths or opcodes, a message cut short) leaves the fields zero.
    fn dissect_arp(&mut self, d: &[u8]) {
        let Some(h) = d.get(..28) else {
            return;
        };
        let op = u16::from_be_bytes([h[6], h[7]]);
        let ethernet_ipv4 = h[..6] == [0, 1, 0x08, 0x00, 6, 4];
        if !ethernet_ipv4 || !(op == 1 || op == 2) {
            return;
        }
        self.arp_sha.copy_from_slice(&h[8..14]);
        self.arp_sip.copy_from_slice(&h[14..18]);
        self.arp_tha.copy_from_slice(&h[18..24]);
        self.arp_tip.copy_from_slice(&h[24..28]);
        // "Only store the lower byte of the opcode."
        self.arp_op = op as u8;
    }

    /// `skb_flow_dissect_tunnel_info`: the `enc_*` keys from the tunnel a `tunnel_key set` attached
    /// (`skb_tunnel_info`); nothing without one.
    fn tunnel_info(&mut self, pkt: &Packet) {
        let Some(t) = pkt.tunnel() else {
            return;
        };
        let put = |dst: &mut [u8; 16], a: &std::net::IpAddr| match a {
            std::net::IpAddr::V4(v) => dst[..4].copy_from_slice(&v.octets()),
            std::net::IpAddr::V6(v) => *dst = v.octets(),
        };
        self.enc_addr_type = if t.src.is_ipv4() {
            ADDR_IPV4
        } else {
            ADDR_IPV6
        };
        put(&mut self.enc_src, &t.src);
        put(&mut self.enc_dst, &t.dst);
        // `tunnel_id_to_key32`: the id without `TUNNEL_KEY` is 0.
        self.enc_key_id = t.key_id.unwrap_or(0);
        self.enc_dst_port = t.dst_port;
        self.enc_tos = t.tos;
        self.enc_ttl = t.ttl;
        if let Some(o) = &t.opts {
            self.enc_opts = EncOpts::from_tunnel(o);
        }
    }
}

/// One label stack entry as tc sends it: `TCA_FLOWER_KEY_MPLS_OPT_LSE_*` (depth from 1), or the
/// first entry's `TCA_FLOWER_KEY_MPLS_*` (no depth).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LseSpec {
    pub depth: Option<u8>,
    pub label: Option<u32>,
    pub tc: Option<u8>,
    pub bos: Option<u8>,
    pub ttl: Option<u8>,
}

/// flower's two ways of naming MPLS fields (tc sends one or the other, never both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MplsMatch {
    /// `mpls_label`, `mpls_tc`, `mpls_bos`, `mpls_ttl`: the outermost entry.
    First(LseSpec),
    /// `mpls lse depth D …`: `TCA_FLOWER_KEY_MPLS_OPTS`, entries by depth.
    Lses(Vec<LseSpec>),
}

impl LseSpec {
    /// `fl_set_key_mpls_lse`'s fields (and `fl_set_key_mpls`'s for the first entry): each one named is
    /// matched whole, after the range checks.
    fn set(&self, k: &mut MplsLse, m: &mut MplsLse) -> Result<(), KernelError> {
        if let Some(ttl) = self.ttl {
            (k.ttl, m.ttl) = (ttl, 0xff);
        }
        if let Some(bos) = self.bos {
            if bos > 1 {
                return Err(KernelError::invalid("Bottom Of Stack (BOS) must be 0 or 1"));
            }
            (k.bos, m.bos) = (bos, 1);
        }
        if let Some(tc) = self.tc {
            if tc > 7 {
                return Err(KernelError::invalid(
                    "Traffic Class (TC) must be between 0 and 7",
                ));
            }
            (k.tc, m.tc) = (tc, 7);
        }
        if let Some(label) = self.label {
            if label > 0xfffff {
                return Err(KernelError::invalid("Label must be between 0 and 1048575"));
            }
            (k.label, m.label) = (label, 0xfffff);
        }
        Ok(())
    }

    fn any(&self) -> bool {
        self.label.is_some() || self.tc.is_some() || self.bos.is_some() || self.ttl.is_some()
    }
}

/// A value and its mask, as tc sends a `TCA_FLOWER_KEY_X` / `TCA_FLOWER_KEY_X_MASK` pair.
pub type Masked<T> = (T, T);

/// What `tc filter … flower …` sends (`TCA_FLOWER_*`); [`FlowerOptions::set_key`] turns it into a key and a
/// mask as `fl_set_key` does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowerOptions {
    pub classid: Option<u32>,
    /// `TCA_FLOWER_FLAGS`: skip_hw, skip_sw, verbose.
    pub flags: u32,
    pub indev: Option<String>,
    /// The index of `indev`'s device (`tcf_change_indev`), which the engine fills in: its [`DevId`] + 1.
    ///
    /// [`DevId`]: crate::engine::DevId
    pub indev_ifindex: u32,
    /// `TCA_FLOWER_KEY_ETH_TYPE`: the filter's protocol unless it is `all`.
    pub eth_type: Option<u16>,
    pub eth_dst: Option<Masked<[u8; 6]>>,
    pub eth_src: Option<Masked<[u8; 6]>>,
    pub num_of_vlans: Option<u8>,
    pub vlan_id: Option<u16>,
    pub vlan_prio: Option<u8>,
    pub vlan_eth_type: Option<u16>,
    pub cvlan_id: Option<u16>,
    pub cvlan_prio: Option<u8>,
    pub cvlan_eth_type: Option<u16>,
    pub ip_proto: Option<u8>,
    pub ip_tos: Option<Masked<u8>>,
    pub ip_ttl: Option<Masked<u8>>,
    pub ipv4_src: Option<Masked<[u8; 4]>>,
    pub ipv4_dst: Option<Masked<[u8; 4]>>,
    pub ipv6_src: Option<Masked<[u8; 16]>>,
    pub ipv6_dst: Option<Masked<[u8; 16]>>,
    /// `TCA_FLOWER_KEY_{TCP,UDP,SCTP}_{SRC,DST}` (the protocol's own pair): [source, destination].
    pub ports: [Option<Masked<u16>>; 2],
    /// `TCA_FLOWER_KEY_PORT_{SRC,DST}_{MIN,MAX}`: [source, destination] (min, max).
    pub port_range: [Option<(u16, u16)>; 2],
    pub tcp_flags: Option<Masked<u16>>,
    pub icmp_type: Option<Masked<u8>>,
    pub icmp_code: Option<Masked<u8>>,
    /// `TCA_FLOWER_KEY_FLAGS` and its mask (`ip_flags frag/firstfrag`).
    pub key_flags: Option<Masked<u32>>,
    /// `TCA_FLOWER_KEY_ENC_IPV4_*` / `_IPV6_*`: [source, destination], one family.
    pub enc_ipv4: [Option<Masked<[u8; 4]>>; 2],
    pub enc_ipv6: [Option<Masked<[u8; 16]>>; 2],
    pub enc_key_id: Option<u32>,
    pub enc_dst_port: Option<Masked<u16>>,
    pub enc_tos: Option<Masked<u8>>,
    pub enc_ttl: Option<Masked<u8>>,
    /// `TCA_FLOWER_KEY_ENC_OPTS` and its mask.
    pub enc_opts: Option<EncOptsSpec>,
    /// `TCA_FLOWER_KEY_CT_STATE` (`TCA_FLOWER_KEY_CT_FLAGS_*`), `_ZONE`, `_MARK`, with their masks.
    pub ct_state: Option<Masked<u16>>,
    pub ct_zone: Option<Masked<u16>>,
    pub ct_mark: Option<Masked<u32>>,
    /// `TCA_FLOWER_KEY_CT_LABELS` and its mask, zero-filled past what tc sent (`nla_memcpy`).
    pub ct_labels: Option<Masked<[u8; 16]>>,
    pub mpls: Option<MplsMatch>,
    /// `TCA_FLOWER_KEY_PPPOE_SID` and `TCA_FLOWER_KEY_PPP_PROTO`.
    pub pppoe_sid: Option<u16>,
    pub ppp_proto: Option<u16>,
    /// `TCA_FLOWER_KEY_ARP_SIP`, `_TIP`, `_OP`, `_SHA`, `_THA` with their masks.
    pub arp_sip: Option<Masked<[u8; 4]>>,
    pub arp_tip: Option<Masked<[u8; 4]>>,
    pub arp_op: Option<Masked<u8>>,
    pub arp_sha: Option<Masked<[u8; 6]>>,
    pub arp_tha: Option<Masked<[u8; 6]>>,
    pub exts: ExtsSpec,
}

fn vlan_type(t: u16) -> bool {
    t == ETH_P_8021Q || t == ETH_P_8021AD
}

impl FlowerOptions {
    /// `fl_set_key`: the filter's key and mask.
    pub fn set_key(&self) -> Result<(FlowKey, FlowKey), KernelError> {
        let mut k = FlowKey::default();
        let mut m = FlowKey::default();
        if self.indev.is_some() {
            k.ingress_ifindex = self.indev_ifindex;
            m.ingress_ifindex = u32::MAX;
        }
        set_val(self.eth_dst, &mut k.eth_dst, &mut m.eth_dst);
        set_val(self.eth_src, &mut k.eth_src, &mut m.eth_src);
        if let Some(n) = self.num_of_vlans {
            k.num_of_vlans = n;
            m.num_of_vlans = 0xff;
        }
        // `is_vlan_key`: a VLAN EtherType (or enough tags by `num_of_vlans`) opens the tag's keys; any
        // other EtherType is the packet's protocol.
        let is_vlan_key = |t: Option<u16>, k: &mut FlowKey, m: &mut FlowKey, vthresh: u8| {
            let good = k.num_of_vlans > vthresh;
            match t {
                None => (good, 0),
                Some(t) if good || vlan_type(t) => (true, t),
                Some(t) => {
                    k.n_proto = t;
                    m.n_proto = 0xffff;
                    (false, t)
                }
            }
        };
        // `fl_set_key_vlan`.
        let set_vlan = |key: &mut VlanKey, mask: &mut VlanKey, tpid: u16, id, prio, eth| {
            if let Some(id) = id {
                key.id = id & 0x0fff;
                mask.id = 0x0fff;
            }
            if let Some(p) = prio {
                key.prio = p & 7;
                mask.prio = 7;
            }
            if tpid != 0 {
                key.tpid = tpid;
                mask.tpid = 0xffff;
            }
            if let Some(e) = eth {
                key.eth_type = e;
                mask.eth_type = 0xffff;
            }
        };
        let (outer, tpid) = is_vlan_key(self.eth_type, &mut k, &mut m, 0);
        if outer {
            let (id, prio, eth) = (self.vlan_id, self.vlan_prio, self.vlan_eth_type);
            set_vlan(&mut k.vlan, &mut m.vlan, tpid, id, prio, eth);
            let (inner, tpid) = is_vlan_key(self.vlan_eth_type, &mut k, &mut m, 1);
            if inner {
                let (id, prio, eth) = (self.cvlan_id, self.cvlan_prio, self.cvlan_eth_type);
                set_vlan(&mut k.cvlan, &mut m.cvlan, tpid, id, prio, eth);
                if let Some(p) = self.cvlan_eth_type {
                    k.n_proto = p;
                    m.n_proto = 0xffff;
                }
            }
        }
        if k.n_proto == ETH_P_PPP_SES {
            self.set_key_pppoe(&mut k, &mut m);
        }
        if k.n_proto == ETH_P_IP || k.n_proto == ETH_P_IPV6 {
            if let Some(p) = self.ip_proto {
                k.ip_proto = p;
                m.ip_proto = 0xff;
            }
            set_val(self.ip_tos, &mut k.tos, &mut m.tos);
            set_val(self.ip_ttl, &mut k.ttl, &mut m.ttl);
        }
        let put = |dst: &mut [u8; 16], src: &[u8]| dst[..src.len()].copy_from_slice(src);
        if self.ipv4_src.is_some() || self.ipv4_dst.is_some() {
            k.addr_type = ADDR_IPV4;
            m.addr_type = 0xff;
            if let Some((v, mask)) = self.ipv4_src {
                put(&mut k.src, &v);
                put(&mut m.src, &mask);
            }
            if let Some((v, mask)) = self.ipv4_dst {
                put(&mut k.dst, &v);
                put(&mut m.dst, &mask);
            }
        } else if self.ipv6_src.is_some() || self.ipv6_dst.is_some() {
            k.addr_type = ADDR_IPV6;
            m.addr_type = 0xff;
            set_val(self.ipv6_src, &mut k.src, &mut m.src);
            set_val(self.ipv6_dst, &mut k.dst, &mut m.dst);
        }
        let l4 = matches!(k.ip_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
        if l4 {
            if let Some((v, mask)) = self.ports[0] {
                (k.sport, m.sport) = (v, mask);
            }
            if let Some((v, mask)) = self.ports[1] {
                (k.dport, m.dport) = (v, mask);
            }
            if k.ip_proto == IPPROTO_TCP {
                set_val(self.tcp_flags, &mut k.tcp_flags, &mut m.tcp_flags);
            }
        } else if (k.n_proto == ETH_P_IP && k.ip_proto == IPPROTO_ICMP)
            || (k.n_proto == ETH_P_IPV6 && k.ip_proto == IPPROTO_ICMPV6)
        {
            set_val(self.icmp_type, &mut k.icmp_type, &mut m.icmp_type);
            set_val(self.icmp_code, &mut k.icmp_code, &mut m.icmp_code);
        }
        if k.n_proto == ETH_P_ARP || k.n_proto == ETH_P_RARP {
            // The ARP keys count only for an ARP filter (tc sends the hardware addresses whatever
            // the protocol; the kernel leaves them out).
            set_val(self.arp_sip, &mut k.arp_sip, &mut m.arp_sip);
            set_val(self.arp_tip, &mut k.arp_tip, &mut m.arp_tip);
            set_val(self.arp_op, &mut k.arp_op, &mut m.arp_op);
            set_val(self.arp_sha, &mut k.arp_sha, &mut m.arp_sha);
            set_val(self.arp_tha, &mut k.arp_tha, &mut m.arp_tha);
        }
        if l4 {
            // `fl_set_key_port_range`.
            for (end, what) in [(1, "destination"), (0, "source")] {
                if let Some((lo, hi)) = self.port_range[end] {
                    (k.port_min[end], k.port_max[end]) = (lo, hi);
                    (m.port_min[end], m.port_max[end]) = (0xffff, 0xffff);
                    if hi <= lo {
                        return Err(KernelError::invalid(format!(
                            "Invalid {what} port range (min must be strictly smaller than max)"
                        )));
                    }
                }
            }
        }
        if let Some((v, mask)) = self.key_flags {
            // `fl_set_key_flags`: the fragment bits only.
            let bits = (FLAG_IS_FRAGMENT | FLAG_FIRST_FRAG) as u32;
            m.ip_flags = (mask & bits) as u8;
            k.ip_flags = (v & mask & bits) as u8;
        }
        self.set_key_enc(&mut k, &mut m);
        if let Some(o) = &self.enc_opts {
            o.set(&mut k.enc_opts, &mut m.enc_opts)?;
        }
        self.set_key_mpls(&mut k, &mut m)?;
        if let Some((v, mask)) = self.ct_state {
            (k.ct_state, m.ct_state) = (v, mask);
            validate_ct_state(v & mask)?;
        }
        set_val(self.ct_zone, &mut k.ct_zone, &mut m.ct_zone);
        set_val(self.ct_mark, &mut k.ct_mark, &mut m.ct_mark);
        set_val(self.ct_labels, &mut k.ct_labels, &mut m.ct_labels);
        Ok((k, m))
    }

    /// `fl_set_key_pppoe`: the session's type always (it stands for the EtherType, which the protocol
    /// inside replaces), the session id and PPP protocol as given; a PPP protocol the dissector reads
    /// on becomes the filter's EtherType, and without one the EtherType is not matched at all.
    fn set_key_pppoe(&self, k: &mut FlowKey, m: &mut FlowKey) {
        (k.pppoe_type, m.pppoe_type) = (ETH_P_PPP_SES, 0xffff);
        if let Some(sid) = self.pppoe_sid {
            (k.pppoe_sid, m.pppoe_sid) = (sid, 0xffff);
        }
        let Some(ppp) = self.ppp_proto else {
            (k.n_proto, m.n_proto) = (0, 0);
            return;
        };
        (k.ppp_proto, m.ppp_proto) = (ppp, 0xffff);
        let inner = match ppp {
            PPP_IP => ETH_P_IP,
            PPP_IPV6 => ETH_P_IPV6,
            PPP_MPLS_UC => ETH_P_MPLS_UC,
            PPP_MPLS_MC => ETH_P_MPLS_MC,
            _ => return,
        };
        (k.n_proto, m.n_proto) = (inner, 0xffff);
    }

    /// `fl_set_key_mpls`: the first entry's fields, or each `lse` at its depth (1 to [`MPLS_MAX`]);
    /// either way the entry's bit in `used_lses` is part of key and mask, so a packet must have it.
    fn set_key_mpls(&self, k: &mut FlowKey, m: &mut FlowKey) -> Result<(), KernelError> {
        match &self.mpls {
            None => {}
            Some(MplsMatch::First(l)) => {
                l.set(&mut k.mpls[0], &mut m.mpls[0])?;
                if l.any() {
                    k.mpls_used |= 1;
                    m.mpls_used |= 1;
                }
            }
            Some(MplsMatch::Lses(list)) => {
                for l in list {
                    let Some(depth) = l.depth else {
                        return Err(KernelError::invalid("Missing MPLS option \"depth\""));
                    };
                    if depth < 1 || depth as usize > MPLS_MAX {
                        return Err(KernelError::invalid("Invalid MPLS depth"));
                    }
                    let i = depth as usize - 1;
                    k.mpls_used |= 1 << i;
                    m.mpls_used |= 1 << i;
                    l.set(&mut k.mpls[i], &mut m.mpls[i])?;
                }
            }
        }
        Ok(())
    }

    /// `fl_set_key`'s tunnel keys: an address of either family sets the family; the key id is
    /// matched whole (it has no mask attribute).
    fn set_key_enc(&self, k: &mut FlowKey, m: &mut FlowKey) {
        let put = |dst: &mut [u8; 16], src: &[u8]| dst[..src.len()].copy_from_slice(src);
        let mut set = |family, end: usize, a: &[u8], mask: &[u8]| {
            (k.enc_addr_type, m.enc_addr_type) = (family, 0xff);
            let (kd, md) = if end == 0 {
                (&mut k.enc_src, &mut m.enc_src)
            } else {
                (&mut k.enc_dst, &mut m.enc_dst)
            };
            put(kd, a);
            put(md, mask);
        };
        for end in 0..2 {
            if let Some((a, mask)) = &self.enc_ipv4[end] {
                set(ADDR_IPV4, end, a, mask);
            }
        }
        for end in 0..2 {
            if let Some((a, mask)) = &self.enc_ipv6[end] {
                set(ADDR_IPV6, end, a, mask);
            }
        }
        if let Some(id) = self.enc_key_id {
            (k.enc_key_id, m.enc_key_id) = (id, u32::MAX);
        }
        set_val(self.enc_dst_port, &mut k.enc_dst_port, &mut m.enc_dst_port);
        set_val(self.enc_tos, &mut k.enc_tos, &mut m.enc_tos);
        set_val(self.enc_ttl, &mut k.enc_ttl, &mut m.enc_ttl);
    }
}

/// `fl_set_key_val`: a field tc sent, and its mask.
fn set_val<T: Copy>(sent: Option<Masked<T>>, k: &mut T, m: &mut T) {
    if let Some((v, mask)) = sent {
        (*k, *m) = (v, mask);
    }
}

/// `fl_validate_ct_state`, on the bits the filter sets (`state & mask`).
fn validate_ct_state(state: u16) -> Result<(), KernelError> {
    let (trk, new, est, inv, rpl) = (
        Packet::CT_TRACKED as u16,
        Packet::CT_NEW as u16,
        Packet::CT_ESTABLISHED as u16,
        Packet::CT_INVALID as u16,
        Packet::CT_REPLY as u16,
    );
    let msg = if state != 0 && state & trk == 0 {
        "no trk, so no other flag can be set"
    } else if state & new != 0 && state & est != 0 {
        "new and est are mutually exclusive"
    } else if state & inv != 0 && state & !(trk | inv) != 0 {
        "when inv is set, only trk may be set"
    } else if state & new != 0 && state & rpl != 0 {
        "new and rpl are mutually exclusive"
    } else {
        return Ok(());
    };
    Err(KernelError::invalid(msg))
}

/// One filter (`struct cls_fl_filter`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowerFilter {
    pub handle: u32,
    pub key: FlowKey,
    /// Its mask's key (`f->mask->key`), for the dump.
    pub mask: FlowKey,
    /// `key & mask`, what the mask's table holds it by.
    mkey: FlowKey,
    pub classid: Option<u32>,
    /// `TCA_FLOWER_FLAGS` as kept: what tc sent, and [`CLS_FLAGS_NOT_IN_HW`].
    pub flags: u32,
    pub indev: Option<String>,
    pub exts: Exts,
}

/// One entry of the mask list (`struct fl_flow_mask`).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Mask {
    key: FlowKey,
    /// Its filters in the order they were added (`mask->filters`), which range lookups walk.
    filters: Vec<u32>,
    /// The filters by masked key (`mask->ht`), newest first where a `change` left two under one key.
    table: BTreeMap<FlowKey, Vec<u32>>,
}

impl Mask {
    fn lookup(&self, mkey: &FlowKey) -> Option<u32> {
        self.table.get(mkey).and_then(|v| v.first().copied())
    }
    fn unlink(&mut self, f: &FlowerFilter) {
        self.filters.retain(|&h| h != f.handle);
        if let Some(v) = self.table.get_mut(&f.mkey) {
            v.retain(|&h| h != f.handle);
            if v.is_empty() {
                self.table.remove(&f.mkey);
            }
        }
    }
}

/// The instance (`struct cls_fl_head`): filters by handle (`handle_idr`, the order a dump walks) and the
/// mask list.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FlowerHead {
    pub filters: BTreeMap<u32, FlowerFilter>,
    masks: Vec<Mask>,
}

impl FlowerHead {
    /// The masks in list order (for tests and `tclab explain`-like readers).
    pub fn mask_count(&self) -> usize {
        self.masks.len()
    }

    /// `fl_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        if self.masks.is_empty() {
            return NO_MATCH;
        }
        let key = FlowKey::dissect(pkt);
        let has_eth = pkt.eth_addrs().is_some();
        for mask in &self.masks {
            let Some(h) = self.mask_lookup(mask, &key, has_eth) else {
                continue;
            };
            let f = &self.filters[&h];
            if f.flags & CLS_FLAGS_SKIP_SW != 0 {
                continue;
            }
            res.classid = f.classid.unwrap_or(0);
            return f.exts.exec(pkt, cx);
        }
        NO_MATCH
    }

    /// `fl_mask_lookup`, for a packet key.
    fn mask_lookup(&self, mask: &Mask, key: &FlowKey, has_eth: bool) -> Option<u32> {
        let m = &mask.key;
        if !has_eth && (m.eth_dst != [0; 6] || m.eth_src != [0; 6]) {
            // A packet with no frame has no addresses to compare (see the essay).
            return None;
        }
        let mut mkey = key.and(m);
        let ranges = [m.has_range(0), m.has_range(1)];
        if !ranges[0] && !ranges[1] {
            return mask.lookup(&mkey);
        }
        // `fl_lookup_range`.
        let ports = [key.sport, key.dport];
        for h in &mask.filters {
            let f = &self.filters[h];
            let mut holds = true;
            for end in 0..2 {
                if !ranges[end] {
                    continue;
                }
                if ports[end] < f.key.port_min[end] || ports[end] > f.key.port_max[end] {
                    holds = false;
                    break;
                }
                mkey.port_min[end] = f.mkey.port_min[end];
                mkey.port_max[end] = f.mkey.port_max[end];
            }
            if !holds {
                continue;
            }
            if let Some(found) = mask.lookup(&mkey) {
                return Some(found);
            }
        }
        None
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.contains_key(&handle)
    }

    /// `fl_change`: a new filter, or (handle of an existing one) its replacement, which must keep its mask.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&FlowerOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let o = opts.ok_or_else(|| KernelError::new(Errno::Invalid))?;
        let fold = (handle != 0).then(|| self.filters.get(&handle)).flatten();
        // `tc_flags_valid`.
        let known = CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW | CLS_FLAGS_VERBOSE;
        if o.flags & !known != 0 || o.flags & (CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW) == 3 {
            return Err(KernelError::new(Errno::Invalid));
        }
        let handle = match (fold, handle) {
            (Some(_), h) => h,
            // `idr_alloc_u32` from 1 to INT_MAX.
            (None, 0) => {
                let mut h = 1u32;
                for &used in self.filters.keys() {
                    if used != h {
                        break;
                    }
                    h += 1;
                }
                if h > i32::MAX as u32 {
                    return Err(KernelError::new(Errno::NoSpace));
                }
                h
            }
            (None, h) => h,
        };
        let (key, mask) = o.set_key()?;
        let mkey = key.and(&mask);
        let at = self.masks.iter().position(|m| m.key == mask);
        match (fold, at) {
            // `fl_check_assign_mask`: a replacement keeps its filter's mask.
            (Some(_), None) => return Err(KernelError::new(Errno::Invalid)),
            (Some(f), Some(_)) if f.mask != mask => return Err(KernelError::new(Errno::Invalid)),
            // `fl_ht_insert_unique`: one filter per masked key, unless it replaces one.
            (None, Some(i)) if self.masks[i].table.contains_key(&mkey) => {
                return Err(KernelError::new(Errno::Exists))
            }
            _ => {}
        }
        if o.flags & CLS_FLAGS_SKIP_SW != 0 {
            // `fl_hw_replace_filter`: only hardware may run it, and no device here offloads.
            return Err(KernelError::new(Errno::NotSupported));
        }
        let exts = o.exts.instantiate(actions, now)?;
        let f = FlowerFilter {
            handle,
            key,
            mask,
            mkey,
            classid: o.classid,
            flags: o.flags | CLS_FLAGS_NOT_IN_HW,
            indev: o.indev.clone(),
            exts,
        };
        let i = at.unwrap_or_else(|| {
            self.masks.push(Mask {
                key: mask,
                filters: Vec::new(),
                table: BTreeMap::new(),
            });
            self.masks.len() - 1
        });
        if let Some(old) = self.filters.remove(&handle) {
            // `list_replace_rcu`: the new filter takes the old one's place in the mask's list.
            let m = &mut self.masks[i];
            if let Some(v) = m.table.get_mut(&old.mkey) {
                v.retain(|&h| h != handle);
                if v.is_empty() {
                    m.table.remove(&old.mkey);
                }
            }
            m.table.entry(mkey).or_default().insert(0, handle);
            actions.release_bound(&old.exts.actions);
        } else {
            let m = &mut self.masks[i];
            m.filters.push(handle);
            m.table.entry(mkey).or_default().insert(0, handle);
        }
        self.filters.insert(handle, f);
        Ok(())
    }

    /// `fl_delete`: returns whether the instance is now empty. A mask goes with its last filter.
    pub fn delete(&mut self, handle: u32, actions: &mut ActionTable) -> bool {
        if let Some(f) = self.filters.remove(&handle) {
            if let Some(i) = self.masks.iter().position(|m| m.key == f.mask) {
                self.masks[i].unlink(&f);
                if self.masks[i].filters.is_empty() {
                    self.masks.remove(i);
                }
            }
            actions.release_bound(&f.exts.actions);
        }
        self.filters.is_empty()
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        for f in self.filters.values() {
            actions.release_bound(&f.exts.actions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts_ip() -> FlowerOptions {
        FlowerOptions {
            eth_type: Some(ETH_P_IP),
            ..Default::default()
        }
    }

    #[test]
    fn dissects_ipv4_tcp_and_a_later_fragment() {
        let p = Packet::tcp4([10, 0, 0, 1], 1234, [10, 0, 0, 2], 80, 0x12, 1, 2, &[], 0);
        let k = FlowKey::dissect(&p);
        assert_eq!(
            (k.n_proto, k.ip_proto, k.addr_type),
            (ETH_P_IP, 6, ADDR_IPV4)
        );
        assert_eq!(&k.src[..4], &[10, 0, 0, 1]);
        assert_eq!((k.sport, k.dport, k.tcp_flags, k.ttl), (1234, 80, 0x12, 64));
        let mut frag = p.clone();
        frag.data[6] = 0x00;
        frag.data[7] = 0x10; // offset 16 × 8 bytes: a later fragment
        let k = FlowKey::dissect(&frag);
        assert_eq!(k.ip_flags, FLAG_IS_FRAGMENT);
        assert_eq!(
            (k.sport, k.dport, k.tcp_flags),
            (0, 0, 0),
            "no L4 fields in a fragment"
        );
    }

    #[test]
    fn dissects_ipv6_past_a_hop_by_hop_header() {
        let mut d = vec![0x6b, 0x80, 0, 0, 0, 16, 0, 33];
        d.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        d.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        d.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]); // hop-by-hop, 8 bytes, then UDP
        d.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0, 8, 0, 0]);
        let p = Packet {
            data: d,
            len: 78,
            protocol: ETH_P_IPV6,
            ..Default::default()
        };
        let k = FlowKey::dissect(&p);
        assert_eq!((k.addr_type, k.ip_proto), (ADDR_IPV6, 17));
        assert_eq!((k.sport, k.dport), (5000, 53));
        assert_eq!((k.tos, k.ttl), (0xb8, 33), "traffic class from bits 4..12");
    }

    #[test]
    fn duplicate_masked_key_is_refused_and_changes_keep_the_mask() {
        let mut head = FlowerHead::default();
        let mut t = ActionTable::default();
        let mut o = opts_ip();
        o.ip_proto = Some(6);
        head.change(0, Some(&o), &mut t, 0).unwrap();
        let e = head.change(0, Some(&o), &mut t, 0).unwrap_err();
        assert_eq!(e.errno, Errno::Exists, "fl_ht_insert_unique");
        let mut other = opts_ip();
        other.ip_proto = Some(17);
        head.change(0, Some(&other), &mut t, 0).unwrap();
        assert_eq!(head.mask_count(), 1, "same mask, another key");
        let mut new_mask = opts_ip();
        new_mask.ipv4_dst = Some(([10, 0, 0, 1], [255; 4]));
        assert_eq!(
            head.change(1, Some(&new_mask), &mut t, 0)
                .unwrap_err()
                .errno,
            Errno::Invalid,
            "a replacement must keep its mask"
        );
        head.change(0, Some(&new_mask), &mut t, 0).unwrap();
        assert_eq!(head.filters.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(head.mask_count(), 2);
        assert!(!head.delete(3, &mut t));
        assert_eq!(head.mask_count(), 1, "a mask goes with its last filter");
    }
}
