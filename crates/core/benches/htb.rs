//! `cargo bench -p tclab-core --bench htb`: cost per packet of a 2-level HTB with N backlogged leaves
//! (seed 002: HTB3's cost must stay flat as classes grow). One root class of 10 Gbit, N leaves sharing it
//! (ceil 10 Gbit), two 1500-byte packets queued per leaf. Each step dequeues one packet, advances virtual
//! time by its transmission time at 10 Gbit (1.2 µs), and enqueues it again to its class, so the tree stays
//! backlogged. Two leaf rates:
//!
//! - `own rate`: rate 10 Gbit / N. Each leaf is served exactly at its rate, so every leaf stays green: this
//!   measures the row's deficit round robin, the charging of leaf and root, classify and the leaf queues.
//! - `borrowing`: rate 10 Gbit / 2N. Each leaf gets twice its rate, half of it borrowed from the root, so
//!   leaves keep changing mode: this adds the wait queue, the events, and moving classes between the row
//!   and the root's feed.
//!
//! N tops out at 65 534 leaves (minors 2..ffff under root class 1:1): a classid minor is 16 bits, so one HTB
//! qdisc cannot hold 100 000 classes (the N = 100 000 is impossible in Linux as well).
//! Reports nanoseconds per packet (one enqueue + one dequeue) of wall time and, for HTB, of the thread's
//! CPU time too (`/proc/thread-self/schedstat`: on a shared machine wall time also counts the time the
//! bench waited for a core; both are printed, neither hides the other).
//!
//! HFSC beside it, the same tree (class 1:1 `ls rate 10gbit` under the qdisc's root class 1:, N leaves
//! under 1:1, two packets each):
//!
//! - `hfsc ls`: leaves `ls rate 10gbit/N` — link sharing only: the virtual-time trees of 1:1 and 1:.
//! - `hfsc sc`: leaves `sc rate 10gbit/2N` — real time and link sharing: every leaf is also in the eligible
//!   tree, whose earliest deadline among the eligible classes the kernel's `eltree_get_mindl` finds by a
//!   scan and tclab's by the first of a deadline-ordered tree.
//!
//! The flat classful disciplines beside them (`-- flat`): N classes directly under the qdisc, two packets
//! each, every packet naming its class by `skb->priority` and re-enqueued to it:
//!
//! - `drr` (quantum 1514) and `qfq` (weight 1, maxpkt 1514: eight classes an aggregate) with 1 to 65 534
//!   classes — DRR is a round robin over its active list, QFQ an O(1) scheduler over groups and slots;
//! - `prio` and `ets` (all bands sharing, quantum 1514) with 2, 3, 8 and 16 bands, the most they have.
//!
//! `cargo bench -p tclab-core --bench htb -- hfsc` runs only HFSC; `-- htb` only HTB; `-- flat` only these;
//! `TCLAB_BENCH_LEAVES=10000` only that size; `TCLAB_BENCH_HTB=own` or `borrowing` one HTB column.

use std::hint::black_box;
use std::time::Instant;
use tclab_core::engine::Flags;
use tclab_core::qdisc::drr::DrrClassOptions;
use tclab_core::qdisc::ets::EtsOptions;
use tclab_core::qdisc::hfsc::{HfscClassOptions, HfscOptions, ServiceCurve};
use tclab_core::qdisc::htb::{HtbClassOptions, HtbOptions};
use tclab_core::qdisc::prio::PrioOptions;
use tclab_core::qdisc::qfq::QfqClassOptions;
use tclab_core::qdisc::{ClassOptions, Cx, QdiscOptions};
use tclab_core::units::RateSpec;
use tclab_core::{Engine, Handle, Packet};

fn class(rate: u64, ceil: u64) -> ClassOptions {
    let ticks = |b: u64, r: u64| ((b as u128 * 1_000_000_000 / r as u128) >> 6) as u32;
    ClassOptions::Htb(HtbClassOptions {
        rate: RateSpec {
            rate,
            ..Default::default()
        },
        ceil: RateSpec {
            rate: ceil,
            ..Default::default()
        },
        buffer: ticks(1600 + rate / 1_000_000_000, rate),
        cbuffer: ticks(1600 + ceil / 1_000_000_000, ceil),
        quantum: 1500,
        prio: 0,
        level: 0,
    })
}

/// `share`: each leaf's rate is the link's / (`share` * n).
fn build(n: u32, share: u64) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let root = QdiscOptions::Htb(HtbOptions {
        version: 3,
        ..Default::default()
    });
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&root),
        Flags::ADD,
        0,
    )
    .unwrap();
    let link = 1_250_000_000u64; // 10 Gbit/s in bytes
    e.modify_class(
        "eth0",
        Handle::new(1, 0),
        Handle::new(1, 1),
        &class(link, link),
        Flags::ADD,
        0,
    )
    .unwrap();
    for i in 0..n {
        // Minors 2.. (hex digits of the classid are just numbers here).
        let id = Handle(0x1_0000 | (i + 2));
        e.modify_class(
            "eth0",
            Handle::new(1, 1),
            id,
            &class((link / (share * n as u64)).max(1), link),
            Flags::ADD,
            0,
        )
        .unwrap();
        let dev = e.device_mut("eth0").unwrap();
        for _ in 0..2 {
            dev.enqueue(
                Packet {
                    priority: id.0,
                    ..Packet::of_len(1500)
                },
                &mut Cx::new(0),
            );
        }
    }
    e
}

/// The tree sizes to run: `TCLAB_BENCH_LEAVES=10000` picks one (for a profiler), else `all`.
fn sizes(all: &[u32]) -> Vec<u32> {
    match std::env::var("TCLAB_BENCH_LEAVES") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => all.to_vec(),
    }
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let want = |k: &str| filter.as_deref().is_none_or(|f| k.contains(f));
    if want("htb") {
        println!(
            "{:>8} {:>12} {:>22} {:>22} {:>10} {:>10}",
            "leaves",
            "packets",
            "own rate ns/packet",
            "borrowing ns/packet",
            "own cpu",
            "borr. cpu"
        );
        // `TCLAB_BENCH_HTB=own` or `borrowing` runs one column (for a profiler).
        let only = std::env::var("TCLAB_BENCH_HTB").unwrap_or_default();
        for n in sizes(&[1, 100, 10_000, 65_534]) {
            let (own, own_cpu) = if only == "borrowing" {
                (f64::NAN, f64::NAN)
            } else {
                run_timed(build(n, 1), n)
            };
            let (borrowing, borrowing_cpu) = if only == "own" {
                (f64::NAN, f64::NAN)
            } else {
                run_timed(build(n, 2), n)
            };
            println!(
                "{n:>8} {:>12} {own:>22.1} {borrowing:>22.1} {own_cpu:>10.1} {borrowing_cpu:>10.1}",
                2_000_000
            );
        }
    }
    if want("hfsc") {
        println!(
            "{:>8} {:>12} {:>22} {:>22}",
            "leaves", "packets", "hfsc ls ns/packet", "hfsc sc ns/packet"
        );
        for n in sizes(&[1, 100, 10_000, 65_534]) {
            // `TCLAB_BENCH_HFSC=ls` or `sc` runs one column (for a profiler).
            let only = std::env::var("TCLAB_BENCH_HFSC").unwrap_or_default();
            let ls = if only == "sc" {
                f64::NAN
            } else {
                run(build_hfsc(n, false), n)
            };
            let sc = if only == "ls" {
                f64::NAN
            } else {
                run(build_hfsc(n, true), n)
            };
            println!("{n:>8} {:>12} {ls:>22.1} {sc:>22.1}", 2_000_000);
        }
    }
    if want("flat") {
        println!(
            "{:>8} {:>12} {:>22} {:>22}",
            "classes", "packets", "drr ns/packet", "qfq ns/packet"
        );
        for n in sizes(&[1, 100, 10_000, 65_534]) {
            let drr = run(build_flat(n, Flat::Drr), n);
            let qfq = run(build_flat(n, Flat::Qfq), n);
            println!("{n:>8} {:>12} {drr:>22.1} {qfq:>22.1}", 2_000_000);
        }
        println!(
            "{:>8} {:>12} {:>22} {:>22}",
            "bands", "packets", "prio ns/packet", "ets ns/packet"
        );
        for n in sizes(&[2, 3, 8, 16]) {
            let prio = run(build_flat(n, Flat::Prio), n);
            let ets = run(build_flat(n, Flat::Ets), n);
            println!("{n:>8} {:>12} {prio:>22.1} {ets:>22.1}", 2_000_000);
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flat {
    Drr,
    Qfq,
    Prio,
    Ets,
}

/// A flat qdisc 1: with `n` classes (DRR, QFQ) or bands (PRIO, ETS: all bands sharing), 1:1 … 1:n, two
/// 1500-byte packets queued in each.
fn build_flat(n: u32, kind: Flat) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let qdisc = match kind {
        Flat::Drr => QdiscOptions::Drr,
        Flat::Qfq => QdiscOptions::Qfq,
        Flat::Prio => QdiscOptions::Prio(PrioOptions {
            bands: n as i32,
            priomap: [0; 16],
        }),
        Flat::Ets => QdiscOptions::Ets(EtsOptions {
            nbands: n as u8,
            ..Default::default()
        }),
    };
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&qdisc),
        Flags::ADD,
        0,
    )
    .unwrap();
    for i in 0..n {
        let id = Handle(0x1_0000 | (i + 1));
        let opts = match kind {
            Flat::Drr => Some(ClassOptions::Drr(DrrClassOptions { quantum: None })),
            Flat::Qfq => Some(ClassOptions::Qfq(QfqClassOptions {
                weight: Some(1),
                lmax: Some(1514),
            })),
            Flat::Prio | Flat::Ets => None,
        };
        if let Some(o) = opts {
            e.modify_class("eth0", Handle::new(1, 0), id, &o, Flags::ADD, 0)
                .unwrap();
        }
        let dev = e.device_mut("eth0").unwrap();
        for _ in 0..2 {
            dev.enqueue(
                Packet {
                    priority: id.0,
                    ..Packet::of_len(1500)
                },
                &mut Cx::new(0),
            );
        }
    }
    e
}

/// An HFSC tree of `n` leaves under 1:1 on a 10 Gbit/s link: `ls` leaves, or `sc` leaves (`rt`).
fn build_hfsc(n: u32, rt: bool) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Hfsc(HfscOptions::default())),
        Flags::ADD,
        0,
    )
    .unwrap();
    let link = 1_250_000_000u32; // 10 Gbit/s in bytes
    let curve = |m2: u32| ServiceCurve { m1: 0, d: 0, m2 };
    let top = ClassOptions::Hfsc(HfscClassOptions {
        rsc: None,
        fsc: Some(curve(link)),
        usc: None,
    });
    e.modify_class(
        "eth0",
        Handle::new(1, 0),
        Handle::new(1, 1),
        &top,
        Flags::ADD,
        0,
    )
    .unwrap();
    for i in 0..n {
        let id = Handle(0x1_0000 | (i + 2));
        let leaf = if rt {
            let c = curve((link / (2 * n)).max(1));
            HfscClassOptions {
                rsc: Some(c),
                fsc: Some(c),
                usc: None,
            }
        } else {
            HfscClassOptions {
                rsc: None,
                fsc: Some(curve((link / n).max(1))),
                usc: None,
            }
        };
        e.modify_class(
            "eth0",
            Handle::new(1, 1),
            id,
            &ClassOptions::Hfsc(leaf),
            Flags::ADD,
            0,
        )
        .unwrap();
        let dev = e.device_mut("eth0").unwrap();
        for _ in 0..2 {
            dev.enqueue(
                Packet {
                    priority: id.0,
                    ..Packet::of_len(1500)
                },
                &mut Cx::new(0),
            );
        }
    }
    e
}

/// Nanoseconds per packet over 2 000 000 steps, after a warm-up pass over every leaf.
fn run(e: Engine, n: u32) -> f64 {
    run_timed(e, n).0
}

/// This thread's CPU time so far in ns (`/proc/thread-self/schedstat`'s first field), if readable.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// [`run`]'s wall time and CPU time per packet (NaN where the CPU time is not readable).
fn run_timed(mut e: Engine, n: u32) -> (f64, f64) {
    let dev = e.device_mut("eth0").unwrap();
    let mut now = 0u64;
    // TCLAB_BENCH_STEPS shortens the run (e.g. under valgrind's callgrind, to count instructions and
    // cache misses where wall time is too noisy).
    let steps: u64 = std::env::var("TCLAB_BENCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    // One context for every call, reset before each as the simulator's `Network` keeps one: building
    // and dropping one a step (about 35 instructions) measured the harness, not the qdisc. Each packet
    // goes round in its box, as the simulator's go through a device (`Device::enqueue_skb`).
    let mut cx = Cx::new(now);
    // Warm up: one pass over every leaf.
    for _ in 0..(2 * n as u64).min(200_000) {
        now += 1200;
        cx.reset(now);
        if let Some(p) = dev.dequeue_skb(&mut cx) {
            dev.enqueue_skb(p, &mut cx);
        }
    }
    let cpu_start = cpu_ns();
    let start = Instant::now();
    let mut sent = 0u64;
    for _ in 0..steps {
        now += 1200;
        cx.reset(now);
        if let Some(p) = dev.dequeue_skb(&mut cx) {
            sent += 1;
            dev.enqueue_skb(black_box(p), &mut cx);
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / sent.max(1) as f64;
    let cpu = match (cpu_start, cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / sent.max(1) as f64,
        _ => f64::NAN,
    };
    assert_eq!(sent, steps, "the tree stays backlogged");
    (ns, cpu)
}
