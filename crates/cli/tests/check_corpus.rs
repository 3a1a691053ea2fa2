//! `tclab check` on a corpus (issue 23): `fixtures/check/mistakes/` holds policies with one realistic
//! mistake each, named in its header (`# expect: CODE`, `# args: …` for check's options); each must
//! give that finding, at a line of the file, and nothing else above a note. `fixtures/check/correct/`
//! holds correct policies of the kinds people deploy (sqm-like HTB + fq_codel with ifb ingress, CAKE
//! on WAN and ifb, dual-stack HTB, ADSL with a size table, LibreQoS-style mq + HTB + CAKE, …): nothing
//! above a note, exit 0. The field fixtures (`fixtures/field/`, the tools' own commands) give exactly
//! the findings docs/checks/README.md lists for them, each explained there.

mod common;
use common::{cmd, run_with_timeout, RunResult};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sh"))
        .collect();
    v.sort();
    v
}

/// The value of a `# KEY: value` header line.
fn header(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
        .map(str::to_string)
}

fn check(path: &Path, args: &str) -> RunResult {
    let path = path.to_string_lossy().into_owned();
    let mut argv = vec!["check", "--json"];
    argv.extend(args.split_whitespace());
    argv.push(&path);
    let mut c = cmd(Path::new(TCLAB), &argv);
    c.env_remove("TCLAB_CONTROL")
        .env("TCLAB_STATE", "/nonexistent/tclab-corpus.json");
    run_with_timeout(c, Duration::from_secs(60), -1)
}

fn findings(r: &RunResult) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr));
    v.as_array().unwrap().clone()
}

#[test]
fn each_mistake_is_named_and_nothing_else_above_a_note() {
    let files = fixtures("check/mistakes");
    assert!(files.len() >= 30, "{} mistakes", files.len());
    let mut codes_seen: Vec<String> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        let expect = header(&text, "expect").unwrap_or_else(|| panic!("{name}: no `# expect:`"));
        assert!(
            text.contains("# The mistake: "),
            "{name}: the mistake is not described"
        );
        let r = check(f, &header(&text, "args").unwrap_or_default());
        let above: Vec<serde_json::Value> = findings(&r)
            .into_iter()
            .filter(|x| x["severity"] != "note")
            .collect();
        let got: Vec<&str> = above.iter().map(|x| x["code"].as_str().unwrap()).collect();
        assert_eq!(got, [expect.as_str()], "{name}:\n{}", r.stdout);
        // It names the line of the file (bash's own for a syntax error).
        let line = above[0]["line"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no line"));
        let (file, n) = line.rsplit_once(':').unwrap();
        assert!(file.ends_with(&*name), "{name}: line {line}");
        let n: usize = n.parse().unwrap();
        assert!((1..=text.lines().count()).contains(&n), "{name}: line {n}");
        let severity = above[0]["severity"].as_str().unwrap();
        assert_eq!(r.code, if severity == "error" { 2 } else { 1 }, "{name}");
        codes_seen.push(expect);
    }
    codes_seen.sort();
    codes_seen.dedup();
    eprintln!("{} mistakes, {} codes", files.len(), codes_seen.len());
}

#[test]
fn correct_policies_give_nothing_above_a_note() {
    let files = fixtures("check/correct");
    assert!(files.len() >= 10, "{} correct policies", files.len());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        let r = check(f, &header(&text, "args").unwrap_or_default());
        let above: Vec<String> = findings(&r)
            .iter()
            .filter(|x| x["severity"] != "note")
            .map(|x| format!("{} {}", x["code"], x["message"]))
            .collect();
        assert_eq!(above, Vec::<String>::new(), "{name}:\n{}", r.stdout);
        assert_eq!(r.code, 0, "{name}");
    }
}

/// What each field fixture gets (docs/checks/README.md says why each is right): (fixture, check's
/// options, the codes in output order).
const FIELD: &[(&str, &str, &[&str])] = &[
    (
        "cni_bandwidth.sh",
        "",
        &["bucket-too-large", "bucket-too-large"],
    ),
    (
        "libreqos.sh",
        "--txqueues eth1=2 --txqueues eth2=2",
        &[
            "classes-by-priority",
            "aqm-target-short",
            "classes-by-priority",
        ],
    ),
    (
        "libvirt_bandwidth.sh",
        "",
        &["gso-bursts", "ingress-police"],
    ),
    (
        "mininet_tclink.sh",
        "",
        &["gso-bursts", "gso-bursts", "gso-bursts", "gso-bursts"],
    ),
    (
        "openwrt_qos_scripts.sh",
        "",
        &[
            "gso-bursts",
            "aqm-target-short",
            "ipv4-only-classes",
            "aqm-target-short",
            "redirect-one-protocol",
        ],
    ),
    ("proxmox_tap_rate.sh", "", &["gso-bursts", "ingress-police"]),
    ("pumba_netem.sh", "", &["ipv4-only-classes"]),
    ("sqm_piece_of_cake.sh", "", &[]),
    ("sqm_simple.sh", "", &["gso-bursts", "filter-family"]),
    ("sqm_simplest.sh", "", &["gso-bursts"]),
    ("sqm_simplest_tbf.sh", "", &[]),
    (
        "tcconfig_tcset.sh",
        "",
        &["ipv4-only-classes", "redirect-one-protocol"],
    ),
    (
        "wondershaper.sh",
        "",
        &[
            "gso-bursts",
            "unreached-class",
            "tos-ecn",
            "ipv4-only-classes",
            "redirect-one-protocol",
        ],
    ),
];

#[test]
fn field_fixtures_get_what_the_readme_lists() {
    let files = fixtures("field");
    assert_eq!(files.len(), FIELD.len(), "every field fixture is listed");
    let readme = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/checks/README.md"),
    )
    .unwrap();
    for (name, args, want) in FIELD {
        let r = check(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/field")
                .join(name),
            args,
        );
        let got: Vec<String> = findings(&r)
            .iter()
            .map(|x| x["code"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, *want, "{name}:\n{}", r.stdout);
        // The README's row for the fixture names each code it gets.
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}`")))
            .unwrap_or_else(|| panic!("docs/checks/README.md has no row for {name}"));
        for code in *want {
            assert!(
                row.contains(&format!("`{code}`")),
                "{name}'s row lacks {code}: {row}"
            );
        }
    }
}

/// A LibreQoS-sized policy, 2 devices × 10 000 circuits (mq of two queues, an HTB per queue, a class
/// and a CAKE per circuit): checked in seconds even in a debug build (release: 0.77 s and 134 MB; was
/// 1.8 GB for 2 × 1 000 CAKE circuits before CAKE made its tables on first use), with notes only. A
/// rule that scans the classes for every class would take minutes here.
#[test]
fn a_libreqos_sized_policy_is_checked_in_seconds() {
    let dir = common::TempDir::new("corpus-libreqos");
    let mut b = String::new();
    for dev in ["eth1", "eth2"] {
        b.push_str(&format!("qdisc replace dev {dev} root handle 7fff: mq\n"));
        for q in [1, 2] {
            b.push_str(&format!(
                "qdisc add dev {dev} parent 7fff:{q} handle {q}: htb default 2\n\
                 class add dev {dev} parent {q}: classid {q}:1 htb rate 10gbit ceil 10gbit quantum 59980\n\
                 class add dev {dev} parent {q}:1 classid {q}:2 htb rate 1gbit ceil 9gbit prio 5 quantum 59980\n\
                 qdisc add dev {dev} parent {q}:2 cake diffserv4\n"
            ));
        }
        for c in 0..10_000u32 {
            let (q, minor) = (1 + c % 2, 3 + c / 2);
            b.push_str(&format!(
                "class add dev {dev} parent {q}:1 classid {q}:{minor:x} htb rate 25mbit ceil 100mbit prio 3 quantum 5998\n\
                 qdisc add dev {dev} parent {q}:{minor:x} cake diffserv4\n"
            ));
        }
    }
    let f = dir.path.join("libreqos.batch");
    std::fs::write(&f, b).unwrap();
    let started = std::time::Instant::now();
    let r = check(&f, "--txqueues eth1=2 --txqueues eth2=2");
    let took = started.elapsed();
    eprintln!("2 × 10 000 CAKE circuits: {took:?}");
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Notes only: the classes xdp-cpumap chooses, and 5 000 circuits of 25 Mbit/s guaranteed under a
    // 10 Gbit/s class (oversubscribed, as ISPs do).
    let mut codes: Vec<String> = findings(&r)
        .iter()
        .map(|x| x["code"].as_str().unwrap().to_string())
        .collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes, ["classes-by-priority", "rates-exceed-parent"]);
    assert!(took < Duration::from_secs(60), "{took:?}");
}
