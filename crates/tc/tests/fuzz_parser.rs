//! A deterministic fuzz of the tc parser on stable Rust: 20 000 command lines assembled from tc's own
//! vocabulary, valid values, hostile values and truncations, in 20 scripts of 1 000 lines, each run against
//! one engine; then a few byte-level inputs, and every file in `fuzz/seeds/tc_parse/` (the libFuzzer target's
//! seeds, and the place for its crash reproducers). The body and its properties are `tclab_tc::fuzz::fuzz_one`,
//! the same the libFuzzer target `fuzz/fuzz_targets/tc_parse.rs` runs: no panic, every failure has a message
//! and one of tc's exit codes, and a refused command leaves `qdisc show`/`class show` as they were
//! (validate-then-apply).

use tclab_tc::fuzz::{dictionary, fuzz_one, seeds, vocabulary, xorshift};

#[test]
fn random_command_lines_never_panic_and_refusals_change_nothing() {
    let mut next = xorshift(0x7c1a_b5ee_d000_0001);
    let words = vocabulary();
    for _ in 0..20 {
        let mut script = Vec::new();
        for line in 0..1000 {
            if line > 0 {
                script.push(b'\n');
            }
            let n = 1 + (next() % 14) as usize;
            let argv: Vec<&str> = (0..n)
                .map(|_| words[(next() % words.len() as u64) as usize])
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
    for (f, bytes) in seeds("tc_parse") {
        eprintln!("{}", f.display());
        fuzz_one(&bytes);
    }
}

/// The libFuzzer dictionary is the same vocabulary: a kind added to the registry reaches both.
/// `TCLAB_UPDATE_DICT=1 cargo test -p tclab-tc --test fuzz_parser` rewrites it.
#[test]
fn the_fuzz_dictionary_is_the_registrys_vocabulary() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/tc_parse.dict");
    let want = dictionary();
    if std::env::var_os("TCLAB_UPDATE_DICT").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is not the registry's vocabulary; regenerate it with TCLAB_UPDATE_DICT=1 cargo test -p tclab-tc --test fuzz_parser",
        path.display()
    );
    for k in tclab_tc::qdisc::KINDS {
        assert!(vocabulary().contains(&k.name), "{} missing", k.name);
        assert!(
            tclab_core::qdisc::kind(k.name).is_some(),
            "{} has a language but no discipline in core",
            k.name
        );
    }
    for k in tclab_core::qdisc::KINDS {
        assert!(
            tclab_tc::qdisc::lang(k.name).is_some(),
            "{} has a discipline but no language in the tc crate",
            k.name
        );
    }
}

/// Where tc refuses without a word, tclab does too, with tc's exit status, and says where in iproute2
/// that happens (what the fuzz property accepts instead of a message). Each line's status and empty
/// stderr are those of iproute2 6.1's tc on this machine (a veth eth0 in a scratch namespace); the
/// silence comes from the source named.
#[test]
fn tc_is_silent_here_and_so_is_tclab() {
    let cases: &[(&str, i32, &str)] = &[
        // `parse_size_table` returns -1 when `check_size_table_opts` finds nothing to do (tc_stab.c).
        ("qdisc add stab c trap", 255, "tc_stab.c"),
        ("qdisc add dev eth0 stab c trap", 255, "tc_stab.c"),
        (
            "qdisc add dev eth0 root stab mtu 100 pfifo",
            255,
            "tc_stab.c",
        ),
        // `tc_action_gd` (m_action.c) returns -1 on `help`; it skips the word after get/delete unread.
        ("actions del gact help", 255, "m_action.c"),
        ("actions get action help", 255, "m_action.c"),
        ("actions delete action help", 255, "m_action.c"),
        // q_taprio.c: a flags or txtime-delay value that is not a u32 is `PREV_ARG(); return -1;`.
        ("qdisc add dev eth0 root taprio flags x", 1, "q_taprio.c"),
        (
            "qdisc add dev eth0 root taprio txtime-delay zz",
            1,
            "q_taprio.c",
        ),
        // f_flower.c's `flower_parse_gtp_opt` reads a QFI field a part without ':' lacks
        // (`strlen(NULL)`): tc dies of SIGSEGV, which the shell reports as 139, saying nothing. The
        // key is read before the mask; an empty part crashes too.
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 1",
            139,
            "f_flower.c",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 1/x",
            139,
            "f_flower.c",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 1:2/3",
            139,
            "f_flower.c",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 1:2/",
            139,
            "f_flower.c",
        ),
        // f_rsvp.c's `get_addr_and_pi` compares the word after a GPI's value (or its mask) with
        // "mask" and "at" without looking whether there is one: at the end of the line, SIGSEGV.
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1 u8 1",
            139,
            "f_rsvp.c",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1 u8 1 mask 0xff",
            139,
            "f_rsvp.c",
        ),
        (
            "filter add dev eth0 parent 1: protocol ipv6 prio 1 rsvp6 sender ::1 u32 7",
            139,
            "f_rsvp.c",
        ),
    ];
    for &(line, code, source) in cases {
        let (out, silent) = run_fresh(line);
        assert_eq!((out.code, out.stderr.as_str()), (code, ""), "{line}");
        assert!(
            silent.is_some_and(|s| s.contains(source)),
            "{line}: {silent:?}"
        );
    }
}

/// Next to those: what tc 6.1 answered on this machine to their neighbours. A refusal with something to
/// say is not silent, and `tc_action_gd`'s skipped word makes some lines succeed quietly (an empty
/// request) and others read `index` as a kind (tc's fallback to gact).
#[test]
fn the_neighbours_of_tcs_silences() {
    let cases: &[(&str, i32, &str)] = &[
        (
            "qdisc add dev eth0 root stab tsize 8 linklayer",
            255,
            "Command line is not complete",
        ),
        ("qdisc add dev eth0 root stab help", 255, "Usage: ... stab"),
        ("qdisc add dev eth0 root taprio help", 1, "CLOCKID must be"),
        ("actions del gact", 0, ""),
        ("actions delete help", 0, ""),
        (
            "actions get gact index 1",
            255,
            "Error: no index specified action: gact\n",
        ),
        (
            "actions get action gact help",
            255,
            "Error: no index specified action: gact\n",
        ),
        ("actions get action gact index x", 255, "Illegal \"index\""),
        // gtp_opts whose fields are all there, or whose PDU type is not hex, are read or refused
        // before the crash (tc 6.1 on this machine, which has no cls_flower module, said `Illegal
        // "gtp_opts"` (exit 1) or passed the request on).
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts x/1",
            1,
            "Illegal \"gtp_opts\"",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 1:2/x",
            1,
            "Illegal \"gtp_opts\"",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower gtp_opts 100:1",
            1,
            "Illegal \"gtp_opts\"",
        ),
        // rsvp: tc parses it whole, then the kernel (6.3 removed cls_rsvp, and this one has none)
        // refuses; a GPI read to its end, a port instead of one, IPv4 with a flowlabel, a bare police,
        // and `ipproto`'s reversed matches() taking any word that starts with it.
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1 u8 1 mask 0xff at 0",
            2,
            "Error: TC classifier not found.",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1/80 u8 1",
            1,
            "What is \"u8\"?\nUsage:\t... rsvp ipproto PROTOCOL",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1 flowlabel 1",
            1,
            "Illegal \"session\"",
        ),
        (
            "filter add dev eth0 parent 1: protocol ipv6 prio 1 rsvp6 session ::1 flowlabel 5",
            2,
            "Error: TC classifier not found.",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp session 10.0.0.1 police",
            255,
            "Command line is not complete",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp ipprotoxyz tcp",
            2,
            "Error: TC classifier not found.",
        ),
        (
            "filter add dev eth0 parent 1: protocol ip prio 1 rsvp ipproto 300",
            1,
            "Illegal \"ipproto\"",
        ),
        // Not silent, but a crash: erspan_opts with neither '/' nor ':' has its default mask copied
        // with a wild length, and glibc's fortified memcpy aborts tc (SIGABRT, 134).
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower erspan_opts 1",
            134,
            "*** buffer overflow detected ***: terminated\n",
        ),
        // `invarg` after a message that ends in its own newline: a blank line follows (flower's
        // ct_label, the ct action's label).
        (
            "actions add action ct commit label zz",
            255,
            "ct: labels must be a hex string\n\n",
        ),
        (
            "filter add dev eth0 ingress protocol ip prio 1 flower ct_label 11/zz",
            255,
            "labels mask must be a hex string\n\n",
        ),
    ];
    for &(line, code, says) in cases {
        let (out, silent) = run_fresh(line);
        assert_eq!(out.code, code, "{line}: {}", out.stderr);
        assert!(silent.is_none(), "{line}");
        if says.is_empty() {
            assert_eq!(out.stderr, "", "{line}");
        } else {
            assert!(out.stderr.contains(says), "{line}: {}", out.stderr);
        }
    }
    let (out, _) = run_fresh("actions get gact");
    assert_eq!((out.code, out.stdout.trim_end()), (0, "total acts 0"));
}

fn run_fresh(line: &str) -> (tclab_tc::Output, Option<&'static str>) {
    let mut engine = tclab_core::Engine::new();
    let argv: Vec<String> = line.split(' ').map(str::to_string).collect();
    tclab_tc::run_explained(&mut engine, &argv, 0)
}
