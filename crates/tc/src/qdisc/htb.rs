//! `htb` (iproute2's `q_htb.c`): the qdisc's r2q, default and direct queue, the classes' rates, ceilings,
//! bursts, priorities and quanta, and HTB's per-class counters.

use super::{linklayer, ClassLang, QdiscLang};
use crate::util::{
    calc_xmitsize, calc_xmittime, get_rate, get_size_and_cell, get_u16, get_u32, matches, push_i64,
    push_rate, push_size, push_u64, sprint_size,
};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions};
use tclab_core::units::{LinkLayer, RateSpec};

pub const LANG: QdiscLang = QdiscLang {
    name: "htb",
    words: &[
        "default",
        "r2q",
        "direct_qlen",
        "offload",
        "debug",
        "rate",
        "ceil",
        "burst",
        "cburst",
        "mtu",
        "mpu",
        "overhead",
        "quantum",
        "prio",
        "linklayer",
    ],
    parse,
    print,
    xstats: None,
    xstats_json: None,
    class: Some(ClassLang {
        parse: parse_class,
        print: print_class,
        print_xstats: print_class_xstats,
    }),
};

fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    parse_htb(args)
}

fn parse_class(args: &[String], _excl: bool) -> Result<ClassOptions> {
    parse_htb_class(args)
}

const HTB_USAGE: &str = "Usage: ... qdisc add ... htb [default N] [r2q N]\n                      [direct_qlen P] [offload]\n default  minor id of class to which unclassified packets are sent {0}\n r2q      DRR quantums are computed as rate in Bps/r2q {10}\n debug    string of 16 numbers each 0-3 {0}\n\n direct_qlen  Limit of the direct queue {in packets}\n offload  enable hardware offload\n... class add ... htb rate R1 [burst B1] [mpu B] [overhead O]\n                      [prio P] [slot S] [pslot PS]\n                      [ceil R2] [cburst B2] [mtu MTU] [quantum Q]\n rate     rate allocated to this class (class can still borrow)\n burst    max bytes burst which can be accumulated during idle period {computed}\n mpu      minimum packet size used in rate computations\n overhead per-packet size overhead used in rate computations\n linklay  adapting to a linklayer e.g. atm\n ceil     definite upper class rate (no borrows) {rate}\n cburst   burst but for ceil {computed}\n mtu      max packet size we create rate map for {1600}\n prio     priority of leaf; lower are served first {0}\n quantum  how much bytes to serve from leaf at once {use r2q}\n\nTC HTB version 3.3";

fn htb_illegal(name: &str) -> Failure {
    Failure::options(format!("Illegal \"{name}\"\n{HTB_USAGE}"))
}

/// `htb_parse_opt`.
fn parse_htb(args: &[String]) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
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

/// `htb_parse_class_opt` (tc 6.1).
fn parse_htb_class(args: &[String]) -> Result<ClassOptions> {
    let mut it = crate::Cur::new(args);
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
    // get_hz() is 10^9 on a high-resolution kernel: the default burst is rate/HZ + mtu, stored in a
    // 32-bit unsigned as tc does.
    const HZ: u64 = 1_000_000_000;
    if buffer == 0 {
        buffer = (rate / HZ + mtu as u64) as u32;
    }
    if cbuffer == 0 {
        cbuffer = (ceil / HZ + mtu as u64) as u32;
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

/// `htb_print_opt` for the qdisc (tc 6.1).
fn print(o: &QdiscOptions, flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Htb(h) = o else { return };
    let defcls = if h.defcls == 0 {
        "0".to_string()
    } else {
        format!("{:#x}", h.defcls)
    };
    let _ = write!(
        s,
        "r2q {} default {} direct_packets_stat {}",
        h.r2q, defcls, h.direct_pkts
    );
    j.insert("r2q".into(), json!(h.r2q));
    j.insert("default".into(), json!(defcls));
    j.insert("direct_packets_stat".into(), json!(h.direct_pkts));
    if flags.details {
        s.push_str(" ver 3.17");
        j.insert("ver".into(), json!("3.17"));
    }
    if let Some(q) = h.direct_qlen {
        let _ = write!(s, " direct_qlen {q}");
        j.insert("direct_qlen".into(), json!(q));
    }
}

/// `htb_print_opt` for a class (tc 6.1).
fn print_class(c: &ClassInfo, flags: ShowFlags, s: &mut String) {
    let Some(ClassOptions::Htb(h)) = &c.options else {
        return;
    };
    // Appended piece by piece (no `write!`, no string per rate or size): a LibreQoS-sized listing
    // prints 10 000 of these.
    if h.level == 0 {
        s.push_str("prio ");
        push_u64(s, h.prio.into());
        s.push(' ');
        if flags.details {
            s.push_str("quantum ");
            push_u64(s, h.quantum.into());
            s.push(' ');
        }
    }
    s.push_str("rate ");
    push_rate(s, h.rate.rate);
    s.push(' ');
    if h.rate.overhead != 0 {
        let _ = write!(s, "overhead {} ", h.rate.overhead);
    }
    let buffer = calc_xmitsize(h.rate.rate, h.buffer);
    s.push_str("ceil ");
    push_rate(s, h.ceil.rate);
    s.push(' ');
    let cbuffer = calc_xmitsize(h.ceil.rate, h.cbuffer);
    if h.rate.linklayer != LinkLayer::Ethernet || flags.details {
        let _ = write!(s, "linklayer {} ", h.rate.linklayer.name());
    }
    if flags.details {
        let _ = write!(
            s,
            "burst {}/1 mpu {} cburst {}/1 mpu {} level {} ",
            sprint_size(buffer),
            sprint_size(h.rate.mpu as u32),
            sprint_size(cbuffer),
            sprint_size(h.ceil.mpu as u32),
            h.level
        );
    } else {
        s.push_str("burst ");
        push_size(s, buffer);
        s.push_str(" cburst ");
        push_size(s, cbuffer);
        s.push(' ');
    }
    if flags.raw {
        let _ = write!(s, "buffer [{:08x}] cbuffer [{:08x}] ", h.buffer, h.cbuffer);
    }
}

/// `htb_print_xstats`.
fn print_class_xstats(c: &ClassInfo, out: &mut String) {
    if let Some(x) = &c.htb_xstats {
        out.push_str(" lended: ");
        push_u64(out, x.lends.into());
        out.push_str(" borrowed: ");
        push_u64(out, x.borrows.into());
        out.push_str(" giants: ");
        push_u64(out, x.giants.into());
        out.push_str("\n tokens: ");
        push_i64(out, x.tokens.into());
        out.push_str(" ctokens: ");
        push_i64(out, x.ctokens.into());
        out.push_str("\n\n");
    }
}
