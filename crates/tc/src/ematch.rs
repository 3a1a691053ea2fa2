//! The ematch language of `basic … match EXPR` and `flow … match EXPR` (iproute2's `tc/m_ematch.c`,
//! `emp_ematch.l`, `emp_ematch.y`, `em_cmp.c`, `em_u32.c`, `em_meta.c`, `em_canid.c`, 6.1), and its printer.
//!
//! tc's lexer reads the words after `match` one at a time, each followed by a space, so an expression may
//! be one quoted word or many (`match cmp\(u8 at 9 eq 6\) and …`). Tokens are `and`, `or`, `not` (any
//! case), `(`, `)`, quoted strings, and any other run of characters. The grammar:
//!
//! ```text
//! input := [ expr ]            expr  := match [ (and|or) expr ]
//! match := [not] KIND '(' ARG... ')' | [not] '(' expr ')'
//! ```
//!
//! The first token after a complete top-level expression ends it (bison's `expr error` rule) and tc steps
//! back one word — the word that token came from — for the classifier to read next (`classid 1:1`,
//! `action drop`). At the end of the line it steps back too, onto the expression's own last word, which
//! the classifier then reports as unknown: tc 6.1 rejects `basic match 'cmp(…)'` with nothing after it
//! (`What is "cmp(…)"?`), and tclab does the same.
//!
//! The parsed expression is flattened as `flatten_tree` does — each parenthesised sequence appended after
//! the sequence that contains it, and replaced there by a container pointing at it — into the list the
//! kernel receives ([`EmatchTree`]). Kinds tc knows but tclab's kernel has no module for are refused
//! where this machine's tc 6.1 refuses them: `ipset` and `ipt` by tc itself (no set by any name; no
//! xtables match by any name, after glibc's `getopt_long` over the arguments), `nbyte` by the kernel
//! (ENOENT, `EmKind::Unloaded`) once tc has checked its words and the classifier's after the tree.

use crate::action::Cur;

/// What `parse_ematch` yields.
pub type EmatchTreeOpt = EmatchTree;
use crate::{Failure, Result};
use std::fmt::Write;
use tclab_core::filter::ematch::{
    meta_id, CanFilter, Cmp, EmKind, Ematch, EmatchTree, Meta, MetaVal, U32Key, CAN_EFF_FLAG,
    CAN_EFF_MASK, CAN_SFF_MASK, INVERT, KIND_NBYTE, META_TYPE_INT, META_TYPE_VAR, OPND_EQ, OPND_GT,
    OPND_LT, REL_AND, REL_END, REL_MASK, REL_OR,
};

const EXPR_USAGE: &str = "Usage: EXPR\nwhere: EXPR  := TERM [ { and | or } EXPR ]\n       TERM  := [ not ] { MATCH | '(' EXPR ')' }\n       MATCH := module '(' ARGS ')'\n       ARGS := ARG1 ARG2 ...\n\nExample: a(x y) and not (b(x) or c(x y z))";
const CMP_USAGE: &str = "Usage: cmp(ALIGN at OFFSET [ ATTRS ] { eq | lt | gt } VALUE)\nwhere: ALIGN  := { u8 | u16 | u32 }\n       ATTRS  := [ layer LAYER ] [ mask MASK ] [ trans ]\n       LAYER  := { link | network | transport | 0..2 }\n\nExample: cmp(u16 at 3 layer 2 mask 0xff00 gt 20)";
const U32_USAGE: &str = "Usage: u32(ALIGN VALUE MASK at [ nexthdr+ ] OFFSET)\nwhere: ALIGN  := { u8 | u16 | u32 }\n\nExample: u32(u16 0x1122 0xffff at nexthdr+4)";
const META_USAGE: &str = "Usage: meta(OBJECT { eq | lt | gt } OBJECT)\nwhere: OBJECT  := { META_ID | VALUE }\n       META_ID := id [ shift SHIFT ] [ mask MASK ]\n\nExample: meta(nf_mark gt 24)\n         meta(indev shift 1 eq \"ppp\")\n         meta(tcindex mask 0xf0 eq 0xf0)\n\nFor a list of meta identifiers, use meta(list).";
const CANID_USAGE: &str = "Usage: canid(IDLIST)\nwhere: IDLIST := IDSPEC [ IDLIST ]\n       IDSPEC := { ’sff’ CANID | ’eff’ CANID }\n       CANID := ID[:MASK]\n       ID, MASK := hexadecimal number (i.e. 0x123)\nExample: canid(sff 0x123 sff 0x124 sff 0x125:0xf)";

/// A token and the index (relative to the first word) of the word it came from.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Attr(Vec<u8>, bool),
    And,
    Or,
    Not,
    Open,
    Close,
    /// A bad escape in a quoted string (the lexer's `ERROR`).
    Error(String),
}

/// `emp_ematch.l`: the words, each followed by a space, as one character stream.
fn lex(words: &[String]) -> Vec<(Tok, usize)> {
    let mut chars: Vec<(u8, usize)> = Vec::new();
    for (w, word) in words.iter().enumerate() {
        if word.is_empty() {
            continue;
        }
        chars.extend(word.bytes().map(|b| (b, w)));
        chars.push((b' ', w));
    }
    let mut out = Vec::new();
    let mut i = 0;
    let delim = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b'(' | b')');
    while i < chars.len() {
        let (b, w) = chars[i];
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'(' => {
                out.push((Tok::Open, w));
                i += 1;
            }
            b')' => {
                out.push((Tok::Close, w));
                i += 1;
            }
            b'"' => {
                i += 1;
                let mut s = Vec::new();
                let mut closed = false;
                while i < chars.len() {
                    let (c, _) = chars[i];
                    if c == b'"' {
                        closed = true;
                        i += 1;
                        break;
                    }
                    if c == b'\\' && i + 1 < chars.len() {
                        let n = chars[i + 1].0;
                        if n.is_ascii_digit() {
                            let mut j = i + 1;
                            while j < chars.len() && chars[j].0.is_ascii_digit() {
                                j += 1;
                            }
                            let digits: String =
                                chars[i + 1..j].iter().map(|c| c.0 as char).collect();
                            let octal = digits.len() <= 3 && digits.bytes().all(|d| d < b'8');
                            if !octal {
                                out.push((
                                    Tok::Error("error: invalid octale escape sequence".into()),
                                    w,
                                ));
                                return out;
                            }
                            let v = u32::from_str_radix(&digits, 8).unwrap_or(0);
                            if v > 0xff {
                                out.push((
                                    Tok::Error("error: octal escape sequence out of range".into()),
                                    w,
                                ));
                                return out;
                            }
                            s.push(v as u8);
                            i = j;
                            continue;
                        }
                        if n == b'x' && i + 2 < chars.len() && chars[i + 2].0.is_ascii_hexdigit() {
                            let mut j = i + 2;
                            while j < chars.len() && j < i + 4 && chars[j].0.is_ascii_hexdigit() {
                                j += 1;
                            }
                            let digits: String =
                                chars[i + 2..j].iter().map(|c| c.0 as char).collect();
                            s.push(u8::from_str_radix(&digits, 16).unwrap_or(0));
                            i = j;
                            continue;
                        }
                        s.push(match n {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'v' => 0x0b,
                            b'b' => 0x08,
                            b'f' => 0x0c,
                            b'a' => 0x07,
                            other => other,
                        });
                        i += 2;
                        continue;
                    }
                    s.push(c);
                    i += 1;
                }
                if !closed {
                    // An unterminated string runs to the end of input: no token.
                    return out;
                }
                out.push((Tok::Attr(s, true), w));
            }
            _ => {
                let start = i;
                while i < chars.len() && !delim(chars[i].0) {
                    i += 1;
                }
                let text: Vec<u8> = chars[start..i].iter().map(|c| c.0).collect();
                let tok = match text.to_ascii_lowercase().as_slice() {
                    b"and" => Tok::And,
                    b"or" => Tok::Or,
                    b"not" => Tok::Not,
                    _ => Tok::Attr(text, false),
                };
                out.push((tok, w));
            }
        }
    }
    out
}

/// An argument of an ematch (`struct bstr`): its bytes and whether it was quoted.
type Arg = (Vec<u8>, bool);
/// One entry of the flattened list: inverted, relation, the kind and its arguments (none for a
/// container), the container's target.
type FlatEntry = (bool, u16, Option<(Vec<u8>, Vec<Arg>)>, u32);

/// A parsed term.
#[derive(Debug)]
struct Node {
    inverted: bool,
    relation: u16,
    body: Body,
}

#[derive(Debug)]
enum Body {
    /// The kind's name and its arguments (`struct bstr`: bytes and whether quoted).
    Match(Vec<u8>, Vec<(Vec<u8>, bool)>),
    Group(Vec<Node>),
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    /// `expr`: a sequence of terms joined by `and`/`or`. `Err(())` is a syntax error.
    fn expr(&mut self) -> std::result::Result<Vec<Node>, ()> {
        let mut seq = Vec::new();
        loop {
            let mut n = self.term()?;
            let rel = match self.peek() {
                Some(Tok::And) => REL_AND,
                Some(Tok::Or) => REL_OR,
                _ => REL_END,
            };
            n.relation = rel;
            seq.push(n);
            if rel == REL_END {
                return Ok(seq);
            }
            self.pos += 1;
        }
    }

    fn term(&mut self) -> std::result::Result<Node, ()> {
        let inverted = if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            true
        } else {
            false
        };
        match self.peek().cloned() {
            Some(Tok::Open) => {
                self.pos += 1;
                let inner = self.expr()?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(());
                }
                self.pos += 1;
                Ok(Node {
                    inverted,
                    relation: REL_END,
                    body: Body::Group(inner),
                })
            }
            Some(Tok::Attr(kind, _)) => {
                self.pos += 1;
                if self.peek() != Some(&Tok::Open) {
                    return Err(());
                }
                self.pos += 1;
                let mut args = Vec::new();
                while let Some(Tok::Attr(a, q)) = self.peek().cloned() {
                    args.push((a, q));
                    self.pos += 1;
                }
                if args.is_empty() || self.peek() != Some(&Tok::Close) {
                    return Err(());
                }
                self.pos += 1;
                Ok(Node {
                    inverted,
                    relation: REL_END,
                    body: Body::Match(kind, args),
                })
            }
            _ => Err(()),
        }
    }
}

/// Where tc stood when an error was reported: the words read so far (`begin_argv` up to `ematch_argv`).
struct ErrCtx<'a> {
    words: &'a [String],
    consumed: usize,
}

impl ErrCtx<'_> {
    /// `em_parse_error`'s text: the message, the words read with the last one marked, the arguments of
    /// the ematch with the faulty one marked, and the usage.
    fn error(
        &self,
        msg: &str,
        ematch_err: Option<&str>,
        args: Option<(&str, &[Arg], Option<usize>)>,
        usage: &str,
    ) -> Failure {
        let mut s = String::from(msg);
        match ematch_err {
            Some(e) => {
                let _ = write!(s, ": {e}\n... ");
            }
            None => s.push_str("\n... "),
        }
        for (i, w) in self.words[..self.consumed.min(self.words.len())]
            .iter()
            .enumerate()
        {
            if i + 1 == self.consumed {
                let _ = write!(s, ">>{w}<< ");
            } else {
                let _ = write!(s, "{w} ");
            }
        }
        s.push_str("...\n");
        if let Some((kind, args, carg)) = args {
            let _ = write!(s, "... {kind}(");
            for (i, (a, _)) in args.iter().enumerate() {
                let mark = carg == Some(i);
                let text: String = a
                    .iter()
                    .map(|&b| {
                        if (0x20..0x7f).contains(&b) {
                            b as char
                        } else {
                            '.'
                        }
                    })
                    .collect();
                let _ = write!(
                    s,
                    "{}{}{}{}",
                    if mark { ">>" } else { "" },
                    text,
                    if mark { "<<" } else { "" },
                    if i + 1 < args.len() { " " } else { "" }
                );
            }
            s.push_str(")...\n");
        }
        s.push_str(usage);
        Failure::options(s)
    }
}

/// `parse_ematch`: the expression from the cursor on. On success the cursor is left where tc leaves it
/// (see the module comment); `None` when the expression is empty. A `Failure` is tc's `return -1` (its
/// message still lacks the classifier's `Illegal "ematch"`), or a kernel refusal (code 2).
pub fn parse_ematch(c: &mut Cur) -> Result<Option<EmatchTree>> {
    let start = c.i;
    let words = &c.a[start..];
    let toks = lex(words);
    let mut p = Parser { toks, pos: 0 };
    // Words the lexer has read when it hands out token `k` (all of them at the end of input).
    let consumed_at = |p: &Parser, k: usize| p.toks.get(k).map_or(words.len(), |t| t.1 + 1);
    if let Some((Tok::Error(e), w)) = p.toks.last().cloned() {
        // The lexer's ERROR token: the parser sees it where it sees it; a bad escape always fails.
        let ctx = ErrCtx {
            words,
            consumed: w + 1,
        };
        let mut f = ctx.error("Parse error", Some("syntax error"), None, EXPR_USAGE);
        f.msg = format!("{e}\n{}", f.msg);
        return Err(f);
    }
    let root = if p.toks.is_empty() {
        None
    } else {
        match p.expr() {
            Ok(seq) => Some(seq),
            Err(()) => {
                let ctx = ErrCtx {
                    words,
                    consumed: consumed_at(&p, p.pos),
                };
                return Err(ctx.error("Parse error", Some("syntax error"), None, EXPR_USAGE));
            }
        }
    };
    // The lookahead token (or the end) was read; tc steps back one word.
    let consumed = consumed_at(&p, p.pos);
    let back = consumed.saturating_sub(1);
    c.i = start + back;
    let Some(root) = root else {
        return Ok(None);
    };
    let ctx = ErrCtx {
        words,
        consumed: back,
    };
    // `flatten_tree`: each sequence, then the sequences of its containers, depth first.
    let mut flat: Vec<FlatEntry> = Vec::new();
    fn flatten(seq: Vec<Node>, flat: &mut Vec<FlatEntry>) {
        let base = flat.len();
        let mut groups = Vec::new();
        for (i, n) in seq.into_iter().enumerate() {
            match n.body {
                Body::Match(k, a) => flat.push((n.inverted, n.relation, Some((k, a)), 0)),
                Body::Group(g) => {
                    flat.push((n.inverted, n.relation, None, 0));
                    groups.push((base + i, g));
                }
            }
        }
        for (at, g) in groups {
            flat[at].3 = flat.len() as u32;
            flatten(g, flat);
        }
    }
    flatten(root, &mut flat);
    let mut list = Vec::new();
    for (inverted, rel, m, child) in flat {
        let flags = (rel & REL_MASK) | if inverted { INVERT } else { 0 };
        let kind = match m {
            None => EmKind::Container(child),
            Some((kind, args)) => {
                let name = String::from_utf8_lossy(&kind).into_owned();
                match name.as_str() {
                    "cmp" => EmKind::Cmp(parse_cmp(&ctx, &args)?),
                    "u32" => EmKind::U32(parse_u32(&ctx, &args)?),
                    "meta" => EmKind::Meta(parse_meta(&ctx, &args)?),
                    "canid" => EmKind::Canid(parse_canid(&ctx, &args)?),
                    // No set exists in tclab (nor, here, in the kernel tc asked): every name is unknown.
                    "ipset" => return Err(ipset_refusal(&ctx, &args)),
                    // tc parses them (nbyte here; ipt through xtables), the classifier's words after
                    // the tree too, before the kernel, which lacks the module, refuses the tree.
                    "nbyte" => {
                        check_nbyte(&ctx, &args)?;
                        EmKind::Unloaded(KIND_NBYTE)
                    }
                    "ipt" => return Err(ipt_refusal(&args)),
                    _ => return Err(Failure::options(format!("Unknown ematch \"{name}\""))),
                }
            }
        };
        list.push(Ematch { flags, kind });
    }
    Ok(Some(EmatchTree::new(list)))
}

/// `bstrtoul`: C's `strtoul(s, &end, 0)` on the whole argument; `None` (tc's ULONG_MAX) when no digits
/// were read or the value overflows.
fn bstrtoul(b: &[u8]) -> Option<u64> {
    let s = String::from_utf8_lossy(b);
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (radix, digits) = if let Some(h) = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .filter(|h| h.starts_with(|c: char| c.is_ascii_hexdigit()))
    {
        (16, h)
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let end = digits
        .find(|ch: char| !ch.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let v = u64::from_str_radix(&digits[..end], radix).ok()?;
    let v = if neg { v.wrapping_neg() } else { v };
    (v != u64::MAX).then_some(v)
}

/// `parse_layer`: `link`, `network`, `transport` by their first letter.
fn parse_layer(b: &[u8]) -> Option<u64> {
    match b.first() {
        Some(b'l') => Some(0),
        Some(b'n') => Some(1),
        Some(b't') => Some(2),
        _ => None,
    }
}

fn is(a: &(Vec<u8>, bool), text: &str) -> bool {
    a.0 == text.as_bytes()
}

/// `cmp_parse_eopt`.
fn parse_cmp(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Result<Cmp> {
    let err =
        |msg: &str, carg: Option<usize>| ctx.error(msg, None, Some(("cmp", args, carg)), CMP_USAGE);
    let align = if is(&args[0], "u8") {
        1
    } else if is(&args[0], "u16") {
        2
    } else if is(&args[0], "u32") {
        4
    } else {
        return Err(err("cmp: invalid alignment", Some(0)));
    };
    let (mut offset, mut layer, mut mask, mut value) = (None, 1u64, 0u64, None);
    let mut cmp = Cmp {
        align,
        ..Default::default()
    };
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        let arg = |i: &mut usize| -> Result<usize> {
            if *i + 1 >= args.len() {
                return Err(err("cmp: missing argument", Some(*i)));
            }
            *i += 1;
            Ok(*i)
        };
        if is(a, "at") {
            let j = arg(&mut i)?;
            offset = Some(
                bstrtoul(&args[j].0)
                    .ok_or_else(|| err("cmp: invalid offset, must be numeric", Some(j)))?,
            );
        } else if is(a, "layer") {
            let j = arg(&mut i)?;
            layer = parse_layer(&args[j].0)
                .or_else(|| bstrtoul(&args[j].0))
                .ok_or_else(|| err("cmp: invalid layer", Some(j)))?;
            if layer > 2 {
                return Err(err("cmp: illegal layer, must be in 0..2", Some(j)));
            }
        } else if is(a, "mask") {
            let j = arg(&mut i)?;
            mask = bstrtoul(&args[j].0).ok_or_else(|| err("cmp: invalid mask", Some(j)))?;
        } else if is(a, "trans") {
            cmp.flags |= 1;
        } else if is(a, "eq") || is(a, "gt") || is(a, "lt") {
            cmp.opnd = if is(a, "eq") {
                OPND_EQ
            } else if is(a, "gt") {
                OPND_GT
            } else {
                OPND_LT
            };
            let j = arg(&mut i)?;
            value = Some(bstrtoul(&args[j].0).ok_or_else(|| err("cmp: invalid value", Some(j)))?);
        } else {
            return Err(err("nbyte: unknown parameter", Some(i)));
        }
        i += 1;
    }
    let (Some(offset), Some(value)) = (offset, value) else {
        return Err(err("cmp: offset and value required", None));
    };
    cmp.val = value as u32;
    cmp.mask = mask as u32;
    cmp.off = offset as u16;
    cmp.layer = layer as u8;
    Ok(cmp)
}

/// `u32_parse_eopt`.
fn parse_u32(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Result<U32Key> {
    let err =
        |msg: &str, carg: Option<usize>| ctx.error(msg, None, Some(("u32", args, carg)), U32_USAGE);
    let align = if is(&args[0], "u8") {
        1
    } else if is(&args[0], "u16") {
        2
    } else if is(&args[0], "u32") {
        4
    } else {
        return Err(err("u32: invalid alignment", Some(0)));
    };
    let Some(k) = args.get(1) else {
        return Err(err("u32: missing key", None));
    };
    let mut key =
        bstrtoul(&k.0).ok_or_else(|| err("u32: invalid key, must be numeric", Some(1)))?;
    let Some(m) = args.get(2) else {
        return Err(err("u32: missing mask", None));
    };
    let mut mask =
        bstrtoul(&m.0).ok_or_else(|| err("u32: invalid mask, must be numeric", Some(2)))?;
    match args.get(3) {
        Some(a) if is(a, "at") => {}
        Some(_) => return Err(err("u32: missing \"at\"", Some(3))),
        None => return Err(err("u32: missing \"at\"", None)),
    }
    let Some(mut a) = args.get(4).map(|_| 4usize) else {
        return Err(err("u32: missing offset", None));
    };
    let mut offmask = 0i32;
    let text = &args[a].0;
    let mut offset = if text.len() > 8 && text.starts_with(b"nexthdr+") {
        offmask = -1;
        // Plain `strtoul`: no check.
        bstrtoul(&text[8..]).unwrap_or(u64::MAX)
    } else if text.as_slice() == b"nexthdr+" {
        if args.get(5).is_none() {
            return Err(err("u32: missing offset", None));
        }
        a = 5;
        bstrtoul(&args[a].0).unwrap_or(u64::MAX)
    } else {
        bstrtoul(text).unwrap_or(u64::MAX)
    };
    if offset == u64::MAX {
        return Err(err("u32: invalid offset", Some(a)));
    }
    if a + 1 < args.len() {
        return Err(err("u32: unexpected trailer", Some(a + 1)));
    }
    match align {
        1 => {
            if key > 0xff {
                return Err(err("Illegal key (>0xFF)", Some(a)));
            }
            if mask > 0xff {
                return Err(err("Illegal mask (>0xFF)", Some(a)));
            }
            let sh = 24 - (offset & 3) * 8;
            key <<= sh;
            mask <<= sh;
            offset &= !3;
        }
        2 => {
            if key > 0xffff {
                return Err(err("Illegal key (>0xFFFF)", Some(a)));
            }
            if mask > 0xffff {
                return Err(err("Illegal mask (>0xFFFF)", Some(a)));
            }
            if offset & 3 == 0 {
                key <<= 16;
                mask <<= 16;
            }
            offset &= !3;
        }
        _ => {}
    }
    if offset % 4 != 0 {
        return Err(err(
            "u32: invalid offset alignment, must be aligned to 4.",
            Some(a),
        ));
    }
    let mask = mask as u32;
    Ok(U32Key {
        val: key as u32 & mask,
        mask,
        off: offset as u32 as i32,
        offmask,
    })
}

/// tc's meta identifiers: name, `TCF_META_ID_*`, the type of its first map character (INT unless "v").
const META_TABLE: &[(&str, u16, &str, &str)] = &[
    ("Generic", 0, "", ""),
    ("random", 1, "i", "Random value (32 bit)"),
    ("loadavg_1", 2, "i", "Load average in last minute"),
    ("loadavg_5", 3, "i", "Load average in last 5 minutes"),
    ("loadavg_15", 4, "i", "Load average in last 15 minutes"),
    ("Interfaces", 0, "", ""),
    ("dev", 5, "iv", "Device the packet is on"),
    ("Packet attributes", 0, "", ""),
    ("priority", 6, "i", "Priority of packet"),
    ("protocol", 7, "i", "Link layer protocol"),
    ("pkt_type", 8, "i", "Packet type (uni|multi|broad|...)cast"),
    ("pkt_len", 9, "i", "Length of packet"),
    ("data_len", 10, "i", "Length of data in packet"),
    ("mac_len", 11, "i", "Length of link layer header"),
    ("Netfilter", 0, "", ""),
    ("nf_mark", 12, "i", "Netfilter mark"),
    ("fwmark", 12, "i", "Alias for nf_mark"),
    ("Traffic Control", 0, "", ""),
    ("tc_index", 13, "i", "TC Index"),
    ("Routing", 0, "", ""),
    ("rt_classid", 14, "i", "Routing ClassID (cls_route)"),
    ("rt_iif", 15, "i", "Incoming interface index"),
    ("vlan", 46, "i", "Vlan tag"),
    ("Sockets", 0, "", ""),
    ("sk_family", 16, "i", "Address family"),
    ("sk_state", 17, "i", "State"),
    ("sk_reuse", 18, "i", "Reuse Flag"),
    ("sk_bind_if", 19, "iv", "Bound interface"),
    ("sk_refcnt", 20, "i", "Reference counter"),
    ("sk_shutdown", 21, "i", "Shutdown mask"),
    ("sk_proto", 22, "i", "Protocol"),
    ("sk_type", 23, "i", "Type"),
    ("sk_rcvbuf", 24, "i", "Receive buffer size"),
    ("sk_rmem", 25, "i", "RMEM"),
    ("sk_wmem", 26, "i", "WMEM"),
    ("sk_omem", 27, "i", "OMEM"),
    ("sk_wmem_queue", 28, "i", "WMEM queue"),
    ("sk_snd_queue", 30, "i", "Send queue length"),
    ("sk_rcv_queue", 29, "i", "Receive queue length"),
    ("sk_err_queue", 31, "i", "Error queue length"),
    ("sk_fwd_alloc", 32, "i", "Forward allocations"),
    ("sk_sndbuf", 33, "i", "Send buffer size"),
];

fn meta_list() -> String {
    let mut s = String::from("--------------------------------------------------------\n  ID               Type       Description\n--------------------------------------------------------");
    for (name, id, mask, desc) in META_TABLE {
        if *id == 0 {
            let _ = write!(s, "\n{name}:\n");
        } else {
            let types: Vec<&str> = mask
                .chars()
                .map(|c| if c == 'v' { "VAR" } else { "INT" })
                .collect();
            let _ = writeln!(s, "  {name:<16} {:<10} {desc}", types.join(","));
        }
    }
    s.push_str("--------------------------------------------------------");
    s
}

/// `meta_parse_eopt`.
fn parse_meta(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Result<Meta> {
    let err = |msg: &str, carg: Option<usize>| {
        ctx.error(msg, None, Some(("meta", args, carg)), META_USAGE)
    };
    if is(&args[0], "list") {
        return Err(Failure::options(meta_list()));
    }
    let entry_types =
        |id: u16| -> &str { META_TABLE.iter().find(|e| e.1 == id).map_or("", |e| e.2) };
    // `parse_object`: returns the index of the next unread argument.
    let object = |at: usize, v: &mut MetaVal, left: Option<&mut MetaVal>| -> Result<usize> {
        let (text, quoted) = &args[at];
        if *quoted {
            v.kind = META_TYPE_VAR << 12;
            v.bytes = text.clone();
            return Ok(at + 1);
        }
        if let Some(n) = bstrtoul(text) {
            v.kind = META_TYPE_INT << 12;
            v.int = n as u32;
            return Ok(at + 1);
        }
        let Some(e) = META_TABLE
            .iter()
            .find(|e| e.1 != 0 && e.0.as_bytes() == text.as_slice())
        else {
            return Err(err("meta: unknown meta id\n", Some(at)));
        };
        let first = if e.2.starts_with('v') {
            META_TYPE_VAR
        } else {
            META_TYPE_INT
        };
        v.kind = e.1 | first << 12;
        if let Some(l) = left {
            let (lt, rt) = (l.typ(), v.typ());
            if lt != rt {
                let adopt = |x: &MetaVal| x.id() != meta_id::VALUE;
                let compatible = |x: &MetaVal, t: u16| {
                    entry_types(x.id()).chars().any(|c| {
                        (if c == 'v' {
                            META_TYPE_VAR
                        } else {
                            META_TYPE_INT
                        }) == t
                    })
                };
                let ok = if adopt(l) && !adopt(v) {
                    compatible(l, rt)
                        .then(|| l.kind = rt << 12 | l.id())
                        .is_some()
                } else if adopt(v) && !adopt(l) {
                    compatible(v, lt)
                        .then(|| v.kind = lt << 12 | v.id())
                        .is_some()
                } else if adopt(l) && adopt(v) {
                    if compatible(l, rt) {
                        l.kind = rt << 12 | l.id();
                        true
                    } else if compatible(v, lt) {
                        v.kind = lt << 12 | v.id();
                        true
                    } else {
                        false
                    }
                } else {
                    false
                };
                if !ok {
                    return Err(err("lvalue and rvalue are not compatible.", Some(at)));
                }
            }
        }
        let mut a = at + 1;
        while a < args.len() {
            if is(&args[a], "shift") || is(&args[a], "mask") {
                let shift = is(&args[a], "shift");
                if a + 1 >= args.len() {
                    return Err(err("meta: missing argument", Some(a)));
                }
                a += 1;
                let n = bstrtoul(&args[a].0).ok_or_else(|| {
                    err(
                        if shift {
                            "meta: invalid shift, must be numeric"
                        } else {
                            "meta: invalid mask, must be numeric"
                        },
                        Some(a),
                    )
                })?;
                if shift {
                    v.shift = n as u8;
                } else {
                    v.int = n as u32;
                }
                a += 1;
            } else {
                break;
            }
        }
        Ok(a)
    };
    let mut m = Meta::default();
    let a = object(0, &mut m.left, None)?;
    let Some(op) = args.get(a) else {
        return Err(err("meta: missing operand", Some(0)));
    };
    m.left.op = if is(op, "eq") {
        OPND_EQ
    } else if is(op, "gt") {
        OPND_GT
    } else if is(op, "lt") {
        OPND_LT
    } else {
        return Err(err("meta: invalid operand", Some(a)));
    };
    if a + 1 >= args.len() {
        return Err(err("meta: missing rvalue", Some(0)));
    }
    let mut left = m.left.clone();
    let b = object(a + 1, &mut m.right, Some(&mut left))?;
    m.left = left;
    if b < args.len() {
        return Err(err("meta: unexpected trailer", Some(b)));
    }
    // `dump_value`: INT objects always carry their value (or mask); VAR ones only as literal values.
    for v in [&mut m.left, &mut m.right] {
        v.has_tlv = v.typ() == META_TYPE_INT || v.id() == meta_id::VALUE;
    }
    Ok(m)
}

/// C's `sscanf("%x")`: optional blanks, sign and `0x`, then hex digits; the count of characters used.
fn scan_hex(s: &[u8]) -> Option<(u32, usize)> {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    if s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit())
    {
        i += 2;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_hexdigit() {
        v = v
            .saturating_mul(16)
            .saturating_add((s[i] as char).to_digit(16).unwrap_or(0) as u64);
        i += 1;
    }
    if i == start {
        return None;
    }
    let v = v.min(u32::MAX as u64) as u32;
    Some((if neg { v.wrapping_neg() } else { v }, i))
}

/// `canid_parse_eopt`.
fn parse_canid(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Result<Vec<CanFilter>> {
    // tc's `args` walks along the list: an error shows the arguments from the current one on.
    let err = |msg: &str, from: usize, carg: bool| {
        let rest = &args[from.min(args.len())..];
        let shown = (!rest.is_empty()).then_some(("canid", rest, carg.then_some(0)));
        ctx.error(msg, None, shown, CANID_USAGE)
    };
    let mut rules = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let eff = if is(&args[i], "sff") {
            false
        } else if is(&args[i], "eff") {
            true
        } else {
            return Err(err("canid: invalid key", i, true));
        };
        i += 1;
        let Some((text, _)) = args.get(i) else {
            return Err(err("canid: missing argument", i, true));
        };
        let (id, mask) = match scan_hex(text) {
            Some((id, used)) if text.get(used) == Some(&b':') => {
                match scan_hex(&text[used + 1..]) {
                    Some((m, _)) => (id, m),
                    None => (id, if eff { CAN_EFF_MASK } else { CAN_SFF_MASK }),
                }
            }
            Some((id, _)) => (id, if eff { CAN_EFF_MASK } else { CAN_SFF_MASK }),
            None => return Err(err("canid: Improperly formed CAN ID & mask\n", i, true)),
        };
        if rules.len() >= 400 {
            return Err(err("canid: Too many arguments on input\n", i, true));
        }
        rules.push(CanFilter {
            id: id | if eff { CAN_EFF_FLAG } else { 0 },
            mask: mask | CAN_EFF_FLAG,
        });
        i += 1;
    }
    Ok(rules)
}

const NBYTE_USAGE: &str = "Usage: nbyte(NEEDLE at OFFSET [layer LAYER])\nwhere: NEEDLE := { string | \"c-escape-sequence\" }\n       OFFSET := int\n       LAYER  := { link | network | transport | 0..2 }\n\nExample: nbyte(\"ababa\" at 12 layer 1)";
const IPSET_USAGE: &str = "Usage: ipset(SETNAME FLAGS)\nwhere: SETNAME:= string\n       FLAGS  := { FLAG[,FLAGS] }\n       FLAG   := { src | dst }\n\nExample: 'ipset(bulk src,dst)'";

/// `nbyte_parse_eopt`'s refusals (tclab's kernel has no em_nbyte, which refuses what passes).
fn check_nbyte(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Result<()> {
    let err = |msg: &str, carg: Option<usize>| {
        ctx.error(msg, None, Some(("nbyte", args, carg)), NBYTE_USAGE)
    };
    if args[0].0.is_empty() {
        return Err(err("nbyte: needle length is 0", Some(0)));
    }
    let mut offset = false;
    let mut i = 1;
    while i < args.len() {
        let at = is(&args[i], "at");
        if !at && !is(&args[i], "layer") {
            return Err(err("nbyte: unknown parameter", Some(i)));
        }
        if i + 1 == args.len() {
            return Err(err("nbyte: missing argument", Some(i)));
        }
        i += 1;
        let v = &args[i].0;
        if at {
            bstrtoul(v).ok_or_else(|| err("nbyte: invalid offset, must be numeric", Some(i)))?;
            offset = true;
        } else {
            let layer = parse_layer(v)
                .or_else(|| bstrtoul(v))
                .ok_or_else(|| err("nbyte: invalid layer", Some(i)))?;
            if layer > 2 {
                return Err(err("nbyte: illegal layer, must be in 0..2", Some(i)));
            }
        }
        i += 1;
    }
    if !offset {
        return Err(err("nbyte: offset required", None));
    }
    Ok(())
}

/// `ipset_parse_eopt` with no set to find: a name too long, else an unknown one.
fn ipset_refusal(ctx: &ErrCtx, args: &[(Vec<u8>, bool)]) -> Failure {
    let name = String::from_utf8_lossy(&args[0].0);
    let msg = if args[0].0.len() >= 32 {
        "ipset: set name too long (max 31)".to_string()
    } else {
        format!("ipset: unknown set name '{name}'")
    };
    ctx.error(&msg, None, Some(("ipset", args, Some(0))), IPSET_USAGE)
}

/// `em_ipt_parse_eopt_argv` as this machine's tc 6.1 runs it: `getopt_long(argc, argv, "6m:")` over
/// `ipt ARGS…` (glibc's, permuting: words that are not options wait at the end; `--match`/`--ipv6`
/// by any unique prefix), and `xtables_find_match`, which finds no match by any name here (as in
/// tclab, whose kernel has no em_ipt either). The first `-m NAME` ends it: " failed to find match
/// NAME"; a getopt error first: glibc's message, then "failed to find match (null)" (optarg is
/// NULL); no `-m` at all: " failed to parse parameters (ipt)". The classifier adds
/// `Illegal "ematch"`.
fn ipt_refusal(args: &[(Vec<u8>, bool)]) -> Failure {
    let words: Vec<String> = args
        .iter()
        .map(|(w, _)| String::from_utf8_lossy(w).into_owned())
        .collect();
    let no_match = |name: &str| Failure::options(format!(" failed to find match {name}\n"));
    let getopt_error =
        |e: String| Failure::options(format!("ipt: {e}\nfailed to find match (null)\n"));
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "--" {
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let opt = ["match", "ipv6"]
                .into_iter()
                .find(|o| !name.is_empty() && o.starts_with(name));
            match (opt, value) {
                (None, _) => return getopt_error(format!("unrecognized option '{w}'")),
                (Some("match"), Some(v)) => return no_match(v),
                (Some("match"), None) => match words.get(i) {
                    Some(v) => return no_match(v),
                    None => return getopt_error("option '--match' requires an argument".into()),
                },
                (Some(_), Some(_)) => {
                    return getopt_error("option '--ipv6' doesn't allow an argument".into())
                }
                (Some(_), None) => continue,
            }
        }
        let Some(shorts) = w.strip_prefix('-').filter(|s| !s.is_empty()) else {
            // Not an option: permuted past the options.
            continue;
        };
        for (k, ch) in shorts.char_indices() {
            match ch {
                '6' => {}
                'm' => {
                    let rest = &shorts[k + 1..];
                    if !rest.is_empty() {
                        return no_match(rest);
                    }
                    return match words.get(i) {
                        Some(v) => no_match(v),
                        None => getopt_error("option requires an argument -- 'm'".into()),
                    };
                }
                c => return getopt_error(format!("invalid option -- '{c}'")),
            }
        }
    }
    Failure::options(" failed to parse parameters (ipt)")
}

// ----- printing -----

/// `print_ematch`: nothing for an empty expression, else a new line and the sequence from the first entry.
pub fn print_ematch(tree: &EmatchTree, out: &mut String) {
    if tree.matches.is_empty() {
        return;
    }
    out.push_str("\n  ");
    print_seq(tree, 0, 1, out);
}

/// `print_ematch_seq`.
fn print_seq(tree: &EmatchTree, start: usize, prefix: usize, out: &mut String) {
    let mut i = start;
    while let Some(m) = tree.matches.get(i) {
        if m.inverted() {
            out.push_str("NOT ");
        }
        match &m.kind {
            EmKind::Container(r) => {
                out.push_str("(\n");
                for _ in 0..=prefix {
                    out.push_str("  ");
                }
                print_seq(tree, *r as usize, prefix + 1, out);
                for _ in 0..prefix {
                    out.push_str("  ");
                }
                out.push_str(") ");
            }
            kind => {
                print_kind(kind, out);
                out.push('\n');
                if m.relation() != REL_END {
                    for _ in 0..prefix {
                        out.push_str("  ");
                    }
                }
            }
        }
        match m.relation() {
            REL_AND => out.push_str("AND "),
            REL_OR => out.push_str("OR "),
            _ => return,
        }
        i += 1;
    }
}

fn print_kind(kind: &EmKind, out: &mut String) {
    match kind {
        EmKind::Container(_) | EmKind::Unloaded(_) => {}
        EmKind::Cmp(c) => {
            out.push_str("cmp(");
            match c.align {
                1 => out.push_str("u8 "),
                2 => out.push_str("u16 "),
                4 => out.push_str("u32 "),
                _ => {}
            }
            let _ = write!(out, "at {} layer {} ", c.off, c.layer);
            if c.mask != 0 {
                let _ = write!(out, "mask 0x{:x} ", c.mask);
            }
            if c.flags & 1 != 0 {
                out.push_str("trans ");
            }
            match c.opnd {
                OPND_EQ => out.push_str("eq "),
                OPND_LT => out.push_str("lt "),
                OPND_GT => out.push_str("gt "),
                _ => {}
            }
            let _ = write!(out, "{})", c.val as i32);
        }
        EmKind::U32(k) => {
            let _ = write!(
                out,
                "u32({:08x}/{:08x} at {}{})",
                k.val,
                k.mask,
                if k.offmask != 0 { "nexthdr+" } else { "" },
                k.off
            );
        }
        EmKind::Meta(m) => {
            out.push_str("meta(");
            print_meta_obj(&m.left, out);
            match m.left.op {
                OPND_EQ => out.push_str(" eq "),
                OPND_LT => out.push_str(" lt "),
                OPND_GT => out.push_str(" gt "),
                _ => {}
            }
            print_meta_obj(&m.right, out);
            out.push(')');
        }
        EmKind::Canid(rules) => {
            out.push_str("canid(");
            for (i, r) in rules.iter().enumerate() {
                if r.id & CAN_EFF_FLAG != 0 {
                    if r.mask == CAN_EFF_FLAG | CAN_EFF_MASK {
                        let _ = write!(out, "eff 0x{:X}", r.id & CAN_EFF_MASK);
                    } else {
                        let _ = write!(
                            out,
                            "eff 0x{:X}:0x{:X}",
                            r.id & CAN_EFF_MASK,
                            r.mask & CAN_EFF_MASK
                        );
                    }
                } else if r.mask == CAN_EFF_FLAG | CAN_SFF_MASK {
                    let _ = write!(out, "sff 0x{:X}", r.id & CAN_SFF_MASK);
                } else {
                    let _ = write!(
                        out,
                        "sff 0x{:X}:0x{:X}",
                        r.id & CAN_SFF_MASK,
                        r.mask & CAN_SFF_MASK
                    );
                }
                if i + 1 < rules.len() {
                    out.push(' ');
                }
            }
            out.push(')');
        }
    }
}

/// `print_object` of em_meta.c.
fn print_meta_obj(v: &MetaVal, out: &mut String) {
    if v.id() == meta_id::VALUE {
        if v.typ() == META_TYPE_INT {
            let _ = write!(out, "{}", v.int as i32);
        } else if v.bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
            out.push_str(&String::from_utf8_lossy(&v.bytes));
        } else {
            for b in &v.bytes {
                let _ = write!(out, "{b:02x} ");
            }
            out.push('"');
            for &b in &v.bytes {
                out.push(if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                });
            }
            out.push('"');
        }
        return;
    }
    match META_TABLE.iter().find(|e| e.1 == v.id()) {
        Some(e) => out.push_str(e.0),
        None => {
            let _ = write!(out, "[unknown meta id {}]", v.id());
        }
    }
    if v.shift != 0 {
        let _ = write!(out, " shift {}", v.shift);
    }
    if v.typ() == META_TYPE_INT && v.int != 0 {
        let _ = write!(out, " mask 0x{:08x}", v.int);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn flattening_appends_groups_after_their_sequence() {
        // (A or B) and C → [X(→2) AND, C, A OR, B], as tc's flatten_tree orders them.
        let w = words(&[
            "(cmp(u8 at 0 eq 1) or cmp(u8 at 1 eq 2)) and cmp(u8 at 2 eq 3)",
            "classid",
        ]);
        let mut c = Cur::new(&w);
        let t = parse_ematch(&mut c).unwrap().unwrap();
        assert_eq!(c.i, 1, "tc steps back onto `classid`");
        assert_eq!(t.matches.len(), 4);
        assert_eq!(t.matches[0].kind, EmKind::Container(2));
        assert_eq!(t.matches[0].flags, REL_AND);
        let mut s = String::new();
        print_ematch(&t, &mut s);
        assert_eq!(
            s,
            "\n  (\n    cmp(u8 at 0 layer 1 eq 1)\n    OR cmp(u8 at 1 layer 1 eq 2)\n  ) AND cmp(u8 at 2 layer 1 eq 3)\n"
        );
    }

    #[test]
    fn an_expression_at_the_end_leaves_its_last_word_unread() {
        let w = words(&["cmp(u8", "at", "0", "eq", "1)"]);
        let mut c = Cur::new(&w);
        parse_ematch(&mut c).unwrap();
        assert_eq!(c.i, 4);
    }

    #[test]
    fn syntax_errors_mark_the_last_word_read() {
        let w = words(&["cmp(u8 at 0 layer link gt 10) and", "classid", "1:1"]);
        let mut c = Cur::new(&w);
        let f = parse_ematch(&mut c).unwrap_err();
        assert_eq!(f.code, 1);
        assert!(
            f.msg.starts_with("Parse error: syntax error\n... cmp(u8 at 0 layer link gt 10) and classid >>1:1<< ...\nUsage: EXPR"),
            "{}",
            f.msg
        );
    }

    #[test]
    fn u32_keys_are_placed_in_their_word() {
        let w = words(&["u32(u8 0xaa 0xf0 at -14)", "classid"]);
        let mut c = Cur::new(&w);
        let t = parse_ematch(&mut c).unwrap().unwrap();
        let mut s = String::new();
        print_kind(&t.matches[0].kind, &mut s);
        assert_eq!(s, "u32(0000a000/0000f000 at -16)");
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;

    /// Random expressions from the language's own vocabulary: the parser answers, never panics.
    #[test]
    fn random_expressions_never_panic() {
        let vocab = [
            "cmp(",
            "u32(",
            "meta(",
            "canid(",
            "nbyte(",
            "(",
            ")",
            "and",
            "OR",
            "not",
            "u8",
            "u16",
            "u32",
            "at",
            "-4",
            "nexthdr+",
            "nexthdr+8",
            "layer",
            "link",
            "9",
            "0x",
            "mask",
            "trans",
            "eq",
            "gt",
            "lt",
            "\"a\\x4g\"",
            "\"\\777\"",
            "\"\\18\"",
            "\"",
            "sff",
            "eff",
            "1:2",
            ":",
            "priority",
            "dev",
            "shift",
            "list",
            "0xffffffffffffffff",
            "classid",
            "",
            "rshift",
            "foo",
        ];
        let mut seed = 0x1234_5678_u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..20_000 {
            let nwords = 1 + next(4);
            let mut words = Vec::new();
            for _ in 0..nwords {
                let mut w = String::new();
                for _ in 0..next(8) {
                    w.push_str(vocab[next(vocab.len())]);
                    if next(2) == 0 {
                        w.push(' ');
                    }
                }
                words.push(w);
            }
            let mut c = Cur::new(&words);
            if let Ok(Some(t)) = parse_ematch(&mut c) {
                assert!(c.i < words.len().max(1));
                let mut out = String::new();
                print_ematch(&t, &mut out);
                let mut t = t;
                let _ = t.validate();
            }
        }
    }
}
