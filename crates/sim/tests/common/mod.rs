//! Helpers the simulator's integration tests share.

use tclab_sim::run::Outcome;
use tclab_sim::scenario::Scenario;

/// An interface's transmit rate per sample, as (end of the sample in s, bit/s); `label` is `node:dev`.
pub fn tx_samples(sc: &Scenario, out: &Outcome, label: &str) -> Vec<(f64, f64)> {
    out.recorder
        .iface_samples
        .iter()
        .filter(|s| sc.net.port_label(s.iface) == label)
        .map(|s| (s.t as f64 / 1e9, s.tx_bps))
        .collect()
}
