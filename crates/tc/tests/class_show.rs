//! `tc class show`'s selectors as this machine's tc (iproute2 6.1, kernel 6.18) answers them, recorded
//! by hand in a namespace on 2026-11-27 with the policy below on a veth: `qdisc H` lists only that
//! qdisc's classes and prints their ids and parents by minor alone (`print_class` with
//! `filter_qdisc`), `qdisc` and `parent` both select, and any other word is refused
//! (`tc_class_list`: `What is "bogus"? Try "tc class help".`, exit 255).

use tclab_core::Engine;

fn run(e: &mut Engine, line: &str) -> (i32, String, String) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    (out.code, out.stdout, out.stderr)
}

/// Device v0 with `lines` applied, each of which must succeed.
fn applied(lines: &[&str]) -> Engine {
    let mut e = Engine::new();
    e.add_device("v0", 1500, 1000);
    for l in lines {
        let (code, _, err) = run(&mut e, l);
        assert_eq!(code, 0, "{l}: {err}");
    }
    e
}

fn engine() -> Engine {
    applied(&[
        "qdisc add dev v0 root handle 1: htb default 11",
        "class add dev v0 parent 1: classid 1:1 htb rate 10mbit",
        "class add dev v0 parent 1:1 classid 1:11 htb rate 5mbit",
        "qdisc add dev v0 parent 1:11 handle 10: htb",
        "class add dev v0 parent 10: classid 10:5 htb rate 1mbit",
    ])
}

#[test]
fn qdisc_selects_its_classes_and_prints_minors() {
    let mut e = engine();
    let (code, out, _) = run(&mut e, "class show dev v0 qdisc 1:");
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "class htb :11 parent :1 leaf 10: prio 0 rate 5Mbit ceil 5Mbit burst 1600b cburst 1600b \n\
         class htb :1 root rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b \n"
    );
    let (_, out, _) = run(&mut e, "class show dev v0 qdisc 10:");
    assert_eq!(
        out,
        "class htb :5 root prio 0 rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b \n"
    );
    // Both selectors apply: qdisc 10:'s classes under parent 1: are none.
    let (code, out, _) = run(&mut e, "class show dev v0 qdisc 10: parent 1:");
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn a_listing_refuses_what_it_does_not_know() {
    let mut e = engine();
    for (line, says) in [
        (
            "class show dev v0 bogus",
            "What is \"bogus\"? Try \"tc class help\".",
        ),
        (
            "class show dev v0 ingress",
            "What is \"ingress\"? Try \"tc class help\".",
        ),
        (
            "class show dev v0 qdisc xyz",
            "Error: argument \"xyz\" is wrong: invalid qdisc ID",
        ),
        (
            "class show dev v0 qdisc 1: qdisc 2:",
            "Error: duplicate \"qdisc\": \"2:\" is the second value.",
        ),
    ] {
        let (code, out, err) = run(&mut e, line);
        assert_eq!(code, 255, "{line}: {err}");
        assert!(out.is_empty(), "{line} lists nothing: {out}");
        assert!(err.contains(says), "{line}: {err}");
    }
}

/// `classid 1:` (or `1:0`) on HTB: htb_change_class refuses only classid 0, another qdisc's major or
/// an existing class, so it is a class; this machine's kernel (6.18, recorded in a namespace on
/// 2026-11-28 on lo) accepted it, showed it as below, answered a second one `File exists`, and took
/// a later `parent 1:` as that class (htb_find finds it) — so 1:10 is its child and it cannot go.
#[test]
fn an_htb_class_of_minor_zero_is_a_class() {
    let mut e = applied(&[
        "qdisc add dev v0 root handle 1: htb",
        "class add dev v0 parent 1: classid 1:0 htb rate 1mbit",
    ]);
    let (_, out, _) = run(&mut e, "class show dev v0");
    assert_eq!(
        out,
        "class htb 1: root prio 0 rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b \n"
    );
    let (code, _, err) = run(
        &mut e,
        "class add dev v0 parent 1: classid 1: htb rate 1mbit",
    );
    assert_eq!(
        (code, err.as_str()),
        (2, "RTNETLINK answers: File exists\n")
    );
    let (code, _, err) = run(
        &mut e,
        "class add dev v0 parent 1: classid 1:10 htb rate 512kbit",
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = run(&mut e, "class show dev v0");
    assert_eq!(
        out,
        "class htb 1: root rate 1Mbit ceil 1Mbit burst 1600b cburst 1600b \n\
         class htb 1:10 parent 1: prio 0 rate 512Kbit ceil 512Kbit burst 1600b cburst 1600b \n"
    );
    let (code, _, err) = run(&mut e, "class del dev v0 classid 1:");
    assert_eq!((code, err.as_str()), (2, "Error: HTB class in use.\n"));
}

/// The other classful kinds, from their change_class in the 6.12 source (this machine's kernel has no
/// sch_drr, sch_qfq or sch_hfsc modules): DRR and QFQ check no classid (tc_ctl_tclass has given it the
/// qdisc's major), so `1:` is a class; HFSC's root class is `1:` (hfsc_init_qdisc gives it the qdisc's
/// handle), so `tc class add` finds it and says File exists (NLM_F_EXCL).
#[test]
fn other_kinds_take_a_class_of_minor_zero_as_their_change_class_does() {
    for (qdisc, class, code) in [
        ("drr", "drr", 0),
        ("qfq", "qfq weight 1", 0),
        ("hfsc", "hfsc sc rate 1mbit ul rate 1mbit", 2),
    ] {
        let mut e = applied(&[&format!("qdisc add dev v0 root handle 1: {qdisc}")]);
        let (c, _, err) = run(
            &mut e,
            &format!("class add dev v0 parent 1: classid 1: {class}"),
        );
        assert_eq!(c, code, "{qdisc}: {err}");
        if code != 0 {
            assert_eq!(err, "RTNETLINK answers: File exists\n", "{qdisc}");
        } else {
            let (_, out, _) = run(&mut e, "class show dev v0");
            assert!(out.starts_with(&format!("class {qdisc} 1: root")), "{out}");
        }
    }
}

/// HTB's burst at absurd rates, as tc 6.1 on this machine (kernel 6.18, namespace, 2026-11-28) showed
/// them: tc_calc_xmittime stores the buffer's ticks in an `unsigned int`, so past 2^32 they wrap
/// (1600 bytes at 1 byte/s: 2.5e10 ticks, 225b shown; 10k: 0b), where a clamp would show 274b.
#[test]
fn an_htb_burst_past_32_bits_of_ticks_wraps_as_tc_gives_it() {
    let mut e = applied(&[
        "qdisc add dev v0 root handle 1: htb",
        "class add dev v0 parent 1: classid 1:1 htb rate 8bit",
        "class add dev v0 parent 1: classid 1:2 htb rate 40bit",
        "class add dev v0 parent 1: classid 1:3 htb rate 48bit",
        "class add dev v0 parent 1: classid 1:4 htb rate 100gbit burst 1gb",
        "class add dev v0 parent 1: classid 1:5 htb rate 8bit burst 10k cburst 100",
    ]);
    let (_, out, _) = run(&mut e, "class show dev v0");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "class htb 1:1 root prio 0 rate 8bit ceil 8bit burst 225b cburst 225b ",
            "class htb 1:2 root prio 0 rate 40bit ceil 40bit burst 225b cburst 225b ",
            "class htb 1:3 root prio 0 rate 48bit ceil 48bit burst 1599b cburst 1599b ",
            "class htb 1:4 root prio 0 rate 100Gbit ceil 100Gbit burst 1073725000b cburst 0b ",
            "class htb 1:5 root prio 0 rate 8bit ceil 8bit burst 0b cburst 100b ",
        ]
    );
}

/// `tc_ctl_tclass` looks the qdisc up before anything else: none of the classid's (or parent's) major,
/// or none at all but the device's default, is ENOENT; a qdisc without class operations (pfifo) is a
/// bare EINVAL, with no extack message (cls_api's "Qdisc not classful" is the filters'). This machine's
/// tc (iproute2 6.1, kernel 6.18, a veth in a namespace, 2026-11-28): `RTNETLINK answers: No such file
/// or directory` and `RTNETLINK answers: Invalid argument`, exit 2, for add, change, replace and del.
#[test]
fn a_class_without_its_qdisc_is_enoent_and_under_a_classless_one_einval() {
    const COMMANDS: [&str; 4] = [
        "class add dev v0 parent 1: classid 1:10 htb rate 1mbit",
        "class change dev v0 parent 1: classid 1:10 htb rate 1mbit",
        "class replace dev v0 parent 1: classid 1:10 htb rate 1mbit",
        "class del dev v0 classid 1:10",
    ];
    let mut e = applied(&[]);
    for line in COMMANDS.iter().copied().chain([
        "class add dev v0 classid 1:10 htb rate 1mbit",
        "class add dev v0 parent root htb rate 1mbit",
    ]) {
        let (code, out, err) = run(&mut e, line);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (2, "", "RTNETLINK answers: No such file or directory\n"),
            "{line}"
        );
    }
    // Another qdisc at the root (2:) is not the 1: the command names.
    let mut e = applied(&["qdisc add dev v0 root handle 2: htb"]);
    let (code, _, err) = run(&mut e, COMMANDS[0]);
    assert_eq!(
        (code, err.as_str()),
        (2, "RTNETLINK answers: No such file or directory\n")
    );
    let mut e = applied(&["qdisc add dev v0 root handle 1: pfifo"]);
    for line in COMMANDS {
        let (code, _, err) = run(&mut e, line);
        assert_eq!(
            (code, err.as_str()),
            (2, "RTNETLINK answers: Invalid argument\n"),
            "{line}"
        );
    }
}
