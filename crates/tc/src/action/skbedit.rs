//! `skbedit` (`m_skbedit.c`): sets queue_mapping, priority, mark, ptype; and its printer.

use super::*;

pub(super) const SKBEDIT_USAGE: &str = "Usage: ... skbedit <[QM] [PM] [MM] [PT] [IF]>\nQM = queue_mapping QUEUE_MAPPING\nPM = priority PRIORITY\nMM = mark MARK[/MASK]\nPT = ptype PACKETYPE\nIF = inheritdsfield\nPACKETYPE = is one of:\n  host, otherhost, broadcast, multicast\nQUEUE_MAPPING = device transmit queue to use\nPRIORITY = classID to assign to priority field\nMARK = firewall mark to set\nMASK = mask applied to firewall mark (0xffffffff by default)\nnote: inheritdsfield maps DS field to skb->priority";

/// `parse_skbedit`.
pub(super) fn parse_skbedit(c: &mut Cur) -> Result<(ActionParams, u32)> {
    c.next_arg()?;
    let mut s = Skbedit {
        action: TC_ACT_PIPE,
        ..Default::default()
    };
    let mut ok = 0;
    let mut index = 0;
    while let Some(w) = c.peek() {
        if matches(w, "queue_mapping") {
            let v = c.next_arg()?;
            let q = get_u32(v, 10)
                .filter(|q| *q <= 65535)
                .ok_or_else(|| bad("Illegal queue_mapping"))?;
            s.queue_mapping = Some(q as u16);
        } else if matches(w, "priority") {
            let v = c.next_arg()?;
            s.priority = Some(get_tc_classid(v).ok_or_else(|| bad("Illegal priority"))?);
        } else if matches(w, "mark") {
            let v = c.next_arg()?;
            let (m, mask) = match v.split_once('/') {
                Some((m, k)) => (m, Some(k)),
                None => (v, None),
            };
            s.mark = Some(get_u32(m, 0).ok_or_else(|| bad("Illegal mark"))?);
            if let Some(k) = mask {
                s.mask = Some(get_u32(k, 0).ok_or_else(|| bad("Illegal mask"))?);
            }
        } else if matches(w, "ptype") {
            let v = c.next_arg()?;
            s.ptype = Some(if matches(v, "host") {
                0
            } else if matches(v, "broadcast") {
                1
            } else if matches(v, "multicast") {
                2
            } else if matches(v, "otherhost") {
                3
            } else {
                return Err(bad(format!("Illegal ptype ({v})")));
            });
        } else if matches(w, "inheritdsfield") {
            s.inherit_dsfield = true;
        } else if matches(w, "help") {
            return Err(Failure::syntax(SKBEDIT_USAGE));
        } else {
            break;
        }
        ok += 1;
        c.fwd();
    }
    if let Ok(Some(r)) = parse_control(c, false, true) {
        s.action = r;
    }
    if c.peek().is_some_and(|w| matches(w, "index")) {
        let v = c.next_arg()?;
        index = get_u32(v, 10).ok_or_else(|| bad("skbedit: Illegal \"index\""))?;
        c.fwd();
        ok += 1;
    }
    if ok == 0 {
        return Err(bad(SKBEDIT_USAGE));
    }
    Ok((ActionParams::Skbedit(s), index))
}

/// `print_skbedit`.
pub(super) fn print(p: &mut Printer, a: &Action, s: &Skbedit, flags: ShowFlags, now: u64) {
    p.string("kind", "skbedit ", "skbedit");
    if let Some(q) = s.queue_mapping {
        p.number("queue_mapping", format_args!("queue_mapping {q}"), q);
    }
    if let Some(pr) = s.priority {
        let c = crate::filter::sprint_classid(pr);
        p.string("priority", format_args!(" priority {c}"), &c);
    }
    if let Some(m) = s.mark {
        p.number("mark", format_args!(" mark {m}"), m);
    }
    if let Some(m) = s.mask {
        p.hex("mask", format_args!("/{m:#x}"), m);
    }
    if let Some(t) = s.ptype {
        let name = match t {
            0 => Some("host"),
            1 => Some("broadcast"),
            2 => Some("multicast"),
            3 => Some("otherhost"),
            _ => None,
        };
        match name {
            Some(n) => p.string("ptype", format_args!(" ptype {n}"), n),
            None => p.number("ptype", format_args!(" ptype {t}"), t),
        }
    }
    if s.inherit_dsfield {
        p.null("inheritdsfield", " inheritdsfield");
    }
    print_control(p, " ", s.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
