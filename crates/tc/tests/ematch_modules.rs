//! The ematch kinds tclab's kernel has no module for (`nbyte`, `ipset`, `ipt`): tc 6.1 parses them
//! first and refuses there with its own words, as iproute2 6.1's tc answered on this machine (a veth
//! eth0 with an HTB root in a scratch namespace; each ematch given as one quoted word):
//! `ipset` finds no set by any name, `ipt` no xtables match by any name, `nbyte_parse_eopt` checks
//! its needle, offset and layer, and an ematch after one of them, and the classifier's words after
//! the tree, are still parsed before the kernel refuses the tree.

/// `tc filter add … basic match EMATCH AFTER…` on eth0 under an HTB root, as on the machine.
fn run_with(ematch: &str, after: &[&str]) -> tclab_tc::Output {
    let mut engine = tclab_core::Engine::new();
    let htb: Vec<String> = "qdisc add dev eth0 root handle 1: htb"
        .split(' ')
        .map(str::to_string)
        .collect();
    assert_eq!(tclab_tc::run(&mut engine, &htb, 0).code, 0);
    let mut argv: Vec<String> = "filter add dev eth0 parent 1: protocol ip prio 1 basic match"
        .split(' ')
        .map(str::to_string)
        .collect();
    argv.push(ematch.to_string());
    argv.extend(after.iter().map(|w| w.to_string()));
    tclab_tc::run(&mut engine, &argv, 0)
}

fn run(ematch: &str) -> tclab_tc::Output {
    run_with(ematch, &[])
}

const NBYTE_USAGE: &str = "Usage: nbyte(NEEDLE at OFFSET [layer LAYER])\nwhere: NEEDLE := { string | \"c-escape-sequence\" }\n       OFFSET := int\n       LAYER  := { link | network | transport | 0..2 }\n\nExample: nbyte(\"ababa\" at 12 layer 1)\nIllegal \"ematch\"\n";

#[test]
fn tc_refuses_these_before_the_kernel() {
    let cases: &[(&str, String)] = &[
        (
            "ipset(x src)",
            "ipset: unknown set name 'x'\n... ...\n... ipset(>>x<< src)...\nUsage: ipset(SETNAME FLAGS)\n\
             where: SETNAME:= string\n       FLAGS  := { FLAG[,FLAGS] }\n       FLAG   := { src | dst }\n\n\
             Example: 'ipset(bulk src,dst)'\nIllegal \"ematch\"\n"
                .to_string(),
        ),
        (
            "nbyte(ab)",
            format!("nbyte: offset required\n... ...\n... nbyte(ab)...\n{NBYTE_USAGE}"),
        ),
        (
            "nbyte(ab layer 3 at 0)",
            format!(
                "nbyte: illegal layer, must be in 0..2\n... ...\n... nbyte(ab layer >>3<< at 0)...\n{NBYTE_USAGE}"
            ),
        ),
        (
            "nbyte(ab at 0) and cmp(u8 at x eq 1)",
            "cmp: invalid offset, must be numeric\n... ...\n... cmp(u8 at >>x<< eq 1)...\n\
             Usage: cmp(ALIGN at OFFSET [ ATTRS ] { eq | lt | gt } VALUE)\nwhere: ALIGN  := { u8 | u16 | u32 }\n       \
             ATTRS  := [ layer LAYER ] [ mask MASK ] [ trans ]\n       LAYER  := { link | network | transport | 0..2 }\n\n\
             Example: cmp(u16 at 3 layer 2 mask 0xff00 gt 20)\nIllegal \"ematch\"\n"
                .to_string(),
        ),
    ];
    for (ematch, stderr) in cases {
        let out = run(ematch);
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (1, stderr.as_str()),
            "{ematch}"
        );
    }
}

#[test]
fn a_well_formed_nbyte_reaches_the_kernel_which_lacks_the_module() {
    // tc 6.1 parses the classifier's words after the tree first: with nothing after it, its lexer's
    // look-ahead undone leaves the tree's last word, which basic does not know (`What is`, exit 1);
    // with `classid` after it the tree reaches the kernel, which has no em_nbyte: tcf_em_validate's
    // ENOENT (this machine's tc, byte for byte, where its kernel has cls_basic).
    let out = run("nbyte(ab at 0 layer 1)");
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "What is \"nbyte(ab at 0 layer 1)\"?\nUsage: ... basic [ match EMATCH_TREE ]\n"
        ),
        "{}",
        out.stderr
    );
    let out = run_with("nbyte(ab at 0) and cmp(u8 at 0 eq 1)", &["classid", "1:1"]);
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            2,
            "RTNETLINK answers: No such file or directory\nWe have an error talking to the kernel\n"
        )
    );
}

#[test]
fn ipt_is_refused_by_tc_after_getopt_as_this_machines_tc_refuses_it() {
    // em_ipt_parse_eopt_argv: glibc's getopt_long(argc, argv, "6m:", {match, ipv6}) over `ipt ARGS`,
    // then xtables_find_match, which finds no match by any name on this machine. Each expectation
    // is this machine's tc 6.1 (stderr, exit 1), in a namespace with an HTB root.
    let cases: &[(&str, &str)] = &[
        (
            "ipt(-m policy --dir in)",
            " failed to find match policy\n\n",
        ),
        ("ipt(--ma foo)", " failed to find match foo\n\n"),
        ("ipt(--match=foo)", " failed to find match foo\n\n"),
        ("ipt(-mfoo)", " failed to find match foo\n\n"),
        ("ipt(foo -m bar)", " failed to find match bar\n\n"),
        ("ipt(-6 -6)", " failed to parse parameters (ipt)\n"),
        ("ipt(-)", " failed to parse parameters (ipt)\n"),
        (
            "ipt(-m)",
            "ipt: option requires an argument -- 'm'\nfailed to find match (null)\n\n",
        ),
        (
            "ipt(-6x)",
            "ipt: invalid option -- 'x'\nfailed to find match (null)\n\n",
        ),
        (
            "ipt(--dir in -m foo)",
            "ipt: unrecognized option '--dir'\nfailed to find match (null)\n\n",
        ),
        (
            "ipt(--ipv6=1)",
            "ipt: option '--ipv6' doesn't allow an argument\nfailed to find match (null)\n\n",
        ),
        (
            "ipt(--match)",
            "ipt: option '--match' requires an argument\nfailed to find match (null)\n\n",
        ),
        (
            "nbyte(ab at 0) and ipt(-m x)",
            " failed to find match x\n\n",
        ),
    ];
    for (ematch, stderr) in cases {
        let out = run(ematch);
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (1, "", format!("{stderr}Illegal \"ematch\"\n").as_str()),
            "{ematch}"
        );
    }
}
