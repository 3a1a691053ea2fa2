//! What a live run looked like over time: every `every` nanoseconds, each device's received and sent
//! rate and backlog (its port's receive counter and its root qdisc's counters, as `tc -s qdisc show`
//! reads them) and each class's rate, backlog, queue length and drops — interfaces.csv and classes.csv
//! with the columns `tclab sim` writes (docs/SCENARIOS.md), here from a real run, for the same plots
//! and the same scripts.
//! Rates are the difference of the byte counters between two samples over the time between them (the
//! loop takes a sample at its first turn past the due time, so intervals are measured, not assumed).
//!
//! A bridge may run for weeks: every sample goes to the CSV files as it is taken (flushed, so a crash
//! loses nothing written), and memory keeps only what the plots need — each series at most
//! [`MAX_POINTS`] points, two neighbours averaged into one whenever a series fills up.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use tclab_core::{Engine, Nanos};

/// The counters a sample reads: a device's root qdisc (`class` empty) or one of its classes.
#[derive(Clone, Debug, PartialEq)]
pub struct Count {
    pub dev: String,
    pub class: String,
    pub bytes: u64,
    pub backlog: u32,
    pub qlen: u32,
    pub drops: u32,
    /// Bytes the device's port received (root rows of a bridged device; 0 otherwise).
    pub rx_bytes: u64,
}

/// Every device's root counters and its classes' (flow queues left out), in the engine's order.
pub fn counts(engine: &Engine, now: Nanos) -> Vec<Count> {
    let mut out = Vec::new();
    for (name, dev) in engine.devices() {
        let st = dev.root().q.stats();
        out.push(Count {
            dev: name.to_string(),
            class: String::new(),
            bytes: st.bytes,
            backlog: st.backlog,
            qlen: st.qlen,
            drops: st.drops,
            rx_bytes: 0,
        });
        for c in dev.classes(now).iter().filter(|c| !c.is_flow_queue()) {
            out.push(Count {
                dev: name.to_string(),
                class: c.classid.to_string(),
                bytes: c.stats.bytes,
                backlog: c.stats.backlog,
                qlen: c.stats.qlen,
                drops: c.stats.drops,
                rx_bytes: 0,
            });
        }
    }
    out
}

/// Several engines' counts as one: each key's counters added up. The queues of `tclab live --queues N`
/// hold idle copies of what other queues own (all zero), and each its own share of a root's.
pub fn add_up(all: &[Vec<Count>]) -> Vec<Count> {
    let mut out: Vec<Count> = Vec::new();
    let mut at: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for counts in all {
        for c in counts {
            match at.get(&(c.dev.as_str(), c.class.as_str())) {
                Some(&i) => {
                    let o = &mut out[i];
                    o.bytes += c.bytes;
                    o.backlog += c.backlog;
                    o.qlen += c.qlen;
                    o.drops += c.drops;
                    o.rx_bytes += c.rx_bytes;
                }
                None => {
                    at.insert((&c.dev, &c.class), out.len());
                    out.push(c.clone());
                }
            }
        }
    }
    out
}

/// Points kept per plotted series.
pub const MAX_POINTS: usize = 2048;

/// One plotted series: (seconds, value), at most [`MAX_POINTS`], each the mean of `width` samples.
#[derive(Default)]
pub struct Series {
    pub points: Vec<(f64, f64)>,
    /// Samples per point, and the part-filled point being gathered.
    width: usize,
    pending: Vec<(f64, f64)>,
}

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        self.width = self.width.max(1);
        self.pending.push((t, v));
        if self.pending.len() < self.width {
            return;
        }
        let n = self.pending.len() as f64;
        let (st, sv) = self
            .pending
            .drain(..)
            .fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        self.points.push((st / n, sv / n));
        if self.points.len() >= MAX_POINTS {
            self.points = self
                .points
                .chunks(2)
                .map(|c| {
                    let n = c.len() as f64;
                    (
                        c.iter().map(|p| p.0).sum::<f64>() / n,
                        c.iter().map(|p| p.1).sum::<f64>() / n,
                    )
                })
                .collect();
            self.width *= 2;
        }
    }
}

/// The series of a run, by name (`eth0`, `eth0 1:20`).
#[derive(Default)]
pub struct Plotted {
    pub tx_bps: BTreeMap<String, Series>,
    pub backlog: BTreeMap<String, Series>,
    pub class_bps: BTreeMap<String, Series>,
}

pub struct Sampler {
    pub every: Nanos,
    next: Nanos,
    last_t: Nanos,
    /// (device, class or "") → bytes sent at the last sample.
    last_bytes: BTreeMap<(String, String), u64>,
    pub plotted: Plotted,
    /// interfaces.csv and classes.csv, written as samples are taken.
    files: Option<(
        std::io::BufWriter<std::fs::File>,
        std::io::BufWriter<std::fs::File>,
    )>,
}

impl Sampler {
    /// A sampler every `every` ns; with `dir`, interfaces.csv and classes.csv are created there now.
    pub fn new(every: Nanos, dir: Option<&Path>) -> std::io::Result<Sampler> {
        let files = match dir {
            Some(d) => {
                let mut i =
                    std::io::BufWriter::new(std::fs::File::create(d.join("interfaces.csv"))?);
                let mut c = std::io::BufWriter::new(std::fs::File::create(d.join("classes.csv"))?);
                writeln!(i, "time_s,iface,rx_bps,tx_bps,backlog_pkts,backlog_bytes")?;
                writeln!(c, "time_s,iface,classid,bps,backlog_bytes,qlen,drops")?;
                i.flush()?;
                c.flush()?;
                Some((i, c))
            }
            None => None,
        };
        Ok(Sampler {
            every: every.max(1_000_000),
            next: 0,
            last_t: 0,
            last_bytes: BTreeMap::new(),
            plotted: Plotted::default(),
            files,
        })
    }

    /// When the next sample is due.
    pub fn next_due(&self) -> Nanos {
        self.next
    }

    /// Take a sample of `engine`'s counters if one is due at `now` (no port's receive counter: see
    /// `Bridge::sample_counts` for a bridge's).
    pub fn tick(&mut self, now: Nanos, engine: &Engine) {
        if now >= self.next {
            self.tick_counts(now, &counts(engine, now));
        }
    }

    /// Take a sample of `counts` (several engines' added up, for `tclab live --queues N`) if one is due
    /// at `now`.
    pub fn tick_counts(&mut self, now: Nanos, counts: &[Count]) {
        if now < self.next {
            return;
        }
        let dt = now.saturating_sub(self.last_t).max(1) as f64 / 1e9;
        let t = now as f64 / 1e9;
        let first = self.last_bytes.is_empty();
        let mut rate = |key: (String, String), bytes: u64| -> f64 {
            let before = self.last_bytes.insert(key, bytes).unwrap_or(bytes);
            bytes.saturating_sub(before) as f64 * 8.0 / dt
        };
        let mut devs = Vec::new();
        let mut classes = Vec::new();
        for c in counts {
            let bps = rate((c.dev.clone(), c.class.clone()), c.bytes);
            if c.class.is_empty() {
                // "\0rx" cannot be a classid: the port's received bytes, keyed beside the root's.
                let rx_bps = rate((c.dev.clone(), "\0rx".into()), c.rx_bytes);
                devs.push((c.dev.clone(), rx_bps, bps, c.qlen, c.backlog));
            } else {
                classes.push((
                    c.dev.clone(),
                    c.class.clone(),
                    bps,
                    c.backlog,
                    c.qlen,
                    c.drops,
                ));
            }
        }
        self.last_t = now;
        self.next = now + self.every;
        if first {
            return;
        }
        for (dev, rx_bps, bps, qlen, backlog) in devs {
            if let Some((f, _)) = self.files.as_mut() {
                let _ = writeln!(f, "{t:.3},{dev},{rx_bps:.0},{bps:.0},{qlen},{backlog}");
            }
            self.plotted
                .tx_bps
                .entry(dev.clone())
                .or_default()
                .push(t, bps);
            self.plotted
                .backlog
                .entry(dev)
                .or_default()
                .push(t, backlog as f64);
        }
        for (dev, id, bps, backlog, qlen, drops) in classes {
            if let Some((_, f)) = self.files.as_mut() {
                let _ = writeln!(f, "{t:.3},{dev},{id},{bps:.0},{backlog},{qlen},{drops}");
            }
            self.plotted
                .class_bps
                .entry(format!("{dev} {id}"))
                .or_default()
                .push(t, bps);
        }
        if let Some((i, c)) = self.files.as_mut() {
            let _ = i.flush();
            let _ = c.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tclab_core::qdisc::Cx;
    use tclab_core::Packet;

    #[test]
    fn rates_are_bytes_sent_between_samples_over_the_time_between_them() {
        let dir = std::env::temp_dir().join(format!("tclab-sampler-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut e = Engine::new();
        e.add_device("eth0", 1500, 1000);
        // A root that counts what it sends (the default noqueue counts nothing, as the kernel's).
        let argv = ["qdisc", "add", "dev", "eth0", "root", "pfifo"].map(String::from);
        assert_eq!(tclab_tc::run(&mut e, &argv, 0).code, 0);
        let mut s = Sampler::new(500_000_000, Some(&dir)).unwrap();
        s.tick(0, &e);
        // 100 frames of 1250 bytes leave in the first 0.5 s: 2 Mbit/s.
        let dev = e.device_mut("eth0").unwrap();
        for _ in 0..100 {
            dev.enqueue(Packet::of_len(1250), &mut Cx::new(0));
            dev.dequeue(&mut Cx::new(0));
        }
        s.tick(400_000_000, &e); // not due yet
        s.tick(500_000_000, &e);
        s.tick(1_000_000_000, &e);
        let rates: Vec<f64> = s.plotted.tx_bps["eth0"]
            .points
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(rates, vec![2_000_000.0, 0.0]);
        // Already on disk, before the run ends.
        let csv = std::fs::read_to_string(dir.join("interfaces.csv")).unwrap();
        // The columns tclab sim writes: time_s,iface,rx_bps,tx_bps,backlog_pkts,backlog_bytes.
        assert!(
            csv.starts_with("time_s,iface,rx_bps,tx_bps,backlog_pkts,backlog_bytes\n")
                && csv.contains("\n0.500,eth0,0,2000000,0,0\n"),
            "{csv}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two queues' engines: each counts the root's share it sent, and only its own tree's class (the
    /// other's copy is idle, all zero): added up, the root is their sum and each class its queue's.
    #[test]
    fn several_queues_counts_add_up_key_by_key() {
        let c = |class: &str, bytes: u64, backlog: u32| Count {
            dev: "eth0".into(),
            class: class.into(),
            bytes,
            backlog,
            qlen: backlog / 5,
            drops: 0,
            rx_bytes: bytes / 2,
        };
        let q0 = vec![c("", 3000, 10), c("1:10", 3000, 10), c("2:10", 0, 0)];
        let q1 = vec![c("", 5000, 0), c("1:10", 0, 0), c("2:10", 5000, 0)];
        assert_eq!(
            add_up(&[q0, q1]),
            vec![c("", 8000, 10), c("1:10", 3000, 10), c("2:10", 5000, 0)]
        );
    }

    #[test]
    fn a_long_run_keeps_a_bounded_number_of_points_whose_mean_is_the_runs() {
        let mut s = Series::default();
        for k in 0..100_000 {
            s.push(k as f64, (k % 2) as f64 * 2.0);
        }
        assert!(s.points.len() < MAX_POINTS, "{}", s.points.len());
        let mean = s.points.iter().map(|p| p.1).sum::<f64>() / s.points.len() as f64;
        assert!((mean - 1.0).abs() < 1e-9, "{mean}");
    }
}
