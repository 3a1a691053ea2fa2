//! A deterministic fuzz of the tc parser: 20 000 command lines assembled from tc's own vocabulary, valid
//! values, hostile values and truncations, run against one engine. The property: no panic, every failure
//! has a message and one of tc's exit codes, and a refused command leaves `qdisc show`/`class show` as they
//! were (validate-then-apply).

use tclab_core::Engine;

const WORDS: &[&str] = &[
    "qdisc",
    "class",
    "add",
    "change",
    "replace",
    "del",
    "show",
    "dev",
    "eth0",
    "eth1",
    "root",
    "parent",
    "handle",
    "classid",
    "1:",
    "1:10",
    "1:1",
    "2:",
    "ffff:",
    "10000:",
    "123^",
    ":20",
    "htb",
    "tbf",
    "pfifo",
    "bfifo",
    "pfifo_fast",
    "sfq",
    "foo",
    "rate",
    "ceil",
    "burst",
    "cburst",
    "latency",
    "limit",
    "peakrate",
    "mtu",
    "prio",
    "quantum",
    "r2q",
    "default",
    "direct_qlen",
    "overhead",
    "mpu",
    "linklayer",
    "atm",
    "ethernet",
    "180kbit",
    "0",
    "1mbit",
    "10gbit",
    "159900000000000000",
    "10k",
    "1540",
    "20ms",
    "-1",
    "99999999999",
    "8",
    "65535",
    "1e308",
    "nan",
    "",
    "help",
    "-s",
    "-d",
    "-j",
];

#[test]
fn random_command_lines_never_panic_and_refusals_change_nothing() {
    let mut engine = Engine::new();
    let mut seed: u64 = 0x7c1a_b5ee_d000_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let show = |e: &mut Engine| {
        let q = tclab_tc::run(e, &["qdisc".into(), "show".into()], 0).stdout;
        let c0 = tclab_tc::run(
            e,
            &["class".into(), "show".into(), "dev".into(), "eth0".into()],
            0,
        )
        .stdout;
        let c1 = tclab_tc::run(
            e,
            &["class".into(), "show".into(), "dev".into(), "eth1".into()],
            0,
        )
        .stdout;
        (q, c0, c1)
    };
    for _ in 0..20_000 {
        let n = 1 + (next() % 14) as usize;
        let argv: Vec<String> = (0..n)
            .map(|_| WORDS[(next() % WORDS.len() as u64) as usize].to_string())
            .collect();
        let before = show(&mut engine);
        let out = tclab_tc::run(&mut engine, &argv, 0);
        assert!(
            [0, 1, 2, 255].contains(&out.code),
            "{argv:?}: exit {}",
            out.code
        );
        if out.code != 0 {
            assert!(!out.stderr.trim().is_empty(), "{argv:?} failed silently");
            assert_eq!(
                show(&mut engine),
                before,
                "{argv:?} was refused but changed the policy"
            );
        }
    }
}
