//! `bpf` (`f_bpf.c`): classic BPF as `bytecode 'N,c t f k,…'` or `bytecode-file FILE` (the program's
//! language is in [`crate::bpf`]); eBPF objects are refused (tclab has no eBPF runtime). The printer
//! prints through jprint, as tc's does.

use super::*;
use crate::bpf::{parse_program, print_ops, ProgramError};
use tclab_core::bpf::Insn;
use tclab_core::filter::bpf::{BpfFilter, BpfOptions, FLAG_ACT_DIRECT};

/// The program at the mode word; tc's failure as `bpf_parse_opt` reports it.
fn program(c: &mut Cur) -> Result<Vec<Insn>> {
    parse_program(c).map_err(|e| match e {
        ProgramError::Ebpf(m) => Failure::options(format!("{m}\nUnable to load program")),
        ProgramError::Parse(m) => {
            let sep = if m.is_empty() { "" } else { "\n" };
            Failure::options(format!("{m}{sep}Unable to parse bpf command line"))
        }
        ProgramError::Syntax(f) => f,
    })
}

pub(super) const BPF_USAGE: &str = "Usage: ... bpf ...\n\nBPF use case:\n bytecode BPF_BYTECODE\n bytecode-file FILE\n\neBPF use case:\n object-file FILE [ section CLS_NAME ] [ export UDS_FILE ] [ verbose ] [ direct-action ] [ skip_hw | skip_sw ]\n object-pinned FILE [ direct-action ] [ skip_hw | skip_sw ]\n\nCommon remaining options:\n [ action ACTION_SPEC ]\n [ classid CLASSID ]\n\nWhere BPF_BYTECODE := 's,c t f k,c t f k,c t f k,...'\nc,t,f,k and s are decimals; s denotes number of 4-tuples\n\nWhere FILE points to a file containing the BPF_BYTECODE string,\nan ELF file containing eBPF map definitions and bytecode, or a\npinned eBPF program.\n\nWhere CLS_NAME refers to the section name containing the\nclassifier (default 'classifier').\n\nWhere UDS_FILE points to a unix domain socket file in order\nto hand off control of all created eBPF maps to an agent.\n\nACTION_SPEC := ... look at individual actions\nNOTE: CLASSID is parsed as hexadecimal input.";

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
            o.ops = Some(program(c)?);
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
            o.ops = Some(program(c)?);
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
    print_ops(p, &f.ops);
    if f.exts.police_compat {
        p.nl();
    }
    print_exts(&f.exts, flags, now, p);
}
