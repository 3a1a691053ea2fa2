//! `mpls` (`m_mpls.c`): `mpls pop protocol P | push [protocol P] label L [tc T] [ttl N] [bos B] |
//! mac_push … | modify [label L] [tc T] [ttl N] [bos B] | dec_ttl [CONTROL] [index N]`, with tc's
//! messages; and its printer (what `tcf_mpls_dump` dumps: the protocol always, TTL when kept).

use super::*;
use tclab_core::action::mpls::{
    Mpls, ACT_DEC_TTL, ACT_MAC_PUSH, ACT_MODIFY, ACT_POP, ACT_PUSH, ETH_P_MPLS_MC, ETH_P_MPLS_UC,
};

pub(super) const MPLS_USAGE: &str = "Usage: mpls pop [ protocol MPLS_PROTO ] [CONTROL]\n       mpls push [ protocol MPLS_PROTO ] [ label MPLS_LABEL ] [ tc MPLS_TC ]\n                 [ ttl MPLS_TTL ] [ bos MPLS_BOS ] [CONTROL]\n       mpls mac_push [ protocol MPLS_PROTO ] [ label MPLS_LABEL ] [ tc MPLS_TC ]\n                     [ ttl MPLS_TTL ] [ bos MPLS_BOS ] [CONTROL]\n       mpls modify [ label MPLS_LABEL ] [ tc MPLS_TC ] [ ttl MPLS_TTL ]\n                   [ bos MPLS_BOS ] [CONTROL]\n           for pop, MPLS_PROTO is next header of packet - e.g. ip or mpls_uc\n           for push and mac_push, MPLS_PROTO is one of mpls_uc or mpls_mc\n               with default: mpls_uc\n       CONTROL := reclassify | pipe | drop | continue | pass |\n                  goto chain <CHAIN_INDEX>";

/// `action_names`, in `parse_mpls`'s order of trial.
const OPS: [(&str, u32); 5] = [
    ("pop", ACT_POP),
    ("push", ACT_PUSH),
    ("modify", ACT_MODIFY),
    ("mac_push", ACT_MAC_PUSH),
    ("dec_ttl", ACT_DEC_TTL),
];

fn op_name(op: u32) -> &'static str {
    OPS.iter()
        .find(|(_, o)| *o == op)
        .map_or("(null)", |(n, _)| n)
}

/// `get_u8(…, 0)`.
fn get_u8(s: &str) -> Option<u8> {
    get_u32(s, 0).and_then(|v| u8::try_from(v).ok())
}

/// `parse_mpls`.
pub(super) fn parse_mpls(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut m = Mpls {
        action: TC_ACT_PIPE,
        op: 0,
        label: None,
        tc: None,
        ttl: None,
        bos: None,
        proto: None,
    };
    c.next_arg()?;
    let fields = |op| op == ACT_PUSH || op == ACT_MAC_PUSH || op == ACT_MODIFY;
    while let Some(w) = c.peek() {
        if let Some(&(_, op)) = OPS.iter().find(|(n, _)| matches(w, n)) {
            if m.op != 0 {
                return Err(bad(format!(
                    "Error: got \"{w}\" but action already set to \"{}\"\n{MPLS_USAGE}",
                    op_name(m.op)
                )));
            }
            m.op = op;
        } else if ["label", "tc", "ttl", "bos"].iter().any(|k| matches(w, k)) {
            if !fields(m.op) {
                return Err(invarg("only valid for push, mac_push and modify", w));
            }
            let a = c.next_arg()?;
            if matches(w, "label") {
                let l = get_u32(a, 0)
                    .filter(|l| *l <= 0xfffff)
                    .ok_or_else(|| invarg("label must be <=0xFFFFF", a))?;
                m.label = Some(l);
            } else if matches(w, "tc") {
                let t = get_u8(a)
                    .filter(|t| *t <= 7)
                    .ok_or_else(|| invarg("tc field is 3 bits max", a))?;
                m.tc = Some(t);
            } else if matches(w, "ttl") {
                let t = get_u8(a)
                    .filter(|t| *t != 0)
                    .ok_or_else(|| invarg("ttl must be >0 and <=255", a))?;
                m.ttl = Some(t);
            } else {
                let b = get_u8(a)
                    .filter(|b| *b <= 1)
                    .ok_or_else(|| invarg("bos must be 0 or 1", a))?;
                m.bos = Some(b);
            }
        } else if matches(w, "protocol") {
            if !matches!(m.op, ACT_PUSH | ACT_MAC_PUSH | ACT_POP) {
                return Err(invarg("only valid for push, mac_push and pop", w));
            }
            let a = c.next_arg()?;
            m.proto =
                Some(crate::filter::proto_a2n(a).ok_or_else(|| invarg("protocol is invalid", a))?);
        } else if matches(w, "help") {
            return Err(Failure::syntax(MPLS_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    if m.op == 0 {
        return Err(Failure::syntax(
            "Command line is not complete. Try option \"help\"",
        ));
    }
    m.action = control_or(c, m.action)?;
    let mut index = 0;
    if c.peek().is_some_and(|w| matches(w, "index")) {
        let v = c.next_arg()?;
        index = get_u32(v, 10).ok_or_else(|| invarg("illegal index", v))?;
        c.fwd();
    }
    let missarg = |k: &str| Failure::syntax(format!("Error: argument \"{k}\" is required"));
    if m.op == ACT_PUSH && m.label.is_none() {
        return Err(missarg("label"));
    }
    if let (ACT_PUSH | ACT_MAC_PUSH, Some(p)) = (m.op, m.proto) {
        if p != ETH_P_MPLS_UC && p != ETH_P_MPLS_MC {
            return Err(bad(format!(
                "invalid {}push protocol \"0x{p:04x}\" - use mpls_(uc|mc)",
                if m.op == ACT_MAC_PUSH { "mac_" } else { "" }
            )));
        }
    }
    if m.op == ACT_POP && m.proto.is_none() {
        return Err(missarg("protocol"));
    }
    Ok((ActionParams::Mpls(m), index))
}

/// `print_mpls`.
pub(super) fn print(p: &mut Printer, a: &Action, m: &Mpls, flags: ShowFlags, now: u64) {
    p.string("kind", "mpls ", "mpls");
    let name = op_name(m.op);
    p.string("mpls_action", format_args!(" {name}"), name);
    if matches!(m.op, ACT_POP | ACT_PUSH | ACT_MAC_PUSH) {
        let proto = crate::filter::proto_n2a(m.kept_proto());
        p.string("protocol", format_args!(" protocol {proto}"), &proto);
    }
    if matches!(m.op, ACT_PUSH | ACT_MAC_PUSH | ACT_MODIFY) {
        if let Some(l) = m.label {
            p.number("label", format_args!(" label {l}"), l);
        }
        if let Some(t) = m.tc {
            p.number("tc", format_args!(" tc {t}"), t);
        }
        if let Some(b) = m.bos {
            p.number("bos", format_args!(" bos {b}"), b);
        }
        let ttl = m.kept_ttl();
        if ttl != 0 {
            p.number("ttl", format_args!(" ttl {ttl}"), ttl);
        }
    }
    print_control(p, " ", m.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
