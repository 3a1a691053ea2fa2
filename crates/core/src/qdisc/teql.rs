//! teql, the "true link equalizer" (`sch_teql.c`): a master device that sends round robin over slaves.
//!
//! In the kernel, loading the module makes a master device `teql0` and a qdisc kind of the same name.
//! `tc qdisc add dev ethX root teql0` makes ethX a slave: `teql_qdisc_init` inserts the slave's qdisc
//! into the master's ring right after the ring's head (so slaves added A, B, C are served A, C, B). A
//! packet routed out of teql0 passes teql0's own root qdisc (a `pfifo_fast` of 100 packets by
//! default); `teql_master_xmit` then hands it straight to a slave's driver — past the slave's qdisc —
//! trying the slaves in ring order from the head and skipping one that is down or whose transmit
//! queue is stopped (busy). If the slave it used was the head, the head moves on to the next slave
//! (`if (master->slaves == q)` in 6.12.117's teql_master_xmit, the project's reference source); if
//! every slave is busy, the master stops its queue (the packet waits in teql0's qdisc) until a slave's
//! own qdisc comes up empty: `teql_dequeue` then makes that slave the head and wakes the master. So a
//! slave sends its own (native) traffic first, and the master's packets fill the gaps, each on the
//! next free line: two equal lines each carry half, and lines of unequal delay reorder.
//!
//! On a slave, the qdisc is a FIFO of `txqueuelen` packets (the length when it was made, here; the
//! kernel reads the device's current one) for the slave's native traffic, drop-tail, whose `peek`
//! finds nothing (it is meant to be a root). It counts as the kernel counts: `Sent` at dequeue
//! (`qdisc_bstats_update`), never a backlog in bytes, and a queue length set only at dequeue
//! (`sch->q.qlen`): what is left of the slave's own queue plus what the master's root qdisc holds
//! then ([`Cx::teql_master_qlen`], which the driver sets), so `tc -s qdisc show dev SLAVE` shows the
//! bond's backlog. It has no options, and no `change`.
//!
//! [`TeqlMaster`] is `struct teql_master`: the ring, its head and the master's counters. The engine
//! holds it beside the master device and keeps the ring in step with the slaves' qdiscs
//! (`teql_qdisc_init`, `teql_destroy`); a driver asks it which slave takes each packet
//! ([`TeqlMaster::xmit`]) and tells it when a slave's qdisc came up empty ([`TeqlMaster::slave_idle`]).
//! Neighbour resolution (`teql_resolve`) always succeeds: tclab's links need none.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use std::collections::VecDeque;

/// The name of the master device and of the qdisc kind (`max_equalizers` = 1: one master).
pub const MASTER: &str = "teql0";

/// `LL_MAX_HEADER` on a distribution kernel (x86-64 with Hyper-V networking): the master's
/// `hard_header_len`, above which a slave is refused.
pub const LL_MAX_HEADER: u32 = 128;

/// In a snapshot ([`crate::snapshot`]) with nothing queued.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Teql {
    limit: u32,
    #[serde(skip)]
    queue: VecDeque<Packet>,
    stats: QdiscStats,
}

impl Qdisc for Teql {
    fn kind(&self) -> &'static str {
        MASTER
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.queue
            .is_empty()
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `teql_enqueue`: below the device's queue length, else a drop (`qdisc_drop`). Neither the backlog
    /// nor the queue length is counted here, as the kernel counts neither.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        if (self.queue.len() as u32) < self.limit {
            self.queue.push_back(pkt);
            return Verdict::Success;
        }
        self.stats.drops += 1;
        cx.drop_arriving(pkt, DropReason::TailDrop);
        Verdict::Drop
    }

    /// `teql_dequeue`: the slave's own packets in order, counted as sent; the queue length shown is
    /// what is left plus the master's (`sch->q.qlen = dat->q.qlen + q->q.qlen`). (The driver tells
    /// the master when this comes up empty: [`TeqlMaster::slave_idle`].)
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let pkt = self.queue.pop_front();
        if let Some(p) = &pkt {
            self.stats.count_sent(p);
        }
        self.stats.qlen = self.queue.len() as u32 + cx.teql_master_qlen;
        pkt
    }

    /// `teql_peek`: nothing (teql is meant to be a root).
    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        None
    }

    /// `teql_reset`: the queue purged; `sch->q.qlen` is left as the last dequeue set it, then
    /// `qdisc_reset` zeroes it.
    fn reset(&mut self) {
        self.queue.clear();
        self.stats.qlen = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Teql
    }

    /// teql has no `change`, but tc sends it no options (`parse_noqopt`), and `qdisc_change` asks for
    /// one only with TCA_OPTIONS: `tc qdisc change|replace dev X root teql0` succeeds, changing nothing.
    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Ok(Vec::new())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: MASTER,
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Teql => Ok((
            Box::new(Teql {
                limit: env.txqueuelen,
                queue: VecDeque::new(),
                stats: QdiscStats::default(),
            }),
            Vec::new(),
        )),
        _ => Err(super::wrong_kind()),
    },
};

/// The master's counters (`teql_master_stats64`): what `ip -s link show teql0` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MasterStats {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets no slave could take although none was busy (a failed resolution; never in tclab).
    pub tx_errors: u64,
    /// Packets dropped: no slave at all, or a slave's driver refused it.
    pub tx_dropped: u64,
}

/// Where `teql_master_xmit` put a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xmit {
    /// Handed to this slave's driver (its ifindex).
    Sent(u32),
    /// Every slave is down or busy: the master stops, the packet stays in its qdisc.
    Busy,
    /// No slave: dropped, counted in `tx_dropped`.
    Dropped,
}

/// `struct teql_master`: the slaves' ring (by ifindex, in `NEXT_SLAVE` order) and its head
/// (`master->slaves`), and the counters.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TeqlMaster {
    ring: Vec<u32>,
    head: usize,
    pub stats: MasterStats,
    /// The master's `IFF_BROADCAST` (`FMASK`): its first slave's, cleared by a slave without it
    /// while the master is down, and on `teql_master_open` set only if every slave has it.
    pub broadcast: bool,
}

impl TeqlMaster {
    /// The slaves in ring order from the head: the order `teql_master_xmit` tries them.
    pub fn slaves(&self) -> Vec<u32> {
        let n = self.ring.len();
        (0..n).map(|k| self.ring[(self.head + k) % n]).collect()
    }

    pub fn is_slave(&self, ifindex: u32) -> bool {
        self.ring.contains(&ifindex)
    }

    /// `teql_qdisc_init`'s insertion: the first slave is the ring; a later one goes right after the
    /// head. The caller has made the kernel's checks ([`TeqlMaster::check_slave`]).
    pub fn attach(&mut self, ifindex: u32) {
        if self.ring.is_empty() {
            self.ring.push(ifindex);
            self.head = 0;
        } else {
            self.ring.insert(self.head + 1, ifindex);
        }
    }

    /// `teql_destroy`: take the slave out of the ring (its oldest entry, for a qdisc replaced by a new
    /// teql0 on the same device, whose entry was inserted after the head); if it was the head, the
    /// next one is. True when the ring is now empty (the master's queue is then reset).
    pub fn detach(&mut self, ifindex: u32, newest_stays: bool) -> bool {
        let n = self.ring.len();
        // The entry `attach` just made sits right after the head; with `newest_stays` the other goes.
        let newest = (n > 1).then_some((self.head + 1) % n);
        let Some(i) = (0..n)
            .map(|k| (self.head + k) % n)
            .find(|&i| self.ring[i] == ifindex && !(newest_stays && Some(i) == newest))
        else {
            return false;
        };
        self.ring.remove(i);
        if i < self.head {
            self.head -= 1;
        }
        if self.head >= self.ring.len() {
            self.head = 0;
        }
        self.ring.is_empty()
    }

    /// `teql_dequeue` finding the slave's own queue empty: this slave becomes the head, and the master
    /// is woken (the caller runs its queue).
    pub fn slave_idle(&mut self, ifindex: u32) {
        if let Some(i) = self.ring.iter().position(|&s| s == ifindex) {
            self.head = i;
        }
    }

    /// Whether `teql_master_xmit` would take a packet now rather than answer busy: some slave can
    /// send, or there is none (the packet is then dropped).
    pub fn ready(&self, can_send: impl Fn(u32) -> bool) -> bool {
        self.ring.is_empty() || self.ring.iter().any(|&s| can_send(s))
    }

    /// `teql_master_xmit` for a packet of `len` bytes: the first slave from the head that
    /// `can_send` (up, its transmit queue not stopped) takes it; the head moves past it only if it
    /// was the head.
    pub fn xmit(&mut self, len: u32, can_send: impl Fn(u32) -> bool) -> Xmit {
        let n = self.ring.len();
        if n == 0 {
            self.stats.tx_dropped += 1;
            return Xmit::Dropped;
        }
        for k in 0..n {
            let i = (self.head + k) % n;
            let slave = self.ring[i];
            if can_send(slave) {
                if i == self.head {
                    self.head = (i + 1) % n;
                }
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += len as u64;
                return Xmit::Sent(slave);
            }
        }
        Xmit::Busy
    }
}

/// The device facts `teql_qdisc_init` and `teql_master_open` read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkFacts {
    pub mtu: u32,
    pub hard_header_len: u32,
    /// `IFF_BROADCAST`, `IFF_MULTICAST` (`IFF_POINTOPOINT` no tclab device has).
    pub broadcast: bool,
    pub multicast: bool,
    pub up: bool,
}

impl TeqlMaster {
    /// `teql_qdisc_init`'s refusals of `slave` under `master`, in its order: a longer link header
    /// than the master's (EINVAL); the master itself (ELOOP); anywhere but the root (EOPNOTSUPP);
    /// while the master is up and has slaves, a slave lacking a flag the master has, or with a
    /// smaller MTU than the master's (EINVAL).
    pub fn check_slave(
        &self,
        master: &LinkFacts,
        slave: &LinkFacts,
        is_master: bool,
        at_root: bool,
    ) -> Result<(), KernelError> {
        use crate::error::Errno;
        if slave.hard_header_len > master.hard_header_len {
            return Err(KernelError::new(Errno::Invalid));
        }
        if is_master {
            return Err(KernelError::new(Errno::Loop));
        }
        if !at_root {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "sch_teql: teql can only be used as root",
            ));
        }
        if !self.ring.is_empty()
            && master.up
            && ((master.broadcast && !slave.broadcast)
                || (master.multicast && !slave.multicast)
                || slave.mtu < master.mtu)
        {
            return Err(KernelError::new(Errno::Invalid));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_of_txqueuelen_packets_counted_as_the_kernel_counts() {
        let env = DevEnv {
            txqueues: 1,
            txqueuelen: 3,
            mtu: 1500,
            hard_header_len: 14,
            speed: 0,
            taprio_offload: false,
        };
        let (mut q, _) =
            (KIND.create)(crate::handle::Handle(0x10000), &QdiscOptions::Teql, &env, 0).unwrap();
        let mut cx = Cx::new(0);
        let v: Vec<_> = (0..4u64)
            .map(|tag| {
                q.enqueue(
                    Packet {
                        tag,
                        ..Packet::of_len(100)
                    },
                    &mut cx,
                )
            })
            .collect();
        assert_eq!(v[..3], [Verdict::Success; 3]);
        assert_eq!(v[3], Verdict::Drop, "the fourth is over txqueuelen 3");
        // teql_enqueue touches neither sch->qstats.backlog nor sch->q.qlen.
        assert_eq!((q.stats().qlen, q.stats().backlog), (0, 0));
        assert!(q.peek(&mut cx).is_none());
        assert_eq!(q.dequeue(&mut cx).map(|p| p.tag), Some(0));
        assert_eq!(
            (q.stats().qlen, q.stats().backlog),
            (2, 0),
            "teql_dequeue sets qlen to what is left; backlog stays 0"
        );
        let tags: Vec<_> = std::iter::from_fn(|| q.dequeue(&mut cx))
            .map(|p| p.tag)
            .collect();
        assert_eq!(tags, [1, 2]);
        let s = q.stats();
        assert_eq!((s.drops, s.packets, s.bytes, s.qlen), (1, 3, 300, 0));
        // teql_dequeue adds the master's root qdisc's queue length, empty slave or not.
        cx.teql_master_qlen = 7;
        assert!(q.dequeue(&mut cx).is_none());
        assert_eq!(q.stats().qlen, 7, "nothing left here, 7 packets in teql0");
        q.enqueue(Packet::of_len(100), &mut cx);
        q.enqueue(Packet::of_len(100), &mut cx);
        q.dequeue(&mut cx);
        assert_eq!(q.stats().qlen, 1 + 7);
    }

    #[test]
    fn slaves_join_after_the_head_and_are_served_in_ring_order() {
        // teql_qdisc_init: A is the ring; B goes after the head A; C after A again: A, C, B.
        let mut m = TeqlMaster::default();
        for s in [1, 2, 3] {
            m.attach(s);
        }
        assert_eq!(m.slaves(), [1, 3, 2]);
        let all = |_| true;
        let sent: Vec<_> = (0..6).map(|_| m.xmit(100, all)).collect();
        use Xmit::Sent;
        assert_eq!(sent, [Sent(1), Sent(3), Sent(2), Sent(1), Sent(3), Sent(2)]);
        assert_eq!((m.stats.tx_packets, m.stats.tx_bytes), (6, 600));
    }

    #[test]
    fn a_busy_or_down_slave_is_skipped_and_the_head_stays() {
        let mut m = TeqlMaster::default();
        m.attach(1);
        m.attach(2);
        // Head 1 busy: 2 takes the packet, and since 2 was not the head the head stays on 1 (the
        // `master->slaves == q` test of teql_master_xmit in Debian's linux-source-6.12, 6.12.117).
        assert_eq!(m.xmit(100, |s| s == 2), Xmit::Sent(2));
        assert_eq!(m.slaves(), [1, 2]);
        assert_eq!(m.xmit(100, |_| false), Xmit::Busy);
        assert!(!m.ready(|_| false));
        assert_eq!(m.stats.tx_packets, 1, "a busy answer counts nothing");
        // Slave 2's qdisc comes up empty: it is the head now.
        m.slave_idle(2);
        assert_eq!(m.xmit(100, |_| true), Xmit::Sent(2));
        assert_eq!(m.slaves(), [1, 2]);
    }

    #[test]
    fn detaching_moves_the_head_and_an_empty_ring_drops() {
        let mut m = TeqlMaster::default();
        for s in [1, 2, 3] {
            m.attach(s);
        }
        // Ring 1, 3, 2 with head 1: removing the head makes its next (3) the head.
        assert!(!m.detach(1, false));
        assert_eq!(m.slaves(), [3, 2]);
        assert!(!m.detach(2, false));
        assert!(m.detach(3, false), "the last slave gone");
        assert!(
            m.ready(|_| false),
            "no slave: the master takes the packet to drop it"
        );
        assert_eq!(m.xmit(100, |_| true), Xmit::Dropped);
        assert_eq!(m.stats.tx_dropped, 1);
        // A qdisc replaced by a new teql0 on the same device: the new entry (after the head) stays.
        m.attach(7);
        m.attach(8);
        m.attach(8);
        assert_eq!(m.slaves(), [7, 8, 8]);
        assert!(!m.detach(8, true));
        assert_eq!(m.slaves(), [7, 8]);
    }

    #[test]
    fn the_kernels_refusals_of_a_slave() {
        let eth = LinkFacts {
            mtu: 1500,
            hard_header_len: 14,
            broadcast: true,
            multicast: true,
            up: true,
        };
        let master = LinkFacts {
            hard_header_len: LL_MAX_HEADER,
            up: false,
            ..eth
        };
        let mut m = TeqlMaster::default();
        use crate::error::Errno;
        let errno = |m: &TeqlMaster, master, slave, is_master, at_root| {
            m.check_slave(master, slave, is_master, at_root)
                .map_err(|e| e.errno)
        };
        assert_eq!(errno(&m, &master, &master, true, true), Err(Errno::Loop));
        let long = LinkFacts {
            hard_header_len: 200,
            ..eth
        };
        assert_eq!(errno(&m, &master, &long, false, true), Err(Errno::Invalid));
        assert_eq!(
            m.check_slave(&master, &eth, false, false)
                .unwrap_err()
                .msg
                .as_deref(),
            Some("sch_teql: teql can only be used as root")
        );
        m.attach(1);
        let small = LinkFacts { mtu: 1400, ..eth };
        let dummy = LinkFacts {
            multicast: false,
            ..eth
        };
        // Master down: anything goes (its MTU and flags follow the slaves instead).
        assert_eq!(errno(&m, &master, &small, false, true), Ok(()));
        assert_eq!(errno(&m, &master, &dummy, false, true), Ok(()));
        let up = LinkFacts {
            up: true,
            multicast: true,
            ..master
        };
        assert_eq!(errno(&m, &up, &small, false, true), Err(Errno::Invalid));
        assert_eq!(errno(&m, &up, &dummy, false, true), Err(Errno::Invalid));
        assert_eq!(errno(&m, &up, &eth, false, true), Ok(()));
    }
}
