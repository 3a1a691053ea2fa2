//! The network: nodes, interfaces, links, forwarding, and the event loop that drives them.
//!
//! A node is a host or a router with interfaces. Each interface is one end of a full-duplex point-to-point
//! link; what it sends goes through the node's tclab [`Engine`] device of the same name, so whatever
//! `tc` policy the scenario applied to it (or the `pfifo_fast` a Linux NIC starts with) decides what leaves
//! and when. The link then takes `(frame length + overhead) × 8 / rate` to serialise the packet and
//! `delay` to carry it to the other end.
//!
//! The driver loop is the kernel's `qdisc_run` in miniature: whenever a packet is enqueued on an idle
//! interface, when the interface finishes sending, and when a shaper's watchdog fires, the interface asks
//! its root qdisc for a packet. A qdisc that holds packets back answers "nothing now, wake me at T" and the
//! loop schedules a wake-up at T — rounded up to the next timer tick when the scenario models a kernel
//! without high-resolution timers (`hz`).
//!
//! Routing is static and computed once: a breadth-first search from every node gives the interface towards
//! every other node (ties broken by interface order, so it is deterministic). Addresses are assigned per
//! link, `10.0.L.1` and `10.0.L.2` for link L; a packet to any address of a node is delivered to it.
//!
//! Arriving packets pass the device's ingress hook first (a policer can drop them there), then the node's
//! netfilter hooks as Linux orders them (PREROUTING; then INPUT and local delivery, or FORWARD and
//! POSTROUTING), where `iptables -t mangle` rules may set marks for `fw` filters, `skb->priority` (CLASSIFY)
//! or the TOS byte. Locally generated packets pass OUTPUT and POSTROUTING. Forwarding sets
//! `skb->priority` from the TOS byte as `ip_forward` does (`rt_tos2priority`) and keeps the mark. TTL is
//! not decremented: no topology here has loops.
//!
//! A `mirred` action's packet ([`tclab_core::action::mirred::Mirrored`]) is delivered as soon as the call
//! that classified it returns, as the kernel calls the target from inside the action: out of an
//! interface (its root qdisc, then its wire), into an interface's receive path, or into an ifb. An ifb
//! (`ip link add ifb0 type ifb` in a node's policy) belongs to a node and to no link: its root qdisc is
//! dequeued as fast as it allows (an ifb transmits at once), and each packet it releases goes back to
//! the interface it was redirected from — into the stack after that interface's ingress hook if it was
//! taken at ingress (sqm's way of shaping a download), else out of it — skipping classification once
//! (`tc_skip_classify`). A mirror's copy reaching an ifb is dropped there after its qdisc, as `ifb_xmit`
//! drops what was not redirected.

use crate::apps::{App, Outbox};
use crate::des::EventQueue;
use crate::rng::Rng;
use crate::sched::{Lateness, SchedDelay};
use crate::wire::{Datagram, L4, PROTO_TCP};
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use tclab_core::action::mirred::Mirrored;
use tclab_core::engine::DefaultRoot;
use tclab_core::engine::DevKind;
use tclab_core::host::{self, Transmitter};
use tclab_core::netfilter::Netfilter;
use tclab_core::packet::SkbCache;
use tclab_core::qdisc::netem::Netem;
use tclab_core::qdisc::pfifo_fast::tos_to_priority;
use tclab_core::qdisc::{Cx, Dropped, Qdisc, Verdict};
use tclab_core::{Engine, Nanos, Packet, NSEC_PER_SEC};

pub type NodeId = usize;
pub type IfaceId = usize;
pub type AppId = usize;

pub use tclab_core::host::ETH_HLEN;

/// The frame length of a datagram, as [`Network`] builds its packet.
fn pkt_len_of(d: &Datagram) -> u32 {
    d.total_len() + ETH_HLEN
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Host,
    Router,
}

/// One direction of a link, as seen by the interface that sends on it.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkParams {
    /// Bits per second.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay: Nanos,
    /// Extra bytes each frame occupies on the wire (preamble, FCS, inter-frame gap...), for serialisation only.
    pub overhead: u32,
    /// An ATM line (ADSL): the frame's IP packet plus `overhead` bytes of encapsulation travel in 53-byte
    /// cells of 48 bytes each, the last one padded; the Ethernet header is not sent.
    pub atm: bool,
    /// Probability that a frame is lost on the wire.
    pub loss: f64,
    /// Extra delay drawn uniformly from [0, jitter] per frame (frames are never reordered: a frame never
    /// arrives before the one sent ahead of it).
    pub jitter: Nanos,
    /// The link's impairment written as a netem line: every frame that finishes serialisation passes
    /// through a netem instance of the link (its delay, jitter, loss, duplication, corruption, reordering,
    /// rate, slots) before the propagation `delay`. Replaces `loss` and `jitter`.
    pub netem: Option<tclab_core::qdisc::netem::NetemOptions>,
    /// A veth pair rather than a NIC and its cable: a GSO packet crosses whole, as one unit on the wire,
    /// and the peer takes it as one skb (`veth_xmit` hands the skb to the peer; the device's features
    /// include TSO, so nothing segments it), unless it exceeds the sending device's `gso_max_segs` or
    /// `gso_max_size` (`gso_features_check`: then it is cut as a NIC cuts it), or the sending device's
    /// TSO is off (`ethtool -K DEV tso off`: then the stack cuts it in software before the veth).
    pub veth: bool,
}

impl LinkParams {
    pub fn new(rate_bps: u64, delay: Nanos) -> LinkParams {
        LinkParams {
            rate_bps,
            delay,
            overhead: 0,
            atm: false,
            loss: 0.0,
            jitter: 0,
            netem: None,
            veth: false,
        }
    }

    /// Time to serialise a frame of `len` bytes, in whole nanoseconds plus a remainder (in units of
    /// 1/rate ns) carried from the previous frame, so that a stream of frames keeps the exact rate even
    /// where one frame takes a fraction of a nanosecond more than a whole number (a terabit link).
    pub fn tx_time(&self, len: u32, carry: &mut u64) -> Nanos {
        // A frame is at most 64 KiB, a GSO packet a veth carries whole at most 512 KiB and the overhead
        // at most 65535 bytes (the scenario checks them), so bytes × 8 × 1e9 stays below 2^53: no
        // 128-bit division on the hot path.
        let bytes = if self.atm {
            (len.saturating_sub(14) as u64 + self.overhead as u64).div_ceil(48) * 53
        } else {
            len as u64 + self.overhead as u64
        };
        let bits_ns = bytes * 8 * NSEC_PER_SEC + *carry;
        *carry = bits_ns % self.rate_bps;
        bits_ns / self.rate_bps
    }
}

/// What the recorder samples: an interface of the topology (a wired device), or an ifb device — where
/// sqm-style policies queue what arrives — by its place in [`Network::vdevs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Port {
    Iface(IfaceId),
    Ifb(usize),
    /// A node's teql master ([`TeqlPort`]): what it handed its slaves, and its queue.
    Teql(NodeId),
}

/// The interface counters Linux keeps in `/sys/class/net/IF/statistics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IfCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    /// Packets the egress qdisc dropped: refused on arrival or dropped after being queued (every packet in
    /// the enqueue's and dequeue's drop lists).
    pub tx_dropped: u64,
    /// Dropped on arrival by an ingress filter's action (a policer); a stolen packet is not counted.
    pub rx_dropped: u64,
    /// Lost on the wire (link loss).
    pub wire_lost: u64,
    /// Dropped by an iptables rule on the way in or out.
    pub nf_dropped: u64,
}

pub struct Iface {
    pub node: NodeId,
    pub name: String,
    pub addr: u32,
    pub peer: IfaceId,
    pub link: LinkParams,
    pub counters: IfCounters,
    busy: bool,
    wake_pending: Option<Nanos>,
    /// The sub-nanosecond part of the serialisation times so far (see [`LinkParams::tx_time`]).
    tx_carry: u64,
    /// The application whose packet is on the wire now, and its frame length (for its TX completion).
    tx_owner: Option<(AppId, u32)>,
    /// The frames of a GSO packet still to be sent after the one on the wire (`skb_gso_segment`: the
    /// NIC, or the stack for it, cuts the packet after the qdisc), and the packet's owner and charged
    /// length, freed with its last frame.
    tx_pending: std::collections::VecDeque<Box<Packet>>,
    gso_owner: Option<(AppId, u32)>,
    /// Position of the interface's device among its node's devices, and how many there were then.
    /// The engine's id for this interface's device ([`Network::index_devices`]).
    dev_id: Option<tclab_core::engine::DevId>,
    /// Arrival time of the last frame sent, so jitter never reorders.
    last_arrival: Nanos,
    rng: Rng,
    /// The link's netem (see [`LinkParams::netem`]), the frame on the wire until its serialisation ends,
    /// and the pending wake-up of the netem.
    netem: Option<Box<Netem>>,
    tx_frame: Option<Box<Packet>>,
    netem_wake: Option<Nanos>,
}

/// An ifb device of a node: no wire, a qdisc emptied as fast as it allows.
pub struct Vdev {
    pub node: NodeId,
    pub name: String,
    /// As the kernel's ifb counts: `rx_*` what its qdisc handed to the device (`ifb_xmit`), `tx_*` what it
    /// gave back, `rx_dropped` what it refused (not redirected, or nowhere to go); `tx_dropped` what its
    /// qdisc dropped.
    pub counters: IfCounters,
    wake_pending: Option<Nanos>,
    /// Inside its own transmit loop (a packet it gives back may lead to another enqueue on it).
    running: bool,
}

pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    /// The node's devices (one per interface, same name) and their tc policy.
    pub engine: Engine,
    pub ifaces: Vec<IfaceId>,
    /// Interface towards each node, by node id; `None` for the node itself and for unreachable nodes.
    pub routes: Vec<Option<IfaceId>>,
    /// The realms its policy's `ip route … realm` lines gave its routes, most specific first.
    pub realms: Vec<RealmRoute>,
    /// Whether a filter of the node reads a packet's route (route, meta `rt_classid`): only then is
    /// one attached to the packets it sends and forwards (a boxed extension each).
    pub reads_route: bool,
    /// Whether its policy has a `ct` action: its calls into the qdiscs are then lent the node's
    /// connection table ([`Cx::conntrack`]).
    pub uses_ct: bool,
    /// Packets its receive path dropped for a wrong checksum, under `nstat`'s names.
    pub csum_errors: CsumErrors,
}

/// What a node's receive path counts of packets with a wrong checksum, as Linux's SNMP MIBs count them
/// (`nstat` names). Only packets a tc action edited are verified ([`Packet::CSUM_IMPLIED`]): a
/// simulated host's packets are valid by construction, so the others cannot be wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CsumErrors {
    /// `IpInHdrErrors`: a wrong IPv4 header checksum (`ip_rcv_core`), on any node, router or host.
    #[serde(rename = "IpInHdrErrors")]
    pub ip_in_hdr_errors: u64,
    /// `TcpInCsumErrors`, `UdpInCsumErrors`, `IcmpInCsumErrors`: a wrong transport checksum at the
    /// host the packet is for (`tcp_v4_rcv`, `__udp4_lib_rcv`, `icmp_rcv`).
    #[serde(rename = "TcpInCsumErrors")]
    pub tcp_in_csum_errors: u64,
    #[serde(rename = "UdpInCsumErrors")]
    pub udp_in_csum_errors: u64,
    #[serde(rename = "IcmpInCsumErrors")]
    pub icmp_in_csum_errors: u64,
}

/// A route's realms (`ip route add PREFIX … realm N`, `RTA_FLOW`): the prefix it covers and its
/// `nh_tclassid` (destination realm in the low 16 bits, a `realms S/D` source realm in the high 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RealmRoute {
    pub prefix: u32,
    pub len: u8,
    pub tclassid: u32,
}

impl RealmRoute {
    pub fn covers(&self, addr: u32) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.len as u32).unwrap_or(0);
        (addr ^ self.prefix) & mask == 0
    }
}

impl Node {
    /// The `nh_tclassid` of the node's route to `addr`: the most specific realm route covering it, 0
    /// when none does (the simulator's own routes have no realm).
    pub fn realm_of(&self, addr: u32) -> u32 {
        self.realms
            .iter()
            .find(|r| r.covers(addr))
            .map_or(0, |r| r.tclassid)
    }

    /// Give the routes under `r`'s prefix its realms, replacing those of a route of the same prefix
    /// (`ip route replace`), and keep the table most specific first.
    pub fn set_realm(&mut self, r: RealmRoute) {
        self.realms
            .retain(|o| (o.prefix, o.len) != (r.prefix, r.len));
        let at = self
            .realms
            .iter()
            .position(|o| o.len < r.len)
            .unwrap_or(self.realms.len());
        self.realms.insert(at, r);
    }
}

/// Ask the cache for the line holding `p`: a hint, which reads nothing the program sees.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of any address is harmless: it never faults and changes no state the program
    // can observe.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The applications from which a run looks ahead (`Network::prefetch_next`): 256 TCP endpoints are
/// about 400 KB, a fifth of this machine's 2 MB second-level cache. bench-htb's 62 stay in cache, and
/// the look-ahead cost it 12 % more instructions; bench-isp's 2 000 do not.
const LOOK_AHEAD_APPS: usize = 256;

/// A socket's key in `Network::demux`: node, protocol, local port, remote address and port (0, 0 for a
/// listener).
type DemuxKey = (NodeId, u8, u16, u32, u16);

/// A [`DemuxKey`] as `Network::demux` keeps it: one 128-bit word, hashed in two steps and compared
/// at once, where the tuple was hashed field by field (five steps) and compared five times. The node
/// takes the top 56 bits.
#[inline]
fn demux_word((node, proto, lport, raddr, rport): DemuxKey) -> u128 {
    ((node as u128) << 72)
        | ((proto as u128) << 64)
        | ((lport as u128) << 48)
        | ((raddr as u128) << 16)
        | rport as u128
}

/// No socket, in `Network::found`: no key packs to it (the node takes the top 56 bits).
const NOTHING_FOUND: (u128, AppId) = (u128::MAX, 0);

/// A frame's box (two lines) and its headers.
#[inline(always)]
fn prefetch_frame(p: &Packet) {
    prefetch(p);
    prefetch((p as *const Packet).cast::<u8>().wrapping_add(64));
    prefetch(p.data.as_ptr());
}

/// Events are kept small (16 bytes) so that the heap moves little: a packet on a wire waits in
/// `Wires::on_wire`, and its arrival event names the slot.
#[derive(Clone, Copy)]
enum Event {
    Arrive {
        iface: u32,
        slot: u32,
    },
    TxDone {
        iface: u32,
    },
    /// A shaper's watchdog; `late`: it already ran late once (`SchedDelay::tx`), so it runs now.
    Wake {
        iface: u32,
        late: bool,
    },
    VWake {
        vdev: u32,
    },
    /// An application's timer; `late`: a pacing timer that already ran late once
    /// (`SchedDelay::pace_late`), so it runs now.
    AppTimer {
        app: u32,
        late: bool,
    },
    /// A TCP socket processes the segments its backlog holds (`SchedDelay::rx`).
    AppRx {
        app: u32,
    },
    /// A link's netem may release frames now.
    LinkWake {
        iface: u32,
    },
    /// A node's teql master's qdisc may release packets now.
    TeqlWake {
        node: u32,
    },
}

/// A node's teql master `teql0` (`sch_teql.c`): no wire of its own. While it is up, what the node routes
/// out of one of its slaves goes through teql0's root qdisc instead, and each packet that qdisc releases
/// goes straight onto the wire of the next free slave in the master's ring, past the slave's own qdisc
/// (`teql_master_xmit` → the slave's driver). A slave is free when it is up and its wire idle: its own
/// qdisc's packets take the wire first. When every slave is busy and teql0 still holds packets, the
/// master is stopped (`netif_stop_queue`); the next slave whose qdisc then comes up empty
/// (`teql_dequeue`, run by its queue's wake-up) becomes the ring's head and wakes it. A wire busy
/// with one frame is a stopped transmit queue here, but on Linux a NIC's ring holds many and stops
/// only when full, so under a light load no slave's qdisc runs at all and the ring is served strictly
/// in turn: a slave's empty qdisc moves the head only while the master is stopped (even after the
/// slave's own traffic, which on Linux moves it too).
#[derive(Clone, Debug, Default)]
pub struct TeqlPort {
    /// Packets teql0's qdisc dropped, and packets routed to it that did not fit its MTU.
    pub tx_dropped: u64,
    wake_pending: Option<Nanos>,
    /// The frames of a GSO packet teql0's qdisc released that no slave could take yet: teql0 has no
    /// GSO feature, so `validate_xmit_skb` cuts the packet before `teql_master_xmit`, and the frames
    /// left when every slave is busy wait (requeued) for the next free one.
    pending: std::collections::VecDeque<Packet>,
    /// `netif_stop_queue(teql0)`: every slave was busy with packets still to send (the one in hand
    /// requeued on teql0's root: `Sched::requeues`).
    stopped: bool,
}

/// The socket table's hash: FxHash's step (rotate, xor, multiply) over the key's few integers. It has
/// no secret, which is what a simulator wants (the table is never iterated, so its layout cannot leak
/// into a run either way).
#[derive(Default)]
struct PortHasher(u64);

impl PortHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for PortHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.add(b as u64));
    }
    fn write_u8(&mut self, n: u8) {
        self.add(n as u64)
    }
    fn write_u16(&mut self, n: u16) {
        self.add(n as u64)
    }
    fn write_u32(&mut self, n: u32) {
        self.add(n as u64)
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n)
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64)
    }
    fn write_u128(&mut self, n: u128) {
        self.add(n as u64);
        self.add((n >> 64) as u64)
    }
}

/// An address and port: one end of a connection.
type Peer = (u32, u16);

/// The most delivered packets' header buffers kept for reuse (a GSO packet's frames each bring one
/// back, and one comes back for each packet made): as many as [`SkbCache::KEEP`] boxes, for the same
/// reason — no more are kept than were once in flight together.
const SPARE_DATA: usize = SkbCache::KEEP;

/// The room a header buffer is made with: the longest IPv4 and TCP headers (60 bytes each). Buffers
/// go from packet to packet (a data segment's to an ACK with SACK blocks, one frame's to the next),
/// and one made to a first header's exact length was allocated again for a longer one.
const HDR_ROOM: usize = 60 + 60;

/// A header buffer for a packet or frame being made: a kept one if there is one.
#[inline]
/// The ports the flow dissector finds in the bytes `Datagram::emit_into` writes for `d` (`Some(None)`
/// when it finds none): a TCP or UDP header's under its own protocol number, none for ICMP or a bare IP
/// header under a protocol without ports. `None` for a combination whose bytes only dissection can tell.
fn datagram_ports(d: &Datagram) -> Option<Option<(u16, u16)>> {
    use crate::wire::{L4, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
    match (&d.l4, d.ip.protocol) {
        (L4::Tcp(t), PROTO_TCP) => Some(Some((t.sport, t.dport))),
        (L4::Udp(u), PROTO_UDP) => Some(Some((u.sport, u.dport))),
        (L4::Icmp(_), PROTO_ICMP) => Some(None),
        (L4::Other, p) if !tclab_core::flow::has_ports(p) => Some(None),
        _ => None,
    }
}

fn spare_header(spare: &mut Vec<Vec<u8>>) -> Vec<u8> {
    spare.pop().unwrap_or_else(|| Vec::with_capacity(HDR_ROOM))
}

/// Keep a consumed packet's buffer for the next packet or frame made (`kfree_skb` returning its data to
/// the cache), up to [`SPARE_DATA`].
#[inline]
fn keep_data(spare: &mut Vec<Vec<u8>>, data: Vec<u8>) {
    if spare.len() < SPARE_DATA {
        spare.push(data);
    }
}

/// Something the simulation calls back at fixed instants (the samplers).
pub trait Observer {
    fn observe(&mut self, now: Nanos, net: &Network);
}

/// The world: topology, devices, applications, and the event queue.
pub struct Network {
    pub nodes: Vec<Node>,
    pub ifaces: Vec<Iface>,
    /// The ifb devices mirred actions have sent to, found on first use.
    pub vdevs: Vec<Vdev>,
    pub apps: Vec<App>,
    /// Where each TCP application's endpoint is in memory (0 for others), dense beside `apps`' larger
    /// entries: an address only to prefetch (`prefetch_socket`), never read through.
    app_socket: Vec<usize>,
    /// The last two sockets `prefetch_socket` found (its key as `demux` keeps it and its answer,
    /// newest first; `NOTHING_FOUND` for none): the delivery of those arrivals takes the answer
    /// instead of searching `demux` again. Forgotten when a socket is bound. Packed keys: the tuples
    /// took 26 instructions an arrival to shift and ten compares a delivery.
    found: [(u128, AppId); 2],
    app_node: Vec<NodeId>,
    app_timer: Vec<Option<Nanos>>,
    /// Until when each application's pacing timer runs late (its softirq behind other work; 0: not
    /// late): a timer armed for earlier waits for it, as Linux's still queued hrtimer is not re-armed.
    app_pace_late: Vec<Nanos>,
    /// Each application's `net_cls.classid` (its cgroup's; 0 for none), which its packets carry.
    app_classid: Vec<u32>,
    /// Segments a TCP socket has not processed yet (its backlog while it runs late: [`SchedDelay`]),
    /// with each one's `gso_size`, in arrival order.
    app_backlog: Vec<std::collections::VecDeque<(Datagram, u16)>>,
    /// The host's scheduling delays (off unless the scenario sets `sched_delay`).
    pub sched: SchedDelay,
    /// Which application gets a packet: (node, protocol, local port, remote address, remote port); remote
    /// address and port 0 mean "any" (a listening socket or a UDP sink). Looked up for every packet
    /// delivered and never iterated, so hashed (a B-tree of 2 000 sockets cost 2 % of bench-isp).
    demux: HashMap<u128, AppId, BuildHasherDefault<PortHasher>>,
    /// Receiving ends waiting for their first packet (a TCP SYN, a UDP datagram), by (node, protocol,
    /// local port), in the order they listened, each with the peer its traffic entry names: a
    /// listening socket's accept queue ([`Network::listen`]).
    listeners: BTreeMap<(NodeId, u8, u16), Vec<(AppId, Peer)>>,
    /// ICMP echo identifiers → ping application.
    ping_ids: BTreeMap<(NodeId, u16), AppId>,
    q: EventQueue<Event>,
    /// What a wire's sending end writes to ([`Wires`]), in one place so that a [`Wire`] borrows it whole.
    wires: Wires,
    /// Shaper timer granularity; `None` for high-resolution timers.
    pub tick: Option<Nanos>,
    pub seed: u64,
    /// The key of every packet's flow hash (`skb->hash`), the kernel's `hashrnd`: one per run.
    hashrnd: [u64; 2],
    ip_id: u16,
    /// A sch_fq took a packet of the socket being flushed (`Cx::pacing_fq`): the socket is told.
    paced_by_fq: bool,
    /// The teql master of each node whose policy made one ([`TeqlPort`]).
    pub teqls: BTreeMap<NodeId, TeqlPort>,
    /// Call contexts kept between calls instead of built and dropped for each (dropping one tests each
    /// of its lists out of line: 2.6 % of bench-htb's instructions). `run_cx` serves `kick`'s dequeues,
    /// which never nest; `spare_cx` the enqueues and receives, which do (a delivery answered at once, a
    /// mirred action): a nested call finds it taken and makes its own.
    run_cx: Cx,
    spare_cx: Option<Box<Cx>>,
    /// Outboxes kept between calls with their vectors' memory, taken by each call into an application
    /// and put back empty by `flush` (calls nest: a flush's packet delivered on its own host, a freed
    /// skb): one made and dropped per call was 5 % of bench-isp's instructions, in malloc and free.
    /// Boxed, so that taking one out and putting it back moves a pointer, not its 13 words.
    #[allow(clippy::vec_box)]
    outboxes: Vec<Box<Outbox>>,
    /// The per-packet trace being written (`tclab sim --trace`), if any.
    pub trace: Option<crate::trace::Trace>,
    /// Per node, whether its netfilter hooks would change nothing (no rule, no DROP policy, no
    /// conntrack hooks): then a packet skips the call into them. Set when a run starts and cleared
    /// when it returns: nothing in a run changes rules, and outside one the hooks are always asked.
    nf_idle: Vec<bool>,
}

impl Network {
    pub fn new(seed: u64) -> Network {
        Network {
            nodes: Vec::new(),
            ifaces: Vec::new(),
            vdevs: Vec::new(),
            apps: Vec::new(),
            app_socket: Vec::new(),
            found: [NOTHING_FOUND; 2],
            app_node: Vec::new(),
            app_timer: Vec::new(),
            app_pace_late: Vec::new(),
            app_classid: Vec::new(),
            app_backlog: Vec::new(),
            sched: SchedDelay::new(seed, Lateness::default(), Lateness::default()),
            demux: HashMap::default(),
            listeners: BTreeMap::new(),
            ping_ids: BTreeMap::new(),
            q: EventQueue::default(),
            wires: Wires::default(),
            tick: None,
            seed,
            hashrnd: {
                let mut r = Rng::stream(seed, "hashrnd");
                [r.next_u64(), r.next_u64()]
            },
            ip_id: 0,
            paced_by_fq: false,
            teqls: BTreeMap::new(),
            run_cx: Cx::new(0),
            spare_cx: None,
            outboxes: Vec::new(),
            trace: None,
            nf_idle: Vec::new(),
        }
    }

    /// Packets put on a wire so far.
    pub fn frames_sent(&self) -> u64 {
        self.wires.frames_sent
    }

    pub fn now(&self) -> Nanos {
        self.q.now()
    }

    pub fn events(&self) -> u64 {
        self.q.popped
    }

    pub fn add_node(&mut self, name: &str, kind: NodeKind) -> NodeId {
        self.nodes.push(Node {
            name: name.to_string(),
            kind,
            engine: Engine::new(),
            ifaces: Vec::new(),
            routes: Vec::new(),
            realms: Vec::new(),
            reads_route: false,
            uses_ct: false,
            csum_errors: CsumErrors::default(),
        });
        self.nodes.len() - 1
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub fn iface_by_name(&self, node: NodeId, name: &str) -> Option<IfaceId> {
        self.nodes[node]
            .ifaces
            .iter()
            .copied()
            .find(|&i| self.ifaces[i].name == name)
    }

    /// Join `a` and `b` with a link; `ab` is the direction a sends on. Interface names default to eth0, eth1...
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        &mut self,
        a: NodeId,
        a_name: Option<&str>,
        b: NodeId,
        b_name: Option<&str>,
        ab: LinkParams,
        ba: LinkParams,
        mtu: u32,
        txqueuelen: u32,
    ) -> Result<(IfaceId, IfaceId), String> {
        let link_no = self.ifaces.len() / 2;
        if link_no >= 255 {
            return Err("too many links (at most 254)".into());
        }
        let ia = self.ifaces.len();
        let ib = ia + 1;
        for (node, name, id, peer, params, host_byte) in
            [(a, a_name, ia, ib, ab, 1u32), (b, b_name, ib, ia, ba, 2u32)]
        {
            let name = match name {
                Some(n) => n.to_string(),
                None => format!("eth{}", self.nodes[node].ifaces.len()),
            };
            if self.iface_by_name(node, &name).is_some() {
                return Err(format!(
                    "node {} already has an interface named {name}",
                    self.nodes[node].name
                ));
            }
            if params.rate_bps == 0 {
                return Err(format!(
                    "link rate of {}:{name} must be above zero",
                    self.nodes[node].name
                ));
            }
            // `iface_of_addr` finds the interface from these bytes.
            let addr = 0x0a00_0000 | ((link_no as u32 + 1) << 8) | host_byte;
            let nic = tclab_core::engine::Device::with_default(
                &name,
                mtu,
                txqueuelen,
                DefaultRoot::PfifoFast,
            );
            if self.nodes[node].engine.create_device(nic).is_err() {
                return Err(format!(
                    "{}:{name} is the end of two links",
                    self.nodes[node].name
                ));
            }
            self.nodes[node].ifaces.push(id);
            let rng = Rng::stream(
                self.seed,
                &format!("link:{}:{}", self.nodes[node].name, name),
            );
            let netem = match &params.netem {
                Some(o) => {
                    let mut q = Netem::new(tclab_core::Handle::UNSPEC, o, 0)
                        .map_err(|e| format!("netem: {e}"))?;
                    let mut r = Rng::stream(
                        self.seed,
                        &format!("netem:{}:{}", self.nodes[node].name, name),
                    );
                    q.set_seed(r.next_u64());
                    Some(Box::new(q))
                }
                None => None,
            };
            self.ifaces.push(Iface {
                node,
                name,
                addr,
                peer,
                link: params,
                counters: IfCounters::default(),
                busy: false,
                wake_pending: None,
                tx_carry: 0,
                tx_owner: None,
                tx_pending: Default::default(),
                gso_owner: None,
                dev_id: None,
                last_arrival: 0,
                rng,
                netem,
                tx_frame: None,
                netem_wake: None,
            });
        }
        Ok((ia, ib))
    }

    /// Fix where each interface's device sits in its node's device map (call again after a policy adds
    /// devices, such as an ifb).
    pub fn index_devices(&mut self) {
        for ifc in self.ifaces.iter_mut() {
            ifc.dev_id = self.nodes[ifc.node].engine.device_id(&ifc.name);
        }
        // A teql master a policy made (see [`TeqlPort`]).
        for (n, node) in self.nodes.iter().enumerate() {
            if node.engine.teql().is_some() {
                self.teqls.entry(n).or_default();
            }
        }
    }

    /// Compute every node's routes (breadth-first, fewest hops, lowest interface first), once the links are
    /// all made; also fixes where each interface's device sits in its node's device map.
    pub fn compute_routes(&mut self) {
        self.index_devices();
        let n = self.nodes.len();
        for src in 0..n {
            let mut first_hop: Vec<Option<IfaceId>> = vec![None; n];
            let mut seen = vec![false; n];
            seen[src] = true;
            let mut frontier = std::collections::VecDeque::new();
            for &i in &self.nodes[src].ifaces {
                let peer_node = self.ifaces[self.ifaces[i].peer].node;
                if !seen[peer_node] {
                    seen[peer_node] = true;
                    first_hop[peer_node] = Some(i);
                    frontier.push_back(peer_node);
                }
            }
            while let Some(u) = frontier.pop_front() {
                for &i in &self.nodes[u].ifaces {
                    let v = self.ifaces[self.ifaces[i].peer].node;
                    if !seen[v] {
                        seen[v] = true;
                        first_hop[v] = first_hop[u];
                        frontier.push_back(v);
                    }
                }
            }
            self.nodes[src].routes = first_hop;
        }
    }

    /// The address applications on `node` use as their source: the first interface's.
    pub fn node_addr(&self, node: NodeId) -> Option<u32> {
        self.nodes[node]
            .ifaces
            .first()
            .map(|&i| self.ifaces[i].addr)
    }

    /// The node an address belongs to: asked for every packet sent and forwarded, so worked out from
    /// the address (a B-tree search was 0.6 % of bench-isp's instructions).
    #[inline]
    pub fn owner_of(&self, addr: u32) -> Option<NodeId> {
        self.iface_of_addr(addr).map(|i| self.ifaces[i].node)
    }

    /// The interface whose address is `addr`: link L's two ends, made together by `connect`, are
    /// interfaces 2(L − 1) and 2(L − 1) + 1, with addresses `10.0.L.1` and `10.0.L.2`. The index
    /// is worked out from the address's last two bytes whatever they are, and the interface's own
    /// address then tells whether it is the one.
    #[inline]
    fn iface_of_addr(&self, addr: u32) -> Option<IfaceId> {
        let (link, host) = ((addr >> 8) & 0xff, addr & 0xff);
        let i = (2 * link + host).wrapping_sub(3) as usize;
        self.ifaces.get(i).filter(|ifc| ifc.addr == addr).map(|_| i)
    }

    /// Register an application on `node`, with its first timer at `start`.
    pub fn add_app(&mut self, node: NodeId, app: App, start: Option<Nanos>) -> AppId {
        let id = self.apps.len();
        self.app_socket.push(match &app {
            App::Tcp(t) => &**t as *const crate::tcpapp::TcpEndpoint as usize,
            _ => 0,
        });
        self.apps.push(app);
        self.app_node.push(node);
        self.app_timer.push(None);
        self.app_pace_late.push(0);
        self.app_classid.push(0);
        self.app_backlog.push(Default::default());
        if let Some(t) = start {
            self.arm_timer(id, t);
        }
        id
    }

    /// Put `app` in a `net_cls` cgroup of classid `classid`: the packets it sends carry it, as
    /// `task_get_classid` reads it (the sending task's, or its socket's in softirq context).
    pub fn set_app_classid(&mut self, app: AppId, classid: u32) {
        self.app_classid[app] = classid;
    }

    /// Deliver TCP/UDP packets for (protocol, local port, remote address, remote port) on `node` to `app`.
    pub fn bind(
        &mut self,
        node: NodeId,
        proto: u8,
        lport: u16,
        raddr: u32,
        rport: u16,
        app: AppId,
    ) {
        let key = demux_word((node, proto, lport, raddr, rport));
        self.demux.insert(key, app);
        self.found = [NOTHING_FOUND; 2];
    }

    /// Let the receiving end `app` (a TCP end or a UDP sink) take its peer on `node`'s port `lport`
    /// from any address, as a listening socket does (iperf3's server, for UDP too): the first packet
    /// for that port that no bound end owns — a TCP SYN, any UDP datagram — makes `app` the end of the
    /// 4-tuple it carries ([`Network::accept`]). `peer` is the sender its traffic entry names.
    pub fn listen(&mut self, node: NodeId, proto: u8, lport: u16, peer: Peer, app: AppId) {
        self.listeners
            .entry((node, proto, lport))
            .or_default()
            .push((app, peer));
    }

    /// A first packet from `raddr:rport` to `laddr:lport` that no bound end owns: a listening end
    /// takes it and is bound to its 4-tuple (`tcp_v4_rcv`'s listener lookup, then
    /// `tcp_v4_syn_recv_sock`). Among several ends listening on the port (several traffic entries
    /// towards one port of the host), the one whose entry's sender this is takes it, so that each
    /// entry's bytes are reported as its own; a packet from an address no entry names (rewritten by a
    /// NAT) goes to the first still listening.
    fn accept(
        &mut self,
        node: NodeId,
        proto: u8,
        (laddr, lport): Peer,
        (raddr, rport): Peer,
    ) -> Option<AppId> {
        let waiting = self.listeners.get_mut(&(node, proto, lport))?;
        let i = waiting
            .iter()
            .position(|&(_, peer)| peer == (raddr, rport))
            .unwrap_or(0);
        let (app, _) = waiting.remove(i);
        if waiting.is_empty() {
            self.listeners.remove(&(node, proto, lport));
        }
        if let App::Tcp(t) = &mut self.apps[app] {
            t.accept((laddr, lport), (raddr, rport));
        }
        self.bind(node, proto, lport, raddr, rport, app);
        Some(app)
    }

    pub fn bind_ping(&mut self, node: NodeId, ident: u16, app: AppId) {
        self.ping_ids.insert((node, ident), app);
    }

    fn arm_timer(&mut self, app: AppId, at: Nanos) {
        let now = self.q.now();
        if self.app_timer[app].is_some_and(|t| t <= at && t >= now) {
            return;
        }
        // A pacing timer running late (`tcp_pacing_check` starts none while one is queued): what
        // is due before it waits for it.
        if at < self.app_pace_late[app] && self.app_pace_late[app] > now {
            return;
        }
        self.app_timer[app] = Some(at);
        let ev = Event::AppTimer {
            app: app as u32,
            late: false,
        };
        self.q.schedule(at, ev);
    }

    /// Run until `until` (inclusive), calling `observer` at each multiple of `every` on the way.
    pub fn run(&mut self, until: Nanos, every: Option<Nanos>, observer: &mut dyn Observer) {
        self.run_with_progress(until, every, observer, &mut |_| {});
    }

    pub fn run_with_progress(
        &mut self,
        until: Nanos,
        every: Option<Nanos>,
        observer: &mut dyn Observer,
        progress: &mut dyn FnMut(Nanos),
    ) {
        self.nf_idle = (self.nodes.iter())
            .map(|n| n.engine.netfilter().is_idle())
            .collect();
        let mut next_obs = every.map(|e| self.now() - self.now() % e + e);
        let mut last_obs = None;
        // Few applications keep their sockets in cache: the look-ahead would only cost instructions.
        let look_ahead = self.apps.len() >= LOOK_AHEAD_APPS;
        loop {
            let horizon = next_obs.map_or(until, |o| o.min(until));
            while let Some((now, ev)) = self.q.pop_until(horizon) {
                if look_ahead {
                    self.prefetch_next();
                }
                self.handle(now, ev);
            }
            match next_obs {
                Some(o) if o <= until => {
                    observer.observe(o, self);
                    progress(o);
                    last_obs = Some(o);
                    next_obs = Some(o + every.unwrap_or(until));
                }
                _ => break,
            }
        }
        // A last, shorter interval up to the end, so that the series covers the whole run.
        if every.is_some() && last_obs.is_some_and(|o| o < until) {
            observer.observe(until, self);
            progress(until);
        }
        self.nf_idle.clear();
    }

    /// Ask the cache for what the next events will read first, while this one runs. The frame of an
    /// arrival two events ahead: its box and its headers, cold since it was sent a link's delay ago (the
    /// first reads of `arrive` and `after_ingress`). For the arrival next, whose frame was asked for
    /// one event earlier, the socket it is for. An event ahead is a few hundred nanoseconds, the time
    /// the lines take to come from the last level; asked for at their use they were waited for.
    #[inline]
    fn prefetch_next(&mut self) {
        let (next, second) = self.q.peek_two();
        if let Some(Event::Arrive { iface, slot }) = next {
            if let Some(Some(pkt)) = self.wires.on_wire.get(slot as usize) {
                prefetch_frame(pkt);
                if let Some(found) = self.prefetch_socket(iface as IfaceId, pkt) {
                    self.found = [found, self.found[0]];
                }
            }
        }
        if let Some(Event::Arrive { slot, .. }) = second {
            if let Some(Some(pkt)) = self.wires.on_wire.get(slot as usize) {
                prefetch_frame(pkt);
            }
        }
    }

    /// The lines of the TCP socket `pkt` is for, if it arrives at a host that has one for it: the
    /// endpoint's per-event fields and the connection's every-segment group
    /// (`TcpEndpoint::HOT_BYTES`). Its headers were asked for an event earlier. The sender's and
    /// receiver's groups as well (7 and 3 more lines by the segment's kind) measured no faster.
    #[inline]
    fn prefetch_socket(&self, iface: IfaceId, pkt: &Packet) -> Option<(u128, AppId)> {
        let node = self.ifaces[iface].node;
        if self.nodes[node].kind != NodeKind::Host {
            return None;
        }
        let ip = tclab_core::wire::Ipv4::parse(&pkt.data)?;
        if ip.protocol() != crate::wire::PROTO_TCP {
            return None;
        }
        let (sport, dport) = ip.ports()?;
        let key = (node, ip.protocol(), dport, ip.src(), sport);
        let app = self.search(key)?;
        let socket = self.app_socket.get(app).copied().unwrap_or(0);
        if socket != 0 {
            // Its entry in `apps` (the variant and the box's address), then the endpoint's lines.
            prefetch(self.apps.as_ptr().wrapping_add(app));
            let hot = crate::tcpapp::TcpEndpoint::HOT_BYTES;
            for at in (0..hot).step_by(64).chain([hot - 1]) {
                prefetch((socket + at) as *const u8);
            }
        }
        Some((demux_word(key), app))
    }

    fn handle(&mut self, now: Nanos, ev: Event) {
        match ev {
            Event::Arrive { iface, slot } => {
                let pkt = self.wires.on_wire[slot as usize]
                    .take()
                    .expect("a packet waits in its slot");
                self.wires.free_slots.push(slot);
                self.arrive(now, iface as IfaceId, pkt)
            }
            Event::TxDone { iface } => {
                let iface = iface as IfaceId;
                self.ifaces[iface].busy = false;
                // The finished frame enters the link's netem first: the completion below may let its
                // socket put the next frame on the wire at once, in the same slot.
                if let Some(frame) = self.ifaces[iface].tx_frame.take() {
                    self.enter_link_netem(now, iface, *frame);
                }
                // TX completion frees the skb: its socket may send again (TCP small queues).
                if let Some((app, len)) = self.ifaces[iface].tx_owner.take() {
                    self.free_skb(now, app, len);
                }
                self.kick(now, iface);
            }
            Event::LinkWake { iface } => {
                let iface = iface as IfaceId;
                if self.ifaces[iface].netem_wake == Some(now) {
                    self.ifaces[iface].netem_wake = None;
                }
                self.release_link_netem(now, iface);
            }
            Event::Wake { iface, late } => {
                let iface = iface as IfaceId;
                if self.ifaces[iface].wake_pending != Some(now) {
                    // Superseded by an earlier wake-up; a dequeue that is due anyway costs nothing.
                    self.kick(now, iface);
                    return self.after_event(now);
                }
                // NET_TX runs late: the dequeue waits, the pending wake-up with it; an enqueue
                // meanwhile still dequeues at once (`__qdisc_run` in the sender's context).
                let d = if late { 0 } else { self.sched.tx_late() };
                if d > 0 {
                    self.ifaces[iface].wake_pending = Some(now + d);
                    let ev = Event::Wake {
                        iface: iface as u32,
                        late: true,
                    };
                    self.q.schedule(now + d, ev);
                    return;
                }
                self.ifaces[iface].wake_pending = None;
                self.kick(now, iface);
            }
            Event::TeqlWake { node } => {
                let node = node as NodeId;
                if let Some(t) = self.teqls.get_mut(&node) {
                    if t.wake_pending == Some(now) {
                        t.wake_pending = None;
                    }
                }
                self.kick_teql(now, node);
            }
            Event::VWake { vdev } => {
                let v = vdev as usize;
                if self.vdevs[v].wake_pending == Some(now) {
                    self.vdevs[v].wake_pending = None;
                }
                self.kick_vdev(now, v);
            }
            Event::AppTimer { app, late } => {
                let app = app as AppId;
                if self.app_timer[app] != Some(now) {
                    return; // superseded by an earlier timer
                }
                // The pacing hrtimer's softirq runs late: the held segment waits (an ACK meanwhile
                // finds its departure time passed and sends it).
                if !late && self.sched.tx.on() {
                    if let App::Tcp(t) = &self.apps[app] {
                        let d = if t.pacing_wakeup(now) {
                            self.sched.pace_late()
                        } else {
                            0
                        };
                        if d > 0 {
                            self.app_timer[app] = Some(now + d);
                            self.app_pace_late[app] = now + d;
                            let ev = Event::AppTimer {
                                app: app as u32,
                                late: true,
                            };
                            self.q.schedule(now + d, ev);
                            return;
                        }
                    }
                }
                self.app_timer[app] = None;
                let mut out = self.outboxes.pop().unwrap_or_default();
                self.apps[app].on_timer(now, &mut out);
                self.flush(now, app, out);
            }
            Event::AppRx { app } => {
                let app = app as AppId;
                while let Some((d, gso_size)) = self.app_backlog[app].pop_front() {
                    let mut out = self.outboxes.pop().unwrap_or_default();
                    self.apps[app].on_receive(now, &d, gso_size, &mut out);
                    self.flush(now, app, out);
                }
            }
        }
        self.after_event(now);
    }

    /// What every event ends with: skbs freed during it are returned to their sockets. The test is
    /// inlined into every event's end; the rare return out of line.
    #[inline]
    fn after_event(&mut self, now: Nanos) {
        if !self.wires.freed.is_empty() {
            self.return_freed(now);
        }
    }

    #[cold]
    fn return_freed(&mut self, now: Nanos) {
        while !self.wires.freed.is_empty() {
            for (app, len) in std::mem::take(&mut self.wires.freed) {
                self.free_skb(now, app, len);
            }
        }
    }

    /// A frame `app` sent is freed (`tcp_wfree`): its truesize is released, and a socket TCP small queues
    /// throttled may send again.
    fn free_skb(&mut self, now: Nanos, app: AppId, len: u32) {
        // The socket writes into a kept outbox where it lies: most frees send nothing (the socket
        // was not throttled), and an outbox taken out and put back cost a pop and a push.
        if self.outboxes.is_empty() {
            self.outboxes.push(Box::default());
        }
        let Network { apps, outboxes, .. } = self;
        let Some(out) = outboxes.last_mut() else {
            return;
        };
        if !apps[app].on_freed(now, len, out) {
            return out.clear();
        }
        if let Some(out) = self.outboxes.pop() {
            self.flush(now, app, out);
        }
    }

    /// Send what an application produced, and arm its next timer. Each datagram's verdict reaches its
    /// sender before the sender builds the next (`resume`), as `tcp_write_xmit` learns each skb's.
    fn flush(&mut self, now: Nanos, app: AppId, mut out: Box<Outbox>) {
        let node = self.app_node[app];
        let mut wakes = Vec::new();
        loop {
            if !out.wakes.is_empty() {
                wakes.append(&mut out.wakes);
            }
            for (i, d) in out.datagrams.iter().enumerate() {
                let tstamp = out.tstamps.get(i).copied().unwrap_or(0);
                let gso = out.gso_sizes.get(i).copied().unwrap_or(0);
                // The packet remembers its sender, so the NIC can report its transmission (TCP small
                // queues).
                match self.send_from(now, node, d, app as u64 + 1, tstamp, gso) {
                    Verdict::Drop => self.apps[app].on_local_drop(now, d, gso),
                    Verdict::Cn => self.apps[app].on_congestion_notified(now),
                    _ => {}
                }
                if std::mem::take(&mut self.paced_by_fq) {
                    self.apps[app].on_paced_by_fq();
                }
            }
            if !out.more {
                break;
            }
            out.clear();
            self.apps[app].resume(now, &mut out);
        }
        if let Some(t) = self.apps[app].next_timer() {
            self.arm_timer(app, t);
        }
        out.clear();
        self.outboxes.push(out);
        if wakes.is_empty() {
            return;
        }
        for (other, w) in wakes {
            let mut out = self.outboxes.pop().unwrap_or_default();
            self.apps[other].wake(now, w, &mut out);
            self.flush(now, other, out);
        }
    }

    /// Put a locally generated datagram on the wire towards its destination. The answer is what the
    /// sending socket learns (`dev_queue_xmit`'s return): `Success`, `Drop` (this datagram was refused
    /// here: no route, a netfilter rule, the qdisc), or `Cn` (queued, or dropped with others of its flow:
    /// the sender takes it as sent and slows down).
    /// `owner` is 1 + the sending application's id (0 for the stack's own packets, like echo replies);
    /// `tstamp` the datagram's departure time (0: due now); `gso_size` the MSS of a TCP GSO segment (0:
    /// one frame), which the interface cuts into frames after its qdisc.
    pub fn send_from(
        &mut self,
        now: Nanos,
        node: NodeId,
        d: &Datagram,
        owner: u64,
        tstamp: Nanos,
        gso_size: u16,
    ) -> Verdict {
        let Some(dst_node) = self.owner_of(d.ip.dst) else {
            return Verdict::Drop;
        };
        if dst_node == node {
            // Loopback: no device cuts a GSO segment, and there is no GRO to model; the receiver takes
            // it whole.
            let pkt = self.packet_of(d, d.ip.id);
            self.deliver(now, node, pkt);
            if owner != 0 {
                // Loopback frees the skb at once: no qdisc, no NIC.
                self.wires.freed.push((owner as AppId - 1, pkt_len_of(d)));
            }
            return Verdict::Success;
        }
        let Some(out) = self.nodes[node].routes.get(dst_node).copied().flatten() else {
            return Verdict::Drop;
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut pkt = self.packet_of(d, self.ip_id);
        // qdisc_pkt_len_init: a GSO segment is charged the headers of all its frames.
        pkt.set_gso(gso_size);
        if pkt.is_gso() {
            // tcp_gso_segment numbers the frames' IP ids from this one on.
            self.ip_id = self.ip_id.wrapping_add(pkt.gso_segs - 1);
        }
        pkt.tag = owner;
        // `skb->sk` for sch_fq: a TCP or (connected) UDP socket's packets are its flow; ping's socket
        // is unconnected (`TCP_CLOSE`), which fq hashes as it hashes packets without a socket.
        if matches!(d.l4, L4::Tcp(_) | L4::Udp(_)) {
            pkt.sk = owner as u32;
        }
        pkt.tstamp = tstamp;
        if owner != 0 {
            pkt.set_cgroup_classid(self.app_classid[owner as AppId - 1]);
        }
        if self.nodes[node].reads_route {
            // An output route (`__mkroute_output`): its own realms, no input interface.
            pkt.set_route(Some(tclab_core::packet::Route {
                tclassid: self.nodes[node].realm_of(d.ip.dst),
                iif: 0,
            }));
        }
        if !self.netfilter(node, &mut pkt, None, Some(out), |nf, p, _, o| {
            host::local_out(nf, p, o.unwrap_or(""), now)
        }) {
            return Verdict::Drop;
        }
        if self.via_teql(node, out) {
            let cx = self.take_cx(now);
            let pkt = self.run_cx.skbs.unbox(pkt);
            return self.transmit_teql(now, node, pkt, cx);
        }
        let cx = self.take_cx(now);
        self.transmit(now, out, pkt, cx)
    }

    /// A context as `Cx::new(now)` makes it: the kept one if it is free, else a new one.
    #[inline]
    fn take_cx(&mut self, now: Nanos) -> Box<Cx> {
        match self.spare_cx.take() {
            Some(mut cx) => {
                cx.reset(now);
                cx
            }
            None => Box::new(Cx::new(now)),
        }
    }

    /// Lend `node`'s connection table to a call that may run a `ct` action (`Cx::conntrack`), as the
    /// kernel's actions and netfilter hooks share their netns's; taken back when the call returns
    /// ([`Network::take_back_conntrack`]), before any mirred delivery it asked for.
    fn lend_conntrack(&mut self, node: NodeId, cx: &mut Cx) {
        if self.nodes[node].uses_ct {
            let nf = self.nodes[node].engine.netfilter_mut();
            cx.conntrack = Some(std::mem::take(&mut nf.conntrack));
        }
    }

    #[inline]
    fn take_back_conntrack(&mut self, node: NodeId, cx: &mut Cx) {
        if let Some(table) = cx.conntrack.take() {
            self.nodes[node].engine.netfilter_mut().conntrack = table;
        }
    }

    /// Keep `cx` for the next call (cleared then), unless a nested call has already put one back.
    #[inline]
    fn put_cx(&mut self, cx: Box<Cx>) {
        if self.spare_cx.is_none() {
            self.spare_cx = Some(cx);
        }
    }

    /// Run one of the host stack's netfilter steps (`host::local_out`, `pre_routing`, `local_in`,
    /// `forward`) for `node` on `pkt`, with the names of the interfaces it arrived on and leaves by;
    /// false if a rule dropped it, counted on the interface it was leaving by or arriving on.
    #[inline]
    fn netfilter(
        &mut self,
        node: NodeId,
        pkt: &mut Packet,
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
        step: impl FnOnce(&mut Netfilter, &mut Packet, Option<&str>, Option<&str>) -> bool,
    ) -> bool {
        if self.nf_idle.get(node) == Some(&true) {
            return true;
        }
        self.netfilter_hooks(node, pkt, in_iface, out_iface, step)
    }

    fn netfilter_hooks(
        &mut self,
        node: NodeId,
        pkt: &mut Packet,
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
        step: impl FnOnce(&mut Netfilter, &mut Packet, Option<&str>, Option<&str>) -> bool,
    ) -> bool {
        let Network { nodes, ifaces, .. } = self;
        let in_dev = in_iface.map(|i| ifaces[i].name.as_str());
        let out_dev = out_iface.map(|i| ifaces[i].name.as_str());
        if step(nodes[node].engine.netfilter_mut(), pkt, in_dev, out_dev) {
            return true;
        }
        if let Some(i) = out_iface.or(in_iface) {
            ifaces[i].counters.nf_dropped += 1;
        }
        false
    }

    /// A packet made here is boxed once, in a box the qdiscs' dequeues gave back (`run_cx.skbs`), and
    /// goes through the egress tree as that pointer ([`tclab_core::Device::enqueue_skb`]).
    fn packet_of(&mut self, d: &Datagram, id: u16) -> Box<Packet> {
        let mut data = spare_header(&mut self.wires.spare_data);
        d.emit_into(id, &mut data);
        let mut pkt = self.run_cx.skbs.boxed(Packet {
            data,
            len: pkt_len_of(d),
            protocol: 0x0800,
            priority: tos_to_priority(d.ip.tos),
            ..Packet::default()
        });
        // `skb->hash`, set once as a NIC's receive hash or a socket sets it, with the run's key: every
        // fq_codel, fq_pie and mq on the packet's path reads it instead of hashing the keys again.
        // From the datagram's fields where they are the bytes' keys, without dissecting the bytes.
        pkt.hash = match datagram_ports(d) {
            Some(ports) => {
                let (ip, key) = (&d.ip, self.hashrnd);
                tclab_core::flow::ipv4_flow_hash(key, ip.protocol, ip.src, ip.dst, ports)
            }
            None => tclab_core::flow::skb_get_hash(&mut pkt, self.hashrnd),
        };
        // The L4 checksum fields are left zero: implied until an action edits the bytes.
        pkt.redirect = Packet::CSUM_IMPLIED;
        pkt
    }

    /// Enqueue on an interface's egress qdisc and start the transmitter if idle. Returns what the sender
    /// sees (the verdict without the qdisc-internal flags).
    /// `cx` carries what a mirred delivery inherits (its nest, `tc_skip_classify`); else it is as
    /// `Cx::new(now)` makes it ([`Network::take_cx`]).
    fn transmit(
        &mut self,
        now: Nanos,
        iface: IfaceId,
        pkt: Box<Packet>,
        mut cx: Box<Cx>,
    ) -> Verdict {
        let owner = (pkt.tag, pkt.len);
        let traced = self.trace.is_some().then(|| Packet::clone(&pkt));
        let node = self.ifaces[iface].node;
        self.lend_conntrack(node, &mut cx);
        // The device looked up once, for the MTU check and the enqueue. No ICMP "fragmentation
        // needed" is modelled: a packet too long is dropped.
        let raw = self
            .dev_mut(iface)
            .map(|dev| host::fits_mtu(dev, &pkt).then(|| dev.enqueue_skb(pkt, &mut cx)));
        self.take_back_conntrack(node, &mut cx);
        let raw = match raw {
            Some(Some(raw)) => raw,
            Some(None) => {
                self.ifaces[iface].counters.tx_dropped += 1;
                return Verdict::Drop;
            }
            None => return Verdict::Drop,
        };
        let verdict = raw.to_sender();
        self.paced_by_fq |= cx.pacing_fq;
        if let Some(p) = traced {
            self.trace_enqueue(now, &self.iface_label(iface), raw, p, &cx);
        }
        if !cx.drops.is_empty() {
            self.qdisc_dropped(iface, verdict, cx.drops.drain());
        }
        if cx.gso_split > 0 && verdict != Verdict::Drop && owner.0 != 0 {
            // A qdisc cut the socket's GSO packet into frames, each an skb that frees its own truesize
            // (`tcp_gso_segment`'s delta). A refused packet's frames are not freed one by one: the
            // sender takes back the whole packet's charge.
            self.apps[owner.0 as AppId - 1].on_gso_split(cx.gso_split);
        }
        if raw == Verdict::Stolen && owner.0 != 0 {
            // An action took the packet (a mirred redirect sends a copy): the socket's skb is freed.
            self.wires.freed.push((owner.0 as AppId - 1, owner.1));
        }
        let sent = (!cx.mirred.is_empty()).then(|| cx.mirred.take());
        self.put_cx(cx);
        if let Some(sent) = sent {
            let node = self.ifaces[iface].node;
            self.mirred(now, node, sent);
        }
        self.kick(now, iface);
        verdict
    }

    /// Deliver what mirred actions sent, in order (`tcf_mirred_forward`): out of a device, into one, or
    /// into an ifb. A target that refuses the packet costs the action an overlimit, as a failed
    /// `dev_queue_xmit`/`netif_receive_skb` does.
    #[cold]
    fn mirred(&mut self, now: Nanos, node: NodeId, sent: Vec<Mirrored>) {
        for m in sent {
            let action = m.action;
            if self.mirred_one(now, node, m) {
                if let Some(a) = self.nodes[node].engine.actions().get("mirred", action) {
                    a.borrow_mut().stats.overlimits += 1;
                }
            }
        }
    }

    /// One mirred delivery; true if the target refused it.
    fn mirred_one(&mut self, now: Nanos, node: NodeId, m: Mirrored) -> bool {
        let mut pkt = m.pkt;
        // A copy belongs to no socket (`skb_clone` drops the destructor).
        pkt.tag = 0;
        pkt.sk = 0;
        pkt.iif = self
            .iface_by_name(node, &m.from_dev)
            .map_or(0, |i| i as u32 + 1);
        pkt.redirect = (pkt.redirect & Packet::CSUM_IMPLIED)
            | if m.redirected {
                Packet::REDIRECTED
                    | if m.from_ingress {
                        Packet::FROM_INGRESS
                    } else {
                        0
                    }
            } else {
                0
            };
        let mut cx = self.take_cx(now);
        cx.mirred.set_nest(m.nest, m.depth);
        if let Some(iface) = self.iface_by_name(node, &m.dev) {
            let pkt = self.run_cx.skbs.boxed(pkt);
            if m.to_ingress {
                // `netif_receive_skb` on the target: its ingress hook, then the stack.
                self.receive(now, iface, pkt, cx);
                return false;
            }
            return self.transmit(now, iface, pkt, cx) != Verdict::Success;
        }
        if m.dev == tclab_core::qdisc::teql::MASTER && self.teqls.contains_key(&node) {
            // Out of teql0: its root qdisc, then its slaves, as `dev_queue_xmit` on teql0 sends
            // what a mirred action redirects or mirrors to it. Its receive path is not modelled (the
            // master only sends): a packet sent into it goes nowhere.
            if m.to_ingress {
                self.put_cx(cx);
                return true;
            }
            return self.transmit_teql(now, node, pkt, cx) != Verdict::Success;
        }
        let Some(v) = self.vdev(node, &m.dev) else {
            // No such device on this node (a name only the kernel has, such as lo): nowhere to go.
            return true;
        };
        // An ifb's filters may run a ct action, as an interface's do: the ifb is the host's, and so
        // is the table act_ct looks in (the netns of `skb->dev`).
        if m.to_ingress {
            // Into an ifb's receive path: its ingress hook runs; an ifb has no address, so the packet
            // goes no further here.
            self.lend_conntrack(node, &mut cx);
            let Some(dev) = self.nodes[node].engine.device_mut(&m.dev) else {
                self.take_back_conntrack(node, &mut cx);
                return true;
            };
            let _ = dev.receive(pkt, &mut cx);
            self.take_back_conntrack(node, &mut cx);
            if !cx.mirred.is_empty() {
                self.mirred(now, node, cx.mirred.take());
            }
            return false;
        }
        let traced = self.trace.is_some().then(|| pkt.clone());
        self.lend_conntrack(node, &mut cx);
        let raw = self.nodes[node]
            .engine
            .device_mut(&m.dev)
            .map(|dev| dev.enqueue(pkt, &mut cx));
        self.take_back_conntrack(node, &mut cx);
        let Some(raw) = raw else {
            return true;
        };
        let verdict = raw.to_sender();
        if let Some(p) = traced {
            let label = format!("{}:{}", self.nodes[node].name, m.dev);
            self.trace_enqueue(now, &label, raw, p, &cx);
        }
        let dropped = cx.drops.len() as u64;
        self.vdevs[v].counters.tx_dropped += dropped;
        if !cx.mirred.is_empty() {
            self.mirred(now, node, cx.mirred.take());
        }
        self.kick_vdev(now, v);
        verdict != Verdict::Success
    }

    /// Register every ifb device of every node (in node order, then name order), so that the recorder
    /// samples them from the start; those a policy creates later are registered on first use.
    pub fn register_ifbs(&mut self) {
        for node in 0..self.nodes.len() {
            let names: Vec<String> = self.nodes[node]
                .engine
                .devices()
                .filter(|(_, d)| d.kind == DevKind::Ifb)
                .map(|(n, _)| n.to_string())
                .collect();
            for n in names {
                self.vdev(node, &n);
            }
        }
    }

    /// `node:dev` of a sampled port.
    pub fn port_label(&self, p: Port) -> String {
        match p {
            Port::Iface(i) => self.iface_label(i),
            Port::Ifb(v) => {
                let d = &self.vdevs[v];
                format!("{}:{}", self.nodes[d.node].name, d.name)
            }
            Port::Teql(n) => format!("{}:{}", self.nodes[n].name, tclab_core::qdisc::teql::MASTER),
        }
    }

    /// The tc device behind a sampled port.
    pub fn port_device(&self, p: Port) -> Option<&tclab_core::engine::Device> {
        match p {
            Port::Iface(i) => self.device(i),
            Port::Ifb(v) => {
                let d = &self.vdevs[v];
                self.nodes[d.node].engine.device(&d.name)
            }
            Port::Teql(n) => self.nodes[n].engine.device(tclab_core::qdisc::teql::MASTER),
        }
    }

    /// A sampled port's counters.
    pub fn port_counters(&self, p: Port) -> IfCounters {
        match p {
            Port::Iface(i) => self.ifaces[i].counters,
            Port::Ifb(v) => self.vdevs[v].counters,
            // teql_master_stats64: what the slaves took; dropped there or by teql0's qdisc.
            Port::Teql(n) => {
                let m = self.nodes[n]
                    .engine
                    .teql()
                    .map(|m| m.stats)
                    .unwrap_or_default();
                IfCounters {
                    tx_bytes: m.tx_bytes,
                    tx_packets: m.tx_packets,
                    tx_dropped: m.tx_dropped + self.teqls.get(&n).map_or(0, |t| t.tx_dropped),
                    ..IfCounters::default()
                }
            }
        }
    }

    /// The ifb device `name` of `node`, registered on first use.
    fn vdev(&mut self, node: NodeId, name: &str) -> Option<usize> {
        if let Some(v) = self
            .vdevs
            .iter()
            .position(|v| v.node == node && v.name == name)
        {
            return Some(v);
        }
        let d = self.nodes[node].engine.device(name)?;
        if d.kind != DevKind::Ifb {
            return None;
        }
        self.vdevs.push(Vdev {
            node,
            name: name.to_string(),
            counters: IfCounters::default(),
            wake_pending: None,
            running: false,
        });
        Some(self.vdevs.len() - 1)
    }

    /// `qdisc_run` of an ifb, whose transmit is immediate (`ifb_xmit` + `ifb_ri_tasklet`): every packet
    /// its qdisc releases now goes back where it came from.
    fn kick_vdev(&mut self, now: Nanos, v: usize) {
        if self.vdevs[v].running {
            return;
        }
        self.vdevs[v].running = true;
        let node = self.vdevs[v].node;
        loop {
            let name = &self.vdevs[v].name;
            let Some(dev) = self.nodes[node].engine.device_mut(name) else {
                break;
            };
            let (pkt, cx) = host::qdisc_restart(dev, now);
            self.vdevs[v].counters.tx_dropped += cx.drops.len() as u64;
            if self.trace.is_some() {
                let label = format!("{}:{}", self.nodes[node].name, self.vdevs[v].name);
                self.trace_dequeue(now, &label, pkt.as_ref(), &cx);
            }
            let Some(mut pkt) = pkt else {
                if let Some(w) = cx.wake_at {
                    let w = host::wake_time(w, now, self.tick);
                    let vd = &mut self.vdevs[v];
                    if vd.wake_pending.is_none_or(|p| w < p || p < now) {
                        vd.wake_pending = Some(w);
                        self.q.schedule(w, Event::VWake { vdev: v as u32 });
                    }
                }
                break;
            };
            // `ifb_xmit`: counted as received, then only redirected packets with a device to go back to.
            self.vdevs[v].counters.rx_packets += 1;
            self.vdevs[v].counters.rx_bytes += pkt.len as u64;
            if pkt.redirect & Packet::REDIRECTED == 0 || pkt.iif == 0 {
                self.vdevs[v].counters.rx_dropped += 1;
                continue;
            }
            self.vdevs[v].counters.tx_packets += 1;
            self.vdevs[v].counters.tx_bytes += pkt.len as u64;
            let iface = pkt.iif as usize - 1;
            let from_ingress = pkt.redirect & Packet::FROM_INGRESS != 0;
            pkt.redirect &= Packet::CSUM_IMPLIED;
            pkt.iif = 0;
            let pkt = self.run_cx.skbs.boxed(pkt);
            if from_ingress {
                // `netif_receive_skb` with `tc_skip_classify`: the stack, past the ingress hook.
                self.after_ingress(now, iface, pkt);
            } else {
                let mut cx = self.take_cx(now);
                cx.mirred.set_skip_classify();
                self.transmit(now, iface, pkt, cx);
            }
        }
        self.vdevs[v].running = false;
    }

    /// Packets an egress qdisc dropped (`to_free`): each is counted, and each one's socket hears that its
    /// skb is freed — except the arriving packet under a `Drop` verdict, which its sender learns from the
    /// verdict itself (not sent). A packet dropped after it was accepted is, for its sender, sent and lost.
    #[cold]
    fn qdisc_dropped(
        &mut self,
        iface: IfaceId,
        verdict: Verdict,
        drops: impl Iterator<Item = Dropped>,
    ) {
        for d in drops {
            self.ifaces[iface].counters.tx_dropped += 1;
            let (tag, len) = (d.pkt.tag, d.pkt.len);
            keep_data(&mut self.wires.spare_data, d.pkt.data);
            if d.arriving && verdict == Verdict::Drop {
                continue;
            }
            if tag != 0 {
                self.wires.freed.push((tag as AppId - 1, len));
            }
        }
    }

    /// `qdisc_run` (core's) onto the interface's wire: if the wire is free, the next packet the qdisc
    /// allows starts its serialisation; if the qdisc holds packets back, a wake-up is scheduled.
    fn kick(&mut self, now: Nanos, iface: IfaceId) {
        if self.ifaces[iface].busy {
            return;
        }
        let teql = !self.teqls.is_empty();
        if teql {
            // A teql slave's qdisc shows teql0's queue in its qlen (`teql_dequeue`).
            self.run_cx.teql_master_qlen = self.teql_qlen(self.ifaces[iface].node);
        }
        let label = self.trace.is_some().then(|| self.iface_label(iface));
        let tick = self.tick;
        let Network {
            nodes,
            ifaces,
            q,
            wires,
            trace,
            run_cx,
            ..
        } = self;
        let ifc = &mut ifaces[iface];
        let Some(dev) = device_of(nodes, ifc) else {
            return;
        };
        // Nothing to send and a dequeue that would change nothing (an empty FIFO, such as every
        // host's pfifo_fast at the TX completion of the frame it just sent: a third of bench-isp's
        // kicks): no `Wire`, no dequeue. A teql slave's empty qdisc still moves its master's ring.
        if !teql && ifc.tx_pending.is_empty() && dev.dequeue_idle() {
            return;
        }
        let pending = ifc.tx_pending.pop_front();
        // A veth without TSO (`ethtool -K DEV tso off`, or `sg off`) gets its GSO packets cut in software first
        // (`validate_xmit_skb`: the device lacks NETIF_F_TSO), so its peer receives frames.
        let whole_gso =
            (ifc.link.veth && dev.tso_on()).then_some((dev.gso_max_segs, dev.gso_max_size));
        let mut wire = Wire {
            iface,
            now,
            ifc,
            q,
            wires,
            trace: trace.as_mut().zip(label.as_deref()),
            whole_gso,
        };
        // The rest of a GSO packet goes before the qdisc is asked for more.
        if let Some(frame) = pending {
            wire.send_frame(frame);
            return;
        }
        let w = host::qdisc_run_in(dev, now, tick, &mut wire, run_cx);
        if !self.ifaces[iface].busy && teql {
            self.teql_slave_idle(now, iface);
        }
        let Some(w) = w else {
            return;
        };
        let ifc = &mut self.ifaces[iface];
        if ifc.wake_pending.is_none_or(|p| w < p || p < now) {
            ifc.wake_pending = Some(w);
            self.q.schedule(
                w,
                Event::Wake {
                    iface: iface as u32,
                    late: false,
                },
            );
        }
    }

    /// Does `node` send what it routes out of `out` through its teql master? Only while the master is
    /// up and `out` is one of its slaves (the simulator's stand-in for `ip route … dev teql0`).
    #[inline]
    fn via_teql(&self, node: NodeId, out: IfaceId) -> bool {
        !self.teqls.is_empty() && self.via_teql_master(node, out)
    }

    #[cold]
    fn via_teql_master(&self, node: NodeId, out: IfaceId) -> bool {
        let engine = &self.nodes[node].engine;
        let (Some(m), Some(master)) = (
            engine.teql(),
            engine.device(tclab_core::qdisc::teql::MASTER),
        ) else {
            return false;
        };
        master.up
            && engine
                .ifindex(&self.ifaces[out].name)
                .is_some_and(|i| m.is_slave(i))
    }

    /// `node:teql0`, teql0's name in traces and samples.
    fn teql_label(&self, node: NodeId) -> String {
        self.port_label(Port::Teql(node))
    }

    /// The queue length of `node`'s teql master's root qdisc (0 without a master).
    #[cold]
    fn teql_qlen(&self, node: NodeId) -> u32 {
        self.nodes[node]
            .engine
            .device(tclab_core::qdisc::teql::MASTER)
            .map_or(0, |d| d.root().q.stats().qlen)
    }

    /// `dev_queue_xmit` on `node`'s teql master, in the caller's context `cx` (a mirred action's
    /// carries its nesting): its root qdisc, then [`Network::kick_teql`]. Returns what the sender sees.
    fn transmit_teql(&mut self, now: Nanos, node: NodeId, pkt: Packet, mut cx: Box<Cx>) -> Verdict {
        let owner = (pkt.tag, pkt.len);
        let fits = self.nodes[node]
            .engine
            .teql_parts()
            .map(|(dev, _)| host::fits_mtu(dev, &pkt));
        if fits != Some(true) {
            if fits == Some(false) {
                self.teqls.entry(node).or_default().tx_dropped += 1;
            }
            self.put_cx(cx);
            return Verdict::Drop;
        }
        // teql0's filters may run a ct action, as an interface's do.
        self.lend_conntrack(node, &mut cx);
        let traced = self.trace.is_some().then(|| pkt.clone());
        let raw = self.nodes[node]
            .engine
            .teql_parts()
            .map(|(dev, _)| dev.enqueue(pkt, &mut cx));
        self.take_back_conntrack(node, &mut cx);
        if let (Some(p), Some(v)) = (traced, raw) {
            self.trace_enqueue(now, &self.teql_label(node), v, p, &cx);
        }
        let verdict = raw.map_or(Verdict::Drop, Verdict::to_sender);
        for d in cx.drops.drain() {
            self.teqls.entry(node).or_default().tx_dropped += 1;
            if !(d.arriving && verdict == Verdict::Drop) && d.pkt.tag != 0 {
                self.wires.freed.push((d.pkt.tag as AppId - 1, d.pkt.len));
            }
        }
        if cx.gso_split > 0 && verdict != Verdict::Drop && owner.0 != 0 {
            self.apps[owner.0 as AppId - 1].on_gso_split(cx.gso_split);
        }
        let sent = (!cx.mirred.is_empty()).then(|| cx.mirred.take());
        self.put_cx(cx);
        if let Some(sent) = sent {
            self.mirred(now, node, sent);
        }
        self.kick_teql(now, node);
        verdict
    }

    /// `teql_dequeue` finding a slave's own queue empty: that slave is the ring's head, and the master
    /// runs (`netif_wake_queue`).
    #[cold]
    fn teql_slave_idle(&mut self, now: Nanos, iface: IfaceId) {
        let node = self.ifaces[iface].node;
        let engine = &mut self.nodes[node].engine;
        let Some(ifindex) = engine.ifindex(&self.ifaces[iface].name) else {
            return;
        };
        let Some((_, m)) = engine.teql_parts() else {
            return;
        };
        let Some(port) = self.teqls.get_mut(&node) else {
            return;
        };
        if port.stopped && m.is_slave(ifindex) {
            port.stopped = false;
            m.slave_idle(ifindex);
            self.kick_teql(now, node);
        }
    }

    /// `qdisc_run` of `node`'s teql master while a slave can take a packet: each packet its qdisc
    /// releases goes onto the wire of the slave `teql_master_xmit` picks.
    fn kick_teql(&mut self, now: Nanos, node: NodeId) {
        let tick = self.tick;
        // Each slave's interface on this node, and whether its device is up (`netif_running`).
        let slaves: Vec<(u32, IfaceId, bool)> = {
            let engine = &self.nodes[node].engine;
            let Some(m) = engine.teql() else { return };
            m.slaves()
                .into_iter()
                .filter_map(|ifindex| {
                    let d = engine.device_by_ifindex(ifindex)?;
                    Some((ifindex, self.iface_by_name(node, &d.name)?, d.up))
                })
                .collect()
        };
        let label = self.trace.is_some().then(|| self.teql_label(node));
        let port = self.teqls.entry(node).or_default();
        let Network {
            nodes,
            ifaces,
            q,
            wires,
            run_cx,
            apps,
            trace,
            ..
        } = self;
        let Some((dev, master)) = nodes[node].engine.teql_parts() else {
            return;
        };
        if !dev.up {
            return;
        }
        let mut tx = TeqlXmit {
            master,
            slaves: &slaves,
            now,
            ifaces,
            q,
            wires,
            pending: &mut port.pending,
            split: Vec::new(),
            dropped: 0,
            trace: trace.as_mut().zip(label.as_deref()),
        };
        // The frames left of a GSO packet go before the qdisc is asked for more.
        tx.flush();
        let w = host::qdisc_run_in(dev, now, tick, &mut tx, run_cx);
        let stopped = !tx.ready() && (dev.root().q.stats().qlen > 0 || !tx.pending.is_empty());
        if stopped && !port.stopped {
            // teql_master_xmit found every slave busy with a packet in hand: NETDEV_TX_BUSY,
            // netif_stop_queue(teql0), and the packet back on teql0's root (dev_requeue_skb). A
            // stopped master dequeues nothing more until a slave wakes it.
            dev.root_mut().requeues += 1;
        }
        port.stopped = stopped;
        port.tx_dropped += tx.dropped;
        // Each frame is an skb of its own, freed at its own TX completion (`tcp_gso_segment`).
        for (app, extra) in std::mem::take(&mut tx.split) {
            apps[app].on_gso_split(extra);
        }
        if let Some(w) = w {
            if port.wake_pending.is_none_or(|p| w < p || p < now) {
                port.wake_pending = Some(w);
                self.q.schedule(w, Event::TeqlWake { node: node as u32 });
            }
        }
    }

    /// A frame has left the wire's sending end: through the link's netem (its duplicates enqueued there
    /// again, as at a root); what it loses or drops is lost on the wire.
    #[cold]
    fn enter_link_netem(&mut self, now: Nanos, iface: IfaceId, frame: Packet) {
        let ifc = &mut self.ifaces[iface];
        let Some(q) = ifc.netem.as_mut() else {
            return;
        };
        let mut cx = Cx::new(now);
        q.enqueue(frame, &mut cx);
        while let Some(dups) = cx.to_root.take() {
            for d in *dups {
                q.enqueue(d, &mut cx);
            }
        }
        ifc.counters.wire_lost += cx.drops.len() as u64;
        self.release_link_netem(now, iface);
    }

    /// Frames the link's netem releases now start propagating; the next release is scheduled.
    fn release_link_netem(&mut self, now: Nanos, iface: IfaceId) {
        let ifc = &mut self.ifaces[iface];
        let Some(q) = ifc.netem.as_mut() else {
            return;
        };
        let mut cx = Cx::new(now);
        let mut out = Vec::new();
        while let Some(p) = q.dequeue(&mut cx) {
            out.push(p);
        }
        let (delay, peer) = (ifc.link.delay, ifc.peer);
        if let Some(w) = cx.wake_at {
            if ifc.netem_wake.is_none_or(|p| w < p || p < now) && w > now {
                ifc.netem_wake = Some(w);
                self.q.schedule(
                    w,
                    Event::LinkWake {
                        iface: iface as u32,
                    },
                );
            }
        }
        for pkt in out {
            let pkt = self.run_cx.skbs.boxed(pkt);
            let slot = match self.wires.free_slots.pop() {
                Some(s) => {
                    self.wires.on_wire[s as usize] = Some(pkt);
                    s
                }
                None => {
                    self.wires.on_wire.push(Some(pkt));
                    (self.wires.on_wire.len() - 1) as u32
                }
            };
            self.q.schedule(
                now + delay,
                Event::Arrive {
                    iface: peer as u32,
                    slot,
                },
            );
        }
    }

    fn arrive(&mut self, now: Nanos, iface: IfaceId, mut pkt: Box<Packet>) {
        {
            let c = &mut self.ifaces[iface].counters;
            c.rx_bytes += pkt.len as u64;
            c.rx_packets += 1;
        }
        // A frame off the wire has no connection attached (the sender's `_nfct` stayed behind):
        // ingress filters and actions see it untracked until this host's PREROUTING tracks it.
        pkt.ct_mark = None;
        pkt.ct_state = 0;
        // Nor its route (`skb_dst`) or socket, so no cgroup classid either. These four live in the
        // packet's extension, which most packets never get: then there is nothing to clear (four
        // calls into core a frame were 1 % of bench-htb's instructions).
        if pkt.ext.is_some() {
            pkt.set_ct_zone(0);
            tclab_core::action::ct::set_labels(&mut pkt, [0; 16]);
            pkt.set_route(None);
            pkt.set_cgroup_classid(0);
        }
        // Without an ingress qdisc the hook does nothing (`Device::receive_skb` passes the box on, a
        // context untouched): the stack takes the frame at once, no context taken for it.
        match self.dev_mut(iface).map(|dev| dev.ingress().is_none()) {
            Some(true) => self.after_ingress(now, iface, pkt),
            Some(false) => {
                let cx = self.take_cx(now);
                self.receive(now, iface, pkt, cx);
            }
            None => {}
        }
    }

    /// `__netif_receive_skb` on an interface: the ingress hook, then the stack.
    fn receive(&mut self, now: Nanos, iface: IfaceId, pkt: Box<Packet>, mut cx: Box<Cx>) {
        let node = self.ifaces[iface].node;
        self.lend_conntrack(node, &mut cx);
        let pkt = self.dev_mut(iface).map(|dev| dev.receive_skb(pkt, &mut cx));
        self.take_back_conntrack(node, &mut cx);
        let Some(pkt) = pkt else {
            return;
        };
        if !cx.mirred.is_empty() {
            let node = self.ifaces[iface].node;
            self.mirred(now, node, cx.mirred.take());
        }
        let Some(pkt) = pkt else {
            // Shot by an action (in `cx.drops`), or stolen by one (not a drop).
            self.ifaces[iface].counters.rx_dropped += cx.drops.len() as u64;
            if self.trace.is_some() && !cx.drops.is_empty() {
                let label = self.iface_label(iface);
                if let Some(t) = self.trace.as_mut() {
                    for d in cx.drops.iter() {
                        t.record(now, &label, crate::trace::Event::RxDrop, &d.pkt);
                    }
                }
            }
            self.put_cx(cx);
            return;
        };
        self.put_cx(cx);
        self.after_ingress(now, iface, pkt);
    }

    /// The stack after the ingress hook: PREROUTING, routing, local delivery or forwarding.
    fn after_ingress(&mut self, now: Nanos, iface: IfaceId, pkt: Box<Packet>) {
        let node = self.ifaces[iface].node;
        // PREROUTING sees the packet as it arrived (with any mark the ingress filters set).
        let mut pkt = pkt;
        if !self.netfilter(node, &mut pkt, Some(iface), None, |nf, p, i, _| {
            host::pre_routing(nf, p, i.unwrap_or(""), now)
        }) {
            return;
        }
        // Forwarding needs only the destination and the TOS byte; local delivery parses the rest.
        let Some((dst, tos)) = crate::wire::ipv4_dst_tos(&pkt.data) else {
            return;
        };
        // `ip_rcv_core`'s header checksum (before PREROUTING in Linux; here after it, which nothing
        // between tells apart: netfilter's targets keep the header's checksum valid).
        if pkt.redirect & Packet::CSUM_IMPLIED == 0
            && tclab_core::csum::check_ipv4(&pkt.data) == Err(tclab_core::csum::Bad::Header)
        {
            self.nodes[node].csum_errors.ip_in_hdr_errors += 1;
            return;
        }
        match self.owner_of(dst) {
            Some(n) if n == node => {
                // LOCAL_IN decides here: as a match guard, a packet it dropped would be forwarded.
                let accepted = self.netfilter(node, &mut pkt, Some(iface), None, |nf, p, i, _| {
                    host::local_in(nf, p, i.unwrap_or(""), now)
                });
                if accepted {
                    self.deliver(now, node, pkt);
                }
            }
            Some(n) => {
                let Some(out) = self.nodes[node].routes.get(n).copied().flatten() else {
                    return;
                };
                // FORWARD and POSTROUTING may change the mark or the priority, as iptables rules do.
                let route = self.nodes[node].reads_route.then(|| {
                    let src = tclab_core::wire::Ipv4::parse(&pkt.data).map(|ip| ip.src());
                    self.input_route(node, iface, dst, src)
                });
                let mut fwd = pkt;
                host::make_forwarded(&mut fwd, tos);
                // The forwarded skb has no route until one is attached (make_forwarded clears it).
                if route.is_some() {
                    fwd.set_route(route);
                }
                if self.netfilter(node, &mut fwd, Some(iface), Some(out), |nf, p, i, o| {
                    host::forward(nf, p, i.unwrap_or(""), o.unwrap_or(""), now)
                }) {
                    if self.via_teql(node, out) {
                        let cx = self.take_cx(now);
                        let fwd = self.run_cx.skbs.unbox(fwd);
                        self.transmit_teql(now, node, fwd, cx);
                        return;
                    }
                    let cx = self.take_cx(now);
                    self.transmit(now, out, fwd, cx);
                }
            }
            None => {}
        }
    }

    /// The route of a packet `node` forwards to `dst`, from `src`, that came in on `iface`
    /// (`ip_route_input_slow`): the route's realms, with the source realm — when the route has none —
    /// the destination realm of the route back to `src` (`fib_validate_source`'s itag, then
    /// `set_class_tag`), and the input device's index (`inet_iif`).
    fn input_route(
        &self,
        node: NodeId,
        iface: IfaceId,
        dst: u32,
        src: Option<u32>,
    ) -> tclab_core::packet::Route {
        let n = &self.nodes[node];
        let mut tclassid = n.realm_of(dst);
        let itag = src.map_or(0, |s| n.realm_of(s) << 16);
        if tclassid & 0xffff_0000 == 0 {
            tclassid |= itag;
        }
        tclab_core::packet::Route {
            tclassid,
            iif: n.engine.ifindex(&self.ifaces[iface].name).unwrap_or(0),
        }
    }

    /// Local delivery: echo requests are answered here (the kernel's `icmp_echo`), the rest goes to the
    /// application bound to the packet's ports or ping identifier.
    fn deliver(&mut self, now: Nanos, node: NodeId, mut pkt: Box<Packet>) {
        use crate::wire::{
            Icmp, ICMP_ECHO_REPLY, ICMP_ECHO_REQUEST, L4, PROTO_ICMP, TCP_ACK, TCP_SYN,
        };
        let Ok(d) = Datagram::parse(&pkt.data) else {
            return;
        };
        // The transport checksum, verified for edited packets only (the rest are valid by
        // construction); the header's was checked on the way in. A GSO packet a veth passed whole
        // is `CHECKSUM_PARTIAL`, which the receiver trusts (`skb_csum_unnecessary`): not verified.
        if pkt.redirect & Packet::CSUM_IMPLIED == 0 && !pkt.is_gso() {
            if let Err(tclab_core::csum::Bad::Transport(proto)) =
                tclab_core::csum::check_ipv4(&pkt.data)
            {
                let e = &mut self.nodes[node].csum_errors;
                match proto {
                    6 => e.tcp_in_csum_errors += 1,
                    17 => e.udp_in_csum_errors += 1,
                    _ => e.icmp_in_csum_errors += 1,
                }
                return;
            }
        }
        let gso_size = pkt.gso_size;
        // The skb is consumed here: its buffer and its box serve the next packets made.
        keep_data(&mut self.wires.spare_data, std::mem::take(&mut pkt.data));
        self.run_cx.skbs.recycle(pkt);
        let app = match &d.l4 {
            L4::Icmp(i) if i.kind == ICMP_ECHO_REQUEST => {
                let reply = Datagram {
                    ip: crate::wire::Ipv4 {
                        src: d.ip.dst,
                        dst: d.ip.src,
                        protocol: PROTO_ICMP,
                        tos: d.ip.tos,
                        ttl: 64,
                        ..Default::default()
                    },
                    l4: L4::Icmp(Icmp {
                        kind: ICMP_ECHO_REPLY,
                        ..*i
                    }),
                };
                self.send_from(now, node, &reply, 0, 0, 0);
                return;
            }
            L4::Icmp(i) if i.kind == ICMP_ECHO_REPLY => {
                self.ping_ids.get(&(node, i.ident)).copied()
            }
            L4::Tcp(t) => self
                .lookup(node, d.ip.protocol, t.dport, d.ip.src, t.sport)
                .or_else(|| {
                    let (local, peer) = ((d.ip.dst, t.dport), (d.ip.src, t.sport));
                    (t.flags & (TCP_SYN | TCP_ACK) == TCP_SYN)
                        .then(|| self.accept(node, PROTO_TCP, local, peer))
                        .flatten()
                }),
            L4::Udp(u) => self
                .lookup(node, d.ip.protocol, u.dport, d.ip.src, u.sport)
                .or_else(|| {
                    let (local, peer) = ((d.ip.dst, u.dport), (d.ip.src, u.sport));
                    self.accept(node, d.ip.protocol, local, peer)
                }),
            _ => None,
        };
        if let Some(app) = app {
            if self.sched.rx.on() && matches!(self.apps[app], App::Tcp(_)) {
                // A socket running late keeps what arrives in its backlog, in order; the segment
                // that finds it empty draws whether it is late.
                if !self.app_backlog[app].is_empty() {
                    self.app_backlog[app].push_back((d, gso_size));
                    return;
                }
                let late = self.sched.rx_late();
                if late > 0 {
                    self.app_backlog[app].push_back((d, gso_size));
                    let ev = Event::AppRx { app: app as u32 };
                    self.q.schedule(now + late, ev);
                    return;
                }
            }
            let mut out = self.outboxes.pop().unwrap_or_default();
            // A GSO packet a veth passed whole reaches the socket as one skb with its `gso_size`.
            self.apps[app].on_receive(now, &d, gso_size, &mut out);
            self.flush(now, app, out);
        }
    }

    fn lookup(&self, node: NodeId, proto: u8, lport: u16, raddr: u32, rport: u16) -> Option<AppId> {
        let key = (node, proto, lport, raddr, rport);
        let word = demux_word(key);
        match self.found {
            [(k, app), _] | [_, (k, app)] if k == word => Some(app),
            _ => self.search_word(word, key),
        }
    }

    /// The socket bound to `key`, or else its node's listener on the port.
    fn search(&self, key: DemuxKey) -> Option<AppId> {
        self.search_word(demux_word(key), key)
    }

    /// [`Network::search`] with `key` packed already (`word`).
    #[inline]
    fn search_word(&self, word: u128, key: DemuxKey) -> Option<AppId> {
        let (node, proto, lport, _, _) = key;
        self.demux
            .get(&word)
            .or_else(|| self.demux.get(&demux_word((node, proto, lport, 0, 0))))
            .copied()
    }

    /// The tc device behind an interface, for the packet path ([`device_of`]).
    fn dev_mut(&mut self, iface: IfaceId) -> Option<&mut tclab_core::engine::Device> {
        device_of(&mut self.nodes, &self.ifaces[iface])
    }

    /// The tc device behind an interface, to change.
    pub fn device_mut(&mut self, iface: IfaceId) -> Option<&mut tclab_core::engine::Device> {
        self.dev_mut(iface)
    }

    /// The tc device behind an interface.
    pub fn device(&self, iface: IfaceId) -> Option<&tclab_core::engine::Device> {
        let i = &self.ifaces[iface];
        self.nodes[i.node].engine.device(&i.name)
    }

    /// Trace an enqueue on `dev` and the drops it caused.
    #[cold]
    fn trace_enqueue(&mut self, now: Nanos, dev: &str, v: Verdict, mut pkt: Packet, cx: &Cx) {
        use crate::trace::Event;
        let Some(t) = self.trace.as_mut() else { return };
        // The copy was taken before the tree classified the packet: the class it went to is in `cx`.
        pkt.leaf_class = cx.leaf;
        t.record(now, dev, Event::Enqueue(v.to_sender(), cx.matched), &pkt);
        for d in cx.drops.iter() {
            t.record(now, dev, Event::Drop(d.reason, d.arriving), &d.pkt);
        }
    }

    /// Trace a dequeue on `dev` (the packet, if any) and the drops it made.
    #[cold]
    fn trace_dequeue(&mut self, now: Nanos, dev: &str, pkt: Option<&Packet>, cx: &Cx) {
        if let Some(t) = self.trace.as_mut() {
            record_dequeue(t, now, dev, pkt, cx);
        }
    }

    /// "node:iface" of an interface.
    pub fn iface_label(&self, iface: IfaceId) -> String {
        let i = &self.ifaces[iface];
        format!("{}:{}", self.nodes[i.node].name, i.name)
    }
}

/// A dequeue's trace lines on `dev`: the drops it made, then the packet, if any.
#[cold]
fn record_dequeue(
    t: &mut crate::trace::Trace,
    now: Nanos,
    dev: &str,
    pkt: Option<&Packet>,
    cx: &Cx,
) {
    use crate::trace::Event;
    for d in cx.drops.iter() {
        t.record(now, dev, Event::Drop(d.reason, d.arriving), &d.pkt);
    }
    if let Some(p) = pkt {
        t.record(now, dev, Event::Dequeue, p);
    }
}

/// The tc device behind an interface, by the engine's id for it (fixed once the topology is built),
/// rather than by looking its name up on every packet; by name if it has no id yet.
fn device_of<'a>(nodes: &'a mut [Node], ifc: &Iface) -> Option<&'a mut tclab_core::engine::Device> {
    let engine = &mut nodes[ifc.node].engine;
    match ifc.dev_id {
        Some(id) => engine.device_by_id_mut(id),
        None => engine.device_mut(&ifc.name),
    }
}

/// The side of `Network` a wire's sending end writes to, grouped so that each [`Wire`] (one a `kick`,
/// most of which send nothing) borrows one struct rather than each field.
#[derive(Default)]
struct Wires {
    /// Packets on a wire, by slot, until their arrival event, in the boxes they crossed the trees in
    /// (the next hop's receive path takes the box on); and the free slots.
    on_wire: Vec<Option<Box<Packet>>>,
    free_slots: Vec<u32>,
    /// Packets put on a wire so far.
    frames_sent: u64,
    /// Sockets' skbs freed without a TX completion — dropped by a qdisc after it had accepted them, or
    /// delivered on the host itself — as (application, frame length). Their owners hear of it when the
    /// current event is done, as `tcp_wfree` defers to the TSQ tasklet, so that no socket sends from
    /// inside another's transmit.
    freed: Vec<(AppId, u32)>,
    /// Header buffers of packets delivered or dropped, for the next packets made here (`packet_of`)
    /// and the frames of GSO packets cut ([`Wire::send_skb`]): a packet's bytes are not allocated and
    /// freed each time (at most [`SPARE_DATA`] kept).
    spare_data: Vec<Vec<u8>>,
}

/// An interface's sending end as core's `qdisc_run` sees it: free unless a frame is being serialised;
/// a frame it takes is on the wire for its serialisation time, then arrives at the peer after the
/// link's delay (and jitter), unless the link loses it — or goes through the link's netem first.
struct Wire<'a> {
    iface: IfaceId,
    now: Nanos,
    ifc: &'a mut Iface,
    q: &'a mut EventQueue<Event>,
    wires: &'a mut Wires,
    trace: Option<(&'a mut crate::trace::Trace, &'a str)>,
    /// On a veth ([`LinkParams::veth`]) with TSO on: the sending device's `gso_max_segs` and
    /// `gso_max_size`, within which a GSO packet crosses whole; `None` on a NIC or a veth without TSO,
    /// which cut every GSO packet into frames.
    whole_gso: Option<(u32, u32)>,
}

impl Iface {
    /// The skb the NIC is sending now, whose TX completion frees it: its application and length (a GSO
    /// packet's whole length with its last frame); `None` when idle or sending a packet no socket owns.
    pub fn on_nic(&self) -> Option<(AppId, u32)> {
        self.tx_owner
    }
}

impl Transmitter for Wire<'_> {
    fn ready(&self) -> bool {
        !self.ifc.busy
    }

    /// The dequeue's trace lines, and its drops: each counted on the interface, and each one's socket
    /// told that its skb is freed (a packet dropped after it was accepted is, for its sender, sent and
    /// lost).
    #[inline]
    fn dequeued(&mut self, pkt: Option<&Packet>, cx: &mut Cx) {
        if let Some((t, label)) = self.trace.as_mut() {
            record_dequeue(t, self.now, label, pkt, cx);
        }
        if cx.drops.is_empty() {
            return;
        }
        for d in cx.drops.drain() {
            self.ifc.counters.tx_dropped += 1;
            if d.pkt.tag != 0 {
                self.wires.freed.push((d.pkt.tag as AppId - 1, d.pkt.len));
            }
            keep_data(&mut self.wires.spare_data, d.pkt.data);
        }
    }

    /// A packet no tree boxed (teql's slaves): boxed here for the wire.
    fn send(&mut self, pkt: Packet) {
        self.send_skb(Box::new(pkt), &mut SkbCache::default());
    }

    /// A GSO packet is cut into its frames here (`validate_xmit_skb` → `skb_gso_segment`, or the NIC's
    /// TSO: the wire sees the same frames either way), sent back to back, each in a box from `skbs`; a
    /// veth sends it whole. A frame stays in the box it came in, onto the wire and to the next hop.
    #[inline]
    fn send_skb(&mut self, pkt: Box<Packet>, skbs: &mut SkbCache) {
        if !pkt.is_gso()
            || self
                .whole_gso
                .is_some_and(|limits| passes_whole(&pkt, limits))
        {
            return self.send_frame(pkt);
        }
        self.ifc.gso_owner = (pkt.tag != 0).then(|| (pkt.tag as AppId - 1, pkt.len));
        // The frames queue behind the first (the queue is empty: `kick` sends what it holds first).
        let (pending, spare) = (&mut self.ifc.tx_pending, &mut self.wires.spare_data);
        skbs.unbox(pkt)
            .gso_segment_in(|| spare_header(spare), |f| pending.push_back(skbs.boxed(f)));
        if let Some(f) = self.ifc.tx_pending.pop_front() {
            self.send_frame(f);
        }
    }
}

/// Whether a device with these `gso_max_segs` and `gso_max_size` keeps its GSO features for a GSO
/// packet (`gso_features_check`): no more segments than the first, and the skb's own length — every
/// header once, not the frames' bytes the packet is charged — below the second.
fn passes_whole(pkt: &Packet, (max_segs, max_size): (u32, u32)) -> bool {
    let hdr = pkt.gso_frame_max() - pkt.gso_size as u32;
    let skb_len = pkt.len - (pkt.gso_segs as u32).saturating_sub(1) * hdr;
    pkt.gso_segs as u32 <= max_segs && skb_len < max_size
}

/// The teql master's transmit as core's `qdisc_run` sees it: ready while a slave can take a packet
/// (or there is none, and the packet is dropped) and no frame of a GSO packet waits; each packet goes
/// onto the chosen slave's wire as [`Wire`] sends it, a GSO packet cut into frames first, each to the
/// next free slave.
struct TeqlXmit<'a> {
    master: &'a mut tclab_core::qdisc::teql::TeqlMaster,
    /// (ifindex, interface, up) of each slave.
    slaves: &'a [(u32, IfaceId, bool)],
    now: Nanos,
    ifaces: &'a mut [Iface],
    q: &'a mut EventQueue<Event>,
    wires: &'a mut Wires,
    /// Frames of a GSO packet waiting for a free slave ([`TeqlPort::pending`]).
    pending: &'a mut std::collections::VecDeque<Packet>,
    /// (application, frames beyond the one skb) of each GSO packet cut here.
    split: Vec<(AppId, u32)>,
    /// Packets the master's qdisc dropped during its dequeues.
    dropped: u64,
    /// The per-packet trace and teql0's label (`node:teql0`), if a trace is being written.
    trace: Option<(&'a mut crate::trace::Trace, &'a str)>,
}

impl TeqlXmit<'_> {
    /// Up, and its wire idle with nothing of its own left to send (its transmit queue not stopped).
    fn can_send(ifaces: &[Iface], slaves: &[(u32, IfaceId, bool)], ifindex: u32) -> bool {
        slaves.iter().any(|&(s, i, up)| {
            s == ifindex && up && !ifaces[i].busy && ifaces[i].tx_pending.is_empty()
        })
    }

    fn slave_free(&self) -> bool {
        self.master
            .ready(|s| Self::can_send(self.ifaces, self.slaves, s))
    }

    /// Waiting frames to free slaves, in order, while one is free.
    fn flush(&mut self) {
        while !self.pending.is_empty() && self.slave_free() {
            if let Some(f) = self.pending.pop_front() {
                self.xmit(f);
            }
        }
    }

    /// `teql_master_xmit` of one frame (or packet a slave's driver cuts itself).
    fn xmit(&mut self, pkt: Packet) {
        let (ifaces, slaves) = (&*self.ifaces, self.slaves);
        let picked = self
            .master
            .xmit(pkt.len, |s| Self::can_send(ifaces, slaves, s));
        let iface = match picked {
            tclab_core::qdisc::teql::Xmit::Sent(s) => slaves.iter().find(|x| x.0 == s).map(|x| x.1),
            // No slave (counted by the master), or none free, which the callers rule out.
            _ => None,
        };
        let Some(iface) = iface else {
            if pkt.tag != 0 {
                self.wires.freed.push((pkt.tag as AppId - 1, pkt.len));
            }
            return;
        };
        Wire {
            iface,
            now: self.now,
            ifc: &mut self.ifaces[iface],
            q: self.q,
            wires: self.wires,
            trace: None,
            // teql0 has no GSO feature: what reaches a slave is frames already.
            whole_gso: None,
        }
        .send(pkt);
    }
}

impl Transmitter for TeqlXmit<'_> {
    fn ready(&self) -> bool {
        self.pending.is_empty() && self.slave_free()
    }

    fn dequeued(&mut self, pkt: Option<&Packet>, cx: &mut Cx) {
        if let Some((t, label)) = self.trace.as_mut() {
            record_dequeue(t, self.now, label, pkt, cx);
        }
        for d in cx.drops.drain() {
            self.dropped += 1;
            if d.pkt.tag != 0 {
                self.wires.freed.push((d.pkt.tag as AppId - 1, d.pkt.len));
            }
        }
    }

    fn send(&mut self, pkt: Packet) {
        if !pkt.is_gso() {
            return self.xmit(pkt);
        }
        let owner = pkt.tag;
        let frames = pkt.gso_segment();
        if owner != 0 && frames.len() > 1 {
            self.split
                .push((owner as AppId - 1, frames.len() as u32 - 1));
        }
        self.pending.extend(frames);
        self.flush();
    }
}

impl Wire<'_> {
    /// One frame onto the wire. The TX completion frees its skb: a GSO packet's with its last frame.
    fn send_frame(&mut self, pkt: Box<Packet>) {
        let (now, iface) = (self.now, self.iface);
        let ifc = &mut *self.ifc;
        let tx = ifc.link.tx_time(pkt.len, &mut ifc.tx_carry);
        ifc.busy = true;
        ifc.tx_owner = if !ifc.tx_pending.is_empty() {
            None
        } else if ifc.gso_owner.is_some() {
            ifc.gso_owner.take()
        } else {
            (pkt.tag != 0).then(|| (pkt.tag as AppId - 1, pkt.len))
        };
        ifc.counters.tx_bytes += pkt.len as u64;
        ifc.counters.tx_packets += 1;
        self.wires.frames_sent += 1;
        self.q.schedule(
            now + tx,
            Event::TxDone {
                iface: iface as u32,
            },
        );
        if ifc.netem.is_some() {
            // The link's netem takes the frame when its last bit is on the wire (TxDone).
            ifc.tx_frame = Some(pkt);
            return;
        }
        let lost = ifc.link.loss > 0.0 && ifc.rng.next_f64() < ifc.link.loss;
        let jitter = if ifc.link.jitter > 0 {
            ifc.rng.below(ifc.link.jitter + 1)
        } else {
            0
        };
        let arrival = (now + tx + ifc.link.delay + jitter).max(ifc.last_arrival);
        ifc.last_arrival = arrival;
        if lost {
            ifc.counters.wire_lost += 1;
            return;
        }
        let slot = match self.wires.free_slots.pop() {
            Some(s) => {
                self.wires.on_wire[s as usize] = Some(pkt);
                s
            }
            None => {
                self.wires.on_wire.push(Some(pkt));
                (self.wires.on_wire.len() - 1) as u32
            }
        };
        self.q.schedule(
            arrival,
            Event::Arrive {
                iface: ifc.peer as u32,
                slot,
            },
        );
    }
}

#[cfg(test)]
mod link_tests {
    use super::LinkParams;

    #[test]
    fn an_atm_line_sends_cells() {
        // A 98-byte ping frame on a 256 kbit/s ATM line with 40 bytes of encapsulation: 84 + 40 = 124
        // bytes → 3 cells → 159 bytes → 159 × 8 / 256000 s = 4 968 750 ns. On Ethernet: 98 bytes, 3 062 500.
        let mut l = LinkParams::new(256_000, 0);
        assert_eq!(l.tx_time(98, &mut 0), 3_062_500);
        l.atm = true;
        l.overhead = 40;
        assert_eq!(l.tx_time(98, &mut 0), 4_968_750);
        // A full frame: 1500 + 40 = 1540 bytes → 33 cells (1749 bytes).
        assert_eq!(l.tx_time(1514, &mut 0), 1749 * 8 * 1_000_000_000 / 256_000);
    }
}

#[cfg(test)]
mod nf_idle_tests {
    use super::{Network, Observer};
    use tclab_core::Nanos;

    struct Nop;
    impl Observer for Nop {
        fn observe(&mut self, _: Nanos, _: &Network) {}
    }

    /// `Network::nf_idle` lets packets skip a node's netfilter hooks only while a run finds them empty:
    /// a rule added between two runs must act in the second. a sends 4 Mbit/s of UDP through r; after
    /// one second r gets `iptables -t mangle -A FORWARD -j DROP`, and every datagram it forwards from
    /// then on is dropped there (counted on the interface it would leave by, as `netfilter` does).
    #[test]
    fn a_rule_added_between_runs_is_applied() {
        let text = r#"
duration = "2s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "100mbit"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "100mbit"
"#;
        let mut sc = crate::scenario::load("nf.toml", text, std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let net = &mut sc.net;
        let node = |net: &Network, name: &str| net.nodes.iter().position(|n| n.name == name);
        let (a, r, b) = (
            node(net, "a").unwrap(),
            node(net, "r").unwrap(),
            node(net, "b").unwrap(),
        );
        let (src, dst) = (net.node_addr(a).unwrap(), net.node_addr(b).unwrap());
        let tx =
            crate::apps::UdpSender::new(src, dst, 5000, 5001, 0, 1000, 4_000_000, 0, 2_000_000_000);
        net.add_app(a, super::App::UdpSender(tx), Some(0));
        let out = net.iface_by_name(r, "eth1").unwrap();
        net.run(1_000_000_000, None, &mut Nop);
        let sent = net.ifaces[out].counters.tx_packets;
        assert!(
            sent > 400,
            "4 Mbit/s of 1000-byte datagrams go through: {sent}"
        );
        assert_eq!(net.ifaces[out].counters.nf_dropped, 0);
        let rule = ["iptables", "-t", "mangle", "-A", "FORWARD", "-j", "DROP"];
        crate::scenario::apply_journal(net, r, &[rule.map(String::from).to_vec()]).unwrap();
        net.run(2_000_000_000, None, &mut Nop);
        assert_eq!(
            net.ifaces[out].counters.tx_packets, sent,
            "nothing more leaves r"
        );
        assert!(
            net.ifaces[out].counters.nf_dropped > 400,
            "a second's datagrams dropped by the rule: {}",
            net.ifaces[out].counters.nf_dropped
        );
    }
}

#[cfg(test)]
mod found_tests {
    /// `Network::found` (the sockets the event loop's prefetch found) answers a delivery's lookup only
    /// while no socket was bound since: a connection accepted off a listener between the prefetch and
    /// the delivery of its next segment is bound to its own endpoint, which the delivery must find
    /// (a kept answer would give it the listener's).
    #[test]
    fn a_socket_bound_after_the_prefetch_is_the_one_found() {
        let text = "duration = \"1s\"\n[[node]]\nname = \"h\"\n";
        let mut sc = crate::scenario::load("found.toml", text, std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let net = &mut sc.net;
        let (peer, listener, conn) = (0x0a00_0002, 0, 1);
        net.bind(0, 6, 80, 0, 0, listener);
        net.found = [
            (super::demux_word((0, 6, 80, peer, 4000)), listener),
            super::NOTHING_FOUND,
        ];
        assert_eq!(net.lookup(0, 6, 80, peer, 4000), Some(listener));
        net.bind(0, 6, 80, peer, 4000, conn);
        assert_eq!(net.lookup(0, 6, 80, peer, 4000), Some(conn));
        assert_eq!(net.lookup(0, 6, 80, peer, 4001), Some(listener));
    }
}

#[cfg(test)]
mod hash_tests {
    use super::datagram_ports;
    use crate::wire::{Datagram, Icmp, Ipv4, Tcp, Udp, L4};

    /// The hash a packet gets from its datagram's fields is the one dissecting its bytes gives (the
    /// kernel's `skb_get_hash`, `flow::flow_keys`), for every kind the simulator sends and both orders
    /// of addresses and ports; the combinations `datagram_ports` declines are dissected instead.
    #[test]
    fn the_hash_from_fields_is_the_dissected_hash() {
        let key = [0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321];
        let l4s = [
            L4::Tcp(Tcp {
                sport: 5001,
                dport: 80,
                flags: crate::wire::TCP_ACK,
                payload_len: 1448,
                ..Tcp::default()
            }),
            L4::Udp(Udp {
                sport: 53,
                dport: 40000,
                payload_len: 100,
            }),
            L4::Icmp(Icmp {
                kind: 8,
                ident: 7,
                seq: 3,
                ..Icmp::default()
            }),
            L4::Other,
        ];
        let mut declined = 0;
        for (src, dst) in [(0x0a00_0001, 0x0a00_0002), (0x0a00_0002, 0x0a00_0001)] {
            for l4 in &l4s {
                for protocol in [1u8, 6, 17, 47, 132] {
                    let d = Datagram {
                        ip: Ipv4 {
                            src,
                            dst,
                            protocol,
                            ttl: 64,
                            ..Ipv4::default()
                        },
                        l4: l4.clone(),
                    };
                    let mut data = Vec::new();
                    d.emit_into(1, &mut data);
                    let mut pkt = tclab_core::packet::Packet {
                        data,
                        protocol: 0x0800,
                        ..Default::default()
                    };
                    let dissected = tclab_core::flow::skb_get_hash(&mut pkt, key);
                    match datagram_ports(&d) {
                        Some(ports) => assert_eq!(
                            tclab_core::flow::ipv4_flow_hash(key, protocol, src, dst, ports),
                            dissected,
                            "{l4:?} under protocol {protocol}"
                        ),
                        None => declined += 1,
                    }
                }
            }
        }
        // TCP, UDP and ICMP under another protocol's number, Other under one with ports.
        assert_eq!(declined, 2 * (4 + 4 + 4 + 3));
    }
}

#[cfg(test)]
mod owner_tests {
    use super::{LinkParams, Network, NodeKind};

    /// `owner_of` works the owner out from the address's bytes: it must agree with a search of every
    /// interface's address, for the addresses `connect` gave (three links on four nodes, one node at
    /// the end of two) and for the rest of 10.0.0.0/16 and beyond, which belong to no node.
    #[test]
    fn the_owner_worked_out_is_the_owner_searched() {
        let mut net = Network::new(1);
        let n: Vec<_> = (0..4)
            .map(|i| net.add_node(&format!("n{i}"), NodeKind::Host))
            .collect();
        let link = || LinkParams::new(1_000_000, 0);
        for (a, b) in [(0, 1), (1, 2), (1, 3)] {
            net.connect(n[a], None, n[b], None, link(), link(), 1500, 1000)
                .unwrap();
        }
        let searched = |addr: u32| net.ifaces.iter().find(|i| i.addr == addr).map(|i| i.node);
        let others = [0x0a01_0101, 0x0b00_0101, 0x0a00_0001, 0, u32::MAX];
        let mut owned = 0;
        for addr in (0x0a00_0000..=0x0a00_ffff).chain(others) {
            assert_eq!(net.owner_of(addr), searched(addr), "{addr:#x}");
            owned += net.owner_of(addr).is_some() as u32;
        }
        assert_eq!(owned, 6, "two addresses a link");
        assert_eq!(net.owner_of(0x0a00_0302), Some(n[3]), "10.0.3.2: n3's end");
    }
}
