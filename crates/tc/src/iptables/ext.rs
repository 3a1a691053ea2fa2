//! Extensions (`libxt_*.c`): each match's and target's options, their parsed values, and the final
//! check that builds a netfilter match or target from them.

use super::*;

// Extensions: their options, parsed values and the final check

/// How many values an option takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Arity {
    Zero,
    One,
    Two,
}

pub(super) struct OptDef {
    pub(super) name: &'static str,
    /// The canonical name the value is stored under (aliases share it).
    pub(super) key: &'static str,
    pub(super) arity: Arity,
    pub(super) invertible: bool,
}

pub(super) const fn o(
    name: &'static str,
    key: &'static str,
    arity: Arity,
    invertible: bool,
) -> OptDef {
    OptDef {
        name,
        key,
        arity,
        invertible,
    }
}

pub(super) use Arity::{One, Two, Zero};

pub(super) const TCP_OPTS: &[OptDef] = &[
    o("sport", "sport", One, true),
    o("source-port", "sport", One, true),
    o("dport", "dport", One, true),
    o("destination-port", "dport", One, true),
    o("tcp-flags", "tcp-flags", Two, true),
    o("syn", "syn", Zero, true),
    o("tcp-option", "tcp-option", One, true),
];
pub(super) const UDP_OPTS: &[OptDef] = &[
    o("sport", "sport", One, true),
    o("source-port", "sport", One, true),
    o("dport", "dport", One, true),
    o("destination-port", "dport", One, true),
];
pub(super) const ICMP_OPTS: &[OptDef] = &[o("icmp-type", "icmp-type", One, true)];
pub(super) const MULTIPORT_OPTS: &[OptDef] = &[
    o("sports", "sports", One, true),
    o("source-ports", "sports", One, true),
    o("dports", "dports", One, true),
    o("destination-ports", "dports", One, true),
    o("ports", "ports", One, true),
];
pub(super) const LENGTH_OPTS: &[OptDef] = &[o("length", "length", One, true)];
pub(super) const COMMENT_OPTS: &[OptDef] = &[o("comment", "comment", One, false)];
pub(super) const CONNBYTES_OPTS: &[OptDef] = &[
    o("connbytes", "connbytes", One, true),
    o("connbytes-dir", "connbytes-dir", One, false),
    o("connbytes-mode", "connbytes-mode", One, false),
];
pub(super) const TOS_OPTS: &[OptDef] = &[o("tos", "tos", One, true)];
pub(super) const DSCP_OPTS: &[OptDef] = &[
    o("dscp", "dscp", One, true),
    o("dscp-class", "dscp-class", One, true),
];
pub(super) const MARK_OPTS: &[OptDef] = &[o("mark", "mark", One, true)];
pub(super) const STATE_OPTS: &[OptDef] = &[o("state", "state", One, true)];
pub(super) const CONNTRACK_OPTS: &[OptDef] = &[
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
pub(super) const MARK_TG_OPTS: &[OptDef] = &[
    o("set-mark", "set-mark", One, false),
    o("set-xmark", "set-xmark", One, false),
    o("and-mark", "and-mark", One, false),
    o("or-mark", "or-mark", One, false),
    o("xor-mark", "xor-mark", One, false),
];
pub(super) const CONNMARK_TG_OPTS: &[OptDef] = &[
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
pub(super) const CLASSIFY_OPTS: &[OptDef] = &[o("set-class", "set-class", One, false)];
pub(super) const DSCP_TG_OPTS: &[OptDef] = &[
    o("set-dscp", "set-dscp", One, false),
    o("set-dscp-class", "set-dscp-class", One, false),
];
pub(super) const TOS_TG_OPTS: &[OptDef] = &[
    o("set-tos", "set-tos", One, false),
    o("and-tos", "and-tos", One, false),
    o("or-tos", "or-tos", One, false),
    o("xor-tos", "xor-tos", One, false),
];
pub(super) const NO_OPTS: &[OptDef] = &[];

pub(super) fn match_opts(name: &str) -> Option<&'static [OptDef]> {
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

pub(super) fn target_opts(name: &str) -> Option<&'static [OptDef]> {
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
pub(super) const OTHER_MATCHES: &[&str] = &[
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
pub(super) const OTHER_TARGETS: &[&str] = &[
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

pub(super) fn is_target_name(n: &str) -> bool {
    target_opts(n).is_some() || OTHER_TARGETS.contains(&n) || n == "QUEUE"
}

#[derive(Clone, Debug)]
pub(super) enum Val {
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
pub(super) struct Ext {
    pub(super) name: String,
    pub(super) defs: &'static [OptDef],
    pub(super) vals: BTreeMap<&'static str, (Val, bool)>,
}

impl Ext {
    pub(super) fn new(name: &str, defs: &'static [OptDef]) -> Ext {
        Ext {
            name: name.to_string(),
            defs,
            vals: BTreeMap::new(),
        }
    }

    pub(super) fn def(&self, opt: &str) -> Option<&'static OptDef> {
        self.defs.iter().find(|d| d.name == opt)
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.vals.contains_key(key)
    }

    pub(super) fn get(&self, key: &str) -> Option<&(Val, bool)> {
        self.vals.get(key)
    }

    /// Parse one option's values as the extension's `parse`/`x6_parse` does, at once (so errors come in
    /// command-line order).
    pub(super) fn parse(&mut self, def: &'static OptDef, vals: &[String], invert: bool) -> R<()> {
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

    pub(super) fn required(&self, key: &str) -> R<&(Val, bool)> {
        self.get(key).ok_or_else(|| {
            param(format!(
                "{}: option \"--{key}\" must be specified\n",
                self.name
            ))
        })
    }

    /// The final check (`x6_fcheck`) and the kernel structure it produces.
    pub(super) fn to_match(&self, proto: Option<(u8, bool)>) -> R<Match> {
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

    pub(super) fn to_target(&self) -> R<Target> {
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
