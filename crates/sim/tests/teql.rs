//! teql in the simulator: LARTC's "bond two lines" (chapter on teql). Router r1 reaches r2 over two
//! 10 Mbit/s links whose interfaces are teql0's slaves; with teql0 up, what r1 routes out of either
//! goes through teql0 and round robin over both.
//!
//! By hand: a UDP datagram of 1448 bytes is a frame of 1448 + 8 + 20 + 14 = 1490 bytes, 1.192 ms on
//! a 10 Mbit/s line. teql_master_xmit gives each packet to the next free line, so with more offered
//! than both carry each line is busy all the time and the flow gets 2 × 10 Mbit/s × 1448/1490 =
//! 19.436 Mbit/s of payload (one line alone: half of it). Over lines of unequal delay the round
//! robin reorders: every other segment arrives 20 ms late, so TCP sees holes that are not losses.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

mod common;

/// h1 --100mbit-- r1 ==(eth1, eth2: 10mbit each)== r2 --100mbit-- h2, with `policy` on r1.
fn scenario(delay1: &str, delay2: &str, policy: &str, traffic: &str) -> String {
    format!(
        r#"
duration = "5s"
[[node]]
name = "h1"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"
[[node]]
name = "h2"
[[link]]
a = "h1"
b = "r1:eth0"
rate = "100mbit"
delay = "1ms"
[[link]]
a = "r1:eth1"
b = "r2:eth1"
rate = "10mbit"
delay = "{delay1}"
[[link]]
a = "r1:eth2"
b = "r2:eth2"
rate = "10mbit"
delay = "{delay2}"
[[link]]
a = "r2:eth0"
b = "h2"
rate = "100mbit"
delay = "1ms"
[[policy]]
node = "r1"
tc = '''
{policy}
'''
{traffic}
"#
    )
}

/// The LARTC lines: both interfaces enslaved, the master up (its queue: a pfifo_fast of 100).
const BOND: &str = "tc qdisc add dev eth1 root teql0\ntc qdisc add dev eth2 root teql0\n\
                    ip link set dev teql0 up";

/// For TCP, with a queue on teql0 no window overflows, so that nothing is lost and every
/// retransmission is reordering's.
const BOND_DEEP: &str = "tc qdisc add dev eth1 root teql0\ntc qdisc add dev eth2 root teql0\n\
                         ip link set dev teql0 txqueuelen 10000\nip link set dev teql0 up";

const UDP: &str = r#"
[[traffic]]
kind = "udp"
name = "u"
from = "h1"
to = "h2"
rate = "30mbit"
start = "0s"
"#;

fn go(text: &str) -> (Scenario, Outcome) {
    let mut sc =
        load("teql.toml", text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    (sc, out)
}

fn flow<'a>(out: &'a Outcome, name: &str) -> &'a tclab_sim::run::FlowResult {
    out.flows.iter().find(|f| f.name == name).expect("the flow")
}

fn iface(sc: &Scenario, node: &str, name: &str) -> tclab_sim::net::IfCounters {
    let n = sc.net.node_by_name(node).unwrap();
    sc.net.ifaces[sc.net.iface_by_name(n, name).unwrap()].counters
}

/// 2 × 10 Mbit/s of 1490-byte frames carrying 1448 bytes each.
const BONDED: f64 = 2.0 * 10e6 * 1448.0 / 1490.0;

#[test]
fn two_bonded_lines_carry_twice_one_lines_udp() {
    let (sc, out) = go(&scenario("5ms", "5ms", BOND, UDP));
    let got = flow(&out, "u").goodput_bps;
    assert!(
        (got - BONDED).abs() / BONDED < 0.01,
        "{got:.0} bit/s of payload through teql0, expected {BONDED:.0}"
    );
    // Round robin halves the load: the two lines' frame counts differ by at most the one in flight.
    let (a, b) = (iface(&sc, "r1", "eth1"), iface(&sc, "r1", "eth2"));
    assert!(
        a.tx_packets.abs_diff(b.tx_packets) <= 1,
        "eth1 sent {}, eth2 {}",
        a.tx_packets,
        b.tx_packets
    );
    // They went past the slaves' own qdiscs (teql_master_xmit calls the driver): those sent nothing.
    let e = &sc.net.nodes[sc.net.node_by_name("r1").unwrap()].engine;
    for dev in ["eth1", "eth2"] {
        assert_eq!(e.device(dev).unwrap().root().q.stats().packets, 0, "{dev}");
    }
    // The recorder samples teql0 as a port: 20 Mbit/s of frames once the queue is full (1 s on).
    let rates: Vec<f64> = out
        .recorder
        .iface_samples
        .iter()
        .filter(|s| sc.net.port_label(s.iface) == "r1:teql0" && s.t > 1_000_000_000)
        .map(|s| s.tx_bps)
        .collect();
    assert!(!rates.is_empty(), "teql0 is sampled");
    for r in rates {
        assert!((r - 20e6).abs() / 20e6 < 0.01, "teql0 sent {r:.0} bit/s");
    }
    // What teql0 sent is what the lines carried; the rest of the 30 Mbit/s died in its queue.
    let m = e.teql().unwrap().stats;
    assert_eq!(m.tx_packets, a.tx_packets + b.tx_packets);
    assert!(sc.net.teqls[&sc.net.node_by_name("r1").unwrap()].tx_dropped > 0);
}

#[test]
fn a_slaves_queue_length_shows_teql0s_queue() {
    // 30 Mbit/s offered to 20: teql0's pfifo_fast of txqueuelen 100 stays full, and the slaves'
    // own queues stay empty (r1 sends nothing of its own out of them). teql_dequeue sets a slave's
    // qlen to its own plus teql0's, read at the slave's last dequeue (which finds its queue empty,
    // just before the master hands it the next packet): 100, or 99 if that hand-over came before
    // the next datagram arrived (one every 0.39 ms against a line's 1.19 ms per frame).
    let (sc, out) = go(&scenario("5ms", "5ms", BOND, UDP));
    let e = &sc.net.nodes[sc.net.node_by_name("r1").unwrap()].engine;
    assert_eq!(e.device("teql0").unwrap().root().q.stats().qlen, 100);
    for dev in ["eth1", "eth2"] {
        let s = e.device(dev).unwrap().root().q.stats();
        assert!(
            (99..=100).contains(&s.qlen),
            "{dev}: qlen {}, backlog {}",
            s.qlen,
            s.backlog
        );
        assert_eq!(s.backlog, 0, "teql never counts bytes queued");
        // tc.txt prints it as the kernel's tc -s would.
        let text = &out
            .tc_show
            .iter()
            .find(|(n, d, _)| n == "r1" && d == dev)
            .unwrap()
            .2;
        assert!(text.contains(&format!("backlog 0b {}p", s.qlen)), "{text}");
    }
}

#[test]
fn teql0s_counters_are_in_the_summary() {
    // What `ip -s link show teql0` prints: every frame the master handed a slave (here all the
    // lines sent: r1 sends nothing of its own out of them), and what its qdisc dropped.
    let (sc, out) = go(&scenario("5ms", "5ms", BOND, UDP));
    let summary = tclab_sim::report::summary_json(&sc, &out);
    let teql0 = summary["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["iface"] == "r1:teql0")
        .expect("r1:teql0 among the interfaces");
    let (a, b) = (iface(&sc, "r1", "eth1"), iface(&sc, "r1", "eth2"));
    let c = &teql0["counters"];
    assert_eq!(c["tx_packets"], a.tx_packets + b.tx_packets);
    assert_eq!(c["tx_bytes"], a.tx_bytes + b.tx_bytes);
    // By hand, over 5 s: 30 Mbit/s of 1448-byte payloads is 2590.1 datagrams a second, 12 950 in
    // all; two lines of 1490-byte frames carry 1677.9 a second, 8 389; teql0's queue holds 100
    // at the end, so 12 950 - 8 389 - 100 = 4 461 dropped (less the few still on h1's link).
    let n = |k: &str| c[k].as_u64().unwrap() as i64;
    assert!((n("tx_packets") - 8389).abs() <= 3, "{c}");
    assert!((n("tx_dropped") - 4461).abs() <= 5, "{c}");
}

#[test]
fn the_trace_follows_packets_through_teql0() {
    // `--trace`: teql0's enqueues, dequeues and drops under r1:teql0, each count equal to the
    // counter of the same run: every dequeue went to a slave (the master's tx_packets), every drop
    // is one of its qdisc's, and what was enqueued either left, was dropped, or is still queued.
    let mut sc = load(
        "teql.toml",
        &scenario("5ms", "5ms", BOND, UDP),
        std::path::Path::new("."),
    )
    .unwrap();
    let sink = common::Sink::default();
    sc.net.trace = Some(tclab_sim::trace::Trace::text(Box::new(sink.clone())));
    run(&mut sc, &mut |_| {}).expect("the run completes");
    sc.net.trace.as_mut().unwrap().finish().unwrap();
    let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
    let count = |event: &str| {
        text.lines()
            .filter(|l| l.split_whitespace().nth(1) == Some("r1:teql0"))
            .filter(|l| l.split_whitespace().nth(2) == Some(event))
            .count() as u64
    };
    let e = &sc.net.nodes[sc.net.node_by_name("r1").unwrap()].engine;
    let q = e.device("teql0").unwrap().root().q.stats();
    let master = e.teql().unwrap().stats;
    assert_eq!(count("deq"), master.tx_packets);
    assert_eq!(count("drop"), u64::from(q.drops));
    assert_eq!(
        count("enq"),
        count("deq") + count("drop") + u64::from(q.qlen)
    );
    assert!(count("drop") > 0, "30 Mbit/s into 20: teql0's queue drops");
    // The slaves' own qdiscs see none of it (teql_master_xmit calls their drivers).
    assert!(!text.contains("r1:eth1 enq") && !text.contains("r1:eth2 enq"));
}

#[test]
fn without_teql_up_one_line_carries_it_all() {
    // The same slaves with the master left down: the fewest-hops route, eth1, takes everything
    // through eth1's own teql0 FIFO.
    let policy = "tc qdisc add dev eth1 root teql0\ntc qdisc add dev eth2 root teql0";
    let (sc, out) = go(&scenario("5ms", "5ms", policy, UDP));
    let got = flow(&out, "u").goodput_bps;
    let one = BONDED / 2.0;
    assert!(
        (got - one).abs() / one < 0.01,
        "{got:.0} bit/s of payload over eth1 alone, expected {one:.0}"
    );
    assert_eq!(iface(&sc, "r1", "eth2").tx_packets, 0);
}

const TCP: &str = r#"
[[traffic]]
kind = "tcp"
name = "t"
from = "h1"
to = "h2"
start = "0s"
"#;

/// A bulk TCP flow over lines of 5 ms and `delay2`, which loses nothing anywhere (wires, the
/// interfaces' qdiscs, teql0's queue).
fn tcp_run(delay2: &str) -> tclab_sim::run::FlowResult {
    let (sc, out) = go(&scenario("5ms", delay2, BOND_DEEP, TCP));
    let wires: u64 = sc
        .net
        .ifaces
        .iter()
        .map(|i| i.counters.wire_lost + i.counters.tx_dropped)
        .sum();
    let master: u64 = sc.net.teqls.values().map(|t| t.tx_dropped).sum();
    assert_eq!((wires, master), (0, 0), "nothing lost or dropped");
    flow(&out, "t").clone()
}

#[test]
fn tcp_over_lines_of_unequal_delay_sees_reordering() {
    // Equal delays: teql0 keeps the order (each line carries every other segment, and they arrive
    // in turn), so a CUBIC flow that loses nothing retransmits nothing and fills both lines.
    let t = tcp_run("5ms");
    assert_eq!(t.retransmits, 0, "in order: nothing to retransmit");
    assert!(t.goodput_bps > 0.9 * BONDED, "{:.0} bit/s", t.goodput_bps);
    // 5 ms against 25 ms: every other segment arrives 20 ms after its successor. Nothing is lost,
    // yet the receiver's SACKs show holes and RACK's window (a quarter of the min RTT) is shorter
    // than 20 ms: the first retransmissions are spurious, reordering's doing. As Linux does, the
    // receiver reports each duplicate (D-SACK), and the sender undoes every recovery — by the
    // timestamps its ACKs echo (tcp_try_undo_recovery, tcp_try_undo_partial) — and widens RACK's
    // window on the D-SACKs (tcp_rack_update_reo_wnd): 21 retransmissions, 10 recoveries all undone,
    // 17.9 Mbit/s (without D-SACK and undo: 103 retransmissions and ~1 Mbit/s). A partial ACK that
    // shows an original delivered while retransmissions are out sends no more of them
    // (tcp_fastretrans_alert returns before REXMIT_LOST). Sending them anyway (two at 53 ms) fills the
    // first recovery's last holes over the 5 ms line before the originals come over the 25 ms one:
    // the ACK that ends it echoes the retransmissions' timestamps, the D-SACKs come after the next
    // recovery began, and its cut stands (13.0 Mbit/s).
    let t = tcp_run("25ms");
    let n = t.nstat.as_ref().unwrap();
    eprintln!(
        "unequal delays: goodput {:.0} bit/s, {} retransmits, {n:?}",
        t.goodput_bps, t.retransmits
    );
    assert!(
        t.retransmits > 0,
        "the reordering is taken for loss at first"
    );
    assert_eq!(n.dsack_recv, t.retransmits, "every retransmission D-SACKed");
    assert_eq!(n.dsack_old_sent, t.retransmits);
    assert_eq!(
        n.full_undo + n.partial_undo + n.dsack_undo + n.loss_undo,
        n.sack_recoveries,
        "every recovery undone"
    );
    assert!(t.goodput_bps > 0.9 * BONDED, "{:.0} bit/s", t.goodput_bps);
}

#[test]
fn a_shaper_on_teql0_holds_the_bond_to_its_rate() {
    // TBF at 12 Mbit/s as teql0's root: below the two lines' 20, so the master's watchdog, not the
    // lines, paces it: 12 Mbit/s of 1490-byte frames, 1448 bytes of payload each.
    let policy =
        format!("{BOND}\ntc qdisc add dev teql0 root tbf rate 12mbit burst 3000 latency 50ms");
    let (sc, out) = go(&scenario("5ms", "5ms", &policy, UDP));
    let want = 12e6 * 1448.0 / 1490.0;
    let got = flow(&out, "u").goodput_bps;
    assert!(
        (got - want).abs() / want < 0.01,
        "{got:.0} bit/s of payload through TBF on teql0, expected {want:.0}"
    );
    let (a, b) = (iface(&sc, "r1", "eth1"), iface(&sc, "r1", "eth2"));
    assert!(a.tx_packets.abs_diff(b.tx_packets) <= 1);
}

#[test]
fn a_hosts_gso_packets_are_cut_before_the_round_robin() {
    // teql0 on the sending host itself: its TCP hands teql0 GSO packets, which teql0 (no GSO feature)
    // cuts into frames before its transmit, each to the next free line. Equal lines, a deep queue:
    // in order, nothing lost, both lines full with 1514-byte frames of 1448 bytes of payload, and the
    // socket's skbs all come back (a leak in TCP small queues would stall it far below this).
    let text = r#"
duration = "5s"
[[node]]
name = "h1"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "h2"
[[link]]
a = "h1:eth0"
b = "r:eth0"
rate = "10mbit"
delay = "5ms"
[[link]]
a = "h1:eth1"
b = "r:eth1"
rate = "10mbit"
delay = "5ms"
[[link]]
a = "r:eth2"
b = "h2"
rate = "100mbit"
delay = "1ms"
[[policy]]
node = "h1"
tc = '''
tc qdisc add dev eth0 root teql0
tc qdisc add dev eth1 root teql0
ip link set dev teql0 txqueuelen 10000
ip link set dev teql0 up
'''
[[traffic]]
kind = "tcp"
name = "t"
from = "h1"
to = "h2"
start = "0s"
"#;
    let (sc, out) = go(text);
    let t = flow(&out, "t");
    let full = 2.0 * 10e6 * 1448.0 / 1514.0;
    assert_eq!(t.retransmits, 0);
    assert!(
        t.goodput_bps > 0.9 * full,
        "{:.0} bit/s, full {full:.0}",
        t.goodput_bps
    );
    let (a, b) = (iface(&sc, "h1", "eth0"), iface(&sc, "h1", "eth1"));
    assert!(
        a.tx_packets.abs_diff(b.tx_packets) <= 2,
        "eth0 sent {}, eth1 {}: the frames of each GSO packet are spread",
        a.tx_packets,
        b.tx_packets
    );
}

#[test]
fn the_example_bonds_both_ways() {
    // examples/teql/bonded.toml: teql0 on both routers. 18 Mbit/s of UDP payload, more than one
    // line's 9.72, passes whole (within the 1 % a stream's start offset costs); the pings go and
    // come back over both lines (r2 bonds its side), none lost.
    let text = include_str!("../../../examples/teql/bonded.toml");
    let (sc, out) = go(text);
    let got = flow(&out, "udp").goodput_bps;
    assert!((got - 18e6).abs() / 18e6 < 0.01, "{got:.0} bit/s");
    let ping = out.pings.iter().find(|p| p.name == "ping").expect("ping");
    assert_eq!(ping.sent, ping.received);
    // r2 forwards only the echo requests, one every 100 ms on idle lines: no slave is ever busy, so
    // the ring is served strictly in turn (a Linux NIC's ring never fills at this load).
    let (a, b) = (iface(&sc, "r2", "eth1"), iface(&sc, "r2", "eth2"));
    assert_eq!(a.tx_packets + b.tx_packets, ping.sent);
    assert!(
        a.tx_packets.abs_diff(b.tx_packets) <= 1,
        "r2:eth1 sent {}, r2:eth2 {}",
        a.tx_packets,
        b.tx_packets
    );
}

#[test]
fn a_mirred_redirect_to_teql0_is_sent_over_the_bond() {
    // r1 redirects what arrives on eth0 to teql0 (`mirred egress redirect dev teql0`: dev_queue_xmit
    // on the master, its qdisc, then the slaves), unrouted: both lines carry it, as routed packets.
    let policy = format!(
        "{BOND}\ntc qdisc add dev eth0 ingress\n\
         tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev teql0"
    );
    let (sc, out) = go(&scenario("5ms", "5ms", &policy, UDP));
    let got = flow(&out, "u").goodput_bps;
    assert!(
        (got - BONDED).abs() / BONDED < 0.01,
        "{got:.0} bit/s of payload redirected through teql0, expected {BONDED:.0}"
    );
    // tcf_mirred_forward counts an overlimit for each packet dev_queue_xmit drops: teql0's queue
    // overflowing under 30 Mbit/s, nothing else.
    let r1 = sc.net.node_by_name("r1").unwrap();
    let a = sc.net.nodes[r1]
        .engine
        .actions()
        .get("mirred", 1)
        .expect("the mirred action");
    let dropped = sc.net.teqls[&r1].tx_dropped;
    assert!(dropped > 0);
    assert_eq!(u64::from(a.borrow().stats.overlimits), dropped);
    // teql0's own filter redirecting to teql0 ends at mirred's nesting limit, not in a stack
    // overflow: nothing gets through.
    let looped = format!(
        "{BOND}\ntc qdisc add dev teql0 root handle 1: prio\n\
         tc filter add dev teql0 parent 1: matchall action mirred egress redirect dev teql0"
    );
    let (_, out) = go(&scenario("5ms", "5ms", &looped, UDP));
    assert_eq!(flow(&out, "u").goodput_bps, 0.0);
}

#[test]
fn teql0_counts_a_requeue_each_time_every_slave_is_busy_with_a_packet_in_hand() {
    // teql_master_xmit returns NETDEV_TX_BUSY when no slave can take the packet: the master's
    // queue stops and the packet goes back on teql0's root qdisc (dev_requeue_skb: requeues + 1).
    // Until a slave's teql_dequeue finds its queue empty and wakes it, the stopped master dequeues
    // nothing. Saturated (30 Mbit/s into 20): the first requeue is the third packet's, both lines
    // busy with the first two; after that every wake-up hands one packet to the slave that woke it
    // and finds both busy again with the next in hand: sent - 2 + 1 requeues, fewer only by the few
    // early wake-ups that found teql0's queue empty.
    let (sc, out) = go(&scenario("5ms", "5ms", BOND, UDP));
    let e = &sc.net.nodes[sc.net.node_by_name("r1").unwrap()].engine;
    let root = e.device("teql0").unwrap().qdiscs().remove(0).stats;
    let sent = root.packets;
    assert!(
        u64::from(root.requeues) < sent && u64::from(root.requeues) + 10 >= sent,
        "{} requeues for {sent} packets sent",
        root.requeues
    );
    let text = &out
        .tc_show
        .iter()
        .find(|(n, d, _)| n == "r1" && d == "teql0")
        .unwrap()
        .2;
    assert!(
        text.contains(&format!(" requeues {}) ", root.requeues)),
        "{text}"
    );
    // 5 Mbit/s (a datagram every 2.38 ms, a line busy 1.19 ms with each): a line is always free,
    // nothing is handed back.
    let light = UDP.replace("30mbit", "5mbit");
    let (sc, _) = go(&scenario("5ms", "5ms", BOND, &light));
    let e = &sc.net.nodes[sc.net.node_by_name("r1").unwrap()].engine;
    let root = e.device("teql0").unwrap().qdiscs().remove(0).stats;
    assert!(root.packets > 1000);
    assert_eq!(root.requeues, 0);
}
