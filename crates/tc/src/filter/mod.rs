//! `tc filter …`: the command (iproute2's `tc/tc_filter.c`) and the listing, with one file per
//! classifier for its language, as iproute2 has one `f_X.c`: `u32.rs`, `fw.rs`, `matchall.rs`,
//! `basic.rs`, `flow.rs`, `flower.rs`, `route.rs`, `cgroup.rs`, `bpf.rs` (the ematch language of basic and flow is in [`crate::ematch`]). A kind's file
//! holds its parser (`parse_X`: handle and options) and its printer (`print`); [`parse_fopt`] and
//! `print_entry` dispatch to them, one line each.
//!
//! One tclab-specific choice: tc 6.1 prints a u32 node's class as `*flowid 1:10` (a regression, fixed in
//! iproute2 6.3 by "u32: fix TC_U32_TERMINAL printing"); tclab prints `flowid 1:10` as the fixed tc and the
//! kernel's own tdc cases expect.

mod basic;
mod bpf;
mod cgroup;
mod flow;
mod flower;
pub(crate) use flower::keyword as flower_keyword;
mod flower_opts;
mod fw;
mod matchall;
mod route;
mod rsvp;
mod u32;

use crate::action::{invarg, parse_actions, parse_police, print_police_compat, Cur};
use crate::jprint::Printer;
use crate::util::{get_tc_classid, get_u32, matches, parse_c_integer};
use crate::{Failure, Output, Result, ShowFlags};
use std::fmt::Write;
use tclab_core::action::{ActionSpec, ACT_FLAG_SKIP_HW, ACT_FLAG_SKIP_SW};
use tclab_core::error::{Errno, KernelError};
use tclab_core::filter::basic::BasicOptions;
use tclab_core::filter::flow::{self as cflow, FlowOptions, KEY_NAMES};
use tclab_core::filter::fw::FwOptions;
use tclab_core::filter::matchall::MatchallOptions;
use tclab_core::filter::u32::{self as cu32, Key, Sel, U32Entry, U32Options};
use tclab_core::filter::{
    ChainOp, Classifier, Exts, FilterFlags, FilterOptions, FilterRequest, Tp, CLS_FLAGS_NOT_IN_HW,
    CLS_FLAGS_SKIP_HW, CLS_FLAGS_SKIP_SW, ETH_P_ALL,
};
use tclab_core::snapshot::FilterListing;
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
pub(crate) fn proto_a2n(s: &str) -> Option<u16> {
    table_a2n(PROTOS, s)
}

/// `ll_proto_n2a`.
pub fn proto_n2a(p: u16) -> String {
    table_n2a(PROTOS, p)
}

/// `proto_a2n` over a table of names: a name (any case), else a number.
pub(crate) fn table_a2n(table: &[(u16, &str)], s: &str) -> Option<u16> {
    table
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(s))
        .map(|(p, _)| *p)
        .or_else(|| crate::util::get_u16(s, 0))
}

/// `proto_n2a` over a table of names: the name, else `[N]`.
pub(crate) fn table_n2a(table: &[(u16, &str)], p: u16) -> String {
    let mut s = String::new();
    push_table_n2a(&mut s, table, p);
    s
}

/// [`table_n2a`] appended to `out`.
fn push_table_n2a(out: &mut String, table: &[(u16, &str)], p: u16) {
    match table.iter().find(|(q, _)| *q == p) {
        Some((_, n)) => out.push_str(n),
        None => {
            out.push('[');
            crate::util::push_u64(out, p.into());
            out.push(']');
        }
    }
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
    /// `help` in a listing: tc prints its usage and goes on.
    help: bool,
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
                    return Err(Failure::returned(format!(
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
            // tc_filter_list prints its usage and goes on; tc_filter_modify and tc_filter_get
            // print it and return 0 there.
            _ if matches(w, "help") && list => m.help = true,
            _ if matches(w, "help") => return Err(Failure::usage(FILTER_USAGE)),
            _ if list => {
                return Err(Failure::returned(format!(
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
        return Err(Failure::usage(FILTER_USAGE));
    }
    Err(Failure::returned(format!(
        "Command \"{cmd}\" is unknown, try \"tc filter help\"."
    )))
}

fn kernel(e: KernelError) -> Failure {
    Failure {
        code: 2,
        msg: format!("{e}\n{TALK}"),
        silent: None,
        exits: false,
    }
}

/// `tc_filter_modify`: add, change, replace (`Some(flags)`) or delete (`None`).
fn modify(engine: &mut Engine, argv: &[String], ff: Option<FilterFlags>, now: Nanos) -> Result<()> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, false)?;
    let create = ff.is_some_and(|f| f.create);
    let protocol = m.protocol.unwrap_or(if create { ETH_P_ALL } else { 0 });
    let dev = m.dev;
    if let Some(d) = dev {
        crate::ensure_device(engine, d, create)?;
    }
    let devices = crate::action::device_names(engine, argv);
    c.devices = &devices;
    let (handle, opts) = match m.kind {
        Some(k) => parse_fopt(k, m.handle, protocol, m.parent, engine, &mut c)?,
        None => {
            if m.handle.is_some() {
                return Err(Failure::returned(
                    "Must specify filter type when using \"handle\"",
                ));
            }
            if let Some(w) = c.peek() {
                return Err(Failure::returned(format!(
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

/// The kinds tc knows but tclab's "kernel" has no module for (rsvp's options are parsed first:
/// `rsvp.rs`).
const KNOWN_TO_TC: &[&str] = &["tcindex"];

/// A filter kind's `parse_fopt`: the handle and the options (`None`: no `TCA_OPTIONS`). The request's
/// protocol and parent are there for the kinds that read them (`tcm_info`, `tcm_parent`: flower), the
/// engine for device indexes (`ll_name_to_index`: route's `fromif`).
fn parse_fopt(
    kind: &str,
    handle: Option<&str>,
    protocol: u16,
    parent: u32,
    engine: &Engine,
    c: &mut Cur,
) -> Result<(u32, Option<FilterOptions>)> {
    match kind {
        "u32" => u32::parse_u32(handle, c),
        "fw" => fw::parse_fw(handle, c),
        "matchall" => matchall::parse_matchall(handle, c),
        "basic" => basic::parse_basic(handle, c),
        "flow" => flow::parse_flow(handle, c),
        "flower" => flower::parse_flower(handle, protocol, parent, c),
        "route" => route::parse_route(handle, c, |d| engine.ifindex(d)),
        "cgroup" => cgroup::parse_cgroup(handle, c),
        "bpf" => bpf::parse_bpf(handle, c),
        "rsvp" | "rsvp6" => rsvp::parse_rsvp(kind == "rsvp6", handle, c).map(|()| (0, None)),
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
    // `NEXT_ARG()` before `parse_police`: a bare `police` at the end is an incomplete line.
    if c.peek().is_none() {
        return Err(Failure::syntax(
            "Command line is not complete. Try option \"help\"",
        ));
    }
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
        return Err(Failure::returned("Must specify filter protocol"));
    };
    if m.prio == 0 {
        return Err(Failure::returned("Must specify filter priority"));
    }
    if m.parent == 0 {
        return Err(Failure::returned("Must specify filter parent"));
    }
    let Some(kind) = m.kind else {
        return Err(Failure::returned("Must specify filter type"));
    };
    let dev = get_device(engine, &m)?;
    let (handle, _) = parse_fopt(kind, m.handle, protocol, m.parent, engine, &mut c)?;
    if m.handle.is_none() {
        return Err(Failure::returned("Must specify filter \"handle\""));
    }
    if let Some(w) = c.peek() {
        return Err(Failure::returned(format!(
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

/// The device a `get` names: tc's complaints when there is none, or it does not exist.
fn get_device<'a>(engine: &Engine, m: &Common<'a>) -> Result<&'a str> {
    let Some(dev) = m.dev else {
        return Err(Failure::returned(
            "Must specify netdevice \"dev\" or block index \"block\"",
        ));
    };
    if engine.device(dev).is_none() {
        return Err(Failure::options(format!("Cannot find device \"{dev}\"")));
    }
    Ok(dev)
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
    let Some((m, dev)) = list_request(engine, argv, out)? else {
        return Ok(());
    };
    let block = engine.filter_block(dev, Handle(m.parent));
    print_listing(&m, block, flags, now, out);
    Ok(())
}

/// [`list`] answered by a snapshot decoded for that listing alone ([`listing_of`],
/// [`tclab_core::snapshot::FilterListing`]): the same words, checks and output.
pub fn list_from(
    listing: &mut FilterListing,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let m = parse_common(&mut Cur::new(argv), true)?;
    let Some(dev) = m.dev else {
        return Ok(());
    };
    if !listing.has_device() {
        return Err(no_device(dev));
    }
    let block = listing.filter_block(dev, Handle(m.parent));
    print_listing(&m, block, flags, now, out);
    Ok(())
}

/// Print the filters of `block` that `m` selects (an error or a qdisc without filters: none).
fn print_listing(
    m: &Common,
    block: std::result::Result<Option<(&tclab_core::filter::Block, Handle)>, KernelError>,
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) {
    // `new_json_obj`: under -j the listing is an array even when there is nothing to list.
    let mut p = crate::jprint::Printer::new(flags);
    let Ok(Some((block, parent))) = block else {
        out.stdout.push_str(&p.finish());
        return;
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
        let filters = entries(block, tp);
        // Room for the lines at once (a u32 node's two take about 130 bytes, 170 with -s): a
        // listing of 10 000 grew its text by doubling, copying each time. Room never written costs
        // no page, so it is generous (160 a filter left -s copying its 1.7 MB once).
        p.reserve(filters.len() * 256);
        if flags.brief && !filters.is_empty() && !matches!(tp.cls, Classifier::Flower(_)) {
            // A terse dump (`-br`) of a kind without `terse_dump` fails with EOPNOTSUPP on its first
            // filter, and the dump ends there (`tcf_chain_dump`).
            break;
        }
        for e in filters {
            print_entry(&view, parent.0, tp, &e, flags, now, &mut p);
        }
    }
    // The listing is the output (no copy of a megabyte and a half of text).
    if out.stdout.is_empty() {
        out.stdout = p.finish();
    } else {
        out.stdout.push_str(&p.finish());
    }
}

/// The device and parent (0: none) of a filter listing, if `args` (a tc command line's words after
/// `tc`) are one: `filter show dev DEV [root|ingress|parent P] …`
/// ([`crate::store::ReadScope::Filters`]). Words the listing would refuse answer `None`: that call's
/// error comes from the whole engine.
pub fn listing_of(args: &[String]) -> Option<(&str, u32)> {
    let first = args.iter().take_while(|a| a.starts_with('-')).count();
    let [obj, cmd, rest @ ..] = &args[first..] else {
        return None;
    };
    if !(matches(obj, "filter")
        && (matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst")))
    {
        return None;
    }
    let m = parse_common(&mut Cur::new(rest), true).ok()?;
    Some((m.dev?, m.parent))
}

/// The words of a listing (`tc_filter_list`) and its device: `None` without one (the kernel dumps
/// nothing), tc's `Cannot find device` for one that does not exist.
fn list_request<'a>(
    engine: &Engine,
    argv: &'a [String],
    out: &mut Output,
) -> Result<Option<(Common<'a>, &'a str)>> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, true)?;
    if m.help {
        crate::usage_on(out, FILTER_USAGE);
    }
    let Some(dev) = m.dev else {
        return Ok(None);
    };
    if engine.device(dev).is_none() {
        return Err(no_device(dev));
    }
    Ok(Some((m, dev)))
}

fn no_device(dev: &str) -> Failure {
    Failure::options(format!("Cannot find device \"{dev}\""))
}

/// One filter of an instance, whatever its kind.
enum Entry<'a> {
    U32(U32Entry<'a>),
    Fw(&'a tclab_core::filter::fw::FwFilter, Option<u32>),
    Matchall(&'a tclab_core::filter::matchall::MatchallFilter),
    Basic(&'a tclab_core::filter::basic::BasicFilter),
    Flow(&'a tclab_core::filter::flow::FlowFilter),
    Flower(&'a tclab_core::filter::flower::FlowerFilter),
    Route(&'a tclab_core::filter::route::RouteFilter),
    Cgroup(&'a tclab_core::filter::cgroup::CgroupFilter),
    Bpf(&'a tclab_core::filter::bpf::BpfFilter),
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
        Classifier::Flower(f) => f.filters.values().map(Entry::Flower).collect(),
        Classifier::Route(r) => r.filters.iter().map(Entry::Route).collect(),
        Classifier::Cgroup(c) => c.filter.iter().map(Entry::Cgroup).collect(),
        Classifier::Bpf(b) => b.filters.iter().map(Entry::Bpf).collect(),
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
        Entry::Flower(f) => f.handle,
        Entry::Route(r) => r.handle,
        Entry::Cgroup(c) => c.handle,
        Entry::Bpf(b) => b.handle,
    }
}

/// `print_filter` up to the kind's options: `filter parent 1: protocol ip pref 10 u32 chain 0 `.
fn print_header(v: &View, parent: u32, tp: &Tp, p: &mut Printer) {
    // Appended piece by piece: a listing prints this for each of its (10 000) filters.
    p.fp_str("filter ");
    print_parent(v, parent, p);
    if v.protocol != Some(tp.protocol) && tp.protocol != 0 {
        let proto = |s: &mut String| push_table_n2a(s, PROTOS, tp.protocol);
        p.string_with("protocol", "protocol ", proto, " ");
    }
    if v.prio != Some(tp.prio) {
        p.uint("pref", "pref ", tp.prio.into(), " ");
    }
    let kind = tp.cls.kind();
    p.string_with("kind", "", |s| s.push_str(kind), " ");
    if v.chain != Some(tp.chain) {
        p.uint("chain", "chain ", tp.chain.into(), " ");
    }
}

/// `print_filter`'s parent, unless the request named it.
fn print_parent(v: &View, parent: u32, p: &mut Printer) {
    if v.parent == Some(parent) {
        return;
    }
    match parent {
        0xffff_ffff => p.boolean("root", "root ", true),
        PARENT_INGRESS => p.boolean("ingress", "ingress ", true),
        PARENT_EGRESS => p.boolean("egress", "egress ", true),
        x => p.string_with(
            "parent",
            "parent ",
            |s| crate::util::push_handle(s, Handle(x)),
            " ",
        ),
    }
}

fn print_exts(exts: &Exts, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if exts.police_compat {
        if let Some(a) = exts.actions.first() {
            p.nl();
            print_police_compat(p, &a.borrow(), flags, now);
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
        Entry::U32(U32Entry::Table(h)) => u32::print_table(h, p),
        Entry::U32(U32Entry::Node(n)) => u32::print_node(n, tp.protocol, flags, now, p),
        Entry::Fw(f, mask) => fw::print(f, *mask, flags, now, p),
        Entry::Matchall(m) => matchall::print(m, flags, now, p),
        Entry::Basic(b) => basic::print(b, flags, now, p),
        Entry::Flow(f) => flow::print(f, flags, now, p),
        Entry::Flower(f) => flower::print(f, flags.brief, flags, now, p),
        Entry::Route(r) => route::print(r, flags, now, p),
        Entry::Cgroup(c) => cgroup::print(c, flags, now, p),
        Entry::Bpf(b) => bpf::print(b, flags, now, p),
    }
    p.close_object();
    p.nl();
    p.close_object();
}

// ----- tc chain -----

const CHAIN_USAGE: &str = "Usage: tc chain [ add | del | get | show ] [ dev STRING ]\n       tc chain [ add | del | get | show ] [ block BLOCK_INDEX ] ]";

/// `tc chain …` (`do_chain`): chains as objects of their own (`tc_ctl_chain`, `tc_dump_chain`).
pub fn chain_cmd(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    out: &mut Output,
) -> Result<()> {
    let Some(cmd) = argv.first().map(String::as_str) else {
        // `tc_filter_list` with no device: the kernel dumps nothing.
        return Ok(());
    };
    let rest = &argv[1..];
    if matches(cmd, "add") {
        chain_modify(engine, rest, ChainOp::Add)
    } else if matches(cmd, "delete") {
        chain_modify(engine, rest, ChainOp::Del)
    } else if matches(cmd, "get") {
        chain_get(engine, rest, flags, out)
    } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        chain_list(engine, rest, flags, out)
    } else if matches(cmd, "help") {
        out.stderr = format!("{CHAIN_USAGE}\n");
        Ok(())
    } else {
        Err(Failure::returned(format!(
            "Command \"{cmd}\" is unknown, try \"tc chain help\"."
        )))
    }
}

/// `Garbage instead of arguments`.
fn garbage(w: &str) -> Failure {
    Failure::returned(format!(
        "Garbage instead of arguments \"{w} ...\". Try \"tc filter help\"."
    ))
}

/// A chain template (`tc chain add … KIND OPTIONS`): tc parses the kind's options, then the kernel
/// takes templates from flower only, which tclab does not keep.
fn chain_template(
    kind: &str,
    handle: Option<&str>,
    parent: u32,
    engine: &Engine,
    c: &mut Cur,
) -> Result<()> {
    parse_fopt(kind, handle, 0, parent, engine, c)?;
    if let Some(w) = c.peek() {
        return Err(garbage(w));
    }
    Err(if kind == "flower" {
        Failure {
            code: 2,
            msg: format!("Error: tclab does not support chain templates yet.\n{TALK}"),
            silent: None,
            exits: false,
        }
    } else {
        kernel(KernelError::msg(
            Errno::NotSupported,
            "Chain templates are not supported with specified classifier",
        ))
    })
}

/// `tc chain add|del` (`tc_filter_modify` with `RTM_NEWCHAIN`/`RTM_DELCHAIN`).
fn chain_modify(engine: &mut Engine, argv: &[String], op: ChainOp) -> Result<()> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, false)?;
    if let Some(d) = m.dev {
        crate::ensure_device(engine, d, false)?;
    }
    if let Some(kind) = m.kind {
        return chain_template(kind, m.handle, m.parent, engine, &mut c);
    }
    if m.handle.is_some() {
        return Err(Failure::returned(
            "Must specify filter type when using \"handle\"",
        ));
    }
    if let Some(w) = c.peek() {
        return Err(garbage(w));
    }
    let Some(dev) = m.dev else {
        return Err(kernel(KernelError::new(Errno::NoDevice)));
    };
    engine
        .chain_op(dev, Handle(m.parent), m.chain.unwrap_or(0), op)
        .map(|_| ())
        .map_err(kernel)
}

/// One chain as `print_filter` prints an `RTM_NEWCHAIN` message.
fn print_chain(v: &View, parent: u32, chain: u32, p: &mut Printer) {
    p.open_object(None);
    p.fp("chain ");
    print_parent(v, parent, p);
    if v.chain != Some(chain) {
        p.number("chain", format_args!("chain {chain} "), chain);
    }
    p.nl();
    p.close_object();
}

/// `tc chain get` (`tc_filter_get` with `RTM_GETCHAIN`).
fn chain_get(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    out: &mut Output,
) -> Result<()> {
    let mut c = Cur::new(argv);
    let m = parse_common(&mut c, false)?;
    if m.parent == 0 {
        return Err(Failure::returned("Must specify filter parent"));
    }
    let dev = get_device(engine, &m)?;
    if let Some(w) = m.kind.or_else(|| c.peek()) {
        return Err(garbage(w));
    }
    let chain = m.chain.unwrap_or(0);
    let q = engine
        .chain_op(dev, Handle(m.parent), chain, ChainOp::Get)
        .map_err(kernel)?;
    let view = View {
        parent: None,
        protocol: None,
        prio: None,
        chain: None,
    };
    let mut p = Printer::new(flags);
    print_chain(&view, q.0, chain, &mut p);
    out.stdout.push_str(&p.finish());
    Ok(())
}

/// `tc chain show dev DEV [parent P] [chain N]` (`tc_dump_chain`): the block's chains in the order
/// they came to be, each reported under the block's qdisc.
fn chain_list(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    out: &mut Output,
) -> Result<()> {
    let Some((m, dev)) = list_request(engine, argv, out)? else {
        return Ok(());
    };
    let mut p = Printer::new(flags);
    if let Ok(Some((block, parent))) = engine.filter_block(dev, Handle(m.parent)) {
        let view = View {
            parent: (m.parent != 0).then_some(m.parent),
            protocol: None,
            prio: None,
            chain: m.chain,
        };
        let q = parent.qdisc().0;
        for &chain in &block.chain_list {
            if m.chain.is_none_or(|w| w == chain) {
                print_chain(&view, q, chain, &mut p);
            }
        }
    }
    out.stdout.push_str(&p.finish());
    Ok(())
}

/// `sprint_tc_classid`: as a handle prints, but `:3` for a classid with no major.
pub fn sprint_classid(cl: u32) -> String {
    let mut s = String::new();
    push_classid(&mut s, cl);
    s
}

/// [`sprint_classid`] appended to `out`.
pub fn push_classid(out: &mut String, cl: u32) {
    let h = Handle(cl);
    if cl != 0 && cl != Handle::ROOT.0 && h.major() == 0 {
        out.push(':');
        crate::util::push_hex(out, h.minor().into());
        return;
    }
    crate::util::push_handle(out, h);
}
