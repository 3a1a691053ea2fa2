//! libFuzzer target for `tclab script run`'s wrappers: each input is a script of tc/ip/ifconfig/ethtool/
//! sysctl/modprobe/iptables lines, run under bash against a fresh store. The body and the input format are
//! `tclab_tc::fuzz_script::fuzz_one`, also run on stable by crates/tc/tests/script_fuzz.rs.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tclab_tc::fuzz_script::fuzz_one(data);
});
