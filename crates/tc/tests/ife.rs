//! The ife action through tc lines on two devices: `encode` on one's egress wraps each packet with its
//! metadata (the mark as it is, the priority as `use` fixes it) in an IFE frame, `decode` on the other's
//! ingress restores them and gives back the original packet (`act_ife.c`, `net/ife/ife.c`); the
//! listing as `m_ife.c` prints it.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn metadata_crosses_from_encode_to_decode() {
    let mut tx = Engine::new();
    run(&mut tx, "qdisc add dev eth0 root handle 1: prio");
    let o = run(
        &mut tx,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action ife encode allow mark use prio 5 dst 02:00:00:00:00:01 index 3",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        "dst MAC address <02:00:00:00:00:01>\nIFE type 0xED3E\n"
    );
    let mut sent = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 600);
    sent.mark = 77;
    let mut cx = Cx::new(0);
    let dev = tx.device_mut("eth0").unwrap();
    let _ = dev.enqueue(sent.clone(), &mut cx);
    let wire = dev.dequeue(&mut cx).expect("sent");
    // 2 + 8 + 8 bytes of metadata and the 14-byte inner header: 632 bytes leave.
    assert_eq!((wire.protocol, wire.len), (0xed3e, 632));
    let f = run(&mut tx, "filter show dev eth0").stdout;
    assert!(
        f.contains("ife encode action pipe type 0XED3E \n\tallow mark use prio 5 dst 02:00:00:00:00:01 \n\t index 3 ref 1 bind 1"),
        "{f}"
    );

    let mut rx = Engine::new();
    run(&mut rx, "qdisc add dev eth0 ingress");
    let o = run(
        &mut rx,
        "filter add dev eth0 parent ffff: protocol 0xed3e prio 1 matchall action ife decode pipe",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let arrived = Packet {
        data: wire.data.clone(),
        len: wire.len,
        protocol: wire.protocol,
        ..Packet::default()
    };
    let p = rx
        .device_mut("eth0")
        .unwrap()
        .receive(arrived, &mut Cx::new(0))
        .expect("decoded");
    assert_eq!((p.mark, p.priority), (77, 5));
    assert_eq!((&p.data, p.protocol, p.len), (&sent.data, 0x0800, 600));
    let s = run(&mut rx, "actions ls action ife").stdout;
    assert!(
        s.contains("ife decode action pipe type 0 \n\tallow mark allow tcindex allow prio \n"),
        "{s}"
    );
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    let o = run(&mut e, "actions add action ife encode allow foo");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            255,
            "Error: argument \"foo\" is wrong: Illegal meta define\n"
        )
    );
    let o = run(&mut e, "actions add action ife pipe");
    assert!(
        o.stderr
            .starts_with("IFE requires decode/encode specified\n"),
        "{}",
        o.stderr
    );
    assert_eq!(run(&mut e, "actions ls action ife").stdout, "");
}
