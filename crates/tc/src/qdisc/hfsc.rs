//! `hfsc` (iproute2's `q_hfsc.c`): the qdisc's default class; a class's `rt`, `ls`, `sc` and `ul`
//! service curves as `[m1 BPS d SEC] m2 BPS` or `[umax BYTES dmax SEC] rate BPS`; HFSC's class counters.

use super::{ClassLang, QdiscLang};
use crate::util::{get_rate, get_size, get_time, get_u16, matches, sprint_rate, sprint_time};
use crate::{Failure, Result, ShowFlags};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use tclab_core::qdisc::hfsc::{HfscClassOptions, HfscOptions, ServiceCurve};
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions, Xstats};

pub const LANG: QdiscLang = QdiscLang {
    name: "hfsc",
    words: &[
        "default", "rt", "ls", "sc", "ul", "m1", "d", "m2", "umax", "dmax", "rate",
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

const QDISC_USAGE: &str =
    "Usage: ... hfsc [ default CLASSID ]\n\n default: default class for unclassified packets\n";

const CLASS_USAGE: &str = "Usage: ... hfsc [ [ rt SC ] [ ls SC ] | [ sc SC ] ] [ ul SC ]\n\nSC := [ [ m1 BPS ] d SEC ] m2 BPS\n\n m1 : slope of first segment\n d  : x-coordinate of intersection\n m2 : slope of second segment\n\nAlternative format:\n\nSC := [ [ umax BYTE ] dmax SEC ] rate BPS\n\n umax : maximum unit of work\n dmax : maximum delay\n rate : rate\n\nRemarks:\n - at least one of 'rt', 'ls' or 'sc' must be specified\n - 'ul' can only be specified with 'ls' or 'sc'\n";

/// `explain1`.
fn illegal(what: &str) -> String {
    format!("HFSC: Illegal \"{what}\"")
}

/// `hfsc_parse_opt` (tc 6.1).
fn parse(_kind: &str, args: &[String], _env: Option<DevEnv>) -> Result<QdiscOptions> {
    let mut it = crate::Cur::new(args);
    let mut o = HfscOptions::default();
    while let Some(a) = it.next() {
        if matches(a, "default") {
            let v = it.value()?;
            if o.defcls != 0 {
                return Err(Failure::options("HFSC: Double \"default\""));
            }
            o.defcls = get_u16(v, 16).ok_or_else(|| Failure::options(illegal("default")))?;
        } else if matches(a, "help") {
            return Err(Failure::options(QDISC_USAGE.trim_end()));
        } else {
            return Err(Failure::options(format!(
                "HFSC: What is \"{a}\" ?\n{}",
                QDISC_USAGE.trim_end()
            )));
        }
    }
    Ok(QdiscOptions::Hfsc(o))
}

/// `get_rate` into tc's 32-bit `unsigned int` (bytes per second); a `%` rate needs the device's speed,
/// which a tclab device does not have.
fn rate32(s: &str) -> Option<u32> {
    if s.contains('%') {
        return None;
    }
    get_rate(s).and_then(|r| u32::try_from(r).ok())
}

/// One curve's words, from `it`'s position; on success `it` is past the last word of the curve. The
/// messages printed on the way (tc prints them even when the other form then succeeds or fails) are
/// collected in `msgs`.
enum Sc {
    Ok(ServiceCurve, usize),
    /// The form did not match or a value was illegal.
    No,
}

/// `hfsc_get_sc1`: `[m1 BPS] [d SEC] m2 BPS`.
fn get_sc1(w: &[String], msgs: &mut Vec<String>) -> Result<Sc> {
    let mut i = 0;
    let at = |i: usize| -> Result<&str> {
        w.get(i)
            .map(String::as_str)
            .ok_or_else(|| Failure::syntax("Command line is not complete. Try option \"help\""))
    };
    let (mut m1, mut d, m2);
    m1 = 0;
    d = 0;
    if matches(at(i)?, "m1") {
        i += 1;
        match rate32(at(i)?) {
            Some(r) => m1 = r,
            None => {
                msgs.push(illegal("m1"));
                return Ok(Sc::No);
            }
        }
        i += 1;
        at(i)?;
    }
    if matches(at(i)?, "d") {
        i += 1;
        match get_time(at(i)?) {
            Some(t) => d = t,
            None => {
                msgs.push(illegal("d"));
                return Ok(Sc::No);
            }
        }
        i += 1;
        at(i)?;
    }
    if matches(at(i)?, "m2") {
        i += 1;
        match rate32(at(i)?) {
            Some(r) => m2 = r,
            None => {
                msgs.push(illegal("m2"));
                return Ok(Sc::No);
            }
        }
    } else {
        return Ok(Sc::No);
    }
    Ok(Sc::Ok(ServiceCurve { m1, d, m2 }, i + 1))
}

/// `hfsc_get_sc2`: `[umax BYTES] [dmax SEC] rate BPS`, turned into m1/d/m2 as tc does (in its 32-bit
/// unsigned arithmetic).
fn get_sc2(w: &[String], msgs: &mut Vec<String>) -> Result<Sc> {
    let mut i = 0;
    let at = |i: usize| -> Result<&str> {
        w.get(i)
            .map(String::as_str)
            .ok_or_else(|| Failure::syntax("Command line is not complete. Try option \"help\""))
    };
    let (mut umax, mut dmax) = (0u32, 0u32);
    if matches(at(i)?, "umax") {
        i += 1;
        match get_size(at(i)?) {
            Some(s) => umax = s,
            None => {
                msgs.push(illegal("umax"));
                return Ok(Sc::No);
            }
        }
        i += 1;
        at(i)?;
    }
    if matches(at(i)?, "dmax") {
        i += 1;
        match get_time(at(i)?) {
            Some(t) => dmax = t,
            None => {
                msgs.push(illegal("dmax"));
                return Ok(Sc::No);
            }
        }
        i += 1;
        at(i)?;
    }
    let rate;
    if matches(at(i)?, "rate") {
        i += 1;
        match rate32(at(i)?) {
            Some(r) => rate = r,
            None => {
                msgs.push(illegal("rate"));
                return Ok(Sc::No);
            }
        }
    } else {
        return Ok(Sc::No);
    }
    if umax != 0 && dmax == 0 {
        msgs.push("HFSC: umax given but dmax is zero.".into());
        return Ok(Sc::No);
    }
    const TIME_UNITS_PER_SEC: f64 = 1e6;
    let burst = (umax as f64 * TIME_UNITS_PER_SEC / dmax as f64).ceil();
    let sc = if dmax != 0 && burst > rate as f64 {
        // Concave: the first segment's slope is umax/dmax, up to dmax.
        ServiceCurve {
            m1: burst as u32,
            d: dmax,
            m2: rate,
        }
    } else {
        // Convex: nothing until dmax - umax/rate, then the rate. (tc divides by a zero rate here and
        // crashes; tclab answers as for any curve with two zero slopes.)
        if rate == 0 {
            return Ok(Sc::Ok(ServiceCurve::default(), i + 1));
        }
        let d = dmax.wrapping_sub(umax.wrapping_mul(1_000_000) / rate);
        ServiceCurve { m1: 0, d, m2: rate }
    };
    Ok(Sc::Ok(sc, i + 1))
}

/// `hfsc_get_sc`: either form; a curve with both slopes zero is refused.
fn get_sc(w: &[String], msgs: &mut Vec<String>) -> Result<Option<(ServiceCurve, usize)>> {
    let got = match get_sc1(w, msgs)? {
        Sc::Ok(sc, n) => Some((sc, n)),
        Sc::No => match get_sc2(w, msgs)? {
            Sc::Ok(sc, n) => Some((sc, n)),
            Sc::No => None,
        },
    };
    if let Some((sc, _)) = got {
        if sc.m1 == 0 && sc.m2 == 0 {
            msgs.push("HFSC: Service Curve has two zero slopes".into());
            return Ok(None);
        }
    }
    Ok(got)
}

/// `hfsc_parse_class_opt` (tc 6.1).
fn parse_class(args: &[String], _excl: bool) -> Result<ClassOptions> {
    let mut o = HfscClassOptions::default();
    let mut i = 0;
    let fail = |msgs: Vec<String>| Failure::options(msgs.join("\n"));
    while i < args.len() {
        let a = args[i].as_str();
        let which = if matches(a, "rt") {
            "rt"
        } else if matches(a, "ls") {
            "ls"
        } else if matches(a, "sc") {
            "sc"
        } else if matches(a, "ul") {
            "ul"
        } else if matches(a, "help") {
            return Err(Failure::options(CLASS_USAGE.trim_end()));
        } else {
            return Err(Failure::options(format!(
                "HFSC: What is \"{a}\" ?\n{}",
                CLASS_USAGE.trim_end()
            )));
        };
        i += 1;
        if i >= args.len() {
            return Err(Failure::syntax(
                "Command line is not complete. Try option \"help\"",
            ));
        }
        let mut msgs = Vec::new();
        let Some((sc, n)) = get_sc(&args[i..], &mut msgs)? else {
            msgs.push(illegal(which));
            return Err(fail(msgs));
        };
        i += n;
        match which {
            "rt" => o.rsc = Some(sc),
            "ls" => o.fsc = Some(sc),
            "sc" => {
                o.rsc = Some(sc);
                o.fsc = Some(sc);
            }
            _ => o.usc = Some(sc),
        }
    }
    if o.rsc.is_none() && o.fsc.is_none() && o.usc.is_none() {
        return Err(Failure::options(format!(
            "HFSC: no parameters given\n{}",
            CLASS_USAGE.trim_end()
        )));
    }
    if o.usc.is_some() && o.fsc.is_none() {
        return Err(Failure::options(format!(
            "HFSC: Upper-limit Service Curve without Link-Share Service Curve\n{}",
            CLASS_USAGE.trim_end()
        )));
    }
    Ok(ClassOptions::Hfsc(o))
}

/// `hfsc_print_opt`: the default class, in hex, when there is one.
fn print(o: &QdiscOptions, _flags: ShowFlags, s: &mut String, j: &mut Map<String, Value>) {
    let QdiscOptions::Hfsc(h) = o else { return };
    if h.defcls != 0 {
        let _ = write!(s, "default {:x} ", h.defcls);
        j.insert("default".into(), json!(format!("{:x}", h.defcls)));
    }
}

/// `hfsc_print_sc`.
fn print_sc(s: &mut String, name: &str, sc: &ServiceCurve) {
    let _ = write!(
        s,
        "{name} m1 {} d {} m2 {} ",
        sprint_rate(sc.m1 as u64),
        sprint_time(sc.d),
        sprint_rate(sc.m2 as u64)
    );
}

/// `hfsc_print_class_opt`: `sc` when the real-time and link-sharing curves are the same.
fn print_class(c: &ClassInfo, _flags: ShowFlags, s: &mut String) {
    let Some(ClassOptions::Hfsc(o)) = &c.options else {
        return;
    };
    match (&o.rsc, &o.fsc) {
        (Some(r), Some(f)) if r == f => print_sc(s, "sc", r),
        _ => {
            if let Some(r) = &o.rsc {
                print_sc(s, "rt", r);
            }
            if let Some(f) = &o.fsc {
                print_sc(s, "ls", f);
            }
        }
    }
    if let Some(u) = &o.usc {
        print_sc(s, "ul", u);
    }
}

/// `hfsc_print_xstats`.
fn print_class_xstats(c: &ClassInfo, out: &mut String) {
    if let Some(Xstats::Hfsc(x)) = &c.xstats {
        let _ = write!(out, " period {} ", x.period);
        if x.work != 0 {
            let _ = write!(out, "work {} bytes ", x.work);
        }
        if x.rtwork != 0 {
            let _ = write!(out, "rtwork {} bytes ", x.rtwork);
        }
        let _ = writeln!(out, "level {} ", x.level);
        out.push('\n');
    }
}
