//! GRED by hand (`sch_gred.c`): the drop precedence from `tc_index`, the default VQ, pass-through without
//! one, per-VQ limits, and the three ways of averaging — plain, RIO (better prios' averages add up) and
//! WRED (one average of the whole queue). Every VQ here has Wlog 0, so its average is exactly the
//! backlog the arriving packet finds (`avg ← avg + backlog − avg`), and each decision can be derived by
//! hand from the packets already queued.

use tclab_core::qdisc::gred::{Gred, GredOptions, GredSetup, GredVqDump, GredVqOptions};
use tclab_core::qdisc::red::{TC_RED_ECN, TC_RED_HARDDROP};
use tclab_core::qdisc::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, Verdict};
use tclab_core::Packet;

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};

fn setup(dps: u32, def_dp: u32, grio: bool, limit: Option<u32>) -> Gred {
    Gred::new(
        &GredOptions::Setup(GredSetup {
            dps,
            def_dp,
            grio,
            flags: 0,
            limit,
        }),
        &ENV,
        0,
    )
    .expect("a valid table")
}

/// A VQ with Wlog 0 (the average is the backlog), thresholds `min`/`max` bytes, limit `limit`.
fn vq(dp: u32, prio: u8, min: u32, max: u32, limit: u32, flags: u32) -> QdiscOptions {
    QdiscOptions::Gred(GredOptions::Vq(GredVqOptions {
        dp,
        limit,
        qth_min: min,
        qth_max: max,
        wlog: 0,
        plog: 0,
        scell_log: 0,
        prio,
        stab: vec![0; 256],
        max_p: 1 << 30,
        flags,
    }))
}

fn pkt(dp: u16, len: u32) -> Packet {
    Packet {
        tc_index: dp,
        ..Packet::of_len(len)
    }
}

/// An IPv4 packet that can carry a CE mark (ECT(0)).
fn ect_pkt(dp: u16, len: u32) -> Packet {
    Packet {
        tc_index: dp,
        ..Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x02, len)
    }
}

fn vqs(q: &Gred) -> Vec<GredVqDump> {
    match q.dump() {
        QdiscOptions::Gred(GredOptions::Dump { vqs, .. }) => vqs,
        o => panic!("gred dumps its table, not {o:?}"),
    }
}

fn enq(q: &mut Gred, p: Packet) -> (Verdict, Vec<DropReason>) {
    let mut cx = Cx::new(0);
    let v = q.enqueue(p, &mut cx);
    (v, cx.drops.iter().map(|d| d.reason).collect())
}

#[test]
fn without_a_default_vq_every_packet_passes_within_the_qdisc_limit() {
    // `setup vqs 4 default 1`, no VQ configured: `gred_enqueue` queues whatever fits in 3000 bytes.
    let mut q = setup(4, 1, false, Some(3000));
    assert_eq!(enq(&mut q, pkt(0, 1500)).0, Verdict::Success);
    assert_eq!(enq(&mut q, pkt(2, 1500)).0, Verdict::Success);
    assert_eq!(
        enq(&mut q, pkt(3, 1)),
        (Verdict::Drop, vec![DropReason::TailDrop]),
        "3001 bytes would exceed the limit"
    );
    assert_eq!(q.stats().qlen, 2);
    assert!(vqs(&q).is_empty());
}

#[test]
fn the_dp_is_tc_index_low_bits_and_unknown_dps_go_to_the_default() {
    let mut q = setup(4, 1, false, None);
    for dp in [0, 1] {
        q.change(&vq(dp, 0, 100_000, 200_000, 100_000, 0), &ENV, 0)
            .expect("VQ accepted");
    }
    // DP 0 → VQ 0; 0x11 & 15 = 1 → VQ 1; DP 3 (no VQ) and DP 9 (≥ vqs) → the default, VQ 1.
    for t in [0u16, 0x11, 3, 9] {
        assert_eq!(enq(&mut q, pkt(t, 1000)).0, Verdict::Success);
    }
    let d = vqs(&q);
    assert_eq!(
        d.iter()
            .map(|v| (v.dp, v.packetsin, v.backlog))
            .collect::<Vec<_>>(),
        vec![(0, 1, 1000), (1, 3, 3000)]
    );
    // Dequeued in FIFO order, each taken off the VQ it was charged to (the default's DP is written back
    // into tc_index): all VQs empty afterwards.
    let mut cx = Cx::new(0);
    let out: Vec<u16> = std::iter::from_fn(|| q.dequeue(&mut cx).map(|p| p.tc_index)).collect();
    assert_eq!(out, vec![0, 0x11, 1, 1]);
    assert!(vqs(&q).iter().all(|v| v.backlog == 0));
}

#[test]
fn the_red_law_per_vq_early_forced_and_pdrop() {
    // VQ 0: min 1000, max 2000, limit 10 000; 1000-byte packets. The average (Wlog 0) is the backlog
    // found: 0 → queue; 1000 (= min) → between, and the first packet in the band only draws qR;
    // 2000 (= max) → forced drop.
    let mut q = setup(1, 0, false, None);
    q.change(&vq(0, 0, 1000, 2000, 10_000, 0), &ENV, 0)
        .expect("VQ accepted");
    assert_eq!(enq(&mut q, pkt(0, 1000)).0, Verdict::Success);
    assert_eq!(enq(&mut q, pkt(0, 1000)).0, Verdict::Success);
    assert_eq!(
        enq(&mut q, pkt(0, 1000)),
        (Verdict::Cn, vec![DropReason::Aqm])
    );
    let d = &vqs(&q)[0];
    assert_eq!((d.forced_drop, d.prob_drop, d.pdrop), (1, 0, 0));
    assert_eq!(d.qave, 2000, "the average the last arrival found");
    assert_eq!(q.stats().overlimits, 1);

    // A VQ limit of 1500 bytes: the second 1000-byte packet would make 2000 > 1500 — a pdrop, below
    // min (5000) so RED says nothing.
    let mut q = setup(1, 0, false, None);
    q.change(&vq(0, 0, 5000, 9000, 1500, 0), &ENV, 0)
        .expect("VQ accepted");
    assert_eq!(enq(&mut q, pkt(0, 1000)).0, Verdict::Success);
    assert_eq!(
        enq(&mut q, pkt(0, 1000)),
        (Verdict::Drop, vec![DropReason::TailDrop])
    );
    assert_eq!(vqs(&q)[0].pdrop, 1);
}

#[test]
fn ecn_marks_at_max_unless_harddrop() {
    for (flags, marked) in [
        (TC_RED_ECN as u32, true),
        ((TC_RED_ECN | TC_RED_HARDDROP) as u32, false),
    ] {
        let mut q = setup(1, 0, false, None);
        q.change(&vq(0, 0, 1000, 2000, 10_000, flags), &ENV, 0)
            .expect("VQ accepted");
        enq(&mut q, ect_pkt(0, 1000));
        enq(&mut q, ect_pkt(0, 1000));
        let (v, _) = enq(&mut q, ect_pkt(0, 1000));
        let d = &vqs(&q)[0];
        if marked {
            assert_eq!((v, d.forced_mark, d.forced_drop), (Verdict::Success, 1, 0));
        } else {
            assert_eq!((v, d.forced_mark, d.forced_drop), (Verdict::Cn, 0, 1));
        }
    }
}

#[test]
fn rio_adds_the_averages_of_better_prios() {
    // VQ 0 prio 1 (min 5000, max 10 000) holds 3000 bytes; its average is 2000 (what its third packet
    // found). VQ 1 prio 2 (min 1000, max 2000) is empty. Its next packet is decided on 0 + 2000 = max:
    // a forced drop under grio; without grio on its own average 0: queued.
    for grio in [true, false] {
        let mut q = setup(2, 0, grio, None);
        q.change(&vq(0, 1, 5000, 10_000, 100_000, 0), &ENV, 0)
            .expect("VQ 0");
        q.change(&vq(1, 2, 1000, 2000, 100_000, 0), &ENV, 0)
            .expect("VQ 1");
        for _ in 0..3 {
            assert_eq!(enq(&mut q, pkt(0, 1000)).0, Verdict::Success);
        }
        let v = enq(&mut q, pkt(1, 1000)).0;
        assert_eq!(
            v,
            if grio { Verdict::Cn } else { Verdict::Success },
            "grio {grio}"
        );
        let prios: Vec<u8> = vqs(&q).iter().map(|v| v.prio).collect();
        // Outside RIO every VQ has GRED_DEF_PRIO (8), whatever was asked.
        assert_eq!(prios, if grio { vec![1, 2] } else { vec![8, 8] });
    }
}

#[test]
fn wred_one_average_of_the_whole_queue() {
    // Two VQs of the same prio under grio switch to WRED: VQ 1 (min 1000, max 2000) decides on the
    // whole queue's 2000 bytes — all of them VQ 0's — and drops; plain mode would see its own 0.
    let mut q = setup(2, 0, true, None);
    q.change(&vq(0, 3, 50_000, 90_000, 100_000, 0), &ENV, 0)
        .expect("VQ 0");
    q.change(&vq(1, 3, 1000, 2000, 100_000, 0), &ENV, 0)
        .expect("VQ 1");
    enq(&mut q, pkt(0, 1000));
    enq(&mut q, pkt(0, 1000));
    assert_eq!(enq(&mut q, pkt(1, 1000)).0, Verdict::Cn);
    // Both VQs report the queue's backlog.
    assert!(vqs(&q).iter().all(|v| v.backlog == 2000));
}

#[test]
fn refusals_leave_the_qdisc_as_it_was() {
    let mut q = setup(4, 1, false, None);
    let err = |q: &mut Gred, o: &QdiscOptions| q.change(o, &ENV, 0).err().map(|e| e.to_string());
    assert!(err(&mut q, &vq(4, 0, 1000, 2000, 10_000, 0))
        .is_some_and(|e| e.contains("virtual queue index above virtual queue count")));
    // min > max: `red_check_params`.
    assert!(err(&mut q, &vq(0, 0, 3000, 2000, 10_000, 0))
        .is_some_and(|e| e.contains("invalid RED parameters")));
    assert!(vqs(&q).is_empty());
    // Table flags and VQ flags are exclusive: a VQ with ecn, then `setup … harddrop`.
    q.change(&vq(0, 0, 1000, 2000, 10_000, TC_RED_ECN as u32), &ENV, 0)
        .expect("VQ with its own flags");
    let table_flags = QdiscOptions::Gred(GredOptions::Setup(GredSetup {
        dps: 4,
        def_dp: 1,
        grio: false,
        flags: TC_RED_HARDDROP,
        limit: None,
    }));
    assert!(
        err(&mut q, &table_flags).is_some_and(|e| e.contains("per-virtual queue flags are used"))
    );
    // Shrinking the table destroys the VQs past it.
    let shrink = QdiscOptions::Gred(GredOptions::Setup(GredSetup {
        dps: 1,
        def_dp: 0,
        ..Default::default()
    }));
    q.change(&vq(2, 0, 1000, 2000, 10_000, TC_RED_ECN as u32), &ENV, 0)
        .expect("VQ 2");
    q.change(&shrink, &ENV, 0).expect("one VQ left");
    assert_eq!(vqs(&q).iter().map(|v| v.dp).collect::<Vec<_>>(), vec![0]);
    // A VQ at creation is refused.
    assert!(Gred::new(
        &match vq(0, 0, 1000, 2000, 10_000, 0) {
            QdiscOptions::Gred(o) => o,
            _ => unreachable!(),
        },
        &ENV,
        0
    )
    .is_err());
}
