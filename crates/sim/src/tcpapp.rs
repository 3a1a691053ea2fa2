//! A TCP endpoint on a simulated host: tclab-tcp's sans-IO connection, given real headers.
//!
//! The connection (crates/tcp) knows sequence numbers, windows and timers; this module turns its segments
//! into IPv4/TCP datagrams and back, and plays the application: an iperf3-like sender that writes a byte
//! count or keeps writing until its stop time, or a receiver that reads everything at once. The sender
//! writes as iperf3 does: non-blocking writes of 128 KB while the socket takes them, and after a short
//! one, nothing until the socket is writeable again (`select`); the send buffer decides how far ahead
//! of the network it gets (tclab-tcp's sndbuf.rs).
//! At its stop time a sender simply falls silent, as `iperf -t` ends its test (a byte count not yet
//! delivered by then stays undelivered).

use crate::apps::{Outbox, Wake};
use crate::net::AppId;
use crate::wire::{Datagram, Ipv4, Tcp, L4, PROTO_TCP};
use tclab_core::Nanos;
use tclab_tcp::{Config, Connection, Segment, TcpOptions, TcpStats};

/// iperf3's write size for TCP (`-l`'s default, 128 KB).
const WRITE_LEN: u64 = 128 << 10;

/// iperf3's cookie (`COOKIE_SIZE`): 36 characters and a NUL, written on each connection once connected.
pub const IPERF3_COOKIE: u64 = 37;
/// What the client writes for PARAM_EXCHANGE: the JSON's length (4 bytes) and the JSON (this
/// machine's iperf3 3.12 with `-t 8 -C cubic`: 144 bytes; a client-side trace, docs/KERNEL_VS_SIM.md).
const IPERF3_PARAMS: u64 = 4 + 144;

/// An end's part in an iperf3 test beyond its own bytes (iperf3 3.12's protocol, `iperf_api.c`): the
/// client's control connection sends its cookie, reads PARAM_EXCHANGE (one byte from the server) and
/// sends the parameters, reads CREATE_STREAMS and connects the data streams (each writes a cookie);
/// once the server has read every stream's cookie it sends TEST_START and TEST_RUNNING, and the client
/// starts the data. Each message crosses the simulated path, so a client whose control connection
/// waits behind a queue starts late, as the kernel's does.
#[derive(Clone, Debug, Default)]
pub enum Iperf3 {
    #[default]
    None,
    /// A data stream's sending end: it connects and starts its data when the control client says.
    Stream,
    /// A data stream's receiving end: tells the control server when its cookie has arrived.
    StreamServer { ctl: AppId, told: bool },
    /// The control connection's client. `streams`: each data stream and when it connects after
    /// CREATE_STREAMS has arrived; `data_at`: when the data starts after TEST_RUNNING has (iperf3's own
    /// time); `step`: messages read so far.
    CtlClient {
        streams: Vec<(AppId, Nanos)>,
        data_at: Nanos,
        write_turn: Nanos,
        step: u8,
    },
    /// The control connection's server: `streams` cookies to see before TEST_START.
    CtlServer {
        streams: u32,
        cookies: u32,
        step: u8,
    },
}

/// What an skb costs its socket beyond the frame (`sizeof(struct sk_buff)` + `skb_shared_info`, rounded):
/// TCP small queues count truesize, not frame bytes.
pub const SKB_OVERHEAD: u64 = 576;

/// What a segment occupies on the wire: IP header + TCP header and options + payload + Ethernet
/// header, once per frame a GSO segment becomes (what the qdisc charges for it, `qdisc_pkt_len`).
fn frame_len(seg: &Segment) -> u64 {
    let frames = match seg.gso_size {
        0 => 1,
        g => seg.payload_len.div_ceil(g).max(1),
    };
    (20 + seg.header_len() as u64 + crate::net::ETH_HLEN as u64) * frames as u64
        + seg.payload_len as u64
}

/// Laid out by hand (`repr(C)`): the fields every segment or timer reads come first (72 bytes), just
/// before the connection's own hot group (`Connection` leads with it), so that an event touches as
/// few lines as it can; with 2 000 endpoints none is in cache when its next event comes (bench-isp).
/// What only the start reads is last.
#[repr(C)]
pub struct TcpEndpoint {
    /// Active opener waiting for its start time: the connection's configuration and ISN. Boxed:
    /// tested on every event, used once.
    pending_open: Option<Box<(Config, u32)>>,
    /// Bytes the application has yet to write from `data_at`: `None` for a timed sender, which writes
    /// until `stop`.
    to_write: Option<u64>,
    stop: Nanos,
    /// Truesize of this socket's skbs in its host's qdisc and NIC (`sk_wmem_alloc`), for TCP small queues.
    host_truesize: u64,
    /// When the receiving side last got new in-order data (for a byte count's completion time).
    pub last_delivery_at: Nanos,
    pub local: (u32, u16),
    pub remote: (u32, u16),
    pub tos: u8,
    /// The last write came back short: the application waits until the socket is writeable.
    write_blocked: bool,
    data_started: bool,
    silent: bool,
    /// TCP small queues held data back at the last transmit attempt (`TSQ_THROTTLED`).
    tsq_throttled: bool,
    pub conn: Connection,
    // Read only until the data starts.
    start: Nanos,
    /// When the application starts writing its data (`start`, or later after iperf3's cookie).
    data_at: Nanos,
    /// iperf3's cookie: written as soon as the connection is established (0: none).
    cookie: u64,
    /// Its part in an iperf3 test (`iperf3 = true`).
    iperf3: Iperf3,
}

/// The segment a datagram carries; `ecn` is the ECN field of its IP header (a router may have marked it CE).
pub fn segment_of(t: &Tcp, ecn: u8) -> Segment {
    Segment {
        ecn,
        // One frame; a GSO packet a veth passed whole sets its own (`on_receive`).
        gso_size: 0,
        seq: t.seq,
        ack: t.ack,
        flags: t.flags,
        window: t.window,
        payload_len: t.payload_len,
        options: TcpOptions {
            mss: t.mss,
            wscale: t.wscale,
            sack_permitted: t.sack_permitted,
            timestamps: t.timestamps,
            sack_blocks: t.sack_blocks,
        },
    }
}

impl TcpEndpoint {
    /// The bytes a segment or a timer reads first: the endpoint's per-event fields and its connection's
    /// every-segment group (`tclab_tcp::SENDER_GROUP`), for the event loop's prefetch.
    pub const HOT_BYTES: usize = std::mem::offset_of!(TcpEndpoint, conn) + tclab_tcp::SENDER_GROUP;

    /// The side that connects and sends: `bytes` to send, or until `stop` if `None`.
    #[allow(clippy::too_many_arguments)]
    pub fn sender(
        cfg: Config,
        isn: u32,
        local: (u32, u16),
        remote: (u32, u16),
        tos: u8,
        bytes: Option<u64>,
        start: Nanos,
        stop: Nanos,
    ) -> TcpEndpoint {
        TcpEndpoint {
            conn: Connection::server(cfg.clone(), 0), // replaced by the client at `start`
            local,
            remote,
            tos,
            to_write: bytes,
            write_blocked: false,
            pending_open: Some(Box::new((cfg, isn))),
            start,
            data_at: start,
            data_started: false,
            cookie: 0,
            stop,
            silent: false,
            host_truesize: 0,
            tsq_throttled: false,
            last_delivery_at: 0,
            iperf3: Iperf3::None,
        }
    }

    /// Start as an iperf3 stream does: once connected, write iperf3's `cookie` bytes (its 37-byte
    /// cookie, which the server reads before the test), then the data from `data_at` (iperf3's
    /// TEST_RUNNING, after every stream of the test has connected).
    pub fn with_cookie(mut self, cookie: u64, data_at: Nanos) -> TcpEndpoint {
        self.cookie = cookie;
        self.data_at = data_at.max(self.start);
        self
    }

    /// Give this end its part in an iperf3 test. A data stream's sender then waits for the control
    /// client: it neither connects nor sends data until told ([`Wake`]).
    pub fn with_iperf3(mut self, part: Iperf3) -> TcpEndpoint {
        if matches!(part, Iperf3::Stream) {
            self.start = Nanos::MAX;
            self.data_at = Nanos::MAX;
        }
        self.iperf3 = part;
        self
    }

    /// Give a receiving end, once its control server exists, its part in the iperf3 test.
    pub fn set_iperf3(&mut self, part: Iperf3) {
        self.iperf3 = part;
    }

    /// Another end of the same iperf3 test told this one something.
    pub fn wake(&mut self, now: Nanos, w: Wake, out: &mut Outbox) {
        match w {
            Wake::Connect(at) => self.start = at,
            Wake::Data(at) => self.data_at = at,
            Wake::Cookie => {
                if let Iperf3::CtlServer { cookies, .. } = &mut self.iperf3 {
                    *cookies += 1;
                }
                self.iperf3_step(now, out);
                self.pump(now, out);
            }
        }
    }

    /// The iperf3 protocol's next message, once this end has read what it waits for.
    fn iperf3_step(&mut self, now: Nanos, out: &mut Outbox) {
        let rx = self.conn.bytes_delivered();
        match &mut self.iperf3 {
            Iperf3::None | Iperf3::Stream => {}
            Iperf3::StreamServer { ctl, told } => {
                if !*told && rx >= IPERF3_COOKIE {
                    *told = true;
                    out.wakes.push((*ctl, Wake::Cookie));
                }
            }
            Iperf3::CtlClient {
                streams,
                data_at,
                write_turn,
                step,
            } => {
                if *step == 0 && rx >= 1 {
                    // PARAM_EXCHANGE read: the parameters, as iperf3 writes them (length, then JSON).
                    *step = 1;
                    self.conn.write(4);
                    self.conn.write(IPERF3_PARAMS - 4);
                }
                if *step == 1 && rx >= 2 {
                    // CREATE_STREAMS read: the streams connect, one after another.
                    *step = 2;
                    for &(a, d) in streams.iter() {
                        out.wakes.push((a, Wake::Connect(now + d)));
                    }
                }
                if *step == 2 && rx >= 4 {
                    // TEST_START and TEST_RUNNING read: the data of every stream, each first write in turn.
                    *step = 3;
                    let at = now + *data_at;
                    for (k, &(a, _)) in streams.iter().enumerate() {
                        out.wakes.push((a, Wake::Data(at + k as u64 * *write_turn)));
                    }
                }
            }
            Iperf3::CtlServer {
                streams,
                cookies,
                step,
            } => {
                if *step == 0 && rx >= IPERF3_COOKIE {
                    *step = 1; // PARAM_EXCHANGE
                    self.conn.write(1);
                }
                if *step == 1 && rx >= IPERF3_COOKIE + IPERF3_PARAMS {
                    *step = 2; // CREATE_STREAMS
                    self.conn.write(1);
                }
                if *step == 2 && *cookies >= *streams {
                    *step = 3; // TEST_START, TEST_RUNNING
                    self.conn.write(1);
                    self.conn.write(1);
                }
            }
        }
    }

    /// The listening side, which receives and reads.
    pub fn receiver(
        cfg: Config,
        isn: u32,
        local: (u32, u16),
        remote: (u32, u16),
        tos: u8,
    ) -> TcpEndpoint {
        TcpEndpoint {
            conn: Connection::server(cfg, isn),
            local,
            remote,
            tos,
            to_write: Some(0),
            write_blocked: false,
            pending_open: None,
            start: 0,
            data_at: 0,
            data_started: true,
            cookie: 0,
            stop: Nanos::MAX,
            silent: false,
            host_truesize: 0,
            tsq_throttled: false,
            last_delivery_at: 0,
            iperf3: Iperf3::None,
        }
    }

    /// A SYN reached this listening end: the connection is the 4-tuple the SYN carries (`tcp_v4_syn_recv_sock`
    /// takes the addresses from the packet), whatever address the sender was configured with — after a
    /// NAT on the way it is the translated one, and the replies go to it.
    pub fn accept(&mut self, local: (u32, u16), remote: (u32, u16)) {
        self.local = local;
        self.remote = remote;
    }

    fn datagram(&self, seg: &Segment) -> Datagram {
        Datagram {
            ip: Ipv4 {
                src: self.local.0,
                dst: self.remote.0,
                protocol: PROTO_TCP,
                // The TOS byte's low two bits are the ECN field: the segment's (ECT(0) on an ECN flow).
                tos: (self.tos & !3) | seg.ecn,
                ttl: 64,
                ..Default::default()
            },
            l4: L4::Tcp(Tcp {
                sport: self.local.1,
                dport: self.remote.1,
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags,
                window: seg.window,
                mss: seg.options.mss,
                wscale: seg.options.wscale,
                sack_permitted: seg.options.sack_permitted,
                timestamps: seg.options.timestamps,
                sack_blocks: seg.options.sack_blocks,
                payload_len: seg.payload_len,
            }),
        }
    }

    fn pump(&mut self, now: Nanos, out: &mut Outbox) {
        if self.silent {
            return;
        }
        if now >= self.stop {
            self.silent = true;
            return;
        }
        // TCP small queues: data waits while the host already holds about a millisecond of it below the
        // socket (ACKs still go), and at least two skbs of the size it sends now. Every skb counted
        // here is released when it is freed: at TX completion, when the qdisc refuses it, or when a
        // qdisc drops it after queueing it (the network reports each packet dropped, not only the
        // arriving one).
        // The limit is worked out only when it can throttle: an exempt socket (one segment out at most,
        // as every receiver sending ACKs) never is, nor one holding at most two one-segment skbs on
        // its host: the limit is never below that (`tso_segs` is one at least, and the 1 MiB cap is
        // far above it).
        self.tsq_throttled = !self.conn.tsq_exempt() && {
            let mss = self.conn.mss();
            let full = |segs: u32| {
                frame_len(&Segment {
                    payload_len: mss * segs,
                    gso_size: mss,
                    ..Segment::default()
                }) + SKB_OVERHEAD
            };
            self.host_truesize > 2 * full(1) && self.host_truesize > self.conn.tsq_limit(full)
        };
        self.conn.set_tsq_throttled(self.tsq_throttled);
        // One segment at a time, as `tcp_write_xmit` hands each skb to the qdisc (`tcp_transmit_skb`)
        // and learns its fate before it builds the next: after a refusal it stops, the segment unsent
        // (`on_local_drop`). The network hands this one down and calls `resume` for the next. When
        // nothing more can go, the application writes, and what it wrote may go.
        loop {
            if let Some(seg) = self.conn.poll_transmit(now) {
                self.host_truesize += frame_len(&seg) + SKB_OVERHEAD;
                out.datagrams.push(self.datagram(&seg));
                out.tstamps.push(self.conn.departure_time());
                out.gso_sizes.push(seg.gso_size as u16);
                out.more = true;
                return;
            }
            if !self.app_write(now) {
                return;
            }
        }
    }

    /// iperf3's sender: a non-blocking write of up to 128 KB (`Nwrite`); after a short one, the next
    /// only once `select` finds the socket writeable. Returns whether anything was written. A byte
    /// count closes the socket after its last byte.
    fn app_write(&mut self, now: Nanos) -> bool {
        let left = self.to_write.unwrap_or(u64::MAX);
        if left == 0 || !self.data_started {
            return false;
        }
        if self.write_blocked {
            if !self.conn.writable() {
                return false;
            }
            self.write_blocked = false;
        }
        let len = WRITE_LEN.min(left);
        let copied = self.conn.try_write(now, len);
        self.write_blocked = copied < len;
        if let Some(n) = self.to_write.as_mut() {
            *n -= copied;
            if *n == 0 {
                self.conn.close();
            }
        }
        copied > 0
    }

    /// The network handed down what the last call put in the outbox: the next segment, if any.
    pub fn resume(&mut self, now: Nanos, out: &mut Outbox) {
        self.pump(now, out);
    }

    pub fn on_timer(&mut self, now: Nanos, out: &mut Outbox) {
        if let Some(open) = self.pending_open.take_if(|_| now >= self.start) {
            let (cfg, isn) = *open;
            self.conn = Connection::client(cfg, now, isn);
            if self.cookie > 0 {
                self.conn.write(self.cookie);
            }
        }
        if !self.data_started && self.pending_open.is_none() && now >= self.data_at {
            self.data_started = true;
            if self.to_write == Some(0) {
                self.conn.close();
            }
        }
        self.pump(now, out);
    }

    /// Inline into `App::on_receive`, its one caller: a call layer less for every segment.
    #[inline]
    pub fn on_receive(&mut self, now: Nanos, d: &Datagram, gso_size: u16, out: &mut Outbox) {
        if self.silent || self.pending_open.is_some() {
            return;
        }
        if let L4::Tcp(t) = &d.l4 {
            let before = self.conn.bytes_delivered();
            let seg = Segment {
                gso_size: gso_size as u32,
                ..segment_of(t, d.ip.tos & 3)
            };
            self.conn.on_segment(now, &seg);
            if self.conn.bytes_delivered() > before {
                self.last_delivery_at = now;
                self.iperf3_step(now, out);
            }
            self.pump(now, out);
        }
    }

    /// The host's own qdisc refused a segment we sent (`NET_XMIT_DROP`): not sent. `gso_size` is the
    /// MSS it was sent with if it was a GSO segment.
    pub fn on_local_drop(&mut self, now: Nanos, d: &Datagram, gso_size: u16) {
        if let L4::Tcp(t) = &d.l4 {
            let seg = Segment {
                gso_size: gso_size as u32,
                ..segment_of(t, d.ip.tos & 3)
            };
            self.host_truesize = self
                .host_truesize
                .saturating_sub(frame_len(&seg) + SKB_OVERHEAD);
            self.conn.on_local_drop(now, &seg);
        }
    }

    /// A qdisc on the host cut one of our GSO segments into frames (`tbf_segment`, CAKE's split-gso):
    /// `tcp_gso_segment` charges the socket each frame's truesize in place of the one skb's, so
    /// `sk_wmem_alloc` grows by `extra` skbs' overhead, which the frames give back one by one as they
    /// are freed (`on_freed`).
    pub fn on_gso_split(&mut self, extra: u32) {
        self.host_truesize += extra as u64 * SKB_OVERHEAD;
    }

    /// The host's own qdisc queued a segment but dropped one of the flow's (`NET_XMIT_CN`):
    /// `__tcp_transmit_skb` takes the segment as sent and calls `tcp_enter_cwr`.
    pub fn on_congestion_notified(&mut self, now: Nanos) {
        if self.pending_open.is_none() {
            self.conn.on_local_congestion(now);
        }
    }

    /// One of our frames is freed on the host (`tcp_wfree`): it left the NIC (TX completion), or a qdisc
    /// dropped it after accepting it. Its truesize is released, and a throttled socket sends again
    /// (`tcp_tsq_handler`).
    /// Returns whether the socket tried to send (only a throttled one does).
    pub fn on_freed(&mut self, now: Nanos, len: u32, out: &mut Outbox) -> bool {
        self.host_truesize = self.host_truesize.saturating_sub(len as u64 + SKB_OVERHEAD);
        if self.tsq_throttled && self.pending_open.is_none() {
            self.pump(now, out);
            return true;
        }
        false
    }

    /// Whether a wake-up at `now` is the socket's pacing timer (its connection open).
    pub fn pacing_wakeup(&self, now: Nanos) -> bool {
        !self.silent && self.pending_open.is_none() && self.conn.pacing_timer_due(now)
    }

    pub fn next_timer(&self) -> Option<Nanos> {
        if self.silent {
            return None;
        }
        if self.pending_open.is_some() {
            // An iperf3 stream not yet told to connect waits (Nanos::MAX).
            return (self.start != Nanos::MAX).then_some(self.start);
        }
        let mut t = self.conn.poll_at();
        if !self.data_started && self.data_at != Nanos::MAX {
            t = Some(t.map_or(self.data_at, |t| t.min(self.data_at)));
        }
        if self.stop != Nanos::MAX {
            // Wake at the stop time too, to fall silent then.
            return Some(t.map_or(self.stop, |t| t.min(self.stop)));
        }
        t
    }

    pub fn delivered_bytes(&self) -> u64 {
        self.conn.bytes_delivered()
    }

    /// Truesize of this socket's skbs still on its host (in a qdisc or on the NIC): `sk_wmem_alloc`.
    /// Each skb costs its frames' bytes and [`SKB_OVERHEAD`].
    pub fn host_truesize(&self) -> u64 {
        self.host_truesize
    }

    pub fn stats(&self) -> TcpStats {
        self.conn.stats()
    }
}
