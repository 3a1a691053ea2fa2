//! mqprio through tc lines on an 8-queue device (`sch_mqprio.c`, `hw 0`): a packet's priority picks
//! its traffic class and the flow hash a queue of that class's range (`skb_tx_hash`); the classes as
//! the kernel lists them (traffic classes at the root, queues under theirs); tc 6.1's listing; the
//! refusals of `hw 1` (no offload) and of overlapping ranges.

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

#[test]
fn priorities_land_in_their_traffic_class_queues() {
    let mut e = eight_queues();
    // Priorities 0-1 → TC 0 (queues 0-5), 2-15 → TC 1 (queues 6-7).
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: mqprio num_tc 2 map 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 queues 6@0 2@6 hw 0",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for port in 0..100u16 {
        for prio in [0u32, 5] {
            let mut p = Packet::udp4([10, 0, 0, 1], 2000 + port, [10, 0, 0, 2], 80, 0, 300);
            p.priority = prio;
            let _ = dev.enqueue(p, &mut cx);
        }
    }
    let s = run(&mut e, "-s class show dev eth0").stdout;
    // TC 0 (1:ffe0) holds the 100 priority-0 packets over queues 1:1-1:6, TC 1 the 100 others.
    assert!(
        s.contains("class mqprio 1:ffe0 root \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 30000b 100p"),
        "{s}"
    );
    assert!(s.contains("class mqprio 1:ffe1 root \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 30000b 100p"), "{s}");
    assert!(s.contains("class mqprio 1:7 parent 1:ffe1 "), "{s}");
    assert!(s.contains("class mqprio 1:6 parent 1:ffe0 "), "{s}");
    let q = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(
        q.starts_with("qdisc mqprio 1: root tc 2 map 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 \n             queues:(0:5) (6:7) \n             mode:dcb\n             shaper:dcb\n"),
        "{q}"
    );
}

#[test]
fn refusals() {
    let mut e = eight_queues();
    // tc's default is hw 1: a device without offload refuses it.
    let o = run(&mut e, "qdisc add dev eth0 root handle 1: mqprio");
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .starts_with("Error: Device does not support hardware offload."),
        "{}",
        o.stderr
    );
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: mqprio num_tc 2 map 0 1 queues 4@0 4@3 hw 0",
    );
    assert!(
        o.stderr
            .starts_with("Error: sch_mqprio_lib: TC 0 queues 4@0 overlap with TC 1 queues 4@3."),
        "{}",
        o.stderr
    );
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: mqprio num_tc 1 queues 1@0 1@1 hw 0",
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "queues count/offset pair count 2 can not be higher than given num_tc 1\n"
        )
    );
    assert!(!run(&mut e, "qdisc show dev eth0").stdout.contains("mqprio"));
}

/// `mqprio_qdisc_ops` has no `change` (sch_mqprio.c): a change, or a replace naming the same handle, is
/// refused by `qdisc_change` and the qdisc kept as it was; a replace with a new handle makes a new one
/// (tc_modify_qdisc's create-and-graft). tclab answered 0 and changed nothing.
#[test]
fn a_change_is_refused_and_a_new_handle_replaces() {
    let mut e = eight_queues();
    let add = "root handle 1: mqprio num_tc 2 map 0 1 queues 4@0 4@4 hw 0";
    assert_eq!(run(&mut e, &format!("qdisc add dev eth0 {add}")).code, 0);
    for line in [
        "qdisc change dev eth0 root handle 1: mqprio num_tc 2 map 1 0 queues 2@0 6@2 hw 0",
        "qdisc replace dev eth0 root handle 1: mqprio num_tc 2 map 1 0 queues 2@0 6@2 hw 0",
        "qdisc replace dev eth0 root mqprio num_tc 2 map 1 0 queues 2@0 6@2 hw 0",
    ] {
        let o = run(&mut e, line);
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (
                2,
                "Error: Change operation not supported by specified qdisc.\n"
            ),
            "{line}"
        );
    }
    let q = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(q.starts_with("qdisc mqprio 1: root tc 2 map 0 1 "), "{q}");
    assert!(q.contains("queues:(0:3) (4:7)"), "{q}");
    let o = run(
        &mut e,
        "qdisc replace dev eth0 root handle 2: mqprio num_tc 2 map 1 0 queues 2@0 6@2 hw 0",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let q = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(q.starts_with("qdisc mqprio 2: root tc 2 map 1 0 "), "{q}");
    assert!(q.contains("queues:(0:1) (2:7)"), "{q}");
}
