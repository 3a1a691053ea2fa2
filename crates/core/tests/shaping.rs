//! Shaping behaviour in virtual time, with expectations derived by hand from the algorithms (the derivation
//! is in each test). A tiny driver plays the part of the NIC: it dequeues whenever its link is free, or when
//! the qdisc asked to be woken, exactly like the kernel's `qdisc_run` plus the watchdog timer.

use tclab_core::engine::Flags;
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
use tclab_core::qdisc::tbf::TbfOptions;
use tclab_core::qdisc::{ClassOptions, Cx, QdiscOptions};
use tclab_core::units::RateSpec;
use tclab_core::{Engine, Handle, Packet, NSEC_PER_SEC};

const MS: u64 = 1_000_000;

/// A source: packets of `len` bytes with `priority`, one every `gap` ns from `start` (gap 0: all at once,
/// `count` of them).
struct Source {
    tag: u64,
    len: u32,
    priority: u32,
    gap: u64,
    next: u64,
    left: u64,
}

/// Run until `end`; the link sends `link_bps` bytes/s (0 = infinitely fast). Returns (time, tag, len).
fn drive(
    engine: &mut Engine,
    mut sources: Vec<Source>,
    link_bps: u64,
    end: u64,
) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::new();
    let (mut link_free, mut wake) = (0u64, None::<u64>);
    let mut now = 0u64;
    loop {
        let arrivals = sources.iter().filter(|s| s.left > 0).map(|s| s.next).min();
        let mut t = arrivals.unwrap_or(u64::MAX);
        if link_free > now {
            t = t.min(link_free);
        } else if let Some(w) = wake {
            t = t.min(w);
        } else {
            t = t.min(now);
        }
        if t >= end {
            break;
        }
        now = t;
        let dev = engine.device_mut("eth0").unwrap();
        for s in sources.iter_mut().filter(|s| s.left > 0 && s.next == now) {
            let mut cx = Cx::new(now);
            dev.enqueue(
                Packet {
                    tag: s.tag,
                    priority: s.priority,
                    ..Packet::of_len(s.len)
                },
                &mut cx,
            );
            s.left -= 1;
            s.next += s.gap;
        }
        if now >= link_free {
            let mut cx = Cx::new(now);
            match dev.dequeue(&mut cx) {
                Some(p) => {
                    out.push((now, p.tag, p.len));
                    // A link of rate 0 is infinitely fast.
                    link_free = now
                        + (p.len as u64 * NSEC_PER_SEC)
                            .checked_div(link_bps)
                            .unwrap_or(0);
                    wake = None;
                    if link_bps == 0 {
                        continue;
                    }
                }
                None => {
                    wake = cx.wake_at;
                    if wake.is_none() && arrivals.is_none() {
                        break;
                    }
                    if wake.is_none() {
                        link_free = 0;
                    }
                }
            }
        }
        if link_free <= now && wake.is_some_and(|w| w <= now) {
            wake = Some(now + 1);
        }
    }
    out
}

fn rate(bits: u64) -> RateSpec {
    RateSpec {
        rate: bits / 8,
        ..Default::default()
    }
}

/// tc's burst in ticks for `bytes` at `bps` bytes/s (exact enough for tests).
fn ticks(bytes: u64, bps: u64) -> u32 {
    ((bytes as u128 * NSEC_PER_SEC as u128 / bps as u128) >> 6) as u32
}

fn engine_with(root: QdiscOptions) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&root),
        Flags::ADD,
        0,
    )
    .unwrap();
    e
}

fn tbf(rate_bits: u64, burst: u32, peak_bits: u64, mtu: u32) -> QdiscOptions {
    QdiscOptions::Tbf(TbfOptions {
        rate: rate(rate_bits),
        peakrate: if peak_bits > 0 {
            rate(peak_bits)
        } else {
            RateSpec::default()
        },
        limit: 1_000_000,
        buffer: 0,
        mtu: 0,
        burst: Some(burst),
        pburst: (peak_bits > 0).then_some(mtu),
    })
}

fn backlog(tag: u64, len: u32, count: u64, priority: u32) -> Source {
    Source {
        tag,
        len,
        priority,
        gap: 0,
        next: 0,
        left: count,
    }
}

#[test]
fn tbf_starts_with_a_full_bucket_then_sends_at_exactly_rate() {
    // 1 Mbit/s = 125000 B/s, burst 10000 B: the first 10 packets of 1000 B leave at t=0; after that each
    // packet waits for 1000 B of tokens = 8 ms. Packet k (k >= 10) leaves at (k - 9) * 8 ms.
    let mut e = engine_with(tbf(1_000_000, 10_000, 0, 0));
    let d = drive(&mut e, vec![backlog(0, 1000, 100, 0)], 0, 10 * NSEC_PER_SEC);
    assert_eq!(d.len(), 100);
    for (k, (t, _, _)) in d.iter().enumerate() {
        let want = if k < 10 { 0 } else { (k as u64 - 9) * 8 * MS };
        assert!(
            t.abs_diff(want) <= 2,
            "packet {k} left at {t} ns, expected {want} ns"
        );
    }
    let s = e.device("eth0").unwrap().root().q.stats();
    assert_eq!((s.packets, s.bytes, s.qlen), (100, 100_000, 0));
    assert!(
        s.overlimits >= 90,
        "every wait for tokens counts an overlimit: {}",
        s.overlimits
    );
}

#[test]
fn tbf_peakrate_bounds_the_burst() {
    // rate 1 Mbit, burst 10000 B, peakrate 2 Mbit (250000 B/s) with a 1000-byte peak bucket: even with the
    // main bucket full, packets are spaced by 1000 B / 250000 B/s = 4 ms (the first leaves at once).
    let mut e = engine_with(tbf(1_000_000, 10_000, 2_000_000, 1000));
    let d = drive(&mut e, vec![backlog(0, 1000, 30, 0)], 0, 10 * NSEC_PER_SEC);
    for w in d.windows(2) {
        assert!(
            w[1].0 - w[0].0 >= 4 * MS - 2,
            "departures {} and {} closer than the peak rate allows",
            w[0].0,
            w[1].0
        );
    }
    // Long-run rate is still 1 Mbit: 30 packets = 30000 B <= 10000 + 125000 B/s * t  →  t >= 160 ms.
    assert!(d.last().unwrap().0 >= 160 * MS - 2);
}

#[test]
fn tbf_drops_packets_larger_than_the_burst() {
    // max_size = burst: a 3000-byte packet can never collect enough tokens in a 2000-byte bucket.
    let mut e = engine_with(tbf(1_000_000, 2000, 0, 0));
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    assert_eq!(
        dev.enqueue(Packet::of_len(3000), &mut cx),
        tclab_core::qdisc::Verdict::Drop
    );
    assert_eq!(dev.root().q.stats().drops, 1);
}

fn htb_class(
    e: &mut Engine,
    parent: Handle,
    classid: Handle,
    rate_bits: u64,
    ceil_bits: u64,
    prio: u32,
    quantum: u32,
) {
    let (r, c) = (rate_bits / 8, ceil_bits / 8);
    let o = HtbClassOptions {
        rate: rate(rate_bits),
        ceil: rate(ceil_bits),
        buffer: ticks(r / 1_000_000_000 + 1600, r),
        cbuffer: ticks(c / 1_000_000_000 + 1600, c),
        quantum,
        prio,
        level: 0,
    };
    e.modify_class(
        "eth0",
        parent,
        classid,
        &ClassOptions::Htb(o),
        Flags::ADD,
        0,
    )
    .unwrap();
}

fn htb_root(defcls: u32) -> QdiscOptions {
    QdiscOptions::Htb(HtbOptions {
        defcls,
        version: 3,
        ..Default::default()
    })
}

/// Throughput in kbit/s of each tag over [from, to).
fn kbits(d: &[(u64, u64, u32)], tag: u64, from: u64, to: u64) -> f64 {
    let bytes: u64 = d
        .iter()
        .filter(|x| x.1 == tag && x.0 >= from && x.0 < to)
        .map(|x| x.2 as u64)
        .sum();
    bytes as f64 * 8.0 / ((to - from) as f64 / 1e9) / 1000.0
}

fn two_leaf_tree(a: (u64, u64, u32, u32), b: (u64, u64, u32, u32)) -> Engine {
    let mut e = engine_with(htb_root(0));
    let (q, p) = (Handle::new(1, 0), Handle::new(1, 1));
    htb_class(&mut e, q, p, 1_000_000, 1_000_000, 0, 0);
    htb_class(&mut e, p, Handle::new(1, 0x10), a.0, a.1, a.2, a.3);
    htb_class(&mut e, p, Handle::new(1, 0x20), b.0, b.1, b.2, b.3);
    e
}

#[test]
fn htb_borrowing_goes_to_the_higher_priority() {
    // Parent 1 Mbit; A and B each guaranteed 200 kbit, may borrow up to 1 Mbit; A has prio 0, B prio 1.
    // Both backlogged on a fast link: each gets its rate; the 600 kbit of excess is lent to the
    // lowest-numbered priority first, so A ≈ 800 kbit and B ≈ 200 kbit (hand-derived from HTB's rules).
    let mut e = two_leaf_tree((200_000, 1_000_000, 0, 0), (200_000, 1_000_000, 1, 0));
    let srcs = vec![
        backlog(1, 1000, 5000, 0x10010),
        backlog(2, 1000, 5000, 0x10020),
    ];
    let d = drive(&mut e, srcs, 100_000_000, 10 * NSEC_PER_SEC);
    let (a, b) = (
        kbits(&d, 1, NSEC_PER_SEC, 10 * NSEC_PER_SEC),
        kbits(&d, 2, NSEC_PER_SEC, 10 * NSEC_PER_SEC),
    );
    assert!((a - 800.0).abs() < 16.0, "A got {a:.1} kbit, expected 800");
    assert!((b - 200.0).abs() < 8.0, "B got {b:.1} kbit, expected 200");
}

#[test]
fn htb_same_priority_splits_excess_by_quantum() {
    // Same priority, rates 100 kbit each, explicit quanta 3000 and 1000 bytes: the 800 kbit of excess is
    // served by DRR in the parent's feed, 3:1. A ≈ 100 + 600 = 700 kbit, B ≈ 100 + 200 = 300 kbit.
    let mut e = two_leaf_tree((100_000, 1_000_000, 0, 3000), (100_000, 1_000_000, 0, 1000));
    let srcs = vec![
        backlog(1, 1000, 5000, 0x10010),
        backlog(2, 1000, 5000, 0x10020),
    ];
    let d = drive(&mut e, srcs, 100_000_000, 10 * NSEC_PER_SEC);
    let (a, b) = (
        kbits(&d, 1, NSEC_PER_SEC, 10 * NSEC_PER_SEC),
        kbits(&d, 2, NSEC_PER_SEC, 10 * NSEC_PER_SEC),
    );
    assert!(
        (a + b - 1000.0).abs() < 15.0,
        "the parent's 1 Mbit is used: {a:.1} + {b:.1}"
    );
    assert!(
        (a - 700.0).abs() < 35.0 && (b - 300.0).abs() < 35.0,
        "A {a:.1} kbit, B {b:.1} kbit; expected 700/300"
    );
}

#[test]
fn htb_class_at_ceil_never_exceeds_it() {
    // A class with rate 100 kbit, ceil 300 kbit under a 10 Mbit parent, on a 100 Mbit link: over any window
    // longer than the cburst (1600 B), bytes sent <= ceil * t + cburst + one packet: HTB lets a packet go
    // while ctokens >= 0 and charges it afterwards, so the bucket can dip by one packet (500 B) below zero.
    let mut e = engine_with(htb_root(0x10));
    htb_class(
        &mut e,
        Handle::new(1, 0),
        Handle::new(1, 1),
        10_000_000,
        10_000_000,
        0,
        0,
    );
    htb_class(
        &mut e,
        Handle::new(1, 1),
        Handle::new(1, 0x10),
        100_000,
        300_000,
        0,
        0,
    );
    let d = drive(
        &mut e,
        vec![backlog(1, 500, 20_000, 0)],
        100_000_000,
        5 * NSEC_PER_SEC,
    );
    let ceil_bps = 300_000.0 / 8.0;
    for i in 0..d.len() {
        let mut bytes = 0u64;
        for j in i..d.len() {
            bytes += d[j].2 as u64;
            let t = (d[j].0 - d[i].0) as f64 / 1e9;
            assert!(
                bytes as f64 <= ceil_bps * t + 1600.0 + 500.0 + 1.0,
                "window {i}..{j}: {bytes} B in {t} s"
            );
        }
        if i > 200 {
            break;
        }
    }
    let total = kbits(&d, 1, NSEC_PER_SEC, 5 * NSEC_PER_SEC);
    assert!(
        (total - 300.0).abs() < 6.0,
        "long-run rate {total:.1} kbit, expected the ceil, 300"
    );
}

#[test]
fn htb_default_class_and_direct_queue() {
    // `default 20`: an unclassified packet goes to 1:20. Without a default, it takes the direct queue,
    // which is unshaped and counted in direct_packets_stat.
    let mut e = engine_with(htb_root(0x20));
    htb_class(
        &mut e,
        Handle::new(1, 0),
        Handle::new(1, 0x20),
        8_000,
        8_000,
        0,
        0,
    );
    let mut cx = Cx::new(0);
    e.device_mut("eth0")
        .unwrap()
        .enqueue(Packet::of_len(100), &mut cx);
    let classes = e.device("eth0").unwrap().classes(0);
    assert_eq!(classes[0].stats.qlen, 1, "queued in 1:20");

    let mut e = engine_with(htb_root(0));
    htb_class(
        &mut e,
        Handle::new(1, 0),
        Handle::new(1, 0x20),
        8_000,
        8_000,
        0,
        0,
    );
    let d = drive(&mut e, vec![backlog(7, 1500, 50, 0)], 0, NSEC_PER_SEC);
    assert_eq!(
        d.len(),
        50,
        "the direct queue is not shaped: all 50 leave at once"
    );
    assert!(d.iter().all(|x| x.0 == 0));
    match e.device("eth0").unwrap().root().q.dump() {
        QdiscOptions::Htb(h) => assert_eq!(h.direct_pkts, 50),
        _ => unreachable!(),
    }
}

#[test]
fn a_new_txqueuelen_resizes_the_default_pfifo_fast() {
    // `ip link set dev eth0 txqueuelen 2` on a NIC with its default pfifo_fast: the third queued packet is
    // dropped (dev_qdisc_change_tx_queue_len). A pfifo added by tc keeps the limit it was given.
    use tclab_core::engine::{DefaultRoot, Device};
    use tclab_core::qdisc::{Cx, Verdict};
    let mut d = Device::with_default("eth0", 1500, 1000, DefaultRoot::PfifoFast);
    d.set_txqueuelen(2);
    let mut cx = Cx::new(0);
    let verdicts: Vec<Verdict> = (0..3)
        .map(|_| d.enqueue(tclab_core::Packet::of_len(100), &mut cx))
        .collect();
    assert_eq!(
        verdicts,
        vec![Verdict::Success, Verdict::Success, Verdict::Drop]
    );
}

/// HTB's wait queue packs a class's arena index into the low 16 bits of its heap entry
/// (`htb.rs`, `WaitQueue`, 8959b3e): sound only while one HTB holds at most 65 536 classes (minors
/// 0 to ffff, `htb_change_class` refusing only classid 0 and another major) and a deleted class's
/// slot is taken again by the next class added. The widest tree: 1:0 to 1:ffff under the root (the
/// last one added takes the arena's last slot, 0xffff), then 1:7 deleted and added again. Two of them,
/// 1:ffff and the new 1:7, shaped at 80 kbit/s (rate = ceil, a burst of 1 600 bytes) from backlogs of
/// 1 000-byte packets on an infinitely fast link: after its burst each waits in the wait queue
/// before every packet, and must come out of it each time, so each sends its rate, 80 kbit/s, from
/// 1 s to 4 s (a class whose entry named another index would wait for ever, or be woken as another).
#[test]
fn htb_widest_tree_classes_in_the_last_slots_leave_the_wait_queue() {
    let mut e = engine_with(htb_root(0));
    let q = Handle::new(1, 0);
    for minor in 0..=0xffff {
        htb_class(&mut e, q, Handle::new(1, minor), 80_000, 80_000, 0, 0);
    }
    e.delete_class("eth0", q, Handle::new(1, 7)).unwrap();
    htb_class(&mut e, q, Handle::new(1, 7), 80_000, 80_000, 0, 0);
    let sources = vec![
        backlog(1, 1000, 1000, (1 << 16) | 0xffff),
        backlog(2, 1000, 1000, (1 << 16) | 7),
    ];
    let d = drive(&mut e, sources, 0, 4 * NSEC_PER_SEC);
    for tag in [1, 2] {
        let k = kbits(&d, tag, NSEC_PER_SEC, 4 * NSEC_PER_SEC);
        assert!((k - 80.0).abs() < 8.0, "tag {tag}: {k} kbit/s");
    }
}
