//! `qdisc_tree_reduce_backlog`: when SFQ makes room by dropping an older packet, its ancestors' queue
//! counters follow. Invariant checked after every packet: a parent's qlen and backlog are its child's.
//! The ancestors count the drop too (`__qdisc_qstats_drop`), so a root's `dropped` includes what the
//! AQMs and fair queues below it dropped.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Handle, Packet};

fn tc(e: &mut Engine, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

/// A UDP packet of `len` frame bytes from 10.0.0.`host` (SFQ hashes addresses and ports).
fn udp(host: u8, len: u32) -> Packet {
    Packet::udp4(
        [10, 0, 0, host],
        1000 + host as u16,
        [10, 0, 1, 1],
        80,
        0,
        len,
    )
}

fn counters(e: &Engine, handle: u32) -> (u32, u32) {
    let q = e
        .device("eth0")
        .unwrap()
        .find(Handle(handle))
        .expect("qdisc")
        .q
        .stats();
    (q.qlen, q.backlog)
}

/// HTB 1: with one 1 kbit/s class 1:1 (the default), `leaf` (qdisc 10:) under it.
fn under_htb(leaf: &str) -> Engine {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 root handle 1: htb default 1");
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:1 htb rate 1kbit",
    );
    tc(
        &mut e,
        &format!("qdisc add dev eth0 parent 1:1 handle 10: {leaf}"),
    );
    e
}

#[test]
fn a_drop_from_another_flow_leaves_the_parent_exact() {
    // SFQ limit 4 holds four 1514-byte packets of one flow; a 66-byte packet of another flow then makes
    // it drop from the longest flow — the first one's. By hand: SFQ holds 3 × 1514 + 66 = 4608 bytes in
    // 4 packets, and so must its HTB parent (the kernel's qdisc_tree_reduce_backlog(1, 1514)).
    let mut e = under_htb("sfq limit 4");
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..4 {
        dev.enqueue(udp(1, 1514), &mut Cx::new(i));
    }
    // (Hosts 1 and 3: under the default perturbation seed, hosts 1 and 2 share a bucket.)
    let v = dev.enqueue(udp(3, 66), &mut Cx::new(5));
    assert_eq!(
        v,
        tclab_core::qdisc::Verdict::Success,
        "the newcomer stays; an older packet goes"
    );
    let sfq = dev.find(Handle(0x0010_0000)).unwrap().q.stats();
    let top = dev.root().q.stats();
    assert_eq!((sfq.qlen, sfq.backlog), (4, 3 * 1514 + 66));
    assert_eq!((top.qlen, top.backlog), (4, 3 * 1514 + 66));
    assert_eq!(
        (sfq.drops, top.drops),
        (1, 1),
        "SFQ's drop is counted by its HTB parent too"
    );
}

/// fq_codel over its limit drops from the fattest flow; when the arriving packet's flow is another,
/// enqueue succeeds and only `qdisc_tree_reduce_backlog(1, …)` tells the ancestors, which count it as a
/// drop (the kernel's `__qdisc_qstats_drop(sch, drops)` in every ancestor): HTB's root shows 1.
#[test]
fn ancestors_count_the_drops_of_fq_codel_below() {
    let mut e = under_htb("fq_codel limit 2");
    let dev = e.device_mut("eth0").unwrap();
    dev.enqueue(udp(1, 1514), &mut Cx::new(0));
    dev.enqueue(udp(1, 1514), &mut Cx::new(1));
    let v = dev.enqueue(udp(3, 66), &mut Cx::new(2));
    assert_eq!(
        v,
        tclab_core::qdisc::Verdict::Success,
        "host 3's packet stays"
    );
    let fq = dev.find(Handle(0x0010_0000)).unwrap().q.stats();
    let top = dev.root().q.stats();
    assert_eq!((fq.qlen, fq.drops), (2, 1), "one of host 1's packets went");
    assert_eq!((top.qlen, top.backlog, top.drops), (2, 1514 + 66, 1));
}

#[test]
fn parents_follow_sfq_drops() {
    for parent in ["htb", "tbf", "prio"] {
        let mut e = Engine::new();
        match parent {
            "htb" => {
                tc(&mut e, "qdisc add dev eth0 root handle 1: htb default 1");
                tc(
                    &mut e,
                    "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit",
                );
                tc(
                    &mut e,
                    "qdisc add dev eth0 parent 1:1 handle 10: sfq limit 8",
                );
            }
            "tbf" => {
                tc(
                    &mut e,
                    "qdisc add dev eth0 root handle 1: tbf rate 1mbit burst 10k latency 1s",
                );
                tc(
                    &mut e,
                    "qdisc add dev eth0 parent 1:1 handle 10: sfq limit 8",
                );
            }
            _ => {
                tc(&mut e, "qdisc add dev eth0 root handle 1: prio");
                tc(
                    &mut e,
                    "qdisc add dev eth0 parent 1:2 handle 10: sfq limit 8",
                );
            }
        }
        let dev = e.device_mut("eth0").unwrap();
        // A flood of big packets from host 1 and small ones from host 3 overflows the 8-packet SFQ: it
        // drops from the longest flow, whatever is arriving — sometimes the newcomer's own flow (a drop
        // for the parent), sometimes another (success for the parent, and a tree reduction).
        for i in 0..200u32 {
            let p = if i % 3 == 0 { udp(3, 66) } else { udp(1, 1514) };
            let mut cx = Cx::new(i as u64 * 1_000);
            dev.enqueue(p, &mut cx);
            if i % 7 == 0 {
                let mut cx = Cx::new(i as u64 * 1_000 + 500);
                dev.dequeue(&mut cx);
            }
            let d = &*dev;
            let sfq = d.find(Handle(0x0010_0000)).unwrap().q.stats();
            let top = d.root().q.stats();
            assert_eq!(
                (top.qlen, top.backlog),
                (sfq.qlen, sfq.backlog),
                "{parent} over sfq after packet {i}"
            );
        }
        assert!(counters(&e, 0x0010_0000).0 <= 8);
        let sfq = e
            .device("eth0")
            .unwrap()
            .find(Handle(0x0010_0000))
            .unwrap()
            .q
            .stats();
        assert!(
            sfq.drops > 20,
            "{parent}: the SFQ overflowed ({} drops)",
            sfq.drops
        );
    }
}

#[test]
fn a_pfifo_head_drop_below_htb_or_tbf_leaves_its_parent_exact() {
    // pfifo_head_drop limit 2 holds two 1514-byte packets; a 66-byte one then drops the oldest and is
    // queued (pfifo_tail_enqueue): by hand the FIFO holds 1514 + 66 = 1580 bytes in 2 packets and one
    // drop, and so does its parent, told the bytes' difference with no packet
    // (qdisc_tree_reduce_backlog(sch, 0, 1514 - 66)) and counting the drop from NET_XMIT_CN.
    let mut tbf = Engine::new();
    tc(
        &mut tbf,
        "qdisc add dev eth0 root handle 1: tbf rate 1kbit burst 1600 limit 10000",
    );
    tc(
        &mut tbf,
        "qdisc add dev eth0 parent 1:1 handle 10: pfifo_head_drop limit 2",
    );
    for mut e in [under_htb("pfifo_head_drop limit 2"), tbf] {
        let dev = e.device_mut("eth0").unwrap();
        for i in 0..2 {
            dev.enqueue(udp(1, 1514), &mut Cx::new(i));
        }
        let v = dev.enqueue(udp(1, 66), &mut Cx::new(2));
        assert_eq!(v, tclab_core::qdisc::Verdict::Cn, "the arrival queued, CN");
        let kind = dev.root().q.kind();
        let fifo = dev.find(Handle(0x0010_0000)).unwrap().q.stats();
        let top = dev.root().q.stats();
        assert_eq!(
            (fifo.qlen, fifo.backlog, fifo.drops),
            (2, 1580, 1),
            "{kind}"
        );
        assert_eq!((top.qlen, top.backlog, top.drops), (2, 1580, 1), "{kind}");
        let argv: Vec<String> = "-s qdisc show dev eth0"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let shown = tclab_tc::run(&mut e, &argv, 0).stdout;
        assert!(
            shown.contains("qdisc pfifo_head_drop 10: parent 1:1 limit 2p\n Sent 0 bytes 0 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 1580b 2p requeues 0\n"),
            "{kind}: {shown}"
        );
        // The newest two leave, the 1514-byte one first.
        let mut cx = Cx::new(3_600_000_000_000);
        let dev = e.device_mut("eth0").unwrap();
        let lens: Vec<u32> = std::iter::from_fn(|| dev.dequeue(&mut cx))
            .map(|p| p.len)
            .collect();
        assert_eq!(lens, [1514, 66], "{kind}");
        assert_eq!(counters(&e, 0x0001_0000), (0, 0), "{kind}");
    }
}
