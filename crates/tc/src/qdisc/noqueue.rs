//! `noqueue`, the root of a virtual device: nothing to parse or show.

use super::QdiscLang;
use crate::{Failure, Result, ShowFlags};
use serde_json::{Map, Value};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "noqueue",
    words: &[],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    if let Some(a) = args.first() {
        // tc has no q_noqueue.c: it treats the kind as unknown.
        return Err(Failure::options(format!(
            "Unknown qdisc \"{kind}\", hence option \"{a}\" is unparsable"
        )));
    }
    Ok(QdiscOptions::Noqueue)
}

fn print(_o: &QdiscOptions, _flags: ShowFlags, _s: &mut String, _j: &mut Map<String, Value>) {}
