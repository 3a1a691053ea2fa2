//! `tclab check` as a policy reviewer (issue 23): correct modern policies pass a CI gate, every
//! finding names its script line, and the mistakes that cut traffic to nothing or leave it unshaped are
//! found — each one's damage measured by running the same policy in the simulator (`tclab_sim`), not
//! asserted.

mod common;
use common::{cmd, run_with_timeout, RunResult, TempDir};
use std::path::Path;
use std::time::Duration;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

/// `tclab check --json EXTRA… FILE` on `policy` written to `name`.
fn check(dir: &TempDir, name: &str, policy: &str, extra: &[&str]) -> RunResult {
    let f = dir.path.join(name);
    std::fs::write(&f, policy).unwrap();
    let path = f.to_string_lossy().into_owned();
    let mut args = vec!["check", "--json"];
    args.extend_from_slice(extra);
    args.push(&path);
    let mut c = cmd(Path::new(TCLAB), &args);
    c.env("TCLAB_STATE", dir.path.join("unused.json"))
        .env_remove("TCLAB_CONTROL");
    run_with_timeout(c, Duration::from_secs(60), -1)
}

fn findings(r: &RunResult) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr));
    v.as_array().unwrap().clone()
}

fn codes(r: &RunResult) -> Vec<String> {
    findings(r)
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// The one finding of `code` (there must be exactly one).
fn the(r: &RunResult, code: &str) -> serde_json::Value {
    let all: Vec<_> = findings(r)
        .into_iter()
        .filter(|f| f["code"] == code)
        .collect();
    assert_eq!(all.len(), 1, "one {code}: {}", r.stdout);
    all[0].clone()
}

/// The script line a finding names: `NAME:LINE` (the file's base name and the line).
fn line_of(f: &serde_json::Value) -> String {
    let l = f["line"].as_str().unwrap_or_else(|| panic!("no line: {f}"));
    let (path, n) = l.rsplit_once(':').unwrap();
    format!("{}:{n}", path.rsplit('/').next().unwrap())
}

fn simulate(text: &str) -> (tclab_sim::scenario::Scenario, Outcome) {
    let mut sc = match load("test.toml", text, Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    (sc, out)
}

/// Mean goodput (bit/s) of traffic entry `flow` over the samples after `from_s` seconds.
fn goodput(out: &Outcome, flow: usize, from_s: u64) -> f64 {
    let s: Vec<f64> = out
        .recorder
        .flow_samples
        .iter()
        .filter(|s| s.flow == flow && s.t > from_s * 1_000_000_000)
        .map(|s| s.goodput_bps)
        .collect();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

/// sqm's simple.qos in spirit, at 95/9.5 Mbit/s on a cable line: HTB + fq_codel each way, explicit
/// quanta and bursts, ingress through an ifb for every protocol, offloads off.
const SQM_LIKE: &str = "#!/bin/sh
ethtool -K eth0 tso off gso off gro off
ip link set dev ifb4eth0 down 2>/dev/null
ip link del ifb4eth0 2>/dev/null
tc qdisc del dev eth0 root 2>/dev/null
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc qdisc add dev eth0 root handle 1: htb default 12
tc class add dev eth0 parent 1: classid 1:1 htb quantum 1514 rate 9500kbit ceil 9500kbit burst 1749b
tc class add dev eth0 parent 1:1 classid 1:11 htb quantum 1514 rate 1000kbit ceil 3000kbit prio 1
tc class add dev eth0 parent 1:1 classid 1:12 htb quantum 1514 rate 2000kbit ceil 9000kbit prio 2
tc qdisc add dev eth0 parent 1:11 handle 110: fq_codel target 5ms interval 100ms
tc qdisc add dev eth0 parent 1:12 handle 120: fq_codel target 5ms interval 100ms
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 1 0xff flowid 1:11
tc filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 protocol 58 0xff flowid 1:11
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 action mirred egress redirect dev ifb4eth0
tc qdisc add dev ifb4eth0 root handle 1: htb default 10
tc class add dev ifb4eth0 parent 1: classid 1:1 htb quantum 1514 rate 95mbit ceil 95mbit burst 11875b
tc class add dev ifb4eth0 parent 1:1 classid 1:10 htb quantum 1514 rate 95mbit ceil 95mbit prio 0
tc qdisc add dev ifb4eth0 parent 1:10 handle 110: fq_codel target 5ms interval 100ms
";

/// Correct policies give nothing above a note, so `check` can gate CI: an sqm-like policy with HTB
/// classes above 16 Mbit/s (whose quantum tc's r2q would clamp), a lone multi-gigabit root class, and
/// a script that takes down what it is about to re-create.
#[test]
fn correct_modern_policies_pass_the_gate() {
    let dir = TempDir::new("review-ok");
    let r = check(
        &dir,
        "sqm.sh",
        SQM_LIKE,
        &["--link", "eth0=10mbit", "--link", "ifb4eth0=100mbit"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    // One note: on a current kernel (4.19 on) `ethtool -K … tso off gso off` no longer keeps the
    // host's own TCP from handing the 9.5 Mbit/s HTB 64 KB GSO packets (checks/gso-bursts.md).
    assert_eq!(codes(&r), vec!["gso-bursts"], "{}", r.stdout);
    let r = check(
        &dir,
        "sqm-4.14.sh",
        SQM_LIKE,
        &[
            "--link",
            "eth0=10mbit",
            "--link",
            "ifb4eth0=100mbit",
            "--kernel",
            "4.14",
        ],
    );
    assert_eq!(codes(&r), Vec::<String>::new(), "{}", r.stdout);
    // A 10 Gbit/s root class: its computed quantum is clamped, and nothing shares by it.
    let r = check(
        &dir,
        "big.batch",
        "qdisc add dev eth0 root handle 1: htb default 1\nclass add dev eth0 parent 1: classid 1:1 htb rate 10gbit\n",
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    // Three leaves above 16 Mbit/s that cannot borrow (ceil = rate): the quantum changes nothing. (Its
    // filters were two catch-alls, the second of which never matched: filter-shadowed.)
    let r = check(
        &dir,
        "flat.batch",
        "qdisc add dev eth0 root handle 1: htb default 30\n\
         class add dev eth0 parent 1: classid 1:1 htb rate 900mbit\n\
         class add dev eth0 parent 1:1 classid 1:10 htb rate 100mbit\n\
         class add dev eth0 parent 1:1 classid 1:20 htb rate 300mbit\n\
         class add dev eth0 parent 1:1 classid 1:30 htb rate 500mbit\n\
         filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff flowid 1:10\n\
         filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip protocol 17 0xff flowid 1:20\n",
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
}

/// Two leaves of 2 and 4 Mbit/s borrowing from a 10 Mbit/s parent, with `r2q 1`: HTB clamps both
/// quanta (250 000 and 500 000 bytes) to 200 000, so they share the 4 Mbit/s left over 1:1 instead of
/// 1:2. check names the pair once; the simulator shows the 2 Mbit/s class taking 4 Mbit/s (2 + 2)
/// where r2q 10 (quanta 25 000 and 50 000) gives it 3.3 (2 + 1.33).
#[test]
fn a_clamped_quantum_is_reported_where_it_changes_the_sharing() {
    let tree = |r2q: u32| {
        format!(
            "qdisc add dev eth0 root handle 1: htb r2q {r2q} default 20\n\
             class add dev eth0 parent 1: classid 1:1 htb rate 10mbit\n\
             class add dev eth0 parent 1:1 classid 1:10 htb rate 2mbit ceil 10mbit\n\
             class add dev eth0 parent 1:1 classid 1:20 htb rate 4mbit ceil 10mbit\n\
             qdisc add dev eth0 parent 1:10 pfifo limit 50\n\
             qdisc add dev eth0 parent 1:20 pfifo limit 50\n\
             filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10\n"
        )
    };
    let dir = TempDir::new("review-quantum");
    let r = check(&dir, "clamped.batch", &tree(1), &[]);
    let f = the(&r, "quantum");
    assert_eq!(line_of(&f), "clamped.batch:3");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("1:10, 1:20") && msg.contains("200000:200000"),
        "{msg}"
    );
    assert!(
        msg.contains("gets 50 %") && msg.contains("ask for 33 %"),
        "{msg}"
    );
    let r = check(&dir, "fine.batch", &tree(10), &[]);
    assert!(!codes(&r).contains(&"quantum".to_string()), "{}", r.stdout);
    // The damage: 1:10's rate with r2q 1 and with r2q 10, each class offered 10 Mbit/s of UDP.
    let rate_of_1_10 = |r2q: u32| {
        let text = format!(
            "duration = \"12s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
             [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"100mbit\"\n\
             [[policy]]\nnode = \"s\"\ntc = \"\"\"\n{}\"\"\"\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"c\"\nrate = \"10mbit\"\nport = 5001\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"c\"\nrate = \"10mbit\"\nport = 5002\n",
            tree(r2q)
        );
        let (_, out) = simulate(&text);
        (goodput(&out, 0, 2), goodput(&out, 1, 2))
    };
    let (a1, b1) = rate_of_1_10(1);
    let (a10, b10) = rate_of_1_10(10);
    eprintln!("r2q 1: 1:10 {a1:.0} 1:20 {b1:.0}; r2q 10: 1:10 {a10:.0} 1:20 {b10:.0} bit/s");
    // UDP payload of 1472 in a 1514-byte frame: 10 Mbit/s of frames is 9.72 of payload.
    assert!(
        a1 / (a1 + b1) > 0.37,
        "clamped: 1:10 gets {a1:.0} of {:.0}",
        a1 + b1
    );
    assert!(
        a10 / (a10 + b10) < 0.36,
        "r2q 10: 1:10 gets {a10:.0} of {:.0}",
        a10 + b10
    );
}

/// A refused root qdisc, and every command that needed it, is one finding naming their lines; a
/// teardown of what is not there yet is none.
#[test]
fn one_finding_per_cause_and_no_teardown_errors() {
    let dir = TempDir::new("review-cascade");
    let r = check(
        &dir,
        "cascade.sh",
        "#!/bin/sh\n\
         ip link set dev ifb0 down\n\
         ifconfig ifb1 down\n\
         tc qdisc add dev eth0 root handle 1: htb default 30 r2q\n\
         tc class add dev eth0 parent 1: classid 1:1 htb rate 10mbit\n\
         tc class add dev eth0 parent 1:1 classid 1:10 htb rate 5mbit\n\
         tc class add dev eth0 parent 1:1 classid 1:30 htb rate 5mbit\n\
         tc qdisc add dev eth0 parent 1:10 fq_codel\n\
         tc qdisc add dev eth0 parent 1:30 fq_codel\n\
         tc class add dev eth0 parent 1:1 classid 1:40 htb rate 5mbiit\n",
        &[],
    );
    let refused: Vec<_> = findings(&r)
        .into_iter()
        .filter(|f| f["code"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{}", r.stdout);
    assert_eq!(line_of(&refused[0]), "cascade.sh:4");
    assert!(
        refused[0]["message"]
            .as_str()
            .unwrap()
            .contains("5 later commands that depend on it are refused too (lines 5, 6, 7, 8, 9)"),
        "{}",
        r.stdout
    );
    assert_eq!(line_of(&refused[1]), "cascade.sh:10");
    assert_eq!(codes(&r), ["refused", "refused"], "{}", r.stdout);
}

/// The interface: no file and no store is a usage error; bash's own message and line for a script it
/// cannot parse; `--txqueues` makes the multiqueue devices LibreQoS's mq needs.
#[test]
fn interface_usage_bash_errors_and_txqueues() {
    let dir = TempDir::new("review-cli");
    let mut c = cmd(Path::new(TCLAB), &["check"]);
    c.env("TCLAB_STATE", dir.path.join("none.json"))
        .env_remove("TCLAB_CONTROL");
    let r = run_with_timeout(c, Duration::from_secs(30), -1);
    assert_eq!(r.code, 64, "{r:?}");
    assert!(r.stderr.contains("no policy to read"), "{}", r.stderr);
    let r = check(
        &dir,
        "syntax.sh",
        "#!/bin/sh\ntc qdisc add dev eth0 root fq_codel\nif true; then\n  :\nfi fi\n",
        &[],
    );
    let f = the(&r, "script-failed");
    assert_eq!(line_of(&f), "syntax.sh:5");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("bash: syntax error near unexpected token"),
        "{f}"
    );
    let libreqos = format!(
        "{}/tests/fixtures/field/libreqos.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["check", "--json"];
        args.extend_from_slice(extra);
        args.push(&libreqos);
        let mut c = cmd(Path::new(TCLAB), &args);
        c.env_remove("TCLAB_CONTROL");
        run_with_timeout(c, Duration::from_secs(60), -1)
    };
    let r = run(&[]);
    assert!(codes(&r).contains(&"refused".to_string()), "{}", r.stdout);
    assert!(r.stdout.contains("--txqueues"), "{}", r.stdout);
    let r = run(&["--txqueues", "eth1=2", "--txqueues", "eth2=2"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // Notes only: the classes xdp-cpumap chooses, and the 1 Mbit/s circuit's fq_codel target.
    let mut got = codes(&r);
    got.sort();
    assert_eq!(
        got,
        [
            "aqm-target-short",
            "classes-by-priority",
            "classes-by-priority"
        ],
        "{}",
        r.stdout
    );
    for bad in ["eth1", "eth1=0", "=2"] {
        let mut c = cmd(Path::new(TCLAB), &["check", "--txqueues", bad, &libreqos]);
        c.env_remove("TCLAB_CONTROL");
        let r = run_with_timeout(c, Duration::from_secs(30), -1);
        assert_eq!(r.code, 64, "{bad}: {r:?}");
    }
    // A store's devices carry their transmit queues (`link add … numtxqueues 2` is one of its records):
    // an mq policy made there is checked as it is, and --txqueues, for scripts, is refused with it.
    let store = dir.path.join("mq-store");
    let tclab = |args: &[&str]| {
        let mut c = cmd(Path::new(TCLAB), args);
        c.env("TCLAB_STATE", &store)
            .env("TCLAB_SERVE", "off")
            .env_remove("TCLAB_CONTROL");
        run_with_timeout(c, Duration::from_secs(30), -1)
    };
    for line in [
        "link add dev eth1 numtxqueues 2",
        "tc qdisc add dev eth1 root handle 1: mq",
        "tc qdisc add dev eth1 parent 1:1 handle 10: fq_codel",
        "tc qdisc add dev eth1 parent 1:2 handle 20: fq_codel",
    ] {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(tclab(&words).code, 0, "{line}");
    }
    let r = tclab(&["check"]);
    assert_eq!(
        (r.code, r.stdout.trim()),
        (0, "0 errors, 0 warnings, 0 notes"),
        "{r:?}"
    );
    let r = tclab(&["check", "--txqueues", "eth1=2"]);
    assert_eq!(r.code, 64, "{r:?}");
    assert!(
        r.stderr
            .contains("is a store: its devices are already made"),
        "{}",
        r.stderr
    );
}

/// mininet's TCLink with `enable_red` puts its netem at `parent 6:` under RED: `red_find` answers for
/// any minor, so Linux accepts it (and tclab did not).
#[test]
fn a_child_at_parent_major_under_red_applies() {
    let dir = TempDir::new("review-red");
    let r = check(
        &dir,
        "mininet-red.sh",
        "#!/bin/sh\n\
         tc qdisc add dev s1-eth1 root handle 5:0 htb default 1\n\
         tc class add dev s1-eth1 parent 5:0 classid 5:1 htb rate 10mbit burst 15k\n\
         tc qdisc add dev s1-eth1 parent 5:1 handle 6: red limit 1000000 min 30000 max 35000 avpkt 1500 burst 20 bandwidth 10mbit probability 1 ecn\n\
         tc qdisc add dev s1-eth1  parent 6:  handle 10: netem delay 5ms\n",
        &[],
    );
    assert!(!codes(&r).contains(&"refused".to_string()), "{}", r.stdout);
}

/// `explain --link DEV=RATE` takes a line per device, as `check` does.
#[test]
fn explain_takes_a_line_per_device() {
    let dir = TempDir::new("review-explain");
    let f = dir.path.join("two.batch");
    std::fs::write(
        &f,
        "qdisc add dev eth0 root handle 1: htb default 10\n\
         class add dev eth0 parent 1: classid 1:10 htb rate 1mbit\n\
         qdisc add dev eth1 root handle 1: drr\n\
         class add dev eth1 parent 1: classid 1:10 drr\n",
    )
    .unwrap();
    let path = f.to_string_lossy().into_owned();
    let mut c = cmd(
        Path::new(TCLAB),
        &["explain", "--link", "eth1=5mbit", "--dev", "eth1", &path],
    );
    c.env_remove("TCLAB_CONTROL");
    let r = run_with_timeout(c, Duration::from_secs(60), -1);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("link 5.00 Mbit/s (--link)"),
        "{}",
        r.stdout
    );
    let mut c = cmd(
        Path::new(TCLAB),
        &["explain", "--link", "eth9=5mbit", &path],
    );
    c.env_remove("TCLAB_CONTROL");
    let r = run_with_timeout(c, Duration::from_secs(60), -1);
    assert_eq!(r.code, 64, "{r:?}");
}

/// A two-node lab: s --(10 Mbit/s, 10 ms each way)-- c, one TCP transfer from s to c for `secs`, and
/// the policy `tc` (tc and `ip link` lines) on `node`.
fn download(node: &str, tc: &str, secs: u32) -> String {
    format!(
        "duration = \"{secs}s\"\nsample = \"500ms\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
         [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"10ms\"\n\
         [[policy]]\nnode = \"{node}\"\ntc = \"\"\"\n{tc}\"\"\"\n\
         [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\n"
    )
}

/// The policy lines of a `#!/bin/sh` script, as a scenario's `tc` block takes them.
fn lines(script: &str) -> String {
    script
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim_start_matches("tc ").to_string() + "\n")
        .collect()
}

const IFB_DOWN: &str = "#!/bin/sh
ip link add ifb0 type ifb
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0
tc qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms
";

/// An ifb never set up: the redirect drops everything. check names the filter's line and the ifb's;
/// simulated, the download delivers nothing, and 2 Mbit/s once the ifb is up.
#[test]
fn a_redirect_to_a_down_ifb_is_an_error_and_delivers_nothing() {
    let dir = TempDir::new("review-ifb-down");
    let r = check(&dir, "down.sh", IFB_DOWN, &[]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    let f = the(&r, "ifb-down");
    assert_eq!(line_of(&f), "down.sh:4");
    assert_eq!(f["at"], "eth0 filter parent ffff: pref 49152");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("down.sh:2, never set up"),
        "{f}"
    );
    let up = IFB_DOWN.replace(
        "ip link add ifb0 type ifb\n",
        "ip link add ifb0 type ifb\nip link set dev ifb0 up\n",
    );
    let r = check(&dir, "up.sh", &up, &[]);
    assert_eq!(codes(&r), Vec::<String>::new(), "{}", r.stdout);
    let (_, out) = simulate(&download("c", &lines(IFB_DOWN), 10));
    assert_eq!(
        out.flows[0].delivered_bytes, 0,
        "nothing arrives through a down ifb"
    );
    let (_, out) = simulate(&download("c", &lines(&up), 10));
    let g = goodput(&out, 0, 4);
    assert!(
        (g - 2e6 * 1448.0 / 1514.0).abs() < 0.05e6,
        "up: {g:.0} bit/s"
    );
}

/// The shaper on ifb0, the redirect to ifb1: the download runs at the line's rate.
#[test]
fn a_shaper_on_another_ifb_than_the_redirects_leaves_the_download_unshaped() {
    let script = "#!/bin/sh
ip link add ifb0 type ifb
ip link add ifb1 type ifb
ip link set dev ifb0 up
ip link set dev ifb1 up
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb1
tc qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms
";
    let dir = TempDir::new("review-ifb-unfed");
    let r = check(&dir, "other.sh", script, &[]);
    let f = the(&r, "ifb-unfed");
    assert_eq!(line_of(&f), "other.sh:8");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("redirects to ifb1 instead") && msg.contains("other.sh:7"),
        "{msg}"
    );
    assert_eq!(codes(&r), ["ifb-unfed"], "{}", r.stdout);
    let (_, out) = simulate(&download("c", &lines(script), 10));
    let g = goodput(&out, 0, 4);
    // The 10 Mbit/s line's payload rate, 9.56 Mbit/s, not the shaper's 1.91.
    assert!(g > 9.0e6, "unshaped: {g:.0} bit/s");
    // A mirror instead of a redirect: the same, named so.
    let mirror = "#!/bin/sh
ip link add ifb0 type ifb
ip link set dev ifb0 up
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress mirror dev ifb0
tc qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms
";
    let r = check(&dir, "mirror.sh", mirror, &[]);
    let f = the(&r, "ifb-unfed");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("only mirrors copies"),
        "{f}"
    );
    let (_, out) = simulate(&download("c", &lines(mirror), 10));
    assert!(goodput(&out, 0, 4) > 9.0e6);
}

/// `protocol ip` on the redirect: IPv6 bypasses the ifb. The simulator's hosts speak IPv4 only, so the
/// damage is measured on the path `tclab live` runs — the same engine, ingress hook, ifb and
/// `qdisc_run`, driven by a clock the test chooses (`Bridge::detached`): 8 Mbit/s of IPv4 and 8 Mbit/s
/// of IPv6 arrive on eth0 for 2 s. Behind the IPv4-only redirect the ifb's 2 Mbit/s TBF holds IPv4 to
/// its rate while every IPv6 frame leaves; with `protocol all` both families share the 2 Mbit/s.
/// (Rates are counted over IP bytes; the TBF charges the link header mirred pushes back, 14 of 1 000
/// bytes, and the first 10 KB of burst: 2.01 Mbit/s.)
/// The ingress hook itself is checked too: an IPv6 packet is not redirected, and goes on unshaped.
#[test]
fn an_ipv4_only_redirect_lets_ipv6_bypass_the_shaper() {
    let script = "#!/bin/sh
ip link add ifb0 type ifb
ip link set dev ifb0 up
tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol ip u32 match u32 0 0 action mirred egress redirect dev ifb0
tc qdisc add dev ifb0 root tbf rate 2mbit burst 10k latency 50ms
";
    let dir = TempDir::new("review-ipv6");
    let r = check(&dir, "v4.sh", script, &[]);
    let f = the(&r, "redirect-one-protocol");
    assert_eq!(line_of(&f), "v4.sh:5");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("IPv6 packets arriving on eth0 skip"),
        "{f}"
    );
    let all = script.replace("protocol ip u32", "protocol all u32");
    assert_eq!(
        codes(&check(&dir, "all.sh", &all, &[])),
        Vec::<String>::new()
    );
    for (policy, v6_redirected) in [(script.to_string(), false), (all, true)] {
        let (mut sc, _) = simulate(&download("c", &lines(&policy), 1));
        let c = sc.net.node_by_name("c").unwrap();
        let eth0 = sc.net.nodes[c].engine.device_mut("eth0").unwrap();
        let v4 = tclab_core::Packet::udp4([10, 0, 1, 1], 5000, [10, 0, 1, 2], 5001, 0, 1000);
        // An IPv6/UDP packet: version 6, payload length, next header 17, hop limit 64, addresses.
        let mut data = vec![0x60, 0, 0, 0, 0x03, 0xb6, 17, 64];
        data.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain([0u8; 12].iter()));
        data.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain([1u8; 12].iter()));
        data.extend([0x13, 0x88, 0x13, 0x89, 0x03, 0xb6, 0, 0]);
        let v6 = tclab_core::Packet {
            data,
            len: 1000,
            protocol: 0x86dd,
            ..Default::default()
        };
        for (pkt, want) in [(v4, true), (v6, v6_redirected)] {
            let mut cx = tclab_core::qdisc::Cx::new(0);
            let back = eth0.receive(pkt.clone(), &mut cx);
            let redirected = cx.mirred.take();
            assert_eq!(
                !redirected.is_empty(),
                want,
                "protocol 0x{:04x}: redirected {}",
                pkt.protocol,
                redirected.len()
            );
            assert_eq!(
                back.is_none(),
                want,
                "what is not redirected goes on, unshaped"
            );
        }
        let (v4_bps, v6_bps) = bridged_rates(&policy);
        if v6_redirected {
            let sum = v4_bps + v6_bps;
            assert!(
                (sum / 2e6 - 1.0).abs() < 0.05,
                "protocol all: both families share the ifb's 2 Mbit/s ({v4_bps} + {v6_bps} bit/s)"
            );
        } else {
            assert!(
                (v4_bps / 2e6 - 1.0).abs() < 0.05,
                "IPv4 through the ifb at its 2 Mbit/s: {v4_bps} bit/s"
            );
            // 2 000 frames of 986 IP bytes in 2 s: every one offered leaves, at 7.888 Mbit/s.
            assert_eq!(
                v6_bps, 7_888_000.0,
                "IPv6 bypasses the shaper: every frame offered leaves"
            );
        }
    }
}

/// The policy lines of a script, applied to an engine with devices eth0 and eth1 (`ip link` lines as
/// the store's records, `tc` lines as tc's words).
fn bridge_engine(script: &str) -> tclab_core::Engine {
    let mut e = tclab_core::Engine::new();
    e.add_device("eth0", 1500, 1000);
    e.add_device("eth1", 1500, 1000);
    for l in script
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let words: Vec<String> = l.split_whitespace().skip(1).map(String::from).collect();
        if l.starts_with("ip ") {
            tclab_tc::store::apply_record(&mut e, &words).unwrap_or_else(|m| panic!("{l}: {m}"));
        } else {
            let out = tclab_tc::run(&mut e, &words, 0);
            assert_eq!(out.code, 0, "{l}: {}", out.stderr);
        }
    }
    e
}

/// An Ethernet frame of 1 000 bytes carrying UDP over IPv4 (`v6` false) or IPv6.
fn udp_frame(v6: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    if v6 {
        // Version 6, payload length 946, next header UDP, hop limit 64, 2001:db8::/32 addresses.
        f.extend([0x86, 0xdd, 0x60, 0, 0, 0, 0x03, 0xb2, 17, 64]);
        f.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain([0u8; 12].iter()));
        f.extend([0x20, 0x01, 0x0d, 0xb8].iter().chain([1u8; 12].iter()));
        f.extend([0x13, 0x88, 0x13, 0x89, 0x03, 0xb2, 0, 0]);
    } else {
        f.extend([0x08, 0x00, 0x45, 0, 0x03, 0xd6, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend([
            10, 0, 1, 2, 10, 0, 1, 1, 0x13, 0x88, 0x13, 0x89, 0x03, 0xc2, 0, 0,
        ]);
    }
    f.resize(1000, 0xab);
    f
}

/// Through a detached live bridge with `script`'s policy: a 1 000-byte IPv4 frame and an IPv6 one
/// arrive on eth0 every millisecond for 2 s (8 Mbit/s each); the bit rates of each family that leave
/// eth1, counted over the IP packets (the link header is not charged by the qdiscs either).
fn bridged_rates(script: &str) -> (f64, f64) {
    let mut b = tclab_live::bridge::Bridge::detached(
        bridge_engine(script),
        [("eth0", 1500), ("eth1", 1500)],
    );
    let (v4, v6) = (udp_frame(false), udp_frame(true));
    let mut bits = [0u64; 2];
    let mut count = |frames: Vec<Vec<u8>>| {
        for f in frames {
            let family = usize::from(f[12..14] == [0x86, 0xdd]);
            bits[family] += (f.len() as u64 - 14) * 8;
        }
    };
    const MS: u64 = 1_000_000;
    for t in 0..2_000u64 {
        b.poll(t * MS);
        b.arrive(t * MS, 0, &v4, false);
        b.arrive(t * MS, 0, &v6, false);
        count(b.take_sent(1));
    }
    // Only what left within the 2 s counts (the TBF still holds what arrived late).
    b.poll(2_000 * MS - 1);
    count(b.take_sent(1));
    (bits[0] as f64 / 2.0, bits[1] as f64 / 2.0)
}

/// Bucket sizes, each simulated: a TBF burst of 1000 bytes passes no full-size segment; a TBF queue of
/// one frame holds TCP far below the rate; a policer's burst below a frame passes nothing, and one of
/// 20 MB does not act within a 10 s test.
#[test]
fn bucket_sizes_that_stop_traffic_or_never_act() {
    let dir = TempDir::new("review-buckets");
    // TBF burst 1000 bytes on the sender.
    let tbf = |opts: &str| format!("qdisc add dev eth0 root tbf rate 2mbit {opts}\n");
    let r = check(&dir, "small.batch", &tbf("burst 1000 latency 50ms"), &[]);
    let f = the(&r, "bucket-below-packet");
    assert_eq!(line_of(&f), "small.batch:1");
    assert_eq!(r.code, 2);
    let (_, out) = simulate(&download("s", &tbf("burst 1000 latency 50ms"), 10));
    assert_eq!(
        out.flows[0].delivered_bytes, 0,
        "no full-size segment passes"
    );
    let (_, out) = simulate(&download("s", &tbf("burst 3000 latency 50ms"), 10));
    assert!(goodput(&out, 0, 4) > 1.8e6);
    // TBF limit of one frame, against tc's latency 50 ms.
    let q = |opts: &str| format!("qdisc add dev eth0 root tbf rate 8mbit burst 10k {opts}\n");
    let r = check(&dir, "short.batch", &q("limit 1600"), &[]);
    assert_eq!(line_of(&the(&r, "tbf-limit-short")), "short.batch:1");
    assert!(!codes(&check(&dir, "ok.batch", &q("latency 50ms"), &[]))
        .contains(&"tbf-limit-short".to_string()));
    let (_, out) = simulate(&download("s", &q("limit 1600"), 20));
    let short = goodput(&out, 0, 5);
    let (_, out) = simulate(&download("s", &q("latency 50ms"), 20));
    let full = goodput(&out, 0, 5);
    eprintln!("TBF 8 Mbit/s: limit 1600 {short:.0}, latency 50ms {full:.0} bit/s");
    assert!(
        full > 7.3e6 && short < 0.8 * full,
        "limit 1600 {short:.0}, latency 50ms {full:.0}"
    );
    // Ingress policers on the receiver.
    let police = |burst: &str| {
        format!(
            "qdisc add dev eth0 handle ffff: ingress\n\
             filter add dev eth0 parent ffff: protocol all u32 match u32 0 0 police rate 1mbit burst {burst} drop flowid :1\n"
        )
    };
    let r = check(&dir, "p-small.batch", &police("1000"), &[]);
    let f = the(&r, "bucket-below-packet");
    assert_eq!(line_of(&f), "p-small.batch:2");
    assert_eq!(f["at"], "eth0 filter parent ffff: pref 49152");
    let (_, out) = simulate(&download("c", &police("1000"), 10));
    assert_eq!(
        out.flows[0].delivered_bytes, 0,
        "a full-size segment never conforms"
    );
    // 20 MB: 168 s of the rate, within the 2^32 ticks tc_calc_xmittime keeps (100 MB would wrap, as tc
    // wraps it, to a 1.8 MB bucket).
    let r = check(&dir, "p-huge.batch", &police("20mb"), &[]);
    assert_eq!(line_of(&the(&r, "bucket-too-large")), "p-huge.batch:2");
    let (_, out) = simulate(&download("c", &police("20mb"), 10));
    let g = out.flows[0].goodput_bps;
    assert!(
        g > 8e6,
        "a 20 MB bucket at 1 Mbit/s lets a 10 s download run at {g:.0} bit/s"
    );
    let (_, out) = simulate(&download("c", &police("20k"), 10));
    assert!(out.flows[0].goodput_bps < 1.1e6);
}

/// `--hz`: a class with tc's default burst at 100 Mbit/s is one tick short at HZ 250 (50 000 bytes a
/// tick); without `--hz` tc's choice is not judged.
#[test]
fn hz_judges_default_bursts_too() {
    let dir = TempDir::new("review-hz");
    let p = "qdisc add dev eth0 root handle 1: htb default 10\nclass add dev eth0 parent 1: classid 1:10 htb rate 100mbit\n";
    assert!(!codes(&check(&dir, "a.batch", p, &[])).contains(&"burst-below-tick".to_string()));
    let r = check(&dir, "b.batch", p, &["--hz", "250"]);
    let f = the(&r, "burst-below-tick");
    assert_eq!(line_of(&f), "b.batch:2");
    assert!(
        f["message"].as_str().unwrap().contains("(tc's default)"),
        "{f}"
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("250 Hz timer (50000 bytes)"),
        "{f}"
    );
}

/// `--kernel`: CAKE is refused by 4.4, fq_codel's memory_limit silently dropped by it; CBQ is gone
/// from 6.3 on (a warning without `--kernel`, nothing for a kernel that has it).
#[test]
fn kernel_compatibility() {
    let dir = TempDir::new("review-kernel");
    let p = "qdisc add dev eth0 root cake bandwidth 10mbit\nqdisc add dev eth1 root fq_codel memory_limit 4mb\n";
    let r = check(&dir, "new.batch", p, &["--kernel", "4.4"]);
    let lacks: Vec<_> = findings(&r)
        .into_iter()
        .filter(|f| f["code"] == "kernel-lacks")
        .collect();
    assert_eq!(lacks.len(), 2, "{}", r.stdout);
    assert_eq!(line_of(&lacks[0]), "new.batch:1");
    assert!(lacks[1]["message"]
        .as_str()
        .unwrap()
        .contains("`memory_limit` came with Linux 4.7"));
    assert_eq!(check(&dir, "new2.batch", p, &["--kernel", "5.10"]).code, 0);
    // clsact came with 4.5 (commit 1f211a1b929c, 2016), netem's `slot` with 4.19 (836af83b54e3).
    let p2 = "qdisc add dev eth0 clsact\nqdisc add dev eth1 root netem delay 10ms slot 1ms 2ms\n";
    let msgs: Vec<String> = findings(&check(&dir, "newer.batch", p2, &["--kernel", "4.4"]))
        .into_iter()
        .filter(|f| f["code"] == "kernel-lacks")
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs[0].contains("clsact came with Linux 4.5"), "{msgs:?}");
    assert!(msgs[1].contains("`slot` came with Linux 4.19"), "{msgs:?}");
    assert_eq!(
        check(&dir, "newer2.batch", p2, &["--kernel", "4.19"]).code,
        0
    );
    let cbq = "qdisc add dev eth0 root handle 1: cbq avpkt 1000 bandwidth 10mbit\n";
    assert_eq!(codes(&check(&dir, "cbq.batch", cbq, &[])), ["kind-removed"]);
    assert_eq!(
        codes(&check(&dir, "cbq2.batch", cbq, &["--kernel", "6.6"])),
        ["kernel-lacks"]
    );
    assert_eq!(
        codes(&check(&dir, "cbq3.batch", cbq, &["--kernel", "5.10"])),
        Vec::<String>::new()
    );
}

/// Bytes class `classid` of device `dev` on node `node` sent in the run.
fn class_bytes(sc: &tclab_sim::scenario::Scenario, node: &str, dev: &str, classid: &str) -> u64 {
    let n = sc.net.node_by_name(node).unwrap();
    let d = sc.net.nodes[n].engine.device(dev).unwrap();
    d.classes(0)
        .iter()
        .find(|c| c.classid.to_string() == classid)
        .unwrap_or_else(|| panic!("no class {classid}"))
        .stats
        .bytes
}

/// An HTB sender with an interactive class 1:10 and a bulk default 1:20, the filter line `filter`, and
/// one TCP transfer to port `port` (ECN negotiated when `ecn`, TOS `tos`).
fn classified(filter: &str, port: u16, tos: u8, ecn: bool) -> String {
    format!(
        "duration = \"6s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
         [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
         [[policy]]\nnode = \"s\"\ntc = \"\"\"\n\
         qdisc add dev eth0 root handle 1: htb default 20\n\
         class add dev eth0 parent 1: classid 1:1 htb rate 8mbit\n\
         class add dev eth0 parent 1:1 classid 1:10 htb rate 2mbit ceil 8mbit prio 1\n\
         class add dev eth0 parent 1:1 classid 1:20 htb rate 6mbit ceil 8mbit prio 2\n\
         qdisc add dev eth0 parent 1:10 fq_codel\n\
         qdisc add dev eth0 parent 1:20 fq_codel\n\
         {filter}\n\"\"\"\n\
         [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\nport = {port}\ntos = {tos}\necn = {ecn}\n"
    )
}

/// The body of a scenario's `tc` block as a batch file for check.
fn batch_of(scenario: &str) -> String {
    let start = scenario.find("tc = \"\"\"\n").unwrap() + 9;
    let end = scenario[start..].find("\"\"\"").unwrap() + start;
    scenario[start..end].to_string()
}

/// Filters: a flowid of a class that does not exist (its packets land in the default, which check
/// names), a TOS match that takes in the ECN bits (an ECN-capable connection's packets miss it), an
/// IPv6 field under `protocol ip` (it reads TCP's header instead), a raw `at 20` read as the
/// destination port: each measured by where the transfer's bytes went.
#[test]
fn filters_that_send_traffic_elsewhere() {
    let dir = TempDir::new("review-filters");
    // flowid 1:11 for 1:10.
    let sc_text = classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:11",
        22,
        0,
        false,
    );
    let r = check(&dir, "typo.batch", &batch_of(&sc_text), &[]);
    let f = the(&r, "filter-class-missing");
    assert_eq!(line_of(&f), "typo.batch:7");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("class 1:11") && msg.contains("to the default class 1:20"),
        "{msg}"
    );
    let (sc, _) = simulate(&sc_text);
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
    // TOS 0x10 with mask 0xff, an ECN-capable transfer with TOS 0x10 (its data carries 0x12).
    let tos = |mask: &str| {
        classified(
            &format!("filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip tos 0x10 {mask} flowid 1:10"),
            5001,
            0x10,
            true,
        )
    };
    let r = check(&dir, "tos.batch", &batch_of(&tos("0xff")), &[]);
    let f = the(&r, "tos-ecn");
    assert_eq!(line_of(&f), "tos.batch:7");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("ECT(0) there (0x12)"),
        "{f}"
    );
    assert!(
        !codes(&check(&dir, "dscp.batch", &batch_of(&tos("0xfc")), &[]))
            .contains(&"tos-ecn".to_string())
    );
    let (sc, _) = simulate(&tos("0xff"));
    let (in_10, in_20) = (
        class_bytes(&sc, "s", "eth0", "1:10"),
        class_bytes(&sc, "s", "eth0", "1:20"),
    );
    eprintln!("tos 0x10/0xff with ECN: 1:10 {in_10} bytes, 1:20 {in_20}");
    // Only the handshake (no ECT on a SYN) and pure ACKs: the data all went to the bulk class.
    assert!(
        in_10 < 2_000 && in_20 > 1_000_000,
        "1:10 {in_10}, 1:20 {in_20}"
    );
    let (sc, _) = simulate(&tos("0xfc"));
    assert!(class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000);
    // `match ip6 dport 22` under `protocol ip`: offset 42, inside TCP's header.
    let fam = classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip6 dport 22 0xffff flowid 1:10",
        22,
        0,
        false,
    );
    let r = check(&dir, "fam.batch", &batch_of(&fam), &[]);
    let f = the(&r, "filter-family");
    assert_eq!(line_of(&f), "fam.batch:7");
    let (sc, _) = simulate(&fam);
    assert!(
        class_bytes(&sc, "s", "eth0", "1:10") < 10_000,
        "SSH is not in 1:10"
    );
    // `match u16 22 0xffff at 20` (the source port) where `ip dport 22` is written elsewhere.
    let raw = classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u16 22 0xffff at 20 flowid 1:10\n\
         filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:20",
        22,
        0,
        false,
    );
    let r = check(&dir, "raw.batch", &batch_of(&raw), &[]);
    let f = the(&r, "u32-offset");
    assert_eq!(line_of(&f), "raw.batch:7");
    let (sc, _) = simulate(&raw);
    assert_eq!(
        class_bytes(&sc, "s", "eth0", "1:10"),
        0,
        "the upload to port 22 misses `at 20`"
    );
    // The same slip in a 32-bit key, and not where the policy names port 22 as a source by name too
    // (a policy for both directions).
    let wide = raw.replace(
        "match u16 22 0xffff at 20",
        "match u32 0x00160000 0xffff0000 at 20",
    );
    let f = the(
        &check(&dir, "wide.batch", &batch_of(&wide), &[]),
        "u32-offset",
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("reads the source port"),
        "{f}"
    );
    let both = raw.replace(
        "flowid 1:20",
        "flowid 1:20\nfilter add dev eth0 parent 1: protocol ip prio 3 u32 match ip sport 22 0xffff flowid 1:20",
    );
    assert!(!codes(&check(&dir, "both.batch", &batch_of(&both), &[]))
        .contains(&"u32-offset".to_string()));
    // On addresses: c (10.0.1.2) read at 12, the source address, where `ip dst 10.0.1.2/32` is written:
    // the upload to c misses 1:10; at 16, the destination, it lands there.
    let addr = |off: u32| {
        classified(
            &format!(
                "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u32 0x0a000102 0xffffffff at {off} flowid 1:10\n\
                 filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.0.1.2/32 flowid 1:20"
            ),
            5001,
            0,
            false,
        )
    };
    let r = check(&dir, "addr.batch", &batch_of(&addr(12)), &[]);
    let f = the(&r, "u32-offset");
    assert_eq!(line_of(&f), "addr.batch:7");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("reads the source address") && msg.contains("names 10.0.1.2 as a destination"),
        "{msg}"
    );
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains("`match ip dst 10.0.1.2` (offset 16)"),
        "{f}"
    );
    assert!(
        !codes(&check(&dir, "addr16.batch", &batch_of(&addr(16)), &[]))
            .contains(&"u32-offset".to_string())
    );
    let (sc, _) = simulate(&addr(12));
    assert_eq!(
        class_bytes(&sc, "s", "eth0", "1:10"),
        0,
        "the upload to c misses `at 12`"
    );
    let (sc, _) = simulate(&addr(16));
    assert!(
        class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000,
        "at 16 it is classified"
    );
}

/// `protocol ipv6` with an IPv4 field (sqm's simple.qos writes `protocol ipv6 … match ip protocol 1`)
/// and IPv4-only classification: IPv6 packets, classified by the engine itself, miss the filter and
/// land in the default class.
#[test]
fn ipv4_fields_under_ipv6_and_ipv4_only_classes() {
    let dir = TempDir::new("review-v6");
    let policy = |filter: &str| {
        format!(
            "qdisc add dev eth0 root handle 1: htb default 20\n\
             class add dev eth0 parent 1: classid 1:10 htb rate 1mbit\n\
             class add dev eth0 parent 1: classid 1:20 htb rate 1mbit\n\
             {filter}\n\
             qdisc add dev eth0 parent 1:10 fq_codel\n\
             qdisc add dev eth0 parent 1:20 fq_codel\n"
        )
    };
    let wrong = policy("filter add dev eth0 parent 1: protocol ipv6 prio 1 u32 match ip protocol 58 0xff flowid 1:10");
    let right = policy("filter add dev eth0 parent 1: protocol ipv6 prio 1 u32 match ip6 protocol 58 0xff flowid 1:10");
    let v4only = policy(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 1 0xff flowid 1:10",
    );
    let r = check(&dir, "v6.batch", &wrong, &[]);
    assert_eq!(line_of(&the(&r, "filter-family")), "v6.batch:4");
    assert!(!codes(&check(&dir, "v6ok.batch", &right, &[])).contains(&"filter-family".to_string()));
    let r = check(&dir, "v4.batch", &v4only, &[]);
    assert_eq!(the(&r, "ipv4-only-classes")["severity"], "note");
    assert_eq!(r.code, 0);
    // `protocol all` with an IPv4 field reads byte 9 of IPv6 packets too (the source address): IPv4
    // only all the same.
    let all_v4 = policy(
        "filter add dev eth0 parent 1: protocol all prio 1 u32 match ip protocol 1 0xff flowid 1:10",
    );
    let r = check(&dir, "all.batch", &all_v4, &[]);
    assert_eq!(line_of(&the(&r, "ipv4-only-classes")), "all.batch:1");
    // An ICMPv6 echo request (next header 58) and an ICMP one, enqueued on each policy.
    let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 58, 64];
    v6.extend([0u8; 32]);
    v6.extend([128, 0, 0, 0, 0, 1, 0, 1]);
    let icmp6 = tclab_core::Packet {
        data: v6,
        len: 62,
        protocol: 0x86dd,
        ..Default::default()
    };
    let mut icmp4 = tclab_core::Packet::udp4([10, 0, 0, 1], 0, [10, 0, 0, 2], 0, 0, 98);
    icmp4.data[9] = 1;
    for (text, pkt, want) in [
        (&wrong, icmp6.clone(), "1:20"),
        (&right, icmp6.clone(), "1:10"),
        (&v4only, icmp4.clone(), "1:10"),
        (&v4only, icmp6.clone(), "1:20"),
        (&all_v4, icmp4, "1:10"),
        (&all_v4, icmp6, "1:20"),
    ] {
        let mut engine = tclab_core::Engine::new();
        for line in text.lines() {
            let words: Vec<String> = line.split_whitespace().map(String::from).collect();
            assert_eq!(tclab_tc::run(&mut engine, &words, 0).code, 0, "{line}");
        }
        let dev = engine.device_mut("eth0").unwrap();
        let mut cx = tclab_core::qdisc::Cx::new(0);
        let _ = dev.enqueue(pkt, &mut cx);
        let queued: Vec<String> = dev
            .classes(0)
            .iter()
            .filter(|c| c.classid.major() == 1 && c.stats.qlen > 0)
            .map(|c| c.classid.to_string())
            .collect();
        assert_eq!(queued, [want], "{text}");
    }
}

/// A scenario that runs `script` (written beside it in `dir`) as node `node`'s policy.
fn with_script(
    dir: &TempDir,
    lab: &str,
    node: &str,
    script: &str,
) -> (tclab_sim::scenario::Scenario, Outcome) {
    std::fs::write(dir.path.join("policy.sh"), script).unwrap();
    let text = format!("{lab}[[policy]]\nnode = \"{node}\"\nscript = \"policy.sh\"\n");
    let mut sc = match load("lab.toml", &text, &dir.path) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    (sc, out)
}

const MARKS: &str = "#!/bin/sh
tc qdisc add dev eth0 root handle 1: htb default 20
tc class add dev eth0 parent 1: classid 1:10 htb rate 2mbit ceil 8mbit prio 1
tc class add dev eth0 parent 1: classid 1:20 htb rate 6mbit ceil 8mbit prio 2
tc qdisc add dev eth0 parent 1:10 fq_codel
tc qdisc add dev eth0 parent 1:20 fq_codel
tc filter add dev eth0 parent 1: protocol ip prio 1 handle 1 fw flowid 1:10
iptables -t mangle -N qos
iptables -t mangle -A qos -p tcp --dport 22 -j MARK --set-mark 1
";

/// An fw filter on a mark whose MARK rule sits in a chain nothing jumps to, or that only packets
/// leaving another device pass: the SSH upload lands in the default class; with the jump, in 1:10.
#[test]
fn marks_no_reachable_rule_sets() {
    let dir = TempDir::new("review-marks");
    let r = check(&dir, "marks.sh", MARKS, &[]);
    let f = the(&r, "mark-unset");
    assert_eq!(line_of(&f), "marks.sh:7");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("chain qos, which no rule for packets leaving eth0 jumps to"),
        "{f}"
    );
    let other = format!("{MARKS}iptables -t mangle -A POSTROUTING -o eth1 -j qos\n");
    assert_eq!(
        line_of(&the(&check(&dir, "other.sh", &other, &[]), "mark-unset")),
        "other.sh:7"
    );
    let fixed = format!("{MARKS}iptables -t mangle -A POSTROUTING -o eth0 -j qos\n");
    assert!(!codes(&check(&dir, "fixed.sh", &fixed, &[])).contains(&"mark-unset".to_string()));
    let lab = "duration = \"6s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
               [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
               [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\nport = 22\n";
    let (sc, _) = with_script(&dir, lab, "s", MARKS);
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
    let (sc, _) = with_script(&dir, lab, "s", &fixed);
    assert!(class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000);
}

/// VoIP (SIP's port) in a 100 kbit/s class with prio 3 beside a 2 Mbit/s bulk default of prio 1, both
/// borrowing up to 8 Mbit/s: offered 300 kbit/s, VoIP gets its rate and no more while a TCP upload
/// borrows the rest; with prio 0 it borrows first and loses nothing.
#[test]
fn interactive_traffic_behind_the_bulk() {
    let policy = |prio: u32| {
        format!(
            "qdisc add dev eth0 root handle 1: htb default 20\n\
             class add dev eth0 parent 1: classid 1:1 htb rate 8mbit\n\
             class add dev eth0 parent 1:1 classid 1:10 htb rate 100kbit ceil 8mbit prio {prio}\n\
             class add dev eth0 parent 1:1 classid 1:20 htb rate 2mbit ceil 8mbit prio 1\n\
             qdisc add dev eth0 parent 1:10 fq_codel\n\
             qdisc add dev eth0 parent 1:20 fq_codel\n\
             filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5060 0xffff flowid 1:10\n"
        )
    };
    let dir = TempDir::new("review-prio");
    let r = check(&dir, "voip.batch", &policy(3), &[]);
    let f = the(&r, "prio-inverted");
    assert_eq!(line_of(&f), "voip.batch:3");
    assert!(
        f["message"].as_str().unwrap().contains("takes SIP traffic"),
        "{f}"
    );
    assert!(
        !codes(&check(&dir, "ok.batch", &policy(0), &[])).contains(&"prio-inverted".to_string())
    );
    let lab = |prio: u32| {
        format!(
            "duration = \"10s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
             [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
             [[policy]]\nnode = \"s\"\ntc = \"\"\"\n{}\"\"\"\n\
             [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\nstreams = 4\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"c\"\nrate = \"300kbit\"\nlength = 160\nport = 5060\n",
            policy(prio)
        )
    };
    let (_, out) = simulate(&lab(3));
    let (inverted, lost_inv) = (out.flows[1].goodput_bps, out.flows[1].lost_packets);
    let (_, out) = simulate(&lab(0));
    let (right, lost_ok) = (out.flows[1].goodput_bps, out.flows[1].lost_packets);
    eprintln!(
        "VoIP prio 3: {inverted:.0} bit/s, {lost_inv} lost; prio 0: {right:.0}, {lost_ok} lost"
    );
    assert!(
        right > 0.95 * 300e3 && inverted < 0.6 * right,
        "prio 3 {inverted:.0}, prio 0 {right:.0}"
    );
}

/// `linklayer atm overhead 0` on a PPPoE/LLC line (40 bytes a packet): the shaper undercounts small
/// packets by a cell, the modem's queue fills, and a ping through it waits; with `overhead 40` it does
/// not.
#[test]
fn atm_without_overhead_fills_the_modem() {
    let policy = |overhead: u32| {
        format!(
            "qdisc add dev eth0 root handle 1: htb default 10\n\
             class add dev eth0 parent 1: classid 1:10 htb rate 900kbit ceil 900kbit linklayer atm overhead {overhead}\n\
             qdisc add dev eth0 parent 1:10 fq_codel\n"
        )
    };
    let dir = TempDir::new("review-atm");
    let r = check(&dir, "atm.batch", &policy(0), &[]);
    let f = the(&r, "atm-overhead");
    assert_eq!(line_of(&f), "atm.batch:2");
    assert!(
        !codes(&check(&dir, "atm40.batch", &policy(40), &[])).contains(&"atm-overhead".to_string())
    );
    assert!(codes(&check(&dir, "atm200.batch", &policy(200), &[]))
        .contains(&"atm-overhead".to_string()));
    let lab = |overhead: u32| {
        format!(
            "duration = \"20s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"m\"\nkind = \"router\"\n[[node]]\nname = \"isp\"\n\
             [[link]]\na = \"s:eth0\"\nb = \"m:eth0\"\nrate = \"100mbit\"\n\
             [[link]]\na = \"m:dsl0\"\nb = \"isp:eth0\"\nrate = \"1mbit\"\ndelay = \"4ms\"\nlinklayer = \"atm\"\noverhead = 40\n\
             [[policy]]\nnode = \"s\"\ntc = \"\"\"\n{}\"\"\"\n\
             [[policy]]\nnode = \"m\"\ntc = \"\"\"\nqdisc add dev dsl0 root pfifo limit 50\n\"\"\"\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"isp\"\nrate = \"2mbit\"\nlength = 100\n\
             [[traffic]]\nkind = \"ping\"\nfrom = \"s\"\nto = \"isp\"\ninterval = \"200ms\"\n",
            policy(overhead)
        )
    };
    let (_, out) = simulate(&lab(0));
    let zero = out.pings[0].rtt.p50_ms;
    let (_, out) = simulate(&lab(40));
    let forty = out.pings[0].rtt.p50_ms;
    eprintln!("ping p50 through the modem: overhead 0 {zero:.1} ms, overhead 40 {forty:.1} ms");
    assert!(
        zero > 3.0 * forty,
        "overhead 0: {zero:.1} ms, 40: {forty:.1} ms"
    );
}

/// fq_codel's default 5 ms target under a 256 kbit/s class (95 ms a frame): a note. Simulated through a
/// router, TCP fills the rate either way, and retransmits several times as often as with a target of a
/// frame's time and a half.
#[test]
fn an_aqm_target_below_a_frame_drops_more() {
    let policy = |fq: &str| {
        format!(
            "qdisc add dev eth1 root handle 1: htb default 10\n\
             class add dev eth1 parent 1: classid 1:10 htb rate 256kbit ceil 256kbit\n\
             qdisc add dev eth1 parent 1:10 fq_codel {fq}\n"
        )
    };
    let dir = TempDir::new("review-aqm");
    let r = check(&dir, "aqm.batch", &policy(""), &[]);
    let f = the(&r, "aqm-target-short");
    assert_eq!(
        (line_of(&f).as_str(), f["severity"].as_str()),
        ("aqm.batch:3", Some("note"))
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("at 256Kbit (47.3 ms)"),
        "{f}"
    );
    assert!(!codes(&check(
        &dir,
        "ok.batch",
        &policy("target 71ms interval 1420ms"),
        &[]
    ))
    .contains(&"aqm-target-short".to_string()));
    let lab = |fq: &str| {
        format!(
            "duration = \"30s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"r\"\nkind = \"router\"\n[[node]]\nname = \"c\"\n\
             [[link]]\na = \"s:eth0\"\nb = \"r:eth0\"\nrate = \"100mbit\"\ndelay = \"20ms\"\n\
             [[link]]\na = \"r:eth1\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
             [[policy]]\nnode = \"r\"\ntc = \"\"\"\n{}\"\"\"\n\
             [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\n",
            policy(fq)
        )
    };
    let (_, out) = simulate(&lab(""));
    let (g5, rx5) = (out.flows[0].goodput_bps, out.flows[0].retransmits);
    let (_, out) = simulate(&lab("target 71ms interval 1420ms"));
    let (g71, rx71) = (out.flows[0].goodput_bps, out.flows[0].retransmits);
    eprintln!("256 kbit/s: target 5ms {g5:.0} bit/s {rx5} retransmitted; 71ms {g71:.0}, {rx71}");
    assert!(
        (g5 - g71).abs() / g71 < 0.05,
        "the rate is filled either way"
    );
    assert!(
        rx5 > 2 * rx71,
        "target 5ms: {rx5} retransmissions, 71ms: {rx71}"
    );
}

/// A `flow` filter with a divisor maps packets onto `divisor` classes from its baseclass: they are
/// reached (one per destination here), and a class past the range is not.
#[test]
fn flow_filters_reach_their_range_of_classes() {
    let mut p = String::from(
        "qdisc add dev eth0 root handle 1: htb default 10\n\
         class add dev eth0 parent 1: classid 1:1 htb rate 10mbit\n",
    );
    for minor in ["10", "11", "12", "13", "14"] {
        p.push_str(&format!(
            "class add dev eth0 parent 1:1 classid 1:{minor} htb rate 2mbit ceil 10mbit\n\
             qdisc add dev eth0 parent 1:{minor} fq_codel\n"
        ));
    }
    p.push_str("filter add dev eth0 parent 1: protocol all prio 1 handle 1 flow hash keys dst divisor 4 baseclass 1:10\n");
    let dir = TempDir::new("review-flow");
    let r = check(&dir, "flow.batch", &p, &[]);
    let unreached: Vec<String> = findings(&r)
        .iter()
        .filter(|f| f["code"] == "unreached-class")
        .map(|f| f["at"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(unreached, ["eth0 class htb 1:14"], "{}", r.stdout);
}

/// An iptables CLASSIFY rule naming a class HTB does not have (1:30 for 1:10): check names the rule's
/// line and where its packets fall, and folds the idle 1:10 into that finding; simulated, the SSH
/// upload puts nothing in 1:10 and all of it in the default 1:20, and with `--set-class 1:10` the
/// reverse; a class of a major the device has no qdisc of (2:10) falls to the default the same way.
#[test]
fn a_classify_rule_to_a_missing_class_leaves_its_traffic_in_the_default() {
    let dir = TempDir::new("review-classify");
    let policy = |class: &str| {
        format!(
            "#!/bin/sh
tc qdisc add dev eth0 root handle 1: htb default 20
tc class add dev eth0 parent 1: classid 1:10 htb rate 2mbit ceil 8mbit prio 1
tc class add dev eth0 parent 1: classid 1:20 htb rate 6mbit ceil 8mbit prio 2
tc qdisc add dev eth0 parent 1:10 fq_codel
tc qdisc add dev eth0 parent 1:20 fq_codel
iptables -t mangle -A POSTROUTING -o eth0 -p tcp --dport 22 -j CLASSIFY --set-class {class}
"
        )
    };
    let r = check(&dir, "classify.sh", &policy("1:30"), &[]);
    assert_eq!(
        codes(&r),
        vec!["gso-bursts", "filter-class-missing"],
        "{}",
        r.stdout
    );
    let f = the(&r, "filter-class-missing");
    assert_eq!(line_of(&f), "classify.sh:7");
    assert_eq!(f["at"], "eth0 iptables CLASSIFY --set-class 1:30");
    assert!(
        f["message"].as_str().unwrap().ends_with(
            "they fall to the default class 1:20; nothing reaches 1:10 (the class meant?)"
        ),
        "{f}"
    );
    assert_eq!(
        codes(&check(&dir, "fixed.sh", &policy("1:10"), &[])),
        vec!["gso-bursts"]
    );
    // A major no qdisc has (the tree is 1:, the rule says 2:10): the root cannot find it either.
    let f = the(
        &check(&dir, "major.sh", &policy("2:10"), &[]),
        "filter-class-missing",
    );
    assert_eq!(f["at"], "eth0 iptables CLASSIFY --set-class 2:10");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("which htb 1: does not have"),
        "{f}"
    );
    let lab = "duration = \"6s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
               [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
               [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\nport = 22\n";
    let (sc, _) = with_script(&dir, lab, "s", &policy("1:30"));
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
    let (sc, _) = with_script(&dir, lab, "s", &policy("1:10"));
    assert!(class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") < 10_000);
    let (sc, _) = with_script(&dir, lab, "s", &policy("2:10"));
    assert_eq!(
        class_bytes(&sc, "s", "eth0", "1:10"),
        0,
        "2:10 is no class of 1:"
    );
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
}

/// A script that takes its device and rate as arguments (as sqm's and wondershaper's do): without them
/// it stops at its first `${1:?…}` and check says to pass them after `--`; with them, the policy it
/// builds is checked; a batch file takes no arguments (exit 64).
#[test]
fn a_script_gets_its_arguments_after_a_double_dash() {
    let dir = TempDir::new("review-args");
    let script = "#!/bin/sh
DEV=${1:?usage: wan.sh DEV RATE}
RATE=$2
tc qdisc add dev $DEV root handle 1: htb default 10
tc class add dev $DEV parent 1: classid 1:10 htb rate ${RATE}kbit
tc qdisc add dev $DEV parent 1:10 fq_codel
";
    let r = check(&dir, "wan.sh", script, &[]);
    let f = the(&r, "script-failed");
    assert_eq!(line_of(&f), "wan.sh:2");
    assert!(f["fix"].as_str().unwrap().contains("after `--`"), "{f}");
    let path = dir.path.join("wan.sh").to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        let mut c = cmd(Path::new(TCLAB), args);
        c.env_remove("TCLAB_CONTROL");
        run_with_timeout(c, Duration::from_secs(60), -1)
    };
    let r = run(&["check", "--json", &path, "--", "eth1", "20000"]);
    assert_eq!(r.code, 0, "{r:?}");
    // The policy was built on eth1 at 20 Mbit/s: its one note names them.
    let f = the(&r, "gso-bursts");
    assert!(
        f["at"].as_str().unwrap().starts_with("eth1 qdisc htb 1:"),
        "{f}"
    );
    assert!(f["message"].as_str().unwrap().contains("20Mbit"), "{f}");
    let batch = dir.path.join("b.batch");
    std::fs::write(&batch, "qdisc add dev eth0 root fq_codel\n").unwrap();
    let r = run(&["check", batch.to_str().unwrap(), "--", "eth0"]);
    assert_eq!(r.code, 64, "{r:?}");
    assert!(r.stderr.contains("is not a shell script"), "{}", r.stderr);
}

/// r1 reaches r2 over two lines of 5 ms (eth1 10 Mbit/s, eth2 `rate2`), one CUBIC download h1 → h2
/// for 20 s, `policy` on r1.
fn bond_lab(rate2: &str, policy: &str) -> String {
    let mut s = String::from("duration = \"20s\"\n");
    for (name, kind) in [
        ("h1", "host"),
        ("r1", "router"),
        ("r2", "router"),
        ("h2", "host"),
    ] {
        s += &format!("[[node]]\nname = \"{name}\"\nkind = \"{kind}\"\n");
    }
    for (a, b, rate, delay) in [
        ("h1", "r1:eth0", "100mbit", "1ms"),
        ("r1:eth1", "r2:eth1", "10mbit", "5ms"),
        ("r1:eth2", "r2:eth2", rate2, "5ms"),
        ("r2:eth0", "h2", "100mbit", "1ms"),
    ] {
        s += &format!(
            "[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"{rate}\"\ndelay = \"{delay}\"\n"
        );
    }
    s + &format!(
        "[[policy]]\nnode = \"r1\"\ntc = '''\n{}\n'''\n[[traffic]]\nkind = \"tcp\"\nname = \"t\"\n\
         from = \"h1\"\nto = \"h2\"\nstart = \"0s\"\n",
        lines(policy)
    )
}

/// LARTC's teql bond without `ip link set dev teql0 up`, and over lines of unequal rates: check
/// names each (docs/checks/teql-down.md, teql-unequal-slaves.md), and the simulator measures the
/// damage the pages cite. One 10 Mbit/s line carries 10 × 1448/1490 = 9.72 Mbit/s of payload.
#[test]
fn a_teql_bond_never_up_or_over_unequal_lines_is_named_and_measured() {
    const ONE_LINE: f64 = 10e6 * 1448.0 / 1490.0;
    let bond = "#!/bin/sh\ntc qdisc add dev eth1 root teql0\ntc qdisc add dev eth2 root teql0\n\
                ip link set dev teql0 up\n";
    let down = bond.replace("ip link set dev teql0 up\n", "");
    let dir = TempDir::new("review-teql");
    let r = check(&dir, "down.sh", &down, &[]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert_eq!(line_of(&the(&r, "teql-down")), "down.sh:2");
    let unequal = ["--link", "eth1=10mbit", "--link", "eth2=2mbit"];
    let r = check(&dir, "bond.sh", bond, &unequal);
    assert_eq!(codes(&r), ["teql-unequal-slaves"], "{}", r.stdout);
    // Down: one line's worth (the fewest-hops route, eth1); up: more than one line could carry.
    let (_, out) = simulate(&bond_lab("10mbit", &down));
    let g = out.flows[0].goodput_bps;
    eprintln!("teql0 down: {g:.0} bit/s");
    assert!(g < ONE_LINE && g > 0.9 * ONE_LINE, "down: {g:.0} bit/s");
    let (_, out) = simulate(&bond_lab("10mbit", bond));
    let g = out.flows[0].goodput_bps;
    eprintln!("two 10 Mbit/s lines: {g:.0} bit/s");
    assert!(g > 1.8 * ONE_LINE, "equal lines: {g:.0} bit/s");
    // 10 and 2 Mbit/s: the slow line's packets arrive behind later ones of the fast line, and the
    // sender retransmits what was never lost; Linux's D-SACK then shows each retransmission spurious
    // and undoes the cut (tcp_try_undo_dsack/tcp_try_undo_recovery) and RACK widens its reordering
    // window, so the flow keeps most of both lines (12 × 1448/1490 = 11.66 Mbit/s of payload).
    let (sc, out) = simulate(&bond_lab("2mbit", bond));
    let lost: u64 = sc
        .net
        .ifaces
        .iter()
        .map(|i| i.counters.wire_lost + i.counters.tx_dropped)
        .sum();
    let t = &out.flows[0];
    let n = t.nstat.as_ref().expect("a TCP flow's nstat");
    eprintln!(
        "10 + 2 Mbit/s: {:.0} bit/s, {} retransmits, {} D-SACKs, {} + {} undone",
        t.goodput_bps, t.retransmits, n.dsack_recv, n.full_undo, n.partial_undo
    );
    let both = 12e6 * 1448.0 / 1490.0;
    assert!(
        t.goodput_bps > 0.9 * both && t.goodput_bps < both,
        "{:.0} bit/s",
        t.goodput_bps
    );
    assert!(
        t.retransmits > 0 && lost == 0 && n.dsack_recv > 0 && n.full_undo + n.partial_undo > 0,
        "{} retransmits, {} D-SACKs, {} + {} undone, {lost} lost",
        t.retransmits,
        n.dsack_recv,
        n.full_undo,
        n.partial_undo
    );
}

/// A sender whose route to c's link carries realm 5, and a route filter meant for it that reads
/// realm 7.
const REALM_TYPO: &str = "#!/bin/sh
ip route replace 10.0.1.0/24 dev eth0 realm 5
tc qdisc add dev eth0 root handle 1: htb default 20
tc class add dev eth0 parent 1: classid 1:10 htb rate 2mbit ceil 8mbit
tc class add dev eth0 parent 1: classid 1:20 htb rate 6mbit ceil 8mbit
tc filter add dev eth0 parent 1: protocol ip prio 1 route to 7 classid 1:10
";

/// `realm-unset`: the route filter on realm 7 sends nothing to 1:10 in the simulator (the transfer's
/// bytes all go to the default 1:20); with `to 5`, the realm the route sets, they go to 1:10, and
/// check says nothing.
#[test]
fn a_route_filter_on_a_realm_no_route_sets_classifies_nothing() {
    let dir = TempDir::new("review-realm");
    let f = the(&check(&dir, "realm.sh", REALM_TYPO, &[]), "realm-unset");
    assert_eq!(line_of(&f), "realm.sh:6");
    let fixed = REALM_TYPO.replace("route to 7", "route to 5");
    assert!(!codes(&check(&dir, "fixed.sh", &fixed, &[])).contains(&"realm-unset".to_string()));
    let lab = "duration = \"6s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"c\"\n\
               [[link]]\na = \"s:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
               [[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\n";
    let (sc, _) = with_script(&dir, lab, "s", REALM_TYPO);
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
    let (sc, _) = with_script(&dir, lab, "s", &fixed);
    assert!(class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000);
    assert!(
        class_bytes(&sc, "s", "eth0", "1:20") < 10_000,
        "the handshake at most"
    );
}

/// A filter an earlier one always answers for first: a catch-all at pref 1 in front of the SSH filter
/// (`tcf_classify` stops at the first instance that matches), and a /8 node in front of a /32 of the
/// same pref (`u32_classify` tries a pref's nodes by handle). Measured: the SSH transfer's bytes all go
/// to the catch-all's class, and to 1:10 once the order is right.
#[test]
fn a_filter_behind_a_broader_one_never_matches() {
    let dir = TempDir::new("review-shadowed");
    let policy = |filters: &str| classified(filters, 22, 0, false);
    let behind = policy(
        "filter add dev eth0 parent 1: protocol all prio 1 u32 match u32 0 0 flowid 1:20\n\
         filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:10",
    );
    let r = check(&dir, "behind.batch", &batch_of(&behind), &[]);
    let f = the(&r, "filter-shadowed");
    assert_eq!(line_of(&f), "behind.batch:8");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("pref 1 (fh 800::800") && msg.contains("class 1:10 gets nothing"),
        "{msg}"
    );
    assert_eq!(f["at"], "eth0 filter parent 1: pref 2 u32 fh 801::800");
    let (sc, _) = simulate(&behind);
    assert_eq!(
        class_bytes(&sc, "s", "eth0", "1:10"),
        0,
        "SSH never reaches 1:10"
    );
    // The same two filters the other way round: no finding, and the transfer lands in 1:10.
    let before = policy(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10\n\
         filter add dev eth0 parent 1: protocol all prio 2 u32 match u32 0 0 flowid 1:20",
    );
    assert!(
        !codes(&check(&dir, "before.batch", &batch_of(&before), &[]))
            .contains(&"filter-shadowed".to_string())
    );
    let (sc, _) = simulate(&before);
    assert!(class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000);
    // One pref, the broad node first: the host's packets go to the /8's class.
    let one_pref = classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.0/8 flowid 1:20\n\
         filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.1.2/32 flowid 1:10",
        5001,
        0,
        false,
    );
    let f = the(
        &check(&dir, "pref.batch", &batch_of(&one_pref), &[]),
        "filter-shadowed",
    );
    assert_eq!(line_of(&f), "pref.batch:8");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("node 800::800 before it at the same pref"),
        "{f}"
    );
    let (sc, _) = simulate(&one_pref);
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    // Not said where the earlier filter only overlaps: another port, a narrower address, a protocol
    // of its own, or an action that may hand the packet on (`continue`).
    for (name, filters) in [
        ("port", "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 80 0xffff flowid 1:20\n\
                  filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:10"),
        ("narrow", "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.1.2/32 flowid 1:20\n\
                    filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.0.0.0/8 flowid 1:10"),
        ("proto", "filter add dev eth0 parent 1: protocol ipv6 prio 1 u32 match u32 0 0 flowid 1:20\n\
                   filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:10"),
        ("continue", "filter add dev eth0 parent 1: protocol all prio 1 u32 match u32 0 0 action continue\n\
                      filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:10"),
    ] {
        let text = policy(filters);
        assert!(
            !codes(&check(&dir, &format!("{name}.batch"), &batch_of(&text), &[]))
                .contains(&"filter-shadowed".to_string()),
            "{name}"
        );
    }
}

/// A catch-all written on a field (`match ip dst 0.0.0.0/0`, `match u32 0 0 at 16`) reads the word at
/// offset 16, past what `match ip protocol`, `ip src` or `ip tos` read; but no IPv4 packet reaches a
/// qdisc with less than its 20-byte header (`ip_rcv` drops it), so the catch-all takes all of theirs.
/// A new-user review found check silent on the commonest of these. Measured: behind the dst
/// catch-all, `match ip protocol 6 0xff` sends the TCP transfer nothing.
#[test]
fn a_catch_all_on_a_header_field_shadows_what_reads_less() {
    let dir = TempDir::new("review-shadowed-field");
    let policy = |filters: &str| classified(filters, 22, 0, false);
    for (name, first, second) in [
        (
            "proto",
            "match ip dst 0.0.0.0/0",
            "match ip protocol 6 0xff",
        ),
        ("src", "match ip dst 0.0.0.0/0", "match ip src 10.0.0.0/8"),
        ("tos", "match u32 0 0 at 16", "match ip tos 0x10 0xff"),
    ] {
        let text = policy(&format!(
            "filter add dev eth0 parent 1: protocol ip prio 1 u32 {first} flowid 1:20\n\
             filter add dev eth0 parent 1: protocol ip prio 2 u32 {second} flowid 1:10"
        ));
        let f = the(
            &check(&dir, &format!("{name}.batch"), &batch_of(&text), &[]),
            "filter-shadowed",
        );
        assert_eq!(line_of(&f), format!("{name}.batch:8"));
        assert_eq!(f["at"], "eth0 filter parent 1: pref 2 u32 fh 801::800");
    }
    let (sc, _) = simulate(&policy(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 0.0.0.0/0 flowid 1:20\n\
         filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip protocol 6 0xff flowid 1:10",
    ));
    assert_eq!(class_bytes(&sc, "s", "eth0", "1:10"), 0);
    assert!(class_bytes(&sc, "s", "eth0", "1:20") > 1_000_000);
    // Under `protocol all` a packet of another family may be shorter: still nothing said.
    let text = policy(
        "filter add dev eth0 parent 1: protocol all prio 1 u32 match u32 0 0 at 36 flowid 1:20\n\
         filter add dev eth0 parent 1: protocol all prio 2 u32 match ip protocol 6 0xff flowid 1:10",
    );
    assert!(!codes(&check(&dir, "all.batch", &batch_of(&text), &[]))
        .contains(&"filter-shadowed".to_string()));
}

/// Whether check says `code` of [`classified`]'s policy with the filter lines `filters` (a transfer
/// to `port`), written as `NAME.batch`.
fn says(dir: &TempDir, name: &str, filters: &str, port: u16, code: &str) -> bool {
    let text = classified(filters, port, 0, false);
    codes(&check(dir, &format!("{name}.batch"), &batch_of(&text), &[])).contains(&code.to_string())
}

/// An earlier filter whose actions end the classification takes the packets as a flowid does
/// (`tcf_classify` returns any answer >= 0: drop, stolen, a trailing pipe), and one whose actions may
/// answer `continue` or `reclassify` does not (cls_api.c, act_api.c's tcf_action_exec). Measured: the
/// SSH transfer's bytes never reach 1:10 behind a drop or behind an skbedit (pipe) with flowid 1:20.
#[test]
fn a_filter_behind_one_whose_actions_end_classification_never_matches() {
    let dir = TempDir::new("review-shadowed-actions");
    let ssh =
        "filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:10";
    for (name, first, to) in [
        ("drop", "action drop", "its actions (gact) and no class"),
        (
            "pipe",
            "flowid 1:20 action skbedit mark 5",
            "its actions (skbedit) and class 1:20",
        ),
    ] {
        let text = classified(
            &format!(
                "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff {first}\n{ssh}"
            ),
            22,
            0,
            false,
        );
        let f = the(
            &check(&dir, &format!("{name}.batch"), &batch_of(&text), &[]),
            "filter-shadowed",
        );
        let msg = f["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("ends its classification with {to}")),
            "{name}: {msg}"
        );
        let (sc, _) = simulate(&text);
        assert_eq!(
            class_bytes(&sc, "s", "eth0", "1:10"),
            0,
            "{name}: SSH never reaches 1:10"
        );
    }
    let first = |actions: &str| {
        format!("filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff {actions}\n{ssh}")
    };
    let mirred = first("action mirred egress redirect dev eth0");
    assert!(says(&dir, "mirred", &mirred, 22, "filter-shadowed"));
    for (name, actions) in [
        ("reclassify", "action reclassify"),
        (
            "pipe-continue",
            "action skbedit mark 5 pipe action continue",
        ),
        (
            "police",
            "action police rate 1mbit burst 10k conform-exceed ok/continue",
        ),
    ] {
        assert!(
            !says(&dir, name, &first(actions), 22, "filter-shadowed"),
            "{name}"
        );
    }
}

/// A u32 value with bits outside its mask: tc keeps `value & mask` without a word (iproute2's
/// f_u32.c, pack_key's `key &= mask`), so `match ip dport 22 0xff00` reads as "high byte 0": every port
/// up to 255. Measured: a transfer to port 80 lands in the SSH class. A value within its mask, or a
/// prefix written as a value and mask, is not said.
#[test]
fn a_u32_value_outside_its_mask_matches_something_else() {
    let dir = TempDir::new("review-u32-masked");
    let text = classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xff00 flowid 1:10",
        80,
        0,
        false,
    );
    let f = the(
        &check(&dir, "masked.batch", &batch_of(&text), &[]),
        "u32-value-masked",
    );
    assert_eq!(line_of(&f), "masked.batch:7");
    assert_eq!(f["at"], "eth0 filter parent 1: pref 1 u32");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("`match ip dport 22 0xff00`")
            && msg.contains("value 0x0016")
            && msg.contains("mask 0xff00")
            && msg.contains("matches 0x0000"),
        "{msg}"
    );
    let (sc, _) = simulate(&text);
    assert!(
        class_bytes(&sc, "s", "eth0", "1:10") > 1_000_000,
        "port 80 taken as SSH"
    );
    let raw = batch_of(&classified(
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u32 0x0a000105 0xffffff00 at 16 flowid 1:10",
        80,
        0,
        false,
    ));
    let f = the(&check(&dir, "raw.batch", &raw, &[]), "u32-value-masked");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("0x0a000105")
            && msg.contains("0xffffff00")
            && msg.contains("matches 0x0a000100"),
        "{msg}"
    );
    for (name, filter) in [
        ("whole", "match ip dport 22 0xffff"),
        ("within", "match u32 0x0a000100 0xffffff00 at 16"),
        ("tcp", "match tcp dst 0x0010 0xfff0"),
    ] {
        let filter =
            format!("filter add dev eth0 parent 1: protocol ip prio 1 u32 {filter} flowid 1:10");
        assert!(!says(&dir, name, &filter, 80, "u32-value-masked"), "{name}");
    }
}

/// A router r between s and c (1 Gbit/s links, 10 ms each way), shaping its eth1 with HTB 10mbit and
/// the leaf `leaf`, and the traffic entries `traffic` (TOML).
fn htb10_lab(leaf: &str, traffic: &str) -> String {
    format!(
        "duration = \"20s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"r\"\n[[node]]\nname = \"c\"\n\
         [[link]]\na = \"s:eth0\"\nb = \"r:eth0\"\nrate = \"1gbit\"\ndelay = \"10ms\"\n\
         [[link]]\na = \"r:eth1\"\nb = \"c:eth0\"\nrate = \"1gbit\"\ndelay = \"10ms\"\n\
         [[policy]]\nnode = \"r\"\ntc = \"\"\"\n\
         qdisc add dev eth1 root handle 1: htb default 10\n\
         class add dev eth1 parent 1: classid 1:10 htb rate 10mbit\n\
         qdisc add dev eth1 parent 1:10 {leaf}\n\"\"\"\n{traffic}"
    )
}

/// CoDel's target at or above its interval (the two swapped): it drops only once packets have waited
/// longer than target for a whole interval, so the queue stands at about target. Measured: four CUBIC
/// flows through HTB 10mbit with a CoDel leaf, a ping beside them from 5 s (20 ms of path).
#[test]
fn a_codel_target_above_its_interval_keeps_a_standing_queue() {
    let dir = TempDir::new("review-codel");
    let policy = |leaf: &str| {
        htb10_lab(
            leaf,
            "[[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\nstreams = 4\n\
             [[traffic]]\nkind = \"ping\"\nfrom = \"s\"\nto = \"c\"\ninterval = \"100ms\"\nstart = \"5s\"\n",
        )
    };
    let swapped = policy("codel target 200ms interval 100ms");
    let f = the(
        &check(&dir, "swapped.batch", &batch_of(&swapped), &[]),
        "aqm-target-interval",
    );
    assert_eq!(line_of(&f), "swapped.batch:3");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .starts_with("target 200ms is not below interval 100ms"),
        "{f}"
    );
    // Equal is as wrong; the defaults, and sqm's slowest lines (target 284 ms, interval 379 ms at
    // 64 kbit/s), are not flagged.
    for (leaf, flagged) in [
        ("fq_codel target 100ms interval 100ms", true),
        ("fq_codel interval 4ms", true),
        ("codel", false),
        ("fq_codel target 284ms interval 379ms", false),
    ] {
        let r = check(&dir, "leaf.batch", &batch_of(&policy(leaf)), &[]);
        assert_eq!(
            codes(&r).contains(&"aqm-target-interval".to_string()),
            flagged,
            "{leaf}: {}",
            r.stdout
        );
    }
    let (_, out) = simulate(&swapped);
    let standing = out.pings[0].rtt.p50_ms;
    let (_, out) = simulate(&policy("codel"));
    let controlled = out.pings[0].rtt.p50_ms;
    eprintln!(
        "ping p50: target 200ms interval 100ms {standing:.1} ms, defaults {controlled:.1} ms"
    );
    // 40 ms of path: about 200 ms of queue on top of it, against CoDel's few ms.
    assert!(standing > 200.0, "{standing}");
    assert!(controlled < 60.0, "{controlled}");
}

/// Children's rates adding up past the line, under a parent whose ceil is below it (seed 004's
/// conditioner: 220 + 198 kbit/s under 220 on a 256 kbit/s line): HTB sends the sum when both are busy,
/// and the modem's queue fills. With `--link` that is a warning (`shaper-at-line-rate`) in place of
/// the `rates-exceed-parent` note; measured by what the modem drops, two UDP floods through the
/// policy, one per class.
#[test]
fn childrens_rates_past_the_line_fill_the_modem() {
    let policy = |rate: &str| {
        format!(
            "qdisc add dev eth0 root handle 1: htb default 20\n\
             class add dev eth0 parent 1: classid 1:1 htb rate 900kbit\n\
             class add dev eth0 parent 1:1 classid 1:10 htb rate {rate} ceil 900kbit prio 1\n\
             class add dev eth0 parent 1:1 classid 1:20 htb rate {rate} ceil 900kbit prio 2\n\
             qdisc add dev eth0 parent 1:10 pfifo limit 20\n\
             qdisc add dev eth0 parent 1:20 pfifo limit 20\n\
             filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5201 0xffff flowid 1:10\n"
        )
    };
    let dir = TempDir::new("review-line-sum");
    let r = check(&dir, "sum.batch", &policy("600kbit"), &["--link", "1mbit"]);
    let f = the(&r, "shaper-at-line-rate");
    assert_eq!(line_of(&f), "sum.batch:1");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.starts_with("sends up to 1200Kbit when every class is busy, on a 1Mbit line")
            && msg.contains("the children of 1:1 are guaranteed 1200Kbit in all"),
        "{msg}"
    );
    assert!(!codes(&r).contains(&"rates-exceed-parent".to_string()));
    // Without a line, the note as before; with rates that fit, nothing.
    let r = check(&dir, "sum.batch", &policy("600kbit"), &[]);
    assert!(codes(&r).contains(&"rates-exceed-parent".to_string()));
    assert!(!codes(&r).contains(&"shaper-at-line-rate".to_string()));
    // Two top classes side by side: each below the line, together past it.
    let tops = "qdisc add dev eth0 root handle 1: htb default 1\n\
                class add dev eth0 parent 1: classid 1:1 htb rate 600kbit\n\
                class add dev eth0 parent 1: classid 1:2 htb rate 600kbit\n";
    let f = the(
        &check(&dir, "tops.batch", tops, &["--link", "1mbit"]),
        "shaper-at-line-rate",
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("its top classes send up to their ceilings side by side"),
        "{f}"
    );
    let r = check(&dir, "fit.batch", &policy("450kbit"), &["--link", "1mbit"]);
    assert!(
        !codes(&r).contains(&"shaper-at-line-rate".to_string()),
        "{}",
        r.stdout
    );
    let lab = |rate: &str| {
        format!(
            "duration = \"20s\"\n[[node]]\nname = \"s\"\n[[node]]\nname = \"m\"\nkind = \"router\"\n[[node]]\nname = \"isp\"\n\
             [[link]]\na = \"s:eth0\"\nb = \"m:eth0\"\nrate = \"100mbit\"\n\
             [[link]]\na = \"m:wan0\"\nb = \"isp:eth0\"\nrate = \"1mbit\"\ndelay = \"4ms\"\n\
             [[policy]]\nnode = \"s\"\ntc = \"\"\"\n{}\"\"\"\n\
             [[policy]]\nnode = \"m\"\ntc = \"\"\"\nqdisc add dev wan0 root pfifo limit 50\n\"\"\"\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"isp\"\nrate = \"2mbit\"\nport = 5201\n\
             [[traffic]]\nkind = \"udp\"\nfrom = \"s\"\nto = \"isp\"\nrate = \"2mbit\"\nport = 6000\n",
            policy(rate)
        )
    };
    // What the modem (a 50-packet FIFO on the 1 Mbit/s line) dropped: what the policy sent past the
    // line, which it did not order or choose.
    let modem_drops = |rate: &str| {
        let (sc, _) = simulate(&lab(rate));
        let m = sc.net.node_by_name("m").unwrap();
        let d = sc.net.nodes[m].engine.device("wan0").unwrap();
        d.qdiscs()[0].stats.drops
    };
    let (over, under) = (modem_drops("600kbit"), modem_drops("450kbit"));
    eprintln!("the modem dropped {over} packets with rates 2 x 600kbit, {under} with 2 x 450kbit");
    // 0.2 Mbit/s too many for 20 s: about 340 datagrams of 1448 bytes (289 counted; the first
    // seconds fill the FIFO).
    assert!(over > 250, "{over}");
    assert_eq!(under, 0);
}

/// A leaf FIFO written too short: `bfifo limit 1000` (bytes, where packets were meant) holds no full
/// frame and passes nothing of a TCP transfer (an error); `pfifo limit 1` loses part of every burst
/// while the class waits for tokens (a warning). Measured: one CUBIC flow through HTB 10mbit, 40 ms
/// of path.
#[test]
fn a_leaf_fifo_shorter_than_a_burst_starves_tcp() {
    let dir = TempDir::new("review-short-fifo");
    let lab = |leaf: &str| {
        htb10_lab(
            leaf,
            "[[traffic]]\nkind = \"tcp\"\nfrom = \"s\"\nto = \"c\"\n",
        )
    };
    let bytes = lab("bfifo limit 1000");
    let f = the(
        &check(&dir, "bytes.batch", &batch_of(&bytes), &[]),
        "queue-below-packet",
    );
    assert_eq!(line_of(&f), "bytes.batch:3");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("holds 1000 bytes, less than one 1514-byte frame"),
        "{f}"
    );
    let one = lab("pfifo limit 1");
    let f = the(
        &check(&dir, "one.batch", &batch_of(&one), &[]),
        "leaf-queue-short",
    );
    assert_eq!(line_of(&f), "one.batch:3");
    for leaf in ["pfifo limit 3", "bfifo limit 4542", "pfifo", "fq_codel"] {
        let r = check(&dir, "ok.batch", &batch_of(&lab(leaf)), &[]);
        let got = codes(&r);
        assert!(
            !got.contains(&"leaf-queue-short".to_string())
                && !got.contains(&"queue-below-packet".to_string()),
            "{leaf}: {got:?}"
        );
    }
    let goodput = |text: &str| simulate(text).1.flows[0].goodput_bps;
    let (none, short, room) = (
        goodput(&bytes),
        goodput(&one),
        goodput(&lab("pfifo limit 100")),
    );
    eprintln!(
        "goodput: bfifo limit 1000 {none:.0}, pfifo limit 1 {short:.0}, pfifo limit 100 {room:.0} bit/s"
    );
    assert!(none < 10_000.0, "{none}");
    assert!(short < 0.5 * room, "{short} vs {room}");
    assert!(room > 9.0e6, "{room}");
}

/// A block holds 2 047 u32 instances (one per pref): the kernel refuses the 2 048th add with "Filter
/// already exists" (this machine's, in a namespace), and so does every later add at a new pref. check
/// makes that one finding that says why and what to do, and does not add an `unreached-class` for
/// each class those filters would have reached.
#[test]
fn u32_filters_past_the_blocks_instances_are_one_finding() {
    let dir = TempDir::new("review-u32-full");
    let mut batch = String::from(
        "qdisc add dev eth0 root handle 1: htb default 2\n\
         class add dev eth0 parent 1: classid 1:1 htb rate 1gbit\n\
         class add dev eth0 parent 1:1 classid 1:2 htb rate 1mbit ceil 1gbit\n\
         qdisc add dev eth0 parent 1:2 fq_codel\n",
    );
    let n = 2050;
    for i in 0..n {
        batch.push_str(&format!(
            "class add dev eth0 parent 1:1 classid 1:{:x} htb rate 100kbit ceil 20mbit\n\
             qdisc add dev eth0 parent 1:{:x} fq_codel\n",
            0x10 + i,
            0x10 + i
        ));
    }
    for i in 0..n {
        batch.push_str(&format!(
            "filter add dev eth0 parent 1: protocol ip prio {} u32 match ip dst 100.64.{}.{}/32 flowid 1:{:x}\n",
            i + 1,
            i / 256,
            i % 256,
            0x10 + i
        ));
    }
    let r = check(&dir, "linear.batch", &batch, &[]);
    let f = the(&r, "refused");
    // The 2 048th filter is the batch's line 4 + 2 × 2 050 + 2 048.
    assert_eq!(line_of(&f), format!("linear.batch:{}", 4 + 2 * n + 2048));
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("Filter already exists")
            && msg.contains("2 later u32 filters at a new pref are refused too")
            && msg.contains("2 047 u32 filters of different prefs"),
        "{msg}"
    );
    assert!(f["fix"].as_str().unwrap().contains("hash table"), "{f}");
    assert!(
        !codes(&r).contains(&"unreached-class".to_string()),
        "{}",
        r.stdout
    );
}

/// A scenario file given to check (a new-user review ran `tclab check lab.toml`): bash ran it and
/// check reported `bash: name: command not found` as the policy's error. Refused (64) instead, with
/// each `[[policy]]` as check takes it: its script (relative to the scenario) with its arguments,
/// its batch file, or its inline `tc` lines saved as a file.
#[test]
fn a_scenario_file_is_refused_with_how_to_check_its_policies() {
    let dir = TempDir::new("review-scenario");
    let lab =
        "name = \"lab\"\nduration = \"5s\"\n[[node]]\nname = \"gw\"\n[[node]]\nname = \"c\"\n\
               [[link]]\na = \"gw:eth0\"\nb = \"c:eth0\"\nrate = \"10mbit\"\n\
               [[policy]]\nnode = \"gw\"\nscript = \"gw.sh\"\nargs = [\"eth0\", \"5mbit\"]\n\
               [[policy]]\nnode = \"c\"\ntc = \"qdisc add dev eth0 root fq_codel\"\n";
    let r = check(&dir, "lab.toml", lab, &[]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(
        !r.stderr.contains("command not found") && r.stderr.contains("a scenario file"),
        "{}",
        r.stderr
    );
    let gw = format!(
        "node gw: tclab check {} -- eth0 5mbit",
        dir.path.join("gw.sh").display()
    );
    assert!(r.stderr.contains(&gw), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("node c: its `tc` lines, saved as a file of their own: tclab check FILE"),
        "{}",
        r.stderr
    );
}
