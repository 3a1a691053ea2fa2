//! Views of a packet's bytes that cannot panic.
//!
//! A classifier reads the packet at offsets a user chose (`match u8 0x10 0xff at 33`), on packets that may be
//! short, truncated or not IP at all. Every read here returns `None` when any byte it needs lies outside the
//! bytes the packet carries — the kernel's `skb_header_pointer` failing — and the caller decides what a
//! missing byte means (for u32: the whole classifier answers "no match", as `u32_classify` does on `goto
//! out`). Offsets are signed because u32 allows negative ones (into the link-layer header, which a tclab
//! packet does not carry: those reads fail too).

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
