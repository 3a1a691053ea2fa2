//! `pie` (iproute2's `q_pie.c`): limit, target, tupdate, alpha, beta (at most 32), ecn | noecn,
//! bytemode | nobytemode, dq_rate_estimator | no_dq_rate_estimator; only what was given is sent; the
//! probability, delay and counters under `-s`.

use super::QdiscLang;
use crate::util::{fmt_g, get_time, get_unsigned, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::pie::PieOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "pie",
    words: &[
        "limit",
        "target",
        "tupdate",
        "alpha",
        "beta",
        "ecn",
        "noecn",
        "bytemode",
        "nobytemode",
        "dq_rate_estimator",
        "no_dq_rate_estimator",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... pie [ limit PACKETS ] [ target TIME ]\n               [ tupdate TIME ] [ alpha ALPHA ] [ beta BETA ]\n               [ bytemode | nobytemode ] [ ecn | noecn ]\n               [ dq_rate_estimator | no_dq_rate_estimator ]";

/// `ALPHA_MAX`, `BETA_MAX`.
const ALPHA_BETA_MAX: u32 = 32;

/// One of PIE's words at the cursor (`a` just read), into `o`: `Ok(true)` if it was PIE's.
pub(crate) fn parse_pie_word(a: &str, it: &mut crate::Cur, o: &mut PieOptions) -> Result<bool> {
    let illegal = || Failure::options(format!("Illegal \"{a}\""));
    match a {
        "limit" => o.limit = Some(get_unsigned(it.value()?).ok_or_else(illegal)?),
        "target" => o.target = Some(get_time(it.value()?).ok_or_else(illegal)?),
        "tupdate" => o.tupdate = Some(get_time(it.value()?).ok_or_else(illegal)?),
        "alpha" | "beta" => {
            let v = get_unsigned(it.value()?)
                .filter(|v| *v <= ALPHA_BETA_MAX)
                .ok_or_else(illegal)?;
            if a == "alpha" {
                o.alpha = Some(v);
            } else {
                o.beta = Some(v);
            }
        }
        "ecn" => o.ecn = Some(1),
        "noecn" => o.ecn = Some(0),
        "bytemode" => o.bytemode = Some(1),
        "nobytemode" => o.bytemode = Some(0),
        "dq_rate_estimator" => o.dq_rate_estimator = Some(1),
        "no_dq_rate_estimator" => o.dq_rate_estimator = Some(0),
        _ => return Ok(false),
    }
    Ok(true)
}

/// tc sends no zero value.
pub(crate) fn drop_zeros(o: &mut PieOptions) {
    for v in [
        &mut o.limit,
        &mut o.target,
        &mut o.tupdate,
        &mut o.alpha,
        &mut o.beta,
    ] {
        *v = v.filter(|x| *x != 0);
    }
}

/// `pie_parse_opt` (tc 6.1): zero values are not sent.
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = PieOptions::default();
    while let Some(a) = it.next() {
        if parse_pie_word(a, &mut it, &mut o)? {
            continue;
        }
        match a {
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    drop_zeros(&mut o);
    Ok(QdiscOptions::Pie(o))
}

/// `pie_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Pie(o) = o else { return };
    if let Some(v) = o.limit {
        let _ = write!(s, "limit {v}p ");
        j.insert("limit".into(), json!(v));
    }
    print_times(o, s, j);
    print_flags(o, s, j);
}

/// target, tupdate, alpha, beta as pie and fq_pie print them.
pub(crate) fn print_times(o: &PieOptions, s: &mut String, j: &mut Map<String, Value>) {
    for (k, v) in [("target", o.target), ("tupdate", o.tupdate)] {
        if let Some(v) = v {
            let _ = write!(s, "{k} {} ", sprint_time(v));
            j.insert(k.into(), json!(v));
        }
    }
    for (k, v) in [("alpha", o.alpha), ("beta", o.beta)] {
        if let Some(v) = v {
            let _ = write!(s, "{k} {v} ");
            j.insert(k.into(), json!(v));
        }
    }
}

/// ecn, bytemode, dq_rate_estimator, printed when on.
pub(crate) fn print_flags(o: &PieOptions, s: &mut String, j: &mut Map<String, Value>) {
    for (k, v) in [
        ("ecn", o.ecn),
        ("bytemode", o.bytemode),
        ("dq_rate_estimator", o.dq_rate_estimator),
    ] {
        if v.is_some_and(|v| v != 0) {
            let _ = write!(s, "{k} ");
            j.insert(k.into(), json!(true));
        }
    }
}

/// `pie_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Pie(x) = x else { return };
    let _ = write!(
        out,
        "  prob {} delay {}",
        fmt_g(x.prob as f64 / u64::MAX as f64, 6),
        sprint_time(x.delay)
    );
    if x.dq_rate_estimating {
        let _ = write!(out, " avg_dq_rate {}", x.avg_dq_rate);
    }
    let _ = writeln!(
        out,
        "\n  pkts_in {} overlimit {} dropped {} maxq {} ecn_mark {}",
        x.packets_in, x.overlimit, x.dropped, x.maxq, x.ecn_mark
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Pie(x) = x else { return };
    m.insert("prob".into(), json!(x.prob as f64 / u64::MAX as f64));
    m.insert("delay".into(), json!(x.delay));
    if x.dq_rate_estimating {
        m.insert("avg_dq_rate".into(), json!(x.avg_dq_rate));
    }
    for (k, v) in [
        ("pkts_in", x.packets_in),
        ("overlimit", x.overlimit),
        ("dropped", x.dropped),
        ("maxq", x.maxq),
        ("ecn_mark", x.ecn_mark),
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
    fn parsed_as_q_pie_parses() {
        let QdiscOptions::Pie(o) = parse(
            "pie",
            &words("limit 500 target 20ms tupdate 30ms alpha 4 beta 32 ecn nobytemode"),
            None,
        )
        .expect("parses") else {
            unreachable!()
        };
        assert_eq!(
            (o.limit, o.target, o.tupdate, o.alpha, o.beta),
            (Some(500), Some(20_000), Some(30_000), Some(4), Some(32))
        );
        assert_eq!(
            (o.ecn, o.bytemode, o.dq_rate_estimator),
            (Some(1), Some(0), None)
        );
        let err = |s: &str| parse("pie", &words(s), None).expect_err("refused").msg;
        assert_eq!(err("alpha 33"), "Illegal \"alpha\"");
        assert_eq!(err("beta x"), "Illegal \"beta\"");
        assert!(err("gamma 1").starts_with("What is \"gamma\"?"));
    }
}
