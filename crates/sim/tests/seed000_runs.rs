//! Seed 000's runs that have a built-in scenario of their own beside the HTB and TBF ones: HTB with
//! burst/cburst 409600 (`seed000-htb-burst`) and the seed's traffic as its script ran it, 29 TCP and 29
//! UDP iperf streams with no shaper (`seed000-iperf`). The notes give plots only for both; the figures
//! below are derived by hand from the scenarios, shortened to seconds.

use tclab_sim::builtin::find;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::{load, Scenario};

mod common;

/// Loads a built-in with its `duration = "…"` line replaced, and each `(from, to)` of `edits`, and runs it.
fn run(name: &str, duration: &str, edits: &[(&str, &str)]) -> (Scenario, Outcome) {
    let text = find(name).expect("built in").toml();
    let line = text
        .lines()
        .find(|l| l.starts_with("duration = "))
        .expect("a duration line");
    let mut text = text.replacen(line, &format!("duration = \"{duration}\""), 1);
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    let mut sc = load(name, &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    (sc, out)
}

/// `tbf`'s twin for HTB: a 1 Mbit/s class whose buckets (burst and cburst) hold 409 600 bytes, full when
/// the flood starts at 1 s (30 streams of 334 kbit/s of 1448-byte payloads, 10.31 Mbit/s of 1490-byte
/// frames). HTB sends at the flood's rate until the tokens run out, 409600 × 8 / (10.31 − 1) Mbit/s =
/// 0.35 s later, so the sample ending at 1.5 s carries the bucket and half a second of the rate,
/// (3 276 800 + 500 000) / 0.5 = 7.55 Mbit/s; from then on every sample is the rate, give or take one
/// 1490-byte frame (23.8 kbit/s a sample).
#[test]
fn htb_with_a_409600_byte_burst_spikes_then_keeps_its_rate() {
    let (sc, out) = run("seed000-htb-burst", "5s", &[]);
    let eth1 = common::tx_samples(&sc, &out, "router0:eth1");
    assert_eq!(eth1.len(), 10, "{eth1:?}");
    let rate = 1e6;
    let frame = 1490.0 * 8.0 / 0.5;
    // Before the flood: the pings only (98-byte frames, one each 100 ms: 7 840 bit/s).
    assert!(eth1[..2].iter().all(|s| s.1 < 10e3), "{eth1:?}");
    // The flood's streams start within one packet interval (34.7 ms) of 1 s: the bucket and between
    // 0.465 and 0.5 s of the rate, and the pings.
    let spike = eth1[2].1;
    let (low, high) = (
        (409_600.0 * 8.0 + 0.465 * rate) / 0.5,
        (409_600.0 * 8.0 + 0.5 * rate) / 0.5 + frame + 10e3,
    );
    assert!(
        spike >= low && spike <= high,
        "sample ending 1.5 s: {spike:.0} bit/s, by hand {low:.0}..{high:.0}"
    );
    for &(t, bps) in &eth1[3..] {
        assert!(
            (bps - rate).abs() <= frame + 10e3,
            "sample ending {t} s: {bps:.0} bit/s, the rate {rate}: {eth1:?}"
        );
    }
}

/// The seed's script, `for I in seq 2 30`: a TCP and a UDP iperf stream to each port, 29 of each, with
/// no shaper. The UDP streams offer 29 × 70 Mbit/s, twice node1's gigabit NIC, so its 1000-packet
/// pfifo_fast stays full and drops what does not fit; the router forwards what arrives at the rate it
/// arrives and drops nothing. UDP fills the line: 1 Gbit/s of 1514-byte frames is 972.3 Mbit/s of
/// payload. TCP's segments meet a full queue that refuses half of what arrives: a refused segment stays
/// unsent (`tcp_write_xmit` stops at it and tries again on the next ACK or probe timer), so its 29
/// streams get under 1 % of the line and retransmit nothing, as nothing is lost. A ping that gets in waits behind the full queue, 1000 × 1514 bytes
/// at 1 Gbit/s = 12.11 ms, plus the idle path's 0.40 ms.
#[test]
fn the_seeds_iperf_streams_fill_the_line_with_udp_and_starve_tcp() {
    let (sc, out) = run("seed000-iperf", "3s", &[]);
    let tcp = out.flows.iter().find(|f| f.name == "iperf-tcp").unwrap();
    let udp = out.flows.iter().find(|f| f.name == "iperf-udp").unwrap();
    let line = 1e9 * 1472.0 / 1514.0;
    assert!(
        udp.goodput_bps > 0.98 * line && udp.goodput_bps <= line,
        "UDP goodput {} against the line's payload {line:.0}",
        udp.goodput_bps
    );
    assert!(
        tcp.goodput_bps < 0.01 * 1e9 && tcp.retransmits == 0,
        "TCP beside the flood: {} bit/s, {} retransmits",
        tcp.goodput_bps,
        tcp.retransmits
    );
    let dropped = |label: &str| {
        let i = sc
            .net
            .ifaces
            .iter()
            .position(|i| format!("{}:{}", sc.net.nodes[i.node].name, i.name) == label)
            .unwrap_or_else(|| panic!("{label}"));
        sc.net.ifaces[i].counters.tx_dropped
    };
    assert!(dropped("node1:eth0") > 100_000, "the sender's queue drops");
    assert_eq!(
        dropped("router0:eth1"),
        0,
        "the unshaped router drops nothing"
    );
    let full_ms = 1000.0 * 1514.0 * 8.0 / 1e9 * 1e3;
    let p = &out.pings[0];
    assert!(
        p.rtt.p99_ms > full_ms && p.rtt.p99_ms < full_ms + 0.5,
        "ping p99 {} ms, a full queue {full_ms:.2} ms",
        p.rtt.p99_ms
    );
}

/// The same traffic through the seed's `tbf rate 180kbit latency 20ms buffer 1540` on router0's eth1.
/// TBF's limit is rate × latency + buffer = 1990 bytes: one 1514-byte frame and up to four 98-byte pings.
/// A ping waits for the tokens of the frame ahead of it (67.3 ms at 180 kbit/s) and of the pings queued
/// before it (4.36 ms each), at most 67.3 + 5 × 4.36 ms plus the idle path; the seed saw 82–86 ms, which
/// the p99 must be within 10 % of. TCP gets no byte through a 1990-byte queue the UDP keeps full.
#[test]
fn the_seeds_tbf_under_its_iperf_streams_delays_the_ping_by_a_frame() {
    let tbf = "tc qdisc add dev eth1 root tbf rate 180kbit latency 20ms buffer 1540";
    let (_, out) = run(
        "seed000-iperf",
        "4s",
        &[("tc qdisc add dev eth1 root pfifo_fast", tbf)],
    );
    let tcp = out.flows.iter().find(|f| f.name == "iperf-tcp").unwrap();
    let udp = out.flows.iter().find(|f| f.name == "iperf-udp").unwrap();
    assert_eq!(tcp.delivered_bytes, 0, "TCP through the flooded TBF");
    // 180 kbit/s of frames less what the pings take (at most 10 a second of 98 bytes, 7.84 kbit/s), 1472
    // of each 1514 bytes payload, over the flood's 3 s, give or take a frame.
    let (share, slack) = (1472.0 / 1514.0, 1514.0 * 8.0 / 3.0);
    let (low, high) = ((180e3 - 7840.0) * share - slack, 180e3 * share + slack);
    assert!(
        udp.goodput_bps > low && udp.goodput_bps < high,
        "UDP goodput {}, by hand {low:.0}..{high:.0}",
        udp.goodput_bps
    );
    let (frame_ms, ping_ms) = (1514.0 * 8.0 / 180.0, 98.0 * 8.0 / 180.0);
    let p99 = out.pings[0].rtt.p99_ms;
    assert!(
        p99 > frame_ms && p99 < frame_ms + 5.0 * ping_ms + 0.5,
        "ping p99 {p99} ms: one frame {frame_ms:.1} ms, a ping {ping_ms:.2} ms"
    );
    assert!(
        (p99 - 84.0).abs() < 8.4,
        "ping p99 {p99} ms, the seed's 84 ms"
    );
}
