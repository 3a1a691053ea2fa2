//! `matchall` (`f_matchall.c`): every packet, its actions and class; and its printer.

use super::*;

pub(super) const MATCHALL_USAGE: &str = "Usage: ... matchall [skip_sw | skip_hw]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]\n\nWhere: SELECTOR := SAMPLE SAMPLE ...\n       FILTERID := X:Y:Z\n       ACTION_SPEC := ... look at individual actions\n\nNOTE: CLASSID is parsed as hexadecimal input.";

/// `matchall_parse_opt`.
pub(super) fn parse_matchall(
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
    let mut o = MatchallOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if w == "skip_hw" {
            c.fwd();
            o.flags |= CLS_FLAGS_SKIP_HW;
            continue;
        } else if w == "skip_sw" {
            c.fwd();
            o.flags |= CLS_FLAGS_SKIP_SW;
            continue;
        } else if w == "help" {
            return Err(Failure::options(MATCHALL_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{w}\"?\n{MATCHALL_USAGE}"
            )));
        }
        c.fwd();
    }
    if o.flags == CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW {
        return Err(Failure::options(
            "skip_hw and skip_sw are mutually exclusive",
        ));
    }
    o.exts.cls_flags = cls_to_act_flags(o.flags);
    Ok((h, Some(FilterOptions::Matchall(o))))
}

/// `matchall_print_opt`.
pub(super) fn print(
    m: &tclab_core::filter::matchall::MatchallFilter,
    flags: ShowFlags,
    now: Nanos,
    p: &mut Printer,
) {
    p.number("handle", format_args!("handle {:#x} ", m.handle), m.handle);
    if let Some(cl) = m.classid {
        let c = sprint_classid(cl);
        p.string("flowid", format_args!("flowid {c} "), &c);
    }
    if m.flags & CLS_FLAGS_SKIP_HW != 0 {
        p.boolean("skip_hw", "\n  skip_hw", true);
    }
    if m.flags & CLS_FLAGS_SKIP_SW != 0 {
        p.boolean("skip_sw", "\n  skip_sw", true);
    }
    if m.flags & CLS_FLAGS_NOT_IN_HW != 0 {
        p.boolean("not_in_hw", "\n  not_in_hw", true);
    }
    print_exts(&m.exts, flags, now, p);
}
