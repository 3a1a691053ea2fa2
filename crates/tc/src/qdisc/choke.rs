//! `choke` (iproute2's `q_choke.c` with `tc_red.c`): limit, bandwidth (both required), min, max, burst in
//! packets, avpkt, probability, ecn; Floyd's defaults; RED's Wlog, Plog and idle table computed for
//! `avpkt`-byte packets; the counters under `-s`.

use super::red::{eval_idle_damping, print_flags_and_details};
use super::QdiscLang;
use crate::red::{eval_ewma, red_eval_p};
use crate::util::{get_rate, get_size, get_unsigned, scan_double};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::red::{RedOptions, TC_RED_ECN};
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "choke",
    words: &[
        "limit",
        "bandwidth",
        "ecn",
        "min",
        "max",
        "burst",
        "avpkt",
        "probability",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... choke limit PACKETS bandwidth KBPS [ecn]\n\t\t [ min PACKETS ] [ max PACKETS ] [ burst PACKETS ]";

/// `choke_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = RedOptions::default();
    let (mut burst, mut avpkt, mut probability, mut rate) = (0u32, 1000u32, 0.02f64, 0u64);
    while let Some(a) = it.next() {
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        match a {
            "limit" => o.limit = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "bandwidth" => {
                let v = it.value()?;
                rate = if v.contains('%') {
                    None
                } else {
                    get_rate(v).filter(|r| *r <= u32::MAX as u64)
                }
                .ok_or_else(illegal)?;
            }
            "ecn" => o.flags |= TC_RED_ECN,
            "min" => o.qth_min = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "max" => o.qth_max = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "burst" => burst = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "avpkt" => avpkt = get_size(it.value()?).ok_or_else(illegal)?,
            "probability" => probability = scan_double(it.value()?).ok_or_else(illegal)?,
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    if rate == 0 || o.limit == 0 {
        return Err(Failure::options(
            "Required parameter (bandwidth, limit) is missing",
        ));
    }
    if o.qth_max == 0 {
        o.qth_max = o.limit / 4;
    }
    if o.qth_min == 0 {
        o.qth_min = o.qth_max / 3;
    }
    if burst == 0 {
        burst = 2u32.wrapping_mul(o.qth_min).wrapping_add(o.qth_max) / 3;
    }
    if o.qth_max > o.limit {
        return Err(Failure::options("\"max\" is larger than \"limit\""));
    }
    if o.qth_min >= o.qth_max {
        return Err(Failure::options("\"min\" is not smaller than \"max\""));
    }
    let (min_b, max_b) = (o.qth_min.wrapping_mul(avpkt), o.qth_max.wrapping_mul(avpkt));
    o.wlog = eval_ewma(min_b, burst, avpkt, "CHOKE")?;
    o.plog = red_eval_p(min_b, max_b, probability)
        .ok_or_else(|| Failure::options("CHOKE: failed to calculate probability."))?;
    let (scell, stab) = eval_idle_damping(o.wlog, avpkt, rate)
        .ok_or_else(|| Failure::options("CHOKE: failed to calculate idle damping table."))?;
    o.scell_log = scell;
    o.stab = stab;
    o.max_p = (probability * 4_294_967_296.0) as i64 as u32;
    Ok(QdiscOptions::Choke(o))
}

/// `choke_print_opt`.
fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Choke(o) = o else { return };
    for (k, v) in [("limit", o.limit), ("min", o.qth_min), ("max", o.qth_max)] {
        let _ = write!(s, "{k} {v}p ");
        j.insert(k.into(), json!(v));
    }
    print_flags_and_details(o, flags, s, j);
}

/// `choke_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Choke(x) = x else { return };
    let _ = writeln!(
        out,
        "  marked {} early {} pdrop {} other {} matched {}",
        x.marked, x.early, x.pdrop, x.other, x.matched
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Choke(x) = x else { return };
    for (k, v) in [
        ("marked", x.marked),
        ("early", x.early),
        ("pdrop", x.pdrop),
        ("other", x.other),
        ("matched", x.matched),
    ] {
        m.insert(k.into(), json!(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn defaults_and_refusals_as_tc() {
        // limit 1000: max = 250, min = 83 (tdc 8937); burst (2·83 + 250)/3 = 138.
        let QdiscOptions::Choke(o) =
            parse("choke", &words("limit 1000 bandwidth 10000"), None).expect("parses")
        else {
            unreachable!()
        };
        assert_eq!((o.limit, o.qth_min, o.qth_max), (1000, 83, 250));
        let err = |s: &str| parse("choke", &words(s), None).expect_err("refused").msg;
        assert_eq!(
            err("limit 1000"),
            "Required parameter (bandwidth, limit) is missing"
        );
        assert_eq!(
            err("limit 100 bandwidth 10mbit max 200"),
            "\"max\" is larger than \"limit\""
        );
        assert_eq!(
            err("limit 100 bandwidth 10mbit min 50 max 50"),
            "\"min\" is not smaller than \"max\""
        );
    }
}
