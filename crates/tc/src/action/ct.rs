//! `ct` (`m_ct.c`): `ct clear | ct [commit [force]] [zone ZONE] [mark MARK[/MASK]] [label
//! LABEL[/MASK]] [nat [src|dst addr A1[-A2] [port P1[-P2]]]] [index N] [CONTROL]`, the words in any
//! order, with tc's messages and its checks of the combination; and its printer (nothing but `clear`
//! for a clear action, whose other attributes the kernel does not dump; mark and labels only with a
//! non-zero mask). `helper` (conntrack helpers, which tclab's conntrack does not have) is not taken.

use super::tunnel_key::{get_addr, hex2mem};
use super::*;
use std::net::IpAddr;
use tclab_core::action::ct::{
    Ct, CtNat, CT_ACT_CLEAR, CT_ACT_COMMIT, CT_ACT_FORCE, CT_ACT_NAT, CT_ACT_NAT_DST,
    CT_ACT_NAT_SRC,
};

pub(super) const CT_USAGE: &str = "Usage: ct clear\n\tct commit [force] [zone ZONE] [mark MASKED_MARK] [label MASKED_LABEL] [nat NAT_SPEC]\n\tct [nat] [zone ZONE]\nWhere: ZONE is the conntrack zone table number\n\tNAT_SPEC is {src|dst} addr addr1[-addr2] [port port1[-port2]]\n";

/// `ct_parse_nat_addr_range`: `A1[-A2]`, the second of the first's family (`get_addr`'s exit 1
/// otherwise).
fn nat_addr_range(s: &str) -> Result<(IpAddr, IpAddr)> {
    let (a1, a2) = match s.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let min = get_addr(a1)?;
    let max = match a2 {
        None => min,
        Some(b) => match get_addr(b) {
            Ok(m) if m.is_ipv4() == min.is_ipv4() => m,
            _ => {
                let fam = if min.is_ipv4() { "inet" } else { "inet6" };
                return Err(Failure::exit(
                    1,
                    format!("Error: {fam} address is expected rather than \"{b}\"."),
                ));
            }
        },
    };
    Ok((min, max))
}

/// `ct_parse_nat_port_range`: `P1[-P2]` in decimal.
fn nat_port_range(s: &str) -> Option<(u16, u16)> {
    let (p1, p2) = match s.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let min = get_u16(p1, 10)?;
    let max = match p2 {
        Some(b) => get_u16(b, 10)?,
        None => min,
    };
    Some((min, max))
}

/// `ct_parse_labels`: up to 32 hex digits, an optional mask of as many; both sent as the bytes given
/// (the kernel zero-fills them to 128 bits), the mask all ones when none is given.
fn parse_labels(s: &str) -> Result<([u8; 16], [u8; 16])> {
    parse_labels_as(s, "ct: ")
}

/// [`parse_labels`] with the messages' prefix: flower's `flower_parse_ct_labels` is the same parser
/// without one.
pub(crate) fn parse_labels_as(s: &str, who: &str) -> Result<([u8; 16], [u8; 16])> {
    let (label, mask) = match s.split_once('/') {
        Some((l, m)) => (l, Some(m)),
        None => (s, None),
    };
    if label.len() > 32 || mask.is_some_and(|m| m.len() > 32) {
        return Err(invarg(
            &format!("{} Max allowed size 32", label.len()),
            label,
        ));
    }
    let mut out = ([0u8; 16], [0xffu8; 16]);
    // tc's messages end in a newline of their own, and `invarg` adds another: a blank line follows.
    let l = hex2mem(label)
        .ok_or_else(|| invarg(&format!("{who}labels must be a hex string\n\n"), label))?;
    out.0[..l.len()].copy_from_slice(&l);
    if let Some(m) = mask {
        let b = hex2mem(m)
            .ok_or_else(|| invarg(&format!("{who}labels mask must be a hex string\n\n"), m))?;
        out.1 = [0; 16];
        out.1[..b.len()].copy_from_slice(&b);
    }
    Ok(out)
}

/// `ct_parse_mark`: `MARK[/MASK]`, both `get_u32(…, 0)`.
fn parse_mark(s: &str) -> Option<(u32, u32)> {
    match s.split_once('/') {
        Some((v, m)) => Some((get_u32(v, 0)?, get_u32(m, 0)?)),
        None => Some((get_u32(s, 0)?, u32::MAX)),
    }
}

/// `parse_ct`.
pub(super) fn parse_ct(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut ct = Ct {
        action: TC_ACT_PIPE,
        ct_action: 0,
        zone: 0,
        mark: 0,
        mark_mask: 0,
        labels: [0; 16],
        labels_mask: [0; 16],
        nat: CtNat {
            addr: None,
            ports: None,
        },
    };
    let mut index = 0;
    if c.peek().is_some_and(|w| matches(w, "ct")) {
        c.fwd();
    }
    while let Some(w) = c.peek() {
        if matches(w, "zone") {
            let v = c.next_arg()?;
            ct.zone = get_u16(v, 0).ok_or_else(|| bad("ct: Illegal \"zone\""))?;
        } else if matches(w, "nat") {
            ct.ct_action |= CT_ACT_NAT;
            let v = c.next_arg()?;
            if matches(v, "src") {
                ct.ct_action |= CT_ACT_NAT_SRC;
            } else if matches(v, "dst") {
                ct.ct_action |= CT_ACT_NAT_DST;
            } else {
                // A bare `nat`: the word after it is read again.
                continue;
            }
            if !matches(c.next_arg()?, "addr") {
                return Err(Failure::syntax(CT_USAGE));
            }
            // A malformed address ends tc in get_addr (exit 1), before parse_ct's own message.
            ct.nat.addr = Some(nat_addr_range(c.next_arg()?)?);
            if !matches(c.next_arg()?, "port") {
                continue;
            }
            ct.nat.ports = Some(
                nat_port_range(c.next_arg()?).ok_or_else(|| bad("ct: Illegal nat port range"))?,
            );
        } else if matches(w, "clear") {
            ct.ct_action |= CT_ACT_CLEAR;
        } else if matches(w, "commit") {
            ct.ct_action |= CT_ACT_COMMIT;
        } else if matches(w, "force") {
            ct.ct_action |= CT_ACT_FORCE;
        } else if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| bad("ct: Illegal \"index\""))?;
        } else if matches(w, "mark") {
            let v = c.next_arg()?;
            (ct.mark, ct.mark_mask) = parse_mark(v).ok_or_else(|| bad("ct: Illegal \"mark\""))?;
        } else if matches(w, "label") {
            (ct.labels, ct.labels_mask) = parse_labels(c.next_arg()?)?;
        } else if matches(w, "help") {
            return Err(Failure::syntax(CT_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    let a = ct.ct_action;
    let has = |f: u16| a & f != 0;
    if has(CT_ACT_CLEAR) && a & !CT_ACT_CLEAR != 0 {
        return Err(bad("ct: clear can only be used alone"));
    }
    if has(CT_ACT_NAT_SRC) && has(CT_ACT_NAT_DST) {
        return Err(bad("ct: src and dst nat can't be used together"));
    }
    if has(CT_ACT_COMMIT) && has(CT_ACT_NAT) && !has(CT_ACT_NAT_SRC | CT_ACT_NAT_DST) {
        return Err(bad("ct: commit and nat must set src or dst"));
    }
    if !has(CT_ACT_COMMIT) && has(CT_ACT_NAT_SRC | CT_ACT_NAT_DST) {
        return Err(bad("ct: src or dst is only valid if commit is set"));
    }
    ct.action = control_or(c, ct.action)?;
    Ok((ActionParams::Ct(ct), index))
}

/// `print_masked_u32`/`_u16` without a newline: ` NAME V[/0xM]`; in JSON the value and `NAME_mask`.
fn print_masked(p: &mut Printer, name: &str, v: u32, m: u32, full: u32) {
    if p.is_json() {
        p.number(name, "", v);
        if m != full {
            p.number(&format!("{name}_mask"), "", m);
        }
    } else if m != full {
        p.fp(format_args!(" {name} {v}/{m:#x}"));
    } else {
        p.fp(format_args!(" {name} {v}"));
    }
}

/// `hexstring_n2a`: two lowercase digits a byte.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `ct_print_nat`'s text: `src|dst[ addr A1[-A2]][ port P1[-P2]]` (a maximum only where it differs).
fn nat_text(ct: &Ct) -> String {
    let mut out = String::new();
    if ct.has(CT_ACT_NAT_SRC) {
        out.push_str("src");
    } else if ct.has(CT_ACT_NAT_DST) {
        out.push_str("dst");
    } else {
        return out;
    }
    if let Some((min, max)) = ct.nat.addr {
        let _ = write!(out, " addr {min}");
        if max != min {
            let _ = write!(out, "-{max}");
        }
    }
    if let Some((min, max)) = ct.nat.ports {
        let _ = write!(out, " port {min}");
        if max != min {
            let _ = write!(out, "-{max}");
        }
    }
    out
}

/// `print_ct`.
pub(super) fn print(p: &mut Printer, a: &Action, ct: &Ct, flags: ShowFlags, now: u64) {
    p.string("kind", "ct", "ct");
    if ct.has(CT_ACT_COMMIT) {
        let s = if ct.has(CT_ACT_FORCE) {
            "commit force"
        } else {
            "commit"
        };
        p.string("action", format_args!(" {s}"), s);
    } else if ct.has(CT_ACT_CLEAR) {
        p.string("action", " clear", "clear");
    }
    // tcf_ct_dump skips everything else for clear, and a key whose mask is zero.
    if !ct.has(CT_ACT_CLEAR) {
        if ct.mark_mask != 0 {
            print_masked(p, "mark", ct.mark, ct.mark_mask, u32::MAX);
        }
        print_masked(p, "zone", u32::from(ct.zone), 0xffff, 0xffff);
        if ct.labels_mask.iter().any(|b| *b != 0) {
            let mut s = hex(&ct.labels);
            if ct.labels_mask.iter().any(|b| *b != 0xff) {
                s.push('/');
                s.push_str(&hex(&ct.labels_mask));
            }
            p.string("label", format_args!(" label {s}"), &s);
        }
        if ct.has(CT_ACT_NAT) {
            let s = nat_text(ct);
            if s.is_empty() {
                p.string("nat", " nat", "");
            } else {
                p.string("nat", format_args!(" nat {s}"), &s);
            }
        }
    }
    print_control(p, " ", ct.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
