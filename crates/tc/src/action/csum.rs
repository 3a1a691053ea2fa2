//! `csum` (`m_csum.c`): `csum TARGET… [CONTROL] [index N]`, the targets `iph`/`ip4h`/`ipv4h`, `icmp`, `igmp`,
//! `tcp`, `udp`, `udplite`, `sctp` joined by any of `and`, `or`, `+`; and its printer. From iproute2 6.3
//! (the kernel's tdc cases need it): `csum index N` alone names an existing action.

use super::*;
use tclab_core::action::csum::{self as ccsum, Csum};

pub(super) const CSUM_USAGE: &str = "Usage: ... csum <UPDATE>\nWhere: UPDATE := <TARGET> [<UPDATE>]\n       TARGET := { ip4h | icmp | igmp | tcp | udp | udplite | sctp | <SWEETS> }\n       SWEETS := { and | or | '+' }";

/// The targets in `parse_csum_args`' order, and the names `print_csum` gives them in its order.
const TARGETS: &[(&[&str], u32)] = &[
    (&["iph", "ip4h", "ipv4h"], ccsum::IPV4HDR),
    (&["icmp"], ccsum::ICMP),
    (&["igmp"], ccsum::IGMP),
    (&["tcp"], ccsum::TCP),
    (&["udp"], ccsum::UDP),
    (&["udplite"], ccsum::UDPLITE),
    (&["sctp"], ccsum::SCTP),
];

/// `parse_csum_args`: targets until a word that is none.
fn parse_csum_args(c: &mut Cur, flags: &mut u32) {
    while let Some(w) = c.peek() {
        if let Some((_, f)) = TARGETS
            .iter()
            .find(|(names, _)| names.iter().any(|n| matches(w, n)))
        {
            *flags |= f;
        } else if !(matches(w, "and") || matches(w, "or") || matches(w, "+")) {
            break;
        }
        c.fwd();
    }
}

/// `parse_csum`.
pub(super) fn parse_csum(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut s = Csum {
        action: TC_ACT_OK,
        update_flags: 0,
    };
    let mut ok = 0;
    let mut index_only = false;
    while let Some(w) = c.peek() {
        if matches(w, "csum") {
            if c.next_arg()? == "index" {
                index_only = true;
                break;
            }
            parse_csum_args(c, &mut s.update_flags);
            ok += 1;
        } else if matches(w, "help") {
            return Err(Failure::syntax(CSUM_USAGE));
        } else {
            break;
        }
    }
    if !index_only {
        if ok == 0 {
            return Err(bad(CSUM_USAGE));
        }
        if s.update_flags == 0 {
            return Err(bad("Illegal csum construct, empty <UPDATE> list"));
        }
        s.action = control_or(c, s.action)?;
    }
    let index = index_arg(c, 10, |v| format!("Illegal \"index\" ({v}) <csum>"))?.unwrap_or(0);
    Ok((ActionParams::Csum(s), index))
}

/// `print_csum`.
pub(super) fn print(p: &mut Printer, a: &Action, s: &Csum, flags: ShowFlags, now: u64) {
    p.string("kind", "csum ", "csum");
    let names: Vec<&str> = TARGETS
        .iter()
        .filter(|(_, f)| s.update_flags & f != 0)
        .map(|(names, _)| names[0])
        .collect();
    let list = if names.is_empty() {
        "?empty".to_string()
    } else {
        names.join(", ")
    };
    p.string("csum", format_args!("({list}) "), &list);
    print_control(p, "action ", s.action, "");
    print_index_refs(p, a, "\tindex ", flags, now);
}
