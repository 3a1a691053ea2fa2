//! `fq_codel` (iproute2's `q_fq_codel.c`): limit, flows, quantum, target, interval, ecn, ce_threshold
//! (and its selector), memory_limit, drop_batch; the qdisc's and each flow's counters.

use super::codel::signed_time;
use super::{ClassLang, QdiscLang};
use crate::util::{get_size, get_time, get_u32, get_unsigned, sprint_size, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::fq_codel::FqCodelOptions;
use tclab_core::qdisc::{ClassInfo, DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "fq_codel",
    words: &[
        "limit",
        "flows",
        "quantum",
        "drop_batch",
        "target",
        "ce_threshold",
        "ce_threshold_selector",
        "memory_limit",
        "interval",
        "ecn",
        "noecn",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: Some(ClassLang {
        parse: |_, _| {
            Err(Failure::kernel(tclab_core::KernelError::new(
                tclab_core::error::Errno::NotSupported,
            )))
        },
        print: |_, _, _| {},
        print_xstats: print_flow_xstats,
    }),
};

const USAGE: &str = "Usage: ... fq_codel\t[ limit PACKETS ] [ flows NUMBER ]\n[ memory_limit BYTES ]\n[ target TIME ] [ interval TIME ]\n[ quantum BYTES ] [ [no]ecn ]\n[ ce_threshold TIME ]\n[ ce_threshold_selector VALUE/MASK ]\n[ drop_batch SIZE ]";

/// `get_u8(…, 0)`.
fn get_u8(s: &str) -> Option<u8> {
    get_u32(s, 0).and_then(|v| u8::try_from(v).ok())
}

/// `fq_codel_parse_opt` (tc 6.1): zero values of limit, flows, quantum, interval, target and drop_batch
/// are not sent.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = FqCodelOptions::default();
    let illegal = |what: &str| Failure::options(format!("Illegal \"{what}\""));
    while let Some(a) = it.next() {
        match a {
            "limit" | "flows" | "quantum" | "drop_batch" => {
                let v = get_unsigned(it.value()?).ok_or_else(|| illegal(a))?;
                let slot = match a {
                    "limit" => &mut o.limit,
                    "flows" => &mut o.flows,
                    "quantum" => &mut o.quantum,
                    _ => &mut o.drop_batch,
                };
                *slot = Some(v);
            }
            "target" | "ce_threshold" | "interval" => {
                let v = get_time(it.value()?).ok_or_else(|| illegal(a))?;
                let slot = match a {
                    "target" => &mut o.target,
                    "ce_threshold" => &mut o.ce_threshold,
                    _ => &mut o.interval,
                };
                *slot = Some(v);
            }
            "ce_threshold_selector" => {
                let v = it.value()?;
                let Some((sel, mask)) = v.split_once('/') else {
                    return Err(Failure::options(
                        "Missing mask for \"ce_threshold_selector\"",
                    ));
                };
                let mask = get_u8(mask).ok_or_else(|| {
                    Failure::options("Illegal mask for \"ce_threshold_selector\"")
                })?;
                let sel = get_u8(sel).ok_or_else(|| illegal("ce_threshold_selector"))?;
                o.ce_threshold_selector = Some((sel, mask));
            }
            "memory_limit" => {
                o.memory_limit = Some(get_size(it.value()?).ok_or_else(|| illegal(a))?)
            }
            "ecn" => o.ecn = Some(true),
            "noecn" => o.ecn = Some(false),
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    for v in [
        &mut o.limit,
        &mut o.flows,
        &mut o.quantum,
        &mut o.interval,
        &mut o.target,
        &mut o.drop_batch,
    ] {
        *v = v.filter(|x| *x != 0);
    }
    o.ce_threshold = o.ce_threshold.filter(|v| *v != u32::MAX);
    o.memory_limit = o.memory_limit.filter(|v| *v != u32::MAX);
    // A selector of 0xff means "not given".
    o.ce_threshold_selector = o.ce_threshold_selector.filter(|(s, _)| *s != 0xff);
    Ok(QdiscOptions::FqCodel(o))
}

/// `fq_codel_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::FqCodel(o) = o else { return };
    if let Some(v) = o.limit {
        let _ = write!(s, "limit {v}p ");
        j.insert("limit".into(), json!(v));
    }
    if let Some(v) = o.flows {
        let _ = write!(s, "flows {v} ");
        j.insert("flows".into(), json!(v));
    }
    if let Some(v) = o.quantum {
        let _ = write!(s, "quantum {v} ");
        j.insert("quantum".into(), json!(v));
    }
    if let Some(v) = o.target {
        let _ = write!(s, "target {} ", sprint_time(v));
        j.insert("target".into(), json!(v));
    }
    if let Some(v) = o.ce_threshold {
        let _ = write!(s, "ce_threshold {} ", sprint_time(v));
        j.insert("ce_threshold".into(), json!(v));
    }
    if let Some((sel, mask)) = o.ce_threshold_selector.filter(|(s, m)| *s != 0 || *m != 0) {
        // `%#x`: 0 prints as "0".
        let hex = |v: u8| {
            if v == 0 {
                "0".to_string()
            } else {
                format!("{v:#x}")
            }
        };
        let _ = write!(s, "ce_threshold_selector {}/{} ", hex(sel), hex(mask));
        j.insert("ce_threshold_selector".into(), json!(sel));
        j.insert("ce_threshold_mask".into(), json!(mask));
    }
    if let Some(v) = o.interval {
        let _ = write!(s, "interval {} ", sprint_time(v));
        j.insert("interval".into(), json!(v));
    }
    if let Some(v) = o.memory_limit {
        let _ = write!(s, "memory_limit {} ", sprint_size(v));
        j.insert("memory_limit".into(), json!(v));
    }
    if o.ecn == Some(true) {
        s.push_str("ecn ");
        j.insert("ecn".into(), json!(true));
    }
    if let Some(v) = o.drop_batch {
        let _ = write!(s, "drop_batch {v} ");
        j.insert("drop_batch".into(), json!(v));
    }
}

/// `fq_codel_print_xstats` for the qdisc.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::FqCodel(x) = x else { return };
    let _ = write!(
        out,
        "  maxpacket {} drop_overlimit {} new_flow_count {} ecn_mark {}",
        x.maxpacket, x.drop_overlimit, x.new_flow_count, x.ecn_mark
    );
    if x.ce_mark != 0 {
        let _ = write!(out, " ce_mark {}", x.ce_mark);
    }
    if x.memory_usage != 0 {
        let _ = write!(out, " memory_used {}", x.memory_usage);
    }
    if x.drop_overmemory != 0 {
        let _ = write!(out, " drop_overmemory {}", x.drop_overmemory);
    }
    let _ = writeln!(
        out,
        "\n  new_flows_len {} old_flows_len {}",
        x.new_flows_len, x.old_flows_len
    );
}

/// `fq_codel_print_xstats` for the qdisc, under JSON.
fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::FqCodel(x) = x else { return };
    m.insert("maxpacket".into(), json!(x.maxpacket));
    m.insert("drop_overlimit".into(), json!(x.drop_overlimit));
    m.insert("new_flow_count".into(), json!(x.new_flow_count));
    m.insert("ecn_mark".into(), json!(x.ecn_mark));
    for (key, v) in [
        ("ce_mark", x.ce_mark),
        ("memory_used", x.memory_usage),
        ("drop_overmemory", x.drop_overmemory),
    ] {
        if v != 0 {
            m.insert(key.into(), json!(v));
        }
    }
    m.insert("new_flows_len".into(), json!(x.new_flows_len));
    m.insert("old_flows_len".into(), json!(x.old_flows_len));
}

/// `fq_codel_print_xstats` for a flow (a class).
fn print_flow_xstats(c: &ClassInfo, out: &mut String) {
    let Some(Xstats::FqCodelFlow(x)) = &c.xstats else {
        return;
    };
    let _ = write!(
        out,
        "  deficit {} count {} lastcount {} ldelay {}",
        x.deficit,
        x.count,
        x.lastcount,
        sprint_time(x.ldelay)
    );
    if x.dropping {
        let _ = write!(out, " dropping drop_next {}", signed_time(x.drop_next));
    }
    out.push('\n');
}
