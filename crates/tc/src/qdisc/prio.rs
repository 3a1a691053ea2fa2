//! `prio` (iproute2's `q_prio.c`): bands and the priomap.

use super::QdiscLang;
use crate::util::{get_int, get_u32};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::prio::PrioOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "prio",
    words: &["bands", "priomap", "multiqueue"],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    parse_prio(args)
}

const PRIO_USAGE: &str = "Usage: ... prio bands NUMBER priomap P1 P2...[multiqueue]";

/// `prio_parse_opt` (tc 6.1): tc checks the map against the band count given so far; the kernel
/// checks the band count. (`bands` after `priomap` makes tc print its usage and carry on; tclab only
/// carries on.)
fn parse_prio(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = PrioOptions::default();
    let mut pmap_mode = false;
    let mut idx = 0usize;
    while let Some(a) = it.next() {
        if a == "bands" {
            let v = it.value()?;
            o.bands = get_int(v)
                .filter(|_| !v.starts_with("0x") && !v.starts_with("0X"))
                .ok_or_else(|| Failure::options("Illegal \"bands\""))?;
        } else if a == "priomap" {
            if pmap_mode {
                return Err(Failure::options("Error: duplicate priomap"));
            }
            pmap_mode = true;
        } else if a == "multiqueue" {
        } else if a == "help" {
            return Err(Failure::options(PRIO_USAGE));
        } else {
            if !pmap_mode {
                return Err(Failure::options(format!("What is \"{a}\"?\n{PRIO_USAGE}")));
            }
            let band =
                get_u32(a, 10).ok_or_else(|| Failure::options("Illegal \"priomap\" element"))?;
            // C compares the unsigned element with the int band count converted to unsigned.
            if band >= o.bands as u32 {
                return Err(Failure::options("\"priomap\" element is out of bands"));
            }
            if idx > 15 {
                return Err(Failure::options("\"priomap\" index > TC_PRIO_MAX=15"));
            }
            o.priomap[idx] = band as u8;
            idx += 1;
        }
    }
    Ok(QdiscOptions::Prio(o))
}

/// `prio_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Prio(o) = o else { return };
    let _ = write!(s, "bands {} priomap", o.bands);
    for p in o.priomap {
        let _ = write!(s, " {p}");
    }
    j.insert("bands".into(), json!(o.bands));
    j.insert("priomap".into(), json!(o.priomap));
    j.insert("multiqueue".into(), json!(false));
}
