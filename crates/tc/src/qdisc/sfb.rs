//! `sfb` (iproute2's `q_sfb.c`): rehash and db in ms, limit, max and target in packets, increment and
//! decrement as probabilities, penalty_rate and penalty_burst; tc's defaults (max from target or target
//! from max when one is given); the counters and the bins' summary under `-s`.

use super::QdiscLang;
use crate::util::{fmt_g, get_u32, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::sfb::{SfbOptions, MAX_PROB};
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "sfb",
    words: &[
        "rehash",
        "db",
        "limit",
        "max",
        "target",
        "increment",
        "decrement",
        "penalty_rate",
        "penalty_burst",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... sfb [ rehash SECS ] [ db SECS ]\n\t    [ limit PACKETS ] [ max PACKETS ] [ target PACKETS ]\n\t    [ increment FLOAT ] [ decrement FLOAT ]\n\t    [ penalty_rate PPS ] [ penalty_burst PACKETS ]";

/// `get_prob`: a probability in [0, 1] as Q0.16, rounded; `strtod` accepts a numeric prefix.
fn get_prob(s: &str) -> Option<u32> {
    let d = crate::util::scan_double(s)?;
    if !(0.0..=1.0).contains(&d) {
        return None;
    }
    Some((d * MAX_PROB as f64 + 0.5) as u32)
}

/// `sfb_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = SfbOptions {
        rehash_interval: 600 * 1000,
        warmup_time: 60 * 1000,
        penalty_rate: 10,
        penalty_burst: 20,
        increment: (MAX_PROB + 1000) / 2000,
        decrement: (MAX_PROB + 10000) / 20000,
        ..Default::default()
    };
    while let Some(a) = it.next() {
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        let field = match a {
            "rehash" => &mut o.rehash_interval,
            "db" => &mut o.warmup_time,
            "limit" => &mut o.limit,
            "max" => &mut o.max,
            "target" => &mut o.bin_size,
            "penalty_rate" => &mut o.penalty_rate,
            "penalty_burst" => &mut o.penalty_burst,
            "increment" => {
                o.increment = get_prob(it.value()?).ok_or_else(illegal)?;
                continue;
            }
            "decrement" => {
                o.decrement = get_prob(it.value()?).ok_or_else(illegal)?;
                continue;
            }
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        };
        *field = get_u32(it.value()?, 0).ok_or_else(illegal)?;
    }
    if o.max == 0 {
        o.max = if o.bin_size >= 1 {
            o.bin_size.wrapping_mul(5).wrapping_add(1) / 4
        } else {
            25
        };
    }
    if o.bin_size == 0 {
        o.bin_size = o.max.wrapping_mul(4).wrapping_add(3) / 5;
    }
    Ok(QdiscOptions::Sfb(o))
}

/// `sfb_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Sfb(o) = o else { return };
    // tc multiplies the ms by 1000 in 32 bits.
    let (rehash, db) = (
        o.rehash_interval.wrapping_mul(1000),
        o.warmup_time.wrapping_mul(1000),
    );
    let _ = write!(
        s,
        "rehash {} db {} limit {}p max {}p target {}p increment {} decrement {} penalty_rate {}pps penalty_burst {}p ",
        sprint_time(rehash),
        sprint_time(db),
        o.limit,
        o.max,
        o.bin_size,
        fmt_g(o.increment as f64 / MAX_PROB as f64, 6),
        fmt_g(o.decrement as f64 / MAX_PROB as f64, 6),
        o.penalty_rate,
        o.penalty_burst
    );
    j.insert("rehash".into(), json!(rehash));
    j.insert("db".into(), json!(db));
    j.insert("limit".into(), json!(o.limit));
    j.insert("max".into(), json!(o.max));
    j.insert("target".into(), json!(o.bin_size));
    j.insert(
        "increment".into(),
        json!(o.increment as f64 / MAX_PROB as f64),
    );
    j.insert(
        "decrement".into(),
        json!(o.decrement as f64 / MAX_PROB as f64),
    );
    j.insert("penalty_rate".into(), json!(o.penalty_rate));
    j.insert("penalty_burst".into(), json!(o.penalty_burst));
}

/// `sfb_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Sfb(x) = x else { return };
    let _ = writeln!(
        out,
        "  earlydrop {} penaltydrop {} bucketdrop {} queuedrop {} childdrop {} marked {}\n  maxqlen {} maxprob {} avgprob {}",
        x.earlydrop,
        x.penaltydrop,
        x.bucketdrop,
        x.queuedrop,
        x.childdrop,
        x.marked,
        x.maxqlen,
        fmt_g(x.maxprob as f64 / MAX_PROB as f64, 6),
        fmt_g(x.avgprob as f64 / MAX_PROB as f64, 6),
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Sfb(x) = x else { return };
    for (k, v) in [
        ("earlydrop", x.earlydrop),
        ("penaltydrop", x.penaltydrop),
        ("bucketdrop", x.bucketdrop),
        ("queuedrop", x.queuedrop),
        ("childdrop", x.childdrop),
        ("marked", x.marked),
        ("maxqlen", x.maxqlen),
    ] {
        m.insert(k.into(), json!(v));
    }
    m.insert("maxprob".into(), json!(x.maxprob as f64 / MAX_PROB as f64));
    m.insert("avgprob".into(), json!(x.avgprob as f64 / MAX_PROB as f64));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &str) -> SfbOptions {
        let w: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        match parse("sfb", &w, None).expect("parses") {
            QdiscOptions::Sfb(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn tcs_defaults_and_derived_thresholds() {
        // q_sfb.c: increment (65535 + 1000)/2000 = 33, decrement (65535 + 10000)/20000 = 3; without max
        // or target, max 25 and target (25·4 + 3)/5 = 20.
        let o = opts("");
        assert_eq!(
            (o.increment, o.decrement, o.max, o.bin_size),
            (33, 3, 25, 20)
        );
        assert_eq!((o.rehash_interval, o.warmup_time), (600_000, 60_000));
        // target 100 → max (100·5 + 1)/4 = 125; max 100 → target (400 + 3)/5 = 80.
        assert_eq!(opts("target 100").max, 125);
        assert_eq!(opts("max 100").bin_size, 80);
        // 0.1 → 0.1·65535 + 0.5 = 6554.
        assert_eq!(opts("increment 0.1").increment, 6554);
        let err = |s: &str| {
            let w: Vec<String> = s.split_whitespace().map(str::to_string).collect();
            parse("sfb", &w, None).expect_err("refused").msg
        };
        assert_eq!(err("increment 1.5"), "Illegal \"increment\"");
        assert_eq!(err("limit -1"), "Illegal \"limit\"");
        assert!(err("frob").starts_with("What is \"frob\"?"));
    }
}
