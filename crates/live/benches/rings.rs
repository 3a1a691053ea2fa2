//! The bridge's own cost per frame, with its `TPACKET_V2` rings, without them (`recvmmsg` and
//! `sendmmsg`, `tclab live --no-ring`) and with AF_XDP sockets (`tclab live --xdp`). `tclab lab bench` measures forwarding rates against the
//! kernel, but on a machine shared with other work a rate follows the share of the cores the bridge
//! gets, and its CPU time includes the idle spin that waits for the senders. Here the senders are out
//! of the way: `FRAMES` frames are queued on `a1` first (in its ring, socket buffer or AF_XDP RX
//! ring), then one
//! bridge without a policy forwards them to `a0` in one run, and the bench reads the CPU time its
//! thread ran (`CLOCK_THREAD_CPUTIME_ID`; the kernel's work on the sends, done in that thread, is in
//! it). Median of `RUNS`, each in a new namespace's veths. Needs root; says so and exits otherwise.
//!
//! `cargo bench -p tclab-live --bench rings`

use tclab_core::Engine;
use tclab_live::bridge::{open_ports, Bridge, Rings};
use tclab_live::sys::{self, PacketSocket};
use tclab_live::vethns::VethNs;

/// Frames per run: what a socket buffer of 8 MiB holds at 1514 bytes (about 2.5 KB each in the
/// kernel), so that the copy path loses none before the bridge starts.
const FRAMES: usize = 2000;
const RUNS: usize = 7;

/// A frame of `len` bytes from 02:00:00:00:00:02 (EtherType 0x88b5, for local experiments): the
/// bridge forwards it whatever it carries.
fn frame(len: usize, k: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5];
    f.extend((0..len - 14).map(|i| (i + k) as u8));
    f
}

/// CPU nanoseconds per frame of one run, or why it could not be measured.
fn run(rings: Rings, len: usize) -> Result<f64, String> {
    let ns = VethNs::new("ring-bench")?;
    let (mut ports, tx, rx) = ns.enter(|| -> Result<_, String> {
        let (ports, _) = open_ports(&["a0".into(), "a1".into()], 1, rings)?;
        let tx = PacketSocket::open("b1").map_err(|e| e.to_string())?;
        let rx = PacketSocket::open("b0").map_err(|e| e.to_string())?;
        Ok((ports, tx, rx))
    })??;
    let frames: Vec<Vec<u8>> = (0..FRAMES).map(|k| frame(len, k)).collect();
    let mut sent = 0;
    while sent < FRAMES {
        sent += tx.send_batch(&frames[sent..]).map_err(|e| e.to_string())?;
    }
    // Let the veth's receive softirq put the last frames in the ring or buffer.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut b = Bridge::on_ports(Engine::new(), ports.remove(0));
    let start = sys::thread_cpu_ns();
    // The frames are forwarded in the first milliseconds; then the loop sleeps in ppoll.
    b.run(Some(200_000_000))?;
    let cpu = sys::thread_cpu_ns() - start;
    let st = b.stats();
    let (got, out) = (st[1].1.rx_packets, st[0].1.tx_packets);
    if got != FRAMES as u64 || out != FRAMES as u64 {
        return Err(format!("{got} of {FRAMES} frames received, {out} sent"));
    }
    drop(rx);
    Ok(cpu as f64 / FRAMES as f64)
}

fn main() {
    if let Err(e) = tclab_live::lab::Lab::check_root() {
        println!("rings bench skipped: {e}");
        return;
    }
    println!("tclab live's thread, CPU per frame forwarded ({FRAMES} frames queued first, median of {RUNS} runs):");
    for len in [64, 1514] {
        let mut medians = Vec::new();
        for (name, rings) in [
            ("rings", Rings::On),
            ("--no-ring", Rings::Off),
            ("--xdp", Rings::Xdp),
        ] {
            let mut v = Vec::new();
            for _ in 0..RUNS {
                match run(rings, len) {
                    Ok(ns) => v.push(ns),
                    Err(e) => {
                        println!("{len} B, {name}: {e}");
                        return;
                    }
                }
            }
            v.sort_by(f64::total_cmp);
            let m = v[RUNS / 2];
            println!(
                "{len:>5} B frames, {name:<10} {:>7.0} ns (runs {:.0}–{:.0})",
                m,
                v[0],
                v[RUNS - 1]
            );
            medians.push(m);
        }
        println!(
            "{len:>5} B frames: rings / --no-ring = {:.2}, --xdp / rings = {:.2}",
            medians[0] / medians[1],
            medians[2] / medians[0]
        );
    }
}
