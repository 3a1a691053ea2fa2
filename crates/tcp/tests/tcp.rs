//! Behaviour tests through the harness in `common`. Each test says how its
//! expected figures were derived.
mod common;
use common::*;
use tclab_tcp::*;

fn cfg() -> Config {
    Config::mss_from_mtu(1500)
}

fn last_sample_at(sim: &Sim, t: Nanos) -> &Sample {
    sim.samples.iter().rev().find(|s| s.t <= t).expect("sample")
}

/// Handshake on an idle 10 Mbit/s, 10 ms one-way path. The SYN is
/// 20 IP + 20 TCP + 20 options = 60 bytes = 48 µs at 10 Mbit/s, so the
/// SYN-ACK (same size) is back at 2 × (10 ms + 48 µs) = 20.096 ms. The first
/// RTT sample sets srtt = 20.096 ms and rttvar = max(2·m, 200 ms) = 200 ms,
/// so RTO = 220.096 ms (tcp_rtt_estimator / __tcp_set_rto).
#[test]
fn handshake_and_option_negotiation() {
    let mut sim = Sim::new(
        cfg(),
        cfg(),
        PathCfg::new(10_000_000, 10 * MS, 100),
        10 * 1448,
    );
    sim.run_until(35 * MS);
    let syn = &sim.sent[0];
    assert_eq!(syn.1, 0);
    assert_eq!(syn.2.flags, flags::SYN);
    assert_eq!(syn.2.seq, CLIENT_ISN);
    let o = &syn.2.options;
    assert_eq!(o.mss, Some(1460));
    assert!(o.sack_permitted);
    assert_eq!(o.timestamps, Some((0, 0)));
    // tcp_select_initial_window: ilog2(tcp_rmem[2] = 6 MiB) - 15 = 7.
    assert_eq!(o.wscale, Some(7));
    assert_eq!(syn.2.header_len(), 40);
    assert_eq!(wire_bytes(&syn.2), 60);

    let synack = sim.sent.iter().find(|(_, h, _)| *h == 1).unwrap();
    assert_eq!(synack.0, 10 * MS + 48_000);
    assert_eq!(synack.2.flags, flags::SYN | flags::ACK);
    assert_eq!(synack.2.seq, SERVER_ISN);
    assert_eq!(synack.2.ack, CLIENT_ISN.wrapping_add(1));
    assert_eq!(synack.2.options.timestamps, Some((10, 0)));
    assert_eq!(synack.2.header_len(), 40);

    let c = sim.hosts[0].stats();
    assert_eq!(c.state, State::FinWait1); // all written, close() called
    assert_eq!(c.mss, 1448);
    assert_eq!(c.srtt_ns, 20_096_000);
    assert_eq!(c.rto_ns, 220_096_000);
    // the SYN-ACK's window, not scaled: 131072·128/256 = 65536 in whole 1448-byte segments
    assert_eq!(c.snd_wnd, 65160);

    // First data segment: NOP,NOP,TS = 12 option bytes, 1448 + 32 + 20 = 1500.
    let d = sim
        .sent
        .iter()
        .find(|(_, h, s)| *h == 0 && s.payload_len > 0)
        .unwrap();
    assert_eq!(d.0, 20_096_000);
    assert_eq!(d.2.payload_len, 1448);
    assert_eq!(d.2.header_len(), 32);
    assert_eq!(wire_bytes(&d.2), 1500);
    assert_eq!(sim.hosts[1].stats().state, State::Established);
}

/// A server without timestamps and SACK: the SYN-ACK carries only MSS and
/// window scale, both ends drop timestamps (MSS 1460, 20-byte headers, still
/// 1500-byte packets), and no SACK blocks are ever sent.
#[test]
fn negotiation_off_when_peer_declines() {
    let mut srv = cfg();
    srv.timestamps = false;
    srv.sack = false;
    // tcp_rmem and rmem_max at 64 KB: the largest buffer fits 16 bits, so the scale is 0
    srv.rmem = [4096, 65535, 65535];
    srv.rmem_max = 65535;
    let mut path = PathCfg::new(10_000_000, 10 * MS, 100);
    path.drop_offsets.insert(5 * 1460);
    let mut sim = Sim::new(cfg(), srv, path, 100 * 1460);
    sim.run_to_completion(30 * SEC);
    let synack = &sim.sent.iter().find(|(_, h, _)| *h == 1).unwrap().2;
    assert_eq!(synack.options.timestamps, None);
    assert!(!synack.options.sack_permitted);
    assert_eq!(synack.options.wscale, Some(0)); // ilog2(65535) - 15 = 0
    assert_eq!(synack.header_len(), 28); // MSS 4 + NOP,WS 4
    assert_eq!(sim.hosts[0].mss(), 1460);
    assert!(sim
        .sent
        .iter()
        .all(|(_, _, s)| s.options.sack_blocks.is_empty()));
    let d = sim
        .sent
        .iter()
        .find(|(_, h, s)| *h == 0 && s.payload_len > 0)
        .unwrap();
    assert_eq!(d.2.header_len(), 20);
    assert_eq!(wire_bytes(&d.2), 1500);
    assert_eq!(sim.hosts[1].stats().bytes_delivered, 100 * 1460);
    // NewReno repaired the drop with one fast retransmit.
    let c = sim.hosts[0].stats();
    assert_eq!((c.retransmits, c.timeouts, c.fast_retransmits), (1, 0, 1));
}

/// Slow start with ABC doubles cwnd every RTT whatever the ACK ratio: on a
/// 1 Gbit/s path with 25 ms one way and no queue limit, round k (starting at
/// the handshake's end, t0 = 50 ms) ends with cwnd = 10·2^(k+1). A round's
/// burst of 10·2^k segments takes at most 640 × 12 µs = 7.7 ms, so sampling
/// cwnd half an RTT into each round sees the settled value. HyStart is off
/// (it would end slow start early by design). The receiver starts with a
/// 16 MiB buffer (tcp_rmem[1]): from the default 128 KB, autotuning opens the
/// window one RTT behind, and 80 segments in flight (round 2) would not fit
/// its first clamp of 115712 bytes (direct.rs, receive_buffer_grows_per_rtt).
#[test]
fn slow_start_doubles_per_rtt() {
    for cc in [CongestionControl::Reno, CongestionControl::Cubic] {
        let mut c = cfg();
        c.cc = cc;
        c.hystart = false;
        let mut rcv = cfg();
        rcv.rmem = [4096, 16 << 20, 16 << 20];
        let mut sim = Sim::new(
            c,
            rcv,
            PathCfg::new(1_000_000_000, 25 * MS, 100_000),
            50_000_000,
        );
        sim.run_until(500 * MS);
        let t0 = 50 * MS;
        for k in 0..6u32 {
            let t = t0 + (k as u64 + 1) * 50 * MS + 25 * MS;
            let s = last_sample_at(&sim, t);
            assert_eq!(s.cwnd, 10 << (k + 1), "{cc:?} round {k} at {t}");
            assert_eq!(s.ca, CaState::Open);
        }
        assert_eq!(sim.hosts[0].stats().retransmits, 0);
    }
}

/// One flow through an idle 10 Mbit/s link, 20 ms RTT, a drop-tail queue of
/// one BDP (10 Mbit/s × 20 ms = 25000 B = 16.7 → 17 packets). The best
/// possible goodput is the link rate times payload/packet = 1448/1500:
/// 10 Mbit/s × 0.96533 = 9.6533 Mbit/s (the ACKs use the other direction).
/// Over 2 s..12 s the flow must reach ≥ 95 % of that.
#[test]
fn goodput_one_flow_10mbit() {
    let max_goodput_bps = 10_000_000.0 * 1448.0 / 1500.0;
    for cc in [CongestionControl::Cubic, CongestionControl::Reno] {
        let mut c = cfg();
        c.cc = cc;
        let mut sim = Sim::new(c, cfg(), PathCfg::new(10_000_000, 10 * MS, 17), 1 << 40);
        sim.run_until(2 * SEC);
        let b0 = sim.hosts[1].stats().bytes_delivered;
        sim.run_until(12 * SEC);
        let b1 = sim.hosts[1].stats().bytes_delivered;
        let goodput = (b1 - b0) as f64 * 8.0 / 10.0;
        let ratio = goodput / max_goodput_bps;
        let st = sim.hosts[0].stats();
        eprintln!(
            "{cc:?}: goodput {:.4} Mbit/s = {:.2} % of {:.4}; retransmits {} timeouts {} recoveries {} drops {:?}",
            goodput / 1e6,
            ratio * 100.0,
            max_goodput_bps / 1e6,
            st.retransmits,
            st.timeouts,
            st.fast_retransmits,
            sim.link_drops
        );
        assert!(ratio >= 0.95, "{cc:?}: {:.2} %", ratio * 100.0);
        // Delivery is counted in order at the receiver, so a hole open at
        // 2 s and filled later can push the measured figure over: by at most
        // the data above the hole, one flight — the queue (17) plus the
        // path's BDP (17) — 34 segments, 0.41 % of 10 s at this rate.
        let hidden = 34.0 * 1448.0 * 8.0 / (10.0 * max_goodput_bps);
        assert!(ratio <= 1.0 + hidden, "{cc:?}: {:.2} %", ratio * 100.0);
        assert_eq!(
            st.timeouts, 0,
            "{cc:?}: losses at the queue are repaired without RTO"
        );
    }
}

/// A single dropped segment (number 100) on a path whose queue never
/// overflows is repaired by exactly one fast retransmit: no RTO, one
/// retransmission, one recovery, all bytes delivered. Holds with SACK
/// (RFC 6675-style) and without (NewReno), for both CC modules. The
/// retransmission leaves about one RTT after the original (three dupACKs),
/// far earlier than the RTO (≥ 200 ms).
#[test]
fn single_drop_fast_retransmit() {
    for (sack, cc) in [
        (true, CongestionControl::Cubic),
        (false, CongestionControl::Cubic),
        (true, CongestionControl::Reno),
        (false, CongestionControl::Reno),
    ] {
        let mut c = cfg();
        c.sack = sack;
        c.cc = cc;
        let mut path = PathCfg::new(10_000_000, 10 * MS, 1000);
        path.drop_offsets.insert(100 * 1448);
        let mut sim = Sim::new(c, cfg(), path, 1_000_000);
        sim.run_to_completion(60 * SEC);
        let st = sim.hosts[0].stats();
        assert_eq!(sim.link_drops, [1, 0]);
        assert_eq!(st.timeouts, 0, "sack={sack} {cc:?}");
        assert_eq!(st.retransmits, 1, "sack={sack} {cc:?}");
        assert_eq!(st.fast_retransmits, 1);
        assert_eq!(sim.hosts[1].stats().bytes_delivered, 1_000_000);
        let sends: Vec<_> = sim
            .data_sent()
            .into_iter()
            .filter(|d| d.1 == 100 * 1448)
            .collect();
        assert_eq!(sends.len(), 2);
        assert!(sends[1].0 - sends[0].0 < 200 * MS);
        // the reduction: Reno halves, CUBIC keeps 717/1024
        let entry = sim
            .samples
            .windows(2)
            .find(|w| w[1].ca == CaState::Recovery)
            .unwrap();
        let w = entry[0].cwnd;
        let expect = match cc {
            CongestionControl::Reno => (w / 2).max(2),
            CongestionControl::Cubic => (w * 717 / 1024).max(2),
            CongestionControl::Bbr | CongestionControl::Dctcp => {
                unreachable!("the loop runs Reno and CUBIC")
            }
        };
        assert_eq!(entry[1].ssthresh, expect);
        // PRR ends the recovery with cwnd = ssthresh
        let exit = sim
            .samples
            .windows(2)
            .find(|s| s[0].ca == CaState::Recovery && s[1].ca == CaState::Open)
            .unwrap();
        assert!(
            exit[1].cwnd >= expect && exit[1].cwnd <= expect + 2,
            "{:?}",
            exit[1]
        );
    }
}

/// The ACK that last advanced snd_una before `t`: the sample taken on its arrival.
fn last_advance_before(sim: &Sim, t: Nanos) -> Sample {
    let before: Vec<_> = sim.samples.iter().filter(|s| s.t < t).collect();
    before
        .windows(2)
        .rev()
        .find(|w| w[1].bytes_acked > w[0].bytes_acked)
        .map(|w| w[1].clone())
        .unwrap()
}

/// A 30-segment transfer on a 10 Mbit/s, 20 ms RTT path whose last two segments are dropped.
fn tail_loss(client: Config) -> Sim {
    let mut path = PathCfg::new(10_000_000, 10 * MS, 100);
    path.drop_offsets.insert(28 * 1448);
    path.drop_offsets.insert(29 * 1448);
    let mut sim = Sim::new(client, cfg(), path, 30 * 1448);
    sim.run_to_completion(60 * SEC);
    sim
}

/// The `n`th (from 0) transmission of the data segment at payload offset `off`.
fn nth_send(sim: &Sim, off: u64, n: usize) -> Nanos {
    sim.data_sent()
        .into_iter()
        .filter(|d| d.1 == off)
        .nth(n)
        .unwrap()
        .0
}

/// Tail loss repaired by a loss probe, not an RTO (RFC 8985 §7, Linux's `tcp_early_retrans = 3`): the
/// last two of 30 segments are dropped, so no duplicate ACK can come. The last ACK that advances
/// snd_una (for 28 segments) arms the probe timer instead of the RTO (`tcp_set_xmit_timer` →
/// `tcp_schedule_loss_probe`): PTO = 2·srtt + `TCP_TIMEOUT_MIN` (2 ms; two segments are out, so no
/// delayed-ACK allowance), well before the RTO of srtt + 200 ms. When it fires no new data is left (the
/// FIN rides on segment 29), so segment 29 is sent again (`TCPLossProbes` 1). Its SACK comes back one
/// RTT later and shows RACK that segment 28, sent before it and long unacknowledged, is lost: fast
/// recovery retransmits it at once. No timeout; two retransmissions, one recovery.
#[test]
fn tail_loss_probe_not_rto() {
    let sim = tail_loss(cfg());
    let st = sim.hosts[0].stats();
    assert_eq!(st.timeouts, 0);
    assert_eq!(st.loss_probes, 1);
    assert_eq!(st.retransmits, 2);
    assert_eq!(st.fast_retransmits, 1);
    assert_eq!(st.lost_retransmits, 0);
    assert_eq!(sim.hosts[1].stats().bytes_delivered, 30 * 1448);
    let probe = nth_send(&sim, 29 * 1448, 1);
    let last_adv = last_advance_before(&sim, probe);
    assert_eq!(last_adv.bytes_acked, 28 * 1448);
    // 2·srtt from Linux's srtt_us >> 2 may exceed twice the reported srtt by 1 ns of rounding.
    let pto = probe - last_adv.t;
    assert!(
        pto == 2 * last_adv.srtt + 2 * MS || pto == 2 * last_adv.srtt + 2 * MS + 1,
        "probe {pto} ns after the last advance, srtt {}",
        last_adv.srtt
    );
    assert!(pto < last_adv.rto, "the probe leaves before the RTO would");
    let rexmit = nth_send(&sim, 28 * 1448, 1);
    assert!(
        rexmit - probe >= 20 * MS && rexmit - probe < 30 * MS,
        "segment 28 goes again when the probe's SACK is back, one RTT later: {} ns",
        rexmit - probe
    );
}

/// The same tail loss without loss probes (`tcp_early_retrans = 0`): only the RTO repairs it. The timer
/// was last re-armed by the last ACK that advanced snd_una, with RTO = srtt + rttvar, where Linux's
/// rttvar is max(4·mdev, TCP_RTO_MIN) = 200 ms on this quiet path. So the retransmission leaves
/// exactly at that ACK's time + srtt + 200 ms. Then cwnd = 1 and go-back-N resends both segments.
#[test]
fn tail_loss_rto_without_tlp() {
    let mut c = cfg();
    c.tlp = false;
    let sim = tail_loss(c);
    let st = sim.hosts[0].stats();
    assert_eq!(st.timeouts, 1);
    assert_eq!(st.retransmits, 2);
    assert_eq!(st.fast_retransmits, 0);
    assert_eq!(st.loss_probes, 0);
    assert_eq!(sim.hosts[1].stats().bytes_delivered, 30 * 1448);
    let rexmit = nth_send(&sim, 28 * 1448, 1);
    let last_adv = last_advance_before(&sim, rexmit);
    assert_eq!(last_adv.bytes_acked, 28 * 1448);
    assert_eq!(last_adv.rto, last_adv.srtt + 200 * MS);
    assert_eq!(rexmit, last_adv.t + last_adv.rto);
    // After the timeout: Loss state, cwnd 1 → the second segment goes out
    // only after the first is acknowledged (one RTT later).
    let second = nth_send(&sim, 29 * 1448, 1);
    assert!(
        second - rexmit >= 20 * MS,
        "go-back-N in slow start from cwnd 1"
    );
}

/// A 3.7 s blackout of the forward path: the head is retransmitted at
/// RTO, then 2·RTO, 4·RTO, ... later (tcp_retransmit_timer doubles icsk_rto),
/// and once the path is back the transfer completes with every byte. The
/// queue (2000 packets) is larger than the whole transfer, so the blackout
/// is the only loss and every timeout is one of the head's retransmissions.
#[test]
fn blackout_backoff_doubles() {
    let mut path = PathCfg::new(10_000_000, 10 * MS, 2000);
    path.blackout = Some((300 * MS, 4 * SEC));
    let mut sim = Sim::new(cfg(), cfg(), path, 2_000_000);
    sim.run_to_completion(120 * SEC);
    assert_eq!(sim.hosts[1].stats().bytes_delivered, 2_000_000);
    let st = sim.hosts[0].stats();
    // the head at the blackout: the first segment retransmitted
    let first_rx = {
        let sends = sim.data_sent();
        let mut seen = std::collections::BTreeSet::new();
        sends.iter().find(|d| !seen.insert(d.1)).unwrap().1
    };
    let times: Vec<Nanos> = sim
        .data_sent()
        .into_iter()
        .filter(|d| d.1 == first_rx)
        .map(|d| d.0)
        .collect();
    assert!(times.len() >= 5, "{times:?}");
    let gaps: Vec<Nanos> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // gaps[0] is original → first RTO; the next ones double exactly
    for w in gaps[1..].windows(2) {
        assert_eq!(w[1], 2 * w[0], "{gaps:?}");
    }
    assert_eq!(st.timeouts as usize, times.len() - 1);
    eprintln!("head retransmissions at {times:?}, gaps {gaps:?}");
}

/// CUBIC after one loss follows W(t) = C (t − K)³ + Wmax, C = 0.4,
/// K = ∛((Wmax − cwnd_epoch)/C) with cwnd_epoch = ssthresh = Wmax·717/1024.
/// Path: 200 Mbit/s, 50 ms one way, unlimited queue, so the window never
/// fills the pipe (BDP ≈ 1667 segments) and the RTT stays 100 ms; HyStart
/// off so slow start ends with the scripted drop of segment 700.
/// The kernel aims cwnd at the curve one min-RTT ahead (t + delay_min) and
/// reaches the target within one RTT of ACKs, so at time τ since the epoch
/// cwnd lies in [W(τ) − 3, W(τ + rtt) + 3] (2 segments for integer rounding
/// and cnt ≥ 2, one for the ACK clock's phase: the receiver ACKs at once each
/// segment that ends a write, PSH, and moving those ACKs moves a step of cwnd
/// past a sampling instant), widened by W' × 10 ms for cubic_root's ≈0.2 %
/// error on K and the 1 ms jiffy.
#[test]
fn cubic_follows_the_cubic_curve() {
    let mut c = cfg();
    c.hystart = false;
    let mut path = PathCfg::new(200_000_000, 50 * MS, 1_000_000);
    path.drop_offsets.insert(700 * 1448);
    let mut sim = Sim::new(c, cfg(), path, 1 << 40);
    sim.run_until(3 * SEC);
    let i = sim
        .samples
        .iter()
        .position(|s| s.ca == CaState::Recovery)
        .unwrap();
    let wmax = sim.samples[i - 1].cwnd as f64;
    let ssthresh = sim.samples[i].ssthresh as f64;
    assert_eq!(
        sim.samples[i].ssthresh,
        sim.samples[i - 1].cwnd * 717 / 1024
    );
    let exit = sim.samples[i..]
        .iter()
        .find(|s| s.ca == CaState::Open)
        .unwrap()
        .clone();
    let epoch = exit.t;
    let cc = 0.4f64;
    let k = ((wmax - ssthresh) / cc).cbrt();
    let w = |t: f64| cc * (t - k).powi(3) + wmax;
    let dw = |t: f64| 3.0 * cc * (t - k).powi(2);
    sim.run_until(epoch + (k * 1e9) as u64 + SEC);
    let rtt = 0.1;
    let mut checked = 0;
    let mut max_err: f64 = 0.0;
    let mut tau = 0.3;
    while tau < k + 1.0 {
        let s = last_sample_at(&sim, epoch + (tau * 1e9) as u64);
        let cw = s.cwnd as f64;
        let slack = 3.0 + dw(tau) * 0.01;
        let lo = w(tau) - slack;
        let hi = w(tau + rtt) + slack;
        assert!(
            cw >= lo && cw <= hi,
            "tau {tau:.2}: cwnd {cw} not in [{lo:.1}, {hi:.1}] (Wmax {wmax}, K {k:.3})"
        );
        max_err = max_err.max((cw - w(tau + rtt / 2.0)).abs());
        checked += 1;
        tau += 0.1;
    }
    assert!(checked > 50);
    eprintln!("CUBIC: Wmax {wmax}, ssthresh {ssthresh}, K {k:.3} s, max |cwnd - W(t+rtt/2)| = {max_err:.1} segments over {checked} samples");
    assert_eq!(sim.hosts[0].stats().timeouts, 0);
}

/// Reno's sawtooth on 10 Mbit/s, 20 ms RTT, 17-packet queue: every loss
/// halves cwnd (ssthresh = cwnd/2, cwnd = ssthresh at the end of recovery),
/// and between losses cwnd grows by one segment per window of ACKed
/// segments: from w0 to w1 takes Σ_{w=w0}^{w1−1} w = (w1−w0)(w0+w1−1)/2
/// segments ACKed, within two windows (the ACKs in flight at either end).
#[test]
fn reno_sawtooth_halves() {
    let mut c = cfg();
    c.cc = CongestionControl::Reno;
    let mut sim = Sim::new(c, cfg(), PathCfg::new(10_000_000, 10 * MS, 17), 1 << 40);
    sim.run_until(30 * SEC);
    let s = &sim.samples;
    let mut entries = vec![];
    let mut exits = vec![];
    for i in 1..s.len() {
        if s[i - 1].ca != CaState::Recovery && s[i].ca == CaState::Recovery {
            assert_eq!(s[i].ssthresh, (s[i - 1].cwnd / 2).max(2), "at {}", s[i].t);
            entries.push(i);
        }
        if s[i - 1].ca == CaState::Recovery && s[i].ca == CaState::Open {
            assert_eq!(s[i].cwnd, s[i].ssthresh);
            exits.push(i);
        }
    }
    assert!(entries.len() >= 5, "{} losses", entries.len());
    let mut epochs = 0;
    for &x in &exits {
        if let Some(&e) = entries.iter().find(|&&e| e > x) {
            let (w0, w1) = (s[x].cwnd as u64, s[e - 1].cwnd as u64);
            let acked = (s[e - 1].bytes_acked - s[x].bytes_acked) / 1448;
            let predicted = (w1 - w0) * (w0 + w1 - 1) / 2;
            assert!(
                acked.abs_diff(predicted) <= 2 * w1,
                "w0 {w0} w1 {w1} acked {acked} predicted {predicted}"
            );
            // the peak is about BDP + queue = 16.7 + 17 + 1 in flight
            assert!((30..=40).contains(&w1), "peak {w1}");
            epochs += 1;
        }
    }
    assert!(epochs >= 4);
    assert_eq!(sim.hosts[0].stats().timeouts, 0);
}

/// Byte-count transfers of awkward sizes finish cleanly: the receiver gets
/// exactly the bytes written, the sender sees all acknowledged, the client
/// ends in TIME_WAIT and the server in CLOSED.
#[test]
fn byte_count_transfers_terminate() {
    let variants: Vec<(&str, Config)> = vec![
        ("default", cfg()),
        (
            "nosack",
            Config {
                sack: false,
                ..cfg()
            },
        ),
        (
            "nots",
            Config {
                timestamps: false,
                ..cfg()
            },
        ),
        (
            "reno",
            Config {
                cc: CongestionControl::Reno,
                ..cfg()
            },
        ),
        (
            "nodelack",
            Config {
                delayed_ack: false,
                ..cfg()
            },
        ),
    ];
    for (name, c) in variants {
        for &n in &[0u64, 1, 1447, 1448, 1449, 100_000, 3_000_000] {
            let mut path = PathCfg::new(10_000_000, 5 * MS, 20);
            if n > 10_000 {
                path.drop_offsets.insert(3 * 1448);
            }
            let mut sim = Sim::new(c.clone(), c.clone(), path, n);
            sim.run_to_completion(300 * SEC);
            let (a, b) = (sim.hosts[0].stats(), sim.hosts[1].stats());
            assert_eq!(b.bytes_delivered, n, "{name} {n}");
            assert_eq!(a.bytes_acked, n, "{name} {n}");
            assert_eq!(a.state, State::TimeWait, "{name} {n}");
            assert_eq!(b.state, State::Closed, "{name} {n}");
            assert!(sim.hosts[0].poll_at().is_none() && sim.hosts[1].poll_at().is_none());
            sim.hosts[0].check_invariants().unwrap();
        }
    }
}

/// Same inputs, same trace: every packet delivered, with its time, twice.
#[test]
fn deterministic() {
    let run = || {
        let mut path = PathCfg::new(10_000_000, 10 * MS, 17);
        path.drop_offsets.insert(50 * 1448);
        path.blackout = Some((2 * SEC, 2 * SEC + 300 * MS));
        let mut sim = Sim::new(cfg(), cfg(), path, 5_000_000);
        sim.run_to_completion(120 * SEC);
        (sim.trace, sim.hosts[0].stats(), sim.hosts[1].stats())
    };
    let a = run();
    let b = run();
    assert!(a.0.len() > 5000);
    assert_eq!(a, b);
}

/// HyStart's exit is counted as `nstat` counts it (`TCPHystartTrainDetect`/`TrainCwnd`,
/// `TCPHystartDelayDetect`/`DelayCwnd`): one CUBIC flow through 10 Mbit/s, 20 ms RTT and a queue too long
/// to overflow in 3 s ends slow start once, by one of the two detectors, at the cwnd that became its
/// ssthresh (nothing is lost, so nothing lowers it after). Reno has no HyStart.
#[test]
fn hystart_exit_is_counted() {
    for cc in [CongestionControl::Cubic, CongestionControl::Reno] {
        let mut c = cfg();
        c.cc = cc;
        let mut sim = Sim::new(c, cfg(), PathCfg::new(10_000_000, 10 * MS, 10_000), 1 << 40);
        sim.run_until(3 * SEC);
        let st = sim.hosts[0].stats();
        let h = st.hystart;
        assert_eq!(st.retransmits, 0, "{cc:?}");
        if cc == CongestionControl::Reno {
            assert_eq!(h, HystartStats::default());
            continue;
        }
        assert_eq!(h.train_detect + h.delay_detect, 1, "{h:?}");
        assert_eq!(h.train_cwnd + h.delay_cwnd, st.ssthresh as u64, "{h:?}");
        assert!(st.ssthresh >= 16, "HyStart acts from 16 segments on: {h:?}");
    }
}

/// The smallest MTU TCP works through: __tcp_mtu_to_mss floors the MSS at tcp_min_snd_mss (48) before
/// tcp_mtu_to_mss takes the timestamp option's 12 bytes off, so at MTU 88 a data segment carries
/// 48 − 12 = 36 bytes, 36 + 32 + 20 = 88 on the wire (the floor taken after the options made it 48
/// bytes, a 100-byte packet the 88-byte link drops: nothing was delivered).
#[test]
fn the_smallest_segment_fits_an_88_byte_mtu() {
    let mut sim = Sim::new(
        Config::mss_from_mtu(88),
        Config::mss_from_mtu(88),
        PathCfg::new(10_000_000, 10 * MS, 100),
        10 * 36,
    );
    sim.run_to_completion(30 * SEC);
    assert_eq!(sim.hosts[0].mss(), 36);
    let d = sim
        .sent
        .iter()
        .find(|(_, h, s)| *h == 0 && s.payload_len > 0)
        .unwrap();
    assert_eq!(wire_bytes(&d.2), 88);
}
