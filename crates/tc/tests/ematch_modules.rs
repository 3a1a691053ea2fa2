//! The ematch kinds tclab's kernel has no module for (`nbyte`, `ipset`, `ipt`): tc 6.1 parses them
//! first and refuses there with its own words, as iproute2 6.1's tc answered on this machine (a veth
//! eth0 with an HTB root in a scratch namespace; each ematch given as one quoted word):
//! `ipset` finds no set by any name, `nbyte_parse_eopt` checks its needle, offset and layer, and an
//! ematch after one of them is still parsed before the kernel refuses the tree.

fn run(ematch: &str) -> tclab_tc::Output {
    let mut engine = tclab_core::Engine::new();
    let mut argv: Vec<String> = "filter add dev eth0 parent 1: protocol ip prio 1 basic match"
        .split(' ')
        .map(str::to_string)
        .collect();
    argv.push(ematch.to_string());
    tclab_tc::run(&mut engine, &argv, 0)
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
fn a_well_formed_one_reaches_the_kernel_which_lacks_the_module() {
    // tc 6.1 itself answers a well-formed nbyte tree with a `What is` about its last word (its lexer
    // stops one word short there); tclab passes it on, and its kernel has no em_nbyte.
    let out = run("nbyte(ab at 0 layer 1)");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out
        .stderr
        .starts_with("RTNETLINK answers: No such file or directory"));
}
