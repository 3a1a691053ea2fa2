//! teql through tc and link lines, against `sch_teql.c` (Linux 6.12): the master device `teql0` that
//! naming the kind makes, a slave's FIFO and its counters (`teql_enqueue`, `teql_dequeue`), the
//! refusals of `teql_qdisc_init`, `teql_master_open` and `teql_master_mtu`, and tc's answer to an
//! option it cannot parse (`parse_noqopt`). This machine's kernel has no sch_teql
//! (`CONFIG_NET_SCH_TEQL` is not set), so the expectations are the source's.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn link(e: &mut Engine, line: &str) -> Result<(), String> {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::store::link(e, &argv)
}

fn slaves(e: &Engine) -> Vec<String> {
    e.teql()
        .unwrap()
        .slaves()
        .iter()
        .map(|&i| e.device_by_ifindex(i).unwrap().name.clone())
        .collect()
}

#[test]
fn a_slave_queues_up_to_its_txqueuelen_and_counts_as_the_kernel() {
    let mut e = Engine::new();
    assert_eq!(
        run(&mut e, "qdisc add dev eth0 root handle 1: teql0").code,
        0
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for _ in 0..1001 {
        let _ = dev.enqueue(Packet::of_len(100), &mut cx);
    }
    // teql_enqueue counts neither bytes nor packets queued; qdisc_drop counts the 1001st.
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(
        s.contains("qdisc teql0 1: root refcnt 2 \n Sent 0 bytes 0 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 0b 0p"),
        "{s}"
    );
    // teql_dequeue: Sent as it goes, the queue length what is left, never a backlog in bytes.
    let _ = e.device_mut("eth0").unwrap().dequeue(&mut cx);
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(
        s.contains(" Sent 100 bytes 1 pkt (dropped 1, overlimits 0 requeues 0) \n backlog 0b 999p"),
        "{s}"
    );
    let o = run(
        &mut e,
        "qdisc replace dev eth0 root handle 1: teql0 limit 5",
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            1,
            "Unknown qdisc \"teql0\", hence option \"limit\" is unparsable\n"
        )
    );
}

#[test]
fn the_first_teql0_makes_the_master_and_each_root_joins_its_ring() {
    let mut e = Engine::new();
    assert!(e.device("teql0").is_none());
    for dev in ["eth0", "eth1", "eth2"] {
        let o = run(&mut e, &format!("qdisc add dev {dev} root teql0"));
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    // teql_master_setup: down, mtu 1500, txqueuelen 100; `ip link` shows a down device's noop.
    let listing = tclab_tc::store::link_show(&e, false, Some("teql0"));
    assert_eq!(
        listing,
        "4: teql0: mtu 1500 qdisc noop state DOWN qlen 100\n"
    );
    // Each new slave goes right after the head: eth0, eth2, eth1.
    assert_eq!(slaves(&e), ["eth0", "eth2", "eth1"]);
    // A slave's qdisc replaced (by anything) or deleted leaves the ring (teql_destroy).
    assert_eq!(run(&mut e, "qdisc replace dev eth2 root pfifo").code, 0);
    assert_eq!(run(&mut e, "qdisc del dev eth0 root").code, 0);
    assert_eq!(slaves(&e), ["eth1"]);
    // A device deleted takes its slave with it.
    link(&mut e, "del dev eth1").unwrap();
    assert!(slaves(&e).is_empty());
    // The master cannot be deleted (no rtnl_link_ops), nor opened without a slave (EUNATCH).
    assert_eq!(
        link(&mut e, "del dev teql0").unwrap_err(),
        "RTNETLINK answers: Operation not supported"
    );
    assert_eq!(
        link(&mut e, "set dev teql0 up").unwrap_err(),
        "RTNETLINK answers: Protocol driver not attached"
    );
    assert!(!e.device("teql0").unwrap().up);
}

#[test]
fn teql_qdisc_inits_refusals() {
    let mut e = Engine::new();
    assert_eq!(run(&mut e, "qdisc add dev eth0 root teql0").code, 0);
    // The master itself: ELOOP.
    let o = run(&mut e, "qdisc add dev teql0 root teql0");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "RTNETLINK answers: Too many levels of symbolic links\n")
    );
    // Anywhere but the root: EOPNOTSUPP with the module's message.
    assert_eq!(
        run(&mut e, "qdisc add dev eth1 root handle 1: prio").code,
        0
    );
    let o = run(&mut e, "qdisc add dev eth1 parent 1:1 teql0");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "Error: sch_teql: teql can only be used as root.\n")
    );
    assert_eq!(slaves(&e), ["eth0"], "nothing joined");
}

#[test]
fn the_masters_mtu_is_its_smallest_slaves() {
    let mut e = Engine::new();
    link(&mut e, "add dev eth0 mtu 1500").unwrap();
    link(&mut e, "add dev eth1 mtu 1400").unwrap();
    link(&mut e, "add dev eth2 mtu 1300").unwrap();
    // The first slave's MTU outright, then the smaller while the master is down.
    assert_eq!(run(&mut e, "qdisc add dev eth0 root teql0").code, 0);
    assert_eq!(e.device("teql0").unwrap().mtu, 1500);
    assert_eq!(run(&mut e, "qdisc add dev eth1 root teql0").code, 0);
    assert_eq!(e.device("teql0").unwrap().mtu, 1400);
    // teql_master_mtu: not above a slave's.
    assert_eq!(
        link(&mut e, "set dev teql0 mtu 1450").unwrap_err(),
        "RTNETLINK answers: Invalid argument"
    );
    link(&mut e, "set dev teql0 mtu 1000").unwrap();
    // teql_master_open recomputes it: the smallest slave's.
    link(&mut e, "set dev teql0 up").unwrap();
    assert_eq!(e.device("teql0").unwrap().mtu, 1400);
    // Up, a slave with a smaller MTU than the master's is refused (EINVAL).
    let o = run(&mut e, "qdisc add dev eth2 root teql0");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "RTNETLINK answers: Invalid argument\n")
    );
    assert_eq!(slaves(&e), ["eth0", "eth1"]);
}

#[test]
fn a_slave_that_is_not_ethernet_like_beside_broadcast_ones() {
    // teql_qdisc_init: while the master is up, a slave lacking IFF_BROADCAST (wireguard, an IP
    // tunnel) beside broadcast slaves is EINVAL; while it is down, it joins and the master stops
    // being broadcast, and then (up) a broadcast slave may join again.
    let mut e = Engine::new();
    link(&mut e, "add dev wg0 type wireguard").unwrap();
    assert_eq!(run(&mut e, "qdisc add dev eth0 root teql0").code, 0);
    link(&mut e, "set dev teql0 up").unwrap();
    let o = run(&mut e, "qdisc add dev wg0 root teql0");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "RTNETLINK answers: Invalid argument\n")
    );
    link(&mut e, "set dev teql0 down").unwrap();
    assert_eq!(run(&mut e, "qdisc add dev wg0 root teql0").code, 0);
    link(&mut e, "set dev teql0 up").unwrap();
    assert!(
        !e.teql().unwrap().broadcast,
        "teql_master_open: not every slave is"
    );
    assert_eq!(run(&mut e, "qdisc add dev eth1 root teql0").code, 0);
    assert_eq!(slaves(&e), ["eth0", "eth1", "wg0"]);
}

#[test]
fn change_and_replace_of_a_slave_with_teql0_again_change_nothing() {
    // tc sends teql no options (parse_noqopt), so tc_modify_qdisc's "change" path (change, or
    // replace of the same kind and handle) reaches qdisc_change without TCA_OPTIONS, which never
    // asks for the `change` teql lacks: exit 0, the slave and its queue left as they were.
    let mut e = Engine::new();
    assert_eq!(
        run(&mut e, "qdisc add dev eth0 root handle 1: teql0").code,
        0
    );
    assert_eq!(run(&mut e, "qdisc add dev eth1 root teql0").code, 0);
    let mut cx = Cx::new(0);
    let _ = e
        .device_mut("eth0")
        .unwrap()
        .enqueue(Packet::of_len(100), &mut cx);
    for line in [
        "qdisc change dev eth0 root teql0",
        "qdisc change dev eth0 root handle 1: teql0",
        "qdisc replace dev eth0 root teql0",
        "qdisc replace dev eth0 root handle 1: teql0",
    ] {
        let o = run(&mut e, line);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{line}");
    }
    assert_eq!(slaves(&e), ["eth0", "eth1"]);
    let _ = e.device_mut("eth0").unwrap().dequeue(&mut cx);
    let s = run(&mut e, "-s qdisc show dev eth0").stdout;
    assert!(
        s.contains("qdisc teql0 1: root refcnt 2 \n Sent 100 bytes 1 pkt"),
        "{s}"
    );
    // An option is still tc's own refusal, before the kernel.
    let o = run(&mut e, "qdisc change dev eth0 root teql0 limit 5");
    assert_eq!(o.code, 1, "{}", o.stderr);
}
