//! The cbs qdisc through tc lines and a device in virtual time: a backlogged class sends at its
//! idleslope (`sch_cbs.c`: each packet costs len × sendslope / port rate credits, earned back at
//! idleslope; the port rate of a device without a link speed is 10 Mbit/s), and `tc qdisc show` lists
//! the default pfifo child as the kernel makes it visible; the port rate follows the link speed.

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn a_backlogged_class_is_held_to_its_idleslope() {
    let mut e = Engine::new();
    let o = run(
        &mut e,
        "qdisc add dev eth0 root handle 1: cbs idleslope 3000 sendslope -7000 hicredit 1500 locredit -7000",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dev = e.device_mut("eth0").unwrap();
    for _ in 0..900 {
        let _ = dev.enqueue(Packet::of_len(1500), &mut Cx::new(0));
    }
    // Dequeue whenever the shaper allows, for 2 s of virtual time.
    let (mut now, mut sent) = (0u64, 0u64);
    while now < 2_000_000_000 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => sent += u64::from(p.len),
            None => now = cx.wake_at.expect("backlogged: a wake-up"),
        }
    }
    // 3 Mbit/s is 375 000 bytes/s: 750 000 bytes in 2 s, within one packet.
    assert!((748_500..=751_500).contains(&sent), "{sent} bytes");
    let s = run(&mut e, "qdisc show dev eth0").stdout;
    assert!(
        s.contains("qdisc cbs 1: root refcnt 2 hicredit 1500 locredit -7000 sendslope -7000 idleslope 3000 offload 0 \nqdisc pfifo 0: parent 1: limit 1000p"),
        "{s}"
    );
    assert!(run(&mut e, "class show dev eth0")
        .stdout
        .contains("class cbs 1:1 parent 1: "));
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    let o = run(&mut e, "qdisc add dev eth0 root cbs offload 1");
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .starts_with("Error: Specified device does not support cbs offload."),
        "{}",
        o.stderr
    );
    let o = run(
        &mut e,
        "qdisc add dev eth0 root cbs idleslope 5 idleslope 6",
    );
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (1, "cbs: duplicate \"idleslope\" specification\n")
    );
    assert_eq!(
        run(&mut e, "qdisc show dev eth0")
            .stdout
            .matches("cbs")
            .count(),
        0
    );
}

/// Bytes a backlogged cbs root on `e`'s eth0 sends in 2 s of virtual time (6 000 packets of 1 500).
fn sent_in_two_seconds(e: &mut Engine) -> u64 {
    let dev = e.device_mut("eth0").unwrap();
    for _ in 0..6000 {
        let _ = dev.enqueue(Packet::of_len(1500), &mut Cx::new(0));
    }
    let (mut now, mut sent) = (0u64, 0u64);
    while now < 2_000_000_000 {
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => sent += u64::from(p.len),
            None => now = cx.wake_at.expect("backlogged: a wake-up"),
        }
    }
    sent
}

#[test]
fn the_port_rate_is_the_links_speed() {
    // Slopes for a 100 Mbit/s port: idleslope 30 Mbit/s, sendslope 30 - 100. A backlogged class gets
    // port × idle / (idle - send): 30 Mbit/s (7 500 000 bytes in 2 s) once the device reports 100
    // Mbit/s — told after the qdisc was made, as cbs_dev_notifier hears it — and 10 × 30 / 100 = 3
    // Mbit/s (750 000 bytes) on a device that reports none (the 10 Mbit/s fallback; locredit low
    // enough that a packet's 10 500-credit cost there is not cut).
    let link = |e: &mut Engine, args: &str| {
        let words: Vec<String> = args.split(' ').map(String::from).collect();
        tclab_tc::store::link(e, &words).unwrap();
    };
    let cbs = "qdisc add dev eth0 root handle 1: cbs idleslope 30000 sendslope -70000 hicredit 1500 locredit -20000";
    let mut e = Engine::new();
    link(&mut e, "add dev eth0 txqueuelen 10000");
    assert_eq!(run(&mut e, cbs).code, 0);
    link(&mut e, "set dev eth0 speed 100");
    let sent = sent_in_two_seconds(&mut e);
    assert!((7_498_500..=7_501_500).contains(&sent), "{sent} bytes");
    let mut e = Engine::new();
    link(&mut e, "add dev eth0 txqueuelen 10000");
    assert_eq!(run(&mut e, cbs).code, 0);
    let sent = sent_in_two_seconds(&mut e);
    assert!((748_500..=751_500).contains(&sent), "{sent} bytes");
    // locredit -7000 cuts that cost: a packet each 1.2 ms on the port + 7 000 credits back at
    // 3.75 MB/s (1.8667 ms), 653 packets in 2 s (979 500 bytes). The credits come back at -1
    // (timediff_to_credits divides down), and -1's delay divided down, 266 ns, earns none: a wake-up
    // at the same instant for ever in exact virtual time, so cbs rounds that delay up.
    let mut e = Engine::new();
    link(&mut e, "add dev eth0 txqueuelen 10000");
    assert_eq!(run(&mut e, &cbs.replace("-20000", "-7000")).code, 0);
    assert_eq!(sent_in_two_seconds(&mut e), 979_500);
}
