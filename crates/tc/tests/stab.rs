//! Size tables: the root qdisc charges what the table says (`__qdisc_calculate_pkt_len`), the packet
//! leaves with its real length, and an ATM line's cells slow an HTB class down by exactly their tax.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet};

fn tc(e: &mut Engine, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

fn pkt(len: u32, tag: u64) -> Packet {
    Packet {
        len,
        protocol: 0x0800,
        tag,
        ..Default::default()
    }
}

/// sqm-scripts' ADSL line: `stab mtu 2047 tsize 512 mpu 64 overhead 44 linklayer adsl`. A 1514-byte
/// frame plus 44 = 1558 bytes → slot (1558 − 1) >> 2 = 389 → 390 · 4 = 1560 bytes = 33 cells of 48 →
/// 33 · 53 = 1749 bytes charged. An HTB class at 1 Mbit/s (125 000 bytes/s) so sends 125 000 / 1749 = 71.47 frames
/// a second, not 125 000 / 1514 = 82.56.
#[test]
fn an_atm_size_table_charges_cells() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 root stab mtu 2047 tsize 512 mpu 64 overhead 44 linklayer adsl handle 1: htb default 10");
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit burst 2k cburst 2k",
    );
    let dev = e.device_mut("eth0").unwrap();
    for i in 0..1000 {
        let mut cx = Cx::new(0);
        dev.enqueue(pkt(1514, i), &mut cx);
    }
    let (mut sent, mut t) = (0u64, 0u64);
    // Ten seconds of dequeue attempts every 100 µs.
    while t <= 10_000_000_000 {
        let mut cx = Cx::new(t);
        while let Some(p) = dev.dequeue(&mut cx) {
            assert_eq!(p.len, 1514, "the packet leaves with its own length");
            sent += 1;
        }
        t += 100_000;
    }
    let want = 10.0 * 125_000.0 / 1749.0;
    assert!(
        (sent as f64 - want).abs() <= 2.0,
        "{sent} frames in 10 s, expected {want:.1} (ATM) — Ethernet accounting would give 825"
    );
    let out = tclab_tc::run(
        &mut e,
        &[
            "-s".into(),
            "qdisc".into(),
            "show".into(),
            "dev".into(),
            "eth0".into(),
        ],
        0,
    );
    assert!(
        out.stdout
            .contains(&format!("Sent {} bytes {sent} pkt", sent * 1749)),
        "the root counts charged bytes: {}",
        out.stdout
    );
}

/// Overhead only (no table): every packet charged 20 bytes more, and a `change` without `stab` drops it.
#[test]
fn overhead_only_and_a_change_without_stab() {
    let mut e = Engine::new();
    tc(
        &mut e,
        "qdisc add dev eth0 root stab overhead 20 tbf rate 1mbit burst 10k latency 50ms",
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    dev.enqueue(pkt(1000, 1), &mut cx);
    assert_eq!(dev.qdiscs()[0].stats.backlog, 1020);
    let mut cx = Cx::new(0);
    assert_eq!(dev.dequeue(&mut cx).unwrap().len, 1000);
    tc(
        &mut e,
        "qdisc change dev eth0 root tbf rate 1mbit burst 10k latency 50ms",
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(1_000_000_000);
    dev.enqueue(pkt(1000, 2), &mut cx);
    assert_eq!(dev.qdiscs()[0].stats.backlog, 1000);
    assert!(dev.qdiscs()[0].stab.is_none());
}
