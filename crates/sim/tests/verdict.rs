//! The simulator tells the owner of the packet a qdisc really dropped, as the kernel's verdict says.
//!
//! The senders' own NIC runs `sfq limit 4 headdrop` under four TCP streams. TCP small queues keeps two
//! or three of each stream's segments below its socket, so the qdisc often holds more than 4 packets:
//! `sfq_enqueue` (net/sched/sch_sfq.c) then calls `sfq_drop`, which drops the *head* of the longest flow.
//! When that flow is another stream's, the arriving segment is queued and the answer is
//! NET_XMIT_SUCCESS — the stream that lost a segment is not the one sending. When it is the arriving
//! segment's own flow, the answer is NET_XMIT_CN, which `__tcp_transmit_skb` takes as sent
//! (`net_xmit_eval`) before calling `tcp_enter_cwr`. Either way the segment dropped was sent earlier:
//! its skb is freed (`tcp_wfree` releases its truesize) and TCP finds it lost from the receiver's SACKs.
//! With GSO (the default) a dropped skb is one or two segments, each retransmitted; with
//! `gso_max_segs = 1` each drop is one segment. Some drops are pure ACKs, never retransmitted: each
//! stream's last handshake ACK goes alone, as Linux sends it at once (`tcp_rcv_synsent_state_process`)
//! and iperf3 writes only once `connect` returns, and it can meet the other streams' first flights.

use tclab_core::qdisc::DropReason;
use tclab_sim::apps::App;
use tclab_sim::run::run;
use tclab_sim::scenario::load;
use tclab_sim::tcpapp::TcpEndpoint;

mod common;

const LAB: &str = r#"
duration = "20s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "10mbit"
delay = "20ms"
[[policy]]
node = "a"
tc = "qdisc add dev eth0 root handle 1: sfq limit 4 headdrop"
[[traffic]]
kind = "tcp"
from = "a"
to = "b"
bytes = "300k"
streams = 4
"#;

/// The same with one MSS per skb (`gso_max_segs = 1`), so that a drop is a segment.
fn one_mss_lab() -> String {
    LAB.replace("delay = \"20ms\"", "delay = \"20ms\"\ngso_max_segs = 1")
}

#[test]
fn a_head_dropped_segment_is_lost_not_refused_and_its_truesize_comes_back() {
    check(&one_mss_lab(), 1);
    // With GSO (the default) the qdisc drops skbs: at this rate (a quarter of 10 Mbit/s each, a pacing
    // rate far below 2 MSS a millisecond) each holds one or two segments (min_tso_segs), and TCP
    // retransmits segments.
    check(LAB, 2);
}

/// Run `lab`, whose skbs carry at most `segs` segments.
fn check(lab: &str, segs: u64) {
    let mut sc = load("verdict.toml", lab, std::path::Path::new(".")).unwrap();
    let sink = common::Sink::default();
    sc.net.trace = Some(tclab_sim::trace::Trace::text(Box::new(sink.clone())));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    sc.net.trace.as_mut().unwrap().finish().unwrap();
    let f = &out.flows[0];
    assert_eq!(f.delivered_bytes, 4 * 300 * 1024, "the transfers complete");

    // The qdisc dropped packets (tc -s), each counted on the interface with its reason.
    let a_eth0 = sc.net.iface_by_name(0, "eth0").unwrap();
    let dev = sc.net.device(a_eth0).unwrap();
    let drops = dev.root().q.stats().drops as u64;
    assert!(drops > 0, "four streams overflow limit 4");
    assert_eq!(sc.net.ifaces[a_eth0].counters.tx_dropped, drops);
    assert_eq!(dev.drop_counts.get(DropReason::Overlimit), drops);
    assert_eq!(dev.drop_counts.total(), drops);
    // The trace's drops at a:eth0 by frame length: a pure ACK is 66 bytes (IP and TCP headers with
    // timestamps, and Ethernet's 14), a data segment more.
    let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
    let lens: Vec<u64> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.get(1) == Some(&"a:eth0") && w.get(2) == Some(&"drop"))
        .map(|w| w[4].parse().unwrap())
        .collect();
    assert_eq!(lens.len() as u64, drops);
    assert!(lens.iter().all(|&l| l == 66 || l > 100), "{lens:?}");
    let data = lens.iter().filter(|&&l| l > 66).count() as u64;
    if segs == 1 {
        assert_eq!(
            f.retransmits, data,
            "each dropped segment is found lost and sent again"
        );
    } else {
        assert!(
            f.retransmits > data && f.retransmits <= segs * data,
            "each segment of a dropped skb is found lost and sent again: {} retransmissions, {data} \
             skbs with data dropped",
            f.retransmits
        );
    }

    let senders: Vec<&TcpEndpoint> = sc
        .net
        .apps
        .iter()
        .filter_map(|a| match a {
            App::Tcp(t) if t.stats().bytes_acked > 0 => Some(&**t),
            _ => None,
        })
        .collect();
    assert_eq!(senders.len(), 4);
    for t in senders {
        // Neither NET_XMIT_SUCCESS nor NET_XMIT_CN is a refusal: no segment was rolled back as unsent.
        // (Before the truthful verdict an own-flow drop came back as `Drop` for the segment just
        // queued, which was then sent twice, and a drop from another stream was reported to no one.)
        assert_eq!(t.stats().local_drops, 0);
        // Every skb the socket put below itself was freed — sent, or dropped and reported — so TCP
        // small queues holds nothing back at the end.
        assert_eq!(t.host_truesize(), 0);
    }
}
