//! A device set down (`dev_deactivate` → `dev_reset_queue` → `qdisc_reset`): whatever its tree holds
//! is purged — every qdisc's `reset`, a classful one resetting its children — without being counted
//! as dropped, and `tc -s` then shows backlog 0 with the cumulative counters as they were.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Handle, Packet};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

fn udp(sport: u16, dport: u16, len: u32) -> Packet {
    Packet::udp4([10, 0, 0, 1], sport, [10, 0, 1, 1], dport, 0, len)
}

/// HTB 1: whose one class 1:1 (1 Mbit/s, 1600-byte burst) holds SFQ 10:, with a TBF 20: at 8 kbit/s
/// under class 1:2 for flows to port 81: two classful levels and two leaves to reset.
fn tree() -> Engine {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 root handle 1: htb default 1");
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit burst 1600",
    );
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:2 htb rate 1mbit burst 1600",
    );
    tc(&mut e, "qdisc add dev eth0 parent 1:1 handle 10: sfq");
    tc(
        &mut e,
        "qdisc add dev eth0 parent 1:2 handle 20: tbf rate 8kbit burst 1600 limit 100000",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 81 0xffff flowid 1:2",
    );
    e
}

fn counters(e: &Engine, handle: u32) -> (u32, u32, u64, u64, u32) {
    let s = e
        .device("eth0")
        .unwrap()
        .find(Handle(handle))
        .expect("qdisc")
        .q
        .stats();
    (s.qlen, s.backlog, s.bytes, s.packets, s.drops)
}

#[test]
fn a_reset_empties_every_qdisc_of_the_tree_and_keeps_what_they_counted() {
    let mut e = tree();
    let dev = e.device_mut("eth0").unwrap();
    // Five 1000-byte packets to each leaf at t = 0.
    for k in 0..5 {
        dev.enqueue(udp(1000 + k, 80, 1000), &mut Cx::new(0));
        dev.enqueue(udp(1000 + k, 81, 1000), &mut Cx::new(0));
    }
    // By hand: an HTB class sends while its tokens are not negative, so 1:1's 1600-byte burst lets
    // two 1000-byte packets go at once (1600 -> 600 -> -400); 1:2 may send too, but its TBF's
    // 1600-byte bucket releases only one. Three leave at t = 0, seven stay queued.
    let mut sent = 0;
    while dev.dequeue(&mut Cx::new(0)).is_some() {
        sent += 1;
    }
    assert_eq!(sent, 3);
    assert_eq!(counters(&e, 0x0001_0000), (7, 7000, 3000, 3, 0));
    e.device_mut("eth0").unwrap().reset_qdiscs();
    // Nothing queued anywhere; sent and dropped as they were (qdisc_reset counts no drop).
    assert_eq!(counters(&e, 0x0001_0000), (0, 0, 3000, 3, 0), "root HTB");
    assert_eq!(counters(&e, 0x0010_0000), (0, 0, 2000, 2, 0), "SFQ leaf");
    assert_eq!(counters(&e, 0x0020_0000), (0, 0, 1000, 1, 0), "TBF leaf");
    let shown = tc(&mut e, "-s qdisc show dev eth0");
    assert!(
        shown.contains("Sent 3000 bytes 3 pkt (dropped 0"),
        "{shown}"
    );
    assert_eq!(shown.matches("backlog 0b 0p").count(), 3, "{shown}");
    // The tree works on after it: a packet enqueued at 1 s (every bucket full again) leaves at once.
    let dev = e.device_mut("eth0").unwrap();
    dev.enqueue(udp(2000, 80, 500), &mut Cx::new(1_000_000_000));
    assert!(dev.dequeue(&mut Cx::new(1_000_000_000)).is_some());
    assert!(
        dev.dequeue(&mut Cx::new(1_000_000_000)).is_none(),
        "nothing left from before"
    );
    assert_eq!(counters(&e, 0x0001_0000), (0, 0, 3500, 4, 0));
}

#[test]
fn ip_link_set_down_purges_the_tree_and_up_keeps_what_came_after() {
    // `ip link set dev eth0 down` is dev_close → dev_deactivate: the same qdisc_reset.
    let mut e = tree();
    let dev = e.device_mut("eth0").unwrap();
    for k in 0..5 {
        dev.enqueue(udp(1000 + k, 81, 1000), &mut Cx::new(0));
    }
    assert_eq!(
        counters(&e, 0x0020_0000).0,
        5,
        "the TBF holds five (none dequeued yet)"
    );
    assert!(e.set_up("eth0", false));
    assert_eq!(counters(&e, 0x0020_0000), (0, 0, 0, 0, 0));
    assert_eq!(counters(&e, 0x0001_0000), (0, 0, 0, 0, 0));
    // Up again: nothing is purged by coming up.
    assert!(e.set_up("eth0", true));
    let dev = e.device_mut("eth0").unwrap();
    dev.enqueue(udp(2000, 81, 1000), &mut Cx::new(0));
    assert!(e.set_up("eth0", true));
    assert_eq!(counters(&e, 0x0020_0000).0, 1);
}
