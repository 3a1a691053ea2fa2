//! `ingress` and `clsact` (iproute2's `q_ingress.c`, `q_clsact.c`): no options but a handle.

use super::QdiscLang;
use crate::{Failure, Result, ShowFlags};
use serde_json::{Map, Value};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const INGRESS: QdiscLang = QdiscLang {
    name: "ingress",
    words: &["handle"],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

pub const CLSACT: QdiscLang = QdiscLang {
    name: "clsact",
    words: &["handle"],
    parse,
    // `clsact_print_opt` prints nothing (only ingress prints its dashes).
    print: |_, _, _, _| {},
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "handle" {
            it.next();
        } else {
            return Err(Failure::options(format!(
                "What is \"{a}\"?\nUsage: ... {kind}"
            )));
        }
    }
    Ok(if kind == "ingress" {
        QdiscOptions::Ingress
    } else {
        QdiscOptions::Clsact
    })
}

fn print(_o: &QdiscOptions, _flags: ShowFlags, s: &mut String, _j: &mut Map<String, Value>) {
    s.push_str("---------------- ");
}
