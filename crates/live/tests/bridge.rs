//! The live receive path without interfaces: a detached bridge (`Bridge::detached`) is handed frames
//! at chosen times and keeps what leaves, through the same ingress hook, policy and `qdisc_run` as on
//! real interfaces. Expectations are derived by hand from the policies' parameters.

use tclab_core::Engine;
use tclab_live::bridge::Bridge;

/// A policy applied with tc's own words.
fn policy(lines: &[&str]) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.add_device("eth1", 1500, 1000);
    for l in lines {
        let words: Vec<String> = l.split_whitespace().map(String::from).collect();
        if words[0] == "link" {
            tclab_tc::store::apply_record(&mut e, &words).unwrap_or_else(|m| panic!("{l}: {m}"));
            continue;
        }
        let out = tclab_tc::run(&mut e, &words, 0);
        assert_eq!(out.code, 0, "{l}: {}", out.stderr);
    }
    e
}

/// An Ethernet frame of `len` bytes carrying IPv4/UDP from 10.0.1.2 to 10.0.1.1, port `dport`.
fn udp_frame(len: usize, dport: u16, tos: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[0x45, tos]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 2, 10, 0, 1, 1]);
    f.extend_from_slice(&4000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(len, 0xab);
    f
}

#[test]
fn without_a_policy_a_frame_leaves_the_other_port_unchanged() {
    let mut b = Bridge::detached(policy(&[]), [("eth0", 1500), ("eth1", 1500)]);
    let f = udp_frame(1514, 5201, 0);
    b.arrive(0, 1, &f, false);
    assert_eq!(
        b.take_sent(0),
        vec![f.clone()],
        "from eth1 out of eth0, byte for byte"
    );
    assert!(b.take_sent(1).is_empty());
    // ARP (not IP) is bridged too, through the same tree.
    let mut arp = f[..12].to_vec();
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    b.arrive(1, 0, &arp, false);
    assert_eq!(b.take_sent(1), vec![arp]);
}

#[test]
fn a_tbf_releases_the_burst_then_one_frame_per_frame_time() {
    // TBF 8 Mbit/s = 1 byte/µs, burst 3028 B: two 1514-byte frames at once, then one per 1514 µs.
    let mut b = Bridge::detached(
        policy(&["qdisc add dev eth0 root tbf rate 8mbit burst 3028 limit 100000"]),
        [("eth0", 1500), ("eth1", 1500)],
    );
    for _ in 0..5 {
        b.arrive(0, 1, &udp_frame(1514, 5201, 0), false);
    }
    assert_eq!(b.take_sent(0).len(), 2);
    assert_eq!(b.next_wakeup(), Some(1_514_000), "the third frame's tokens");
    b.poll(1_513_999);
    assert_eq!(b.take_sent(0).len(), 0);
    b.poll(1_514_000);
    assert_eq!(b.take_sent(0).len(), 1);
    b.poll(3 * 1_514_000);
    assert_eq!(b.take_sent(0).len(), 2);
}

#[test]
fn ingress_police_and_an_ifb_shape_what_arrives() {
    // What arrives on eth1 is redirected to ifb0, shaped there by a TBF, and then bridged to eth0; a
    // policer in front drops beyond 3 frames' burst (8 kbit/s refills 10 bytes in the test's 10 ms)
    // and lets the rest go on to the next filter (continue).
    let mut b = Bridge::detached(
        policy(&[
            "link add dev ifb0 type ifb",
            "link set dev ifb0 up",
            "qdisc add dev ifb0 root tbf rate 8mbit burst 1514 limit 100000",
            "qdisc add dev eth1 handle ffff: ingress",
            "filter add dev eth1 parent ffff: protocol ip prio 1 u32 match u32 0 0 police rate 8kbit burst 4542 conform-exceed drop/continue",
            "filter add dev eth1 parent ffff: protocol ip prio 2 u32 match u32 0 0 action mirred egress redirect dev ifb0",
        ]),
        [("eth0", 1500), ("eth1", 1500)],
    );
    for _ in 0..6 {
        b.arrive(0, 1, &udp_frame(1514, 5201, 0), false);
    }
    // Three pass the policer (4542 B of burst); the ifb's TBF lets one through now, the next after
    // 1514 µs, the third after 3028 µs, each then bridged out of eth0.
    assert_eq!(b.take_sent(0).len(), 1);
    b.poll(1_514_000);
    assert_eq!(b.take_sent(0).len(), 1);
    b.poll(3_028_000);
    assert_eq!(b.take_sent(0).len(), 1);
    b.poll(10_000_000);
    assert!(b.take_sent(0).is_empty());
    let st = b.stats();
    assert_eq!(st[1].1.rx_packets, 6);
    assert_eq!(st[1].1.rx_dropped, 3, "the policer's drops");
}

#[test]
fn an_ip_packet_takes_its_priority_from_tos_as_ip_forward_gives_it() {
    // prio's priomap: TOS 0x10 (minimize delay) is priority 6, band 0; TOS 0 is band 1.
    let mut b = Bridge::detached(
        policy(&[
            "qdisc add dev eth0 root handle 1: prio",
            "qdisc add dev eth0 parent 1:1 handle 10: tbf rate 8mbit burst 1514 limit 100000",
            "qdisc add dev eth0 parent 1:2 handle 20: tbf rate 8mbit burst 1514 limit 100000",
        ]),
        [("eth0", 1500), ("eth1", 1500)],
    );
    b.arrive(0, 1, &udp_frame(1514, 1, 0), false);
    b.arrive(0, 1, &udp_frame(1514, 2, 0x10), false);
    b.arrive(0, 1, &udp_frame(1514, 3, 0), false);
    b.arrive(0, 1, &udp_frame(1514, 4, 0x10), false);
    b.poll(1_514_000);
    let ports: Vec<u16> = b
        .take_sent(0)
        .iter()
        .map(|f| u16::from_be_bytes([f[36], f[37]]))
        .collect();
    // Each band's TBF passes one frame at once, one more after 1514 µs: band 0 (TOS 0x10) first.
    assert_eq!(ports, vec![1, 2, 4, 3]);
}

/// xorshift64*: deterministic junk.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn twenty_thousand_hostile_frames_never_panic_and_every_frame_is_counted() {
    let mut b = tclab_live::fuzz::bridge();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = Vec::new();
    for _ in 0..20_000 {
        let r = next(&mut seed);
        let len = (r % 1600) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| next(&mut seed) as u8).collect();
        // Half of them look like IPv4 (some with a bad IHL or length), VLAN-tagged now and then.
        if len >= 34 && r & 1 == 0 {
            f[12] = 0x08;
            f[13] = 0x00;
            f[14] = 0x40 | (r >> 8) as u8 & 0x0f;
        }
        if len >= 18 && r.is_multiple_of(7) {
            f[12] = 0x81;
            f[13] = 0x00;
        }
        data.extend_from_slice(&(len as u16).to_be_bytes());
        data.push(((r >> 20) & 1) as u8 | if r.is_multiple_of(97) { 2 } else { 0 });
        data.push((r >> 24) as u8 % 20);
        data.extend_from_slice(&f);
    }
    let (fed, _) = tclab_live::fuzz::fuzz_one(&mut b, &data, 0);
    assert_eq!(fed, 20_000);
    let st = b.stats();
    let received: u64 = st.iter().map(|(_, s)| s.rx_packets).sum();
    assert_eq!(received, 20_000, "every frame counted once");
    let (m, o): (u64, u64) = st
        .iter()
        .fold((0, 0), |a, (_, s)| (a.0 + s.malformed, a.1 + s.oversize));
    assert!(
        m > 0 && o > 0,
        "short and oversize frames were among them: {m} {o}"
    );
    // Arbitrary bytes as the whole input, too.
    let mut b = tclab_live::fuzz::bridge();
    let junk: Vec<u8> = (0..200_000).map(|_| next(&mut seed) as u8).collect();
    tclab_live::fuzz::fuzz_one(&mut b, &junk, 0);
}

/// VLAN tags travel with the packet, so the vlan action's push and pop show on the wire: a frame
/// bridged to eth0 leaves with the tag an egress filter pushed, and a tagged frame arriving on eth0
/// leaves eth1 without the tag an ingress filter popped. A tagged frame's filters see its TPID as
/// the protocol, as the kernel's `skb_protocol` gives it (`protocol 802.1q`, not `ip`).
#[test]
fn a_vlan_action_writes_and_removes_tags_on_the_wire() {
    let mut b = Bridge::detached(
        policy(&[
            "qdisc add dev eth0 clsact",
            "filter add dev eth0 egress protocol ip matchall action vlan push id 10 priority 3",
            "filter add dev eth0 ingress protocol 802.1q matchall action vlan pop",
        ]),
        [("eth0", 1500), ("eth1", 1500)],
    );
    let plain = udp_frame(1000, 5201, 0);
    b.arrive(0, 1, &plain, false);
    let sent = b.take_sent(0);
    assert_eq!(sent.len(), 1);
    // 802.1Q, PCP 3, VLAN 10, then IPv4 and the same bytes.
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x0a]);
    tagged.extend_from_slice(&plain[12..]);
    assert_eq!(sent[0], tagged);
    b.arrive(1, 0, &tagged, false);
    assert_eq!(b.take_sent(1), vec![plain], "popped on eth0's ingress");
}
