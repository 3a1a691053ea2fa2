//! `hhf` (iproute2's `q_hhf.c`): limit, quantum, hh_limit, reset_timeout, admit_bytes, evict_timeout,
//! non_hh_weight; the heavy-hitter counters under `-s`.

use super::QdiscLang;
use crate::util::{get_time, get_unsigned, sprint_size, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::hhf::HhfOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "hhf",
    words: &[
        "limit",
        "quantum",
        "hh_limit",
        "reset_timeout",
        "admit_bytes",
        "evict_timeout",
        "non_hh_weight",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... hhf\t[ limit PACKETS ] [ quantum BYTES]\n\t\t[ hh_limit NUMBER ]\n\t\t[ reset_timeout TIME ]\n\t\t[ admit_bytes BYTES ]\n\t\t[ evict_timeout TIME ]\n\t\t[ non_hh_weight NUMBER ]";

/// `hhf_parse_opt` (tc 6.1): a zero is not sent.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = HhfOptions::default();
    while let Some(a) = it.next() {
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        let slot = match a {
            "limit" => &mut o.limit,
            "quantum" => &mut o.quantum,
            "hh_limit" => &mut o.hh_limit,
            "admit_bytes" => &mut o.admit_bytes,
            "non_hh_weight" => &mut o.non_hh_weight,
            "reset_timeout" | "evict_timeout" => {
                let v = get_time(it.value()?).ok_or_else(illegal)?;
                let slot = if a == "reset_timeout" {
                    &mut o.reset_timeout
                } else {
                    &mut o.evict_timeout
                };
                *slot = Some(v);
                continue;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        };
        *slot = Some(get_unsigned(it.value()?).ok_or_else(illegal)?);
    }
    for v in [
        &mut o.limit,
        &mut o.quantum,
        &mut o.hh_limit,
        &mut o.reset_timeout,
        &mut o.admit_bytes,
        &mut o.evict_timeout,
        &mut o.non_hh_weight,
    ] {
        *v = v.filter(|x| *x != 0);
    }
    Ok(QdiscOptions::Hhf(o))
}

/// `hhf_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Hhf(o) = o else { return };
    if let Some(v) = o.limit {
        let _ = write!(s, "limit {v}p ");
        j.insert("limit".into(), json!(v));
    }
    if let Some(v) = o.quantum {
        let _ = write!(s, "quantum {} ", sprint_size(v));
        j.insert("quantum".into(), json!(v));
    }
    if let Some(v) = o.hh_limit {
        let _ = write!(s, "hh_limit {v} ");
        j.insert("hh_limit".into(), json!(v));
    }
    if let Some(v) = o.reset_timeout {
        let _ = write!(s, "reset_timeout {} ", sprint_time(v));
        j.insert("reset_timeout".into(), json!(v));
    }
    if let Some(v) = o.admit_bytes {
        let _ = write!(s, "admit_bytes {} ", sprint_size(v));
        j.insert("admit_bytes".into(), json!(v));
    }
    if let Some(v) = o.evict_timeout {
        let _ = write!(s, "evict_timeout {} ", sprint_time(v));
        j.insert("evict_timeout".into(), json!(v));
    }
    if let Some(v) = o.non_hh_weight {
        let _ = write!(s, "non_hh_weight {v} ");
        j.insert("non_hh_weight".into(), json!(v));
    }
}

/// `hhf_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Hhf(x) = x else { return };
    let _ = writeln!(
        out,
        "  drop_overlimit {} hh_overlimit {} tot_hh {} cur_hh {}",
        x.drop_overlimit, x.hh_overlimit, x.hh_tot_count, x.hh_cur_count
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Hhf(x) = x else { return };
    m.insert("drop_overlimit".into(), json!(x.drop_overlimit));
    m.insert("hh_overlimit".into(), json!(x.hh_overlimit));
    m.insert("tot_hh".into(), json!(x.hh_tot_count));
    m.insert("cur_hh".into(), json!(x.hh_cur_count));
}
