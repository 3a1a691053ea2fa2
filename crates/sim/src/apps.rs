//! Applications on the simulated hosts: iperf-like UDP senders and sinks, ping, and TCP endpoints.
//!
//! An application is a small state machine driven by two calls: `on_timer(now)` when the time it asked for
//! comes, and `on_receive(now, datagram)` when a packet for it arrives. Both may put datagrams in an
//! [`Outbox`]; the network sends them from the application's node. `next_timer()` tells when it wants to
//! be called again. Applications see parsed headers, never the qdiscs: what they send is shaped exactly as a
//! real host's traffic would be.

use crate::wire::{
    Datagram, Icmp, Ipv4, Udp, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, L4, PROTO_ICMP, PROTO_UDP,
};
use std::collections::BTreeMap;
use tclab_core::{Nanos, NSEC_PER_SEC};

/// Datagrams an application wants sent.
#[derive(Default)]
pub struct Outbox {
    pub datagrams: Vec<Datagram>,
    /// The departure time (`skb->tstamp`, EDT) of each datagram, index for index, when the sender
    /// stamps them (TCP); a datagram without one is due now.
    pub tstamps: Vec<Nanos>,
    /// The MSS of each datagram that is a GSO segment (TCP's super-packets), index for index; a
    /// datagram without one (or 0) is a single frame.
    pub gso_sizes: Vec<u16>,
    /// The application may have more to send once these are handed down and their verdicts told
    /// (a TCP socket sends one segment at a time, as `tcp_write_xmit` does): call [`App::resume`].
    pub more: bool,
    /// Other applications of the same iperf3 test to tell something (its control connection's steps).
    pub wakes: Vec<(crate::net::AppId, Wake)>,
}

impl Outbox {
    /// Empty, for the next round (the vectors keep their memory).
    pub fn clear(&mut self) {
        self.datagrams.clear();
        self.tstamps.clear();
        self.gso_sizes.clear();
        self.more = false;
        self.wakes.clear();
    }
}

/// What one end of an iperf3 test tells another (crates/sim/src/tcpapp.rs, [`Iperf3`](crate::tcpapp::Iperf3)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A data stream connects at this time (the client read CREATE_STREAMS).
    Connect(Nanos),
    /// A data stream starts its data at this time (the client read TEST_RUNNING).
    Data(Nanos),
    /// A data stream's cookie reached the server.
    Cookie,
}

/// Constant-bitrate UDP, like `iperf3 -u -b RATE -l LEN`: the rate counts payload bits, as iperf3's does.
pub struct UdpSender {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub tos: u8,
    pub payload: u32,
    /// Payload bits per second.
    pub rate_bps: u64,
    pub start: Nanos,
    pub stop: Nanos,
    /// Datagrams sent so far; the k-th leaves at start + k × payload × 8 / rate, so no rounding drift.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    next: Option<Nanos>,
}

impl UdpSender {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: u32,
        dst: u32,
        sport: u16,
        dport: u16,
        tos: u8,
        payload: u32,
        rate_bps: u64,
        start: Nanos,
        stop: Nanos,
    ) -> UdpSender {
        UdpSender {
            src,
            dst,
            sport,
            dport,
            tos,
            payload,
            rate_bps,
            start,
            stop,
            sent_packets: 0,
            sent_bytes: 0,
            next: Some(start),
        }
    }

    fn departure(&self, k: u64) -> Nanos {
        let ns = k as u128 * self.payload as u128 * 8 * NSEC_PER_SEC as u128
            / self.rate_bps.max(1) as u128;
        self.start + ns.min(u64::MAX as u128) as Nanos
    }

    fn on_timer(&mut self, now: Nanos, out: &mut Outbox) {
        while self.next.is_some_and(|t| t <= now) {
            if now >= self.stop {
                self.next = None;
                return;
            }
            out.datagrams.push(Datagram {
                ip: Ipv4 {
                    src: self.src,
                    dst: self.dst,
                    protocol: PROTO_UDP,
                    tos: self.tos,
                    ttl: 64,
                    ..Default::default()
                },
                l4: L4::Udp(Udp {
                    sport: self.sport,
                    dport: self.dport,
                    payload_len: self.payload,
                }),
            });
            self.sent_packets += 1;
            self.sent_bytes += self.payload as u64;
            self.next = Some(self.departure(self.sent_packets));
        }
    }
}

/// Counts what arrives on a UDP port (iperf3's server side).
#[derive(Default)]
pub struct UdpSink {
    pub packets: u64,
    /// Payload bytes received.
    pub bytes: u64,
}

/// `ping -i INTERVAL -s SIZE -Q TOS`: one echo request per interval, RTT of each reply.
pub struct Ping {
    pub src: u32,
    pub dst: u32,
    pub ident: u16,
    pub size: u32,
    pub tos: u8,
    pub interval: Nanos,
    pub start: Nanos,
    pub stop: Nanos,
    pub sent: u64,
    /// Send time of each probe still awaited, by sequence number.
    outstanding: BTreeMap<u16, Nanos>,
    /// (send time, round-trip time) of every answered probe, in arrival order.
    pub rtts: Vec<(Nanos, Nanos)>,
    next: Option<Nanos>,
}

impl Ping {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        src: u32,
        dst: u32,
        ident: u16,
        size: u32,
        tos: u8,
        interval: Nanos,
        start: Nanos,
        stop: Nanos,
    ) -> Ping {
        Ping {
            src,
            dst,
            ident,
            size,
            tos,
            interval,
            start,
            stop,
            sent: 0,
            outstanding: BTreeMap::new(),
            rtts: Vec::new(),
            next: Some(start),
        }
    }

    fn on_timer(&mut self, now: Nanos, out: &mut Outbox) {
        if self.next.is_none_or(|t| t > now) {
            return;
        }
        if now >= self.stop {
            self.next = None;
            return;
        }
        let seq = (self.sent & 0xffff) as u16;
        self.outstanding.insert(seq, now);
        self.sent += 1;
        out.datagrams.push(Datagram {
            ip: Ipv4 {
                src: self.src,
                dst: self.dst,
                protocol: PROTO_ICMP,
                tos: self.tos,
                ttl: 64,
                ..Default::default()
            },
            l4: L4::Icmp(Icmp {
                kind: ICMP_ECHO_REQUEST,
                code: 0,
                ident: self.ident,
                seq,
                payload_len: self.size,
            }),
        });
        self.next = Some(self.start + self.sent * self.interval);
    }

    fn on_receive(&mut self, now: Nanos, d: &Datagram) {
        if let L4::Icmp(i) = &d.l4 {
            if i.kind == ICMP_ECHO_REPLY {
                if let Some(sent) = self.outstanding.remove(&i.seq) {
                    self.rtts.push((sent, now - sent));
                }
            }
        }
    }

    /// Probes sent whose reply never came (or has not come yet).
    pub fn lost(&self) -> u64 {
        self.sent - self.rtts.len() as u64
    }
}

pub enum App {
    UdpSender(UdpSender),
    UdpSink(UdpSink),
    Ping(Ping),
    Tcp(Box<crate::tcpapp::TcpEndpoint>),
}

impl App {
    pub fn on_timer(&mut self, now: Nanos, out: &mut Outbox) {
        match self {
            App::UdpSender(u) => u.on_timer(now, out),
            App::Ping(p) => p.on_timer(now, out),
            App::Tcp(t) => t.on_timer(now, out),
            App::UdpSink(_) => {}
        }
    }

    /// `gso_size`: the MSS of a GSO packet that arrived whole (over a veth), else 0.
    pub fn on_receive(&mut self, now: Nanos, d: &Datagram, gso_size: u16, out: &mut Outbox) {
        match self {
            App::UdpSink(s) => {
                if let L4::Udp(u) = &d.l4 {
                    s.packets += 1;
                    s.bytes += u.payload_len as u64;
                }
            }
            App::Ping(p) => p.on_receive(now, d),
            App::Tcp(t) => t.on_receive(now, d, gso_size, out),
            App::UdpSender(_) => {}
        }
    }

    /// The datagrams of the last outbox (its `more` set) were handed down: what comes next.
    pub fn resume(&mut self, now: Nanos, out: &mut Outbox) {
        if let App::Tcp(t) = self {
            t.resume(now, out);
        }
    }

    /// A frame of `len` bytes this application sent is freed on its host: it left the NIC (TX
    /// completion), or a qdisc that had accepted it dropped it (for the sender, sent and lost). True if
    /// the application acted on it (its outbox and timer then need handling). UDP senders and ping keep
    /// no socket accounting: a lost datagram is simply never received.
    pub fn on_freed(&mut self, now: Nanos, len: u32, out: &mut Outbox) -> bool {
        match self {
            App::Tcp(t) => t.on_freed(now, len, out),
            _ => false,
        }
    }

    /// A qdisc on the node cut a GSO packet this application sent into `extra` + 1 frames, each an skb
    /// charged to its socket (TCP small queues).
    pub fn on_gso_split(&mut self, extra: u32) {
        if let App::Tcp(t) = self {
            t.on_gso_split(extra);
        }
    }

    /// The node's own qdisc refused a datagram this application sent (`NET_XMIT_DROP`), a GSO segment
    /// of `gso_size` if not 0.
    pub fn on_local_drop(&mut self, now: Nanos, d: &Datagram, gso_size: u16) {
        if let App::Tcp(t) = self {
            t.on_local_drop(now, d, gso_size);
        }
    }

    /// A sch_fq on the node took one of this application's packets and paces its socket from now on.
    pub fn on_paced_by_fq(&mut self) {
        if let App::Tcp(t) = self {
            t.conn.set_paced_by_fq();
        }
    }

    /// The node's own qdisc answered `NET_XMIT_CN` to a datagram this application sent: taken as sent,
    /// but its flow is congested.
    pub fn on_congestion_notified(&mut self, now: Nanos) {
        if let App::Tcp(t) = self {
            t.on_congestion_notified(now);
        }
    }

    /// Another end of the same iperf3 test told this one something.
    pub fn wake(&mut self, now: Nanos, w: Wake, out: &mut Outbox) {
        if let App::Tcp(t) = self {
            t.wake(now, w, out);
        }
    }

    pub fn next_timer(&self) -> Option<Nanos> {
        match self {
            App::UdpSender(u) => u.next,
            App::Ping(p) => p.next,
            App::Tcp(t) => t.next_timer(),
            App::UdpSink(_) => None,
        }
    }

    /// Payload bytes this application has received in order (its goodput numerator).
    pub fn delivered_bytes(&self) -> u64 {
        match self {
            App::UdpSink(s) => s.bytes,
            App::Tcp(t) => t.delivered_bytes(),
            _ => 0,
        }
    }
}
