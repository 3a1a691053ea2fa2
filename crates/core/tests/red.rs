//! RED by hand (`include/net/red.h`, `sch_red.c`): the average, the marking probability between the
//! thresholds, the idle decay, adaptive `max_P`, and the qdisc's decisions — drop, CE mark, harddrop,
//! nodrop — with the kernel's counters. Each assertion says what it expects and why.

use tclab_core::qdisc::red::{
    Red, RedOptions, TC_RED_ADAPTATIVE, TC_RED_ECN, TC_RED_HARDDROP, TC_RED_NODROP,
};
use tclab_core::qdisc::red_impl::{RedAction, RedParms, RedVars};
use tclab_core::qdisc::{Cx, Qdisc, Verdict, Xstats};
use tclab_core::{Handle, Packet};

/// 2^32 · p.
fn scaled(p: f64) -> u32 {
    (p * 4_294_967_296.0) as u32
}

#[test]
fn marks_between_the_thresholds_come_every_1_over_2pb_arrivals() {
    // min 100 000, max 300 000 bytes, max_P 2 %, the average held at 200 000 (half way): pb = 1 %.
    // After each mark the kernel draws qR uniform in [0, 1/pb) units of (avg − min) and marks again
    // when (avg − min)·count ≥ qR, so a mark comes after count = ceil(U/pb) arrivals, U uniform in [0, 1):
    // on average 1/(2·pb) + 1/2 = 50.5 arrivals. Over 200 000 arrivals: 3 960 marks (± 4 %, the sample
    // mean of ~4 000 cycles of s.d. 29 arrivals has s.d. 0.5 arrivals ≈ 1 %).
    let p = RedParms::new(100_000, 300_000, 9, 0, 0, &[], scaled(0.02));
    let mut v = RedVars::default();
    let mut s = 0x1234_5678_u64;
    let mut rnd = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 32) as u32
    };
    let qavg = 200_000u64 << 9;
    let marks = (0..200_000)
        .filter(|_| v.action(&p, qavg, &mut rnd) == RedAction::ProbMark)
        .count() as f64;
    let expected = 200_000.0 / 50.5;
    assert!(
        (marks - expected).abs() < 0.04 * expected,
        "{marks} marks, expected {expected:.0}"
    );
    // Nearer max, more often: at 290 000 (pb = 1.9 %) a mark every 26.8 arrivals.
    let mut v = RedVars::default();
    let marks = (0..200_000)
        .filter(|_| v.action(&p, 290_000u64 << 9, &mut rnd) == RedAction::ProbMark)
        .count() as f64;
    let expected = 200_000.0 / (1.0 / (2.0 * 0.019) + 0.5);
    assert!(
        (marks - expected).abs() < 0.04 * expected,
        "{marks} vs {expected:.0}"
    );
}

#[test]
fn the_average_decays_over_an_idle_period() {
    // Stab says how many halvings an idle time is worth, by cells of 2^Scell_log µs. With every entry
    // 1 (a halving) and Scell_log 0, 10 µs of idleness halves an average of 1000.
    let p = RedParms::new(100, 300, 2, 0, 0, &[1u8; 256], scaled(0.02));
    let mut v = RedVars {
        qavg: 1000,
        idle_since: Some(0),
        ..Default::default()
    };
    assert_eq!(v.calc_qavg(&p, 0, 10_000), 500);
    // An entry of 0 (an idle time too short for a whole halving): the line qavg·(1 − idle/2^Scell_log);
    // Scell_log 10, 100 µs: 1000 − 1000·100/1024 = 1000 − 97 = 903.
    let p = RedParms::new(100, 300, 2, 0, 10, &[0u8; 256], scaled(0.02));
    assert_eq!(v.calc_qavg(&p, 0, 100_000), 903);
    // Busy again: avg + (backlog − avg/4) with Wlog 2.
    v.idle_since = None;
    assert_eq!(v.calc_qavg(&p, 400, 0), 1000 + 400 - 250);
}

#[test]
fn adaptive_red_moves_max_p_towards_the_target_band() {
    // min 100 000, max 300 000: the target band is 180 000 .. 220 000. Above it max_P grows by
    // min(1 %, max_P/4) = 0.5 % from 2 %; below it, it shrinks to 9/10.
    let mut p = RedParms::new(100_000, 300_000, 9, 0, 0, &[], scaled(0.02));
    let v = RedVars {
        qavg: 250_000 << 9,
        ..Default::default()
    };
    v.adapt(&mut p, 0);
    assert_eq!(p.max_p, scaled(0.02) + scaled(0.02) / 4);
    let v = RedVars {
        qavg: 150_000 << 9,
        ..Default::default()
    };
    let before = p.max_p;
    v.adapt(&mut p, 0);
    assert_eq!(p.max_p, before / 10 * 9);
}

fn red(flags: u8) -> Red {
    // limit 100 000 bytes; min 3 000, max 6 000; Wlog 1 (the average moves half way each arrival), so
    // a standing queue reaches the thresholds within a few packets.
    let o = RedOptions {
        limit: 100_000,
        qth_min: 3_000,
        qth_max: 6_000,
        wlog: 1,
        plog: 10,
        scell_log: 0,
        stab: vec![0; 256],
        max_p: scaled(0.02),
        flags,
    };
    Red::new(Handle::new(1, 0), &o, 0).expect("valid")
}

fn pkt(tos: u8) -> Packet {
    Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 80, tos, 1000)
}

fn counters(q: &Red) -> (u32, u32, u32) {
    let Some(Xstats::Red(x)) = q.xstats() else {
        panic!("red has xstats")
    };
    (x.marked, x.early, x.pdrop)
}

/// Enqueue `n` 1000-byte packets at t = 1 µs each, never dequeueing: the average chases the backlog.
fn flood(q: &mut Red, n: usize, tos: u8) -> Vec<Verdict> {
    (0..n)
        .map(|i| q.enqueue(pkt(tos), &mut Cx::new(1_000 * (i as u64 + 1))))
        .collect()
}

#[test]
fn without_ecn_a_standing_queue_is_dropped_early_and_then_always() {
    // Backlog b_k = k·1000 at arrival k (k = 0, 1, …); the average after it, avg/2 + b_k/2 with Wlog 1
    // (in the kernel's scaled integers: 2·avg ← 2·avg + b − avg): 0, 500, 1250, 2125, 3062 (≥ min 3000:
    // the band; the first arrival there only draws qR), 4031, 5016, 6008 (≥ max 6000).
    // So arrivals 0..=4 are queued; from arrival 7 on, every one is a forced drop until the queue moves
    // (it never does here). Dropped packets do not grow the backlog, so the average settles at the
    // backlog and stays above max.
    let mut q = red(0);
    let v = flood(&mut q, 20, 0);
    assert!(v[..5].iter().all(|v| *v == Verdict::Success));
    assert!(v[7..].iter().all(|v| *v == Verdict::Cn), "{v:?}");
    let (marked, early, pdrop) = counters(&q);
    assert_eq!((marked, pdrop), (0, 0));
    assert!(early >= 13, "forced drops from arrival 7: {early}");
    assert_eq!(q.stats().drops, early);
    assert_eq!(q.stats().overlimits, early);
}

#[test]
fn with_ecn_capable_packets_are_marked_instead() {
    // The same standing queue of ECT(0) packets: every decision marks CE, nothing is dropped, and the
    // queue grows until the bfifo's 100 000 bytes refuse (pdrop).
    let mut q = red(TC_RED_ECN);
    let v = flood(&mut q, 120, 0x02);
    let (marked, early, pdrop) = counters(&q);
    assert_eq!(early, 0);
    assert!(marked >= 100, "{marked}");
    assert_eq!(pdrop, 20, "100 packets fit in 100 000 bytes");
    assert_eq!(v.iter().filter(|v| **v == Verdict::Drop).count(), 20);
    // The queued packets marked carry CE; the last 20 were marked, then refused by the full bfifo.
    let mut cx = Cx::new(1_000_000);
    let ce = (0..100)
        .filter_map(|_| q.dequeue(&mut cx))
        .filter(|p| p.data[1] & 3 == 3)
        .count();
    assert_eq!(ce as u32, marked - 20);
}

#[test]
fn harddrop_drops_above_max_even_with_ecn_and_nodrop_keeps_not_ect() {
    // harddrop: above max, ECN or not, a forced drop.
    let mut q = red(TC_RED_ECN | TC_RED_HARDDROP);
    let v = flood(&mut q, 20, 0x02);
    assert!(v[7..].iter().all(|v| *v == Verdict::Cn));
    let (_, early, _) = counters(&q);
    assert_eq!(early, 13, "arrivals 7 to 19");
    // ECN with a Not-ECT packet: dropped — unless nodrop, which queues it unmarked.
    let mut q = red(TC_RED_ECN);
    let v = flood(&mut q, 20, 0);
    assert!(v[7..].iter().all(|v| *v == Verdict::Cn));
    let mut q = red(TC_RED_ECN | TC_RED_NODROP);
    let v = flood(&mut q, 20, 0);
    assert!(v.iter().all(|v| *v == Verdict::Success));
    assert_eq!(counters(&q), (0, 0, 0));
}

#[test]
fn the_kernel_refuses_what_red_check_params_refuses() {
    let base = RedOptions {
        limit: 100_000,
        qth_min: 3_000,
        qth_max: 6_000,
        wlog: 1,
        plog: 10,
        scell_log: 0,
        stab: vec![0; 256],
        max_p: 0,
        flags: 0,
    };
    let bad = |o: RedOptions| Red::new(Handle::new(1, 0), &o, 0).is_err();
    assert!(
        bad(RedOptions {
            qth_min: 7_000,
            ..base.clone()
        }),
        "max < min"
    );
    assert!(
        bad(RedOptions {
            wlog: 20,
            ..base.clone()
        }),
        "fls(6000) + Wlog ≥ 32"
    );
    assert!(
        bad(RedOptions {
            flags: TC_RED_NODROP,
            ..base.clone()
        }),
        "nodrop without ecn"
    );
    assert!(
        bad(RedOptions {
            stab: vec![32; 256],
            ..base.clone()
        }),
        "a Stab entry ≥ 32"
    );
    assert!(!bad(RedOptions {
        flags: TC_RED_ADAPTATIVE,
        ..base
    }));
}
