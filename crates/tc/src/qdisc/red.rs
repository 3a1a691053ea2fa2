//! `red` (iproute2's `q_red.c` with `tc_red.c`): limit, min, max, avpkt, burst, probability, bandwidth,
//! ecn, harddrop, nodrop, adaptive; Sally Floyd's defaults for the thresholds; Wlog, Plog, Scell_log and
//! the idle-damping table computed as tc computes them; the counters under `-s`.
//!
//! tc's notices on stderr (`RED: set bandwidth to 10Mbit`, `Burst … seems to be too large`) come first in
//! the command's stderr, as tc prints them while parsing. Not reproduced: a `bandwidth` given as a percentage of
//! the device's speed (there is no device speed offline: refused as tc refuses an unreadable one);
//! `qevent` blocks, parsed but not attached (see core's `red.rs`).

use super::QdiscLang;
use crate::red::{eval_ewma, red_eval_p};
use crate::util::{
    calc_xmittime, fmt_g, get_rate, get_size, get_unsigned, scan_double, sprint_size,
};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::red::{
    RedOptions, TC_RED_ADAPTATIVE, TC_RED_ECN, TC_RED_HARDDROP, TC_RED_NODROP,
};
use tclab_core::qdisc::{DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "red",
    words: &[
        "limit",
        "min",
        "max",
        "burst",
        "avpkt",
        "probability",
        "bandwidth",
        "ecn",
        "harddrop",
        "nodrop",
        "adaptive",
        "adaptative",
        "qevent",
    ],
    parse,
    print,
    xstats: Some(print_xstats),
    xstats_json: Some(xstats_json),
    class: None,
};

const USAGE: &str = "Usage: ... red\tlimit BYTES [min BYTES] [max BYTES] avpkt BYTES [burst PACKETS]\n\t\t[adaptive] [probability PROBABILITY] [bandwidth KBPS]\n\t\t[ecn] [harddrop] [nodrop]\n\t\t[qevent early_drop block IDX] [qevent mark block IDX]";

/// `tc_red_eval_idle_damping`: the table of how many halvings an idle time amounts to, and its cell
/// size as a shift (computed in psched ticks, as tc computes it).
pub(crate) fn eval_idle_damping(wlog: u8, avpkt: u32, bps: u64) -> Option<(u8, Vec<u8>)> {
    let xmit_time = calc_xmittime(bps, avpkt) as f64;
    let lw = -(1.0 - 1.0 / (1u64 << wlog) as f64).ln() / xmit_time;
    let maxtime = 31.0 / lw;
    // C's `1 << clog` is an int: at 31 it is negative, which ends the search there.
    let clog = (0..32u8).find(|c| maxtime / (1i32.wrapping_shl(*c as u32) as f64) < 512.0)?;
    let mut sbuf = vec![0u8; 256];
    for (i, s) in sbuf.iter_mut().enumerate().take(255).skip(1) {
        // `(i << clog) * lW` in int arithmetic, stored in a u8 as x86-64 converts a double: through a
        // 32-bit integer (0x80000000 when out of range), keeping the low byte.
        let v = (i as i32).wrapping_shl(clog as u32) as f64 * lw;
        let as_int = if v > -2_147_483_649.0 && v < 2_147_483_648.0 {
            v as i32
        } else {
            i32::MIN
        };
        *s = (as_int as u8).min(31);
    }
    sbuf[255] = 31;
    Some((clog, sbuf))
}

/// `red_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = RedOptions::default();
    let (mut burst, mut avpkt, mut probability, mut rate) = (0u32, 0u32, 0.02f64, 0u64);
    while let Some(a) = it.next() {
        let illegal = || Failure::options(format!("Illegal \"{a}\""));
        match a {
            "limit" => o.limit = get_size(it.value()?).ok_or_else(illegal)?,
            "min" => o.qth_min = get_size(it.value()?).ok_or_else(illegal)?,
            "max" => o.qth_max = get_size(it.value()?).ok_or_else(illegal)?,
            "burst" => burst = get_unsigned(it.value()?).ok_or_else(illegal)?,
            "avpkt" => avpkt = get_size(it.value()?).ok_or_else(illegal)?,
            "probability" => probability = scan_double(it.value()?).ok_or_else(illegal)?,
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
            "harddrop" => o.flags |= TC_RED_HARDDROP,
            "nodrop" => o.flags |= TC_RED_NODROP,
            "adaptative" | "adaptive" => o.flags |= TC_RED_ADAPTATIVE,
            w if crate::util::matches(w, "qevent") => {
                // `qevent early_drop|mark block IDX`.
                let which = it.value()?;
                if !matches!(which, "early_drop" | "mark") {
                    return Err(Failure::options(format!("Unknown qevent `{which}'")));
                }
                if it.value()? != "block" {
                    return Err(Failure::options(format!(
                        "Unknown argument of qevent `{which}'"
                    )));
                }
                get_unsigned(it.value()?)
                    .ok_or_else(|| Failure::options("Illegal block index in qevent".to_string()))?;
            }
            "help" => return Err(Failure::options(USAGE)),
            _ => return Err(Failure::options(format!("What is \"{a}\"?\n{USAGE}"))),
        }
    }
    if o.limit == 0 || avpkt == 0 {
        return Err(Failure::options(
            "RED: Required parameter (limit, avpkt) is missing",
        ));
    }
    // Sally Floyd's recommendations (http://www.icir.org/floyd/REDparameters.txt).
    if o.qth_max == 0 {
        o.qth_max = if o.qth_min != 0 {
            o.qth_min.wrapping_mul(3)
        } else {
            o.limit / 4
        };
    }
    if o.qth_min == 0 {
        o.qth_min = o.qth_max / 3;
    }
    let k = red_constants(o.qth_min, o.qth_max, burst, avpkt, probability, rate, "RED")?;
    (o.wlog, o.plog, o.scell_log, o.stab, o.max_p) = (k.wlog, k.plog, k.scell_log, k.stab, k.max_p);
    Ok(QdiscOptions::Red(o))
}

/// What tc derives from RED's thresholds in bytes: Wlog, Plog, Scell_log with the idle-damping table,
/// and max_P.
pub(crate) struct RedConstants {
    pub wlog: u8,
    pub plog: u8,
    pub scell_log: u8,
    pub stab: Vec<u8>,
    pub max_p: u32,
}

/// The constants as `red_parse_opt` and `gred_parse_opt` compute them, failures and notices worded for
/// `who` (RED, GRED): `burst` 0 takes tc's (2·min + max)/(3·avpkt), `rate` 0 (bytes/s) 10 Mbit/s, each
/// default announced on stderr as tc announces it, and a Wlog of 10 or more warned about.
pub(crate) fn red_constants(
    qth_min: u32,
    qth_max: u32,
    mut burst: u32,
    avpkt: u32,
    probability: f64,
    mut rate: u64,
    who: &str,
) -> Result<RedConstants> {
    if burst == 0 {
        burst = (2u32.wrapping_mul(qth_min).wrapping_add(qth_max)) / (3 * avpkt);
        // q_gred.c says so; q_red.c does not.
        if who == "GRED" {
            crate::notice(&format!("GRED: set burst to {burst}"));
        }
    }
    if rate == 0 {
        rate = 10_000_000 / 8;
        crate::notice(&format!("{who}: set bandwidth to 10Mbit"));
    }
    let wlog = eval_ewma(qth_min, burst, avpkt, who)?;
    if wlog >= 10 {
        crate::notice(&format!(
            "{who}: WARNING. Burst {burst} seems to be too large."
        ));
    }
    let plog = red_eval_p(qth_min, qth_max, probability)
        .ok_or_else(|| Failure::options(format!("{who}: failed to calculate probability.")))?;
    let (scell_log, stab) = eval_idle_damping(wlog, avpkt, rate).ok_or_else(|| {
        Failure::options(format!("{who}: failed to calculate idle damping table."))
    })?;
    Ok(RedConstants {
        wlog,
        plog,
        scell_log,
        stab,
        // `max_P = probability * pow(2, 32)`, converted as x86-64 converts it (through 64 bits).
        max_p: (probability * 4_294_967_296.0) as i64 as u32,
    })
}

/// `tc_red_print_flags`.
pub(crate) fn print_flags(flags: u8, s: &mut String, j: &mut Map<String, Value>) {
    for (bit, name) in [
        (TC_RED_ECN, "ecn"),
        (TC_RED_HARDDROP, "harddrop"),
        (TC_RED_ADAPTATIVE, "adaptive"),
        (TC_RED_NODROP, "nodrop"),
    ] {
        let on = flags & bit != 0;
        if on {
            let _ = write!(s, "{name} ");
        }
        j.insert(name.into(), json!(on));
    }
}

/// `red_print_opt`.
fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Red(o) = o else { return };
    for (k, v) in [("limit", o.limit), ("min", o.qth_min), ("max", o.qth_max)] {
        let _ = write!(s, "{k} {} ", sprint_size(v));
        j.insert(k.into(), json!(v));
    }
    print_flags_and_details(o, flags, s, j);
}

/// The part red and choke print alike after the thresholds: the flags, then under `-d` the EWMA
/// constant, the probability (or Plog) and Scell_log.
pub fn print_flags_and_details(
    o: &RedOptions,
    flags: ShowFlags,
    s: &mut String,
    j: &mut Map<String, Value>,
) {
    print_flags(o.flags, s, j);
    if flags.details {
        let _ = write!(s, "ewma {} ", o.wlog);
        j.insert("ewma".into(), json!(o.wlog));
        if o.max_p != 0 {
            let p = o.max_p as f64 / 4_294_967_296.0;
            let _ = write!(s, "probability {} ", fmt_g(p, 6));
            j.insert("probability".into(), json!(p));
        } else {
            let _ = write!(s, "Plog {} ", o.plog);
            j.insert("Plog".into(), json!(o.plog));
        }
        let _ = write!(s, "Scell_log {}", o.scell_log);
        j.insert("Scell_log".into(), json!(o.scell_log));
    }
}

/// `red_print_xstats`.
fn print_xstats(x: &Xstats, out: &mut String) {
    let Xstats::Red(x) = x else { return };
    let _ = writeln!(
        out,
        "  marked {} early {} pdrop {} other {} ",
        x.marked, x.early, x.pdrop, x.other
    );
}

fn xstats_json(x: &Xstats, m: &mut Map<String, Value>) {
    let Xstats::Red(x) = x else { return };
    m.insert("marked".into(), json!(x.marked));
    m.insert("early".into(), json!(x.early));
    m.insert("pdrop".into(), json!(x.pdrop));
    m.insert("other".into(), json!(x.other));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn floyds_defaults_and_tcs_constants() {
        // tdc's line: limit 1M avpkt 1500 min 100K max 300K → burst (2·102400 + 307200)/(3·1500) = 113;
        // tc_red_eval_ewma: a = 113 + 1 − 102400/1500 = 45.7, and (1 − (1−W)^113)/W first reaches it at
        // W = 1/64 (53.2; 1/32 gives 31.1) → Wlog 6; tc_red_eval_P(102400, 307200, 0.02):
        // 0.02/204800 doubled until above 1 → 24 doublings; max_P = 0.02 · 2^32 = 85899345.
        let QdiscOptions::Red(o) =
            parse("red", &words("limit 1M avpkt 1500 min 100K max 300K"), None).expect("parses")
        else {
            unreachable!()
        };
        assert_eq!((o.limit, o.qth_min, o.qth_max), (1 << 20, 102_400, 307_200));
        assert_eq!((o.wlog, o.plog), (6, 24));
        assert_eq!(o.max_p, 85_899_345);
        assert_eq!(o.stab.len(), 256);
        assert_eq!((o.stab[0], o.stab[255]), (0, 31));
        // Without min and max: max = limit/4, min = max/3.
        let QdiscOptions::Red(o) =
            parse("red", &words("limit 400000 avpkt 1000"), None).expect("parses")
        else {
            unreachable!()
        };
        assert_eq!((o.qth_min, o.qth_max), (33_333, 100_000));
    }

    #[test]
    fn a_huge_burst_takes_tcs_last_cell_size() {
        // burst 100000 gives Wlog 28; no cell size up to 2^30 brings 31/lW under 512 cells, and tc's
        // `1 << 31` is a negative int, which ends its search at 31 instead of failing.
        let QdiscOptions::Red(o) =
            parse("red", &words("limit 400000 avpkt 1000 burst 100000"), None)
                .expect("tc sends it (the kernel then refuses Wlog 28)")
        else {
            unreachable!()
        };
        assert_eq!((o.wlog, o.scell_log), (28, 31));
    }

    #[test]
    fn tcs_refusals() {
        let err = |s: &str| parse("red", &words(s), None).expect_err("refused").msg;
        assert_eq!(
            err("min 100K max 300K"),
            "RED: Required parameter (limit, avpkt) is missing"
        );
        // min > max: tc's own burst (2·300K + 100K)/4500 = 159 is too small for min/avpkt = 204.8 …
        assert_eq!(
            err("limit 1M avpkt 1500 min 300K max 100K"),
            "tc_red_eval_ewma() burst 159 is too small ? Try burst 205\nRED: failed to calculate EWMA constant."
        );
        // … and with a burst that fits, the probability cannot be computed.
        assert_eq!(
            err("limit 1M avpkt 1500 min 300K max 100K burst 300"),
            "RED: failed to calculate probability."
        );
        assert!(err("limit 1M avpkt 1500 frob").starts_with("What is \"frob\"?"));
        assert_eq!(err("limit 1M avpkt x"), "Illegal \"avpkt\"");
    }
}
