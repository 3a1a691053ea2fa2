//! The cBPF classifier on hand-built packets, with the kernel's tdc programs: `ldh [12]` reads the
//! EtherType of the frame (tclab gives the program a 14-byte Ethernet header in front of the packet),
//! `jeq #0x800`, then `ret #K` names the class K (`cls_bpf_classify`: 0 is no match, -1 the filter's
//! classid). Refusals are the kernel's (`bpf_check_classic`: EINVAL), with nothing applied.

use tclab_core::{Cx, Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    // The bytecode is one word, as a shell passes '…'.
    let mut argv: Vec<String> = Vec::new();
    let mut quoted = line.split('\'');
    for (i, part) in quoted.by_ref().enumerate() {
        if i % 2 == 1 {
            argv.push(part.to_string());
        } else {
            argv.extend(part.split_whitespace().map(str::to_string));
        }
    }
    tclab_tc::run(e, &argv, 0)
}

fn ok(e: &mut Engine, line: &str) {
    let out = tc(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

fn sent(e: &mut Engine, class: &str) -> String {
    let s = tc(e, "-s class show dev eth0").stdout;
    let at = s
        .find(&format!("class prio {class} "))
        .expect("class listed");
    s[at..].lines().nth(1).unwrap_or("").trim().to_string()
}

#[test]
fn ipv4_to_the_class_the_program_returns_the_rest_by_the_priomap() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    // IPv4 → 0x10003 (1:3); anything else → 0 (no match).
    ok(
        &mut e,
        "filter add dev eth0 parent 1: handle 1 protocol all prio 1 bpf bytecode '4,40 0 0 12,21 0 1 2048,6 0 0 65539,6 0 0 0'",
    );
    let mut v6 = Packet::of_len(200);
    v6.protocol = 0x86dd;
    let v4 = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 300);
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(v4, &mut cx);
    let _ = dev.enqueue(v6, &mut cx);
    while dev.dequeue(&mut cx).is_some() {}
    assert!(sent(&mut e, "1:3").starts_with("Sent 300 bytes 1 pkt"));
    assert!(sent(&mut e, "1:2").starts_with("Sent 200 bytes 1 pkt"));
}

#[test]
fn minus_one_means_the_filters_classid() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 bpf bytecode '1,6 0 0 4294967295' classid 1:1",
    );
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(Packet::of_len(100), &mut cx);
    while dev.dequeue(&mut cx).is_some() {}
    assert!(sent(&mut e, "1:1").starts_with("Sent 100 bytes 1 pkt"));
    let list = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        list.contains("bpf chain 0 handle 0x1 flowid 1:1 not_in_hw bytecode '1,6 0 0 4294967295'"),
        "{list}"
    );
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    // A jump past the end, a division by the constant 0, no ret at the end: the kernel's EINVAL.
    for prog in ["2,21 5 0 1,6 0 0 0", "2,52 0 0 0,6 0 0 0", "1,0 0 0 1"] {
        let out = tc(
            &mut e,
            &format!("filter add dev eth0 parent 1: protocol ip prio 1 bpf bytecode '{prog}'"),
        );
        assert_eq!(out.code, 2, "{prog}");
        assert!(
            out.stderr
                .starts_with("RTNETLINK answers: Invalid argument"),
            "{}",
            out.stderr
        );
    }
    // tc's own: a count that does not agree with the program.
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 bpf bytecode '3,6 0 0 0'",
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with(
        "Parsed program length is less than encoded length parameter!\nUnable to parse bpf command line"
    ));
    // eBPF objects.
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 bpf obj prog.o",
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("tclab does not run eBPF programs"));
    assert_eq!(
        tc(&mut e, "filter show dev eth0").stdout,
        "",
        "nothing applied"
    );
}

#[test]
fn the_action_answers_with_its_program_or_its_default() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    // IPv4 → 2 (shot, a counted drop); anything else → -1 (the default action, pass).
    ok(
        &mut e,
        "filter add dev eth0 parent ffff: protocol all prio 1 matchall action bpf bytecode '4,40 0 0 12,21 0 1 2048,6 0 0 2,6 0 0 4294967295' pass index 7",
    );
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let v4 = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
    let mut v6 = Packet::of_len(100);
    v6.protocol = 0x86dd;
    assert!(dev.receive(v4, &mut cx).is_none(), "IPv4 shot");
    assert!(dev.receive(v6, &mut cx).is_some(), "IPv6 passes");
    // Made by the filter: one reference, one binding; both packets counted, the IPv4 one as a drop,
    // each at its length at the ingress hook (`skb->len`: 100 less the 14-byte Ethernet header).
    let s = tc(&mut e, "-s actions get action bpf index 7").stdout;
    assert!(
        s.contains("bpf bytecode '4,40 0 0 12,21 0 1 2048,6 0 0 2,6 0 0 4294967295' default-action pass\n\t index 7 ref 1 bind 1"),
        "{s}"
    );
    assert!(s.contains("Sent 172 bytes 2 pkt (dropped 1,"), "{s}");
}

#[test]
fn the_actions_help_prints_m_bpfs_usage() {
    // This machine's tc (iproute2-6.1.0): `tc actions add action bpf help` prints m_bpf.c's explain()
    // before the action parser's three lines, exit 255. tclab printed the three lines alone.
    let mut e = Engine::new();
    let o = tc(&mut e, "actions add action bpf help");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr.starts_with(
            "Usage: ... bpf ... [ index INDEX ]\n\nBPF use case:\n bytecode BPF_BYTECODE\n"
        ),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.ends_with(
            "explicitly specifies an action index upon creation.\nbad action parsing\n\
             parse_action: bad value (2:bpf)!\nIllegal \"action\"\n"
        ),
        "{}",
        o.stderr
    );
}
