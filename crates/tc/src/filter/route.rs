//! `route` (`f_route.c`): routing realms (`to`, `from`) or the input interface (`fromif`), the handle
//! built from them as tc builds it; and its printer, which writes with `fprintf` (text even in a JSON
//! listing), as tc's does. Realm names come from iproute2's default `/etc/iproute2/rt_realms`, which
//! names only realm 0 (`cosmos`).

use super::*;
use std::cell::Cell;
use tclab_core::filter::route::{RouteFilter, RouteOptions};

pub(super) const ROUTE_USAGE: &str = "Usage: ... route [ from REALM | fromif TAG ] [ to REALM ]\n                [ classid CLASSID ] [ action ACTION_SPEC ]\n       ACTION_SPEC := ... look at individual actions\n       CLASSID := X:Y\n\nNOTE: CLASSID is parsed as hexadecimal input.";

thread_local! {
    /// `rtnl_rtrealm_init` for the printer: whether a listing has read `rt_realms` yet. Until it has,
    /// tc's table holds only `unknown` for realm 0, a name `rtnl_rtrealm_n2a` prints without reading the
    /// file; the first other realm under 256 reads it, and realm 0 is `cosmos` from then on. (A batch
    /// that parsed a realm name before listing would have read it already; tclab does not follow that.)
    static REALMS_READ: Cell<bool> = const { Cell::new(false) };
}

/// `rtnl_rtrealm_a2n`: a realm's name, or a number up to 255 (base 0).
fn realm_a2n(s: &str) -> Option<u32> {
    if s == "cosmos" {
        return Some(0);
    }
    parse_c_integer(s)
        .filter(|v| (0..=255).contains(v))
        .map(|v| v as u32)
}

/// `rtnl_rtrealm_n2a`.
fn realm_n2a(id: u32) -> String {
    if id == 0 {
        let read = REALMS_READ.with(|r| r.get());
        return if read { "cosmos" } else { "unknown" }.to_string();
    }
    if id < 256 {
        REALMS_READ.with(|r| r.set(true));
    }
    id.to_string()
}

/// `route_parse_opt`. `ifindex` resolves `fromif`'s device (`ll_name_to_index`).
pub(super) fn parse_route(
    handle: Option<&str>,
    c: &mut Cur,
    ifindex: impl Fn(&str) -> Option<u32>,
) -> Result<(u32, Option<FilterOptions>)> {
    let mut h = 0;
    if let Some(s) = handle {
        h = get_u32(s, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?;
    }
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut fh: u32 = 0xffff_8000;
    let mut order = 0;
    let mut o = RouteOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "to") {
            let id = realm_a2n(c.next_arg()?).ok_or_else(|| Failure::options("Illegal \"to\""))?;
            o.to = Some(id);
            fh &= !0x80ff;
            fh |= id & 0xff;
        } else if matches(w, "from") {
            let id =
                realm_a2n(c.next_arg()?).ok_or_else(|| Failure::options("Illegal \"from\""))?;
            o.from = Some(id);
            fh &= 0xffff;
            fh |= id << 16;
        } else if matches(w, "fromif") {
            let name = c.next_arg()?;
            let id = ifindex(name).ok_or_else(|| Failure::options("Illegal \"fromif\""))?;
            o.fromif = Some((id, name.to_string()));
            fh &= 0xffff;
            fh |= (0x8000 | id) << 16;
        } else if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "order") {
            order =
                get_u32(c.next_arg()?, 0).ok_or_else(|| Failure::options("Illegal \"order\""))?;
        } else if w == "help" {
            return Err(Failure::options(ROUTE_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{ROUTE_USAGE}")));
        }
        c.fwd();
    }
    if order != 0 {
        fh &= !0x7f00;
        fh |= (order << 8) & 0x7f00;
    }
    if h == 0 {
        h = fh;
    }
    Ok((h, Some(FilterOptions::Route(o))))
}

/// `route_print_opt`.
pub(super) fn print(f: &RouteFilter, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if f.handle != 0 {
        let _ = write!(p, "fh 0x{:08x} ", f.handle);
    }
    if f.handle & 0x7f00 != 0 {
        let _ = write!(p, "order {} ", (f.handle >> 8) & 0x7f);
    }
    if let Some(cl) = f.classid.filter(|&c| c != 0) {
        let _ = write!(p, "flowid {} ", sprint_classid(cl));
    }
    if let Some(to) = f.to() {
        let _ = write!(p, "to {} ", realm_n2a(to));
    }
    if let Some(from) = f.from() {
        let _ = write!(p, "from {} ", realm_n2a(from));
    }
    if f.has_iif() {
        // `ll_index_to_name`: tclab keeps the name the filter was made with (devices are not renamed).
        match &f.iif_name {
            Some(n) => {
                let _ = write!(p, "fromif {n}");
            }
            None => {
                let _ = write!(p, "fromif if{}", f.iif);
            }
        }
    }
    print_exts(&f.exts, flags, now, p);
}
