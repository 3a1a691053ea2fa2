//! `pedit` (`m_pedit.c` with `p_ip.c`, `p_ip6.c`, `p_tcp.c`, `p_udp.c`, `p_eth.c`, `p_icmp.c`): `pedit [ex]
//! munge …` keys — raw `offset N u8|u16|u32 [at A OFFMASK SHIFT] CMD [retain R]` or a header's named
//! field — packed into 32-bit `val`/`mask` words as tc packs them (`pack_key8/16/32`, `pack_mac`,
//! `pack_ipv6`); and the printer (`key #N  at [htype+]OFF: val|add VAL mask MASK`).
//!
//! tc's x86 layout is kept where it shows: `invert` on a MAC address writes 0xff into the first byte of
//! tc's value buffer (the low byte of the `u32` it stores the 0xff in), so only the address's first octet
//! is inverted, as tc 6.1 does.

use super::*;
use tclab_core::action::pedit::{Cmd, HeaderType, Key, Pedit};

pub(super) const PEDIT_USAGE: &str = "Usage: ... pedit munge [ex] <MUNGE> [CONTROL]\nWhere: MUNGE := <RAW>|<LAYERED>\n\t<RAW>:= <OFFSETC>[ATC]<CMD>\n \t\tOFFSETC:= offset <offval> <u8|u16|u32>\n\t\tATC:= at <atval> offmask <maskval> shift <shiftval>\n\t\tNOTE: offval is byte offset, must be multiple of 4\n\t\tNOTE: maskval is a 32 bit hex number\n \t\tNOTE: shiftval is a shift value\n\t\tCMD:= clear | invert | set <setval> | add <addval> | decrement | retain\n\t<LAYERED>:= ip <ipdata> | ip6 <ip6data>\n \t\t| udp <udpdata> | tcp <tcpdata> | icmp <icmpdata>\n\tCONTROL:= reclassify | pipe | drop | continue | pass |\n\t          goto chain <CHAIN_INDEX>\n\tNOTE: if 'ex' is set, extended functionality will be supported (kernel >= 4.11)\nFor Example usage look at the examples directory";

/// `MAX_OFFS`.
const MAX_KEYS: usize = 128;

/// What a field's value is (`TIPV4`, `TIPV6`, `TU32`, `TMAC`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Ipv4,
    Ipv6,
    U32,
    Mac,
}

/// `struct m_pedit_sel` while parsing.
struct Sel {
    keys: Vec<Key>,
    extended: bool,
}

/// `struct m_pedit_key`: the key being built (offset as tc's `__u32`, wrapping).
#[derive(Clone, Copy, Default)]
struct TKey {
    mask: u32,
    val: u32,
    off: u32,
    at: u32,
    offmask: u32,
    shift: u32,
    htype: HeaderType,
    cmd: Cmd,
}

/// A parse step's failure: tc's messages on stderr, then `return -1`.
type Step<T> = std::result::Result<T, String>;

/// `pack_key`.
fn pack_key(sel: &mut Sel, t: &TKey) -> Step<()> {
    if sel.keys.len() >= MAX_KEYS {
        return Err(String::new());
    }
    if !t.off.is_multiple_of(4) {
        return Err("offsets MUST be in 32 bit boundaries\n".into());
    }
    if !sel.extended && (t.htype != HeaderType::Network || t.cmd != Cmd::Set) {
        return Err("Munge parameters not supported. Use 'pedit ex munge ...'.\n".into());
    }
    sel.keys.push(Key {
        mask: t.mask,
        val: t.val,
        off: t.off as i32,
        at: t.at,
        offmask: t.offmask,
        shift: t.shift,
        htype: if sel.extended {
            t.htype
        } else {
            HeaderType::Network
        },
        cmd: if sel.extended { t.cmd } else { Cmd::Set },
    });
    Ok(())
}

fn pack_key32(retain: u32, sel: &mut Sel, t: &mut TKey) -> Step<()> {
    if t.off > (t.off & !3) {
        return Err("pack_key32: 32 bit offsets must begin in 32bit boundaries\n".into());
    }
    t.val &= retain;
    t.mask |= !retain;
    pack_key(sel, t)
}

/// `pack_key16` and `pack_key8`: a field of `len` (2 or 1) bytes moved to its place in the word at
/// `t.off & !3`, the rest of the word kept by the mask.
fn pack_narrow(len: u32, retain: u32, sel: &mut Sel, t: &mut TKey) -> Step<()> {
    const M16: [u32; 3] = [0x0000_ffff, 0xff00_00ff, 0xffff_0000];
    const M8: [u32; 4] = [0x00ff_ffff, 0xff00_ffff, 0xffff_00ff, 0xffff_ff00];
    let max = if len == 2 { 0xffff } else { 0xff };
    if t.val > max || t.mask > max {
        return Err(if len == 2 {
            "pack_key16 bad value\n".into()
        } else {
            format!("pack_key8 bad value (val {:x} mask {:x}\n", t.val, t.mask)
        });
    }
    let ind = (t.off & 3) as usize;
    if len == 2 && ind == 3 {
        return Err(format!("pack_key16 bad index value {ind}\n"));
    }
    let stride = 8 * (4 - len - ind as u32);
    let m = if len == 2 { M16[ind] } else { M8[ind] };
    t.val = (t.val & retain) << stride;
    t.mask = ((t.mask | !retain) << stride) | m;
    t.off &= !3;
    pack_key(sel, t)
}

/// `pack_mac`: a 6-byte address as a 32-bit and a 16-bit key (or 16 then 32).
fn pack_mac(sel: &mut Sel, t: &mut TKey, mac: &[u8; 16]) -> Step<()> {
    let w32 = |at: usize| u32::from_be_bytes([mac[at], mac[at + 1], mac[at + 2], mac[at + 3]]);
    let w16 = |at: usize| u16::from_be_bytes([mac[at], mac[at + 1]]) as u32;
    if t.off & 3 == 0 {
        t.mask = 0;
        t.val = w32(0);
        let a = pack_key32(!0, sel, t);
        t.off = t.off.wrapping_add(4);
        t.mask = 0;
        t.val = w16(4);
        let b = pack_narrow(2, !0, sel, t);
        a.and(b)
    } else if t.off & 1 == 0 {
        t.mask = 0;
        t.val = w16(0);
        let a = pack_narrow(2, !0, sel, t);
        t.off = t.off.wrapping_add(4);
        t.mask = 0;
        t.val = w32(2);
        let b = pack_key32(!0, sel, t);
        a.and(b)
    } else {
        Err("pack_mac: mac offsets must begin in 32bit or 16bit boundaries\n".into())
    }
}

/// `pack_ipv6`: four 32-bit keys.
fn pack_ipv6(sel: &mut Sel, t: &mut TKey, addr: &[u8; 16]) -> Step<()> {
    if t.off & 3 != 0 {
        return Err("pack_ipv6: IPv6 offsets must begin in 32bit boundaries\n".into());
    }
    for i in 0..4 {
        t.mask = 0;
        t.val = u32::from_be_bytes([
            addr[4 * i],
            addr[4 * i + 1],
            addr[4 * i + 2],
            addr[4 * i + 3],
        ]);
        pack_key32(!0, sel, t)?;
        t.off = t.off.wrapping_add(4);
    }
    Ok(())
}

/// `parse_val`: into tc's 16-byte value buffer (`__u32 val[4]`, laid out as x86 lays it out).
fn parse_val(w: &str, ty: Type, buf: &mut [u8; 16]) -> Option<()> {
    match ty {
        Type::U32 => buf[..4].copy_from_slice(&get_u32(w, 0)?.to_le_bytes()),
        Type::Ipv4 => {
            // `addr.data[0]`: the address's bytes in network order, read back with `ntohl` later.
            let (a, _) = crate::util::get_prefix_ipv4(w)?;
            buf[..4].copy_from_slice(&a.to_be_bytes());
        }
        Type::Ipv6 => {
            let (a, l) = match w.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (w, None),
            };
            let bytes = if matches!(a, "default" | "any" | "all") {
                if l.is_some() {
                    return None;
                }
                [0; 16]
            } else {
                if !a.contains(':') {
                    return None;
                }
                if let Some(l) = l {
                    crate::util::get_unsigned(l).filter(|n| *n <= 128)?;
                }
                a.parse::<std::net::Ipv6Addr>().ok()?.octets()
            };
            buf.copy_from_slice(&bytes);
        }
        Type::Mac => {
            let (mac, n) = crate::util::ll_addr_a2n(w).ok()?;
            if n != 6 {
                return None;
            }
            buf[..6].copy_from_slice(&mac);
        }
    }
    Some(())
}

/// `parse_cmd`: the command (and value, and `retain`) for a field of `len` bytes at `t.off`.
fn parse_cmd(
    c: &mut Cur,
    len: u32,
    ty: Type,
    mut retain: u32,
    sel: &mut Sel,
    t: &mut TKey,
    allow_dec: bool,
) -> Result<Step<()>> {
    let Some(w) = c.peek() else {
        return Ok(Err(String::new()));
    };
    let o: u32 = match len {
        2 => 0xffff,
        4 => 0xffff_ffff,
        _ => 0xff,
    };
    let mut val = [0u8; 16];
    let mut m0 = 0u32;
    if matches(w, "invert") {
        val[..4].copy_from_slice(&o.to_le_bytes());
        m0 = o;
    } else if matches(w, "set") || matches(w, "add") {
        if matches(w, "add") {
            t.cmd = Cmd::Add;
        }
        if !sel.extended && t.cmd != Cmd::Set {
            return Ok(Err(
                "Non extended mode. only 'set' command is supported\n".into()
            ));
        }
        let v = c.next_arg()?;
        if parse_val(v, ty, &mut val).is_none() {
            return Ok(Err(String::new()));
        }
    } else if matches(w, "decrement") {
        if !allow_dec {
            return Ok(Err(
                "decrement command is not supported for this field\n".into()
            ));
        }
        if !sel.extended {
            return Ok(Err(
                "Non extended mode. only 'set' command is supported\n".into()
            ));
        }
        t.cmd = Cmd::Add;
        val[..4].copy_from_slice(&retain.to_le_bytes()); // decrement by overflow
    } else if matches(w, "preserve") {
        retain = 0;
    } else if !matches(w, "clear") {
        return Ok(Err(String::new()));
    }
    c.fwd();
    if c.peek().is_some_and(|w| matches(w, "retain")) {
        let v = c.next_arg()?;
        match get_u32(v, 0) {
            Some(r) => retain = r,
            None => return Ok(Err(String::new())),
        }
        c.fwd();
    }
    if len > 4 && retain != !0 {
        return Ok(Err(
            "retain is not supported for fields longer the 32 bits\n".into(),
        ));
    }
    Ok(match ty {
        Type::Mac => pack_mac(sel, t, &val),
        Type::Ipv6 => pack_ipv6(sel, t, &val),
        _ => {
            t.val = match ty {
                Type::Ipv4 => u32::from_be_bytes([val[0], val[1], val[2], val[3]]),
                _ => u32::from_le_bytes([val[0], val[1], val[2], val[3]]),
            };
            t.mask = m0;
            match len {
                1 | 2 => pack_narrow(len, retain, sel, t),
                _ => pack_key32(retain, sel, t),
            }
        }
    })
}

/// `parse_offset`: `N u8|u16|u32 [at A OFFMASK SHIFT] CMD`.
fn parse_offset(c: &mut Cur, sel: &mut Sel, t: &mut TKey) -> Result<Step<()>> {
    let Some(off) = c
        .peek()
        .and_then(crate::util::parse_c_integer)
        .and_then(|v| i32::try_from(v).ok())
    else {
        return Ok(Err(String::new()));
    };
    t.off = off as u32;
    c.fwd();
    let (len, retain) = match c.peek() {
        Some(w) if matches(w, "u32") => (4, 0xffff_ffff),
        Some(w) if matches(w, "u16") => (2, 0xffff),
        Some(w) if matches(w, "u8") => (1, 0xff),
        _ => return Ok(Err(String::new())),
    };
    let w = c.next_arg()?;
    if matches(w, "at") {
        let v = c.next_arg()?;
        let Some(at) = get_u32(v, 0) else {
            return Ok(Err(String::new()));
        };
        t.at = at;
        let v = c.next_arg()?;
        let Some(offmask) = get_u32(v, 16) else {
            return Ok(Err(String::new()));
        };
        t.offmask = offmask;
        let v = c.next_arg()?;
        let Some(shift) = get_u32(v, 0) else {
            return Ok(Err(String::new()));
        };
        t.shift = shift;
        c.next_arg()?;
    }
    parse_cmd(c, len, Type::U32, retain, sel, t, false)
}

/// A named field of a header: its offset, length, type, retain mask and whether it decrements.
struct Field {
    off: u32,
    len: u32,
    ty: Type,
    retain: u32,
    dec: bool,
}

const fn f(off: u32, len: u32, ty: Type, retain: u32) -> Field {
    Field {
        off,
        len,
        ty,
        retain,
        dec: false,
    }
}

/// The `p_X.c` parsers: the field a word names, `None` where tc's parser answers -1.
fn layered_field(kind: &str, w: &str, extended: bool) -> Option<Field> {
    const RU8: u32 = 0xff;
    const RU16: u32 = 0xffff;
    const RU32: u32 = 0xffff_ffff;
    match kind {
        "ip" => Some(match w {
            "src" => f(12, 4, Type::Ipv4, RU32),
            "dst" => f(16, 4, Type::Ipv4, RU32),
            "tos" => f(1, 1, Type::U32, RU8),
            _ if matches(w, "dsfield") => f(1, 1, Type::U32, RU8),
            "ihl" => f(0, 1, Type::U32, 0x0f),
            "ttl" => Field {
                dec: true,
                ..f(8, 1, Type::U32, RU8)
            },
            "protocol" => f(9, 1, Type::U32, RU8),
            _ if matches(w, "precedence") => f(1, 1, Type::U32, RU8),
            "nofrag" => f(6, 1, Type::U32, 0x3f),
            "firstfrag" => f(6, 1, Type::U32, 0x1f),
            "ce" => f(6, 1, Type::U32, 0x80),
            "df" => f(6, 1, Type::U32, 0x40),
            "mf" => f(6, 1, Type::U32, 0x20),
            // Fields past the IP header need the extended kABI's header types.
            _ if extended => return None,
            "dport" => f(22, 2, Type::U32, RU16),
            "sport" => f(20, 2, Type::U32, RU16),
            // tc 6.1 puts both ICMP fields at 20.
            "icmp_type" | "icmp_code" => f(20, 1, Type::U32, RU8),
            _ => return None,
        }),
        _ if !extended => None,
        "ip6" => Some(match w {
            "src" => f(8, 16, Type::Ipv6, RU32),
            "dst" => f(24, 16, Type::Ipv6, RU32),
            "flow_lbl" => f(0, 4, Type::U32, 0x0007_ffff),
            "payload_len" => f(4, 2, Type::U32, RU16),
            "nexthdr" => f(6, 1, Type::U32, RU8),
            "hoplimit" => Field {
                dec: true,
                ..f(7, 1, Type::U32, RU8)
            },
            "traffic_class" => f(1, 1, Type::U32, RU8),
            _ => return None,
        }),
        "tcp" => Some(match w {
            "sport" => f(0, 2, Type::U32, RU16),
            "dport" => f(2, 2, Type::U32, RU16),
            "flags" => f(13, 1, Type::U32, RU8),
            _ => return None,
        }),
        "udp" => Some(match w {
            "sport" => f(0, 2, Type::U32, RU16),
            "dport" => f(2, 2, Type::U32, RU16),
            _ => return None,
        }),
        "eth" => Some(match w {
            "type" => f(12, 2, Type::U32, RU16),
            "dst" => f(0, 6, Type::Mac, RU32),
            "src" => f(6, 6, Type::Mac, RU32),
            _ => return None,
        }),
        _ => None,
    }
}

/// `parse_munge`: `offset …` or `KIND FIELD CMD`.
fn parse_munge(c: &mut Cur, sel: &mut Sel) -> Result<Step<()>> {
    let mut t = TKey::default();
    let Some(w) = c.peek() else {
        return Ok(Err(String::new()));
    };
    if matches(w, "offset") {
        c.next_arg()?;
        return parse_offset(c, sel, &mut t);
    }
    let kind = w;
    let field_word = c.next_arg()?;
    let known = ["ip", "ip6", "udp", "tcp", "eth", "icmp"].contains(&kind);
    if !known {
        // `pedit_parse_nopopt`: a kind tc has no parser for.
        return Ok(Err(format!(
            "Unknown action  hence option \"{field_word}\" is unparsable\nbad pedit parsing\n"
        )));
    }
    let fail = |why: String| Ok(Err(format!("{why}bad pedit parsing\n")));
    // Every parser wants a field and a command (`argc < 2`).
    if c.left() < 2 {
        return fail(String::new());
    }
    let Some(fl) = layered_field(kind, field_word, sel.extended) else {
        return fail(String::new());
    };
    t.htype = match kind {
        "ip" if sel.extended => HeaderType::Ip4,
        "ip" => HeaderType::Network,
        "ip6" => HeaderType::Ip6,
        "tcp" => HeaderType::Tcp,
        "udp" => HeaderType::Udp,
        _ => HeaderType::Eth,
    };
    t.off = fl.off;
    c.next_arg()?;
    match parse_cmd(c, fl.len, fl.ty, fl.retain, sel, &mut t, fl.dec)? {
        Err(why) => fail(why),
        Ok(()) => {
            if kind == "ip6" && field_word == "traffic_class" {
                // The traffic class straddles a nibble: shift the key by 4 bits.
                if let Some(k) = sel.keys.last_mut() {
                    k.mask = (k.mask << 4) | 0xf;
                    k.val <<= 4;
                }
            }
            Ok(Ok(()))
        }
    }
}

/// `parse_pedit`.
pub(super) fn parse_pedit(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut sel = Sel {
        keys: Vec::new(),
        extended: false,
    };
    let mut ok = 0;
    while let Some(w) = c.peek() {
        if matches(w, "pedit") {
            let next = c.next_arg()?;
            ok += 1;
            if matches(next, "ex") {
                if ok > 1 {
                    return Err(bad(format!(
                        "'ex' must be before first 'munge'\n{PEDIT_USAGE}"
                    )));
                }
                sel.extended = true;
                c.next_arg()?;
            }
        } else if matches(w, "help") {
            return Err(Failure::syntax(PEDIT_USAGE));
        } else if matches(w, "munge") {
            if ok == 0 {
                return Err(bad(format!("Bad pedit construct ({w})\n{PEDIT_USAGE}")));
            }
            let what = c.next_arg()?;
            let start = c.i;
            if let Err(why) = parse_munge(c, &mut sel)? {
                c.i = start;
                return Err(bad(format!(
                    "{why}Bad pedit construct ({what})\n{PEDIT_USAGE}"
                )));
            }
            ok += 1;
        } else {
            break;
        }
    }
    if ok == 0 {
        return Err(bad(PEDIT_USAGE));
    }
    let mut p = Pedit {
        action: TC_ACT_OK,
        keys: sel.keys,
        extended: sel.extended,
    };
    p.action = control_or(c, p.action)?;
    let index = index_arg(c, 10, |_| "Pedit: Illegal \"index\"".into())?.unwrap_or(0);
    Ok((ActionParams::Pedit(p), index))
}

/// `print_pedit`.
pub(super) fn print(p: &mut Printer, a: &Action, e: &Pedit, flags: ShowFlags, now: u64) {
    p.string("kind", " pedit ", "pedit");
    print_control(p, "action ", e.action, " ");
    let n = e.keys.len();
    p.number("nkeys", format_args!("keys {n}\n"), n);
    index_refs(p, a, " \t index ", flags, now);
    p.open_array("keys");
    for (i, k) in e.keys.iter().enumerate() {
        p.open_object(None);
        p.fp(format_args!("\n\t key #{i}  at "));
        let htype = match k.htype {
            HeaderType::Network => None,
            HeaderType::Eth => Some("eth"),
            HeaderType::Ip4 => Some("ipv4"),
            HeaderType::Ip6 => Some("ipv6"),
            HeaderType::Tcp => Some("tcp"),
            HeaderType::Udp => Some("udp"),
        };
        match htype {
            Some(h) => {
                p.string("htype", h, h);
                p.number("offset", format_args!("{:+}", k.off), k.off);
            }
            None => {
                p.json_string("htype", "network");
                p.number("offset", format_args!("{}", k.off), k.off);
            }
        }
        // Text says `val` for set (as tc always has), JSON the command's name.
        let (text, json) = match k.cmd {
            Cmd::Set => ("val", "set"),
            Cmd::Add => ("add", "add"),
        };
        p.fp(format_args!(": {text}"));
        p.json_string("cmd", json);
        p.hex("val", format_args!(" {:08x}", k.val), k.val);
        p.hex("mask", format_args!(" mask {:08x}", k.mask), k.mask);
        p.close_object();
    }
    p.close_array();
    p.nl();
}
