//! plug — hold packets until told to release them, after `net/sched/sch_plug.c`.
//!
//! A byte-limited FIFO whose output is switched by commands rather than by time: `tc qdisc change …
//! plug block` inserts a plug (the packets queued so far form the *last epoch*, new ones the current
//! one), `release` lets the queue run up to the oldest plug (the last epoch's packets are added to those
//! that may leave), `release_indefinite` removes every plug and makes the qdisc a plain FIFO until the
//! next `block`. It serves output commit for checkpointing systems (Remus): a VM's packets of an epoch
//! leave only once the checkpoint of that epoch is safe. A new plug qdisc starts blocked.
//!
//! The limit is in bytes: `txqueuelen × psched_mtu` without options; with options (any `tc qdisc add …
//! plug WORD`), the `limit` tc sends, which is 0 unless `limit` was given — the kernel's `plug_init`
//! reads only the limit, so `tc qdisc add … plug block` makes a plug that drops everything. A release
//! does not wake the device by itself here: the driver asks again at its next event.

use super::{Cx, DevEnv, DropReason, Qdisc, QdiscOptions, QdiscStats};
use super::{PeekDequeued, Peeked, Verdict};
use crate::error::{Errno, KernelError, Warning};
use crate::packet::Packet;
use crate::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `TCQ_PLUG_BUFFER`, `TCQ_PLUG_RELEASE_ONE`, `TCQ_PLUG_RELEASE_INDEFINITE`, `TCQ_PLUG_LIMIT`.
pub const BUFFER: i32 = 0;
pub const RELEASE_ONE: i32 = 1;
pub const RELEASE_INDEFINITE: i32 = 2;
pub const LIMIT: i32 = 3;

/// `struct tc_plug_qopt`: a command and a limit in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlugMsg {
    pub action: i32,
    pub limit: u32,
}

/// What tc sends: nothing without words, else one message. plug dumps nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlugOptions {
    pub msg: Option<PlugMsg>,
}

/// In a snapshot ([`crate::snapshot`]) with nothing queued: plugged or not, and the epochs' counts.
#[derive(Serialize, Deserialize)]
pub struct Plug {
    unplug_indefinite: bool,
    throttled: bool,
    limit: u32,
    pkts_current_epoch: u32,
    pkts_last_epoch: u32,
    pkts_to_release: u32,
    #[serde(skip)]
    queue: VecDeque<Packet>,
    stats: QdiscStats,
    #[serde(skip)]
    peeked: Peeked,
}

impl Plug {
    /// `plug_init`.
    pub fn new(o: &PlugOptions, env: &DevEnv) -> Plug {
        Plug {
            unplug_indefinite: false,
            throttled: true,
            limit: match o.msg {
                None => env.txqueuelen.wrapping_mul(env.psched_mtu()),
                Some(m) => m.limit,
            },
            pkts_current_epoch: 0,
            pkts_last_epoch: 0,
            pkts_to_release: 0,
            queue: VecDeque::new(),
            stats: QdiscStats::default(),
            peeked: Peeked::default(),
        }
    }
}

impl PeekDequeued for Plug {
    fn held(&mut self) -> (&mut Peeked, &mut QdiscStats) {
        (&mut self.peeked, &mut self.stats)
    }

    /// `plug_dequeue`.
    fn dequeue_fresh(&mut self, _cx: &mut Cx) -> Option<Packet> {
        if self.throttled {
            return None;
        }
        if !self.unplug_indefinite {
            if self.pkts_to_release == 0 {
                self.throttled = true;
                return None;
            }
            self.pkts_to_release -= 1;
        }
        let pkt = self.queue.pop_front()?;
        self.stats.count_unqueued(&pkt);
        self.stats.count_sent(&pkt);
        Some(pkt)
    }
}

impl Qdisc for Plug {
    fn kind(&self) -> &'static str {
        "plug"
    }

    fn save(&self) -> Option<Vec<u8>> {
        (self.queue.is_empty() && self.peeked.get().is_none())
            .then(|| crate::snapshot::save(self))
            .flatten()
    }

    /// `plug_enqueue`: tail drop past the byte limit.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Verdict {
        if self.stats.backlog as u64 + pkt.len as u64 <= self.limit as u64 {
            if !self.unplug_indefinite {
                self.pkts_current_epoch += 1;
            }
            self.stats.count_queued(&pkt);
            self.queue.push_back(pkt);
            return Verdict::Success;
        }
        self.stats.drops += 1;
        cx.drop_arriving(pkt, DropReason::TailDrop);
        Verdict::Drop
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.dequeue_peeked(cx)
    }

    fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        self.peek_dequeued(cx)
    }

    /// `qdisc_reset_queue`: the packets go; the plugs and epochs stay.
    fn reset(&mut self) {
        self.queue.clear();
        self.peeked.clear();
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn dump(&self) -> QdiscOptions {
        QdiscOptions::Plug(PlugOptions::default())
    }

    /// `plug_change`: one command.
    fn change(
        &mut self,
        opts: &QdiscOptions,
        _env: &DevEnv,
        _now: Nanos,
    ) -> Result<Vec<Warning>, KernelError> {
        let QdiscOptions::Plug(o) = opts else {
            return Err(KernelError::new(Errno::Invalid));
        };
        let Some(m) = o.msg else {
            return Ok(Vec::new());
        };
        match m.action {
            BUFFER => {
                self.pkts_last_epoch = self.pkts_current_epoch;
                self.pkts_current_epoch = 0;
                if self.unplug_indefinite {
                    self.throttled = true;
                }
                self.unplug_indefinite = false;
            }
            RELEASE_ONE => {
                self.pkts_to_release = self.pkts_to_release.wrapping_add(self.pkts_last_epoch);
                self.pkts_last_epoch = 0;
                self.throttled = false;
            }
            RELEASE_INDEFINITE => {
                self.unplug_indefinite = true;
                self.pkts_to_release = 0;
                self.pkts_last_epoch = 0;
                self.pkts_current_epoch = 0;
                self.throttled = false;
            }
            LIMIT => self.limit = m.limit,
            _ => return Err(KernelError::new(Errno::Invalid)),
        }
        Ok(Vec::new())
    }
}

pub const KIND: super::QdiscKind = super::QdiscKind {
    name: "plug",
    create: |_handle, opts, env, _now| match opts {
        QdiscOptions::Plug(o) => Ok((Box::new(Plug::new(o, env)), Vec::new())),
        _ => Err(super::wrong_kind()),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: DevEnv = DevEnv {
        txqueues: 1,
        txqueuelen: 1000,
        mtu: 1500,
        hard_header_len: 14,
        speed: 0,
        taprio_offload: false,
    };

    fn cmd(q: &mut Plug, action: i32) {
        let o = PlugOptions {
            msg: Some(PlugMsg { action, limit: 0 }),
        };
        q.change(&QdiscOptions::Plug(o), &ENV, 0).unwrap();
    }

    #[test]
    fn epochs_leave_one_release_at_a_time() {
        let mut q = Plug::new(&PlugOptions::default(), &ENV);
        let mut cx = Cx::new(0);
        let mut send = |q: &mut Plug, tag| {
            let p = Packet {
                tag,
                ..Packet::of_len(100)
            };
            assert_eq!(q.enqueue(p, &mut cx), Verdict::Success);
        };
        let take = |q: &mut Plug| {
            let mut v = Vec::new();
            while let Some(p) = q.dequeue(&mut Cx::new(0)) {
                v.push(p.tag);
            }
            v
        };
        // Epoch 1: packets 1, 2; plug; epoch 2: packet 3; plug; packet 4 (epoch 3).
        send(&mut q, 1);
        send(&mut q, 2);
        assert!(take(&mut q).is_empty(), "a new plug starts blocked");
        cmd(&mut q, BUFFER);
        send(&mut q, 3);
        cmd(&mut q, BUFFER);
        send(&mut q, 4);
        // One release lets the oldest complete epoch out — here epoch 2's one packet counts, since the
        // second plug made epoch 2 the last; the first plug's epoch (2 packets) was overwritten.
        cmd(&mut q, RELEASE_ONE);
        assert_eq!(take(&mut q), [1]);
        cmd(&mut q, RELEASE_INDEFINITE);
        assert_eq!(take(&mut q), [2, 3, 4]);
        send(&mut q, 5);
        assert_eq!(take(&mut q), [5]);
        // A limit of 150 bytes holds one 100-byte packet.
        let o = PlugOptions {
            msg: Some(PlugMsg {
                action: LIMIT,
                limit: 150,
            }),
        };
        q.change(&QdiscOptions::Plug(o), &ENV, 0).unwrap();
        cmd(&mut q, BUFFER);
        send(&mut q, 6);
        let p = Packet::of_len(100);
        assert_eq!(q.enqueue(p, &mut Cx::new(0)), Verdict::Drop);
        assert_eq!(q.stats().drops, 1);
    }
}
