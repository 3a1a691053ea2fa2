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
use tclab_sim::scenario::load;

fn go(ct: &str) -> Outcome {
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
qdisc add dev eth0 ingress
filter add dev eth0 parent ffff: prio 1 chain 0 protocol ip flower ct_state -trk action {ct} pipe action goto chain 1
filter add dev eth0 parent ffff: prio 1 chain 1 protocol ip flower ct_state +trk+est action pass
filter add dev eth0 parent ffff: prio 2 chain 1 protocol ip flower ct_state +trk+new action drop
"""
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
    run(&mut sc, &mut |_| {}).expect("the run completes")
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
