//! A read-only view of the IPv4 and transport headers a netfilter rule looks at.
//!
//! `ip_tables` sees a packet after `ip_rcv` has checked its header, so the matches may trust the IPv4 header;
//! tclab's packets come from anywhere, so the view checks instead, once: a packet whose IPv4 header does not
//! hold together (not version 4, IHL < 5, shorter than its header) has no view at all, and every address,
//! protocol or port criterion fails on it. The transport header is another matter, and is handled as
//! `xt_tcpudp.c` handles it: a non-first fragment has no ports (port matches fail), and a first fragment too
//! short for the header it claims is an "evil tinygram" that the kernel drops (`par->hotdrop`).
//!
//! Nothing here indexes past the end of the bytes: every read goes through `get`.

/// The fields of a valid IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4View {
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

fn get(b: &[u8], i: usize) -> Option<u8> {
    b.get(i).copied()
}

fn get16(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([get(b, i)?, get(b, i + 1)?]))
}

fn get32(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        get(b, i)?,
        get(b, i + 1)?,
        get(b, i + 2)?,
        get(b, i + 3)?,
    ]))
}

impl Ipv4View {
    /// Parse the IPv4 header at the start of `data`; `None` if it is not a whole, plausible IPv4 header.
    pub fn parse(data: &[u8]) -> Option<Ipv4View> {
        let b0 = get(data, 0)?;
        if b0 >> 4 != 4 {
            return None;
        }
        let ihl = ((b0 & 0x0f) as usize) * 4;
        if ihl < 20 || data.len() < ihl {
            return None;
        }
        Some(Ipv4View {
            tos: get(data, 1)?,
            tot_len: get16(data, 2)?,
            frag_off: get16(data, 6)? & 0x1fff,
            protocol: get(data, 9)?,
            src: get32(data, 12)?,
            dst: get32(data, 16)?,
            ihl,
        })
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
pub fn ports(ip: &Ipv4View, data: &[u8], need: usize) -> L4<(u16, u16)> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < need => L4::Truncated,
        Some(l4) => match (get16(l4, 0), get16(l4, 2)) {
            (Some(s), Some(d)) => L4::Some((s, d)),
            _ => L4::Truncated,
        },
    }
}

/// The TCP flags byte (the low six bits of byte 13 of the TCP header).
pub fn tcp_flags(ip: &Ipv4View, data: &[u8]) -> L4<u8> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < 20 => L4::Truncated,
        Some(l4) => get(l4, 13).map_or(L4::Truncated, L4::Some),
    }
}

/// ICMP type, code and (for echo/timestamp/information messages) identifier.
pub fn icmp(ip: &Ipv4View, data: &[u8]) -> L4<(u8, u8, u16)> {
    match ip.l4(data) {
        None => L4::Absent,
        Some(l4) if l4.len() < 8 => L4::Truncated,
        Some(l4) => match (get(l4, 0), get(l4, 1), get16(l4, 4)) {
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
    if Ipv4View::parse(data).is_none() {
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
