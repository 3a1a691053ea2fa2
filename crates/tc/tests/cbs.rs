//! The cbs qdisc through tc lines and a device in virtual time: a backlogged class sends at its
//! idleslope (`sch_cbs.c`: each packet costs len × sendslope / port rate credits, earned back at
//! idleslope; the port rate of a device without a link speed is 10 Mbit/s), and `tc qdisc show` lists
//! the default pfifo child as the kernel makes it visible.

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
