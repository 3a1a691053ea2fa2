//! Frames and packets. A qdisc sees a packet from its network header on (a u32 filter's `at 0` is the
//! IP header) with `len` the whole frame but its accelerated VLAN tag (`qdisc_pkt_len`); the wire wants
//! the frame back with its link header. VLAN tags travel with the packet (`Packet::vlan`,
//! `vlan_inline`), so actions can push and pop them; the stations' addresses a bridge forwards are few
//! (one pair per conversation), so each distinct pair is kept once in a [`Headers`] table and a packet
//! carries its index in `tag`, which the frame that leaves is written from. The packet also carries a
//! copy of the pair (`Packet::eth_addrs`), which flower's `dst_mac`/`src_mac` read as the kernel reads
//! `eth_hdr(skb)`.
//!
//! A frame that cannot be a packet — shorter than an Ethernet header, or a VLAN tag with nothing
//! after it — is refused here, never passed to a filter: [`to_packet`] returns `None`.

use tclab_core::packet::{PacketExt, VlanTag};
use tclab_core::Packet;

/// 802.1Q and 802.1ad tags: the header runs 4 bytes further, the protocol is the inner EtherType.
const VLAN_TPIDS: [u16; 2] = [0x8100, 0x88a8];

/// Link headers seen, by index; a packet's `tag` is `generation << 32 | index + 1`.
#[derive(Default)]
pub struct Headers {
    list: Vec<Vec<u8>>,
    index: std::collections::HashMap<Vec<u8>, u32>,
    generation: u32,
}

/// How many distinct link headers are kept before the table starts again (a flood of spoofed
/// addresses must not grow memory without bound). Packets still queued with an older generation's
/// tag are dropped when they leave, counted as `stale`.
pub const MAX_HEADERS: usize = 65_536;

impl Headers {
    /// The tag of `header`, added if new.
    pub fn tag(&mut self, header: &[u8]) -> u64 {
        if let Some(&i) = self.index.get(header) {
            return ((self.generation as u64) << 32) | (i as u64 + 1);
        }
        if self.list.len() >= MAX_HEADERS {
            self.list.clear();
            self.index.clear();
            self.generation = self.generation.wrapping_add(1);
        }
        let i = self.list.len() as u32;
        self.list.push(header.to_vec());
        self.index.insert(header.to_vec(), i);
        ((self.generation as u64) << 32) | (i as u64 + 1)
    }

    /// The link header a tag stands for, if its generation is current.
    pub fn header(&self, tag: u64) -> Option<&[u8]> {
        if (tag >> 32) as u32 != self.generation {
            return None;
        }
        let i = (tag & 0xffff_ffff).checked_sub(1)? as usize;
        self.list.get(i).map(Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// The link header's length and the EtherType after it, if `frame` has a whole one.
pub fn link_header(frame: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    loop {
        let t = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        if VLAN_TPIDS.contains(&t) && at < 12 + 4 * 2 {
            at += 4;
            continue;
        }
        return Some((at + 2, t));
    }
}

/// The packet a received frame is, as `__netif_receive_skb` hands it to the ingress hook: the outer
/// VLAN tag taken out of the header into the accelerated tag (`skb_vlan_untag`, which Linux does to
/// every tagged frame it receives), inner tags left in it (`vlan_inline`), the stations' addresses kept
/// in `headers`. `None` for a frame too short to have a link header.
pub fn to_packet(frame: &[u8], headers: &mut Headers) -> Option<Packet> {
    to_packet_tagged(frame, headers, None)
}

/// [`to_packet`] for a frame a packet socket received, whose outer tag Linux already took out of its
/// bytes (`accel`, reported by `PACKET_AUXDATA`): every tag still in the bytes stays inline.
pub fn to_packet_tagged(
    frame: &[u8],
    headers: &mut Headers,
    accel: Option<VlanTag>,
) -> Option<Packet> {
    let (hlen, protocol) = link_header(frame)?;
    let mut tags = frame[12..hlen - 2].chunks_exact(4).map(|t| VlanTag {
        proto: u16::from_be_bytes([t[0], t[1]]),
        tci: u16::from_be_bytes([t[2], t[3]]),
    });
    let (vlan, in_bytes) = match accel {
        Some(t) => (Some(t), 0),
        None => (tags.next(), 4),
    };
    let vlan_inline: Vec<VlanTag> = tags.collect();
    let tag = headers.tag(&frame[..12]);
    // The stations' addresses stay with the packet too, as `eth_hdr(skb)` does, for flower's
    // `dst_mac`/`src_mac`.
    let mut eth = [0u8; 12];
    eth.copy_from_slice(&frame[..12]);
    Some(Packet {
        data: frame[hlen..].to_vec(),
        // The accelerated tag is metadata, not bytes of the packet (`qdisc_pkt_len` leaves it out).
        len: frame.len() as u32 - if vlan.is_some() { in_bytes } else { 0 },
        protocol,
        tag,
        ext: Some(Box::new(PacketExt {
            eth: Some(eth),
            vlan,
            vlan_inline,
            ..PacketExt::default()
        })),
        ..Packet::default()
    })
}

/// The frame a packet leaves as: the stations' addresses, its VLAN tags (the accelerated one first,
/// written as a device without VLAN offload writes it, then those in its header: a `vlan push` or
/// `pop` on the way shows on the wire), its protocol, its bytes. `false` if its addresses are gone
/// (the table started again while it was queued).
pub fn to_frame(pkt: &Packet, headers: &Headers, out: &mut Vec<u8>) -> bool {
    let Some(h) = headers.header(pkt.tag) else {
        return false;
    };
    out.clear();
    out.extend_from_slice(&h[..12.min(h.len())]);
    for t in pkt.vlan().iter().chain(pkt.vlan_inline()) {
        out.extend_from_slice(&t.proto.to_be_bytes());
        out.extend_from_slice(&t.tci.to_be_bytes());
    }
    out.extend_from_slice(&pkt.protocol.to_be_bytes());
    out.extend_from_slice(&pkt.data);
    true
}

/// The ones' complement sum of `bytes` as big-endian 16-bit words (an odd last byte padded).
fn ones_sum(bytes: &[u8], mut sum: u32) -> u32 {
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = words.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Where a packet's TCP or UDP checksum is (from its network header on; `protocol` its EtherType):
/// the transport header's start, the IP payload's end, the field's offset in the transport header,
/// and the pseudo-header's sum. For IPv4 and IPv6 without extension headers, unfragmented.
fn transport_checksum(data: &[u8], protocol: u16) -> Option<(usize, usize, usize, u32)> {
    let (l4, end, proto, addrs) = match protocol {
        0x0800 if data.len() >= 20 && data[0] >> 4 == 4 => {
            let ihl = (data[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([data[2], data[3]]) as usize;
            let fragment = u16::from_be_bytes([data[6], data[7]]) & 0x3fff != 0;
            if ihl < 20 || fragment {
                return None;
            }
            (ihl, total, data[9], &data[12..20])
        }
        0x86dd if data.len() >= 40 && data[0] >> 4 == 6 => (
            40,
            40 + u16::from_be_bytes([data[4], data[5]]) as usize,
            data[6],
            &data[8..40],
        ),
        _ => return None,
    };
    let at = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if end > data.len() || l4 + at + 2 > end {
        return None;
    }
    Some((
        l4,
        end,
        at,
        ones_sum(addrs, (end - l4) as u32 + proto as u32),
    ))
}

/// Fill in the TCP or UDP checksum of a packet (from its network header on; `protocol` its
/// EtherType) that a sender left to its device (`CHECKSUM_PARTIAL`: the checksum field holds the
/// pseudo-header's folded sum), as the device would: the ones' complement of the sum from the
/// transport header to the end of the IP payload, written at the field (`skb_checksum_help`). For
/// IPv4 and IPv6 without extension headers, unfragmented; false for anything else, left as it is.
pub fn complete_checksum(data: &mut [u8], protocol: u16) -> bool {
    let Some((l4, end, at, _)) = transport_checksum(data, protocol) else {
        return false;
    };
    let proto_udp = at == 6;
    let mut check = !fold(ones_sum(&data[l4..end], 0));
    if proto_udp && check == 0 {
        // UDP's zero means "no checksum": a computed zero is sent as all ones (RFC 768).
        check = 0xffff;
    }
    data[l4 + at..l4 + at + 2].copy_from_slice(&check.to_be_bytes());
    true
}

/// Whether a packet's TCP or UDP checksum is as a sender leaves it to its device (the field holds
/// the pseudo-header's folded sum, [`complete_checksum`]'s input) rather than complete: for frames
/// that come without the kernel's word on it (AF_XDP). Only such a field is summed whole, and a
/// complete checksum that happens to hold that value (one in 65 536) verifies, so it is never
/// taken for one.
pub fn left_to_device(data: &[u8], protocol: u16) -> bool {
    let Some((l4, end, at, pseudo)) = transport_checksum(data, protocol) else {
        return false;
    };
    let field = u16::from_be_bytes([data[l4 + at], data[l4 + at + 1]]);
    field == fold(pseudo) && fold(ones_sum(&data[l4..end], pseudo)) != 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet's transport checksum verified from scratch (RFC 768/793): the pseudo-header and
    /// the transport bytes sum to all ones.
    fn verifies(data: &[u8], v6: bool) -> bool {
        let (l4, pseudo) = if v6 {
            (
                40,
                ones_sum(&data[8..40], (data.len() - 40) as u32 + data[6] as u32),
            )
        } else {
            (
                20,
                ones_sum(&data[12..20], (data.len() - 20) as u32 + data[9] as u32),
            )
        };
        let sum = ones_sum(&data[l4..], pseudo);
        fold(sum) == 0xffff
    }

    /// The state a sender leaves with CHECKSUM_PARTIAL: the pseudo-header's folded sum in the field.
    fn partial(data: &mut [u8], v6: bool, at: usize) {
        let (l4, sum) = if v6 {
            (
                40,
                ones_sum(&data[8..40], (data.len() - 40) as u32 + data[6] as u32),
            )
        } else {
            (
                20,
                ones_sum(&data[12..20], (data.len() - 20) as u32 + data[9] as u32),
            )
        };
        data[l4 + at..l4 + at + 2].copy_from_slice(&fold(sum).to_be_bytes());
    }

    /// IPv4/UDP, 10.0.1.2 -> 10.0.1.1, an odd payload length (101 bytes), its checksum as a sender
    /// with tx-checksumming on leaves it ([`partial`]).
    fn udp_v4_partial() -> Vec<u8> {
        let mut v4 = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 2, 10, 0, 1, 1,
        ];
        v4.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 0]);
        v4.extend((0..101).map(|k| (k * 7) as u8));
        let n = v4.len() as u16;
        v4[2..4].copy_from_slice(&n.to_be_bytes());
        v4[24..26].copy_from_slice(&(n - 20).to_be_bytes());
        partial(&mut v4, false, 6);
        v4
    }

    #[test]
    fn a_checksum_left_to_the_device_is_told_from_a_complete_one_by_its_bytes() {
        // The pseudo-header's sum in the field: left to the device. Completed, it verifies and is
        // no longer taken for one; nor is one whose payload a corruption changed (its field is
        // not the pseudo-header's sum).
        let v4 = udp_v4_partial();
        let n = v4.len() as u16;
        assert!(left_to_device(&v4, 0x0800));
        let mut done = v4.clone();
        assert!(complete_checksum(&mut done, 0x0800));
        assert!(verifies(&done, false) && !left_to_device(&done, 0x0800));
        let mut corrupt = done.clone();
        corrupt[40] ^= 0xff;
        assert!(!left_to_device(&corrupt, 0x0800));
        // A complete checksum that equals the pseudo-header's sum: a payload word chosen so.
        let mut equal = v4.clone();
        let pseudo = u16::from_be_bytes([v4[26], v4[27]]);
        // With the field at the pseudo-header's sum, the whole sums to all ones when the other
        // transport bytes sum to ~pseudo - pseudo (ones' complement); set the last two payload
        // bytes so.
        equal[126] = 0;
        equal[127] = 0;
        let rest = fold(ones_sum(
            &equal[20..],
            ones_sum(&equal[12..20], 17 + (n as u32 - 20)),
        ));
        let need = fold(0xffff - rest as u32);
        equal[126..128].copy_from_slice(&need.to_be_bytes());
        assert_eq!(u16::from_be_bytes([equal[26], equal[27]]), pseudo);
        assert!(
            verifies(&equal, false),
            "complete, and equal to the pseudo-header's sum"
        );
        assert!(!left_to_device(&equal, 0x0800));
    }

    #[test]
    fn a_checksum_left_to_the_device_is_completed_as_the_device_would() {
        let mut v4 = udp_v4_partial();
        assert!(!verifies(&v4, false), "partial: not yet valid");
        assert!(complete_checksum(&mut v4, 0x0800));
        assert!(verifies(&v4, false));
        // With Ethernet padding after the IP payload: the padding is not summed.
        let mut padded = v4.clone();
        partial(&mut padded, false, 6);
        padded.extend_from_slice(&[0xaa; 5]);
        assert!(complete_checksum(&mut padded, 0x0800));
        assert_eq!(padded[..v4.len()], v4[..]);
        // IPv6/TCP, a 20-byte header and 64 bytes.
        let mut v6 = vec![0x60, 0, 0, 0, 0, 84, 6, 64];
        v6.extend((0..32).map(|k| k as u8));
        v6.extend_from_slice(&[
            0x13, 0x88, 0x14, 0x51, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 1, 0,
        ]);
        v6.extend_from_slice(&[0, 0, 0, 0]);
        v6.extend((0..64).map(|k| (k * 3 + 1) as u8));
        partial(&mut v6, true, 16);
        assert!(complete_checksum(&mut v6, 0x86dd));
        assert!(verifies(&v6, true));
        // Not TCP or UDP, a fragment, cut short: left alone.
        let mut icmp = v4.clone();
        icmp[9] = 1;
        assert!(!complete_checksum(&mut icmp, 0x0800));
        let mut frag = v4.clone();
        frag[6] = 0x20;
        assert!(!complete_checksum(&mut frag, 0x0800));
        assert!(!complete_checksum(&mut v4[..30], 0x0800));
        assert!(!complete_checksum(&mut [0x45; 3], 0x0800));
    }

    fn frame(ethertype: &[u8], rest: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(ethertype);
        f.extend_from_slice(rest);
        f
    }

    #[test]
    fn a_frame_becomes_a_packet_from_its_network_header_and_back() {
        let mut h = Headers::default();
        let f = frame(&[0x08, 0x00], &[0x45, 0x10, 0, 20]);
        let p = to_packet(&f, &mut h).unwrap();
        assert_eq!((p.protocol, p.len, p.data[0]), (0x0800, 18, 0x45));
        assert_eq!(
            p.eth_addrs().map(|a| &a[..]),
            Some(&f[..12]),
            "the stations' addresses"
        );
        assert_eq!(p.ipv4_tos(), Some(0x10));
        let mut out = Vec::new();
        assert!(to_frame(&p, &h, &mut out));
        assert_eq!(out, f);
        // The same stations again: the same header, kept once.
        let p2 = to_packet(&f, &mut h).unwrap();
        assert_eq!((p2.tag, h.len()), (p.tag, 1));
    }

    #[test]
    fn the_outer_vlan_tag_is_accelerated_the_inner_stays_and_the_frame_comes_back_whole() {
        let mut h = Headers::default();
        // 802.1ad 1 outside 802.1Q 10, then IPv4: as skb_vlan_untag leaves it.
        let f = frame(
            &[0x88, 0xa8, 0x00, 0x01, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00],
            &[0x45, 0, 0, 20],
        );
        let p = to_packet(&f, &mut h).unwrap();
        let tag = |proto, tci| tclab_core::packet::VlanTag { proto, tci };
        assert_eq!(p.vlan(), Some(tag(0x88a8, 1)));
        assert_eq!(p.vlan_inline(), [tag(0x8100, 10)]);
        assert_eq!((p.protocol, p.data.len()), (0x0800, 4));
        assert_eq!(
            p.len as usize,
            f.len() - 4,
            "the accelerated tag is not counted"
        );
        assert_eq!(
            p.tc_protocol(),
            0x88a8,
            "what a filter's protocol is compared with"
        );
        let mut out = Vec::new();
        assert!(to_frame(&p, &h, &mut out));
        assert_eq!(out, f);
        // Popped: the frame leaves with the inner tag only.
        let mut popped = p.clone();
        popped.set_vlan(None);
        assert!(to_frame(&popped, &h, &mut out));
        assert_eq!(
            out,
            frame(&[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00], &[0x45, 0, 0, 20])
        );
    }

    /// A packet socket's frame whose outer tag the kernel took out (reported by PACKET_AUXDATA): the
    /// tag is the accelerated one, the frame's bytes all count, and the frame that leaves carries it.
    #[test]
    fn a_tag_the_kernel_took_out_is_the_accelerated_one_and_goes_back_in() {
        let mut h = Headers::default();
        let tag = |proto, tci| tclab_core::packet::VlanTag { proto, tci };
        let f = frame(&[0x08, 0x00], &[0x45, 0, 0, 20]);
        let p = to_packet_tagged(&f, &mut h, Some(tag(0x8100, 10))).unwrap();
        assert_eq!(
            (p.vlan(), p.vlan_inline().len()),
            (Some(tag(0x8100, 10)), 0)
        );
        assert_eq!(p.len as usize, f.len(), "the bytes that came, all counted");
        let mut out = Vec::new();
        assert!(to_frame(&p, &h, &mut out));
        assert_eq!(
            out,
            frame(&[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00], &[0x45, 0, 0, 20])
        );
        // Q-in-Q: the outer 802.1ad tag reported aside, the inner 802.1Q one still in the bytes.
        let f = frame(&[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00], &[0x45, 0, 0, 20]);
        let p = to_packet_tagged(&f, &mut h, Some(tag(0x88a8, 1))).unwrap();
        assert_eq!(p.vlan_inline(), [tag(0x8100, 10)]);
        assert!(to_frame(&p, &h, &mut out));
        assert_eq!(
            out,
            frame(
                &[0x88, 0xa8, 0x00, 0x01, 0x81, 0x00, 0x00, 0x0a, 0x08, 0x00],
                &[0x45, 0, 0, 20]
            )
        );
    }

    #[test]
    fn malformed_frames_are_refused_without_a_panic() {
        let mut h = Headers::default();
        for len in 0..14 {
            assert!(to_packet(&vec![0x81; len], &mut h).is_none(), "{len} bytes");
        }
        // A VLAN tag cut short, and stacked tags with nothing after them.
        assert!(to_packet(&frame(&[0x81, 0x00, 0x00], &[]), &mut h).is_none());
        assert!(to_packet(&frame(&[0x81, 0, 0, 1, 0x81, 0, 0, 2], &[]), &mut h).is_none());
        // Every short prefix of a real frame: refused or converted, never a panic.
        let f = frame(
            &[0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x86, 0xdd],
            &[0x60; 40],
        );
        for n in 0..f.len() {
            let _ = to_packet(&f[..n], &mut h);
        }
    }

    #[test]
    fn the_table_is_bounded_and_stale_tags_are_refused() {
        let mut h = Headers::default();
        let first = h.tag(&[1; 14]);
        for i in 0..MAX_HEADERS as u32 {
            let mut hdr = [0u8; 14];
            hdr[..4].copy_from_slice(&i.to_be_bytes());
            hdr[4] = 9;
            h.tag(&hdr);
        }
        assert!(h.len() <= MAX_HEADERS);
        assert!(
            h.header(first).is_none(),
            "a tag from before the restart is stale"
        );
    }
}
