//! CAKE in virtual time, against expectations derived by hand from `net/sched/sch_cake.c` (Linux 6.12)
//! and the figures of Høiland-Jørgensen, Täht, Morton, "Piece of CAKE" (2018). Each test says what it
//! expects and where the number comes from.

use tclab_core::qdisc::cake::{ack, atm, diffserv, flow_mode, Cake, CakeOptions, QUEUES};
use tclab_core::qdisc::{ClassOps, Cx, DevEnv, DropReason, Qdisc, QdiscOptions, Verdict, Xstats};
use tclab_core::{Handle, Packet};

const MS: u64 = 1_000_000;
const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};

fn cake(o: CakeOptions) -> Cake {
    Cake::new(Handle::new(1, 0), &o, &ENV)
}

fn mbit(m: u64) -> u64 {
    m * 1_000_000 / 8
}

/// A 1514-byte UDP packet from 10.0.0.`host`:`sport` to 192.0.2.`server`, DSCP `dscp`, ECT(0) if `ect`.
fn udp(host: u8, sport: u16, server: u8, dscp: u8, ect: bool) -> Packet {
    Packet::udp4(
        [10, 0, 0, host],
        sport,
        [192, 0, 2, server],
        5001,
        (dscp << 2) | (ect as u8 * 2),
        1514,
    )
}

fn tin_rates(q: &Cake) -> Vec<u64> {
    q.tin_params().iter().map(|p| p.1).collect()
}

#[test]
fn diffserv_tins_have_the_kernels_threshold_rates() {
    // cake_config_diffserv3: tin 0 best effort = rate, tin 1 bulk = rate >> 4, tin 2 voice = rate >> 2.
    let q = cake(CakeOptions {
        base_rate: Some(mbit(20)),
        ..Default::default()
    });
    assert_eq!(tin_rates(&q), vec![2_500_000, 156_250, 625_000]);
    // diffserv4 adds video = rate >> 1 as tin 2, voice moves to tin 3.
    let q = cake(CakeOptions {
        base_rate: Some(mbit(20)),
        diffserv_mode: Some(diffserv::DIFFSERV4),
        ..Default::default()
    });
    assert_eq!(tin_rates(&q), vec![2_500_000, 156_250, 1_250_000, 625_000]);
    // diffserv8: each tin 7/8 of the previous (integer arithmetic: rate * 7 >> 3).
    let q = cake(CakeOptions {
        base_rate: Some(8000),
        diffserv_mode: Some(diffserv::DIFFSERV8),
        ..Default::default()
    });
    assert_eq!(
        tin_rates(&q),
        vec![8000, 7000, 6125, 5359, 4689, 4102, 3589, 3140]
    );
}

#[test]
fn per_tin_target_is_one_and_a_half_mtu_times_or_5ms_and_interval_follows() {
    // cake_set_rate: target = max(1.5 × MTU time, 5 ms), interval = max(rtt + target − 5 ms, 2 × target),
    // MTU = psched_mtu = 1514 bytes.
    // At 100 Mbit/s the MTU takes 121 µs: target 5 ms, interval 100 ms exactly.
    let q = cake(CakeOptions {
        base_rate: Some(mbit(100)),
        ..Default::default()
    });
    let (p, _, _) = q.tin_params()[0];
    assert_eq!((p.target, p.interval), (5_000_000, 100_000_000));
    // At 1 Mbit/s (best-effort tin) the MTU takes 1514 × 8 µs = 12.112 ms: target 18.168 ms, interval
    // 100 + 18.168 − 5 = 113.168 ms (the fixed-point time per byte is exact to 1 ns per byte here).
    let q = cake(CakeOptions {
        base_rate: Some(mbit(1)),
        ..Default::default()
    });
    let (p, _, _) = q.tin_params()[0];
    assert!(
        (p.mtu_time as i64 - 12_112_000).abs() < 1514,
        "{}",
        p.mtu_time
    );
    assert!((p.target as i64 - 18_168_000).abs() < 2000, "{}", p.target);
    assert!(
        (p.interval as i64 - 113_168_000).abs() < 2000,
        "{}",
        p.interval
    );
    // The bulk tin at 1/16 of that: MTU time 193.79 ms, target 290.69 ms, interval = 2 × target.
    let (b, _, _) = q.tin_params()[1];
    assert!(
        (b.target as i64 - 290_688_000).abs() < 30_000,
        "{}",
        b.target
    );
    assert_eq!(b.interval, 2 * b.target);
}

#[test]
fn flow_quantum_is_rate_over_4096_clamped_to_300_and_1514() {
    // flow_quantum = clamp(rate >> 12, 300, 1514) bytes; unlimited: 1514.
    let quantum = |bps: u64| {
        let q = cake(CakeOptions {
            base_rate: Some(bps),
            diffserv_mode: Some(diffserv::BESTEFFORT),
            ..Default::default()
        });
        q.tin_params()[0].2
    };
    assert_eq!(quantum(mbit(1)), 300); // 125000 >> 12 = 30
    assert_eq!(quantum(mbit(40)), 1220); // 5e6 >> 12 = 1220
    assert_eq!(quantum(mbit(100)), 1514); // 12.5e6 >> 12 = 3051
    assert_eq!(quantum(0), 1514);
}

#[test]
fn atm_cells_and_ptm_coding_are_charged() {
    // With an overhead set the Ethernet header (14 bytes) is taken off first; ATM: 48 bytes of payload a
    // 53-byte cell, rounded up — 48 bytes cost one cell, 49 bytes two.
    let mut q = cake(CakeOptions {
        atm: Some(atm::ATM),
        overhead: Some(0),
        ..Default::default()
    });
    assert_eq!(q.charged_len(14 + 48), 53);
    assert_eq!(q.charged_len(14 + 49), 106);
    // pppoe-llcsnap (+40) on a 1500-byte IP packet: 1540 bytes → 33 cells → 1749 bytes.
    let mut q = cake(CakeOptions {
        atm: Some(atm::ATM),
        overhead: Some(40),
        ..Default::default()
    });
    assert_eq!(q.charged_len(1514), 33 * 53);
    // PTM: one byte per 64 or part of it: 64 → 65, 65 → 67.
    let mut q = cake(CakeOptions {
        atm: Some(atm::PTM),
        overhead: Some(0),
        ..Default::default()
    });
    assert_eq!(q.charged_len(14 + 64), 65);
    assert_eq!(q.charged_len(14 + 65), 67);
    // mpu: never less than it (docsis: overhead 18, mpu 64 → a 40-byte packet costs 64).
    let mut q = cake(CakeOptions {
        overhead: Some(18),
        mpu: Some(64),
        ..Default::default()
    });
    assert_eq!(q.charged_len(14 + 40), 64);
    // raw (the default): the length as the qdisc sees it, Ethernet header included.
    let mut q = cake(CakeOptions::default());
    assert_eq!(q.charged_len(1514), 1514);
}

/// Dequeue everything, advancing virtual time to each wake-up; (time of each packet, packet).
fn drain(q: &mut Cake, mut now: u64, limit: usize) -> Vec<(u64, Packet)> {
    let mut out = Vec::new();
    while out.len() < limit {
        let mut cx = Cx::new(now);
        match q.dequeue(&mut cx) {
            Some(p) => out.push((now, p)),
            None => match cx.wake_at {
                Some(w) if w > now => now = w,
                _ => break,
            },
        }
    }
    out
}

#[test]
fn the_shaper_sends_at_the_configured_rate() {
    // 1000 packets of 1514 bytes queued at once behind `bandwidth 10mbit` (1.25 MB/s): packet k leaves
    // at k × 1514 / 1.25e6 s, so the last (k = 999) at 1.210 s.
    let mut q = cake(CakeOptions {
        base_rate: Some(mbit(10)),
        diffserv_mode: Some(diffserv::BESTEFFORT),
        ..Default::default()
    });
    for i in 0..1000 {
        let mut cx = Cx::new(0);
        // ECN-capable: the 1.2 s standing queue makes COBALT signal, by marks rather than drops.
        assert_eq!(
            q.enqueue(udp(1, 1000 + (i % 4), 1, 0, true), &mut cx),
            Verdict::Success
        );
    }
    let out = drain(&mut q, 0, 2000);
    assert_eq!(out.len(), 1000);
    let last = out.last().unwrap().0 as f64;
    let expect = 999.0 * 1514.0 / 1.25e6 * 1e9;
    assert!((last - expect).abs() / expect < 0.001, "last at {last} ns");
    assert!(q.stats().overlimits > 0, "the shaper held packets back");
}

#[test]
fn shaped_tins_share_by_threshold_voice_is_capped_at_a_quarter() {
    // diffserv3 at 10 Mbit/s: voice (EF) backlogged beside best effort. Voice has priority only up to
    // its threshold (rate/4); above it, its schedule says wait and best effort is served. Over 2 s of
    // saturation voice gets 25 % ± 2 % of the bytes (hand-derived from cake_dequeue's tin choice).
    let mut q = cake(CakeOptions {
        base_rate: Some(mbit(10)),
        ..Default::default()
    });
    let mut now = 0;
    let mut sent = [0u64; 2];
    let mut next_fill = 0;
    while now < 2_000 * MS {
        if now >= next_fill {
            for i in 0..20 {
                let mut cx = Cx::new(now);
                q.enqueue(udp(1, 100 + i, 1, 46, false), &mut cx); // EF → voice
                q.enqueue(udp(2, 200 + i, 2, 0, false), &mut cx); // best effort
            }
            next_fill = now + 20 * MS;
        }
        let mut cx = Cx::new(now);
        match q.dequeue(&mut cx) {
            Some(p) => sent[(p.data[1] >> 2 == 0) as usize] += p.len as u64,
            None => now = cx.wake_at.unwrap_or(now + MS).min(next_fill).max(now + 1),
        }
    }
    let voice = sent[0] as f64 / (sent[0] + sent[1]) as f64;
    assert!((voice - 0.25).abs() < 0.02, "voice share {voice}");
}

/// Keep every flow backlogged (4 packets each, each packet sent replaced by a copy) for 20 000
/// dequeues; the share of the bytes host 10.0.0.1 got.
fn host_a_share(q: &mut Cake, flows: &[Packet]) -> f64 {
    for _ in 0..4 {
        for p in flows {
            q.enqueue(p.clone(), &mut Cx::new(0));
        }
    }
    let mut bytes = [0u64; 2];
    for round in 1..=20_000u64 {
        let mut cx = Cx::new(round * 1000);
        let mut p = q.dequeue(&mut cx).expect("backlogged");
        bytes[(p.data[15] != 1) as usize] += p.len as u64;
        p.data[1] &= !1; // a CE mark does not follow the replacement (ECT(0) again)
        q.enqueue(p, &mut cx);
    }
    bytes[0] as f64 / (bytes[0] + bytes[1]) as f64
}

#[test]
fn triple_isolate_gives_hosts_equal_shares_whatever_their_flow_counts() {
    // Host A opens 1 flow, host B 16 flows, each to its own server, all backlogged. triple-isolate
    // divides a flow's quantum by its source host's bulk flows: B's flows each get 1/16, so the hosts
    // share 50/50 (± 2 %). With `flows` instead (per-flow fairness) A would get 1/17.
    for (mode, expect_a) in [(flow_mode::TRIPLE, 0.5), (flow_mode::FLOWS, 1.0 / 17.0)] {
        let mut q = cake(CakeOptions {
            flow_mode: Some(mode),
            diffserv_mode: Some(diffserv::BESTEFFORT),
            ..Default::default()
        });
        let mut flows = vec![udp(1, 1000, 1, 0, true)];
        flows.extend((0..16u16).map(|f| udp(2, 2000 + f, 10 + f as u8, 0, true)));
        let a = host_a_share(&mut q, &flows);
        assert!((a - expect_a).abs() < 0.02, "mode {mode}: host A share {a}");
    }
}

#[test]
fn dual_srchost_isolates_hosts_towards_one_server() {
    // All 17 flows to the same server: triple-isolate's destination side counts 17 bulk flows there and
    // falls back to per-flow shares; dual-srchost looks at sources only and keeps 50/50 (± 2 %).
    let mut q = cake(CakeOptions {
        flow_mode: Some(flow_mode::DUAL_SRC),
        diffserv_mode: Some(diffserv::BESTEFFORT),
        ..Default::default()
    });
    let mut flows = vec![udp(1, 1000, 1, 0, true)];
    flows.extend((0..16u16).map(|f| udp(2, 2000 + f, 1, 0, true)));
    let a = host_a_share(&mut q, &flows);
    assert!((a - 0.5).abs() < 0.02, "host A share {a}");
}

#[test]
fn blue_rises_one_256th_per_target_while_the_buffer_overflows() {
    // memlimit = 10 packets' truesize (10 × (1514 + 256) = 17 700 bytes). One ECN-capable flow enqueues
    // a packet every 1 ms for 100 ms and nothing is dequeued: from t = 10 ms each arrival overflows and
    // drops the flow's head (cobalt_queue_full). BLUE rises when more than target (5 ms) passed since
    // its last rise: at 10, 16, 22, … 94 ms — 15 rises of 2^24: p_drop = 15/256.
    let mut q = cake(CakeOptions {
        memory: Some(17_700),
        diffserv_mode: Some(diffserv::BESTEFFORT),
        flow_mode: Some(flow_mode::FLOWS),
        ..Default::default()
    });
    let mut overflow = 0;
    for t in 0..100u64 {
        let mut cx = Cx::new(t * MS);
        q.enqueue(udp(1, 1000, 1, 0, true), &mut cx);
        overflow += cx
            .drops
            .iter()
            .filter(|d| d.reason == DropReason::Overlimit)
            .count();
    }
    assert_eq!(overflow, 90, "one head drop per arrival from the 11th on");
    let classes = q.walk(100 * MS);
    assert_eq!(classes.len(), 1);
    let Some(Xstats::CakeFlow(x)) = classes[0].xstats else {
        panic!("queue counters")
    };
    assert_eq!(x.p_drop, 15 << 24);
    assert_eq!(classes[0].stats.drops, 90);
    // Served until empty at 200 ms. CoDel's signal is overdue since the last overflow (94 ms): the first
    // packet out is marked (ECT), not dropped; only BLUE may drop some of the ten.
    let out = drain(&mut q, 200 * MS, 100);
    assert!(out.len() <= 10);
    assert_eq!(out[0].1.data[1] & 3, 3, "CE");
    // An empty qdisc is never dequeued (cake_dequeue returns at qlen 0), so BLUE cannot decay yet.
    assert_eq!(p_drop(&q), 15 << 24);
    // Three packets of another flow at 300 ms: once that flow has spent its first quantum it goes to the
    // old list behind ours, and within one more round ours is found empty (cobalt_queue_empty, 206 ms
    // since BLUE last moved > target): p_drop falls by 1/4096, once.
    for _ in 0..3 {
        q.enqueue(udp(2, 2000, 2, 0, true), &mut Cx::new(300 * MS));
    }
    assert_eq!(drain(&mut q, 300 * MS, 10).len(), 3);
    assert_eq!(p_drop(&q), (15 << 24) - (1 << 20));
}

/// BLUE's drop probability of the first queue listed (host 10.0.0.1's).
fn p_drop(q: &Cake) -> u32 {
    match q.walk(0).first().and_then(|c| c.xstats.clone()) {
        Some(Xstats::CakeFlow(x)) => x.p_drop,
        _ => panic!("the queue stays listed while its state decays"),
    }
}

#[test]
fn without_overflow_blue_stays_off_and_ecn_capable_packets_are_only_marked() {
    // ns-3's COBALT "Enhanced Blue" case 2, in the kernel's terms: 200 ECN-capable packets queued at
    // once, one dequeued every 10 ms. Linux's BLUE only moves on buffer overflow (ns-3's variant also
    // rises on sojourn > 400 ms, which the kernel does not have), and 200 packets are far below the
    // default memory limit: p_drop stays 0 and nothing is dropped; CoDel marks instead.
    let mut q = cake(CakeOptions {
        diffserv_mode: Some(diffserv::BESTEFFORT),
        ..Default::default()
    });
    for _ in 0..200 {
        q.enqueue(udp(1, 1000, 1, 0, true), &mut Cx::new(0));
    }
    let mut marks = 0;
    for k in 1..=100u64 {
        let mut cx = Cx::new(k * 10 * MS);
        let p = q.dequeue(&mut cx).expect("queued");
        assert!(cx.drops.is_empty(), "no drop at {k}");
        marks += (p.data[1] & 3 == 3) as u32;
    }
    assert_eq!(q.stats().drops, 0);
    assert!(marks > 0, "CoDel marked");
    let Some(Xstats::CakeFlow(x)) = q.walk(1000 * MS)[0].xstats else {
        panic!()
    };
    assert_eq!(x.p_drop, 0);
}

/// A pure ACK of connection 10.0.0.1:5000 → 192.0.2.1:80.
fn ack_pkt(ackno: u32, flags: u8, options: &[u8]) -> Packet {
    Packet::tcp4(
        [10, 0, 0, 1],
        5000,
        [192, 0, 2, 1],
        80,
        flags,
        1,
        ackno,
        options,
        0,
    )
}

fn ack_filter(mode: u32) -> Cake {
    cake(CakeOptions {
        ack_filter: Some(mode),
        diffserv_mode: Some(diffserv::BESTEFFORT),
        ..Default::default()
    })
}

/// Enqueue the packets; the ack numbers (or 0 for a non-ACK) of the ones filtered out.
fn filtered(q: &mut Cake, pkts: Vec<Packet>) -> Vec<u32> {
    let mut out = Vec::new();
    for p in pkts {
        let mut cx = Cx::new(0);
        q.enqueue(p, &mut cx);
        for d in cx.drops.iter() {
            out.push(u32::from_be_bytes(d.pkt.data[28..32].try_into().unwrap()));
        }
    }
    out
}

#[test]
fn the_ack_filter_drops_only_acks_made_redundant() {
    const ACK: u8 = 0x10;
    // Normal mode needs two eligible older ACKs: the third ACK (3000) makes the oldest (1000) go.
    let mut q = ack_filter(ack::FILTER);
    let out = filtered(
        &mut q,
        vec![
            ack_pkt(1000, ACK, &[]),
            ack_pkt(2000, ACK, &[]),
            ack_pkt(3000, ACK, &[]),
        ],
    );
    assert_eq!(out, vec![1000]);
    let Some(Xstats::Cake(x)) = q.xstats() else {
        panic!()
    };
    assert_eq!(x.tins[0].acks_dropped_packets, 1);
    assert_eq!(q.stats().qlen, 2);
    // Aggressive: one eligible ACK right before the new one is enough.
    let mut q = ack_filter(ack::AGGRESSIVE);
    let out = filtered(
        &mut q,
        vec![ack_pkt(1000, ACK, &[]), ack_pkt(2000, ACK, &[])],
    );
    assert_eq!(out, vec![1000]);
    // Never an ACK carrying data.
    let mut q = ack_filter(ack::AGGRESSIVE);
    let data = Packet::tcp4(
        [10, 0, 0, 1],
        5000,
        [192, 0, 2, 1],
        80,
        ACK,
        1,
        1000,
        &[],
        100,
    );
    assert!(filtered(&mut q, vec![data, ack_pkt(2000, ACK, &[])]).is_empty());
    // Never one whose ECE/CWR flags differ from the newer ACK's (aggressive, ECE then plain).
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert!(filtered(
        &mut q,
        vec![ack_pkt(1000, ACK | 0x40, &[]), ack_pkt(2000, ACK, &[])]
    )
    .is_empty());
    // Never one with a higher cumulative ACK than the newer one (reordering).
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert!(filtered(
        &mut q,
        vec![ack_pkt(3000, ACK, &[]), ack_pkt(2000, ACK, &[])]
    )
    .is_empty());
    // Never one that SACKs a range the newer one does not.
    let sack = |l: u32, r: u32| {
        let mut o = vec![1, 1, 5, 10];
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
        o
    };
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert!(filtered(
        &mut q,
        vec![
            ack_pkt(1000, ACK, &sack(5000, 6000)),
            ack_pkt(1000, ACK, &sack(7000, 8000))
        ]
    )
    .is_empty());
    // … but one whose SACK the newer covers and extends is redundant.
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert_eq!(
        filtered(
            &mut q,
            vec![
                ack_pkt(1000, ACK, &sack(5000, 6000)),
                ack_pkt(1000, ACK, &sack(5000, 7000))
            ]
        ),
        vec![1000]
    );
    // Never one with an unknown option (window scale), nor a SYN-ACK trigger.
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert!(filtered(
        &mut q,
        vec![ack_pkt(1000, ACK, &[3, 3, 7]), ack_pkt(2000, ACK, &[])]
    )
    .is_empty());
    let mut q = ack_filter(ack::AGGRESSIVE);
    assert!(filtered(
        &mut q,
        vec![ack_pkt(1000, ACK, &[]), ack_pkt(2000, ACK | 0x02, &[])]
    )
    .is_empty());
    // Off: nothing filtered.
    let mut q = ack_filter(ack::NONE);
    assert!(filtered(
        &mut q,
        vec![
            ack_pkt(1000, ACK, &[]),
            ack_pkt(2000, ACK, &[]),
            ack_pkt(3000, ACK, &[])
        ]
    )
    .is_empty());
}

#[test]
fn wash_clears_the_dscp_and_keeps_ecn_and_the_checksum_valid() {
    let mut q = cake(CakeOptions {
        wash: Some(1),
        ..Default::default()
    });
    q.enqueue(udp(1, 1, 1, 46, true), &mut Cx::new(0));
    let p = q.dequeue(&mut Cx::new(0)).unwrap();
    assert_eq!(p.data[1], 0x02, "DSCP EF washed, ECT(0) kept");
    let sum: u32 = p.data[..20]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    assert_eq!(
        (sum & 0xffff) + (sum >> 16),
        0xffff,
        "header checksum still valid"
    );
    // The tin was chosen from the DSCP before washing: voice (tin 2 internally).
    let Some(Xstats::Cake(x)) = q.xstats() else {
        panic!()
    };
    assert_eq!(x.tins[2].sent_packets, 1, "shown third: Voice");
}

#[test]
fn queues_are_listed_as_classes_and_counters_add_up() {
    let mut q = cake(CakeOptions::default());
    for f in 0..5 {
        q.enqueue(udp(1, 100 + f, 1, 0, false), &mut Cx::new(0));
    }
    let classes = q.walk(0);
    assert_eq!(classes.len(), 5);
    // Best effort is the second tin shown (Bulk, Best Effort, Voice): classids 1025..2048.
    for c in &classes {
        assert!((QUEUES as u32 + 1..=2 * QUEUES as u32).contains(&(c.classid.minor() as u32)));
        assert_eq!(c.stats.qlen, 1);
        assert_eq!(c.stats.backlog, 1514);
    }
    assert_eq!(q.stats().backlog, 5 * 1514);
    // Changing to besteffort clears the other tins; the options dump as tc shows them.
    let o = CakeOptions {
        diffserv_mode: Some(diffserv::BESTEFFORT),
        ..Default::default()
    };
    q.change(&QdiscOptions::Cake(o), &ENV, 0).unwrap();
    let QdiscOptions::Cake(d) = q.dump() else {
        panic!()
    };
    assert_eq!(d.diffserv_mode, Some(diffserv::BESTEFFORT));
    assert_eq!(d.rtt, Some(100_000));
    assert_eq!(d.target, Some(5_000));
    assert!(d.raw);
}
