//! The send buffer (sndbuf.rs) against Linux 6.12's functions, each figure derived by hand:
//! `tcp_sndbuf_expand` (`sk_sndbuf` = factor × max(10, cwnd, reordering + 1) × per_mss, per_mss =
//! roundup_pow_of_two(mss_clamp + MAX_TCP_HEADER 256 + 320) + 256 = 2 304 for a 1460-byte MSS, as this
//! machine's kernel shows in `ss -tmi`: `tb` 46 080 / 69 120 / 73 728), `sk_wmem_queued` (each skb's
//! data + 832, `ss`'s `w`), `sk_stream_memory_free` (a new skb only while `w < tb`), `tcp_poll`'s
//! writeable test (`tb − w >= w / 2`), `tcp_stream_memory_free` (`notsent_lowat`) and `tcp_push` (PSH on
//! the write queue's tail when a write ends).
mod common;
use common::*;
use tclab_tcp::*;

/// A 1448-byte segment's skb: its data and `SKB_TRUESIZE(MAX_TCP_HEADER)`.
const SKB: u64 = 1448 + 832;

/// Handshake by hand at 0 / 10 / 20 ms; the client is established at 20 ms.
fn pair(c: Config) -> (Connection, Connection) {
    let mut cl = Connection::client(c, 0, CLIENT_ISN);
    let mut sv = Connection::server(Config::default(), SERVER_ISN);
    let syn = cl.poll_transmit(0).unwrap();
    sv.on_segment(10 * MS, &syn);
    let synack = sv.poll_transmit(10 * MS).unwrap();
    cl.on_segment(20 * MS, &synack);
    while cl.poll_transmit(20 * MS).is_some() {}
    (cl, sv)
}

fn drain(c: &mut Connection, now: Nanos) -> Vec<Segment> {
    std::iter::from_fn(|| c.poll_transmit(now)).collect()
}

/// The server's cumulative ACK of the client's first `n` segments of 1448 bytes, with a wide window.
fn ack(n: u32, ts: u32) -> Segment {
    Segment {
        seq: SERVER_ISN.wrapping_add(1),
        ack: CLIENT_ISN.wrapping_add(1 + n * 1448),
        flags: flags::ACK,
        window: 65535,
        payload_len: 0,
        options: TcpOptions {
            timestamps: Some((ts, ts)),
            ..TcpOptions::default()
        },
        ecn: 0,
        gso_size: 0,
    }
}

/// `SO_SNDBUF` 23 040: a buffer fixed at 46 080 bytes, never grown.
fn locked() -> Config {
    Config {
        sndbuf: 23_040,
        ..Config::default()
    }
}

#[test]
fn the_buffer_at_establishment_is_tcp_sndbuf_expand() {
    // tcp_init_sock: tcp_wmem[1] until established.
    let cl = Connection::client(Config::default(), 0, CLIENT_ISN);
    assert_eq!(cl.stats().sndbuf, 16384);
    // tcp_init_buffer_space → tcp_sndbuf_expand: 2 × 10 × 2 304 for CUBIC, BBR's factor 3.
    let sndbuf = |c: Config| pair(c).0.stats().sndbuf;
    assert_eq!(sndbuf(Config::default()), 46_080);
    let bbr = Config {
        cc: CongestionControl::Bbr,
        ..Config::default()
    };
    assert_eq!(sndbuf(bbr), 69_120);
    // A CUBIC socket BBR initialised (iperf3 -C cubic on a BBR host): BBR's factor at establishment;
    // three of the four f10 flows show tb 69 120.
    let paced = Config {
        paced: true,
        ..Config::default()
    };
    assert_eq!(sndbuf(paced), 69_120);
    // cwnd 16: 2 × 16 × 2 304 (a flow's tb 73 728 in `ss -tmi`).
    let cw16 = Config {
        initial_cwnd: 16,
        ..Config::default()
    };
    assert_eq!(sndbuf(cw16), 73_728);
    // 9000-byte MTU both ends: mss_clamp 8 960 + 576 = 9 536 rounds up to 16 384; × 20 segments.
    let mut cl = Connection::client(Config::mss_from_mtu(9000), 0, CLIENT_ISN);
    let mut sv = Connection::server(Config::mss_from_mtu(9000), SERVER_ISN);
    let syn = cl.poll_transmit(0).unwrap();
    sv.on_segment(MS, &syn);
    cl.on_segment(2 * MS, &sv.poll_transmit(MS).unwrap());
    assert_eq!(cl.stats().sndbuf, 2 * 10 * (16384 + 256));
    // At most tcp_wmem[2].
    let capped = Config {
        wmem: [4096, 16384, 40_000],
        ..Config::default()
    };
    assert_eq!(sndbuf(capped), 40_000);
    // SO_SNDBUF: doubled, and kept.
    assert_eq!(sndbuf(locked()), 46_080);
}

#[test]
fn a_write_stops_when_the_buffer_is_full() {
    let (mut cl, _) = pair(locked());
    // A new skb only while w < 46 080: 20 skbs make 45 600, so a 21st is allocated (47 880) and the
    // write stops there.
    assert!(cl.writable());
    assert_eq!(cl.try_write(20 * MS, 1 << 20), 21 * 1448);
    let st = cl.stats();
    assert_eq!((st.wmem_queued, st.notsent), (21 * SKB, 21 * 1448));
    assert!(!cl.writable());
    assert_eq!(cl.try_write(20 * MS, 1 << 20), 0);
}

#[test]
fn the_writer_wakes_when_a_third_of_the_buffer_is_free() {
    let (mut cl, _) = pair(locked());
    cl.try_write(20 * MS, 1 << 20);
    assert_eq!(drain(&mut cl, 20 * MS).len(), 10); // the initial window
                                                   // Writeable once 46 080 − w >= w / 2, w <= 30 720: 13 skbs (29 640), not 14 (31 920). Each ACKed
                                                   // segment frees its skb: 21 − 8 = 13.
    for n in 1..=8 {
        cl.on_segment(30 * MS, &ack(n, 30));
        drain(&mut cl, 30 * MS);
        assert_eq!(cl.stats().wmem_queued, (21 - n as u64) * SKB);
        assert_eq!(cl.writable(), n == 8, "after {n} segments ACKed");
    }
    // The woken write fills it again to the first skb at or past 46 080.
    assert_eq!(cl.try_write(30 * MS, 1 << 20), 8 * 1448);
}

#[test]
fn the_buffer_grows_with_cwnd_while_a_writer_waits() {
    // tcp_new_space: a waiting writer (SOCK_NOSPACE) and cwnd not full when a new skb leaves or an
    // ACK's data has gone: sk_sndbuf = 2 × cwnd × 2 304. Slow start takes cwnd from 10 to 20 over ten
    // ACKs; the buffer follows.
    let (mut cl, _) = pair(Config::default());
    cl.try_write(20 * MS, 1 << 20);
    drain(&mut cl, 20 * MS);
    for n in 1..=10 {
        cl.on_segment(30 * MS, &ack(n, 30));
        drain(&mut cl, 30 * MS);
        if !cl.writable() {
            continue;
        }
        cl.try_write(30 * MS, 1 << 20);
        drain(&mut cl, 30 * MS);
    }
    let st = cl.stats();
    assert_eq!(st.cwnd, 20);
    assert_eq!(st.sndbuf, 2 * 20 * 2304);
    // A fixed buffer does not grow.
    let (mut cl, _) = pair(locked());
    cl.try_write(20 * MS, 1 << 20);
    drain(&mut cl, 20 * MS);
    for n in 1..=10 {
        cl.on_segment(30 * MS, &ack(n, 30));
        drain(&mut cl, 30 * MS);
    }
    assert_eq!(cl.stats().sndbuf, 46_080);
}

#[test]
fn psh_marks_the_segment_that_ends_a_write() {
    // tcp_push after the copy: PSH on the write queue's tail, the 656-byte rest of 5 000 bytes.
    let (mut cl, _) = pair(Config::default());
    assert_eq!(cl.try_write(20 * MS, 5000), 5000);
    let segs = drain(&mut cl, 20 * MS);
    let shape: Vec<(u32, bool)> = segs
        .iter()
        .map(|s| (s.payload_len, s.has(flags::PSH)))
        .collect();
    assert_eq!(
        shape,
        [(1448, false), (1448, false), (1448, false), (656, true)]
    );
    // A second write before the first left tops the tail up and takes its PSH: only the last
    // segment of 10 000 bytes has it.
    let (mut cl, _) = pair(Config::default());
    cl.try_write(20 * MS, 5000);
    cl.try_write(20 * MS, 5000);
    let segs = drain(&mut cl, 20 * MS);
    let psh: Vec<bool> = segs.iter().map(|s| s.has(flags::PSH)).collect();
    assert_eq!(segs.iter().map(|s| s.payload_len).sum::<u32>(), 10_000);
    assert_eq!(psh, [false, false, false, false, false, false, true]);
}

#[test]
fn a_write_stopped_by_the_buffer_pushes_its_last_skb() {
    // The write stops at 21 skbs (a_write_stops_when_the_buffer_is_full); cwnd 10 sends 10 of them,
    // so its tail is still queued at tcp_push: the 21st segment carries PSH, the others do not. The
    // receiver's ACKs let the rest out.
    let (mut cl, _) = pair(locked());
    cl.try_write(20 * MS, 1 << 20);
    let mut segs = drain(&mut cl, 20 * MS);
    for n in 1..=10 {
        cl.on_segment(30 * MS, &ack(n, 30));
        segs.extend(drain(&mut cl, 30 * MS));
    }
    assert_eq!(segs.len(), 21);
    let pushed: Vec<usize> = (0..segs.len())
        .filter(|&i| segs[i].has(flags::PSH))
        .collect();
    assert_eq!(pushed, [20]);
    assert_eq!(cl.stats().psh_segs_out, 1);
}

#[test]
fn a_write_that_leaves_whole_has_no_tail_to_push() {
    // Written while cwnd has room for all of it: tcp_push_one sends each full skb as it fills, so when
    // the write stops on a full buffer the write queue is empty and tcp_push marks nothing. A 2-skb
    // buffer (SO_SNDBUF 2 304: 4 608, SOCK_MIN_SNDBUF) stops the write at 3 skbs.
    let c = Config {
        sndbuf: 2304,
        ..Config::default()
    };
    let (mut cl, _) = pair(c);
    assert_eq!(cl.try_write(20 * MS, 1 << 20), 3 * 1448);
    let segs = drain(&mut cl, 20 * MS);
    assert_eq!(segs.len(), 3);
    assert!(segs.iter().all(|s| !s.has(flags::PSH)));
}

#[test]
fn notsent_lowat_stops_a_write_and_wakes_the_writer_at_half() {
    // tcp_stream_memory_free: a new skb only while notsent < 10 000 (7 skbs: 10 136 stop it); the
    // writer is woken when twice the unsent bytes are below it.
    let c = Config {
        notsent_lowat: 10_000,
        ..Config::default()
    };
    let (mut cl, _) = pair(c);
    assert_eq!(cl.try_write(20 * MS, 1 << 20), 7 * 1448);
    assert!(!cl.writable());
    drain(&mut cl, 20 * MS); // cwnd 10 takes all 7
    assert_eq!(cl.stats().notsent, 0);
    assert!(cl.writable());
}

#[test]
fn a_blocking_write_copies_as_the_buffer_frees() {
    // write() of more than the buffer holds: the rest follows the ACKs, each stretch ending with a
    // PSH, and close()'s FIN comes after the last byte.
    let (mut cl, _) = pair(locked());
    cl.write(100_000);
    cl.close();
    let mut segs = drain(&mut cl, 20 * MS);
    assert_eq!(cl.stats().bytes_written, 21 * 1448);
    let mut n = 0;
    let mut now = 30 * MS;
    while !segs.last().is_some_and(|s| s.has(flags::FIN)) {
        n += 1;
        now += MS;
        cl.on_segment(now, &ack(n, (now / MS) as u32));
        segs.extend(drain(&mut cl, now));
        assert!(n < 200, "no FIN");
    }
    assert_eq!(cl.stats().bytes_written, 100_000);
    let data: u32 = segs.iter().map(|s| s.payload_len).sum();
    assert_eq!(data, 100_000);
    assert!(cl.stats().psh_segs_out >= 3);
    cl.check_invariants().unwrap();
}
