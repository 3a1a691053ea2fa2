//! fw, the firewall-mark classifier (`net/sched/cls_fw.c`).
//!
//! Each filter's handle is a mark: a packet whose `skb->mark`, under the instance's mask (`handle
//! 10/0xff`; one mask for the whole instance, 0xffffffff by default), equals a filter's handle takes that
//! filter's classid and actions. This is how netfilter and tc meet: `iptables -t mangle … -j MARK
//! --set-mark 300` marks, `tc filter add … handle 300 fw flowid 1:300` classifies (seed 003's home gateway).
//!
//! Filters are kept in 256 hash buckets (`fw_hash`), newest first in each; that is also the order `tc
//! filter show` lists them. An instance with no filters at all classifies the old way: a non-zero mark is
//! taken as the classid itself.

use super::{Exts, ExtsSpec, TcfResult, NO_MATCH};
use crate::action::{ActionTable, Control, TC_ACT_OK};
use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;

const HTSIZE: u32 = 256;

/// `fw_hash`.
pub fn fw_hash(handle: u32) -> u32 {
    let mut h = handle;
    h ^= h >> 16;
    h ^= h >> 8;
    h % HTSIZE
}

/// What `tc filter … handle MARK[/MASK] fw …` sends (present only when options followed the kind).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FwOptions {
    pub mask: Option<u32>,
    pub classid: Option<u32>,
    pub indev: Option<String>,
    pub exts: ExtsSpec,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FwFilter {
    pub id: u32,
    pub classid: Option<u32>,
    pub indev: Option<String>,
    pub exts: Exts,
    /// Insertion order, to list each bucket newest first.
    seq: u64,
}

/// The instance (`struct fw_head`): `None` mask until the first filter is made.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FwHead {
    pub mask: Option<u32>,
    filters: Vec<FwFilter>,
    seq: u64,
}

impl FwHead {
    /// The filters in the kernel's walk order: bucket by bucket, newest first.
    pub fn filters(&self) -> Vec<&FwFilter> {
        let mut v: Vec<&FwFilter> = self.filters.iter().collect();
        v.sort_by_key(|f| (fw_hash(f.id), std::cmp::Reverse(f.seq)));
        v
    }

    /// `fw_classify`.
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        let Some(mask) = self.mask else {
            if pkt.mark != 0 {
                res.classid = pkt.mark;
                return TC_ACT_OK;
            }
            return NO_MATCH;
        };
        let id = pkt.mark & mask;
        for f in self.filters() {
            if f.id != id {
                continue;
            }
            res.classid = f.classid.unwrap_or(0);
            if f.indev.is_some() {
                continue; // tclab packets carry no input device
            }
            let r = f.exts.exec(pkt, cx);
            if r >= 0 {
                return r;
            }
        }
        NO_MATCH
    }

    pub fn get(&self, handle: u32) -> bool {
        self.filters.iter().any(|f| f.id == handle)
    }

    /// `fw_change` and `fw_set_parms`.
    pub fn change(
        &mut self,
        handle: u32,
        opts: Option<&FwOptions>,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let Some(o) = opts else {
            if handle != 0 {
                return Err(KernelError::new(Errno::Invalid));
            }
            return Ok(());
        };
        let existing = self
            .filters
            .iter()
            .position(|f| f.id == handle && handle != 0);
        if existing.is_none() && handle == 0 {
            return Err(KernelError::new(Errno::Invalid));
        }
        let head_mask = self.mask.unwrap_or(o.mask.unwrap_or(u32::MAX));
        if o.mask.unwrap_or(u32::MAX) != head_mask {
            return Err(KernelError::new(Errno::Invalid));
        }
        let exts = o.exts.instantiate(actions, now)?;
        self.mask = Some(head_mask);
        match existing {
            Some(i) => {
                let f = &mut self.filters[i];
                let old = std::mem::replace(&mut f.exts, exts);
                f.classid = o.classid;
                if o.indev.is_some() {
                    f.indev = o.indev.clone();
                }
                actions.release_bound(&old.actions);
            }
            None => {
                self.seq += 1;
                self.filters.push(FwFilter {
                    id: handle,
                    classid: o.classid,
                    indev: o.indev.clone(),
                    exts,
                    seq: self.seq,
                });
            }
        }
        Ok(())
    }

    /// `fw_delete`: returns whether the instance is now empty.
    pub fn delete(&mut self, handle: u32, actions: &mut ActionTable) -> bool {
        if let Some(i) = self.filters.iter().position(|f| f.id == handle) {
            let f = self.filters.remove(i);
            actions.release_bound(&f.exts.actions);
        }
        self.filters.is_empty()
    }

    pub fn destroy(self, actions: &mut ActionTable) {
        for f in &self.filters {
            actions.release_bound(&f.exts.actions);
        }
    }
}
