//! `csum` (`net/sched/act_csum.c`): recompute checksums from scratch — the IPv4 header's, and the one of
//! the transport the packet carries (ICMP, IGMP, TCP, UDP, UDP-Lite, SCTP's CRC32c), if it is among
//! those asked for — typically after `pedit` rewrote fields that those checksums cover, which pedit
//! itself never patches.
//!
//! The transport checksum covers the whole IP payload (`tot_len`, or IPv6's `payload_len`): the bytes
//! tclab does not materialise count as zeros (see [`crate::csum`]). A later fragment has no transport
//! header to fix. A UDP checksum of 0 (none) is left alone (UDP-Lite always gets one), and a UDP length
//! that disagrees with the IP length leaves the packet as it is ("obscure skb"); a computed UDP checksum
//! of 0 is sent as 0xffff. IPv6 extension headers (hop-by-hop with its jumbo option, routing,
//! destination options) are walked; a fragment header, or a protocol not asked for, ends the walk with
//! nothing done. A packet too short for the headers involved is dropped and counted, as the kernel drops
//! one it cannot pull.

use super::{Control, TC_ACT_SHOT};
use crate::csum::{self, Sum};
use crate::packet::Packet;

/// `TCA_CSUM_UPDATE_FLAG_*`.
pub const IPV4HDR: u32 = 1;
pub const ICMP: u32 = 2;
pub const IGMP: u32 = 4;
pub const TCP: u32 = 8;
pub const UDP: u32 = 16;
pub const UDPLITE: u32 = 32;
pub const SCTP: u32 = 64;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Csum {
    pub action: Control,
    pub update_flags: u32,
}

fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The pseudo-header of the transport checksum: the addresses and the family.
struct L4<'a> {
    src: &'a [u8],
    dst: &'a [u8],
    v6: bool,
}

impl L4<'_> {
    fn magic(&self, sum: Sum, len: usize, proto: u8) -> u16 {
        if self.v6 {
            csum::ipv6_magic(self.src, self.dst, len as u32, proto, sum)
        } else {
            let a = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            csum::tcpudp_magic(a(self.src), a(self.dst), len as u32, proto, sum)
        }
    }
}

impl Csum {
    /// `tcf_csum_act`.
    pub fn act(&self, pkt: &mut Packet) -> Control {
        if self.action == TC_ACT_SHOT {
            return TC_ACT_SHOT;
        }
        let ok = match pkt.protocol {
            0x0800 => self.ipv4(pkt, true),
            0x86dd => self.ipv6(pkt),
            // tclab packets carry no VLAN tag to look past; other protocols are left alone.
            _ => true,
        };
        if ok {
            self.action
        } else {
            TC_ACT_SHOT
        }
    }

    /// `tcf_csum_ipv4`. `as_action`: skip a TCP GSO packet's transport checksum, as the action does
    /// (`tcf_csum_ipv4_tcp`: segmentation makes each segment's from the pseudo-header seed the
    /// packet carries, so a rewrite of what the seed covers stays wrong in every segment).
    fn ipv4(&self, pkt: &mut Packet, as_action: bool) -> bool {
        if !pkt.materialise(20) {
            return false;
        }
        let d = &pkt.data;
        let ihl = (d[0] & 0x0f) as usize * 4;
        let ipl = u16::from_be_bytes([d[2], d[3]]) as usize;
        let later_fragment = u16::from_be_bytes([d[6], d[7]]) & 0x1fff != 0;
        let proto = if later_fragment { 0 } else { d[9] };
        let flag = match proto {
            1 => ICMP,
            2 => IGMP,
            6 => TCP,
            17 => UDP,
            136 => UDPLITE,
            132 => SCTP,
            _ => 0,
        };
        let skip = as_action && proto == 6 && pkt.is_gso();
        if self.update_flags & flag != 0 && !skip && !self.transport(pkt, proto, ihl, ipl, false) {
            return false;
        }
        if self.update_flags & IPV4HDR != 0 {
            // `ip_send_check`: over the header `ihl` says, as far as the packet has it.
            let d = &mut pkt.data;
            let end = ihl.max(20).min(d.len());
            d[10] = 0;
            d[11] = 0;
            let c = csum::ip_header(&d[..end]);
            put16(d, 10, c);
        }
        true
    }

    /// `tcf_csum_ipv6`.
    fn ipv6(&self, pkt: &mut Packet) -> bool {
        if !pkt.materialise(40) {
            return false;
        }
        let mut pl = u16::from_be_bytes([pkt.data[4], pkt.data[5]]) as usize;
        let mut next = pkt.data[6];
        let mut hl = 40usize;
        loop {
            match next {
                44 => return true, // NEXTHDR_FRAGMENT: ignore the packet
                0 | 43 | 60 => {
                    if !pkt.materialise(hl + 2) {
                        return false;
                    }
                    let xhl = (pkt.data[hl + 1] as usize + 1) << 3;
                    if !pkt.materialise(hl + xhl) {
                        return false;
                    }
                    if next == 0 && !hopopts(&pkt.data[hl..hl + xhl], &mut pl) {
                        return false;
                    }
                    next = pkt.data[hl];
                    hl += xhl;
                }
                58 | 6 | 17 | 136 | 132 => {
                    let flag = match next {
                        58 => ICMP,
                        6 => TCP,
                        17 => UDP,
                        136 => UDPLITE,
                        _ => SCTP,
                    };
                    if self.update_flags & flag != 0 {
                        return self.transport(pkt, next, hl, pl + 40, true);
                    }
                    return true;
                }
                _ => return true,
            }
            if pkt.l3_len() < hl + 1 {
                return true;
            }
        }
    }

    /// The `tcf_csum_ipv{4,6}_{icmp,igmp,tcp,udp}` and `tcf_csum_sctp` of one packet: `false` when the
    /// packet is too short for what it claims (`tcf_csum_skb_nextlayer` failing).
    fn transport(&self, pkt: &mut Packet, proto: u8, ihl: usize, ipl: usize, v6: bool) -> bool {
        let jhl = match proto {
            1 | 2 | 58 | 17 | 136 => 8,
            6 => 20,
            _ => 12, // SCTP's common header
        };
        if pkt.l3_len() < ipl || ipl < ihl + jhl || !pkt.materialise(ihl + jhl) {
            return false;
        }
        // SCTP's CRC covers the rest of the packet (`skb->len - offset`), not just `ipl`.
        let to_end = pkt.l3_len() - ihl;
        let (hdr, rest) = pkt.data.split_at_mut(ihl);
        let l4 = L4 {
            src: if v6 { &hdr[8..24] } else { &hdr[12..16] },
            dst: if v6 { &hdr[24..40] } else { &hdr[16..20] },
            v6,
        };
        // The transport bytes the packet carries; the rest up to `ipl` are zeros.
        let carried = rest.len().min(ipl - ihl);
        match proto {
            1 | 2 | 58 => {
                rest[2] = 0;
                rest[3] = 0;
                let sum = Sum::default().bytes(&rest[..carried]);
                let c = if proto == 58 {
                    l4.magic(sum, ipl - ihl, 58)
                } else {
                    sum.fold()
                };
                put16(rest, 2, c);
            }
            6 => {
                rest[16] = 0;
                rest[17] = 0;
                let sum = Sum::default().bytes(&rest[..carried]);
                let c = l4.magic(sum, ipl - ihl, 6);
                put16(rest, 16, c);
            }
            17 | 136 => {
                let udplite = proto == 136;
                let ul = u16::from_be_bytes([rest[4], rest[5]]) as usize;
                let check = u16::from_be_bytes([rest[6], rest[7]]);
                if !udplite && check == 0 && !l4.v6 {
                    return true;
                }
                // Zeroed first: an obscure length below leaves the packet without a checksum.
                rest[6] = 0;
                rest[7] = 0;
                let covered = if udplite {
                    if ul == 0 {
                        ipl - ihl
                    } else if ul >= 8 && ul <= ipl - ihl {
                        ul
                    } else {
                        return true; // ignore_obscure_skb
                    }
                } else if ul != ipl - ihl {
                    return true;
                } else {
                    ul
                };
                let sum = Sum::default().bytes(&rest[..covered.min(carried)]);
                let c = match l4.magic(sum, ul, proto) {
                    0 => 0xffff, // CSUM_MANGLED_0
                    c => c,
                };
                put16(rest, 6, c);
            }
            _ => {
                // `sctp_compute_cksum`: CRC32c over the rest of the packet, checksum field as zero,
                // stored little-endian.
                rest[8..12].fill(0);
                let bytes = rest.iter().copied().chain(std::iter::repeat(0));
                let crc = !csum::crc32c(!0, bytes.take(to_end));
                rest[8..12].copy_from_slice(&crc.to_le_bytes());
            }
        }
        true
    }
}

/// Write into an IPv4 packet whose transport checksum is implied ([`Packet::CSUM_IMPLIED`]) the
/// checksums its sender would have computed (the IPv4 header's, and the TCP, UDP or ICMP one over the
/// pseudo-header and the whole IP payload, unmaterialised payload as zeros), and clear the flag. Called
/// before an action edits the bytes, so that what the edit leaves stale stays stale. UDP is taken as
/// Linux sends it, with a checksum (`udp_send_skb`), although the simulator writes 0 for "implied".
pub fn complete_implied(pkt: &mut Packet) {
    if pkt.redirect & Packet::CSUM_IMPLIED == 0 {
        return;
    }
    pkt.redirect &= !Packet::CSUM_IMPLIED;
    if pkt.protocol != 0x0800 || pkt.data.len() < 20 {
        return;
    }
    let ihl = (pkt.data[0] & 0x0f) as usize * 4;
    if pkt.data[9] == 17 && pkt.data.len() >= ihl + 8 {
        // Any non-zero value: `transport` computes a checksum only where one is present.
        pkt.data[ihl + 6] = 0xff;
    }
    Csum {
        action: super::TC_ACT_OK,
        update_flags: IPV4HDR | ICMP | TCP | UDP,
    }
    .ipv4(pkt, false);
}

/// `tcf_csum_ipv6_hopopts`: a jumbo option's payload length replaces the header's; `false` for a
/// malformed jumbo option.
fn hopopts(xh: &[u8], pl: &mut usize) -> bool {
    let mut off = 2usize;
    let mut len = xh.len() as isize - 2;
    while len > 1 {
        let optlen = match xh[off] {
            0 => 1, // IPV6_TLV_PAD1
            0xc2 => {
                let optlen = xh[off + 1] as usize + 2;
                if optlen != 6 || len < 6 || off & 3 != 2 {
                    return false;
                }
                *pl = u32::from_be_bytes([xh[off + 2], xh[off + 3], xh[off + 4], xh[off + 5]])
                    as usize;
                return true;
            }
            _ => {
                let optlen = xh[off + 1] as usize + 2;
                if optlen as isize > len {
                    return true;
                }
                optlen
            }
        };
        off += optlen;
        len -= optlen as isize;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_OK;

    #[test]
    fn recomputes_ip_and_tcp_over_the_unmaterialised_payload() {
        // 1000 payload bytes that tclab does not carry: zeros in the sum, in the pseudo-header's length.
        let mut p = Packet::tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x18, 7, 9, &[], 1000);
        p.data[16] = 192; // a rewritten destination: both checksums now stale
        let c = Csum {
            action: TC_ACT_OK,
            update_flags: IPV4HDR | TCP,
        };
        assert_eq!(c.act(&mut p), TC_ACT_OK);
        assert_eq!(crate::wire::checksum(&p.data[..20]), 0);
        let sum = Sum::default().bytes(&p.data[20..]);
        assert_eq!(
            csum::tcpudp_magic(0x0a00_0001, 0xc000_0002, 1020, 6, sum),
            0,
            "a valid TCP checksum sums to zero with its pseudo-header"
        );
    }

    #[test]
    fn a_zero_udp_checksum_stays_and_short_packets_drop() {
        let c = Csum {
            action: TC_ACT_OK,
            update_flags: UDP,
        };
        let mut u = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        let before = u.data.clone();
        assert_eq!(c.act(&mut u), TC_ACT_OK);
        assert_eq!(u.data, before, "no checksum stays no checksum");
        u.data[26] = 0x12; // a checksum present: recomputed
        c.act(&mut u);
        let sum = Sum::default().bytes(&u.data[20..]);
        assert_eq!(csum::tcpudp_magic(0x0a00_0001, 0x0a00_0002, 66, 17, sum), 0);
        let mut short = Packet {
            data: vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6],
            len: 24,
            protocol: 0x0800,
            ..Default::default()
        };
        assert_eq!(c.act(&mut short), TC_ACT_SHOT, "too short for an IP header");
    }

    /// A simulated packet's implied checksums become the sender's, valid over the bytes as they are
    /// (checked by the receive path's own arithmetic, `csum::check_ipv4`); an edit after that leaves
    /// the header's stale until `csum ip4h`, then TCP's (its pseudo-header holds the address) until
    /// `csum tcp`. A packet without the flag is not touched.
    #[test]
    fn implied_checksums_are_filled_in_and_edits_leave_them_stale() {
        let mut p = Packet::tcp4([10, 0, 1, 1], 5, [10, 0, 2, 2], 80, 0x10, 7, 9, &[], 1448);
        let untouched = p.clone();
        complete_implied(&mut p);
        assert_eq!(
            p, untouched,
            "no flag: the bytes' checksums are the real ones"
        );
        p.redirect = Packet::CSUM_IMPLIED;
        assert_eq!(csum::check_ipv4(&p.data), Err(csum::Bad::Transport(6)));
        complete_implied(&mut p);
        assert_eq!(p.redirect, 0);
        assert_eq!(csum::check_ipv4(&p.data), Ok(()));
        p.data[19] = 9; // pedit's `ip dst set 10.0.2.9`
        assert_eq!(csum::check_ipv4(&p.data), Err(csum::Bad::Header));
        let fix = |flags| Csum {
            action: TC_ACT_OK,
            update_flags: flags,
        };
        fix(IPV4HDR).act(&mut p);
        assert_eq!(csum::check_ipv4(&p.data), Err(csum::Bad::Transport(6)));
        fix(TCP).act(&mut p);
        assert_eq!(csum::check_ipv4(&p.data), Ok(()));
        // UDP gets a checksum as Linux sends it (the simulator's 0 meant "implied", not "none").
        let mut u = Packet::udp4([10, 0, 1, 1], 5, [10, 0, 2, 2], 53, 0, 1442);
        u.redirect = Packet::CSUM_IMPLIED;
        complete_implied(&mut u);
        assert_ne!(&u.data[26..28], &[0, 0]);
        assert_eq!(csum::check_ipv4(&u.data), Ok(()));
        u.data[19] = 9;
        fix(IPV4HDR).act(&mut u);
        assert_eq!(csum::check_ipv4(&u.data), Err(csum::Bad::Transport(17)));
    }

    /// `tcf_csum_ipv4_tcp` leaves a TCP GSO packet's checksum alone: an edit under it stays in every
    /// segment (`gso_segment` carries the super-packet's checksum over incrementally).
    #[test]
    fn the_action_skips_a_tcp_gso_packet() {
        let mut p = Packet::tcp4(
            [10, 0, 1, 1],
            5,
            [10, 0, 2, 2],
            80,
            0x18,
            7,
            9,
            &[],
            4 * 1448,
        );
        p.set_gso(1448);
        p.redirect = Packet::CSUM_IMPLIED;
        complete_implied(&mut p);
        let valid: Vec<_> = p.clone().gso_segment();
        assert_eq!(valid.len(), 4);
        for s in &valid {
            assert_eq!(
                csum::check_ipv4(&s.data),
                Ok(()),
                "segment {:?}",
                &s.data[..40]
            );
        }
        p.data[19] = 9;
        Csum {
            action: TC_ACT_OK,
            update_flags: IPV4HDR | TCP,
        }
        .act(&mut p);
        for s in p.gso_segment() {
            assert_eq!(csum::check_ipv4(&s.data), Err(csum::Bad::Transport(6)));
        }
    }
}
