//! `connmark` (`m_connmark.c`): restores the packet mark from its connection; and its printer.

use super::*;

pub(super) const CONNMARK_USAGE: &str = "Usage: ... connmark [zone ZONE] [CONTROL] [index <INDEX>]\nwhere :\n\tZONE is the conntrack zone\n\tCONTROL := reclassify | pipe | drop | continue | ok |\n\t           goto chain <CHAIN_INDEX>";

/// `parse_connmark`: `connmark [zone Z] [CONTROL] [index N]`, control `pipe` by default. When it
/// fails, tc's cursor is still at `connmark` (the parser worked on copies).
pub(super) fn parse_connmark(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let start = c.i;
    connmark_body(c).inspect_err(|f| {
        if f.code == 1 {
            c.i = start;
        }
    })
}

pub(super) fn connmark_body(c: &mut Cur) -> Result<(ActionParams, u32)> {
    while let Some(w) = c.peek() {
        if matches(w, "connmark") {
            c.fwd();
        } else if matches(w, "help") {
            return Err(Failure::syntax(CONNMARK_USAGE));
        } else {
            break;
        }
    }
    let mut cm = Connmark {
        action: TC_ACT_PIPE,
        zone: 0,
    };
    if c.peek().is_some_and(|w| matches(w, "zone")) {
        let v = c.next_arg()?;
        cm.zone = get_u16(v, 10).ok_or_else(|| bad("connmark: Illegal \"zone\""))?;
        c.fwd();
    }
    // `parse_action_control_dflt`: a word that is no control (or a malformed one) leaves the default and
    // the cursor where it was.
    cm.action = control_or(c, cm.action)?;
    let index = index_arg(c, 10, |_| "connmark: Illegal \"index\"".into())?.unwrap_or(0);
    Ok((ActionParams::Connmark(cm), index))
}

/// `print_connmark`.
pub(super) fn print(p: &mut Printer, a: &Action, cm: &Connmark, flags: ShowFlags, now: u64) {
    p.string("kind", "connmark ", "connmark");
    p.number("zone", format_args!("zone {}", cm.zone), cm.zone);
    print_control(p, " ", cm.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
