//! The gate action through tc lines and a device's ingress, in virtual time: before `base-time` the
//! gate is pending and passes everything; from it, each `sched-entry` holds for its interval and the
//! list repeats (`act_gate.c`: the hrtimer applies the entries in turn, wrapping after the last), so a
//! steady stream keeps the open fraction of its packets; `max-octets` caps what an open interval
//! passes. Drops and overlimits are counted as `tcf_gate_act` counts them.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

/// Offer one 500-byte packet every `step` ns from `from` to `to`; how many pass.
fn offer(e: &mut Engine, from: u64, to: u64, step: u64) -> usize {
    let dev = e.device_mut("eth0").unwrap();
    (from..to)
        .step_by(step as usize)
        .filter(|t| dev.receive(Packet::of_len(500), &mut Cx::new(*t)).is_some())
        .count()
}

#[test]
fn a_stream_keeps_the_open_fraction_of_its_packets() {
    let mut e = Engine::new();
    assert_eq!(run(&mut e, "qdisc add dev eth0 ingress").code, 0);
    // Open 300 µs, closed 700 µs, from 1 ms on.
    let o = run(
        &mut e,
        "filter add dev eth0 parent ffff: protocol all prio 1 matchall action gate base-time 1ms sched-entry open 300us -1 -1 sched-entry close 700us index 5",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        offer(&mut e, 0, 1_000_000, 10_000),
        100,
        "pending: all pass"
    );
    // 10 ms from the start, one packet every 10 µs: 30 of each 100.
    assert_eq!(offer(&mut e, 1_000_000, 11_000_000, 10_000), 300);
    let a = run(&mut e, "-s actions get action gate index 5").stdout;
    assert!(
        // At ingress an action counts skb->len: 486 of each 500-byte frame (no Ethernet header).
        a.contains("Sent 534600 bytes 1100 pkt (dropped 700, overlimits 0"),
        "{a}"
    );
    assert!(
        a.contains(
            "\n\tpriority wildcard\tclockid TAI\tflags 0\n\tbase-time 1ms\tcycle-time 1ms\tcycle-time-ext 0ns\n\tschedule:\n\t number    0\tgate-state open \tinterval 300us\t ipv wildcard\t max-octets wildcard\n\t number    1\tgate-state close \tinterval 700us\t ipv wildcard\t max-octets wildcard\n\tpipe\n\t index 5 ref 1 bind 1"
        ),
        "{a}"
    );
}

#[test]
fn max_octets_caps_each_open_interval() {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 ingress");
    // 1 ms open for at most 2 000 bytes, 1 ms closed; the schedule starts at 2 ms (base 0, cycle 2 ms).
    let o = run(
        &mut e,
        "filter add dev eth0 parent ffff: protocol all prio 1 matchall action gate sched-entry open 1ms 3 2000 sched-entry close 1ms index 6",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Ten packets in each open millisecond: four of 500 bytes pass, six are over the limit.
    assert_eq!(offer(&mut e, 2_000_000, 3_000_000, 100_000), 4);
    assert_eq!(offer(&mut e, 4_000_000, 5_000_000, 100_000), 4);
    let a = run(&mut e, "-s actions get action gate index 6").stdout;
    assert!(a.contains("(dropped 12, overlimits 12"), "{a}");
    assert!(a.contains("\t ipv 3         \t max-octets 2000b"), "{a}");
}

#[test]
fn replace_keeps_the_schedule_and_refusals_apply_nothing() {
    let mut e = Engine::new();
    let o = run(
        &mut e,
        "actions add action gate base-time 200s sched-entry open 200ms -1 8000000b index 20",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        run(
            &mut e,
            "actions replace action gate base-time 400s index 20"
        )
        .code,
        0
    );
    let a = run(&mut e, "actions get action gate index 20").stdout;
    assert!(
        a.contains("base-time 400s\tcycle-time 200ms")
            && a.contains("gate-state open \tinterval 200ms\t ipv wildcard\t max-octets 8000000b"),
        "{a}"
    );
    let o = run(&mut e, "actions add action gate sched-entry open 0 index 3");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr
            .starts_with("Error: Invalid interval for schedule entry."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action gate priority 1");
    assert!(
        o.stderr.starts_with("gate: must add at least one entry"),
        "{}",
        o.stderr
    );
    assert_eq!(
        run(&mut e, "actions ls action gate")
            .stdout
            .matches("action order")
            .count(),
        1
    );
}
