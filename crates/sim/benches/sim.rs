//! `cargo bench -p tclab-sim`: the simulator's speed on the benchmark scenario (60 s of virtual time,
//! 30 TCP streams through a 100 Mbit/s HTB bottleneck, a ping alongside). Prints wall time, events per
//! second and simulated frames per second, best of three runs.

use std::time::Instant;
use tclab_sim::run::run;
use tclab_sim::scenario::load;

fn main() {
    let b = BUILTIN
        .iter()
        .find(|b| b.name == "bench-htb")
        .expect("the bench scenario is built in");
    let mut best = f64::MAX;
    let (mut events, mut frames, mut goodput) = (0, 0, 0.0);
    for _ in 0..3 {
        let mut sc =
            load(b.name, &toml, std::path::Path::new(".")).expect("the bench scenario loads");
        let t = Instant::now();
        let out = run(&mut sc, &mut |_| {}).expect("the bench scenario runs");
        let wall = t.elapsed().as_secs_f64();
        best = best.min(wall);
        events = out.events;
        frames = out.frames;
        goodput = out.flows[0].goodput_bps;
    }
    println!("bench-htb: 60 s simulated, 30 TCP streams + ping, 100 Mbit HTB");
    println!("  wall time (best of 3)  {best:.3} s");
    println!(
        "  events                 {events}  ({:.2} M events/s)",
        events as f64 / best / 1e6
    );
    println!(
        "  frames on the wires    {frames}  ({:.2} M frames/s)",
        frames as f64 / best / 1e6
    );
    println!("  TCP goodput            {:.2} Mbit/s", goodput / 1e6);
    println!("  speed-up over real time {:.0}x", 60.0 / best);
}
