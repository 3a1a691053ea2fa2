//! GSO skbs as `tcp_write_xmit` sizes them (Linux 6.12, `tcp_tso_autosize`): about a millisecond of the
//! pacing rate (`sk_pacing_rate >> 10`) plus `gso_max_size >> (min_rtt_us >> 9)`, in whole MSS, at least
//! `min_tso_segs` (2), at most `sk_gso_max_size` (65536 − 321 bytes) and `gso_max_segs`, and at most half
//! of cwnd (`tcp_cwnd_test`). Every figure is derived by hand in its test from `tcp_update_pacing_rate`
//! (rate = mss × cwnd / srtt × 2 in slow start) with the handshake's RTT as the only sample.
mod common;
use common::*;
use tclab_tcp::*;

/// A client and a server with GSO (the devices' 65535 segments), a handshake of `rtt` (the client's
/// only RTT sample; the server gets the last ACK half an RTT later). The server's SO_RCVBUF is large,
/// so its SYN-ACK offers the most an unscaled window can (65535), which leaves room for a 64 KB skb.
fn handshake(mut c: Config, rtt: Nanos) -> (Connection, Connection) {
    c.gso_max_segs = 65535;
    let s = Config {
        rcvbuf: 4 << 20,
        ..Config::default()
    };
    let mut cl = Connection::client(c, 0, CLIENT_ISN);
    let mut sv = Connection::server(s, SERVER_ISN);
    let syn = cl.poll_transmit(0).unwrap();
    sv.on_segment(rtt / 2, &syn);
    let synack = sv.poll_transmit(rtt / 2).unwrap();
    cl.on_segment(rtt, &synack);
    let ack = cl.poll_transmit(rtt).unwrap();
    assert_eq!(ack.payload_len, 0);
    sv.on_segment(rtt + rtt / 2, &ack);
    (cl, sv)
}

/// The client of [`handshake`].
fn pair(c: Config, rtt: Nanos) -> Connection {
    handshake(c, rtt).0
}

/// What the client sends at `now` with plenty written: each skb's (payload, gso_size). `sendmsg` builds
/// skbs of at most half the peer's largest window (`tcp_xmit_size_goal`, `tcp_bound_to_half_wnd`): with
/// the 65 535-byte window of `pair`, 22 MSS (31 856 bytes), which `tcp_write_xmit` cuts but never joins.
fn burst(cl: &mut Connection, now: Nanos) -> Vec<(u32, u32)> {
    cl.write(10 << 20);
    let mut v = vec![];
    while let Some(s) = cl.poll_transmit(now) {
        v.push((s.payload_len, s.gso_size));
    }
    v
}

fn cwnd(n: u32) -> Config {
    Config {
        initial_cwnd: n,
        ..Config::default()
    }
}

#[test]
fn a_millisecond_of_the_pacing_rate_in_whole_segments() {
    // cwnd 100, srtt 20 ms: rate = 1448 × 100 / 0.02 s × 2 = 14 480 000 B/s; >> 10 = 14 140 bytes =
    // 9 whole MSS (13 032). min_rtt 20 000 µs >> 9 = 39: no short-path term. Half of cwnd (50) does
    // not bind. Each 22-MSS skb of the write queue leaves as 9 + 9 + 4 segments; the window (65535)
    // takes two such skbs and 1 823 bytes of a third (a short segment: no sub-MSS one is out).
    let mut cl = pair(cwnd(100), 20 * MS);
    assert_eq!(cl.tso_segs(), 9);
    let b = burst(&mut cl, 20 * MS);
    let skb = [(9 * 1448, 1448), (9 * 1448, 1448), (4 * 1448, 1448)];
    let mut want = [skb, skb].concat();
    want.push((65535 - 44 * 1448, 1448));
    assert_eq!(b, want);
}

#[test]
fn at_least_two_segments() {
    // cwnd 10, srtt 20 ms: 1 448 000 B/s >> 10 = 1 414 bytes, less than one MSS: min_tso_segs = 2.
    // Half of cwnd is 5, so the initial window leaves as 5 skbs of 2 segments.
    let mut cl = pair(cwnd(10), 20 * MS);
    assert_eq!(cl.tso_segs(), 2);
    assert_eq!(burst(&mut cl, 20 * MS), vec![(2 * 1448, 1448); 5]);
}

#[test]
fn at_most_gso_max_size() {
    // cwnd 1000, srtt 20 ms: 144 800 000 B/s >> 10 = 141 406 bytes, over 65536 − 321 = 65 215: 45
    // segments (65 160 bytes), more than a write-queue skb holds: the 22-MSS skbs leave whole, two and
    // the window's last 1 823 bytes.
    let mut cl = pair(cwnd(1000), 20 * MS);
    assert_eq!(cl.tso_segs(), 45);
    assert_eq!(
        burst(&mut cl, 20 * MS),
        vec![(22 * 1448, 1448), (22 * 1448, 1448), (1823, 1448)]
    );
}

#[test]
fn short_paths_add_part_of_gso_max_size() {
    // SO_MAX_PACING_RATE 1 024 000 B/s caps the rate: 1000 bytes a millisecond. With min_rtt 20 ms
    // that is 2 segments; with min_rtt 1 ms (1000 µs >> 9 = 1) 65 215 >> 1 = 32 607 bytes more: 33 607
    // bytes = 23 segments (33 304), one more than a write-queue skb holds (22).
    let capped = |n| Config {
        max_pacing_rate: 1_024_000,
        ..cwnd(n)
    };
    assert_eq!(pair(capped(100), 20 * MS).tso_segs(), 2);
    let mut cl = pair(capped(100), MS);
    assert_eq!(cl.tso_segs(), 23);
    assert_eq!(burst(&mut cl, MS)[0], (22 * 1448, 1448));
}

#[test]
fn gso_max_segs_one_sends_one_mss_per_segment() {
    let mut c = cwnd(100);
    let mut cl = pair(c.clone(), 20 * MS);
    assert!(burst(&mut cl, 20 * MS).iter().all(|&(_, g)| g == 1448));
    c.gso_max_segs = 1;
    let mut cl = Connection::client(c, 0, CLIENT_ISN);
    let syn = cl.poll_transmit(0).unwrap();
    let mut sv = Connection::server(Config::default(), SERVER_ISN);
    sv.on_segment(MS, &syn);
    let synack = sv.poll_transmit(MS).unwrap();
    cl.on_segment(20 * MS, &synack);
    cl.poll_transmit(20 * MS).unwrap();
    let b = burst(&mut cl, 20 * MS);
    assert!(!b.is_empty());
    assert!(b.iter().all(|&(p, g)| p == 1448 && g == 0), "{b:?}");
}

#[test]
fn a_gso_max_size_below_two_segments_sends_one_mss_per_skb() {
    // `ip link set DEV gso_max_size 2000`: the socket's sk_gso_max_size is 2000 − 321 = 1 679 bytes,
    // one whole MSS. tcp_xmit_size_goal then has sendmsg build skbs of one MSS (gso_segs = 1679 / 1448
    // = 1), which tcp_write_xmit never joins: min_tso_segs (2) cannot make them two. With 4 096 (3 775
    // bytes) they hold two.
    let mut c = cwnd(10);
    c.set_route_gso(2000, 65535);
    let mut cl = pair(c.clone(), 20 * MS);
    assert_eq!(cl.tso_segs(), 1);
    let b = burst(&mut cl, 20 * MS);
    assert!(
        !b.is_empty() && b.iter().all(|&(p, g)| p == 1448 && g == 0),
        "{b:?}"
    );
    c.set_route_gso(4096, 65535);
    let cl = pair(c, 20 * MS);
    assert_eq!(cl.tso_segs(), 2);
}

/// The same transfer with GSO on and off through the harness's path (the sending device cuts each GSO
/// segment into frames): the receiver gets every byte in order either way, and no frame is larger than
/// one MSS. The counters count segments (`tcp_skb_pcount`), not skbs.
#[test]
fn the_receiver_gets_the_same_bytes_with_gso_on_and_off() {
    const BYTES: u64 = 3_000_000;
    let mut delivered = vec![];
    for segs in [1, 65535] {
        let c = Config {
            gso_max_segs: segs,
            ..Config::default()
        };
        let mut sim = Sim::new(
            c,
            Config::default(),
            PathCfg::new(100_000_000, 5 * MS, 100),
            BYTES,
        );
        sim.run_to_completion(60 * SEC);
        assert!(sim.hosts[0].is_closed() && sim.hosts[1].is_closed());
        let frames: Vec<_> = sim
            .sent
            .iter()
            .filter(|(_, h, s)| *h == 0 && s.payload_len > 0)
            .collect();
        let arrived = sim.trace.iter().filter(|(_, d, _)| *d == 0);
        assert!(arrived
            .clone()
            .all(|(_, _, s)| s.payload_len <= 1448 && s.gso_size == 0));
        let skbs = sim.departures.iter().filter(|d| d.3 > 1448).count();
        assert_eq!(skbs > 0, segs > 1, "GSO skbs only with GSO");
        let st = sim.hosts[0].stats();
        assert_eq!(
            st.data_segs_out,
            frames.len() as u64,
            "segments counted, not skbs"
        );
        delivered.push(sim.hosts[1].stats().bytes_delivered);
    }
    assert_eq!(delivered, [BYTES, BYTES]);
}

/// `tcp_tso_should_defer` (Linux 6.12): a cwnd-limited sender holds back the short skb cwnd would allow
/// when its last write was under 1 ms ago, less than a third of the window is free, and the next ACK
/// is due within min(srtt / 2, 1 ms); that ACK then lets a full one go. cwnd 100, a 20 ms handshake:
/// the 65535-byte window leaves at 20 ms in skbs of at most 9, cut at the write queue's 22-segment
/// skbs; the ACK of the first skb comes at 39.5 ms, 0.5 ms before the second's is due, and opens the
/// window. cwnd stays 100 (45 segments out did not use it: `tcp_is_cwnd_limited`): skbs go until less
/// than one of 9 is left, and those segments wait, though cwnd has room for them (without the rule, a
/// short skb follows). The same state 1.5 ms after the last write sends them.
#[test]
fn a_short_skb_waits_for_the_next_ack() {
    let (mut cl, mut sv) = handshake(cwnd(100), 20 * MS);
    // The write queue's skbs are 22 segments (half the 65535-byte window): 9 + 9 + 4 each, and the
    // window's last 1 823 bytes.
    let first = burst(&mut cl, 20 * MS);
    let skb = [(9 * 1448, 1448), (9 * 1448, 1448), (4 * 1448, 1448)];
    let mut want = [skb, skb].concat();
    want.push((65535 - 44 * 1448, 1448));
    assert_eq!(first, want);
    // The server ACKs the first skb at once (quickack after the first data).
    let skb = Segment {
        seq: CLIENT_ISN.wrapping_add(1),
        ack: SERVER_ISN.wrapping_add(1),
        flags: flags::ACK,
        window: 1000,
        payload_len: 9 * 1448,
        options: TcpOptions::default(),
        ecn: 0,
        gso_size: 1448,
    };
    sv.on_segment(30 * MS, &skb);
    let ack1 = sv.poll_transmit(30 * MS).unwrap();
    assert_eq!(ack1.ack, CLIENT_ISN.wrapping_add(1 + 9 * 1448));
    let mut deferred = cl.clone();
    let now = 39 * MS + MS / 2;
    deferred.on_segment(now, &ack1);
    let mut sent = vec![];
    while let Some(s) = deferred.poll_transmit(now) {
        sent.push((s.payload_len, s.gso_size));
    }
    let st = deferred.stats();
    let segs = deferred.tso_segs();
    assert_eq!(st.cwnd, 100);
    // Whole skbs of 9, or the rest of a write-queue skb (never cut by cwnd): the last is a full one.
    assert_eq!(sent.last(), Some(&(segs * 1448, 1448)), "{sent:?}");
    let free = st.cwnd - st.in_flight;
    assert!(
        free > 0 && free < segs,
        "{free} of cwnd held back, skbs of {segs}"
    );
    // 1.5 ms after the last write the rule no longer holds it: the rest of cwnd goes.
    let later = now + 3 * MS / 2;
    let rest = deferred
        .poll_transmit(later)
        .expect("the held-back segments");
    assert_eq!(rest.payload_len, free * 1448);
}
