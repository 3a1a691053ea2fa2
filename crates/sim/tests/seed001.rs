//! Seed 001's Tables 4–7 (Linux Journal, "Analysis of the HTB queuing discipline"), short: the built-in
//! `seed001-*` scenarios run for 2 s instead of 10, each class held to a band derived by hand.
//! docs/EXPERIMENTS.md has the full tables beside the seed's figures, and why they differ.
//!
//! Every class is offered more than its rate, and none can borrow (the children's rates add up to their
//! parent's), so over T seconds a class sends its rate × T plus at most what the buckets its packets
//! can draw on held at the start (tokens start full): its own, its ancestors' (borrowed while they are
//! full) and, for an inner class, its descendants' (a leaf with tokens of its own sends, and its
//! ancestors are charged, whatever their tokens); and one packet past them (tokens go negative by
//! one).
//! Below, the first packet comes up to one packet interval late and the queue takes a few packets to
//! fill: a 0.5 % allowance covers it.

use serde_json::Value;
use tclab_sim::report::summary_json;
use tclab_sim::run::run;
use tclab_sim::scenario::load;

const SECONDS: f64 = 2.0;

/// The built-in `name` run for `SECONDS` after the `(from, to)` edits of its text; its summary.json.
fn summary(name: &str, edits: &[(&str, &str)]) -> Value {
    let b = tclab_sim::builtin::find(name).expect("a built-in scenario");
    let mut text = b.toml();
    for (from, to) in [("duration = \"10s\"", "duration = \"2s\"")]
        .iter()
        .chain(edits)
    {
        assert!(text.contains(from), "{name} holds {from:?}");
        text = text.replace(from, to);
    }
    let mut sc = load(name, &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    summary_json(&sc, &out)
}

/// Class `classid`'s average rate, bit/s.
fn class_bps(s: &Value, classid: &str) -> f64 {
    let classes = s["classes"].as_array().expect("classes");
    let c = classes
        .iter()
        .find(|c| c["classid"] == classid)
        .unwrap_or_else(|| panic!("no class {classid}"));
    c["avg_bps"].as_f64().expect("avg_bps")
}

/// `bps` is `rate` over `SECONDS`, give or take what is said at the top: 0.5 % below; above, the
/// `buckets` bytes of the bursts named at the top, and one 1514-byte frame.
fn assert_rate(what: &str, bps: f64, rate: f64, buckets: f64) {
    let (lo, hi) = (0.995 * rate, rate + (buckets + 1514.0) * 8.0 / SECONDS);
    assert!(
        (lo..=hi).contains(&bps),
        "{what}: {bps:.0} bit/s, expected {lo:.0} to {hi:.0}"
    );
}

#[test]
fn test1_a_class_sends_its_rate_whatever_the_burst_and_the_timer() {
    // The band: the 18k burst at 30 Mbit/s within 5 % of the rate (here tighter). The seed's
    // 15k rows (25.3 Mbit/s) are not reproduced: tokens counted to the nanosecond give the rate, and the
    // timer model (`hz`) does not bind either, each arrival (every 128 µs) running the qdisc as
    // qdisc_run does; the HZ = 100 row checks that claim of docs/EXPERIMENTS.md.
    let k = 1024.0;
    let s = summary("seed001-test1", &[]);
    assert_rate("18k, 512 B", class_bps(&s, "1:10"), 30e6, 18.0 * k);
    let burst15k = [("burst 18k cburst 18k", "burst 15k cburst 15k")];
    let s = summary("seed001-test1", &burst15k);
    assert_rate("15k, 512 B", class_bps(&s, "1:10"), 30e6, 15.0 * k);
    let s = summary(
        "seed001-test1",
        &[burst15k[0], ("seed = 1\n", "seed = 1\nhz = 100\n")],
    );
    assert_rate(
        "15k, 512 B, HZ = 100",
        class_bps(&s, "1:10"),
        30e6,
        15.0 * k,
    );
    // Table 5's rule: 4.8k at 8 Mbit/s, 1500-byte datagrams (the class's cburst, 4.8 × 1024 bytes).
    let s = summary(
        "seed001-test1",
        &[
            (
                "rate 30mbit ceil 30mbit burst 18k cburst 18k",
                "rate 8mbit ceil 8mbit burst 4.8k cburst 4.8k",
            ),
            ("length = 484", "length = 1472"),
        ],
    );
    assert_rate(
        "4.8k at 8 Mbit/s, 1500 B",
        class_bps(&s, "1:10"),
        8e6,
        4.8 * k,
    );
}

#[test]
fn test2_one_level_of_inheritance_splits_the_parent_by_the_rates() {
    // Class 2 (2 Mbit/s, offered 4) and class 3 (28 Mbit/s, offered 35) under class 1 (30 Mbit/s):
    // 2 + 28 = 30 leaves nothing to borrow, so each sends its rate and the parent their sum.
    let k = 1024.0;
    let s = summary("seed001-test2", &[]);
    let (c2, c3) = (class_bps(&s, "1:2"), class_bps(&s, "1:3"));
    assert_rate("class 2", c2, 2e6, (1.0 + 18.0) * k);
    assert_rate("class 3", c3, 28e6, (17.0 + 18.0) * k);
    assert_rate(
        "class 1",
        class_bps(&s, "1:1"),
        30e6,
        (18.0 + 1.0 + 17.0) * k,
    );
    // Streams 1 and 2 share class 3: what they delivered, as HTB counted it (each datagram with its
    // UDP, IP and Ethernet headers, 42 bytes), is what class 3 sent.
    let flows = s["flows"].as_array().expect("flows");
    let frame_bits = |i: usize, payload: f64| {
        flows[i]["delivered_bytes"].as_f64().expect("bytes") * (payload + 42.0) / payload * 8.0
    };
    let shared = (frame_bits(0, 36.0) + frame_bits(1, 484.0)) / SECONDS;
    assert!(
        shared <= c3 * 1.0001 && shared > 0.99 * c3,
        "streams 1 and 2: {shared:.0} bit/s against class 3's {c3:.0}"
    );
}

#[test]
fn test3_two_levels_of_inheritance_give_each_leaf_its_rate() {
    // Classes 4, 5, 6 (10, 5, 13 Mbit/s, each offered more) share class 3 (28), whose rate they add
    // up to; class 2 (2, offered 5) beside it. No spare anywhere: every class sends its rate.
    let k = 1024.0;
    let s = summary("seed001-test3", &[]);
    let leaves = [("1:4", 10e6, 6.0), ("1:5", 5e6, 3.0), ("1:6", 13e6, 7.8)];
    for (id, rate, burst_k) in leaves {
        assert_rate(id, class_bps(&s, id), rate, (burst_k + 16.8 + 18.0) * k);
    }
    assert_rate("class 2", class_bps(&s, "1:2"), 2e6, (1.0 + 18.0) * k);
    let c3 = class_bps(&s, "1:3");
    assert_rate("class 3", c3, 28e6, (6.0 + 3.0 + 7.8 + 16.8 + 18.0) * k);
    let sum: f64 = leaves.iter().map(|(id, ..)| class_bps(&s, id)).sum();
    assert!(
        (sum - c3).abs() <= 1.0,
        "class 3 sends what its leaves send: {sum:.0} against {c3:.0}"
    );
    let all = 18.0 + 1.0 + 16.8 + 6.0 + 3.0 + 7.8;
    assert_rate("class 1", class_bps(&s, "1:1"), 30e6, all * k);
}
