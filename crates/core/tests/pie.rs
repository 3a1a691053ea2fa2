//! PIE by hand (RFC 8033, `sch_pie.c`): an overload that would fill any FIFO is held near the target
//! delay by early drops (or marks), never reaching the limit; the burst allowance lets a short burst
//! through untouched.

use tclab_core::qdisc::pie::{Pie, PieOptions};
use tclab_core::qdisc::{Cx, DevEnv, Qdisc, Xstats};
use tclab_core::Packet;

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};

fn pkt(tos: u8) -> Packet {
    Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 80, tos, 1000)
}

/// Two 1000-byte arrivals and one departure per millisecond for `secs`: the excess is half the
/// arrivals. Returns the qdisc and the sojourn times (ms) of the packets sent in the last second.
fn overload(o: &PieOptions, tos: u8, secs: u64) -> (Pie, Vec<f64>) {
    let mut q = Pie::new(o, &ENV, 0);
    let mut enq = std::collections::VecDeque::new();
    let mut late = Vec::new();
    for ms in 0..secs * 1000 {
        for half in 0..2 {
            let now = ms * 1_000_000 + half * 500_000;
            let mut p = pkt(tos);
            p.enqueue_ns = now;
            let mut cx = Cx::new(now);
            if q.enqueue(p, &mut cx) == tclab_core::qdisc::Verdict::Success {
                enq.push_back(now);
            }
        }
        let now = ms * 1_000_000 + 999_000;
        if let Some(p) = q.dequeue(&mut Cx::new(now)) {
            let t = enq.pop_front().unwrap();
            assert_eq!(t, p.enqueue_ns);
            if ms >= (secs - 1) * 1000 {
                late.push((now - t) as f64 / 1e6);
            }
        }
    }
    (q, late)
}

fn xstats(q: &Pie) -> tclab_core::qdisc::pie::PieXstats {
    let Some(Xstats::Pie(x)) = q.xstats() else {
        panic!("pie has xstats")
    };
    x
}

#[test]
fn an_overload_is_held_at_the_target_delay_without_reaching_the_limit() {
    // Unmanaged, the queue would grow by one packet a millisecond: 20 000 packets (20 s of delay) after
    // 20 s, far past limit 1000. PIE drops the excess early instead: the limit is never reached
    // (overlimit 0), every packet not sent nor queued was an early drop, and — the controller having an
    // integral term, so no steady-state error — the delay over the last second averages the 15 ms
    // target (RFC 8033). (In the first seconds the 150 ms burst allowance and the controller's
    // wind-up overshoot, then undershoot to the two-MTU floor below which PIE never drops.)
    let (q, late) = overload(&PieOptions::default(), 0, 20);
    let x = xstats(&q);
    assert_eq!(x.overlimit, 0);
    assert_eq!(x.dropped + 20_000 + q.stats().qlen, 40_000);
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    assert!((mean - 15.0).abs() < 3.0, "mean delay {mean:.1} ms");
}

#[test]
fn with_ecn_marks_replace_drops_while_the_probability_is_at_most_ten_percent() {
    // ECT(0) packets: PIE marks instead of dropping only while p ≤ 10 %; under this overload p must
    // reach ~½, so marks come first and drops take over. Both are counted.
    let o = PieOptions {
        ecn: Some(1),
        ..Default::default()
    };
    let (q, _) = overload(&o, 0x02, 5);
    let x = xstats(&q);
    assert!(x.ecn_mark > 0, "marks while p was small");
    assert!(x.dropped > 0, "drops once p passed 10 %");
    assert_eq!(x.overlimit, 0);
}

#[test]
fn a_short_burst_passes_in_the_burst_allowance() {
    // 100 packets at once into an idle PIE: no drop (150 ms of burst allowance, and p is 0).
    let mut q = Pie::new(&PieOptions::default(), &ENV, 0);
    for i in 0..100 {
        assert_eq!(
            q.enqueue(pkt(0), &mut Cx::new(i * 1000)),
            tclab_core::qdisc::Verdict::Success
        );
    }
    assert_eq!(xstats(&q).dropped, 0);
}

#[test]
fn fq_pie_serves_a_sparse_flow_before_a_bulk_flows_queue() {
    // fq_pie: a bulk flow arrives at twice the service rate; a sparse flow sends one packet every 50
    // ms. The sparse flow's queue is empty whenever its packet arrives, so the packet joins the new
    // list and leaves before the bulk flow's next (DRR with new-flow priority, RFC 8290): it waits at
    // most one bulk packet already on the wire — under 1 ms here — and PIE (per flow) never drops it,
    // its own queue never holding two MTUs. The bulk flow's queue is held near the 15 ms target.
    use tclab_core::qdisc::fq_pie::{FqPie, FqPieOptions};
    let mut q = FqPie::new(
        tclab_core::Handle::new(1, 0),
        &FqPieOptions::default(),
        &ENV,
        0,
    )
    .expect("valid");
    let sparse = |now| {
        let mut p = Packet::udp4([10, 0, 0, 9], 7000, [10, 0, 0, 2], 53, 0, 100);
        p.enqueue_ns = now;
        p
    };
    let (mut sparse_delays, mut bulk_late, mut sparse_sent) = (Vec::new(), Vec::new(), 0);
    for ms in 0..20_000u64 {
        for half in 0..2 {
            let now = ms * 1_000_000 + half * 500_000;
            let mut p = pkt(0);
            p.enqueue_ns = now;
            q.enqueue(p, &mut Cx::new(now));
        }
        if ms % 50 == 7 {
            let now = ms * 1_000_000 + 600_000;
            assert_eq!(
                q.enqueue(sparse(now), &mut Cx::new(now)),
                tclab_core::qdisc::Verdict::Success
            );
            sparse_sent += 1;
        }
        let now = ms * 1_000_000 + 999_000;
        if let Some(p) = q.dequeue(&mut Cx::new(now)) {
            let d = (now - p.enqueue_ns) as f64 / 1e6;
            if p.len == 100 {
                sparse_delays.push(d);
            } else if ms >= 19_000 {
                bulk_late.push(d);
            }
        }
    }
    assert_eq!(sparse_delays.len(), sparse_sent);
    assert!(
        sparse_delays.iter().all(|d| *d < 1.0),
        "{:?}",
        sparse_delays.iter().cloned().fold(0.0, f64::max)
    );
    let mean = bulk_late.iter().sum::<f64>() / bulk_late.len() as f64;
    assert!((mean - 15.0).abs() < 3.0, "bulk mean delay {mean:.1} ms");
}
/// ns-3's pie-queue-disc-test-suite.cc, tests 2–4: 400 packets of 1000 bytes enqueued one every 10 ms
/// (from 10 ms), 400 dequeues one every `dq_ms` ms (from `dq_ms`), MaxSize 300 packets, Tupdate 30 ms,
/// QueueDelayReference `target_ms`. Mapped onto the kernel's PIE: `limit 300 tupdate 30ms target …`;
/// ns-3's MaxBurstAllowance 100 ms is the kernel's fixed 150 ms, its DequeueThreshold (10 000 bytes) only
/// concerns the rate estimator, off here as in ns-3's default (delays from timestamps). Returns the
/// (unforced = early, forced = limit) drop counts.
fn ns3_vector(target_ms: u32, dq_ms: u64, seed: u64) -> (u32, u32) {
    let o = PieOptions {
        limit: Some(300),
        tupdate: Some(30_000),
        target: Some(target_ms * 1000),
        ..Default::default()
    };
    let mut q = Pie::new(&o, &ENV, 0);
    if seed != 0 {
        q.set_seed(seed);
    }
    let mut events: Vec<(u64, bool)> = (1..=400u64)
        .map(|i| (i * 10_000_000, true))
        .chain((1..=400u64).map(|i| (i * dq_ms * 1_000_000, false)))
        .collect();
    // ns-3 runs events of equal time in the order scheduled: the enqueues were scheduled first.
    events.sort_by_key(|&(t, enq)| (t, !enq));
    for (t, enq) in events {
        if enq {
            q.enqueue(pkt(0), &mut Cx::new(t));
        } else {
            q.dequeue(&mut Cx::new(t));
        }
    }
    let x = xstats(&q);
    (x.dropped - x.overlimit, x.overlimit)
}

#[test]
fn ns3_arrivals_every_10ms_departures_every_12ms() {
    // Test 2: arrivals at 100/s against departures at 83⅓/s: the delay grows past the 20 ms target, so
    // PIE drops early — and enough that the 300-packet limit is never reached (no forced drop).
    let (early2, forced2) = ns3_vector(20, 12, 0);
    eprintln!("ns-3 PIE vector: test 2 early drops {early2}");
    assert!(early2 > 0, "some unforced drops");
    assert_eq!(forced2, 0, "no forced drops");
    // Test 3: the same with an 80 ms target: fewer early drops. In the kernel's law the margin is thin:
    // the 67 packets of excess over the 4 s of arrivals must be dropped whatever the target, only the
    // standing queue left to drain at the end differs (and below 2 MTUs, 3 packets here, PIE never
    // drops, which raises the 20 ms target's floor to ~36 ms); over seeds 1–20 test 3 drops 61–63
    // against test 2's 63, so the run's seed (the default) gives strictly fewer, and any seed no more.
    let (early3, forced3) = ns3_vector(80, 12, 0);
    eprintln!("ns-3 PIE vector: test 3 early drops {early3}");
    assert!(
        early3 < early2,
        "a higher target drops less: {early3} vs {early2}"
    );
    for seed in 1..=20 {
        assert!(
            ns3_vector(80, 12, seed).0 <= ns3_vector(20, 12, seed).0,
            "seed {seed}"
        );
    }
    assert_eq!(forced3, 0);
    // Test 4: departures every 15 ms instead: more early drops.
    let (early4, forced4) = ns3_vector(20, 15, 0);
    eprintln!("ns-3 PIE vector: test 4 early drops {early4}");
    assert!(
        early4 > early2,
        "a slower link drops more: {early4} vs {early2}"
    );
    assert_eq!(forced4, 0);
}
