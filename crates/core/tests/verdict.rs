//! The enqueue verdict and the drop list: what became of the arriving packet (`NET_XMIT_*`), and which
//! packets were dropped, with their reasons. Each expectation names the kernel function it comes from
//! (`net/sched/sch_sfq.c` of Linux 6.12 unless said otherwise).

use tclab_core::engine::Flags;
use tclab_core::qdisc::sfq::SfqOptions;
use tclab_core::qdisc::{Cx, DropReason, QdiscOptions, Verdict};
use tclab_core::{Engine, Handle, Packet};

/// A UDP/IPv4 packet of `len` wire bytes from 10.0.0.`host`:`sport` to 10.0.1.1:5001.
fn udp(host: u8, sport: u16, len: u32, tag: u64) -> Packet {
    Packet {
        tag,
        ..Packet::udp4([10, 0, 0, host], sport, [10, 0, 1, 1], 5001, 0, len)
    }
}

fn sfq_engine(opts: SfqOptions) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Sfq(opts)),
        Flags::ADD,
        0,
    )
    .unwrap();
    e
}

/// (tag, reason, arriving) of every packet in the drop list.
fn dropped(cx: &Cx) -> Vec<(u64, DropReason, bool)> {
    cx.drops
        .iter()
        .map(|d| (d.pkt.tag, d.reason, d.arriving))
        .collect()
}

fn drain_tags(e: &mut Engine) -> Vec<u64> {
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    std::iter::from_fn(|| dev.dequeue(&mut cx))
        .map(|p| p.tag)
        .collect()
}

#[test]
fn sfq_headdrop_queues_the_arrival_and_reports_the_head() {
    // depth 3, headdrop: a flow holding 3 packets gets a 4th. `sfq_enqueue` (the `congestion_drop`
    // path) takes the slot's head out (`slot_dequeue_head`), drops it, queues the new packet and
    // answers NET_XMIT_CN. So the arriving packet is queued — it must not be reported lost — and the
    // packet dropped is the head, tag 0. (Before the truthful verdict: `Drop`, and the head unnamed.)
    let mut e = sfq_engine(SfqOptions {
        depth: 3,
        headdrop: true,
        ..Default::default()
    });
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..3 {
        let mut cx = Cx::new(0);
        assert_eq!(dev.enqueue(udp(1, 1, 100, i), &mut cx), Verdict::Success);
        assert!(cx.drops.is_empty());
    }
    let mut cx = Cx::new(0);
    let v = dev.enqueue(udp(1, 1, 100, 3), &mut cx);
    assert_eq!(
        v,
        Verdict::Cn,
        "sfq_enqueue: return NET_XMIT_CN after a head drop"
    );
    assert_ne!(
        v.to_sender(),
        Verdict::Drop,
        "the sender's packet is queued"
    );
    assert_eq!(dropped(&cx), [(0, DropReason::HeadDrop, false)]);
    let s = dev.root().q.stats();
    assert_eq!((s.drops, s.qlen, s.backlog), (1, 3, 300));
    assert_eq!(dev.drop_counts.get(DropReason::HeadDrop), 1);
    assert_eq!(drain_tags(&mut e), [1, 2, 3]);
}

#[test]
fn sfq_depth_without_headdrop_refuses_the_arrival() {
    // The same flow at its depth without headdrop: `qdisc_drop` of the arriving packet, NET_XMIT_DROP.
    let mut e = sfq_engine(SfqOptions {
        depth: 3,
        ..Default::default()
    });
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..3 {
        dev.enqueue(udp(1, 1, 100, i), &mut Cx::new(0));
    }
    let mut cx = Cx::new(0);
    assert_eq!(dev.enqueue(udp(1, 1, 100, 3), &mut cx), Verdict::Drop);
    assert_eq!(dropped(&cx), [(3, DropReason::TailDrop, true)]);
    assert_eq!(drain_tags(&mut e), [0, 1, 2]);
}

#[test]
fn sfq_overlimit_names_the_longest_flows_packet() {
    // limit 10: flow A (host 1) queues 8 packets, flow B (host 2) 2. B's third packet takes the qdisc
    // to 11 > limit: `sfq_drop` drops from the longest slot, A — its tail (tag 7), or its head (tag 0)
    // with headdrop. B's slot is unchanged, so `sfq_enqueue` answers NET_XMIT_SUCCESS: B's packet is
    // queued and the packet lost is A's, which only the drop list can tell. Then A's 9th packet overflows
    // again, A is still the longest: now the drop is from the arriving packet's own slot and the answer
    // is NET_XMIT_CN — without headdrop the tail dropped is the packet that just arrived (tag 8).
    for headdrop in [false, true] {
        let mut e = sfq_engine(SfqOptions {
            limit: 10,
            headdrop,
            ..Default::default()
        });
        let dev = e.device_mut("eth0").unwrap();
        for i in 0..8 {
            dev.enqueue(udp(1, 1, 100, i), &mut Cx::new(0));
        }
        for i in 0..2 {
            dev.enqueue(udp(2, 2, 100, 100 + i), &mut Cx::new(0));
        }
        let mut cx = Cx::new(0);
        let v = dev.enqueue(udp(2, 2, 100, 102), &mut cx);
        assert_eq!(
            v,
            Verdict::Success,
            "headdrop {headdrop}: another flow paid"
        );
        let victim = if headdrop { 0 } else { 7 };
        assert_eq!(
            dropped(&cx),
            [(victim, DropReason::Overlimit, false)],
            "headdrop {headdrop}"
        );

        let mut cx = Cx::new(0);
        let v = dev.enqueue(udp(1, 1, 100, 8), &mut cx);
        assert_eq!(v, Verdict::Cn, "headdrop {headdrop}: own flow paid");
        let expect = if headdrop {
            (1, DropReason::Overlimit, false)
        } else {
            (8, DropReason::Overlimit, true)
        };
        assert_eq!(dropped(&cx), [expect], "headdrop {headdrop}");
        let s = dev.root().q.stats();
        assert_eq!((s.drops, s.qlen), (2, 10));
        assert_eq!(dev.drop_counts.get(DropReason::Overlimit), 2);
        let mut left = drain_tags(&mut e);
        left.sort();
        let mut expected: Vec<u64> = (0..9).filter(|&t| t != victim && t != expect.0).collect();
        expected.extend(100..103);
        assert_eq!(left, expected, "headdrop {headdrop}");
    }
}

#[test]
fn verdicts_say_what_parents_count_and_senders_see() {
    // `net_xmit_drop_count`: everything but a stolen packet counts as a drop for a parent;
    // `dev_queue_xmit` masks the `__NET_XMIT_*` flags, so stolen and bypassed packets look sent.
    use Verdict::*;
    for (v, counts, sender) in [
        (Drop, true, Drop),
        (Cn, true, Cn),
        (Stolen, false, Success),
        (Bypass, true, Success),
    ] {
        assert_eq!(v.counts_drop(), counts, "{v:?}");
        assert_eq!(v.to_sender(), sender, "{v:?}");
    }
}
