//! What a live run looked like over time: every `every` nanoseconds, each device's sent rate, backlog
//! and drops (its root qdisc's counters, as `tc -s qdisc show` reads them) and each class's — the
//! series `tclab sim` writes as interfaces.csv and classes.csv, here from a real run, for the same plots.
//! Rates are the difference of the byte counters between two samples over the time between them (the
//! loop takes a sample at its first turn past the due time, so intervals are measured, not assumed).

use std::collections::BTreeMap;
use std::fmt::Write;
use tclab_core::{Engine, Nanos};

/// One device at one sample.
pub struct DevSample {
    pub t: Nanos,
    pub dev: String,
    pub tx_bps: f64,
    pub backlog_bytes: u32,
    pub drops: u64,
}

/// One class at one sample.
pub struct ClassSample {
    pub t: Nanos,
    pub dev: String,
    pub class: String,
    pub rate_bps: f64,
    pub backlog_bytes: u32,
    pub drops: u64,
}

pub struct Sampler {
    pub every: Nanos,
    next: Nanos,
    last_t: Nanos,
    /// (device, class or "") → bytes sent at the last sample.
    last_bytes: BTreeMap<(String, String), u64>,
    pub devs: Vec<DevSample>,
    pub classes: Vec<ClassSample>,
}

impl Sampler {
    pub fn new(every: Nanos) -> Sampler {
        Sampler {
            every: every.max(1_000_000),
            next: 0,
            last_t: 0,
            last_bytes: BTreeMap::new(),
            devs: Vec::new(),
            classes: Vec::new(),
        }
    }

    /// When the next sample is due.
    pub fn next_due(&self) -> Nanos {
        self.next
    }

    /// Take a sample if one is due at `now`.
    pub fn tick(&mut self, now: Nanos, engine: &Engine) {
        if now < self.next {
            return;
        }
        let dt = now.saturating_sub(self.last_t).max(1) as f64 / 1e9;
        let first = self.last_bytes.is_empty();
        for (name, dev) in engine.devices() {
            let st = dev.root().q.stats();
            let key = (name.to_string(), String::new());
            let before = self.last_bytes.insert(key, st.bytes).unwrap_or(st.bytes);
            if !first {
                self.devs.push(DevSample {
                    t: now,
                    dev: name.to_string(),
                    tx_bps: (st.bytes - before.min(st.bytes)) as f64 * 8.0 / dt,
                    backlog_bytes: st.backlog,
                    drops: st.drops as u64,
                });
            }
            for c in dev.classes(now).iter().filter(|c| !c.is_flow_queue()) {
                let key = (name.to_string(), c.classid.to_string());
                let before = self
                    .last_bytes
                    .insert(key, c.stats.bytes)
                    .unwrap_or(c.stats.bytes);
                if !first {
                    self.classes.push(ClassSample {
                        t: now,
                        dev: name.to_string(),
                        class: c.classid.to_string(),
                        rate_bps: (c.stats.bytes - before.min(c.stats.bytes)) as f64 * 8.0 / dt,
                        backlog_bytes: c.stats.backlog,
                        drops: c.stats.drops as u64,
                    });
                }
            }
        }
        self.last_t = now;
        self.next = now + self.every;
    }

    /// interfaces.csv: time, device, sent bit/s, backlog, drops so far.
    pub fn interfaces_csv(&self) -> String {
        let mut s = String::from("time_s,device,tx_bps,backlog_bytes,drops\n");
        for d in &self.devs {
            let _ = writeln!(
                s,
                "{:.3},{},{:.0},{},{}",
                d.t as f64 / 1e9,
                d.dev,
                d.tx_bps,
                d.backlog_bytes,
                d.drops
            );
        }
        s
    }

    /// classes.csv: time, device, class, sent bit/s, backlog, drops so far.
    pub fn classes_csv(&self) -> String {
        let mut s = String::from("time_s,device,class,rate_bps,backlog_bytes,drops\n");
        for c in &self.classes {
            let _ = writeln!(
                s,
                "{:.3},{},{},{:.0},{},{}",
                c.t as f64 / 1e9,
                c.dev,
                c.class,
                c.rate_bps,
                c.backlog_bytes,
                c.drops
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tclab_core::qdisc::Cx;
    use tclab_core::Packet;

    #[test]
    fn rates_are_bytes_sent_between_samples_over_the_time_between_them() {
        let mut e = Engine::new();
        e.add_device("eth0", 1500, 1000);
        let mut s = Sampler::new(500_000_000);
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
        let rates: Vec<f64> = s.devs.iter().map(|d| d.tx_bps).collect();
        assert_eq!(rates, vec![2_000_000.0, 0.0]);
        assert!(s.interfaces_csv().contains("\n0.500,eth0,2000000,0,0\n"));
    }
}
