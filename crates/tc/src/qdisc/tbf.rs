//! `tbf` (iproute2's `q_tbf.c`): rate, burst, limit or latency, peakrate and mtu, overhead, linklayer.

use super::{linklayer, QdiscLang};
use crate::util::{
    calc_xmitsize, calc_xmittime, get_rate, get_size, get_size_and_cell, get_time, get_u16,
    matches, sprint_rate, sprint_size, sprint_time, tick2time,
};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::tbf::TbfOptions;
use tclab_core::qdisc::{DevEnv, QdiscOptions};
use tclab_core::units::{LinkLayer, RateSpec};

pub const LANG: QdiscLang = QdiscLang {
    name: "tbf",
    words: &[
        "limit",
        "burst",
        "buffer",
        "maxburst",
        "mtu",
        "minburst",
        "mpu",
        "rate",
        "peakrate",
        "latency",
        "overhead",
        "linklayer",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: None,
};

fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    parse_tbf(args)
}

const TBF_USAGE: &str = "Usage: ... tbf limit BYTES burst BYTES[/BYTES] rate KBPS [ mtu BYTES[/BYTES] ]\n\t[ peakrate KBPS ] [ latency TIME ] [ overhead BYTES ] [ linklayer TYPE ]";

fn tbf_illegal(name: &str, v: &str) -> Failure {
    Failure::options(format!("tbf: illegal value for \"{name}\": \"{v}\""))
}

fn tbf_dup(what: &str) -> Failure {
    Failure::options(format!("tbf: duplicate \"{what}\" specification"))
}

/// `tbf_parse_opt`.
fn parse_tbf(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let (mut limit, mut latency, mut buffer, mut mtu, mut mpu) = (0u32, 0u32, 0u32, 0u32, 0u32);
    let (mut rate, mut prate, mut overhead) = (0u64, 0u64, 0u16);
    let mut ll = LinkLayer::Ethernet;
    while let Some(a) = it.next() {
        if matches(a, "limit") {
            let v = it.value()?;
            if limit != 0 {
                return Err(tbf_dup("limit"));
            }
            if latency != 0 {
                return Err(Failure::options(
                    "tbf: specifying both \"latency\" and \"limit\" is not allowed",
                ));
            }
            limit = get_size(v).ok_or_else(|| tbf_illegal("limit", v))?;
        } else if matches(a, "latency") {
            let v = it.value()?;
            if latency != 0 {
                return Err(tbf_dup("latency"));
            }
            if limit != 0 {
                return Err(Failure::options(
                    "tbf: specifying both \"limit\" and \"/latency\" is not allowed",
                ));
            }
            latency = get_time(v).ok_or_else(|| tbf_illegal("latency", v))?;
        } else if matches(a, "burst") || a == "buffer" || a == "maxburst" {
            let v = it.value()?;
            if buffer != 0 {
                return Err(tbf_dup("buffer/burst/maxburst"));
            }
            buffer = get_size_and_cell(v).ok_or_else(|| tbf_illegal(a, v))?.0;
        } else if a == "mtu" || a == "minburst" {
            let v = it.value()?;
            if mtu != 0 {
                return Err(tbf_dup("mtu/minburst"));
            }
            mtu = get_size_and_cell(v).ok_or_else(|| tbf_illegal(a, v))?.0;
        } else if a == "mpu" {
            let v = it.value()?;
            if mpu != 0 {
                return Err(tbf_dup("mpu"));
            }
            mpu = get_size(v).ok_or_else(|| tbf_illegal("mpu", v))?;
        } else if a == "rate" {
            let v = it.value()?;
            if rate != 0 {
                return Err(tbf_dup("rate"));
            }
            rate = get_rate(v).ok_or_else(|| tbf_illegal("rate", v))?;
        } else if matches(a, "peakrate") {
            let v = it.value()?;
            if prate != 0 {
                return Err(tbf_dup("peakrate"));
            }
            prate = get_rate(v).ok_or_else(|| tbf_illegal("peakrate", v))?;
        } else if matches(a, "overhead") {
            let v = it.value()?;
            if overhead != 0 {
                return Err(tbf_dup("overhead"));
            }
            overhead = get_u16(v, 10).ok_or_else(|| tbf_illegal("overhead", v))?;
        } else if matches(a, "linklayer") {
            let v = it.value()?;
            ll = linklayer(v).ok_or_else(|| tbf_illegal("linklayer", v))?;
        } else if a == "help" {
            return Err(Failure::options(TBF_USAGE));
        } else {
            return Err(Failure::options(format!(
                "tbf: unknown parameter \"{a}\"\n{TBF_USAGE}"
            )));
        }
    }
    let mut problems = Vec::new();
    if rate == 0 {
        problems.push("tbf: the \"rate\" parameter is mandatory.");
    }
    if buffer == 0 {
        problems.push("tbf: the \"burst\" parameter is mandatory.");
    }
    if prate != 0 && mtu == 0 {
        problems.push("tbf: when \"peakrate\" is specified, \"mtu\" must also be specified.");
    }
    if limit == 0 && latency == 0 {
        problems.push("tbf: either \"limit\" or \"latency\" is required.");
    }
    if !problems.is_empty() {
        return Err(Failure::options(format!(
            "{}\n{TBF_USAGE}",
            problems.join("\n")
        )));
    }
    if limit == 0 {
        let mut lim = rate as f64 * latency as f64 / 1e6 + buffer as f64;
        if prate != 0 {
            let lim2 = prate as f64 * latency as f64 / 1e6 + mtu as f64;
            lim = lim.min(lim2);
        }
        limit = lim.min(u32::MAX as f64) as u32;
    }
    let mpu16 = mpu.min(u16::MAX as u32) as u16;
    let spec = |r: u64| RateSpec {
        rate: r,
        overhead,
        mpu: mpu16,
        linklayer: ll,
    };
    Ok(QdiscOptions::Tbf(TbfOptions {
        rate: spec(rate),
        peakrate: if prate != 0 {
            spec(prate)
        } else {
            RateSpec::default()
        },
        limit,
        buffer: calc_xmittime(rate, buffer),
        mtu: if prate != 0 {
            calc_xmittime(prate, mtu)
        } else {
            0
        },
        burst: Some(buffer),
        pburst: (prate != 0).then_some(mtu),
    }))
}

/// `tbf_print_opt` (tc 6.1).
fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Tbf(t) = o else { return };
    let rate = t.rate.rate;
    let _ = write!(s, "rate {} ", sprint_rate(rate));
    j.insert("rate".into(), json!(rate));
    let buffer = calc_xmitsize(rate, t.buffer);
    if flags.details {
        let _ = write!(
            s,
            "burst {}/1 mpu {} ",
            sprint_size(buffer),
            sprint_size(t.rate.mpu as u32)
        );
        j.insert("burst".into(), json!(format!("{}/1", sprint_size(buffer))));
        j.insert("mpu".into(), json!(t.rate.mpu));
    } else {
        let _ = write!(s, "burst {} ", sprint_size(buffer));
        j.insert("burst".into(), json!(buffer));
    }
    let prate = t.peakrate.rate;
    if prate != 0 {
        let _ = write!(s, "peakrate {} ", sprint_rate(prate));
        if t.mtu != 0 || t.peakrate.mpu != 0 {
            let mtu = calc_xmitsize(prate, t.mtu);
            if flags.details {
                let _ = write!(
                    s,
                    "mtu {}/1 mpu {} ",
                    sprint_size(mtu),
                    sprint_size(t.peakrate.mpu as u32)
                );
                j.insert("mtu".into(), json!(format!("{}/1", sprint_size(mtu))));
            } else {
                let _ = write!(s, "minburst {} ", sprint_size(mtu));
                j.insert("minburst".into(), json!(mtu));
            }
        }
    }
    let mut latency = 1e6 * (t.limit as f64 / rate as f64) - tick2time(t.buffer) as f64;
    if prate != 0 {
        let lat2 = 1e6 * (t.limit as f64 / prate as f64) - tick2time(t.mtu) as f64;
        latency = latency.max(lat2);
    }
    if latency >= 0.0 {
        // `sprint_time(__u32)` takes the double as C converts it on x86-64: through a 64-bit integer,
        // then its low 32 bits (a latency past 2^32 µs wraps, as tc prints it).
        let _ = write!(s, "lat {} ", sprint_time(latency as u64 as u32));
        j.insert("lat".into(), json!(latency as u64));
    }
    if flags.raw || latency < 0.0 {
        let _ = write!(s, "limit {} ", sprint_size(t.limit));
        j.insert("limit".into(), json!(t.limit));
    }
    if t.rate.overhead != 0 {
        let _ = write!(s, "overhead {} ", t.rate.overhead);
        j.insert("overhead".into(), json!(t.rate.overhead));
    }
    if t.rate.linklayer != LinkLayer::Ethernet || flags.details {
        let _ = write!(s, "linklayer {} ", t.rate.linklayer.name());
        j.insert("linklayer".into(), json!(t.rate.linklayer.name()));
    }
}

#[cfg(test)]
mod tests {
    use tclab_core::Engine;

    fn tc(engine: &mut Engine, line: &str) -> crate::Output {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        crate::run(engine, &argv, 0)
    }

    #[test]
    fn a_latency_past_32_bits_of_microseconds_wraps_as_tc_gives_it() {
        // tc 6.1 on x86-64, kernel 6.12: `latency 5000s` is accepted and shown as "lat 705s"
        // (5e9 µs keeps its low 32 bits, 705 032 704 µs); `latency 4294967296us` wraps to 0, which
        // is no latency at all.
        let mut e = Engine::new();
        let out = tc(
            &mut e,
            "qdisc add dev eth0 root tbf rate 1mbit burst 10k latency 5000s",
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(
            tc(&mut e, "qdisc show dev eth0").stdout,
            "qdisc tbf 8001: root refcnt 2 rate 1Mbit burst 10Kb lat 705s \n"
        );
        let out = tc(
            &mut e,
            "qdisc change dev eth0 root tbf rate 1mbit burst 10k latency 4294967296us",
        );
        assert_eq!(
            (out.code, out.stderr.lines().next()),
            (1, Some("tbf: either \"limit\" or \"latency\" is required."))
        );
    }
}
