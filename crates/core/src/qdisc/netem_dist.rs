//! netem's delay distribution tables, computed as iproute2's generators compute them (`netem/normal.c`,
//! `pareto.c`, `paretonormal.c`), in tclab's own code.
//!
//! A table is an inverse cumulative distribution function sampled at 4 096 evenly spaced probabilities,
//! for a distribution of mean 0 and standard deviation 1, scaled by `NETEM_DIST_SCALE` (8 192) and clamped
//! to an `i16`. The kernel's `tabledist` picks an entry with a uniform random number and scales it by the
//! jitter: `delay = mu + sigma × table[rnd % size] / 8192`.
//!
//! - **normal**: iproute2 walks x from −10 to 10 in steps of 0.00005 (accumulating the step in a double,
//!   as its loop does), puts x at index `rint(16384 × Φ(x))`, and keeps every fourth index. Φ needs erf,
//!   which Rust's standard library lacks: [`erf`] sums its everywhere-positive series (no cancellation), so
//!   the indices come out as with C's `erf`.
//! - **pareto**: shape a = 3, at probabilities i/65536 for i = 65536, 65520, … 16:
//!   `(p^(−1/3) − 1.5) × 4/3 × 8192`, capped at 32767 (a Pareto of shape 3 and scale 1 has mean 1.5; 4/3 is NISTnet's scale).
//! - **paretonormal**: `(normal + 3 × pareto) / 4` entry by entry (integer division, as C's `int`).
//!
//! `tclab tc` has no table files: `distribution NAME` names one of these, and the kernel side receives the
//! table (`TCA_NETEM_DELAY_DIST`) as tc would have read it from `/usr/lib/tc/NAME.dist`.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// `NETEM_DIST_SCALE`.
pub const NETEM_DIST_SCALE: i64 = 8192;
/// Entries of a generated table.
pub const TABLE_ENTRIES: usize = 4096;

/// The distributions iproute2 ships tables for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Normal,
    Pareto,
    Paretonormal,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::Paretonormal => "paretonormal",
        }
    }

    pub fn by_name(name: &str) -> Option<Distribution> {
        [
            Distribution::Normal,
            Distribution::Pareto,
            Distribution::Paretonormal,
        ]
        .into_iter()
        .find(|d| d.name() == name)
    }

    /// The table (computed once per process).
    pub fn table(self) -> &'static [i16] {
        static TABLES: [OnceLock<Vec<i16>>; 3] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let (i, make): (usize, fn() -> Vec<i16>) = match self {
            Distribution::Normal => (0, normal_table),
            Distribution::Pareto => (1, pareto_table),
            Distribution::Paretonormal => (2, paretonormal_table),
        };
        TABLES[i].get_or_init(make)
    }
}

/// erf(z) by the series `2z/√π · e^(−z²) · Σ (2z²)^n / (1·3·…·(2n+1))`, whose terms are all positive; for
/// |z| ≥ 6 erf is ±1 to double precision.
pub fn erf(z: f64) -> f64 {
    if z.is_nan() {
        return z;
    }
    let a = z.abs();
    if a >= 6.0 {
        return z.signum();
    }
    let two_z2 = 2.0 * a * a;
    let (mut term, mut sum, mut n) = (1.0f64, 1.0f64, 0u32);
    loop {
        n += 1;
        term *= two_z2 / (2 * n + 1) as f64;
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    let v = 2.0 * a / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum;
    v.min(1.0).copysign(z)
}

/// Φ(x) of a normal distribution (normal.c's `normal(x, 0, 1)`).
fn phi(x: f64) -> f64 {
    0.5 + 0.5 * erf(x / std::f64::consts::SQRT_2)
}

/// `rint`: round half to even, as C's default rounding mode.
fn rint(v: f64) -> f64 {
    v.round_ties_even()
}

fn clamp_i16(v: i64) -> i16 {
    v.clamp(i16::MIN as i64, i16::MAX as i64) as i16
}

/// The inverse normal CDF sampled every 4th of 16 384 probabilities, unscaled (normal.c's `table[]`).
fn normal_inverse() -> Vec<f64> {
    const N: usize = 16384;
    let mut table = vec![0.0f64; N + 1];
    let mut x = -10.0f64;
    while x < 10.05 {
        let i = rint(N as f64 * phi(x)) as usize;
        table[i.min(N)] = x;
        x += 0.00005;
    }
    table
}

fn normal_table() -> Vec<i16> {
    let inv = normal_inverse();
    (0..16384)
        .step_by(4)
        .map(|i| clamp_i16(rint(inv[i] * NETEM_DIST_SCALE as f64) as i64))
        .collect()
}

/// pareto.c's value at probability `i`/65536.
fn pareto_value(i: i64) -> i64 {
    let p = i as f64 / 65536.0;
    let mut v = 1.0 / p.powf(1.0 / 3.0);
    v -= 1.5;
    v *= (4.0 / 3.0) * NETEM_DIST_SCALE as f64;
    if v > 32767.0 {
        v = 32767.0;
    }
    rint(v) as i64
}

fn pareto_table() -> Vec<i16> {
    (0..TABLE_ENTRIES as i64)
        .map(|k| clamp_i16(pareto_value(65536 - 16 * k)))
        .collect()
}

fn paretonormal_table() -> Vec<i16> {
    let inv = normal_inverse();
    (0..16384i64)
        .step_by(4)
        .map(|i| {
            let norm = rint(inv[i as usize] * NETEM_DIST_SCALE as f64) as i64;
            // paretonormal.c's paretovalue(i) takes i = 65536 − 4i.
            let par = pareto_value(65536 - 4 * i);
            clamp_i16((norm + 3 * par) / 4)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // Abramowitz & Stegun table 7.1.
        for (z, e) in [
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
        ] {
            assert!((erf(z) - e).abs() < 1e-15, "erf({z}) = {}", erf(z));
            assert!((erf(-z) + e).abs() < 1e-15);
        }
    }

    #[test]
    fn tables_have_the_shape_of_their_distributions() {
        for d in [
            Distribution::Normal,
            Distribution::Pareto,
            Distribution::Paretonormal,
        ] {
            let t = d.table();
            assert_eq!(t.len(), TABLE_ENTRIES, "{}", d.name());
            assert!(
                t.windows(2).all(|w| w[0] <= w[1]),
                "{} is monotonic",
                d.name()
            );
            let mean = t.iter().map(|&v| v as f64).sum::<f64>() / t.len() as f64;
            let sd =
                (t.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / t.len() as f64).sqrt();
            // Mean 0 and σ 1 (× 8192), up to the clamping of the tails.
            assert!(mean.abs() < 0.05 * 8192.0, "{} mean {mean}", d.name());
            assert!(
                (sd / 8192.0 - 1.0).abs() < 0.25,
                "{} sd {}",
                d.name(),
                sd / 8192.0
            );
        }
        let n = Distribution::Normal.table();
        // The median of a normal distribution is its mean: the middle entry is 0.
        assert!(n[2048].abs() <= 1, "{}", n[2048]);
        assert!((n[1024] as i32 + n[3072] as i32).abs() <= 2, "symmetric");
        let p = Distribution::Pareto.table();
        // p = 1 gives 1 − 1.5 = −0.5, × 4/3 × 8192 = −5461.33 → −5461.
        assert_eq!(p[0], -5461);
        assert_eq!(p[4095], 32767);
    }
}

#[cfg(test)]
mod installed {
    use super::*;

    /// iproute2's own tables, when this machine has them installed: the generated ones must be equal.
    #[test]
    fn tables_equal_iproute2s_installed_files() {
        for d in [
            Distribution::Normal,
            Distribution::Pareto,
            Distribution::Paretonormal,
        ] {
            let path = format!("/usr/lib/x86_64-linux-gnu/tc/{}.dist", d.name());
            let Ok(text) = std::fs::read_to_string(&path) else {
                eprintln!("skipped: {path} not installed");
                continue;
            };
            let theirs: Vec<i16> = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .flat_map(|l| l.split_whitespace().map(|w| w.parse::<i16>().unwrap()))
                .collect();
            let ours = d.table();
            let diff: Vec<usize> = (0..ours.len().min(theirs.len()))
                .filter(|&i| ours[i] != theirs[i])
                .collect();
            assert_eq!(theirs.len(), ours.len(), "{}", d.name());
            assert!(
                diff.is_empty(),
                "{}: {} entries differ, first at {:?}",
                d.name(),
                diff.len(),
                diff.first().map(|&i| (i, ours[i], theirs[i]))
            );
        }
    }
}
