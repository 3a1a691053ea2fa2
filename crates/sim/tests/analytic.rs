//! The simulator against figures derived by hand: serialisation and propagation to the nanosecond, a shaper's
//! rate, queueing delay as backlog over rate.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

fn scenario(text: &str) -> Scenario {
    match load("test.toml", text, std::path::Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn go(text: &str) -> Outcome {
    let mut sc = scenario(text);
    run(&mut sc, &mut |_| {}).expect("the run completes")
}

/// a --(10 Mbit/s, 1 ms)-- r --(100 Mbit/s, 5 ms)-- b
const LINE: &str = r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "10mbit"
delay = "1ms"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "100mbit"
delay = "5ms"
"#;

#[test]
fn idle_ping_rtt_is_serialisation_plus_propagation_to_the_nanosecond() {
    let out = go(&format!(
        "{LINE}[[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\ninterval = \"1s\"\n"
    ));
    let p = &out.pings[0];
    assert_eq!(p.sent, 10);
    assert_eq!(p.received, 10);
    // A default ping is 56 data + 8 ICMP + 20 IP = 84 bytes, a 98-byte Ethernet frame. One way:
    // 98×8 bits at 10 Mbit/s = 78 400 ns, + 1 ms, + 98×8 at 100 Mbit/s = 7 840 ns, + 5 ms; twice.
    let expected: u64 = 2 * (78_400 + 1_000_000 + 7_840 + 5_000_000);
    for &(_, rtt) in &p.samples {
        assert_eq!(rtt, expected, "every probe on an idle path");
    }
}

#[test]
fn udp_below_a_tbf_rate_loses_nothing_and_above_it_gets_exactly_the_rate() {
    // TBF at 1 Mbit/s on the router's way to b. Frames are 1000 payload + 8 UDP + 20 IP + 14 Ethernet =
    // 1042 bytes, and TBF counts frame bytes.
    let policy = "[[policy]]\nnode = \"r\"\ntc = \"qdisc add dev eth1 root tbf rate 1mbit burst 10k latency 50ms\"\n";
    let under = go(&format!(
        "{LINE}{policy}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"500kbit\"\nlength = 1000\nstop = \"9s\"\n"
    ));
    let f = &under.flows[0];
    assert!(f.sent_bytes > 0);
    assert_eq!(f.lost_packets, 0, "521 kbit/s of frames fit in 1 Mbit/s");
    assert_eq!(f.delivered_bytes, f.sent_bytes);

    let over = go(&format!(
        "{LINE}{policy}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"3mbit\"\nlength = 1000\n"
    ));
    // Steady state (after the 10 KiB bucket has emptied): the receiver's payload rate is
    // 1 Mbit/s × 1000/1042 = 959 693 bit/s. Look at the per-interval goodput samples from 2 s to 10 s.
    let samples: Vec<f64> = over
        .recorder
        .flow_samples
        .iter()
        .filter(|s| s.t > 2_000_000_000)
        .map(|s| s.goodput_bps)
        .collect();
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let expected = 1e6 * 1000.0 / 1042.0;
    assert!(
        (mean - expected).abs() / expected < 0.005,
        "goodput {mean:.0} vs {expected:.0}"
    );
    assert!(over.flows[0].lost_packets > 0, "the excess is dropped");
}

#[test]
fn queueing_delay_equals_backlog_over_rate() {
    // A bfifo of 30 000 bytes at the 10 Mbit/s bottleneck (a's own NIC), kept full by 20 Mbit/s of UDP.
    // A ping waits behind the whole backlog: 30 000 × 8 / 10 Mbit/s = 24 ms more than idle, give or take one
    // frame (the queue is between 30 000 − 1042 and 30 000 bytes when the probe arrives, and the frame on the
    // wire adds up to 0.83 ms).
    let policy = "[[policy]]\nnode = \"a\"\ntc = \"qdisc add dev eth0 root bfifo limit 30000\"\n";
    let out = go(&format!(
        "{LINE}{policy}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"20mbit\"\nlength = 1000\n\
         [[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\nstart = \"1s\"\ninterval = \"100ms\"\n"
    ));
    let idle = 2.0 * (0.0784 + 1.0 + 0.00784 + 5.0);
    let p = &out.pings[0];
    assert!(
        p.received > 80,
        "pings get through the full queue unless the fifo drops them"
    );
    let extra = p.rtt.avg_ms - idle;
    assert!(
        (23.0..=25.0).contains(&extra),
        "queueing delay {extra:.3} ms, expected about 24 ms"
    );
}

#[test]
fn same_seed_same_result_byte_for_byte() {
    // Loss and jitter on the a–r link, the only path, so the seed matters.
    let lossy = LINE.replace(
        "delay = \"1ms\"",
        "delay = \"1ms\"\nloss = 0.05\njitter = \"3ms\"",
    );
    let text = format!(
        "{lossy}[[traffic]]\nkind = \"udp\"\nfrom = \"b\"\nto = \"a\"\nrate = \"900kbit\"\n"
    );
    let summarise = |o: &Outcome| format!("{:?} {:?}", o.flows, o.recorder.iface_samples);
    let a = summarise(&go(&text));
    let b = summarise(&go(&text));
    assert!(a == b, "two runs with one seed differ");
    let c = summarise(&go(&format!("seed = 2\n{text}")));
    assert!(
        a != c,
        "loss and jitter draw from the seed: another seed must change the result"
    );
}

#[test]
fn the_seed_draws_each_streams_start_and_the_pings_phase() {
    // What differs between two runs of a test on Linux: a single stream does not start exactly at its
    // entry's `start` but up to 10 ms (TCP) after it, and a ping's phase against the traffic is anywhere
    // in its interval. On this lossless path nothing else is random, so one seed gives the same bytes
    // and another seed moves the ping to another phase and the transfer to another start.
    let text = format!(
        "{LINE}[[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\nbytes = \"200k\"\n\
         [[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\ninterval = \"1s\"\n"
    );
    let summarise = |o: &Outcome| format!("{:?} {:?}", o.flows, o.pings);
    let phase = |o: &Outcome| {
        let p = &o.pings[0];
        // Every probe leaves at phase + k × 1 s.
        let first = p.samples[0].0;
        for (k, &(t, _)) in p.samples.iter().enumerate() {
            assert_eq!(t, first + k as u64 * 1_000_000_000, "probe {k}");
        }
        assert!(
            first < 1_000_000_000,
            "the phase is within one interval: {first} ns"
        );
        first
    };
    let one = go(&format!("seed = 1\n{text}"));
    assert_eq!(
        summarise(&one),
        summarise(&go(&format!("seed = 1\n{text}")))
    );
    let two = go(&format!("seed = 2\n{text}"));
    assert_ne!(phase(&one), phase(&two), "another seed, another phase");
    // A byte count's goodput runs from the entry's start to the last delivery, which moves with the
    // stream's start offset.
    assert_eq!(one.flows[0].delivered_bytes, 200 << 10);
    assert_eq!(two.flows[0].delivered_bytes, 200 << 10);
    assert_ne!(one.flows[0].goodput_bps, two.flows[0].goodput_bps);
}

#[test]
fn one_tcp_flow_fills_an_idle_10_mbit_link() {
    // a → b over a 10 Mbit/s first hop (the bottleneck), 12 ms RTT. A full segment is 1448 payload bytes
    // (MSS 1460 less 12 of timestamps) in a 1514-byte frame, so the most a flow can deliver is
    // 10 Mbit/s × 1448/1514 = 9.564 Mbit/s. The issue asks for at least 95 % of that over the run.
    let out = go(&format!(
        "{LINE}[[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n"
    ));
    let f = &out.flows[0];
    let ceiling = 10e6 * 1448.0 / 1514.0;
    assert!(
        f.goodput_bps >= 0.95 * ceiling,
        "goodput {:.0} bit/s is {:.1} % of {ceiling:.0}",
        f.goodput_bps,
        100.0 * f.goodput_bps / ceiling
    );
    assert!(f.goodput_bps <= ceiling, "never above the link");
}

#[test]
fn a_tcp_byte_count_is_delivered_exactly() {
    let out = go(&format!(
        "{LINE}[[traffic]]\nkind = \"tcp\"\nfrom = \"b\"\nto = \"a\"\nbytes = \"1M\"\ncc = \"reno\"\n"
    ));
    assert_eq!(out.flows[0].delivered_bytes, 1 << 20);
    assert_eq!(
        out.flows[0].sent_bytes,
        1 << 20,
        "and all of it acknowledged"
    );
}

#[test]
fn a_burst_smaller_than_rate_over_hz_starves_a_tick_based_shaper() {
    // Seed 001's rule: a shaper woken by a timer of HZ ticks per second can only release what its bucket
    // holds at each wake-up, so its burst must be at least rate / HZ (10 Mbit/s / 100 = 12 500 bytes) or the
    // rate is not reached. A TCP flow through TBF 10 Mbit/s on the router: a 2000-byte bucket (two frames
    // per wake-up) reaches the rate with high-resolution timers, falls far short at HZ = 100 and in between
    // at HZ = 1000; a 15 kB bucket (> 12 500 + one frame) reaches it again at HZ = 100. TCP matters here:
    // its ACK clock stalls with the shaper, so the watchdog's ticks are what drive it (a UDP flood polls the
    // shaper at every arrival, tick or not, as in the kernel).
    let fast_first_hop = LINE.replace("rate = \"10mbit\"", "rate = \"100mbit\"");
    let run = |hz: &str, burst: &str| {
        let text = format!(
            "{hz}{fast_first_hop}[[policy]]\nnode = \"r\"\n\
             tc = \"qdisc add dev eth1 root tbf rate 10mbit burst {burst} limit 30000\"\n\
             [[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n"
        );
        go(&text).flows[0].goodput_bps
    };
    let ceiling = 10e6 * 1448.0 / 1514.0;
    let highres = run("", "2000");
    let hz1000 = run("hz = 1000\n", "2000");
    let hz100 = run("hz = 100\n", "2000");
    let hz100_big = run("hz = 100\n", "15k");
    // docs/EXPERIMENTS.md (seed 001) quotes these.
    eprintln!(
        "burst 2000 B: high resolution {highres:.0}, HZ=1000 {hz1000:.0}, HZ=100 {hz100:.0}; \
         burst 15 kB, HZ=100: {hz100_big:.0} bit/s"
    );
    assert!(
        highres > 0.95 * ceiling,
        "high resolution, 2000 B: {highres:.0}"
    );
    assert!(hz100 < 0.4 * ceiling, "HZ=100, 2000 B: {hz100:.0}");
    assert!(
        hz100 < hz1000 && hz1000 < highres,
        "{hz100:.0} < {hz1000:.0} < {highres:.0}"
    );
    assert!(hz100_big > 0.95 * ceiling, "HZ=100, 15 kB: {hz100_big:.0}");
}

#[test]
fn udp_larger_than_the_path_mtu_is_refused() {
    let e = match load(
        "test.toml",
        &format!("{LINE}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nlength = 1473\n"),
        std::path::Path::new("."),
    ) {
        Ok(_) => panic!("1473 + 28 > 1500 must be refused"),
        Err(e) => e,
    };
    assert_eq!(e.key, "traffic.length", "{e}");
    assert!(e.message.contains("1472"), "says the largest allowed: {e}");
}

/// Mean rate of a class over the samples after `from_s`, from the qdisc's own byte counters.
fn class_rate(out: &Outcome, classid: &str, from_s: f64) -> f64 {
    let v: Vec<f64> = out
        .recorder
        .class_samples
        .iter()
        .filter(|s| s.classid == classid && s.t as f64 / 1e9 > from_s)
        .map(|s| s.bps)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[test]
fn htb_splits_a_bottleneck_by_rate_ceil_and_prio() {
    // Two UDP flows of 9 Mbit/s each into a 10 Mbit/s HTB parent on the router (100 Mbit/s wires, so the
    // HTB is the only bottleneck), put in classes by u32 on the destination port. By hand:
    // - 1:10 rate 3 Mbit prio 0 and 1:20 rate 2 Mbit prio 1: each gets its rate, and the 5 Mbit/s left
    //   goes to the lower prio number first, up to its ceil: 1:10 = 8, 1:20 = 2.
    // - Same prio: the excess is split by quantum, which r2q makes proportional to rate (3:2):
    //   1:10 = 3 + 3 = 6, 1:20 = 2 + 2 = 4.
    // Rates are of frames (1042 bytes for 1000 bytes of payload), as HTB counts them.
    let fast = LINE.replace("rate = \"10mbit\"", "rate = \"100mbit\"");
    let run = |prio10: u32, prio20: u32| {
        let text = format!(
            "{fast}[[policy]]\nnode = \"r\"\ntc = \"\"\"\n\
             qdisc add dev eth1 root handle 1: htb\n\
             class add dev eth1 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit\n\
             class add dev eth1 parent 1:1 classid 1:10 htb rate 3mbit ceil 10mbit prio {prio10}\n\
             class add dev eth1 parent 1:1 classid 1:20 htb rate 2mbit ceil 10mbit prio {prio20}\n\
             filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip dport 5201 0xffff flowid 1:10\n\
             filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip dport 6201 0xffff flowid 1:20\n\
             \"\"\"\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"9mbit\"\nlength = 1000\nport = 5201\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"9mbit\"\nlength = 1000\nport = 6201\n"
        );
        let out = go(&text);
        (
            class_rate(&out, "1:10", 2.0),
            class_rate(&out, "1:20", 2.0),
            class_rate(&out, "1:1", 2.0),
        )
    };
    let close = |got: f64, want: f64| (got - want).abs() / want < 0.02;
    let (a, b, parent) = run(0, 1);
    assert!(
        close(a, 8e6) && close(b, 2e6),
        "prio 0 takes the excess: 1:10 {a:.0}, 1:20 {b:.0}"
    );
    assert!(close(parent, 10e6), "the parent is full: {parent:.0}");
    let (a, b, _) = run(1, 1);
    assert!(
        close(a, 6e6) && close(b, 4e6),
        "same prio, split 3:2: 1:10 {a:.0}, 1:20 {b:.0}"
    );
}

#[test]
fn tcp_small_queues_keep_a_senders_own_queue_short() {
    // The sender's own 10 Mbit/s NIC is the bottleneck. Linux's TCP small queues let a socket keep only
    // max(2 skbs, ~1 ms at its pacing rate) below it, and send one more skb while under that: here skbs
    // of 2 segments (tcp_tso_autosize's minimum), 2 × (3028 + 576) = 7208 bytes of truesize, so at most
    // 7208 + 3604 in three skbs or more, 10 812 − 3 × 576 = 9084 frame bytes, 7.3 ms at 10 Mbit/s (an
    // skb's last segment, cut at the edge of a write-queue skb, is a single one: then three skbs hold
    // 3028 + 1514 + 3028). So a ping from the same host waits a few milliseconds, not behind
    // pfifo_fast's 1000 packets (1.2 s), while the flow still fills the link.
    let out = go(&format!(
        "{LINE}[[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n\
         [[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\nstart = \"1s\"\ninterval = \"100ms\"\n"
    ));
    let ceiling = 10e6 * 1448.0 / 1514.0;
    assert!(
        out.flows[0].goodput_bps > 0.95 * ceiling,
        "{}",
        out.flows[0].goodput_bps
    );
    let idle = 2.0 * (0.0784 + 1.0 + 0.00784 + 5.0);
    let p = &out.pings[0];
    assert_eq!(p.received, p.sent, "nothing overflows the host's queue");
    assert!(
        p.rtt.max_ms < idle + 7.3,
        "worst ping {:.2} ms, idle {idle:.2} ms",
        p.rtt.max_ms
    );
}

#[test]
fn a_tbf_over_htb_peeks_and_shapes() {
    // TBF peeks at its child before dequeuing; HTB (like CBQ) cannot say its next packet without choosing
    // it, so the kernel's qdisc_peek_dequeued dequeues and holds it. Under TBF 3 Mbit/s, HTB's 10:1
    // (rate 1 Mbit/s, ceil 3 Mbit/s, under 10:2 at 3 Mbit/s) borrows up to 2 Mbit/s of offered UDP: all of
    // it gets through. Without a parent to borrow from, 10:1 gets its 1 Mbit/s of frames
    // (1448/1490 of it as payload).
    let fast = LINE.replace("rate = \"10mbit\"", "rate = \"100mbit\"");
    let run = |classes: &str| {
        let text = format!(
            "{fast}[[policy]]\nnode = \"r\"\ntc = \"\"\"\n\
             qdisc add dev eth1 root handle 1: tbf rate 3mbit burst 4k latency 30ms\n\
             qdisc add dev eth1 parent 1:1 handle 10: htb default 1\n{classes}\"\"\"\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"2mbit\"\n"
        );
        let out = go(&text);
        (out.flows[0].goodput_bps, out.flows[0].lost_packets)
    };
    let (borrowing, lost) = run(
        "class add dev eth1 parent 10: classid 10:2 htb rate 3mbit\n\
         class add dev eth1 parent 10:2 classid 10:1 htb rate 1mbit ceil 3mbit\n",
    );
    assert!(
        lost <= 2,
        "2 Mbit/s fits under both shapers (a datagram may still be on its way at the end): {lost}"
    );
    assert!((borrowing - 2e6).abs() / 2e6 < 0.01, "{borrowing:.0}");
    let (alone, _) = run("class add dev eth1 parent 10: classid 10:1 htb rate 1mbit ceil 3mbit\n");
    let expected = 1e6 * 1448.0 / 1490.0;
    assert!(
        (alone - expected).abs() / expected < 0.03,
        "{alone:.0} vs {expected:.0}"
    );
}

#[test]
fn the_samples_cover_the_whole_run() {
    // Every 300 ms of a 1 s run: 0.3, 0.6 and 0.9 s, then a shorter last interval ending at 1 s, whose
    // rate is its bytes over its own 100 ms (a 1 Mbit/s UDP flow reads about the same in every row).
    let text = format!(
        "sample = \"300ms\"\n{}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1mbit\"\nlength = 1000\n",
        LINE.replace("\"10s\"", "\"1s\"")
    );
    let out = go(&text);
    let times: Vec<u64> = out.recorder.flow_samples.iter().map(|s| s.t).collect();
    assert_eq!(
        times,
        vec![300_000_000, 600_000_000, 900_000_000, 1_000_000_000]
    );
    let last = out.recorder.flow_samples.last().unwrap().goodput_bps;
    assert!(
        (last - 1e6).abs() / 1e6 < 0.1,
        "the last, short interval is a rate too: {last:.0}"
    );
}

#[test]
fn the_summary_lists_a_tbf_by_its_own_counters() {
    // The kernel dumps no counters for TBF's one class (sch_tbf.c has no dump_stats; tc prints an
    // empty line under it), and its child's never show TBF's overlimits. So the summary lists the
    // TBF as its qdisc, 1:, with what `tc -s qdisc show` prints for it. By hand, over 10 s: 3 Mbit/s
    // of 1000-byte payloads is 375 datagrams a second, 3 750; TBF sends 1 Mbit/s of 1042-byte
    // frames, 119.96 a second, plus the 10 KiB bucket's 9 at the start: 1 209; its queue (limit
    // 6 250 + 10 240 bytes: 15 frames) is full at the end; 3 750 - 1 209 - 15 = 2 526 dropped.
    let policy = "[[policy]]\nnode = \"r\"\ntc = \"qdisc add dev eth1 root handle 1: tbf rate 1mbit burst 10k latency 50ms\"\n";
    let mut sc = scenario(&format!(
        "{LINE}{policy}[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"3mbit\"\nlength = 1000\n"
    ));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    let summary = tclab_sim::report::summary_json(&sc, &out);
    let rows: Vec<_> = summary["classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["dev"] == "eth1")
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = rows[0];
    assert_eq!(
        (&row["classid"], &row["kind"]),
        (&"1:".into(), &"tbf".into())
    );
    let n = |k: &str| row[k].as_u64().unwrap() as i64;
    assert!((n("packets") - 1209).abs() <= 2, "{row}");
    assert!((n("drops") - 2526).abs() <= 3, "{row}");
    // tc.txt's TBF line carries the same overlimits (each time it held a packet back).
    let tc = &out.tc_show.iter().find(|(_, d, _)| d == "eth1").unwrap().2;
    let overlimits = format!("overlimits {} ", n("overlimits"));
    assert!(
        n("overlimits") > 0 && tc.contains(&overlimits),
        "{row}\n{tc}"
    );
    // The table prints the same row.
    let table = tclab_sim::report::summary_text(&sc, &out);
    assert!(table.contains("r:eth1 1:"), "{table}");
}
