//! `basic` (`f_basic.c`): an ematch tree ([`crate::ematch`]) and its actions and class; and its printer.

use super::*;

pub(super) const BASIC_USAGE: &str = "Usage: ... basic [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]\n\nWhere:\tSELECTOR := SAMPLE SAMPLE ...\n\tFILTERID := X:Y:Z\n\tACTION_SPEC := ... look at individual actions\n\nNOTE: CLASSID is parsed as hexadecimal input.";

/// `basic_parse_opt`.
pub(super) fn parse_basic(
    handle: Option<&str>,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => strtol_handle(s)?,
        None => 0,
    };
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = BasicOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "match") {
            if let Some(t) = filter_ematch(c)? {
                o.ematches = Some(t);
            }
            continue;
        } else if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if w == "help" {
            return Err(Failure::options(BASIC_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{BASIC_USAGE}")));
        }
        c.fwd();
    }
    Ok((h, Some(FilterOptions::Basic(o))))
}

/// `basic_print_opt`.
pub(super) fn print(
    b: &tclab_core::filter::basic::BasicFilter,
    flags: ShowFlags,
    now: Nanos,
    p: &mut Printer,
) {
    if b.handle != 0 {
        p.hex("handle", format_args!("handle {:#x} ", b.handle), b.handle);
    }
    if b.classid != 0 {
        let c = sprint_classid(b.classid);
        p.string("flowid", format_args!("flowid {c} "), &c);
    }
    // print_ematch writes with fprintf.
    let mut em = String::new();
    crate::ematch::print_ematch(&b.ematches, &mut em);
    p.raw(&em);
    print_exts(&b.exts, flags, now, p);
}
