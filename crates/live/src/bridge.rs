//! The real-time driver: two interfaces bridged through the engine. A frame that arrives on one port
//! passes that device's ingress hook (filters, policers, mirred to an ifb), the netfilter hooks a
//! forwarded packet passes (PREROUTING, FORWARD, POSTROUTING, when the policy has rules), takes its
//! priority from its TOS byte as `ip_forward` gives it, and is enqueued on the other port's root qdisc;
//! `qdisc_run` (core's `host.rs`, the simulator's too) moves what the tree releases to the port's
//! socket. It bridges at layer 2 (link headers and TTL unchanged, ARP and IPv6 carried) but treats a
//! packet as a router would, so that a policy written for a router's interface behaves as it would there.
//!
//! Time is `CLOCK_MONOTONIC`, in nanoseconds since the bridge started, passed to every call as the
//! simulator passes its virtual time. A tree that holds packets back says when to ask again; the loop
//! sleeps in `ppoll` until then or until a frame arrives, with the thread's timer slack at 1 ns, and
//! spins only for the last stretch a sleep would overshoot; after a frame it polls for a while
//! before it sleeps, as long as that pays (see [`crate::spin`]). Frames arrive through a
//! `TPACKET_V2` ring mapped from each socket ([`sys::RxRing`]: read in place, no system call while frames keep coming) and
//! leave through a transmit ring ([`sys::TxRing`]: one `send` for all the frames of a turn); where the
//! kernel refuses a ring, or `--no-ring` asks, by `recvmmsg` and `sendmmsg`, [`sys::BATCH`] frames a
//! call. All due wake-ups are served before each wait.
//!
//! One thread serves both directions; with several transmit queues, several such bridges run, one per
//! queue (see [`crate::queues`]). A frame larger than the outgoing port's MTU (a GRO or TSO
//! super-packet when the offloads could not be turned off) is dropped and counted as `oversize`.

use crate::frame::{self, Headers};
use crate::sys::{self, PacketSocket};
use std::sync::atomic::Ordering;
use tclab_core::action::mirred::Mirrored;
use tclab_core::engine::{DevKind, Engine};
use tclab_core::host::{self, Transmitter};
use tclab_core::packet::{SkbCache, VlanTag};
use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Nanos, Packet};

/// How soon a stalled transmit ring is kicked again when the loop would otherwise sleep.
const STALLED_NS: u64 = 1_000_000;
/// Frames a port may hold that its socket has not taken yet; beyond it the port stops asking its
/// tree for more (as a NIC's full ring stops `qdisc_run`).
const PENDING_MAX: usize = 4 * sys::BATCH;
/// How often a port that was set down is checked for having been deleted, and a transmit ring
/// whose device was down is tried again.
const DOWN_CHECK_NS: u64 = 100_000_000;
/// Receive batches per port and turn, so that a flood on one port cannot starve the other's timers.
const RX_BATCHES_PER_TURN: usize = 4;

/// Counters of one port, beside its device's `tc -s` counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Dropped by an ingress action.
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames shorter than a link header.
    pub malformed: u64,
    /// Frames larger than the other port's MTU (super-packets from an offload).
    pub oversize: u64,
    /// Frames whose link header was forgotten while they were queued (see `frame::MAX_HEADERS`).
    pub stale: u64,
    /// Frames the socket refused with an error other than "try again".
    pub tx_errors: u64,
    /// Frames the outgoing device refuses after the qdisc (longer than its MTU, lowered while they
    /// were queued): the kernel counts those in the device's `tx_dropped`, not in the qdisc's drops,
    /// which counted them sent. Also the frames for it that arrived while it was down: the kernel's
    /// `noop_qdisc`, in the tree's place from `dev_deactivate` to `dev_activate`, drops them
    /// (`noop_enqueue` counts them here since Linux 6.11; the tree sees none). Not in `tx_packets`.
    pub tx_dropped: u64,
    /// Frames the kernel dropped before the bridge read them: its receive ring or socket buffer was
    /// full (not in `rx_packets`).
    pub rx_lost: u64,
    /// Of `rx_packets`, those whose transport checksum the sender left to its device (a veth's other
    /// end with tx-checksumming on), which the bridge completes.
    pub rx_csum_partial: u64,
    /// Of `rx_packets`, those read from the receive ring, or the AF_XDP socket's RX ring (the rest
    /// came by `recvmmsg`).
    pub rx_ring: u64,
    /// Of `tx_packets`, those sent through the transmit ring, or the AF_XDP socket's TX ring (the
    /// rest by `sendmmsg`).
    pub tx_ring: u64,
    /// Frames past the qdisc, waiting for the socket or in the transmit ring, when the device was set
    /// down: freed, as a driver frees its ring at `ndo_stop`, which no kernel counter records (not
    /// `tx_dropped`); counted here so that the summary accounts for them. Not in `tx_packets`.
    pub tx_purged: u64,
    /// Wake-ups of the port's tree served, and how late (nanoseconds after the time the tree asked for):
    /// their sum and the largest. Lateness beyond a shaper's burst is rate lost.
    pub wakeups: u64,
    pub late_ns_sum: u64,
    pub late_ns_max: u64,
}

struct Port {
    name: String,
    /// `None` for a detached port ([`Bridge::detached`]): its frames are kept in `detached_out`.
    sock: Option<PacketSocket>,
    /// The socket's receive ring, if it has one (else it receives with `recvmmsg`).
    rx_ring: Option<sys::RxRing>,
    /// The transmit ring, if the port has one (else `sock` sends with `sendmmsg`).
    tx_ring: Option<sys::TxRing>,
    /// The port's AF_XDP socket (`--xdp`), which then receives and sends all its frames; `sock`
    /// stays for the interface's state and errors.
    xdp: Option<crate::xdp::XdpPort>,
    detached_out: Vec<Vec<u8>>,
    mtu: u32,
    /// Frames dequeued but not yet taken by the socket.
    pending: Vec<Vec<u8>>,
    /// The last `qdisc_run` stopped because `pending` was full, not because the tree had nothing to
    /// give: once the socket has taken the frames, the tree is asked again (`netif_wake_queue`).
    stopped: bool,
    /// When the port's tree wants to be asked again.
    wake: Option<Nanos>,
    stats: PortStats,
    /// The interface cannot send (set down, or up without a carrier): its device in the engine is
    /// down too ([`Bridge::set_port_up`]). Watched every [`DOWN_CHECK_NS`] for its coming up (where
    /// no link event says so) and in case it is deleted rather than brought up again.
    down: bool,
}

/// An ifb device of the policy: its queue is emptied as soon as its tree allows (`ifb_xmit`).
struct Ifb {
    name: String,
    wake: Option<Nanos>,
    running: bool,
}

pub struct Bridge {
    pub engine: Engine,
    /// Samples of every device's and class's counters, if asked for (`tclab live --out`).
    pub sampler: Option<crate::sampler::Sampler>,
    /// Where `tclab tc|iptables` calls of this network namespace reach the engine.
    control: Option<Control>,
    ports: Vec<Port>,
    ifbs: Vec<Ifb>,
    headers: Headers,
    epoch: u64,
    /// Spare buffers for frames on their way out.
    spare: Vec<Vec<u8>>,
    /// Spare packet boxes: a packet enters a port's tree in one ([`tclab_core::Device::enqueue_skb`])
    /// and its box comes back here when its frame is written.
    skbs: SkbCache,
    /// The transmit queue this bridge serves when it is one of several (`tclab live --queues N`):
    /// every packet it forwards is enqueued with `queue_mapping` set to it, so that the egress mq
    /// root hands it to this queue's tree.
    queue: Option<u16>,
    /// Calls from the thread that coordinates several queues, and when to stop (instead of the
    /// control socket and the signals, which that thread watches).
    calls: Option<Calls>,
    /// What was said about the ports, shared by the queues that bridge them.
    said: Said,
    /// Changes to the interfaces (an MTU set while bridging), if the ports came with a listener.
    events: Option<sys::LinkEvents>,
    /// The pauses of a real-time loop that never sleeps ([`crate::spin::BusyCap`]).
    busy: Option<crate::spin::BusyCap>,
    /// The policy has a `ct` action: its calls into the trees are lent the host's connection table
    /// ([`Bridge::lend_conntrack`]) and conntrack's hooks track every forwarded packet.
    uses_ct: bool,
    /// Times the loop went to sleep in `ppoll`: what an idle bridge costs, counted (a test's
    /// measure where CPU time depends on the machine's load).
    sleeps: u64,
}

/// Warnings about the ports, each said once for all the bridges that share it: with `--queues N`
/// every queue's bridge has sockets on both ports and meets the same events (a port set down) or
/// its share of the same frames (oversize, checksums left undone), which a user needs to read once.
#[derive(Clone, Debug, Default)]
pub struct Said(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

impl Said {
    /// Print `msg` on the standard error unless `key` was said (and not forgotten since).
    fn once(&self, key: String, msg: impl FnOnce() -> String) {
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if said.iter().all(|(k, _)| *k != key) {
            let msg = msg();
            eprintln!("tclab live: {msg}");
            said.push((key, msg));
        }
    }

    /// Say `key`'s warning again when it happens again (a port that was down is up).
    fn forget(&self, key: &str) {
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = said.iter().position(|(k, _)| k == key) {
            said[i].0.clear();
        }
    }

    /// Say `key`'s warning again when it happens again, for every key that starts with `prefix`
    /// but not with `keep` (a port's MTU changed once more: its earlier changes' lines).
    fn forget_others(&self, prefix: &str, keep: &str) {
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (k, _) in said.iter_mut() {
            if k.starts_with(prefix) && !k.starts_with(keep) {
                k.clear();
            }
        }
    }

    /// Every message said so far, in order.
    pub fn messages(&self) -> Vec<String> {
        let said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        said.iter().map(|(_, m)| m.clone()).collect()
    }
}

/// A port's interface, opened: its name, MTU and packet socket (moved to the thread that bridges it).
pub struct OpenPort {
    pub name: String,
    pub mtu: u32,
    pub sock: PacketSocket,
    pub rx_ring: Option<sys::RxRing>,
    pub tx_ring: Option<sys::TxRing>,
    /// The AF_XDP socket, with [`Rings::Xdp`].
    pub xdp: Option<crate::xdp::XdpPort>,
    /// The link changes of the ports' namespace (opened there): each queue's first port has one.
    pub events: Option<sys::LinkEvents>,
}

/// How the ports move frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rings {
    /// A `TPACKET_V2` receive ring per socket (8 MiB) and a transmit ring per port and queue (2 MiB),
    /// slots sized for the port's MTU ([`sys::RingGeometry::for_mtu`]); `recvmmsg` or `sendmmsg`
    /// where the kernel refuses a ring.
    On,
    /// Rings of this shape, each way, the calls where refused (a shape the kernel refuses shows the
    /// fallback).
    Shaped(sys::RingGeometry),
    /// `recvmmsg` and `sendmmsg` only (`tclab live --no-ring`, to compare).
    Off,
    /// An AF_XDP socket per port in copy mode, fed by an XDP program in generic mode
    /// (`tclab live --xdp`, see [`crate::xdp`]); one queue only. A refusal stops the start.
    Xdp,
}

/// The rings of one device: `Ok` if every socket has its ring, else why the kernel refused one (the
/// device then receiving with `recvmmsg`, or sending with `sendmmsg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingSetup {
    pub dev: String,
    pub rx: Result<(), String>,
    pub tx: Result<(), String>,
}

/// How a frame arrived, as its socket reported it.
struct Arrived {
    /// Its length on the wire (more than the bytes received when `truncated`).
    wire_len: usize,
    /// Its ring slot or receive buffer cut it.
    truncated: bool,
    /// The outer VLAN tag the kernel took out of its bytes.
    accel: Option<VlanTag>,
    /// Its TCP/UDP checksum was left to a device (`CHECKSUM_PARTIAL`, a veth peer's offload).
    csum_partial: bool,
    /// The socket does not say whether it was (AF_XDP): the bytes tell ([`frame::left_to_device`]).
    csum_unsaid: bool,
}

/// A `tclab tc|iptables|link` call handed to one queue's bridge, and where its answer goes.
pub struct Call {
    pub argv: Vec<String>,
    pub stdin: Option<String>,
    pub reply: std::sync::mpsc::Sender<crate::queues::Answer>,
}

/// What one queue's bridge listens to besides its ports.
pub struct Calls {
    pub rx: std::sync::mpsc::Receiver<Call>,
    pub waker: std::sync::Arc<sys::Waker>,
    pub quit: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The warnings all the queues share.
    pub said: Said,
}

/// What `tclab live` prints at the start: what it did to the devices.
pub struct Setup {
    /// (device, offloads turned off).
    pub offloads: Vec<(String, Vec<&'static str>)>,
    /// Whether a keeper turns them back on when tclab stops ([`sys::Keeper`]).
    pub restored: bool,
    /// Each device's rings; empty with [`Rings::Off`] and [`Rings::Xdp`].
    pub rings: Vec<RingSetup>,
    /// The ports move frames through AF_XDP sockets ([`Rings::Xdp`]).
    pub xdp: bool,
}

impl Bridge {
    /// Open both ports, turn their offloads off, and take the policy `engine` (devices it lacks are
    /// added with the interface's MTU).
    pub fn new(engine: Engine, devs: &[String], rings: Rings) -> Result<(Bridge, Setup), String> {
        let (mut queues, setup) = open_ports(devs, 1, rings)?;
        Ok((Bridge::on_ports(engine, queues.remove(0)), setup))
    }

    /// A bridge between ports already open, with the policy `engine` (devices it lacks are added with
    /// the interface's MTU).
    pub fn on_ports(mut engine: Engine, mut open: Vec<OpenPort>) -> Bridge {
        let events = open.iter_mut().find_map(|o| o.events.take());
        let ports = open
            .into_iter()
            .map(|o| {
                engine.add_device(&o.name, o.mtu, 1000).mtu = o.mtu;
                Port {
                    name: o.name,
                    sock: Some(o.sock),
                    rx_ring: o.rx_ring,
                    tx_ring: o.tx_ring,
                    xdp: o.xdp,
                    detached_out: Vec::new(),
                    mtu: o.mtu,
                    pending: Vec::new(),
                    stopped: false,
                    wake: None,
                    stats: PortStats::default(),
                    down: false,
                }
            })
            .collect();
        let mut b = Bridge::with_ports(engine, ports);
        b.events = events;
        b
    }

    /// Serve transmit queue `queue` of several, taking calls from `calls` (see [`crate::queues`]).
    pub fn serve_queue(&mut self, queue: u16, calls: Calls) {
        self.queue = Some(queue);
        self.said = calls.said.clone();
        self.calls = Some(calls);
    }

    /// Share the warnings said about the ports with other bridges of them (see [`Said`]).
    pub fn share_warnings(&mut self, said: Said) {
        self.said = said;
    }

    /// What was said about the ports so far.
    pub fn said(&self) -> Vec<String> {
        self.said.messages()
    }

    fn with_ports(engine: Engine, ports: Vec<Port>) -> Bridge {
        let ifbs = engine
            .devices()
            .filter(|(_, d)| d.kind == DevKind::Ifb)
            .map(|(n, _)| Ifb {
                name: n.to_string(),
                wake: None,
                running: false,
            })
            .collect();
        let mut b = Bridge {
            engine,
            sampler: None,
            control: None,
            ports,
            ifbs,
            headers: Headers::default(),
            epoch: sys::monotonic_ns(),
            spare: Vec::new(),
            skbs: SkbCache::default(),
            queue: None,
            calls: None,
            said: Said::default(),
            events: None,
            busy: None,
            uses_ct: false,
            sleeps: 0,
        };
        b.refresh_ct();
        b
    }

    /// After the policy changed (at the start, or a `tclab tc` call): whether it has a `ct` action.
    /// As `act_ct`'s init registers conntrack's hooks in its netns (`nf_ct_netns_get`), from then on
    /// every forwarded packet is tracked at PREROUTING, rules or none, as the simulator does a node's.
    fn refresh_ct(&mut self) {
        self.uses_ct = !self.engine.actions().list("ct").is_empty();
        self.engine.netfilter_mut().ct_hooks |= self.uses_ct;
    }

    /// Lend the host's connection table to a call into the qdiscs and filters that may run a `ct`
    /// action (`Cx::conntrack`; act_ct looks packets up in the netns's table, the one the netfilter
    /// hooks fill); taken back by [`Bridge::take_back_conntrack`] when the call returns.
    fn lend_conntrack(&mut self, cx: &mut Cx) {
        if self.uses_ct {
            cx.conntrack = Some(std::mem::take(&mut self.engine.netfilter_mut().conntrack));
        }
    }

    fn take_back_conntrack(&mut self, cx: &mut Cx) {
        if let Some(table) = cx.conntrack.take() {
            self.engine.netfilter_mut().conntrack = table;
        }
    }

    /// A bridge whose two ports are not interfaces: frames are handed in with [`Bridge::arrive`] at
    /// times the caller chooses, and what leaves is kept for [`Bridge::take_sent`]. The receive path,
    /// the policy and `qdisc_run` are the live ones: for tests and the fuzz target.
    pub fn detached(mut engine: Engine, devs: [(&str, u32); 2]) -> Bridge {
        let ports = devs
            .iter()
            .map(|&(name, mtu)| {
                engine.add_device(name, mtu, 1000).mtu = mtu;
                Port {
                    name: name.to_string(),
                    sock: None,
                    rx_ring: None,
                    tx_ring: None,
                    xdp: None,
                    detached_out: Vec::new(),
                    mtu,
                    pending: Vec::new(),
                    stopped: false,
                    wake: None,
                    stats: PortStats::default(),
                    down: false,
                }
            })
            .collect();
        Bridge::with_ports(engine, ports)
    }

    /// The frames that left port `i` since the last call (a detached bridge's).
    pub fn take_sent(&mut self, i: usize) -> Vec<Vec<u8>> {
        flush(&mut self.ports[i], &mut self.spare);
        std::mem::take(&mut self.ports[i].detached_out)
    }

    /// Serve the wake-ups due at `now` and hand what leaves to the ports (a detached bridge's clock).
    pub fn poll(&mut self, now: Nanos) {
        self.serve_timers(now);
        for o in 0..self.ports.len() {
            self.flush_and_wake(now, o);
        }
    }

    /// The earliest time a tree wants to be asked again.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        self.ports
            .iter()
            .map(|p| p.wake)
            .chain(self.ifbs.iter().map(|v| v.wake))
            .flatten()
            .min()
    }

    /// Listen at `path` (mode 0600) for `tclab tc|iptables|link` calls: a show answers from the live
    /// counters, a change applies at once (queued packets stay where the tree keeps them), as the
    /// kernel's tc acts on a running qdisc. Refused if another bridge listens there.
    pub fn listen(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.control = Some(Control::bind(path)?);
        Ok(())
    }

    /// Answer the calls waiting on the control socket.
    fn serve_calls(&mut self) {
        loop {
            let Some(conn) = self.control.as_ref().and_then(Control::accept) else {
                return;
            };
            let now = self.now();
            let engine = &mut self.engine;
            tclab_tc::control::serve_connection(conn, CALL_TIMEOUT, |req| answer(engine, req, now));
            self.refresh_ct();
            self.after_call();
        }
    }

    /// A change may let a tree send now (a higher rate), or hold what it sent (a new shaper).
    fn after_call(&mut self) {
        let now = self.now();
        for o in 0..self.ports.len() {
            self.kick(now, o);
        }
        for v in 0..self.ifbs.len() {
            self.kick_ifb(now, v);
        }
    }

    /// Answer the calls the coordinating thread handed over (one queue of several).
    fn serve_queue_calls(&mut self) {
        let Some(c) = self.calls.as_ref() else {
            return;
        };
        c.waker.clear();
        let calls: Vec<Call> = c.rx.try_iter().collect();
        for call in calls {
            let now = self.now();
            let req = tclab_tc::control::Request {
                argv: call.argv,
                stdin: call.stdin,
                ..Default::default()
            };
            if req.argv.first().map(String::as_str) == Some(crate::queues::SAMPLE) {
                let counts = self.sample_counts(now);
                let _ = call.reply.send(crate::queues::Answer {
                    out: Default::default(),
                    layout: Vec::new(),
                    counts,
                });
                continue;
            }
            let out = answer(&mut self.engine, &req, now);
            self.refresh_ct();
            let layout = crate::queues::layout(&self.engine);
            let _ = call.reply.send(crate::queues::Answer {
                out,
                layout,
                counts: Vec::new(),
            });
            self.after_call();
        }
    }

    /// Whether to stop: a signal, or (one queue of several) the coordinating thread says so.
    fn stopping(&self) -> bool {
        match &self.calls {
            Some(c) => c.quit.load(Ordering::Relaxed),
            None => sys::STOP.load(Ordering::Relaxed),
        }
    }

    /// Nanoseconds since the bridge started.
    pub fn now(&self) -> Nanos {
        sys::monotonic_ns().saturating_sub(self.epoch)
    }

    pub fn port_names(&self) -> Vec<String> {
        self.ports.iter().map(|p| p.name.clone()).collect()
    }

    /// What the sampler reads: the engine's counters, and each port's received bytes on its device's
    /// root row (interfaces.csv's rx_bps, as `tclab sim` writes it). An unshaped port's root is
    /// noqueue, which counts nothing sent (as the kernel's): its row takes the port's sent bytes, so
    /// tx_bps still shows what left it.
    pub fn sample_counts(&self, now: Nanos) -> Vec<crate::sampler::Count> {
        let mut counts = crate::sampler::counts(&self.engine, now);
        for c in counts.iter_mut().filter(|c| c.class.is_empty()) {
            if let Some(p) = self.ports.iter().find(|p| p.name == c.dev) {
                c.rx_bytes = p.stats.rx_bytes;
                let noqueue = self
                    .engine
                    .device(&c.dev)
                    .is_some_and(|d| d.root().q.kind() == "noqueue");
                if noqueue {
                    c.bytes = p.stats.tx_bytes;
                }
            }
        }
        counts
    }

    pub fn stats(&self) -> Vec<(String, PortStats)> {
        self.ports
            .iter()
            .map(|p| (p.name.clone(), p.stats))
            .collect()
    }

    /// Times the loop has gone to sleep (in `ppoll`) so far.
    pub fn sleeps(&self) -> u64 {
        self.sleeps
    }

    /// Bridge until SIGINT/SIGTERM/SIGHUP ([`sys::STOP`]) or until `duration` has passed.
    pub fn run(&mut self, duration: Option<Nanos>) -> Result<(), String> {
        let r = self.run_loop(duration);
        // What the kernel dropped before the bridge could read it, however the loop ended.
        self.count_lost();
        if let Some(c) = self.busy.as_ref().filter(|c| c.pauses > 0) {
            eprintln!(
                "tclab live: paused {} times, {:.1} ms in all, to stay under the kernel's real-time throttling",
                c.pauses,
                c.paused_ns as f64 / 1e6
            );
        }
        r
    }

    fn run_loop(&mut self, duration: Option<Nanos>) -> Result<(), String> {
        sys::precise_timers();
        let deadline = duration.map(|d| self.now().saturating_add(d));
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); sys::BATCH];
        self.size_buffers(&mut bufs);
        let mut lens = vec![0usize; sys::BATCH];
        let mut tags = vec![None; sys::BATCH];
        if self.ports.iter().any(|p| p.sock.is_none()) {
            return Err("a detached bridge has no interfaces to run on".into());
        }
        let (mut fds, mut listening, mut tx_ports) = self.poll_set();
        // The control socket is looked at when ppoll says it is readable, and every so many busy
        // turns (under steady traffic the loop may not sleep for a long time).
        let mut calls_waiting = false;
        let mut turns: u32 = 0;
        // When the last frame arrived: the loop keeps polling the sockets for the spin's window after
        // it before it sleeps, so that a steady stream costs no wake-up per frame.
        let mut last_rx = 0;
        let mut idle = false;
        let mut spin = crate::spin::IdleSpin::new();
        // Only a real-time thread is throttled.
        self.busy = sys::is_realtime().then(crate::spin::BusyCap::default);
        while !self.stopping() {
            let now = self.now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            // Under the kernel's real-time throttling, in pauses a shaper's burst absorbs (see
            // BusyCap): frames wait in the rings meanwhile.
            if let Some(cap) = self.busy.as_mut().filter(|c| c.due(now)) {
                if let Some(p) = cap.judge(now, sys::thread_cpu_ns()) {
                    self.flush_all();
                    sys::pause_ns(p);
                    continue;
                }
            }
            self.serve_timers(now);
            if self.sampler.as_ref().is_some_and(|s| now >= s.next_due()) {
                let counts = self.sample_counts(now);
                if let Some(s) = self.sampler.as_mut() {
                    s.tick_counts(now, &counts);
                }
            }
            turns = turns.wrapping_add(1);
            if calls_waiting || turns.is_multiple_of(1024) {
                calls_waiting = false;
                self.serve_calls();
                self.serve_queue_calls();
                self.check_down_ports()?;
                if self.events.as_ref().is_some_and(sys::LinkEvents::changed) {
                    self.follow_links();
                    if self.follow_mtus() {
                        // Rings re-made or given up, other MTUs: other descriptors, other buffers.
                        (fds, listening, tx_ports) = self.poll_set();
                        self.size_buffers(&mut bufs);
                    }
                }
            }
            let mut received = 0;
            for i in 0..self.ports.len() {
                if let Some(mut x) = self.ports[i].xdp.take() {
                    let n = self.receive_xdp(i, &mut x);
                    self.ports[i].xdp = Some(x);
                    self.note_up(i, n);
                    received += n;
                    continue;
                }
                if let Some(mut ring) = self.ports[i].rx_ring.take() {
                    let n = self.receive_ring(i, &mut ring);
                    self.ports[i].rx_ring = Some(ring);
                    self.note_up(i, n);
                    received += n;
                    continue;
                }
                for _ in 0..RX_BATCHES_PER_TURN {
                    let Some(sock) = self.ports[i].sock.as_ref() else {
                        break;
                    };
                    let n = match sock.recv_batch(&mut bufs, &mut lens, &mut tags) {
                        Ok(n) => n,
                        Err(e) => {
                            self.port_error(i, e, "receive: ")?;
                            break;
                        }
                    };
                    let now = self.now();
                    for k in 0..n {
                        let cap = bufs[k].len();
                        let frame = &bufs[k][..lens[k].min(cap)];
                        let partial = self.ports[i]
                            .sock
                            .as_ref()
                            .is_some_and(|s| s.partial_in_batch(k));
                        let how = Arrived {
                            wire_len: lens[k],
                            truncated: lens[k] > cap,
                            accel: tags[k].map(|(proto, tci)| VlanTag { proto, tci }),
                            csum_partial: partial,
                            csum_unsaid: false,
                        };
                        self.arrive_cut(now, i, frame, how);
                    }
                    received += n;
                    self.note_up(i, n);
                    let partial = self.ports[i].sock.as_ref().map_or(0, |s| s.take_partial());
                    self.note_partial(i, partial);
                    if n < sys::BATCH {
                        break;
                    }
                }
            }
            self.flush_all();
            let now = self.now();
            if received > 0 {
                // Judged only after an idle turn: back-to-back batches say nothing about the gaps.
                if idle {
                    spin.frame(now.saturating_sub(last_rx));
                }
                idle = false;
                last_rx = now;
                continue;
            }
            idle = true;
            if now.saturating_sub(last_rx) < spin.window() {
                std::hint::spin_loop();
                continue;
            }
            // Nothing arrived for a while: sleep until the next wake-up, a frame, or a signal.
            let next = self
                .ports
                .iter()
                .map(|p| p.wake)
                .chain(self.ifbs.iter().map(|v| v.wake))
                .flatten()
                .chain(deadline)
                .chain(self.sampler.as_ref().map(|s| s.next_due()))
                .min();
            let mut timeout = next.map(|t| t.saturating_sub(now));
            // A transmit ring the kernel stopped sending from (the device busy) is tried again soon:
            // no frame arrival would wake the loop for it. One whose device is down is tried as
            // seldom as a port set down is looked at: every millisecond, for as long as it stayed
            // down, cost 4 % of a core (debug build) and sent nothing.
            for p in &self.ports {
                let retry = match p.tx_ring.as_ref().filter(|r| r.stalled()) {
                    Some(r) if r.device_down() => DOWN_CHECK_NS,
                    Some(_) => STALLED_NS,
                    None if p.xdp.as_ref().is_some_and(|x| x.stalled()) => STALLED_NS,
                    None => continue,
                };
                timeout = Some(timeout.map_or(retry, |t| t.min(retry)));
            }
            // A port set down is looked at now and then: it may be deleted, not brought up.
            if self.ports.iter().any(|p| p.down) {
                self.check_down_ports()?;
                timeout = Some(timeout.map_or(DOWN_CHECK_NS, |t| t.min(DOWN_CHECK_NS)));
            }
            // A deadline within a sleep's usual overshoot is spun for.
            let margin = spin.margin();
            if timeout.is_some_and(|t| t <= margin) {
                continue;
            }
            // Writable: a socket that sends with sendmmsg, a transmit ring or an AF_XDP socket,
            // with frames pending.
            let pending = |o: usize| !self.ports[o].pending.is_empty();
            let writable: Vec<bool> = (0..self.ports.len())
                .map(|o| {
                    pending(o) && self.ports[o].tx_ring.is_none() && self.ports[o].xdp.is_none()
                })
                .chain((self.ports.len()..listening).map(|_| false))
                .chain(tx_ports.iter().map(|&o| pending(o)))
                .collect();
            let asked = timeout.map(|t| t - margin);
            let cpu0 = spin.measure().then(sys::thread_cpu_ns);
            let wall0 = sys::monotonic_ns();
            self.sleeps += 1;
            let ready = sys::wait(&fds, &writable, asked).map_err(|e| format!("ppoll: {e}"))?;
            let wall = sys::monotonic_ns().saturating_sub(wall0);
            let cpu = cpu0.map(|c| sys::thread_cpu_ns().saturating_sub(c));
            spin.slept(cpu, wall, asked, ready.is_empty() && !self.stopping());
            calls_waiting = ready
                .iter()
                .any(|&r| r >= self.ports.len() && r < listening);
            // A ring's socket that woke the loop may carry an error no call returned (its interface
            // gone): the recvmmsg path's error, or ppoll would wake at once for ever.
            for &r in &ready {
                let port = if r < self.ports.len() {
                    Some(r)
                        .filter(|&i| self.ports[i].rx_ring.is_some() || self.ports[i].xdp.is_some())
                } else {
                    r.checked_sub(listening).map(|k| tx_ports[k])
                };
                if let Some(i) = port {
                    if let Err(e) = sys::socket_error(fds[r]) {
                        self.port_error(i, e, "")?;
                    }
                }
            }
        }
        Ok(())
    }

    /// What the loop waits on in `ppoll`: the ports' sockets, the control socket or the calls' waker,
    /// the link events (those up to the second value, "listening"), then the transmit rings'
    /// sockets and the AF_XDP sockets (waited on for a free slot while frames are pending; an
    /// AF_XDP socket also for a frame) and the ports they belong to.
    fn poll_set(&self) -> (Vec<i32>, usize, Vec<usize>) {
        let mut fds: Vec<i32> = self
            .ports
            .iter()
            .filter_map(|p| p.sock.as_ref())
            .map(PacketSocket::raw)
            .collect();
        fds.extend(self.control.as_ref().map(Control::raw));
        fds.extend(self.calls.as_ref().map(|c| c.waker.raw()));
        fds.extend(self.events.as_ref().map(sys::LinkEvents::raw));
        let listening = fds.len();
        let tx_ports: Vec<usize> = (0..self.ports.len())
            .filter(|&o| self.ports[o].tx_ring.is_some() || self.ports[o].xdp.is_some())
            .collect();
        fds.extend(tx_ports.iter().filter_map(|&o| {
            let p = &self.ports[o];
            p.tx_ring
                .as_ref()
                .map(sys::TxRing::raw)
                .or(p.xdp.as_ref().map(crate::xdp::XdpPort::raw))
        }));
        (fds, listening, tx_ports)
    }

    /// Receive buffers (`recvmmsg`) for a frame of the largest MTU with its link header and tags.
    fn size_buffers(&self, bufs: &mut [Vec<u8>]) {
        let need = self
            .ports
            .iter()
            .map(|p| p.mtu as usize)
            .max()
            .unwrap_or(1500)
            + 64;
        for b in bufs {
            b.resize(need, 0);
        }
    }

    /// Read the ports' MTUs again (a link changed); true if one changed.
    fn follow_mtus(&mut self) -> bool {
        let mut changed = false;
        for i in 0..self.ports.len() {
            let p = &self.ports[i];
            // A port that went away says so through its socket's error.
            let Some(Ok(mtu)) = p.sock.as_ref().map(|s| sys::mtu_by(s.raw(), &p.name)) else {
                continue;
            };
            if mtu != p.mtu {
                self.set_mtu(i, mtu);
                changed = true;
            }
        }
        changed
    }

    /// Port `i`'s interface has MTU `mtu` now (`ip link set DEV mtu N` while bridging), as the
    /// kernel's bridge follows a port's MTU: frames arriving for it are checked against it, its
    /// device in the engine has it, queued frames longer than it are refused as its device would
    /// refuse them ([`device_refuses`]), and its rings are re-made on their sockets with slots that
    /// hold a frame of it (what the receive ring held is lost; the transmit ring's frames are sent
    /// first). The bridge has no privilege left by then, so a ring the kernel will not re-make
    /// leaves the port on `recvmmsg` or `sendmmsg`, not on a new socket.
    pub fn set_mtu(&mut self, i: usize, mtu: u32) {
        let port = &mut self.ports[i];
        let old = port.mtu;
        port.mtu = mtu;
        if let Some(d) = self.engine.device_mut(&port.name) {
            d.mtu = mtu;
        }
        // As RingGeometry::for_mtu sizes a slot: the link header and two VLAN tags.
        let frame = mtu as usize + 14 + 8;
        let mut rings = Vec::new();
        if let (Some(ring), Some(sock)) = (port.rx_ring.take(), port.sock.as_ref()) {
            if ring.max_frame() >= frame {
                port.rx_ring = Some(ring);
            } else {
                let g = sys::RingGeometry::for_mtu(mtu, ring.bytes());
                match ring.reshape(sock, g) {
                    Ok(r) => {
                        rings.push(format!(
                            "receive ring re-made with {}-byte slots",
                            g.frame_size
                        ));
                        port.rx_ring = Some(r);
                    }
                    Err(e) => rings.push(format!("no receive ring ({e}): receiving with recvmmsg")),
                }
            }
        }
        if let Some(ring) = port.tx_ring.take() {
            if ring.max_frame() >= frame {
                port.tx_ring = Some(ring);
            } else {
                let g = sys::RingGeometry::for_mtu(mtu, ring.bytes());
                match ring.reshape(g) {
                    Ok(r) => {
                        rings.push(format!(
                            "transmit ring re-made with {}-byte slots",
                            g.frame_size
                        ));
                        port.tx_ring = Some(r);
                    }
                    // Its socket goes with it: the port sends with sendmmsg on its receiving one.
                    Err((e, _)) => {
                        rings.push(format!("no transmit ring ({e}): sending with sendmmsg"))
                    }
                }
            }
        }
        if let Some(x) = port.xdp.as_ref().filter(|x| x.max_frame() < frame) {
            // The UMEM's chunks are fixed when the socket is made.
            rings.push(format!(
                "its AF_XDP chunks hold frames of up to {} bytes: longer ones are lost",
                x.max_frame()
            ));
        }
        let name = &port.name;
        let mut msg = format!("{name}: MTU {old} -> {mtu}, followed");
        for r in &rings {
            msg.push_str("; ");
            msg.push_str(r);
        }
        // Once for all queues that fared alike (one whose ring the kernel refused says so too), and
        // once each time: a change back and forth and back again (1500 -> 9000 -> 1500 -> 9000) is
        // said each time, not only the first. The queues hear a change within microseconds of each
        // other, so forgetting the port's other changes does not say one twice (a queue would
        // have to read the MTU, then stall while another queue hears the next change).
        let kind = format!("mtu {name} ");
        let change = format!("{kind}{old}->{mtu} ");
        self.said.forget_others(&kind, &change);
        self.said.once(format!("{change}{msg}"), || msg);
        // Frames from the other port too large for this one are said again at this MTU, if they
        // were at another (an MTU lowered, raised, lowered again: the frames are news again).
        let kind = format!("oversize {} ", self.ports[1 - i].name);
        self.said.forget_others(&kind, &format!("{kind}{mtu} "));
    }

    /// Add what the kernel dropped for each port's socket since the last look to its counters.
    fn count_lost(&mut self) {
        for p in &mut self.ports {
            if let Some(n) = p.sock.as_ref().and_then(|s| s.take_drops().ok()) {
                p.stats.rx_lost += n;
            }
            if let Some(n) = p.xdp.as_mut().and_then(|x| x.lost().ok()) {
                p.stats.rx_lost += n;
            }
        }
    }

    /// An error port `i`'s socket reported. `ENETDOWN` while the socket is still bound to its
    /// interface is an interface set down, which the kernel bridge outlives: the socket receives
    /// again once it is up (`packet_notifier` hooks it again on `NETDEV_UP`), so the bridge says so
    /// and goes on, watching the port ([`Bridge::check_down_ports`]). Anything else, an interface
    /// deleted among them, stops it; a deleted one (its socket unbound at `NETDEV_UNREGISTER`) as
    /// [`Bridge::check_down_ports`] says it, not as `Network is down`, which reads as if a port
    /// set down were fatal.
    fn port_error(&mut self, i: usize, e: std::io::Error, what: &str) -> Result<(), String> {
        let port = &self.ports[i];
        let down = e.raw_os_error() == Some(libc::ENETDOWN);
        if down && !port_bound(port) {
            return Err(went_away(&port.name));
        }
        if down {
            // Each ENETDOWN is a NETDEV_DOWN (the notifier sets it once; reading it clears it),
            // at which the kernel purged the device's queues: purged here too, also when the port
            // is up again by now (set down and up between two looks of the bridge's).
            self.purge(i);
            let state = self.link_state(i).unwrap_or(sys::LinkState::Down);
            self.follow_link(i, state);
            return Ok(());
        }
        Err(format!("{}: {what}{e}", port.name))
    }

    /// Port `i`'s interface as the kernel has it now (`None` for a detached port, or if it cannot
    /// be read).
    fn link_state(&self, i: usize) -> Option<sys::LinkState> {
        let p = &self.ports[i];
        sys::link_state_by(p.sock.as_ref()?.raw(), &p.name).ok()
    }

    /// Port `i`'s interface is in `state`: if that is news, the port follows it, and going down
    /// is said (once for all the queues that see it).
    fn follow_link(&mut self, i: usize, state: sys::LinkState) {
        let up = state == sys::LinkState::Up;
        if up != self.ports[i].down {
            return;
        }
        if !up {
            let name = &self.ports[i].name;
            let why = if state == sys::LinkState::NoCarrier {
                "has no carrier (the other end of its link is down)"
            } else {
                "is down"
            };
            self.said.once(format!("down {name}"), || {
                format!(
                    "warning: {name} {why}: nothing passes through it until it is up again (frames \
                     for it are dropped, as the kernel drops them, and counted as tx_dropped)"
                )
            });
        }
        // The NETDEV_DOWN error the port's socket got when it went down has been followed: read
        // now, once the port is up, it would purge frames queued since.
        if let Some(s) = self.ports[i].sock.as_ref() {
            let _ = sys::socket_error(s.raw());
        }
        self.set_port_up(i, up);
    }

    /// Port `i`'s interface went down (set down, or its carrier lost) or came up, as the kernel's
    /// `dev_deactivate` and `dev_activate` follow it: going down purges what it would have sent
    /// ([`Bridge::purge`]) and marks its device down in the engine, so that frames for it are dropped
    /// as `noop_qdisc` drops them (counted as `tx_dropped`) and a mirred action to it finds it down
    /// (`tcf_mirred_act`: an overlimit, a redirected packet shot); coming up puts its tree back.
    /// The loop calls it on the link's events, a detached bridge's caller at will.
    pub fn set_port_up(&mut self, i: usize, up: bool) {
        let name = &self.ports[i].name;
        if up {
            if self.ports[i].down {
                self.said.forget(&format!("down {name}"));
                // Said once for all queues, as its going down was, which left "nothing passes
                // through it" as the log's last word on the port.
                self.said.once(format!("up {name}"), || {
                    format!("{name} is up again: frames pass through it")
                });
                self.ports[i].down = false;
            }
        } else {
            self.said.forget(&format!("up {name}"));
            self.ports[i].down = true;
            self.purge(i);
        }
        let port = &self.ports[i];
        if self.engine.device(&port.name).is_some_and(|d| d.up != up) {
            self.engine.set_up(&port.name, up);
        }
    }

    /// Port `i`'s device was set down: what it would have sent is purged, as the kernel purges it
    /// (`dev_deactivate` → `qdisc_reset` on the tree: emptied, no drop counted; the driver's ring
    /// freed at `ndo_stop`), instead of being sent seconds later when it is up again.
    fn purge(&mut self, i: usize) {
        let port = &mut self.ports[i];
        if let Some(d) = self.engine.device_mut(&port.name) {
            d.reset_qdiscs();
        }
        let (mut n, mut bytes) = port.tx_ring.as_mut().map_or((0, 0), |r| r.discard());
        let st = &mut port.stats;
        st.tx_ring = st.tx_ring.saturating_sub(n);
        for f in port.pending.drain(..) {
            n += 1;
            bytes += f.len() as u64;
            self.spare.push(f);
        }
        st.tx_packets = st.tx_packets.saturating_sub(n);
        st.tx_bytes = st.tx_bytes.saturating_sub(bytes);
        st.tx_purged += n;
        port.stopped = false;
        port.wake = None;
    }

    /// `n` frames arrived on port `i` with their transport checksum left to a device. Only a sender
    /// in this machine does that (a veth's or tap's other end with tx-checksumming on); forwarded
    /// as they came, their receiver would drop every TCP and UDP packet — a link that pings but
    /// carries nothing — so [`Bridge::arrive_cut`] completes them. Said once per port; counted.
    fn note_partial(&mut self, i: usize, n: u64) {
        if n == 0 {
            return;
        }
        let port = &mut self.ports[i];
        port.stats.rx_csum_partial += n;
        let name = &port.name;
        self.said.once(format!("partial {name}"), || {
            format!(
                "{name}: frames arrive with their TCP/UDP checksums left to a device (the other end \
                 of a veth with tx-checksumming on): tclab fills them in as that device would \
                 (IPv4, IPv6 without extension headers; others go as they came)"
            )
        });
    }

    /// `n` frames arrived on port `i`: if it was down, it is up again (and its going down is worth
    /// saying again).
    fn note_up(&mut self, i: usize, n: usize) {
        if self.ports[i].down && n > 0 {
            self.follow_link(i, sys::LinkState::Up);
        }
    }

    /// Every port follows its interface's state (a link event came: set up or down, a carrier
    /// gained or lost).
    fn follow_links(&mut self) {
        for i in 0..self.ports.len() {
            if let Some(state) = self.link_state(i) {
                self.follow_link(i, state);
            }
        }
    }

    /// A port that is down follows its interface's state (where no link event says it is up again);
    /// one that has since been deleted stops the bridge (a deletion sets a socket's error once, at
    /// its `NETDEV_DOWN`, which may have been read while the interface still existed).
    fn check_down_ports(&mut self) -> Result<(), String> {
        for i in 0..self.ports.len() {
            let port = &self.ports[i];
            if !port.down {
                continue;
            }
            if !port_bound(port) {
                return Err(went_away(&port.name));
            }
            if let Some(state) = self.link_state(i) {
                self.follow_link(i, state);
            }
        }
        Ok(())
    }

    /// What port `i`'s receive ring holds, up to `RX_BATCHES_PER_TURN` batches, read in place; a slot
    /// whose header does not describe a frame within it counts as malformed. Returns how many.
    fn receive_ring(&mut self, i: usize, ring: &mut sys::RxRing) -> usize {
        let mut received = 0;
        for _ in 0..RX_BATCHES_PER_TURN {
            let now = self.now();
            let n = ring.take(sys::BATCH, |slot| self.arrive_slot(now, i, slot));
            self.ports[i].stats.rx_ring += n as u64;
            received += n;
            if n < sys::BATCH {
                break;
            }
        }
        received
    }

    /// What port `i`'s AF_XDP socket received, up to `RX_BATCHES_PER_TURN` batches, read in place in
    /// its UMEM. The kernel hands over whole frames only (a longer one it drops, counted in
    /// [`PortStats::rx_lost`]), as their bytes are when generic XDP runs, before the kernel takes
    /// a VLAN tag out, and nothing else: a tag a veth peer's offload kept beside the bytes is not
    /// seen, and a checksum it left to its device is told by its bytes alone.
    fn receive_xdp(&mut self, i: usize, x: &mut crate::xdp::XdpPort) -> usize {
        let mut received = 0;
        for _ in 0..RX_BATCHES_PER_TURN {
            let now = self.now();
            let n = x.take(sys::BATCH, |frame| self.arrive_unflagged(now, i, frame));
            self.ports[i].stats.rx_ring += n as u64;
            received += n;
            if n < sys::BATCH {
                break;
            }
        }
        received
    }

    /// A receive ring's slot on port `i`, header and frame as the kernel wrote them (a detached
    /// bridge's caller: any bytes): the frame goes on as [`Bridge::arrive_tagged`]'s, a slot whose
    /// header does not describe a frame within it counts as received and malformed.
    pub fn arrive_slot(&mut self, now: Nanos, i: usize, slot: &[u8]) {
        match sys::slot_view(slot) {
            Some(f) => {
                self.note_partial(i, u64::from(f.csum_partial));
                let how = Arrived {
                    wire_len: f.len,
                    truncated: f.truncated(),
                    accel: f.vlan.map(|(proto, tci)| VlanTag { proto, tci }),
                    csum_partial: f.csum_partial,
                    csum_unsaid: false,
                };
                self.arrive_cut(now, i, f.data, how);
            }
            None => {
                self.ports[i].stats.rx_packets += 1;
                self.ports[i].stats.malformed += 1;
            }
        }
    }

    /// Ask every tree whose wake-up has come.
    fn serve_timers(&mut self, now: Nanos) {
        for i in 0..self.ports.len() {
            if let Some(w) = self.ports[i].wake.filter(|w| *w <= now) {
                let st = &mut self.ports[i].stats;
                st.wakeups += 1;
                st.late_ns_sum += now - w;
                st.late_ns_max = st.late_ns_max.max(now - w);
                self.ports[i].wake = None;
                self.kick(now, i);
            }
        }
        for v in 0..self.ifbs.len() {
            if self.ifbs[v].wake.is_some_and(|w| w <= now) {
                self.ifbs[v].wake = None;
                self.kick_ifb(now, v);
            }
        }
    }

    /// A frame received on port `i` as an AF_XDP socket hands it over: whole, its bytes alone (a
    /// checksum left to a device told by them, [`frame::left_to_device`]).
    pub fn arrive_unflagged(&mut self, now: Nanos, i: usize, frame: &[u8]) {
        let how = Arrived {
            wire_len: frame.len(),
            truncated: false,
            accel: None,
            csum_partial: false,
            csum_unsaid: true,
        };
        self.arrive_cut(now, i, frame, how);
    }

    /// A frame received on port `i` (`truncated`: longer than the buffer).
    pub fn arrive(&mut self, now: Nanos, i: usize, frame: &[u8], truncated: bool) {
        self.arrive_tagged(now, i, frame, truncated, None);
    }

    /// [`Bridge::arrive`] for a frame whose outer VLAN tag the kernel took out of its bytes (`accel`).
    pub fn arrive_tagged(
        &mut self,
        now: Nanos,
        i: usize,
        frame: &[u8],
        truncated: bool,
        accel: Option<VlanTag>,
    ) {
        let how = Arrived {
            wire_len: frame.len(),
            truncated,
            accel,
            csum_partial: false,
            csum_unsaid: false,
        };
        self.arrive_cut(now, i, frame, how);
    }

    /// A frame of which `frame` arrived, as its socket described it (`how`): the received bytes count
    /// its whole length, as the device's counters do, also when its slot or buffer cut it.
    fn arrive_cut(&mut self, now: Nanos, i: usize, frame: &[u8], how: Arrived) {
        let Arrived {
            wire_len,
            truncated,
            accel,
            csum_partial,
            csum_unsaid,
        } = how;
        let other_mtu = self.ports[1 - i].mtu as usize;
        let st = &mut self.ports[i].stats;
        st.rx_packets += 1;
        st.rx_bytes += wire_len.max(frame.len()) as u64 + if accel.is_some() { 4 } else { 0 };
        let Some(mut pkt) = frame::to_packet_tagged(frame, &mut self.headers, accel) else {
            st.malformed += 1;
            return;
        };
        if truncated || pkt.data.len() > other_mtu {
            st.oversize += 1;
            let (from, to) = (&self.ports[i].name, &self.ports[1 - i].name);
            // Once per MTU of `to`'s (set_mtu forgets the others): a user who lowers it again
            // hears of it again.
            self.said.once(format!("oversize {from} {other_mtu} "), || {
                format!(
                    "warning: {}",
                    oversize_warning(from, to, other_mtu, frame.len(), truncated)
                )
            });
            return;
        }
        // What the sender's device would have done: a filter or a receiver sees the real checksum.
        if csum_partial {
            frame::complete_checksum(&mut pkt.data, pkt.protocol);
        } else if csum_unsaid && frame::left_to_device(&pkt.data, pkt.protocol) {
            frame::complete_checksum(&mut pkt.data, pkt.protocol);
            self.note_partial(i, 1);
        }
        self.receive(now, i, pkt, Cx::new(now));
    }

    /// `__netif_receive_skb` on port `i`: its ingress hook, then the bridge.
    fn receive(&mut self, now: Nanos, i: usize, pkt: Packet, mut cx: Cx) {
        self.lend_conntrack(&mut cx);
        let pkt =
            (self.engine.device_mut(&self.ports[i].name)).map(|dev| dev.receive(pkt, &mut cx));
        self.take_back_conntrack(&mut cx);
        let Some(pkt) = pkt else {
            return;
        };
        if !cx.mirred.is_empty() {
            self.mirred(now, cx.mirred.take());
        }
        match pkt {
            Some(p) => self.after_ingress(now, i, p),
            None => self.ports[i].stats.rx_dropped += cx.drops.len() as u64,
        }
    }

    /// The path after the ingress hook: netfilter as for a forwarded packet, the TOS byte's priority,
    /// then the other port's egress qdisc.
    fn after_ingress(&mut self, now: Nanos, i: usize, mut pkt: Packet) {
        let other = 1 - i;
        let nf = self.engine.netfilter();
        if !nf.is_empty() || nf.ct_hooks {
            let (inp, out) = (self.ports[i].name.clone(), self.ports[other].name.clone());
            let nf = self.engine.netfilter_mut();
            if !host::pre_routing(nf, &mut pkt, &inp, now)
                || !host::forward(nf, &mut pkt, &inp, &out, now)
            {
                return;
            }
        }
        if let Some(tos) = pkt.ipv4_tos() {
            pkt.priority = tclab_core::qdisc::pfifo_fast::tos_to_priority(tos);
        }
        if let Some(q) = self.queue {
            // This thread's queue: the other queues' trees live in other threads' engines.
            pkt.set_queue_mapping(Some(q));
        }
        self.transmit(now, other, pkt, Cx::new(now));
    }

    /// Enqueue on port `o`'s root qdisc and run its queue.
    fn transmit(&mut self, now: Nanos, o: usize, pkt: Packet, mut cx: Cx) -> Verdict {
        let Some(dev) = self.engine.device(&self.ports[o].name) else {
            return Verdict::Drop;
        };
        if !dev.up {
            // The device is down: `noop_enqueue` drops it, counted in the device's tx_dropped.
            self.ports[o].stats.tx_dropped += 1;
            return Verdict::Cn;
        }
        self.lend_conntrack(&mut cx);
        let pkt = self.skbs.boxed(pkt);
        let verdict = (self.engine.device_mut(&self.ports[o].name))
            .map(|dev| dev.enqueue_skb(pkt, &mut cx).to_sender());
        self.take_back_conntrack(&mut cx);
        let Some(verdict) = verdict else {
            return Verdict::Drop;
        };
        if !cx.drops.is_empty() {
            let drops = cx.drops.take();
            if let Some(dev) = self.engine.device_mut(&self.ports[o].name) {
                dev.count_dropped(&drops);
            }
        }
        if !cx.mirred.is_empty() {
            self.mirred(now, cx.mirred.take());
        }
        self.kick(now, o);
        verdict
    }

    /// `qdisc_run` on port `o`: what its tree releases goes to the socket's pending frames.
    fn kick(&mut self, now: Nanos, o: usize) {
        let Bridge {
            engine,
            ports,
            headers,
            spare,
            skbs,
            ..
        } = self;
        let port = &mut ports[o];
        let Some(dev) = engine.device_mut(&port.name) else {
            return;
        };
        let mut tx = PortTx {
            pending: &mut port.pending,
            stats: &mut port.stats,
            headers,
            spare,
            skbs,
        };
        if let Some(w) = host::qdisc_run(dev, now, None, &mut tx) {
            port.wake = Some(port.wake.map_or(w, |p| p.min(w)));
        }
        port.stopped = !tx.ready();
        if port.pending.len() >= sys::BATCH {
            flush(port, &mut self.spare);
        }
    }

    fn flush_all(&mut self) {
        let now = self.now();
        for o in 0..self.ports.len() {
            self.flush_and_wake(now, o);
        }
    }

    /// Hand port `o`'s pending frames to its socket; if its tree was stopped by a full socket and the
    /// socket took them all, ask the tree again. Only then: a throttled tree is asked on enqueue and
    /// at its wake-up, as the kernel asks it — asking on every turn of the loop would cost a dequeue
    /// per turn and count an overlimit each time (TBF's, HFSC's), many times the kernel's count.
    fn flush_and_wake(&mut self, now: Nanos, o: usize) {
        flush(&mut self.ports[o], &mut self.spare);
        if self.ports[o].stopped && self.ports[o].pending.is_empty() {
            self.kick(now, o);
            flush(&mut self.ports[o], &mut self.spare);
        }
    }

    /// Deliver what mirred actions sent (`tcf_mirred_forward`): out of a port, into one, or into an ifb;
    /// a target that refuses the packet costs the action an overlimit.
    fn mirred(&mut self, now: Nanos, sent: Vec<Mirrored>) {
        for m in sent {
            let action = m.action;
            if self.mirred_one(now, m) {
                if let Some(a) = self.engine.actions().get("mirred", action) {
                    a.borrow_mut().stats.overlimits += 1;
                }
            }
        }
    }

    fn port_of(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }

    /// One mirred delivery; true if the target refused it.
    fn mirred_one(&mut self, now: Nanos, m: Mirrored) -> bool {
        let mut pkt = m.pkt;
        pkt.iif = self.port_of(&m.from_dev).map_or(0, |i| i as u32 + 1);
        pkt.redirect = if m.redirected {
            Packet::REDIRECTED
                | if m.from_ingress {
                    Packet::FROM_INGRESS
                } else {
                    0
                }
        } else {
            0
        };
        let mut cx = Cx::new(now);
        cx.mirred.set_nest(m.nest, m.depth);
        if let Some(i) = self.port_of(&m.dev) {
            if m.to_ingress {
                self.receive(now, i, pkt, cx);
                return false;
            }
            return self.transmit(now, i, pkt, cx) != Verdict::Success;
        }
        let Some(v) = self.ifbs.iter().position(|v| v.name == m.dev) else {
            // Not a device this bridge drives (nor one of the policy's ifbs): nowhere to go.
            return true;
        };
        self.lend_conntrack(&mut cx);
        let Some(dev) = self.engine.device_mut(&m.dev) else {
            self.take_back_conntrack(&mut cx);
            return true;
        };
        if m.to_ingress {
            let _ = dev.receive(pkt, &mut cx);
            self.take_back_conntrack(&mut cx);
            if !cx.mirred.is_empty() {
                self.mirred(now, cx.mirred.take());
            }
            return false;
        }
        let verdict = dev.enqueue(pkt, &mut cx).to_sender();
        self.take_back_conntrack(&mut cx);
        if !cx.drops.is_empty() {
            let drops = cx.drops.take();
            if let Some(dev) = self.engine.device_mut(&m.dev) {
                dev.count_dropped(&drops);
            }
        }
        if !cx.mirred.is_empty() {
            self.mirred(now, cx.mirred.take());
        }
        self.kick_ifb(now, v);
        verdict != Verdict::Success
    }

    /// `qdisc_run` of an ifb, whose transmit is immediate (`ifb_xmit` + `ifb_ri_tasklet`): every packet
    /// its tree releases now goes back to the port it came from — into the bridge past that port's
    /// ingress hook if it was redirected there, else out of that port.
    fn kick_ifb(&mut self, now: Nanos, v: usize) {
        if self.ifbs[v].running {
            return;
        }
        self.ifbs[v].running = true;
        while let Some(dev) = self.engine.device_mut(&self.ifbs[v].name) {
            let (pkt, cx) = host::qdisc_restart(dev, now);
            let Some(mut pkt) = pkt else {
                if let Some(w) = cx.wake_at {
                    let w = host::wake_time(w, now, None);
                    let vd = &mut self.ifbs[v];
                    vd.wake = Some(vd.wake.map_or(w, |p| p.min(w)));
                }
                break;
            };
            if pkt.redirect & Packet::REDIRECTED == 0 || pkt.iif == 0 {
                continue;
            }
            let i = pkt.iif as usize - 1;
            let from_ingress = pkt.redirect & Packet::FROM_INGRESS != 0;
            pkt.redirect = 0;
            pkt.iif = 0;
            if from_ingress {
                self.after_ingress(now, i, pkt);
            } else {
                let mut cx = Cx::new(now);
                cx.mirred.set_skip_classify();
                self.transmit(now, i, pkt, cx);
            }
        }
        self.ifbs[v].running = false;
    }
}

/// A warning for each qdisc an admin gave one of `devs` in the kernel ([`sys::kernel_qdiscs`]): the
/// frames tclab forwards pass it by (read by packet sockets before the kernel's ingress, sent with
/// `PACKET_QDISC_BYPASS` or AF_XDP past its egress qdiscs), so its policy silently stops applying
/// to them. One line per tree: a qdisc under another of the admin's is part of that one's tree.
pub fn kernel_qdisc_warnings(devs: &[String]) -> Vec<String> {
    use tclab_core::Handle;
    let mut lines = Vec::new();
    for dev in devs {
        let qdiscs = match sys::kernel_qdiscs(dev) {
            Ok(q) => q,
            Err(e) => {
                lines.push(format!(
                    "{dev}: cannot list the kernel's qdiscs on it ({e})"
                ));
                continue;
            }
        };
        let majors: Vec<u16> = qdiscs.iter().map(|q| q.handle.major()).collect();
        for q in &qdiscs {
            let top = q.parent == Handle::ROOT || q.parent == Handle::INGRESS;
            if !top && majors.contains(&q.parent.major()) {
                continue;
            }
            let (at, del) = match (q.parent, q.kind.as_str()) {
                (Handle::ROOT, _) => ("root".to_string(), "root".to_string()),
                (Handle::INGRESS, k @ ("ingress" | "clsact")) => ("ingress".into(), k.to_string()),
                (p, _) => (format!("parent {p}"), format!("parent {p}")),
            };
            lines.push(format!(
                "{dev} has a kernel qdisc, {} {} {at}: the frames tclab forwards pass it by \
                 (read before the kernel's ingress, sent past its qdiscs), so it no longer applies \
                 to them; put that policy in tclab's (--policy), or remove it: \
                 tc qdisc del dev {dev} {del}",
                q.kind, q.handle
            ));
        }
    }
    lines
}

/// Open `queues` packet sockets on each of `devs`, after checking the devices and turning their
/// offloads off: per queue, one port per device. With several queues each device's sockets join one
/// fanout group (`PACKET_FANOUT_HASH`), so that the kernel spreads arriving frames over the queues'
/// threads by flow.
pub fn open_ports(
    devs: &[String],
    queues: usize,
    rings: Rings,
) -> Result<(Vec<Vec<OpenPort>>, Setup), String> {
    if devs.len() != 2 || devs[0] == devs[1] {
        return Err("tclab live bridges two different devices: --dev A --dev B".into());
    }
    if rings == Rings::Xdp && queues > 1 {
        return Err("--xdp serves one queue: give --queues 1 or bridge without --xdp".into());
    }
    let mut setup = Setup {
        offloads: Vec::new(),
        restored: false,
        rings: Vec::new(),
        xdp: rings == Rings::Xdp,
    };
    let mut out: Vec<Vec<OpenPort>> = (0..queues).map(|_| Vec::new()).collect();
    // The keeper is started before the first offload is touched (and only if one is on), so that no
    // way of ending leaves one turned off.
    let mut keeper: Option<std::io::Result<sys::Keeper>> = None;
    setup.restored = true;
    for (i, name) in devs.iter().enumerate() {
        let mtu = sys::mtu(name).map_err(|e| e.to_string())?;
        if keeper.is_none() && !sys::offloads_on_now(name).unwrap_or_default().is_empty() {
            keeper = Some(sys::Keeper::start());
        }
        let turned = sys::offloads_off(name).map_err(|e| e.to_string())?;
        if !turned.is_empty() {
            setup.restored &= match &keeper {
                Some(Ok(k)) => k.note(name, &turned).is_ok(),
                _ => false,
            };
        }
        setup.offloads.push((name.clone(), turned));
        // A group id of this process's own: groups are named per network namespace.
        let group = (std::process::id() as u16)
            .wrapping_mul(2)
            .wrapping_add(i as u16);
        let (rx_shape, tx_shape) = match rings {
            Rings::On => {
                let (rx, tx) = ring_shapes(mtu, queues);
                (Some(rx), Some(tx))
            }
            Rings::Shaped(g) => (Some(g), Some(g)),
            Rings::Off | Rings::Xdp => (None, None),
        };
        let mut setup_rings = RingSetup {
            dev: name.clone(),
            rx: Ok(()),
            tx: Ok(()),
        };
        for port in out.iter_mut() {
            let sock = PacketSocket::open(name).map_err(|e| e.to_string())?;
            // The ring before the fanout group: the kernel takes a ring only on a socket outside one.
            let rx_ring = rx_shape.and_then(|g| {
                sys::RxRing::attach(&sock, g)
                    .map_err(|e| note_refusal(&mut setup_rings.rx, e))
                    .ok()
            });
            let tx_ring = tx_shape.and_then(|g| {
                sys::TxRing::open(name, g)
                    .map_err(|e| note_refusal(&mut setup_rings.tx, e))
                    .ok()
            });
            if queues > 1 {
                sock.join_fanout(group)
                    .map_err(|e| format!("{name}: {e}"))?;
            }
            let xdp = match rings {
                Rings::Xdp => {
                    let ifindex = sys::ifindex(name).map_err(|e| e.to_string())?;
                    Some(crate::xdp::XdpPort::open(name, ifindex, mtu)?)
                }
                _ => None,
            };
            // One listener per queue for the MTU changes of both ports (their namespace's).
            let events = if i == 0 {
                sys::LinkEvents::open().ok()
            } else {
                None
            };
            port.push(OpenPort {
                name: name.clone(),
                mtu,
                sock,
                rx_ring,
                tx_ring,
                xdp,
                events,
            });
        }
        if !matches!(rings, Rings::Off | Rings::Xdp) {
            setup.rings.push(setup_rings);
        }
    }
    Ok((out, setup))
}

/// What the first oversize frame on port `from` makes the bridge say, at once (a frame dropped in
/// silence looks like a broken link; the summary counts them all): a frame cut by its receive ring
/// slot or buffer (`truncated`: longer than `from`'s own MTU), or one whose packet is larger than
/// `to`'s MTU (followed while tclab runs: [`Bridge::set_mtu`]).
pub fn oversize_warning(
    from: &str,
    to: &str,
    to_mtu: usize,
    frame_len: usize,
    truncated: bool,
) -> String {
    let what = if truncated {
        format!("a frame longer than {from}'s receive slot or buffer (sized for its MTU) arrived")
    } else {
        format!("a {frame_len}-byte frame arrived, its packet larger than {to}'s {to_mtu}-byte MTU")
    };
    // A veth or tap forwards a GSO packet whatever its MTU (is_skb_forwardable), so a frame longer
    // than the port's own MTU is a sender's super-packet, and every full-sized TCP segment of that
    // sender is one: a link that pings and all but stalls TCP, unless the cause is said.
    let cause = if truncated {
        " (on a veth or tap: the sender at its other end hands over TSO/GSO super-packets, and its \
         TCP stalls; turn them off there: ethtool -K DEV tso off gso off)"
    } else {
        ""
    };
    format!("{from}: {what}; dropped, and such frames are counted as oversize{cause}")
}

/// The receive and transmit rings of one socket of a device of `mtu` bridged by `queues` threads:
/// 8 MiB and 2 MiB for one, split between several (the fanout gives each socket its share of the
/// frames), but not below 2 MiB and 512 KiB, room for one flow's burst on a socket of its own. The
/// rings are the kernel's memory, mapped: at 8 + 2 MiB per socket, 64 queues would hold 1.3 GB.
pub fn ring_shapes(mtu: u32, queues: usize) -> (sys::RingGeometry, sys::RingGeometry) {
    let q = queues.max(1) as u32;
    (
        sys::RingGeometry::for_mtu(mtu, ((8 << 20) / q).max(2 << 20)),
        sys::RingGeometry::for_mtu(mtu, ((2 << 20) / q).max(512 << 10)),
    )
}

/// Why the bridge stopped when port `name`'s interface was deleted.
fn went_away(name: &str) -> String {
    format!("{name}: the interface went away")
}

/// Whether port `port`'s socket is still bound to an interface (a detached port's is).
fn port_bound(port: &Port) -> bool {
    port.sock
        .as_ref()
        .is_none_or(|s| sys::bound_ifindex(s.raw()).is_ok_and(|x| x > 0))
}

/// Keep the first reason a device's ring was refused.
fn note_refusal(first: &mut Result<(), String>, e: std::io::Error) {
    if first.is_ok() {
        *first = Err(e.to_string());
    }
}

/// How long a caller of the control socket may take to send its request or read the answer: the
/// bridge waits for it (the socket is its owner's only).
pub(crate) const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(200);

/// The control socket of a bridge, removed when the bridge is dropped.
pub(crate) struct Control {
    listener: std::os::unix::net::UnixListener,
    path: std::path::PathBuf,
}

impl Control {
    /// Listen at `path` (mode 0600, non-blocking); refused if another bridge listens there.
    pub(crate) fn bind(path: &std::path::Path) -> Result<Control, String> {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::net::{UnixListener, UnixStream};
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "a tclab live is already running in this network namespace (it listens at {})",
                path.display()
            ));
        }
        let _ = std::fs::remove_file(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let listener = UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Control {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The next waiting connection, if any.
    pub(crate) fn accept(&self) -> Option<std::os::unix::net::UnixStream> {
        self.listener.accept().ok().map(|(c, _)| c)
    }

    pub(crate) fn raw(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.listener)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A `tclab tc|iptables|link` call on the live engine.
pub(crate) fn answer(
    engine: &mut Engine,
    req: &tclab_tc::control::Request,
    now: Nanos,
) -> tclab_tc::Output {
    let refuse = |msg: String| tclab_tc::Output {
        stderr: msg,
        code: 1,
        ..Default::default()
    };
    let Some((cmd, args)) = req.argv.split_first() else {
        return refuse("tclab live: an empty call\n".into());
    };
    // A device the bridge does not have: the kernel's answer, not a new device no frame reaches.
    fn unknown(engine: &Engine, words: &[String]) -> Option<tclab_tc::Output> {
        words
            .windows(2)
            .find(|w| w[0] == "dev" && engine.device(&w[1]).is_none())
            .map(|w| tclab_tc::Output {
                stderr: format!("Cannot find device \"{}\"\n", w[1]),
                code: 1,
                ..Default::default()
            })
    }
    match cmd.as_str() {
        "tc" if tclab_tc::store::batch_arg(args).is_none() && unknown(engine, args).is_some() => {
            unknown(engine, args).unwrap_or_default()
        }
        "tc" => match tclab_tc::store::batch_arg(args) {
            None => tclab_tc::run(engine, args, now),
            Some(_) => {
                // A batch: its lines in order, stopping at the first refused one unless -force.
                let force = args.iter().any(|a| a == "-force" || a == "-f");
                let text = req.stdin.clone().unwrap_or_default();
                let mut out = tclab_tc::Output::default();
                for (n, line) in tclab_tc::store::batch_lines(&text) {
                    let words = match tclab_tc::store::batch_words(&line) {
                        Ok(w) => w,
                        Err(e) => {
                            // tc exits at an unclosed quote: the batch ends, -force or not.
                            out.stderr.push_str(&format!("{e}\n"));
                            out.code = 1;
                            break;
                        }
                    };
                    let o = match unknown(engine, &words) {
                        Some(refused) => refused,
                        None => tclab_tc::run(engine, &words, now),
                    };
                    out.stdout.push_str(&o.stdout);
                    if o.code != 0 {
                        out.stderr.push_str(&format!("{}Command failed -:{n}\n", o.stderr));
                        out.code = 1;
                        if !force {
                            break;
                        }
                    } else {
                        out.stderr.push_str(&o.stderr);
                    }
                }
                out
            }
        },
        "iptables" => tclab_tc::iptables::run(engine, args),
        "link" if args.first().is_none_or(|a| matches!(a.as_str(), "show" | "list" | "ls")) => {
            let mut names = engine.device_names();
            names.sort();
            tclab_tc::Output {
                stdout: names.iter().map(|n| format!("{n}\n")).collect(),
                ..Default::default()
            }
        }
        "link" => refuse(
            "tclab live: devices cannot be added, changed or removed while bridging; stop it, change the policy and start it again\n".into(),
        ),
        other => refuse(format!("tclab live: \"{other}\" is not a tc, iptables or link call\n")),
    }
}

/// Whether a device of MTU `mtu` refuses `frame`, as `tpacket_snd` and `packet_snd` refuse it:
/// longer than the MTU and its Ethernet header, unless the 4 bytes more are a VLAN tag's
/// (`packet_extra_vlan_len_allowed`).
pub fn device_refuses(frame: &[u8], mtu: u32) -> bool {
    let max = mtu as usize + 14;
    frame.len() > max && (frame.len() > max + 4 || frame.get(12..14) != Some(&[0x81, 0x00][..]))
}

/// Take the frames the port's device refuses (its MTU lowered while they were queued) out of its
/// pending ones: on the ring the kernel would drop them unseen (`PACKET_LOSS`), through `sendmmsg`
/// one would fail a call. Counted as the kernel counts a frame its device refused after the qdisc:
/// in `tx_dropped`, not sent.
fn drop_refused(port: &mut Port, spare: &mut Vec<Vec<u8>>) {
    let mtu = port.mtu;
    if port.pending.iter().all(|f| !device_refuses(f, mtu)) {
        return;
    }
    let st = &mut port.stats;
    for f in std::mem::take(&mut port.pending) {
        if device_refuses(&f, mtu) {
            st.tx_dropped += 1;
            st.tx_packets -= 1;
            st.tx_bytes -= f.len() as u64;
            spare.push(f);
        } else {
            port.pending.push(f);
        }
    }
}

/// Where a port's frames leave when it has a ring: a `TPACKET_V2` transmit ring or an AF_XDP
/// socket's TX ring.
trait SendRing {
    /// Copy `frame` into the ring: `Ok(false)` if it is full, an error if the frame cannot fit a slot.
    fn push(&mut self, frame: &[u8]) -> std::io::Result<bool>;
    /// Have the kernel send what was pushed.
    fn kick(&mut self) -> std::io::Result<()>;
    /// Frames wait in the ring for another kick.
    fn stalled(&self) -> bool;
}

impl SendRing for sys::TxRing {
    fn push(&mut self, frame: &[u8]) -> std::io::Result<bool> {
        sys::TxRing::push(self, frame)
    }
    fn kick(&mut self) -> std::io::Result<()> {
        sys::TxRing::kick(self)
    }
    fn stalled(&self) -> bool {
        sys::TxRing::stalled(self)
    }
}

impl SendRing for crate::xdp::XdpPort {
    fn push(&mut self, frame: &[u8]) -> std::io::Result<bool> {
        crate::xdp::XdpPort::push(self, frame)
    }
    fn kick(&mut self) -> std::io::Result<()> {
        crate::xdp::XdpPort::kick(self)
    }
    fn stalled(&self) -> bool {
        crate::xdp::XdpPort::stalled(self)
    }
}

/// Copy `pending` frames into `ring` while it has room and kick it.
fn flush_ring(
    ring: &mut impl SendRing,
    pending: &mut Vec<Vec<u8>>,
    stats: &mut PortStats,
    spare: &mut Vec<Vec<u8>>,
) {
    let mut taken = 0;
    for f in pending.iter() {
        match ring.push(f) {
            Ok(true) => stats.tx_ring += 1,
            Ok(false) => break,
            // Larger than a slot (the ring was made for the MTU): dropped, as the device would.
            Err(_) => stats.tx_errors += 1,
        }
        taken += 1;
    }
    spare.extend(pending.drain(..taken));
    if (taken > 0 || ring.stalled()) && ring.kick().is_err() {
        stats.tx_errors += 1;
    }
}

/// Hand a port's pending frames to its socket; what it cannot take now stays pending.
fn flush(port: &mut Port, spare: &mut Vec<Vec<u8>>) {
    drop_refused(port, spare);
    if let Some(x) = port.xdp.as_mut() {
        return flush_ring(x, &mut port.pending, &mut port.stats, spare);
    }
    if let Some(ring) = port.tx_ring.as_mut() {
        return flush_ring(ring, &mut port.pending, &mut port.stats, spare);
    }
    if port.pending.is_empty() {
        return;
    }
    let Some(sock) = port.sock.as_ref() else {
        // Detached: the frames are kept for the caller.
        port.detached_out.append(&mut port.pending);
        return;
    };
    match sock.send_batch(&port.pending) {
        Ok(n) => {
            spare.extend(port.pending.drain(..n));
        }
        Err(_) => {
            // A frame the device refuses (too long for it, device down): counted and dropped, so that
            // one bad frame does not block the port.
            port.stats.tx_errors += 1;
            if !port.pending.is_empty() {
                spare.push(port.pending.remove(0));
            }
        }
    }
}

/// The port's transmitter for `qdisc_run`: frames go to the pending list while it has room.
struct PortTx<'a> {
    pending: &'a mut Vec<Vec<u8>>,
    stats: &'a mut PortStats,
    headers: &'a Headers,
    spare: &'a mut Vec<Vec<u8>>,
    /// The bridge's spare boxes, where a sent packet's box goes for the next packet the bridge reads.
    skbs: &'a mut SkbCache,
}

impl Transmitter for PortTx<'_> {
    fn ready(&self) -> bool {
        self.pending.len() < PENDING_MAX
    }
    fn send(&mut self, pkt: Packet) {
        self.write(&pkt);
    }
    /// The frame is written from the packet in its box, and the box kept for the bridge's next packet.
    fn send_skb(&mut self, pkt: Box<Packet>, _skbs: &mut SkbCache) {
        self.write(&pkt);
        self.skbs.recycle(pkt);
    }
}

impl PortTx<'_> {
    /// The packet's frame into the pending list (or counted stale if it cannot be written).
    fn write(&mut self, pkt: &Packet) {
        let mut buf = self.spare.pop().unwrap_or_default();
        if !frame::to_frame(pkt, self.headers, &mut buf) {
            self.stats.stale += 1;
            self.spare.push(buf);
            return;
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += buf.len() as u64;
        self.pending.push(buf);
    }
}
