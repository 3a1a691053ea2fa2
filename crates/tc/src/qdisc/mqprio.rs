//! `mqprio` (iproute2's `q_mqprio.c`): `mqprio [num_tc N] [map P0 P1 …] [queues C@O …] [hw 1|0]
//! [mode dcb|channel] [shaper dcb|bw_rlimit [min_rate R…] [max_rate R…]]` with tc's defaults (8
//! classes, its priority map, `hw 1`) and messages; and the printer. `mode`, `shaper` and the rates
//! are read only with `hw 1`, which the "kernel" refuses (no offload), so they are parsed, not sent.

use super::QdiscLang;
use crate::util::{get_rate, get_u16, get_u32, matches};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::mqprio::{MqprioOptions, MAX_QUEUE};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "mqprio",
    words: &[
        "num_tc",
        "map",
        "queues",
        "1@0",
        "hw",
        "mode",
        "dcb",
        "channel",
        "shaper",
        "bw_rlimit",
        "min_rate",
        "max_rate",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... mqprio\t[num_tc NUMBER] [map P0 P1 ...]\n\t\t\t[queues count1@offset1 count2@offset2 ...] [hw 1|0]\n\t\t\t[mode dcb|channel]\n\t\t\t[shaper bw_rlimit SHAPER_PARAMS]\nWhere: SHAPER_PARAMS := { min_rate MIN_RATE1 MIN_RATE2 ...|\n\t\t\t  max_rate MAX_RATE1 MAX_RATE2 ... }";

/// `get_u8(…, 10)`.
pub(super) fn get_u8(s: &str) -> Option<u8> {
    get_u32(s, 10).and_then(|v| u8::try_from(v).ok())
}

/// `C@O` as `strtok`/`get_u16` read it.
fn count_offset(s: &str) -> Option<(u16, u16)> {
    let mut t = s.split('@').filter(|t| !t.is_empty());
    Some((get_u16(t.next()?, 10)?, get_u16(t.next()?, 10)?))
}

/// `map P0 P1 …` after `args[i]` (mqprio's and taprio's): the priorities' classes as far as they
/// read as numbers (at most 16), the rest 0. Returns the index of the last word read.
pub(super) fn parse_map(args: &[String], mut i: usize, o: &mut MqprioOptions) -> usize {
    let mut idx = 0;
    while idx < MAX_QUEUE {
        let Some(p) = args.get(i + 1).and_then(|w| get_u8(w)) else {
            break;
        };
        o.map[idx] = p;
        idx += 1;
        i += 1;
    }
    o.map[idx..].fill(0);
    i
}

/// `queues C@O …` after `args[i]`: the pairs as far as they read (at most 16). Returns the index of
/// the last word read and how many pairs there were.
pub(super) fn parse_queues(args: &[String], mut i: usize, o: &mut MqprioOptions) -> (usize, u8) {
    let mut idx = 0;
    while idx < MAX_QUEUE {
        let Some((c, off)) = args.get(i + 1).and_then(|w| count_offset(w)) else {
            break;
        };
        o.count[idx] = c;
        o.offset[idx] = off;
        idx += 1;
        i += 1;
    }
    (i, idx as u8)
}

/// `mqprio_parse_opt`.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut o = MqprioOptions {
        num_tc: 8,
        map: [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 1, 1, 3, 3, 3, 3],
        hw: 1,
        ..MqprioOptions::default()
    };
    let mut pairs = 0;
    let mut bw_rlimit = false;
    let mut i = 0;
    // The word after `i`, if any: tc's NEXT_ARG_OK then NEXT_ARG.
    let next = |i: usize| args.get(i + 1).map(String::as_str);
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "num_tc" => {
                let v = next(i).ok_or_else(incomplete)?;
                i += 1;
                o.num_tc = get_u8(v).ok_or_else(|| Failure::options("Illegal \"num_tc\""))?;
            }
            "map" => i = parse_map(args, i, &mut o),
            "queues" => {
                let read;
                (i, read) = parse_queues(args, i, &mut o);
                pairs += read;
            }
            "hw" => {
                let v = next(i).ok_or_else(incomplete)?;
                i += 1;
                o.hw = get_u8(v).ok_or_else(|| Failure::options("Illegal \"hw\""))?;
            }
            "mode" if o.hw != 0 => {
                let v = next(i).ok_or_else(incomplete)?;
                i += 1;
                if !matches(v, "dcb") && !matches(v, "channel") {
                    return Err(Failure::options(format!("Illegal mode ({v})")));
                }
            }
            "shaper" if o.hw != 0 => {
                let v = next(i).ok_or_else(incomplete)?;
                i += 1;
                if matches(v, "bw_rlimit") {
                    bw_rlimit = true;
                    if next(i).is_none() {
                        return Err(Failure::options("Incomplete shaper arguments"));
                    }
                } else if !matches(v, "dcb") {
                    return Err(Failure::options(format!("Illegal shaper ({v})")));
                }
            }
            "min_rate" | "max_rate" if bw_rlimit => {
                let mut idx = 0;
                while idx < MAX_QUEUE && next(i).and_then(get_rate).is_some() {
                    idx += 1;
                    i += 1;
                }
                if idx < usize::from(o.num_tc) && next(i).is_none() {
                    return Err(Failure::options(format!(
                        "Incomplete arguments, {a} values expected"
                    )));
                }
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(crate::invarg("unknown argument", a)),
        }
        i += 1;
    }
    if pairs > o.num_tc {
        return Err(Failure::options(format!(
            "queues count/offset pair count {pairs} can not be higher than given num_tc {}",
            o.num_tc
        )));
    }
    Ok(QdiscOptions::Mqprio(o))
}

fn incomplete() -> Failure {
    Failure::syntax("Command line is not complete. Try option \"help\"")
}

/// `mqprio_print_opt`: Linux 6.12 dumps the traffic classes' entries after the options, so tc 6.1
/// prints the mode and shaper lines (their defaults) too.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Mqprio(m) = o else { return };
    let _ = write!(s, "tc {} map ", m.num_tc);
    for p in m.map {
        let _ = write!(s, "{p} ");
    }
    s.push_str("\n             queues:");
    let mut queues = Vec::new();
    for tc in 0..usize::from(m.num_tc) {
        let (first, last) = (m.offset[tc], (m.offset[tc] + m.count[tc]).wrapping_sub(1));
        let _ = write!(s, "({first}:{last}) ");
        queues.push(json!([first, last]));
    }
    s.push_str("\n             mode:dcb\n             shaper:dcb");
    j.insert("tc".into(), json!(m.num_tc));
    j.insert("map".into(), json!(m.map));
    j.insert("queues".into(), Value::Array(queues));
    j.insert("mode".into(), json!("dcb"));
    j.insert("shaper".into(), json!("dcb"));
}
