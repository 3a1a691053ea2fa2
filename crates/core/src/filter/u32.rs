//! u32, the universal 32-bit key classifier (`net/sched/cls_u32.c`, Alexey Kuznetsov).
//!
//! A u32 filter (a *key node*) holds up to 128 keys, each "the 32-bit word at byte offset OFF, under MASK,
//! equals VAL" — `match ip tos 0x10 0xff` is the word at 0 under 0x00ff0000 — and matches when every key
//! does. Offsets count from the network header, plus (for keys marked `nexthdr+`) a second offset that only
//! a link with `offset …` computes. A key that reads past the packet's bytes ends the whole classifier with
//! "no match" (the kernel's `goto out`), so a truncated or hostile packet can never match by accident.
//!
//! Key nodes live in *hash tables*. Every u32 instance has a root table (`800:` for the first of a block,
//! then `801:`, …) of one bucket; `tc filter add … handle 2: u32 divisor 256` makes more. A node with
//! `link 2:` does not decide: when its keys match, the walk descends into table 2:, choosing the bucket by
//! hashing the packet word at `hashkey … at OFF` under its mask (`u32_hash_fold`), optionally moving the
//! header offset (`offset at … mask … shift … eat`), and comes back up if nothing there matched. A node
//! with a classid (or actions) is *terminal*: a match ends the walk with its result, unless its actions
//! answer `continue`. Within a bucket nodes are tried in order of their node id (`800::800`, `800::801`).
//!
//! Tables are shared by all u32 instances of a block (`tc_u_common`): a node of `pref 98` may sit in a
//! table created at `pref 99`, and a listing of an instance shows every table of its preference. An
//! instance deleted takes its root table only: the tables made beside it stay, nodes and all, until
//! the block's last u32 instance goes (`u32_destroy`). Depth is limited to 7 links (`TC_U32_MAXDEPTH`).
//!
//! Not yet as the kernel: `tc_u_common_ptr` keys the common part by `block->q` unless the block is
//! shared (`ingress_block N`), so clsact's ingress and egress blocks, and a classful qdisc's own
//! block and its classes' blocks, share one; tclab keeps one per [`super::Block`]. Seen on this
//! machine (kernel 6.12, tc 6.1): a u32 at `ingress` after one at `egress` of a clsact is `fh 801:`
//! (tclab: 800:); under an HTB, a u32 at `parent 1:1` after one at `parent 1:` is 801: (tclab:
//! 800:), and `filter show parent 1:` and `parent 1:1` both list the two tables (`u32_walk` walks
//! the shared list by preference). Sharing it touches: `Block::u32_common` and every use of it in
//! `filter/mod.rs` (instance creation, change, get, delete, destroy, listing, `u32_nodes`,
//! classification), the qdiscs whose classes have blocks of their own (HTB, CBQ, HFSC) and
//! clsact's two blocks, the snapshot (a `Block` is saved as one byte string, so a common
//! part saved with each block decodes as copies), the one-device filter listing decoded from the
//! snapshot, `tclab check` (`shadowed.rs`, `u32hash.rs`) and the simulator's `scenario.rs`.

use super::{Exts, ExtsSpec, TcfResult, CLS_FLAGS_NOT_IN_HW, CLS_FLAGS_SKIP_SW, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::wire;
use crate::Nanos;
use std::cell::Cell;
use std::collections::BTreeMap;

pub const TC_U32_TERMINAL: u8 = 1;
pub const TC_U32_OFFSET: u8 = 2;
pub const TC_U32_VAROFFSET: u8 = 4;
pub const TC_U32_EAT: u8 = 8;
const TC_U32_MAXDEPTH: usize = 8;
pub const TC_U32_ROOT: u32 = 0xFFF0_0000;

pub const fn htid(h: u32) -> u32 {
    h & 0xFFF0_0000
}
pub const fn user_htid(h: u32) -> u32 {
    (h >> 20) & 0xFFF
}
pub const fn hash(h: u32) -> u32 {
    (h >> 12) & 0xFF
}
pub const fn node(h: u32) -> u32 {
    h & 0xFFF
}
pub const fn key(h: u32) -> u32 {
    h & 0xF_FFFF
}

/// `struct tc_u32_key`, in host order: the packet's big-endian word at `off` is compared under `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Key {
    pub val: u32,
    pub mask: u32,
    pub off: i32,
    /// 0, or -1 for `nexthdr+` (the offset computed by a link's `offset`).
    pub offmask: i32,
}

/// `struct tc_u32_sel`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sel {
    pub flags: u8,
    pub offshift: u8,
    pub off: i16,
    pub offoff: i16,
    pub offmask: u16,
    pub hmask: u32,
    pub hoff: i16,
    pub keys: Vec<Key>,
}

/// What `tc filter … u32 …` sends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct U32Options {
    /// `TCA_U32_HASH`: the table (and bucket) to put the node in.
    pub htid: Option<u32>,
    /// `TCA_U32_DIVISOR`: make a hash table of this many buckets.
    pub divisor: Option<u32>,
    pub classid: Option<u32>,
    pub link: Option<u32>,
    pub sel: Option<Sel>,
    /// `match mark VAL MASK`.
    pub mark: Option<(u32, u32)>,
    pub indev: Option<String>,
    pub flags: u32,
    pub exts: ExtsSpec,
}

/// A key node (`struct tc_u_knode`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Knode {
    pub handle: u32,
    pub sel: Sel,
    pub mark: Option<(u32, u32)>,
    pub classid: Option<u32>,
    pub link: Option<u32>,
    pub indev: Option<String>,
    pub flags: u32,
    pub exts: Exts,
    fshift: u32,
    /// `CONFIG_CLS_U32_PERF` counters (`tc -s`): nodes tried, nodes whose keys all matched, and per key how
    /// often it matched.
    pub rcnt: Cell<u64>,
    pub rhit: Cell<u64>,
    pub kcnts: Vec<Cell<u64>>,
}

/// A hash table (`struct tc_u_hnode`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Hnode {
    pub handle: u32,
    /// The preference of the instance that made it.
    pub prio: u32,
    /// Buckets − 1 (the kernel's `divisor`, used as a mask).
    pub divisor: u32,
    /// 1, plus one per node linking here.
    pub refcnt: u32,
    pub is_root: bool,
    /// Each bucket's nodes in list order, boxed: a table can hold thousands in one bucket, and a node
    /// inserted among them (ids below 800 once 800…fff are taken) shifts pointers, not nodes.
    pub buckets: Vec<Vec<Box<Knode>>>,
    /// Node handles allocated in this table (`handle_idr`). Kept apart from the buckets because they can
    /// disagree: past 4 095 nodes `gen_new_kid` hands out `…:fff` again without allocating it, so several
    /// nodes share that handle while the allocator holds it once.
    pub ids: NodeIds,
}

/// The tables of a block (`struct tc_u_common`), newest first as the kernel's `hlist`.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct U32Common {
    pub hts: Vec<Hnode>,
    /// How many u32 instances share these tables.
    pub instances: u32,
    /// `idr_alloc_cyclic`'s cursor for automatic table ids (1..0x7ff).
    next_id: u32,
}

/// One u32 instance: which table is its root.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct U32Tp {
    pub root: u32,
}

/// cls_u32's messages are `NL_SET_ERR_MSG_MOD`: the kernel prefixes them with the module's name.
fn einval(msg: &str) -> KernelError {
    KernelError::invalid(format!("cls_u32: {msg}"))
}

impl U32Common {
    fn ht(&self, handle: u32) -> Option<&Hnode> {
        self.hts.iter().find(|h| h.handle == handle)
    }
    fn ht_mut(&mut self, handle: u32) -> Option<&mut Hnode> {
        self.hts.iter_mut().find(|h| h.handle == handle)
    }

    /// `gen_new_htid`: the next free automatic table id, as `id << 20 | 0x80000000`.
    fn gen_new_htid(&mut self) -> Option<u32> {
        for _ in 0..0x7ff {
            let id = if self.next_id == 0 || self.next_id >= 0x7ff {
                1
            } else {
                self.next_id
            };
            self.next_id = id + 1;
            let h = 0x8000_0000 | (id << 20);
            if self.ht(h).is_none() {
                return Some(h);
            }
        }
        None
    }

    /// `u32_init`: a new instance and its root table. With every id taken (2 047 instances, or
    /// fewer beside hash tables) the kernel's `gen_new_htid` answers 0, so the root table's handle
    /// is 0: `u32_get` then finds it for the request's handle 0, and the add is refused as "Filter
    /// already exists" (EEXIST), the instance removed. It used to be 800: again, a second table of
    /// one handle.
    pub fn new_tp(&mut self, prio: u32) -> U32Tp {
        let handle = if self.instances == 0 && self.hts.is_empty() {
            0x8000_0000
        } else {
            self.gen_new_htid().unwrap_or(0)
        };
        self.instances += 1;
        self.hts.insert(
            0,
            Hnode {
                handle,
                prio,
                divisor: 0,
                refcnt: 1,
                is_root: true,
                buckets: vec![Vec::new()],
                ids: NodeIds::default(),
            },
        );
        U32Tp { root: handle }
    }

    /// `u32_destroy`: the instance's root table goes, with its nodes' actions. Tables made beside it
    /// (`divisor`) stay in the common part with their nodes, listed under any later instance of
    /// their preference and open to `ht` from any instance, as the kernel keeps them; everything
    /// goes with the last instance.
    pub fn destroy_tp(&mut self, tp: &U32Tp, actions: &mut ActionTable) {
        if let Some(i) = self.hts.iter().position(|h| h.handle == tp.root) {
            let h = self.hts.remove(i);
            for n in h.buckets.iter().flatten() {
                self.unlink(n);
                actions.release_bound(&n.exts.actions);
            }
        }
        self.instances = self.instances.saturating_sub(1);
        if self.instances == 0 {
            for n in self.hts.iter().flat_map(|h| h.buckets.iter().flatten()) {
                actions.release_bound(&n.exts.actions);
            }
            *self = U32Common::default();
        }
    }

    fn unlink(&mut self, n: &Knode) {
        if let Some(l) = n.link {
            if let Some(h) = self.ht_mut(l) {
                h.refcnt = h.refcnt.saturating_sub(1);
            }
        }
    }

    fn knodes(&self) -> usize {
        self.hts
            .iter()
            .flat_map(|h| h.buckets.iter())
            .map(Vec::len)
            .sum()
    }

    /// The tables and nodes an instance lists (`u32_walk`): its tables, each followed by its nodes.
    pub fn walk(&self, prio: u32) -> Vec<U32Entry<'_>> {
        let mut out = Vec::new();
        for h in self.hts.iter().filter(|h| h.prio == prio) {
            out.push(U32Entry::Table(h));
            for n in h.buckets.iter().flatten() {
                out.push(U32Entry::Node(n));
            }
        }
        out
    }
}

/// One line of `tc filter show` for u32.
#[derive(Clone, Copy, Debug)]
pub enum U32Entry<'a> {
    Table(&'a Hnode),
    Node(&'a Knode),
}

/// `u32_hash_fold`.
fn hash_fold(word: u32, sel: &Sel, fshift: u32) -> u32 {
    (word & sel.hmask) >> fshift
}

impl U32Tp {
    /// `u32_classify`.
    pub fn classify(
        &self,
        common: &U32Common,
        pkt: &mut Packet,
        cx: &mut Cx,
        res: &mut TcfResult,
    ) -> Control {
        // A stack of (table, bucket, node position, header offset) to come back to after a link: an
        // array of the most links can nest, as the kernel's, not a vector allocated per packet.
        #[derive(Clone, Copy)]
        struct Frame {
            ht: u32,
            bucket: usize,
            pos: usize,
            off: i64,
        }
        let mut stack = [Frame {
            ht: 0,
            bucket: 0,
            pos: 0,
            off: 0,
        }; TC_U32_MAXDEPTH - 1];
        let mut depth = 0;
        let mut ht_handle = self.root;
        let mut bucket = 0usize;
        let mut pos = 0usize;
        let mut off: i64 = 0;
        let mut off2: i64 = 0;
        loop {
            let Some(ht) = common.ht(ht_handle) else {
                return NO_MATCH;
            };
            let list = ht.buckets.get(bucket).map(Vec::as_slice).unwrap_or(&[]);
            let mut descended = false;
            while pos < list.len() {
                let n = &list[pos];
                pos += 1;
                if n.flags & CLS_FLAGS_SKIP_SW != 0 {
                    continue;
                }
                n.rcnt.set(n.rcnt.get() + 1);
                if let Some((val, mask)) = n.mark {
                    if pkt.mark & mask != val {
                        continue;
                    }
                }
                let mut all = true;
                for (j, k) in n.sel.keys.iter().enumerate() {
                    let toff = off + k.off as i64 + (off2 & k.offmask as i64);
                    let Some(word) = wire::be32(&pkt.data, toff) else {
                        return NO_MATCH;
                    };
                    if (word ^ k.val) & k.mask != 0 {
                        all = false;
                        break;
                    }
                    n.kcnts[j].set(n.kcnts[j].get() + 1);
                }
                if !all {
                    continue;
                }
                n.rhit.set(n.rhit.get() + 1);
                let Some(down) = n.link.and_then(|l| common.ht(l)) else {
                    if let Some(r) = terminal(n, pkt, cx, res) {
                        return r;
                    }
                    continue;
                };
                // PUSH: remember where to resume, then descend.
                if depth >= TC_U32_MAXDEPTH - 1 {
                    return NO_MATCH;
                }
                stack[depth] = Frame {
                    ht: ht_handle,
                    bucket,
                    pos,
                    off,
                };
                depth += 1;
                let mut sel = 0u32;
                if down.divisor != 0 {
                    let Some(word) = wire::be32(&pkt.data, off + n.sel.hoff as i64) else {
                        return NO_MATCH;
                    };
                    sel = down.divisor & hash_fold(word, &n.sel, n.fshift);
                }
                if n.sel.flags & (TC_U32_OFFSET | TC_U32_VAROFFSET) != 0 {
                    off2 = n.sel.off as i64 + 3;
                    if n.sel.flags & TC_U32_VAROFFSET != 0 {
                        let Some(w) = wire::be16(&pkt.data, off + n.sel.offoff as i64) else {
                            return NO_MATCH;
                        };
                        off2 += ((n.sel.offmask & w) >> n.sel.offshift) as i64;
                    }
                    off2 &= !3;
                }
                if n.sel.flags & TC_U32_EAT != 0 {
                    off += off2;
                    off2 = 0;
                }
                if n.sel.flags & (TC_U32_OFFSET | TC_U32_VAROFFSET | TC_U32_EAT) == 0
                    || off < pkt.data.len() as i64
                {
                    ht_handle = down.handle;
                    bucket = sel as usize;
                    pos = 0;
                    descended = true;
                    break;
                }
                // The new offset is past the packet: come straight back up.
                depth -= 1;
                off = stack[depth].off;
                if let Some(r) = terminal(n, pkt, cx, res) {
                    return r;
                }
            }
            if descended {
                continue;
            }
            // POP: back to the node that linked here; it may itself be terminal.
            if depth == 0 {
                return NO_MATCH;
            }
            depth -= 1;
            let f = stack[depth];
            ht_handle = f.ht;
            bucket = f.bucket;
            pos = f.pos;
            off = f.off;
            let n = common
                .ht(ht_handle)
                .and_then(|h| h.buckets.get(bucket))
                .and_then(|b| b.get(pos - 1));
            if let Some(n) = n {
                if let Some(r) = terminal(n, pkt, cx, res) {
                    return r;
                }
            }
        }
    }

    /// `u32_get`: a table (`2:`) or a node (`2:0:801`).
    pub fn get(&self, common: &U32Common, handle: u32) -> bool {
        let ht = if htid(handle) == TC_U32_ROOT {
            common.ht(self.root)
        } else {
            common.ht(htid(handle))
        };
        let Some(ht) = ht else { return false };
        if key(handle) == 0 {
            return true;
        }
        ht.buckets.iter().flatten().any(|n| n.handle == handle)
    }

    /// `u32_change`.
    pub fn change(
        &mut self,
        common: &mut U32Common,
        prio: u32,
        handle: u32,
        opts: Option<&U32Options>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let Some(o) = opts else {
            if handle != 0 {
                return Err(einval("Filter handle requires options"));
            }
            return Ok(());
        };
        if o.flags & !(CLS_FLAGS_SKIP_SW | 1) != 0 || o.flags == 3 {
            return Err(einval("Invalid filter flags"));
        }
        if o.flags & CLS_FLAGS_SKIP_SW != 0 {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Filter HW offload failed - classifier without re-offloading support",
            ));
        }
        if self.get(common, handle) && handle != 0 {
            return self.change_existing(common, handle, o, actions, now);
        }
        if let Some(divisor) = o.divisor {
            if !divisor.is_power_of_two() {
                return Err(einval("Divisor is not a power of 2"));
            }
            if divisor > 0x100 {
                return Err(einval("Exceeded maximum 256 hash buckets"));
            }
            if key(handle) != 0 {
                return Err(einval("Divisor can only be used on a hash table"));
            }
            let h = if handle == 0 {
                common
                    .gen_new_htid()
                    .ok_or_else(|| KernelError::new(Errno::NoBuffers))?
            } else {
                if common.ht(handle).is_some() {
                    return Err(KernelError::new(Errno::NoSpace));
                }
                handle
            };
            common.hts.insert(
                0,
                Hnode {
                    handle: h,
                    prio,
                    divisor: divisor - 1,
                    refcnt: 1,
                    is_root: false,
                    buckets: vec![Vec::new(); divisor as usize],
                    ids: NodeIds::default(),
                },
            );
            return Ok(());
        }
        let (ht_handle, hid) = match o.htid {
            Some(h) if htid(h) == TC_U32_ROOT => (self.root, self.root),
            Some(h) => {
                let ht = common
                    .ht(htid(h))
                    .ok_or_else(|| einval("Specified hash table not found"))?;
                (ht.handle, h)
            }
            None => (self.root, self.root),
        };
        let ht = common.ht(ht_handle).expect("found above");
        if ht.divisor < hash(hid) {
            return Err(einval(
                "Specified hash table buckets exceed configured value",
            ));
        }
        let hid = hid & 0xFFFF_F000;
        let bucket = hash(hid) as usize;
        let new_handle = if handle != 0 {
            if htid(handle) != 0 && htid(handle ^ hid) != 0 {
                return Err(einval("Handle specified hash table address mismatch"));
            }
            // The handle's bucket is ignored: the bucket comes from `ht` (u32_change in 6.12).
            let h = hid | node(handle);
            if ht.ids.contains(h) {
                return Err(KernelError::new(Errno::NoSpace));
            }
            h
        } else {
            gen_new_kid(&ht.ids, hid)
        };
        let sel = o
            .sel
            .clone()
            .ok_or_else(|| einval("Selector not specified"))?;
        let down = Self::check_link(common, o.link)?;
        if let Some(l) = down {
            if let Some(h) = common.ht_mut(l) {
                h.refcnt += 1;
            }
        }
        let exts = match o.exts.instantiate(actions, now) {
            Ok(e) => e,
            Err(e) => {
                if let Some(h) = down.and_then(|l| common.ht_mut(l)) {
                    h.refcnt -= 1;
                }
                return Err(e);
            }
        };
        let fshift = if sel.hmask != 0 {
            sel.hmask.trailing_zeros()
        } else {
            0
        };
        let n = Knode {
            handle: new_handle,
            fshift,
            rcnt: Cell::new(0),
            rhit: Cell::new(0),
            kcnts: vec![Cell::new(0); sel.keys.len()],
            sel,
            mark: o.mark,
            classid: o.classid,
            link: down,
            indev: o.indev.clone(),
            flags: o.flags | CLS_FLAGS_NOT_IN_HW,
            exts,
        };
        let ht = common.ht_mut(ht_handle).expect("found above");
        ht.ids.insert(new_handle);
        let list = &mut ht.buckets[bucket];
        // Sorted by node id; a node sharing its id (past 4 095) goes after the others.
        let at = list.partition_point(|p| node(p.handle) <= node(new_handle));
        list.insert(at, Box::new(n));
        Ok(())
    }

    fn check_link(common: &U32Common, link: Option<u32>) -> Result<Option<u32>, KernelError> {
        match link {
            None | Some(0) => Ok(None),
            Some(l) => {
                if key(l) != 0 {
                    return Err(einval("u32 Link handle must be a hash table"));
                }
                let h = common
                    .ht(l)
                    .ok_or_else(|| einval("Link hash table not found"))?;
                if h.is_root {
                    return Err(einval("Not linking to root node"));
                }
                Ok(Some(l))
            }
        }
    }

    /// Changing an existing node keeps its selector; classid, link, actions and indev may change.
    fn change_existing(
        &mut self,
        common: &mut U32Common,
        handle: u32,
        o: &U32Options,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        if key(handle) == 0 {
            return Err(einval("Key node id cannot be zero"));
        }
        let (ht_handle, bucket, pos, flags) = locate(common, handle).expect("get() found it");
        if (flags ^ o.flags) & !(4 | CLS_FLAGS_NOT_IN_HW) != 0 {
            return Err(einval("Key node flags do not match passed flags"));
        }
        let new_link = match o.link {
            Some(_) => Some(Self::check_link(common, o.link)?),
            None => None,
        };
        let exts = o.exts.instantiate(actions, now)?;
        let ht = common.ht_mut(ht_handle).expect("located");
        let n = &mut ht.buckets[bucket][pos];
        let old_actions = std::mem::replace(&mut n.exts, exts);
        if o.classid.is_some() {
            n.classid = o.classid;
        }
        if o.indev.is_some() {
            n.indev = o.indev.clone();
        }
        let old_link = match new_link {
            Some(l) => std::mem::replace(&mut n.link, l),
            None => None,
        };
        if let Some(Some(l)) = new_link {
            if let Some(h) = common.ht_mut(l) {
                h.refcnt += 1;
            }
        }
        if let Some(l) = old_link {
            if let Some(h) = common.ht_mut(l) {
                h.refcnt -= 1;
            }
        }
        actions.release_bound(&old_actions.actions);
        Ok(())
    }

    /// `u32_delete`: a node, or a table nobody links to. Returns whether the instance is now empty and
    /// should go (`*last`).
    pub fn delete(
        &mut self,
        common: &mut U32Common,
        _prio: u32,
        handle: u32,
        actions: &mut ActionTable,
    ) -> Result<bool, KernelError> {
        if key(handle) != 0 {
            if let Some((h, b, p, _)) = locate(common, handle) {
                let ht = common.ht_mut(h).expect("located");
                let n = ht.buckets[b].remove(p);
                ht.ids.remove(n.handle);
                common.unlink(&n);
                actions.release_bound(&n.exts.actions);
            }
        } else {
            let h = if htid(handle) == TC_U32_ROOT {
                self.root
            } else {
                htid(handle)
            };
            let ht = common
                .ht(h)
                .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
            if ht.is_root {
                return Err(einval("Not allowed to delete root node"));
            }
            if ht.refcnt > 1 {
                return Err(KernelError::msg(
                    Errno::Busy,
                    "cls_u32: Can not delete in-use filter",
                ));
            }
            let i = common
                .hts
                .iter()
                .position(|x| x.handle == h)
                .expect("found");
            let ht = common.hts.remove(i);
            for n in ht.buckets.iter().flatten() {
                common.unlink(n);
                actions.release_bound(&n.exts.actions);
            }
        }
        Ok(common.instances == 1 && common.knodes() == 0)
    }
}

/// Where a node sits: table, bucket, position, flags.
fn locate(common: &U32Common, handle: u32) -> Option<(u32, usize, usize, u32)> {
    for h in &common.hts {
        for (b, list) in h.buckets.iter().enumerate() {
            if let Some(p) = list.iter().position(|n| n.handle == handle) {
                return Some((h.handle, b, p, list[p].flags));
            }
        }
    }
    None
}

/// A table's allocated node handles (`handle_idr`): per bucket (`hid`), a bitmap of the 4 096 node ids,
/// so that finding the lowest free one costs 64 word tests however full the table is.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct NodeIds(#[serde(with = "crate::snapshot::words::map")] BTreeMap<u32, Box<[u64; 64]>>);

impl NodeIds {
    fn split(handle: u32) -> (u32, usize) {
        (handle & 0xFFFF_F000, node(handle) as usize)
    }
    pub fn contains(&self, handle: u32) -> bool {
        let (hid, id) = Self::split(handle);
        self.0
            .get(&hid)
            .is_some_and(|b| b[id / 64] >> (id % 64) & 1 == 1)
    }
    pub fn insert(&mut self, handle: u32) {
        let (hid, id) = Self::split(handle);
        self.0.entry(hid).or_insert_with(|| Box::new([0; 64]))[id / 64] |= 1 << (id % 64);
    }
    pub fn remove(&mut self, handle: u32) {
        let (hid, id) = Self::split(handle);
        if let Some(b) = self.0.get_mut(&hid) {
            b[id / 64] &= !(1 << (id % 64));
        }
    }
    /// The lowest id in `from..=0xfff` not allocated in bucket `hid`.
    fn lowest_free(&self, hid: u32, from: usize) -> Option<u32> {
        let Some(bits) = self.0.get(&hid) else {
            return Some(hid | from as u32);
        };
        (from / 64..64).find_map(|w| {
            // Ids below `from` in its word count as taken.
            let below = if w == from / 64 {
                (1u64 << (from % 64)) - 1
            } else {
                0
            };
            let free = !(bits[w] | below);
            (free != 0).then(|| hid | (w * 64 + free.trailing_zeros() as usize) as u32)
        })
    }
}

/// `gen_new_kid`: the lowest free node id from `0x800`, else from 1; when all 4 095 are taken the kernel
/// falls back to `0xfff` without allocating it, so the new node shares that handle with the one holding it
/// (checked against this machine's kernel in `crates/cli/tests/kernel_parity.rs`).
fn gen_new_kid(ids: &NodeIds, hid: u32) -> u32 {
    ids.lowest_free(hid, 0x800)
        .or_else(|| ids.lowest_free(hid, 1))
        .unwrap_or(hid | 0xfff)
}

/// The terminal step of a matched node: its result and actions, or `None` to go on to the next node.
fn terminal(n: &Knode, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Option<Control> {
    if n.sel.flags & TC_U32_TERMINAL == 0 {
        return None;
    }
    res.classid = n.classid.unwrap_or(0);
    if n.indev.is_some() {
        // tclab packets carry no input device, so an `indev` filter never matches (`tcf_match_indev`).
        return None;
    }
    let r = n.exts.exec(pkt, cx);
    (r >= 0).then_some(r)
}
