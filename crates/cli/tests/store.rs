//! The policy store under concurrent callers, crashes, old formats, foreign files and long histories
//! (issue 9). Expectations are the kernel's: every change acknowledged with exit 0 is in the policy
//! afterwards (rtnl serialises them), and a change is applied whole or not at all.

mod common;
use common::{cmd, run_with_timeout, RunResult, TempDir};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn tclab(state: &Path, args: &[&str]) -> RunResult {
    let mut c = cmd(Path::new(TCLAB), args);
    c.env("TCLAB_STATE", state).env_remove("TCLAB_CONTROL");
    run_with_timeout(c, Duration::from_secs(60), -1)
}

fn ok(state: &Path, args: &[&str]) -> String {
    let r = tclab(state, args);
    assert_eq!(r.code, 0, "tclab {args:?}: {}", r.stderr);
    assert!(
        !r.stderr.contains("warning"),
        "tclab {args:?} warned: {}",
        r.stderr
    );
    r.stdout
}

fn classids(state: &Path) -> Vec<String> {
    let mut v: Vec<String> = ok(state, &["tc", "class", "show", "dev", "eth0"])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect();
    v.sort();
    v
}

fn records(state: &Path) -> usize {
    std::fs::read_to_string(state).unwrap().lines().count() - 1
}

/// A `tc -batch` of an HTB root on eth0, then `extra` lines, then `classes` classes 1:10, 1:11, …
fn htb_batch(extra: &str, classes: u32) -> String {
    let mut batch = format!("qdisc add dev eth0 root handle 1: htb\n{extra}");
    for i in 0..classes {
        batch.push_str(&format!(
            "class add dev eth0 parent 1: classid 1:{:x} htb rate 1mbit\n",
            i + 16
        ));
    }
    batch
}

#[test]
fn sixty_concurrent_writers_lose_nothing() {
    let dir = TempDir::new("store-concurrent");
    let state = dir.path.join("policy.json");
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    // 60 writers and 20 readers at once, as a provisioning system might run them.
    let mut children = Vec::new();
    for i in 0..80u32 {
        let classid = format!("1:{:x}", i + 16);
        let mut c = std::process::Command::new(TCLAB);
        if i % 4 == 3 {
            c.args(["tc", "-s", "class", "show", "dev", "eth0"]);
        } else {
            c.args([
                "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", &classid, "htb",
                "rate", "1mbit",
            ]);
        }
        c.env("TCLAB_STATE", &state)
            .env_remove("TCLAB_CONTROL")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        children.push((i, classid, c.spawn().expect("spawn tclab")));
    }
    let mut acknowledged = Vec::new();
    for (i, classid, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "caller {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if i % 4 != 3 {
            acknowledged.push(classid);
        }
    }
    acknowledged.sort();
    assert_eq!(acknowledged.len(), 60);
    assert_eq!(classids(&state), acknowledged);
    // One record per accepted command: the qdisc and the 60 classes, in some order rtnl could have taken.
    assert_eq!(records(&state), 61);
}

/// A writer killed with SIGKILL at any point leaves the store readable and equal to the policy before
/// or after its command; the next writer goes on from there.
#[test]
fn writers_killed_mid_command_leave_old_or_new_policy() {
    let dir = TempDir::new("store-kill");
    let state = dir.path.join("policy.json");
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    let mut expected: Vec<String> = Vec::new();
    // A deterministic spread of kill delays from 0 to ~4 ms, around the time a call takes.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..200u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let classid = format!("1:{:x}", i + 16);
        let mut child = std::process::Command::new(TCLAB)
            .args([
                "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", &classid, "htb",
                "rate", "1mbit",
            ])
            .env("TCLAB_STATE", &state)
            .env_remove("TCLAB_CONTROL")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(x % 4000));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let now = classids(&state);
        let mut after = expected.clone();
        after.push(classid.clone());
        after.sort();
        if status.success() {
            assert_eq!(
                now, after,
                "iteration {i}: an acknowledged class is missing"
            );
        } else {
            assert!(
                now == expected || now == after,
                "iteration {i}: the store is neither the old nor the new policy: {now:?}"
            );
        }
        expected = now;
    }
}

/// A record cut short (a writer killed inside `write`) is not part of the policy, and the next writer
/// cuts it off before appending.
#[test]
fn a_torn_last_record_is_ignored_then_cut_off() {
    let dir = TempDir::new("store-torn");
    let state = dir.path.join("policy.json");
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&state)
        .unwrap();
    std::io::Write::write_all(&mut f, b"[\"tc\",\"class\",\"add\",\"dev\",\"eth0\",\"par").unwrap();
    drop(f);
    assert_eq!(classids(&state), Vec::<String>::new());
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "1mbit",
        ],
    );
    assert_eq!(classids(&state), vec!["1:10"]);
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(
        !text.contains("\"par\n") && !text.contains("\"par["),
        "{text}"
    );
    assert_eq!(records(&state), 2);
}

/// A store written by an older tclab (format 1: one JSON document) is read, and migrated by the next write.
#[test]
fn version_one_store_is_read_and_migrated() {
    let dir = TempDir::new("store-v1");
    let state = dir.path.join("policy.json");
    std::fs::write(
        &state,
        r#"{
  "tclab_store": 1,
  "journal": [
    ["link", "set", "dev", "eth0", "mtu", "9000"],
    ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20"],
    ["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", "180kbit"]
  ]
}
"#,
    )
    .unwrap();
    assert_eq!(classids(&state), vec!["1:20"]);
    assert!(ok(&state, &["link", "show"]).contains("mtu 9000"));
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:30", "htb", "rate",
            "1mbit",
        ],
    );
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(text.starts_with("{\"tclab_store\":2}\n"), "{text}");
    assert_eq!(records(&state), 4);
    assert_eq!(classids(&state), vec!["1:20", "1:30"]);
}

/// A file that is not a tclab store is named in the error and left exactly as it was.
#[test]
fn a_foreign_file_is_refused_and_untouched() {
    let dir = TempDir::new("store-foreign");
    for (name, content) in [
        ("notes.txt", "remember to shape the uplink\n".as_bytes()),
        ("blank.json", b"\n\n".as_slice()),
        ("later.json", b"{\"tclab_store\":9}\n[\"tc\"]\n".as_slice()),
        ("other.json", b"{\"version\": 3}\n".as_slice()),
        ("binary", &[0xff, 0xfe, 0x00, 0x01][..]),
    ] {
        let state = dir.path.join(name);
        std::fs::write(&state, content).unwrap();
        let r = tclab(
            &state,
            &[
                "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
            ],
        );
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert!(
            r.stderr.contains(&state.display().to_string())
                && r.stderr.contains("not a tclab store"),
            "{name}: {}",
            r.stderr
        );
        assert_eq!(
            std::fs::read(&state).unwrap(),
            content,
            "{name} was changed"
        );
    }
}

/// A zero-length file (`TCLAB_STATE=$(mktemp)`) is an empty store: nothing in it to lose.
#[test]
fn an_empty_file_is_an_empty_store() {
    let dir = TempDir::new("store-empty");
    let state = dir.path.join("empty.json");
    std::fs::write(&state, b"").unwrap();
    assert_eq!(ok(&state, &["tc", "qdisc", "show"]), "");
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    assert_eq!(records(&state), 1);
    // A read of a store that does not exist answers nothing and creates nothing (no lock, no directory).
    let nowhere = dir.path.join("not-yet/policy.json");
    assert_eq!(ok(&nowhere, &["tc", "qdisc", "show"]), "");
    assert!(!dir.path.join("not-yet").exists());
    let later = dir.path.join("later.json");
    std::fs::write(&later, b"{\"tclab_store\":9}\n").unwrap();
    let r = tclab(&later, &["tc", "qdisc", "show"]);
    assert!(
        r.stderr
            .contains("store version 9, written by a newer tclab"),
        "{}",
        r.stderr
    );
}

/// With TCLAB_STATE unset the store is $HOME/.local/state/tclab/policy.json; where there is none, a
/// read makes none, and neither does a batch of shows (the reviewer's case: it created the directory
/// and policy.json.lock), while a batch that changes something writes the store.
#[test]
fn reads_of_the_default_store_create_nothing() {
    let home = TempDir::new("store-default-home");
    let run = |args: &[&str], batch: Option<&str>| {
        let mut c = cmd(Path::new(TCLAB), args);
        c.env_remove("TCLAB_STATE")
            .env_remove("XDG_STATE_HOME")
            .env_remove("TCLAB_CONTROL")
            .env("HOME", &home.path)
            .current_dir(&home.path);
        if let Some(text) = batch {
            std::fs::write(home.path.join("b"), text).unwrap();
        }
        run_with_timeout(c, Duration::from_secs(60), -1)
    };
    let state = home.path.join(".local");
    for args in [
        &["tc", "qdisc", "show"][..],
        &["tc", "-s", "class", "show", "dev", "eth0"],
    ] {
        run(args, None);
        assert!(
            !state.exists(),
            "tclab {args:?} created {}",
            state.display()
        );
    }
    let r = run(
        &["tc", "-batch", "b"],
        Some("qdisc show\nfilter show dev eth0 # none\n"),
    );
    assert_eq!(
        r.stderr,
        "Cannot find device \"eth0\"\nCommand failed b:2\n"
    );
    assert!(
        !state.exists(),
        "a batch of shows created {}",
        state.display()
    );
    let r = run(
        &["tc", "-batch", "b"],
        Some("qdisc show\nqdisc add dev eth0 root pfifo\n"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(state.join("state/tclab/policy.json").exists());
}

/// A policy re-applied every boot (delete the root, add it again) does not grow the journal, and what
/// only history determines survives the compaction: the next automatic handle continues the count.
#[test]
fn reapplied_policy_keeps_the_journal_short() {
    let dir = TempDir::new("store-compact");
    let state = dir.path.join("policy.json");
    ok(&state, &["link", "set", "dev", "eth0", "mtu", "9000"]);
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth1", "root", "handle", "1:", "htb",
        ],
    );
    let apply = |boot: u32| {
        let _ = tclab(&state, &["tc", "qdisc", "del", "dev", "eth0", "root"]);
        ok(
            &state,
            &[
                "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20",
            ],
        );
        for c in ["1:10", "1:20", "1:30"] {
            ok(
                &state,
                &[
                    "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", c, "htb",
                    "rate", "1mbit",
                ],
            );
        }
        // An automatically numbered qdisc (qdisc_alloc_handle: 8001:, 8002:, … one per creation).
        let out = ok(
            &state,
            &[
                "tc", "qdisc", "add", "dev", "eth0", "parent", "1:30", "pfifo",
            ],
        );
        assert!(out.is_empty());
        let shown = ok(&state, &["tc", "qdisc", "show", "dev", "eth0"]);
        let expected = format!("qdisc pfifo {:x}: parent 1:30", 0x8000 + boot);
        assert!(shown.contains(&expected), "boot {boot}: {shown}");
    };
    for boot in 1..=20 {
        apply(boot);
    }
    // link + eth1's qdisc + the counter + eth0's device line + qdisc + 3 classes + pfifo, never 20 boots' worth.
    assert!(
        records(&state) <= 9,
        "{}",
        std::fs::read_to_string(&state).unwrap()
    );
    assert!(ok(&state, &["link", "show"]).contains("eth0: mtu 9000"));
    assert!(ok(&state, &["tc", "qdisc", "show", "dev", "eth1"]).contains("qdisc htb 1: root"));
}

/// `tclab script run` serves the script's tc calls from one engine: all of them land in the store, in
/// order, and the store is usable alone afterwards.
#[test]
fn script_calls_reach_the_resident_engine() {
    let dir = TempDir::new("store-script");
    let state = dir.path.join("policy.json");
    let script = dir.path.join("shape.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\n\
         tc qdisc add dev eth0 root handle 1: htb default 1ff\n\
         for i in $(seq 16 215); do\n\
           tc class add dev eth0 parent 1: classid 1:$(printf %x $i) htb rate 1mbit\n\
         done\n\
         printf 'class add dev eth0 parent 1: classid 1:1ff htb rate 2mbit\\n' > batch.txt\n\
         tc -batch batch.txt\n\
         tc class add dev eth0 parent 1: classid 1:1ff htb rate 2mbit 2>/dev/null && exit 3\n\
         tc class show dev eth0 | wc -l\n",
    )
    .unwrap();
    let mut c = cmd(
        Path::new(TCLAB),
        &["script", "run", script.to_str().unwrap()],
    );
    c.env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .current_dir(&dir.path);
    let r = run_with_timeout(c, Duration::from_secs(120), -1);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "201");
    assert_eq!(classids(&state).len(), 201);
    assert_eq!(records(&state), 202);
}

/// `tclab serve` keeps the store in one resident engine: calls go through it (and still write the store),
/// a second server for the same store is refused, and after it stops calls open the store themselves.
#[test]
fn a_resident_server_answers_and_writes_through() {
    let dir = TempDir::new("store-serve");
    let state = dir.path.join("policy.json");
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    let mut server = std::process::Command::new(TCLAB)
        .args(["serve", "--idle", "3"])
        .env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.path.join("policy.json.serve/control.sock");
    let t0 = std::time::Instant::now();
    while !socket.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists(), "the server made its socket");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path.join("policy.json.serve"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "only the owner may reach the socket");
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "1mbit",
        ],
    );
    assert_eq!(classids(&state), vec!["1:10"]);
    assert_eq!(records(&state), 2, "the change is in the store file");
    let again = tclab(&state, &["serve"]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already running"), "{}", again.stderr);
    // Idle for 3 s, it stops; calls then work on the store directly.
    let status = server.wait().unwrap();
    assert!(status.success());
    assert!(!socket.exists());
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate",
            "1mbit",
        ],
    );
    assert_eq!(classids(&state), vec!["1:10", "1:20"]);
}

/// sqm-scripts delete the root while the ingress qdisc stays, and the ingress after the root is back: the
/// egress tree and the ingress are compacted separately, so the journal still does not grow.
#[test]
fn root_and_ingress_are_compacted_separately() {
    let dir = TempDir::new("store-compact-ingress");
    let state = dir.path.join("policy.json");
    ok(&state, &["tc", "qdisc", "add", "dev", "eth0", "ingress"]);
    let mut sizes = Vec::new();
    for _ in 0..6 {
        let _ = tclab(&state, &["tc", "qdisc", "del", "dev", "eth0", "root"]);
        ok(
            &state,
            &[
                "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10",
            ],
        );
        ok(
            &state,
            &[
                "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb",
                "rate", "1mbit",
            ],
        );
        let _ = tclab(&state, &["tc", "qdisc", "del", "dev", "eth0", "ingress"]);
        ok(
            &state,
            &[
                "tc", "qdisc", "add", "dev", "eth0", "handle", "ffff:", "ingress",
            ],
        );
        sizes.push(records(&state));
    }
    assert!(sizes.windows(2).all(|w| w[1] <= w[0]), "{sizes:?}");
    assert!(*sizes.last().unwrap() <= 4, "{sizes:?}");
    assert_eq!(classids(&state), vec!["1:10"]);
}

/// A header written without its newline is rewritten whole by the next write, not appended to.
#[test]
fn a_header_without_newline_is_not_appended_to() {
    let dir = TempDir::new("store-header");
    let state = dir.path.join("policy.json");
    std::fs::write(&state, "{\"tclab_store\":2}").unwrap();
    ok(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb",
        ],
    );
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate",
            "1mbit",
        ],
    );
    assert_eq!(classids(&state), vec!["1:10"]);
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(
        !text.contains('\0') && text.starts_with("{\"tclab_store\":2}\n"),
        "{text:?}"
    );
}

/// A large store is kept resident after the first call that had to replay it (2 000 records or more,
/// past its snapshot if it has one): the socket appears, later
/// calls are answered through it (a change made through it is in the file, and seen by a standalone
/// reader), one engine per store however many calls start one, none below the threshold or with
/// `TCLAB_SERVE=off`, and the engine goes when the store is deleted.
#[test]
fn a_large_store_starts_its_own_resident_engine() {
    let dir = TempDir::new("store-auto-serve");
    let state = dir.path.join("policy.json");
    let socket = dir.path.join("policy.json.serve/control.sock");
    let wait_for = |what: &dyn Fn() -> bool| {
        let t0 = std::time::Instant::now();
        while !what() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        what()
    };
    // 1 999 records: below the threshold (2 000), every call stays standalone.
    let batch = htb_batch("", 1998);
    let file = dir.path.join("batch.txt");
    std::fs::write(&file, &batch).unwrap();
    ok(&state, &["tc", "-batch", file.to_str().unwrap()]);
    assert_eq!(records(&state), 1999);
    ok(&state, &["tc", "qdisc", "show"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!socket.exists(), "no engine below 2 000 records");
    // 2 000 now; off in the environment, still none (for the change that made them either).
    for args in [
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:ffff", "htb",
            "rate", "1mbit",
        ][..],
        &["tc", "qdisc", "show"],
    ] {
        let mut c = cmd(Path::new(TCLAB), args);
        c.env("TCLAB_STATE", &state)
            .env_remove("TCLAB_CONTROL")
            .env("TCLAB_SERVE", "off");
        assert_eq!(run_with_timeout(c, Duration::from_secs(60), -1).code, 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!socket.exists(), "TCLAB_SERVE=off starts no engine");
    // The batch left a snapshot, from which a call replays one record: no engine is needed. Without
    // it (as for a policy of kinds that have no snapshot form yet) a call replays all 2 000.
    std::fs::remove_file(dir.path.join("policy.json.snap")).unwrap();
    // Three readers at once: one engine comes up.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let state = state.clone();
            std::thread::spawn(move || ok(&state, &["tc", "qdisc", "show", "dev", "eth0"]))
        })
        .collect();
    for r in readers {
        assert!(r.join().unwrap().starts_with("qdisc htb 1: root"));
    }
    assert!(
        wait_for(&|| socket.exists()),
        "an engine for the large store"
    );
    // The engines serving a store: `tclab serve --auto` processes with its TCLAB_STATE.
    let engines_of = |state: &Path| {
        let want = format!("TCLAB_STATE={}", state.display());
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
                cmdline.split(|b| *b == 0).any(|w| w == b"--auto")
                    && environ.split(|b| *b == 0).any(|w| w == want.as_bytes())
            })
            .count()
    };
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        engines_of(&state),
        1,
        "one engine however many calls started one"
    );
    ok(
        &state,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:fffe", "htb",
            "rate", "2mbit",
        ],
    );
    assert_eq!(
        records(&state),
        2001,
        "the change went through the engine into the file"
    );
    let mut c = cmd(
        Path::new(TCLAB),
        &["tc", "class", "show", "dev", "eth0", "classid", "1:fffe"],
    );
    c.env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .env("TCLAB_SERVE", "off");
    let standalone = run_with_timeout(c, Duration::from_secs(60), -1);
    assert!(
        standalone
            .stdout
            .starts_with("class htb 1:fffe root prio 0 rate 2Mbit"),
        "{}",
        standalone.stdout
    );
    // The store deleted: the engine stops within its 200 ms tick and takes its directory with it.
    std::fs::remove_file(&state).unwrap();
    assert!(
        wait_for(&|| !dir.path.join("policy.json.serve").exists()),
        "the engine left when its store went"
    );
    assert!(wait_for(&|| engines_of(&state) == 0));
    // The store's whole directory deleted (a test's scratch directory): the engine goes too, its
    // socket's file gone with the directory.
    let sub = dir.path.join("scratch");
    std::fs::create_dir(&sub).unwrap();
    let state2 = sub.join("policy.json");
    ok(&state2, &["tc", "-batch", file.to_str().unwrap()]);
    ok(
        &state2,
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:ffff", "htb",
            "rate", "1mbit",
        ],
    );
    std::fs::remove_file(sub.join("policy.json.snap")).unwrap();
    ok(&state2, &["tc", "qdisc", "show"]);
    assert!(wait_for(&|| engines_of(&state2) == 1));
    std::fs::remove_dir_all(&sub).unwrap();
    assert!(
        wait_for(&|| engines_of(&state2) == 0),
        "the engine left with its directory"
    );
}

/// A change to a large store starts the resident engine although its snapshot spared the replay: a
/// writer still reads every record and decodes the whole engine. A provisioning loop of single `tc class
/// change` calls on a 30 000-record store (10 000 subscribers) cost 88 ms each, none of them starting
/// an engine; through one, 6 ms (a review). A read from the snapshot starts none.
#[test]
fn a_change_to_a_large_store_with_a_snapshot_starts_its_resident_engine() {
    let dir = TempDir::new("store-auto-serve-write");
    let state = dir.path.join("policy.json");
    let socket = dir.path.join("policy.json.serve/control.sock");
    let file = dir.path.join("batch.txt");
    std::fs::write(&file, htb_batch("", 2000)).unwrap();
    let mut c = cmd(Path::new(TCLAB), &["tc", "-batch", file.to_str().unwrap()]);
    c.env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .env("TCLAB_SERVE", "off");
    assert_eq!(run_with_timeout(c, Duration::from_secs(60), -1).code, 0);
    assert!(dir.path.join("policy.json.snap").exists());
    ok(&state, &["tc", "qdisc", "show"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!socket.exists(), "a read from the snapshot needs no engine");
    let mut c = cmd(
        Path::new(TCLAB),
        &[
            "tc", "class", "change", "dev", "eth0", "classid", "1:10", "htb", "rate", "2mbit",
        ],
    );
    c.env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .env("TCLAB_TRACE_STORE", "1");
    let r = run_with_timeout(c, Duration::from_secs(60), -1);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("store: 0 records replayed"),
        "{}",
        r.stderr
    );
    let t0 = std::time::Instant::now();
    while !socket.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists(), "an engine for the large store's writers");
    // The store deleted: its engine leaves within its 200 ms tick.
    std::fs::remove_file(&state).unwrap();
    let t0 = std::time::Instant::now();
    while dir.path.join("policy.json.serve").exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!dir.path.join("policy.json.serve").exists());
}

/// A store replaced behind tclab's back while a resident engine holds it — `rm` and re-create (which
/// may reuse the inode) with a file of the same size, or `cp` over it — is read again: the engine
/// never answers from the old policy, nor appends to the new one as if it were the old.
#[test]
fn a_replaced_store_is_read_again_by_its_engine() {
    let dir = TempDir::new("store-replaced");
    let state = dir.path.join("policy.json");
    let mut stores = Vec::new();
    for (name, rate) in [("a", "100kbit"), ("b", "200kbit")] {
        let batch = htb_batch(
            &format!("class add dev eth0 parent 1: classid 1:2 htb rate {rate}\n"),
            2100,
        );
        let file = dir.path.join(format!("{name}.batch"));
        std::fs::write(&file, batch).unwrap();
        let store = dir.path.join(format!("{name}.json"));
        ok(&store, &["tc", "-batch", file.to_str().unwrap()]);
        stores.push(store);
    }
    assert_eq!(
        std::fs::metadata(&stores[0]).unwrap().len(),
        std::fs::metadata(&stores[1]).unwrap().len(),
        "same size: only the rate's digit differs"
    );
    let rate_of_1_2 = || {
        let out = ok(
            &state,
            &["tc", "class", "show", "dev", "eth0", "classid", "1:2"],
        );
        out.split_whitespace()
            .skip_while(|w| *w != "rate")
            .nth(1)
            .unwrap_or("")
            .to_string()
    };
    std::fs::copy(&stores[0], &state).unwrap();
    assert_eq!(rate_of_1_2(), "100Kbit");
    let socket = dir.path.join("policy.json.serve/control.sock");
    let t0 = std::time::Instant::now();
    while !socket.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists(), "the engine runs");
    for (i, store) in [&stores[1], &stores[0], &stores[1]].iter().enumerate() {
        if i == 0 {
            std::fs::remove_file(&state).unwrap();
        }
        std::fs::copy(store, &state).unwrap();
        let want = if i % 2 == 0 { "200Kbit" } else { "100Kbit" };
        assert_eq!(rate_of_1_2(), want, "after replacement {i}");
    }
    // A change through the engine lands on the store as it now is.
    ok(
        &state,
        &[
            "tc", "class", "change", "dev", "eth0", "classid", "1:2", "htb", "rate", "300kbit",
        ],
    );
    let mut c = cmd(
        Path::new(TCLAB),
        &["tc", "class", "show", "dev", "eth0", "classid", "1:2"],
    );
    c.env("TCLAB_STATE", &state)
        .env_remove("TCLAB_CONTROL")
        .env("TCLAB_SERVE", "off");
    let standalone = run_with_timeout(c, Duration::from_secs(60), -1);
    assert!(
        standalone.stdout.contains("rate 300Kbit"),
        "{}",
        standalone.stdout
    );
    assert!(
        !standalone.stderr.contains("warning"),
        "{}",
        standalone.stderr
    );
}

/// A `show` whose reader stalls (`| less`) holds up nobody: the store's lock is dropped once the
/// answer is built, as the kernel holds rtnl for a dump and not while tc prints it.
#[test]
fn a_stalled_reader_holds_up_no_writer() {
    let dir = TempDir::new("store-stalled");
    let state = dir.path.join("policy.json");
    let batch = htb_batch("", 3000);
    let file = dir.path.join("b.txt");
    std::fs::write(&file, batch).unwrap();
    ok(&state, &["tc", "-batch", file.to_str().unwrap()]);
    let fifo = dir.path.join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The reader's output (some 300 kB) goes into a pipe nobody reads past its first 64 kB.
    let mut reader = Command::new(TCLAB)
        .args(["tc", "-s", "class", "show", "dev", "eth0"])
        .env("TCLAB_STATE", &state)
        .env("TCLAB_SERVE", "off")
        .env_remove("TCLAB_CONTROL")
        .stdout(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&fifo)
                .unwrap(),
        )
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut c = cmd(
        Path::new(TCLAB),
        &[
            "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:f001", "htb",
            "rate", "1mbit",
        ],
    );
    c.env("TCLAB_STATE", &state)
        .env("TCLAB_SERVE", "off")
        .env_remove("TCLAB_CONTROL");
    let w = run_with_timeout(c, Duration::from_secs(10), -1);
    let _ = reader.kill();
    let _ = reader.wait();
    assert_eq!(w.code, 0, "the writer waited on a stalled reader: {w:?}");
}
