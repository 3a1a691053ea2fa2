//! flow, the generic flow classifier (`net/sched/cls_flow.c`): the class is computed from the packet.
//!
//! Each filter names *keys* — addresses, protocol, ports, mark, priority, … — read from the packet. In
//! *hash* mode the keys are hashed with Bob Jenkins' `jhash2` under a per-filter random value (`hashrnd`);
//! in *map* mode the one key is transformed: `((key & mask) ^ xor) >> rshift) + addend` (tc spells the
//! mask and xor as `and`, `or`, `xor`). With a `divisor` the result is taken modulo it, and the class is
//! `baseclass` plus the result, in the baseclass's major: `TC_H_MAKE(base, base + n)`. The baseclass
//! defaults to minor 1 of the qdisc the filter hangs on, so `flow hash keys … divisor 1024` on an SFQ
//! names buckets 1..1024 — which is how seed 003 restricts SFQ's hash to chosen fields.
//!
//! `perturb SECS` re-draws `hashrnd` every SECS seconds (a kernel timer). The kernel draws it from
//! `get_random_bytes`; tclab draws it from a generator seeded with a fixed value (mixed with the handle;
//! [`FlowHead::set_seed`] changes it, and the simulator sets it from the run's seed), and re-draws lazily when a packet is classified after the period —
//! reproducible, and the same sequence of secrets whenever packets arrive.
//!
//! Keys a tclab packet lacks behave as in the kernel when the skb lacks them: a non-IP packet's address
//! keys fall back to a hash of the (absent) socket or route — a constant here, 0 for sources and the
//! EtherType as the kernel folds it for destinations —, ports fall back the same way for packets without
//! ports (fragments, non-TCP/UDP/SCTP/DCCP, truncated headers); `iif`, `rt-classid`, `sk-uid`, `sk-gid`,
//! `vlan-tag` are 0 and `nfct*` fall back to their non-conntrack counterparts (no conntrack entry).
//! Filters are kept in creation order and tried in that order; an ematch `match` must hold first.

use super::ematch::EmatchTree;
use super::{Exts, ExtsSpec, TcfResult, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::{Nanos, NSEC_PER_SEC};
use std::cell::Cell;

/// `FLOW_KEY_*` names, by bit (tc's `flow_keys[]`).
pub const KEY_NAMES: [&str; 18] = [
    "src",
    "dst",
    "proto",
    "proto-src",
    "proto-dst",
    "iif",
    "priority",
    "mark",
    "nfct",
    "nfct-src",
    "nfct-dst",
    "nfct-proto-src",
    "nfct-proto-dst",
    "rt-classid",
    "sk-uid",
    "sk-gid",
    "vlan-tag",
    "rxhash",
];
/// `FLOW_KEY_MAX`.
pub const KEY_MAX: u32 = 17;
/// `FLOW_MODE_MAP`, `FLOW_MODE_HASH`.
pub const MODE_MAP: u32 = 0;
pub const MODE_HASH: u32 = 1;
/// The generator's seed when nobody sets one.
pub const DEFAULT_SEED: u64 = 0xf10e_5eed;

/// What tc sends (`TCA_FLOW_*`); `None` for an attribute it leaves out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowOptions {
    pub keys: Option<u32>,
    pub mode: Option<u32>,
    /// `TCA_FLOW_MASK` and `TCA_FLOW_XOR`, sent together.
    pub mask_xor: Option<(u32, u32)>,
    pub rshift: Option<u32>,
    pub addend: Option<u32>,
    pub divisor: Option<u32>,
    pub baseclass: Option<u32>,
    /// Seconds.
    pub perturb: Option<u32>,
    pub ematches: Option<EmatchTree>,
    pub exts: ExtsSpec,
    /// The handle of the qdisc the block belongs to (the engine fills it in, as the kernel reads
    /// `tcf_block_q(block)->handle`): a baseclass without a major takes this one.
    pub qdisc: u32,
}

/// One filter (`struct flow_filter`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FlowFilter {
    pub handle: u32,
    pub keymask: u32,
    pub mode: u32,
    pub mask: u32,
    pub xor: u32,
    pub rshift: u32,
    pub addend: u32,
    pub divisor: u32,
    pub baseclass: u32,
    /// Seconds (0: no perturbation).
    pub perturb: u32,
    pub ematches: EmatchTree,
    pub exts: Exts,
    hashrnd: Cell<u32>,
    rng: Cell<u64>,
    next_perturb: Cell<Option<Nanos>>,
}

/// The instance (`struct flow_head`): filters in creation order.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FlowHead {
    pub filters: Vec<FlowFilter>,
    seed: Option<u64>,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `jhash2` (`include/linux/jhash.h`, Bob Jenkins' lookup3 `hashword`).
pub fn jhash2(k: &[u32], initval: u32) -> u32 {
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }
    fn fin(a: &mut u32, b: &mut u32, c: &mut u32) {
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(14));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(11));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(25));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(16));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(4));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(14));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(24));
    }
    let init = 0xdead_beef_u32
        .wrapping_add((k.len() as u32).wrapping_shl(2))
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = k;
    while k.len() > 3 {
        a = a.wrapping_add(k[0]);
        b = b.wrapping_add(k[1]);
        c = c.wrapping_add(k[2]);
        mix(&mut a, &mut b, &mut c);
        k = &k[3..];
    }
    match k.len() {
        3 => {
            c = c.wrapping_add(k[2]);
            b = b.wrapping_add(k[1]);
            a = a.wrapping_add(k[0]);
            fin(&mut a, &mut b, &mut c);
        }
        2 => {
            b = b.wrapping_add(k[1]);
            a = a.wrapping_add(k[0]);
            fin(&mut a, &mut b, &mut c);
        }
        1 => {
            a = a.wrapping_add(k[0]);
            fin(&mut a, &mut b, &mut c);
        }
        _ => {}
    }
    c
}

/// What `skb_flow_dissect_flow_keys` finds: addresses (0 when absent), the L4 protocol, the ports (0 when
/// absent: fragments, protocols without ports, truncated headers).
#[derive(Default)]
struct Dissected {
    src: u32,
    dst: u32,
    proto: u8,
    sport: u16,
    dport: u16,
}

/// Where `proto_ports_offset` finds the "ports" of an L4 protocol.
fn ports_offset(proto: u8) -> Option<usize> {
    match proto {
        6 | 17 | 33 | 50 | 132 | 136 => Some(0),
        51 => Some(4),
        _ => None,
    }
}

fn dissect(pkt: &Packet) -> Dissected {
    let d = &pkt.data;
    let mut k = Dissected::default();
    let ports = |k: &mut Dissected, l4: usize| {
        if let Some(off) = ports_offset(k.proto) {
            if let (Some(s), Some(t)) = (
                crate::wire::be16(d, (l4 + off) as i64),
                crate::wire::be16(d, (l4 + off + 2) as i64),
            ) {
                k.sport = s;
                k.dport = t;
            }
        }
    };
    match pkt.protocol {
        0x0800 => {
            if d.len() < 20 || d[0] & 0x0f < 5 {
                return k;
            }
            k.proto = d[9];
            k.src = u32::from_be_bytes([d[12], d[13], d[14], d[15]]);
            k.dst = u32::from_be_bytes([d[16], d[17], d[18], d[19]]);
            let frag = u16::from_be_bytes([d[6], d[7]]) & 0x3fff != 0;
            if !frag {
                ports(&mut k, (d[0] & 0x0f) as usize * 4);
            }
        }
        0x86dd => {
            if d.len() < 40 {
                return k;
            }
            // `ipv6_addr_hash`: the four words folded by xor.
            let fold = |at: usize| {
                (0..4).fold(0u32, |x, i| {
                    let o = at + 4 * i;
                    x ^ u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
                })
            };
            k.proto = d[6];
            k.src = fold(8);
            k.dst = fold(24);
            ports(&mut k, 40);
        }
        _ => {}
    }
    k
}

impl FlowFilter {
    /// The current hash secret (`hashrnd`), for tests that recompute a hash.
    pub fn hashrnd(&self) -> u32 {
        self.hashrnd.get()
    }

    /// `flow_key_get` for a tclab packet.
    fn key(&self, key: u32, pkt: &Packet, f: &Dissected) -> u32 {
        // `addr_fold(NULL)` — no socket, no route — is a per-boot constant; tclab's is 0. The destination
        // fallbacks add the EtherType as the kernel does (`(__force u16)skb_protocol()`, host order of a
        // big-endian field).
        let no_dst = pkt.protocol.swap_bytes() as u32;
        let ports = f.sport != 0 || f.dport != 0;
        match key {
            0 | 9 => f.src,
            1 | 10 => {
                if f.dst != 0 {
                    f.dst
                } else {
                    no_dst
                }
            }
            2 => f.proto as u32,
            3 | 11 if ports => f.sport as u32,
            3 | 11 => 0,
            4 | 12 if ports => f.dport as u32,
            4 | 12 => no_dst,
            6 => pkt.priority,
            7 => pkt.mark,
            17 => super::ematch::rxhash(pkt),
            // iif, nfct (fold of no entry), rt-classid, sk-uid, sk-gid, vlan-tag.
            _ => 0,
        }
    }

    /// The perturbation timer, run lazily: a new `hashrnd` once per elapsed period.
    fn perturb_if_due(&self, now: Nanos) {
        let Some(at) = self.next_perturb.get() else {
            return;
        };
        if now < at {
            return;
        }
        let period = self.perturb as u64 * NSEC_PER_SEC;
        let mut s = self.rng.get();
        self.hashrnd.set(splitmix64(&mut s) as u32);
        self.rng.set(s);
        let periods = (now - at) / period + 1;
        self.next_perturb.set(Some(at + periods * period));
    }

    /// The classid this filter computes for the packet.
    pub fn classid(&self, pkt: &Packet, now: Nanos) -> u32 {
        self.perturb_if_due(now);
        let f = dissect(pkt);
        let mut keys = Vec::with_capacity(self.keymask.count_ones() as usize);
        for bit in 0..=KEY_MAX {
            if self.keymask & (1 << bit) != 0 {
                keys.push(self.key(bit, pkt, &f));
            }
        }
        let mut n = if self.mode == MODE_HASH {
            jhash2(&keys, self.hashrnd.get())
        } else {
            let k = keys.first().copied().unwrap_or(0);
            (((k & self.mask) ^ self.xor) >> self.rshift).wrapping_add(self.addend)
        };
        if self.divisor != 0 {
            n %= self.divisor;
        }
        (self.baseclass & 0xffff_0000) | (self.baseclass.wrapping_add(n) & 0xffff)
    }
}

impl FlowHead {
    /// Seed the generator the filters' `hashrnd` values are drawn from, and re-draw those of the filters
    /// that exist, as if the seed had been set before they were made.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = Some(seed);
        for f in &mut self.filters {
            let mut rng = seed ^ (f.handle as u64) << 32;
            f.hashrnd.set(splitmix64(&mut rng) as u32);
            f.rng.set(rng);
        }
    }

    /// `flow_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        for f in &self.filters {
            if !f.ematches.matches(pkt) {
                continue;
            }
            res.classid = f.classid(pkt, cx.now);
            let r = f.exts.exec(pkt, cx);
            if r < 0 {
                continue;
            }
            return r;
        }
        NO_MATCH
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.handle == handle)
    }

    /// `flow_change`: check everything, then create or replace the filter.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&FlowOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let einval = || KernelError::new(Errno::Invalid);
        let o = opts.ok_or_else(einval)?;
        if o.rshift.is_some_and(|r| r > 31) {
            // `NLA_POLICY_MAX(NLA_U32, 31)`.
            return Err(KernelError::new(Errno::Range));
        }
        if o.baseclass.is_some_and(|b| b & 0xffff == 0) {
            return Err(einval());
        }
        let mut nkeys = 0;
        if let Some(k) = o.keys {
            nkeys = k.count_ones();
            if nkeys == 0 {
                return Err(einval());
            }
            if 31 - k.leading_zeros() > KEY_MAX {
                return Err(KernelError::new(Errno::NotSupported));
            }
        }
        let mut ematches = o.ematches.clone().unwrap_or_default();
        ematches.validate()?;
        let existing = self.filters.iter().position(|f| f.handle == handle);
        let (mode, perturb, baseclass) = match existing {
            Some(i) => {
                let old = &self.filters[i];
                let mode = o.mode.unwrap_or(old.mode);
                if mode != MODE_HASH && nkeys > 1 {
                    return Err(einval());
                }
                let mut perturb = if mode == MODE_HASH { old.perturb } else { 0 };
                if let Some(p) = o.perturb {
                    if mode != MODE_HASH {
                        return Err(einval());
                    }
                    perturb = p;
                }
                (mode, perturb, o.baseclass.unwrap_or(old.baseclass))
            }
            None => {
                if handle == 0 || o.keys.is_none() {
                    return Err(einval());
                }
                let mode = o.mode.unwrap_or(MODE_MAP);
                if mode != MODE_HASH && nkeys > 1 {
                    return Err(einval());
                }
                let mut perturb = 0;
                if let Some(p) = o.perturb {
                    if mode != MODE_HASH {
                        return Err(einval());
                    }
                    perturb = p;
                }
                let mut base = o.baseclass.unwrap_or(0);
                if base & 0xffff_0000 == 0 {
                    base |= o.qdisc & 0xffff_0000;
                }
                if base & 0xffff == 0 {
                    base |= 1;
                }
                (mode, perturb, base)
            }
        };
        let exts = o.exts.instantiate(actions, now)?;
        let mut f = match existing {
            Some(i) => self.filters[i].clone(),
            None => {
                let mut rng = self.seed.unwrap_or(DEFAULT_SEED) ^ (handle as u64) << 32;
                let hashrnd = splitmix64(&mut rng) as u32;
                FlowFilter {
                    handle,
                    keymask: 0,
                    mode,
                    mask: u32::MAX,
                    xor: 0,
                    rshift: 0,
                    addend: 0,
                    divisor: 0,
                    baseclass,
                    perturb: 0,
                    ematches: EmatchTree::default(),
                    exts: Exts::default(),
                    hashrnd: Cell::new(hashrnd),
                    rng: Cell::new(rng),
                    next_perturb: Cell::new(None),
                }
            }
        };
        if let Some(k) = o.keys {
            f.keymask = k;
        }
        f.mode = mode;
        if let Some((m, x)) = o.mask_xor {
            f.mask = m;
            f.xor = x;
        }
        if let Some(r) = o.rshift {
            f.rshift = r;
        }
        if let Some(a) = o.addend {
            f.addend = a;
        }
        if let Some(d) = o.divisor {
            f.divisor = d;
        }
        if baseclass != 0 {
            f.baseclass = baseclass;
        }
        f.perturb = perturb;
        f.next_perturb
            .set((perturb != 0).then(|| now + perturb as u64 * NSEC_PER_SEC));
        f.ematches = ematches;
        let old = std::mem::replace(&mut f.exts, exts);
        match existing {
            Some(i) => {
                self.filters[i] = f;
                actions.release_bound(&old.actions);
            }
            None => self.filters.push(f),
        }
        Ok(())
    }

    /// `flow_delete`: returns whether the instance is now empty.
    pub fn delete(&mut self, handle: u32, actions: &mut ActionTable) -> bool {
        super::delete_from(&mut self.filters, handle, actions, |f| (f.handle, &f.exts))
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        super::destroy_all(&self.filters, actions, |f| (f.handle, &f.exts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values computed with the kernel's `jhash2` (the `__jhash_mix`/`__jhash_final` macros of
    /// include/linux/jhash.h compiled as C) for the same inputs.
    #[test]
    fn jhash2_matches_the_kernel() {
        assert_eq!(jhash2(&[], 0), 0xdead_beef);
        assert_eq!(jhash2(&[1], 0), JHASH_1_0);
        assert_eq!(jhash2(&[1, 2, 3, 4, 5], 0x1234_5678), JHASH_5);
    }
    const JHASH_1_0: u32 = 0x72a8_2a9b;
    const JHASH_5: u32 = 0x3444_de37;
}
