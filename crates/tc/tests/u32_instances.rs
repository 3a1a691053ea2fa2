//! u32 instances on one block share `tc_u_common`, whose table ids run out: the first instance's root
//! is 800:, the others take `gen_new_htid`'s ids 1..0x7fe (801: … ffe:). The kernel's 2048th instance
//! gets the id 0 (`gen_new_htid` answers 0 when `idr_alloc_cyclic` fails), `u32_get` then finds that
//! table for the request's handle 0, and the add is refused: "Error: Filter already exists." (checked
//! on this machine's kernel, 6.18, with tc 6.1: 2 050 filters `prio N u32 match ip dst … flowid …` in
//! one `tc -batch`; pref 2047 is fh ffe:, line 2 050 fails). tclab gave the 2048th instance 800: again,
//! a second table of that handle, and took it and every one after.

use tclab_core::Engine;

fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn filter(pref: u32) -> String {
    format!(
        "filter add dev eth0 parent 1: protocol ip prio {pref} u32 match ip dst 100.64.{}.{}/32 flowid 1:{:x}",
        pref / 256,
        pref % 256,
        0x10 + pref
    )
}

#[test]
fn the_2048th_u32_instance_of_a_block_is_refused_as_the_kernel_refuses_it() {
    let mut e = Engine::new();
    for l in [
        "qdisc add dev eth0 root handle 1: htb default 2",
        "class add dev eth0 parent 1: classid 1:2 htb rate 1mbit",
    ] {
        assert_eq!(tc(&mut e, l).code, 0, "{l}");
    }
    for pref in 1..=2047 {
        let out = tc(&mut e, &filter(pref));
        assert_eq!(out.code, 0, "pref {pref}: {}", out.stderr);
    }
    let out = tc(&mut e, &filter(2048));
    assert_eq!(out.code, 2, "the 2048th instance was taken");
    assert!(
        out.stderr.contains("Filter already exists"),
        "{}",
        out.stderr
    );
    let shown = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        shown.contains("pref 2047 u32 chain 0 fh ffe::800"),
        "pref 2047 is ffe:"
    );
    assert!(
        !shown.contains("pref 2048 "),
        "nothing of the refused instance is left"
    );
    // Each root table appears once: no second 800:.
    assert_eq!(shown.matches(" fh 800: ht divisor 1").count(), 1);
    // An instance deleted frees its id, and a new one takes it.
    assert_eq!(tc(&mut e, "filter del dev eth0 parent 1: prio 5").code, 0);
    let out = tc(&mut e, &filter(3000));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let shown = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        shown.contains("pref 3000 u32 chain 0 fh 804::800"),
        "the freed id 804:"
    );
}
