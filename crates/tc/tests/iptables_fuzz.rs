//! Random iptables command lines (tokens drawn from the grammar's own words, values and garbage): the
//! parser never panics, and a refused line leaves the table exactly as it was.

use tclab_core::Engine;

const WORDS: &[&str] = &[
    "-t",
    "mangle",
    "filter",
    "-A",
    "-I",
    "-D",
    "-R",
    "-N",
    "-X",
    "-F",
    "-Z",
    "-P",
    "-E",
    "-L",
    "-S",
    "-C",
    "PREROUTING",
    "INPUT",
    "FORWARD",
    "OUTPUT",
    "POSTROUTING",
    "sub",
    "x",
    "1",
    "2",
    "0",
    "-1",
    "99999",
    "-p",
    "tcp",
    "udp",
    "icmp",
    "all",
    "47",
    "!",
    "-s",
    "-d",
    "10.0.0.0/8",
    "1.2.3.4",
    "300.1.1.1",
    "0/0",
    "-i",
    "-o",
    "eth+",
    "eth0",
    "--sport",
    "--dport",
    "22",
    "1000:2000",
    "5:3",
    ":",
    "--syn",
    "--tcp-flags",
    "SYN,ACK",
    "ACK",
    "ALL",
    "NONE",
    "-m",
    "length",
    "--length",
    "40:64",
    "connbytes",
    "--connbytes",
    "10:",
    "--connbytes-dir",
    "both",
    "reply",
    "--connbytes-mode",
    "bytes",
    "avgpkt",
    "tos",
    "--tos",
    "0x10",
    "Minimize-Delay",
    "dscp",
    "--dscp",
    "46",
    "--dscp-class",
    "EF",
    "mark",
    "connmark",
    "--mark",
    "0x1/0xf",
    "state",
    "--state",
    "NEW,ESTABLISHED",
    "conntrack",
    "--ctstate",
    "multiport",
    "--dports",
    "53,80:90",
    "--ports",
    "-j",
    "-g",
    "MARK",
    "--set-mark",
    "--set-xmark",
    "--and-mark",
    "--or-mark",
    "--xor-mark",
    "CONNMARK",
    "--save-mark",
    "--restore-mark",
    "--mask",
    "--nfmask",
    "--ctmask",
    "CLASSIFY",
    "--set-class",
    "1:10",
    "ffff:abc",
    "DSCP",
    "--set-dscp",
    "--set-dscp-class",
    "TOS",
    "--set-tos",
    "--and-tos",
    "RETURN",
    "ACCEPT",
    "DROP",
    "-n",
    "-v",
    "-x",
    "--line-numbers",
    "-nvL",
    "--foo",
    "--",
    "-",
    "",
    "--dport=80",
    "-tmangle",
    "icmp-type",
    "--icmp-type",
    "echo-request",
    "-c",
    "5",
    "LOG",
];

#[test]
fn random_lines_never_panic_and_refusals_change_nothing() {
    let mut e = Engine::new();
    // Start from a table with something in it.
    for l in [
        "-t mangle -N sub",
        "-t mangle -A sub -p tcp -j MARK --set-mark 1",
        "-t mangle -A POSTROUTING -j sub",
    ] {
        let argv: Vec<String> = l.split(' ').map(String::from).collect();
        assert_eq!(tclab_tc::iptables::run(&mut e, &argv).code, 0, "{l}");
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let n = 1 + next() % 12;
        let mut argv: Vec<String> = vec!["-t".into(), "mangle".into()];
        for _ in 0..n {
            argv.push(WORDS[(next() % WORDS.len() as u64) as usize].to_string());
        }
        let before = e.netfilter().mangle.clone();
        let out = tclab_tc::iptables::run(&mut e, &argv);
        if out.code == 0 {
            ok += 1;
        } else {
            refused += 1;
            assert!(
                [1, 2, 3].contains(&out.code),
                "{argv:?}: exit {} is one of iptables' statuses",
                out.code
            );
            assert!(!out.stderr.is_empty(), "{argv:?}: a refusal says why");
            assert_eq!(
                e.netfilter().mangle,
                before,
                "{argv:?} was refused ({}) but changed the table",
                out.stderr
            );
        }
    }
    assert!(
        ok > 50 && refused > 1000,
        "both outcomes exercised: {ok} ok, {refused} refused"
    );
}
