//! `fq_pie` (iproute2's `q_fq_pie.c`): PIE's words (`pie.rs`) plus flows, quantum, memory_limit and
//! ecn_prob (below 100); only what was given is sent; the counters under `-s`.

use super::pie::{drop_zeros, parse_pie_word, print_flags, print_times};
use super::QdiscLang;
use crate::util::{get_size, get_unsigned, sprint_size};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::fq_pie::FqPieOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "fq_pie",
    words: &[
        "limit",
        "flows",
        "target",
        "tupdate",
        "alpha",
        "beta",
        "quantum",
        "memory_limit",
        "ecn_prob",
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

const USAGE: &str = "Usage: ... fq_pie [ limit PACKETS ] [ flows NUMBER ]\n                  [ target TIME ] [ tupdate TIME ]\n                  [ alpha NUMBER ] [ beta NUMBER ]\n                  [ quantum BYTES ] [ memory_limit BYTES ]\n                  [ ecn_prob PERCENTAGE ] [ [no]ecn ]\n                  [ [no]bytemode ] [ [no_]dq_rate_estimator ]";

/// `fq_pie_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = FqPieOptions::default();
    while let Some(a) = it.next() {
        if parse_pie_word(a, &mut it, &mut o.pie)? {
            continue;
        }
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        match a {
            "flows" => o.flows = Some(get_unsigned(it.value()?).ok_or_else(illegal)?),
            "quantum" => o.quantum = Some(get_size(it.value()?).ok_or_else(illegal)?),
            "memory_limit" => o.memory_limit = Some(get_size(it.value()?).ok_or_else(illegal)?),
            "ecn_prob" => {
                o.ecn_prob = Some(
                    get_unsigned(it.value()?)
                        .filter(|v| *v < 100)
                        .ok_or_else(illegal)?,
                )
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    drop_zeros(&mut o.pie);
    for v in [
        &mut o.flows,
        &mut o.quantum,
        &mut o.memory_limit,
        &mut o.ecn_prob,
    ] {
        *v = v.filter(|x| *x != 0);
    }
    Ok(QdiscOptions::FqPie(o))
}

/// `fq_pie_print_opt`.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::FqPie(o) = o else { return };
    if let Some(v) = o.pie.limit {
        let _ = write!(s, "limit {v}p ");
        j.insert("limit".into(), json!(v));
    }
    if let Some(v) = o.flows {
        let _ = write!(s, "flows {v} ");
        j.insert("flows".into(), json!(v));
    }
    print_times(&o.pie, s, j);
    for (k, v) in [("quantum", o.quantum), ("memory_limit", o.memory_limit)] {
        if let Some(v) = v {
            let _ = write!(s, "{k} {} ", sprint_size(v));
            j.insert(k.into(), json!(v));
        }
    }
    if let Some(v) = o.ecn_prob {
        let _ = write!(s, "ecn_prob {v} ");
        j.insert("ecn_prob".into(), json!(v));
    }
    print_flags(&o.pie, s, j);
}

/// `fq_pie_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::FqPie(x) = x else { return };
    let _ = writeln!(
        out,
        "  pkts_in {} overlimit {} overmemory {} dropped {} ecn_mark {}\n  new_flow_count {} new_flows_len {} old_flows_len {} memory_used {}",
        x.packets_in, x.overlimit, x.overmemory, x.dropped, x.ecn_mark,
        x.new_flow_count, x.new_flows_len, x.old_flows_len, x.memory_usage
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::FqPie(x) = x else { return };
    for (k, v) in [
        ("pkts_in", x.packets_in),
        ("overlimit", x.overlimit),
        ("overmemory", x.overmemory),
        ("dropped", x.dropped),
        ("ecn_mark", x.ecn_mark),
        ("new_flow_count", x.new_flow_count),
        ("new_flows_len", x.new_flows_len),
        ("old_flows_len", x.old_flows_len),
        ("memory_used", x.memory_usage),
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
    fn parsed_and_printed_as_q_fq_pie() {
        // q_fq_pie.c: times by get_time (µs), sizes by get_size, zeros not sent, the flags as u32.
        let QdiscOptions::FqPie(o) = parse(
            "fq_pie",
            &words("limit 500 flows 0 target 20ms tupdate 30ms alpha 4 beta 32 quantum 3kb memory_limit 1mb ecn_prob 25 noecn bytemode"),
            None,
        )
        .expect("parses") else {
            unreachable!()
        };
        let p = &o.pie;
        assert_eq!(
            (p.limit, o.flows, p.target, p.tupdate, p.alpha, p.beta),
            (
                Some(500),
                None,
                Some(20_000),
                Some(30_000),
                Some(4),
                Some(32)
            )
        );
        assert_eq!(
            (o.quantum, o.memory_limit, o.ecn_prob),
            (Some(3072), Some(1 << 20), Some(25))
        );
        assert_eq!(
            (p.ecn, p.bytemode, p.dq_rate_estimator),
            (Some(0), Some(1), None)
        );
        // fq_pie_print_opt: sizes by print_size, the flags only when set.
        let mut s = String::new();
        print(
            &QdiscOptions::FqPie(o),
            ShowFlags::default(),
            &mut s,
            &mut Map::new(),
        );
        assert_eq!(
            s,
            "limit 500p target 20ms tupdate 30ms alpha 4 beta 32 quantum 3Kb memory_limit 1Mb ecn_prob 25 bytemode "
        );
        let err = |s: &str| parse("fq_pie", &words(s), None).expect_err("refused").msg;
        assert_eq!(err("alpha 33"), "Illegal \"alpha\"");
        assert_eq!(err("ecn_prob 100"), "Illegal \"ecn_prob\"");
        assert_eq!(err("flows x"), "Illegal \"flows\"");
        assert!(err("gamma 1").starts_with("What is \"gamma\"?"));
    }
}
