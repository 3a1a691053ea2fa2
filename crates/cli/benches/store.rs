//! `cargo bench -p tclab --bench store`: the policy store at ISP scale, against this machine's kernel on
//! the same input in the same run (issue 9).
//!
//! 1. `tc -batch` of a LibreQoS-sized policy: 10 000 HTB classes, a pfifo leaf each, a u32 filter each in
//!    one prio (the batch leaves a snapshot of the engine beside the journal); then the first
//!    `tc -s class show` after it, `tc -s class show` and `tc filter show` (best of 3) standalone
//!    (`TCLAB_SERVE=off`: each call loads the snapshot), the same with the snapshot put aside (each call
//!    replays the 30 002 records), and through a resident engine (`tclab serve`).
//! 2. A shell script of 2 002 `tc` calls (1 000 classes with leaves) under `tclab script run` (SFQ leaves),
//!    and under bash against the kernel's `tc` (pfifo leaves: this kernel has no SFQ).
//!
//! The kernel side runs in a throw-away network namespace on a veth (root, `ip` and `tc` needed; without
//! them it is skipped and only tclab's figures print), `tclab-bench-PID` or `$TCLAB_BENCH_NETNS`. Ratios are tclab / kernel: below 1 is faster.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn batch(dev: &str, n: u32) -> String {
    let mut t = format!("qdisc add dev {dev} root handle 1: htb default 2\n");
    t.push_str(&format!(
        "class add dev {dev} parent 1: classid 1:1 htb rate 10gbit\n"
    ));
    for i in 0..n {
        let c = i + 16;
        t.push_str(&format!(
            "class add dev {dev} parent 1:1 classid 1:{c:x} htb rate 1mbit ceil 10mbit\n\
             qdisc add dev {dev} parent 1:{c:x} handle {c:x}: pfifo limit 100\n\
             filter add dev {dev} parent 1: prio 1 protocol ip u32 match ip dst 10.{}.{}.1/32 flowid 1:{c:x}\n",
            (i >> 8) & 255,
            i & 255
        ));
    }
    t
}

fn script(leaf: &str) -> String {
    let mut s = String::from(
        "#!/bin/bash\nDEV=${DEV:-eth0}\ntc qdisc add dev $DEV root handle 1: htb default 10\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 1gbit\n",
    );
    s.push_str(&format!(
        "for i in $(seq 16 1015); do\n  c=$(printf %x $i)\n  \
         tc class add dev $DEV parent 1:1 classid 1:$c htb rate 1mbit ceil 100mbit\n  \
         tc qdisc add dev $DEV parent 1:$c handle $c: {leaf}\ndone\n"
    ));
    s
}

/// Seconds `c` took; panics if it failed.
fn timed(mut c: Command) -> f64 {
    let t = Instant::now();
    let out = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("spawn");
    let s = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{c:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

fn best_of(n: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..n).map(|_| f()).fold(f64::MAX, f64::min)
}

struct Netns(String);

impl Netns {
    fn create() -> Option<Netns> {
        // On a machine shared with others' namespaces, TCLAB_BENCH_NETNS names this one.
        let name = std::env::var("TCLAB_BENCH_NETNS")
            .unwrap_or_else(|_| format!("tclab-bench-{}", std::process::id()));
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["netns", "add", &name]) {
            return None;
        }
        let ns = Netns(name);
        if !ok(&[
            "-n", &ns.0, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ]) || !ok(&["-n", &ns.0, "link", "set", "v0", "up"])
        {
            return None;
        }
        Some(ns)
    }
    fn exec(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn tclab(state: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(TCLAB);
    c.args(args)
        .env("TCLAB_STATE", state)
        .env_remove("TCLAB_CONTROL");
    c
}

fn row(what: &str, t: f64, k: Option<f64>) {
    match k {
        Some(k) => println!(
            "  {what:<44} tclab {:>8.3} s   kernel {:>8.3} s   ratio {:.2}",
            t,
            k,
            t / k
        ),
        None => println!("  {what:<44} tclab {t:>8.3} s   kernel  (skipped)"),
    }
}

fn main() {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("tclab-bench-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ns = Netns::create();
    if ns.is_none() {
        println!("(no network namespace here: kernel figures skipped)");
    }

    println!("tc -batch: 10 000 HTB classes + 10 000 pfifo leaves + 10 000 u32 filters");
    let tclab_batch = dir.join("tclab.batch");
    std::fs::write(&tclab_batch, batch("eth0", 10_000)).unwrap();
    let state = dir.join("policy.json");
    let _ = std::fs::remove_file(&state);
    // Standalone: a change to a large store would leave a resident engine behind it, which the rows
    // below start by hand where they measure one.
    let mut apply = tclab(&state, &["tc", "-batch", tclab_batch.to_str().unwrap()]);
    apply.env("TCLAB_SERVE", "off");
    let t_apply = timed(apply);
    // The first call after the apply, and standalone calls (TCLAB_SERVE=off): each loads the snapshot
    // the batch wrote.
    let cold = |args: &[&str]| {
        let mut c = tclab(&state, args);
        c.env("TCLAB_SERVE", "off");
        timed(c)
    };
    let first = cold(&["tc", "-s", "class", "show", "dev", "eth0"]);
    let t_show = best_of(3, || cold(&["tc", "-s", "class", "show", "dev", "eth0"]));
    let t_filters = best_of(3, || cold(&["tc", "filter", "show", "dev", "eth0"]));
    // The same with the snapshot put aside: every call replays the journal, as before issue 26.
    let snap = tclab_tc::snapshot::path_for(&state);
    let aside = dir.join("snapshot.aside");
    let had_snapshot = std::fs::rename(&snap, &aside).is_ok();
    let r_first = cold(&["tc", "-s", "class", "show", "dev", "eth0"]);
    let r_show = best_of(3, || cold(&["tc", "-s", "class", "show", "dev", "eth0"]));
    let r_filters = best_of(3, || cold(&["tc", "filter", "show", "dev", "eth0"]));
    if had_snapshot {
        std::fs::rename(&aside, &snap).unwrap();
    } else {
        println!("(the batch left no snapshot)");
    }
    let (mut k_apply, mut k_show, mut k_filters) = (None, None, None);
    if let Some(ns) = &ns {
        let kb = dir.join("kernel.batch");
        std::fs::write(&kb, batch("v0", 10_000)).unwrap();
        k_apply = Some(timed(ns.exec(&["tc", "-batch", kb.to_str().unwrap()])));
        k_show = Some(best_of(3, || {
            timed(ns.exec(&["tc", "-s", "class", "show", "dev", "v0"]))
        }));
        k_filters = Some(best_of(3, || {
            timed(ns.exec(&["tc", "filter", "show", "dev", "v0"]))
        }));
        let _ = ns
            .exec(&["tc", "qdisc", "del", "dev", "v0", "root"])
            .status();
    }
    // Through a resident engine (`tclab serve`, which a call that replays a large store starts).
    let mut serve = tclab(&state, &["serve", "--idle", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tclab serve");
    let socket = dir.join("policy.json.serve/control.sock");
    let t0 = Instant::now();
    while !socket.exists() && t0.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(socket.exists(), "tclab serve made no socket");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s_show = best_of(3, || {
        timed(tclab(&state, &["tc", "-s", "class", "show", "dev", "eth0"]))
    });
    let s_filters = best_of(3, || {
        timed(tclab(&state, &["tc", "filter", "show", "dev", "eth0"]))
    });
    // SIGTERM: it stops cleanly and removes its socket.
    let _ = Command::new("kill").arg(serve.id().to_string()).status();
    let _ = serve.wait();
    row("apply (tc -batch, 30 002 lines)", t_apply, k_apply);
    row("the first tc -s class show after it", first, k_show);
    row("tc -s class show, TCLAB_SERVE=off", t_show, k_show);
    row("tc filter show, TCLAB_SERVE=off", t_filters, k_filters);
    row("  without the snapshot: the first call", r_first, k_show);
    row("  without the snapshot: tc -s class show", r_show, k_show);
    row(
        "  without the snapshot: tc filter show",
        r_filters,
        k_filters,
    );
    row("resident engine: tc -s class show", s_show, k_show);
    row("resident engine: tc filter show", s_filters, k_filters);

    println!("shell script: 2 002 tc calls (1 000 HTB classes with leaves)");
    let tclab_script = dir.join("tclab.sh");
    std::fs::write(&tclab_script, script("sfq perturb 10")).unwrap();
    let _ = std::fs::remove_file(&state);
    let _ = std::fs::remove_file(&snap);
    let t_script = timed(tclab(
        &state,
        &["script", "run", tclab_script.to_str().unwrap()],
    ));
    let mut k_script = None;
    if let Some(ns) = &ns {
        let ks = dir.join("kernel.sh");
        std::fs::write(&ks, script("pfifo limit 100")).unwrap();
        let mut c = ns.exec(&["bash", ks.to_str().unwrap()]);
        c.env("DEV", "v0");
        k_script = Some(timed(c));
    }
    row(
        "tclab script run (sfq) / bash + tc (pfifo)",
        t_script,
        k_script,
    );
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
