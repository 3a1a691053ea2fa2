//! taprio in the simulator: a class's gate open 1 ms of every 4 gives a backlogged UDP flow exactly the
//! frames that fit that millisecond — by the guard band when the wire runs at the link speed taprio
//! assumes, by the entry's byte budget (12 500 bytes at 100 Mbit/s) when the wire is ten times faster
//! than the speed the device reports. Figures derived by hand from the frame sizes.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

/// a --(RATE)-- b, a's interface with 4 transmit queues; priority 0 (every UDP packet) is TC 0,
/// whose gate is open the first 1 ms of each 4 ms cycle; TC 1 has the other 3 ms. The flow starts
/// at 1 s, a cycle boundary, with the schedule long running.
fn scenario(rate: &str, policy: &str) -> String {
    format!(
        r#"
duration = "11s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "{rate}"
delay = "1ms"
numtxqueues = 4
{policy}
[[traffic]]
kind = "udp"
name = "u"
from = "a"
to = "b"
rate = "60mbit"
length = 100
start = "1s"
"#
    )
}

const TAPRIO: &str = "tc qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 \
                      base-time 0 sched-entry S 01 1000000 sched-entry S 02 3000000 clockid CLOCK_TAI";

fn go(text: &str, dir: &std::path::Path) -> Outcome {
    let mut sc = load("taprio.toml", text, dir).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

fn goodput(out: &Outcome) -> f64 {
    out.flows
        .iter()
        .find(|f| f.name == "u")
        .expect("flow u")
        .goodput_bps
}

/// 88 frames of 142 bytes (100 of payload, 42 of headers) a 4-ms cycle: 8 800 payload bytes, 17.6
/// Mbit/s.
const EXPECTED: f64 = 88.0 * 100.0 * 8.0 / 0.004;

#[test]
fn a_gate_open_a_quarter_of_the_time_passes_what_fits_its_interval() {
    // At 100 Mbit/s, the speed the interface reports, a 142-byte frame takes 11.36 us: 88 of them end
    // 999.68 us into the millisecond, an 89th would end past the gate's close, so the guard band
    // keeps it (12 496 bytes: the rate × the open fraction, 25 Mbit/s, to 0.02 %).
    let text = scenario(
        "100mbit",
        &format!("[[policy]]\nnode = \"a\"\ntc = '''\n{TAPRIO}\n'''\n"),
    );
    let got = goodput(&go(&text, std::path::Path::new(".")));
    assert!(
        (got - EXPECTED).abs() / EXPECTED < 0.01,
        "{got:.0} bit/s of payload, expected {EXPECTED:.0}"
    );
}

#[test]
fn the_budget_holds_an_interval_to_its_bytes_on_a_faster_wire() {
    // A 1 Gbit/s wire whose interface reports 100 Mbit/s (`ethtool -s eth0 speed 100`): each frame
    // leaves in 1.14 us but is reckoned at 11.36 us, so the guard band would let ~800 out in the
    // millisecond; the entry's budget, 1 ms at 100 Mbit/s = 12 500 bytes, stops them at 88 (the
    // 89th would leave it at -138). Without the ethtool line the interface reports 1 000 Mbit/s
    // and the budget is ten times larger. (The script sees a's 4-queue interface as the simulation
    // has it.)
    let dir = std::env::temp_dir().join(format!("tclab-taprio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("policy.sh"),
        format!("#!/bin/bash\nethtool -s eth0 speed 100\n{TAPRIO}\n"),
    )
    .unwrap();
    let text = scenario(
        "1gbit",
        "[[policy]]\nnode = \"a\"\nscript = \"policy.sh\"\n",
    );
    let got = goodput(&go(&text, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        (got - EXPECTED).abs() / EXPECTED < 0.01,
        "{got:.0} bit/s of payload, expected {EXPECTED:.0}"
    );
    let text = scenario(
        "1gbit",
        &format!("[[policy]]\nnode = \"a\"\ntc = '''\n{TAPRIO}\n'''\n"),
    );
    let fast = goodput(&go(&text, std::path::Path::new(".")));
    assert!(
        fast > 2.0 * EXPECTED,
        "{fast:.0} bit/s at the wire's own speed"
    );
}
