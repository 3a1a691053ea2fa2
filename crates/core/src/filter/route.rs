//! route, the routing-realm classifier (`net/sched/cls_route.c`).
//!
//! A route decision carries a *realm* pair in its `dst->tclassid`: the destination realm in the low 16
//! bits (`ip route add … realm 10`), the source realm in the high 16 (`ip rule … realms 1/`). A route
//! filter matches `to REALM` (0..255), `from REALM` (0..255) or `fromif DEV` (the input interface), each
//! alone or `to` with one of the others, and its handle is built from them: `to` in the low byte (or
//! 0x8000 for "any destination"), `from` in bits 16..23, `fromif` as `(0x8000 | ifindex) << 16`, and
//! 0xffff << 16 for "any source".
//!
//! Filters sit in the kernel's two-level table: 257 destination buckets (`to_hash`: the realm, or 256 for
//! any), each with 33 lists (`from_hash`: 16 by source realm, 16 by interface, one wildcard), every list
//! sorted by handle. `route4_classify` looks in the packet's destination bucket at the source list, then
//! the interface list, then the wildcards, and then does the same in the any-destination bucket — so
//! "to TAG from ANY" wins over "to ANY from TAG". It keeps the kernel's one oddity in the interface list:
//! filters are stored under `iif & 0xf` but looked up under `(iif >> 16) & 0xf`, so for any real
//! interface index only the list of indexes divisible by 16 is searched ([`RouteHead::lookup`]).
//!
//! The route is the packet's [`Packet::route`] (`skb_dst`): the simulator attaches one where it routes
//! a packet (its realms from the node's `ip route … realm` lines, and for a forwarded packet the
//! interface it came in on). A packet without one — at an ingress hook, before routing, or off a live
//! wire — does not match, as `route4_classify` answers for a NULL `skb_dst`. The fastmap in front of the
//! kernel's table only caches answers, so it is left out.

use super::{Exts, ExtsSpec, TcfResult, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;

/// What `tc filter … route …` sends (`TCA_ROUTE4_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteOptions {
    pub to: Option<u32>,
    pub from: Option<u32>,
    /// `fromif`: the interface's index, and its name for the listing (`ll_index_to_name`).
    pub fromif: Option<(u32, String)>,
    pub classid: Option<u32>,
    pub exts: ExtsSpec,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RouteFilter {
    pub handle: u32,
    /// `to | from << 16` (what the lookup compares with the route's realms).
    pub id: u32,
    /// The input interface's index (`fromif`), 0 otherwise.
    pub iif: u32,
    pub iif_name: Option<String>,
    pub classid: Option<u32>,
    pub exts: Exts,
}

impl RouteFilter {
    /// The destination realm the dump reports (`TCA_ROUTE4_TO`), if the filter has one.
    pub fn to(&self) -> Option<u32> {
        (self.handle & 0x8000 == 0).then_some(self.id & 0xff)
    }
    /// The source realm the dump reports (`TCA_ROUTE4_FROM`), if the filter has one.
    pub fn from(&self) -> Option<u32> {
        (self.handle & 0x8000_0000 == 0).then_some(self.id >> 16)
    }
    /// Whether the dump reports `TCA_ROUTE4_IIF`.
    pub fn has_iif(&self) -> bool {
        self.handle & 0x8000_0000 != 0 && self.handle >> 16 != 0xffff
    }
}

/// `to_hash`: the destination bucket of a handle (256 for any destination).
fn to_hash(handle: u32) -> u32 {
    (handle & 0xff) + if handle & 0x8000 != 0 { 256 } else { 0 }
}

/// `from_hash` of `handle >> 16`: the list within the bucket (32 for the wildcard).
fn from_hash(id: u32) -> u32 {
    let id = id & 0xffff;
    if id == 0xffff {
        32
    } else if id & 0x8000 == 0 {
        if id > 255 {
            256
        } else {
            id & 0xf
        }
    } else {
        16 + (id & 0xf)
    }
}

/// The instance (`struct route4_head`), its filters kept in the kernel's walk order: by destination
/// bucket, then list, then handle.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RouteHead {
    pub filters: Vec<RouteFilter>,
}

fn place(handle: u32) -> (u32, u32) {
    (to_hash(handle), from_hash(handle >> 16))
}

impl RouteHead {
    /// `route4_classify`: the first filter of the lookup for the packet's route whose actions do not
    /// answer with a negative code (`ROUTE4_APPLY_RESULT`); no match without a route.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        let Some(rt) = pkt.route() else {
            return NO_MATCH;
        };
        for f in self.lookup(rt.tclassid, rt.iif) {
            res.classid = f.classid.unwrap_or(0);
            let r = f.exts.exec(pkt, cx);
            if r >= 0 {
                return r;
            }
        }
        NO_MATCH
    }

    /// `route4_classify`'s walk for a route whose `tclassid` is `id` and whose input interface is `iif`:
    /// the filters to try, in order, until one's actions do not answer with a negative code.
    pub fn lookup(&self, id: u32, iif: u32) -> Vec<&RouteFilter> {
        let mut out = Vec::new();
        let mut id = id;
        let mut h = id & 0xff;
        loop {
            let list = |h2: u32| {
                self.filters
                    .iter()
                    .filter(move |f| place(f.handle) == (h, h2))
            };
            let from = list((id >> 16) & 0xf).filter(|f| f.id == id);
            let by_iif = list(16 + ((iif >> 16) & 0xf)).filter(|f| f.iif == iif);
            out.extend(from.chain(by_iif).chain(list(32)));
            if h >= 256 {
                return out;
            }
            h = 256;
            id &= !0xffff;
        }
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.handle == handle)
    }

    /// `route4_change` and `route4_set_parms`.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&RouteOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        if handle == 0 {
            return Err(KernelError::invalid("Creating with handle of 0 is invalid"));
        }
        let Some(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let fold = self.filters.iter().position(|f| f.handle == handle);
        let new = fold.is_none();
        let mut nhandle = 0x8000;
        let mut to = 0;
        if let Some(t) = o.to {
            if new && handle & 0x8000 != 0 {
                return Err(KernelError::invalid("Invalid handle"));
            }
            if t > 0xff {
                return Err(KernelError::invalid("Invalid to"));
            }
            to = t;
            nhandle = t;
        }
        if o.from.is_some() && o.fromif.is_some() {
            return Err(KernelError::invalid(
                "'from' and 'fromif' are mutually exclusive",
            ));
        }
        let mut iif = fold.map_or(0, |i| self.filters[i].iif);
        let mut id = fold.map_or(0, |i| self.filters[i].id);
        if let Some(from) = o.from {
            if from > 0xff {
                return Err(KernelError::invalid("Invalid from"));
            }
            nhandle |= from << 16;
            id = to | from << 16;
        } else if let Some((i, _)) = &o.fromif {
            if *i > 0x7fff {
                return Err(KernelError::invalid("Invalid iif"));
            }
            nhandle |= (i | 0x8000) << 16;
            iif = *i;
        } else {
            nhandle |= 0xffff << 16;
        }
        if o.to.is_some() && o.from.is_none() {
            id = to;
        }
        if new {
            nhandle |= handle & 0x7f00;
            if nhandle != handle {
                return Err(KernelError::invalid(format!(
                    "Handle mismatch constructed: {nhandle:x} (expected: {handle:x})"
                )));
            }
        }
        // A replacement is checked against the list it moves to for a filter with its *old* handle — the
        // filter itself when nothing moved, so the kernel refuses it (`File exists`).
        if let Some(i) = fold {
            let old = self.filters[i].handle;
            if self
                .filters
                .iter()
                .any(|f| place(f.handle) == place(nhandle) && f.handle == old)
            {
                return Err(KernelError::new(Errno::Exists));
            }
        }
        let exts = o.exts.instantiate(actions, now)?;
        let f = RouteFilter {
            handle: nhandle,
            id,
            iif,
            iif_name: o
                .fromif
                .as_ref()
                .map(|(_, n)| n.clone())
                .or_else(|| fold.and_then(|i| self.filters[i].iif_name.clone())),
            classid: o.classid,
            exts,
        };
        if let Some(i) = fold {
            let old = self.filters.remove(i);
            actions.release_bound(&old.exts.actions);
        }
        // Before the first filter of a later list, or of the same list with a larger handle.
        let key = (place(nhandle), nhandle);
        let at = self
            .filters
            .iter()
            .position(|g| (place(g.handle), g.handle) > key)
            .unwrap_or(self.filters.len());
        self.filters.insert(at, f);
        Ok(())
    }

    /// `route4_delete`: returns whether the instance is now empty.
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

    fn head(filters: &[(Option<u32>, Option<u32>, Option<u32>)]) -> RouteHead {
        let mut h = RouteHead::default();
        let mut t = ActionTable::default();
        for &(to, from, iif) in filters {
            // f_route.c's handle arithmetic.
            let mut fh: u32 = 0xffff_8000;
            if let Some(to) = to {
                fh &= !0x80ff;
                fh |= to & 0xff;
            }
            if let Some(from) = from {
                fh &= 0xffff;
                fh |= from << 16;
            }
            if let Some(i) = iif {
                fh &= 0xffff;
                fh |= (0x8000 | i) << 16;
            }
            let o = RouteOptions {
                to,
                from,
                fromif: iif.map(|i| (i, format!("if{i}"))),
                classid: Some(fh),
                ..Default::default()
            };
            h.change(fh, Some(&o), &mut t, 0).unwrap();
        }
        h
    }

    fn handles(v: Vec<&RouteFilter>) -> Vec<u32> {
        v.iter().map(|f| f.handle).collect()
    }

    #[test]
    fn handles_as_tc_builds_them() {
        // tdc e122 and b042: `from 1 to 10` is 0x0001000a, `from 10` alone 0x000a8000, `to 10` alone
        // 0xffff000a, `fromif` (index 3) 0x8003000a.
        let h = head(&[
            (Some(10), Some(1), None),
            (None, Some(10), None),
            (Some(10), None, None),
            (Some(10), None, Some(3)),
        ]);
        let mut hs: Vec<u32> = h.filters.iter().map(|f| f.handle).collect();
        hs.sort();
        assert_eq!(hs, [0x0001_000a, 0x000a_8000, 0x8003_000a, 0xffff_000a]);
        let f = h.filters.iter().find(|f| f.handle == 0x0001_000a).unwrap();
        assert_eq!((f.to(), f.from(), f.has_iif()), (Some(10), Some(1), false));
        let f = h.filters.iter().find(|f| f.handle == 0xffff_000a).unwrap();
        assert_eq!((f.to(), f.from(), f.has_iif()), (Some(10), None, false));
        let f = h.filters.iter().find(|f| f.handle == 0x8003_000a).unwrap();
        assert_eq!((f.to(), f.from(), f.has_iif()), (Some(10), None, true));
    }

    #[test]
    fn walk_order_is_bucket_list_handle() {
        // Bucket 2 (to 2) before bucket 256 (any); in bucket 2 the source list 0 (from 16) before list
        // 4 (from 4), before the wildcard list.
        let h = head(&[
            (None, Some(1), None),
            (Some(2), None, None),
            (Some(2), Some(4), None),
            (Some(2), Some(16), None),
        ]);
        let hs: Vec<u32> = h.filters.iter().map(|f| f.handle).collect();
        assert_eq!(hs, [0x0010_0002, 0x0004_0002, 0xffff_0002, 0x0001_8000]);
    }

    #[test]
    fn lookup_prefers_destination_then_source() {
        let h = head(&[
            (None, Some(1), None),     // to any from 1
            (Some(10), None, None),    // to 10 from any
            (Some(10), Some(1), None), // to 10 from 1
        ]);
        // Route realms 1/10: to 10 from 1, then to 10 from any, then (any bucket) to any from 1.
        assert_eq!(
            handles(h.lookup(1 << 16 | 10, 5)),
            [0x0001_000a, 0xffff_000a, 0x0001_8000]
        );
        // Realms 2/10: only "to 10 from any".
        assert_eq!(handles(h.lookup(2 << 16 | 10, 5)), [0xffff_000a]);
        // Realms 1/3: bucket 3 is empty; the any-destination bucket compares the route's id with its
        // destination cleared (1 << 16) and "from 1" stored as 1 << 16: it matches.
        assert_eq!(handles(h.lookup(1 << 16 | 3, 5)), [0x0001_8000]);
    }

    #[test]
    fn classify_reads_the_packets_route() {
        // Each filter's classid is its handle (see `head`).
        let h = head(&[(None, Some(1), None), (Some(10), Some(1), None)]);
        let (mut cx, mut res) = (Cx::new(0), TcfResult::default());
        let mut p = Packet::of_len(100);
        // No skb_dst (before routing, at ingress): no match, whatever the filters.
        assert_eq!(h.classify(&mut p, &mut cx, &mut res), NO_MATCH);
        p.set_route(Some(crate::packet::Route {
            tclassid: 1 << 16 | 10,
            iif: 0,
        }));
        assert_eq!(
            h.classify(&mut p, &mut cx, &mut res),
            crate::action::TC_ACT_OK
        );
        assert_eq!(res.classid, 0x0001_000a);
        // Realms 1/3: only "from 1" (any destination).
        p.set_route(Some(crate::packet::Route {
            tclassid: 1 << 16 | 3,
            iif: 0,
        }));
        h.classify(&mut p, &mut cx, &mut res);
        assert_eq!(res.classid, 0x0001_8000);
        // A route without realms matches neither.
        p.set_route(Some(crate::packet::Route::default()));
        assert_eq!(h.classify(&mut p, &mut cx, &mut res), NO_MATCH);
    }

    #[test]
    fn fromif_is_looked_up_in_the_list_of_iif_high_bits() {
        // Stored under 16 + (iif & 0xf), looked up under 16 + ((iif >> 16) & 0xf): index 16 is found,
        // index 3 is not (the kernel's own behaviour).
        let h = head(&[(Some(10), None, Some(16)), (Some(10), None, Some(3))]);
        assert_eq!(handles(h.lookup(10, 16)), [0x8010_000a]);
        assert!(h.lookup(10, 3).is_empty());
    }

    #[test]
    fn refusals() {
        let mut h = RouteHead::default();
        let mut t = ActionTable::default();
        let o = RouteOptions {
            from: Some(5),
            ..Default::default()
        };
        assert_eq!(
            h.change(0, Some(&o), &mut t, 0).unwrap_err().to_string(),
            "Error: Creating with handle of 0 is invalid."
        );
        // A handle that does not agree with the keys.
        let e = h.change(0x0006_8000, Some(&o), &mut t, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Error: Handle mismatch constructed: 58000 (expected: 68000)."
        );
        h.change(0x0005_8000, Some(&o), &mut t, 0).unwrap();
        // Replacing it with the same keys finds itself in its list: File exists.
        let e = h.change(0x0005_8000, Some(&o), &mut t, 0).unwrap_err();
        assert_eq!(e.errno, crate::error::Errno::Exists);
        let both = RouteOptions {
            from: Some(1),
            fromif: Some((2, "eth0".into())),
            ..Default::default()
        };
        assert!(h.change(0x8002_8000, Some(&both), &mut t, 0).is_err());
        assert_eq!(h.filters.len(), 1);
    }
}
