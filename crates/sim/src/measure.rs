//! Measurement: what seed 000's sampler script and `tc -s` told the experimenters, as time series.
//!
//! Every `interval` of virtual time (0.5 s by default, as seed 000's sampler read
//! `/sys/class/net/IF/statistics/{rx,tx}_bytes`) the recorder takes, for each interface and each ifb
//! device (where an ingress policy queues), the bytes received
//! and sent since the last sample as bit/s; for every class of every device, its rate, backlog and drops from
//! the qdisc's own counters; and for every flow, its goodput (payload bytes delivered in order to the
//! receiving application). Ping RTTs are kept per probe by the ping application itself.

use crate::net::{AppId, Network, Observer, Port};
use std::collections::BTreeMap;
use tclab_core::{Nanos, NSEC_PER_SEC};

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct IfaceSample {
    pub t: Nanos,
    pub iface: Port,
    pub rx_bps: f64,
    pub tx_bps: f64,
    /// Packets in the root qdisc at the sample instant.
    pub backlog_pkts: u32,
    pub backlog_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClassSample {
    pub t: Nanos,
    pub iface: Port,
    pub classid: String,
    pub bps: f64,
    pub backlog_bytes: u32,
    pub qlen: u32,
    pub drops: u32,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FlowSample {
    pub t: Nanos,
    pub flow: usize,
    pub goodput_bps: f64,
}

/// A flow whose goodput is followed: its name and the application that receives it.
pub struct FlowProbe {
    pub name: String,
    pub receivers: Vec<AppId>,
}

pub struct Recorder {
    pub interval: Nanos,
    /// The interfaces and ifb devices sampled.
    pub ifaces: Vec<Port>,
    pub flows: Vec<FlowProbe>,
    pub iface_samples: Vec<IfaceSample>,
    pub class_samples: Vec<ClassSample>,
    pub flow_samples: Vec<FlowSample>,
    last_t: Nanos,
    last_if: Vec<(u64, u64)>,
    last_class: BTreeMap<(Port, u32), u64>,
    last_flow: Vec<u64>,
}

fn bps(bytes: u64, ns: Nanos) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 * NSEC_PER_SEC as f64 / ns as f64
    }
}

impl Recorder {
    pub fn new(interval: Nanos, ifaces: Vec<Port>, flows: Vec<FlowProbe>) -> Recorder {
        let n_if = ifaces.len();
        let n_fl = flows.len();
        Recorder {
            interval,
            ifaces,
            flows,
            iface_samples: Vec::new(),
            class_samples: Vec::new(),
            flow_samples: Vec::new(),
            last_t: 0,
            last_if: vec![(0, 0); n_if],
            last_class: BTreeMap::new(),
            last_flow: vec![0; n_fl],
        }
    }
}

impl Observer for Recorder {
    fn observe(&mut self, now: Nanos, net: &Network) {
        let dt = now - self.last_t;
        for (k, &i) in self.ifaces.iter().enumerate() {
            let c = net.port_counters(i);
            let (rx0, tx0) = self.last_if[k];
            let (backlog_pkts, backlog_bytes) = net
                .port_device(i)
                .map(|d| {
                    let s = d.root().q.stats();
                    (s.qlen, s.backlog)
                })
                .unwrap_or((0, 0));
            self.iface_samples.push(IfaceSample {
                t: now,
                iface: i,
                rx_bps: bps(c.rx_bytes - rx0, dt),
                tx_bps: bps(c.tx_bytes - tx0, dt),
                backlog_pkts,
                backlog_bytes,
            });
            self.last_if[k] = (c.rx_bytes, c.tx_bytes);
            if let Some(dev) = net.port_device(i) {
                // Flow queues (sfq's, fq_codel's, cake's) are listed as classes while they are active; they come
                // and go with the traffic and carry no rate of their own, so they are not sampled.
                for cl in dev.classes_without_flows(now) {
                    let prev = self
                        .last_class
                        .insert((i, cl.classid.0), cl.stats.bytes)
                        .unwrap_or(0);
                    self.class_samples.push(ClassSample {
                        t: now,
                        iface: i,
                        classid: cl.classid.to_string(),
                        bps: bps(cl.stats.bytes.saturating_sub(prev), dt),
                        backlog_bytes: cl.stats.backlog,
                        qlen: cl.stats.qlen,
                        drops: cl.stats.drops,
                    });
                }
            }
        }
        for (k, f) in self.flows.iter().enumerate() {
            let total: u64 = f
                .receivers
                .iter()
                .map(|&a| net.apps[a].delivered_bytes())
                .sum();
            self.flow_samples.push(FlowSample {
                t: now,
                flow: k,
                goodput_bps: bps(total - self.last_flow[k], dt),
            });
            self.last_flow[k] = total;
        }
        self.last_t = now;
    }
}

/// Summary statistics of a set of RTTs, as ping prints them plus percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RttStats {
    pub count: usize,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    /// ping's mdev: sqrt(mean(rtt²) − mean(rtt)²).
    pub mdev_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
}

/// With no RTT at all (every probe lost) the statistics are absent, as ping(8) prints no rtt line: JSON
/// `null`, not zeros that would read as an instant reply.
impl serde::Serialize for RttStats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let v = |x: f64| (self.count > 0).then_some(x);
        let mut st = s.serialize_struct("RttStats", 8)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("min_ms", &v(self.min_ms))?;
        st.serialize_field("avg_ms", &v(self.avg_ms))?;
        st.serialize_field("max_ms", &v(self.max_ms))?;
        st.serialize_field("mdev_ms", &v(self.mdev_ms))?;
        st.serialize_field("p50_ms", &v(self.p50_ms))?;
        st.serialize_field("p90_ms", &v(self.p90_ms))?;
        st.serialize_field("p99_ms", &v(self.p99_ms))?;
        st.end()
    }
}

impl RttStats {
    pub fn of(rtts: &[Nanos]) -> RttStats {
        if rtts.is_empty() {
            return RttStats::default();
        }
        let ms: Vec<f64> = rtts.iter().map(|&r| r as f64 / 1e6).collect();
        let n = ms.len() as f64;
        let avg = ms.iter().sum::<f64>() / n;
        let sq = ms.iter().map(|x| x * x).sum::<f64>() / n;
        let mut sorted = ms.clone();
        sorted.sort_by(f64::total_cmp);
        // Nearest-rank percentile.
        let pct = |p: f64| sorted[(((p / 100.0) * n).ceil() as usize).clamp(1, sorted.len()) - 1];
        RttStats {
            count: ms.len(),
            min_ms: sorted[0],
            avg_ms: avg,
            max_ms: sorted[sorted.len() - 1],
            mdev_ms: (sq - avg * avg).max(0.0).sqrt(),
            p50_ms: pct(50.0),
            p90_ms: pct(90.0),
            p99_ms: pct(99.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_stats_by_hand() {
        // 10, 20, 30, 40 ms: mean 25, mean of squares 750, mdev sqrt(750 - 625) = 11.18.
        let s = RttStats::of(&[10_000_000, 40_000_000, 20_000_000, 30_000_000]);
        assert_eq!((s.min_ms, s.max_ms, s.avg_ms), (10.0, 40.0, 25.0));
        assert!((s.mdev_ms - 125f64.sqrt()).abs() < 1e-9);
        assert_eq!((s.p50_ms, s.p90_ms, s.p99_ms), (20.0, 40.0, 40.0));
    }
}
