//! fq's quantum through tc lines, as `fq_change` (Linux 6.12 sch_fq.c) takes it: any value from 1 to
//! 1 << 20 bytes as given, 0 or more refused with the module's message (tc 6.1 sends what it read).

use tclab_core::Engine;

fn run(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

#[test]
fn a_quantum_outside_1_to_1_mib_is_refused_and_one_inside_kept_as_given() {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 1000);
    // tclab clamped to 256..=1 MiB as fq_codel does: 0 became 256, 1 MiB + 1 became 1 MiB, both exit 0.
    for q in ["0", "1048577"] {
        let o = run(&mut e, &format!("qdisc add dev eth0 root fq quantum {q}"));
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (2, "Error: sch_fq: invalid quantum.\n"),
            "quantum {q}"
        );
    }
    assert!(!run(&mut e, "qdisc show dev eth0").stdout.contains("fq"));
    for (q, shown) in [("100", "quantum 100b "), ("1048576", "quantum 1Mb ")] {
        let o = run(
            &mut e,
            &format!("qdisc replace dev eth0 root fq quantum {q}"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let s = run(&mut e, "qdisc show dev eth0").stdout;
        assert!(s.contains(shown), "quantum {q}: {s}");
    }
    // A change to a bad quantum is refused and leaves the one before.
    let o = run(&mut e, "qdisc change dev eth0 root fq quantum 0");
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(run(&mut e, "qdisc show dev eth0")
        .stdout
        .contains("quantum 1Mb "));
}
