//! The bufferbloat experiment (seed 003's closing pages; RFC 8290): 4 CUBIC downloads through a router's
//! 10 Mbit/s downlink from a server 20 ms away (RTT 20.4 ms idle), with a ping alongside, first with a
//! 1000-packet FIFO, then with fq_codel. The scenarios are `examples/bufferbloat/*.toml`.

use tclab_sim::scenario::load;

fn run(file: &str) -> (f64, f64, f64) {
    let (p50, p99, goodput, _) = run_full(file);
    (p50, p99, goodput)
}

/// Also the downloads' retransmissions.
fn run_full(file: &str) -> (f64, f64, f64, u64) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/bufferbloat")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut sc = load(file, &text, path.parent().unwrap()).unwrap_or_else(|e| panic!("{e}"));
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    let p = &out.pings[0].rtt;
    (
        p.p50_ms,
        p.p99_ms,
        out.flows[0].goodput_bps,
        out.flows[0].retransmits,
    )
}

#[test]
fn fq_codel_cures_the_fifos_bufferbloat() {
    // Goodput: 10 Mbit/s × 1448/1514 (payload per full frame) = 9.56 Mbit/s at best.
    let line = 10e6 * 1448.0 / 1514.0;
    let (fifo_p50, fifo_p99, fifo_goodput) = run("pfifo.toml");
    let (fq_p50, fq_p99, fq_goodput) = run("fq_codel.toml");
    // The FIFO: CUBIC keeps the 1000-packet queue mostly full; full, it is 1000 × 1514 × 8 / 10 Mbit/s
    // = 1.211 s of queueing on top of the 20.4 ms path.
    assert!(
        fifo_p99 > 1000.0 && fifo_p99 < 20.4 + 1211.2 + 2.0,
        "FIFO p99 {fifo_p99:.1} ms"
    );
    assert!(fifo_p50 > 500.0, "FIFO median {fifo_p50:.1} ms");
    // fq_codel: the ping is a sparse flow, served before the bulk flows once the current flow's quantum is
    // spent — at most two 1514-byte frames (2.4 ms at 10 Mbit/s) behind, plus its own 0.1 ms.
    assert!(fq_p99 < 20.4 + 2.5 + 0.5, "fq_codel p99 {fq_p99:.1} ms");
    assert!(fq_p50 < 22.0, "fq_codel median {fq_p50:.1} ms");
    // And the line stays full either way (within 2 % of the best possible goodput; measured 0.2 % under).
    for (name, g) in [("pfifo", fifo_goodput), ("fq_codel", fq_goodput)] {
        assert!(
            g > 0.98 * line && g <= line * 1.001,
            "{name} goodput {g:.0} vs {line:.0}"
        );
    }
}

/// With ECN negotiated (RFC 3168), fq_codel marks instead of dropping: CUBIC still halves its window on
/// each echoed mark, so the ping's RTT and the goodput are those of the dropping run, but no segment is
/// lost and none is retransmitted (the dropping run retransmits every packet CoDel drops).
#[test]
fn with_ecn_fq_codel_marks_instead_of_dropping() {
    let (_, _, _, drop_retrans) = run_full("fq_codel.toml");
    let (p50, p99, goodput, retrans) = run_full("fq_codel_ecn.toml");
    assert!(
        drop_retrans > 100,
        "without ECN CoDel drops ({drop_retrans} retransmissions)"
    );
    assert_eq!(retrans, 0, "with ECN nothing is lost");
    assert!(
        p99 < 20.4 + 2.5 + 0.5 && p50 < 22.0,
        "ECN ping {p50:.1}/{p99:.1} ms"
    );
    let line = 10e6 * 1448.0 / 1514.0;
    assert!(goodput > 0.98 * line, "ECN goodput {goodput:.0}");
}

/// The same lab with `pie` (one FIFO, RFC 8033) and `fq_pie` (PIE per flow queue) on the router.
#[test]
fn pie_holds_the_target_delay_and_fq_pie_isolates_the_ping() {
    let line = 10e6 * 1448.0 / 1514.0;
    // pie: no flow queues, so the ping waits behind the downloads' standing queue, which PIE holds at
    // its 15 ms target (RFC 8033; the integral term leaves no steady-state error): the median RTT is the
    // 20.4 ms path plus ~15 ms (measured 34.9 ms), against over a second behind the FIFO.
    let (p50, _, goodput) = run("pie.toml");
    assert!((p50 - (20.4 + 15.0)).abs() < 5.0, "pie median {p50:.1} ms");
    // fq_pie: the ping is a sparse flow in its own queue, served as under fq_codel: at most two 1514-byte
    // frames (2.4 ms) behind, plus its own 0.1 ms (measured p99 21.6 ms, as fq_codel's).
    let (fq_p50, fq_p99, fq_goodput) = run("fq_pie.toml");
    assert!(fq_p99 < 20.4 + 2.5 + 0.5, "fq_pie p99 {fq_p99:.1} ms");
    assert!(fq_p50 < 22.0, "fq_pie median {fq_p50:.1} ms");
    // The line stays full (measured 9.53 and 9.54 Mbit/s of the 9.56 possible).
    for (name, g) in [("pie", goodput), ("fq_pie", fq_goodput)] {
        assert!(
            g > 0.98 * line && g <= line * 1.001,
            "{name} goodput {g:.0} vs {line:.0}"
        );
    }
}
