//! Route filters against the policy's routes: `route to 10` matches packets whose route carries realm
//! 10, and only `ip route … realm` sets one. A realm no route of the policy sets is a filter that never
//! matches in the simulator, most often a typo or a route line left out. The same for the other reader
//! of realms, `meta(rt_classid … eq V)` in a basic or cgroup filter's ematch tree, where every packet
//! the filter takes must pass it (the tree's top level a conjunction, the match not inverted).
//!
//! What a route gives a packet (`dst->tclassid`, as `ip_route_input_slow` and `rt_set_nexthop` build
//! it): its own `nh_tclassid` (destination realm in the low 16 bits, a `realms FROM/TO` source realm
//! in the high 16); when that has no source realm, a forwarded packet gets the destination realm of
//! the route back to its source (`fib_validate_source`'s itag, through `set_class_tag`). Every
//! destination without a realm route has realm 0 (`cosmos`). `route4_classify` then compares: `to R`
//! the low byte, `from R` alone the high 16 bits, `to R from S` the whole value.
//!
//! Only a policy with route records is checked: one without any takes its realms from the box's own
//! routing table, configured elsewhere, which tclab does not see. A live box's routes beyond the
//! policy's are not seen either, so the finding says so. Filters at the ingress hook are left out:
//! there the packet has no route yet, whatever the realms.

use super::{DevCx, Finding};
use tclab_core::fib::Fib;
use tclab_core::filter::ematch::{
    meta_id, EmKind, EmatchTree, META_TYPE_INT, OPND_EQ, REL_AND, REL_END,
};
use tclab_core::filter::route::RouteFilter;
use tclab_core::filter::Classifier;
use tclab_core::Handle;

pub(super) fn check(cx: &DevCx, fib: &Fib, out: &mut Vec<Finding>) {
    if fib.routes().is_empty() {
        return;
    }
    let realms = Realms::of(fib);
    for &(parent, b) in &cx.blocks {
        if parent == Handle(0xffff_0000) {
            continue;
        }
        for chain in b.reachable_chains() {
            for tp in b.chains.get(&chain).into_iter().flatten() {
                let trees: Vec<&EmatchTree> = match &tp.cls {
                    Classifier::Route(head) => {
                        for f in &head.filters {
                            if let Some(finding) = unset(cx, &realms, parent, tp.prio, f) {
                                out.push(finding);
                            }
                        }
                        continue;
                    }
                    Classifier::Basic(head) => head.filters.iter().map(|f| &f.ematches).collect(),
                    Classifier::Cgroup(head) => head.filter.iter().map(|f| &f.ematches).collect(),
                    _ => continue,
                };
                for tree in trees {
                    for m in required_rt_classid(tree) {
                        if !realms.every().any(|t| m.reads(t)) {
                            let kind = tp.cls.kind();
                            out.push(meta_unset(cx, &realms, parent, tp.prio, kind, &m));
                        }
                    }
                }
            }
        }
    }
}

/// The `tclassid` values the policy's routes can give a packet, taken apart as the filters read them.
struct Realms {
    /// Each route's `nh_tclassid`, and 0 for a destination no realm route covers (taken to exist: a
    /// default route with a realm is rare, and the rule errs toward saying nothing).
    routes: Vec<u32>,
}

impl Realms {
    fn of(fib: &Fib) -> Realms {
        let mut routes: Vec<u32> = std::iter::once(0)
            .chain(fib.routes().iter().map(|r| r.tclassid))
            .collect();
        routes.sort_unstable();
        routes.dedup();
        Realms { routes }
    }

    /// Some route has this destination realm in its low byte (`route4_classify`'s bucket).
    fn to(&self, to: u32) -> bool {
        self.routes.iter().any(|&t| t & 0xff == to)
    }

    /// The high 16 bits of some packet's `tclassid` are `from`: a route's own source realm, or,
    /// where the route has none, the destination realm of a route back to the source.
    fn from(&self, from: u32) -> bool {
        self.routes
            .iter()
            .any(|&t| t >> 16 == from || t & 0xffff == from)
    }

    /// Some packet's `tclassid` is exactly `id` (`to R from S`).
    fn exactly(&self, id: u32) -> bool {
        self.every().any(|t| t == id)
    }

    /// Every `tclassid` a packet can carry: each route's own (a host's packets: an output route
    /// has no source realm), and for a route without a source realm, that route's with each
    /// route's destination realm as the source (a forwarded packet's).
    fn every(&self) -> impl Iterator<Item = u32> + '_ {
        self.routes.iter().flat_map(move |&t| {
            let sources = (t >> 16 == 0).then(|| self.routes.iter().map(move |&s| t | s << 16));
            std::iter::once(t).chain(sources.into_iter().flatten())
        })
    }

    /// The realms the routes set, as `ip route` lists them: the first eight, and how many more.
    fn listed(&self) -> String {
        let set: Vec<u32> = self.routes.iter().copied().filter(|&t| t != 0).collect();
        let mut s: Vec<String> = set.iter().take(8).map(|&t| realm_words(t)).collect();
        if set.len() > 8 {
            s.push(format!("{} more", set.len() - 8));
        }
        s.join(", ")
    }
}

/// A route's realms as `ip route` lists them: `realm 5`, `realms 2/5`.
fn realm_words(t: u32) -> String {
    if t >> 16 == 0 {
        format!("realm {}", t & 0xffff)
    } else {
        format!("realms {}/{}", t >> 16, t & 0xffff)
    }
}

/// `meta(rt_classid [shift S] [mask M] eq V)`: what the match compares (`meta_get`: the value
/// shifted, then masked when the mask is not 0).
struct RtClassid {
    shift: u8,
    mask: u32,
    value: u32,
}

impl RtClassid {
    fn reads(&self, tclassid: u32) -> bool {
        let mut x = tclassid.checked_shr(self.shift as u32).unwrap_or(0);
        if self.mask != 0 {
            x &= self.mask;
        }
        x == self.value
    }

    fn words(&self) -> String {
        let mut w = String::from("meta(rt_classid ");
        if self.shift != 0 {
            w.push_str(&format!("shift {} ", self.shift));
        }
        if self.mask != 0 {
            w.push_str(&format!("mask {:#x} ", self.mask));
        }
        w + &format!("eq {})", self.value)
    }
}

/// The `meta(rt_classid … eq V)` matches every packet the tree takes must pass: those at its top
/// level, not inverted, where the top level is a conjunction (an `or` there makes none of them
/// required; containers are not looked into).
fn required_rt_classid(tree: &EmatchTree) -> Vec<RtClassid> {
    let mut out = Vec::new();
    for m in &tree.matches {
        if let EmKind::Meta(mt) = &m.kind {
            let (l, r) = (&mt.left, &mt.right);
            if !m.inverted()
                && l.id() == meta_id::RTCLASSID
                && l.typ() == META_TYPE_INT
                && r.id() == meta_id::VALUE
                && r.typ() == META_TYPE_INT
                && l.op == OPND_EQ
            {
                out.push(RtClassid {
                    shift: l.shift,
                    mask: l.int,
                    value: r.int,
                });
            }
        }
        match m.relation() {
            REL_END => return out,
            REL_AND => {}
            _ => return Vec::new(),
        }
    }
    out
}

fn meta_unset(
    cx: &DevCx,
    realms: &Realms,
    parent: Handle,
    pref: u32,
    kind: &str,
    m: &RtClassid,
) -> Finding {
    let record = cx.origins.filter(cx.name, parent, Some(pref));
    Finding::new(
        "realm-unset",
        format!("{} filter parent {parent} pref {pref} {kind} {}", cx.name, m.words()),
        format!(
            "every packet it takes must pass `{}`, but no route of the policy gives a packet realms \
             that pass it: the policy's routes set {}, and every other destination has realm 0 (cosmos); \
             in the simulator the filter never matches. A live box's own routes are not in the \
             policy: if its routing table gives that value, the filter matches there",
            m.words(),
            realms.listed()
        ),
        "give the route those realms (`ip route replace PREFIX via GW realm R`, or `realms S/R`), or \
         correct the match to a value the routes give",
    )
    .line(record.map(|r| r.at.as_str()))
}

/// The finding for a filter whose realms no route of the policy gives, if it is one.
fn unset(
    cx: &DevCx,
    realms: &Realms,
    parent: Handle,
    pref: u32,
    f: &RouteFilter,
) -> Option<Finding> {
    let (to, from) = (f.to(), f.from());
    let (words, reads, missing) = match (to, from) {
        (Some(t), Some(s)) if !realms.exactly(f.id) => (
            format!("to {t} from {s}"),
            format!("the destination realm {t} with the source realm {s}"),
            format!("realm {t} with source realm {s}"),
        ),
        (Some(t), None) if !realms.to(t) => (
            format!("to {t}"),
            format!("the destination realm {t}"),
            format!("realm {t}"),
        ),
        (None, Some(s)) if !realms.from(s) => (
            format!("from {s}"),
            format!("the source realm {s}"),
            format!(
                "source realm {s} (`realms {s}/…`, or `realm {s}` on the route back to the sender)"
            ),
        ),
        _ => return None,
    };
    let at = format!(
        "{} filter parent {parent} pref {pref} route {words}",
        cx.name
    );
    let record = cx.origins.filter(cx.name, parent, Some(pref));
    Some(
        Finding::new(
            "realm-unset",
            at,
            format!(
                "reads {reads}, but no route of the policy gives a packet {missing}: the policy's \
                 routes set {}, and every other destination has realm 0 (cosmos); in the simulator the \
                 filter never matches and its packets go where unclassified ones go. A live box's own \
                 routes are not in the policy: if its routing table sets that realm, the filter matches \
                 there",
                realms.listed()
            ),
            format!(
                "give the route the realm (`ip route replace PREFIX via GW realm {}`), or correct the \
                 filter's realm to one the routes set",
                to.or(from).unwrap_or(0)
            ),
        )
        .line(record.map(|r| r.at.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realms_are_read_as_route4_classify_compares_them() {
        // A route with realm 5, one with realms 2/7, one with realm 0x10a (266: low byte 10).
        let r = Realms {
            routes: vec![0, 5, 2 << 16 | 7, 0x10a],
        };
        assert!(r.to(5) && r.to(7) && r.to(10), "the low byte of each");
        assert!(r.to(0), "destinations without a realm route");
        assert!(!r.to(3));
        // Source realms: a route's own (2), or a destination realm on the way back (5, 266).
        assert!(r.from(2) && r.from(5) && r.from(0x10a));
        assert!(!r.from(7 << 8));
        // Exactly: 2/7 as given; 5 combined with any route's realm back to the sender.
        assert!(r.exactly(2 << 16 | 7));
        assert!(r.exactly(5 << 16 | 5) && r.exactly(7 << 16 | 5) && r.exactly(5));
        // The route back gives its destination realm (7), not its source realm (2).
        assert!(!r.exactly(2 << 16 | 5));
        assert!(
            !r.exactly(3 << 16 | 7),
            "a route with a source realm keeps its own"
        );
        assert!(!r.exactly(5 << 16 | 9));
        assert_eq!(r.listed(), "realm 5, realms 2/7, realm 266");
        let many = Realms {
            routes: (0..12).collect(),
        };
        assert!(
            many.listed().ends_with("realm 8, 3 more"),
            "{}",
            many.listed()
        );
    }
}
