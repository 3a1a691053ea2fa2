//! sch_fq by hand (Linux 6.12's `sch_fq.c`): `maxrate` holding each flow to its rate on both of fq's
//! pacing paths, a socket's pacing rate paced a quantum at a time (and packet by packet under
//! `low_rate_threshold`), departure times and the horizon, the new-flow list, the flow and band limits,
//! the fast path, ce_threshold, garbage collection, and the socket told that fq paces it.

use tclab_core::qdisc::fq::{Fq, FqOptions, FqXstats};
use tclab_core::qdisc::{Cx, DevEnv, Qdisc, QdiscOptions, Verdict, Xstats};
use tclab_core::{Nanos, Packet};

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};
const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000_000_000;

/// A 1514-byte UDP packet of socket `sk` (its own port), TOS `tos`.
fn pkt(sk: u32, tos: u8) -> Packet {
    let mut p = Packet::udp4(
        [10, 0, 0, 1],
        5000 + sk as u16,
        [10, 0, 0, 2],
        80,
        tos,
        1514,
    );
    p.sk = sk;
    p
}

fn fq(o: FqOptions) -> Fq {
    Fq::new(&o, &ENV).expect("valid options")
}

fn xstats(q: &Fq) -> FqXstats {
    let Some(Xstats::Fq(x)) = q.xstats() else {
        panic!("fq has xstats")
    };
    x
}

/// Dequeue through a link of `bps` from time 0 until `until`: whenever the link is free, ask; when fq
/// holds everything back, wait for the time its watchdog asked for. Returns (time, packet) sent.
fn drain(q: &mut Fq, bps: u64, until: Nanos) -> Vec<(Nanos, Packet)> {
    let (mut t, mut out) = (0, Vec::new());
    while t < until {
        let mut cx = Cx::new(t);
        match q.dequeue(&mut cx) {
            Some(p) => {
                let tx = p.len as u64 * 8 * SEC / bps;
                out.push((t, p));
                t += tx.max(1);
            }
            None => match cx.wake_at {
                Some(w) => t = w.max(t + 1),
                None => break,
            },
        }
    }
    out
}

/// Bytes/s of socket `sk` in `[from, to)`.
fn rate_of(sent: &[(Nanos, Packet)], sk: u32, from: Nanos, to: Nanos) -> f64 {
    let bytes: u64 = sent
        .iter()
        .filter(|(t, p)| p.sk == sk && (from..to).contains(t))
        .map(|(_, p)| p.len as u64)
        .sum();
    bytes as f64 / ((to - from) as f64 / SEC as f64)
}

/// Two sockets with 1 000 packets each queued at 0 through fq with `maxrate 1mbit` on a 1 Gbit/s link.
fn two_flows_at_maxrate(stamped: bool) -> Vec<(Nanos, Packet)> {
    let mut q = fq(FqOptions {
        maxrate: Some(125_000),
        flow_limit: Some(2000),
        ..Default::default()
    });
    for _ in 0..1000 {
        for sk in [1, 2] {
            let mut p = pkt(sk, 0);
            // A departure time already past: the packet is due now, but it carries one (EDT).
            p.tstamp = if stamped { 1 } else { 0 };
            assert_eq!(q.enqueue(p, &mut Cx::new(0)), Verdict::Success);
        }
    }
    drain(&mut q, 1_000_000_000, 11 * SEC)
}

#[test]
fn maxrate_holds_each_flow_to_1_mbit() {
    // Without a departure time a flow at a rate above low_rate_threshold is paced a quantum (2 × 1514)
    // at a time: two packets, then 3028 B / 125 000 B/s = 24.224 ms; with one (EDT), packet by packet,
    // 1514 B / 125 000 B/s = 12.112 ms. Either way 125 000 B/s = 1 Mbit/s per flow, once the initial
    // quantum's burst (10 packets) is spent. Expectation from fq_dequeue's pacing arithmetic.
    for stamped in [false, true] {
        let sent = two_flows_at_maxrate(stamped);
        for sk in [1, 2] {
            let r = rate_of(&sent, sk, SEC, 11 * SEC);
            assert!(
                (r / 125_000.0 - 1.0).abs() < 0.01,
                "flow {sk} (stamped {stamped}) at {r} B/s, not 125 000 ± 1 %"
            );
        }
    }
}

#[test]
fn a_sockets_pacing_rate_is_paced_a_quantum_at_a_time() {
    // sk_pacing_rate 10 Mbit/s (1.25 MB/s), no departure times. The first 8 packets, due now at an
    // fq with no eligible flow, take the fast path (unpaced); the flow then sends its initial quantum
    // (10 packets) at once, and from packet 18 on pairs of packets (a quantum's credit, 2 × 1514)
    // 3028 / 1.25e6 = 2.4224 ms apart. A pair's second packet leaves 12.112 µs after the first (the
    // link), and that lateness is taken off the next wait, so pairs start exactly 2.4224 ms apart.
    let mut q = fq(FqOptions {
        flow_limit: Some(2000),
        ..Default::default()
    });
    for _ in 0..1000 {
        let mut p = pkt(1, 0);
        p.pacing_rate = 1_250_000;
        q.enqueue(p, &mut Cx::new(0));
    }
    let sent = drain(&mut q, 1_000_000_000, 2 * SEC);
    let t: Vec<Nanos> = sent.iter().map(|(t, _)| *t).collect();
    assert_eq!(xstats(&q).fastpath_packets, 8);
    assert!(t[17] < MS && t[18] > 2 * MS, "the burst, then the pacing");
    for k in (20..200).step_by(2) {
        assert_eq!(t[k] - t[k - 2], 2_422_400, "pair starting with packet {k}");
    }
    let r = rate_of(&sent, 1, 100 * MS, 1100 * MS);
    assert!((r / 1_250_000.0 - 1.0).abs() < 0.01, "{r} B/s");
}

#[test]
fn below_low_rate_threshold_a_flow_is_paced_packet_by_packet() {
    // 400 kbit/s (50 000 B/s) is under the default threshold of 550 kbit/s: the flow's credit is zeroed
    // after every packet, so each one waits 1514 / 50 000 s = 30.28 ms — even the initial quantum's.
    // The first 8 take the fast path.
    let mut q = fq(FqOptions::default());
    for _ in 0..20 {
        let mut p = pkt(1, 0);
        p.pacing_rate = 50_000;
        q.enqueue(p, &mut Cx::new(0));
    }
    let sent = drain(&mut q, 1_000_000_000, SEC);
    assert_eq!(sent.len(), 20);
    for w in sent[8..].windows(2) {
        assert_eq!(w[1].0 - w[0].0, 30_280_000);
    }
}

#[test]
fn a_departure_time_holds_the_packet_and_the_horizon_bounds_it() {
    let mut q = fq(FqOptions::default());
    let mut p = pkt(1, 0);
    p.tstamp = 5 * MS;
    q.enqueue(p, &mut Cx::new(0));
    let mut cx = Cx::new(MS);
    assert!(q.dequeue(&mut cx).is_none(), "not before its time");
    assert_eq!(cx.wake_at, Some(5 * MS), "the watchdog is set for it");
    assert_eq!(xstats(&q).throttled_flows, 1);
    assert!(q.dequeue(&mut Cx::new(5 * MS)).is_some());

    // Beyond the 10 s horizon: dropped by default, brought back to it with horizon_cap.
    let mut p = pkt(1, 0);
    p.tstamp = 10 * SEC + 1;
    assert_eq!(q.enqueue(p.clone(), &mut Cx::new(0)), Verdict::Drop);
    assert_eq!(xstats(&q).horizon_drops, 1);
    let mut capped = fq(FqOptions {
        horizon_drop: Some(0),
        ..Default::default()
    });
    assert_eq!(capped.enqueue(p, &mut Cx::new(0)), Verdict::Success);
    assert_eq!(xstats(&capped).horizon_caps, 1);
    let mut cx = Cx::new(MS);
    assert!(capped.dequeue(&mut cx).is_none());
    assert_eq!(cx.wake_at, Some(10 * SEC), "capped to now + horizon");
}

#[test]
fn a_new_flow_goes_before_the_old_ones() {
    // nopacing: plain DRR. Socket 1 has 50 packets: 8 take the fast path, 42 its flow. After 18 have
    // left (the fast path's, then the flow's initial quantum of 10 packets), socket 2's one packet
    // arrives, on the new list, and is the next to leave: socket 1's flow goes to the old list.
    let mut q = fq(FqOptions {
        rate_enable: Some(0),
        ..Default::default()
    });
    for _ in 0..50 {
        q.enqueue(pkt(1, 0), &mut Cx::new(0));
    }
    for _ in 0..18 {
        assert_eq!(q.dequeue(&mut Cx::new(0)).unwrap().sk, 1);
    }
    q.enqueue(pkt(2, 0), &mut Cx::new(0));
    assert_eq!(q.dequeue(&mut Cx::new(0)).unwrap().sk, 2);
    // Socket 2 gets 20 more: its flow spends the rest of its initial quantum (9 packets) on the new
    // list, then the two share the old list by quantum: 2 packets each, in turn.
    for _ in 0..20 {
        q.enqueue(pkt(2, 0), &mut Cx::new(0));
    }
    let order: Vec<u32> = (0..21)
        .map(|_| q.dequeue(&mut Cx::new(0)).unwrap().sk)
        .collect();
    assert_eq!(
        order,
        [[2; 9].as_slice(), &[1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2]].concat()
    );
}

#[test]
fn flow_limit_and_the_bands_limit() {
    let mut q = fq(FqOptions {
        flow_limit: Some(3),
        limit: Some(5),
        ..Default::default()
    });
    // A packet due now at an idle fq takes the fast path: no flow, no limits. Hold them with a
    // departure time instead.
    let at = |sk| {
        let mut p = pkt(sk, 0);
        p.tstamp = SEC;
        p
    };
    for _ in 0..3 {
        assert_eq!(q.enqueue(at(1), &mut Cx::new(0)), Verdict::Success);
    }
    let mut cx = Cx::new(0);
    assert_eq!(q.enqueue(at(1), &mut cx), Verdict::Drop, "flow_limit 3");
    assert_eq!(cx.drops.len(), 1);
    assert_eq!(xstats(&q).flows_plimit, 1);
    // TOS 0 is priority 0, band 1: its limit of 5 packets is reached by a second socket.
    for _ in 0..2 {
        assert_eq!(q.enqueue(at(2), &mut Cx::new(0)), Verdict::Success);
    }
    assert_eq!(
        q.enqueue(at(3), &mut Cx::new(0)),
        Verdict::Drop,
        "band limit"
    );
    let x = xstats(&q);
    assert_eq!(x.band_drops, [0, 1, 0]);
    assert_eq!(x.band_pkt_count, [0, 5, 0]);
    // Priority 6 (TOS 0x10, "interactive") maps to band 0, which has room.
    let mut p = at(3);
    p.priority = 6;
    assert_eq!(q.enqueue(p, &mut Cx::new(0)), Verdict::Success);
    assert_eq!(q.stats().drops, 2);
    assert_eq!(q.stats().qlen, 6);
}

#[test]
fn the_fast_path_takes_a_packet_due_at_an_idle_fq_unless_maxrate_is_set() {
    let mut q = fq(FqOptions::default());
    q.enqueue(pkt(1, 0), &mut Cx::new(0));
    let x = xstats(&q);
    assert_eq!((x.fastpath_packets, x.flows), (1, 0));
    let mut q = fq(FqOptions {
        maxrate: Some(125_000),
        ..Default::default()
    });
    q.enqueue(pkt(1, 0), &mut Cx::new(0));
    let x = xstats(&q);
    assert_eq!((x.fastpath_packets, x.flows), (0, 1));
}

#[test]
fn the_socket_learns_that_fq_paces_it() {
    for (rate_enable, sk, told) in [(None, 1, true), (None, 0, false), (Some(0), 1, false)] {
        let mut q = fq(FqOptions {
            rate_enable,
            ..Default::default()
        });
        let mut cx = Cx::new(0);
        q.enqueue(pkt(sk, 0), &mut cx);
        assert_eq!(cx.pacing_fq, told, "pacing {rate_enable:?}, socket {sk}");
    }
}

#[test]
fn a_packet_late_by_more_than_ce_threshold_is_marked() {
    // ce_threshold 2 ms: a packet due at 1 ms that leaves at 5 ms is 4 ms late — CE; one that leaves
    // 1 ms late is not. ECT(0) is TOS 2.
    let mut q = fq(FqOptions {
        ce_threshold: Some(2000),
        ..Default::default()
    });
    let mut p = pkt(1, 2);
    p.tstamp = MS;
    q.enqueue(p, &mut Cx::new(0));
    let mut p = pkt(2, 2);
    p.tstamp = 4 * MS;
    q.enqueue(p, &mut Cx::new(0));
    let a = q.dequeue(&mut Cx::new(5 * MS)).unwrap();
    let b = q.dequeue(&mut Cx::new(5 * MS)).unwrap();
    assert_eq!((a.sk, a.data[1] & 3), (1, 3), "CE");
    assert_eq!((b.sk, b.data[1] & 3), (2, 2), "still ECT(0)");
    assert_eq!(xstats(&q).ce_mark, 1);
}

#[test]
fn flows_idle_for_three_seconds_are_collected() {
    // Two buckets (hash_64 of the socket puts sockets 3, 4, 7, 8, 11 and 12 in bucket 0); maxrate
    // keeps the fast path closed. Sockets 1–10 send a packet each at 0. A flow is detached only when a
    // dequeue finds it empty on the old list, which takes a flow that outlasts its initial quantum:
    // socket 11's 12 packets at 0.5 s. Its flow then passes to the old list, behind the ten empty
    // ones, which are detached (age 0.5 s) on the way.
    let mut q = fq(FqOptions {
        buckets_log: Some(1),
        maxrate: Some(u32::MAX - 1),
        ..Default::default()
    });
    for sk in 1..=10 {
        q.enqueue(pkt(sk, 0), &mut Cx::new(0));
    }
    while q.dequeue(&mut Cx::new(0)).is_some() {}
    for _ in 0..12 {
        q.enqueue(pkt(11, 0), &mut Cx::new(500 * MS));
    }
    // (Paced at maxrate once its credit is spent: a few µs.)
    let mut t = 500 * MS;
    loop {
        let mut cx = Cx::new(t);
        if q.dequeue(&mut cx).is_none() {
            match cx.wake_at {
                Some(w) => t = w,
                None => break,
            }
        }
    }
    assert!(t < 501 * MS);
    let x = xstats(&q);
    assert_eq!((x.flows, x.inactive_flows, x.gc_flows), (11, 11, 0));
    // At 3.4 s socket 12's lookup finds nobody idle for 3 s; at 3.6 s, sockets 3, 4, 7 and 8 (socket
    // 11's flow is still on a list, not detached).
    q.enqueue(pkt(12, 0), &mut Cx::new(3400 * MS));
    assert_eq!(xstats(&q).gc_flows, 0);
    q.enqueue(pkt(12, 0), &mut Cx::new(3600 * MS));
    let x = xstats(&q);
    assert_eq!((x.gc_flows, x.flows, x.inactive_flows), (4, 8, 7));
}

#[test]
fn refused_options_change_nothing() {
    let mut q = fq(FqOptions::default());
    let before = q.dump();
    for bad in [
        FqOptions {
            limit: Some(7),
            buckets_log: Some(19),
            ..Default::default()
        },
        FqOptions {
            limit: Some(7),
            initial_quantum: Some(0x8000_0000),
            ..Default::default()
        },
        FqOptions {
            limit: Some(7),
            weights: Some([65536, 100, 65536]),
            ..Default::default()
        },
    ] {
        assert!(q.change(&QdiscOptions::Fq(bad), &ENV, 0).is_err());
        assert_eq!(q.dump(), before);
    }
    // The defaults as fq_init sets them for a 1500-byte device.
    let QdiscOptions::Fq(o) = before else {
        panic!()
    };
    assert_eq!(o.quantum, Some(3028));
    assert_eq!(o.initial_quantum, Some(15140));
    assert_eq!(o.low_rate_threshold, Some(68750));
    assert_eq!(o.refill_delay, Some(40_000));
    assert_eq!(o.horizon, Some(10_000_000));
}

#[test]
fn the_bands_share_by_their_weights() {
    // nopacing, three backlogged sockets: priority 6 (band 0), 0 (band 1) and 2 (band 2), one flow
    // each. A band's turn is worth its weight in bytes (589 824, 196 608 and 65 536: 9:3:1); the last
    // packet of a turn may overdraw it, and the debt is carried to the band's next turn. So every turn
    // but the first sends its weight in 1514-byte packets within one packet: 389–390, 129–130 and 43–44.
    // Expectation from fq_dequeue's band loop.
    let mut q = fq(FqOptions {
        rate_enable: Some(0),
        flow_limit: Some(10_000),
        ..Default::default()
    });
    for _ in 0..3000 {
        for (sk, prio) in [(1, 6), (2, 0), (3, 2)] {
            let mut p = pkt(sk, 0);
            p.priority = prio;
            // A departure time closes the fast path (the packet is due, but not "now" at an idle fq).
            p.tstamp = 1;
            q.enqueue(p, &mut Cx::new(0));
        }
    }
    // Turns: runs of one socket in the dequeue order.
    let mut turns: Vec<(u32, u64)> = Vec::new();
    for _ in 0..4000 {
        let p = q.dequeue(&mut Cx::new(1)).unwrap();
        match turns.last_mut() {
            Some((sk, n)) if *sk == p.sk => *n += 1,
            _ => turns.push((p.sk, 1)),
        }
    }
    let order: Vec<u32> = turns.iter().map(|t| t.0).take(6).collect();
    assert_eq!(
        order,
        [2, 3, 1, 2, 3, 1],
        "band 1 first (band 0's credit starts at 0)"
    );
    assert!(turns.len() > 12);
    for &(sk, n) in &turns[1..turns.len() - 1] {
        let weight = [589_824i64, 196_608, 65_536][sk as usize - 1];
        assert!(
            (n as i64 * 1514 - weight).abs() <= 1514,
            "socket {sk}: {n} packets in a turn"
        );
    }
}
