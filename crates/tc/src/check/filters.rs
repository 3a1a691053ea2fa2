//! What filters name and what they read: a `flowid` of a class that does not exist (the packets fall
//! where the discipline sends what no filter classified — say where), IPv4 match fields under
//! `protocol ipv6` and the reverse (u32 reads fixed offsets of whatever header is there), a TOS match
//! whose mask takes in the ECN bits (ECN-capable packets, ECT(0) or CE, then never match), a raw u32
//! offset that reads a source port or address where the policy means the destination elsewhere,
//! a `flowid` of an inner HTB/HFSC class that has no filters of its own (the packets fall to the
//! default, not to its leaves), classification for IPv4 only on a qdisc that has classes to choose, flower's ARP hardware-address
//! keys under a protocol that is not ARP's (the kernel drops them), and flower's MAC keys, which
//! simulated packets cannot match.

use super::{DevCx, Finding};
use tclab_core::engine::QdiscInfo;
use tclab_core::filter::{Block, ETH_P_ALL};
use tclab_core::qdisc::QdiscOptions;
use tclab_core::Handle;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in &cx.qdiscs {
        let Some(s) = cx.dev.find(q.handle) else {
            continue;
        };
        // The qdisc's own filters and those of its inner classes (HTB, HFSC read them on the way down).
        let ids = cx
            .classes_of(q.handle.major())
            .filter(|c| c.classid != q.handle)
            .map(|c| c.classid);
        let mut blocks: Vec<(Handle, &Block)> = Vec::new();
        for id in std::iter::once(q.handle).chain(ids) {
            if let Some(b) = s.q.block(id).filter(|b| !b.is_empty()) {
                if !blocks.iter().any(|&(_, x)| std::ptr::eq(x, b)) {
                    blocks.push((id, b));
                }
            }
        }
        missing_classes(cx, q, out);
        inner_targets(cx, q, out);
        for &(parent, b) in &blocks {
            tos_ecn(cx, parent, b, out);
        }
        ipv4_only(cx, q, &blocks, out);
    }
    families(cx, out);
    raw_ports(cx, out);
    flower_keys(cx, out);
}

/// Where a qdisc sends a packet whose filter named a class it does not have: a description, and the
/// class if it is one.
fn falls_to(cx: &DevCx, q: &QdiscInfo) -> Option<(String, Option<Handle>)> {
    let leaf = |id: Handle| cx.class(id).is_some() && cx.is_leaf(id);
    let default = |defcls: u32, otherwise: &str| {
        let def = Handle(q.handle.0 | defcls);
        if defcls != 0 && leaf(def) {
            (format!("to the default class {def}"), Some(def))
        } else {
            (otherwise.to_string(), None)
        }
    };
    Some(match &q.options {
        // `htb_classify`: "filter selected invalid classid" breaks out to the default class, or the
        // direct queue when that is missing or inner.
        QdiscOptions::Htb(h) => default(
            h.defcls,
            "to HTB's direct queue, unshaped (there is no default leaf)",
        ),
        QdiscOptions::Hfsc(h) => default(
            h.defcls as u32,
            "nowhere: HFSC drops them (there is no default leaf)",
        ),
        // `prio_classify`: a band past the last is the band of priority 0 in the priomap.
        QdiscOptions::Prio(p) => {
            let band = Handle(q.handle.0 | (p.priomap[0] as u32 + 1));
            (
                format!("to band {band} (the priomap's band for priority 0)"),
                Some(band),
            )
        }
        // `drr_classify`/`qfq_classify` find no class: the packet is dropped.
        QdiscOptions::Drr | QdiscOptions::Qfq => (
            format!("nowhere: {} drops them", q.kind.to_uppercase()),
            None,
        ),
        _ => return None,
    })
}

/// What the reachable filters of `q`'s blocks at `parents` (the qdisc itself and some of its classes;
/// a block shared by several is read once) name: (the block's parent, the filter's preference and
/// kind, the class).
fn named_by_filters(
    cx: &DevCx,
    q: &QdiscInfo,
    parents: impl Iterator<Item = Handle>,
) -> Vec<(Handle, u32, &'static str, Handle)> {
    let mut out = Vec::new();
    let Some(s) = cx.dev.find(q.handle) else {
        return out;
    };
    let mut seen: Vec<*const Block> = Vec::new();
    for parent in std::iter::once(q.handle).chain(parents) {
        let Some(b) = s.q.block(parent).filter(|b| !b.is_empty()) else {
            continue;
        };
        if seen.contains(&(b as *const Block)) {
            continue;
        }
        seen.push(b);
        for chain in b.reachable_chains() {
            for tp in b.chains.get(&chain).into_iter().flatten() {
                for id in b.tp_filters(tp).into_iter().filter_map(|(c, _)| c) {
                    out.push((parent, tp.prio, tp.cls.kind(), Handle(id)));
                }
            }
        }
    }
    out
}

/// The filters of `q`'s blocks a packet can reach that name a class `q` does not have: (the block's
/// parent, the filter's preference and kind, the class).
fn missing(cx: &DevCx, q: &QdiscInfo) -> Vec<(Handle, u32, &'static str, Handle)> {
    let mut out = Vec::new();
    let Some((_, fallback)) = falls_to(cx, q) else {
        return out;
    };
    let ids = cx
        .classes_of(q.handle.major())
        .filter(|c| c.classid != q.handle)
        .map(|c| c.classid);
    for (parent, pref, kind, id) in named_by_filters(cx, q, ids) {
        // `flowid 1:0` is HTB's direct queue by design; a class of this qdisc is fine.
        if id == q.handle || cx.class(id).is_some() {
            continue;
        }
        // PRIO's classes are its bands, which exist whenever the minor is in range.
        if let QdiscOptions::Prio(p) = &q.options {
            if id.major() == q.handle.major() && (1..=p.bands.max(0) as u16).contains(&id.minor()) {
                continue;
            }
        }
        // `flowid 1` (0:1) where the default is 1:1: the class meant, by another road.
        if fallback == Some(Handle(q.handle.0 | id.minor() as u32)) {
            continue;
        }
        out.push((parent, pref, kind, id));
    }
    out
}

/// The classes of `q`'s major that iptables CLASSIFY rules set on packets leaving this device and that
/// `q` does not have (HTB and HFSC read skb->priority first; a class they cannot find sends the packet
/// on to the filters and the default, as a mistyped `flowid` does). For the root qdisc, also those of
/// a major no qdisc of the device has (`--set-class 2:10` where the tree is `1:`): the root cannot find
/// them either.
fn classify_missing(cx: &DevCx, q: &QdiscInfo) -> Vec<Handle> {
    if !matches!(q.kind, "htb" | "hfsc") {
        return Vec::new();
    }
    let root = q.parent == Handle::ROOT;
    let majors: Vec<u16> = cx.qdiscs.iter().map(|x| x.handle.major()).collect();
    let mut out: Vec<Handle> = cx
        .marks
        .classify_targets(cx.name)
        .map(Handle)
        .filter(|&id| {
            (id.major() == q.handle.major() && id != q.handle && cx.class(id).is_none())
                || (root && id.major() != 0 && !majors.contains(&id.major()))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The line of the CLASSIFY rule that sets `id`: the last `iptables … -j CLASSIFY --set-class` record
/// naming it.
fn classify_line<'o>(cx: &DevCx<'o>, id: Handle) -> Option<&'o str> {
    let names = |v: &str| {
        let (maj, min) = v.split_once(':').unwrap_or((v, "0"));
        let num = |x: &str| u16::from_str_radix(if x.is_empty() { "0" } else { x }, 16).ok();
        num(maj).zip(num(min)) == Some((id.major(), id.minor()))
    };
    cx.origins
        .records
        .iter()
        .rev()
        .find(|r| {
            r.entry.first().is_some_and(|w| w == "iptables")
                && r.entry
                    .windows(2)
                    .any(|w| w[0] == "--set-class" && names(&w[1]))
        })
        .map(|r| r.at.as_str())
}

/// Whether a filter of `q`, or a CLASSIFY rule, names a class it does not have.
pub(super) fn names_missing_class(cx: &DevCx, q: &QdiscInfo) -> bool {
    !missing(cx, q).is_empty() || !classify_missing(cx, q).is_empty()
}

fn missing_classes(cx: &DevCx, q: &QdiscInfo, out: &mut Vec<Finding>) {
    let Some((falls, _)) = falls_to(cx, q) else {
        return;
    };
    // The leaves nothing else reaches: the class a mistyped flowid meant is likely among them.
    let idle: Vec<String> = cx
        .classes_of(q.handle.major())
        .filter(|c| c.classid != q.handle && cx.is_leaf(c.classid))
        .filter(|c| !cx.bound(c.classid.0) && !falls.contains(&c.classid.to_string()))
        .map(|c| c.classid.to_string())
        .collect();
    let idle = if idle.is_empty() {
        String::new()
    } else {
        format!("; nothing reaches {} (the class meant?)", idle.join(", "))
    };
    for (parent, pref, kind, id) in missing(cx, q) {
        let record = cx.origins.filter(cx.name, parent, Some(pref));
        out.push(
            Finding::new(
                "filter-class-missing",
                format!("{} filter parent {parent} pref {pref} {kind}", cx.name),
                format!(
                    "sends packets to class {id}, which {} {} does not have: they fall {falls}{idle}",
                    q.kind, q.handle
                ),
                format!(
                    "create class {id}, or point the filter at an existing class of {} (`flowid \
                     {}:…`)",
                    q.handle,
                    q.handle.major()
                ),
            )
            .line(record.map(|r| r.at.as_str())),
        );
    }
    for id in classify_missing(cx, q) {
        out.push(
            Finding::new(
                "filter-class-missing",
                format!("{} iptables CLASSIFY --set-class {id}", cx.name),
                format!(
                    "an iptables CLASSIFY rule gives packets leaving {} class {id}, which {} {} does \
                     not have: they fall {falls}{idle}",
                    cx.name, q.kind, q.handle
                ),
                format!(
                    "create class {id}, or point the rule at an existing class of {} (`--set-class \
                     {:x}:…`)",
                    q.handle,
                    q.handle.major()
                ),
            )
            .line(classify_line(cx, id)),
        );
    }
}

/// Filters of an HTB or HFSC qdisc that name one of its inner classes when that class has no filters
/// of its own. `htb_classify` (and `hfsc_classify`) go on with the inner class's filter list; an empty
/// one ends the loop, and the packet goes where an unclassified one goes: the default class, or HTB's
/// direct queue. The traffic the filter was written for never reaches the inner class's leaves, nor its
/// rate (simulated: an HTTPS download meant for a 50 Mbit/s inner class runs in the 1 Mbit/s default).
fn inner_targets(cx: &DevCx, q: &QdiscInfo, out: &mut Vec<Finding>) {
    if !matches!(q.kind, "htb" | "hfsc") {
        return;
    }
    let Some((falls, _)) = falls_to(cx, q) else {
        return;
    };
    let Some(s) = cx.dev.find(q.handle) else {
        return;
    };
    let has_filters = |id: Handle| s.q.block(id).is_some_and(|b| !b.is_empty());
    // The blocks HTB/HFSC read: the qdisc's, and those of inner classes a packet is sent to (the
    // others are `filter-unreached`'s).
    let ids = cx
        .classes_of(q.handle.major())
        .map(|c| c.classid)
        .filter(|&id| id != q.handle && !cx.is_leaf(id) && cx.bound(id.0));
    for (parent, pref, kind, id) in named_by_filters(cx, q, ids) {
        if id == q.handle || cx.class(id).is_none() || cx.is_leaf(id) || has_filters(id) {
            continue;
        }
        let leaves: Vec<String> = cx
            .classes_of(q.handle.major())
            .filter(|c| cx.is_leaf(c.classid) && descends(cx, c.classid, id))
            .map(|c| c.classid.to_string())
            .collect();
        let example = leaves.first().cloned().unwrap_or_else(|| "…".into());
        let record = cx.origins.filter(cx.name, parent, Some(pref));
        out.push(
                        Finding::new(
                            "filter-inner-class",
                            format!(
                                "{} filter parent {parent} pref {pref} {kind}",
                                cx.name
                            ),
                            format!(
                                "sends packets to {id}, an inner class with no filters of its own: \
                                 {} goes on with {id}'s filters to choose among its leaves ({}), \
                                 finds none, and the packets fall {falls}, not into {id}",
                                q.kind.to_uppercase(),
                                leaves.join(", ")
                            ),
                            format!(
                                "point the filter at a leaf of {id} (`flowid {example}`), or attach \
                                 filters to {id} that choose among its leaves (`tc filter add dev {} \
                                 parent {id} … flowid {example}`)",
                                cx.name
                            ),
                        )
                        .line(record.map(|r| r.at.as_str())),
                    );
    }
}

/// Whether class `id` lies below class `above` (within one qdisc).
fn descends(cx: &DevCx, id: Handle, above: Handle) -> bool {
    let mut at = id;
    for _ in 0..16 {
        match cx.class(at).map(|c| c.parent) {
            Some(p) if p == above => return true,
            Some(p) if p != at && p.major() == id.major() => at = p,
            _ => return false,
        }
    }
    false
}

/// The TOS byte (IPv4: the second byte of word 0) or the traffic class (IPv6: bits 20..27 of word 0)
/// matched with a mask that takes in the two ECN bits as well as the DSCP: an ECN-capable packet
/// (ECT(0), ECT(1), CE) never matches a value whose ECN bits are 0, and ECN is what modern TCP
/// stacks negotiate.
fn tos_ecn(cx: &DevCx, parent: Handle, b: &Block, out: &mut Vec<Finding>) {
    for chain in b.reachable_chains() {
        for tp in b.chains.get(&chain).into_iter().flatten() {
            let (ecn, dscp, shift) = match tp.protocol {
                ETH_P_IP | ETH_P_ALL => (0x0003_0000u32, 0x00fc_0000u32, 16),
                ETH_P_IPV6 => (0x0030_0000, 0x0fc0_0000, 20),
                _ => continue,
            };
            for n in b.u32_nodes(tp) {
                let Some(k) = n.sel.keys.iter().find(|k| {
                    k.off == 0
                        && k.offmask == 0
                        && k.mask & ecn != 0
                        && k.mask & dscp != 0
                        && k.val & ecn == 0
                }) else {
                    continue;
                };
                let value = (k.val & (ecn | dscp)) >> shift;
                let mask = (k.mask & (ecn | dscp)) >> shift;
                let record = cx.origins.filter(cx.name, parent, Some(tp.prio));
                out.push(
                    Finding::new(
                        "tos-ecn",
                        format!("{} filter parent {parent} pref {} u32", cx.name, tp.prio),
                        format!(
                            "matches the {} byte {value:#04x} with mask {mask:#04x}, which includes the \
                             two ECN bits: a packet of an ECN-capable connection carries ECT(0) there \
                             ({:#04x}) or CE, and never matches, so it goes to the class the others go to",
                            if shift == 16 { "TOS" } else { "traffic class" },
                            value | 0x02
                        ),
                        format!(
                            "mask the DSCP only: `match ip dsfield {value:#04x} {:#04x}` (mask 0xfc)",
                            mask & 0xfc
                        ),
                    )
                    .line(record.map(|r| r.at.as_str())),
                );
            }
        }
    }
}

/// u32's `match ip …` fields are IPv4 header offsets and `match ip6 …` IPv6 ones: under a filter of
/// the other protocol they read the wrong bytes (`ip dport` under `protocol ipv6` reads the middle of
/// the source address). Read from the lines as written: the engine keeps offsets, not names.
fn families(cx: &DevCx, out: &mut Vec<Finding>) {
    for (record, l) in cx.origins.filter_lines() {
        if l.dev != Some(cx.name) || l.kind != Some("u32") {
            continue;
        }
        let protocol = l.protocol.unwrap_or("all");
        let fields: Vec<(&str, &str)> = l
            .rest
            .windows(3)
            .filter(|w| w[0] == "match" && (w[1] == "ip" || w[1] == "ip6"))
            .map(|w| (w[1].as_str(), w[2].as_str()))
            .collect();
        let wrong = fields.iter().find(|(family, _)| {
            (*family == "ip" && protocol == "ipv6") || (*family == "ip6" && protocol == "ip")
        });
        let Some((family, field)) = wrong else {
            continue;
        };
        let (reads, right) = if *family == "ip" {
            ("an IPv4 field", "ip")
        } else {
            ("an IPv6 field", "ipv6")
        };
        out.push(
            Finding::new(
                "filter-family",
                line_at(cx.name, &l),
                format!(
                    "`match {family} {field}` reads {reads} at its fixed offset, but the filter is \
                     `protocol {protocol}`: on those packets it reads other bytes of the header, so it \
                     does not match what it says"
                ),
                format!(
                    "`protocol {right}` for `match {family}` fields, or the {} fields (`match {} …`) for \
                     `protocol {protocol}`",
                    if *family == "ip" { "IPv6" } else { "IPv4" },
                    if *family == "ip" { "ip6" } else { "ip" }
                ),
            )
            .line(Some(&record.at)),
        );
    }
}

/// Where a u32 filter line is: `eth0 filter parent 1: pref 3 u32`.
fn line_at(dev: &str, l: &super::origins::TcLine) -> String {
    format!(
        "{dev} filter parent {} pref {} u32",
        l.parent
            .map_or("root".to_string(), |p| Handle(p).to_string()),
        l.pref.map_or("?".to_string(), |p| p.to_string())
    )
}

/// The IPv4 header fields (without options) a raw u32 key is read against: name, offset, length,
/// and whether it is the source of its pair (addresses at 12 and 16, ports at 20 and 22).
const FIELDS: [(&str, u32, u32, bool); 4] = [
    ("source address", 12, 4, true),
    ("destination address", 16, 4, false),
    ("source port", 20, 2, true),
    ("destination port", 22, 2, false),
];

/// What one key of a u32 line reads: a field of [`FIELDS`] (its index), the value and mask over the
/// field's bytes, and whether it was written raw (`match u16 22 0xffff at 20`) or by name
/// (`match ip dport 22 0xffff`, `match ip dst 10.0.0.1/32`).
#[derive(Clone, Copy, PartialEq)]
struct FieldKey {
    field: usize,
    value: u32,
    mask: u32,
    raw: bool,
}

/// The keys of a u32 line's words that read one whole or masked IPv4 address or port.
fn field_keys(rest: &[String]) -> Vec<(FieldKey, String)> {
    let num = |v: &str| crate::util::get_u32(v, 0);
    let mut keys = Vec::new();
    for (i, w) in rest.iter().enumerate() {
        if w != "match" {
            continue;
        }
        let at = |k: usize| rest.get(i + k).map(String::as_str);
        let written = rest[i..rest.len().min(i + 6)].join(" ");
        match (at(1), at(2), at(3), at(4)) {
            (Some("ip"), Some(f @ ("sport" | "dport")), Some(v), Some(m)) => {
                if let (Some(v), Some(m)) = (num(v), num(m)) {
                    let field = if f == "sport" { 2 } else { 3 };
                    let key = FieldKey {
                        field,
                        value: v & m & 0xffff,
                        mask: m & 0xffff,
                        raw: false,
                    };
                    keys.push((key, rest[i..i + 5].join(" ")));
                }
            }
            (Some("ip"), Some(f @ ("src" | "dst")), Some(a), _) => {
                if let Some((value, mask)) = prefix(a) {
                    let field = if f == "src" { 0 } else { 1 };
                    keys.push((
                        FieldKey {
                            field,
                            value,
                            mask,
                            raw: false,
                        },
                        rest[i..i + 4].join(" "),
                    ));
                }
            }
            (Some(width @ ("u8" | "u16" | "u32")), Some(v), Some(m), Some("at")) => {
                let (Some(v), Some(m), Some(off)) = (num(v), num(m), at(5).and_then(num)) else {
                    continue;
                };
                let len = match width {
                    "u8" => 1,
                    "u16" => 2,
                    _ => 4,
                };
                if let Some(key) = raw_field(off, len, v, m) {
                    keys.push((key, written));
                }
            }
            _ => {}
        }
    }
    keys
}

/// `A.B.C.D[/LEN]` as a value and mask.
fn prefix(a: &str) -> Option<(u32, u32)> {
    let (addr, len) = a.split_once('/').unwrap_or((a, "32"));
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| *l <= 32)?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(addr) & mask, mask))
}

/// A raw key of `len` bytes at `off` with value `v` and mask `m`, if the bytes it masks all lie in
/// one field of [`FIELDS`]: that field, with the value and mask over the field's bytes.
fn raw_field(off: u32, len: u32, v: u32, m: u32) -> Option<FieldKey> {
    // Byte k of the key (k = 0 the first on the wire) with its mask byte.
    let byte = |x: u32, k: u32| (x >> (8 * (len - 1 - k))) & 0xff;
    let masked: Vec<u32> = (0..len).filter(|&k| byte(m, k) != 0).collect();
    let (first, last) = (off + *masked.first()?, off + *masked.last()?);
    let field = FIELDS
        .iter()
        .position(|&(_, o, l, _)| first >= o && last < o + l)?;
    let (_, o, l, _) = FIELDS[field];
    let (mut value, mut mask) = (0, 0);
    for b in o..o + l {
        let (vb, mb) = match b.checked_sub(off).filter(|&k| k < len) {
            Some(k) => (byte(v, k), byte(m, k)),
            None => (0, 0),
        };
        value = value << 8 | (vb & mb);
        mask = mask << 8 | mb;
    }
    Some(FieldKey {
        field,
        value,
        mask,
        raw: true,
    })
}

/// How a field key's value reads: an address with its prefix, or a port.
fn field_value(k: &FieldKey) -> String {
    if FIELDS[k.field].2 == 4 {
        let addr = std::net::Ipv4Addr::from(k.value);
        match k.mask {
            u32::MAX => addr.to_string(),
            m if m.leading_ones() + m.trailing_zeros() == 32 => {
                format!("{addr}/{}", m.leading_ones())
            }
            m => format!("{addr} (mask 0x{m:08x})"),
        }
    } else {
        k.value.to_string()
    }
}

/// A raw u32 key that reads a source field (`at 20`, the source port; `at 12`, the source address)
/// for a value the policy names as the destination elsewhere on the same device (`ip dport 22`, `ip
/// dst 10.0.0.1`, or a raw key at the destination's offset), and never by name as a source: the offset
/// is almost certainly a slip (ports start at 20 with the source), and the filter matches the other
/// direction's packets. Another device carries the other direction (the LAN side, an ifb for the
/// download): a destination named there is the source here, as a per-host policy writes it.
fn raw_ports(cx: &DevCx, out: &mut Vec<Finding>) {
    let lines: Vec<_> = cx
        .origins
        .filter_lines()
        .filter(|(_, l)| l.kind == Some("u32") && l.dev == Some(cx.name))
        .collect();
    let all: Vec<FieldKey> = lines
        .iter()
        .flat_map(|(_, l)| field_keys(l.rest).into_iter().map(|(k, _)| k))
        .collect();
    let same_value = |a: &FieldKey, b: &FieldKey| a.value == b.value && a.mask == b.mask;
    for (record, l) in &lines {
        for (key, written) in field_keys(l.rest) {
            let (name, _, _, is_source) = FIELDS[key.field];
            if !key.raw || !is_source {
                continue;
            }
            let twin = key.field + 1;
            let named_dest = all.iter().any(|k| k.field == twin && same_value(k, &key));
            let named_source = all
                .iter()
                .any(|k| k.field == key.field && !k.raw && same_value(k, &key));
            if !named_dest || named_source {
                continue;
            }
            let (twin_name, twin_off, _, _) = FIELDS[twin];
            let value = field_value(&key);
            let (by_name, by_source) = if key.field == 2 {
                (
                    format!("`match ip dport {value} 0xffff`"),
                    "`match ip sport`",
                )
            } else {
                (format!("`match ip dst {value}`"), "`match ip src`")
            };
            out.push(
                Finding::new(
                    "u32-offset",
                    line_at(cx.name, l),
                    format!(
                        "`{written}` reads the {name} (offset {} of an IPv4 header without options; the \
                         {twin_name} is at {twin_off}), while the policy names {value} as a destination \
                         elsewhere: this filter matches the other direction's packets",
                        FIELDS[key.field].1
                    ),
                    format!("{by_name} (offset {twin_off}), or {by_source} if the source is meant"),
                )
                .line(Some(&record.at)),
            );
        }
    }
}

/// Filters for IPv4 only on a qdisc with classes to choose: every IPv6 packet takes the default.
fn ipv4_only(cx: &DevCx, q: &QdiscInfo, blocks: &[(Handle, &Block)], out: &mut Vec<Finding>) {
    if !matches!(q.kind, "htb" | "hfsc" | "prio" | "drr" | "qfq") {
        return;
    }
    // A u32 filter of `protocol all` whose keys are all `match ip …` fields reads IPv4 offsets in
    // every packet: an IPv6 packet matches only by accident of its address bytes, so it is IPv4's.
    let ipv4_fields = |parent: Handle, tp: &tclab_core::filter::Tp| {
        let Some(r) = cx.origins.filter(cx.name, parent, Some(tp.prio)) else {
            return false;
        };
        let Some(l) = super::origins::TcLine::parse(&r.entry) else {
            return false;
        };
        let families: Vec<&str> = l
            .rest
            .windows(2)
            .filter(|w| w[0] == "match")
            .map(|w| w[1].as_str())
            .collect();
        l.kind == Some("u32")
            && l.pref.is_none_or(|p| p == tp.prio)
            && !families.is_empty()
            && families.iter().all(|f| *f == "ip")
    };
    let protocols: Vec<u16> = blocks
        .iter()
        .flat_map(|&(parent, b)| {
            b.tps().map(move |tp| match tp.protocol {
                ETH_P_ALL if ipv4_fields(parent, tp) => ETH_P_IP,
                p => p,
            })
        })
        .collect();
    if protocols.is_empty() || protocols.iter().any(|&p| p != ETH_P_IP) {
        return;
    }
    // An ifb that only IPv4 redirects feed sees no IPv6: the redirect's finding says it once.
    if cx.dev.kind == tclab_core::engine::DevKind::Ifb
        && super::ifb::fed_protocols(cx.redirects, cx.name) == [ETH_P_IP]
    {
        return;
    }
    // Only where the classes chosen differ from where IPv6 goes.
    let chosen: Vec<u32> = blocks
        .iter()
        .flat_map(|(_, b)| b.reached_classes())
        .collect();
    let default = match &q.options {
        QdiscOptions::Htb(h) if h.defcls != 0 => Some(Handle(q.handle.0 | h.defcls)),
        QdiscOptions::Hfsc(h) if h.defcls != 0 => Some(Handle(q.handle.0 | h.defcls as u32)),
        _ => None,
    };
    if chosen.iter().all(|&c| Some(Handle(c)) == default) {
        return;
    }
    out.push(
        Finding::new(
            "ipv4-only-classes",
            cx.qdisc_at(q),
            format!(
                "every filter here reads IPv4 only (`protocol ip`, or `match ip …` fields, which \
                 under `protocol all` read IPv4 offsets in IPv6 packets too): IPv6 packets match none (but by accident of their \
                 address bytes), \
                 so on a dual-stack line they all go {}, whatever class their IPv4 twins get",
                // Where unclassified packets really go: a default that does not exist (or is inner)
                // sends them to HTB's direct queue, as `default-missing` says.
                match (q.kind, falls_to(cx, q)) {
                    ("prio", _) => "to the priomap's band for their priority".to_string(),
                    (_, Some((falls, _))) => falls,
                    (_, None) => "where nothing classified goes".to_string(),
                }
            ),
            "give each filter an IPv6 twin (`protocol ipv6 … match ip6 …`), or classify on what \
             both families carry (`protocol all` with fw marks or skbedit)",
        )
        .line(cx.qdisc_line(q)),
    );
}

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_RARP: u16 = 0x8035;

/// A flower line's words as `flower_parse_opt` reads them: each keyword (abbreviations resolved) and
/// the word after it. The words of its actions are not flower's: `action` hands the rest of the line to
/// `parse_action` (m_action.c), which reads actions up to a `classid` or `flowid`, so `pedit … eth dst
/// set …` is no `dst_mac`.
fn flower_words<'a>(l: &'a super::origins::TcLine<'a>) -> Vec<(&'static str, Option<&'a str>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < l.rest.len() {
        match crate::filter::flower_keyword(&l.rest[i]) {
            Some("action") => {
                i += 1;
                while i < l.rest.len() && l.rest[i] != "classid" && l.rest[i] != "flowid" {
                    i += 1;
                }
                continue;
            }
            Some(k) => out.push((k, l.rest.get(i + 1).map(String::as_str))),
            None => {}
        }
        i += 1;
    }
    out
}

/// The EtherType a flower filter's keys see (`fl_set_key`'s `n_proto`): its protocol, or past VLAN
/// tags the `vlan_ethtype` (then `cvlan_ethtype`) it names.
fn flower_ethertype(protocol: &str, words: &[(&str, Option<&str>)]) -> Option<u16> {
    let vlan = |t: u16| t == 0x8100 || t == 0x88a8;
    let mut t = crate::filter::proto_a2n(protocol)?;
    for inner in ["vlan_ethtype", "cvlan_ethtype"] {
        if !vlan(t) {
            break;
        }
        match words
            .iter()
            .find(|(k, _)| *k == inner)
            .and_then(|(_, v)| *v)
        {
            Some(v) => t = crate::filter::proto_a2n(v)?,
            None => break,
        }
    }
    Some(t)
}

/// flower keys that do not do what they say: `arp_sha`/`arp_tha` under a protocol that is not ARP's
/// (tc takes them, `fl_set_key` sets the ARP keys only for an ARP or RARP EtherType, so the filter
/// matches every packet of its protocol); `dst_mac`/`src_mac`, which only frames from a wire carry
/// (a simulated packet has no Ethernet addresses).
fn flower_keys(cx: &DevCx, out: &mut Vec<Finding>) {
    for (record, l) in cx.origins.filter_lines() {
        if l.dev != Some(cx.name) || l.kind != Some("flower") {
            continue;
        }
        let words = flower_words(&l);
        let at = format!(
            "{} filter parent {} pref {} flower",
            cx.name,
            l.parent
                .map_or("root".to_string(), |p| Handle(p).to_string()),
            l.pref.map_or("?".to_string(), |p| p.to_string())
        );
        let protocol = l.protocol.unwrap_or("all");
        let arp =
            flower_ethertype(protocol, &words).is_some_and(|t| t == ETH_P_ARP || t == ETH_P_RARP);
        let hw: Vec<&str> = words
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| *k == "arp_sha" || *k == "arp_tha")
            .collect();
        if !arp && !hw.is_empty() {
            out.push(
                Finding::new(
                    "flower-arp-ignored",
                    at.clone(),
                    format!(
                        "`{}` under `protocol {protocol}`: the kernel sets flower's ARP keys only for \
                         an ARP or RARP EtherType, so it drops them and the filter matches every \
                         packet it sees",
                        hw.join("`, `")
                    ),
                    "`protocol arp` (or `rarp`) for the ARP keys; a separate filter for the other \
                     protocol's keys",
                )
                .line(Some(&record.at)),
            );
        }
        if let Some((k, _)) = words
            .iter()
            .find(|(k, _)| *k == "dst_mac" || *k == "src_mac")
        {
            out.push(
                Finding::new(
                    "flower-mac-simulated",
                    at.clone(),
                    format!(
                        "`{k}` reads the Ethernet addresses of the frame a packet came in: `tclab \
                         live`'s frames have them, `tclab sim`'s packets do not, so in a simulation \
                         the filter matches nothing"
                    ),
                    "keys a simulated packet carries (addresses, ports, marks) if the policy is to \
                     be simulated; as it is for a live bridge or a real host",
                )
                .line(Some(&record.at)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flower_filters_ethertype_past_its_vlan_tags() {
        let w =
            |pairs: &[(&'static str, &'static str)]| -> Vec<(&'static str, Option<&'static str>)> {
                pairs.iter().map(|(k, v)| (*k, Some(*v))).collect()
            };
        assert_eq!(flower_ethertype("arp", &[]), Some(ETH_P_ARP));
        assert_eq!(
            flower_ethertype("ip", &w(&[("arp_sha", "x")])),
            Some(0x0800)
        );
        // 802.1Q with an ARP vlan_ethtype: the ARP keys count; Q-in-Q to the inner one.
        assert_eq!(
            flower_ethertype("802.1Q", &w(&[("vlan_ethtype", "arp")])),
            Some(ETH_P_ARP)
        );
        assert_eq!(
            flower_ethertype(
                "802.1ad",
                &w(&[("vlan_ethtype", "802.1Q"), ("cvlan_ethtype", "rarp")])
            ),
            Some(ETH_P_RARP)
        );
        assert_eq!(flower_ethertype("802.1Q", &[]), Some(0x8100));
    }
}
