//! A deterministic fuzz of the tc parser on stable Rust: 20 000 command lines assembled from tc's own
//! vocabulary, valid values, hostile values and truncations, in 20 scripts of 1 000 lines, each run against
//! one engine; then a few byte-level inputs, and every file in `fuzz/seeds/tc_parse/` (the libFuzzer target's
//! seeds, and the place for its crash reproducers). The body and its properties are `tclab_tc::fuzz::fuzz_one`,
//! the same the libFuzzer target `fuzz/fuzz_targets/tc_parse.rs` runs: no panic, every failure has a message
//! and one of tc's exit codes, and a refused command leaves `qdisc show`/`class show` as they were
//! (validate-then-apply).

use tclab_tc::fuzz::fuzz_one;

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
    "drr",
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
    // Filters, actions and mirred (issue 10).
    "filter",
    "actions",
    "action",
    "protocol",
    "ip",
    "u32",
    "match",
    "u32",
    "matchall",
    "ingress",
    "clsact",
    "ingress_block",
    "egress_block",
    "mirred",
    "egress",
    "mirror",
    "redirect",
    "ifb0",
    "lo",
    "index",
    "pipe",
    "stolen",
    "reclassify",
    "goto",
    "chain",
    "list",
    "flush",
    "get",
];

#[test]
fn random_command_lines_never_panic_and_refusals_change_nothing() {
    let mut seed: u64 = 0x7c1a_b5ee_d000_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20 {
        let mut script = Vec::new();
        for line in 0..1000 {
            if line > 0 {
                script.push(b'\n');
            }
            let n = 1 + (next() % 14) as usize;
            let argv: Vec<&str> = (0..n)
                .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
                .collect();
            script.extend_from_slice(argv.join(" ").as_bytes());
        }
        fuzz_one(&script);
    }
}

#[test]
fn byte_level_inputs() {
    fuzz_one(b"");
    fuzz_one(b"\n\n  \n");
    fuzz_one(b"qdisc add dev eth0 root handle 1: htb\xff\xfe default 20");
    fuzz_one(b"qdisc add dev \xc3\x28 root pfifo limit 1\nqdisc show");
    fuzz_one(b"qdisc add dev eth0 root handle 1: htb\r\nclass add dev eth0 parent 1: classid 1:1 htb rate 1mbit");
    let long = "9".repeat(5000);
    fuzz_one(
        format!("qdisc add dev eth0 root tbf rate {long} burst {long} latency {long}").as_bytes(),
    );
    fuzz_one(format!("qdisc add dev eth0 root handle {long}: htb").as_bytes());
}

#[test]
fn libfuzzer_seeds_and_reproducers() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/tc_parse");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    for f in files {
        eprintln!("{}", f.display());
        fuzz_one(&std::fs::read(&f).unwrap());
    }
}
