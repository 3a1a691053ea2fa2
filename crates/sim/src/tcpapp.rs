//! A TCP endpoint on a simulated host: tclab-tcp's sans-IO connection, given real headers.
//!
//! The connection (crates/tcp) knows sequence numbers, windows and timers; this module turns its segments
//! into IPv4/TCP datagrams and back, and plays the application: an iperf-like sender that writes a byte
//! count or keeps the socket full until its stop time, or a receiver that reads everything at once.
//! At the stop time of a timed transfer the sender simply falls silent, as `iperf -t` ends its test.

use crate::apps::Outbox;
use crate::wire::{Datagram, Ipv4, Tcp, L4, PROTO_TCP};
use tclab_core::Nanos;
use tclab_tcp::{Config, Connection, Segment, TcpOptions, TcpStats};

/// How much a timed sender keeps written ahead of what was acknowledged (a socket buffer's worth).
const TIMED_WRITE_AHEAD: u64 = 8 << 20;

pub struct TcpEndpoint {
    pub conn: Connection,
    pub local: (u32, u16),
    pub remote: (u32, u16),
    pub tos: u8,
    /// Sender of a timed transfer: keep writing until `stop`.
    timed: bool,
    /// Active opener waiting for its start time.
    pending_open: Option<(Config, u32, Option<u64>)>,
    start: Nanos,
    stop: Nanos,
    silent: bool,
}

pub fn segment_of(t: &Tcp) -> Segment {
    Segment {
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
            sack_blocks: t.sack_blocks.clone(),
        },
    }
}

impl TcpEndpoint {
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
            timed: bytes.is_none(),
            pending_open: Some((cfg, isn, bytes)),
            start,
            stop,
            silent: false,
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
            timed: false,
            pending_open: None,
            start: 0,
            stop: Nanos::MAX,
            silent: false,
        }
    }

    fn datagram(&self, seg: &Segment) -> Datagram {
        Datagram {
            ip: Ipv4 {
                src: self.local.0,
                dst: self.remote.0,
                protocol: PROTO_TCP,
                tos: self.tos,
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
                sack_blocks: seg.options.sack_blocks.clone(),
                payload_len: seg.payload_len,
            }),
        }
    }

    fn pump(&mut self, now: Nanos, out: &mut Outbox) {
        if self.silent {
            return;
        }
        if now >= self.stop && self.timed {
            self.silent = true;
            return;
        }
        if self.timed {
            let s = self.conn.stats();
            let ahead = s.bytes_written - s.bytes_acked.min(s.bytes_written);
            if ahead < TIMED_WRITE_AHEAD / 2 {
                self.conn.write(TIMED_WRITE_AHEAD - ahead);
            }
        }
        while let Some(seg) = self.conn.poll_transmit(now) {
            out.datagrams.push(self.datagram(&seg));
        }
    }

    pub fn on_timer(&mut self, now: Nanos, out: &mut Outbox) {
        if let Some((cfg, isn, bytes)) = self.pending_open.take_if(|_| now >= self.start) {
            self.conn = Connection::client(cfg, now, isn);
            if let Some(b) = bytes {
                self.conn.write(b);
                self.conn.close();
            }
        }
        self.pump(now, out);
    }

    pub fn on_receive(&mut self, now: Nanos, d: &Datagram, out: &mut Outbox) {
        if self.silent || self.pending_open.is_some() {
            return;
        }
        if let L4::Tcp(t) = &d.l4 {
            self.conn.on_segment(now, &segment_of(t));
            self.pump(now, out);
        }
    }

    /// The host's own qdisc refused a segment we sent.
    pub fn on_local_drop(&mut self, now: Nanos, d: &Datagram) {
        if let L4::Tcp(t) = &d.l4 {
            self.conn.on_local_drop(now, &segment_of(t));
        }
    }

    pub fn next_timer(&self) -> Option<Nanos> {
        if self.silent {
            return None;
        }
        if self.pending_open.is_some() {
            return Some(self.start);
        }
        let t = self.conn.poll_at();
        if self.timed {
            // Wake at the stop time too, to fall silent then.
            return Some(t.map_or(self.stop, |t| t.min(self.stop)));
        }
        t
    }

    pub fn delivered_bytes(&self) -> u64 {
        self.conn.stats().bytes_delivered
    }

    pub fn stats(&self) -> TcpStats {
        self.conn.stats()
    }
}
