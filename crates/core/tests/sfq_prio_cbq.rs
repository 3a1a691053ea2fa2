//! SFQ, PRIO and CBQ in virtual time, with hand-built packets. Each test says where its expectation comes
//! from. The driver plays the NIC: it dequeues whenever its link is free, or when the qdisc asked to be
//! woken (the kernel's watchdog), and timestamps what leaves.

use tclab_core::engine::Flags;
use tclab_core::qdisc::cbq::{CbqLss, CbqOptions, CbqRate, CbqWrr, LSS_AVPKT, LSS_BOUNDED};
use tclab_core::qdisc::cbq::{LSS_EWMA, LSS_FLAGS, LSS_ISOLATED, LSS_MAXIDLE};
use tclab_core::qdisc::pfifo_fast::tos_to_priority;
use tclab_core::qdisc::prio::PrioOptions;
use tclab_core::qdisc::sfq::SfqOptions;
use tclab_core::qdisc::{ClassOptions, Cx, QdiscOptions, Verdict};
use tclab_core::units::RateSpec;
use tclab_core::{Engine, Handle, Packet, NSEC_PER_SEC};

const MS: u64 = 1_000_000;

/// A UDP/IPv4 packet of `len` wire bytes from 10.0.0.`host`:`sport` to 10.0.1.1:5001.
fn udp(host: u8, sport: u16, len: u32, tag: u64) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([10, 0, 0, host], sport, [10, 0, 1, 1], 5001, 0, len)
    }
}

/// One arrival: (time, packet).
type Arrival = (u64, Packet);

/// Feed `arrivals` (sorted by time) to the root of eth0 and dequeue at `link_bps` bytes/s until `end` or
/// until `max_out` packets left. Returns (departure time, packet) and the packets the qdisc refused.
fn drive(
    e: &mut Engine,
    arrivals: Vec<Arrival>,
    link_bps: u64,
    end: u64,
    max_out: usize,
) -> (Vec<(u64, Packet)>, usize) {
    let dev = e.device_mut("eth0").unwrap();
    let mut out = Vec::new();
    let mut refused = 0;
    let mut next = 0usize;
    let (mut now, mut link_free) = (0u64, 0u64);
    while now < end && out.len() < max_out {
        while next < arrivals.len() && arrivals[next].0 <= now {
            let mut cx = Cx::new(now);
            let _: Verdict = dev.enqueue(arrivals[next].1.clone(), &mut cx);
            // Every packet the enqueue dropped: the arrival or, for SFQ, one of the longest flow's.
            refused += cx.drops.len();
            next += 1;
        }
        let mut t = arrivals.get(next).map_or(u64::MAX, |a| a.0);
        if now < link_free {
            t = t.min(link_free);
        } else {
            let mut cx = Cx::new(now);
            match dev.dequeue(&mut cx) {
                Some(p) => {
                    link_free = now + p.len as u64 * NSEC_PER_SEC / link_bps;
                    out.push((now, p));
                    t = t.min(link_free);
                }
                // Nothing now: come back at the shaper's wake-up time (or with the next arrival).
                None => t = t.min(cx.wake_at.unwrap_or(u64::MAX)),
            }
        }
        if t == u64::MAX {
            break;
        }
        now = t.max(now + 1);
    }
    (out, refused)
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

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

/// Periodic arrivals: `count` packets from `make(i)`, one every `gap` ns from `start`.
fn periodic(start: u64, gap: u64, count: u64, make: impl Fn(u64) -> Packet) -> Vec<Arrival> {
    (0..count).map(|i| (start + i * gap, make(i))).collect()
}

fn merge(mut all: Vec<Arrival>) -> Vec<Arrival> {
    all.sort_by_key(|a| a.0);
    all
}

#[test]
fn sfq_gives_backlogged_flows_equal_byte_shares() {
    // Eight flows with packet sizes 100..1500 bytes, each offering twice the link rate: all stay
    // backlogged. SFQ's deficit round robin serves `quantum` bytes per flow per round, so bytes — not
    // packets — come out equal. Over 10 000 departures Jain's index of the byte counts must be ≥ 0.99.
    const FLOWS: u64 = 8;
    let link = 1_250_000; // 10 Mbit/s
    let sfq = SfqOptions {
        limit: 127 * FLOWS as u32,
        ..Default::default()
    };
    let mut e = engine_with(QdiscOptions::Sfq(sfq));
    let mut arrivals = Vec::new();
    for f in 0..FLOWS {
        let len = 100 + 200 * f as u32;
        let gap = len as u64 * NSEC_PER_SEC * FLOWS / (2 * link);
        arrivals.extend(periodic(0, gap, 200_000, |i| {
            udp(f as u8 + 1, 1000 + f as u16, len, f << 32 | i)
        }));
    }
    let (out, _) = drive(&mut e, merge(arrivals), link, 60 * NSEC_PER_SEC, 10_000);
    assert_eq!(out.len(), 10_000);
    let mut bytes = vec![0f64; FLOWS as usize];
    for (_, p) in &out {
        bytes[(p.tag >> 32) as usize] += p.len as f64;
    }
    let j = jain(&bytes);
    assert!(j >= 0.99, "Jain index {j} over byte shares {bytes:?}");
}

#[test]
fn an_sfq_flood_costs_the_other_flows_nothing() {
    // Link: 1000-byte packets at 1 per ms. Flows A and B send one packet every 5 ms (a fifth of the link
    // each); flow C floods at 10 packets per ms. With three active slots served round robin, A and B
    // each get a turn at least every 3 ms < 5 ms, so none of their packets may be lost, and each waits at
    // most for the two other flows' packets ahead of it plus the one on the wire: ≤ 3 ms.
    let link = 1_000_000;
    let mut e = engine_with(QdiscOptions::Sfq(SfqOptions::default()));
    let secs = 5;
    let n = secs * 1000;
    let mut arrivals = periodic(0, 5 * MS, n / 5, |i| udp(1, 1111, 1000, i));
    arrivals.extend(periodic(MS / 3, 5 * MS, n / 5, |i| {
        udp(2, 2222, 1000, 1 << 32 | i)
    }));
    arrivals.extend(periodic(0, MS / 10, n * 10, |i| {
        udp(3, 3333, 1000, 2 << 32 | i)
    }));
    let (out, refused) = drive(
        &mut e,
        merge(arrivals.clone()),
        link,
        (secs + 1) * NSEC_PER_SEC,
        usize::MAX,
    );
    for flow in 0..2u64 {
        let sent: Vec<&Arrival> = arrivals.iter().filter(|a| a.1.tag >> 32 == flow).collect();
        let got: Vec<&(u64, Packet)> = out.iter().filter(|o| o.1.tag >> 32 == flow).collect();
        assert_eq!(
            got.len(),
            sent.len(),
            "flow {flow} lost packets to the flood"
        );
        for (t, p) in got {
            let arrived = sent[(p.tag & 0xffff_ffff) as usize].0;
            assert!(
                t - arrived <= 3 * MS,
                "flow {flow} packet {} waited {} ns",
                p.tag,
                t - arrived
            );
        }
    }
    assert!(refused > 40_000, "the flood pays with drops: {refused}");
}

#[test]
fn sfq_drops_from_the_longest_flow_when_full() {
    // limit 10: flow A queues 8 packets, flow B 2. The 11th packet (B's third) overflows the qdisc;
    // sfq_drop takes the tail of the longest slot — A's last packet (tag 7) — not the arrival.
    for headdrop in [false, true] {
        let mut e = engine_with(QdiscOptions::Sfq(SfqOptions {
            limit: 10,
            headdrop,
            ..Default::default()
        }));
        let dev = e.device_mut("eth0").unwrap();
        let mut cx = Cx::new(0);
        for i in 0..8 {
            dev.enqueue(udp(1, 1, 100, i), &mut cx);
        }
        for i in 0..3 {
            dev.enqueue(udp(2, 2, 100, 100 + i), &mut cx);
        }
        let mut left: Vec<u64> = std::iter::from_fn(|| dev.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        left.sort();
        let dropped = if headdrop { 0 } else { 7 };
        let expected: Vec<u64> = (0..8).filter(|&t| t != dropped).chain(100..103).collect();
        assert_eq!(
            left, expected,
            "headdrop {headdrop}: A loses packet {dropped}"
        );
        let s = dev.root().q.stats();
        assert_eq!((s.drops, s.packets), (1, 10));
    }
}

#[test]
fn prio_empties_band_0_before_band_1() {
    // Default priomap: TOS 0x10 → priority 6 → band 0; TOS 0 → band 1; TOS 0x08 → priority 2 → band 2.
    // Arrivals interleave the three; departures must be all of band 0, then band 1, then band 2, each in
    // arrival order. A band is only asked when every band above it is empty.
    let mut e = engine_with(QdiscOptions::Prio(PrioOptions::default()));
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    let toses = [0x08u8, 0x00, 0x10];
    for i in 0..30u64 {
        let tos = toses[(i % 3) as usize];
        let mut p = udp(1, 1, 100, i);
        p.data[1] = tos;
        p.priority = tos_to_priority(tos);
        dev.enqueue(p, &mut cx);
    }
    let order: Vec<u64> = std::iter::from_fn(|| dev.dequeue(&mut cx))
        .map(|p| p.tag)
        .collect();
    let band = |tag: u64| [2, 1, 0][(tag % 3) as usize];
    let bands: Vec<u32> = order.iter().map(|&t| band(t)).collect();
    let mut sorted = bands.clone();
    sorted.sort();
    assert_eq!(bands, sorted, "bands in strict order: {order:?}");
    assert_eq!(&order[..3], &[2, 5, 8], "FIFO within band 0");
    // A new band-0 packet jumps ahead of the band-1 backlog.
    for i in 0..5 {
        dev.enqueue(udp(1, 1, 100, 100 + i), &mut cx);
    }
    let mut hi = udp(1, 1, 100, 999);
    hi.priority = 6;
    dev.enqueue(hi, &mut cx);
    assert_eq!(dev.dequeue(&mut cx).unwrap().tag, 999);
}

fn cbq_rate(bits: u64, cell_log: u8) -> Option<CbqRate> {
    Some(CbqRate {
        spec: RateSpec {
            rate: bits / 8,
            ..Default::default()
        },
        cell_log,
    })
}

/// The options `tc qdisc add … cbq bandwidth 10mbit avpkt 1000` sends: maxidle = xmittime(avpkt) = 800 µs
/// = 12 500 ticks, cell 8 (allot 1500 > 255 << 2).
fn cbq_root() -> QdiscOptions {
    QdiscOptions::Cbq(CbqOptions {
        rate: cbq_rate(10_000_000, 3),
        lss: Some(CbqLss {
            change: LSS_MAXIDLE | LSS_EWMA | LSS_AVPKT,
            ewma_log: 5,
            maxidle: 12_500,
            avpkt: 1000,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// `tc class add … cbq rate R allot A prio P avpkt 1000 [bounded]` as tc sends it.
fn cbq_class(bits: u64, prio: u8, flags: u8) -> ClassOptions {
    ClassOptions::Cbq(CbqOptions {
        rate: cbq_rate(bits, 3),
        lss: Some(CbqLss {
            change: LSS_AVPKT | LSS_FLAGS,
            flags,
            ewma_log: 5,
            avpkt: 1000,
            ..Default::default()
        }),
        wrr: Some(CbqWrr {
            allot: 1514,
            priority: prio,
            weight: (bits / 8) as u32,
            ..Default::default()
        }),
        fopt: None,
    })
}

fn add_class(e: &mut Engine, parent: Handle, id: Handle, o: ClassOptions) {
    e.modify_class("eth0", parent, id, &o, Flags::ADD, 0)
        .unwrap();
}

#[test]
fn cbq_bounded_class_never_exceeds_its_rate() {
    // A bounded 1 Mbit/s class under a 10 Mbit/s root, flooded with 1000-byte packets, on a 10 Mbit/s
    // link. It may not borrow, so over any window of T seconds it sends at most rate × T plus the burst
    // its average idle time allows (maxidle: 800 µs at link speed ≈ 1 packet) — we allow 2 packets.
    // It must also get close to its rate (≥ 90 %): bounded is not starved.
    let mut e = engine_with(cbq_root());
    add_class(
        &mut e,
        Handle::new(1, 0),
        Handle::new(1, 1),
        cbq_class(1_000_000, 1, LSS_BOUNDED),
    );
    let arrivals = periodic(0, MS / 2, 20_000, |i| Packet {
        priority: 0x0001_0001,
        ..udp(1, 1, 1000, i)
    });
    let (out, _) = drive(&mut e, arrivals, 1_250_000, 10 * NSEC_PER_SEC, usize::MAX);
    let rate = 125_000u64; // bytes/s
    for window in [NSEC_PER_SEC / 10, NSEC_PER_SEC, 5 * NSEC_PER_SEC] {
        let mut start = 0;
        while start + window <= 10 * NSEC_PER_SEC {
            let bytes: u64 = out
                .iter()
                .filter(|(t, _)| *t >= start && *t < start + window)
                .map(|(_, p)| p.len as u64)
                .sum();
            let bound = rate * window / NSEC_PER_SEC + 2000;
            assert!(
                bytes <= bound,
                "{bytes} bytes in [{start}, +{window}) > {bound}"
            );
            start += window / 2;
        }
    }
    let total: u64 = out.iter().map(|(_, p)| p.len as u64).sum();
    assert!(
        total >= rate * 10 * 9 / 10,
        "a bounded class still gets its rate: {total} bytes in 10 s"
    );
}

#[test]
fn cbq_unbounded_class_borrows_and_isolated_parent_is_bounded() {
    // Root 10 Mbit; 1:1 rate 2 Mbit bounded isolated; under it 1:10 at 500 kbit/s (may borrow).
    // A flood in 1:10 may borrow up to its parent's 2 Mbit but no further: ≈ 250 000 B/s. CBQ is not exact
    // here: when both are overlimit, `cbq_overlimit` penalises the *leaf* and forgives it part of its
    // negative avgidle, so the leaf's own undertime can pass before the parent's and it sends on its own
    // account — the kernel comments on this "very suspicious place". That overshoot measures ≈ 1 %;
    // allow 2 %.
    let mut e = engine_with(cbq_root());
    add_class(
        &mut e,
        Handle::new(1, 0),
        Handle::new(1, 1),
        cbq_class(2_000_000, 5, LSS_BOUNDED | LSS_ISOLATED),
    );
    add_class(
        &mut e,
        Handle::new(1, 1),
        Handle::new(1, 0x10),
        cbq_class(500_000, 1, 0),
    );
    let arrivals = periodic(0, MS / 4, 40_000, |i| Packet {
        priority: 0x0001_0010,
        ..udp(1, 1, 1000, i)
    });
    let (out, _) = drive(&mut e, arrivals, 1_250_000, 10 * NSEC_PER_SEC, usize::MAX);
    let total: u64 = out
        .iter()
        .filter(|(t, _)| *t >= NSEC_PER_SEC)
        .map(|(_, p)| p.len as u64)
        .sum();
    let per_s = total / 9;
    assert!(
        per_s > 62_500 * 2 && per_s <= 250_000 * 102 / 100,
        "1:10 borrows beyond its 62 500 B/s up to its parent's 250 000 B/s: {per_s} B/s"
    );
}
