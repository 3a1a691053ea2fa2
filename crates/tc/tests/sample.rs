//! The sample action through tc lines and a device's egress: one packet in `rate` goes to the PSAMPLE
//! group (`act_sample.c`: `get_random_u32_below(rate) == 0`), each sample at most `trunc` bytes;
//! every packet passes with the action's code and is counted; tc's listing and its refusals
//! (`m_sample.c`).

use tclab_core::{Cx, Engine, Packet};

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn one_packet_in_rate_is_sampled_and_every_one_passes() {
    let mut e = Engine::new();
    assert_eq!(
        run(&mut e, "qdisc add dev eth0 root handle 1: prio").code,
        0
    );
    let o = run(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 matchall action sample rate 4 group 5 trunc 64 index 3 classid 1:2",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dev = e.device_mut("eth0").unwrap();
    for _ in 0..4000 {
        let mut cx = Cx::new(0);
        let _ = dev.enqueue(Packet::of_len(1000), &mut cx);
        assert!(dev.dequeue(&mut cx).is_some(), "the packet goes on");
    }
    let a = e.actions().get("sample", 3).expect("action 3");
    let a = a.borrow();
    // Binomial(4000, 1/4): mean 1000, sd √750 ≈ 27.4; 5 sd either side.
    let n = a.psample.samples;
    assert!((863..=1137).contains(&n), "{n} samples");
    assert_eq!(a.psample.bytes, n * 64, "each sample truncated to 64 bytes");
    assert_eq!((a.stats.packets, a.stats.drops), (4000, 0));
    drop(a);
    let s = run(&mut e, "-s class show dev eth0").stdout;
    assert!(
        s.contains("class prio 1:2 parent 1: \n Sent 4000000 bytes 4000 pkt"),
        "{s}"
    );
    let f = run(&mut e, "actions get action sample index 3").stdout;
    assert!(
        f.contains("sample rate 1/4 group 5 trunc_size 64 pipe\n\t index 3 ref 1 bind 1"),
        "{f}"
    );
}

#[test]
fn refusals() {
    let mut e = Engine::new();
    let o = run(&mut e, "actions add action sample rate 0 group 1");
    assert_eq!(o.code, 255);
    assert!(
        o.stderr.starts_with("Error: invalid sample rate."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action sample rate 5");
    assert!(
        o.stderr.starts_with("param \"group\" not set\n"),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action sample index 7");
    assert!(
        o.stderr
            .starts_with("Error: sample rate and group are required."),
        "{}",
        o.stderr
    );
    let o = run(&mut e, "actions add action sample rate 4294967296 group 1");
    assert!(
        o.stderr.starts_with("Illegal rate 4294967296\n"),
        "{}",
        o.stderr
    );
    assert_eq!(run(&mut e, "actions ls action sample").stdout, "");
}
