//! The `flow` and `basic` classifiers and the `connmark` action with hand-built packets, configured by tc
//! lines (seed 003's own for flow on SFQ). Expected classids are worked out by hand from cls_flow.c's
//! formulas (`TC_H_MAKE(base, base + n)`, map mode `((key & mask) ^ xor) >> rshift) + addend`), and match
//! results from the ematch rules (em_cmp.c, em_u32.c, em_meta.c, ematch.c); each test says how.

use tclab_core::filter::flow::jhash2;
use tclab_core::filter::{classify, Classifier, Verdict};
use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Handle, Packet};

/// Words of a command line, with '…' quoting as a shell would.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for ch in line.chars() {
        match ch {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn tc(e: &mut Engine, line: &str) {
    let out = tclab_tc::run(e, &words(line), 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

fn tc_out(e: &mut Engine, line: &str) -> tclab_tc::Output {
    tclab_tc::run(e, &words(line), 0)
}

/// An IPv4 packet from `src` to `dst` with protocol `proto` and ports (TCP/UDP header bytes present).
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Packet {
    let mut d = vec![0u8; 40];
    d[0] = 0x45;
    d[2..4].copy_from_slice(&40u16.to_be_bytes());
    d[8] = 64;
    d[9] = proto;
    d[12..16].copy_from_slice(&src);
    d[16..20].copy_from_slice(&dst);
    d[20..22].copy_from_slice(&sport.to_be_bytes());
    d[22..24].copy_from_slice(&dport.to_be_bytes());
    Packet {
        data: d,
        len: 54,
        protocol: 0x0800,
        ..Default::default()
    }
}

/// Classify with the block at `parent` of eth0, at time `now`.
fn verdict_at(e: &mut Engine, parent: u32, pkt: &Packet, now: u64) -> Verdict {
    let (block, _) = e.filter_block("eth0", Handle(parent)).unwrap().unwrap();
    let mut p = pkt.clone();
    classify(block, &mut p, &mut tclab_core::qdisc::Cx::new(now))
}

fn classid(e: &mut Engine, parent: u32, pkt: &Packet) -> Option<u32> {
    match verdict_at(e, parent, pkt, 0) {
        Verdict::Classified { classid, .. } => Some(classid),
        _ => None,
    }
}

/// The `hashrnd` of the first flow filter of the block at `parent`.
fn hashrnd(e: &mut Engine, parent: u32) -> u32 {
    let (block, _) = e.filter_block("eth0", Handle(parent)).unwrap().unwrap();
    let tp = block.tps().next().unwrap();
    let Classifier::Flow(f) = &tp.cls else {
        panic!("not flow")
    };
    f.filters[0].hashrnd()
}

/// Seed 003: "tc qdisc add dev eth0 root handle 1: sfq perturb 10 quantum 3000 limit 64" and "tc filter add
/// dev eth0 parent 1:0 protocol ip handle 1 flow hash keys src,dst divisor 1024", exactly.
fn seed003() -> Engine {
    let mut e = Engine::new();
    tc(
        &mut e,
        "qdisc add dev eth0 root handle 1: sfq perturb 10 quantum 3000 limit 64",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1:0 protocol ip handle 1 flow hash keys src,dst divisor 1024",
    );
    e
}

#[test]
fn seed003_flow_hash_of_addresses_picks_sfq_buckets() {
    let mut e = seed003();
    let rnd = hashrnd(&mut e, 0x10000);
    // The baseclass defaults to minor 1 of the qdisc (1:1); classid = 1:(1 + jhash2([src, dst]) % 1024).
    let a = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 40000, 22);
    let want = 0x10000 | (1 + jhash2(&[0x0a00_0001, 0xc000_0207], rnd) % 1024);
    assert_eq!(classid(&mut e, 0x10000, &a), Some(want));
    // Only addresses are keys: other ports and protocol, same bucket.
    let b = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 17, 5353, 53);
    assert_eq!(classid(&mut e, 0x10000, &b), Some(want));
    // 200 hosts spread over the 1024 buckets: about 1024 × (1 − (1023/1024)^200) ≈ 182 distinct ones are
    // expected; fewer than 150 would mean the hash does not spread.
    let mut seen = std::collections::BTreeSet::new();
    for h in 0..200u8 {
        let p = ipv4([10, 0, 1, h], [192, 0, 2, 7], 6, 40000, 22);
        let c = classid(&mut e, 0x10000, &p).unwrap();
        assert_eq!(c >> 16, 1);
        assert!((1..=1024).contains(&(c & 0xffff)), "bucket {c:#x}");
        seen.insert(c);
    }
    assert!(
        seen.len() > 150,
        "only {} buckets for 200 hosts",
        seen.len()
    );
    // The SFQ takes the packets (its classify reads the minor as the bucket): none is dropped.
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    for h in 0..10u8 {
        dev.enqueue(ipv4([10, 0, 2, h], [192, 0, 2, 7], 6, 1, 2), &mut cx);
    }
    let q = dev.root_mut();
    assert_eq!(q.q.stats().qlen, 10);
    assert_eq!(q.q.stats().drops, 0);
}

#[test]
fn five_tuple_hash_equal_tuples_equal_classes() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 root handle 1: sfq");
    tc(
        &mut e,
        "filter add dev eth0 parent 1:0 protocol ip handle 1 flow hash keys src,dst,proto,proto-src,proto-dst divisor 1024",
    );
    let rnd = hashrnd(&mut e, 0x10000);
    let p = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 40000, 22);
    // Keys in bit order: src, dst, proto, proto-src, proto-dst.
    let want = 0x10000 | (1 + jhash2(&[0x0a00_0001, 0xc000_0207, 6, 40000, 22], rnd) % 1024);
    assert_eq!(classid(&mut e, 0x10000, &p), Some(want));
    assert_eq!(classid(&mut e, 0x10000, &p.clone()), Some(want));
    // Flows differing only in the source port spread.
    let mut seen = std::collections::BTreeSet::new();
    for port in 0..100u16 {
        let q = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 40000 + port, 22);
        seen.insert(classid(&mut e, 0x10000, &q).unwrap());
    }
    assert!(seen.len() > 80, "{} buckets for 100 ports", seen.len());
}

#[test]
fn perturb_redraws_the_secret_each_period_reproducibly() {
    let run = || {
        let mut e = Engine::new();
        tc(&mut e, "qdisc add dev eth0 root handle 1: sfq");
        tc(
            &mut e,
            "filter add dev eth0 parent 1:0 protocol ip handle 1 flow hash keys src,dst divisor 1024 perturb 10",
        );
        let p = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 1, 2);
        let mut secrets = Vec::new();
        for t in [0u64, 5, 9, 10, 15, 20, 45] {
            verdict_at(&mut e, 0x10000, &p, t * 1_000_000_000);
            secrets.push(hashrnd(&mut e, 0x10000));
        }
        secrets
    };
    let s = run();
    assert_eq!(s, run(), "the same run gives the same secrets");
    assert_eq!(s[0], s[1]);
    assert_eq!(s[1], s[2], "not before 10 s");
    assert_ne!(s[2], s[3], "re-drawn at 10 s");
    assert_eq!(s[3], s[4]);
    assert_ne!(s[4], s[5], "and at 20 s");
    assert_ne!(s[5], s[6], "and once more after several periods");
}

#[test]
fn flow_map_mode_arithmetic() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    let p = {
        let mut p = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 40000, 22);
        p.mark = 5;
        p
    };
    // (filter options, expected classid); the ingress qdisc is ffff:, so the baseclass is ffff:1.
    let cases: &[(&str, u32)] = &[
        // dst & 0xff = 7; ffff:(1 + 7).
        ("map key dst and 0xff", 0xffff_0008),
        // (dst & ~0xff) ^ 0xff = 0xc00002ff; minor (1 + 0xc00002ff) & 0xffff = 0x0300.
        ("map key dst or 0xff", 0xffff_0300),
        // dst >> 24 = 0xc0; + 1.
        ("map key dst rshift 24", 0xffff_00c1),
        // mark 5 + addend 0x10 = 0x15; + 1.
        ("map key mark addend 0x10", 0xffff_0016),
        // destination port 22; + 1.
        ("map key proto-dst", 0xffff_0017),
        // 22 % 16 = 6 on baseclass 1:10: 1:16.
        ("map key proto-dst divisor 16 baseclass 1:10", 0x0001_0016),
        // xor 0xf: 7 ^ 0xf = 8 after `and 0xff`; + 1.
        ("map key dst and 0xff xor 0xf", 0xffff_0009),
        // an address as addend: dst − 192.0.2.0 = 7; + 1.
        ("map key dst addend -192.0.2.0", 0xffff_0008),
    ];
    for (i, (opts, want)) in cases.iter().enumerate() {
        let prio = i + 1;
        tc(
            &mut e,
            &format!(
                "filter add dev eth0 parent ffff: prio {prio} protocol ip handle 1 flow {opts}"
            ),
        );
        let got = classid(&mut e, 0xffff_0000, &p);
        assert_eq!(got, Some(*want), "{opts}: got {got:x?}");
        tc(
            &mut e,
            &format!("filter del dev eth0 parent ffff: prio {prio}"),
        );
    }
}

#[test]
fn basic_ematches_select_packets() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    let tcp = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 40000, 22);
    let udp = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 17, 5353, 53);
    let icmp = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 1, 0, 0);
    let mut tcp6 = tcp.clone();
    tcp6.priority = 6;
    let mut udp6 = udp.clone();
    udp6.priority = 6;
    // (expression, [tcp, udp, icmp, tcp prio 6, udp prio 6]).
    let cases: &[(&str, [bool; 5])] = &[
        // Byte 9 of the IP header is the protocol.
        ("cmp(u8 at 9 layer network eq 6)", [true, false, false, true, false]),
        ("meta(priority eq 6)", [false, false, false, true, true]),
        (
            "cmp(u8 at 9 layer network eq 6) and not meta(priority eq 6)",
            [true, false, false, false, false],
        ),
        (
            "cmp(u8 at 9 layer network eq 17) or meta(priority eq 6)",
            [false, true, false, true, true],
        ),
        // Neither TCP nor UDP: ICMP only.
        (
            "not (cmp(u8 at 9 layer network eq 6) or cmp(u8 at 9 layer network eq 17))",
            [false, false, true, false, false],
        ),
        // No precedence: `a or b and c` is `a or (b and c)` (the sequence ends at the first true `or`).
        (
            "meta(priority eq 6) or cmp(u8 at 9 layer network eq 6) and cmp(u8 at 9 layer network eq 17)",
            [false, false, false, true, true],
        ),
        // The transport header follows the 20-byte IP header: destination port 22 at its byte 2.
        ("cmp(u16 at 2 layer transport eq 22)", [true, false, false, true, false]),
        // u32 key at 22 (u16, offset 2 in the word at 20): destination port 53.
        ("u32(u16 0x0035 0xffff at 22)", [false, true, false, false, true]),
        // skb->protocol as the kernel reads it on a little-endian host: 0x0800 is 8.
        ("meta(protocol eq 8)", [true, true, true, true, true]),
        // mask 0x4 on 0x45 = 4.
        ("cmp(u8 at 0 layer network mask 0x4 eq 4)", [true, true, true, true, true]),
        ("cmp(u8 at 9 layer network gt 6)", [false, true, false, false, true]),
    ];
    let pkts = [&tcp, &udp, &icmp, &tcp6, &udp6];
    for (expr, want) in cases {
        tc(
            &mut e,
            &format!("filter add dev eth0 parent ffff: prio 1 protocol ip basic match '{expr}' classid 1:10"),
        );
        for (p, w) in pkts.iter().zip(want) {
            let got = classid(&mut e, 0xffff_0000, p);
            assert_eq!(
                got.is_some(),
                *w,
                "{expr} on proto {} prio {}",
                p.data[9],
                p.priority
            );
            if let Some(c) = got {
                assert_eq!(c, 0x0001_0010);
            }
        }
        tc(&mut e, "filter del dev eth0 parent ffff: prio 1");
    }
}

#[test]
fn meta_mark_mask_and_shift() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    tc(
        &mut e,
        "filter add dev eth0 parent ffff: prio 1 protocol ip basic match 'meta(nf_mark mask 0xff eq 3) and meta(fwmark shift 8 eq 1)' classid 1:3",
    );
    let mut p = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 1, 2);
    p.mark = 0x103; // & 0xff = 3, >> 8 = 1
    assert_eq!(classid(&mut e, 0xffff_0000, &p), Some(0x10003));
    p.mark = 0x203;
    assert_eq!(classid(&mut e, 0xffff_0000, &p), None);
}

#[test]
fn malformed_packets_never_panic_and_short_reads_do_not_match() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    let exprs = [
        "cmp(u8 at 9 layer network eq 6)",
        "cmp(u32 at 60000 layer network lt 4294967295)",
        "cmp(u16 at 0 layer transport trans gt 0)",
        "cmp(u8 at 0 layer link eq 0)",
        "u32(u32 0 0 at -4)",
        "u32(u32 0 0 at 64)",
        // tc adopts the type of a quoted string only on the right: `"eth0" eq dev` compares names.
        "meta(pkt_len gt 0) and meta(\"eth0\" eq dev)",
        "meta(random lt 4294967295) and meta(rt_iif eq 0)",
        "canid(sff 0x1 eff 0x2:0xff)",
    ];
    for (i, x) in exprs.iter().enumerate() {
        tc(
            &mut e,
            &format!("filter add dev eth0 parent ffff: prio {} protocol all basic match '{x}' classid 1:1", i + 1),
        );
    }
    tc(
        &mut e,
        "filter add dev eth0 parent ffff: prio 100 protocol all handle 1 flow hash keys src,dst,proto,proto-src,proto-dst,iif,priority,mark,nfct,nfct-src,nfct-dst,nfct-proto-src,nfct-proto-dst,rt-classid,sk-uid,sk-gid,vlan-tag,rxhash divisor 8",
    );
    // Every length 0..=64 of an IPv4 header with a bad IHL, a good one, a fragment; non-IP; IPv6.
    let mut seed = 7u64;
    for len in 0..=64usize {
        for variant in 0..5 {
            let mut d: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            let protocol = match variant {
                0 => {
                    if let Some(b) = d.first_mut() {
                        *b = 0x43; // IHL 3
                    }
                    0x0800
                }
                1 => {
                    if let Some(b) = d.first_mut() {
                        *b = 0x4f; // IHL 15: 60 bytes
                    }
                    0x0800
                }
                2 => {
                    if d.len() > 7 {
                        d[0] = 0x45;
                        d[6] = 0x20; // MF
                    }
                    0x0800
                }
                3 => 0x0806,
                _ => 0x86dd,
            };
            let p = Packet {
                data: d,
                len: len as u32 + 14,
                protocol,
                ..Default::default()
            };
            let _ = verdict_at(&mut e, 0xffff_0000, &p, 0);
        }
    }
    // A 5-byte packet: byte 9 is not there, so `cmp(u8 at 9 …)` does not match (the kernel's
    // tcf_valid_offset), while its inversion does — a failed read is "false", not an error.
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    let short = Packet {
        data: vec![0x45, 0, 0, 5, 0],
        len: 19,
        protocol: 0x0800,
        ..Default::default()
    };
    tc(
        &mut e,
        "filter add dev eth0 parent ffff: prio 1 protocol ip basic match 'cmp(u8 at 9 layer network lt 255)' classid 1:1",
    );
    assert_eq!(classid(&mut e, 0xffff_0000, &short), None);
    tc(
        &mut e,
        "filter add dev eth0 parent ffff: prio 2 protocol ip basic match 'not cmp(u8 at 9 layer network lt 255)' classid 1:2",
    );
    assert_eq!(classid(&mut e, 0xffff_0000, &short), Some(0x10002));
}

#[test]
fn connmark_without_conntrack_leaves_the_mark() {
    // No conntrack entry exists in tclab's packet path: the kernel's act_connmark then changes nothing
    // and answers its control (pipe by default), so the filter's class stands.
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    tc(
        &mut e,
        "filter add dev eth0 parent ffff: prio 1 protocol ip basic classid 1:5 action connmark zone 3",
    );
    let mut p = ipv4([10, 0, 0, 1], [192, 0, 2, 7], 6, 1, 2);
    p.mark = 0x42;
    let (block, _) = e
        .filter_block("eth0", Handle(0xffff_0000))
        .unwrap()
        .unwrap();
    let mut q = p.clone();
    assert_eq!(
        classify(block, &mut q, &mut tclab_core::qdisc::Cx::new(0)),
        Verdict::Classified {
            classid: 0x10005,
            control: 3
        }
    );
    assert_eq!(q.mark, 0x42);
    let out = tc_out(&mut e, "-s actions get action connmark index 1");
    assert!(
        out.stdout.contains("connmark zone 3 pipe"),
        "{}",
        out.stdout
    );
}

#[test]
fn filter_show_prints_as_tc_6_1() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 root handle 1: sfq");
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 handle 1 flow hash keys src,dst divisor 1024 perturb 10",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 2 handle 2 flow map key dst or 0xff rshift 2 addend 3 baseclass 1:10",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 basic match 'cmp(u8 at 9 layer network eq 6) and not (meta(priority eq 6) or u32(u16 0x0016 0xffff at 22))' classid 1:2",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 3 basic match 'meta(nf_mark mask 0xff gt 2)' classid 1:3",
    );
    let out = tc_out(&mut e, "filter show dev eth0");
    assert_eq!(out.code, 0);
    // f_flow.c: "handle 0x%x ", "hash "/"map ", "keys a,b ", "and 0x%.8x " "or 0x%.8x " (or 0xff sends
    // mask 0xffffff00 and xor 0xff), "rshift %u ", "addend 0x%x ", "divisor %u ", "baseclass %s ",
    // "perturb %usec "; f_basic.c: "handle 0x%x ", "flowid %s ", then m_ematch.c's "\n  " and one line per
    // match, the relation word after the indentation, a container as "(\n    …  ) ". Basic filters are
    // listed newest first (handle 2, then 1).
    let want = "\
filter parent 1: protocol ip pref 1 flow chain 0 \n\
filter parent 1: protocol ip pref 1 flow chain 0 handle 0x1 hash keys src,dst divisor 1024 baseclass 1:1 perturb 10sec \n\
filter parent 1: protocol ip pref 2 flow chain 0 \n\
filter parent 1: protocol ip pref 2 flow chain 0 handle 0x2 map keys dst and 0xffffff00 or 0x000000ff rshift 2 addend 0x3 baseclass 1:10 \n\
filter parent 1: protocol ip pref 3 basic chain 0 \n\
filter parent 1: protocol ip pref 3 basic chain 0 handle 0x2 flowid 1:3 \n  meta(nf_mark mask 0x000000ff gt 2)\n\n\
filter parent 1: protocol ip pref 3 basic chain 0 handle 0x1 flowid 1:2 \n  cmp(u8 at 9 layer 1 eq 6)\n  AND NOT (\n    meta(priority eq 6)\n    OR u32(00000016/0000ffff at 20)\n  ) \n";
    assert_eq!(out.stdout, want);
}

#[test]
fn refused_configurations_leave_the_block_unchanged() {
    let mut e = Engine::new();
    tc(&mut e, "qdisc add dev eth0 ingress");
    // Kernel refusals (exit 2): a flow filter without handle, without keys, perturb in map mode.
    for bad in [
        "filter add dev eth0 parent ffff: prio 1 protocol ip flow map key dst",
        "filter add dev eth0 parent ffff: prio 1 protocol ip handle 1 flow map divisor 4",
        "filter add dev eth0 parent ffff: prio 1 protocol ip handle 1 flow map key dst perturb 10",
        "filter add dev eth0 parent ffff: prio 1 protocol ip handle 1 flow map key dst rshift 32",
    ] {
        let out = tc_out(&mut e, bad);
        assert_eq!(out.code, 2, "{bad}: {}", out.stderr);
    }
    // Parser refusals (exit 1): an expression at the end of the line, a bad u32 key.
    for bad in [
        "filter add dev eth0 parent ffff: prio 1 protocol ip basic match 'cmp(u8 at 9 layer network eq 6)'",
        "filter add dev eth0 parent ffff: prio 1 protocol ip basic match 'u32(u8 0x1122 0xff at 0)' classid 1:1",
        "filter add dev eth0 parent ffff: prio 1 protocol ip handle 1 flow map key src,dst",
    ] {
        let out = tc_out(&mut e, bad);
        assert_eq!(out.code, 1, "{bad}: {}", out.stderr);
    }
    assert_eq!(
        tc_out(&mut e, "filter show dev eth0 parent ffff:").stdout,
        ""
    );
}

#[test]
fn the_run_seed_redraws_flow_hash_secrets_reproducibly() {
    // Engine::seed_random (the simulator calls it with the run's seed) re-draws every flow filter's
    // hashrnd: one seed, one secret, whatever the order; another seed, another secret — so that two
    // simulations with one seed put flows in the same SFQ buckets and another seed mixes them anew.
    let mut e = seed003();
    e.seed_random(1);
    let a = hashrnd(&mut e, 0x10000);
    e.seed_random(2);
    let b = hashrnd(&mut e, 0x10000);
    e.seed_random(1);
    assert_eq!(hashrnd(&mut e, 0x10000), a, "seed 1 again, same secret");
    assert_ne!(a, b, "another seed, another secret");
    let mut fresh = seed003();
    fresh.seed_random(1);
    assert_eq!(
        hashrnd(&mut fresh, 0x10000),
        a,
        "a fresh engine seeded alike agrees"
    );
}
