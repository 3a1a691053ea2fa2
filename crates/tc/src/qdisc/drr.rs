//! `drr` (iproute2's `q_drr.c`): no qdisc options; a class has a quantum.

use super::{ClassLang, QdiscLang};
use crate::util::{get_size, sprint_size};
use crate::{Failure, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::qdisc::drr::DrrClassOptions;
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "drr",
    words: &["quantum"],
    parse,
    // DRR dumps no TCA_OPTIONS: tc prints nothing, and an empty JSON object.
    print: |_, _, _, _| {},
    xstats: None,
    xstats_json: None,
    class: Some(ClassLang {
        parse: parse_drr_class,
        print: print_class,
        print_xstats: print_class_xstats,
    }),
};

fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    parse_drr(args)
}

const DRR_USAGE: &str = "Usage: ... drr";

const DRR_CLASS_USAGE: &str = "Usage: ... drr quantum SIZE";

/// `drr_parse_opt` (tc 6.1): the qdisc takes no options.
fn parse_drr(args: &[String]) -> Result<QdiscOptions> {
    match args.first() {
        None => Ok(QdiscOptions::Drr),
        Some(a) if a == "help" => Err(Failure::options(DRR_USAGE)),
        Some(a) => Err(Failure::options(format!("What is \"{a}\"?\n{DRR_USAGE}"))),
    }
}

/// `drr_parse_class_opt` (tc 6.1): `quantum SIZE`, repeated as often as one likes (the last one wins in
/// the kernel's attribute parse).
fn parse_drr_class(args: &[String], _excl: bool) -> Result<ClassOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = DrrClassOptions::default();
    while let Some(a) = it.next() {
        if a == "quantum" {
            let v = it.value()?;
            o.quantum = Some(get_size(v).ok_or_else(|| Failure::options("Illegal \"quantum\""))?);
        } else if a == "help" {
            return Err(Failure::options(DRR_CLASS_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{a}\"?\n{DRR_CLASS_USAGE}"
            )));
        }
    }
    Ok(ClassOptions::Drr(o))
}

/// `drr_print_opt`.
fn print_class(c: &ClassInfo, _flags: ShowFlags, s: &mut String) {
    if let Some(ClassOptions::Drr(o)) = &c.options {
        if let Some(q) = o.quantum {
            let _ = write!(s, "quantum {} ", sprint_size(q));
        }
    }
}

/// `drr_print_xstats`.
fn print_class_xstats(c: &ClassInfo, out: &mut String) {
    if let Some(Xstats::Drr(x)) = &c.xstats {
        let _ = writeln!(out, " deficit {} ", sprint_size(x.deficit));
    }
}
