//! `tclab sweep`: one scenario run over a grid of values, each point its own deterministic simulation.
//!
//! The grid is the product of the `--set KEY=V1,V2,…` lists, numbered with the last key varying
//! fastest (nested loops in the order given). A point's scenario is the original with each key's value
//! put in: either a key path of the TOML file (`link.rate`, `traffic.1.streams`, `seed`) or a word of a
//! node's inline tc lines (`policy.router.burst`): see [`set_value`] and docs/SWEEP.md.
//!
//! A point's result is a small JSON file (`points/point-NNNNN.json`) holding its values and its
//! metrics as text — Rust's shortest round-trip form of each `f64` — so that a table assembled from
//! files written by other processes, or other machines (`--point I`, then `--merge DIR`), is the
//! very table a local run writes: the local run assembles its table from the same bytes. Threads run
//! the points of a local sweep; the simulator stays single-threaded, and rows are ordered by point
//! index, so the outputs do not depend on `--jobs`.

use crate::args::{usage, CmdResult, Failure, SweepArgs};
use crate::plot;
use crate::sim::scenario_source;
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use tclab_sim::report::{flow_cc, fmt_bps, summary_json, write_files};
use tclab_sim::run::{run, Outcome, TcpNstat};
use tclab_sim::scenario::{load_with, traffic_key_applies, LoadOptions, Scenario, TrafficKind};

/// `tclab sweep --help`'s text after the options.
pub const HELP: &str = "\
KEY is a scenario key path (seed, duration, link.rate, link.1.delay, traffic.0.streams: an array's
entry by index, which may be left out when the array has one entry, * for every entry), or
policy.NODE[.WORD…].OPTION: the value after OPTION in NODE's inline tc lines (policy.router.burst), the
WORDs picking the line when OPTION is on several (policy.router.1:10.burst). Values are separated by
commas. Points are numbered from 0, the last --set varying fastest.
Writes into DIR (default ./tclab-out/sweep-NAME): sweep.csv and sweep.md (a row per point: the swept
values, then every metric), sweep-METRIC-KEY.svg/.png (each --metric against each key), and
points/point-NNNNN.json (each point's result).
On a cluster: --points prints the number of points; --point I (or --point env: $SLURM_ARRAY_TASK_ID or
$JOB_COMPLETION_INDEX) runs one and writes its file into DIR/points; --merge DIR assembles the table and
plots, identical to a local run's (docs/SWEEP.md).
Exit status: 0; 64 if the command line, the scenario or a point's value cannot be used (the point and
the key named, nothing written); 1 if a run fails.";

/// The version of a point file's layout.
const SCHEMA: &str = "tclab-sweep/1";
const POINTS_DIR: &str = "points";
/// The largest grid: checking a point's scenario alone takes about a millisecond, so a million
/// points is a quarter of an hour before the first runs.
const MAX_POINTS: usize = 1_000_000;

// ---- The grid ---------------------------------------------------------------------------------------

/// One `--set`: a key and the values it takes.
struct Axis {
    key: String,
    values: Vec<String>,
}

struct Grid {
    axes: Vec<Axis>,
}

impl Grid {
    /// The grid of `sets`; with `allow_empty`, no `--set` is the grid of one point, the scenario as
    /// written (a report's `tclab sim` run).
    fn parse_sets(sets: &[String], allow_empty: bool) -> Result<Grid, String> {
        if sets.is_empty() && !allow_empty {
            return Err("give at least one --set KEY=V1,V2,…".into());
        }
        let mut axes: Vec<Axis> = Vec::new();
        for s in sets {
            let (key, list) = s
                .split_once('=')
                .ok_or_else(|| format!("--set {s}: write KEY=V1,V2,…"))?;
            let key = key.trim();
            if key.is_empty() || key.split('.').any(str::is_empty) {
                return Err(format!(
                    "--set {s}: \"{key}\" is not a key path (e.g. link.rate)"
                ));
            }
            let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().all(String::is_empty) {
                return Err(format!("--set {key}: the list of values is empty"));
            }
            if let Some(i) = values.iter().position(String::is_empty) {
                return Err(format!(
                    "--set {key}: value {} of \"{list}\" is empty",
                    i + 1
                ));
            }
            if axes.iter().any(|a| a.key == key) {
                return Err(format!(
                    "--set {key}: the key is set twice; give all its values in one list"
                ));
            }
            axes.push(Axis {
                key: key.to_string(),
                values,
            });
        }
        let n = axes
            .iter()
            .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
            .filter(|&n| n <= MAX_POINTS);
        if n.is_none() {
            let sizes: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
            return Err(format!(
                "the grid has {} points, more than {MAX_POINTS}: every point is checked before any runs \
                 and kept in memory; split the sweep",
                sizes.join(" × ")
            ));
        }
        Ok(Grid { axes })
    }

    fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Each axis's value index at point `i`: the last axis varies fastest.
    fn digits(&self, mut i: usize) -> Vec<usize> {
        let mut d = vec![0; self.axes.len()];
        for (k, a) in self.axes.iter().enumerate().rev() {
            d[k] = i % a.values.len();
            i /= a.values.len();
        }
        d
    }

    fn values(&self, i: usize) -> Vec<&str> {
        self.digits(i)
            .iter()
            .zip(&self.axes)
            .map(|(&d, a)| a.values[d].as_str())
            .collect()
    }

    /// "point 3 (link.rate=10mbit, seed=2)": how a message names a point.
    fn name(&self, i: usize) -> String {
        if self.axes.is_empty() {
            return format!("point {i} (the scenario as written)");
        }
        let kv: Vec<String> = self
            .axes
            .iter()
            .zip(self.values(i))
            .map(|(a, v)| format!("{}={v}", a.key))
            .collect();
        format!("point {i} ({})", kv.join(", "))
    }
}

// ---- A point's scenario -----------------------------------------------------------------------------

/// The scenario of point `i` (read from `file`): the original text with every axis's value put in.
fn point_text(file: &str, text: &str, grid: &Grid, i: usize) -> Result<String, String> {
    // tclab sim reads what this cannot (an integer above i64::MAX, as `seed` takes): name the file.
    let mut doc: toml::Table = text.parse().map_err(|e| format!("{file}: {e}"))?;
    for (a, v) in grid.axes.iter().zip(grid.values(i)) {
        set_value(&mut doc, &a.key, v).map_err(|e| format!("{}: {}: {e}", grid.name(i), a.key))?;
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

/// Put `value` at `key` in the scenario `doc`.
///
/// `policy.NODE…` with NODE a node that has a `[[policy]]` entry rewrites a word of its tc lines
/// ([`set_tc_word`]). Any other key is a path of the TOML document: a table's key, an array's entry by
/// index (`link.1.rate`; left out when the array has exactly one entry; `*` for every entry), and in an
/// array of values the entry itself (`policy.0.args.1`: a script's second argument). A key
/// that exists keeps its type (a string stays a string, an integer must be one); a new one is an
/// integer, a float or a boolean when it reads as one, else a string. Whether the scenario accepts it
/// is for the scenario's loader to say.
fn set_value(doc: &mut toml::Table, key: &str, value: &str) -> Result<(), String> {
    let segs: Vec<&str> = key.split('.').collect();
    if segs[0] == "policy" && segs.len() >= 3 {
        let node = segs[1];
        let has_node = doc
            .get("policy")
            .and_then(toml::Value::as_array)
            .is_some_and(|ps| {
                ps.iter()
                    .any(|p| p.get("node").and_then(toml::Value::as_str) == Some(node))
            });
        if has_node {
            return set_tc_word(
                doc,
                node,
                &segs[2..segs.len() - 1],
                segs[segs.len() - 1],
                value,
            );
        }
        if segs[1].parse::<usize>().is_err() && segs[1] != "*" {
            return Err(format!("no [[policy]] entry has node = \"{node}\""));
        }
    }
    let mut slot = toml::Value::Table(std::mem::take(doc));
    let r = set_path(&mut slot, &segs, value);
    if let toml::Value::Table(t) = slot {
        *doc = t;
    }
    r
}

fn set_path(at: &mut toml::Value, segs: &[&str], value: &str) -> Result<(), String> {
    let (seg, rest) = (segs[0], &segs[1..]);
    match at {
        toml::Value::Array(items) => {
            let picked: Vec<usize> = if seg == "*" {
                (0..items.len()).collect()
            } else if let Ok(n) = seg.parse::<usize>() {
                if n >= items.len() {
                    return Err(format!(
                        "index {n} is past the {} entries there",
                        items.len()
                    ));
                }
                vec![n]
            } else if items.len() == 1 {
                // The one entry, with this segment read inside it.
                return set_path(&mut items[0], segs, value);
            } else {
                return Err(format!(
                    "there are {} entries: name one by index (0 to {}) before \"{seg}\", or * for all",
                    items.len(),
                    items.len() - 1
                ));
            };
            if rest.is_empty() {
                // An array of values (a script policy's `args`): the entry is the value.
                if picked.iter().any(|&n| items[n].is_table()) {
                    return Err("a key names a value, not an entry of an array of tables".into());
                }
                for n in picked {
                    items[n] = typed_as(&items[n], value)?;
                }
                return Ok(());
            }
            // `traffic.*.cc`: every entry the key applies to (a ping takes no cc), as "every flow".
            let picked: Vec<usize> = if seg == "*" && rest.len() == 1 {
                let takes = |n: &usize| {
                    let kind = items[*n].get("kind").and_then(toml::Value::as_str);
                    kind.is_none_or(|k| traffic_key_applies(k, rest[0]))
                };
                let taking: Vec<usize> = picked.iter().copied().filter(takes).collect();
                if taking.is_empty() {
                    return Err(format!("no entry takes {}", rest[0]));
                }
                taking
            } else {
                picked
            };
            for n in picked {
                set_path(&mut items[n], rest, value)?;
            }
            Ok(())
        }
        toml::Value::Table(t) if rest.is_empty() => {
            let new = match t.get(seg) {
                Some(old) => typed_as(old, value)?,
                None => inferred(value),
            };
            t.insert(seg.to_string(), new);
            Ok(())
        }
        toml::Value::Table(t) => match t.get_mut(seg) {
            Some(next) => set_path(next, rest, value),
            None => {
                let mut known: Vec<&str> = t.keys().map(String::as_str).collect();
                known.sort_unstable();
                Err(format!(
                    "unknown key \"{seg}\" (here: {})",
                    known.join(", ")
                ))
            }
        },
        _ => Err(format!("\"{seg}\" is inside a value, not a table")),
    }
}

/// `value` as the type of the value it replaces.
fn typed_as(old: &toml::Value, value: &str) -> Result<toml::Value, String> {
    use toml::Value as V;
    Ok(match old {
        V::String(_) => V::String(value.to_string()),
        V::Integer(_) => V::Integer(
            value
                .parse()
                .map_err(|_| format!("takes an integer, not \"{value}\""))?,
        ),
        V::Float(_) => V::Float(
            value
                .parse()
                .map_err(|_| format!("takes a number, not \"{value}\""))?,
        ),
        V::Boolean(_) => V::Boolean(
            value
                .parse()
                .map_err(|_| format!("takes true or false, not \"{value}\""))?,
        ),
        _ => {
            return Err(format!(
                "is {} {}, which --set cannot replace (name an entry of an array by its index)",
                if old.is_array() { "an" } else { "a" },
                old.type_str()
            ))
        }
    })
}

fn inferred(value: &str) -> toml::Value {
    use toml::Value as V;
    if let Ok(i) = value.parse::<i64>() {
        V::Integer(i)
    } else if let Ok(b) = value.parse::<bool>() {
        V::Boolean(b)
    } else if let Some(f) = value.parse::<f64>().ok().filter(|f| f.is_finite()) {
        V::Float(f)
    } else {
        V::String(value.to_string())
    }
}

/// Replace the word after `option` in `node`'s inline tc lines, on the one line that has it and every
/// word of `pick`. Comments (from `#`) are not searched. None or several such places: refused, naming
/// them, rather than guessed.
fn set_tc_word(
    doc: &mut toml::Table,
    node: &str,
    pick: &[&str],
    option: &str,
    value: &str,
) -> Result<(), String> {
    if value.split_whitespace().count() != 1 {
        return Err(format!("a tc option's value is one word, not \"{value}\""));
    }
    let Some(toml::Value::Array(policies)) = doc.get_mut("policy") else {
        unreachable!("the caller found the node's policy");
    };
    // (entry, line number, byte range of the value) of every place.
    let mut places: Vec<(usize, usize, std::ops::Range<usize>, String)> = Vec::new();
    for (e, p) in policies.iter().enumerate() {
        if p.get("node").and_then(toml::Value::as_str) != Some(node) {
            continue;
        }
        let Some(tc) = p.get("tc").and_then(toml::Value::as_str) else {
            let what = if p.get("script").is_some() {
                "script"
            } else {
                "batch"
            };
            return Err(format!(
                "{node}'s policy is a {what} file: only inline tc lines (tc = \"\"\"…\"\"\") can be rewritten"
            ));
        };
        // A command continued with a trailing backslash is one line: its words across the pieces
        // (seed 004's `classid 1:20 htb rate 198kbit \` then `burst 6k prio 2`).
        let mut words: Vec<(usize, &str)> = Vec::new();
        let mut text: Vec<&str> = Vec::new();
        let mut first = 1;
        let mut start = 0;
        let pieces: Vec<&str> = tc.split('\n').collect();
        for (n, line) in pieces.iter().enumerate() {
            if text.is_empty() {
                first = n + 1;
            }
            let code = line.split('#').next().unwrap_or("").trim_end();
            let code = code.strip_suffix('\\');
            let continued = code.is_some() && n + 1 < pieces.len();
            let code = code.unwrap_or_else(|| line.split('#').next().unwrap_or(""));
            words.extend(words_at(code).into_iter().map(|(at, w)| (start + at, w)));
            text.push(code.trim());
            start += line.len() + 1;
            if continued {
                continue;
            }
            let has_pick = pick.iter().all(|w| words.iter().any(|(_, x)| x == w));
            for k in 0..words.len() {
                if words[k].1 != option || !has_pick {
                    continue;
                }
                let Some((at, v)) = words.get(k + 1) else {
                    return Err(format!(
                        "line {first} of {node}'s tc has {option} with no value after it"
                    ));
                };
                places.push((e, first, *at..at + v.len(), text.join(" ")));
            }
            words.clear();
            text.clear();
        }
    }
    let picked = if pick.is_empty() {
        String::new()
    } else {
        format!(" and {}", pick.join(" "))
    };
    match places.as_slice() {
        [] => Err(format!("no tc line of {node}'s policy has {option}{picked} (rewriting is of an option already written)")),
        [(e, _, range, _)] => {
            let entry = policies[*e].as_table_mut().expect("a policy entry is a table");
            let tc = entry["tc"].as_str().expect("checked above");
            let new = format!("{}{value}{}", &tc[..range.start], &tc[range.end..]);
            entry.insert("tc".into(), toml::Value::String(new));
            Ok(())
        }
        many => {
            let lines: Vec<String> = many
                .iter()
                .map(|(_, n, _, l)| format!("line {n}: {l}"))
                .collect();
            Err(format!(
                "{option}{picked} is on {} places of {node}'s tc lines ({}): add a word of the one meant \
                 before {option}, e.g. policy.{node}.1:10.{option} or policy.{node}.eth1.{option}",
                many.len(),
                lines.join("; ")
            ))
        }
    }
}

/// The whitespace-separated words of `s` with their byte offsets.
fn words_at(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(b)) => {
                out.push((b, &s[b..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(b) = start {
        out.push((b, &s[b..]));
    }
    out
}

// ---- Metrics ------------------------------------------------------------------------------------------

/// A run's metrics by name (none where the run had nothing to measure).
pub(crate) type Metrics = Vec<(String, Option<f64>)>;

/// What a report reads of a point's run: the sweep's metrics, summary.json and the samples of
/// interfaces.csv and classes.csv.
pub(crate) struct PointRun {
    pub metrics: Metrics,
    pub summary: Value,
    pub ifaces: Vec<IfaceSeries>,
    pub classes: Vec<ClassSeries>,
    /// The charts asked for (`tclab sim`'s file stems: throughput, ping, …) as SVG, by stem.
    pub svgs: Vec<(String, String)>,
}

/// A row of interfaces.csv: the sample ending at `t` seconds.
pub(crate) struct IfaceSeries {
    pub iface: String,
    pub t: f64,
    pub rx_bps: f64,
    pub tx_bps: f64,
    pub backlog_pkts: f64,
}

/// A row of classes.csv.
pub(crate) struct ClassSeries {
    pub iface: String,
    pub classid: String,
    pub t: f64,
    pub bps: f64,
}

/// The metrics of a run, in the scenario's order: per flow its goodput and losses, per ping its RTT
/// percentiles and losses, and the packets every interface's qdiscs dropped.
fn metrics(sc: &Scenario, out: &Outcome) -> Vec<(String, Option<f64>)> {
    let mut m = Vec::new();
    for t in &sc.traffic {
        match &t.kind {
            TrafficKind::Ping { .. } => {
                let Some(p) = out.pings.iter().find(|p| p.name == t.name) else {
                    continue;
                };
                let rtt = |x: f64| (p.rtt.count > 0).then_some(x);
                m.push((format!("{}.rtt_p50_ms", t.name), rtt(p.rtt.p50_ms)));
                m.push((format!("{}.rtt_p99_ms", t.name), rtt(p.rtt.p99_ms)));
                m.push((format!("{}.rtt_avg_ms", t.name), rtt(p.rtt.avg_ms)));
                let lost = p.sent.saturating_sub(p.received) as f64;
                m.push((
                    format!("{}.loss_pct", t.name),
                    (p.sent > 0).then(|| 100.0 * lost / p.sent as f64),
                ));
            }
            kind => {
                let Some(f) = out.flows.iter().find(|f| f.name == t.name) else {
                    continue;
                };
                m.push((format!("{}.goodput_bps", t.name), Some(f.goodput_bps)));
                if matches!(kind, TrafficKind::Udp { .. }) {
                    m.push((
                        format!("{}.lost_packets", t.name),
                        Some(f.lost_packets as f64),
                    ));
                } else {
                    m.push((
                        format!("{}.retransmits", t.name),
                        Some(f.retransmits as f64),
                    ));
                }
            }
        }
    }
    let drops: u64 = sc.net.ifaces.iter().map(|f| f.counters.tx_dropped).sum();
    m.push(("drops".into(), Some(drops as f64)));
    // Each TCP entry's counters after all the above: the earlier columns keep their places.
    for t in tcp_entries(sc) {
        if let Some(n) = out
            .flows
            .iter()
            .find(|f| f.name == t)
            .and_then(|f| f.nstat.as_ref())
        {
            m.extend(
                nstat(n)
                    .into_iter()
                    .map(|(k, v)| (format!("{t}.{k}"), Some(v))),
            );
        }
    }
    m
}

/// The names of the scenario's TCP entries, in its order.
fn tcp_entries(sc: &Scenario) -> impl Iterator<Item = &str> {
    sc.traffic
        .iter()
        .filter(|t| matches!(t.kind, TrafficKind::Tcp { .. }))
        .map(|t| t.name.as_str())
}

/// A TCP entry's loss-recovery counters as summary.json's `nstat` has them: Linux's names, in the
/// same order.
fn nstat(n: &TcpNstat) -> Vec<(String, f64)> {
    match serde_json::to_value(n) {
        Ok(Value::Object(m)) => m
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_f64()?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Is `metric` one of a TCP entry's `nstat` counters (`bulk.TCPLostRetransmit`)? Linux's names all
/// begin with TCP.
fn is_counter(metric: &str) -> bool {
    metric
        .rsplit_once('.')
        .is_some_and(|(_, c)| c.starts_with("TCP"))
}

/// The metric names a scenario's run reports, without running it.
fn metric_names(sc: &Scenario) -> Vec<String> {
    let mut names = Vec::new();
    for t in &sc.traffic {
        let ends: &[&str] = match t.kind {
            TrafficKind::Ping { .. } => &["rtt_p50_ms", "rtt_p99_ms", "rtt_avg_ms", "loss_pct"],
            TrafficKind::Udp { .. } => &["goodput_bps", "lost_packets"],
            TrafficKind::Tcp { .. } => &["goodput_bps", "retransmits"],
        };
        names.extend(ends.iter().map(|e| format!("{}.{e}", t.name)));
    }
    names.push("drops".into());
    let counters = nstat(&TcpNstat::default());
    for t in tcp_entries(sc) {
        names.extend(counters.iter().map(|(k, _)| format!("{t}.{k}")));
    }
    names
}

/// Without `--metric`: every flow's goodput and every ping's 99th percentile, or the drops.
fn default_metrics(names: &[String]) -> Vec<String> {
    let picked: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with(".goodput_bps") || n.ends_with(".rtt_p99_ms"))
        .cloned()
        .collect();
    if picked.is_empty() {
        vec!["drops".into()]
    } else {
        picked
    }
}

// ---- Point files --------------------------------------------------------------------------------------

/// What identifies a sweep: the scenario's text, the grid and the seed. A point file of another sweep
/// is foreign to this one's merge.
fn fingerprint(text: &str, grid: &Grid, seed: Option<u64>) -> String {
    // FNV-1a, 64 bits: stable across builds and machines (std's hasher is not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(text.as_bytes());
    for a in &grid.axes {
        eat(b"\0");
        eat(a.key.as_bytes());
        for v in &a.values {
            eat(b"\x01");
            eat(v.as_bytes());
        }
    }
    eat(format!("\0{seed:?}").as_bytes());
    format!("{h:016x}")
}

fn point_file_name(i: usize) -> String {
    format!("point-{i:05}.json")
}

/// A point's result as its file's bytes. Numbers are kept as text (`f64`'s shortest round-trip form):
/// read back, they are the same numbers, whatever JSON parser reads them.
fn point_json(sweep: &str, grid: &Grid, i: usize, metrics: &[(String, Option<f64>)]) -> Vec<u8> {
    let m: Vec<Value> = metrics
        .iter()
        .map(|(k, v)| json!([k, v.map(|x| x.to_string())]))
        .collect();
    let v = json!({
        "schema": SCHEMA,
        "sweep": sweep,
        "points": grid.len(),
        "point": i,
        "keys": grid.axes.iter().map(|a| a.key.as_str()).collect::<Vec<_>>(),
        "values": grid.values(i),
        "metrics": m,
    });
    let mut s = serde_json::to_string_pretty(&v).expect("JSON of strings and numbers");
    s.push('\n');
    s.into_bytes()
}

/// A point's result read back.
struct PointResult {
    metrics: Vec<(String, Option<f64>)>,
}

/// Read a point file: its point and result, or why it is not one of this sweep's (its schema, sweep,
/// point or values differ).
fn read_point(bytes: &[u8], sweep: &str, grid: &Grid) -> Result<(usize, PointResult), String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not a point file ({e})"))?;
    if v["schema"] != SCHEMA {
        return Err(format!("not a point file of {SCHEMA}"));
    }
    if v["sweep"] != sweep {
        return Err("a point of another sweep (its scenario, --set lists or --seed differ)".into());
    }
    let i = v["point"]
        .as_u64()
        .map(|i| i as usize)
        .filter(|&i| i < grid.len())
        .ok_or("its point number is not one of this sweep's")?;
    if v["values"] != json!(grid.values(i)) {
        return Err(format!("its values are not those of {}", grid.name(i)));
    }
    let mut metrics = Vec::new();
    for m in v["metrics"].as_array().ok_or("no metrics")? {
        let name = m[0].as_str().ok_or("a metric without a name")?;
        let value = match &m[1] {
            Value::Null => None,
            Value::String(s) => Some(
                s.parse::<f64>()
                    .map_err(|_| format!("metric {name}: \"{s}\" is not a number"))?,
            ),
            _ => return Err(format!("metric {name}: not a number as text")),
        };
        metrics.push((name.to_string(), value));
    }
    Ok((i, PointResult { metrics }))
}

// ---- Table and plots ---------------------------------------------------------------------------------

/// Every metric name of the points, in the order first seen (point by point).
fn columns(points: &[PointResult]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for p in points {
        for (n, _) in &p.metrics {
            if !cols.contains(n) {
                cols.push(n.clone());
            }
        }
    }
    cols
}

fn value_of(p: &PointResult, col: &str) -> Option<f64> {
    p.metrics
        .iter()
        .find(|(n, _)| n == col)
        .and_then(|(_, v)| *v)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn table_csv(grid: &Grid, points: &[PointResult], cols: &[String]) -> String {
    let mut head = vec!["point".to_string()];
    head.extend(grid.axes.iter().map(|a| csv_field(&a.key)));
    head.extend(cols.iter().map(|c| csv_field(c)));
    let mut s = head.join(",") + "\n";
    for (i, p) in points.iter().enumerate() {
        let mut row = vec![i.to_string()];
        row.extend(grid.values(i).iter().map(|v| csv_field(v)));
        row.extend(
            cols.iter()
                .map(|c| value_of(p, c).map_or(String::new(), |v| v.to_string())),
        );
        s += &(row.join(",") + "\n");
    }
    s
}

/// A metric as a person reads it: bit rates in tc's units, the rest to four significant digits.
fn human(col: &str, v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if col.ends_with("_bps") => fmt_bps(v),
        // Counts whole.
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
        // Four significant digits would write a mean of 192 488.25 drops as 1.925e+05, above the
        // largest seed's 192489 beside it, and a 65.3 s RTT in ms as 6.532e+04: keep the units.
        Some(v) if v.abs() >= 1e4 && v.abs() < 1e15 => format!("{v:.1}"),
        Some(v) => tclab_tc::util::fmt_g(v, 4),
    }
}

/// The table a person reads: the metrics of `cols` but TCP entries' counters (a column per counter
/// per entry; the CSV has them).
fn table_md(title: &str, grid: &Grid, points: &[PointResult], cols: &[String]) -> String {
    let cols: Vec<&String> = cols.iter().filter(|c| !is_counter(c)).collect();
    let cell = |s: &str| s.replace('|', "\\|");
    let mut s = format!("# {}\n\n", cell(title));
    let mut head = vec!["point".to_string()];
    head.extend(grid.axes.iter().map(|a| cell(&a.key)));
    head.extend(cols.iter().map(|c| cell(c)));
    s += &format!("| {} |\n", head.join(" | "));
    let align: Vec<&str> = (0..head.len())
        .map(|k| if k > grid.axes.len() { "---:" } else { "---" })
        .collect();
    s += &format!("|{}|\n", align.join("|"));
    for (i, p) in points.iter().enumerate() {
        let mut row = vec![i.to_string()];
        row.extend(grid.values(i).iter().map(|v| cell(v)));
        row.extend(cols.iter().map(|c| human(c, value_of(p, c))));
        s += &format!("| {} |\n", row.join(" | "));
    }
    s
}

/// A file name's part from a key or metric: letters, digits, `-` and `_` kept, the rest `_`.
fn stem_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One chart per metric and key: the metric against the key's values, one line per combination of the
/// other keys' values.
fn charts(
    title: &str,
    grid: &Grid,
    points: &[PointResult],
    metrics: &[String],
) -> Vec<(plot::Chart, plot::XAxis)> {
    let mut out = Vec::new();
    for m in metrics {
        // A key given one value is a setting, not an axis: no chart, and not in the lines' names.
        for (k, axis) in grid
            .axes
            .iter()
            .enumerate()
            .filter(|(_, a)| a.values.len() > 1)
        {
            // Lines keyed by the other axes' digits, in point order.
            let mut lines: Vec<(Vec<usize>, plot::Series)> = Vec::new();
            for (i, p) in points.iter().enumerate() {
                let d = grid.digits(i);
                let mut others = d.clone();
                others.remove(k);
                let Some(y) = value_of(p, m) else { continue };
                let pos = match lines.iter().position(|(o, _)| *o == others) {
                    Some(pos) => pos,
                    None => {
                        let name: Vec<String> = grid
                            .axes
                            .iter()
                            .enumerate()
                            .filter(|&(j, a)| j != k && a.values.len() > 1)
                            .map(|(j, a)| format!("{}={}", a.key, a.values[d[j]]))
                            .collect();
                        let name = if name.is_empty() {
                            m.clone()
                        } else {
                            name.join(", ")
                        };
                        lines.push((
                            others,
                            plot::Series {
                                name,
                                points: Vec::new(),
                                faint: false,
                            },
                        ));
                        lines.len() - 1
                    }
                };
                lines[pos].1.points.push((d[k] as f64, y));
            }
            let chart = plot::Chart {
                file_stem: format!("sweep-{}-{}", stem_part(m), stem_part(&axis.key)),
                title: format!("{title}: {m} against {}", axis.key),
                y_desc: m.clone(),
                series: lines.into_iter().map(|(_, s)| s).collect(),
                rate_axis: m.ends_with("_bps"),
                size: (1400, 600),
            };
            let x = plot::XAxis::Values {
                desc: axis.key.clone(),
                labels: axis.values.clone(),
            };
            out.push((chart, x));
        }
    }
    out
}

/// The table, its Markdown and the plots of a sweep, written into `dir` whole: everything is made
/// first (plots in a scratch directory), then renamed into place.
fn write_results(
    dir: &Path,
    title: &str,
    grid: &Grid,
    points: &[PointResult],
    chosen: &[String],
    plots: bool,
) -> Result<Vec<String>, String> {
    let cols = columns(points);
    let mut files = vec![
        (
            "sweep.csv".to_string(),
            table_csv(grid, points, &cols).into_bytes(),
        ),
        (
            "sweep.md".to_string(),
            table_md(title, grid, points, &cols).into_bytes(),
        ),
    ];
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if plots && !plot::font_available() {
        eprintln!(
            "tclab: warning: no TrueType font found ({}); plots skipped. Install fonts-dejavu-core to get them.",
            plot::FONT_PATHS.join(", ")
        );
    } else if plots {
        let scratch = dir.join(format!(".sweep-plots.{}", std::process::id()));
        let drawn = draw_charts(&scratch, title, grid, points, chosen);
        let _ = std::fs::remove_dir_all(&scratch);
        files.extend(drawn?);
    }
    remove_stale(dir, &files);
    write_files(dir, &files)?;
    Ok(files
        .into_iter()
        .map(|(n, _)| dir.join(n).display().to_string())
        .collect())
}

fn draw_charts(
    scratch: &Path,
    title: &str,
    grid: &Grid,
    points: &[PointResult],
    chosen: &[String],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    std::fs::create_dir_all(scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let mut files = Vec::new();
    for (chart, x) in charts(title, grid, points, chosen) {
        for path in plot::render_against(scratch, &chart, "", &x)? {
            let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
            let name = Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            files.push((name, bytes));
        }
    }
    Ok(files)
}

/// The plots and tables of an earlier sweep in `dir` that this one does not write.
fn remove_stale(dir: &Path, files: &[(String, Vec<u8>)]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let ours = name.starts_with("sweep-") && (name.ends_with(".svg") || name.ends_with(".png"));
        if ours && !files.iter().any(|(n, _)| *n == name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

// ---- Running points ---------------------------------------------------------------------------------

/// What every mode needs: the scenario, the grid and the checks done before anything runs.
pub(crate) struct Sweep {
    text: String,
    file: String,
    base: PathBuf,
    stem: String,
    title: String,
    grid: Grid,
    seed: Option<u64>,
    id: String,
    chosen: Vec<String>,
    /// Each TCP entry and its congestion control (`cc`), in the scenario's order.
    cc: Vec<(String, String)>,
}

impl Sweep {
    fn new(a: &SweepArgs) -> Result<Sweep, Failure> {
        Sweep::build(&a.scenario, &a.set, a.seed, &a.metric, false)
    }

    /// A report's run: `scenario` over the grid of `sets` (none: the scenario as written).
    pub(crate) fn for_report(
        scenario: &str,
        sets: &[String],
        seed: Option<u64>,
    ) -> Result<Sweep, Failure> {
        Sweep::build(scenario, sets, seed, &[], true)
    }

    fn build(
        scenario: &str,
        sets: &[String],
        seed: Option<u64>,
        metric: &[String],
        allow_empty: bool,
    ) -> Result<Sweep, Failure> {
        let grid = Grid::parse_sets(sets, allow_empty).map_err(usage)?;
        let (text, file, base, stem) = scenario_source(scenario).map_err(usage)?;
        let opts = LoadOptions { seed };
        // The scenario as written first: its own errors keep their lines.
        let sc = load_with(&file, &text, &base, &opts).map_err(usage)?;
        for w in &sc.warnings {
            eprintln!("tclab: {w}");
        }
        let names = metric_names(&sc);
        let chosen = if metric.is_empty() {
            default_metrics(&names)
        } else {
            for m in metric {
                if !names.contains(m) {
                    return Err(usage(format!(
                        "--metric {m}: this scenario's metrics are {}",
                        names.join(", ")
                    )));
                }
            }
            metric.to_vec()
        };
        // --seed replaces every point's seed: a swept `seed` would be a column of values never run.
        if seed.is_some() && grid.axes.iter().any(|x| x.key == "seed") {
            return Err(usage(
                "--seed and --set seed=…: --seed replaces the seed of every point, so the swept seeds \
                 would not be run; give one or the other",
            ));
        }
        let id = fingerprint(&text, &grid, seed);
        let cc = tcp_entries(&sc)
            .filter_map(|t| Some((t.to_string(), flow_cc(&sc, t)?.to_string())))
            .collect();
        Ok(Sweep {
            cc,
            title: sc.name.clone(),
            text,
            file,
            base,
            stem,
            grid,
            seed,
            id,
            chosen,
        })
    }

    /// The number of points.
    pub(crate) fn len(&self) -> usize {
        self.grid.len()
    }

    /// How a message names point `i`.
    pub(crate) fn point_name(&self, i: usize) -> String {
        self.grid.name(i)
    }

    /// The value of swept `key` at point `i`, if `key` is swept.
    pub(crate) fn value_at(&self, i: usize, key: &str) -> Option<String> {
        let k = self.grid.axes.iter().position(|a| a.key == key)?;
        Some(self.grid.values(i)[k].to_string())
    }

    /// Run point `i` from its checked text: what a report reads of it.
    pub(crate) fn run_point_for_report(
        &self,
        i: usize,
        text: &str,
        stems: &[String],
    ) -> Result<PointRun, Failure> {
        let mut sc = self.load_point(i, text)?;
        let out = run(&mut sc, &mut |_| {})
            .map_err(|e| format!("{}: the run failed: {e}", self.grid.name(i)))?;
        let mut svgs = Vec::new();
        if !stems.is_empty() {
            for p in plot::charts(&sc, &out) {
                if stems.contains(&p.chart.file_stem) {
                    let svg = plot::svg_text(&p.chart, &p.subtitle)?;
                    svgs.push((p.chart.file_stem.clone(), svg));
                }
            }
        }
        let r = &out.recorder;
        let secs = |t: u64| t as f64 / 1e9;
        Ok(PointRun {
            metrics: metrics(&sc, &out),
            summary: summary_json(&sc, &out),
            ifaces: r
                .iface_samples
                .iter()
                .map(|x| IfaceSeries {
                    iface: sc.net.port_label(x.iface),
                    t: secs(x.t),
                    rx_bps: x.rx_bps,
                    tx_bps: x.tx_bps,
                    backlog_pkts: f64::from(x.backlog_pkts),
                })
                .collect(),
            classes: r
                .class_samples
                .iter()
                .map(|x| ClassSeries {
                    iface: sc.net.port_label(x.iface),
                    classid: x.classid.clone(),
                    t: secs(x.t),
                    bps: x.bps,
                })
                .collect(),
            svgs,
        })
    }

    /// Point `i`'s scenario text, checked by loading it: refused values name the point and the key.
    pub(crate) fn point_scenario(&self, i: usize) -> Result<String, Failure> {
        let text = point_text(&self.file, &self.text, &self.grid, i).map_err(usage)?;
        self.load_point(i, &text)?;
        Ok(text)
    }

    /// Load point `i`'s scenario. Its errors name the key but not the line: the text is rewritten.
    fn load_point(&self, i: usize, text: &str) -> Result<Scenario, Failure> {
        load_with(
            &self.file,
            text,
            &self.base,
            &LoadOptions { seed: self.seed },
        )
        .map_err(|e| {
            let key = if e.key.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.key)
            };
            usage(format!(
                "{}: {} refuses it: {key}{}",
                self.grid.name(i),
                self.file,
                e.message
            ))
        })
    }

    /// Run point `i` from its checked text: its point file's bytes.
    fn run_point(&self, i: usize, text: &str) -> Result<Vec<u8>, Failure> {
        let mut sc = self.load_point(i, text)?;
        let out = run(&mut sc, &mut |_| {})
            .map_err(|e| format!("{}: the run failed: {e}", self.grid.name(i)))?;
        Ok(point_json(&self.id, &self.grid, i, &metrics(&sc, &out)))
    }
}

/// Run every point on `jobs` threads; each point's file's bytes, by point index.
fn run_all(sw: &Sweep, texts: &[String], jobs: usize) -> Result<Vec<Vec<u8>>, Failure> {
    run_indexed(texts.len(), jobs, "sweep", &|i| sw.grid.name(i), &|i| {
        sw.run_point(i, &texts[i])
    })
}

/// Run `work(0..n)` on `jobs` threads, with a progress line on standard error (`what` names the
/// command, `name(i)` the item); the results by index, or the failure of the lowest index that failed
/// (no new item starts after a failure).
pub(crate) fn run_indexed<T: Send>(
    n: usize,
    jobs: usize,
    what: &str,
    name: &(dyn Fn(usize) -> String + Sync),
    work: &(dyn Fn(usize) -> Result<T, Failure> + Sync),
) -> Result<Vec<T>, Failure> {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Result<T, Failure>)>();
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut first_error: Option<(usize, Failure)> = None;
    let tty = std::io::stderr().is_terminal();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = work(i);
                let failed = r.is_err();
                if tx.send((i, r)).is_err() || failed {
                    // Stop handing out items: the run has failed.
                    next.store(n, Ordering::Relaxed);
                    break;
                }
            });
        }
        drop(tx);
        let mut done = 0;
        for (i, r) in rx {
            done += 1;
            match r {
                Ok(v) => results[i] = Some(v),
                Err(e) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
            }
            let mut err = std::io::stderr();
            if tty {
                let _ = write!(err, "\r\x1b[Ktclab {what}: {done}/{n} points done");
            } else {
                let _ = writeln!(err, "tclab: {what}: {done}/{n}: {} done", name(i));
            }
        }
        if tty {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    });
    if let Some((_, e)) = first_error {
        return Err(e);
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect())
}

/// The points directory, made before any point runs so that an `--out` that cannot be written stops
/// the sweep at once, not after hours of runs; the directories it made are removed if the runs fail.
struct OutDir {
    made: Vec<PathBuf>,
}

impl OutDir {
    fn make(pdir: &Path) -> Result<OutDir, Failure> {
        let made: Vec<PathBuf> = pdir
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(pdir)
            .map_err(|e| usage(format!("--out: cannot create {}: {e}", pdir.display())))?;
        Ok(OutDir { made })
    }

    /// `r`, after removing the directories made for it when it is an error ("writes nothing").
    fn unless_err<T>(&self, r: Result<T, Failure>) -> Result<T, Failure> {
        if r.is_err() {
            for d in &self.made {
                // Innermost first; a directory something else wrote into stays.
                let _ = std::fs::remove_dir(d);
            }
        }
        r
    }
}

/// `--point env`: the index a job array gives this task.
fn point_from_env() -> Result<usize, String> {
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(v) = std::env::var(var) {
            return v
                .trim()
                .parse()
                .map_err(|_| format!("--point env: {var}={v} is not a point number"));
        }
    }
    Err("--point env: neither SLURM_ARRAY_TASK_ID (Slurm job array) nor JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set".into())
}

/// Read every point file in `dir`/points: all of this sweep's points, once each, and nothing else.
fn read_points(sw: &Sweep, dir: &Path) -> Result<Vec<PointResult>, Failure> {
    let pdir = dir.join(POINTS_DIR);
    let entries = std::fs::read_dir(&pdir)
        .map_err(|e| usage(format!("--merge: cannot read {}: {e}", pdir.display())))?;
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    names.sort();
    let n = sw.grid.len();
    let mut got: Vec<Option<(PathBuf, PointResult)>> = (0..n).map(|_| None).collect();
    let mut problems = Vec::new();
    for path in names {
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        match read_point(&bytes, &sw.id, &sw.grid) {
            Err(e) => problems.push(format!("{}: {e}", path.display())),
            Ok((i, p)) => match &got[i] {
                Some((first, _)) => problems.push(format!(
                    "{}: point {i} again (also in {})",
                    path.display(),
                    first.display()
                )),
                None => got[i] = Some((path, p)),
            },
        }
    }
    let missing: Vec<String> = (0..n)
        .filter(|&i| got[i].is_none())
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "{} of {n} points missing from {}: {}",
            missing.len(),
            pdir.display(),
            missing.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(usage(format!("--merge: {}", problems.join("\n  "))));
    }
    Ok(got.into_iter().map(|g| g.expect("checked").1).collect())
}

pub fn cmd(a: SweepArgs) -> CmdResult {
    let sw = Sweep::new(&a)?;
    let n = sw.grid.len();
    if a.points {
        println!("{n}");
        return Ok(0);
    }
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("tclab-out").join(format!("sweep-{}", sw.stem)));
    if let Some(mdir) = &a.merge {
        let points = read_points(&sw, mdir)?;
        let written = write_results(mdir, &sw.title, &sw.grid, &points, &sw.chosen, !a.no_plots)?;
        println!("{n} points merged: {}", written.join(" "));
        return Ok(0);
    }
    if let Some(p) = &a.point {
        let i = if p == "env" {
            point_from_env().map_err(usage)?
        } else {
            p.parse::<usize>()
                .map_err(|_| usage(format!("--point takes a point number or env, not {p}")))?
        };
        if i >= n {
            return Err(usage(format!(
                "--point {i}: the sweep has {n} points (0 to {})",
                n - 1
            )));
        }
        let text = sw.point_scenario(i)?;
        let pdir = dir.join(POINTS_DIR);
        let made = OutDir::make(&pdir)?;
        let bytes = made.unless_err(sw.run_point(i, &text))?;
        write_files(&pdir, &[(point_file_name(i), bytes)])?;
        println!("{}", pdir.join(point_file_name(i)).display());
        return Ok(0);
    }
    let (points, written, jobs) = run_local(&a, &sw, &dir)?;
    print!(
        "{}",
        table_md(&sw.title, &sw.grid, &points, &columns(&points))
    );
    println!(
        "\n{} on {}. Results in {}/ ({} files).",
        plural(n, "point"),
        plural(jobs.min(n), "thread"),
        dir.display(),
        written.len()
    );
    Ok(0)
}

/// A local sweep: every point checked, run on threads, its file written into `dir`/points, the table
/// and plots into `dir`. The points' results, the files written and the threads asked for.
fn run_local(
    a: &SweepArgs,
    sw: &Sweep,
    dir: &Path,
) -> Result<(Vec<PointResult>, Vec<String>, usize), Failure> {
    let n = sw.grid.len();
    // Every point's value is checked before any runs: a refused one stops the sweep with nothing done.
    let texts = (0..n)
        .map(|i| sw.point_scenario(i))
        .collect::<Result<Vec<_>, _>>()?;
    let jobs = a.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |j| j.get()),
        |j| j as usize,
    );
    let pdir = dir.join(POINTS_DIR);
    let made = OutDir::make(&pdir)?;
    let files = made.unless_err(run_all(sw, &texts, jobs))?;
    let points = files
        .iter()
        .enumerate()
        .map(|(i, b)| {
            read_point(b, &sw.id, &sw.grid)
                .map(|(_, p)| p)
                .map_err(|e| format!("point {i}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let named: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .enumerate()
        .map(|(i, b)| (point_file_name(i), b))
        .collect();
    // Point files of an earlier sweep in the same place would be foreign to this one's merge.
    if let Ok(entries) = std::fs::read_dir(&pdir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("point-") && !named.iter().any(|(n, _)| *n == name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    write_files(&pdir, &named)?;
    let written = write_results(dir, &sw.title, &sw.grid, &points, &sw.chosen, !a.no_plots)?;
    Ok((points, written, jobs))
}

// ---- tclab sim --seeds --------------------------------------------------------------------------------

/// "1 seed", "2 seeds".
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The most seeds one `--seeds` runs.
const MAX_SEEDS: u64 = 10_000;

/// `--seeds FIRST..LAST`: the seeds, both ends included.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let how = "write FIRST..LAST, both included, e.g. 1..8";
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("--seeds {s}: {how}"))?;
    // A TOML integer is an i64: larger seeds could not be written into the scenario.
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .ok()
            .filter(|&v| v <= i64::MAX as u64)
            .ok_or_else(|| format!("--seeds {s}: \"{x}\" is not a seed (0 to {})", i64::MAX))
    };
    let (first, last) = (num(a)?, num(b)?);
    if first > last {
        return Err(format!("--seeds {s}: the range is empty ({how})"));
    }
    if last - first >= MAX_SEEDS {
        return Err(format!(
            "--seeds {s}: {} seeds, more than {MAX_SEEDS}; use tclab sweep --set seed=… with --point on a cluster",
            u128::from(last - first) + 1
        ));
    }
    Ok((first..=last).collect())
}

/// A metric over the seeds: its mean, min and max over the seeds that give it a value, and how many do
/// (a ping with no reply has no RTT).
struct SeedStat {
    metric: String,
    mean_min_max: Option<[f64; 3]>,
    seeds: usize,
}

/// Every metric's [`SeedStat`], in the order of the columns; the sums run in seed order, so the figures
/// are the same on every run.
fn seed_stats(points: &[PointResult]) -> Vec<SeedStat> {
    columns(points)
        .into_iter()
        .map(|metric| {
            let vals: Vec<f64> = points.iter().filter_map(|p| value_of(p, &metric)).collect();
            let mean_min_max = (!vals.is_empty()).then(|| {
                let sum: f64 = vals.iter().sum();
                let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                [sum / vals.len() as f64, min, max]
            });
            SeedStat {
                metric,
                mean_min_max,
                seeds: vals.len(),
            }
        })
        .collect()
}

fn seeds_csv(stats: &[SeedStat]) -> String {
    let mut s = String::from("metric,mean,min,max,seeds\n");
    for st in stats {
        let v: Vec<String> = match st.mean_min_max {
            Some(x) => x.iter().map(f64::to_string).collect(),
            None => vec![String::new(); 3],
        };
        s += &format!("{},{},{}\n", csv_field(&st.metric), v.join(","), st.seeds);
    }
    s
}

/// The table of `stats`, after a line naming each TCP entry's congestion control (`cc`).
fn seeds_md(title: &str, seeds: &str, stats: &[&SeedStat], cc: &[(String, String)]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut s = format!("# {} over seeds {seeds}\n\n", cell(title));
    if !cc.is_empty() {
        let each: Vec<String> = cc.iter().map(|(t, c)| format!("{t} {c}")).collect();
        s += &format!("TCP congestion control: {}.\n\n", cell(&each.join(", ")));
    }
    s += "| metric | mean | min | max | seeds |\n|---|---:|---:|---:|---:|\n";
    for st in stats {
        let f = |k: usize| human(&st.metric, st.mean_min_max.map(|x| x[k]));
        s += &format!(
            "| {} | {} | {} | {} | {} |\n",
            cell(&st.metric),
            f(0),
            f(1),
            f(2),
            st.seeds
        );
    }
    s
}

/// `tclab sim SCENARIO --seeds FIRST..LAST`: a sweep of the scenario's `seed` (its points and per-seed
/// table as `tclab sweep` writes them), and each metric's mean, min and max over the seeds, printed and
/// written as seeds.csv and seeds.md (or printed as JSON).
pub fn seeds_cmd(
    scenario: String,
    range: &str,
    out: Option<PathBuf>,
    no_plots: bool,
    json_out: bool,
) -> CmdResult {
    let seeds = parse_seeds(range).map_err(usage)?;
    let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let a = SweepArgs {
        scenario,
        set: vec![format!("seed={}", list.join(","))],
        out,
        jobs: None,
        metric: Vec::new(),
        seed: None,
        no_plots,
        points: false,
        point: None,
        merge: None,
    };
    let sw = Sweep::new(&a)?;
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("tclab-out").join(format!("seeds-{}", sw.stem)));
    let (points, written, jobs) = run_local(&a, &sw, &dir)?;
    let stats = seed_stats(&points);
    let all: Vec<&SeedStat> = stats.iter().collect();
    let md = seeds_md(&sw.title, range, &all, &sw.cc);
    write_files(
        &dir,
        &[
            ("seeds.csv".to_string(), seeds_csv(&stats).into_bytes()),
            ("seeds.md".to_string(), md.into_bytes()),
        ],
    )?;
    if json_out {
        let m: Vec<Value> = stats
            .iter()
            .map(|st| {
                let k = |i: usize| st.mean_min_max.map(|x| x[i]);
                json!({
                    "metric": st.metric,
                    "mean": k(0),
                    "min": k(1),
                    "max": k(2),
                    "seeds": st.seeds,
                })
            })
            .collect();
        let cc: serde_json::Map<String, Value> =
            sw.cc.iter().map(|(t, c)| (t.clone(), json!(c))).collect();
        let v = json!({ "scenario": sw.title, "seeds": seeds, "metrics": m, "cc": cc });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
        );
    } else {
        // The terminal gets the headline metrics and only the counters some seed moved: rrul's 8 TCP
        // entries have 136 counters, mostly 0, and they scrolled goodput and RTT away.
        let (shown, zero): (Vec<&SeedStat>, Vec<&SeedStat>) = stats.iter().partition(|st| {
            !is_counter(&st.metric)
                || st
                    .mean_min_max
                    .is_none_or(|[_, lo, hi]| lo != 0.0 || hi != 0.0)
        });
        print!("{}", seeds_md(&sw.title, range, &shown, &sw.cc));
        if !zero.is_empty() {
            println!(
                "\n{} TCP counters 0 in every seed not shown (seeds.md has every metric).",
                zero.len()
            );
        }
        println!(
            "\n{} on {}. Results in {}/ (seeds.csv, seeds.md and {} files of the sweep).",
            plural(seeds.len(), "seed"),
            plural(jobs.min(seeds.len()), "thread"),
            dir.display(),
            written.len()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn large_values_keep_their_units_digits() {
        // --seeds 1..4 of seed000-tbf: lost datagrams 192487..192489, mean 192488.25 (was "1.925e+05",
        // outside its own min and max).
        assert_eq!(
            human("iperf-udp.lost_packets", Some(192_488.25)),
            "192488.2"
        );
        assert_eq!(human("iperf-udp.lost_packets", Some(192_489.0)), "192489");
        // A 65 s queue's ping in ms (seed 000's 180 kbit HTB) reads as ms, not 6.532e+04.
        assert_eq!(human("ping.rtt_p99_ms", Some(65_320.54)), "65320.5");
        // Small figures keep four significant digits; rates their units.
        assert_eq!(human("ping.rtt_p50_ms", Some(0.831_42)), "0.8314");
        assert_eq!(human("ping.loss_pct", Some(0.071_428)), "0.07143");
        assert_eq!(human("bulk.goodput_bps", Some(9_553_517.87)), "9.55Mbit");
    }
}
