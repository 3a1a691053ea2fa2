//! `nat` (`m_nat.c`): `nat ingress|egress OLD[/LEN] NEW [CONTROL] [index N]`; and its printer.
//!
//! Two of tc 6.1's x86 behaviours are kept, as tc 6.1 shows them: the mask of a prefix of length 0
//! (`default`, `any`, `all`) is `~0u << 32`, which x86 computes as all ones (a /32); and the printer takes
//! the mask's first set bit (`ffs`) from the network-order word as x86 loads it, so any mask whose first
//! octet has its low bit set prints as /32 (`10.0.0.0/8` shows as `10.0.0.0/32`; fixed in iproute2 6.14).
//! From iproute2 6.3 (the kernel's tdc cases need it): `nat index N` alone names an existing action.

use super::*;
use tclab_core::action::nat::Nat;

pub(super) const NAT_USAGE: &str =
    "Usage: ... nat NAT\nNAT := DIRECTION OLD NEW\nDIRECTION := { ingress | egress }\nOLD := PREFIX\nNEW := ADDRESS";

/// `parse_nat_args`: direction, OLD prefix, NEW address.
fn parse_nat_args(c: &mut Cur, n: &mut Nat) -> Result<Option<()>> {
    let Some(w) = c.peek() else { return Ok(None) };
    if matches(w, "egress") {
        n.egress = true;
    } else if !matches(w, "ingress") {
        return Ok(None);
    }
    let old = c.next_arg()?;
    let Some((addr, bits)) = crate::util::get_prefix_ipv4(old) else {
        return Ok(None);
    };
    n.old_addr = addr;
    // `htonl(~0u << (32 - bitlen))`, the shift count taken modulo 32 as x86 takes it.
    n.mask = u32::MAX << ((32 - bits) & 31);
    let new = c.next_arg()?;
    let Some((addr, _)) = crate::util::get_prefix_ipv4(new) else {
        return Ok(None);
    };
    n.new_addr = addr;
    c.fwd();
    Ok(Some(()))
}

/// `parse_nat`.
pub(super) fn parse_nat(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut n = Nat {
        action: TC_ACT_OK,
        old_addr: 0,
        new_addr: 0,
        mask: 0,
        egress: false,
    };
    let mut ok = 0;
    let mut index_only = false;
    while let Some(w) = c.peek() {
        if matches(w, "nat") {
            let next = c.next_arg()?;
            if next == "index" {
                index_only = true;
                break;
            }
            if parse_nat_args(c, &mut n)?.is_none() {
                let at = c.peek().unwrap_or("(null)");
                return Err(bad(format!("Illegal nat construct ({at})\n{NAT_USAGE}")));
            }
            ok += 1;
        } else if matches(w, "help") {
            return Err(Failure::syntax(NAT_USAGE));
        } else {
            break;
        }
    }
    if !index_only {
        if ok == 0 {
            return Err(bad(NAT_USAGE));
        }
        n.action = control_or(c, n.action)?;
    }
    let index = index_arg(c, 10, |_| "Nat: Illegal \"index\"".into())?.unwrap_or(0);
    Ok((ActionParams::Nat(n), index))
}

/// `print_nat`.
pub(super) fn print(p: &mut Printer, a: &Action, n: &Nat, flags: ShowFlags, now: u64) {
    p.string("type", " nat ", "nat");
    // `ffs(sel->mask)` on the network-order word as x86 loads it.
    let le = n.mask.swap_bytes();
    let len = if le == 0 {
        0
    } else {
        33 - (le.trailing_zeros() + 1)
    };
    let dir = if n.egress { "egress" } else { "ingress" };
    p.string("direction", dir, dir);
    let old = format!("{}/{len}", std::net::Ipv4Addr::from(n.old_addr));
    p.string("old_addr", format_args!(" {old}"), &old);
    let new = std::net::Ipv4Addr::from(n.new_addr).to_string();
    p.string("new_addr", format_args!(" {new}"), &new);
    print_control(p, " ", n.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
