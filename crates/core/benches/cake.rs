//! `cargo bench -p tclab-core --bench cake`: CAKE's and fq_codel's cost per packet, side by side.
//!
//! N UDP flows (each between its own pair of addresses, source port 1024 + i mod 60 000; for CAKE each flow's DSCP picks one of diffserv8's 8 tins, flow i
//! in tin i mod 8) keep 4 packets each queued; each step enqueues the next flow's packet and dequeues one.
//! Virtual time advances 1.2 µs a step (a 1514-byte frame at 10 Gbit/s). CAKE runs unlimited (the tins
//! shared by DRR) and shaped at 10 Gbit/s (the shaper's clock and the tin schedule on every packet);
//! fq_codel runs with its default 1024 queues and, for 65 536 flows, with `flows 65536`. The issue's
//! target: CAKE within 2× of fq_codel.
//!
//! Each flow runs between its own pair of hosts. The last rows send every flow to one server: CAKE's
//! default triple-isolate then divides each flow's quantum by that server's bulk flows (1514/128 ≈ 11
//! bytes with 1024 flows over 8 tins), and DRR++ rotates each queue some 130 times per packet sent —
//! the kernel's algorithm does the same work, so these rows measure CAKE's design, not tclab's.
//!
//! Reports nanoseconds of wall time per packet (one enqueue + one dequeue, on the qdisc), best of 5. The
//! packets are recycled (each step re-enqueues the packet the step before dequeued, rewritten as the
//! next flow's), so no allocation is timed: that is the driver's part, as the kernel's qdiscs are handed
//! their skbs.
//! With 65 536 flows, two more fq_codel rows take the hash out: each packet names its flow by
//! `skb->priority` (1:minor, as fq_codel allows), flow i in queue (i mod 65 535)+1 (in arrival order), or
//! in queue (40 507·i mod 65 535)+1 (scattered over the table as a hash would; 40 507 is prime to 65 535,
//! so no two flows share a queue but the first and the last: a minor has 16 bits, and queue 65 536 cannot
//! be named).
//! They separate what the flow table's size costs from what the hash's collisions cost.
//! A row "skb->hash carried" gives each packet its flow hash before the run, as the simulator's
//! packets carry it (`flow::skb_get_hash` where the packet is made, as a NIC's receive hash): the
//! qdisc's own cost without the hashing, which the kernel's fq_codel also skips when the NIC or the
//! socket has set `skb->hash`.
//!
//! `-- fq_codel` runs fq_codel's rows alone; `TCLAB_BENCH_FLOWS=1,1024` chooses the flow counts;
//! `TCLAB_BENCH_STEPS=N` runs N steps once instead of the best of 5 (for a profiler).

use std::hint::black_box;
use std::time::Instant;
use tclab_core::qdisc::cake::{diffserv, Cake, CakeOptions};
use tclab_core::qdisc::fq_codel::{FqCodel, FqCodelOptions};
use tclab_core::qdisc::{Cx, DevEnv, Qdisc, Xstats};
use tclab_core::{Handle, Packet};

const ENV: DevEnv = DevEnv {
    txqueues: 1,
    txqueuelen: 1000,
    mtu: 1500,
    hard_header_len: 14,
    speed: 0,
    taprio_offload: false,
};

/// diffserv8's tins by DSCP: CS1 → 1 (bulk)… one codepoint for each of the 8 tins.
const DSCP_FOR_TIN: [u8; 8] = [1, 8, 0, 24, 18, 16, 32, 48];

/// Flow i from host 10.x.y.1 to host 192.x.y.1 (its own pair of hosts), or to one server for all.
fn packets(flows: usize, one_server: bool) -> Vec<Packet> {
    (0..flows)
        .map(|i| {
            let dst = if one_server {
                [192, 0, 2, 1]
            } else {
                [192, (i >> 8) as u8, i as u8, 1]
            };
            Packet::udp4(
                [10, (i >> 8) as u8, i as u8, 1],
                1024 + (i % 60000) as u16,
                dst,
                5001,
                DSCP_FOR_TIN[i % 8] << 2 | 2,
                1514,
            )
        })
        .collect()
}

/// Steps timed with `n` flows; `TCLAB_BENCH_STEPS` shortens the run (for valgrind's callgrind or
/// cachegrind).
fn steps(n: usize) -> usize {
    std::env::var("TCLAB_BENCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000usize.max(8 * n))
}

#[inline(never)] // a symbol for `valgrind --toggle-collect=cake::run`
fn run(q: &mut dyn Qdisc, pkts: &[Packet]) -> f64 {
    let n = pkts.len();
    let mut now = 0u64;
    for _ in 0..4 {
        for p in pkts {
            q.enqueue(p.clone(), &mut Cx::new(now));
        }
    }
    let steps = steps(n);
    let mut sent = 0u64;
    // The packet a step enqueues is the one the step before dequeued, its headers rewritten as the next
    // flow's (28 bytes copied): allocating and freeing packets is the driver's cost, not the qdisc's
    // (the kernel's qdiscs are handed skbs too), and would add a malloc and a free to every step.
    // One context for every call, reset before each as the simulator's `Network` keeps one; the
    // packet in hand moves straight from the dequeue to the next enqueue, in its box, as the
    // simulator's packets go through a device (`Qdisc::enqueue_skb`). (Building and dropping a
    // context a step and passing the packet through an `Option` were about 200 instructions a step,
    // a quarter of what this bench counted: the harness's, not the qdisc's.)
    let mut cx = Cx::new(now);
    let mut p = Box::new(pkts[0].clone());
    let start = Instant::now();
    for i in 0..steps {
        now += 1200;
        cx.reset(now);
        let src = &pkts[i % n];
        if p.data.len() == src.data.len() {
            p.data.copy_from_slice(&src.data);
        } else {
            p.data.clone_from(&src.data);
        }
        p.len = src.len;
        p.priority = src.priority;
        // `skb->hash`: the dequeued packet kept the hash of its own flow; the next flow's is its own
        // (0: computed by the qdisc). Left stale, every packet would go to the queue just served, hot
        // in the cache, and no packet would be hashed.
        p.hash = src.hash;
        q.enqueue_skb(p, &mut cx);
        p = match q.dequeue_skb(&mut cx) {
            Some(d) => {
                sent += 1;
                black_box(d)
            }
            None => Box::new(src.clone()),
        };
        black_box(&cx.drops);
    }
    let ns = start.elapsed().as_nanos() as f64 / steps as f64;
    black_box(sent);
    ns
}

/// The best of 5 runs (of 1 with `TCLAB_BENCH_STEPS` set, for a profiler).
fn best_of_5(mut f: impl FnMut() -> f64) -> f64 {
    let runs = if std::env::var_os("TCLAB_BENCH_STEPS").is_some() {
        1
    } else {
        5
    };
    (0..runs).map(|_| f()).fold(f64::INFINITY, f64::min)
}

/// fq_codel's row, with how often a packet found its queue empty and made it a new flow (the
/// `new_flow_count` of `tc -s qdisc show`, per packet of the timed steps): each new flow is one more
/// visit to a queue in the flow table.
fn fq_codel_row(name: &str, o: &FqCodelOptions, pkts: &[Packet]) -> f64 {
    let mut new_flows = 0.0;
    let ns = best_of_5(|| {
        let mut q = FqCodel::new(Handle::new(1, 0), o, &ENV).expect("valid");
        let ns = run(&mut q, pkts);
        if let Some(Xstats::FqCodel(x)) = q.xstats() {
            let warm_up = pkts.len() as f64;
            new_flows = (x.new_flow_count as f64 - warm_up).max(0.0) / steps(pkts.len()) as f64;
        }
        ns
    });
    println!(
        "{:<44} {:>8} {:>12.0}   {:.2} new flows/packet",
        name,
        pkts.len(),
        ns,
        new_flows
    );
    ns
}

fn cake_row(name: &str, o: &CakeOptions, pkts: &[Packet], fq: f64) {
    let ns = best_of_5(|| {
        let mut q = Cake::new(Handle::new(1, 0), o, &ENV);
        run(&mut q, pkts)
    });
    println!(
        "{:<44} {:>8} {:>12.0}   {:.2}× fq_codel",
        name,
        pkts.len(),
        ns,
        ns / fq
    );
}

fn main() {
    // `-- fq_codel` runs only fq_codel's rows (for a profiler).
    let only_fq = std::env::args().skip(1).any(|a| a == "fq_codel");
    println!("{:<44} {:>8} {:>12}", "qdisc", "flows", "ns/packet");
    // `TCLAB_BENCH_FLOWS=1024` runs one flow count (for a profiler).
    let counts: Vec<usize> = match std::env::var("TCLAB_BENCH_FLOWS") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => vec![1, 1024, 65536],
    };
    for flows in counts {
        let pkts = packets(flows, false);
        let fq_opts = FqCodelOptions {
            flows: (flows > 1024).then_some(65536),
            limit: Some(10 * flows as u32 + 10240),
            memory_limit: Some(u32::MAX >> 1),
            ..Default::default()
        };
        let fq = fq_codel_row("fq_codel", &fq_opts, &pkts);
        let mut hashed = pkts.clone();
        for p in hashed.iter_mut() {
            tclab_core::flow::skb_get_hash(p, [1, 2]);
        }
        fq_codel_row("fq_codel, skb->hash carried", &fq_opts, &hashed);
        if flows == 65536 {
            for (name, scatter) in [
                ("fq_codel, skb->priority names flow i+1", 1),
                ("fq_codel, skb->priority names (40507 i)+1", 40507),
            ] {
                let mut named = pkts.clone();
                for (i, p) in named.iter_mut().enumerate() {
                    let minor = (i as u64 * scatter % 65_535) as u32 + 1;
                    p.priority = 0x1_0000 | minor;
                }
                fq_codel_row(name, &fq_opts, &named);
            }
        }
        if only_fq {
            continue;
        }
        let cake = |rate: u64| CakeOptions {
            base_rate: Some(rate),
            diffserv_mode: Some(diffserv::DIFFSERV8),
            memory: Some(u32::MAX >> 1),
            ..Default::default()
        };
        cake_row(
            "cake diffserv8 bandwidth 10gbit",
            &cake(1_250_000_000),
            &pkts,
            fq,
        );
        cake_row("cake diffserv8 unlimited", &cake(0), &pkts, fq);
        if flows == 1024 {
            let one = packets(flows, true);
            cake_row(
                "cake diffserv8 10gbit, all to one server",
                &cake(1_250_000_000),
                &one,
                fq,
            );
        }
    }
}
