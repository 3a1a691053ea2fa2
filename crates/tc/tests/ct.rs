//! The ct action through tc lines and a device's ingress: `commit mark` gives the packet's connection
//! the mark `tcf_ct_act_set_mark` computes (`mark | (ct->mark & ~mask)`), which a `connmark` after it
//! restores into the packet's mark; `clear` untracks the packet; a non-IP packet is dropped and counted;
//! tc's and the kernel's refusals (m_ct.c's messages) apply nothing; the JSON listing.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

/// An engine whose eth0 ingress runs `actions` on every packet.
fn ingress(actions: &str) -> Engine {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 ingress");
    let o = run(
        &mut e,
        &format!("filter add dev eth0 parent ffff: protocol all prio 1 matchall {actions}"),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    e
}

fn recv(e: &mut Engine, mut p: Packet, ct_mark: Option<u32>) -> Option<Packet> {
    p.ct_mark = ct_mark;
    e.device_mut("eth0").unwrap().receive(p, &mut Cx::new(0))
}

fn udp() -> Packet {
    Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 300)
}

#[test]
fn commit_marks_the_connection_and_connmark_reads_it_back() {
    let mut e = ingress("action ct commit mark 0x42/0xf0 index 5 pipe action connmark");
    // 0x42 | (0x1234 & ~0xf0) = 0x1246: the value's bits outside the mask are set too (act_ct.c).
    let p = recv(&mut e, udp(), Some(0x1234)).expect("passes");
    assert_eq!(p.mark, 0x1246);
    assert_eq!(p.ct_mark, Some(0x1246));
    // An untracked packet: commit creates the entry (mark 0), so 0x42.
    let p = recv(&mut e, udp(), None).expect("passes");
    assert_eq!(p.mark, 0x42);
    let s = run(&mut e, "actions get action ct index 5").stdout;
    assert!(
        s.contains("ct commit mark 66/0xf0 zone 0 pipe\n\t index 5 ref 1 bind 1\n"),
        "{s}"
    );
}

#[test]
fn clear_untracks_and_non_ip_is_dropped() {
    let mut e = ingress("action ct clear pipe action connmark");
    let p = recv(&mut e, udp(), Some(7)).expect("passes");
    assert_eq!((p.mark, p.ct_mark), (0, None), "nothing left to restore");

    let mut e = ingress("action ct zone 3 index 9");
    let mut arp = udp();
    arp.protocol = 0x0806;
    assert!(recv(&mut e, arp, None).is_none(), "shot");
    assert!(recv(&mut e, udp(), None).is_some());
    let s = run(&mut e, "-s actions get action ct index 9").stdout;
    assert!(s.contains("(dropped 1, overlimits 0"), "{s}");
}

#[test]
fn refusals_apply_nothing() {
    let mut e = Engine::new();
    let cases: [(&str, i32, &str); 8] = [
        ("ct clear commit", 255, "ct: clear can only be used alone\n"),
        (
            "ct commit nat src addr 1.1.1.1 port 1 nat dst addr 2.2.2.2 port 2",
            255,
            "ct: src and dst nat can't be used together\n",
        ),
        ("ct commit nat zone 1", 255, "ct: commit and nat must set src or dst\n"),
        (
            "ct nat src addr 1.1.1.1 index 1",
            255,
            "ct: src or dst is only valid if commit is set\n",
        ),
        (
            "ct commit nat src addr foo index 1",
            1,
            "Error: any valid address is expected rather than \"foo\".\n",
        ),
        (
            "ct commit nat src addr 1.1.1.1-2001::1 index 1",
            1,
            "Error: inet address is expected rather than \"2001::1\".\n",
        ),
        ("ct zone 65536", 255, "ct: Illegal \"zone\"\n"),
        (
            "ct label 123456789012345678901234567890123",
            255,
            "Error: argument \"123456789012345678901234567890123\" is wrong: 33 Max allowed size 32\n",
        ),
    ];
    for (args, code, msg) in cases {
        let o = run(&mut e, &format!("actions add action {args}"));
        assert_eq!(o.code, code, "{args}: {}", o.stderr);
        assert!(o.stderr.starts_with(msg), "{args}: {}", o.stderr);
    }
    // nat src addr … at the end of the line: NEXT_ARG after the address finds nothing.
    let o = run(&mut e, "actions add action ct commit nat src addr 1.1.1.1");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr.contains("Command line is not complete"),
        "{}",
        o.stderr
    );
    assert_eq!(run(&mut e, "actions ls action ct").stdout, "");
}

#[test]
fn json_listing() {
    let mut e = Engine::new();
    let o = run(
        &mut e,
        "actions add action ct commit force zone 7 mark 5 label 01/ff nat dst addr 10.0.0.1-10.0.0.9 port 80 index 3 drop",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = run(&mut e, "actions ls action ct").stdout;
    assert!(
        s.contains(
            "ct commit force mark 5 zone 7 label 01000000000000000000000000000000/ff000000000000000000000000000000 nat dst addr 10.0.0.1-10.0.0.9 port 80 drop\n"
        ),
        "{s}"
    );
    let j = run(&mut e, "-j actions ls action ct").stdout;
    assert!(
        j.contains(r#""kind":"ct","action":"commit force","mark":5,"zone":7,"label":"01000000000000000000000000000000/ff000000000000000000000000000000","nat":"dst addr 10.0.0.1-10.0.0.9 port 80","control_action":{"type":"drop"},"index":3"#),
        "{j}"
    );
}
