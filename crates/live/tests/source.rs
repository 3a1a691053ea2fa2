//! tclab's traffic source (`source.rs`) on a real veth, counted by the kernel at the other end: it
//! stops at its frame count and at its time, sends every frame it counts, never ahead of its pace.

use tclab_live::source::{self, Spec};
use tclab_live::vethns::VethNs;

/// Says once, on the terminal, why this file's tests pass as skipped: libtest captures what a passing
/// test prints with eprintln!, and the README promises a line.
fn skip(why: impl std::fmt::Display) {
    use std::io::Write;
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| drop(writeln!(std::io::stderr(), "source: SKIPPED: {why}")));
}

/// The test's namespace `lv-TAG-PID`, or `None` with the reason printed where namespaces cannot be
/// made (not root).
fn netns(tag: &str) -> Option<VethNs> {
    if let Err(e) = tclab_live::lab::Lab::check_root() {
        skip(e);
        return None;
    }
    Some(VethNs::new(&format!("lv-{tag}")).expect("the test's namespace"))
}

#[test]
fn the_source_sends_its_count_at_its_pace_and_the_far_end_counts_every_frame() {
    let Some(ns) = netns("src") else { return };
    let (sent, before, after) = ns
        .enter(|| {
            let before = source::counters("b0").unwrap();
            // 2 000 frames at 100 Mbit/s: the last is due at 1 999 × 121.12 µs = 242.1 ms.
            let spec = Spec {
                len: 1514,
                flows: 3,
                rate: 100_000_000,
                secs: 10.0,
                max_frames: 2000,
            };
            let sent = source::send("a0", &spec).unwrap();
            // veth delivers in the sender's softirq: counted by the time send returns.
            (sent, before, source::counters("b0").unwrap())
        })
        .unwrap();
    assert_eq!(sent.frames, 2000, "stopped at its count");
    assert_eq!(sent.bytes, 2000 * 1514);
    assert!(
        sent.elapsed_ns >= 1999 * 121_120,
        "never ahead of its pace: {} ns",
        sent.elapsed_ns
    );
    // Far under the 10 s it was allowed: it stopped at the count, not the time.
    assert!(sent.elapsed_ns < 5_000_000_000, "{} ns", sent.elapsed_ns);
    assert_eq!(
        after.rx_packets - before.rx_packets,
        2000,
        "every frame arrived"
    );
    assert_eq!(
        after.rx_bytes - before.rx_bytes,
        2000 * 1514,
        "counted from the Ethernet header on, as a qdisc charges"
    );
}

#[test]
fn the_source_stops_at_its_time() {
    let Some(ns) = netns("srct") else { return };
    let sent = ns
        .enter(|| {
            let spec = Spec {
                len: 64,
                flows: 1,
                rate: 10_000_000,
                secs: 0.2,
                max_frames: u64::MAX,
            };
            source::send("a0", &spec).unwrap()
        })
        .unwrap();
    // 10 Mbit/s of 64-byte frames is 19 531 a second: 3 906 due in 0.2 s (the first at once). It
    // sends only what is due, so no more than that, and catches up after a late wake-up, so most
    // of it (what fell due in its last sleep may be left when a loaded machine wakes it late).
    let due = 200_000_000u64 * 10_000_000 / (8 * 64 * 1_000_000_000) + 1;
    assert!(sent.elapsed_ns >= 200_000_000, "{} ns", sent.elapsed_ns);
    assert!(
        sent.frames <= due && sent.frames * 2 >= due,
        "{} frames, {due} due",
        sent.frames
    );
    // A spec that cannot be sent is refused before any socket is opened, naming the mistake.
    let bad = Spec {
        len: 30,
        flows: 1,
        rate: 1,
        secs: 1.0,
        max_frames: 1,
    };
    let e = source::send("no-such-device", &bad).unwrap_err();
    assert!(e.to_string().contains("frame length 30"), "{e}");
}
