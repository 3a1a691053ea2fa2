//! `bpf` (`f_bpf.c`, with `lib/bpf_legacy.c`'s `bpf_do_parse`, `bpf_ops_parse` and `bpf_print_ops`):
//! classic BPF as `bytecode 'N,c t f k,…'` or `bytecode-file FILE`; eBPF objects are refused (tclab
//! has no eBPF runtime). The printer prints through jprint, as tc's does.

use super::*;
use tclab_core::bpf::{Insn, MAXINSNS};
use tclab_core::filter::bpf::{BpfFilter, BpfOptions, FLAG_ACT_DIRECT};

pub(super) const BPF_USAGE: &str = "Usage: ... bpf ...\n\nBPF use case:\n bytecode BPF_BYTECODE\n bytecode-file FILE\n\neBPF use case:\n object-file FILE [ section CLS_NAME ] [ export UDS_FILE ] [ verbose ] [ direct-action ] [ skip_hw | skip_sw ]\n object-pinned FILE [ direct-action ] [ skip_hw | skip_sw ]\n\nCommon remaining options:\n [ action ACTION_SPEC ]\n [ classid CLASSID ]\n\nWhere BPF_BYTECODE := 's,c t f k,c t f k,c t f k,...'\nc,t,f,k and s are decimals; s denotes number of 4-tuples\n\nWhere FILE points to a file containing the BPF_BYTECODE string,\nan ELF file containing eBPF map definitions and bytecode, or a\npinned eBPF program.\n\nWhere CLS_NAME refers to the section name containing the\nclassifier (default 'classifier').\n\nWhere UDS_FILE points to a unix domain socket file in order\nto hand off control of all created eBPF maps to an agent.\n\nACTION_SPEC := ... look at individual actions\nNOTE: CLASSID is parsed as hexadecimal input.";

/// `sscanf`'s `%u` (and `%hu`, `%hhu` truncated by the caller): blanks, a sign, decimal digits; the
/// value as `strtoul` wraps it, and the rest of the text.
fn scan_u(s: &str) -> Option<(u64, &str)> {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if n == 0 {
        return None;
    }
    let v = t[..n].bytes().fold(0u64, |v, d| {
        v.wrapping_mul(10).wrapping_add((d - b'0') as u64)
    });
    Some((if neg { v.wrapping_neg() } else { v }, &t[n..]))
}

/// `bpf_ops_parse` of a `BPF_BYTECODE` string; the error is tc's line, if it prints one.
fn parse_ops(s: &str) -> std::result::Result<Vec<Insn>, String> {
    // `sscanf("%hu%c")`: the count, then the separator right after it.
    let (len, rest) = scan_u(s).ok_or_else(String::new)?;
    if !rest.starts_with(',') {
        return Err(String::new());
    }
    let len = len as u16 as usize;
    if len == 0 || len > MAXINSNS {
        return Err(String::new());
    }
    let mut ops = Vec::new();
    // Each token after a separator (a trailing one ends the list).
    let mut token = s;
    while let Some(at) = token.find(',') {
        token = &token[at + 1..];
        if token.is_empty() {
            break;
        }
        if ops.len() >= len {
            return Err("Real program length exceeds encoded length parameter!".into());
        }
        let err = || format!("Error at instruction {}!", ops.len());
        let (code, r) = scan_u(token).ok_or_else(err)?;
        let (jt, r) = scan_u(r).ok_or_else(err)?;
        let (jf, r) = scan_u(r).ok_or_else(err)?;
        let (k, _) = scan_u(r).ok_or_else(err)?;
        ops.push(Insn {
            code: code as u16,
            jt: jt as u8,
            jf: jf as u8,
            k: k as u32,
        });
    }
    if ops.len() != len {
        return Err("Parsed program length is less than encoded length parameter!".into());
    }
    Ok(ops)
}

/// `bpf_parse_string`'s reading of a file: newlines become separators, runs of blanks one blank.
fn read_bytecode_file(path: &str) -> std::result::Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let e = e.to_string();
        let e = e.split(" (os error").next().unwrap_or(&e).to_string();
        format!("Cannot fopen: {e}")
    })?;
    let mut out = String::new();
    let mut prev = ' ';
    for c in text.chars() {
        match c {
            '\n' => {
                if prev != ',' {
                    out.push(',');
                }
                prev = ',';
            }
            ' ' | '\t' => {
                if prev != ' ' {
                    out.push(c);
                }
                prev = ' ';
            }
            _ => {
                out.push(c);
                prev = c;
            }
        }
    }
    Ok(out)
}

/// `bpf_do_parse` at the mode word: the program, or tc's failure.
fn parse_mode(c: &mut Cur) -> Result<Vec<Insn>> {
    let unable = |msg: String| {
        let sep = if msg.is_empty() { "" } else { "\n" };
        Failure::options(format!("{msg}{sep}Unable to parse bpf command line"))
    };
    let w = c.peek().unwrap_or("");
    let file = if matches(w, "bytecode") || w == "bc" {
        false
    } else if matches(w, "bytecode-file") || w == "bcf" {
        true
    } else if matches(w, "object-file")
        || w == "obj"
        || matches(w, "object-pinned")
        || matches(w, "pinned")
        || matches(w, "fd")
    {
        return Err(Failure::options(format!(
            "Error: tclab does not run eBPF programs (\"{w}\"): they need the kernel's verifier and BPF runtime; classic BPF (bytecode) runs.\nUnable to load program"
        )));
    } else {
        return Err(unable(format!("What mode is \"{w}\"?")));
    };
    let v = c.next_arg()?;
    let text = if file {
        read_bytecode_file(v).map_err(unable)?
    } else {
        v.to_string()
    };
    parse_ops(&text).map_err(unable)
}

/// `bpf_parse_opt`.
pub(super) fn parse_bpf(handle: Option<&str>, c: &mut Cur) -> Result<(u32, Option<FilterOptions>)> {
    let mut h = 0;
    if let Some(s) = handle {
        h = get_u32(s, 0).ok_or_else(|| Failure::options("Illegal \"handle\""))?;
    }
    if c.left() == 0 {
        return Ok((h, None));
    }
    let mut o = BpfOptions::default();
    let mut seen_run = false;
    while let Some(w) = c.peek() {
        if matches(w, "run") {
            let v = c.next_arg()?;
            if seen_run {
                return Err(crate::duparg("run", v));
            }
            seen_run = true;
            o.ops = Some(parse_mode(c)?);
        } else if matches(w, "classid") || matches(w, "flowid") {
            o.classid = Some(classid_arg(c)?);
        } else if matches(w, "direct-action") || matches(w, "da") {
            o.flags |= FLAG_ACT_DIRECT;
        } else if matches(w, "skip_hw") {
            o.gen_flags |= CLS_FLAGS_SKIP_HW;
        } else if matches(w, "skip_sw") {
            o.gen_flags |= CLS_FLAGS_SKIP_SW;
        } else if matches(w, "action") {
            o.exts.actions = filter_actions(c, "\"action\"")?;
            continue;
        } else if matches(w, "police") {
            o.exts.police = Some(filter_police(c)?);
            continue;
        } else if matches(w, "help") {
            return Err(Failure::options(BPF_USAGE));
        } else if !seen_run {
            seen_run = true;
            o.ops = Some(parse_mode(c)?);
        } else {
            return Err(Failure::options(format!("What is \"{w}\"?\n{BPF_USAGE}")));
        }
        c.fwd();
    }
    o.exts.cls_flags = cls_to_act_flags(o.gen_flags);
    Ok((h, Some(FilterOptions::Bpf(o))))
}

/// `bpf_print_opt` for a classic program.
pub(super) fn print(f: &BpfFilter, flags: ShowFlags, now: Nanos, p: &mut Printer) {
    if f.handle != 0 {
        p.hex0x(
            "handle",
            format_args!("handle {:#x} ", f.handle),
            f.handle as u64,
        );
    }
    if let Some(cl) = f.classid {
        let c = sprint_classid(cl);
        p.string("flowid", format_args!("flowid {c} "), &c);
    }
    if f.direct {
        p.boolean("direct-action", "direct-action ", true);
    }
    if f.gen_flags & CLS_FLAGS_SKIP_HW != 0 {
        p.boolean("skip_hw", "skip_hw ", true);
    }
    if f.gen_flags & CLS_FLAGS_SKIP_SW != 0 {
        p.boolean("skip_sw", "skip_sw ", true);
    }
    if f.gen_flags & CLS_FLAGS_NOT_IN_HW != 0 {
        p.boolean("not_in_hw", "not_in_hw ", true);
    }
    // `bpf_print_ops`.
    let n = f.ops.len();
    p.open_object(Some("bytecode"));
    p.number("length", format_args!("bytecode '{n},"), n);
    p.open_array("insns");
    for (i, op) in f.ops.iter().enumerate() {
        p.open_object(None);
        p.number("code", format_args!("{} ", op.code), op.code);
        p.number("jt", format_args!("{} ", op.jt), op.jt);
        p.number("jf", format_args!("{} ", op.jf), op.jf);
        let end = if i + 1 == n { '\'' } else { ',' };
        p.number("k", format_args!("{}{end}", op.k), op.k);
        p.close_object();
    }
    p.close_array();
    p.close_object();
    if f.exts.police_compat {
        p.nl();
    }
    print_exts(&f.exts, flags, now, p);
}
