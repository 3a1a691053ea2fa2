//! tclab's second driver: the engine that the simulator runs in virtual time, run on real frames.
//!
//! - [`bridge`]: `tclab live --dev A --dev B --policy FILE` — a user-space bridge between two
//!   interfaces. A frame arriving on one passes that device's ingress (filters, police, mirred to an
//!   ifb) and the netfilter stage, then leaves on the other through its egress qdisc tree, with
//!   `qdisc_run` from core's `host.rs` as in the simulator. The clock is `CLOCK_MONOTONIC`.
//! - [`queues`]: `tclab live --queues N` — one engine and thread per transmit queue under an mq root,
//!   frames spread over them by flow (`PACKET_FANOUT_HASH`), control calls answered by all of them.
//! - [`frame`]: frames to packets and back (the link header kept aside, the packet from its network
//!   header on, as a qdisc sees an skb).
//! - [`lab`]: `tclab lab up|down|exec|status` — seed 000's node-1 / router / node-2 as network
//!   namespaces, the router bridged by `tclab live` (or by the kernel, to compare).
//! - [`sampler`]: rates, backlogs and drops of every device and class over a live run (CSV).
//! - [`source`]: a traffic source of its own (prebuilt UDP frames, paced, past the qdisc) for
//!   measuring shapers above what iperf3 offers, counted at the far end by the kernel.
//! - [`spin`]: when the loop spins and when it sleeps (the idle window, the margin before a deadline).
//! - [`sys`]: the system calls, every `unsafe` of the crate but AF_XDP's.
//! - [`xdp`]: AF_XDP ports (`--xdp`): the XDP program, the UMEM and its four rings.
//! - [`fuzz`]: the receive path's fuzz body (hostile frames through a detached bridge).
//! - [`vethns`]: a throwaway namespace of veth pairs for the tests and benchmarks on real interfaces.
//!
//! Traffic while tclab is not running: the router's interfaces carry no addresses and the kernel does
//! not bridge them, so nothing passes — a bump in the wire that fails closed. Stopping `tclab live`
//! (SIGINT, SIGTERM, SIGHUP) drops what its queues held.

pub mod bridge;
pub mod frame;
pub mod fuzz;
pub mod lab;
pub mod queues;
pub mod sampler;
pub mod source;
pub mod spin;
pub mod sys;
pub mod vethns;
pub mod xdp;
