//! DRR in virtual time, configured by `tc` lines, with hand-built IPv4 packets classified by u32 on the
//! source address. The driver plays a 10 Mbit/s NIC that dequeues whenever the link is free. Every
//! expectation is derived by hand in the test that checks it, from the algorithm of `sch_drr.c`.

use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Engine, Packet, NSEC_PER_SEC};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

fn tc_fails(e: &mut Engine, line: &str) -> (i32, String) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    (out.code as i32, out.stderr)
}

/// A UDP/IPv4 packet of `len` bytes (what the qdisc counts) from 10.0.0.`host`; `tag` identifies it.
fn udp(host: u8, len: u32, tag: u64) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([10, 0, 0, host], 0, [10, 0, 1, 1], 0, 0, len)
    }
}

/// eth0 (mtu 1500, txqueuelen 100 000 so the default pfifo leaves never overflow) with a DRR root,
/// classes 1:1 and 1:2 of the given quanta, and u32 filters sending 10.0.0.1 to 1:1 and 10.0.0.2 to 1:2.
fn setup(q1: u32, q2: u32) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 100_000);
    for l in [
        "qdisc add dev eth0 root handle 1: drr".to_string(),
        format!("class add dev eth0 parent 1: classid 1:1 drr quantum {q1}"),
        format!("class add dev eth0 parent 1: classid 1:2 drr quantum {q2}"),
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.1/32 flowid 1:1"
            .to_string(),
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.2/32 flowid 1:2"
            .to_string(),
    ] {
        tc(&mut e, &l);
    }
    e
}

fn enqueue(e: &mut Engine, pkt: Packet) -> Verdict {
    e.device_mut("eth0").unwrap().enqueue(pkt, &mut Cx::new(0))
}

/// Dequeue `n` packets back to back at 10 Mbit/s starting at t = 0; returns (departure time, host).
fn drain(e: &mut Engine, n: usize) -> Vec<(u64, u8)> {
    let dev = e.device_mut("eth0").unwrap();
    let mut now = 0u64;
    let mut out = Vec::new();
    for _ in 0..n {
        let mut cx = Cx::new(now);
        let Some(p) = dev.dequeue(&mut cx) else { break };
        out.push((now, p.data[15]));
        now += p.len as u64 * 8 * NSEC_PER_SEC / 10_000_000;
    }
    out
}

#[test]
fn quanta_1500_and_3000_share_the_link_1_to_2() {
    let mut e = setup(1500, 3000);
    // Both classes backlogged from t = 0 with 1000-byte packets, 1:1's first (so it is first on the
    // active list), more than the window drains.
    for i in 0..20_000u64 {
        assert_eq!(enqueue(&mut e, udp(1, 1000, i)), Verdict::Success);
    }
    for i in 0..20_000u64 {
        assert_eq!(enqueue(&mut e, udp(2, 1000, i)), Verdict::Success);
    }
    // 24 000 packets of 1000 B at 10 Mbit/s: a 19.2 s window.
    let out = drain(&mut e, 24_000);
    assert_eq!(out.len(), 24_000);
    assert_eq!(out.last().unwrap().0, 23_999 * 800_000);

    // The bound, by hand. A class's turn starts with its deficit raised by its quantum Q (or set to Q
    // when it becomes active) and ends when the next packet (L = 1000 B) no longer fits, leaving less
    // than L. So after c completed turns out of s started ones, c·Q − L < bytes ≤ s·Q. Turns alternate
    // 1:1, 1:2, 1:1, …; at any instant either 1:1 is mid-turn (s1 = c1 + 1, c2 = s2 = c1), or 1:2 is
    // (c1 = s1 = s2, c2 = s2 − 1), or neither (s1 = c1 ∈ {s2, s2 + 1}, c2 = s2). Hence always
    // s2 ≤ c1 and c2 ≥ s1 − 1, and with Q1 = 1500, Q2 = 3000:
    //   b2 − 2·b1 ≤ 3000·s2 − 2·(1500·c1 − L) ≤ 2L = 2000
    //   b2 − 2·b1 ≥ 3000·c2 − L − 2·1500·s1 ≥ −3000 − L = −4000
    // at every prefix of the departure sequence.
    let (mut b1, mut b2) = (0i64, 0i64);
    for (i, &(_, host)) in out.iter().enumerate() {
        match host {
            1 => b1 += 1000,
            2 => b2 += 1000,
            h => panic!("packet from 10.0.0.{h}"),
        }
        let d = b2 - 2 * b1;
        assert!(
            (-4000..=2000).contains(&d),
            "after {} packets: b1 {b1} b2 {b2}",
            i + 1
        );
    }
    // Over the whole window: 8000 and 16 000 packets, to within the same bound (4 packets).
    assert!(
        (b1 - 8_000_000).abs() <= 4000 && (b2 - 16_000_000).abs() <= 4000,
        "{b1} {b2}"
    );
    // The first rounds, traced by hand: 1:1 sends one packet (deficit 1500 → 500), gets 1500 more
    // (2000) and yields; 1:2 sends three (3000 → 0) and gets 3000; 1:1 sends two (2000 → 0), …
    let first: Vec<u8> = out.iter().take(12).map(|&(_, h)| h).collect();
    assert_eq!(first, [1, 2, 2, 2, 1, 1, 2, 2, 2, 1, 2, 2]);
}

#[test]
fn packets_larger_than_the_quantum_still_progress() {
    // 1:1 has quantum 500 and sends 1500-byte packets: each needs three turns of deficit. 1:2 has
    // quantum 1500 and the same packets: one per turn.
    let mut e = setup(500, 1500);
    for i in 0..100u64 {
        enqueue(&mut e, udp(1, 1500, i));
        enqueue(&mut e, udp(2, 1500, i));
    }
    // Dequeue 1: 1:1 (500 < 1500) → 1000, to the tail; 1:2 sends (1500 → 0).
    let one = drain(&mut e, 1);
    assert_eq!(one[0].1, 2);
    // The deficit xstat as tc 6.1 prints it: 1:1 holds 1000, 1:2 holds 0 (both have packets).
    let s = tc(&mut e, "-s class show dev eth0");
    assert!(s.contains("class drr 1:1 root quantum 500b \n"), "{s}");
    assert!(s.contains(" deficit 1000b \n"), "{s}");
    assert!(s.contains(" deficit 0b \n"), "{s}");
    // Then, by the same steps: 1:2 gets 1500 and sends; 1:1 gets 1500 (1500) and sends (0); 1:2 sends;
    // then 1:1 needs 500, 1000, 1500 over three turns while 1:2 sends three packets: 2,2,2,1 repeating.
    let rest: Vec<u8> = drain(&mut e, 14).iter().map(|&(_, h)| h).collect();
    assert_eq!(rest, [2, 1, 2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1]);
}

#[test]
fn unclassified_packets_are_dropped_and_counted() {
    let mut e = setup(1500, 1500);
    // 10.0.0.9 matches no filter and names no class by priority: dropped, a drop of the qdisc
    // (`drr_enqueue` answers `NET_XMIT_SUCCESS | __NET_XMIT_BYPASS`: the sender is told success).
    assert_eq!(enqueue(&mut e, udp(9, 100, 0)), Verdict::Bypass);
    // A filter naming a class that does not exist: dropped too.
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip src 10.0.0.7/32 flowid 1:7",
    );
    assert_eq!(enqueue(&mut e, udp(7, 100, 0)), Verdict::Bypass);
    // A filter whose action drops (`action drop` = TC_ACT_SHOT): counted as well.
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 u32 match ip src 10.0.0.8/32 action drop",
    );
    assert_eq!(enqueue(&mut e, udp(8, 100, 0)), Verdict::Bypass);
    // skb->priority 1:2 names class 1:2 directly, without any filter.
    let mut p = udp(9, 100, 0);
    p.priority = 0x0001_0002;
    assert_eq!(enqueue(&mut e, p), Verdict::Success);
    let s = tc(&mut e, "-s qdisc show dev eth0");
    assert_eq!(
        s,
        "qdisc drr 1: root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 3, overlimits 0 requeues 0) \n backlog 100b 1p requeues 0\n"
    );
    let s = tc(&mut e, "-s class show dev eth0 classid 1:2");
    assert_eq!(
        s,
        "class drr 1:2 root quantum 1500b \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 100b 1p requeues 0\n deficit 1500b \n"
    );
}

#[test]
fn bound_classes_are_busy_and_grafts_purge() {
    let mut e = setup(1500, 1500);
    // The u32 filters name 1:1 and 1:2: `qdisc_class_in_use`, EBUSY, exit 2.
    let (code, err) = tc_fails(&mut e, "class del dev eth0 classid 1:1");
    assert_eq!(code, 2);
    assert!(err.contains("Error: DRR class is in use."), "{err}");
    // A class no filter names is deleted.
    tc(&mut e, "class add dev eth0 parent 1: classid 1:3 drr");
    tc(&mut e, "class del dev eth0 classid 1:3");
    assert_eq!(tc(&mut e, "class show dev eth0").lines().count(), 2);
    // Quantum 0 is refused by the kernel (exit 2) and changes nothing.
    let (code, err) = tc_fails(&mut e, "class change dev eth0 classid 1:1 drr quantum 0");
    assert_eq!(
        (code, err.contains("Specified DRR quantum cannot be zero")),
        (2, true)
    );
    // Filters go to the qdisc only.
    let (code, err) = tc_fails(
        &mut e,
        "filter add dev eth0 parent 1:1 protocol ip prio 1 u32 match ip src 10.0.0.3/32 flowid 1:1",
    );
    assert_eq!((code, err.contains("DRR classid must be zero")), (2, true));
    // Two packets in 1:1, then a bfifo grafted in its place: the old queue is purged, the class leaves
    // the active list, and 1:2's packet is the only one to come out.
    enqueue(&mut e, udp(1, 500, 0));
    enqueue(&mut e, udp(1, 500, 1));
    enqueue(&mut e, udp(2, 700, 2));
    tc(
        &mut e,
        "qdisc add dev eth0 parent 1:1 handle 10: bfifo limit 3000",
    );
    let s = tc(&mut e, "class show dev eth0 classid 1:1");
    assert_eq!(s, "class drr 1:1 root leaf 10: quantum 1500b \n");
    let out = drain(&mut e, 5);
    assert_eq!(out.iter().map(|&(_, h)| h).collect::<Vec<_>>(), [2]);
}

#[test]
fn under_a_shaper_peek_keeps_the_order_and_the_counts() {
    // TBF asks its child to `peek` and dequeues only when the tokens allow: DRR's peek
    // (`qdisc_peek_dequeued`) runs the round-robin step early and keeps the packet. The order must be
    // the unshaped one, and the kept packet must still count in DRR's backlog.
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    for l in [
        "qdisc add dev eth0 root handle 1: tbf rate 1mbit burst 1600 limit 100000",
        "qdisc add dev eth0 parent 1:1 handle 2: drr",
        "class add dev eth0 parent 2: classid 2:1 drr quantum 1500",
        "class add dev eth0 parent 2: classid 2:2 drr quantum 3000",
        "filter add dev eth0 parent 2: protocol ip prio 1 u32 match ip src 10.0.0.1/32 flowid 2:1",
        "filter add dev eth0 parent 2: protocol ip prio 1 u32 match ip src 10.0.0.2/32 flowid 2:2",
    ] {
        tc(&mut e, l);
    }
    for i in 0..20u64 {
        enqueue(&mut e, udp(1, 1000, i));
    }
    for i in 0..20u64 {
        enqueue(&mut e, udp(2, 1000, i));
    }
    let dev = e.device_mut("eth0").unwrap();
    let (mut now, mut out) = (0u64, Vec::new());
    while out.len() < 12 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => out.push((now, p.data[15])),
            None => now = cx.wake_at.expect("tbf asks to be woken"),
        }
    }
    // The sequence traced in `quanta_1500_and_3000_share_the_link_1_to_2`.
    let hosts: Vec<u8> = out.iter().map(|&(_, h)| h).collect();
    assert_eq!(hosts, [1, 2, 2, 2, 1, 1, 2, 2, 2, 1, 2, 2]);
    // 1 Mbit/s = 125 B/ms, 1000-byte packets, a 1600-byte bucket full at t = 0: the first leaves at 0
    // (600 left), the second when 400 more bytes have accrued (3.2 ms), then one per 8 ms: the 12th at
    // 3.2 + 10 × 8 = 83.2 ms.
    let last = out.last().unwrap().0;
    assert_eq!(last, 83_200_000);
    // 40 in, 12 out: 28 counted in DRR, whether in a class queue or kept by peek.
    let s = tc(&mut e, "-s qdisc show dev eth0 handle 2:");
    assert!(s.contains(" backlog 28000b 28p requeues 0\n"), "{s}");
    let s = tc(&mut e, "-s class show dev eth0");
    let sent: u64 = s
        .lines()
        .filter_map(|l| l.strip_prefix(" Sent "))
        .map(|l| l.split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // Class counters count a packet when DRR hands it out, peeked ones included: at least the 12 sent.
    assert!(sent >= 12_000, "{s}");
}

#[test]
fn a_shaped_class_is_not_charged_for_a_packet_its_shaper_holds_back() {
    // DRR over TBF children. `drr_dequeue` asks the head class's child to `peek`; the kernel's TBF peeks
    // with `qdisc_peek_dequeued`, which runs `tbf_dequeue` — a packet the tokens do not allow yet is not
    // shown (NULL, the watchdog armed), so DRR charges no deficit and returns nothing
    // (`qdisc_warn_nonwc`). Only a packet the bucket lets go is charged, and then it does leave.
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    for l in [
        "qdisc add dev eth0 root handle 1: drr",
        "class add dev eth0 parent 1: classid 1:1 drr quantum 3000",
        "qdisc add dev eth0 parent 1:1 handle 10: tbf rate 1mbit burst 1600 limit 100000",
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip src 10.0.0.1/32 flowid 1:1",
    ] {
        tc(&mut e, l);
    }
    for i in 0..3u64 {
        assert_eq!(enqueue(&mut e, udp(1, 1000, i)), Verdict::Success);
    }
    let drr = |e: &Engine| {
        let dev = e.device("eth0").unwrap();
        let q = dev.root().q.classes().unwrap();
        q.walk(0)
            .into_iter()
            .find(|c| c.classid.0 == 0x0001_0001)
            .map(|c| c.xstats)
            .unwrap()
    };
    let deficit = |e: &Engine| match drr(e) {
        Some(tclab_core::qdisc::Xstats::Drr(x)) => x.deficit,
        other => panic!("no DRR xstats: {other:?}"),
    };
    let dev = e.device_mut("eth0").unwrap();
    // t = 0: the bucket is full (1600 bytes): the first packet goes, charged 1000 of the 3000 quantum.
    let mut cx = Cx::new(0);
    assert_eq!(dev.dequeue(&mut cx).map(|p| p.tag), Some(0));
    assert_eq!(deficit(&e), 2000);
    // Still t = 0: 600 bytes of tokens, the next 1000-byte packet must wait 3.2 ms. Nothing leaves,
    // the deficit stays 2000 (today's bug charged it: 1000), and TBF asks to be woken then.
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    assert_eq!(dev.dequeue(&mut cx).map(|p| p.tag), None);
    assert_eq!(cx.wake_at, Some(3_200_000));
    assert_eq!(
        deficit(&e),
        2000,
        "no deficit charged for a packet that did not leave"
    );
    // At the wake-up the packet leaves and is charged once.
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(3_200_000);
    assert_eq!(dev.dequeue(&mut cx).map(|p| p.tag), Some(1));
    assert_eq!(deficit(&e), 1000);
    // 3 in, 2 out: one packet still counted in the qdiscs, none lost between peek and dequeue.
    let s = tc(&mut e, "-s qdisc show dev eth0");
    assert!(s.contains("qdisc drr 1: root refcnt 2 \n Sent 2000 bytes 2 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 1000b 1p"), "{s}");
    assert!(
        s.contains("qdisc tbf 10: parent 1:1 rate 1Mbit burst 1600b lat"),
        "{s}"
    );
}
