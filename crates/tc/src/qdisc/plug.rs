//! `plug` (iproute2's `q_plug.c`): one command (`block`, `release`, `release_indefinite`, `limit`).

use super::QdiscLang;
use crate::util::get_size;
use crate::{Failure, Result};
use tclab_core::qdisc::plug::{self, PlugMsg, PlugOptions};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "plug",
    words: &["block", "release", "release_indefinite", "limit"],
    parse,
    // sch_plug has no dump: tc prints nothing.
    print: |_, _, _, _| {},
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... plug [block | release | release_indefinite | limit NUMBER]";

/// `plug_parse_opt` (tc 6.1): the last command word wins; `limit` sets the limit and is a command.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut m = PlugMsg::default();
    let mut ok = false;
    while let Some(a) = it.next() {
        m.action = match a {
            "block" => plug::BUFFER,
            "release" => plug::RELEASE_ONE,
            "release_indefinite" => plug::RELEASE_INDEFINITE,
            "limit" => {
                let v = it.value()?;
                m.limit = get_size(v).ok_or_else(|| {
                    Failure::options(format!("Illegal value for \"limit\": \"{v}\""))
                })?;
                plug::LIMIT
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => {
                return Err(Failure::options(format!(
                    "plug: unknown parameter \"{a}\"\n{USAGE}"
                )))
            }
        };
        ok = true;
    }
    Ok(QdiscOptions::Plug(PlugOptions {
        msg: ok.then_some(m),
    }))
}
