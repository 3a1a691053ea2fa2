//! `tclab sweep` as a user and a cluster run it: the grid's results, outputs independent of the number of
//! threads, points run as separate processes (a Slurm job array, a Kubernetes Indexed Job) merged into
//! the local sweep's very bytes, and bad input refused with nothing written.

mod common;
use std::path::Path;
use std::process::Command;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn scratch(name: &str) -> common::Scratch {
    common::Scratch::new(&format!("sweep-{name}"), "")
}

fn tclab(args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let mut c = Command::new(TCLAB);
    c.args(args)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("tclab runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Every file under `dir` (one level of subdirectories), by relative path.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            for (n, b) in files(&e.path()) {
                v.push((format!("{name}/{n}"), b));
            }
        } else {
            v.push((name, std::fs::read(e.path()).unwrap()));
        }
    }
    v.sort();
    v
}

/// Seed 000's TBF flooded by 9 Mbit/s of UDP (3 of its 30 streams, to keep the test short) for 2 s,
/// over two TBF rates and two delays of the router's far link: four points.
const GRID: &[&str] = &[
    "seed000-tbf",
    "--set",
    "duration=2s",
    "--set",
    "traffic.0.streams=3",
    "--set",
    "policy.router0.rate=180kbit,1mbit",
    "--set",
    "link.1.delay=200us,5ms",
];

fn sweep(extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["sweep"];
    args.extend_from_slice(GRID);
    args.extend_from_slice(extra);
    tclab(&args, &[])
}

/// The CSV as rows of fields, its header first.
fn csv(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("sweep.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn col(rows: &[Vec<String>], name: &str) -> usize {
    rows[0]
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", rows[0]))
}

#[test]
fn the_grid_is_run_point_by_point_and_the_bytes_do_not_depend_on_the_threads() {
    let (one, two) = (scratch("j1"), scratch("j2"));
    let (code, out, err) = sweep(&["--jobs", "1", "--out", one.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = sweep(&["--jobs", "2", "--out", two.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (a, b) = (files(&one), files(&two));
    let names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "sweep.csv",
        "sweep.md",
        "points/point-00000.json",
        "points/point-00003.json",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert_eq!(
        names,
        b.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        "the same files with 1 and 2 threads"
    );
    for ((n, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{n} differs between --jobs 1 and --jobs 2");
    }

    // Rows in point order, the last --set varying fastest.
    let rows = csv(&one);
    let (rate, delay) = (
        col(&rows, "policy.router0.rate"),
        col(&rows, "link.1.delay"),
    );
    let order: Vec<(&str, &str)> = rows[1..]
        .iter()
        .map(|r| (r[rate].as_str(), r[delay].as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("180kbit", "200us"),
            ("180kbit", "5ms"),
            ("1mbit", "200us"),
            ("1mbit", "5ms")
        ]
    );
    // The rewritten tc line took effect: the flood's goodput is the TBF's rate less the headers
    // (1400 B of payload in 1442 B frames: 97 %), within 5 %.
    let goodput = col(&rows, "iperf-udp.goodput_bps");
    for r in &rows[1..] {
        let shaped = if r[rate] == "180kbit" { 180e3 } else { 1e6 };
        let g: f64 = r[goodput].parse().unwrap();
        assert!(
            (g / (shaped * 1400.0 / 1442.0) - 1.0).abs() < 0.05,
            "goodput {g} at rate {}",
            r[rate]
        );
    }
    // The rewritten link delay took effect: 4.8 ms more each way on the far link adds 9.6 ms to
    // every ping's round trip; the queue in front of it differs a little between the runs.
    let p50 = col(&rows, "ping.rtt_p50_ms");
    for pair in rows[1..].chunks(2) {
        let near: f64 = pair[0][p50].parse().unwrap();
        let far: f64 = pair[1][p50].parse().unwrap();
        assert!(far - near > 5.0, "p50 {near} ms at 200us, {far} ms at 5ms");
    }
    // A plot per default metric against each key.
    for stem in [
        "sweep-iperf-udp_goodput_bps-policy_router0_rate",
        "sweep-ping_rtt_p99_ms-link_1_delay",
    ] {
        if names.iter().any(|n| n.ends_with(".svg")) {
            assert!(
                names.contains(&format!("{stem}.svg").as_str()),
                "{stem}.svg"
            );
            assert!(
                names.contains(&format!("{stem}.png").as_str()),
                "{stem}.png"
            );
        }
    }
    // A key given one value is a setting: no chart against it.
    assert!(!names.iter().any(|n| n.contains("-duration.")), "{names:?}");
}

/// The files under `a` and `b` are the same, byte for byte (without the plots unless `plots`).
fn same_files(a: &Path, b: &Path, plots: bool, what: &str) {
    let keep = |(n, _): &(String, Vec<u8>)| plots || !(n.ends_with(".svg") || n.ends_with(".png"));
    let a: Vec<_> = files(a).into_iter().filter(keep).collect();
    let b: Vec<_> = files(b).into_iter().filter(keep).collect();
    assert_eq!(
        a.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        b.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "{what}"
    );
    for ((n, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{what}: {n} differs from the local sweep's");
    }
}

#[test]
fn points_run_as_job_array_tasks_merge_into_the_local_sweeps_bytes() {
    let (local, cluster) = (scratch("local"), scratch("cluster"));
    let (code, _, err) = sweep(&["--out", local.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, count, err) = sweep(&["--points"]);
    assert_eq!((code, count.trim()), (0, "4"), "{err}");
    // Each point its own process, as the scheduler starts them: Slurm's index for two, Kubernetes'
    // for the others.
    for i in 0..4 {
        let var = if i % 2 == 0 {
            "SLURM_ARRAY_TASK_ID"
        } else {
            "JOB_COMPLETION_INDEX"
        };
        let mut args = vec!["sweep"];
        args.extend_from_slice(GRID);
        args.extend_from_slice(&["--point", "env", "--out", cluster.to_str().unwrap()]);
        let (code, out, err) = tclab(&args, &[(var, i.to_string())]);
        assert_eq!(code, 0, "point {i}: {err}");
        assert!(out.contains(&format!("point-{i:05}.json")), "{out}");
    }
    let (code, _, err) = sweep(&["--merge", cluster.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    same_files(&local, &cluster, true, "separate processes");

    // examples/sweep/submit-slurm.sh and sweep.sbatch, under an sbatch that runs each job at once
    // (an array's tasks one after the other, each with its SLURM_ARRAY_TASK_ID). Plots are drawn by
    // the code just checked and cost seconds in a debug build: these merges skip them.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweep");
    let slurm = scratch("slurm");
    let bin = slurm.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        r#"#!/bin/sh
array=
while [ $# -gt 0 ]; do
    case $1 in
        --array=*) array=${1#--array=}; shift ;;
        --*) shift ;;
        *) break ;;
    esac
done
script=$1; shift
if [ -n "$array" ]; then
    i=${array%-*}
    while [ "$i" -le "${array#*-}" ]; do
        SLURM_ARRAY_TASK_ID=$i bash "$script" "$@" >&2 || exit 1
        i=$((i + 1))
    done
    echo 101
else
    bash "$script" "$@" >&2 || exit 1
    echo 102
fi
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = slurm.join("out");
    let o = Command::new("sh")
        .arg(examples.join("submit-slurm.sh"))
        .arg(&out)
        .args(GRID)
        .arg("--no-plots")
        .env("TCLAB", TCLAB)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("job 101 (4 tasks); merge: job 102"), "{said}");
    same_files(&local, &out, false, "submit-slurm.sh");

    // The Kubernetes manifests' commands, run as the Indexed Job's pods and then the merge Job run
    // them (shortened as this test's grid is, the volume a scratch directory).
    let k8s = scratch("k8s");
    let command = |file: &str| -> Vec<String> {
        let yaml = std::fs::read_to_string(examples.join(file)).unwrap();
        let line = yaml
            .lines()
            .find_map(|l| l.trim().strip_prefix("command: "))
            .unwrap_or_else(|| panic!("{file} has a command line"));
        let mut argv: Vec<String> = serde_json::from_str(line).unwrap();
        assert_eq!(&argv[..3], ["tclab", "sweep", "seed000-tbf"], "{file}");
        argv.splice(3..3, GRID[1..5].iter().map(|a| a.to_string()));
        argv.into_iter()
            .skip(1)
            .map(|a| a.replace("/results", k8s.to_str().unwrap()))
            .collect()
    };
    let job = std::fs::read_to_string(examples.join("k8s-indexed-job.yaml")).unwrap();
    assert!(job.contains("completionMode: Indexed") && job.contains("completions: 4"));
    let point = command("k8s-indexed-job.yaml");
    let point: Vec<&str> = point.iter().map(String::as_str).collect();
    for i in 0..4 {
        let (code, _, err) = tclab(&point, &[("JOB_COMPLETION_INDEX", i.to_string())]);
        assert_eq!(code, 0, "pod {i}: {err}");
    }
    let merge = command("k8s-merge-job.yaml");
    let mut merge: Vec<&str> = merge.iter().map(String::as_str).collect();
    merge.push("--no-plots");
    let (code, _, err) = tclab(&merge, &[]);
    assert_eq!(code, 0, "{err}");
    same_files(&local, &k8s, false, "the Kubernetes Jobs");
}

#[test]
fn a_merge_names_missing_duplicate_and_foreign_point_files_and_writes_nothing() {
    let dir = scratch("merge");
    let d = dir.to_str().unwrap();
    for i in ["0", "1", "2"] {
        let (code, _, err) = sweep(&["--point", i, "--out", d]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = sweep(&["--merge", d]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("1 of 4 points missing") && err.contains(": 3"),
        "{err}"
    );
    assert!(!dir.join("sweep.csv").exists());

    let pdir = dir.join("points");
    std::fs::copy(pdir.join("point-00001.json"), pdir.join("copy.json")).unwrap();
    // A point of another sweep: the same scenario, other rates.
    let other = scratch("other");
    let (code, _, err) = tclab(
        &[
            "sweep",
            "seed000-tbf",
            "--set",
            "duration=2s",
            "--set",
            "policy.router0.rate=2mbit,3mbit",
            "--set",
            "link.1.delay=200us,5ms",
            "--point",
            "3",
            "--out",
            other.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    std::fs::copy(
        other.join("points/point-00003.json"),
        pdir.join("point-00003.json"),
    )
    .unwrap();
    let (code, _, err) = sweep(&["--merge", d]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("point 1 again")
            && err.contains("copy.json")
            && err.contains("point-00001.json"),
        "{err}"
    );
    assert!(
        err.contains("point-00003.json: a point of another sweep"),
        "{err}"
    );
    assert!(err.contains("missing") && err.contains(": 3"), "{err}");
    assert!(!dir.join("sweep.csv").exists() && !dir.join("sweep.md").exists());
}

#[test]
fn bad_keys_and_values_name_the_point_and_the_key_and_write_nothing() {
    let dir = scratch("bad");
    let out = dir.join("out");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["lnk.rate=1mbit"],
            &["point 0", "lnk.rate", "unknown key \"lnk\""],
        ),
        (
            &["link.rate=1mbit"],
            &["link.rate", "2 entries", "by index"],
        ),
        (&["link.0.rate="], &["link.0.rate", "empty"]),
        (
            &["link.0.rate=10mbit,fast"],
            &[
                "point 1 (link.0.rate=fast)",
                "link.rate",
                "invalid rate \"fast\"",
            ],
        ),
        (
            &["duration=2s", "policy.router0.rate=1mbit,banana"],
            &[
                "point 1",
                "policy.router0.rate=banana",
                "illegal value for \"rate\"",
            ],
        ),
        (
            &["policy.router0.burst=2k"],
            &[
                "policy.router0.burst",
                "no tc line of router0's policy has burst",
            ],
        ),
        (&["seed=1,two"], &["point 1 (seed=two)", "takes an integer"]),
        // * picks the entries a key applies to; seed 000 has a UDP flood and a ping, no TCP.
        (
            &["traffic.*.ecn=true"],
            &["traffic.*.ecn", "no entry takes ecn"],
        ),
    ];
    for (sets, want) in cases {
        let mut args = vec!["sweep", "seed000-tbf", "--out", o];
        for s in *sets {
            args.extend_from_slice(&["--set", s]);
        }
        let (code, _, err) = tclab(&args, &[]);
        assert_eq!(code, 64, "{sets:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{sets:?}: {w:?} not in {err}");
        }
        assert!(!out.exists(), "{sets:?} wrote {}", out.display());
    }
    // Options that do not fit the grid.
    let options: &[(&[&str], &[&str])] = &[
        (
            &["--metric", "nope"],
            &["--metric nope", "iperf-udp.goodput_bps"],
        ),
        (&["--point", "2"], &["the sweep has 2 points"]),
        (
            &["--point", "env"],
            &["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"],
        ),
        // The merge writes into its own DIR: --out would be ignored.
        (
            &["--merge", "m"],
            &["'--out <DIR>' cannot be used with '--merge <DIR>'"],
        ),
        // --seed would replace the swept seeds: every row the same run under a seed it does not show.
        (
            &["--seed", "3"],
            &["--seed and --set seed", "one or the other"],
        ),
    ];
    for (extra, want) in options {
        let mut args = vec!["sweep", "seed000-tbf", "--set", "seed=1,2", "--out", o];
        args.extend_from_slice(extra);
        let (code, _, err) = tclab(&args, &[]);
        assert_eq!(code, 64, "{extra:?}: {err}");
        for w in *want {
            assert!(err.contains(w), "{extra:?}: {w:?} not in {err}");
        }
        assert!(!out.exists(), "{extra:?} wrote {}", out.display());
    }
}

/// A seed above i64::MAX, which `tclab sim` takes, is past what a TOML integer holds when the sweep
/// rewrites the file: refused naming the file (the message was the TOML error alone, no file).
#[test]
fn a_scenario_the_sweep_cannot_rewrite_is_named() {
    let dir = scratch("u64seed");
    let (_, text, _) = tclab(&["sim", "--show", "seed000-tbf"], &[]);
    let big = text.replace("seed = 1\n", "seed = 18446744073709551615\n");
    assert_ne!(big, text);
    let file = dir.join("big.toml");
    std::fs::write(&file, big).unwrap();
    let out = dir.join("out");
    let args = [
        "sweep",
        file.to_str().unwrap(),
        "--set",
        "duration=1s",
        "--out",
        out.to_str().unwrap(),
    ];
    let (code, _, err) = tclab(&args, &[]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("big.toml: TOML parse error"), "{err}");
    assert!(!out.exists());
}

/// 1 000 values on each of 7 keys: 10^21 points overflowed the count (a panic in a debug build, a
/// wrong count in a release one). Past a million points the sweep is refused: each is checked before
/// any runs, about a millisecond each.
#[test]
fn a_grid_too_large_to_count_or_check_is_refused() {
    let values = (1..=1000)
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let keys = [
        "seed",
        "hz",
        "traffic.0.streams",
        "traffic.0.length",
        "link.0.mtu",
        "link.1.mtu",
        "traffic.1.count",
    ];
    let sets: Vec<String> = keys.iter().map(|k| format!("{k}={values}")).collect();
    for n in [2, 7] {
        let mut args = vec!["sweep", "seed000-tbf", "--points"];
        for s in &sets[..n] {
            args.extend_from_slice(&["--set", s]);
        }
        let (code, out, err) = tclab(&args, &[]);
        if n == 2 {
            assert_eq!((code, out.trim()), (0, "1000000"), "{err}");
        } else {
            assert_eq!(code, 64, "{err}");
            let sizes = ["1000"; 7].join(" × ");
            assert!(
                err.contains(&format!("the grid has {sizes} points, more than 1000000")),
                "{err}"
            );
            assert!(err.contains("split the sweep"), "{err}");
        }
    }
}

/// `traffic.*.cc` is every TCP flow's congestion control: the ping beside them takes no cc and is
/// left alone (it was set there too, and every point refused: "does not apply to ping traffic").
/// `tclab sweep FILE --set SET --no-plots --out OUT`, which must succeed: the table's rows.
fn sweep_one_key(file: &Path, set: &str, out: &Path) -> Vec<Vec<String>> {
    let (code, _, err) = tclab(
        &[
            "sweep",
            file.to_str().unwrap(),
            "--set",
            set,
            "--no-plots",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    csv(out)
}

#[test]
fn a_star_sets_the_entries_the_key_applies_to() {
    let dir = scratch("star");
    let file = dir.join("two-flows.toml");
    std::fs::write(
        &file,
        r#"duration = "1s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a"
b = "b"
rate = "10mbit"
delay = "5ms"
[[traffic]]
name = "ping"
kind = "ping"
from = "a"
to = "b"
interval = "100ms"
[[traffic]]
name = "one"
kind = "tcp"
from = "a"
to = "b"
[[traffic]]
name = "two"
kind = "tcp"
from = "b"
to = "a"
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let rows = sweep_one_key(&file, "traffic.*.cc=reno,bbr", &out);
    assert_eq!(rows.len(), 3, "{rows:?}");
    let c = col(&rows, "one.goodput_bps");
    // Two flows each way of a 10 Mbit/s link for 1 s: each carries something under either cc.
    for r in &rows[1..] {
        let g: f64 = r[c].parse().unwrap();
        assert!(g > 1e6 && g < 10e6, "{r:?}");
    }
    let doc = std::fs::read_to_string(out.join("points/point-00001.json")).unwrap();
    assert!(doc.contains("\"bbr\""), "{doc}");
}

/// A script policy's arguments are swept by index (`policy.0.args.0`): a script that takes its rate as
/// `$1` could not be swept at all ("a key names a value, not an entry of an array").
#[test]
fn a_script_policys_arguments_are_swept_by_index() {
    let dir = scratch("args");
    std::fs::write(
        dir.join("tbf.sh"),
        "#!/bin/sh\ntc qdisc add dev eth0 root tbf rate $1 burst 10k latency 50ms\n",
    )
    .unwrap();
    let file = dir.join("tbf.toml");
    std::fs::write(
        &file,
        r#"duration = "2s"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a"
b = "b"
rate = "100mbit"
[[policy]]
node = "a"
script = "tbf.sh"
args = ["1mbit"]
[[traffic]]
name = "udp"
kind = "udp"
from = "a"
to = "b"
rate = "10mbit"
"#,
    )
    .unwrap();
    let rows = sweep_one_key(&file, "policy.0.args.0=1mbit,2mbit", &dir.join("out"));
    let c = col(&rows, "udp.goodput_bps");
    let g: Vec<f64> = rows[1..].iter().map(|r| r[c].parse().unwrap()).collect();
    // Each point at its own TBF rate: over the 2 s, rate × 2 s plus the 10 KiB bucket, of which the
    // payload is 1448 of each 1490-byte frame (UDP, IP, Ethernet headers).
    for (g, rate) in g.iter().zip([1e6, 2e6]) {
        let want = (rate + 10240.0 * 8.0 / 2.0) * 1448.0 / 1490.0;
        assert!((g / want - 1.0).abs() < 0.01, "{g} against {want}");
    }
}

/// A tc command continued with a backslash is one line: seed 004's `classid 1:20 htb rate 198kbit \`
/// has its `burst 6k prio 2` on the next piece, which `policy.router.1:20.burst` did not find.
#[test]
fn a_continued_tc_line_is_one_line() {
    let dir = scratch("continued");
    let o = dir.join("out");
    let o = o.to_str().unwrap();
    // A value tc refuses shows where the rewrite landed, in the loader's error.
    let base = ["sweep", "seed004-upload-conditioned", "--out", o, "--set"];
    let (code, _, err) = tclab(
        &[&base[..], &["policy.router.1:20.burst=banana"]].concat(),
        &[],
    );
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("classid 1:20 htb rate 198kbit burst banana prio 2: Illegal \"burst\""),
        "{err}"
    );
    // Without a pick, the message lists each command whole, at its first line.
    let (code, _, err) = tclab(&[&base[..], &["policy.router.burst=2k"]].concat(), &[]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("line 5: tc class add dev ppp0 parent 1:1 classid 1:20 htb rate 198kbit burst 6k prio 2;"),
        "{err}"
    );
}

/// An --out that cannot be made stops the sweep before any point runs (a cluster's point too), with
/// exit 64 and the path; a file stands in the way, as root may write a read-only directory.
#[test]
fn an_out_that_cannot_be_written_stops_the_sweep_before_it_runs() {
    let dir = scratch("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let o = file.join("out");
    let o = o.to_str().unwrap();
    for extra in [&[][..], &["--point", "1"][..]] {
        let mut args = vec!["sweep", "seed000-tbf", "--set", "seed=1,2", "--out", o];
        args.extend_from_slice(extra);
        let (code, _, err) = tclab(&args, &[]);
        assert_eq!(code, 64, "{extra:?}: {err}");
        assert!(
            err.contains("--out: cannot create") && err.contains("a-file/out/points"),
            "{extra:?}: {err}"
        );
        assert!(!err.contains("done"), "{extra:?}: a point ran: {err}");
    }
}

/// Two HTB classes both have `rate`: the bare option is ambiguous and refused with both lines; a
/// word of the line (the classid) picks one.
#[test]
fn a_tc_option_on_several_lines_is_refused_until_a_word_picks_one() {
    let dir = scratch("htb");
    let file = dir.join("htb.toml");
    let tbf = tclab(&["sim", "--show", "seed000-tbf"], &[]).1;
    let htb = tbf.replace(
        "qdisc add dev eth1 root tbf rate 180kbit latency 20ms buffer 1540\n",
        "qdisc add dev eth1 root handle 1: htb default 20\n\
         class add dev eth1 parent 1: classid 1:10 htb rate 1mbit\n\
         class add dev eth1 parent 1: classid 1:20 htb rate 500kbit\n",
    );
    assert_ne!(htb, tbf);
    std::fs::write(&file, htb).unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = tclab(
        &["sweep", f, "--set", "policy.router0.rate=1mbit,2mbit"],
        &[],
    );
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("on 2 places")
            && err.contains("classid 1:10 htb rate 1mbit")
            && err.contains("classid 1:20 htb rate 500kbit"),
        "{err}"
    );
    let out = dir.join("out");
    let (code, _, err) = tclab(
        &[
            "sweep",
            f,
            "--set",
            "duration=4s",
            "--set",
            "policy.router0.1:20.rate=250kbit,750kbit",
            "--no-plots",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    // The flood goes to the default class 1:20, whose rate is what was swept (3 s of flood: HTB's
    // default burst, some 1.6 kB, is under 2 % of it).
    let rows = csv(&out);
    let g = col(&rows, "iperf-udp.goodput_bps");
    for (r, rate) in rows[1..].iter().zip([250e3, 750e3]) {
        let got: f64 = r[g].parse().unwrap();
        assert!(
            (got / (rate * 1400.0 / 1442.0) - 1.0).abs() < 0.05,
            "{got} at {rate}"
        );
    }
}

/// Seed 003's bufferbloat as a sweep (docs/SWEEP.md), shortened: 20 s, the ping from 10 s on (at
/// 10 Mbit/s CUBIC has refilled the queue by then, after the losses that ended its slow start), at 100
/// and 10 Mbit/s, four queues. The bands are the seed's: a 1000-packet FIFO at 10 Mbit/s queues the
/// ping for most of a second (the seed: 940 ms; a full queue drains in 1.21 s), 32 packets for tens of
/// milliseconds (the seed: about 50 ms; 32 frames drain in 39 ms), and at 100 Mbit/s for about a tenth
/// of a second (121 ms full). fq_codel and CAKE give the ping a queue of its own: a few milliseconds
/// at most. The upload keeps the link either way.
#[test]
fn seed003_bufferbloat_as_a_sweep_keeps_the_seeds_bands() {
    let dir = scratch("seed003");
    let (code, _, err) = tclab(
        &[
            "sweep",
            "seed003-bufferbloat",
            "--set",
            "duration=20s",
            "--set",
            "traffic.1.start=10s",
            "--set",
            "link.1.rate=100mbit,10mbit",
            "--set",
            "policy.0.tc=qdisc add dev eth1 root pfifo_fast,qdisc add dev eth1 root pfifo limit 32,\
             qdisc add dev eth1 root fq_codel,qdisc add dev eth1 root cake",
            "--no-plots",
            "--out",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let rows = csv(&dir);
    let (rate, tc, p50, goodput) = (
        col(&rows, "link.1.rate"),
        col(&rows, "policy.0.tc"),
        col(&rows, "ping.rtt_p50_ms"),
        col(&rows, "nttcp.goodput_bps"),
    );
    for r in &rows[1..] {
        let queue = r[tc].rsplit(" root ").next().unwrap();
        let ms: f64 = r[p50].parse().unwrap();
        let band = match (r[rate].as_str(), queue) {
            ("10mbit", "pfifo_fast") => 700.0..1250.0,
            ("10mbit", "pfifo limit 32") => 20.0..60.0,
            ("100mbit", "pfifo_fast") => 60.0..130.0,
            ("100mbit", "pfifo limit 32") => 1.0..10.0,
            (_, "fq_codel" | "cake") => 0.0..5.0,
            other => panic!("unexpected point {other:?}"),
        };
        assert!(
            band.contains(&ms),
            "{} {queue}: ping p50 {ms} ms, outside {band:?}",
            r[rate]
        );
        let line = if r[rate] == "10mbit" { 10e6 } else { 100e6 };
        let g: f64 = r[goodput].parse().unwrap();
        assert!(g > 0.9 * line, "{} {queue}: goodput {g}", r[rate]);
    }
}
