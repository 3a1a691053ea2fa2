//! `netem` (iproute2's `q_netem.c`): limit, delay/latency with jitter and correlation, distribution,
//! loss random|state|gemodel, ecn, duplicate, corrupt, reorder and gap, rate with packet overhead and
//! cells, slot, and (iproute2 6.5's word) seed; its printer, `netem_print_opt` of tc 6.1.
//!
//! tc reads a distribution from `/usr/lib/x86_64-linux-gnu/tc/NAME.dist` (Debian's path); tclab has the tables iproute2 generates
//! (`normal`, `pareto`, `paretonormal`, computed by `tclab_core::qdisc::netem_dist`) and answers for any
//! other name what tc answers when the file is missing. `uniform` sends no table: the kernel's own
//! uniform distribution, what netem does without one.

use super::QdiscLang;
use crate::util::{
    fmt_g, get_rate, get_s32, get_size, get_time, get_time64, get_u32, matches, parse_percent,
    sprint_rate, sprint_time, sprint_time64, tick2time, TICKS_PER_USEC,
};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::netem::{
    LossModel, NetemCorr, NetemOptions, NetemRate, NetemSlot, ProbCorr,
};
use tclab_core::qdisc::netem_dist::Distribution;
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "netem",
    words: &[
        "limit",
        "delay",
        "latency",
        "distribution",
        "normal",
        "pareto",
        "paretonormal",
        "uniform",
        "corrupt",
        "duplicate",
        "loss",
        "drop",
        "random",
        "state",
        "gemodel",
        "ecn",
        "reorder",
        "gap",
        "rate",
        "slot",
        "packets",
        "bytes",
        "seed",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: ... netem [ limit PACKETS ]
                 [ delay TIME [ JITTER [CORRELATION]]]
                 [ distribution {uniform|normal|pareto|paretonormal} ]
                 [ corrupt PERCENT [CORRELATION]]
                 [ duplicate PERCENT [CORRELATION]]
                 [ loss random PERCENT [CORRELATION]]
                 [ loss state P13 [P31 [P32 [P23 P14]]]
                 [ loss gemodel PERCENT [R [1-H [1-K]]]
                 [ ecn ]
                 [ reorder PERCENT [CORRELATION] [ gap DISTANCE ]]
                 [ rate RATE [PACKETOVERHEAD] [CELLSIZE] [CELLOVERHEAD]]
                 [ slot MIN_DELAY [MAX_DELAY] [packets MAX_PACKETS] [bytes MAX_BYTES]]
                 [ slot distribution {uniform|normal|pareto|paretonormal|custom}
                   DELAY JITTER [packets MAX_PACKETS] [bytes MAX_BYTES]]";

/// `explain1`.
fn illegal(what: &str) -> Failure {
    Failure::options(format!("Illegal \"{what}\""))
}

/// A check after the loop: its message, then the usage (`explain()`).
fn explained(msg: &str) -> Failure {
    Failure::options(format!("{msg}\n{USAGE}"))
}

/// `set_percent`: a fraction as a share of `u32::MAX`.
fn set_percent(per: f64) -> u32 {
    (per * u32::MAX as f64).round_ties_even() as u32
}

/// `get_percent`.
fn get_percent(s: &str) -> Option<u32> {
    parse_percent(s).map(set_percent)
}

/// `NEXT_IS_NUMBER()`.
fn next_is_number(it: &crate::Cur) -> bool {
    it.peek()
        .is_some_and(|a| a.as_bytes().first().is_some_and(u8::is_ascii_digit))
}

/// `NEXT_IS_SIGNED_NUMBER()`.
fn next_is_signed_number(it: &crate::Cur) -> bool {
    it.peek().is_some_and(|a| {
        a.as_bytes()
            .first()
            .is_some_and(|c| c.is_ascii_digit() || *c == b'-')
    })
}

/// `get_ticks`: a time in µs turned into psched ticks, refusing what does not fit 32 bits of ticks. A
/// negative time wraps to a huge unsigned one, as C's conversion does on this machine, and is then too
/// large.
fn get_ticks(s: &str, what: &str) -> Result<u32> {
    let us = match s.strip_prefix('-') {
        Some(rest) => get_time(rest).map(|t| (t as i64).wrapping_neg() as u32),
        None => get_time(s),
    }
    .ok_or_else(|| illegal(what))?;
    if ((us as u64 as f64 * TICKS_PER_USEC) as u64) >> 32 != 0 {
        return Err(Failure::options(format!(
            "Illegal {us} time (too large)\nIllegal \"{what}\""
        )));
    }
    Ok((us as f64 * TICKS_PER_USEC) as u32)
}

/// `get_tc_lib()` of this machine's tc 6.1 (Debian's `LIBDIR/tc/`; tc adds the slash again).
const TC_LIB: &str = "/usr/lib/x86_64-linux-gnu/tc/";

/// `get_distribution`: the table of a distribution by name (`None`: uniform, no table).
fn get_distribution(name: &str) -> Result<Option<Distribution>> {
    if name == "uniform" {
        return Ok(None);
    }
    Distribution::by_name(name).map(Some).ok_or_else(|| {
        Failure::options(format!(
            "No distribution data for {name} ({TC_LIB}/{name}.dist: No such file or directory)"
        ))
    })
}

/// `netem_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = NetemOptions {
        limit: 1000,
        ..Default::default()
    };
    let mut cor = NetemCorr::default();
    let mut cor_present = false;
    let mut reorder: Option<ProbCorr> = None;
    let mut corrupt: Option<ProbCorr> = None;
    let mut rate: Option<NetemRate> = None;
    let mut slot: Option<NetemSlot> = None;
    let mut loss_model: Option<LossModel> = None;
    let mut ecn = false;
    let mut dist: Option<Option<Distribution>> = None;
    while let Some(a) = it.next() {
        if matches(a, "limit") {
            o.limit = get_size(it.value()?).ok_or_else(|| illegal("limit"))?;
        } else if matches(a, "latency") || matches(a, "delay") {
            o.latency = get_ticks(it.value()?, "latency")?;
            if next_is_number(&it) {
                o.jitter = get_ticks(it.value()?, "latency")?;
                if next_is_number(&it) {
                    cor_present = true;
                    cor.delay = get_percent(it.value()?).ok_or_else(|| illegal("latency"))?;
                }
            }
        } else if matches(a, "loss") || matches(a, "drop") {
            if o.loss > 0 || loss_model.is_some() {
                return Err(illegal("duplicate loss argument\n"));
            }
            let mut v = it.value()?;
            let random = v.as_bytes().first().is_some_and(u8::is_ascii_digit);
            if random || v == "random" {
                if !random {
                    v = it.value()?;
                }
                o.loss = get_percent(v).ok_or_else(|| illegal("loss percent"))?;
                if next_is_number(&it) {
                    cor_present = true;
                    cor.loss =
                        get_percent(it.value()?).ok_or_else(|| illegal("loss correlation"))?;
                }
            } else if v == "state" {
                let p13 = parse_percent(it.value()?).ok_or_else(|| illegal("loss p13"))?;
                let (mut p31, mut p32, mut p23, mut p14) =
                    (set_percent(1.0 - p13), 0, set_percent(1.0), 0);
                for (slot, what) in [
                    (&mut p31, "loss p31"),
                    (&mut p32, "loss p32"),
                    (&mut p23, "loss p23"),
                    (&mut p14, "loss p14"),
                ] {
                    if !next_is_number(&it) {
                        break;
                    }
                    *slot = get_percent(it.value()?).ok_or_else(|| illegal(what))?;
                }
                loss_model = Some(LossModel::Gi {
                    p13: set_percent(p13),
                    p31,
                    p32,
                    p14,
                    p23,
                });
            } else if v == "gemodel" {
                let p = parse_percent(it.value()?).ok_or_else(|| illegal("loss gemodel p"))?;
                let (mut r, mut h, mut k1) = (set_percent(1.0 - p), 0u32, 0u32);
                if next_is_number(&it) {
                    r = get_percent(it.value()?).ok_or_else(|| illegal("loss gemodel r"))?;
                    if next_is_number(&it) {
                        h = get_percent(it.value()?).ok_or_else(|| illegal("loss gemodel h"))?;
                        // The option is 1-h; the kernel wants h.
                        h = u32::MAX - h;
                        if next_is_number(&it) {
                            k1 = get_percent(it.value()?)
                                .ok_or_else(|| illegal("loss gemodel k"))?;
                        }
                    }
                }
                loss_model = Some(LossModel::Ge {
                    p: set_percent(p),
                    r,
                    h,
                    k1,
                });
            } else {
                return Err(Failure::options(format!("Unknown loss parameter: {v}")));
            }
        } else if matches(a, "ecn") {
            ecn = true;
        } else if matches(a, "reorder") {
            let mut r = ProbCorr {
                probability: get_percent(it.value()?).ok_or_else(|| illegal("reorder"))?,
                correlation: 0,
            };
            if next_is_number(&it) {
                cor_present = true;
                r.correlation = get_percent(it.value()?).ok_or_else(|| illegal("reorder"))?;
            }
            reorder = Some(r);
        } else if matches(a, "corrupt") {
            let mut c = ProbCorr {
                probability: get_percent(it.value()?).ok_or_else(|| illegal("corrupt"))?,
                correlation: 0,
            };
            if next_is_number(&it) {
                cor_present = true;
                c.correlation = get_percent(it.value()?).ok_or_else(|| illegal("corrupt"))?;
            }
            corrupt = Some(c);
        } else if matches(a, "gap") {
            o.gap = get_u32(it.value()?, 0).ok_or_else(|| illegal("gap"))?;
        } else if matches(a, "duplicate") {
            o.duplicate = get_percent(it.value()?).ok_or_else(|| illegal("duplicate"))?;
            if next_is_number(&it) {
                cor.dup = get_percent(it.value()?).ok_or_else(|| illegal("duplicate"))?;
            }
        } else if matches(a, "distribution") {
            dist = Some(get_distribution(it.value()?)?);
        } else if matches(a, "rate") {
            let v = it.value()?;
            if v.contains('%') {
                return Err(Failure::options(
                    "Specified rate value could not be read or is malformed\nIllegal \"rate\"",
                ));
            }
            let mut r = NetemRate {
                rate: get_rate(v).ok_or_else(|| illegal("rate"))?,
                ..Default::default()
            };
            if next_is_signed_number(&it) {
                r.packet_overhead = get_s32(it.value()?).ok_or_else(|| illegal("rate"))?;
            }
            if next_is_number(&it) {
                r.cell_size = get_u32(it.value()?, 0).ok_or_else(|| illegal("rate"))?;
            }
            if next_is_signed_number(&it) {
                r.cell_overhead = get_s32(it.value()?).ok_or_else(|| illegal("rate"))?;
            }
            rate = Some(r);
        } else if matches(a, "slot") {
            let mut s = slot.unwrap_or_default();
            if next_is_number(&it) {
                s.min_delay = get_time64(it.value()?).ok_or_else(|| illegal("slot min_delay"))?;
                if next_is_number(&it) {
                    s.max_delay = get_time64(it.value()?)
                        .filter(|m| *m >= s.min_delay)
                        .ok_or_else(|| illegal("slot max_delay"))?;
                } else {
                    s.max_delay = s.min_delay;
                }
            } else {
                let v = it.value()?;
                if v != "distribution" {
                    return Err(Failure::options(format!("Unknown slot parameter: {v}")));
                }
                let name = it.value()?;
                o.slot_dist = match get_distribution(name)? {
                    Some(d) => Some(d),
                    None => {
                        return Err(Failure::options(format!(
                            "No distribution data for {name} ({TC_LIB}/{name}.dist: No such file or directory)"
                        )))
                    }
                };
                s.dist_delay = get_time64(it.value()?).ok_or_else(|| illegal("slot delay"))?;
                s.dist_jitter = get_time64(it.value()?).ok_or_else(|| illegal("slot jitter"))?;
                if s.dist_jitter <= 0 {
                    return Err(Failure::options("Non-positive jitter"));
                }
            }
            if it.peek().is_some_and(|n| matches(n, "packets")) {
                it.next();
                s.max_packets = it
                    .peek()
                    .and_then(get_s32)
                    .ok_or_else(|| illegal("slot packets"))?;
                it.next();
            }
            if it.peek().is_some_and(|n| matches(n, "bytes")) {
                it.next();
                s.max_bytes = it
                    .peek()
                    .and_then(get_size)
                    .ok_or_else(|| illegal("slot bytes"))? as i32;
                it.next();
            }
            slot = Some(s);
        } else if a == "seed" {
            // iproute2 6.5's `seed VALUE` (TCA_NETEM_PRNG_SEED), past the tc 6.1 tclab follows.
            let v = it.value()?;
            o.seed = Some(
                crate::util::strtoul(v, 0)
                    .0
                    .filter(|_| crate::util::strtoul(v, 0).1.is_empty())
                    .ok_or_else(|| illegal("seed"))?,
            );
        } else {
            if a == "help" {
                return Err(Failure::options(USAGE));
            }
            return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}")));
        }
    }
    match &reorder {
        Some(r) if r.probability != 0 => {
            if o.latency == 0 {
                return Err(explained(
                    "reordering not possible without specifying some delay",
                ));
            }
            if o.gap == 0 {
                o.gap = 1;
            }
        }
        _ if o.gap > 0 => {
            return Err(explained("gap specified without reorder probability"));
        }
        _ => {}
    }
    if ecn && o.loss == 0 && loss_model.is_none() {
        return Err(explained("ecn requested without loss model"));
    }
    if dist.is_some() && (o.latency == 0 || o.jitter == 0) {
        return Err(explained(
            "distribution specified but no latency and jitter values",
        ));
    }
    o.corr = cor_present.then_some(cor);
    o.reorder = reorder;
    o.corrupt = corrupt;
    o.rate = rate;
    o.slot = slot;
    o.loss_model = loss_model;
    o.ecn = ecn.then_some(1);
    o.delay_dist = dist.flatten();
    Ok(QdiscOptions::Netem(o))
}

/// `__print_percent` in text: `%g` of the share in percent.
fn pct(v: u32) -> String {
    fmt_g(100.0 * v as f64 / u32::MAX as f64, 6)
}

fn frac(v: u32) -> f64 {
    v as f64 / u32::MAX as f64
}

/// `netem_print_opt` (tc 6.1).
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Netem(o) = o else { return };
    let _ = write!(s, "limit {}", o.limit);
    j.insert("limit".into(), json!(o.limit));
    let cor = o.corr.unwrap_or_default();
    if o.latency != 0 {
        let _ = write!(s, " delay {}", sprint_time(tick2time(o.latency)));
        if o.jitter != 0 {
            let _ = write!(s, "  {}", sprint_time(tick2time(o.jitter)));
        }
        if o.jitter != 0 && cor.delay != 0 {
            let _ = write!(s, " {}%", pct(cor.delay));
        }
        j.insert(
            "delay".into(),
            json!({
                "delay": tick2time(o.latency) as f64 / 1e6,
                "jitter": tick2time(o.jitter) as f64 / 1e6,
                "correlation": frac(cor.delay),
            }),
        );
    }
    if o.loss != 0 {
        let _ = write!(s, " loss {}%", pct(o.loss));
        if cor.loss != 0 {
            let _ = write!(s, " {}%", pct(cor.loss));
        }
        j.insert(
            "loss-random".into(),
            json!({"loss": frac(o.loss), "correlation": frac(cor.loss)}),
        );
    }
    match o.loss_model {
        Some(LossModel::Gi {
            p13,
            p31,
            p32,
            p14,
            p23,
        }) => {
            let _ = write!(
                s,
                " loss state p13 {}% p31 {}% p32 {}% p23 {}% p14 {}%",
                pct(p13),
                pct(p31),
                pct(p32),
                pct(p23),
                pct(p14)
            );
            j.insert(
                "loss-state".into(),
                json!({"p13": frac(p13), "p31": frac(p31), "p32": frac(p32), "p23": frac(p23), "p14": frac(p14)}),
            );
        }
        Some(LossModel::Ge { p, r, h, k1 }) => {
            let _ = write!(
                s,
                " loss gemodel p {}% r {}% 1-h {}% 1-k {}%",
                pct(p),
                pct(r),
                pct(u32::MAX - h),
                pct(k1)
            );
            j.insert(
                "loss-gemodel".into(),
                json!({"p": frac(p), "r": frac(r), "1-h": frac(u32::MAX - h), "1-k": frac(k1)}),
            );
        }
        None => {}
    }
    if o.duplicate != 0 {
        let _ = write!(s, " duplicate {}%", pct(o.duplicate));
        if cor.dup != 0 {
            let _ = write!(s, " {}%", pct(cor.dup));
        }
        j.insert(
            "duplicate".into(),
            json!({"duplicate": frac(o.duplicate), "correlation": frac(cor.dup)}),
        );
    }
    for (name, pc) in [("reorder", o.reorder), ("corrupt", o.corrupt)] {
        if let Some(pc) = pc.filter(|p| p.probability != 0) {
            let _ = write!(s, " {name} {}%", pct(pc.probability));
            if pc.correlation != 0 {
                let _ = write!(s, " {}%", pct(pc.correlation));
            }
            j.insert(
                name.into(),
                json!({name: frac(pc.probability), "correlation": frac(pc.correlation)}),
            );
        }
    }
    if let Some(r) = o.rate.filter(|r| r.rate != 0) {
        let _ = write!(s, " rate {}", sprint_rate(r.rate));
        if r.packet_overhead != 0 {
            let _ = write!(s, " packetoverhead {}", r.packet_overhead);
        }
        if r.cell_size != 0 {
            let _ = write!(s, " cellsize {}", r.cell_size);
        }
        if r.cell_overhead != 0 {
            let _ = write!(s, " celloverhead {}", r.cell_overhead);
        }
        j.insert(
            "rate".into(),
            json!({"rate": r.rate, "packetoverhead": r.packet_overhead, "cellsize": r.cell_size, "celloverhead": r.cell_overhead}),
        );
    }
    if let Some(sl) = o.slot {
        if sl.dist_jitter > 0 {
            let _ = write!(
                s,
                " slot distribution {} {}",
                sprint_time64(sl.dist_delay),
                sprint_time64(sl.dist_jitter)
            );
        } else {
            let _ = write!(
                s,
                " slot {} {}",
                sprint_time64(sl.min_delay),
                sprint_time64(sl.max_delay)
            );
        }
        if sl.max_packets != 0 {
            let _ = write!(s, " packets {}", sl.max_packets);
        }
        if sl.max_bytes != 0 {
            let _ = write!(s, " bytes {}", sl.max_bytes);
        }
        j.insert(
            "slot".into(),
            json!({"min-delay": sl.min_delay as f64 / 1e9, "max-delay": sl.max_delay as f64 / 1e9,
                   "packets": sl.max_packets, "bytes": sl.max_bytes}),
        );
    }
    j.insert("ecn".into(), json!(o.ecn.is_some()));
    if o.ecn.is_some() {
        s.push_str(" ecn ");
    }
    j.insert("gap".into(), json!(o.gap));
    if o.gap != 0 {
        let _ = write!(s, " gap {}", o.gap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn show(line: &str) -> String {
        let o = parse("netem", &words(line), None).expect(line);
        let mut s = String::new();
        print(&o, ShowFlags::default(), &mut s, &mut Map::new());
        s
    }

    #[test]
    fn prints_as_tc_6_1() {
        assert_eq!(show(""), "limit 1000");
        assert_eq!(
            show("delay 100ms 10ms 25%"),
            "limit 1000 delay 100ms  10ms 25%"
        );
        assert_eq!(
            show("loss state 1"),
            "limit 1000 loss state p13 1% p31 99% p32 0% p23 100% p14 0%"
        );
        assert_eq!(
            show("loss gemodel 1%"),
            "limit 1000 loss gemodel p 1% r 99% 1-h 100% 1-k 0%"
        );
        assert_eq!(
            show("delay 10ms reorder 25% gap 5"),
            "limit 1000 delay 10ms reorder 25% gap 5"
        );
        assert_eq!(
            show("rate 1mbit 20 48 5"),
            "limit 1000 rate 1Mbit packetoverhead 20 cellsize 48 celloverhead 5"
        );
        assert_eq!(show("loss 1% ecn"), "limit 1000 loss 1% ecn ");
    }

    #[test]
    fn refuses_as_tc_does() {
        let err = |line: &str| parse("netem", &words(line), None).unwrap_err();
        assert_eq!(err("loss 101%").msg, "Illegal \"loss percent\"");
        assert_eq!(err("delay 10ms distribution normal").code, 1);
        assert!(err("delay 10ms distribution normal")
            .msg
            .starts_with("distribution specified but no latency and jitter values"));
        assert!(err("delay -10ms").msg.contains("(too large)"));
        assert_eq!(err("gap 5").code, 1);
        assert!(err("distribution custom")
            .msg
            .starts_with("No distribution data for custom"));
        assert_eq!(err("delay").code, 255);
    }
}
