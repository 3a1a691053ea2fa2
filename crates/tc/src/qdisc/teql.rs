//! `teql0`: tc has no module for it (iproute2 has no `q_teql.c`), so it parses it as any kind it does
//! not know (`parse_noqopt`: no options) and prints no options.

use super::QdiscLang;
use crate::{Failure, Result};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "teql0",
    words: &[],
    parse,
    print: |_, _, _, _| {},
    xstats: None,
    xstats_json: None,
    class: None,
};

/// `parse_noqopt`.
fn parse(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    match args.first() {
        Some(a) => Err(Failure::options(format!(
            "Unknown qdisc \"{kind}\", hence option \"{a}\" is unparsable"
        ))),
        None => Ok(QdiscOptions::Teql),
    }
}
