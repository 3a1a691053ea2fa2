//! BBR by hand (Linux 6.12's `tcp_bbr.c`): startup ends after three rounds without 25 % growth of the
//! bandwidth estimate, which is then the bottleneck's; drain and the gain cycle keep the link full; the
//! min RTT not seen again for 10 s sends it to ProbeRTT, at 4 packets for at least 200 ms.

mod common;
use common::*;
use tclab_tcp::{BbrInfo, BbrMode, Config, CongestionControl, Nanos, PacingStatus};

fn bbr() -> Config {
    Config {
        cc: CongestionControl::Bbr,
        ..Config::default()
    }
}

/// 10 Mbit/s, 10 ms each way, a queue of 1000 packets: no loss. A 1448-byte segment is 1500 bytes on
/// this path's wire: 833.3 packets/s, 1 206 667 bytes/s of payload.
const PAYLOAD_RATE: f64 = 10e6 / 8.0 / 1500.0 * 1448.0;

fn run(secs: u64) -> (Sim, Vec<(Nanos, BbrInfo, u32)>) {
    let mut sim = Sim::new(
        bbr(),
        Config::default(),
        PathCfg::new(10_000_000, 10 * MS, 1000),
        1 << 40,
    );
    let mut seen = Vec::new();
    while sim.step(secs * SEC) {
        if let Some(i) = sim.hosts[0].bbr_info() {
            seen.push((sim.now, i, sim.hosts[0].stats().cwnd));
        }
    }
    (sim, seen)
}

#[test]
fn startup_ends_after_three_rounds_without_25_percent_growth() {
    let (sim, seen) = run(3);
    assert_eq!(
        sim.hosts[0].pacing_status(),
        PacingStatus::Needed,
        "BBR asks for pacing"
    );
    // The estimate at the start of each round, as the full-pipe check reads it.
    let mut per_round: Vec<(u32, u64)> = Vec::new();
    for (_, i, _) in &seen {
        if per_round.last().is_none_or(|r| r.0 != i.round) {
            per_round.push((i.round, i.bw));
        }
    }
    // Replay the rule on the rounds: a round whose estimate is 25 % above the last reference resets
    // the count; the third round in a row without that is the end of startup.
    let (mut full, mut cnt, mut end) = (0u64, 0, None);
    for &(r, bw) in &per_round[1..] {
        if bw * 4 >= full * 5 {
            (full, cnt) = (bw, 0);
        } else {
            cnt += 1;
            if cnt == 3 {
                end = Some(r);
                break;
            }
        }
    }
    let last = seen.last().unwrap().1;
    assert_eq!(last.full_bw_reached_at, end, "rounds: {per_round:?}");
    let end = end.expect("startup ends within 3 s");
    assert!(end <= 12, "startup took {end} rounds");
    // The estimate then is the bottleneck's rate, ±3 %.
    let at_end = per_round.iter().find(|r| r.0 == end).unwrap().1 as f64;
    eprintln!(
        "startup ended at round {end} with {at_end} B/s; first rounds {:?}",
        &per_round[..per_round.len().min(8)]
    );
    assert!((at_end / PAYLOAD_RATE - 1.0).abs() < 0.03, "{at_end} B/s");
    // Startup's gains were 2.885 (739/256), then drain's 1/2.885, then the gain cycle's.
    let modes: Vec<BbrMode> = seen.iter().map(|s| s.1.mode).fold(Vec::new(), |mut v, m| {
        if v.last() != Some(&m) {
            v.push(m);
        }
        v
    });
    assert_eq!(
        modes[..3],
        [BbrMode::Startup, BbrMode::Drain, BbrMode::ProbeBw]
    );
    assert!(seen
        .iter()
        .all(|s| s.1.mode != BbrMode::Startup || s.1.pacing_gain == 739));
    assert!(seen
        .iter()
        .all(|s| s.1.mode != BbrMode::Drain || s.1.pacing_gain == 88));
}

#[test]
fn probe_bw_fills_the_link_and_probe_rtt_comes_after_10_seconds() {
    let (sim, seen) = run(13);
    // Goodput over [2 s, 9 s], in ProbeBW: the link's payload rate, ±3 %.
    let rate = (sim.acked_by(9 * SEC) - sim.acked_by(2 * SEC)) as f64 / 7.0;
    eprintln!("ProbeBW goodput {rate} B/s");
    assert!((rate / PAYLOAD_RATE - 1.0).abs() < 0.03, "{rate} B/s");
    // The gain cycle: 5/4 and 3/4 phases among the 1s.
    let gains: std::collections::BTreeSet<u32> = seen
        .iter()
        .filter(|s| s.0 > 2 * SEC && s.0 < 9 * SEC)
        .map(|s| s.1.pacing_gain)
        .collect();
    assert_eq!(gains.into_iter().collect::<Vec<_>>(), [192, 256, 320]);
    // ProbeRTT: the min RTT (from the first round, an empty queue) is not seen lower again; 10 s
    // after it was taken, cwnd goes to 4 packets for at least 200 ms and a round.
    let probe: Vec<&(Nanos, BbrInfo, u32)> = seen
        .iter()
        .filter(|s| s.1.mode == BbrMode::ProbeRtt)
        .collect();
    assert!(!probe.is_empty(), "ProbeRTT within 13 s");
    let (start, end) = (probe[0].0, probe.last().unwrap().0);
    eprintln!("ProbeRTT {start}..{end} ns");
    assert!(start > 10 * SEC && start < 11 * SEC, "ProbeRTT at {start}");
    assert!(
        end - start >= 200 * MS,
        "ProbeRTT for {} ms",
        (end - start) / MS
    );
    assert!(probe.iter().all(|s| s.2 <= 4), "cwnd at most 4 in ProbeRTT");
}
