//! Seed 000's "HTB with default settings" experiments: one HTB class at 180 kbit/s, 2 Mbit/s and 128 Mbit/s,
//! whose leaf is the default pfifo of txqueuelen = 1000 packets, flooded with UDP while a ping runs. The
//! notes measured pings of about 65 s, 6 s and 100 ms: a ping that gets into the full leaf waits behind
//! 1000 frames. The built-in seed000-htb-* scenarios reproduce the experiment.

use tclab_sim::builtin::find;
use tclab_sim::scenario::load;

fn worst_ping_ms(name: &str) -> (f64, u64, f64) {
    let b = find(name).expect("built in");
    let mut sc = load(name, &b.toml(), std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    let p = &out.pings[0];
    (p.rtt.max_ms, p.received, out.flows[0].goodput_bps)
}

/// The least the worst ping seen can have waited. Once the leaf is full a ping gets in only when a
/// departure frees a slot before a flood packet takes it (then it waits behind a full queue), which is rare
/// at ten times overload; so the worst one seen may be the last admitted while the queue was filling. The
/// flood (ten times the rate in 1448-byte payloads) outruns the class by 10 × 1490/1448 − 1 = 9.29 s of
/// queueing per second, and a ping comes every `interval_ms` (at a phase the seed draws), so that last one
/// arrived at most one interval before the queue was full: at least the full queue less 9.29 intervals.
fn filling_floor_ms(full_queue_ms: f64, interval_ms: f64) -> f64 {
    full_queue_ms - (10.0 * 1490.0 / 1448.0 - 1.0) * interval_ms
}

#[test]
fn a_ping_waits_behind_the_whole_default_leaf_queue() {
    // A full leaf is 1000 frames of 1448 + 8 + 20 + 14 = 1490 bytes: 1000 × 1490 × 8 / rate, plus the
    // ping's own 98-byte frame at that rate and the idle path (4 × 100 µs of propagation and the gigabit
    // hops, under 0.5 ms). By hand: 180 kbit/s → 66.226 s, 2 Mbit/s → 5.960 s, 128 Mbit/s → 93.13 ms.
    // The seed measured 64.1–65.7 s, about 6.0 s and 100–105 ms (its iperf sent 60 kB datagrams, so its
    // frames were full 1514-byte fragments, and its VMs added their own delays).
    for (name, rate, seed_ms, interval_ms) in [
        ("seed000-htb-180kbit", 180e3, 65_400.0, 1000.0),
        ("seed000-htb-2mbit", 2e6, 6_000.0, 200.0),
        ("seed000-htb-128mbit", 128e6, 100.0, 100.0),
    ] {
        let (worst, received, goodput) = worst_ping_ms(name);
        let full_queue_ms = (1000.0 * 1490.0 + 98.0) * 8.0 / rate * 1e3;
        assert!(
            received >= 2,
            "{name}: some pings get through the full queue ({received})"
        );
        // Never more than a full queue; and at least what the last ping admitted while the queue filled
        // waited (`filling_floor_ms`).
        assert!(
            worst <= full_queue_ms + 0.5 && worst >= filling_floor_ms(full_queue_ms, interval_ms),
            "{name}: worst ping {worst:.1} ms, a full queue is {full_queue_ms:.1} ms"
        );
        assert!(
            (worst - seed_ms).abs() / seed_ms < 0.1,
            "{name}: {worst:.1} ms against the seed's {seed_ms} ms"
        );
        // The class gives exactly its rate: payload 1448 of each 1490-byte frame.
        let expected = rate * 1448.0 / 1490.0;
        assert!(
            (goodput - expected).abs() / expected < 0.01,
            "{name}: goodput {goodput:.0} vs {expected:.0}"
        );
    }
}

/// The HFSC section seed 000 left empty, as its lab would have run it. HFSC used as a shaper (`sc` and `ul`
/// of 180 kbit/s on one class, default pfifo leaf) queues the ping behind the same 1000 frames as HTB:
/// (1000 × 1490 + 98) × 8 / 180 000 = 66.2 s at worst. Put ICMP in a real-time class (`rt umax 1514b dmax
/// 10ms rate 20kbit`) and HFSC serves it before link sharing, whatever the bulk class holds: every ping
/// crosses the idle path — four 100 µs links plus a 98-byte frame at 1 Gbit/s each, 0.403 ms — plus at
/// most one 1490-byte flood frame ahead of it on each of the two links the flood crosses (11.9 µs each). The flood keeps the rest of the 180 kbit/s:
/// (180 000 − 784 bit/s of ping) × 1448 / 1490 = 174.2 kbit/s of UDP payload.
#[test]
fn hfsc_keeps_the_ping_out_of_the_bulk_queue_with_a_real_time_curve() {
    let (worst, received, goodput) = worst_ping_ms("seed000-hfsc-180kbit");
    let full_queue_ms = (1000.0 * 1490.0 + 98.0) * 8.0 / 180e3 * 1e3;
    assert!(
        received >= 2,
        "some pings get through the full queue ({received})"
    );
    assert!(
        worst <= full_queue_ms + 0.5 && worst >= filling_floor_ms(full_queue_ms, 1000.0),
        "HFSC default leaf: worst ping {worst:.1} ms, a full queue is {full_queue_ms:.1} ms"
    );
    let expected = 180e3 * 1448.0 / 1490.0;
    assert!(
        (goodput - expected).abs() / expected < 0.01,
        "goodput {goodput:.0} vs {expected:.0}"
    );

    let (worst, received, goodput) = worst_ping_ms("seed000-hfsc-rt-180kbit");
    assert_eq!(received, 100, "every ping answered");
    let idle_ms = 4.0 * (0.1 + 98.0 * 8.0 / 1e9 * 1e3);
    assert!(
        worst <= idle_ms + 2.0 * 1490.0 * 8.0 / 1e9 * 1e3 + 0.001,
        "real-time ping: worst {worst:.3} ms, the idle path is {idle_ms:.3} ms"
    );
    let expected = (180e3 - 98.0 * 8.0) * 1448.0 / 1490.0;
    assert!(
        (goodput - expected).abs() / expected < 0.01,
        "goodput {goodput:.0} vs {expected:.0}"
    );
}
