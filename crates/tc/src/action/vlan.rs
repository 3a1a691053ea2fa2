//! `vlan` (`m_vlan.c`): `vlan pop | push [protocol P] id ID [priority N] | modify … | pop_eth | push_eth
//! dst_mac A src_mac A [CONTROL] [index N]`, with tc's messages; and its printer.

use super::*;
use tclab_core::action::vlan::{
    Vlan, ACT_MODIFY, ACT_POP, ACT_POP_ETH, ACT_PUSH, ACT_PUSH_ETH, ETH_P_8021AD, ETH_P_8021Q,
};

pub(super) const VLAN_USAGE: &str = "Usage: vlan pop [CONTROL]\n       vlan push [ protocol VLANPROTO ] id VLANID [ priority VLANPRIO ] [CONTROL]\n       vlan modify [ protocol VLANPROTO ] id VLANID [ priority VLANPRIO ] [CONTROL]\n       vlan pop_eth [CONTROL]\n       vlan push_eth dst_mac LLADDR src_mac LLADDR [CONTROL]\n       VLANPROTO is one of 802.1Q or 802.1AD\n            with default: 802.1Q\n       CONTROL := reclassify | pipe | drop | continue | pass |\n                  goto chain <CHAIN_INDEX>";

/// `action_names`.
fn op_name(op: u32) -> &'static str {
    match op {
        ACT_POP => "pop",
        ACT_PUSH => "push",
        ACT_MODIFY => "modify",
        ACT_POP_ETH => "pop_eth",
        ACT_PUSH_ETH => "push_eth",
        _ => "(null)",
    }
}

/// `parse_vlan`.
pub(super) fn parse_vlan(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut v = Vlan {
        action: TC_ACT_PIPE,
        op: 0,
        id: None,
        proto: None,
        prio: None,
        dst_mac: None,
        src_mac: None,
    };
    c.next_arg()?;
    let push_attribs = |op| op == ACT_PUSH || op == ACT_MODIFY;
    while let Some(w) = c.peek() {
        let op = [
            ("pop", ACT_POP),
            ("push", ACT_PUSH),
            ("modify", ACT_MODIFY),
            ("pop_eth", ACT_POP_ETH),
            ("push_eth", ACT_PUSH_ETH),
        ]
        .iter()
        .find(|(n, _)| matches(w, n));
        if let Some(&(_, op)) = op {
            if v.op != 0 {
                return Err(bad(format!(
                    "unexpected \"{w}\" - action already specified\n{VLAN_USAGE}"
                )));
            }
            v.op = op;
        } else if matches(w, "id") || matches(w, "protocol") || matches(w, "priority") {
            if !push_attribs(v.op) {
                return Err(invarg("only valid for push/modify", w));
            }
            let a = c.next_arg()?;
            if matches(w, "id") {
                v.id = Some(get_u16(a, 0).ok_or_else(|| invarg("id is invalid", a))?);
            } else if matches(w, "protocol") {
                let p =
                    crate::filter::proto_a2n(a).ok_or_else(|| invarg("protocol is invalid", a))?;
                v.proto = Some(p);
            } else {
                let p = get_u32(a, 0)
                    .filter(|p| *p <= 7)
                    .ok_or_else(|| invarg("prio is invalid", a))?;
                v.prio = Some(p as u8);
            }
        } else if matches(w, "dst_mac") || matches(w, "src_mac") {
            let dst = matches(w, "dst_mac");
            if v.op != ACT_PUSH_ETH {
                return Err(invarg("only valid for push_eth", w));
            }
            let a = c.next_arg()?;
            let what = if dst {
                "dst_mac is invalid"
            } else {
                "src_mac is invalid"
            };
            let mac = crate::util::ll_addr_a2n(a)
                .map_err(|m| Failure::syntax(format!("{m}{}", invarg(what, a).msg)))?
                .0;
            if dst {
                v.dst_mac = Some(mac);
            } else {
                v.src_mac = Some(mac);
            }
        } else if matches(w, "help") {
            return Err(Failure::syntax(VLAN_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    v.action = control_or(c, v.action)?;
    let index = index_arg(c, 10, |_| "vlan: Illegal \"index\"".into())?.unwrap_or(0);
    let name = op_name(v.op);
    if push_attribs(v.op) && v.id.is_none() {
        return Err(bad(format!("id needs to be set for {name}\n{VLAN_USAGE}")));
    }
    if v.op == ACT_PUSH_ETH {
        for (set, what) in [(v.dst_mac, "dst_mac"), (v.src_mac, "src_mac")] {
            if set.is_none() {
                return Err(bad(format!(
                    "{what} needs to be set for {name}\n{VLAN_USAGE}"
                )));
            }
        }
    }
    if v.proto
        .is_some_and(|p| p != ETH_P_8021Q && p != ETH_P_8021AD)
    {
        return Err(bad(format!("protocol not supported\n{VLAN_USAGE}")));
    }
    Ok((ActionParams::Vlan(v), index))
}

/// `print_vlan`: what `tcf_vlan_dump` dumps (protocol always, priority for a push or when given).
pub(super) fn print(p: &mut Printer, a: &Action, v: &Vlan, flags: ShowFlags, now: u64) {
    p.string("kind", "vlan ", "vlan");
    let name = op_name(v.op);
    p.string("vlan_action", format_args!(" {name}"), name);
    if v.op == ACT_PUSH || v.op == ACT_MODIFY {
        let id = v.id.unwrap_or(0);
        p.number("id", format_args!(" id {id}"), id);
        let proto = crate::filter::proto_n2a(v.push_proto());
        p.string("protocol", format_args!(" protocol {proto}"), &proto);
        if v.prio_dumped() {
            let prio = v.prio.unwrap_or(0);
            p.number("priority", format_args!(" priority {prio}"), prio);
        }
    }
    print_control(p, " ", v.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
