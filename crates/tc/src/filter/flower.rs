//! `flower` (`f_flower.c`): the keys a packet's headers give (EtherType, VLAN, MAC and IP addresses, IP
//! protocol, TOS/TTL, ports and port ranges, TCP flags, ICMP type and code, fragment flags) and their
//! masks, as tc 6.1 parses them; and the printer, which prints what the kernel dumps (`fl_dump_key`:
//! a field whose mask is zero is not dumped) the way `flower_print_opt` prints it. Also the MPLS keys
//! (`mpls_label`, `mpls_tc`, `mpls_bos`, `mpls_ttl`, `mpls lse depth …`), the ARP keys (`arp_sip`,
//! `arp_tip`, `arp_op`, `arp_sha`, `arp_tha`), the tunnel keys (`enc_dst_ip`, `enc_src_ip`,
//! `enc_key_id`, `enc_dst_port`, `enc_tos`, `enc_ttl`) and the conntrack keys `ct_state`, `ct_zone` and
//! `ct_mark`, `ct_label`, and the PPPoE keys `pppoe_sid` and `ppp_proto`. The tunnel options
//! (`geneve_opts`, `vxlan_opts`, `erspan_opts`, `gtp_opts`) are `flower_opts.rs`'s.

use super::*;
use crate::util::get_u16;
use tclab_core::filter::flower::{
    FlowKey, FlowerFilter, FlowerOptions, LseSpec, MplsMatch, ETH_P_8021AD, ETH_P_8021Q, ETH_P_ARP,
    ETH_P_IP, ETH_P_IPV6, ETH_P_MPLS_MC, ETH_P_MPLS_UC, ETH_P_PPP_SES, ETH_P_RARP, FLAG_FIRST_FRAG,
    FLAG_IS_FRAGMENT, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
    MPLS_MAX, PPP_IP, PPP_IPV6, PPP_MPLS_MC, PPP_MPLS_UC,
};
use tclab_core::Packet;

pub(super) const FLOWER_USAGE: &str = "Usage: ... flower\t[ MATCH-LIST ] [ verbose ]\n\t\t\t[ skip_sw | skip_hw ]\n\t\t\t[ action ACTION-SPEC ] [ classid CLASSID ]\n\nWhere: MATCH-LIST := [ MATCH-LIST ] MATCH\n       MATCH      := {\tindev DEV-NAME |\n\t\t\tnum_of_vlans VLANS_COUNT |\n\t\t\tvlan_id VID |\n\t\t\tvlan_prio PRIORITY |\n\t\t\tvlan_ethtype [ ipv4 | ipv6 | ETH-TYPE ] |\n\t\t\tcvlan_id VID |\n\t\t\tcvlan_prio PRIORITY |\n\t\t\tcvlan_ethtype [ ipv4 | ipv6 | ETH-TYPE ] |\n\t\t\tpppoe_sid PSID |\n\t\t\tppp_proto [ ipv4 | ipv6 | mpls_uc | mpls_mc | PPP_PROTO ]\t\t\tdst_mac MASKED-LLADDR |\n\t\t\tsrc_mac MASKED-LLADDR |\n\t\t\tip_proto [tcp | udp | sctp | icmp | icmpv6 | IP-PROTO ] |\n\t\t\tip_tos MASKED-IP_TOS |\n\t\t\tip_ttl MASKED-IP_TTL |\n\t\t\tmpls LSE-LIST |\n\t\t\tmpls_label LABEL |\n\t\t\tmpls_tc TC |\n\t\t\tmpls_bos BOS |\n\t\t\tmpls_ttl TTL |\n\t\t\tdst_ip PREFIX |\n\t\t\tsrc_ip PREFIX |\n\t\t\tdst_port PORT-NUMBER |\n\t\t\tsrc_port PORT-NUMBER |\n\t\t\ttcp_flags MASKED-TCP_FLAGS |\n\t\t\ttype MASKED-ICMP-TYPE |\n\t\t\tcode MASKED-ICMP-CODE |\n\t\t\tarp_tip IPV4-PREFIX |\n\t\t\tarp_sip IPV4-PREFIX |\n\t\t\tarp_op [ request | reply | OP ] |\n\t\t\tarp_tha MASKED-LLADDR |\n\t\t\tarp_sha MASKED-LLADDR |\n\t\t\tenc_dst_ip [ IPV4-ADDR | IPV6-ADDR ] |\n\t\t\tenc_src_ip [ IPV4-ADDR | IPV6-ADDR ] |\n\t\t\tenc_key_id [ KEY-ID ] |\n\t\t\tenc_tos MASKED-IP_TOS |\n\t\t\tenc_ttl MASKED-IP_TTL |\n\t\t\tgeneve_opts MASKED-OPTIONS |\n\t\t\tvxlan_opts MASKED-OPTIONS |\n                       erspan_opts MASKED-OPTIONS |\n\t\t\tgtp_opts MASKED-OPTIONS |\n\t\t\tip_flags IP-FLAGS |\n\t\t\tenc_dst_port [ port_number ] |\n\t\t\tct_state MASKED_CT_STATE |\n\t\t\tct_label MASKED_CT_LABEL |\n\t\t\tct_mark MASKED_CT_MARK |\n\t\t\tct_zone MASKED_CT_ZONE }\n\tLSE-LIST := [ LSE-LIST ] LSE\n\tLSE := lse depth DEPTH { label LABEL | tc TC | bos BOS | ttl TTL }\n\tFILTERID := X:Y:Z\n\tMASKED_LLADDR := { LLADDR | LLADDR/MASK | LLADDR/BITS }\n\tMASKED_CT_STATE := combination of {+|-} and flags trk,est,new,rel,rpl,inv\n\tACTION-SPEC := ... look at individual actions\n\nNOTE:\tCLASSID, IP-PROTO are parsed as hexadecimal input.\nNOTE:\tThere can be only used one mask per one prio. If user needs\n\tto specify different mask, he has to use different prio.";

/// flower's keywords in the order `flower_parse_opt` tests them (the first a word is a prefix of wins;
/// `true`: compared whole, with `strcmp`).
const WORDS: &[(&str, bool)] = &[
    ("classid", false),
    ("flowid", false),
    ("hw_tc", false),
    ("ip_flags", false),
    ("verbose", false),
    ("skip_hw", false),
    ("skip_sw", false),
    ("ct_state", false),
    ("ct_zone", false),
    ("ct_mark", false),
    ("ct_label", false),
    ("indev", false),
    ("num_of_vlans", true),
    ("vlan_id", false),
    ("vlan_prio", false),
    ("vlan_ethtype", false),
    ("cvlan_id", false),
    ("cvlan_prio", false),
    ("cvlan_ethtype", false),
    ("mpls", false),
    ("mpls_label", false),
    ("mpls_tc", false),
    ("mpls_bos", false),
    ("mpls_ttl", false),
    ("dst_mac", false),
    ("src_mac", false),
    ("ip_proto", false),
    ("ip_tos", false),
    ("ip_ttl", false),
    ("dst_ip", false),
    ("src_ip", false),
    ("dst_port", false),
    ("src_port", false),
    ("tcp_flags", false),
    ("type", false),
    ("code", false),
    ("arp_tip", false),
    ("arp_sip", false),
    ("arp_op", false),
    ("arp_tha", false),
    ("arp_sha", false),
    ("pppoe_sid", true),
    ("ppp_proto", true),
    ("enc_dst_ip", false),
    ("enc_src_ip", false),
    ("enc_key_id", false),
    ("enc_dst_port", false),
    ("enc_tos", false),
    ("enc_ttl", false),
    ("geneve_opts", false),
    ("vxlan_opts", false),
    ("erspan_opts", false),
    ("gtp_opts", true),
    ("action", false),
];

/// `ppp_proto_names` (iproute2's `lib/ppp_proto.c`, values from `linux/ppp_defs.h`).
const PPP_PROTOS: &[(u16, &str)] = &[
    (0x21, "ip"),
    (0x29, "at"),
    (0x2b, "ipx"),
    (0x2d, "vjc_comp"),
    (0x2f, "vjc_uncomp"),
    (0x3d, "mp"),
    (0x57, "ipv6"),
    (0xfb, "compfrag"),
    (0xfd, "comp"),
    (0x0281, "mpls_uc"),
    (0x0283, "mpls_mc"),
    (0x8021, "ipcp"),
    (0x8029, "atcp"),
    (0x802b, "ipxcp"),
    (0x8057, "ipv6cp"),
    (0x80fb, "ccpfrag"),
    (0x80fd, "ccp"),
    (0x80fd, "mplscp"),
    (0xc021, "lcp"),
    (0xc023, "pap"),
    (0xc025, "lqr"),
    (0xc223, "chap"),
    (0xc029, "cbcp"),
];

/// The flower keyword `w` stands for, as `flower_parse_opt` reads it (`tclab check` reads lines so).
pub(crate) fn keyword(w: &str) -> Option<&'static str> {
    WORDS
        .iter()
        .find(|(k, exact)| if *exact { w == *k } else { matches(w, k) })
        .map(|(k, _)| *k)
}

/// `TC_H_MIN_PRIORITY` and `TC_QOPT_MAX_QUEUE`: `hw_tc N` is classid `MAJ:ffe0+N`.
const TC_H_MIN_PRIORITY: u32 = 0xffe0;
const TC_QOPT_MAX_QUEUE: u32 = 16;

fn get_u8(s: &str, base: u32) -> Option<u8> {
    get_u32(s, base).and_then(|v| u8::try_from(v).ok())
}

fn illegal(what: &str) -> Failure {
    Failure::options(format!("Illegal \"{what}\""))
}

/// `VALUE[/MASK]` split at the first slash.
fn split_mask(s: &str) -> (&str, Option<&str>) {
    match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    }
}

/// `flower_parse_eth_addr`: `LLADDR`, `LLADDR/BITS` or `LLADDR/MASK`.
fn parse_eth_addr(s: &str) -> std::result::Result<([u8; 6], [u8; 6]), String> {
    let (a, m) = split_mask(s);
    let (addr, _) = crate::util::ll_addr_a2n(a)?;
    let mask = match m {
        None => [0xff; 6],
        Some(m) => match crate::util::get_unsigned(m) {
            Some(bits) => {
                // `htonll(0xffffffffffffULL << (16 + 48 - bits))`, the shift as x86 performs it.
                let shift = 64u32.wrapping_sub(bits) & 63;
                let v = 0xffff_ffff_ffffu64 << shift;
                let b = v.to_be_bytes();
                [b[0], b[1], b[2], b[3], b[4], b[5]]
            }
            None => crate::util::ll_addr_a2n(m)?.0,
        },
    };
    Ok((addr, mask))
}

/// `get_prefix(…, family)` as flower uses it: the address and its prefix as a mask.
enum Prefix {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

fn prefix_mask<const N: usize>(bits: u32) -> [u8; N] {
    std::array::from_fn(|i| {
        let have = bits.saturating_sub(8 * i as u32).min(8);
        (0xffu16 << (8 - have)) as u8
    })
}

/// `flower_parse_ip_addr`: the family follows the EtherType (0: either). `Err(None)` where it returns
/// -1 itself (an EtherType without IP addresses: the caller says `Illegal "KEY"`); a prefix
/// `get_prefix` cannot read ends tc there, with utils.c's message and `exit(1)`.
fn parse_ip_addr(s: &str, eth_type: u16) -> std::result::Result<Prefix, Option<Failure>> {
    let family6 = match eth_type {
        ETH_P_IP => Some(false),
        ETH_P_IPV6 => Some(true),
        0 => None,
        _ => return Err(None),
    };
    // `family_name_verbose` of the family asked for.
    let bad = || {
        let family = match family6 {
            Some(false) => "inet",
            Some(true) => "inet6",
            None => "any valid",
        };
        Some(Failure::exit(
            1,
            format!("Error: {family} prefix is expected rather than \"{s}\"."),
        ))
    };
    let (a, len) = split_mask(s);
    let is6 = a.contains(':');
    let special = matches!(a, "default" | "any" | "all");
    if special {
        if len.is_some() {
            return Err(bad());
        }
        return Ok(match family6 {
            Some(true) => Prefix::V6([0; 16], [0; 16]),
            _ => Prefix::V4([0; 4], [0; 4]),
        });
    }
    if family6.is_some_and(|f6| f6 != is6) {
        // `get_prefix` itself refuses the other family's address.
        return Err(bad());
    }
    let max = if is6 { 128 } else { 32 };
    let bits = match len {
        None => max,
        Some(l) => match crate::util::get_unsigned(l) {
            Some(n) => n,
            None => {
                let m = crate::util::get_addr_ipv4(l)
                    .filter(|_| !l.contains(':'))
                    .ok_or_else(bad)?;
                let host = !m;
                if host & host.wrapping_add(1) != 0 {
                    return Err(bad());
                }
                m.count_ones()
            }
        },
    };
    if bits > max {
        return Err(bad());
    }
    if is6 {
        let addr: std::net::Ipv6Addr = a.parse().map_err(|_| bad())?;
        Ok(Prefix::V6(addr.octets(), prefix_mask(bits)))
    } else {
        let addr = crate::util::get_addr_ipv4(a).ok_or_else(bad)?;
        Ok(Prefix::V4(addr.to_be_bytes(), prefix_mask(bits)))
    }
}

/// `flower_parse_port`: `PORT`, `MIN-MAX` or `PORT/MASK`.
enum Port {
    One(u16, u16),
    Range(u16, u16),
}

fn parse_port(s: &str, ip_proto: u8) -> Option<Port> {
    let l4 = matches!(ip_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
    let range = match s.split_once('-') {
        Some((a, b)) => get_u16(a, 10).zip(get_u16(b, 10)),
        None => get_u16(s, 10).map(|a| (a, 0)),
    };
    match range {
        Some((min, max)) if min != 0 && max != 0 => {
            if max <= min {
                crate::notice("max value should be greater than min value");
                return None;
            }
            l4.then_some(Port::Range(min, max))
        }
        Some((min, 0)) if min != 0 => l4.then_some(Port::One(min, 0xffff)),
        Some(_) => None,
        None => {
            let (v, m) = s.split_once('/')?;
            if !l4 {
                return None;
            }
            Some(Port::One(get_u16(v, 0)?, get_u16(m, 0)?))
        }
    }
}

/// `flower_parse_ip_tos_ttl`: decimal or hex, the mask hex.
fn parse_tos_ttl(s: &str) -> Option<(u8, u8)> {
    let (v, m) = split_mask(s);
    let v = get_u8(v, 10).or_else(|| get_u8(v, 16))?;
    let m = match m {
        Some(m) => get_u8(m, 16)?,
        None => 0xff,
    };
    Some((v, m))
}

/// `flower_parse_u8` without names: decimal value and mask.
fn parse_masked_u8(s: &str) -> Option<(u8, u8)> {
    let (v, m) = split_mask(s);
    let v = get_u8(v, 10)?;
    let m = match m {
        Some(m) => get_u8(m, 10)?,
        None => 0xff,
    };
    Some((v, m))
}

/// `flower_parse_u16`/`flower_parse_u32`: `VALUE[/MASK]`, both in any base `strtoul` reads.
fn parse_masked_u32(s: &str, max: u32) -> Option<(u32, u32)> {
    let (v, m) = split_mask(s);
    let v = get_u32(v, 0).filter(|&v| v <= max)?;
    let m = match m {
        Some(m) => get_u32(m, 0).filter(|&m| m <= max)?,
        None => max,
    };
    Some((v, m))
}

/// `flower_ct_states`: the `ct_state` words and their bits, in the order tc prints them.
const CT_STATES: [(&str, u8); 6] = [
    ("trk", Packet::CT_TRACKED),
    ("new", Packet::CT_NEW),
    ("est", Packet::CT_ESTABLISHED),
    ("rel", Packet::CT_RELATED),
    ("inv", Packet::CT_INVALID),
    ("rpl", Packet::CT_REPLY),
];

/// `flower_parse_ct_state`: `+FLAG` or `-FLAG`, repeated; each word is compared over its own length.
fn parse_ct_state(s: &str) -> Option<(u16, u16)> {
    let (mut state, mut mask) = (0u16, 0u16);
    let mut rest = s;
    while let Some(sign) = rest.chars().next() {
        let on = match sign {
            '+' => true,
            '-' => false,
            _ => return None,
        };
        let (name, bit) = CT_STATES
            .iter()
            .find(|(name, _)| rest[1..].starts_with(name))?;
        if on {
            state |= *bit as u16;
        }
        mask |= *bit as u16;
        rest = &rest[1 + name.len()..];
    }
    Some((state, mask))
}

/// `flower_parse_mpls_lse`: `depth D` and any of `label`, `tc`, `bos`, `ttl` (decimal), up to the
/// first other word; a depth is required.
fn parse_mpls_lse(c: &mut Cur) -> Result<LseSpec> {
    let mut l = LseSpec::default();
    while let Some(w) = c.peek() {
        let (name, max) = if matches(w, "depth") {
            ("depth", 0xff)
        } else if matches(w, "label") {
            ("label", 0xfffff)
        } else if matches(w, "tc") {
            ("tc", 7)
        } else if matches(w, "bos") {
            ("bos", 1)
        } else if matches(w, "ttl") {
            ("ttl", 0xff)
        } else {
            break;
        };
        let v = c.next_arg()?;
        let n = get_u32(v, 10)
            .filter(|&n| n <= max && (name != "depth" || n >= 1))
            .ok_or_else(|| illegal(name))?;
        match name {
            "depth" => l.depth = Some(n as u8),
            "label" => l.label = Some(n),
            "tc" => l.tc = Some(n as u8),
            "bos" => l.bos = Some(n as u8),
            _ => l.ttl = Some(n as u8),
        }
        c.fwd();
    }
    if l.depth.is_none() {
        return Err(Failure::syntax("Error: argument \"depth\" is required"));
    }
    Ok(l)
}

/// `flower_parse_tcp_flags`: 12 bits, hex.
fn parse_tcp_flags(s: &str) -> Option<(u16, u16)> {
    let (v, m) = split_mask(s);
    let v = get_u16(v, 16).filter(|v| v & !0xfff == 0)?;
    let m = match m {
        Some(m) => get_u16(m, 16).filter(|m| m & !0xfff == 0)?,
        None => 0xfff,
    };
    Some((v, m))
}

/// `flower_parse_matching_flags`: `[no]frag/[no]firstfrag`.
fn parse_ip_flags(s: &str, mtf: &mut u32, mask: &mut u32) -> Option<()> {
    for token in s.split('/').filter(|t| !t.is_empty()) {
        let (no, name) = match token.strip_prefix("no") {
            Some(rest) => (true, rest),
            None => (false, token),
        };
        let bit = match name {
            "frag" => FLAG_IS_FRAGMENT as u32,
            "firstfrag" => FLAG_FIRST_FRAG as u32,
            _ => return None,
        };
        if no {
            *mtf &= !bit;
        } else {
            *mtf |= bit;
        }
        *mask |= bit;
    }
    Some(())
}

fn eth_type_vlan(t: u16, good_num_of_vlans: bool) -> bool {
    t == ETH_P_8021Q || t == ETH_P_8021AD || good_num_of_vlans
}

/// `flower_parse_opt`.
pub(super) fn parse_flower(
    handle: Option<&str>,
    protocol: u16,
    parent: u32,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => get_u32(s, 0).ok_or_else(|| illegal("handle"))?,
        None => 0,
    };
    let tc_proto = protocol;
    let mut eth_type = tc_proto;
    let mut vlan_ethtype = 0u16;
    let mut num_of_vlans = 0u8;
    let mut ip_proto = 0xffu8;
    let (mut mtf, mut mtf_mask) = (0u32, 0u32);
    // `mpls_format_old` / `mpls_format_new`: the two MPLS forms exclude each other.
    let (mut mpls_old, mut mpls_new) = (false, false);
    let mut o = FlowerOptions::default();
    while let Some(w) = c.peek() {
        let Some(word) = keyword(w) else {
            if w == "help" {
                return Err(Failure::options(FLOWER_USAGE));
            }
            return Err(Failure::options(format!(
                "What is \"{w}\"?\n{FLOWER_USAGE}"
            )));
        };
        match word {
            "classid" | "flowid" => o.classid = Some(classid_arg(c)?),
            "hw_tc" => {
                let v = c.next_arg()?;
                let (n, rest) = crate::util::strtoul(v, 0);
                if !rest.is_empty() || n.is_none() {
                    return Err(Failure::options("Illegal TC index"));
                }
                let n = n.unwrap_or(0);
                if n >= TC_QOPT_MAX_QUEUE as u64 {
                    return Err(Failure::options("TC index exceeds max range"));
                }
                let tc = (n as u32 + TC_H_MIN_PRIORITY) & 0xffff;
                o.classid = Some((parent & 0xffff_0000) | tc);
            }
            "ip_flags" => {
                let v = c.next_arg()?;
                parse_ip_flags(v, &mut mtf, &mut mtf_mask).ok_or_else(|| illegal("ip_flags"))?;
            }
            "verbose" => o.flags |= tclab_core::filter::flower::CLS_FLAGS_VERBOSE,
            "skip_hw" => o.flags |= CLS_FLAGS_SKIP_HW,
            "skip_sw" => o.flags |= CLS_FLAGS_SKIP_SW,
            "indev" => {
                let v = c.next_arg()?;
                if !crate::valid_ifname(v) {
                    return Err(invarg("\"indev\" not a valid ifname", v));
                }
                o.indev = Some(v.to_string());
            }
            "num_of_vlans" => {
                let v = c.next_arg()?;
                num_of_vlans = get_u8(v, 10).ok_or_else(|| illegal("num_of_vlans"))?;
                o.num_of_vlans = Some(num_of_vlans);
            }
            "vlan_id" | "cvlan_id" | "vlan_prio" | "cvlan_prio" => {
                let inner = word.starts_with('c');
                let v = c.next_arg()?;
                if inner && !eth_type_vlan(vlan_ethtype, num_of_vlans > 1) {
                    return Err(Failure::options(format!("Can't set \"{word}\" if inner vlan ethertype isn't 802.1Q or 802.1AD and num_of_vlans is less than 2")));
                }
                if !inner && !eth_type_vlan(tc_proto, num_of_vlans > 0) {
                    return Err(Failure::options(format!("Can't set \"{word}\" if ethertype isn't 802.1Q or 802.1AD and num_of_vlans is 0")));
                }
                if word.ends_with("_id") {
                    let vid = get_u16(v, 10)
                        .filter(|v| v & !0xfff == 0)
                        .ok_or_else(|| illegal(word))?;
                    *if inner {
                        &mut o.cvlan_id
                    } else {
                        &mut o.vlan_id
                    } = Some(vid);
                } else {
                    let prio = get_u8(v, 10)
                        .filter(|p| p & !7 == 0)
                        .ok_or_else(|| illegal(word))?;
                    *if inner {
                        &mut o.cvlan_prio
                    } else {
                        &mut o.vlan_prio
                    } = Some(prio);
                }
            }
            "vlan_ethtype" | "cvlan_ethtype" => {
                let inner = word == "cvlan_ethtype";
                let v = c.next_arg()?;
                let (outer, good) = if inner {
                    (vlan_ethtype, num_of_vlans > 1)
                } else {
                    (eth_type, num_of_vlans > 0)
                };
                if !eth_type_vlan(outer, good) {
                    return Err(Failure::options(format!(
                        "Can't set \"{word}\" if ethertype isn't 802.1Q or 802.1AD and num_of_vlans {}",
                        if inner { "less than 2" } else { "is 0" }
                    )));
                }
                let t = proto_a2n(v).ok_or_else(|| invarg("invalid vlan_ethtype", v))?;
                if inner {
                    o.cvlan_eth_type = Some(t);
                    eth_type = t;
                } else {
                    o.vlan_eth_type = Some(t);
                    vlan_ethtype = t;
                    eth_type = t;
                }
            }
            "dst_mac" | "src_mac" | "arp_tha" | "arp_sha" => {
                let v = c.next_arg()?;
                let m = parse_eth_addr(v)
                    .map_err(|e| Failure::options(format!("{e}Illegal \"{word}\"")))?;
                *match word {
                    "dst_mac" => &mut o.eth_dst,
                    "src_mac" => &mut o.eth_src,
                    "arp_tha" => &mut o.arp_tha,
                    _ => &mut o.arp_sha,
                } = Some(m);
            }
            "ip_proto" => {
                let v = c.next_arg()?;
                let bad_eth =
                    || Failure::options("Illegal \"eth_type\" for ip proto\nIllegal \"ip_proto\"");
                if eth_type != ETH_P_IP && eth_type != ETH_P_IPV6 {
                    return Err(bad_eth());
                }
                let p = if matches(v, "tcp") {
                    IPPROTO_TCP
                } else if matches(v, "udp") {
                    IPPROTO_UDP
                } else if matches(v, "sctp") {
                    IPPROTO_SCTP
                } else if matches(v, "icmp") {
                    if eth_type != ETH_P_IP {
                        return Err(bad_eth());
                    }
                    IPPROTO_ICMP
                } else if matches(v, "icmpv6") {
                    if eth_type != ETH_P_IPV6 {
                        return Err(bad_eth());
                    }
                    IPPROTO_ICMPV6
                } else {
                    get_u8(v, 16).ok_or_else(|| illegal("ip_proto"))?
                };
                o.ip_proto = Some(p);
                ip_proto = p;
            }
            "ip_tos" | "ip_ttl" => {
                let v = c.next_arg()?;
                let m = parse_tos_ttl(v).ok_or_else(|| illegal(word))?;
                if word == "ip_tos" {
                    o.ip_tos = Some(m);
                } else {
                    o.ip_ttl = Some(m);
                }
            }
            "dst_ip" | "src_ip" => {
                let v = c.next_arg()?;
                let p = parse_ip_addr(v, eth_type)
                    .map_err(|why| why.unwrap_or_else(|| illegal(word)))?;
                let dst = word == "dst_ip";
                match p {
                    Prefix::V4(a, m) if dst => o.ipv4_dst = Some((a, m)),
                    Prefix::V4(a, m) => o.ipv4_src = Some((a, m)),
                    Prefix::V6(a, m) if dst => o.ipv6_dst = Some((a, m)),
                    Prefix::V6(a, m) => o.ipv6_src = Some((a, m)),
                }
            }
            "dst_port" | "src_port" => {
                let v = c.next_arg()?;
                let end = usize::from(word == "dst_port");
                match parse_port(v, ip_proto).ok_or_else(|| illegal(word))? {
                    Port::One(p, m) => o.ports[end] = Some((p, m)),
                    Port::Range(lo, hi) => o.port_range[end] = Some((lo, hi)),
                }
            }
            "tcp_flags" => {
                let v = c.next_arg()?;
                o.tcp_flags = Some(parse_tcp_flags(v).ok_or_else(|| illegal("tcp_flags"))?);
            }
            "type" | "code" => {
                let v = c.next_arg()?;
                let icmp = (eth_type == ETH_P_IP && ip_proto == IPPROTO_ICMP)
                    || (eth_type == ETH_P_IPV6 && ip_proto == IPPROTO_ICMPV6);
                let what = format!("icmp {word}");
                let m = icmp
                    .then(|| parse_masked_u8(v))
                    .flatten()
                    .ok_or_else(|| illegal(&what))?;
                if word == "type" {
                    o.icmp_type = Some(m);
                } else {
                    o.icmp_code = Some(m);
                }
            }
            "mpls" => {
                c.next_arg()?;
                if eth_type != ETH_P_MPLS_UC && eth_type != ETH_P_MPLS_MC {
                    return Err(Failure::options(
                        "Can't set \"mpls\" if ethertype isn't MPLS",
                    ));
                }
                if mpls_old {
                    return Err(Failure::options("Can't set \"mpls\" if \"mpls_label\", \"mpls_tc\", \"mpls_bos\" or \"mpls_ttl\" is set"));
                }
                mpls_new = true;
                let mut list = Vec::new();
                while c.peek().is_some_and(|w| matches(w, "lse")) {
                    c.next_arg()?;
                    list.push(parse_mpls_lse(c)?);
                }
                o.mpls = Some(MplsMatch::Lses(list));
                continue;
            }
            "mpls_label" | "mpls_tc" | "mpls_bos" | "mpls_ttl" => {
                let v = c.next_arg()?;
                if eth_type != ETH_P_MPLS_UC && eth_type != ETH_P_MPLS_MC {
                    return Err(Failure::options(format!(
                        "Can't set \"{word}\" if ethertype isn't MPLS"
                    )));
                }
                if mpls_new {
                    return Err(Failure::options(format!(
                        "Can't set \"{word}\" if \"mpls\" is set"
                    )));
                }
                mpls_old = true;
                let max = match word {
                    "mpls_label" => 0xfffff,
                    "mpls_tc" => 7,
                    "mpls_bos" => 1,
                    _ => 0xff,
                };
                let n = get_u32(v, 10)
                    .filter(|&n| n <= max)
                    .ok_or_else(|| illegal(word))?;
                let mut l = match o.mpls {
                    Some(MplsMatch::First(l)) => l,
                    _ => LseSpec::default(),
                };
                match word {
                    "mpls_label" => l.label = Some(n),
                    "mpls_tc" => l.tc = Some(n as u8),
                    "mpls_bos" => l.bos = Some(n as u8),
                    _ => l.ttl = Some(n as u8),
                }
                o.mpls = Some(MplsMatch::First(l));
            }
            "arp_tip" | "arp_sip" => {
                let v = c.next_arg()?;
                // `flower_parse_arp_ip_addr`: an ARP filter's IPv4 prefix.
                let arp = eth_type == ETH_P_ARP || eth_type == ETH_P_RARP;
                if !arp {
                    return Err(illegal(word));
                }
                let Prefix::V4(a, m) = parse_ip_addr(v, ETH_P_IP)
                    .map_err(|why| why.unwrap_or_else(|| illegal(word)))?
                else {
                    return Err(illegal(word));
                };
                if word == "arp_tip" {
                    o.arp_tip = Some((a, m));
                } else {
                    o.arp_sip = Some((a, m));
                }
            }
            "arp_op" => {
                let v = c.next_arg()?;
                // `flower_parse_u8` with `flower_arp_op_from_name` and `flow_arp_op_validate`.
                let arp = eth_type == ETH_P_ARP || eth_type == ETH_P_RARP;
                let (name, mask) = split_mask(v);
                let op = match name {
                    "request" => Some(1),
                    "reply" => Some(2),
                    n => get_u8(n, 10).filter(|&op| op <= 2),
                };
                let mask = match mask {
                    Some(m) => get_u8(m, 10),
                    None => Some(0xff),
                };
                match (arp, op, mask) {
                    (true, Some(op), Some(mask)) => o.arp_op = Some((op, mask)),
                    _ => return Err(illegal(word)),
                }
            }
            "pppoe_sid" | "ppp_proto" => {
                let v = c.next_arg()?;
                if eth_type != ETH_P_PPP_SES {
                    return Err(Failure::options(format!(
                        "Can't set \"{word}\" if ethertype isn't PPPoE session"
                    )));
                }
                if word == "pppoe_sid" {
                    o.pppoe_sid = Some(get_u16(v, 10).ok_or_else(|| illegal(word))?);
                } else {
                    let p = super::table_a2n(PPP_PROTOS, v)
                        .ok_or_else(|| invarg("invalid ppp_proto", v))?;
                    // "get new ethtype for later parsing"
                    eth_type = match p {
                        PPP_IP => ETH_P_IP,
                        PPP_IPV6 => ETH_P_IPV6,
                        PPP_MPLS_UC => ETH_P_MPLS_UC,
                        PPP_MPLS_MC => ETH_P_MPLS_MC,
                        _ => eth_type,
                    };
                    o.ppp_proto = Some(p);
                }
            }
            "ct_state" => {
                let v = c.next_arg()?;
                o.ct_state = Some(parse_ct_state(v).ok_or_else(|| illegal(word))?);
            }
            "ct_zone" => {
                let v = c.next_arg()?;
                let (z, m) = parse_masked_u32(v, 0xffff).ok_or_else(|| illegal(word))?;
                o.ct_zone = Some((z as u16, m as u16));
            }
            "ct_label" => {
                let v = c.next_arg()?;
                o.ct_labels = Some(crate::action::ct::parse_labels_as(v, "")?);
            }
            "ct_mark" => {
                let v = c.next_arg()?;
                o.ct_mark = Some(parse_masked_u32(v, u32::MAX).ok_or_else(|| illegal(word))?);
            }
            "enc_dst_ip" | "enc_src_ip" => {
                let v = c.next_arg()?;
                // Either family, whatever the filter's protocol (`flower_parse_ip_addr(…, 0, …)`).
                let p = parse_ip_addr(v, 0).map_err(|why| why.unwrap_or_else(|| illegal(word)))?;
                let end = usize::from(word == "enc_dst_ip");
                match p {
                    Prefix::V4(a, m) => o.enc_ipv4[end] = Some((a, m)),
                    Prefix::V6(a, m) => o.enc_ipv6[end] = Some((a, m)),
                }
            }
            "enc_key_id" => {
                let v = c.next_arg()?;
                o.enc_key_id = Some(get_u32(v, 10).ok_or_else(|| illegal(word))?);
            }
            "enc_dst_port" => {
                let v = c.next_arg()?;
                o.enc_dst_port = Some((get_u16(v, 10).ok_or_else(|| illegal(word))?, 0xffff));
            }
            "geneve_opts" | "vxlan_opts" | "erspan_opts" | "gtp_opts" => {
                let v = c.next_arg()?;
                o.enc_opts = Some(super::flower_opts::parse(word, v)?);
            }
            "enc_tos" | "enc_ttl" => {
                let v = c.next_arg()?;
                let m = parse_tos_ttl(v).ok_or_else(|| illegal(word))?;
                if word == "enc_tos" {
                    o.enc_tos = Some(m);
                } else {
                    o.enc_ttl = Some(m);
                }
            }
            "action" => {
                o.exts.actions = filter_actions(c, "\"action\"")?;
                continue;
            }
            _ => unreachable!("every keyword of WORDS is handled or refused"),
        }
        c.fwd();
    }
    if mtf_mask != 0 {
        o.key_flags = Some((mtf, mtf_mask));
    }
    if tc_proto != ETH_P_ALL {
        o.eth_type = Some(tc_proto);
    }
    o.exts.cls_flags = cls_to_act_flags(o.flags);
    Ok((h, Some(FilterOptions::Flower(Box::new(o)))))
}

/// `__mask_bits`: the length of a prefix mask, `None` for any other (all zeros included).
fn mask_bits(m: &[u8]) -> Option<u32> {
    let mut bits = 0;
    let mut hole = false;
    for b in m {
        for j in (0..8).rev() {
            if (b >> j) & 1 == 1 {
                if hole {
                    return None;
                }
                bits += 1;
            } else if bits > 0 {
                hole = true;
            } else {
                return None;
            }
        }
    }
    Some(bits)
}

fn mac(a: &[u8; 6]) -> String {
    a.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `print_indent_name_value`: `\n  NAME VALUE`, in JSON `"NAME": "VALUE"`.
fn indent_name_value(p: &mut Printer, name: &str, value: &str) {
    p.fp("\n  ");
    p.string(name, format_args!("{name} {value}"), value);
}

/// `flower_print_eth_addr`.
fn print_eth_addr(p: &mut Printer, name: &str, addr: &[u8; 6], mask: &[u8; 6]) {
    let mut out = mac(addr);
    match mask_bits(mask) {
        None => out.push_str(&format!("/{}", mac(mask))),
        Some(b) if b < 48 => out.push_str(&format!("/{b}")),
        Some(_) => {}
    }
    indent_name_value(p, name, &out);
}

/// `flower_print_ip_addr`.
fn print_ip_addr(p: &mut Printer, name: &str, v6: bool, addr: &[u8; 16], mask: &[u8; 16]) {
    let len = if v6 { 16 } else { 4 };
    let show = |b: &[u8]| -> String {
        if v6 {
            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16])).to_string()
        } else {
            std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
        }
    };
    let mut out = show(&addr[..len]);
    match mask_bits(&mask[..len]) {
        None => out.push_str(&format!("/{}", show(&mask[..len]))),
        Some(b) if b < 8 * len as u32 => out.push_str(&format!("/{b}")),
        Some(_) => {}
    }
    indent_name_value(p, name, &out);
}

/// `print_masked_u8`/`print_masked_be16` with a newline: `\n  NAME V[/0xM]`.
fn print_masked(p: &mut Printer, name: &str, v: u32, m: u32, full: u32) {
    p.fp("\n  ");
    p.number(name, format_args!("{name} {v}"), v);
    if m != full {
        p.hex(&format!("{name}_mask"), format_args!("/{m:#x}"), m);
    }
}

/// `flower_print_masked_u8` (ICMP type and code): `V[/M]` in decimal, a string in JSON.
fn print_masked_dec(p: &mut Printer, name: &str, v: u8, m: u8) {
    let out = if m == 0xff {
        v.to_string()
    } else {
        format!("{v}/{m}")
    };
    indent_name_value(p, name, &out);
}

fn eth_type_name(t: u16) -> String {
    match t {
        ETH_P_IP => "ipv4".into(),
        ETH_P_IPV6 => "ipv6".into(),
        0x0806 => "arp".into(),
        0x8035 => "rarp".into(),
        t => format!("{t:04x}"),
    }
}

fn ip_proto_name(p: u8) -> String {
    match p {
        IPPROTO_TCP => "tcp".into(),
        IPPROTO_UDP => "udp".into(),
        IPPROTO_SCTP => "sctp".into(),
        IPPROTO_ICMP => "icmp".into(),
        IPPROTO_ICMPV6 => "icmpv6".into(),
        p => format!("{p:02x}"),
    }
}

/// `fl_dump` (or `fl_terse_dump` under `-br`) printed by `flower_print_opt`.
pub(super) fn print(f: &FlowerFilter, brief: bool, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if f.handle != 0 {
        p.number("handle", format_args!("handle {:#x} ", f.handle), f.handle);
    }
    if !brief {
        print_classid_and_keys(f, p);
    } else {
        p.open_object(Some("keys"));
        p.close_object();
    }
    if f.flags & CLS_FLAGS_SKIP_HW != 0 {
        p.fp("\n");
        p.boolean("skip_hw", "  skip_hw", true);
    }
    if f.flags & CLS_FLAGS_SKIP_SW != 0 {
        p.fp("\n");
        p.boolean("skip_sw", "  skip_sw", true);
    }
    if f.flags & CLS_FLAGS_NOT_IN_HW != 0 {
        p.fp("\n");
        p.boolean("not_in_hw", "  not_in_hw", true);
    }
    if !f.exts.actions.is_empty() {
        if brief {
            crate::action::print_actions_terse(&f.exts.actions, 1, flags, p);
        } else {
            print_exts(&f.exts, flags, now, p);
        }
    }
}

fn print_classid_and_keys(f: &FlowerFilter, p: &mut Printer) {
    let (k, m): (&FlowKey, &FlowKey) = (&f.key, &f.mask);
    if let Some(h) = f.classid.filter(|&h| h != 0) {
        let min = h & 0xffff;
        if (TC_H_MIN_PRIORITY..TC_H_MIN_PRIORITY + TC_QOPT_MAX_QUEUE).contains(&min) {
            let n = min - TC_H_MIN_PRIORITY;
            p.number("hw_tc", format_args!("hw_tc {n} "), n);
        } else {
            let c = sprint_classid(h);
            p.string("classid", format_args!("classid {c} "), &c);
        }
    }
    if let Some(d) = &f.indev {
        p.fp("\n");
        p.string("indev", format_args!("  indev {d}"), d);
    }
    p.open_object(Some("keys"));
    if m.num_of_vlans != 0 {
        p.fp("\n");
        let n = k.num_of_vlans;
        p.number("num_of_vlans", format_args!("  num_of_vlans {n}"), n);
    }
    // `fl_dump_key_vlan` and the EtherTypes after the tags, then `flower_print_opt`'s order.
    let mut vlan_eth = None;
    let mut cvlan_eth = None;
    if m.cvlan.tpid != 0 {
        vlan_eth = Some(k.cvlan.tpid);
    }
    if m.n_proto != 0 {
        if m.cvlan.eth_type != 0 {
            cvlan_eth = Some(k.n_proto);
        } else if m.vlan.eth_type != 0 {
            vlan_eth = Some(k.vlan.eth_type);
        }
    }
    for (tag, mask, id_name, prio_name, eth_name, eth) in [
        (
            &k.vlan,
            &m.vlan,
            "vlan_id",
            "vlan_prio",
            "vlan_ethtype",
            vlan_eth,
        ),
        (
            &k.cvlan,
            &m.cvlan,
            "cvlan_id",
            "cvlan_prio",
            "cvlan_ethtype",
            cvlan_eth,
        ),
    ] {
        if mask.id != 0 {
            p.fp("\n");
            p.number(id_name, format_args!("  {id_name} {}", tag.id), tag.id);
        }
        if mask.prio != 0 {
            p.fp("\n");
            p.number(
                prio_name,
                format_args!("  {prio_name} {}", tag.prio),
                tag.prio,
            );
        }
        if let Some(t) = eth {
            p.fp("\n");
            let n = proto_n2a(t);
            p.string(eth_name, format_args!("  {eth_name} {n}"), &n);
        }
    }
    if m.eth_dst != [0; 6] {
        print_eth_addr(p, "dst_mac", &k.eth_dst, &m.eth_dst);
    }
    if m.eth_src != [0; 6] {
        print_eth_addr(p, "src_mac", &k.eth_src, &m.eth_src);
    }
    // What tc read of the dump decides what it prints next: its EtherType and IP protocol.
    let eth_type = if m.n_proto != 0 { k.n_proto } else { 0 };
    if m.n_proto != 0 {
        p.fp("\n");
        let n = eth_type_name(k.n_proto);
        p.string("eth_type", format_args!("  eth_type {n}"), &n);
    }
    let ip = k.n_proto == ETH_P_IP || k.n_proto == ETH_P_IPV6;
    let ip_proto = if ip && m.ip_proto != 0 {
        k.ip_proto
    } else {
        0xff
    };
    if ip && m.ip_proto != 0 {
        p.fp("\n");
        let n = ip_proto_name(k.ip_proto);
        p.string("ip_proto", format_args!("  ip_proto {n}"), &n);
    }
    if ip && m.tos != 0 {
        print_masked(p, "ip_tos", k.tos as u32, m.tos as u32, 0xff);
    }
    if ip && m.ttl != 0 {
        print_masked(p, "ip_ttl", k.ttl as u32, m.ttl as u32, 0xff);
    }
    print_mpls(k, m, p);
    let v6 = match (k.addr_type, eth_type) {
        (tclab_core::filter::flower::ADDR_IPV4, ETH_P_IP) => Some(false),
        (tclab_core::filter::flower::ADDR_IPV6, ETH_P_IPV6) => Some(true),
        _ => None,
    };
    if let Some(v6) = v6 {
        let len = if v6 { 16 } else { 4 };
        if m.dst[..len].iter().any(|&b| b != 0) {
            print_ip_addr(p, "dst_ip", v6, &k.dst, &m.dst);
        }
        if m.src[..len].iter().any(|&b| b != 0) {
            print_ip_addr(p, "src_ip", v6, &k.src, &m.src);
        }
    }
    let l4 = matches!(k.ip_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP)
        && matches!(ip_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP);
    if l4 {
        if m.dport != 0 {
            print_masked(p, "dst_port", k.dport as u32, m.dport as u32, 0xffff);
        }
        if m.sport != 0 {
            print_masked(p, "src_port", k.sport as u32, m.sport as u32, 0xffff);
        }
        for (end, name) in [(1, "dst_port"), (0, "src_port")] {
            if m.port_min[end] == 0 || m.port_max[end] == 0 {
                continue;
            }
            let (lo, hi) = (k.port_min[end], k.port_max[end]);
            if p.is_json() {
                p.open_object(Some(name));
                p.json_number("start", lo);
                p.json_number("end", hi);
                p.close_object();
            } else {
                indent_name_value(p, name, &format!("{lo}-{hi}"));
            }
        }
    }
    if k.ip_proto == IPPROTO_TCP && ip_proto == IPPROTO_TCP && m.tcp_flags != 0 {
        let out = format!("{:#x}/{:x}", k.tcp_flags, m.tcp_flags);
        indent_name_value(p, "tcp_flags", &out);
    }
    let icmp = (eth_type == ETH_P_IP && ip_proto == IPPROTO_ICMP)
        || (eth_type == ETH_P_IPV6 && ip_proto == IPPROTO_ICMPV6);
    if icmp {
        if m.icmp_type != 0 {
            print_masked_dec(p, "icmp_type", k.icmp_type, m.icmp_type);
        }
        if m.icmp_code != 0 {
            print_masked_dec(p, "icmp_code", k.icmp_code, m.icmp_code);
        }
    }
    print_arp_keys(k, m, p);
    if m.pppoe_sid != 0 {
        p.fp("\n");
        let sid = k.pppoe_sid;
        p.number("pppoe_sid", format_args!("  pppoe_sid {sid}"), sid);
    }
    if m.n_proto != 0 && m.ppp_proto != 0 {
        // `fl_dump_key` dumps the PPP protocol only beside an EtherType.
        p.fp("\n");
        let n = super::table_n2a(PPP_PROTOS, k.ppp_proto);
        p.string("ppp_proto", format_args!("  ppp_proto {n}"), &n);
    }
    print_enc_keys(k, m, p);
    if m.ip_flags != 0 {
        // `flower_print_matching_flags`.
        p.fp("\n  ip_flags ");
        p.open_object(Some("ip_flags"));
        let mut first = true;
        for (bit, name) in [(FLAG_IS_FRAGMENT, "frag"), (FLAG_FIRST_FRAG, "firstfrag")] {
            if m.ip_flags & bit == 0 {
                continue;
            }
            if !first {
                p.fp("/");
            }
            first = false;
            let on = k.ip_flags & bit != 0;
            if p.is_json() {
                p.boolean(name, "", on);
            } else if on {
                p.fp(name);
            } else {
                p.fp(format_args!("no{name}"));
            }
        }
        p.close_object();
    }
    print_ct_keys(k, m, p);
    p.close_object();
}

/// `fl_dump_key_mpls` as tc prints it: the first entry's fields as `mpls_label`, `mpls_tc`, `mpls_bos`,
/// `mpls_ttl` when that says it all, else `mpls` and one `lse` line per entry with the fields it masks.
fn print_mpls(k: &FlowKey, m: &FlowKey, p: &mut Printer) {
    if m.mpls_used == 0 {
        return;
    }
    let (k0, m0) = (&k.mpls[0], &m.mpls[0]);
    let first_empty = m0.label == 0 && m0.tc == 0 && m0.bos == 0 && m0.ttl == 0;
    if m.mpls_used & !1 == 0 && !first_empty {
        if m0.label != 0 {
            // `flower_print_u32`: a number in JSON; the u8 fields are strings there.
            p.fp("\n  ");
            p.number(
                "mpls_label",
                format_args!("mpls_label {}", k0.label),
                k0.label,
            );
        }
        for (name, on, v) in [
            ("mpls_tc", m0.tc != 0, k0.tc),
            ("mpls_bos", m0.bos != 0, k0.bos),
            ("mpls_ttl", m0.ttl != 0, k0.ttl),
        ] {
            if on {
                indent_name_value(p, name, &v.to_string());
            }
        }
        return;
    }
    p.fp("\n  mpls");
    p.open_array("mpls");
    for i in (0..MPLS_MAX).filter(|i| m.mpls_used & (1 << i) != 0) {
        let (l, lm) = (&k.mpls[i], &m.mpls[i]);
        p.fp("\n    lse");
        p.open_object(None);
        let depth = i as u32 + 1;
        p.number("depth", format_args!(" depth {depth}"), depth);
        for (name, on, v) in [
            ("label", lm.label != 0, l.label),
            ("tc", lm.tc != 0, l.tc as u32),
            ("bos", lm.bos != 0, l.bos as u32),
            ("ttl", lm.ttl != 0, l.ttl as u32),
        ] {
            if on {
                p.number(name, format_args!(" {name} {v}"), v);
            }
        }
        p.close_object();
    }
    p.close_array();
}

/// The ARP keys, after the ICMP ones: `flower_print_ip4_addr`, `flower_print_arp_op` (a name for a
/// request or reply under a full mask), `flower_print_eth_addr`.
fn print_arp_keys(k: &FlowKey, m: &FlowKey, p: &mut Printer) {
    let wide = |a: &[u8; 4]| {
        let mut w = [0u8; 16];
        w[..4].copy_from_slice(a);
        w
    };
    if m.arp_sip != [0; 4] {
        print_ip_addr(p, "arp_sip", false, &wide(&k.arp_sip), &wide(&m.arp_sip));
    }
    if m.arp_tip != [0; 4] {
        print_ip_addr(p, "arp_tip", false, &wide(&k.arp_tip), &wide(&m.arp_tip));
    }
    if m.arp_op != 0 {
        let name = match k.arp_op {
            1 if m.arp_op == 0xff => "request".to_string(),
            2 if m.arp_op == 0xff => "reply".to_string(),
            op => op.to_string(),
        };
        let out = if m.arp_op == 0xff {
            name
        } else {
            format!("{name}/{}", m.arp_op)
        };
        indent_name_value(p, "arp_op", &out);
    }
    if m.arp_sha != [0; 6] {
        print_eth_addr(p, "arp_sha", &k.arp_sha, &m.arp_sha);
    }
    if m.arp_tha != [0; 6] {
        print_eth_addr(p, "arp_tha", &k.arp_tha, &m.arp_tha);
    }
}

/// The tunnel keys, as `flower_print_opt` prints them after the ARP and PPPoE keys.
fn print_enc_keys(k: &FlowKey, m: &FlowKey, p: &mut Printer) {
    let v6 = k.enc_addr_type == tclab_core::filter::flower::ADDR_IPV6;
    let len = if v6 { 16 } else { 4 };
    if m.enc_addr_type != 0 {
        if m.enc_dst[..len].iter().any(|&b| b != 0) {
            print_ip_addr(p, "enc_dst_ip", v6, &k.enc_dst, &m.enc_dst);
        }
        if m.enc_src[..len].iter().any(|&b| b != 0) {
            print_ip_addr(p, "enc_src_ip", v6, &k.enc_src, &m.enc_src);
        }
    }
    if m.enc_key_id != 0 {
        // `flower_print_key_id`: `\n  enc_key_id N`.
        p.fp("\n  ");
        let id = k.enc_key_id;
        p.number("enc_key_id", format_args!("enc_key_id {id}"), id);
    }
    if m.enc_dst_port != 0 {
        let (v, mask) = (k.enc_dst_port as u32, m.enc_dst_port as u32);
        print_masked(p, "enc_dst_port", v, mask, 0xffff);
    }
    if m.enc_tos != 0 {
        print_masked(p, "enc_tos", k.enc_tos as u32, m.enc_tos as u32, 0xff);
    }
    if m.enc_ttl != 0 {
        print_masked(p, "enc_ttl", k.enc_ttl as u32, m.enc_ttl as u32, 0xff);
    }
    super::flower_opts::print(&k.enc_opts, &m.enc_opts, p);
}

/// The conntrack keys, last of the keys (`flower_print_ct_state`, `_zone`, `_mark`, `_label`).
fn print_ct_keys(k: &FlowKey, m: &FlowKey, p: &mut Printer) {
    if m.ct_state != 0 {
        let mut out = String::new();
        for (name, bit) in CT_STATES {
            let bit = bit as u16;
            if m.ct_state & bit != 0 {
                out.push(if k.ct_state & bit != 0 { '+' } else { '-' });
                out.push_str(name);
            }
        }
        p.fp("\n");
        p.string("ct_state", format_args!("  ct_state {out}"), &out);
    }
    if m.ct_zone != 0 {
        print_masked(p, "ct_zone", k.ct_zone as u32, m.ct_zone as u32, 0xffff);
    }
    if m.ct_mark != 0 {
        print_masked(p, "ct_mark", k.ct_mark, m.ct_mark, u32::MAX);
    }
    if m.ct_labels != [0; 16] {
        // `flower_print_ct_label`: the 16 bytes in hex, the mask after a slash unless all ones.
        let mut s = crate::action::ct::hex(&k.ct_labels);
        if m.ct_labels != [0xff; 16] {
            s.push('/');
            s.push_str(&crate::action::ct::hex(&m.ct_labels));
        }
        p.fp("\n");
        p.string("ct_label", format_args!("  ct_label {s}"), &s);
    }
}
