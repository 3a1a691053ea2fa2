//! The engine: devices and the operations `tc` performs on their qdisc trees.
//!
//! The decision logic follows `net/sched/sch_api.c` (`tc_modify_qdisc`, `tc_get_qdisc`, `tc_ctl_tclass`):
//! which qdisc a request names, whether it creates, changes or replaces, and which errno and message refuse
//! it. Every operation validates before it touches anything, so a refused command leaves the tree as it was.
//!
//! A device always has a root: until a policy is attached it is a default with handle 0 — `noqueue` on
//! virtual devices, `pfifo_fast` on a NIC — which `tc qdisc show` lists as `qdisc noqueue 0: root` and which
//! cannot be deleted.

use crate::action::ActionTable;
use crate::error::{Errno, KernelError, Warning};
use crate::filter::{Block, FilterFlags, FilterRequest};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::ingress::{MIN_EGRESS, MIN_INGRESS};
use crate::qdisc::pfifo_fast::PfifoFast;
use crate::qdisc::teql::{LinkFacts, TeqlMaster};
use crate::qdisc::{
    ClassInfo, ClassOptions, Cx, DevEnv, DropCounts, DropReason, Dropped, Qdisc, QdiscOptions,
    QdiscStats, Sched, Verdict, Xstats,
};
use crate::Nanos;
use std::collections::BTreeMap;

/// The extack of a `change`/`replace` naming another kind than the qdisc there: this machine's kernel
/// (6.18) words it so; 6.12's source says only "Invalid qdisc name".
const QDISC_KIND_MISMATCH: &str = "Invalid qdisc name: must match existing qdisc";

/// What a `tc qdisc add|change|replace|link` asks for: the netlink flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub create: bool,
    pub excl: bool,
    pub replace: bool,
}

impl Flags {
    pub const ADD: Flags = Flags {
        create: true,
        excl: true,
        replace: false,
    };
    pub const CHANGE: Flags = Flags {
        create: false,
        excl: false,
        replace: false,
    };
    pub const REPLACE: Flags = Flags {
        create: true,
        excl: false,
        replace: true,
    };
    pub const LINK: Flags = Flags {
        create: false,
        excl: false,
        replace: true,
    };
}

/// One qdisc as `tc qdisc show` lists it.
#[derive(Clone, Debug)]
pub struct QdiscInfo {
    pub kind: &'static str,
    pub handle: Handle,
    /// `Handle::ROOT` for the root.
    pub parent: Handle,
    pub options: QdiscOptions,
    /// The qdisc's size table, if any (`tc -d qdisc show` prints its spec).
    pub stab: Option<crate::stab::SizeSpec>,
    pub stats: QdiscStats,
    /// Discipline-specific counters (`dump_stats`), e.g. CBQ's.
    pub xstats: Option<Xstats>,
    /// Its children sit on the transmit queues themselves (a full-offload taprio's): no refcount of
    /// its own per queue.
    pub children_on_txqs: bool,
    /// It sits on a transmit queue as well as under its parent (a full-offload taprio's child):
    /// refcount 2.
    pub on_txq: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DefaultRoot {
    Noqueue,
    PfifoFast,
}

/// What kind of device a [`Device`] is, where it matters to traffic control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DevKind {
    /// A NIC, veth or dummy: what leaves goes to a wire.
    #[default]
    Plain,
    /// An intermediate functional block (`drivers/net/ifb.c`): packets a mirred action redirects to it
    /// pass its root qdisc, then go back to the device they came from — into its receive path after the
    /// ingress hook if they were redirected at ingress, else out of it — skipping classification once.
    /// A packet that was not redirected (a mirror's copy) is dropped by the ifb after its qdisc.
    Ifb,
    /// The teql master `teql0` (`sch_teql.c`): what its root qdisc releases goes round robin to the
    /// drivers of the devices whose root is `teql0` ([`crate::qdisc::teql::TeqlMaster`]).
    TeqlMaster,
}

/// `GSO_LEGACY_MAX_SIZE`: a device's default `gso_max_size` (IPv4's limit without BIG TCP).
pub const GSO_LEGACY_MAX_SIZE: u32 = 65536;
/// `GSO_MAX_SEGS`: a device's default and largest `gso_max_segs`.
pub const GSO_MAX_SEGS: u32 = 65535;
/// `GSO_MAX_SIZE` (BIG TCP): the largest `gso_max_size` a veth takes.
pub const GSO_MAX_SIZE: u32 = 524_280;

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Device {
    pub name: String,
    pub kind: DevKind,
    /// `IFF_UP`: a device tclab creates is up, an ifb starts down (`ip link set dev ifb0 up`). Mirred
    /// cannot send to a device that is down.
    pub up: bool,
    pub mtu: u32,
    pub txqueuelen: u32,
    /// Transmit queues (`ip link add … numtxqueues N`); more than one makes the device multiqueue (mq).
    pub txqueues: u32,
    /// The root qdisc when no policy is attached: `noqueue` for virtual devices (veth, dummy, the devices
    /// `tclab tc` creates), `pfifo_fast` for a NIC.
    pub default_root: DefaultRoot,
    root: Sched,
    /// The ingress qdisc (`handle ffff:`), if one is attached.
    ingress: Option<Sched>,
    /// Visible qdiscs other than the root, in the kernel's `qdisc_hash` order (16 buckets, newest first),
    /// as (handle, parent). A handle of 0 is an mq's per-queue default qdisc, found by its parent class.
    /// Both saved as byte strings of their own, which a root filter listing skips unread.
    #[serde(with = "crate::snapshot::classes")]
    qdisc_hash: Vec<Vec<(Handle, Handle)>>,
    /// The parent class of every visible qdisc in `qdisc_hash`, so that `qdisc_lookup` follows a path of
    /// class lookups instead of walking the whole tree (a LibreQoS policy has 10 000 leaves).
    #[serde(with = "crate::snapshot::classes")]
    parent_of: BTreeMap<Handle, Handle>,
    /// Every packet dropped on this device (egress and ingress), by reason; `tc -s` does not print these.
    pub drop_counts: DropCounts,
    /// TCP segmentation and generic segmentation offload (`ethtool -K DEV tso|gso on|off`): on, as on a
    /// Linux NIC, until a policy turns them off. They say where a GSO packet is cut into frames — by the
    /// NIC, or in software after the qdisc (`validate_xmit_skb`) — not whether the qdisc sees one: Linux's
    /// TCP builds GSO skbs either way (since 4.19). The simulator's NIC cuts GSO packets after the qdisc
    /// whatever they say; a veth (sim's `veth = true`) passes them whole to its peer only while TSO is
    /// on (without NETIF_F_TSO `validate_xmit_skb` cuts them first). `tclab check` reads them too.
    /// These are what was asked for (`wanted_features`); [`Device::tso_on`] and [`Device::gso_on`] say
    /// what the kernel keeps of them.
    pub tso: bool,
    pub gso: bool,
    /// Scatter-gather and transmit checksumming (`ethtool -K DEV sg|tx on|off`), asked for: without
    /// them Linux keeps neither TSO (nor, without SG, GSO) whatever was asked (`netdev_fix_features`).
    pub sg: bool,
    pub tx_csum: bool,
    /// `ip link set DEV gso_max_size N`: the largest GSO packet the stack builds for this device (65536;
    /// TCP's sockets take `MAX_TCP_HEADER + 1` off it, `sk_dst_gso_max_size`).
    pub gso_max_size: u32,
    /// `ip link set DEV gso_max_segs N`: the most segments in one (65535); 1 makes TCP send one MSS per
    /// skb.
    pub gso_max_segs: u32,
    /// `ethtool -s DEV speed N`: the link speed in Mbit/s, 0 for none (tclab's devices report none
    /// until told, as a veth or dummy reports none).
    pub speed: u32,
    /// A netdevsim port (`ip link add … type netdevsim`, tdc's devices): a mock PTP clock and taprio
    /// offload, which taprio's full offload needs.
    pub taprio_offload: bool,
    /// `dev->hard_header_len`: 14 (Ethernet), `LL_MAX_HEADER` on the teql master.
    pub hard_header_len: u32,
    /// `IFF_BROADCAST`: every Ethernet-like device (`ether_setup`); not an IP tunnel or wireguard,
    /// which teql refuses beside broadcast slaves.
    pub broadcast: bool,
    /// `dev->min_mtu`, `dev->max_mtu` (0: no bound), which `dev_validate_mtu` checks: 68 and 65535
    /// for a veth-like device and teql0; none for an ifb or a dummy, whose setup clears them.
    pub min_mtu: u32,
    pub max_mtu: u32,
    /// Packets the last bulk dequeue took after the first ([`Device::bulk_dequeue`]): handed to the
    /// driver with it in the kernel, here sent by `qdisc_run` before the tree is asked again.
    #[serde(skip)]
    pub bulk: std::collections::VecDeque<Box<Packet>>,
}

impl Device {
    /// TSO as `netdev_fix_features` leaves it: asked for, with scatter-gather and checksumming.
    pub fn tso_on(&self) -> bool {
        self.tso && self.sg && self.tx_csum
    }

    /// Software GSO as `netdev_fix_features` leaves it: asked for, with scatter-gather.
    pub fn gso_on(&self) -> bool {
        self.gso && self.sg
    }

    pub fn new(name: &str, mtu: u32, txqueuelen: u32) -> Device {
        Device::with_default(name, mtu, txqueuelen, DefaultRoot::Noqueue)
    }

    pub fn with_default(
        name: &str,
        mtu: u32,
        txqueuelen: u32,
        default_root: DefaultRoot,
    ) -> Device {
        let placeholder = Sched::new(
            Handle::UNSPEC,
            Handle::ROOT,
            Box::new(crate::qdisc::noqueue::Noqueue::default()),
        );
        let mut d = Device {
            name: name.to_string(),
            kind: DevKind::Plain,
            up: true,
            mtu,
            txqueuelen,
            default_root,
            root: placeholder,
            ingress: None,
            txqueues: 1,
            qdisc_hash: vec![Vec::new(); 16],
            parent_of: BTreeMap::new(),
            drop_counts: DropCounts::default(),
            tso: true,
            gso: true,
            sg: true,
            tx_csum: true,
            gso_max_size: GSO_LEGACY_MAX_SIZE,
            gso_max_segs: GSO_MAX_SEGS,
            speed: 0,
            taprio_offload: false,
            hard_header_len: 14,
            broadcast: true,
            min_mtu: 68,
            max_mtu: 65535,
            bulk: Default::default(),
        };
        d.root = d.default_root();
        d
    }

    /// The teql master as `teql_master_setup` makes it: down, mtu 1500, txqueuelen 100, a header of
    /// `LL_MAX_HEADER`, and the default qdisc of a device with a queue once up.
    pub fn teql_master() -> Device {
        let mut d = Device::with_default(
            crate::qdisc::teql::MASTER,
            1500,
            100,
            DefaultRoot::PfifoFast,
        );
        d.kind = DevKind::TeqlMaster;
        d.up = false;
        d.hard_header_len = crate::qdisc::teql::LL_MAX_HEADER;
        d
    }

    /// An ifb device as `ip link add NAME type ifb` makes it: down, txqueuelen 32 (`TX_Q_LIMIT`), mtu 1500,
    /// with the default qdisc of a device with a queue (`pfifo_fast`).
    pub fn ifb(name: &str) -> Device {
        let mut d = Device::with_default(name, 1500, 32, DefaultRoot::PfifoFast);
        d.kind = DevKind::Ifb;
        d.up = false;
        (d.min_mtu, d.max_mtu) = (0, 0);
        d
    }

    pub fn env(&self) -> DevEnv {
        DevEnv {
            txqueues: self.txqueues,
            txqueuelen: self.txqueuelen,
            mtu: self.mtu,
            hard_header_len: self.hard_header_len,
            speed: self.speed,
            taprio_offload: self.taprio_offload,
        }
    }

    fn default_root(&self) -> Sched {
        let q: Box<dyn Qdisc> = match self.default_root {
            DefaultRoot::Noqueue => Box::new(crate::qdisc::noqueue::Noqueue::default()),
            DefaultRoot::PfifoFast => Box::new(PfifoFast::new(&self.env())),
        };
        Sched::new(Handle::UNSPEC, Handle::ROOT, q)
    }

    /// `ip link set dev DEV txqueuelen N`: the default pfifo_fast follows the new length
    /// (`dev_qdisc_change_tx_queue_len` → `pfifo_fast_change_tx_queue_len`); a qdisc configured by tc keeps
    /// the limit it was given, as on Linux.
    pub fn set_txqueuelen(&mut self, txqueuelen: u32) {
        self.txqueuelen = txqueuelen;
        if self.root.handle == Handle::UNSPEC && self.root.q.kind() == "pfifo_fast" {
            self.root = self.default_root();
        }
    }

    /// `ethtool -s DEV speed N`: the new speed, and every qdisc on the device told (the
    /// `NETDEV_CHANGE` notifiers of taprio and cbs).
    pub fn set_speed(&mut self, speed: u32) {
        self.speed = speed;
        let env = self.env();
        fn tell(s: &mut Sched, env: &DevEnv) {
            s.q.link_changed(env);
            if let Some(c) = s.q.classes_mut() {
                for child in c.children_mut() {
                    tell(child, env);
                }
            }
        }
        tell(&mut self.root, &env);
    }

    pub fn root(&self) -> &Sched {
        &self.root
    }

    pub fn root_mut(&mut self) -> &mut Sched {
        &mut self.root
    }

    /// Enqueue at the root (`dev_queue_xmit` → `q->enqueue`). The verdict is the tree's, flags
    /// included ([`Verdict::to_sender`] gives what the sender sees); every packet dropped on the way is in
    /// `cx.drops`, and counted in [`Device::drop_counts`].
    pub fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        let pkt = cx.skbs.boxed(pkt);
        self.enqueue_skb(pkt, cx)
    }

    /// [`Device::enqueue`] of a packet in its box, as `dev_queue_xmit` takes an skb pointer: the box
    /// goes down the tree as it is ([`Qdisc::enqueue_skb`]), so a packet a driver boxed once is not
    /// copied at each layer. Dropped packets come out of their boxes into `cx.drops`.
    pub fn enqueue_skb(&mut self, mut pkt: Box<Packet>, cx: &mut Cx) -> Verdict {
        pkt.enqueue_ns = cx.now;
        let first = cx.drops.len();
        let sent = cx.mirred.len();
        if let Some(ing) = self.ingress.as_mut() {
            if let Some(v) = ing.q.egress_hook(&mut pkt, cx) {
                if v == Verdict::Drop {
                    self.drop_counts.add(DropReason::Action);
                    cx.drop_arriving_skb(pkt, DropReason::Action);
                }
                if cx.mirred.len() != sent {
                    self.mirred_from(cx, sent, false);
                }
                return v;
            }
        }
        // `__dev_xmit_skb` → `qdisc_calculate_pkt_len` with the root's size table.
        if let Some(t) = &self.root.stab {
            pkt.set_wire_len(Some(pkt.len));
            pkt.len = t.pkt_len(pkt.len);
        }
        let v = self.root.q.enqueue_skb(pkt, cx);
        if cx.to_root.is_some() {
            self.enqueue_at_root(cx);
        }
        if cx.drops.len() != first {
            self.count_drops(cx, first);
        }
        if cx.mirred.len() != sent {
            self.mirred_from(cx, sent, false);
        }
        v
    }

    /// Say where the packets mirred sent during this call came from (`skb->skb_iif`).
    #[cold]
    #[inline(never)]
    fn mirred_from(&self, cx: &mut Cx, first: usize, at_ingress: bool) {
        for m in cx.mirred.since_mut(first) {
            m.from_dev = self.name.clone();
            m.from_ingress = at_ingress;
        }
    }

    /// Packets a discipline asked to enqueue at the root (netem's duplicates, `rootq->enqueue`); their
    /// verdicts go nowhere, as the kernel ignores them.
    #[cold]
    #[inline(never)]
    fn enqueue_at_root(&mut self, cx: &mut Cx) {
        while let Some(mut list) = cx.to_root.take() {
            for mut p in list.drain(..) {
                p.enqueue_ns = cx.now;
                let _ = self.root.q.enqueue(p, cx);
            }
        }
    }

    /// Count the drops a call added to `cx.drops` (the rare path, kept out of the packet path's code).
    #[cold]
    #[inline(never)]
    fn count_drops(&mut self, cx: &Cx, first: usize) {
        self.count_dropped(&cx.drops[first..]);
    }

    /// A packet arrives on the device (`__netif_receive_skb` → `sch_handle_ingress`): the ingress qdisc's
    /// filters run, and the packet comes back unless an action dropped it (then it is in `cx.drops`) or
    /// stole it.
    pub fn receive(&mut self, pkt: Packet, cx: &mut Cx) -> Option<Packet> {
        let Some(ing) = self.ingress.as_mut() else {
            return Some(pkt);
        };
        let first = cx.drops.len();
        let sent = cx.mirred.len();
        cx.mirred.set_at_ingress(true);
        let v = ing.q.enqueue(pkt, cx);
        cx.mirred.set_at_ingress(false);
        if cx.drops.len() != first {
            self.count_drops(cx, first);
        }
        if cx.mirred.len() != sent {
            self.mirred_from(cx, sent, true);
        }
        match v {
            Verdict::Success => self.ingress.as_mut()?.q.dequeue(cx),
            _ => None,
        }
    }

    /// [`Device::receive`] of a packet in its box: without an ingress qdisc the box passes through as
    /// it came (a frame off the simulator's wire goes on up the stack without a copy).
    #[inline]
    pub fn receive_skb(&mut self, pkt: Box<Packet>, cx: &mut Cx) -> Option<Box<Packet>> {
        if self.ingress.is_none() {
            return Some(pkt);
        }
        let pkt = cx.skbs.unbox(pkt);
        let out = self.receive(pkt, cx)?;
        Some(cx.skbs.boxed(out))
    }

    pub fn ingress(&self) -> Option<&Sched> {
        self.ingress.as_ref()
    }

    /// Dequeue from the root when the link is free; a `None` with `cx.wake_at` set means "try again then".
    /// Packets a qdisc drops while dequeueing (an AQM, SFQ's rehash) are in `cx.drops`; they are not
    /// counted in `drop_counts` here, so that this stays a plain call on the packet path (checking the
    /// list after the call costs the simulator's benchmark ~0.5 % of its instructions). A driver that
    /// finds drops there passes them to [`Device::count_dropped`].
    pub fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let pkt = self.dequeue_skb(cx)?;
        Some(cx.skbs.unbox(pkt))
    }

    /// [`Device::dequeue`] giving the packet in its box ([`Qdisc::dequeue_skb`]). Inlined into the
    /// drivers' loop (`host::qdisc_run_in`): its own call was a tenth of an idle `kick`'s instructions.
    #[inline]
    pub fn dequeue_skb(&mut self, cx: &mut Cx) -> Option<Box<Packet>> {
        let mut out = self.root.q.dequeue_skb(cx);
        if let Some(p) = out.as_mut() {
            if let Some(len) = p.wire_len() {
                p.set_wire_len(None);
                p.len = len;
            }
        }
        out
    }

    /// Whether asking the root for a packet now would give nothing and change nothing: no packet of
    /// the last bulk left, and a root that says so ([`Qdisc::dequeue_idle`]).
    #[inline]
    pub fn dequeue_idle(&self) -> bool {
        self.bulk.is_empty() && self.root.q.dequeue_idle()
    }

    /// Whether `dequeue_skb` bulks with `try_bulk_dequeue_skb_slow`: a root that tc attached to a
    /// multiqueue device (more than one transmit queue; a veth has one per possible CPU unless `ip link
    /// add … numtxqueues` says otherwise) lacks `TCQ_F_ONETXQUEUE` (`qdisc_create`), so after each
    /// packet the tree is asked for up to 8 more — a throttled TBF counts one more overlimit per packet.
    /// mq's and mqprio's per-queue children have the flag, and a device without BQL (veth) has no room
    /// for the other bulk path (`qdisc_avail_bulklimit` is 0); a default root here stands for the mq
    /// the kernel attaches to a multiqueue NIC. Left out: taprio, whose software root bulks too but
    /// stops at a packet for another transmit queue (a traffic class's), which tclab does not track.
    #[inline]
    pub fn bulk_dequeue(&self) -> bool {
        self.txqueues > 1
            && self.root.handle != Handle::UNSPEC
            && !matches!(self.root.q.kind(), "mq" | "mqprio" | "taprio" | "noqueue")
    }

    /// Give the qdisc a request addressed (`parent`, `handle`: `tc qdisc … [handle H] parent P|root`)
    /// the size table it came with, or none (a change without `stab` removes it, as `qdisc_change`
    /// does), and tell the qdisc (`options_given`: the request made it or changed its options). The
    /// warning the qdisc leaves with its table, if any ([`Qdisc::root_stab`]).
    pub fn set_stab(
        &mut self,
        parent: Handle,
        handle: Handle,
        stab: Option<crate::stab::SizeTable>,
        options_given: bool,
    ) -> Option<Warning> {
        let target = if handle != Handle::UNSPEC && self.find(handle).is_some() {
            self.find_mut(handle)
        } else if parent == Handle::ROOT {
            Some(&mut self.root)
        } else if parent == Handle::INGRESS {
            self.ingress.as_mut()
        } else {
            self.find_mut(parent.qdisc())
                .and_then(|p| p.q.classes_mut())
                .and_then(|c| c.leaf_mut(parent))
        };
        let s = target?;
        let w =
            s.q.root_stab(stab.as_ref().map(|t| t.spec.overhead), options_given);
        s.stab = stab;
        w
    }

    /// The device goes down (`dev_close` → `dev_deactivate` → `dev_reset_queue`): `qdisc_reset` on
    /// the root and the ingress qdisc, each resetting its children, so that nothing queued is sent when
    /// the device comes up again. Not counted as drops (`qdisc_reset` counts none): `qlen` and
    /// `backlog` fall to 0, the cumulative counters (sent, dropped, overlimits) stay, and so does the
    /// configuration.
    pub fn reset_qdiscs(&mut self) {
        self.root.q.reset();
        if let Some(ing) = self.ingress.as_mut() {
            ing.q.reset();
        }
    }

    /// Count packets dropped during a dequeue in `drop_counts`.
    pub fn count_dropped(&mut self, drops: &[Dropped]) {
        for d in drops {
            self.drop_counts.add(d.reason);
        }
    }

    fn hash_bucket(h: Handle) -> usize {
        (h.0.wrapping_mul(0x61C8_8647) >> 28) as usize
    }

    fn hash_add(&mut self, h: Handle, parent: Handle) {
        if h != Handle::UNSPEC {
            self.qdisc_hash[Self::hash_bucket(h)].insert(0, (h, parent));
            self.parent_of.insert(h, parent);
        }
    }

    /// `qdisc_hash_add` of a default qdisc (handle 0) a multiqueue root keeps visible under `parent`.
    fn hash_add_hidden(&mut self, parent: Handle) {
        self.qdisc_hash[Self::hash_bucket(Handle::UNSPEC)].insert(0, (Handle::UNSPEC, parent));
    }

    fn hash_del(&mut self, h: Handle) {
        self.qdisc_hash[Self::hash_bucket(h)].retain(|x| x.0 != h);
        self.parent_of.remove(&h);
    }

    fn hash_del_tree(&mut self, s: &Sched) {
        let mut entries = Vec::new();
        // A default qdisc a multiqueue root kept visible goes with it.
        if s.handle == Handle::UNSPEC {
            entries.push((Handle::UNSPEC, s.parent));
        }
        collect_entries(s, &mut entries);
        for (h, parent) in entries {
            if h == Handle::UNSPEC {
                self.qdisc_hash[Self::hash_bucket(h)].retain(|x| *x != (h, parent));
            } else {
                self.hash_del(h);
            }
        }
    }

    /// The classids leading from the root to the qdisc `handle`, top first, from `parent_of`.
    fn path_to(&self, handle: Handle) -> Option<Vec<Handle>> {
        let mut path = Vec::new();
        let mut at = handle;
        while at != self.root.handle {
            // Trees are at most a few levels deep (HTB allows 8); a longer chain is a stale index.
            if path.len() > 64 {
                return None;
            }
            let parent = *self.parent_of.get(&at)?;
            path.push(parent);
            at = parent.qdisc();
        }
        path.reverse();
        Some(path)
    }

    fn follow(&self, path: &[Handle]) -> Option<&Sched> {
        let mut s = &self.root;
        for classid in path {
            s = s.q.classes()?.attached(*classid)?;
        }
        Some(s)
    }

    /// `qdisc_lookup`: the qdisc with this handle anywhere in the tree.
    pub fn find(&self, handle: Handle) -> Option<&Sched> {
        if let Some(ing) = self.ingress.as_ref() {
            if ing.handle == handle && handle != Handle::UNSPEC {
                return Some(ing);
            }
        }
        if handle == Handle::UNSPEC {
            // Invisible qdiscs (handle 0) are not indexed: the root default, or the first found.
            return find_in(&self.root, handle);
        }
        // Every visible qdisc is in the index.
        self.path_to(handle)
            .and_then(|p| self.follow(&p))
            .filter(|s| s.handle == handle)
    }

    pub fn find_mut(&mut self, handle: Handle) -> Option<&mut Sched> {
        if self.ingress.as_ref().is_some_and(|s| s.handle == handle) && handle != Handle::UNSPEC {
            return self.ingress.as_mut();
        }
        if handle == Handle::UNSPEC {
            return find_in_mut(&mut self.root, handle);
        }
        let path = self.path_to(handle)?;
        let mut s = &mut self.root;
        for classid in path {
            s = s.q.classes_mut()?.attached_mut(classid)?;
        }
        Some(s).filter(|s| s.handle == handle)
    }

    /// Every visible qdisc, in the order `tc qdisc show` prints them.
    pub fn qdiscs(&self) -> Vec<QdiscInfo> {
        self.listed()
            .into_iter()
            .map(|s| QdiscInfo {
                kind: s.q.kind(),
                handle: s.handle,
                parent: s.parent,
                options: s.q.dump(),
                stab: s.stab.as_ref().map(|t| t.spec),
                stats: s.stats(),
                xstats: s.q.xstats(),
                children_on_txqs: s.q.children_on_txqs(),
                on_txq: s.parent != Handle::ROOT
                    && s.parent != Handle::INGRESS
                    && self
                        .find(s.parent.qdisc())
                        .is_some_and(|p| p.q.children_on_txqs()),
            })
            .collect()
    }

    /// The qdiscs in `tc qdisc show` order.
    fn listed(&self) -> Vec<&Sched> {
        // A device that is down holds `noop_qdisc` (`dev_deactivate`), which `tc qdisc show` skips as a
        // built-in: its default root is not listed until it is up.
        let mut out = if !self.up && self.root.handle == Handle::UNSPEC {
            Vec::new()
        } else {
            vec![&self.root]
        };
        // Each entry is found under its parent class, as `find` would by the same path: the parent
        // qdisc is looked up once for a run of siblings (a LibreQoS policy lists 10 000 leaves of one
        // HTB), not once per qdisc with a path vector each.
        let mut parent_q: Option<(Handle, Option<&Sched>)> = None;
        let mut under = |q: Handle| -> Option<&Sched> {
            match parent_q {
                Some((h, s)) if h == q => s,
                _ => {
                    let s = if q == self.root.handle {
                        Some(&self.root)
                    } else {
                        self.path_to(q).and_then(|p| self.follow(&p))
                    };
                    parent_q = Some((q, s));
                    s
                }
            }
        };
        for &(h, parent) in self.qdisc_hash.iter().flatten() {
            if h == Handle::UNSPEC {
                let child = self
                    .find(parent.qdisc())
                    .and_then(|p| p.q.classes())
                    .and_then(|c| c.leaf(parent))
                    .filter(|c| c.handle == Handle::UNSPEC);
                if let Some(s) = child {
                    out.push(s);
                }
            } else if h != self.root.handle {
                let found = match self.ingress.as_ref() {
                    // `find` looks at the ingress qdisc first.
                    Some(ing) if ing.handle == h => Some(ing),
                    _ => self.parent_of.get(&h).and_then(|p| {
                        under(p.qdisc())
                            .and_then(|s| s.q.classes())
                            .and_then(|c| c.attached(*p))
                            .filter(|s| s.handle == h)
                    }),
                };
                if let Some(s) = found {
                    out.push(s);
                }
            }
        }
        // `tc_dump_qdisc` lists the ingress tree after the egress one.
        if let Some(s) = &self.ingress {
            out.push(s);
        }
        out
    }

    /// Every class of every classful qdisc, as `tc class show` walks them (by qdisc, then the qdisc's walk).
    pub fn classes(&self, now: Nanos) -> Vec<ClassInfo> {
        let mut out = Vec::new();
        for s in self.listed() {
            if let Some(c) = s.q.classes() {
                out.extend(c.walk(now));
            }
        }
        out
    }

    /// [`Device::classes`] one class at a time, in the same order, without a vector of them all.
    pub fn for_each_class(&self, now: Nanos, f: &mut dyn FnMut(&ClassInfo)) {
        for s in self.listed() {
            if let Some(c) = s.q.classes() {
                c.walk_each(now, f);
            }
        }
    }

    /// `classes` without the flow queues ([`ClassInfo::is_flow_queue`]), as a sampler follows them: the
    /// flow tables of sfq, fq_codel and cake are not walked (a thousand fq_codel leaves hold a million
    /// flow slots).
    pub fn classes_without_flows(&self, now: Nanos) -> Vec<ClassInfo> {
        let mut out = Vec::new();
        for s in self.listed() {
            if crate::qdisc::lists_flow_queues(s.q.kind()) {
                continue;
            }
            if let Some(c) = s.q.classes() {
                out.extend(c.walk(now).into_iter().filter(|c| !c.is_flow_queue()));
            }
        }
        out
    }
}

fn find_in(s: &Sched, handle: Handle) -> Option<&Sched> {
    if s.handle == handle {
        return Some(s);
    }
    s.q.classes()?
        .children()
        .into_iter()
        .find_map(|c| find_in(c, handle))
}

fn find_in_mut(s: &mut Sched, handle: Handle) -> Option<&mut Sched> {
    if s.handle == handle {
        return Some(s);
    }
    s.q.classes_mut()?
        .children_mut()
        .into_iter()
        .find_map(|c| find_in_mut(c, handle))
}

/// The `qdisc_hash` entries of a tree: its visible qdiscs, and the default children a multiqueue root
/// keeps visible.
fn collect_entries(s: &Sched, out: &mut Vec<(Handle, Handle)>) {
    if s.handle != Handle::UNSPEC {
        out.push((s.handle, s.parent));
    }
    if let Some(c) = s.q.classes() {
        for ch in c.children() {
            if ch.handle == Handle::UNSPEC && s.q.hashes_children() {
                out.push((Handle::UNSPEC, ch.parent));
            }
            collect_entries(ch, out);
        }
    }
}

/// Build a qdisc of the given options (`qdisc_create` → `ops->init`), through the registry of kinds.
pub fn create_qdisc(
    handle: Handle,
    opts: &QdiscOptions,
    env: &DevEnv,
    now: Nanos,
) -> Result<(Box<dyn Qdisc>, Vec<Warning>), KernelError> {
    let kind = crate::qdisc::kind(opts.kind())
        .ok_or_else(|| KernelError::msg(Errno::Invalid, "Unknown qdisc kind"))?;
    (kind.create)(handle, opts, env, now)
}

/// `qdisc_alloc_handle`: automatic handles count from 8001: upwards, skipping those in use.
fn alloc_handle(counter: &mut u32, dev: &Device) -> Result<Handle, KernelError> {
    for _ in 0..0x8000 {
        *counter = counter.wrapping_add(0x10000);
        if *counter == 0xffff_0000 || *counter < 0x8000_0000 {
            *counter = 0x8001_0000;
        }
        if dev.find(Handle(*counter)).is_none() {
            return Ok(Handle(*counter));
        }
    }
    Err(KernelError::msg(
        Errno::NoBuffers,
        "Unable to allocate qdisc handle",
    ))
}

/// A qdisc tree is going away: its filters let go of their actions.
fn release_tree(s: &mut Sched, actions: &mut ActionTable) {
    for b in s.q.blocks_mut() {
        b.destroy(actions);
    }
    if let Some(c) = s.q.classes_mut() {
        for ch in c.children_mut() {
            release_tree(ch, actions);
        }
    }
}

/// A device's number in its engine: fixed while the device exists and never given to another, so that
/// a driver can hold it instead of looking the name up on every packet.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct DevId(u32);

/// A device of `slots` by name (a free function, so that a caller can hold it beside the engine's
/// other fields).
fn slot_mut<'a>(
    slots: &'a mut [Option<Device>],
    by_name: &BTreeMap<String, DevId>,
    name: &str,
) -> Option<&'a mut Device> {
    let id = by_name.get(name)?;
    slots.get_mut(id.0 as usize)?.as_mut()
}

#[derive(Default)]
pub struct Engine {
    /// Every device, by [`DevId`]; a removed device leaves its slot empty (ids are never reused).
    slots: Vec<Option<Device>>,
    /// The devices' ids by name, in name order (the order every listing follows).
    by_name: BTreeMap<String, DevId>,
    /// The host's netfilter state (mangle table, conntrack), which `tclab iptables` configures and the
    /// simulator runs at its hooks.
    netfilter: crate::netfilter::Netfilter,
    /// The action tables (`tc actions …`), shared by every device as in one network namespace; changed
    /// only through the engine, which keeps mirred targets current.
    actions: ActionTable,
    /// `qdisc_alloc_handle`'s counter: automatic handles count down from 8001:.
    autohandle: u32,
    /// The teql master's ring and counters, once the module is "loaded" (the master device `teql0`
    /// made by the first command that names it).
    teql: Option<TeqlMaster>,
    /// The realms `ip route … realm` gave the host's routes (a driver attaches them to packets).
    fib: crate::fib::Fib,
}

/// What `teql_qdisc_init` and `teql_master_open` read of a device: `IFF_BROADCAST` unless it is an
/// IP tunnel or wireguard; an ifb (and a dummy, which tclab does not tell from a veth) lacks
/// `IFF_MULTICAST`; the master is never multicast (`teql_master_setup` sets only `IFF_NOARP`), and
/// broadcast as its slaves make it ([`TeqlMaster::broadcast`]).
fn link_facts(d: &Device) -> LinkFacts {
    LinkFacts {
        mtu: d.mtu,
        hard_header_len: d.hard_header_len,
        broadcast: d.broadcast,
        multicast: d.kind == DevKind::Plain,
        up: d.up,
    }
}

/// `dev_validate_mtu`: within the device's `min_mtu` and `max_mtu` (a bound of 0 is none), checked
/// before the driver's own `ndo_change_mtu`.
pub fn check_mtu(d: &Device, mtu: u32) -> Result<(), KernelError> {
    if mtu < d.min_mtu {
        return Err(KernelError::invalid("mtu less than device minimum"));
    }
    if d.max_mtu > 0 && mtu > d.max_mtu {
        return Err(KernelError::invalid("mtu greater than device maximum"));
    }
    Ok(())
}

fn no_device() -> KernelError {
    KernelError::new(Errno::NoDevice)
}

/// What a snapshot holds of an engine ([`crate::snapshot`]): the action tables (first: the filters'
/// actions are found in them), its devices (ids kept), the automatic handle counter, the routes'
/// realms, the mangle table with its counters and whether conntrack's hooks are registered, and the
/// teql master's ring and counters if it is loaded; conntrack must hold no connection.
#[derive(serde::Serialize, serde::Deserialize)]
struct EngineState<A, D, F, M, T> {
    actions: A,
    slots: Vec<Option<D>>,
    by_name: BTreeMap<String, DevId>,
    autohandle: u32,
    fib: F,
    mangle: M,
    ct_hooks: bool,
    teql: Option<T>,
}

impl Engine {
    pub fn new() -> Engine {
        Engine::default()
    }

    /// The engine's state as bytes ([`Engine::from_snapshot`] rebuilds it), or what has no snapshot
    /// form ([`crate::snapshot`]).
    pub fn snapshot(&self) -> Result<Vec<u8>, crate::snapshot::NoSnapshot> {
        use crate::snapshot::NoSnapshot;
        let nf = &self.netfilter;
        if !nf.conntrack.is_empty() {
            return Err(NoSnapshot("conntrack entries".into()));
        }
        crate::snapshot::encode(&EngineState {
            actions: &self.actions,
            slots: self.slots.iter().map(Option::as_ref).collect(),
            by_name: self.by_name.clone(),
            autohandle: self.autohandle,
            fib: &self.fib,
            mangle: &nf.mangle,
            ct_hooks: nf.ct_hooks,
            teql: self.teql.as_ref(),
        })
    }

    /// The engine [`Engine::snapshot`] saved.
    pub fn from_snapshot(bytes: &[u8]) -> Result<Engine, String> {
        type Saved =
            EngineState<ActionTable, Device, crate::fib::Fib, crate::netfilter::Table, TeqlMaster>;
        let s: Result<Saved, String> = crate::snapshot::decode(bytes);
        ActionTable::finish_decoding();
        let s = s?;
        // Names and ids must agree, as every other way of making devices keeps them.
        for (name, id) in &s.by_name {
            match s.slots.get(id.0 as usize) {
                Some(Some(d)) if d.name == *name => {}
                _ => return Err(format!("device {name}: no such slot")),
            }
        }
        if s.slots.iter().flatten().count() != s.by_name.len() {
            return Err("a device without a name".into());
        }
        // Every field named: one added to the engine must be saved or said why not.
        Ok(Engine {
            actions: s.actions,
            slots: s.slots,
            by_name: s.by_name,
            autohandle: s.autohandle,
            fib: s.fib,
            netfilter: crate::netfilter::Netfilter {
                mangle: s.mangle,
                ct_hooks: s.ct_hooks,
                ..Default::default()
            },
            teql: s.teql,
        })
    }

    /// Seed every random choice the policy makes — SFQ's perturbation secrets, the flow classifier's
    /// `hashrnd` — from one run seed, each qdisc and filter from its own sub-seed (device name and handle
    /// mixed in), so that a simulation is reproducible and another seed perturbs differently. The kernel
    /// draws these from `get_random_bytes`.
    pub fn seed_random(&mut self, seed: u64) {
        fn mix(seed: u64, dev: &str, handle: u32) -> u64 {
            // FNV-1a over the device name, then the handle, then the seed.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in dev.bytes().chain(handle.to_le_bytes()) {
                h ^= b as u64;
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
            h ^ seed.rotate_left(29)
        }
        fn walk(s: &mut Sched, seed: u64, dev: &str) {
            let sub = mix(seed, dev, s.handle.0);
            s.q.set_seed(sub);
            for block in s.q.blocks_mut() {
                for tps in block.chains.values_mut() {
                    for tp in tps.iter_mut() {
                        if let crate::filter::Classifier::Flow(head) = &mut tp.cls {
                            head.set_seed(sub ^ ((tp.prio as u64) << 16));
                        }
                    }
                }
            }
            if let Some(c) = s.q.classes_mut() {
                for child in c.children_mut() {
                    walk(child, seed, dev);
                }
            }
        }
        for (name, id) in &self.by_name {
            let Some(dev) = self.slots[id.0 as usize].as_mut() else {
                continue;
            };
            walk(&mut dev.root, seed, name);
            if let Some(ing) = dev.ingress.as_mut() {
                walk(ing, seed, name);
            }
        }
    }

    pub fn device(&self, name: &str) -> Option<&Device> {
        let id = self.by_name.get(name)?;
        self.slots[id.0 as usize].as_ref()
    }

    pub fn device_mut(&mut self, name: &str) -> Option<&mut Device> {
        slot_mut(&mut self.slots, &self.by_name, name)
    }

    /// The netfilter state (its mangle table, conntrack).
    pub fn netfilter(&self) -> &crate::netfilter::Netfilter {
        &self.netfilter
    }

    /// The netfilter state, to change its rules (`tclab iptables`) or run its hooks (the simulator).
    pub fn netfilter_mut(&mut self) -> &mut crate::netfilter::Netfilter {
        &mut self.netfilter
    }

    /// The realms of the host's routes.
    pub fn fib(&self) -> &crate::fib::Fib {
        &self.fib
    }

    pub fn fib_mut(&mut self) -> &mut crate::fib::Fib {
        &mut self.fib
    }

    /// The standalone action tables (`tc actions list|get`).
    pub fn actions(&self) -> &ActionTable {
        &self.actions
    }

    /// `tc actions add|replace|change`: create or replace actions, mirred targets looked up at once.
    pub fn add_actions(
        &mut self,
        specs: &[crate::action::ActionSpec],
        replace: bool,
        now: Nanos,
    ) -> Result<(), KernelError> {
        self.actions.instantiate(specs, false, replace, now)?;
        self.refresh_mirred();
        Ok(())
    }

    /// `tc actions delete`.
    pub fn delete_action(&mut self, kind: &str, index: u32) -> Result<(), KernelError> {
        self.actions.delete(kind, index)
    }

    /// `tc actions flush`: how many went, and the error that stopped it, if one did.
    pub fn flush_actions(&mut self, kind: &str) -> (u32, Option<KernelError>) {
        self.actions.flush(kind)
    }

    /// The id of the device named `name`.
    pub fn device_id(&self, name: &str) -> Option<DevId> {
        self.by_name.get(name).copied()
    }

    /// The interface index of the device named `name` as filters key on it (`ifindex`): its id + 1, the
    /// number flower's `indev` matches and route's `fromif` builds its handle from.
    pub fn ifindex(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).map(|id| id.0 + 1)
    }

    /// The device with this id, if it still exists.
    pub fn device_by_id(&self, id: DevId) -> Option<&Device> {
        self.slots.get(id.0 as usize)?.as_ref()
    }

    pub fn device_by_id_mut(&mut self, id: DevId) -> Option<&mut Device> {
        self.slots.get_mut(id.0 as usize)?.as_mut()
    }

    /// Every device with its name, in name order.
    pub fn devices(&self) -> impl Iterator<Item = (&str, &Device)> + '_ {
        self.by_name
            .iter()
            .filter_map(|(n, id)| Some((n.as_str(), self.slots[id.0 as usize].as_ref()?)))
    }

    /// The devices' names, in name order.
    pub fn device_names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }

    /// Add `dev` under its name; `Exists` (RTNETLINK's `File exists`) if the name is taken.
    pub fn create_device(&mut self, dev: Device) -> Result<DevId, KernelError> {
        if self.by_name.contains_key(&dev.name) {
            return Err(KernelError::new(Errno::Exists));
        }
        let id = DevId(self.slots.len() as u32);
        self.by_name.insert(dev.name.clone(), id);
        self.slots.push(Some(dev));
        self.refresh_mirred();
        Ok(id)
    }

    /// Remove every device not named in `keep` (a refused command takes back the devices it created).
    pub fn keep_only_devices(&mut self, keep: &[String]) {
        let gone: Vec<String> = self
            .by_name
            .keys()
            .filter(|n| !keep.contains(n))
            .cloned()
            .collect();
        for n in gone {
            self.remove_device(&n);
        }
    }

    /// `qdisc_alloc_handle`'s counter, which only history determines: the policy store keeps it when it
    /// compacts its journal.
    pub fn autohandle(&self) -> u32 {
        self.autohandle
    }
    pub fn set_autohandle(&mut self, counter: u32) {
        self.autohandle = counter;
    }

    /// The device named `name`, created (a veth-like device with `noqueue` as its root) if missing;
    /// `teql0` is the teql master, which naming loads ([`Engine::load_teql`]).
    pub fn add_device(&mut self, name: &str, mtu: u32, txqueuelen: u32) -> &mut Device {
        if name == crate::qdisc::teql::MASTER {
            self.load_teql();
        }
        let id = match self.by_name.get(name) {
            Some(id) => *id,
            None => {
                let id = DevId(self.slots.len() as u32);
                self.by_name.insert(name.to_string(), id);
                self.slots.push(Some(Device::new(name, mtu, txqueuelen)));
                id
            }
        };
        self.slots[id.0 as usize]
            .as_mut()
            .expect("a named device has a slot")
    }

    /// Does a device of this name exist? `lo` always does, as in every network namespace (tclab keeps
    /// no qdiscs for it).
    pub fn has_device(&self, name: &str) -> bool {
        name == "lo" || self.by_name.contains_key(name)
    }

    /// Remove a device (`ip link del`): its qdiscs and filters let go of their actions, and the mirred
    /// actions that sent to it find it gone.
    pub fn remove_device(&mut self, name: &str) -> Option<Device> {
        let id = *self.by_name.get(name)?;
        if self.device(name)?.kind == DevKind::TeqlMaster {
            self.teql = None;
        } else if self.device(name)?.root.q.kind() == crate::qdisc::teql::MASTER {
            self.teql_detach(id, false);
        }
        self.by_name.remove(name);
        let mut d = self.slots[id.0 as usize].take()?;
        release_tree(&mut d.root, &mut self.actions);
        if let Some(ing) = d.ingress.as_mut() {
            release_tree(ing, &mut self.actions);
        }
        self.refresh_mirred();
        Some(d)
    }

    /// Bring a device up or down (`ip link set dev DEV up|down`). Going down purges its queues
    /// ([`Device::reset_qdiscs`]), as `dev_close` does.
    pub fn set_up(&mut self, name: &str, up: bool) -> bool {
        let Some(d) = self.device_mut(name) else {
            return false;
        };
        if d.up && !up {
            d.reset_qdiscs();
        }
        d.up = up;
        self.refresh_mirred();
        true
    }

    /// Load teql (`modprobe sch_teql`): the master device `teql0`, down, with no slaves. Nothing if it
    /// is loaded; nothing either if another device has the name (the module's `register_netdev`
    /// fails, so the kind stays unknown).
    pub fn load_teql(&mut self) {
        if self.teql.is_some() || self.by_name.contains_key(crate::qdisc::teql::MASTER) {
            return;
        }
        if self.create_device(Device::teql_master()).is_ok() {
            self.teql = Some(TeqlMaster::default());
        }
    }

    /// The teql master's ring and counters, if teql is loaded.
    pub fn teql(&self) -> Option<&TeqlMaster> {
        self.teql.as_ref()
    }

    /// The teql master device and its ring together, for a driver's transmit path.
    pub fn teql_parts(&mut self) -> Option<(&mut Device, &mut TeqlMaster)> {
        let master = self.teql.as_mut()?;
        let dev = slot_mut(&mut self.slots, &self.by_name, crate::qdisc::teql::MASTER)?;
        Some((dev, master))
    }

    /// The device of an interface index ([`Engine::ifindex`]).
    pub fn device_by_ifindex(&self, ifindex: u32) -> Option<&Device> {
        self.device_by_id(DevId(ifindex.checked_sub(1)?))
    }

    /// `teql_qdisc_init`'s checks of a `teql0` qdisc on `dev_name` under `parent`.
    fn teql_check(&self, dev_name: &str, parent: Handle) -> Result<(), KernelError> {
        let (Some(m), Some(master)) = (self.teql.as_ref(), self.device(crate::qdisc::teql::MASTER))
        else {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified qdisc kind is unknown",
            ));
        };
        let dev = self.device(dev_name).ok_or_else(no_device)?;
        m.check_slave(
            &LinkFacts {
                multicast: false,
                broadcast: m.broadcast,
                ..link_facts(master)
            },
            &link_facts(dev),
            dev.kind == DevKind::TeqlMaster,
            parent == Handle::ROOT,
        )
    }

    /// `teql_qdisc_init` having passed: the device joins the ring; the master, unless it is up, takes
    /// the smallest MTU (the first slave's outright).
    fn teql_attach(&mut self, id: DevId) {
        let Some((mtu, broadcast)) = self.device_by_id(id).map(|d| (d.mtu, d.broadcast)) else {
            return;
        };
        let up = self
            .device(crate::qdisc::teql::MASTER)
            .is_some_and(|d| d.up);
        let Some(m) = self.teql.as_mut() else { return };
        let first = m.slaves().is_empty();
        // The master's IFF_BROADCAST: the first slave's, then cleared by one without it while down.
        if first {
            m.broadcast = broadcast;
        } else if !up {
            m.broadcast &= broadcast;
        }
        m.attach(id.0 + 1);
        if let Some(master) = slot_mut(&mut self.slots, &self.by_name, crate::qdisc::teql::MASTER) {
            if first {
                master.mtu = mtu;
            } else if !master.up {
                master.mtu = master.mtu.min(mtu);
            }
        }
    }

    /// `teql_destroy`: the device leaves the ring; the last one leaving resets the master's queue.
    fn teql_detach(&mut self, id: DevId, newest_stays: bool) {
        let Some(m) = self.teql.as_mut() else { return };
        if m.detach(id.0 + 1, newest_stays) {
            if let Some(master) =
                slot_mut(&mut self.slots, &self.by_name, crate::qdisc::teql::MASTER)
            {
                master.reset_qdiscs();
            }
        }
    }

    /// `ip link set dev DEV up`: [`Engine::set_up`], after `teql_master_open`'s checks for the teql
    /// master — it needs a slave (EUNATCH) — which then takes the smallest MTU of its slaves.
    pub fn open(&mut self, name: &str) -> Result<(), KernelError> {
        let d = self.device(name).ok_or_else(no_device)?;
        if d.kind == DevKind::TeqlMaster && !d.up {
            let slaves = self.teql.as_ref().map(|m| m.slaves()).unwrap_or_default();
            if slaves.is_empty() {
                return Err(KernelError::new(Errno::Unattached));
            }
            let (mut mtu, mut broadcast) = (0xFFFE, true);
            for s in slaves {
                let s = self.device_by_ifindex(s).ok_or_else(no_device)?;
                if s.hard_header_len > crate::qdisc::teql::LL_MAX_HEADER {
                    return Err(KernelError::new(Errno::Invalid));
                }
                mtu = mtu.min(s.mtu);
                broadcast &= s.broadcast;
            }
            if let Some(d) = self.device_mut(name) {
                d.mtu = mtu;
            }
            if let Some(m) = self.teql.as_mut() {
                m.broadcast = broadcast;
            }
        }
        self.set_up(name, true);
        Ok(())
    }

    /// `ip link set dev DEV mtu N`: within the device's bounds ([`check_mtu`]), and the teql master
    /// refuses more than a slave's MTU (`teql_master_mtu`).
    pub fn set_mtu(&mut self, name: &str, mtu: u32) -> Result<(), KernelError> {
        let d = self.device(name).ok_or_else(no_device)?;
        check_mtu(d, mtu)?;
        if d.kind == DevKind::TeqlMaster {
            let slaves = self.teql.as_ref().map(|m| m.slaves()).unwrap_or_default();
            let too_big = slaves
                .iter()
                .filter_map(|&s| self.device_by_ifindex(s))
                .any(|s| mtu > s.mtu);
            if too_big {
                return Err(KernelError::new(Errno::Invalid));
            }
        }
        if let Some(d) = self.device_mut(name) {
            d.mtu = mtu;
        }
        Ok(())
    }

    /// Tell every mirred action whether its target is up, down or gone (the kernel's actions hold the
    /// device itself and read its flags; a notifier clears them when it is unregistered).
    pub fn refresh_mirred(&mut self) {
        use crate::action::mirred::Target;
        use crate::action::ActionParams;
        for a in self.actions.list("mirred") {
            let mut a = a.borrow_mut();
            if let ActionParams::Mirred(m) = &mut a.params {
                if m.target == Target::Gone {
                    continue;
                }
                let id = self.by_name.get(&m.dev);
                m.target = match id.and_then(|id| self.slots[id.0 as usize].as_ref()) {
                    Some(d) if d.up => Target::Up,
                    Some(_) => Target::Down,
                    None if m.dev == "lo" => Target::Up,
                    None => Target::Gone,
                };
            }
        }
    }

    /// `tc qdisc add|change|replace|link`: `tc_modify_qdisc`.
    pub fn modify_qdisc(
        &mut self,
        dev_name: &str,
        parent: Handle,
        handle: Handle,
        opts: Option<&QdiscOptions>,
        flags: Flags,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let kind = opts.map(|o| o.kind());
        if kind == Some(crate::qdisc::teql::MASTER) {
            self.load_teql();
        }
        let dev = self.device(dev_name).ok_or_else(no_device)?;
        let ingress_handle = Handle::new(0xffff, 0);
        if parent == Handle::INGRESS
            || (parent == Handle::UNSPEC
                && (kind == Some("ingress")
                    || kind == Some("clsact")
                    || (handle == ingress_handle && dev.ingress.is_some())))
        {
            return self.modify_ingress(dev_name, handle, opts, flags);
        }
        // The qdisc currently at `parent` (None for a default or an empty slot).
        let mut target: Option<Handle> = None;
        if parent != Handle::UNSPEC {
            let at: Option<&Sched> = if parent == Handle::ROOT {
                Some(dev.root())
            } else if parent == Handle::INGRESS {
                return Err(KernelError::msg(
                    Errno::NoEntry,
                    "Cannot find ingress queue for specified device",
                ));
            } else {
                let p = dev.find(parent.qdisc()).ok_or_else(|| {
                    KernelError::msg(Errno::NoEntry, "Failed to find specified qdisc")
                })?;
                let cl = p.q.classes().ok_or_else(|| {
                    KernelError::msg(Errno::NotSupported, "Parent qdisc is not classful")
                })?;
                if !cl.find(parent) {
                    return Err(KernelError::msg(
                        Errno::NoEntry,
                        "Specified class not found",
                    ));
                }
                cl.leaf(parent)
            };
            let q = at.filter(|s| s.handle != Handle::UNSPEC);
            let names_it = matches!(q, Some(q) if handle != Handle::UNSPEC && q.handle == handle);
            if !names_it {
                if handle != Handle::UNSPEC {
                    if q.is_some() && !flags.replace {
                        return Err(KernelError::msg(
                            Errno::Exists,
                            "NLM_F_REPLACE needed to override",
                        ));
                    }
                    if handle.minor() != 0 {
                        return Err(KernelError::invalid("Invalid minor handle"));
                    }
                    let Some(existing) = dev.find(handle) else {
                        return self.create_and_graft(dev_name, parent, handle, opts, flags, now);
                    };
                    if existing.parent != parent {
                        return Err(KernelError::invalid(
                            "Cannot move an existing qdisc to a different parent",
                        ));
                    }
                    if flags.excl {
                        return Err(KernelError::msg(
                            Errno::Exists,
                            "Exclusivity flag on, cannot override",
                        ));
                    }
                    if kind.is_some_and(|k| k != existing.q.kind()) {
                        return Err(KernelError::invalid(QDISC_KIND_MISMATCH));
                    }
                    // The qdisc is attached under `parent` but is not its leaf: an inner HFSC class
                    // keeps its old leaf qdisc, and grafting it back is what `hfsc_graft` refuses.
                    return Err(KernelError::new(Errno::Invalid));
                }
                let Some(cur) = q else {
                    return self.create_and_graft(dev_name, parent, handle, opts, flags, now);
                };
                if kind.is_some_and(|k| k != cur.q.kind()) {
                    if flags.create && (flags.replace || flags.excl) {
                        return self.create_and_graft(dev_name, parent, handle, opts, flags, now);
                    }
                    if flags == Flags::CHANGE {
                        return self.create_and_graft(
                            dev_name,
                            parent,
                            handle,
                            opts,
                            Flags::REPLACE,
                            now,
                        );
                    }
                }
            }
            target = q.map(|q| q.handle);
        } else {
            if handle == Handle::UNSPEC {
                return Err(KernelError::invalid("Handle cannot be zero"));
            }
            if dev.find(handle).is_some() {
                target = Some(handle);
            }
        }
        let Some(target) = target else {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified qdisc not found",
            ));
        };
        if flags.excl {
            return Err(KernelError::msg(
                Errno::Exists,
                "Exclusivity flag on, cannot modify",
            ));
        }
        let env = dev.env();
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let s = dev
            .find_mut(target)
            .ok_or_else(|| KernelError::msg(Errno::NoEntry, "Specified qdisc not found"))?;
        match opts {
            Some(o) if o.kind() != s.q.kind() => Err(KernelError::invalid(QDISC_KIND_MISMATCH)),
            Some(QdiscOptions::PfifoFast) | None => Ok(Vec::new()),
            Some(o) => s.q.change(o, &env, now),
        }
    }

    /// `tc qdisc add|change|replace dev DEV ingress`: the ingress slot holds one qdisc, `ffff:`.
    fn modify_ingress(
        &mut self,
        dev_name: &str,
        handle: Handle,
        opts: Option<&QdiscOptions>,
        flags: Flags,
    ) -> Result<Vec<Warning>, KernelError> {
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let kind = opts.map_or("ingress", |o| o.kind());
        if kind != "ingress" && kind != "clsact" {
            return Err(KernelError::invalid(
                "Specified parent ID is reserved for ingress and clsact Qdiscs",
            ));
        }
        if let Some(cur) = &dev.ingress {
            // Ingress and clsact both have handle ffff:, so tc_modify_qdisc goes straight to "change the
            // qdisc there": exclusivity first, then the kind must match.
            if flags.excl {
                return Err(KernelError::msg(
                    Errno::Exists,
                    "Exclusivity flag on, cannot modify",
                ));
            }
            if opts.is_some() && cur.q.kind() != kind {
                return Err(KernelError::invalid(QDISC_KIND_MISMATCH));
            }
            return Ok(Vec::new());
        }
        if !flags.create {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Qdisc not found. To create specify NLM_F_CREATE flag",
            ));
        }
        let handle = if handle == Handle::UNSPEC {
            Handle::new(0xffff, 0)
        } else {
            handle
        };
        let q: Box<dyn Qdisc> = if kind == "clsact" {
            Box::new(crate::qdisc::ingress::Ingress::clsact())
        } else {
            Box::new(crate::qdisc::ingress::Ingress::default())
        };
        dev.ingress = Some(Sched::new(handle, Handle::INGRESS, q));
        Ok(Vec::new())
    }

    fn create_and_graft(
        &mut self,
        dev_name: &str,
        parent: Handle,
        handle: Handle,
        opts: Option<&QdiscOptions>,
        flags: Flags,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        if !flags.create {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Qdisc not found. To create specify NLM_F_CREATE flag",
            ));
        }
        let opts = opts.ok_or_else(|| KernelError::msg(Errno::Invalid, "Qdisc kind required"))?;
        let handle = if handle == Handle::UNSPEC {
            let mut auto = self.autohandle;
            let dev = self.device(dev_name).ok_or_else(no_device)?;
            let h = alloc_handle(&mut auto, dev)?;
            self.autohandle = auto;
            h
        } else {
            handle
        };
        let teql = opts.kind() == crate::qdisc::teql::MASTER;
        if teql {
            self.teql_check(dev_name, parent)?;
        }
        let id = self.device_id(dev_name).ok_or_else(no_device)?;
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let env = dev.env();
        // `mq_init`, `mqprio_init`, `taprio_init`: only as the root.
        if matches!(opts.kind(), "mq" | "mqprio") && parent != Handle::ROOT {
            return Err(KernelError::new(Errno::NotSupported));
        }
        if opts.kind() == "taprio" && parent != Handle::ROOT {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "sch_taprio: Can only be attached as root qdisc",
            ));
        }
        let (q, warnings) = create_qdisc(handle, opts, &env, now)?;
        let new = Sched::new(handle, parent, q);
        let old = if parent == Handle::ROOT {
            Some(std::mem::replace(&mut dev.root, new))
        } else {
            let p = dev.find_mut(parent.qdisc()).ok_or_else(|| {
                KernelError::msg(Errno::NoEntry, "Failed to find specified qdisc")
            })?;
            let cl = p.q.classes_mut().ok_or_else(|| {
                KernelError::msg(Errno::NotSupported, "Parent qdisc is not classful")
            })?;
            cl.graft(parent, Some(new), &env)?
        };
        let old_teql = old
            .as_ref()
            .is_some_and(|o| o.q.kind() == crate::qdisc::teql::MASTER);
        if let Some(mut old) = old {
            dev.hash_del_tree(&old);
            release_tree(&mut old, &mut self.actions);
        }
        dev.hash_add(handle, parent);
        // qdisc_create (`teql_qdisc_init`) before qdisc_graft destroys the old one (`teql_destroy`).
        if teql {
            self.teql_attach(id);
        }
        if old_teql {
            self.teql_detach(id, teql);
        }
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        if let Some(new) = dev.find(handle).filter(|s| s.q.hashes_children()) {
            let hidden: Vec<Handle> = new
                .q
                .classes()
                .map(|c| {
                    c.children()
                        .iter()
                        .filter(|ch| ch.handle == Handle::UNSPEC)
                        .map(|ch| ch.parent)
                        .collect()
                })
                .unwrap_or_default();
            for p in hidden {
                dev.hash_add_hidden(p);
            }
        }
        Ok(warnings)
    }

    /// `tc qdisc del`: `tc_get_qdisc` with RTM_DELQDISC.
    pub fn delete_qdisc(
        &mut self,
        dev_name: &str,
        parent: Handle,
        handle: Handle,
        kind: Option<&str>,
    ) -> Result<(), KernelError> {
        let dev = self.device(dev_name).ok_or_else(no_device)?;
        if parent == Handle::INGRESS
            || (parent == Handle::UNSPEC
                && dev.ingress.as_ref().is_some_and(|i| i.handle == handle))
        {
            let ing = dev.ingress.as_ref().ok_or_else(|| {
                KernelError::msg(
                    Errno::NoEntry,
                    "Cannot find specified qdisc on specified device",
                )
            })?;
            if handle != Handle::UNSPEC && ing.handle != handle {
                return Err(KernelError::invalid("Invalid handle"));
            }
            if kind.is_some_and(|k| k != ing.q.kind()) {
                return Err(KernelError::invalid(QDISC_KIND_MISMATCH));
            }
            let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
            if let Some(mut old) = dev.ingress.take() {
                release_tree(&mut old, &mut self.actions);
            }
            return Ok(());
        }
        let q = if parent != Handle::UNSPEC {
            let q = if parent == Handle::ROOT {
                Some(dev.root())
            } else if parent.major() == 0xffff {
                None
            } else {
                let p = dev.find(parent.qdisc()).ok_or_else(|| {
                    KernelError::msg(
                        Errno::NoEntry,
                        "Failed to find qdisc with specified classid",
                    )
                })?;
                let cl = p.q.classes().ok_or_else(|| {
                    KernelError::msg(Errno::NotSupported, "Parent qdisc is not classful")
                })?;
                if !cl.find(parent) {
                    return Err(KernelError::msg(
                        Errno::NoEntry,
                        "Specified class not found",
                    ));
                }
                cl.leaf(parent)
            };
            let q = q.ok_or_else(|| {
                KernelError::msg(
                    Errno::NoEntry,
                    "Cannot find specified qdisc on specified device",
                )
            })?;
            if handle != Handle::UNSPEC && q.handle != handle {
                return Err(KernelError::invalid("Invalid handle"));
            }
            q
        } else {
            dev.find(handle).ok_or_else(|| {
                KernelError::msg(Errno::NoEntry, "Failed to find qdisc with specified handle")
            })?
        };
        if kind.is_some_and(|k| k != q.q.kind()) {
            return Err(KernelError::invalid(QDISC_KIND_MISMATCH));
        }
        if parent == Handle::UNSPEC {
            return Err(KernelError::invalid("Classid cannot be zero"));
        }
        if q.handle == Handle::UNSPEC {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Cannot delete qdisc with handle of zero",
            ));
        }
        let id = self.device_id(dev_name).ok_or_else(no_device)?;
        if q.q.kind() == crate::qdisc::teql::MASTER {
            self.teql_detach(id, false);
        }
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let env = dev.env();
        let old = if parent == Handle::ROOT {
            let d = dev.default_root();
            Some(std::mem::replace(&mut dev.root, d))
        } else {
            let p = dev
                .find_mut(parent.qdisc())
                .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
            p.q.classes_mut()
                .ok_or_else(|| KernelError::new(Errno::NotSupported))?
                .graft(parent, None, &env)?
        };
        if let Some(mut old) = old {
            dev.hash_del_tree(&old);
            release_tree(&mut old, &mut self.actions);
        }
        Ok(())
    }

    /// Resolve the qdisc a class request addresses (`tc_ctl_tclass`, step 1) and the full classid.
    fn class_target(
        dev: &Device,
        parent: Handle,
        classid: Handle,
    ) -> Result<(Handle, Handle, Handle), KernelError> {
        let mut qid = classid.qdisc();
        let mut portid = parent;
        if parent != Handle::ROOT {
            let qid1 = parent.qdisc();
            if qid.0 != 0 && qid1.0 != 0 {
                if qid != qid1 {
                    return Err(KernelError::new(Errno::Invalid));
                }
            } else if qid1.0 != 0 {
                qid = qid1;
            } else if qid.0 == 0 {
                qid = dev.root().handle;
            }
            if portid.0 != 0 {
                portid = Handle(qid.0 | (portid.0 & 0xffff));
            }
        } else if qid.0 == 0 {
            qid = dev.root().handle;
        }
        let clid = if classid.0 == 0 {
            if portid == Handle::ROOT {
                qid
            } else {
                Handle::UNSPEC
            }
        } else {
            Handle(qid.0 | (classid.0 & 0xffff))
        };
        Ok((qid, portid, clid))
    }

    /// `tc class add|change|replace`.
    pub fn modify_class(
        &mut self,
        dev_name: &str,
        parent: Handle,
        classid: Handle,
        opts: &ClassOptions,
        flags: Flags,
        now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let env = dev.env();
        let (qid, portid, clid) = Self::class_target(dev, parent, classid)?;
        let q = dev
            .find_mut(qid)
            .filter(|_| qid.0 != 0)
            .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
        let kind = q.q.kind();
        // tc_ctl_tclass refuses a qdisc without class operations with a bare EINVAL: no extack message
        // (cls_api's "Qdisc not classful" is the filters').
        let cl =
            q.q.classes_mut()
                .ok_or_else(|| KernelError::new(Errno::Invalid))?;
        let exists = clid.0 != 0 && cl.find(clid);
        if !exists && !flags.create {
            return Err(KernelError::new(Errno::NoEntry));
        }
        if exists && flags.excl {
            return Err(KernelError::new(Errno::Exists));
        }
        // Each discipline's change_class refuses options of another kind (EINVAL) or has no class
        // change at all (EOPNOTSUPP, e.g. prio).
        let _ = kind;
        cl.change_class(clid, portid, opts, &env, now)
    }

    /// `tc class del`.
    pub fn delete_class(
        &mut self,
        dev_name: &str,
        parent: Handle,
        classid: Handle,
    ) -> Result<(), KernelError> {
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let (qid, _portid, clid) = Self::class_target(dev, parent, classid)?;
        let q = dev
            .find_mut(qid)
            .filter(|_| qid.0 != 0)
            .ok_or_else(|| KernelError::new(Errno::NoEntry))?;
        let cl =
            q.q.classes_mut()
                .ok_or_else(|| KernelError::new(Errno::Invalid))?;
        if clid.0 == 0 || !cl.find(clid) {
            return Err(KernelError::new(Errno::NoEntry));
        }
        // Deleting a class removes the qdiscs under it from the device's list.
        let mut entries = Vec::new();
        if let Some(l) = cl.leaf(clid) {
            collect_entries(l, &mut entries);
        }
        cl.delete_class(clid)?;
        for (h, _) in entries.into_iter().filter(|e| e.0 != Handle::UNSPEC) {
            dev.hash_del(h);
        }
        Ok(())
    }
}

/// Where a `tc filter` request lands: the block, and the parent the kernel reports back.
fn resolve_block(dev: &mut Device, parent: Handle) -> Result<(&mut Block, Handle), KernelError> {
    let no_parent = || KernelError::invalid("Parent Qdisc doesn't exists");
    // `__tcf_qdisc_find`: no parent is the root qdisc; any other is looked up by its major, so
    // `root` (TC_H_ROOT, major ffff:) names the ingress or clsact qdisc, as `ingress` does.
    let (sched, parent) = if parent == Handle::UNSPEC {
        let h = dev.root.handle;
        (&mut dev.root, h)
    } else if parent.major() == 0xffff {
        (dev.ingress.as_mut().ok_or_else(no_parent)?, parent)
    } else {
        (dev.find_mut(parent.qdisc()).ok_or_else(no_parent)?, parent)
    };
    let kind = sched.q.kind();
    // `clsact_find` knows the minors fff2 (ingress) and fff3 (egress) only; `ingress_find` any.
    // With no minor (`parent ffff:`) no class is looked up and `clsact_tcf_block` answers no block
    // for class 0, which `__tcf_block_find` refuses with a bare EINVAL (a dump lists nothing).
    if kind == "clsact" {
        match parent.minor() {
            MIN_INGRESS | MIN_EGRESS => {}
            0 => return Err(KernelError::new(Errno::Invalid)),
            _ => {
                return Err(KernelError::msg(
                    Errno::NoEntry,
                    "Specified class doesn't exist",
                ))
            }
        }
    }
    if !matches!(kind, "ingress" | "clsact") {
        let found = match sched.q.classes() {
            Some(cl) => parent.minor() == 0 || cl.find(parent),
            // SFQ has class operations in the kernel (a block, `find` that finds nothing): filters attach
            // to the qdisc itself.
            None if sched.q.block(Handle(parent.0 & 0xffff_0000)).is_some() => parent.minor() == 0,
            None => return Err(KernelError::invalid("Qdisc not classful")),
        };
        if !found {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified class doesn't exist",
            ));
        }
    }
    let err = sched.q.no_block_error();
    match sched.q.block_mut(parent) {
        Some(b) => Ok((b, parent)),
        None => Err(err),
    }
}

impl Engine {
    /// `tc filter add|change|replace` (`tc_new_tfilter`).
    pub fn modify_filter(
        &mut self,
        dev_name: &str,
        parent: Handle,
        req: &FilterRequest,
        flags: FilterFlags,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let indev = match &req.opts {
            Some(crate::filter::FilterOptions::U32(o)) => o.indev.as_deref(),
            Some(crate::filter::FilterOptions::Fw(o)) => o.indev.as_deref(),
            Some(crate::filter::FilterOptions::Flower(o)) => o.indev.as_deref(),
            _ => None,
        };
        if indev.is_some_and(|d| !self.by_name.contains_key(d)) {
            // `tcf_change_indev`: the name must be a device of the namespace.
            return Err(KernelError::msg(
                Errno::NoDevice,
                "Network device not found",
            ));
        }
        // flower keys on the device's index (`tcf_change_indev`).
        let flower_indev = match &req.opts {
            Some(crate::filter::FilterOptions::Flower(o)) => indev
                .and_then(|d| self.by_name.get(d))
                .map(|id| crate::filter::flower::FlowerOptions {
                    indev_ifindex: id.0 + 1,
                    ..(**o).clone()
                }),
            _ => None,
        };
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let (block, at) = resolve_block(dev, parent)?;
        // `block->classid = parent`: a dump reports the parent the last request named.
        block.classid = at.0;
        if let Some(o) = flower_indev {
            let mut req = req.clone();
            req.opts = Some(crate::filter::FilterOptions::Flower(Box::new(o)));
            return block.change(&req, flags, &mut self.actions, now);
        }
        if let Some(crate::filter::FilterOptions::Flow(o)) = &req.opts {
            // cls_flow reads the handle of the block's qdisc for its default baseclass.
            let mut req = req.clone();
            req.opts = Some(crate::filter::FilterOptions::Flow(
                crate::filter::flow::FlowOptions {
                    qdisc: at.0 & 0xffff_0000,
                    ..o.clone()
                },
            ));
            return block.change(&req, flags, &mut self.actions, now);
        }
        block.change(req, flags, &mut self.actions, now)
    }

    /// `tc chain add|del|get` (`tc_ctl_chain`) on the block `parent` names (the root qdisc's for none):
    /// the handle of the block's qdisc, which a chain is reported under.
    pub fn chain_op(
        &mut self,
        dev_name: &str,
        parent: Handle,
        chain: u32,
        op: crate::filter::ChainOp,
    ) -> Result<Handle, KernelError> {
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let (block, at) = resolve_block(dev, parent)?;
        match op {
            crate::filter::ChainOp::Add => block.chain_add(chain)?,
            crate::filter::ChainOp::Del => block.chain_del(chain, &mut self.actions)?,
            crate::filter::ChainOp::Get => block.chain_get(chain)?,
        }
        Ok(at.qdisc())
    }

    /// `tc filter delete` (`tc_del_tfilter`).
    pub fn delete_filter(
        &mut self,
        dev_name: &str,
        parent: Handle,
        req: &FilterRequest,
    ) -> Result<(), KernelError> {
        if req.prio == 0 && (req.protocol != 0 || req.handle != 0 || req.kind.is_some()) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Cannot flush filters with protocol, handle or kind set",
            ));
        }
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        let (block, _) = resolve_block(dev, parent)?;
        block.delete(req, &mut self.actions)
    }

    /// The block `tc filter show|get dev DEV [parent P]` reads, and the parent the kernel reports.
    /// `Ok(None)`: the qdisc takes no filters (the kernel's dump is then empty).
    pub fn filter_block(
        &mut self,
        dev_name: &str,
        parent: Handle,
    ) -> Result<Option<(&Block, Handle)>, KernelError> {
        let dev = slot_mut(&mut self.slots, &self.by_name, dev_name).ok_or_else(no_device)?;
        match resolve_block(dev, parent) {
            // The kernel reports the block's classid: the parent of the last `filter add|change`.
            Ok((b, p)) => {
                let reported = if b.classid != 0 { Handle(b.classid) } else { p };
                Ok(Some((&*b, reported)))
            }
            Err(e)
                if e.errno == Errno::Invalid && e.msg.as_deref() == Some("Qdisc not classful") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
