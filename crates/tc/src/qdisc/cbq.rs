//! `cbq` (iproute2's `q_cbq.c`, as tc 6.1 still had it): bandwidth, avpkt, the classes' rates, weights,
//! allots, bounds, isolation, split and defmap, and CBQ's counters.

use super::{linklayer, ClassLang, QdiscLang};
use crate::util::{
    calc_xmittime, fmt_g, get_int, get_rate, get_size, get_u16, get_u32, matches, sprint_rate,
    sprint_time, tick2time,
};
use crate::{Failure, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::qdisc::cbq::{self, CbqFopt, CbqLss, CbqOptions, CbqRate, CbqWrr, CbqXstats};
use tclab_core::qdisc::{ClassOptions, DevEnv, QdiscOptions, Xstats};
use tclab_core::units::{LinkLayer, RateSpec};
use tclab_core::Handle;

pub const LANG: QdiscLang = QdiscLang {
    name: "cbq",
    words: &[
        "bandwidth",
        "avpkt",
        "mpu",
        "cell",
        "ewma",
        "rate",
        "maxburst",
        "minburst",
        "bounded",
        "isolated",
        "allot",
        "weight",
        "prio",
        "split",
        "defmap",
        "overhead",
        "linklayer",
    ],
    parse: parse_cbq,
    // q_cbq.c prints with fprintf, which writes nothing JSON can hold: its options object stays empty.
    print: |o, flags, s, _j| {
        if let QdiscOptions::Cbq(o) = o {
            s.push_str(&cbq_options(o, flags));
        }
    },
    xstats: Some(qdisc_xstats),
    xstats_json: None,
    class: Some(ClassLang {
        parse: parse_cbq_class,
        print: |c, flags, s| {
            if let Some(ClassOptions::Cbq(o)) = &c.options {
                s.push_str(&cbq_options(o, flags));
            }
        },
        print_xstats: |c, out| {
            if let Some(Xstats::Cbq(x)) = &c.xstats {
                out.push_str(&cbq_xstats(x));
                out.push('\n');
            }
        },
    }),
};

/// `cbq_print_xstats` for the qdisc line.
pub fn qdisc_xstats(x: &Xstats, out: &mut String) {
    if let Xstats::Cbq(x) = x {
        out.push_str(&cbq_xstats(x));
        out.push('\n');
    }
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
fn parse_cbq(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
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
    let mut it = crate::Cur::new(args);
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

/// `cbq_print_opt` (tc 6.1), for the qdisc (its root class) and for classes.
fn cbq_options(o: &CbqOptions, flags: ShowFlags) -> String {
    let mut s = String::new();
    if let Some(r) = &o.rate {
        let _ = write!(s, "rate {} ", sprint_rate(r.spec.rate));
        if r.spec.linklayer != LinkLayer::Ethernet || flags.details {
            let _ = write!(s, "linklayer {} ", r.spec.linklayer.name());
        }
        if flags.details {
            let _ = write!(s, "cell {}b ", 1u64 << r.cell_log);
            if r.spec.mpu != 0 {
                let _ = write!(s, "mpu {}b ", r.spec.mpu);
            }
            if r.spec.overhead != 0 {
                let _ = write!(s, "overhead {}b ", r.spec.overhead);
            }
        }
    }
    if let Some(l) = o.lss.filter(|l| l.flags != 0) {
        let mut words = Vec::new();
        if l.flags & cbq::LSS_BOUNDED != 0 {
            words.push("bounded");
        }
        if l.flags & cbq::LSS_ISOLATED != 0 {
            words.push("isolated");
        }
        let _ = write!(s, "({}) ", words.join(","));
    }
    if let Some(w) = &o.wrr {
        if w.priority != cbq::MAXPRIO {
            let _ = write!(s, "prio {}", w.priority);
        } else {
            s.push_str("prio no-transmit");
        }
        if flags.details {
            let _ = write!(s, "/{} ", w.cpriority);
            if w.weight != 1 {
                let _ = write!(s, "weight {} ", sprint_rate(w.weight as u64));
            }
            if w.allot != 0 {
                let _ = write!(s, "allot {}b ", w.allot);
            }
        }
    }
    if let Some(l) = o.lss.filter(|_| flags.details) {
        let _ = write!(
            s,
            "\nlevel {} ewma {} avpkt {}b ",
            l.level, l.ewma_log, l.avpkt
        );
        let ticks = |t: u32| sprint_time(tick2time(t));
        if l.maxidle != 0 {
            let _ = write!(s, "maxidle {} ", ticks(l.maxidle >> l.ewma_log));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.maxidle);
            }
        }
        if l.minidle != 0x7fff_ffff {
            let _ = write!(s, "minidle {} ", ticks(l.minidle >> l.ewma_log));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.minidle);
            }
        }
        if l.offtime != 0 {
            let _ = write!(s, "offtime {} ", ticks(l.offtime));
            if flags.raw {
                let _ = write!(s, "[{:08x}] ", l.offtime);
            }
        }
    }
    if let Some(f) = o.fopt.filter(|_| flags.details) {
        let _ = write!(s, "\nsplit {} ", Handle(f.split));
        if f.defmap != 0 {
            let _ = write!(s, "defmap {:08x}", f.defmap);
        }
    }
    s
}

/// `cbq_print_xstats`.
fn cbq_xstats(x: &CbqXstats) -> String {
    format!(
        "  borrowed {} overactions {} avgidle {} undertime {}",
        x.borrows,
        x.overactions,
        fmt_g(x.avgidle as f64, 6),
        fmt_g(x.undertime as f64, 6)
    )
}
