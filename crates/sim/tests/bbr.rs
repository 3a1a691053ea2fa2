//! BBR in the simulator: one BBR flow through a 10 Mbit/s HTB class on a router fills it as CUBIC does,
//! with a far shorter queue (BBR keeps about two BDPs in flight; CUBIC fills the class's 1000-packet
//! queue until it overflows).

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

/// The nodes c, r and s and the two links c-r and r-s, each with this rate, delay and `extra` line.
fn path(rate: &str, delay: &str, extra: &str) -> String {
    let link = |a: &str, b: &str| {
        format!(
            "[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"{rate}\"\ndelay = \"{delay}\"\n{extra}\n"
        )
    };
    format!(
        "[[node]]\nname = \"c\"\n[[node]]\nname = \"r\"\n[[node]]\nname = \"s\"\n{}{}",
        link("c:eth0", "r:eth0"),
        link("r:eth1", "s:eth0")
    )
}

/// c --(1 Gbit/s, 5 ms)-- r --(1 Gbit/s, 5 ms)-- s; r shapes towards s with HTB at 10 Mbit/s; a TCP
/// flow with congestion control `cc` from c to s for 20 s and a ping every 100 ms beside it.
fn go(cc: &str) -> Outcome {
    let text = format!(
        r#"
duration = "20s"
{path}
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
"#,
        path = path("1gbit", "5ms", "")
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

/// c --(10 Gbit/s, 3 µs)-- r --(10 Gbit/s, 3 µs)-- s, HTB 10 Mbit/s on r towards s (the veth lab of
/// crates/cli/tests/kernel_vs_sim.rs, policy h4), four BBR streams, run for `us` microseconds; each
/// stream's stats and BBR state at the end (iperf3's control connection, not BBR, left out).
fn four_streams(iperf3: bool, us: u32) -> Vec<(tclab_tcp::TcpStats, tclab_tcp::BbrInfo)> {
    let text = format!(
        r#"
duration = "{us}us"
{path}
[[policy]]
node = "r"
tc = """
qdisc add dev eth1 root handle 1: htb default 10
class add dev eth1 parent 1: classid 1:10 htb rate 10mbit ceil 10mbit
"""
[[traffic]]
kind = "tcp"
from = "c"
to = "s"
cc = "bbr"
streams = 4
iperf3 = {iperf3}
"#,
        path = path("10gbit", "3us", "gso_max_segs = 1")
    );
    let mut sc =
        load("iperf3.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("the run completes");
    let senders: Vec<_> = sc
        .net
        .apps
        .iter()
        .filter_map(|a| match a {
            // The senders' ports are ephemeral (from 32768); the receivers listen on 5201...
            tclab_sim::apps::App::Tcp(t) if t.local.1 >= 32768 => {
                t.conn.bbr_info().map(|b| (t.stats(), b))
            }
            _ => None,
        })
        .collect();
    assert_eq!(senders.len(), 4);
    senders
}

/// iperf3 connects its streams one after another and writes a 37-byte cookie on each before the test
/// starts them together (this machine's iperf3 3.12, traced: docs/KERNEL_VS_SIM.md, h4 and "BBR and
/// CUBIC from two iperf3 clients"). For BBR that cookie is the first rate sample: one segment over the
/// empty path's round trip, so every stream starts with an estimate of Gbit/s on a 10 Mbit/s path, as
/// the kernel's do (ss: 0.30-1.65 Gbit/s).
#[test]
fn iperf3_streams_send_a_cookie_first_and_bbr_measures_it() {
    // 2.2 ms: every stream has connected and sent its cookie, no data yet (this seed: the streams'
    // SYNs at 0.49, 1.03, 1.71 and 1.91 ms, each 0.3 ms + 0.5 ms a stream + up to 0.5 ms after
    // CREATE_STREAMS reached the client; the data 0.5 ms after TEST_RUNNING, at 2.43 ms).
    for (st, bbr) in four_streams(true, 2200) {
        assert_eq!(st.bytes_sent, 37, "the cookie only: {st:?}");
        // The round trip: four 3 µs hops and a few bytes' serialisation at 10 Gbit/s, 12.3 µs, read
        // in whole µs (tcp_mstamp): 12 or 13. The estimate is one 1448-byte segment per round trip
        // (less BBR's fixed-point truncation, well under 0.1 %).
        assert!((12..=13).contains(&bbr.min_rtt_us), "min RTT {bbr:?}");
        let (lo, hi) = (0.999 * 1448e6 / 13.0, 1448e6 / 12.0);
        assert!(
            (lo..=hi).contains(&(bbr.bw as f64)),
            "BBR's first estimate {} B/s, want one segment per round trip: [{lo:.0}, {hi:.0}]",
            bbr.bw
        );
    }
    // 3 ms: the data started at 2.43-2.73 ms, the streams' first writes in turn.
    for (st, _) in four_streams(true, 3000) {
        assert!(st.bytes_sent > 37 + 1448, "sending data: {st:?}");
    }
    // Without the key a stream sends its data as soon as it has connected: by 14 ms the first has
    // sent dozens of segments, and the SYNs of the others wait behind them in the 10 Mbit/s class.
    let plain = four_streams(false, 14_000);
    let sent: Vec<u64> = plain.iter().map(|(st, _)| st.bytes_sent).collect();
    assert!(sent.iter().any(|&b| b > 10 * 1448), "{sent:?}");
}
