//! `sample` (`m_sample.c`): `sample rate RATE group GROUP [trunc SIZE] [CONTROL] [index N]` (or `index N`
//! alone, to bind an existing one), with tc's messages; and its printer.

use super::*;
use tclab_core::action::sample::Sample;

pub(super) const SAMPLE_USAGE: &str = "Usage: sample SAMPLE_CONF\nwhere:\n\tSAMPLE_CONF := SAMPLE_PARAMS | SAMPLE_INDEX\n\tSAMPLE_PARAMS := rate RATE group GROUP [trunc SIZE] [SAMPLE_INDEX]\n\tSAMPLE_INDEX := index INDEX\n\tRATE := The ratio of packets observed at the data source to the samples generated.\n\tGROUP := the psample sampling group\n\tSIZE := the truncation size\n\tINDEX := integer index of the sample action";

/// `parse_sample`.
pub(super) fn parse_sample(c: &mut Cur) -> Result<(ActionParams, u32)> {
    if c.left() <= 1 {
        return Err(Failure::syntax(format!(
            "sample bad argument count {}\n{SAMPLE_USAGE}",
            c.left()
        )));
    }
    let mut s = Sample {
        action: TC_ACT_PIPE,
        rate: None,
        group: None,
        trunc: None,
    };
    c.next_arg()?;
    while let Some(w) = c.peek() {
        let (slot, what) = if matches(w, "rate") {
            (&mut s.rate, "Illegal rate")
        } else if matches(w, "group") {
            (&mut s.group, "Illegal group num")
        } else if matches(w, "trunc") {
            (&mut s.trunc, "Illegal truncation size")
        } else if matches(w, "help") {
            return Err(Failure::syntax(SAMPLE_USAGE));
        } else {
            break;
        };
        let v = c.next_arg()?;
        *slot = Some(
            get_u32(v, 10).ok_or_else(|| Failure::syntax(format!("{what} {v}\n{SAMPLE_USAGE}")))?,
        );
        c.fwd();
    }
    s.action = control_or(c, s.action)?;
    let index = index_arg(c, 10, |_| "sample: Illegal \"index\"".into())?.unwrap_or(0);
    for (set, what) in [(s.group.is_some(), "group"), (s.rate.is_some(), "rate")] {
        if index == 0 && !set {
            return Err(Failure::syntax(format!(
                "param \"{what}\" not set\n{SAMPLE_USAGE}"
            )));
        }
    }
    Ok((ActionParams::Sample(s), index))
}

/// `print_sample`.
pub(super) fn print(p: &mut Printer, a: &Action, s: &Sample, flags: ShowFlags, now: u64) {
    p.string("kind", "sample ", "sample");
    let (rate, group) = (s.rate.unwrap_or(0), s.group.unwrap_or(0));
    p.number("rate", format_args!("rate 1/{rate} "), rate);
    p.number("group", format_args!("group {group}"), group);
    if let Some(t) = s.trunc {
        p.number("trunc_size", format_args!(" trunc_size {t}"), t);
    }
    print_control(p, " ", s.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
