//! The tc language of each queueing discipline, one file a kind (as iproute2's `tc/q_*.c`): its option
//! parser with tc's defaults and messages, and its printer for `tc qdisc|class show`. [`KINDS`] is the
//! registry the command, the printer and the fuzz vocabulary read.
//!
//! Adding a discipline: its algorithm in `crates/core/src/qdisc/X.rs` (with a `QdiscOptions` variant and
//! an entry in core's `qdisc::KINDS`), its language here in `X.rs` with a `QdiscLang`, and one line in
//! [`KINDS`].

use crate::util::matches;
use crate::{Failure, Result, ShowFlags};
use serde_json::{Map, Value};
use tclab_core::qdisc::{ClassInfo, ClassOptions, DevEnv, QdiscOptions, Xstats};
use tclab_core::units::LinkLayer;

pub mod cake;
pub mod cbq;
pub mod cbs;
pub mod choke;
pub mod codel;
pub mod drr;
pub mod etf;
pub mod ets;
pub mod fifo;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod gred;
pub mod hfsc;
pub mod hhf;
pub mod htb;
pub mod ingress;
pub mod mq;
pub mod mqprio;
pub mod multiq;
pub mod netem;
pub mod noqueue;
pub mod pfifo_fast;
pub mod pie;
pub mod plug;
pub mod prio;
pub mod qfq;
pub mod red;
pub mod sfb;
pub mod sfq;
pub mod skbprio;
pub mod taprio;
pub mod tbf;
pub mod teql;

/// A discipline's extra counters as keys of its `tc -s -j` object.
pub type XstatsJson = fn(&Xstats, &mut Map<String, Value>);

/// One discipline's language.
pub struct QdiscLang {
    pub name: &'static str,
    /// The option keywords its parsers know (qdisc and class): the fuzz vocabulary, help, completion.
    pub words: &'static [&'static str],
    /// `parse_qopt`: the words after the kind (the kind itself first: one parser may serve two kinds).
    pub parse: fn(&str, &[String], Option<DevEnv>) -> Result<QdiscOptions>,
    /// `print_qopt`: the options part of a `qdisc show` line, and its JSON object.
    pub print: fn(&QdiscOptions, ShowFlags, &mut String, &mut Map<String, Value>),
    /// `print_xstats`: the discipline's extra counters under `-s` (`dump_stats`).
    pub xstats: Option<fn(&Xstats, &mut String)>,
    /// The same counters in `tc -s -j` output: keys added to the qdisc's JSON object, as tc's
    /// `print_xstats` does under PRINT_JSON.
    pub xstats_json: Option<XstatsJson>,
    /// The classes' language, for a classful discipline (`parse_copt`, `print_copt`, `print_xstats`).
    pub class: Option<ClassLang>,
}

pub struct ClassLang {
    /// `excl`: the request carries NLM_F_EXCL (`tc class add`), which changes CBQ's defaults.
    pub parse: fn(&[String], bool) -> Result<ClassOptions>,
    pub print: fn(&ClassInfo, ShowFlags, &mut String),
    /// The discipline's extra counters under `-s`.
    pub print_xstats: fn(&ClassInfo, &mut String),
}

/// Every discipline tclab knows, by the name tc gives it.
pub const KINDS: &[QdiscLang] = &[
    fifo::PFIFO,
    fifo::BFIFO,
    fifo::PFIFO_HEAD_DROP,
    pfifo_fast::LANG,
    noqueue::LANG,
    tbf::LANG,
    htb::LANG,
    sfq::LANG,
    prio::LANG,
    cbq::LANG,
    drr::LANG,
    ingress::INGRESS,
    ingress::CLSACT,
    codel::LANG,
    fq_codel::LANG,
    mq::LANG,
    multiq::LANG,
    netem::LANG,
    hfsc::LANG,
    cake::LANG,
    hhf::LANG,
    red::LANG,
    choke::LANG,
    gred::LANG,
    sfb::LANG,
    pie::LANG,
    fq_pie::LANG,
    fq::LANG,
    ets::LANG,
    qfq::LANG,
    skbprio::LANG,
    plug::LANG,
    cbs::LANG,
    etf::LANG,
    teql::LANG,
    mqprio::LANG,
    taprio::LANG,
];

pub fn lang(kind: &str) -> Option<&'static QdiscLang> {
    KINDS.iter().find(|k| k.name == kind)
}

pub const QDISC_USAGE: &str = "Usage: tc qdisc [ add | del | replace | change | show ] dev STRING\n       [ handle QHANDLE ] [ root | ingress | clsact | parent CLASSID ]\n       [ estimator INTERVAL TIME_CONSTANT ]\n       [ stab [ help | STAB_OPTIONS] ]\n       [ ingress_block BLOCK_INDEX ] [ egress_block BLOCK_INDEX ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]\n\n       tc qdisc { show | list } [ dev STRING ] [ QDISC_ID ] [ invisible ]\nWhere:\nQDISC_KIND := { [p|b]fifo | tbf | prio | cbq | red | etc. }\nOPTIONS := ... try tc qdisc add <desired QDISC_KIND> help\nSTAB_OPTIONS := ... try tc qdisc add stab help\nQDISC_ID := { root | ingress | handle QHANDLE | parent CLASSID }";

pub const CLASS_USAGE: &str = "Usage: tc class [ add | del | change | replace | show ] dev STRING\n       [ classid CLASSID ] [ root | parent CLASSID ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]\n\n       tc class show [ dev STRING ] [ root | parent CLASSID ]\nWhere:\nQDISC_KIND := { prio | cbq | etc. }\nOPTIONS := ... try tc class add <desired QDISC_KIND> help";

/// Kinds iproute2 can parse whose kernel module tclab does not have (yet): tc accepts their options, the
/// "kernel" then says the kind is unknown — exactly what a kernel without the module answers.
pub const KNOWN_TO_TC: &[&str] = &[];

/// Those of [`KNOWN_TO_TC`] whose tc has a class parser (`parse_copt`).
const KNOWN_CLASSFUL: &[&str] = &[];

pub(crate) fn linklayer(s: &str) -> Option<LinkLayer> {
    if matches(s, "ethernet") {
        Some(LinkLayer::Ethernet)
    } else if matches(s, "atm") || matches(s, "adsl") {
        Some(LinkLayer::Atm)
    } else {
        None
    }
}

/// Parse the words after a qdisc kind. `Ok(None)`: a kind tc knows but tclab's engine does not.
pub fn parse_qdisc(
    kind: &str,
    args: &[String],
    env: Option<DevEnv>,
) -> Result<Option<QdiscOptions>> {
    if let Some(l) = lang(kind) {
        return (l.parse)(kind, args, env).map(Some);
    }
    if KNOWN_TO_TC.contains(&kind) {
        return Ok(None);
    }
    if let Some(a) = args.first() {
        return Err(Failure::options(format!(
            "Unknown qdisc \"{kind}\", hence option \"{a}\" is unparsable"
        )));
    }
    Ok(None)
}

/// Parse the words after a class kind.
pub fn parse_class(kind: &str, args: &[String], excl: bool) -> Result<ClassOptions> {
    match lang(kind).and_then(|l| l.class.as_ref()) {
        Some(c) => (c.parse)(args, excl),
        None if KNOWN_CLASSFUL.contains(&kind) => Err(Failure::kernel(
            tclab_core::KernelError::new(tclab_core::error::Errno::NotSupported),
        )),
        None => Err(Failure::options(format!(
            "Error: Qdisc \"{kind}\" is classless."
        ))),
    }
}

/// The options part of a qdisc line, and its JSON form.
pub fn qdisc_options(o: &QdiscOptions, flags: ShowFlags) -> (String, Value) {
    let mut s = String::new();
    let mut j = Map::new();
    if let Some(l) = lang(o.kind()) {
        (l.print)(o, flags, &mut s, &mut j);
    }
    (s, Value::Object(j))
}

/// The options part of a class line.
pub fn class_options(c: &ClassInfo, flags: ShowFlags) -> String {
    let mut s = String::new();
    class_options_into(c, flags, &mut s);
    s
}

/// [`class_options`] appended to `out`.
pub fn class_options_into(c: &ClassInfo, flags: ShowFlags, out: &mut String) {
    if let Some(cl) = lang(c.kind).and_then(|l| l.class.as_ref()) {
        (cl.print)(c, flags, out);
    }
}

/// A qdisc's extra counters under `-s`.
pub fn qdisc_xstats(kind: &str, x: &Xstats, out: &mut String) {
    if let Some(f) = lang(kind).and_then(|l| l.xstats) {
        f(x, out);
    }
}

/// A qdisc's extra counters in `-s -j` output.
pub fn qdisc_xstats_json(kind: &str, x: &Xstats, m: &mut Map<String, Value>) {
    if let Some(f) = lang(kind).and_then(|l| l.xstats_json) {
        f(x, m);
    }
}

/// A class's extra counters under `-s`.
pub fn class_xstats(c: &ClassInfo, out: &mut String) {
    if let Some(cl) = lang(c.kind).and_then(|l| l.class.as_ref()) {
        (cl.print_xstats)(c, out);
    }
}
