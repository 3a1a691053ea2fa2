mod common;
use common::*;
use tclab_tcp::*;

#[test]
fn smoke_transfer() {
    let mut sim = Sim::new(
        Config::default(),
        Config::default(),
        PathCfg::new(10_000_000, 10 * MS, 17),
        1_000_000,
    );
    let end = sim.run_to_completion(60 * SEC);
    let c = sim.hosts[0].stats();
    let s = sim.hosts[1].stats();
    eprintln!("end {end} client {:?}\nserver {:?}", c, s);
    assert_eq!(s.bytes_delivered, 1_000_000);
    assert!(sim.hosts[0].is_closed() && sim.hosts[1].is_closed());
}
