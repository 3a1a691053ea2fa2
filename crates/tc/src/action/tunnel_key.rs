//! `tunnel_key` (`m_tunnel_key.c`): `tunnel_key unset | set src_ip IP dst_ip IP [id ID] [dst_port P]
//! [geneve_opts CLASS:TYPE:DATA[,…] | vxlan_opts GBP | erspan_opts VER:INDEX:DIR:HWID] [tos T] [ttl T]
//! [csum | nocsum] [nofrag] [CONTROL] [index N]`, with tc's messages (an address that is none is
//! `get_addr`'s `exit(1)`); and its printer. `nofrag` (in the usage too) is iproute2 6.4's, which the
//! kernel's tdc cases use: 6.1 has no word for the flag.

use super::*;
use std::net::IpAddr;
use tclab_core::action::tunnel_key::{GeneveOpt, TunnelKey, TunnelOpts, ACT_RELEASE, ACT_SET};

pub(super) const TUNNEL_KEY_USAGE: &str = "Usage: tunnel_key unset\n       tunnel_key set <TUNNEL_KEY>\nWhere TUNNEL_KEY is a combination of:\nid <TUNNELID>\nsrc_ip <IP> (mandatory)\ndst_ip <IP> (mandatory)\ndst_port <UDP_PORT>\ngeneve_opts | vxlan_opts | erspan_opts <OPTIONS>\ncsum | nocsum (default is \"csum\")\nnofrag";

/// `get_u8(…, base)`.
fn get_u8(s: &str, base: u32) -> Option<u8> {
    get_u32(s, base).and_then(|v| u8::try_from(v).ok())
}

/// `get_addr(…, AF_UNSPEC)`: an IPv6 address if it has a colon, else an IPv4 one; anything else ends
/// tc with `exit(1)`.
pub(super) fn get_addr(s: &str) -> Result<IpAddr> {
    let a = if s.contains(':') {
        s.parse().ok().map(IpAddr::V6)
    } else {
        crate::util::get_addr_ipv4(s).map(|a| IpAddr::V4(a.into()))
    };
    a.ok_or_else(|| {
        Failure::exit(
            1,
            format!("Error: any valid address is expected rather than \"{s}\"."),
        )
    })
}

/// `hex2mem(token, buf, strlen(token) / 2)`: pairs of hex digits (an odd last digit is left out).
pub(crate) fn hex2mem(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    (0..b.len() / 2)
        .map(|i| {
            let pair = std::str::from_utf8(&b[2 * i..2 * i + 2]).ok()?;
            // `get_hex` takes hex digits only: no sign or prefix.
            pair.bytes()
                .all(|c| c.is_ascii_hexdigit())
                .then(|| u8::from_str_radix(pair, 16).ok())?
        })
        .collect()
}

/// `strtok_r(s, sep)`: the non-empty pieces.
fn tokens(s: &str, sep: char) -> impl Iterator<Item = &str> {
    s.split(sep).filter(|t| !t.is_empty())
}

/// `tunnel_key_parse_geneve_opts`: `CLASS:TYPE:DATA` (hex) options separated by commas; a part may
/// be missing (the kernel then refuses the option), a fourth is an error.
fn parse_geneve(s: &str) -> Option<TunnelOpts> {
    let mut out = Vec::new();
    for opt in tokens(s, ',') {
        let mut g = GeneveOpt {
            class: None,
            kind: None,
            data: None,
        };
        for (i, t) in tokens(opt, ':').enumerate() {
            match i {
                0 => g.class = Some(get_u16(t, 16)?),
                1 => g.kind = Some(get_u8(t, 16)?),
                2 => g.data = Some(hex2mem(t)?),
                _ => return None,
            }
        }
        out.push(g);
    }
    Some(TunnelOpts::Geneve(out))
}

/// `tunnel_key_parse_erspan_opt`: `VER:INDEX:DIR:HWID`, each read with base 0.
fn parse_erspan(s: &str) -> Option<TunnelOpts> {
    let (mut ver, mut index, mut dir, mut hwid) = (None, None, None, None);
    for (i, t) in tokens(s, ':').enumerate() {
        match i {
            0 => ver = Some(get_u8(t, 0)?),
            1 => index = Some(get_u32(t, 0)?),
            2 => dir = Some(get_u8(t, 0)?),
            3 => hwid = Some(get_u8(t, 0)?),
            _ => return None,
        }
    }
    // No version: the kernel's "Missing tunnel key erspan option ver" (as version 0: refused).
    Some(TunnelOpts::Erspan {
        ver: ver.unwrap_or(0),
        index,
        dir,
        hwid,
    })
}

/// `parse_tunnel_key`.
pub(super) fn parse_tunnel_key(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut t = TunnelKey {
        action: TC_ACT_PIPE,
        op: 0,
        src: None,
        dst: None,
        key_id: None,
        dst_port: None,
        opts: None,
        no_csum: false,
        no_frag: false,
        tos: None,
        ttl: None,
    };
    c.next_arg()?;
    let illegal = |what: &str| bad(format!("Illegal \"{what}\""));
    while let Some(w) = c.peek() {
        if matches(w, "unset") || matches(w, "set") {
            if t.op != 0 {
                return Err(bad(format!(
                    "unexpected \"{w}\" - action already specified\n{TUNNEL_KEY_USAGE}"
                )));
            }
            t.op = if matches(w, "unset") {
                ACT_RELEASE
            } else {
                ACT_SET
            };
        } else if matches(w, "src_ip") {
            t.src = Some(get_addr(c.next_arg()?)?);
        } else if matches(w, "dst_ip") {
            t.dst = Some(get_addr(c.next_arg()?)?);
        } else if matches(w, "id") {
            t.key_id = Some(get_u32(c.next_arg()?, 10).ok_or_else(|| illegal("id"))?);
        } else if matches(w, "dst_port") {
            t.dst_port = Some(get_u16(c.next_arg()?, 10).ok_or_else(|| illegal("dst port"))?);
        } else if matches(w, "geneve_opts") {
            t.opts = Some(parse_geneve(c.next_arg()?).ok_or_else(|| illegal("geneve_opts"))?);
        } else if matches(w, "vxlan_opts") {
            let gbp = get_u32(c.next_arg()?, 0).ok_or_else(|| illegal("vxlan_opts"))?;
            t.opts = Some(TunnelOpts::Vxlan { gbp });
        } else if matches(w, "erspan_opts") {
            t.opts = Some(parse_erspan(c.next_arg()?).ok_or_else(|| illegal("erspan_opts"))?);
        } else if matches(w, "tos") || matches(w, "ttl") {
            let what = if matches(w, "tos") { "tos" } else { "ttl" };
            let v = c.next_arg()?;
            let v = get_u8(v, 10)
                .or_else(|| get_u8(v, 16))
                .ok_or_else(|| illegal(what))?;
            if what == "tos" {
                t.tos = Some(v);
            } else {
                t.ttl = Some(v);
            }
        } else if matches(w, "csum") {
            t.no_csum = false;
        } else if matches(w, "nocsum") {
            t.no_csum = true;
        } else if w == "nofrag" {
            t.no_frag = true;
        } else if matches(w, "help") {
            return Err(Failure::syntax(TUNNEL_KEY_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    t.action = control_or(c, t.action)?;
    let index = index_arg(c, 10, |_| "tunnel_key: Illegal \"index\"".into())?.unwrap_or(0);
    if t.op == ACT_SET && (t.src.is_none() || t.dst.is_none()) {
        return Err(bad(format!(
            "set needs tunnel_key parameters\n{TUNNEL_KEY_USAGE}"
        )));
    }
    Ok((ActionParams::TunnelKey(t), index))
}

/// `tunnel_key_print_key_opt`.
fn print_opts(p: &mut Printer, o: &TunnelOpts) {
    match o {
        TunnelOpts::Geneve(list) => {
            p.open_array("geneve_opts");
            p.nl();
            p.fp("\tgeneve_opts ");
            for (i, g) in list.iter().enumerate() {
                let (class, kind) = (g.class.unwrap_or(0), g.kind.unwrap_or(0));
                let data = g.data.as_deref().unwrap_or_default();
                p.open_object(None);
                p.json_number("class", class);
                p.json_number("type", kind);
                let bytes: Vec<serde_json::Value> = data.iter().map(|&b| b.into()).collect();
                p.value(Some("data"), &serde_json::Value::Array(bytes));
                p.close_object();
                let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
                let sep = if i + 1 < list.len() { "," } else { "" };
                p.fp(format_args!("{class:04x}:{kind:02x}:{hex}{sep}"));
            }
            p.close_array();
        }
        TunnelOpts::Vxlan { gbp } => {
            p.nl();
            p.fp("\tvxlan_opts ");
            p.open_array("vxlan_opts");
            p.open_object(None);
            p.number("gbp", gbp, gbp);
            p.close_object();
            p.close_array();
        }
        TunnelOpts::Erspan {
            ver,
            index,
            dir,
            hwid,
        } => {
            // What the kernel keeps: the index for version 1, the direction and hwid otherwise.
            let (index, dir, hwid) = if *ver == 1 {
                (index.unwrap_or(0), 0, 0)
            } else {
                (0, dir.unwrap_or(0), hwid.unwrap_or(0))
            };
            p.nl();
            p.fp("\terspan_opts ");
            p.open_array("erspan_opts");
            p.open_object(None);
            p.number("ver", ver, ver);
            p.number("index", format_args!(":{index}"), index);
            p.number("dir", format_args!(":{dir}"), dir);
            p.number("hwid", format_args!(":{hwid}"), hwid);
            p.close_object();
            p.close_array();
        }
    }
}

/// `print_tunnel_key`: what `tunnel_key_dump` dumps (the port when not 0, TOS and TTL when not 0).
pub(super) fn print(p: &mut Printer, a: &Action, t: &TunnelKey, flags: ShowFlags, now: u64) {
    p.string("kind", "tunnel_key ", "tunnel_key");
    match t.op {
        ACT_RELEASE => p.string("mode", " unset", "unset"),
        ACT_SET => {
            p.string("mode", " set", "set");
            for (key, addr) in [("src_ip", t.src), ("dst_ip", t.dst)] {
                if let Some(addr) = addr {
                    let s = addr.to_string();
                    p.nl();
                    p.string(key, format_args!("\t{key} {s}"), &s);
                }
            }
            if let Some(id) = t.key_id {
                p.nl();
                p.number("key_id", format_args!("\tkey_id {id}"), id);
            }
            if let Some(port) = t.dst_port.filter(|p| *p != 0) {
                p.nl();
                p.number("dst_port", format_args!("\tdst_port {port}"), port);
            }
            if let Some(o) = &t.opts {
                print_opts(p, o);
            }
            p.nl();
            let flag = if t.no_csum { "nocsum" } else { "csum" };
            p.string("flag", format_args!("\t{flag}"), flag);
            if t.no_frag {
                p.fp("\tnofrag");
                p.boolean("nofrag", "", true);
            }
            if let Some(tos) = t.tos.filter(|v| *v != 0) {
                p.nl();
                p.number("tos", format_args!("\ttos 0x{tos:x}"), tos);
            }
            if let Some(ttl) = t.ttl.filter(|v| *v != 0) {
                p.nl();
                p.number("ttl", format_args!("\tttl {ttl}"), ttl);
            }
        }
        _ => {}
    }
    print_control(p, " ", t.action, "");
    print_index_refs(p, a, "\t index ", flags, now);
}
