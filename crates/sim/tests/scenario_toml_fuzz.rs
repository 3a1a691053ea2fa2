//! The scenario_toml fuzz target's body (`tclab_sim::fuzz::fuzz_one`) on stable Rust: every file in
//! `fuzz/seeds/scenario_toml/` (the target's seeds and the place for its reproducers), then byte-level
//! mutations of them — bytes replaced, tokens of the format inserted, ranges cut or repeated, two seeds
//! spliced — as libFuzzer makes them, from a fixed seed. Each input loads and runs briefly, twice, to the
//! same numbers, or is refused with the file and a line (the properties are the body's).
//! `tests/scenario_fuzz.rs` mangles the built-in scenarios line by line; this one works below the line.

use tclab_sim::fuzz::{fuzz_one, Fate};
use tclab_sim::rng::Rng;
use tclab_tc::fuzz::seeds;

/// What libFuzzer's dictionary offers too (`fuzz/scenario_toml.dict`), a few of each kind.
const TOKENS: &[&str] = &[
    "[[node]]\n",
    "[[link]]\n",
    "[[traffic]]\n",
    "[[policy]]\n",
    "[plot]\n",
    "rate = ",
    "delay = ",
    "streams = ",
    "duration = ",
    "sample = ",
    "\"0s\"",
    "\"1ns\"",
    "\"1tbit\"",
    "\"-1\"",
    "65535",
    "4294967296",
    "1e308",
    "nan",
    "\"\"\"",
    "'",
    "=",
    "\n",
    "\"router:eth9\"",
    "\"ping\"",
    "qdisc add dev eth1 root netem delay 1s\n",
];

fn mutate(base: &[u8], other: &[u8], r: &mut Rng) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + r.below(2) {
        let at = r.below(b.len() as u64 + 1) as usize;
        match r.below(5) {
            0 if at < b.len() => b[at] = r.below(256) as u8,
            1 => {
                let t = TOKENS[r.below(TOKENS.len() as u64) as usize];
                b.splice(at..at, t.bytes());
            }
            2 => {
                let end = (at + 1 + r.below(40) as usize).min(b.len());
                b.drain(at.min(end)..end);
            }
            3 => {
                let end = (at + 1 + r.below(80) as usize).min(b.len());
                let piece = b[at.min(end)..end].to_vec();
                b.splice(at..at, piece);
            }
            _ => {
                // The head of this input, the tail of another.
                let cut = r.below(other.len() as u64 + 1) as usize;
                b.truncate(at);
                b.extend_from_slice(&other[cut..]);
            }
        }
    }
    b
}

#[test]
fn seeds_and_their_mutations_load_and_run_or_are_refused_with_a_line() {
    let seeds: Vec<Vec<u8>> = seeds("scenario_toml").into_iter().map(|(_, b)| b).collect();
    let mut fates = [0usize; 3];
    let mut count = |f: Fate| fates[f as usize] += 1;
    for s in &seeds {
        assert_eq!(fuzz_one(s), Fate::Ran, "a seed must load and run");
    }
    let mut r = Rng::stream(24, "scenario-toml-fuzz");
    for i in 0..60 * seeds.len() {
        let other = &seeds[r.below(seeds.len() as u64) as usize];
        let input = mutate(&seeds[i % seeds.len()], other, &mut r);
        count(fuzz_one(&input));
    }
    eprintln!("refused, ran, skipped: {fates:?}");
    let [refused, ran, _] = fates;
    assert!(
        refused > 20 && ran > 20,
        "both outcomes exercised: {fates:?}"
    );
}

#[test]
fn bytes_that_are_not_a_scenario_are_refused_with_a_line() {
    for input in [
        &b""[..],
        b"\xff\xfe",
        b"duration = \"1s\"\n[[link]]\na = \"x\"\n",
        b"duration = \"1s\"\n\x00",
        b"[[node]]\n[[node]]\nname = 1",
    ] {
        assert_eq!(fuzz_one(input), Fate::Refused, "{input:?}");
    }
}
