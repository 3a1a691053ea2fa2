//! `ife` (`m_ife.c`): `ife {decode|encode} [allow ATTR | use ATTR VALUE]… [dst MAC] [src MAC] [type T]
//! [CONTROL] [index N]` (ATTR: mark, prio, tcindex), with tc's messages and its remarks on stderr
//! (`IFE type 0x…`, `dst MAC address <…>`); and its printer.

use super::skbmod::{mac, scan_mac};
use super::*;
use tclab_core::action::ife::{Ife, Meta, ETH_P_IFE, META_PRIO, META_SKBMARK, META_TCINDEX};

pub(super) const IFE_USAGE: &str = "Usage:... ife {decode|encode} [{ALLOW|USE} ATTR] [dst DMAC] [src SMAC] [type TYPE] [CONTROL] [index INDEX]\n\tALLOW := Encode direction. Allows encoding specified metadata\n\t\t e.g \"allow mark\"\n\tUSE := Encode direction. Enforce Static encoding of specified metadata\n\t\t e.g \"use mark 0x12\"\n\tATTR := mark (32-bit), prio (32-bit), tcindex (16-bit)\n\tDMAC := 6 byte Destination MAC address to encode\n\tSMAC := optional 6 byte Source MAC address to encode\n\tTYPE := optional 16 bit ethertype to encode\n\tCONTROL := reclassify|pipe|drop|continue|ok\n\tINDEX := optional IFE table index value used\nencode is used for sending IFE packets\ndecode is used for receiving IFE packets";

/// The three metadata tc knows, in `IFE_META_*` order (the order the kernel keeps a list in).
const ATTRS: [(&str, u16); 3] = [
    ("mark", META_SKBMARK),
    ("prio", META_PRIO),
    ("tcindex", META_TCINDEX),
];

/// `parse_ife`.
pub(super) fn parse_ife(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut ok = 0;
    let mut encode = false;
    // Per attribute: allowed, and `use`'s value (0: none, as tc reads it).
    let mut allow = [false; 3];
    let mut used = [0u32; 3];
    let (mut dst, mut src, mut eth_type) = (None, None, None);
    while let Some(w) = c.peek() {
        if matches(w, "ife") {
            c.next_arg()?;
            continue;
        } else if matches(w, "decode") {
            encode = false;
            ok += 1;
        } else if matches(w, "encode") {
            encode = true;
            ok += 1;
        } else if matches(w, "allow") {
            let a = c.next_arg()?;
            let i = ATTRS
                .iter()
                .position(|(n, _)| matches(a, n))
                .ok_or_else(|| invarg("Illegal meta define", a))?;
            allow[i] = true;
        } else if matches(w, "use") {
            let a = c.next_arg()?;
            let i = ATTRS
                .iter()
                .position(|(n, _)| matches(a, n))
                .ok_or_else(|| invarg("Illegal meta use type", a))?;
            let v = c.next_arg()?;
            let what = format!("ife {} val is invalid", ATTRS[i].0);
            used[i] = if ATTRS[i].1 == META_TCINDEX {
                get_u16(v, 0).map(u32::from)
            } else {
                get_u32(v, 0)
            }
            .ok_or_else(|| invarg(&what, v))?;
        } else if matches(w, "type") {
            let v = c.next_arg()?;
            let t = get_u16(v, 0).ok_or_else(|| invarg("ife type is invalid", v))?;
            crate::notice(&format!("IFE type 0x{t:04X}"));
            eth_type = Some(t);
        } else if matches(w, "dst") || matches(w, "src") {
            let is_dst = matches(w, "dst");
            let v = c.next_arg()?;
            let m = scan_mac(v).ok_or_else(|| invarg("Invalid mac address", v))?;
            if is_dst {
                crate::notice(&format!("dst MAC address <{v}>"));
                dst = Some(m);
            } else {
                crate::notice(&format!("src MAC address <{v}>"));
                src = Some(m);
            }
        } else if matches(w, "help") {
            return Err(Failure::syntax(IFE_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    let action = control_or(c, TC_ACT_PIPE)?;
    let index = index_arg(c, 0, |_| "ife: Illegal \"index\"".into())?;
    ok += usize::from(index.is_some());
    if ok == 0 {
        return Err(Failure::syntax(format!(
            "IFE requires decode/encode specified\n{IFE_USAGE}"
        )));
    }
    let mut ife = Ife {
        action,
        encode,
        meta: None,
        dst: None,
        src: None,
        eth_type: None,
    };
    if encode {
        if eth_type.is_none() {
            crate::notice(&format!("IFE type 0x{ETH_P_IFE:04X}"));
        }
        // What the kernel dumps: addresses that are not all zeros.
        ife.dst = dst.filter(|m| *m != [0; 6]);
        ife.src = src.filter(|m| *m != [0; 6]);
        ife.eth_type = eth_type;
        ife.meta = Some(
            (0..3)
                .filter(|&i| allow[i] || used[i] != 0)
                .map(|i| Meta {
                    id: ATTRS[i].1,
                    value: (used[i] != 0).then_some(used[i]),
                })
                .collect(),
        );
    }
    Ok((ActionParams::Ife(ife), index.unwrap_or(0)))
}

/// `print_ife`: the metadata in the order mark, tcindex, prio.
pub(super) fn print(p: &mut Printer, a: &Action, ife: &Ife, flags: ShowFlags, now: u64) {
    p.string("kind", "ife ", "ife");
    let mode = if ife.encode { "encode" } else { "decode" };
    p.string("mode", format_args!("{mode} "), mode);
    print_control(p, "action ", ife.action, " ");
    let t = ife.kept_type();
    let text = if t == 0 {
        "0".to_string()
    } else {
        format!("0X{t:X}")
    };
    p.hex0x("type", format_args!("type {text} "), u64::from(t));
    p.fp("\n\t");
    let meta = ife.kept_meta();
    for (name, id) in [
        ("mark", META_SKBMARK),
        ("tcindex", META_TCINDEX),
        ("prio", META_PRIO),
    ] {
        match meta.iter().find(|m| m.id == id).map(|m| m.value) {
            Some(Some(v)) => p.number(name, format_args!("use {name} {v} "), v),
            Some(None) => p.string(name, format_args!("allow {name} "), "allow"),
            None => {}
        }
    }
    for (key, addr) in [("dst", &ife.dst), ("src", &ife.src)] {
        if let Some(m) = addr {
            let s = mac(m);
            p.string(key, format_args!("{key} {s} "), &s);
        }
    }
    print_index_refs(p, a, "\t index ", flags, now);
}
