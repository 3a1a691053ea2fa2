//! mirred and ifb in the simulator, against figures derived by hand: sqm's way of shaping a download
//! (ingress → mirred redirect → ifb → TBF or HTB) holds it to the shaper's rate, and a mirror's copy is
//! counted where it is sent and changes nothing else.

use tclab_core::Packet;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

fn scenario(text: &str) -> Scenario {
    match load("test.toml", text, std::path::Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn go(sc: &mut Scenario) -> Outcome {
    run(sc, &mut |_| {}).expect("the run completes")
}

/// s --(10 Mbit/s, 10 ms each way)-- c, a 20 s TCP download from s to c.
const LINE: &str = r#"
duration = "20s"
sample = "500ms"
[[node]]
name = "s"
[[node]]
name = "c"
[[link]]
a = "s:eth0"
b = "c:eth0"
rate = "10mbit"
delay = "10ms"
[[traffic]]
kind = "tcp"
from = "s"
to = "c"
"#;

/// The receiving side's policy: every IPv4 packet arriving on eth0 goes through ifb0's root qdisc.
fn ingress_to_ifb(shaper: &str) -> String {
    format!(
        "[[policy]]\nnode = \"c\"\ntc = \"\"\"\nip link add ifb0 type ifb\nip link set dev ifb0 up\n\
         qdisc add dev eth0 handle ffff: ingress\n\
         filter add dev eth0 parent ffff: protocol ip u32 match u32 0 0 action mirred egress redirect dev ifb0\n\
         {shaper}\n\"\"\"\n"
    )
}

/// Mean goodput of the download from 5 s on (after slow start and the bucket's first burst).
fn steady_goodput(out: &Outcome) -> f64 {
    let s: Vec<f64> = out
        .recorder
        .flow_samples
        .iter()
        .filter(|s| s.t > 5_000_000_000)
        .map(|s| s.goodput_bps)
        .collect();
    s.iter().sum::<f64>() / s.len() as f64
}

/// The expected goodput at a shaper of `rate` bit/s counting Ethernet frames: a full segment carries the
/// MSS of 1460 (mtu 1500 − 20 IP − 20 TCP) less 12 bytes of timestamp option = 1448 payload bytes in a frame
/// of 1448 + 32 TCP + 20 IP + 14 Ethernet = 1514 bytes. TBF and HTB charge `qdisc_pkt_len`, the frame
/// length, so the payload rate is rate × 1448 / 1514. (The ACKs go the other way, unshaped.)
fn expected(rate: f64) -> f64 {
    rate * 1448.0 / 1514.0
}

#[test]
fn ingress_through_an_ifb_with_tbf_holds_a_download_to_its_rate() {
    let mut sc = scenario(&format!(
        "{LINE}{}",
        ingress_to_ifb("qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms")
    ));
    let out = go(&mut sc);
    let got = steady_goodput(&out);
    let want = expected(2e6);
    eprintln!("TBF 2 Mbit/s on ifb0: goodput {got:.0} bit/s, expected {want:.0}");
    assert!(
        (got - want).abs() / want < 0.02,
        "goodput {got:.0} vs {want:.0} (10 Mbit/s link, 2 Mbit/s shaper)"
    );
    // Full-size segments: the shaper saw 1514-byte frames (and nothing else but the handshake).
    let c = sc.net.node_by_name("c").unwrap();
    let ifb = sc.net.nodes[c].engine.device("ifb0").unwrap();
    let st = ifb.root().q.stats();
    assert!(st.packets > 1000);
    assert!(
        st.bytes / st.packets > 1500,
        "{} bytes in {} packets",
        st.bytes,
        st.packets
    );
    // Everything that arrived on eth0 went through the ifb: the ingress qdisc passed nothing itself, but
    // it counted every packet its filter saw (tc_run counts before classifying), stolen or not.
    let eth0 = sc.net.nodes[c].engine.device("eth0").unwrap();
    let iface = sc.net.iface_by_name(c, "eth0").unwrap();
    let ing = eth0.ingress().unwrap().q.stats();
    assert_eq!(ing.packets, sc.net.ifaces[iface].counters.rx_packets);
    assert_eq!(ing.drops, 0);
    let v = sc.net.vdevs.iter().find(|v| v.name == "ifb0").unwrap();
    assert_eq!(
        v.counters.tx_packets, st.packets,
        "the ifb gave every packet back"
    );
    assert_eq!(v.counters.rx_dropped, 0);
    // The recorder samples the ifb as an interface (`c:ifb0` in interfaces.csv and the backlog plot):
    // what its TBF lets through is the shaper's rate in frames, 2 Mbit/s (± 2 % over the steady part;
    // each 500 ms sample holds ~83 frames, so ±1 frame is ±1.2 %), received and sent alike.
    let port =
        tclab_sim::net::Port::Ifb(sc.net.vdevs.iter().position(|v| v.name == "ifb0").unwrap());
    assert_eq!(sc.net.port_label(port), "c:ifb0");
    let s: Vec<_> = out
        .recorder
        .iface_samples
        .iter()
        .filter(|s| s.iface == port && s.t > 5_000_000_000)
        .collect();
    let tx = s.iter().map(|s| s.tx_bps).sum::<f64>() / s.len() as f64;
    let rx = s.iter().map(|s| s.rx_bps).sum::<f64>() / s.len() as f64;
    assert!((tx - 2e6).abs() / 2e6 < 0.02, "ifb0 sends {tx:.0} bit/s");
    assert!(
        (rx - tx).abs() < 1.0,
        "ifb0 receives {rx:.0}, sends {tx:.0}"
    );
    assert!(
        s.iter().any(|s| s.backlog_pkts > 0),
        "the queue is the ifb's"
    );
}

#[test]
fn ingress_through_an_ifb_with_htb_holds_a_download_to_its_rate() {
    let mut sc = scenario(&format!(
        "{LINE}{}",
        ingress_to_ifb(
            "qdisc add dev ifb0 root handle 1: htb default 10\n\
             class add dev ifb0 parent 1: classid 1:10 htb rate 3mbit ceil 3mbit\n\
             qdisc add dev ifb0 parent 1:10 handle 10: pfifo limit 30"
        )
    ));
    let out = go(&mut sc);
    let got = steady_goodput(&out);
    let want = expected(3e6);
    eprintln!("HTB 3 Mbit/s on ifb0: goodput {got:.0} bit/s, expected {want:.0}");
    assert!(
        (got - want).abs() / want < 0.02,
        "goodput {got:.0} vs {want:.0} (10 Mbit/s link, 3 Mbit/s HTB class)"
    );
    // The ifb's class is in the report, with what it carried.
    let summary = tclab_sim::report::summary_json(&sc, &out);
    let class = summary["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["dev"] == "ifb0" && c["classid"] == "1:10")
        .expect("ifb0's class 1:10 is reported");
    assert!(class["bytes"].as_u64().unwrap() > 1_000_000, "{class}");
}

#[test]
fn without_the_ifb_the_download_takes_the_link() {
    // The control: the same download unshaped runs at the link's rate, far above the shaper's.
    let out = go(&mut scenario(LINE));
    let got = steady_goodput(&out);
    let want = expected(10e6);
    assert!(
        (got - want).abs() / want < 0.02,
        "goodput {got:.0} vs {want:.0}"
    );
}

#[test]
fn mirror_counts_the_bytes_again_on_the_target_and_changes_nothing_else() {
    let mirror = "[[policy]]\nnode = \"c\"\ntc = \"\"\"\nip link add ifb0 type ifb\nip link set dev ifb0 up\n\
        qdisc add dev eth0 handle ffff: ingress\n\
        filter add dev eth0 parent ffff: protocol ip matchall action mirred egress mirror dev ifb0\n\"\"\"\n";
    let plain = "[[policy]]\nnode = \"c\"\ntc = \"\"\"\nip link add ifb0 type ifb\nip link set dev ifb0 up\n\
        qdisc add dev eth0 handle ffff: ingress\n\"\"\"\n";
    let mut with = scenario(&format!("{LINE}{mirror}"));
    let mut without = scenario(&format!("{LINE}{plain}"));
    let a = go(&mut with);
    let b = go(&mut without);
    // Nothing else changed: the download, to the byte and the nanosecond.
    assert_eq!(a.flows[0].delivered_bytes, b.flows[0].delivered_bytes);
    assert_eq!(a.flows[0].goodput_bps, b.flows[0].goodput_bps);
    assert_eq!(a.flows[0].retransmits, b.flows[0].retransmits);
    let c = with.net.node_by_name("c").unwrap();
    let eng = &with.net.nodes[c].engine;
    let ing = eng.device("eth0").unwrap().ingress().unwrap().q.stats();
    let ifb = eng.device("ifb0").unwrap().root().q.stats();
    let iface = with.net.iface_by_name(c, "eth0").unwrap();
    let rx = with.net.ifaces[iface].counters;
    // Every frame that arrived passed the ingress hook once and its copy passed ifb0's qdisc once: the
    // bytes are counted twice, once on each — the hook's as IP packets (the Ethernet header was pulled
    // on receive), the ifb's as frames (mirred pushes the header back on the copy it sends to egress).
    assert_eq!(ing.packets, rx.rx_packets);
    assert_eq!(ing.bytes, rx.rx_bytes - 14 * rx.rx_packets);
    assert_eq!(
        ifb.bytes, rx.rx_bytes,
        "the mirror target counts the frames"
    );
    assert_eq!(ifb.packets, ing.packets);
    // The copies were not redirected, so the ifb drops them after its qdisc (`ifb_xmit`).
    let v = with.net.vdevs.iter().find(|v| v.name == "ifb0").unwrap();
    assert_eq!(v.counters.rx_dropped, ifb.packets);
    assert_eq!(v.counters.tx_packets, 0);
    // The action counted each packet it mirrored. (Its bytes are the frames'; the kernel's action
    // counts `qdisc_pkt_len`, the IP packet at ingress — not compared here.)
    let act = eng.actions().get("mirred", 1).unwrap();
    assert_eq!(act.borrow().stats.packets, ing.packets);
    let _ = Packet::REDIRECTED;
}

#[test]
fn a_redirect_to_an_ifb_that_is_down_drops_and_counts_an_overlimit() {
    // Without `ip link set dev ifb0 up` the kernel's mirred has nowhere to send ("to Houston"): the packet
    // is shot at the ingress hook, and the download never starts.
    let policy = "[[policy]]\nnode = \"c\"\ntc = \"\"\"\nip link add ifb0 type ifb\n\
        qdisc add dev eth0 handle ffff: ingress\n\
        filter add dev eth0 parent ffff: protocol ip u32 match u32 0 0 action mirred egress redirect dev ifb0\n\"\"\"\n";
    let mut sc = scenario(&format!("{LINE}{policy}"));
    let out = go(&mut sc);
    assert_eq!(out.flows[0].delivered_bytes, 0);
    let c = sc.net.node_by_name("c").unwrap();
    let eng = &sc.net.nodes[c].engine;
    let ing = eng.device("eth0").unwrap().ingress().unwrap().q.stats();
    let a = eng.actions().get("mirred", 1).unwrap();
    let a = a.borrow();
    assert!(a.stats.packets > 0);
    assert_eq!(a.stats.overlimits as u64, a.stats.packets);
    assert_eq!(a.stats.drops, 0, "mirred counts no drop of its own");
    assert_eq!(
        ing.drops as u64, a.stats.packets,
        "the ingress qdisc counts the shot packets"
    );
}

#[test]
fn a_redirect_loop_between_two_egress_filters_is_bounded() {
    // s's eth0 redirects everything to eth1 and eth1 back to eth0 (a clsact egress filter on each). The
    // kernel's nest check finds eth1 already on the nest's path at the second hop and shoots the packet:
    // nothing leaves, nothing loops.
    let text = r#"
duration = "2s"
[[node]]
name = "s"
[[node]]
name = "c"
[[node]]
name = "d"
[[link]]
a = "s:eth0"
b = "c:eth0"
rate = "10mbit"
delay = "1ms"
[[link]]
a = "s:eth1"
b = "d:eth0"
rate = "10mbit"
delay = "1ms"
[[policy]]
node = "s"
tc = """
qdisc add dev eth0 clsact
qdisc add dev eth1 clsact
filter add dev eth0 egress protocol ip matchall action mirred egress redirect dev eth1
filter add dev eth1 egress protocol ip matchall action mirred egress redirect dev eth0
"""
[[traffic]]
kind = "ping"
from = "s"
to = "c"
interval = "100ms"
"#;
    let mut sc = scenario(text);
    let out = go(&mut sc);
    assert_eq!(out.pings[0].received, 0);
    let s = sc.net.node_by_name("s").unwrap();
    for i in &sc.net.nodes[s].ifaces {
        assert_eq!(sc.net.ifaces[*i].counters.tx_packets, 0);
    }
    let eng = &sc.net.nodes[s].engine;
    // eth0 → eth1 (first hop, counted), eth1 → eth0 (second hop, counted), eth0 → eth1 again: eth1 is in
    // the nest, so the third attempt is a loop: counted with an overlimit, shot.
    let a1 = eng.actions().get("mirred", 1).unwrap();
    let a2 = eng.actions().get("mirred", 2).unwrap();
    let (a1, a2) = (a1.borrow().stats, a2.borrow().stats);
    assert_eq!(a1.packets, 2 * a2.packets, "{a1:?} {a2:?}");
    assert_eq!(a1.overlimits as u64, a2.packets);
}

#[test]
fn modprobe_ifb_in_a_policy_loads_once_and_unloads_every_ifb() {
    // As the kernel's module: the first `modprobe ifb numifbs=1` makes ifb0, a second (numifbs=3) finds
    // the module loaded and makes nothing; `ip link add` names another; `modprobe -r ifb` deletes all.
    let policy =
        |lines: &str| format!("{LINE}[[policy]]\nnode = \"c\"\ntc = \"\"\"\n{lines}\n\"\"\"\n");
    let ifbs = |sc: &Scenario| -> Vec<String> {
        let c = sc.net.node_by_name("c").unwrap();
        sc.net.nodes[c]
            .engine
            .devices()
            .filter(|(_, d)| d.kind == tclab_core::engine::DevKind::Ifb)
            .map(|(n, _)| n.to_string())
            .collect()
    };
    let sc = scenario(&policy(
        "modprobe ifb numifbs=1\nmodprobe ifb numifbs=3\nip link add ifb-wan type ifb",
    ));
    assert_eq!(ifbs(&sc), ["ifb-wan", "ifb0"]);
    let sc = scenario(&policy(
        "modprobe ifb numifbs=2\nip link add ifb-wan type ifb\nmodprobe -r ifb",
    ));
    assert!(ifbs(&sc).is_empty());
    // A typo is ip's error, not a new device.
    let err = load(
        "t.toml",
        &policy("modprobe ifb numifbs=1\nip link set dev ifb1 up"),
        std::path::Path::new("."),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("Cannot find device \"ifb1\""), "{err}");
}
