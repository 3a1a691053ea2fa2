//! `cargo bench -p tclab-sim`: the simulator's speed on its benchmark scenarios, best of three runs each (one
//! for the largest).
//!
//! - `bench-htb`: 60 s of virtual time, 30 TCP streams through a 100 Mbit/s HTB bottleneck, a ping alongside.
//! - `bench-isp`: 10 s, 1 000 subscribers behind a 1 Gbit/s line (HTB class + fq_codel leaf each, u32
//!   filters hashed on the destination port), a CUBIC download per subscriber.
//!
//! - `bench-isp-10k`: 2 s, 10 000 subscribers behind a 10 Gbit/s line, an mq root with one HTB per transmit
//!   queue (8) as LibreQoS lays it out, fq_codel leaves, a CUBIC download per subscriber; run once, not
//!   three times (about 20 s of CPU time a run).
//!
//! For each: wall time, events per second, simulated frames per second, speed over real time, and the
//! process's peak resident memory while it ran (VmHWM, reset before each scenario through
//! `/proc/self/clear_refs`). The CPU time the run took (`/proc/self/schedstat`) is printed beside the wall
//! time: on a shared machine the difference is the time other jobs had the core. `cargo bench -p
//! tclab-sim -- isp` runs the scenarios whose name contains "isp".

use std::time::Instant;

/// The tclab binary's allocator (crates/cli/src/main.rs says why), so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tclab_sim::run::run;
use tclab_sim::scenario::load;

/// Each scenario and how many runs its best is taken of.
const SCENARIOS: &[(&str, usize)] = &[("bench-htb", 3), ("bench-isp", 3), ("bench-isp-10k", 1)];

/// The process's peak resident set in kB (VmHWM), if /proc says.
fn peak_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Nanoseconds this (single-threaded) process has run on a CPU, if /proc says.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Start a new peak: "5" resets VmHWM to the current resident set (proc(5), Linux 4.0 and later).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn bench(name: &str, runs: usize) {
    let b = tclab_sim::builtin::find(name).expect("the bench scenario is built in");
    let toml = b.toml();
    let reset = reset_peak();
    let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
    let (mut events, mut frames, mut goodput, mut duration) = (0, 0, 0.0, 0);
    for _ in 0..runs {
        let mut sc = load(b.name, &toml, std::path::Path::new(".")).expect("the scenario loads");
        duration = sc.duration;
        let (t, c) = (Instant::now(), cpu_ns());
        let out = run(&mut sc, &mut |_| {}).expect("the scenario runs");
        let wall = t.elapsed().as_secs_f64();
        best = best.min(wall);
        if let (Some(c0), Some(c1)) = (c, cpu_ns()) {
            best_cpu = best_cpu.min((c1 - c0) as f64 / 1e9);
        }
        events = out.events;
        frames = out.frames;
        // Every TCP entry's goodput (bench-isp-10k splits its downloads into entries of 1 000 streams).
        goodput = out
            .flows
            .iter()
            .filter(|f| f.kind == "tcp")
            .map(|f| f.goodput_bps)
            .sum();
    }
    let secs = duration as f64 / 1e9;
    println!("{name}: {}", b.description);
    println!("  wall time (best of {runs})   {best:.3} s");
    if best_cpu < f64::MAX {
        println!("  CPU time (best of {runs})    {best_cpu:.3} s");
    }
    println!(
        "  events                  {events}  ({:.2} M events/s)",
        events as f64 / best / 1e6
    );
    println!(
        "  frames on the wires     {frames}  ({:.2} M frames/s)",
        frames as f64 / best / 1e6
    );
    println!("  TCP goodput             {:.2} Mbit/s", goodput / 1e6);
    // Two decimals: bench-isp-10k runs slower than real time.
    println!("  speed-up over real time {:.2}x", secs / best);
    if best_cpu < f64::MAX {
        // What the run costs without the other jobs' share of the cores.
        println!(
            "  by CPU time             {:.2} M events/s, {:.2} M frames/s, {:.2}x real time",
            events as f64 / best_cpu / 1e6,
            frames as f64 / best_cpu / 1e6,
            secs / best_cpu
        );
    }
    match peak_kb() {
        Some(kb) => println!(
            "  peak memory             {:.0} MB{}",
            kb as f64 / 1024.0,
            if reset {
                ""
            } else {
                " (VmHWM could not be reset: the process's peak so far)"
            }
        ),
        None => println!("  peak memory             unknown (no VmHWM in /proc/self/status)"),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters the scenarios by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    for &(name, runs) in SCENARIOS {
        if filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str())) {
            bench(name, runs);
        }
    }
}
