//! `ip route add|change|replace|del … realm R`: the realms of a host's routes (iproute2 6.1's
//! `iproute_modify` for the words, its messages and exit codes; the kernel's `fib_table_insert` and
//! `fib_table_delete` for what exists). tclab keeps a route only for its realms ([`tclab_core::fib`]):
//! the paths are the simulator's (the fewest hops), which checks `via` and `dev` against them; a
//! store, which has no addresses, keeps them as given. A route line without a realm gives tclab
//! nothing, and words that would change what a realm means (`table`, a route type, `nexthop`) or that
//! tclab does not model are refused by name rather than dropped.

// `get_addr_ipv4`'s forms are iptables' too.
use crate::iptables::values::parse_ipv4 as ipv4;
use tclab_core::fib::RealmRoute;
use tclab_core::Engine;

/// `tclab route help`: what the command keeps and takes (`ip route help` in a script is ip's usage, exit
/// 255, as ip answers).
pub const ROUTE_USAGE: &str = "Usage: tclab route { add | change | replace | del } PREFIX [ via ADDR ] [ dev DEV ] realm R
       tclab route [ show ]
The realms of the host's IPv4 routes (ip route's grammar, messages and exit codes), which route filters
and meta(rt_classid) read: R is a realm (a number or cosmos) or FROM/TO. A route without a realm, an
IPv6 route and ip route's other commands change nothing and say so (exit 0).";

/// What `ip route` asks of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Change,
    Replace,
    Del,
}

impl Op {
    pub fn word(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Change => "change",
            Op::Replace => "replace",
            Op::Del => "del",
        }
    }
}

/// One parsed `ip route` line: the route (its `tclassid` 0 when no realm was given) and whether a
/// realm was given. An IPv6 route (`ipv6`: its prefix or gateway) has none, as in the kernel, and its
/// `route` means nothing: tclab's routes are IPv4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub op: Op,
    pub route: RealmRoute,
    pub has_realm: bool,
    pub ipv6: bool,
}

/// ip's refusal: its stderr and exit code (255 for `invarg` and an incomplete line, 1 for an address
/// it cannot read or a device it cannot find, 2 for the kernel's answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpError {
    pub stderr: String,
    pub code: u8,
}

impl IpError {
    fn new(code: u8, message: impl Into<String>) -> IpError {
        let mut stderr = message.into();
        stderr.push('\n');
        IpError { stderr, code }
    }

    /// `invarg(msg, arg)`: the message ends in its own newline, so ip prints an empty line after it.
    fn invarg(what: &str, arg: &str) -> IpError {
        IpError::new(
            255,
            format!("Error: argument \"{arg}\" is wrong: \"{what}\" value is invalid\n"),
        )
    }

    fn incomplete() -> IpError {
        IpError::new(255, "Command line is not complete. Try option \"help\"")
    }

    /// What tclab does not model, named.
    fn not_modelled(what: &str) -> IpError {
        IpError::new(
            1,
            format!(
                "ip route: \"{what}\" is not modelled: tclab keeps a route's realms (PREFIX, via, dev, realm); \
                 its paths are the simulator's"
            ),
        )
    }

    /// The message as one line (for a report), without ip's trailing newlines.
    pub fn message(&self) -> &str {
        self.stderr.trim_end()
    }
}

/// ip's global options before the object (`ip -4 route …`, `ip -f inet route …`): the words after
/// them. `None` when an option other than the IPv4 family's is given (the caller treats the line as
/// before: not a route line tclab reads); IPv6 is refused, as tclab's routes are IPv4.
pub fn skip_options<'a>(words: &'a [&'a str]) -> Option<Result<&'a [&'a str], IpError>> {
    let mut at = 0;
    while let Some(w) = words.get(at) {
        match *w {
            "-4" => at += 1,
            "-6" => return Some(Err(IpError::new(1, "ip -6: tclab's routes are IPv4"))),
            "-f" | "-family" => match words.get(at + 1).copied() {
                Some("inet") => at += 2,
                Some("inet6") => {
                    return Some(Err(IpError::new(1, "ip -6: tclab's routes are IPv4")))
                }
                _ => return None,
            },
            w if w.starts_with('-') => return None,
            _ => return Some(Ok(&words[at..])),
        }
    }
    Some(Ok(&words[at..]))
}

/// The words after `ip [OPTIONS]` if they are a route command (`route`, `r`, `ro`…: ip's object
/// matching), from the command word on.
pub fn route_command<'a>(words: &'a [&'a str]) -> Option<Result<&'a [&'a str], IpError>> {
    let rest = match skip_options(words)? {
        Ok(r) => r,
        Err(e) => {
            return words
                .iter()
                .any(|w| !w.is_empty() && "route".starts_with(w))
                .then_some(Err(e))
        }
    };
    let (obj, rest) = rest.split_first()?;
    (!obj.is_empty() && "route".starts_with(obj)).then_some(Ok(rest))
}

/// `matches(arg, word)`: ip's abbreviation rule.
fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.starts_with(arg)
}

/// `ip route`'s command word (ip tries them in this order).
pub fn op(word: &str) -> Option<Op> {
    if matches(word, "add") {
        Some(Op::Add)
    } else if matches(word, "change") || word == "chg" {
        Some(Op::Change)
    } else if matches(word, "replace") {
        Some(Op::Replace)
    } else if matches(word, "delete") {
        Some(Op::Del)
    } else {
        None
    }
}

/// `get_prefix`: `default` (also `all`, `any`), or `ADDR[/LEN]` (a length as `get_unsigned` reads it:
/// `016` is octal). `None` for an IPv6 prefix: tclab's routes are IPv4.
fn prefix(s: &str) -> Result<Option<(u32, u8)>, IpError> {
    if matches!(s, "default" | "all" | "any") {
        return Ok(Some((0, 0)));
    }
    let bad = || {
        IpError::new(
            1,
            format!("Error: any valid prefix is expected rather than \"{s}\"."),
        )
    };
    let (a, l) = s.split_once('/').map_or((s, None), |(a, l)| (a, Some(l)));
    if a.contains(':') {
        return Ok(None);
    }
    let addr = ipv4(a).ok_or_else(bad)?;
    let len = match l {
        None => 32,
        Some(l) => crate::util::get_u32(l, 0)
            .filter(|l| *l <= 32)
            .ok_or_else(bad)? as u8,
    };
    Ok(Some((addr, len)))
}

/// `get_rt_realms_or_raw`: `TO` alone (a name, or any 32-bit number: the raw `nh_tclassid`), or
/// `FROM/TO` (each a name or 0..255; an empty `TO` is 0). The one name of a stock
/// `/etc/iproute2/rt_realms` is `cosmos` (0).
pub fn realms(v: &str) -> Option<u32> {
    let realm = |s: &str| match s {
        "cosmos" => Some(0),
        s => crate::util::get_u32(s, 0).filter(|r| *r <= 255),
    };
    match v.split_once('/') {
        Some((from, to)) => {
            let to = if to.is_empty() { 0 } else { realm(to)? };
            Some(realm(from)? << 16 | to)
        }
        None if v == "cosmos" => Some(0),
        None => crate::util::get_u32(v, 0),
    }
}

/// The route types `rtnl_rtntype_a2n` reads where a prefix may stand, in its order; `true`: the whole
/// word only (its `strcmp`), else any abbreviation (its `matches`).
const TYPES: &[(&str, bool)] = &[
    ("local", true),
    ("nat", true),
    ("broadcast", false),
    ("brd", true),
    ("anycast", false),
    ("multicast", false),
    ("prohibit", false),
    ("unreachable", false),
    ("blackhole", false),
    ("xresolve", false),
    ("unicast", false),
    ("throw", true),
];

/// `iproute_modify`'s other words (those tclab reads, `via`, `dev`, `oif`, `realms`, are matched
/// before), in ip 6.1's order, `true` where only the whole word is taken. Which abbreviations ip takes
/// was measured against this machine's ip 6.1: `ip route add 10.0.50.0/24 dev eth0 W` for every
/// prefix W of each word ("is a garbage" or not).
const WORDS: &[(&str, bool)] = &[
    ("src", true),
    ("as", true),
    ("from", true),
    ("tos", true),
    ("dsfield", false),
    ("expires", true),
    ("metric", false),
    ("priority", false),
    ("preference", true),
    ("mtu", true),
    ("hoplimit", true),
    ("advmss", true),
    ("reordering", false),
    ("rtt", false),
    ("rto_min", true),
    ("window", false),
    ("cwnd", false),
    ("initcwnd", false),
    ("initrwnd", false),
    ("features", false),
    ("quickack", false),
    ("congctl", false),
    ("rttvar", false),
    ("ssthresh", false),
    ("onlink", true),
    ("nexthop", true),
    ("nhid", true),
    ("protocol", false),
    ("table", false),
    ("vrf", false),
    ("pref", false),
    ("encap", true),
    ("ttl-propagate", true),
    ("fastopen_no_cookie", false),
    ("scope", true),
];

/// The word of `table` (`WORDS`, `TYPES`) that `w` names, if ip reads it as one.
fn ip_word(table: &[(&'static str, bool)], w: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(word, exact)| if *exact { w == *word } else { matches(w, word) })
        .map(|(word, _)| *word)
}

/// Read `ip route OP …`'s words after OP (`iproute_modify`'s loop), with ip's own refusals. The
/// kernel's checks that need no table (a prefix with host bits) are made here too.
pub fn parse(op: Op, args: &[&str]) -> Result<Line, IpError> {
    let (mut dst, mut via, mut dev, mut tclassid) = (None, None, None, None);
    let mut ipv6 = false;
    let mut it = args.iter().copied();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(IpError::incomplete);
        match a {
            "via" => {
                let mut v = value()?;
                if v == "inet" {
                    v = value()?;
                }
                if v == "inet6" {
                    value()?;
                    ipv6 = true;
                    continue;
                }
                if v.contains(':') {
                    ipv6 = true;
                    continue;
                }
                via = Some(ipv4(v).ok_or_else(|| {
                    IpError::new(
                        1,
                        format!("Error: inet address is expected rather than \"{v}\"."),
                    )
                })?);
            }
            "dev" | "oif" => dev = Some(value()?.to_string()),
            a if a.len() >= 3 && matches(a, "realms") => {
                let v = value()?;
                tclassid = Some(realms(v).ok_or_else(|| IpError::invarg("realm", v))?);
            }
            a => {
                let p = if a == "to" { value()? } else { a };
                if a != "to" && !matches!(p, "default" | "all" | "any") {
                    if let Some(w) = ip_word(WORDS, p) {
                        // Known to ip, not to tclab.
                        return Err(IpError::not_modelled(w));
                    }
                }
                if !p.starts_with(|c: char| c.is_ascii_digit()) {
                    if let Some(t) = ip_word(TYPES, p) {
                        if t != "unicast" {
                            return Err(IpError::not_modelled(t));
                        }
                        // `unicast PREFIX`: the type, then the prefix.
                        let p = value()?;
                        if dst.is_some() {
                            return Err(duplicate(p));
                        }
                        dst = Some(prefix(p)?.unwrap_or_else(|| {
                            ipv6 = true;
                            (0, 0)
                        }));
                        continue;
                    }
                }
                if matches(p, "help") {
                    return Err(IpError::new(255, USAGE));
                }
                // Any other word is a prefix to ip: a second one is "garbage", a first one not an
                // address (a misspelt `realm` is refused as ip refuses it).
                if dst.is_some() {
                    return Err(duplicate(p));
                }
                dst = Some(prefix(p)?.unwrap_or_else(|| {
                    ipv6 = true;
                    (0, 0)
                }));
            }
        }
    }
    let Some((prefix, len)) = dst else {
        return Err(IpError::new(255, USAGE));
    };
    if ipv6 {
        // Nothing of tclab's, realm or not (the kernel keeps no realm on an IPv6 route: `ip route add
        // 2001:db8::/64 dev eth0 realm 3` succeeds and lists none): the caller notes it.
        return Ok(Line {
            op,
            has_realm: false,
            ipv6,
            route: RealmRoute {
                prefix,
                len,
                tclassid: 0,
                via: None,
                dev,
            },
        });
    }
    // fib_create_info: a route that is not deleted needs a device, named or found by its gateway.
    if op != Op::Del && via.is_none() && dev.is_none() {
        return Err(IpError::new(2, "RTNETLINK answers: No such device"));
    }
    // fib_table_insert (fib_valid_key_len's extack): host bits under the prefix.
    if prefix & !u32::MAX.checked_shl(32 - len as u32).unwrap_or(0) != 0 {
        return Err(IpError::new(
            2,
            "Error: Invalid prefix for given prefix length.",
        ));
    }
    Ok(Line {
        op,
        has_realm: tclassid.is_some(),
        ipv6,
        route: RealmRoute {
            prefix,
            len,
            tclassid: tclassid.unwrap_or(0),
            via,
            dev,
        },
    })
}

fn duplicate(p: &str) -> IpError {
    IpError::new(
        255,
        format!("Error: either \"to\" is duplicate, or \"{p}\" is a garbage."),
    )
}

/// The first line of ip route's usage (what it prints, exit 255, for a line without a prefix).
const USAGE: &str = "Usage: ip route { list | flush } SELECTOR\n       ip route save SELECTOR\n       \
ip route restore\n       ip route showdump\n       ip route get [ ROUTE_GET_FLAGS ] ADDRESS\n       \
ip route { add | del | change | append | replace } ROUTE";

fn addr_text(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

/// `PREFIX` as `ip route show` prints it (`default`, an address alone for a /32).
pub fn prefix_text(prefix: u32, len: u8) -> String {
    match len {
        0 if prefix == 0 => "default".into(),
        32 => addr_text(prefix),
        l => format!("{}/{l}", addr_text(prefix)),
    }
}

/// `realm TO` or `realms FROM/TO` as ip prints `RTA_FLOW` (realm 0 as `cosmos`); nothing for 0, which
/// the kernel does not dump.
fn realms_text(t: u32) -> String {
    if t == 0 {
        return String::new();
    }
    let name = |r: u32| {
        if r == 0 {
            "cosmos".to_string()
        } else {
            r.to_string()
        }
    };
    if t >> 16 == 0 {
        format!("realm {}", name(t & 0xffff))
    } else {
        format!("realms {}/{}", name(t >> 16), name(t & 0xffff))
    }
}

/// `ip route show`: the routes with realms, as ip prints them (most specific first; ip lists by
/// prefix in the kernel's trie order, which tclab does not keep).
pub fn show(engine: &Engine) -> String {
    let mut s = String::new();
    for r in engine.fib().routes() {
        s.push_str(&prefix_text(r.prefix, r.len));
        if let Some(v) = r.via {
            s.push_str(&format!(" via {}", addr_text(v)));
        }
        if let Some(d) = &r.dev {
            s.push_str(&format!(" dev {d}"));
        }
        // A route without a gateway is the link's (rtm_scope RT_SCOPE_LINK, as ip sets it).
        if r.via.is_none() {
            s.push_str(" scope link");
        }
        s.push(' ');
        let realms = realms_text(r.tclassid);
        if !realms.is_empty() {
            s.push_str(&realms);
            s.push(' ');
        }
        s.push('\n');
    }
    s
}

/// Apply a parsed line to the engine's table as the kernel would, for what the table holds: `add` of
/// a prefix it has is EEXIST; `change` and `replace` set it (the route may exist outside the table:
/// a connected subnet, a route without a realm); `del` removes it when its gateway and device, if
/// given, are the route's (ESRCH otherwise), and is `Ok(false)` for a prefix the table lacks, which
/// only the real table could answer.
pub fn apply(engine: &mut Engine, line: &Line) -> Result<bool, IpError> {
    let r = &line.route;
    let fib = engine.fib_mut();
    match line.op {
        Op::Add if fib.get(r.prefix, r.len).is_some() => {
            Err(IpError::new(2, "RTNETLINK answers: File exists"))
        }
        Op::Add | Op::Change | Op::Replace => {
            fib.replace(r.clone());
            Ok(true)
        }
        Op::Del => {
            let Some(old) = fib.get(r.prefix, r.len) else {
                return Ok(false);
            };
            let via_differs = r.via.is_some() && r.via != old.via;
            let dev_differs = r.dev.is_some() && r.dev != old.dev;
            if via_differs || dev_differs {
                return Err(IpError::new(2, "RTNETLINK answers: No such process"));
            }
            fib.remove(r.prefix, r.len);
            Ok(true)
        }
    }
}

/// `tclab route OP …` against an engine (a store's, a script's): the output ip would give. `show`
/// (`list`, `lst`, none) lists the routes with realms; other commands (`flush`, `get`, `append`) and
/// a route line without a realm change nothing and say so (exit 0). A store's devices are made as tc names them,
/// so `dev` is not checked here (the simulator checks it against its links). A route line without a realm, and the `del` of
/// a prefix with none, change nothing here and say so.
pub fn run(engine: &mut Engine, args: &[String]) -> crate::Output {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let fail = |e: IpError| crate::Output {
        stderr: e.stderr,
        code: e.code as i32,
        ..crate::Output::default()
    };
    let Some((&cmd, rest)) = words.split_first() else {
        return crate::Output {
            stdout: show(engine),
            ..Default::default()
        };
    };
    if matches(cmd, "list") || matches(cmd, "show") || cmd == "lst" {
        return crate::Output {
            stdout: show(engine),
            ..Default::default()
        };
    }
    let Some(op) = op(cmd) else {
        // do_iproute's other commands (`flush cache`, `get`, `append`…): nothing of a realm, as before
        // tclab read routes. Any other word is not an ip route command: ip's refusal.
        const OTHERS: &[&str] = &[
            "prepend", "append", "test", "get", "flush", "save", "restore", "showdump",
        ];
        if matches(cmd, "help") {
            return fail(IpError::new(255, USAGE));
        }
        if !OTHERS.iter().any(|w| matches(cmd, w)) {
            return fail(IpError::new(
                255,
                format!("Command \"{cmd}\" is unknown, try \"ip route help\"."),
            ));
        }
        return crate::Output {
            stderr: format!("tclab route: ignoring \"ip route {}\"\n", args.join(" ")),
            ..Default::default()
        };
    };
    let line = match parse(op, rest) {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    if line.ipv6 || (op != Op::Del && !line.has_realm) {
        let why = if line.ipv6 {
            "an IPv6 route gives tclab nothing (its routes are IPv4)"
        } else {
            "a route without a realm gives tclab nothing"
        };
        return crate::Output {
            stderr: format!(
                "tclab route: ignoring \"ip route {}\": {why}\n",
                args.join(" ")
            ),
            ..Default::default()
        };
    }
    match apply(engine, &line) {
        Ok(true) => crate::Output::default(),
        Ok(false) => crate::Output {
            stderr: format!(
                "tclab route: ignoring \"ip route {}\": no route of that prefix has a realm\n",
                args.join(" ")
            ),
            ..Default::default()
        },
        Err(e) => fail(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Each refusal as this machine's iproute2 6.1 gives it against a 6.12 kernel (`ip route add …` in
    /// a namespace with a veth at 10.0.2.1/24): stderr and exit code.
    #[test]
    fn ip_s_refusals_word_for_word() {
        let mut e = Engine::new();
        let refused = |e: &mut Engine, line: &str, stderr: &str, code: i32| {
            let out = run(e, &words(line));
            assert_eq!((out.stderr.as_str(), out.code), (stderr, code), "{line}");
        };
        refused(
            &mut e,
            "add 10.1.0.1/16 via 10.0.2.2 realm 5",
            "Error: Invalid prefix for given prefix length.\n",
            2,
        );
        refused(
            &mut e,
            "add 10.21.0.0/016 via 10.0.2.2 realm 3",
            "Error: Invalid prefix for given prefix length.\n",
            2,
        );
        refused(
            &mut e,
            "add 10.3.0.0/16 via 10.0.2.2 realm 256/1",
            "Error: argument \"256/1\" is wrong: \"realm\" value is invalid\n\n",
            255,
        );
        refused(
            &mut e,
            "add 10.7.0.0/16 via 10.0.2.2 realms /3",
            "Error: argument \"/3\" is wrong: \"realm\" value is invalid\n\n",
            255,
        );
        refused(
            &mut e,
            "add 10.3.0.0/16 via 10.0.2.2 realm",
            "Command line is not complete. Try option \"help\"\n",
            255,
        );
        refused(
            &mut e,
            "add 10.3.0.0/33 via 10.0.2.2 realm 3",
            "Error: any valid prefix is expected rather than \"10.3.0.0/33\".\n",
            1,
        );
        refused(
            &mut e,
            "add 10.4.0.0/16 via 10.0.2.x realm 3",
            "Error: inet address is expected rather than \"10.0.2.x\".\n",
            1,
        );
        refused(
            &mut e,
            "add 10.13.0.0/16 10.14.0.0/16 via 10.0.2.2 realms 3",
            "Error: either \"to\" is duplicate, or \"10.14.0.0/16\" is a garbage.\n",
            255,
        );
        // A misspelt word is a prefix to ip: garbage after the prefix, not an address before it.
        refused(
            &mut e,
            "add 10.5.0.0/24 dev eth0 relm 3",
            "Error: either \"to\" is duplicate, or \"relm\" is a garbage.\n",
            255,
        );
        refused(
            &mut e,
            "add relm 10.5.0.0/24 dev eth0 realm 3",
            "Error: any valid prefix is expected rather than \"relm\".\n",
            1,
        );
        // Only the whole of `scope`, `mtu`, `onlink` (strcmp); `r`, `pri` are reordering, priority.
        for (tail, stderr) in [
            ("scop link", "\"scop\" is a garbage"),
            ("mt 1400", "\"mt\" is a garbage"),
            ("onl", "\"onl\" is a garbage"),
            ("r 5", "\"reordering\" is not modelled"),
            ("pri 5", "\"priority\" is not modelled"),
            ("scope link", "\"scope\" is not modelled"),
        ] {
            let out = run(
                &mut e,
                &words(&format!("add 10.5.0.0/24 dev eth0 realm 3 {tail}")),
            );
            assert!(
                out.code != 0 && out.stderr.contains(stderr),
                "{tail}: {}",
                out.stderr
            );
        }
        // fib_create_info: neither a device nor a gateway.
        for line in ["add 10.5.0.0/24 realm 3", "change 10.5.0.0/24 realm 3"] {
            refused(&mut e, line, "RTNETLINK answers: No such device\n", 2);
        }
        // do_iproute: a word that is no ip route command, and `help`.
        for (line, stderr) in [
            (
                "foo",
                "Command \"foo\" is unknown, try \"ip route help\".\n",
            ),
            (
                "--help",
                "Command \"--help\" is unknown, try \"ip route help\".\n",
            ),
        ] {
            refused(&mut e, line, stderr, 255);
        }
        assert_eq!(run(&mut e, &words("help")).code, 255);
        assert_eq!(
            run(&mut e, &words("flush cache")).code,
            0,
            "noted, not refused"
        );
        // Said by the command that ran it: `tclab route` on its own, or a script's ip wrapper (a
        // review found "tclab script:" printed for `tclab route flush`).
        assert_eq!(
            run(&mut e, &words("flush cache")).stderr,
            "tclab route: ignoring \"ip route flush cache\"\n"
        );
        // IPv6 routes, with or without `-6`, as Linux takes them (its IPv6 routes keep no realm):
        // noted, nothing kept.
        for line in [
            "add 2001:db8::/64 dev eth0",
            "add 2001:db8:1::/64 via fe80::1 dev eth0 realm 3",
            "add default via inet6 fe80::1",
            "del 2001:db8::/64",
        ] {
            let out = run(&mut e, &words(line));
            assert!(
                out.code == 0 && out.stderr.contains("an IPv6 route"),
                "{line}: {out:?}"
            );
        }
        assert!(e.fib().routes().is_empty(), "nothing kept");
        let usage = run(&mut e, &words("add realm 2"));
        assert!(usage
            .stderr
            .starts_with("Usage: ip route { list | flush } SELECTOR\n"));
        assert_eq!(usage.code, 255);
        // Accepted: a raw 32-bit realm, `3/` (3/cosmos), ip's partial address, `rea`.
        for ok in [
            "add 10.3.0.0/16 via 10.0.2.2 realms 70000",
            "add 10.6.0.0/16 via 10.0.2.2 realms 3/",
            "add 10.20/16 via 10.0.2.2 realm 3",
            "add 10.22.0.0/16 via 10.0.2.2 rea 3",
        ] {
            assert_eq!(run(&mut e, &words(ok)).code, 0, "{ok}");
        }
        // Realm 0 is no RTA_FLOW: listed without one.
        assert_eq!(
            run(&mut e, &words("add 10.9.0.0/24 dev eth0 realm 0")).code,
            0
        );
        // Listed as ip lists them: 70000 is 1 << 16 | 4464.
        let shown = show(&e);
        assert!(
            shown.contains("10.3.0.0/16 via 10.0.2.2 realms 1/4464 \n"),
            "{shown}"
        );
        assert!(
            shown.contains("10.6.0.0/16 via 10.0.2.2 realms 3/cosmos \n"),
            "{shown}"
        );
        assert!(
            shown.contains("10.20.0.0/16 via 10.0.2.2 realm 3 \n"),
            "{shown}"
        );
        assert!(
            shown.contains("10.9.0.0/24 dev eth0 scope link \n"),
            "{shown}"
        );
        refused(
            &mut e,
            "add 10.3.0.0/16 via 10.0.2.2 realm 5",
            "RTNETLINK answers: File exists\n",
            2,
        );
        // fib_table_delete matches the gateway if given, never the realm.
        refused(
            &mut e,
            "del 10.3.0.0/16 via 10.0.2.3",
            "RTNETLINK answers: No such process\n",
            2,
        );
        assert_eq!(run(&mut e, &words("del 10.3.0.0/16 realm 9")).code, 0);
        assert_eq!(e.fib().get(0x0a03_0000, 16), None);
    }

    #[test]
    fn options_before_the_object_and_words_tclab_does_not_model() {
        let ws = ["-4", "route", "add", "10.0.0.0/8", "realm", "3"];
        assert_eq!(route_command(&ws), Some(Ok(&ws[2..])));
        let ws = ["-f", "inet", "r", "add"];
        assert_eq!(route_command(&ws), Some(Ok(&ws[3..])));
        assert!(matches!(
            route_command(&["-6", "route", "add"]),
            Some(Err(_))
        ));
        assert_eq!(route_command(&["-4", "link", "set"]), None);
        assert_eq!(route_command(&["rule", "add"]), None);
        for (line, word) in [
            ("add 10.0.0.0/8 via 10.0.2.2 realm 3 metric 4", "metric"),
            ("add 10.0.0.0/8 table 100 realm 3", "table"),
            ("add blackhole 10.0.0.0/8 realm 3", "blackhole"),
        ] {
            let out = run(&mut Engine::new(), &words(line));
            assert!(
                out.code != 0 && out.stderr.contains(&format!("\"{word}\" is not modelled")),
                "{line}: {}",
                out.stderr
            );
        }
    }

    #[test]
    fn a_stores_route_records_replay_and_only_changes_are_kept() {
        use crate::store::Store;
        let dir = std::env::temp_dir().join(format!("tclab-iproute-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let (mut st, _) = Store::open(&path).unwrap();
        let mut run = |line: &str| st.execute(&words(line), None).unwrap();
        assert_eq!(run("route add 10.1.0.0/16 via 10.0.2.2 realm 5").code, 0);
        assert_eq!(run("route replace 10.2.0.0/16 dev eth1 realms 3/4").code, 0);
        // Kept out of the journal: a refusal, a route without a realm, the del of a prefix
        // without one, a listing.
        assert_eq!(run("route add 10.1.0.0/16 via 10.0.2.2 realm 6").code, 2);
        assert!(run("route add default via 10.0.2.2")
            .stderr
            .contains("without a realm"));
        assert!(run("route del 10.9.0.0/16")
            .stderr
            .contains("no route of that prefix"));
        run("route show");
        assert_eq!(run("route del 10.2.0.0/16").code, 0);
        let records: Vec<Vec<String>> = crate::store::read_journal(&path).unwrap().entries;
        assert_eq!(
            records,
            vec![
                words("route add 10.1.0.0/16 via 10.0.2.2 realm 5"),
                words("route replace 10.2.0.0/16 dev eth1 realms 3/4"),
                words("route del 10.2.0.0/16"),
            ]
        );
        // Replayed, the table is what the commands left.
        let (st, problems) = Store::open(&path).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            show(st.engine().unwrap()),
            "10.1.0.0/16 via 10.0.2.2 realm 5 \n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
