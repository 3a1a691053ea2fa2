//! `bpf` (`m_bpf.c`): `bpf bytecode '…' | bytecode-file FILE [CONTROL] [index N]` (the program's
//! language is in [`crate::bpf`]); eBPF objects are refused. The printer prints through jprint.

use super::*;
use crate::bpf::{parse_program, print_ops, ProgramError};
use tclab_core::action::bpf::Bpf;

/// m_bpf.c's `explain()` (iproute2 6.1), printed before the action parser's own lines.
const BPF_USAGE: &str = r"Usage: ... bpf ... [ index INDEX ]

BPF use case:
 bytecode BPF_BYTECODE
 bytecode-file FILE

eBPF use case:
 object-file FILE [ section ACT_NAME ] [ export UDS_FILE ] [ verbose ]
 object-pinned FILE

Where BPF_BYTECODE := 's,c t f k,c t f k,c t f k,...'
c,t,f,k and s are decimals; s denotes number of 4-tuples

Where FILE points to a file containing the BPF_BYTECODE string,
an ELF file containing eBPF map definitions and bytecode, or a
pinned eBPF program.

Where ACT_NAME refers to the section name containing the
action (default 'action').

Where UDS_FILE points to a unix domain socket file in order
to hand off control of all created eBPF maps to an agent.

Where optionally INDEX points to an existing action, or
explicitly specifies an action index upon creation.";

/// `bpf_parse_opt` (the action's).
pub(super) fn parse_bpf(c: &mut Cur) -> Result<(ActionParams, u32)> {
    let mut b = Bpf {
        action: TC_ACT_PIPE,
        ops: None,
    };
    c.next_arg()?;
    let mut seen_run = false;
    while let Some(w) = c.peek() {
        let run = matches(w, "run");
        if run || (!seen_run && !matches(w, "help") && !matches(w, "index")) {
            if run {
                let v = c.next_arg()?;
                if seen_run {
                    return Err(crate::duparg("run", v));
                }
            }
            seen_run = true;
            // `bpf_parse_and_load_common` failing: tc's lines, then `return -1`.
            let ops = parse_program(c).map_err(|e| match e {
                ProgramError::Parse(m) | ProgramError::Ebpf(m) => bad(m),
                ProgramError::Syntax(f) => f,
            })?;
            b.ops = Some(ops);
        } else if matches(w, "help") {
            return Err(bad(BPF_USAGE));
        } else {
            break;
        }
        c.fwd();
    }
    b.action = control_or(c, b.action)?;
    let index = index_arg(c, 10, |_| "bpf: Illegal \"index\"".into())?.unwrap_or(0);
    Ok((ActionParams::Bpf(b), index))
}

/// `bpf_print_opt`.
pub(super) fn print(p: &mut Printer, a: &Action, b: &Bpf, flags: ShowFlags, now: u64) {
    p.string("kind", "bpf ", "bpf");
    if let Some(ops) = &b.ops {
        print_ops(p, ops);
        p.fp(" ");
    }
    print_control(p, "default-action ", b.action, "\n");
    index_refs(p, a, "\t index ", flags, now);
    p.raw("\n ");
}
