//! The vlan action on packets, through tc lines and a device's egress path. Expectations from
//! `act_vlan.c` and `skb_vlan_push`/`skb_vlan_pop`: a push onto an untagged packet gives it an
//! accelerated tag (no bytes), a second push moves the first into the link header (4 bytes, which the
//! root's qdisc does not charge: it measured the packet before its filters ran, `qdisc_pkt_len`), and a
//! filter's protocol is compared with the outer tag's TPID after a push (`skb_protocol(skb, false)`).

use tclab_core::packet::VlanTag;
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

#[test]
fn qinq_push_reclassifies_by_the_outer_tpid_and_grows_the_frame_past_the_root() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    // An IPv4 packet gets 802.1Q 5 (priority 2), then 802.1ad 7 outside it, and is classified again.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action vlan push id 5 priority 2 pipe action vlan push id 7 protocol 802.1ad reclassify",
    );
    // The second walk skips the `protocol ip` filter: the packet's protocol is now 802.1ad.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol 802.1ad prio 2 matchall classid 1:3",
    );
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(Packet::of_len(1000), &mut cx);
    let p = dev.dequeue(&mut cx).expect("queued");
    assert_eq!(
        p.vlan(),
        Some(VlanTag {
            proto: 0x88a8,
            tci: 7
        })
    );
    assert_eq!(
        p.vlan_inline(),
        [VlanTag {
            proto: 0x8100,
            tci: 2 << 13 | 5
        }]
    );
    assert_eq!(
        p.len, 1004,
        "the inner tag is 4 bytes of the frame that leaves"
    );
    let s = show(&mut e, "-s class show dev eth0");
    assert!(
        s.contains("class prio 1:3 parent 1: \n Sent 1000 bytes 1 pkt"),
        "band 3, charged as measured at the root: {s}"
    );
    let a = show(&mut e, "-s filter show dev eth0");
    assert!(
        a.contains("vlan  push id 7 protocol 802.1ad priority 0 reclassify"),
        "{a}"
    );
}

#[test]
fn pop_and_modify_on_an_untagged_packet_change_nothing() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    ok(
        &mut e,
        "filter add dev eth0 parent ffff: protocol ip prio 1 matchall action vlan pop pipe action vlan modify id 9 pipe",
    );
    let p = e
        .device_mut("eth0")
        .unwrap()
        .receive(Packet::of_len(300), &mut Cx::new(0))
        .expect("passes");
    assert_eq!((p.vlan(), p.vlan_inline().len(), p.len), (None, 0, 300));
}

#[test]
fn flower_matches_the_tag_a_push_gave() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: prio");
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action vlan push id 5 priority 3 reclassify",
    );
    // Another VLAN id does not match; the tag's id, priority and the EtherType inside it do.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol 802.1Q prio 2 flower vlan_id 6 classid 1:3",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol 802.1Q prio 3 flower vlan_id 5 vlan_prio 3 vlan_ethtype ip classid 1:2",
    );
    let mut cx = Cx::new(0);
    let dev = e.device_mut("eth0").unwrap();
    let _ = dev.enqueue(Packet::of_len(800), &mut cx);
    let p = dev.dequeue(&mut cx).expect("queued");
    assert_eq!(
        (p.vlan(), p.len),
        (
            Some(VlanTag {
                proto: 0x8100,
                tci: 3 << 13 | 5
            }),
            800
        )
    );
    let s = show(&mut e, "-s class show dev eth0");
    assert!(
        s.contains("class prio 1:2 parent 1: \n Sent 800 bytes 1 pkt"),
        "{s}"
    );
    assert!(
        s.contains("class prio 1:3 parent 1: \n Sent 0 bytes 0 pkt"),
        "{s}"
    );
}

#[test]
fn a_tag_pushed_at_ingress_is_charged_by_the_egress_htb_only_when_it_is_in_the_frame() {
    // tcf_vlan_act → skb_vlan_push: on an untagged packet the tag goes to the accelerated slot
    // (skb->vlan_tci, not skb->len: the NIC inserts it), so the next device's qdiscs measure the
    // packet as before (qdisc_pkt_len = skb->len); a second push moves the first tag into the frame
    // (__vlan_insert_tag: skb->len + 4), which the egress HTB then charges. 1000 bytes received on
    // eth0, forwarded to eth1's HTB.
    let charged = |actions: &str| {
        let mut e = Engine::new();
        ok(&mut e, "qdisc add dev eth0 ingress");
        ok(
            &mut e,
            &format!("filter add dev eth0 parent ffff: protocol ip prio 1 matchall {actions}"),
        );
        ok(&mut e, "qdisc add dev eth1 root handle 1: htb default 10");
        ok(
            &mut e,
            "class add dev eth1 parent 1: classid 1:10 htb rate 10mbit",
        );
        let mut cx = Cx::new(0);
        let p = e
            .device_mut("eth0")
            .unwrap()
            .receive(
                Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 1000),
                &mut cx,
            )
            .expect("passed on");
        assert_eq!(p.len, 1000 + 4 * p.vlan_inline().len() as u32);
        let dev = e.device_mut("eth1").unwrap();
        let _ = dev.enqueue(p, &mut cx);
        assert!(dev.dequeue(&mut cx).is_some());
        show(&mut e, "-s class show dev eth1")
    };
    let one = charged("action vlan push id 5");
    assert!(one.contains("class htb 1:10 root prio 0 rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b \n Sent 1000 bytes 1 pkt"), "{one}");
    let two = charged("action vlan push id 5 pipe action vlan push id 7 protocol 802.1ad");
    assert!(two.contains(" Sent 1004 bytes 1 pkt"), "{two}");
}
