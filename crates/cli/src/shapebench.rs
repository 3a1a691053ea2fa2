//! `tclab lab bench --shaping`: how closely tclab live holds TBF and HTB to their rates at 500 Mbit/s
//! and 1 Gbit/s, beside the kernel's TBF and HTB in the same lab. iperf3 cannot offer that much here
//! (its senders topped out at 0.87 Gbit/s on two shared cores), so the traffic is tclab's own
//! ([`tclab_live::source`]: prebuilt 1514-byte UDP frames from node-2, paced to 1.1× the rate, past
//! node-2's qdisc) and what arrives is counted by node-1's kernel (`/proc/net/dev`), no receiver in
//! user space. The received rate is taken over a window that starts a second in, when the shaper's
//! burst is spent and its queue full, and compared with the configured rate: both count frames from
//! their Ethernet header on. With two or more CPUs tclab's bridge is kept on the first this process
//! may use (CPU 0 here) and the source on the second, so that the bridge has a core of its own; the
//! kernel's bridge forwards in the senders' softirqs, so its rows have a source thread on each CPU.

use crate::args::CmdResult;
use crate::labbench::{check_bench, cpu_ns, load_average};
use std::path::Path;
use tclab_live::lab::{Lab, Shaper};
use tclab_live::{source, sys};

/// The offered rate over the configured: enough that the shaper always has a frame to send.
const OVERLOAD: f64 = 1.1;
/// Seconds of traffic before the window opens (the burst spent, the queue filled).
const WARM_UP: f64 = 1.0;

/// The shapers measured: (name, script) at `rate` with bucket `burst`. 128 KB is 1 ms at 1 Gbit/s,
/// more than the bridge's longest planned pause (500 µs, `spin.rs`'s BusyCap); 512 KB is the classic
/// rate/HZ at HZ = 250 for 1 Gbit/s, room for a turn of the bridge delayed by milliseconds (a
/// PREEMPT_NONE kernel lets a task finish its system call first). A late turn within the burst sends
/// what it owes; later than that, the bucket was full and the tokens are lost. HTB's burst is
/// explicit: tc's default (rate/HZ + MTU with HZ = 10⁹, truncated to whole µs and then ticks) is
/// 1 496 bytes at 1 Gbit/s, less than one frame.
fn policy(rate: &str, burst: &str, htb: bool) -> (String, String) {
    if htb {
        (
            format!("HTB {rate} burst {burst}"),
            format!(
                "#!/bin/sh\ntc qdisc add dev eth0 root handle 1: htb default 1\n\
                 tc class add dev eth0 parent 1: classid 1:1 htb rate {rate} ceil {rate} burst {burst} cburst {burst}\n"
            ),
        )
    } else {
        (
            format!("TBF {rate} burst {burst}"),
            format!(
                "#!/bin/sh\ntc qdisc add dev eth0 root tbf rate {rate} burst {burst} latency 10ms\n"
            ),
        )
    }
}

/// One row's figures.
struct Measured {
    /// Bit/s of frames the source sent over its whole run.
    offered: f64,
    /// Bit/s of frames node-1's eth0 received over the window.
    received: f64,
    /// The share of a core tclab's threads ran over the window (None: the kernel's bridge).
    cpu: Option<f64>,
}

/// Node `node`'s eth0 counters and the monotonic time they were read at (the read's midpoint).
fn read_counters(lab: &Lab, node: &str) -> Result<(source::Counters, u64), String> {
    let path = format!("/run/netns/{}", lab.ns(node));
    let before = sys::monotonic_ns();
    let c = sys::in_netns(&path, || source::counters("eth0"))
        .and_then(|r| r)
        .map_err(|e| format!("{node}: {e}"))?;
    let after = sys::monotonic_ns();
    Ok((c, before + (after - before) / 2))
}

/// The two CPUs the bench pins to: the first two this process may run on (CPUs 0 and 1 on this
/// machine; in a container limited to CPUs 4–5, those: pinning to 0 or 1 would be refused). `None`
/// with fewer than two.
fn two_cpus(allowed: &[usize]) -> Option<(usize, usize)> {
    match allowed {
        [a, b, ..] => Some((*a, *b)),
        _ => None,
    }
}

/// Run the source from node-2 at `rate` × [`OVERLOAD`] and measure what node-1 gets over `secs`
/// seconds after [`WARM_UP`]; the lab is up. With `pin`'s two CPUs, tclab's bridge (if it is the
/// router) is kept on the first and one source thread on the second; the kernel's bridge forwards in
/// its senders' softirqs, so it gets a source thread on each CPU, each at half the rate, both cores
/// as its own.
fn measure(
    lab: &Lab,
    rate: u64,
    secs: u32,
    pin: Option<(usize, usize)>,
) -> Result<Measured, String> {
    let bridge = lab.bridge_pid();
    if let (Some((first, _)), Some(pid)) = (pin, bridge) {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|e| format!("the bridge's threads: {e}"))?
            .flatten()
        {
            if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) {
                sys::pin_to_cpu(tid, first).map_err(|e| e.to_string())?;
            }
        }
    }
    let cpus: Vec<Option<usize>> = match (pin, bridge) {
        (None, _) => vec![None],
        (Some((_, second)), Some(_)) => vec![Some(second)],
        (Some((first, second)), None) => vec![Some(first), Some(second)],
    };
    let spec = source::Spec {
        len: 1514,
        flows: 4,
        rate: (rate as f64 * OVERLOAD / cpus.len() as f64) as u64,
        secs: WARM_UP + secs as f64 + 0.5,
        max_frames: u64::MAX,
    };
    let node2 = format!("/run/netns/{}", lab.ns("node-2"));
    let senders: Vec<_> = cpus
        .into_iter()
        .map(|cpu| {
            let node2 = node2.clone();
            std::thread::spawn(move || {
                if let Some(c) = cpu {
                    sys::pin_to_cpu(0, c).map_err(|e| e.to_string())?;
                }
                // Real-time, so that the machine's other work cannot hold the source back long
                // enough to empty the shaper's queue (it paces itself with sleeps: a share of
                // its core). Best effort: without the privilege it runs as it is.
                sys::realtime();
                sys::in_netns(&node2, || source::send("eth0", &spec))
                    .and_then(|r| r)
                    .map_err(|e| format!("the source in node-2: {e}"))
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs_f64(WARM_UP));
    let first = read_counters(lab, "node-1");
    let cpu_first = bridge.and_then(cpu_ns);
    std::thread::sleep(std::time::Duration::from_secs(secs as u64));
    let last = read_counters(lab, "node-1");
    let cpu_last = bridge.and_then(cpu_ns);
    let mut offered = 0.0;
    for s in senders {
        let sent = s
            .join()
            .map_err(|_| "the source's thread panicked".to_string())??;
        offered += sent.bytes as f64 * 8.0 / (sent.elapsed_ns as f64 / 1e9);
    }
    let ((c0, t0), (c1, t1)) = (first?, last?);
    let window = (t1 - t0) as f64 / 1e9;
    Ok(Measured {
        offered,
        received: (c1.rx_bytes - c0.rx_bytes) as f64 * 8.0 / window,
        cpu: match (cpu_first, cpu_last) {
            (Some(a), Some(b)) => Some((b - a) as f64 / 1e9 / window),
            _ => None,
        },
    })
}

pub fn run(exe: &Path, lab: &Lab, secs: u32) -> CmdResult {
    check_bench(lab, secs, "bench --shaping")?;
    let pin = sys::allowed_cpus(0).ok().and_then(|c| two_cpus(&c));
    let dir = std::env::temp_dir().join(format!("tclab-shapebench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    println!(
        "1514-byte UDP frames from node-2 at {OVERLOAD}x the rate (tclab's own source, SCHED_FIFO), counted on node-1's eth0 over {secs} s after {WARM_UP} s; {}",
        match pin {
            Some((a, b)) =>
                format!("tclab live on CPU {a} and the source on CPU {b}; for the kernel, a source on each"),
            None => "one CPU: nothing pinned".to_string(),
        }
    );
    println!("{}", load_average("at the start"));
    println!(
        "{:<36} {:>12} {:>12} {:>12} {:>9} {:>11}",
        "router", "rate Mbit/s", "offered", "received", "error", "tclab CPU"
    );
    // tclab's largest error by burst, and the rows that could not be measured.
    let mut worst = std::collections::BTreeMap::<&str, f64>::new();
    let mut failed = 0;
    let shapers = [("500mbit", 500_000_000u64), ("1gbit", 1_000_000_000)]
        .into_iter()
        .flat_map(|r| ["128k", "512k"].map(move |b| (r, b)))
        .flat_map(|r| [false, true].map(move |htb| (r, htb)));
    // A signal ends the bench after the row under way, its lab removed (`labbench::interrupted`).
    tclab_live::sys::stop_on_signals();
    for (((rate_word, rate), burst), htb) in shapers {
        let (name, script) = policy(rate_word, burst, htb);
        let file = dir.join("policy.sh");
        std::fs::write(&file, &script).map_err(|e| e.to_string())?;
        for tclab in [true, false] {
            let shaper = if tclab {
                Shaper::Tclab {
                    exe,
                    policy: Some(&file),
                    out: None,
                    queues: 1,
                    ring: true,
                    xdp: false,
                }
            } else {
                Shaper::Kernel {
                    policy: Some(&file),
                }
            };
            let who = if tclab { "tclab live" } else { "kernel" };
            let row = format!("{who}, {name}");
            let got = lab.up(shaper).and_then(|()| measure(lab, rate, secs, pin));
            let down = lab.down();
            match got {
                Ok(m) => {
                    let error = (m.received / rate as f64 - 1.0) * 100.0;
                    if tclab {
                        let w = worst.entry(burst).or_insert(error);
                        if error.abs() > w.abs() {
                            *w = error;
                        }
                    }
                    let cpu = m
                        .cpu
                        .map_or("—".to_string(), |c| format!("{:.0} %", c * 100.0));
                    println!(
                        "{row:<36} {:>12.1} {:>12.1} {:>12.2} {:>+8.2}% {cpu:>11}",
                        rate as f64 / 1e6,
                        m.offered / 1e6,
                        m.received / 1e6,
                        error
                    );
                }
                Err(e) => {
                    println!("{row:<36} failed: {e}");
                    failed += 1;
                }
            }
            // How late the bridge's wake-ups were and how often it paused, from its summary.
            if let Ok(d) = down {
                for l in d.log.lines().filter(|l| {
                    l.contains("eth0: ") && l.contains("wake-ups") || l.contains("paused")
                }) {
                    println!("    {}", l.trim());
                }
            }
            if crate::compare::stopped() {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(crate::labbench::interrupted(lab));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", load_average("at the end"));
    for (burst, w) in worst {
        println!(
            "tclab live's largest error with burst {burst}: {w:+.2} % ({} the ±1 % target)",
            if w.abs() <= 1.0 { "within" } else { "outside" }
        );
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::two_cpus;

    /// The bench pins to CPUs it may use: the first two allowed, not 0 and 1 (in a cpuset of 4–5,
    /// sched_setaffinity to CPU 0 or 1 is refused, EINVAL, and every row would fail).
    #[test]
    fn the_bench_pins_to_the_first_two_allowed_cpus() {
        assert_eq!(two_cpus(&[0, 1]), Some((0, 1)));
        assert_eq!(two_cpus(&[4, 5, 6]), Some((4, 5)));
        assert_eq!(two_cpus(&[3]), None);
        assert_eq!(two_cpus(&[]), None);
    }
}
