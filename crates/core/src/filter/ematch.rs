//! Extended matches (`net/sched/ematch.c`): small packet tests combined with `and`, `or`, `not` and
//! parentheses, which the `basic` and `flow` classifiers consult before they act.
//!
//! tc flattens the expression into a list, as the kernel stores it (`struct tcf_ematch_tree`): each entry
//! carries a *relation* to the entry after it (`AND`, `OR`, or `END` for the last of a sequence), an
//! `INVERT` flag, and either a match of some kind or a *container* — a parenthesised sub-expression,
//! represented by the index where its own sequence starts. The top-level sequence comes first; each
//! container's sequence is appended after it (tc's `flatten_tree`), so a container always points forward.
//!
//! Evaluation (`__tcf_em_tree_match`) runs a sequence left to right with short circuit and no precedence:
//! after an entry whose relation is `AND` and whose result is false, or `OR` and true, the sequence ends
//! with that result. `a and b or c` is therefore `(a and b) or c`, and `a or b and c` is `a or (b and c)`.
//! A container pushes where it was onto a stack of at most 32 entries and runs its sequence; the result,
//! inverted if the container is, then decides whether the outer sequence goes on. Deeper nesting makes the
//! kernel give up with -1, which its callers read as *true*; tclab does the same.
//!
//! The kinds tclab has, with the kernel's semantics on a tclab packet (whose bytes start at the network
//! header and carry no link-layer header):
//! - `cmp` (`em_cmp.c`): an 8/16/32-bit big-endian word at an offset from the link, network or transport
//!   header, optionally masked (`trans`: byte-swapped as `be16_to_cpu` does on a little-endian host),
//!   compared `eq`/`lt`/`gt` with a value. Link-layer offsets and reads past the bytes do not match.
//! - `u32` (`em_u32.c`): a u32-classifier key (32-bit word at a 4-aligned offset from the network header,
//!   under a mask). The classifiers here give no `nexthdr` offset, so `nexthdr+` adds nothing.
//! - `meta` (`em_meta.c`): packet metadata compared with a value or another metadata. `priority`,
//!   `nf_mark`, `pkt_len` (tclab's frame length), `protocol` (as the kernel, in network byte order read as
//!   a little-endian host does: IPv4 is 8), `pkt_type` (0), `data_len` (0), `mac_len` (14), `tc_index`
//!   (what an ingress filter set), `loadavg_*` (0), `rxhash`, and `random` (a deterministic sequence). What a tclab packet does not
//!   have — a device, a route, a VLAN tag, a socket — makes the kernel's collector fail, and the match is
//!   false.
//! - `canid` (`em_canid.c`): the CAN identifier in the first four bytes (host order) against standard-
//!   and extended-frame rules.

use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::wire;
use std::cell::Cell;

/// `TCF_EM_REL_*` and `TCF_EM_INVERT`.
pub const REL_END: u16 = 0;
pub const REL_AND: u16 = 1;
pub const REL_OR: u16 = 2;
pub const REL_MASK: u16 = 3;
pub const INVERT: u16 = 4;

/// `TCF_EM_*` kind numbers (also the numbers of `/etc/iproute2/ematch_map`).
pub const KIND_CONTAINER: u16 = 0;
pub const KIND_CMP: u16 = 1;
/// `TCF_EM_NBYTE`: tc knows it, this kernel has no module for it.
pub const KIND_NBYTE: u16 = 2;
pub const KIND_U32: u16 = 3;
pub const KIND_META: u16 = 4;
pub const KIND_CANID: u16 = 7;

/// `CONFIG_NET_EMATCH_STACK`.
const STACK: usize = 32;

/// `TCF_LAYER_*`.
pub const LAYER_LINK: u8 = 0;
pub const LAYER_NETWORK: u8 = 1;
pub const LAYER_TRANSPORT: u8 = 2;

/// `TCF_EM_OPND_*`.
pub const OPND_EQ: u8 = 0;
pub const OPND_GT: u8 = 1;
pub const OPND_LT: u8 = 2;

/// `struct tcf_em_cmp`.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Cmp {
    pub val: u32,
    pub mask: u32,
    pub off: u16,
    /// 1, 2 or 4 bytes (`TCF_EM_ALIGN_*`).
    pub align: u8,
    /// `TCF_EM_CMP_TRANS` (1).
    pub flags: u8,
    pub layer: u8,
    pub opnd: u8,
}

/// `struct tc_u32_key` as the u32 ematch holds it; `val` and `mask` as the big-endian word reads.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct U32Key {
    pub val: u32,
    pub mask: u32,
    pub off: i32,
    pub offmask: i32,
}

/// `TCF_META_TYPE_*`.
pub const META_TYPE_VAR: u16 = 0;
pub const META_TYPE_INT: u16 = 1;

/// `TCF_META_ID_*` that tclab names.
pub mod meta_id {
    pub const VALUE: u16 = 0;
    pub const RANDOM: u16 = 1;
    pub const LOADAVG_0: u16 = 2;
    pub const LOADAVG_2: u16 = 4;
    pub const DEV: u16 = 5;
    pub const PRIORITY: u16 = 6;
    pub const PROTOCOL: u16 = 7;
    pub const PKTTYPE: u16 = 8;
    pub const PKTLEN: u16 = 9;
    pub const DATALEN: u16 = 10;
    pub const MACLEN: u16 = 11;
    pub const NFMARK: u16 = 12;
    pub const TCINDEX: u16 = 13;
    pub const RTCLASSID: u16 = 14;
    pub const RTIIF: u16 = 15;
    pub const SK_FAMILY: u16 = 16;
    pub const SK_BOUND_IF: u16 = 19;
    pub const SK_ROUTE_CAPS: u16 = 35;
    pub const VLAN_TAG: u16 = 46;
    pub const RXHASH: u16 = 47;
    pub const MAX: u16 = 47;
}

/// One side of a meta comparison (`struct tcf_meta_val` plus its TLV).
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct MetaVal {
    /// `type << 12 | id`.
    pub kind: u16,
    pub shift: u8,
    /// The comparison (`left.op`); unused on the right.
    pub op: u8,
    /// INT: the value (id VALUE) or the mask (other ids, 0 for none). VAR: the bytes (id VALUE).
    pub int: u32,
    pub bytes: Vec<u8>,
    /// Whether tc sent the value TLV (`dump_value`: always for INT, only VALUE for VAR).
    pub has_tlv: bool,
}

impl MetaVal {
    pub fn id(&self) -> u16 {
        self.kind & 0xfff
    }
    pub fn typ(&self) -> u16 {
        self.kind >> 12
    }
}

/// `meta(LEFT op RIGHT)`.
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    pub left: MetaVal,
    pub right: MetaVal,
}

/// `CAN_EFF_FLAG`, `CAN_SFF_MASK`, `CAN_EFF_MASK`.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;
pub const CAN_SFF_MASK: u32 = 0x0000_07ff;
pub const CAN_EFF_MASK: u32 = 0x1fff_ffff;
/// `EM_CAN_RULES_MAX`.
const CAN_RULES_MAX: usize = 500;

/// `struct can_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CanFilter {
    pub id: u32,
    pub mask: u32,
}

/// What one entry of the list is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EmKind {
    /// A parenthesised sequence starting at this index.
    Container(u32),
    Cmp(Cmp),
    U32(U32Key),
    Meta(Meta),
    /// The rules, in the order tc sent them; the kernel reorders them (extended-frame rules first).
    Canid(Vec<CanFilter>),
    /// A kind tc sends that this kernel has no module for (`TCF_EM_NBYTE`, `TCF_EM_IPT`): its
    /// number alone, refused by [`EmatchTree::validate`].
    Unloaded(u16),
}

impl EmKind {
    pub fn kind_num(&self) -> u16 {
        match self {
            EmKind::Container(_) => KIND_CONTAINER,
            EmKind::Cmp(_) => KIND_CMP,
            EmKind::U32(_) => KIND_U32,
            EmKind::Meta(_) => KIND_META,
            EmKind::Canid(_) => KIND_CANID,
            EmKind::Unloaded(k) => *k,
        }
    }
}

/// One entry (`struct tcf_ematch`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ematch {
    /// Relation to the next entry and `INVERT`.
    pub flags: u16,
    pub kind: EmKind,
}

impl Ematch {
    pub fn relation(&self) -> u16 {
        self.flags & REL_MASK
    }
    pub fn inverted(&self) -> bool {
        self.flags & INVERT != 0
    }
    /// `tcf_em_early_end`.
    fn early_end(&self, res: bool) -> bool {
        match self.relation() {
            REL_END => true,
            REL_AND => !res,
            _ => res,
        }
    }
}

/// The flattened expression (`struct tcf_ematch_tree`). Empty: no `match` was given (always true).
#[derive(Clone, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct EmatchTree {
    pub matches: Vec<Ematch>,
    /// State of `meta(random …)`'s deterministic sequence.
    random: Cell<u64>,
}

impl EmatchTree {
    /// Whether a `meta` match reads the packet's route (`rt_classid`, `rt_iif`).
    pub fn reads_route(&self) -> bool {
        self.matches.iter().any(|m| match &m.kind {
            EmKind::Meta(mt) => [&mt.left, &mt.right]
                .iter()
                .any(|v| matches!(v.id(), meta_id::RTCLASSID | meta_id::RTIIF)),
            _ => false,
        })
    }

    pub fn new(matches: Vec<Ematch>) -> EmatchTree {
        EmatchTree {
            matches,
            random: Cell::new(0x6d65_7461_7261_6e64),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.matches.is_empty()
    }

    /// `tcf_em_tree_validate` and each kind's `change`: what the kernel refuses, with its errno.
    pub fn validate(&mut self) -> Result<(), KernelError> {
        let n = self.matches.len() as u32;
        let einval = || KernelError::new(Errno::Invalid);
        for (idx, m) in self.matches.iter_mut().enumerate() {
            if m.flags & REL_MASK == REL_MASK {
                return Err(einval());
            }
            match &mut m.kind {
                EmKind::Container(r) => {
                    // No backward jumps (loops) and no jumps out of the list.
                    if *r >= n || *r <= idx as u32 {
                        return Err(einval());
                    }
                }
                EmKind::Cmp(_) | EmKind::U32(_) => {}
                // tcf_em_validate: tcf_em_lookup finds no ops (request_module finds none either).
                EmKind::Unloaded(_) => return Err(KernelError::new(Errno::NoEntry)),
                EmKind::Meta(mt) => {
                    let (l, r) = (&mt.left, &mt.right);
                    if l.typ() != r.typ()
                        || l.typ() > META_TYPE_INT
                        || l.id() > meta_id::MAX
                        || r.id() > meta_id::MAX
                    {
                        return Err(einval());
                    }
                    if !meta_supported(l) || !meta_supported(r) {
                        return Err(KernelError::new(Errno::NotSupported));
                    }
                }
                EmKind::Canid(rules) => {
                    if rules.is_empty() || rules.len() > CAN_RULES_MAX {
                        return Err(einval());
                    }
                    // `em_canid_change`: extended-frame rules first, then standard ones.
                    let (eff, sff): (Vec<CanFilter>, Vec<CanFilter>) =
                        rules.iter().partition(|r| r.id & CAN_EFF_FLAG != 0);
                    *rules = eff.into_iter().chain(sff).collect();
                }
            }
        }
        Ok(())
    }

    /// `tcf_em_tree_match`: does the packet satisfy the expression?
    pub fn matches(&self, pkt: &Packet) -> bool {
        if self.matches.is_empty() {
            return true;
        }
        let mut stack: Vec<usize> = Vec::new();
        let mut idx = 0usize;
        let mut res = false;
        'proceed: loop {
            while idx < self.matches.len() {
                let m = &self.matches[idx];
                if let EmKind::Container(r) = m.kind {
                    if stack.len() >= STACK {
                        // The kernel returns -1 here, which every caller reads as a match.
                        return true;
                    }
                    stack.push(idx);
                    idx = r as usize;
                    continue;
                }
                res = self.match_one(m, pkt) != m.inverted();
                if m.early_end(res) {
                    break;
                }
                idx += 1;
            }
            while let Some(at) = stack.pop() {
                let m = &self.matches[at];
                if m.inverted() {
                    res = !res;
                }
                if !m.early_end(res) {
                    idx = at + 1;
                    continue 'proceed;
                }
            }
            return res;
        }
    }

    fn match_one(&self, m: &Ematch, pkt: &Packet) -> bool {
        match &m.kind {
            EmKind::Container(_) => false,
            EmKind::Cmp(c) => cmp_match(c, pkt),
            EmKind::U32(k) => {
                // `em_u32_match` without classifier info: from the network header.
                wire::be32(&pkt.data, k.off as i64).is_some_and(|w| (w ^ k.val) & k.mask == 0)
            }
            EmKind::Meta(mt) => self.meta_match(mt, pkt),
            EmKind::Canid(rules) => canid_match(rules, pkt),
            // Never in a tree the kernel took.
            EmKind::Unloaded(_) => false,
        }
    }

    fn meta_match(&self, mt: &Meta, pkt: &Packet) -> bool {
        let (Some(l), Some(r)) = (self.meta_get(&mt.left, pkt), self.meta_get(&mt.right, pkt))
        else {
            return false;
        };
        let ord = match (l, r) {
            (MetaObj::Int(a), MetaObj::Int(b)) => a.cmp(&b),
            // `meta_var_compare`: length first, then the bytes.
            (MetaObj::Var(a), MetaObj::Var(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(&b)),
            _ => return false,
        };
        match mt.left.op {
            OPND_EQ => ord.is_eq(),
            OPND_LT => ord.is_lt(),
            OPND_GT => ord.is_gt(),
            _ => false,
        }
    }

    /// `meta_get`: the object's value, shifted and masked; `None` where the kernel's collector fails.
    fn meta_get(&self, v: &MetaVal, pkt: &Packet) -> Option<MetaObj> {
        use meta_id::*;
        if v.id() == VALUE {
            return Some(match v.typ() {
                META_TYPE_INT => MetaObj::Int(v.int as u64),
                _ => MetaObj::Var(v.bytes.clone()),
            });
        }
        if v.typ() != META_TYPE_INT {
            // `dev`, `sk_bind_if` as names: tclab packets carry no device or socket.
            return None;
        }
        let mut x: u64 = match v.id() {
            RANDOM => {
                let mut s = self.random.get();
                let r = splitmix64(&mut s);
                self.random.set(s);
                r & 0xffff_ffff
            }
            LOADAVG_0..=LOADAVG_2 => 0,
            PRIORITY => pkt.priority as u64,
            // `skb_protocol(skb, false)`: the big-endian field as a little-endian host reads it.
            PROTOCOL => pkt.protocol.swap_bytes() as u64,
            PKTTYPE => 0,
            PKTLEN => pkt.len as u64,
            DATALEN => 0,
            MACLEN => 14,
            NFMARK => pkt.mark as u64,
            TCINDEX => pkt.tc_index as u64,
            RXHASH => rxhash(pkt) as u64,
            // `skb_dst(skb)->tclassid` and `inet_iif(skb)`: the collector fails without a route.
            RTCLASSID => pkt.route()?.tclassid as u64,
            RTIIF => pkt.route()?.iif as u64,
            // No device, VLAN tag or socket.
            _ => return None,
        };
        if v.shift != 0 {
            x = x.checked_shr(v.shift as u32).unwrap_or(0);
        }
        if v.int != 0 {
            x &= v.int as u64;
        }
        Some(MetaObj::Int(x))
    }
}

enum MetaObj {
    Int(u64),
    Var(Vec<u8>),
}

/// `meta_is_supported`: ids with a collector of that type.
fn meta_supported(v: &MetaVal) -> bool {
    use meta_id::*;
    match (v.typ(), v.id()) {
        (_, VALUE) => true,
        (META_TYPE_VAR, id) => id == DEV || id == SK_BOUND_IF,
        (META_TYPE_INT, id) => id != SK_ROUTE_CAPS && id <= MAX,
        _ => false,
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `skb_get_hash` stand-in: a fixed-key hash of the dissector's flow keys (the kernel keys it with a
/// per-boot secret, so only its consistency matters: one flow, one value).
pub fn rxhash(pkt: &Packet) -> u32 {
    let mut h = 0x7278_6861_7368_u64;
    for &w in crate::flow::flow_keys(pkt).iter() {
        let mut s = h ^ w;
        h = splitmix64(&mut s);
    }
    (h >> 32) as u32
}

/// `tcf_get_base_ptr` as an offset into `pkt.data`: network 0, transport after the IP header; the link
/// layer is not carried (`None`), nor is a transport header on a packet that is not IP.
fn layer_base(pkt: &Packet, layer: u8) -> Option<i64> {
    match layer {
        LAYER_NETWORK => Some(0),
        LAYER_TRANSPORT => match pkt.protocol {
            0x0800 => wire::Ipv4::parse(&pkt.data).map(|h| h.header_len() as i64),
            0x86dd if pkt.data.len() >= 40 && pkt.data[0] >> 4 == 6 => Some(40),
            _ => None,
        },
        _ => None,
    }
}

/// `em_cmp_match`.
fn cmp_match(c: &Cmp, pkt: &Packet) -> bool {
    let Some(base) = layer_base(pkt, c.layer) else {
        return false;
    };
    let at = base + c.off as i64;
    let trans = c.flags & 1 != 0;
    let val = match c.align {
        1 => wire::byte(&pkt.data, at).map(u32::from),
        2 => wire::be16(&pkt.data, at).map(|v| if trans { v.swap_bytes() } else { v } as u32),
        4 => wire::be32(&pkt.data, at).map(|v| if trans { v.swap_bytes() } else { v }),
        _ => None,
    };
    let Some(mut val) = val else { return false };
    if c.mask != 0 {
        val &= c.mask;
    }
    match c.opnd {
        OPND_EQ => val == c.val,
        OPND_LT => val < c.val,
        OPND_GT => val > c.val,
        _ => false,
    }
}

/// `em_canid_match` (rules already in the kernel's order).
fn canid_match(rules: &[CanFilter], pkt: &Packet) -> bool {
    let Some(b) = pkt.data.get(..4) else {
        return false;
    };
    let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if id & CAN_EFF_FLAG != 0 {
        rules
            .iter()
            .filter(|r| r.id & CAN_EFF_FLAG != 0)
            .any(|r| (r.id ^ id) & r.mask == 0)
    } else {
        let id = id & CAN_SFF_MASK;
        rules.iter().filter(|r| r.id & CAN_EFF_FLAG == 0).any(|r| {
            // `em_canid_sff_match_add`: every id whose masked bits equal the rule's.
            let mask = r.mask & CAN_SFF_MASK;
            id & mask == r.id & mask
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp_u8_at(off: u16, layer: u8, opnd: u8, val: u32) -> EmKind {
        EmKind::Cmp(Cmp {
            val,
            off,
            align: 1,
            layer,
            opnd,
            ..Default::default()
        })
    }

    fn tcp_packet() -> Packet {
        let mut d = vec![0u8; 40];
        d[0] = 0x45;
        d[9] = 6;
        Packet {
            data: d,
            len: 54,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    #[test]
    fn sequences_short_circuit_left_to_right() {
        // cmp(proto eq 6) OR cmp(proto eq 17) AND ... : `a or b and c` is `a or (b and c)`.
        let a = Ematch {
            flags: REL_OR,
            kind: cmp_u8_at(9, LAYER_NETWORK, OPND_EQ, 6),
        };
        let b = Ematch {
            flags: REL_AND,
            kind: cmp_u8_at(9, LAYER_NETWORK, OPND_EQ, 17),
        };
        let c = Ematch {
            flags: REL_END,
            kind: cmp_u8_at(0, LAYER_NETWORK, OPND_EQ, 0x45),
        };
        let t = EmatchTree::new(vec![a, b, c]);
        assert!(t.matches(&tcp_packet()), "a is true and ends the sequence");
    }

    #[test]
    fn containers_and_inversion() {
        // not (cmp(proto eq 17)) and cmp(ver/ihl eq 0x45): list [C(ref 2) AND, cmp45, cmp17].
        let t = EmatchTree::new(vec![
            Ematch {
                flags: REL_AND | INVERT,
                kind: EmKind::Container(2),
            },
            Ematch {
                flags: REL_END,
                kind: cmp_u8_at(0, LAYER_NETWORK, OPND_EQ, 0x45),
            },
            Ematch {
                flags: REL_END,
                kind: cmp_u8_at(9, LAYER_NETWORK, OPND_EQ, 17),
            },
        ]);
        let mut t2 = t.clone();
        assert!(t2.validate().is_ok());
        assert!(t.matches(&tcp_packet()));
        let mut udp = tcp_packet();
        udp.data[9] = 17;
        assert!(!t.matches(&udp));
    }

    #[test]
    fn backward_container_refs_are_refused() {
        let mut t = EmatchTree::new(vec![Ematch {
            flags: REL_END,
            kind: EmKind::Container(0),
        }]);
        assert_eq!(t.validate().unwrap_err().errno, Errno::Invalid);
    }

    #[test]
    fn reads_past_the_end_do_not_match_even_inverted_inputs() {
        let short = Packet {
            data: vec![0x45, 0, 0],
            protocol: 0x0800,
            ..Default::default()
        };
        let t = EmatchTree::new(vec![Ematch {
            flags: REL_END,
            kind: cmp_u8_at(9, LAYER_NETWORK, OPND_LT, 255),
        }]);
        assert!(!t.matches(&short));
        let link = EmatchTree::new(vec![Ematch {
            flags: REL_END,
            kind: cmp_u8_at(0, LAYER_LINK, OPND_LT, 255),
        }]);
        assert!(!link.matches(&tcp_packet()), "no link header is carried");
    }
}
