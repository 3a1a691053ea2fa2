//! Verdicts through a tree configured by `tc` lines: a parent passes its child's verdict on and counts a
//! drop only when `net_xmit_drop_count` says so (`htb_enqueue`, `sch_htb.c`); a stolen packet is gone
//! without being a drop (`htb_classify`: `NET_XMIT_SUCCESS | __NET_XMIT_STOLEN`).

use tclab_core::qdisc::{Cx, DropReason, Verdict};
use tclab_core::{Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

/// A UDP/IPv4 packet of `len` bytes from 10.0.0.`host`; `tag` identifies it.
fn udp(host: u8, len: u32, tag: u64) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([10, 0, 0, host], 0, [10, 0, 1, 1], 0, 0, len)
    }
}

fn setup() -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    for l in [
        "qdisc add dev eth0 root handle 1: htb default 10",
        "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
        "qdisc add dev eth0 parent 1:10 handle 10: sfq depth 2 headdrop",
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.9/32 action trap",
    ] {
        tc(&mut e, l);
    }
    e
}

#[test]
fn htb_passes_sfqs_cn_on_and_counts_one_drop() {
    // SFQ depth 2 with headdrop under HTB: the third packet of a flow pushes the head out and SFQ
    // answers NET_XMIT_CN. `htb_enqueue` returns that code unchanged, counts a drop on the qdisc and the
    // class, and does not count the packet in its queue (SFQ's length did not change).
    let mut e = setup();
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..2 {
        assert_eq!(
            dev.enqueue(udp(1, 100, i), &mut Cx::new(0)),
            Verdict::Success
        );
    }
    let mut cx = Cx::new(0);
    assert_eq!(dev.enqueue(udp(1, 100, 2), &mut cx), Verdict::Cn);
    let d: Vec<(u64, DropReason, bool)> = cx
        .drops
        .iter()
        .map(|d| (d.pkt.tag, d.reason, d.arriving))
        .collect();
    assert_eq!(d, [(0, DropReason::HeadDrop, false)]);
    let s = tc(&mut e, "-s qdisc show dev eth0");
    assert!(
        s.contains("qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 0 bytes 0 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 200b 2p"),
        "{s}"
    );
    let s = tc(&mut e, "-s class show dev eth0");
    assert!(
        s.contains("(dropped 1, overlimits 0 requeues 0) \n backlog 200b 2p"),
        "{s}"
    );
}

#[test]
fn a_stolen_packet_is_no_drop() {
    // `action trap` (TC_ACT_TRAP): `htb_classify` sets NET_XMIT_SUCCESS | __NET_XMIT_STOLEN and
    // `htb_enqueue` counts no drop; the sender is told success. The drop list stays empty.
    let mut e = setup();
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    let v = dev.enqueue(udp(9, 100, 0), &mut cx);
    assert_eq!(v, Verdict::Stolen);
    assert_eq!(v.to_sender(), Verdict::Success);
    assert!(cx.drops.is_empty());
    let s = tc(&mut e, "-s qdisc show dev eth0");
    assert!(s.contains("(dropped 0, overlimits 0 requeues 0)"), "{s}");
    assert!(!s.contains("dropped 1"), "{s}");
}
