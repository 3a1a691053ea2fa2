//! The body of the tc parser's fuzz target, shared by `fuzz/fuzz_targets/tc_parse.rs` (libFuzzer, on a
//! nightly toolchain) and the deterministic test `tests/fuzz_parser.rs` (stable, in CI), so that both check
//! the same properties on the same input format.
//!
//! An input is a script: each line (split at `\n`) is one tc command line without the leading `tc`, and
//! single spaces separate its arguments (two spaces in a row make an empty argument, which a shell can pass
//! too). Bytes that are not UTF-8 become U+FFFD. The lines run in order against one fresh engine, so a
//! script can build a tree and then attack it.
//!
//! The properties, checked after every line:
//!
//! - no panic, in the parser, the engine or the printers;
//! - the exit code is one of tc's (0, 1, 2, 255), and a failure says why on stderr, unless tc itself
//!   refuses this class of input without a word: then the failure names the place in iproute2 6.1 that
//!   does so ([`crate::Failure::silent`]), and stderr is empty as tc's is (exit 139 where tc 6.1 dies
//!   of SIGSEGV instead: flower's `gtp_opts` without a ':', rsvp's GPI at the end of the line; and
//!   134 with glibc's `*** buffer overflow detected ***` for `erspan_opts` with neither '/' nor ':').
//!   An empty message nobody declared is still a finding;
//! - a refused command leaves `qdisc show` and `class show` of the devices it could name as they were
//!   (options are validated whole before anything is applied).

use crate::{run, run_explained};
use tclab_core::Engine;

/// The devices whose classes are compared before and after a refused command. Commands naming other devices
/// are still run; a refused one must not create them, which `qdisc show` (all devices) would reveal.
const WATCHED: &[&str] = &["eth0", "eth1"];

/// Run one fuzz input; panics if a property does not hold.
pub fn fuzz_one(data: &[u8]) {
    let mut engine = Engine::new();
    for line in data.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let argv: Vec<String> = text.split(' ').map(str::to_string).collect();
        check_command(&mut engine, &argv);
    }
}

/// Run one command line against `engine` and check the properties above.
pub fn check_command(engine: &mut Engine, argv: &[String]) {
    let before = snapshot(engine);
    let (out, silent) = run_explained(engine, argv, 0);
    // 139 and 134 are tc's own crashes as a shell reports them: SIGSEGV, declared as a silence where
    // tc 6.1 has it, and SIGABRT from glibc's buffer overflow check, which says so.
    let crashed = (out.code == 139 && silent.is_some())
        || (out.code == 134 && out.stderr.starts_with("*** buffer overflow detected ***"));
    assert!(
        [0, 1, 2, 255].contains(&out.code) || crashed,
        "{argv:?}: exit {}",
        out.code
    );
    if out.code != 0 {
        // tc's silent refusals are declared where tclab makes them; any other empty message is a bug.
        assert!(
            silent.is_some() || !out.stderr.trim().is_empty(),
            "{argv:?} failed silently, and tc is not silent there"
        );
        assert_eq!(
            snapshot(engine),
            before,
            "{argv:?} was refused but changed the policy"
        );
    }
}

fn snapshot(engine: &mut Engine) -> Vec<String> {
    let mut shown = vec![run(engine, &["qdisc".into(), "show".into()], 0).stdout];
    for dev in WATCHED {
        let argv = ["class".into(), "show".into(), "dev".into(), dev.to_string()];
        shown.push(run(engine, &argv, 0).stdout);
    }
    shown
}

/// The files in `fuzz/seeds/TARGET/`, sorted by name, with their bytes: a target's seeds and its crash
/// reproducers, which each stable twin runs. Panics if there are none.
pub fn seeds(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f, bytes)
        })
        .collect()
}

/// The stable twins' generator: xorshift64 from `seed` (not 0), the same numbers on every machine.
pub fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Words of the command itself and values, valid and hostile; the kinds and their options come from the
/// registry ([`crate::qdisc::KINDS`]).
const GENERIC: &[&str] = &[
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
    // Filters, actions and mirred.
    "filter",
    "actions",
    "action",
    "protocol",
    "ip",
    "ip6",
    "src",
    "dst",
    "2001:db8::/32",
    "flowlabel",
    "u32",
    "match",
    "matchall",
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
    // flower, the packet editors, chains (issue 24).
    "flower",
    "ip_proto",
    "tcp",
    "udp",
    "dst_ip",
    "dst_port",
    "1000-2000",
    "addr",
    "port",
    "mark",
    "tcp_flags",
    "0x12/0x17",
    "dst_mac",
    "02:00:00:00:00:01/24",
    "skip_sw",
    "-br",
    "nat",
    "ingress",
    "10.0.0.0/8",
    "csum",
    "iph",
    "pedit",
    "ex",
    "munge",
    "offset",
    "u8",
    "set",
    "retain",
    "simple",
    "sdata",
    "skbmod",
    "ecn",
    "route",
    "to",
    "from",
    "fromif",
    "vlan",
    "push",
    "pop",
    "modify",
    "802.1ad",
    "cgroup",
    "bpf",
    "bytecode",
    "4,40 0 0 12,21 0 1 2048,6 0 0 65539,6 0 0 0",
    "mpls",
    "label",
    "dec_ttl",
    "bos",
    "mpls_uc",
    "tunnel_key",
    "src_ip",
    "dst_ip",
    "geneve_opts",
    "0102:80:00880022",
    "nocsum",
    "sample",
    "group",
    "trunc",
    "gate",
    "sched-entry",
    "open",
    "close",
    "base-time",
    "cycle-time",
    "300us",
    "ctinfo",
    "dscp",
    "0xfc000000",
    "cpmark",
    "zone",
    "ct",
    "commit",
    "force",
    "clear",
    "label",
    "5.5.5.7-5.5.6.0",
    "1000-2000",
    "addr",
    "port",
    "mark",
    "ife",
    "encode",
    "decode",
    "allow",
    "use",
    "tcindex",
    // flower's conntrack, tunnel, MPLS and ARP keys.
    "ct_state",
    "+trk+est-rpl",
    "ct_zone",
    "ct_mark",
    "ct_label",
    "0102/ff00",
    "enc_key_id",
    "enc_dst_ip",
    "enc_dst_port",
    "lse",
    "depth",
    "mpls_label",
    "arp",
    "arp_op",
    "request",
    "arp_tip",
    "ppp_ses",
    "pppoe_sid",
    "ppp_proto",
    "lcp",
];

/// The fuzz vocabulary: the generic words, then every kind of the registry and its option keywords.
pub fn vocabulary() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = GENERIC.to_vec();
    for k in crate::qdisc::KINDS {
        for w in std::iter::once(&k.name).chain(k.words) {
            if !v.contains(w) {
                v.push(w);
            }
        }
    }
    v
}

/// `fuzz/tc_parse.dict`: the vocabulary as libFuzzer dictionary entries, and the separators.
pub fn dictionary() -> String {
    let mut d = String::from(
        "# libFuzzer dictionary for tc_parse, generated from the registry by\n\
         # TCLAB_UPDATE_DICT=1 cargo test -p tclab-tc --test fuzz_parser (do not edit).\n",
    );
    for w in vocabulary().into_iter().filter(|w| !w.is_empty()) {
        d.push_str(&format!("\"{}\"\n", w.escape_default()));
    }
    d.push_str("\" \"\n\"\\x0a\"\n");
    d
}
