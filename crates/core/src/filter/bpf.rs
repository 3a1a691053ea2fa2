//! bpf, the BPF classifier (`net/sched/cls_bpf.c`), in its classic mode: each filter is a classic-BPF
//! program ([`crate::bpf`]: checked as the kernel checks it when the filter is made, run over the
//! packet's frame).
//!
//! Filters are tried newest first. A program's answer decides: 0 is no match (the next filter is
//! tried), `-1` (0xffffffff) means the filter's own `classid`, any other value is the classid itself
//! (`ret #0x10002` sends to 1:2); then the filter's actions run, and an answer below 0 from them tries
//! the next filter. With `direct-action` the program's answer is the action's control code instead
//! (`cls_bpf_exec_opcode`: ok, shot, stolen, trap, redirect or unspec; anything else is unspec, which
//! tries the next filter) and the class is the filter's.
//!
//! eBPF programs (`object-file`, `object-pinned`) are refused by tc's side: they need the kernel's
//! verifier and a BPF runtime tclab does not have. Only the software path exists: every filter is
//! `not_in_hw`, and `skip_sw` is refused as by a device that cannot offload.

use super::{
    Exts, ExtsSpec, TcfResult, CLS_FLAGS_NOT_IN_HW, CLS_FLAGS_SKIP_HW, CLS_FLAGS_SKIP_SW, NO_MATCH,
};
use crate::action::{
    ActionTable, Control, TC_ACT_OK, TC_ACT_REDIRECT, TC_ACT_SHOT, TC_ACT_STOLEN, TC_ACT_TRAP,
    TC_ACT_UNSPEC,
};
use crate::bpf::{self, Insn};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;

/// `TCA_BPF_FLAG_ACT_DIRECT`.
pub const FLAG_ACT_DIRECT: u32 = 1;

/// What tc sends (`TCA_BPF_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BpfOptions {
    /// `TCA_BPF_OPS`; `None` without a program (the kernel refuses that).
    pub ops: Option<Vec<Insn>>,
    pub classid: Option<u32>,
    /// `TCA_BPF_FLAGS` (`direct-action`).
    pub flags: u32,
    /// `TCA_BPF_FLAGS_GEN` (`skip_hw`, `skip_sw`).
    pub gen_flags: u32,
    pub exts: ExtsSpec,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BpfFilter {
    pub handle: u32,
    pub ops: Vec<Insn>,
    pub classid: Option<u32>,
    pub direct: bool,
    /// The generic flags as dumped (`not_in_hw` added).
    pub gen_flags: u32,
    pub exts: Exts,
}

/// The instance (`struct cls_bpf_head`): newest first.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BpfHead {
    pub filters: Vec<BpfFilter>,
}

/// `cls_bpf_exec_opcode`.
fn exec_opcode(code: Control) -> Control {
    match code {
        TC_ACT_OK | TC_ACT_SHOT | TC_ACT_STOLEN | TC_ACT_TRAP | TC_ACT_REDIRECT | TC_ACT_UNSPEC => {
            code
        }
        _ => TC_ACT_UNSPEC,
    }
}

impl BpfHead {
    /// `cls_bpf_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        let at_ingress = cx.mirred.at_ingress();
        for f in &self.filters {
            let answer = bpf::run(&f.ops, pkt, at_ingress);
            if f.direct {
                res.classid = f.classid.unwrap_or(0);
                let r = exec_opcode(answer as i32);
                if r == TC_ACT_UNSPEC {
                    continue;
                }
                return r;
            }
            if answer == 0 {
                continue;
            }
            res.classid = if answer == u32::MAX {
                f.classid.unwrap_or(0)
            } else {
                answer
            };
            let r = f.exts.exec(pkt, cx);
            if r >= 0 {
                return r;
            }
        }
        NO_MATCH
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.handle == handle)
    }

    /// `cls_bpf_change`: a new filter (handle 0: the lowest free from 1), or a replacement of one.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&BpfOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let o = opts.ok_or_else(|| KernelError::new(Errno::Invalid))?;
        let existing = self.filters.iter().position(|f| f.handle == handle);
        let handle = match (existing, handle) {
            (None, 0) => super::alloc_handle(|h| self.get(h))?,
            _ => handle,
        };
        let ops = o
            .ops
            .as_ref()
            .ok_or_else(|| KernelError::new(Errno::Invalid))?;
        if o.flags & !FLAG_ACT_DIRECT != 0
            || o.gen_flags & !(CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW) != 0
            || o.gen_flags & (CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW)
                == CLS_FLAGS_SKIP_HW | CLS_FLAGS_SKIP_SW
        {
            return Err(KernelError::new(Errno::Invalid));
        }
        bpf::check_classic(ops)?;
        if o.gen_flags & CLS_FLAGS_SKIP_SW != 0 {
            // Nothing here can run a program in hardware.
            return Err(KernelError::new(Errno::NotSupported));
        }
        let exts = o.exts.instantiate(actions, now)?;
        let f = BpfFilter {
            handle,
            ops: ops.clone(),
            classid: o.classid,
            direct: o.flags & FLAG_ACT_DIRECT != 0,
            gen_flags: o.gen_flags | CLS_FLAGS_NOT_IN_HW,
            exts,
        };
        match existing {
            Some(i) => {
                let old = std::mem::replace(&mut self.filters[i], f);
                actions.release_bound(&old.exts.actions);
            }
            None => self.filters.insert(0, f),
        }
        Ok(())
    }

    /// `cls_bpf_delete`: returns whether the instance is now empty.
    pub fn delete(&mut self, handle: u32, actions: &mut ActionTable) -> bool {
        super::delete_from(&mut self.filters, handle, actions, |f| (f.handle, &f.exts))
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        super::destroy_all(&self.filters, actions, |f| (f.handle, &f.exts));
    }
}
