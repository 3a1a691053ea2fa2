//! CAKE and GSO super-packets (`cake_enqueue`, `cake_overhead` of Linux 6.12's sch_cake.c): with
//! `split-gso` (the default) a super-packet is cut into its frames at enqueue, each queued and charged on
//! its own; with `no-split-gso` it is queued whole but charged the overhead of each of its frames. The
//! figures are derived by hand below.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

/// TCP options of an established Linux segment: NOP, NOP, timestamps (a 32-byte TCP header).
const TS_OPTS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];

/// An skb of 4 × 1448 payload bytes made GSO: 4 frames of 14 + 20 + 32 + 1448 = 1514 bytes, charged
/// 6056 (`qdisc_pkt_len_init`).
fn super_packet() -> Packet {
    let mut p = Packet::tcp4(
        [10, 0, 0, 1],
        40000,
        [10, 0, 1, 1],
        5201,
        0x10,
        1000,
        1,
        &TS_OPTS,
        4 * 1448,
    );
    p.set_gso(1448);
    assert_eq!((p.gso_segs, p.len), (4, 6056));
    p
}

/// CAKE as eth0's root with `opts`, offered one super-packet at time 0 and drained: the lengths that
/// left, the wake-up the shaper asked for after the first, and `tc -s qdisc show` before the drain.
fn one_through(opts: &str) -> (Vec<u32>, u64, String) {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    tc(&mut e, &format!("qdisc add dev eth0 root cake {opts}"));
    let dev = e.device_mut("eth0").unwrap();
    dev.enqueue(super_packet(), &mut Cx::new(0));
    // A second flow's packet behind it shows when the shaper lets the next one go.
    let mut ack = Packet::tcp4(
        [10, 0, 0, 2],
        40001,
        [10, 0, 1, 1],
        5202,
        0x10,
        1,
        1,
        &TS_OPTS,
        0,
    );
    ack.len = 66;
    dev.enqueue(ack, &mut Cx::new(0));
    let shown = tc(&mut e, "-s qdisc show dev eth0");
    let dev = e.device_mut("eth0").unwrap();
    let (mut sent, mut now, mut first_wake) = (Vec::new(), 0, 0);
    while now < 10_000_000_000 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => sent.push(p.len),
            None => match cx.wake_at {
                Some(w) => {
                    if first_wake == 0 {
                        first_wake = w;
                    }
                    now = w
                }
                None => break,
            },
        }
    }
    (sent, first_wake, shown)
}

#[test]
fn split_gso_queues_the_frames() {
    // Linux: skb_gso_segment, each segment queued with its own length: qlen 4 + the ACK, and the
    // largest packet CAKE saw a 1514-byte frame (raw: no offset taken off), not the 6056-byte skb.
    let (sent, _, shown) = one_through("bandwidth 100mbit");
    assert!(shown.contains("backlog 6122b 5p"), "{shown}");
    assert!(
        shown.contains("min/max network layer size:           66 /    1514"),
        "{shown}"
    );
    // The two flows alternate by DRR: the super-packet's first frame, the ACK, then the other three.
    assert_eq!(sent.iter().filter(|&&l| l == 1514).count(), 4, "{sent:?}");
    assert_eq!(sent.len(), 5, "{sent:?}");
}

#[test]
fn no_split_gso_charges_every_frames_overhead() {
    // Queued whole, but cake_overhead charges each frame: with ATM and 40 bytes of overhead a 1500-byte
    // network packet is ⌈1540 / 48⌉ = 33 cells, 1749 bytes, so the super-packet costs 4 × 1749 = 6996
    // bytes of the 1 Mbit/s shaper: 55.968 ms before the ACK may follow (not the 6731 bytes, 53.848 ms,
    // of one 6042-byte packet's cells).
    let (sent, wake, shown) = one_through("bandwidth 1mbit atm overhead 40 no-split-gso");
    assert!(shown.contains("backlog 6122b 2p"), "{shown}");
    assert!(
        shown.contains("min/max overhead-adjusted size:      106 /    1749"),
        "{shown}"
    );
    assert_eq!(sent, [6056, 66]);
    assert_eq!(wake, 55_968_000, "the shaper's next send time");
}
