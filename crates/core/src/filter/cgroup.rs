//! cgroup, the control-group classifier (`net/sched/cls_cgroup.c`).
//!
//! A process in a `net_cls` cgroup sends its packets with that cgroup's `net_cls.classid`
//! (`task_get_classid`: the sending task's, or in softirq context the socket's `sock_cgroup_classid`);
//! the classifier gives that classid as its result when the packet also passes the filter's ematch tree
//! (`cgroup match 'cmp(…)'`, always when it has none), then runs the filter's actions. A packet without
//! a classid (forwarded, or from a task in no such cgroup) does not match. The classid is the
//! [`Packet::cgroup_classid`] of the packet.
//!
//! An instance holds exactly one filter, `struct cls_cgroup_head`, with the handle it was made with: a
//! first one needs a non-zero handle (`EINVAL`), and any later request must name that handle (else
//! `ENOENT`) and replaces the filter whole. `cls_cgroup_get` finds nothing, so every `add` is a new
//! filter to `tc_new_tfilter` (an `add` of the same handle replaces it instead of failing with `File
//! exists`), `change` without `NLM_F_CREATE` fails, and a single filter cannot be deleted by handle — only
//! the whole instance, by its preference.

use super::ematch::EmatchTree;
use super::{Exts, ExtsSpec, TcfResult, NO_MATCH};
use crate::action::{ActionTable, Control};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;

/// What tc sends (`TCA_CGROUP_*`; tc always sends the options, empty or not).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupOptions {
    pub ematches: Option<EmatchTree>,
    pub exts: ExtsSpec,
}

/// The instance's one filter (`struct cls_cgroup_head`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct CgroupFilter {
    pub handle: u32,
    pub ematches: EmatchTree,
    pub exts: Exts,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct CgroupHead {
    pub filter: Option<CgroupFilter>,
}

impl CgroupHead {
    /// `cls_cgroup_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        let Some(f) = &self.filter else {
            return NO_MATCH;
        };
        let classid = pkt.cgroup_classid();
        if classid == 0 || !f.ematches.matches(pkt) {
            return NO_MATCH;
        }
        res.classid = classid;
        f.exts.exec(pkt, cx)
    }

    /// `cls_cgroup_get`: never finds a filter.
    pub fn get(&self, _handle: u32) -> bool {
        false
    }

    /// `cls_cgroup_change`.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&CgroupOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let o = opts.ok_or_else(|| KernelError::new(Errno::Invalid))?;
        match &self.filter {
            None if handle == 0 => return Err(KernelError::new(Errno::Invalid)),
            Some(f) if f.handle != handle => return Err(KernelError::new(Errno::NoEntry)),
            _ => {}
        }
        let mut ematches = o.ematches.clone().unwrap_or_default();
        ematches.validate()?;
        let exts = o.exts.instantiate(actions, now)?;
        let new = CgroupFilter {
            handle,
            ematches,
            exts,
        };
        if let Some(old) = self.filter.replace(new) {
            actions.release_bound(&old.exts.actions);
        }
        Ok(())
    }

    /// `cls_cgroup_delete`: `EOPNOTSUPP` (tc_del_tfilter never gets here: `get` finds nothing).
    pub fn delete(&mut self, _handle: u32, _actions: &mut ActionTable) -> bool {
        self.filter.is_none()
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        if let Some(f) = &self.filter {
            actions.release_bound(&f.exts.actions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_OK;

    fn head(handle: u32) -> CgroupHead {
        let mut h = CgroupHead::default();
        let o = CgroupOptions::default();
        h.change(handle, Some(&o), &mut ActionTable::default(), 0)
            .unwrap();
        h
    }

    #[test]
    fn the_packets_classid_is_the_result() {
        let h = head(1);
        let mut res = TcfResult::default();
        let mut cx = Cx::new(0);
        let mut p = Packet::of_len(100);
        // No net_cls classid: no match.
        assert_eq!(h.classify(&mut p, &mut cx, &mut res), NO_MATCH);
        p.set_cgroup_classid(0x0001_0010);
        assert_eq!(h.classify(&mut p, &mut cx, &mut res), TC_ACT_OK);
        assert_eq!(res.classid, 0x0001_0010);
    }

    #[test]
    fn one_filter_by_its_handle() {
        let mut t = ActionTable::default();
        let o = CgroupOptions::default();
        let mut h = CgroupHead::default();
        assert_eq!(
            h.change(0, Some(&o), &mut t, 0).unwrap_err().errno,
            Errno::Invalid
        );
        h.change(5, Some(&o), &mut t, 0).unwrap();
        assert_eq!(
            h.change(6, Some(&o), &mut t, 0).unwrap_err().errno,
            Errno::NoEntry
        );
        // The same handle replaces it; `get` never finds it.
        h.change(5, Some(&o), &mut t, 0).unwrap();
        assert!(!h.get(5));
        assert_eq!(h.filter.as_ref().map(|f| f.handle), Some(5));
    }
}
