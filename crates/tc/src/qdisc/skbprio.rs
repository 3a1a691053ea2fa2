//! `skbprio` (iproute2's `q_skbprio.c`): the packet limit.

use super::QdiscLang;
use crate::util::get_size;
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::skbprio::SkbprioOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "skbprio",
    words: &["limit"],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... <skbprio> [ limit NUMBER ]";

/// `skbprio_parse_opt` (tc 6.1): `limit` read by `get_size` (so `limit 1k` is 1024 packets).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = SkbprioOptions::default();
    while let Some(a) = it.next() {
        match a {
            "limit" => {
                let v = it.value()?;
                o.limit = Some(get_size(v).ok_or_else(|| {
                    Failure::options(format!("skbprio: Illegal \"limit\" value:\"{v}\""))
                })?);
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => {
                return Err(Failure::options(format!(
                    "skbprio: unknown parameter \"{a}\"\n{USAGE}"
                )))
            }
        }
    }
    Ok(QdiscOptions::Skbprio(o))
}

/// `skbprio_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    if let QdiscOptions::Skbprio(SkbprioOptions { limit: Some(l) }) = o {
        let _ = write!(s, "limit {l} ");
        j.insert("limit".into(), json!(l));
    }
}
