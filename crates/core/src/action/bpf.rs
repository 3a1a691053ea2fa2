//! `bpf` (`net/sched/act_bpf.c`), classic mode: a classic-BPF program ([`crate::bpf`], checked when the
//! action is made) run over the packet's frame, whose answer may replace the action's control code: -1
//! keeps it (`default-action`), `ok`, `pipe`, `reclassify`, `redirect` and `shot` replace it (a `shot`
//! answer counts a drop), anything else is `unspec`.

use super::TC_ACT_UNSPEC;
use super::{Control, TC_ACT_OK, TC_ACT_PIPE, TC_ACT_RECLASSIFY, TC_ACT_REDIRECT, TC_ACT_SHOT};
use crate::bpf::{self, Insn};
use crate::error::{Errno, KernelError};
use crate::packet::Packet;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Bpf {
    /// The `default-action`.
    pub action: Control,
    /// `TCA_ACT_BPF_OPS`; `None` when the command gave no program (only binding an existing action
    /// may).
    pub ops: Option<Vec<Insn>>,
}

impl Bpf {
    /// `tcf_bpf_init`: a program, checked as `bpf_prog_create` checks it.
    pub fn validate(&self) -> Result<(), KernelError> {
        match &self.ops {
            Some(ops) => bpf::check_classic(ops),
            None => Err(KernelError::new(Errno::Invalid)),
        }
    }

    /// `tcf_bpf_act`: the control code, and whether it counts a drop.
    pub fn act(&self, pkt: &Packet, at_ingress: bool) -> (Control, bool) {
        let Some(ops) = &self.ops else {
            return (self.action, false);
        };
        match bpf::run(ops, pkt, at_ingress) as i32 {
            r @ (TC_ACT_PIPE | TC_ACT_RECLASSIFY | TC_ACT_OK | TC_ACT_REDIRECT) => (r, false),
            TC_ACT_SHOT => (TC_ACT_SHOT, true),
            TC_ACT_UNSPEC => (self.action, false),
            _ => (TC_ACT_UNSPEC, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(k: u32) -> Vec<Insn> {
        vec![Insn {
            code: 0x06,
            jt: 0,
            jf: 0,
            k,
        }]
    }

    #[test]
    fn the_answer_replaces_the_default_action() {
        let p = Packet::of_len(100);
        let a = |k| Bpf {
            action: TC_ACT_PIPE,
            ops: Some(prog(k)),
        };
        // -1: the default; 2 (shot): a counted drop; 0 (ok) replaces; 9 is unknown: unspec.
        assert_eq!(a(u32::MAX).act(&p, false), (TC_ACT_PIPE, false));
        assert_eq!(a(2).act(&p, false), (TC_ACT_SHOT, true));
        assert_eq!(a(0).act(&p, false), (TC_ACT_OK, false));
        assert_eq!(a(9).act(&p, false), (TC_ACT_UNSPEC, false));
        let none = Bpf {
            action: TC_ACT_PIPE,
            ops: None,
        };
        assert_eq!(none.validate().unwrap_err().errno, Errno::Invalid);
    }
}
