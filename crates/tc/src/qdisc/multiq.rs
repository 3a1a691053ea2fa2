//! `multiq` (iproute2's `q_multiq.c`): no options (the bands follow the device's transmit queues);
//! shown as `bands N/M`.

use super::QdiscLang;
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::multiq::MultiqOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "multiq",
    words: &[],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... multiq [help]";

/// `multiq_parse_opt`: any word but `help` is unknown.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    match args.first().map(String::as_str) {
        None => Ok(QdiscOptions::Multiq(MultiqOptions::default())),
        Some("help") => Err(Failure::options(USAGE)),
        Some(a) => Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
    }
}

/// `multiq_print_opt` (tc prints the same text under `-j`).
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Multiq(o) = o else { return };
    let _ = write!(s, "bands {}/{} ", o.bands, o.max_bands);
    j.insert("bands".into(), json!(o.bands));
    j.insert("max_bands".into(), json!(o.max_bands));
}
