//! `gact` (`m_gact.c`): a control code, optionally with a random choice of another; and its printer.

use super::*;

pub(super) const GACT_USAGE: &str = "Usage: ... gact <ACTION> [RAND] [INDEX]\nWhere: \tACTION := reclassify | drop | continue | pass | pipe |\n       \t          goto chain <CHAIN_INDEX> | jump <JUMP_COUNT>\n\tRAND := random <RANDTYPE> <ACTION> <VAL>\n\tRANDTYPE := netrand | determ\n\tVAL : = value not exceeding 10000\n\tJUMP_COUNT := Absolute jump from start of action list\n\tINDEX := index value used\n";

/// `parse_gact`.
pub(super) fn parse_gact(c: &mut Cur) -> Result<(ActionParams, u32)> {
    if c.peek().is_some_and(|w| matches(w, "gact")) {
        c.next_arg()?;
    }
    let mut g = Gact::default();
    let mut index = 0;
    let index_only = c.peek().is_some_and(|w| matches(w, "index"));
    if !index_only {
        // parse_gact calls usage() after whatever __parse_action_control printed.
        match parse_control(c, false, false) {
            Ok(Some(r)) => g.action = r,
            Ok(None) => {
                let w = c.peek().unwrap_or("");
                return Err(Failure::syntax(format!(
                    "Bad action type {w}\n{GACT_USAGE}"
                )));
            }
            Err(e) if e.msg.starts_with("Command line is not complete") => return Err(e),
            Err(e) => {
                return Err(Failure::syntax(format!(
                    "{}\n{GACT_USAGE}",
                    e.msg.trim_end()
                )));
            }
        }
        if c.peek().is_some_and(|w| matches(w, "random")) {
            let w = c.next_arg()?;
            let ptype = if matches(w, "netrand") {
                ProbType::Netrand
            } else if matches(w, "determ") {
                ProbType::Determ
            } else {
                return Err(bad("Illegal \"random type\""));
            };
            c.next_arg()?;
            let Some(pa) =
                parse_control(c, false, false).map_err(|_| Failure::syntax(GACT_USAGE))?
            else {
                return Err(Failure::syntax(GACT_USAGE));
            };
            let v = c.peek().unwrap_or("");
            let val = get_u16(v, 10).ok_or_else(|| bad("Illegal probability val 0x0"))?;
            if val > 10000 {
                return Err(bad(format!("Illegal probability val  0x{val:x}")));
            }
            c.fwd();
            g.prob = Some(GactProb {
                ptype,
                action: pa,
                val,
                counter: 0,
            });
        }
    }
    if c.peek().is_some_and(|w| matches(w, "index")) {
        let v = c.next_arg()?;
        index = get_u32(v, 10).ok_or_else(|| bad("Illegal \"index\""))?;
        c.fwd();
    } else if c.peek().is_some_and(|w| matches(w, "help")) {
        return Err(Failure::syntax(GACT_USAGE));
    }
    Ok((ActionParams::Gact(g), index))
}

/// `print_gact`.
pub(super) fn print(
    p: &mut Printer,
    a: &Action,
    g: &tclab_core::action::gact::Gact,
    flags: ShowFlags,
    now: u64,
) {
    p.string("kind", "gact ", "gact");
    print_control(p, "action ", g.action, "");
    let (pt, pa, pv) = match &g.prob {
        Some(pr) => (
            match pr.ptype {
                ProbType::None => "none",
                ProbType::Netrand => "netrand",
                ProbType::Determ => "determ",
            },
            pr.action,
            pr.val,
        ),
        None => ("none", TC_ACT_OK, 0),
    };
    p.open_object(Some("prob"));
    p.nl();
    p.string("random_type", format_args!("\t random type {pt}"), pt);
    print_control(p, " ", pa, " ");
    p.number("val", format_args!("val {pv}"), pv);
    p.close_object();
    print_index_refs(p, a, "\t index ", flags, now);
}
