//! libFuzzer target for the scenario loader: each input is a scenario file's bytes, loaded (or refused
//! with the file and a line) and, if it loads, run briefly twice to the same numbers. The body is
//! `tclab_sim::fuzz::fuzz_one`, also run on stable by crates/sim/tests/scenario_toml_fuzz.rs.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tclab_sim::fuzz::fuzz_one(data);
});
