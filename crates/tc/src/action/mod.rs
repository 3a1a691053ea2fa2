//! Actions in the tc language: `action …` lists inside filters and the `tc actions` command, after
//! iproute2's `tc/m_action.c` and `tc_util.c` (6.1), with one file per action kind for its parser and
//! printer, as iproute2 has one `m_X.c`: `gact.rs`, `police.rs`, `skbedit.rs`, `connmark.rs`,
//! `mirred.rs`, `nat.rs`, `csum.rs`, `pedit.rs`, `simple.rs`, `skbmod.rs`, `vlan.rs`, `bpf.rs`,
//! `mpls.rs`, `tunnel_key.rs`, `sample.rs`, `gate.rs`, `ctinfo.rs`, `ife.rs`, `ct.rs`; `parse_actions` and
//! `print_aopt` dispatch to them, one line each.
//!
//! Parsers follow tc's return conventions through [`Failure`]: tc's `exit(-1)` (usage, `invarg`) is a
//! code-255 failure that ends the command wherever it happens; a parser's `return -1` is a code-1 failure,
//! which the caller turns into its own exit code (1 for `tc filter`, 255 for `tc actions`).

mod bpf;
mod connmark;
mod csum;
pub(crate) mod ct;
mod ctinfo;
mod gact;
mod gate;
mod ife;
mod mirred;
mod mpls;
mod nat;
mod pedit;
mod police;
mod sample;
mod simple;
mod skbedit;
mod skbmod;
mod tunnel_key;
/// Hex pairs as `hex2mem` reads them (flower's `geneve_opts` too).
pub(crate) use tunnel_key::hex2mem;
mod vlan;

pub use police::{parse_police, print_police_compat};

use crate::jprint::Printer;
use crate::util::{
    calc_xmitsize, calc_xmittime, get_rate, get_size, get_size_and_cell, get_tc_classid, get_u16,
    get_u32, matches, sprint_rate, sprint_size,
};
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

/// `parse_action_control_dflt(…, false, dflt)`: the control word at the cursor, or (for a word that is
/// none, or a malformed one) `dflt` with the cursor where it was.
fn control_or(c: &mut Cur, dflt: Control) -> Result<Control> {
    let at = c.i;
    match parse_control(c, false, true) {
        Ok(Some(r)) => Ok(r),
        Err(f) if f.code != 1 => Err(f),
        _ => {
            c.i = at;
            Ok(dflt)
        }
    }
}

/// `index N` at the cursor, if it is there, read in `base`; `illegal` is the kind's complaint about N.
fn index_arg(c: &mut Cur, base: u32, illegal: impl FnOnce(&str) -> String) -> Result<Option<u32>> {
    if !c.peek().is_some_and(|w| matches(w, "index")) {
        return Ok(None);
    }
    let v = c.next_arg()?;
    let index = get_u32(v, base).ok_or_else(|| bad(illegal(v)))?;
    c.fwd();
    Ok(Some(index))
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
            "skbedit" => skbedit::parse_skbedit(c),
            "connmark" => connmark::parse_connmark(c),
            "mirred" => mirred::parse_mirred(c),
            "nat" => nat::parse_nat(c),
            "csum" => csum::parse_csum(c),
            "pedit" => pedit::parse_pedit(c),
            "simple" => simple::parse_simple(c),
            "skbmod" => skbmod::parse_skbmod(c),
            "vlan" => vlan::parse_vlan(c),
            "bpf" => bpf::parse_bpf(c),
            "mpls" => mpls::parse_mpls(c),
            "tunnel_key" => tunnel_key::parse_tunnel_key(c),
            "sample" => sample::parse_sample(c),
            "gate" => gate::parse_gate(c),
            "ctinfo" => ctinfo::parse_ctinfo(c),
            "ife" => ife::parse_ife(c),
            "ct" => ct::parse_ct(c),
            // tc falls back on gact for any kind it has no module for: `action pump` is gact's "Bad
            // action type pump".
            _ => gact::parse_gact(c),
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
        p.number("chain", format_args!(" chain {n}"), n);
    }
    if ext_is(c, TC_ACT_JUMP) {
        let n = c as u32 & TC_ACT_EXT_VAL_MASK;
        p.number("jump", format_args!(" {n}"), n);
    }
    p.close_object();
    p.fp(suffix);
}

/// `print_tm`: the kernel reports ages in clock ticks (USER_HZ 100; `tcf_tm_dump`: install, lastuse,
/// firstuse — 0 for an action no packet has reached — and expires, which no software action sets) and
/// tc prints those that are not 0, in whole seconds: `installed 9 sec used 1 sec firstused 3 sec` (tc
/// 6.1 on Linux 6.18, a mirred action three pings used), `installed 2 sec used 2 sec` before any.
fn print_tm(p: &mut Printer, a: &Action, now: u64) {
    let ticks = |t: u64| now.saturating_sub(t) / 10_000_000;
    let firstuse = a.firstuse.map_or(0, ticks);
    for (key, text, t) in [
        ("installed", "installed", ticks(a.installed)),
        ("last_used", "used", ticks(a.lastuse)),
        ("first_used", "firstused", firstuse),
    ] {
        if t != 0 {
            let v = t / 100;
            p.number(key, format_args!(" {text} {v} sec"), v);
        }
    }
}

/// `index`, `ref`, `bind` as gact, skbedit and connmark print them (`\t index 1 ref 1 bind 1`), the
/// times under `-s`, and the newline.
fn print_index_refs(p: &mut Printer, a: &Action, index_text: &str, flags: ShowFlags, now: u64) {
    p.nl();
    index_refs(p, a, index_text, flags, now);
    p.nl();
}

/// `index`, `ref` and `bind` after `index_text`, and the times under `-s`, with nothing around them.
fn index_refs(p: &mut Printer, a: &Action, index_text: &str, flags: ShowFlags, now: u64) {
    p.number("index", format_args!("{index_text}{}", a.index), a.index);
    p.number("ref", format_args!(" ref {}", a.refcnt), a.refcnt);
    p.number("bind", format_args!(" bind {}", a.bindcnt), a.bindcnt);
    if flags.stats {
        print_tm(p, a, now);
    }
}

/// The kind's own part of one action (`print_aopt`).
fn print_aopt(p: &mut Printer, a: &Action, flags: ShowFlags, now: u64) {
    match &a.params {
        ActionParams::Gact(g) => gact::print(p, a, g, flags, now),
        ActionParams::Skbedit(s) => skbedit::print(p, a, s, flags, now),
        ActionParams::Mirred(m) => mirred::print(p, a, m, flags, now),
        ActionParams::Connmark(cm) => connmark::print(p, a, cm, flags, now),
        ActionParams::Police(pp) => police::print(p, a, pp, flags, now),
        ActionParams::Nat(n) => nat::print(p, a, n, flags, now),
        ActionParams::Csum(cs) => csum::print(p, a, cs, flags, now),
        ActionParams::Pedit(e) => pedit::print(p, a, e, flags, now),
        ActionParams::Simple(si) => simple::print(p, a, si, flags, now),
        ActionParams::Skbmod(sm) => skbmod::print(p, a, sm, flags, now),
        ActionParams::Vlan(v) => vlan::print(p, a, v, flags, now),
        ActionParams::Bpf(b) => bpf::print(p, a, b, flags, now),
        ActionParams::Mpls(m) => mpls::print(p, a, m, flags, now),
        ActionParams::TunnelKey(t) => tunnel_key::print(p, a, t, flags, now),
        ActionParams::Sample(sa) => sample::print(p, a, sa, flags, now),
        ActionParams::Gate(g) => gate::print(p, a, g, flags, now),
        ActionParams::Ctinfo(ci) => ctinfo::print(p, a, ci, flags, now),
        ActionParams::Ife(i) => ife::print(p, a, i, flags, now),
        ActionParams::Ct(ct) => ct::print(p, a, ct, flags, now),
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
    p.number("order", format_args!("\taction order {order}: "), order);
    print_aopt(p, a, flags, now);
    if flags.stats {
        print_stats(p, &a.stats);
    }
    print_cookie(p, a);
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

/// The action's cookie, in hex.
fn print_cookie(p: &mut Printer, a: &Action) {
    if let Some(ck) = &a.cookie {
        let hex: String = ck.iter().map(|b| format!("{b:02x}")).collect();
        p.string("cookie", format_args!("\tcookie {hex}"), &hex);
        p.nl();
    }
}

/// `Action statistics:` and `print_tcstats2_attr`'s lines.
fn print_stats(p: &mut Printer, s: &tclab_core::action::ActionStats) {
    p.fp("\tAction statistics:");
    p.nl();
    p.open_object(Some("stats"));
    p.fp("\t");
    p.number("bytes", format_args!("Sent {} bytes", s.bytes), s.bytes);
    p.number("packets", format_args!(" {} pkt", s.packets), s.packets);
    p.number("drops", format_args!(" (dropped {}", s.drops), s.drops);
    p.number(
        "overlimits",
        format_args!(", overlimits {}", s.overlimits),
        s.overlimits,
    );
    p.number("requeues", " requeues 0) ", 0);
    p.nl();
    p.fp("\t");
    p.number("backlog", "backlog 0b", 0);
    p.number("qlen", " 0p", 0);
    p.fp(" requeues 0");
    p.close_object();
    p.nl();
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

/// A filter's actions in a terse dump (`tcf_action_dump_terse`: the kind, statistics and cookie, no
/// options and no index), as `tc_dump_action` prints them: each kind's printer prints its name, if it
/// does, before it finds no options.
pub fn print_actions_terse(
    actions: &[std::rc::Rc<std::cell::RefCell<Action>>],
    first: u32,
    flags: ShowFlags,
    p: &mut Printer,
) {
    terse(actions, first, false, flags, p);
}

/// The terse dump's actions; `with_index` for `tc -br actions ls` (`tcf_action_dump_terse` from the
/// action table puts the index, which tc then prints).
fn terse(
    actions: &[std::rc::Rc<std::cell::RefCell<Action>>],
    first: u32,
    with_index: bool,
    flags: ShowFlags,
    p: &mut Printer,
) {
    p.open_array("actions");
    for (i, a) in actions.iter().enumerate() {
        let a = a.borrow();
        let order = first + i as u32;
        p.open_object(None);
        p.nl();
        p.number("order", format_args!("\taction order {order}: "), order);
        // Each kind's printer up to where it finds no options: police prints its name in JSON only,
        // nat as `type`, pedit with a space before, simple, skbmod and gate not at all.
        match a.kind() {
            "police" => p.json_string("kind", "police"),
            "simple" | "skbmod" | "gate" => {}
            "nat" => p.string("type", " nat ", "nat"),
            "pedit" => p.string("kind", " pedit ", "pedit"),
            k => p.string("kind", format_args!("{k} "), k),
        }
        if with_index {
            p.number("index", format_args!("\t index {}", a.index), a.index);
            p.nl();
        }
        if flags.stats {
            print_stats(p, &a.stats);
        }
        print_cookie(p, &a);
        p.close_object();
    }
    p.close_array();
}

const ACT_USAGE: &str = "usage: tc actions <ACTSPECOP>*\nWhere: \tACTSPECOP := ACR | GD | FL\n\tACR := add | change | replace <ACTSPEC>*\n\tGD := get | delete | <ACTISPEC>*\n\tFL := ls | list | flush | <ACTNAMESPEC>\n\tACTNAMESPEC :=  action <ACTNAME>\n\tACTISPEC := <ACTNAMESPEC> <INDEXSPEC>\n\tACTSPEC := action <ACTDETAIL> [INDEXSPEC] [HWSTATSSPEC] [SKIPSPEC]\n\tINDEXSPEC := index <32 bit indexvalue>\n\tHWSTATSSPEC := hw_stats [ immediate | delayed | disabled ]\n\tSKIPSPEC := [ skip_sw | skip_hw ]\n\tACTDETAIL := <ACTNAME> <ACTPARAMS>\n\t\tExample ACTNAME is gact, mirred, bpf, etc\n\t\tEach action has its own parameters (ACTPARAMS)\n\n";

/// The action kinds tclab's "kernel" has.
pub const KINDS: &[&str] = &[
    "gact",
    "police",
    "skbedit",
    "connmark",
    "mirred",
    "nat",
    "csum",
    "pedit",
    "simple",
    "skbmod",
    "vlan",
    "bpf",
    "mpls",
    "tunnel_key",
    "sample",
    "gate",
    "ctinfo",
    "ife",
    "ct",
];

const TALK: &str = "We have an error talking to the kernel";

/// The device names a command's parsers may look up: only a command that names mirred needs them.
pub fn device_names(engine: &tclab_core::Engine, argv: &[String]) -> Vec<String> {
    if argv.iter().any(|w| w == "mirred") {
        engine.device_names()
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
                if f.code & 0x100 != 0 {
                    // tc's own `exit(N)` (`Failure::exit`).
                    return f;
                }
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
                .add_actions(&specs, replace, now)
                .map_err(|e| Failure::syntax(format!("{e}\n{TALK}")))?;
        } else if matches(w, "delete") || matches(w, "get") {
            let get = matches(w, "get");
            c.fwd();
            // `tc_action_gd` skips one more word unread: `get action gact index 1`'s `action`, and
            // `del gact help`'s kind (then `help` ends it without a word; `del gact` asks for nothing).
            c.fwd();
            let mut targets = Vec::new();
            while let Some(w) = c.peek() {
                if w == "action" {
                    c.fwd();
                    continue;
                }
                if w == "help" {
                    return Err(Failure::silent(255, "tc_action_gd (m_action.c): help"));
                }
                // `get_action_kind`: a name tc has no module for is the generic action, and the kind
                // it names is then `gact` (`strcpy(str, "gact")`).
                let k = if KINDS.contains(&w) { w } else { "gact" };
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
                    found.push(engine.actions().get(k, *i).ok_or_else(not_found)?);
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
                    if engine.actions().get(k, *i).is_none() {
                        return Err(not_found());
                    }
                }
                for (k, i) in &targets {
                    engine.delete_action(k, *i).map_err(failed)?;
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
            // tc sends any kind name (an unknown one as a generic action); the kernel flushes only a
            // kind it has, and lists nothing for one it has not.
            if flush && !KINDS.contains(&k) {
                return Err(Failure::options(
                    "Error: Cannot flush unknown TC action.\nWe have an error flushing",
                ));
            }
            if flush {
                let (n, err) = engine.flush_actions(k);
                if let Some(e) = err {
                    if n == 0 {
                        return Err(Failure::options(format!("{e}\nWe have an error flushing")));
                    }
                    out.stderr
                        .push_str("Warning: Unable to flush all TC actions.\n");
                }
            } else {
                // `tc_action_list`: the JSON array is opened and closed around the dump, empty or not.
                let list = engine.actions().list(k);
                let mut p = Printer::new(flags);
                if !list.is_empty() {
                    let n = list.len();
                    p.open_object(None);
                    p.number("total acts", format_args!("total acts {n}"), n);
                    p.nl();
                    p.close_object();
                    p.open_object(None);
                    if flags.brief {
                        terse(&list, 0, true, flags, &mut p);
                    } else {
                        print_actions(&list, 0, false, flags, now, &mut p);
                    }
                    p.close_object();
                }
                out.stdout.push_str(&p.finish());
            }
            return Ok(());
        } else if matches(w, "help") {
            return Err(Failure::syntax(ACT_USAGE));
        } else {
            return Err(Failure::returned(format!(
                "Command \"{w}\" is unknown, try \"tc actions help\"."
            )));
        }
    }
    Ok(())
}
