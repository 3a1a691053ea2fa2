//! A small deterministic harness: a client (the sender of a byte-count
//! transfer) and a server joined by a modelled path. Each direction is a link
//! with a rate, a one-way propagation delay and, in front of it, a drop-tail
//! queue of N packets (the packet being serialized is not counted). Packets
//! on the wire are IPv4: payload + TCP header (with options) + 20.
//! Virtual time advances event by event through a queue ordered by
//! (time, insertion number), so equal times are processed in a fixed order.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use tclab_tcp::{CaState, Config, Connection, Nanos, Segment};

pub const MS: Nanos = 1_000_000;
pub const SEC: Nanos = 1_000_000_000;
pub const CLIENT_ISN: u32 = 0xfff0_0000; // wraps during large transfers
pub const SERVER_ISN: u32 = 7;

#[derive(Clone, Debug)]
pub struct PathCfg {
    pub rate_bps: u64,
    pub delay: Nanos,
    pub queue_pkts: usize,
    /// Drop the first transmission of the data segments starting at these
    /// payload offsets (client → server), e.g. `k * 1448`.
    pub drop_offsets: BTreeSet<u64>,
    /// Drop every client → server packet sent during [from, to).
    pub blackout: Option<(Nanos, Nanos)>,
}

impl PathCfg {
    pub fn new(rate_bps: u64, delay: Nanos, queue_pkts: usize) -> PathCfg {
        PathCfg {
            rate_bps,
            delay,
            queue_pkts,
            drop_offsets: BTreeSet::new(),
            blackout: None,
        }
    }
}

pub fn wire_bytes(seg: &Segment) -> u64 {
    seg.payload_len as u64 + seg.header_len() as u64 + 20
}

struct Link {
    rate_bps: u64,
    delay: Nanos,
    limit: usize,
    queue: VecDeque<Segment>,
    busy: bool,
    drops: u64,
}

#[derive(Clone, Debug)]
enum Ev {
    LinkDone(usize),
    Arrive(usize, Segment),
    Timer(usize),
}

/// One delivered packet: (arrival time, direction 0 = client→server, segment).
pub type Trace = Vec<(Nanos, usize, Segment)>;

#[derive(Clone, Debug)]
pub struct Sample {
    pub t: Nanos,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub ca: CaState,
    pub bytes_acked: u64,
    pub rto: Nanos,
    pub srtt: Nanos,
}

pub struct Sim {
    pub now: Nanos,
    pub hosts: [Connection; 2],
    links: [Link; 2],
    events: BinaryHeap<(Reverse<Nanos>, Reverse<u64>, usize)>,
    payloads: Vec<Option<Ev>>,
    seq: u64,
    timer_at: [Option<Nanos>; 2],
    pub path: PathCfg,
    dropped_once: BTreeSet<u64>,
    pub trace: Trace,
    /// Every segment a host emitted: (time, host, segment).
    pub sent: Trace,
    /// The client's segments as it sent them: (time sent, departure time stamped, pacing rate then,
    /// payload length).
    pub departures: Vec<(Nanos, Nanos, u64, u32)>,
    /// Sender (client) state after every segment it receives.
    pub samples: Vec<Sample>,
    pub to_write: u64,
    pub server_closes: bool,
    pub link_drops: [u64; 2],
}

impl Sim {
    pub fn new(client: Config, server: Config, path: PathCfg, bytes: u64) -> Sim {
        let hosts = [
            Connection::client(client, 0, CLIENT_ISN),
            Connection::server(server, SERVER_ISN),
        ];
        let mk = |p: &PathCfg| Link {
            rate_bps: p.rate_bps,
            delay: p.delay,
            limit: p.queue_pkts,
            queue: VecDeque::new(),
            busy: false,
            drops: 0,
        };
        let links = [mk(&path), mk(&path)];
        let mut sim = Sim {
            now: 0,
            hosts,
            links,
            events: BinaryHeap::new(),
            payloads: Vec::new(),
            seq: 0,
            timer_at: [None, None],
            path,
            dropped_once: BTreeSet::new(),
            trace: Vec::new(),
            sent: Vec::new(),
            departures: Vec::new(),
            samples: Vec::new(),
            to_write: bytes,
            server_closes: true,
            link_drops: [0, 0],
        };
        sim.hosts[0].write(bytes);
        sim.hosts[0].close();
        sim.drain(0);
        sim
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        let id = self.payloads.len();
        self.payloads.push(Some(ev));
        self.seq += 1;
        self.events.push((Reverse(t), Reverse(self.seq), id));
    }

    /// A segment the host sent: its departure recorded, then its frames onto the link (the sending
    /// device cuts a GSO segment into MSS frames).
    fn transmit(&mut self, host: usize, seg: Segment) {
        if host == 0 {
            let c = &self.hosts[0];
            let d = (
                self.now,
                c.departure_time(),
                c.pacing_rate(),
                seg.payload_len,
            );
            self.departures.push(d);
        }
        for frame in seg.gso_segments() {
            self.transmit_frame(host, frame);
        }
    }

    fn transmit_frame(&mut self, host: usize, seg: Segment) {
        self.sent.push((self.now, host, seg.clone()));
        if host == 0 && seg.payload_len > 0 {
            let off = seg.seq.wrapping_sub(CLIENT_ISN.wrapping_add(1)) as u64;
            if self.path.drop_offsets.contains(&off) && self.dropped_once.insert(off) {
                self.link_drops[0] += 1;
                return;
            }
        }
        if host == 0 {
            if let Some((a, b)) = self.path.blackout {
                if self.now >= a && self.now < b {
                    self.link_drops[0] += 1;
                    return;
                }
            }
        }
        let link = &mut self.links[host];
        if link.queue.len() >= link.limit && link.busy {
            link.drops += 1;
            self.link_drops[host] += 1;
            return;
        }
        link.queue.push_back(seg);
        if !link.busy {
            self.start_link(host);
        }
    }

    fn start_link(&mut self, dir: usize) {
        let link = &mut self.links[dir];
        let Some(seg) = link.queue.pop_front() else {
            link.busy = false;
            return;
        };
        link.busy = true;
        let bits = wire_bytes(&seg) * 8;
        let ser = (bits * SEC).div_ceil(link.rate_bps);
        let done = self.now + ser;
        let arrive = done + link.delay;
        self.push(done, Ev::LinkDone(dir));
        self.push(arrive, Ev::Arrive(dir, seg));
    }

    /// Let a host transmit after the test changed it from outside.
    pub fn kick(&mut self, host: usize) {
        self.drain(host);
    }

    fn drain(&mut self, host: usize) {
        while let Some(seg) = self.hosts[host].poll_transmit(self.now) {
            self.transmit(host, seg);
        }
        if host == 1 && self.server_closes && self.hosts[1].peer_closed() {
            let st = self.hosts[1].state();
            if st == tclab_tcp::State::CloseWait {
                self.hosts[1].close();
                while let Some(seg) = self.hosts[1].poll_transmit(self.now) {
                    self.transmit(1, seg);
                }
            }
        }
        if let Some(t) = self.hosts[host].poll_at() {
            if self.timer_at[host] != Some(t) {
                self.timer_at[host] = Some(t);
                self.push(t.max(self.now), Ev::Timer(host));
            }
        }
    }

    /// Process one event; false when there is none left before `until`.
    pub fn step(&mut self, until: Nanos) -> bool {
        let Some(&(Reverse(t), _, id)) = self.events.peek() else {
            return false;
        };
        if t > until {
            return false;
        }
        self.events.pop();
        self.now = t;
        let ev = self.payloads[id].take().expect("event");
        match ev {
            Ev::LinkDone(dir) => self.start_link(dir),
            Ev::Arrive(dir, seg) => {
                let to = 1 - dir;
                self.trace.push((t, dir, seg.clone()));
                self.hosts[to].on_segment(t, &seg);
                if to == 0 {
                    let s = self.hosts[0].stats();
                    self.samples.push(Sample {
                        t,
                        cwnd: s.cwnd,
                        ssthresh: s.ssthresh,
                        ca: s.ca_state,
                        bytes_acked: s.bytes_acked,
                        rto: s.rto_ns,
                        srtt: s.srtt_ns,
                    });
                }
                self.drain(to);
            }
            Ev::Timer(h) => {
                if self.timer_at[h] == Some(t) {
                    self.timer_at[h] = None;
                }
                self.drain(h);
            }
        }
        true
    }

    pub fn run_until(&mut self, until: Nanos) {
        while self.step(until) {}
        self.now = self.now.max(until);
    }

    /// Run until both ends are closed (or `limit`); returns the finish time.
    pub fn run_to_completion(&mut self, limit: Nanos) -> Nanos {
        while !(self.hosts[0].is_closed() && self.hosts[1].is_closed()) {
            if !self.step(limit) {
                break;
            }
        }
        self.now
    }

    /// Bytes the client had had acknowledged by `t` (its last sample at or before `t`).
    pub fn acked_by(&self, t: Nanos) -> u64 {
        self.samples
            .iter()
            .take_while(|s| s.t <= t)
            .last()
            .map_or(0, |s| s.bytes_acked)
    }

    /// Client → server data segments sent (time, payload offset, len).
    pub fn data_sent(&self) -> Vec<(Nanos, u64, u32)> {
        self.sent
            .iter()
            .filter(|(_, h, s)| *h == 0 && s.payload_len > 0)
            .map(|(t, _, s)| {
                (
                    *t,
                    s.seq.wrapping_sub(CLIENT_ISN.wrapping_add(1)) as u64,
                    s.payload_len,
                )
            })
            .collect()
    }
}
