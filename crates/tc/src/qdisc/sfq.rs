//! `sfq` (iproute2's `q_sfq.c`): limit, quantum, depth, divisor, flows, perturb, headdrop and the RED
//! options of SFQ's per-flow RED.

use super::QdiscLang;
use crate::red::{eval_ewma, red_eval_p, TC_RED_ECN, TC_RED_HARDDROP};
use crate::util::{fmt_g, get_int, get_size, get_u32, scan_double, sprint_size};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::sfq::{SfqOptions, SfqRed};
use tclab_core::qdisc::{DevEnv, QdiscOptions};

pub const LANG: QdiscLang = QdiscLang {
    name: "sfq",
    words: &[
        "limit",
        "perturb",
        "quantum",
        "divisor",
        "flows",
        "depth",
        "headdrop",
        "redflowlimit",
        "min",
        "max",
        "avpkt",
        "burst",
        "probability",
        "ecn",
        "harddrop",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    parse_sfq(args)
}

const SFQ_USAGE: &str = "Usage: ... sfq\t[ limit NUMBER ] [ perturb SECS ] [ quantum BYTES ]\n\t\t[ divisor NUMBER ] [ flows NUMBER] [ depth NUMBER ]\n\t\t[ headdrop ]\n\t\t[ redflowlimit BYTES ] [ min BYTES ] [ max BYTES ]\n\t\t[ avpkt BYTES ] [ burst PACKETS ] [ probability P ]\n\t\t[ ecn ] [ harddrop ]";

/// `sfq_parse_opt` (tc 6.1).
fn parse_sfq(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = SfqOptions::default();
    let mut red = SfqRed::default();
    let mut red_given = false;
    let (mut burst, mut avpkt, mut probability) = (0u32, 1000u32, 0.02f64);
    let ill = |what: &str| Failure::options(format!("Illegal \"{what}\""));
    while let Some(a) = it.next() {
        match a {
            // tc's message for a bad quantum really says "limit".
            "quantum" => o.quantum = get_size(it.value()?).ok_or_else(|| ill("limit"))?,
            "perturb" => o.perturb_period = get_int(it.value()?).ok_or_else(|| ill("perturb"))?,
            "limit" => {
                o.limit = get_u32(it.value()?, 0).ok_or_else(|| ill("limit"))?;
                if o.limit < 2 {
                    return Err(Failure::options("Illegal \"limit\", must be > 1"));
                }
            }
            "divisor" => o.divisor = get_u32(it.value()?, 0).ok_or_else(|| ill("divisor"))?,
            "flows" => o.flows = get_u32(it.value()?, 0).ok_or_else(|| ill("flows"))?,
            // …and for a bad depth, "flows".
            "depth" => o.depth = get_u32(it.value()?, 0).ok_or_else(|| ill("flows"))?,
            "headdrop" => o.headdrop = true,
            "redflowlimit" | "min" | "max" | "burst" | "avpkt" | "probability" | "ecn"
            | "harddrop" => {
                red_given = true;
                match a {
                    "redflowlimit" => {
                        red.limit = get_u32(it.value()?, 0).ok_or_else(|| ill("redflowlimit"))?
                    }
                    "min" => red.qth_min = get_u32(it.value()?, 0).ok_or_else(|| ill("min"))?,
                    "max" => red.qth_max = get_u32(it.value()?, 0).ok_or_else(|| ill("max"))?,
                    "burst" => burst = get_u32(it.value()?, 0).ok_or_else(|| ill("burst"))?,
                    "avpkt" => avpkt = get_size(it.value()?).ok_or_else(|| ill("avpkt"))?,
                    "probability" => {
                        probability = scan_double(it.value()?).ok_or_else(|| ill("probability"))?
                    }
                    "ecn" => red.flags |= TC_RED_ECN,
                    _ => red.flags |= TC_RED_HARDDROP,
                }
            }
            "help" => return Err(Failure::options(SFQ_USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{SFQ_USAGE}"))),
        }
    }
    if red_given {
        if red.limit == 0 {
            return Err(Failure::options(
                "Required parameter (redflowlimit) is missing",
            ));
        }
        // Sally Floyd's recommendations, as tc applies them.
        if red.qth_max == 0 {
            red.qth_max = red.limit / 4;
        }
        if red.qth_min == 0 {
            red.qth_min = red.qth_max / 3;
        }
        if burst == 0 {
            burst = (2 * red.qth_min as u64 + red.qth_max as u64)
                .checked_div(3 * avpkt as u64)
                .unwrap_or(0) as u32;
        }
        if red.qth_max > red.limit {
            return Err(Failure::options("\"max\" is larger than \"limit\""));
        }
        if red.qth_min >= red.qth_max {
            return Err(Failure::options("\"min\" is not smaller than \"max\""));
        }
        red.wlog = eval_ewma(red.qth_min, burst, avpkt, "SFQ")?;
        red.plog = red_eval_p(red.qth_min, red.qth_max, probability)
            .ok_or_else(|| Failure::options("SFQ: failed to calculate probability."))?;
        red.max_p = (probability * 4294967296.0).clamp(0.0, u32::MAX as f64) as u32;
        o.red = Some(red);
    }
    Ok(QdiscOptions::Sfq(o))
}

fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    if let QdiscOptions::Sfq(o) = o {
        sfq_options(o, flags, s, j);
    }
}

/// `sfq_print_opt` (tc 6.1).
fn sfq_options(o: &SfqOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let _ = write!(s, "limit {}p quantum {} ", o.limit, sprint_size(o.quantum));
    j.insert("limit".into(), json!(o.limit));
    j.insert("quantum".into(), json!(o.quantum));
    if o.depth != 0 {
        let _ = write!(s, "depth {} ", o.depth);
        j.insert("depth".into(), json!(o.depth));
    }
    if o.headdrop {
        s.push_str("headdrop ");
        j.insert("headdrop".into(), json!(true));
    }
    if flags.details {
        let _ = write!(s, "flows {} ", o.flows);
        j.insert("flows".into(), json!(o.flows));
    }
    let _ = write!(s, "divisor {} ", o.divisor);
    j.insert("divisor".into(), json!(o.divisor));
    if o.perturb_period != 0 {
        let _ = write!(s, "perturb {}sec ", o.perturb_period);
        j.insert("perturb".into(), json!(o.perturb_period));
    }
    if let Some(r) = o.red.filter(|r| r.qth_min != 0) {
        let prob = r.max_p as f64 / 4294967296.0;
        let _ = write!(
            s,
            "ewma {} min {} max {} probability {} ",
            r.wlog,
            sprint_size(r.qth_min),
            sprint_size(r.qth_max),
            fmt_g(prob, 6)
        );
        j.insert("ewma".into(), json!(r.wlog));
        j.insert("min".into(), json!(r.qth_min));
        j.insert("max".into(), json!(r.qth_max));
        j.insert("probability".into(), json!(prob));
        for (bit, name) in [
            (1u8, "ecn"),
            (2, "harddrop"),
            (4, "adaptive"),
            (8, "nodrop"),
        ] {
            if r.flags & bit != 0 {
                let _ = write!(s, "{name} ");
            }
            j.insert(name.into(), json!(r.flags & bit != 0));
        }
        if flags.stats {
            // tclab's SFQ does not run RED, so these counters stay at zero.
            s.push_str("\n  prob_mark 0 prob_mark_head 0 prob_drop 0");
            s.push_str("\n  forced_mark 0 forced_mark_head 0 forced_drop 0");
            for k in [
                "prob_mark",
                "prob_mark_head",
                "prob_drop",
                "forced_mark",
                "forced_mark_head",
                "forced_drop",
            ] {
                j.insert(k.into(), json!(0));
            }
        }
    }
}
