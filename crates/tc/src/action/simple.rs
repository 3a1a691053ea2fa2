//! `simple` (`m_simple.c`): `simple [sdata STRING] [CONTROL] [index N]`; and its printer, which writes
//! with `fprintf` (text even in a JSON listing), as tc 6.1's does.

use super::*;
use tclab_core::action::simple::Simple;

pub(super) const SIMPLE_USAGE: &str = "Usage:... simple [sdata STRING] [index INDEX] [CONTROL]\n\tSTRING being an arbitrary string\n\tINDEX := optional index value used\n\tCONTROL := reclassify|pipe|drop|continue|ok";

/// `SIMP_MAX_DATA`: the string and its NUL.
const SIMP_MAX_DATA: usize = 32;

/// `parse_simple`.
pub(super) fn parse_simple(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut s = Simple {
        action: TC_ACT_PIPE,
        data: None,
    };
    let mut ok = 0;
    while let Some(w) = c.peek() {
        if matches(w, "simple") {
            c.next_arg()?;
        } else if matches(w, "sdata") {
            let v = c.next_arg()?;
            ok += 1;
            s.data = Some(v.to_string());
            c.fwd();
        } else if matches(w, "help") {
            return Err(Failure::syntax(SIMPLE_USAGE));
        } else {
            break;
        }
    }
    s.action = control_or(c, s.action)?;
    let index = index_arg(c, 10, |v| format!("simple: Illegal \"index\" ({v})"))?;
    ok += usize::from(index.is_some());
    let index = index.unwrap_or(0);
    if ok == 0 {
        return Err(bad(SIMPLE_USAGE));
    }
    if let Some(d) = s.data.as_deref().filter(|d| d.len() > SIMP_MAX_DATA - 1) {
        return Err(bad(format!("simple: Illegal string len {} <{d}>", d.len())));
    }
    Ok((ActionParams::Simple(s), index))
}

/// `print_simple`.
pub(super) fn print(p: &mut Printer, a: &Action, s: &Simple, flags: ShowFlags, now: u64) {
    let _ = writeln!(p, "Simple <{}>", s.data.as_deref().unwrap_or(""));
    let _ = write!(
        p,
        "\t index {} ref {} bind {}",
        a.index, a.refcnt, a.bindcnt
    );
    if flags.stats {
        print_tm(p, a, now);
    }
    p.nl();
}
