//! Actions in the tc language: `action …` lists inside filters and the `tc actions` command, after
//! iproute2's `tc/m_action.c`, `m_gact.c`, `m_police.c`, `m_skbedit.c`, `m_connmark.c` and `tc_util.c`
//! (6.1), and their printers.
//!
//! Parsers follow tc's return conventions through [`Failure`]: tc's `exit(-1)` (usage, `invarg`) is a
//! code-255 failure that ends the command wherever it happens; a parser's `return -1` is a code-1 failure,
//! which the caller turns into its own exit code (1 for `tc filter`, 255 for `tc actions`).

use crate::util::{
    calc_xmitsize, calc_xmittime, get_rate, get_size, get_size_and_cell, get_tc_classid, get_u16,
    get_u32, matches, sprint_rate, sprint_size,
};
use crate::jprint::Printer;
pub use crate::Cur;
use crate::{Failure, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::action::connmark::Connmark;
use tclab_core::action::gact::{Gact, GactProb, ProbType};
use tclab_core::action::mirred::{
    Mirred, Target as MirredTarget, TCA_EGRESS_MIRROR, TCA_EGRESS_REDIR, TCA_INGRESS_MIRROR,
    TCA_INGRESS_REDIR,
};
use tclab_core::action::police::PoliceParams;
use tclab_core::action::skbedit::Skbedit;
use tclab_core::action::{
    ext_is, Action, ActionParams, ActionSpec, Control, ACT_FLAG_NO_PERCPU, ACT_FLAG_SKIP_HW,
    ACT_FLAG_SKIP_SW, TC_ACT_EXT_VAL_MASK, TC_ACT_GOTO_CHAIN, TC_ACT_JUMP, TC_ACT_OK, TC_ACT_PIPE,
    TC_ACT_RECLASSIFY, TC_ACT_SHOT, TC_ACT_STOLEN, TC_ACT_TRAP, TC_ACT_UNSPEC,
};
use tclab_core::units::{LinkLayer, RateSpec};

pub fn invarg(msg: &str, arg: &str) -> Failure {
    Failure::syntax(format!("Error: argument \"{arg}\" is wrong: {msg}"))
}

pub(crate) fn duparg(key: &str, arg: &str) -> Failure {
    Failure::syntax(format!(
        "Error: duplicate \"{key}\": \"{arg}\" is the second value."
    ))
}

/// A parser's `return -1`.
fn bad(msg: impl Into<String>) -> Failure {
    Failure::options(msg)
}

/// `action_a2n`.
pub fn action_a2n(arg: &str, allow_num: bool) -> Option<Control> {
    const A2N: &[(&str, Control)] = &[
        ("continue", TC_ACT_UNSPEC),
        ("drop", TC_ACT_SHOT),
        ("shot", TC_ACT_SHOT),
        ("pass", TC_ACT_OK),
        ("ok", TC_ACT_OK),
        ("reclassify", TC_ACT_RECLASSIFY),
        ("pipe", TC_ACT_PIPE),
        ("goto", TC_ACT_GOTO_CHAIN),
        ("jump", TC_ACT_JUMP),
        ("trap", TC_ACT_TRAP),
    ];
    if let Some((_, n)) = A2N.iter().find(|(w, _)| matches(arg, w)) {
        return Some(*n);
    }
    if allow_num {
        return arg.parse::<i32>().ok();
    }
    None
}

/// `action_n2a`.
pub fn action_n2a(c: Control) -> String {
    if ext_is(c, TC_ACT_GOTO_CHAIN) {
        return "goto".into();
    }
    if ext_is(c, TC_ACT_JUMP) {
        return "jump".into();
    }
    match c {
        TC_ACT_UNSPEC => "continue".into(),
        TC_ACT_OK => "pass".into(),
        TC_ACT_SHOT => "drop".into(),
        TC_ACT_RECLASSIFY => "reclassify".into(),
        TC_ACT_PIPE => "pipe".into(),
        TC_ACT_STOLEN => "stolen".into(),
        TC_ACT_TRAP => "trap".into(),
        n => n.to_string(),
    }
}

/// `print_action_control`.
pub fn sprint_control(prefix: &str, c: Control, suffix: &str) -> String {
    let mut s = format!("{prefix}{}", action_n2a(c));
    if ext_is(c, TC_ACT_GOTO_CHAIN) {
        let _ = write!(s, " chain {}", c as u32 & TC_ACT_EXT_VAL_MASK);
    }
    if ext_is(c, TC_ACT_JUMP) {
        let _ = write!(s, " {}", c as u32 & TC_ACT_EXT_VAL_MASK);
    }
    s.push_str(suffix);
    s
}

/// `__parse_action_control`: the code at the cursor (plus `chain N` or a jump count), moving past it.
/// `None` when the word is not a control word (tc prints "Bad action type" unless told to ignore it).
fn parse_control(c: &mut Cur, allow_num: bool, quiet: bool) -> Result<Option<Control>> {
    let Some(w) = c.peek() else { return Ok(None) };
    let Some(mut r) = action_a2n(w, allow_num) else {
        if !quiet {
            return Err(bad(format!("Bad action type {w}")));
        }
        return Ok(None);
    };
    if r == TC_ACT_GOTO_CHAIN {
        let w = c.next_arg()?;
        if !matches(w, "chain") {
            return Err(bad("\"chain index\" expected"));
        }
        let v = c.next_arg()?;
        let n = get_u32(v, 10)
            .filter(|n| *n <= TC_ACT_EXT_VAL_MASK)
            .ok_or_else(|| bad("Illegal \"chain index\""))?;
        r |= n as i32;
    }
    if r == TC_ACT_JUMP {
        let v = c.next_arg()?;
        let n = get_u32(v, 10)
            .filter(|n| *n <= TC_ACT_EXT_VAL_MASK)
            .ok_or_else(|| bad(format!("Invalid \"jump count\" ({v})")))?;
        r |= n as i32;
    }
    c.fwd();
    Ok(Some(r))
}

const GACT_USAGE: &str = "Usage: ... gact <ACTION> [RAND] [INDEX]\nWhere: \tACTION := reclassify | drop | continue | pass | pipe |\n       \t          goto chain <CHAIN_INDEX> | jump <JUMP_COUNT>\n\tRAND := random <RANDTYPE> <ACTION> <VAL>\n\tRANDTYPE := netrand | determ\n\tVAL : = value not exceeding 10000\n\tJUMP_COUNT := Absolute jump from start of action list\n\tINDEX := index value used\n";

/// `parse_gact`.
fn parse_gact(c: &mut Cur) -> Result<(ActionParams, u32)> {
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

const POLICE_USAGE: &str = "Usage: ... police [ rate BPS burst BYTES[/BYTES] ] \n\t\t[ pkts_rate RATE pkts_burst PACKETS ] [ mtu BYTES[/BYTES] ]\n\t\t[ peakrate BPS ] [ avrate BPS ] [ overhead BYTES ]\n\t\t[ linklayer TYPE ] [ CONTROL ]\nWhere: CONTROL := conform-exceed <EXCEEDACT>[/NOTEXCEEDACT]\n\t\t  Define how to handle packets which exceed (<EXCEEDACT>)\n\t\t  or conform (<NOTEXCEEDACT>) the configured bandwidth limit.\n       EXCEEDACT/NOTEXCEEDACT := { pipe | ok | reclassify | drop | continue |\n\t\t\t\t   goto chain <CHAIN_INDEX> }";

/// `parse_action_control_slash`: `EXCEED[/CONFORM]`, or `EXCEED / CONFORM` as three words.
fn parse_control_slash(c: &mut Cur) -> Result<(Control, Option<Control>)> {
    let w = c.peek().unwrap_or("");
    if let Some((a, b)) = w.split_once('/') {
        let r1 = action_a2n(a, true).ok_or_else(|| bad(""))?;
        let r2 = action_a2n(b, true).ok_or_else(|| bad(""))?;
        c.fwd();
        return Ok((r1, Some(r2)));
    }
    let r1 = parse_control(c, true, false)?.ok_or_else(|| bad(""))?;
    if c.peek() == Some("/") {
        c.next_arg()?;
        let r2 = parse_control(c, true, false)?.ok_or_else(|| bad(""))?;
        return Ok((r1, Some(r2)));
    }
    Ok((r1, None))
}

/// `act_parse_police`. `named`: the cursor is at the word `police` (the action form).
pub fn parse_police(c: &mut Cur, named: bool) -> Result<(ActionParams, u32)> {
    if named {
        c.next_arg()?;
    }
    let mut p = PoliceParams::default();
    let mut index = 0u32;
    let (mut buffer, mut mtu, mut mpu) = (0u32, 0u32, 0u32);
    let (mut rate, mut prate, mut avrate) = (0u64, 0u64, 0u64);
    let (mut pps, mut ppsburst) = (0u64, 0u64);
    let mut overhead = 0u16;
    let mut ll = LinkLayer::Ethernet;
    let mut rcell: Option<u8> = None;
    let mut presult: Option<Control> = None;
    let mut ok = 0;
    while let Some(w) = c.peek() {
        if matches(w, "index") {
            let v = c.next_arg()?;
            index = get_u32(v, 10).ok_or_else(|| invarg("index", v))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            let v = c.next_arg()?;
            if buffer != 0 {
                return Err(duparg("buffer/burst", v));
            }
            let (b, cell) = get_size_and_cell(v).ok_or_else(|| invarg("buffer", v))?;
            buffer = b;
            rcell = cell;
        } else if w == "mtu" || w == "minburst" {
            let v = c.next_arg()?;
            if mtu != 0 {
                return Err(duparg("mtu/minburst", v));
            }
            mtu = get_size_and_cell(v).ok_or_else(|| invarg("mtu", v))?.0;
        } else if w == "mpu" {
            let v = c.next_arg()?;
            if mpu != 0 {
                return Err(duparg("mpu", v));
            }
            mpu = get_size(v).ok_or_else(|| invarg("mpu", v))?;
        } else if w == "rate" {
            let v = c.next_arg()?;
            if rate != 0 {
                return Err(duparg("rate", v));
            }
            rate = get_rate(v).ok_or_else(|| invarg("rate", v))?;
        } else if w == "avrate" {
            let v = c.next_arg()?;
            if avrate != 0 {
                return Err(duparg("avrate", v));
            }
            avrate = get_rate(v)
                .filter(|r| *r <= u32::MAX as u64)
                .ok_or_else(|| invarg("avrate", v))?;
        } else if matches(w, "peakrate") {
            let v = c.next_arg()?;
            if prate != 0 {
                return Err(duparg("peakrate", v));
            }
            prate = get_rate(v).ok_or_else(|| invarg("peakrate", v))?;
        } else if [
            "reclassify",
            "drop",
            "shot",
            "continue",
            "pass",
            "ok",
            "pipe",
            "goto",
        ]
        .iter()
        .any(|k| matches(w, k))
        {
            p.action = parse_control(c, false, false)?.ok_or_else(|| bad(""))?;
            ok += 1;
            continue;
        } else if w == "conform-exceed" {
            c.next_arg()?;
            let (e, r) = parse_control_slash(c)?;
            p.action = e;
            if let Some(r) = r {
                presult = Some(r);
            }
            ok += 1;
            continue;
        } else if matches(w, "overhead") {
            let v = c.next_arg()?;
            overhead = get_u16(v, 10).ok_or_else(|| invarg("overhead", v))?;
        } else if matches(w, "linklayer") {
            let v = c.next_arg()?;
            ll = if matches(v, "ethernet") {
                LinkLayer::Ethernet
            } else if matches(v, "atm") || matches(v, "adsl") {
                LinkLayer::Atm
            } else {
                return Err(invarg("linklayer", v));
            };
        } else if matches(w, "pkts_rate") {
            let v = c.next_arg()?;
            if pps != 0 {
                return Err(duparg("pkts_rate", v));
            }
            pps = v.parse().map_err(|_| invarg("pkts_rate", v))?;
        } else if matches(w, "pkts_burst") {
            let v = c.next_arg()?;
            if ppsburst != 0 {
                return Err(duparg("pkts_burst", v));
            }
            ppsburst = v.parse().map_err(|_| invarg("pkts_burst", v))?;
        } else if w == "help" {
            return Err(Failure::syntax(POLICE_USAGE));
        } else {
            break;
        }
        c.fwd();
        ok += 1;
    }
    if ok == 0 {
        return Err(bad(""));
    }
    if rate != 0 && avrate != 0 {
        return Err(bad(""));
    }
    if rate == 0 && avrate == 0 && index == 0 && mtu == 0 && pps == 0 {
        return Err(bad(
            "'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.",
        ));
    }
    if rate != 0 && buffer == 0 && avrate == 0 {
        return Err(bad("'burst' requires 'rate'."));
    }
    if pps != 0 && ppsburst == 0 {
        return Err(bad("'pkts_burst' requires 'pkts_rate'."));
    }
    if pps != 0 && rate != 0 {
        return Err(bad(
            "'rate' and 'pkts_rate' are not allowed in same action.",
        ));
    }
    if prate != 0 {
        if rate == 0 {
            return Err(bad("'peakrate' requires 'rate'."));
        }
        if mtu == 0 {
            return Err(bad("'mtu' is required, if 'peakrate' is requested."));
        }
    }
    let spec = |r: u64| RateSpec {
        rate: r,
        overhead,
        mpu: mpu.min(u16::MAX as u32) as u16,
        linklayer: ll,
    };
    if rate != 0 {
        p.rate = Some(spec(rate));
        p.burst = calc_xmittime(rate, buffer);
    }
    // The kernel keeps `255 << cell_log` when no mtu was given (tc_calc_rtable's cell for 2047 bytes).
    p.mtu = if mtu != 0 {
        mtu
    } else if rate != 0 {
        let cell = rcell.unwrap_or_else(|| {
            let mut l = 0u8;
            while (2047u32 >> l) > 255 {
                l += 1;
            }
            l
        });
        255u32 << cell
    } else {
        u32::MAX
    };
    if prate != 0 {
        p.peakrate = Some(spec(prate));
    }
    p.avrate = avrate as u32;
    if let Some(r) = presult {
        p.result = r;
    }
    if pps != 0 {
        p.pkt_rate = Some(pps);
        p.pkt_burst = calc_xmittime(pps, ppsburst.min(u32::MAX as u64) as u32) as u64;
    }
    Ok((ActionParams::Police(p), index))
}

const SKBEDIT_USAGE: &str = "Usage: ... skbedit <[QM] [PM] [MM] [PT] [IF]>\nQM = queue_mapping QUEUE_MAPPING\nPM = priority PRIORITY\nMM = mark MARK[/MASK]\nPT = ptype PACKETYPE\nIF = inheritdsfield\nPACKETYPE = is one of:\n  host, otherhost, broadcast, multicast\nQUEUE_MAPPING = device transmit queue to use\nPRIORITY = classID to assign to priority field\nMARK = firewall mark to set\nMASK = mask applied to firewall mark (0xffffffff by default)\nnote: inheritdsfield maps DS field to skb->priority";

/// `parse_skbedit`.
fn parse_skbedit(c: &mut Cur) -> Result<(ActionParams, u32)> {
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

const CONNMARK_USAGE: &str = "Usage: ... connmark [zone ZONE] [CONTROL] [index <INDEX>]\nwhere :\n\tZONE is the conntrack zone\n\tCONTROL := reclassify | pipe | drop | continue | ok |\n\t           goto chain <CHAIN_INDEX>";

/// `parse_connmark`: `connmark [zone Z] [CONTROL] [index N]`, control `pipe` by default. When it
/// fails, tc's cursor is still at `connmark` (the parser worked on copies).
fn parse_connmark(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let start = c.i;
    connmark_body(c).inspect_err(|f| {
        if f.code == 1 {
            c.i = start;
        }
    })
}

fn connmark_body(c: &mut Cur) -> Result<(ActionParams, u32)> {
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
    let at = c.i;
    match parse_control(c, false, true) {
        Ok(Some(r)) => cm.action = r,
        Err(f) if f.code != 1 => return Err(f),
        _ => c.i = at,
    }
    let mut index = 0;
    if c.peek().is_some_and(|w| matches(w, "index")) {
        let v = c.next_arg()?;
        index = get_u32(v, 10).ok_or_else(|| bad("connmark: Illegal \"index\""))?;
        c.fwd();
    }
    Ok((ActionParams::Connmark(cm), index))
}

const MIRRED_USAGE: &str = "Usage: mirred <DIRECTION> <ACTION> [index INDEX] <dev DEVICENAME>\nwhere:\n\tDIRECTION := <ingress | egress>\n\tACTION := <mirror | redirect>\n\tINDEX  is the specific policy instance id\n\tDEVICENAME is the devicename";

/// `mirred_n2a`.
fn mirred_n2a(eaction: u32) -> &'static str {
    match eaction {
        TCA_EGRESS_REDIR => "Egress Redirect",
        TCA_INGRESS_REDIR => "Ingress Redirect",
        TCA_EGRESS_MIRROR => "Egress Mirror",
        TCA_INGRESS_MIRROR => "Ingress Mirror",
        _ => "unknown",
    }
}

/// `parse_mirred`: `mirred egress|ingress mirror|redirect [index N] dev DEV [CONTROL] [index N]`.
fn parse_mirred(c: &mut Cur) -> Result<(ActionParams, u32)> {
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
fn mirred_direction(c: &mut Cur) -> Result<(ActionParams, u32)> {
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

/// `new_cmd`: a word that starts the next `tc actions` command.
fn new_cmd(w: &str) -> bool {
    ["change", "replace", "delete", "get", "add"]
        .iter()
        .any(|c| matches(w, c))
}

/// `parse_action`: the actions from the cursor on, until `classid`/`flowid`, a new command, or a word
/// that is no action. `Failure` code 1 is tc's `return -1`.
pub fn parse_actions(c: &mut Cur) -> Result<Vec<ActionSpec>> {
    let mut out = Vec::new();
    let mut eap = false;
    if c.left() == 0 {
        return Err(bad(""));
    }
    while let Some(w) = c.peek() {
        if w == "action" {
            c.fwd();
            eap = true;
            continue;
        }
        if w == "flowid" || w == "classid" {
            break;
        }
        if w == "help" {
            return Err(bad(""));
        }
        if new_cmd(w) {
            break;
        }
        let kind = if action_a2n(w, false).is_some() {
            "gact"
        } else {
            w
        };
        eap = false;
        // The kinds' parsers work on copies of argc/argv: on failure tc reports the position of the kind.
        let at_kind = (c.left(), w.to_string());
        let parsed = match kind {
            "police" => parse_police(c, true),
            "skbedit" => parse_skbedit(c),
            "connmark" => parse_connmark(c),
            "mirred" => parse_mirred(c),
            // tc falls back on gact for any kind it has no module for: `action pump` is gact's "Bad
            // action type pump".
            _ => parse_gact(c),
        };
        let (params, index) = parsed.map_err(|f| {
            if f.code == 1 {
                bad(format!(
                    "{}{}bad action parsing\nparse_action: bad value ({}:{})!",
                    f.msg,
                    if f.msg.is_empty() { "" } else { "\n" },
                    at_kind.0,
                    at_kind.1
                ))
            } else {
                f
            }
        })?;
        let mut spec = ActionSpec {
            kind: params.kind().to_string(),
            params: Some(params),
            index,
            cookie: None,
            flags: 0,
        };
        if c.peek() == Some("cookie") {
            let v = c.next_arg()?;
            if v.len() > 32 {
                return Err(invarg(&format!("{} Max allowed size 32", v.len()), v));
            }
            if v.len() % 2 != 0 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invarg("cookie must be a hex string\n", v));
            }
            spec.cookie = Some(
                (0..v.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&v[i..i + 2], 16).unwrap_or(0))
                    .collect(),
            );
            c.fwd();
        }
        if c.peek().is_some_and(|w| matches(w, "hw_stats")) {
            let v = c.next_arg()?;
            if !["immediate", "delayed", "disabled"]
                .iter()
                .any(|k| matches(v, k))
            {
                return Err(invarg("value is invalid\n", v));
            }
            c.fwd();
        }
        if c.peek() == Some("no_percpu") {
            spec.flags |= ACT_FLAG_NO_PERCPU;
            c.fwd();
        }
        for _ in 0..2 {
            match c.peek() {
                Some("skip_sw") => {
                    spec.flags |= ACT_FLAG_SKIP_SW;
                    c.fwd();
                }
                Some("skip_hw") => {
                    spec.flags |= ACT_FLAG_SKIP_HW;
                    c.fwd();
                }
                _ => {}
            }
        }
        out.push(spec);
    }
    if eap {
        return Err(bad(format!(
            "bad action empty 1\nparse_action: bad value ({}:{})!",
            c.left(),
            c.peek().unwrap_or("(null)")
        )));
    }
    Ok(out)
}

/// `print_action_control` on a printer: the code's name (`"control_action":{"type":…}` in JSON) between
/// text-only `prefix` and `suffix`.
pub fn print_control(p: &mut Printer, prefix: &str, c: Control, suffix: &str) {
    p.fp(prefix);
    p.open_object(Some("control_action"));
    let name = action_n2a(c);
    p.string("type", &name, &name);
    if ext_is(c, TC_ACT_GOTO_CHAIN) {
        let n = c as u32 & TC_ACT_EXT_VAL_MASK;
        p.number("chain", &format!(" chain {n}"), n);
    }
    if ext_is(c, TC_ACT_JUMP) {
        let n = c as u32 & TC_ACT_EXT_VAL_MASK;
        p.number("jump", &format!(" {n}"), n);
    }
    p.close_object();
    p.fp(suffix);
}

/// `print_tm`: the kernel reports ages in clock ticks (USER_HZ 100) and tc prints those that are not 0,
/// in whole seconds.
fn print_tm(p: &mut Printer, a: &Action, now: u64) {
    let ticks = |t: u64| now.saturating_sub(t) / 10_000_000;
    let install = ticks(a.installed);
    if install != 0 {
        let v = install / 100;
        p.number("installed", &format!(" installed {v} sec"), v);
    }
    if let Some(l) = a.lastuse.map(ticks).filter(|t| *t != 0) {
        let v = l / 100;
        p.number("last_used", &format!(" used {v} sec"), v);
    }
}

/// `index`, `ref`, `bind` as gact, skbedit and connmark print them (`\t index 1 ref 1 bind 1`), the
/// times under `-s`, and the newline.
fn print_index_refs(p: &mut Printer, a: &Action, index_text: &str, flags: ShowFlags, now: u64) {
    p.nl();
    p.number("index", &format!("{index_text}{}", a.index), a.index);
    p.number("ref", &format!(" ref {}", a.refcnt), a.refcnt);
    p.number("bind", &format!(" bind {}", a.bindcnt), a.bindcnt);
    if flags.stats {
        print_tm(p, a, now);
    }
    p.nl();
}

/// The kind's own part of one action (`print_aopt`).
fn print_aopt(p: &mut Printer, a: &Action, flags: ShowFlags, now: u64) {
    match &a.params {
        ActionParams::Gact(g) => {
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
            p.string("random_type", &format!("\t random type {pt}"), pt);
            print_control(p, " ", pa, " ");
            p.number("val", &format!("val {pv}"), pv);
            p.close_object();
            print_index_refs(p, a, "\t index ", flags, now);
        }
        ActionParams::Skbedit(s) => {
            p.string("kind", "skbedit ", "skbedit");
            if let Some(q) = s.queue_mapping {
                p.number("queue_mapping", &format!("queue_mapping {q}"), q);
            }
            if let Some(pr) = s.priority {
                let c = crate::filter::sprint_classid(pr);
                p.string("priority", &format!(" priority {c}"), &c);
            }
            if let Some(m) = s.mark {
                p.number("mark", &format!(" mark {m}"), m);
            }
            if let Some(m) = s.mask {
                p.hex("mask", &format!("/{m:#x}"), m);
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
                    Some(n) => p.string("ptype", &format!(" ptype {n}"), n),
                    None => p.number("ptype", &format!(" ptype {t}"), t),
                }
            }
            if s.inherit_dsfield {
                p.null("inheritdsfield", " inheritdsfield");
            }
            print_control(p, " ", s.action, "");
            print_index_refs(p, a, "\t index ", flags, now);
        }
        ActionParams::Mirred(m) => {
            // `print_mirred`: a target that went away has ifindex 0, which `ll_index_to_name` prints "*".
            let dev = if m.target == MirredTarget::Gone {
                "*"
            } else {
                m.dev.as_str()
            };
            p.string("kind", "mirred ", "mirred");
            p.fp(&format!("({}", mirred_n2a(m.eaction)));
            let (act, dir) = match m.eaction {
                TCA_EGRESS_REDIR => ("redirect", "egress"),
                TCA_EGRESS_MIRROR => ("mirror", "egress"),
                TCA_INGRESS_REDIR => ("redirect", "ingress"),
                TCA_INGRESS_MIRROR => ("mirror", "ingress"),
                _ => ("unknown", "unknown"),
            };
            p.json_string("mirred_action", act);
            p.json_string("direction", dir);
            p.string("to_dev", &format!(" to device {dev})"), dev);
            print_control(p, " ", m.action, "");
            print_index_refs(p, a, "\tindex ", flags, now);
        }
        ActionParams::Connmark(cm) => {
            p.string("kind", "connmark ", "connmark");
            p.number("zone", &format!("zone {}", cm.zone), cm.zone);
            print_control(p, " ", cm.action, "");
            print_index_refs(p, a, "\t index ", flags, now);
        }
        ActionParams::Police(pp) => print_police(p, a, pp, flags, now),
    }
}

/// One action as `tc_dump_action` prints it, from the newline before `action order N:` on (its JSON
/// object, in the caller's `actions` array). `bind`: the action is listed inside a filter.
pub fn print_action(
    a: &Action,
    order: u32,
    bind: bool,
    flags: ShowFlags,
    now: u64,
    p: &mut Printer,
) {
    p.open_object(None);
    p.nl();
    p.number("order", &format!("\taction order {order}: "), order);
    print_aopt(p, a, flags, now);
    if flags.stats {
        let s = &a.stats;
        p.fp("\tAction statistics:");
        p.nl();
        p.open_object(Some("stats"));
        p.fp("\t");
        p.number("bytes", &format!("Sent {} bytes", s.bytes), s.bytes);
        p.number("packets", &format!(" {} pkt", s.packets), s.packets);
        p.number("drops", &format!(" (dropped {}", s.drops), s.drops);
        p.number("overlimits", &format!(", overlimits {}", s.overlimits), s.overlimits);
        p.number("requeues", " requeues 0) ", 0);
        p.nl();
        p.fp("\t");
        p.number("backlog", "backlog 0b", 0);
        p.number("qlen", " 0p", 0);
        p.fp(" requeues 0");
        p.close_object();
        p.nl();
    }
    if let Some(ck) = &a.cookie {
        let hex: String = ck.iter().map(|b| format!("{b:02x}")).collect();
        p.string("cookie", &format!("\tcookie {hex}"), &hex);
        p.nl();
    }
    let mut newline = false;
    if a.flags & ACT_FLAG_NO_PERCPU != 0 {
        newline = true;
        p.boolean("no_percpu", "\tno_percpu", true);
    }
    if !bind {
        if a.flags & ACT_FLAG_SKIP_HW != 0 {
            newline = true;
            p.boolean("skip_hw", "\tskip_hw", true);
        }
        if a.flags & ACT_FLAG_SKIP_SW != 0 {
            newline = true;
            p.boolean("skip_sw", "\tskip_sw", true);
        }
        if a.flags & ACT_FLAG_SKIP_HW == 0 {
            newline = true;
            p.boolean("not_in_hw", "\tnot_in_hw", true);
        }
    }
    if newline {
        p.nl();
    }
    p.close_object();
}

/// `tc_dump_action`: a filter's (or a listing's) actions, in order from `first`.
pub fn print_actions(
    actions: &[std::rc::Rc<std::cell::RefCell<Action>>],
    first: u32,
    bind: bool,
    flags: ShowFlags,
    now: u64,
    p: &mut Printer,
) {
    p.open_array("actions");
    for (i, a) in actions.iter().enumerate() {
        print_action(&a.borrow(), first + i as u32, bind, flags, now, p);
    }
    p.close_array();
}

/// `print_police`: ` police 0x1 rate … burst … mtu … action … overhead …`, then the `ref` line.
pub fn print_police(p: &mut Printer, a: &Action, pp: &PoliceParams, flags: ShowFlags, now: u64) {
    print_police_with(p, a, pp, flags, Some(now));
}

/// `tc_print_police` for the old `police` form inside a filter (u32, fw, basic, flow): as an action,
/// without the times.
pub fn print_police_compat(p: &mut Printer, a: &Action, flags: ShowFlags) {
    if let ActionParams::Police(pp) = &a.params {
        print_police_with(p, a, pp, flags, None);
    }
}

fn print_police_with(
    p: &mut Printer,
    a: &Action,
    pp: &PoliceParams,
    flags: ShowFlags,
    now: Option<u64>,
) {
    p.json_string("kind", "police");
    let rate = pp.rate.map_or(0, |r| r.rate);
    p.fp(&format!(" police {:#x} ", a.index));
    p.json_number("index", a.index);
    p.fp(&format!(
        "rate {} burst {} mtu {} ",
        sprint_rate(rate),
        sprint_size(calc_xmitsize(rate, pp.burst)),
        sprint_size(pp.mtu)
    ));
    if flags.raw {
        p.fp(&format!("[{:08x}] ", pp.burst));
    }
    if let Some(pr) = pp.peakrate {
        p.fp(&format!("peakrate {} ", sprint_rate(pr.rate)));
    }
    if pp.avrate != 0 {
        p.fp(&format!("avrate {} ", sprint_rate(pp.avrate as u64)));
    }
    if let Some(pps) = pp.pkt_rate {
        let burst = calc_xmitsize(pps, pp.pkt_burst.min(u32::MAX as u64) as u32);
        p.number("pkts_rate", &format!("pkts_rate {pps} "), pps);
        p.number("pkts_burst", &format!("pkts_burst {burst} "), burst);
    }
    print_control(p, "action ", pp.action, "");
    if pp.result != TC_ACT_OK {
        print_control(p, "/", pp.result, " ");
    } else {
        p.fp(" ");
    }
    let spec = pp.rate.unwrap_or_default();
    p.number(
        "overhead",
        &format!("overhead {} ", sprint_size(spec.overhead as u32)),
        spec.overhead,
    );
    if spec.linklayer == LinkLayer::Atm || flags.details {
        let ll = spec.linklayer.name();
        p.string("linklayer", &format!("linklayer {ll} "), ll);
    }
    p.nl();
    p.number("ref", &format!("\tref {} ", a.refcnt), a.refcnt);
    p.number("bind", &format!("bind {} ", a.bindcnt), a.bindcnt);
    if let Some(now) = now.filter(|_| flags.stats) {
        print_tm(p, a, now);
    }
    p.nl();
}

const ACT_USAGE: &str = "usage: tc actions <ACTSPECOP>*\nWhere: \tACTSPECOP := ACR | GD | FL\n\tACR := add | change | replace <ACTSPEC>*\n\tGD := get | delete | <ACTISPEC>*\n\tFL := ls | list | flush | <ACTNAMESPEC>\n\tACTNAMESPEC :=  action <ACTNAME>\n\tACTISPEC := <ACTNAMESPEC> <INDEXSPEC>\n\tACTSPEC := action <ACTDETAIL> [INDEXSPEC] [HWSTATSSPEC] [SKIPSPEC]\n\tINDEXSPEC := index <32 bit indexvalue>\n\tHWSTATSSPEC := hw_stats [ immediate | delayed | disabled ]\n\tSKIPSPEC := [ skip_sw | skip_hw ]\n\tACTDETAIL := <ACTNAME> <ACTPARAMS>\n\t\tExample ACTNAME is gact, mirred, bpf, etc\n\t\tEach action has its own parameters (ACTPARAMS)\n";

/// The action kinds tclab's "kernel" has.
pub const KINDS: &[&str] = &["gact", "police", "skbedit", "connmark", "mirred"];

const TALK: &str = "We have an error talking to the kernel";

/// The device names a command's parsers may look up: only a command that names mirred needs them.
pub fn device_names(engine: &tclab_core::Engine, argv: &[String]) -> Vec<String> {
    if argv.iter().any(|w| w == "mirred") {
        engine.devices.keys().cloned().collect()
    } else {
        Vec::new()
    }
}

/// `tc actions …` (`do_action`): commands may follow one another on one line.
pub fn actions_cmd(
    engine: &mut tclab_core::Engine,
    argv: &[String],
    flags: ShowFlags,
    now: u64,
    out: &mut crate::Output,
) -> Result<()> {
    let devices = device_names(engine, argv);
    let mut c = Cur::with_devices(argv, &devices);
    while let Some(w) = c.peek() {
        if matches(w, "add") || matches(w, "change") || matches(w, "replace") {
            let replace = !matches(w, "add");
            c.fwd();
            let specs = parse_actions(&mut c).map_err(|f| {
                let msg = if f.code == 1 {
                    format!("{}\nIllegal \"action\"", f.msg)
                        .trim_start()
                        .to_string()
                } else {
                    f.msg
                };
                Failure::syntax(msg)
            })?;
            if specs.is_empty() {
                continue;
            }
            for s in &specs {
                if !KINDS.contains(&s.kind.as_str()) {
                    return Err(Failure::syntax(format!(
                        "Error: Failed to load TC action module.\n{TALK}"
                    )));
                }
            }
            engine
                .actions
                .instantiate(&specs, false, replace, now)
                .map_err(|e| Failure::syntax(format!("{e}\n{TALK}")))?;
            if specs.iter().any(|s| s.kind == "mirred") {
                engine.refresh_mirred();
            }
        } else if matches(w, "delete") || matches(w, "get") {
            let get = matches(w, "get");
            c.fwd();
            let mut targets = Vec::new();
            while let Some(w) = c.peek() {
                if w == "action" {
                    c.fwd();
                    continue;
                }
                if w == "help" {
                    return Err(Failure::syntax(""));
                }
                let k = w;
                if !KINDS.contains(&k) && action_a2n(k, false).is_none() {
                    return Err(Failure::syntax(format!("Error: non existent action: {k}")));
                }
                c.fwd();
                if c.peek().is_none() {
                    return Err(Failure::syntax(format!(
                        "Error: no index specified action: {k}"
                    )));
                }
                if c.peek().is_some_and(|w| matches(w, "index")) {
                    let v = c.next_arg()?;
                    let i = get_u32(v, 10).ok_or_else(|| Failure::syntax("Illegal \"index\""))?;
                    c.fwd();
                    targets.push((k.to_string(), i));
                } else {
                    return Err(Failure::syntax(format!(
                        "Error: no index specified action: {k}"
                    )));
                }
            }
            // tc_action_gd returns 1 without consuming its words, and do_action then reads `action` as
            // the next command.
            let failed = |e: tclab_core::KernelError| {
                Failure::syntax(format!(
                    "{e}\n{TALK}\nCommand \"action\" is unknown, try \"tc actions help\"."
                ))
            };
            let not_found = || {
                failed(tclab_core::KernelError::msg(
                    tclab_core::error::Errno::NoEntry,
                    "TC action with specified index not found",
                ))
            };
            if get {
                let mut found = Vec::new();
                for (k, i) in &targets {
                    found.push(engine.actions.get(k, *i).ok_or_else(not_found)?);
                }
                // `print_action`: the count in one object, the actions in another.
                let mut p = Printer::new(flags);
                p.open_object(None);
                p.number("total acts", "total acts 0", 0);
                p.nl();
                p.close_object();
                p.open_object(None);
                print_actions(&found, 1, false, flags, now, &mut p);
                p.close_object();
                out.stdout.push_str(&p.finish());
            } else {
                for (k, i) in &targets {
                    if engine.actions.get(k, *i).is_none() {
                        return Err(not_found());
                    }
                }
                for (k, i) in &targets {
                    engine.actions.delete(k, *i).map_err(failed)?;
                }
            }
        } else if matches(w, "list")
            || matches(w, "show")
            || matches(w, "lst")
            || matches(w, "flush")
        {
            let flush = matches(w, "flush");
            if c.left() <= 2 {
                return Err(Failure::syntax(ACT_USAGE));
            }
            c.fwd();
            c.fwd();
            let k = c.peek().unwrap_or("");
            let k = if action_a2n(k, false).is_some() {
                "gact"
            } else {
                k
            };
            if !KINDS.contains(&k) {
                return Err(Failure::syntax(format!("bad action {k}")));
            }
            if flush {
                let (n, err) = engine.actions.flush(k);
                if let Some(e) = err {
                    if n == 0 {
                        return Err(Failure::options(format!("{e}\nWe have an error flushing")));
                    }
                    out.stderr
                        .push_str("Warning: Unable to flush all TC actions.\n");
                }
            } else {
                // `tc_action_list`: the JSON array is opened and closed around the dump, empty or not.
                let list = engine.actions.list(k);
                let mut p = Printer::new(flags);
                if !list.is_empty() {
                    let n = list.len();
                    p.open_object(None);
                    p.number("total acts", &format!("total acts {n}"), n);
                    p.nl();
                    p.close_object();
                    p.open_object(None);
                    print_actions(&list, 0, false, flags, now, &mut p);
                    p.close_object();
                }
                out.stdout.push_str(&p.finish());
            }
            return Ok(());
        } else if matches(w, "help") {
            return Err(Failure::syntax(ACT_USAGE));
        } else {
            return Err(Failure::syntax(format!(
                "Command \"{w}\" is unknown, try \"tc actions help\"."
            )));
        }
    }
    Ok(())
}
