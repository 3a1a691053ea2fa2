//! `cgroup` (`f_cgroup.c`): an ematch tree ([`crate::ematch`]) and actions; the class is the sending
//! cgroup's. Its printer writes with `fprintf` (text even in a JSON listing), as tc's does.

use super::*;
use tclab_core::filter::cgroup::{CgroupFilter, CgroupOptions};

pub(super) const CGROUP_USAGE: &str =
    "Usage: ... cgroup [ match EMATCH_TREE ]\n                  [ action ACTION_SPEC ]";

/// `cgroup_parse_opt`: the options go to the kernel even when there are none.
pub(super) fn parse_cgroup(
    handle: Option<&str>,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => strtol_handle(s)?,
        None => 0,
    };
    let mut o = CgroupOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "match") {
            if let Some(t) = filter_ematch(c)? {
                o.ematches = Some(t);
            }
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
        } else if w == "help" {
            return Err(Failure::options(CGROUP_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{w}\"?\n{CGROUP_USAGE}"
            )));
        }
    }
    Ok((h, Some(FilterOptions::Cgroup(o))))
}

/// `cgroup_print_opt`.
pub(super) fn print(f: &CgroupFilter, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if f.handle != 0 {
        let _ = write!(p, "handle {:#x} ", f.handle);
    }
    let mut em = String::new();
    crate::ematch::print_ematch(&f.ematches, &mut em);
    p.raw(&em);
    print_exts(&f.exts, flags, now, p);
}
