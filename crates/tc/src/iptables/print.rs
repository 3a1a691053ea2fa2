//! Printing: `-S` (iptables-save syntax) and `-L [-v] [-n] [-x] [--line-numbers]`, as iptables-legacy
//! prints them.

use super::*;

// Printing: -S (iptables-save syntax) and -L

pub(super) fn save_addr(flag: &str, a: &Option<AddrMatch>, s: &mut String) {
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

pub(super) fn save_ports(flag: &str, p: &PortRange, s: &mut String) {
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

pub(super) fn ports_list(l: &[(u16, u16)], numeric: bool) -> String {
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

pub(super) fn mark_text(v: u32, m: u32) -> String {
    if m == u32::MAX {
        format!(" 0x{v:x}")
    } else {
        format!(" 0x{v:x}/0x{m:x}")
    }
}

pub(super) fn multiport_word(k: MultiportKind) -> &'static str {
    match k {
        MultiportKind::Source => "sports",
        MultiportKind::Destination => "dports",
        MultiportKind::Either => "ports",
    }
}

pub(super) fn dir_word(d: ConnbytesDir) -> &'static str {
    match d {
        ConnbytesDir::Original => "original",
        ConnbytesDir::Reply => "reply",
        ConnbytesDir::Both => "both",
    }
}

pub(super) fn mode_word(m: ConnbytesMode) -> &'static str {
    match m {
        ConnbytesMode::Packets => "packets",
        ConnbytesMode::Bytes => "bytes",
        ConnbytesMode::AvgPkt => "avgpkt",
    }
}

/// The `-m NAME OPTIONS` of a match, as its `save` prints it.
pub(super) fn save_match(m: &Match, s: &mut String) {
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

pub(super) fn save_target(t: &Target, s: &mut String) {
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

pub(super) fn policy_word(p: Policy) -> &'static str {
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
pub(super) fn num(n: u64, exact: bool, table: bool) -> String {
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

pub(super) fn list_addr(a: &Option<AddrMatch>, numeric: bool) -> String {
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

pub(super) fn list_ports(name: &str, p: &PortRange, numeric: bool, s: &mut String) {
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
pub(super) fn list_match(m: &Match, numeric: bool, s: &mut String) {
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

pub(super) fn list_setmark(what: &str, v: u32, m: u32, s: &mut String) {
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

pub(super) fn list_target(t: &Target, numeric: bool, s: &mut String) {
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
pub(super) fn list(
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

/// `xtables_save_string`: a word of letters, digits, `_` and `-` as it is; anything else in double quotes
/// with `"`, `\` and `'` escaped.
pub(super) fn save_string(v: &str) -> String {
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
