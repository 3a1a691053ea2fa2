//! flower's conntrack (`ct_state`, `ct_zone`, `ct_mark`) and tunnel (`enc_*`, `*_opts`) keys, on packets whose
//! state came from where the kernel's does: the netfilter hooks' connection tracking (the skb's
//! `_nfct`), the `ct` action, and `tunnel_key set`'s metadata. Expectations follow `fl_classify`
//! (`skb_flow_dissect_ct` with `fl_ct_info_to_flower_map`, `skb_flow_dissect_tunnel_info`), the masked
//! lookup (`key & mask == filter key & mask`), `fl_validate_ct_state`'s refusals and
//! `flower_print_opt`'s printing, each stated where it is asserted.

mod flower_common;

use flower_common::{class_of, htb, ok, tc};
use tclab_core::netfilter::Hook;
use tclab_core::{Cx, Engine, Packet};

/// Each `filter add dev eth0 parent 1: LINE` is refused with exit `code` and exactly `stderr`.
fn refused(e: &mut Engine, cases: &[(&str, i32, &str)]) {
    for &(line, code, stderr) in cases {
        let out = tc(e, &format!("filter add dev eth0 parent 1: {line}"));
        assert_eq!((out.code, out.stderr.as_str()), (code, stderr), "{line}");
    }
}

/// `tc {f} {spec}`: a filter line after its common prefix `f`.
fn add(e: &mut Engine, f: &str, spec: &str) {
    ok(e, &format!("{f} {spec}"));
}

fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Packet {
    Packet::udp4(src, sport, dst, dport, 0, 200)
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

#[test]
fn ct_state_reads_what_the_hosts_conntrack_attached() {
    let mut e = htb();
    // One filter per state, each its own mask where the flags differ (`-rpl` masks the reply bit).
    for (prio, state, class) in [
        (1, "+trk+new", 1),
        (2, "+trk+est-rpl", 2),
        (3, "+trk+est+rpl", 3),
        (4, "-trk", 4),
    ] {
        ok(
            &mut e,
            &format!("filter add dev eth0 parent 1: protocol ip prio {prio} flower ct_state {state} classid 1:{class}"),
        );
    }
    // The host tracks each packet at PREROUTING (`nf_conntrack_in`): the first of A -> B is NEW, B's
    // answer is ESTABLISHED in the reply direction, and A's next packet ESTABLISHED (a reply was seen:
    // `IPS_SEEN_REPLY`).
    let pass = |e: &mut Engine, mut p: Packet, now| {
        e.netfilter_mut()
            .hook(Hook::PreRouting, &mut p, Some("eth1"), None, now);
        class_of(e, p)
    };
    assert_eq!(pass(&mut e, udp(A, 5000, B, 53), 0), Some(1), "+trk+new");
    assert_eq!(
        pass(&mut e, udp(B, 53, A, 5000), 1),
        Some(3),
        "+trk+est+rpl"
    );
    assert_eq!(
        pass(&mut e, udp(A, 5000, B, 53), 2),
        Some(2),
        "+trk+est-rpl"
    );
    // A packet no hook has seen carries no connection: its ct key is zero, which only -trk matches.
    assert_eq!(class_of(&mut e, udp(A, 5001, B, 53)), Some(4), "-trk");
    // An ICMP error quoting the connection is RELATED to it: none of the four (+trk with est and new
    // both clear is not -trk either).
    let mut icmp = vec![
        0x45, 0, 0, 56, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
    ];
    icmp.extend_from_slice(&[3, 3, 0, 0, 0, 0, 0, 0]);
    icmp.extend_from_slice(&udp(A, 5000, B, 53).data[..28]);
    let err = Packet {
        data: icmp,
        len: 70,
        protocol: 0x0800,
        ..Default::default()
    };
    assert_eq!(pass(&mut e, err.clone(), 3), None, "+trk+rel");
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 5 flower ct_state +trk+rel classid 1:1",
    );
    assert_eq!(pass(&mut e, err, 3), Some(1), "+trk+rel");
}

/// The datapath Open vSwitch and the CNIs write: chain 0 sends untracked packets through `ct` (zone
/// 5) and on to chain 1, whose filters read the state, zone and mark `ct` left.
#[test]
fn ct_action_then_ct_state_ct_zone_and_ct_mark_downstream() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    let f = "filter add dev eth0 parent ffff: protocol ip";
    ok(
        &mut e,
        &format!(
            "{f} chain 0 prio 1 flower ct_state -trk action ct zone 5 pipe action goto chain 1"
        ),
    );
    add(
        &mut e,
        f,
        "chain 0 prio 2 flower ct_state +trk action goto chain 1",
    );
    // New in zone 5: committed with mark 0x27, then sent to chain 2 where ct_mark 0x20/0xf0 reads it.
    add(&mut e, f, "chain 1 prio 1 flower ct_state +trk+new ct_zone 5 action ct commit zone 5 mark 0x27 pipe action goto chain 2");
    add(
        &mut e,
        f,
        "chain 1 prio 2 flower ct_state +trk+est action skbedit mark 2",
    );
    add(
        &mut e,
        f,
        "chain 1 prio 3 flower ct_state +trk+new action skbedit mark 3",
    );
    add(
        &mut e,
        f,
        "chain 2 prio 1 flower ct_mark 0x20/0xf0 action skbedit mark 1",
    );
    add(
        &mut e,
        f,
        "chain 1 prio 4 flower ct_state +trk+inv ct_zone 5 action skbedit mark 4",
    );
    let mut recv = |p: Packet| {
        e.device_mut("eth0")
            .unwrap()
            .receive(p, &mut Cx::new(0))
            .expect("passes")
    };
    // Untracked: `ct zone 5` makes it +trk+new in zone 5; committed with mark 0x27, which 0x20/0xf0
    // takes (0x27 & 0xf0 = 0x20).
    let p = recv(udp(A, 1, B, 2));
    assert_eq!(
        (p.mark, p.ct_mark, p.ct_zone(), p.ct_state),
        (1, Some(0x27), 5, Packet::CT_TRACKED | Packet::CT_NEW)
    );
    // Tracked by the host as established (what the hooks leave on a forwarded packet): chain 1's
    // second filter.
    let mut est = udp(A, 1, B, 2);
    est.ct_state = Packet::CT_TRACKED | Packet::CT_ESTABLISHED;
    est.ct_mark = Some(0);
    assert_eq!(recv(est).mark, 2);
    // New but in zone 0 (the host's): ct_zone 5 does not hold, the third filter does.
    let mut new0 = udp(A, 1, B, 2);
    new0.ct_state = Packet::CT_TRACKED | Packet::CT_NEW;
    new0.ct_mark = Some(0);
    assert_eq!(recv(new0).mark, 3);
    // An ICMP router advertisement (type 9) is neither query nor error: conntrack gives it no
    // connection, so after `ct` it is +trk+inv in the action's zone, with nothing to commit.
    let mut adv = udp(A, 1, B, 2);
    adv.data[9] = 1;
    adv.data[20] = 9;
    let p = recv(adv);
    assert_eq!(
        (p.mark, p.ct_mark, p.ct_state),
        (4, None, Packet::CT_TRACKED | Packet::CT_INVALID)
    );
}

#[test]
fn ct_keys_are_printed_and_contradictions_refused() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ct_state +trk+est-rpl ct_zone 5 ct_mark 0x20/0xf0 classid 1:1",
    );
    let s = tc(&mut e, "filter show dev eth0").stdout;
    // `flower_print_ct_state` walks trk, new, est, rel, inv, rpl and prints the masked ones;
    // `print_masked_u16/u32` print the value in decimal and a partial mask in hex.
    assert!(
        s.contains("\n  ct_state +trk+est-rpl\n  ct_zone 5\n  ct_mark 32/0xf0\n  not_in_hw"),
        "{s}"
    );
    // `fl_validate_ct_state`, on the flags the filter sets (state & mask).
    for (state, why) in [
        ("+new", "no trk, so no other flag can be set"),
        ("+trk+new+est", "new and est are mutually exclusive"),
        ("+trk+inv+rel", "when inv is set, only trk may be set"),
        ("+trk+new+rpl", "new and rpl are mutually exclusive"),
    ] {
        let out = tc(
            &mut e,
            &format!("filter add dev eth0 parent 1: protocol ip prio 2 flower ct_state {state}"),
        );
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (
                2,
                format!("Error: {why}.\nWe have an error talking to the kernel\n").as_str()
            ),
            "ct_state {state}"
        );
    }
    // -new-est sets neither: not a contradiction. A word that is no flag is tc's refusal.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 flower ct_state +trk-new-est",
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 4 flower ct_state +trk+old",
    );
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "Illegal \"ct_state\"\n")
    );
    assert!(
        !tc(&mut e, "filter show dev eth0").stdout.contains("prio 4"),
        "nothing applied"
    );
}

/// An egress root whose first filter attaches a tunnel (`tunnel_key set … continue`), so the flower
/// filters after it see the metadata as the kernel's `skb_tunnel_info` would.
fn tunnel_root(set: &str) -> Engine {
    let mut e = htb();
    ok(
        &mut e,
        &format!("filter add dev eth0 parent 1: protocol ip prio 1 matchall action tunnel_key set {set} continue"),
    );
    e
}

#[test]
fn enc_keys_match_the_tunnel_a_tunnel_key_set_attached() {
    let set = "src_ip 192.0.2.1 dst_ip 192.0.2.77 id 42 dst_port 4789 tos 0x14 ttl 9";
    let mut e = tunnel_root(set);
    let f = "filter add dev eth0 parent 1: protocol ip";
    // Another key id: no match.
    add(&mut e, f, "prio 2 flower enc_key_id 43 classid 1:4");
    // The destination under a /24, the id, the port, TOS 0x14 under 0xf0 (0x10) and TTL 9: all hold.
    add(&mut e, f, "prio 3 flower enc_dst_ip 192.0.2.0/24 enc_key_id 42 enc_dst_port 4789 enc_tos 0x10/0xf0 enc_ttl 9 classid 1:2");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(2));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        s.contains("\n  enc_dst_ip 192.0.2.0/24\n  enc_key_id 42\n  enc_dst_port 4789\n  enc_tos 16/0xf0\n  enc_ttl 9\n  not_in_hw"),
        "{s}"
    );

    // The same filters, the tunnel's TTL 10: the third filter's TTL no longer holds.
    let mut e =
        tunnel_root("src_ip 192.0.2.1 dst_ip 192.0.2.77 id 42 dst_port 4789 tos 0x14 ttl 10");
    add(&mut e, f, "prio 2 flower enc_key_id 43 classid 1:4");
    add(&mut e, f, "prio 3 flower enc_dst_ip 192.0.2.0/24 enc_key_id 42 enc_dst_port 4789 enc_tos 0x10/0xf0 enc_ttl 9 classid 1:2");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
}

#[test]
fn enc_addresses_keep_their_family_and_a_zero_key_matches_no_tunnel() {
    let mut e = tunnel_root("src_ip 2001:db8::1 dst_ip 2001:db8::2 id 7");
    let f = "filter add dev eth0 parent 1: protocol ip";
    // An IPv4 outer address cannot match an IPv6 tunnel (`enc_control.addr_type` is in the key).
    add(&mut e, f, "prio 2 flower enc_src_ip 0.0.0.0/0 classid 1:4");
    add(
        &mut e,
        f,
        "prio 3 flower enc_src_ip 2001:db8::1 enc_key_id 7 classid 1:3",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));

    // Without a tunnel the enc_* fields are zero (`fl_clear_masked_range`, and no tunnel to fill
    // them), so `enc_key_id 0` takes the packet while `enc_key_id 7` does not.
    let mut e = htb();
    add(&mut e, f, "prio 1 flower enc_key_id 7 classid 1:1");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
    add(&mut e, f, "prio 2 flower enc_key_id 0 classid 1:2");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(2));
    // A key id tc cannot read is its refusal, with nothing applied.
    let out = tc(
        &mut e,
        &format!("{f} prio 3 flower enc_key_id 0x10 classid 1:3"),
    );
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "Illegal \"enc_key_id\"\n")
    );
}

#[test]
fn tunnel_options_match_the_options_tunnel_key_set_attached() {
    let f = "filter add dev eth0 parent 1: protocol ip";
    // One Geneve option, class 0x0102, type 0x80, data 00800022 (fl_set_geneve_opt's bytes, compared
    // with the packet's options under the mask, length byte and family included).
    let mut e =
        tunnel_root("src_ip 192.0.2.1 dst_ip 192.0.2.77 id 42 geneve_opts 0102:80:00800022");
    add(
        &mut e,
        f,
        "prio 2 flower geneve_opts 0102:80:00800023 classid 1:4",
    );
    add(
        &mut e,
        f,
        "prio 3 flower geneve_opts 0102:80:00800000/ffff:ff:ffff0000 classid 1:2",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(2));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    // flower_print_enc_parts: key/mask; the mask tc made for prio 2 is all ones.
    assert!(
        s.contains("\n  geneve_opts 0102:80:00800023/ffff:ff:ffffffff\n"),
        "{s}"
    );
    assert!(
        s.contains("\n  geneve_opts 0102:80:00800000/ffff:ff:ffff0000\n"),
        "{s}"
    );
    let j = tc(&mut e, "-j filter show dev eth0").stdout;
    assert!(
        j.contains(r#""geneve_opt_key":[{"class":258,"type":128,"data":[0,128,0,0]}],"geneve_opt_mask":[{"class":65535,"type":255,"data":[255,255,0,0]}]"#),
        "{j}"
    );

    // Two options: the second's data masked out; the filter must name both (the length is in the key).
    let mut e = tunnel_root(
        "src_ip 192.0.2.1 dst_ip 192.0.2.77 geneve_opts 0102:80:00800022,0103:81:00000009",
    );
    add(
        &mut e,
        f,
        "prio 2 flower geneve_opts 0102:80:00800022 classid 1:4",
    );
    add(
        &mut e,
        f,
        "prio 3 flower geneve_opts 0102:80:00800022,0103:81:00000005/ffff:ff:00000000 classid 1:3",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));

    // VXLAN's group policy under VXLAN_GBP_MASK (0x48ffff = 4784127); ERSPAN version 2's direction
    // and hardware id (the default mask keeps the key's version; dir 0xff and hwid 0xff stored as
    // their bit fields: 1 and 63).
    let mut e = tunnel_root("src_ip 192.0.2.1 dst_ip 192.0.2.77 vxlan_opts 2748");
    add(&mut e, f, "prio 2 flower vxlan_opts 2749 classid 1:4");
    add(&mut e, f, "prio 3 flower vxlan_opts 2748 classid 1:3");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(s.contains("\n  vxlan_opts 2748/4784127\n"), "{s}");
    let mut e = tunnel_root("src_ip 192.0.2.1 dst_ip 192.0.2.77 erspan_opts 2:0:1:5");
    add(&mut e, f, "prio 2 flower erspan_opts 2:0:0:5 classid 1:4");
    add(&mut e, f, "prio 3 flower erspan_opts 2:0:1:5 classid 1:3");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(s.contains("\n  erspan_opts 2:0:1:5/2:0:1:63\n"), "{s}");
    // No tclab action attaches GTP's options: a gtp_opts filter takes no tunnel of another family.
    let mut e = tunnel_root("src_ip 192.0.2.1 dst_ip 192.0.2.77 vxlan_opts 2748");
    add(&mut e, f, "prio 2 flower gtp_opts 01:02 classid 1:1");
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(s.contains("\n  gtp_opts 01:02/ff:ff\n"), "{s}");

    // tc's refusals (f_flower.c) and the kernel's (fl_set_geneve_opt), nothing applied.
    let mut e = htb();
    refused(
        &mut e,
        &[
            ("protocol ip prio 1 flower geneve_opts 0102:80 classid 1:1", 1, "Illegal \"geneve_opts\"\n"),
            ("protocol ip prio 1 flower geneve_opts 0102::00800022 classid 1:1", 1, "Illegal \"geneve_opts\"\n"),
            (
                "protocol ip prio 1 flower geneve_opts 0102:80:00800022/ffff:ff:ffffffff:1 classid 1:1",
                1,
                "Unknown \"geneve_opts\" type\nIllegal \"geneve_opts\"\n",
            ),
            ("protocol ip prio 1 flower vxlan_opts x classid 1:1", 1, "Illegal \"vxlan_opts\"\n"),
            (
                "protocol ip prio 1 flower geneve_opts 0102:80:0080 classid 1:1",
                2,
                "Error: Tunnel key geneve option data is less than 4 bytes long.\nWe have an error talking to the kernel\n",
            ),
            (
                "protocol ip prio 1 flower geneve_opts 0102:80:00800022/ffff:ff:ffffffffffffffff classid 1:1",
                2,
                "Error: Key and mask miss aligned.\nWe have an error talking to the kernel\n",
            ),
            (
                "protocol ip prio 1 flower erspan_opts 3:0:1:5 classid 1:1",
                2,
                "Error: Tunnel key erspan option ver is incorrect.\nWe have an error talking to the kernel\n",
            ),
        ],
    );
    assert_eq!(tc(&mut e, "filter show dev eth0").stdout, "");
}

/// An egress root whose first filter pushes two labels (`mpls push label 100 tc 3 ttl 64`, then
/// `label 200`) and passes on, so the filters after it, of protocol `mpls_uc`, see a two-entry stack:
/// 200 outside (bottom-of-stack clear: the packet was MPLS already; TTL 255, act_mpls's default),
/// 100 inside (TC 3, bottom of stack, TTL 64), as `skb_mpls_push` leaves them.
fn two_labels() -> Engine {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action mpls push label 100 tc 3 ttl 64 pipe action mpls push label 200 continue",
    );
    e
}

#[test]
fn mpls_keys_match_the_stack_a_push_built() {
    let f = "filter add dev eth0 parent 1: protocol mpls_uc";
    let mut e = two_labels();
    // The outer entry is 200: the first-entry form with 100 does not hold.
    add(&mut e, f, "prio 2 flower mpls_label 100 classid 1:4");
    // A third entry's bit is part of the key: a two-entry stack has none, whatever its fields.
    add(
        &mut e,
        f,
        "prio 3 flower mpls lse depth 3 ttl 0 classid 1:4",
    );
    add(
        &mut e,
        f,
        "prio 4 flower mpls lse depth 2 label 100 tc 3 bos 1 ttl 64 classid 1:3",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));

    let mut e = two_labels();
    add(
        &mut e,
        f,
        "prio 2 flower mpls_label 200 mpls_bos 0 mpls_ttl 255 classid 1:2",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(2));

    // TC 4 at depth 2 is one off: nothing else matches.
    let mut e = two_labels();
    add(
        &mut e,
        f,
        "prio 2 flower mpls lse depth 1 label 200 lse depth 2 tc 4 classid 1:2",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
    // An MPLS packet cut short inside its first entry has no entry dissected (`FLOW_DISSECT_RET_OUT_BAD`):
    // a filter on depth 1, even one naming no field, does not take it; one with no MPLS key does.
    let mut e = htb();
    add(&mut e, f, "prio 1 flower mpls lse depth 1 classid 1:1");
    add(&mut e, f, "prio 2 flower classid 1:2");
    let short = Packet {
        data: vec![0x00, 0x06],
        len: 16,
        protocol: 0x8847,
        ..Default::default()
    };
    assert_eq!(class_of(&mut e, short.clone()), Some(2));
    let mut whole = short;
    whole.data.extend_from_slice(&[0x41, 0x40]); // label 100, TC 0, bottom of stack, TTL 64
    assert_eq!(class_of(&mut e, whole), Some(1));
}

#[test]
fn mpls_keys_are_printed_as_the_kernel_dumps_them_and_refused_as_tc_does() {
    let f = "filter add dev eth0 parent 1: protocol mpls_uc";
    let mut e = htb();
    add(
        &mut e,
        f,
        "prio 1 flower mpls lse depth 2 label 100 tc 3 bos 1 classid 1:1",
    );
    // One entry at depth 1 is dumped in the older attributes (`fl_dump_key_mpls`'s backward
    // compatibility), and printed as such.
    add(
        &mut e,
        f,
        "prio 2 flower mpls lse depth 1 label 7 ttl 9 classid 1:2",
    );
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        s.contains("eth_type 8847\n  mpls\n    lse depth 2 label 100 tc 3 bos 1\n  not_in_hw"),
        "{s}"
    );
    assert!(
        s.contains("eth_type 8847\n  mpls_label 7\n  mpls_ttl 9\n  not_in_hw"),
        "{s}"
    );
    let j = tc(&mut e, "-j filter show dev eth0").stdout;
    assert!(
        j.contains(r#""mpls":[{"depth":2,"label":100,"tc":3,"bos":1}]"#),
        "{j}"
    );
    assert!(j.contains(r#""mpls_label":7,"mpls_ttl":"9""#), "{j}");

    refused(
        &mut e,
        &[
        (
            "protocol ip prio 3 flower mpls_label 5",
            1,
            "Can't set \"mpls_label\" if ethertype isn't MPLS\n",
        ),
        (
            "protocol mpls_uc prio 3 flower mpls_tc 1 mpls lse depth 1",
            1,
            "Can't set \"mpls\" if \"mpls_label\", \"mpls_tc\", \"mpls_bos\" or \"mpls_ttl\" is set\n",
        ),
        (
            "protocol mpls_uc prio 3 flower mpls lse label 5",
            255,
            "Error: argument \"depth\" is required\n",
        ),
        (
            "protocol mpls_uc prio 3 flower mpls_label 1048576",
            1,
            "Illegal \"mpls_label\"\n",
        ),
        (
            "protocol mpls_uc prio 3 flower mpls lse depth 8 label 1",
            2,
            "Error: Invalid MPLS depth.\nWe have an error talking to the kernel\n",
        ),
        ],
    );
    assert!(
        !tc(&mut e, "filter show dev eth0").stdout.contains("pref 3"),
        "nothing applied"
    );
}

/// An Ethernet/IPv4 ARP message as a live frame brings it (protocol 0x0806, the message from the
/// network header on): opcode, sender hardware and protocol address, target hardware and protocol
/// address (RFC 826's layout).
fn arp(op: u16, sha: [u8; 6], sip: [u8; 4], tha: [u8; 6], tip: [u8; 4]) -> Packet {
    let mut d = vec![0, 1, 0x08, 0x00, 6, 4];
    d.extend_from_slice(&op.to_be_bytes());
    d.extend_from_slice(&sha);
    d.extend_from_slice(&sip);
    d.extend_from_slice(&tha);
    d.extend_from_slice(&tip);
    Packet {
        len: 14 + d.len() as u32,
        data: d,
        protocol: 0x0806,
        ..Default::default()
    }
}

const MAC_A: [u8; 6] = [2, 0, 0, 0xaa, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0xbb, 0, 2];

#[test]
fn arp_keys_match_requests_and_replies() {
    let mut e = htb();
    let f = "filter add dev eth0 parent 1: protocol arp";
    // Requests for a host of 10.0.0.0/24 from a station whose address starts 02:00:00.
    add(
        &mut e,
        f,
        "prio 1 flower arp_op request arp_tip 10.0.0.0/24 arp_sha 02:00:00:00:00:00/24 classid 1:1",
    );
    // Replies from 10.0.0.2 to A's hardware address.
    add(
        &mut e,
        f,
        "prio 2 flower arp_op reply arp_sip 10.0.0.2 arp_tha 02:00:00:aa:00:01 classid 1:2",
    );
    // Any other ARP packet.
    add(&mut e, f, "prio 3 flower classid 1:3");
    let who_has = arp(1, MAC_A, A, [0; 6], B);
    assert_eq!(class_of(&mut e, who_has.clone()), Some(1));
    assert_eq!(class_of(&mut e, arp(2, MAC_B, B, MAC_A, A)), Some(2));
    // A request for 10.0.1.2 is outside the /24; a reply to B's address is not the second filter's.
    assert_eq!(
        class_of(&mut e, arp(1, MAC_A, A, [0; 6], [10, 0, 1, 2])),
        Some(3)
    );
    assert_eq!(class_of(&mut e, arp(2, MAC_A, A, MAC_B, B)), Some(3));
    // Not Ethernet/IPv4 (hardware address length 8): `__skb_flow_dissect_arp` fills nothing.
    let mut odd = who_has;
    odd.data[4] = 8;
    assert_eq!(class_of(&mut e, odd), Some(3));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        s.contains("eth_type arp\n  arp_tip 10.0.0.0/24\n  arp_op request\n  arp_sha 02:00:00:00:00:00/24\n  not_in_hw"),
        "{s}"
    );
    assert!(
        s.contains("eth_type arp\n  arp_sip 10.0.0.2\n  arp_op reply\n  arp_tha 02:00:00:aa:00:01\n  not_in_hw"),
        "{s}"
    );

    // The opcode under a mask: 3 & 1 = 1, yet 3 is no request or reply, so it is not dissected and
    // its key is 0; a request (1) matches.
    let mut e = htb();
    add(&mut e, f, "prio 1 flower arp_op 1/1 classid 1:4");
    add(&mut e, f, "prio 2 flower classid 1:3");
    assert_eq!(class_of(&mut e, arp(3, MAC_A, A, [0; 6], B)), Some(3));
    assert_eq!(class_of(&mut e, arp(1, MAC_A, A, [0; 6], B)), Some(4));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(s.contains("\n  arp_op 1/1\n"), "{s}");
    refused(
        &mut e,
        &[
            (
                "protocol ip prio 5 flower arp_op request",
                1,
                "Illegal \"arp_op\"\n",
            ),
            (
                "protocol arp prio 5 flower arp_op 3",
                1,
                "Illegal \"arp_op\"\n",
            ),
            (
                // get_prefix's own exit(1), as this machine's tc 6.1 says.
                "protocol arp prio 5 flower arp_tip 2001:db8::1",
                1,
                "Error: inet prefix is expected rather than \"2001:db8::1\".\n",
            ),
        ],
    );
}

#[test]
fn arp_hardware_keys_under_another_protocol_are_dropped() {
    // tc sends arp_sha under `protocol ip` (only arp_tip/sip/op are checked); fl_set_key sets the ARP
    // keys only for an ARP or RARP EtherType, so the filter has no key left and takes every IPv4
    // packet (what `tclab check`'s flower-arp-ignored warns of), and the listing no longer shows it.
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower arp_sha 00:11:22:33:44:55 classid 1:1",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(1));
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(!s.contains("arp_sha"), "{s}");
}

#[test]
fn mac_keys_match_a_frames_addresses_and_never_a_packet_without_one() {
    let mut e = htb();
    let f = "filter add dev eth0 parent 1: protocol ip";
    ok(
        &mut e,
        &format!(
            "{f} prio 1 flower dst_mac 02:00:00:bb:00:02 src_mac 02:00:00:aa:00:00/40 classid 1:1"
        ),
    );
    add(
        &mut e,
        f,
        "prio 2 flower dst_mac ff:ff:ff:ff:ff:ff classid 1:2",
    );
    // All zeros under a full mask would equal a zeroed key: it must not take a frameless packet.
    add(
        &mut e,
        f,
        "prio 3 flower dst_mac 00:00:00:00:00:00 classid 1:3",
    );
    // What `tclab live` makes of a frame: its stations' addresses ride with the packet.
    let framed = |dst: [u8; 6], src: [u8; 6]| {
        let mut p = udp(A, 1, B, 2);
        let mut eth = [0; 12];
        eth[..6].copy_from_slice(&dst);
        eth[6..].copy_from_slice(&src);
        p.ext_mut().eth = Some(eth);
        p
    };
    assert_eq!(class_of(&mut e, framed(MAC_B, MAC_A)), Some(1));
    // 02:00:00:ab:00:01 is outside the /40 of 02:00:00:aa:00:00.
    let other = [2, 0, 0, 0xab, 0, 1];
    assert_eq!(class_of(&mut e, framed(MAC_B, other)), None);
    assert_eq!(class_of(&mut e, framed([0xff; 6], other)), Some(2));
    assert_eq!(class_of(&mut e, framed([0; 6], other)), Some(3));
    // A simulated packet has no frame: no MAC filter takes it.
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
}

#[test]
fn ct_label_reads_what_ct_commit_label_set() {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    let f = "filter add dev eth0 parent ffff: protocol ip";
    // Commit label 0102 under mask ff00: `nf_connlabels_replace` keeps only the first byte, 01.
    add(&mut e, f, "chain 0 prio 1 flower ct_state -trk action ct commit label 0102/ff00 pipe action goto chain 1");
    add(
        &mut e,
        f,
        "chain 1 prio 1 flower ct_label 0102 action skbedit mark 2",
    );
    add(
        &mut e,
        f,
        "chain 1 prio 2 flower ct_label 01 action skbedit mark 1",
    );
    let p = e
        .device_mut("eth0")
        .unwrap()
        .receive(udp(A, 1, B, 2), &mut Cx::new(0))
        .expect("passes");
    let mut want = [0u8; 16];
    want[0] = 1;
    assert_eq!((p.mark, p.ct_labels()), (1, want));
    let s = tc(&mut e, "filter show dev eth0 ingress").stdout;
    // `flower_print_ct_label`: all 16 bytes; a full mask is not printed.
    assert!(s.contains("\n  ct_state -trk\n  not_in_hw"), "{s}");
    assert!(
        s.contains("\n  ct_label 01000000000000000000000000000000\n  not_in_hw"),
        "{s}"
    );
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ct_label 0102/ff00 classid 1:1",
    );
    let s = tc(&mut e, "filter show dev eth0").stdout;
    assert!(
        s.contains(
            "\n  ct_label 01020000000000000000000000000000/ff000000000000000000000000000000\n"
        ),
        "{s}"
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 flower ct_label 0z",
    );
    assert_eq!(out.code, 255);
    assert!(
        out.stderr
            .starts_with("Error: argument \"0z\" is wrong: labels must be a hex string\n"),
        "{}",
        out.stderr
    );
}

/// Q-in-Q as two `vlan push` actions leave it (`skb_vlan_push`): 802.1ad 7 as the accelerated tag,
/// 802.1Q 5 priority 2 moved into the header, then IPv4. `__skb_flow_dissect` reads the accelerated tag
/// into `vlan` (its EtherType the inner tag's TPID) and the header tag into `cvlan` (its EtherType
/// IPv4), two tags in all; the filters' protocol is compared with the outer TPID.
#[test]
fn qinq_tags_fill_vlan_cvlan_and_num_of_vlans() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action vlan push id 5 priority 2 pipe action vlan push id 7 protocol 802.1ad continue",
    );
    let f = "filter add dev eth0 parent 1: protocol 802.1ad";
    // The inner id is 5, not 6; the packet has two tags, not one.
    add(
        &mut e,
        f,
        "prio 2 flower vlan_id 7 vlan_ethtype 802.1Q cvlan_id 6 classid 1:4",
    );
    add(&mut e, f, "prio 3 flower num_of_vlans 1 classid 1:4");
    add(
        &mut e,
        f,
        "prio 4 flower num_of_vlans 2 vlan_id 7 vlan_prio 0 vlan_ethtype 802.1Q cvlan_id 5 cvlan_prio 2 cvlan_ethtype ip classid 1:3",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), Some(3));
    // A `protocol ip` flower no longer sees the packet at all: its protocol is 802.1ad now.
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action vlan push id 7 protocol 802.1ad continue",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 flower ip_proto udp classid 1:1",
    );
    assert_eq!(class_of(&mut e, udp(A, 1, B, 2)), None);
}

/// A PPPoE session frame as `tclab live` makes a packet of it (protocol 0x8864, the session header
/// first): version and type 1, code 0, the session id, the length, then the PPP protocol — two bytes,
/// or one when `compressed` (RFC 1661's protocol-field compression) — and the payload.
fn pppoe(sid: u16, ppp: u16, compressed: bool, inner: &Packet) -> Packet {
    let mut d = vec![0x11, 0];
    d.extend_from_slice(&sid.to_be_bytes());
    d.extend_from_slice(&((inner.data.len() + 2) as u16).to_be_bytes());
    if compressed {
        d.push(ppp as u8);
    } else {
        d.extend_from_slice(&ppp.to_be_bytes());
    }
    d.extend_from_slice(&inner.data);
    Packet {
        len: 14 + d.len() as u32,
        data: d,
        protocol: 0x8864,
        ..Default::default()
    }
}

#[test]
fn pppoe_keys_and_the_ip_inside_a_session() {
    let mut e = htb();
    let f = "filter add dev eth0 parent 1: protocol ppp_ses";
    // DNS in session 7; anything else in session 7; LCP in any session; any other session frame.
    add(
        &mut e,
        f,
        "prio 1 flower pppoe_sid 7 ppp_proto ip ip_proto udp dst_port 53 classid 1:1",
    );
    add(&mut e, f, "prio 2 flower pppoe_sid 7 classid 1:2");
    add(&mut e, f, "prio 3 flower ppp_proto lcp classid 1:3");
    add(&mut e, f, "prio 4 flower classid 1:4");
    let dns = udp(A, 5000, B, 53);
    let web = udp(A, 5000, B, 80);
    assert_eq!(class_of(&mut e, pppoe(7, 0x21, false, &dns)), Some(1));
    // The PPP protocol compressed to one byte: the IPv4 header starts a byte earlier.
    assert_eq!(class_of(&mut e, pppoe(7, 0x21, true, &dns)), Some(1));
    assert_eq!(class_of(&mut e, pppoe(7, 0x21, false, &web)), Some(2));
    assert_eq!(class_of(&mut e, pppoe(8, 0x21, false, &dns)), Some(4));
    // LCP (0xc021) is a valid PPP protocol the dissector does not go into.
    let lcp = Packet {
        data: vec![9, 1, 0, 4],
        ..Default::default()
    };
    assert_eq!(class_of(&mut e, pppoe(8, 0xc021, false, &lcp)), Some(3));
    // A session header with a code (a discovery message's) is not read, so it has no keys, and no
    // filter takes it, not even the fourth: `fl_set_key_pppoe` gives every `protocol ppp_ses` filter
    // the session's type as a key, which only a valid session header sets.
    let mut bad = pppoe(7, 0x21, false, &dns);
    bad.data[1] = 0x65;
    assert_eq!(class_of(&mut e, bad), None);
    let s = tc(&mut e, "filter show dev eth0").stdout;
    // The PPP protocol is dumped beside the EtherType it stands for; without one, neither is.
    assert!(
        s.contains("\n  eth_type ipv4\n  ip_proto udp\n  dst_port 53\n  pppoe_sid 7\n  ppp_proto ip\n  not_in_hw"),
        "{s}"
    );
    assert!(
        s.contains("classid 1:2 \n  pppoe_sid 7\n  not_in_hw"),
        "{s}"
    );
    refused(
        &mut e,
        &[
            (
                "protocol ip prio 5 flower pppoe_sid 7",
                1,
                "Can't set \"pppoe_sid\" if ethertype isn't PPPoE session\n",
            ),
            (
                "protocol ppp_ses prio 5 flower ppp_proto bogus",
                255,
                "Error: argument \"bogus\" is wrong: invalid ppp_proto\n",
            ),
        ],
    );
}

#[test]
fn an_address_get_prefix_cannot_read_ends_tc_with_its_message() {
    // flower_parse_ip_addr hands the word to utils.c's get_prefix, which prints "Error: FAMILY prefix
    // is expected rather than …" and exit(1)s for an address or prefix it cannot read, the family
    // being the one the EtherType asks for (`family_name_verbose`: inet, inet6; "any valid" for the
    // enc_ addresses, read in either). Only an EtherType without addresses is flower's own
    // `Illegal "KEY"`. Each line and exit status is this machine's tc's (iproute2-6.1.0).
    let mut e = htb();
    refused(
        &mut e,
        &[
            (
                "protocol ip flower src_ip 1.2.3.4/33 classid 1:1",
                1,
                "Error: inet prefix is expected rather than \"1.2.3.4/33\".\n",
            ),
            (
                "protocol ip flower dst_ip ::1 classid 1:1",
                1,
                "Error: inet prefix is expected rather than \"::1\".\n",
            ),
            (
                "protocol ip flower src_ip 1.2.3.4/255.0.255.0 classid 1:1",
                1,
                "Error: inet prefix is expected rather than \"1.2.3.4/255.0.255.0\".\n",
            ),
            (
                "protocol ipv6 flower src_ip 1.2.3.4 classid 1:1",
                1,
                "Error: inet6 prefix is expected rather than \"1.2.3.4\".\n",
            ),
            (
                "protocol ip flower enc_dst_ip zz classid 1:1",
                1,
                "Error: any valid prefix is expected rather than \"zz\".\n",
            ),
            (
                "protocol arp flower arp_sip 1.2.3.4/33 classid 1:1",
                1,
                "Error: inet prefix is expected rather than \"1.2.3.4/33\".\n",
            ),
            (
                "protocol 802.1Q flower src_ip 1.2.3.4 classid 1:1",
                1,
                "Illegal \"src_ip\"\n",
            ),
            (
                "protocol ip flower arp_tip 1.2.3.4 classid 1:1",
                1,
                "Illegal \"arp_tip\"\n",
            ),
        ],
    );
}
