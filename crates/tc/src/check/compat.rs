//! Kernel versions: disciplines, classifiers and actions the kernel the policy is meant for lacks
//! (`--kernel 5.10` and `cake`: 4.19, fine; `fq_pie`: 5.6; `ets`: 5.6; `action ct`: 5.3), and those
//! current kernels no longer have
//! (CBQ, removed in 6.3 with ATM, dsmark, tcindex and rsvp; tclab models CBQ alone of them, as a
//! pre-6.3 kernel runs it).

use super::{DevCx, Finding};

/// The release that first had a kind (the merge window it was merged in), for kinds younger than the
/// 3.0 kernels anyone still runs.
/// Qdiscs and classifiers both (`bpf` here is cls_bpf).
const SINCE: &[(&str, (u32, u32))] = &[
    ("qfq", (3, 0)),
    ("plug", (3, 4)),
    ("codel", (3, 5)),
    ("fq_codel", (3, 5)),
    ("fq", (3, 12)),
    ("hhf", (3, 13)),
    ("bpf", (3, 13)),
    ("pie", (3, 14)),
    ("flower", (4, 2)),
    ("clsact", (4, 5)),
    ("matchall", (4, 8)),
    ("cbs", (4, 15)),
    ("cake", (4, 19)),
    ("etf", (4, 19)),
    ("skbprio", (4, 19)),
    ("taprio", (4, 20)),
    ("fq_pie", (5, 6)),
    ("ets", (5, 6)),
];

/// Actions younger than 4.4 (a list of their own: `bpf` the action came later than `bpf` the
/// classifier). tc sends an action the kernel lacks, and it refuses the filter that carries it.
const ACTIONS_SINCE: &[(&str, (u32, u32))] = &[
    ("ife", (4, 6)),
    ("skbmod", (4, 9)),
    ("tunnel_key", (4, 9)),
    ("sample", (4, 11)),
    ("ct", (5, 3)),
    ("ctinfo", (5, 3)),
    ("mpls", (5, 3)),
    ("gate", (5, 8)),
];

/// Kinds removed, and the release that no longer has them.
const REMOVED: &[(&str, (u32, u32))] = &[("cbq", (6, 3))];

fn version((a, b): (u32, u32)) -> String {
    format!("{a}.{b}")
}

/// Options younger than their discipline: (kind, the word tc takes, the release that reads it).
const OPTIONS: &[(&str, &str, (u32, u32))] = &[
    ("fq_codel", "ce_threshold", (4, 2)),
    ("fq_codel", "memory_limit", (4, 7)),
    ("fq_codel", "drop_batch", (4, 7)),
    ("netem", "slot", (4, 19)),
];

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    let (name, origins, opts) = (cx.name, cx.origins, cx.opts);
    // Every kind on the device (once: 20 000 CAKE leaves are one finding), where it first is, its line.
    let mut kinds: Vec<(&str, String, Option<&str>)> = Vec::new();
    for q in &cx.qdiscs {
        let at = format!("{name} qdisc {} {}", q.kind, q.handle);
        let line = origins.qdisc(name, q.handle, q.parent);
        if !kinds.iter().any(|(k, _, _)| *k == q.kind) {
            kinds.push((q.kind, at.clone(), line));
        }
        // The options the line wrote (the engine holds the kernel's defaults too).
        let Some(k) = opts.kernel else {
            continue;
        };
        let Some(record) = origins.qdisc_record(name, q.handle, q.parent) else {
            continue;
        };
        for &(_, option, since) in OPTIONS.iter().filter(|o| o.0 == q.kind) {
            if k < since && record.entry.iter().any(|w| w == option) {
                out.push(
                    Finding::new(
                        "kernel-lacks",
                        at.clone(),
                        format!(
                            "{}'s `{option}` came with Linux {}: the {} kernel does not know the \
                             attribute and drops it without a word, so the option does not apply",
                            q.kind,
                            version(since),
                            version(k)
                        ),
                        format!(
                            "leave `{option}` out, or use Linux {} or newer",
                            version(since)
                        ),
                    )
                    .line(line),
                );
            }
        }
    }
    for &(parent, b) in &cx.blocks {
        for tp in b.tps() {
            let kind = tp.cls.kind();
            if kinds.iter().any(|(k, _, _)| *k == kind) {
                continue;
            }
            let at = format!("{name} filter parent {parent} pref {} {kind}", tp.prio);
            let line = origins
                .filter(name, parent, Some(tp.prio))
                .map(|r| r.at.as_str());
            kinds.push((kind, at, line));
        }
    }
    if let Some(k) = opts.kernel {
        let mut seen: Vec<&str> = Vec::new();
        for a in cx.actions.iter().filter(|a| a.dev == name) {
            let kind = a.params.kind();
            let Some(&(_, since)) = ACTIONS_SINCE.iter().find(|(x, _)| *x == kind) else {
                continue;
            };
            if k >= since || seen.contains(&kind) {
                continue;
            }
            seen.push(kind);
            let at = format!(
                "{name} filter parent {} pref {} action {kind}",
                a.parent, a.pref
            );
            let line = origins
                .filter(name, a.parent, Some(a.pref))
                .map(|r| r.at.as_str());
            out.push(lacks(
                &at,
                line,
                &format!("action {kind} came with"),
                since,
                k,
            ));
        }
    }
    for (kind, at, line) in kinds {
        if let Some(&(_, gone)) = REMOVED.iter().find(|(k, _)| *k == kind) {
            match opts.kernel {
                Some(k) if k >= gone => {
                    out.push(lacks(&at, line, &format!("{kind} was removed in"), gone, k))
                }
                Some(_) => {}
                None => out.push(
                    Finding::new(
                        "kind-removed",
                        at.clone(),
                        format!(
                            "{kind} was removed from Linux {}: on current kernels this command is \
                             refused (\"Error: Specified qdisc kind is unknown.\") and everything \
                             built on it with it",
                            version(gone)
                        ),
                        match kind {
                            "cbq" => "rewrite the tree with HTB (rate, ceil, prio as CBQ's rate, \
                                      bounded/isolated and priority), or name the old kernel it is for \
                                      with `--kernel`",
                            _ => "use a discipline current kernels have",
                        },
                    )
                    .line(line),
                ),
            }
        }
        if let (Some(&(_, since)), Some(k)) = (SINCE.iter().find(|(x, _)| *x == kind), opts.kernel)
        {
            if k < since {
                out.push(lacks(&at, line, &format!("{kind} came with"), since, k));
            }
        }
    }
}

/// A kind or option the named kernel does not have: `what` says how (`cake came with`, `cbq was
/// removed in`) Linux `v`.
fn lacks(at: &str, line: Option<&str>, what: &str, v: (u32, u32), k: (u32, u32)) -> Finding {
    Finding::new(
        "kernel-lacks",
        at,
        format!(
            "{what} Linux {}: the {} kernel refuses this command (it has no such kind), and the \
             commands built on it",
            version(v),
            version(k)
        ),
        format!("use what Linux {} has, or a newer kernel", version(k)),
    )
    .line(line)
}
