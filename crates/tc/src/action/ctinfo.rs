//! `ctinfo` (`m_ctinfo.c`): `ctinfo [dscp MASK [STATEMASK]] [cpmark [MASK]] [zone ZONE] [CONTROL]
//! [index N]`, in that order, with tc's messages; and its printer (the masks after the index, the
//! counters under `-s`).

use super::*;
use tclab_core::action::ctinfo::Ctinfo;

pub(super) const CTINFO_USAGE: &str = "Usage: ... ctinfo [dscp mask [statemask]] [cpmark [mask]] [zone ZONE] [CONTROL] [index <INDEX>]\nwhere :\n\tdscp   MASK bitmask location of stored DSCP\n\t       STATEMASK bitmask to determine conditional restoring\n\tcpmark MASK mask applied to mark on restoration\n\tZONE is the conntrack zone\n\tCONTROL := reclassify | pipe | drop | continue | ok |\n\t           goto chain <CHAIN_INDEX>";

/// The word after the cursor read as `get_u32(…, 0)`; the cursor moves past what was read.
fn optional_mask(c: &mut Cur) -> Option<u32> {
    c.fwd();
    let v = get_u32(c.peek()?, 0)?;
    c.fwd();
    Some(v)
}

/// `parse_ctinfo`.
pub(super) fn parse_ctinfo(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut ci = Ctinfo {
        action: TC_ACT_PIPE,
        zone: 0,
        dscp_mask: None,
        dscp_statemask: None,
        cpmark_mask: None,
    };
    while let Some(w) = c.peek() {
        if matches(w, "ctinfo") {
            c.fwd();
        } else if matches(w, "help") {
            return Err(Failure::syntax(CTINFO_USAGE));
        } else {
            break;
        }
    }
    let (mut dscp, mut state) = (0u32, 0u32);
    if c.peek().is_some_and(|w| matches(w, "dscp")) {
        let v = c.next_arg()?;
        dscp = get_u32(v, 0).ok_or_else(|| bad("ctinfo: Illegal dscp \"mask\""))?;
        state = optional_mask(c).unwrap_or(0);
    }
    if c.peek().is_some_and(|w| matches(w, "cpmark")) {
        // A mask of 0 is not sent: no cpmark at all.
        ci.cpmark_mask = Some(optional_mask(c).unwrap_or(!0)).filter(|m| *m != 0);
    }
    if c.peek().is_some_and(|w| matches(w, "zone")) {
        let v = c.next_arg()?;
        ci.zone = get_u16(v, 10).ok_or_else(|| bad("ctinfo: Illegal \"zone\""))?;
        c.fwd();
    }
    ci.action = control_or(c, ci.action)?;
    let index = index_arg(c, 10, |_| "ctinfo: Illegal \"index\"".into())?.unwrap_or(0);
    if dscp & state != 0 {
        return Err(bad("ctinfo: dscp mask & statemask must NOT overlap"));
    }
    if dscp != 0 && dscp >> dscp.trailing_zeros() != 0x3f {
        return Err(bad("ctinfo: dscp mask must be 6 contiguous bits long"));
    }
    ci.dscp_mask = (dscp != 0).then_some(dscp);
    ci.dscp_statemask = (state != 0).then_some(state);
    Ok((ActionParams::Ctinfo(ci), index))
}

/// `%#010llx`: `0x` and 8 digits, or ten zeros for 0 (C writes no prefix for 0).
fn hex010(v: u32) -> String {
    if v == 0 {
        "0000000000".into()
    } else {
        format!("{v:#010x}")
    }
}

/// `print_ctinfo`.
pub(super) fn print(p: &mut Printer, a: &Action, ci: &Ctinfo, flags: ShowFlags, now: u64) {
    p.string("kind", "ctinfo ", "ctinfo");
    p.number("zone", format_args!("zone {}", ci.zone), ci.zone);
    print_control(p, " ", ci.action, "");
    p.nl();
    index_refs(p, a, "\t index ", ShowFlags::default(), now);
    if let Some(m) = ci.dscp_mode() {
        let s = ci.dscp_statemask.unwrap_or(0);
        p.hex0x(
            "dscpmask",
            format_args!(" dscp {}", hex010(m)),
            u64::from(m),
        );
        p.hex0x(
            "dscpstatemask",
            format_args!(" {}", hex010(s)),
            u64::from(s),
        );
    }
    if let Some(m) = ci.cpmark_mask {
        p.hex0x(
            "cpmark",
            format_args!(" cpmark {}", hex010(m)),
            u64::from(m),
        );
    }
    if flags.stats {
        print_tm(p, a, now);
        let st = a.ctinfo;
        p.number(
            "dscpset",
            format_args!(" DSCP set {}", st.dscp_set),
            st.dscp_set,
        );
        p.number(
            "dscperror",
            format_args!(" error {}", st.dscp_error),
            st.dscp_error,
        );
        p.number(
            "cpmarkset",
            format_args!(" CPMARK set {}", st.cpmark_set),
            st.cpmark_set,
        );
    }
    p.nl();
}
