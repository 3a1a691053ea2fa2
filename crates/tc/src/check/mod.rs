//! `tclab check`: what is wrong with a policy, said before it meets a link.
//!
//! The policy is applied to an engine exactly as `tclab tc` and `tclab script run` apply it, so every
//! command the kernel would refuse is found with its message; then the resulting tree is read the way
//! the seeds' authors had to learn to read it — quantum and r2q, rates that add up to more than their
//! parent, bursts too small for the timer, queues that hold a minute of traffic, classes nothing reaches,
//! default classes that do not exist — and each finding gets a stable code, its reason, the fix, and a
//! page in `docs/checks/CODE.md`.
//!
//! Severities: `error` (the policy does not do what it says: a refused command, unclassified traffic
//! that escapes the shaper), `warning` (it works, but not as its author expects), `note` (worth knowing).
//! The exit status is 2 with an error, 1 with a warning, else 0.

use crate::util::{calc_xmitsize, sprint_rate};
use serde::Serialize;
use tclab_core::qdisc::{ClassOptions, QdiscOptions};
use tclab_core::{Engine, Handle};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// Stable code; its page is `docs/checks/CODE.md`.
    pub code: &'static str,
    pub severity: Severity,
    /// Where: `eth0 class 1:20`, `script.sh:12`.
    pub at: String,
    pub message: String,
    pub fix: String,
}

/// Every code `check` can report, with its severity and a one-line summary (the index of
/// `docs/checks/`).
pub const CODES: &[(&str, Severity, &str)] = &[
    (
        "refused",
        Severity::Error,
        "a command the kernel (or tc) refuses",
    ),
    (
        "default-missing",
        Severity::Error,
        "the default class does not exist: unclassified traffic is not shaped (HTB) or dropped (HFSC)",
    ),
    (
        "default-inner",
        Severity::Error,
        "the default class is an inner class: unclassified traffic is not shaped (HTB) or dropped (HFSC)",
    ),
    (
        "no-default",
        Severity::Warning,
        "no default class: unclassified traffic goes out unshaped (HTB) or is dropped (HFSC)",
    ),
    (
        "quantum",
        Severity::Warning,
        "a class's quantum is outside 1000..200000 bytes (r2q)",
    ),
    (
        "rates-exceed-parent",
        Severity::Note,
        "the children's guaranteed rates add up to more than their parent's",
    ),
    (
        "ceil-below-rate",
        Severity::Warning,
        "a class's ceil is below its rate",
    ),
    (
        "burst-below-mtu",
        Severity::Warning,
        "a class's burst or cburst is smaller than one full packet",
    ),
    (
        "burst-below-tick",
        Severity::Warning,
        "a class's burst is smaller than one timer tick of its rate",
    ),
    (
        "queue-delay",
        Severity::Warning,
        "a leaf's queue holds more than a second of traffic at its rate",
    ),
    (
        "unreached-class",
        Severity::Warning,
        "a leaf class no filter, iptables CLASSIFY rule or default sends traffic to",
    ),
    (
        "filter-unreached",
        Severity::Warning,
        "filters attached to a class HTB/HFSC never reads them at (a leaf, or an inner class nothing points to)",
    ),
    (
        "shaper-at-line-rate",
        Severity::Warning,
        "the root shaper's rate is not below the line's, so the queue forms elsewhere",
    ),
    (
        "linklayer-missing",
        Severity::Warning,
        "an ATM/DSL line shaped without linklayer atm or overhead",
    ),
    (
        "ingress-police",
        Severity::Note,
        "ingress policing drops what an ifb shaper would queue",
    ),
    (
        "gso-bursts",
        Severity::Note,
        "TSO/GSO left on under a shaper below 100 Mbit/s: 64 KB super-packets",
    ),
];

/// What the caller knows of the line the policy shapes.
#[derive(Clone, Copy, Debug, Default)]
pub struct LineFacts {
    /// The line's rate in bytes per second (`--link RATE`).
    pub rate: Option<u64>,
    /// The line is ATM/ADSL (`--linklayer atm`).
    pub atm: bool,
}

/// The timer frequency the tick rule assumes: tc itself computes default bursts for HZ 1000 (what
/// /proc/net/psched reports on high-resolution kernels); a kernel built with CONFIG_HZ 100 or 250 and
/// tick-based timers (seed 001's) needs bursts up to ten times larger.
pub const HZ: u64 = 1000;

/// Check the policy `engine` holds. `refusals` are the commands that did not apply: (where, command,
/// message). `device_rates` gives some devices a line rate of their own (`--link DEV=RATE`: a download
/// shaped on an ifb faces the downlink, not the uplink); the others take `line.rate`.
pub fn check(
    engine: &Engine,
    refusals: &[(String, String, String)],
    line: LineFacts,
    device_rates: &[(String, u64)],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (at, cmd, msg) in refusals {
        let first = msg
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no message)");
        out.push(Finding {
            code: "refused",
            severity: Severity::Error,
            at: at.clone(),
            message: format!("`{cmd}` is refused: {first}"),
            fix: "correct the command; until then the policy is not what the script says".into(),
        });
    }
    // iptables CLASSIFY rules: the class they set, and the out-interface they are limited to (`-o`).
    let classify_rules: Vec<(u32, Option<&tclab_core::netfilter::IfaceMatch>)> = engine
        .netfilter()
        .mangle
        .builtin
        .iter()
        .flat_map(|b| b.chain.rules.iter())
        .chain(
            engine
                .netfilter()
                .mangle
                .user
                .values()
                .flat_map(|c| c.rules.iter()),
        )
        .filter_map(|r| match r.target {
            tclab_core::netfilter::Target::Classify(c) => Some((c, r.ip.outiface.as_ref())),
            _ => None,
        })
        .collect();
    for (dev_name, dev) in engine.devices() {
        let classify_targets: Vec<u32> = classify_rules
            .iter()
            .filter(|(_, out)| out.is_none_or(|o| o.matches(Some(dev_name))))
            .map(|&(c, _)| c)
            .collect();
        let line = LineFacts {
            rate: device_rates
                .iter()
                .find(|(d, _)| d == dev_name)
                .map(|&(_, r)| r)
                .or(line.rate),
            ..line
        };
        check_device(engine, dev_name, dev, &classify_targets, line, &mut out);
    }
    out
}

fn check_device(
    engine: &Engine,
    dev_name: &str,
    dev: &tclab_core::engine::Device,
    classify_targets: &[u32],
    line: LineFacts,
    out: &mut Vec<Finding>,
) {
    let qdiscs = dev.qdiscs();
    let classes = dev.classes(0);
    let mtu = dev.mtu + 14;
    // The classes packets can reach: iptables CLASSIFY targets and what the filters a packet can reach
    // (chain 0, or a chain it jumps to) at each qdisc name; then what the reachable filters of each
    // inner class reached name, until nothing is added (a leaf's filters are never read, nor those of
    // an inner class nothing sends packets to).
    let is_inner = |id: Handle| classes.iter().any(|k| k.parent == id && k.classid != id);
    let mut reached: Vec<u32> = classify_targets.to_vec();
    for q in &qdiscs {
        if let Some(b) = dev.find(q.handle).and_then(|s| s.q.block(q.handle)) {
            reached.extend(b.reached_classes());
        }
    }
    loop {
        let before = reached.len();
        for c in classes.iter() {
            let owner = Handle(c.classid.0 & 0xffff_0000);
            if c.classid == owner || !is_inner(c.classid) || !reached.contains(&c.classid.0) {
                continue;
            }
            if let Some(b) = dev.find(owner).and_then(|s| s.q.block(c.classid)) {
                for id in b.reached_classes() {
                    if !reached.contains(&id) {
                        reached.push(id);
                    }
                }
            }
        }
        if reached.len() == before {
            break;
        }
    }
    let bound = |classid: u32| -> bool { reached.contains(&classid) };
    // The root shaper against the line.
    let Some(root) = qdiscs.first() else {
        return; // a device that is down, with nothing attached
    };
    let root_rate = match &root.options {
        QdiscOptions::Tbf(t) => Some((t.rate.rate, t.rate.linklayer, t.rate.overhead)),
        QdiscOptions::Htb(_) => classes
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
            let tops: Vec<Option<u64>> = classes
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
                (
                    sum.unwrap_or(u64::MAX),
                    tclab_core::units::LinkLayer::Ethernet,
                    0,
                )
            })
        }
        // CAKE without `bandwidth` does not shape at all: as if at an infinite rate.
        QdiscOptions::Cake(c) => Some((
            c.base_rate.filter(|r| *r > 0).unwrap_or(u64::MAX),
            if c.atm == Some(tclab_core::qdisc::cake::atm::ATM) {
                tclab_core::units::LinkLayer::Atm
            } else {
                tclab_core::units::LinkLayer::Ethernet
            },
            c.overhead.filter(|_| !c.raw).unwrap_or(0).max(0) as u16,
        )),
        _ => None,
    };
    let is_cake = matches!(root.options, QdiscOptions::Cake(_));
    // HFSC's top class without an upper limit, which the shaper finding names.
    let unlimited_top = classes
        .iter()
        .filter(|c| c.parent == root.handle && c.classid != root.handle)
        .find(|c| matches!(&c.options, Some(ClassOptions::Hfsc(o)) if o.usc.is_none()))
        .map(|c| c.classid);
    if let (Some(link), Some((rate, linklayer, overhead))) = (line.rate, root_rate) {
        // CAKE charges what the line charges (its overhead keywords), so its own rate may be the line's.
        if rate > link || (rate == link && !is_cake) {
            out.push(Finding {
                code: "shaper-at-line-rate",
                severity: Severity::Warning,
                at: format!("{dev_name} qdisc {} {}", root.kind, root.handle),
                message: format!(
                    "shapes at {} on a {} line: the queue builds in the modem or the ISP's router, where \
                     this policy cannot order or drop it",
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
                fix: if is_cake {
                    format!(
                        "give cake the line's rate, `bandwidth {}` (with the line's overhead keyword, \
                         CAKE can run at 100 % upstream; 90–95 % for an ingress shaper behind the line)",
                        sprint_rate(link)
                    )
                } else if root.kind == "hfsc" {
                    format!(
                        "give the top classes upper limits that add up to a little below the line, e.g. \
                         `ul rate {}` (90 %) on a single top class",
                        sprint_rate(link * 9 / 10)
                    )
                } else {
                    format!(
                        "shape a little below the line, e.g. {} (90 %)",
                        sprint_rate(link * 9 / 10)
                    )
                },
            });
        }
        let _ = (linklayer, overhead);
    }
    // Offloads: below 100 Mbit/s a 64 KB super-packet holds the link for milliseconds. CAKE splits them
    // itself unless told not to.
    let splits_gso = matches!(&root.options, QdiscOptions::Cake(c) if c.split_gso != Some(0));
    if let Some((rate, _, _)) = root_rate.filter(|r| r.0 < 12_500_000 && r.0 > 0) {
        if (dev.tso || dev.gso) && !splits_gso {
            let ms = 65536.0 * 1e3 / rate as f64;
            out.push(Finding {
                code: "gso-bursts",
                severity: Severity::Note,
                at: format!("{dev_name} qdisc {} {}", root.kind, root.handle),
                message: format!(
                    "TSO/GSO are on (Linux's default; nothing here turns them off): the stack hands the \
                     shaper packets of up to 64 KB, each holding the {} link for {ms:.0} ms, with \
                     nothing else sent meanwhile",
                    sprint_rate(rate)
                ),
                fix: format!(
                    "turn them off before shaping: `ethtool -K {dev_name} tso off gso off` (sqm-scripts \
                     does), or shape with cake, which splits them (`split-gso`, its default)"
                ),
            });
        }
    }
    if line.atm {
        // A size table on the root with linklayer atm (or an overhead) accounts for the cells too.
        let stab_covers = root
            .stab
            .as_ref()
            .is_some_and(|s| s.linklayer == 2 || s.overhead != 0);
        if let Some((_, linklayer, overhead)) = root_rate.filter(|_| !stab_covers) {
            // CAKE's overhead without its `atm` mode still counts bytes, not cells.
            if linklayer != tclab_core::units::LinkLayer::Atm && (overhead == 0 || is_cake) {
                out.push(Finding {
                    code: "linklayer-missing",
                    severity: Severity::Warning,
                    at: format!("{dev_name} qdisc {} {}", root.kind, root.handle),
                    message: "the line is ATM, but the shaper counts bytes as Ethernet: a 1500-byte \
                              packet costs 12–16 % more on the line than the shaper thinks (32 or 33 \
                              cells of 53 bytes for 48, with the encapsulation's overhead), a small one up \
                              to twice as much"
                        .into(),
                    fix: if is_cake {
                        "add the framing's keyword to the cake line (`pppoe-llcsnap`, `pppoa-vcmux`…; \
                         or `atm overhead N`)"
                            .into()
                    } else if root.kind == "hfsc" {
                        // HFSC's curves take no link layer: only a size table charges cells.
                        "put a size table on the root qdisc: `tc qdisc add dev DEV root handle 1: stab \
                         linklayer atm overhead N mtu 2048 hfsc …` (N from your encapsulation: 40 for \
                         PPPoE over LLC/SNAP, 10 for PPPoA VC-mux…)"
                            .into()
                    } else {
                        "add `linklayer atm overhead N` (N from your encapsulation: 40 for PPPoE over \
                         LLC/SNAP, 10 for PPPoA VC-mux…) to every class's rate and ceil, or a `stab \
                         linklayer atm overhead N` on the root qdisc"
                            .into()
                    },
                });
            }
        }
    }
    // HTB.
    for q in qdiscs.iter() {
        let QdiscOptions::Htb(h) = &q.options else {
            continue;
        };
        let my_classes: Vec<_> = classes
            .iter()
            .filter(|c| c.classid.major() == q.handle.major())
            .collect();
        let at_q = format!("{dev_name} qdisc htb {}", q.handle);
        if classifies_everything(dev, q.handle, &classes) {
            // A catch-all filter at the qdisc: no packet is left for a default.
        } else if h.defcls == 0 {
            out.push(Finding {
                code: "no-default",
                severity: Severity::Warning,
                at: at_q.clone(),
                message:
                    "no `default` class: packets no filter classifies go to HTB's direct queue and \
                          leave at the device's full speed, unshaped"
                        .into(),
                fix: "name a leaf class as the default (`htb default 20`) that takes the rest"
                    .into(),
            });
        } else {
            let def = Handle(q.handle.0 | h.defcls);
            match my_classes.iter().find(|c| c.classid == def) {
                None => out.push(Finding {
                    code: "default-missing",
                    severity: Severity::Error,
                    at: at_q.clone(),
                    message: format!(
                        "the default class {def} does not exist: unclassified packets go to the direct \
                         queue, unshaped"
                    ),
                    fix: format!("create class {def}, or point `default` at an existing leaf"),
                }),
                Some(c) if matches!(&c.options, Some(ClassOptions::Htb(o)) if o.level > 0) => {
                    out.push(Finding {
                        code: "default-inner",
                        severity: Severity::Error,
                        at: at_q.clone(),
                        message: format!(
                            "the default class {def} has children: HTB sends unclassified packets to a \
                             default only if it is a leaf, so they go to the direct queue, unshaped"
                        ),
                        fix: "point `default` at a leaf class".into(),
                    })
                }
                _ => {}
            }
        }
        for c in &my_classes {
            let Some(ClassOptions::Htb(o)) = &c.options else {
                continue;
            };
            let at = format!("{dev_name} class htb {}", c.classid);
            // HTB clamps a quantum computed from rate/r2q into 1000..200000 (with a kernel warning);
            // an explicit one out of that range is kept.
            let computed = o.rate.rate / h.r2q.max(1) as u64;
            let clamped = (computed > 200_000 && o.quantum == 200_000)
                || (computed < 1000 && o.quantum == 1000);
            if o.level == 0 && (o.quantum < 1000 || o.quantum > 200_000 || clamped) {
                let r2q = (o.rate.rate / 10_000).max(1);
                out.push(Finding {
                    code: "quantum",
                    severity: Severity::Warning,
                    at: at.clone(),
                    message: format!(
                        "quantum {} bytes{} (rate {} / r2q {} = {}): {}",
                        o.quantum,
                        if clamped { ", clamped by HTB" } else { "" },
                        sprint_rate(o.rate.rate),
                        h.r2q,
                        computed,
                        if computed < 1000 || o.quantum < 1000 {
                            "smaller than a packet, so borrowing is shared unfairly"
                        } else {
                            "so large that this class sends bursts of many packets while its siblings wait"
                        }
                    ),
                    fix: format!(
                        "set `quantum 1514` on the class, or an r2q that puts every class's rate/r2q \
                         in range (about `r2q {r2q}` for this rate)"
                    ),
                });
            }
            if o.ceil.rate < o.rate.rate {
                out.push(Finding {
                    code: "ceil-below-rate",
                    severity: Severity::Warning,
                    at: at.clone(),
                    message: format!(
                        "ceil {} is below rate {}: the class can never use the rate it is guaranteed",
                        sprint_rate(o.ceil.rate),
                        sprint_rate(o.rate.rate)
                    ),
                    fix: "make ceil at least the rate (tc's default ceil is the rate)".into(),
                });
            }
            let burst = calc_xmitsize(o.rate.rate, o.buffer) as u64;
            let cburst = calc_xmitsize(o.ceil.rate, o.cbuffer) as u64;
            // What tc gives a bucket by default (`rate / get_hz() + mtu`, get_hz() being 10^9 on a
            // high-resolution kernel), after the same tick rounding: a burst tc chose is not the
            // author's mistake; only bursts the author wrote are judged.
            let default_burst = |rate: u64| {
                let bytes = (rate / 1_000_000_000) as u32 + 1600;
                calc_xmitsize(rate, crate::util::calc_xmittime(rate, bytes)) as u64
            };
            let chosen = burst.abs_diff(default_burst(o.rate.rate)) > 2
                || cburst.abs_diff(default_burst(o.ceil.rate)) > 2;
            if !chosen {
                // tc's defaults: nothing to say.
            } else if burst < mtu as u64 || cburst < mtu as u64 {
                out.push(Finding {
                    code: "burst-below-mtu",
                    severity: Severity::Warning,
                    at: at.clone(),
                    message: format!(
                        "burst {burst} bytes / cburst {cburst} bytes, less than one {mtu}-byte frame: the \
                         class waits for tokens before every full packet"
                    ),
                    fix: format!("leave burst to tc's default, or give at least {mtu} bytes"),
                });
            } else if burst < o.rate.rate / HZ {
                out.push(Finding {
                    code: "burst-below-tick",
                    severity: Severity::Warning,
                    at: at.clone(),
                    message: format!(
                        "burst {burst} bytes is less than what {} sends in one tick of a {HZ} Hz timer \
                         ({} bytes): on a tick-based kernel the class cannot reach its rate",
                        sprint_rate(o.rate.rate),
                        o.rate.rate / HZ
                    ),
                    fix: format!("burst at least rate/HZ: {} bytes", o.rate.rate / HZ),
                });
            }
            // Children's rates against this class's.
            let kids: Vec<_> = my_classes
                .iter()
                .filter(|k| k.parent == c.classid)
                .collect();
            let sum: u64 = kids
                .iter()
                .filter_map(|k| match &k.options {
                    Some(ClassOptions::Htb(ko)) => Some(ko.rate.rate),
                    _ => None,
                })
                .sum();
            if !kids.is_empty() && sum > o.rate.rate {
                out.push(Finding {
                    code: "rates-exceed-parent",
                    severity: Severity::Note,
                    at: at.clone(),
                    message: format!(
                        "its {} children are guaranteed {} in all, more than its own rate {}: HTB \
                         lets each child send its own rate without asking the parent, so when they are \
                         all busy the subtree sends the sum, and the parent does not shape it (tclab \
                         explain shows the shares)",
                        kids.len(),
                        sprint_rate(sum),
                        sprint_rate(o.rate.rate)
                    ),
                    fix: "lower the children's rates so that they add up to at most the parent's, and \
                      give the rest as ceil (borrowing)"
                        .into(),
                });
            }
            if o.level == 0 {
                out.extend(queue_delay(
                    &at,
                    c.leaf,
                    &qdiscs,
                    dev.txqueuelen,
                    mtu,
                    o.rate.rate,
                ));
                let is_default = h.defcls != 0 && c.classid == Handle(q.handle.0 | h.defcls);
                if !is_default && !bound(c.classid.0) {
                    out.push(unreached_class(&at, c.classid));
                }
            }
        }
    }
    // HFSC.
    for q in qdiscs.iter() {
        if let QdiscOptions::Hfsc(h) = &q.options {
            let link = line.rate;
            check_hfsc(q, h.defcls, &classes, dev, dev_name, mtu, link, &bound, out);
        }
    }
    // Filters on classes: HTB and HFSC consult a class's filters only after a filter (or skb->priority)
    // chose that class and it is an inner one (`htb_classify`/`hfsc_classify` stop at the first leaf).
    for q in qdiscs.iter().filter(|q| matches!(q.kind, "htb" | "hfsc")) {
        let Some(sched) = dev.find(q.handle) else {
            continue;
        };
        let mine = |c: &&tclab_core::qdisc::ClassInfo| {
            c.classid.major() == q.handle.major() && c.classid.minor() != 0
        };
        for c in classes.iter().filter(mine) {
            if sched.q.block(c.classid).is_none_or(|b| b.is_empty()) {
                continue;
            }
            let is_leaf = !classes.iter().filter(mine).any(|k| k.parent == c.classid);
            let message = if is_leaf {
                format!(
                    "filters are attached to the leaf class {}: {} reads a class's filters only on the \
                     way down from the qdisc to a leaf, and stops at the first leaf it reaches, so these \
                     filters never see a packet",
                    c.classid,
                    q.kind.to_uppercase()
                )
            } else if !bound(c.classid.0) {
                format!(
                    "filters are attached to the inner class {}, but no filter at the qdisc (or iptables \
                     CLASSIFY rule) sends packets to {}: they are read only after one does",
                    c.classid, c.classid
                )
            } else {
                continue;
            };
            out.push(Finding {
                code: "filter-unreached",
                severity: Severity::Warning,
                at: format!("{dev_name} class {} {}", q.kind, c.classid),
                message,
                fix: format!(
                    "attach the filters to the qdisc (`parent {}`), or to an inner class a filter there \
                     points to",
                    q.handle
                ),
            });
        }
    }
    // Ingress policing.
    if let Some(ing) = dev.ingress() {
        // (Approximated: the ingress has filters and a policer exists; filters keep their actions to
        // themselves.)
        let polices = ing
            .q
            .block(Handle(0xffff_0000))
            .is_some_and(|b| !b.is_empty())
            && !engine.actions().list("police").is_empty();
        // Only a policer: an ingress filter redirecting to an ifb is the cure, not the problem.
        if polices {
            out.push(Finding {
                code: "ingress-police",
                severity: Severity::Note,
                at: format!("{dev_name} qdisc ingress"),
                message:
                    "traffic arriving here is filtered or policed at ingress: a policer drops what \
                          exceeds its rate instead of queueing it, which TCP takes as heavy loss"
                        .into(),
                fix:
                    "to shape downloads, redirect ingress to an ifb device (`action mirred egress \
                      redirect dev ifb0`) and shape there with HTB or fq_codel, as sqm-scripts do"
                        .into(),
            });
        }
    }
}

/// The text report.
/// HFSC's default class, and its leaves as HTB's are checked. `hfsc_classify` drops what no filter
/// classifies unless `default` names a leaf (with no `default`, the root class, which is inner once it
/// has children): where HTB lets such packets out unshaped, HFSC loses them.
#[allow(clippy::too_many_arguments)]
fn check_hfsc(
    q: &tclab_core::engine::QdiscInfo,
    defcls: u16,
    classes: &[tclab_core::qdisc::ClassInfo],
    dev: &tclab_core::engine::Device,
    dev_name: &str,
    mtu: u32,
    link: Option<u64>,
    bound: &dyn Fn(u32) -> bool,
    out: &mut Vec<Finding>,
) {
    let mine: Vec<_> = classes
        .iter()
        .filter(|c| c.classid.major() == q.handle.major() && c.classid != q.handle)
        .collect();
    if mine.is_empty() {
        return; // the root class alone is a leaf and takes everything
    }
    let is_leaf = |id: Handle| !mine.iter().any(|k| k.parent == id);
    let at_q = format!("{dev_name} qdisc hfsc {}", q.handle);
    // A leaf to name in the fixes (the last one: often the bulk class).
    let example = mine
        .iter()
        .rev()
        .find(|c| is_leaf(c.classid))
        .map_or(0x20, |c| c.classid.minor());
    let def = Handle(q.handle.0 | defcls as u32);
    if classifies_everything(dev, q.handle, classes) {
        // A catch-all filter at the qdisc: no packet is left for a default.
    } else if defcls == 0 {
        out.push(Finding {
            code: "no-default",
            severity: Severity::Warning,
            at: at_q,
            message: "no `default` class: HFSC drops every packet no filter classifies".into(),
            fix: format!(
                "name a leaf class as the default that takes the rest (`hfsc default {example:x}`)"
            ),
        });
    } else if !mine.iter().any(|c| c.classid == def) {
        out.push(Finding {
            code: "default-missing",
            severity: Severity::Error,
            at: at_q,
            message: format!(
                "the default class {def} does not exist: HFSC drops every packet no filter classifies"
            ),
            fix: format!(
                "create class {def}, or point `default` at an existing leaf (`hfsc default {example:x}`)"
            ),
        });
    } else if !is_leaf(def) {
        out.push(Finding {
            code: "default-inner",
            severity: Severity::Error,
            at: at_q,
            message: format!(
                "the default class {def} has children: HFSC sends unclassified packets to a default \
                 only if it is a leaf, so it drops them"
            ),
            fix: "point `default` at a leaf class".into(),
        });
    }
    // Real time ignores upper limits: leaves whose `rt` rates add up to more than an ancestor's `ul`
    // (or than the line) send that sum when they are all busy, and the `ul` does not hold.
    let hfsc_opts = |c: &tclab_core::qdisc::ClassInfo| match &c.options {
        Some(ClassOptions::Hfsc(o)) => Some(*o),
        _ => None,
    };
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
                format!("{dev_name} class hfsc {}", c.classid),
                c.classid,
                ul,
                "its `ul`",
            ))
        })
        .chain(link.map(|l| {
            (
                format!("{dev_name} qdisc hfsc {}", q.handle),
                q.handle,
                l,
                "the line",
            )
        }));
    for (at, id, limit, what) in limits {
        let rt = rt_below(id);
        if rt > limit {
            out.push(Finding {
                code: "rates-exceed-parent",
                severity: Severity::Note,
                at,
                message: format!(
                    "the real-time rates of the leaves below add up to {}, more than {what} {}: HFSC \
                     serves real time without asking any upper limit, so when they are all busy they \
                     send {} and their deadlines slip",
                    sprint_rate(rt),
                    sprint_rate(limit),
                    sprint_rate(rt)
                ),
                fix: "lower the `rt` curves so that they add up to at most the limit; give the rest as \
                      link sharing (`ls`)"
                    .into(),
            });
        }
    }
    let qdiscs = dev.qdiscs();
    for c in mine.iter().filter(|c| is_leaf(c.classid)) {
        let at = format!("{dev_name} class hfsc {}", c.classid);
        if c.classid != def && !bound(c.classid.0) {
            out.push(unreached_class(&at, c.classid));
        }
        // Its queue against the rate it is sure of (see `assured`); none known, nothing to say.
        if let Some(rate) = assured(c.classid, q.handle, &mine, link) {
            out.extend(queue_delay(&at, c.leaf, &qdiscs, dev.txqueuelen, mtu, rate));
        }
    }
}

/// Whether the filters at qdisc `handle` leave no packet unclassified: a catch-all `matchall` that
/// sends everything to an existing leaf class (to an inner or missing one, the packets still fall to
/// the default).
fn classifies_everything(
    dev: &tclab_core::engine::Device,
    handle: Handle,
    classes: &[tclab_core::qdisc::ClassInfo],
) -> bool {
    dev.find(handle)
        .and_then(|s| s.q.block(handle))
        .and_then(|b| b.catch_all())
        .is_some_and(|id| {
            classes.iter().any(|c| c.classid.0 == id)
                && !classes
                    .iter()
                    .any(|k| k.parent.0 == id && k.classid.0 != id)
        })
}

/// A leaf class nothing sends packets to.
fn unreached_class(at: &str, classid: Handle) -> Finding {
    Finding {
        code: "unreached-class",
        severity: Severity::Warning,
        at: at.to_string(),
        message:
            "no filter, iptables CLASSIFY rule or `default` sends packets here: the class stays \
                  idle (unless an application sets skb->priority to it)"
                .into(),
        fix: format!("add a filter with `flowid {classid}`, or remove the class"),
    }
}

/// A leaf's FIFO against its class's `rate` (bytes/s): its own pfifo or bfifo, or the default pfifo of
/// `txqueuelen` packets, holding more than a second. Fair queues (sfq, fq_codel…) isolate flows: a sparse
/// flow does not wait behind the whole queue, so their limit is no delay bound to report.
fn queue_delay(
    at: &str,
    leaf: Option<Handle>,
    qdiscs: &[tclab_core::engine::QdiscInfo],
    txqueuelen: u32,
    mtu: u32,
    rate: u64,
) -> Option<Finding> {
    let (limit_pkts, limit_bytes, what) =
        match leaf.and_then(|l| qdiscs.iter().find(|q| q.handle == l)) {
            Some(lq) => match &lq.options {
                QdiscOptions::Pfifo(f) => {
                    (f.limit.map(u64::from), None, format!("pfifo {}", lq.handle))
                }
                QdiscOptions::Bfifo(f) => {
                    (None, f.limit.map(u64::from), format!("bfifo {}", lq.handle))
                }
                _ => return None,
            },
            None => (
                Some(txqueuelen as u64),
                None,
                "default pfifo (txqueuelen packets)".to_string(),
            ),
        };
    let bytes = limit_bytes.or(limit_pkts.map(|p| p * mtu as u64))?;
    let secs = bytes as f64 / rate as f64;
    (rate > 0 && secs > 1.0).then(|| Finding {
        code: "queue-delay",
        severity: Severity::Warning,
        at: at.to_string(),
        message: format!(
            "its leaf, a {what}, holds {} of full frames: at {} that is {secs:.1} s of queueing before a \
             packet is dropped",
            match limit_pkts {
                Some(p) => format!("{p} packets"),
                None => format!("{bytes} bytes"),
            },
            sprint_rate(rate),
        ),
        fix: "give the leaf a short queue (`pfifo limit 10`) or an AQM (`fq_codel`)".into(),
    })
}

/// The rate an HFSC class can count on when every class is busy, in bytes/s: its real-time rate, or
/// its link-sharing share of what its parent can count on (`ls` m2 among its siblings'), the larger of
/// the two, within its upper limit (or its upper limit alone, when nothing else is known). The root
/// class counts on the line (`--link`), or on nothing known.
fn assured(
    id: Handle,
    root: Handle,
    classes: &[&tclab_core::qdisc::ClassInfo],
    link: Option<u64>,
) -> Option<u64> {
    if id == root {
        return link;
    }
    let c = classes.iter().find(|c| c.classid == id)?;
    let Some(ClassOptions::Hfsc(o)) = &c.options else {
        return None;
    };
    let m2 = |sc: Option<tclab_core::qdisc::hfsc::ServiceCurve>| sc.map(|sc| sc.m2 as u64);
    let share = m2(o.fsc).filter(|&w| w > 0).and_then(|w| {
        let weights: u64 = classes
            .iter()
            .filter(|k| k.parent == c.parent)
            .filter_map(|k| match &k.options {
                Some(ClassOptions::Hfsc(ko)) => m2(ko.fsc),
                _ => None,
            })
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

pub fn render(findings: &[Finding]) -> String {
    let mut s = String::new();
    for f in findings {
        s.push_str(&format!(
            "{}[{}] {}\n  {}\n  fix: {}\n  see: docs/checks/{}.md\n",
            f.severity.name(),
            f.code,
            f.at,
            f.message,
            f.fix,
            f.code
        ));
    }
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    s.push_str(&format!(
        "{} error{}, {} warning{}, {} note{}\n",
        count(Severity::Error),
        if count(Severity::Error) == 1 { "" } else { "s" },
        count(Severity::Warning),
        if count(Severity::Warning) == 1 {
            ""
        } else {
            "s"
        },
        count(Severity::Note),
        if count(Severity::Note) == 1 { "" } else { "s" },
    ));
    s
}

/// The exit status: 2 with an error, 1 with a warning, else 0.
pub fn exit_status(findings: &[Finding]) -> u8 {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Error) => 2,
        Some(Severity::Warning) => 1,
        _ => 0,
    }
}
