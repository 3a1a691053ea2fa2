//! Scripts from the field, unmodified (issue 10): the tc, ip and iptables calls that today's shaping
//! tools make, one typical configuration each, in their order (`tests/fixtures/field/*.sh`; each file's
//! header names the tool's repository, commit, file and function, and the configuration). Every fixture
//! runs under `tclab script run --strict` against a scratch store in which the host's devices already
//! exist, must apply whole (exit 0: nothing refused but deletions of what was not there yet), and must
//! then show what tc 6.1 shows on a kernel. The expected lines were checked against this machine's kernel
//! where it has the disciplines (htb, tbf, mq, ingress, u32, mirred, ifb); the others (fq_codel, cake,
//! netem, sfq, prio, hfsc, fw) follow iproute2 6.1's printers, as the tdc cases already hold them.
//! One difference is normalised: tc 6.1 prints a u32 key's `flowid` as `*flowid` (its regression).

mod common;

use common::{fixture, tclab, text, TempDir};
use std::path::PathBuf;

/// A store after a fixture applied whole.
struct Applied {
    _dir: TempDir,
    state: PathBuf,
    report: String,
}

/// Create `devices` (each `NAME [numtxqueues N]`, as `tclab link add dev` takes them), then run the
/// fixture with `--strict`; it must exit 0.
fn apply(name: &str, devices: &[&str], args: &[&str]) -> Applied {
    let dir = TempDir::new("field");
    let state = dir.path.join("policy.json");
    for d in devices {
        let mut argv = vec!["link", "add", "dev"];
        argv.extend(d.split_whitespace());
        let o = tclab(&state, &argv);
        assert!(
            o.status.success(),
            "link add dev {d}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let path = fixture(&format!("field/{name}"));
    let mut argv = vec!["script", "run", "--strict", path.as_str()];
    argv.extend(args);
    let run = tclab(&state, &argv);
    let report = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        run.status.success(),
        "{name} does not apply whole:\n{report}"
    );
    Applied {
        _dir: dir,
        state,
        report,
    }
}

impl Applied {
    /// `tclab tc ARGS` must print each of `want` as a whole line (trailing spaces as tc prints them).
    fn shows(&self, args: &[&str], want: &[&str]) {
        let mut argv = vec!["tc"];
        argv.extend(args);
        let out = text(&tclab(&self.state, &argv));
        for w in want {
            assert!(
                out.lines().any(|l| l == *w),
                "`tc {}` lacks the line {w:?}:\n{out}",
                args.join(" ")
            );
        }
    }

    fn lacks(&self, args: &[&str], unwanted: &str) {
        let mut argv = vec!["tc"];
        argv.extend(args);
        let out = text(&tclab(&self.state, &argv));
        assert!(
            !out.contains(unwanted),
            "`tc {}` shows {unwanted:?}:\n{out}",
            args.join(" ")
        );
    }

    fn reported(&self, summary: &str) {
        assert!(self.report.contains(summary), "{}", self.report);
    }
}

const MIRRED_IFB4ETH0: &str =
    "\taction order 1: mirred (Egress Redirect to device ifb4eth0) stolen";

#[test]
fn sqm_simple_qos() {
    // sqm-scripts simple.qos, 9.5/95 Mbit/s cable line (stab ethernet, overhead 18, mpu 64): three HTB
    // tiers with fq_codel leaves, fw filters on iptables marks, ingress through ifb4eth0.
    let a = apply("sqm_simple.sh", &["eth0"], &[]);
    a.reported(
        "49 commands applied, 14 refused (14 of them a deletion of something that was not there)",
    );
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x12 direct_packets_stat 0 direct_qlen 1000",
        "qdisc fq_codel 110: parent 1:11 limit 1001p flows 1024 quantum 300 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
        "qdisc ingress ffff: parent ffff:fff1 ---------------- ",
    ]);
    a.shows(
        &["-d", "qdisc", "show", "dev", "eth0"],
        &[" linklayer ethernet overhead 18 mpu 64 mtu 2047 tsize 512 "],
    );
    a.shows(&["class", "show", "dev", "eth0"], &[
        "class htb 1:1 root rate 9500Kbit ceil 9500Kbit burst 1748b cburst 1748b ",
        "class htb 1:11 parent 1:1 leaf 110: prio 1 rate 128Kbit ceil 3166Kbit burst 1600b cburst 1599b ",
        "class htb 1:12 parent 1:1 leaf 120: prio 2 rate 1583Kbit ceil 9484Kbit burst 1748b cburst 1747b ",
    ]);
    a.shows(&["filter", "show", "dev", "eth0"], &[
        "filter parent 1: protocol ip pref 1 fw chain 0 handle 0x1/0xff classid 1:11 ",
        "filter parent 1: protocol arp pref 7 fw chain 0 handle 0x1/0xff classid 1:11 ",
        "filter parent 1: protocol ipv6 pref 9 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 flowid 1:13 not_in_hw ",
        "filter parent 1: protocol all pref 999 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1:12 not_in_hw ",
    ]);
    a.shows(
        &["filter", "show", "dev", "eth0", "parent", "ffff:"],
        &[MIRRED_IFB4ETH0],
    );
    a.shows(&["class", "show", "dev", "ifb4eth0"], &[
        "class htb 1:10 parent 1:1 leaf 110: prio 0 rate 95Mbit ceil 95Mbit burst 11875b cburst 11875b ",
    ]);
    a.shows(&["qdisc", "show", "dev", "ifb4eth0"], &[
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 32",
        "qdisc fq_codel 110: parent 1:10 limit 1001p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
    ]);
    let rules = text(&tclab(&a.state, &["iptables", "-t", "mangle", "-S"]));
    for want in [
        "-A PREROUTING -i eth0 -m dscp ! --dscp 0x00 -j DSCP --set-dscp 0x00",
        "-A POSTROUTING -o eth0 -m mark --mark 0x0/0xff -g QOS_MARK_eth0",
        "-A QOS_MARK_eth0 -m dscp --dscp 0x08 -j MARK --set-xmark 0x3/0xff",
    ] {
        assert!(
            rules.lines().any(|l| l == want),
            "iptables -S lacks {want:?}:\n{rules}"
        );
    }
    a.lacks(&["qdisc", "show"], "SQM_IFB");
}

#[test]
fn sqm_simplest_qos() {
    // sqm-scripts simplest.qos on the same line: one HTB class and an fq_codel leaf each way.
    let a = apply("sqm_simplest.sh", &["eth0"], &[]);
    a.reported(
        "24 commands applied, 3 refused (3 of them a deletion of something that was not there)",
    );
    a.shows(&["class", "show", "dev", "eth0"], &[
        "class htb 1:10 parent 1:1 leaf 110: prio 0 rate 9500Kbit ceil 9500Kbit burst 1748b cburst 1748b ",
    ]);
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc fq_codel 110: parent 1:10 limit 1001p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
    ]);
    a.shows(
        &["class", "show", "dev", "ifb4eth0"],
        &["class htb 1:1 root rate 95Mbit ceil 95Mbit burst 11875b cburst 11875b "],
    );
    a.shows(
        &["filter", "show", "dev", "eth0", "parent", "ffff:"],
        &[MIRRED_IFB4ETH0],
    );
}

#[test]
fn sqm_simplest_tbf_qos() {
    // sqm-scripts simplest_tbf.qos: TBF (latency 300ms) with an fq_codel child, each way.
    let a = apply("sqm_simplest_tbf.sh", &["eth0"], &[]);
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc tbf 1: root refcnt 2 rate 9500Kbit burst 1748b lat 300ms ",
        "qdisc fq_codel 110: parent 1: limit 1001p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
    ]);
    a.shows(
        &["qdisc", "show", "dev", "ifb4eth0"],
        &["qdisc tbf 1: root refcnt 2 rate 95Mbit burst 11863b lat 300ms "],
    );
    a.shows(
        &["class", "show", "dev", "eth0"],
        &["class tbf 1:1 parent 1: leaf 110: "],
    );
}

#[test]
fn sqm_piece_of_cake_qos() {
    // sqm-scripts piece_of_cake.qos: CAKE besteffort with overhead 18 mpu 64, wash on the ifb.
    let a = apply("sqm_piece_of_cake.sh", &["eth0"], &[]);
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc cake 8003: root refcnt 2 bandwidth 9500Kbit besteffort triple-isolate nat nowash no-ack-filter split-gso rtt 100ms noatm overhead 18 mpu 64 ",
    ]);
    a.shows(&["qdisc", "show", "dev", "ifb4eth0"], &[
        "qdisc cake 8004: root refcnt 2 bandwidth 95Mbit besteffort triple-isolate nat wash no-ack-filter split-gso rtt 100ms noatm overhead 18 mpu 64 ",
    ]);
}

#[test]
fn wondershaper_down_1024_up_512() {
    // wondershaper -a eth0 -d 1024 -u 512: HTB + SFQ + u32 up, ifb0 (modprobe ifb numifbs=1) down.
    let a = apply("wondershaper.sh", &["eth0"], &[]);
    a.reported("19 commands applied, 0 refused");
    a.shows(&["class", "show", "dev", "eth0"], &[
        "class htb 1:1 root rate 512Kbit ceil 512Kbit burst 1600b cburst 1600b ",
        "class htb 1:30 parent 1:1 leaf 30: prio 3 rate 102Kbit ceil 460Kbit burst 1599b cburst 1599b ",
    ]);
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc sfq 10: parent 1:10 limit 127p quantum 6000b depth 127 divisor 1024 perturb 10sec ",
    ]);
    a.shows(&["filter", "show", "dev", "eth0"], &[
        "filter parent 1: protocol ip pref 12 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 flowid 1:10 not_in_hw ",
        "  match 00060000/00ff0000 at 8",
        "  match 05000000/0f00ffc0 at 0",
    ]);
    a.shows(&["filter", "show", "dev", "eth0", "parent", "ffff:"], &[
        "filter protocol ip pref 49152 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 terminal flowid not_in_hw ",
        "\taction order 1: mirred (Egress Redirect to device ifb0) stolen",
    ]);
    a.shows(
        &["class", "show", "dev", "ifb0"],
        &["class htb 2:1 root prio 0 rate 1024Kbit ceil 1024Kbit burst 1599b cburst 1599b "],
    );
}

#[test]
fn tcconfig_tcset_rate_delay_loss_both_directions() {
    // tcset eth0 --rate 10Mbps --delay 50ms --delay-distro 10ms --loss 0.5%, then --direction incoming
    // --rate 20Mbps --delay 20ms: htb 1a1a: with a netem leaf, filters, ifb6682 for the incoming side.
    let a = apply("tcconfig_tcset.sh", &["eth0"], &[]);
    a.reported("16 commands applied, 0 refused");
    assert!(a
        .report
        .contains("Warning: sch_htb: quantum of class 1A1A0001 is big. Consider r2q change."));
    a.shows(&["qdisc", "show", "dev", "eth0"], &[
        "qdisc htb 1a1a: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000",
        "qdisc netem 2e06: parent 1a1a:28 limit 1000 delay 50ms  10ms loss 0.5%",
    ]);
    a.shows(&["class", "show", "dev", "eth0"], &[
        "class htb 1a1a:1 root prio 0 rate 1Gbit ceil 1Gbit burst 1375b cburst 1375b ",
        "class htb 1a1a:28 root leaf 2e06: prio 0 rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b ",
    ]);
    a.shows(&["filter", "show", "dev", "eth0"], &[
        "filter parent 1a1a: protocol ip pref 5 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1a1a:28 not_in_hw ",
        "  match 00000000/00000000 at 16",
        "  match 00000000/00000000 at 12",
    ]);
    a.shows(&["filter", "show", "dev", "eth0", "parent", "ffff:"], &[
        "filter protocol ip pref 49152 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1a1a: not_in_hw ",
        "\taction order 1: mirred (Egress Redirect to device ifb6682) stolen",
    ]);
    a.shows(&["class", "show", "dev", "ifb6682"], &[
        "class htb 1a1a:1 root prio 0 rate 32Gbit ceil 32Gbit burst 0b cburst 0b ",
        "class htb 1a1a:118 root leaf 2065: prio 0 rate 20Mbit ceil 20Mbit burst 1600b cburst 1600b ",
    ]);
    a.shows(
        &["qdisc", "show", "dev", "ifb6682"],
        &["qdisc netem 2065: parent 1a1a:118 limit 1000 delay 20ms"],
    );
}

#[test]
fn mininet_tclink_htb_tbf_hfsc_with_netem() {
    // mininet TCLink: bw=10 delay 5ms jitter 1ms loss 1 max_queue_size 1000 (HTB), bw=5 delay 10ms
    // use_tbf, bw=20 loss 2 use_hfsc; netem under class 5:1 each time, both ends of each link.
    let devs = [
        "h1-eth0", "s1-eth1", "h2-eth0", "s1-eth2", "h3-eth0", "s1-eth3",
    ];
    let a = apply("mininet_tclink.sh", &devs, &[]);
    // 16 tc commands and, since ethtool calls go to the engine (bacdb4d), the 6 `ethtool -K DEV gro off
    // tx on rx on` lines (one per interface): gro and rx, which tclab does not model, are noted.
    a.reported("22 commands applied, 0 refused");
    for d in ["h1-eth0", "s1-eth1"] {
        a.shows(
            &["qdisc", "show", "dev", d],
            &["qdisc netem 10: parent 5:1 limit 1000 delay 5ms  1ms loss 1%"],
        );
        a.shows(&["class", "show", "dev", d], &[
            "class htb 5:1 root leaf 10: prio 0 rate 10Mbit ceil 10Mbit burst 15Kb cburst 1600b ",
        ]);
    }
    a.shows(
        &["qdisc", "show", "dev", "h2-eth0"],
        &[
            "qdisc tbf 5: root refcnt 2 rate 5Mbit burst 15000b lat 24ms ",
            "qdisc netem 10: parent 5:1 limit 1000 delay 10ms",
        ],
    );
    a.shows(
        &["class", "show", "dev", "h2-eth0"],
        &["class tbf 5:1 parent 5: leaf 10: "],
    );
    a.shows(
        &["qdisc", "show", "dev", "s1-eth3"],
        &[
            "qdisc hfsc 5: root refcnt 2 default 1 ",
            "qdisc netem 10: parent 5:1 limit 1000 loss 2%",
        ],
    );
    a.shows(&["class", "show", "dev", "s1-eth3"], &[
        "class hfsc 5:1 parent 5: leaf 10: sc m1 0bit d 0us m2 20Mbit ul m1 0bit d 0us m2 20Mbit ",
    ]);
}

#[test]
fn cni_bandwidth_plugin_ingress_and_egress() {
    // Kubernetes pod with ingress-bandwidth and egress-bandwidth 10M: TBF on the host veth, TBF on the
    // plugin's ifb, fed by an ingress u32 filter with two mirred redirects.
    let a = apply("cni_bandwidth.sh", &["veth5f3c2a1b"], &[]);
    a.reported("5 commands applied, 0 refused");
    a.shows(
        &["qdisc", "show", "dev", "veth5f3c2a1b"],
        &[
            "qdisc tbf 1: root refcnt 2 rate 10Mbit burst 256Mb lat 25ms ",
            "qdisc ingress ffff: parent ffff:fff1 ---------------- ",
        ],
    );
    a.shows(
        &["qdisc", "show", "dev", "bwp9d4e7c2a61f"],
        &["qdisc tbf 1: root refcnt 2 rate 10Mbit burst 256Mb lat 25ms "],
    );
    a.shows(&["filter", "show", "dev", "veth5f3c2a1b", "parent", "ffff:"], &[
        "filter protocol all pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1:1 not_in_hw ",
        "\taction order 1: mirred (Egress Redirect to device bwp9d4e7c2a61f) stolen",
        "\taction order 2: mirred (Egress Redirect to device bwp9d4e7c2a61f) stolen",
    ]);
    let links = text(&tclab(&a.state, &["link", "show"]));
    assert!(links.contains("bwp9d4e7c2a61f"), "{links}");
}

#[test]
fn pumba_netem_delay_to_a_target_then_loss() {
    // pumba netem --target 10.0.0.5 delay --time 100 --jitter 20 --correlation 25 --distribution normal:
    // prio + sfq + netem on band 3 + u32; then its stop commands and a root "netem loss 5.00 10.00".
    let a = apply("pumba_netem.sh", &["eth0"], &[]);
    a.reported("5 commands applied, 0 refused");
    a.shows(
        &["qdisc", "show", "dev", "eth0"],
        &[
            "qdisc prio 1: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
            "qdisc netem 30: parent 1:3 limit 1000 delay 100ms  20ms 25%",
            "qdisc sfq 10: parent 1:1 limit 127p quantum 1514b depth 127 divisor 1024 ",
        ],
    );
    a.shows(&["filter", "show", "dev", "eth0"], &[
        "filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1:3 not_in_hw ",
        "  match 0a000005/ffffffff at 16",
    ]);
    let b = apply("pumba_netem.sh", &["eth0"], &["stop"]);
    b.reported("10 commands applied, 0 refused");
    b.shows(
        &["qdisc", "show", "dev", "eth0"],
        &["qdisc netem 8001: root refcnt 2 limit 1000 loss 5% 10%"],
    );
    b.lacks(&["qdisc", "show", "dev", "eth0"], "prio");
}

#[test]
fn libreqos_mq_htb_per_queue_cake_and_fq_codel_leaves() {
    // LibreQoS bakery, two 1 Gbit/s interfaces of two queues each: mq root 7FFF:, an HTB per queue, a
    // site and two circuits, every handle written 0x…, run as "/sbin/tc -f -batch".
    let a = apply(
        "libreqos.sh",
        &["eth1 numtxqueues 2", "eth2 numtxqueues 2"],
        &[],
    );
    a.reported("2 commands applied, 0 refused");
    a.shows(&["qdisc", "show", "dev", "eth1"], &[
        "qdisc mq 7fff: root ",
        "qdisc htb 1: parent 7fff:1 r2q 10 default 0x2 direct_packets_stat 0 direct_qlen 1000",
        "qdisc cake 9001: parent 1:5 bandwidth unlimited diffserv4 triple-isolate nonat nowash no-ack-filter split-gso rtt 120ms raw overhead 0 ",
        "qdisc cake 2003: parent 1:2 bandwidth unlimited diffserv4 triple-isolate nonat nowash no-ack-filter split-gso rtt 100ms raw overhead 0 ",
    ]);
    // 0x1:1 became an inner class when 0x1:2 was added under it: its CAKE 2002: is gone.
    a.lacks(&["qdisc", "show", "dev", "eth1"], "cake 2002:");
    a.shows(&["class", "show", "dev", "eth1"], &[
        "class mq 7fff:1 root leaf 1: ",
        "class htb 1:1 root rate 1Gbit ceil 1Gbit burst 1375b cburst 1375b ",
        "class htb 1:2 parent 1:1 leaf 2003: prio 5 rate 249Mbit ceil 999Mbit burst 1556b cburst 1373b ",
        "class htb 1:3 parent 1:1 rate 100Mbit ceil 1Gbit burst 1600b cburst 1375b ",
        "class htb 1:4 parent 1:3 leaf 9000: prio 3 rate 25Mbit ceil 100Mbit burst 1600b cburst 1600b ",
    ]);
    a.shows(&["qdisc", "show", "dev", "eth2"], &[
        "qdisc fq_codel 9001: parent 1:5 limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
    ]);
    a.shows(&["class", "show", "dev", "eth2"], &[
        "class htb 1:5 parent 1:3 leaf 9001: prio 3 rate 500Kbit ceil 1Mbit burst 1600b cburst 1600b ",
    ]);
}

#[test]
fn openwrt_qos_scripts_hfsc_fq_codel_ifb_and_mangle_chains() {
    // OpenWrt qos-scripts, its default /etc/config/qos on eth1 (128 kbit/s up, 1024 kbit/s down): HFSC
    // classes whose rt/ls curves tcrules.awk computes, fq_codel leaves, fw filters on the mark's two
    // nibbles, ingress through ifb0 (which `modprobe ifb numifbs=1` creates), and the mangle chains.
    let a = apply("openwrt_qos_scripts.sh", &["eth1"], &[]);
    a.reported(
        "67 commands applied, 3 refused (3 of them a deletion of something that was not there)",
    );
    for (dev, curves) in [
        (
            "eth1",
            [
                "class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 128Kbit ul m1 0bit d 0us m2 128Kbit ",
                "class hfsc 1:10 parent 1:1 leaf 100: rt m1 74Kbit d 6.1ms m2 12Kbit ls m1 74Kbit d 6.1ms m2 71Kbit ul m1 0bit d 0us m2 128Kbit ",
                "class hfsc 1:40 parent 1:1 leaf 400: ls m1 0bit d 200ms m2 3Kbit ul m1 0bit d 0us m2 128Kbit ",
            ],
        ),
        (
            "ifb0",
            [
                "class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 1024Kbit ul m1 0bit d 0us m2 1024Kbit ",
                "class hfsc 1:20 parent 1:1 leaf 200: rt m1 533Kbit d 1.91ms m2 512Kbit ls m1 533Kbit d 1.91ms m2 284Kbit ul m1 0bit d 0us m2 1024Kbit ",
                "class hfsc 1:30 parent 1:1 leaf 300: ls m1 0bit d 100ms m2 142Kbit ul m1 0bit d 0us m2 1024Kbit ",
            ],
        ),
    ] {
        a.shows(&["qdisc", "show", "dev", dev], &[
            "qdisc hfsc 1: root refcnt 2 default 30 ",
            "qdisc fq_codel 300: parent 1:30 limit 800p flows 1024 quantum 300 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 ",
        ]);
        a.shows(&["class", "show", "dev", dev], &curves);
    }
    // Upload marks in the high nibble first, download in the low one (tcrules.awk's direction).
    a.shows(
        &["filter", "show", "dev", "eth1"],
        &[
            "filter parent 1: protocol ip pref 2 fw chain 0 handle 0x10/0xf0 classid 1:10 ",
            "filter parent 1: protocol ip pref 9 fw chain 0 handle 0x4/0xf classid 1:40 ",
        ],
    );
    a.shows(
        &["filter", "show", "dev", "ifb0"],
        &["filter parent 1: protocol ip pref 2 fw chain 0 handle 0x1/0xf classid 1:10 "],
    );
    a.shows(&["filter", "show", "dev", "eth1", "parent", "ffff:"], &[
        "filter protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid 1:1 not_in_hw ",
        "\taction order 1: connmark zone 0 pipe",
        "\taction order 2: mirred (Egress Redirect to device ifb0) stolen",
    ]);
    // The mangle table as this machine's iptables 1.8 prints the same commands (checked in a network
    // namespace: identical, line for line).
    let rules = text(&tclab(&a.state, &["iptables", "-t", "mangle", "-S"]));
    for want in [
        "-A OUTPUT -o eth1 -j qos_Default",
        "-A qos_Default -j CONNMARK --restore-mark --nfmask 0xf --ctmask 0xf",
        "-A qos_Default -p udp -m mark --mark 0x0/0xf0 -m length --length 0:500 -j MARK --set-xmark 0x22/0xff",
        "-A qos_Default -p tcp -m length --length 0:128 -m mark ! --mark 0x4/0xf -m tcp --tcp-flags FIN,SYN,RST,PSH,ACK,URG SYN -j MARK --set-xmark 0x11/0xff",
        "-A qos_Default_ct -p tcp -m mark --mark 0x0/0xf -m tcp -m multiport --ports 22,53 -m comment --comment \"ssh, dns\" -j MARK --set-xmark 0x11/0xff",
        "-A qos_Default_ct -j CONNMARK --save-mark --nfmask 0xff --ctmask 0xff",
    ] {
        assert!(
            rules.lines().any(|l| l == want),
            "iptables -S lacks {want:?}:\n{rules}"
        );
    }
    let links = text(&tclab(&a.state, &["link", "show"]));
    assert!(
        // `ifconfig ifb0 up txqueuelen 5` brought it up (a down ifb would drop what is redirected).
        links.contains("ifb0: mtu 1500 qdisc hfsc state UP qlen 5") && !links.contains("ifb1"),
        "{links}"
    );
}

#[test]
fn libvirt_interface_bandwidth_htb_sfq_fw_and_ingress_police() {
    // libvirt, a guest's vnet0 with inbound 1000/5000 KiB/s burst 1024 KiB, outbound 128 KiB/s: HTB 1:1
    // with libvirt's quantum, SFQ leaf, fw filter, ingress u32 policer. The HTB class line and both
    // deletions' errors are this machine's kernel's (checked in a namespace; it has no sfq, fw or police).
    let a = apply("libvirt_bandwidth.sh", &["vnet0"], &[]);
    a.reported(
        "6 commands applied, 2 refused (2 of them a deletion of something that was not there)",
    );
    a.shows(&["qdisc", "show", "dev", "vnet0"], &[
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000",
        "qdisc sfq 2: parent 1:1 limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec ",
    ]);
    a.shows(
        &["class", "show", "dev", "vnet0"],
        &["class htb 1:1 root leaf 2: prio 0 rate 8Mbit ceil 40Mbit burst 1Mb cburst 1600b "],
    );
    a.shows(
        &["filter", "show", "dev", "vnet0"],
        &["filter parent 1: protocol all pref 1 fw chain 0 handle 0x1 classid :1 "],
    );
    a.shows(&["filter", "show", "dev", "vnet0", "parent", "ffff:"], &[
        "filter protocol all pref 49152 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid :1 not_in_hw ",
        " police 0x1 rate 1024Kbit burst 256Kb mtu 64Kb action drop overhead 0b ",
    ]);
}

#[test]
fn proxmox_tap_rate_limit_htb_and_ingress_basic_police() {
    // Proxmox VE, VM 100's NIC with rate=10 (MB/s): HTB 1:1 at 10485760 bytes/s and an ingress basic
    // filter policing at the same rate. The class line, the HTB quantum warning and the four failed
    // deletions are this machine's kernel's, word for word (it has no basic classifier).
    let a = apply("proxmox_tap_rate.sh", &["tap100i0"], &[]);
    a.reported(
        "4 commands applied, 4 refused (4 of them a deletion of something that was not there)",
    );
    a.reported("Error: Parent Qdisc doesn't exists.");
    a.shows(
        &["class", "show", "dev", "tap100i0"],
        &["class htb 1:1 root prio 0 rate 83886Kbit ceil 83886Kbit burst 1Mb cburst 1593b "],
    );
    a.shows(
        &["filter", "show", "dev", "tap100i0", "parent", "ffff:"],
        &[
            "filter protocol all pref 50 basic chain 0 handle 0x1 ",
            " police 0x1 rate 83886Kbit burst 1Mb mtu 64Kb action drop overhead 0b ",
        ],
    );
}
