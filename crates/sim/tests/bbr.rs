//! BBR in the simulator: one BBR flow through a 10 Mbit/s HTB class on a router fills it as CUBIC does,
//! with a far shorter queue (BBR keeps about two BDPs in flight; CUBIC fills the class's 1000-packet
//! queue until it overflows).

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

/// c --(1 Gbit/s, 5 ms)-- r --(1 Gbit/s, 5 ms)-- s; r shapes towards s with HTB at 10 Mbit/s; a TCP
/// flow with congestion control `cc` from c to s for 20 s and a ping every 100 ms beside it.
fn go(cc: &str) -> Outcome {
    let text = format!(
        r#"
duration = "20s"
[[node]]
name = "c"
[[node]]
name = "r"
[[node]]
name = "s"
[[link]]
a = "c:eth0"
b = "r:eth0"
rate = "1gbit"
delay = "5ms"
[[link]]
a = "r:eth1"
b = "s:eth0"
rate = "1gbit"
delay = "5ms"
[[policy]]
node = "r"
tc = """
qdisc add dev eth1 root handle 1: htb default 10
class add dev eth1 parent 1: classid 1:10 htb rate 10mbit
qdisc add dev eth1 parent 1:10 handle 10: pfifo limit 1000
"""
[[traffic]]
kind = "tcp"
from = "c"
to = "s"
cc = "{cc}"
[[traffic]]
kind = "ping"
from = "c"
to = "s"
interval = "100ms"
"#
    );
    let mut sc =
        load("bbr.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

fn median_ms(o: &Outcome) -> f64 {
    let mut v: Vec<u64> = o.pings[0].samples.iter().map(|s| s.1).collect();
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e6
}

#[test]
fn bbr_fills_a_10_mbit_class_with_a_short_queue() {
    let (bbr, cubic) = (go("bbr"), go("cubic"));
    // HTB charges 1514-byte frames at 10 Mbit/s: 1448 of each 1514 bytes are payload, less the
    // ping's 98-byte frames ten times a second: 9.558 Mbit/s of goodput, ±3 % (startup's first
    // rounds included).
    let want = 10e6 * 1448.0 / 1514.0 - 10.0 * 98.0 * 8.0 * 1448.0 / 1514.0;
    for o in [&bbr, &cubic] {
        let g = o.flows[0].goodput_bps;
        eprintln!(
            "{}: {g:.0} bit/s, ping p50 {:.1} ms",
            o.flows[0].name,
            median_ms(o)
        );
        assert!((g / want - 1.0).abs() < 0.03, "{g} bit/s, want {want:.0}");
    }
    // The path's RTT is 20 ms. BBR bounds what it has in flight near two BDPs (cwnd gain 2), so the
    // class queues at most about one BDP (20 ms) of it; CUBIC grows its window until the 1000-packet
    // queue (1.2 s at 10 Mbit/s) overflows.
    let (b, c) = (median_ms(&bbr), median_ms(&cubic));
    assert!(b < 50.0, "BBR's ping p50 {b} ms");
    assert!(c > 3.0 * b, "CUBIC's ping p50 {c} ms against BBR's {b} ms");
}
