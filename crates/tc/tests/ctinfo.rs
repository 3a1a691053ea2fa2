//! The ctinfo action through tc lines and a device's ingress: a connection's mark carries a DSCP in
//! 6 bits (written back into the packet's DS field, ECN kept, IPv4 checksum patched, when the state bit
//! is set) and a mark (copied, masked), as `act_ctinfo.c` restores them; the `-s` counters as
//! `m_ctinfo.c` prints them.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn the_connection_mark_restores_dscp_and_mark_on_ingress() {
    let mut e = Engine::new();
    run(&mut e, "qdisc add dev eth0 ingress");
    let o = run(
        &mut e,
        "filter add dev eth0 parent ffff: protocol ip prio 1 matchall action ctinfo dscp 0xfc000000 0x01000000 cpmark 0x00ffffff zone 3 index 7",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut recv = |mark: Option<u32>| {
        let mut p = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x02, 300);
        p.ct_mark = mark;
        e.device_mut("eth0")
            .unwrap()
            .receive(p, &mut Cx::new(0))
            .expect("passes")
    };
    // DSCP 10 (AF11) stored with the state bit: the packet leaves with TOS 10 << 2 | ECT(0).
    let p = recv(Some(10 << 26 | 1 << 24 | 0x55));
    assert_eq!(
        (p.data[1], p.mark),
        (10 << 2 | 0x02, 0x55),
        "the mark masked by 0x00ffffff"
    );
    assert_eq!(tclab_core::wire::checksum(&p.data[..20]), 0);
    // No state bit: DSCP untouched, the mark still copied. Untracked: nothing.
    let p = recv(Some(10 << 26));
    assert_eq!((p.data[1], p.mark), (0x02, 0));
    let p = recv(None);
    assert_eq!((p.data[1], p.mark), (0x02, 0));
    let s = run(&mut e, "-s actions get action ctinfo index 7").stdout;
    assert!(
        s.contains("ctinfo zone 3 pipe\n\t index 7 ref 1 bind 1 dscp 0xfc000000 0x01000000 cpmark 0x00ffffff DSCP set 1 error 0 CPMARK set 2\n"),
        "{s}"
    );
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    let o = run(&mut e, "actions add action ctinfo dscp 0xf8000000");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr
            .starts_with("ctinfo: dscp mask must be 6 contiguous bits long\n"),
        "{}",
        o.stderr
    );
    let o = run(
        &mut e,
        "actions add action ctinfo dscp 0xfc000000 0x04000000",
    );
    assert!(
        o.stderr
            .starts_with("ctinfo: dscp mask & statemask must NOT overlap\n"),
        "{}",
        o.stderr
    );
    assert_eq!(run(&mut e, "actions ls action ctinfo").stdout, "");
}
