//! `cargo bench -p tclab-tc --bench classes`: seed 002's graph — the cost per packet of each classful
//! qdisc against the number of backlogged classes, 1 to 65 000 (devik's HTB3 note measured 1 to 5 000:
//! HTB3 close to O(log N), the old HTB and CBQ O(N)). `-- --write DIR` also writes DIR/classes.csv and
//! DIR/classes.svg, DIR relative to the workspace (docs/seed002/ holds the figure docs/EXPERIMENTS.md shows); `-- htb,cbq` runs only
//! those kinds.
//!
//! Devik's setup, configured with tc lines as he would have: a root class of 30 Mbit/s (for more than
//! 3 000 leaves N × 10 kbit/s, his 50 Mbit/s at 5 000) and N leaves of 8 kbit/s each under it, every
//! leaf allowed to borrow up to the root's rate, and every leaf backlogged (two 1500-byte packets each).
//! Each step advances virtual time by one packet at the root's rate, dequeues a packet and enqueues it
//! again to its class (skb->priority names it, as the qdiscs read it without filters), so the set of
//! backlogged classes never changes; a shaper with nothing to send yet is stepped to its watchdog time.
//! The cost is wall-clock nanoseconds per packet sent (one enqueue and one dequeue).
//!
//! - htb: `rate 8kbit ceil R quantum 1514` leaves under `1:1 rate R`; the leaves live on borrowed rate.
//! - cbq: a bounded root class (`rate R bounded`, devik's "CBQ with bounded root class") on a 1 Gbit/s
//!   `bandwidth`, leaves `rate 8kbit allot 1514` that borrow.
//! - hfsc: `1:1 ls rate R ul rate R`, leaves `sc rate 8kbit` (real time and link sharing).
//! - drr, qfq: flat, work-conserving (no rates): `drr` classes, `qfq weight 1 maxpkt 1514` classes.
//! - prio, ets: a class per band, 16 at most (`prio bands N`: strict, so band 0 is always the one served;
//!   `ets quanta 1514 …`: every band sharing); PRIO has at least 2 bands.
//!
//! A size is measured for 0.3 s of wall time, or longer until a packet per class (and at least 2 000)
//! has been sent: O(N) qdiscs at 65 000 classes would otherwise take minutes.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};
use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet};

const SIZES: &[u32] = &[
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 5000, 10_000, 20_000, 40_000, 65_000,
];
const KINDS: &[&str] = &["htb", "cbq", "hfsc", "drr", "qfq", "prio", "ets"];

/// The root's rate in bit/s for `n` leaves of 8 kbit/s.
fn root_rate(n: u32) -> u64 {
    30_000_000u64.max(n as u64 * 10_000)
}

fn tc(e: &mut Engine, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

/// The tree of `kind` with `n` leaves on eth0, the classids of its leaves, or None where the kind has
/// no tree of that size (PRIO and ETS beyond 16 bands, PRIO below 2).
fn build(kind: &str, n: u32) -> Option<(Engine, Vec<u32>)> {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    let r = root_rate(n);
    let leaves: Vec<u32> = match kind {
        "prio" | "ets" => (1..=n).map(|i| 0x1_0000 | i).collect(),
        "drr" | "qfq" => (1..=n).map(|i| 0x1_0000 | i).collect(),
        _ => (2..n + 2).map(|i| 0x1_0000 | i).collect(),
    };
    let minor = |id: u32| format!("1:{:x}", id & 0xffff);
    match kind {
        "htb" => {
            tc(&mut e, "qdisc add dev eth0 root handle 1: htb");
            tc(
                &mut e,
                &format!("class add dev eth0 parent 1: classid 1:1 htb rate {r}bit"),
            );
            for &id in &leaves {
                let m = minor(id);
                tc(&mut e, &format!("class add dev eth0 parent 1:1 classid {m} htb rate 8kbit ceil {r}bit quantum 1514"));
            }
        }
        "cbq" => {
            tc(
                &mut e,
                "qdisc add dev eth0 root handle 1: cbq bandwidth 1gbit avpkt 1000",
            );
            tc(&mut e, &format!("class add dev eth0 parent 1: classid 1:1 cbq bandwidth 1gbit rate {r}bit allot 1514 avpkt 1000 bounded"));
            for &id in &leaves {
                let m = minor(id);
                tc(&mut e, &format!("class add dev eth0 parent 1:1 classid {m} cbq bandwidth 1gbit rate 8kbit allot 1514 avpkt 1000"));
            }
        }
        "hfsc" => {
            tc(&mut e, "qdisc add dev eth0 root handle 1: hfsc");
            tc(
                &mut e,
                &format!(
                    "class add dev eth0 parent 1: classid 1:1 hfsc ls rate {r}bit ul rate {r}bit"
                ),
            );
            for &id in &leaves {
                let m = minor(id);
                tc(
                    &mut e,
                    &format!("class add dev eth0 parent 1:1 classid {m} hfsc sc rate 8kbit"),
                );
            }
        }
        "drr" | "qfq" => {
            tc(&mut e, &format!("qdisc add dev eth0 root handle 1: {kind}"));
            let opts = if kind == "qfq" {
                " weight 1 maxpkt 1514"
            } else {
                ""
            };
            for &id in &leaves {
                let m = minor(id);
                tc(
                    &mut e,
                    &format!("class add dev eth0 parent 1: classid {m} {kind}{opts}"),
                );
            }
        }
        "prio" if (2..=16).contains(&n) => {
            // Every priority to band 0: the default priomap names band 2, which 2 bands lack.
            let map = vec!["0"; 16].join(" ");
            tc(
                &mut e,
                &format!("qdisc add dev eth0 root handle 1: prio bands {n} priomap {map}"),
            );
        }
        "ets" if n <= 16 => {
            let quanta = vec!["1514"; n as usize].join(" ");
            tc(
                &mut e,
                &format!("qdisc add dev eth0 root handle 1: ets quanta {quanta}"),
            );
        }
        _ => return None,
    }
    let dev = e.device_mut("eth0").unwrap();
    for &id in &leaves {
        for _ in 0..2 {
            let p = Packet {
                priority: id,
                ..Packet::of_len(1500)
            };
            dev.enqueue(p, &mut Cx::new(0));
        }
    }
    Some((e, leaves))
}

/// Nanoseconds of wall time per packet sent, over up to 0.3 s after a warm-up pass over the leaves.
fn run(mut e: Engine, n: u32) -> f64 {
    let tx = 1500 * 8 * 1_000_000_000 / root_rate(n);
    let dev = e.device_mut("eth0").unwrap();
    let mut now = 0u64;
    let mut step = |now: &mut u64| -> bool {
        *now += tx;
        let mut cx = Cx::new(*now);
        match dev.dequeue(&mut cx) {
            Some(p) => {
                dev.enqueue(black_box(p), &mut cx);
                true
            }
            None => {
                // A shaper waiting for tokens: go to its wake-up (or on by a packet's time).
                if let Some(t) = cx.wake_at {
                    *now = (*now).max(t) - tx;
                }
                false
            }
        }
    };
    for _ in 0..(2 * n as u64).min(200_000) {
        step(&mut now);
    }
    let start = Instant::now();
    let mut sent = 0u64;
    let mut tries = 0u64;
    // At least a packet per class, so that a scan's cost is averaged over a whole round of them.
    let least = (n as u64).max(2_000);
    while sent < least || (start.elapsed() < Duration::from_millis(300) && sent < 2_000_000) {
        sent += step(&mut now) as u64;
        tries += 1;
        assert!(
            tries < 100 * (sent + 1_000),
            "{n} classes: the tree stopped sending"
        );
    }
    start.elapsed().as_nanos() as f64 / sent as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let write = args
        .iter()
        .position(|a| a == "--write")
        .map(|i| args.get(i + 1).expect("--write DIR").clone());
    let only = args
        .iter()
        .find(|a| !a.starts_with('-') && Some(*a) != write.as_ref());
    let kinds: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| only.is_none_or(|o| o.split(',').any(|w| w == *k)))
        .collect();
    let sizes: Vec<u32> = match std::env::var("TCLAB_BENCH_LEAVES") {
        Ok(v) => v.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
        Err(_) => SIZES.to_vec(),
    };
    // rows[i][k]: ns per packet of kinds[k] with sizes[i] classes.
    let mut rows: Vec<Vec<Option<f64>>> = Vec::new();
    println!(
        "{:>8} {}",
        "classes",
        kinds.iter().map(|k| format!("{k:>9}")).collect::<String>()
    );
    for &n in &sizes {
        let row: Vec<Option<f64>> = kinds
            .iter()
            .map(|k| build(k, n).map(|(e, _)| run(e, n)))
            .collect();
        let cells: String = row
            .iter()
            .map(|c| c.map_or(format!("{:>9}", "—"), |v| format!("{v:>9.1}")))
            .collect();
        println!("{n:>8} {cells}");
        rows.push(row);
    }
    if let Some(dir) = write {
        // Cargo runs a bench in its package's directory: a relative DIR is the workspace's.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
        let dir = dir.display();
        std::fs::create_dir_all(dir.to_string()).unwrap();
        let mut csv = format!("classes,{}\n", kinds.join(","));
        for (n, row) in sizes.iter().zip(&rows) {
            let cells: Vec<String> = row
                .iter()
                .map(|c| c.map_or(String::new(), |v| format!("{v:.1}")))
                .collect();
            csv.push_str(&format!("{n},{}\n", cells.join(",")));
        }
        std::fs::write(format!("{dir}/classes.csv"), csv).unwrap();
        std::fs::write(format!("{dir}/classes.svg"), svg(&kinds, &sizes, &rows)).unwrap();
        println!("wrote {dir}/classes.csv and {dir}/classes.svg");
    }
}

/// A log-log line chart: classes across, ns per packet up, one line per kind (Okabe–Ito colours).
fn svg(kinds: &[&str], sizes: &[u32], rows: &[Vec<Option<f64>>]) -> String {
    const COLOURS: &[&str] = &[
        "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000",
    ];
    let (w, h, left, right, top, bottom) = (900.0, 540.0, 70.0, 120.0, 40.0, 60.0);
    let values = rows.iter().flatten().flatten();
    let lo = values
        .clone()
        .fold(f64::MAX, |a, &b| a.min(b))
        .log10()
        .floor();
    let hi = values
        .fold(f64::MIN, |a, &b| a.max(b))
        .log10()
        .ceil()
        .max(lo + 1.0);
    let x_hi = (*sizes.iter().max().unwrap_or(&1) as f64)
        .log10()
        .ceil()
        .max(1.0);
    let x = |n: f64| left + n.log10() / x_hi * (w - left - right);
    let y = |v: f64| h - bottom - (v.log10() - lo) / (hi - lo) * (h - top - bottom);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">Cost per packet against backlogged classes (seed 002)</text>\n",
        (left + w - right) / 2.0
    );
    for d in 0..=x_hi as i32 {
        let px = x(10f64.powi(d));
        s += &format!(
            "<line x1=\"{px:.1}\" y1=\"{top}\" x2=\"{px:.1}\" y2=\"{}\" stroke=\"#ddd\"/>\n<text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            h - bottom,
            h - bottom + 18.0,
            10u64.pow(d as u32)
        );
    }
    for d in lo as i32..=hi as i32 {
        let py = y(10f64.powi(d));
        s += &format!(
            "<line x1=\"{left}\" y1=\"{py:.1}\" x2=\"{}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\n<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            w - right,
            left - 6.0,
            py + 4.0,
            10f64.powi(d)
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">backlogged classes (log)</text>\n\
         <text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">ns per packet, enqueue + dequeue (log)</text>\n",
        (left + w - right) / 2.0,
        h - 16.0,
        (top + h - bottom) / 2.0
    );
    for (k, kind) in kinds.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let points: Vec<String> = sizes
            .iter()
            .zip(rows)
            .filter_map(|(&n, row)| row[k].map(|v| format!("{:.1},{:.1}", x(n as f64), y(v))))
            .collect();
        s += &format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n\
             <line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
             <text x=\"{}\" y=\"{}\">{kind}</text>\n",
            points.join(" "),
            w - right + 12.0,
            w - right + 36.0,
            w - right + 42.0,
            top + 20.0 * k as f64 + 14.0,
            ly = top + 20.0 * k as f64 + 10.0,
        );
    }
    s + "</svg>\n"
}
