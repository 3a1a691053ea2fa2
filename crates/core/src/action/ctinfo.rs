//! `ctinfo` (`net/sched/act_ctinfo.c`): restore what netfilter stored in a connection's mark — a DSCP
//! (6 contiguous bits of the mark, written into the packet's DS field) and/or the mark itself (masked,
//! into the packet's mark) — typically on ingress, where an upload's marks come back on the download.
//!
//! The connection is the packet's conntrack entry; tclab carries its mark on the packet
//! ([`Packet::ct_mark`], set by the netfilter hooks). As with `connmark`, the kernel's fallback lookup by
//! tuple in the action's `zone` (for a packet conntrack has not seen yet) is not modelled: such a packet
//! is untracked and left alone. The DSCP is restored only when the mark has a bit of `statemask` (or no
//! statemask was given) and differs from the packet's; ECN bits are kept and IPv4's header checksum is
//! patched (`ipv4_change_dsfield`). The action counts what it did: DSCPs set, DSCPs it could not set,
//! marks set (`tc -s`: `DSCP set N error N CPMARK set N`).

use super::Control;
use crate::error::KernelError;
use crate::packet::Packet;

/// What tc sends (`TCA_CTINFO_*`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ctinfo {
    pub action: Control,
    pub zone: u16,
    /// `TCA_CTINFO_PARMS_DSCP_MASK`: where the DSCP sits in the mark (6 contiguous bits).
    pub dscp_mask: Option<u32>,
    /// `TCA_CTINFO_PARMS_DSCP_STATEMASK`: the mark bits that say a DSCP was stored.
    pub dscp_statemask: Option<u32>,
    /// `TCA_CTINFO_PARMS_CPMARK_MASK`: copy the mark, masked.
    pub cpmark_mask: Option<u32>,
}

/// `stats_dscp_set`, `stats_dscp_error`, `stats_cpmark_set`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CtinfoStats {
    pub dscp_set: u64,
    pub dscp_error: u64,
    pub cpmark_set: u64,
}

impl Ctinfo {
    /// The DSCP mode is on (`CTINFO_MODE_DSCP`): a non-zero mask.
    pub fn dscp_mode(&self) -> Option<u32> {
        self.dscp_mask.filter(|m| *m != 0)
    }

    /// `tcf_ctinfo_init`'s checks.
    pub fn validate(&self) -> Result<(), KernelError> {
        if let Some(mask) = self.dscp_mask {
            let shift = if mask == 0 { 0 } else { mask.trailing_zeros() };
            if mask >> shift != 0x3f {
                return Err(KernelError::invalid("dscp mask must be 6 contiguous bits"));
            }
            if mask & self.dscp_statemask.unwrap_or(0) != 0 {
                return Err(KernelError::invalid(
                    "dscp statemask must not overlap dscp mask",
                ));
            }
        }
        Ok(())
    }

    /// `tcf_ctinfo_act`.
    pub fn act(&self, pkt: &mut Packet, stats: &mut CtinfoStats) -> Control {
        let need = match pkt.protocol {
            0x0800 => 20,
            0x86dd => 40,
            _ => return self.action,
        };
        if pkt.l3_len() < need {
            return self.action;
        }
        let Some(mark) = pkt.ct_mark else {
            return self.action;
        };
        if let Some(mask) = self.dscp_mode() {
            let state = self.dscp_statemask.unwrap_or(0);
            if state == 0 || mark & state != 0 {
                let new = ((((mark & mask) >> mask.trailing_zeros()) << 2) & 0xfc) as u8;
                self.set_dscp(pkt, need, new, stats);
            }
        }
        if let Some(m) = self.cpmark_mask {
            stats.cpmark_set += 1;
            pkt.mark = mark & m;
        }
        self.action
    }

    /// `tcf_ctinfo_dscp_set`: the DS field's DSCP becomes `new`, the ECN bits stay.
    fn set_dscp(&self, pkt: &mut Packet, need: usize, new: u8, stats: &mut CtinfoStats) {
        if !pkt.materialise(need) {
            stats.dscp_error += 1;
            return;
        }
        let d = &mut pkt.data;
        if need == 20 {
            if d[1] & !3 != new {
                crate::wire::change_dsfield(d, 3, new);
                stats.dscp_set += 1;
            }
        } else {
            let tclass = (d[0] & 0x0f) << 4 | d[1] >> 4;
            if tclass & !3 != new {
                let t = (tclass & 3) | new;
                d[0] = (d[0] & 0xf0) | t >> 4;
                d[1] = (d[1] & 0x0f) | t << 4;
                stats.dscp_set += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn ctinfo(dscp: Option<(u32, u32)>, cpmark: Option<u32>) -> Ctinfo {
        Ctinfo {
            action: TC_ACT_PIPE,
            zone: 0,
            dscp_mask: dscp.map(|d| d.0),
            dscp_statemask: dscp.map(|d| d.1),
            cpmark_mask: cpmark,
        }
    }

    #[test]
    fn dscp_and_mark_come_back_from_the_connection() {
        // The mark holds DSCP 46 (EF) in its top 6 bits, and bit 24 says one was stored.
        let a = ctinfo(Some((0xfc00_0000, 0x0100_0000)), Some(0x00ff_ffff));
        let mut st = CtinfoStats::default();
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x01, 200);
        p.ct_mark = Some(46 << 26 | 1 << 24 | 0x1234);
        assert_eq!(a.act(&mut p, &mut st), TC_ACT_PIPE);
        assert_eq!(p.data[1], 46 << 2 | 0x01, "DSCP EF, ECT(1) kept");
        assert_eq!(
            crate::wire::checksum(&p.data[..20]),
            0,
            "header checksum patched"
        );
        assert_eq!(p.mark, 0x0100_1234 & 0x00ff_ffff);
        // Set again: the DSCP is already there, so only the mark counts.
        a.act(&mut p, &mut st);
        assert_eq!(
            st,
            CtinfoStats {
                dscp_set: 1,
                dscp_error: 0,
                cpmark_set: 2
            }
        );
        // Without the state bit the DSCP is left alone; untracked packets entirely.
        let mut q = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 200);
        q.ct_mark = Some(46 << 26);
        a.act(&mut q, &mut st);
        assert_eq!((q.data[1], q.mark), (0, 0));
        let mut u = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 200);
        a.act(&mut u, &mut st);
        assert_eq!(st.cpmark_set, 3);
        assert_eq!(u.mark, 0, "untracked");
    }

    #[test]
    fn kernel_refusals() {
        let e = |a: Ctinfo| a.validate().unwrap_err().to_string();
        assert!(e(ctinfo(Some((0xf800_0000, 0)), None)).contains("6 contiguous bits"));
        assert!(e(ctinfo(Some((0xfc00_0000, 0x0400_0000)), None)).contains("must not overlap"));
        assert!(ctinfo(Some((0x0000_00fc, 0x0100_0000)), None)
            .validate()
            .is_ok());
    }
}
