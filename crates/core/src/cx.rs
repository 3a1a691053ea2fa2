//! The context of one call into the tree: what a qdisc, a filter and an action share.
//!
//! Every `enqueue`, `dequeue`, `peek` and `classify` receives a [`Cx`]: the time, the earliest wake-up
//! a shaper asked for, the packets dropped during the call (the kernel's `to_free` list), the packets
//! mirred actions sent elsewhere, and what a trace wants to know (the leaf class, the filter that
//! matched). It lives below the qdisc, filter and action modules, as the kernel's `struct sk_buff`
//! and `struct tcf_result` sit below `net/sched`, so none of those modules imports another for it.

use crate::packet::{Packet, SkbCache};
use crate::Nanos;

/// The context of one call: the time, the earliest wake-up any shaper asked for during it, and every
/// packet a discipline anywhere in the tree dropped during it.
#[derive(Clone, Debug)]
pub struct Cx {
    pub now: Nanos,
    pub wake_at: Option<Nanos>,
    /// `qdisc_tree_reduce_backlog`: packets and bytes a qdisc removed from its queue during this call
    /// other than by dequeueing (an SFQ that made room by dropping an older packet). Every ancestor on the
    /// call's path takes them off its own counters (see [`Cx::reduced_since`]).
    pub tree_reduced: (i64, i64),
    /// The kernel's `to_free` list: the packets dropped during this call, in the order they were dropped,
    /// each with its reason — the arriving packet if it was refused, and any queued packet a discipline
    /// removed to make room (SFQ) or decided to drop (an AQM). The driver takes them (`drain`) to tell
    /// their senders and free their buffers; nothing in the tree reads them.
    pub drops: Drops,
    /// Packets mirred actions sent to other devices during this call, for the driver to deliver at once
    /// (the kernel's nested `dev_queue_xmit`/`netif_receive_skb`), and the nest this call runs in.
    pub mirred: MirredCx,
    /// Packets a discipline asks to enqueue again at the root of the device once this enqueue is done:
    /// netem's duplicates (`rootq->enqueue(skb2)`). Empty, one null pointer.
    pub to_root: Option<Box<Vec<Packet>>>,
    /// The leaf class the innermost classful qdisc on this enqueue's path queued the packet in (0 if
    /// none), for traces; no discipline reads it. See [`Cx::tag_leaf`].
    pub leaf: u32,
    /// The filter that classified the packet last on this call's path (the innermost block's), for
    /// traces; no discipline reads it.
    pub matched: Option<FilterMatch>,
    /// A sch_fq with pacing on took a packet of its own socket (`Packet::sk`) during this call: the
    /// socket's `sk_pacing_status` becomes `SK_PACING_FQ`, and its TCP leaves the pacing to the qdisc
    /// (no internal pacing), as `fq_classify` tells the kernel's socket.
    pub pacing_fq: bool,
    /// Frames a qdisc cut the arriving GSO packet into during this call (`tbf_segment`, CAKE's
    /// split-gso), beyond the one skb it was. Each frame is an skb of its own: `tcp_gso_segment` charges
    /// their truesize to the sending socket (`sk_wmem_alloc` grows by the difference), which the driver
    /// does for TCP small queues, as each frame frees its own when it goes.
    pub gso_split: u32,
    /// The host's connection table, lent by the driver for a call that may run a `ct` action (the
    /// kernel's per-netns table, which `act_ct` and the netfilter hooks share), and taken back when
    /// the call returns; `None` where there is no host (the action then tracks each packet alone).
    pub conntrack: Option<crate::netfilter::conntrack::Conntrack>,
    /// The queue length of the teql master's root qdisc, which a driver sets before it runs a teql
    /// slave's qdisc: `teql_dequeue` shows it in the slave's `qlen`. Kept across [`Cx::reset`], as
    /// the driver owns it; 0 where there is no master.
    pub teql_master_qlen: u32,
    /// Spare packet boxes ([`SkbCache`]): where a discipline that takes packets by value boxes what it
    /// hands on and keeps the boxes of what it is handed ([`crate::qdisc::Qdisc::enqueue_skb`]'s
    /// default), and where a driver that keeps its context takes the box of each packet it makes. Kept
    /// across [`Cx::reset`], as the driver owns it.
    pub skbs: SkbCache,
}

impl Cx {
    pub fn new(now: Nanos) -> Cx {
        Cx {
            now,
            wake_at: None,
            tree_reduced: (0, 0),
            drops: Drops::default(),
            mirred: Default::default(),
            to_root: None,
            leaf: 0,
            matched: None,
            pacing_fq: false,
            gso_split: 0,
            conntrack: None,
            teql_master_qlen: 0,
            skbs: SkbCache::default(),
        }
    }

    /// Make this context what `Cx::new(now)` makes, in place: a driver that keeps one context for its
    /// calls saves building and dropping one per call. The lists are empty again (what a call left in
    /// them is dropped), and nothing a mirred delivery set is inherited by the next call.
    #[inline(always)]
    pub fn reset(&mut self, now: Nanos) {
        // Each list is a null pointer (the drop list an empty buffer) unless the last call used it:
        // test, and clear out of line only then (inlined, the drops would give every caller a stack
        // frame to set up).
        if !self.drops.is_empty() || !self.mirred.is_unset() || self.to_root.is_some() {
            self.clear_lists();
        }
        self.now = now;
        self.wake_at = None;
        self.tree_reduced = (0, 0);
        self.leaf = 0;
        self.matched = None;
        self.pacing_fq = false;
        self.gso_split = 0;
    }

    #[cold]
    #[inline(never)]
    fn clear_lists(&mut self) {
        // The drop list keeps its buffer for the next call's drops, as the packet boxes are kept.
        self.drops.clear();
        self.mirred = Default::default();
        self.to_root = None;
    }

    /// Record that `pkt` goes to the leaf class `classid`: on the packet (its later dequeue and drop
    /// lines in a trace) and here (the enqueue's own line, written after the packet has moved in).
    pub fn tag_leaf(&mut self, pkt: &mut Packet, classid: u32) {
        pkt.leaf_class = classid;
        self.leaf = classid;
    }

    /// Enqueue `pkt` at the root of the device after the current enqueue (netem's duplicate).
    pub fn push_to_root(&mut self, pkt: Packet) {
        self.to_root.get_or_insert_with(Default::default).push(pkt);
    }

    /// Tell the ancestors that `packets` and `bytes` left this qdisc's queue without being dequeued.
    pub fn reduce_backlog(&mut self, packets: i64, bytes: i64) {
        self.tree_reduced.0 += packets;
        self.tree_reduced.1 += bytes;
    }

    /// What a child reduced since `mark` (a copy of `tree_reduced` taken before calling it).
    pub fn reduced_since(&self, mark: (i64, i64)) -> (i64, i64) {
        (self.tree_reduced.0 - mark.0, self.tree_reduced.1 - mark.1)
    }
    /// `qdisc_watchdog_schedule_ns`: ask to be dequeued again at `at`.
    pub fn schedule(&mut self, at: Nanos) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    /// `qdisc_drop` of the packet this enqueue was called with (the one arriving at the root).
    pub fn drop_arriving(&mut self, pkt: Packet, reason: DropReason) {
        self.drops.push(Dropped {
            pkt,
            reason,
            arriving: true,
        });
    }

    /// [`Cx::drop_arriving`] of a packet in its box (the box is kept for the next packet).
    pub fn drop_arriving_skb(&mut self, pkt: Box<Packet>, reason: DropReason) {
        let pkt = self.skbs.unbox(pkt);
        self.drop_arriving(pkt, reason);
    }

    /// `qdisc_drop` of a packet that was already queued (taken from a queue to make room, or by an AQM).
    pub fn drop_queued(&mut self, pkt: Packet, reason: DropReason) {
        self.drops.push(Dropped {
            pkt,
            reason,
            arriving: false,
        });
    }

    /// [`Cx::drop_queued`] of a packet in its box (the box is kept for the next packet).
    pub fn drop_queued_skb(&mut self, pkt: Box<Packet>, reason: DropReason) {
        let pkt = self.skbs.unbox(pkt);
        self.drop_queued(pkt, reason);
    }
}

/// Why a packet was dropped. The kernel names these in `enum qdisc_drop_reason` and
/// `enum skb_drop_reason` (`QDISC_DROP_OVERLIMIT`, `QDISC_DROP_FLOW_LIMIT`, `TC_EGRESS`…); ns-3 counts
/// each reason separately, and so does [`crate::qdisc::DropCounts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The arriving packet found its queue full: a FIFO or band at its limit, HTB's direct queue, an SFQ
    /// flow at its depth.
    TailDrop,
    /// A queued packet at the head of a full flow or queue was dropped to admit the arriving one (SFQ
    /// `headdrop`, pfifo_head_drop).
    HeadDrop,
    /// The qdisc as a whole was over its limit and dropped a queued packet of its choice (SFQ's
    /// `sfq_drop` from the longest flow), or the packet is larger than a shaper could ever send (TBF's
    /// `max_size`).
    Overlimit,
    /// No free flow slot for a new flow (SFQ's `flows`).
    MaxFlows,
    /// An active queue management decision (CoDel, RED, PIE): the queue was not full.
    Aqm,
    /// A filter's action said `TC_ACT_SHOT`: a policer's exceed action, `gact drop`.
    Action,
    /// No class took the packet (DRR, SFQ with filters, a class without a queue).
    Unclassified,
    /// An emulated loss (netem's `loss`): the network being emulated lost the packet.
    Loss,
    /// A queued pure TCP ACK made redundant by a newer one of its connection (CAKE's ACK filter).
    AckFilter,
}

impl DropReason {
    pub const ALL: [DropReason; 9] = [
        DropReason::TailDrop,
        DropReason::HeadDrop,
        DropReason::Overlimit,
        DropReason::MaxFlows,
        DropReason::Aqm,
        DropReason::Action,
        DropReason::Unclassified,
        DropReason::Loss,
        DropReason::AckFilter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::TailDrop => "tail_drop",
            DropReason::HeadDrop => "head_drop",
            DropReason::Overlimit => "overlimit",
            DropReason::MaxFlows => "max_flows",
            DropReason::Aqm => "aqm",
            DropReason::Action => "action",
            DropReason::Unclassified => "unclassified",
            DropReason::Loss => "loss",
            DropReason::AckFilter => "ack_filter",
        }
    }
}

/// The drop list of a [`Cx`]: read it as a slice. One pointer, null until the first drop; then the
/// list keeps its buffer (emptied by [`Drops::drain`] or [`Cx::reset`]) for the drops of later calls
/// on the same context, so that a drop allocates nothing once a driver's context has dropped before.
#[derive(Clone, Default)]
// Boxed on purpose: one word (null until used) instead of a Vec's three, in a context made and
// reset on every call.
#[allow(clippy::box_collection)]
pub struct Drops(Option<Box<Vec<Dropped>>>);

/// The dropped packets, as a list: an empty list that kept its buffer shows as one never used
/// (as [`PartialEq`] compares them), so a reset context reads as a new one.
impl std::fmt::Debug for Drops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Drops {
    pub fn push(&mut self, d: Dropped) {
        self.0.get_or_insert_with(Default::default).push(d);
    }

    /// Take the dropped packets out, leaving the list empty (and its buffer with them: a driver
    /// that keeps its context uses [`Drops::drain`]).
    pub fn take(&mut self) -> Vec<Dropped> {
        self.0.take().map(|b| *b).unwrap_or_default()
    }

    /// The dropped packets, in the order they were dropped, moved out; the list keeps its buffer.
    pub fn drain(&mut self) -> impl Iterator<Item = Dropped> + '_ {
        self.0.iter_mut().flat_map(|v| v.drain(..))
    }

    /// Empty the list (the packets in it are dropped), keeping its buffer.
    pub fn clear(&mut self) {
        if let Some(v) = &mut self.0 {
            v.clear();
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|v| v.is_empty())
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |v| v.len())
    }
}

/// Two lists are equal when they hold the same drops, whether or not either has a buffer.
impl PartialEq for Drops {
    fn eq(&self, other: &Drops) -> bool {
        **self == **other
    }
}

impl Eq for Drops {}

impl std::ops::Deref for Drops {
    type Target = [Dropped];
    #[inline]
    fn deref(&self) -> &[Dropped] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

/// A packet a discipline dropped, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
    /// It is the packet the enqueue was called with (not one that had been queued before).
    pub arriving: bool,
}

/// A packet a mirred action sends to another device.
#[derive(Clone, Debug)]
pub struct Mirrored {
    pub pkt: Packet,
    /// The target device.
    pub dev: String,
    /// Into the target's receive path (`ingress`) rather than out of it.
    pub to_ingress: bool,
    /// A redirect (`skb_set_redirected`): an ifb takes only these, and sends them back where they came from.
    pub redirected: bool,
    /// Classified at a device's ingress (`skb->from_ingress`): an ifb gives the packet back to that
    /// device's receive path, after its ingress hook; otherwise to its transmit path.
    pub from_ingress: bool,
    /// The device whose classification sent it (`skb->skb_iif`), filled in by `Device::enqueue`/`receive`.
    pub from_dev: String,
    /// The egress nest the delivery happens in (`sched_mirred_dev`), this target included if egress.
    pub nest: Vec<String>,
    /// `skb->tc_depth` after this delivery.
    pub depth: u8,
    /// The action's index, for the driver to count an overlimit when the target refuses the packet.
    pub action: u32,
}

/// The mirred side of a [`Cx`]: the packets actions sent elsewhere during the call, and
/// what the call inherits from the delivery it is part of. Empty, it is one null pointer.
#[derive(Clone, Debug, Default)]
#[allow(clippy::box_collection)]
pub struct MirredCx(Option<Box<MirredState>>);

#[derive(Clone, Debug, Default)]
struct MirredState {
    out: Vec<Mirrored>,
    nest: Vec<String>,
    depth: u8,
    at_ingress: bool,
    /// `skb->tc_skip_classify`: set by an ifb on a packet it gives back, cleared by the first check.
    skip_classify: bool,
}

impl MirredCx {
    fn state(&mut self) -> &mut MirredState {
        self.0.get_or_insert_with(Default::default)
    }

    pub(crate) fn input(&self) -> (&[String], u8, bool) {
        match &self.0 {
            Some(s) => (&s.nest, s.depth, s.at_ingress),
            None => (&[], 0, false),
        }
    }

    pub(crate) fn push(&mut self, m: Mirrored) {
        self.state().out.push(m);
    }

    /// The delivery this call is part of: the egress nest and the packet's depth (from a [`Mirrored`]).
    pub fn set_nest(&mut self, nest: Vec<String>, depth: u8) {
        let s = self.state();
        s.nest = nest;
        s.depth = depth;
    }

    /// Whether classification runs at a device's ingress hook (`skb_at_tc_ingress`).
    pub fn at_ingress(&self) -> bool {
        self.input().2
    }

    /// Classification runs at a device's ingress hook (`skb_at_tc_ingress`).
    pub fn set_at_ingress(&mut self, at: bool) {
        if at || self.0.is_some() {
            self.state().at_ingress = at;
        }
    }

    /// The packet comes back from an ifb: the first action list it meets does not run (`tc_skip_classify`).
    pub fn set_skip_classify(&mut self) {
        self.state().skip_classify = true;
    }

    /// `skb_skip_tc_classify`: true once after [`MirredCx::set_skip_classify`].
    pub fn take_skip_classify(&mut self) -> bool {
        match &mut self.0 {
            Some(s) => std::mem::take(&mut s.skip_classify),
            None => false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|s| s.out.is_empty())
    }

    /// Nothing sent, inherited or set: as `MirredCx::default()` makes it.
    #[inline]
    pub fn is_unset(&self) -> bool {
        self.0.is_none()
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.out.len())
    }

    /// The packets pushed from position `from` on (to fill in where they came from).
    pub fn since_mut(&mut self, from: usize) -> &mut [Mirrored] {
        match &mut self.0 {
            Some(s) => &mut s.out[from..],
            None => &mut [],
        }
    }

    /// Take the packets to deliver, in the order the actions sent them.
    pub fn take(&mut self) -> Vec<Mirrored> {
        self.0
            .as_mut()
            .map(|s| std::mem::take(&mut s.out))
            .unwrap_or_default()
    }
}

/// Which filter instance classified a packet: its kind, chain and preference (what `tc filter show`
/// lists it by), for traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterMatch {
    pub kind: &'static str,
    pub chain: u32,
    pub pref: u32,
}

impl std::fmt::Display for FilterMatch {
    /// `u32:1`, or `u32:1@2` in chain 2.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.pref)?;
        if self.chain != 0 {
            write!(f, "@{}", self.chain)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(len: u32) -> Dropped {
        Dropped {
            pkt: Packet {
                len,
                ..Packet::default()
            },
            reason: DropReason::Aqm,
            arriving: false,
        }
    }

    /// A context a driver keeps (the simulator's) drains its drops and keeps the list's buffer, so
    /// the next call's drops allocate nothing (bench-isp allocated a list for each of its ~27 000
    /// drops in 2 s); the list still reads empty and equal to a fresh one.
    #[test]
    fn drained_or_reset_drop_lists_keep_their_buffer() {
        let mut cx = Cx::new(0);
        cx.drop_queued(dropped(100).pkt, DropReason::Aqm);
        cx.drop_arriving(dropped(200).pkt, DropReason::TailDrop);
        let out: Vec<(u32, bool)> = cx.drops.drain().map(|d| (d.pkt.len, d.arriving)).collect();
        assert_eq!(out, [(100, false), (200, true)]);
        assert!(cx.drops.is_empty());
        assert_eq!(cx.drops.len(), 0);
        assert_eq!(cx.drops, Drops::default());
        let buf = cx.drops.0.as_ref().map(|v| v.as_ptr());
        assert!(buf.is_some(), "the buffer went with the drops");

        // A call's drops left undrained are dropped by the reset; the buffer stays.
        cx.drops.push(dropped(300));
        cx.reset(1);
        assert!(cx.drops.is_empty());
        assert_eq!(cx.drops.0.as_ref().map(|v| v.as_ptr()), buf);
        cx.drops.push(dropped(400));
        assert_eq!(cx.drops.0.as_ref().map(|v| v.as_ptr()), buf);
        assert_eq!(cx.drops[0].pkt.len, 400);

        // `take` hands the list over, buffer and all.
        assert_eq!(cx.drops.take().len(), 1);
        assert!(cx.drops.0.is_none());
    }
}
