//! `tclab iptables` against a real iptables: the fixtures are command scripts and the transcript iptables
//! v1.8.9 (legacy) printed for them in a network namespace (see the first lines of each script). Every
//! command is replayed through `tclab_tc::iptables::run` on one engine, and its output and exit status must
//! be the transcript's, byte for byte — `-S` listings, `-L -n -v` tables, error wording and exit codes.
//! The only expected difference: tables other than mangle, which tclab refuses with exit status 3.

use tclab_core::Engine;

/// Split a line into words, honouring double quotes (enough for the probe scripts).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Replay a probe script; return the transcript tclab produces, block by block (command, output).
fn replay(script: &str) -> Vec<(String, String)> {
    let mut e = Engine::new();
    let mut blocks = Vec::new();
    for line in script.lines() {
        for cmd in line.split("; ") {
            let cmd = cmd.trim();
            let (show, rest) = if let Some(r) = cmd.strip_prefix("run ") {
                (true, r)
            } else if let Some(r) = cmd.strip_prefix("$I ") {
                (false, r)
            } else {
                continue;
            };
            let argv = words(rest);
            let out = tclab_tc::iptables::run(&mut e, &argv);
            if show {
                let text = format!("{}{}rc={}\n", out.stdout, out.stderr, out.code);
                blocks.push((format!("### iptables {}", argv.join(" ")), text));
            }
        }
    }
    blocks
}

fn reference(text: &str) -> Vec<(String, String)> {
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("### iptables") {
            blocks.push((line.to_string(), String::new()));
        } else if let Some(b) = blocks.last_mut() {
            b.1.push_str(line);
            b.1.push('\n');
        }
    }
    blocks
}

fn compare(script: &str, legacy: &str) {
    let ours = replay(script);
    let theirs = reference(legacy);
    assert_eq!(ours.len(), theirs.len(), "one block per command");
    let mut checked = 0;
    for ((cmd, out), (rcmd, rout)) in ours.iter().zip(&theirs) {
        assert_eq!(cmd, rcmd);
        let other_table = ["-t filter", "-t nat", "-t raw"]
            .iter()
            .any(|t| cmd.contains(t));
        if other_table {
            assert!(
                out.ends_with("rc=3\n") && out.contains("mangle table only"),
                "{cmd}: tclab refuses tables other than mangle with exit 3, got {out}"
            );
            continue;
        }
        assert_eq!(
            out, rout,
            "{cmd}: tclab's output differs from iptables-legacy's"
        );
        checked += 1;
    }
    assert!(checked > 50, "most commands are compared ({checked})");
}

#[test]
fn probe1_matches_iptables_legacy() {
    compare(
        include_str!("fixtures/iptables_probe1.sh"),
        include_str!("fixtures/iptables_probe1.legacy.txt"),
    );
}

#[test]
fn probe2_matches_iptables_legacy() {
    compare(
        include_str!("fixtures/iptables_probe2.sh"),
        include_str!("fixtures/iptables_probe2.legacy.txt"),
    );
}
