//! netem in the simulator, against figures derived by hand: a link direction's `netem` line adds its delay
//! exactly, loses within binomial bounds, serialises at its rate exactly; the same seed gives the same run.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, load_with_seed};

fn go(text: &str) -> Outcome {
    let mut sc = match load("test.toml", text, std::path::Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

/// a --(10 Mbit/s, 1 ms)-- b, with `extra` added to the link.
fn line(extra: &str, traffic: &str) -> String {
    format!(
        r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "10mbit"
delay = "1ms"
{extra}
{traffic}
"#
    )
}

const PING: &str = "[[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\ninterval = \"100ms\"\n";

/// `netem delay 100ms` on the a→b direction: every RTT is the plain link's plus exactly 100 ms
/// (latency = 1 562 500 ticks × 64 ns = 100 000 000 ns).
#[test]
fn delay_100ms_adds_exactly_100ms_to_the_rtt() {
    let base = go(&line("", PING));
    let netem = go(&line("netem_ab = \"delay 100ms\"", PING));
    let (b, n) = (&base.pings[0], &netem.pings[0]);
    assert_eq!(b.received, 100);
    assert_eq!(
        n.received, 99,
        "the last probe's reply is still on its way at 10 s"
    );
    for (x, y) in b.samples.iter().zip(&n.samples) {
        assert_eq!(y.1, x.1 + 100_000_000);
    }
    // Both directions: 200 ms.
    let both = go(&line("netem = \"delay 100ms\"", PING));
    assert_eq!(both.pings[0].samples[0].1, b.samples[0].1 + 200_000_000);
}

/// `netem loss 1%` on a UDP flow of N packets: the losses are binomial(N, 0.01); the test accepts the
/// central 99.9 % (mean ± 3.29 σ).
#[test]
fn loss_1_percent_is_within_binomial_bounds() {
    // 5 Mbit/s of 1000-byte payloads for 10 s: 625 packets/s.
    let udp = "[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"5mbit\"\nlength = 1000\nstop = \"9s\"\n";
    for seed in [1u64, 2, 3] {
        let text = line("netem_ab = \"loss 1%\"", udp);
        let mut sc = load_with_seed("test.toml", &text, std::path::Path::new("."), Some(seed))
            .unwrap_or_else(|e| panic!("{e}"));
        let out = run(&mut sc, &mut |_| {}).unwrap();
        let f = &out.flows[0];
        let n = (f.sent_bytes / 1000) as f64;
        let lost = f.lost_packets as f64;
        let (mean, sd) = (n * 0.01, (n * 0.01 * 0.99).sqrt());
        assert!(n > 5000.0, "{n} packets");
        eprintln!(
            "seed {seed}: {lost} of {n} lost (bounds {:.1}..{:.1})",
            mean - 3.29 * sd,
            mean + 3.29 * sd
        );
        assert!(
            (lost - mean).abs() <= 3.29 * sd,
            "seed {seed}: {lost} lost of {n} (bounds {:.1}..{:.1})",
            mean - 3.29 * sd,
            mean + 3.29 * sd
        );
    }
}

/// `netem rate 1mbit`: a 1514-byte frame (ping -s 1472) is serialised in 1514 × 8 / 10^6 s = 12.112 ms,
/// exactly, on top of the link: the RTT with netem on a→b is the plain RTT + 12.112 ms. A 98-byte ping
/// frame: + 784 µs.
#[test]
fn rate_1mbit_serialises_exactly() {
    for (len, extra) in [(1472u32, 12_112_000u64), (56, 784_000)] {
        let ping = format!("{PING}length = {len}\n");
        let base = go(&line("", &ping));
        let netem = go(&line("netem_ab = \"rate 1mbit\"", &ping));
        for (x, y) in base.pings[0].samples.iter().zip(&netem.pings[0].samples) {
            assert_eq!(y.1, x.1 + extra, "{len}-byte ping");
        }
    }
    // Saturated: UDP frames of 1514 bytes leave netem one per 12.112 ms, so the receiver's payload rate is
    // 1472 × 8 / 12.112 ms = 972 259 bit/s in steady state.
    let udp =
        "[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"2mbit\"\nlength = 1472\n";
    let out = go(&line("netem_ab = \"rate 1mbit limit 100000\"", udp));
    let samples: Vec<f64> = out
        .recorder
        .flow_samples
        .iter()
        .filter(|s| s.t > 2_000_000_000)
        .map(|s| s.goodput_bps)
        .collect();
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    assert!((mean - 972_259.0).abs() < 0.01 * 972_259.0, "{mean}");
}

/// Jitter, reordering and duplication on a link run deterministically: same seed, same samples.
#[test]
fn same_seed_same_run() {
    let text = line(
        "netem = \"delay 20ms 5ms 25% distribution normal loss 2% duplicate 1% reorder 10% gap 3\"",
        PING,
    );
    let a = go(&text);
    let b = go(&text);
    assert_eq!(a.pings[0].samples, b.pings[0].samples);
    let mut sc = load_with_seed("test.toml", &text, std::path::Path::new("."), Some(99)).unwrap();
    let c = run(&mut sc, &mut |_| {}).unwrap();
    assert_ne!(a.pings[0].samples, c.pings[0].samples);
}

/// A bad netem line is refused with the file, line and key, as tc refuses it.
#[test]
fn bad_lines_are_refused_with_their_place() {
    for (line_text, want) in [
        ("netem = \"loss 101%\"", "Illegal \"loss percent\""),
        ("netem_ba = \"delay -10ms\"", "too large"),
        (
            "netem = \"delay 10ms distribution normal\"",
            "no latency and jitter",
        ),
        ("netem = \"delay 1ms\"\nloss = 0.1", "not both"),
    ] {
        let text = line(line_text, "");
        let e = match load("test.toml", &text, std::path::Path::new(".")) {
            Ok(_) => panic!("{line_text} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want) && e.contains("test.toml:"), "{e}");
    }
}

/// A TCP flow over a link whose netem line only delays: nothing is lost, so nothing is retransmitted,
/// and the flow gets what it gets over a plain link with the same round trip. Before, a frame's TX
/// completion let its socket put the next frame on the wire before the finished one entered the
/// netem, which then took the new frame in its place: about 2 % of a TCP flow's frames vanished
/// uncounted (no `wire_lost`), each a recovery (`tclab sim` of CUBIC at 10 Mbit/s: 1.5 % retransmitted).
#[test]
fn a_delay_only_netem_loses_no_tcp_frame() {
    let tcp = "[[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n";
    let plain = go(&line("", tcp).replace("delay = \"1ms\"", "delay = \"1500us\""));
    let netem = go(&line("netem_ab = \"delay 1ms\"", tcp));
    let (p, n) = (&plain.flows[0], &netem.flows[0]);
    assert_eq!(p.retransmits, 0, "the plain link loses nothing");
    assert_eq!(n.retransmits, 0, "netem delay 1ms loses nothing either");
    // Same RTT (3 ms: 1.5 + 1.5 against 1 + 1 + 1), same line: the same goodput within 0.5 %.
    let ratio = n.goodput_bps / p.goodput_bps;
    assert!(
        (0.995..=1.005).contains(&ratio),
        "{} against {}",
        n.goodput_bps,
        p.goodput_bps
    );
}
