//! HTB and HFSC trees: default classes, quantum, ceilings, bursts, rates against the parent, queue
//! delay of FIFO leaves, classes nothing reaches, filters where the discipline never reads them; and
//! an mq root's transmit queues left without the tree the others have.

use super::{DevCx, Finding, HZ};
use crate::util::{calc_xmitsize, calc_xmittime, sprint_rate};
use std::collections::{BTreeMap, BTreeSet};
use tclab_core::engine::QdiscInfo;
use tclab_core::filter::ETH_P_ALL;
use tclab_core::qdisc::hfsc::{HfscClassOptions, ServiceCurve};
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
use tclab_core::qdisc::{ClassInfo, ClassOptions, QdiscOptions};
use tclab_core::Handle;

/// What the tree rules of one device share, computed once.
struct Facts {
    /// Classes whose `unreached-class` another finding carries (see [`unreached_elsewhere`]).
    elsewhere: BTreeSet<u32>,
    /// The qdiscs whose classes are chosen by skb->priority from outside tc.
    by_priority: BTreeSet<u32>,
}

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let facts = Facts {
        elsewhere: unreached_elsewhere(cx),
        by_priority: cx
            .qdiscs
            .iter()
            .filter(|q| matches!(q.kind, "htb" | "hfsc") && priority_classified(cx, q.handle))
            .map(|q| q.handle.0)
            .collect(),
    };
    for q in &cx.qdiscs {
        match &q.options {
            QdiscOptions::Htb(h) => htb(cx, &facts, q, h, out),
            QdiscOptions::Hfsc(h) => hfsc(cx, &facts, q, h.defcls, out),
            _ => {}
        }
    }
    filters_on_classes(cx, out);
    classes_by_priority(cx, &facts, out);
    mq_default_queues(cx, out);
    fifos_below_packet(cx, out);
}

/// A pfifo or bfifo elsewhere than under an HTB or HFSC class (those are judged with their class, in
/// [`queue_short`]): the root, a TBF's or a PRIO band's child, a DRR class's. One that cannot hold a
/// full frame drops every full-size packet there too (`bfifo limit 1000` as the root: nothing of a
/// TCP transfer gets through). Fewer than three frames is said only of a shaped class's leaf.
fn fifos_below_packet(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in &cx.qdiscs {
        let under_classes = q.parent != Handle::ROOT
            && cx
                .qdiscs
                .iter()
                .any(|p| matches!(p.kind, "htb" | "hfsc") && p.handle.major() == q.parent.major());
        if q.parent == Handle::INGRESS || under_classes {
            continue;
        }
        if let Some(f) = fifo_short(cx, &cx.qdisc_at(q), q, false) {
            if f.code == "queue-below-packet" {
                out.push(f);
            }
        }
    }
}

/// An mq root gives every transmit queue a default qdisc (`mq_init`: pfifo_fast, handle 0:) and the
/// policy replaces them one by one (`parent 7fff:1` …). Where it built some queues' trees and left
/// others at the default — written for fewer queues than the device has (LibreQoS's one tree per CPU,
/// on a host with more) — the flows the device's hash puts on those queues get none of the policy:
/// unshaped, at the line's rate.
fn mq_default_queues(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in cx
        .qdiscs
        .iter()
        .filter(|q| q.kind == "mq" && q.parent == Handle::ROOT)
    {
        let child = |c: &ClassInfo| cx.qdiscs.iter().find(|x| x.parent == c.classid);
        let queues: Vec<&ClassInfo> = cx.classes_of(q.handle.major()).collect();
        let (default, built): (Vec<&ClassInfo>, Vec<&ClassInfo>) = queues
            .iter()
            .partition(|c| child(c).is_none_or(|x| x.handle.0 == 0));
        if default.is_empty() || built.is_empty() {
            continue;
        }
        let names = |cs: &[&ClassInfo]| {
            let ids: Vec<String> = cs.iter().map(|c| c.classid.to_string()).collect();
            match ids.len() {
                1..=4 => ids.join(", "),
                n => format!("{} … {} ({n} queues)", ids[0], ids[n - 1]),
            }
        };
        let kind = default
            .iter()
            .find_map(|c| child(c))
            .map_or("default", |x| x.kind);
        out.push(
            Finding::new(
                "mq-queue-unshaped",
                cx.qdisc_at(q),
                format!(
                    "{} of the device's {} transmit queues {} mq's default {kind} ({}), while {} \
                     {} the policy's tree: the flows {}'s hash puts on those queues (about {} in {}) \
                     skip the policy, unshaped",
                    default.len(),
                    queues.len(),
                    if default.len() == 1 { "keeps" } else { "keep" },
                    names(&default),
                    names(&built),
                    if built.len() == 1 { "has" } else { "have" },
                    cx.name,
                    default.len(),
                    queues.len()
                ),
                format!(
                    "add the same tree under each of them (`parent {}` …), looping over the device's \
                     queues rather than the CPUs the script assumed; or give {} only as many queues as \
                     there are trees (`ethtool -L {} combined {}`)",
                    default[0].classid,
                    cx.name,
                    cx.name,
                    built.len()
                ),
            )
            .line(cx.qdisc_line(q)),
        );
    }
}

fn htb_opts(c: &ClassInfo) -> Option<&HtbClassOptions> {
    match &c.options {
        Some(ClassOptions::Htb(o)) => Some(o),
        _ => None,
    }
}

/// HTB's quantum when the class gives none: rate / r2q, clamped into 1000..200000 (`htb_change_class`).
fn computed_quantum(rate: u64, r2q: u32) -> (u64, u32) {
    let q = rate / r2q.max(1) as u64;
    (q, q.clamp(1000, 200_000) as u32)
}

fn htb(cx: &DevCx, facts: &Facts, q: &QdiscInfo, h: &HtbOptions, out: &mut Vec<Finding>) {
    let mine: Vec<&ClassInfo> = cx
        .classes_of(q.handle.major())
        .filter(|c| htb_opts(c).is_some())
        .collect();
    // Each class's children: how many, and their rates' sum.
    let mut kids: BTreeMap<u32, (usize, u64)> = BTreeMap::new();
    for k in &mine {
        let e = kids.entry(k.parent.0).or_default();
        e.0 += 1;
        e.1 += htb_opts(k).map_or(0, |o| o.rate.rate);
    }
    let at_q = cx.qdisc_at(q);
    let q_line = cx.qdisc_line(q);
    let over_line = (q.parent == Handle::ROOT)
        .then(|| super::line::htb_over_line(cx))
        .flatten();
    if classifies_everything(cx, q.handle) {
        // A catch-all filter at the qdisc: no packet is left for a default.
    } else if h.defcls == 0 {
        out.push(
            Finding::new(
                "no-default",
                at_q.clone(),
                "no `default` class: packets no filter classifies go to HTB's direct queue and leave \
                 at the device's full speed, unshaped",
                "name a leaf class as the default (`htb default 20`) that takes the rest",
            )
            .line(q_line),
        );
    } else {
        let def = Handle(q.handle.0 | h.defcls);
        match cx.class(def).filter(|c| htb_opts(c).is_some()) {
            None => out.push(
                Finding::new(
                    "default-missing",
                    at_q.clone(),
                    format!(
                        "the default class {def} does not exist: unclassified packets go to the \
                         direct queue, unshaped"
                    ),
                    format!("create class {def}, or point `default` at an existing leaf"),
                )
                .line(q_line),
            ),
            Some(c) if htb_opts(c).is_some_and(|o| o.level > 0) => out.push(
                Finding::new(
                    "default-inner",
                    at_q.clone(),
                    format!(
                        "the default class {def} has children: HTB sends unclassified packets to a \
                         default only if it is a leaf, so they go to the direct queue, unshaped"
                    ),
                    "point `default` at a leaf class",
                )
                .line(q_line),
            ),
            _ => {}
        }
    }
    quantum(cx, q, h, &mine, out);
    for c in &mine {
        let o = htb_opts(c).expect("filtered");
        let at = format!("{} class htb {}", cx.name, c.classid);
        let line = cx.class_line(c.classid);
        // htb_change_class looks the parent class up and, not finding it, makes the new class a root
        // class without refusing: a typo or a parent created after its child leaves the class outside
        // every limit its author put above it.
        if let Some(p) = cx.class_parent_written(c.classid).map(Handle) {
            if p.minor() != 0
                && p.major() == c.classid.major()
                && c.parent != p
                && !cx.refused_classids.contains(&p.0)
            {
                out.push(
                    Finding::new(
                        "parent-missing",
                        at.clone(),
                        format!(
                            "it was added under parent {p}, which did not exist at that point: HTB \
                             made it a class at the top of the tree instead of refusing it, so {p}'s \
                             rate and ceil do not hold it (it may send up to its own ceil {}) and \
                             it borrows from nothing above",
                            sprint_rate(o.ceil.rate)
                        ),
                        format!(
                            "create {p} before its children, or correct the parent's classid; then \
                             `tc class show` lists the class with `parent {p}`, not `root`"
                        ),
                    )
                    .line(line),
                );
            }
        }
        if o.ceil.rate < o.rate.rate {
            out.push(
                Finding::new(
                    "ceil-below-rate",
                    at.clone(),
                    format!(
                        "ceil {} is below rate {}: the class can never use the rate it is guaranteed",
                        sprint_rate(o.ceil.rate),
                        sprint_rate(o.rate.rate)
                    ),
                    "make ceil at least the rate (tc's default ceil is the rate)",
                )
                .line(line),
            );
        }
        out.extend(ceil_above_parent(cx, &at, c, o).map(|f| f.line(line)));
        out.extend(bursts(cx, &at, line, o));
        // Children's rates against this class's.
        let (n, sum) = kids.get(&c.classid.0).copied().unwrap_or_default();
        // Where the sum takes the whole tree past the line, that is the finding (shaper-at-line-rate).
        let past_line = over_line
            .as_ref()
            .is_some_and(|l| l.over.iter().any(|o| o.class == c.classid));
        if n > 0 && sum > o.rate.rate && !past_line {
            out.push(
                Finding::new(
                    "rates-exceed-parent",
                    at.clone(),
                    format!(
                        "its {} children are guaranteed {} in all, more than its own rate {}: HTB lets \
                         each child send its own rate without asking the parent, so when they are all \
                         busy the subtree sends the sum, and the parent does not shape it (tclab explain \
                         shows the shares)",
                        n,
                        sprint_rate(sum),
                        sprint_rate(o.rate.rate)
                    ),
                    "lower the children's rates so that they add up to at most the parent's, and give \
                     the rest as ceil (borrowing)",
                )
                .line(line),
            );
        }
        if o.level == 0 {
            out.extend(queue_delay(cx, &at, c.leaf, o.rate.rate).map(|f| f.line(line)));
            out.extend(queue_short(cx, &at, c.leaf));
            let is_default = h.defcls != 0 && c.classid == Handle(q.handle.0 | h.defcls);
            if !is_default
                && !cx.bound(c.classid.0)
                && !facts.by_priority.contains(&q.handle.0)
                && !facts.elsewhere.contains(&c.classid.0)
                && !cx.refused_flowids.contains(&c.classid.0)
            {
                out.push(unreached_class(&at, c.classid).line(line));
            }
        }
    }
}

/// What holds an HTB class to its [`htb_maximum`]: the rate or the ceil of the class at that index of
/// the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    Rate(usize),
    Ceil(usize),
}

/// The most an HTB class can send, in bytes/s, given `(rate, ceil)` of each class from the top class
/// down to it, and what holds it there. A class sends its rate on its own tokens (`htb_class_mode`:
/// HTB_CAN_SEND asks no parent); beyond it, it borrows through its parent, so up to what the parent can
/// pass; and never past its own ceil (its ctokens). A top class borrows from nothing
/// (`htb_activate_prios` puts a borrowing class in its parent's feed, and a top one nowhere), so it
/// passes at most its rate, whatever its ceil.
pub(crate) fn htb_maximum(path: &[(u64, u64)]) -> (u64, Held) {
    let mut cap = (0, Held::Rate(0));
    for (k, &(rate, ceil)) in path.iter().enumerate() {
        if k == 0 || rate > cap.0 {
            cap = (rate, Held::Rate(k));
        }
        if ceil <= cap.0 {
            cap = (ceil, Held::Ceil(k));
        }
    }
    cap
}

/// The HTB classes from `id`'s top class down to `id`: (classid, rate, ceil).
fn htb_path(cx: &DevCx, id: Handle) -> Option<Vec<(Handle, u64, u64)>> {
    let mut path = Vec::new();
    let mut at = Some(id);
    while let Some(c) = at.and_then(|a| cx.class(a)) {
        let o = htb_opts(c)?;
        path.push((c.classid, o.rate.rate, o.ceil.rate));
        at = (c.parent.minor() != 0).then_some(c.parent);
    }
    path.reverse();
    Some(path)
}

/// A ceil above the parent's: `htb_change_class` takes it without a word, but beyond its own rate the
/// class borrows through its parent, which passes no more than its own ceil, so the ceil written is
/// never reached. Said of the class whose ceil is above its own parent's only: a child of such a class,
/// at or below that class's ceil, is that class's finding (one finding per cause).
fn ceil_above_parent(cx: &DevCx, at: &str, c: &ClassInfo, o: &HtbClassOptions) -> Option<Finding> {
    let parent = cx.class(c.parent).filter(|_| c.parent.minor() != 0)?;
    let pc = htb_opts(parent)?.ceil.rate;
    let path = htb_path(cx, c.classid)?;
    let pairs: Vec<(u64, u64)> = path.iter().map(|&(_, r, c)| (r, c)).collect();
    let (limit, held) = htb_maximum(&pairs);
    if o.ceil.rate <= pc || limit >= o.ceil.rate {
        return None;
    }
    let me = path.len() - 1;
    let why = match held {
        Held::Ceil(k) if path[k].0 == c.parent => String::new(),
        Held::Ceil(k) => format!(" ({}'s ceil, further up)", path[k].0),
        Held::Rate(k) if k == me => format!(
            " (its own rate, which HTB lets it send without asking {})",
            c.parent
        ),
        Held::Rate(0) => format!(
            " ({}'s rate: a top class borrows from nothing, so its ceil above its rate is never \
             reached)",
            path[0].0
        ),
        Held::Rate(k) => format!(" ({}'s rate, which it sends on its own tokens)", path[k].0),
    };
    let what = match held {
        Held::Ceil(k) => format!("{}'s ceil", path[k].0),
        Held::Rate(k) if k == me => "its rate".to_string(),
        Held::Rate(k) => format!("{}'s rate", path[k].0),
    };
    Some(Finding::new(
        "ceil-above-parent",
        at,
        format!(
            "ceil {} is above its parent {}'s ceil {}: the kernel accepts it, but beyond its rate the \
             class borrows through {}, which passes no more than its own ceil, so {} sends at most \
             {}{why}",
            sprint_rate(o.ceil.rate),
            c.parent,
            sprint_rate(pc),
            c.parent,
            c.classid,
            sprint_rate(limit),
        ),
        format!(
            "lower the ceil to {} (what tclab explain shows as its maximum), or raise {what} if the \
             class is meant to reach {}",
            sprint_rate(limit),
            sprint_rate(o.ceil.rate)
        ),
    ))
}

/// The burst rules of one HTB class: below one frame, below one timer tick.
fn bursts(cx: &DevCx, at: &str, line: Option<&str>, o: &HtbClassOptions) -> Option<Finding> {
    let burst = calc_xmitsize(o.rate.rate, o.buffer) as u64;
    let cburst = calc_xmitsize(o.ceil.rate, o.cbuffer) as u64;
    let mtu = cx.mtu as u64;
    // What tc gives a bucket by default (`rate / get_hz() + mtu`, get_hz() being 10^9 on a
    // high-resolution kernel), after the same tick rounding: a burst tc chose is not the author's
    // mistake; only bursts the author wrote are judged — unless the user names the kernel's HZ.
    let default_burst = |rate: u64| {
        let bytes = (rate / 1_000_000_000) as u32 + 1600;
        calc_xmitsize(rate, calc_xmittime(rate, bytes)) as u64
    };
    let chose_burst = burst.abs_diff(default_burst(o.rate.rate)) > 2;
    let chose_cburst = cburst.abs_diff(default_burst(o.ceil.rate)) > 2;
    let hz = cx.opts.hz.unwrap_or(HZ);
    let judged = |chosen: bool| chosen || cx.opts.hz.is_some();
    if (chose_burst && burst < mtu) || (chose_cburst && cburst < mtu) {
        return Some(
            Finding::new(
                "burst-below-mtu",
                at,
                format!(
                    "burst {burst} bytes / cburst {cburst} bytes, less than one {mtu}-byte frame: the \
                     class waits for tokens before every full packet"
                ),
                format!("leave burst to tc's default, or give at least {mtu} bytes"),
            )
            .line(line),
        );
    }
    // The ceil's bucket limits borrowing as the rate's limits the guarantee.
    // Tick rounding leaves a burst of exactly rate/HZ a byte or two short: within 1 % is the tick.
    let short = |b: u64, rate: u64| b * 100 < rate / hz * 99;
    let (what, b, rate, chosen) = if judged(chose_burst) && short(burst, o.rate.rate) {
        ("burst", burst, o.rate.rate, chose_burst)
    } else if judged(chose_cburst) && short(cburst, o.ceil.rate) {
        ("cburst", cburst, o.ceil.rate, chose_cburst)
    } else {
        return None;
    };
    Some(
        Finding::new(
            "burst-below-tick",
            at,
            format!(
                "{what} {b} bytes{} is less than what {} sends in one tick of a {hz} Hz timer ({} \
                 bytes): on a tick-based kernel the class cannot reach that rate",
                if chosen { "" } else { " (tc's default)" },
                sprint_rate(rate),
                rate / hz
            ),
            format!("`{what} {}` at least (rate/HZ)", rate / hz + mtu),
        )
        .line(line),
    )
}

/// Quanta that change the sharing. HTB shares a parent's spare bandwidth among the leaves of one
/// priority that borrow from it by deficit round robin, `quantum` bytes a turn — and at least one packet
/// a turn, whatever the quantum (`htb_dequeue_tree` adds a quantum to a negative deficit and moves on).
/// So the shares follow max(quantum, packet). Their author meant rate / r2q (or the quanta they wrote):
/// where the two disagree by more than a quarter — quanta clamped to 200000 for classes of different
/// rates, or quanta below a packet — the leaves are named once, with the shares they get and were meant
/// to get. A lone leaf, a leaf that cannot borrow (ceil = rate), or classes whose quanta keep the rates'
/// proportions say nothing: the quantum changes nothing there.
fn quantum(cx: &DevCx, q: &QdiscInfo, h: &HtbOptions, mine: &[&ClassInfo], out: &mut Vec<Finding>) {
    let by_id = |id: Handle| {
        cx.class(id)
            .filter(|c| c.classid.major() == q.handle.major())
    };
    // The class under the root each leaf borrows through.
    let top = |c: &ClassInfo| -> Handle {
        let mut id = c.classid;
        let mut steps = 0;
        while let Some(p) = by_id(id).map(|k| k.parent).filter(|p| by_id(*p).is_some()) {
            id = p;
            steps += 1;
            if steps > 16 {
                break;
            }
        }
        id
    };
    // Leaves by (top class, prio), each with the share its quantum is meant to give and gets.
    type Group<'c> = ((Handle, u32), Vec<(&'c ClassInfo, f64, f64)>);
    let mut groups: Vec<Group> = Vec::new();
    for c in mine {
        let o = htb_opts(c).expect("filtered");
        if o.level != 0 || o.ceil.rate <= o.rate.rate || c.parent == Handle::ROOT {
            continue;
        }
        let (raw, computed) = computed_quantum(o.rate.rate, h.r2q);
        let meant = if o.quantum == computed {
            raw as f64
        } else {
            o.quantum as f64
        };
        let got = o.quantum.max(cx.mtu) as f64;
        let key = (top(c), o.prio);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push((c, meant, got)),
            None => groups.push((key, vec![(c, meant, got)])),
        }
    }
    for ((top, _), g) in groups.iter().filter(|g| g.1.len() > 1) {
        let meant_sum: f64 = g.iter().map(|x| x.1).sum();
        let got_sum: f64 = g.iter().map(|x| x.2).sum();
        let worst = g
            .iter()
            .map(|x| (x, (x.2 / got_sum) / (x.1 / meant_sum)))
            .max_by(|a, b| (a.1 - 1.0).abs().total_cmp(&(b.1 - 1.0).abs()))
            .expect("two or more");
        if (worst.1 - 1.0).abs() <= 0.25 {
            continue;
        }
        let (c, meant, got) = *worst.0;
        let o = htb_opts(c).expect("filtered");
        let names: Vec<String> = g.iter().map(|x| x.0.classid.to_string()).collect();
        let quanta: Vec<String> = g
            .iter()
            .map(|x| htb_opts(x.0).map_or(0, |o| o.quantum).to_string())
            .collect();
        let below = o.quantum < cx.mtu;
        let biggest = g
            .iter()
            .filter_map(|x| htb_opts(x.0))
            .map(|o| o.rate.rate)
            .max()
            .unwrap_or(1);
        let r2q = (biggest / 200_000 + 1).max(1);
        out.push(
            Finding::new(
                "quantum",
                format!("{} class htb {}", cx.name, c.classid),
                format!(
                    "classes {} share {} by quanta {} bytes{}: {} gets {} % of it where its {} ask \
                     for {} %",
                    names.join(", "),
                    if g.iter().all(|x| x.0.parent == g[0].0.parent) {
                        format!("their parent {}'s spare bandwidth", g[0].0.parent)
                    } else {
                        format!("the spare bandwidth they borrow through {top}")
                    },
                    quanta.join(":"),
                    if below {
                        format!(", and a quantum below one {}-byte packet still sends a packet a turn", cx.mtu)
                    } else {
                        " (HTB clamps rate/r2q to 200000)".to_string()
                    },
                    c.classid,
                    percent(got / got_sum * 100.0),
                    if o.quantum == computed_quantum(o.rate.rate, h.r2q).1 {
                        "rates"
                    } else {
                        "quanta"
                    },
                    percent(meant / meant_sum * 100.0),
                ),
                if below {
                    format!(
                        "give each class a quantum of at least one packet ({} bytes), in proportion to \
                         its rate",
                        cx.mtu
                    )
                } else {
                    format!(
                        "`r2q {r2q}` on `qdisc … htb` keeps every rate/r2q below 200000, or set `quantum` \
                         on each class in proportion to its rate"
                    )
                },
            )
            .line(cx.class_line(c.classid).or(cx.qdisc_line(q))),
        );
    }
}

/// A share in per cent: whole below 1 would read 0 (a class asking for 0.4 % asks for something).
fn percent(p: f64) -> String {
    if p < 1.0 {
        format!("{p:.1}")
    } else {
        format!("{p:.0}")
    }
}

/// Where the filters that leave qdisc `handle`'s default nothing were added, if they do
/// ([`classifies_everything`]): the catch-all matchall's pref and line, or the qdisc's filters as a
/// whole (an ifb's, one per protocol fed).
pub(super) fn default_starved(cx: &DevCx, handle: Handle) -> Option<String> {
    if !classifies_everything(cx, handle) {
        return None;
    }
    let b = cx.dev.find(handle).and_then(|s| s.q.block(handle))?;
    let catch_all = b.catch_all();
    let tp = b.chains.get(&0).into_iter().flatten().find(|tp| {
        tp.protocol == ETH_P_ALL
            && catch_all.is_some()
            && b.tp_filters(tp)
                .first()
                .is_some_and(|(c, _)| *c == catch_all)
            && tp.cls.kind() == "matchall"
    });
    Some(match tp {
        Some(tp) => {
            let at = format!(
                "{} filter parent {handle} pref {} matchall",
                cx.name, tp.prio
            );
            match cx.origins.filter(cx.name, handle, Some(tp.prio)) {
                Some(r) => format!("{at}, {}", r.at),
                None => at,
            }
        }
        None => format!("the filters of {} qdisc {handle}", cx.name),
    })
}

/// Whether the filters at qdisc `handle` leave no packet unclassified: a catch-all `matchall` that
/// sends everything to an existing leaf class (to an inner or missing one, the packets still fall to
/// the default); or, on an ifb fed by redirects of some protocols only, a filter for each of those
/// protocols that matches every packet (`u32 match ip src 0.0.0.0/0`, `match u32 0 0`) — nothing else
/// arrives there.
fn classifies_everything(cx: &DevCx, handle: Handle) -> bool {
    let Some(b) = cx.dev.find(handle).and_then(|s| s.q.block(handle)) else {
        return false;
    };
    let is_leaf = |id: u32| cx.class(Handle(id)).is_some() && cx.is_leaf(Handle(id));
    if b.catch_all().is_some_and(is_leaf) {
        return true;
    }
    if cx.dev.kind != tclab_core::engine::DevKind::Ifb {
        return false;
    }
    let fed = super::ifb::fed_protocols(cx.redirects, cx.name);
    let caught: Vec<u16> = b
        .chains
        .get(&0)
        .into_iter()
        .flatten()
        .filter(|tp| {
            b.u32_nodes(tp).iter().any(|n| {
                n.sel.keys.iter().all(|k| k.mask == 0)
                    && n.link.is_none()
                    && n.exts.actions.is_empty()
                    && n.classid.is_some_and(is_leaf)
            })
        })
        .map(|tp| tp.protocol)
        .collect();
    !fed.is_empty() && fed.iter().all(|p| *p != ETH_P_ALL && caught.contains(p))
}

/// A tree built for classification outside tc: no filter on the device, no CLASSIFY rule anywhere, and
/// the shape LibreQoS's xdp-cpumap-tc drives (a shaper per transmit queue under mq, whose packets arrive
/// with skb->priority set to their class), or more leaves than anyone classifies by hand without a
/// filter (16). One note says so instead of a finding per class; a small tree without filters keeps its
/// `unreached-class` warnings (forgotten filters are the likelier story).
pub(super) fn priority_classified(cx: &DevCx, handle: Handle) -> bool {
    let Some(q) = cx.qdisc(handle) else {
        return false;
    };
    let under_mq = cx
        .qdiscs
        .iter()
        .any(|p| p.kind == "mq" && p.handle.major() == q.parent.major() && !q.parent.is_root());
    let leaves = cx
        .classes_of(handle.major())
        .filter(|c| cx.is_leaf(c.classid))
        .count();
    leaves > 1 && (under_mq || leaves >= 16) && !cx.filtered && !cx.marks.any_classify()
}

fn classes_by_priority(cx: &DevCx, facts: &Facts, out: &mut Vec<Finding>) {
    for q in cx
        .qdiscs
        .iter()
        .filter(|q| facts.by_priority.contains(&q.handle.0))
    {
        let n = cx.classes_of(q.handle.major()).count();
        out.push(
            Finding::new(
                "classes-by-priority",
                cx.qdisc_at(q),
                format!(
                    "no filter and no iptables CLASSIFY rule chooses any of its {n} classes: packets reach \
                     them only by skb->priority set outside tc (LibreQoS's xdp-cpumap-tc, SO_PRIORITY); \
                     without that, everything goes to the default"
                ),
                "nothing, if a tool outside tc classifies (as LibreQoS's does); otherwise add filters \
                 (`flowid 1:10`)",
            )
            .line(cx.qdisc_line(q)),
        );
    }
}

/// A leaf class nothing sends packets to.
fn unreached_class(at: &str, classid: Handle) -> Finding {
    Finding::new(
        "unreached-class",
        at,
        "no filter, iptables CLASSIFY rule or `default` sends packets here: the class stays idle \
         (unless an application sets skb->priority to it)",
        format!("add a filter with `flowid {classid}`, or remove the class"),
    )
}

/// A leaf's FIFO against its class's `rate` (bytes/s): its own pfifo, pfifo_head_drop or bfifo, or the
/// default pfifo of `txqueuelen` packets, holding more than a second. Fair queues (sfq, fq_codel…) isolate flows: a
/// sparse flow does not wait behind the whole queue, so their limit is no delay bound to report.
fn queue_delay(cx: &DevCx, at: &str, leaf: Option<Handle>, rate: u64) -> Option<Finding> {
    let (limit_pkts, limit_bytes, what) = match leaf.and_then(|l| cx.qdisc(l)) {
        Some(lq) => match &lq.options {
            QdiscOptions::Pfifo(f) | QdiscOptions::PfifoHeadDrop(f) => (
                f.limit.map(u64::from),
                None,
                format!("{} {}", lq.kind, lq.handle),
            ),
            QdiscOptions::Bfifo(f) => {
                (None, f.limit.map(u64::from), format!("bfifo {}", lq.handle))
            }
            _ => return None,
        },
        None => (
            Some(cx.dev.txqueuelen as u64),
            None,
            "default pfifo (txqueuelen packets)".to_string(),
        ),
    };
    let bytes = limit_bytes.or(limit_pkts.map(|p| p * cx.mtu as u64))?;
    let secs = bytes as f64 / rate as f64;
    (rate > 0 && secs > 1.0).then(|| {
        Finding::new(
            "queue-delay",
            at,
            format!(
                "its leaf, a {what}, holds {} of full frames: at {} that is {secs:.1} s of queueing \
                 before a packet is dropped",
                match limit_pkts {
                    Some(p) => format!("{p} packets"),
                    None => format!("{bytes} bytes"),
                },
                sprint_rate(rate),
            ),
            "give the leaf a short queue (`pfifo limit 10`) or an AQM (`fq_codel`)",
        )
    })
}

/// A leaf FIFO too short for the class's traffic, written so (tc's default is txqueuelen packets): one
/// that cannot hold a full frame (`bfifo limit 1000`, bytes where packets were meant; `pfifo limit 0`)
/// drops every full-size packet (`bfifo_enqueue` compares backlog plus the packet with the limit), and
/// one of fewer than three drops some of every burst TCP sends while the class waits for tokens.
/// Simulated, one CUBIC flow through HTB 10mbit over 20 ms: 9.51 Mbit/s with `pfifo limit 100`, 8.29
/// with 3, 1.71 with 1, 1.69 with `bfifo limit 3000`, nothing with `bfifo limit 1000`.
fn queue_short(cx: &DevCx, at: &str, leaf: Option<Handle>) -> Option<Finding> {
    fifo_short(cx, at, cx.qdisc(leaf?)?, true)
}

/// [`queue_short`]'s findings for the FIFO `lq`: a class's leaf, or (not `leaf`) the qdisc `at` names.
fn fifo_short(cx: &DevCx, at: &str, lq: &QdiscInfo, leaf: bool) -> Option<Finding> {
    let frame = cx.mtu as u64;
    let (frames, holds) = match &lq.options {
        // pfifo_head_drop with limit 0 drops every arrival too (pfifo_tail_enqueue).
        QdiscOptions::Pfifo(f) | QdiscOptions::PfifoHeadDrop(f) => {
            let p = u64::from(f.limit?);
            (p, format!("{p} packet{}", if p == 1 { "" } else { "s" }))
        }
        QdiscOptions::Bfifo(f) => {
            let b = u64::from(f.limit?);
            (b / frame, format!("{b} bytes"))
        }
        _ => return None,
    };
    if frames >= SHORT_QUEUE_FRAMES {
        return None;
    }
    let (subject, fix) = if leaf {
        (
            format!("its leaf, {} {},", lq.kind, lq.handle),
            "give the leaf",
        )
    } else {
        ("it".to_string(), "give it")
    };
    let f = if frames == 0 {
        Finding::new(
            "queue-below-packet",
            at,
            format!(
                "{subject} holds {holds}, less than one {frame}-byte frame: it drops every \
                 full-size packet, so a TCP transfer gets nothing through{}",
                if lq.kind == "bfifo" {
                    " (a bfifo's limit is in bytes)"
                } else {
                    ""
                }
            ),
            format!(
                "{fix} room for a burst: `{} limit {}`, or an AQM (`fq_codel`)",
                lq.kind,
                if lq.kind == "bfifo" { 100 * frame } else { 100 }
            ),
        )
    } else {
        Finding::new(
            "leaf-queue-short",
            at,
            format!(
                "{subject} holds {holds}{}: while the class waits for tokens, every packet \
                 beyond that is dropped, and TCP, which sends in bursts, loses packets on every burst \
                 and never reaches the rate",
                if lq.kind == "bfifo" {
                    format!(", {frames} full frame{}", if frames == 1 { "" } else { "s" })
                } else {
                    String::new()
                }
            ),
            format!(
                "{fix} room for a burst: `{} limit {}`, or an AQM (`fq_codel`)",
                lq.kind,
                if lq.kind == "bfifo" { 100 * frame } else { 100 }
            ),
        )
    };
    Some(f.line(cx.qdisc_line(lq)))
}

/// Fewer full frames than this in a leaf's FIFO lose packets of every TCP burst (as TBF's limit:
/// `tbf-limit-short`).
const SHORT_QUEUE_FRAMES: u64 = 3;

/// Filters on classes: HTB and HFSC consult a class's filters only after a filter (or skb->priority)
/// chose that class and it is an inner one (`htb_classify`/`hfsc_classify` stop at the first leaf).
fn filters_on_classes(cx: &DevCx, out: &mut Vec<Finding>) {
    for (q, c, is_leaf, b) in unread_filters(cx) {
        // The classes only these filters name get nothing: said here, not once more per class.
        let starved: Vec<String> = b
            .reached_classes()
            .into_iter()
            .filter(|&id| !cx.bound(id) && cx.class(Handle(id)).is_some())
            .map(|id| Handle(id).to_string())
            .collect();
        let starved = if starved.is_empty() {
            String::new()
        } else {
            format!(
                "; the class{} they name, {}, get{} nothing",
                if starved.len() == 1 { "" } else { "es" },
                starved.join(", "),
                if starved.len() == 1 { "s" } else { "" }
            )
        };
        {
            let message = if is_leaf {
                format!(
                    "filters are attached to the leaf class {}: {} reads a class's filters only on the \
                     way down from the qdisc to a leaf, and stops at the first leaf it reaches, so these \
                     filters never see a packet",
                    c.classid,
                    q.kind.to_uppercase()
                )
            } else {
                format!(
                    "filters are attached to the inner class {}, but no filter at the qdisc (or iptables \
                     CLASSIFY rule) sends packets to {}: they are read only after one does",
                    c.classid, c.classid
                )
            };
            out.push(
                Finding::new(
                    "filter-unreached",
                    format!("{} class {} {}", cx.name, q.kind, c.classid),
                    message + &starved,
                    format!(
                        "attach the filters to the qdisc (`parent {}`), or to an inner class a filter \
                         there points to",
                        q.handle
                    ),
                )
                .line(cx.origins.filter(cx.name, c.classid, None).map(|r| r.at.as_str())),
            );
        }
    }
}

/// Filters HTB/HFSC never read: those of a leaf class, or of an inner class nothing sends packets
/// to: (the qdisc, the class they hang on, whether it is a leaf, their block).
fn unread_filters<'c>(
    cx: &'c DevCx,
) -> Vec<(
    &'c QdiscInfo,
    &'c ClassInfo,
    bool,
    &'c tclab_core::filter::Block,
)> {
    let mut out = Vec::new();
    for q in cx
        .qdiscs
        .iter()
        .filter(|q| matches!(q.kind, "htb" | "hfsc"))
    {
        let Some(sched) = cx.dev.find(q.handle) else {
            continue;
        };
        for c in cx
            .classes_of(q.handle.major())
            .filter(|c| c.classid.minor() != 0)
        {
            let Some(b) = sched.q.block(c.classid).filter(|b| !b.is_empty()) else {
                continue;
            };
            let is_leaf = cx.is_leaf(c.classid);
            if is_leaf || !cx.bound(c.classid.0) {
                out.push((q, c, is_leaf, b));
            }
        }
    }
    out
}

/// The leaves whose `unreached-class` is another finding's consequence, said there: a filter that
/// names it is never read (`filter-unreached`), or its qdisc has a filter naming a class that does
/// not exist, likely this one mistyped (`filter-class-missing`).
fn unreached_elsewhere(cx: &DevCx) -> BTreeSet<u32> {
    let mut out: BTreeSet<u32> = unread_filters(cx)
        .iter()
        .flat_map(|(_, _, _, b)| b.reached_classes())
        .collect();
    for q in cx
        .qdiscs
        .iter()
        .filter(|q| matches!(q.kind, "htb" | "hfsc"))
    {
        if super::filters::names_missing_class(cx, q) {
            out.extend(cx.classes_of(q.handle.major()).map(|c| c.classid.0));
        }
    }
    out
}

fn hfsc_opts(c: &ClassInfo) -> Option<HfscClassOptions> {
    match &c.options {
        Some(ClassOptions::Hfsc(o)) => Some(*o),
        _ => None,
    }
}

/// HFSC's default class, and its leaves as HTB's are checked. `hfsc_classify` drops what no filter
/// classifies unless `default` names a leaf (with no `default`, the root class, which is inner once it
/// has children): where HTB lets such packets out unshaped, HFSC loses them.
fn hfsc(cx: &DevCx, facts: &Facts, q: &QdiscInfo, defcls: u16, out: &mut Vec<Finding>) {
    let mine: Vec<&ClassInfo> = cx
        .classes_of(q.handle.major())
        .filter(|c| c.classid != q.handle)
        .collect();
    if mine.is_empty() {
        return; // the root class alone is a leaf and takes everything
    }
    let link = cx.line.rate;
    let is_leaf = |id: Handle| cx.is_leaf(id);
    let at_q = cx.qdisc_at(q);
    let q_line = cx.qdisc_line(q);
    // A leaf to name in the fixes (the last one: often the bulk class).
    let example = mine
        .iter()
        .rev()
        .find(|c| is_leaf(c.classid))
        .map_or(0x20, |c| c.classid.minor());
    let def = Handle(q.handle.0 | defcls as u32);
    if classifies_everything(cx, q.handle) {
        // A catch-all filter at the qdisc: no packet is left for a default.
    } else if defcls == 0 {
        out.push(
            Finding::new(
                "no-default",
                at_q,
                "no `default` class: HFSC drops every packet no filter classifies",
                format!(
                    "name a leaf class as the default that takes the rest (`hfsc default {example:x}`)"
                ),
            )
            .line(q_line),
        );
    } else if cx.class(def).is_none() || def == q.handle {
        out.push(
            Finding::new(
                "default-missing",
                at_q,
                format!(
                    "the default class {def} does not exist: HFSC drops every packet no filter \
                     classifies"
                ),
                format!(
                    "create class {def}, or point `default` at an existing leaf (`hfsc default \
                     {example:x}`)"
                ),
            )
            .line(q_line),
        );
    } else if !is_leaf(def) {
        out.push(
            Finding::new(
                "default-inner",
                at_q,
                format!(
                    "the default class {def} has children: HFSC sends unclassified packets to a \
                     default only if it is a leaf, so it drops them"
                ),
                "point `default` at a leaf class",
            )
            .line(q_line),
        );
    }
    // Real time ignores upper limits: leaves whose `rt` rates add up to more than an ancestor's `ul`
    // (or than the line) send that sum when they are all busy, and the `ul` does not hold.
    let rt_below = |id: Handle| -> u64 {
        let mut sum = 0u64;
        let mut todo = vec![id];
        while let Some(x) = todo.pop() {
            for k in mine.iter().filter(|k| k.parent == x) {
                todo.push(k.classid);
                if is_leaf(k.classid) {
                    sum += hfsc_opts(k)
                        .and_then(|o| o.rsc)
                        .map_or(0, |sc| sc.m2 as u64);
                }
            }
        }
        sum
    };
    let limits = mine
        .iter()
        .filter(|c| !is_leaf(c.classid))
        .filter_map(|c| {
            let ul = hfsc_opts(c).and_then(|o| o.usc).map(|u| u.m2 as u64)?;
            Some((
                format!("{} class hfsc {}", cx.name, c.classid),
                cx.class_line(c.classid),
                c.classid,
                ul,
                "its `ul`",
            ))
        })
        .chain(link.map(|l| (cx.qdisc_at(q), q_line, q.handle, l, "the line")));
    for (at, line, id, limit, what) in limits {
        let rt = rt_below(id);
        if rt > limit {
            out.push(
                Finding::new(
                    "rates-exceed-parent",
                    at,
                    format!(
                        "the real-time rates of the leaves below add up to {}, more than {what} {}: HFSC \
                         serves real time without asking any upper limit, so when they are all busy they \
                         send {} and their deadlines slip",
                        sprint_rate(rt),
                        sprint_rate(limit),
                        sprint_rate(rt)
                    ),
                    "lower the `rt` curves so that they add up to at most the limit; give the rest as \
                     link sharing (`ls`)",
                )
                .line(line),
            );
        }
    }
    for c in mine.iter().filter(|c| is_leaf(c.classid)) {
        let at = format!("{} class hfsc {}", cx.name, c.classid);
        let line = cx.class_line(c.classid);
        if c.classid != def
            && !cx.bound(c.classid.0)
            && !facts.by_priority.contains(&q.handle.0)
            && !facts.elsewhere.contains(&c.classid.0)
            && !cx.refused_flowids.contains(&c.classid.0)
        {
            out.push(unreached_class(&at, c.classid).line(line));
        }
        // Its queue against the rate it is sure of (see `assured`); none known, nothing to say.
        if let Some(rate) = assured(c.classid, q.handle, &mine, link) {
            out.extend(queue_delay(cx, &at, c.leaf, rate).map(|f| f.line(line)));
        }
        out.extend(queue_short(cx, &at, c.leaf));
    }
}

/// The rate an HFSC class can count on when every class is busy, in bytes/s: its real-time rate, or
/// its link-sharing share of what its parent can count on (`ls` m2 among its siblings'), the larger of
/// the two, within its upper limit (or its upper limit alone, when nothing else is known). The root
/// class counts on the line (`--link`), or on nothing known.
pub(super) fn assured(
    id: Handle,
    root: Handle,
    classes: &[&ClassInfo],
    link: Option<u64>,
) -> Option<u64> {
    if id == root {
        return link;
    }
    let c = classes.iter().find(|c| c.classid == id)?;
    let o = hfsc_opts(c)?;
    let m2 = |sc: Option<ServiceCurve>| sc.map(|sc| sc.m2 as u64);
    let share = m2(o.fsc).filter(|&w| w > 0).and_then(|w| {
        let weights: u64 = classes
            .iter()
            .filter(|k| k.parent == c.parent)
            .filter_map(|k| hfsc_opts(k).and_then(|ko| m2(ko.fsc)))
            .sum();
        let parent = assured(c.parent, root, classes, link)?;
        Some((parent as u128 * w as u128 / weights.max(1) as u128) as u64)
    });
    let rate = match (m2(o.rsc), share) {
        (Some(rt), Some(ls)) => Some(rt.max(ls)),
        (rt, ls) => rt.or(ls),
    };
    match (rate, m2(o.usc)) {
        (Some(r), Some(ul)) => Some(r.min(ul)),
        (r, ul) => r.or(ul),
    }
}
