//! Real headers: IPv4 with TCP, UDP or ICMP, built and parsed as bytes.
//!
//! Simulated packets carry their headers as the bytes Linux would put on the wire, so that a u32 filter's
//! `match u8 0x10 0xff at 33` reads a real TCP flags byte and a router forwards by the destination address it
//! parses. Payload bytes are not materialised: the IP total-length field says how long the packet is, and
//! `Packet::len` carries the frame length the qdiscs account. The IPv4 header checksum is real; TCP, UDP
//! and ICMP checksums are left zero and implied (`Packet::CSUM_IMPLIED`): valid by construction, as the
//! sender's stack would have made them over these headers and a payload of zeros. The first tc action
//! that rewrites the bytes writes them in first, and only such packets are verified where they arrive
//! (`Network`'s receive path), so the common packet costs no checksum at all.
//!
//! TCP options are laid out as Linux lays them out (`tcp_options_write`): on a SYN, MSS, then SACK-permitted
//! and timestamps sharing one 12-byte word group, then NOP and window scale (20 bytes); on other segments
//! NOP, NOP, timestamps (12 bytes), then NOP, NOP and up to four SACK blocks. A bare ACK is therefore
//! 52 bytes long, as on a Linux host, and seed 004's "small ACK" filter (total length below 64) catches it.
//!
//! Parsing never panics on any input: every read is bounds-checked and a short or malformed packet is an error.

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

pub const ICMP_ECHO_REPLY: u8 = 0;
pub const ICMP_ECHO_REQUEST: u8 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    Truncated,
    NotIpv4,
    BadHeaderLength,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WireError::Truncated => "packet truncated",
            WireError::NotIpv4 => "not an IPv4 packet",
            WireError::BadHeaderLength => "bad header length",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ipv4 {
    pub src: u32,
    pub dst: u32,
    pub protocol: u8,
    pub tos: u8,
    /// Total length of the IP packet, headers and payload.
    pub total_len: u16,
    pub id: u16,
    pub ttl: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: Option<(u32, u32)>,
    pub sack_blocks: tclab_tcp::SackBlocks,
    pub payload_len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Udp {
    pub sport: u16,
    pub dport: u16,
    pub payload_len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Icmp {
    pub kind: u8,
    pub code: u8,
    pub ident: u16,
    pub seq: u16,
    pub payload_len: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp(Tcp),
    Udp(Udp),
    Icmp(Icmp),
    /// Another protocol, or a fragment after the first: only the IP header is known.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub ip: Ipv4,
    pub l4: L4,
}

impl Tcp {
    /// Length of the options as Linux writes them, padded to 4 bytes.
    pub fn options_len(&self) -> u32 {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamps.is_some() {
            n += 12; // (SACK-permitted or NOP NOP) + TS
        } else if self.sack_permitted {
            n += 4; // NOP NOP SACK-permitted
        }
        if self.wscale.is_some() {
            n += 4; // NOP + WS
        }
        if !self.sack_blocks.is_empty() {
            n += 4 + 8 * self.sack_blocks.len().min(4) as u32; // NOP NOP kind len + blocks
        }
        n
    }
    pub fn header_len(&self) -> u32 {
        20 + self.options_len()
    }
}

/// Header bytes being written, on the stack: room for the most [`Datagram::emit_into`] can write (20 IP
/// bytes, 20 TCP bytes and 56 of options: MSS, timestamps, window scale and four SACK blocks together).
struct Header {
    buf: [u8; Header::MAX],
    len: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            buf: [0; Header::MAX],
            len: 0,
        }
    }
}

impl Header {
    const MAX: usize = 96;

    /// Append `bytes`.
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
    #[inline]
    fn put16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }
    #[inline]
    fn put32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }
}
fn get8(b: &[u8], at: usize) -> Result<u8, WireError> {
    b.get(at).copied().ok_or(WireError::Truncated)
}
// One bounds check a field, not one a byte.
fn get16(b: &[u8], at: usize) -> Result<u16, WireError> {
    match b.get(at..at.wrapping_add(2)) {
        Some(&[x, y]) => Ok(u16::from_be_bytes([x, y])),
        _ => Err(WireError::Truncated),
    }
}
fn get32(b: &[u8], at: usize) -> Result<u32, WireError> {
    match b.get(at..at.wrapping_add(4)) {
        Some(&[w, x, y, z]) => Ok(u32::from_be_bytes([w, x, y, z])),
        _ => Err(WireError::Truncated),
    }
}

/// The Internet checksum (RFC 1071): core's, which netfilter's DSCP/TOS targets keep valid.
pub use tclab_core::wire::checksum;

/// [`checksum`] of a 20-byte IPv4 header, its words summed whole: core's walks any length byte pair
/// by byte pair, 185 instructions a header, every packet a host makes.
fn ip_header_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks_exact(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    sum = (sum & 0xffff) + (sum >> 16);
    sum += sum >> 16;
    !(sum as u16)
}

impl Datagram {
    /// Length of the L4 header plus payload, from the L4 description.
    fn l4_len(&self) -> u32 {
        match &self.l4 {
            L4::Tcp(t) => t.header_len() + t.payload_len,
            L4::Udp(u) => 8 + u.payload_len,
            L4::Icmp(i) => 8 + i.payload_len,
            L4::Other => 0,
        }
    }

    /// The IP total length this datagram has on the wire.
    pub fn total_len(&self) -> u32 {
        20 + self.l4_len()
    }

    /// The header bytes (IP header and L4 header), with the IP total length filled in.
    pub fn emit(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(72);
        self.emit_into(self.ip.id, &mut b);
        b
    }

    /// As [`emit`](Self::emit), with another IP identification (the sending host numbers its datagrams),
    /// into `b` (emptied first: the simulator reuses delivered packets' buffers).
    pub fn emit_into(&self, id: u16, b: &mut Vec<u8>) {
        // Written into a fixed array and copied once: a push per field (a capacity check each, and a
        // fresh buffer grown four times) was 2.5 % of bench-isp's instructions.
        let mut h = Header::default();
        // A TCP header's length (its options') worked out once, for the total and the data offset.
        let (l4_len, tcp_hlen) = match &self.l4 {
            L4::Tcp(t) => {
                let hlen = t.header_len();
                (hlen + t.payload_len, hlen)
            }
            _ => (self.l4_len(), 0),
        };
        let total = (20 + l4_len).min(0xffff) as u16;
        h.put(&[0x45, self.ip.tos]);
        h.put16(total);
        h.put16(id);
        h.put16(0x4000); // DF, as Linux sets on TCP and on pings with PMTU discovery
        h.put(&[self.ip.ttl, self.ip.protocol, 0, 0]);
        h.put32(self.ip.src);
        h.put32(self.ip.dst);
        let c = ip_header_checksum(&h.buf[..20]);
        h.buf[10..12].copy_from_slice(&c.to_be_bytes());
        match &self.l4 {
            L4::Tcp(t) => emit_tcp(&mut h, t, tcp_hlen),
            L4::Udp(u) => {
                h.put16(u.sport);
                h.put16(u.dport);
                h.put16((8 + u.payload_len).min(0xffff) as u16);
                h.put16(0);
            }
            L4::Icmp(i) => {
                h.put(&[i.kind, i.code, 0, 0]);
                h.put16(i.ident);
                h.put16(i.seq);
            }
            L4::Other => {}
        }
        b.clear();
        b.extend_from_slice(&h.buf[..h.len]);
    }

    /// Parse header bytes. `bytes` may stop after the L4 header (payload not materialised).
    pub fn parse(bytes: &[u8]) -> Result<Datagram, WireError> {
        // The header through core's one IPv4 view; what it refuses, named.
        let Some(v4) = tclab_core::wire::Ipv4::parse(bytes) else {
            return Err(match bytes.first() {
                Some(v) if v >> 4 != 4 => WireError::NotIpv4,
                Some(v) if v & 0x0f < 5 => WireError::BadHeaderLength,
                _ => WireError::Truncated,
            });
        };
        let ihl = v4.header_len();
        let ip = Ipv4 {
            tos: v4.tos(),
            total_len: v4.total_len(),
            id: v4.id(),
            ttl: v4.ttl(),
            protocol: v4.protocol(),
            src: v4.src(),
            dst: v4.dst(),
        };
        if (ip.total_len as usize) < ihl {
            return Err(WireError::BadHeaderLength);
        }
        // `v4.payload()` without the call across the crates: the view holds at least `ihl` bytes.
        let l4_bytes = bytes.get(ihl..).unwrap_or_default();
        let l4_total = ip.total_len as u32 - ihl as u32;
        let l4 = if v4.frag_offset() != 0 {
            L4::Other
        } else {
            match ip.protocol {
                PROTO_TCP => L4::Tcp(parse_tcp(l4_bytes, l4_total)?),
                PROTO_UDP => L4::Udp(Udp {
                    sport: get16(l4_bytes, 0)?,
                    dport: get16(l4_bytes, 2)?,
                    payload_len: l4_total.saturating_sub(8),
                }),
                PROTO_ICMP => L4::Icmp(Icmp {
                    kind: get8(l4_bytes, 0)?,
                    code: get8(l4_bytes, 1)?,
                    ident: get16(l4_bytes, 4)?,
                    seq: get16(l4_bytes, 6)?,
                    payload_len: l4_total.saturating_sub(8),
                }),
                _ => L4::Other,
            }
        };
        Ok(Datagram { ip, l4 })
    }
}

/// `hlen`: the header's length with its options, `t.header_len()`.
fn emit_tcp(h: &mut Header, t: &Tcp, hlen: u32) {
    h.put16(t.sport);
    h.put16(t.dport);
    h.put32(t.seq);
    h.put32(t.ack);
    h.put(&[((hlen / 4) as u8) << 4, t.flags]);
    h.put16(t.window);
    h.put(&[0, 0, 0, 0]); // checksum (no payload to sum) and urgent pointer
    if let Some(mss) = t.mss {
        h.put(&[2, 4]);
        h.put16(mss);
    }
    match (t.timestamps, t.sack_permitted) {
        (Some((val, ecr)), sack_ok) => {
            if sack_ok {
                h.put(&[4, 2, 8, 10]);
            } else {
                h.put(&[1, 1, 8, 10]);
            }
            h.put32(val);
            h.put32(ecr);
        }
        (None, true) => h.put(&[1, 1, 4, 2]),
        (None, false) => {}
    }
    if let Some(ws) = t.wscale {
        h.put(&[1, 3, 3, ws]);
    }
    if !t.sack_blocks.is_empty() {
        let blocks = &t.sack_blocks[..t.sack_blocks.len().min(4)];
        h.put(&[1, 1, 5, 2 + 8 * blocks.len() as u8]);
        for &(l, r) in blocks {
            h.put32(l);
            h.put32(r);
        }
    }
}

fn parse_tcp(b: &[u8], l4_total: u32) -> Result<Tcp, WireError> {
    let doff = (get8(b, 12)? >> 4) as usize * 4;
    if doff < 20 {
        return Err(WireError::BadHeaderLength);
    }
    let mut t = Tcp {
        sport: get16(b, 0)?,
        dport: get16(b, 2)?,
        seq: get32(b, 4)?,
        ack: get32(b, 8)?,
        flags: get8(b, 13)?,
        window: get16(b, 14)?,
        payload_len: l4_total.saturating_sub(doff as u32),
        ..Tcp::default()
    };
    // Options, as tcp_parse_options walks them: stop at EOL or at anything malformed.
    let opts = b.get(20..doff).ok_or(WireError::Truncated)?;
    let mut i = 0;
    // Every segment after the handshake opens with NOP, NOP, timestamps (tcp_options_write's
    // layout; SACK blocks may follow): read at once what the walk below would find in three steps.
    if let Some(&[1, 1, 8, 10, v0, v1, v2, v3, e0, e1, e2, e3]) = opts.get(..12) {
        t.timestamps = Some((
            u32::from_be_bytes([v0, v1, v2, v3]),
            u32::from_be_bytes([e0, e1, e2, e3]),
        ));
        i = 12;
    }
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = opts.get(i + 1) else { break };
                let len = len as usize;
                if len < 2 || i + len > opts.len() {
                    break;
                }
                let body = &opts[i + 2..i + len];
                match (kind, len) {
                    (2, 4) => t.mss = Some(u16::from_be_bytes([body[0], body[1]])),
                    (3, 3) => t.wscale = Some(body[0].min(14)),
                    (4, 2) => t.sack_permitted = true,
                    (8, 10) => t.timestamps = Some((get32(body, 0)?, get32(body, 4)?)),
                    (5, _) if (len - 2).is_multiple_of(8) => {
                        // At most four fit in 40 option bytes, however they are split.
                        for blk in body.chunks(8) {
                            t.sack_blocks.push((get32(blk, 0)?, get32(blk, 4)?));
                        }
                    }
                    _ => {}
                }
                i += len;
            }
        }
    }
    Ok(t)
}

/// The destination address and TOS byte of an IPv4 header, without parsing the rest (the forwarding path).
pub fn ipv4_dst_tos(b: &[u8]) -> Option<(u32, u8)> {
    let ip = tclab_core::wire::Ipv4::parse(b)?;
    Some((ip.dst(), ip.tos()))
}

/// Dotted-quad text of an address.
pub fn addr_text(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(proto: u8) -> Ipv4 {
        Ipv4 {
            src: 0x0a00_0001,
            dst: 0x0a00_0102,
            protocol: proto,
            tos: 0x10,
            ttl: 64,
            id: 7,
            total_len: 0,
        }
    }

    /// The header's own checksum against core's general one, on headers whose sums carry more than once.
    #[test]
    fn ip_header_checksum_is_cores() {
        let mut rng = crate::rng::Rng::stream(36, "ip checksum");
        for i in 0..2000 {
            let mut h = [0u8; 20];
            for b in h.iter_mut() {
                *b = if i % 2 == 0 {
                    0xff - rng.below(4) as u8
                } else {
                    rng.below(256) as u8
                };
            }
            assert_eq!(ip_header_checksum(&h), checksum(&h), "{h:?}");
        }
        assert_eq!(ip_header_checksum(&[0; 20]), 0xffff);
        assert_eq!(ip_header_checksum(&[0xff; 20]), checksum(&[0xff; 20]));
    }

    #[test]
    fn bare_ack_is_52_bytes_and_matches_seed_004_filter() {
        let d = Datagram {
            ip: ip(PROTO_TCP),
            l4: L4::Tcp(Tcp {
                flags: TCP_ACK,
                timestamps: Some((1, 2)),
                ..Tcp::default()
            }),
        };
        let b = d.emit();
        assert_eq!(d.total_len(), 52, "20 IP + 20 TCP + 12 timestamp option");
        assert_eq!(b.len(), 52);
        // Seed 004: u8 0x05 0x0f at 0 (IHL 5), u16 0x0000 0xffc0 at 2 (length < 64), u8 0x10 0xff at 33.
        assert_eq!(b[0] & 0x0f, 5);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]) & 0xffc0, 0);
        assert_eq!(b[33], 0x10);
        assert_eq!(checksum(&b[..20]), 0, "a valid IP header sums to zero");
        let back = Datagram::parse(&b).unwrap();
        let mut want = d.clone();
        want.ip.total_len = 52;
        assert_eq!(back, want);
    }

    #[test]
    fn syn_options_round_trip_in_linux_layout() {
        let t = Tcp {
            sport: 40000,
            dport: 5201,
            seq: 123,
            flags: TCP_SYN,
            window: 64240,
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamps: Some((99, 0)),
            ..Tcp::default()
        };
        assert_eq!(
            t.header_len(),
            40,
            "Linux SYN: 20 + MSS 4 + SACKOK/TS 12 + NOP/WS 4"
        );
        let d = Datagram {
            ip: ip(PROTO_TCP),
            l4: L4::Tcp(t.clone()),
        };
        let b = d.emit();
        assert_eq!(&b[40..44], &[2, 4, 0x05, 0xb4]);
        assert_eq!(
            &b[44..46],
            &[4, 2],
            "SACK-permitted shares the TS word group"
        );
        let L4::Tcp(back) = Datagram::parse(&b).unwrap().l4 else {
            panic!()
        };
        assert_eq!(back, t);
    }

    #[test]
    fn data_segment_with_sack_blocks() {
        let t = Tcp {
            flags: TCP_ACK,
            timestamps: Some((5, 6)),
            sack_blocks: vec![(1000, 2000), (3000, 4000)].into(),
            payload_len: 1000,
            ..Tcp::default()
        };
        assert_eq!(t.header_len(), 20 + 12 + 20);
        let d = Datagram {
            ip: ip(PROTO_TCP),
            l4: L4::Tcp(t.clone()),
        };
        assert_eq!(d.total_len(), 20 + 52 + 1000);
        let L4::Tcp(back) = Datagram::parse(&d.emit()).unwrap().l4 else {
            panic!()
        };
        assert_eq!(
            back, t,
            "payload length comes back from the IP total length"
        );
    }

    /// The timestamps read at once when they open the options give what the walk gives for the same
    /// option in another place, a later option still counts, and a cut-off one is not read.
    #[test]
    fn timestamps_read_at_once_as_walked() {
        let with_options = |opts: &[u8]| {
            let mut b = Datagram {
                ip: ip(PROTO_TCP),
                l4: L4::Tcp(Tcp::default()),
            }
            .emit();
            b.extend_from_slice(opts);
            b[20 + 12] = (((20 + opts.len()) / 4) << 4) as u8;
            let total = (b.len() as u16).to_be_bytes();
            b[2..4].copy_from_slice(&total);
            let L4::Tcp(t) = Datagram::parse(&b).unwrap().l4 else {
                panic!()
            };
            t
        };
        let ts = [8, 10, 0, 0, 1, 2, 0xa0, 0, 0, 3];
        let fast = with_options(&[&[1, 1][..], &ts].concat());
        let walked = with_options(&[&ts[..], &[1, 1]].concat());
        assert_eq!(fast.timestamps, Some((0x0102, 0xa000_0003)));
        assert_eq!(fast, walked, "the same option read at once and walked");
        let sack = [1, 1, 5, 10, 0, 0, 0, 9, 0, 0, 0, 17];
        let then_sack = with_options(&[&[1, 1][..], &ts, &sack].concat());
        assert_eq!(then_sack.timestamps, Some((0x0102, 0xa000_0003)));
        assert_eq!(
            &then_sack.sack_blocks[..],
            &[(9, 17)],
            "the walk goes on after them"
        );
        let twice =
            with_options(&[&[1, 1][..], &ts, &[8, 10, 0, 0, 0, 7, 0, 0, 0, 8, 1, 1]].concat());
        assert_eq!(
            twice.timestamps,
            Some((7, 8)),
            "a later timestamps option wins, as walked"
        );
        let cut = with_options(&[1, 1, 8, 10, 0, 0, 0, 1]);
        assert_eq!(
            cut.timestamps, None,
            "an option longer than the header is not read"
        );
    }

    #[test]
    fn ping_is_84_bytes() {
        let d = Datagram {
            ip: ip(PROTO_ICMP),
            l4: L4::Icmp(Icmp {
                kind: ICMP_ECHO_REQUEST,
                ident: 1,
                seq: 9,
                payload_len: 56,
                ..Icmp::default()
            }),
        };
        assert_eq!(
            d.total_len(),
            84,
            "ping's default 56 data bytes + 8 ICMP + 20 IP"
        );
        let back = Datagram::parse(&d.emit()).unwrap();
        assert!(matches!(back.l4, L4::Icmp(Icmp { seq: 9, .. })));
    }

    #[test]
    fn hostile_bytes_never_panic() {
        // Every prefix of real packets, then pseudo-random garbage with plausible first bytes.
        let d = Datagram {
            ip: ip(PROTO_TCP),
            l4: L4::Tcp(Tcp {
                flags: TCP_SYN,
                mss: Some(1460),
                timestamps: Some((1, 1)),
                ..Tcp::default()
            }),
        };
        let b = d.emit();
        for n in 0..b.len() {
            let _ = Datagram::parse(&b[..n]);
        }
        let mut r = crate::rng::Rng::stream(3, "wire-fuzz");
        for _ in 0..50_000 {
            let n = r.below(80) as usize;
            let mut v: Vec<u8> = (0..n).map(|_| r.next_u32() as u8).collect();
            if n > 0 && r.below(2) == 0 {
                v[0] = 0x40 | (r.below(16) as u8);
            }
            if n > 9 {
                v[9] = [1u8, 6, 17, 50][r.below(4) as usize];
            }
            let _ = Datagram::parse(&v);
        }
        assert_eq!(Datagram::parse(&[0x45]), Err(WireError::Truncated));
        assert_eq!(Datagram::parse(&[0x60; 40]), Err(WireError::NotIpv4));
        let mut short_ihl = b.clone();
        short_ihl[0] = 0x44;
        assert_eq!(Datagram::parse(&short_ihl), Err(WireError::BadHeaderLength));
    }
}
