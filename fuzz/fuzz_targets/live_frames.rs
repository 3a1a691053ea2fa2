//! Arbitrary bytes as frames into tclab live's receive path (a detached bridge with a policy that
//! reaches ingress police, mirred to an ifb, HTB, SFQ and fq_codel): `cargo +nightly fuzz run
//! live_frames`. The body is `tclab_live::fuzz::fuzz_one`; crates/live/tests/bridge.rs runs it on
//! stable.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = tclab_live::fuzz::bridge();
    tclab_live::fuzz::fuzz_one(&mut b, data, 0);
});
