//! `cbs` (iproute2's `q_cbs.c`): `cbs hicredit BYTES locredit BYTES sendslope KBPS idleslope KBPS
//! [offload 0|1]`, each at most once (a value of 0 counts as not given, as tc checks it), and the
//! printer.

use super::QdiscLang;
use crate::util::{get_s32, get_u32};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::cbs::CbsOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "cbs",
    words: &["hicredit", "locredit", "sendslope", "idleslope", "offload"],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str =
    "Usage: ... cbs hicredit BYTES locredit BYTES sendslope BPS idleslope BPS\n\t   [offload 0|1]";

/// `cbs_parse_opt`.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut o = CbsOptions::default();
    let mut it = crate::Cur::new(args);
    while let Some(a) = it.next() {
        let key = ["offload", "hicredit", "locredit", "sendslope", "idleslope"]
            .into_iter()
            .find(|k| crate::util::matches(a, k));
        let Some(key) = key else {
            return Err(Failure::options(if a == "help" {
                USAGE.to_string()
            } else {
                format!("cbs: unknown parameter \"{a}\"\n{USAGE}")
            }));
        };
        let v = it.value()?;
        let illegal = || Failure::options(format!("cbs: illegal value for \"{key}\": \"{v}\""));
        let slot: &mut i32 = match key {
            "offload" => {
                if o.offload != 0 {
                    return Err(Failure::options("cbs: duplicate \"offload\" specification"));
                }
                o.offload = get_u32(v, 0)
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(illegal)?;
                continue;
            }
            "hicredit" => &mut o.hicredit,
            "locredit" => &mut o.locredit,
            "sendslope" => &mut o.sendslope,
            _ => &mut o.idleslope,
        };
        if *slot != 0 {
            return Err(Failure::options(format!(
                "cbs: duplicate \"{key}\" specification"
            )));
        }
        *slot = get_s32(v).ok_or_else(illegal)?;
    }
    Ok(QdiscOptions::Cbs(o))
}

/// `cbs_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Cbs(c) = o else { return };
    for (k, v) in [
        ("hicredit", c.hicredit),
        ("locredit", c.locredit),
        ("sendslope", c.sendslope),
        ("idleslope", c.idleslope),
        ("offload", i32::from(c.offload)),
    ] {
        let _ = write!(s, "{k} {v} ");
        j.insert(k.into(), json!(v));
    }
}
