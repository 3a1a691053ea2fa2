//! netem in virtual time, against expectations derived by hand from `net/sched/sch_netem.c` (Linux 6.12):
//! exact delays, the reorder/gap order `netem_enqueue` gives, rate serialisation, the loss verdict and
//! ECN marking, duplicates at the root, corruption, the limit, a child qdisc, the kernel's refusals.

use tclab_core::engine::Flags;
use tclab_core::qdisc::netem::{
    Netem, NetemCorr, NetemOptions, NetemRate, NetemSlot, Prandom, ProbCorr,
};
use tclab_core::qdisc::netem_dist::Distribution;
use tclab_core::qdisc::{Cx, DropReason, Qdisc, QdiscOptions, Verdict};
use tclab_core::{Engine, Handle, Packet};

const MS: u64 = 1_000_000;
/// psched ticks per millisecond (64 ns a tick).
const TICKS_PER_MS: u32 = 15_625;

/// A UDP/IPv4 packet of `len` wire bytes, tagged `tag`, ECN field `ecn`.
fn udp(len: u32, tag: u64, ecn: u8) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([0; 4], 0, [0; 4], 0, ecn, len)
    }
}

fn netem(o: NetemOptions) -> Netem {
    let mut q = Netem::new(
        Handle::new(1, 0),
        &NetemOptions {
            limit: o.limit.max(1),
            ..o
        },
        0,
    )
    .expect("valid options");
    q.set_seed(42);
    q
}

fn opts() -> NetemOptions {
    NetemOptions {
        limit: 1000,
        ..Default::default()
    }
}

/// Dequeue everything due at `now`; the tags in order.
fn drain(q: &mut Netem, now: u64) -> (Vec<u64>, Option<u64>) {
    let mut cx = Cx::new(now);
    let mut out = Vec::new();
    while let Some(p) = q.dequeue(&mut cx) {
        out.push(p.tag);
    }
    (out, cx.wake_at)
}

/// `delay 100ms`: latency = 1 562 500 ticks = 100 000 000 ns exactly; a packet enqueued at t leaves at
/// t + 100 ms, not a nanosecond earlier, and netem asks to be woken then.
#[test]
fn constant_delay_is_exact() {
    let mut q = netem(NetemOptions {
        latency: 100 * TICKS_PER_MS,
        ..opts()
    });
    let mut cx = Cx::new(5 * MS);
    assert_eq!(q.enqueue(udp(100, 1, 0), &mut cx), Verdict::Success);
    assert_eq!(drain(&mut q, 5 * MS), (vec![], Some(105 * MS)));
    assert_eq!(drain(&mut q, 105 * MS - 1), (vec![], Some(105 * MS)));
    assert_eq!(drain(&mut q, 105 * MS).0, vec![1]);
    assert_eq!(q.stats().packets, 1);
    assert_eq!(q.stats().qlen, 0);
}

/// `delay 10ms reorder 100% gap 5`: packets 1-4 (counter 0..3 < gap − 1) are delayed; packet 5 finds
/// counter = 4 and reorder = 100 % ≥ any draw, so it goes to the head with time_to_send = now and the
/// counter restarts; likewise packet 10. Head insertion stacks them: 10 leaves before 5, both at once;
/// the eight others 10 ms later, in order. Two requeues counted.
#[test]
fn reorder_with_gap_orders_as_netem_enqueue() {
    let mut q = netem(NetemOptions {
        latency: 10 * TICKS_PER_MS,
        gap: 5,
        reorder: Some(ProbCorr {
            probability: u32::MAX,
            correlation: 0,
        }),
        ..opts()
    });
    let mut cx = Cx::new(0);
    for tag in 1..=10 {
        q.enqueue(udp(100, tag, 0), &mut cx);
    }
    assert_eq!(drain(&mut q, 0), (vec![10, 5], Some(10 * MS)));
    assert_eq!(drain(&mut q, 10 * MS).0, vec![1, 2, 3, 4, 6, 7, 8, 9]);
    assert_eq!(q.stats().requeues, 2);
}

/// `reorder 25% gap 5` with `seed 7`: no other option draws from the generator (no jitter, loss,
/// duplication or corruption), so the k-th reorder draw is the k-th `prandom_u32_state` of
/// `prandom_seed_state(7)`. The expected order is derived from the rule alone: a packet with counter
/// < 4 is delayed (counter + 1); otherwise it is reordered iff `reorder >= draw` (counter reset).
#[test]
fn reorder_25_gap_5_follows_the_kernels_draws() {
    let p25 = (0.25f64 * u32::MAX as f64).round() as u32;
    let mut q = netem(NetemOptions {
        latency: 10 * TICKS_PER_MS,
        gap: 5,
        reorder: Some(ProbCorr {
            probability: p25,
            correlation: 0,
        }),
        seed: Some(7),
        limit: 5000,
        ..Default::default()
    });
    let mut rng = Prandom::new(7);
    let (mut counter, mut head, mut delayed) = (0u32, Vec::new(), Vec::new());
    let mut cx = Cx::new(0);
    for tag in 1..=2000u64 {
        q.enqueue(udp(100, tag, 0), &mut cx);
        if counter < 4 || p25 < rng.next_u32() {
            counter += 1;
            delayed.push(tag);
        } else {
            counter = 0;
            head.insert(0, tag);
        }
    }
    let (now, _) = drain(&mut q, 0);
    assert_eq!(now, head, "reordered packets leave at once, latest first");
    assert_eq!(drain(&mut q, 10 * MS).0, delayed);
    // Of the packets past the gap, about a quarter are reordered: each reorder needs ≥ 4 delayed first,
    // then a geometric number of 25 % trials.
    let n = head.len() as f64;
    let expected = 2000.0 / (4.0 + 4.0);
    assert!((n - expected).abs() < 0.15 * expected, "{n} reordered");
}

/// `rate 1mbit`: a 1514-byte frame takes 1514 × 8 / 10^6 s = 12.112 ms. Ten frames enqueued at once
/// leave 12.112 ms apart, the first at 12.112 ms (each is serialised after the last queued one).
/// With `packetoverhead 20 cellsize 48 celloverhead 5`: 1534 bytes → 32 cells × 53 bytes = 13.568 ms.
#[test]
fn rate_serialises_exactly() {
    for (rate, per) in [
        (
            NetemRate {
                rate: 125_000,
                ..Default::default()
            },
            12_112_000u64,
        ),
        (
            NetemRate {
                rate: 125_000,
                packet_overhead: 20,
                cell_size: 48,
                cell_overhead: 5,
            },
            13_568_000,
        ),
    ] {
        let mut q = netem(NetemOptions {
            rate: Some(rate),
            ..opts()
        });
        let mut cx = Cx::new(0);
        for tag in 0..10 {
            q.enqueue(udp(1514, tag, 0), &mut cx);
        }
        let mut departures = Vec::new();
        let mut now = 0;
        while departures.len() < 10 {
            let (out, wake) = drain(&mut q, now);
            departures.extend(out.iter().map(|_| now));
            if let Some(w) = wake {
                now = w;
            }
        }
        let want: Vec<u64> = (1..=10).map(|k| k * per).collect();
        assert_eq!(departures, want);
    }
}

/// `loss 100%`: the packet is freed, named in the drop list with reason `Loss`, counted in drops, and
/// netem answers `NET_XMIT_SUCCESS | __NET_XMIT_BYPASS`: parents count it, the sender hears success.
/// With `ecn`, an ECT(0) packet is CE-marked and queued instead (the kernel still counts a drop); a
/// Not-ECT packet is lost.
#[test]
fn loss_answers_bypass_and_ecn_marks_ect_packets() {
    let mut q = netem(NetemOptions {
        loss: u32::MAX,
        ..opts()
    });
    let mut cx = Cx::new(0);
    let v = q.enqueue(udp(100, 1, 0), &mut cx);
    assert_eq!(v, Verdict::Bypass);
    assert!(v.counts_drop());
    assert_eq!(v.to_sender(), Verdict::Success);
    assert_eq!(cx.drops.len(), 1);
    assert_eq!(cx.drops[0].reason, DropReason::Loss);
    assert!(cx.drops[0].arriving);
    assert_eq!((q.stats().drops, q.stats().qlen), (1, 0));

    let mut q = netem(NetemOptions {
        loss: u32::MAX,
        ecn: Some(1),
        ..opts()
    });
    let mut cx = Cx::new(0);
    assert_eq!(q.enqueue(udp(100, 1, 2), &mut cx), Verdict::Success);
    assert_eq!(q.enqueue(udp(100, 2, 0), &mut cx), Verdict::Bypass);
    let mut out = Cx::new(0);
    let p = q.dequeue(&mut out).expect("the marked packet");
    assert_eq!((p.tag, p.data[1] & 3), (1, 3), "CE-marked");
    assert_eq!(
        q.stats().drops,
        2,
        "the mark and the loss, as the kernel counts"
    );
}

/// `limit 2`: the third packet is tail-dropped (`qdisc_drop`, NET_XMIT_DROP).
#[test]
fn limit_tail_drops() {
    let mut q = netem(NetemOptions {
        limit: 2,
        latency: TICKS_PER_MS,
        ..Default::default()
    });
    let mut cx = Cx::new(0);
    assert_eq!(q.enqueue(udp(100, 1, 0), &mut cx), Verdict::Success);
    assert_eq!(q.enqueue(udp(100, 2, 0), &mut cx), Verdict::Success);
    assert_eq!(q.enqueue(udp(100, 3, 0), &mut cx), Verdict::Drop);
    assert_eq!(cx.drops[0].reason, DropReason::TailDrop);
    assert_eq!(
        (q.stats().qlen, q.stats().backlog, q.stats().drops),
        (2, 200, 1)
    );
}

/// `duplicate 100%` at the root: every packet is queued twice (the clone re-enqueued at the root with
/// `tc_depth` 1, never duplicated again).
#[test]
fn duplicates_are_enqueued_at_the_root_once() {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let o = NetemOptions {
        duplicate: u32::MAX,
        ..opts()
    };
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Netem(o)),
        Flags::ADD,
        0,
    )
    .unwrap();
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    assert_eq!(dev.enqueue(udp(100, 7, 0), &mut cx), Verdict::Success);
    let mut out = Cx::new(0);
    let a = dev.dequeue(&mut out).unwrap();
    let b = dev.dequeue(&mut out).unwrap();
    assert!(dev.dequeue(&mut out).is_none());
    assert_eq!((a.tag, a.tc_depth, b.tag, b.tc_depth), (7, 0, 7, 1));
}

/// How many bits differ between two packets' bytes.
fn flipped_bits(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// `corrupt 100%`: exactly one bit of the header bytes flips; a packet with no bytes cannot be
/// corrupted and passes unchanged (no panic).
#[test]
fn corrupt_flips_one_bit_and_spares_empty_packets() {
    let mut q = netem(NetemOptions {
        corrupt: Some(ProbCorr {
            probability: u32::MAX,
            correlation: 0,
        }),
        ..opts()
    });
    let mut cx = Cx::new(0);
    let orig = udp(100, 1, 0);
    q.enqueue(orig.clone(), &mut cx);
    q.enqueue(Packet::of_len(0), &mut cx);
    let mut out = Cx::new(0);
    let p = q.dequeue(&mut out).unwrap();
    assert_eq!(flipped_bits(&p.data, &orig.data), 1);
    let empty = q.dequeue(&mut out).unwrap();
    assert!(empty.data.is_empty() && empty.len == 0);
}

/// `delay 100ms 10ms distribution normal`: packets leave in time-to-send order (the tfifo), never
/// before their time; the delays have mean ≈ 100 ms and σ ≈ 10 ms.
#[test]
fn jitter_with_a_table_keeps_the_tfifo_order() {
    let mut q = netem(NetemOptions {
        latency: 100 * TICKS_PER_MS,
        jitter: 10 * TICKS_PER_MS,
        delay_dist: Some(Distribution::Normal),
        corr: Some(NetemCorr::default()),
        limit: 20_000,
        ..Default::default()
    });
    let n = 10_000u64;
    for i in 0..n {
        let mut cx = Cx::new(i * 10_000);
        q.enqueue(udp(100, i * 10_000, 0), &mut cx);
    }
    let (mut last, mut now, mut delays) = (0u64, 0u64, Vec::new());
    while delays.len() < n as usize {
        let mut cx = Cx::new(now);
        while let Some(p) = q.dequeue(&mut cx) {
            assert!(now >= last);
            last = now;
            delays.push((now - p.tag) as f64 / MS as f64);
        }
        now = cx.wake_at.unwrap_or(now + 1);
    }
    let mean = delays.iter().sum::<f64>() / n as f64;
    let sd = (delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
    assert!((mean - 100.0).abs() < 0.5, "mean {mean}");
    assert!((sd - 10.0).abs() < 0.6, "sd {sd}");
}

/// A child qdisc: packets move into it when their time comes and leave through it.
#[test]
fn a_child_qdisc_takes_packets_at_their_time() {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let netem = NetemOptions {
        latency: 5 * TICKS_PER_MS,
        ..opts()
    };
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Netem(netem)),
        Flags::ADD,
        0,
    )
    .unwrap();
    let pfifo = QdiscOptions::Pfifo(tclab_core::qdisc::fifo::FifoOptions { limit: Some(1) });
    e.modify_qdisc(
        "eth0",
        Handle::new(1, 1),
        Handle::new(10, 0),
        Some(&pfifo),
        Flags::ADD,
        0,
    )
    .unwrap();
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for tag in 1..=3 {
        dev.enqueue(udp(100, tag, 0), &mut cx);
    }
    let mut out = Cx::new(0);
    assert!(dev.dequeue(&mut out).is_none());
    assert_eq!(out.wake_at, Some(5 * MS));
    // At 5 ms all three are due; the child (pfifo limit 1) takes one at a time as netem dequeues.
    let mut out = Cx::new(5 * MS);
    assert_eq!(dev.dequeue(&mut out).map(|p| p.tag), Some(1));
}

/// The kernel's refusals: a negative latency or jitter (`validate_time`), slot bounds (`validate_slot`);
/// nothing is applied.
#[test]
fn impossible_parameters_are_refused_whole() {
    let bad = [
        NetemOptions {
            latency64: Some(-1),
            ..opts()
        },
        NetemOptions {
            jitter64: Some(-5),
            ..opts()
        },
        NetemOptions {
            slot: Some(NetemSlot {
                min_delay: 10,
                max_delay: 5,
                ..Default::default()
            }),
            ..opts()
        },
        NetemOptions {
            slot: Some(NetemSlot {
                max_packets: -1,
                ..Default::default()
            }),
            ..opts()
        },
    ];
    let msgs = [
        "negative latency",
        "negative jitter",
        "slot min delay greater than max delay",
        "negative slot limit",
    ];
    let mut q = netem(NetemOptions {
        latency: TICKS_PER_MS,
        ..opts()
    });
    let env = tclab_core::qdisc::DevEnv {
        txqueues: 1,
        txqueuelen: 1000,
        mtu: 1500,
        hard_header_len: 14,
        speed: 0,
        taprio_offload: false,
    };
    for (o, m) in bad.iter().zip(msgs) {
        let e = q
            .change(&QdiscOptions::Netem(o.clone()), &env, 0)
            .unwrap_err();
        assert!(e.to_string().contains(m), "{e}");
        assert!(Netem::new(Handle::new(1, 0), o, 0).is_err());
    }
    match q.dump() {
        QdiscOptions::Netem(d) => assert_eq!(d.latency, TICKS_PER_MS, "unchanged"),
        _ => unreachable!(),
    }
}

/// Same seed, same losses; `seed` given, the engine's seed does not change them.
#[test]
fn draws_are_deterministic() {
    let run = |engine_seed: u64, own: Option<u64>| {
        let mut q = Netem::new(
            Handle::new(1, 0),
            &NetemOptions {
                loss: u32::MAX / 10,
                seed: own,
                ..opts()
            },
            0,
        )
        .unwrap();
        q.set_seed(engine_seed);
        let mut cx = Cx::new(0);
        (0..1000)
            .map(|i| q.enqueue(udp(100, i, 0), &mut cx) == Verdict::Bypass)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1, None), run(1, None));
    assert_ne!(run(1, None), run(2, None));
    assert_eq!(run(1, Some(9)), run(2, Some(9)));
}

/// A TCP GSO packet of `segs` full frames (1448 bytes of payload each), its checksum left implied.
fn tcp_gso(segs: u32) -> Packet {
    let mut p = Packet::tcp4(
        [10, 0, 0, 1],
        40000,
        [10, 0, 0, 2],
        5201,
        0x18,
        1,
        1,
        &[],
        1448 * segs,
    );
    p.set_gso(1448);
    p
}

/// `corrupt 100%` on a GSO packet, under PRIO: `netem_enqueue` cuts it into its frames first
/// (`netem_segment`), corrupts the first, and enqueues the others one by one through itself, each
/// drawing again (at 100 % each is corrupted too). Every frame leaves as a packet of its own with
/// exactly one bit flipped against the same frame cut from the clean packet (before: the whole
/// 4-frame packet left as one with one bit flipped, so a receiver lost all four). PRIO, which counted
/// one packet, is told of three more (`qdisc_tree_reduce_backlog(sch, 1 - nb, prev_len - len)`), and
/// the bytes add up to what it counted. Without corruption the packet stays whole.
#[test]
fn corrupt_cuts_a_gso_packet_into_frames_first() {
    use tclab_core::qdisc::prio::PrioOptions;
    for (corrupt, frames) in [(u32::MAX, 4usize), (0, 1)] {
        let mut e = Engine::new();
        e.add_device("eth0", 1500, 1000);
        let prio = QdiscOptions::Prio(PrioOptions::default());
        e.modify_qdisc(
            "eth0",
            Handle::ROOT,
            Handle::new(1, 0),
            Some(&prio),
            Flags::ADD,
            0,
        )
        .unwrap();
        let o = NetemOptions {
            corrupt: Some(ProbCorr {
                probability: corrupt,
                correlation: 0,
            }),
            ..opts()
        };
        // Priority 0 goes to band 2 (class 1:2) in the default priomap.
        e.modify_qdisc(
            "eth0",
            Handle::new(1, 2),
            Handle::new(10, 0),
            Some(&QdiscOptions::Netem(o)),
            Flags::ADD,
            0,
        )
        .unwrap();
        let dev = e.device_mut("eth0").unwrap();
        let pkt = tcp_gso(4);
        let total = pkt.len;
        let mut clean = pkt.clone();
        tclab_core::action::csum::complete_implied(&mut clean);
        let clean = clean.gso_segment();
        let mut cx = Cx::new(0);
        assert_eq!(dev.enqueue(pkt, &mut cx), Verdict::Success);
        assert_eq!(cx.gso_split as usize, frames - 1, "corrupt {corrupt}");
        let s = dev.root().q.stats();
        assert_eq!(
            (s.qlen as usize, s.backlog),
            (frames, total),
            "corrupt {corrupt}"
        );
        let mut out = Cx::new(0);
        let got: Vec<Packet> = std::iter::from_fn(|| dev.dequeue(&mut out)).collect();
        assert_eq!(got.len(), frames, "corrupt {corrupt}");
        if frames == 1 {
            assert!(got[0].is_gso(), "not cut without corruption");
            continue;
        }
        for (i, (g, c)) in got.iter().zip(&clean).enumerate() {
            assert!(!g.is_gso() && g.len == c.len, "frame {i}");
            assert_eq!(
                flipped_bits(&g.data, &c.data),
                1,
                "frame {i}: one bit flipped"
            );
        }
    }
}

/// A GSO packet cut for corruption that finds the queue full is dropped with all its frames, one
/// drop counted (`qdisc_drop_all`).
#[test]
fn a_full_netem_drops_a_cut_gso_packet_whole() {
    let mut q = netem(NetemOptions {
        corrupt: Some(ProbCorr {
            probability: u32::MAX,
            correlation: 0,
        }),
        limit: 1,
        ..Default::default()
    });
    let mut cx = Cx::new(0);
    assert_eq!(q.enqueue(udp(100, 1, 0), &mut cx), Verdict::Success);
    assert_eq!(q.enqueue(tcp_gso(3), &mut cx), Verdict::Drop);
    assert_eq!(cx.drops.len(), 3, "every frame freed");
    assert!(cx.drops.iter().all(|d| d.reason == DropReason::TailDrop));
    let s = q.stats();
    assert_eq!((s.qlen, s.backlog, s.drops), (1, 100, 1));
}
