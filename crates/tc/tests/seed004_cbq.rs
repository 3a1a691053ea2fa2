//! Seed 004's CBQ script ("the ultimate traffic conditioner", LARTC 15.8.2), uplink part, applied with the
//! script's own tc lines, then driven with packets in virtual time. What the script intends:
//!
//! - the whole uplink is held below the modem's rate (UPLINK = 220 kbit, the modem being a bit faster), so
//!   no queue builds in the modem;
//! - the interactive class 1:10 (prio 1) goes before the bulk class 1:20 (prio 2): a ping waits for at
//!   most the bulk packet already on the wire, not for the bulk backlog.
//!
//! The script's u32 filters are not part of this branch: packets are classified the way those filters
//! would place them, through `skb->priority` naming the class (`cbq_classify` step 1).

use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Engine, Packet, NSEC_PER_SEC};

const MS: u64 = 1_000_000;

fn tc(e: &mut Engine, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

fn script() -> Engine {
    let mut e = Engine::new();
    e.add_device("ppp0", 1500, 1000);
    let (dev, uplink) = ("ppp0", 220);
    for line in [
        format!("qdisc add dev {dev} root handle 1: cbq avpkt 1000 bandwidth 10mbit"),
        format!(
            "class add dev {dev} parent 1: classid 1:1 cbq rate {uplink}kbit allot 1500 prio 5 bounded isolated"
        ),
        format!(
            "class add dev {dev} parent 1:1 classid 1:10 cbq rate {uplink}kbit allot 1600 prio 1 avpkt 1000"
        ),
        format!(
            "class add dev {dev} parent 1:1 classid 1:20 cbq rate {}kbit allot 1600 prio 2 avpkt 1000",
            9 * uplink / 10
        ),
        format!("qdisc add dev {dev} parent 1:10 handle 10: sfq perturb 10"),
        format!("qdisc add dev {dev} parent 1:20 handle 20: sfq perturb 10"),
    ] {
        tc(&mut e, &line);
    }
    e
}

#[test]
fn seed004_cbq_shapes_below_the_modem_and_puts_interactive_first() {
    let mut e = script();
    let dev = e.device_mut("ppp0").unwrap();
    // Bulk: a 1500-byte upload packet every 2 ms (6 Mbit/s offered) into 1:20. Interactive: a 100-byte
    // ping every 100 ms into 1:10. The device's own link is 10 Mbit/s, as the script tells CBQ.
    let link_bps = 1_250_000u64;
    let end = 20 * NSEC_PER_SEC;
    let mut arrivals: Vec<(u64, Packet)> = Vec::new();
    let mut t = 0;
    let mut i = 0;
    while t < end {
        let class = if t % (100 * MS) == 0 && t > 0 {
            0x0001_0010
        } else {
            0x0001_0020
        };
        let len = if class == 0x0001_0010 { 100 } else { 1500 };
        arrivals.push((
            t,
            Packet {
                len,
                priority: class,
                tag: i,
                ..Packet::of_len(len)
            },
        ));
        i += 1;
        t += 2 * MS;
    }
    let mut out: Vec<(u64, u64, Packet)> = Vec::new();
    let (mut now, mut link_free, mut next) = (0u64, 0u64, 0usize);
    while now < end {
        while next < arrivals.len() && arrivals[next].0 <= now {
            let mut cx = Cx::new(now);
            let _: Verdict = dev.enqueue(arrivals[next].1.clone(), &mut cx);
            next += 1;
        }
        let mut t = arrivals.get(next).map_or(u64::MAX, |a| a.0);
        if now < link_free {
            t = t.min(link_free);
        } else {
            let mut cx = Cx::new(now);
            match dev.dequeue(&mut cx) {
                Some(p) => {
                    link_free = now + p.len as u64 * NSEC_PER_SEC / link_bps;
                    let arrived = arrivals[p.tag as usize].0;
                    out.push((arrived, now, p));
                    t = t.min(link_free);
                }
                None => t = t.min(cx.wake_at.unwrap_or(u64::MAX)),
            }
        }
        if t == u64::MAX {
            break;
        }
        now = t.max(now + 1);
    }
    // 1. The uplink stays below the modem: after the first second, at most 220 kbit/s (+2 %, CBQ's own
    //    inaccuracy) and comfortably under a 256 kbit/s modem; and it is used (≥ 90 % of 220 kbit/s).
    let bytes: u64 = out
        .iter()
        .filter(|o| o.1 >= NSEC_PER_SEC)
        .map(|o| o.2.len as u64)
        .sum();
    let bps = bytes * 8 / 19;
    assert!(
        (220_000 * 90 / 100..=220_000 * 102 / 100).contains(&bps),
        "uplink {bps} bit/s"
    );
    // 2. Interactive before bulk: a ping waits at most for the bulk packet in progress at 220 kbit/s
    //    (1500 B ≈ 55 ms) plus its own turn; the bulk backlog (an SFQ of up to 127 packets ≈ 7 s) waits
    //    far longer.
    let pings: Vec<u64> = out
        .iter()
        .filter(|o| o.2.priority == 0x0001_0010)
        .map(|o| o.1 - o.0)
        .collect();
    assert!(pings.len() >= 190, "pings delivered: {}", pings.len());
    let worst = *pings.iter().max().unwrap();
    assert!(worst <= 120 * MS, "worst ping wait {} ms", worst / MS);
    let mut bulk: Vec<u64> = out
        .iter()
        .filter(|o| o.2.priority == 0x0001_0020 && o.1 > 5 * NSEC_PER_SEC)
        .map(|o| o.1 - o.0)
        .collect();
    bulk.sort();
    assert!(
        bulk[bulk.len() / 2] > 2 * NSEC_PER_SEC,
        "bulk waits behind its backlog: median {} ms",
        bulk[bulk.len() / 2] / MS
    );
}
