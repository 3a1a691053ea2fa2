//! Seed 000's "check of the burst assumption": `tbf rate 40Mbit burst 159900000 latency 10s` under a
//! flood, whose plot showed "a clear spike of traffic, then the normal rate". The built-in
//! seed000-tbf-burst reproduces it; the figures below are derived by hand from the scenario.

use tclab_sim::builtin::find;
use tclab_sim::scenario::load;

mod common;

#[test]
fn a_huge_burst_lets_the_flood_through_then_tbf_holds_the_rate() {
    let name = "seed000-tbf-burst";
    let b = find(name).expect("built in");
    let mut sc = load(name, &b.toml(), std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    // router0:eth1's transmit rate per 500 ms sample, (end of the sample in s, bit/s).
    let eth1 = common::tx_samples(&sc, &out, "router0:eth1");
    assert_eq!(eth1.len(), 20, "{eth1:?}");
    // The flood: 30 × 30 Mbit/s of 1448-byte payloads in 1490-byte frames, 926.1 Mbit/s, from 1 s.
    let flood = 30.0 * 30e6 * 1490.0 / 1448.0;
    let rate = 40e6;
    // The bucket, 159 900 000 bytes, empties at the flood's rate less the rate's: 1.444 s after 1 s.
    let spike_end = 1.0 + 159_900_000.0 * 8.0 / (flood - rate);
    for &(t, bps) in &eth1 {
        let expected = if t <= 1.0 {
            0.0
        } else if t <= spike_end {
            flood
        } else if t - 0.5 < spike_end {
            // The sample the tokens run out in: the flood's rate until then, the rate after.
            ((spike_end - (t - 0.5)) * flood + (t - spike_end) * rate) / 0.5
        } else {
            rate
        };
        // 1 %: a sample counts whole frames (one 1490-byte frame in 500 ms is 24 kbit/s, 0.06 % of the
        // rate), and the flood's 30 streams are paced each on its own.
        assert!(
            (bps - expected).abs() <= 0.01 * expected.max(rate),
            "sample ending {t} s: {bps:.0} bit/s, expected {expected:.0}: {eth1:?}"
        );
    }
    // The headline: the first samples of the flood are over twenty times the rate, the rest at it.
    assert!(
        eth1[2].1 > 20.0 * rate && eth1[3].1 > 20.0 * rate,
        "{eth1:?}"
    );
    assert!(
        eth1[5..].iter().all(|s| (s.1 - rate).abs() < 0.001 * rate),
        "{eth1:?}"
    );
}
