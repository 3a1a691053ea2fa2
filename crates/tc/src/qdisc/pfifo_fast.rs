//! `pfifo_fast`, the default root of a NIC: no options to give, three bands and a fixed priomap to show.

use super::QdiscLang;
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::pfifo_fast::PRIOMAP;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "pfifo_fast",
    words: &[],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    if !args.is_empty() {
        return Err(Failure::syntax(format!(
            "qdisc '{kind}' does not support option parsing"
        )));
    }
    Ok(QdiscOptions::PfifoFast)
}

/// `prio_print_opt`, which tc uses for pfifo_fast.
fn print(_o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    s.push_str("bands 3 priomap");
    for p in PRIOMAP {
        let _ = write!(s, " {p}");
    }
    j.insert("bands".into(), json!(3));
    j.insert("priomap".into(), json!(PRIOMAP));
}
