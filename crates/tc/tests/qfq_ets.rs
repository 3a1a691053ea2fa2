//! QFQ and ETS in virtual time, configured by `tc` lines. Packets name their class through
//! `skb->priority` (major = the qdisc's handle), which both disciplines honour before any filter, or
//! carry a plain priority for ETS's priomap. The driver dequeues back to back. Each expectation is
//! derived by hand in the test that checks it, from `sch_qfq.c` and `sch_ets.c`.

use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn tc(e: &mut Engine, line: &str) -> String {
    let out = run(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

/// eth0, mtu 1500, txqueuelen 100 000 (the default pfifo leaves never overflow), configured by `lines`.
fn device(lines: &[&str]) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 100_000);
    for l in lines {
        tc(&mut e, l);
    }
    e
}

/// A packet of `len` bytes with `skb->priority` = `priority`.
fn pkt(priority: u32, len: u32) -> Packet {
    Packet {
        priority,
        ..Packet::of_len(len)
    }
}

fn enqueue(e: &mut Engine, p: Packet) -> Verdict {
    e.device_mut("eth0").unwrap().enqueue(p, &mut Cx::new(0))
}

/// Dequeue up to `n` packets; the minor number of each one's priority (its class or band).
fn drain(e: &mut Engine, n: usize) -> Vec<u32> {
    let dev = e.device_mut("eth0").unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let Some(p) = dev.dequeue(&mut Cx::new(0)) else {
            break;
        };
        out.push(p.priority & 0xffff);
    }
    out
}

// ---- QFQ ----------------------------------------------------------------------------------------

#[test]
fn qfq_weights_1_2_7_share_bytes_10_20_70() {
    let mut e = device(&[
        "qdisc add dev eth0 root handle 1: qfq",
        "class add dev eth0 parent 1: classid 1:1 qfq weight 1",
        "class add dev eth0 parent 1: classid 1:2 qfq weight 2",
        "class add dev eth0 parent 1: classid 1:3 qfq weight 7",
    ]);
    // All three backlogged for the whole window with 1000-byte packets (lmax = 1514: one packet a
    // turn, since 1514 − 1000 < 1000). 1:1's first, so it is served first.
    for class in 1..=3 {
        for _ in 0..20_000 {
            assert_eq!(
                enqueue(&mut e, pkt(0x0001_0000 | class, 1000)),
                Verdict::Success
            );
        }
    }
    let n = 20_000;
    let out = drain(&mut e, n);
    assert_eq!(out.len(), n);
    // By hand. Each class is alone in its aggregate (different weights), its budget 1514 B, so each
    // turn sends exactly one packet and charges F += 1000/w: class k's m-th packet has finish
    // F = S₀ + m·1000/w_k, and WF²Q+ — sending in finish order among the eligible — keeps every class
    // within one packet of its fluid share P·w_k/10 after P packets. QFQ's approximation: timestamps
    // are rounded down to the group's slot, σ = 2^(25+i) units of 2^-30 B per unit of weight. The
    // groups: w=1: 1514·2^30 >> 25 = 48 448 → group 16, σ = 2^11 B/weight = 2048 B of its own
    // service; w=2: 24 224 → group 15, 1024 B/weight = 2048 B; w=7: 6 921 → group 13, 256 B/weight
    // = 1792 B. An aggregate can thus be served ahead of (or behind) exact WF²Q+ by less than one slot
    // of its own service, at most 2 packets of 1000 B. So at every prefix each class is within
    // 1 + 2 = 3 packets of P·w_k/10.
    let weights = [1i64, 2, 7];
    let mut sent = [0i64; 3];
    let mut worst = 0i64;
    for (i, &c) in out.iter().enumerate() {
        sent[c as usize - 1] += 1;
        let p = i as i64 + 1;
        for k in 0..3 {
            // 10 × (packets − P·w/10), in tenths of a packet.
            let dev = (10 * sent[k] - p * weights[k]).abs();
            worst = worst.max(dev);
            assert!(dev <= 30, "after {p} packets: {sent:?}");
        }
    }
    // Over the window: 2 000, 4 000 and 14 000 packets, each within the same 3 packets: the byte
    // shares are 10 %, 20 %, 70 % to within 0.015 % of the 20 MB sent.
    for k in 0..3 {
        assert!(
            (sent[k] - n as i64 * weights[k] / 10).abs() <= 3,
            "{sent:?}"
        );
    }
    eprintln!(
        "QFQ 1:2:7 worst deviation over every prefix: {} tenths of a packet",
        worst
    );
    // `tc -s class show`: the weights and maxpkt as dumped; bytes are counted at enqueue
    // (`_bstats_update` in `qfq_enqueue`): 20 000 packets each, whatever has left.
    let s = tc(&mut e, "-s class show dev eth0 classid 1:3");
    assert!(
        s.starts_with("class qfq 1:3 root weight 7 maxpkt 1514 \n Sent 20000000 bytes 20000 pkt"),
        "{s}"
    );
    assert!(
        s.contains(&format!(
            " backlog {}b {}p",
            (20_000 - sent[2]) * 1000,
            20_000 - sent[2]
        )),
        "{s}"
    );
}

#[test]
fn qfq_equal_weights_share_one_aggregate_by_drr() {
    // Four classes of weight 10 and maxpkt 1500 share one aggregate (up to 8 a piece): budget
    // 4 × 1500 = 6000, DRR inside with quantum lmax = 1500. 1:1 sends 1500-byte packets, the others
    // 500-byte ones. A class's deficit starts at 1500: 1:1 sends one packet (→ 0 < 1500: +1500, to the
    // tail), each small class sends three (1500 → 0; the next 500 does not fit: +1500, tail). So the
    // aggregate's turns give every class 1500 bytes a round: equal byte shares.
    let mut lines = vec!["qdisc add dev eth0 root handle 1: qfq".to_string()];
    for c in 1..=4 {
        lines.push(format!(
            "class add dev eth0 parent 1: classid 1:{c:x} qfq weight 10 maxpkt 1500"
        ));
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut e = device(&refs);
    for _ in 0..3000 {
        enqueue(&mut e, pkt(0x0001_0001, 1500));
        for c in 2..=4 {
            for _ in 0..3 {
                enqueue(&mut e, pkt(0x0001_0000 | c, 500));
            }
        }
    }
    let out = drain(&mut e, 10 * 1000);
    let mut bytes = [0u64; 4];
    for &c in &out {
        bytes[c as usize - 1] += if c == 1 { 1500 } else { 500 };
    }
    // 10 000 packets are 1000 rounds of 1 + 3·3: 1 500 000 bytes each, exactly.
    assert_eq!(bytes, [1_500_000; 4]);
    assert_eq!(&out[..10], [1, 2, 2, 2, 3, 3, 3, 4, 4, 4]);
}

#[test]
fn qfq_packet_larger_than_maxpkt_moves_the_class_to_a_larger_aggregate() {
    let mut e = device(&[
        "qdisc add dev eth0 root handle 1: qfq",
        "class add dev eth0 parent 1: classid 1:1 qfq weight 5 maxpkt 512",
    ]);
    // qfq_enqueue: lmax (512) < 1000 → qfq_change_agg(weight 5, lmax 1000): queued, not dropped, and
    // the class now shows maxpkt 1000.
    assert_eq!(enqueue(&mut e, pkt(0x0001_0001, 1000)), Verdict::Success);
    let s = tc(&mut e, "class show dev eth0");
    assert_eq!(s, "class qfq 1:1 root weight 5 maxpkt 1000 \n");
    assert_eq!(drain(&mut e, 2), [1]);
}

#[test]
fn qfq_packet_over_64k_after_the_size_table_is_dropped() {
    // tdc 5993 without scapy: a size table with overhead 999 999 999 makes every packet longer than
    // QFQ_MAX_LMAX; qfq_change_agg refuses, the packet is dropped (`qdisc_drop`) and counted.
    let mut e = device(&[
        "qdisc add dev eth0 handle 1: stab mtu 2048 tsize 512 mpu 0 overhead 999999999 linklayer ethernet root qfq",
        "class add dev eth0 parent 1: classid 1:1 qfq weight 100",
        "filter add dev eth0 parent 1: matchall classid 1:1",
    ]);
    for _ in 0..22 {
        assert_eq!(enqueue(&mut e, pkt(0, 60)), Verdict::Drop);
    }
    let s = tc(&mut e, "-s qdisc ls dev eth0");
    assert_eq!(s.matches("dropped 22").count(), 1, "{s}");
    assert!(s.contains("backlog 0b 0p"), "{s}");
    assert!(drain(&mut e, 1).is_empty());
    // The class's maxpkt is unchanged: the move was refused.
    assert!(tc(&mut e, "class show dev eth0").contains("weight 100 maxpkt 1514"));
}

#[test]
fn qfq_refusals_change_nothing() {
    let mut e = device(&[
        "qdisc add dev eth0 root handle 1: qfq",
        "class add dev eth0 parent 1: classid 1:1 qfq weight 10",
    ]);
    let before = tc(&mut e, "class show dev eth0");
    for (line, code, msg) in [
        (
            "class add dev eth0 parent 1: classid 1:2 qfq weight 0",
            2,
            "Error: integer out of range.",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 qfq weight 1025",
            2,
            "Error: integer out of range.",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 qfq maxpkt 511",
            2,
            "Error: integer out of range.",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 qfq maxpkt 65537",
            2,
            "Error: integer out of range.",
        ),
        (
            "class change dev eth0 classid 1:1 qfq weight 2000",
            2,
            "Error: integer out of range.",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 qfq weight x",
            1,
            "Illegal \"weight\"",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 qfq rate 1",
            1,
            "What is \"rate\"?",
        ),
        (
            "qdisc change dev eth0 root handle 1: qfq weight 1",
            1,
            "What is \"weight\"?",
        ),
    ] {
        let out = run(&mut e, line);
        assert_eq!(out.code, code, "{line}: {}", out.stderr);
        assert!(out.stderr.starts_with(msg), "{line}: {}", out.stderr);
    }
    assert_eq!(tc(&mut e, "class show dev eth0"), before);
    // A bound class is busy.
    tc(&mut e, "filter add dev eth0 parent 1: matchall classid 1:1");
    let out = run(&mut e, "class del dev eth0 classid 1:1");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (2, "Error: sch_qfq: QFQ class in use.\n")
    );
}

// ---- ETS ----------------------------------------------------------------------------------------

#[test]
fn ets_strict_band_first_then_quanta_3000_1000_share_3_to_1() {
    let mut e =
        device(&["qdisc add dev eth0 root handle 1: ets bands 3 strict 1 quanta 3000 1000"]);
    // Band 1 (1:2) and band 2 (1:3) backlogged with 1000-byte packets, 1:2's first.
    for _ in 0..4000 {
        enqueue(&mut e, pkt(0x0001_0002, 1000));
    }
    for _ in 0..4000 {
        enqueue(&mut e, pkt(0x0001_0003, 1000));
    }
    // DRR by hand: 1:2 joins with deficit 3000 and sends three (→ 0), earns 3000 and yields; 1:3 sends
    // one (1000 → 0), earns 1000, yields; … exactly 2,2,2,3 repeating.
    let out = drain(&mut e, 400);
    for (i, c) in out.iter().enumerate() {
        assert_eq!(*c, if i % 4 == 3 { 3 } else { 2 }, "packet {i}");
    }
    // The strict band (1:1) arrives in the middle: its packets leave before anything else, all of
    // them, whatever the sharing bands' deficits.
    for _ in 0..50 {
        enqueue(&mut e, pkt(0x0001_0001, 1500));
    }
    let out = drain(&mut e, 50);
    assert_eq!(out, [1; 50]);
    // Then the round robin resumes where it was (1:2's turn, deficit 3000): 2,2,2,3 again. Over
    // 4000 more packets: bytes 3:1 exactly (3 000 000 and 1 000 000).
    let out = drain(&mut e, 4000);
    let b2 = out.iter().filter(|&&c| c == 2).count() * 1000;
    let b3 = out.iter().filter(|&&c| c == 3).count() * 1000;
    assert_eq!((b2, b3), (3_000_000, 1_000_000));
    let s = tc(&mut e, "-s class show dev eth0 classid 1:1");
    assert_eq!(
        s,
        "class ets 1:1 root \n Sent 75000 bytes 50 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
    );
}

#[test]
fn ets_priomap_and_the_default_band() {
    // bands 4 strict 2, priomap 1 0 (priority 0 → band 1, priority 1 → band 0); every other priority
    // defaults to the last band, 3 (sch_ets fills the map with nbands − 1).
    let mut e = device(&["qdisc add dev eth0 root handle 1: ets bands 4 strict 2 priomap 1 0"]);
    let s = tc(&mut e, "qdisc show dev eth0");
    assert!(
        s.contains("bands 4 strict 2 quanta 1514 1514 priomap 1 0 3 3 3 3 3 3 3 3 3 3 3 3 3 3 \n"),
        "{s}"
    );
    for (priority, band) in [
        (0u32, 1u32),
        (1, 0),
        (6, 3),
        (17, 0),          // only the low four bits: 17 & 15 = 1
        (0x0001_0003, 2), // names class 1:3 = band 2
        (0x0001_0009, 1), // 1:9 does not exist: the band of priority 0
        (0x0005_0001, 1), // another qdisc's major counts as priority 0
    ] {
        let mut e2 =
            device(&["qdisc add dev eth0 root handle 1: ets bands 4 strict 2 priomap 1 0"]);
        assert_eq!(enqueue(&mut e2, pkt(priority, 100)), Verdict::Success);
        let s = tc(
            &mut e2,
            &format!("-s class show dev eth0 classid 1:{}", band + 1),
        );
        assert!(s.contains("backlog 100b 1p"), "priority {priority:#x}: {s}");
        enqueue(&mut e, pkt(priority, 100));
    }
    // Dequeue order on the shared device: strict band 0 first (priorities 1, 17), then strict band 1
    // (0, 1:9, 5:1), then the sharing bands 2 and 3 in the order they became busy (6 → 3, then 1:3 →
    // 2): 3 before 2.
    let out: Vec<u32> = drain(&mut e, 10);
    assert_eq!(out, [1, 17, 0, 9, 1, 6, 3]);
}

#[test]
fn ets_class_change_and_refusals() {
    let mut e =
        device(&["qdisc add dev eth0 root handle 1: ets bands 3 strict 1 quanta 1000 2000"]);
    tc(&mut e, "class change dev eth0 classid 1:2 ets quantum 1500");
    tc(&mut e, "class change dev eth0 classid 1:1 ets");
    let shown = tc(&mut e, "qdisc show dev eth0");
    assert!(
        shown.contains("bands 3 strict 1 quanta 1500 2000 priomap"),
        "{shown}"
    );
    for (line, code, msg) in [
        ("class change dev eth0 classid 1:1 ets quantum 1500", 2, "Error: Strict bands do not have a configurable quantum."),
        ("class change dev eth0 classid 1:2 ets quantum 0", 1, "\"quanta\" must be > 0"),
        ("class add dev eth0 parent 1: classid 1:4 ets quantum 1500", 2, "Error: Fine-grained class addition and removal is not supported."),
        ("class del dev eth0 classid 1:2", 2, "RTNETLINK answers: Operation not supported"),
        ("qdisc change dev eth0 root handle 1: ets bands 17", 1, "The number of \"bands\" must be <= 16"),
        ("qdisc change dev eth0 root handle 1: ets strict 4 bands 3", 1, "Not enough total bands"),
        ("qdisc change dev eth0 root handle 1: ets bands 2 quanta 1 2 3", 1, "Not enough total bands"),
        ("qdisc change dev eth0 root handle 1: ets quanta 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", 2, "Error: sch_ets: Invalid number of bands."),
        ("qdisc change dev eth0 root handle 1: ets quanta 1000 0", 1, "\"quanta\" must be > 0"),
        ("qdisc change dev eth0 root handle 1: ets bands 2 priomap 0 2", 1, "\"priomap\" element is out of bounds"),
        ("filter add dev eth0 parent 1:2 matchall classid 1:2", 2, "Error: ETS classid must be zero."),
    ] {
        let out = run(&mut e, line);
        assert_eq!(out.code, code, "{line}: {}", out.stderr);
        assert!(out.stderr.starts_with(msg), "{line}: {}", out.stderr);
        assert_eq!(tc(&mut e, "qdisc show dev eth0"), shown, "{line} changed something");
    }
}

#[test]
fn ets_change_removes_bands_and_turns_strict_bands_into_sharing_ones() {
    let mut e = device(&["qdisc add dev eth0 root handle 1: ets bands 4 strict 2"]);
    for band in 1..=4 {
        for _ in 0..3 {
            enqueue(&mut e, pkt(0x0001_0000 | band, 1000));
        }
    }
    // bands 3 strict 0: band 3 (1:4) is purged — 3 packets off the qdisc's counters; bands 0 and 1 stop
    // being strict and join the active list behind band 2 (sch_ets adds them in index order), all three
    // with the default quantum 1514 — one 1000-byte packet a turn.
    tc(
        &mut e,
        "qdisc change dev eth0 root handle 1: ets bands 3 strict 0",
    );
    let s = tc(&mut e, "-s qdisc show dev eth0");
    assert!(
        s.contains("bands 3 quanta 1514 1514 1514 priomap 2 2"),
        "{s}"
    );
    assert!(s.contains("backlog 9000b 9p"), "{s}");
    assert_eq!(drain(&mut e, 10), [3, 1, 2, 3, 3, 1, 1, 2, 2]);
}

#[test]
fn qfq_stays_work_conserving_through_class_churn() {
    // A deterministic mix of enqueues (lengths up to 3000 B: some beyond their class's maxpkt),
    // dequeues, weight/maxpkt changes, deletions and re-creations over 16 classes. QFQ is work
    // conserving with pfifo children: whenever the qdisc counts packets, a dequeue must return one, and
    // the qdisc's backlog must equal what went in minus what came out or was purged.
    let mut e = device(&["qdisc add dev eth0 root handle 1: qfq"]);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut exists = [false; 17];
    for step in 0..40_000 {
        let c = 1 + rnd(16) as u32;
        match rnd(10) {
            0..=4 => {
                let v = enqueue(&mut e, pkt(0x0001_0000 | c, 64 + rnd(2937) as u32));
                assert_eq!(
                    v == Verdict::Success,
                    exists[c as usize],
                    "step {step}: {v:?}"
                );
            }
            5..=7 => {
                let qlen = e.device("eth0").unwrap().root().q.stats().qlen;
                let got = drain(&mut e, 1);
                assert_eq!(got.len(), (qlen > 0) as usize, "step {step}: qlen {qlen}");
            }
            8 => {
                let line = format!(
                    "class replace dev eth0 parent 1: classid 1:{c:x} qfq weight {} maxpkt {}",
                    1 + rnd(64),
                    512 + rnd(4000)
                );
                tc(&mut e, &line);
                exists[c as usize] = true;
            }
            _ => {
                if exists[c as usize] {
                    tc(&mut e, &format!("class del dev eth0 classid 1:{c:x}"));
                    exists[c as usize] = false;
                }
            }
        }
    }
    // Everything left drains, and then the counters are zero.
    let left = e.device("eth0").unwrap().root().q.stats().qlen as usize;
    assert_eq!(drain(&mut e, left + 1).len(), left);
    let s = e.device("eth0").unwrap().root().q.stats();
    assert_eq!((s.qlen, s.backlog), (0, 0));
}
