//! `tclab demo`: seed 004's idea in miniature, run through the engine in virtual time. Two senders share a
//! 1 Mbit uplink: interactive traffic (prio 0, guaranteed 300 kbit) and a bulk upload that would take it all.
//! The link dequeues whenever it is free or when HTB asks to be woken, exactly as a driver would.

use tclab_core::qdisc::Cx;
use tclab_core::{Engine, Packet, NSEC_PER_SEC};

const POLICY: &[&str] = &[
    "qdisc add dev eth0 root handle 1: htb default 20",
    "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit ceil 1mbit",
    "class add dev eth0 parent 1:1 classid 1:10 htb rate 300kbit ceil 1mbit prio 0",
    "class add dev eth0 parent 1:1 classid 1:20 htb rate 700kbit ceil 1mbit prio 1",
    "qdisc add dev eth0 parent 1:20 handle 20: pfifo limit 50",
];

pub fn run(_args: &[String]) -> Result<u8, String> {
    let mut engine = Engine::new();
    println!("tclab demo: HTB on a 1 Mbit/s link, 10 s of virtual time\n");
    for line in POLICY {
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let out = tclab_tc::run(&mut engine, &words, 0);
        if out.code != 0 {
            return Err(format!("policy line failed: {line}: {}", out.stderr));
        }
        println!("  tc {line}");
    }
    let link_ns_per_byte = 8_000; // 1 Mbit/s wire: 8 µs per byte
    let end = 10 * NSEC_PER_SEC;
    // Offered load: interactive 200-byte packets at 200 kbit/s (one every 8 ms), bulk 1500-byte at 2 Mbit/s.
    let (inter_gap, bulk_gap) = (8_000_000u64, 6_000_000u64);
    let (mut next_inter, mut next_bulk, mut link_free) = (0u64, 0u64, 0u64);
    let mut wake: Option<u64> = None;
    let mut sent = [0u64; 2];
    let mut delay_sum = [0u64; 2];
    let mut count = [0u64; 2];
    let dev = "eth0";
    loop {
        // Next event: an arrival, the link becoming free, or a shaper wake-up.
        let mut t = next_inter.min(next_bulk);
        if link_free > 0 {
            t = t.min(link_free);
        }
        if let Some(w) = wake {
            t = t.min(w);
        }
        if t >= end {
            break;
        }
        let mut cx = Cx::new(t);
        let d = engine.device_mut(dev).ok_or("device vanished")?;
        if t == next_inter {
            let p = Packet {
                len: 200,
                priority: 0x10010,
                tag: 0,
                ..Packet::of_len(200)
            };
            d.enqueue(p, &mut cx);
            next_inter += inter_gap;
        }
        if t == next_bulk {
            let p = Packet {
                tag: 1,
                ..Packet::of_len(1500)
            };
            d.enqueue(p, &mut cx);
            next_bulk += bulk_gap / 4;
        }
        if t >= link_free {
            let mut cx = Cx::new(t);
            match d.dequeue(&mut cx) {
                Some(p) => {
                    let k = p.tag as usize;
                    sent[k] += p.len as u64;
                    count[k] += 1;
                    delay_sum[k] += t - p.enqueue_ns;
                    link_free = t + p.len as u64 * link_ns_per_byte;
                    wake = None;
                }
                None => {
                    link_free = 0;
                    wake = cx.wake_at;
                }
            }
        }
    }
    println!("\n  class           offered    sent       avg queueing delay");
    let names = ["1:10 interactive", "1:20 bulk       "];
    let offered = [200.0, 2000.0];
    for k in 0..2 {
        let kbit = sent[k] as f64 * 8.0 / 10.0 / 1000.0;
        let avg_ms = if count[k] > 0 {
            delay_sum[k] as f64 / count[k] as f64 / 1e6
        } else {
            0.0
        };
        println!(
            "  {}  {:>5.0} kbit {:>6.1} kbit {:>8.1} ms",
            names[k], offered[k], kbit, avg_ms
        );
    }
    println!("\n$ tc -s class show dev eth0");
    let words: Vec<String> = "-s class show dev eth0"
        .split_whitespace()
        .map(str::to_string)
        .collect();
    print!("{}", tclab_tc::run(&mut engine, &words, end).stdout);
    Ok(0)
}
