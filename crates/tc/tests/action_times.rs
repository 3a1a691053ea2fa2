//! An action's times under `tc -s` (`tcf_tm_dump` in include/net/act_api.h, iproute2's `print_tm`):
//! ages in clock ticks (USER_HZ 100), each printed in whole seconds when its ticks are not 0. Making an
//! action sets `install` and `lastuse` to now and `firstuse` to 0 (`tcf_idr_create`); a packet sets
//! `lastuse`, and `firstuse` if it is 0 (`tcf_lastuse_update`). Measured with tc 6.1 on this machine's
//! Linux 6.18 (a mirred action on lo's clsact, pings): `installed 2 sec used 2 sec` before any packet,
//! `installed 9 sec used 1 sec firstused 3 sec` after; -j: "installed", "last_used", "first_used".
//! tclab printed no `used` for an unused action and never `firstused`.

use tclab_core::{Cx, Engine, Packet};

const SEC: u64 = 1_000_000_000;

fn run(e: &mut Engine, line: &str, now: u64) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, now);
    assert_eq!(out.code, 0, "{line}: {}", out.stderr);
    out
}

/// The line of `tc -s actions ls action gact` with the index and the times.
fn times(e: &mut Engine, now: u64) -> String {
    let out = run(e, "-s actions ls action gact", now).stdout;
    out.lines()
        .find(|l| l.contains("index 1 "))
        .unwrap_or_else(|| panic!("no index line in {out}"))
        .trim()
        .to_string()
}

fn json(e: &mut Engine, now: u64) -> String {
    run(e, "-s -j actions ls action gact", now).stdout
}

#[test]
fn an_actions_times_are_the_kernels() {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 root handle 1: prio", 0);
    run(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action gact pass index 1",
        0,
    );
    // Unused: made 8 s ago counts as its last use; no first use.
    assert_eq!(
        times(&mut e, 8 * SEC),
        "index 1 ref 1 bind 1 installed 8 sec used 8 sec"
    );
    let j = json(&mut e, 8 * SEC);
    assert!(j.contains("\"installed\":8,\"last_used\":8"), "{j}");
    assert!(!j.contains("first_used"), "{j}");
    // Packets at 3 s and 7.5 s.
    for at in [3 * SEC, 7 * SEC + SEC / 2] {
        let dev = e.device_mut("eth0").unwrap();
        let mut cx = Cx::new(at);
        let _ = dev.enqueue(Packet::of_len(1000), &mut cx);
        assert!(dev.dequeue(&mut cx).is_some());
    }
    // Half a second since the last: 50 ticks, printed as 0 sec.
    assert_eq!(
        times(&mut e, 8 * SEC),
        "index 1 ref 1 bind 1 installed 8 sec used 0 sec firstused 5 sec"
    );
    let j = json(&mut e, 8 * SEC);
    assert!(
        j.contains("\"installed\":8,\"last_used\":0,\"first_used\":5"),
        "{j}"
    );
    // 5 ms since the last: no whole tick, so tc leaves `used` out.
    assert_eq!(
        times(&mut e, 7 * SEC + SEC / 2 + 5_000_000),
        "index 1 ref 1 bind 1 installed 7 sec firstused 4 sec"
    );
    // At the making itself every age is 0 ticks: nothing (the policy store, whose clock is 0).
    let mut fresh = Engine::new();
    run(&mut fresh, "actions add action gact pass index 1", 0);
    assert_eq!(times(&mut fresh, 0), "index 1 ref 1 bind 0");
}

/// The old `police` form inside a filter is dumped by the action's own dump (cls_api.c's
/// tcf_exts_dump → tcf_action_dump_old → act_police.c's tcf_police_dump, TCA_POLICE_TM included) and
/// tc 6.1's f_u32.c prints it with tc_print_police, the same print_police as the action form, which
/// under `-s` ends its `ref … bind …` line with print_tm. tclab printed no times there.
#[test]
fn a_police_inside_a_filter_shows_its_times_as_the_action_form() {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 root handle 1: prio", 0);
    run(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u32 0 0 \
         police rate 800kbit burst 10k drop flowid 1:1",
        0,
    );
    let refs = |e: &mut Engine, line: &str, now: u64| {
        let out = run(e, line, now).stdout;
        out.lines()
            .find(|l| l.starts_with("\tref "))
            .unwrap_or_else(|| panic!("no ref line in {out}"))
            .to_string()
    };
    // print_int "bind %d " then print_tm's " installed %u sec": two spaces between them.
    assert_eq!(
        refs(&mut e, "-s filter show dev eth0", 8 * SEC),
        "\tref 1 bind 1  installed 8 sec used 8 sec"
    );
    // Without -s, no times.
    assert_eq!(
        refs(&mut e, "filter show dev eth0", 8 * SEC),
        "\tref 1 bind 1 "
    );
    let j = run(&mut e, "-s -j filter show dev eth0", 8 * SEC).stdout;
    assert!(j.contains("\"installed\":8,\"last_used\":8"), "{j}");
}
