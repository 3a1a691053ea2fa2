//! Matches and targets on hand-built packets; each assertion says what the kernel would do.

use super::conntrack::{STATE_ESTABLISHED, STATE_NEW};
use super::*;
use crate::wire::{checksum, Ipv4Header};

const A: u32 = 0x0a00_0001; // 10.0.0.1
const B: u32 = 0xc0a8_0101; // 192.168.1.1

/// An IPv4 packet with a correct header checksum: `l4` follows a 20-byte header; `tot_len` says `total`.
fn ip(src: u32, dst: u32, proto: u8, tos: u8, l4: &[u8], total: u16) -> Packet {
    let mut d = vec![0x45, tos];
    d.extend_from_slice(&total.to_be_bytes());
    d.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
    d.extend_from_slice(&src.to_be_bytes());
    d.extend_from_slice(&dst.to_be_bytes());
    let c = checksum(&d);
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d.extend_from_slice(l4);
    Packet {
        len: total as u32 + 14,
        data: d,
        protocol: 0x0800,
        ..Default::default()
    }
}

fn tcp(src: u32, sport: u16, dst: u32, dport: u16, flags: u8, payload: u16) -> Packet {
    let mut h = vec![0u8; 20];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[12] = 0x50;
    h[13] = flags;
    ip(src, dst, 6, 0, &h, 40 + payload)
}

fn udp(src: u32, sport: u16, dst: u32, dport: u16, payload: u16) -> Packet {
    let mut h = vec![0u8; 8];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    ip(src, dst, 17, 0, &h, 28 + payload)
}

fn rule(matches: Vec<Match>, target: Target) -> Rule {
    Rule {
        ip: IpPart::default(),
        matches,
        target,
        counters: Counters::default(),
    }
}

fn nf_with(chain: &str, rules: Vec<Rule>) -> Netfilter {
    let mut nf = Netfilter::new();
    for r in rules {
        nf.mangle.append(chain, r).unwrap();
    }
    nf
}

fn post(nf: &mut Netfilter, p: &mut Packet) -> NfVerdict {
    nf.hook(Hook::PostRouting, p, None, Some("eth0"), 0)
}

#[test]
fn mark_targets_follow_xt_mark_arithmetic() {
    // mark = (mark & ~mask) ^ value, for --set-xmark and the and/or/xor forms iptables encodes with it.
    for (mark, mask, before, after) in [
        (0x5, 0xf0, 0xff, 0x0a), // --set-xmark 0x5/0xf0: clear 0xf0, then xor 0x5
        (0x50, u32::MAX, 0x1234, 0x50), // --set-mark 0x50
        (0, !0xf0u32, 0x1ff, 0xf0), // --and-mark 0xf0
        (0x100, 0x100, 0x1, 0x101), // --or-mark 0x100
        (0x3, 0, 0x1, 0x2),      // --xor-mark 0x3
    ] {
        let mut nf = nf_with(
            "POSTROUTING",
            vec![rule(vec![], Target::Mark { mark, mask })],
        );
        let mut p = udp(A, 1, B, 2, 10);
        p.mark = before;
        post(&mut nf, &mut p);
        assert_eq!(p.mark, after, "MARK {mark:#x}/{mask:#x} on {before:#x}");
    }
}

#[test]
fn connmark_save_and_restore_honour_masks() {
    let mut nf = Netfilter::new();
    let save = ConnmarkOp::Save {
        nfmask: 0xff,
        ctmask: 0xff,
    };
    let restore = ConnmarkOp::Restore {
        ctmask: 0x0f,
        nfmask: 0x0f,
    };
    nf.mangle
        .append(
            "PREROUTING",
            rule(
                vec![Match::Mark {
                    mark: 0,
                    mask: 0xffff_0000,
                    invert: true,
                }],
                Target::Connmark(save),
            ),
        )
        .unwrap();
    nf.mangle
        .append("PREROUTING", rule(vec![], Target::Connmark(restore)))
        .unwrap();
    // First packet: mark 0x1_1234 → ct mark takes its low byte; then the restore puts the low nibble back.
    let mut p = udp(A, 1000, B, 53, 20);
    p.mark = 0x1_1234;
    nf.hook(Hook::PreRouting, &mut p, Some("eth1"), None, 0);
    let ct = nf.conntrack.iter().next().unwrap();
    assert_eq!(ct.mark, 0x34, "save: ct = (ct & ~0xff) ^ (mark & 0xff)");
    assert_eq!(
        p.mark, 0x1_1234,
        "restore: (mark & ~0xf) ^ (ct & 0xf) keeps 0x..4"
    );
    // The reply carries mark 0xab00 (the save rule does not match it): restore gives it the nibble 4.
    let mut r = udp(B, 53, A, 1000, 40);
    r.mark = 0xab00;
    nf.hook(Hook::PreRouting, &mut r, Some("eth0"), None, 1);
    assert_eq!(
        r.mark, 0xab04,
        "reply direction shares the connection's mark"
    );
}

#[test]
fn connbytes_counts_both_directions_and_the_average() {
    let cb = |from, to, dir, mode| Match::Connbytes {
        from,
        to,
        dir,
        mode,
    };
    let mut nf = Netfilter::new();
    // Three rules that set distinct mark bits when their connbytes condition holds.
    for (m, bit) in [
        (
            cb(5, u64::MAX, ConnbytesDir::Both, ConnbytesMode::Packets),
            1,
        ),
        (cb(0, 2, ConnbytesDir::Reply, ConnbytesMode::Packets), 2),
        (
            cb(100, 200, ConnbytesDir::Original, ConnbytesMode::AvgPkt),
            4,
        ),
        // inverted: bytes both directions outside [0, 399]
        (cb(399, 0, ConnbytesDir::Both, ConnbytesMode::Bytes), 8),
    ] {
        nf.mangle
            .append(
                "PREROUTING",
                rule(
                    vec![m],
                    Target::Mark {
                        mark: bit,
                        mask: bit,
                    },
                ),
            )
            .unwrap();
    }
    let mut marks = Vec::new();
    // orig 100+100+100 bytes (IP length 128 each as the UDP header is 8 + payload 100 + IP 20),
    // replies 60 bytes each.
    let seq = [true, false, true, false, true];
    for (i, orig) in seq.iter().enumerate() {
        let mut p = if *orig {
            udp(A, 7, B, 9, 100)
        } else {
            udp(B, 9, A, 7, 32)
        };
        nf.hook(Hook::PreRouting, &mut p, None, None, i as u64);
        marks.push(p.mark);
    }
    // Packet k (1-based) is counted before the rules see it (nf_conntrack_in runs first).
    // Both-direction packets reach 5 only at the fifth packet; reply packets ≤ 2 always here; average
    // original size 128 is in [100,200] for every original-direction packet's view; bytes:
    // 128, 188, 316, 376, 504 → outside [0,399] only at the fifth.
    assert_eq!(marks[0], 2 | 4, "1st: 1 pkt both, 0 replies, avg 128");
    assert_eq!(marks[1], 2 | 4, "2nd: reply count 1, avg orig 128");
    assert_eq!(marks[3], 2 | 4, "4th: two replies still ≤ 2");
    assert_eq!(marks[4], 1 | 2 | 4 | 8, "5th: 5 packets, 504 bytes");
    let c = nf.conntrack.iter().next().unwrap();
    assert_eq!((c.acct[0].packets, c.acct[0].bytes), (3, 384));
    assert_eq!((c.acct[1].packets, c.acct[1].bytes), (2, 120));
}

#[test]
fn tcp_flags_and_length_find_bare_acks() {
    // Seed 003: --tcp-flags URG,ACK,PSH,RST,SYN,FIN ACK -m length --length 40:64 -j MARK --set-mark 200
    let r = rule(
        vec![
            Match::Tcp {
                sport: PortRange::ANY,
                dport: PortRange::ANY,
                flags: Some(TcpFlags {
                    mask: 0x3f,
                    cmp: 0x10,
                    invert: false,
                }),
            },
            Match::Length {
                min: 40,
                max: 64,
                invert: false,
            },
        ],
        Target::Mark {
            mark: 200,
            mask: u32::MAX,
        },
    );
    let mut nf = nf_with("POSTROUTING", vec![r]);
    for (flags, payload, want) in [
        (0x10, 0, 200),  // bare ACK, 40 bytes
        (0x10, 24, 200), // ACK with 24 bytes of options/data: 64, the upper bound
        (0x10, 25, 0),   // 65 bytes: too long
        (0x18, 0, 0),    // PSH+ACK is not ACK alone
        (0x12, 0, 0),    // SYN+ACK
        (0x10, 1460, 0), // a full-size data segment stays bulk
    ] {
        let mut p = tcp(A, 5000, B, 80, flags, payload);
        post(&mut nf, &mut p);
        assert_eq!(p.mark, want, "flags {flags:#x}, {} bytes", 40 + payload);
    }
    // --syn is --tcp-flags FIN,SYN,RST,ACK SYN.
    let syn = rule(
        vec![Match::Tcp {
            sport: PortRange::ANY,
            dport: PortRange {
                min: 22,
                max: 22,
                invert: false,
            },
            flags: Some(TcpFlags {
                mask: 0x17,
                cmp: 0x02,
                invert: false,
            }),
        }],
        Target::Classify(0x0001_0010),
    );
    let mut nf = nf_with("POSTROUTING", vec![syn]);
    let mut s = tcp(A, 5000, B, 22, 0x02, 0);
    post(&mut nf, &mut s);
    assert_eq!(s.priority, 0x0001_0010, "SYN to port 22 is classified 1:10");
    let mut sa = tcp(A, 5000, B, 22, 0x12, 0);
    post(&mut nf, &mut sa);
    assert_eq!(sa.priority, 0, "SYN+ACK is not --syn");
    let mut other = tcp(A, 5000, B, 23, 0x02, 0);
    post(&mut nf, &mut other);
    assert_eq!(other.priority, 0, "port 23 is not port 22");
}

#[test]
fn length_bounds_are_inclusive_and_invertible() {
    for (min, max, invert, len, want) in [
        (100, 100, false, 100, true),
        (100, 100, true, 100, false),
        (40, 64, false, 39, false),
        (40, 64, false, 40, true),
        (10, 5, false, 7, false), // iptables accepts min > max; nothing matches
    ] {
        let r = rule(
            vec![Match::Length { min, max, invert }],
            Target::Mark { mark: 1, mask: 1 },
        );
        let mut nf = nf_with("POSTROUTING", vec![r]);
        let mut p = ip(A, B, 17, 0, &[0; 8], len);
        post(&mut nf, &mut p);
        assert_eq!(
            p.mark == 1,
            want,
            "length {len} vs {min}:{max} invert {invert}"
        );
    }
}

#[test]
fn dscp_and_tos_rewrite_keep_the_header_checksum_valid() {
    let mut nf = nf_with("POSTROUTING", vec![rule(vec![], Target::Dscp(46))]);
    let mut p = ip(A, B, 17, 0x03, &[0; 8], 28); // ECN bits set
    post(&mut nf, &mut p);
    assert_eq!(
        p.data[1],
        0xb8 | 0x03,
        "DSCP EF in the high six bits, ECN kept"
    );
    assert_eq!(checksum(&p.data[..20]), 0, "header checksum still verifies");
    let mut nf = nf_with(
        "POSTROUTING",
        vec![rule(
            vec![],
            Target::Tos {
                value: 0x10,
                mask: 0x3f,
            },
        )],
    );
    for tos in [0x00u8, 0xc3, 0xff, 0x10] {
        let mut p = ip(A, B, 6, tos, &[0; 20], 40);
        post(&mut nf, &mut p);
        assert_eq!(
            p.data[1],
            (tos & !0x3f) ^ 0x10,
            "TOS --set-tos Minimize-Delay on {tos:#x}"
        );
        assert_eq!(checksum(&p.data[..20]), 0, "checksum after TOS {tos:#x}");
    }
    // The rewritten TOS is what later rules see.
    let mut nf = nf_with(
        "POSTROUTING",
        vec![
            rule(vec![], Target::Dscp(10)),
            rule(
                vec![Match::Dscp {
                    dscp: 10,
                    invert: false,
                }],
                Target::Mark {
                    mark: 7,
                    mask: u32::MAX,
                },
            ),
        ],
    );
    let mut p = udp(A, 1, B, 2, 0);
    post(&mut nf, &mut p);
    assert_eq!(p.mark, 7);
}

#[test]
fn return_leaves_user_chains_and_builtin_return_applies_the_policy() {
    let mut nf = Netfilter::new();
    nf.mangle.new_chain("sub").unwrap();
    let udp_proto = IpPart {
        proto: Some((17, false)),
        ..Default::default()
    };
    nf.mangle
        .append(
            "sub",
            Rule {
                ip: udp_proto.clone(),
                ..rule(vec![], Target::Return)
            },
        )
        .unwrap();
    nf.mangle
        .append("sub", rule(vec![], Target::Mark { mark: 1, mask: 1 }))
        .unwrap();
    nf.mangle
        .append("PREROUTING", rule(vec![], Target::Jump("sub".into())))
        .unwrap();
    nf.mangle
        .append(
            "PREROUTING",
            rule(vec![], Target::Mark { mark: 2, mask: 2 }),
        )
        .unwrap();
    let mut t = tcp(A, 1, B, 2, 0x10, 0);
    nf.hook(Hook::PreRouting, &mut t, None, None, 0);
    assert_eq!(
        t.mark, 3,
        "tcp runs all of sub, then returns to the next rule"
    );
    let mut u = udp(A, 1, B, 2, 0);
    nf.hook(Hook::PreRouting, &mut u, None, None, 0);
    assert_eq!(u.mark, 2, "udp returns from sub before its MARK");
    assert_eq!(nf.mangle.user["sub"].rules[0].counters.packets, 1);
    assert_eq!(nf.mangle.user["sub"].rules[1].counters.packets, 1);
    // RETURN in a built-in chain applies the policy.
    nf.mangle.set_policy("FORWARD", "DROP").unwrap();
    nf.mangle
        .append("FORWARD", rule(vec![], Target::Return))
        .unwrap();
    let mut f = udp(A, 1, B, 2, 0);
    assert_eq!(
        nf.hook(Hook::Forward, &mut f, None, None, 0),
        NfVerdict::Drop
    );
    assert_eq!(
        nf.mangle.builtin[Hook::Forward as usize].counters.packets,
        1
    );
}

#[test]
fn insert_and_delete_positions() {
    let mut t = Table::default();
    let m = |v| {
        rule(
            vec![],
            Target::Mark {
                mark: v,
                mask: u32::MAX,
            },
        )
    };
    t.append("OUTPUT", m(1)).unwrap();
    t.insert("OUTPUT", 1, m(0)).unwrap(); // -I OUTPUT: at the head
    t.insert("OUTPUT", 3, m(3)).unwrap(); // one past the end appends
    t.insert("OUTPUT", 3, m(2)).unwrap();
    assert_eq!(t.insert("OUTPUT", 6, m(9)), Err(NfError::INS_INDEX));
    let marks = |t: &Table| -> Vec<u32> {
        t.chain("OUTPUT")
            .unwrap()
            .rules
            .iter()
            .map(|r| match r.target {
                Target::Mark { mark, .. } => mark,
                _ => 99,
            })
            .collect()
    };
    assert_eq!(marks(&t), vec![0, 1, 2, 3]);
    t.delete_num("OUTPUT", 2).unwrap();
    assert_eq!(marks(&t), vec![0, 2, 3]);
    t.delete_rule("OUTPUT", &m(3)).unwrap();
    assert_eq!(marks(&t), vec![0, 2]);
    assert_eq!(t.delete_num("OUTPUT", 3), Err(NfError::DEL_INDEX));
    assert_eq!(t.delete_rule("OUTPUT", &m(7)), Err(NfError::NO_CHAIN));
    assert_eq!(t.append("nochain", m(1)), Err(NfError::NO_CHAIN));
}

#[test]
fn classify_only_on_the_way_out() {
    let mut t = Table::default();
    let c = rule(vec![], Target::Classify(0x10010));
    assert_eq!(t.append("PREROUTING", c.clone()), Err(NfError::INVALID));
    t.new_chain("cls").unwrap();
    t.append("cls", c.clone()).unwrap();
    let before = t.clone();
    let mut t2 = t.clone();
    assert_eq!(
        t2.append("INPUT", rule(vec![], Target::Jump("cls".into()))),
        Err(NfError::INVALID),
        "reaching CLASSIFY from INPUT through a jump is refused too"
    );
    assert_eq!(t, before);
    t.append("POSTROUTING", rule(vec![], Target::Jump("cls".into())))
        .unwrap();
}

#[test]
fn conntrack_states_new_then_established() {
    let st = |mask| Match::State {
        mask,
        invert: false,
        conntrack: false,
    };
    let mut nf = Netfilter::new();
    nf.mangle
        .append(
            "PREROUTING",
            rule(vec![st(STATE_NEW)], Target::Mark { mark: 1, mask: 0xf }),
        )
        .unwrap();
    nf.mangle
        .append(
            "PREROUTING",
            rule(
                vec![st(STATE_ESTABLISHED)],
                Target::Mark { mark: 2, mask: 0xf },
            ),
        )
        .unwrap();
    let mut seen = Vec::new();
    for (i, p) in [
        tcp(A, 4000, B, 80, 0x02, 0),
        tcp(A, 4000, B, 80, 0x02, 0), // a retransmitted SYN: still NEW
        tcp(B, 80, A, 4000, 0x12, 0), // the reply
        tcp(A, 4000, B, 80, 0x10, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut p = p;
        nf.hook(Hook::PreRouting, &mut p, None, None, i as u64);
        seen.push(p.mark);
    }
    assert_eq!(seen, vec![1, 1, 2, 2]);
    // Idle past the unreplied-UDP timeout (30 s), a flow starts over as NEW.
    let mut u1 = udp(A, 1, B, 2, 0);
    nf.hook(Hook::PreRouting, &mut u1, None, None, 0);
    let mut u2 = udp(A, 1, B, 2, 0);
    nf.hook(
        Hook::PreRouting,
        &mut u2,
        None,
        None,
        31 * crate::NSEC_PER_SEC,
    );
    assert_eq!((u1.mark, u2.mark), (1, 1));
}

#[test]
fn icmp_errors_are_related_to_the_flow_they_quote() {
    let mut nf = nf_with(
        "PREROUTING",
        vec![rule(
            vec![Match::State {
                mask: conntrack::STATE_RELATED,
                invert: false,
                conntrack: true,
            }],
            Target::Mark {
                mark: 4,
                mask: u32::MAX,
            },
        )],
    );
    let mut out = udp(A, 5353, B, 53, 10);
    nf.hook(Hook::PreRouting, &mut out, None, None, 0);
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&out.data[..28]);
    let mut err = ip(B, A, 1, 0, &icmp, 28 + 28);
    nf.hook(Hook::PreRouting, &mut err, None, None, 1);
    assert_eq!(
        err.mark, 4,
        "port unreachable quoting our UDP packet is RELATED"
    );
}

#[test]
fn interfaces_with_wildcards_and_inversion() {
    let m = |name: &str, invert| IfaceMatch {
        name: name.into(),
        invert,
    };
    assert!(m("eth+", false).matches(Some("eth0")));
    assert!(m("eth+", false).matches(Some("eth")));
    assert!(!m("eth+", false).matches(Some("ppp0")));
    assert!(m("eth0", true).matches(Some("ppp0")));
    assert!(
        !m("eth0", false).matches(None),
        "no device never equals a name"
    );
    assert!(m("+", false).matches(Some("anything")));
}

#[test]
fn truncated_and_odd_packets_never_panic() {
    let port = Match::Tcp {
        sport: PortRange::ANY,
        dport: PortRange {
            min: 80,
            max: 80,
            invert: false,
        },
        flags: None,
    };
    let mut nf = nf_with(
        "POSTROUTING",
        vec![rule(vec![port], Target::Mark { mark: 1, mask: 1 })],
    );
    // A first fragment cut inside its TCP header: the kernel hot-drops it.
    let mut short = tcp(A, 1, B, 80, 0x10, 0);
    short.data.truncate(30);
    assert_eq!(post(&mut nf, &mut short), NfVerdict::Drop);
    // A later fragment has no ports: no match, no drop.
    let mut frag = tcp(A, 1, B, 80, 0x10, 0);
    frag.data[6] = 0x00;
    frag.data[7] = 0x10;
    assert_eq!(post(&mut nf, &mut frag), NfVerdict::Accept);
    assert_eq!(frag.mark, 0);
    // Not IPv4 at all: untouched.
    let mut v6 = Packet::of_len(100);
    v6.protocol = 0x86dd;
    v6.data = vec![0x60; 60];
    assert_eq!(post(&mut nf, &mut v6), NfVerdict::Accept);
    // Random bytes claiming IPv4: whatever they say, no panic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let all = Netfilter {
        mangle: {
            let mut t = Table::default();
            for m in [
                Match::Udp {
                    sport: PortRange::ANY,
                    dport: PortRange::ANY,
                },
                Match::Icmp {
                    typ: 8,
                    code: (0, 255),
                    invert: false,
                },
                Match::Multiport {
                    kind: MultiportKind::Either,
                    ports: vec![(1, 2)],
                    invert: true,
                },
                Match::Tos {
                    value: 0,
                    mask: 0,
                    invert: false,
                },
                Match::Connbytes {
                    from: 0,
                    to: 10,
                    dir: ConnbytesDir::Both,
                    mode: ConnbytesMode::AvgPkt,
                },
            ] {
                t.append("PREROUTING", rule(vec![m], Target::Dscp(5)))
                    .unwrap();
                t.append(
                    "PREROUTING",
                    rule(vec![], Target::Tos { value: 1, mask: 3 }),
                )
                .unwrap();
            }
            t
        },
        conntrack: Default::default(),
        ct_hooks: false,
    };
    let mut nf = all;
    for n in 0..5000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 70) as usize;
        let mut d: Vec<u8> = (0..len)
            .map(|i| (x >> (i % 8 * 8)) as u8 ^ i as u8)
            .collect();
        if let Some(b) = d.first_mut() {
            *b = 0x40 | (*b & 0x0f);
        }
        let mut p = Packet {
            data: d,
            len: len as u32,
            protocol: 0x0800,
            ..Default::default()
        };
        nf.hook(Hook::PreRouting, &mut p, None, None, n);
        if let Some(v) = Ipv4Header::parse(&p.data) {
            let _ = v;
        }
    }
}

#[test]
fn the_packet_carries_its_connections_mark_for_tc_connmark() {
    // CONNMARK --set-mark 0x64 in PREROUTING of the first packet; a later packet of the same connection in
    // the reply direction, with no mark of its own, still names the connection's mark, and tc's connmark
    // action restores it (act_connmark: skb->mark = ct->mark). An untracked packet carries none.
    let mut nf = nf_with(
        "PREROUTING",
        vec![rule(
            vec![],
            Target::Connmark(ConnmarkOp::Set {
                ctmark: 0x64,
                ctmask: u32::MAX,
            }),
        )],
    );
    let mut p = udp(A, 1000, B, 53, 20);
    nf.hook(Hook::PreRouting, &mut p, Some("eth1"), None, 0);
    assert_eq!(p.ct_mark, Some(0x64));
    assert_eq!(
        p.mark, 0,
        "CONNMARK --set-mark marks the connection, not the packet"
    );
    let mut r = udp(B, 53, A, 1000, 40);
    nf.hook(Hook::PostRouting, &mut r, None, Some("eth1"), 1);
    assert_eq!(
        r.ct_mark,
        Some(0x64),
        "the reply belongs to the same connection"
    );
    let cm = crate::action::connmark::Connmark::default();
    assert!(cm.act(&mut r).1);
    assert_eq!(r.mark, 0x64);
    let mut untracked = udp(A, 7, B, 8, 1);
    assert!(!cm.act(&mut untracked).1);
    assert_eq!(untracked.mark, 0);
}

#[test]
fn a_loop_reachable_from_a_builtin_chain_is_refused() {
    // mark_source_chains: A → B → A is harmless while no built-in chain reaches it, and ELOOP once one does.
    let mut t = Table::default();
    t.new_chain("A").unwrap();
    t.new_chain("B").unwrap();
    t.append("A", rule(vec![], Target::Jump("B".into())))
        .unwrap();
    t.append("B", rule(vec![], Target::Goto("A".into())))
        .unwrap();
    assert!(
        !t.has_reachable_loop(),
        "no built-in chain reaches the loop"
    );
    t.append("POSTROUTING", rule(vec![], Target::Jump("A".into())))
        .unwrap();
    assert!(t.has_reachable_loop());
    let mut dag = Table::default();
    dag.new_chain("A").unwrap();
    dag.new_chain("B").unwrap();
    dag.append("A", rule(vec![], Target::Jump("B".into())))
        .unwrap();
    dag.append("PREROUTING", rule(vec![], Target::Jump("A".into())))
        .unwrap();
    dag.append("PREROUTING", rule(vec![], Target::Jump("B".into())))
        .unwrap();
    assert!(
        !dag.has_reachable_loop(),
        "two paths to one chain are not a loop"
    );
    // Self-jumps, as this kernel judged them (iptables-legacy 1.8.9): a chain whose only rule is
    // `-j itself` passes; a conditional or later self-jump is a loop.
    let mut selfj = Table::default();
    selfj.new_chain("X").unwrap();
    selfj
        .append("X", rule(vec![], Target::Jump("X".into())))
        .unwrap();
    selfj
        .append("FORWARD", rule(vec![], Target::Jump("X".into())))
        .unwrap();
    assert!(!selfj.has_reachable_loop());
    selfj
        .append("X", rule(vec![], Target::Jump("X".into())))
        .unwrap();
    assert!(
        selfj.has_reachable_loop(),
        "a second, later self-jump is a loop"
    );
}
