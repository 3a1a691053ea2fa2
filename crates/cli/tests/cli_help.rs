//! tclab's own command line (crates/cli/src/args.rs): every subcommand listed by `tclab --help` has a
//! `--help` that exits 0 and says how to use it; an unknown option, a missing argument or a file that
//! cannot be used exits 64 (EX_USAGE) with a message naming what is wrong, for every command; the shell
//! completions name every subcommand. `tclab tc`, `link` and `iptables` keep their tools' own grammar
//! (tc's exit 255 for an unknown object, iptables' 2 for a bad option).

mod common;
use common::TempDir;
use std::process::{Command, Output};

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn tclab(dir: &TempDir, args: &[&str]) -> Output {
    Command::new(TCLAB)
        .args(args)
        .current_dir(&dir.path)
        .env("TCLAB_STATE", dir.path.join("policy.json"))
        .env("TCLAB_SERVE", "off")
        .env_remove("TCLAB_CONTROL")
        .output()
        .expect("running tclab")
}

fn text(o: &Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The subcommands `tclab --help` lists, from its "Commands:" section.
fn listed_subcommands(dir: &TempDir) -> Vec<String> {
    let (code, out, err) = text(&tclab(dir, &["--help"]));
    assert_eq!(code, 0, "{err}");
    let mut names = Vec::new();
    let mut inside = false;
    for line in out.lines() {
        if line.starts_with("Commands:") {
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with("  ") {
                break;
            }
            names.push(line.split_whitespace().next().unwrap().to_string());
        }
    }
    names
}

#[test]
fn every_subcommand_has_a_help_that_exits_0() {
    let dir = TempDir::new("help");
    let names = listed_subcommands(&dir);
    for want in [
        "tc",
        "link",
        "iptables",
        "route",
        "script",
        "check",
        "explain",
        "sim",
        "trace",
        "demo",
        "serve",
        "completions",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "tclab --help lists {want}: {names:?}"
        );
    }
    for name in names
        .iter()
        .filter(|n| !matches!(n.as_str(), "tc" | "link" | "iptables" | "help"))
    {
        let (code, out, err) = text(&tclab(&dir, &[name, "--help"]));
        assert_eq!(code, 0, "tclab {name} --help: {err}");
        assert!(
            out.contains("Usage: tclab ") && out.contains(name.as_str()),
            "tclab {name} --help says how to use it:\n{out}"
        );
    }
    // Nested commands too.
    for args in [
        &["script", "run", "--help"][..],
        &["trace", "stats", "--help"],
        &["trace", "show", "--help"],
        &["trace", "export", "--help"],
        &["trace", "plot", "--help"],
        &["help", "sim"],
    ] {
        let (code, out, err) = text(&tclab(&dir, args));
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("Usage: tclab "), "{args:?}: {out}");
    }
    // The long explanations survive the move to clap.
    let (_, sim, _) = text(&tclab(&dir, &["sim", "--help"]));
    assert!(
        sim.contains("summary.json") && sim.contains("--trace"),
        "{sim}"
    );
    let (_, check, _) = text(&tclab(&dir, &["check", "--help"]));
    assert!(check.contains("docs/checks/"), "{check}");
    let (_, script, _) = text(&tclab(&dir, &["script", "run", "--help"]));
    assert!(script.contains("/sbin/tc"), "{script}");
    let (code, out, _) = text(&tclab(&dir, &["--version"]));
    assert_eq!(
        (code, out.trim()),
        (0, concat!("tclab ", env!("CARGO_PKG_VERSION")))
    );
}

#[test]
fn usage_errors_exit_64_everywhere_and_name_the_problem() {
    let dir = TempDir::new("usage");
    std::fs::write(dir.path.join("empty.trace"), "hello\n").unwrap();
    for (args, says) in [
        (&["--frobnicate"][..], "--frobnicate"),
        (&["frobnicate"], "frobnicate"),
        (&["sim", "--frobnicate"], "--frobnicate"),
        (&["sim"], "SCENARIO"),
        (&["sim", "no-such-scenario"], "no-such-scenario"),
        (&["sim", "seed004-idle", "--seed", "minus-one"], "minus-one"),
        (&["sim", "--show", "nope"], "no built-in scenario \"nope\""),
        (&["check", "--frobnicate"], "--frobnicate"),
        (
            &["check", "/nonexistent/policy.sh"],
            "/nonexistent/policy.sh",
        ),
        (&["explain", "--frobnicate"], "--frobnicate"),
        (
            &["explain", "/nonexistent/policy.sh"],
            "/nonexistent/policy.sh",
        ),
        (&["explain", "--link", "fast"], "\"fast\" is not a rate"),
        (&["trace"], "Usage"),
        (&["trace", "frob"], "frob"),
        (
            &["trace", "stats", "/nonexistent.trace"],
            "/nonexistent.trace",
        ),
        (&["trace", "stats", "empty.trace"], "not a tclab trace"),
        (&["trace", "show", "x", "--event", "boom"], "boom"),
        (&["trace", "plot", "x"], "--class"),
        (&["script", "run"], "FILE"),
        (
            &["script", "run", "/nonexistent.sh"],
            "/nonexistent.sh: no such script",
        ),
        (&["script", "walk"], "walk"),
        (&["demo", "--frobnicate"], "--frobnicate"),
        (&["serve", "--idle", "0"], "0"),
        (&["completions", "tcsh"], "tcsh"),
        // The names add their own dash: `x-` would make `x--node-1`.
        (
            &["lab", "--prefix", "x-", "status"],
            "\"x-\": begins or ends with a dash",
        ),
        // A value given after a space is the prefix too, not an unknown option.
        (
            &["lab", "--prefix", "-x", "status"],
            "\"-x\": begins or ends with a dash",
        ),
    ] {
        let (code, _, err) = text(&tclab(&dir, args));
        assert_eq!(code, 64, "tclab {args:?} exits 64 (EX_USAGE): {err}");
        assert!(err.contains(says), "tclab {args:?} names {says:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn tc_link_and_iptables_keep_their_own_grammar() {
    let dir = TempDir::new("grammar");
    // tc: an unknown object is tc's own message and exit 255, not clap's.
    let (code, _, err) = text(&tclab(&dir, &["tc", "frobnicate"]));
    assert_eq!(code, 255, "{err}");
    assert!(err.contains("Object \"frobnicate\" is unknown"), "{err}");
    // link: ip's grammar, its own help, and an unknown verb named as ip names it.
    let (code, out, _) = text(&tclab(&dir, &["link", "help"]));
    assert_eq!(code, 0);
    assert!(
        out.contains("Usage: tclab link { add | set | del }"),
        "{out}"
    );
    let (code, out, _) = text(&tclab(&dir, &["link", "--help"]));
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = text(&tclab(&dir, &["link", "frob", "dev", "eth0"]));
    assert_eq!(code, 1);
    assert!(
        err.contains("Command \"frob\" is unknown, try \"tclab link help\""),
        "{err}"
    );
    // route: ip route's grammar, its own help (a script's `ip route help` is ip's, exit 255).
    let (code, out, _) = text(&tclab(&dir, &["route", "--help"]));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Usage: tclab route {"), "{out}");
    let (code, _, err) = text(&tclab(&dir, &["route", "frob"]));
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains("Command \"frob\" is unknown, try \"ip route help\""),
        "{err}"
    );
    // Options that look like tclab's pass through untouched.
    let (code, _, err) = text(&tclab(&dir, &["tc", "-s", "qdisc", "show"]));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn completions_name_every_subcommand() {
    let dir = TempDir::new("completions");
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = text(&tclab(&dir, &["completions", shell]));
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in [
            "sim", "check", "explain", "trace", "script", "serve", "demo", "tc",
        ] {
            assert!(out.contains(sub), "{shell} completions name {sub}");
        }
        assert!(
            out.contains("no-plots"),
            "{shell} completions carry options"
        );
    }
    // The bash script is valid bash.
    let (_, script, _) = text(&tclab(&dir, &["completions", "bash"]));
    std::fs::write(dir.path.join("c.bash"), &script).unwrap();
    let st = Command::new("bash")
        .args(["-n", "c.bash"])
        .current_dir(&dir.path)
        .status()
        .unwrap();
    assert!(st.success());
}
