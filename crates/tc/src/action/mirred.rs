//! `mirred` (`m_mirred.c`): egress/ingress mirror or redirect to a device; and its printer.

use super::*;

pub(super) const MIRRED_USAGE: &str = "Usage: mirred <DIRECTION> <ACTION> [index INDEX] <dev DEVICENAME>\nwhere:\n\tDIRECTION := <ingress | egress>\n\tACTION := <mirror | redirect>\n\tINDEX  is the specific policy instance id\n\tDEVICENAME is the devicename";

/// `mirred_n2a`.
pub(super) fn mirred_n2a(eaction: u32) -> &'static str {
    match eaction {
        TCA_EGRESS_REDIR => "Egress Redirect",
        TCA_INGRESS_REDIR => "Ingress Redirect",
        TCA_EGRESS_MIRROR => "Egress Mirror",
        TCA_INGRESS_MIRROR => "Ingress Mirror",
        _ => "unknown",
    }
}

/// `parse_mirred`: `mirred egress|ingress mirror|redirect [index N] dev DEV [CONTROL] [index N]`.
pub(super) fn parse_mirred(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let w = c.next_arg()?;
    if matches(w, "egress") || matches(w, "ingress") || matches(w, "index") {
        return mirred_direction(c);
    }
    if matches(w, "help") {
        return Err(Failure::syntax(MIRRED_USAGE));
    }
    Err(bad(format!("mirred option not supported {w}")))
}

/// `parse_direction` of m_mirred.c, whose loop skips words it does not know and stops after `dev NAME`.
pub(super) fn mirred_direction(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let (mut ok, mut iok) = (0, 0);
    let (mut egress, mut ingress, mut mirror, mut redir) = (false, false, false, false);
    let mut m = Mirred {
        eaction: 0,
        action: 0,
        dev: String::new(),
        target: MirredTarget::Up,
    };
    let mut index = 0;
    while let Some(w) = c.peek() {
        if matches(w, "action") {
            c.next_arg()?;
            break;
        } else if !egress && matches(w, "egress") {
            egress = true;
            if ingress {
                return Err(bad("Can't have both egress and ingress"));
            }
            c.next_arg()?;
            ok += 1;
            continue;
        } else if !ingress && matches(w, "ingress") {
            ingress = true;
            if egress {
                return Err(bad("Can't have both ingress and egress"));
            }
            c.next_arg()?;
            ok += 1;
            continue;
        } else if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| bad("Illegal \"index\""))?;
            iok += 1;
            if ok == 0 {
                c.fwd();
                break;
            }
        } else if ok == 0 {
            // Unreachable from `parse_mirred` (an `index` first breaks out), kept as tc has it.
            return Err(bad(format!("was expecting egress or ingress ({w})")));
        } else if !mirror && matches(w, "mirror") {
            mirror = true;
            if redir {
                return Err(bad("Can't have both mirror and redir"));
            }
            m.eaction = if egress {
                TCA_EGRESS_MIRROR
            } else {
                TCA_INGRESS_MIRROR
            };
            m.action = TC_ACT_PIPE;
            ok += 1;
        } else if !redir && matches(w, "redirect") {
            redir = true;
            if mirror {
                return Err(bad("Can't have both mirror and redir"));
            }
            m.eaction = if egress {
                TCA_EGRESS_REDIR
            } else {
                TCA_INGRESS_REDIR
            };
            m.action = TC_ACT_STOLEN;
            ok += 1;
        } else if (redir || mirror) && matches(w, "dev") {
            let d = c.next_arg()?;
            if !m.dev.is_empty() {
                return Err(duparg("dev", d));
            }
            // `strncpy(d, *argv, IFNAMSIZ - 1)`.
            m.dev = d.chars().take(15).collect();
            c.fwd();
            break;
        }
        c.next_arg()?;
    }
    if ok == 0 && iok == 0 {
        return Err(bad(""));
    }
    if !m.dev.is_empty() && !c.has_device(&m.dev) {
        return Err(bad(format!("Cannot find device \"{}\"", m.dev)));
    }
    if matches!(m.eaction, TCA_EGRESS_MIRROR | TCA_INGRESS_MIRROR) {
        let at = c.i;
        match parse_control(c, false, true) {
            Ok(Some(r)) => m.action = r,
            Err(f) if f.code != 1 => return Err(f),
            _ => c.i = at,
        }
    }
    if let Some(w) = c.peek() {
        if iok > 0 && matches(w, "index") {
            return Err(bad("mirred: Illegal double index"));
        }
        if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| bad("mirred: Illegal \"index\""))?;
            c.fwd();
        }
    }
    Ok((ActionParams::Mirred(m), index))
}

/// `print_mirred`.
pub(super) fn print(p: &mut Printer, a: &Action, m: &Mirred, flags: ShowFlags, now: u64) {
    // `print_mirred`: a target that went away has ifindex 0, which `ll_index_to_name` prints "*".
    let dev = if m.target == MirredTarget::Gone {
        "*"
    } else {
        m.dev.as_str()
    };
    p.string("kind", "mirred ", "mirred");
    p.fp(format_args!("({}", mirred_n2a(m.eaction)));
    let (act, dir) = match m.eaction {
        TCA_EGRESS_REDIR => ("redirect", "egress"),
        TCA_EGRESS_MIRROR => ("mirror", "egress"),
        TCA_INGRESS_REDIR => ("redirect", "ingress"),
        TCA_INGRESS_MIRROR => ("mirror", "ingress"),
        _ => ("unknown", "unknown"),
    };
    p.json_string("mirred_action", act);
    p.json_string("direction", dir);
    p.string("to_dev", format_args!(" to device {dev})"), dev);
    print_control(p, " ", m.action, "");
    print_index_refs(p, a, "\tindex ", flags, now);
}
