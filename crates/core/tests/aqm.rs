//! CoDel and fq_codel in virtual time, against expectations derived by hand from RFC 8289/8290 and the
//! kernel's `include/net/codel_impl.h` and `net/sched/sch_fq_codel.c` (Linux 6.12).

use tclab_core::engine::Flags;
use tclab_core::qdisc::codel::CodelOptions;
use tclab_core::qdisc::fq_codel::FqCodelOptions;
use tclab_core::qdisc::{Cx, DropReason, QdiscOptions, Verdict};
use tclab_core::{Engine, Handle, Packet};

const MS: u64 = 1_000_000;

/// A UDP/IPv4 packet of `len` wire bytes from 10.0.0.`host`:`sport`, ECN field `ecn`.
fn udp(host: u8, sport: u16, len: u32, tag: u64, ecn: u8) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([10, 0, 0, host], sport, [10, 0, 1, 1], 5001, ecn, len)
    }
}

fn engine_with(opts: QdiscOptions) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&opts),
        Flags::ADD,
        0,
    )
    .unwrap();
    e
}

/// 60 packets queued at t = 0 and drained one every 10 ms (a 1.2 Mbit/s link for 1500-byte packets):
/// the k-th packet out waited 10·k ms. CoDel (target 5 ms, interval 100 ms):
/// - at 10 ms the sojourn is above target for the first time: `first_above_time` = 10 + 100 = 110 ms;
/// - at 110 ms `now > first_above_time` is not yet true (strictly after); at 120 ms it is: first drop,
///   count 1, next drop at 120 + 100 = 220 ms;
/// - each later drop raises count and schedules the next at `drop_next + interval · rec_inv_sqrt`, where
///   rec_inv_sqrt follows one Newton step per count (`x ← x/2 · (3 − count·x²)`, from x = 1): count 2 →
///   0.5, count 3 → 0.5625, count 4 → 0.4878. So drops fall at the first 10-ms dequeue on or after 220,
///   270 (220 + 50), 326.25 (270 + 56.25) and 375.0 (326.25 + 48.78) ms: 220, 270, 330, 380.
#[test]
fn codel_drops_on_the_control_laws_schedule() {
    let mut e = engine_with(QdiscOptions::Codel(CodelOptions::default()));
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..60 {
        let mut cx = Cx::new(0);
        assert_eq!(
            dev.enqueue(udp(1, 1000, 1500, i, 0), &mut cx),
            Verdict::Success
        );
    }
    let mut drop_times = Vec::new();
    for k in 0..45u64 {
        let mut cx = Cx::new(k * 10 * MS);
        let out = dev.dequeue(&mut cx);
        assert!(out.is_some());
        for d in cx.drops.iter() {
            assert_eq!(d.reason, DropReason::Aqm);
            assert!(!d.arriving);
            drop_times.push(k * 10);
        }
    }
    assert_eq!(
        &drop_times[..5],
        &[120, 220, 270, 330, 380],
        "{drop_times:?}"
    );
    // tc -s: the drops are counted, and CoDel is in its dropping state.
    let q = &dev.qdiscs()[0];
    assert_eq!(q.stats.drops as usize, drop_times.len());
    assert_eq!(q.stats.qlen as usize + 45 + drop_times.len(), 60);
}

/// With `ecn`, an ECT packet is marked CE instead of dropped (and its header checksum kept valid);
/// a Not-ECT packet is still dropped.
#[test]
fn codel_marks_ect_packets_instead_of_dropping() {
    let mut e = engine_with(QdiscOptions::Codel(CodelOptions {
        ecn: Some(true),
        ..Default::default()
    }));
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..40 {
        let mut cx = Cx::new(0);
        // ECT(0) for even tags, Not-ECT for odd ones.
        dev.enqueue(
            udp(1, 1000, 1500, i, if i % 2 == 0 { 2 } else { 0 }),
            &mut cx,
        );
    }
    let (mut marked, mut dropped) = (Vec::new(), Vec::new());
    for k in 0..25u64 {
        let mut cx = Cx::new(k * 10 * MS);
        if let Some(p) = dev.dequeue(&mut cx) {
            if p.data[1] & 3 == 3 {
                marked.push(p.tag);
            }
        }
        dropped.extend(cx.drops.iter().map(|d| d.pkt.tag));
    }
    assert!(!marked.is_empty(), "ECT packets are marked");
    assert!(marked.iter().all(|t| t % 2 == 0));
    assert!(
        dropped.iter().all(|t| t % 2 == 1),
        "only Not-ECT packets are dropped: {dropped:?}"
    );
}

/// RFC 8290's sparse flow: with a bulk flow's 200 packets queued, a new flow's single packet waits for at
/// most what the bulk flow may send before it is demoted to the old list: it arrived as a new flow with a
/// deficit of one quantum (1514 bytes); the deficit is checked before each packet, so it sends packet 0
/// (deficit 14 left) and packet 1 (−1486), then goes to the old list and the ping, a new flow, is next.
#[test]
fn fq_codel_serves_a_sparse_flow_first() {
    let mut e = engine_with(QdiscOptions::FqCodel(FqCodelOptions::default()));
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for i in 0..200 {
        dev.enqueue(udp(1, 1000, 1500, i, 0), &mut cx);
    }
    let mut cx = Cx::new(MS);
    assert_eq!(
        dev.dequeue(&mut cx).unwrap().tag,
        0,
        "the bulk flow's first packet"
    );
    dev.enqueue(udp(2, 7, 98, 999, 0), &mut cx);
    let order: Vec<u64> = (0..4).map(|_| dev.dequeue(&mut cx).unwrap().tag).collect();
    assert_eq!(order, vec![1, 999, 2, 3]);
}

/// Two backlogged flows share in bytes, whatever their packet sizes (DRR by quantum): one of 1500-byte
/// packets, one of 500-byte packets, 600 kB each queued; the first 300 kB out are split 50/50 within one
/// quantum.
#[test]
fn fq_codel_shares_bytes_between_flows() {
    let mut e = engine_with(QdiscOptions::FqCodel(FqCodelOptions {
        limit: Some(100_000),
        ..Default::default()
    }));
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for i in 0..400 {
        dev.enqueue(udp(1, 1000, 1500, i, 0), &mut cx);
    }
    for i in 0..1200 {
        dev.enqueue(udp(2, 2000, 500, 10_000 + i, 0), &mut cx);
    }
    let (mut a, mut b) = (0u64, 0u64);
    while a + b < 300_000 {
        let p = dev.dequeue(&mut cx).unwrap();
        if p.tag < 10_000 {
            a += p.len as u64;
        } else {
            b += p.len as u64;
        }
    }
    assert!(a.abs_diff(b) <= 1514, "{a} vs {b}");
}

/// `fq_codel_drop`: over the limit, half of the fattest flow's backlog goes, from its head, and the
/// arriving packet's own flow paying answers `NET_XMIT_CN`. Limit 10: flow A holds 8 × 1000 bytes, flow
/// B 2; A's 9th packet makes 11 > 10 → A (9000 bytes) loses packets from its head until 4500 bytes are
/// gone: 5 packets (tags 0..5), and the verdict is CN.
#[test]
fn fq_codel_drops_half_the_fattest_flow() {
    let mut e = engine_with(QdiscOptions::FqCodel(FqCodelOptions {
        limit: Some(10),
        ..Default::default()
    }));
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for i in 0..8 {
        assert_eq!(
            dev.enqueue(udp(1, 1000, 1000, i, 0), &mut cx),
            Verdict::Success
        );
    }
    for i in 0..2 {
        assert_eq!(
            dev.enqueue(udp(2, 2000, 1000, 100 + i, 0), &mut cx),
            Verdict::Success
        );
    }
    let mut cx = Cx::new(0);
    assert_eq!(dev.enqueue(udp(1, 1000, 1000, 8, 0), &mut cx), Verdict::Cn);
    let gone: Vec<u64> = cx.drops.iter().map(|d| d.pkt.tag).collect();
    assert_eq!(gone, vec![0, 1, 2, 3, 4]);
    assert!(cx
        .drops
        .iter()
        .all(|d| d.reason == DropReason::Overlimit && !d.arriving));
    // Now A holds 4 × 1000 bytes, B 2 × 1000 (6 packets). B's small packets fill the qdisc to 10; the
    // 11th makes A, still the fattest (4000 > 2600 bytes), lose half its backlog (2 packets, tags 5 and 6):
    // B's packet is queued and the answer is success.
    let mut cx = Cx::new(0);
    for i in 0..4 {
        assert_eq!(
            dev.enqueue(udp(2, 2000, 100, 102 + i, 0), &mut cx),
            Verdict::Success
        );
    }
    assert!(cx.drops.is_empty());
    let mut cx = Cx::new(0);
    assert_eq!(
        dev.enqueue(udp(2, 2000, 100, 106, 0), &mut cx),
        Verdict::Success
    );
    let gone: Vec<u64> = cx.drops.iter().map(|d| d.pkt.tag).collect();
    assert_eq!(gone, vec![5, 6]);
    assert_eq!(dev.qdiscs()[0].stats.qlen, 9);
    assert_eq!(dev.qdiscs()[0].stats.drops, 7);
}

/// Under HTB, a dequeue-time drop by the leaf is taken off HTB's own counters too
/// (`qdisc_tree_reduce_backlog`): after everything is drained, HTB holds nothing.
#[test]
fn dequeue_time_drops_reach_the_parents_counters() {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let htb = tclab_core::qdisc::htb::HtbOptions {
        defcls: 0x10,
        ..Default::default()
    };
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Htb(htb)),
        Flags::ADD,
        0,
    )
    .unwrap();
    let rate = tclab_core::units::RateSpec {
        rate: 150_000, // 1.2 Mbit/s: one 1500-byte packet every 10 ms
        ..Default::default()
    };
    let class = tclab_core::qdisc::htb::HtbClassOptions {
        rate,
        ceil: rate,
        buffer: 1_000_000,
        cbuffer: 1_000_000,
        ..Default::default()
    };
    e.modify_class(
        "eth0",
        Handle::new(1, 0),
        Handle::new(1, 0x10),
        &tclab_core::qdisc::ClassOptions::Htb(class),
        Flags::ADD,
        0,
    )
    .unwrap();
    e.modify_qdisc(
        "eth0",
        Handle::new(1, 0x10),
        Handle::new(0x10, 0),
        Some(&QdiscOptions::Codel(CodelOptions::default())),
        Flags::ADD,
        0,
    )
    .unwrap();
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..60 {
        let mut cx = Cx::new(0);
        dev.enqueue(udp(1, 1000, 1500, i, 0), &mut cx);
    }
    let (mut sent, mut dropped) = (0, 0);
    let mut t = 0;
    while sent + dropped < 60 && t < 10_000 * MS {
        let mut cx = Cx::new(t);
        if dev.dequeue(&mut cx).is_some() {
            sent += 1;
        }
        dropped += cx.drops.len();
        t += 10 * MS;
    }
    assert!(dropped > 0);
    assert_eq!(sent + dropped, 60);
    let root = &dev.qdiscs()[0];
    assert_eq!(
        (root.stats.qlen, root.stats.backlog),
        (0, 0),
        "HTB's counters follow"
    );
}
