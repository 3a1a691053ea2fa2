//! taprio through tc lines on an 8-queue device: tc 6.1's listing of the mapping, clock, flags and
//! schedule (text and JSON), a queue's class per transmit queue, a cbs grafted on one, tc's parse
//! errors and the kernel's refusals with nothing applied; a class held to its gate's share of a
//! 10 Mbit/s wire.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn eight_queues() -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000).txqueues = 8;
    e
}

const TDC_8D92: &str = "qdisc add dev eth0 root handle 1: taprio num_tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2 queues 1@0 1@0 1@0 base-time 1000000000 sched-entry S 01 300000 sched-entry S 03 300000 sched-entry S 04 400000 flags 0x1 txtime-delay 500000 clockid CLOCK_TAI";

#[test]
fn listing_as_tc_6_1_prints_it() {
    let mut e = eight_queues();
    let o = run(&mut e, TDC_8D92);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    // The cycle time is the entries' sum (300 + 300 + 400 µs); the entries are numbered.
    assert!(
        s.starts_with("qdisc taprio 1: root refcnt 9 tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2\nqueues offset 0 count 1 offset 0 count 1 offset 0 count 1\nclockid TAI flags 0x1 txtime delay 500000\tbase-time 1000000000 cycle-time 1000000 cycle-time-extension 0\n\tindex 0 cmd S gatemask 0x1 interval 300000\n\tindex 1 cmd S gatemask 0x3 interval 300000\n\tindex 2 cmd S gatemask 0x4 interval 400000\n\n"),
        "{s}"
    );
    // A pfifo on each queue.
    assert!(s.contains("qdisc pfifo 0: parent 1:8 limit 1000p\n"), "{s}");
    let j = run(&mut e, "-j qdisc show dev eth0").stdout;
    assert!(
        j.contains(r#""options":{"tc":3,"map":[2,2,1,0,2,2,2,2,2,2,2,2,2,2,2,2],"queues":[{"offset":0,"count":1},{"offset":0,"count":1},{"offset":0,"count":1}],"clockid":"TAI","flags":"0x1","txtime_delay":500000,"base_time":1000000000,"cycle_time":1000000,"cycle_time_extension":0,"schedule":[{"index":0,"cmd":"S","gatemask":"0x1","interval":300000},"#),
        "{j}"
    );
    let c = run(&mut e, "class show dev eth0").stdout;
    assert_eq!(
        c.matches("class taprio 1:").count(),
        8,
        "a class per queue: {c}"
    );
    // tdc a7bf: a cbs on queue 8.
    let o = run(
        &mut e,
        "qdisc replace dev eth0 handle 8002: parent 1:8 cbs idleslope 20000 sendslope -980000 hicredit 30 locredit -1470",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(run(&mut e, "qdisc show dev eth0")
        .stdout
        .contains("qdisc cbs 8002: parent 1:8 hicredit 30 locredit -1470 sendslope -980000 idleslope 20000 offload 0"));
}

#[test]
fn refusals_apply_nothing() {
    let mut e = eight_queues();
    let base = "qdisc add dev eth0 root handle 1: taprio num_tc 2 queues 1@0 1@1";
    let cases: [(&str, i32, &str); 8] = [
        ("sched-entry S 01 300000 bogus", 1, "Unknown argument\n"),
        ("sched-entry X 01 300000", 1, "Usage: ... taprio ... sched-entry <cmd> <gate mask> <interval>\n"),
        (
            "sched-entry S 01 300000 clockid CLOCK_FOO",
            1,
            "taprio: illegal value for \"clockid\": \"CLOCK_FOO\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)\n",
        ),
        ("sched-entry S 01 300000 cycle-time 5 cycle-time 6", 1, "taprio: duplicate \"cycle-time\" specification\n"),
        ("sched-entry S 01 300000", 2, "Error: Specifying a 'clockid' is mandatory.\n"),
        ("clockid CLOCK_TAI", 2, "Error: There should be at least one entry in the schedule.\n"),
        ("sched-entry S 01 300 clockid CLOCK_TAI", 2, "Error: Invalid interval for schedule entry.\n"),
        (
            "sched-entry S 01 300000 flags 0x2 clockid CLOCK_TAI",
            2,
            "Error: The 'clockid' cannot be specified for full offload.\n",
        ),
    ];
    for (args, code, msg) in cases {
        let o = run(&mut e, &format!("{base} {args}"));
        assert_eq!(o.code, code, "{args}: {}", o.stderr);
        assert!(o.stderr.starts_with(msg), "{args}: {}", o.stderr);
    }
    // Only as the root; the overlapping ranges of txtime-assist only with it.
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: taprio num_tc 2 queues 1@0 1@0 sched-entry S 01 300000 clockid CLOCK_TAI");
    assert!(
        o.stderr.contains("overlap with TC 1 queues 1@0"),
        "{}",
        o.stderr
    );
    assert_eq!(
        run(&mut e, "qdisc show dev eth0").stdout,
        "qdisc noqueue 0: root refcnt 2 \n",
        "nothing applied"
    );
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: mq");
    assert_eq!(o.code, 0);
    let o = run(&mut e, "qdisc add dev eth0 parent 1:1 taprio num_tc 2 queues 1@0 1@1 sched-entry S 01 300000 clockid CLOCK_TAI");
    assert_eq!(
        o.stderr,
        "Error: sch_taprio: Can only be attached as root qdisc.\n"
    );
}

#[test]
fn a_class_waits_for_its_gate() {
    // Priority 0 → TC 0 (queue 0) open 4 ms of every 10; the schedule starts at base time 20 ms.
    let mut e = eight_queues();
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 base-time 20000000 sched-entry S 1 4000000 sched-entry S 2 6000000 clockid CLOCK_TAI",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(25_000_000);
    let _ = dev.enqueue(
        Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100),
        &mut cx,
    );
    // At 25 ms TC 1's gate is open, not TC 0's: held until the next cycle, 30 ms.
    assert!(dev.dequeue(&mut cx).is_none());
    assert_eq!(cx.wake_at, Some(30_000_000));
    let mut cx = Cx::new(30_000_000);
    assert!(dev.dequeue(&mut cx).is_some());
}
