//! Classic BPF in the tc language, shared by the `bpf` classifier and action (`lib/bpf_legacy.c`:
//! `bpf_do_parse`, `bpf_ops_parse`, `bpf_parse_string`, `bpf_print_ops`).

use crate::jprint::Printer;
use crate::util::matches;
use crate::{Cur, Failure};
use tclab_core::bpf::{Insn, MAXINSNS};

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

/// Why a program could not be read: tc's lines (`bpf_ops_parse`, `bpf_do_parse`), an eBPF object
/// tclab refuses, or a command line that ended (`NEXT_ARG`).
pub(crate) enum ProgramError {
    Parse(String),
    Ebpf(String),
    Syntax(Failure),
}

/// `bpf_do_parse` at the mode word (`bytecode`, `bytecode-file`, `object-file`, `object-pinned`),
/// leaving the cursor on the mode's value.
pub(crate) fn parse_program(c: &mut Cur) -> std::result::Result<Vec<Insn>, ProgramError> {
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
        return Err(ProgramError::Ebpf(format!(
            "Error: tclab does not run eBPF programs (\"{w}\"): they need the kernel's verifier and BPF runtime; classic BPF (bytecode) runs."
        )));
    } else {
        return Err(ProgramError::Parse(format!("What mode is \"{w}\"?")));
    };
    let v = c.next_arg().map_err(ProgramError::Syntax)?;
    let text = if file {
        read_bytecode_file(v).map_err(ProgramError::Parse)?
    } else {
        v.to_string()
    };
    parse_ops(&text).map_err(ProgramError::Parse)
}

/// `bpf_print_ops`: `bytecode 'N,c t f k,…'` (in JSON an object with the length and the instructions).
pub(crate) fn print_ops(p: &mut Printer, ops: &[Insn]) {
    let n = ops.len();
    if n == 0 {
        return;
    }
    p.open_object(Some("bytecode"));
    p.number("length", format_args!("bytecode '{n},"), n);
    p.open_array("insns");
    for (i, op) in ops.iter().enumerate() {
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
}
