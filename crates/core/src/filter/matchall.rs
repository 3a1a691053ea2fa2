//! matchall (`net/sched/cls_matchall.c`): one filter that matches every packet of its protocol, for
//! attaching actions (a policer, a mark) to all traffic, or sending everything to one class.

use super::{Exts, ExtsSpec, TcfResult, CLS_FLAGS_NOT_IN_HW, CLS_FLAGS_SKIP_SW, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatchallOptions {
    pub classid: Option<u32>,
    pub flags: u32,
    pub exts: ExtsSpec,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct MatchallFilter {
    pub handle: u32,
    pub classid: Option<u32>,
    pub flags: u32,
    pub exts: Exts,
}

/// The instance holds at most one filter.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Matchall {
    pub filter: Option<MatchallFilter>,
}

impl Matchall {
    /// `mall_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        let Some(f) = &self.filter else {
            return NO_MATCH;
        };
        if f.flags & CLS_FLAGS_SKIP_SW != 0 {
            return NO_MATCH;
        }
        res.classid = f.classid.unwrap_or(0);
        f.exts.exec(pkt, cx)
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filter.as_ref().is_some_and(|f| f.handle == handle)
    }

    /// `mall_change`.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&MatchallOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        if self.filter.is_some() {
            return Err(KernelError::new(Errno::Exists));
        }
        let default = MatchallOptions::default();
        let o = opts.unwrap_or(&default);
        if o.flags == 3 {
            return Err(KernelError::invalid("Invalid filter flags"));
        }
        if o.flags & CLS_FLAGS_SKIP_SW != 0 {
            // No device here offloads filters: a filter that may only run in hardware cannot be placed.
            return Err(KernelError::msg(
                Errno::Invalid,
                "Failed to setup flow action",
            ));
        }
        let exts = o.exts.instantiate(actions, now)?;
        self.filter = Some(MatchallFilter {
            handle: if handle == 0 { 1 } else { handle },
            classid: o.classid,
            flags: o.flags | CLS_FLAGS_NOT_IN_HW,
            exts,
        });
        Ok(())
    }

    /// Deleting the one filter empties the instance.
    pub fn delete(&mut self, actions: &mut ActionTable) -> bool {
        if let Some(f) = self.filter.take() {
            actions.release_bound(&f.exts.actions);
        }
        true
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        if let Some(f) = self.filter {
            actions.release_bound(&f.exts.actions);
        }
    }
}
