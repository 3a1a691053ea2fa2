//! The shaper against the line: its rate, the line's ATM cells, the offloads' super-packets; and
//! fq_codel/CoDel targets against a frame's time at that rate and against their own interval.

use super::{DevCx, Finding};
use crate::util::{sprint_rate, sprint_time};
use std::collections::BTreeMap;
use tclab_core::engine::{DevKind, QdiscInfo};
use tclab_core::qdisc::{ClassInfo, ClassOptions, QdiscOptions};
use tclab_core::units::LinkLayer;
use tclab_core::Handle;

/// What the root qdisc shapes at: (rate in bytes/s, `u64::MAX` for none; link layer; overhead).
pub(super) fn root_rate(cx: &DevCx) -> Option<(u64, LinkLayer, u16)> {
    shapes_at(cx, cx.qdiscs.first()?)
}

/// What qdisc `q` shapes at, as [`root_rate`]: TBF's rate, the largest ceil of HTB's top classes, the
/// sum of HFSC's top classes' upper limits, CAKE's bandwidth; `None` for a kind that does not shape.
fn shapes_at(cx: &DevCx, q: &QdiscInfo) -> Option<(u64, LinkLayer, u16)> {
    match &q.options {
        QdiscOptions::Tbf(t) => Some((t.rate.rate, t.rate.linklayer, t.rate.overhead)),
        QdiscOptions::Htb(_) => cx
            .classes_of(q.handle.major())
            .filter(|c| c.parent == Handle::ROOT || c.parent == q.handle)
            .filter_map(|c| match &c.options {
                Some(ClassOptions::Htb(h)) => {
                    Some((h.ceil.rate, h.ceil.linklayer, h.ceil.overhead))
                }
                _ => None,
            })
            .max_by_key(|r| r.0),
        // HFSC shapes where every top class has an upper limit (`ul`, how people use it as a shaper):
        // together they send at most the sum. A top class without one may take the whole device: no
        // rate at all, as an unlimited CAKE.
        QdiscOptions::Hfsc(_) => {
            let tops: Vec<Option<u64>> = cx
                .classes_of(q.handle.major())
                .filter(|c| c.parent == q.handle && c.classid != q.handle)
                .map(|c| match &c.options {
                    Some(ClassOptions::Hfsc(o)) => o.usc.map(|u| u.m2 as u64),
                    _ => None,
                })
                .collect();
            (!tops.is_empty()).then(|| {
                let sum = tops
                    .iter()
                    .try_fold(0u64, |sum, ul| ul.map(|r| sum.saturating_add(r)));
                (sum.unwrap_or(u64::MAX), LinkLayer::Ethernet, 0)
            })
        }
        // CAKE without `bandwidth` does not shape at all: as if at an infinite rate.
        QdiscOptions::Cake(c) => Some((
            c.base_rate.filter(|r| *r > 0).unwrap_or(u64::MAX),
            if c.atm == Some(tclab_core::qdisc::cake::atm::ATM) {
                LinkLayer::Atm
            } else {
                LinkLayer::Ethernet
            },
            c.overhead.filter(|_| !c.raw).unwrap_or(0).max(0) as u16,
        )),
        _ => None,
    }
}

/// An mq root's transmit queues, each with its own shaper, send side by side (`mq` serves every queue
/// on its own; XPS and the flow hash spread the flows over them): the line sees the sum. The shapers
/// of the queues (their qdiscs and rates), when every queue has one; `None` otherwise (a queue left at
/// the default is `mq-queue-unshaped`'s).
fn mq_shapers<'c>(cx: &'c DevCx, root: &QdiscInfo) -> Option<Vec<(&'c QdiscInfo, u64)>> {
    if root.kind != "mq" {
        return None;
    }
    let queues: Vec<&ClassInfo> = cx.classes_of(root.handle.major()).collect();
    let shapers: Option<Vec<(&QdiscInfo, u64)>> = queues
        .iter()
        .map(|c| {
            let q = cx.qdiscs.iter().find(|x| x.parent == c.classid)?;
            Some((q, shapes_at(cx, q)?.0))
        })
        .collect();
    shapers.filter(|s| s.len() > 1)
}

/// What an HTB root sends when every leaf is backlogged, which its top classes' ceilings do not bound:
/// a class lets each child send up to its own rate without asking (`htb_class_mode` reads the child's
/// own tokens), so a class whose children's rates add up to more than its ceil sends that sum, and
/// top classes send side by side. Per class, F is what its subtree sends on its own rates, D the most
/// it sends: a leaf's F = min(rate, ceil), D = ceil; an inner class's D = max(ΣF, min(ceil, ΣD)) and
/// F = max(ΣF, min(rate, D)); the root sends ΣD of its top classes. With the classes whose children's
/// guaranteed rates pass their ceil, outermost first.
pub(super) fn htb_sends(cx: &DevCx) -> Option<(u64, Vec<OverCeil>)> {
    let root = cx.qdiscs.first()?;
    if !matches!(root.options, QdiscOptions::Htb(_)) {
        return None;
    }
    let mine = || {
        cx.classes_of(root.handle.major())
            .filter(|c| matches!(c.options, Some(ClassOptions::Htb(_))))
    };
    let mut children: BTreeMap<u32, Vec<&ClassInfo>> = BTreeMap::new();
    for c in mine() {
        children.entry(c.parent.0).or_default().push(c);
    }
    fn walk(
        c: &ClassInfo,
        children: &BTreeMap<u32, Vec<&ClassInfo>>,
        over: &mut Vec<OverCeil>,
        depth: u32,
    ) -> (u64, u64) {
        let Some(ClassOptions::Htb(o)) = &c.options else {
            return (0, 0);
        };
        let (rate, ceil) = (o.rate.rate, o.ceil.rate);
        let kids = children.get(&c.classid.0).filter(|_| depth < 8);
        let Some(kids) = kids else {
            return (rate.min(ceil), ceil);
        };
        let at = over.len();
        let (f, d) = kids.iter().fold((0u64, 0u64), |(f, d), k| {
            let (kf, kd) = walk(k, children, over, depth + 1);
            (f.saturating_add(kf), d.saturating_add(kd))
        });
        if f > ceil {
            over.insert(
                at,
                OverCeil {
                    class: c.classid,
                    children: f,
                    ceil,
                },
            );
        }
        let most = f.max(ceil.min(d));
        (f.max(rate.min(most)), most)
    }
    let mut over = Vec::new();
    let total = mine()
        .filter(|c| c.parent == Handle::ROOT)
        .map(|c| walk(c, &children, &mut over, 0).1)
        .fold(0u64, u64::saturating_add);
    Some((total, over))
}

/// A class whose children's guaranteed rates add up past its ceil.
pub(super) struct OverCeil {
    pub class: Handle,
    pub children: u64,
    pub ceil: u64,
}

/// An HTB root that reaches the line through its children's rates or its top classes side by side,
/// though its top classes' ceilings stay below it.
pub(super) struct OverLine {
    pub sends: u64,
    pub link: u64,
    pub over: Vec<OverCeil>,
}

pub(super) fn htb_over_line(cx: &DevCx) -> Option<OverLine> {
    let link = cx.line.rate?;
    let (ceil, _, _) = root_rate(cx)?;
    let (sends, over) = htb_sends(cx)?;
    (ceil < link && sends >= link).then_some(OverLine { sends, link, over })
}

/// `shaper-at-line-rate` for qdisc `q` shaping at `rate` on a line of `link` (bytes/s), if it is not
/// below the line; `context` says why `rate` is what the line sees, with the number of shapers it
/// adds up (the fix shares the line among them).
fn over_line(
    cx: &DevCx,
    q: &QdiscInfo,
    rate: u64,
    link: u64,
    context: Option<(String, usize)>,
) -> Option<Finding> {
    let is_cake = matches!(q.options, QdiscOptions::Cake(_));
    // CAKE charges what the line charges (its overhead keywords), so its own rate may be the line's.
    if !(rate > link || (rate == link && !is_cake)) {
        return None;
    }
    // HFSC's top class without an upper limit, which the finding names.
    let unlimited_top = cx
        .classes_of(q.handle.major())
        .filter(|c| c.parent == q.handle && c.classid != q.handle)
        .find(|c| matches!(&c.options, Some(ClassOptions::Hfsc(o)) if o.usc.is_none()))
        .map(|c| c.classid);
    let shown = match (rate, is_cake) {
        (u64::MAX, true) => "no rate (cake unlimited)".to_string(),
        (u64::MAX, false) => match unlimited_top {
            Some(c) => format!("no rate (top class {c} has no `ul`)"),
            None => "no rate".to_string(),
        },
        _ => sprint_rate(rate),
    };
    let shapers = context.as_ref().map_or(1, |c| c.1);
    let fix = if shapers > 1 {
        format!(
            "give each queue's shaper a share of the line, so that together they stay a little \
             below it: e.g. {} each ({} in all, 90 %)",
            sprint_rate(link * 9 / 10 / shapers as u64),
            sprint_rate(link * 9 / 10)
        )
    } else if is_cake && cx.dev.kind == tclab_core::engine::DevKind::Ifb {
        // Behind the line (a download through an ifb) the line's own rate leaves the queue at the
        // ISP: the 90–95 % the upstream advice below gives for this case.
        format!(
            "shape the download a little below the line, `bandwidth {}` (90 %; an ingress shaper \
             behind the line needs 90–95 % of it, with cake's `ingress` keyword)",
            sprint_rate(link * 9 / 10)
        )
    } else if is_cake {
        format!(
            "give cake the line's rate, `bandwidth {}` (with the line's overhead keyword, CAKE can \
             run at 100 % upstream; 90–95 % for an ingress shaper behind the line)",
            sprint_rate(link)
        )
    } else if q.kind == "hfsc" {
        format!(
            "give the top classes upper limits that add up to a little below the line, e.g. `ul \
             rate {}` (90 %) on a single top class",
            sprint_rate(link * 9 / 10)
        )
    } else {
        format!(
            "shape a little below the line, e.g. {} (90 %)",
            sprint_rate(link * 9 / 10)
        )
    };
    Some(
        Finding::new(
            "shaper-at-line-rate",
            cx.qdisc_at(q),
            format!(
                "shapes at {shown} on a {} line{}: the queue builds in the modem or the ISP's \
                 router, where this policy cannot order or drop it",
                sprint_rate(link),
                context.map_or(String::new(), |c| format!(", {}", c.0))
            ),
            fix,
        )
        .line(cx.qdisc_line(q)),
    )
}

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let Some(root) = cx.qdiscs.first() else {
        return;
    };
    let rate = root_rate(cx);
    let at = cx.qdisc_at(root);
    let line = cx.qdisc_line(root);
    let is_cake = matches!(root.options, QdiscOptions::Cake(_));
    if let (Some(link), Some((rate, _, _))) = (cx.line.rate, rate) {
        out.extend(over_line(cx, root, rate, link, None));
    }
    if let (Some(link), Some(queues)) = (cx.line.rate, mq_shapers(cx, root)) {
        let sum = queues.iter().fold(0u64, |s, q| s.saturating_add(q.1));
        let each: Vec<String> = queues
            .iter()
            .take(4)
            .map(|(q, r)| format!("{} {} {}", q.kind, q.handle, sprint_rate(*r)))
            .collect();
        let context = format!(
            "the sum of its {} transmit queues' shapers ({}{}), which send side by side (mq serves \
             each queue on its own)",
            queues.len(),
            each.join(", "),
            if queues.len() > each.len() { ", …" } else { "" }
        );
        out.extend(over_line(
            cx,
            root,
            sum,
            link,
            Some((context, queues.len())),
        ));
    }
    // A shaper further down with nothing above it that shapes (a TBF in a PRIO band, an HTB under a
    // DRR class): its traffic meets the line at the shaper's rate. Below a class's ceil or another
    // shaper, that one bounds it (and is judged itself); an mq queue's is in the sum above.
    if let Some(link) = cx.line.rate {
        for q in cx.qdiscs.iter().skip(1) {
            let under_mq = root.kind == "mq" && q.parent.major() == root.handle.major();
            if q.parent == Handle::INGRESS || q.parent == Handle::ROOT || under_mq {
                continue;
            }
            let Some((r, _, _)) = shapes_at(cx, q) else {
                continue;
            };
            if limit_above(cx, q).is_some() {
                continue;
            }
            let owner = cx.qdisc(Handle(q.parent.0 & 0xffff_0000));
            let context = format!(
                "with nothing above it that shapes (it hangs on class {}{})",
                q.parent,
                owner.map_or(String::new(), |o| format!(" of {} {}", o.kind, o.handle))
            );
            out.extend(over_line(cx, q, r, link, Some((context, 1))));
        }
    }
    if let Some(OverLine { sends, link, over }) = htb_over_line(cx) {
        let why = match over.first() {
            Some(OverCeil {
                class: c,
                children: kids,
                ceil,
            }) => format!(
                "the children of {c} are guaranteed {} in all, which HTB lets them send without \
                 asking {c}, whose ceil is {}",
                sprint_rate(*kids),
                sprint_rate(*ceil)
            ),
            None => "its top classes send up to their ceilings side by side".to_string(),
        };
        out.push(
            Finding::new(
                "shaper-at-line-rate",
                at.clone(),
                format!(
                    "sends up to {} when every class is busy, on a {} line ({why}): the queue builds \
                     in the modem or the ISP's router, where this policy cannot order or drop it",
                    sprint_rate(sends),
                    sprint_rate(link)
                ),
                if over.is_empty() {
                    format!(
                        "put the top classes under one class of about {} (90 %) and let them \
                         borrow from it (`ceil`)",
                        sprint_rate(link * 9 / 10)
                    )
                } else {
                    format!(
                        "make the guaranteed rates add up to a little below the line, e.g. {} \
                         (90 %), and give the rest as ceil (borrowing)",
                        sprint_rate(link * 9 / 10)
                    )
                },
            )
            .line(line),
        );
    }
    gso(cx, rate, out);
    atm_overhead(cx, out);
    aqm_target(cx, out);
    aqm_target_interval(cx, out);
    if cx.line.atm {
        // A size table on the root with linklayer atm (or an overhead) accounts for the cells too.
        let stab_covers = root
            .stab
            .as_ref()
            .is_some_and(|s| s.linklayer == 2 || s.overhead != 0);
        if let Some((_, linklayer, overhead)) = rate.filter(|_| !stab_covers) {
            // CAKE's overhead without its `atm` mode still counts bytes, not cells.
            if linklayer != LinkLayer::Atm && (overhead == 0 || is_cake) {
                out.push(
                    Finding::new(
                        "linklayer-missing",
                        at,
                        "the line is ATM, but the shaper counts bytes as Ethernet: a 1500-byte packet \
                         costs 12–16 % more on the line than the shaper thinks (32 or 33 cells of 53 \
                         bytes for 48, with the encapsulation's overhead), a small one up to twice as \
                         much",
                        if is_cake {
                            "add the framing's keyword to the cake line (`pppoe-llcsnap`, \
                             `pppoa-vcmux`…; or `atm overhead N`)"
                        } else if root.kind == "hfsc" {
                            // HFSC's curves take no link layer: only a size table charges cells.
                            "put a size table on the root qdisc: `tc qdisc add dev DEV root handle 1: \
                             stab linklayer atm overhead N mtu 2048 hfsc …` (N from your encapsulation: \
                             40 for PPPoE over LLC/SNAP, 10 for PPPoA VC-mux…)"
                        } else {
                            "add `linklayer atm overhead N` (N from your encapsulation: 40 for PPPoE \
                             over LLC/SNAP, 10 for PPPoA VC-mux…) to every class's rate and ceil, or a \
                             `stab linklayer atm overhead N` on the root qdisc"
                        },
                    )
                    .line(line),
                );
            }
        }
    }
}

/// `MAX_TCP_HEADER + 1` on x86-64: what a TCP socket takes off its device's `gso_max_size`
/// (`sk_dst_gso_max_size`), as tclab-tcp's `tso.rs` does.
const GSO_HEADROOM: u32 = 321;

/// The release from which TCP builds GSO packets whatever the device's offloads say: 4.19's "tcp:
/// switch to GSO being always on" gives every TCP socket `NETIF_F_GSO` in `sk_setup_caps`, and the
/// segments are cut in software after the qdisc (`validate_xmit_skb`).
const GSO_ALWAYS_ON: (u32, u32) = (4, 19);

/// Offloads: below 100 Mbit/s a 64 KB super-packet holds the link for milliseconds — where the root
/// takes them whole. TBF splits a GSO packet larger than its bucket into segments itself
/// (`tbf_segment`), CAKE unless told not to (`split-gso`); an ifb receives what GRO built on the device
/// that redirects to it, which `ethtool -K ifb0 tso off gso off` does not change.
///
/// What keeps them from the shaper follows the kernel (`--kernel`, else a current one): before 4.19
/// `ethtool -K DEV tso off gso off` made TCP build one-MSS skbs; since then only the device's GSO
/// limits do (`ip link set DEV gso_max_segs 1`, or a small `gso_max_size`).
fn gso(cx: &DevCx, rate: Option<(u64, LinkLayer, u16)>, out: &mut Vec<Finding>) {
    let Some(root) = cx.qdiscs.first() else {
        return;
    };
    let splits = match &root.options {
        QdiscOptions::Cake(c) => c.split_gso != Some(0),
        QdiscOptions::Tbf(_) => true,
        _ => false,
    };
    if splits || cx.dev.kind == DevKind::Ifb {
        return;
    }
    let always_on = cx.opts.kernel.is_none_or(|k| k >= GSO_ALWAYS_ON);
    let offloads = cx.dev.tso_on() || cx.dev.gso_on();
    if !always_on && !offloads {
        return;
    }
    // The largest skb TCP builds for the device: `gso_max_segs` MSS-sized segments, within
    // `gso_max_size` less the headroom (`tcp_xmit_size_goal`), as frames of the MTU.
    let mss = cx.dev.mtu.saturating_sub(40).max(1);
    let frames = (cx.dev.gso_max_size.min(65536).saturating_sub(GSO_HEADROOM) / mss)
        .max(1)
        .min(cx.dev.gso_max_segs.max(1));
    if frames <= 1 {
        return;
    }
    let Some((rate, _, _)) = rate.filter(|r| r.0 < 12_500_000 && r.0 > 0) else {
        return;
    };
    // Uncapped, the 64 KB the check has always named; capped, the frames the cap leaves.
    let capped = cx.dev.gso_max_size < 65536 || cx.dev.gso_max_segs < 65536 / mss;
    let (bytes, size) = if capped {
        let bytes = frames * cx.mtu;
        (bytes, format!("{bytes} bytes ({frames} frames)"))
    } else {
        (65536, "64 KB".to_string())
    };
    let ms = bytes as f64 * 1e3 / rate as f64;
    // What the policy left on: `sg off` drops both, `tx off` TSO alone (`netdev_fix_features`).
    let on = match (cx.dev.tso_on(), cx.dev.gso_on()) {
        (true, true) => "TSO/GSO are on (Linux's default",
        (true, false) => "TSO is on (Linux's default",
        _ => "GSO is on (Linux's default",
    };
    let (why, fix) = if !always_on {
        (
            format!("{on}; nothing here turns that off)"),
            format!(
                "turn them off before shaping: `ethtool -K {} tso off gso off` (sqm-scripts does), \
                 or shape with cake, which splits them (`split-gso`, its default)",
                cx.name
            ),
        )
    } else {
        let kernel = cx
            .opts
            .kernel
            .map_or("a current kernel".to_string(), |(a, b)| {
                format!("Linux {a}.{b}")
            });
        (
            if offloads {
                format!(
                    "{on}), and on {kernel} TCP builds GSO packets whatever the offloads say \
                     (since 4.19)"
                )
            } else {
                format!(
                    "TSO/GSO are off, but on {kernel} TCP builds GSO packets whatever the offloads \
                     say (since 4.19: they are cut into frames after the qdisc)"
                )
            },
            format!(
                "cap them before shaping: `ip link set dev {} gso_max_segs 1` for a host's own \
                 traffic (`ethtool -K … tso off gso off` no longer does it), `ethtool -K IN gro off` \
                 on the interface a router's traffic arrives on; or shape with cake, which splits \
                 them (`split-gso`, its default)",
                cx.name
            ),
        )
    };
    out.push(
        Finding::new(
            "gso-bursts",
            cx.qdisc_at(root),
            format!(
                "{why}: the stack hands the shaper packets of up to {size}, each holding the {} link \
                 for {ms:.0} ms, with nothing else sent meanwhile",
                sprint_rate(rate)
            ),
            fix,
        )
        .line(cx.qdisc_line(root)),
    );
}

/// ATM accounting with an overhead of 0, or one no encapsulation has. On ADSL every packet travels
/// with its encapsulation's bytes (8 for IPoA VC-mux up to 40 for PPPoE over LLC/SNAP, a few more with
/// a VLAN tag or an FCS) in 48-byte cells: `linklayer atm` without them counts the cells of the bare
/// packet, one cell short for a third of packet sizes and for every small one; an overhead beyond 64
/// bytes charges cells the line never sends.
pub(super) fn atm_overhead(cx: &DevCx, out: &mut Vec<Finding>) {
    // (what, where, its line, the overhead) for every ATM accounting of the device.
    let mut atm: Vec<(String, String, Option<&str>, i64)> = Vec::new();
    for q in &cx.qdiscs {
        if let Some(s) = q.stab.as_ref().filter(|s| s.linklayer == 2) {
            atm.push((
                "its size table".into(),
                cx.qdisc_at(q),
                cx.qdisc_line(q),
                s.overhead as i64,
            ));
        }
        match &q.options {
            QdiscOptions::Tbf(t) if t.rate.linklayer == LinkLayer::Atm => atm.push((
                "its rate".into(),
                cx.qdisc_at(q),
                cx.qdisc_line(q),
                t.rate.overhead as i64,
            )),
            QdiscOptions::Cake(c) if c.atm == Some(tclab_core::qdisc::cake::atm::ATM) => {
                atm.push((
                    "cake's `atm`".into(),
                    cx.qdisc_at(q),
                    cx.qdisc_line(q),
                    c.overhead.unwrap_or(0) as i64,
                ))
            }
            _ => {}
        }
    }
    // HTB classes: one entry for the classes of a qdisc that share an overhead (one cause).
    for c in &cx.classes {
        let Some(ClassOptions::Htb(o)) = &c.options else {
            continue;
        };
        for r in [&o.rate, &o.ceil] {
            if r.linklayer != LinkLayer::Atm {
                continue;
            }
            let what = format!("the classes of htb {}:", c.classid.major());
            if !atm
                .iter()
                .any(|(w, _, _, ov)| *w == what && *ov == r.overhead as i64)
            {
                atm.push((
                    what,
                    format!("{} class htb {}", cx.name, c.classid),
                    cx.class_line(c.classid),
                    r.overhead as i64,
                ));
            }
        }
    }
    for (what, at, line, overhead) in atm {
        // "the classes of htb 1:" count; "its rate", "cake's `atm`" counts.
        let count = if what.starts_with("the classes") {
            "count"
        } else {
            "counts"
        };
        let message = if overhead == 0 {
            format!(
                "{what} {count} ATM cells with an overhead of 0: every packet also carries its \
                 encapsulation (8 to 40 bytes and more), so the shaper misses a cell for a third of \
                 packet sizes and for every small one — a 40-byte ACK takes 2 cells on PPPoE, not 1 — \
                 and the line fills behind it"
            )
        } else if !(1..=64).contains(&overhead) {
            format!(
                "{what} {count} ATM cells with an overhead of {overhead} bytes, which no encapsulation \
                 has (8 for IPoA VC-mux up to 40 for PPPoE LLC/SNAP, a few more with VLAN or FCS): \
                 the shaper charges cells the line never sends"
            )
        } else {
            continue;
        };
        out.push(
            Finding::new(
                "atm-overhead",
                at,
                message,
                "give the encapsulation's overhead: `overhead 40` for PPPoE over LLC/SNAP, 32 for \
                 PPPoE VC-mux, 10 for PPPoA VC-mux, 14 for PPPoA LLC (cake: `pppoe-llcsnap`, …)",
            )
            .line(line),
        );
    }
}

/// The fastest a qdisc's packets can leave: the ceilings of the classes above it, the rates of the
/// TBF and CAKE shapers above it, and the line; `None` when nothing bounds it.
fn drain_rate(cx: &DevCx, q: &QdiscInfo) -> Option<u64> {
    let rate = limit_above(cx, q)
        .unwrap_or(u64::MAX)
        .min(cx.line.rate.unwrap_or(u64::MAX));
    (rate != u64::MAX && rate > 0).then_some(rate)
}

/// What the policy itself bounds a qdisc's packets to: the ceilings (HFSC: upper limits) of the
/// classes above it and the rates of the TBF and CAKE shapers above it; `None` when nothing does.
fn limit_above(cx: &DevCx, q: &QdiscInfo) -> Option<u64> {
    let mut rate = u64::MAX;
    let mut p = q.parent;
    for _ in 0..64 {
        if p == Handle::ROOT {
            break;
        }
        if let Some(c) = cx.class(p) {
            match &c.options {
                Some(ClassOptions::Htb(o)) => rate = rate.min(o.ceil.rate),
                Some(ClassOptions::Hfsc(o)) => {
                    if let Some(ul) = o.usc {
                        rate = rate.min(ul.m2 as u64)
                    }
                }
                _ => {}
            }
            if c.parent != Handle::ROOT && c.parent.major() == p.major() && c.parent != p {
                p = c.parent;
                continue;
            }
        }
        // Up to the qdisc that owns class `p`.
        let Some(owner) = cx.qdisc(Handle(p.0 & 0xffff_0000)) else {
            break;
        };
        match &owner.options {
            QdiscOptions::Tbf(t) => rate = rate.min(t.rate.rate),
            QdiscOptions::Cake(c) => {
                rate = rate.min(c.base_rate.filter(|r| *r > 0).unwrap_or(u64::MAX))
            }
            _ => {}
        }
        p = owner.parent;
    }
    (rate != u64::MAX).then_some(rate)
}

/// fq_codel's and CoDel's `target` below the time one full frame takes at the rate they drain at
/// (RFC 8289 §4.4, RFC 8290 §5.2.3: at low rates, the target must be at least one MTU's transmission
/// time). CoDel never drops the last MTU of a queue, so TCP still fills the rate; but any second packet
/// is above target, and CoDel drops far more than it needs to (simulated at 256 kbit/s: 56 segments
/// retransmitted in 30 s against 15 with a target of a frame's time and a half, at the same rate). A
/// note, one for a device's AQM leaves with one target.
pub(super) fn aqm_target(cx: &DevCx, out: &mut Vec<Finding>) {
    let mut short: Vec<(&tclab_core::engine::QdiscInfo, u32, u64)> = Vec::new();
    for q in &cx.qdiscs {
        let target = match &q.options {
            QdiscOptions::FqCodel(o) => o.target,
            QdiscOptions::Codel(o) => o.target,
            _ => continue,
        };
        let target = target.unwrap_or(5000);
        let Some(rate) = drain_rate(cx, q) else {
            continue;
        };
        let frame_us = cx.mtu as u64 * 1_000_000 / rate;
        if (target as u64) < frame_us {
            short.push((q, target, rate));
        }
    }
    let mut targets: Vec<u32> = short.iter().map(|s| s.1).collect();
    targets.dedup();
    for t in targets {
        let group: Vec<_> = short.iter().filter(|s| s.1 == t).collect();
        let (q, _, rate) = group[0];
        let fastest = group.iter().map(|g| g.2).max().unwrap_or(*rate);
        let frame_ms = cx.mtu as f64 * 1e3 / fastest as f64;
        let names: Vec<String> = group
            .iter()
            .map(|g| format!("{} {}", g.0.kind, g.0.handle))
            .collect();
        out.push(
            Finding::new(
                "aqm-target-short",
                cx.qdisc_at(q),
                format!(
                    "target {:.1} ms ({}) is less than one {}-byte frame takes at {} ({frame_ms:.1} ms): \
                     whenever a second packet waits, the queue is above target, and CoDel drops several \
                     times as many packets as with a target of a frame's time (TCP still fills the rate; \
                     it retransmits more)",
                    t as f64 / 1000.0,
                    names.join(", "),
                    cx.mtu,
                    sprint_rate(fastest)
                ),
                format!(
                    "`target {:.0}ms` (a frame's time and a half) and `interval` about 20 times that, as \
                     sqm-scripts does below 4 Mbit/s; or cake, which adjusts its target to the rate",
                    (frame_ms * 1.5).ceil()
                ),
            )
            .line(cx.qdisc_line(q)),
        );
    }
}

/// fq_codel's and CoDel's `target` at or above their `interval`: CoDel acts only once packets have
/// waited longer than `target` for a whole `interval` (`codel_should_drop`), so it keeps a standing
/// queue of about `target` — 200 ms where it should keep 5 — and the two look swapped (RFC 8289 §4.4:
/// target 5-10 % of interval; sqm-scripts' slowest lines stay below 80 %). Simulated, four CUBIC flows
/// through HTB 10mbit with `codel target 200ms interval 100ms`: ping p50 216 ms against 49 ms with
/// CoDel's defaults; under fq_codel the class held 168 ms of queue against 8 ms.
pub(super) fn aqm_target_interval(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in &cx.qdiscs {
        let (target, interval) = match &q.options {
            QdiscOptions::FqCodel(o) => (o.target, o.interval),
            QdiscOptions::Codel(o) => (o.target, o.interval),
            _ => continue,
        };
        let (target, interval) = (target.unwrap_or(5000), interval.unwrap_or(100_000));
        if target < interval {
            continue;
        }
        out.push(
            Finding::new(
                "aqm-target-interval",
                cx.qdisc_at(q),
                format!(
                    "target {} is not below interval {}: {} drops only after packets have waited \
                     more than target for a whole interval, so it keeps a standing queue of about {} of \
                     delay where the default keeps 5ms (target is meant to be 5-10 % of interval: the \
                     two look swapped)",
                    sprint_time(target),
                    sprint_time(interval),
                    q.kind,
                    sprint_time(target)
                ),
                format!(
                    "`{} target 5ms interval 100ms` (the defaults; at rates below 4 Mbit/s a target of a \
                     frame's time and a half, interval about 20 times that)",
                    q.kind
                ),
            )
            .line(cx.qdisc_line(q)),
        );
    }
}
