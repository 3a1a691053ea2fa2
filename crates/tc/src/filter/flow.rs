//! `flow` (`f_flow.c`): classes from packet keys, by map or by hash; and its printer, which writes with
//! `fprintf` as tc's does.

use super::*;

pub(super) const FLOW_USAGE: &str = "Usage: ... flow ...\n\n [mapping mode]: map key KEY [ OPS ] ...\n [hashing mode]: hash keys KEY-LIST ... [ perturb SECS ]\n\n                 [ divisor NUM ] [ baseclass ID ] [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ]\n\nKEY-LIST := [ KEY-LIST , ] KEY\nKEY      := [ src | dst | proto | proto-src | proto-dst | iif | priority |\n              mark | nfct | nfct-src | nfct-dst | nfct-proto-src |\n              nfct-proto-dst | rt-classid | sk-uid | sk-gid |\n              vlan-tag | rxhash ]\nOPS      := [ or NUM | and NUM | xor NUM | rshift NUM | addend NUM ]\nID       := X:Y";

/// `flow_parse_keys`: comma-separated key names, each a prefix of one (the first that fits).
pub(super) fn flow_keys(s: &str) -> Result<u32> {
    let mut keys = 0;
    for k in s.split(',') {
        match KEY_NAMES.iter().position(|n| matches(k, n)) {
            Some(i) => keys |= 1 << i,
            None => return Err(Failure::options(format!("Unknown flow key \"{k}\""))),
        }
    }
    Ok(keys)
}

/// `get_addend`: a number, or for address keys an address (its last 32 bits), optionally negated.
pub(super) fn flow_addend(v: &str, keys: u32) -> Option<u32> {
    let (neg, v) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v),
    };
    let n = match get_u32(v, 0) {
        Some(n) => n,
        // tc tests `keys & (FLOW_KEY_SRC | FLOW_KEY_DST | FLOW_KEY_NFCT_SRC | FLOW_KEY_NFCT_DST)`, the
        // enum values (0|1|9|10 = 11) rather than their bits: src, dst and proto-src.
        None if keys & 11 != 0 => {
            if let Ok(a) = v.parse::<std::net::Ipv4Addr>() {
                u32::from(a)
            } else if let Ok(a) = v.parse::<std::net::Ipv6Addr>() {
                let o = a.octets();
                u32::from_be_bytes([o[12], o[13], o[14], o[15]])
            } else {
                return None;
            }
        }
        None => return None,
    };
    Some(if neg { n.wrapping_neg() } else { n })
}

/// `flow_parse_opt`.
pub(super) fn parse_flow(
    handle: Option<&str>,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => get_u32(s, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?,
        None => 0,
    };
    let mut o = FlowOptions::default();
    let (mut mask, mut xor, mut keys, mut mode) = (u32::MAX, 0u32, 0u32, cflow::MODE_MAP);
    let num = |c: &mut Cur, what: &str| -> Result<u32> {
        let v = c.next_arg()?;
        get_u32(v, 0).ok_or_else(|| Failure::options(format!("Illegal \"{what}\"")))
    };
    let mut bitop = |m: u32, x: u32| {
        xor = x ^ (xor & m);
        mask &= m;
    };
    while let Some(w) = c.peek() {
        if matches(w, "map") {
            mode = cflow::MODE_MAP;
        } else if matches(w, "hash") {
            mode = cflow::MODE_HASH;
        } else if matches(w, "keys") {
            let v = c.next_arg()?;
            keys = flow_keys(v)?;
            o.keys = Some(keys);
        } else if matches(w, "and") {
            let t = num(c, "mask")?;
            bitop(t, 0);
        } else if matches(w, "or") {
            let t = num(c, "or")?;
            bitop(!t, t);
        } else if matches(w, "xor") {
            let t = num(c, "xor")?;
            bitop(u32::MAX, t);
        } else if matches(w, "rshift") {
            o.rshift = Some(num(c, "rshift")?);
        } else if matches(w, "addend") {
            let v = c.next_arg()?;
            o.addend =
                Some(flow_addend(v, keys).ok_or_else(|| Failure::options("Illegal \"addend\""))?);
        } else if matches(w, "divisor") {
            o.divisor = Some(num(c, "divisor")?);
        } else if matches(w, "baseclass") {
            let v = c.next_arg()?;
            o.baseclass = Some(
                get_tc_classid(v)
                    .filter(|b| b & 0xffff != 0)
                    .ok_or_else(|| Failure::options("Illegal \"baseclass\""))?,
            );
        } else if matches(w, "perturb") {
            o.perturb = Some(num(c, "perturb")?);
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "match") {
            if let Some(t) = filter_ematch(c)? {
                o.ematches = Some(t);
            }
            continue;
        } else if matches(w, "help") {
            return Err(Failure::options(FLOW_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{FLOW_USAGE}")));
        }
        c.fwd();
    }
    if keys.count_ones() > 1 && mode != cflow::MODE_HASH {
        return Err(Failure::options("Invalid mode \"map\" for multiple keys"));
    }
    o.mode = Some(mode);
    if mask != u32::MAX || xor != 0 {
        o.mask_xor = Some((mask, xor));
    }
    Ok((h, Some(FilterOptions::Flow(o))))
}

/// `flow_print_opt`.
pub(super) fn print(
    f: &tclab_core::filter::flow::FlowFilter,
    flags: ShowFlags,
    now: Nanos,
    p: &mut Printer,
) {
    // flow_print_opt writes with fprintf throughout.
    let _ = write!(p, "handle {:#x} ", f.handle);
    match f.mode {
        cflow::MODE_MAP => p.raw("map "),
        cflow::MODE_HASH => p.raw("hash "),
        _ => {}
    }
    p.raw("keys ");
    let names: Vec<&str> = (0..KEY_NAMES.len())
        .filter(|i| f.keymask & (1 << i) != 0)
        .map(|i| KEY_NAMES[i])
        .collect();
    let _ = write!(p, "{} ", names.join(","));
    if f.mask != u32::MAX || f.xor != 0 {
        let or = (f.mask & f.xor) ^ f.xor;
        let xor = f.mask & f.xor;
        if f.mask != u32::MAX {
            let _ = write!(p, "and 0x{:08x} ", f.mask);
        }
        if xor != 0 {
            let _ = write!(p, "xor 0x{xor:08x} ");
        }
        if or != 0 {
            let _ = write!(p, "or 0x{or:08x} ");
        }
    }
    if f.rshift != 0 {
        let _ = write!(p, "rshift {} ", f.rshift);
    }
    if f.addend != 0 {
        let _ = write!(p, "addend {:#x} ", f.addend);
    }
    if f.divisor != 0 {
        let _ = write!(p, "divisor {} ", f.divisor);
    }
    if f.baseclass != 0 {
        let _ = write!(p, "baseclass {} ", sprint_classid(f.baseclass));
    }
    if f.perturb != 0 {
        let _ = write!(p, "perturb {}sec ", f.perturb);
    }
    if !f.ematches.is_empty() {
        let mut em = String::new();
        crate::ematch::print_ematch(&f.ematches, &mut em);
        p.raw(&em);
    }
    if f.exts.police_compat {
        if let Some(a) = f.exts.actions.first() {
            print_police_compat(p, &a.borrow(), flags, now);
        }
    } else if !f.exts.actions.is_empty() {
        p.raw("\n");
        print_exts(&f.exts, flags, now, p);
    }
}
