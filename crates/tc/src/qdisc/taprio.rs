//! `taprio` (iproute2 6.1's `q_taprio.c`): `taprio [num_tc N] [map P0 P1 …] [queues C@O …]
//! [sched-entry S MASK INTERVAL …] [base-time T] [cycle-time T] [cycle-time-extension T] [clockid C]
//! [flags F] [txtime-delay D]` with tc's messages (and its quirks: a malformed base or cycle time ends
//! the options there, silently); and the printer: the mapping, the clock, flags and delay, the
//! schedule with its entries' indices, a waiting admin schedule after it. `max-sdu` is a later
//! iproute2's (6.2 on): parsed as it parses it, and listed as it lists it — but only when a class has
//! one, so that a listing without one stays tc 6.1's (a later tc lists the kernel's limits always).
//! `fp` (frame preemption, iproute2 6.5) is refused as 6.1 refuses any word it does not know.

use super::mqprio::{get_u8, parse_map, parse_queues};
use super::QdiscLang;
use crate::util::get_u32;
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::mqprio::MqprioOptions;
use tclab_core::qdisc::taprio::{AdminSchedule, SchedEntry, TaprioOptions};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "taprio",
    words: &[
        "num_tc",
        "map",
        "queues",
        "sched-entry",
        "S",
        "base-time",
        "cycle-time",
        "cycle-time-extension",
        "clockid",
        "CLOCK_TAI",
        "flags",
        "0x1",
        "txtime-delay",
        "max-sdu",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

/// tc 6.1's `explain()`: its string literals are joined without newlines, so the middle lines run on one
/// line, separated by tabs (6.4 put a newline after each).
const USAGE: &str = "Usage: ... taprio clockid CLOCKID\n\t\t[num_tc NUMBER] [map P0 P1 ...] \t\t[queues COUNT@OFFSET COUNT@OFFSET COUNT@OFFSET ...] \t\t[ [sched-entry index cmd gate-mask interval] ... ] \t\t[base-time time] [txtime-delay delay]\nCLOCKID must be a valid SYS-V id (i.e. CLOCK_TAI)";

const SCHED_ENTRY_USAGE: &str = "Usage: ... taprio ... sched-entry <cmd> <gate mask> <interval>";

/// The clocks tc knows by name (`clockids_sysv`).
const CLOCKS: [(&str, i32); 4] = [
    ("REALTIME", 0),
    ("TAI", 11),
    ("BOOTTIME", 7),
    ("MONOTONIC", 1),
];

/// `get_s64(…, 10)`: `strtoll` over the whole word (leading blanks and a sign allowed), in range.
fn get_s64(s: &str) -> Option<i64> {
    s.trim_start_matches([' ', '\t', '\n']).parse().ok()
}

/// `get_clockid`: a name, with or without `CLOCK_` (tc skips six characters wherever the prefix is
/// found), in any case.
fn get_clockid(s: &str) -> Option<i32> {
    let name = if s.to_ascii_uppercase().contains("CLOCK_") {
        s.get(6..)?
    } else {
        s
    };
    CLOCKS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|c| c.1)
}

fn incomplete() -> Failure {
    Failure::syntax("Command line is not complete. Try option \"help\"")
}

/// `taprio_parse_opt`.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut m = MqprioOptions::default();
    let mut o = TaprioOptions::default();
    let (mut flags, mut delay) = (0u32, 0u32);
    let next = |i: usize| args.get(i + 1).map(String::as_str);
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        // NEXT_ARG: the word after `a`, or tc's "Command line is not complete".
        let value = |i: usize| next(i).ok_or_else(incomplete);
        match a {
            "num_tc" => {
                m.num_tc =
                    get_u8(value(i)?).ok_or_else(|| Failure::options("Illegal \"num_tc\""))?;
                i += 1;
            }
            "map" => i = parse_map(args, i, &mut m),
            "queues" => i = parse_queues(args, i, &mut m).0,
            // Up to 16 numbers, each class's in turn from class 0; the first word that is not one
            // ends the list (PREV_ARG).
            "max-sdu" => {
                let mut idx = 0;
                while idx < 16 {
                    let Some(v) = next(i).and_then(|v| get_u32(v, 10)) else {
                        break;
                    };
                    if idx < o.max_sdu.len() {
                        o.max_sdu[idx] = v;
                    } else {
                        o.max_sdu.push(v);
                    }
                    idx += 1;
                    i += 1;
                }
            }
            "sched-entry" => {
                let bad = || Failure::options(SCHED_ENTRY_USAGE);
                if value(i)? != "S" {
                    return Err(bad());
                }
                let gate_mask = get_u32(value(i + 1)?, 16).ok_or_else(bad)?;
                let interval = get_u32(value(i + 2)?, 0).ok_or_else(bad)?;
                o.entries.push(SchedEntry {
                    cmd: 0,
                    gate_mask,
                    interval,
                });
                i += 3;
            }
            "base-time" | "cycle-time" | "cycle-time-extension" => {
                let v = value(i)?;
                let slot = match a {
                    "base-time" => &mut o.base_time,
                    "cycle-time" => &mut o.cycle_time,
                    _ => &mut o.cycle_time_extension,
                };
                if a != "base-time" && *slot != 0 {
                    return Err(Failure::options(format!(
                        "taprio: duplicate \"{a}\" specification"
                    )));
                }
                // PREV_ARG; break: the options end here, the rest unread.
                let Some(t) = get_s64(v) else { break };
                *slot = t;
                i += 1;
            }
            "clockid" => {
                let v = value(i)?;
                if o.clockid.is_some() {
                    return Err(Failure::options(
                        "taprio: duplicate \"clockid\" specification",
                    ));
                }
                o.clockid = Some(get_clockid(v).ok_or_else(|| {
                    Failure::options(format!("taprio: illegal value for \"clockid\": \"{v}\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)"))
                })?);
                i += 1;
            }
            "flags" | "txtime-delay" => {
                let v = value(i)?;
                let slot = if a == "flags" { &mut flags } else { &mut delay };
                if *slot != 0 {
                    return Err(Failure::options(format!(
                        "taprio: duplicate \"{a}\" specification"
                    )));
                }
                *slot = get_u32(v, 0).ok_or_else(|| {
                    Failure::silent(1, "taprio_parse_opt (q_taprio.c): flags, txtime-delay")
                })?;
                i += 1;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options("Unknown argument")),
        }
        i += 1;
    }
    // Only what is set is sent.
    o.mqprio = (m.num_tc > 0).then_some(m);
    o.flags = (flags != 0).then_some(flags);
    o.txtime_delay = (delay != 0).then_some(delay);
    Ok(QdiscOptions::Taprio(o))
}

/// `print_0xhex`'s `%#x`: C writes no prefix for 0.
fn hex(v: u32) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `taprio_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Taprio(t) = o else { return };
    let Some(m) = t.mqprio else { return };
    let _ = write!(s, "tc {} map", m.num_tc);
    for p in m.map {
        let _ = write!(s, " {p}");
    }
    s.push_str("\nqueues");
    let mut queues = Vec::new();
    for tc in 0..usize::from(m.num_tc) {
        let _ = write!(s, " offset {} count {}", m.offset[tc], m.count[tc]);
        queues.push(json!({"offset": m.offset[tc], "count": m.count[tc]}));
    }
    s.push('\n');
    j.insert("tc".into(), json!(m.num_tc));
    j.insert("map".into(), json!(m.map));
    j.insert("queues".into(), Value::Array(queues));
    if let Some(c) = t.clockid {
        let name = CLOCKS.iter().find(|x| x.1 == c).map_or("invalid", |x| x.0);
        let _ = write!(s, "clockid {name}");
        j.insert("clockid".into(), json!(name));
    }
    if let Some(f) = t.flags {
        let _ = write!(s, " flags {}", hex(f));
        j.insert("flags".into(), json!(hex(f)));
    }
    if let Some(d) = t.txtime_delay {
        let _ = write!(s, " txtime delay {d}");
        j.insert("txtime_delay".into(), json!(d));
    }
    print_schedule(
        &AdminSchedule {
            base_time: t.base_time,
            cycle_time: t.cycle_time,
            cycle_time_extension: t.cycle_time_extension,
            entries: t.entries.clone(),
        },
        s,
        j,
    );
    if let Some(a) = &t.admin {
        // tc opens an unnamed object here, which its JSON writer puts inside the options object
        // without a key (not valid JSON); tclab names it "admin".
        let mut aj = Map::new();
        print_schedule(a, s, &mut aj);
        j.insert("admin".into(), Value::Object(aj));
    }
    // dump_tc_entries: the classes' max SDU, through the last class the dump names.
    if !t.max_sdu.is_empty() {
        s.push_str("max-sdu");
        for v in &t.max_sdu {
            let _ = write!(s, " {v}");
        }
        s.push('\n');
        j.insert("max-sdu".into(), json!(t.max_sdu));
    }
}

/// `print_schedule`, then `print_sched_list`'s newline before the entries.
fn print_schedule(t: &AdminSchedule, s: &mut String, j: &mut Map<String, Value>) {
    let _ = writeln!(
        s,
        "\tbase-time {} cycle-time {} cycle-time-extension {}",
        t.base_time, t.cycle_time, t.cycle_time_extension
    );
    j.insert("base_time".into(), json!(t.base_time));
    j.insert("cycle_time".into(), json!(t.cycle_time));
    j.insert("cycle_time_extension".into(), json!(t.cycle_time_extension));
    let mut sched = Vec::new();
    for (i, e) in t.entries.iter().enumerate() {
        let cmd = if e.cmd == 0 { "S" } else { "Invalid" };
        let _ = writeln!(
            s,
            "\tindex {i} cmd {cmd} gatemask {} interval {}",
            hex(e.gate_mask),
            e.interval
        );
        sched.push(
            json!({"index": i, "cmd": cmd, "gatemask": hex(e.gate_mask), "interval": e.interval}),
        );
    }
    j.insert("schedule".into(), Value::Array(sched));
}
