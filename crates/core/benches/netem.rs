//! `cargo bench -p tclab-core --bench netem`: netem's cost per packet with 10 000 packets in its queue.
//!
//! A netem qdisc at the root of a device holds 10 000 packets; each step advances virtual time by 1 µs,
//! dequeues the packet now due and enqueues a new one, so the queue stays at 10 000 (delay 10 ms = 10 000
//! steps of 1 µs). Three delay shapes exercise the two halves of the tfifo:
//!
//! - `delay 10ms`: times arrive in order, every packet takes the linear list (the kernel's `t_tail` path);
//! - `delay 10ms 2ms` (uniform jitter): most packets arrive out of order and go through the heap;
//! - `delay 10ms 2ms distribution normal`: the same with the table lookup.
//!
//! Reports nanoseconds of wall time per packet (one enqueue + one dequeue, through `Device`), best of 5.

use std::hint::black_box;
use std::time::Instant;
use tclab_core::engine::Flags;
use tclab_core::qdisc::netem::NetemOptions;
use tclab_core::qdisc::netem_dist::Distribution;
use tclab_core::qdisc::{Cx, QdiscOptions};
use tclab_core::{Engine, Handle, Packet};

const TICKS_PER_MS: u32 = 15_625;
const QUEUE: u64 = 10_000;

fn build(jitter_ms: u32, dist: Option<Distribution>) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let o = NetemOptions {
        limit: 2 * QUEUE as u32,
        latency: 10 * TICKS_PER_MS,
        jitter: jitter_ms * TICKS_PER_MS,
        delay_dist: dist,
        ..Default::default()
    };
    e.modify_qdisc(
        "eth0",
        Handle::ROOT,
        Handle::new(1, 0),
        Some(&QdiscOptions::Netem(o)),
        Flags::ADD,
        0,
    )
    .unwrap();
    e.seed_random(1);
    e
}

/// (ns per packet, mean queue length).
fn run(jitter_ms: u32, dist: Option<Distribution>) -> (f64, f64) {
    let mut e = build(jitter_ms, dist);
    let dev = e.device_mut("eth0").unwrap();
    let mut now = 0u64;
    // Fill: one packet per µs for 10 ms.
    for _ in 0..QUEUE {
        now += 1000;
        let mut cx = Cx::new(now);
        dev.enqueue(Packet::of_len(1000), &mut cx);
    }
    let steps = 2_000_000u64;
    let (mut qsum, mut sent) = (0u64, 0u64);
    let start = Instant::now();
    for _ in 0..steps {
        now += 1000;
        let mut cx = Cx::new(now);
        while let Some(p) = dev.dequeue(&mut cx) {
            sent += 1;
            black_box(&p);
        }
        dev.enqueue(Packet::of_len(1000), &mut cx);
        qsum += dev.root().q.stats().qlen as u64;
    }
    let ns = start.elapsed().as_nanos() as f64 / steps as f64;
    black_box(sent);
    (ns, qsum as f64 / steps as f64)
}

fn main() {
    println!("{:<40} {:>12} {:>14}", "netem", "queue", "ns/packet");
    for (name, jitter, dist) in [
        ("delay 10ms", 0, None),
        ("delay 10ms 2ms", 2, None),
        (
            "delay 10ms 2ms distribution normal",
            2,
            Some(Distribution::Normal),
        ),
    ] {
        let mut best = f64::MAX;
        let mut q = 0.0;
        for _ in 0..5 {
            let (ns, mean_q) = run(jitter, dist);
            best = best.min(ns);
            q = mean_q;
        }
        println!("{name:<40} {q:>12.0} {best:>14.1}");
    }
}
