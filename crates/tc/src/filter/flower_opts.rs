//! flower's tunnel option words as iproute2 6.1's `f_flower.c` has them: `geneve_opts
//! CLASS:TYPE:DATA[/CLASS:TYPE:DATA][,…]` (hex; a missing mask is all ones over the key's data),
//! `vxlan_opts GBP[/MASK]`, `erspan_opts VER:INDEX:DIR:HWID[/MASK]` (base 0; the default mask keeps
//! the key's version) and `gtp_opts PDU_TYPE:QFI[/MASK]` (hex); each failure is tc's `Illegal
//! "…_opts"`. And `flower_print_enc_opts`: each option `key/mask`, comma-separated, the JSON arrays
//! of the key's and the mask's options (none for GTP's, as tc prints none).

use super::*;
use crate::action::hex2mem;
use crate::util::get_u16;
use tclab_core::action::tunnel_key::GeneveOpt;
use tclab_core::filter::flower_opts::{dump, DumpedOpts, EncOpts, EncOptsSpec, ErspanSpec};

fn get_u8(s: &str, base: u32) -> Option<u8> {
    get_u32(s, base).and_then(|v| u8::try_from(v).ok())
}

/// `strsep(&s, sep)` over the whole string: every piece, empty ones too.
fn pieces(s: &str, sep: char) -> std::str::Split<'_, char> {
    s.split(sep)
}

/// `flower_check_enc_opt_key`: exactly two colons, and no empty class, type or data.
fn check_key(k: &str) -> bool {
    let parts: Vec<&str> = k.split(':').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty())
}

/// `flower_parse_geneve_opt`: one option, an empty field left out; a fourth field is unknown.
fn geneve_opt(s: &str) -> std::result::Result<GeneveOpt, String> {
    let mut g = GeneveOpt {
        class: None,
        kind: None,
        data: None,
    };
    for (i, t) in pieces(s, ':').enumerate() {
        if i > 2 {
            return Err("Unknown \"geneve_opts\" type\n".into());
        }
        if t.is_empty() {
            continue;
        }
        match i {
            0 => g.class = Some(get_u16(t, 16).ok_or("")?),
            1 => g.kind = Some(get_u8(t, 16).ok_or("")?),
            _ => g.data = Some(hex2mem(t).ok_or("")?),
        }
    }
    Ok(g)
}

/// `flower_parse_enc_opts_geneve`.
fn geneve(s: &str) -> std::result::Result<EncOptsSpec, String> {
    let (mut key, mut mask) = (Vec::new(), Vec::new());
    for token in pieces(s, ',') {
        let (k, m) = match token.split_once('/') {
            Some((k, m)) => (k, m.to_string()),
            // Pad out the mask: the class, the type and every digit of the data.
            None => {
                let data = k_data_len(token);
                (token, format!("ffff:ff:{}", "f".repeat(data)))
            }
        };
        if !check_key(k) {
            return Err(String::new());
        }
        key.push(geneve_opt(k)?);
        mask.push(geneve_opt(&m)?);
    }
    Ok(EncOptsSpec::Geneve { key, mask })
}

/// The digits after the key's last colon (`strlen(rindex(token, ':')) - 1`).
fn k_data_len(token: &str) -> usize {
    token.rsplit_once(':').map_or(0, |(_, d)| d.len())
}

/// `flower_parse_erspan_opt`: version, index (big-endian), direction, hardware id, each base 0;
/// a fifth field is unknown (tc names it geneve's).
fn erspan_opt(s: &str) -> std::result::Result<ErspanSpec, String> {
    let mut e = ErspanSpec::default();
    for (i, t) in pieces(s, ':').enumerate() {
        if i > 3 {
            return Err("Unknown \"geneve_opts\" type\n".into());
        }
        if t.is_empty() {
            continue;
        }
        match i {
            0 => e.ver = Some(get_u8(t, 0).ok_or("")?),
            1 => e.index = Some(get_u32(t, 0).ok_or("")?),
            2 => e.dir = Some(get_u8(t, 0).ok_or("")?),
            _ => e.hwid = Some(get_u8(t, 0).ok_or("")?),
        }
    }
    Ok(e)
}

/// `flower_parse_gtp_opt`: PDU type and QFI in hex; what follows them is not read. `Ok(None)` for
/// a part without its `:` whose PDU type passed: tc 6.1 goes on to the missing QFI field
/// (`strlen(NULL)`) and dies of SIGSEGV.
fn gtp_opt(s: &str) -> std::result::Result<Option<[Option<u8>; 2]>, String> {
    let mut v = [None; 2];
    let mut fields = pieces(s, ':');
    for slot in v.iter_mut() {
        let Some(t) = fields.next() else {
            return Ok(None);
        };
        if !t.is_empty() {
            *slot = Some(get_u8(t, 16).ok_or("")?);
        }
    }
    Ok(Some(v))
}

/// The option words: `word`'s value as tc sends it, or tc's message.
pub(super) fn parse(word: &str, v: &str) -> Result<EncOptsSpec> {
    let r = match word {
        "geneve_opts" => geneve(v),
        "vxlan_opts" => {
            let (k, m) = v.split_once('/').unwrap_or((v, "0xffffffff"));
            match (get_u32(k, 0), get_u32(m, 0)) {
                (Some(key), Some(mask)) => Ok(EncOptsSpec::Vxlan { key, mask }),
                _ => Err(String::new()),
            }
        }
        "erspan_opts" => {
            let (k, m) = match v.split_once('/') {
                Some((k, m)) => (k, m.to_string()),
                // tc 6.1 copies the key up to its first ':' into the mask (`memcpy(mask, str,
                // strchr(str, ':') - str)`): without one the length is wild, and glibc's fortified
                // memcpy aborts the program (SIGABRT, 134 from a shell).
                None if !v.contains(':') => {
                    return Err(Failure::exit(
                        134,
                        "*** buffer overflow detected ***: terminated",
                    ))
                }
                // The key's version, then all ones.
                None => {
                    let ver = v.split(':').next().unwrap_or("");
                    (v, format!("{ver}:0xffffffff:0xff:0xff"))
                }
            };
            erspan_opt(k).and_then(|key| {
                Ok(EncOptsSpec::Erspan {
                    key,
                    mask: erspan_opt(&m)?,
                })
            })
        }
        _ => {
            let (k, m) = v.split_once('/').unwrap_or((v, "ff:ff"));
            // tc's crash is silent: the shell reports the signal as exit status 139.
            let crash = || {
                Failure::silent(
                    139,
                    "flower_parse_gtp_opt (f_flower.c): a gtp_opts part without its ':' is read \
                     past its end (strlen(NULL)), and tc 6.1 dies of SIGSEGV",
                )
            };
            // The key is read first: a crash there comes before anything wrong with the mask.
            match gtp_opt(k) {
                Ok(None) => return Err(crash()),
                Ok(Some(key)) => match gtp_opt(m) {
                    Ok(None) => return Err(crash()),
                    Ok(Some(mask)) => Ok(EncOptsSpec::Gtp { key, mask }),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
    };
    r.map_err(|before| Failure::options(format!("{before}Illegal \"{word}\"")))
}

/// One family's options as tc writes them (`flower_print_*_opts`' string), and their JSON.
fn text(d: &DumpedOpts) -> String {
    match d {
        DumpedOpts::Geneve(list) => list
            .iter()
            .map(|(class, kind, data)| {
                let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
                format!("{class:04x}:{kind:02x}:{hex}")
            })
            .collect::<Vec<_>>()
            .join(","),
        DumpedOpts::Vxlan(gbp) => gbp.to_string(),
        DumpedOpts::Erspan {
            ver,
            index,
            dir,
            hwid,
        } => format!("{ver}:{index}:{dir}:{hwid}"),
        DumpedOpts::Gtp { pdu_type, qfi } => format!("{pdu_type:02x}:{qfi:02x}"),
    }
}

fn json(d: &DumpedOpts) -> Option<serde_json::Value> {
    use serde_json::json;
    Some(match d {
        DumpedOpts::Geneve(list) => json!(list
            .iter()
            .map(|(class, kind, data)| json!({"class": class, "type": kind, "data": data}))
            .collect::<Vec<_>>()),
        DumpedOpts::Vxlan(gbp) => json!([{ "gbp": gbp }]),
        DumpedOpts::Erspan {
            ver,
            index,
            dir,
            hwid,
        } => json!([{"ver": ver, "index": index, "dir": dir, "hwid": hwid}]),
        DumpedOpts::Gtp { .. } => return None,
    })
}

/// `flower_print_enc_opts`: `\n  geneve_opts KEY/MASK[,KEY/MASK…]` (the family's name), after the
/// other tunnel keys.
pub(super) fn print(k: &EncOpts, m: &EncOpts, p: &mut Printer) {
    let Some(key) = dump(k) else { return };
    let mask = dump(m);
    let name = match key {
        DumpedOpts::Geneve(_) => "geneve",
        DumpedOpts::Vxlan(_) => "vxlan",
        DumpedOpts::Erspan { .. } => "erspan",
        DumpedOpts::Gtp { .. } => "gtp",
    };
    if let Some(j) = json(&key) {
        p.value(Some(&format!("{name}_opt_key")), &j);
    }
    if let Some(j) = mask.as_ref().and_then(json) {
        p.value(Some(&format!("{name}_opt_mask")), &j);
    }
    // flower_print_enc_parts: the key's and the mask's comma-separated parts side by side.
    let (kt, mt) = (text(&key), mask.as_ref().map(text).unwrap_or_default());
    let mut mparts = mt.split(',');
    let out: Vec<String> = kt
        .split(',')
        .map(|kp| format!("{kp}/{}", mparts.next().unwrap_or("(null)")))
        .collect();
    p.fp(format_args!("\n  {name}_opts {}", out.join(",")));
}
