//! fq_pie by hand (`sch_fq_pie.c`): a sparse flow isolated from a bulk one that PIE holds at its target,
//! the per-flow probability update in the kernel's fixed point with the timer's 2 048-flow runs, the
//! limit answered with CN, memory only counted, refused changes applying nothing.

use tclab_core::qdisc::fq_pie::{FqPie, FqPieOptions, FqPieXstats};
use tclab_core::qdisc::pie::{Pie, PieOptions};
use tclab_core::qdisc::pie_impl::{ns2ticks, MAX_PROB};
use tclab_core::qdisc::{Cx, DevEnv, Qdisc, QdiscOptions, Verdict, Xstats};
use tclab_core::{Handle, Packet};

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};
const H: Handle = Handle(0x1_0000);

/// A 1000-byte UDP packet that `skb->priority` 1:`flow` puts in fq_pie's flow `flow` (1-based).
fn pkt(flow: u32) -> Packet {
    let mut p = Packet::udp4(
        [10, 0, 0, 1],
        5000 + flow as u16,
        [10, 0, 0, 2],
        80,
        0,
        1000,
    );
    p.priority = 0x1_0000 | flow;
    p
}

fn xstats(q: &FqPie) -> FqPieXstats {
    let Some(Xstats::FqPie(x)) = q.xstats() else {
        panic!("fq_pie has xstats")
    };
    x
}

/// Bulk flow 1: two arrivals a millisecond (at 0 and 0.5 ms); sparse flow 2: one every 20 ms (at
/// 0.25 ms); one departure a millisecond (at 0.999 ms), for `secs`. Returns the sojourn times (ms) of
/// the sparse packets, and of the bulk packets sent in the last second.
fn bulk_and_sparse(q: &mut dyn Qdisc, secs: u64) -> (Vec<f64>, Vec<f64>) {
    let (mut sparse, mut bulk) = (Vec::new(), Vec::new());
    for ms in 0..secs * 1000 {
        let t = ms * 1_000_000;
        let mut p = pkt(1);
        p.enqueue_ns = t;
        q.enqueue(p, &mut Cx::new(t));
        if ms % 20 == 0 {
            let mut p = pkt(2);
            p.enqueue_ns = t + 250_000;
            q.enqueue(p, &mut Cx::new(t + 250_000));
        }
        let mut p = pkt(1);
        p.enqueue_ns = t + 500_000;
        q.enqueue(p, &mut Cx::new(t + 500_000));
        let now = t + 999_000;
        if let Some(p) = q.dequeue(&mut Cx::new(now)) {
            let d = (now - p.enqueue_ns) as f64 / 1e6;
            if p.priority & 0xffff == 2 {
                sparse.push(d);
            } else if ms >= (secs - 1) * 1000 {
                bulk.push(d);
            }
        }
    }
    (sparse, bulk)
}

#[test]
fn a_sparse_flow_waits_for_no_bulk_flow() {
    // The sparse flow's packet finds its queue empty, so the flow joins the *new* list and is served
    // at the next departure: 0.999 − 0.25 = 0.749 ms, every time. Its queue never holds two MTUs, so
    // PIE never drops it, and its delay samples are 0 (the flow is empty after each departure), so its
    // probability stays 0. The bulk flow, offered twice the link, is held by its own PIE near the
    // 15 ms target (the integral term leaves no steady-state error, RFC 8033) with early drops only.
    let mut q = FqPie::new(H, &FqPieOptions::default(), &ENV, 0).unwrap();
    let (sparse, bulk) = bulk_and_sparse(&mut q, 20);
    assert_eq!(sparse.len(), 1000, "every sparse packet sent");
    // The first one arrives at 0.25 ms behind the bulk flow's first packet, both new: the bulk flow
    // spends its 1514-byte quantum first (two 1000-byte packets, at 0.999 and 1.999 ms), then moves to
    // the old list, and the sparse packet leaves at 2.999 ms.
    assert!(
        (sparse[0] - 2.749).abs() < 1e-9,
        "first sparse packet {}",
        sparse[0]
    );
    assert!(
        sparse[1..].iter().all(|d| (d - 0.749).abs() < 1e-9),
        "sparse delays"
    );
    assert_eq!(q.flow_prob(1), 0, "the sparse flow's probability");
    assert!(q.flow_prob(0) > MAX_PROB / 4, "the bulk flow's probability");
    let mean = bulk.iter().sum::<f64>() / bulk.len() as f64;
    eprintln!("fq_pie bulk delay over the last second: {mean:.2} ms");
    assert!((mean - 15.0).abs() < 3.0, "bulk delay {mean:.1} ms");
    let x = xstats(&q);
    assert_eq!(x.overlimit, 0, "the limit (10 240) is never reached");
    assert!(x.dropped > 0);
    // In one PIE FIFO the same sparse packets wait behind the bulk queue: the target delay and more.
    let mut fifo = Pie::new(&PieOptions::default(), &ENV, 0);
    let (sparse, _) = bulk_and_sparse(&mut fifo, 20);
    let late = &sparse[sparse.len() - 50..];
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    eprintln!("sparse delay behind one PIE FIFO: {mean:.2} ms");
    assert!(
        mean > 10.0,
        "sparse delay behind a shared PIE queue {mean:.1} ms"
    );
}

#[test]
fn the_timer_updates_2048_flows_a_run_in_the_kernels_fixed_point() {
    // 4096 flows; 50 packets in flow 4096 at t = 0 (the burst allowance takes them), one sent at
    // 400 ms: its delay sample is 400 ms (6 250 000 ticks of 64 ns), the flow still backlogged. The
    // timer's first run, 500 ms after creation, updates flows 1–2048 only; flows remaining, the next
    // run is one jiffy later (1 ms) and reaches flow 4096. Then, by pie_calculate_probability with
    // p = 0: α = 2·(MAX_PROB/15 625 000) >> 4 and β = 20·(…) >> 4, each halved (p < 10 %) and divided
    // by 4 five times (p below 1 %, 0.1 %, … 0.0001 %); delta = α·(qdelay − 15 ms) + β·(qdelay − 0),
    // plus 2 % since qdelay > 250 ms.
    let o = FqPieOptions {
        flows: Some(4096),
        ..Default::default()
    };
    let mut q = FqPie::new(H, &o, &ENV, 0).unwrap();
    let mut p = pkt(4096);
    for _ in 0..50 {
        p.priority = 0x1_0000 | 4096;
        assert_eq!(q.enqueue(p.clone(), &mut Cx::new(0)), Verdict::Success);
    }
    assert!(q.dequeue(&mut Cx::new(400_000_000)).is_some());
    q.enqueue(pkt(1), &mut Cx::new(500_000_000));
    assert_eq!(
        q.flow_prob(4095),
        0,
        "flow 4096 not reached by the first run"
    );
    q.enqueue(pkt(1), &mut Cx::new(501_000_000));
    let unit = MAX_PROB / 15_625_000;
    let alpha = ((2 * unit) >> 4) >> 1 >> 10;
    let beta = ((20 * unit) >> 4) >> 1 >> 10;
    let qdelay = ns2ticks(400_000_000);
    let want = alpha * (qdelay - ns2ticks(15_000_000)) + beta * qdelay + MAX_PROB / 50;
    assert_eq!(q.flow_prob(4095), want);
}

#[test]
fn the_limit_drops_the_arrival_with_cn_and_memory_is_only_counted() {
    // limit 5: the sixth arrival is dropped, counted as overlimit and dropped, answered NET_XMIT_CN.
    let o = FqPieOptions {
        pie: PieOptions {
            limit: Some(5),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut q = FqPie::new(H, &o, &ENV, 0).unwrap();
    for _ in 0..5 {
        assert_eq!(q.enqueue(pkt(1), &mut Cx::new(0)), Verdict::Success);
    }
    let mut cx = Cx::new(0);
    assert_eq!(q.enqueue(pkt(1), &mut cx), Verdict::Cn);
    assert_eq!(cx.drops.len(), 1);
    let x = xstats(&q);
    assert_eq!((x.overlimit, x.dropped, x.packets_in), (1, 1, 5));
    assert_eq!((q.stats().qlen, q.stats().drops), (5, 1));
    // memory_limit 2000 with 1256 bytes charged a packet (1000 + 256): the check is usage > limit +
    // this packet's charge, so the 4th arrival (3768 > 3256) counts one overmemory — and is queued.
    let o = FqPieOptions {
        memory_limit: Some(2000),
        ..Default::default()
    };
    let mut q = FqPie::new(H, &o, &ENV, 0).unwrap();
    for _ in 0..4 {
        assert_eq!(q.enqueue(pkt(1), &mut Cx::new(0)), Verdict::Success);
    }
    let x = xstats(&q);
    assert_eq!(
        (x.overmemory, x.memory_usage, q.stats().qlen),
        (1, 4 * 1256, 4)
    );
}

#[test]
fn refused_options_apply_nothing() {
    let err = |o: FqPieOptions| {
        FqPie::new(H, &o, &ENV, 0)
            .err()
            .expect("refused")
            .to_string()
    };
    for f in [0, 65537] {
        let e = err(FqPieOptions {
            flows: Some(f),
            ..Default::default()
        });
        assert!(
            e.contains("Number of flows must range in [1..65536]"),
            "{e}"
        );
    }
    let e = err(FqPieOptions {
        quantum: Some((1 << 20) + 1),
        ..Default::default()
    });
    assert!(e.contains("integer out of range"), "{e}");
    // A change naming flows is refused whole: the limit given beside it is not applied.
    let mut q = FqPie::new(H, &FqPieOptions::default(), &ENV, 0).unwrap();
    let before = q.dump();
    let change = QdiscOptions::FqPie(FqPieOptions {
        pie: PieOptions {
            limit: Some(7),
            ..Default::default()
        },
        flows: Some(1024),
        ..Default::default()
    });
    let e = q.change(&change, &ENV, 0).expect_err("refused").to_string();
    assert!(e.contains("Number of flows cannot be changed"), "{e}");
    assert_eq!(q.dump(), before);
}
