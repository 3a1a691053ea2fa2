//! taprio through tc lines on an 8-queue device: tc 6.1's listing of the mapping, clock, flags and
//! schedule (text and JSON), a queue's class per transmit queue, a cbs grafted on one, tc's parse
//! errors and the kernel's refusals with nothing applied; a class held to its gate's share of a
//! 10 Mbit/s wire; max-sdu, an admin schedule and the link speed from `tclab link`.

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

fn run_at(e: &mut Engine, line: &str, now: u64) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, now)
}

#[test]
fn max_sdu_is_parsed_and_listed_as_a_later_tc_lists_it() {
    // iproute2 6.2's `max-sdu`: numbers for classes 0, 1, … up to the first word that is not one.
    // One entry opening both gates: no class's window closes, so only the given limits apply
    // (taprio_update_queue_max_sdu), and the dump names all 16 classes.
    let mut e = eight_queues();
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 max-sdu 0 1500 sched-entry S 03 1000000 clockid CLOCK_TAI");
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(
        s.contains("\tindex 0 cmd S gatemask 0x3 interval 1000000\nmax-sdu 0 1500 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
        "{s}"
    );
    let j = run(&mut e, "-j qdisc show dev eth0").stdout;
    assert!(
        j.contains(r#""max-sdu":[0,1500,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"#),
        "{j}"
    );
    // A 1 600-byte frame of class 1 (priority 1) is dropped at the root and counted there.
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 1600);
    p.priority = 1;
    let _ = dev.enqueue(p, &mut cx);
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(s.contains("(dropped 1, overlimits 0"), "{s}");
    // Without max-sdu, tc 6.1's listing: no such line.
    let mut e = eight_queues();
    run(&mut e, "qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 sched-entry S 03 1000000 clockid CLOCK_TAI");
    assert!(!run(&mut e, "qdisc show dev eth0")
        .stdout
        .contains("max-sdu"));
    // The kernel's limit: the device's largest MTU.
    let mut e = eight_queues();
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: taprio num_tc 2 queues 1@0 1@1 max-sdu 65536 sched-entry S 03 1000000 clockid CLOCK_TAI");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "Error: sch_taprio: TC max SDU exceeds device max MTU.\n")
    );
}

#[test]
fn a_change_of_a_running_schedule_is_listed_as_admin() {
    // Made at 0: the schedule (TC 0 for 4 ms, TC 1 for 6 ms) runs from 10 ms. At 15 ms a change
    // with base time 100 ms waits behind it, printed after it as print_schedule prints it.
    let mut e = eight_queues();
    let add = "qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 sched-entry S 1 4000000 sched-entry S 2 6000000 clockid CLOCK_TAI";
    assert_eq!(run_at(&mut e, add, 0).code, 0);
    let o = run_at(
        &mut e,
        "qdisc change dev eth0 root handle 1: taprio base-time 100000000 sched-entry S 3 5000000 clockid CLOCK_TAI",
        15_000_000,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(
        s.contains("clockid TAI\tbase-time 0 cycle-time 10000000 cycle-time-extension 0\n\tindex 0 cmd S gatemask 0x1 interval 4000000\n\tindex 1 cmd S gatemask 0x2 interval 6000000\n\tbase-time 100000000 cycle-time 5000000 cycle-time-extension 0\n\tindex 0 cmd S gatemask 0x3 interval 5000000\n\n"),
        "{s}"
    );
}

#[test]
fn the_link_speed_from_tclab_link_times_the_schedule() {
    // A 60-byte frame takes 48 us at the 10 Mbit/s of a device without a speed, 4.8 us at 100
    // Mbit/s (`ethtool -s eth0 speed 100` in a script): an interval of 5 us is refused, then taken.
    let mut e = eight_queues();
    let add = "qdisc add dev eth0 root handle 1: taprio num_tc 2 queues 1@0 1@1 sched-entry S 01 5000 sched-entry S 02 5000 clockid CLOCK_TAI";
    let o = run(&mut e, add);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "Error: Invalid interval for schedule entry.\n")
    );
    tclab_tc::store::link(
        &mut e,
        &["set", "dev", "eth0", "speed", "100"].map(String::from),
    )
    .unwrap();
    assert_eq!(e.device("eth0").unwrap().speed, 100);
    let o = run(&mut e, add);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn full_offload_on_a_netdevsim_port() {
    // tdc 6a83: netdevsim has a PTP clock and takes taprio's schedule, so flags 0x2 is accepted
    // there (without a clockid); the children sit on the transmit queues (taprio_attach), each
    // held twice — `refcnt 2` — and the root holds none; no clock is dumped.
    let mut e = Engine::new();
    tclab_tc::store::link(
        &mut e,
        &"add dev eth0 numtxqueues 8 type netdevsim"
            .split(' ')
            .map(String::from)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let add = "qdisc replace dev eth0 handle 8001: parent root stab overhead 24 taprio num_tc 8 map 0 1 2 3 4 5 6 7 queues 1@0 1@1 1@2 1@3 1@4 1@5 1@6 1@7 base-time 0 sched-entry S ff 20000000 flags 0x2";
    let o = run(&mut e, add);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = run(&mut e, "qdisc replace dev eth0 handle 8002: parent 8001:8 cbs idleslope 20000 sendslope -980000 hicredit 30 locredit -1470");
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = run(&mut e, "-d qdisc show dev eth0").stdout;
    assert!(
        s.starts_with("qdisc taprio 8001: root tc 8 map 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0\nqueues offset 0 count 1 offset 1 count 1 offset 2 count 1 offset 3 count 1 offset 4 count 1 offset 5 count 1 offset 6 count 1 offset 7 count 1\n flags 0x2\tbase-time 0 cycle-time 20000000"),
        "{s}"
    );
    assert!(
        s.contains("qdisc cbs 8002: parent 8001:8 refcnt 2 hicredit 30 locredit -1470 sendslope -980000 idleslope 20000 offload 0"),
        "{s}"
    );
    assert!(
        s.contains("qdisc pfifo 0: parent 8001:1 refcnt 2 limit 1000p"),
        "{s}"
    );
    // netdevsim reports no queueMaxSDU support; a clockid is refused with full offload.
    let o = run(&mut e, &format!("{add} max-sdu 1500"));
    assert_eq!(
        o.stderr,
        "Error: sch_taprio: Device does not handle queueMaxSDU.\n"
    );
    // A device without a PTP clock refuses it.
    let mut e = eight_queues();
    let o = run(&mut e, add);
    assert_eq!(o.stderr, "Error: Device does not have a PTP clock.\n");
}

#[test]
fn help_is_tc_6_1s_usage_byte_for_byte() {
    // This machine's `tc qdisc add dev X root taprio help` (iproute2-6.1.0), exit 1: q_taprio.c's
    // explain() joins its literals without newlines between the option lines.
    let mut e = eight_queues();
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: taprio help");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "Usage: ... taprio clockid CLOCKID\n\t\t[num_tc NUMBER] [map P0 P1 ...] \t\t[queues \
         COUNT@OFFSET COUNT@OFFSET COUNT@OFFSET ...] \t\t[ [sched-entry index cmd gate-mask \
         interval] ... ] \t\t[base-time time] [txtime-delay delay]\nCLOCKID must be a valid SYS-V id \
         (i.e. CLOCK_TAI)\n"
    );
}

#[test]
fn a_size_table_on_the_root_shortens_a_window_s_limit_and_its_absence_is_warned() {
    // taprio_change ends with NL_SET_ERR_MSG_MOD "Size table not specified, frame length
    // estimations may be inaccurate" when q->root->stab is none: tc prints it as a warning (nl_dump_ext_ack
    // adds the "."), exit 0. With a table (set before taprio_init by qdisc_create) no warning, and
    // taprio_update_queue_max_sdu takes its overhead off each window: TC 0 open 100 µs of 1 ms at
    // 100 Mbit/s holds 1 250 bytes, less 24 of overhead and 14 of header, 1 212; TC 1's 900 µs,
    // 11 250 - 38 = 11 212 (listed, as max-sdu was asked for one class).
    let taprio = "taprio num_tc 2 map 0 1 queues 1@0 1@1 max-sdu 0 1500 sched-entry S 01 100000 sched-entry S 02 900000 clockid CLOCK_TAI";
    let mut e = eight_queues();
    e.device_mut("eth0").unwrap().set_speed(100);
    let o = run(
        &mut e,
        &format!("qdisc add dev eth0 root handle 1: {taprio}"),
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (0, "Warning: sch_taprio: Size table not specified, frame length estimations may be inaccurate.\n")
    );
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(
        s.contains("\nmax-sdu 1236 1500 0 "),
        "no table: 1 250 - 14: {s}"
    );
    let mut e = eight_queues();
    e.device_mut("eth0").unwrap().set_speed(100);
    let o = run(
        &mut e,
        &format!("qdisc add dev eth0 root handle 1: stab overhead 24 {taprio}"),
    );
    assert_eq!((o.code, o.stderr.as_str()), (0, ""));
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(s.contains("\nmax-sdu 1212 1500 0 "), "{s}");
    // A 1 226-byte frame of TC 0 fits (its real length against 1 212 + 14); 1 227 is dropped.
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for len in [1226, 1227] {
        let _ = dev.enqueue(
            Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, len),
            &mut cx,
        );
    }
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(s.contains("(dropped 1, overlimits 0"), "{s}");
}

#[test]
fn fp_is_refused_as_tc_6_1_refuses_it() {
    // Frame preemption (`fp E P …`) came in iproute2 6.5; 6.1's q_taprio.c ends its option loop with
    // "Unknown argument" (exit 1), q_mqprio.c with invarg (exit 255) — this machine's tc, byte for
    // byte. (A later tc's `fp P` reaching 6.12 is refused too: taprio_parse_tc_entries wants full
    // offload, "Preemption only supported with full offload", and mqprio_parse_tc_entries a device
    // with ethtool's get_mm, "Device does not support preemption"; no tclab device has one.)
    let mut e = eight_queues();
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: taprio num_tc 2 map 0 1 queues 1@0 1@1 base-time 0 sched-entry S 01 300000 sched-entry S 02 700000 clockid CLOCK_TAI fp E P");
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (1, "", "Unknown argument\n")
    );
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: mqprio num_tc 2 map 0 1 queues 1@0 1@1 hw 0 fp E P",
    );
    assert_eq!(
        (o.code, o.stdout.as_str(), o.stderr.as_str()),
        (
            255,
            "",
            "Error: argument \"fp\" is wrong: unknown argument\n"
        )
    );
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(!s.contains("taprio") && !s.contains("mqprio"), "{s}");
}
