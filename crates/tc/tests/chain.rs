//! `tc chain`: chains as objects (`tc_ctl_chain`, `tc_dump_chain`). Expectations from cls_api.c: a chain
//! exists while it holds a filter instance or since `tc chain add` made it; `tc chain show` lists them
//! in the order they came to be, under the block's qdisc.

use tclab_core::Engine;

fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn ok(e: &mut Engine, line: &str) -> String {
    let out = tc(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

#[test]
fn explicit_chains_outlive_their_filters_and_others_do_not() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: htb default 1");
    ok(&mut e, "chain add dev eth0 chain 5");
    ok(
        &mut e,
        "filter add dev eth0 parent 1: chain 2 protocol ip prio 1 matchall classid 1:1",
    );
    ok(&mut e, "chain add dev eth0");
    // Creation order, not index order.
    assert_eq!(
        ok(&mut e, "chain show dev eth0"),
        "chain parent 1: chain 5 \nchain parent 1: chain 2 \nchain parent 1: chain 0 \n"
    );
    // Chain 2 goes with its last filter; chain 5, made by `tc chain add`, stays empty.
    ok(&mut e, "filter del dev eth0 parent 1: chain 2 prio 1");
    ok(&mut e, "filter del dev eth0 parent 1: chain 5 prio 0");
    assert_eq!(
        ok(&mut e, "chain show dev eth0 chain 5"),
        "chain parent 1: \n",
        "the chain asked for is not printed again"
    );
    assert_eq!(ok(&mut e, "chain show dev eth0 chain 2"), "");
    // A filter added to an explicit chain and the chain deleted: its filters go with it.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: chain 5 protocol ip prio 1 matchall classid 1:1",
    );
    ok(&mut e, "chain del dev eth0 chain 5");
    assert_eq!(ok(&mut e, "filter show dev eth0 chain 5"), "");
    assert_eq!(
        ok(&mut e, "chain show dev eth0"),
        "chain parent 1: chain 0 \n"
    );
}

#[test]
fn refusals_are_the_kernels() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: htb");
    ok(&mut e, "chain add dev eth0 chain 1");
    let out = tc(&mut e, "chain add dev eth0 chain 1");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            2,
            "Error: Filter chain already exists.\nWe have an error talking to the kernel\n"
        )
    );
    let out = tc(&mut e, "chain del dev eth0 chain 9");
    assert_eq!(
        out.stderr,
        "Error: Cannot find specified filter chain.\nWe have an error talking to the kernel\n"
    );
    let out = tc(&mut e, "chain add dev eth0 chain 268435456");
    assert!(out
        .stderr
        .starts_with("Error: Specified chain index exceeds upper limit."));
    let out = tc(&mut e, "chain get dev eth0 chain 1");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (255, "Must specify filter parent\n")
    );
    assert_eq!(
        ok(&mut e, "chain get dev eth0 parent 1: chain 1"),
        "chain parent 1: chain 1 \n"
    );
    // A root without a block (pfifo_fast) has no chains to make.
    ok(&mut e, "qdisc add dev eth1 root pfifo_fast");
    let out = tc(&mut e, "chain add dev eth1");
    assert!(
        out.stderr.starts_with("Error: Qdisc not classful."),
        "{}",
        out.stderr
    );
}

/// Under clsact, `parent ffff:` (no minor) names no block: `clsact_tcf_block` knows only the classes
/// fff2 and fff3, so `__tcf_block_find` refuses a filter or chain change with a bare EINVAL and a dump
/// lists nothing, where `ingress` (fff2) works. This machine's kernel (6.18, tc 6.1, in a namespace):
/// `RTNETLINK answers: Invalid argument` for add, del and get, an empty `filter show` and `chain show`.
#[test]
fn clsact_parent_without_minor_names_no_block() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 clsact");
    let add = "filter add dev eth0 parent ffff: protocol ip prio 1 u32 match ip dst 10.0.0.1/32 flowid 1:1";
    for line in [
        add,
        "chain add dev eth0 parent ffff: chain 3",
        "filter del dev eth0 parent ffff:",
        "filter get dev eth0 parent ffff: protocol ip prio 2 handle 800::800 u32",
    ] {
        let out = tc(&mut e, line);
        assert_ne!(out.code, 0, "tc {line} accepted");
        assert!(
            out.stderr.contains("RTNETLINK answers: Invalid argument"),
            "tc {line}: {}",
            out.stderr
        );
    }
    ok(
        &mut e,
        "filter add dev eth0 ingress protocol ip prio 2 u32 match ip dst 10.0.0.2/32 flowid 1:1",
    );
    ok(&mut e, "chain add dev eth0 ingress chain 3");
    assert_eq!(ok(&mut e, "filter show dev eth0 parent ffff:"), "");
    assert_eq!(ok(&mut e, "chain show dev eth0 parent ffff:"), "");
    assert!(ok(&mut e, "filter show dev eth0 ingress").contains("match 0a000002/ffffffff at 16"));
    assert_eq!(
        ok(&mut e, "chain show dev eth0 ingress"),
        "chain parent ffff: chain 0 \nchain parent ffff: chain 3 \n"
    );
    // The ingress qdisc keeps one block for every minor: `parent ffff:` is it.
    ok(&mut e, "qdisc del dev eth0 clsact");
    ok(&mut e, "qdisc add dev eth0 ingress");
    ok(&mut e, add);
    assert!(
        ok(&mut e, "filter show dev eth0 parent ffff:").contains("match 0a000001/ffffffff at 16")
    );
}
