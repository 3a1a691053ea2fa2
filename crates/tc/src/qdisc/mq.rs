//! `mq`: iproute2 has no `q_mq.c`; tc parses it as a kind without options (`parse_noqopt`) and prints
//! nothing for it.

use super::QdiscLang;
use crate::{Failure, Result, ShowFlags};
use serde_json::{Map, Value};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "mq",
    words: &[],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    if let Some(a) = args.first() {
        return Err(Failure::options(format!(
            "Unknown qdisc \"{kind}\", hence option \"{a}\" is unparsable"
        )));
    }
    Ok(QdiscOptions::Mq)
}

fn print(_o: &QdiscOptions, _flags: ShowFlags, _s: &mut String, _j: &mut Map<String, Value>) {}
