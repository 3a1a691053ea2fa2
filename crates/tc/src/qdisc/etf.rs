//! `etf` (iproute2's `q_etf.c`): `etf delta NANOS clockid CLOCKID [offload] [deadline_mode]
//! [skip_sock_check]`, each at most once, and the printer.

use super::QdiscLang;
use crate::util::{get_s32, matches};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::etf::{EtfOptions, DEADLINE_MODE_ON, OFFLOAD_ON, SKIP_SOCK_CHECK};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "etf",
    words: &[
        "delta",
        "clockid",
        "CLOCK_TAI",
        "offload",
        "deadline_mode",
        "skip_sock_check",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... etf delta NANOS clockid CLOCKID [offload] [deadline_mode]\nCLOCKID must be a valid SYS-V id (i.e. CLOCK_TAI)";

/// `clockids_sysv`.
const CLOCKS: [(&str, i32); 4] = [
    ("REALTIME", 0),
    ("TAI", 11),
    ("BOOTTIME", 7),
    ("MONOTONIC", 1),
];

/// `get_clockid`: a name, with or without `CLOCK_`, any case.
fn get_clockid(s: &str) -> Option<i32> {
    let up = s.to_ascii_uppercase();
    let name = up
        .find("CLOCK_")
        .map_or(up.as_str(), |_| &up["CLOCK_".len()..]);
    CLOCKS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// `etf_parse_opt`.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut o = EtfOptions {
        delta: 0,
        clockid: -1,
        flags: 0,
    };
    let dup = |w: &str| Failure::options(format!("etf: duplicate \"{w}\" specification"));
    let mut it = crate::Cur::new(args);
    while let Some(a) = it.next() {
        let flag = if matches(a, "offload") {
            Some(("offload", OFFLOAD_ON))
        } else if matches(a, "deadline_mode") {
            Some(("deadline_mode", DEADLINE_MODE_ON))
        } else if a == "skip_sock_check" {
            Some(("skip_sock_check", SKIP_SOCK_CHECK))
        } else {
            None
        };
        if let Some((w, f)) = flag {
            if o.flags & f != 0 {
                return Err(dup(w));
            }
            o.flags |= f;
        } else if matches(a, "delta") {
            let v = it.value()?;
            if o.delta != 0 {
                return Err(dup("delta"));
            }
            o.delta = get_s32(v).ok_or_else(|| {
                Failure::options(format!("etf: illegal value for \"delta\": \"{v}\""))
            })?;
        } else if matches(a, "clockid") {
            let v = it.value()?;
            if o.clockid != -1 {
                return Err(dup("clockid"));
            }
            o.clockid = get_clockid(v).ok_or_else(|| {
                Failure::options(format!(
                    "etf: illegal value for \"clockid\": \"{v}\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)"
                ))
            })?;
        } else if a == "help" {
            return Err(Failure::options(USAGE));
        } else {
            return Err(Failure::options(format!(
                "etf: unknown parameter \"{a}\"\n{USAGE}"
            )));
        }
    }
    Ok(QdiscOptions::Etf(o))
}

/// `etf_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Etf(e) = o else { return };
    let clock = CLOCKS
        .iter()
        .find(|(_, c)| *c == e.clockid)
        .map_or("invalid", |(n, _)| n);
    let _ = write!(s, "clockid {clock} delta {} ", e.delta);
    j.insert("clockid".into(), json!(clock));
    j.insert("delta".into(), json!(e.delta));
    for (k, f, sep) in [
        ("offload", OFFLOAD_ON, " "),
        ("deadline_mode", DEADLINE_MODE_ON, " "),
        ("skip_sock_check", SKIP_SOCK_CHECK, ""),
    ] {
        let on = if e.flags & f != 0 { "on" } else { "off" };
        let _ = write!(s, "{k} {on}{sep}");
        j.insert(k.into(), json!(on));
    }
}
