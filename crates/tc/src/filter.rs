//! `tc filter …`: the command (iproute2's `tc/tc_filter.c`), the option parsers of u32, fw, matchall,
//! basic and flow (`f_u32.c`, `f_fw.c`, `f_matchall.c`, `f_basic.c`, `f_flow.c`; the ematch language of
//! basic and flow is in [`crate::ematch`]) and the printers that list filters as tc prints the kernel's
//! dump.
//!
//! One tclab-specific choice: tc 6.1 prints a u32 node's class as `*flowid 1:10` (a regression, fixed in
//! iproute2 6.3 by "u32: fix TC_U32_TERMINAL printing"); tclab prints `flowid 1:10` as the fixed tc and the
//! kernel's own tdc cases expect.

use crate::action::{invarg, parse_actions, parse_police, print_police_compat, Cur};
use crate::jprint::Printer;
use crate::util::{get_tc_classid, get_u32, matches, parse_c_integer};
use crate::{Failure, Output, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::action::{ActionSpec, ACT_FLAG_SKIP_HW, ACT_FLAG_SKIP_SW};
use tclab_core::error::{Errno, KernelError};
use tclab_core::filter::basic::BasicOptions;
use tclab_core::filter::flow::{self, FlowOptions, KEY_NAMES};
use tclab_core::filter::fw::FwOptions;
use tclab_core::filter::matchall::MatchallOptions;
use tclab_core::filter::u32::{self as cu32, Key, Sel, U32Entry, U32Options};
use tclab_core::filter::{
    Classifier, Exts, FilterFlags, FilterOptions, FilterRequest, Tp, CLS_FLAGS_NOT_IN_HW,
    CLS_FLAGS_SKIP_HW, CLS_FLAGS_SKIP_SW, ETH_P_ALL,
};
use tclab_core::{Engine, Handle, Nanos};

const TALK: &str = "We have an error talking to the kernel";

const FILTER_USAGE: &str = "Usage: tc filter [ add | del | change | replace | show ] [ dev STRING ]\n       tc filter [ add | del | change | replace | show ] [ block BLOCK_INDEX ]\n       tc filter get dev STRING parent CLASSID protocol PROTO handle FILTERID pref PRIO FILTER_TYPE\n       tc filter get block BLOCK_INDEX protocol PROTO handle FILTERID pref PRIO FILTER_TYPE\n       [ pref PRIO ] protocol PROTO [ chain CHAIN_INDEX ]\n       [ estimator INTERVAL TIME_CONSTANT ]\n       [ root | ingress | egress | parent CLASSID ]\n       [ handle FILTERID ] [ [ FILTER_TYPE ] [ help | OPTIONS ] ]\n\n       tc filter show [ dev STRING ] [ root | ingress | egress | parent CLASSID ]\n       tc filter show [ block BLOCK_INDEX ]\nWhere:\nFILTER_TYPE := { rsvp | u32 | bpf | fw | route | etc. }\nFILTERID := ... format depends on classifier, see there\nOPTIONS := ... try tc filter add <desired FILTER_KIND> help";

/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)` and `…EGRESS`.
const PARENT_INGRESS: u32 = 0xffff_fff2;
const PARENT_EGRESS: u32 = 0xffff_fff3;

/// `llproto_names` of iproute2's `lib/ll_proto.c`, in its order (the first name of an id wins).
const PROTOS: &[(u16, &str)] = &[
    (0x0060, "loop"),
    (0x0200, "pup"),
    (0x0201, "pupat"),
    (0x0800, "ip"),
    (0x0805, "x25"),
    (0x0806, "arp"),
    (0x08ff, "bpq"),
    (0x0a00, "ieeepup"),
    (0x0a01, "ieeepupat"),
    (0x6000, "dec"),
    (0x6001, "dna_dl"),
    (0x6002, "dna_rc"),
    (0x6003, "dna_rt"),
    (0x6004, "lat"),
    (0x6005, "diag"),
    (0x6006, "cust"),
    (0x6007, "sca"),
    (0x8035, "rarp"),
    (0x809b, "atalk"),
    (0x80f3, "aarp"),
    (0x8137, "ipx"),
    (0x86dd, "ipv6"),
    (0x8863, "ppp_disc"),
    (0x8864, "ppp_ses"),
    (0x884c, "atmmpoa"),
    (0x8884, "atmfate"),
    (0x0001, "802_3"),
    (0x0002, "ax25"),
    (0x0003, "all"),
    (0x0004, "802_2"),
    (0x0005, "snap"),
    (0x0006, "ddcmp"),
    (0x0007, "wan_ppp"),
    (0x0008, "ppp_mp"),
    (0x0009, "localtalk"),
    (0x000c, "can"),
    (0x0010, "ppptalk"),
    (0x0011, "tr_802_2"),
    (0x0015, "mobitex"),
    (0x0016, "control"),
    (0x0017, "irda"),
    (0x0018, "econet"),
    (0x88ca, "tipc"),
    (0x8892, "profinet"),
    (0x88a2, "aoe"),
    (0x88a4, "ethercat"),
    (0x8100, "802.1Q"),
    (0x88a8, "802.1ad"),
    (0x8847, "mpls_uc"),
    (0x8848, "mpls_mc"),
    (0x6558, "teb"),
    (0x8100, "802.1Q"),
    (0x88cc, "LLDP"),
    (0x0800, "ipv4"),
];

/// `ll_proto_a2n`.
fn proto_a2n(s: &str) -> Option<u16> {
    PROTOS
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(s))
        .map(|(p, _)| *p)
        .or_else(|| crate::util::get_u16(s, 0))
}

/// `ll_proto_n2a`.
pub fn proto_n2a(p: u16) -> String {
    PROTOS
        .iter()
        .find(|(q, _)| *q == p)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("[{p}]"))
}

/// The words common to every `tc filter` command.
#[derive(Default)]
struct Common<'a> {
    dev: Option<&'a str>,
    parent: u32,
    handle: Option<&'a str>,
    prio: u32,
    protocol: Option<u16>,
    chain: Option<u32>,
    kind: Option<&'a str>,
}

fn parse_common<'a>(c: &mut Cur<'a>, list: bool) -> Result<Common<'a>> {
    let mut m = Common::default();
    while let Some(w) = c.peek() {
        match w {
            "dev" => {
                let v = c.next_arg()?;
                if m.dev.is_some() {
                    return Err(crate::duparg("dev", v));
                }
                m.dev = Some(v);
            }
            "root" | "ingress" | "egress" => {
                if m.parent != 0 {
                    return Err(Failure::syntax(format!(
                        "Error: \"{w}\" is duplicate parent ID"
                    )));
                }
                m.parent = match w {
                    "root" => Handle::ROOT.0,
                    "ingress" => PARENT_INGRESS,
                    _ => PARENT_EGRESS,
                };
            }
            "parent" => {
                let v = c.next_arg()?;
                if m.parent != 0 {
                    return Err(crate::duparg("parent", v));
                }
                m.parent = get_tc_classid(v).ok_or_else(|| {
                    invarg(
                        if list {
                            "invalid parent ID"
                        } else {
                            "Invalid parent ID"
                        },
                        v,
                    )
                })?;
            }
            "handle" => {
                let v = c.next_arg()?;
                if m.handle.is_some() {
                    return Err(crate::duparg("handle", v));
                }
                m.handle = Some(v);
            }
            _ if matches(w, "preference") || matches(w, "priority") => {
                let v = c.next_arg()?;
                if m.prio != 0 {
                    return Err(crate::duparg("priority", v));
                }
                m.prio = match get_u32(v, 0) {
                    Some(p) if list || p <= 0xffff => p,
                    _ if list => return Err(invarg("invalid preference", v)),
                    _ => return Err(invarg("invalid priority value", v)),
                };
            }
            _ if matches(w, "protocol") => {
                let v = c.next_arg()?;
                if m.protocol.is_some() {
                    return Err(crate::duparg("protocol", v));
                }
                m.protocol = Some(proto_a2n(v).ok_or_else(|| invarg("invalid protocol", v))?);
            }
            _ if matches(w, "chain") => {
                let v = c.next_arg()?;
                if m.chain.is_some() {
                    return Err(crate::duparg("chain", v));
                }
                m.chain =
                    Some(get_u32(v, 0).ok_or_else(|| invarg("invalid chain index value", v))?);
            }
            _ if matches(w, "estimator") => {
                return Err(Failure::syntax(
                    "Error: tclab does not support \"estimator\" yet.",
                ));
            }
            _ if matches(w, "help") => return Err(Failure::syntax(FILTER_USAGE)),
            _ if list => {
                return Err(Failure::syntax(format!(
                    " What is \"{w}\"? Try \"tc filter help\""
                )))
            }
            _ => {
                m.kind = Some(w);
                c.fwd();
                break;
            }
        }
        c.fwd();
    }
    Ok(m)
}

/// `tc filter …` (`do_filter`).
pub fn filter_cmd(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let Some(cmd) = argv.first().map(String::as_str) else {
        return Ok(());
    };
    let rest = &argv[1..];
    let fflags = if matches(cmd, "add") {
        Some(Some(FilterFlags {
            create: true,
            excl: true,
        }))
    } else if matches(cmd, "change") {
        Some(Some(FilterFlags {
            create: false,
            excl: false,
        }))
    } else if matches(cmd, "replace") {
        Some(Some(FilterFlags {
            create: true,
            excl: false,
        }))
    } else if matches(cmd, "delete") {
        Some(None)
    } else {
        None
    };
    if let Some(ff) = fflags {
        return modify(engine, rest, ff, now);
    }
    if matches(cmd, "get") {
        return get(engine, rest, flags, now, out);
    }
    if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        return list(engine, rest, flags, now, out);
    }
    if matches(cmd, "help") {
        return Err(Failure::syntax(FILTER_USAGE));
    }
    Err(Failure::syntax(format!(
        "Command \"{cmd}\" is unknown, try \"tc filter help\"."
    )))
}

fn kernel(e: KernelError) -> Failure {
    Failure {
        code: 2,
        msg: format!("{e}\n{TALK}"),
    }
}

/// `tc_filter_modify`: add, change, replace (`Some(flags)`) or delete (`None`).
fn modify(engine: &mut Engine, argv: &[String], ff: Option<FilterFlags>, now: Nanos) -> Result<()> {
    let devices: Vec<String>;
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, false)?;
    let create = ff.is_some_and(|f| f.create);
    let protocol = m.protocol.unwrap_or(if create { ETH_P_ALL } else { 0 });
    let dev = m.dev;
    if let Some(d) = dev {
        crate::ensure_device(engine, d, create)?;
    }
    devices = crate::action::device_names(engine, argv);
    c.devices = &devices;
    let (handle, opts) = match m.kind {
        Some(k) => parse_fopt(k, m.handle, &mut c)?,
        None => {
            if m.handle.is_some() {
                return Err(Failure::syntax(
                    "Must specify filter type when using \"handle\"",
                ));
            }
            if let Some(w) = c.peek() {
                return Err(Failure::syntax(format!(
                    "Garbage instead of arguments \"{w} ...\". Try \"tc filter help\"."
                )));
            }
            (0, None)
        }
    };
    let Some(dev) = dev else {
        return Err(kernel(KernelError::new(Errno::NoDevice)));
    };
    let req = FilterRequest {
        prio: m.prio,
        protocol,
        chain: m.chain.unwrap_or(0),
        handle,
        kind: m.kind.map(str::to_string),
        opts,
    };
    let parent = Handle(m.parent);
    let r = match ff {
        Some(f) => engine
            .modify_filter(dev, parent, &req, f, now)
            .inspect(|_| {
                if !devices.is_empty() {
                    engine.refresh_mirred();
                }
            }),
        None => engine.delete_filter(dev, parent, &req),
    };
    r.map_err(kernel)
}

/// The kinds tc knows but tclab's "kernel" has no module for.
const KNOWN_TO_TC: &[&str] = &[
    "flower", "bpf", "cgroup", "route", "rsvp", "rsvp6", "tcindex",
];

/// A filter kind's `parse_fopt`: the handle and the options (`None`: no `TCA_OPTIONS`).
fn parse_fopt(
    kind: &str,
    handle: Option<&str>,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    match kind {
        "u32" => parse_u32(handle, c),
        "fw" => parse_fw(handle, c),
        "matchall" => parse_matchall(handle, c),
        "basic" => parse_basic(handle, c),
        "flow" => parse_flow(handle, c),
        k if KNOWN_TO_TC.contains(&k) => Err(kernel(KernelError::msg(
            Errno::NoEntry,
            "TC classifier not found",
        ))),
        k => {
            if let Some(w) = c.peek() {
                return Err(Failure::options(format!(
                    "Unknown filter \"{k}\", hence option \"{w}\" is unparsable"
                )));
            }
            Ok((0, None))
        }
    }
}

/// A filter's `action …` list (`parse_action` returning -1 is the filter parser's failure).
fn filter_actions(c: &mut Cur, what: &str) -> Result<Vec<ActionSpec>> {
    c.fwd();
    // `NEXT_ARG()` in the classifiers' parsers: a bare `action` at the end is an incomplete line.
    if c.peek().is_none() {
        return Err(Failure::syntax(
            "Command line is not complete. Try option \"help\"",
        ));
    }
    parse_actions(c).map_err(|f| {
        if f.code == 1 {
            Failure::options(
                format!("{}\nIllegal {what}", f.msg)
                    .trim_start()
                    .to_string(),
            )
        } else {
            f
        }
    })
}

/// The legacy `police …` of a filter.
fn filter_police(c: &mut Cur) -> Result<ActionSpec> {
    c.fwd();
    let (params, index) = parse_police(c, false).map_err(|f| {
        if f.code == 1 {
            Failure::options(
                format!("{}\nIllegal \"police\"", f.msg)
                    .trim_start()
                    .to_string(),
            )
        } else {
            f
        }
    })?;
    Ok(ActionSpec {
        kind: "police".into(),
        params: Some(params),
        index,
        cookie: None,
        flags: 0,
    })
}

fn classid_arg(c: &mut Cur) -> Result<u32> {
    let v = c.next_arg()?;
    get_tc_classid(v).ok_or_else(|| Failure::options("Illegal \"classid\""))
}

// ----- u32 -----

const U32_USAGE: &str = "Usage: ... u32 [ match SELECTOR ... ] [ link HTID ] [ classid CLASSID ]\n               [ action ACTION_SPEC ] [ offset OFFSET_SPEC ]\n               [ ht HTID ] [ hashkey HASHKEY_SPEC ]\n               [ sample SAMPLE ] [skip_hw | skip_sw]\nor         u32 divisor DIVISOR\n\nWhere: SELECTOR := SAMPLE SAMPLE ...\n       SAMPLE := { ip | ip6 | udp | tcp | icmp | u{32|16|8} | mark }\n                 SAMPLE_ARGS [ divisor DIVISOR ]\n       FILTERID := X:Y:Z\n\nNOTE: CLASSID is parsed at hexadecimal input.";

/// `get_u32_handle`: `X:Y:Z` in hex, or a raw `0x…` number.
fn get_u32_handle(s: &str) -> Option<u32> {
    if !s.contains(':') {
        if s.starts_with("0x") {
            return get_u32(s, 16);
        }
        return None;
    }
    let mut parts = s.splitn(3, ':');
    let mut field = |max: u32| -> Option<u32> {
        match parts.next() {
            None | Some("") => Some(0),
            Some(p) => u32::from_str_radix(p, 16).ok().filter(|v| *v < max),
        }
    };
    let htid = field(0x1000)?;
    let hash = field(0x100)?;
    let node = field(0x1000)?;
    Some((htid << 20) | (hash << 12) | node)
}

/// `sprint_u32_handle`.
fn sprint_u32_handle(h: u32) -> String {
    if h == 0 {
        return "none".into();
    }
    let mut s = String::new();
    let (htid, hash, node) = (h >> 20, cu32::hash(h), cu32::node(h));
    if htid != 0 {
        let _ = write!(s, "{htid:x}:");
    }
    if hash != 0 {
        let _ = write!(s, "{hash:x}");
    }
    if node != 0 {
        let _ = write!(s, ":{node:x}");
    }
    s
}

/// `pack_key`: merge into a key at the same offset, or add one.
fn pack_key(sel: &mut Sel, val: u32, mask: u32, off: i32, offmask: i32) -> Option<()> {
    let val = val & mask;
    for k in sel.keys.iter_mut() {
        if k.off == off && k.offmask == offmask {
            if (val ^ k.val) & (mask & k.mask) != 0 {
                return None;
            }
            k.val |= val;
            k.mask |= mask;
            return Some(());
        }
    }
    if sel.keys.len() >= 128 || off % 4 != 0 {
        return None;
    }
    sel.keys.push(Key {
        val,
        mask,
        off,
        offmask,
    });
    Some(())
}

fn pack_key16(sel: &mut Sel, key: u32, mask: u32, off: i32, offmask: i32) -> Option<()> {
    if key > 0xffff || mask > 0xffff {
        return None;
    }
    let (k, m) = if off & 3 == 0 {
        (key << 16, mask << 16)
    } else {
        (key, mask)
    };
    pack_key(sel, k, m, off & !3, offmask)
}

fn pack_key8(sel: &mut Sel, key: u32, mask: u32, off: i32, offmask: i32) -> Option<()> {
    if key > 0xff || mask > 0xff {
        return None;
    }
    let sh = match off & 3 {
        0 => 24,
        1 => 16,
        2 => 8,
        _ => 0,
    };
    pack_key(sel, key << sh, mask << sh, off & !3, offmask)
}

/// `parse_at`: `at [nexthdr+]OFF`, with the cursor after `at`.
fn parse_at(c: &mut Cur) -> Option<(i32, i32)> {
    let w = c.peek()?;
    let (mut offmask, mut p) = (0, w);
    if w.len() > "nexthdr+".len() && w.starts_with("nexthdr+") {
        offmask = -1;
        p = &w["nexthdr+".len()..];
    } else if matches(w, "nexthdr+") {
        c.i += 1;
        offmask = -1;
        p = c.peek()?;
    }
    let off = parse_c_integer(p).and_then(|v| i32::try_from(v).ok())?;
    c.fwd();
    Some((off, offmask))
}

/// `KEY MASK [at OFF]` for u32/u16/u8.
fn parse_word(c: &mut Cur, sel: &mut Sel, bits: u32, off: i32, offmask: i32) -> Option<()> {
    if c.left() < 2 {
        return None;
    }
    let key = get_u32(c.peek()?, 0)?;
    c.fwd();
    let mask = get_u32(c.peek()?, 16)?;
    c.fwd();
    if bits == 8 && (key > 0xff || mask > 0xff) {
        return None;
    }
    let (mut off, mut offmask) = (off, offmask);
    if c.peek() == Some("at") {
        c.next_arg().ok()?;
        (off, offmask) = parse_at(c)?;
    }
    match bits {
        32 => pack_key(sel, key, mask, off, offmask),
        16 => pack_key16(sel, key, mask, off, offmask),
        _ => pack_key8(sel, key, mask, off, offmask),
    }
}

/// `parse_ip_addr`: `PREFIX [at OFF]` as `get_prefix_1` reads it (`any` and `default` are 0.0.0.0/0; `80`
/// is 80.0.0.0/32; `0/0` matches everything).
fn parse_ip_addr(c: &mut Cur, sel: &mut Sel, off: i32) -> Option<()> {
    let (addr, bits) = crate::util::get_prefix_ipv4(c.peek()?)?;
    c.fwd();
    let (mut off, mut offmask) = (off, 0);
    if c.peek() == Some("at") {
        c.next_arg().ok()?;
        (off, offmask) = parse_at(c)?;
    }
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    pack_key(sel, addr, mask, off, offmask)
}

/// `parse_selector`: one `match …` (or `sample …`) selector. `mark` goes to `mark_out`.
fn parse_selector(c: &mut Cur, sel: &mut Sel, mark_out: &mut Option<(u32, u32)>) -> Option<()> {
    let w = c.peek()?;
    if matches(w, "u32") || matches(w, "u16") || matches(w, "u8") {
        let bits = if matches(w, "u32") {
            32
        } else if matches(w, "u16") {
            16
        } else {
            8
        };
        c.next_arg().ok()?;
        return parse_word(c, sel, bits, 0, 0);
    }
    if matches(w, "ip") {
        c.next_arg().ok()?;
        if c.left() < 2 {
            return None;
        }
        let f = c.peek()?;
        let take = |c: &mut Cur| c.next_arg().ok().map(|_| ());
        return match f {
            "src" => take(c).and_then(|_| parse_ip_addr(c, sel, 12)),
            "dst" => take(c).and_then(|_| parse_ip_addr(c, sel, 16)),
            _ if f == "tos" || matches(f, "dsfield") || matches(f, "precedence") => {
                take(c).and_then(|_| parse_word(c, sel, 8, 1, 0))
            }
            "ihl" => take(c).and_then(|_| parse_word(c, sel, 8, 0, 0)),
            "protocol" => take(c).and_then(|_| parse_word(c, sel, 8, 9, 0)),
            "nofrag" => {
                c.fwd();
                pack_key16(sel, 0, 0x3fff, 6, 0)
            }
            "firstfrag" => {
                c.fwd();
                pack_key16(sel, 0x2000, 0x3fff, 6, 0)
            }
            "df" => {
                c.fwd();
                pack_key16(sel, 0x4000, 0x4000, 6, 0)
            }
            "mf" => {
                c.fwd();
                pack_key16(sel, 0x2000, 0x2000, 6, 0)
            }
            "dport" => take(c).and_then(|_| parse_word(c, sel, 16, 22, 0)),
            "sport" => take(c).and_then(|_| parse_word(c, sel, 16, 20, 0)),
            "icmp_type" => take(c).and_then(|_| parse_word(c, sel, 8, 20, 0)),
            "icmp_code" => take(c).and_then(|_| parse_word(c, sel, 8, 21, 0)),
            _ => None,
        };
    }
    if matches(w, "udp") || matches(w, "tcp") {
        c.next_arg().ok()?;
        if c.left() < 2 {
            return None;
        }
        let f = c.peek()?;
        let off = match f {
            "src" => 0,
            "dst" => 2,
            _ => return None,
        };
        c.next_arg().ok()?;
        return parse_word(c, sel, 16, off, -1);
    }
    if matches(w, "icmp") {
        c.next_arg().ok()?;
        if c.left() < 2 {
            return None;
        }
        let off = match c.peek()? {
            "type" => 0,
            "code" => 1,
            _ => return None,
        };
        c.next_arg().ok()?;
        return parse_word(c, sel, 8, off, -1);
    }
    if matches(w, "mark") {
        c.next_arg().ok()?;
        if c.left() <= 1 {
            return None;
        }
        let val = get_u32(c.peek()?, 0)?;
        let mask = get_u32(c.next_arg().ok()?, 0)?;
        c.fwd();
        if val & mask != val {
            return None;
        }
        *mark_out = Some((val, mask));
        return Some(());
    }
    None
}

/// `u32_parse_opt`.
fn parse_u32(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let mut h = match handle {
        Some(s) => get_u32_handle(s).ok_or_else(|| Failure::options("Illegal filter ID"))?,
        None => 0,
    };
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = U32Options::default();
    let mut sel = Sel::default();
    let (mut sel_ok, mut terminal_ok, mut sample_ok) = (false, false, false);
    let mut htid = 0u32;
    let mut order = 0u32;
    let ill = |what: &str| Failure::options(format!("Illegal \"{what}\""));
    while let Some(w) = c.peek() {
        if matches(w, "match") {
            c.next_arg()?;
            parse_selector(c, &mut sel, &mut o.mark).ok_or_else(|| ill("match"))?;
            sel_ok = true;
            continue;
        } else if matches(w, "offset") {
            c.next_arg()?;
            while let Some(w) = c.peek() {
                if matches(w, "plus") {
                    let v = c.next_arg()?;
                    sel.off = parse_c_integer(v)
                        .and_then(|v| i16::try_from(v).ok())
                        .ok_or_else(|| ill("offset"))?;
                    sel.flags |= cu32::TC_U32_OFFSET;
                } else if matches(w, "at") {
                    let v = c.next_arg()?;
                    let off = parse_c_integer(v)
                        .and_then(|v| i16::try_from(v).ok())
                        .ok_or_else(|| ill("offset"))?;
                    if off % 2 != 0 {
                        return Err(Failure::options(
                            "offset \"at\" must be even\nIllegal \"offset\"",
                        ));
                    }
                    sel.offoff = off;
                    sel.flags |= cu32::TC_U32_VAROFFSET;
                } else if matches(w, "mask") {
                    let v = c.next_arg()?;
                    sel.offmask = get_u32(v, 16)
                        .and_then(|v| u16::try_from(v).ok())
                        .ok_or_else(|| ill("offset"))?;
                    sel.flags |= cu32::TC_U32_VAROFFSET;
                } else if matches(w, "shift") {
                    let v = c.next_arg()?;
                    sel.offshift = parse_c_integer(v)
                        .and_then(|v| u8::try_from(v).ok())
                        .ok_or_else(|| ill("offset"))?;
                    sel.flags |= cu32::TC_U32_VAROFFSET;
                } else if matches(w, "eat") {
                    sel.flags |= cu32::TC_U32_EAT;
                } else {
                    break;
                }
                c.fwd();
            }
            continue;
        } else if matches(w, "hashkey") {
            c.next_arg()?;
            while let Some(w) = c.peek() {
                if matches(w, "mask") {
                    let v = c.next_arg()?;
                    sel.hmask = get_u32(v, 16).ok_or_else(|| ill("hashkey"))?;
                } else if matches(w, "at") {
                    let v = c.next_arg()?;
                    let n = parse_c_integer(v)
                        .and_then(|v| i16::try_from(v).ok())
                        .filter(|n| n % 4 == 0)
                        .ok_or_else(|| ill("hashkey"))?;
                    sel.hoff = n;
                } else {
                    break;
                }
                c.fwd();
            }
            continue;
        } else if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
            sel.flags |= cu32::TC_U32_TERMINAL;
        } else if matches(w, "divisor") {
            let v = c.next_arg()?;
            let d = get_u32(v, 0)
                .filter(|d| *d != 0 && *d <= 0x100 && d.is_power_of_two())
                .ok_or_else(|| ill("divisor"))?;
            o.divisor = Some(d);
        } else if matches(w, "order") {
            let v = c.next_arg()?;
            order = get_u32(v, 0).ok_or_else(|| ill("order"))?;
        } else if w == "link" {
            let v = c.next_arg()?;
            let l = get_u32_handle(v).ok_or_else(|| ill("link"))?;
            if l != 0 && cu32::node(l) != 0 {
                return Err(Failure::options("\"link\" must be a hash table."));
            }
            o.link = Some(l);
        } else if w == "ht" {
            let v = c.next_arg()?;
            let ht = get_u32_handle(v).ok_or_else(|| ill("ht"))?;
            if handle.is_some() && cu32::node(ht) != 0 {
                return Err(Failure::options("\"ht\" must be a hash table."));
            }
            htid = if sample_ok {
                (htid & 0xFF000) | (ht & 0xFFF0_0000)
            } else {
                ht & 0xFFFF_F000
            };
        } else if w == "sample" {
            c.next_arg()?;
            let mut sel2 = Sel::default();
            let mut dummy = None;
            parse_selector(c, &mut sel2, &mut dummy).ok_or_else(|| ill("sample"))?;
            if sel2.keys.len() != 1 {
                return Err(Failure::options("\"sample\" must contain exactly ONE key."));
            }
            let mut divisor = 0x100u32;
            if c.peek() == Some("divisor") {
                let v = c.next_arg()?;
                divisor = get_u32(v, 0)
                    .filter(|d| *d != 0 && *d <= 0x100 && d.is_power_of_two())
                    .ok_or_else(|| Failure::options("Illegal sample \"divisor\""))?;
                c.fwd();
            }
            let k = sel2.keys[0];
            let fshift = if k.mask != 0 {
                k.mask.trailing_zeros()
            } else {
                0
            };
            let hash = (k.val & k.mask) >> fshift;
            htid = ((hash % divisor) << 12) | (htid & 0xFFF0_0000);
            sample_ok = true;
            continue;
        } else if w == "indev" {
            let v = c
                .next_arg()
                .map_err(|_| Failure::options("Illegal indev"))?;
            o.indev = Some(v.to_string());
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            terminal_ok = true;
            continue;
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            terminal_ok = true;
            continue;
        } else if w == "skip_hw" {
            o.flags |= CLS_FLAGS_SKIP_HW;
        } else if w == "skip_sw" {
            o.flags |= CLS_FLAGS_SKIP_SW;
        } else if w == "help" {
            return Err(Failure::options(U32_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{U32_USAGE}")));
        }
        c.fwd();
    }
    if terminal_ok {
        sel.flags |= cu32::TC_U32_TERMINAL;
    }
    if order != 0 {
        if cu32::node(h) != 0 && order != cu32::node(h) {
            return Err(Failure::options("\"order\" contradicts \"handle\""));
        }
        h |= order;
    }
    if htid != 0 {
        o.htid = Some(htid);
    }
    if sel_ok {
        o.sel = Some(sel);
    }
    if o.flags == CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW {
        return Err(Failure::options(
            "skip_hw and skip_sw are mutually exclusive",
        ));
    }
    o.exts.cls_flags = cls_to_act_flags(o.flags);
    Ok((h, Some(FilterOptions::U32(o))))
}

/// A filter's skip flags as the flags its bound actions must carry.
fn cls_to_act_flags(f: u32) -> u32 {
    let mut a = 0;
    if f & CLS_FLAGS_SKIP_HW != 0 {
        a |= ACT_FLAG_SKIP_HW;
    }
    if f & CLS_FLAGS_SKIP_SW != 0 {
        a |= ACT_FLAG_SKIP_SW;
    }
    a
}

// ----- fw -----

const FW_USAGE: &str = "Usage: ... fw [ classid CLASSID ] [ indev DEV ] [ action ACTION_SPEC ]\n\tCLASSID := Push matching packets to the class identified by CLASSID with format X:Y\n\t\tCLASSID is parsed as hexadecimal input.\n\tDEV := specify device for incoming device classification.\n\tACTION_SPEC := Apply an action on matching packets.\n\tNOTE: handle is represented as HANDLE[/FWMASK].\n\t\tFWMASK is 0xffffffff by default.";

/// `fw_parse_opt`.
fn parse_fw(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let mut h = 0;
    let mut mask = None;
    if let Some(s) = handle {
        let (id, m) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        h = get_u32(id, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?;
        if let Some(m) = m {
            mask = Some(get_u32(m, 0).ok_or_else(|| Failure::options("Illegal \"handle\" mask"))?);
        }
    }
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = FwOptions {
        mask,
        ..Default::default()
    };
    while let Some(w) = c.peek() {
        if matches(w, "classid") || matches(w, "flowid") {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "fw \"action\"")?;
            continue;
        } else if w == "indev" {
            let v = c
                .next_arg()
                .map_err(|_| Failure::options("Illegal indev"))?;
            o.indev = Some(v.to_string());
        } else if w == "help" {
            return Err(Failure::options(FW_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{FW_USAGE}")));
        }
        c.fwd();
    }
    Ok((h, Some(FilterOptions::Fw(o))))
}

// ----- matchall -----

const MATCHALL_USAGE: &str = "Usage: ... matchall [skip_sw | skip_hw]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]\n\nWhere: SELECTOR := SAMPLE SAMPLE ...\n       FILTERID := X:Y:Z\n       ACTION_SPEC := ... look at individual actions\n\nNOTE: CLASSID is parsed as hexadecimal input.";

/// `strtol(handle, NULL, 0)` as matchall and basic read it: a numeric prefix, saturating.
fn strtol_handle(s: &str) -> Result<u32> {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.starts_with('0') && t.len() > 1 {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = digits
        .find(|ch: char| !ch.is_digit(radix))
        .unwrap_or(digits.len());
    let v = i64::from_str_radix(&digits[..end], radix).unwrap_or(0);
    if v == i64::MAX {
        return Err(Failure::options(format!(
            "Illegal handle \"{s}\", must be numeric."
        )));
    }
    let v = if neg { -v } else { v };
    Ok(v as u32)
}

/// `matchall_parse_opt`.
fn parse_matchall(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => strtol_handle(s)?,
        None => 0,
    };
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = MatchallOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if w == "skip_hw" {
            c.fwd();
            o.flags |= CLS_FLAGS_SKIP_HW;
            continue;
        } else if w == "skip_sw" {
            c.fwd();
            o.flags |= CLS_FLAGS_SKIP_SW;
            continue;
        } else if w == "help" {
            return Err(Failure::options(MATCHALL_USAGE));
        } else {
            return Err(Failure::options(format!(
                "What is \"{w}\"?\n{MATCHALL_USAGE}"
            )));
        }
        c.fwd();
    }
    if o.flags == CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW {
        return Err(Failure::options(
            "skip_hw and skip_sw are mutually exclusive",
        ));
    }
    o.exts.cls_flags = cls_to_act_flags(o.flags);
    Ok((h, Some(FilterOptions::Matchall(o))))
}

// ----- basic -----

const BASIC_USAGE: &str = "Usage: ... basic [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]\n\nWhere:\tSELECTOR := SAMPLE SAMPLE ...\n\tFILTERID := X:Y:Z\n\tACTION_SPEC := ... look at individual actions\n\nNOTE: CLASSID is parsed as hexadecimal input.";

/// `match EXPR` of basic and flow: the expression, or tc's `Illegal "ematch"`.
fn filter_ematch(c: &mut Cur) -> Result<Option<crate::ematch::EmatchTreeOpt>> {
    c.next_arg()?;
    crate::ematch::parse_ematch(c).map_err(|f| {
        if f.code == 1 {
            Failure::options(format!("{}\nIllegal \"ematch\"", f.msg))
        } else {
            f
        }
    })
}

/// `basic_parse_opt`.
fn parse_basic(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => strtol_handle(s)?,
        None => 0,
    };
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = BasicOptions::default();
    while let Some(w) = c.peek() {
        if matches(w, "match") {
            if let Some(t) = filter_ematch(c)? {
                o.ematches = Some(t);
            }
            continue;
        } else if matches(w, "classid") || w == "flowid" {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if w == "help" {
            return Err(Failure::options(BASIC_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{BASIC_USAGE}")));
        }
        c.fwd();
    }
    Ok((h, Some(FilterOptions::Basic(o))))
}

// ----- flow -----

const FLOW_USAGE: &str = "Usage: ... flow ...\n\n [mapping mode]: map key KEY [ OPS ] ...\n [hashing mode]: hash keys KEY-LIST ... [ perturb SECS ]\n\n                 [ divisor NUM ] [ baseclass ID ] [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ]\n\nKEY-LIST := [ KEY-LIST , ] KEY\nKEY      := [ src | dst | proto | proto-src | proto-dst | iif | priority |\n              mark | nfct | nfct-src | nfct-dst | nfct-proto-src |\n              nfct-proto-dst | rt-classid | sk-uid | sk-gid |\n              vlan-tag | rxhash ]\nOPS      := [ or NUM | and NUM | xor NUM | rshift NUM | addend NUM ]\nID       := X:Y";

/// `flow_parse_keys`: comma-separated key names, each a prefix of one (the first that fits).
fn flow_keys(s: &str) -> Result<u32> {
    let mut keys = 0;
    for k in s.split(',') {
        match KEY_NAMES.iter().position(|n| matches(k, n)) {
            Some(i) => keys |= 1 << i,
            None => return Err(Failure::options(format!("Unknown flow key \"{k}\""))),
        }
    }
    Ok(keys)
}

/// `get_addend`: a number, or for address keys an address (its last 32 bits), optionally negated.
fn flow_addend(v: &str, keys: u32) -> Option<u32> {
    let (neg, v) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v),
    };
    let n = match get_u32(v, 0) {
        Some(n) => n,
        // tc tests `keys & (FLOW_KEY_SRC | FLOW_KEY_DST | FLOW_KEY_NFCT_SRC | FLOW_KEY_NFCT_DST)`, the
        // enum values (0|1|9|10 = 11) rather than their bits: src, dst and proto-src.
        None if keys & 11 != 0 => {
            if let Ok(a) = v.parse::<std::net::Ipv4Addr>() {
                u32::from(a)
            } else if let Ok(a) = v.parse::<std::net::Ipv6Addr>() {
                let o = a.octets();
                u32::from_be_bytes([o[12], o[13], o[14], o[15]])
            } else {
                return None;
            }
        }
        None => return None,
    };
    Some(if neg { n.wrapping_neg() } else { n })
}

/// `flow_parse_opt`.
fn parse_flow(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let h = match handle {
        Some(s) => get_u32(s, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?,
        None => 0,
    };
    let mut o = FlowOptions::default();
    let (mut mask, mut xor, mut keys, mut mode) = (u32::MAX, 0u32, 0u32, flow::MODE_MAP);
    let num = |c: &mut Cur, what: &str| -> Result<u32> {
        let v = c.next_arg()?;
        get_u32(v, 0).ok_or_else(|| Failure::options(format!("Illegal \"{what}\"")))
    };
    let mut bitop = |m: u32, x: u32| {
        xor = x ^ (xor & m);
        mask &= m;
    };
    while let Some(w) = c.peek() {
        if matches(w, "map") {
            mode = flow::MODE_MAP;
        } else if matches(w, "hash") {
            mode = flow::MODE_HASH;
        } else if matches(w, "keys") {
            let v = c.next_arg()?;
            keys = flow_keys(v)?;
            o.keys = Some(keys);
        } else if matches(w, "and") {
            let t = num(c, "mask")?;
            bitop(t, 0);
        } else if matches(w, "or") {
            let t = num(c, "or")?;
            bitop(!t, t);
        } else if matches(w, "xor") {
            let t = num(c, "xor")?;
            bitop(u32::MAX, t);
        } else if matches(w, "rshift") {
            o.rshift = Some(num(c, "rshift")?);
        } else if matches(w, "addend") {
            let v = c.next_arg()?;
            o.addend =
                Some(flow_addend(v, keys).ok_or_else(|| Failure::options("Illegal \"addend\""))?);
        } else if matches(w, "divisor") {
            o.divisor = Some(num(c, "divisor")?);
        } else if matches(w, "baseclass") {
            let v = c.next_arg()?;
            o.baseclass = Some(
                get_tc_classid(v)
                    .filter(|b| b & 0xffff != 0)
                    .ok_or_else(|| Failure::options("Illegal \"baseclass\""))?,
            );
        } else if matches(w, "perturb") {
            o.perturb = Some(num(c, "perturb")?);
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "match") {
            if let Some(t) = filter_ematch(c)? {
                o.ematches = Some(t);
            }
            continue;
        } else if matches(w, "help") {
            return Err(Failure::options(FLOW_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{FLOW_USAGE}")));
        }
        c.fwd();
    }
    if keys.count_ones() > 1 && mode != flow::MODE_HASH {
        return Err(Failure::options("Invalid mode \"map\" for multiple keys"));
    }
    o.mode = Some(mode);
    if mask != u32::MAX || xor != 0 {
        o.mask_xor = Some((mask, xor));
    }
    Ok((h, Some(FilterOptions::Flow(o))))
}

// ----- get and show -----

/// `tc filter get`.
fn get(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, false)?;
    let Some(protocol) = m.protocol else {
        return Err(Failure::syntax("Must specify filter protocol"));
    };
    if m.prio == 0 {
        return Err(Failure::syntax("Must specify filter priority"));
    }
    if m.parent == 0 {
        return Err(Failure::syntax("Must specify filter parent"));
    }
    let Some(kind) = m.kind else {
        return Err(Failure::syntax("Must specify filter type"));
    };
    let Some(dev) = m.dev else {
        return Err(Failure::syntax(
            "Must specify netdevice \"dev\" or block index \"block\"",
        ));
    };
    if !engine.devices.contains_key(dev) {
        return Err(Failure::options(format!("Cannot find device \"{dev}\"")));
    }
    let (handle, _) = parse_fopt(kind, m.handle, &mut c)?;
    if m.handle.is_none() {
        return Err(Failure::syntax("Must specify filter \"handle\""));
    }
    if let Some(w) = c.peek() {
        return Err(Failure::syntax(format!(
            "Garbage instead of arguments \"{w} ...\". Try \"tc filter help\"."
        )));
    }
    let req = FilterRequest {
        prio: m.prio,
        protocol,
        chain: m.chain.unwrap_or(0),
        handle,
        kind: Some(kind.to_string()),
        opts: None,
    };
    let (block, _) = engine
        .filter_block(dev, Handle(m.parent))
        .map_err(kernel)?
        .ok_or_else(|| kernel(KernelError::invalid("Qdisc not classful")))?;
    let tp = block.find(&req).map_err(kernel)?;
    let view = View {
        parent: None,
        protocol: None,
        prio: None,
        chain: None,
    };
    let mut p = Printer::new(flags);
    for e in entries(block, tp) {
        if entry_handle(&e) == handle {
            print_entry(&view, m.parent, tp, &e, flags, now, &mut p);
        }
    }
    out.stdout.push_str(&p.finish());
    Ok(())
}

/// What the listing request named, which the printer then leaves out (`filter_parent` and friends).
struct View {
    parent: Option<u32>,
    protocol: Option<u16>,
    prio: Option<u32>,
    chain: Option<u32>,
}

/// `tc filter show dev DEV [parent P] [pref N] [protocol P] [chain N]`.
fn list(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, true)?;
    let Some(dev) = m.dev else {
        return Ok(());
    };
    if !engine.devices.contains_key(dev) {
        return Err(Failure::options(format!("Cannot find device \"{dev}\"")));
    }
    // `new_json_obj`: under -j the listing is an array even when there is nothing to list.
    let mut p = crate::jprint::Printer::new(flags);
    let Ok(Some((block, parent))) = engine.filter_block(dev, Handle(m.parent)) else {
        out.stdout.push_str(&p.finish());
        return Ok(());
    };
    let view = View {
        parent: (m.parent != 0).then_some(m.parent),
        protocol: m.protocol,
        prio: (m.prio != 0).then_some(m.prio),
        chain: m.chain,
    };
    for tp in block.tps() {
        if m.chain.is_some_and(|ch| ch != tp.chain)
            || (m.prio != 0 && m.prio != tp.prio)
            || m.protocol.is_some_and(|p| p != tp.protocol)
        {
            continue;
        }
        // The instance itself (`tcf_fill_node` with no filter), then each filter.
        p.open_object(None);
        print_header(&view, parent.0, tp, &mut p);
        p.nl();
        p.close_object();
        for e in entries(block, tp) {
            print_entry(&view, parent.0, tp, &e, flags, now, &mut p);
        }
    }
    out.stdout.push_str(&p.finish());
    Ok(())
}

/// One filter of an instance, whatever its kind.
enum Entry<'a> {
    U32(U32Entry<'a>),
    Fw(&'a tclab_core::filter::fw::FwFilter, Option<u32>),
    Matchall(&'a tclab_core::filter::matchall::MatchallFilter),
    Basic(&'a tclab_core::filter::basic::BasicFilter),
    Flow(&'a tclab_core::filter::flow::FlowFilter),
}

fn entries<'a>(block: &'a tclab_core::filter::Block, tp: &'a Tp) -> Vec<Entry<'a>> {
    match &tp.cls {
        Classifier::U32(_) => block
            .u32_common
            .walk(tp.prio)
            .into_iter()
            .map(Entry::U32)
            .collect(),
        Classifier::Fw(f) => f
            .filters()
            .into_iter()
            .map(|x| Entry::Fw(x, f.mask))
            .collect(),
        Classifier::Matchall(m) => m.filter.iter().map(Entry::Matchall).collect(),
        Classifier::Basic(b) => b.filters.iter().map(Entry::Basic).collect(),
        Classifier::Flow(f) => f.filters.iter().map(Entry::Flow).collect(),
    }
}

fn entry_handle(e: &Entry) -> u32 {
    match e {
        Entry::U32(U32Entry::Table(h)) => h.handle,
        Entry::U32(U32Entry::Node(n)) => n.handle,
        Entry::Fw(f, _) => f.id,
        Entry::Matchall(m) => m.handle,
        Entry::Basic(b) => b.handle,
        Entry::Flow(f) => f.handle,
    }
}

/// `print_filter` up to the kind's options: `filter parent 1: protocol ip pref 10 u32 chain 0 `.
fn print_header(v: &View, parent: u32, tp: &Tp, p: &mut Printer) {
    p.fp("filter ");
    if v.parent != Some(parent) {
        match parent {
            0xffff_ffff => p.boolean("root", "root ", true),
            PARENT_INGRESS => p.boolean("ingress", "ingress ", true),
            PARENT_EGRESS => p.boolean("egress", "egress ", true),
            x => {
                let h = Handle(x).to_string();
                p.string("parent", &format!("parent {h} "), &h);
            }
        }
    }
    if v.protocol != Some(tp.protocol) && tp.protocol != 0 {
        let name = proto_n2a(tp.protocol);
        p.string("protocol", &format!("protocol {name} "), &name);
    }
    if v.prio != Some(tp.prio) {
        p.number("pref", &format!("pref {} ", tp.prio), tp.prio);
    }
    let kind = tp.cls.kind();
    p.string("kind", &format!("{kind} "), kind);
    if v.chain != Some(tp.chain) {
        p.number("chain", &format!("chain {} ", tp.chain), tp.chain);
    }
}

fn print_exts(exts: &Exts, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if exts.police_compat {
        if let Some(a) = exts.actions.first() {
            p.nl();
            print_police_compat(p, &a.borrow(), flags);
        }
        return;
    }
    if !exts.actions.is_empty() {
        crate::action::print_actions(&exts.actions, 1, true, flags, now, p);
    }
}

/// One filter: `print_filter` with the kind's `print_fopt` in its `options`.
fn print_entry(
    v: &View,
    parent: u32,
    tp: &Tp,
    e: &Entry,
    flags: ShowFlags,
    now: Nanos,
    p: &mut Printer,
) {
    p.open_object(None);
    print_header(v, parent, tp, p);
    p.open_object(Some("options"));
    match e {
        Entry::U32(U32Entry::Table(h)) => {
            let fh = sprint_u32_handle(h.handle);
            p.string("fh", &format!("fh {fh} "), &fh);
            let d = h.divisor + 1;
            p.number("ht_divisor", &format!("ht divisor {d} "), d);
        }
        Entry::U32(U32Entry::Node(n)) => print_u32_node(n, flags, now, p),
        Entry::Fw(f, mask) => {
            // fw_print_opt writes with fprintf: text even in a JSON listing, as tc does.
            match mask {
                Some(m) if *m != u32::MAX => {
                    let _ = write!(p, "handle {:#x}/{:#x} ", f.id, m);
                }
                _ => {
                    let _ = write!(p, "handle {:#x} ", f.id);
                }
            }
            if let Some(cl) = f.classid {
                let _ = write!(p, "classid {} ", sprint_classid(cl));
            }
            if f.exts.police_compat {
                if let Some(a) = f.exts.actions.first() {
                    print_police_compat(p, &a.borrow(), flags);
                }
            }
            if let Some(d) = &f.indev {
                let _ = write!(p, "input dev {d} ");
            }
            if !f.exts.police_compat && !f.exts.actions.is_empty() {
                p.raw("\n");
                print_exts(&f.exts, flags, now, p);
            }
        }
        Entry::Matchall(m) => {
            p.number("handle", &format!("handle {:#x} ", m.handle), m.handle);
            if let Some(cl) = m.classid {
                let c = sprint_classid(cl);
                p.string("flowid", &format!("flowid {c} "), &c);
            }
            if m.flags & CLS_FLAGS_SKIP_HW != 0 {
                p.boolean("skip_hw", "\n  skip_hw", true);
            }
            if m.flags & CLS_FLAGS_SKIP_SW != 0 {
                p.boolean("skip_sw", "\n  skip_sw", true);
            }
            if m.flags & CLS_FLAGS_NOT_IN_HW != 0 {
                p.boolean("not_in_hw", "\n  not_in_hw", true);
            }
            print_exts(&m.exts, flags, now, p);
        }
        Entry::Basic(b) => {
            if b.handle != 0 {
                p.hex("handle", &format!("handle {:#x} ", b.handle), b.handle);
            }
            if b.classid != 0 {
                let c = sprint_classid(b.classid);
                p.string("flowid", &format!("flowid {c} "), &c);
            }
            // print_ematch writes with fprintf.
            let mut em = String::new();
            crate::ematch::print_ematch(&b.ematches, &mut em);
            p.raw(&em);
            print_exts(&b.exts, flags, now, p);
        }
        Entry::Flow(f) => {
            // flow_print_opt writes with fprintf throughout.
            let _ = write!(p, "handle {:#x} ", f.handle);
            match f.mode {
                flow::MODE_MAP => p.raw("map "),
                flow::MODE_HASH => p.raw("hash "),
                _ => {}
            }
            p.raw("keys ");
            let names: Vec<&str> = (0..KEY_NAMES.len())
                .filter(|i| f.keymask & (1 << i) != 0)
                .map(|i| KEY_NAMES[i])
                .collect();
            let _ = write!(p, "{} ", names.join(","));
            if f.mask != u32::MAX || f.xor != 0 {
                let or = (f.mask & f.xor) ^ f.xor;
                let xor = f.mask & f.xor;
                if f.mask != u32::MAX {
                    let _ = write!(p, "and 0x{:08x} ", f.mask);
                }
                if xor != 0 {
                    let _ = write!(p, "xor 0x{xor:08x} ");
                }
                if or != 0 {
                    let _ = write!(p, "or 0x{or:08x} ");
                }
            }
            if f.rshift != 0 {
                let _ = write!(p, "rshift {} ", f.rshift);
            }
            if f.addend != 0 {
                let _ = write!(p, "addend {:#x} ", f.addend);
            }
            if f.divisor != 0 {
                let _ = write!(p, "divisor {} ", f.divisor);
            }
            if f.baseclass != 0 {
                let _ = write!(p, "baseclass {} ", sprint_classid(f.baseclass));
            }
            if f.perturb != 0 {
                let _ = write!(p, "perturb {}sec ", f.perturb);
            }
            if !f.ematches.is_empty() {
                let mut em = String::new();
                crate::ematch::print_ematch(&f.ematches, &mut em);
                p.raw(&em);
            }
            if f.exts.police_compat {
                if let Some(a) = f.exts.actions.first() {
                    print_police_compat(p, &a.borrow(), flags);
                }
            } else if !f.exts.actions.is_empty() {
                p.raw("\n");
                print_exts(&f.exts, flags, now, p);
            }
        }
    }
    p.close_object();
    p.nl();
    p.close_object();
}

/// `u32_print_opt` for a key node.
fn print_u32_node(n: &cu32::Knode, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    let fh = sprint_u32_handle(n.handle);
    p.string("fh", &format!("fh {fh} "), &fh);
    let order = cu32::node(n.handle);
    if order != 0 {
        p.number("order", &format!("order {order} "), order);
    }
    let htid = n.handle & 0xFFFF_F000;
    let (ht, bkt) = (cu32::user_htid(htid), cu32::hash(htid));
    p.hex("key_ht", &format!("key ht {ht:x} "), ht);
    p.hex("bkt", &format!("bkt {bkt:x} "), bkt);
    match n.classid {
        Some(cl) => {
            if n.sel.flags & cu32::TC_U32_TERMINAL == 0 {
                p.fp("*");
            }
            let c = sprint_classid(cl);
            p.string("flowid", &format!("flowid {c} "), &c);
        }
        None if n.sel.flags & cu32::TC_U32_TERMINAL != 0 => p.fp("terminal flowid "),
        None => {}
    }
    if let Some(l) = n.link {
        let l = sprint_u32_handle(l);
        p.string("link", &format!("link {l} "), &l);
    }
    if n.flags & CLS_FLAGS_SKIP_HW != 0 {
        p.boolean("skip_hw", "skip_hw ", true);
    }
    if n.flags & CLS_FLAGS_SKIP_SW != 0 {
        p.boolean("skip_sw", "skip_sw ", true);
    }
    if n.flags & CLS_FLAGS_NOT_IN_HW != 0 {
        p.boolean("not_in_hw", "not_in_hw ", true);
    }
    if flags.stats {
        let (rcnt, rhit) = (n.rcnt.get(), n.rhit.get());
        p.number("rule_hit", &format!("(rule hit {rcnt} "), rcnt);
        p.number("success", &format!("success {rhit})"), rhit);
    }
    if let Some((val, mask)) = n.mark {
        p.nl();
        p.hex0x("fwmark_value", &format!("  mark {val:#06x} "), val as u64);
        p.hex0x("fwmark_mask", &format!("{mask:#06x} "), mask as u64);
        p.number("fwmark_success", "(success 0)", 0);
    }
    for (j, k) in n.sel.keys.iter().enumerate() {
        p.open_object(Some("match"));
        p.nl();
        p.hex("value", &format!("  match {:08x}", k.val), k.val);
        p.hex("mask", &format!("/{:08x} ", k.mask), k.mask);
        let nexthdr = if k.offmask != 0 { "nexthdr+" } else { "" };
        p.string("offmask", &format!("at {nexthdr}"), nexthdr);
        p.number("off", &k.off.to_string(), k.off);
        p.close_object();
        if flags.stats {
            let hits = n.kcnts.get(j).map_or(0, |c| c.get());
            p.number("success", &format!(" (success {hits} ) "), hits);
        }
    }
    let s = &n.sel;
    if s.flags & (cu32::TC_U32_VAROFFSET | cu32::TC_U32_OFFSET) != 0 {
        p.nl();
        p.bare_string("    offset ");
        if s.flags & cu32::TC_U32_VAROFFSET != 0 {
            p.hex("offset_mask", &format!("{:04x}", s.offmask), s.offmask as u32);
            p.number("offset_shift", &format!(">>{} ", s.offshift), s.offshift);
            p.number("offset_off", &format!("at {} ", s.offoff), s.offoff);
        }
        if s.off != 0 {
            p.number("plus", &format!("plus {} ", s.off), s.off);
        }
    }
    if s.flags & cu32::TC_U32_EAT != 0 {
        p.bare_string(" eat ");
    }
    if s.hmask != 0 {
        p.nl();
        p.hex("hash_mask", &format!("    hash mask {:08x} ", s.hmask), s.hmask);
        p.number("hash_off", &format!("at {} ", s.hoff), s.hoff);
    }
    if n.exts.police_compat {
        print_exts(&n.exts, flags, now, p);
    }
    if let Some(d) = &n.indev {
        p.nl();
        p.string("input_dev", &format!("  input dev {d}"), d);
        p.nl();
    }
    if !n.exts.police_compat {
        print_exts(&n.exts, flags, now, p);
    }
}

/// `sprint_tc_classid`: as a handle prints, but `:3` for a classid with no major.
pub fn sprint_classid(cl: u32) -> String {
    let h = Handle(cl);
    if cl != 0 && cl != Handle::ROOT.0 && h.major() == 0 {
        return format!(":{:x}", h.minor());
    }
    h.to_string()
}
