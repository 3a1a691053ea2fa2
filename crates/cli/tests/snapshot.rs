//! The store's snapshot (issue 26, `crates/tc/src/snapshot.rs`): a cold read that loads the snapshot
//! and replays the journal's tail must print exactly what a read that replays the whole journal prints,
//! and a snapshot that is torn, corrupt, stale or left by a killed writer must never change an answer.
//!
//! The histories are the repository's own: the field scripts (`tests/fixtures/field/*.sh`, applied with
//! `tclab script run --strict` as `field_scripts.rs` applies them), the seed and example scripts, and
//! tdc's cases (each case's setup and command under test as one history) when `TCLAB_TDC_DIR` or
//! `../shared/tdc` holds them (skipped with a line if not). Each history is applied through the store
//! with a snapshot forced after its first records, the rest applied by calls that each open the store
//! from that snapshot; then every device's `tc -s -d` qdisc, class and filter listings, the actions,
//! `iptables -S`, the devices and the automatic handle counter (`Store::fingerprint`), and the
//! read-only calls' own answers, are compared with the snapshot and without it, and the journal with
//! the one a plain replay-only store of the same history wrote. Every kind has a snapshot form
//! (`tclab_core::snapshot`); a policy without one (a kind added later without it) writes none: it is
//! counted, and must read as before.

mod common;

use common::{fixture, tclab, TempDir};
use std::path::{Path, PathBuf};
use tclab_tc::store::{read_journal, Store};

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn snap_path(state: &Path) -> PathBuf {
    tclab_tc::snapshot::path_for(state)
}

/// Apply `records` one call each, every call opening the store anew (as separate `tclab` calls do).
fn apply_each(state: &Path, records: &[Vec<String>]) {
    for r in records {
        let (mut s, _) = Store::open(state).unwrap();
        s.execute(r, None).unwrap();
    }
}

/// The read-only calls whose answers must not depend on the snapshot.
fn reads(state: &Path) -> Vec<Vec<String>> {
    let (s, _) = Store::open(state).unwrap();
    let mut out = vec![
        words("tc -s qdisc show"),
        words("link show"),
        words("route show"),
    ];
    for (dev, _) in s.engine().unwrap().devices() {
        for r in [
            "tc -s class show dev",
            "tc class show dev",
            "tc filter show dev",
            // JSON and counters too (a filter listing of the root's or ingress's blocks decodes no
            // class tree: tclab_core::snapshot::FilterListing).
            "tc -s -j filter show dev",
            "tc -s -d filter show root dev",
            "tc -j filter show parent 1:1 dev",
            "tc filter show ingress dev",
            "tc -s -d qdisc show dev",
            "tc -j -s qdisc show dev",
        ] {
            let mut w = words(r);
            w.push(dev.to_string());
            out.push(w);
        }
    }
    out
}

fn read(state: &Path, argv: &[String]) -> (String, usize) {
    let (mut s, _) = Store::open_to_read(state, argv).unwrap();
    let o = s.execute(argv, None).unwrap();
    (
        format!("{}\n--stderr--\n{}\n--code {}", o.stdout, o.stderr, o.code),
        s.records_read(),
    )
}

/// What happened to one history.
enum Outcome {
    /// Snapshotted at every cut, and every answer the same.
    Snapshotted,
    /// The policy has no snapshot form (the reason), and reads as before.
    NoForm(String),
}

/// Apply `history` with a snapshot forced after `cut` records, and compare every answer with and
/// without it.
fn check_cut(name: &str, history: &[Vec<String>], cut: usize) -> Result<Outcome, String> {
    let dir = TempDir::new("snap");
    let state = dir.path.join("policy.json");
    {
        let (mut s, _) = Store::open(&state).unwrap();
        for r in &history[..cut] {
            s.execute(r, None).unwrap();
        }
    }
    let (mut s, _) = Store::open(&state).unwrap();
    let covered = s.entries().len();
    if !s.write_snapshot().unwrap() {
        let why = match s.engine().unwrap().snapshot() {
            Err(e) => e.to_string(),
            Ok(_) => {
                return Err(format!(
                    "{name}: no snapshot written, yet the engine has one"
                ))
            }
        };
        assert!(
            !snap_path(&state).exists(),
            "{name}: a snapshot left behind"
        );
        return Ok(Outcome::NoForm(why));
    }
    drop(s);
    let snapped = std::fs::read(&state).unwrap();
    // The rest through writers that start from the snapshot.
    apply_each(&state, &history[cut..]);
    let (mut with, _) = Store::open(&state).unwrap();
    let total = with.entries().len();
    // The snapshot holds while the journal still begins with what it stood for (a deletion in the
    // rest may compact the journal, which makes it stale).
    let holds = std::fs::read(&state).unwrap().starts_with(&snapped);
    let want = if holds { total - covered } else { total };
    if with.records_read() != want {
        return Err(format!(
            "{name}: a writer replayed {} of {total} records, not {want} (snapshot of {covered})",
            with.records_read(),
        ));
    }
    let fp_with = with.fingerprint();
    let answers: Vec<(Vec<String>, (String, usize))> = reads(&state)
        .into_iter()
        .map(|r| {
            let a = read(&state, &r);
            (r, a)
        })
        .collect();
    // The same store with its snapshot put aside: every record replayed. A compaction in the rest
    // removed the snapshot it made stale.
    if snap_path(&state).exists() {
        std::fs::rename(snap_path(&state), dir.path.join("snap.aside")).unwrap();
    } else if holds {
        return Err(format!(
            "{name}: the snapshot went, yet the journal still begins with it"
        ));
    }
    let (mut without, _) = Store::open(&state).unwrap();
    assert_eq!(without.records_read(), total);
    if fp_with != without.fingerprint() {
        return Err(format!(
            "{name} (snapshot after {cut}): the policy differs with the snapshot:\n{fp_with}\n---- replayed ----\n{}",
            without.fingerprint()
        ));
    }
    for (r, (a, replayed)) in &answers {
        let (b, all) = read(&state, r);
        if *a != b {
            return Err(format!(
                "{name} (snapshot after {cut}): `{}` differs:\n{a}\n---- replayed ----\n{b}",
                r.join(" ")
            ));
        }
        if *replayed > all || (holds && covered > 0 && *replayed == all && all > 0) {
            return Err(format!(
                "{name}: `{}` replayed {replayed} records with the snapshot, {all} without",
                r.join(" ")
            ));
        }
    }
    // The journal is the one a store that never had a snapshot writes for the same history.
    let plain = dir.path.join("plain.json");
    apply_each(&plain, history);
    if std::fs::read(&plain).ok() != std::fs::read(&state).ok() {
        return Err(format!(
            "{name} (snapshot after {cut}): the journal differs from a replay-only store's"
        ));
    }
    Ok(Outcome::Snapshotted)
}

/// Check a history at each of `cuts` (numbers of records before the snapshot).
fn check(name: &str, history: &[Vec<String>], cuts: &[usize], tally: &mut Tally) {
    let n = history.len();
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(n)).collect();
    cuts.dedup();
    for cut in cuts {
        match check_cut(name, history, cut) {
            Ok(Outcome::Snapshotted) => {}
            Ok(Outcome::NoForm(why)) => {
                *tally.without.entry(why).or_default() += 1;
                return;
            }
            Err(e) => tally.failures.push(e),
        }
    }
    tally.snapshotted += 1;
}

#[derive(Default)]
struct Tally {
    snapshotted: usize,
    without: std::collections::BTreeMap<String, usize>,
    failures: Vec<String>,
}

impl Tally {
    fn finish(self, what: &str, at_least: usize) {
        eprintln!(
            "{what}: {} histories snapshotted; without a snapshot form: {:?}",
            self.snapshotted, self.without
        );
        assert!(
            self.failures.is_empty(),
            "{} failures:\n{}",
            self.failures.len(),
            self.failures.join("\n\n")
        );
        assert!(
            self.snapshotted >= at_least,
            "{what}: only {} histories had a snapshot (at least {at_least} expected)",
            self.snapshotted
        );
    }
}

/// The records a script leaves in a store (`tclab script run --strict`, devices made first; a script
/// that does not apply whole, as seed 003's with its typo, without `--strict`).
fn script_journal(script: &str, devices: &[&str], args: &[&str], whole: bool) -> Vec<Vec<String>> {
    let dir = TempDir::new("snap-script");
    let state = dir.path.join("policy.json");
    let mut records = Vec::new();
    for d in devices {
        let mut r = words("link add dev");
        r.extend(words(d));
        records.push(r);
        let mut argv = vec!["link", "add", "dev"];
        argv.extend(d.split_whitespace());
        assert!(tclab(&state, &argv).status.success());
    }
    let mut argv = vec!["script", "run"];
    argv.extend(whole.then_some("--strict"));
    argv.push(script);
    argv.extend(args);
    let o = tclab(&state, &argv);
    assert!(
        o.status.success() || !whole,
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    read_journal(&state).unwrap().entries
}

#[test]
fn routes_realms_come_back_from_a_snapshot() {
    // The realms `ip route … realm` gives the host's routes are engine state as well (the route
    // classifier reads them): a snapshot carries them, and a route changed after it replays on top.
    let h: Vec<Vec<String>> = [
        "link add dev eth0",
        "tc qdisc add dev eth0 root handle 1: htb default 10",
        "tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
        "route add 10.1.0.0/16 dev eth0 realm 2",
        "route add 10.2.0.0/16 dev eth0 realms 3/4",
        "route del 10.1.0.0/16 dev eth0",
        "route add 10.3.0.0/24 dev eth0 realm 5",
    ]
    .iter()
    .map(|c| words(c))
    .collect();
    let mut tally = Tally::default();
    check("routes", &h, &[4, 5, h.len()], &mut tally);
    tally.finish("routes", 1);
    // And the routes were there to compare.
    let dir = TempDir::new("snap-routes");
    let state = dir.path.join("policy.json");
    apply_each(&state, &h);
    let (shown, _) = read(&state, &words("route show"));
    assert!(
        shown.contains("10.2.0.0/16")
            && shown.contains("10.3.0.0/24")
            && !shown.contains("10.1.0.0/16"),
        "{shown}"
    );
}

#[test]
fn field_and_example_scripts_read_the_same_with_and_without_a_snapshot() {
    let mut tally = Tally::default();
    // The devices and arguments field_scripts.rs applies each fixture with.
    let field: &[(&str, &[&str], &[&str])] = &[
        ("cni_bandwidth.sh", &["veth5f3c2a1b"], &[]),
        (
            "libreqos.sh",
            &["eth1 numtxqueues 2", "eth2 numtxqueues 2"],
            &[],
        ),
        ("libvirt_bandwidth.sh", &["vnet0"], &[]),
        (
            "mininet_tclink.sh",
            &[
                "h1-eth0", "s1-eth1", "h2-eth0", "s1-eth2", "h3-eth0", "s1-eth3",
            ],
            &[],
        ),
        ("openwrt_qos_scripts.sh", &["eth1"], &[]),
        ("proxmox_tap_rate.sh", &["tap100i0"], &[]),
        ("pumba_netem.sh", &["eth0"], &[]),
        ("pumba_netem.sh", &["eth0"], &["stop"]),
        ("sqm_piece_of_cake.sh", &["eth0"], &[]),
        ("sqm_simple.sh", &["eth0"], &[]),
        ("sqm_simplest.sh", &["eth0"], &[]),
        ("sqm_simplest_tbf.sh", &["eth0"], &[]),
        ("tcconfig_tcset.sh", &["eth0"], &[]),
        ("wondershaper.sh", &["eth0"], &[]),
    ];
    for (name, devices, args) in field {
        let h = script_journal(&fixture(&format!("field/{name}")), devices, args, true);
        check(name, &h, &[1, h.len() / 2, h.len()], &mut tally);
    }
    for name in ["seed004_htb.sh", "seed004_cbq.sh", "sqm_layer_cake.sh"] {
        let h = script_journal(&fixture(name), &["eth0"], &[], true);
        check(name, &h, &[1, h.len() / 2, h.len()], &mut tally);
    }
    let gateway = format!(
        "{}/../../examples/seed003/gateway.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let h = script_journal(&gateway, &["eth0", "eth1"], &[], false);
    check(
        "seed003/gateway.sh",
        &h,
        &[1, h.len() / 2, h.len()],
        &mut tally,
    );
    // All 18 histories have a snapshot form (basic, cbq and the mangle table gave the last five);
    // fewer means a kind lost its form.
    tally.finish("scripts", 18);
}

/// tdc's cases as histories: each case's setup and command under test, the `tc` and `ip link` calls
/// among them (`$TC …`, `$IP link …`, tdc's devices made first as its nsPlugin makes them). Calls
/// with shell syntax are left out; a call that fails is not in the journal, as in any store.
fn tdc_histories(dir: &Path) -> Vec<(String, Vec<Vec<String>>)> {
    let mut out = Vec::new();
    for sub in ["qdiscs", "filters", "actions"] {
        let Ok(files) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = files.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "json"))
        {
            let Ok(cases) =
                serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap())
            else {
                continue;
            };
            for case in cases.as_array().into_iter().flatten() {
                let mut h: Vec<Vec<String>> = ["dummy1", "v0p0", "v0p1"]
                    .iter()
                    .map(|d| words(&format!("link add dev {d} type dummy")))
                    .collect();
                let setup = case.get("setup").and_then(|s| s.as_array());
                let cmds = setup
                    .into_iter()
                    .flatten()
                    .map(|item| match item {
                        serde_json::Value::Array(a) => a.first().and_then(|c| c.as_str()),
                        other => other.as_str(),
                    })
                    .chain([case.get("cmdUnderTest").and_then(|c| c.as_str())]);
                for c in cmds.flatten() {
                    let c = c
                        .replace("$TC ", "tc ")
                        .replace("$IP ", "ip ")
                        .replace("$DUMMY", "dummy1")
                        .replace("$DEV0", "v0p0")
                        .replace("$DEV1", "v0p1")
                        .replace("$DEV2", "v0p2")
                        .replace("$ETH", "eth0");
                    if c.contains(['"', '\'', ';', '|', '&', '$', '(', '>', '<', '`']) {
                        continue;
                    }
                    if let Some(rest) = c.trim().strip_prefix("tc ") {
                        let mut r = vec!["tc".to_string()];
                        r.extend(words(rest));
                        h.push(r);
                    } else if let Some(rest) = c.trim().strip_prefix("ip link ") {
                        let mut r = vec!["link".to_string()];
                        r.extend(words(rest));
                        h.push(r);
                    }
                }
                let id = case.get("id").and_then(|i| i.as_str()).unwrap_or("?");
                out.push((format!("tdc {sub}/{id}"), h));
            }
        }
    }
    out
}

/// Without the tdc cases the test above passes as skipped, and the terminal must say so: an
/// `eprintln!` there was captured by the harness, so a clone without `../shared` never saw it.
#[test]
fn without_the_tdc_cases_the_skip_is_said_on_the_terminal() {
    let empty = TempDir::new("no-tdc");
    let (_, stderr) = common::run_test_in_child(
        "tdc_cases_read_the_same_with_and_without_a_snapshot",
        &[("TCLAB_TDC_DIR", empty.path.as_os_str())],
    );
    assert_eq!(
        stderr
            .matches("snapshot: SKIPPED: the kernel's tdc cases are not at")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn tdc_cases_read_the_same_with_and_without_a_snapshot() {
    let dir = match std::env::var_os("TCLAB_TDC_DIR") {
        Some(d) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(d),
        None => common::shared_tdc(),
    };
    if !dir.join("qdiscs").is_dir() {
        common::skip(&format!(
            "snapshot: SKIPPED: the kernel's tdc cases are not at {}: set TCLAB_TDC_DIR, or scripts/fetch-tdc.sh",
            dir.display()
        ));
        return;
    }
    let mut tally = Tally::default();
    // The command under test applied on top of the snapshot, and the snapshot of its result.
    for (name, h) in tdc_histories(&dir) {
        check(&name, &h, &[h.len().saturating_sub(1), h.len()], &mut tally);
    }
    // All 1 143 of tdc's histories on 2026-11-27 have a form (every qdisc, classifier and action
    // kind, and the teql master): fewer means a kind lost its form.
    tally.finish("tdc", 1143);
}

/// A LibreQoS-shaped policy (the bench's, smaller): HTB classes with pfifo leaves and u32 filters,
/// enough records for a change to write a snapshot by itself.
fn batch(n: u32) -> String {
    let mut t = String::from(
        "qdisc add dev eth0 root handle 1: htb default 2\nclass add dev eth0 parent 1: classid 1:1 htb rate 10gbit\n",
    );
    for i in 0..n {
        let c = i + 16;
        t.push_str(&format!(
            "class add dev eth0 parent 1:1 classid 1:{c:x} htb rate 1mbit ceil 10mbit\n\
             qdisc add dev eth0 parent 1:{c:x} handle {c:x}: pfifo limit 100\n\
             filter add dev eth0 parent 1: prio 1 protocol ip u32 match ip dst 10.{}.{}.1/32 flowid 1:{c:x}\n",
            (i >> 8) & 255,
            i & 255
        ));
    }
    t
}

fn cold(state: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tclab"))
        .args(args)
        .env("TCLAB_STATE", state)
        .env("TCLAB_SERVE", "off")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// How many records a cold `tclab ARGS` replayed (`TCLAB_TRACE_STORE`): a snapshot is built by the
/// tclab executable for itself, so only that executable can say whether it used one.
fn replayed(state: &Path, args: &[&str]) -> usize {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tclab"))
        .args(args)
        .env("TCLAB_STATE", state)
        .env("TCLAB_SERVE", "off")
        .env("TCLAB_TRACE_STORE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    err.lines()
        .find_map(|l| l.strip_prefix("tclab: store: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no store trace in {err}"))
}

const SHOWS: [&[&str]; 3] = [
    &["tc", "-s", "class", "show", "dev", "eth0"],
    &["tc", "filter", "show", "dev", "eth0"],
    &["tc", "-s", "-d", "qdisc", "show"],
];

/// Every show of the store, read cold, with its snapshot as it is and with none.
fn same_with_and_without(state: &Path, what: &str) {
    let snap = snap_path(state);
    let with: Vec<String> = SHOWS.iter().map(|a| cold(state, a)).collect();
    let aside = state.with_extension("aside");
    let had = std::fs::rename(&snap, &aside).is_ok();
    let without: Vec<String> = SHOWS.iter().map(|a| cold(state, a)).collect();
    if had {
        std::fs::rename(&aside, &snap).unwrap();
    }
    for ((a, b), show) in with.iter().zip(&without).zip(SHOWS) {
        assert!(
            a == b,
            "{what}: `{}` differs with the snapshot",
            show.join(" ")
        );
    }
}

/// A store to which `batch(400)` (1 202 lines) was applied by one `tc -batch`.
fn applied(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let state = dir.path.join("policy.json");
    let b = dir.path.join("batch");
    std::fs::write(&b, batch(400)).unwrap();
    cold(&state, &["tc", "-batch", b.to_str().unwrap()]);
    (dir, state)
}

#[test]
fn a_large_batch_writes_a_snapshot_that_cold_reads_use() {
    let (_dir, state) = applied("snap-batch");
    // 1 202 records, past SNAPSHOT_AFTER: the batch wrote one at its end, which a read uses whole.
    assert!(snap_path(&state).exists());
    let show = words("tc -s class show dev eth0");
    let show: Vec<&str> = show.iter().map(String::as_str).collect();
    assert_eq!(
        replayed(&state, &show),
        0,
        "a read after the batch replays nothing"
    );
    same_with_and_without(&state, "after the batch");
    // A few changes after it are replayed on top, and a class deleted shows as deleted.
    cold(
        &state,
        &[
            "tc", "class", "change", "dev", "eth0", "classid", "1:10", "htb", "rate", "2mbit",
        ],
    );
    cold(
        &state,
        &[
            "tc", "filter", "del", "dev", "eth0", "parent", "1:", "prio", "1", "handle",
            "800::800", "u32",
        ],
    );
    assert_eq!(replayed(&state, &show), 2);
    same_with_and_without(&state, "with a tail");
    let shown = cold(&state, &show);
    let line = shown
        .lines()
        .find(|l| l.starts_with("class htb 1:10 "))
        .unwrap();
    // (`class change` without ceil sets it to the rate, as tc does.)
    assert!(line.contains(" rate 2Mbit ceil 2Mbit "), "{line}");
    // Without the snapshot every record is replayed.
    std::fs::remove_file(snap_path(&state)).unwrap();
    assert_eq!(replayed(&state, &show), 1204);
}

#[test]
fn torn_corrupt_stale_and_leftover_snapshots_change_no_answer() {
    let (dir, state) = applied("snap-crash");
    let snap = snap_path(&state);
    let good = std::fs::read(&snap).unwrap();
    let reference: Vec<String> = {
        std::fs::remove_file(&snap).unwrap();
        let r = SHOWS.iter().map(|a| cold(&state, a)).collect();
        std::fs::write(&snap, &good).unwrap();
        r
    };
    // Each damaged snapshot is ignored whole: every record replayed, the same answers. The read
    // that replayed writes a fresh one (under its shared lock), which the reads after it use.
    let check = |what: &str, damaged: Option<&[u8]>| {
        for (show, want) in SHOWS.iter().zip(&reference) {
            if let Some(bytes) = damaged {
                std::fs::write(&snap, bytes).unwrap();
            }
            assert!(
                cold(&state, show) == *want,
                "{what}: `{}` differs",
                show.join(" ")
            );
        }
        if let Some(bytes) = damaged {
            std::fs::write(&snap, bytes).unwrap();
            assert_eq!(replayed(&state, SHOWS[0]), 1202, "{what}: records replayed");
        }
        assert_eq!(replayed(&state, SHOWS[0]), 0, "{what}: renewed by the read");
    };
    check("the snapshot as written", None);
    // Cut short at a few places (a write torn by a crash without the rename's atomicity), and one
    // byte flipped in the header, the engine and the checksum.
    for n in [0, 7, 20, good.len() / 2, good.len() - 1] {
        check(&format!("snapshot cut at {n}"), Some(&good[..n]));
    }
    for i in [9, 40, good.len() / 2, good.len() - 2] {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        check(&format!("byte {i} flipped"), Some(&bad));
    }
    // A writer killed before its rename: a half-written temporary file beside the good snapshot, which
    // reads ignore and the next writer removes.
    std::fs::write(&snap, &good).unwrap();
    let leftover = dir.path.join(".policy.json.snap.99999.0.tmp");
    std::fs::write(&leftover, &good[..good.len() / 3]).unwrap();
    check("a leftover temporary file", None);
    // Stale: the journal replaced by another policy's (a backup restored) of the same length or
    // longer; the old snapshot must not be used for it.
    let journal = std::fs::read(&state).unwrap();
    let text = String::from_utf8(journal.clone())
        .unwrap()
        .replace("\"1mbit\"", "\"3mbit\"");
    std::fs::write(&state, &text).unwrap();
    let replaced = cold(&state, SHOWS[0]);
    assert!(
        replaced.contains("rate 3Mbit") && !replaced.contains("rate 1Mbit"),
        "{replaced}"
    );
    // That read wrote a snapshot for the journal it found, stale once the old one is put back: the
    // next read replays and renews it again.
    std::fs::write(&state, &journal).unwrap();
    assert_eq!(replayed(&state, SHOWS[0]), 1202, "the journal put back");
    check("the journal put back", None);
    // The next snapshot's writer (under the store's lock) sweeps the leftover away.
    let (mut s, _) = Store::open(&state).unwrap();
    s.write_snapshot().unwrap();
    assert!(
        !leftover.exists(),
        "the killed writer's temporary file is still there"
    );
}

#[test]
fn a_read_renews_the_snapshot_of_a_build_older_than_itself() {
    // After a rebuild a store's snapshot is another build's, which no read may decode: the first
    // read replays every record and writes a fresh one, so that the reads after it load it (before,
    // every read replayed until the next change). Not when the other build's snapshot was written
    // after this executable was built: two builds reading one store would rewrite it in turn.
    let (dir, state) = applied("snap-rebuilt");
    let snap = snap_path(&state);
    let reference: Vec<String> = SHOWS.iter().map(|a| cold(&state, a)).collect();
    // A snapshot of this test's executable (the build id is the running program's): for the tclab
    // executable, another build's, valid in every other respect.
    let foreign = {
        let (s, _) = Store::open(&state).unwrap();
        let journal = std::fs::read(&state).unwrap();
        let engine = s.engine().unwrap().snapshot().unwrap();
        tclab_tc::snapshot::encode(&engine, &journal, s.entries().len() as u64).unwrap()
    };
    let exe_time = std::fs::metadata(env!("CARGO_BIN_EXE_tclab"))
        .and_then(|m| m.modified())
        .unwrap();
    let put = |older: bool| {
        std::fs::write(&snap, &foreign).unwrap();
        if older {
            let day = std::time::Duration::from_secs(86_400);
            let f = std::fs::File::options().write(true).open(&snap).unwrap();
            f.set_modified(exe_time - day).unwrap();
        }
    };
    put(true);
    assert_eq!(
        replayed(&state, SHOWS[0]),
        1202,
        "the other build's snapshot"
    );
    assert_ne!(std::fs::read(&snap).unwrap(), foreign, "renewed");
    for (show, want) in SHOWS.iter().zip(&reference) {
        assert!(cold(&state, show) == *want, "`{}` differs", show.join(" "));
    }
    assert_eq!(replayed(&state, SHOWS[0]), 0, "the renewed snapshot");
    // Written after this executable: left alone, replayed at each read.
    put(false);
    assert_eq!(replayed(&state, SHOWS[0]), 1202);
    assert_eq!(replayed(&state, SHOWS[1]), 1202);
    assert_eq!(std::fs::read(&snap).unwrap(), foreign, "left as it was");
    // Eight readers at once, each finding the old snapshot or one of the others' renewals (each
    // renames its own temporary file over it): every answer the same, one valid snapshot after.
    put(true);
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let state = state.clone();
            std::thread::spawn(move || cold(&state, SHOWS[i % SHOWS.len()]))
        })
        .collect();
    for (i, r) in readers.into_iter().enumerate() {
        assert!(
            r.join().unwrap() == reference[i % SHOWS.len()],
            "reader {i}"
        );
    }
    assert_eq!(replayed(&state, SHOWS[0]), 0, "renewed by the readers");
    let left: Vec<_> = std::fs::read_dir(&dir.path)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn a_writer_killed_at_any_moment_leaves_reads_right() {
    // kill -9 during a batch that writes a snapshot at its end, at several moments: whatever the
    // journal and the snapshot hold afterwards, a cold read answers as a replay of the journal does.
    let dir = TempDir::new("snap-kill");
    let b = dir.path.join("batch");
    std::fs::write(&b, batch(1500)).unwrap();
    // How long a whole batch takes here, to spread the kills over it.
    let state = dir.path.join("whole.json");
    let t = std::time::Instant::now();
    cold(&state, &["tc", "-batch", b.to_str().unwrap()]);
    let whole = t.elapsed();
    for k in 1..=6u32 {
        let state = dir.path.join(format!("k{k}.json"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tclab"))
            .args(["tc", "-batch", b.to_str().unwrap()])
            .env("TCLAB_STATE", &state)
            .env("TCLAB_SERVE", "off")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(whole * k / 6);
        let _ = child.kill();
        let _ = child.wait();
        if state.exists() {
            same_with_and_without(&state, &format!("killed after {k}/6 of the batch"));
        }
    }
}

/// A compaction (`tc qdisc del … root` drops the records that built the tree) leaves a journal whose
/// start is no longer the bytes the snapshot covers: no read could use the old file, so it is removed
/// with the rewrite, and the store reads as a plain replay of the shorter journal does.
#[test]
fn a_compaction_removes_the_snapshot_it_made_stale() {
    let dir = TempDir::new("snap-compact");
    let state = dir.path.join("policy.json");
    let mut history = vec![words("tc qdisc add dev eth0 root handle 1: htb default 10")];
    for i in 1..=20 {
        history.push(words(&format!(
            "tc class add dev eth0 parent 1: classid 1:{i:x} htb rate 1mbit"
        )));
    }
    {
        let (mut s, _) = Store::open(&state).unwrap();
        for r in &history {
            s.execute(r, None).unwrap();
        }
        assert!(s.write_snapshot().unwrap(), "HTB has a snapshot form");
    }
    assert!(snap_path(&state).exists());
    let before = read_journal(&state).unwrap().entries.len();
    apply_each(&state, &[words("tc qdisc del dev eth0 root")]);
    let after = read_journal(&state).unwrap().entries.len();
    assert!(after < before, "compacted: {before} -> {after} records");
    assert!(
        !snap_path(&state).exists(),
        "a stale snapshot was left beside the compacted journal"
    );
    let (shown, _) = read(&state, &words("tc qdisc show dev eth0"));
    assert!(!shown.contains("htb"), "{shown}");
}
