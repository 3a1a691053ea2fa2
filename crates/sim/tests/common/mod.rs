//! Helpers the simulator's integration tests share.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::Scenario;

/// An interface's transmit rate per sample, as (end of the sample in s, bit/s); `label` is `node:dev`.
#[allow(dead_code)] // not every test that shares this module reads samples
pub fn tx_samples(sc: &Scenario, out: &Outcome, label: &str) -> Vec<(f64, f64)> {
    out.recorder
        .iface_samples
        .iter()
        .filter(|s| sc.net.port_label(s.iface) == label)
        .map(|s| (s.t as f64 / 1e9, s.tx_bps))
        .collect()
}

/// The result of the flow named `name` (a `[[traffic]]` entry).
#[allow(dead_code)] // not every test that shares this module reads flows
pub fn flow<'a>(out: &'a Outcome, name: &str) -> &'a tclab_sim::run::FlowResult {
    out.flows
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
}

/// A writer into shared memory, for a trace read back in the same test (`sink.0.borrow()`).
#[allow(dead_code)] // not every test that shares this module writes a trace
#[derive(Clone, Default)]
pub struct Sink(pub Rc<RefCell<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
