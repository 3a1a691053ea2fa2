//! A packet as a qdisc sees it: the bytes on the wire plus the kernel's per-skb metadata.
//!
//! `data` starts at the network header (IPv4/IPv6), as an skb does when it reaches the egress qdisc, so that
//! a u32 filter's `at 0` is the first byte of the IP header. `len` is the length the qdiscs account
//! (`qdisc_pkt_len`: the L2 frame, 14 bytes of Ethernet header included), which may be more than `data`
//! carries when a simulated payload is not materialised.

use crate::Nanos;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Bytes from the network header on. May be shorter than `len`; never read past its end.
    pub data: Vec<u8>,
    /// Length on the wire in bytes (`qdisc_pkt_len`).
    pub len: u32,
    /// Netfilter mark (`skb->mark`).
    pub mark: u32,
    /// `skb->priority`: a socket priority (0..15) or, if its major equals a qdisc's handle, a classid.
    pub priority: u32,
    /// `skb->tc_index`: the minor of the class an ingress or clsact filter chose (`tc_run`), 0 if none.
    /// GRED reads its low four bits as the drop precedence.
    pub tc_index: u16,
    /// EtherType (0x0800 IPv4, 0x86dd IPv6).
    pub protocol: u16,
    /// When the packet entered the root qdisc.
    pub enqueue_ns: Nanos,
    /// An identifier the driver can use to follow the packet (flow, sequence); qdiscs ignore it.
    pub tag: u64,
    /// The mark of the packet's connection-tracking entry, when netfilter tracked it (`skb->_nfct`'s
    /// `ct->mark`, read when the packet last passed a netfilter hook); `None` for an untracked packet.
    /// The `connmark` action restores `mark` from it.
    pub ct_mark: Option<u32>,
    /// The packet's conntrack state as flower's `ct_state` reads it (`skb_flow_dissect_ct` through
    /// `fl_ct_info_to_flower_map`): [`Packet::CT_TRACKED`] with NEW, ESTABLISHED or RELATED, and
    /// REPLY in the reply direction, or with INVALID after a `ct` action that found the packet
    /// untrackable; 0 while untracked. Set with `ct_mark` by the netfilter hooks (the
    /// skb's `_nfct`) and by the `ct` action.
    pub ct_state: u8,
    /// `skb->skb_iif`: the driver's number (≥ 1) for the device a mirred action took the packet from; 0
    /// if none. An ifb gives a redirected packet back to that device.
    pub iif: u32,
    /// `skb->redirected` and `skb->from_ingress` ([`Packet::REDIRECTED`], [`Packet::FROM_INGRESS`]),
    /// and the simulator's [`Packet::CSUM_IMPLIED`].
    pub redirect: u8,
    /// `skb->tc_depth`: how many times the packet was re-enqueued at a root (netem's duplicate is 1, and
    /// is never duplicated again).
    pub tc_depth: u8,
    /// `qdisc_skb_cb(skb)->data`: what a discipline keeps with a packet it queued in a child (SFB's bin
    /// hashes of its two sets), read back when the packet comes out.
    pub cb: [u32; 2],
    /// The leaf class the innermost classful qdisc queued the packet in (`Cx::tag_leaf`), for traces
    /// (`tclab sim --trace`); 0 if none. No discipline reads it.
    pub leaf_class: u32,
    /// `skb->sk`: the driver's number (≥ 1) for the socket that sent the packet, while the packet is
    /// still that socket's (on its own host's egress); 0 for a forwarded packet, a copy, or a socket
    /// sch_fq treats as unconnected (ping, `TCP_CLOSE`). sch_fq keeps one flow per socket.
    pub sk: u32,
    /// `skb->tstamp` as an earliest departure time (EDT): a pacing TCP stamps each packet with the
    /// time it may leave (`tcp_wstamp_ns`), and sch_fq holds it until then. 0: none.
    pub tstamp: Nanos,
    /// The sending socket's `sk_pacing_rate` in bytes per second, read by sch_fq for a packet without
    /// `tstamp` (a socket with `SO_MAX_PACING_RATE`); 0 stands for the kernel's `~0UL`, no limit.
    pub pacing_rate: u64,
    /// `skb->hash`: the flow hash, computed once ([`crate::flow::skb_get_hash`]) and kept for every
    /// discipline after; 0 while not computed (a computed hash is never 0, as in the kernel).
    pub hash: u32,
    /// What few packets carry ([`PacketExt`]: VLAN tags, a size table's real length, a chosen transmit
    /// queue, a cgroup classid, a tunnel, Ethernet addresses, conntrack zone and labels), behind one
    /// pointer so that every packet does not pay for it; `None` when there is none of it (the setters
    /// keep it so, so that packets compare equal whatever was set and cleared on the way).
    pub ext: Option<Box<PacketExt>>,
    /// `skb_shinfo(skb)->gso_segs`: the frames a GSO super-packet becomes when it is segmented; 0 for
    /// an ordinary packet (see [`Packet::set_gso`]).
    pub gso_segs: u16,
    /// `skb_shinfo(skb)->gso_size`: the payload bytes of each of those frames (the TCP MSS); 0 if none.
    pub gso_size: u16,
}

// A `Packet` is moved by value at every step of its path (into a qdisc, out of it, onto a link's slab and
// off it). Up to 128 bytes the compiler moves one with a few vector loads and stores in two cache lines;
// past that every move calls `memcpy` (at 160 bytes, 7 % of bench-isp's time: docs/BENCHMARKS.md). What
// most packets never set belongs in `PacketExt`.
const _: () = assert!(std::mem::size_of::<Packet>() <= 128);

/// The rarely set part of a packet's metadata (see [`Packet::ext`]), read and written through
/// `Packet`'s accessors of the same names (and [`Packet::ext_mut`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketExt {
    /// The tunnel the packet is to be sent in (the kernel's metadata dst, `skb_tunnel_info`), which a
    /// `tunnel_key set` action attached.
    pub tunnel: Option<crate::action::tunnel_key::TunnelInfo>,
    /// The destination and source Ethernet addresses of the frame the packet arrived in
    /// (`eth_hdr(skb)`), for a packet that came from a wire (`tclab live`); a simulated packet has none.
    pub eth: Option<[u8; 12]>,
    /// The labels of the packet's connection (`nf_conn_labels`), as a `ct commit label` set them.
    pub ct_labels: [u8; 16],
    /// The accelerated VLAN tag (`skb->vlan_proto`, `skb->vlan_tci`): metadata the device writes into
    /// the frame when it sends it, so not part of `len` (`qdisc_pkt_len` does not count it either).
    pub vlan: Option<VlanTag>,
    /// VLAN tags inside the link header, outermost first: 4 bytes each, counted in `len`. The network
    /// header (and `protocol`) come after them.
    pub vlan_inline: Vec<VlanTag>,
    /// The packet's real length while a root size table has `len` say what the qdiscs charge for it
    /// (`qdisc_skb_cb(skb)->pkt_len` beside `skb->len`); restored when the packet leaves the root.
    pub wire_len: Option<u32>,
    /// `skb->queue_mapping` when an action chose the transmit queue (`skbedit queue_mapping N`); `None`
    /// leaves the choice to the device's flow hash (`skb_tx_hash`), made where the queue is read (mq,
    /// multiq).
    pub queue_mapping: Option<u16>,
    /// The `net_cls.classid` of the sending socket's cgroup (`task_get_classid`), which the cgroup
    /// classifier gives as its result; 0 for none (a forwarded packet has none).
    pub cgroup_classid: u32,
    /// The zone of the packet's connection (`ct->zone.id`): the `ct` action's `zone`; 0 for the hooks'
    /// own (see [`Packet::ct_state`]).
    pub ct_zone: u16,
    /// The routing decision the packet carries (`skb_dst`), which the route classifier and meta's
    /// `rt_classid`/`rt_iif` read; `None` before routing and off a wire.
    pub route: Option<Route>,
}

/// What a packet's route tells the qdiscs (`skb_dst(skb)`): its realms and the input interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// `dst->tclassid`: the destination realm in the low 16 bits, the source realm in the high 16.
    pub tclassid: u32,
    /// `inet_iif(skb)`: the index of the device a forwarded packet came in on; 0 for a local one.
    pub iif: u32,
}

/// Spare packet boxes, the kernel's `skbuff_head_cache`. A packet travels through a device's tree as a
/// `Box<Packet>`, as an skb travels as a pointer: a qdisc that queues the box (FIFOs, pfifo_fast, HTB,
/// fq_codel: [`crate::qdisc::Qdisc::enqueue_skb`]) moves 8 bytes where a `Packet` by value is 120,
/// copied at every layer it passes (rustc cannot elide those copies: docs/BENCHMARKS.md). Ownership
/// stays Rust's: a queued box belongs to its queue, so no packet can be named twice or after it left,
/// and a qdisc reset or deleted frees what it held, with no index into a table that could go stale.
///
/// A box whose packet was taken out comes here to carry the next one, so that a driver that keeps its
/// cache (the simulator's `Network` in its kept [`crate::Cx`]) allocates nothing per packet in the
/// steady state. At most [`SkbCache::KEEP`] boxes are kept: past that (packets made in one call and
/// freed in another) a box is freed.
#[derive(Clone, Default)]
// The boxes are what is kept: each is handed out whole, with its allocation, for the next packet.
#[allow(clippy::vec_box)]
pub struct SkbCache(Vec<Box<Packet>>);

impl SkbCache {
    /// Beyond this, boxes go back to the allocator. A cache holds no more than were once out
    /// together: 1 000 subscribers' slow starts put 18 000 packets in flight (bench-isp), and a bound
    /// of 1 024 freed and allocated again the boxes of every later swing (about 8 000 in 2 s). Kept,
    /// they cost bench-isp 3 MB of peak memory (81 → 84 MB) that the allocator gave other uses.
    pub const KEEP: usize = 1 << 16;

    /// `pkt` in a box: a spare one if there is one.
    #[inline]
    pub fn boxed(&mut self, pkt: Packet) -> Box<Packet> {
        match self.0.pop() {
            Some(mut b) => {
                *b = pkt;
                b
            }
            None => Box::new(pkt),
        }
    }

    /// The packet out of its box; the box is kept for the next [`SkbCache::boxed`].
    #[inline]
    pub fn unbox(&mut self, mut b: Box<Packet>) -> Packet {
        let pkt = std::mem::take(&mut *b);
        self.recycle(b);
        pkt
    }

    /// Keep a box whose packet is no longer needed (its contents are dropped when it is reused).
    #[inline]
    pub fn recycle(&mut self, b: Box<Packet>) {
        if self.0.len() < Self::KEEP {
            self.0.push(b);
        }
    }

    /// Boxes kept.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SkbCache {
    /// The count, not the spare packets: what a context's `Debug` shows is its call's state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SkbCache({} spare)", self.0.len())
    }
}

/// One 802.1Q/802.1ad tag: its TPID and its TCI (priority << 13 | DEI << 12 | VLAN id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    pub proto: u16,
    pub tci: u16,
}

impl Packet {
    /// `redirect` flag: a mirred redirect sent the packet (not a mirror's copy).
    pub const REDIRECTED: u8 = 1;
    /// `redirect` flag: it was redirected from a device's ingress hook.
    pub const FROM_INGRESS: u8 = 2;
    /// `redirect` flag, the simulator's: the transport checksum (TCP, UDP, ICMP) is implied, not in the
    /// bytes. A simulated host's packets are built with those fields zero and are valid by
    /// construction, as the sender's stack would have made them; the first action that rewrites
    /// bytes fills them in over the bytes as they were ([`crate::action::csum::complete_implied`]) and
    /// clears the flag, so the receiving host verifies only packets without it. A packet from anywhere
    /// else (a wire, a test) never has it: its checksums are its bytes'.
    pub const CSUM_IMPLIED: u8 = 4;

    /// `ct_state` bits, `TCA_FLOWER_KEY_CT_FLAGS_*`.
    pub const CT_NEW: u8 = 1;
    pub const CT_ESTABLISHED: u8 = 2;
    pub const CT_RELATED: u8 = 4;
    pub const CT_TRACKED: u8 = 8;
    pub const CT_INVALID: u8 = 16;
    pub const CT_REPLY: u8 = 32;

    /// `skb->protocol`: the outermost in-header VLAN tag's TPID, else the network protocol.
    pub fn skb_protocol(&self) -> u16 {
        self.vlan_inline()
            .first()
            .map_or(self.protocol, |t| t.proto)
    }

    /// `skb_protocol(skb, false)`, what `tcf_classify` compares with a filter's protocol: the
    /// accelerated tag's TPID when there is one.
    pub fn tc_protocol(&self) -> u16 {
        self.vlan().map_or_else(|| self.skb_protocol(), |t| t.proto)
    }

    /// The accelerated VLAN tag ([`PacketExt::vlan`]), if any.
    pub fn vlan(&self) -> Option<VlanTag> {
        self.ext.as_ref()?.vlan
    }

    pub fn set_vlan(&mut self, tag: Option<VlanTag>) {
        self.set_in_ext(tag, |e| &mut e.vlan);
    }

    /// The VLAN tags in the link header ([`PacketExt::vlan_inline`]), outermost first.
    pub fn vlan_inline(&self) -> &[VlanTag] {
        self.ext.as_ref().map_or(&[], |e| &e.vlan_inline)
    }

    pub fn set_vlan_inline(&mut self, tags: Vec<VlanTag>) {
        self.set_in_ext(tags, |e| &mut e.vlan_inline);
    }

    /// Put a tag in the link header, outermost.
    pub fn push_vlan_inline(&mut self, tag: VlanTag) {
        self.ext_mut().vlan_inline.insert(0, tag);
    }

    /// Take the outermost tag out of the link header, if there is one.
    pub fn pop_vlan_inline(&mut self) -> Option<VlanTag> {
        let tags = &mut self.ext.as_mut()?.vlan_inline;
        let t = (!tags.is_empty()).then(|| tags.remove(0));
        self.trim_ext();
        t
    }

    /// The packet's real length while a root size table charges another ([`PacketExt::wire_len`]).
    pub fn wire_len(&self) -> Option<u32> {
        self.ext.as_ref()?.wire_len
    }

    pub fn set_wire_len(&mut self, len: Option<u32>) {
        self.set_in_ext(len, |e| &mut e.wire_len);
    }

    /// The transmit queue an action chose ([`PacketExt::queue_mapping`]), if one did.
    pub fn queue_mapping(&self) -> Option<u16> {
        self.ext.as_ref()?.queue_mapping
    }

    pub fn set_queue_mapping(&mut self, queue: Option<u16>) {
        self.set_in_ext(queue, |e| &mut e.queue_mapping);
    }

    /// The sending socket's cgroup classid ([`PacketExt::cgroup_classid`]); 0 for none.
    pub fn cgroup_classid(&self) -> u32 {
        self.ext.as_ref().map_or(0, |e| e.cgroup_classid)
    }

    pub fn set_cgroup_classid(&mut self, classid: u32) {
        self.set_in_ext(classid, |e| &mut e.cgroup_classid);
    }

    /// The packet's route ([`PacketExt::route`]), if it has been routed.
    pub fn route(&self) -> Option<Route> {
        self.ext.as_ref()?.route
    }

    pub fn set_route(&mut self, route: Option<Route>) {
        self.set_in_ext(route, |e| &mut e.route);
    }

    /// The conntrack zone of the packet's connection ([`PacketExt::ct_zone`]); 0 for the default zone.
    pub fn ct_zone(&self) -> u16 {
        self.ext.as_ref().map_or(0, |e| e.ct_zone)
    }

    pub fn set_ct_zone(&mut self, zone: u16) {
        self.set_in_ext(zone, |e| &mut e.ct_zone);
    }

    /// Write one field of the extension: none is made to hold a default value, and it goes once a
    /// default value leaves it empty.
    fn set_in_ext<T: PartialEq + Default>(&mut self, v: T, field: fn(&mut PacketExt) -> &mut T) {
        let clears = v == T::default();
        if clears && self.ext.is_none() {
            return;
        }
        *field(self.ext_mut()) = v;
        if clears {
            self.trim_ext();
        }
    }

    /// The tunnel a `tunnel_key set` attached, if any.
    pub fn tunnel(&self) -> Option<&crate::action::tunnel_key::TunnelInfo> {
        self.ext.as_ref()?.tunnel.as_ref()
    }

    /// The frame's destination and source Ethernet addresses, when the packet came from a wire.
    pub fn eth_addrs(&self) -> Option<&[u8; 12]> {
        self.ext.as_ref()?.eth.as_ref()
    }

    /// Attach a tunnel, or with `None` release it.
    pub fn set_tunnel(&mut self, tunnel: Option<crate::action::tunnel_key::TunnelInfo>) {
        self.set_in_ext(tunnel, |e| &mut e.tunnel);
    }

    /// The labels of the packet's connection (zero for none).
    pub fn ct_labels(&self) -> [u8; 16] {
        self.ext.as_ref().map_or([0; 16], |e| e.ct_labels)
    }

    pub fn set_ct_labels(&mut self, labels: [u8; 16]) {
        self.set_in_ext(labels, |e| &mut e.ct_labels);
    }

    /// The rarely set metadata, made on first use.
    pub fn ext_mut(&mut self) -> &mut PacketExt {
        self.ext.get_or_insert_with(Default::default)
    }

    /// Let the extension go once nothing is left in it.
    pub fn trim_ext(&mut self) {
        if self
            .ext
            .as_deref()
            .is_some_and(|e| *e == PacketExt::default())
        {
            self.ext = None;
        }
    }

    /// A packet of `len` wire bytes with no header bytes, for tests and benchmarks.
    pub fn of_len(len: u32) -> Packet {
        Packet {
            len,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    /// The length from the network header on (`skb->len` at the ingress hook): the real wire length less
    /// the 14-byte Ethernet header, and never less than the bytes the packet carries. Bytes past `data` are
    /// payload tclab does not materialise; they read as zeros.
    pub fn l3_len(&self) -> usize {
        let wire = self.wire_len().unwrap_or(self.len) as usize;
        wire.saturating_sub(14).max(self.data.len())
    }

    /// `skb->len` where a tc action runs: at a device's ingress hook the Ethernet header has been
    /// pulled (`eth_type_trans`), so a policer charges and an action counts the network packet; on
    /// egress (clsact's egress hook, a qdisc's filters) the whole frame. `len` itself always holds the
    /// frame, as the qdiscs account it.
    pub fn hook_len(&self, at_ingress: bool) -> u32 {
        if at_ingress {
            self.len.saturating_sub(14)
        } else {
            self.len
        }
    }

    /// Make the first `n` bytes of the packet writable, materialising payload zeros where `data` stops
    /// short; `false` when the packet is shorter than `n` (`skb_ensure_writable` failing).
    pub fn materialise(&mut self, n: usize) -> bool {
        if n > self.l3_len() {
            return false;
        }
        if self.data.len() < n {
            self.data.resize(n, 0);
        }
        true
    }

    /// `skb_is_gso`: a super-packet of several MSS that is segmented before the wire.
    pub fn is_gso(&self) -> bool {
        self.gso_size != 0
    }

    /// The packets `bstats_update` counts for this one: a GSO packet's segments, else 1.
    pub fn bstats_packets(&self) -> u64 {
        if self.is_gso() {
            self.gso_segs as u64
        } else {
            1
        }
    }

    /// The IPv4 header's length and, after it, the TCP header's (options included) of an IPv4/TCP packet
    /// whose headers are materialised; `None` otherwise.
    fn tcp_hdr_lens(&self) -> Option<(usize, usize)> {
        let ip = crate::wire::Ipv4::parse(&self.data)?;
        if ip.protocol() != crate::wire::IPPROTO_TCP {
            return None;
        }
        let ihl = ip.header_len();
        let doff = (*self.data.get(ihl + 12)? >> 4) as usize * 4;
        (doff >= 20 && self.data.len() >= ihl + doff).then_some((ihl, doff))
    }

    /// The largest frame a GSO packet becomes (headers and `gso_size` bytes of payload); `len` for a
    /// packet that is not GSO.
    pub fn gso_frame_max(&self) -> u32 {
        match self.tcp_hdr_lens().filter(|_| self.is_gso()) {
            Some((ihl, doff)) => (14 + ihl + doff) as u32 + self.gso_size as u32,
            None => self.len,
        }
    }

    /// Make this IPv4/TCP packet, whose `len` is its skb's length (every header once, then the payload),
    /// a GSO packet of `gso_size`-byte segments, as TCP hands one to the stack (`tcp_set_skb_tso_segs`:
    /// none if the payload fits in one segment), and charge it as `qdisc_pkt_len_init` does: `len` grows
    /// by the headers of every segment after the first, so it is the sum of the frames the wire will
    /// carry. Does nothing to a packet that is not IPv4/TCP.
    pub fn set_gso(&mut self, gso_size: u16) {
        // Without a segment size there is nothing to cut: the headers are not read (an ACK's case).
        if gso_size == 0 {
            return;
        }
        let Some((ihl, doff)) = self.tcp_hdr_lens() else {
            return;
        };
        // `qdisc_pkt_len_init`'s `hdr_len`: the link, network and transport headers of each frame.
        let hdr = (14 + ihl + doff) as u32;
        let payload = self.len.saturating_sub(hdr);
        if payload <= gso_size as u32 {
            return;
        }
        let segs = payload.div_ceil(gso_size as u32);
        self.gso_size = gso_size;
        self.gso_segs = segs.min(u16::MAX as u32) as u16;
        self.len += (segs - 1) * hdr;
    }

    /// `skb_gso_segment` of a TCP GSO packet: its frames, each with the packet's headers and metadata,
    /// the IP total length, identifier (one more per segment) and checksum rewritten, the sequence number
    /// moved on by the payload before it, CWR only on the first and FIN and PSH only on the last
    /// (`tcp_gso_segment`). A packet that is not GSO comes back alone.
    pub fn gso_segment(self) -> Vec<Packet> {
        let mut out = Vec::with_capacity(self.gso_segs.max(1) as usize);
        self.gso_segment_in(Vec::new, |p| out.push(p));
        out
    }

    /// [`Packet::gso_segment`], each frame handed to `out` in order, its bytes in a buffer `spare` gives
    /// (cleared first) and the last frame in the packet's own: a driver that keeps the buffers of the
    /// packets it consumed segments without allocating (the kernel's frames come from its skb caches).
    pub fn gso_segment_in(
        mut self,
        mut spare: impl FnMut() -> Vec<u8>,
        mut out: impl FnMut(Packet),
    ) {
        let Some((ihl, doff)) = self.tcp_hdr_lens().filter(|_| self.is_gso()) else {
            return out(self);
        };
        let hdr = (14 + ihl + doff) as u32;
        let segs = self.gso_segs as u32;
        let payload = self.len - segs * hdr;
        let d = &self.data;
        let seq0 = u32::from_be_bytes([d[ihl + 4], d[ihl + 5], d[ihl + 6], d[ihl + 7]]);
        let id0 = u16::from_be_bytes([d[4], d[5]]);
        let flags = d[ihl + 13];
        let tcp_len0 = u16::from_be_bytes([d[2], d[3]]) as u32 - ihl as u32;
        let check0 = u16::from_be_bytes([d[ihl + 16], d[ihl + 17]]);
        // A checksum in the bytes follows each segment's changes incrementally (`tcp_gso_segment`
        // adjusts the super-packet's by the length delta), so a valid one stays valid and one an edit
        // left stale stays stale; an implied one stays implied.
        let real_check = self.redirect & Packet::CSUM_IMPLIED == 0;
        // Each frame's IP header checksum is computed afresh (`ip_send_check`) over words of which only
        // the total length and the identifier differ between frames: their sum without those two (and
        // without the checksum field) is taken once, and each frame's is that plus its own two words —
        // the same words added, so the same sum.
        let ip_base = {
            let mut h = [0u8; 60];
            h[..ihl].copy_from_slice(&d[..ihl]);
            h[2..6].fill(0);
            h[10..12].fill(0);
            crate::csum::Sum::default().bytes(&h[..ihl])
        };
        // The metadata is cloned without the bytes, which go into each frame's own buffer.
        let mut bytes = std::mem::take(&mut self.data);
        for i in 0..segs {
            let mut p = self.clone();
            p.data = if i + 1 == segs {
                std::mem::take(&mut bytes)
            } else {
                let mut b = spare();
                b.clear();
                b.extend_from_slice(&bytes);
                b
            };
            p.gso_segs = 0;
            p.gso_size = 0;
            let off = i * self.gso_size as u32;
            let this = (payload - off).min(self.gso_size as u32);
            p.len = hdr + this;
            p.set_wire_len(None);
            let d = &mut p.data;
            let (tot_len, id) = ((hdr - 14 + this) as u16, id0.wrapping_add(i as u16));
            d[2..4].copy_from_slice(&tot_len.to_be_bytes());
            d[4..6].copy_from_slice(&id.to_be_bytes());
            let c = ip_base.word(tot_len).word(id).fold();
            d[10..12].copy_from_slice(&c.to_be_bytes());
            d[ihl + 4..ihl + 8].copy_from_slice(&seq0.wrapping_add(off).to_be_bytes());
            let mut f = flags;
            if i > 0 {
                f &= !0x80; // CWR
            }
            if i + 1 < segs {
                f &= !(0x01 | 0x08); // FIN, PSH
            }
            d[ihl + 13] = f;
            if real_check {
                let tcp_len = (hdr - 14) - ihl as u32 + this;
                let c = crate::csum::Sum::of_check(check0)
                    .minus32(tcp_len0)
                    .word32(tcp_len)
                    .minus32(seq0)
                    .word32(seq0.wrapping_add(off))
                    .word(!(flags as u16))
                    .word(f as u16)
                    .fold();
                d[ihl + 16..ihl + 18].copy_from_slice(&c.to_be_bytes());
            }
            out(p);
        }
    }

    /// The IPv4 TOS byte, if the packet carries an IPv4 header.
    pub fn ipv4_tos(&self) -> Option<u8> {
        if self.protocol != 0x0800 || self.data.len() < 2 || self.data[0] >> 4 != 4 {
            return None;
        }
        Some(self.data[1])
    }
    /// An IPv4/UDP packet of `len` wire bytes (the 14-byte Ethernet header included) from `src:sport` to
    /// `dst:dport`, TOS byte `tos`: the headers are materialised (with a valid IP checksum), the payload
    /// is not. For tests, benchmarks and traffic generators.
    pub fn udp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, tos: u8, len: u32) -> Packet {
        let mut d = ipv4_header(src, dst, 17, tos, len.saturating_sub(14));
        d.extend_from_slice(&sport.to_be_bytes());
        d.extend_from_slice(&dport.to_be_bytes());
        d.extend_from_slice(&(len.saturating_sub(34) as u16).to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        Packet {
            data: d,
            len,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    /// An IPv4/TCP segment from `src:sport` to `dst:dport` with `flags` (0x10 ACK, 0x02 SYN…), `seq`,
    /// `ack`, TCP `options` (padded to a multiple of 4 with NOPs) and `payload` bytes of data, not
    /// materialised. Its wire length counts the Ethernet, IP and TCP headers and the payload.
    #[allow(clippy::too_many_arguments)]
    pub fn tcp4(
        src: [u8; 4],
        sport: u16,
        dst: [u8; 4],
        dport: u16,
        flags: u8,
        seq: u32,
        ack: u32,
        options: &[u8],
        payload: u32,
    ) -> Packet {
        let mut opts = options.to_vec();
        while !opts.len().is_multiple_of(4) {
            opts.push(1);
        }
        let tcp_len = 20 + opts.len() as u32;
        let ip_len = 20 + tcp_len + payload;
        let mut d = ipv4_header(src, dst, 6, 0, ip_len);
        d.extend_from_slice(&sport.to_be_bytes());
        d.extend_from_slice(&dport.to_be_bytes());
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(&ack.to_be_bytes());
        d.push(((tcp_len / 4) as u8) << 4);
        d.push(flags);
        d.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        d.extend_from_slice(&opts);
        Packet {
            data: d,
            len: 14 + ip_len,
            protocol: 0x0800,
            ..Default::default()
        }
    }
}

/// A 20-byte IPv4 header with a valid checksum.
fn ipv4_header(src: [u8; 4], dst: [u8; 4], proto: u8, tos: u8, total_len: u32) -> Vec<u8> {
    let mut h = vec![0x45, tos];
    h.extend_from_slice(&(total_len.min(65535) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each frame's IP header checksum is `ip_send_check`'s, computed afresh over the frame's header
    /// (here with options, and from a super-packet whose own checksum is wrong): the checksum of the
    /// header's words as written, whatever the super-packet's was.
    #[test]
    fn each_frame_gets_its_own_ip_header_checksum() {
        let (src, dst) = ([10, 0, 1, 1], [10, 0, 2, 2]);
        let mut p = Packet::tcp4(src, 5, dst, 80, 0x18, 7, 9, &[], 3 * 1448);
        // Four bytes of IP options (a NOP and an end of list), the lengths moved with them.
        p.data.splice(20..20, [1, 0, 0, 0]);
        p.data[0] = 0x46;
        let total = u16::from_be_bytes([p.data[2], p.data[3]]) + 4;
        p.data[2..4].copy_from_slice(&total.to_be_bytes());
        p.len += 4;
        p.data[10..12].copy_from_slice(&[0xde, 0xad]);
        p.set_gso(1448);
        let frames = p.gso_segment();
        assert_eq!(frames.len(), 3);
        for (i, f) in frames.iter().enumerate() {
            let mut h = f.data[..24].to_vec();
            h[10..12].fill(0);
            let check = crate::csum::ip_header(&h);
            assert_eq!(f.data[10..12], check.to_be_bytes(), "frame {i}");
            assert_eq!(u16::from_be_bytes([f.data[2], f.data[3]]), 24 + 20 + 1448);
            assert_eq!(u16::from_be_bytes([f.data[4], f.data[5]]), i as u16);
        }
    }

    /// Setting and clearing what lives in the extension leaves a packet equal to one that never had
    /// it (the simulator compares packets, and an empty extension would cost an allocation per packet),
    /// and clearing one field keeps the others.
    #[test]
    fn the_extension_exists_only_while_it_holds_something() {
        let plain = Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 100);
        let mut p = plain.clone();
        p.set_wire_len(None);
        p.set_ct_zone(0);
        assert_eq!(p.pop_vlan_inline(), None);
        assert!(p.ext.is_none(), "default values make no extension");
        let tag = VlanTag {
            proto: 0x8100,
            tci: 5,
        };
        p.set_vlan(Some(tag));
        p.push_vlan_inline(tag);
        p.set_wire_len(Some(104));
        assert_eq!(
            (p.vlan(), p.vlan_inline(), p.wire_len()),
            (Some(tag), &[tag][..], Some(104))
        );
        assert_eq!((p.skb_protocol(), p.tc_protocol()), (0x8100, 0x8100));
        p.set_vlan(None);
        assert_eq!(p.pop_vlan_inline(), Some(tag));
        assert!(p.ext.is_some(), "the real length is still there");
        p.set_wire_len(None);
        assert_eq!(p, plain);
        assert!(p.ext.is_none());
    }
}
