//! `skbmod` (`net/sched/act_skbmod.c`): set the Ethernet destination, source or EtherType, swap the two
//! addresses, or mark ECN Congestion Experienced.
//!
//! The kernel takes one of three kinds of edit (`tcf_skbmod_init`): `ecn` alone, `swap mac` alone, or any
//! of `dmac`/`smac`/`etype`; an action with none of them is refused (`EINVAL`). The MAC edits write the
//! Ethernet header of a packet from an Ethernet device; a tclab packet carries no link-layer header
//! (`Packet::data` starts at the network header), so they change nothing it carries — the packet is
//! counted and the control code answered, as on a device the kernel would leave alone. `ecn` sets CE on
//! an ECN-capable IPv4 or IPv6 packet (`INET_ECN_set_ce`: ECT(0) and ECT(1) become CE, with IPv4's header
//! checksum patched by `csum16_add` as the kernel patches it); Not-ECT and CE packets are left as they
//! are, and a packet too short for its IP header is dropped and counted as an overlimit.

use super::{Control, TC_ACT_SHOT};
use crate::packet::Packet;

/// `SKBMOD_F_*`.
pub const F_DMAC: u32 = 1;
pub const F_SMAC: u32 = 2;
pub const F_ETYPE: u32 = 4;
pub const F_SWAPMAC: u32 = 8;
pub const F_ECN: u32 = 16;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skbmod {
    pub action: Control,
    /// `tc_skbmod.flags` as tc sent them (only `F_SWAPMAC` and `F_ECN` count there).
    pub flags: u32,
    pub dmac: Option<[u8; 6]>,
    pub smac: Option<[u8; 6]>,
    /// Present and non-zero (tc sends no EtherType of 0).
    pub etype: Option<u16>,
}

impl Skbmod {
    /// The edit the kernel keeps (`lflags`): ECN, or the swap, or the set fields.
    pub fn lflags(&self) -> u32 {
        if self.flags & F_ECN != 0 {
            F_ECN
        } else if self.flags & F_SWAPMAC != 0 {
            F_SWAPMAC
        } else {
            (self.dmac.map_or(0, |_| F_DMAC))
                | (self.smac.map_or(0, |_| F_SMAC))
                | (self.etype.map_or(0, |_| F_ETYPE))
        }
    }

    /// `tcf_skbmod_init`'s check: something to do.
    pub fn validate(&self) -> Result<(), crate::KernelError> {
        if self.lflags() == 0 {
            return Err(crate::KernelError::new(crate::error::Errno::Invalid));
        }
        Ok(())
    }

    /// `tcf_skbmod_act`: the control code, and whether it counts an overlimit.
    pub fn act(&self, pkt: &mut Packet) -> (Control, bool) {
        if self.action == TC_ACT_SHOT {
            return (TC_ACT_SHOT, true);
        }
        if self.lflags() != F_ECN {
            // The Ethernet header these edit is not part of a tclab packet.
            return (self.action, false);
        }
        let need = match pkt.protocol {
            0x0800 => 20,
            0x86dd => 40,
            _ => return (self.action, false),
        };
        if !pkt.materialise(need) {
            return (TC_ACT_SHOT, true);
        }
        let d = &mut pkt.data;
        if need == 20 {
            // `IP_ECN_set_ce`.
            let ecn = (d[1].wrapping_add(1)) & 3;
            if ecn & 2 != 0 {
                let check = u16::from_be_bytes([d[10], d[11]]);
                let c = csum16_add(check, 0xfffb_u16.wrapping_add(ecn as u16));
                d[10..12].copy_from_slice(&c.to_be_bytes());
                d[1] |= 3;
            }
        } else {
            // `IP6_ECN_set_ce`: the traffic class's low two bits, no checksum to patch.
            let tclass = ((d[0] & 0x0f) << 4) | (d[1] >> 4);
            if tclass & 3 != 0 {
                d[1] |= 3 << 4;
            }
        }
        (self.action, false)
    }
}

/// `csum16_add`: a 16-bit ones' complement addition, its end-around carry included.
fn csum16_add(csum: u16, addend: u16) -> u16 {
    let (r, carry) = csum.overflowing_add(addend);
    r + carry as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn ecn() -> Skbmod {
        Skbmod {
            action: TC_ACT_PIPE,
            flags: F_ECN,
            dmac: None,
            smac: None,
            etype: None,
        }
    }

    #[test]
    fn ect_becomes_ce_with_a_valid_header_checksum() {
        for (tos, want) in [(0x01u8, 0x03u8), (0x02, 0x03), (0xb8, 0xb8), (0x03, 0x03)] {
            let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, tos, 100);
            assert_eq!(ecn().act(&mut p), (TC_ACT_PIPE, false));
            assert_eq!(p.data[1], want, "tos {tos:#x}");
            assert_eq!(crate::wire::checksum(&p.data[..20]), 0, "tos {tos:#x}");
        }
    }

    #[test]
    fn only_one_kind_of_edit_is_kept_and_none_is_refused() {
        let mut s = ecn();
        s.flags = F_SWAPMAC;
        s.dmac = Some([1; 6]);
        assert_eq!(s.lflags(), F_SWAPMAC, "swap wins over set fields");
        s.flags = 0;
        assert_eq!(s.lflags(), F_DMAC);
        s.dmac = None;
        assert!(s.validate().is_err());
    }
}
