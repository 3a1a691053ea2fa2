//! `sample` (`net/sched/act_sample.c`): hand one packet in `rate`, chosen at random, to a PSAMPLE group.
//!
//! The kernel copies a sampled packet (its first `trunc` bytes, else all of it, the link header
//! included) to the `psample` netlink group `group`, where an sFlow agent reads it; the packet itself
//! goes on unchanged with the action's control code. tclab has no netlink listeners, so a group is a
//! tally: [`Psample`] counts the samples an action sent and the bytes they carried, which a test or the
//! simulator can read from the action ([`crate::action::Action::psample`]). The choice is
//! `get_random_u32_below(rate) == 0` drawn from a SplitMix64 stream seeded by the action's index:
//! random-looking, as the kernel's, and the same packets on every run.

use super::Control;
use crate::error::KernelError;
use crate::packet::Packet;

/// What tc sends (`TCA_SAMPLE_*`); the kernel needs the rate and the group of a new action.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    pub action: Control,
    pub rate: Option<u32>,
    pub group: Option<u32>,
    /// `TCA_SAMPLE_TRUNC_SIZE`: the most a sample copies.
    pub trunc: Option<u32>,
}

/// One action's PSAMPLE group as seen from the action: what it sent, and the random stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Psample {
    /// Packets sampled.
    pub samples: u64,
    /// Bytes the samples carried (each packet's length, at most `trunc`).
    pub bytes: u64,
    rng: u64,
}

impl Psample {
    /// The stream of the action with index `index`.
    pub fn new(index: u32) -> Psample {
        Psample {
            rng: 0x5a4d_504c_0000_0000 ^ u64::from(index),
            ..Psample::default()
        }
    }

    /// `get_random_u32_below(n)`: a 32-bit draw scaled to `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        let r = crate::flow::splitmix64(&mut self.rng) as u32;
        ((u64::from(r) * u64::from(n)) >> 32) as u32
    }
}

impl Sample {
    /// `tcf_sample_init`'s checks.
    pub fn validate(&self) -> Result<(), KernelError> {
        match (self.rate, self.group) {
            (Some(0), Some(_)) => Err(KernelError::invalid("invalid sample rate")),
            (Some(_), Some(_)) => Ok(()),
            _ => Err(KernelError::invalid("sample rate and group are required")),
        }
    }

    /// `tcf_sample_act`: maybe sample the packet (into `group`), and answer the control code.
    pub fn act(&self, pkt: &Packet, group: &mut Psample) -> Control {
        let rate = self.rate.unwrap_or(1).max(1);
        if group.below(rate) == 0 {
            group.samples += 1;
            group.bytes += u64::from(self.trunc.map_or(pkt.len, |t| t.min(pkt.len)));
        }
        self.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn sample(rate: u32, trunc: Option<u32>) -> Sample {
        Sample {
            action: TC_ACT_PIPE,
            rate: Some(rate),
            group: Some(1),
            trunc,
        }
    }

    #[test]
    fn one_in_rate_within_binomial_bounds_and_truncated() {
        // 100 000 packets at 1/100: mean 1000, sd √(1000 · 0.99) ≈ 31.5; 5 sd either side.
        let s = sample(100, Some(128));
        let mut g = Psample::new(1);
        let p = Packet::of_len(1000);
        for _ in 0..100_000 {
            assert_eq!(s.act(&p, &mut g), TC_ACT_PIPE);
        }
        assert!((843..=1157).contains(&g.samples), "{}", g.samples);
        assert_eq!(g.bytes, g.samples * 128, "each sample copies 128 bytes");
        // rate 1 samples everything, whole packets without trunc.
        let mut all = Psample::new(2);
        for _ in 0..10 {
            sample(1, None).act(&p, &mut all);
        }
        assert_eq!((all.samples, all.bytes), (10, 10_000));
    }

    #[test]
    fn the_same_packets_on_every_run() {
        let s = sample(7, None);
        let run = || {
            let mut g = Psample::new(9);
            let p = Packet::of_len(100);
            (0..1000)
                .map(|_| {
                    let before = g.samples;
                    s.act(&p, &mut g);
                    g.samples > before
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn kernel_refusals() {
        let mut s = sample(0, None);
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "Error: invalid sample rate."
        );
        s.group = None;
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "Error: sample rate and group are required."
        );
    }
}
