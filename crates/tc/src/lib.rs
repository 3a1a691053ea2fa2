//! # tclab-tc — the `tc` command language
//!
//! Parses tc(8) command lines with iproute2's grammar and defaults (6.1, the version on the reference
//! machine), turns them into engine operations, and prints `tc [-s] [-d] [-j] qdisc|class show` the way
//! iproute2 prints the kernel's answers. Exit codes are tc's: 0 done, 1 a qdisc's options did not parse,
//! 255 a syntax error (tc's `exit(-1)`), 2 the kernel refused.
//!
//! - [`util`]: number words (rates, sizes, times, handles) in and out, with tc's rounding.
//! - [`qdisc`]: one file per discipline (parser, defaults, printer), found through its registry.
//! - [`show`]: the printers.
//! - [`iptables`]: `iptables -t mangle …`, the marks and classes netfilter sets before the qdiscs see a
//!   packet.
//! - [`script`]: shell scripts written for Linux, run unmodified with `tc`/`iptables` resolved to tclab.
//! - [`store`]: the policy file that lets `TCLAB_STATE=FILE tclab tc …` work line by line.
//! - [`control`]: the socket through which a script's `tc` calls reach one resident engine.
//! - [`check`]: `tclab check`, the findings about a policy before it is deployed.
//! - [`fuzz`]: the property checks behind the parser's fuzz target and its deterministic test;
//!   [`fuzz_script`]: the same for `tclab script run`'s wrappers.

pub mod action;
mod bpf;
pub mod check;
pub mod control;
pub mod ematch;
pub mod explain;
pub mod filter;
pub mod fuzz;
pub mod fuzz_script;
pub mod iproute;
pub mod iptables;
pub mod jprint;
pub mod qdisc;
pub mod red;
pub mod script;
pub mod show;
pub mod snapshot;
pub mod stab;
pub mod store;
pub mod util;

use tclab_core::engine::Flags;
use tclab_core::error::KernelError;
use tclab_core::qdisc::ClassOptions;
use tclab_core::{Engine, Handle, Nanos};
use util::{get_qdisc_handle, get_tc_classid, matches};

/// What one tc invocation printed and how it ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// A failed command: the text tc would print on stderr and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: i32,
    pub msg: String,
    /// Where in iproute2 tc refuses this without a word (`msg` is then empty): the fuzz target accepts a
    /// silent failure only when it names one (see [`Failure::silent`]).
    pub silent: Option<&'static str>,
    /// tc `exit()`ed: in a batch no `Command failed FILE:N` follows and no later line runs, `-force`
    /// or not. Otherwise the refusal was returned to `do_cmd`, which a batch reports and goes past.
    pub exits: bool,
}

impl Failure {
    /// tc's `exit(-1)` paths: syntax errors, `invarg`, `duparg`, incomplete commands.
    pub fn syntax(msg: impl Into<String>) -> Failure {
        Failure {
            code: 255,
            msg: msg.into(),
            silent: None,
            exits: true,
        }
    }
    /// tc's `return -1` up to `do_cmd` (an unknown object, a duplicate `root`): exit status 255 alone,
    /// but a batch says `Command failed` and `-force` goes on, as for any refused line.
    pub fn returned(msg: impl Into<String>) -> Failure {
        Failure {
            exits: false,
            ..Failure::syntax(msg)
        }
    }
    /// tc's `usage(); return 0;` in the middle of a command: the usage on stderr, exit 0, and nothing
    /// done (`tc filter add … help`).
    pub fn usage(msg: impl Into<String>) -> Failure {
        Failure {
            code: 0,
            msg: msg.into(),
            silent: None,
            exits: false,
        }
    }
    /// A refusal for which tc prints nothing: `code` is its exit status and `tc_source` the function in
    /// iproute2 6.1 that returns without a message, e.g. `check_size_table_opts` (tc_stab.c).
    pub fn silent(code: i32, tc_source: &'static str) -> Failure {
        Failure {
            code,
            msg: String::new(),
            silent: Some(tc_source),
            exits: code == 255,
        }
    }
    /// A discipline's option parser said no: exit 1.
    pub fn options(msg: impl Into<String>) -> Failure {
        Failure {
            code: 1,
            msg: msg.into(),
            silent: None,
            exits: false,
        }
    }
    /// tc's `exit(code)` from deep inside a parser (`get_addr`'s `exit(1)`): the command ends with
    /// `code` whatever its caller makes of a parser's failure. Kept apart from a parser's `return -1`
    /// (code 1) by a bit the exit status drops, as `exit(257)` is `exit(1)`.
    pub fn exit(code: u8, msg: impl Into<String>) -> Failure {
        Failure {
            code: 0x100 | i32::from(code),
            msg: msg.into(),
            silent: None,
            exits: true,
        }
    }
    pub fn kernel(e: KernelError) -> Failure {
        Failure {
            code: 2,
            msg: e.to_string(),
            silent: None,
            exits: false,
        }
    }
}

pub type Result<T> = std::result::Result<T, Failure>;

/// `-s`, `-d`, `-j`, `-r` and friends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShowFlags {
    pub stats: bool,
    pub details: bool,
    pub json: bool,
    pub pretty: bool,
    pub raw: bool,
    /// `-br[ief]`: filter listings ask the kernel for a terse dump.
    pub brief: bool,
}

/// The cursor over the words of a command, for every parser of the crate: iproute2's style (`peek`,
/// `fwd`, `NEXT_ARG` as [`Cur::next_arg`]) and the kinds' loop style (`next`, `value`, `back`).
pub struct Cur<'a> {
    pub a: &'a [String],
    pub i: usize,
    /// The devices of the namespace, for parsers that resolve a name to an ifindex (`ll_name_to_index`:
    /// mirred's `dev`); `lo` always exists.
    pub devices: &'a [String],
}

impl<'a> Cur<'a> {
    pub fn new(a: &'a [String]) -> Cur<'a> {
        Cur {
            a,
            i: 0,
            devices: &[],
        }
    }

    /// A cursor whose parsers can look device names up.
    pub fn with_devices(a: &'a [String], devices: &'a [String]) -> Cur<'a> {
        Cur { a, i: 0, devices }
    }

    /// `ll_name_to_index(name) != 0`.
    pub fn has_device(&self, name: &str) -> bool {
        name == "lo" || self.devices.iter().any(|d| d == name)
    }
    pub fn peek(&self) -> Option<&'a str> {
        self.a.get(self.i).map(String::as_str)
    }
    pub fn left(&self) -> usize {
        self.a.len().saturating_sub(self.i)
    }
    pub fn fwd(&mut self) {
        self.i += 1;
    }
    /// `NEXT_ARG()`: step to the value after a keyword.
    pub fn next_arg(&mut self) -> Result<&'a str> {
        self.i += 1;
        self.peek().ok_or_else(incomplete)
    }
    /// The word at the cursor, stepping past it (the kind parsers' loop: `while let Some(w) = it.next()`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a str> {
        let v = self.peek();
        if v.is_some() {
            self.i += 1;
        }
        v
    }
    /// The value after a keyword [`Cur::next`] returned, or "Command line is not complete".
    pub fn value(&mut self) -> Result<&'a str> {
        self.next().ok_or_else(incomplete)
    }
    /// Give the last word back (a sub-parser stopped at a word that is not its own).
    pub fn back(&mut self) {
        self.i = self.i.saturating_sub(1);
    }
    /// The words from the cursor on.
    pub fn rest(&self) -> &'a [String] {
        &self.a[self.i.min(self.a.len())..]
    }
}

/// `incomplete_command`.
fn incomplete() -> Failure {
    Failure::syntax("Command line is not complete. Try option \"help\"")
}

pub(crate) use action::{duparg, invarg};

/// Devices named in a policy that do not exist yet are created with these.
pub const DEFAULT_MTU: u32 = 1500;
pub const DEFAULT_TXQUEUELEN: u32 = 1000;

/// tclab's one rule for devices (there is no real device list offline): a command that creates something
/// on a device — `qdisc|class|filter add|replace` — creates the device too, with [`DEFAULT_MTU`] and
/// [`DEFAULT_TXQUEUELEN`], as if `ip link add` had come first; every other command (`change`, `delete`,
/// `show`, `get`) on a device that does not exist answers as tc does, `Cannot find device "X"` (exit 1).
/// Where the device exists, the kernel's own answer follows.
/// `qdisc_block_indexes_set`: a block index must not be 0, and only `ingress`/`clsact` take one
/// (`ingress` only an ingress block).
fn check_block_indexes(kind: Option<&str>, blocks: [Option<u32>; 2]) -> Result<()> {
    for (i, b) in blocks.iter().enumerate() {
        let Some(b) = *b else { continue };
        let (name, ok) = if i == 0 {
            ("Ingress", matches!(kind, Some("ingress" | "clsact")))
        } else {
            ("Egress", kind == Some("clsact"))
        };
        if !ok {
            return Err(Failure::kernel(KernelError::msg(
                tclab_core::error::Errno::NotSupported,
                format!("{name} block sharing is not supported"),
            )));
        }
        if b == 0 {
            return Err(Failure::kernel(KernelError::invalid(format!(
                "{name} block index cannot be 0"
            ))));
        }
    }
    Ok(())
}

/// Linux's `dev_valid_name`: 1 to 15 bytes, not `.` or `..`, no `/`, `:` or white space. No device can
/// have any other name, so none is created under one.
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace())
}

pub fn ensure_device(engine: &mut Engine, name: &str, creates: bool) -> Result<()> {
    if creates && valid_ifname(name) {
        engine.add_device(name, DEFAULT_MTU, DEFAULT_TXQUEUELEN);
    }
    if engine.device(name).is_some() {
        Ok(())
    } else {
        Err(Failure::options(format!("Cannot find device \"{name}\"")))
    }
}

thread_local! {
    /// What tc itself prints on stderr while it parses a command (`RED: set bandwidth to 10Mbit`),
    /// before the kernel answers: a parser deep in a kind's file says it through [`notice`], and [`run`]
    /// puts it first in the command's stderr.
    static NOTICES: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// A line tc prints on stderr while parsing (see `NOTICES`).
pub(crate) fn notice(line: &str) {
    NOTICES.with(|n| {
        let mut n = n.borrow_mut();
        n.push_str(line);
        n.push('\n');
    });
}

/// `tc -s qdisc|class|filter show dev DEV` (and the ingress filters, `parent ffff:`, when the device has
/// an ingress qdisc): a device's whole policy with its counters, as `tclab sim`'s tc.txt and `tclab
/// live`'s summary print it.
pub fn show_device(engine: &mut Engine, dev: &str, now: Nanos) -> String {
    let ingress_kind = engine
        .device(dev)
        .and_then(|d| d.ingress())
        .map(|s| s.q.kind());
    let mut commands = vec![
        vec!["-s", "qdisc", "show", "dev", dev],
        vec!["-s", "class", "show", "dev", dev],
        vec!["-s", "filter", "show", "dev", dev],
    ];
    match ingress_kind {
        // clsact's blocks are its classes fff2 and fff3; `parent ffff:` names neither (clsact_tcf_block).
        Some("clsact") => {
            commands.push(vec!["-s", "filter", "show", "dev", dev, "ingress"]);
            commands.push(vec!["-s", "filter", "show", "dev", dev, "egress"]);
        }
        Some(_) => commands.push(vec!["-s", "filter", "show", "dev", dev, "parent", "ffff:"]),
        None => {}
    }
    let mut text = String::new();
    for argv in commands {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        text.push_str(&run(engine, &argv, now).stdout);
    }
    text
}

/// Run one tc command line (without the leading `tc`). Global options come first, as in tc.
pub fn run(engine: &mut Engine, argv: &[String], now: Nanos) -> Output {
    run_explained(engine, argv, now).0
}

/// [`run`], and for a refusal tc makes without a word, where in iproute2 it does so
/// ([`Failure::silent`]): what the fuzz target checks a silent failure against.
pub fn run_explained(
    engine: &mut Engine,
    argv: &[String],
    now: Nanos,
) -> (Output, Option<&'static str>) {
    let (out, ending) = run_ended(engine, argv, now);
    (out, ending.silent)
}

/// One command of `tc -batch`: [`run`], and whether tc `exit()`s there ([`Failure::exits`]), which
/// ends the batch without a `Command failed FILE:N`.
pub fn run_batch_line(engine: &mut Engine, argv: &[String], now: Nanos) -> (Output, bool) {
    let (out, ending) = run_ended(engine, argv, now);
    (out, ending.exits)
}

/// How a refused command ended, besides its text and status.
#[derive(Default)]
struct Ending {
    silent: Option<&'static str>,
    exits: bool,
}

fn run_ended(engine: &mut Engine, argv: &[String], now: Nanos) -> (Output, Ending) {
    NOTICES.with(|n| n.borrow_mut().clear());
    let mut ending = Ending::default();
    let mut out = run_line(engine, argv, now, &mut ending);
    let notices = NOTICES.with(|n| std::mem::take(&mut *n.borrow_mut()));
    if !notices.is_empty() {
        out.stderr.insert_str(0, &notices);
    }
    (out, ending)
}

fn run_line(engine: &mut Engine, argv: &[String], now: Nanos, ending: &mut Ending) -> Output {
    with_options(argv, ending, |words, flags, out| {
        let devices_before = engine.device_names();
        let r = run_object(engine, words, flags, now, out);
        if r.is_err() {
            // A refused command leaves nothing behind, not even the device it named.
            engine.keep_only_devices(&devices_before);
        }
        r
    })
}

/// `tc [OPTIONS] filter show dev DEV …` answered by a snapshot decoded for that listing alone
/// ([`filter::listing_of`]); the same output as [`run`] on the whole engine. Other words are refused:
/// the listing can answer nothing else.
pub fn list_filters(
    listing: &mut tclab_core::snapshot::FilterListing,
    argv: &[String],
    now: Nanos,
) -> Output {
    with_options(
        argv,
        &mut Ending::default(),
        |words, flags, out| match words {
            [obj, cmd, rest @ ..]
                if matches(obj, "filter")
                    && (matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst")) =>
            {
                filter::list_from(listing, rest, flags, now, out)
            }
            _ => Err(Failure::options(
                "tclab: a store opened for one filter listing answers nothing else",
            )),
        },
    )
}

/// tc's options (`-s`, `-d`, `-j`…), then `object` with the words after them and the flags they set;
/// a refusal printed as tc prints it.
fn with_options(
    argv: &[String],
    ending: &mut Ending,
    object: impl FnOnce(&[String], ShowFlags, &mut Output) -> Result<()>,
) -> Output {
    let mut out = Output::default();
    let mut flags = ShowFlags::default();
    let mut i = 0;
    while i < argv.len() && argv[i].starts_with('-') && argv[i].len() > 1 {
        let o = argv[i].trim_start_matches('-');
        match o {
            _ if matches(o, "stats") || matches(o, "statistics") => flags.stats = true,
            _ if matches(o, "details") => flags.details = true,
            _ if matches(o, "json") => flags.json = true,
            _ if matches(o, "pretty") => flags.pretty = true,
            _ if matches(o, "raw") => flags.raw = true,
            // tc tests `-batch` first: `-b` and `-ba…` are batch, `-br…` is brief.
            _ if matches(o, "brief") && o.len() > 1 => flags.brief = true,
            _ if matches(o, "iec") || matches(o, "force") || o == "n" || o == "netns" => {}
            _ if matches(o, "batch") => {
                out.stderr =
                    "Error: -batch is handled by the tclab command, not by one tc line.\n".into();
                out.code = 255;
                ending.exits = true;
                return out;
            }
            _ if o == "V" || matches(o, "Version") => {
                out.stdout = format!("tc utility, tclab-{}\n", env!("CARGO_PKG_VERSION"));
                return out;
            }
            _ => {
                out.stderr = format!("Option \"{}\" is unknown, try \"tc -help\".\n", argv[i]);
                out.code = 255;
                ending.exits = true;
                return out;
            }
        }
        i += 1;
    }
    if let Err(f) = object(&argv[i..], flags, &mut out) {
        out.stderr.push_str(&f.msg);
        ending.silent = f.silent;
        ending.exits = f.exits;
        if !f.msg.is_empty() && !f.msg.ends_with('\n') {
            out.stderr.push('\n');
        }
        out.code = f.code & 0xff;
    }
    out
}

const USAGE: &str = "Usage:\ttc [ OPTIONS ] OBJECT { COMMAND | help }\n\ttc [-force] -batch filename\nwhere  OBJECT := { qdisc | class | filter | chain |\n\t\t    action | monitor | exec }\n       OPTIONS := { -V[ersion] | -s[tatistics] | -d[etails] | -r[aw] |\n\t\t    -o[neline] | -j[son] | -p[retty] | -c[olor]\n\t\t    -b[atch] [filename] | -n[etns] name | -N[umeric] |\n\t\t     -nm | -nam[es] | { -cf | -conf } path\n\t\t     -br[ief] }";

fn run_object(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    // `tc`, `tc help`, `tc qdisc help`, `tc class help`: the usage on stderr, exit 0.
    let Some(obj) = argv.first() else {
        out.stderr = format!("{USAGE}\n");
        return Ok(());
    };
    let help_of = |usage: &str, out: &mut Output| {
        out.stderr = format!("{usage}\n");
    };
    // do_qdisc and do_class answer `help` as their command whatever follows it.
    if argv.len() >= 2 && matches(&argv[1], "help") {
        if matches(obj, "qdisc") {
            help_of(qdisc::QDISC_USAGE, out);
            return Ok(());
        }
        if matches(obj, "class") {
            help_of(qdisc::CLASS_USAGE, out);
            return Ok(());
        }
    }
    let rest = &argv[1..];
    if matches(obj, "qdisc") {
        qdisc_cmd(engine, rest, flags, now, out)
    } else if matches(obj, "class") {
        class_cmd(engine, rest, flags, now, out)
    } else if matches(obj, "filter") {
        filter::filter_cmd(engine, rest, flags, now, out)
    } else if matches(obj, "chain") {
        filter::chain_cmd(engine, rest, flags, out)
    } else if matches(obj, "actions") {
        action::actions_cmd(engine, rest, flags, now, out)
    } else if matches(obj, "help") {
        help_of(USAGE, out);
        Ok(())
    } else {
        Err(Failure::returned(format!(
            "Object \"{obj}\" is unknown, try \"tc help\"."
        )))
    }
}

/// tc's `usage();` where it goes on afterwards: the text on stderr, before anything printed later.
pub(crate) fn usage_on(out: &mut Output, usage: &str) {
    out.stderr.push_str(usage);
    out.stderr.push('\n');
}

enum Cmd {
    Modify(Flags),
    Delete,
    Show,
}

fn command(word: Option<&str>, object: &str) -> Result<Cmd> {
    let Some(w) = word else { return Ok(Cmd::Show) };
    Ok(match w {
        _ if matches(w, "add") => Cmd::Modify(Flags::ADD),
        _ if matches(w, "change") => Cmd::Modify(Flags::CHANGE),
        _ if matches(w, "replace") => Cmd::Modify(Flags::REPLACE),
        _ if matches(w, "link") => Cmd::Modify(Flags::LINK),
        _ if matches(w, "delete") => Cmd::Delete,
        _ if matches(w, "show") || matches(w, "list") || matches(w, "lst") => Cmd::Show,
        _ => {
            return Err(Failure::returned(format!(
                "Command \"{w}\" is unknown, try \"tc {object} help\"."
            )))
        }
    })
}

fn qdisc_cmd(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let mut args = Cur::new(argv);
    let cmd = command(args.next(), "qdisc")?;
    if let Cmd::Show = cmd {
        return qdisc_show(engine, &mut args, flags, now, out);
    }
    let mut dev: Option<&str> = None;
    let mut handle = 0u32;
    let mut parent = 0u32;
    let mut kind: Option<&str> = None;
    // Shared filter blocks (`ingress_block N`, `egress_block N`): checked as the kernel checks them, but
    // tclab does not share blocks between devices yet, so the index is not kept.
    let mut blocks: [Option<u32>; 2] = [None, None];
    let mut stab: Option<tclab_core::stab::SizeTable> = None;
    while let Some(a) = args.next() {
        match a {
            "dev" => {
                let v = args.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            "ingress_block" | "egress_block" => {
                let v = args.value()?;
                let n = util::get_u32(v, 0)
                    .ok_or_else(|| Failure::syntax(format!("Illegal \"{a}\"")))?;
                blocks[(a == "egress_block") as usize] = Some(n);
            }
            "handle" => {
                if handle != 0 {
                    return Err(duparg("handle", args.peek().unwrap_or("")));
                }
                let v = args.value()?;
                handle = get_qdisc_handle(v).ok_or_else(|| invarg("invalid qdisc ID", v))?;
            }
            "root" => {
                if parent != 0 {
                    return Err(Failure::returned("Error: \"root\" is duplicate parent ID"));
                }
                parent = Handle::ROOT.0;
            }
            "parent" => {
                let v = args.value()?;
                if parent != 0 {
                    return Err(duparg("parent", v));
                }
                parent = get_tc_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?;
            }
            "ingress" | "clsact" => {
                if parent != 0 {
                    // tc_qdisc.c words these two with an article, unlike "root".
                    return Err(Failure::returned(format!(
                        "Error: \"{a}\" is a duplicate parent ID"
                    )));
                }
                parent = Handle::INGRESS.0;
                handle = 0xffff_0000;
                kind = Some(a);
                break;
            }
            _ if matches(a, "stab") => {
                if stab.is_some() {
                    return Err(duparg("stab", args.peek().unwrap_or("")));
                }
                stab = Some(stab::parse(&mut args)?);
            }
            _ if matches(a, "estimator") => {
                return Err(Failure::syntax(format!(
                    "Error: tclab does not support \"{a}\" yet."
                )));
            }
            // tc_qdisc_modify prints its usage and goes on reading the line.
            _ if matches(a, "help") => usage_on(out, qdisc::QDISC_USAGE),
            _ => {
                kind = Some(a);
                break;
            }
        }
    }
    let dev =
        dev.ok_or_else(|| Failure::kernel(KernelError::new(tclab_core::error::Errno::NoDevice)))?;
    ensure_device(engine, dev, matches!(cmd, Cmd::Modify(f) if f.create))?;
    if let Cmd::Modify(_) = cmd {
        check_block_indexes(kind, blocks)?;
    }
    match cmd {
        Cmd::Modify(f) => {
            let opts = match kind {
                Some(k) => Some(qdisc::parse_qdisc(
                    k,
                    args.rest(),
                    engine.device(dev).map(|d| d.env()),
                )?),
                None => None,
            };
            let opts = opts.flatten_kind(kind)?;
            if let Some(t) = &stab {
                t.validate().map_err(Failure::kernel)?;
            }
            let mut warnings = engine
                .modify_qdisc(dev, Handle(parent), Handle(handle), opts.as_ref(), f, now)
                .map_err(Failure::kernel)?;
            // `qdisc_create`/`qdisc_change`: the table given, or none (a change without one drops it).
            if let Some(d) = engine.device_mut(dev) {
                let given = opts.is_some();
                if let Some(w) = d.set_stab(Handle(parent), Handle(handle), stab, given) {
                    // The extack holds one message: the last one set is what tc prints.
                    warnings = vec![w];
                }
            }
            for w in warnings {
                out.stderr.push_str(&format!("{w}\n"));
            }
            Ok(())
        }
        Cmd::Delete => {
            if let Some(k) = kind {
                if !args.rest().is_empty() {
                    qdisc::parse_qdisc(k, args.rest(), None)?;
                }
            }
            engine
                .delete_qdisc(dev, Handle(parent), Handle(handle), kind)
                .map_err(Failure::kernel)
        }
        Cmd::Show => unreachable!("handled above"),
    }
}

/// A qdisc kind tc knows how to parse but tclab's engine does not implement: the request reaches the
/// "kernel", which answers as a kernel without that module does.
trait FlattenKind {
    fn flatten_kind(self, kind: Option<&str>) -> Result<Option<tclab_core::qdisc::QdiscOptions>>;
}

impl FlattenKind for Option<Option<tclab_core::qdisc::QdiscOptions>> {
    fn flatten_kind(self, _kind: Option<&str>) -> Result<Option<tclab_core::qdisc::QdiscOptions>> {
        match self {
            None => Ok(None),
            Some(Some(o)) => Ok(Some(o)),
            Some(None) => Err(Failure::kernel(KernelError::msg(
                tclab_core::error::Errno::NoEntry,
                "Specified qdisc kind is unknown",
            ))),
        }
    }
}

fn qdisc_show(
    engine: &mut Engine,
    args: &mut Cur,
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let mut dev: Option<&str> = None;
    let mut filter_handle: Option<Handle> = None;
    let mut filter_parent: Option<Handle> = None;
    while let Some(a) = args.next() {
        match a {
            "dev" => dev = Some(args.value()?),
            "root" => filter_parent = Some(Handle::ROOT),
            "ingress" | "clsact" => filter_parent = Some(Handle::INGRESS),
            "handle" => {
                let v = args.value()?;
                filter_handle = Some(Handle(
                    get_qdisc_handle(v).ok_or_else(|| invarg("invalid qdisc ID", v))?,
                ));
            }
            "parent" => {
                let v = args.value()?;
                filter_parent = Some(Handle(
                    get_tc_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?,
                ));
            }
            "invisible" => {}
            _ if matches(a, "help") => usage_on(out, qdisc::QDISC_USAGE),
            _ => {
                return Err(Failure::returned(format!(
                    "What is \"{a}\"? Try \"tc qdisc help\"."
                )))
            }
        }
    }
    let _ = now;
    if let Some(d) = dev {
        ensure_device(engine, d, false)?;
    }
    show::qdiscs(
        engine,
        dev,
        filter_handle,
        filter_parent,
        flags,
        &mut out.stdout,
    );
    Ok(())
}

fn class_cmd(
    engine: &mut Engine,
    argv: &[String],
    flags: ShowFlags,
    now: Nanos,
    out: &mut Output,
) -> Result<()> {
    let mut args = Cur::new(argv);
    let cmd = command(args.next(), "class")?;
    let mut dev: Option<&str> = None;
    let mut classid = 0u32;
    let mut parent = 0u32;
    let mut kind: Option<&str> = None;
    // `tc class show … qdisc H`: only that qdisc's classes, their ids printed without its major.
    let mut of_qdisc = 0u32;
    while let Some(a) = args.next() {
        match a {
            "dev" => {
                let v = args.value()?;
                if dev.is_some() {
                    return Err(duparg("dev", v));
                }
                dev = Some(v);
            }
            "qdisc" if matches!(cmd, Cmd::Show) => {
                let v = args.value()?;
                if of_qdisc != 0 {
                    return Err(duparg("qdisc", v));
                }
                of_qdisc = get_qdisc_handle(v).ok_or_else(|| invarg("invalid qdisc ID", v))?;
            }
            "classid" => {
                let v = args.value()?;
                if classid != 0 {
                    return Err(duparg("classid", v));
                }
                classid = get_tc_classid(v).ok_or_else(|| invarg("invalid class ID", v))?;
            }
            "handle" => {
                return Err(Failure::returned(
                    "Error: try \"classid\" instead of \"handle\"",
                ))
            }
            "root" => {
                if parent != 0 {
                    return Err(Failure::returned("Error: \"root\" is duplicate parent ID."));
                }
                parent = Handle::ROOT.0;
            }
            "parent" => {
                let v = args.value()?;
                if parent != 0 {
                    return Err(duparg("parent", v));
                }
                parent = get_tc_classid(v).ok_or_else(|| invarg("invalid parent ID", v))?;
            }
            // tc_class_modify and tc_class_list print their usage and go on reading the line.
            _ if matches(a, "help") => usage_on(out, qdisc::CLASS_USAGE),
            // A listing takes no kind: tc_class_list refuses any other word.
            _ if matches!(cmd, Cmd::Show) => {
                return Err(Failure::returned(format!(
                    "What is \"{a}\"? Try \"tc class help\"."
                )))
            }
            _ => {
                kind = Some(a);
                break;
            }
        }
    }
    if let Cmd::Show = cmd {
        // Without a device tc dumps ifindex 0, which the kernel answers with nothing.
        let Some(dev) = dev else {
            return Ok(());
        };
        ensure_device(engine, dev, false)?;
        let select = show::ClassSelect {
            qdisc: (of_qdisc != 0).then_some(Handle(of_qdisc)),
            parent: (parent != 0).then_some(Handle(parent)),
            classid: (classid != 0).then_some(Handle(classid)),
        };
        show::classes(engine, dev, select, flags, now, &mut out.stdout);
        return Ok(());
    }
    let dev =
        dev.ok_or_else(|| Failure::kernel(KernelError::new(tclab_core::error::Errno::NoDevice)))?;
    ensure_device(engine, dev, matches!(cmd, Cmd::Modify(f) if f.create))?;
    match cmd {
        Cmd::Modify(f) => {
            let opts: Option<ClassOptions> = match kind {
                Some(k) => Some(qdisc::parse_class(k, args.rest(), f == Flags::ADD)?),
                None => None,
            };
            let opts = opts.ok_or_else(|| {
                Failure::kernel(KernelError::new(tclab_core::error::Errno::Invalid))
            })?;
            let warnings = engine
                .modify_class(dev, Handle(parent), Handle(classid), &opts, f, now)
                .map_err(Failure::kernel)?;
            for w in warnings {
                out.stderr.push_str(&format!("{w}\n"));
            }
            Ok(())
        }
        Cmd::Delete => engine
            .delete_class(dev, Handle(parent), Handle(classid))
            .map_err(Failure::kernel),
        Cmd::Show => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc(engine: &mut Engine, line: &str) -> Output {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        run(engine, &argv, 0)
    }

    #[test]
    fn help_inside_a_command_prints_the_usage_where_tc_does() {
        // Exit codes and effects of tc 6.1 on this machine (a namespace, the device renamed).
        let mut e = Engine::new();
        // tc_qdisc_modify: usage, then the rest of the line is read and applied (exit 0).
        let out = tc(&mut e, "qdisc add dev eth0 help root handle 1: htb");
        assert_eq!(
            (out.code, out.stderr),
            (0, format!("{}\n", qdisc::QDISC_USAGE))
        );
        assert!(tc(&mut e, "qdisc show dev eth0")
            .stdout
            .starts_with("qdisc htb 1: root"));
        // The listings print it and go on; do_qdisc takes `help` as its command whatever follows.
        for line in ["qdisc show dev eth0 help", "qdisc help foo"] {
            let out = tc(&mut e, line);
            assert_eq!(out.code, 0, "{line}: {}", out.stderr);
            assert!(out.stderr.starts_with("Usage: tc qdisc"), "{line}");
        }
        let out = tc(&mut e, "class show dev eth0 help");
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stderr.starts_with("Usage: tc class"));
        // tc_filter_modify and tc_filter_get: usage and `return 0` there, nothing added.
        for line in [
            "filter help",
            "filter help foo",
            "filter add dev eth0 help parent 1: u32 match u32 0 0 classid 1:1",
            "filter get dev eth0 help",
            "filter show dev eth0 help",
        ] {
            let out = tc(&mut e, line);
            assert_eq!(out.code, 0, "{line}: {}", out.stderr);
            assert!(out.stderr.starts_with("Usage: tc filter"), "{line}");
        }
        assert_eq!(tc(&mut e, "filter show dev eth0").stdout, "");
        // act_usage ends in a blank line, and exit(-1)s.
        let out = tc(&mut e, "actions help");
        assert_eq!(out.code, 255);
        assert!(out.stderr.ends_with("(ACTPARAMS)\n\n"), "{:?}", out.stderr);
    }
}
