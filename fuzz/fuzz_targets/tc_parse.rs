//! libFuzzer target for the tc parser: each input is a script of tc command lines run against one engine.
//! The body and the input format are `tclab_tc::fuzz::fuzz_one`, also run on stable by
//! crates/tc/tests/fuzz_parser.rs.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tclab_tc::fuzz::fuzz_one(data);
});
