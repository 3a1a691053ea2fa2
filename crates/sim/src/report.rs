//! What a run leaves behind: the summary table, the JSON summary, CSV time series and the final `tc -s` text.
//!
//! The JSON summary's schema is documented in `docs/SCENARIOS.md` (`"schema": "tclab-sim/1"`). Every
//! number in it, and every CSV row, comes from the run alone, so one scenario and seed always produce the
//! same bytes.

use crate::run::Outcome;
use crate::scenario::Scenario;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;
use tclab_core::NSEC_PER_SEC;

pub const SCHEMA: &str = "tclab-sim/1";

fn secs(ns: u64) -> f64 {
    ns as f64 / NSEC_PER_SEC as f64
}

/// Human units for a bit rate, as tc prints rates (Kbit, Mbit).
pub fn fmt_bps(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2}Gbit", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2}Mbit", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.1}Kbit", bps / 1e3)
    } else {
        format!("{bps:.0}bit")
    }
}

/// Per-class totals at the end of the run. A class the kernel dumps no counters for (the one class
/// of TBF, RED, CBS, netem: no `dump_stats`) is listed as its qdisc instead (classid `1:`), with the counters
/// `tc -s qdisc show` prints for it: the shaper's own drops and overlimits, which its child's
/// counters (what tclab keeps for the class) never show.
fn classes(sc: &Scenario) -> Vec<Value> {
    use tclab_tc::show::{class_counters, ClassCounters};
    let dur = secs(sc.duration);
    let mut v = Vec::new();
    let mut rows = |node: &str, name: &str, dev: &tclab_core::engine::Device| {
        // Flow queues (sfq, fq_codel, cake) are classes only while active, with no rate of their own.
        for c in dev.classes_without_flows(sc.duration) {
            let (classid, stats) = match dev.find(c.parent) {
                Some(q) if class_counters(&c) == ClassCounters::None => (c.parent, q.q.stats()),
                _ => (c.classid, c.stats),
            };
            v.push(json!({
                "node": node,
                "dev": name,
                "classid": classid.to_string(),
                "kind": c.kind,
                "bytes": stats.bytes,
                "packets": stats.packets,
                "drops": stats.drops,
                "overlimits": stats.overlimits,
                "avg_bps": stats.bytes as f64 * 8.0 / dur,
            }));
        }
    };
    for (i, iface) in sc.net.ifaces.iter().enumerate() {
        if let Some(dev) = sc.net.device(i) {
            rows(&sc.net.nodes[iface.node].name, &iface.name, dev);
        }
    }
    // The classes of ifb devices, where sqm-style policies shape what arrives.
    for node in &sc.net.nodes {
        for (name, dev) in node.engine.devices() {
            if dev.kind == tclab_core::engine::DevKind::Ifb {
                rows(&node.name, name, dev);
            }
        }
    }
    v
}

/// The congestion control of TCP entry `name` (`cc`, `cubic` unless the scenario says); `None` for an
/// entry that is not TCP.
pub fn flow_cc<'a>(sc: &'a Scenario, name: &str) -> Option<&'a str> {
    sc.traffic
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| match &t.kind {
            crate::scenario::TrafficKind::Tcp { cc, .. } => Some(cc.as_str()),
            _ => None,
        })
}

pub fn summary_json(sc: &Scenario, out: &Outcome) -> Value {
    // A TCP entry's `cc` beside its `kind`.
    let flows: Vec<Value> = out
        .flows
        .iter()
        .map(|f| {
            let mut v = json!(f);
            if let (Some(cc), Some(m)) = (flow_cc(sc, &f.name), v.as_object_mut()) {
                let at = m
                    .keys()
                    .position(|k| k == "kind")
                    .map_or(m.len(), |k| k + 1);
                m.shift_insert(at, "cc".into(), json!(cc));
            }
            v
        })
        .collect();
    let mut ifaces: Vec<Value> = sc
        .net
        .ifaces
        .iter()
        .enumerate()
        .map(|(i, f)| {
            json!({
                "iface": sc.net.iface_label(i),
                "addr": crate::wire::addr_text(f.addr),
                "rate_bps": f.link.rate_bps,
                "counters": f.counters,
            })
        })
        .collect();
    // A teql master has no wire or address of its own; its counters are what `ip -s link show
    // teql0` prints (`teql_master_stats64`).
    for &n in sc.net.teqls.keys() {
        let p = crate::net::Port::Teql(n);
        ifaces.push(json!({
            "iface": sc.net.port_label(p),
            "counters": sc.net.port_counters(p),
        }));
    }
    let mut v = json!({
        "schema": SCHEMA,
        "scenario": sc.name,
        "seed": sc.net.seed,
        "duration_s": secs(sc.duration),
        "events": out.events,
        "frames": out.frames,
        "flows": flows,
        "pings": out.pings,
        "classes": classes(sc),
        "interfaces": ifaces,
    });
    // Only a run where an action's edit broke a checksum has any (the rest are valid by
    // construction), so the key is there only then.
    let errors = csum_errors(sc);
    if !errors.is_empty() {
        v["csum_errors"] = json!(errors
            .iter()
            .map(|(node, e)| json!({"node": node, "counters": e}))
            .collect::<Vec<_>>());
    }
    v
}

/// The nodes that dropped packets for a wrong checksum, with their counters.
fn csum_errors(sc: &Scenario) -> Vec<(&str, crate::net::CsumErrors)> {
    sc.net
        .nodes
        .iter()
        .filter(|n| n.csum_errors != Default::default())
        .map(|n| (n.name.as_str(), n.csum_errors))
        .collect()
}

/// The table `tclab sim` prints.
pub fn summary_text(sc: &Scenario, out: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} — {} s simulated, seed {}, {} events, {} frames",
        sc.name,
        tclab_tc::util::fmt_g(secs(sc.duration), 6),
        sc.net.seed,
        out.events,
        out.frames
    );
    if !out.flows.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<16} {:<5} {:<18} {:>7} {:>12} {:>12} {:>8} {:>8}  cc",
            "flow", "kind", "path", "streams", "delivered", "goodput", "lost", "retrans"
        );
        for f in &out.flows {
            let _ = writeln!(
                s,
                "{:<16} {:<5} {:<18} {:>7} {:>12} {:>12} {:>8} {:>8}  {}",
                f.name,
                f.kind,
                format!("{}→{}", f.from, f.to),
                f.streams,
                format!("{}B", f.delivered_bytes),
                fmt_bps(f.goodput_bps),
                f.lost_packets,
                f.retransmits,
                flow_cc(sc, &f.name).unwrap_or("—")
            );
        }
    }
    if !out.pings.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<16} {:<18} {:>9} {:>32} {:>9} {:>9}",
            "ping", "path", "recv/sent", "rtt min/avg/max/mdev ms", "p50", "p99"
        );
        for p in &out.pings {
            let r = &p.rtt;
            // No reply at all: no RTT figures, as ping(8) prints no rtt line.
            let (rtt, p50, p99) = if r.count == 0 {
                ("—".to_string(), "—".to_string(), "—".to_string())
            } else {
                (
                    format!(
                        "{:.1}/{:.1}/{:.1}/{:.1}",
                        r.min_ms, r.avg_ms, r.max_ms, r.mdev_ms
                    ),
                    format!("{:.1}", r.p50_ms),
                    format!("{:.1}", r.p99_ms),
                )
            };
            let _ = writeln!(
                s,
                "{:<16} {:<18} {:>9} {:>32} {:>9} {:>9}",
                p.name,
                format!("{}→{}", p.from, p.to),
                format!("{}/{}", p.received, p.sent),
                rtt,
                p50,
                p99
            );
        }
    }
    for (node, e) in csum_errors(sc) {
        let _ = writeln!(
            s,
            "\n{node}: packets dropped for a wrong checksum: IpInHdrErrors {} TcpInCsumErrors {} \
             UdpInCsumErrors {} IcmpInCsumErrors {}",
            e.ip_in_hdr_errors, e.tcp_in_csum_errors, e.udp_in_csum_errors, e.icmp_in_csum_errors
        );
    }
    let mut cls = classes(sc);
    if !cls.is_empty() {
        let _ = writeln!(
            s,
            "\n{:<22} {:<6} {:>14} {:>10} {:>8} {:>11}",
            "class", "kind", "sent", "avg rate", "drops", "overlimits"
        );
        // An ISP's thousand subscriber classes would bury the rest: the ones that dropped most (then
        // sent most) stand for them, and the files keep every class.
        let all = cls.len();
        if all > SUMMARY_CLASSES {
            let key = |c: &Value| {
                (
                    c["drops"].as_u64().unwrap_or(0),
                    c["bytes"].as_u64().unwrap_or(0),
                )
            };
            cls.sort_by_key(|c| std::cmp::Reverse(key(c)));
            cls.truncate(SUMMARY_CLASSES);
        }
        for c in &cls {
            let _ = writeln!(
                s,
                "{:<22} {:<6} {:>14} {:>10} {:>8} {:>11}",
                format!(
                    "{}:{} {}",
                    c["node"].as_str().unwrap_or(""),
                    c["dev"].as_str().unwrap_or(""),
                    c["classid"].as_str().unwrap_or("")
                ),
                c["kind"].as_str().unwrap_or(""),
                format!("{}B", c["bytes"]),
                fmt_bps(c["avg_bps"].as_f64().unwrap_or(0.0)),
                c["drops"].as_u64().unwrap_or(0),
                c["overlimits"].as_u64().unwrap_or(0)
            );
        }
        if all > SUMMARY_CLASSES {
            let _ = writeln!(
                s,
                "({SUMMARY_CLASSES} of {all} classes: those with the most drops, then bytes sent; \
                 classes.csv and summary.json have every one)"
            );
        }
    }
    s
}

/// The most classes the summary table lists.
const SUMMARY_CLASSES: usize = 40;

/// The CSV files, by name.
pub fn csv_files(sc: &Scenario, out: &Outcome) -> Vec<(&'static str, String)> {
    let r = &out.recorder;
    let mut ifs = String::from("time_s,iface,rx_bps,tx_bps,backlog_pkts,backlog_bytes\n");
    for x in &r.iface_samples {
        let _ = writeln!(
            ifs,
            "{},{},{},{},{},{}",
            secs(x.t),
            sc.net.port_label(x.iface),
            x.rx_bps,
            x.tx_bps,
            x.backlog_pkts,
            x.backlog_bytes
        );
    }
    let mut cls = String::from("time_s,iface,classid,bps,backlog_bytes,qlen,drops\n");
    for x in &r.class_samples {
        let _ = writeln!(
            cls,
            "{},{},{},{},{},{},{}",
            secs(x.t),
            sc.net.port_label(x.iface),
            x.classid,
            x.bps,
            x.backlog_bytes,
            x.qlen,
            x.drops
        );
    }
    let mut fl = String::from("time_s,flow,goodput_bps\n");
    for x in &r.flow_samples {
        let _ = writeln!(
            fl,
            "{},{},{}",
            secs(x.t),
            r.flows[x.flow].name,
            x.goodput_bps
        );
    }
    let mut pg = String::from("ping,sent_s,rtt_ms\n");
    for p in &out.pings {
        for &(t, rtt) in &p.samples {
            let _ = writeln!(pg, "{},{},{}", p.name, secs(t), rtt as f64 / 1e6);
        }
    }
    vec![
        ("interfaces.csv", ifs),
        ("classes.csv", cls),
        ("flows.csv", fl),
        ("ping.csv", pg),
    ]
}

pub fn tc_text(out: &Outcome) -> String {
    let mut s = String::new();
    for (node, dev, text) in &out.tc_show {
        let _ = writeln!(
            s,
            "### {node}: tc -s qdisc|class|filter show dev {dev}\n{text}"
        );
    }
    s
}

/// Write `files` into `dir`, each through a temporary name and a rename, so that a reader never sees a
/// half-written file and a failed run leaves the directory as it was.
pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut staged = Vec::new();
    for (name, bytes) in files {
        let tmp = dir.join(format!(".{name}.partial"));
        if let Err(e) = std::fs::write(&tmp, bytes) {
            for t in &staged {
                let _ = std::fs::remove_file(t);
            }
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("cannot write {}: {e}", tmp.display()));
        }
        staged.push(tmp);
    }
    for ((name, _), tmp) in files.iter().zip(&staged) {
        std::fs::rename(tmp, dir.join(name))
            .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))?;
    }
    Ok(())
}
