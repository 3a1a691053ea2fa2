//! Pacing by hand (Linux 6.12: `tcp_update_pacing_rate`, `tcp_update_skb_after_send`,
//! `tcp_pacing_check`): the pacing rate is twice the window's rate in slow start and 1.2 times after;
//! a socket asking for pacing (`SO_MAX_PACING_RATE`) with no sch_fq paces itself at its rate; a socket
//! sch_fq paces stamps departure times spaced by each segment's time at its pacing rate, and sends at
//! once.

mod common;
use common::*;
use tclab_tcp::{Config, CongestionControl, PacingStatus};

fn cfg() -> Config {
    Config::default()
}

/// 1 Gbit/s, 10 ms each way, a queue that never fills: the RTT is 20 ms plus serialisation.
fn fast_path() -> PathCfg {
    PathCfg::new(1_000_000_000, 10 * MS, 10_000)
}

#[test]
fn the_pacing_rate_is_twice_the_window_rate_in_slow_start_then_1_2_times() {
    // Right after the handshake: cwnd 10 segments of 1448 bytes, srtt 20 ms (the SYN's RTT), ssthresh
    // not set: 2 × 10 × 1448 B / 20 ms = 1 448 000 B/s.
    let mut sim = Sim::new(cfg(), cfg(), fast_path(), 1 << 40);
    sim.run_until(21 * MS);
    let r = sim.hosts[0].pacing_rate() as f64;
    assert!((r / 1_448_000.0 - 1.0).abs() < 0.001, "{r} B/s");
    assert_eq!(sim.hosts[0].pacing_status(), PacingStatus::None);

    // Reno after one loss, in congestion avoidance (cwnd ≥ ssthresh / 2): 1.2 × cwnd × mss / srtt.
    let mut c = cfg();
    c.cc = CongestionControl::Reno;
    let mut path = PathCfg::new(10_000_000, 10 * MS, 17);
    path.drop_offsets.insert(300 * 1448);
    let mut sim = Sim::new(c, cfg(), path, 1 << 40);
    sim.run_until(3 * SEC);
    let s = sim.hosts[0].stats();
    assert!(s.cwnd >= s.ssthresh / 2 && s.ssthresh < 1000, "{s:?}");
    let want = 1.2 * s.cwnd as f64 * s.mss as f64 / (s.srtt_ns as f64 / 1e9);
    let r = sim.hosts[0].pacing_rate() as f64;
    assert!((r / want - 1.0).abs() < 0.01, "{r} B/s, want {want}");
}

#[test]
fn max_pacing_rate_paces_the_socket_itself() {
    // SO_MAX_PACING_RATE 10 Mbit/s (1.25 MB/s) and no sch_fq: SK_PACING_NEEDED, internal pacing. The
    // first ten data segments leave at once (the initial window); once the window has outgrown the
    // path's 17 segments (a few RTTs of slow start; CUBIC's own rate, twice the window's, is above the
    // cap from the start), each segment waits for the previous one's departure time plus
    // 1448 B / 1.25 MB/s = 1.1584 ms (the pacing timer fires exactly then, so no credit).
    let mut c = cfg();
    c.max_pacing_rate = 1_250_000;
    let mut sim = Sim::new(c, cfg(), fast_path(), 1 << 40);
    assert_eq!(sim.hosts[0].pacing_status(), PacingStatus::Needed);
    sim.run_until(3 * SEC);
    let sent = sim.data_sent();
    assert!(
        sent[..10].iter().all(|(t, _, _)| *t == sent[0].0),
        "the first ten at once"
    );
    let later: Vec<_> = sent.iter().filter(|(t, _, _)| *t >= 200 * MS).collect();
    assert!(later.len() > 2000);
    for w in later.windows(2) {
        assert_eq!(w[1].0 - w[0].0, 1_158_400, "segment at offset {}", w[1].1);
    }
    // Goodput at the pacing rate, ±2 %.
    let rate = (sim.acked_by(3 * SEC) - sim.acked_by(SEC)) as f64 / 2.0;
    assert!((rate / 1_250_000.0 - 1.0).abs() < 0.02, "{rate} B/s");
}

#[test]
fn a_socket_fq_paces_stamps_departures_at_its_pacing_rate() {
    // CUBIC, paced by sch_fq (SK_PACING_FQ): segments go at once (no internal pacing), each stamped
    // with the socket's departure time. While the socket is ahead of the clock, consecutive data
    // segments' departure times differ by exactly the first one's payload at the pacing rate of the
    // moment (`tcp_update_skb_after_send`, no credit): inter-departure times on a link that honours
    // them (fq) match the pacing rate.
    let mut sim = Sim::new(cfg(), cfg(), fast_path(), 1 << 40);
    sim.hosts[0].set_paced_by_fq();
    sim.run_until(2 * SEC);
    let data: Vec<_> = sim.departures.iter().filter(|d| d.3 > 0).copied().collect();
    let mut checked = 0;
    for w in data[9..].windows(2) {
        let ((s0, d0, r0, len0), (s1, d1, _, _)) = (w[0], w[1]);
        if d0 > s0 && d1 > s1 {
            assert_eq!(d1 - d0, len0 as u64 * SEC / r0, "departures {d0} → {d1}");
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} pairs ahead of the clock");
    let bursts = data.windows(2).filter(|w| w[0].0 == w[1].0).count();
    assert!(bursts > 1000, "sent in bursts, not held: {bursts}");
    assert_eq!(sim.hosts[0].pacing_status(), PacingStatus::Fq);
}

#[test]
fn a_socket_left_paced_by_its_first_congestion_control_paces_cubic() {
    // `Config::paced`: CUBIC on a socket that BBR initialised (iperf3 `-C cubic` after connect() on a
    // host whose default is BBR: `sk_pacing_status` stays SK_PACING_NEEDED) paces itself, uncapped.
    // Through a 10 Mbit/s bottleneck (a 17-packet queue), an unpaced CUBIC sends what each ACK allows
    // at once: two segments in the same instant every other ACK. Paced, consecutive data segments
    // after the first ten leave at least half a segment's time at the pacing rate apart
    // (`tcp_update_skb_after_send`: the payload's time less a late socket's credit, at most half), so
    // never together — as the kernel's iperf3 senders in docs/KERNEL_VS_SIM.md's lab do (0.5 % of
    // segments within 50 µs of the flow's previous one, against 43 % with CUBIC set before connect()).
    let path = || PathCfg::new(10_000_000, 5 * MS, 17);
    let together = |sim: &Sim| {
        let sent = sim.data_sent();
        sent[10..].windows(2).filter(|w| w[0].0 == w[1].0).count()
    };
    let mut plain = Sim::new(cfg(), cfg(), path(), 1 << 40);
    assert_eq!(plain.hosts[0].pacing_status(), PacingStatus::None);
    plain.run_until(5 * SEC);
    assert!(together(&plain) > 1000, "unpaced: {}", together(&plain));

    let mut c = cfg();
    c.paced = true;
    let mut paced = Sim::new(c, cfg(), path(), 1 << 40);
    assert_eq!(paced.hosts[0].pacing_status(), PacingStatus::Needed);
    paced.run_until(5 * SEC);
    assert_eq!(together(&paced), 0);
    // The pacing rate caps nothing: 1.2 × cwnd × mss / srtt is above the path's rate, so the flow
    // still fills the link (goodput within 2 % of the unpaced one's).
    let rate = |s: &Sim| (s.acked_by(5 * SEC) - s.acked_by(SEC)) as f64 / 4.0;
    assert!(
        (rate(&paced) / rate(&plain) - 1.0).abs() < 0.02,
        "{} vs {} B/s",
        rate(&paced),
        rate(&plain)
    );
}

/// TCP small queues' limit (`tcp_small_queue_check`: `max(2 × truesize, rate >> 10)`, capped at 1 MiB
/// unless paced) is never below two skbs of one segment each: `tcp_tso_segs` is one at least (two
/// for CUBIC and Reno, `tcp_min_tso_segs`; one or two for BBR) and the cap is far above. The
/// simulator's socket (crates/sim/src/tcpapp.rs, `pump`) relies on it: it does not work the limit
/// out while its host holds no more than that. Checked at every event of slow starts, a loss and
/// BBR, paced by an fq and not, on a slow long path (where `rate >> 10` is below one segment) and a
/// fast one; `truesize` as the simulator counts an skb (its frames' bytes and 576 of overhead).
#[test]
fn tsq_limit_is_never_below_two_one_segment_skbs() {
    let cases = [
        (CongestionControl::Cubic, false, 1_000_000, 100 * MS),
        (CongestionControl::Reno, false, 1_000_000_000, MS),
        (CongestionControl::Bbr, false, 2_000_000, 50 * MS),
        (CongestionControl::Cubic, true, 1_000_000, 100 * MS),
        (CongestionControl::Bbr, true, 1_000_000_000, 5 * MS),
    ];
    for (cc, paced, rate, delay) in cases {
        let mut c = cfg();
        c.cc = cc;
        let mut path = PathCfg::new(rate, delay, 40);
        path.drop_offsets.insert(100 * 1448);
        let mut sim = Sim::new(c, cfg(), path, 1 << 30);
        if paced {
            sim.hosts[0].set_paced_by_fq();
        }
        let mut checked = 0;
        while sim.step(3 * SEC) {
            let h = &sim.hosts[0];
            let mss = h.mss() as u64;
            let truesize = |segs: u32| (20 + 20 + 14 + mss) * segs as u64 + 576;
            let limit = h.tsq_limit(truesize);
            assert!(
                limit >= 2 * truesize(1),
                "{cc:?} paced {paced}: limit {limit} at {} ns",
                sim.now
            );
            checked += 1;
        }
        assert!(checked > 500, "{cc:?}: {checked} events");
    }
}
