//! `police` (`net/sched/act_police.c`): a token-bucket meter that sorts packets into *conforming* and
//! *exceeding*, and answers a different control code for each.
//!
//! Tokens are time, as in TBF. The bucket holds at most `burst` nanoseconds of sending at `rate`; a packet
//! of `len` bytes costs `l2t(len)`. On each packet the bucket first refills by the time elapsed since the
//! last conforming packet (capped at `burst`), then the packet's cost is taken. If what is left is ≥ 0 the
//! packet conforms: the new balance is kept and the answer is the *conform* code (`TCA_POLICE_RESULT`,
//! `ok` unless `conform-exceed X/Y` said otherwise). Otherwise the balance is left untouched, `overlimits`
//! counts one, and the answer is the *exceed* code (`drop` in the seeds' scripts; tc's default is
//! `reclassify`). Over any interval of length t, the bytes that conform are therefore at most
//! `rate × t + burst`: what seed 004's ingress policer relies on to keep the ISP's queue empty.
//!
//! A peak rate adds a second bucket of depth `mtu` at `peakrate`; both must be non-negative. A packet larger
//! than `mtu` never conforms. A packet-rate policer (`pkts_rate`/`pkts_burst`) counts packets instead of
//! bytes. `avrate` (an EWMA rate estimator) is accepted but not modelled: tclab has no rate estimators.

use super::{ActionParams, Control, TC_ACT_OK, TC_ACT_RECLASSIFY};
use crate::error::{Errno, KernelError};
use crate::units::{ticks_to_ns, RateCfg, RateSpec};
use crate::Nanos;

/// `struct tc_police` and its attributes, as tc sends them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoliceParams {
    /// The exceed code (`tc_police.action`).
    pub action: Control,
    /// The conform code (`TCA_POLICE_RESULT`, default `ok`).
    pub result: Control,
    /// `None` when no byte rate was given.
    pub rate: Option<RateSpec>,
    pub peakrate: Option<RateSpec>,
    /// Bucket depth in psched ticks (`tc_calc_xmittime(rate, burst)`).
    pub burst: u32,
    /// Largest conforming packet; tc sends 0 when not given and the kernel then uses `255 << cell_log`.
    pub mtu: u32,
    pub avrate: u32,
    /// Packets per second and the burst in ticks of one packet each.
    pub pkt_rate: Option<u64>,
    pub pkt_burst: u64,
}

impl Default for PoliceParams {
    fn default() -> Self {
        PoliceParams {
            action: TC_ACT_RECLASSIFY,
            result: TC_ACT_OK,
            rate: None,
            peakrate: None,
            burst: 0,
            mtu: 0,
            avrate: 0,
            pkt_rate: None,
            pkt_burst: 0,
        }
    }
}

impl PoliceParams {
    /// `tcf_police_init`'s checks.
    pub fn validate(&self) -> Result<(), KernelError> {
        if self.peakrate.is_some() && self.rate.is_none() {
            return Err(KernelError::new(Errno::Invalid));
        }
        if super::ext_is(self.result, super::TC_ACT_GOTO_CHAIN) {
            return Err(KernelError::invalid("goto chain not allowed on fallback"));
        }
        if self.pkt_rate.is_some() && self.rate.is_some() {
            return Err(KernelError::invalid(
                "packet-per-second and byte-per-second rate limits not allowed in same action",
            ));
        }
        Ok(())
    }
}

/// The bucket: tokens in nanoseconds and the time of the last conforming packet.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PoliceState {
    rate: Option<RateCfg>,
    peak: Option<RateCfg>,
    burst_ns: i64,
    mtu_ptoks: i64,
    pkt_burst_ns: i64,
    pkt_ns: i64,
    t_c: Nanos,
    toks: i64,
    ptoks: i64,
    pkttoks: i64,
}

impl PoliceState {
    /// A full bucket at `now` (the kernel fills it when the action is created or replaced).
    pub fn new(params: &ActionParams, now: Nanos) -> PoliceState {
        let ActionParams::Police(p) = params else {
            return PoliceState::default();
        };
        let rate = p.rate.map(|r| RateCfg::new(&r));
        let peak = p.peakrate.map(|r| RateCfg::new(&r));
        let burst_ns = ticks_to_ns(p.burst as u64) as i64;
        let mtu_ptoks = peak.map_or(0, |c| c.l2t_ns(p.mtu) as i64);
        let pkt_burst_ns = ticks_to_ns(p.pkt_burst) as i64;
        let pkt_ns = p
            .pkt_rate
            .filter(|r| *r > 0)
            .map_or(0, |r| (crate::NSEC_PER_SEC / r) as i64);
        PoliceState {
            rate,
            peak,
            burst_ns,
            mtu_ptoks,
            pkt_burst_ns,
            pkt_ns,
            t_c: now,
            toks: burst_ns,
            ptoks: mtu_ptoks,
            pkttoks: pkt_burst_ns,
        }
    }

    /// The kernel's effective mtu: as given, else `255 << cell_log` of the rate table (2040 for tc's
    /// default), else no limit.
    fn mtu(p: &PoliceParams) -> u32 {
        if p.mtu != 0 {
            p.mtu
        } else if p.rate.is_some() {
            2040
        } else {
            u32::MAX
        }
    }

    /// `tcf_police_act` on a packet of `len` bytes (`qdisc_pkt_len` where the action runs: without
    /// the Ethernet header at ingress): the control code, and whether the packet exceeded.
    pub fn act(&mut self, p: &PoliceParams, len: u32, now: Nanos) -> (Control, bool) {
        if len <= Self::mtu(p) {
            if self.rate.is_none() && p.pkt_rate.is_none() {
                return (p.result, false);
            }
            let elapsed = now.saturating_sub(self.t_c) as i64;
            let mut toks = elapsed.min(self.burst_ns);
            let mut ptoks = 0;
            let mut pkttoks = 0;
            if let Some(peak) = &self.peak {
                ptoks = (toks + self.ptoks).min(self.mtu_ptoks) - peak.l2t_ns(len) as i64;
            }
            if let Some(rate) = &self.rate {
                toks = (toks + self.toks).min(self.burst_ns) - rate.l2t_ns(len) as i64;
            } else if p.pkt_rate.is_some() {
                pkttoks = (elapsed.min(self.pkt_burst_ns) + self.pkttoks).min(self.pkt_burst_ns)
                    - self.pkt_ns;
            }
            if (toks | ptoks | pkttoks) >= 0 {
                self.t_c = now;
                self.toks = toks;
                self.ptoks = ptoks;
                self.pkttoks = pkttoks;
                return (p.result, false);
            }
        }
        (p.action, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_SHOT;

    /// 100 kbit/s = 12500 B/s, burst 10 KiB: starting full, back-to-back 1000-byte packets conform until the
    /// 10240 bytes are spent (10 packets, leaving 240 bytes of tokens), then the 11th is dropped.
    #[test]
    fn full_bucket_passes_burst_then_drops() {
        let rate = RateSpec {
            rate: 12_500,
            ..Default::default()
        };
        // burst ticks as tc computes them: 10240 bytes at 12500 B/s = 819.2 ms = 12_800_000 ticks.
        let p = PoliceParams {
            action: TC_ACT_SHOT,
            rate: Some(rate),
            burst: 12_800_000,
            ..Default::default()
        };
        let mut st = PoliceState::new(&ActionParams::Police(p.clone()), 0);
        let len = 1000;
        let mut passed = 0;
        for _ in 0..11 {
            if st.act(&p, len, 0).0 == TC_ACT_OK {
                passed += 1;
            }
        }
        assert_eq!(passed, 10);
        // 80 ms later 1000 bytes of tokens have come back (plus the 240 left): one more conforms.
        assert_eq!(st.act(&p, len, 80_000_000).0, TC_ACT_OK);
        assert_eq!(st.act(&p, len, 80_000_000).0, TC_ACT_SHOT);
    }
}
