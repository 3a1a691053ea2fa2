//! ETF, Earliest TxTime First (`sch_etf.c`): each packet carries the time it must leave (its launch
//! time, `skb->tstamp`, which an application sets with `SO_TXTIME`), and the qdisc sends packets in the
//! order of those times, each no earlier than `delta` ns before its own.
//!
//! Enqueue refuses (drops) a packet whose launch time is already past, or earlier than the last one
//! sent; unless `skip_sock_check` is set it also needs the sending socket to have asked for launch
//! times (`SO_TXTIME`, with the qdisc's clock and deadline mode). Queued packets are kept sorted by
//! launch time (equal times in arrival order). Dequeue looks at the earliest: past its launch time, it
//! and every other expired packet are dropped (each an overlimit too); in `deadline_mode` it leaves at
//! once (its time was a deadline), stamped with now; otherwise it leaves from `txtime − delta` on, and
//! the qdisc asks to be woken then.
//!
//! tclab's time is the packet's virtual time (`Cx::now`); every clock is that clock, and the kernel
//! accepts only `CLOCK_TAI`. No simulated socket sets `SO_TXTIME`, so without `skip_sock_check` every
//! packet is dropped, as the kernel drops packets of sockets without it. Drops are counted with the
//! reason `Overlimit` (the packet cannot be sent in its time); expired packets dropped during a
//! dequeue are taken off the ancestors' backlog. Offload is refused as on a device without
//! `ndo_setup_tc`; `tc qdisc change` is refused, as ETF has no `change`.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `CLOCK_TAI`, the one clock ETF accepts.
pub const CLOCK_TAI: i32 = 11;
/// `TC_ETF_*` flags.
pub const DEADLINE_MODE_ON: u32 = 1;
pub const OFFLOAD_ON: u32 = 2;
pub const SKIP_SOCK_CHECK: u32 = 4;

/// `struct tc_etf_qopt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtfOptions {
    pub delta: i32,
    pub clockid: i32,
    pub flags: u32,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: the last launch time comes with it.
#[derive(Serialize, Deserialize)]
pub struct Etf {
    // Parameters.
    delta: u64,
    clockid: i32,
    flags: u32,
    // Variables.
    /// Queued packets by (launch time, arrival number): `rb_first_cached` is the first entry.
    #[serde(skip)]
    queue: BTreeMap<(Nanos, u64), Packet>,
    arrivals: u64,
    /// The launch time of the last packet sent (`q->last`).
    last: Nanos,
    stats: QdiscStats,
}

impl Etf {
    /// `etf_init`: `validate_input_params`, the offload check, then the parameters.
    pub fn new(o: &EtfOptions) -> Result<Etf, KernelError> {
        if o.clockid < 0 {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Dynamic clockids are not supported",
            ));
        }
        if o.clockid != CLOCK_TAI {
            return Err(KernelError::invalid(
                "Invalid clockid. CLOCK_TAI must be used",
            ));
        }
        if o.delta < 0 {
            return Err(KernelError::invalid("Delta must be positive"));
        }
        if o.flags & OFFLOAD_ON != 0 {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "Specified device does not support ETF offload",
            ));
        }
        Ok(Etf {
            delta: o.delta as u64,
            clockid: o.clockid,
            flags: o.flags,
            queue: BTreeMap::new(),
            arrivals: 0,
            last: 0,
            stats: QdiscStats::default(),
        })
    }

    /// `is_packet_valid`: a socket that asked for launch times (none does in tclab), unless skipped;
    /// a launch time neither past nor before the last one sent.
    fn valid(&self, pkt: &Packet, now: Nanos) -> bool {
        if self.flags & SKIP_SOCK_CHECK == 0 {
            return false;
        }
        pkt.tstamp >= now && pkt.tstamp >= self.last
    }

    /// `reset_watchdog`: be woken when the earliest packet may leave.
    fn rearm(&self, cx: &mut Cx) {
        if let Some(&(t, _)) = self.queue.keys().next() {
            cx.schedule(t.saturating_sub(self.delta));
        }
    }
}

impl Qdisc for Etf {
    fn kind(&self) -> &'static str {
        "etf"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.queue.is_empty())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `etf_enqueue_timesortedlist`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        if !self.valid(&pkt, cx.now) {
            self.stats.drops += 1;
            cx.drop_arriving(pkt, DropReason::Overlimit);
            return Verdict::Drop;
        }
        self.stats.backlog += pkt.len;
        self.stats.qlen += 1;
        self.arrivals += 1;
        self.queue.insert((pkt.tstamp, self.arrivals), pkt);
        self.rearm(cx);
        Verdict::Success
    }

    /// `etf_dequeue_timesortedlist`.
    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        let &(t, n) = self.queue.keys().next()?;
        let now = cx.now;
        let out = if t < now {
            // `timesortedlist_drop`: every packet whose time has passed.
            let (mut packets, mut bytes) = (0, 0);
            while let Some(e) = self.queue.first_entry().filter(|e| e.key().0 < now) {
                let p = e.remove();
                self.stats.backlog -= p.len;
                self.stats.qlen -= 1;
                self.stats.drops += 1;
                self.stats.overlimits += 1;
                packets += 1;
                bytes += i64::from(p.len);
                cx.drop_queued(p, DropReason::Overlimit);
            }
            cx.reduce_backlog(packets, bytes);
            None
        } else if self.flags & DEADLINE_MODE_ON != 0 || now >= t.saturating_sub(self.delta) {
            // The kernel sends once now is strictly after txtime − delta: its watchdog, set for that
            // time, fires a little later. Virtual time wakes exactly then, hence `>=`.
            let mut p = self.queue.remove(&(t, n))?;
            self.stats.backlog -= p.len;
            self.stats.qlen -= 1;
            self.stats.count_sent(&p);
            self.last = p.tstamp;
            if self.flags & DEADLINE_MODE_ON != 0 {
                p.tstamp = now;
            }
            Some(p)
        } else {
            None
        };
        self.rearm(cx);
        out
    }

    /// `etf_peek_timesortedlist`: the earliest, due or not.
    fn peek(&mut self, _cx: &mut Cx) -> Option<&Packet> {
        self.queue.values().next()
    }

    /// `etf_reset`.
    fn reset(&mut self) {
        self.queue.clear();
        self.stats.backlog = 0;
        self.stats.qlen = 0;
        self.last = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Etf(EtfOptions {
            delta: self.delta as i32,
            clockid: self.clockid,
            flags: self.flags,
        })
    }

    fn change(
        &mut self,
        _opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        Err(super::change_not_supported())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "etf",
    create: |_handle: Handle, opts, _env, _now| match opts {
        QdiscOptions::Etf(o) => Ok((Box::new(Etf::new(o)?), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn etf(delta: i32, flags: u32) -> Etf {
        Etf::new(&EtfOptions {
            delta,
            clockid: CLOCK_TAI,
            flags,
        })
        .unwrap()
    }

    fn at(tstamp: Nanos, tag: u64) -> Packet {
        Packet {
            tstamp,
            tag,
            ..Packet::of_len(100)
        }
    }

    #[test]
    fn packets_leave_in_launch_time_order_within_delta_of_it() {
        let mut q = etf(50, SKIP_SOCK_CHECK);
        let mut cx = Cx::new(0);
        for (t, tag) in [(3_000, 1), (1_000, 2), (2_000, 3), (1_000, 4)] {
            assert_eq!(q.enqueue(at(t, tag), &mut cx), Verdict::Success);
        }
        assert_eq!(cx.wake_at, Some(950), "the earliest launch time less delta");
        let mut out = Vec::new();
        let mut now = 0;
        while out.len() < 4 {
            let mut cx = Cx::new(now);
            match q.dequeue(&mut cx) {
                Some(p) => out.push((now, p.tag)),
                None => now = cx.wake_at.unwrap(),
            }
        }
        // Sent when woken at txtime − delta; equal times in arrival order.
        assert_eq!(out, [(950, 2), (950, 4), (1_950, 3), (2_950, 1)]);
    }

    #[test]
    fn past_and_late_packets_are_dropped() {
        let mut q = etf(0, SKIP_SOCK_CHECK);
        let mut cx = Cx::new(5_000);
        assert_eq!(
            q.enqueue(at(4_999, 1), &mut cx),
            Verdict::Drop,
            "already past"
        );
        q.enqueue(at(6_000, 2), &mut cx);
        q.enqueue(at(7_000, 3), &mut cx);
        // Dequeued too late: both have expired; dropped as overlimits.
        let mut late = Cx::new(8_000);
        assert!(q.dequeue(&mut late).is_none());
        assert_eq!((q.stats.drops, q.stats.overlimits, q.stats.qlen), (3, 2, 0));
        assert_eq!(late.tree_reduced, (2, 200));
        // Without skip_sock_check no tclab socket qualifies.
        let mut strict = etf(0, 0);
        assert_eq!(strict.enqueue(at(9_000, 4), &mut Cx::new(0)), Verdict::Drop);
    }

    #[test]
    fn deadline_mode_sends_at_once_and_restamps() {
        let mut q = etf(0, SKIP_SOCK_CHECK | DEADLINE_MODE_ON);
        q.enqueue(at(10_000, 1), &mut Cx::new(0));
        let p = q.dequeue(&mut Cx::new(100)).expect("at once");
        assert_eq!(p.tstamp, 100);
    }

    #[test]
    fn kernel_refusals() {
        let e = |clockid, delta, flags| {
            Etf::new(&EtfOptions {
                delta,
                clockid,
                flags,
            })
            .err()
            .unwrap()
            .to_string()
        };
        assert!(e(-1, 0, 0).contains("Dynamic clockids"));
        assert!(e(1, 0, 0).contains("CLOCK_TAI must be used"));
        assert!(e(CLOCK_TAI, -5, 0).contains("Delta must be positive"));
        assert!(e(CLOCK_TAI, 0, OFFLOAD_ON).contains("does not support ETF offload"));
    }
}
