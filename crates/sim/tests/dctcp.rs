//! DCTCP and ECN through fq_codel (the built-in `dctcp-fq_codel`, `crates/sim/scenarios/dctcp/fq_codel.toml`):
//! a server 10 ms from a router whose 10 Mbit/s downlink has `fq_codel ce_threshold 1ms`; base RTT 20.4 ms.
//! A 1514-byte frame takes 1514 · 8 / 10 Mbit/s = 1.211 ms on that link; the line carries at best
//! 10 Mbit/s · 1448 / 1514 = 9.56 Mbit/s of payload.

use tclab_sim::builtin::find;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::{load, Scenario};

const FRAME: u32 = 1514;

/// The built-in scenario with `(from, to)` text replacements, run.
fn run(edits: &[(&str, &str)]) -> (Scenario, Outcome) {
    let mut text = find("dctcp-fq_codel").expect("built in").toml();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    run_text("dctcp-fq_codel", &text)
}

fn run_text(name: &str, text: &str) -> (Scenario, Outcome) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sc = load(name, text, dir).unwrap_or_else(|e| panic!("{e}"));
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    (sc, out)
}

/// `tc -s qdisc show dev eth1` on the router.
fn router_qdisc(out: &Outcome) -> &str {
    out.tc_show
        .iter()
        .find(|(node, dev, _)| node == "router" && dev == "eth1")
        .map(|(_, _, t)| t.as_str())
        .expect("router eth1 shown")
}

/// The number after `key ` in `tc -s` text (`dropped 0,`, `ce_mark 12`).
fn counter(text: &str, key: &str) -> u64 {
    let at = text
        .find(&format!("{key} "))
        .unwrap_or_else(|| panic!("{key} in {text}"));
    text[at + key.len() + 1..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {text}"))
}

/// The router's downlink backlog in bytes, sampled every 10 ms from 3 s on (past slow start), sorted.
fn backlog(sc: &Scenario, out: &Outcome) -> Vec<u32> {
    let mut b: Vec<u32> = out
        .recorder
        .iface_samples
        .iter()
        .filter(|s| sc.net.port_label(s.iface) == "router:eth1" && s.t > 3_000_000_000)
        .map(|s| s.backlog_bytes)
        .collect();
    b.sort_unstable();
    b
}

fn pct(sorted: &[u32], p: usize) -> u32 {
    sorted[(sorted.len() - 1) * p / 100]
}

/// `ce_threshold 1ms` is less than one frame's time on this link. A delayed ACK releases two segments
/// back to back (at 100 Mbit/s, 0.121 ms apart): the second waits for the first, 1.211 − 0.121 =
/// 1.09 ms, more than 1 ms, and is marked. So the queue never holds more than about one frame and nothing is dropped,
/// but about half the packets are marked (measured 46 %) in every window: alpha ≈ 1/2, each window loses
/// alpha/2 = 1/4 of cwnd and Reno gains one segment, so cwnd ≈ 4 segments: 4 · 1448 · 8 / 20.4 ms ≈
/// 2.3 Mbit/s (measured 1.96). DCTCP's receiver echoes CE exactly (an ACK on every change of CE state),
/// so the packets the sender counts delivered with ECE (`TCPDeliveredCE`) are the ones fq_codel marked.
#[test]
fn ce_threshold_below_a_frame_holds_the_queue_but_starves_the_link() {
    let (sc, out) = run(&[]);
    let q = router_qdisc(&out);
    let f = &out.flows[0];
    let marked = counter(q, "ce_mark");
    let sent = counter(q, "bytes"); // "Sent B bytes P pkt": the packets
    assert_eq!(counter(q, "dropped"), 0, "{q}");
    assert_eq!(f.retransmits, 0);
    let b = backlog(&sc, &out);
    assert!(pct(&b, 50) == 0 && pct(&b, 99) <= FRAME, "backlog {b:?}");
    let frac = marked as f64 / sent as f64;
    assert!((0.4..=0.55).contains(&frac), "marked {marked} of {sent}");
    let delivered_ce = f.nstat.as_ref().expect("tcp").delivered_ce;
    assert!(
        delivered_ce.abs_diff(marked) <= 10,
        "echoed {delivered_ce}, marked {marked} (at most the last window's in flight)"
    );
    assert!(
        (1.0e6..3.5e6).contains(&f.goodput_bps),
        "goodput {}",
        f.goodput_bps
    );
}

/// With a threshold the DCTCP paper asks for, K > C · RTT / 7 (Alizadeh et al. 2010, §3.4): C · RTT =
/// 10 Mbit/s · 20.4 ms = 25.5 kB, 16.8 frames, so K > 2.4 frames = 2.9 ms; take 3 ms. DCTCP then fills the
/// line (within 2 % of 9.56 Mbit/s; measured 9.48) with no drop and a queue of at most 3 frames in
/// 9 samples of 10 (measured p90 3), while CUBIC, whose Not-ECT packets `ce_threshold` does not touch,
/// is held by CoDel's drops around its 5 ms target (4 frames): more queue (measured p90 6) and drops.
#[test]
fn a_threshold_of_c_rtt_over_7_fills_the_line_with_a_shorter_queue_than_cubic() {
    let line = 10e6 * 1448.0 / 1514.0;
    let (sc, out) = run(&[("ce_threshold 1ms", "ce_threshold 3ms")]);
    let q = router_qdisc(&out);
    let dctcp = (out.flows[0].goodput_bps, backlog(&sc, &out));
    assert_eq!(counter(q, "dropped"), 0, "{q}");
    assert!(counter(q, "ce_mark") > 0, "{q}");
    assert!(dctcp.0 > 0.98 * line, "DCTCP goodput {}", dctcp.0);
    assert!(
        pct(&dctcp.1, 90) <= 3 * FRAME,
        "DCTCP backlog p90 {}",
        pct(&dctcp.1, 90)
    );

    let (sc, out) = run(&[
        ("ce_threshold 1ms", "ce_threshold 3ms"),
        ("cc = \"dctcp\"", "cc = \"cubic\""),
    ]);
    let q = router_qdisc(&out);
    let cubic = (out.flows[0].goodput_bps, backlog(&sc, &out));
    assert!(counter(q, "dropped") > 0, "{q}");
    assert!(
        q.contains("ecn_mark 0") && !q.contains("ce_mark"),
        "nothing ECT to mark: {q}"
    );
    assert!(cubic.0 > 0.98 * line, "CUBIC goodput {}", cubic.0);
    assert!(
        pct(&cubic.1, 90) > pct(&dctcp.1, 90),
        "CUBIC p90 {} vs DCTCP {}",
        pct(&cubic.1, 90),
        pct(&dctcp.1, 90)
    );
}

/// RFC 3168 ECN with CUBIC through plain fq_codel (`examples/bufferbloat/fq_codel_ecn.toml`, 4 downloads):
/// CoDel's control law marks (`ecn_mark`) where it would drop, so nothing is dropped or retransmitted.
/// The receiver echoes ECE from a mark until the sender's CWR arrives, about an RTT, so the packets
/// delivered by ECE ACKs outnumber the marks.
#[test]
fn cubic_with_ecn_is_marked_not_dropped() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/bufferbloat/fq_codel_ecn.toml");
    let text = std::fs::read_to_string(&path).expect("example");
    let mut sc = load("fq_codel_ecn.toml", &text, path.parent().unwrap()).unwrap();
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    let q = router_qdisc(&out);
    let marks = counter(q, "ecn_mark");
    assert!(marks > 0, "{q}");
    assert_eq!(counter(q, "dropped"), 0, "{q}");
    let f = &out.flows[0];
    assert_eq!(f.retransmits, 0);
    let delivered_ce = f.nstat.as_ref().expect("tcp").delivered_ce;
    assert!(
        delivered_ce > marks,
        "echoed {delivered_ce}, marked {marks}"
    );
}
