//! basic (`net/sched/cls_basic.c`): a filter that matches when its ematch expression holds (always, if it
//! has none) and then gives its classid and runs its actions. The expression language is in
//! [`super::ematch`]: `basic match 'cmp(u8 at 9 layer network eq 6) and not meta(priority eq 6)'`.
//!
//! Filters are numbered by handle (the kernel allocates the lowest free one from 1 when none is given) and
//! kept newest first, which is both the order they are tried in and the order `tc filter show` lists them.
//! Each counts how often it was tried and how often its expression held (`TCA_BASIC_PCNT`).

use super::ematch::EmatchTree;
use super::{Exts, ExtsSpec, TcfResult, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;
use std::cell::Cell;

/// What tc sends (`TCA_BASIC_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BasicOptions {
    pub classid: Option<u32>,
    pub ematches: Option<EmatchTree>,
    pub exts: ExtsSpec,
}

/// One filter (`struct basic_filter`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BasicFilter {
    pub handle: u32,
    /// `res.classid`, 0 when none was given.
    pub classid: u32,
    pub ematches: EmatchTree,
    pub exts: Exts,
    /// Tried (`rcnt`) and matched (`rhit`).
    pub rcnt: Cell<u64>,
    pub rhit: Cell<u64>,
}

/// The instance (`struct basic_head`): newest first.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct BasicHead {
    pub filters: Vec<BasicFilter>,
}

impl BasicHead {
    /// `basic_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        for f in &self.filters {
            f.rcnt.set(f.rcnt.get() + 1);
            if !f.ematches.matches(pkt) {
                continue;
            }
            f.rhit.set(f.rhit.get() + 1);
            res.classid = f.classid;
            let r = f.exts.exec(pkt, cx);
            if r < 0 {
                continue;
            }
            return r;
        }
        NO_MATCH
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.handle == handle)
    }

    /// `basic_change`: a new filter, or a new version of an existing one (its counters start again).
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&BasicOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let o = opts.ok_or_else(|| KernelError::new(Errno::Invalid))?;
        let existing = self
            .filters
            .iter()
            .position(|f| f.handle == handle && handle != 0);
        let handle = match (existing, handle) {
            (Some(_), h) => h,
            (None, 0) => super::alloc_handle(|h| self.get(h))?,
            (None, h) => h,
        };
        let mut ematches = o.ematches.clone().unwrap_or_default();
        ematches.validate()?;
        let exts = o.exts.instantiate(actions, now)?;
        let f = BasicFilter {
            handle,
            classid: o.classid.unwrap_or(0),
            ematches,
            exts,
            rcnt: Cell::new(0),
            rhit: Cell::new(0),
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

    /// `basic_delete`: returns whether the instance is now empty.
    pub fn delete(&mut self, handle: u32, actions: &mut ActionTable) -> bool {
        super::delete_from(&mut self.filters, handle, actions, |f| (f.handle, &f.exts))
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        super::destroy_all(&self.filters, actions, |f| (f.handle, &f.exts));
    }
}
