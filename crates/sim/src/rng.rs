//! One seeded random generator per run, split into named sub-streams.
//!
//! Every random choice of a run (SFQ perturbation, link jitter and loss, start-time spread of parallel streams)
//! draws from a sub-stream named after its purpose, `Rng::stream(seed, "loss:router:eth0")`. A sub-stream's
//! sequence depends only on the run's seed and its name, so adding a new consumer never shifts the numbers an
//! existing one sees: two runs with one seed are identical, and a change in one place stays local.
//!
//! The generator is SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and passes BigCrush when used as a
//! stream; cryptographic strength is not needed here.

/// A deterministic pseudo-random stream.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The sub-stream `name` of the run seeded with `seed`.
    pub fn stream(seed: u64, name: &str) -> Rng {
        // FNV-1a of the name, then mixed with the seed, so that nearby seeds or names give unrelated streams.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut r = Rng {
            state: seed ^ h.rotate_left(17),
        };
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n), n > 0 (Lemire's multiply-shift; the bias is below 2^-32 for the n used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(7, "sfq").next_u64()).collect();
        assert!(
            a.windows(2).all(|w| w[0] == w[1]),
            "same seed and name, same numbers"
        );
        let mut x = Rng::stream(7, "sfq");
        let mut y = Rng::stream(7, "loss");
        let mut z = Rng::stream(8, "sfq");
        let (xs, ys, zs): (Vec<u64>, Vec<u64>, Vec<u64>) = (0..8)
            .map(|_| (x.next_u64(), y.next_u64(), z.next_u64()))
            .fold((vec![], vec![], vec![]), |mut acc, (a, b, c)| {
                acc.0.push(a);
                acc.1.push(b);
                acc.2.push(c);
                acc
            });
        assert_ne!(xs, ys, "another name gives another stream");
        assert_ne!(xs, zs, "another seed gives another stream");
    }

    #[test]
    fn uniform_enough() {
        // 100 000 draws in 10 bins: each bin within 3 % of 10 000 (binomial sd = 95, so 3 % is > 3 sd).
        let mut r = Rng::stream(1, "t");
        let mut bins = [0u32; 10];
        for _ in 0..100_000 {
            bins[r.below(10) as usize] += 1;
        }
        for b in bins {
            assert!((9_700..=10_300).contains(&b), "{bins:?}");
        }
        let f = r.next_f64();
        assert!((0.0..1.0).contains(&f));
    }
}
