//! `codel` (iproute2's `q_codel.c`): limit, target, interval, ecn, ce_threshold; CoDel's counters.

use super::QdiscLang;
use crate::util::{get_time, get_unsigned, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::codel::CodelOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "codel",
    words: &[
        "limit",
        "target",
        "interval",
        "ecn",
        "noecn",
        "ce_threshold",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... codel [ limit PACKETS ] [ target TIME ]\n\t\t [ interval TIME ] [ ecn | noecn ]\n\t\t [ ce_threshold TIME ]";

/// `codel_parse_opt` (tc 6.1): a zero limit, target or interval is not sent (the kernel keeps its own).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = CodelOptions::default();
    let illegal = |what: &str| Failure::options(format!("Illegal \"{what}\""));
    while let Some(a) = it.next() {
        match a {
            "limit" => o.limit = Some(get_unsigned(it.value()?).ok_or_else(|| illegal("limit"))?),
            "target" => o.target = Some(get_time(it.value()?).ok_or_else(|| illegal("target"))?),
            "ce_threshold" => {
                o.ce_threshold = Some(get_time(it.value()?).ok_or_else(|| illegal("ce_threshold"))?)
            }
            "interval" => {
                o.interval = Some(get_time(it.value()?).ok_or_else(|| illegal("interval"))?)
            }
            "ecn" => o.ecn = Some(true),
            "noecn" => o.ecn = Some(false),
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    o.limit = o.limit.filter(|v| *v != 0);
    o.target = o.target.filter(|v| *v != 0);
    o.interval = o.interval.filter(|v| *v != 0);
    // `~0U` means "not given".
    o.ce_threshold = o.ce_threshold.filter(|v| *v != u32::MAX);
    Ok(QdiscOptions::Codel(o))
}

/// `codel_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Codel(o) = o else { return };
    if let Some(l) = o.limit {
        let _ = write!(s, "limit {l}p ");
        j.insert("limit".into(), json!(l));
    }
    if let Some(t) = o.target {
        let _ = write!(s, "target {} ", sprint_time(t));
        j.insert("target".into(), json!(t));
    }
    if let Some(c) = o.ce_threshold {
        let _ = write!(s, "ce_threshold {} ", sprint_time(c));
        j.insert("ce_threshold".into(), json!(c));
    }
    if let Some(i) = o.interval {
        let _ = write!(s, "interval {} ", sprint_time(i));
        j.insert("interval".into(), json!(i));
    }
    if o.ecn == Some(true) {
        s.push_str("ecn ");
        j.insert("ecn".into(), json!(true));
    }
}

/// A signed time as `codel_print_xstats` prints `drop_next`.
pub(crate) fn signed_time(t: i32) -> String {
    if t < 0 {
        format!("-{}", sprint_time(t.unsigned_abs()))
    } else {
        sprint_time(t as u32)
    }
}

/// `codel_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Codel(x) = x else { return };
    let _ = write!(
        out,
        "  count {} lastcount {} ldelay {}",
        x.count,
        x.lastcount,
        sprint_time(x.ldelay)
    );
    if x.dropping {
        out.push_str(" dropping");
    }
    let _ = write!(out, " drop_next {}", signed_time(x.drop_next));
    let _ = write!(
        out,
        "\n  maxpacket {} ecn_mark {} drop_overlimit {}",
        x.maxpacket, x.ecn_mark, x.drop_overlimit
    );
    if x.ce_mark != 0 {
        let _ = write!(out, " ce_mark {}", x.ce_mark);
    }
    out.push('\n');
}

/// `codel_print_xstats` under JSON.
fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Codel(x) = x else { return };
    m.insert("count".into(), json!(x.count));
    m.insert("lastcount".into(), json!(x.lastcount));
    m.insert("ldelay".into(), json!(x.ldelay));
    if x.dropping {
        m.insert("dropping".into(), json!(true));
    }
    m.insert("drop_next".into(), json!(x.drop_next));
    m.insert("maxpacket".into(), json!(x.maxpacket));
    m.insert("ecn_mark".into(), json!(x.ecn_mark));
    m.insert("drop_overlimit".into(), json!(x.drop_overlimit));
    if x.ce_mark != 0 {
        m.insert("ce_mark".into(), json!(x.ce_mark));
    }
}
