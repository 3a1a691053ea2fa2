//! The body of the scenario loader's fuzz target, shared by `fuzz/fuzz_targets/scenario_toml.rs`
//! (libFuzzer, nightly) and the deterministic test `tests/scenario_toml_fuzz.rs` (stable, in CI).
//!
//! An input is a scenario file's bytes (not UTF-8: U+FFFD, as a reader of the file would refuse it
//! otherwise). The properties:
//!
//! - the loader never panics: it loads the scenario or refuses it with an error that names the file, a
//!   line of it (1 to one past the last) and says what is wrong;
//! - a scenario that loads runs, briefly ([`RUN_CAP`] of virtual time, at most [`MAX_SAMPLES`] sampler
//!   intervals), without a panic and without an error: what validation let through must be runnable;
//! - twice from the same bytes, it runs to the same numbers (events, frames, each flow's bytes): the
//!   simulator is deterministic.
//!
//! A policy given as `script` or `batch` names a file to run or read: such an input is left out (the
//! fuzzer must not run the machine's scripts; `tests/scenario_fuzz.rs` and the scenario tests cover them).

use crate::scenario::{load, ScenarioFile};

/// The virtual time a loaded input runs for: long enough for TCP's handshake and first flights, short
/// enough that a 10 Gbit/s link with a thousand streams stays well under a second of real time.
pub const RUN_CAP: tclab_core::Nanos = 20_000_000;

/// The sampler intervals a fuzzed run may have (each keeps a row per interface, class and flow).
pub const MAX_SAMPLES: u64 = 20;

/// The file name errors must carry.
const FILE: &str = "fuzz.toml";

/// What became of one input (the stable test counts both outcomes).
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    Refused,
    Ran,
    /// A policy that reads or runs a file: not loaded.
    Skipped,
}

/// Run one fuzz input; panics if a property does not hold.
pub fn fuzz_one(data: &[u8]) -> Fate {
    let text = String::from_utf8_lossy(data);
    if names_a_file(&text) {
        return Fate::Skipped;
    }
    let first = match load(FILE, &text, std::path::Path::new("/nonexistent")) {
        Ok(sc) => sc,
        Err(e) => {
            let lines = text.lines().count().max(1);
            assert!(
                (1..=lines + 1).contains(&e.line),
                "{e}: line {} outside 1..={}",
                e.line,
                lines + 1
            );
            assert!(e.to_string().starts_with("fuzz.toml:"), "{e}");
            assert!(
                !e.message.trim().is_empty(),
                "an error without a message: {e}"
            );
            return Fate::Refused;
        }
    };
    let a = run_briefly(first);
    let again = load(FILE, &text, std::path::Path::new("/nonexistent"))
        .unwrap_or_else(|e| panic!("loaded once, refused the second time: {e}"));
    let b = run_briefly(again);
    assert_eq!(a, b, "the same scenario ran differently twice");
    Fate::Ran
}

/// A run's numbers that two runs of the same input must share.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    events: u64,
    frames: u64,
    flows: Vec<(u64, u64)>,
}

fn run_briefly(mut sc: crate::scenario::Scenario) -> Summary {
    sc.duration = sc.duration.min(RUN_CAP);
    sc.sample = sc.sample.max(sc.duration / MAX_SAMPLES).max(1);
    let out = crate::run::run(&mut sc, &mut |_| {})
        .unwrap_or_else(|e| panic!("a scenario that loaded did not run: {e}"));
    Summary {
        events: out.events,
        frames: out.frames,
        flows: out
            .flows
            .iter()
            .map(|f| (f.sent_bytes, f.delivered_bytes))
            .collect(),
    }
}

/// Whether the text, as TOML, has a policy that reads a file (`batch`) or runs one (`script`). Text that
/// is not a scenario at all is the loader's to refuse.
fn names_a_file(text: &str) -> bool {
    toml::from_str::<ScenarioFile>(text).is_ok_and(|f| {
        f.policy
            .iter()
            .any(|p| p.script.is_some() || p.batch.is_some())
    })
}
