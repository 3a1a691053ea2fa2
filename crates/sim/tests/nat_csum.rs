//! Packets whose bytes tc actions rewrite, through a simulated router (issue 24's "How it must be
//! checked"): `nat egress` on the way out and `nat ingress` for the replies, and TCP still completes.
//!
//! a --(10 Mbit/s, 5 ms)-- r --(10 Mbit/s, 5 ms)-- b; a is 10.0.1.1, r 10.0.1.2 and 10.0.2.1, b 10.0.2.2
//! (link L's ends are 10.0.L.1 and 10.0.L.2).

mod common;

use tclab_sim::apps::App;
use tclab_sim::net::CsumErrors;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

const TOPOLOGY: &str = r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "10mbit"
delay = "5ms"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "10mbit"
delay = "5ms"
[[traffic]]
kind = "tcp"
name = "bulk"
from = "a"
to = "b"
"#;

fn go(policy: &str) -> (Scenario, Outcome) {
    run_text(&format!("{TOPOLOGY}{policy}"))
}

fn run_text(text: &str) -> (Scenario, Outcome) {
    let mut sc =
        load("nat_csum.toml", text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    (sc, out)
}

fn goodput(out: &Outcome, name: &str) -> f64 {
    common::flow(out, name).goodput_bps
}

/// The address and port b's TCP connection is with, as its socket (local port 5201) has it.
fn b_peer(sc: &Scenario) -> (u32, u16) {
    sc.net
        .apps
        .iter()
        .find_map(|app| match app {
            App::Tcp(t) if t.local.1 == 5201 => Some(t.remote),
            _ => None,
        })
        .expect("b has a TCP end")
}

/// r masquerades a behind its own address on b's link: `nat egress` rewrites the source of what
/// leaves towards b (a's 10.0.1.1 → r's 10.0.2.1), `nat ingress` the destination of what comes back
/// (10.0.2.1 → 10.0.1.1) before r routes it, as act_nat's stateless NAT is used.
const NAT: &str = r#"
[[policy]]
node = "r"
tc = '''
qdisc add dev eth1 clsact
filter add dev eth1 egress protocol ip prio 1 matchall action nat egress 10.0.1.1 10.0.2.1
filter add dev eth1 ingress protocol ip prio 1 matchall action nat ingress 10.0.2.1 10.0.1.1
'''
"#;

#[test]
fn nat_egress_rewrites_and_tcp_still_completes() {
    let (plain_sc, plain) = go("");
    let (nat_sc, nat) = go(NAT);
    // The far side sees the flow as coming from r's address (b's socket was made by a SYN from it,
    // a listening socket's accept), and without NAT from a's own.
    assert_eq!(b_peer(&plain_sc), (0x0a00_0101, 32768));
    assert_eq!(errors(&nat_sc, "b"), CsumErrors::default());
    assert_eq!(errors(&nat_sc, "a"), CsumErrors::default());
    assert_eq!(b_peer(&nat_sc), (0x0a00_0201, 32768));
    // The rewrite costs no byte on the wire, so the flow is the same flow: within 2 % (10 Mbit/s ×
    // 1448/1514 of payload on both; what differs is only the seed's draws, which are the same).
    let (p, n) = (goodput(&plain, "bulk"), goodput(&nat, "bulk"));
    assert!(p > 9e6, "without NAT the line is filled: {p:.0} bit/s");
    assert!(
        (n - p).abs() < p * 0.02,
        "through NAT {n:.0} bit/s, without {p:.0}"
    );
    // Every reply went through `nat ingress` (tc -s filter show on r: its action's packets are all
    // that b sent, which r's eth1 received).
    let shown = &nat
        .tc_show
        .iter()
        .find(|(node, dev, _)| node == "r" && dev == "eth1")
        .expect("r's eth1 is shown")
        .2;
    let (_, after) = shown
        .split_once("nat ingress 10.0.2.1/32 10.0.1.1 pass")
        .unwrap_or_else(|| panic!("{shown}"));
    let r = nat_sc.net.node_by_name("r").unwrap();
    let eth1 = nat_sc.net.iface_by_name(r, "eth1").unwrap();
    let rx = nat_sc.net.ifaces[eth1].counters.rx_packets;
    assert!(rx > 1000, "b acknowledged the flow: {rx} packets");
    assert!(
        after.contains(&format!(" {rx} pkt ")),
        "{rx} packets: {after}"
    );
}

/// b's second address (its end of the link to c), and the flows towards b: r rewrites their
/// destination to it on the way out, and the source of b's replies back to b's first address, the
/// one a's socket is connected to. The way back always has its `csum`; the way there has `csum`.
fn pedit_scenario(kind: &str, csum: &str) -> String {
    let topology = TOPOLOGY.replace("kind = \"tcp\"", kind);
    format!(
        r#"{topology}
[[node]]
name = "c"
[[link]]
a = "b:eth1"
b = "c:eth0"
rate = "10mbit"
delay = "5ms"
[[policy]]
node = "r"
tc = '''
qdisc add dev eth1 clsact
filter add dev eth1 egress protocol ip prio 1 matchall action pedit ex munge ip dst set 10.0.3.1 pipe{csum}
filter add dev eth1 ingress protocol ip prio 1 matchall action pedit ex munge ip src set 10.0.2.2 pipe action csum ip4h and tcp
'''
"#
    )
}

const TCP: &str = "kind = \"tcp\"";
const UDP: &str = "kind = \"udp\"\nrate = \"9mbit\"\nlength = 1400";

fn errors(sc: &Scenario, node: &str) -> CsumErrors {
    sc.net.nodes[sc.net.node_by_name(node).unwrap()].csum_errors
}

#[test]
fn pedit_with_csum_delivers() {
    // TCP: the line's payload rate, 10 Mbit/s × 1448/1514, less slow start: within 3 %, as ct.rs.
    let (sc, out) = run_text(&pedit_scenario(TCP, " action csum ip4h and tcp"));
    let line = 10e6 * 1448.0 / 1514.0;
    let g = goodput(&out, "bulk");
    assert!(
        (g - line).abs() < line * 0.03,
        "{g:.0} bit/s, line {line:.0}"
    );
    assert_eq!(errors(&sc, "b"), CsumErrors::default());
    assert_eq!(errors(&sc, "a"), CsumErrors::default());
    // b's socket was made by the rewritten SYN: its own address is the one pedit wrote.
    let b_local = sc.net.apps.iter().find_map(|app| match app {
        App::Tcp(t) if t.local.1 == 5201 => Some(t.local.0),
        _ => None,
    });
    assert_eq!(b_local, Some(0x0a00_0301));
    // UDP: 9 Mbit/s of 1400-byte datagrams (1442-byte frames fit the line): as many delivered as
    // without the rewrite (all but the few on their way when the run ends).
    let (sc, out) = run_text(&pedit_scenario(UDP, " action csum ip4h and udp"));
    let f = udp_flow(&out);
    assert_eq!(f.delivered_bytes, udp_flow(&plain_udp().1).delivered_bytes);
    assert!(f.delivered_bytes > 11_000_000, "{f:?}");
    assert_eq!(errors(&sc, "b"), CsumErrors::default());
    let j = tclab_sim::report::summary_json(&sc, &out);
    assert!(j.get("csum_errors").is_none(), "no key without errors");
}

fn udp_flow(out: &Outcome) -> &tclab_sim::run::FlowResult {
    common::flow(out, "bulk")
}

/// The UDP flow with no policy anywhere.
fn plain_udp() -> (Scenario, Outcome) {
    run_text(&TOPOLOGY.replace(TCP, UDP))
}

#[test]
fn pedit_without_csum_is_dropped_as_corrupt() {
    // Without any csum the IPv4 header's checksum is stale: b's ip_rcv_core drops every packet
    // (IpInHdrErrors). TCP's SYN never gets through, so it is retransmitted on its timer.
    let (sc, out) = run_text(&pedit_scenario(TCP, ""));
    assert_eq!(goodput(&out, "bulk"), 0.0);
    let e = errors(&sc, "b");
    assert!(e.ip_in_hdr_errors >= 3, "{e:?}");
    assert_eq!(e.tcp_in_csum_errors, 0);
    // The header fixed but not TCP's checksum, whose pseudo-header holds the old destination: TCP
    // drops them (TcpInCsumErrors).
    let (sc, out) = run_text(&pedit_scenario(TCP, " action csum ip4h"));
    assert_eq!(goodput(&out, "bulk"), 0.0);
    let e = errors(&sc, "b");
    assert_eq!(e.ip_in_hdr_errors, 0);
    assert!(e.tcp_in_csum_errors >= 3, "{e:?}");
    // UDP likewise (UdpInCsumErrors): every datagram that reached b is counted there, none
    // delivered; the datagrams that reach b are those delivered without the rewrite.
    let reached = udp_flow(&plain_udp().1).delivered_bytes / 1400;
    assert!(reached > 8000, "{reached}");
    let (sc, out) = run_text(&pedit_scenario(UDP, " action csum ip4h"));
    assert_eq!(udp_flow(&out).delivered_bytes, 0);
    let e = errors(&sc, "b");
    assert_eq!(
        (e.udp_in_csum_errors, e.ip_in_hdr_errors),
        (reached, 0),
        "{e:?}"
    );
    let (sc, out) = run_text(&pedit_scenario(UDP, ""));
    let e = errors(&sc, "b");
    assert_eq!(
        (e.ip_in_hdr_errors, e.udp_in_csum_errors),
        (reached, 0),
        "{e:?}"
    );
    // The summary names them (summary.json's csum_errors, nstat's names).
    let j = tclab_sim::report::summary_json(&sc, &out);
    assert_eq!(j["csum_errors"][0]["node"], "b");
    assert_eq!(j["csum_errors"][0]["counters"]["IpInHdrErrors"], reached);
    assert_eq!(j["csum_errors"].as_array().map(Vec::len), Some(1), "{j}");
}

/// `netem corrupt 100%` on a→r flips one random bit of each datagram's 28 header bytes, after writing
/// in the checksums the sender left implied (`skb_checksum_help`, as sch_netem does first). r's
/// ip_rcv_core drops those whose IPv4 header it broke (IpInHdrErrors at r), b's UDP the rest
/// (UdpInCsumErrors at b): nothing is delivered. A flip that makes the header length less than 20 or
/// more than the bytes there (3 of the 224 bits: 0x45 to 0x41, 0x44 or 0x4d) is refused by the parser
/// before any checksum, uncounted, so the counters hold at least 95 % of the datagrams.
#[test]
fn a_corrupted_datagram_is_dropped_and_counted() {
    let reached = udp_flow(&plain_udp().1).delivered_bytes / 1400;
    let text = TOPOLOGY.replace(TCP, UDP).replacen(
        "delay = \"5ms\"",
        "delay = \"5ms\"\nnetem_ab = \"corrupt 100%\"",
        1,
    );
    let (sc, out) = run_text(&text);
    assert_eq!(udp_flow(&out).delivered_bytes, 0);
    let (r, b) = (errors(&sc, "r"), errors(&sc, "b"));
    assert_eq!(
        (r.udp_in_csum_errors, b.ip_in_hdr_errors),
        (0, 0),
        "{r:?} {b:?}"
    );
    let counted = r.ip_in_hdr_errors + b.udp_in_csum_errors;
    assert!(
        counted <= reached && counted * 100 >= reached * 95,
        "{counted} of {reached}: {r:?} {b:?}"
    );
    // A header flip is about 20 of the 28 bytes: most are r's.
    assert!(r.ip_in_hdr_errors > b.udp_in_csum_errors, "{r:?} {b:?}");
}

/// A UDP flow through the same NAT: the sink takes its first datagram's sender as its peer, as
/// iperf3's UDP server does, so every datagram the flow delivers without NAT it delivers with it.
#[test]
fn nat_egress_rewrites_and_udp_still_arrives() {
    let plain = plain_udp().1;
    let (_, nat) = run_text(&format!("{}{NAT}", TOPOLOGY.replace(TCP, UDP)));
    assert!(udp_flow(&plain).delivered_bytes > 11_000_000);
    assert_eq!(
        udp_flow(&nat).delivered_bytes,
        udp_flow(&plain).delivered_bytes
    );
}

/// Ping through the same NAT, with the TCP flow beside it. act_nat rewrites an echo request's source
/// and the reply's destination and nothing else (`tcf_nat_act` touches the ICMP header only for the
/// embedded packet of an error, `icmp_is_err`): the identifier a's ping socket matches its replies by
/// is the one it sent, and the ICMP checksum does not cover the addresses, so b, which checks it
/// (the packet was edited), accepts every request. Expected: the replies of the plain run, with the
/// same RTTs (the rewrite costs no byte); without `nat ingress` the replies go to r's own address and
/// a gets none, which shows b answered the translated source.
#[test]
fn ping_through_nat_gets_its_replies_by_identifier() {
    let ping = "[[traffic]]\nkind = \"ping\"\nname = \"ping\"\nfrom = \"a\"\nto = \"b\"\ninterval = \"100ms\"\n";
    let (_, plain) = run_text(&format!("{TOPOLOGY}{ping}"));
    let (sc, nat) = run_text(&format!("{TOPOLOGY}{ping}{NAT}"));
    let (p, n) = (&plain.pings[0], &nat.pings[0]);
    assert!(
        p.sent >= 99 && p.received + 1 >= p.sent,
        "{} of {}",
        p.received,
        p.sent
    );
    assert_eq!((n.sent, n.received), (p.sent, p.received));
    assert_eq!(errors(&sc, "b"), CsumErrors::default());
    assert_eq!(errors(&sc, "a"), CsumErrors::default());
    let rel = (n.rtt.p50_ms - p.rtt.p50_ms).abs() / p.rtt.p50_ms;
    assert!(
        rel < 0.05,
        "p50 {} ms through NAT, {} ms without",
        n.rtt.p50_ms,
        p.rtt.p50_ms
    );
    let one_way = NAT.replace(
        "filter add dev eth1 ingress protocol ip prio 1 matchall action nat ingress 10.0.2.1 10.0.1.1\n",
        "",
    );
    let (_, lost) = run_text(&format!("{TOPOLOGY}{ping}{one_way}"));
    assert_eq!(lost.pings[0].received, 0, "the replies went to r");
}
