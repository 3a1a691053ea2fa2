//! The cgroup classifier on hand-built packets: its result is the packet's `net_cls` classid
//! (`task_get_classid`), given only when the packet also passes the filter's ematch tree
//! (`cls_cgroup_classify`); without a classid nothing matches. A prio qdisc shows where each went.

use tclab_core::{Cx, Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn ok(e: &mut Engine, line: &str) {
    let out = tc(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

#[test]
fn the_sending_cgroups_class_for_packets_that_pass_the_ematch() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    // UDP only (IP protocol 17 at byte 9 of the network header). tc 6.1 needs a word after the
    // ematch (its parser steps back one word at the end of the line).
    let argv: Vec<String> = [
        "filter",
        "add",
        "dev",
        "eth0",
        "parent",
        "1:",
        "handle",
        "1",
        "protocol",
        "ip",
        "prio",
        "1",
        "cgroup",
        "match",
        "cmp(u8 at 9 layer network eq 17)",
        "action",
        "pass",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tclab_tc::run(&mut e, &argv, 0);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let udp = |classid| {
        let mut p = Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 53, 0, 100);
        p.set_cgroup_classid(classid);
        p
    };
    let mut tcp = Packet::tcp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 80, 0x10, 1, 1, &[], 100);
    tcp.set_cgroup_classid(0x0001_0003);
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    // In the cgroup whose classid is 1:3 and UDP: band 3. No classid, or TCP: the priomap's band 2
    // (priority 0).
    for p in [udp(0x0001_0003), udp(0), tcp] {
        let _ = dev.enqueue(p, &mut cx);
    }
    let s = tc(&mut e, "-s class show dev eth0").stdout;
    assert!(
        s.contains("class prio 1:3 parent 1: \n Sent 0 bytes 0 pkt"),
        "nothing sent yet: {s}"
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut order = Vec::new();
    while let Some(p) = dev.dequeue(&mut cx) {
        order.push((p.cgroup_classid(), p.protocol));
    }
    let s = tc(&mut e, "-s class show dev eth0").stdout;
    // The UDP packets are 100 bytes on the wire; the TCP one 14 + 20 + 20 + 100 = 154.
    assert!(
        s.contains("class prio 1:3 parent 1: \n Sent 100 bytes 1 pkt"),
        "{s}"
    );
    assert!(
        s.contains("class prio 1:2 parent 1: \n Sent 254 bytes 2 pkt"),
        "{s}"
    );
    assert_eq!(order.len(), 3);
    let listing = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        listing.contains("cgroup chain 0 handle 0x1 \n  cmp(u8 at 9 layer 1 eq 17)"),
        "{listing}"
    );
}
