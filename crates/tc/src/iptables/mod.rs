//! # `iptables -t mangle …`: the command language of iptables 1.8 for the one table tclab models
//!
//! Shaping scripts set packet marks with iptables (seed 003's home gateway: `CONNMARK --set-mark`,
//! `--restore-mark`, `MARK` on small ACKs, then `tc filter … fw`). This module reads those command lines with
//! iptables 1.8.9's grammar and applies them to [`tclab_core::netfilter`], and prints `-S` and `-L [-v] [-n]
//! [-x] [--line-numbers]` as iptables-legacy prints them (checked line by line against a real iptables in a
//! network namespace: see `tests/iptables_reference.rs`).
//!
//! Three steps, as everywhere in tclab: parse the whole line (getopt-style: short options may be bundled
//! and take attached values, long options may be written `--opt=value`, a lone `!` inverts the next
//! option), then build the rule and check it (an extension's required options, conflicts), then apply it to
//! a copy of the table that replaces the real one only if the "kernel" accepts it — so a refused line
//! changes nothing, exactly as iptables' whole-table replacement behaves.
//!
//! Errors and exit codes are iptables': 2 for a parameter problem (printed as `iptables v1.8.9 (legacy):
//! MESSAGE` then the `Try \`iptables -h'` line, or `Bad argument \`X'`), 1 for what libiptc refuses
//! (`iptables: No chain/target/match by that name.`), 3 for a table that cannot be initialised — here every
//! table but `mangle`, with a message saying so.
//!
//! Extensions (as `libxt_*.c` parse them): matches `tcp`, `udp`, `icmp`, `multiport`, `length`,
//! `connbytes`, `tos`, `dscp`, `mark`, `connmark`, `state`, `conntrack --ctstate`; targets `ACCEPT`, `DROP`,
//! `RETURN`, user chains (`-j`, `-g`), `MARK`, `CONNMARK`, `CLASSIFY`, `DSCP`, `TOS`.

use crate::Output;
use std::collections::BTreeMap;
use tclab_core::netfilter::conntrack::{
    STATE_ESTABLISHED, STATE_INVALID, STATE_NEW, STATE_RELATED, STATE_UNTRACKED,
};
use tclab_core::netfilter::{
    AddrMatch, Chain, ConnbytesDir, ConnbytesMode, ConnmarkOp, Counters, Hook, IfaceMatch, IpPart,
    Match, MultiportKind, Policy, PortRange, Rule, Table, Target, TcpFlags,
};
use tclab_core::Engine;

pub const VERSION: &str = "iptables v1.8.9 (legacy)";
const TRY: &str = "Try `iptables -h' or 'iptables --help' for more information.\n";

/// A refused line: what iptables prints on stderr and its exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IptError {
    pub code: i32,
    pub msg: String,
}

/// `xtables_error(PARAMETER_PROBLEM, …)`: exit 2, the version prefix and the "Try" line.
fn param(msg: impl Into<String>) -> IptError {
    IptError {
        code: 2,
        msg: format!("{VERSION}: {}\n{TRY}", msg.into()),
    }
}

/// `Bad argument` is printed without the version prefix.
fn bad_argument(arg: &str) -> IptError {
    IptError {
        code: 2,
        msg: format!("Bad argument `{arg}'\n{TRY}"),
    }
}

type R<T> = Result<T, IptError>;

/// Parsed `-s`/`-d`: (address, mask) pairs and the inversion.
type Addrs = (Vec<(u32, u32)>, bool);

mod ext;
mod print;
pub(crate) mod values;

use ext::*;
use print::*;
pub use print::{list_rules, save_rule};
pub use values::strtoui;
use values::*;

// ---------------------------------------------------------------------------------------------------
// The command line

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Append,
    Check,
    Delete,
    Insert,
    Replace,
    List,
    ListRules,
    Flush,
    Zero,
    NewChain,
    DeleteChain,
    Rename,
    Policy,
}

impl Cmd {
    fn letter(self) -> char {
        match self {
            Cmd::Append => 'A',
            Cmd::Check => 'C',
            Cmd::Delete => 'D',
            Cmd::Insert => 'I',
            Cmd::Replace => 'R',
            Cmd::List => 'L',
            Cmd::ListRules => 'S',
            Cmd::Flush => 'F',
            Cmd::Zero => 'Z',
            Cmd::NewChain => 'N',
            Cmd::DeleteChain => 'X',
            Cmd::Rename => 'E',
            Cmd::Policy => 'P',
        }
    }
    fn takes_rule(self) -> bool {
        matches!(
            self,
            Cmd::Append | Cmd::Check | Cmd::Delete | Cmd::Insert | Cmd::Replace
        )
    }
}

/// Everything one command line says, after parsing.
struct Line {
    table: String,
    cmd: Option<Cmd>,
    chain: Option<String>,
    rulenum: Option<usize>,
    /// `-E`'s new name or `-P`'s policy.
    arg2: Option<String>,
    numeric: bool,
    verbose: bool,
    exact: bool,
    line_numbers: bool,
    /// `-s`/`-d` as given; resolved after the whole line is read, as iptables resolves hosts last.
    src_raw: Option<(String, bool)>,
    dst_raw: Option<(String, bool)>,
    src: Option<(Vec<(u32, u32)>, bool)>,
    dst: Option<(Vec<(u32, u32)>, bool)>,
    iniface: Option<IfaceMatch>,
    outiface: Option<IfaceMatch>,
    proto: Option<(u8, bool)>,
    exts: Vec<Ext>,
    /// Index of the target in `exts`, `Some` once `-j`/`-g` was seen.
    target: Option<usize>,
    jump: Option<(String, bool)>,
    counters: Option<Counters>,
    /// The first rule option seen, for "Illegal option with this command".
    rule_opt: Option<String>,
    version: bool,
    help: bool,
}

/// Short options that take a value, and those that take none.
fn short_takes_value(c: char) -> Option<bool> {
    Some(match c {
        'A' | 'C' | 'D' | 'R' | 'I' | 'N' | 'E' | 'P' | 'p' | 's' | 'd' | 'i' | 'o' | 'j' | 'g'
        | 'm' | 't' | 'c' | 'M' => true,
        'L' | 'S' | 'F' | 'Z' | 'X' | 'V' | 'h' | 'n' | 'v' | 'x' | 'f' | '4' | '6' | 'w' | 'W' => {
            false
        }
        _ => return None,
    })
}

fn long_to_short(name: &str) -> Option<char> {
    Some(match name {
        "append" => 'A',
        "check" => 'C',
        "delete" => 'D',
        "insert" => 'I',
        "replace" => 'R',
        "list" => 'L',
        "list-rules" => 'S',
        "flush" => 'F',
        "zero" => 'Z',
        "new-chain" | "new" => 'N',
        "delete-chain" => 'X',
        "rename-chain" => 'E',
        "policy" => 'P',
        "protocol" => 'p',
        "source" | "src" => 's',
        "destination" | "dst" => 'd',
        "in-interface" => 'i',
        "out-interface" => 'o',
        "jump" => 'j',
        "goto" => 'g',
        "match" => 'm',
        "numeric" => 'n',
        "verbose" => 'v',
        "exact" => 'x',
        "table" => 't',
        "version" => 'V',
        "help" => 'h',
        "fragment" => 'f',
        "wait" => 'w',
        "wait-interval" => 'W',
        "set-counters" => 'c',
        "modprobe" => 'M',
        "ipv4" => '4',
        "ipv6" => '6',
        _ => return None,
    })
}

fn check_chain_name(name: &str) -> R<()> {
    if name.starts_with('-') {
        return Err(param("chain name not allowed to start with `-'"));
    }
    if name.len() >= 29 {
        return Err(param(format!(
            "chain name `{name}' too long (must be under 29 chars)"
        )));
    }
    if name.is_empty() || name.contains(|c: char| c.is_whitespace()) || name == "!" {
        return Err(param(format!("Invalid chain name `{name}'")));
    }
    if is_target_name(name) {
        return Err(param("chain name may not clash with target name"));
    }
    Ok(())
}

struct Parser<'a> {
    argv: &'a [String],
    i: usize,
    invert: bool,
    line: Line,
    table: &'a Table,
}

impl<'a> Parser<'a> {
    fn new(argv: &'a [String], table: &'a Table) -> Parser<'a> {
        Parser {
            argv,
            i: 0,
            invert: false,
            table,
            line: Line {
                table: "filter".into(),
                cmd: None,
                chain: None,
                rulenum: None,
                arg2: None,
                numeric: false,
                verbose: false,
                exact: false,
                line_numbers: false,
                src_raw: None,
                dst_raw: None,
                src: None,
                dst: None,
                iniface: None,
                outiface: None,
                proto: None,
                exts: Vec::new(),
                target: None,
                jump: None,
                counters: None,
                rule_opt: None,
                version: false,
                help: false,
            },
        }
    }

    /// The next argv word that is not an option (`xs_has_arg`): a chain name, a rule number.
    fn optional_arg(&mut self) -> Option<String> {
        let a = self.argv.get(self.i)?;
        if a.starts_with('-') || a.starts_with('!') {
            return None;
        }
        self.i += 1;
        Some(a.clone())
    }

    fn rulenum(s: &str) -> R<usize> {
        match strtoui(s, u32::MAX as u64) {
            Some(n) if n >= 1 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(n as usize),
            _ => Err(param(format!("Invalid rule number `{s}'"))),
        }
    }

    fn set_cmd(&mut self, c: Cmd) -> R<()> {
        if let Some(old) = self.line.cmd {
            return Err(param(format!(
                "Cannot use -{} with -{}",
                c.letter(),
                old.letter()
            )));
        }
        self.line.cmd = Some(c);
        Ok(())
    }

    fn take_invert(&mut self, what: &str, allowed: bool) -> R<bool> {
        let inv = std::mem::take(&mut self.invert);
        if inv && !allowed {
            return Err(param(format!("cannot have ! before {what}")));
        }
        Ok(inv)
    }

    fn parse(mut self) -> R<Line> {
        while self.i < self.argv.len() {
            let arg = self.argv[self.i].clone();
            self.i += 1;
            if arg == "!" {
                if self.invert {
                    return Err(param("multiple consecutive ! not allowed"));
                }
                self.invert = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--").filter(|l| !l.is_empty()) {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                if name == "line-numbers" {
                    self.line.line_numbers = true;
                    continue;
                }
                if let Some(c) = long_to_short(name) {
                    let value = if short_takes_value(c) == Some(true) {
                        match inline {
                            Some(v) => Some(v),
                            None => Some(self.value(&format!("--{name}"))?),
                        }
                    } else {
                        None
                    };
                    self.short(c, value)?;
                    continue;
                }
                self.ext_option(name, inline)?;
                continue;
            }
            if arg.len() > 1 && arg.starts_with('-') {
                let chars: Vec<char> = arg[1..].chars().collect();
                let mut k = 0;
                while k < chars.len() {
                    let c = chars[k];
                    match short_takes_value(c) {
                        None => return Err(param(format!("unknown option \"{arg}\""))),
                        Some(true) => {
                            let rest: String = chars[k + 1..].iter().collect();
                            let v = if rest.is_empty() {
                                self.value(&format!("-{c}"))?
                            } else {
                                rest
                            };
                            self.short(c, Some(v))?;
                            break;
                        }
                        Some(false) => {
                            self.short(c, None)?;
                            k += 1;
                        }
                    }
                }
                continue;
            }
            return Err(bad_argument(&arg));
        }
        let resolve = |raw: &Option<(String, bool)>| -> R<Option<Addrs>> {
            match raw {
                None => Ok(None),
                Some((s, inv)) => Ok(Some((parse_addrs(s)?, *inv))),
            }
        };
        self.line.src = resolve(&self.line.src_raw)?;
        self.line.dst = resolve(&self.line.dst_raw)?;
        Ok(self.line)
    }

    fn value(&mut self, opt: &str) -> R<String> {
        match self.argv.get(self.i) {
            Some(v) => {
                self.i += 1;
                Ok(v.clone())
            }
            None => Err(param(format!("option \"{opt}\" requires an argument"))),
        }
    }

    fn rule_opt(&mut self, c: char) {
        if self.line.rule_opt.is_none() {
            self.line.rule_opt = Some(format!("-{c}"));
        }
    }

    fn short(&mut self, c: char, v: Option<String>) -> R<()> {
        let v = v.unwrap_or_default();
        match c {
            'A' | 'C' | 'D' | 'I' | 'R' => {
                self.take_invert(&format!("-{c}"), false)?;
                let cmd = match c {
                    'A' => Cmd::Append,
                    'C' => Cmd::Check,
                    'D' => Cmd::Delete,
                    'I' => Cmd::Insert,
                    _ => Cmd::Replace,
                };
                self.set_cmd(cmd)?;
                self.line.chain = Some(v);
                match cmd {
                    Cmd::Delete | Cmd::Insert => {
                        if let Some(n) = self.optional_arg() {
                            self.line.rulenum = Some(Self::rulenum(&n)?);
                        }
                    }
                    Cmd::Replace => {
                        let n = self
                            .optional_arg()
                            .ok_or_else(|| param("-R requires a rule number"))?;
                        self.line.rulenum = Some(Self::rulenum(&n)?);
                    }
                    _ => {}
                }
            }
            'L' | 'S' | 'F' | 'Z' | 'X' => {
                self.take_invert(&format!("-{c}"), false)?;
                let cmd = match c {
                    'L' => Cmd::List,
                    'S' => Cmd::ListRules,
                    'F' => Cmd::Flush,
                    'Z' => Cmd::Zero,
                    _ => Cmd::DeleteChain,
                };
                self.set_cmd(cmd)?;
                self.line.chain = self.optional_arg();
                if self.line.chain.is_some()
                    && matches!(cmd, Cmd::ListRules | Cmd::Zero | Cmd::List)
                {
                    if let Some(n) = self.optional_arg() {
                        self.line.rulenum = Some(Self::rulenum(&n)?);
                    }
                }
            }
            'N' => {
                self.take_invert("-N", false)?;
                self.set_cmd(Cmd::NewChain)?;
                check_chain_name(&v)?;
                self.line.chain = Some(v);
            }
            'E' => {
                self.set_cmd(Cmd::Rename)?;
                self.line.chain = Some(v);
                let new = self
                    .optional_arg()
                    .ok_or_else(|| param("-E requires old-chain-name and new-chain-name"))?;
                check_chain_name(&new)?;
                self.line.arg2 = Some(new);
            }
            'P' => {
                self.set_cmd(Cmd::Policy)?;
                self.line.chain = Some(v);
                let pol = self
                    .optional_arg()
                    .ok_or_else(|| param("-P requires a chain and a policy"))?;
                self.line.arg2 = Some(pol);
            }
            'p' => {
                let inv = self.take_invert("-p", true)?;
                if self.line.proto.is_some() {
                    return Err(param("multiple -p flags not allowed"));
                }
                self.rule_opt(c);
                self.line.proto = Some((parse_proto(&v)?, inv));
            }
            's' | 'd' => {
                let inv = self.take_invert(&format!("-{c}"), true)?;
                let slot = if c == 's' {
                    &mut self.line.src_raw
                } else {
                    &mut self.line.dst_raw
                };
                if slot.is_some() {
                    return Err(param(format!("multiple -{c} flags not allowed")));
                }
                *slot = Some((v, inv));
                self.rule_opt(c);
            }
            'i' | 'o' => {
                let inv = self.take_invert(&format!("-{c}"), true)?;
                let taken = if c == 'i' {
                    self.line.iniface.is_some()
                } else {
                    self.line.outiface.is_some()
                };
                if taken {
                    return Err(param(format!("multiple -{c} flags not allowed")));
                }
                if v.len() > 15 {
                    return Err(param(format!(
                        "interface name `{v}' must be shorter than IFNAMSIZ (15)"
                    )));
                }
                self.rule_opt(c);
                let m = IfaceMatch {
                    name: v,
                    invert: inv,
                };
                if c == 'i' {
                    self.line.iniface = Some(m);
                } else {
                    self.line.outiface = Some(m);
                }
            }
            'j' | 'g' => {
                self.take_invert(&format!("-{c}"), false)?;
                if self.line.jump.is_some() {
                    return Err(param(format!("multiple -{c} flags not allowed")));
                }
                self.rule_opt(c);
                let goto = c == 'g';
                if self.table.user.contains_key(&v) {
                    self.line.jump = Some((v, goto));
                } else if let Some(defs) = target_opts(&v).filter(|_| !goto) {
                    self.line.exts.push(Ext::new(&v, defs));
                    self.line.target = Some(self.line.exts.len() - 1);
                    self.line.jump = Some((v, false));
                } else if OTHER_TARGETS.contains(&v.as_str()) {
                    return Err(param(format!("target `{v}' is not supported by tclab")));
                } else {
                    return Err(param(format!(
                        "Couldn't load target `{v}':No such file or directory\n"
                    )));
                }
            }
            'm' => {
                self.take_invert("-m", false)?;
                self.rule_opt(c);
                self.load_match(&v)?;
            }
            't' => {
                self.take_invert("-t", false)?;
                self.line.table = v;
            }
            'c' => {
                let p =
                    strtoui(&v, u64::MAX).ok_or_else(|| param("-c packet counter not numeric"))?;
                let b = self.value("-c")?;
                let b =
                    strtoui(&b, u64::MAX).ok_or_else(|| param("-c byte counter not numeric"))?;
                self.line.counters = Some(Counters {
                    packets: p,
                    bytes: b,
                });
            }
            'M' => {}
            'n' => self.line.numeric = true,
            'v' => self.line.verbose = true,
            'x' => self.line.exact = true,
            'V' => self.line.version = true,
            'h' => self.line.help = true,
            'f' => return Err(param("-f (fragments) is not supported by tclab")),
            '4' => {}
            '6' => return Err(param("This is the IPv4 version of iptables.")),
            'w' | 'W' => {
                // The xtables lock: nothing to wait for. An optional numeric value may follow.
                if self
                    .argv
                    .get(self.i)
                    .is_some_and(|a| a.bytes().all(|b| b.is_ascii_digit()) && !a.is_empty())
                {
                    self.i += 1;
                }
            }
            _ => return Err(param(format!("unknown option \"-{c}\""))),
        }
        Ok(())
    }

    fn load_match(&mut self, name: &str) -> R<()> {
        match match_opts(name) {
            Some(defs) => {
                self.line.exts.push(Ext::new(name, defs));
                Ok(())
            }
            None if OTHER_MATCHES.contains(&name) => {
                Err(param(format!("match `{name}' is not supported by tclab")))
            }
            None => Err(param(format!(
                "Couldn't load match `{name}':No such file or directory\n"
            ))),
        }
    }

    /// An option that is not iptables' own: it belongs to the most recently loaded extension that knows
    /// it (the target's options are looked up first), or to the implicit match of `-p tcp|udp|icmp`.
    fn ext_option(&mut self, name: &str, inline: Option<String>) -> R<()> {
        let mut found = self.find_ext(name);
        if found.is_none() {
            if let Some((p, false)) = self.line.proto {
                let implicit = match p {
                    6 => Some("tcp"),
                    17 => Some("udp"),
                    1 => Some("icmp"),
                    _ => None,
                };
                if let Some(m) = implicit {
                    let already = self.line.exts.iter().any(|e| e.name == m);
                    if !already && match_opts(m).is_some_and(|d| d.iter().any(|x| x.name == name)) {
                        self.load_match(m)?;
                        found = self.find_ext(name);
                    }
                }
            }
        }
        let Some(idx) = found else {
            self.invert = false;
            return Err(param(format!("unknown option \"--{name}\"")));
        };
        let def = self.line.exts[idx].def(name).expect("found above");
        let inv = self.take_invert(&format!("--{name}"), def.invertible)?;
        let mut vals = Vec::new();
        let n = match def.arity {
            Zero => 0,
            One => 1,
            Two => 2,
        };
        if let Some(v) = inline {
            vals.push(v);
        }
        while vals.len() < n {
            match self.argv.get(self.i) {
                // `--tcp-flags` takes its second word from argv unless it looks like an option.
                Some(v) if vals.is_empty() || !(v.starts_with('-') || v.starts_with('!')) => {
                    vals.push(v.clone());
                    self.i += 1;
                }
                _ => break,
            }
        }
        if vals.len() < n && def.arity == One {
            return Err(param(format!("option \"--{name}\" requires an argument")));
        }
        self.line.exts[idx].parse(def, &vals, inv)
    }

    fn find_ext(&self, name: &str) -> Option<usize> {
        if let Some(t) = self.line.target {
            if self.line.exts[t].def(name).is_some() {
                return Some(t);
            }
        }
        self.line
            .exts
            .iter()
            .enumerate()
            .rev()
            .find(|(i, e)| Some(*i) != self.line.target && e.def(name).is_some())
            .map(|(i, _)| i)
    }
}

/// Build the rules a line describes (one per source × destination address).
fn build_rules(line: &Line) -> R<Vec<Rule>> {
    let mut matches = Vec::new();
    let mut target = Target::None;
    for (i, e) in line.exts.iter().enumerate() {
        if Some(i) == line.target {
            target = e.to_target()?;
        } else {
            matches.push(e.to_match(line.proto)?);
        }
    }
    if line.target.is_none() {
        if let Some((c, goto)) = &line.jump {
            target = if *goto {
                Target::Goto(c.clone())
            } else {
                Target::Jump(c.clone())
            };
        }
    }
    let addrs = |a: &Option<(Vec<(u32, u32)>, bool)>| -> Vec<Option<AddrMatch>> {
        match a {
            None => vec![None],
            Some((list, inv)) => list
                .iter()
                // `0/0` is no criterion at all (iptables-save omits it).
                .map(|(addr, mask)| {
                    (*mask != 0 || *inv).then_some(AddrMatch {
                        addr: *addr,
                        mask: *mask,
                        invert: *inv,
                    })
                })
                .collect(),
        }
    };
    let mut out = Vec::new();
    for s in addrs(&line.src) {
        for d in addrs(&line.dst) {
            out.push(Rule {
                ip: IpPart {
                    src: s,
                    dst: d,
                    iniface: line.iniface.clone(),
                    outiface: line.outiface.clone(),
                    proto: line.proto.filter(|(p, inv)| *p != 0 || *inv),
                },
                matches: matches.clone(),
                target: target.clone(),
                counters: line.counters.unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

const HELP: &str = "iptables v1.8.9 (legacy)

Usage: iptables -t mangle -[ACD] chain rule-specification [options]
       iptables -t mangle -I chain [rulenum] rule-specification [options]
       iptables -t mangle -R chain rulenum rule-specification [options]
       iptables -t mangle -D chain rulenum [options]
       iptables -t mangle -[LS] [chain [rulenum]] [options]
       iptables -t mangle -[FZ] [chain] [options]
       iptables -t mangle -[NX] chain
       iptables -t mangle -E old-chain-name new-chain-name
       iptables -t mangle -P chain target [options]
       iptables -h (print this help information)

tclab models the mangle table only: matches tcp, udp, icmp, multiport, length, connbytes, tos, dscp,
mark, connmark, state, conntrack --ctstate; targets ACCEPT, DROP, RETURN, MARK, CONNMARK, CLASSIFY,
DSCP, TOS and jumps to user chains.
";

/// Run one iptables command line (without the leading `iptables`) against the engine's netfilter state.
pub fn run(engine: &mut Engine, argv: &[String]) -> Output {
    let mut out = Output::default();
    match run_inner(engine, argv, &mut out) {
        Ok(()) => {}
        Err(e) => {
            out.stderr.push_str(&e.msg);
            out.code = e.code;
        }
    }
    out
}

/// Whether a successful line changed the policy (and belongs in the journal).
pub fn is_modifying(argv: &[String]) -> bool {
    let table = Table::default();
    match Parser::new(argv, &table).parse() {
        Ok(l) => !matches!(l.cmd, None | Some(Cmd::List | Cmd::ListRules | Cmd::Check)),
        // Chains named by -j may not exist in an empty table: classify by the command letters instead.
        Err(_) => argv.iter().any(|a| {
            let a = a.as_str();
            matches!(
                a,
                "-A" | "-D"
                    | "-I"
                    | "-R"
                    | "-F"
                    | "-Z"
                    | "-N"
                    | "-X"
                    | "-E"
                    | "-P"
                    | "--append"
                    | "--delete"
                    | "--insert"
                    | "--replace"
                    | "--flush"
                    | "--zero"
                    | "--new-chain"
                    | "--delete-chain"
                    | "--rename-chain"
                    | "--policy"
            )
        }),
    }
}

fn run_inner(engine: &mut Engine, argv: &[String], out: &mut Output) -> R<()> {
    // Another table is refused before its rule is parsed: a nat rule's MASQUERADE is that table's
    // business, not a target tclab lacks.
    let named_table = argv.iter().enumerate().find_map(|(i, a)| match a.as_str() {
        "-t" | "--table" => argv.get(i + 1).cloned(),
        _ => a.strip_prefix("--table=").map(str::to_string),
    });
    if let Some(t @ ("filter" | "nat" | "raw" | "security")) = named_table.as_deref() {
        return Err(IptError {
            code: 3,
            msg: format!(
                "{VERSION}: can't initialize iptables table `{t}': tclab models the mangle table only (use -t mangle)\n"
            ),
        });
    }
    let table = &engine.netfilter().mangle;
    let line = Parser::new(argv, table).parse()?;
    if line.version {
        out.stdout = format!("{VERSION}\n");
        return Ok(());
    }
    if line.help {
        out.stdout = HELP.to_string();
        return Ok(());
    }
    match line.table.as_str() {
        "mangle" => {}
        t @ ("filter" | "nat" | "raw" | "security") => {
            return Err(IptError {
                code: 3,
                msg: format!(
                    "{VERSION}: can't initialize iptables table `{t}': tclab models the mangle table only (use -t mangle)\n"
                ),
            })
        }
        t => {
            return Err(IptError {
                code: 3,
                msg: format!(
                    "{VERSION}: can't initialize iptables table `{t}': Table does not exist (do you need to insmod?)\nPerhaps iptables or your kernel needs to be upgraded.\n"
                ),
            })
        }
    }
    let Some(cmd) = line.cmd else {
        return Err(param("no command specified"));
    };
    if !cmd.takes_rule() && !(cmd == Cmd::Delete) {
        if let Some(o) = &line.rule_opt {
            return Err(param(format!("Illegal option `{o}' with this command\n")));
        }
    }
    let chain = line.chain.clone().unwrap_or_default();
    let delete_by_num = cmd == Cmd::Delete && line.rulenum.is_some();
    if delete_by_num {
        if let Some(o) = &line.rule_opt {
            return Err(param(format!("Illegal option `{o}' with this command\n")));
        }
    }
    // `-i` makes no sense where there is no input device, `-o` where there is no output device.
    if cmd.takes_rule() && !delete_by_num {
        if let Some(h) = Hook::from_chain(&chain) {
            if line.iniface.is_some() && matches!(h, Hook::LocalOut | Hook::PostRouting) {
                return Err(param(format!("Can't use -i with {chain}\n")));
            }
            if line.outiface.is_some() && matches!(h, Hook::PreRouting | Hook::LocalIn) {
                return Err(param(format!("Can't use -o with {chain}\n")));
            }
        }
    }
    let rules = if cmd.takes_rule() && !delete_by_num {
        build_rules(&line)?
    } else {
        Vec::new()
    };
    let nf = engine.netfilter_mut();
    let lib = |e: tclab_core::netfilter::NfError| IptError {
        code: 1,
        msg: format!("{e}\n"),
    };
    match cmd {
        Cmd::List => {
            out.stdout = list(&nf.mangle, line.chain.as_deref(), &line).map_err(lib)?;
            return Ok(());
        }
        Cmd::ListRules => {
            out.stdout =
                list_rules(&nf.mangle, line.chain.as_deref(), line.rulenum).map_err(lib)?;
            return Ok(());
        }
        Cmd::Check => {
            for r in &rules {
                nf.mangle.check(&chain, r).map_err(lib)?;
            }
            return Ok(());
        }
        _ => {}
    }
    // Apply to a copy; the copy replaces the table only if every step was accepted.
    let mut t = nf.mangle.clone();
    match cmd {
        Cmd::Append => {
            for r in rules {
                t.append(&chain, r).map_err(lib)?;
            }
        }
        Cmd::Insert => {
            let n = line.rulenum.unwrap_or(1);
            for (k, r) in rules.into_iter().enumerate() {
                t.insert(&chain, n + k, r).map_err(lib)?;
            }
        }
        Cmd::Replace => {
            if rules.len() != 1 {
                return Err(param("-R requires a single source and destination"));
            }
            let r = rules.into_iter().next().expect("one rule");
            t.replace(&chain, line.rulenum.unwrap_or(0), r)
                .map_err(lib)?;
        }
        Cmd::Delete => match line.rulenum {
            Some(n) => t.delete_num(&chain, n).map_err(lib)?,
            None => {
                for r in &rules {
                    t.delete_rule(&chain, r).map_err(lib)?;
                }
            }
        },
        Cmd::Flush => t.flush(line.chain.as_deref()).map_err(lib)?,
        Cmd::Zero => t.zero(line.chain.as_deref(), line.rulenum).map_err(lib)?,
        Cmd::NewChain => t.new_chain(&chain).map_err(lib)?,
        Cmd::DeleteChain => t.delete_chain(line.chain.as_deref()).map_err(lib)?,
        Cmd::Rename => t
            .rename_chain(&chain, line.arg2.as_deref().unwrap_or(""))
            .map_err(lib)?,
        Cmd::Policy => t
            .set_policy(&chain, line.arg2.as_deref().unwrap_or(""))
            .map_err(lib)?,
        Cmd::List | Cmd::ListRules | Cmd::Check => unreachable!(),
    }
    if t.has_reachable_loop() {
        return Err(lib(tclab_core::netfilter::NfError::LOOP));
    }
    nf.mangle = t;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn strtoui_bases() {
        assert_eq!(
            strtoui("010", 255),
            Some(8),
            "leading zero is octal, as strtoul base 0"
        );
        assert_eq!(strtoui("0x1F", 255), Some(31));
        assert_eq!(strtoui("256", 255), None, "out of range");
        assert_eq!(strtoui("-1", 255), None, "no sign");
        assert_eq!(strtoui("", 255), None);
    }

    #[test]
    fn numbers_with_suffixes() {
        assert_eq!(num(99999, false, true), "99999 ");
        assert_eq!(num(109_000_000, false, false), "109M ");
        assert_eq!(num(74107, false, false), "74107 ");
        assert_eq!(num(0, true, true), "       0 ");
    }

    #[test]
    fn bundled_short_options_and_inline_values() {
        let mut e = Engine::new();
        let o = run(&mut e, &argv("-tmangle -nvL"));
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o
            .stdout
            .starts_with("Chain PREROUTING (policy ACCEPT 0 packets, 0 bytes)"));
        let o = run(
            &mut e,
            &argv("--table=mangle --append=POSTROUTING --protocol=tcp --dport=22 -j ACCEPT"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let o = run(&mut e, &argv("-t mangle -S POSTROUTING"));
        assert_eq!(
            o.stdout,
            "-P POSTROUTING ACCEPT\n-A POSTROUTING -p tcp -m tcp --dport 22 -j ACCEPT\n"
        );
    }
}
