//! `fw` (`f_fw.c`): the packet mark (under the handle's mask) as the filter's handle; and its printer,
//! which writes with `fprintf` (text even in a JSON listing), as tc's does.

use super::*;

pub(super) const FW_USAGE: &str = "Usage: ... fw [ classid CLASSID ] [ indev DEV ] [ action ACTION_SPEC ]\n\tCLASSID := Push matching packets to the class identified by CLASSID with format X:Y\n\t\tCLASSID is parsed as hexadecimal input.\n\tDEV := specify device for incoming device classification.\n\tACTION_SPEC := Apply an action on matching packets.\n\tNOTE: handle is represented as HANDLE[/FWMASK].\n\t\tFWMASK is 0xffffffff by default.";

/// `fw_parse_opt`.
pub(super) fn parse_fw(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let mut h = 0;
    let mut mask = None;
    if let Some(s) = handle {
        let (id, m) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        h = get_u32(id, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?;
        if let Some(m) = m {
            mask = Some(get_u32(m, 0).ok_or_else(|| Failure::options("Illegal \"handle\" mask"))?);
        }
    }
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = FwOptions {
        mask,
        ..Default::default()
    };
    while let Some(w) = c.peek() {
        if matches(w, "classid") || matches(w, "flowid") {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "fw \"action\"")?;
            continue;
        } else if w == "indev" {
            let v = c
                .next_arg()
                .map_err(|_| Failure::options("Illegal indev"))?;
            o.indev = Some(v.to_string());
        } else if w == "help" {
            return Err(Failure::options(FW_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{FW_USAGE}")));
        }
        c.fwd();
    }
    Ok((h, Some(FilterOptions::Fw(o))))
}

/// `fw_print_opt`.
pub(super) fn print(
    f: &tclab_core::filter::fw::FwFilter,
    mask: Option<u32>,
    flags: ShowFlags,
    now: Nanos,
    p: &mut Printer,
) {
    // fw_print_opt writes with fprintf: text even in a JSON listing, as tc does.
    match mask {
        Some(m) if m != u32::MAX => {
            let _ = write!(p, "handle {:#x}/{:#x} ", f.id, m);
        }
        _ => {
            let _ = write!(p, "handle {:#x} ", f.id);
        }
    }
    if let Some(cl) = f.classid {
        let _ = write!(p, "classid {} ", sprint_classid(cl));
    }
    if f.exts.police_compat {
        if let Some(a) = f.exts.actions.first() {
            print_police_compat(p, &a.borrow(), flags, now);
        }
    }
    if let Some(d) = &f.indev {
        let _ = write!(p, "input dev {d} ");
    }
    if !f.exts.police_compat && !f.exts.actions.is_empty() {
        p.raw("\n");
        print_exts(&f.exts, flags, now, p);
    }
}
