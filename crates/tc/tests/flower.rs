//! flower by hand: filters made by tc lines, hand-built packets classified through the block as a qdisc
//! classifies them. Each expectation follows from `cls_flower.c`'s rules (masked lookup per mask, in the
//! mask list's order; ranges walked filter by filter) and is stated where it is asserted.

mod flower_common;

use flower_common::{class_of, htb, ok, tc};
use tclab_core::Packet;

fn udp(dport: u16) -> Packet {
    Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], dport, 0, 100)
}

#[test]
fn a_port_range_classifies_exactly_its_ports() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 1000-2000 classid 1:2",
    );
    // Inclusive bounds (`fl_range_port_dst_cmp`: outside is below min or above max).
    for (port, want) in [
        (999, None),
        (1000, Some(2)),
        (1500, Some(2)),
        (2000, Some(2)),
        (2001, None),
    ] {
        assert_eq!(class_of(&mut e, udp(port)), want, "dst port {port}");
    }
    // The range is UDP's: a TCP segment to port 1500 is another ip_proto.
    let tcp = Packet::tcp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 1500, 0x10, 1, 1, &[], 0);
    assert_eq!(class_of(&mut e, tcp), None);
}

#[test]
fn two_ranges_under_one_mask_are_walked_in_the_order_they_were_added() {
    let mut e = htb();
    // Same mask (ip_proto + a destination range): one entry in the mask list, two filters on its list.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 100-200 classid 1:1",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 150-300 classid 1:3",
    );
    // 150..=200 is in both: the first added wins (`fl_lookup_range` walks `mask->filters`).
    assert_eq!(class_of(&mut e, udp(150)), Some(1));
    assert_eq!(class_of(&mut e, udp(250)), Some(3));
    assert_eq!(class_of(&mut e, udp(99)), None);
}

#[test]
fn masks_are_tried_in_the_order_they_appeared() {
    let mut e = htb();
    // Mask A: ip_proto and dst_ip /24. Mask B: ip_proto and dst_port. Both in one instance (prio 1).
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_ip 10.0.0.0/24 classid 1:1",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 53 classid 1:2",
    );
    // A packet both masks find: mask A came first.
    assert_eq!(class_of(&mut e, udp(53)), Some(1));
    // Only mask B's filter holds for a destination outside 10.0.0.0/24.
    let other = Packet::udp4([10, 0, 0, 1], 5000, [192, 0, 2, 1], 53, 0, 100);
    assert_eq!(class_of(&mut e, other), Some(2));
    // Deleting A's only filter removes its mask: B decides for 10.0.0.2 too.
    ok(
        &mut e,
        "filter del dev eth0 parent 1: protocol ip prio 1 handle 1 flower",
    );
    assert_eq!(class_of(&mut e, udp(53)), Some(2));
}

#[test]
fn masked_tos_ttl_tcp_flags_and_prefixes() {
    let mut e = htb();
    // DSCP EF (0xb8) under the mask 0xfc: the ECN bits do not count.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_tos 0xb8/0xfc classid 1:1",
    );
    // A SYN without ACK: flags 0x02 under mask 0x12.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 flower ip_proto tcp tcp_flags 0x2/0x12 classid 1:2",
    );
    let ef_ect = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0xb9, 100);
    assert_eq!(class_of(&mut e, ef_ect), Some(1), "0xb9 & 0xfc == 0xb8");
    let af41 = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x88, 100);
    assert_eq!(class_of(&mut e, af41), None);
    let syn = Packet::tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x02, 0, 0, &[], 0);
    let synack = Packet::tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x12, 0, 0, &[], 0);
    let syn_psh = Packet::tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x0a, 0, 0, &[], 0);
    assert_eq!(class_of(&mut e, syn), Some(2));
    assert_eq!(class_of(&mut e, synack), None, "ACK set");
    assert_eq!(
        class_of(&mut e, syn_psh),
        Some(2),
        "PSH is outside the mask"
    );

    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower src_ip 10.1.0.0/16 ip_ttl 64 classid 1:4",
    );
    let inside = Packet::udp4([10, 1, 200, 3], 1, [10, 0, 0, 2], 2, 0, 100);
    let outside = Packet::udp4([10, 2, 0, 3], 1, [10, 0, 0, 2], 2, 0, 100);
    assert_eq!(class_of(&mut e, inside.clone()), Some(4));
    assert_eq!(class_of(&mut e, outside), None);
    let mut ttl63 = inside;
    ttl63.data[8] = 63;
    assert_eq!(class_of(&mut e, ttl63), None, "ip_ttl 64 is exact");
}

#[test]
fn icmp_type_and_the_keys_a_packet_lacks() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto icmp type 8 classid 1:1",
    );
    // A MAC key: tclab packets carry no Ethernet header, so this filter never matches.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 flower dst_mac 02:00:00:00:00:01 classid 1:2",
    );
    // indev: no input device on a tclab packet either.
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 flower indev eth0 classid 1:3",
    );
    let mut echo = Packet::udp4([10, 0, 0, 1], 0, [10, 0, 0, 2], 0, 0, 98);
    echo.data[9] = 1;
    echo.data[20] = 8; // echo request
    echo.data[21] = 0;
    assert_eq!(class_of(&mut e, echo.clone()), Some(1));
    echo.data[20] = 0; // echo reply
    assert_eq!(class_of(&mut e, echo), None);
}

#[test]
fn continue_passes_to_the_next_instance_and_ipv6_is_its_own_protocol() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp action continue",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 flower ip_proto udp classid 1:3",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ipv6 prio 3 flower ip_proto udp dst_ip 2001:db8::/32 classid 1:4",
    );
    assert_eq!(class_of(&mut e, udp(9)), Some(3), "prio 1 answers continue");
    let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
    v6.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v6.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v6.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
    let pkt = Packet {
        data: v6,
        len: 62,
        protocol: 0x86dd,
        ..Default::default()
    };
    assert_eq!(class_of(&mut e, pkt), Some(4));
}

#[test]
fn refusals_are_the_kernels_and_tcs() {
    let mut e = htb();
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower skip_sw ip_proto tcp classid 1:1",
    );
    // `tc_setup_cb_add`: a block with a device that cannot offload cannot take a hardware-only filter.
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "RTNETLINK answers: Operation not supported\nWe have an error talking to the kernel\n"
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower skip_sw skip_hw",
    );
    assert_eq!(out.code, 2, "tc_flags_valid: {}", out.stderr);
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower dst_port 80",
    );
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "Illegal \"dst_port\"\n"),
        "a port needs ip_proto first"
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto udp dst_port 20-10",
    );
    assert_eq!(
        out.stderr,
        "max value should be greater than min value\nIllegal \"dst_port\"\n"
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ipv6 prio 1 flower ip_proto icmp",
    );
    assert_eq!(
        out.stderr,
        "Illegal \"eth_type\" for ip proto\nIllegal \"ip_proto\"\n"
    );
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower dst_mac 1:2:3:4:5:zz",
    );
    assert_eq!(
        out.stderr,
        "\"zz\" is invalid lladdr.\nIllegal \"dst_mac\"\n"
    );
    // A Geneve option without its data (flower_check_enc_opt_key wants CLASS:TYPE:DATA).
    let out = tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower geneve_opts 0102:80",
    );
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "Illegal \"geneve_opts\"\n")
    );
    // A replacement must keep its filter's mask (`fl_check_assign_mask`).
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 handle 5 flower ip_proto udp classid 1:1",
    );
    let out = tc(
        &mut e,
        "filter replace dev eth0 parent 1: protocol ip prio 1 handle 5 flower ip_proto udp dst_port 53 classid 1:1",
    );
    assert_eq!(out.code, 2);
    ok(
        &mut e,
        "filter replace dev eth0 parent 1: protocol ip prio 1 handle 5 flower ip_proto tcp classid 1:2",
    );
    let tcp = Packet::tcp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0x10, 0, 0, &[], 0);
    assert_eq!(
        class_of(&mut e, tcp),
        Some(2),
        "the replacement's key holds"
    );
    assert_eq!(class_of(&mut e, udp(1)), None, "and the old one is gone");
}

#[test]
fn show_prints_what_the_kernel_dumps() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower src_mac 02:00:00:00:00:00/24 ip_proto tcp dst_ip 192.0.2.0/255.255.255.0 src_port 80/0xff00 classid 1:2 skip_hw",
    );
    let out = tc(&mut e, "filter show dev eth0");
    // Expected from fl_dump_key + flower_print_opt: MAC mask as a prefix length, the dotted netmask
    // as /24, the masked port as value/0xmask, skip_hw then not_in_hw.
    assert_eq!(
        out.stdout,
        "filter parent 1: protocol ip pref 1 flower chain 0 \n\
         filter parent 1: protocol ip pref 1 flower chain 0 handle 0x1 classid 1:2 \n  \
         src_mac 02:00:00:00:00:00/24\n  \
         eth_type ipv4\n  \
         ip_proto tcp\n  \
         dst_ip 192.0.2.0/24\n  \
         src_port 80/0xff00\n  \
         skip_hw\n  \
         not_in_hw\n"
    );
}

#[test]
fn terse_dumps_print_what_the_kernel_puts_in_them() {
    let mut e = htb();
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 flower ip_proto tcp classid 1:1 action drop",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.0.0.1/32 classid 1:2",
    );
    ok(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 flower classid 1:3",
    );
    // fl_terse_dump: the handle, the flags and the actions' kinds; no keys, no classid. u32 has no
    // terse_dump: its first filter ends the kernel's dump, so prio 3 is never listed.
    assert_eq!(
        tc(&mut e, "-br filter show dev eth0").stdout,
        "filter parent 1: protocol ip pref 1 flower chain 0 \n\
         filter parent 1: protocol ip pref 1 flower chain 0 handle 0x1 \n  \
         not_in_hw\n\
         \taction order 1: gact \n\
         filter parent 1: protocol ip pref 2 u32 chain 0 \n"
    );
    // The action table's terse dump carries the index, which tc prints.
    assert_eq!(
        tc(&mut e, "-br actions ls action gact").stdout,
        "total acts 1\n\n\taction order 0: gact \t index 1\n"
    );
}
