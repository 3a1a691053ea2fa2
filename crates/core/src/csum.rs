//! Internet checksums as the kernel computes them (`include/net/checksum.h`, `csum_partial`), for the
//! actions that rewrite packet bytes (`nat`, `csum`, `pedit`'s partners) and whoever checks their work.
//!
//! The kernel adds 16-bit words in ones' complement (`csum_partial`, `csum_add`) into a 32-bit partial
//! sum and folds it to 16 bits at the end (`csum_fold`, which also complements). Ones' complement
//! addition does not care how the words are grouped or in which byte order they are read, so tclab sums
//! big-endian 16-bit words in a `u64` and reduces modulo 0xffff once; the one thing grouping could change
//! is which of the two zeros a sum ends as, and that is fixed by the rule end-around-carry addition
//! follows: a sum is +0 (`0x0000`) only when every word added was zero, and otherwise never (a multiple of
//! 0xffff is `0xffff`). Checksum fields are read and written as big-endian `u16`, as they sit on the wire.
//!
//! Packets are treated as `CHECKSUM_NONE` skbs (the checksums in the bytes are the ones that count,
//! nothing is left to offload), and payload bytes past what a packet materialises are zeros, which add
//! nothing to a sum.

/// A running ones' complement sum of 16-bit words (`__wsum`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum(u64);

impl Sum {
    /// Add the bytes as big-endian 16-bit words, an odd last byte as the high half (`csum_partial`).
    pub fn bytes(mut self, b: &[u8]) -> Sum {
        let mut it = b.chunks_exact(2);
        for w in &mut it {
            self.0 += u16::from_be_bytes([w[0], w[1]]) as u64;
        }
        if let [last] = it.remainder() {
            self.0 += (*last as u64) << 8;
        }
        self
    }
    pub fn word(mut self, w: u16) -> Sum {
        self.0 += w as u64;
        self
    }
    /// A 32-bit value's two words.
    pub fn word32(self, v: u32) -> Sum {
        self.word((v >> 16) as u16).word(v as u16)
    }
    /// Take a 32-bit value's two words away (`csum_sub`: add their complements).
    pub fn minus32(self, v: u32) -> Sum {
        self.word(!(v >> 16) as u16).word(!(v as u16))
    }
    /// `~csum_unfold(check)`: what an incremental update starts from. Its high half is all ones, so the
    /// sum is never +0.
    pub fn of_check(check: u16) -> Sum {
        Sum(0xffff + !check as u64)
    }
    /// The 16-bit ones' complement sum (before `csum_fold`'s complement).
    pub fn folded(self) -> u16 {
        if self.0 == 0 {
            return 0;
        }
        match (self.0 % 0xffff) as u16 {
            0 => 0xffff,
            f => f,
        }
    }
    /// `csum_fold`: the checksum to store.
    pub fn fold(self) -> u16 {
        !self.folded()
    }
}

/// `csum_replace4`, and `inet_proto_csum_replace4` on a `CHECKSUM_NONE` skb: `check` after a 32-bit
/// word it covers changed from `from` to `to`.
pub fn replace4(check: u16, from: u32, to: u32) -> u16 {
    Sum::of_check(check).minus32(from).word32(to).fold()
}

/// `csum_replace2`.
pub fn replace2(check: u16, from: u16, to: u16) -> u16 {
    Sum::of_check(check).word(!from).word(to).fold()
}

/// `csum_tcpudp_magic`: the IPv4 pseudo-header (addresses, protocol, length) folded with `sum`.
pub fn tcpudp_magic(saddr: u32, daddr: u32, len: u32, proto: u8, sum: Sum) -> u16 {
    sum.word32(saddr)
        .word32(daddr)
        .word32(len)
        .word(proto as u16)
        .fold()
}

/// `csum_ipv6_magic`: the IPv6 pseudo-header folded with `sum`.
pub fn ipv6_magic(saddr: &[u8], daddr: &[u8], len: u32, proto: u8, sum: Sum) -> u16 {
    sum.bytes(saddr)
        .bytes(daddr)
        .word32(len)
        .word(proto as u16)
        .fold()
}

/// `ip_fast_csum` over an IPv4 header whose checksum field is zero.
pub fn ip_header(h: &[u8]) -> u16 {
    Sum::default().bytes(h).fold()
}

/// A checksum a receiving IPv4 host finds wrong ([`check_ipv4`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The IPv4 header's (`ip_rcv_core`'s `ip_fast_csum`): the packet is dropped there, counted as
    /// `InHdrErrors`.
    Header,
    /// The transport checksum of protocol 6, 17 or 1 (`tcp_checksum_complete`,
    /// `udp_lib_checksum_complete`, `icmp_rcv`'s `skb_checksum_simple_validate`): dropped, counted as
    /// that protocol's `InCsumErrors`.
    Transport(u8),
}

/// Verify an IPv4 packet's checksums as Linux's receive path does for a `CHECKSUM_NONE` skb: the
/// header, then for a TCP, UDP (unless its checksum is 0, none) or ICMP packet that is not a fragment
/// the transport checksum over its pseudo-header (ICMP has none) and the IP payload, of which bytes
/// past `d` are zeros. Packets too short to hold what they claim are left to the parser.
pub fn check_ipv4(d: &[u8]) -> Result<(), Bad> {
    let Some(&v) = d.first() else { return Ok(()) };
    let ihl = (v & 0x0f) as usize * 4;
    if ihl < 20 || d.len() < ihl {
        return Ok(());
    }
    if ip_header(&d[..ihl]) != 0 {
        return Err(Bad::Header);
    }
    let be32 = |at: usize| u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
    let total = u16::from_be_bytes([d[2], d[3]]) as usize;
    if u16::from_be_bytes([d[6], d[7]]) & 0x3fff != 0 || total < ihl {
        return Ok(()); // a fragment: checked once reassembled, which tclab never needs
    }
    let proto = d[9];
    let l4 = &d[ihl..d.len().min(total)];
    let sum = Sum::default().bytes(l4);
    let ok = match proto {
        6 => tcpudp_magic(be32(12), be32(16), (total - ihl) as u32, 6, sum) == 0,
        17 if l4.len() >= 8 && l4[6..8] == [0, 0] => true,
        17 => tcpudp_magic(be32(12), be32(16), (total - ihl) as u32, 17, sum) == 0,
        1 => sum.fold() == 0,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(Bad::Transport(proto))
    }
}

/// CRC32c (Castagnoli, reflected, `crc32c_le`) of `bytes` continuing from `crc`.
pub fn crc32c(mut crc: u32, bytes: impl IntoIterator<Item = u8>) -> u32 {
    for b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82f6_3b78 & (crc & 1).wrapping_neg());
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071's example words 0001 f203 f4f5 f6f7 sum to ddf2 (ones' complement, before the
    /// complement), and the checksum is its complement.
    #[test]
    fn rfc1071_example() {
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(Sum::default().bytes(&b).folded(), 0xddf2);
        assert_eq!(Sum::default().bytes(&b).fold(), !0xddf2);
        assert_eq!(
            crate::wire::checksum(&b),
            !0xddf2,
            "the same as wire's full sum"
        );
    }

    /// An incremental update equals recomputing, for every word value tried (RFC 1624's eqn. 3).
    #[test]
    fn replace4_equals_recomputation() {
        let mut h = [
            0x45u8, 0, 0, 60, 0x1c, 0x46, 0x40, 0, 0x40, 6, 0, 0, 172, 16, 10, 99, 172, 16, 10, 12,
        ];
        let c = ip_header(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        for to in [0u32, 1, 0x0a00_0001, 0xffff_ffff, 0xc0a8_0102, 0x8000_7fff] {
            let from = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
            let check = u16::from_be_bytes([h[10], h[11]]);
            let inc = replace4(check, from, to);
            let mut g = h;
            g[12..16].copy_from_slice(&to.to_be_bytes());
            g[10] = 0;
            g[11] = 0;
            assert_eq!(inc, ip_header(&g), "to {to:#x}");
            h = g;
            h[10..12].copy_from_slice(&inc.to_be_bytes());
            assert_eq!(crate::wire::checksum(&h), 0, "a valid header sums to zero");
        }
    }

    /// crc32c's check value: "123456789" gives 0xe3069283 (after the final inversion).
    #[test]
    fn crc32c_check_value() {
        assert_eq!(!crc32c(!0, *b"123456789"), 0xe306_9283);
    }
}
