//! `tc qdisc show` and `tc class show`, printed as iproute2 6.1 prints the kernel's dump: same words, same
//! spacing (trailing spaces included), same rounding of bursts through psched ticks.

use crate::util::{calc_xmitsize, fmt_g, sprint_rate, sprint_size, sprint_time, tick2time};
use crate::ShowFlags;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::engine::QdiscInfo;
use tclab_core::qdisc::cbq::{self, CbqOptions, CbqXstats};
use tclab_core::qdisc::pfifo_fast::PRIOMAP;
use tclab_core::qdisc::sfq::SfqOptions;
use tclab_core::qdisc::{ClassInfo, ClassOptions, QdiscOptions, QdiscStats, Xstats};
use tclab_core::units::LinkLayer;
use tclab_core::{Engine, Handle, Nanos};

/// `refcnt` of a root qdisc on a single-queue device.
const ROOT_REFCNT: u32 = 2;

fn handle_str(h: Handle) -> String {
    format!("{:x}:", h.major())
}

fn stats_block(s: &QdiscStats, out: &mut String) {
    let _ = write!(
        out,
        " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues {}) \n backlog {} {}p requeues {}\n",
        s.bytes,
        s.packets,
        s.drops,
        s.overlimits,
        s.requeues,
        sprint_size(s.backlog),
        s.qlen,
        s.requeues
    );
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

/// The options part of a qdisc line, and its JSON form.
pub fn qdisc_options(o: &QdiscOptions, flags: ShowFlags) -> (String, Value) {
    let mut s = String::new();
    let mut j = Map::new();
    match o {
        QdiscOptions::Pfifo(f) => {
            let limit = f.limit.unwrap_or(0);
            let _ = write!(s, "limit {limit}p");
            j.insert("limit".into(), json!(limit));
        }
        QdiscOptions::Bfifo(f) => {
            let limit = f.limit.unwrap_or(0);
            let _ = write!(s, "limit {}", sprint_size(limit));
            j.insert("limit".into(), json!(limit));
        }
        // DRR dumps no TCA_OPTIONS: tc prints nothing, and an empty JSON object.
        QdiscOptions::Noqueue | QdiscOptions::Drr => {}
        QdiscOptions::Ingress | QdiscOptions::Clsact => s.push_str("---------------- "),
        QdiscOptions::PfifoFast => {
            s.push_str("bands 3 priomap");
            for p in PRIOMAP {
                let _ = write!(s, " {p}");
            }
            j.insert("bands".into(), json!(3));
            j.insert("priomap".into(), json!(PRIOMAP));
        }
        QdiscOptions::Tbf(t) => {
            let rate = t.rate.rate;
            let _ = write!(s, "rate {} ", sprint_rate(rate));
            j.insert("rate".into(), json!(rate));
            let buffer = calc_xmitsize(rate, t.buffer);
            if flags.details {
                let _ = write!(
                    s,
                    "burst {}/1 mpu {} ",
                    sprint_size(buffer),
                    sprint_size(t.rate.mpu as u32)
                );
                j.insert("burst".into(), json!(format!("{}/1", sprint_size(buffer))));
                j.insert("mpu".into(), json!(t.rate.mpu));
            } else {
                let _ = write!(s, "burst {} ", sprint_size(buffer));
                j.insert("burst".into(), json!(buffer));
            }
            let prate = t.peakrate.rate;
            if prate != 0 {
                let _ = write!(s, "peakrate {} ", sprint_rate(prate));
                if t.mtu != 0 || t.peakrate.mpu != 0 {
                    let mtu = calc_xmitsize(prate, t.mtu);
                    if flags.details {
                        let _ = write!(
                            s,
                            "mtu {}/1 mpu {} ",
                            sprint_size(mtu),
                            sprint_size(t.peakrate.mpu as u32)
                        );
                        j.insert("mtu".into(), json!(format!("{}/1", sprint_size(mtu))));
                    } else {
                        let _ = write!(s, "minburst {} ", sprint_size(mtu));
                        j.insert("minburst".into(), json!(mtu));
                    }
                }
            }
            let mut latency = 1e6 * (t.limit as f64 / rate as f64) - tick2time(t.buffer) as f64;
            if prate != 0 {
                let lat2 = 1e6 * (t.limit as f64 / prate as f64) - tick2time(t.mtu) as f64;
                latency = latency.max(lat2);
            }
            if latency >= 0.0 {
                let _ = write!(s, "lat {} ", sprint_time(latency as u32));
                j.insert("lat".into(), json!(latency as u64));
            }
            if flags.raw || latency < 0.0 {
                let _ = write!(s, "limit {} ", sprint_size(t.limit));
                j.insert("limit".into(), json!(t.limit));
            }
            if t.rate.overhead != 0 {
                let _ = write!(s, "overhead {} ", t.rate.overhead);
                j.insert("overhead".into(), json!(t.rate.overhead));
            }
            if t.rate.linklayer != LinkLayer::Ethernet || flags.details {
                let _ = write!(s, "linklayer {} ", t.rate.linklayer.name());
                j.insert("linklayer".into(), json!(t.rate.linklayer.name()));
            }
        }
        QdiscOptions::Htb(h) => {
            let defcls = if h.defcls == 0 {
                "0".to_string()
            } else {
                format!("{:#x}", h.defcls)
            };
            let _ = write!(
                s,
                "r2q {} default {} direct_packets_stat {}",
                h.r2q, defcls, h.direct_pkts
            );
            j.insert("r2q".into(), json!(h.r2q));
            j.insert("default".into(), json!(defcls));
            j.insert("direct_packets_stat".into(), json!(h.direct_pkts));
            if flags.details {
                s.push_str(" ver 3.17");
                j.insert("ver".into(), json!("3.17"));
            }
            if let Some(q) = h.direct_qlen {
                let _ = write!(s, " direct_qlen {q}");
                j.insert("direct_qlen".into(), json!(q));
            }
        }
        QdiscOptions::Sfq(o) => sfq_options(o, flags, &mut s, &mut j),
        QdiscOptions::Prio(o) => {
            let _ = write!(s, "bands {} priomap", o.bands);
            for p in o.priomap {
                let _ = write!(s, " {p}");
            }
            j.insert("bands".into(), json!(o.bands));
            j.insert("priomap".into(), json!(o.priomap));
            j.insert("multiqueue".into(), json!(false));
        }
        // q_cbq.c prints with fprintf, which writes nothing JSON can hold: its options object stays empty.
        QdiscOptions::Cbq(o) => s.push_str(&cbq_options(o, flags)),
    }
    (s, Value::Object(j))
}

/// `sfq_print_opt` (tc 6.1).
fn sfq_options(o: &SfqOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let _ = write!(s, "limit {}p quantum {} ", o.limit, sprint_size(o.quantum));
    j.insert("limit".into(), json!(o.limit));
    j.insert("quantum".into(), json!(o.quantum));
    if o.depth != 0 {
        let _ = write!(s, "depth {} ", o.depth);
        j.insert("depth".into(), json!(o.depth));
    }
    if o.headdrop {
        s.push_str("headdrop ");
        j.insert("headdrop".into(), json!(true));
    }
    if flags.details {
        let _ = write!(s, "flows {} ", o.flows);
        j.insert("flows".into(), json!(o.flows));
    }
    let _ = write!(s, "divisor {} ", o.divisor);
    j.insert("divisor".into(), json!(o.divisor));
    if o.perturb_period != 0 {
        let _ = write!(s, "perturb {}sec ", o.perturb_period);
        j.insert("perturb".into(), json!(o.perturb_period));
    }
    if let Some(r) = o.red.filter(|r| r.qth_min != 0) {
        let prob = r.max_p as f64 / 4294967296.0;
        let _ = write!(
            s,
            "ewma {} min {} max {} probability {} ",
            r.wlog,
            sprint_size(r.qth_min),
            sprint_size(r.qth_max),
            fmt_g(prob, 6)
        );
        j.insert("ewma".into(), json!(r.wlog));
        j.insert("min".into(), json!(r.qth_min));
        j.insert("max".into(), json!(r.qth_max));
        j.insert("probability".into(), json!(prob));
        for (bit, name) in [
            (1u8, "ecn"),
            (2, "harddrop"),
            (4, "adaptive"),
            (8, "nodrop"),
        ] {
            if r.flags & bit != 0 {
                let _ = write!(s, "{name} ");
            }
            j.insert(name.into(), json!(r.flags & bit != 0));
        }
        if flags.stats {
            // tclab's SFQ does not run RED, so these counters stay at zero.
            s.push_str("\n  prob_mark 0 prob_mark_head 0 prob_drop 0");
            s.push_str("\n  forced_mark 0 forced_mark_head 0 forced_drop 0");
            for k in [
                "prob_mark",
                "prob_mark_head",
                "prob_drop",
                "forced_mark",
                "forced_mark_head",
                "forced_drop",
            ] {
                j.insert(k.into(), json!(0));
            }
        }
    }
}

/// `cbq_print_opt` (tc 6.1), for the qdisc (its root class) and for classes.
fn cbq_options(o: &CbqOptions, flags: ShowFlags) -> String {
    let mut s = String::new();
    if let Some(r) = &o.rate {
        let _ = write!(s, "rate {} ", sprint_rate(r.spec.rate));
        if r.spec.linklayer != LinkLayer::Ethernet || flags.details {
            let _ = write!(s, "linklayer {} ", r.spec.linklayer.name());
        }
        if flags.details {
            let _ = write!(s, "cell {}b ", 1u64 << r.cell_log);
            if r.spec.mpu != 0 {
                let _ = write!(s, "mpu {}b ", r.spec.mpu);
            }
            if r.spec.overhead != 0 {
                let _ = write!(s, "overhead {}b ", r.spec.overhead);
            }
        }
    }
    if let Some(l) = o.lss.filter(|l| l.flags != 0) {
        let mut words = Vec::new();
        if l.flags & cbq::LSS_BOUNDED != 0 {
            words.push("bounded");
        }
        if l.flags & cbq::LSS_ISOLATED != 0 {
            words.push("isolated");
        }
        let _ = write!(s, "({}) ", words.join(","));
    }
    if let Some(w) = &o.wrr {
        if w.priority != cbq::MAXPRIO {
            let _ = write!(s, "prio {}", w.priority);
        } else {
            s.push_str("prio no-transmit");
        }
        if flags.details {
            let _ = write!(s, "/{} ", w.cpriority);
            if w.weight != 1 {
                let _ = write!(s, "weight {} ", sprint_rate(w.weight as u64));
            }
            if w.allot != 0 {
                let _ = write!(s, "allot {}b ", w.allot);
            }
        }
    }
    if let Some(l) = o.lss.filter(|_| flags.details) {
        let _ = write!(
            s,
            "\nlevel {} ewma {} avpkt {}b ",
            l.level, l.ewma_log, l.avpkt
        );
        let ticks = |t: u32| sprint_time(tick2time(t));
        if l.maxidle != 0 {
            let _ = write!(s, "maxidle {} ", ticks(l.maxidle >> l.ewma_log));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.maxidle);
            }
        }
        if l.minidle != 0x7fff_ffff {
            let _ = write!(s, "minidle {} ", ticks(l.minidle >> l.ewma_log));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.minidle);
            }
        }
        if l.offtime != 0 {
            let _ = write!(s, "offtime {} ", ticks(l.offtime));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.offtime);
            }
        }
    }
    if let Some(f) = o.fopt.filter(|_| flags.details) {
        let _ = write!(s, "\nsplit {} ", Handle(f.split));
        if f.defmap != 0 {
            let _ = write!(s, "defmap {:08x}", f.defmap);
        }
    }
    s
}

/// `cbq_print_xstats`.
fn cbq_xstats(x: &CbqXstats) -> String {
    format!(
        "  borrowed {} overactions {} avgidle {} undertime {}",
        x.borrows,
        x.overactions,
        fmt_g(x.avgidle as f64, 6),
        fmt_g(x.undertime as f64, 6)
    )
}

fn qdisc_line(
    q: &QdiscInfo,
    dev: Option<&str>,
    flags: ShowFlags,
    out: &mut String,
    json_out: &mut Vec<Value>,
) {
    let (opts, jopts) = qdisc_options(&q.options, flags);
    if flags.json {
        let mut m = Map::new();
        m.insert("kind".into(), json!(q.kind));
        m.insert("handle".into(), json!(handle_str(q.handle)));
        if let Some(d) = dev {
            m.insert("dev".into(), json!(d));
        }
        if q.parent == Handle::ROOT {
            m.insert("root".into(), json!(true));
            m.insert("refcnt".into(), json!(ROOT_REFCNT));
        } else {
            m.insert("parent".into(), json!(q.parent.to_string()));
        }
        m.insert("options".into(), jopts);
        if flags.stats {
            stats_json(&q.stats, &mut m);
        }
        json_out.push(Value::Object(m));
        return;
    }
    let _ = write!(out, "qdisc {} {} ", q.kind, handle_str(q.handle));
    if let Some(d) = dev {
        let _ = write!(out, "dev {d} ");
    }
    if q.parent == Handle::ROOT {
        let _ = write!(out, "root refcnt {ROOT_REFCNT} ");
    } else if q.parent == Handle::INGRESS {
        out.push_str("parent ffff:fff1 ");
    } else {
        let _ = write!(out, "parent {} ", q.parent);
    }
    out.push_str(&opts);
    out.push('\n');
    if flags.stats {
        stats_block(&q.stats, out);
        if let Some(Xstats::Cbq(x)) = &q.xstats {
            out.push_str(&cbq_xstats(x));
            out.push('\n');
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
    for (name, d) in &engine.devices {
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
                flags,
                out,
                &mut json_out,
            );
        }
    }
    if flags.json {
        let text = if flags.pretty {
            serde_json::to_string_pretty(&json_out)
        } else {
            serde_json::to_string(&json_out)
        };
        out.push_str(&text.unwrap_or_default());
        out.push('\n');
    }
}

/// The options part of a class line.
pub fn class_options(c: &ClassInfo, flags: ShowFlags) -> String {
    let mut s = String::new();
    if let Some(ClassOptions::Cbq(o)) = &c.options {
        return cbq_options(o, flags);
    }
    if let Some(ClassOptions::Drr(o)) = &c.options {
        // `drr_print_opt`.
        if let Some(q) = o.quantum {
            let _ = write!(s, "quantum {} ", sprint_size(q));
        }
        return s;
    }
    let Some(ClassOptions::Htb(h)) = &c.options else {
        return s;
    };
    if h.level == 0 {
        let _ = write!(s, "prio {} ", h.prio);
        if flags.details {
            let _ = write!(s, "quantum {} ", h.quantum);
        }
    }
    let _ = write!(s, "rate {} ", sprint_rate(h.rate.rate));
    if h.rate.overhead != 0 {
        let _ = write!(s, "overhead {} ", h.rate.overhead);
    }
    let buffer = calc_xmitsize(h.rate.rate, h.buffer);
    let _ = write!(s, "ceil {} ", sprint_rate(h.ceil.rate));
    let cbuffer = calc_xmitsize(h.ceil.rate, h.cbuffer);
    if h.rate.linklayer != LinkLayer::Ethernet || flags.details {
        let _ = write!(s, "linklayer {} ", h.rate.linklayer.name());
    }
    if flags.details {
        let _ = write!(
            s,
            "burst {}/1 mpu {} cburst {}/1 mpu {} level {} ",
            sprint_size(buffer),
            sprint_size(h.rate.mpu as u32),
            sprint_size(cbuffer),
            sprint_size(h.ceil.mpu as u32),
            h.level
        );
    } else {
        let _ = write!(
            s,
            "burst {} cburst {} ",
            sprint_size(buffer),
            sprint_size(cbuffer)
        );
    }
    if flags.raw {
        let _ = write!(s, "buffer [{:08x}] cbuffer [{:08x}] ", h.buffer, h.cbuffer);
    }
    s
}

/// `tc class show dev DEV [parent P] [classid C]`. iproute2 6.1 prints classes as text even with `-j`.
pub fn classes(
    engine: &Engine,
    dev: &str,
    parent: Option<Handle>,
    classid: Option<Handle>,
    flags: ShowFlags,
    now: Nanos,
    out: &mut String,
) {
    let Some(d) = engine.device(dev) else { return };
    for c in d.classes(now) {
        // The kernel's dump (`tc_dump_tclass_qdisc`) selects by the parent's major number only: every
        // class of that qdisc is listed, whichever class `parent` named (`root` matches none).
        if parent.is_some_and(|p| p.major() != c.classid.major())
            || classid.is_some_and(|h| h != c.classid)
        {
            continue;
        }
        let _ = write!(out, "class {} {} ", c.kind, c.classid);
        if c.parent == Handle::ROOT {
            out.push_str("root ");
        } else {
            let _ = write!(out, "parent {} ", c.parent);
        }
        if let Some(l) = c.leaf {
            let _ = write!(out, "leaf {:x}: ", l.major());
        }
        out.push_str(&class_options(&c, flags));
        out.push('\n');
        if flags.stats {
            // Classes whose discipline has `dump_stats` (TBF's has none: an empty line).
            if c.options.is_some() || c.kind == "prio" {
                stats_block(&c.stats, out);
            } else {
                out.push('\n');
            }
            if let Some(x) = &c.htb_xstats {
                let _ = writeln!(
                    out,
                    " lended: {} borrowed: {} giants: {}",
                    x.lends, x.borrows, x.giants
                );
                let _ = writeln!(out, " tokens: {} ctokens: {}", x.tokens, x.ctokens);
                out.push('\n');
            }
            if let Some(Xstats::Cbq(x)) = &c.xstats {
                out.push_str(&cbq_xstats(x));
                out.push('\n');
            }
            if let Some(Xstats::Drr(x)) = &c.xstats {
                // `drr_print_xstats`.
                let _ = writeln!(out, " deficit {} ", sprint_size(x.deficit));
            }
        }
    }
}
