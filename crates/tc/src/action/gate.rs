//! `gate` (`m_gate.c`): `gate [priority P] [base-time T] [cycle-time T] [cycle-time-ext T] [clockid C]
//! [flags F] [index N] sched-entry open|close INTERVAL [IPV MAX-OCTETS] … [CONTROL]`, with tc's
//! messages; and its printer (which names no kind: tc 6.1's starts with a newline).

use super::*;
use crate::util::{get_s32, get_time64, sprint_time64};
use tclab_core::action::gate::{Gate, GateEntry, CLOCK_TAI};

pub(super) const GATE_USAGE: &str = "Usage: gate [ priority PRIO-SPEC ] [ base-time BASE-TIME ]\n       [ cycle-time CYCLE-TIME ]\n       [ cycle-time-ext CYCLE-TIME-EXT ]\n       [ clockid CLOCKID ] [flags FLAGS]\n       [ sched-entry GATE0 INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]\n       [ sched-entry GATE1 INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]\n       ......\n       [ sched-entry GATEn INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]\n       [ CONTROL ]\n       GATEn := open | close\n       INTERVAL : nanoseconds period of gate slot\n       INTERNAL-PRIO-VALUE : internal priority decide which\n                             rx queue number direct to.\n                             default to be -1 which means wildcard.\n       MAX-OCTETS : maximum number of MSDU octets that are\n                    permitted to pas the gate during the\n                    specified TimeInterval.\n                    default to be -1 which means wildcard.\n       CONTROL := pipe | drop | continue | pass |\n                  goto chain <CHAIN_INDEX>";

const ENTRY_USAGE: &str = "Usage: sched-entry <open | close> <interval> [ <interval ipv> <octets max bytes> ]\n\"sched-entry\" is incomplete";

/// `clockt_map`.
const CLOCKS: [(&str, i32); 4] = [
    ("REALTIME", 0),
    ("TAI", CLOCK_TAI),
    ("BOOTTIME", 7),
    ("MONOTONIC", 1),
];

/// `get_s64(…, 10)`, else `get_time64`: a time in nanoseconds.
fn time_ns(s: &str) -> Option<i64> {
    s.parse::<i64>().ok().or_else(|| get_time64(s))
}

/// `get_clockid`: a name, with or without `CLOCK_`, any case.
fn get_clockid(s: &str) -> Option<i32> {
    let up = s.to_ascii_uppercase();
    let name = up
        .find("CLOCK_")
        .map_or(up.as_str(), |_| &up["CLOCK_".len()..]);
    CLOCKS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// One `sched-entry` after its keyword: the cursor ends on the last word it took.
fn parse_entry(c: &mut Cur) -> Result<GateEntry> {
    let incomplete = || bad(ENTRY_USAGE);
    let open = match c.next_arg().map_err(|_| incomplete())? {
        w if w.eq_ignore_ascii_case("open") => true,
        w if w.eq_ignore_ascii_case("close") => false,
        _ => return Err(incomplete()),
    };
    let w = c.next_arg().map_err(|_| incomplete())?;
    let interval = match get_u32(w, 0) {
        Some(v) => v,
        None => {
            let ns = get_time64(w).ok_or_else(incomplete)?;
            u32::try_from(ns).map_err(|_| bad("\"interval\" is too large"))?
        }
    };
    let mut e = GateEntry {
        open,
        interval,
        ipv: -1,
        max_octets: -1,
    };
    let Some(ipv) = c.rest().get(1).and_then(|w| get_s32(w)) else {
        return Ok(e);
    };
    c.fwd();
    e.ipv = if open { ipv } else { -1 };
    let Some(w) = c.rest().get(1) else {
        return Ok(e);
    };
    if let Some(m) = get_s32(w) {
        c.fwd();
        e.max_octets = m;
    } else if let Some(sz) = get_size(w) {
        c.fwd();
        if sz > i32::MAX as u32 {
            return Err(bad("\"maxoctets\" is too large"));
        }
        if sz != 0 {
            e.max_octets = sz as i32;
        }
    }
    if !open {
        e.max_octets = -1;
    }
    Ok(e)
}

/// `parse_gate`.
pub(super) fn parse_gate(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut g = Gate {
        action: TC_ACT_PIPE,
        priority: None,
        flags: None,
        base_time: None,
        cycle_time: None,
        cycle_time_ext: None,
        clockid: None,
        entries: Vec::new(),
    };
    c.next_arg()?;
    let mut index = 0;
    while let Some(w) = c.peek() {
        if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| invarg("index", v))?;
        } else if matches(w, "priority") {
            let v = c.next_arg()?;
            g.priority =
                Some(get_s32(v).ok_or_else(|| invarg("priority", v))?).filter(|p| *p != -1);
        } else if matches(w, "base-time")
            || matches(w, "cycle-time")
            || matches(w, "cycle-time-ext")
        {
            let what = if matches(w, "base-time") {
                "base-time"
            } else if matches(w, "cycle-time") {
                "cycle-time"
            } else {
                "cycle-time-ext"
            };
            let v = c.next_arg()?;
            // tc sends none of the three when it is 0.
            let t = Some(time_ns(v).ok_or_else(|| invarg(what, v))? as u64).filter(|t| *t != 0);
            match what {
                "base-time" => g.base_time = t,
                "cycle-time" => g.cycle_time = t,
                _ => g.cycle_time_ext = t,
            }
        } else if matches(w, "clockid") {
            let v = c.next_arg()?;
            g.clockid = Some(get_clockid(v).ok_or_else(|| invarg("clockid", v))?);
        } else if matches(w, "flags") {
            let v = c.next_arg()?;
            g.flags = Some(get_u32(v, 0).ok_or_else(|| invarg("flags", v))?).filter(|f| *f != 0);
        } else if matches(w, "sched-entry") {
            g.entries.push(parse_entry(c)?);
        } else if matches(w, "help") {
            return Err(Failure::syntax(GATE_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    g.action = control_or(c, g.action)?;
    if g.entries.is_empty() && index == 0 {
        return Err(bad("gate: must add at least one entry"));
    }
    Ok((ActionParams::Gate(g), index))
}

/// `print_gate_list`.
fn print_entries(p: &mut Printer, entries: &[GateEntry]) {
    p.fp("\n\tschedule:\n");
    p.open_array("schedule");
    for (i, e) in entries.iter().enumerate() {
        p.open_object(None);
        p.number("number", format_args!("\t number {i:4}"), i);
        let state = if e.open { "open" } else { "close" };
        p.string("gate_state", format_args!("\tgate-state {state} "), state);
        p.json_number("interval", e.interval);
        p.fp(format_args!(
            "\tinterval {}",
            sprint_time64(i64::from(e.interval))
        ));
        if e.ipv != -1 {
            p.number(
                "ipv",
                format_args!("\t ipv {:<10}", e.ipv as u32),
                e.ipv as u32,
            );
        } else {
            p.json_number("ipv", -1);
            p.fp("\t ipv wildcard");
        }
        if e.max_octets != -1 {
            let m = e.max_octets as u32;
            p.number(
                "max_octets",
                format_args!("\t max-octets {}", sprint_size(m)),
                m,
            );
        } else {
            p.fp("\t max-octets wildcard");
            p.json_number("max_octets", -1);
        }
        p.close_object();
        p.fp("\n");
    }
    p.close_array();
}

/// `print_gate`: what `tcf_gate_dump` dumps (every parameter, the defaults included).
pub(super) fn print(p: &mut Printer, a: &Action, g: &Gate, flags: ShowFlags, now: u64) {
    p.fp("\n");
    match g.priority {
        Some(pr) => p.number("priority", format_args!("\tpriority {pr:<8}"), pr),
        None => {
            p.fp("\tpriority wildcard");
            p.json_number("priority", -1);
        }
    }
    let clock = g.clockid.unwrap_or(CLOCK_TAI);
    let name = CLOCKS
        .iter()
        .find(|(_, c)| *c == clock)
        .map_or("invalid", |(n, _)| n);
    p.string("clockid", format_args!("\tclockid {name}"), name);
    let fl = g.flags.unwrap_or(0);
    let text = if fl == 0 {
        "0".to_string()
    } else {
        format!("{fl:#x}")
    };
    p.hex0x("flags", format_args!("\tflags {text}"), u64::from(fl));
    p.fp("\n");
    for (key, word, v) in [
        ("base_time", "base-time", g.base_time.unwrap_or(0)),
        ("cycle_time", "cycle-time", g.kept_cycle_time()),
        (
            "cycle_time_ext",
            "cycle-time-ext",
            g.cycle_time_ext.unwrap_or(0),
        ),
    ] {
        p.fp(format_args!("\t{word} {}", sprint_time64(v as i64)));
        p.json_number(key, v);
    }
    print_entries(p, &g.entries);
    print_control(p, "\t", g.action, "");
    p.number("index", format_args!("\n\t index {}", a.index), a.index);
    p.number("ref", format_args!(" ref {}", a.refcnt), a.refcnt);
    p.number("bind", format_args!(" bind {}", a.bindcnt), a.bindcnt);
    if flags.stats {
        print_tm(p, a, now);
    }
    p.fp("\n");
}
