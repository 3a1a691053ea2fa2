//! The etf qdisc through tc lines and a device in virtual time (`sch_etf.c`): with `skip_sock_check`,
//! packets leave in launch-time order `delta` ns before their times; a packet whose time has passed is
//! refused; without it no tclab socket (none sets `SO_TXTIME`) gets a packet through.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn at(tstamp: u64, tag: u64) -> Packet {
    Packet {
        tstamp,
        tag,
        ..Packet::of_len(200)
    }
}

#[test]
fn launch_times_order_the_queue() {
    let mut e = Engine::new();
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: etf clockid CLOCK_TAI delta 200000 skip_sock_check",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(1_000_000);
    for (t, tag) in [(5_000_000, 1), (2_000_000, 2), (900_000, 3), (3_000_000, 4)] {
        let _ = dev.enqueue(at(t, tag), &mut cx);
    }
    let mut out = Vec::new();
    let mut now = 1_000_000;
    while out.len() < 3 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => out.push((now, p.tag)),
            None => now = cx.wake_at.expect("a packet waits"),
        }
    }
    // Packet 3's time (0.9 ms) had passed at 1 ms: refused. The others leave 0.2 ms early, in order.
    assert_eq!(out, [(1_800_000, 2), (2_800_000, 4), (4_800_000, 1)]);
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(
        s.contains("qdisc etf 1: root refcnt 2 clockid TAI delta 200000 offload off deadline_mode off skip_sock_check on\n Sent 600 bytes 3 pkt (dropped 1, overlimits 0"),
        "{s}"
    );
}

#[test]
fn without_skip_sock_check_nothing_passes_and_refusals() {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 root etf clockid CLOCK_TAI");
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(at(5_000, 1), &mut Cx::new(0));
    assert!(dev.dequeue(&mut Cx::new(10_000)).is_none());
    run(&mut e, "qdisc del dev eth0 root");
    let o = run(&mut e, "qdisc add dev eth0 root etf clockid CLOCK_REALTIME");
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .starts_with("Error: Invalid clockid. CLOCK_TAI must be used."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "qdisc add dev eth0 root etf clockid FOO");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "etf: illegal value for \"clockid\": \"FOO\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)\n"
        )
    );
}
