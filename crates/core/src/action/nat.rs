//! `nat` (`net/sched/act_nat.c`): stateless one-to-one address translation. On `egress` the source
//! address, on `ingress` the destination address, if it lies in `OLD/prefix`, becomes `NEW` (its host
//! part kept under the prefix's mask); the IPv4 header checksum and the TCP or UDP checksum (whose
//! pseudo-header covers the address) are patched incrementally, as the kernel patches them, so a packet
//! whose checksums were right stays right. A UDP checksum of 0 (none) stays 0. ICMP errors carry the
//! packet that caused them: in one whose embedded header has the translated address on the other side
//! (destination on egress, source on ingress), that address is rewritten too and the ICMP checksum
//! patched — the embedded header's own checksum is not ("XXX Fix up the inner checksums").
//!
//! Later fragments (non-zero offset) get their IP header rewritten and nothing else. A packet too short
//! for the header the action needs to touch is dropped; the kernel does not check the IP version or
//! `ihl`, and neither does this.

use super::{Control, TC_ACT_SHOT};
use crate::csum;
use crate::packet::Packet;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Nat {
    pub action: Control,
    /// Host-order addresses and mask (`tc_nat`'s `old_addr`, `new_addr`, `mask`).
    pub old_addr: u32,
    pub new_addr: u32,
    pub mask: u32,
    /// `TCA_NAT_FLAG_EGRESS`: rewrite the source (else the destination).
    pub egress: bool,
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}
fn check_at(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}
fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// `icmp_is_err`: destination unreachable, source quench, redirect, time exceeded, parameter problem.
fn icmp_is_err(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

impl Nat {
    /// `tcf_nat_act`.
    pub fn act(&self, pkt: &mut Packet) -> Control {
        if self.action == TC_ACT_SHOT || !pkt.materialise(20) {
            return TC_ACT_SHOT;
        }
        let d = &mut pkt.data;
        let addr_at = if self.egress { 12 } else { 16 };
        let addr = be32(d, addr_at);
        let frag_off = u16::from_be_bytes([d[6], d[7]]) & 0x1fff;
        let proto = d[9];
        let mut new_addr = self.new_addr;
        if (self.old_addr ^ addr) & self.mask == 0 {
            new_addr = (new_addr & self.mask) | (addr & !self.mask);
            d[addr_at..addr_at + 4].copy_from_slice(&new_addr.to_be_bytes());
            let c = csum::replace4(check_at(d, 10), addr, new_addr);
            put16(d, 10, c);
        } else if frag_off != 0 || proto != 1 {
            return self.action;
        }
        let ihl = (d[0] & 0x0f) as usize * 4;
        match if frag_off != 0 { 0 } else { proto } {
            6 => {
                if !pkt.materialise(ihl + 20) {
                    return TC_ACT_SHOT;
                }
                let d = &mut pkt.data;
                let c = csum::replace4(check_at(d, ihl + 16), addr, new_addr);
                put16(d, ihl + 16, c);
            }
            17 => {
                if !pkt.materialise(ihl + 8) {
                    return TC_ACT_SHOT;
                }
                let d = &mut pkt.data;
                let check = check_at(d, ihl + 6);
                if check != 0 {
                    let c = match csum::replace4(check, addr, new_addr) {
                        0 => 0xffff, // CSUM_MANGLED_0
                        c => c,
                    };
                    put16(d, ihl + 6, c);
                }
            }
            1 => {
                if !pkt.materialise(ihl + 8) {
                    return TC_ACT_SHOT;
                }
                if !icmp_is_err(pkt.data[ihl]) {
                    return self.action;
                }
                if !pkt.materialise(ihl + 8 + 20) {
                    return TC_ACT_SHOT;
                }
                let d = &mut pkt.data;
                // The embedded header: its destination was our source (egress), or the reverse.
                let inner_at = ihl + 8 + if self.egress { 16 } else { 12 };
                let inner = be32(d, inner_at);
                if (self.old_addr ^ inner) & self.mask != 0 {
                    return self.action;
                }
                let new_inner = (self.new_addr & self.mask) | (inner & !self.mask);
                d[inner_at..inner_at + 4].copy_from_slice(&new_inner.to_be_bytes());
                let c = csum::replace4(check_at(d, ihl + 2), inner, new_inner);
                put16(d, ihl + 2, c);
            }
            _ => {}
        }
        self.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_OK;

    fn tcp_checksum_ok(d: &[u8], payload: u32) -> bool {
        let ihl = (d[0] & 0xf) as usize * 4;
        let len = d.len() - ihl + payload as usize;
        let sum = csum::Sum::default().bytes(&d[ihl..]);
        csum::tcpudp_magic(be32(d, 12), be32(d, 16), len as u32, 6, sum) == 0
    }

    #[test]
    fn egress_rewrites_the_source_and_keeps_both_checksums_valid() {
        let mut p = Packet::tcp4([10, 0, 0, 7], 1234, [192, 0, 2, 1], 80, 0x10, 5, 6, &[], 0);
        // Give the segment a correct TCP checksum first (the builder leaves it 0).
        let c = csum::tcpudp_magic(
            0x0a00_0007,
            0xc000_0201,
            20,
            6,
            csum::Sum::default().bytes(&p.data[20..]),
        );
        p.data[36..38].copy_from_slice(&c.to_be_bytes());
        assert!(tcp_checksum_ok(&p.data, 0));
        let nat = Nat {
            action: TC_ACT_OK,
            old_addr: 0x0a00_0000,
            new_addr: 0xcb00_7100,
            mask: 0xffff_ff00,
            egress: true,
        };
        assert_eq!(nat.act(&mut p), TC_ACT_OK);
        assert_eq!(
            &p.data[12..16],
            &[203, 0, 113, 7],
            "prefix replaced, host part kept"
        );
        assert_eq!(
            crate::wire::checksum(&p.data[..20]),
            0,
            "IP header checksum valid"
        );
        assert!(tcp_checksum_ok(&p.data, 0), "TCP checksum valid");
        // Another source is left alone.
        let mut q = Packet::tcp4([10, 0, 1, 7], 1, [192, 0, 2, 1], 80, 0x10, 5, 6, &[], 0);
        let before = q.data.clone();
        nat.act(&mut q);
        assert_eq!(q.data, before);
    }

    #[test]
    fn a_packet_without_a_header_is_dropped_and_udp_without_checksum_keeps_none() {
        let nat = Nat {
            action: TC_ACT_OK,
            old_addr: 0xc000_0201,
            new_addr: 0x0a00_0001,
            mask: u32::MAX,
            egress: false,
        };
        assert_eq!(nat.act(&mut Packet::default()), TC_ACT_SHOT);
        let mut u = Packet::udp4([10, 0, 0, 7], 1, [192, 0, 2, 1], 53, 0, 100);
        assert_eq!(nat.act(&mut u), TC_ACT_OK);
        assert_eq!(&u.data[16..20], &[10, 0, 0, 1]);
        assert_eq!(&u.data[26..28], &[0, 0], "a zero UDP checksum means none");
    }
}
