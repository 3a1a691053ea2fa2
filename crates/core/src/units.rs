//! Rates, sizes and times as the kernel keeps them, and the kernel's rate arithmetic.
//!
//! A rate is bytes per second (`u64`, as `rate64` in netlink). The kernel never divides by a rate on the fast
//! path: `psched_ratecfg_precompute` turns it into a multiplier and a shift so that the time to send `len`
//! bytes is `(len * mult) >> shift` nanoseconds. [`RateCfg`] is that structure, with the per-packet
//! `overhead`, the minimum accounted size `mpu`, and the link layer: on ATM (ADSL) every packet is carried in
//! 53-byte cells of 48 payload bytes, so `len` is first rounded up to whole cells. Reproducing the arithmetic
//! exactly, rounding included, is what lets `tc -s` token counts match a real kernel's.
//!
//! Burst sizes travel between tc and the kernel as *psched ticks* of 64 ns (`PSCHED_SHIFT` = 6), which is why
//! [`ticks_to_ns`] and [`ns_to_ticks`] exist.

use crate::Nanos;
use serde::{Deserialize, Serialize};

/// `PSCHED_SHIFT`: one psched tick is 2^6 = 64 ns.
pub const PSCHED_SHIFT: u32 = 6;

pub const fn ticks_to_ns(ticks: u64) -> Nanos {
    ticks << PSCHED_SHIFT
}
pub const fn ns_to_ticks(ns: Nanos) -> u64 {
    ns >> PSCHED_SHIFT
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    #[default]
    Ethernet,
    /// ATM/ADSL: 53-byte cells carrying 48 bytes each.
    Atm,
}

impl LinkLayer {
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::Ethernet => "ethernet",
            LinkLayer::Atm => "atm",
        }
    }
}

/// `struct tc_ratespec` as tc sends it: the rate and how packet sizes are accounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RateSpec {
    /// Bytes per second.
    pub rate: u64,
    pub overhead: u16,
    pub mpu: u16,
    pub linklayer: LinkLayer,
}

/// `struct psched_ratecfg`: a rate ready for the fast path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RateCfg {
    pub rate_bytes_ps: u64,
    pub mult: u32,
    pub shift: u8,
    pub overhead: u16,
    pub mpu: u16,
    pub linklayer: LinkLayer,
}

impl RateCfg {
    /// `psched_ratecfg_getrate`: the spec the kernel reports back.
    pub fn spec(&self) -> RateSpec {
        RateSpec {
            rate: self.rate_bytes_ps,
            overhead: self.overhead,
            mpu: self.mpu,
            linklayer: self.linklayer,
        }
    }

    /// `psched_ratecfg_precompute`: find the largest multiplier that cannot overflow.
    pub fn new(spec: &RateSpec) -> RateCfg {
        let rate = spec.rate;
        let (mut mult, mut shift) = (1u32, 0u8);
        // A rate of 0 keeps mult 1, shift 0, as the kernel's `if (r->rate_bytes_ps > 0)` does.
        let mut factor: u64 = crate::NSEC_PER_SEC;
        while let Some(m) = factor.checked_div(rate) {
            mult = m as u32;
            if m & (1 << 31) != 0 || m > u32::MAX as u64 || factor & (1 << 63) != 0 {
                break;
            }
            factor <<= 1;
            shift += 1;
        }
        RateCfg {
            rate_bytes_ps: rate,
            mult,
            shift,
            overhead: spec.overhead,
            mpu: spec.mpu,
            linklayer: spec.linklayer,
        }
    }

    /// `psched_l2t_ns`: nanoseconds needed to send `len` bytes at this rate.
    pub fn l2t_ns(&self, len: u32) -> Nanos {
        let mut len = len.saturating_add(self.overhead as u32);
        if len < self.mpu as u32 {
            len = self.mpu as u32;
        }
        match self.linklayer {
            LinkLayer::Atm => {
                ((len.div_ceil(48) as u128 * 53 * self.mult as u128) >> self.shift) as u64
            }
            // 32 bits by 32 fit in 64: the same answer as in 128 bits, for a third of the
            // instructions (HTB asks four times a packet).
            LinkLayer::Ethernet => (len as u64 * self.mult as u64)
                .checked_shr(self.shift as u32)
                .unwrap_or(0),
        }
    }

    /// `psched_ns_t2l`: how many bytes fit in `ns` at this rate (the inverse of [`RateCfg::l2t_ns`]).
    pub fn ns_t2l(&self, ns: Nanos) -> u64 {
        if self.rate_bytes_ps == 0 {
            return 0;
        }
        let mut len =
            (ns as u128 * self.rate_bytes_ps as u128 / crate::NSEC_PER_SEC as u128) as u64;
        if self.linklayer == LinkLayer::Atm {
            len = len / 53 * 48;
        }
        len.saturating_sub(self.overhead as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: u64) -> RateCfg {
        RateCfg::new(&RateSpec {
            rate,
            ..Default::default()
        })
    }

    #[test]
    fn l2t_matches_exact_division_within_a_nanosecond() {
        // Hand-derived: 1500 bytes at 1 Mbit/s (125000 B/s) take 12 ms; at 180 kbit (22500 B/s) 66.666 ms.
        assert!(cfg(125_000).l2t_ns(1500).abs_diff(12_000_000) <= 1);
        assert!(cfg(22_500).l2t_ns(1500).abs_diff(66_666_666) <= 1);
        // 10 Gbit/s: 1250000000 B/s, 1500 bytes = 1200 ns.
        assert!(cfg(1_250_000_000).l2t_ns(1500).abs_diff(1200) <= 1);
    }

    #[test]
    fn atm_rounds_to_cells_and_overhead_adds() {
        let spec = RateSpec {
            rate: 1_000_000,
            linklayer: LinkLayer::Atm,
            ..Default::default()
        };
        // 1500 bytes = 32 cells (31.25 rounded up) of 53 bytes = 1696 bytes on the wire: 1.696 ms at 1 MB/s.
        assert!(RateCfg::new(&spec).l2t_ns(1500).abs_diff(1_696_000) <= 1);
        let spec = RateSpec {
            rate: 1_000_000,
            overhead: 300,
            ..Default::default()
        };
        assert!(RateCfg::new(&spec).l2t_ns(1500).abs_diff(1_800_000) <= 1);
        let spec = RateSpec {
            rate: 1_000_000,
            mpu: 64,
            ..Default::default()
        };
        assert!(RateCfg::new(&spec).l2t_ns(40).abs_diff(64_000) <= 1);
    }

    #[test]
    fn l2t_in_64_bits_answers_what_128_bits_answer() {
        // The Ethernet path multiplies in 64 bits: a 32-bit length (overhead added, saturating) by a
        // 32-bit mult cannot overflow, so the answer must be the 128-bit product's, shift for shift,
        // at the extremes too (1 byte/s has the largest mult, u64::MAX the smallest).
        let wide = |c: &RateCfg, len: u32| {
            let len = len.saturating_add(c.overhead as u32).max(c.mpu as u32);
            ((len as u128 * c.mult as u128) >> c.shift) as u64
        };
        for rate in [1, 3, 125_000, 22_500, 1_250_000_000, 1 << 40, u64::MAX] {
            for overhead in [0, 300, u16::MAX] {
                let c = RateCfg::new(&RateSpec {
                    rate,
                    overhead,
                    mpu: 64,
                    ..Default::default()
                });
                for len in [0, 1, 40, 1500, 65_535, 1 << 31, u32::MAX] {
                    assert_eq!(
                        c.l2t_ns(len),
                        wide(&c, len),
                        "rate {rate} overhead {overhead} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn t2l_inverts_l2t() {
        let c = cfg(22_500);
        assert_eq!(c.ns_t2l(c.l2t_ns(1600) + 1), 1600);
    }
}
