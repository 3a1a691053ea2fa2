//! Seed 000's sweeps as docs/EXPERIMENTS.md runs them with `tclab sweep`, shortened to seconds: TBF's
//! burst × latency (the seed's 102400kbit TBF) and HTB's rate from 2 to 128 Mbit/s with default settings.
//! Each headline is held to a band derived by hand and to the seed's figures where it gave some.

use std::collections::BTreeMap;
use std::process::Command;

mod common;

/// Runs `tclab sweep ARGS --no-plots` and returns sweep.csv's rows, each by column name.
fn sweep(tag: &str, args: &[&str]) -> Vec<BTreeMap<String, String>> {
    let dir = common::Scratch::new(&format!("seed000-{tag}"), "");
    let o = Command::new(env!("CARGO_BIN_EXE_tclab"))
        .arg("sweep")
        .args(args)
        .args(["--no-plots", "--out", dir.to_str().unwrap()])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .expect("tclab runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    let mut lines = text.lines().map(|l| l.split(',').map(str::to_string));
    let header: Vec<String> = lines.next().unwrap().collect();
    lines
        .map(|r| header.iter().cloned().zip(r).collect())
        .collect()
}

fn num(row: &BTreeMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?} in {row:?}", row[key]))
}

/// The seed's TBF at 102400kbit with its buffers 6160 and 394240 and latencies 20 ms and 200 ms, under
/// 154 Mbit/s of UDP on gigabit links, 3 s of flood. tc sets TBF's limit to rate × latency + buffer, so
/// a ping behind the full queue waits latency + buffer / rate (0.48 ms for 6160 bytes, 30.8 ms for
/// 394240) plus the idle path's 0.8 ms; and the flood gets the rate, 102.4 Mbit/s of 1490-byte frames,
/// 99.51 Mbit/s of payload, the bucket's burst adding at most buffer × 8 / 3 s (1.05 Mbit/s).
#[test]
fn tbf_burst_by_latency_queues_for_latency_plus_buffer_over_rate() {
    let rows = sweep(
        "tbf",
        &[
            "seed000-tbf",
            "--set",
            "duration=4s",
            "--set",
            "link.*.rate=1gbit",
            "--set",
            "traffic.0.rate=5mbit",
            "--set",
            "traffic.0.stop=4s",
            "--set",
            "policy.router0.rate=102400kbit",
            "--set",
            "policy.router0.buffer=6160,394240",
            "--set",
            "policy.router0.latency=20ms,200ms",
        ],
    );
    assert_eq!(rows.len(), 4);
    for r in &rows {
        let buffer = num(r, "policy.router0.buffer");
        let latency = r["policy.router0.latency"]
            .trim_end_matches("ms")
            .parse::<f64>()
            .unwrap();
        let queue_ms = latency + buffer / 12.8e6 * 1e3 + 0.8;
        let p50 = num(r, "ping.rtt_p50_ms");
        assert!(
            (p50 - queue_ms).abs() < 0.05 * queue_ms,
            "buffer {buffer}, latency {latency} ms: ping p50 {p50} ms, the full queue {queue_ms:.2} ms"
        );
        let goodput = num(r, "iperf-udp.goodput_bps");
        let payload = 102.4e6 * 1448.0 / 1490.0;
        assert!(
            goodput > 0.99 * payload && goodput < 1.01 * payload + buffer * 8.0 / 3.0,
            "buffer {buffer}, latency {latency} ms: goodput {goodput}"
        );
    }
}

/// Seed 000's HTB loop at its two ends, 2 and 128 Mbit/s, 10 s each. A ping that gets into the full
/// default leaf waits behind 1000 frames of 1490 bytes and its own 98: 5.960 s and 93.1 ms. The seed
/// measured about 6.0 s and 100–105 ms (its frames were full 1514-byte fragments; its VMs added delay).
#[test]
fn htb_rates_queue_the_ping_behind_the_whole_default_leaf() {
    let rows = sweep(
        "htb",
        &[
            "seed000-htb-rates",
            "--set",
            "duration=10s",
            "--set",
            "policy.router0.rate=2mbit,128mbit",
        ],
    );
    for (r, rate, seed_ms) in [(&rows[0], 2e6, 6000.0), (&rows[1], 128e6, 102.0)] {
        let full_ms = (1000.0 * 1490.0 + 98.0) * 8.0 / rate * 1e3;
        let p99 = num(r, "ping.rtt_p99_ms");
        assert!(
            p99 <= full_ms + 0.5 && p99 > 0.99 * full_ms,
            "{rate} bit/s: ping p99 {p99} ms, a full queue {full_ms:.1} ms"
        );
        assert!(
            (p99 - seed_ms).abs() < 0.1 * seed_ms,
            "{rate} bit/s: {p99} ms, the seed {seed_ms} ms"
        );
        let goodput = num(r, "iperf-udp.goodput_bps");
        let payload = rate * 1448.0 / 1490.0;
        assert!(
            (goodput - payload).abs() < 0.01 * payload,
            "{rate} bit/s: goodput {goodput}"
        );
    }
}

/// Seed 000's HTB 1 Mbit/s class (burst 1600 cburst 1600) with a pfifo, TBF and SFQ leaf, 20 s. A frame
/// is 11.92 ms at the class's rate. Behind the default pfifo the ping waits for 1000 frames (11.92 s).
/// Behind a TBF leaf it waits at most for the frames TBF's limit (rate × latency + burst: 4100, 6600 and
/// 81 600 bytes) holds, 2, 4 and 54, and the one HTB is waiting to send, plus a few 98-byte pings queued
/// among them (0.78 ms each): TBF's latency is its own rate's, not the class's. SFQ gives the ping its own
/// flow, served once a round of the 30 flood streams (one frame each: 357.6 ms).
#[test]
fn htb_leaf_pfifo_tbf_sfq_queue_the_ping_as_their_limits_say() {
    let leaf = |q: &str| format!("qdisc add dev eth1 parent 1:20 handle 20: {q}");
    let leaves = [
        "pfifo limit 1000",
        "tbf rate 1mbit burst 1600 latency 20ms",
        "tbf rate 2mbit burst 1600 latency 20ms",
        "tbf rate 32mbit burst 1600 latency 20ms",
        "sfq perturb 10",
    ];
    let set = format!("policy.1.tc={}", leaves.map(leaf).join(","));
    let rows = sweep(
        "leaf",
        &["seed000-htb-leaf", "--set", "duration=20s", "--set", &set],
    );
    let frame_ms = 1490.0 * 8.0 / 1e6 * 1e3;
    let bands = [
        (0.99 * 1000.0 * frame_ms, 1000.0 * frame_ms + 1.0),
        (frame_ms, 3.0 * frame_ms + 5.0 * 0.78 + 0.5),
        (3.0 * frame_ms, 5.0 * frame_ms + 5.0 * 0.78 + 0.5),
        (53.0 * frame_ms, 55.0 * frame_ms + 10.0 * 0.78 + 0.5),
        (0.0, 1000.0),
    ];
    for ((r, q), band) in rows.iter().zip(leaves).zip(bands) {
        let p99 = num(r, "ping.rtt_p99_ms");
        assert!(
            band.0 <= p99 && p99 <= band.1,
            "{q}: ping p99 {p99} ms, outside {band:?}"
        );
        // The class keeps its rate: 1 Mbit/s of 1490-byte frames, less what the pings it admits take.
        let goodput = num(r, "iperf-udp.goodput_bps");
        assert!(
            (goodput - 971.8e3).abs() < 0.01 * 971.8e3,
            "{q}: goodput {goodput}"
        );
    }
    let sfq_p50 = num(&rows[4], "ping.rtt_p50_ms");
    assert!(
        sfq_p50 < 30.0 * frame_ms + 1.0,
        "sfq: ping p50 {sfq_p50} ms, over one round"
    );
}
