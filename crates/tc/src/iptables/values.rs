//! Values on iptables command lines and their printed forms: numbers as `strtoul` reads them,
//! addresses and prefixes, protocols, services, TCP flags, DSCP classes, TOS names, marks, conntrack
//! states, ICMP types.

use super::*;

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

/// One to four dotted decimal parts, each 0..255, the missing ones zero (`inet_aton`'s forms that
/// iptables and ip's `get_addr_ipv4` take alike).
pub(crate) fn parse_ipv4(s: &str) -> Option<u32> {
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

pub(super) fn dotted(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

pub(super) fn prefix_len(mask: u32) -> Option<u32> {
    let n = mask.leading_ones();
    (mask.checked_shl(n).unwrap_or(0) == 0).then_some(n)
}

/// `-s`/`-d`: a comma-separated list of `ADDR[/BITS|/MASK]`.
pub(super) fn parse_addrs(s: &str) -> R<Vec<(u32, u32)>> {
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

pub(super) const PROTOS: &[(&str, u8)] = &[
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

pub(super) fn parse_proto(s: &str) -> R<u8> {
    let lower = s.to_ascii_lowercase();
    if let Some((_, n)) = PROTOS.iter().find(|(n, _)| *n == lower) {
        return Ok(*n);
    }
    strtoui(s, 255)
        .map(|v| v as u8)
        .ok_or_else(|| param(format!("unknown protocol \"{s}\" specified")))
}

/// The name `/etc/protocols` gives a number, as iptables-save and `-L` without `-n` print it.
pub(super) fn proto_name(p: u8) -> Option<&'static str> {
    match p {
        58 => Some("ipv6-icmp"),
        _ => PROTOS.iter().find(|(_, n)| *n == p).map(|(s, _)| *s),
    }
}

pub(super) const SERVICES: &[(&str, u16)] = &[
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

pub(super) fn parse_port(s: &str) -> R<u16> {
    if let Some((_, p)) = SERVICES.iter().find(|(n, _)| *n == s) {
        return Ok(*p);
    }
    strtoui(s, 65535)
        .map(|v| v as u16)
        .ok_or_else(|| param(format!("invalid port/service `{s}' specified")))
}

pub(super) fn port_text(p: u16, numeric: bool) -> String {
    if !numeric {
        if let Some((n, _)) = SERVICES.iter().find(|(_, v)| *v == p) {
            return n.to_string();
        }
    }
    p.to_string()
}

/// `--sport 1000:2000`, `:100`, `100:`.
pub(super) fn parse_port_range(s: &str) -> R<(u16, u16)> {
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

pub(super) const TCP_FLAGS: &[(&str, u8)] = &[
    ("FIN", 0x01),
    ("SYN", 0x02),
    ("RST", 0x04),
    ("PSH", 0x08),
    ("ACK", 0x10),
    ("URG", 0x20),
    ("ALL", 0x3f),
    ("NONE", 0),
];

pub(super) fn parse_tcp_flags(s: &str) -> R<u8> {
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

pub(super) fn tcp_flags_text(mut f: u8) -> String {
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

pub(super) const DSCP_CLASSES: &[(&str, u8)] = &[
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

pub(super) fn parse_dscp_class(s: &str) -> R<u8> {
    let up = s.to_ascii_uppercase();
    DSCP_CLASSES
        .iter()
        .find(|(n, _)| *n == up)
        .map(|(_, v)| *v)
        .ok_or_else(|| param(format!("Invalid DSCP value `{s}'")))
}

pub(super) const TOS_NAMES: &[(&str, u8)] = &[
    ("Minimize-Delay", 0x10),
    ("Maximize-Throughput", 0x08),
    ("Maximize-Reliability", 0x04),
    ("Minimize-Cost", 0x02),
    ("Normal-Service", 0x00),
];

/// `xtables_parse_tos`-like: `VALUE[/MASK]` (mask 0xff by default) or a symbolic name (mask 0x3f).
pub(super) fn parse_tos(s: &str, ext: &str, opt: &str) -> R<(u8, u8)> {
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
pub(super) fn parse_mark(s: &str, ext: &str, opt: &str) -> R<(u32, Option<u32>)> {
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

pub(super) fn parse_states(s: &str, ct: bool) -> R<u8> {
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

pub(super) fn states_text(m: u8) -> String {
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

pub(super) const ICMP_TYPES: &[(&str, u8, u8, u8)] = &[
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

pub(super) fn parse_icmp_type(s: &str) -> R<(u8, u8, u8)> {
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

pub(super) fn icmp_name(t: u8, lo: u8, hi: u8) -> Option<&'static str> {
    ICMP_TYPES
        .iter()
        .find(|(_, a, b, c)| *a == t && *b == lo && *c == hi)
        .map(|(n, ..)| *n)
}
