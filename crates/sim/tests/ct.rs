//! tc's `ct` action on a simulated host against the host's own connection table (`act_ct.c` looks
//! packets up in the netns's `nf_conntrack` table, the one the netfilter hooks fill), and its zones as
//! separate tables: the stateful firewall OVS and the CNIs build from `ct` and flower's `ct_state`.
//!
//! Host a's ingress sends every untracked packet through `ct` and then drops what is `+trk+new`. Its
//! own TCP upload's returning segments belong to the connection its OUTPUT hook tracked when it sent
//! the SYN, so they are `+trk+est` and pass; a flow b starts towards a is new at every packet (`ct`
//! without `commit` confirms nothing), so none of it passes.

mod common;

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

/// a and b on a 10 Mbit/s link, a's TCP upload and b's unsolicited UDP flow, with `policy` on a.
fn run_policy(policy: &str) -> (Scenario, Outcome) {
    let text = format!(
        r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "10mbit"
delay = "5ms"
[[policy]]
node = "a"
tc = """
{policy}"""
[[traffic]]
kind = "tcp"
name = "upload"
from = "a"
to = "b"
[[traffic]]
kind = "udp"
name = "unsolicited"
from = "b"
to = "a"
rate = "1mbit"
"#
    );
    let mut sc =
        load("test.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    (sc, out)
}

/// The firewall on a's own ingress, its ct action written `ct`.
fn go(ct: &str) -> Outcome {
    run_policy(&format!(
        "qdisc add dev eth0 ingress
filter add dev eth0 parent ffff: prio 1 chain 0 protocol ip flower ct_state -trk action {ct} pipe action goto chain 1
filter add dev eth0 parent ffff: prio 1 chain 1 protocol ip flower ct_state +trk+est action pass
filter add dev eth0 parent ffff: prio 2 chain 1 protocol ip flower ct_state +trk+new action drop
"
    ))
    .1
}

fn goodput(out: &Outcome, name: &str) -> f64 {
    common::flow(out, name).goodput_bps
}

#[test]
fn replies_to_the_hosts_own_connections_are_established() {
    let out = go("ct");
    // The link's payload rate, 10 Mbit/s × 1448 / 1514 (a full frame's TCP payload), less the first
    // tenth of a second or so of slow start over a 10 ms RTT: within 3 %.
    let line = 10e6 * 1448.0 / 1514.0;
    let up = goodput(&out, "upload");
    assert!(
        (up - line).abs() < line * 0.03,
        "upload {up:.0} bit/s, line {line:.0}"
    );
    assert_eq!(
        goodput(&out, "unsolicited"),
        0.0,
        "every packet of b's flow is new"
    );
}

#[test]
fn another_zone_is_another_table() {
    // `ct zone 5`: zone 5's table has none of the host's connections (its hooks track in zone 0), so
    // even the SYN-ACK of a's own connection is new there and dropped; the upload never starts.
    let out = go("ct zone 5");
    assert_eq!(goodput(&out, "upload"), 0.0);
    assert_eq!(goodput(&out, "unsolicited"), 0.0);
}

/// The same firewall on an ifb, as a download shaper's filters would hold it: a's ingress redirects
/// every IPv4 packet to ifb0, and ifb0's root qdisc runs `ct` and the `ct_state` filters. act_ct on
/// the ifb looks the packet up in the host's table as on any device (`tcf_ct_act` takes the netns of
/// `skb->dev`, the ifb's, which is the host's), so a's upload's returning segments are `+trk+est` and
/// pass, and b's unsolicited flow is new and dropped. Before, the ifb's filters ran without the
/// host's table: every packet was new there and the upload never started.
#[test]
fn ct_on_an_ifb_finds_the_hosts_connections() {
    let (sc, out) = run_policy(
        "ip link add ifb0 type ifb
ip link set dev ifb0 up
qdisc add dev eth0 ingress
filter add dev eth0 parent ffff: protocol ip matchall action mirred egress redirect dev ifb0
qdisc add dev ifb0 root handle 1: prio
filter add dev ifb0 parent 1: prio 1 chain 0 protocol ip flower ct_state -trk action ct pipe action goto chain 1
filter add dev ifb0 parent 1: prio 1 chain 1 protocol ip flower ct_state +trk+est classid 1:1
filter add dev ifb0 parent 1: prio 2 chain 1 protocol ip flower ct_state +trk+new action drop
",
    );
    // As on eth0's own ingress (the first test): the line's payload rate less slow start, within 3 %.
    let line = 10e6 * 1448.0 / 1514.0;
    let up = goodput(&out, "upload");
    assert!(
        (up - line).abs() < line * 0.03,
        "upload {up:.0} bit/s, line {line:.0}"
    );
    assert_eq!(
        goodput(&out, "unsolicited"),
        0.0,
        "b's flow is new at every packet"
    );
    // Every packet went through the ifb and its ct action.
    let a = sc.net.node_by_name("a").unwrap();
    let ct = sc.net.nodes[a].engine.actions().list("ct");
    let seen = ct[0].borrow().stats.packets;
    let v = sc.net.vdevs.iter().find(|v| v.name == "ifb0").unwrap();
    assert!(
        seen > 1000 && seen == v.counters.rx_packets + v.counters.tx_dropped,
        "{seen} through ct"
    );
}
