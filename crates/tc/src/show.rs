//! `tc qdisc show` and `tc class show`, printed as iproute2 6.1 prints the kernel's dump: same words, same
//! spacing (trailing spaces included), same rounding of bursts through psched ticks.

use crate::util::{push_handle, push_hex, push_size, push_u64};
use crate::ShowFlags;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::engine::QdiscInfo;
use tclab_core::qdisc::{ClassInfo, QdiscStats};
use tclab_core::{Engine, Handle, Nanos};

/// `refcnt` of a root qdisc on a single-queue device.
/// The root qdisc's reference count as the kernel reports it: one for the device, one per transmit queue
/// holding it (2 on a single-queue device); the device's own default root (handle 0) shows 2.
fn root_refcnt(q: &QdiscInfo, txqueues: u32) -> u32 {
    if q.handle == tclab_core::Handle::UNSPEC {
        2
    } else {
        1 + txqueues.max(1)
    }
}

fn handle_str(h: Handle) -> String {
    format!("{:x}:", h.major())
}

fn stats_block(s: &QdiscStats, out: &mut String) {
    // Written piece by piece rather than through `write!`: a listing prints this 10 000 times.
    out.push_str(" Sent ");
    push_u64(out, s.bytes);
    out.push_str(" bytes ");
    push_u64(out, s.packets);
    out.push_str(" pkt");
    queue_stats_block(s, out);
}

/// The two lines of counters `tc -s` prints under a qdisc (for a caller that adds up several engines'
/// counters, as `tclab live --queues N` does for its mq roots).
pub fn stats_text(s: &QdiscStats) -> String {
    let mut out = String::new();
    stats_block(s, &mut out);
    out
}

/// The counters the kernel dumps for a class (`tc_fill_tclass`: its discipline's `dump_stats`, if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassCounters {
    /// Basic and queue counters: `Sent … (dropped …)` and `backlog`.
    Full,
    /// Queue counters only (`gnet_stats_copy_queue`): flow queues listed as classes, skbprio's bands.
    QueueOnly,
    /// None: the discipline has no `dump_stats` (TBF, RED, CBS, netem: their one class), and tc
    /// prints an empty line under the class.
    None,
}

/// Which counters `tc -s class show` prints for `c`.
pub fn class_counters(c: &ClassInfo) -> ClassCounters {
    if c.is_flow_queue() || c.kind == "skbprio" {
        // skbprio's classes report queue counters only too (`skbprio_dump_class_stats`).
        ClassCounters::QueueOnly
    } else if c.options.is_some()
        || c.xstats.is_some()
        || matches!(c.kind, "prio" | "mq" | "multiq" | "mqprio" | "taprio")
    {
        ClassCounters::Full
    } else {
        ClassCounters::None
    }
}

/// A class whose discipline reports queue counters only (`gnet_stats_copy_queue` without basic counters:
/// sfq's, fq_codel's and cake's flows): tc prints no `Sent` part.
fn queue_stats_block(s: &QdiscStats, out: &mut String) {
    out.push_str(" (dropped ");
    push_u64(out, s.drops.into());
    out.push_str(", overlimits ");
    push_u64(out, s.overlimits.into());
    out.push_str(" requeues ");
    push_u64(out, s.requeues.into());
    out.push_str(") \n backlog ");
    push_size(out, s.backlog);
    out.push(' ');
    push_u64(out, s.qlen.into());
    out.push_str("p requeues ");
    push_u64(out, s.requeues.into());
    out.push('\n');
}

fn stats_json(s: &QdiscStats, m: &mut Map<String, Value>) {
    m.insert("bytes".into(), json!(s.bytes));
    m.insert("packets".into(), json!(s.packets));
    m.insert("drops".into(), json!(s.drops));
    m.insert("overlimits".into(), json!(s.overlimits));
    m.insert("requeues".into(), json!(s.requeues));
    m.insert("backlog".into(), json!(s.backlog));
    m.insert("qlen".into(), json!(s.qlen));
}

fn qdisc_line(
    q: &QdiscInfo,
    dev: Option<&str>,
    txqueues: u32,
    flags: ShowFlags,
    out: &mut String,
    json_out: &mut Vec<Value>,
) {
    let (opts, jopts) = crate::qdisc::qdisc_options(&q.options, flags);
    if flags.json {
        let mut m = Map::new();
        m.insert("kind".into(), json!(q.kind));
        m.insert("handle".into(), json!(handle_str(q.handle)));
        if let Some(d) = dev {
            m.insert("dev".into(), json!(d));
        }
        if q.parent == Handle::ROOT {
            m.insert("root".into(), json!(true));
            if !matches!(q.kind, "mq" | "mqprio") && !q.children_on_txqs {
                m.insert("refcnt".into(), json!(root_refcnt(q, txqueues)));
            }
        } else if q.parent == Handle::INGRESS {
            m.insert("parent".into(), json!("ffff:fff1"));
        } else {
            m.insert("parent".into(), json!(q.parent.to_string()));
            if q.on_txq {
                m.insert("refcnt".into(), json!(2));
            }
        }
        m.insert("options".into(), jopts);
        if let Some(s) = q.stab.as_ref().filter(|_| flags.details) {
            m.insert("stab".into(), crate::stab::print_json(s));
        }
        if flags.stats {
            stats_json(&q.stats, &mut m);
            if let Some(x) = &q.xstats {
                crate::qdisc::qdisc_xstats_json(q.kind, x, &mut m);
            }
        }
        json_out.push(Value::Object(m));
        return;
    }
    let _ = write!(out, "qdisc {} {}", q.kind, handle_str(q.handle));
    if flags.raw {
        let _ = write!(out, "[{:08x}]", q.handle.0);
    }
    out.push(' ');
    if let Some(d) = dev {
        let _ = write!(out, "dev {d} ");
    }
    if q.parent == Handle::ROOT {
        // tc prints the refcount only when it is not 1: mq's and mqprio's is (they hold no transmit
        // queue themselves), and a full-offload taprio's (its children hold them).
        if matches!(q.kind, "mq" | "mqprio") || q.children_on_txqs {
            out.push_str("root ");
        } else {
            let _ = write!(out, "root refcnt {} ", root_refcnt(q, txqueues));
        }
    } else if q.parent == Handle::INGRESS {
        out.push_str("parent ffff:fff1 ");
    } else {
        let _ = write!(out, "parent {} ", q.parent);
        // A child a transmit queue holds too (a full-offload taprio's): refcount 2.
        if q.on_txq {
            out.push_str("refcnt 2 ");
        }
    }
    out.push_str(&opts);
    out.push('\n');
    if let Some(s) = q.stab.as_ref().filter(|_| flags.details) {
        out.push_str(&crate::stab::print(s));
        out.push('\n');
    }
    if flags.stats {
        stats_block(&q.stats, out);
        if let Some(x) = &q.xstats {
            crate::qdisc::qdisc_xstats(q.kind, x, out);
        }
    }
}

/// `tc qdisc show [dev DEV] [handle H] [root|parent P]`.
pub fn qdiscs(
    engine: &Engine,
    dev: Option<&str>,
    handle: Option<Handle>,
    parent: Option<Handle>,
    flags: ShowFlags,
    out: &mut String,
) {
    let mut json_out = Vec::new();
    for (name, d) in engine.devices() {
        if dev.is_some_and(|x| x != name) {
            continue;
        }
        for q in d.qdiscs() {
            if handle.is_some_and(|h| h != q.handle) || parent.is_some_and(|p| p != q.parent) {
                continue;
            }
            qdisc_line(
                &q,
                if dev.is_none() { Some(name) } else { None },
                d.txqueues,
                flags,
                out,
                &mut json_out,
            );
        }
    }
    if flags.json {
        let mut p = crate::jprint::Printer::new(flags);
        for q in &json_out {
            p.value(None, q);
        }
        out.push_str(&p.finish());
    }
}

/// What a class listing selects (`qdisc`, `parent`, `classid`): `None` selects every class.
#[derive(Clone, Copy, Default)]
pub struct ClassSelect {
    pub qdisc: Option<Handle>,
    pub parent: Option<Handle>,
    pub classid: Option<Handle>,
}

/// `tc class show dev DEV [qdisc Q] [parent P] [classid C]`. iproute2 6.1 prints classes as text even
/// with `-j`. With `qdisc`, tc lists only that qdisc's classes and prints their ids and parents by
/// minor alone (`class htb :11 parent :1`), as `print_class` does with `filter_qdisc`.
pub fn classes(
    engine: &Engine,
    dev: &str,
    select: ClassSelect,
    flags: ShowFlags,
    now: Nanos,
    out: &mut String,
) {
    let Some(d) = engine.device(dev) else { return };
    let ClassSelect {
        qdisc,
        parent,
        classid,
    } = select;
    // Printed as the walk goes: no vector of every class first.
    d.for_each_class(now, &mut |c| {
        // The kernel's dump (`tc_dump_tclass_qdisc`) selects by the parent's major number only: every
        // class of that qdisc is listed, whichever class `parent` named (`root` matches none).
        if parent.is_some_and(|p| p.major() != c.classid.major())
            || qdisc.is_some_and(|q| q.major() != c.classid.major())
            || classid.is_some_and(|h| h != c.classid)
        {
            return;
        }
        // tc's handle printer gives a minor alone as `:b` (and 0 as `none`).
        let push_id = |out: &mut String, h: Handle| match (qdisc, h.minor()) {
            (None, _) => push_handle(out, h),
            (Some(_), 0) => out.push_str("none"),
            (Some(_), minor) => {
                out.push(':');
                push_hex(out, minor.into());
            }
        };
        out.push_str("class ");
        out.push_str(c.kind);
        out.push(' ');
        push_id(out, c.classid);
        if c.parent == Handle::ROOT {
            out.push_str(" root ");
        } else {
            out.push_str(" parent ");
            push_id(out, c.parent);
            out.push(' ');
        }
        if let Some(l) = c.leaf {
            out.push_str("leaf ");
            push_hex(out, l.major().into());
            out.push_str(": ");
        }
        crate::qdisc::class_options_into(c, flags, out);
        out.push('\n');
        if flags.stats {
            match class_counters(c) {
                ClassCounters::QueueOnly => queue_stats_block(&c.stats, out),
                ClassCounters::Full => stats_block(&c.stats, out),
                ClassCounters::None => out.push('\n'),
            }
            crate::qdisc::class_xstats(c, out);
        }
    });
}
