//! The shaper against the line: its rate, the line's ATM cells, the offloads' super-packets.

use super::{DevCx, Finding};
use crate::util::sprint_rate;
use tclab_core::engine::DevKind;
use tclab_core::qdisc::{ClassOptions, QdiscOptions};
use tclab_core::units::LinkLayer;
use tclab_core::Handle;

/// What the root qdisc shapes at: (rate in bytes/s, `u64::MAX` for none; link layer; overhead).
pub(super) fn root_rate(cx: &DevCx) -> Option<(u64, LinkLayer, u16)> {
    let root = cx.qdiscs.first()?;
    match &root.options {
        QdiscOptions::Tbf(t) => Some((t.rate.rate, t.rate.linklayer, t.rate.overhead)),
        QdiscOptions::Htb(_) => cx
            .classes
            .iter()
            .filter(|c| c.parent == Handle::ROOT && c.classid.major() == root.handle.major())
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
                .classes
                .iter()
                .filter(|c| c.parent == root.handle && c.classid != root.handle)
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

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let Some(root) = cx.qdiscs.first() else {
        return;
    };
    let rate = root_rate(cx);
    let at = cx.qdisc_at(root);
    let line = cx.qdisc_line(root);
    let is_cake = matches!(root.options, QdiscOptions::Cake(_));
    // HFSC's top class without an upper limit, which the shaper finding names.
    let unlimited_top = cx
        .classes
        .iter()
        .filter(|c| c.parent == root.handle && c.classid != root.handle)
        .find(|c| matches!(&c.options, Some(ClassOptions::Hfsc(o)) if o.usc.is_none()))
        .map(|c| c.classid);
    if let (Some(link), Some((rate, _, _))) = (cx.line.rate, rate) {
        // CAKE charges what the line charges (its overhead keywords), so its own rate may be the line's.
        if rate > link || (rate == link && !is_cake) {
            out.push(
                Finding::new(
                    "shaper-at-line-rate",
                    at.clone(),
                    format!(
                        "shapes at {} on a {} line: the queue builds in the modem or the ISP's router, \
                         where this policy cannot order or drop it",
                        match (rate, is_cake) {
                            (u64::MAX, true) => "no rate (cake unlimited)".to_string(),
                            (u64::MAX, false) => match unlimited_top {
                                Some(c) => format!("no rate (top class {c} has no `ul`)"),
                                None => "no rate".to_string(),
                            },
                            _ => sprint_rate(rate),
                        },
                        sprint_rate(link)
                    ),
                    if is_cake {
                        format!(
                            "give cake the line's rate, `bandwidth {}` (with the line's overhead \
                             keyword, CAKE can run at 100 % upstream; 90–95 % for an ingress shaper \
                             behind the line)",
                            sprint_rate(link)
                        )
                    } else if root.kind == "hfsc" {
                        format!(
                            "give the top classes upper limits that add up to a little below the line, \
                             e.g. `ul rate {}` (90 %) on a single top class",
                            sprint_rate(link * 9 / 10)
                        )
                    } else {
                        format!(
                            "shape a little below the line, e.g. {} (90 %)",
                            sprint_rate(link * 9 / 10)
                        )
                    },
                )
                .line(line),
            );
        }
    }
    gso(cx, rate, out);
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

/// Offloads: below 100 Mbit/s a 64 KB super-packet holds the link for milliseconds — where the root
/// takes them whole. TBF splits a GSO packet larger than its bucket into segments itself
/// (`tbf_segment`), CAKE unless told not to (`split-gso`); an ifb receives what GRO built on the device
/// that redirects to it, which `ethtool -K ifb0 tso off gso off` does not change.
fn gso(cx: &DevCx, rate: Option<(u64, LinkLayer, u16)>, out: &mut Vec<Finding>) {
    let Some(root) = cx.qdiscs.first() else {
        return;
    };
    let splits = match &root.options {
        QdiscOptions::Cake(c) => c.split_gso != Some(0),
        QdiscOptions::Tbf(_) => true,
        _ => false,
    };
    if splits || cx.dev.kind == DevKind::Ifb || !(cx.dev.tso || cx.dev.gso) {
        return;
    }
    let Some((rate, _, _)) = rate.filter(|r| r.0 < 12_500_000 && r.0 > 0) else {
        return;
    };
    let ms = 65536.0 * 1e3 / rate as f64;
    out.push(
        Finding::new(
            "gso-bursts",
            cx.qdisc_at(root),
            format!(
                "TSO/GSO are on (Linux's default; nothing here turns them off): the stack hands the \
                 shaper packets of up to 64 KB, each holding the {} link for {ms:.0} ms, with nothing \
                 else sent meanwhile",
                sprint_rate(rate)
            ),
            format!(
                "turn them off before shaping: `ethtool -K {} tso off gso off` (sqm-scripts does), or \
                 shape with cake, which splits them (`split-gso`, its default)",
                cx.name
            ),
        )
        .line(cx.qdisc_line(root)),
    );
}
