//! `pfifo`, `bfifo` and `pfifo_head_drop` (iproute2's `q_fifo.c`): a limit in packets or bytes. Without
//! one the kernel takes the device's txqueuelen (times the link MTU for bfifo).

use super::QdiscLang;
use crate::util::{get_size, matches, sprint_size};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::fifo::FifoOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const PFIFO: QdiscLang = fifo_lang("pfifo");
pub const BFIFO: QdiscLang = fifo_lang("bfifo");
pub const PFIFO_HEAD_DROP: QdiscLang = fifo_lang("pfifo_head_drop");

/// The three kinds share q_fifo.c's parser and printer, as iproute2's three `qdisc_util`s do.
const fn fifo_lang(name: &'static str) -> QdiscLang {
    QdiscLang {
        name,
        words: &["limit"],
        parse: parse_fifo,
        print: print_fifo,
        xstats: None,
        xstats_json: None,
        class: None,
    }
}

const FIFO_USAGE: &str = "Usage: ... <[p|b]fifo | pfifo_head_drop> [ limit NUMBER ]";

fn parse_fifo(kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut limit = None;
    while let Some(a) = it.next() {
        if matches(a, "limit") {
            let v = it.value()?;
            // get_size for all three kinds, as q_fifo.c: `pfifo limit 2k` is 2048 packets.
            limit = Some(get_size(v).ok_or_else(|| {
                Failure::options(format!("{kind}: Illegal value for \"limit\": \"{v}\""))
            })?);
        } else if a == "help" {
            return Err(Failure::options(FIFO_USAGE));
        } else {
            return Err(Failure::options(format!(
                "{kind}: unknown parameter \"{a}\"\n{FIFO_USAGE}"
            )));
        }
    }
    let o = FifoOptions { limit };
    Ok(match kind {
        "bfifo" => QdiscOptions::Bfifo(o),
        "pfifo_head_drop" => QdiscOptions::PfifoHeadDrop(o),
        _ => QdiscOptions::Pfifo(o),
    })
}

/// `fifo_print_opt`: bytes for bfifo, packets for the other two.
fn print_fifo(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    match o {
        QdiscOptions::Pfifo(f) | QdiscOptions::PfifoHeadDrop(f) => {
            let limit = f.limit.unwrap_or(0);
            let _ = write!(s, "limit {limit}p");
            j.insert("limit".into(), json!(limit));
        }
        QdiscOptions::Bfifo(f) => {
            let limit = f.limit.unwrap_or(0);
            let _ = write!(s, "limit {}", sprint_size(limit));
            j.insert("limit".into(), json!(limit));
        }
        _ => {}
    }
}
