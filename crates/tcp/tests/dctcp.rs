//! DCTCP and ECN by hand (Linux 6.12's `tcp_dctcp.c`, `tcp_dctcp.h` and the `tcp_ecn_*` functions of
//! `tcp_input.c`/`tcp_output.c`): the handshake and ECT marking, the receiver's CE state machine, the
//! sender's alpha and its reduction by alpha/2, and the loss fallback to Reno's halving.

mod common;
use common::*;
use tclab_tcp::*;

fn dctcp() -> Config {
    Config {
        cc: CongestionControl::Dctcp,
        ..Config::default()
    }
}

/// Handshake by hand at t = 0 / 10 / 20 / 30 ms; returns (client, server) and the three segments.
fn pair(c: Config, s: Config) -> (Connection, Connection, [Segment; 3]) {
    let mut cl = Connection::client(c, 0, CLIENT_ISN);
    let mut sv = Connection::server(s, SERVER_ISN);
    let syn = cl.poll_transmit(0).unwrap();
    sv.on_segment(10 * MS, &syn);
    let synack = sv.poll_transmit(10 * MS).unwrap();
    cl.on_segment(20 * MS, &synack);
    let ack = cl.poll_transmit(20 * MS).unwrap();
    sv.on_segment(30 * MS, &ack);
    assert_eq!(sv.state(), State::Established);
    (cl, sv, [syn, synack, ack])
}

fn drain(c: &mut Connection, now: Nanos) -> Vec<Segment> {
    let mut v = vec![];
    while let Some(s) = c.poll_transmit(now) {
        v.push(s);
        assert!(v.len() < 10_000);
    }
    v
}

/// Client data segment `i` (1448 bytes) with the given ECN field. (Set field by field: the fields this
/// test does not care about keep their defaults.)
#[allow(clippy::field_reassign_with_default)]
fn data(i: u32, ecn_field: u8) -> Segment {
    let mut s = Segment::default();
    s.seq = CLIENT_ISN.wrapping_add(1 + i * 1448);
    s.ack = SERVER_ISN.wrapping_add(1);
    s.flags = flags::ACK;
    s.window = 1000;
    s.payload_len = 1448;
    s.options.timestamps = Some((100, 10));
    s.ecn = ecn_field;
    s
}

/// The server's ACK of the client's first `n` segments, ECE or not.
#[allow(clippy::field_reassign_with_default)]
fn ack_of(n: u32, ece: bool) -> Segment {
    let mut s = Segment::default();
    s.seq = SERVER_ISN.wrapping_add(1);
    s.ack = CLIENT_ISN.wrapping_add(1 + n * 1448);
    s.flags = flags::ACK | if ece { flags::ECE } else { 0 };
    s.window = 1000;
    s.options.timestamps = Some((100, 30));
    s.ecn = ecn::ECT0;
    s
}

/// `tcp_ecn_send_syn` with a module that needs ECN: the SYN asks (ECE|CWR) and is ECT(0) (`INET_ECN_xmit`);
/// a DCTCP server accepts it (`tcp_ecn_create_request`: `tcp_ca_needs_ecn(listen_sk)`) and every
/// segment after, pure ACKs included, is ECT(0). A server that does not run DCTCP refuses an ECT SYN
/// (`(!ect || th->res1) && ecn_ok` fails), and the DCTCP client falls back to Reno: Not-ECT data, no
/// alpha (`dctcp_init` → `dctcp_reno`, `INET_ECN_dontxmit`). A CUBIC client with `tcp_ecn = 1` sends a
/// Not-ECT SYN, which a DCTCP server accepts too.
#[test]
fn handshake_and_ect_marking() {
    let (mut cl, mut sv, [syn, synack, ack]) = pair(dctcp(), dctcp());
    assert!(syn.has(flags::ECE) && syn.has(flags::CWR));
    assert_eq!(syn.ecn, ecn::ECT0, "a DCTCP SYN is ECT(0)");
    assert!(synack.has(flags::ECE) && !synack.has(flags::CWR));
    assert_eq!(synack.ecn, ecn::ECT0);
    assert_eq!(ack.ecn, ecn::ECT0, "DCTCP's pure ACKs are ECT(0)");
    assert_eq!(cl.stats().dctcp_alpha, Some(1024), "dctcp_alpha_on_init");
    assert_eq!(sv.stats().dctcp_alpha, Some(1024));
    cl.write(4 * 1448);
    let out = drain(&mut cl, 30 * MS);
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|s| s.ecn == ecn::ECT0));
    sv.on_segment(40 * MS, &out[0]);
    let acks = drain(&mut sv, 40 * MS);
    assert!(acks
        .iter()
        .all(|a| a.ecn == ecn::ECT0 && !a.has(flags::ECE)));

    // DCTCP client, CUBIC server (tcp_ecn = 2): refused, Reno without ECN.
    let (mut cl, sv, [syn, synack, _]) = pair(dctcp(), Config::default());
    assert_eq!(syn.ecn, ecn::ECT0);
    assert!(
        !synack.has(flags::ECE),
        "an ECT SYN asking for ECN is refused"
    );
    assert_eq!(cl.stats().dctcp_alpha, None, "fell back to Reno");
    assert_eq!(sv.stats().dctcp_alpha, None);
    cl.write(4 * 1448);
    assert!(drain(&mut cl, 30 * MS)
        .iter()
        .all(|s| s.ecn == ecn::NOT_ECT));

    // CUBIC client with tcp_ecn = 1: a Not-ECT SYN, accepted by a DCTCP server.
    let ecn_client = Config {
        ecn: true,
        ..Config::default()
    };
    let (_, sv, [syn, synack, ack]) = pair(ecn_client, dctcp());
    assert_eq!(syn.ecn, ecn::NOT_ECT);
    assert!(synack.has(flags::ECE));
    assert_eq!(ack.ecn, ecn::NOT_ECT);
    assert_eq!(sv.stats().dctcp_alpha, Some(1024));
}

/// The receiver's CE state machine (`dctcp_ece_ack_update`), out of quickack mode so that ACKs are
/// delayed: the server's buffer is fixed as in direct.rs's delayed-ACK test (SO_RCVBUF 48 KB: 16
/// quickacks, then an ACK every second segment). Segments 0..18 are ECT(0); 18 is held by the delayed
/// ACK. Segment 19 is CE: the state changes with an ACK delayed, so the ACK of 0..19 goes first, without
/// ECE (the old state), then the ACK of 0..20 with ECE. Segment 20, CE again: no change, ECE kept, the
/// ACK delayed (Linux enters quickack mode for CE only when ECE was not already demanded). Segment 21,
/// ECT(0): a change, the delayed ACK of 0..21 with ECE first, then 0..22 without.
#[test]
fn receiver_acks_each_ce_change_at_once() {
    let fixed = Config {
        rcvbuf: 49152,
        ..dctcp()
    };
    let (_cl, mut sv, _) = pair(dctcp(), fixed);
    let base = CLIENT_ISN.wrapping_add(1);
    let mut t = 100 * MS;
    for i in 0..18 {
        sv.on_segment(t, &data(i, ecn::ECT0));
        drain(&mut sv, t);
        t += MS;
    }
    sv.on_segment(t, &data(18, ecn::ECT0));
    assert!(drain(&mut sv, t).is_empty(), "segment 18's ACK is delayed");
    t += MS;
    sv.on_segment(t, &data(19, ecn::CE));
    let out = drain(&mut sv, t);
    let seen: Vec<(u32, bool)> = out
        .iter()
        .map(|a| (a.ack.wrapping_sub(base) / 1448, a.has(flags::ECE)))
        .collect();
    assert_eq!(seen, [(19, false), (20, true)]);
    assert!(out.iter().all(|a| a.ecn == ecn::ECT0));
    t += MS;
    sv.on_segment(t, &data(20, ecn::CE));
    assert!(drain(&mut sv, t).is_empty(), "no change of state: delayed");
    t += MS;
    sv.on_segment(t, &data(21, ecn::ECT0));
    let seen: Vec<(u32, bool)> = drain(&mut sv, t)
        .iter()
        .map(|a| (a.ack.wrapping_sub(base) / 1448, a.has(flags::ECE)))
        .collect();
    assert_eq!(seen, [(21, true), (22, false)]);
    assert_eq!(sv.stats().ce_received, 2);
}

/// The sender, by hand from `dctcp_update_alpha` and `dctcp_ssthresh`. After the handshake
/// `next_seq` = snd_nxt = 1 and alpha = 1024. Ten segments leave (initial window).
/// * ACK of 2, no ECE: snd_una passes next_seq, a window ends having delivered nothing (the ACK's own
///   packets count after `in_ack_event`): alpha = 1024 − 64 = 960; next_seq = 1 + 10 · 1448. Slow start:
///   cwnd 12, and the client sends four more.
/// * ACK of 6 with ECE: inside the window, alpha stays; the echo enters CWR with
///   ssthresh = 12 − (12 · 960 >> 11) = 12 − 5 = 7 (CUBIC would give 8, Reno 6).
/// * ACK of 10, no ECE: the window ends with 6 delivered, 4 of them by the ECE ACK:
///   alpha = 960 − 60 + (4 << 6) / 6 = 900 + 42 = 942.
#[test]
fn alpha_and_the_reduction_by_half_alpha() {
    let (mut cl, _sv, _) = pair(dctcp(), dctcp());
    cl.write(100 * 1448);
    assert_eq!(drain(&mut cl, 30 * MS).len(), 10);
    cl.on_segment(50 * MS, &ack_of(2, false));
    assert_eq!(cl.stats().dctcp_alpha, Some(960));
    assert_eq!(cl.stats().cwnd, 12);
    assert_eq!(drain(&mut cl, 50 * MS).len(), 4);
    cl.on_segment(51 * MS, &ack_of(6, true));
    let st = cl.stats();
    assert_eq!(st.dctcp_alpha, Some(960));
    assert_eq!((st.ca_state, st.ssthresh), (CaState::Cwr, 7));
    assert_eq!((st.ece_reductions, st.delivered_ce), (1, 4));
    let more = drain(&mut cl, 51 * MS);
    assert!(
        more.first().is_some_and(|s| s.has(flags::CWR)),
        "CWR on the next new data"
    );
    cl.on_segment(52 * MS, &ack_of(10, false));
    assert_eq!(cl.stats().dctcp_alpha, Some(942));
    assert_eq!(cl.stats().delivered_ce, 4);
}

/// A loss halves the window whatever alpha is (`dctcp_state` → `dctcp_react_to_loss` on entering
/// Recovery). Without marks alpha decays every window (to 0 after about 70 windows of halving by
/// 1/16), so `dctcp_ssthresh` alone would keep nearly all of the window: ssthresh = cwnd / 2 shows the
/// loss reaction. Path: 10 Mbit/s, 10 ms each way, no queue overflow, segment 300 dropped once.
#[test]
fn a_loss_halves_the_window() {
    let mut path = PathCfg::new(10_000_000, 10 * MS, 1000);
    path.drop_offsets.insert(300 * 1448);
    let mut sim = Sim::new(dctcp(), dctcp(), path, 2_000_000);
    sim.run_to_completion(60 * SEC);
    let st = sim.hosts[0].stats();
    assert_eq!(st.retransmits, 1);
    assert_eq!(st.fast_retransmits, 1);
    let alpha = st.dctcp_alpha.expect("DCTCP ran");
    assert!(alpha < 1024, "alpha decayed without marks: {alpha}");
    let entry = sim
        .samples
        .windows(2)
        .find(|w| w[1].ca == CaState::Recovery)
        .expect("recovery");
    let w = entry[0].cwnd;
    assert!(
        w - ((w * 1024) >> 11) < w - ((w * alpha) >> 11),
        "alpha/2 alone would cut less"
    );
    assert_eq!(entry[1].ssthresh, (w / 2).max(2), "cwnd {w}");
    assert_eq!(sim.hosts[1].stats().bytes_delivered, 2_000_000);
}
