//! `gred` (iproute2's `q_gred.c` with `tc_red.c`): `setup vqs N default D [grio] [limit BYTES] [ecn]
//! [harddrop]` for the table, `vq I [prio P] limit BYTES min BYTES max BYTES avpkt BYTES [burst PACKETS]
//! [probability P] [bandwidth RATE] [ecn] [harddrop]` for one virtual queue; RED's Wlog, Plog and idle
//! table computed as tc computes them; one line per VQ, with its counters under `-s`.
//!
//! tc's `GRED: set burst to N`, `set bandwidth to 10Mbit` and `Burst … seems to be too large` notices
//! come first in the command's stderr. Not reproduced: a `bandwidth` given as a percentage of the
//! device's speed (refused as tc refuses an unreadable one).

use super::red::{print_flags, red_constants};
use super::QdiscLang;
use crate::util::{fmt_g, get_rate, get_size, get_unsigned, scan_double, sprint_size};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::gred::{GredOptions, GredSetup, GredVqDump, GredVqOptions, MAX_DPS};
use tclab_core::qdisc::red::{TC_RED_ECN, TC_RED_HARDDROP};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "gred",
    words: &[
        "setup",
        "vqs",
        "DPs",
        "default",
        "grio",
        "limit",
        "ecn",
        "harddrop",
        "vq",
        "DP",
        "prio",
        "min",
        "max",
        "avpkt",
        "burst",
        "probability",
        "bandwidth",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

const USAGE: &str = "Usage: tc qdisc { add | replace | change } ... gred setup vqs NUMBER\n           default DEFAULT_VQ [ grio ] [ limit BYTES ] [ecn] [harddrop]\n       tc qdisc change ... gred vq VQ [ prio VALUE ] limit BYTES\n           min BYTES max BYTES avpkt BYTES [ burst PACKETS ]\n           [ probability PROBABILITY ] [ bandwidth KBPS ] [ecn] [harddrop]";

fn too_many() -> Failure {
    Failure::options(format!("GRED: only {MAX_DPS} VQs are currently supported"))
}

/// `strtol(s, NULL, 10)` as a u8: the leading digits (with a sign), 0 without any.
fn strtol_u8(s: &str) -> u8 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add((c - b'0') as i64);
    }
    (if neg { -v } else { v }) as u8
}

/// `init_gred`: the words after `setup`.
fn parse_setup(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = GredSetup {
        def_dp: MAX_DPS,
        ..Default::default()
    };
    let mut limit = 0u32;
    while let Some(a) = it.next() {
        match a {
            "vqs" | "DPs" => {
                o.dps =
                    get_unsigned(it.value()?).ok_or_else(|| Failure::options("Illegal \"vqs\""))?;
                if o.dps > MAX_DPS {
                    return Err(too_many());
                }
            }
            "default" => {
                if o.dps == 0 {
                    return Err(Failure::options(
                        "\"default\" must be defined after \"vqs\"",
                    ));
                }
                o.def_dp = get_unsigned(it.value()?)
                    .ok_or_else(|| Failure::options("Illegal \"default\""))?;
                if o.def_dp >= o.dps {
                    return Err(Failure::options("\"default\" must be less than \"vqs\""));
                }
            }
            "grio" => o.grio = true,
            "limit" => {
                limit =
                    get_size(it.value()?).ok_or_else(|| Failure::options("Illegal \"limit\""))?
            }
            "ecn" => o.flags |= TC_RED_ECN,
            "harddrop" => o.flags |= TC_RED_HARDDROP,
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    if o.dps == 0 || o.def_dp == MAX_DPS {
        return Err(Failure::options("Illegal gred setup parameters"));
    }
    o.limit = (limit != 0).then_some(limit);
    Ok(QdiscOptions::Gred(GredOptions::Setup(o)))
}

/// `gred_parse_opt` (tc 6.1): `setup …` or one VQ.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = GredVqOptions {
        dp: MAX_DPS,
        ..Default::default()
    };
    let (mut burst, mut avpkt, mut probability, mut rate) = (0u32, 0u32, 0.02f64, 0u64);
    let mut ok = 0;
    while let Some(a) = it.next() {
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        match a {
            "setup" => {
                if ok > 0 {
                    return Err(illegal());
                }
                return parse_setup(&args[it.i..]);
            }
            "limit" => o.limit = get_size(it.value()?).ok_or_else(illegal)?,
            "min" => o.qth_min = get_size(it.value()?).ok_or_else(illegal)?,
            "max" => o.qth_max = get_size(it.value()?).ok_or_else(illegal)?,
            "vq" | "DP" => {
                o.dp =
                    get_unsigned(it.value()?).ok_or_else(|| Failure::options("Illegal \"vq\""))?;
                if o.dp >= MAX_DPS {
                    return Err(too_many());
                }
            }
            "burst" => burst = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "avpkt" => avpkt = get_size(it.value()?).ok_or_else(illegal)?,
            "probability" => probability = scan_double(it.value()?).ok_or_else(illegal)?,
            "prio" => o.prio = strtol_u8(it.value()?),
            "bandwidth" => {
                let v = it.value()?;
                rate = if v.contains('%') {
                    None
                } else {
                    get_rate(v).filter(|r| *r <= u32::MAX as u64)
                }
                .ok_or_else(illegal)?;
            }
            "ecn" => {
                o.flags |= TC_RED_ECN as u32;
                continue;
            }
            "harddrop" => {
                o.flags |= TC_RED_HARDDROP as u32;
                continue;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
        ok += 1;
    }
    if ok == 0 {
        return Err(Failure::options(USAGE));
    }
    if o.dp == MAX_DPS || o.limit == 0 || o.qth_min == 0 || o.qth_max == 0 || avpkt == 0 {
        return Err(Failure::options(
            "Required parameter (vq, limit, min, max, avpkt) is missing",
        ));
    }
    let k = red_constants(
        o.qth_min,
        o.qth_max,
        burst,
        avpkt,
        probability,
        rate,
        "GRED",
    )?;
    (o.wlog, o.plog, o.scell_log, o.stab, o.max_p) = (k.wlog, k.plog, k.scell_log, k.stab, k.max_p);
    Ok(QdiscOptions::Gred(GredOptions::Vq(o)))
}

/// `gred_print_stats`.
fn print_stats(v: &GredVqDump, s: &mut String, j: &mut Map<String, Value>) {
    let _ = write!(
        s,
        "\n  Queue size: average {} current {} \n  Dropped packets: forced {} early {} pdrop {} other 0 \n  Marked packets: forced {} early {} \n  Total packets: {} ({}) ",
        sprint_size(v.qave),
        sprint_size(v.backlog),
        v.forced_drop,
        v.prob_drop,
        v.pdrop,
        v.forced_mark,
        v.prob_mark,
        v.packetsin,
        // tc reads the 64-bit byte counter with `rta_getattr_u32`.
        sprint_size(v.bytesin as u32),
    );
    for (k, x) in [
        ("qave", v.qave as u64),
        ("backlog", v.backlog as u64),
        ("forced_drop", v.forced_drop as u64),
        ("prob_drop", v.prob_drop as u64),
        ("pdrop", v.pdrop as u64),
        ("other", 0),
        ("forced_mark", v.forced_mark as u64),
        ("prob_mark", v.prob_mark as u64),
        ("packets", v.packetsin as u64),
        ("bytes", v.bytesin as u32 as u64),
    ] {
        j.insert(k.into(), json!(x));
    }
}

/// `gred_print_opt`.
fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Gred(GredOptions::Dump { setup, vqs }) = o else {
        return;
    };
    let _ = write!(s, "vqs {} default {} ", setup.dps, setup.def_dp);
    j.insert("dp_cnt".into(), json!(setup.dps));
    j.insert("dp_default".into(), json!(setup.def_dp));
    if setup.grio {
        s.push_str("grio ");
    }
    j.insert("grio".into(), json!(setup.grio));
    if let Some(l) = setup.limit {
        let _ = write!(s, "limit {} ", sprint_size(l));
        j.insert("limit".into(), json!(l));
    }
    print_flags(setup.flags, s, j);
    let mut arr = Vec::new();
    for v in vqs {
        let mut m = Map::new();
        let _ = write!(
            s,
            "\n vq {} prio {} limit {} min {} max {} ",
            v.dp,
            v.prio,
            sprint_size(v.limit),
            sprint_size(v.qth_min),
            sprint_size(v.qth_max)
        );
        m.insert("vq".into(), json!(v.dp));
        m.insert("prio".into(), json!(v.prio));
        m.insert("limit".into(), json!(v.limit));
        m.insert("min".into(), json!(v.qth_min));
        m.insert("max".into(), json!(v.qth_max));
        print_flags(v.flags as u8, s, &mut m);
        if flags.details {
            let p = v.max_p as f64 / 4_294_967_296.0;
            let _ = write!(
                s,
                "ewma {} probability {} Scell_log {} ",
                v.wlog,
                fmt_g(p, 6),
                v.scell_log
            );
            m.insert("ewma".into(), json!(v.wlog));
            m.insert("probability".into(), json!(p));
            m.insert("Scell_log".into(), json!(v.scell_log));
        }
        if flags.stats {
            print_stats(v, s, &mut m);
        }
        arr.push(Value::Object(m));
    }
    j.insert("vqs".into(), Value::Array(arr));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn setup_and_vq_as_tc_sends_them() {
        let QdiscOptions::Gred(GredOptions::Setup(o)) = parse(
            "gred",
            &words("setup vqs 10 default 1 grio limit 1000 ecn"),
            None,
        )
        .expect("parses") else {
            unreachable!()
        };
        assert_eq!(
            o,
            GredSetup {
                dps: 10,
                def_dp: 1,
                grio: true,
                flags: TC_RED_ECN,
                limit: Some(1000),
            }
        );
        // tdc 763a's VQ: 60 KiB, 15/25 KiB thresholds; max_P = 0.1 · 2^32 truncated.
        let QdiscOptions::Gred(GredOptions::Vq(v)) = parse(
            "gred",
            &words("limit 60KB min 15K max 25K burst 64 avpkt 1500 bandwidth 10Mbit DP 1 probability 0.1"),
            None,
        )
        .expect("parses") else {
            unreachable!()
        };
        assert_eq!(
            (v.dp, v.limit, v.qth_min, v.qth_max),
            (1, 61_440, 15_360, 25_600)
        );
        assert_eq!(v.max_p, 429_496_729);
        assert_eq!(v.flags, 0);
        assert_eq!(v.stab.len(), 256);
    }

    #[test]
    fn tcs_refusals() {
        let err = |s: &str| parse("gred", &words(s), None).expect_err("refused").msg;
        assert_eq!(
            err("setup vqs 17 default 1"),
            "GRED: only 16 VQs are currently supported"
        );
        assert_eq!(
            err("setup default 1 vqs 4"),
            "\"default\" must be defined after \"vqs\""
        );
        assert_eq!(
            err("setup vqs 4 default 4"),
            "\"default\" must be less than \"vqs\""
        );
        assert_eq!(err("setup vqs 4"), "Illegal gred setup parameters");
        assert_eq!(err("limit 1000 setup vqs 4 default 1"), "Illegal \"setup\"");
        assert_eq!(
            err("vq 1 limit 60K min 15K"),
            "Required parameter (vq, limit, min, max, avpkt) is missing"
        );
        assert!(err("vq 1 frob").starts_with("What is \"frob\"?"));
        assert_eq!(strtol_u8("7x"), 7);
        assert_eq!(strtol_u8("x"), 0);
    }
}
