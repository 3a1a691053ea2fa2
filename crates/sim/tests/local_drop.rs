//! The sending host's own qdisc refuses a TCP segment: the segment stays unsent, not lost.
//!
//! `tcp_write_xmit` (net/ipv4/tcp_output.c, Linux 6.12) hands each skb to the qdisc through
//! `tcp_transmit_skb` and stops at the first the qdisc refuses (`NET_XMIT_DROP`): `__tcp_transmit_skb`
//! calls `tcp_enter_cwr`, the skb stays at the head of the write queue with snd_nxt before it, and the
//! next ACK (or the probe timer, when nothing is in flight) sends it. Nothing was lost, so nothing is
//! retransmitted. The lab: TBF 10 Mbit/s with a 6 000-byte bfifo on the senders' own interface under
//! eight CUBIC streams. TBF's child refuses the arriving skb when it is full (`bfifo_enqueue` →
//! `qdisc_drop`), so every drop `tc -s` counts is a refusal some sender was told of.

use tclab_sim::apps::App;
use tclab_sim::run::run;
use tclab_sim::scenario::load;

const LAB: &str = r#"
duration = "20s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "1gbit"
delay = "10ms"
[[policy]]
node = "a"
tc = "qdisc add dev eth0 root handle 1: tbf rate 10mbit burst 10k limit 6000"
[[traffic]]
kind = "tcp"
from = "a"
to = "b"
streams = 8
"#;

#[test]
fn refused_segments_are_sent_later_not_retransmitted() {
    // GSO on (Linux's default: skbs of 2 segments at these rates, tcp_tso_autosize's minimum), and off
    // (`gso_max_segs = 1`: one segment per skb).
    check(LAB);
    check(&LAB.replace("delay = \"10ms\"", "delay = \"10ms\"\ngso_max_segs = 1"));
}

fn check(lab: &str) {
    let mut sc = load("local_drop.toml", lab, std::path::Path::new(".")).unwrap();
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    let f = &out.flows[0];

    let a_eth0 = sc.net.iface_by_name(0, "eth0").unwrap();
    let drops = sc.net.device(a_eth0).unwrap().root().q.stats().drops as u64;
    assert!(
        drops > 500,
        "eight streams overflow 6 000 bytes: {drops} drops"
    );
    let refused: u64 = sc
        .net
        .apps
        .iter()
        .map(|a| match a {
            App::Tcp(t) => t.stats().local_drops,
            _ => 0,
        })
        .sum();
    assert_eq!(
        refused, drops,
        "each drop is a refusal its sender was told of"
    );

    // Before each refusal was told to its sender before it built the next segment, the segments built
    // after a refused one had left, so the refused one was marked lost and sent again: 281
    // retransmissions with GSO, 209 without.
    assert_eq!(
        f.retransmits, 0,
        "a refused segment was never sent, so it is never retransmitted"
    );

    // Goodput: TBF charges each frame's 1 514 bytes (1 448 of payload + 32 of TCP header and options,
    // 20 of IP, 14 of Ethernet) against 10 Mbit/s: 10e6 × 1448 / 1514 = 9.564 Mbit/s, plus the 10 KiB
    // bucket over 20 s (+4 kbit/s). The handshake and the first round trips cost at most 1 %.
    let ceiling = 10e6 * 1448.0 / 1514.0 + 10240.0 * 8.0 / 20.0;
    assert!(
        f.goodput_bps <= ceiling && f.goodput_bps >= 0.99 * ceiling,
        "goodput {:.0} bit/s, the TBF allows {ceiling:.0}",
        f.goodput_bps
    );
}
