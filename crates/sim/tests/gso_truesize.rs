//! A socket's send memory when a qdisc on its own host cuts its GSO packets into frames.
//!
//! TCP small queues counts the truesize of a socket's skbs below it (`sk_wmem_alloc`): in tclab, each
//! skb's frame bytes and `SKB_OVERHEAD` (576: `struct sk_buff` and `skb_shared_info`). When TBF's
//! `tbf_segment` (or CAKE's split-gso) cuts a GSO packet, `skb_gso_segment` makes an skb per frame and
//! `tcp_gso_segment` charges the socket their truesize in place of the one packet's (`sk_wmem_alloc`
//! grows by the difference); each frame then gives its own back when it is freed. So at any instant the
//! socket's charge is what its skbs on the host hold: the bytes in the qdisc plus 576 for each packet
//! there, plus the skb on the NIC. Without the split's charge each cut packet gave back (n − 1) × 576
//! bytes more than it took.

use tclab_core::Nanos;
use tclab_sim::apps::App;
use tclab_sim::net::{AppId, IfaceId, Network, Observer};
use tclab_sim::scenario::load;
use tclab_sim::tcpapp::{TcpEndpoint, SKB_OVERHEAD};
use tclab_sim::wire::PROTO_TCP;

/// TBF at 20 Mbit/s with a 2 000-byte bucket: every GSO packet (two segments or more, 3 028 bytes and
/// up) is larger than the bucket and is segmented; its 4 000-byte bfifo takes two frames at most,
/// so some packets are queued in part and some refused whole.
///
/// Two frames are an eighth of the path's 17-frame BDP, so the flow loses often, and how often depends on
/// the phase of its ACKs against TBF's departures: a frame is dropped when an ACK-clocked skb lands just as
/// the third frame of the previous burst still waits (after an idle spell the bucket's 486 spare bytes send
/// two frames in 1.017 ms instead of 1.211). Measured with 4 MB in 3 s at one-way delays of 4.5 to 5.5 ms
/// in 0.1 ms steps, 6 and 7 ms: the send-buffer model with and without `tcp_tso_should_defer`, and the
/// model before it, each delivers only 3.2–3.9 MB at some delays (5 ms with the deferral: 26
/// retransmissions, 3.56 MB; 5.1 ms: 5, complete; never a pause in sending longer than an RTT). Nothing in
/// the kernel's TCP escapes this (`tbf_segment` drops the frames past the limit whatever the sender did);
/// what this test checks is the charge, so the transfer has 5 s, in which it completes at every one-way
/// delay from 3 to 15 ms.
const LAB: &str = r#"
duration = "5s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "1gbit"
delay = "5ms"
[[policy]]
node = "a"
tc = "qdisc add dev eth0 root tbf rate 20mbit burst 2000 limit 4000"
"#;

/// At each sample, the sender's charge against what its host holds.
struct Charge {
    app: AppId,
    iface: IfaceId,
    samples: u32,
    busy: u32,
}

impl Observer for Charge {
    fn observe(&mut self, now: Nanos, net: &Network) {
        let App::Tcp(t) = &net.apps[self.app] else {
            unreachable!("the sender is TCP")
        };
        let q = net.device(self.iface).expect("a:eth0").root().q.stats();
        let nic = net.ifaces[self.iface]
            .on_nic()
            .filter(|&(app, _)| app == self.app)
            .map_or(0, |(_, len)| len as u64 + SKB_OVERHEAD);
        let held = q.backlog as u64 + q.qlen as u64 * SKB_OVERHEAD + nic;
        assert_eq!(
            t.host_truesize(),
            held,
            "at {now} ns: {} bytes and {} packets in the TBF, {nic} on the NIC",
            q.backlog,
            q.qlen
        );
        self.samples += 1;
        self.busy += (q.qlen > 0) as u32;
    }
}

#[test]
fn a_segmented_gso_packet_charges_its_socket_what_its_frames_give_back() {
    let mut sc = load("gso_truesize.toml", LAB, std::path::Path::new(".")).unwrap();
    let net = &mut sc.net;
    let (a, b) = (
        net.node_by_name("a").unwrap(),
        net.node_by_name("b").unwrap(),
    );
    let (src, dst) = (net.node_addr(a).unwrap(), net.node_addr(b).unwrap());
    let iface = net.iface_by_name(a, "eth0").unwrap();
    let dev = net.device(iface).unwrap();
    let mut cfg = tclab_tcp::Config::mss_from_mtu(dev.mtu);
    cfg.set_route_gso(dev.gso_max_size, dev.gso_max_segs);
    let start = 1_000_000;
    let tx = TcpEndpoint::sender(
        cfg.clone(),
        1,
        (src, 40000),
        (dst, 5001),
        0,
        Some(4_000_000),
        start,
        Nanos::MAX,
    );
    let app = net.add_app(a, App::Tcp(Box::new(tx)), Some(start));
    net.bind(a, PROTO_TCP, 40000, dst, 5001, app);
    let rx = TcpEndpoint::receiver(cfg, 2, (dst, 5001), (src, 40000), 0);
    let rx_app = net.add_app(b, App::Tcp(Box::new(rx)), None);
    net.bind(b, PROTO_TCP, 5001, src, 40000, rx_app);

    let mut charge = Charge {
        app,
        iface,
        samples: 0,
        busy: 0,
    };
    // Every 0.1 ms: 50 000 looks at the socket's charge, a tenth or more with the TBF holding frames.
    net.run(5_000_000_000, Some(100_000), &mut charge);
    assert_eq!(
        net.apps[rx_app].delivered_bytes(),
        4_000_000,
        "the transfer completes"
    );
    assert!(
        charge.busy > 5_000,
        "{} of {} samples",
        charge.busy,
        charge.samples
    );
    let stats = net.device(iface).unwrap().root().q.stats();
    assert!(stats.drops > 0, "the bfifo overflowed");
    // Everything sent and freed: nothing charged.
    let App::Tcp(t) = &net.apps[app] else {
        unreachable!()
    };
    assert_eq!(t.host_truesize(), 0);
}
