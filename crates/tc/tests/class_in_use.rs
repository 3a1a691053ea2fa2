//! A class that a filter names cannot be deleted, in HTB and CBQ as in DRR, QFQ and HFSC: the kernel
//! counts each filter bound to a class (`htb_bind_filter`, `cbq_bind_filter`: `filter_cnt++`, also
//! when `tc_bind_tclass` binds a filter added before its class) and `htb_delete`/`cbq_delete` refuse
//! with EBUSY while the count is not zero. An ISP's per-subscriber class deleted before its u32 filter
//! is refused on Linux; this machine's kernel (6.18) answers `Error: HTB class in use.`, exit 2, for a
//! class named by a u32 filter in the root table or in a hash table (checked by hand in a namespace).

use tclab_core::Engine;

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

fn tc_fails(e: &mut Engine, line: &str) -> (i32, String) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    (out.code, out.stderr)
}

fn engine(lines: &[&str]) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    for l in lines {
        tc(&mut e, l);
    }
    e
}

/// HTB 1: with leaves 1:10 (a root-table u32 node), 1:11 (a node in hash table 2:), 1:12 (a u32
/// filter at class 1:1's block, added before the class exists) and 1:13 (no filter).
const HTB: &[&str] = &[
    "qdisc add dev eth0 root handle 1: htb default 13",
    "class add dev eth0 parent 1: classid 1:1 htb rate 10mbit",
    "filter add dev eth0 parent 1:1 protocol ip prio 2 u32 match ip dst 100.64.0.3/32 flowid 1:12",
    "class add dev eth0 parent 1:1 classid 1:10 htb rate 1mbit",
    "class add dev eth0 parent 1:1 classid 1:11 htb rate 1mbit",
    "class add dev eth0 parent 1:1 classid 1:12 htb rate 1mbit",
    "class add dev eth0 parent 1:1 classid 1:13 htb rate 1mbit",
    "filter add dev eth0 parent 1: protocol ip prio 5 u32 match ip dst 100.64.0.1/32 flowid 1:10",
    "filter add dev eth0 parent 1: protocol ip prio 6 handle 2: u32 divisor 256",
    "filter add dev eth0 parent 1: protocol ip prio 6 u32 ht 2:2: match ip dst 100.64.0.2/32 flowid 1:11",
    "filter add dev eth0 parent 1: protocol ip prio 6 u32 ht 800:: match ip dst 100.64.0.0/16 hashkey mask 0x000000ff at 16 link 2:",
];

#[test]
fn an_htb_class_a_filter_names_is_busy() {
    let mut e = engine(HTB);
    for c in ["1:10", "1:11", "1:12"] {
        let (code, err) = tc_fails(&mut e, &format!("class del dev eth0 classid {c}"));
        assert_eq!(
            (code, err.as_str()),
            (2, "Error: HTB class in use.\n"),
            "class {c}"
        );
    }
    let before = tc(&mut e, "class show dev eth0");
    assert_eq!(before.lines().count(), 5, "nothing was deleted:\n{before}");
    // A class no filter names goes; so does one whose filter went first. The kernel, given these
    // lines, lists 1:1 and 1:10 after them.
    tc(&mut e, "class del dev eth0 classid 1:13");
    tc(
        &mut e,
        "filter del dev eth0 parent 1: prio 6 handle 2:2:800 u32",
    );
    tc(&mut e, "class del dev eth0 classid 1:11");
    tc(&mut e, "filter del dev eth0 parent 1:1 prio 2");
    tc(&mut e, "class del dev eth0 classid 1:12");
    let after = tc(&mut e, "class show dev eth0");
    assert_eq!(
        after
            .lines()
            .map(|l| l.split(' ').nth(2).unwrap())
            .collect::<Vec<_>>(),
        ["1:1", "1:10"],
        "{after}"
    );
}

#[test]
fn a_cbq_class_a_filter_names_is_busy() {
    // cbq_delete: `if (cl->filters || cl->children || cl == &q->link) return -EBUSY;` with no extack,
    // so tc prints strerror(EBUSY).
    let mut e = engine(&[
        "qdisc add dev eth0 root handle 1: cbq avpkt 1000 bandwidth 10mbit",
        "class add dev eth0 parent 1: classid 1:10 cbq rate 1mbit allot 1514 avpkt 1000",
        "class add dev eth0 parent 1: classid 1:20 cbq rate 1mbit allot 1514 avpkt 1000",
        "filter add dev eth0 parent 1: protocol ip prio 5 u32 match ip dst 100.64.0.1/32 flowid 1:10",
    ]);
    let (code, err) = tc_fails(&mut e, "class del dev eth0 classid 1:10");
    assert_eq!(
        (code, err.as_str()),
        (2, "RTNETLINK answers: Device or resource busy\n")
    );
    tc(&mut e, "class del dev eth0 classid 1:20");
    tc(&mut e, "filter del dev eth0 parent 1: prio 5");
    tc(&mut e, "class del dev eth0 classid 1:10");
}
