//! `skbmod` (`m_skbmod.c`): `skbmod { set [dmac DMAC] [smac SMAC] [etype ETYPE] | swap mac | ecn }
//! [CONTROL] [index N]`, with tc's remarks on stderr (`skbmod etype 0x…`, `dst MAC address <…>`); and its
//! printer, which writes with `fprintf` (text even in a JSON listing) around the JSON control.

use super::*;
use tclab_core::action::skbmod::{Skbmod, F_ECN, F_SWAPMAC};

pub(super) const SKBMOD_USAGE: &str = "Usage:... skbmod { set <SETTABLE> | swap <SWAPPABLE> | ecn } [CONTROL] [index INDEX]\nwhere SETTABLE is: [dmac DMAC] [smac SMAC] [etype ETYPE]\nwhere SWAPPABLE is: \"mac\" to swap mac addresses\n\tDMAC := 6 byte Destination MAC address\n\tSMAC := optional 6 byte Source MAC address\n\tETYPE := optional 16 bit ethertype\n\tCONTROL := reclassify | pipe | drop | continue | ok |\n\t           goto chain <CHAIN_INDEX>\n\tINDEX := skbmod index value to use";

/// `sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx")` reading all six.
pub(super) fn scan_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut rest = s;
    for (i, b) in out.iter_mut().enumerate() {
        let t = rest.trim_start();
        let t = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        let n = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
        if n == 0 {
            return None;
        }
        // `%hhx` keeps the low byte of what it read.
        let v = u64::from_str_radix(&t[n.saturating_sub(2)..n], 16).ok()?;
        *b = v as u8;
        rest = &t[n..];
        if i < 5 {
            rest = rest.strip_prefix(':')?;
        }
    }
    Some(out)
}

/// `parse_skbmod`.
pub(super) fn parse_skbmod(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut s = Skbmod {
        action: TC_ACT_PIPE,
        flags: 0,
        dmac: None,
        smac: None,
        etype: None,
    };
    let mut ok = 0;
    while let Some(w) = c.peek() {
        if matches(w, "skbmod") || matches(w, "swap") || matches(w, "set") {
            c.next_arg()?;
            continue;
        } else if matches(w, "mac") {
            s.flags |= F_SWAPMAC;
            ok += 1;
        } else if matches(w, "etype") {
            let v = c.next_arg()?;
            let t = get_u16(v, 0).ok_or_else(|| invarg("ethertype is invalid", v))?;
            crate::notice(&format!("skbmod etype 0x{t:x}"));
            // tc sends no EtherType of 0.
            s.etype = (t != 0).then_some(t);
            s.flags |= tclab_core::action::skbmod::F_ETYPE;
            ok += 1;
        } else if matches(w, "dmac") || matches(w, "smac") {
            let dst = matches(w, "dmac");
            let v = c.next_arg()?;
            let Some(mac) = scan_mac(v) else {
                return Err(bad(if dst {
                    format!("Invalid dst mac address {v}")
                } else {
                    format!("Invalid smac address {v}")
                }));
            };
            if dst {
                s.dmac = Some(mac);
                crate::notice(&format!("dst MAC address <{v}>"));
            } else {
                s.smac = Some(mac);
                crate::notice(&format!("src MAC address <{v}>"));
            }
            ok += 1;
        } else if matches(w, "ecn") {
            s.flags |= F_ECN;
            ok += 1;
        } else if matches(w, "help") {
            return Err(Failure::syntax(SKBMOD_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    s.action = control_or(c, s.action)?;
    let index = index_arg(c, 0, |_| "skbmod: Illegal \"index\"".into())?;
    ok += usize::from(index.is_some());
    let index = index.unwrap_or(0);
    if ok == 0 {
        return Err(Failure::syntax(format!(
            "skbmod requires at least one option\n{SKBMOD_USAGE}"
        )));
    }
    Ok((ActionParams::Skbmod(s), index))
}

pub(super) fn mac(a: &[u8; 6]) -> String {
    a.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `print_skbmod`: what the kernel dumps is the edit it kept (`lflags`).
pub(super) fn print(p: &mut Printer, a: &Action, s: &Skbmod, flags: ShowFlags, now: u64) {
    use tclab_core::action::skbmod::{F_DMAC, F_ETYPE, F_SMAC};
    let kept = s.lflags();
    p.raw("skbmod ");
    print_control(p, "", s.action, " ");
    if kept & F_ETYPE != 0 {
        let _ = write!(p, "set etype 0x{:X} ", s.etype.unwrap_or(0));
        p.raw("\n\t ");
    }
    if let (true, Some(m)) = (kept & F_DMAC != 0, &s.dmac) {
        let _ = write!(p, "set dmac {} ", mac(m));
    }
    if let (true, Some(m)) = (kept & F_SMAC != 0, &s.smac) {
        let _ = write!(p, "set smac {} ", mac(m));
    }
    if kept & F_SWAPMAC != 0 {
        p.raw("swap mac ");
    }
    if kept & F_ECN != 0 {
        p.raw("ecn ");
    }
    let _ = write!(
        p,
        "\n\t index {} ref {} bind {}",
        a.index, a.refcnt, a.bindcnt
    );
    if flags.stats {
        print_tm(p, a, now);
    }
    p.raw("\n");
}
