//! `tclab lab compare SCENARIO`: one scenario, simulated and live, side by side.
//!
//! The scenario must be a lab's shape: three nodes in a chain, the middle one's policy on its `eth0`
//! (toward the first) and `eth1` (toward the last), TCP, UDP and ping traffic between the two ends. It
//! runs in the simulator as `tclab sim` runs it; then `tclab lab` builds the chain from namespaces, the
//! middle node's policy — the commands the simulator applied, as a policy store — goes to `tclab live`
//! on the router, and real iperf3 and ping send the same traffic at the same times. Each flow's goodput
//! and each ping's RTTs are printed from both, with the difference.
//!
//! What a lab does not reproduce, and says so: the links' rates, delays and losses (veths have none:
//! the comparison means something where the policy is the bottleneck), TCP ECN negotiation, and a
//! seed's randomness (the live run is one sample).

use crate::args::{usage, CmdResult, Failure};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tclab_live::lab::{Lab, Shaper};
use tclab_sim::run::Outcome;
use tclab_sim::scenario::{Scenario, TrafficKind};

/// The lab's node for each scenario node, and what the lab leaves out.
struct Mapping {
    /// Scenario node id → lab node name.
    nodes: Vec<&'static str>,
    router: usize,
    notes: Vec<String>,
}

/// iperf3's `MAX_STREAMS`: the most parallel streams (`-P`) one client runs.
const IPERF3_MAX_STREAMS: u32 = 128;

fn map_scenario(sc: &Scenario) -> Result<Mapping, String> {
    let net = &sc.net;
    if net.nodes.len() != 3 {
        return Err(format!(
            "a lab has three nodes in a chain; this scenario has {}",
            net.nodes.len()
        ));
    }
    // The router: the node with two interfaces, eth0 and eth1.
    let router = (0..3)
        .find(|&n| net.nodes[n].ifaces.len() == 2)
        .ok_or("a lab is a chain: no node has two links")?;
    let mut nodes = vec![""; 3];
    nodes[router] = "router";
    for &i in &net.nodes[router].ifaces {
        let ifc = &net.ifaces[i];
        let peer = net.ifaces[ifc.peer].node;
        nodes[peer] = match ifc.name.as_str() {
            "eth0" => "node-1",
            "eth1" => "node-2",
            other => {
                return Err(format!(
                    "the router's interfaces must be eth0 and eth1 (as tclab lab names them), not {other}"
                ))
            }
        };
    }
    if nodes.contains(&"") {
        return Err("a lab is a chain of three nodes".into());
    }
    for (node, _) in &sc.policies {
        if node != &net.nodes[router].name {
            return Err(format!(
                "only the middle node ({}) can have a policy in a lab; {node} has one",
                net.nodes[router].name
            ));
        }
    }
    let mut notes = Vec::new();
    let links: Vec<String> = net.nodes[router]
        .ifaces
        .iter()
        .map(|&i| &net.ifaces[i].link)
        .filter(|l| {
            l.rate_bps < 1_000_000_000 || l.delay > 1_000_000 || l.loss > 0.0 || l.jitter > 0
        })
        .map(|l| format!("{} Mbit/s, {} µs", l.rate_bps as f64 / 1e6, l.delay / 1000))
        .collect();
    if !links.is_empty() {
        notes.push(format!(
            "the lab's veths have no rate, delay or loss; the scenario's links ({}) are not reproduced",
            links.join("; ")
        ));
    }
    for t in &sc.traffic {
        if t.from == router || t.to == router {
            return Err(format!(
                "traffic \"{}\" starts or ends at the router: a lab's traffic runs between node-1 and node-2",
                t.name
            ));
        }
        // iperf3 3.x refuses more (`number of parallel streams too large`), which the live run
        // found only after the whole simulation.
        if t.streams > IPERF3_MAX_STREAMS && !matches!(t.kind, TrafficKind::Ping { .. }) {
            return Err(format!(
                "traffic \"{}\": {} streams, and iperf3 runs at most {IPERF3_MAX_STREAMS} in one client (-P): \
                 split it into entries of at most {IPERF3_MAX_STREAMS}",
                t.name, t.streams
            ));
        }
        if let TrafficKind::Tcp { ecn: true, .. } = t.kind {
            notes.push(format!("\"{}\": ECN is not negotiated live", t.name));
        }
        if t.streams > 1 && !matches!(t.kind, TrafficKind::Ping { .. }) {
            notes.push(format!(
                "\"{}\": its {} streams share port {} live (iperf3 -P); the simulator gives stream s port {} + s",
                t.name, t.streams, t.port, t.port
            ));
        }
    }
    Ok(Mapping {
        nodes,
        router,
        notes,
    })
}

/// The router's policy as store records for tclab live, read as the simulator read it (only the
/// router has one: [`map_scenario`]): its `ip route` lines `route` records, `ip link` and `modprobe`
/// lines `link` records, tc lines (with or without their `tc`) `tc` records.
fn router_records(sc: &Scenario) -> Result<Vec<Vec<String>>, String> {
    let mut records = Vec::new();
    for (_, lines) in &sc.policies {
        records.extend(tclab_sim::scenario::policy_records(lines)?);
    }
    Ok(records)
}

/// Pace the simulated TCP flows the lab's kernel will pace. iperf3 sets `-C` after `connect()`, and over a
/// veth the handshake is done by then: a host whose default is BBR has already run `bbr_init` on the
/// socket, which sets `SK_PACING_NEEDED`, and choosing CUBIC or Reno afterwards never clears it
/// (docs/KERNEL_VS_SIM.md, "Method"). Without this the simulated column is unpaced and the live one paced.
/// Returns a note for each entry it paced.
fn pace_as_live(sc: &mut Scenario, host_default_cc: Option<&str>) -> Vec<String> {
    if host_default_cc != Some("bbr") {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for t in sc.traffic.iter_mut() {
        if let TrafficKind::Tcp { cc, paced, .. } = &mut t.kind {
            if cc != "bbr" && !*paced {
                *paced = true;
                notes.push(format!(
                    "\"{}\": simulated paced, as the lab's iperf3 -C {cc} socket is on a host whose default is bbr (bbr_init's SK_PACING_NEEDED stays)",
                    t.name
                ));
            }
        }
    }
    notes
}

/// One traffic entry, live: the processes and how to read their result.
struct LiveFlow {
    name: String,
    server: Option<Running>,
    client: Running,
    kind: &'static str,
    active_secs: f64,
}

fn address(node: &str) -> &'static str {
    if node == "node-1" {
        "10.0.1.1"
    } else {
        "10.0.1.2"
    }
}

/// Start `argv` in `node`, its output into files (a pipe nobody reads while it runs would fill: iperf3
/// -J writes everything at the end, hundreds of kilobytes for 30 streams).
fn spawn_in(
    lab: &Lab,
    node: &str,
    argv: &[String],
    out: &std::path::Path,
) -> Result<Running, String> {
    let file = |ext: &str| {
        let p = out.with_extension(ext);
        std::fs::File::create(&p)
            .map(|f| (f, p))
            .map_err(|e| e.to_string())
    };
    let (o, stdout) = file("out")?;
    let (e, stderr) = file("err")?;
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.ns(node)])
        .args(argv)
        .stdin(Stdio::null())
        .stdout(o)
        .stderr(e)
        .spawn()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    Ok(Running {
        child,
        stdout,
        stderr,
    })
}

/// A process started in a node, and where its output goes.
struct Running {
    child: Child,
    stdout: std::path::PathBuf,
    stderr: std::path::PathBuf,
}

/// What `compare` made, removed however it ends (an error, SIGINT): the scratch directory and the lab.
struct Cleanup<'a> {
    dir: std::path::PathBuf,
    lab: Option<&'a Lab>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if let Some(lab) = self.lab {
            let _ = lab.down();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn run(name: &str, exe: &std::path::Path, prefix: &str, duration: Option<f64>) -> CmdResult {
    Lab::check_root().map_err(usage)?;
    let lab = Lab::new(prefix).map_err(usage)?;
    if !lab.existing().is_empty() {
        return Err(usage(format!(
            "a lab with prefix \"{prefix}\" exists already: tclab lab --prefix {prefix} down, or compare --prefix OTHER"
        )));
    }
    let (text, file, base, _) = crate::sim::scenario_source(name).map_err(usage)?;
    let opts = tclab_sim::scenario::LoadOptions { seed: None };
    let mut sc = tclab_sim::scenario::load_with(&file, &text, &base, &opts).map_err(usage)?;
    if let Some(d) = duration {
        if !(d > 0.0 && d.is_finite()) {
            return Err(usage(format!(
                "--duration {d}: give a positive number of seconds"
            )));
        }
        let d = (d * 1e9) as u64;
        sc.duration = sc.duration.min(d);
        for t in sc.traffic.iter_mut() {
            t.stop = t.stop.min(d);
            t.start = t.start.min(d);
        }
    }
    let mut map = map_scenario(&sc).map_err(|e| usage(format!("{file}: {e}")))?;
    // The lab's namespaces inherit this host's default congestion control.
    let host_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").ok();
    map.notes
        .extend(pace_as_live(&mut sc, host_cc.as_deref().map(str::trim)));
    // The router's policy as the simulator applied it, as a store tclab live reads.
    let dir = std::env::temp_dir().join(format!("tclab-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut cleanup = Cleanup {
        dir: dir.clone(),
        lab: None,
    };
    // Ctrl-C ends the waits below; the lab and the scratch directory go as on any other end.
    tclab_live::sys::stop_on_signals();
    let store = dir.join("router.json");
    let entries = router_records(&sc).map_err(|e| usage(format!("{file}: {e}")))?;
    let has_policy = !entries.is_empty();
    tclab_tc::store::write_journal(&store, &entries)?;
    let traffic = sc.traffic.clone();
    let node_names: Vec<String> = sc.net.nodes.iter().map(|n| n.name.clone()).collect();
    let secs = sc.duration as f64 / 1e9;
    eprintln!("tclab lab compare: {file}: simulating {secs:.1} s …");
    let (sc, sim_out, _) = crate::sim::run_scenario_loaded(sc)?;
    let _ = sc;
    if tclab_live::sys::STOP.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Failure::Failed("interrupted".into()));
    }
    eprintln!("tclab lab compare: the same live, in lab \"{prefix}\" …");
    cleanup.lab = Some(&lab);
    lab.up(Shaper::Tclab {
        exe,
        policy: has_policy.then_some(store.as_path()),
        out: None,
        queues: 1,
        ring: true,
        xdp: false,
    })?;
    let live = run_live(&lab, &traffic, &map, secs, &dir);
    cleanup.lab = None;
    let summary = lab.down().map(|d| d.log).unwrap_or_default();
    drop(cleanup);
    let live = live?;
    if tclab_live::sys::STOP.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Failure::Failed("interrupted: the lab is removed".into()));
    }
    print!("{}", table(&file, &node_names, &map, &sim_out, &live, secs));
    for n in &map.notes {
        println!("note: {n}");
    }
    if std::env::var_os("TCLAB_COMPARE_VERBOSE").is_some() {
        println!("{summary}");
    }
    let _ = map.router;
    Ok(0)
}

/// What a live flow got: goodput in bit/s (TCP, UDP) or RTTs in ms (ping).
enum LiveResult {
    Goodput(f64),
    Rtts(Vec<f64>),
}

fn run_live(
    lab: &Lab,
    traffic: &[tclab_sim::scenario::Traffic],
    map: &Mapping,
    secs: f64,
    dir: &std::path::Path,
) -> Result<Vec<(String, LiveResult)>, Failure> {
    let start = Instant::now();
    let mut order: Vec<usize> = (0..traffic.len()).collect();
    order.sort_by_key(|&i| traffic[i].start);
    let mut flows: Vec<(usize, LiveFlow)> = Vec::new();
    let mut used_ports = std::collections::BTreeSet::new();
    for (k, &i) in order.iter().enumerate() {
        let t = &traffic[i];
        let at = Duration::from_nanos(t.start);
        while start.elapsed() < at && !stopped() {
            std::thread::sleep(Duration::from_millis(20).min(at - start.elapsed()));
        }
        if stopped() {
            break;
        }
        let (from, to) = (map.nodes[t.from], map.nodes[t.to]);
        let active = (t.stop.saturating_sub(t.start)) as f64 / 1e9;
        // The scenario's port (its streams share it live: iperf3 -P; the simulator gives stream s
        // port + s), unless an earlier entry took it.
        let port = if used_ports.insert(t.port) {
            t.port
        } else {
            5300 + k as u16
        };
        let port = port.to_string();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        // The client's words; iperf3 also needs its server started (and listening) first.
        let (kind, argv) = match &t.kind {
            TrafficKind::Ping { interval, size } => {
                let count = ((active * 1e9) / *interval as f64).floor().max(1.0) as u64;
                let argv = s(&[
                    "ping",
                    "-n",
                    "-i",
                    &format!("{:.3}", *interval as f64 / 1e9),
                    "-s",
                    &size.to_string(),
                    "-Q",
                    &t.tos.to_string(),
                    "-c",
                    &count.to_string(),
                    "-w",
                    &format!("{}", active.ceil().max(1.0)),
                    address(to),
                ]);
                ("ping", argv)
            }
            TrafficKind::Tcp { bytes, cc, .. } => {
                let mut argv = s(&[
                    "iperf3",
                    "-c",
                    address(to),
                    "-p",
                    &port,
                    "-P",
                    &t.streams.to_string(),
                    "-C",
                    cc,
                    "-S",
                    &t.tos.to_string(),
                ]);
                match bytes {
                    Some(b) => argv.extend(s(&["-n", &(b * t.streams as u64).to_string()])),
                    None => argv.extend(s(&["-t", &format!("{}", active.round().max(1.0))])),
                }
                ("tcp", argv)
            }
            TrafficKind::Udp { rate_bps, length } => {
                let argv = s(&[
                    "iperf3",
                    "-c",
                    address(to),
                    "-p",
                    &port,
                    "-u",
                    "-b",
                    &rate_bps.to_string(),
                    "-l",
                    &length.to_string(),
                    "-P",
                    &t.streams.to_string(),
                    "-S",
                    &t.tos.to_string(),
                    "-t",
                    &format!("{}", active.round().max(1.0)),
                ]);
                ("udp", argv)
            }
        };
        let server = if kind == "ping" {
            None
        } else {
            let server = spawn_in(
                lab,
                to,
                &s(&["iperf3", "-s", "-1", "-i", "1", "--forceflush", "-p", &port]),
                &dir.join(format!("{k}-server")),
            )?;
            std::thread::sleep(Duration::from_millis(500));
            Some(server)
        };
        let flow = LiveFlow {
            name: t.name.clone(),
            server,
            client: spawn_in(lab, from, &argv, &dir.join(format!("{k}-client")))?,
            kind,
            active_secs: active,
        };
        flows.push((i, flow));
    }
    // A client still running well after its flow's end is stuck in iperf3's closing exchange (its
    // control connection queued behind the flood it measured): its server's lines tell all the same.
    let deadline = Instant::now() + Duration::from_secs_f64(secs + 10.0);
    let mut results = Vec::new();
    for (_, f) in flows {
        let (out, client_err) = wait_output(f.client, deadline);
        let result = match f.kind {
            "ping" => LiveResult::Rtts(
                out.lines()
                    .filter_map(|l| l.split("time=").nth(1))
                    .filter_map(|t| t.split_whitespace().next()?.parse().ok())
                    .collect(),
            ),
            _ => {
                let server = f
                    .server
                    .map(|s| wait_until(s, Instant::now()))
                    .unwrap_or_default();
                let bytes = received_while_active(&server, f.active_secs).ok_or_else(|| {
                    format!(
                        "\"{}\": the iperf3 server reported nothing; the client said: {}{}",
                        f.name,
                        out.trim(),
                        client_err.trim()
                    )
                })?;
                LiveResult::Goodput(bytes * 8.0 / f.active_secs.max(1e-9))
            }
        };
        results.push((f.name, result));
    }
    Ok(results)
}

/// SIGINT, SIGTERM or SIGHUP came (after `tclab_live::sys::stop_on_signals`).
pub(crate) fn stopped() -> bool {
    tclab_live::sys::STOP.load(std::sync::atomic::Ordering::SeqCst)
}

/// The process's stdout once it ends, or when `deadline` passes (then it is killed).
fn wait_until(r: Running, deadline: Instant) -> String {
    wait_output(r, deadline).0
}

/// The process's stdout and stderr once it ends, or when `deadline` passes (then it is killed).
fn wait_output(mut r: Running, deadline: Instant) -> (String, String) {
    while Instant::now() < deadline && !stopped() {
        if let Ok(Some(_)) = r.child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = r.child.kill();
    let _ = r.child.wait();
    (
        std::fs::read_to_string(&r.stdout).unwrap_or_default(),
        std::fs::read_to_string(&r.stderr).unwrap_or_default(),
    )
}

/// What an iperf3 server (text output, one line per second, flushed) received in the seconds up to
/// `active`: the `[SUM]` lines of several streams, else the one stream's. `None` if it printed none.
fn received_while_active(text: &str, active: f64) -> Option<f64> {
    let mut sums = Vec::new();
    let mut single = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((id, rest)) = rest.split_once(']') else {
            continue;
        };
        let w: Vec<&str> = rest.split_whitespace().collect();
        // "0.00-1.00 sec 212 KBytes 1.74 Mbits/sec …": an interval, not the closing total.
        let (Some(span), Some(&"sec"), Some(n), Some(unit)) =
            (w.first(), w.get(1), w.get(2), w.get(3))
        else {
            continue;
        };
        let Some((a, b)) = span.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b), Ok(n)) = (a.parse::<f64>(), b.parse::<f64>(), n.parse::<f64>()) else {
            continue;
        };
        if b - a > 1.5 || line.contains("receiver") || line.contains("sender") || b > active + 0.05
        {
            continue;
        }
        let scale = match *unit {
            "Bytes" => 1.0,
            "KBytes" => 1024.0,
            "MBytes" => 1024.0 * 1024.0,
            "GBytes" => 1024.0 * 1024.0 * 1024.0,
            _ => continue,
        };
        if id.trim() == "SUM" {
            sums.push(n * scale);
        } else {
            single.push(n * scale);
        }
    }
    let chosen = if sums.is_empty() { single } else { sums };
    (!chosen.is_empty()).then(|| chosen.iter().sum())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn diff(sim: f64, live: f64) -> String {
    if sim == 0.0 || !sim.is_finite() || !live.is_finite() {
        return "—".into();
    }
    format!("{:+.1} %", (live / sim - 1.0) * 100.0)
}

fn table(
    file: &str,
    nodes: &[String],
    map: &Mapping,
    sim: &Outcome,
    live: &[(String, LiveResult)],
    secs: f64,
) -> String {
    let mut s = format!(
        "{file}, {secs:.1} s: simulated, and live through tclab live in tclab lab ({})\n",
        nodes
            .iter()
            .zip(&map.nodes)
            .map(|(n, l)| format!("{n} = {l}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s.push_str(&format!(
        "{:<28} {:>22} {:>22} {:>10}\n",
        "traffic", "simulated", "live", "live/sim"
    ));
    for (name, r) in live {
        match r {
            LiveResult::Goodput(bps) => {
                let sim_bps = sim
                    .flows
                    .iter()
                    .find(|f| &f.name == name)
                    .map_or(f64::NAN, |f| f.goodput_bps);
                s.push_str(&format!(
                    "{:<28} {:>15.3} Mbit/s {:>15.3} Mbit/s {:>10}\n",
                    format!("{name} goodput"),
                    sim_bps / 1e6,
                    bps / 1e6,
                    diff(sim_bps, *bps)
                ));
            }
            LiveResult::Rtts(rtts) => {
                let mut sorted = rtts.clone();
                sorted.sort_by(f64::total_cmp);
                let p = sim.pings.iter().find(|p| &p.name == name);
                let (smed, s99, sn) = p.map_or((f64::NAN, f64::NAN, 0), |p| {
                    (p.rtt.p50_ms, p.rtt.p99_ms, p.received)
                });
                let (lmed, l99) = (percentile(&sorted, 0.5), percentile(&sorted, 0.99));
                s.push_str(&format!(
                    "{:<28} {:>18.2} ms {:>18.2} ms {:>10}\n",
                    format!("{name} RTT median"),
                    smed,
                    lmed,
                    diff(smed, lmed)
                ));
                s.push_str(&format!(
                    "{:<28} {:>18.2} ms {:>18.2} ms {:>10}\n",
                    format!("{name} RTT p99"),
                    s99,
                    l99,
                    diff(s99, l99)
                ));
                s.push_str(&format!(
                    "{:<28} {:>21} {:>22} {:>10}\n",
                    format!("{name} replies"),
                    sn,
                    rtts.len(),
                    ""
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        load(SCENARIO)
    }

    fn load(text: &str) -> Scenario {
        let opts = tclab_sim::scenario::LoadOptions { seed: None };
        tclab_sim::scenario::load_with("pacing.toml", text, std::path::Path::new("."), &opts)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    const SCENARIO: &str = r#"
name = "pacing"
duration = "2s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a"
b = "r:eth0"
rate = "100mbit"
[[link]]
a = "r:eth1"
b = "b"
rate = "100mbit"
[[traffic]]
name = "cubic"
kind = "tcp"
from = "a"
to = "b"
[[traffic]]
name = "bbr"
kind = "tcp"
from = "a"
to = "b"
cc = "bbr"
[[traffic]]
name = "ping"
kind = "ping"
from = "a"
to = "b"
"#;

    fn paced(sc: &Scenario) -> Vec<(String, bool)> {
        sc.traffic
            .iter()
            .filter_map(|t| match t.kind {
                TrafficKind::Tcp { paced, .. } => Some((t.name.clone(), paced)),
                _ => None,
            })
            .collect()
    }

    /// bench-isp's 1 000 streams were simulated for minutes before iperf3 refused `-P 1000`.
    #[test]
    fn more_streams_than_iperf3_runs_are_refused_before_simulating() {
        let many = SCENARIO.replacen("name = \"cubic\"", "name = \"cubic\"\nstreams = 129", 1);
        let e = map_scenario(&load(&many)).err().expect("refused");
        assert_eq!(
            e,
            "traffic \"cubic\": 129 streams, and iperf3 runs at most 128 in one client (-P): split it \
             into entries of at most 128"
        );
        let most = SCENARIO.replacen("name = \"cubic\"", "name = \"cubic\"\nstreams = 128", 1);
        assert!(map_scenario(&load(&most)).is_ok());
    }

    #[test]
    fn a_bbr_host_paces_the_other_controls_as_the_lab_does() {
        // bbr_init sets SK_PACING_NEEDED before iperf3's -C cubic: CUBIC is paced live, BBR paces anyway.
        let mut sc = scenario();
        let notes = pace_as_live(&mut sc, Some("bbr"));
        assert_eq!(
            paced(&sc),
            [("cubic".to_string(), true), ("bbr".to_string(), false)]
        );
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("\"cubic\": simulated paced"),
            "{notes:?}"
        );
    }

    /// A sim policy's `ip` lines become the records the simulator read them as (they were `tc ip …`
    /// records, which tclab live's replay refuses): `ip route … realm` a `route` record (ip's `-4`
    /// and abbreviations read as ip reads them), `ip link` and `modprobe ifb` `link` records (modprobe
    /// makes its ifbs only while none exists, as the module loads once), tc lines with or without their `tc`.
    #[test]
    fn ip_lines_become_the_records_the_simulator_reads() {
        let policy = r#"
[[policy]]
node = "r"
tc = """
modprobe ifb numifbs=2
ip link add ifb2 type ifb
modprobe ifb
ip link set dev ifb0 up
ip -4 ro add 10.0.2.2/32 dev eth1 realm 7
qdisc add dev eth1 root handle 1: htb
tc class add dev eth1 parent 1: classid 1:1 htb rate 10mbit
"""
"#;
        let text = format!("{SCENARIO}{policy}");
        let sc = load(&text);
        let got: Vec<String> = router_records(&sc)
            .unwrap()
            .iter()
            .map(|r| r.join(" "))
            .collect();
        assert_eq!(
            got,
            [
                "link add dev ifb0 type ifb",
                "link add dev ifb1 type ifb",
                "link add ifb2 type ifb",
                "link set dev ifb0 up",
                "route add 10.0.2.2/32 dev eth1 realm 7",
                "tc qdisc add dev eth1 root handle 1: htb",
                "tc class add dev eth1 parent 1: classid 1:1 htb rate 10mbit",
            ]
        );
    }

    #[test]
    fn a_cubic_host_leaves_the_flows_as_written() {
        // A socket CUBIC initialised never asks for pacing: nothing to match.
        for host in [Some("cubic"), Some("reno"), None] {
            let mut sc = scenario();
            assert!(pace_as_live(&mut sc, host).is_empty());
            assert_eq!(
                paced(&sc),
                [("cubic".to_string(), false), ("bbr".to_string(), false)]
            );
        }
    }
}
