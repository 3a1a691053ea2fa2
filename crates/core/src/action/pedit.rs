//! `pedit` (`net/sched/act_pedit.c`): the generic packet editor. Each key rewrites one 32-bit word of the
//! packet: `word = (word & mask) ^ val` (`set`), or in extended mode also `word = (word & mask) ^ ((word +
//! val) & ~mask)` (`add`). Offsets count from a header: the network header for plain keys and for
//! `ip`/`ip6` keys, the transport header (after IPv4's `ihl`, or IPv6's extension headers) for `tcp` and
//! `udp` keys, the Ethernet header for `eth` keys. An `at A offmask M shift S` key adds `(byte at A & M) >> S`
//! to its offset at run time (u32's trick for a variable-length header).
//!
//! pedit never touches a checksum: after it, the IP and transport checksums are stale until a `csum`
//! action recomputes them, exactly as in the kernel.
//!
//! The sum of `add` is the one an x86 kernel computes: the word is loaded in the CPU's (little-endian)
//! order, so a carry runs from the first byte on the wire towards the fourth and falls off the end —
//! `udp dport add 1` on port 0x12ff gives 0x1200, as Linux gives on x86.
//!
//! Where a key cannot be applied — an Ethernet key (tclab's packets carry no link-layer header), an offset
//! before the network header, past the packet's end, or not on a 4-byte boundary after `at`, a `tcp`/`udp`
//! key on a packet that is neither IPv4 nor an IPv6 packet carrying that transport — the kernel stops at
//! that key, counts an overlimit and answers the action's control code; so does this. Keys before it
//! stay applied. A key past the bytes tclab materialises but within the packet writes into payload that
//! was zeros.

use super::Control;
use crate::packet::Packet;

/// `enum pedit_header_type` (`TCA_PEDIT_KEY_EX_HDR_TYPE_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HeaderType {
    #[default]
    Network = 0,
    Eth = 1,
    Ip4 = 2,
    Ip6 = 3,
    Tcp = 4,
    Udp = 5,
}

/// `enum pedit_cmd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Cmd {
    #[default]
    Set = 0,
    Add = 1,
}

/// `struct tc_pedit_key` and its extended part. `val` and `mask` are the word as it sits in the packet,
/// read big-endian (what tc prints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Key {
    pub mask: u32,
    pub val: u32,
    pub off: i32,
    pub at: u32,
    pub offmask: u32,
    pub shift: u32,
    pub htype: HeaderType,
    pub cmd: Cmd,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pedit {
    pub action: Control,
    pub keys: Vec<Key>,
    /// `TCA_PEDIT_PARMS_EX` (with header types and commands) rather than `TCA_PEDIT_PARMS`.
    pub extended: bool,
}

impl Pedit {
    /// `tcf_pedit_init`'s checks on the keys.
    pub fn validate(&self) -> Result<(), crate::KernelError> {
        if self.keys.is_empty() {
            return Err(crate::KernelError::invalid(
                "act_pedit: Pedit requires keys to be passed",
            ));
        }
        if self.keys.iter().any(|k| k.offmask == 0 && k.off % 4 != 0) {
            return Err(crate::KernelError::invalid(
                "act_pedit: Offsets must be on 32bit boundaries",
            ));
        }
        Ok(())
    }

    /// `tcf_pedit_act`: the control code, and whether a key could not be applied (an overlimit).
    pub fn act(&self, pkt: &mut Packet) -> (Control, bool) {
        for k in &self.keys {
            if apply(k, pkt).is_none() {
                return (self.action, true);
            }
        }
        (self.action, false)
    }
}

/// `pedit_skb_hdr_offset`: where the key's header starts, from the network header.
fn header_offset(h: HeaderType, pkt: &Packet) -> Option<i64> {
    match h {
        // No link-layer header on a tclab packet (`skb_mac_header_was_set` false).
        HeaderType::Eth => None,
        HeaderType::Network | HeaderType::Ip4 | HeaderType::Ip6 => Some(0),
        HeaderType::Tcp | HeaderType::Udp => {
            let want = if h == HeaderType::Tcp { 6 } else { 17 };
            match pkt.protocol {
                0x0800 => pkt.data.first().map(|b| (b & 0x0f) as i64 * 4),
                0x86dd => ipv6_find_hdr(&pkt.data, want),
                _ => None,
            }
        }
    }
}

/// `ipv6_find_hdr` for a transport header: walk the extension headers to it.
fn ipv6_find_hdr(d: &[u8], want: u8) -> Option<i64> {
    if d.len() < 40 {
        return None;
    }
    let mut next = d[6];
    let mut off = 40usize;
    loop {
        if next == want {
            return Some(off as i64);
        }
        match next {
            0 | 43 | 60 | 51 => {
                let len = *d.get(off + 1)? as usize;
                let hl = if next == 51 {
                    (len + 2) << 2
                } else {
                    (len + 1) << 3
                };
                next = *d.get(off)?;
                off += hl;
            }
            44 => {
                // Only the first fragment has the header.
                let frag = u16::from_be_bytes([*d.get(off + 2)?, *d.get(off + 3)?]);
                if frag & 0xfff8 != 0 {
                    return None;
                }
                next = *d.get(off)?;
                off += 8;
            }
            _ => return None,
        }
    }
}

/// One key; `None` where the kernel goes to `bad`.
fn apply(k: &Key, pkt: &mut Packet) -> Option<()> {
    let hoffset = header_offset(k.htype, pkt)?;
    let mut offset = k.off as i64;
    let len = pkt.l3_len() as i64;
    if k.offmask != 0 {
        let at = hoffset + k.at as i32 as i64;
        if at < 0 || at > len - 1 {
            return None;
        }
        // A byte past what tclab materialises is payload: zero.
        let d = pkt.data.get(at as usize).copied().unwrap_or(0);
        // The kernel caps the shift at 31 when it takes the key.
        offset += ((d as u32 & k.offmask) >> k.shift.min(31)) as i64;
        if offset % 4 != 0 {
            return None;
        }
    }
    let w = hoffset + offset;
    // `offset_valid`: no headroom before the network header here, and the whole word inside the packet.
    if w < 0 || w > len - 4 {
        return None;
    }
    let w = w as usize;
    if !pkt.materialise(w + 4) {
        return None;
    }
    let b = &mut pkt.data[w..w + 4];
    // The word as x86 loads it, and the key's fields as the kernel holds them (network order in memory).
    let cur = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let mask = u32::from_le_bytes(k.mask.to_be_bytes());
    let val = u32::from_le_bytes(k.val.to_be_bytes());
    let val = match k.cmd {
        Cmd::Set => val,
        Cmd::Add => cur.wrapping_add(val) & !mask,
    };
    b.copy_from_slice(&((cur & mask) ^ val).to_le_bytes());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_OK;

    fn pedit(keys: Vec<Key>) -> Pedit {
        Pedit {
            action: TC_ACT_OK,
            keys,
            extended: true,
        }
    }

    #[test]
    fn set_rewrites_under_the_mask_and_leaves_the_checksum_stale() {
        // `munge ip dst set 192.0.2.9`: the word at 16, nothing kept.
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 53, 0, 100);
        let check = [p.data[10], p.data[11]];
        let e = pedit(vec![Key {
            val: 0xc000_0209,
            off: 16,
            htype: HeaderType::Ip4,
            ..Default::default()
        }]);
        assert_eq!(e.act(&mut p), (TC_ACT_OK, false));
        assert_eq!(&p.data[16..20], &[192, 0, 2, 9]);
        assert_eq!([p.data[10], p.data[11]], check, "pedit fixes no checksum");
        assert_ne!(crate::wire::checksum(&p.data[..20]), 0);
    }

    #[test]
    fn add_carries_as_x86_does() {
        // `ex munge udp dport add 1`: val 00000001 mask ffff0000 at udp+0.
        let key = Key {
            val: 1,
            mask: 0xffff_0000,
            htype: HeaderType::Udp,
            cmd: Cmd::Add,
            ..Default::default()
        };
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 0x12fe, 0, 100);
        pedit(vec![key]).act(&mut p);
        assert_eq!(&p.data[22..24], &[0x12, 0xff]);
        pedit(vec![key]).act(&mut p);
        assert_eq!(
            &p.data[22..24],
            &[0x12, 0x00],
            "the carry out of the low byte is lost"
        );
        // `ex munge ip ttl add 0xff` (decrement): 64 → 63, the protocol byte untouched.
        let mut q = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        let dec = Key {
            val: 0xff00_0000,
            mask: 0x00ff_ffff,
            off: 8,
            htype: HeaderType::Ip4,
            cmd: Cmd::Add,
            ..Default::default()
        };
        pedit(vec![dec]).act(&mut q);
        assert_eq!((q.data[8], q.data[9]), (63, 17));
    }

    #[test]
    fn keys_that_cannot_apply_count_an_overlimit_and_stop() {
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        let eth = Key {
            htype: HeaderType::Eth,
            ..Default::default()
        };
        let ttl = Key {
            val: 0x0100_0000,
            mask: 0x00ff_ffff,
            off: 8,
            ..Default::default()
        };
        assert_eq!(pedit(vec![ttl, eth, ttl]).act(&mut p), (TC_ACT_OK, true));
        assert_eq!(p.data[8], 1, "the key before the bad one applied");
        let past = Key {
            off: 84, // the packet is 86 bytes from its IP header: a word at 84 would cross the end
            ..Default::default()
        };
        assert!(pedit(vec![past]).act(&mut p).1);
        let last = Key {
            off: 80,
            ..Default::default()
        };
        assert!(!pedit(vec![last]).act(&mut p).1, "payload zeros made real");
        assert_eq!(p.data.len(), 84);
        // `at 0 offmask 0f shift 0`… ihl × 4 needs shift -2: offmask 0x0f shift 0 gives 5, not aligned.
        let at = Key {
            off: 0,
            at: 0,
            offmask: 0x0f,
            shift: 0,
            ..Default::default()
        };
        assert!(pedit(vec![at]).act(&mut p).1);
    }
}
