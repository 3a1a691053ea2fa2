//! iperf3's control connection: a second iperf3 client whose control messages cross the queue the first
//! one's BBR stream is filling starts its data late, behind that queue, as on Linux.
//!
//! The kernel's figures (docs/KERNEL_VS_SIM.md, "BBR and CUBIC from two iperf3 clients"): `iperf3 -C bbr`
//! to :5201 and `iperf3 -C cubic` to :5202 launched together through HTB 10 Mbit/s (offloads off, iperf3
//! at `chrt -f 20`, kernel 6.18.44). The CUBIC client's control SYN left 4.0-12.3 ms after the BBR
//! client's, its data 461-540 ms after BBR's, its first RTT sample 168-171 ms; HyStart's delay detector
//! ended its slow start at cwnd 48 in all six runs (nstat TCPHystartDelayDetect 1, DelayCwnd 48), and the
//! ping's median was 195-204 ms.

mod common;

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

/// The review's lab: s - d - r - c over 10 Gbit/s links of 2 µs, one MSS per skb; HTB 10 Mbit/s on r
/// towards c; BBR from s, CUBIC (paced, as the kernel's is on this BBR host) from s `cubic_start`
/// later, both started as iperf3 starts them, and a ping from c.
fn go(cubic_start: &str) -> Outcome {
    let link = |a: &str, b: &str| {
        format!(
            "[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"10gbit\"\ndelay = \"2us\"\ngso_max_segs = 1\n"
        )
    };
    let text = format!(
        r#"
duration = "8s"
[[node]]
name = "s"
[[node]]
name = "d"
kind = "router"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "c"
{}{}{}
[[policy]]
node = "r"
tc = """
qdisc add dev eth1 root handle 1: htb default 10
class add dev eth1 parent 1: classid 1:10 htb rate 10mbit ceil 10mbit
"""
[[traffic]]
name = "bbr"
kind = "tcp"
from = "s"
to = "c"
cc = "bbr"
iperf3 = true
[[traffic]]
name = "cubic"
kind = "tcp"
from = "s"
to = "c"
cc = "cubic"
paced = true
iperf3 = true
port = 5202
start = "{cubic_start}"
[[traffic]]
name = "ping"
kind = "ping"
from = "c"
to = "s"
interval = "100ms"
"#,
        link("s:eth0", "d:eth0"),
        link("d:eth1", "r:eth0"),
        link("r:eth1", "c:eth0")
    );
    let mut sc =
        load("iperf3.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

/// Started 5 ms after the BBR client (the kernel's 4.0-12.3 ms), the CUBIC client's control messages
/// and its stream's handshake wait behind BBR's startup queue, so its first RTT sample is that queue and
/// HyStart's delay detector ends slow start at the kernel's cwnd of 48 (within ±15 %). Before the
/// control connection was modelled its data started 15 ms after its entry's start over an empty path,
/// and the ACK train ended slow start at cwnd 22.
#[test]
fn a_second_iperf3_client_starts_behind_the_first_ones_queue() {
    let o = go("5ms");
    let n = common::flow(&o, "cubic").nstat.as_ref().unwrap();
    assert_eq!(
        (n.hystart_delay_detect, n.hystart_train_detect),
        (1, 0),
        "slow start ended by the delay detector (the kernel's), not the ACK train: {n:?}"
    );
    assert!(
        (41..=55).contains(&n.hystart_delay_cwnd),
        "HyStart's exit at cwnd {} (kernel 48)",
        n.hystart_delay_cwnd
    );
    let mut rtts: Vec<u64> = o.pings[0].samples.iter().map(|s| s.1).collect();
    rtts.sort_unstable();
    let p50 = rtts[rtts.len() / 2] as f64 / 1e6;
    assert!(
        (195.0 * 0.9..=204.0 * 1.1).contains(&p50),
        "ping p50 {p50:.1} ms: the kernel's 195-204 ms ±10 %"
    );
}
