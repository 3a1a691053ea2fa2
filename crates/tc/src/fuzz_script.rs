//! The body of the `script_run` fuzz target, shared by `fuzz/fuzz_targets/script_run.rs` (libFuzzer, on
//! a nightly toolchain) and the deterministic test `tests/script_fuzz.rs` (stable, in CI): `tclab script
//! run`'s wrappers — the shell functions that answer `tc`, `ip`, `ifconfig`, `ethtool`, `sysctl`,
//! `modprobe`/`insmod`/`rmmod` and `iptables` however a script spells them ([`crate::script`]), the
//! control channel their words cross, and the store commands (`tc`, `link`, `iptables`) behind it.
//!
//! An input is a script of command lines (split at `\n`, words at single spaces, bytes that are not UTF-8
//! as U+FFFD, NULs dropped: a shell string cannot hold one). A line's command word is kept when it names
//! a wrapped command — bare (`tc`), by a path in one of the directories the prelude covers
//! (`/sbin/tc`, `/opt/sbin/ip`), through `$TC`/`${TC}` (the script sets `TC=/usr/sbin/tc` first), or after
//! `sudo` or `command` — and is otherwise taken as tc's first argument. Every other word reaches bash
//! single-quoted, so the script runs nothing but the wrapped commands: the fuzzer cannot make it run a
//! program of the machine's.
//!
//! The properties:
//!
//! - no panic in the control server, the store or the parsers behind it;
//! - the script ends on its own, and no call is lost (none finds the control channel closed or silent);
//! - a refused `link` or `iptables` call says why (tc's messages are `tc_parse`'s to check, with tc's
//!   own silent refusals);
//! - the journal the script leaves replays into a fresh engine without a record that no longer applies.

use crate::script::{run_script, DIRS, NAMES};

/// Messages the shell functions print when a call did not reach tclab's engine or got no answer.
const LOST: &[&str] = &[
    "the control channel did not answer",
    "cannot reach tclab's engine",
    "this call was not applied",
];

/// The script an input stands for (see the module's documentation).
pub fn script_of(data: &[u8]) -> String {
    let mut s = String::from("#!/bin/bash\nTC=/usr/sbin/tc\n");
    for line in data.split(|&b| b == b'\n') {
        let line: Vec<u8> = line.iter().copied().filter(|&b| b != 0).collect();
        let text = String::from_utf8_lossy(&line);
        let mut words: Vec<&str> = text.split(' ').collect();
        let mut head = Vec::new();
        if matches!(words.first(), Some(&"sudo") | Some(&"command")) {
            head.push(words.remove(0).to_string());
        }
        match words.first() {
            Some(w) if is_wrapped(w) => head.push(words.remove(0).to_string()),
            Some(&"$TC") | Some(&"${TC}") => head.push(words.remove(0).to_string()),
            _ => head.push("tc".into()),
        }
        for w in words {
            head.push(crate::script::quote(w));
        }
        s.push_str(&head.join(" "));
        s.push('\n');
    }
    s
}

/// `tc`, or `/sbin/tc` with a directory the prelude covers.
fn is_wrapped(word: &str) -> bool {
    let (dir, name) = match word.rsplit_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, word),
    };
    NAMES.contains(&name) && dir.is_none_or(|d| DIRS.contains(&d))
}

/// Run one fuzz input; panics if a property does not hold. Returns the journal the script left.
pub fn fuzz_one(data: &[u8]) -> Vec<Vec<String>> {
    let dir = crate::script::Sandbox::new().expect("a scratch directory");
    let path = dir.dir.join("fuzz.sh");
    std::fs::write(&path, script_of(data)).expect("the script written");
    let run = run_script(None, &path, &[], &[]).unwrap_or_else(|e| panic!("script run: {e}"));
    assert!(
        run.status.starts_with("exited"),
        "the script {}:\n{}",
        run.status,
        script_of(data)
    );
    for lost in LOST {
        assert!(
            !run.stderr.contains(lost),
            "a call was lost ({lost}):\n{}",
            run.stderr
        );
    }
    for r in &run.report.refused {
        if r.command.starts_with("link") || r.command.starts_with("iptables") {
            assert!(
                !r.message.trim().is_empty(),
                "{}: refused without a word",
                r.command
            );
        }
    }
    let (_, problems) = crate::store::replay(&run.journal);
    assert!(
        problems.is_empty(),
        "the script's journal does not replay: {problems:?}"
    );
    run.journal
}
