//! GSO super-packets through qdiscs configured by `tc` lines, as the kernel charges and counts them:
//! `qdisc_pkt_len_init` charges the headers of every segment (so a super-packet costs what its frames
//! will), `bstats_update` counts `gso_segs` packets, and TBF segments a super-packet larger than its
//! bucket whose frames fit (`tbf_segment`) instead of dropping it. The figures are derived by hand below.

use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Engine, Packet};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

/// TCP options of an established Linux segment: NOP, NOP, timestamps (12 bytes, a 32-byte header).
const TS_OPTS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];

/// A TCP skb as the stack hands it over: headers once (14 + 20 + 32 = 66 bytes), `payload` bytes after,
/// made GSO with 1448-byte segments.
fn tcp_gso(payload: u32, flags: u8) -> Packet {
    let mut p = Packet::tcp4(
        [10, 0, 0, 1],
        40000,
        [10, 0, 1, 1],
        5201,
        flags,
        1000,
        1,
        &TS_OPTS,
        payload,
    );
    p.set_gso(1448);
    p
}

/// Dequeue until `n` packets came out, waking when the shaper asks; their lengths.
fn drain(e: &mut Engine, n: usize) -> Vec<u32> {
    let dev = e.device_mut("eth0").unwrap();
    let (mut sent, mut now) = (Vec::new(), 0);
    while sent.len() < n && now < 1_000_000_000 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => sent.push(p.len),
            None => now = cx.wake_at.expect("the shaper asks to be woken"),
        }
    }
    sent
}

#[test]
fn a_super_packet_is_charged_every_frames_headers() {
    // 4 × 1448 payload bytes with one set of headers is an skb of 66 + 5792 = 5858 bytes; the qdisc
    // charges 4 frames of 1514 = 6056 (skb->len + 3 × 66).
    let p = tcp_gso(4 * 1448, 0x18);
    assert!(p.is_gso());
    assert_eq!((p.gso_segs, p.gso_size, p.len), (4, 1448, 6056));
    // A payload of one MSS or less is no GSO packet (`tcp_set_skb_tso_segs`).
    let one = tcp_gso(1448, 0x10);
    assert!(!one.is_gso());
    assert_eq!(one.len, 1514);
    // A last segment shorter than the MSS: 3 frames, 1514 + 1514 + (66 + 100).
    let p = tcp_gso(2 * 1448 + 100, 0x10);
    assert_eq!((p.gso_segs, p.len), (3, 3194));
}

/// The simulator's segmentation into kept buffers (`gso_segment_in`) gives the frames `gso_segment`
/// gives, byte for byte, whatever the buffers held before; the frames before the last are in the
/// buffers it was handed and the last in the packet's own, so a driver that keeps buffers allocates
/// none for a GSO packet's frames.
#[test]
fn segmentation_into_kept_buffers_gives_the_same_frames() {
    let p = tcp_gso(2 * 1448 + 100, 0x80 | 0x10 | 0x08 | 0x01);
    let expected = p.clone().gso_segment();
    let own = p.data.as_ptr();
    let mut spare: Vec<Vec<u8>> = (0..4).map(|i| vec![0xee; 200 + i]).collect();
    let handed: Vec<*const u8> = spare.iter().rev().map(|b| b.as_ptr()).collect();
    let mut frames = Vec::new();
    p.gso_segment_in(|| spare.pop().unwrap(), |f| frames.push(f));
    assert_eq!(frames, expected);
    assert_eq!(
        spare.len(),
        2,
        "one kept buffer for each frame but the last"
    );
    let ptrs: Vec<*const u8> = frames.iter().map(|f| f.data.as_ptr()).collect();
    assert_eq!(ptrs, [handed[0], handed[1], own]);
}

#[test]
fn segmentation_gives_the_frames_tcp_would_have_sent() {
    // tcp_gso_segment: sequence numbers move on by 1448, the IP length and id follow each frame, PSH
    // and FIN stay on the last frame only, CWR on the first only; the IP checksum stays valid.
    let p = tcp_gso(2 * 1448 + 100, 0x80 | 0x10 | 0x08 | 0x01);
    let frames = p.clone().gso_segment();
    assert_eq!(frames.len(), 3);
    let lens: Vec<u32> = frames.iter().map(|f| f.len).collect();
    assert_eq!(lens, [1514, 1514, 166]);
    assert_eq!(
        lens.iter().sum::<u32>(),
        p.len,
        "the frames are what the qdisc charged"
    );
    for (i, f) in frames.iter().enumerate() {
        let d = &f.data;
        assert!(!f.is_gso());
        assert_eq!(u16::from_be_bytes([d[2], d[3]]) as u32, f.len - 14);
        assert_eq!(u16::from_be_bytes([d[4], d[5]]), i as u16);
        assert_eq!(
            tclab_core::csum::ip_header(&d[..20]),
            0,
            "a valid header sums to zero"
        );
        let seq = u32::from_be_bytes([d[24], d[25], d[26], d[27]]);
        assert_eq!(seq, 1000 + 1448 * i as u32);
        let flags = d[33];
        assert_eq!(flags & 0x80 != 0, i == 0, "CWR on the first frame only");
        assert_eq!(
            flags & 0x09 != 0,
            i == 2,
            "PSH and FIN on the last frame only"
        );
        assert_eq!(flags & 0x10, 0x10, "every frame ACKs");
    }
}

#[test]
fn htb_counts_segments_and_charges_the_whole_packet() {
    // Three 4-segment super-packets through an HTB class: `tc -s` shows 3 × 6056 = 18168 bytes and
    // 12 packets on the qdisc and on the class (bstats_update: gso_segs), as Linux shows them.
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    tc(&mut e, "qdisc add dev eth0 root handle 1: htb default 10");
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:10 htb rate 100mbit",
    );
    let dev = e.device_mut("eth0").unwrap();
    for _ in 0..3 {
        assert_eq!(
            dev.enqueue(tcp_gso(4 * 1448, 0x10), &mut Cx::new(0)),
            Verdict::Success
        );
    }
    assert_eq!(drain(&mut e, 3), [6056; 3], "HTB sends the packet whole");
    let q = tc(&mut e, "-s qdisc show dev eth0");
    assert!(q.contains("Sent 18168 bytes 12 pkt"), "{q}");
    let c = tc(&mut e, "-s class show dev eth0 classid 1:10");
    assert!(c.contains("Sent 18168 bytes 12 pkt"), "{c}");
}

/// TBF at 10 Mbit/s with `burst` and `limit` as the root of eth0 (replacing any), offered one
/// 4-segment super-packet (6056 bytes charged): the verdict and the packets dropped on the way.
fn tbf_takes_one(e: &mut Engine, burst: u32, limit: u32) -> (Verdict, usize) {
    tc(
        e,
        &format!(
            "qdisc replace dev eth0 root handle 1: tbf rate 10mbit burst {burst} limit {limit}"
        ),
    );
    let mut cx = Cx::new(0);
    let v = e
        .device_mut("eth0")
        .unwrap()
        .enqueue(tcp_gso(4 * 1448, 0x10), &mut cx);
    (v, cx.drops.len())
}

#[test]
fn tbf_segments_a_super_packet_larger_than_its_bucket() {
    // burst 1540 holds one 1514-byte frame, not a 6056-byte super-packet: tbf_segment queues its 4
    // frames in the child (limit 10000 bytes takes all 4: 6056), and the packet is not dropped. The
    // frames then leave one by one, 4 packets of 1514 bytes.
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    assert_eq!(tbf_takes_one(&mut e, 1540, 10000), (Verdict::Success, 0));
    let q = tc(&mut e, "-s qdisc show dev eth0");
    assert!(q.contains("dropped 0"), "{q}");
    assert!(q.contains("backlog 6056b 4p"), "{q}");
    assert_eq!(drain(&mut e, 4), [1514; 4]);
    let q = tc(&mut e, "-s qdisc show dev eth0");
    assert!(q.contains("Sent 6056 bytes 4 pkt (dropped 0"), "{q}");

    // A limit of 4000 bytes takes two of the frames: the other two are dropped, the packet still
    // counts as queued (two frames, 3028 bytes).
    assert_eq!(tbf_takes_one(&mut e, 1540, 4000), (Verdict::Success, 2));
    let q = tc(&mut e, "-s qdisc show dev eth0");
    assert!(q.contains("backlog 3028b 2p"), "{q}");
    assert!(q.contains("dropped 2"), "{q}");

    // A super-packet whose frames do not fit the bucket either (burst 1000 < 1514) is dropped whole.
    assert_eq!(tbf_takes_one(&mut e, 1000, 10000), (Verdict::Drop, 1));
}
