//! `stab` (iproute2's `tc_stab.c` and `tc_calc_size_table` in `tc_core.c`): the size-table options of
//! `tc qdisc add|change|replace … stab [mtu N] [tsize N] [mpu N] [overhead N] [linklayer TYPE] …`, the
//! table tc computes from them, and how `tc -d qdisc show` prints them.

use crate::util::{get_u32, matches};
use crate::{duparg, Cur, Failure, Result};
use tclab_core::stab::{SizeSpec, SizeTable};

const USAGE: &str = "Usage: ... stab [ mtu BYTES ] [ tsize SLOTS ] [ mpu BYTES ]\n                [ overhead BYTES ] [ linklayer TYPE ] ...\n   mtu       : max packet size we create rate map for {2047}\n   tsize     : how many slots should size table have {512}\n   mpu       : minimum packet size used in rate computations\n   overhead  : per-packet size overhead used in rate computations\n   linklayer : adapting to a linklayer e.g. atm\nExample: ... stab overhead 20 linklayer atm";

/// `LINKLAYER_ETHERNET`, `LINKLAYER_ATM`.
const ETHERNET: u32 = 1;
const ATM: u32 = 2;

/// tc_stab.c calls `invarg("mtu", "invalid mtu")` with its two arguments the other way round from the
/// rest of tc, so the message reads `argument "invalid mtu" is wrong: mtu` — reproduced as it is.
fn invarg(what: &str, _arg: &str) -> Failure {
    let option = what
        .trim_start_matches("invalid ")
        .trim_start_matches("table ");
    let option = if option == "size" { "tsize" } else { option };
    Failure::syntax(format!("Error: argument \"{what}\" is wrong: {option}"))
}

/// `parse_size_table`, after the word `stab`: the options up to the first word that is not one, then
/// `tc_calc_size_table`. Stops at (without consuming) the next generic word or the kind.
pub fn parse(args: &mut Cur) -> Result<SizeTable> {
    let first = args.value()?;
    if matches(first, "help") {
        return Err(Failure::syntax(USAGE));
    }
    let mut s = SizeSpec::default();
    let mut word = Some(first);
    while let Some(w) = word {
        if matches(w, "mtu") {
            let v = args.value()?;
            if s.mtu != 0 {
                return Err(duparg("mtu", v));
            }
            s.mtu = get_u32(v, 10).ok_or_else(|| invarg("invalid mtu", v))?;
        } else if matches(w, "mpu") {
            let v = args.value()?;
            if s.mpu != 0 {
                return Err(duparg("mpu", v));
            }
            s.mpu = get_u32(v, 10).ok_or_else(|| invarg("invalid mpu", v))?;
        } else if matches(w, "overhead") {
            let v = args.value()?;
            if s.overhead != 0 {
                return Err(duparg("overhead", v));
            }
            // `get_integer(…, 10)`: a decimal `int`.
            s.overhead = v
                .trim_start()
                .parse::<i64>()
                .ok()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| invarg("invalid overhead", v))?;
        } else if matches(w, "tsize") {
            let v = args.value()?;
            if s.tsize != 0 {
                return Err(duparg("tsize", v));
            }
            s.tsize = get_u32(v, 10).ok_or_else(|| invarg("invalid table size", v))?;
        } else if matches(w, "linklayer") {
            let v = args.value()?;
            if s.linklayer != 0 {
                return Err(duparg("linklayer", v));
            }
            s.linklayer = match crate::qdisc::linklayer(v) {
                Some(tclab_core::units::LinkLayer::Atm) => ATM,
                Some(tclab_core::units::LinkLayer::Ethernet) => ETHERNET,
                None => return Err(invarg("invalid linklayer", v)),
            };
        } else {
            // Not a stab option: give it back to the qdisc command.
            args.back();
            break;
        }
        word = args.next();
    }
    // `check_size_table_opts`: nothing to do is a silent failure in tc.
    if !(s.linklayer >= ETHERNET || s.mpu != 0 || s.overhead != 0) {
        return Err(Failure::silent(
            255,
            "parse_size_table (tc_stab.c): check_size_table_opts",
        ));
    }
    Ok(calc_size_table(s))
}

/// `tc_calc_size_table`.
fn calc_size_table(mut s: SizeSpec) -> SizeTable {
    if s.linklayer <= ETHERNET && s.mpu == 0 {
        // Only an overhead: no table.
        s.mtu = 0;
        s.tsize = 0;
        s.cell_log = 0;
        s.cell_align = 0;
        return SizeTable {
            spec: s,
            data: Vec::new(),
        };
    }
    if s.mtu == 0 {
        s.mtu = 2047;
    }
    if s.tsize == 0 {
        s.tsize = 512;
    }
    s.cell_log = 0;
    while (s.mtu >> s.cell_log) > s.tsize - 1 {
        s.cell_log += 1;
    }
    let adjust = |sz: u32| -> u32 {
        let sz = sz.max(s.mpu);
        if s.linklayer == ATM {
            sz.div_ceil(48) * 53
        } else {
            sz
        }
    };
    let data = loop {
        let mut data = vec![0u16; s.tsize as usize];
        let mut fits = true;
        for (i, slot) in data.iter_mut().enumerate().rev() {
            let sz = adjust(((i as u64 + 1) << s.cell_log).min(u32::MAX as u64) as u32);
            if (sz >> s.size_log) > u16::MAX as u32 {
                fits = false;
                break;
            }
            *slot = (sz >> s.size_log) as u16;
        }
        if fits {
            break data;
        }
        s.size_log += 1;
    };
    s.cell_align = -1;
    SizeTable { spec: s, data }
}

/// `print_size_table` (with `-d`): the line after the qdisc's options.
/// `print_size_table` under `-j`: the same fields, in the same order, as an object.
pub fn print_json(s: &SizeSpec) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if s.linklayer != 0 {
        let ll = match s.linklayer {
            ETHERNET => "ethernet",
            ATM => "atm",
            _ => "unknown",
        };
        m.insert("linklayer".into(), ll.into());
    }
    for (k, v) in [
        ("overhead", s.overhead as i64),
        ("mpu", s.mpu as i64),
        ("mtu", s.mtu as i64),
        ("tsize", s.tsize as i64),
    ] {
        if v != 0 {
            m.insert(k.into(), v.into());
        }
    }
    serde_json::Value::Object(m)
}

pub fn print(s: &SizeSpec) -> String {
    let mut out = String::from(" ");
    if s.linklayer != 0 {
        let ll = match s.linklayer {
            ETHERNET => "ethernet",
            ATM => "atm",
            _ => "unknown",
        };
        out.push_str(&format!("linklayer {ll} "));
    }
    if s.overhead != 0 {
        out.push_str(&format!("overhead {} ", s.overhead));
    }
    if s.mpu != 0 {
        out.push_str(&format!("mpu {} ", s.mpu));
    }
    if s.mtu != 0 {
        out.push_str(&format!("mtu {} ", s.mtu));
    }
    if s.tsize != 0 {
        out.push_str(&format!("tsize {} ", s.tsize));
    }
    out
}
