//! `tclab check`: what is wrong with a policy, said before it meets a link.
//!
//! The policy is applied to an engine exactly as `tclab tc` and `tclab script run` apply it, so every
//! command the kernel would refuse is found with its message; then the resulting tree is read the way
//! the seeds' authors had to learn to read it — quantum and r2q, rates that add up to more than their
//! parent, bursts too small for the timer, queues that hold a minute of traffic, classes nothing reaches,
//! default classes that do not exist — and each finding gets a stable code, its reason, the fix, the
//! script line that made the object (`origins`), and a page in `docs/checks/CODE.md`.
//!
//! One finding per cause: a refused command that the later commands depended on is one finding naming
//! their lines, not one per command; a rule reports a group once (a clamped quantum names all the
//! classes whose sharing it changes).
//!
//! Severities: `error` (the policy does not do what it says: a refused command, unclassified traffic
//! that escapes the shaper, traffic dropped whole), `warning` (it works, but not as its author expects),
//! `note` (worth knowing). The exit status is 2 with an error, 1 with a warning, else 0.
//!
//! The rules live by subject: `tree` (HTB and HFSC trees: defaults, quantum, rates, bursts, queues,
//! classes reached), `line` (the shaper against the line: rate, ATM, offloads, CAKE, AQM targets),
//! `ifb` (ingress through ifb devices), `teql` (bonded lines), `buckets` (TBF and policer buckets),
//! `filters` (what filters name and read), `u32hash` (u32 nodes in the wrong hash bucket), `shadowed`
//! (filters an earlier one always answers for first), `u32mask` (u32 values with bits outside their
//! mask), `marks`
//! (fw marks and iptables; priorities), `realms` (route filters against the policy's routes), `compat`
//! (kernel versions).

mod buckets;
mod compat;
mod filters;
mod ifb;
mod line;
mod marks;
pub mod origins;
mod realms;
mod shadowed;
mod taprio;
mod teql;
mod tree;
pub(crate) use tree::{htb_maximum, Held};
mod u32hash;
mod u32mask;

use origins::Origins;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use tclab_core::engine::{Device, QdiscInfo};
use tclab_core::qdisc::{ClassInfo, QdiscOptions};
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
    /// What: `eth0 class htb 1:20`, `eth0 filter parent ffff: pref 1`, `script.sh:12`.
    pub at: String,
    /// The script line (`FILE:LINE`, a batch file's line, a store's record) that made it, if known.
    pub line: Option<String>,
    pub message: String,
    pub fix: String,
}

impl Finding {
    /// A finding of `code`, with the severity [`CODES`] gives it.
    fn new(
        code: &'static str,
        at: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        let severity = CODES
            .iter()
            .find(|c| c.0 == code)
            .map_or(Severity::Error, |c| c.1);
        debug_assert!(
            CODES.iter().any(|c| c.0 == code),
            "unregistered code {code}"
        );
        Finding {
            code,
            severity,
            at: at.into(),
            line: None,
            message: message.into(),
            fix: fix.into(),
        }
    }

    fn line(mut self, line: Option<&str>) -> Finding {
        self.line = line.map(str::to_string);
        self
    }
}

/// Every code `check` can report, with its severity and a one-line summary (the index of
/// `docs/checks/`).
pub const CODES: &[(&str, Severity, &str)] = &[
    (
        "refused",
        Severity::Error,
        "a command the kernel (or tc) refuses, and the commands that depended on it",
    ),
    (
        "script-failed",
        Severity::Error,
        "the script stopped with an error (bash's message and line)",
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
        "mq-queue-unshaped",
        Severity::Error,
        "an mq root whose transmit queues are not all given the policy's tree: the others' flows go unshaped",
    ),
    (
        "taprio-gate-closed",
        Severity::Error,
        "a taprio traffic class that priorities map to but no schedule entry opens: its packets are never sent",
    ),
    (
        "taprio-cycle-cut",
        Severity::Warning,
        "a taprio cycle-time shorter than its entries' intervals: the last entries are cut or never run",
    ),
    (
        "taprio-gate-short",
        Severity::Warning,
        "a taprio traffic class whose longest opening is no longer than a full frame at the link speed: no full-size frame is ever sent",
    ),
    (
        "no-default",
        Severity::Warning,
        "no default class: unclassified traffic goes out unshaped (HTB) or is dropped (HFSC)",
    ),
    (
        "quantum",
        Severity::Warning,
        "quanta that share the spare bandwidth out of proportion with the classes' rates",
    ),
    (
        "rates-exceed-parent",
        Severity::Note,
        "the children's guaranteed rates add up to more than their parent's",
    ),
    (
        "parent-missing",
        Severity::Error,
        "an HTB class added under a parent class that did not exist: HTB puts it at the top, outside that parent's limits",
    ),
    (
        "ceil-below-rate",
        Severity::Warning,
        "a class's ceil is below its rate",
    ),
    (
        "ceil-above-parent",
        Severity::Warning,
        "an HTB class's ceil above its parent's: it never sends more than the smallest ceil above it",
    ),
    (
        "burst-below-mtu",
        Severity::Warning,
        "a class's burst or cburst is smaller than one full packet",
    ),
    (
        "burst-below-tick",
        Severity::Warning,
        "a burst is smaller than one timer tick of its rate",
    ),
    (
        "queue-delay",
        Severity::Warning,
        "a leaf's queue holds more than a second of traffic at its rate",
    ),
    (
        "queue-below-packet",
        Severity::Error,
        "a FIFO that cannot hold one full frame (bfifo's limit is bytes): full-size packets never pass",
    ),
    (
        "leaf-queue-short",
        Severity::Warning,
        "a leaf FIFO of fewer than three full frames: TCP loses packets on every burst",
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
        "a shaper (the root's, one with none above it, an mq root's queues together) is not below the line's rate, so the queue forms elsewhere",
    ),
    (
        "linklayer-missing",
        Severity::Warning,
        "an ATM/DSL line shaped without linklayer atm or overhead",
    ),
    (
        "ifb-down",
        Severity::Error,
        "a filter redirects to an ifb (or any device) that is down: everything it takes is dropped",
    ),
    (
        "ifb-unfed",
        Severity::Error,
        "an ifb has a shaper but nothing redirects to it (or to another ifb, or only mirrors copies)",
    ),
    (
        "teql-down",
        Severity::Error,
        "teql0 has slaves but is never set up: nothing goes through it, and the lines are not bonded",
    ),
    (
        "teql-one-slave",
        Severity::Warning,
        "teql0 with a single slave: a bond of one line, which bonds nothing",
    ),
    (
        "teql-unequal-slaves",
        Severity::Warning,
        "teql0's slaves run at different rates: consecutive packets take unequal lines and arrive out of order",
    ),
    (
        "redirect-one-protocol",
        Severity::Warning,
        "a redirect to a shaping ifb matches one protocol only: the other family bypasses the shaper",
    ),
    (
        "bucket-below-packet",
        Severity::Error,
        "a TBF or policer bucket smaller than one packet: full-size packets never pass",
    ),
    (
        "police-burst-short",
        Severity::Warning,
        "a policer's burst below 5 ms at its rate (or 10 full frames, where those are under 20 ms): TCP through it gets a fraction of the rate",
    ),
    (
        "bucket-too-large",
        Severity::Warning,
        "a TBF or policer bucket of more than 10 s at its rate: it does not act within a test",
    ),
    (
        "tbf-limit-short",
        Severity::Warning,
        "TBF's queue holds fewer than three full packets: TCP loses a packet on every burst",
    ),
    (
        "filter-class-missing",
        Severity::Warning,
        "a filter sends packets to a class that does not exist: they fall to the default (or are lost)",
    ),
    (
        "filter-inner-class",
        Severity::Warning,
        "a filter sends packets to an inner HTB/HFSC class with no filters of its own: they fall to the default (or the direct queue)",
    ),
    (
        "filter-family",
        Severity::Warning,
        "IPv4 match fields under protocol ipv6, or IPv6 ones under protocol ip",
    ),
    (
        "flower-arp-ignored",
        Severity::Warning,
        "flower's arp_sha/arp_tha under a protocol that is not ARP's: dropped, the filter matches all",
    ),
    (
        "flower-mac-simulated",
        Severity::Note,
        "flower's dst_mac/src_mac: a simulated packet has no Ethernet addresses and never matches",
    ),
    (
        "tos-ecn",
        Severity::Warning,
        "a TOS match whose mask includes the ECN bits: ECN-capable packets never match",
    ),
    (
        "u32-offset",
        Severity::Warning,
        "a raw u32 offset that reads the source port or address where the policy names it as a destination",
    ),
    (
        "u32-value-masked",
        Severity::Warning,
        "a u32 match whose value has bits outside its mask: tc drops them silently, and the filter matches something else",
    ),
    (
        "filter-shadowed",
        Severity::Warning,
        "a filter an earlier one always answers for first (a catch-all, or a broader match): it never matches",
    ),
    (
        "u32-bucket",
        Severity::Warning,
        "a u32 node in a hash bucket the packets it matches are never hashed to: it never matches",
    ),
    (
        "ipv4-only-classes",
        Severity::Note,
        "every filter is protocol ip (or reads `match ip` fields under protocol all): IPv6 takes the default",
    ),
    (
        "atm-overhead",
        Severity::Warning,
        "ATM cells counted with an overhead of 0, or one no encapsulation has",
    ),
    (
        "aqm-target-short",
        Severity::Note,
        "fq_codel/CoDel target below one full frame's time at the rate it drains at",
    ),
    (
        "aqm-target-interval",
        Severity::Warning,
        "fq_codel/CoDel target at or above interval: a standing queue of target's delay (the two swapped?)",
    ),
    (
        "mark-unset",
        Severity::Warning,
        "an fw filter reads a mark no reachable iptables rule or tc action sets on that device",
    ),
    (
        "realm-unset",
        Severity::Warning,
        "a route filter (or meta(rt_classid) match) reads a realm no `ip route … realm` line of the policy sets: it never matches",
    ),
    (
        "prio-inverted",
        Severity::Warning,
        "an HTB class for interactive traffic has a worse prio than a bulk sibling",
    ),
    (
        "kernel-lacks",
        Severity::Error,
        "a kind or option the kernel named with --kernel does not have (too new, or removed)",
    ),
    (
        "kind-removed",
        Severity::Warning,
        "a discipline current kernels no longer have (CBQ, removed in 6.3)",
    ),
    (
        "ingress-police",
        Severity::Note,
        "ingress policing drops what an ifb shaper would queue",
    ),
    (
        "classes-by-priority",
        Severity::Note,
        "no filter chooses any class: only skb->priority set outside tc (LibreQoS's xdp-cpumap) reaches them",
    ),
    (
        "gso-bursts",
        Severity::Note,
        "GSO super-packets (up to 64 KB) reach a shaper below 100 Mbit/s that does not split them",
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

/// What the caller says about the policy's surroundings.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The line of every device without one of its own.
    pub line: LineFacts,
    /// A line rate of a device's own (`--link DEV=RATE`: a download shaped on an ifb faces the
    /// downlink, not the uplink).
    pub device_rates: Vec<(String, u64)>,
    /// The kernel's timer frequency (`--hz`): every burst, tc's defaults included, is judged against
    /// one tick of its rate. `None`: only bursts the author wrote, against [`HZ`].
    pub hz: Option<u64>,
    /// The kernel the policy is meant for (`--kernel 5.10`): kinds and options it lacks, or that it
    /// no longer has. `None`: only what current kernels removed.
    pub kernel: Option<(u32, u32)>,
}

/// A command that did not apply: where (`FILE:LINE`), the command, what tc said.
pub type Refusal = (String, String, String);

/// How a script that failed ended.
#[derive(Clone, Debug)]
pub struct ScriptError {
    /// `FILE:LINE` where bash said, else `FILE`.
    pub at: String,
    /// Bash's message, or the exit status.
    pub message: String,
    /// Bash named the line (a syntax error, a command not found), rather than the script exiting
    /// non-zero.
    pub located: bool,
    /// The script's calls went on after the line bash named (a command not found outside `set -e`):
    /// that line failed, but it is not where the script stopped.
    pub went_on: bool,
}

/// The timer frequency the tick rule assumes without `--hz`: tc itself computes default bursts for HZ
/// 1000 (what /proc/net/psched reports on high-resolution kernels); a kernel built with CONFIG_HZ 100 or
/// 250 and tick-based timers (seed 001's) needs bursts up to ten times larger.
pub const HZ: u64 = 1000;

/// Check the policy `engine` holds. `refusals` are the commands that did not apply; `script_error` is
/// how the script ended if it failed (bash's message), `origins` each record's line.
pub fn check(
    engine: &Engine,
    refusals: &[Refusal],
    script_error: Option<ScriptError>,
    origins: &Origins,
    opts: &Options,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // A script whose last command was refused exits with that command's status: the refusal is the
    // finding. Bash's own messages (a syntax error) name a line and are findings of their own.
    let script_error = script_error.filter(|e| e.located || refusals.is_empty());
    if let Some(ScriptError {
        at,
        message,
        located,
        went_on,
    }) = script_error
    {
        // `bash: 1: usage…` or `$1: unbound variable`: a positional parameter the script wanted.
        let wants_args = message
            .split(": ")
            .nth(1)
            .is_some_and(|p| p.trim_start_matches('$').parse::<u32>().is_ok());
        let fix = if wants_args {
            "the script stopped for an argument it was not given: pass them after `--` (`tclab check \
             FILE -- eth0 20000`)"
        } else if went_on {
            "correct the script there: that command did nothing, though the script went on past it \
             (what it did after that line is in the policy checked)"
        } else if located {
            "correct the script there; the commands after that point did not run, so the policy is \
             not what the script says"
        } else {
            "find where the script stops (an `exit`, or a command failing under `set -e`) and correct \
             it; the commands after that point did not run, so the policy is not what the script says"
        };
        out.push(Finding::new("script-failed", at.clone(), message, fix).line(Some(&at)));
    }
    out.extend(refused(refusals));
    let marks = marks::MarkSetters::of(engine);
    let trees: Vec<(&str, &Device, Tree)> =
        engine.devices().map(|(n, d)| (n, d, Tree::of(d))).collect();
    let actions = filter_actions(&trees);
    let redirects = ifb::redirects(&actions);
    let mut kernel = Vec::new();
    for (dev_name, dev, tree) in trees {
        let line = LineFacts {
            rate: opts
                .device_rates
                .iter()
                .find(|(d, _)| d == dev_name)
                .map(|&(_, r)| r)
                .or(opts.line.rate),
            ..opts.line
        };
        let mut cx = DevCx::new(
            origins, opts, dev_name, dev, tree, line, &marks, &actions, &redirects,
        );
        cx.refused_classids = refused_classids(refusals, dev_name);
        cx.refused_flowids = refused_flowids(refusals, dev_name);
        cx.check(&mut out);
        realms::check(&cx, engine.fib(), &mut out);
        compat::check(&cx, &mut kernel);
    }
    ifb::check(engine, origins, &redirects, &mut out);
    teql::check(engine, origins, opts, &mut out);
    out.extend(kernel);
    out
}

/// Why `tclab explain` calls a leaf class of a device's root qdisc idle under the policy's own
/// classification ([`idle_classes`]).
pub enum Idle {
    /// Every filter naming it is shadowed by an earlier one: those `filter-shadowed` findings.
    Shadowed(Vec<Finding>),
    /// No filter names it and it is not the default (`unreached-class`).
    Unnamed,
    /// It is the default, but a catch-all filter classifies every packet first: where that filter was
    /// added.
    CaughtAll(String),
}

/// For `tclab explain`: the leaf classes of device `dev` the policy sends no packet to, and why. HTB
/// and HFSC classify as `htb_classify`/`hfsc_classify` do: a packet whose skb->priority names a class
/// of the qdisc goes there first, then the filters answer, then the `default` takes what they leave;
/// DRR and QFQ have no default (unclassified packets are dropped). So a class is idle when every filter
/// naming it is shadowed (`filter-shadowed`), or no filter names it and it is not the default
/// (`unreached-class`), or it is the default behind a catch-all filter — and in each case nothing
/// sets skb->priority to it: no iptables CLASSIFY rule for the device, no `skbedit priority` action
/// of any device's filters (one on an ingress or clsact filter runs before the qdisc). A tree
/// classified by skb->priority from outside tc (`classes-by-priority`) has none.
pub fn idle_classes(engine: &Engine, origins: &Origins, dev: &str) -> BTreeMap<u32, Idle> {
    let mut out: BTreeMap<u32, Idle> = BTreeMap::new();
    let Some(d) = engine.device(dev) else {
        return out;
    };
    let marks = marks::MarkSetters::of(engine);
    let trees: Vec<(&str, &Device, Tree)> =
        engine.devices().map(|(n, d)| (n, d, Tree::of(d))).collect();
    let actions = filter_actions(&trees);
    let redirects = ifb::redirects(&actions);
    let opts = Options::default();
    let cx = DevCx::new(
        origins,
        &opts,
        dev,
        d,
        Tree::of(d),
        LineFacts::default(),
        &marks,
        &actions,
        &redirects,
    );
    let mut prioritised: BTreeSet<u32> = marks.classify_targets(dev).collect();
    prioritised.extend(actions.iter().filter_map(|a| match &a.params {
        tclab_core::action::ActionParams::Skbedit(x) => x.priority,
        _ => None,
    }));
    // How many filters name each class, and how many of those are shadowed.
    let mut naming: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, b) in &cx.blocks {
        for tp in b.tps() {
            for c in b.tp_filters(tp).into_iter().filter_map(|(c, _)| c) {
                *naming.entry(c).or_default() += 1;
            }
        }
    }
    let mut shadowed: BTreeMap<u32, usize> = BTreeMap::new();
    let mut findings: BTreeMap<u32, Vec<Finding>> = BTreeMap::new();
    for (f, named) in shadowed::named_classes(&cx) {
        for c in named {
            *shadowed.entry(c).or_default() += 1;
            let list = findings.entry(c).or_default();
            if !list.iter().any(|g| g.at == f.at) {
                list.push(f.clone());
            }
        }
    }
    for (c, f) in findings {
        if naming.get(&c) == shadowed.get(&c) && !prioritised.contains(&c) {
            out.insert(c, Idle::Shadowed(f));
        }
    }
    let root = d.root().handle;
    let defcls = match cx.qdisc(root).map(|q| &q.options) {
        Some(QdiscOptions::Htb(h)) => h.defcls,
        Some(QdiscOptions::Hfsc(h)) => u32::from(h.defcls),
        Some(QdiscOptions::Drr | QdiscOptions::Qfq) => 0,
        _ => return out,
    };
    if tree::priority_classified(&cx, root) {
        return out;
    }
    let default = (defcls != 0).then_some(root.0 | defcls);
    let caught_all = default.and_then(|_| tree::default_starved(&cx, root));
    for c in cx.classes_of(root.major()) {
        let id = c.classid.0;
        if c.classid == root
            || !cx.is_leaf(c.classid)
            || out.contains_key(&id)
            || naming.contains_key(&id)
            || prioritised.contains(&id)
        {
            continue;
        }
        if Some(id) != default {
            out.insert(id, Idle::Unnamed);
        } else if let Some(at) = &caught_all {
            out.insert(id, Idle::CaughtAll(at.clone()));
        }
    }
    out
}

/// The classids of the `tc class add|replace` commands refused on `dev`.
fn refused_classids(refusals: &[Refusal], dev: &str) -> BTreeSet<u32> {
    refusals
        .iter()
        .filter_map(|r| {
            let words: Vec<String> = r.1.split_whitespace().map(str::to_string).collect();
            let l = origins::TcLine::parse(&words)?;
            (l.object == "class" && l.dev == Some(dev)).then_some(l.classid?)
        })
        .collect()
}

/// The classes the refused `tc filter` commands on `dev` named (`flowid`, `classid`).
fn refused_flowids(refusals: &[Refusal], dev: &str) -> BTreeSet<u32> {
    refusals
        .iter()
        .filter_map(|r| {
            let words: Vec<String> = r.1.split_whitespace().map(str::to_string).collect();
            let l = origins::TcLine::parse(&words)?;
            (l.object == "filter" && l.dev == Some(dev)).then_some(l.flowid()?)
        })
        .collect()
}

/// A device's qdiscs and classes, read once, with the indexes the rules look them up by (a LibreQoS
/// policy has 20 000 of each: no rule may scan them for every class). Flow queues that sfq, fq_codel
/// and CAKE list as classes are left out: no rule reads them, and listing them walks every flow.
struct Tree {
    qdiscs: Vec<QdiscInfo>,
    classes: Vec<ClassInfo>,
    /// `classes` by classid, by the owning qdisc's major; the classes that have children; `qdiscs`
    /// by handle.
    class_at: BTreeMap<u32, usize>,
    by_major: BTreeMap<u16, Vec<usize>>,
    parents: BTreeSet<u32>,
    qdisc_at: BTreeMap<u32, usize>,
}

impl Tree {
    fn of(dev: &Device) -> Tree {
        let qdiscs = dev.qdiscs();
        let classes: Vec<ClassInfo> = qdiscs
            .iter()
            .filter(|q| !matches!(q.kind, "sfq" | "fq_codel" | "cake"))
            .filter_map(|q| dev.find(q.handle))
            .filter_map(|s| s.q.classes())
            .flat_map(|c| c.walk(0))
            .collect();
        let mut class_at = BTreeMap::new();
        let mut by_major: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        let mut parents = BTreeSet::new();
        for (i, c) in classes.iter().enumerate() {
            class_at.insert(c.classid.0, i);
            by_major.entry(c.classid.major()).or_default().push(i);
            if c.parent != c.classid {
                parents.insert(c.parent.0);
            }
        }
        let qdisc_at = qdiscs
            .iter()
            .enumerate()
            .map(|(i, q)| (q.handle.0, i))
            .collect();
        Tree {
            qdiscs,
            classes,
            class_at,
            by_major,
            parents,
            qdisc_at,
        }
    }

    /// Every non-empty filter block of the device, with the parent it hangs on: the ingress hook's
    /// (ingress, clsact's two), and each qdisc's and each class's of the egress trees.
    fn blocks<'d>(&self, dev: &'d Device) -> Vec<(Handle, &'d tclab_core::filter::Block)> {
        let mut blocks: Vec<(Handle, &tclab_core::filter::Block)> = Vec::new();
        let mut at = |id: Handle, b: Option<&'d tclab_core::filter::Block>| {
            // ingress names one block by every minor; a classless qdisc, one by each class.
            if let Some(b) = b.filter(|b| !b.is_empty()) {
                if !blocks.iter().any(|&(_, x)| std::ptr::eq(x, b)) {
                    blocks.push((id, b));
                }
            }
        };
        if let Some(ing) = dev.ingress() {
            for h in [Handle(0xffff_0000), Handle(0xffff_fff3)] {
                at(h, ing.q.block(h));
            }
        }
        for q in self.qdiscs.iter().filter(|q| q.parent != Handle::INGRESS) {
            let Some(s) = dev.find(q.handle) else {
                continue;
            };
            let ids = self.by_major.get(&q.handle.major()).into_iter().flatten();
            at(q.handle, s.q.block(q.handle));
            for &i in ids {
                let id = self.classes[i].classid;
                at(id, s.q.block(id));
            }
        }
        blocks
    }
}

/// One device under review: what every rule reads.
struct DevCx<'a> {
    origins: &'a Origins,
    opts: &'a Options,
    name: &'a str,
    dev: &'a Device,
    qdiscs: Vec<QdiscInfo>,
    classes: Vec<ClassInfo>,
    /// Every non-empty filter block of the device (see [`Tree::blocks`]).
    blocks: Vec<(Handle, &'a tclab_core::filter::Block)>,
    /// A full frame: the MTU and the Ethernet header.
    mtu: u32,
    line: LineFacts,
    /// The classes packets can reach (filters, CLASSIFY rules).
    reached: BTreeSet<u32>,
    /// The indexes of [`Tree`].
    class_at: BTreeMap<u32, usize>,
    by_major: BTreeMap<u16, Vec<usize>>,
    parents: BTreeSet<u32>,
    qdisc_at: BTreeMap<u32, usize>,
    /// Whether any filter hangs anywhere on the device's egress tree.
    filtered: bool,
    marks: &'a marks::MarkSetters<'a>,
    /// Every action of the policy's reachable filters.
    actions: &'a [FilterAction],
    /// Those that redirect or mirror to a device.
    redirects: &'a [ifb::Redirect],
    /// Classes on this device whose `class add` was refused: the refusal is their finding, and what
    /// follows from it (children made at the top) is not reported again.
    refused_classids: BTreeSet<u32>,
    /// Classes on this device a refused `filter add` named: the refusal is the finding, not each
    /// class it leaves unreached.
    refused_flowids: BTreeSet<u32>,
}

impl<'a> DevCx<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        origins: &'a Origins,
        opts: &'a Options,
        name: &'a str,
        dev: &'a Device,
        tree: Tree,
        line: LineFacts,
        marks: &'a marks::MarkSetters<'a>,
        actions: &'a [FilterAction],
        redirects: &'a [ifb::Redirect],
    ) -> DevCx<'a> {
        let blocks = tree.blocks(dev);
        let Tree {
            qdiscs,
            classes,
            class_at,
            by_major,
            parents,
            qdisc_at,
        } = tree;
        let filtered = blocks.iter().any(|(h, _)| h.major() != 0xffff);
        let mut cx = DevCx {
            origins,
            opts,
            name,
            dev,
            qdiscs,
            classes,
            blocks,
            mtu: dev.mtu + 14,
            line,
            reached: BTreeSet::new(),
            class_at,
            by_major,
            parents,
            qdisc_at,
            refused_classids: BTreeSet::new(),
            refused_flowids: BTreeSet::new(),
            filtered,
            marks,
            actions,
            redirects,
        };
        cx.reached = cx.reached_classes();
        cx
    }

    /// The classes packets can reach: iptables CLASSIFY targets for this device, and what the filters
    /// a packet can reach (chain 0, or a chain it jumps to) at each qdisc name; then what the reachable
    /// filters of each inner class reached name, until nothing is added (a leaf's filters are never
    /// read, nor those of an inner class nothing sends packets to).
    fn reached_classes(&self) -> BTreeSet<u32> {
        let mut reached: BTreeSet<u32> = self.marks.classify_targets(self.name).collect();
        for q in &self.qdiscs {
            if let Some(b) = self.dev.find(q.handle).and_then(|s| s.q.block(q.handle)) {
                reached.extend(b.reached_classes());
            }
        }
        let parents = &self.parents;
        let mut todo: Vec<u32> = reached.iter().copied().collect();
        while let Some(id) = todo.pop() {
            let c = Handle(id);
            let owner = Handle(id & 0xffff_0000);
            if c == owner || !parents.contains(&id) {
                continue;
            }
            if let Some(b) = self.dev.find(owner).and_then(|s| s.q.block(c)) {
                for k in b.reached_classes() {
                    if reached.insert(k) {
                        todo.push(k);
                    }
                }
            }
        }
        reached
    }

    fn bound(&self, classid: u32) -> bool {
        self.reached.contains(&classid)
    }

    fn class(&self, classid: Handle) -> Option<&ClassInfo> {
        self.class_at.get(&classid.0).map(|&i| &self.classes[i])
    }

    /// A class no other class has as its parent.
    fn is_leaf(&self, classid: Handle) -> bool {
        !self.parents.contains(&classid.0)
    }

    /// The classes of the qdisc of major `major` (its root class too, for HFSC).
    fn classes_of(&self, major: u16) -> impl Iterator<Item = &ClassInfo> {
        self.by_major
            .get(&major)
            .into_iter()
            .flatten()
            .map(|&i| &self.classes[i])
    }

    fn qdisc(&self, handle: Handle) -> Option<&QdiscInfo> {
        self.qdisc_at.get(&handle.0).map(|&i| &self.qdiscs[i])
    }

    fn qdisc_at(&self, q: &QdiscInfo) -> String {
        if q.parent == Handle::INGRESS {
            return format!("{} qdisc ingress", self.name);
        }
        format!("{} qdisc {} {}", self.name, q.kind, q.handle)
    }

    fn qdisc_line(&self, q: &QdiscInfo) -> Option<&'a str> {
        self.origins.qdisc(self.name, q.handle, q.parent)
    }

    fn class_line(&self, classid: Handle) -> Option<&'a str> {
        self.origins.class(self.name, classid)
    }

    /// The parent a class's record names (`parent 1:1`), as written.
    fn class_parent_written(&self, classid: Handle) -> Option<u32> {
        let r = self.origins.class_record(self.name, classid)?;
        origins::TcLine::parse(&r.entry)?.parent
    }

    fn check(&self, out: &mut Vec<Finding>) {
        if self.qdiscs.is_empty() {
            return; // a device that is down, with nothing attached
        }
        line::check(self, out);
        tree::check(self, out);
        buckets::check(self, out);
        filters::check(self, out);
        u32hash::check(self, out);
        shadowed::check(self, out);
        u32mask::check(self, out);
        marks::check(self, out);
        taprio::check(self, out);
        self.ingress_police(out);
    }

    /// Policing at ingress where an ifb would shape.
    fn ingress_police(&self, out: &mut Vec<Finding>) {
        let Some(ing) = self.dev.ingress() else {
            return;
        };
        let Some(block) = ing.q.block(Handle::INGRESS) else {
            return;
        };
        // Only a policer: an ingress filter redirecting to an ifb is the cure, not the problem.
        let polices = block.tps().any(|tp| {
            block
                .tp_filters(tp)
                .iter()
                .flat_map(|(_, exts)| exts.actions.iter())
                .any(|a| a.borrow().kind() == "police")
        });
        // Where the ingress already redirects to an ifb, the fix is to shape there instead.
        let ifb = self
            .redirects
            .iter()
            .find(|r| {
                r.filter.dev == self.name
                    && r.filter.parent.major() == 0xffff
                    && r.mirred.is_redirect()
            })
            .map(|r| r.mirred.dev.clone());
        if polices {
            out.push(
                Finding::new(
                    "ingress-police",
                    format!("{} qdisc ingress", self.name),
                    "traffic arriving here is policed at ingress: a policer drops what exceeds its rate \
                     instead of queueing it, which TCP takes as heavy loss",
                    match ifb {
                        Some(to) => format!(
                            "ingress is already redirected to {to}: shape downloads there (HTB or \
                             cake with fq_codel) and drop the policer"
                        ),
                        None => "to shape downloads, redirect ingress to an ifb device (`action \
                                 mirred egress redirect dev ifb0`) and shape there with HTB or \
                                 fq_codel, as sqm-scripts do"
                            .to_string(),
                    },
                )
                .line(self.origins.qdisc(self.name, Handle(0xffff_0000), Handle::INGRESS)),
            );
        }
    }
}

/// One action of a filter a packet can reach (its chain is 0, or one a reachable filter jumps to):
/// where the filter is, and what the action does.
#[derive(Clone, Debug)]
pub(super) struct FilterAction {
    pub dev: String,
    /// Where the filter hangs (`ffff:` for ingress, clsact's `ffff:fff3`, a qdisc or a class).
    pub parent: Handle,
    pub pref: u32,
    /// Host-order EtherType, or `ETH_P_ALL`.
    pub protocol: u16,
    pub params: tclab_core::action::ActionParams,
}

impl FilterAction {
    fn at(&self) -> String {
        format!(
            "{} filter parent {} pref {}",
            self.dev,
            if self.parent == Handle(0xffff_0000) {
                "ffff:".to_string()
            } else {
                self.parent.to_string()
            },
            self.pref
        )
    }

    fn line<'a>(&self, origins: &'a Origins) -> Option<&'a str> {
        origins
            .filter(&self.dev, self.parent, Some(self.pref))
            .map(|r| r.at.as_str())
    }
}

/// Every action of every reachable filter of the policy.
fn filter_actions(trees: &[(&str, &Device, Tree)]) -> Vec<FilterAction> {
    let mut out = Vec::new();
    for &(name, dev, ref tree) in trees {
        for (parent, b) in tree.blocks(dev) {
            for chain in b.reachable_chains() {
                for tp in b.chains.get(&chain).into_iter().flatten() {
                    for (_, exts) in b.tp_filters(tp) {
                        for a in &exts.actions {
                            out.push(FilterAction {
                                dev: name.to_string(),
                                parent,
                                pref: tp.prio,
                                protocol: tp.protocol,
                                params: a.borrow().params.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// The refusals, one finding per cause: a command refused because an earlier refused command would
/// have created what it names (its device, its parent qdisc or class) is folded into that one, whose
/// finding lists the lines of the commands that failed with it.
fn refused(refusals: &[Refusal]) -> Vec<Finding> {
    struct Cause<'a> {
        at: &'a str,
        command: &'a str,
        message: &'a str,
        /// What the refused commands of this cause would have created: devices, qdisc majors, classes.
        devices: Vec<String>,
        majors: Vec<(String, u32)>,
        classes: Vec<(String, u32)>,
        followers: Vec<&'a str>,
        /// A u32 filter add past the block's 2 047 instances (see `u32_full` below).
        u32_full: bool,
    }
    let mut causes: Vec<Cause> = Vec::new();
    for (at, command, message) in refusals {
        let words: Vec<String> = command.split_whitespace().map(String::from).collect();
        let tc = origins::TcLine::parse(&words);
        let dev = words
            .iter()
            .position(|w| w == "dev")
            .and_then(|p| words.get(p + 1))
            .cloned();
        let missing = message.contains("not found")
            || message.contains("Failed to find")
            || message.contains("Cannot find device")
            || message.contains("doesn't exist")
            || message.contains("No such");
        let depends = |c: &Cause| -> bool {
            let Some(d) = &dev else {
                return false;
            };
            if c.devices.contains(d) {
                return true;
            }
            let Some(l) = &tc else {
                return false;
            };
            let parent = l.parent.filter(|&p| p != Handle::ROOT.0);
            let named = [parent, l.classid].into_iter().flatten();
            named.into_iter().any(|id| {
                c.majors.contains(&(d.clone(), id & 0xffff_0000))
                    || c.classes.contains(&(d.clone(), id))
            })
        };
        // "Filter already exists" for a u32 add that names no handle: the new instance's root table
        // got id 0 (`gen_new_htid` had none left: a block holds 2 047 u32 instances, one per pref),
        // and every later add at a new pref fails the same way: one cause.
        let u32_full = message.contains("Filter already exists")
            && tc
                .as_ref()
                .is_some_and(|l| l.object == "filter" && l.kind == Some("u32"))
            && !words.iter().any(|w| w == "handle");
        let found = if missing {
            causes.iter_mut().rev().find(|c| depends(c))
        } else if u32_full {
            causes
                .iter_mut()
                .find(|c| c.u32_full && c.devices.is_empty() && same_dev(c.command, &dev))
        } else {
            None
        };
        let cause = match found {
            Some(c) => {
                c.followers.push(at);
                c
            }
            None => {
                causes.push(Cause {
                    at,
                    command,
                    message,
                    devices: Vec::new(),
                    majors: Vec::new(),
                    classes: Vec::new(),
                    followers: Vec::new(),
                    u32_full,
                });
                causes.last_mut().expect("just pushed")
            }
        };
        // What this refused command would have made, for the commands after it.
        if let Some(d) = dev {
            if words.first().is_some_and(|w| w == "link")
                && words.get(1).is_some_and(|w| w == "add")
            {
                cause.devices.push(d.clone());
            }
            if let Some(l) = &tc {
                match l.object {
                    "qdisc" => {
                        if let Some(h) = l.qdisc_handle() {
                            cause.majors.push((d.clone(), h));
                        }
                    }
                    "class" => {
                        if let Some(c) = l.classid {
                            cause.classes.push((d.clone(), c));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    causes
        .into_iter()
        .map(|c| {
            let first = c
                .message
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(no message)");
            let mut message = format!("`{}` is refused: {first}", c.command);
            if !c.followers.is_empty() {
                let n = c.followers.len();
                // `script.sh:7` as `7` when the cause is in the same file.
                let file = c.at.rsplit_once(':').map_or(c.at, |(f, _)| f);
                let shown: Vec<&str> = c
                    .followers
                    .iter()
                    .take(8)
                    .map(|at| match at.rsplit_once(':') {
                        Some((f, n)) if f == file => n,
                        _ => at,
                    })
                    .collect();
                let what = if c.u32_full {
                    format!(
                        "u32 filter{} at a new pref",
                        if n == 1 { "" } else { "s" }
                    )
                } else {
                    format!(
                        "command{} that depend{} on it",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "s" } else { "" }
                    )
                };
                message.push_str(&format!(
                    "; {n} later {what} {} refused too (line{} {}{})",
                    if n == 1 { "is" } else { "are" },
                    if n == 1 { "" } else { "s" },
                    shown.join(", "),
                    if n > shown.len() { ", …" } else { "" }
                ));
            }
            if c.u32_full {
                message.push_str(
                    ": the qdisc's filters already hold 2 047 u32 filters of different prefs, the most \
                     a block has table ids for (the kernel refuses the 2 048th with this message)",
                );
            }
            // mq and multiq need a device of several transmit queues (EOPNOTSUPP on one).
            let fix = if c.u32_full {
                "give u32 filters one pref (`prio 1` for all: nodes 800::800, 800::801… of one \
                 instance), or put many hosts in a hash table (`handle 2: u32 divisor 256`, a node \
                 with `hashkey mask 0x000000ff at 16 link 2:`, the hosts with `ht 2:N:`)"
            } else if first.contains("Operation not supported") {
                "correct the command; if it is an mq (or multiq) root, the device needs several \
                 transmit queues: check the policy on the host's devices, `tclab check --txqueues \
                 DEV=N`"
            } else {
                "correct the command; until then the policy is not what the script says"
            };
            Finding::new("refused", c.at, message, fix).line(Some(c.at))
        })
        .collect()
}

/// Whether `command` names device `dev` (`dev X`).
fn same_dev(command: &str, dev: &Option<String>) -> bool {
    let mut words = command.split_whitespace();
    let named = words.by_ref().find(|&w| w == "dev").and(words.next());
    named.is_some() && named == dev.as_deref()
}

/// How many places of a group the text report names; `--json` lists every finding.
const GROUP_SHOWN: usize = 8;

/// The text report. Findings that say the same thing (code, message and fix) about different places
/// are printed once with the places listed: a LibreQoS-sized policy whose 10 000 leaves share one
/// mistake is one paragraph, not 10 000. The counts at the end are of findings, not paragraphs.
pub fn render(findings: &[Finding]) -> String {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    let mut index: BTreeMap<(&str, Severity, &str, &str), usize> = BTreeMap::new();
    for f in findings {
        let key = (f.code, f.severity, f.message.as_str(), f.fix.as_str());
        match index.get(&key) {
            Some(&g) => groups[g].push(f),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![f]);
            }
        }
    }
    // A group's places in the order the policy made them (its script lines, its records), so that
    // those named are the first ones written, not the first in a class hash's walk.
    fn order(f: &Finding) -> Option<(&str, u64)> {
        f.line.as_deref().map(origin_order)
    }
    for g in &mut groups {
        // Stable: places of one origin, and those of none (last), stay as found.
        g.sort_by(|a, b| match (order(a), order(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (x, y) => y.is_some().cmp(&x.is_some()),
        });
    }
    let place = |f: &Finding| match &f.line {
        Some(l) if *l != f.at => format!("{} ({l})", f.at),
        _ => f.at.clone(),
    };
    let mut s = String::new();
    for g in &groups {
        let f = g[0];
        s.push_str(&format!("{}[{}] {}\n", f.severity.name(), f.code, place(f)));
        if g.len() > 1 {
            let more = g.len() - 1;
            let shown: Vec<String> = g[1..].iter().take(GROUP_SHOWN).map(|f| place(f)).collect();
            s.push_str(&format!(
                "  and {more} more place{} alike: {}{}\n",
                if more == 1 { "" } else { "s" },
                shown.join(", "),
                if more > shown.len() {
                    format!(
                        ", … ({} not listed; `--json` lists all)",
                        more - shown.len()
                    )
                } else {
                    String::new()
                }
            ));
        }
        s.push_str(&format!(
            "  {}\n  fix: {}\n  see: docs/checks/{}.md\n",
            f.message, f.fix, f.code
        ));
    }
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let (e, w, n) = (
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Note),
    );
    s.push_str(&format!(
        "{e} error{}, {w} warning{}, {n} note{}\n",
        plural(e),
        plural(w),
        plural(n)
    ));
    s
}

/// A finding's origin (`FILE:LINE`, `STORE record N`) as what it is in and its number there, for
/// ordering; an origin of another form is its text alone.
fn origin_order(line: &str) -> (&str, u64) {
    for sep in [":", " record "] {
        if let Some((file, n)) = line.rsplit_once(sep) {
            if let Ok(n) = n.parse() {
                return (file, n);
            }
        }
    }
    (line, 0)
}

/// The exit status: 2 with an error, 1 with a warning, else 0.
pub fn exit_status(findings: &[Finding]) -> u8 {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Error) => 2,
        Some(Severity::Warning) => 1,
        _ => 0,
    }
}
