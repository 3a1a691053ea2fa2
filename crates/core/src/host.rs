//! The host stack around the qdiscs: what Linux does to a packet between the socket (or the wire) and a
//! device's queue, and how a device's queue is emptied onto its transmitter. Both drivers — the
//! simulator's virtual links and the live mode's real interfaces — go through these functions, so the
//! order of things is written once:
//!
//! - **Output** (`ip_local_out`, `ip_output`): a locally generated packet passes netfilter's OUTPUT,
//!   then POSTROUTING hook, then the MTU check, then the egress qdisc ([`local_out`], [`fits_mtu`]).
//! - **Input** (`__netif_receive_skb`, `ip_rcv`): the ingress qdisc's filters first (the device does
//!   that: `Device::receive`), then PREROUTING; the routing decision; then INPUT and local delivery
//!   ([`pre_routing`], [`local_in`]) or forwarding.
//! - **Forwarding** (`ip_forward`): the forwarded skb keeps the mark and takes its priority from the
//!   TOS byte (`rt_tos2priority`); FORWARD, then POSTROUTING ([`forwarded`], [`forward`]).
//! - **`qdisc_run`**: while the transmitter can take a packet, take the next one the tree releases; when
//!   the tree holds packets back, the time it wants to be asked again, rounded up to the timer tick on a
//!   kernel without high-resolution timers ([`qdisc_run`], [`qdisc_restart`], [`wake_time`]).
//!
//! Routing itself, the wire (serialisation, delay, loss) and the sockets are the driver's. Netfilter is
//! skipped on a node whose table is empty: with no rules the hooks change nothing (and conntrack, which
//! only the rules read, need not run).

use crate::engine::Device;
use crate::netfilter::{Hook, Netfilter, NfVerdict};
use crate::packet::SkbCache;
use crate::qdisc::pfifo_fast::tos_to_priority;
use crate::qdisc::Cx;
use crate::{Nanos, Packet};

/// Ethernet header bytes counted in `Packet::len` (`qdisc_pkt_len` of an skb on an Ethernet device).
pub const ETH_HLEN: u32 = 14;

fn hooks(
    nf: &mut Netfilter,
    order: &[Hook],
    pkt: &mut Packet,
    in_dev: Option<&str>,
    out_dev: Option<&str>,
    now: Nanos,
) -> bool {
    if nf.is_idle() {
        return true;
    }
    order
        .iter()
        .all(|&h| nf.hook(h, pkt, in_dev, out_dev, now) == NfVerdict::Accept)
}

/// OUTPUT then POSTROUTING for a locally generated packet leaving by `out_dev`; false if a rule dropped
/// it.
pub fn local_out(nf: &mut Netfilter, pkt: &mut Packet, out_dev: &str, now: Nanos) -> bool {
    hooks(
        nf,
        &[Hook::LocalOut, Hook::PostRouting],
        pkt,
        None,
        Some(out_dev),
        now,
    )
}

/// PREROUTING for a packet that arrived on `in_dev` (after the ingress qdisc).
pub fn pre_routing(nf: &mut Netfilter, pkt: &mut Packet, in_dev: &str, now: Nanos) -> bool {
    hooks(nf, &[Hook::PreRouting], pkt, Some(in_dev), None, now)
}

/// INPUT for a packet addressed to this host.
pub fn local_in(nf: &mut Netfilter, pkt: &mut Packet, in_dev: &str, now: Nanos) -> bool {
    hooks(nf, &[Hook::LocalIn], pkt, Some(in_dev), None, now)
}

/// FORWARD then POSTROUTING for a packet routed from `in_dev` to `out_dev`.
pub fn forward(
    nf: &mut Netfilter,
    pkt: &mut Packet,
    in_dev: &str,
    out_dev: &str,
    now: Nanos,
) -> bool {
    hooks(
        nf,
        &[Hook::Forward, Hook::PostRouting],
        pkt,
        Some(in_dev),
        Some(out_dev),
        now,
    )
}

/// The skb `ip_forward` sends on: the same bytes, length, protocol, mark and `tc_index` (an ingress
/// filter's class minor, which GRED on the way out reads as the drop precedence); the priority from the
/// TOS byte; its connection (state, mark, zone); nothing else of the arriving skb (its time in the
/// previous device's queue). VLAN tags stay behind with the VLAN device that took them off (the
/// simulated hosts receive tagged packets as if they had one), and so do the header tags' 4 bytes each.
/// Made in place: the packet stays in its box (its buffer, in the same skb, as `ip_forward` keeps it).
#[inline]
pub fn make_forwarded(pkt: &mut Packet, tos: u8) {
    if pkt.ext.is_some() {
        return make_forwarded_ext(pkt, tos);
    }
    // Without an extension (no VLAN tag, zone, route or classid), what is kept stays where it is and
    // the rest is cleared to `Packet::default()`'s zeros, field by field rather than the whole packet
    // built anew (a fifth of the cost). The pattern names every field: a new one must be sorted here.
    let Packet {
        data: _,
        len: _,
        protocol: _,
        mark: _,
        tc_index: _,
        gso_segs: _,
        gso_size: _,
        ct_state: _,
        ct_mark: _,
        ext: _,
        priority,
        redirect,
        enqueue_ns,
        tag,
        iif,
        tc_depth,
        cb,
        leaf_class,
        sk,
        tstamp,
        pacing_rate,
        hash,
    } = pkt;
    *priority = tos_to_priority(tos);
    *redirect &= Packet::CSUM_IMPLIED;
    (*enqueue_ns, *tag, *tstamp, *pacing_rate) = (0, 0, 0, 0);
    (*iif, *leaf_class, *sk, *hash) = (0, 0, 0, 0);
    *tc_depth = 0;
    *cb = [0; 2];
}

/// [`make_forwarded`] of a packet with an extension: built anew, its zone kept.
fn make_forwarded_ext(pkt: &mut Packet, tos: u8) {
    let zone = pkt.ct_zone();
    *pkt = Packet {
        len: pkt.len.saturating_sub(4 * pkt.vlan_inline().len() as u32),
        data: std::mem::take(&mut pkt.data),
        protocol: pkt.protocol,
        mark: pkt.mark,
        tc_index: pkt.tc_index,
        priority: tos_to_priority(tos),
        // A GSO packet is forwarded whole (segmented where it leaves).
        gso_segs: pkt.gso_segs,
        gso_size: pkt.gso_size,
        // Its connection stays attached (`skb->_nfct`): the later hooks find it in its zone.
        ct_state: pkt.ct_state,
        ct_mark: pkt.ct_mark,
        // The bytes are the same bytes: checksums implied stay implied (skb->redirected does not).
        redirect: pkt.redirect & Packet::CSUM_IMPLIED,
        ..Packet::default()
    };
    pkt.set_ct_zone(zone);
}

/// The MTU check of a packet with DF set (Linux's TCP, and ping with path-MTU discovery): one that does
/// not fit the device is dropped, not fragmented.
#[inline]
pub fn fits_mtu(dev: &Device, pkt: &Packet) -> bool {
    if pkt.is_gso() {
        // `skb_gso_validate_network_len`: each segment it will become must fit.
        return pkt.gso_frame_max() <= dev.mtu + ETH_HLEN;
    }
    pkt.len <= dev.mtu + ETH_HLEN
}

/// `qdisc_restart` once: the next packet the device's tree releases, if any, with the call's context —
/// the packets the tree dropped on the way (counted in the device's drop counters here; the driver
/// tells their senders) and, when nothing came out, the time the tree wants to be asked again.
pub fn qdisc_restart(dev: &mut Device, now: Nanos) -> (Option<Packet>, Cx) {
    let mut cx = Cx::new(now);
    let pkt = dev.dequeue(&mut cx);
    if !cx.drops.is_empty() {
        dev.count_dropped(&cx.drops);
    }
    (pkt, cx)
}

/// When to ask a tree that held its packets back again: its wake-up, rounded up to the timer `tick`
/// (a kernel without high-resolution timers), never in the past.
#[inline]
pub fn wake_time(wake_at: Nanos, now: Nanos, tick: Option<Nanos>) -> Nanos {
    match tick {
        Some(t) => wake_at.div_ceil(t) * t,
        None => wake_at,
    }
    .max(now)
}

/// What `qdisc_run` hands packets to: a NIC's transmit queue, a simulated wire, a socket.
pub trait Transmitter {
    /// Whether a packet can be taken now (the wire is free, the ring has room).
    fn ready(&self) -> bool;
    /// Take `pkt` (its transmission starts now).
    fn send(&mut self, pkt: Packet);
    /// Take `pkt` in its box, as the tree gave it ([`Device::dequeue_skb`]). The default takes it out
    /// for [`Transmitter::send`] and keeps the box in `skbs` for the next packet the driver makes.
    fn send_skb(&mut self, pkt: Box<Packet>, skbs: &mut SkbCache) {
        let pkt = skbs.unbox(pkt);
        self.send(pkt);
    }
    /// Told of every dequeue, before its packet is sent: the packet (if one came out) and the call's
    /// context, whose `drops` the driver hands to the packets' owners.
    fn dequeued(&mut self, _pkt: Option<&Packet>, _cx: &mut Cx) {}
}

/// `qdisc_run`: while the transmitter is ready, move the next packet the tree releases to it. Returns
/// the time the tree wants to be asked again when it held packets back (rounded to `tick`), or `None`
/// when it is empty or the transmitter is busy (its completion asks again).
#[inline]
pub fn qdisc_run(
    dev: &mut Device,
    now: Nanos,
    tick: Option<Nanos>,
    tx: &mut impl Transmitter,
) -> Option<Nanos> {
    qdisc_run_in(dev, now, tick, tx, &mut Cx::new(now))
}

/// [`qdisc_run`] in a context the caller keeps between calls (reset before each dequeue), so that the
/// packet path neither builds nor drops one per dequeue.
#[inline]
pub fn qdisc_run_in(
    dev: &mut Device,
    now: Nanos,
    tick: Option<Nanos>,
    tx: &mut impl Transmitter,
    cx: &mut Cx,
) -> Option<Nanos> {
    let bulk = dev.bulk_dequeue();
    while tx.ready() {
        // The rest of the last bulk goes first, without asking the tree (the kernel's driver has it).
        if let Some(p) = dev.bulk.pop_front() {
            tx.send_skb(p, &mut cx.skbs);
            continue;
        }
        // qdisc_restart, written out: the context stays in place (it is large, and this is the packet
        // path of every driver), cleared for each dequeue.
        let Some(p) = dequeue_once(dev, now, tx, cx) else {
            return cx.wake_at.map(|w| wake_time(w, now, tick));
        };
        if bulk {
            bulk_dequeue_slow(dev, now, tx, cx);
        }
        tx.send_skb(p, &mut cx.skbs);
    }
    None
}

/// One `q->dequeue` of the root, its drops counted and the transmitter told.
#[inline]
fn dequeue_once(
    dev: &mut Device,
    now: Nanos,
    tx: &mut impl Transmitter,
    cx: &mut Cx,
) -> Option<Box<Packet>> {
    cx.reset(now);
    let pkt = dev.dequeue_skb(cx);
    if !cx.drops.is_empty() {
        dev.count_dropped(&cx.drops);
    }
    tx.dequeued(pkt.as_deref(), cx);
    pkt
}

/// `try_bulk_dequeue_skb_slow` ([`Device::bulk_dequeue`]): up to 8 more packets after the first, kept
/// in `dev.bulk` for the transmitter, until the tree gives none (a throttled TBF counts an overlimit
/// here). Outside taprio (not bulked) tclab's packets keep one transmit queue, so the kernel's
/// queue-mapping check would not stop it (an `skbedit queue_mapping` packet is not told apart).
#[cold]
fn bulk_dequeue_slow(dev: &mut Device, now: Nanos, tx: &mut impl Transmitter, cx: &mut Cx) {
    for _ in 0..8 {
        match dequeue_once(dev, now, tx, cx) {
            Some(p) => dev.bulk.push_back(p),
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DefaultRoot, Engine};
    use crate::handle::Handle;
    use crate::qdisc::tbf::TbfOptions;
    use crate::qdisc::QdiscOptions;

    /// The in-place forwarding of a packet without an extension makes what building it anew makes
    /// (the form the extension's path keeps): every field set, so that one kept or cleared by mistake
    /// shows.
    #[test]
    fn forwarded_in_place_is_forwarded_anew() {
        let pkt = Packet {
            data: vec![0x45, 0x10, 0, 40],
            len: 1514,
            mark: 7,
            priority: 3,
            tc_index: 9,
            protocol: 0x0800,
            enqueue_ns: 11,
            tag: 12,
            ct_mark: Some(13),
            ct_state: 2,
            iif: 14,
            redirect: Packet::CSUM_IMPLIED | Packet::REDIRECTED,
            tc_depth: 1,
            cb: [15, 16],
            leaf_class: 17,
            sk: 18,
            tstamp: 19,
            pacing_rate: 20,
            hash: 21,
            ext: None,
            gso_segs: 3,
            gso_size: 1448,
        };
        let (mut in_place, mut anew) = (pkt.clone(), pkt);
        make_forwarded(&mut in_place, 0x10);
        make_forwarded_ext(&mut anew, 0x10);
        assert_eq!(in_place, anew);
        // Kept: bytes, length, protocol, mark, tc_index, GSO, connection; the TOS's priority.
        assert_eq!(
            (in_place.len, in_place.mark, in_place.gso_size),
            (1514, 7, 1448)
        );
        assert_eq!(in_place.priority, tos_to_priority(0x10));
        assert_eq!((in_place.tag, in_place.sk, in_place.hash), (0, 0, 0));
    }

    #[test]
    fn the_wake_up_is_rounded_up_to_the_tick_and_never_in_the_past() {
        // HZ 250: ticks of 4 ms. A TBF that wants 5.1 ms is asked at 8 ms; one whose time has passed,
        // now.
        assert_eq!(wake_time(5_100_000, 1_000_000, Some(4_000_000)), 8_000_000);
        assert_eq!(wake_time(5_100_000, 1_000_000, None), 5_100_000);
        assert_eq!(wake_time(500, 1_000, None), 1_000);
    }

    /// A transmitter that is always ready and keeps what it is given.
    struct Sink(Vec<Packet>);
    impl Transmitter for Sink {
        fn ready(&self) -> bool {
            true
        }
        fn send(&mut self, pkt: Packet) {
            self.0.push(pkt);
        }
    }

    #[test]
    fn qdisc_run_empties_the_tree_as_far_as_the_shaper_allows() {
        // TBF 8 Mbit/s (1 byte/µs), burst 3028 bytes: two 1514-byte frames leave at once, the third
        // waits for 1514 bytes of tokens — 1514 µs — and qdisc_run says so.
        let mut e = tbf_root(1, 3028);
        let dev = e.device_mut("eth0").unwrap();
        for _ in 0..3 {
            dev.enqueue(Packet::of_len(1514), &mut Cx::new(0));
        }
        let mut sink = Sink(Vec::new());
        let wake = qdisc_run(dev, 0, None, &mut sink);
        assert_eq!(sink.0.len(), 2);
        assert_eq!(wake, Some(1_514_000));
        assert_eq!(
            qdisc_run(dev, 1_514_000, None, &mut sink),
            None,
            "empty now"
        );
        assert_eq!(sink.0.len(), 3);
    }

    /// `Device::dequeue_idle`, which lets the simulator skip the dequeue of a TX completion: said only
    /// where that dequeue changes nothing. A pfifo_fast root (each host's default) and a pfifo say
    /// idle once empty, and their dequeue then gives nothing, counts nothing, asks for no wake-up. An
    /// fq_codel root never says it: its empty dequeue still walks its flow lists (`fq_codel_dequeue`
    /// drops an emptied flow from them), so the flow's next packet counts as a new flow only after it
    /// (`new_flow_count` 2 with the dequeue, 1 without).
    #[test]
    fn a_root_says_its_dequeue_is_idle_only_when_it_changes_nothing() {
        for opts in [None, Some(QdiscOptions::Pfifo(Default::default()))] {
            let mut e = Engine::new();
            let nic = Device::with_default("eth0", 1500, 1000, DefaultRoot::PfifoFast);
            e.create_device(nic).unwrap();
            if let Some(o) = &opts {
                let add = crate::engine::Flags::ADD;
                e.modify_qdisc("eth0", Handle::ROOT, Handle::new(1, 0), Some(o), add, 0)
                    .unwrap();
            }
            let dev = e.device_mut("eth0").unwrap();
            assert!(dev.dequeue_idle(), "{opts:?}: empty at first");
            dev.enqueue(Packet::of_len(1000), &mut Cx::new(0));
            assert!(!dev.dequeue_idle(), "{opts:?}: a packet queued");
            let mut sink = Sink(Vec::new());
            assert_eq!(qdisc_run(dev, 0, None, &mut sink), None);
            assert_eq!(sink.0.len(), 1);
            assert!(dev.dequeue_idle(), "{opts:?}: empty again");
            let before = dev.root().stats();
            let mut cx = Cx::new(1);
            assert!(dev.dequeue(&mut cx).is_none());
            assert_eq!((cx.wake_at, cx.drops.len()), (None, 0), "{opts:?}");
            assert_eq!(dev.root().stats(), before, "{opts:?}: nothing counted");
        }
        let new_flows = |idle_dequeue: bool| {
            let mut e = with_root(1, QdiscOptions::FqCodel(Default::default()));
            let dev = e.device_mut("eth0").unwrap();
            let pkt = || Packet::udp4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000, 0, 1000);
            dev.enqueue(pkt(), &mut Cx::new(0));
            assert!(dev.dequeue(&mut Cx::new(0)).is_some());
            assert!(!dev.dequeue_idle(), "fq_codel never says idle");
            if idle_dequeue {
                assert!(dev.dequeue(&mut Cx::new(0)).is_none());
            }
            dev.enqueue(pkt(), &mut Cx::new(0));
            match dev.root().q.xstats() {
                Some(crate::qdisc::Xstats::FqCodel(x)) => x.new_flow_count,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!((new_flows(true), new_flows(false)), (2, 1));
    }

    /// A TBF root on a device with `txqueues` transmit queues, 1 byte/µs, a bucket of `burst` bytes,
    /// full at time 0.
    fn tbf_root(txqueues: u32, burst: u32) -> Engine {
        let opts = TbfOptions {
            rate: crate::units::RateSpec {
                rate: 1_000_000,
                ..Default::default()
            },
            peakrate: Default::default(),
            limit: 10_000,
            buffer: 0,
            mtu: 0,
            burst: Some(burst),
            pburst: None,
        };
        with_root(txqueues, QdiscOptions::Tbf(opts))
    }

    /// A device `eth0` with `txqueues` transmit queues and a root `1:` made of `opts`.
    fn with_root(txqueues: u32, opts: QdiscOptions) -> Engine {
        let mut e = Engine::new();
        e.add_device("eth0", 1500, 1000);
        e.device_mut("eth0").unwrap().txqueues = txqueues;
        let add = crate::engine::Flags::ADD;
        e.modify_qdisc("eth0", Handle::ROOT, Handle::new(1, 0), Some(&opts), add, 0)
            .unwrap();
        e
    }

    /// A transmitter that takes one packet and is then busy (a link serialising it) until `.1` is
    /// cleared.
    struct OneAtATime(Vec<u32>, bool);
    impl Transmitter for OneAtATime {
        fn ready(&self) -> bool {
            !self.1
        }
        fn send(&mut self, pkt: Packet) {
            self.0.push(pkt.len);
            self.1 = true;
        }
    }

    #[test]
    fn a_tbf_root_on_a_multiqueue_device_counts_the_bulk_dequeue_overlimit() {
        // Linux 6.12, a sender beside a veth (whose transmit is instant: the sink is always ready):
        // each `dev_queue_xmit` enqueues, then `__qdisc_run` dequeues until the tree gives nothing;
        // `tbf_dequeue` counts an overlimit each time it holds a packet back. A, B, C sent at t=0:
        //   A: dequeued (bucket full); the bulk dequeue finds the tree empty: no overlimit.
        //   B, C: each enqueue's dequeue finds no tokens: 2 overlimits; wake-up at 1514 µs.
        //   1514 µs: B out; on a multiqueue device (no TCQ_F_ONETXQUEUE, `qdisc_create`)
        //     `try_bulk_dequeue_skb_slow` asks again at once: C held back, +1; then qdisc_restart's next
        //     dequeue: C held back, +1.
        //   3028 µs: C out; the bulk and the next dequeue find the tree empty.
        // 4 overlimits; with one queue there is no bulk dequeue (a veth has no BQL, so
        // `try_bulk_dequeue_skb` gets no room): 3. Measured on this machine's kernel with a UDP flood
        // at twice a 10 Mbit/s TBF's rate: 3.99 overlimits a packet sent with 2 queues, 3.00 with 1
        // (docs/KERNEL_VS_SIM.md).
        for (txqueues, want) in [(2, 4), (1, 3)] {
            let mut e = tbf_root(txqueues, 1514);
            let dev = e.device_mut("eth0").unwrap();
            let mut sink = Sink(Vec::new());
            for _ in 0..3 {
                dev.enqueue(Packet::of_len(1514), &mut Cx::new(0));
                qdisc_run(dev, 0, None, &mut sink);
            }
            assert_eq!(sink.0.len(), 1);
            assert_eq!(qdisc_run(dev, 1_514_000, None, &mut sink), Some(3_028_000));
            assert_eq!(qdisc_run(dev, 3_028_000, None, &mut sink), None);
            assert_eq!(sink.0.len(), 3);
            assert_eq!(dev.root().q.stats().overlimits, want, "{txqueues} queues");
        }
    }

    #[test]
    fn a_bulk_dequeue_packet_waits_for_a_busy_transmitter_in_order() {
        // TBF with room for two frames on a 2-queue device, a transmitter that takes one packet and is
        // then busy (a link serialising it): the bulk dequeue takes the second at once (the kernel
        // hands the chain to the driver); it goes out at the next run without asking the tree.
        let mut e = tbf_root(2, 1514);
        let dev = e.device_mut("eth0").unwrap();
        for len in [100, 200, 300] {
            dev.enqueue(Packet::of_len(len), &mut Cx::new(0));
        }
        let mut tx = OneAtATime(Vec::new(), false);
        assert_eq!(qdisc_run(dev, 0, None, &mut tx), None, "busy");
        assert_eq!(
            dev.bulk.len(),
            2,
            "200 and 300 fit the 1514-byte bucket too"
        );
        assert_eq!(dev.root().q.stats().overlimits, 0);
        tx.1 = false;
        qdisc_run(dev, 1, None, &mut tx);
        tx.1 = false;
        assert_eq!(qdisc_run(dev, 2, None, &mut tx), None);
        assert_eq!(tx.0, [100, 200, 300]);
        assert_eq!(dev.root().q.stats().qlen, 0);
    }

    /// A device whose root is empty but whose last bulk dequeue left packets for a busy transmitter is
    /// not idle: the simulator's `kick` skips the dequeue of an idle device at a TX completion, and
    /// those packets go only from `qdisc_run` (`Device::dequeue_idle` reads the bulk, not only the
    /// root). A pfifo root on a 2-queue device (bulk dequeue, `Device::bulk_dequeue`), three packets,
    /// a transmitter that takes one and is then busy.
    #[test]
    fn a_device_with_bulk_packets_left_is_not_idle() {
        let mut e = with_root(2, QdiscOptions::Pfifo(Default::default()));
        let dev = e.device_mut("eth0").unwrap();
        for len in [100, 200, 300] {
            dev.enqueue(Packet::of_len(len), &mut Cx::new(0));
        }
        let mut tx = OneAtATime(Vec::new(), false);
        assert_eq!(qdisc_run(dev, 0, None, &mut tx), None, "busy");
        assert_eq!((dev.root().q.qlen(), dev.bulk.len()), (0, 2));
        assert!(dev.root().q.dequeue_idle(), "the root is empty");
        assert!(!dev.dequeue_idle(), "the bulk holds 200 and 300");
        for t in [1, 2] {
            tx.1 = false;
            qdisc_run(dev, t, None, &mut tx);
        }
        assert_eq!(tx.0, [100, 200, 300]);
        assert!(dev.dequeue_idle(), "all sent");
    }
}
