//! # tclab-core — Linux traffic control, in user space
//!
//! The engine shared by the simulator and the live driver. It owns no clock, no thread and no I/O: every
//! call that depends on time receives `now` in nanoseconds, and a shaper that holds packets it may not send yet
//! says when it wants to be asked again (see [`qdisc::Cx`]). That one rule makes the same code deterministic
//! in virtual time and correct against a real clock.
//!
//! Map of the crate, after the kernel's `net/sched/`:
//!
//! - [`units`]: rates, sizes and times as the kernel stores them, and the kernel's rate arithmetic
//!   (`psched_ratecfg`: bytes to nanoseconds by multiply-and-shift, overhead, mpu, ATM cells).
//! - [`handle`]: `major:minor` qdisc and class handles.
//! - [`packet`]: wire bytes plus the metadata a qdisc reads (length, mark, priority, classid, enqueue time).
//! - [`qdisc`]: the `Qdisc` and `ClassOps` traits, counters, and one file per discipline:
//!   [`qdisc::fifo`] (pfifo, bfifo), [`qdisc::pfifo_fast`], [`qdisc::tbf`], [`qdisc::htb`],
//!   [`qdisc::sfq`], [`qdisc::prio`], [`qdisc::cbq`], [`qdisc::drr`], [`qdisc::ingress`],
//!   [`qdisc::codel`] and [`qdisc::fq_codel`] (sharing [`qdisc::codel_impl`]); found through
//!   [`qdisc::KINDS`].
//! - [`stab`]: size tables (`stab … linklayer atm`), the length the root qdisc charges.
//! - [`flow`]: the flow dissector and keyed flow hash of the per-flow disciplines.
//! - [`engine`]: devices (mtu, txqueuelen, root qdisc) and the `tc` operations on them — add, change,
//!   replace, delete, graft — validated before anything is applied.
//! - [`host`]: the host stack around the qdiscs, shared by both drivers: the netfilter hooks in Linux's
//!   order for output, input and forwarding, the MTU check, and `qdisc_run` over a [`host::Transmitter`].
//! - [`netfilter`]: the iptables mangle table (MARK, CONNMARK, CLASSIFY, DSCP, TOS) and the connection
//!   tracking it needs, run at the five IPv4 hooks.
//! - [`filter`]: classifiers (u32, fw, matchall) in blocks of chains, walked as `tcf_classify` walks them;
//!   [`action`]: what a matched filter does (gact, police, skbedit) and the shared action table.
//! - [`wire`]: bounds-checked views of packet bytes for the classifiers; [`csum`]: Internet checksums as
//!   the kernel computes them, for the actions that rewrite bytes (nat, csum, pedit); [`bpf`]: classic
//!   BPF, checked as `bpf_check_classic` checks it and run over a packet's frame (cls_bpf).
//! - [`snapshot`]: the engine's state as bytes and back, which the policy store keeps beside its
//!   journal.
//! - [`error`]: the errors the "kernel" answers with, worded as Linux words them.

pub mod action;
pub mod bpf;
pub mod csum;
pub mod cx;
pub mod engine;
pub mod error;
pub mod fib;
pub mod filter;
pub mod flow;
pub mod handle;
pub mod host;
pub mod netfilter;
pub mod packet;
pub mod qdisc;
pub mod snapshot;
pub mod stab;
pub mod units;
pub mod wire;

pub use engine::{Device, Engine};
pub use error::{KernelError, Warning};
pub use handle::Handle;
pub use packet::Packet;
pub use qdisc::{ClassOps, Cx, Qdisc, QdiscStats};

/// Nanoseconds since an arbitrary epoch: virtual time in the simulator, CLOCK_MONOTONIC live.
pub type Nanos = u64;
pub const NSEC_PER_SEC: u64 = 1_000_000_000;
