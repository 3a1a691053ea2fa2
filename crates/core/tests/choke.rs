//! CHOKe by hand (`sch_choke.c`): once RED's average passes `min`, an arriving packet is compared with a
//! random queued one and both are dropped when they share a flow — so a flow that fills the queue loses
//! in proportion to its share, and a flow with nothing queued is never matched.

use tclab_core::qdisc::choke::Choke;
use tclab_core::qdisc::red::RedOptions;
use tclab_core::qdisc::{Cx, Qdisc, Verdict, Xstats};
use tclab_core::Packet;

/// limit 1000 packets, min 5, max 900; Wlog 1 (the average moves half way per arrival); max_P of 1 in
/// 2^32, so RED's own probabilistic drops never happen and only CHOKe's matches act between the
/// thresholds.
fn choke() -> Choke {
    let o = RedOptions {
        limit: 1000,
        qth_min: 5,
        qth_max: 900,
        wlog: 1,
        plog: 0,
        scell_log: 0,
        stab: vec![0; 256],
        max_p: 1,
        flags: 0,
    };
    Choke::new(&o, 0).expect("valid")
}

fn pkt(sport: u16) -> Packet {
    Packet::udp4([10, 0, 0, 1], sport, [10, 0, 0, 2], 80, 0, 1000)
}

fn xstats(q: &Choke) -> (u32, u32) {
    let Some(Xstats::Choke(x)) = q.xstats() else {
        panic!("choke has xstats")
    };
    (x.matched, x.early)
}

#[test]
fn a_flow_alone_in_the_queue_is_matched_once_the_average_passes_min() {
    // Queue length k at arrival k while all are queued; the average, scaled by 2^Wlog = 2 as the
    // kernel keeps it (2·avg ← 2·avg + qlen − avg, truncated): 0, 1, 3, 5, 7, 9, 11 — above min
    // (5·2 = 10) at arrival 6. From then, every arrival of the only flow draws one of its own
    // packets: both go (a match), the queue loses one, and the average stays above min.
    let mut q = choke();
    let mut verdicts = Vec::new();
    for k in 0..40u64 {
        let mut cx = Cx::new(1_000 * (k + 1));
        let v = q.enqueue(pkt(5000), &mut cx);
        if v == Verdict::Cn {
            // Both packets are in the drop list: the queued one, then the arriving one.
            assert_eq!(cx.drops.len(), 2, "arrival {k}");
        }
        verdicts.push(v);
    }
    assert!(
        verdicts[..6].iter().all(|v| *v == Verdict::Success),
        "{verdicts:?}"
    );
    assert_eq!(verdicts[6], Verdict::Cn);
    let (matched, early) = xstats(&q);
    assert_eq!(early, 0, "RED itself never dropped");
    assert_eq!(
        matched as usize,
        verdicts.iter().filter(|v| **v == Verdict::Cn).count()
    );
    // Each match removes one queued packet and refuses the arriving one: the queue stays near min.
    assert!(q.stats().qlen <= 6, "{}", q.stats().qlen);
    // A packet of another flow, with none of its own queued, cannot be matched: it is queued.
    let before = q.stats().qlen;
    assert_eq!(
        q.enqueue(pkt(6000), &mut Cx::new(100_000)),
        Verdict::Success
    );
    assert_eq!(q.stats().qlen, before + 1);
}

#[test]
fn the_flood_loses_far_more_than_the_light_flow() {
    // Arrivals at twice the service rate, 9 in 10 from a flood, 1 in 10 from a light flow: half the
    // packets must go. A match needs the drawn packet to share the arriving one's flow, so a flow's
    // packets are matched about as often as it makes up the queue — the flood nearly always, the light
    // flow rarely — and RED never acts here (max_P ≈ 0). The light flow keeps most of its packets.
    let mut q = choke();
    let (mut sent, mut lost) = ([0u32; 2], [0u32; 2]);
    let flow = |p: &Packet| usize::from(u16::from_be_bytes([p.data[20], p.data[21]]) == 6000);
    for k in 0..20_000u64 {
        let mut cx = Cx::new(1_000 * (k + 1));
        let p = pkt(if k % 10 == 3 { 6000 } else { 5000 });
        sent[flow(&p)] += 1;
        q.enqueue(p, &mut cx);
        if k % 2 == 0 {
            q.dequeue(&mut cx);
        }
        for d in cx.drops.take() {
            lost[flow(&d.pkt)] += 1;
        }
    }
    let rate = |i: usize| lost[i] as f64 / sent[i] as f64;
    eprintln!("flood {:.3}, light {:.3}", rate(0), rate(1));
    assert!(
        rate(0) > 0.5,
        "the flood loses more than half: {:.3}",
        rate(0)
    );
    assert!(
        rate(1) < 0.2,
        "the light flow loses under a fifth: {:.3}",
        rate(1)
    );
}
