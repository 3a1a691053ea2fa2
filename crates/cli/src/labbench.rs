//! `tclab lab bench`: how fast the live bridge forwards, beside the kernel's bridge between the same
//! namespaces in the same run. iperf3 sends UDP as fast as it can from node-2 to node-1, once with
//! 64-byte frames (packets per second) and once with 1514-byte frames (bit rate), through tclab live
//! without a policy and with an HTB of 1 000 classes — each with its receive rings, without them
//! (`--no-ring`), on two queues and with AF_XDP sockets (`--xdp`) — and the kernel's bridge without and with the same HTB. The figure
//! is what the receivers got: iperf3 itself may be the limit (it is one sender thread, and at 64 bytes
//! the receiving socket overflows first), which the kernel's row shows; so at 64 bytes the frames the
//! router sent out of its eth0 per second (`ip -s link`) are printed too. Beside them, the CPU time
//! tclab live's threads ran per frame received: on a machine shared with other work the rate follows
//! the share of the cores the bridge got, its cost per frame much less.

use crate::args::{usage, CmdResult, Failure};
use std::path::Path;
use std::process::{Command, Stdio};
use tclab_live::lab::{Lab, Shaper};

/// An HTB of `n` leaf classes under one 10 Gbit/s class, traffic to the first leaf by default.
///
/// Every 10 Gbit/s rate and ceil is given `burst 64k`: tc's default is rate/HZ + MTU bytes with
/// HZ = 10⁹ (this kernel's high-resolution psched clock), 1 601 bytes, turned into a time truncated
/// to whole microseconds and then to ticks (15 of 64 ns at 10 Gbit/s: 1 200 bytes), less than one
/// 1514-byte frame — `tc -d class show` prints `burst 0b` (tc 6.1 and tclab alike). Such a class is
/// over its limit after nearly every frame and waits to be woken again: 77 789 wake-ups in 2 s
/// against 1 204 with 64 KB, 0.65 against 1.14 Gbit/s through tclab live in a review's runs. The
/// kernel's HTB meets the same, so both rows get the explicit burst (the leaves' 10 Mbit/s rates
/// keep their default, 1 600 bytes, which is whole).
const BURST: &str = "burst 64k cburst 64k";
const LEAF_BURST: &str = "cburst 64k";

fn htb_classes(n: u32) -> String {
    let mut s = format!(
        "#!/bin/sh\ntc qdisc add dev eth0 root handle 1: htb default 2\n\
         tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit {BURST}\n"
    );
    for i in 2..n + 2 {
        s.push_str(&format!(
            "tc class add dev eth0 parent 1:1 classid 1:{i:x} htb rate 10mbit ceil 10gbit {LEAF_BURST}\n"
        ));
    }
    s
}

/// The same tree, once per transmit queue under an mq root (`tclab live --queues N`): `n` leaves each.
fn mq_htb_classes(queues: u32, n: u32) -> String {
    let mut s = String::from("#!/bin/sh\ntc qdisc add dev eth0 root handle 7fff: mq\n");
    for q in 1..=queues {
        s.push_str(&format!(
            "tc qdisc add dev eth0 parent 7fff:{q:x} handle {q:x}: htb default 2\n\
             tc class add dev eth0 parent {q:x}: classid {q:x}:1 htb rate 10gbit ceil 10gbit {BURST}\n"
        ));
        for i in 2..n + 2 {
            s.push_str(&format!(
                "tc class add dev eth0 parent {q:x}:1 classid {q:x}:{i:x} htb rate 10mbit ceil 10gbit {LEAF_BURST}\n"
            ));
        }
    }
    s
}

/// Nanoseconds of CPU every thread of process `pid` has run so far (`/proc/PID/task/*/schedstat`'s
/// first field): what the bridge costs, whatever share of the machine it got.
pub(crate) fn cpu_ns(pid: i32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = 0;
    for t in tasks.flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        sum += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(sum)
}

/// The frames the router has sent out of its eth0 (toward node-1's receivers), as the device counts
/// them (`ip -s link`): what tclab live or the kernel's bridge forwarded, whether or not the receiving
/// iperf3 kept up (at 64 bytes its socket buffer overflows first: `UdpRcvbufErrors` in node-1).
fn router_tx_packets(lab: &Lab) -> Option<u64> {
    let out = Command::new("ip")
        .args([
            "-n",
            &lab.ns("router"),
            "-j",
            "-s",
            "link",
            "show",
            "dev",
            "eth0",
        ])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v[0]["stats64"]["tx"]["packets"].as_u64()
}

/// What one iperf3 sender's JSON says its receiver got: (packets, seconds). One that measured nothing
/// (stopped by the time limit, or refused) is an error with iperf3's own message.
fn sender_measured(v: &serde_json::Value) -> Result<(f64, f64), String> {
    let sum = &v["end"]["sum"];
    let packets =
        sum["packets"].as_f64().unwrap_or(0.0) - sum["lost_packets"].as_f64().unwrap_or(0.0);
    let seconds = sum["seconds"]
        .as_f64()
        .filter(|s| *s > 0.0)
        .ok_or_else(|| {
            format!(
                "an iperf3 sender measured nothing (iperf3: {})",
                v["error"].as_str().unwrap_or("no error given")
            )
        })?;
    Ok((packets, seconds))
}

/// A sender's `-J` report. Where there is none (iperf3 not found in the node, `ip netns exec` or
/// `timeout` failing: nothing on stdout), what it wrote to stderr is the reason, said on one line
/// with its exit status rather than as a JSON parser's complaint about an empty text.
fn iperf3_json(out: &std::process::Output) -> Result<serde_json::Value, String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Err(format!(
            "an iperf3 sender printed no report ({}): {said}",
            out.status
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("an iperf3 sender's report is not JSON ({e}): {said}"))
}

/// [`udp_rate`], once more if an iperf3 sender measured nothing: under a flood one sometimes never
/// finishes its test and is stopped by its time limit, which says nothing of the router.
fn udp_rate_retried(
    lab: &Lab,
    payload: u32,
    secs: u32,
    streams: u16,
) -> Result<(f64, f64, Option<f64>, Option<f64>), String> {
    udp_rate(lab, payload, secs, streams).or_else(|e| {
        // A Ctrl-C stops the senders too: that says nothing to measure again.
        if crate::compare::stopped() {
            return Err(e);
        }
        eprintln!("tclab lab bench: {e}; measuring again");
        udp_rate(lab, payload, secs, streams)
    })
}

/// (packets per second, bits per second of frames) the receiver got from `streams` iperf3 UDP senders
/// run at once (separate processes: iperf3 3.12 sends from one thread), each its own flow; and the
/// CPU time tclab live spent per packet received, in nanoseconds (`None` for the kernel's bridge);
/// and the packets per second the router forwarded toward the receivers over the same time.
fn udp_rate(
    lab: &Lab,
    payload: u32,
    secs: u32,
    streams: u16,
) -> Result<(f64, f64, Option<f64>, Option<f64>), String> {
    let ns = |n: &str| lab.ns(n);
    let mut servers = Vec::new();
    for i in 0..streams {
        let server = Command::new("ip")
            .args(["netns", "exec", &ns("node-1"), "iperf3", "-s", "-1", "-p"])
            .arg((5299 + i).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3: {e}"))?;
        servers.push(server);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let bridge = lab.bridge_pid();
    let cpu_start = bridge.and_then(cpu_ns);
    let tx_start = router_tx_packets(lab);
    let clients: Vec<_> = (0..streams)
        .map(|i| {
            Command::new("timeout")
                .arg((secs + 20).to_string())
                .args([
                    "ip",
                    "netns",
                    "exec",
                    &ns("node-2"),
                    "iperf3",
                    "-c",
                    "10.0.1.1",
                    "-p",
                ])
                .arg((5299 + i).to_string())
                .args([
                    "-u",
                    "-b",
                    "0",
                    "-l",
                    &payload.to_string(),
                    "-t",
                    &secs.to_string(),
                    "-J",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("iperf3: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut pps = 0.0;
    let mut packets_all = 0.0;
    let mut seconds_max: f64 = 0.0;
    // Every sender waited for and every receiver stopped before a failure is returned, so that a
    // measurement taken again meets none of them.
    let outs: Vec<_> = clients.into_iter().map(|c| c.wait_with_output()).collect();
    for mut s in servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    for out in outs {
        let out = out.map_err(|e| format!("iperf3: {e}"))?;
        let (packets, seconds) = sender_measured(&iperf3_json(&out)?)?;
        pps += packets / seconds;
        packets_all += packets;
        seconds_max = seconds_max.max(seconds);
    }
    let forwarded = match (router_tx_packets(lab), tx_start) {
        (Some(end), Some(start)) if seconds_max > 0.0 => {
            Some(end.saturating_sub(start) as f64 / seconds_max)
        }
        _ => None,
    };
    let cpu = match (bridge.and_then(cpu_ns), cpu_start) {
        (Some(end), Some(start)) if packets_all > 0.0 => {
            Some(end.saturating_sub(start) as f64 / packets_all)
        }
        _ => None,
    };
    // A frame: payload + UDP 8 + IPv4 20 + Ethernet 14.
    Ok((pps, pps * (payload + 42) as f64 * 8.0, cpu, forwarded))
}

/// A bench stopped by a signal, its last lab removed.
pub(crate) fn interrupted(lab: &Lab) -> crate::args::Failure {
    crate::args::Failure::Failed(format!(
        "interrupted: the lab \"{}\" is removed; the rows above were measured",
        lab.prefix
    ))
}

/// `load average WHEN: 1, 5 and 15 minutes` from /proc/loadavg.
pub(crate) fn load_average(when: &str) -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let v: Vec<&str> = text.split_whitespace().take(3).collect();
    match v.as_slice() {
        [a, b, c] => format!("load average {when}: {a}, {b}, {c} (1, 5, 15 minutes)"),
        _ => format!("load average {when}: unknown (no /proc/loadavg)"),
    }
}

/// The summary lines under the table: tclab's rows against the kernel's and against each other,
/// from `rows` in the order of `run`'s cases (0-3 tclab without a policy: rings, --no-ring, 2 queues,
/// --xdp; 4-7 the same with the HTB; 8 and 9 the kernel's bridge without and with it), each a
/// (packets/s at 64 B, bit/s at 1514 B). A ratio with a failed row on either side is shown as "—".
fn ratios(rows: &[Option<(f64, f64)>]) -> Vec<String> {
    let r = |a: usize, b: usize, bits: bool| match (
        rows.get(a).copied().flatten(),
        rows.get(b).copied().flatten(),
    ) {
        (Some(x), Some(y)) => {
            let (x, y) = if bits { (x.1, y.1) } else { (x.0, y.0) };
            format!("{:.2}", x / y)
        }
        _ => "—".to_string(),
    };
    let mut out = Vec::new();
    for (what, first, k) in [("without a policy", 0, 8), ("with HTB", 4, 9)] {
        out.push(format!(
            "tclab / kernel, {what}: {} of the packet rate and {} of the bit rate with rings, {} and {} with --no-ring, {} and {} on 2 queues, {} and {} with --xdp",
            r(first, k, false), r(first, k, true),
            r(first + 1, k, false), r(first + 1, k, true),
            r(first + 2, k, false), r(first + 2, k, true),
            r(first + 3, k, false), r(first + 3, k, true),
        ));
    }
    out.push(format!(
        "2 queues / 1 queue: {} of the packet rate without a policy, {} with HTB",
        r(2, 0, false),
        r(6, 4, false)
    ));
    out.push(format!(
        "--xdp / rings: {} of the packet rate and {} of the bit rate without a policy, {} and {} with HTB",
        r(3, 0, false),
        r(3, 0, true),
        r(7, 4, false),
        r(7, 4, true)
    ));
    out
}

/// What both benches refuse before they build anything (exit 64): not root, no time, or `lab`'s
/// prefix taken — each builds and removes labs of its own, not over one a user has up. `command` is
/// the bench's own words, for the hint.
pub(crate) fn check_bench(lab: &Lab, secs: u32, command: &str) -> Result<(), Failure> {
    Lab::check_root().map_err(usage)?;
    if secs == 0 {
        return Err(usage("--secs must be at least 1"));
    }
    if !lab.existing().is_empty() || lab.bridge_pid().is_some() {
        return Err(usage(format!(
            "a lab with prefix \"{}\" is up: the bench builds labs of its own, give it another (tclab lab --prefix NAME {command})",
            lab.prefix
        )));
    }
    Ok(())
}

pub fn run(exe: &Path, lab: &Lab, secs: u32) -> CmdResult {
    check_bench(lab, secs, "bench")?;
    let dir = std::env::temp_dir().join(format!("tclab-labbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let htb = dir.join("htb1000.sh");
    std::fs::write(&htb, htb_classes(1000)).map_err(|e| e.to_string())?;
    let mq_htb = dir.join("mq-htb1000.sh");
    std::fs::write(&mq_htb, mq_htb_classes(2, 1000)).map_err(|e| e.to_string())?;
    /// How tclab's bridge moves frames in a row.
    #[derive(Clone, Copy)]
    enum Io {
        Rings,
        Calls,
        Xdp,
    }
    fn tclab<'a>(exe: &'a Path, policy: Option<&'a Path>, queues: u16, io: Io) -> Shaper<'a> {
        Shaper::Tclab {
            exe,
            policy,
            out: None,
            queues,
            ring: !matches!(io, Io::Calls),
            xdp: matches!(io, Io::Xdp),
        }
    }
    // Rows 0-3 and 4-7: tclab on one queue with its receive rings, without them (--no-ring), on two
    // queues, with AF_XDP sockets (--xdp); rows 8 and 9 the kernel's.
    let cases: [(&str, Shaper); 10] = [
        ("tclab live, no policy", tclab(exe, None, 1, Io::Rings)),
        (
            "tclab live --no-ring, no policy",
            tclab(exe, None, 1, Io::Calls),
        ),
        (
            "tclab live --queues 2, no policy",
            tclab(exe, None, 2, Io::Rings),
        ),
        ("tclab live --xdp, no policy", tclab(exe, None, 1, Io::Xdp)),
        (
            "tclab live, HTB 1 000 classes",
            tclab(exe, Some(&htb), 1, Io::Rings),
        ),
        (
            "tclab live --no-ring, HTB 1 000 classes",
            tclab(exe, Some(&htb), 1, Io::Calls),
        ),
        (
            "tclab live --queues 2, mq + 2 such HTBs",
            tclab(exe, Some(&mq_htb), 2, Io::Rings),
        ),
        (
            "tclab live --xdp, HTB 1 000 classes",
            tclab(exe, Some(&htb), 1, Io::Xdp),
        ),
        ("kernel bridge, no policy", Shaper::Kernel { policy: None }),
        (
            "kernel bridge, HTB 1 000 classes",
            Shaper::Kernel { policy: Some(&htb) },
        ),
    ];
    // Four flows: the fanout hash puts all on one queue only one time in eight.
    const STREAMS: u16 = 4;
    println!(
        "UDP node-2 -> node-1 through the router, {STREAMS} iperf3 senders (-b 0, a process each) for {secs} s each"
    );
    // The rates follow the share of the cores the bridge gets beside the senders: what else ran is
    // part of the result.
    println!("{}", load_average("at the start"));
    println!(
        "{:<42} {:>14} {:>14} {:>16}   tclab's CPU per frame (64 B, 1514 B)",
        "router", "64 B received", "64 B forwarded", "1514 B frames"
    );
    // A row that cannot be measured (the lab not built, a measurement failed twice) is said with
    // its reason, and the bench goes on: one bad row must not lose the others.
    let mut rows: Vec<Option<(f64, f64)>> = Vec::new();
    // SIGINT, SIGTERM or SIGHUP end the bench after the row under way, its lab removed: it used to
    // die at once and leave that lab up, its bridge and iperf3 servers running.
    tclab_live::sys::stop_on_signals();
    for (name, shaper) in cases {
        let measured = lab.up(shaper).and_then(|()| {
            let small = udp_rate_retried(lab, 22, secs, STREAMS)?;
            let large = udp_rate_retried(lab, 1472, secs, STREAMS)?;
            Ok((small, large))
        });
        let _ = lab.down();
        if crate::compare::stopped() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(interrupted(lab));
        }
        let (small, large) = match measured {
            Ok(m) => m,
            Err(e) => {
                println!("{name:<42} failed: {e}");
                rows.push(None);
                continue;
            }
        };
        let cpu = match (small.2, large.2) {
            (Some(a), Some(b)) => format!("   {:.1} µs, {:.1} µs", a / 1e3, b / 1e3),
            _ => String::new(),
        };
        let sent = small.3.map_or("?".to_string(), |f| format!("{f:.0}"));
        println!(
            "{name:<42} {:>10.0} pps {:>10} pps {:>10.3} Gbit/s{cpu}",
            small.0,
            sent,
            large.1 / 1e9
        );
        rows.push(Some((small.0, large.1)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{}", load_average("at the end"));
    for line in ratios(&rows) {
        println!("{line}");
    }
    let failed = rows.iter().filter(|r| r.is_none()).count();
    if failed > 0 {
        println!(
            "{failed} of {} rows failed (above, with their reasons)",
            rows.len()
        );
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The review's failure: a row measured nothing twice and the whole table was lost. Now its
    /// ratios are "—" and the others' are still computed.
    #[test]
    fn a_failed_row_leaves_its_ratios_blank_and_the_others_whole() {
        let mut rows = vec![Some((100.0, 1e9)); 10];
        rows[1] = None; // --no-ring without a policy failed
        rows[8] = Some((200.0, 2e9)); // the kernel's bridge, twice as fast
        let lines = ratios(&rows);
        assert_eq!(
            lines[0],
            "tclab / kernel, without a policy: 0.50 of the packet rate and 0.50 of the bit rate with rings, — and — with --no-ring, 0.50 and 0.50 on 2 queues, 0.50 and 0.50 with --xdp"
        );
        assert!(
            lines[1].starts_with("tclab / kernel, with HTB: 1.00 of the packet rate"),
            "{}",
            lines[1]
        );
        rows[9] = None; // and the kernel's HTB row
        assert!(ratios(&rows)[1].contains("— of the packet rate and — of the bit rate with rings"));
    }

    /// Every 10 Gbit/s class of the bench's trees has an explicit burst: tc's default is less than a
    /// frame there (`burst 0b`, see BURST), checked here through tclab's own tc.
    #[test]
    fn the_bench_trees_classes_burst_whole_frames() {
        for script in [htb_classes(3), mq_htb_classes(2, 3)] {
            let mut e = tclab_core::Engine::new();
            // Two transmit queues, as tclab live --queues 2 makes its ports (mq needs them).
            tclab_tc::store::apply_record(
                &mut e,
                &["link", "add", "dev", "eth0", "numtxqueues", "2"].map(String::from),
            )
            .unwrap();
            for l in script.lines().filter(|l| l.starts_with("tc ")) {
                let words: Vec<String> = l.split_whitespace().skip(1).map(String::from).collect();
                let out = tclab_tc::run(&mut e, &words, 0);
                assert_eq!(out.code, 0, "{l}: {}", out.stderr);
            }
            let words: Vec<String> = "-d class show dev eth0"
                .split(' ')
                .map(String::from)
                .collect();
            let shown = tclab_tc::run(&mut e, &words, 0).stdout;
            assert!(!shown.contains(" 0b/"), "a class bursts 0 bytes:\n{shown}");
            // 64 KB as 51 µs at 10 Gbit/s (truncated twice, as above): 63 750 bytes, as this
            // machine's tc prints it for the same commands.
            assert!(
                shown.contains(
                    "ceil 10Gbit linklayer ethernet burst 63750b/1 mpu 0b cburst 63750b/1"
                ),
                "{shown}"
            );
            assert!(
                shown.contains("rate 10Mbit ceil 10Gbit linklayer ethernet burst 1600b/1 mpu 0b cburst 63750b/1"),
                "{shown}"
            );
        }
        // Without it, as tc 6.1 prints it on this machine for `rate 10gbit ceil 10gbit`.
        let mut e = tclab_core::Engine::new();
        e.add_device("eth0", 1500, 1000);
        for l in [
            "qdisc add dev eth0 root handle 1: htb",
            "class add dev eth0 parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
            "-d class show dev eth0",
        ] {
            let words: Vec<String> = l.split(' ').map(String::from).collect();
            let out = tclab_tc::run(&mut e, &words, 0);
            if l.starts_with("-d") {
                assert!(
                    out.stdout.contains("burst 0b/1 mpu 0b cburst 0b/1"),
                    "{}",
                    out.stdout
                );
            }
        }
    }

    /// A sender that could not run (here: iperf3 missing in the node) is said on one line with its
    /// status and stderr; it was "iperf3's output: EOF while parsing a value at line 1 column 0: …"
    /// with stderr's newline before the "; measuring again" that follows it.
    #[test]
    fn a_sender_without_a_report_is_said_with_its_stderr() {
        use std::os::unix::process::ExitStatusExt;
        let out = |stdout: &str, status: i32| std::process::Output {
            status: std::process::ExitStatus::from_raw(status << 8),
            stdout: stdout.into(),
            stderr: "exec of \"iperf3\" failed: No such file or directory\n".into(),
        };
        assert_eq!(
            iperf3_json(&out("", 255)),
            Err("an iperf3 sender printed no report (exit status: 255): exec of \"iperf3\" failed: No such file or directory".to_string())
        );
        let e = iperf3_json(&out("{\"start\":", 1)).unwrap_err();
        assert!(
            e.starts_with("an iperf3 sender's report is not JSON (EOF"),
            "{e}"
        );
        assert!(!e.ends_with('\n'), "{e:?}");
        assert_eq!(
            iperf3_json(&out("{\"end\": {}}\n", 0)),
            Ok(serde_json::json!({"end": {}}))
        );
    }

    /// A sender that hung and was stopped by its time limit, as iperf3 3.12 writes its JSON then (seen
    /// in a review: `tclab lab bench` stopped with "iperf3 ran no time", iperf3's reason unsaid).
    #[test]
    fn a_sender_that_measured_nothing_is_said_with_iperf3s_reason() {
        let v = serde_json::json!({
            "start": {},
            "intervals": [],
            "end": {"sum": {"seconds": 0, "packets": 0, "lost_packets": 0}},
            "error": "interrupt - the client has terminated"
        });
        assert_eq!(
            sender_measured(&v),
            Err(
                "an iperf3 sender measured nothing (iperf3: interrupt - the client has terminated)"
                    .to_string()
            )
        );
        let v = serde_json::json!({"end": {"sum": {"seconds": 2.0, "packets": 900, "lost_packets": 100}}});
        assert_eq!(sender_measured(&v), Ok((800.0, 2.0)));
    }
}
