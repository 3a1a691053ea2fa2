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

// ---------------------------------------------------------------------------------------------------
// Numbers, addresses, names

/// `xtables_strtoui` with base 0: decimal, `0x` hexadecimal, leading-zero octal; no sign.
pub fn strtoui(s: &str, max: u64) -> Option<u64> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() {
            return None;
        }
        u64::from_str_radix(h, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<u64>().ok()?
    };
    (v <= max).then_some(v)
}

fn parse_ipv4(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut a = 0u32;
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 3 {
            return None;
        }
        let v: u32 = p.parse().ok()?;
        if v > 255 {
            return None;
        }
        a |= v << (24 - 8 * i);
    }
    Some(a)
}

fn dotted(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn prefix_len(mask: u32) -> Option<u32> {
    let n = mask.leading_ones();
    (mask.checked_shl(n).unwrap_or(0) == 0).then_some(n)
}

/// `-s`/`-d`: a comma-separated list of `ADDR[/BITS|/MASK]`.
fn parse_addrs(s: &str) -> R<Vec<(u32, u32)>> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let (a, m) = match item.split_once('/') {
            Some((a, m)) => (a, Some(m)),
            None => (item, None),
        };
        let mask = match m {
            None => u32::MAX,
            Some(m) if m.contains('.') => {
                parse_ipv4(m).ok_or_else(|| param(format!("invalid mask `{m}' specified")))?
            }
            Some(m) => match strtoui(m, 32) {
                Some(0) => 0,
                Some(n) => u32::MAX << (32 - n),
                None => return Err(param(format!("invalid mask `{m}' specified"))),
            },
        };
        let addr = parse_ipv4(a).ok_or_else(|| param(format!("host/network `{a}' not found")))?;
        out.push((addr & mask, mask));
    }
    Ok(out)
}

const PROTOS: &[(&str, u8)] = &[
    ("all", 0),
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("tcp", 6),
    ("egp", 8),
    ("udp", 17),
    ("ipv6", 41),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("mh", 135),
    ("udplite", 136),
    ("dccp", 33),
];

fn parse_proto(s: &str) -> R<u8> {
    let lower = s.to_ascii_lowercase();
    if let Some((_, n)) = PROTOS.iter().find(|(n, _)| *n == lower) {
        return Ok(*n);
    }
    strtoui(s, 255)
        .map(|v| v as u8)
        .ok_or_else(|| param(format!("unknown protocol \"{s}\" specified")))
}

/// The name `/etc/protocols` gives a number, as iptables-save and `-L` without `-n` print it.
fn proto_name(p: u8) -> Option<&'static str> {
    match p {
        58 => Some("ipv6-icmp"),
        _ => PROTOS.iter().find(|(_, n)| *n == p).map(|(s, _)| *s),
    }
}

const SERVICES: &[(&str, u16)] = &[
    ("tcpmux", 1),
    ("echo", 7),
    ("discard", 9),
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("http", 80),
    ("www", 80),
    ("kerberos", 88),
    ("pop3", 110),
    ("sunrpc", 111),
    ("auth", 113),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("imap2", 143),
    ("imap", 143),
    ("snmp", 161),
    ("ldap", 389),
    ("https", 443),
    ("microsoft-ds", 445),
    ("submission", 587),
    ("ldaps", 636),
    ("imaps", 993),
    ("pop3s", 995),
    ("openvpn", 1194),
    ("cisco-sccp", 2000),
    ("nfs", 2049),
    ("mysql", 3306),
    ("sip", 5060),
    ("postgresql", 5432),
    ("x11", 6000),
    ("http-alt", 8080),
];

fn parse_port(s: &str) -> R<u16> {
    if let Some((_, p)) = SERVICES.iter().find(|(n, _)| *n == s) {
        return Ok(*p);
    }
    strtoui(s, 65535)
        .map(|v| v as u16)
        .ok_or_else(|| param(format!("invalid port/service `{s}' specified")))
}

fn port_text(p: u16, numeric: bool) -> String {
    if !numeric {
        if let Some((n, _)) = SERVICES.iter().find(|(_, v)| *v == p) {
            return n.to_string();
        }
    }
    p.to_string()
}

/// `--sport 1000:2000`, `:100`, `100:`.
fn parse_port_range(s: &str) -> R<(u16, u16)> {
    match s.split_once(':') {
        None => parse_port(s).map(|p| (p, p)),
        Some((a, b)) => {
            let lo = if a.is_empty() { 0 } else { parse_port(a)? };
            let hi = if b.is_empty() { 65535 } else { parse_port(b)? };
            if lo > hi {
                return Err(param("invalid portrange (min > max)"));
            }
            Ok((lo, hi))
        }
    }
}

const TCP_FLAGS: &[(&str, u8)] = &[
    ("FIN", 0x01),
    ("SYN", 0x02),
    ("RST", 0x04),
    ("PSH", 0x08),
    ("ACK", 0x10),
    ("URG", 0x20),
    ("ALL", 0x3f),
    ("NONE", 0),
];

fn parse_tcp_flags(s: &str) -> R<u8> {
    let mut v = 0;
    for f in s.split(',') {
        let up = f.to_ascii_uppercase();
        match TCP_FLAGS.iter().find(|(n, _)| *n == up) {
            Some((_, b)) => v |= b,
            None => return Err(param(format!("Unknown TCP flag `{f}'"))),
        }
    }
    Ok(v)
}

fn tcp_flags_text(mut f: u8) -> String {
    if f == 0 {
        return "NONE".into();
    }
    let mut names = Vec::new();
    for (n, b) in &TCP_FLAGS[..6] {
        if f & b != 0 {
            names.push(*n);
            f &= !b;
        }
    }
    names.join(",")
}

const DSCP_CLASSES: &[(&str, u8)] = &[
    ("CS0", 0),
    ("CS1", 8),
    ("CS2", 16),
    ("CS3", 24),
    ("CS4", 32),
    ("CS5", 40),
    ("CS6", 48),
    ("CS7", 56),
    ("BE", 0),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("EF", 46),
];

fn parse_dscp_class(s: &str) -> R<u8> {
    let up = s.to_ascii_uppercase();
    DSCP_CLASSES
        .iter()
        .find(|(n, _)| *n == up)
        .map(|(_, v)| *v)
        .ok_or_else(|| param(format!("Invalid DSCP value `{s}'")))
}

const TOS_NAMES: &[(&str, u8)] = &[
    ("Minimize-Delay", 0x10),
    ("Maximize-Throughput", 0x08),
    ("Maximize-Reliability", 0x04),
    ("Minimize-Cost", 0x02),
    ("Normal-Service", 0x00),
];

/// `xtables_parse_tos`-like: `VALUE[/MASK]` (mask 0xff by default) or a symbolic name (mask 0x3f).
fn parse_tos(s: &str, ext: &str, opt: &str) -> R<(u8, u8)> {
    if let Some((_, v)) = TOS_NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Ok((*v, 0x3f));
    }
    let bad = || {
        param(format!(
            "{ext}: bad value for option \"--{opt}\", or out of range (0-255).\n"
        ))
    };
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let v = strtoui(v, 255).ok_or_else(bad)? as u8;
    let m = match m {
        Some(m) => strtoui(m, 255).ok_or_else(bad)? as u8,
        None => 0xff,
    };
    Ok((v, m))
}

/// `VALUE[/MASK]` for marks (`xtables_parse_mark_mask`).
fn parse_mark(s: &str, ext: &str, opt: &str) -> R<(u32, Option<u32>)> {
    let bad = || {
        param(format!(
            "{ext}: bad integer value for option \"--{opt}\", or out of range.\n"
        ))
    };
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let v = strtoui(v, u32::MAX as u64).ok_or_else(bad)? as u32;
    let m = match m {
        Some(m) => Some(strtoui(m, u32::MAX as u64).ok_or_else(bad)? as u32),
        None => None,
    };
    Ok((v, m))
}

fn parse_states(s: &str, ct: bool) -> R<u8> {
    let mut m = 0;
    for w in s.split(',') {
        m |= match w {
            "INVALID" => STATE_INVALID,
            "NEW" => STATE_NEW,
            "ESTABLISHED" => STATE_ESTABLISHED,
            "RELATED" => STATE_RELATED,
            "UNTRACKED" => STATE_UNTRACKED,
            // SNAT/DNAT: tclab does no NAT, so these bits never match.
            "SNAT" if ct => 0x40,
            "DNAT" if ct => 0x20,
            _ => {
                return Err(param(format!(
                    "Bad {} \"{w}\"",
                    if ct { "ctstate" } else { "state" }
                )))
            }
        };
    }
    Ok(m)
}

fn states_text(m: u8) -> String {
    let mut v = Vec::new();
    for (b, n) in [
        (STATE_INVALID, "INVALID"),
        (STATE_NEW, "NEW"),
        (STATE_RELATED, "RELATED"),
        (STATE_ESTABLISHED, "ESTABLISHED"),
        (STATE_UNTRACKED, "UNTRACKED"),
        (0x40, "SNAT"),
        (0x20, "DNAT"),
    ] {
        if m & b != 0 {
            v.push(n);
        }
    }
    v.join(",")
}

const ICMP_TYPES: &[(&str, u8, u8, u8)] = &[
    ("any", 0xff, 0, 0xff),
    ("echo-reply", 0, 0, 0xff),
    ("pong", 0, 0, 0xff),
    ("destination-unreachable", 3, 0, 0xff),
    ("network-unreachable", 3, 0, 0),
    ("host-unreachable", 3, 1, 1),
    ("protocol-unreachable", 3, 2, 2),
    ("port-unreachable", 3, 3, 3),
    ("fragmentation-needed", 3, 4, 4),
    ("source-quench", 4, 0, 0xff),
    ("redirect", 5, 0, 0xff),
    ("echo-request", 8, 0, 0xff),
    ("ping", 8, 0, 0xff),
    ("router-advertisement", 9, 0, 0xff),
    ("router-solicitation", 10, 0, 0xff),
    ("time-exceeded", 11, 0, 0xff),
    ("ttl-exceeded", 11, 0, 0xff),
    ("parameter-problem", 12, 0, 0xff),
    ("timestamp-request", 13, 0, 0xff),
    ("timestamp-reply", 14, 0, 0xff),
    ("address-mask-request", 17, 0, 0xff),
    ("address-mask-reply", 18, 0, 0xff),
];

fn parse_icmp_type(s: &str) -> R<(u8, u8, u8)> {
    if let Some((_, t, a, b)) = ICMP_TYPES.iter().find(|(n, ..)| *n == s) {
        return Ok((*t, *a, *b));
    }
    let bad = || param(format!("Invalid ICMP type `{s}'\n"));
    match s.split_once('/') {
        Some((t, c)) => {
            let t = strtoui(t, 255).ok_or_else(bad)? as u8;
            let c = strtoui(c, 255).ok_or_else(bad)? as u8;
            Ok((t, c, c))
        }
        None => Ok((strtoui(s, 255).ok_or_else(bad)? as u8, 0, 0xff)),
    }
}

fn icmp_name(t: u8, lo: u8, hi: u8) -> Option<&'static str> {
    ICMP_TYPES
        .iter()
        .find(|(_, a, b, c)| *a == t && *b == lo && *c == hi)
        .map(|(n, ..)| *n)
}

// ---------------------------------------------------------------------------------------------------
// Extensions: their options, parsed values and the final check

/// How many values an option takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Zero,
    One,
    Two,
}

struct OptDef {
    name: &'static str,
    /// The canonical name the value is stored under (aliases share it).
    key: &'static str,
    arity: Arity,
    invertible: bool,
}

const fn o(name: &'static str, key: &'static str, arity: Arity, invertible: bool) -> OptDef {
    OptDef {
        name,
        key,
        arity,
        invertible,
    }
}

use Arity::{One, Two, Zero};

const TCP_OPTS: &[OptDef] = &[
    o("sport", "sport", One, true),
    o("source-port", "sport", One, true),
    o("dport", "dport", One, true),
    o("destination-port", "dport", One, true),
    o("tcp-flags", "tcp-flags", Two, true),
    o("syn", "syn", Zero, true),
    o("tcp-option", "tcp-option", One, true),
];
const UDP_OPTS: &[OptDef] = &[
    o("sport", "sport", One, true),
    o("source-port", "sport", One, true),
    o("dport", "dport", One, true),
    o("destination-port", "dport", One, true),
];
const ICMP_OPTS: &[OptDef] = &[o("icmp-type", "icmp-type", One, true)];
const MULTIPORT_OPTS: &[OptDef] = &[
    o("sports", "sports", One, true),
    o("source-ports", "sports", One, true),
    o("dports", "dports", One, true),
    o("destination-ports", "dports", One, true),
    o("ports", "ports", One, true),
];
const LENGTH_OPTS: &[OptDef] = &[o("length", "length", One, true)];
const COMMENT_OPTS: &[OptDef] = &[o("comment", "comment", One, false)];
const CONNBYTES_OPTS: &[OptDef] = &[
    o("connbytes", "connbytes", One, true),
    o("connbytes-dir", "connbytes-dir", One, false),
    o("connbytes-mode", "connbytes-mode", One, false),
];
const TOS_OPTS: &[OptDef] = &[o("tos", "tos", One, true)];
const DSCP_OPTS: &[OptDef] = &[
    o("dscp", "dscp", One, true),
    o("dscp-class", "dscp-class", One, true),
];
const MARK_OPTS: &[OptDef] = &[o("mark", "mark", One, true)];
const STATE_OPTS: &[OptDef] = &[o("state", "state", One, true)];
const CONNTRACK_OPTS: &[OptDef] = &[
    o("ctstate", "ctstate", One, true),
    o("ctproto", "unsupported", One, true),
    o("ctorigsrc", "unsupported", One, true),
    o("ctorigdst", "unsupported", One, true),
    o("ctreplsrc", "unsupported", One, true),
    o("ctrepldst", "unsupported", One, true),
    o("ctstatus", "unsupported", One, true),
    o("ctexpire", "unsupported", One, true),
    o("ctdir", "unsupported", One, false),
];
const MARK_TG_OPTS: &[OptDef] = &[
    o("set-mark", "set-mark", One, false),
    o("set-xmark", "set-xmark", One, false),
    o("and-mark", "and-mark", One, false),
    o("or-mark", "or-mark", One, false),
    o("xor-mark", "xor-mark", One, false),
];
const CONNMARK_TG_OPTS: &[OptDef] = &[
    o("set-mark", "set-mark", One, false),
    o("set-xmark", "set-xmark", One, false),
    o("and-mark", "and-mark", One, false),
    o("or-mark", "or-mark", One, false),
    o("xor-mark", "xor-mark", One, false),
    o("save-mark", "save-mark", Zero, false),
    o("restore-mark", "restore-mark", Zero, false),
    o("mask", "mask", One, false),
    o("nfmask", "nfmask", One, false),
    o("ctmask", "ctmask", One, false),
];
const CLASSIFY_OPTS: &[OptDef] = &[o("set-class", "set-class", One, false)];
const DSCP_TG_OPTS: &[OptDef] = &[
    o("set-dscp", "set-dscp", One, false),
    o("set-dscp-class", "set-dscp-class", One, false),
];
const TOS_TG_OPTS: &[OptDef] = &[
    o("set-tos", "set-tos", One, false),
    o("and-tos", "and-tos", One, false),
    o("or-tos", "or-tos", One, false),
    o("xor-tos", "xor-tos", One, false),
];
const NO_OPTS: &[OptDef] = &[];

fn match_opts(name: &str) -> Option<&'static [OptDef]> {
    Some(match name {
        "tcp" => TCP_OPTS,
        "udp" => UDP_OPTS,
        "icmp" => ICMP_OPTS,
        "multiport" => MULTIPORT_OPTS,
        "length" => LENGTH_OPTS,
        "comment" => COMMENT_OPTS,
        "connbytes" => CONNBYTES_OPTS,
        "tos" => TOS_OPTS,
        "dscp" => DSCP_OPTS,
        "mark" | "connmark" => MARK_OPTS,
        "state" => STATE_OPTS,
        "conntrack" => CONNTRACK_OPTS,
        _ => return None,
    })
}

fn target_opts(name: &str) -> Option<&'static [OptDef]> {
    Some(match name {
        "ACCEPT" | "DROP" | "RETURN" => NO_OPTS,
        "MARK" => MARK_TG_OPTS,
        "CONNMARK" => CONNMARK_TG_OPTS,
        "CLASSIFY" => CLASSIFY_OPTS,
        "DSCP" => DSCP_TG_OPTS,
        "TOS" => TOS_TG_OPTS,
        _ => return None,
    })
}

/// Extensions iptables has and tclab does not model: refused with a message saying so, not as unknown.
const OTHER_MATCHES: &[&str] = &[
    "addrtype",
    "ah",
    "bpf",
    "cgroup",
    "cluster",
    "comment",
    "connlabel",
    "connlimit",
    "cpu",
    "dccp",
    "devgroup",
    "ecn",
    "esp",
    "hashlimit",
    "helper",
    "icmp6",
    "iprange",
    "ipvs",
    "limit",
    "mac",
    "nfacct",
    "osf",
    "owner",
    "physdev",
    "pkttype",
    "policy",
    "quota",
    "rateest",
    "realm",
    "recent",
    "rpfilter",
    "sctp",
    "set",
    "socket",
    "statistic",
    "string",
    "tcpmss",
    "time",
    "ttl",
    "u32",
    "udplite",
];
const OTHER_TARGETS: &[&str] = &[
    "AUDIT",
    "CHECKSUM",
    "CONNSECMARK",
    "CT",
    "DNAT",
    "HMARK",
    "IDLETIMER",
    "LED",
    "LOG",
    "MASQUERADE",
    "NETMAP",
    "NFLOG",
    "NFQUEUE",
    "NOTRACK",
    "RATEEST",
    "REDIRECT",
    "REJECT",
    "SECMARK",
    "SET",
    "SNAT",
    "SYNPROXY",
    "TCPMSS",
    "TCPOPTSTRIP",
    "TEE",
    "TPROXY",
    "TRACE",
    "TTL",
    "ULOG",
];

fn is_target_name(n: &str) -> bool {
    target_opts(n).is_some() || OTHER_TARGETS.contains(&n) || n == "QUEUE"
}

#[derive(Clone, Debug)]
enum Val {
    Flag,
    Str(String),
    Mark(u32, Option<u32>),
    Ports(u16, u16),
    List(Vec<(u16, u16)>),
    Flags(u8, u8),
    R16(u16, u16),
    R64(u64, u64),
    Bits(u8),
    Tos(u8, u8),
    U8(u8),
    U32(u32),
    Icmp(u8, u8, u8),
    Dir(ConnbytesDir),
    Mode(ConnbytesMode),
}

/// A loaded extension and the options given to it so far, in order.
struct Ext {
    name: String,
    defs: &'static [OptDef],
    vals: BTreeMap<&'static str, (Val, bool)>,
}

impl Ext {
    fn new(name: &str, defs: &'static [OptDef]) -> Ext {
        Ext {
            name: name.to_string(),
            defs,
            vals: BTreeMap::new(),
        }
    }

    fn def(&self, opt: &str) -> Option<&'static OptDef> {
        self.defs.iter().find(|d| d.name == opt)
    }

    fn has(&self, key: &str) -> bool {
        self.vals.contains_key(key)
    }

    fn get(&self, key: &str) -> Option<&(Val, bool)> {
        self.vals.get(key)
    }

    /// Parse one option's values as the extension's `parse`/`x6_parse` does, at once (so errors come in
    /// command-line order).
    fn parse(&mut self, def: &'static OptDef, vals: &[String], invert: bool) -> R<()> {
        let name = self.name.clone();
        let ext = name.as_str();
        let key = def.key;
        let v0 = vals.first().map(String::as_str).unwrap_or("");
        if key == "unsupported" {
            return Err(param(format!(
                "{ext}: option \"--{}\" is not supported by tclab",
                def.name
            )));
        }
        if self.vals.contains_key(key) {
            return Err(match (ext, key) {
                ("tcp" | "udp", "sport") => param("Only one `--source-port' allowed"),
                ("tcp" | "udp", "dport") => param("Only one `--destination-port' allowed"),
                _ => param(format!(
                    "{ext}: option \"--{}\" can only be used once.\n",
                    def.name
                )),
            });
        }
        // Options of one group exclude each other (`XTOPT_EXCL`-style, `.excl` in libxt_*.c).
        let groups: &[&[&str]] = match ext {
            "MARK" => &[&["set-mark", "set-xmark", "and-mark", "or-mark", "xor-mark"]],
            "CONNMARK" => &[&[
                "set-mark",
                "set-xmark",
                "and-mark",
                "or-mark",
                "xor-mark",
                "save-mark",
                "restore-mark",
            ]],
            "TOS" => &[&["set-tos", "and-tos", "or-tos", "xor-tos"]],
            "DSCP" => &[&["set-dscp", "set-dscp-class"]],
            "dscp" => &[&["dscp", "dscp-class"]],
            "multiport" => &[&["sports", "dports", "ports"]],
            _ => &[],
        };
        for g in groups {
            if g.contains(&key) {
                if let Some(other) = g.iter().find(|k| self.vals.contains_key(**k)) {
                    return Err(param(format!(
                        "{ext}: option \"--{other}\" cannot be used together with \"--{}\".\n",
                        def.name
                    )));
                }
            }
        }
        let val = match (ext, key) {
            // `XTTYPE_STRING` into `char comment[256]`: at most 255 bytes.
            ("comment", _) if v0.len() > 255 => {
                return Err(param("comment: Argument is too long (max 255)"))
            }
            ("comment", _) => Val::Str(v0.to_string()),
            ("tcp" | "udp", "sport" | "dport") => {
                let (a, b) = parse_port_range(v0)?;
                Val::Ports(a, b)
            }
            ("tcp", "tcp-flags") => {
                if self.has("syn") {
                    return Err(param("Only one of `--syn' or `--tcp-flags'  allowed"));
                }
                if vals.len() < 2 {
                    return Err(param("--tcp-flags requires two args."));
                }
                Val::Flags(parse_tcp_flags(v0)?, parse_tcp_flags(&vals[1])?)
            }
            ("tcp", "syn") => {
                if self.has("tcp-flags") {
                    return Err(param("Only one of `--syn' or `--tcp-flags'  allowed"));
                }
                Val::Flags(0x17, 0x02)
            }
            ("tcp", "tcp-option") => {
                return Err(param(
                    "tcp: option \"--tcp-option\" is not supported by tclab",
                ))
            }
            ("icmp", _) => {
                let (t, a, b) = parse_icmp_type(v0)?;
                Val::Icmp(t, a, b)
            }
            ("multiport", _) => {
                let mut list = Vec::new();
                let mut count = 0;
                for p in v0.split(',') {
                    let (a, b) = parse_port_range(p)?;
                    count += if a == b { 1 } else { 2 };
                    list.push((a, b));
                }
                if count > 15 {
                    return Err(param("too many ports specified"));
                }
                Val::List(list)
            }
            ("length", _) => {
                let bad = || {
                    param(format!(
                        "length: bad value for option \"--length\" near \"{v0}\", or out of range (0-65535).\n"
                    ))
                };
                let num = |s: &str, dflt: u16| -> R<u16> {
                    if s.is_empty() {
                        Ok(dflt)
                    } else {
                        strtoui(s, 65535).map(|v| v as u16).ok_or_else(bad)
                    }
                };
                match v0.split_once(':') {
                    Some((a, b)) => Val::R16(num(a, 0)?, num(b, 65535)?),
                    None if v0.is_empty() => return Err(bad()),
                    None => {
                        let v = num(v0, 0)?;
                        Val::R16(v, v)
                    }
                }
            }
            ("connbytes", "connbytes") => {
                let bad = || {
                    param(format!(
                        "connbytes: bad value for option \"--connbytes\" near \"{v0}\", or out of range (0-18446744073709551615).\n"
                    ))
                };
                let num = |s: &str, dflt: u64| -> R<u64> {
                    if s.is_empty() {
                        Ok(dflt)
                    } else {
                        strtoui(s, u64::MAX).ok_or_else(bad)
                    }
                };
                let (a, b) = match v0.split_once(':') {
                    Some((a, b)) => (num(a, 0)?, num(b, u64::MAX)?),
                    None if v0.is_empty() => return Err(bad()),
                    None => (num(v0, 0)?, u64::MAX),
                };
                // Inversion is stored as a reversed range (`connbytes_parse`).
                if invert {
                    Val::R64(b, a)
                } else {
                    Val::R64(a, b)
                }
            }
            ("connbytes", "connbytes-dir") => Val::Dir(match v0 {
                "original" => ConnbytesDir::Original,
                "reply" => ConnbytesDir::Reply,
                "both" => ConnbytesDir::Both,
                _ => return Err(param(format!("Unknown --connbytes-dir `{v0}'"))),
            }),
            ("connbytes", "connbytes-mode") => Val::Mode(match v0 {
                "packets" => ConnbytesMode::Packets,
                "bytes" => ConnbytesMode::Bytes,
                "avgpkt" => ConnbytesMode::AvgPkt,
                _ => return Err(param(format!("Unknown --connbytes-mode `{v0}'"))),
            }),
            ("tos", _) => {
                let (v, m) = parse_tos(v0, "tos", "tos")?;
                Val::Tos(v, m)
            }
            ("dscp", "dscp") | ("DSCP", "set-dscp") => {
                let v = strtoui(v0, 63).ok_or_else(|| {
                    param(format!(
                        "{ext}: bad value for option \"--{}\", or out of range (0-63).\n",
                        def.name
                    ))
                })?;
                Val::U8(v as u8)
            }
            ("dscp", "dscp-class") | ("DSCP", "set-dscp-class") => Val::U8(parse_dscp_class(v0)?),
            ("mark" | "connmark", _) => {
                let (v, m) = parse_mark(v0, ext, def.name)?;
                Val::Mark(v, m)
            }
            ("state", _) => Val::Bits(parse_states(v0, false)?),
            ("conntrack", _) => Val::Bits(parse_states(v0, true)?),
            ("MARK" | "CONNMARK", "save-mark" | "restore-mark") => Val::Flag,
            ("MARK" | "CONNMARK", _) => {
                let (v, m) = parse_mark(v0, ext, def.name)?;
                Val::Mark(v, m)
            }
            ("CLASSIFY", _) => {
                let bad = || param(format!("Bad class value \"{v0}\""));
                let (a, b) = v0.split_once(':').ok_or_else(bad)?;
                let hex = |s: &str| {
                    (!s.is_empty() && s.len() <= 4)
                        .then(|| u32::from_str_radix(s, 16).ok())
                        .flatten()
                };
                Val::U32(hex(a).ok_or_else(bad)? << 16 | hex(b).ok_or_else(bad)?)
            }
            ("TOS", "set-tos") => {
                let (v, m) = parse_tos(v0, "TOS", "set-tos")?;
                Val::Tos(v, m)
            }
            ("TOS", _) => {
                let v = strtoui(v0, 255).ok_or_else(|| {
                    param(format!(
                        "TOS: bad value for option \"--{}\", or out of range (0-255).\n",
                        def.name
                    ))
                })? as u8;
                Val::U8(v)
            }
            _ => return Err(param(format!("unknown option \"--{}\"", def.name))),
        };
        self.vals.insert(key, (val, invert));
        Ok(())
    }

    fn required(&self, key: &str) -> R<&(Val, bool)> {
        self.get(key).ok_or_else(|| {
            param(format!(
                "{}: option \"--{key}\" must be specified\n",
                self.name
            ))
        })
    }

    /// The final check (`x6_fcheck`) and the kernel structure it produces.
    fn to_match(&self, proto: Option<(u8, bool)>) -> R<Match> {
        let ports = |k: &str| match self.get(k) {
            Some((Val::Ports(a, b), inv)) => PortRange {
                min: *a,
                max: *b,
                invert: *inv,
            },
            _ => PortRange::ANY,
        };
        Ok(match self.name.as_str() {
            "tcp" => Match::Tcp {
                sport: ports("sport"),
                dport: ports("dport"),
                flags: match self.get("tcp-flags").or(self.get("syn")) {
                    Some((Val::Flags(m, c), inv)) => Some(TcpFlags {
                        mask: *m,
                        cmp: *c,
                        invert: *inv,
                    }),
                    _ => None,
                },
            },
            "udp" => Match::Udp {
                sport: ports("sport"),
                dport: ports("dport"),
            },
            "icmp" => match self.get("icmp-type") {
                Some((Val::Icmp(t, a, b), inv)) => Match::Icmp {
                    typ: *t,
                    code: (*a, *b),
                    invert: *inv,
                },
                _ => Match::Icmp {
                    typ: 0xff,
                    code: (0, 0xff),
                    invert: false,
                },
            },
            "multiport" => {
                let proto_ok = matches!(proto, Some((6 | 17 | 33 | 132 | 136, false)));
                if !proto_ok {
                    return Err(param(
                        "multiport needs `-p tcp', `-p udp', `-p udplite', `-p sctp' or `-p dccp'",
                    ));
                }
                let (kind, v) = if let Some(v) = self.get("sports") {
                    (MultiportKind::Source, v)
                } else if let Some(v) = self.get("dports") {
                    (MultiportKind::Destination, v)
                } else if let Some(v) = self.get("ports") {
                    (MultiportKind::Either, v)
                } else {
                    return Err(param("multiport expects an option"));
                };
                let Val::List(l) = &v.0 else { unreachable!() };
                Match::Multiport {
                    kind,
                    ports: l.clone(),
                    invert: v.1,
                }
            }
            "comment" => match self.required("comment")? {
                (Val::Str(text), _) => Match::Comment(text.clone()),
                _ => unreachable!(),
            },
            "length" => match self.required("length")? {
                (Val::R16(a, b), inv) => Match::Length {
                    min: *a,
                    max: *b,
                    invert: *inv,
                },
                _ => unreachable!(),
            },
            "connbytes" => {
                let (Val::R64(from, to), _) = self.required("connbytes")? else {
                    unreachable!()
                };
                let (Val::Dir(dir), _) = self.required("connbytes-dir")? else {
                    unreachable!()
                };
                let (Val::Mode(mode), _) = self.required("connbytes-mode")? else {
                    unreachable!()
                };
                Match::Connbytes {
                    from: *from,
                    to: *to,
                    dir: *dir,
                    mode: *mode,
                }
            }
            "tos" => match self.required("tos")? {
                (Val::Tos(v, m), inv) => Match::Tos {
                    value: v & m,
                    mask: *m,
                    invert: *inv,
                },
                _ => unreachable!(),
            },
            "dscp" => match self.get("dscp").or(self.get("dscp-class")) {
                Some((Val::U8(d), inv)) => Match::Dscp {
                    dscp: *d,
                    invert: *inv,
                },
                _ => return Err(param("DSCP match: Parameter --dscp is required")),
            },
            "mark" | "connmark" => match self.required("mark")? {
                (Val::Mark(v, m), inv) => {
                    let mask = m.unwrap_or(u32::MAX);
                    if self.name == "mark" {
                        Match::Mark {
                            mark: *v,
                            mask,
                            invert: *inv,
                        }
                    } else {
                        Match::Connmark {
                            mark: *v,
                            mask,
                            invert: *inv,
                        }
                    }
                }
                _ => unreachable!(),
            },
            "state" | "conntrack" => {
                let key = if self.name == "state" {
                    "state"
                } else {
                    "ctstate"
                };
                match self.get(key) {
                    Some((Val::Bits(b), inv)) => Match::State {
                        mask: *b,
                        invert: *inv,
                        conntrack: self.name == "conntrack",
                    },
                    _ if self.name == "state" => {
                        return Err(param("state: option \"--state\" must be specified\n"))
                    }
                    _ => return Err(param("conntrack: At least one option is required")),
                }
            }
            n => return Err(param(format!("Couldn't load match `{n}'"))),
        })
    }

    fn to_target(&self) -> R<Target> {
        let mark = |k: &str| match self.get(k) {
            Some((Val::Mark(v, m), _)) => Some((*v, *m)),
            _ => None,
        };
        Ok(match self.name.as_str() {
            "ACCEPT" => Target::Accept,
            "DROP" => Target::Drop,
            "RETURN" => Target::Return,
            "MARK" | "CONNMARK" => {
                let (v, m) = if let Some((v, m)) = mark("set-xmark") {
                    (v, m.unwrap_or(u32::MAX))
                } else if let Some((v, m)) = mark("set-mark") {
                    (v, v | m.unwrap_or(u32::MAX))
                } else if let Some((v, _)) = mark("and-mark") {
                    (0, !v)
                } else if let Some((v, _)) = mark("or-mark") {
                    (v, v)
                } else if let Some((v, _)) = mark("xor-mark") {
                    (v, 0)
                } else if self.name == "MARK" {
                    return Err(param(
                        "MARK: One of the --set-xmark, --{and,or,xor,set}-mark options is required",
                    ));
                } else {
                    let both = mark("mask").map(|(v, _)| v);
                    let nfmask = mark("nfmask").map(|(v, _)| v).or(both).unwrap_or(u32::MAX);
                    let ctmask = mark("ctmask").map(|(v, _)| v).or(both).unwrap_or(u32::MAX);
                    if self.has("save-mark") {
                        return Ok(Target::Connmark(ConnmarkOp::Save { nfmask, ctmask }));
                    }
                    if self.has("restore-mark") {
                        return Ok(Target::Connmark(ConnmarkOp::Restore { ctmask, nfmask }));
                    }
                    return Err(param("CONNMARK target: No operation specified"));
                };
                if self.name == "MARK" {
                    Target::Mark { mark: v, mask: m }
                } else {
                    Target::Connmark(ConnmarkOp::Set {
                        ctmark: v,
                        ctmask: m,
                    })
                }
            }
            "CLASSIFY" => match self.get("set-class") {
                Some((Val::U32(c), _)) => Target::Classify(*c),
                _ => {
                    return Err(param(
                        "CLASSIFY: option \"--set-class\" must be specified\n",
                    ))
                }
            },
            "DSCP" => match self.get("set-dscp").or(self.get("set-dscp-class")) {
                Some((Val::U8(d), _)) => Target::Dscp(*d),
                _ => return Err(param("DSCP target: Parameter --set-dscp is required")),
            },
            "TOS" => {
                let u = |k: &str| match self.get(k) {
                    Some((Val::U8(v), _)) => Some(*v),
                    _ => None,
                };
                if let Some((Val::Tos(v, m), _)) = self.get("set-tos") {
                    Target::Tos {
                        value: *v,
                        mask: *m,
                    }
                } else if let Some(v) = u("and-tos") {
                    Target::Tos { value: 0, mask: !v }
                } else if let Some(v) = u("or-tos") {
                    Target::Tos { value: v, mask: v }
                } else if let Some(v) = u("xor-tos") {
                    Target::Tos { value: v, mask: 0 }
                } else {
                    return Err(param("TOS: An action is required"));
                }
            }
            n => Target::Jump(n.to_string()),
        })
    }
}

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
    let table = &engine.netfilter.mangle;
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
    let nf = &mut engine.netfilter;
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

// ---------------------------------------------------------------------------------------------------
// Printing: -S (iptables-save syntax) and -L

fn save_addr(flag: &str, a: &Option<AddrMatch>, s: &mut String) {
    if let Some(a) = a {
        if a.invert {
            s.push_str(" !");
        }
        let mask = match prefix_len(a.mask) {
            Some(n) => n.to_string(),
            None => dotted(a.mask),
        };
        s.push_str(&format!(" {flag} {}/{mask}", dotted(a.addr)));
    }
}

fn save_ports(flag: &str, p: &PortRange, s: &mut String) {
    if p.is_any() {
        return;
    }
    if p.invert {
        s.push_str(" !");
    }
    if p.min == p.max {
        s.push_str(&format!(" --{flag} {}", p.min));
    } else {
        s.push_str(&format!(" --{flag} {}:{}", p.min, p.max));
    }
}

fn ports_list(l: &[(u16, u16)], numeric: bool) -> String {
    l.iter()
        .map(|(a, b)| {
            if a == b {
                port_text(*a, numeric)
            } else {
                format!("{}:{}", port_text(*a, numeric), port_text(*b, numeric))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn mark_text(v: u32, m: u32) -> String {
    if m == u32::MAX {
        format!(" 0x{v:x}")
    } else {
        format!(" 0x{v:x}/0x{m:x}")
    }
}

fn multiport_word(k: MultiportKind) -> &'static str {
    match k {
        MultiportKind::Source => "sports",
        MultiportKind::Destination => "dports",
        MultiportKind::Either => "ports",
    }
}

fn dir_word(d: ConnbytesDir) -> &'static str {
    match d {
        ConnbytesDir::Original => "original",
        ConnbytesDir::Reply => "reply",
        ConnbytesDir::Both => "both",
    }
}

fn mode_word(m: ConnbytesMode) -> &'static str {
    match m {
        ConnbytesMode::Packets => "packets",
        ConnbytesMode::Bytes => "bytes",
        ConnbytesMode::AvgPkt => "avgpkt",
    }
}

/// The `-m NAME OPTIONS` of a match, as its `save` prints it.
fn save_match(m: &Match, s: &mut String) {
    let inv = |b: bool| if b { " !" } else { "" };
    match m {
        Match::Tcp {
            sport,
            dport,
            flags,
        } => {
            s.push_str(" -m tcp");
            save_ports("sport", sport, s);
            save_ports("dport", dport, s);
            if let Some(f) = flags {
                s.push_str(&format!(
                    "{} --tcp-flags {} {}",
                    inv(f.invert),
                    tcp_flags_text(f.mask),
                    tcp_flags_text(f.cmp)
                ));
            }
        }
        Match::Udp { sport, dport } => {
            s.push_str(" -m udp");
            save_ports("sport", sport, s);
            save_ports("dport", dport, s);
        }
        Match::Icmp { typ, code, invert } => {
            s.push_str(" -m icmp");
            if *typ != 0xff {
                s.push_str(&format!("{} --icmp-type {typ}", inv(*invert)));
                if *code != (0, 0xff) {
                    s.push_str(&format!("/{}", code.0));
                }
            }
        }
        Match::Multiport {
            kind,
            ports,
            invert,
        } => s.push_str(&format!(
            " -m multiport{} --{} {}",
            inv(*invert),
            multiport_word(*kind),
            ports_list(ports, true)
        )),
        Match::Comment(text) => {
            s.push_str(" -m comment --comment ");
            s.push_str(&save_string(text));
        }
        Match::Length { min, max, invert } => {
            s.push_str(&format!(" -m length{} --length {min}", inv(*invert)));
            if min != max {
                s.push_str(&format!(":{max}"));
            }
        }
        Match::Connbytes {
            from,
            to,
            dir,
            mode,
        } => {
            let (a, b, i) = if from > to {
                (*to, *from, true)
            } else {
                (*from, *to, false)
            };
            s.push_str(&format!(" -m connbytes{} --connbytes {a}", inv(i)));
            if b != u64::MAX {
                s.push_str(&format!(":{b}"));
            }
            s.push_str(&format!(
                " --connbytes-mode {} --connbytes-dir {}",
                mode_word(*mode),
                dir_word(*dir)
            ));
        }
        Match::Tos {
            value,
            mask,
            invert,
        } => s.push_str(&format!(
            " -m tos{} --tos 0x{value:02x}/0x{mask:02x}",
            inv(*invert)
        )),
        Match::Dscp { dscp, invert } => {
            s.push_str(&format!(" -m dscp{} --dscp 0x{dscp:02x}", inv(*invert)))
        }
        Match::Mark { mark, mask, invert } => s.push_str(&format!(
            " -m mark{} --mark{}",
            inv(*invert),
            mark_text(*mark, *mask)
        )),
        Match::Connmark { mark, mask, invert } => s.push_str(&format!(
            " -m connmark{} --mark{}",
            inv(*invert),
            mark_text(*mark, *mask)
        )),
        Match::State {
            mask,
            invert,
            conntrack,
        } => {
            if *conntrack {
                s.push_str(&format!(
                    " -m conntrack{} --ctstate {}",
                    inv(*invert),
                    states_text(*mask)
                ))
            } else {
                s.push_str(&format!(
                    " -m state{} --state {}",
                    inv(*invert),
                    states_text(*mask)
                ))
            }
        }
    }
}

fn save_target(t: &Target, s: &mut String) {
    match t {
        Target::None => {}
        Target::Goto(c) => s.push_str(&format!(" -g {c}")),
        _ => s.push_str(&format!(" -j {}", t.name())),
    }
    match t {
        Target::Mark { mark, mask } => s.push_str(&format!(" --set-xmark 0x{mark:x}/0x{mask:x}")),
        Target::Connmark(op) => match op {
            ConnmarkOp::Set { ctmark, ctmask } => {
                s.push_str(&format!(" --set-xmark 0x{ctmark:x}/0x{ctmask:x}"))
            }
            ConnmarkOp::Save { nfmask, ctmask } => s.push_str(&format!(
                " --save-mark --nfmask 0x{nfmask:x} --ctmask 0x{ctmask:x}"
            )),
            ConnmarkOp::Restore { ctmask, nfmask } => s.push_str(&format!(
                " --restore-mark --nfmask 0x{nfmask:x} --ctmask 0x{ctmask:x}"
            )),
        },
        Target::Classify(c) => {
            s.push_str(&format!(" --set-class {:04x}:{:04x}", c >> 16, c & 0xffff))
        }
        Target::Dscp(d) => s.push_str(&format!(" --set-dscp 0x{d:02x}")),
        Target::Tos { value, mask } => {
            s.push_str(&format!(" --set-tos 0x{value:02x}/0x{mask:02x}"))
        }
        _ => {}
    }
}

/// One rule as `iptables -S` prints it (`print_rule4`): addresses, interfaces, protocol, matches, target.
pub fn save_rule(chain: &str, r: &Rule) -> String {
    let mut s = format!("-A {chain}");
    save_addr("-s", &r.ip.src, &mut s);
    save_addr("-d", &r.ip.dst, &mut s);
    for (flag, m) in [("-i", &r.ip.iniface), ("-o", &r.ip.outiface)] {
        if let Some(m) = m {
            if m.invert {
                s.push_str(" !");
            }
            s.push_str(&format!(" {flag} {}", m.name));
        }
    }
    if let Some((p, inv)) = r.ip.proto {
        if inv {
            s.push_str(" !");
        }
        match proto_name(p) {
            Some(n) => s.push_str(&format!(" -p {n}")),
            None => s.push_str(&format!(" -p {p}")),
        }
    }
    for m in &r.matches {
        save_match(m, &mut s);
    }
    save_target(&r.target, &mut s);
    s
}

fn policy_word(p: Policy) -> &'static str {
    match p {
        Policy::Accept => "ACCEPT",
        Policy::Drop => "DROP",
    }
}

/// `iptables -S [chain [n]]`.
pub fn list_rules(
    t: &Table,
    chain: Option<&str>,
    n: Option<usize>,
) -> Result<String, tclab_core::netfilter::NfError> {
    let mut out = String::new();
    let names = match chain {
        Some(c) => {
            t.chain(c).ok_or(tclab_core::netfilter::NfError::NO_CHAIN)?;
            vec![c.to_string()]
        }
        None => t.chain_names(),
    };
    if let Some(n) = n {
        let c = t.chain(&names[0]).expect("checked");
        let r = c
            .rules
            .get(n - 1)
            .ok_or(tclab_core::netfilter::NfError("Index of deletion too big."))?;
        out.push_str(&save_rule(&names[0], r));
        out.push('\n');
        return Ok(out);
    }
    for name in &names {
        match Hook::from_chain(name) {
            Some(h) => out.push_str(&format!(
                "-P {name} {}\n",
                policy_word(t.builtin[h as usize].policy)
            )),
            None => out.push_str(&format!("-N {name}\n")),
        }
    }
    for name in &names {
        let c: &Chain = t.chain(name).expect("listed");
        for r in &c.rules {
            out.push_str(&save_rule(name, r));
            out.push('\n');
        }
    }
    Ok(out)
}

/// `xtables_print_num`: fixed width, with K/M/G/T suffixes unless `-x`.
fn num(n: u64, exact: bool, table: bool) -> String {
    if exact {
        return if table {
            format!("{n:8} ")
        } else {
            format!("{n} ")
        };
    }
    let w = |s: String| if table { s } else { s.trim_start().to_string() };
    if n <= 99999 {
        return w(format!("{n:5} "));
    }
    let mut v = n.saturating_add(500) / 1000;
    for suffix in ['K', 'M', 'G'] {
        if v <= 9999 {
            return w(format!("{v:4}{suffix} "));
        }
        v = v.saturating_add(500) / 1000;
    }
    w(format!("{v:4}T "))
}

fn list_addr(a: &Option<AddrMatch>, numeric: bool) -> String {
    match a {
        None => {
            if numeric {
                " 0.0.0.0/0".into()
            } else {
                " anywhere".into()
            }
        }
        Some(a) => {
            let bang = if a.invert { '!' } else { ' ' };
            if a.mask == 0 && !numeric {
                return format!("{bang}anywhere");
            }
            let mask = match a.mask {
                u32::MAX => String::new(),
                m => match prefix_len(m) {
                    Some(n) => format!("/{n}"),
                    None => format!("/{}", dotted(m)),
                },
            };
            format!("{bang}{}{mask}", dotted(a.addr))
        }
    }
}

fn list_ports(name: &str, p: &PortRange, numeric: bool, s: &mut String) {
    if p.is_any() {
        return;
    }
    let inv = if p.invert { "!" } else { "" };
    if p.min == p.max {
        s.push_str(&format!(" {name}:{inv}{}", port_text(p.min, numeric)));
    } else {
        s.push_str(&format!(
            " {name}s:{inv}{}:{}",
            port_text(p.min, numeric),
            port_text(p.max, numeric)
        ));
    }
}

/// A match as its `print` shows it in `-L`.
fn list_match(m: &Match, numeric: bool, s: &mut String) {
    match m {
        Match::Tcp {
            sport,
            dport,
            flags,
        } => {
            s.push_str(" tcp");
            list_ports("spt", sport, numeric, s);
            list_ports("dpt", dport, numeric, s);
            if let Some(f) = flags {
                let inv = if f.invert { "!" } else { "" };
                if numeric {
                    s.push_str(&format!(" flags:{inv}0x{:02X}/0x{:02X}", f.mask, f.cmp));
                } else {
                    s.push_str(&format!(
                        " flags:{inv}{}/{}",
                        tcp_flags_text(f.mask),
                        tcp_flags_text(f.cmp)
                    ));
                }
            }
        }
        Match::Udp { sport, dport } => {
            s.push_str(" udp");
            list_ports("spt", sport, numeric, s);
            list_ports("dpt", dport, numeric, s);
        }
        Match::Icmp { typ, code, invert } => {
            let inv = if *invert { "!" } else { "" };
            if *typ == 0xff {
                s.push_str(&format!(" icmp {inv}any"));
            } else if let (false, Some(n)) = (numeric, icmp_name(*typ, code.0, code.1)) {
                s.push_str(&format!(" icmp {inv}{n}"));
            } else {
                s.push_str(&format!(" icmptype {inv}{typ}"));
                if *code != (0, 0xff) {
                    s.push_str(&format!(" code {}", code.0));
                }
            }
        }
        Match::Multiport {
            kind,
            ports,
            invert,
        } => {
            let inv = if *invert { " !" } else { "" };
            s.push_str(&format!(
                " multiport {} {inv}{}",
                multiport_word(*kind),
                ports_list(ports, numeric)
            ));
        }
        Match::Comment(text) => s.push_str(&format!(" /* {text} */")),
        Match::Length { min, max, invert } => {
            let inv = if *invert { "!" } else { "" };
            if min == max {
                s.push_str(&format!(" length {inv}{min}"));
            } else {
                s.push_str(&format!(" length {inv}{min}:{max}"));
            }
        }
        Match::Connbytes {
            from,
            to,
            dir,
            mode,
        } => {
            let (a, b, inv) = if from > to {
                (*to, *from, " !")
            } else {
                (*from, *to, "")
            };
            s.push_str(&format!("{inv} connbytes {a}"));
            if b != u64::MAX {
                s.push_str(&format!(":{b}"));
            }
            s.push_str(&format!(
                " connbytes mode {} connbytes direction {}",
                mode_word(*mode),
                dir_word(*dir)
            ));
        }
        Match::Tos {
            value,
            mask,
            invert,
        } => {
            let inv = if *invert { "!" } else { "" };
            let sym = TOS_NAMES.iter().find(|(_, v)| v == value);
            match (numeric, *mask == 0x3f, sym) {
                (false, true, Some((n, _))) => s.push_str(&format!(" tos match {inv}{n}")),
                _ => s.push_str(&format!(" tos match{inv}0x{value:02x}/0x{mask:02x}")),
            }
        }
        Match::Dscp { dscp, invert } => {
            let inv = if *invert { "!" } else { "" };
            s.push_str(&format!(" DSCP match {inv}0x{dscp:02x}"));
        }
        Match::Mark { mark, mask, invert } => {
            let inv = if *invert { " !" } else { "" };
            s.push_str(&format!(" mark match{inv}{}", mark_text(*mark, *mask)));
        }
        Match::Connmark { mark, mask, invert } => {
            let inv = if *invert { " !" } else { "" };
            s.push_str(&format!(" connmark match{inv}{}", mark_text(*mark, *mask)));
        }
        Match::State {
            mask,
            invert,
            conntrack,
        } => {
            let inv = if *invert { " !" } else { "" };
            let word = if *conntrack { "ctstate" } else { "state" };
            s.push_str(&format!("{inv} {word} {}", states_text(*mask)));
        }
    }
}

fn list_setmark(what: &str, v: u32, m: u32, s: &mut String) {
    if v == 0 {
        s.push_str(&format!(" {what} and 0x{:x}", !m));
    } else if v == m {
        s.push_str(&format!(" {what} or 0x{v:x}"));
    } else if m == 0 {
        s.push_str(&format!(" {what} xor 0x{v:x}"));
    } else if m == u32::MAX {
        s.push_str(&format!(" {what} set 0x{v:x}"));
    } else {
        s.push_str(&format!(" {what} xset 0x{v:x}/0x{m:x}"));
    }
}

fn list_target(t: &Target, numeric: bool, s: &mut String) {
    match t {
        Target::Mark { mark, mask } => list_setmark("MARK", *mark, *mask, s),
        Target::Connmark(op) => match *op {
            ConnmarkOp::Set { ctmark, ctmask } => list_setmark("CONNMARK", ctmark, ctmask, s),
            ConnmarkOp::Save { nfmask, ctmask } => {
                if nfmask == u32::MAX && ctmask == u32::MAX {
                    s.push_str(" CONNMARK save");
                } else if nfmask == ctmask {
                    s.push_str(&format!(" CONNMARK save mask 0x{nfmask:x}"));
                } else {
                    s.push_str(&format!(
                        " CONNMARK save nfmask 0x{nfmask:x} ctmask ~0x{ctmask:x}"
                    ));
                }
            }
            ConnmarkOp::Restore { ctmask, nfmask } => {
                if nfmask == u32::MAX && ctmask == u32::MAX {
                    s.push_str(" CONNMARK restore");
                } else if nfmask == ctmask {
                    s.push_str(&format!(" CONNMARK restore mask 0x{ctmask:x}"));
                } else {
                    s.push_str(&format!(
                        " CONNMARK restore ctmask 0x{ctmask:x} nfmask ~0x{nfmask:x}"
                    ));
                }
            }
        },
        Target::Classify(c) => s.push_str(&format!(" CLASSIFY set {:x}:{:x}", c >> 16, c & 0xffff)),
        Target::Dscp(d) => s.push_str(&format!(" DSCP set 0x{d:02x}")),
        Target::Tos { value, mask } => {
            let (v, m) = (*value, *mask);
            let sym = TOS_NAMES.iter().find(|(_, x)| *x == v);
            if numeric {
                s.push_str(&format!(" TOS set 0x{v:02x}/0x{m:02x}"));
            } else if let (0x3f, Some((n, _))) = (m, sym) {
                // iptables prints two spaces here (the symbolic printer adds its own).
                s.push_str(&format!("  TOS set{n}"));
            } else if v == 0 {
                s.push_str(&format!(" TOS and 0x{:02x}", !m));
            } else if v == m {
                s.push_str(&format!(" TOS or 0x{v:02x}"));
            } else if m == 0 {
                s.push_str(&format!(" TOS xor 0x{v:02x}"));
            } else {
                s.push_str(&format!(" TOS set 0x{v:02x}/0x{m:02x}"));
            }
        }
        _ => {}
    }
}

/// `iptables -L [chain] [-v] [-n] [-x] [--line-numbers]`, as `print_header`/`print_firewall` print it.
fn list(
    t: &Table,
    chain: Option<&str>,
    l: &Line,
) -> Result<String, tclab_core::netfilter::NfError> {
    let names = match chain {
        Some(c) => {
            t.chain(c).ok_or(tclab_core::netfilter::NfError::NO_CHAIN)?;
            vec![c.to_string()]
        }
        None => t.chain_names(),
    };
    let (numeric, verbose, exact) = (l.numeric, l.verbose, l.exact);
    let mut out = String::new();
    for (k, name) in names.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        match Hook::from_chain(name) {
            Some(h) => {
                let b = &t.builtin[h as usize];
                out.push_str(&format!("Chain {name} (policy {}", policy_word(b.policy)));
                if verbose {
                    out.push_str(&format!(
                        " {}packets, {}bytes",
                        num(b.counters.packets, exact, false),
                        num(b.counters.bytes, exact, false)
                    ));
                }
                out.push_str(")\n");
            }
            None => out.push_str(&format!(
                "Chain {name} ({} references)\n",
                t.references(name)
            )),
        }
        if l.line_numbers {
            out.push_str(&format!("{:<4} ", "num"));
        }
        if verbose {
            if exact {
                out.push_str(&format!("{:>8} {:>10} ", "pkts", "bytes"));
            } else {
                out.push_str(&format!("{:>5} {:>5} ", "pkts", "bytes"));
            }
        }
        out.push_str(&format!("{:<9} ", "target"));
        out.push_str(" prot opt");
        if verbose {
            out.push_str(&format!(" {:<6} {:<6} ", "in", "out"));
        }
        out.push_str(&format!(" {:<19} ", "source"));
        out.push_str(&format!(" {:<19} ", "destination"));
        out.push('\n');
        let c = t.chain(name).expect("listed");
        for (i, r) in c.rules.iter().enumerate() {
            if l.line_numbers {
                out.push_str(&format!("{:<4} ", i + 1));
            }
            if verbose {
                out.push_str(&num(r.counters.packets, exact, true));
                out.push_str(&num(r.counters.bytes, exact, true));
            }
            out.push_str(&format!("{:<9} ", r.target.name()));
            let (p, inv) = r.ip.proto.unwrap_or((0, false));
            out.push(if inv { '!' } else { ' ' });
            let pname = if numeric {
                p.to_string()
            } else {
                proto_name(p).map_or(p.to_string(), str::to_string)
            };
            out.push_str(&format!("{pname:<5}"));
            out.push_str("-- ");
            if verbose {
                let iface = |m: &Option<IfaceMatch>| match m {
                    None => (if numeric { "*" } else { "any" }).to_string(),
                    Some(m) => format!("{}{}", if m.invert { "!" } else { "" }, m.name),
                };
                out.push_str(&format!(" {:<6} ", iface(&r.ip.iniface)));
                out.push_str(&format!("{:<6} ", iface(&r.ip.outiface)));
            }
            let src = list_addr(&r.ip.src, numeric);
            let dst = list_addr(&r.ip.dst, numeric);
            out.push_str(&format!("{src:<20} {dst:<20} "));
            let mut tail = String::new();
            for m in &r.matches {
                list_match(m, numeric, &mut tail);
            }
            list_target(&r.target, numeric, &mut tail);
            out.push_str(&tail);
            out.push('\n');
        }
    }
    Ok(out)
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

/// `xtables_save_string`: a word of letters, digits, `_` and `-` as it is; anything else in double quotes
/// with `"`, `\` and `'` escaped.
fn save_string(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return v.to_string();
    }
    let mut q = String::from("\"");
    for c in v.chars() {
        if matches!(c, '"' | '\\' | '\'') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}
