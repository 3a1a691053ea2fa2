//! The mpls action on packets, through tc lines and a device's paths. Expectations from `act_mpls.c`
//! and `skb_mpls_push`/`skb_mpls_dec_ttl`: a push writes a label stack entry in front of the network
//! header (label << 12 | TC << 9 | BOS << 8 | TTL, BOS set over a non-MPLS packet, TTL 255 unless
//! given) and changes the packet's protocol, so a reclassified packet meets the `protocol mpls_uc`
//! filters; the 4 bytes leave with the packet but are not charged by the root, which measured it first;
//! `dec_ttl` drops (and counts) a packet that is not MPLS or whose TTL would reach 0.

use tclab_core::{Cx, Engine, Packet};

fn ok(e: &mut Engine, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

fn show(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0).stdout
}

fn ipv4(len: u32) -> Packet {
    Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000, 0, len)
}

#[test]
fn a_pushed_label_is_what_the_next_walk_classifies_by() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action mpls push label 100 tc 2 reclassify",
    );
    // Label 101 does not match; label 100 (0x64 << 12) does. The `protocol ip` filter no longer does.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol mpls_uc prio 2 u32 match u32 0x00065000 0xfffff000 at 0 classid 1:3",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol mpls_uc prio 3 u32 match u32 0x00064000 0xfffff000 at 0 classid 1:2",
    );
    let orig = ipv4(1000);
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(orig.clone(), &mut cx);
    let p = dev.dequeue(&mut cx).expect("queued");
    assert_eq!(
        &p.data[..4],
        &(100u32 << 12 | 2 << 9 | 1 << 8 | 255).to_be_bytes()
    );
    assert_eq!(
        &p.data[4..],
        &orig.data[..],
        "the IPv4 packet follows the entry"
    );
    assert_eq!((p.protocol, p.len), (0x8847, 1004), "4 bytes more leave");
    let s = show(&mut e, "-s class show dev eth0");
    assert!(
        s.contains("class prio 1:2 parent 1: \n Sent 1000 bytes 1 pkt"),
        "class 1:2, charged as measured at the root: {s}"
    );
    let f = show(&mut e, "filter show dev eth0");
    assert!(
        f.contains("mpls  push protocol mpls_uc label 100 tc 2 ttl 255 reclassify"),
        "{f}"
    );
}

#[test]
fn dec_ttl_at_ingress_counts_what_it_cannot_decrement() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    ok(
        &mut e,
        "filter add dev eth0 parent ffff: protocol all prio 1 matchall action mpls dec_ttl pipe index 4",
    );
    let recv =
        |e: &mut Engine, p: Packet| e.device_mut("eth0").unwrap().receive(p, &mut Cx::new(0));
    // Not MPLS: dropped.
    assert!(recv(&mut e, ipv4(300)).is_none());
    // An MPLS packet with TTL 64 passes with 63; one with TTL 1 is dropped.
    let mut m = ipv4(300);
    m.protocol = 0x8847;
    m.data.splice(..0, (7u32 << 12 | 1 << 8 | 64).to_be_bytes());
    let p = recv(&mut e, m.clone()).expect("TTL 64 passes");
    assert_eq!(p.data[3], 63);
    m.data[3] = 1;
    assert!(recv(&mut e, m).is_none());
    let a = show(&mut e, "-s actions get action mpls index 4");
    assert!(a.contains("mpls  dec_ttl pipe"), "{a}");
    // skb->len at ingress: 286 of each 300-byte frame.
    assert!(
        a.contains("Sent 858 bytes 3 pkt (dropped 2, overlimits 0"),
        "{a}"
    );
}

#[test]
fn refusals_apply_nothing() {
    let mut e = Engine::new();
    let run = |e: &mut Engine, line: &str| {
        let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        tclab_tc::run(e, &argv, 0)
    };
    let o = run(&mut e, "actions add action mpls mod label 3");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr
            .starts_with("Error: act_mpls: MPLS label out of range."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action mpls push");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (255, "Error: argument \"label\" is required\n")
    );
    let o = run(&mut e, "actions add action mpls push protocol ip label 5");
    assert!(
        o.stderr
            .starts_with("invalid push protocol \"0x0800\" - use mpls_(uc|mc)"),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action mpls mac_push label 5");
    assert!(o.stderr.contains("mac_push"), "{}", o.stderr);
    assert_eq!(show(&mut e, "actions ls action mpls"), "");
}
