//! Views of a packet's bytes that cannot panic.
//!
//! A classifier reads the packet at offsets a user chose (`match u8 0x10 0xff at 33`), on packets that may be
//! short, truncated or not IP at all. Every read here returns `None` when any byte it needs lies outside the
//! bytes the packet carries — the kernel's `skb_header_pointer` failing — and the caller decides what a
//! missing byte means (for u32: the whole classifier answers "no match", as `u32_classify` does on `goto
//! out`). Offsets are signed because u32 allows negative ones (into the link-layer header, which a tclab
//! packet does not carry: those reads fail too).
//!
//! This is tclab's one IPv4 view: filters (u32's keys, flow, basic's `cmp`), netfilter's matches and
//! targets ([`Ipv4Header`], [`L4`]), the flow dissector (`flow.rs`) and the simulator's stack all read
//! headers through it.

/// One byte at `off`.
pub fn byte(data: &[u8], off: i64) -> Option<u8> {
    let i = usize::try_from(off).ok()?;
    data.get(i).copied()
}

/// A big-endian 16-bit word at `off`.
pub fn be16(data: &[u8], off: i64) -> Option<u16> {
    let i = usize::try_from(off).ok()?;
    let b = data.get(i..i.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// A big-endian 32-bit word at `off`.
pub fn be32(data: &[u8], off: i64) -> Option<u32> {
    let i = usize::try_from(off).ok()?;
    let b = data.get(i..i.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;

/// A validated IPv4 header: after [`Ipv4::parse`] every accessor is in bounds.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4<'a> {
    data: &'a [u8],
}

impl<'a> Ipv4<'a> {
    /// `Some` only for version 4, IHL ≥ 5 and a header that fits in `data`.
    pub fn parse(data: &'a [u8]) -> Option<Ipv4<'a>> {
        let v = *data.first()?;
        let ihl = (v & 0x0f) as usize * 4;
        if v >> 4 != 4 || ihl < 20 || data.len() < ihl {
            return None;
        }
        Some(Ipv4 { data })
    }
    pub fn header_len(&self) -> usize {
        (self.data[0] & 0x0f) as usize * 4
    }
    pub fn tos(&self) -> u8 {
        self.data[1]
    }
    pub fn total_len(&self) -> u16 {
        u16::from_be_bytes([self.data[2], self.data[3]])
    }
    pub fn protocol(&self) -> u8 {
        self.data[9]
    }
    pub fn src(&self) -> u32 {
        u32::from_be_bytes([self.data[12], self.data[13], self.data[14], self.data[15]])
    }
    pub fn dst(&self) -> u32 {
        u32::from_be_bytes([self.data[16], self.data[17], self.data[18], self.data[19]])
    }
    /// The identification field.
    pub fn id(&self) -> u16 {
        u16::from_be_bytes([self.data[4], self.data[5]])
    }
    pub fn ttl(&self) -> u8 {
        self.data[8]
    }
    /// The fragment offset in 8-byte units (0 for the first or only fragment).
    pub fn frag_offset(&self) -> u16 {
        u16::from_be_bytes([self.data[6], self.data[7]]) & 0x1fff
    }
    /// The fields, copied out.
    pub fn header(&self) -> Ipv4Header {
        Ipv4Header {
            tos: self.tos(),
            tot_len: self.total_len(),
            frag_off: self.frag_offset(),
            protocol: self.protocol(),
            src: self.src(),
            dst: self.dst(),
            ihl: self.header_len(),
        }
    }
    /// A fragment other than the first, or the first of several (MF set).
    pub fn is_fragment(&self) -> bool {
        u16::from_be_bytes([self.data[6], self.data[7]]) & 0x3fff != 0
    }
    /// The transport header's bytes (empty when the header is all there is).
    pub fn payload(&self) -> &'a [u8] {
        &self.data[self.header_len()..]
    }
    /// Source and destination ports of an unfragmented TCP/UDP packet whose ports are present.
    pub fn ports(&self) -> Option<(u16, u16)> {
        if self.is_fragment() || !matches!(self.protocol(), IPPROTO_TCP | IPPROTO_UDP) {
            return None;
        }
        let p = self.payload();
        Some((be16(p, 0)?, be16(p, 2)?))
    }
}

/// The fields of a valid IPv4 header, copied out: what netfilter's matches read (`ip_tables` sees a packet
/// after `ip_rcv` checked its header; tclab's packets come from anywhere, so [`Ipv4Header::parse`] checks,
/// once, and a packet without a whole header has no view at all). The transport header is read as
/// `xt_tcpudp.c` reads it: a later fragment has no ports ([`L4::Absent`]), and a first fragment too short for
/// its header is an "evil tinygram" the kernel drops ([`L4::Truncated`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Header {
    pub tos: u8,
    /// `tot_len`: what `-m length` compares and what conntrack and the rule counters add up.
    pub tot_len: u16,
    /// Fragment offset in 8-byte units (0 for the first or only fragment).
    pub frag_off: u16,
    pub protocol: u8,
    pub src: u32,
    pub dst: u32,
    /// Header length in bytes (IHL × 4): where the transport header starts.
    pub ihl: usize,
}

/// TCP flag bits as `--tcp-flags` names them.
pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;
pub const TCP_URG: u8 = 0x20;

impl Ipv4Header {
    /// Parse the IPv4 header at the start of `data`; `None` if it is not a whole, plausible IPv4 header
    /// (the same test as [`Ipv4::parse`]).
    pub fn parse(data: &[u8]) -> Option<Ipv4Header> {
        Ipv4::parse(data).map(|ip| ip.header())
    }

    /// The transport header bytes, if this is the first fragment (later fragments carry none).
    pub fn l4<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        if self.frag_off != 0 {
            return None;
        }
        data.get(self.ihl..)
    }
}

/// What a port or flag match can learn from the transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4<T> {
    /// Read fine.
    Some(T),
    /// Not there to read: a later fragment (no match, no drop).
    Absent,
    /// First fragment too short for the header: the kernel hot-drops the packet.
    Truncated,
}

/// Source and destination ports of a TCP or UDP header (`tcp_mt` / `udp_mt`).
pub fn ports(ip: &Ipv4Header, data: &[u8], need: usize) -> L4<(u16, u16)> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < need => L4::Truncated,
        Some(l4) => match (be16(l4, 0), be16(l4, 2)) {
            (Some(s), Some(d)) => L4::Some((s, d)),
            _ => L4::Truncated,
        },
    }
}

/// The TCP flags byte (the low six bits of byte 13 of the TCP header).
pub fn tcp_flags(ip: &Ipv4Header, data: &[u8]) -> L4<u8> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < 20 => L4::Truncated,
        Some(l4) => byte(l4, 13).map_or(L4::Truncated, L4::Some),
    }
}

/// ICMP type, code and (for echo/timestamp/information messages) identifier.
pub fn icmp(ip: &Ipv4Header, data: &[u8]) -> L4<(u8, u8, u16)> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < 8 => L4::Truncated,
        Some(l4) => match (byte(l4, 0), byte(l4, 1), be16(l4, 4)) {
            (Some(t), Some(c), Some(id)) => L4::Some((t, c, id)),
            _ => L4::Truncated,
        },
    }
}

/// The Internet checksum of `bytes` (RFC 1071), for tests and for a header whose checksum must be checked.
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in bytes.chunks(2) {
        let w = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += w as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Rewrite the TOS byte as `(tos & mask) | value` and patch the header checksum incrementally.
/// Modelled after `ipv4_change_dsfield` (include/net/dsfield.h), which the DSCP and TOS targets call.
/// Does nothing if the packet has no IPv4 header.
pub fn change_dsfield(data: &mut [u8], mask: u8, value: u8) {
    if Ipv4Header::parse(data).is_none() {
        return;
    }
    let old = data[1];
    let new = (old & mask) | value;
    let mut check = u16::from_be_bytes([data[10], data[11]]) as u32;
    check += old as u32;
    if (check + 1) >> 16 != 0 {
        check = (check + 1) & 0xffff;
    }
    check = check.wrapping_sub(new as u32);
    check = check.wrapping_add(check >> 16) & 0xffff;
    data[10..12].copy_from_slice(&(check as u16).to_be_bytes());
    data[1] = new;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_outside_the_bytes_fail_instead_of_panicking() {
        let d = [1u8, 2, 3, 4, 5];
        assert_eq!(be32(&d, 1), Some(0x0203_0405));
        assert_eq!(be32(&d, 2), None, "one byte short");
        assert_eq!(
            be16(&d, -1),
            None,
            "negative offsets name the absent link header"
        );
        assert_eq!(byte(&d, i64::MAX), None);
        assert_eq!(be32(&d, i64::MAX), None, "no overflow on the end index");
    }

    #[test]
    fn ipv4_rejects_bad_headers() {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        assert!(Ipv4::parse(&h).is_some());
        h[0] = 0x44; // IHL 4
        assert!(Ipv4::parse(&h).is_none());
        h[0] = 0x46; // IHL 6 needs 24 bytes
        assert!(Ipv4::parse(&h).is_none());
        h[0] = 0x65;
        assert!(Ipv4::parse(&h).is_none(), "version 6");
        assert!(Ipv4::parse(&[]).is_none());
    }
}
