//! Segments as the simulator carries them: header fields, options and a payload length (no payload
//! bytes), with the option layout Linux writes (`tcp_options_write`), which sets the header's length.

/// TCP header flags, as on the wire.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    /// ECN-Echo (RFC 3168): the receiver saw a CE mark; on a SYN, "I do ECN".
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced: the sender reacted to an ECE.
    pub const CWR: u8 = 0x80;
}

/// The IP header's ECN field ([`Segment::ecn`]).
pub mod ecn {
    pub const NOT_ECT: u8 = 0;
    pub const ECT0: u8 = 2;
    pub const CE: u8 = 3;
}

/// TCP options carried by a segment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    /// (TSval, TSecr)
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge), most recent first; at most 4
    /// (3 when timestamps are present) so that options fit in 40 bytes.
    pub sack_blocks: SackBlocks,
}

/// Up to four SACK blocks (left edge, right edge), held in place: the most a TCP header's 40 option
/// bytes can carry. Not a `Vec`: every ACK sent or received during recovery carries some, and an
/// allocation per ACK (and per copy between the stack and the wire) showed in the simulator's profile.
/// Read it as a slice; [`SackBlocks::push`] refuses a fifth block.
#[derive(Clone, Copy, Default)]
pub struct SackBlocks {
    len: u8,
    blocks: [(u32, u32); SackBlocks::MAX],
}

impl SackBlocks {
    pub const MAX: usize = 4;

    /// Append a block; false (and nothing kept) when four are held already.
    #[inline]
    pub fn push(&mut self, block: (u32, u32)) -> bool {
        let Some(slot) = self.blocks.get_mut(self.len as usize) else {
            return false;
        };
        *slot = block;
        self.len += 1;
        true
    }
}

impl std::ops::Deref for SackBlocks {
    type Target = [(u32, u32)];
    #[inline]
    fn deref(&self) -> &[(u32, u32)] {
        &self.blocks[..self.len as usize]
    }
}

/// The first four blocks of the iterator; the rest would not fit in a header.
impl FromIterator<(u32, u32)> for SackBlocks {
    fn from_iter<I: IntoIterator<Item = (u32, u32)>>(iter: I) -> Self {
        let mut s = SackBlocks::default();
        for b in iter.into_iter().take(Self::MAX) {
            s.push(b);
        }
        s
    }
}

impl From<Vec<(u32, u32)>> for SackBlocks {
    fn from(v: Vec<(u32, u32)>) -> Self {
        v.into_iter().collect()
    }
}

impl PartialEq for SackBlocks {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}
impl Eq for SackBlocks {}

impl PartialEq<Vec<(u32, u32)>> for SackBlocks {
    fn eq(&self, other: &Vec<(u32, u32)>) -> bool {
        **self == other[..]
    }
}

impl std::hash::Hash for SackBlocks {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl std::fmt::Debug for SackBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl TcpOptions {
    /// Option bytes as Linux lays them out (`tcp_options_write`), padded to 4.
    #[inline]
    pub fn len(&self) -> u32 {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamps.is_some() {
            n += 12; // SACKOK+TS or NOP,NOP,TS
        } else if self.sack_permitted {
            n += 4; // NOP,NOP,SACKOK
        }
        if self.wscale.is_some() {
            n += 4; // NOP,WS
        }
        if !self.sack_blocks.is_empty() {
            n += 4 + 8 * self.sack_blocks.len() as u32; // NOP,NOP,SACK hdr
        }
        (n + 3) & !3
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One TCP segment, without payload bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Segment {
    pub seq: u32,
    pub ack: u32,
    /// FIN=1 SYN=2 RST=4 PSH=8 ACK=16, see [`flags`].
    pub flags: u8,
    /// As on the wire: scaled by the sender's window scale (not on SYNs).
    pub window: u16,
    pub payload_len: u32,
    pub options: TcpOptions,
    /// The ECN field of the IP header carrying it ([`ecn`]): the sender sets ECT(0) on new data of an
    /// ECN connection; a router's AQM may change it to CE; the receiver reads it.
    pub ecn: u8,
    /// The MSS of a GSO segment (`skb_shinfo(skb)->gso_size`): `payload_len` is several of them, cut into
    /// frames by the device; 0 for a segment that is one frame.
    pub gso_size: u32,
}

impl Segment {
    /// TCP header length: 20 plus the options padded to 4 bytes.
    #[inline]
    pub fn header_len(&self) -> u32 {
        20 + self.options.len().min(40)
    }

    /// Sequence space the segment occupies (payload, plus one each for SYN and FIN).
    pub fn seq_len(&self) -> u32 {
        self.payload_len
            .saturating_add((self.flags & flags::SYN != 0) as u32)
            .saturating_add((self.flags & flags::FIN != 0) as u32)
    }

    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// The length `tcp_measure_rcv_mss` measures a received skb by: `gso_size` if it is a GSO packet
    /// that arrived whole (a veth does not cut them), else the payload.
    pub fn measured_len(&self) -> u32 {
        if self.gso_size > 0 {
            self.gso_size
        } else {
            self.payload_len
        }
    }

    /// The frames a GSO segment becomes on the wire (`tcp_gso_segment`): `gso_size` bytes each (the last
    /// may be shorter), sequence numbers moved on, CWR on the first only, FIN and PSH on the last only;
    /// a segment that is not GSO comes back alone.
    pub fn gso_segments(&self) -> Vec<Segment> {
        if self.gso_size == 0 || self.payload_len <= self.gso_size {
            return vec![Segment {
                gso_size: 0,
                ..self.clone()
            }];
        }
        let n = self.payload_len.div_ceil(self.gso_size);
        (0..n)
            .map(|i| {
                let off = i * self.gso_size;
                let mut fl = self.flags;
                if i > 0 {
                    fl &= !flags::CWR;
                }
                if i + 1 < n {
                    fl &= !(flags::FIN | flags::PSH);
                }
                Segment {
                    seq: self.seq.wrapping_add(off),
                    flags: fl,
                    payload_len: (self.payload_len - off).min(self.gso_size),
                    gso_size: 0,
                    ..self.clone()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sack_blocks_hold_four_as_a_header_does() {
        // 40 option bytes: 2 + 8 × 4 = 34 fit, a fifth block (42) cannot (RFC 2018 §3).
        let mut s = SackBlocks::default();
        for i in 0..4 {
            assert!(s.push((i, i + 1)));
        }
        assert!(!s.push((9, 10)), "a fifth block is refused");
        assert_eq!(s, vec![(0, 1), (1, 2), (2, 3), (3, 4)]);
        let c: SackBlocks = (0..6).map(|i| (i, i)).collect();
        assert_eq!(c.len(), 4);
        assert_eq!(c[3], (3, 3));
        // Equal contents compare equal however they were made; options count 4 + 8 per block.
        let opts = TcpOptions {
            sack_blocks: vec![(0, 1), (1, 2)].into(),
            ..Default::default()
        };
        assert_eq!(opts.len(), 20);
        assert_eq!(format!("{:?}", opts.sack_blocks), "[(0, 1), (1, 2)]");
    }
}
