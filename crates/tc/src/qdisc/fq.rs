//! `fq` (iproute2 6.1's `q_fq.c`): limit, flow_limit, quantum, initial_quantum, maxrate, buckets,
//! [no]pacing, refill_delay, low_rate_threshold, orphan_mask, timer_slack, ce_threshold, horizon,
//! horizon_cap|horizon_drop, and the obsolete defrate; the qdisc's `-s` counters. tc 6.1 neither sends
//! nor prints Linux 6.7's priomap and band weights (the kernel keeps its defaults). A rate given as a
//! percentage of the device's speed is refused as "Illegal", as for tclab's other kinds (no device
//! speed).

use super::QdiscLang;
use crate::util::{
    get_rate32, get_time, get_time64, get_unsigned, sprint_rate, sprint_size, sprint_time,
    sprint_time64,
};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::fq::FqOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "fq",
    words: &[
        "limit",
        "flow_limit",
        "quantum",
        "initial_quantum",
        "maxrate",
        "buckets",
        "pacing",
        "nopacing",
        "refill_delay",
        "low_rate_threshold",
        "orphan_mask",
        "timer_slack",
        "ce_threshold",
        "horizon",
        "horizon_cap",
        "horizon_drop",
        "defrate",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... fq\t[ limit PACKETS ] [ flow_limit PACKETS ]\n\t\t[ quantum BYTES ] [ initial_quantum BYTES ]\n\t\t[ maxrate RATE  ] [ buckets NUMBER ]\n\t\t[ [no]pacing ] [ refill_delay TIME ]\n\t\t[ low_rate_threshold RATE ]\n\t\t[ orphan_mask MASK]\n\t\t[ timer_slack TIME]\n\t\t[ ce_threshold TIME ]\n\t\t[ horizon TIME ]\n\t\t[ horizon_{cap|drop} ]";

/// q_fq.c's `ilog2`: the bits that `val` buckets need (rounded up).
fn ilog2(val: u32) -> u32 {
    let mut v = val.wrapping_sub(1);
    let mut res = 0;
    while v != 0 {
        res += 1;
        v >>= 1;
    }
    res
}

/// `fq_parse_opt`.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = FqOptions::default();
    let illegal = |what: &str| Failure::options(format!("Illegal \"{what}\""));
    while let Some(a) = it.next() {
        match a {
            "limit" | "flow_limit" | "buckets" | "quantum" | "initial_quantum" | "orphan_mask" => {
                // (tc's message for a bad orphan_mask names initial_quantum.)
                let what = if a == "orphan_mask" {
                    "initial_quantum"
                } else {
                    a
                };
                let v = get_unsigned(it.value()?).ok_or_else(|| illegal(what))?;
                match a {
                    "limit" => o.limit = Some(v),
                    "flow_limit" => o.flow_limit = Some(v),
                    // `buckets 0` sends nothing.
                    "buckets" => o.buckets_log = (v != 0).then(|| ilog2(v)),
                    "quantum" => o.quantum = Some(v),
                    "initial_quantum" => o.initial_quantum = Some(v),
                    _ => o.orphan_mask = Some(v),
                }
            }
            "maxrate" | "low_rate_threshold" | "defrate" => {
                let v = get_rate32(it.value()?).ok_or_else(|| illegal(a))?;
                match a {
                    "maxrate" => o.maxrate = Some(v),
                    "defrate" => o.default_rate = Some(v),
                    _ => o.low_rate_threshold = Some(v),
                }
            }
            "ce_threshold" | "horizon" | "refill_delay" => {
                let v = get_time(it.value()?).ok_or_else(|| illegal(a))?;
                match a {
                    "ce_threshold" => o.ce_threshold = Some(v),
                    "horizon" => o.horizon = Some(v),
                    _ => o.refill_delay = Some(v),
                }
            }
            "timer_slack" => {
                let t = get_time64(it.value()?).ok_or_else(|| illegal(a))?;
                let v = u32::try_from(t)
                    .map_err(|_| Failure::options("Illegal (out of range) \"timer_slack\""))?;
                o.timer_slack = Some(v);
            }
            "horizon_drop" => o.horizon_drop = Some(1),
            "horizon_cap" => o.horizon_drop = Some(0),
            "pacing" => o.rate_enable = Some(1),
            "nopacing" => o.rate_enable = Some(0),
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    Ok(QdiscOptions::Fq(o))
}

/// `fq_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Fq(o) = o else { return };
    let mut put = |text: String, key: &str, v: Value| {
        s.push_str(&text);
        j.insert(key.into(), v);
    };
    if let Some(v) = o.limit {
        put(format!("limit {v}p "), "limit", json!(v));
    }
    if let Some(v) = o.flow_limit {
        put(format!("flow_limit {v}p "), "flow_limit", json!(v));
    }
    if let Some(v) = o.buckets_log {
        let n = 1u32.wrapping_shl(v);
        put(format!("buckets {n} "), "buckets", json!(n));
    }
    if let Some(v) = o.orphan_mask {
        put(format!("orphan_mask {v} "), "orphan_mask", json!(v));
    }
    if o.rate_enable == Some(0) {
        put("nopacing ".into(), "pacing", json!(false));
    }
    if let Some(v) = o.quantum {
        put(format!("quantum {} ", sprint_size(v)), "quantum", json!(v));
    }
    if let Some(v) = o.initial_quantum {
        let text = format!("initial_quantum {} ", sprint_size(v));
        put(text, "initial_quantum", json!(v));
    }
    if let Some(v) = o.maxrate.filter(|v| *v != u32::MAX) {
        put(
            format!("maxrate {} ", sprint_rate(v as u64)),
            "maxrate",
            json!(v),
        );
    }
    if let Some(v) = o.default_rate.filter(|v| *v != 0) {
        put(
            format!("defrate {} ", sprint_rate(v as u64)),
            "defrate",
            json!(v),
        );
    }
    if let Some(v) = o.low_rate_threshold.filter(|v| *v != 0) {
        let text = format!("low_rate_threshold {} ", sprint_rate(v as u64));
        put(text, "low_rate_threshold", json!(v));
    }
    if let Some(v) = o.refill_delay {
        put(
            format!("refill_delay {} ", sprint_time(v)),
            "refill_delay",
            json!(v),
        );
    }
    if let Some(v) = o.ce_threshold.filter(|v| *v != u32::MAX) {
        put(
            format!("ce_threshold {} ", sprint_time(v)),
            "ce_threshold",
            json!(v),
        );
    }
    if let Some(v) = o.timer_slack {
        let text = format!("timer_slack {} ", sprint_time64(v as i64));
        put(text, "timer_slack", json!(v));
    }
    if let Some(v) = o.horizon {
        put(format!("horizon {} ", sprint_time(v)), "horizon", json!(v));
    }
    match o.horizon_drop {
        Some(0) => put("horizon_cap ".into(), "horizon_cap", Value::Null),
        Some(_) => put("horizon_drop ".into(), "horizon_drop", Value::Null),
        None => {}
    }
}

/// `fq_print_xstats` (tc 6.1: the band counters of Linux 6.7 are not printed).
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Fq(x) = x else { return };
    let _ = write!(
        out,
        "  flows {} (inactive {} throttled {})",
        x.flows, x.inactive_flows, x.throttled_flows
    );
    if x.time_next_delayed_flow > 0 {
        let d = sprint_time64(x.time_next_delayed_flow);
        let _ = write!(out, " next_packet_delay {d}");
    }
    let _ = write!(out, "\n  gc {} highprio {}", x.gc_flows, x.highprio_packets);
    if x.tcp_retrans != 0 {
        let _ = write!(out, " retrans {}", x.tcp_retrans);
    }
    let _ = write!(out, " throttled {}", x.throttled);
    if x.unthrottle_latency_ns != 0 {
        let l = sprint_time64(x.unthrottle_latency_ns as i64);
        let _ = write!(out, " latency {l}");
    }
    if x.ce_mark != 0 {
        let _ = write!(out, " ce_mark {}", x.ce_mark);
    }
    if x.flows_plimit != 0 {
        let _ = write!(out, " flows_plimit {}", x.flows_plimit);
    }
    if x.pkts_too_long != 0
        || x.allocation_errors != 0
        || x.horizon_drops != 0
        || x.horizon_caps != 0
    {
        out.push('\n');
        if x.pkts_too_long != 0 {
            let _ = write!(out, " pkts_too_long {}", x.pkts_too_long);
        }
        if x.allocation_errors != 0 {
            let _ = write!(out, " alloc_errors {}", x.allocation_errors);
        }
        if x.horizon_drops != 0 {
            let _ = write!(out, " horizon_drops {}", x.horizon_drops);
        }
        if x.horizon_caps != 0 {
            // (Two spaces: tc 6.1's format string.)
            let _ = write!(out, "  horizon_caps {}", x.horizon_caps);
        }
    }
    out.push('\n');
}

/// `fq_print_xstats` under JSON.
fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Fq(x) = x else { return };
    m.insert("flows".into(), json!(x.flows));
    m.insert("inactive".into(), json!(x.inactive_flows));
    m.insert("throttled".into(), json!(x.throttled_flows));
    if x.time_next_delayed_flow > 0 {
        m.insert("next_packet_delay".into(), json!(x.time_next_delayed_flow));
    }
    m.insert("gc".into(), json!(x.gc_flows));
    m.insert("highprio".into(), json!(x.highprio_packets));
    if x.tcp_retrans != 0 {
        m.insert("retrans".into(), json!(x.tcp_retrans));
    }
    // (tc prints the total under the same key as the flows throttled now: the later one wins.)
    m.insert("throttled".into(), json!(x.throttled));
    if x.unthrottle_latency_ns != 0 {
        m.insert("latency".into(), json!(x.unthrottle_latency_ns));
    }
    for (key, v) in [
        ("ce_mark", x.ce_mark),
        ("flows_plimit", x.flows_plimit),
        ("pkts_too_long", x.pkts_too_long),
        ("alloc_errors", x.allocation_errors),
        ("horizon_drops", x.horizon_drops),
        ("horizon_caps", x.horizon_caps),
    ] {
        if v != 0 {
            m.insert(key.into(), json!(v));
        }
    }
}
