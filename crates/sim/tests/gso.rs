//! GSO in the simulated hosts: TCP hands its qdisc super-packets (tcp_tso_autosize), the qdisc charges
//! and counts them as the kernel does (`qdisc_pkt_len` = the bytes of all their frames, `bstats` packets
//! = their segments), and the interface cuts them into MTU frames after the qdisc, so the wire, the
//! router and the receiver see ordinary frames. `gso_max_segs = 1` on the link turns it off (`ip link
//! set DEV gso_max_segs 1`); the receiver gets the same bytes either way.

use tclab_sim::apps::App;
use tclab_sim::run::run;
use tclab_sim::scenario::load;
use tclab_sim::trace::{parse_line, Trace};

mod common;
use common::Sink;

const LAB: &str = r#"
duration = "10s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "1gbit"
delay = "1ms"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "50mbit"
delay = "5ms"
[[policy]]
node = "r"
tc = """
qdisc add dev eth1 root handle 1: htb default 10
class add dev eth1 parent 1: classid 1:10 htb rate 40mbit
"""
[[traffic]]
kind = "tcp"
from = "a"
to = "b"
bytes = "5m"
"#;

struct Seen {
    delivered: u64,
    /// Lengths of the packets a's qdisc took (enqueue records of the trace).
    enqueued: Vec<u32>,
    /// a:eth0's root qdisc: bytes and packets sent (tc -s); the interface: bytes and frames sent.
    qdisc: (u64, u64),
    iface: (u64, u64),
    /// r:eth0's frames received and the largest enqueued at r:eth1 (what the router saw).
    router_rx: u64,
    router_max: u32,
    /// r:eth1's root qdisc: bytes and packets sent (tc -s).
    router_qdisc: (u64, u64),
    /// The receiver's segments in, and the sender's segments out.
    segs_in: u64,
    segs_out: u64,
    retransmits: u64,
}

fn run_lab(toml: &str) -> Seen {
    run_lab_in(toml, std::path::Path::new("."))
}

/// [`run_lab`] with the scenario's relative paths (a policy script) read from `base`.
fn run_lab_in(toml: &str, base: &std::path::Path) -> Seen {
    let mut sc = load("gso.toml", toml, base).unwrap_or_else(|e| panic!("{e}"));
    let sink = Sink::default();
    sc.net.trace = Some(Trace::text(Box::new(sink.clone())));
    let out = run(&mut sc, &mut |_| {}).expect("runs");
    sc.net.trace.as_mut().unwrap().finish().expect("written");
    let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
    let lines: Vec<_> = text.lines().filter_map(parse_line).collect();
    let enqueued = lines
        .iter()
        .filter(|l| l.dev == "a:eth0" && l.event.starts_with("enq"))
        .map(|l| l.len)
        .collect();
    let router_max = lines
        .iter()
        .filter(|l| l.dev == "r:eth1" && l.event.starts_with("enq"))
        .map(|l| l.len)
        .max()
        .unwrap_or(0);
    let a0 = sc.net.iface_by_name(0, "eth0").unwrap();
    let r0 = sc.net.iface_by_name(1, "eth0").unwrap();
    let r1 = sc.net.iface_by_name(1, "eth1").unwrap();
    let q = sc.net.device(a0).unwrap().root().q.stats();
    let rq = sc.net.device(r1).unwrap().root().q.stats();
    let c = sc.net.ifaces[a0].counters;
    let (mut segs_in, mut segs_out) = (0, 0);
    for app in &sc.net.apps {
        if let App::Tcp(t) = app {
            let s = t.stats();
            if s.data_segs_out == 0 {
                segs_in += s.segs_in;
            } else {
                segs_out += s.segs_out;
            }
        }
    }
    Seen {
        delivered: out.flows[0].delivered_bytes,
        enqueued,
        qdisc: (q.bytes, q.packets),
        iface: (c.tx_bytes, c.tx_packets),
        router_rx: sc.net.ifaces[r0].counters.rx_packets,
        router_max,
        router_qdisc: (rq.bytes, rq.packets),
        segs_in,
        segs_out,
        retransmits: out.flows[0].retransmits,
    }
}

#[test]
fn super_packets_in_the_senders_qdisc_frames_on_the_wire() {
    let on = run_lab(LAB);
    let off = run_lab(&LAB.replace("delay = \"1ms\"", "delay = \"1ms\"\ngso_max_segs = 1"));
    for (what, s) in [("on", &on), ("off", &off)] {
        // The receiver gets every byte either way.
        assert_eq!(s.delivered, 5 << 20, "GSO {what}");
        // The qdisc's counters are the wire's: bytes charged = bytes of the frames, packets counted =
        // frames (bstats_update counts gso_segs).
        assert_eq!(s.qdisc, s.iface, "GSO {what}: tc -s against the interface");
        // Frames only beyond the sender: the router's egress never sees more than a 1514-byte frame,
        // and it receives what a sent, frame for frame (no loss on these links).
        assert!(s.router_max <= 1514, "GSO {what}: {}", s.router_max);
        assert_eq!(s.router_rx, s.iface.1, "GSO {what}");
        // Every frame from a is one segment at b (no GRO): b's segments in are a's frames.
        assert_eq!(s.segs_in, s.iface.1, "GSO {what}");
        assert_eq!(s.segs_out, s.iface.1, "GSO {what}");
    }
    assert!(
        on.enqueued.iter().any(|&l| l > 1514),
        "super-packets with GSO"
    );
    assert!(
        off.enqueued.iter().all(|&l| l <= 1514),
        "none with gso_max_segs 1"
    );
    // With GSO the qdisc took fewer, larger packets for the same frames.
    assert!(on.enqueued.len() < on.iface.1 as usize);
    assert_eq!(off.enqueued.len() as u64, off.iface.1);
    // Segments, not skbs, are what TCP counts (tcp_skb_pcount): its segments out are a's frames.
    assert_eq!((on.retransmits, off.retransmits), (0, 0));
}

/// A veth pair passes a GSO packet whole (`veth_xmit` hands the skb to its peer): the router receives
/// the sender's super-packets, its HTB charges and counts them as the sender's qdisc did, and the
/// receiver takes each as one segment. Where the next hop is a NIC, or a veth whose `gso_max_segs` is
/// below a packet's segments (`gso_features_check`), the router's interface cuts it into frames.
#[test]
fn a_veth_passes_super_packets_whole() {
    let veth = LAB.replace("delay = \"1ms\"", "delay = \"1ms\"\nveth = true");
    let both = run_lab(&veth.replace("delay = \"5ms\"", "delay = \"5ms\"\nveth = true"));
    let nic_after = run_lab(&veth);
    let narrow = run_lab(&veth.replace(
        "delay = \"5ms\"",
        "delay = \"5ms\"\nveth = true\ngso_max_segs = 4",
    ));
    for (what, s) in [
        ("veth, veth", &both),
        ("veth, NIC", &nic_after),
        ("veth, veth gso_max_segs 4", &narrow),
    ] {
        assert_eq!(s.delivered, 5 << 20, "{what}");
        assert_eq!(s.retransmits, 0, "{what}");
        // The router took a's skbs as a's qdisc sent them: one received packet per skb, super-packets
        // in its egress qdisc, which charges and counts them as a's did (no loss on these links).
        assert_eq!(s.router_rx, s.enqueued.len() as u64, "{what}");
        // The sending veth counts skbs, as a veth's tx_packets does; its qdisc counts segments.
        assert_eq!(s.iface.1, s.router_rx, "{what}");
        assert!(s.router_rx < s.qdisc.1, "{what}: fewer skbs than frames");
        assert!(s.router_max > 1514, "{what}: {}", s.router_max);
        assert_eq!(
            s.router_qdisc, s.qdisc,
            "{what}: r:eth1's tc -s against a:eth0's"
        );
    }
    // Whole to the receiver over a second veth: one segment per skb.
    assert_eq!(both.segs_in, both.router_rx);
    // Cut at the router's NIC: a segment per frame, as many as the frames a's qdisc counted.
    assert_eq!(nic_after.segs_in, nic_after.qdisc.1);
    // Cut only where a packet has more than 4 segments: more segments in than skbs, fewer than frames.
    assert!(narrow.segs_in > narrow.router_rx && narrow.segs_in < narrow.qdisc.1);
}

/// A veth whose TSO is off (`ethtool -K eth0 tso off` in a's script) hands its peer frames: the
/// kernel cuts a TCP GSO skb in software before the device (`validate_xmit_skb`: the device lacks
/// NETIF_F_TSO, so `netif_needs_gso`), while TCP still builds GSO skbs for the qdisc. Measured on this
/// machine's kernel (6.18): an iperf3 TCP stream over a veth, its peer received 58 309 bytes per packet
/// with TSO on and 1 508 with it off. The simulator passed the skbs whole whatever TSO said.
/// ethtool's long name (`tcp-segmentation-offload`) and the kernel's feature name
/// (`tx-tcp-segmentation`, NETIF_F_TSO) do the same: `ethtool -K veth0 tx-tcp-segmentation off` on this
/// machine turns that feature off ("Actual changes: tx-tcp-segmentation: off"). tclab ignored both
/// ("ignoring ethtool feature") and its veth kept passing super-packets.
#[test]
fn a_veth_with_tso_off_hands_its_peer_frames() {
    for name in ["tso", "tcp-segmentation-offload", "tx-tcp-segmentation"] {
        tso_off_hands_frames(name);
    }
}

fn tso_off_hands_frames(name: &str) {
    let dir = std::env::temp_dir().join(format!("tclab-gso-{name}-off-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("tso-off.sh"),
        format!("ethtool -K eth0 {name} off\n"),
    )
    .unwrap();
    let veth = LAB.replace("delay = \"1ms\"", "delay = \"1ms\"\nveth = true");
    let off = run_lab_in(
        &format!("{veth}\n[[policy]]\nnode = \"a\"\nscript = \"tso-off.sh\"\n"),
        &dir,
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(off.delivered, 5 << 20, "{name}");
    assert!(
        off.enqueued.iter().any(|&l| l > 1514),
        "a's qdisc still takes GSO skbs"
    );
    // Frames beyond a's qdisc, as with a NIC: the router receives and forwards frames.
    assert_eq!(off.router_rx, off.iface.1, "one received packet per frame");
    assert_eq!(
        off.router_rx, off.qdisc.1,
        "a's frames, as its qdisc counted them"
    );
    assert!(off.router_max <= 1514, "{name}: {}", off.router_max);
    assert_eq!(off.segs_in, off.qdisc.1, "{name}: a segment per frame at b");
}

/// A script's `ethtool -K eth9 tso off` on a node without eth9 fails as ethtool does (this machine's
/// ethtool 6.1: "netlink error: no device matches name"), naming the script's command: tclab said
/// `link set dev eth9 tso off: Cannot find device "eth9"`, a command the script never wrote.
#[test]
fn ethtool_on_a_device_the_node_lacks_is_ethtools_error() {
    let dir = std::env::temp_dir().join(format!("tclab-gso-eth9-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (line, said) in [
        ("ethtool -K eth9 tso off", "ethtool -K eth9 tso off"),
        (
            "ethtool --offload eth9 tx-generic-segmentation off gro off",
            "ethtool -K eth9 tx-generic-segmentation off",
        ),
        ("ethtool -s eth9 speed 100", "ethtool -s eth9 speed 100"),
    ] {
        std::fs::write(dir.join("eth9.sh"), format!("{line}\n")).unwrap();
        let toml = format!("{LAB}\n[[policy]]\nnode = \"a\"\nscript = \"eth9.sh\"\n");
        let err = match load("gso.toml", &toml, &dir) {
            Ok(_) => panic!("{line}: loaded"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(&format!(
                "{said}: netlink error: no device matches name (node a has no eth9)"
            )),
            "{line}: {err}"
        );
        assert!(!err.contains("link set"), "{line}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
