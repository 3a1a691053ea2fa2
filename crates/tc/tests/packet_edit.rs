//! The packet-editing actions on real bytes: policies made by tc lines, hand-built TCP/UDP packets with
//! valid checksums through a device's ingress hook, and the result checked the way a receiving Linux
//! stack checks it (`ip_rcv`'s header checksum, `tcp_v4_rcv`'s checksum over the pseudo-header). The
//! expectations follow from the actions' kernel code: pedit changes bytes and no checksum, csum
//! recomputes them, nat patches them incrementally.

use tclab_core::csum::{self, Sum};
use tclab_core::{Cx, Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

fn ok(e: &mut Engine, line: &str) {
    let out = tc(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

/// An engine whose eth0 ingress runs `actions` on every IPv4 packet.
fn ingress(actions: &str) -> Engine {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 ingress");
    ok(
        &mut e,
        &format!("filter add dev eth0 parent ffff: protocol ip prio 1 matchall {actions}"),
    );
    e
}

fn receive(e: &mut Engine, pkt: Packet) -> Option<Packet> {
    e.device_mut("eth0").unwrap().receive(pkt, &mut Cx::new(0))
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// A TCP segment with `payload` bytes (not materialised: zeros) and correct IP and TCP checksums.
fn tcp(src: [u8; 4], dst: [u8; 4], dport: u16, payload: u32) -> Packet {
    let mut p = Packet::tcp4(src, 40000, dst, dport, 0x18, 1000, 2000, &[], payload);
    let sum = Sum::default().bytes(&p.data[20..]);
    let c = csum::tcpudp_magic(be32(&p.data, 12), be32(&p.data, 16), 20 + payload, 6, sum);
    p.data[36..38].copy_from_slice(&c.to_be_bytes());
    assert!(stack_accepts(&p), "the hand-built segment is valid");
    p
}

/// What the receiving stack checks: the IPv4 header sums to zero, and the transport checksum with its
/// pseudo-header sums to zero (`csum_tcpudp_magic(...) == 0`); a UDP checksum of 0 means none.
fn stack_accepts(p: &Packet) -> bool {
    let d = &p.data;
    let ihl = (d[0] & 0x0f) as usize * 4;
    if tclab_core::wire::checksum(&d[..ihl]) != 0 {
        return false;
    }
    let ipl = u16::from_be_bytes([d[2], d[3]]) as u32;
    let proto = d[9];
    if proto == 17 && d[ihl + 6..ihl + 8] == [0, 0] {
        return true;
    }
    let sum = Sum::default().bytes(&d[ihl..]);
    csum::tcpudp_magic(be32(d, 12), be32(d, 16), ipl - ihl as u32, proto, sum) == 0
}

#[test]
fn pedit_then_csum_delivers_a_valid_packet_and_pedit_alone_a_corrupt_one() {
    let segment = tcp([10, 0, 0, 1], [10, 0, 0, 2], 80, 1200);
    // pedit rewrites the destination and leaves both checksums as they were: the stack would drop it.
    let mut e = ingress("action pedit ex munge ip dst set 192.0.2.80 pipe");
    let p = receive(&mut e, segment.clone()).expect("pedit passes");
    assert_eq!(&p.data[16..20], &[192, 0, 2, 80]);
    assert!(!stack_accepts(&p), "stale checksums: dropped as corrupt");
    // With csum after it, both checksums are recomputed over the new address.
    let mut e =
        ingress("action pedit ex munge ip dst set 192.0.2.80 pipe action csum ip4h and tcp");
    let p = receive(&mut e, segment).expect("csum passes");
    assert_eq!(&p.data[16..20], &[192, 0, 2, 80]);
    assert!(stack_accepts(&p), "checksums valid after csum");
}

#[test]
fn nat_both_ways_keeps_tcp_valid() {
    // A host 10.0.0.7 behind 203.0.113.7: egress rewrites its source, ingress the reply's destination.
    let mut out = ingress("action nat egress 10.0.0.0/24 203.0.113.0");
    let p = receive(&mut out, tcp([10, 0, 0, 7], [198, 51, 100, 1], 443, 500)).unwrap();
    assert_eq!(
        &p.data[12..16],
        &[203, 0, 113, 7],
        "host part kept under the /24"
    );
    assert!(stack_accepts(&p));
    let mut back = ingress("action nat ingress 203.0.113.7 10.0.0.7");
    let reply = tcp([198, 51, 100, 1], [203, 0, 113, 7], 40000, 0);
    let r = receive(&mut back, reply).unwrap();
    assert_eq!(&r.data[16..20], &[10, 0, 0, 7]);
    assert!(stack_accepts(&r));
    // Outside the prefix nothing changes.
    let other = tcp([10, 0, 1, 7], [198, 51, 100, 1], 443, 0);
    assert_eq!(receive(&mut out, other.clone()).unwrap(), other);
}

#[test]
fn pedit_ttl_decrement_and_port_add_with_csum_udp() {
    let mut e = ingress(
        "action pedit ex munge ip ttl decrement munge udp dport add 1 pipe action csum iph and udp",
    );
    let mut u = Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 5353, 0, 120);
    // Give it a UDP checksum so that csum recomputes one (a zero one stays zero).
    u.data[26] = 0x55;
    let p = receive(&mut e, u).unwrap();
    assert_eq!(p.data[8], 63, "ttl 64 - 1");
    assert_eq!(u16::from_be_bytes([p.data[22], p.data[23]]), 5354);
    assert!(stack_accepts(&p));
}

#[test]
fn actions_count_what_they_could_not_do() {
    // An Ethernet key on a packet without a link-layer header: an overlimit, the packet passes unchanged.
    let mut e = ingress("action pedit ex munge eth dst set 02:00:00:00:00:01");
    let u = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
    assert_eq!(receive(&mut e, u.clone()).unwrap(), u);
    let out = tc(&mut e, "-s actions ls action pedit");
    assert!(
        out.stdout.contains("(dropped 0, overlimits 1"),
        "{}",
        out.stdout
    );
    // csum on a packet too short for its IP header: dropped and counted as a drop.
    let mut e = ingress("action csum iph");
    let short = Packet {
        data: vec![0x45, 0, 0, 20],
        len: 18,
        protocol: 0x0800,
        ..Default::default()
    };
    assert!(receive(&mut e, short).is_none());
    let out = tc(&mut e, "-s actions ls action csum");
    assert!(out.stdout.contains("(dropped 1,"), "{}", out.stdout);
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    // The kernel wants keys (`tcf_pedit_init`).
    let out = tc(&mut e, "actions add action pedit index 3");
    assert_eq!(out.code, 255);
    assert!(
        out.stderr
            .starts_with("Error: act_pedit: Pedit requires keys to be passed."),
        "{}",
        out.stderr
    );
    // tc's own: an unaligned u16 at offset 15, a field pedit knows only in extended mode.
    let out = tc(&mut e, "actions add action pedit munge offset 15 u16 set 1");
    assert!(
        out.stderr
            .starts_with("pack_key16 bad index value 3\nBad pedit construct (offset)"),
        "{}",
        out.stderr
    );
    let out = tc(&mut e, "actions add action pedit munge tcp dport set 1");
    assert!(
        out.stderr
            .starts_with("bad pedit parsing\nBad pedit construct (tcp)"),
        "{}",
        out.stderr
    );
    let out = tc(&mut e, "actions add action nat ingress 1.2.3.4");
    assert_eq!(out.code, 255, "NEW is missing: {}", out.stderr);
    assert!(tc(&mut e, "actions ls action pedit").stdout.is_empty());
}

#[test]
fn skbmod_ecn_marks_ect_and_simple_only_counts() {
    let mut e = ingress("action skbmod ecn pipe action simple sdata seen");
    // ECT(0) becomes CE with a valid header checksum (`IP_ECN_set_ce`); Not-ECT stays.
    let ect0 = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0xb8 | 2, 100);
    let p = receive(&mut e, ect0).unwrap();
    assert_eq!(p.data[1], 0xbb);
    assert!(stack_accepts(&p));
    let not_ect = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0xb8, 100);
    assert_eq!(receive(&mut e, not_ect.clone()).unwrap(), not_ect);
    let out = tc(&mut e, "-s actions ls action simple");
    assert!(out.stdout.contains("Simple <seen>"), "{}", out.stdout);
    // Counted at the ingress hook: 100-byte frames without their 14-byte Ethernet header.
    assert!(
        out.stdout.contains("Sent 172 bytes 2 pkt"),
        "{}",
        out.stdout
    );
    // The MAC edits have no header to write on a tclab packet: the packet passes as it was.
    let mut e = ingress("action skbmod set dmac 02:00:00:00:00:09 set etype 0x88b5");
    let u = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
    assert_eq!(receive(&mut e, u.clone()).unwrap(), u);
    // skbmod and pedit count no drop when their control is drop (their kernel code counts none).
    let mut e = ingress("action pedit munge ip ttl set 1 drop");
    assert!(receive(&mut e, u.clone()).is_none());
    let out = tc(&mut e, "-s actions ls action pedit");
    assert!(
        out.stdout.contains("(dropped 0, overlimits 0"),
        "{}",
        out.stdout
    );
}
