//! CAKE's language as `tc` speaks it (iproute2 6.1's `q_cake.c`): what each keyword sends and how
//! `tc qdisc show` prints it back, the `-s` table, and the errors for bad input. Expected lines are
//! derived from q_cake.c's `cake_parse_opt`/`cake_print_opt` and sch_cake.c's `cake_dump`.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet};

fn run(e: &mut Engine, line: &str) -> (i32, String, String) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    (out.code as i32, out.stdout, out.stderr)
}

fn engine() -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e
}

/// The options part of the qdisc line after `tc qdisc add dev eth0 root cake ARGS`.
fn shown(args: &str) -> String {
    let mut e = engine();
    let (code, _, err) = run(
        &mut e,
        &format!("qdisc add dev eth0 root handle 1: cake {args}"),
    );
    assert_eq!(code, 0, "cake {args}: {err}");
    let (_, out, _) = run(&mut e, "qdisc show dev eth0");
    let line = out.lines().next().unwrap_or_default().to_string();
    let prefix = "qdisc cake 1: root refcnt 2 ";
    assert!(line.starts_with(prefix), "{line}");
    line[prefix.len()..].trim_end().to_string()
}

#[test]
fn keywords_print_back_as_tc_prints_them() {
    let defaults = "diffserv3 triple-isolate nonat nowash no-ack-filter split-gso rtt 100ms";
    for (args, expect) in [
        ("", format!("bandwidth unlimited {defaults} raw overhead 0")),
        ("bandwidth 20mbit", format!("bandwidth 20Mbit {defaults} raw overhead 0")),
        // A preset sets rtt (interval) and target together: metro = 10 ms / 500 µs.
        ("metro", format!("bandwidth unlimited {} raw overhead 0", defaults.replace("100ms", "10ms"))),
        // `rtt` alone: target = rtt / 20.
        ("rtt 50ms", format!("bandwidth unlimited {} raw overhead 0", defaults.replace("100ms", "50ms"))),
        // pppoe-llcsnap: ATM with 40 bytes; adding ether-vlan makes 44.
        ("pppoe-llcsnap ether-vlan", format!("bandwidth unlimited {defaults} atm overhead 44")),
        // ethernet: 38 bytes and an mpu of 84, no ATM.
        ("ethernet", format!("bandwidth unlimited {defaults} noatm overhead 38 mpu 84")),
        ("docsis", format!("bandwidth unlimited {defaults} noatm overhead 18 mpu 64")),
        ("bridged-ptm", format!("bandwidth unlimited {defaults} ptm overhead 22")),
        // `overhead N` replaces what the framings added; `raw` resets to none.
        ("pppoe-vcmux overhead 10", format!("bandwidth unlimited {defaults} atm overhead 10")),
        ("conservative raw", format!("bandwidth unlimited {defaults} raw overhead 0")),
        (
            "diffserv4 dual-dsthost nat wash ingress ack-filter-aggressive no-split-gso fwmark 0xff00 memlimit 32mb",
            "bandwidth unlimited diffserv4 dual-dsthost nat wash ingress ack-filter-aggressive no-split-gso rtt 100ms raw overhead 0 memlimit 32Mb fwmark 0xff00".to_string(),
        ),
        ("autorate-ingress", format!("bandwidth unlimited autorate-ingress {defaults} raw overhead 0")),
        // The old keyword `diffserv` means diffserv4; `via-ethernet` is accepted and changes nothing.
        ("diffserv via-ethernet", format!("bandwidth unlimited {} raw overhead 0", defaults.replace("diffserv3", "diffserv4"))),
    ] {
        assert_eq!(shown(args), expect, "cake {args}");
    }
}

#[test]
fn change_keeps_what_is_not_given() {
    let mut e = engine();
    run(
        &mut e,
        "qdisc add dev eth0 root handle 1: cake bandwidth 10mbit besteffort pppoe-ptm",
    );
    let (code, _, err) = run(&mut e, "qdisc change dev eth0 root cake flows");
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&mut e, "qdisc show dev eth0");
    assert!(
        out.starts_with("qdisc cake 1: root refcnt 2 bandwidth 10Mbit besteffort flows nonat nowash no-ack-filter split-gso rtt 100ms ptm overhead 30 "),
        "{out}"
    );
}

#[test]
fn the_statistics_table_has_a_column_per_tin() {
    let mut e = engine();
    run(
        &mut e,
        "qdisc add dev eth0 root handle 1: cake bandwidth 8mbit",
    );
    let dev = e.device_mut("eth0").unwrap();
    // Two EF packets (voice) and one best effort, 1514 bytes each, then all dequeued at once.
    for tos in [0xb8, 0xb8, 0x00] {
        dev.enqueue(
            Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, tos, 1514),
            &mut Cx::new(0),
        );
    }
    let mut cx = Cx::new(10_000_000_000);
    while dev.dequeue(&mut cx).is_some() {}
    let (_, out, _) = run(&mut e, "-s qdisc show dev eth0");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1],
        " Sent 4542 bytes 3 pkt (dropped 0, overlimits 0 requeues 0) "
    );
    // 8 Mbit/s = 1 MB/s; limit = max(rate × rtt × 4, 4 MB) = 4 MB. Used: at most 3 × (1514 + 256).
    assert_eq!(lines[3], " memory used: 5310b of 4Mb");
    assert_eq!(lines[4], " capacity estimate: 8Mbit");
    assert_eq!(
        lines[5],
        " min/max network layer size:         1514 /    1514"
    );
    assert_eq!(
        lines[6],
        " min/max overhead-adjusted size:     1514 /    1514"
    );
    assert_eq!(lines[7], " average network hdr offset:            0");
    assert_eq!(lines[8], "");
    assert_eq!(
        lines[9],
        "                   Bulk  Best Effort        Voice"
    );
    // Each row: a 10-character name, then " %12s" per tin (Bulk, Best Effort, Voice).
    let expect = |name: &str, cells: [&str; 3]| {
        format!("{name:<10}{}", cells.map(|c| format!(" {c:>12}")).concat())
    };
    // Thresholds: bulk rate/16 = 500 kbit, voice rate/4 = 2 Mbit.
    assert_eq!(lines[10], expect("  thresh", ["500Kbit", "8Mbit", "2Mbit"]));
    // Targets: 1.5 MTU times, at least 5 ms: bulk 1514 B at 62.5 kB/s × 1.5 = 36.3 ms; best effort
    // 1.5 × 1.514 ms → 5 ms; voice 1514 B at 250 kB/s × 1.5 = 9.08 ms.
    assert_eq!(lines[11], expect("  target", ["36.3ms", "5ms", "9.08ms"]));
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(name))
            .copied()
            .unwrap_or("")
    };
    assert_eq!(row("  pkts "), expect("  pkts", ["0", "1", "2"]));
    assert_eq!(row("  bytes "), expect("  bytes", ["0", "1514", "3028"]));
    // Flow quantum: rate >> 12 clamped to 300..1514: bulk 62500 >> 12 = 15 → 300; best effort
    // 1e6 >> 12 = 244 → 300; voice 250000 >> 12 = 61 → 300.
    assert_eq!(
        row("  quantum "),
        expect("  quantum", ["300", "300", "300"])
    );
    // The last row, then tc_qdisc's print_nl: an empty line.
    assert_eq!(lines[lines.len() - 2..], [row("  quantum "), ""]);
}

#[test]
fn bad_input_is_refused_with_tcs_words_and_applies_nothing() {
    for (args, code, msg) in [
        (
            "overhead 300",
            1,
            "Illegal \"overhead\", valid range is -64 to 256\\n",
        ),
        (
            "overhead -65",
            1,
            "Illegal \"overhead\", valid range is -64 to 256\\n",
        ),
        ("overhead 12x", 1, "Illegal \"overhead\""),
        ("mpu 257", 1, "Illegal \"mpu\", valid range is 0 to 256\\n"),
        ("bandwidth fast", 1, "Illegal \"bandwidth\""),
        ("rtt forever", 1, "Illegal \"rtt\""),
        (
            "memlimit lots",
            1,
            "Illegal value for \"memlimit\": \"lots\"",
        ),
        (
            "fwmark 0xfffffffff",
            1,
            "Illegal value for \"fwmark\": \"0xfffffffff\"",
        ),
        ("turbo", 1, "What is \"turbo\"?"),
        (
            "lan metro",
            255,
            "Error: duplicate \"metro\": \"lan\" is the second value.",
        ),
        ("bandwidth", 255, "Command line is not complete"),
    ] {
        let mut e = engine();
        let (got, _, err) = run(&mut e, &format!("qdisc add dev eth0 root cake {args}"));
        assert_eq!(got, code, "cake {args}: {err}");
        assert!(err.contains(msg), "cake {args}: {err}");
        let (_, out, _) = run(&mut e, "qdisc show dev eth0");
        assert!(!out.contains("cake"), "nothing applied: {out}");
    }
    // The queues are classes tc can list but not change.
    let mut e = engine();
    run(&mut e, "qdisc add dev eth0 root handle 1: cake");
    let (code, _, _) = run(&mut e, "class change dev eth0 classid 1:1 cake");
    assert_ne!(code, 0);
}

#[test]
fn json_statistics_carry_the_tins() {
    // q_cake.c's cake_print_xstats under JSON: the qdisc's counters and a `tins` array in tin order
    // (Bulk, Best Effort, Voice), each with its threshold rate (bytes/s) and flow quantum.
    let mut e = engine();
    run(
        &mut e,
        "qdisc add dev eth0 root handle 1: cake bandwidth 8mbit",
    );
    let (_, out, _) = run(&mut e, "-s -j qdisc show dev eth0");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let q = &v[0];
    assert_eq!(q["memory_limit"], 4 << 20);
    assert_eq!(q["capacity_estimate"], 1_000_000);
    assert_eq!(q["options"]["fwmark"], "0");
    let tins = q["tins"].as_array().expect("tins");
    let rates: Vec<u64> = tins
        .iter()
        .map(|t| t["threshold_rate"].as_u64().unwrap())
        .collect();
    assert_eq!(rates, vec![62_500, 1_000_000, 250_000]);
    assert!(tins.iter().all(|t| t["flow_quantum"] == 300));
}
