//! `tclab live` and `tclab lab`: the commands around crates/live's bridge and lab.

use crate::args::{self, usage, CmdResult, Failure};
use crate::{compare, labbench, liveout, load_policy, path_text, shapebench, Loaded};
use tclab_core::engine::DevKind;
use tclab_core::Engine;

/// A policy for a bridge between `ports` with `queues` transmit queues, loaded and checked: it applies
/// whole, it names no device but the ports and its own ifbs (a typo such as `dev Eth0` would otherwise
/// shape a device no frame ever reaches, and say nothing), and with several queues it can be split
/// over them.
pub fn load_bridge_policy(
    file: &std::path::Path,
    ports: &[String],
    queues: u16,
    script_args: &[String],
) -> Result<BridgePolicy, Failure> {
    let f = path_text(file)?;
    if !file.is_file() {
        return Err(usage(format!("{f}: no such policy file")));
    }
    // With several queues the ports are multiqueue devices, so that an mq root has a class per queue.
    let setup: Vec<Vec<String>> = if queues > 1 {
        ports
            .iter()
            .map(|p| {
                ["link", "add", "dev", p, "numtxqueues", &queues.to_string()]
                    .map(String::from)
                    .to_vec()
            })
            .collect()
    } else {
        Vec::new()
    };
    let Loaded {
        engine,
        refusals,
        journal,
        script_error,
        records,
    } = load_policy("live", Some(f), &setup, script_args).map_err(|e| match e {
        Failure::Failed(m) => Failure::Usage(m),
        u => u,
    })?;
    if !refusals.is_empty() {
        let lines: Vec<String> = refusals
            .iter()
            .map(|(at, cmd, msg)| {
                format!(
                    "  {at}: `{cmd}`: {}",
                    msg.lines().next().unwrap_or("").trim()
                )
            })
            .collect();
        return Err(usage(format!(
            "{f}: the policy does not apply whole, so nothing is bridged:\n{}",
            lines.join("\n")
        )));
    }
    // A script that stopped part way (a command not found, a syntax error, an `exit 1`) built less
    // than it says, though every tc line it reached applied: `tclab check`'s script-failed.
    if let Some(e) = script_error {
        let at = if e.located {
            format!("{}: ", e.at)
        } else {
            String::new()
        };
        return Err(usage(format!(
            "{f}: the policy script failed, so nothing is bridged: {at}{}",
            e.message
        )));
    }
    if engine.teql().is_some() {
        return Err(usage(format!(
            "{f}: teql is not supported by tclab live: the bridge sends each port's frames out of the \
             other port and routes nothing, so no frame would reach the master teql0 and a slave's \
             teql0 would be a plain FIFO; bond lines in tclab sim, or with the kernel's sch_teql"
        )));
    }
    let strays: Vec<String> = engine
        .devices()
        .filter(|(n, d)| d.kind != DevKind::Ifb && !ports.iter().any(|p| p == n))
        .map(|(n, _)| format!("\"{n}\""))
        .collect();
    if !strays.is_empty() {
        return Err(usage(format!(
            "{f}: the policy names device {} but the bridge has {} (and the policy's ifb devices): \
             no frame would reach it",
            strays.join(", "),
            ports.join(" and ")
        )));
    }
    if let Some(why) = tclab_live::queues::refuse(&engine, ports, queues as usize) {
        return Err(usage(format!("{f}: {why}")));
    }
    let advice = check_advice(f, &engine, records);
    Ok(BridgePolicy {
        engine,
        journal,
        advice,
    })
}

/// A policy ready for a bridge.
pub struct BridgePolicy {
    pub engine: Engine,
    /// The records that rebuild the engine (one engine per queue's thread).
    pub journal: Vec<Vec<String>>,
    /// What `tclab check` finds wrong in it ([`check_advice`]): lines to print before bridging.
    pub advice: Vec<String>,
}

/// The errors and warnings `tclab check` finds in a policy that applied whole (a `bfifo limit 100`
/// leaf that drops every full-size packet, a filter a catch-all shadows…), as lines for the start of
/// a bridge: it runs the policy as written, but the admin deploying it hears of them before traffic
/// does. Without a line rate (`--link`), so the rules about the line stay quiet; notes are left out.
/// Nothing when the policy is clean.
fn check_advice(
    f: &str,
    engine: &Engine,
    records: Vec<tclab_tc::check::origins::Record>,
) -> Vec<String> {
    use tclab_tc::check::{check, origins::Origins, Options, Severity};
    let origins = Origins::new(records);
    let found: Vec<_> = check(engine, &[], None, &origins, &Options::default())
        .into_iter()
        .filter(|x| x.severity > Severity::Note)
        // With --queues the bridge names each mq class left unshaped itself (unshaped_queues).
        .filter(|x| x.code != "mq-queue-unshaped")
        .collect();
    if found.is_empty() {
        return Vec::new();
    }
    let count = |sev: Severity, one: &str, many: &str| match found
        .iter()
        .filter(|x| x.severity == sev)
        .count()
    {
        0 => None,
        1 => Some(format!("1 {one}")),
        n => Some(format!("{n} {many}")),
    };
    let counts: Vec<String> = [
        count(Severity::Error, "error", "errors"),
        count(Severity::Warning, "warning", "warnings"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut out = vec![format!(
        "tclab check finds {} in {f}; it is bridged as written (`tclab check {f}` says why and how to \
         fix each):",
        counts.join(" and ")
    )];
    const SHOWN: usize = 9;
    for x in found.iter().take(SHOWN) {
        let at = x
            .line
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        out.push(format!("  {}[{}] {}{at}", x.severity.name(), x.code, x.at));
    }
    if found.len() > SHOWN {
        out.push(format!("  and {} more", found.len() - SHOWN));
    }
    out
}

/// `--xdp` with `--queues N`: one AF_XDP socket per port, so one queue.
fn one_xdp_queue(xdp: bool, queues: u16) -> Result<(), Failure> {
    match xdp && queues > 1 {
        true => Err(usage(
            "--xdp serves one queue: give --queues 1 or bridge without --xdp",
        )),
        false => Ok(()),
    }
}

/// `tclab live`: bridge two interfaces through the policy until interrupted (or `--duration`).
pub fn live(a: args::LiveArgs) -> CmdResult {
    use tclab_live::{bridge::Bridge, sys};
    if a.devs.len() != 2 || a.devs[0] == a.devs[1] {
        return Err(usage("give two different devices: --dev A --dev B"));
    }
    let duration = match a.duration {
        Some(d) if !(d > 0.0 && d.is_finite()) => {
            return Err(usage(format!(
                "--duration {d}: give a positive number of seconds"
            )))
        }
        d => d.map(|s| (s * 1e9) as u64),
    };
    if a.out.is_none() && (a.no_plots || a.sample_ms != args::SAMPLE_MS) {
        return Err(usage("--sample-ms and --no-plots go with --out DIR"));
    }
    one_xdp_queue(a.xdp, a.queues)?;
    for d in &a.devs {
        sys::check_bridgeable(d).map_err(usage)?;
    }
    for w in tclab_live::bridge::kernel_qdisc_warnings(&a.devs) {
        println!("tclab live: warning: {w}");
    }
    let (engine, journal) = match &a.policy {
        None => (Engine::new(), Vec::new()),
        Some(p) => {
            let p = load_bridge_policy(p, &a.devs, a.queues, &a.args)?;
            for l in &p.advice {
                println!("tclab live: {l}");
            }
            (p.engine, p.journal)
        }
    };
    // The results are written after the capabilities are gone: the directory is made now, as root.
    let sampler = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| usage(format!("--out {}: {e}", dir.display())))?;
            Some(
                tclab_live::sampler::Sampler::new(a.sample_ms * 1_000_000, Some(dir))
                    .map_err(|e| usage(format!("--out {}: {e}", dir.display())))?,
            )
        }
        None => None,
    };
    let control = tclab_tc::control::live_socket()
        .ok_or("cannot name this network namespace (/proc/self/ns/net)")?;
    if a.queues > 1 {
        for w in tclab_live::queues::unshaped_queues(&engine, &a.devs) {
            println!("tclab live: warning: {w}");
        }
        return live_queues(&a, journal, duration, &control, sampler);
    }
    let (mut bridge, setup) = Bridge::new(engine, &a.devs, rings(&a))?;
    bridge.sampler = sampler;
    bridge.listen(&control)?;
    print_setup(&setup);
    sys::stop_on_signals();
    give_up_privileges();
    print_bridging(&a, &control, "");
    let started = std::time::Instant::now();
    let result = bridge.run(duration);
    let secs = started.elapsed().as_secs_f64();
    println!("\ntclab live: stopped after {secs:.1} s");
    print_port_stats(&bridge.stats());
    let now = bridge.now();
    let tc_text = tc_show_all(&mut bridge.engine, now);
    print!("{tc_text}");
    if let (Some(dir), Some(due)) = (&a.out, bridge.sampler.as_ref().map(|s| s.next_due())) {
        let counts = bridge.sample_counts(now.max(due));
        if let Some(sampler) = bridge.sampler.as_mut() {
            sampler.tick_counts(now.max(due), &counts);
            write_out(&a, dir, sampler, &tc_text)?;
        }
    }
    result?;
    Ok(0)
}

/// `tclab live --queues N` (N > 1): a thread and an engine per queue (`tclab_live::queues`).
fn live_queues(
    a: &args::LiveArgs,
    journal: Vec<Vec<String>>,
    duration: Option<u64>,
    control: &std::path::Path,
    mut sampler: Option<tclab_live::sampler::Sampler>,
) -> CmdResult {
    use tclab_live::queues::Queues;
    use tclab_live::sys;
    let n = a.queues as usize;
    let (ports, setup) = Queues::open(&a.devs, n, rings(a))?;
    print_setup(&setup);
    sys::stop_on_signals();
    // The threads inherit the scheduling policy and the (dropped) capabilities of this one.
    give_up_privileges();
    let mut queues = Queues::start(journal, ports)?;
    queues.listen(control)?;
    print_bridging(
        a,
        control,
        &format!(" on {n} queues (a thread each, frames spread by flow)"),
    );
    let started = std::time::Instant::now();
    queues.run(duration, sampler.as_mut());
    let secs = started.elapsed().as_secs_f64();
    println!("\ntclab live: stopped after {secs:.1} s");
    let tc_text = queues.show_all();
    // The last sample, of every queue's counters added up, before the threads stop.
    if let Some(s) = sampler.as_mut() {
        let now = queues.now();
        s.tick_counts(now.max(s.next_due()), &queues.counts());
    }
    let stats = queues.finish()?;
    print_port_stats(&stats);
    print!("{tc_text}");
    if let (Some(dir), Some(sampler)) = (&a.out, sampler.as_mut()) {
        write_out(a, dir, sampler, &tc_text)?;
    }
    Ok(0)
}

/// `--out DIR`'s files: the samples' CSV (written as the run went), tc.txt, plots and index.html.
fn write_out(
    a: &args::LiveArgs,
    dir: &std::path::Path,
    sampler: &mut tclab_live::sampler::Sampler,
    tc_text: &str,
) -> Result<(), Failure> {
    let title = format!("tclab live {} <-> {}", a.devs[0], a.devs[1]);
    let files = liveout::write(dir, sampler, tc_text, &title, !a.no_plots)?;
    println!(
        "tclab live: {} files in {}/{}",
        files.len(),
        dir.display(),
        if a.no_plots { "" } else { " (open index.html)" }
    );
    Ok(())
}

/// How the ports move frames: rings unless `--no-ring` or `--xdp`.
fn rings(a: &args::LiveArgs) -> tclab_live::bridge::Rings {
    use tclab_live::bridge::Rings;
    if a.xdp {
        Rings::Xdp
    } else if a.no_ring {
        Rings::Off
    } else {
        Rings::On
    }
}

/// What was done to the devices' offloads, whether they come back when tclab stops, and a device
/// whose ring the kernel refused.
fn print_setup(setup: &tclab_live::bridge::Setup) {
    // How frames move, said once, so that a log shows which path a run took.
    if setup.xdp {
        println!(
            "tclab live: frames through AF_XDP sockets (--xdp: copy mode, an XDP program in generic \
             mode on each port while tclab runs)"
        );
    } else if setup.rings.is_empty() {
        println!("tclab live: frames by recvmmsg and sendmmsg (--no-ring)");
    } else if setup.rings.iter().all(|r| r.rx.is_ok() && r.tx.is_ok()) {
        println!("tclab live: frames through TPACKET_V2 receive and transmit rings (mmap)");
    }
    for r in &setup.rings {
        if let Err(why) = &r.rx {
            println!(
                "tclab live: warning: {}: no receive ring ({why}); receiving with recvmmsg",
                r.dev
            );
        }
        if let Err(why) = &r.tx {
            println!(
                "tclab live: warning: {}: no transmit ring ({why}); sending with sendmmsg",
                r.dev
            );
        }
    }
    for (dev, turned) in &setup.offloads {
        if turned.is_empty() {
            println!("tclab live: {dev}: no segmentation, GRO or checksum offload on");
            continue;
        }
        let back = if setup.restored {
            "they are turned back on when tclab stops, however it stops".to_string()
        } else {
            format!(
                "they stay off after tclab stops: ethtool -K {dev} {} restores them",
                turned
                    .iter()
                    .map(|o| format!("{o} on"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        };
        println!(
            "tclab live: {dev}: turned off {} (offloads hand a shaper super-packets); {back}",
            turned.join(", ")
        );
    }
}

/// Real-time scheduling, then every capability dropped: the sockets are open and the offloads off.
fn give_up_privileges() {
    use tclab_live::sys;
    if !sys::realtime() {
        println!(
            "tclab live: real-time scheduling refused; wake-ups may be late on a busy machine"
        );
    }
    match sys::drop_capabilities() {
        Ok(()) => println!("tclab live: all capabilities dropped"),
        Err(e) => println!("tclab live: could not drop capabilities ({e}); running with them"),
    }
}

/// The line `tclab lab up` waits for: the bridge is running.
fn print_bridging(a: &args::LiveArgs, control: &std::path::Path, how: &str) {
    println!(
        "tclab live: bridging {} <-> {}{}{how}; SIGINT, SIGTERM or SIGHUP stops\ntclab live: tclab tc in this network namespace reaches the running policy ({})",
        a.devs[0],
        a.devs[1],
        a.policy
            .as_ref()
            .map_or(" without a policy".to_string(), |p| format!(" through {}", p.display())),
        control.display()
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// What each port received, sent and dropped, and how late the shaper's wake-ups were.
fn print_port_stats(stats: &[(String, tclab_live::bridge::PortStats)]) {
    for (name, st) in stats {
        println!(
            "{name}: received {} frames ({} bytes; {} through the ring), sent {} ({} bytes; {} through the ring); dropped: {} by ingress actions, {} malformed, {} oversize, {} stale, {} send errors, {} refused by the device (tx_dropped: longer than its MTU, or the device down), {} purged when it was set down; lost before tclab read them (ring or socket full): {}",
            st.rx_packets, st.rx_bytes, st.rx_ring, st.tx_packets, st.tx_bytes, st.tx_ring, st.rx_dropped, st.malformed, st.oversize, st.stale, st.tx_errors, st.tx_dropped, st.tx_purged, st.rx_lost
        );
        if st.rx_csum_partial > 0 {
            println!(
                "{name}: {} frames arrived without their TCP/UDP checksums (a veth peer's tx-checksum offload); tclab filled them in",
                st.rx_csum_partial
            );
        }
        if st.wakeups > 0 {
            println!(
                "{name}: {} shaper wake-ups, late by {:.1} µs on average, {:.1} µs at most",
                st.wakeups,
                st.late_ns_sum as f64 / st.wakeups as f64 / 1e3,
                st.late_ns_max as f64 / 1e3
            );
        }
    }
}

/// `tc -s qdisc|class|filter show` of every device (ingress filters too), each under a heading naming
/// it, as `tclab sim` writes tc.txt.
fn tc_show_all(engine: &mut Engine, now: tclab_core::Nanos) -> String {
    let mut text = String::new();
    for dev in engine.device_names() {
        text.push_str(&format!("### tc -s qdisc|class|filter show dev {dev}\n"));
        text.push_str(&tclab_tc::show_device(engine, &dev, now));
    }
    text
}

/// `tclab lab up|down|status|exec|compare|bench`.
pub fn lab(a: args::LabCmd) -> CmdResult {
    use args::LabSub;
    use tclab_live::lab::{Lab, Shaper};
    let lab = Lab::new(&a.prefix).map_err(usage)?;
    let exe = || {
        std::env::current_exe()
            .map_err(|e| Failure::from(format!("cannot find the tclab executable: {e}")))
    };
    match a.command {
        LabSub::Up {
            policy,
            kernel,
            out,
            queues,
            no_ring,
            xdp,
            args,
        } => {
            // Before anything is built: the bridge would refuse it only once the lab stood.
            one_xdp_queue(xdp, queues)?;
            Lab::check_root().map_err(usage)?;
            let policy = match policy {
                Some(p) => Some(
                    std::fs::canonicalize(&p)
                        .map_err(|e| usage(format!("--policy {}: {e}", p.display())))?,
                ),
                None => None,
            };
            // The policy is loaded here first, so that a mistake is reported before anything is built.
            if let (Some(p), false) = (&policy, kernel) {
                let loaded = load_bridge_policy(
                    p,
                    &["eth0".to_string(), "eth1".to_string()],
                    queues,
                    &args,
                )?;
                for l in &loaded.advice {
                    println!("tclab lab: {l}");
                }
            }
            // The bridge outlives this command: a relative --out is made absolute now.
            let out = match out {
                Some(o) => Some(
                    std::path::absolute(&o).map_err(|e| usage(format!("{}: {e}", o.display())))?,
                ),
                None => None,
            };
            let exe = exe()?;
            let shaper = if kernel {
                Shaper::Kernel {
                    policy: policy.as_deref(),
                }
            } else {
                Shaper::Tclab {
                    exe: &exe,
                    policy: policy.as_deref(),
                    out: out.as_deref(),
                    queues,
                    ring: !no_ring,
                    xdp,
                }
            };
            lab.up_with(shaper, &args)?;
            print!("{}", lab.status());
            Ok(0)
        }
        LabSub::Down => {
            if lab.existing().is_empty() && lab.bridge_pid().is_none() {
                println!("no lab with prefix \"{}\": nothing to remove", lab.prefix);
                return Ok(0);
            }
            let down = lab.down()?;
            print!("{}", down.log);
            println!("tclab lab: removed the lab \"{}\"", lab.prefix);
            // The bridge's own failure (results it could not write, an interface that went away).
            match down.bridge_error {
                Some(e) => Err(Failure::Failed(format!("tclab live failed: {e}"))),
                None => Ok(0),
            }
        }
        LabSub::Status => {
            print!("{}", lab.status());
            // Exit 1 when there is no lab, a node is missing or the bridge has stopped.
            Ok(if lab.healthy() { 0 } else { 1 })
        }
        LabSub::Compare { scenario, duration } => {
            compare::run(&scenario, &exe()?, &lab.prefix, duration)
        }
        LabSub::Bench { secs, shaping } => {
            if shaping {
                shapebench::run(&exe()?, &lab, secs)
            } else {
                labbench::run(&exe()?, &lab, secs)
            }
        }
        LabSub::Exec { node, command } => {
            let code = lab.exec(&node, &command).map_err(usage)?;
            Ok(code.clamp(0, 255) as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_teql_policy_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("tclab-live-teql-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bond.tc");
        std::fs::write(&file, "qdisc add dev eth0 root teql0\n").unwrap();
        let e = load_bridge_policy(&file, &["eth0".to_string(), "eth1".to_string()], 1, &[]);
        std::fs::remove_dir_all(&dir).unwrap();
        let Err(Failure::Usage(m)) = e else {
            panic!("a teql policy was accepted");
        };
        assert!(m.contains("teql is not supported by tclab live"), "{m}");
    }

    /// `tclab lab up --xdp --queues 2` used to build the lab, start a bridge that refused the
    /// pair, remove the lab and exit 1; it is a usage error, found before anything is built.
    #[test]
    fn lab_up_with_xdp_on_two_queues_is_refused_before_anything_is_built() {
        let cmd = args::LabCmd {
            command: args::LabSub::Up {
                policy: None,
                kernel: false,
                out: None,
                queues: 2,
                no_ring: false,
                xdp: true,
                args: Vec::new(),
            },
            prefix: "rv-xq".into(),
        };
        let Err(Failure::Usage(m)) = lab(cmd) else {
            panic!("accepted, or refused as a failure rather than a usage error");
        };
        assert!(m.contains("--xdp serves one queue"), "{m}");
        let list = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        assert!(!list.contains("rv-xq-"), "nothing was built: {list}");
    }

    /// What `tclab check` finds in a policy that applies is said before the bridge starts (it used to
    /// bridge a `bfifo limit 100` leaf, which drops every full-size packet, without a word); a clean
    /// policy, notes aside, gets nothing.
    #[test]
    fn check_findings_are_said_before_bridging() {
        let dir = std::env::temp_dir().join(format!("tclab-live-advice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = ["eth0".to_string(), "eth1".to_string()];
        let head = "qdisc add dev eth0 root handle 1: htb default 10\n\
                    class add dev eth0 parent 1: classid 1:10 htb rate 10mbit\n";
        let bad = dir.join("bad.tc");
        std::fs::write(
            &bad,
            format!("{head}qdisc add dev eth0 parent 1:10 bfifo limit 100\n"),
        )
        .unwrap();
        let good = dir.join("good.tc");
        std::fs::write(
            &good,
            format!("{head}qdisc add dev eth0 parent 1:10 fq_codel\n"),
        )
        .unwrap();
        let (bad_r, good_r) = (
            load_bridge_policy(&bad, &ports, 1, &[]),
            load_bridge_policy(&good, &ports, 1, &[]),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let advice = bad_r
            .unwrap_or_else(|_| panic!("a policy that applies was refused"))
            .advice;
        assert_eq!(advice.len(), 2, "{advice:?}");
        assert!(
            advice[0].starts_with("tclab check finds 1 error in ")
                && advice[0].contains("it is bridged as written"),
            "{advice:?}"
        );
        assert!(
            advice[1].starts_with("  error[queue-below-packet] eth0 class htb 1:10 (")
                && advice[1].ends_with("bad.tc:3)"),
            "{advice:?}"
        );
        let advice = good_r.unwrap_or_else(|_| panic!("refused")).advice;
        assert!(advice.is_empty(), "{advice:?}");
        // An mq class left unshaped on two queues is the bridge's own warning, not said twice.
        let dir = std::env::temp_dir().join(format!("tclab-live-advice-mq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mq = dir.join("mq.tc");
        std::fs::write(
            &mq,
            "qdisc add dev eth0 root handle 7fff: mq\n\
             qdisc add dev eth0 parent 7fff:1 handle 1: htb default 10\n\
             class add dev eth0 parent 1: classid 1:10 htb rate 5mbit\n\
             qdisc add dev eth0 parent 1:10 fq_codel\n",
        )
        .unwrap();
        let r = load_bridge_policy(&mq, &ports, 2, &[]);
        std::fs::remove_dir_all(&dir).unwrap();
        let advice = r.unwrap_or_else(|_| panic!("refused")).advice;
        assert!(advice.is_empty(), "{advice:?}");
    }

    /// A script that stops half way leaves a policy that is not what it says (here: a typo of `tc`
    /// that bash cannot find). It used to be bridged as it stood, exit 0, and said nothing.
    #[test]
    fn a_policy_script_that_fails_half_way_is_refused() {
        let dir = std::env::temp_dir().join(format!("tclab-live-half-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = ["eth0".to_string(), "eth1".to_string()];
        let typo = dir.join("typo.sh");
        std::fs::write(&typo, "#!/bin/sh\ntcc qdisc add dev eth0 root fq_codel\n").unwrap();
        let exits = dir.join("exits.sh");
        std::fs::write(&exits, "#!/bin/sh\nexit 3\n").unwrap();
        let (typo_r, exits_r) = (
            load_bridge_policy(&typo, &ports, 1, &[]),
            load_bridge_policy(&exits, &ports, 1, &[]),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let Err(Failure::Usage(m)) = typo_r else {
            panic!("a script that failed at its line 2 was bridged");
        };
        assert!(
            m.contains("the policy script failed, so nothing is bridged")
                && m.contains("typo.sh:2: bash: tcc: command not found"),
            "{m}"
        );
        let Err(Failure::Usage(m)) = exits_r else {
            panic!("a script that exited with status 3 was bridged");
        };
        assert!(m.contains("the script exited with 3"), "{m}");
    }

    /// A script that takes its device and rate as arguments (`-- eth1 5mbit`), as check and explain
    /// pass them: live and lab up had no way to, and such a script stopped at its usage line.
    #[test]
    fn a_policy_scripts_arguments_reach_it() {
        let dir = std::env::temp_dir().join(format!("tclab-live-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = ["eth0".to_string(), "eth1".to_string()];
        let wan = dir.join("wan.sh");
        std::fs::write(
            &wan,
            "#!/bin/sh\n[ -n \"$2\" ] || { echo \"usage: wan.sh DEV RATE\" >&2; exit 1; }\n\
             tc qdisc add dev $1 root handle 1: htb default 10\n\
             tc class add dev $1 parent 1: classid 1:10 htb rate $2\n",
        )
        .unwrap();
        let args = ["eth1".to_string(), "5mbit".to_string()];
        let (with, without) = (
            load_bridge_policy(&wan, &ports, 1, &args),
            load_bridge_policy(&wan, &ports, 1, &[]),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let mut engine = with
            .unwrap_or_else(|_| panic!("refused with its arguments"))
            .engine;
        let out = tclab_tc::run(
            &mut engine,
            &["class", "show", "dev", "eth1"].map(String::from),
            0,
        );
        assert!(
            out.stdout.contains("class htb 1:10 root prio 0 rate 5Mbit"),
            "{}",
            out.stdout
        );
        let Err(Failure::Usage(m)) = without else {
            panic!("bridged without its arguments");
        };
        assert!(m.contains("usage: wan.sh DEV RATE"), "{m}");
    }
}
