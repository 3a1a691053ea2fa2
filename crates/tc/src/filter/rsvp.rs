//! `rsvp` and `rsvp6` (`f_rsvp.c`): tc 6.1 parses the options, and Linux 6.3 removed the classifier,
//! so tclab's kernel has no module for it: a well-formed command is refused there (`TC classifier not
//! found`), as on this machine's kernel. The parse is kept for tc's own refusals before that, its
//! messages and exit codes, and its crashes: `u8|u16|u32 VALUE [mask MASK]` at the end of the line
//! makes `get_addr_and_pi` compare the word after it, which is not there (`strcmp(NULL, …)`), and tc
//! dies of SIGSEGV without a word (exit 139 from a shell).

use super::*;

pub(super) const RSVP_USAGE: &str = "Usage:\t... rsvp ipproto PROTOCOL session DST[/PORT | GPI ]\n\t\t[ sender SRC[/PORT | GPI ] ]\n\t\t[ classid CLASSID ] [ action ACTION_SPEC ]\n\t\t[ tunnelid ID ] [ tunnel ID skip NUMBER ]\nWhere:\tGPI := { flowlabel NUMBER | spi/ah SPI | spi/esp SPI |\n\t\tu{8|16|32} NUMBER mask MASK at OFFSET}\n\tACTION_SPEC := ... look at individual actions\n\tFILTERID := X:Y\n\nNOTE: CLASSID is parsed as hexadecimal input.";

/// Where tc 6.1 crashes reading past the last word.
fn crash() -> Failure {
    Failure::silent(
        139,
        "get_addr_and_pi (f_rsvp.c): u8/u16/u32 VALUE [mask MASK] at the end of the line is \
         followed by strcmp(NULL, …), and tc 6.1 dies of SIGSEGV",
    )
}

/// `inet_proto_a2n`: a protocol of `/etc/protocols` (Debian's netbase names the common ones), else
/// a number up to 255.
fn inet_proto_a2n(s: &str) -> Option<u8> {
    const NAMES: &[(&str, u8)] = &[
        ("ip", 0),
        ("icmp", 1),
        ("igmp", 2),
        ("ipencap", 4),
        ("tcp", 6),
        ("egp", 8),
        ("udp", 17),
        ("dccp", 33),
        ("ipv6", 41),
        ("ipv6-route", 43),
        ("ipv6-frag", 44),
        ("rsvp", 46),
        ("gre", 47),
        ("esp", 50),
        ("ah", 51),
        ("ipv6-icmp", 58),
        ("ipv6-nonxt", 59),
        ("ipv6-opts", 60),
        ("ospf", 89),
        ("ipip", 94),
        ("pim", 103),
        ("ipcomp", 108),
        ("vrrp", 112),
        ("l2tp", 115),
        ("sctp", 132),
        ("udplite", 136),
    ];
    NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, p)| *p)
        .or_else(|| get_u32(s, 0).and_then(|v| u8::try_from(v).ok()))
}

/// `get_addr_1` for the family: an address, or `default`/`any`/`all`.
fn addr_ok(s: &str, v6: bool) -> bool {
    matches!(s, "default" | "any" | "all")
        || if v6 {
            s.parse::<std::net::Ipv6Addr>().is_ok()
        } else {
            crate::util::get_addr_ipv4(s).is_some()
        }
}

/// `get_addr_and_pi`: `ADDR[/PORT]`, then — without a port — one GPI. The cursor is on the address
/// and ends past what was read; `Ok(false)` is its `return -1`.
fn addr_and_pi(c: &mut Cur, v6: bool) -> Result<bool> {
    let arg = c.peek().unwrap_or("");
    let (addr, port) = match arg.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (arg, None),
    };
    if port.is_some_and(|p| crate::util::get_u16(p, 0).is_none()) || !addr_ok(addr, v6) {
        return Ok(false);
    }
    c.fwd();
    let Some(w) = c.peek().filter(|_| port.is_none()) else {
        return Ok(true);
    };
    match w {
        "spi/ah" | "gpi/ah" | "spi/esp" | "gpi/esp" => {
            if get_u32(c.next_arg()?, 0).is_none() {
                return Ok(false);
            }
            c.fwd();
        }
        "flowlabel" => {
            if get_u32(c.next_arg()?, 0).is_none() || !v6 {
                return Ok(false);
            }
            c.fwd();
        }
        "u32" | "u16" | "u8" => {
            if get_u32(c.next_arg()?, 0).is_none() {
                return Ok(false);
            }
            c.fwd();
            if c.peek().ok_or_else(crash)? == "mask" {
                if get_u32(c.next_arg()?, 16).is_none() {
                    return Ok(false);
                }
                c.fwd();
            }
            if c.peek().ok_or_else(crash)? == "at" {
                if crate::util::get_s32(c.next_arg()?).is_none() {
                    return Ok(false);
                }
                c.fwd();
            }
        }
        _ => {}
    }
    Ok(true)
}

/// `rsvp_parse_opt`: tc's refusals, or the kernel's for the classifier it lacks.
pub(super) fn parse_rsvp(v6: bool, handle: Option<&str>, c: &mut Cur) -> Result<()> {
    if let Some(s) = handle {
        get_u32(s, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?;
    }
    while let Some(w) = c.peek() {
        if matches(w, "session") || matches(w, "sender") || matches(w, "flowspec") {
            let what = if matches(w, "session") {
                "session"
            } else {
                "sender"
            };
            c.next_arg()?;
            if !addr_and_pi(c, v6)? {
                return Err(Failure::options(format!("Illegal \"{what}\"")));
            }
            continue;
        } else if w.starts_with("ipproto") {
            // `matches("ipproto", *argv)`: the arguments the other way round, so any word starting
            // with "ipproto" is taken.
            inet_proto_a2n(c.next_arg()?).ok_or_else(|| Failure::options("Illegal \"ipproto\""))?;
        } else if matches(w, "classid") || w == "flowid" {
            classid_arg(c)?;
        } else if w == "tunnelid" {
            get_u32(c.next_arg()?, 0).ok_or_else(|| Failure::options("Illegal \"tunnelid\""))?;
        } else if w == "tunnel" {
            get_u32(c.next_arg()?, 0).ok_or_else(|| Failure::options("Illegal \"tunnel\""))?;
            let mut v = c.next_arg()?;
            if v == "skip" {
                v = c.next_arg()?;
            }
            get_u32(v, 0).ok_or_else(|| Failure::options("Illegal \"skip\""))?;
        } else if matches(w, "action") {
            filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "police") {
            filter_police(c)?;
            continue;
        } else if w == "help" {
            return Err(Failure::options(RSVP_USAGE));
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{RSVP_USAGE}")));
        }
        c.fwd();
    }
    Err(kernel(KernelError::msg(
        Errno::NoEntry,
        "TC classifier not found",
    )))
}
