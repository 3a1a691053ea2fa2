//! Option parsers, one per discipline, after iproute2's `tc/q_*.c`: they read the words after the kind,
//! apply tc's defaults (burst from rate and mtu, TBF's limit from latency) and produce the options the
//! kernel receives. Messages and exit codes are tc's.

use crate::util::{
    calc_xmittime, get_rate, get_size, get_size_and_cell, get_time, get_u16, get_u32, matches,
};
use crate::{Failure, Result};
use tclab_core::qdisc::cbq::{self, CbqFopt, CbqLss, CbqOptions, CbqRate, CbqWrr};
use tclab_core::qdisc::drr::DrrClassOptions;
use tclab_core::qdisc::fifo::FifoOptions;
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
use tclab_core::qdisc::prio::PrioOptions;
use tclab_core::qdisc::sfq::{SfqOptions, SfqRed};
use tclab_core::qdisc::tbf::TbfOptions;
use tclab_core::qdisc::{ClassOptions, DevEnv, QdiscOptions};
use tclab_core::units::{LinkLayer, RateSpec};

pub const QDISC_USAGE: &str = "Usage: tc qdisc [ add | del | replace | change | show ] dev STRING\n       [ handle QHANDLE ] [ root | ingress | clsact | parent CLASSID ]\n       [ estimator INTERVAL TIME_CONSTANT ]\n       [ stab [ help | STAB_OPTIONS] ]\n       [ ingress_block BLOCK_INDEX ] [ egress_block BLOCK_INDEX ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]\n\n       tc qdisc { show | list } [ dev STRING ] [ QDISC_ID ] [ invisible ]\nWhere:\nQDISC_KIND := { [p|b]fifo | tbf | prio | red | etc. }\nOPTIONS := ... try tc qdisc add <desired QDISC_KIND> help";

pub const CLASS_USAGE: &str = "Usage: tc class [ add | del | change | replace | show ] dev STRING\n       [ classid CLASSID ] [ root | parent CLASSID ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]\n\n       tc class show [ dev STRING ] [ root | parent CLASSID ]\nWhere:\nQDISC_KIND := { prio | etc. }\nOPTIONS := ... try tc class add <desired QDISC_KIND> help";

const FIFO_USAGE: &str = "Usage: ... <[p|b]fifo | pfifo_head_drop> [ limit NUMBER ]";

const TBF_USAGE: &str = "Usage: ... tbf limit BYTES burst BYTES[/BYTES] rate KBPS [ mtu BYTES[/BYTES] ]\n\t[ peakrate KBPS ] [ latency TIME ] [ overhead BYTES ] [ linklayer TYPE ]";

const HTB_USAGE: &str = "Usage: ... qdisc add ... htb [default N] [r2q N]\n                      [direct_qlen P] [offload]\n default  minor id of class to which unclassified packets are sent {0}\n r2q      DRR quantums are computed as rate in Bps/r2q {10}\n debug    string of 16 numbers each 0-3 {0}\n\n direct_qlen  Limit of the direct queue {in packets}\n offload  enable hardware offload\n... class add ... htb rate R1 [burst B1] [mpu B] [overhead O]\n                      [prio P] [slot S] [pslot PS]\n                      [ceil R2] [cburst B2] [mtu MTU] [quantum Q]\n rate     rate allocated to this class (class can still borrow)\n burst    max bytes burst which can be accumulated during idle period {computed}\n mpu      minimum packet size used in rate computations\n overhead per-packet size overhead used in rate computations\n linklay  adapting to a linklayer e.g. atm\n ceil     definite upper class rate (no borrows) {rate}\n cburst   burst but for ceil {computed}\n mtu      max packet size we create rate map for {1600}\n prio     priority of leaf; lower are served first {0}\n quantum  how much bytes to serve from leaf at once {use r2q}\n\nTC HTB version 3.3";

/// Kinds iproute2 can parse whose kernel module tclab does not have (yet): tc accepts their options, the
/// "kernel" then says the kind is unknown — exactly what a kernel without the module answers.
const KNOWN_TO_TC: &[&str] = &[
    "sfq", "prio", "red", "netem", "fq_codel", "codel", "fq", "hfsc", "cbq", "qfq", "ingress",
    "clsact", "choke", "sfb", "pie", "fq_pie", "cake", "mqprio", "multiq", "ets", "gred", "hhf",
    "plug", "skbprio", "taprio", "etf", "cbs", "mq",
];

fn linklayer(s: &str) -> Option<LinkLayer> {
    if matches(s, "ethernet") {
        Some(LinkLayer::Ethernet)
    } else if matches(s, "atm") || matches(s, "adsl") {
        Some(LinkLayer::Atm)
    } else {
        None
    }
}

/// Parse the words after a qdisc kind. `Ok(None)`: a kind tc knows but tclab's engine does not.
pub fn parse_qdisc(
    kind: &str,
    args: &[String],
    env: Option<DevEnv>,
) -> Result<Option<QdiscOptions>> {
    match kind {
        "pfifo" | "bfifo" => parse_fifo(kind, args).map(Some),
        "pfifo_fast" => {
            if !args.is_empty() {
                return Err(Failure::syntax(format!(
                    "qdisc '{kind}' does not support option parsing"
                )));
            }
            Ok(Some(QdiscOptions::PfifoFast))
        }
        "noqueue" if args.is_empty() => Ok(Some(QdiscOptions::Noqueue)),
        "tbf" => parse_tbf(args).map(Some),
        "htb" => parse_htb(args).map(Some),
        "sfq" => parse_sfq(args).map(Some),
        "prio" => parse_prio(args).map(Some),
        "cbq" => parse_cbq(args, env).map(Some),
        "drr" => parse_drr(args).map(Some),
        "ingress" | "clsact" => {
            let mut it = args.iter();
            while let Some(a) = it.next() {
                if a == "handle" {
                    it.next();
                } else {
                    return Err(Failure::options(format!(
                        "What is \"{a}\"?\nUsage: ... {kind}"
                    )));
                }
            }
            Ok(Some(if kind == "ingress" {
                QdiscOptions::Ingress
            } else {
                QdiscOptions::Clsact
            }))
        }
        k if KNOWN_TO_TC.contains(&k) => Ok(None),
        k => {
            if let Some(a) = args.first() {
                return Err(Failure::options(format!(
                    "Unknown qdisc \"{k}\", hence option \"{a}\" is unparsable"
                )));
            }
            Ok(None)
        }
    }
}

fn parse_fifo(kind: &str, args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
    let mut limit = None;
    while let Some(a) = it.next() {
        if matches(a, "limit") {
            let v = it.value()?;
            let parsed = if kind == "bfifo" {
                get_size(v)
            } else {
                get_u32(v, 0)
            };
            limit = Some(parsed.ok_or_else(|| {
                Failure::options(format!("{kind}: Illegal value for \"limit\": \"{v}\""))
            })?);
        } else if a == "help" {
            return Err(Failure::options(FIFO_USAGE));
        } else {
            return Err(Failure::options(format!(
                "{kind}: unknown parameter \"{a}\"\n{FIFO_USAGE}"
            )));
        }
    }
    let o = FifoOptions { limit };
    Ok(if kind == "bfifo" {
        QdiscOptions::Bfifo(o)
    } else {
        QdiscOptions::Pfifo(o)
    })
}

fn tbf_illegal(name: &str, v: &str) -> Failure {
    Failure::options(format!("tbf: illegal value for \"{name}\": \"{v}\""))
}

fn tbf_dup(what: &str) -> Failure {
    Failure::options(format!("tbf: duplicate \"{what}\" specification"))
}

/// `tbf_parse_opt`.
fn parse_tbf(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
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

fn htb_illegal(name: &str) -> Failure {
    Failure::options(format!("Illegal \"{name}\"\n{HTB_USAGE}"))
}

/// `htb_parse_opt`.
fn parse_htb(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
    let mut o = HtbOptions::default();
    while let Some(a) = it.next() {
        if matches(a, "r2q") {
            o.r2q = get_u32(it.value()?, 10).ok_or_else(|| htb_illegal("r2q"))?;
        } else if matches(a, "default") {
            o.defcls = get_u32(it.value()?, 16).ok_or_else(|| htb_illegal("default"))?;
        } else if matches(a, "debug") {
            it.value()?;
        } else if matches(a, "direct_qlen") {
            o.direct_qlen =
                Some(get_u32(it.value()?, 10).ok_or_else(|| htb_illegal("direct_qlen"))?);
        } else if matches(a, "offload") {
            return Err(Failure::kernel(tclab_core::KernelError::msg(
                tclab_core::error::Errno::NotSupported,
                "HTB offload: hw-tc-offload ethtool feature flag must be on",
            )));
        } else {
            return Err(Failure::options(format!("What is \"{a}\"?\n{HTB_USAGE}")));
        }
    }
    o.version = 3;
    Ok(QdiscOptions::Htb(o))
}

/// Parse the words after a class kind. `excl`: the request carries NLM_F_EXCL (`tc class add`), which
/// changes CBQ's defaults.
pub fn parse_class(kind: &str, args: &[String], excl: bool) -> Result<ClassOptions> {
    match kind {
        "htb" => parse_htb_class(args),
        "cbq" => parse_cbq_class(args, excl),
        "drr" => parse_drr_class(args),
        "tbf" | "pfifo" | "bfifo" | "pfifo_fast" | "sfq" | "prio" => Err(Failure::options(
            format!("Error: Qdisc \"{kind}\" is classless."),
        )),
        k if KNOWN_TO_TC.contains(&k) => Err(Failure::kernel(tclab_core::KernelError::new(
            tclab_core::error::Errno::NotSupported,
        ))),
        k => Err(Failure::options(format!(
            "Error: Qdisc \"{k}\" is classless."
        ))),
    }
}

/// `htb_parse_class_opt` (tc 6.1).
fn parse_htb_class(args: &[String]) -> Result<ClassOptions> {
    let mut it = crate::Args::new(args);
    let mut o = HtbClassOptions::default();
    let (mut buffer, mut cbuffer, mut mtu, mut mpu, mut overhead) =
        (0u32, 0u32, 1600u32, 0u16, 0u16);
    let (mut rate, mut ceil) = (0u64, 0u64);
    let mut ll = LinkLayer::Ethernet;
    while let Some(a) = it.next() {
        if matches(a, "prio") {
            o.prio = get_u32(it.value()?, 10).ok_or_else(|| htb_illegal("prio"))?;
        } else if matches(a, "mtu") {
            mtu = get_u32(it.value()?, 10).ok_or_else(|| htb_illegal("mtu"))?;
        } else if matches(a, "mpu") {
            mpu = get_u16(it.value()?, 10).ok_or_else(|| htb_illegal("mpu"))?;
        } else if matches(a, "overhead") {
            overhead = get_u16(it.value()?, 10).ok_or_else(|| htb_illegal("overhead"))?;
        } else if matches(a, "linklayer") {
            ll = linklayer(it.value()?).ok_or_else(|| htb_illegal("linklayer"))?;
        } else if matches(a, "quantum") {
            o.quantum = get_u32(it.value()?, 10).ok_or_else(|| htb_illegal("quantum"))?;
        } else if matches(a, "burst") || a == "buffer" || a == "maxburst" {
            buffer = get_size_and_cell(it.value()?)
                .ok_or_else(|| htb_illegal(a))?
                .0;
        } else if matches(a, "cburst") || a == "cbuffer" || a == "cmaxburst" {
            cbuffer = get_size_and_cell(it.value()?)
                .ok_or_else(|| htb_illegal(a))?
                .0;
        } else if a == "ceil" {
            let v = it.value()?;
            if ceil != 0 {
                return Err(Failure::options("Double \"ceil\" spec"));
            }
            ceil = get_rate(v).ok_or_else(|| htb_illegal("ceil"))?;
        } else if a == "rate" {
            let v = it.value()?;
            if rate != 0 {
                return Err(Failure::options("Double \"rate\" spec"));
            }
            rate = get_rate(v).ok_or_else(|| htb_illegal("rate"))?;
        } else if a == "help" {
            return Err(Failure::options(HTB_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{a}\"?\n{HTB_USAGE}")));
        }
    }
    if rate == 0 {
        return Err(Failure::options("\"rate\" is required."));
    }
    if ceil == 0 {
        ceil = rate;
    }
    // get_hz() is 10^9 on a high-resolution kernel: the default burst is rate/HZ + mtu.
    const HZ: u64 = 1_000_000_000;
    if buffer == 0 {
        buffer = (rate / HZ + mtu as u64).min(u32::MAX as u64) as u32;
    }
    if cbuffer == 0 {
        cbuffer = (ceil / HZ + mtu as u64).min(u32::MAX as u64) as u32;
    }
    let spec = |r: u64| RateSpec {
        rate: r,
        overhead,
        mpu,
        linklayer: ll,
    };
    o.rate = spec(rate);
    o.ceil = spec(ceil);
    o.buffer = calc_xmittime(rate, buffer);
    o.cbuffer = calc_xmittime(ceil, cbuffer);
    Ok(ClassOptions::Htb(o))
}

const SFQ_USAGE: &str = "Usage: ... sfq\t[ limit NUMBER ] [ perturb SECS ] [ quantum BYTES ]\n\t\t[ divisor NUMBER ] [ flows NUMBER] [ depth NUMBER ]\n\t\t[ headdrop ]\n\t\t[ redflowlimit BYTES ] [ min BYTES ] [ max BYTES ]\n\t\t[ avpkt BYTES ] [ burst PACKETS ] [ probability P ]\n\t\t[ ecn ] [ harddrop ]";

/// `TC_RED_ECN`, `TC_RED_HARDDROP`.
pub const TC_RED_ECN: u8 = 1;
pub const TC_RED_HARDDROP: u8 = 2;

/// `tc_red_eval_ewma`: the smallest Wlog for which `burst` packets of `avpkt` fit below `qmin`.
fn red_eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> Option<u8> {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return Some(wlog);
        }
        w /= 2.0;
    }
    None
}

/// `tc_red_eval_P`.
fn red_eval_p(qmin: u32, qmax: u32, prob: f64) -> Option<u8> {
    let i = qmax as i64 - qmin as i64;
    if i == 0 {
        return Some(0);
    }
    if i < 0 {
        return None;
    }
    let mut prob = prob / i as f64;
    for i in 0..32u8 {
        if prob > 1.0 {
            return Some(i);
        }
        prob *= 2.0;
    }
    None
}

/// C's `get_integer` (an `int`, any base when 0).
fn get_int(s: &str) -> Option<i32> {
    let v = crate::util::parse_c_integer(s)?;
    i32::try_from(v).ok()
}

/// `sscanf("%lg")`: the longest prefix that reads as a number.
fn scan_double(s: &str) -> Option<f64> {
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok())
}

/// `sfq_parse_opt` (tc 6.1).
fn parse_sfq(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
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
        red.wlog = red_eval_ewma(red.qth_min, burst, avpkt)
            .ok_or_else(|| Failure::options("SFQ: failed to calculate EWMA constant."))?;
        red.plog = red_eval_p(red.qth_min, red.qth_max, probability)
            .ok_or_else(|| Failure::options("SFQ: failed to calculate probability."))?;
        red.max_p = (probability * 4294967296.0).clamp(0.0, u32::MAX as f64) as u32;
        o.red = Some(red);
    }
    Ok(QdiscOptions::Sfq(o))
}

const PRIO_USAGE: &str = "Usage: ... prio bands NUMBER priomap P1 P2...[multiqueue]";

/// `prio_parse_opt` (tc 6.1): tc checks the map against the band count given so far; the kernel
/// checks the band count. (`bands` after `priomap` makes tc print its usage and carry on; tclab only
/// carries on.)
fn parse_prio(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
    let mut o = PrioOptions::default();
    let mut pmap_mode = false;
    let mut idx = 0usize;
    while let Some(a) = it.next() {
        if a == "bands" {
            let v = it.value()?;
            o.bands = get_int(v)
                .filter(|_| !v.starts_with("0x") && !v.starts_with("0X"))
                .ok_or_else(|| Failure::options("Illegal \"bands\""))?;
        } else if a == "priomap" {
            if pmap_mode {
                return Err(Failure::options("Error: duplicate priomap"));
            }
            pmap_mode = true;
        } else if a == "multiqueue" {
        } else if a == "help" {
            return Err(Failure::options(PRIO_USAGE));
        } else {
            if !pmap_mode {
                return Err(Failure::options(format!("What is \"{a}\"?\n{PRIO_USAGE}")));
            }
            let band =
                get_u32(a, 10).ok_or_else(|| Failure::options("Illegal \"priomap\" element"))?;
            // C compares the unsigned element with the int band count converted to unsigned.
            if band >= o.bands as u32 {
                return Err(Failure::options("\"priomap\" element is out of bands"));
            }
            if idx > 15 {
                return Err(Failure::options("\"priomap\" index > TC_PRIO_MAX=15"));
            }
            o.priomap[idx] = band as u8;
            idx += 1;
        }
    }
    Ok(QdiscOptions::Prio(o))
}

const DRR_USAGE: &str = "Usage: ... drr";

const DRR_CLASS_USAGE: &str = "Usage: ... drr quantum SIZE";

/// `drr_parse_opt` (tc 6.1): the qdisc takes no options.
fn parse_drr(args: &[String]) -> Result<QdiscOptions> {
    match args.first() {
        None => Ok(QdiscOptions::Drr),
        Some(a) if a == "help" => Err(Failure::options(DRR_USAGE)),
        Some(a) => Err(Failure::options(format!("What is \"{a}\"?\n{DRR_USAGE}"))),
    }
}

/// `drr_parse_class_opt` (tc 6.1): `quantum SIZE`, repeated as often as one likes (the last one wins in
/// the kernel's attribute parse).
fn parse_drr_class(args: &[String]) -> Result<ClassOptions> {
    let mut it = crate::Args::new(args);
    let mut o = DrrClassOptions::default();
    while let Some(a) = it.next() {
        if a == "quantum" {
            let v = it.value()?;
            o.quantum = Some(get_size(v).ok_or_else(|| Failure::options("Illegal \"quantum\""))?);
        } else if a == "help" {
            return Err(Failure::options(DRR_CLASS_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{a}\"?\n{DRR_CLASS_USAGE}"
            )));
        }
    }
    Ok(ClassOptions::Drr(o))
}

const CBQ_USAGE: &str = "Usage: ... cbq bandwidth BPS avpkt BYTES [ mpu BYTES ]\n               [ cell BYTES ] [ ewma LOG ]";

const CBQ_CLASS_USAGE: &str = "Usage: ... cbq\tbandwidth BPS rate BPS maxburst PKTS [ avpkt BYTES ]\n\t\t[ minburst PKTS ] [ bounded ] [ isolated ]\n\t\t[ allot BYTES ] [ mpu BYTES ] [ weight RATE ]\n\t\t[ prio NUMBER ] [ cell BYTES ] [ ewma LOG ]\n\t\t[ estimator INTERVAL TIME_CONSTANT ]\n\t\t[ split CLASSID ] [ defmap MASK/CHANGE ]\n\t\t[ overhead BYTES ] [ linklayer TYPE ]";

fn cbq_illegal(what: &str) -> Failure {
    Failure::options(format!("Illegal \"{what}\""))
}

/// tc 6.1 reads CBQ rates into 32 bits (`get_rate`), and a `%` rate needs the device's speed, which
/// tclab's devices do not have.
fn cbq_rate(v: &str, what: &str) -> Result<u32> {
    if v.contains('%') {
        return Err(cbq_illegal(what));
    }
    get_rate(v)
        .and_then(|r| u32::try_from(r).ok())
        .ok_or_else(|| cbq_illegal(what))
}

fn cbq_cell(v: &str) -> Result<u8> {
    let cell = get_size(v).ok_or_else(|| cbq_illegal("cell"))?;
    (0..32u8)
        .find(|i| 1u64 << i == cell as u64)
        .ok_or_else(|| Failure::options("cell must be 2^n"))
}

fn cbq_ewma(v: &str) -> Result<i32> {
    let e = get_int(v).ok_or_else(|| cbq_illegal("ewma"))?;
    if e > 31 {
        return Err(Failure::options("ewma_log must be < 32"));
    }
    Ok(e)
}

/// `tc_calc_rtable`'s choice of cell: the smallest with `mtu >> cell_log` ≤ 255 (mtu 0 means 2047).
fn rtab_cell_log(cell_log: Option<u8>, mtu: u32) -> u8 {
    cell_log.unwrap_or_else(|| {
        let mtu = if mtu == 0 { 2047 } else { mtu };
        let mut c = 0u8;
        while (mtu >> c) > 255 {
            c += 1;
        }
        c
    })
}

/// `cbq_parse_opt` (tc 6.1).
fn parse_cbq(args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Args::new(args);
    let (mut rate, mut mpu, mut avpkt, mut allot, mut overhead) = (0u32, 0u32, 0u32, 0u32, 0u16);
    let mut ll = LinkLayer::Ethernet;
    let (mut cell_log, mut ewma_log) = (None::<u8>, -1i32);
    while let Some(a) = it.next() {
        if matches(a, "bandwidth") || matches(a, "rate") {
            rate = cbq_rate(it.value()?, "bandwidth")?;
        } else if matches(a, "ewma") {
            ewma_log = cbq_ewma(it.value()?)?;
        } else if matches(a, "cell") {
            cell_log = Some(cbq_cell(it.value()?)?);
        } else if matches(a, "avpkt") {
            avpkt = get_size(it.value()?).ok_or_else(|| cbq_illegal("avpkt"))?;
        } else if matches(a, "mpu") {
            mpu = get_size(it.value()?).ok_or_else(|| cbq_illegal("mpu"))?;
        } else if matches(a, "allot") {
            allot = get_size(it.value()?).ok_or_else(|| cbq_illegal("allot"))?;
        } else if matches(a, "overhead") {
            overhead = get_u16(it.value()?, 10).ok_or_else(|| cbq_illegal("overhead"))?;
        } else if matches(a, "linklayer") {
            ll = linklayer(it.value()?).ok_or_else(|| cbq_illegal("linklayer"))?;
        } else if matches(a, "help") {
            return Err(Failure::options(CBQ_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{a}\"?\n{CBQ_USAGE}")));
        }
    }
    if rate == 0 {
        return Err(Failure::options("CBQ: bandwidth is required parameter."));
    }
    if avpkt == 0 {
        return Err(Failure::options("CBQ: \"avpkt\" is required."));
    }
    allot = allot.max(avpkt.saturating_mul(3) / 2);
    let ewma = if ewma_log < 0 {
        cbq::DEF_EWMA
    } else {
        ewma_log as u8
    };
    Ok(QdiscOptions::Cbq(CbqOptions {
        rate: Some(CbqRate {
            spec: RateSpec {
                rate: rate as u64,
                overhead,
                mpu: mpu.min(u16::MAX as u32) as u16,
                linklayer: ll,
            },
            cell_log: rtab_cell_log(cell_log, allot),
        }),
        lss: Some(CbqLss {
            change: cbq::LSS_MAXIDLE | cbq::LSS_EWMA | cbq::LSS_AVPKT,
            ewma_log: ewma,
            maxidle: calc_xmittime(rate as u64, avpkt),
            avpkt,
            ..Default::default()
        }),
        wrr: None,
        fopt: None,
    }))
}

/// `tc_cbq_calc_maxidle`.
fn cbq_calc_maxidle(bndw: u32, rate: u32, avpkt: u32, ewma_log: u8, maxburst: u32) -> u32 {
    let g = 1.0 - 1.0 / (1u64 << ewma_log) as f64;
    let xmt = avpkt as f64 / bndw as f64;
    let mut maxidle = xmt * (1.0 - g);
    if bndw != rate && maxburst != 0 {
        let vxmt = (avpkt as f64 / rate as f64 - xmt) * (g.powf(-(maxburst as f64)) - 1.0);
        if vxmt > maxidle {
            maxidle = vxmt;
        }
    }
    time2tick(maxidle * (1u64 << ewma_log) as f64 * 1e6)
}

/// `tc_cbq_calc_offtime`.
fn cbq_calc_offtime(bndw: u32, rate: u32, avpkt: u32, ewma_log: u8, minburst: u32) -> u32 {
    let g = 1.0 - 1.0 / (1u64 << ewma_log) as f64;
    let mut offtime = avpkt as f64 / rate as f64 - avpkt as f64 / bndw as f64;
    if minburst == 0 {
        return 0;
    }
    if minburst == 1 {
        offtime *= g.powf(-(minburst as f64)) - 1.0;
    } else {
        offtime *= 1.0 + (g.powf(-((minburst - 1) as f64)) - 1.0) / (1.0 - g);
    }
    time2tick(offtime * 1e6)
}

/// `tc_core_time2tick`: µs to ticks (15.625 per µs), truncated into 32 bits.
fn time2tick(us: f64) -> u32 {
    (us * crate::util::TICKS_PER_USEC).clamp(0.0, u32::MAX as f64) as u32
}

/// `cbq_parse_class_opt` (tc 6.1).
fn parse_cbq_class(args: &[String], excl: bool) -> Result<ClassOptions> {
    let mut it = crate::Args::new(args);
    let mut lss = CbqLss::default();
    let mut wrr = CbqWrr::default();
    let mut fopt = CbqFopt::default();
    let (mut wrr_ok, mut fopt_ok) = (false, false);
    let (mut rate, mut bndw, mut mpu, mut overhead) = (0u32, 0u32, 0u32, 0u16);
    let (mut minburst, mut maxburst) = (0u32, 0u32);
    let mut ll = LinkLayer::Ethernet;
    let (mut cell_log, mut ewma_log) = (None::<u8>, -1i32);
    while let Some(a) = it.next() {
        if matches(a, "rate") {
            rate = cbq_rate(it.value()?, "rate")?;
        } else if matches(a, "bandwidth") {
            bndw = cbq_rate(it.value()?, "bandwidth")?;
        } else if matches(a, "minidle") {
            lss.minidle = get_u32(it.value()?, 0).ok_or_else(|| cbq_illegal("minidle"))?;
            lss.change |= cbq::LSS_MINIDLE;
        } else if matches(a, "minburst") {
            minburst = get_u32(it.value()?, 0).ok_or_else(|| cbq_illegal("minburst"))?;
            lss.change |= cbq::LSS_OFFTIME;
        } else if matches(a, "maxburst") {
            maxburst = get_u32(it.value()?, 0).ok_or_else(|| cbq_illegal("maxburst"))?;
            lss.change |= cbq::LSS_MAXIDLE;
        } else if matches(a, "bounded") {
            lss.flags |= cbq::LSS_BOUNDED;
            lss.change |= cbq::LSS_FLAGS;
        } else if matches(a, "borrow") {
            lss.flags &= !cbq::LSS_BOUNDED;
            lss.change |= cbq::LSS_FLAGS;
        } else if matches(a, "isolated") {
            lss.flags |= cbq::LSS_ISOLATED;
            lss.change |= cbq::LSS_FLAGS;
        } else if matches(a, "sharing") {
            lss.flags &= !cbq::LSS_ISOLATED;
            lss.change |= cbq::LSS_FLAGS;
        } else if matches(a, "ewma") {
            ewma_log = cbq_ewma(it.value()?)?;
            lss.change |= cbq::LSS_EWMA;
        } else if matches(a, "cell") {
            cell_log = Some(cbq_cell(it.value()?)?);
        } else if matches(a, "prio") {
            let p = get_u32(it.value()?, 0).ok_or_else(|| cbq_illegal("prio"))?;
            if p > cbq::MAXPRIO as u32 {
                return Err(Failure::options(format!(
                    "\"prio\" must be number in the range 1...{}",
                    cbq::MAXPRIO
                )));
            }
            wrr.priority = p as u8;
            wrr_ok = true;
        } else if matches(a, "allot") {
            wrr.allot = get_size(it.value()?).ok_or_else(|| cbq_illegal("allot"))?;
        } else if matches(a, "avpkt") {
            lss.avpkt = get_size(it.value()?).ok_or_else(|| cbq_illegal("avpkt"))?;
            lss.change |= cbq::LSS_AVPKT;
        } else if matches(a, "mpu") {
            mpu = get_size(it.value()?).ok_or_else(|| cbq_illegal("mpu"))?;
        } else if matches(a, "weight") {
            wrr.weight = get_size(it.value()?).ok_or_else(|| cbq_illegal("weight"))?;
            wrr_ok = true;
        } else if matches(a, "split") {
            fopt.split = crate::util::get_tc_classid(it.value()?)
                .ok_or_else(|| Failure::options("Invalid split node ID."))?;
            fopt_ok = true;
        } else if matches(a, "defmap") {
            let v = it.value()?;
            let bad = || Failure::options("Invalid defmap, should be MASK32[/MASK]");
            let hex = |s: &str| -> Option<u32> {
                let digits: String = s
                    .chars()
                    .take(8)
                    .take_while(char::is_ascii_hexdigit)
                    .collect();
                u32::from_str_radix(&digits, 16).ok()
            };
            match v.split_once('/') {
                Some((m, c)) => {
                    fopt.defmap = hex(m).ok_or_else(bad)?;
                    fopt.defchange = hex(c).unwrap_or(!0);
                }
                None => {
                    fopt.defmap = hex(v).ok_or_else(bad)?;
                    fopt.defchange = !0;
                }
            }
            fopt_ok = true;
        } else if matches(a, "overhead") {
            overhead = get_u16(it.value()?, 10).ok_or_else(|| cbq_illegal("overhead"))?;
        } else if matches(a, "linklayer") {
            ll = linklayer(it.value()?).ok_or_else(|| cbq_illegal("linklayer"))?;
        } else if matches(a, "help") {
            return Err(Failure::options(CBQ_CLASS_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{a}\"?\n{CBQ_CLASS_USAGE}"
            )));
        }
    }
    let mut rate_opt = None;
    if rate != 0 {
        // The rate table is sized by the allot as given, before the avpkt rule below.
        let pktsize = wrr.allot;
        if wrr.allot < lss.avpkt.saturating_mul(3) / 2 {
            wrr.allot = lss.avpkt.saturating_mul(3) / 2;
        }
        rate_opt = Some(CbqRate {
            spec: RateSpec {
                rate: rate as u64,
                overhead,
                mpu: mpu.min(u16::MAX as u32) as u16,
                linklayer: ll,
            },
            cell_log: rtab_cell_log(cell_log, pktsize),
        });
    }
    let ewma = if ewma_log < 0 {
        cbq::DEF_EWMA
    } else {
        ewma_log as u8
    };
    lss.ewma_log = ewma;
    if lss.change & (cbq::LSS_OFFTIME | cbq::LSS_MAXIDLE) != 0 {
        if lss.avpkt == 0 {
            return Err(Failure::options("CBQ: avpkt is required for max/minburst."));
        }
        if bndw == 0 || rate == 0 {
            return Err(Failure::options(
                "CBQ: bandwidth&rate are required for max/minburst.",
            ));
        }
    }
    if wrr.priority == 0 && excl {
        wrr_ok = true;
        wrr.priority = cbq::MAXPRIO;
        if wrr.allot == 0 {
            wrr.allot = lss.avpkt.saturating_mul(3) / 2;
        }
    }
    if wrr_ok {
        if wrr.weight == 0 {
            wrr.weight = if wrr.priority == cbq::MAXPRIO {
                1
            } else {
                rate
            };
        }
        if wrr.allot == 0 {
            return Err(Failure::options(
                "CBQ: \"allot\" is required to set WRR parameters.",
            ));
        }
    }
    if lss.change & cbq::LSS_MAXIDLE != 0 {
        lss.maxidle = cbq_calc_maxidle(bndw, rate, lss.avpkt, ewma, maxburst);
        lss.change |= cbq::LSS_MAXIDLE | cbq::LSS_EWMA | cbq::LSS_AVPKT;
    }
    if lss.change & cbq::LSS_OFFTIME != 0 {
        lss.offtime = cbq_calc_offtime(bndw, rate, lss.avpkt, ewma, minburst);
        lss.change |= cbq::LSS_OFFTIME | cbq::LSS_EWMA | cbq::LSS_AVPKT;
    }
    if lss.change & cbq::LSS_MINIDLE != 0 {
        lss.minidle = lss.minidle.wrapping_shl(ewma as u32);
        lss.change |= cbq::LSS_EWMA;
    }
    let lss_opt = (lss.change != 0).then(|| {
        lss.change |= cbq::LSS_FLAGS;
        lss
    });
    Ok(ClassOptions::Cbq(CbqOptions {
        rate: rate_opt,
        lss: lss_opt,
        wrr: wrr_ok.then_some(wrr),
        fopt: fopt_ok.then_some(fopt),
    }))
}
