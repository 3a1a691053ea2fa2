//! SFB by hand (`sch_sfb.c`): the bins' BLUE probabilities, the penalty box of an inelastic flow, a
//! well-behaved flow untouched beside it, the mark/drop split past probability ½, the bucket and queue
//! limits, and the moving hash. Each assertion says what it expects and why.

use tclab_core::qdisc::sfb::{Sfb, SfbOptions, SfbXstats, MAX_PROB};
use tclab_core::qdisc::{Cx, DevEnv, DropReason, Qdisc, Verdict, Xstats};
use tclab_core::{Handle, Packet};

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};
const MS: u64 = 1_000_000;

/// tc's defaults, with the given overrides.
fn opts(f: impl FnOnce(&mut SfbOptions)) -> SfbOptions {
    let mut o = SfbOptions {
        rehash_interval: 600_000,
        warmup_time: 60_000,
        limit: 0,
        max: 25,
        bin_size: 20,
        increment: 33,
        decrement: 3,
        penalty_rate: 10,
        penalty_burst: 20,
    };
    f(&mut o);
    o
}

fn sfb(o: SfbOptions) -> Sfb {
    let mut q = Sfb::new(Handle(0x1_0000), &o, &ENV, 0);
    q.set_seed(7);
    q
}

/// A UDP packet of flow `port`; ECN-capable (ECT(0)) when `ect`.
fn pkt(port: u16, ect: bool) -> Packet {
    Packet::udp4(
        [10, 0, 0, 1],
        port,
        [10, 0, 0, 2],
        9,
        if ect { 2 } else { 0 },
        1000,
    )
}

fn x(q: &Sfb) -> SfbXstats {
    match q.xstats() {
        Some(Xstats::Sfb(x)) => x,
        other => panic!("sfb reports its counters, not {other:?}"),
    }
}

fn enq(q: &mut Sfb, p: Packet, now: u64) -> (Verdict, Option<DropReason>) {
    let mut cx = Cx::new(now);
    let v = q.enqueue(p, &mut cx);
    (v, cx.drops.first().map(|d| d.reason))
}

#[test]
fn an_inelastic_flow_is_held_to_its_penalty_rate() {
    // target 5, increment 1.0: the 6th packet of a flow finds its eight bins at 5 packets, their
    // probability jumps to 1, and the flow is inelastic — from then on it passes only on tokens:
    // penalty_burst 20 of them at first, then penalty_rate 10 per second (up to 10 s' worth).
    let mut q = sfb(opts(|o| {
        o.bin_size = 5;
        o.max = 1000;
        o.increment = MAX_PROB;
    }));
    for _ in 0..5 {
        assert_eq!(enq(&mut q, pkt(1, false), 0).0, Verdict::Success);
    }
    let passed = (0..40)
        .filter(|_| enq(&mut q, pkt(1, false), 0).0 == Verdict::Success)
        .count();
    assert_eq!(passed, 20, "the burst");
    assert_eq!(x(&q).penaltydrop, 20);
    assert_eq!(x(&q).maxprob, MAX_PROB);
    // One second later: 10 tokens.
    let passed = (0..40)
        .filter(|_| enq(&mut q, pkt(1, false), 1000 * MS).0 == Verdict::Success)
        .count();
    assert_eq!(passed, 10);
    // Meanwhile another flow shares at most a few of the eight bins: its smallest probability is 0
    // and all of its packets pass.
    for _ in 0..4 {
        assert_eq!(enq(&mut q, pkt(2, false), 1000 * MS).0, Verdict::Success);
    }
    assert_eq!(x(&q).earlydrop, 0);
}

#[test]
fn past_one_half_marks_turn_into_drops() {
    // increment = decrement = 49151 (0.75), target 1: a packet arriving at an empty queue sets its
    // bins back to 0 and passes; the next, finding 1 packet, raises them to 49151 and is marked with
    // probability 49151/65536 = 0.75 — of which r < (49151 − 32767)·2 = 32768, probability 0.5, is
    // dropped instead (earlydrop). So per cycle: 50 % dropped, 25 % CE-marked, 25 % untouched for an
    // ECN-capable flow; 75 % dropped for one that is not. 20 000 cycles: each count within 3 %
    // (its s.d. is under 0.6 %).
    for ect in [true, false] {
        let mut q = sfb(opts(|o| {
            o.bin_size = 1;
            o.max = 1000;
            o.increment = 49151;
            o.decrement = 49151;
        }));
        let mut cx = Cx::new(0);
        for _ in 0..20_000 {
            assert_eq!(enq(&mut q, pkt(1, ect), 0).0, Verdict::Success);
            enq(&mut q, pkt(1, ect), 0);
            while q.dequeue(&mut cx).is_some() {}
        }
        let s = x(&q);
        let near = |got: u32, want: f64| (got as f64 - want).abs() < 0.03 * want;
        if ect {
            assert!(near(s.earlydrop, 10_000.0), "earlydrop {}", s.earlydrop);
            assert!(near(s.marked, 5_000.0), "marked {}", s.marked);
        } else {
            assert!(near(s.earlydrop, 15_000.0), "earlydrop {}", s.earlydrop);
            assert_eq!(s.marked, 0);
        }
        // Drained: every bin back to 0 packets.
        assert_eq!(s.maxqlen, 0);
    }
}

#[test]
fn bucket_and_queue_limits() {
    // max 3: the 4th packet of a flow finds all its bins at 3 → bucketdrop (an overlimit).
    let mut q = sfb(opts(|o| {
        o.max = 3;
        o.bin_size = 100;
    }));
    for _ in 0..3 {
        assert_eq!(enq(&mut q, pkt(1, false), 0).0, Verdict::Success);
    }
    assert_eq!(
        enq(&mut q, pkt(1, false), 0),
        (Verdict::Cn, Some(DropReason::Overlimit))
    );
    assert_eq!(x(&q).bucketdrop, 1);
    assert_eq!(x(&q).maxqlen, 3);
    // limit 2 packets: the third, of any flow, is a queuedrop.
    let mut q = sfb(opts(|o| o.limit = 2));
    enq(&mut q, pkt(1, false), 0);
    enq(&mut q, pkt(2, false), 0);
    assert_eq!(
        enq(&mut q, pkt(3, false), 0),
        (Verdict::Cn, Some(DropReason::TailDrop))
    );
    assert_eq!(
        (x(&q).queuedrop, q.stats().overlimits, q.stats().drops),
        (1, 1, 1)
    );
}

#[test]
fn the_moving_hash_lets_a_flow_start_over() {
    // As in the penalty test, the flow is inelastic at 0 ms and its tokens are spent. With rehash 100
    // ms and no double buffering, the first arrival after 100 ms swaps to the other set of bins, where
    // this flow has no packets and probability 0: it passes again (until 5 of its packets are counted
    // there — none are, as the queued ones were counted in the old set).
    let mut q = sfb(opts(|o| {
        o.bin_size = 5;
        o.max = 1000;
        o.increment = MAX_PROB;
        o.rehash_interval = 100;
        o.warmup_time = 0;
        o.penalty_burst = 1;
    }));
    for _ in 0..10 {
        enq(&mut q, pkt(1, false), 0);
    }
    assert_eq!(
        x(&q).penaltydrop,
        4,
        "5 queued, 1 on the burst token, 4 dropped"
    );
    assert_eq!(enq(&mut q, pkt(1, false), 50 * MS).0, Verdict::Cn);
    for _ in 0..5 {
        assert_eq!(enq(&mut q, pkt(1, false), 101 * MS).0, Verdict::Success);
    }
    assert_eq!(x(&q).maxprob, 0, "the new set's bins");
}
