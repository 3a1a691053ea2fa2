//! `tclab trace stats|show|plot FILE`: read a trace `tclab sim --trace` wrote.

use crate::plot;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use tclab_sim::trace::{parse_line, Line};

pub const HELP: &str = "Usage: tclab trace stats FILE [--class C] [--flow F] [--dev NODE:DEV] [--event E] [--filter K:P]
       tclab trace show  FILE [--class C] [--flow F] [--dev NODE:DEV] [--event E] [--filter K:P]
       tclab trace plot  FILE --class C [--dev NODE:DEV] [--out DIR]

Reads a per-packet trace written by tclab sim SCENARIO --trace FILE (FILE - reads stdin).
  stats   per device and class (then per flow): packets enqueued, sent, dropped by reason, and the
          sojourn time of the packets sent (median, 99th percentile, maximum)
  show    the trace lines that match, as they are
  plot    the sojourn time of every packet the class sent, over the run: sojourn-CLASS.png and .svg
          in --out DIR (default: the current directory)
  --class 1:20     a leaf class (of HTB, HFSC, CBQ, DRR, QFQ, PRIO, ETS)
  --filter u32:1   the filter (kind:pref) that classified an enqueue (keeps enq lines only)
  --flow NAME      a traffic entry; NAME< is its reverse direction (a download's ACKs)
  --dev NODE:DEV   one device (router:eth1)
  --event E        enq, deq, drop or rxdrop";

struct Filter {
    class: Option<String>,
    flow: Option<String>,
    dev: Option<String>,
    event: Option<String>,
    filter: Option<String>,
}

impl Filter {
    fn keeps(&self, l: &Line) -> bool {
        self.class.as_ref().is_none_or(|c| *c == l.class)
            && self.flow.as_ref().is_none_or(|f| *f == l.flow)
            && self.dev.as_ref().is_none_or(|d| *d == l.dev)
            && self.event.as_ref().is_none_or(|e| *e == l.event)
            && self.filter.as_ref().is_none_or(|k| *k == l.filter)
    }
}

pub fn cmd(args: &[String]) -> Result<u8, String> {
    let Some(sub) = args.first() else {
        eprintln!("{HELP}");
        return Ok(1);
    };
    if matches!(sub.as_str(), "--help" | "-h" | "help") {
        println!("{HELP}");
        return Ok(0);
    }
    let mut file: Option<String> = None;
    let mut f = Filter {
        class: None,
        flow: None,
        dev: None,
        event: None,
        filter: None,
    };
    let mut out_dir = PathBuf::from(".");
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let mut val = |what: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs {what}"))
        };
        match a.as_str() {
            "--class" => {
                let v = val("a classid (1:20)")?;
                let id = tclab_tc::util::get_tc_classid(&v)
                    .ok_or_else(|| format!("--class: \"{v}\" is not a classid (e.g. 1:20)"))?;
                f.class = Some(tclab_core::Handle(id).to_string());
            }
            "--flow" => f.flow = Some(val("a traffic entry's name")?),
            "--dev" => f.dev = Some(val("NODE:DEV")?),
            "--event" => {
                let v = val("enq, deq, drop or rxdrop")?;
                if !matches!(v.as_str(), "enq" | "deq" | "drop" | "rxdrop") {
                    return Err(format!("--event: \"{v}\" is not enq, deq, drop or rxdrop"));
                }
                f.event = Some(v);
            }
            "--filter" => f.filter = Some(val("a filter as kind:pref (u32:1)")?),
            "--out" => out_dir = PathBuf::from(val("a directory")?),
            s if (s == "-" || !s.starts_with('-')) && file.is_none() => file = Some(s.to_string()),
            s => {
                return Err(format!(
                    "trace: unknown option \"{s}\"; try \"tclab trace --help\""
                ))
            }
        }
    }
    let file = file.ok_or(
        "trace: give the trace file (tclab sim SCENARIO --trace FILE wrote it), or - for stdin",
    )?;
    if sub == "plot" && (f.flow.is_some() || f.event.is_some() || f.filter.is_some()) {
        return Err(
            "trace plot: only --class and --dev apply (it plots a class's dequeues)".into(),
        );
    }
    let reader: Box<dyn BufRead> = if file == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        Box::new(BufReader::new(
            std::fs::File::open(&file).map_err(|e| format!("cannot read {file}: {e}"))?,
        ))
    };
    let mut lines = Vec::new();
    let mut header_seen = false;
    // What the trace holds, for the hint when a filter matches nothing.
    let (mut devs, mut classes, mut flows, mut filters) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    let mut all = reader.lines().enumerate().peekable();
    while let Some((n, l)) = all.next() {
        let l = l.map_err(|e| format!("{file}: {e}"))?;
        if l.starts_with("# tclab trace") {
            header_seen = true;
        }
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        if !header_seen {
            return Err(format!(
                "{file}: not a tclab trace (no \"# tclab trace\" header)"
            ));
        }
        let Some(p) = parse_line(&l) else {
            if all.peek().is_none() {
                // A run cut short leaves its last line half written: keep what came before.
                eprintln!(
                    "tclab: {file}:{}: the last line is cut short; ignored",
                    n + 1
                );
                break;
            }
            return Err(format!("{file}:{}: not a trace line: {l}", n + 1));
        };
        devs.insert(p.dev.clone());
        classes.insert(p.class.clone());
        flows.insert(p.flow.clone());
        filters.insert(p.filter.clone());
        if sub == "show" {
            if f.keeps(&p) {
                let mut o = std::io::stdout().lock();
                if writeln!(o, "{l}").is_err() {
                    return Ok(0); // a closed pipe (| head)
                }
            }
            continue;
        }
        if f.keeps(&p) {
            lines.push(p);
        }
    }
    if !header_seen {
        return Err(format!(
            "{file}: not a tclab trace (no \"# tclab trace\" header)"
        ));
    }
    // A filter naming something the trace does not have is a typo more often than a question.
    for (given, seen, what) in [
        (&f.dev, &devs, "devices"),
        (&f.class, &classes, "classes"),
        (&f.flow, &flows, "flows"),
        (&f.filter, &filters, "filters"),
    ] {
        if let Some(g) = given.as_ref().filter(|g| !seen.contains(*g)) {
            let list: Vec<&str> = seen
                .iter()
                .map(String::as_str)
                .filter(|s| *s != "-")
                .collect();
            return Err(format!(
                "trace: no line has {g}; the {what} in {file}: {}",
                if list.is_empty() {
                    "none".into()
                } else {
                    list.join(", ")
                }
            ));
        }
    }
    match sub.as_str() {
        "show" => Ok(0),
        "stats" => {
            print!("{}", stats(&lines));
            Ok(0)
        }
        "plot" => {
            let class = f.class.clone().ok_or("trace plot: give --class")?;
            plot_sojourn(&lines, &class, &out_dir)
        }
        other => Err(format!(
            "trace: unknown command \"{other}\"; try \"tclab trace --help\""
        )),
    }
}

#[derive(Default)]
struct Tally {
    enq: u64,
    deq: u64,
    drops: BTreeMap<String, u64>,
    sojourn: Vec<u64>,
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

/// The tables of `tclab trace stats`: per device (egress qdisc, then what its ingress dropped), per
/// class, per flow.
pub fn stats(lines: &[Line]) -> String {
    let mut by_dev: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut by_class: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut by_flow: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for l in lines {
        let ingress = l.event == "rxdrop";
        let dev_key = (
            l.dev.clone(),
            if ingress { "ingress" } else { "egress" }.to_string(),
        );
        let mut keys = vec![(dev_key, &mut by_dev)];
        if l.class != "-" {
            keys.push(((l.dev.clone(), l.class.clone()), &mut by_class));
        }
        keys.push(((l.dev.clone(), l.flow.clone()), &mut by_flow));
        for (key, map) in keys {
            let t = map.entry(key).or_default();
            match l.event.as_str() {
                "enq" => t.enq += 1,
                "deq" => {
                    t.deq += 1;
                    if let Some(s) = l.sojourn {
                        t.sojourn.push(s);
                    }
                }
                _ => *t.drops.entry(l.reason.clone()).or_default() += 1,
            }
        }
    }
    let mut out = String::new();
    let table = |title: &str, map: &mut BTreeMap<(String, String), Tally>, out: &mut String| {
        out.push_str(&format!(
            "{:<22} {:<10} {:>9} {:>9} {:>7}  {:<28} {:>9} {:>9} {:>9}\n",
            "dev",
            title,
            "enqueued",
            "sent",
            "dropped",
            "drops by reason",
            "p50 ms",
            "p99 ms",
            "max ms"
        ));
        for ((dev, key), t) in map.iter_mut() {
            t.sojourn.sort_unstable();
            let dropped: u64 = t.drops.values().sum();
            let reasons = t
                .drops
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "{:<22} {:<10} {:>9} {:>9} {:>7}  {:<28} {:>9} {:>9} {:>9}\n",
                dev,
                key,
                t.enq,
                t.deq,
                dropped,
                if reasons.is_empty() {
                    "-".into()
                } else {
                    reasons
                },
                ms(pct(&t.sojourn, 0.5)),
                ms(pct(&t.sojourn, 0.99)),
                ms(t.sojourn.last().copied().unwrap_or(0)),
            ));
        }
    };
    table("side", &mut by_dev, &mut out);
    if !by_class.is_empty() {
        out.push('\n');
        table("class", &mut by_class, &mut out);
    }
    out.push('\n');
    table("flow", &mut by_flow, &mut out);
    // Which filter classified how many of the enqueues (tc -s filter show's hit counters, per device).
    let mut by_filter: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.event == "enq") {
        let e = by_filter.entry((&l.dev, &l.filter)).or_default();
        e.0 += 1;
        if l.reason != "ok" {
            e.1 += 1;
        }
    }
    if by_filter.keys().any(|(_, f)| *f != "-") {
        out.push_str(&format!(
            "\n{:<22} {:<10} {:>9} {:>9}\n",
            "dev", "filter", "enqueued", "refused"
        ));
        // Only the devices where filters classify: elsewhere every row would be `-`.
        let filtered: std::collections::BTreeSet<&str> = by_filter
            .keys()
            .filter(|(_, f)| *f != "-")
            .map(|(d, _)| *d)
            .collect();
        for ((dev, filter), (n, refused)) in &by_filter {
            if !filtered.contains(dev) {
                continue;
            }
            out.push_str(&format!("{dev:<22} {filter:<10} {n:>9} {refused:>9}\n"));
        }
    }
    out.push_str(
        "(egress: packets offered to the root qdisc, sent and dropped there; ingress: dropped by an \
         ingress action. filter: the enqueues each filter (kind:pref) classified last, - by none; \
         refused: not queued.)\n",
    );
    out
}

fn plot_sojourn(lines: &[Line], class: &str, dir: &std::path::Path) -> Result<u8, String> {
    let mut per_dev: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.event == "deq") {
        if let Some(s) = l.sojourn {
            per_dev
                .entry(l.dev.as_str())
                .or_default()
                .push((l.time as f64 / 1e9, s as f64 / 1e6));
        }
    }
    if per_dev.is_empty() {
        return Err(format!(
            "class {class}: no packet of it was sent in this trace"
        ));
    }
    if !plot::font_available() {
        return Err(format!(
            "no TrueType font found ({}): install fonts-dejavu-core to plot",
            plot::FONT_PATHS.join(", ")
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let chart = plot::Chart {
        file_stem: format!("sojourn-{}", class.replace(':', "_")),
        title: format!("class {class}: sojourn of each packet sent"),
        y_desc: "sojourn (ms)".into(),
        series: per_dev
            .into_iter()
            .map(|(dev, points)| plot::Series {
                name: dev.to_string(),
                points,
                faint: false,
            })
            .collect(),
        rate_axis: false,
        size: (1400, 600),
    };
    for f in plot::render(dir, &chart)? {
        println!("{f}");
    }
    Ok(0)
}
