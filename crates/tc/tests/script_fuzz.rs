//! The script_run fuzz target's body (`tclab_tc::fuzz_script::fuzz_one`) on stable Rust: every file in
//! `fuzz/seeds/script_run/` (the target's seeds and the place for its reproducers), then 30 scripts of
//! 15 lines built from a fixed seed out of what shaping scripts call — tc, ip link, ifconfig, ethtool -K,
//! modprobe/rmmod ifb, sysctl, iptables, by bare name, by path, through `$TC`, `sudo` and `command` —
//! with valid and hostile arguments. Each script runs under bash against a fresh store: it ends, loses no
//! call, every refused link/iptables call says why, and its journal replays.

use tclab_tc::fuzz::{seeds, xorshift};
use tclab_tc::fuzz_script::{fuzz_one, script_of};

const COMMANDS: &[&str] = &[
    "tc qdisc add dev eth0 root",
    "tc qdisc del dev eth0 root",
    "tc class add dev eth0 parent 1: classid 1:10",
    "tc filter add dev eth0 parent 1: protocol ip",
    "tc -batch",
    "/sbin/tc qdisc replace dev eth1 root",
    "$TC qdisc add dev ifb0 root",
    "${TC} class change dev eth0 classid 1:10",
    "sudo tc qdisc add dev eth0 ingress",
    "command tc qdisc show",
    "ip link set dev eth0",
    "ip link add ifb0 type ifb",
    "ip link add dev veth0 type veth peer name veth1",
    "ip link del ifb0",
    "ip link show",
    "ip route add default via 10.0.0.1",
    "/usr/sbin/ip li s eth1",
    "ifconfig eth0",
    "ifconfig ifb1",
    "ethtool -K eth0",
    "ethtool --offload eth1",
    "ethtool -k eth0",
    "modprobe ifb",
    "modprobe -r ifb",
    "insmod ifb",
    "rmmod ifb",
    "modprobe sch_htb",
    "sysctl -w net.core.default_qdisc=fq",
    "iptables -t mangle -A POSTROUTING -o eth0 -p tcp",
    "iptables -t mangle -F",
    "ip6tables -t mangle -F",
];

const ARGS: &[&str] = &[
    "htb",
    "default",
    "10",
    "rate",
    "1mbit",
    "ceil",
    "burst",
    "15k",
    "fq_codel",
    "sfq",
    "perturb",
    "netem",
    "delay",
    "100ms",
    "handle",
    "1:",
    "ffff:",
    "u32",
    "match",
    "ip",
    "dst",
    "10.0.0.0/8",
    "flowid",
    "1:10",
    "action",
    "mirred",
    "egress",
    "redirect",
    "dev",
    "ifb0",
    "eth0",
    "eth1",
    "mtu",
    "1400",
    "9000",
    "0",
    "txqueuelen",
    "qlen",
    "numtxqueues",
    "4",
    "up",
    "down",
    "type",
    "ifb",
    "dummy",
    "name",
    "tso",
    "gso",
    "off",
    "on",
    "numifbs=3",
    "numifbs=x",
    "-j",
    "MARK",
    "--set-mark",
    "5",
    "CLASSIFY",
    "--set-class",
    "-",
    "-force",
    "/nonexistent",
    "stab",
    "overhead",
    "-1",
    "99999999999",
    "''",
    "'",
    "\"",
    "$HOME",
    "`id`",
    "$(id)",
    ";",
    "|",
    "&",
    ">",
    "*",
    "\\",
    "",
];

#[test]
fn scripts_of_wrapped_commands_end_lose_no_call_and_replay() {
    let mut applied = 0;
    for (_, bytes) in seeds("script_run") {
        applied += fuzz_one(&bytes).len();
    }
    let mut next = xorshift(0x5c41_97f0_0024_0001);
    for _ in 0..30 {
        let mut script = String::new();
        for _ in 0..15 {
            let mut line = COMMANDS[(next() % COMMANDS.len() as u64) as usize].to_string();
            for _ in 0..next() % 7 {
                line.push(' ');
                line.push_str(ARGS[(next() % ARGS.len() as u64) as usize]);
            }
            script.push_str(&line);
            script.push('\n');
        }
        applied += fuzz_one(script.as_bytes()).len();
    }
    assert!(
        applied > 100,
        "the scripts changed something: {applied} records"
    );
}

/// The fuzzer's words reach bash quoted: only the wrapped commands run, whatever the input says.
#[test]
fn only_wrapped_commands_run() {
    let s = script_of(b"rm -rf /tmp/x\n/tmp/tc qdisc show\nsudo reboot\n$(id)\n/sbin/tc -s qdisc\ncommand ip link");
    let lines: Vec<&str> = s.lines().skip(2).collect();
    assert_eq!(
        lines,
        [
            "tc 'rm' '-rf' '/tmp/x'",
            "tc '/tmp/tc' 'qdisc' 'show'",
            "sudo tc 'reboot'",
            "tc '$(id)'",
            "/sbin/tc '-s' 'qdisc'",
            "command ip 'link'",
        ]
    );
}
