//! Running a scenario: start its traffic, sample it, and gather the results.

use crate::apps::{App, Ping, UdpSender, UdpSink};
use crate::measure::{FlowProbe, Recorder, RttStats};
use crate::net::{AppId, NodeId, Port};
use crate::scenario::{Scenario, Traffic, TrafficKind};
use crate::tcpapp::{Iperf3, TcpEndpoint, IPERF3_COOKIE};
use crate::wire::{PROTO_TCP, PROTO_UDP};
use serde::Serialize;
use tclab_core::Nanos;

/// One traffic entry's result (all its streams together).
#[derive(Clone, Debug, Serialize)]
pub struct FlowResult {
    pub name: String,
    pub kind: String,
    pub from: String,
    pub to: String,
    pub streams: u32,
    /// Payload bytes the senders put out (UDP) or had acknowledged (TCP).
    pub sent_bytes: u64,
    /// Payload bytes delivered to the receiving applications (in order, for TCP).
    pub delivered_bytes: u64,
    /// delivered × 8 / active time (start to stop, or to the end of the run).
    pub goodput_bps: f64,
    /// UDP: datagrams sent but not received.
    pub lost_packets: u64,
    /// TCP: segments retransmitted.
    pub retransmits: u64,
    /// TCP: the senders' loss-recovery counters, named as `nstat` names Linux's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nstat: Option<TcpNstat>,
}

/// A TCP entry's loss recovery, summed over its senders, under `nstat`'s names for Linux's counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TcpNstat {
    /// Retransmission timeouts.
    #[serde(rename = "TCPTimeouts")]
    pub timeouts: u64,
    /// Entries into fast recovery (`tcp_enter_recovery`; tclab's hosts negotiate SACK, so Linux counts
    /// these as TCPSackRecovery).
    #[serde(rename = "TCPSackRecovery")]
    pub sack_recoveries: u64,
    /// Tail loss probes sent.
    #[serde(rename = "TCPLossProbes")]
    pub loss_probes: u64,
    /// Loss probes that repaired a loss.
    #[serde(rename = "TCPLossProbeRecovery")]
    pub loss_probe_recoveries: u64,
    /// Retransmissions found lost (by RACK or a timeout) and sent again.
    #[serde(rename = "TCPLostRetransmit")]
    pub lost_retransmits: u64,
    /// Packets delivered by ACKs that echoed a CE mark. Written when 0 too, as the others are: a
    /// report or script comparing an ECN flow with one without reads the same path in both.
    #[serde(rename = "TCPDeliveredCE")]
    pub delivered_ce: u64,
    /// D-SACKs received for data below the ACK: the peer got a segment twice.
    #[serde(rename = "TCPDSACKRecv")]
    pub dsack_recv: u64,
    /// D-SACKs the receivers sent for duplicates below what they had acknowledged.
    #[serde(rename = "TCPDSACKOldSent")]
    pub dsack_old_sent: u64,
    /// Recoveries undone at their end (timestamps showed the originals arrived).
    #[serde(rename = "TCPFullUndo")]
    pub full_undo: u64,
    /// Recoveries undone on a partial ACK.
    #[serde(rename = "TCPPartialUndo")]
    pub partial_undo: u64,
    /// Reductions undone because D-SACKs showed every retransmission needless.
    #[serde(rename = "TCPDSACKUndo")]
    pub dsack_undo: u64,
    /// Timeouts undone.
    #[serde(rename = "TCPLossUndo")]
    pub loss_undo: u64,
    /// Timeouts F-RTO found spurious.
    #[serde(rename = "TCPSpuriousRTOs")]
    pub spurious_rtos: u64,
    /// Slow starts CUBIC's HyStart ended by its ACK-train detector, and their cwnds summed.
    #[serde(rename = "TCPHystartTrainDetect")]
    pub hystart_train_detect: u64,
    #[serde(rename = "TCPHystartTrainCwnd")]
    pub hystart_train_cwnd: u64,
    /// Slow starts HyStart ended by its delay-increase detector, and their cwnds summed.
    #[serde(rename = "TCPHystartDelayDetect")]
    pub hystart_delay_detect: u64,
    #[serde(rename = "TCPHystartDelayCwnd")]
    pub hystart_delay_cwnd: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PingResult {
    pub name: String,
    pub from: String,
    pub to: String,
    pub sent: u64,
    pub received: u64,
    pub rtt: RttStats,
    /// (send time, RTT) in nanoseconds, for the RTT plot and CSV.
    #[serde(skip)]
    pub samples: Vec<(Nanos, Nanos)>,
}

/// What a run produced.
pub struct Outcome {
    pub recorder: Recorder,
    pub flows: Vec<FlowResult>,
    pub pings: Vec<PingResult>,
    /// `tc -s qdisc|class|filter show` of every device of every node with a policy, at the end.
    pub tc_show: Vec<(String, String, String)>,
    pub events: u64,
    pub frames: u64,
}

/// The applications behind one traffic entry.
struct Started {
    senders: Vec<AppId>,
    receivers: Vec<AppId>,
    /// Each stream's source port (a ping's ICMP identifier).
    ports: Vec<u16>,
    /// iperf3 streams: each one's connect delay after its control connection read CREATE_STREAMS.
    stream_delays: Vec<Nanos>,
}

fn out_iface(sc: &Scenario, from: NodeId, to: NodeId) -> usize {
    sc.net.nodes[from].routes[to].expect("routes checked when the scenario was read")
}

fn start_traffic(sc: &mut Scenario, t: &Traffic, next_port: &mut u16) -> Result<Started, String> {
    let out_iface = out_iface(sc, t.from, t.to);
    let src = sc.net.ifaces[out_iface].addr;
    let dst = sc
        .net
        .node_addr(t.to)
        .ok_or("destination has no interface")?;
    let mut st = Started {
        senders: Vec::new(),
        receivers: Vec::new(),
        ports: Vec::new(),
        stream_delays: Vec::new(),
    };
    // What differs between two runs of the same test on Linux comes from the run's seed: no stream starts
    // exactly at its entry's start (a process starts, iperf opens its streams one after another) but up
    // to one packet interval (UDP) or 10 ms (TCP) late, a ping's phase against the traffic is anywhere in
    // one interval, and each TCP end draws its initial sequence number.
    let mut spread = crate::rng::Rng::stream(sc.net.seed, &format!("start:{}", t.name));
    for s in 0..t.streams {
        let sport = *next_port;
        *next_port = next_port.checked_add(1).ok_or("out of source ports")?;
        st.ports.push(sport);
        let dport = t.port.wrapping_add(s as u16);
        match &t.kind {
            TrafficKind::Udp { rate_bps, length } => {
                let interval = *length as u64 * 8 * 1_000_000_000 / (*rate_bps).max(1);
                let start = t.start + spread.below(interval.max(1));
                let tx = UdpSender::new(
                    src, dst, sport, dport, t.tos, *length, *rate_bps, start, t.stop,
                );
                let a = sc.net.add_app(t.from, App::UdpSender(tx), Some(start));
                let b = sc.net.add_app(t.to, App::UdpSink(UdpSink::default()), None);
                // iperf3's UDP server: its first datagram, from whatever address, makes its peer.
                sc.net.listen(t.to, PROTO_UDP, dport, (src, sport), b);
                st.senders.push(a);
                st.receivers.push(b);
            }
            TrafficKind::Ping { interval, size } => {
                let ident = sport;
                let start = t.start + spread.below((*interval).max(1));
                let p = Ping::new(src, dst, ident, *size, t.tos, *interval, start, t.stop);
                let a = sc.net.add_app(t.from, App::Ping(p), Some(start));
                sc.net.bind_ping(t.from, ident, a);
                st.senders.push(a);
            }
            TrafficKind::Tcp {
                bytes,
                cc,
                ecn,
                fq_rate,
                paced,
                iperf3,
            } => {
                let dev = sc.net.device(out_iface);
                let mtu = dev.map_or(1500, |d| d.mtu);
                let mut cfg = tclab_tcp::Config::mss_from_mtu(mtu);
                if let Some(d) = dev {
                    cfg.set_route_gso(d.gso_max_size, d.gso_max_segs);
                }
                cfg.ecn = *ecn;
                cfg.max_pacing_rate = *fq_rate;
                cfg.paced = *paced;
                cfg.cc = match cc.as_str() {
                    "reno" => tclab_tcp::CongestionControl::Reno,
                    "bbr" => tclab_tcp::CongestionControl::Bbr,
                    "dctcp" => tclab_tcp::CongestionControl::Dctcp,
                    _ => tclab_tcp::CongestionControl::Cubic,
                };
                // iperf3's streams connect once its control connection has read CREATE_STREAMS,
                // one after another: this is the delay from then.
                let start = if *iperf3 {
                    IPERF3_CONNECT_AT
                        + s as u64 * IPERF3_CONNECT_TURN
                        + spread.below(IPERF3_CONNECT_JITTER)
                } else {
                    t.start + spread.below(10_000_000)
                };
                let isn = spread.next_u32();
                let mut tx = TcpEndpoint::sender(
                    cfg.clone(),
                    isn,
                    (src, sport),
                    (dst, dport),
                    t.tos,
                    *bytes,
                    start,
                    t.stop,
                );
                if *iperf3 {
                    // Connects and starts its data when the control connection says (`iperf3_control`).
                    tx = tx
                        .with_cookie(IPERF3_COOKIE, Nanos::MAX)
                        .with_iperf3(Iperf3::Stream);
                }
                let a = sc
                    .net
                    .add_app(t.from, App::Tcp(Box::new(tx)), (!*iperf3).then_some(start));
                if *iperf3 {
                    st.stream_delays.push(start);
                }
                sc.net.bind(t.from, PROTO_TCP, sport, dst, dport, a);
                // Each end's MSS comes from its own interface's MTU, as on Linux; the handshake settles
                // on the smaller.
                let back = sc.net.nodes[t.to].routes[t.from]
                    .expect("routes checked when the scenario was read");
                let mut rx_cfg =
                    tclab_tcp::Config::mss_from_mtu(sc.net.device(back).map_or(1500, |d| d.mtu));
                rx_cfg.cc = cfg.cc;
                let rx = TcpEndpoint::receiver(
                    rx_cfg,
                    spread.next_u32(),
                    (dst, dport),
                    (src, sport),
                    t.tos,
                );
                let b = sc.net.add_app(t.to, App::Tcp(Box::new(rx)), None);
                // A listening socket: its connection is whatever 4-tuple the SYN brings (a NAT on
                // the way may have rewritten the source).
                sc.net.listen(t.to, PROTO_TCP, dport, (src, sport), b);
                st.senders.push(a);
                st.receivers.push(b);
            }
        }
    }
    let ctl = if matches!(t.kind, TrafficKind::Tcp { iperf3: true, .. }) {
        Some(iperf3_control(
            sc,
            t,
            &st,
            &mut spread,
            next_port,
            src,
            dst,
        )?)
    } else {
        None
    };
    // The sending end runs in the entry's net_cls cgroup (the receiving end in none), its control
    // connection too (one process).
    for &a in st.senders.iter().chain(&ctl) {
        sc.net.set_app_classid(a, t.cgroup_classid);
    }
    Ok(st)
}

/// iperf3's control connection for an entry's streams (`Iperf3`): from a port of its own to the entry's
/// port, opened at the entry's start. Its messages cross the simulated path, so behind another entry's
/// queue the streams connect and start late, as a second iperf3 client's do on Linux
/// (docs/KERNEL_VS_SIM.md, "BBR and CUBIC from two iperf3 clients"). Not a flow of the summary.
/// Returns its client.
fn iperf3_control(
    sc: &mut Scenario,
    t: &Traffic,
    st: &Started,
    spread: &mut crate::rng::Rng,
    next_port: &mut u16,
    src: u32,
    dst: u32,
) -> Result<AppId, String> {
    let sport = *next_port;
    *next_port = next_port.checked_add(1).ok_or("out of source ports")?;
    let mss = |iface: usize| {
        tclab_tcp::Config::mss_from_mtu(sc.net.device(iface).map_or(1500, |d| d.mtu))
    };
    let cfg = mss(out_iface(sc, t.from, t.to));
    let rx_cfg = mss(out_iface(sc, t.to, t.from));
    let (isn, rx_isn) = (spread.next_u32(), spread.next_u32());
    let client = TcpEndpoint::sender(
        cfg,
        isn,
        (src, sport),
        (dst, t.port),
        t.tos,
        Some(0),
        t.start,
        t.stop,
    )
    .with_cookie(IPERF3_COOKIE, Nanos::MAX)
    .with_iperf3(Iperf3::CtlClient {
        streams: st
            .senders
            .iter()
            .copied()
            .zip(st.stream_delays.iter().copied())
            .collect(),
        data_at: IPERF3_DATA_AT,
        write_turn: IPERF3_WRITE_TURN,
        step: 0,
    });
    let a = sc
        .net
        .add_app(t.from, App::Tcp(Box::new(client)), Some(t.start));
    sc.net.bind(t.from, PROTO_TCP, sport, dst, t.port, a);
    let server = TcpEndpoint::receiver(rx_cfg, rx_isn, (dst, t.port), (src, sport), t.tos)
        .with_iperf3(Iperf3::CtlServer {
            streams: t.streams,
            cookies: 0,
            step: 0,
        });
    let b = sc.net.add_app(t.to, App::Tcp(Box::new(server)), None);
    sc.net.listen(t.to, PROTO_TCP, t.port, (src, sport), b);
    for &r in &st.receivers {
        if let App::Tcp(e) = &mut sc.net.apps[r] {
            e.set_iperf3(Iperf3::StreamServer {
                ctl: b,
                told: false,
            });
        }
    }
    Ok(a)
}

/// iperf3 3.12's own time between its control connection's messages and its streams (this machine,
/// `chrt -f 20`, a tcpdump on the client's veth; docs/KERNEL_VS_SIM.md, "BBR and CUBIC from two
/// iperf3 clients"): the first stream's SYN 0.3-0.4 ms after CREATE_STREAMS could arrive (the control
/// connection's SYN, over an empty path), the next 0.3-1.1 ms apart (`-P 4`), the data 0.5-1.4 ms
/// after the last stream's SYN.
const IPERF3_CONNECT_AT: Nanos = 300_000;
const IPERF3_CONNECT_TURN: Nanos = 500_000;
const IPERF3_CONNECT_JITTER: Nanos = 500_000;
/// From TEST_RUNNING's arrival to the first stream's data.
const IPERF3_DATA_AT: Nanos = 500_000;
/// iperf3 writes each stream's first 128 KB in turn: the streams' data starts this far apart
/// (0.06-0.19 ms in the same trace).
const IPERF3_WRITE_TURN: Nanos = 100_000;

/// Run the scenario to its end. `progress` is called at each sample with the virtual time reached.
pub fn run(sc: &mut Scenario, progress: &mut dyn FnMut(Nanos)) -> Result<Outcome, String> {
    let mut next_port = 32768; // the start of Linux's ephemeral port range
    let traffic = sc.traffic.clone();
    let mut started = Vec::new();
    for t in &traffic {
        started.push(start_traffic(sc, t, &mut next_port)?);
    }
    if let Some(tr) = sc.net.trace.as_mut() {
        let flows: Vec<(String, u8, Vec<u16>)> = traffic
            .iter()
            .zip(&started)
            .map(|(t, s)| {
                let proto = match t.kind {
                    TrafficKind::Tcp { .. } => 6,
                    TrafficKind::Udp { .. } => 17,
                    TrafficKind::Ping { .. } => 1,
                };
                (t.name.clone(), proto, s.ports.clone())
            })
            .collect();
        tr.begin(&flows);
    }
    let probes = traffic
        .iter()
        .zip(&started)
        .filter(|(t, _)| !matches!(t.kind, TrafficKind::Ping { .. }))
        .map(|(t, s)| FlowProbe {
            name: t.name.clone(),
            receivers: s.receivers.clone(),
        })
        .collect();
    sc.net.register_ifbs();
    let ifaces = (0..sc.net.ifaces.len())
        .map(Port::Iface)
        .chain((0..sc.net.vdevs.len()).map(Port::Ifb))
        .chain(sc.net.teqls.keys().copied().map(Port::Teql))
        .collect();
    let mut rec = Recorder::new(sc.sample, ifaces, probes);
    sc.net
        .run_with_progress(sc.duration, Some(sc.sample), &mut rec, progress);
    let end = sc.duration;
    let name = |n: NodeId| sc.net.nodes[n].name.clone();
    let mut flows = Vec::new();
    let mut pings = Vec::new();
    for (t, s) in traffic.iter().zip(&started) {
        match &t.kind {
            TrafficKind::Ping { .. } => {
                let mut samples = Vec::new();
                let mut sent = 0;
                for &a in &s.senders {
                    if let App::Ping(p) = &sc.net.apps[a] {
                        samples.extend_from_slice(&p.rtts);
                        sent += p.sent;
                    }
                }
                let rtts: Vec<Nanos> = samples.iter().map(|&(_, r)| r).collect();
                pings.push(PingResult {
                    name: t.name.clone(),
                    from: name(t.from),
                    to: name(t.to),
                    sent,
                    received: rtts.len() as u64,
                    rtt: RttStats::of(&rtts),
                    samples,
                });
            }
            _ => {
                let delivered: u64 = s
                    .receivers
                    .iter()
                    .map(|&a| sc.net.apps[a].delivered_bytes())
                    .sum();
                let (mut sent_bytes, mut sent_pkts, mut recv_pkts) = (0, 0, 0);
                let mut retransmits = 0;
                let mut nstat = TcpNstat::default();
                for &a in &s.senders {
                    match &sc.net.apps[a] {
                        App::UdpSender(u) => {
                            sent_bytes += u.sent_bytes;
                            sent_pkts += u.sent_packets;
                        }
                        App::Tcp(t) => {
                            let st = t.stats();
                            sent_bytes += st.bytes_acked;
                            retransmits += st.retransmits;
                            nstat.timeouts += st.timeouts;
                            nstat.sack_recoveries += st.fast_retransmits;
                            nstat.loss_probes += st.loss_probes;
                            nstat.loss_probe_recoveries += st.loss_probe_recoveries;
                            nstat.lost_retransmits += st.lost_retransmits;
                            nstat.delivered_ce += st.delivered_ce as u64;
                            nstat.dsack_recv += st.undo.dsack_recv;
                            nstat.full_undo += st.undo.full_undo;
                            nstat.partial_undo += st.undo.partial_undo;
                            nstat.dsack_undo += st.undo.dsack_undo;
                            nstat.loss_undo += st.undo.loss_undo;
                            nstat.spurious_rtos += st.undo.spurious_rtos;
                            nstat.hystart_train_detect += st.hystart.train_detect;
                            nstat.hystart_train_cwnd += st.hystart.train_cwnd;
                            nstat.hystart_delay_detect += st.hystart.delay_detect;
                            nstat.hystart_delay_cwnd += st.hystart.delay_cwnd;
                        }
                        _ => {}
                    }
                }
                for &a in &s.receivers {
                    match &sc.net.apps[a] {
                        App::UdpSink(u) => recv_pkts += u.packets,
                        // The receiving end's counter (Linux counts it on the receiving host).
                        App::Tcp(t) => nstat.dsack_old_sent += t.stats().undo.dsack_old_sent,
                        _ => {}
                    }
                }
                // A flow is active from its start to its stop (or the end of the run); a byte count
                // that completed sooner is measured to its last delivery, as iperf -n reports it.
                let mut until = t.stop.min(end);
                if let TrafficKind::Tcp { bytes: Some(b), .. } = t.kind {
                    let done = s
                        .receivers
                        .iter()
                        .all(|&a| sc.net.apps[a].delivered_bytes() >= b);
                    if done {
                        until = s
                            .receivers
                            .iter()
                            .filter_map(|&a| match &sc.net.apps[a] {
                                App::Tcp(e) => Some(e.last_delivery_at),
                                _ => None,
                            })
                            .max()
                            .unwrap_or(until)
                            .min(until);
                    }
                }
                let active = until.saturating_sub(t.start).max(1);
                flows.push(FlowResult {
                    name: t.name.clone(),
                    kind: match t.kind {
                        TrafficKind::Tcp { .. } => "tcp".into(),
                        _ => "udp".into(),
                    },
                    from: name(t.from),
                    to: name(t.to),
                    streams: t.streams,
                    sent_bytes,
                    delivered_bytes: delivered,
                    goodput_bps: delivered as f64 * 8e9 / active as f64,
                    lost_packets: sent_pkts.saturating_sub(recv_pkts),
                    retransmits,
                    nstat: matches!(t.kind, TrafficKind::Tcp { .. }).then_some(nstat),
                });
            }
        }
    }
    let mut tc_show = Vec::new();
    let shaped: Vec<String> = sc.policies.iter().map(|(n, _)| n.clone()).collect();
    for node in sc.net.nodes.iter_mut() {
        if !shaped.contains(&node.name) {
            continue;
        }
        let devs: Vec<String> = node.engine.device_names();
        for dev in devs {
            let text = tclab_tc::show_device(&mut node.engine, &dev, end);
            tc_show.push((node.name.clone(), dev, text));
        }
    }
    Ok(Outcome {
        events: sc.net.events(),
        frames: sc.net.frames_sent(),
        recorder: rec,
        flows,
        pings,
        tc_show,
    })
}
