//! Option parsers, one per discipline, after iproute2's `tc/q_*.c`: they read the words after the kind,
//! apply tc's defaults (burst from rate and mtu, TBF's limit from latency) and produce the options the
//! kernel receives. Messages and exit codes are tc's.

use crate::util::{
    calc_xmittime, get_rate, get_size, get_size_and_cell, get_time, get_u16, get_u32, matches,
};
use crate::{Failure, Result};
use tclab_core::qdisc::fifo::FifoOptions;
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
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
    "sfq", "prio", "red", "netem", "fq_codel", "codel", "fq", "hfsc", "cbq", "drr", "qfq",
    "ingress", "clsact", "choke", "sfb", "pie", "fq_pie", "cake", "mqprio", "multiq", "ets",
    "gred", "hhf", "plug", "skbprio", "taprio", "etf", "cbs", "mq",
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
    let _ = env;
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

/// Parse the words after a class kind.
pub fn parse_class(kind: &str, args: &[String]) -> Result<ClassOptions> {
    match kind {
        "htb" => parse_htb_class(args),
        "tbf" | "pfifo" | "bfifo" | "pfifo_fast" => Err(Failure::options(format!(
            "Error: Qdisc \"{kind}\" is classless."
        ))),
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
