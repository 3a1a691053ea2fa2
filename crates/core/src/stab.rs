//! Size tables (`stab`): the length a qdisc accounts for a packet, after `qdisc_calculate_pkt_len` in
//! `net/sched/sch_api.c`.
//!
//! A shaper charges each packet its length, but on some links a packet costs more than its bytes: on ADSL
//! every packet is cut into 48-byte ATM cells sent as 53 bytes, with the last cell padded, after an
//! encapsulation overhead (PPPoE, LLC). A size table maps a length (plus `overhead`) to the length to
//! charge: tc computes it (`tc_calc_size_table`) for lengths up to `mtu` in `tsize` slots of
//! `2^cell_log` bytes, and the kernel looks the packet up in it, extrapolating past the end. Without
//! `linklayer atm` or `mpu` there is no table at all, only the overhead.
//!
//! In Linux 6.12 the table is applied once, by `__dev_xmit_skb`, with the root qdisc's table: a table on
//! a child is accepted and shown, but does not change what the child is charged.

use serde::{Deserialize, Serialize};

/// `struct tc_sizespec`, as tc sends it (after `tc_calc_size_table` filled in the derived fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeSpec {
    pub cell_log: u8,
    pub size_log: u8,
    pub cell_align: i16,
    pub overhead: i32,
    /// `enum tc_link_layer`: 0 unspecified, 1 ethernet, 2 atm.
    pub linklayer: u32,
    pub mpu: u32,
    pub mtu: u32,
    pub tsize: u32,
}

/// A size table: the spec and its `tsize` entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeTable {
    pub spec: SizeSpec,
    pub data: Vec<u16>,
}

/// `STAB_SIZE_LOG_MAX`.
const STAB_SIZE_LOG_MAX: u8 = 30;

impl SizeTable {
    /// `qdisc_get_stab`'s checks.
    pub fn validate(&self) -> Result<(), crate::KernelError> {
        use crate::error::Errno;
        if self.data.len() != self.spec.tsize as usize {
            return Err(crate::KernelError::msg(
                Errno::Invalid,
                "Invalid size of size table",
            ));
        }
        if self.spec.size_log > STAB_SIZE_LOG_MAX || self.spec.cell_log > STAB_SIZE_LOG_MAX {
            return Err(crate::KernelError::msg(
                Errno::Invalid,
                "Invalid logarithmic size of size table",
            ));
        }
        Ok(())
    }

    /// `__qdisc_calculate_pkt_len`: the length to charge for a packet of `len` bytes.
    pub fn pkt_len(&self, len: u32) -> u32 {
        let s = &self.spec;
        let mut pkt_len = len as i64 + s.overhead as i64;
        if s.tsize > 0 && !self.data.is_empty() {
            let slot = (pkt_len + s.cell_align as i64).max(0) >> s.cell_log;
            let tsize = s.tsize as i64;
            pkt_len = if slot < tsize {
                self.data[slot as usize] as i64
            } else {
                self.data[(tsize - 1) as usize] as i64 * (slot / tsize)
                    + self.data[(slot % tsize) as usize] as i64
            };
            pkt_len <<= s.size_log;
        }
        pkt_len.clamp(1, u32::MAX as i64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ATM table as tc builds it for `stab mtu 2047 tsize 512 mpu 64 overhead 44 linklayer adsl`
    /// (seed scripts' line): cell_log 2 (2047 >> 2 = 511 ≤ 511), entry i = cells((i+1)·4, mpu 64) · 53.
    /// A 1500-byte packet: 1500 + 44 = 1544 → slot (1544 − 1) >> 2 = 385 → (386·4 = 1544 bytes → 33
    /// cells) → 1749 bytes on the wire.
    #[test]
    fn an_atm_table_charges_whole_cells() {
        let spec = SizeSpec {
            cell_log: 2,
            cell_align: -1,
            overhead: 44,
            linklayer: 2,
            mpu: 64,
            mtu: 2047,
            tsize: 512,
            ..Default::default()
        };
        let data = (0..512u32)
            .map(|i| {
                let sz = ((i + 1) << 2).max(64);
                (sz.div_ceil(48) * 53) as u16
            })
            .collect();
        let t = SizeTable { spec, data };
        t.validate().unwrap();
        assert_eq!(t.pkt_len(1500), 33 * 53);
        // A 40-byte ACK + 44 = 84 → two cells.
        assert_eq!(t.pkt_len(40), 2 * 53);
        // Past the table's end (a 64 kB GSO packet) the kernel extrapolates from the last entry.
        assert!(t.pkt_len(65_000) > 65_000);
    }

    #[test]
    fn overhead_alone_has_no_table() {
        let t = SizeTable {
            spec: SizeSpec {
                overhead: 24,
                ..Default::default()
            },
            data: Vec::new(),
        };
        assert_eq!(t.pkt_len(1500), 1524);
        let neg = SizeTable {
            spec: SizeSpec {
                overhead: -2000,
                ..Default::default()
            },
            data: Vec::new(),
        };
        assert_eq!(neg.pkt_len(1500), 1, "never below one byte");
    }
}
