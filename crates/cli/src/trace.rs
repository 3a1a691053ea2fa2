//! `tclab trace stats|show|export|plot FILE`: read a trace `tclab sim --trace` wrote, in either form
//! (binary or text: `tclab_sim::trace`), record by record.

use crate::args::{usage, CmdResult, TraceCmd, TraceSelect, TraceSub};
use crate::plot;
use crate::progress::{Progress, Unit};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tclab_sim::trace::{Ev, Reader, Rec, Sym};

/// Which records a command reads: each field given must match (`class` as `Handle` prints it: 1:20).
pub struct Filter {
    pub class: Option<String>,
    pub flow: Option<String>,
    pub dev: Option<String>,
    /// enq, deq, drop or rxdrop.
    pub event: Option<String>,
    pub filter: Option<String>,
}

/// `tclab trace stats|show|export|plot`. Everything it can fail on is its input (the trace, or a
/// selection the trace does not have), so every error exits 64.
pub fn cmd(a: TraceCmd) -> CmdResult {
    let select = |t: TraceSelect| {
        (
            t.file,
            Filter {
                class: t.class,
                flow: t.flow,
                dev: t.dev,
                event: t.event,
                filter: t.filter,
            },
        )
    };
    let (sub, (file, f), out_dir) = match a.command {
        TraceSub::Stats(t) => ("stats", select(t), PathBuf::from(".")),
        TraceSub::Show(t) => ("show", select(t), PathBuf::from(".")),
        TraceSub::Export(t) => ("export", select(t), PathBuf::from(".")),
        TraceSub::Plot {
            file,
            class,
            dev,
            out,
        } => (
            "plot",
            (
                file,
                Filter {
                    class: Some(class),
                    flow: None,
                    dev,
                    event: None,
                    filter: None,
                },
            ),
            out,
        ),
    };
    run(sub, &file, &f, &out_dir).map_err(usage)
}

/// Run `tclab trace SUB FILE` with the records `f` keeps: `stats`, `show`, `plot` (into `out_dir`) or
/// `export`. FILE `-` is stdin.
pub fn run(sub: &str, file: &str, f: &Filter, out_dir: &Path) -> Result<u8, String> {
    match sub {
        "stats" => {
            let mut st = Stats::default();
            let r = scan(file, f, |r, rec| {
                st.add(r, rec);
                Ok(true)
            })?;
            print!("{}", st.render(r.names()));
            Ok(0)
        }
        "show" => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut line = String::new();
            let mut closed = false;
            scan(file, f, |r, rec| {
                let l = match r.raw_line() {
                    Some(l) => l,
                    None => {
                        line.clear();
                        r.text_line(rec, &mut line);
                        &line
                    }
                };
                // A closed pipe (| head) ends the output quietly.
                closed = writeln!(out, "{l}").is_err();
                Ok(!closed)
            })?;
            if !closed {
                let _ = out.flush();
            }
            Ok(0)
        }
        "export" => export(file, f),
        "plot" => {
            let class = f.class.clone().ok_or("trace plot: give --class")?;
            let mut per_dev: BTreeMap<Sym, Vec<(f64, f64)>> = BTreeMap::new();
            let r = scan(file, f, |_, rec| {
                if let (Ev::Deq, Some(s)) = (rec.event, rec.sojourn) {
                    per_dev
                        .entry(rec.dev)
                        .or_default()
                        .push((rec.time as f64 / 1e9, s as f64 / 1e6));
                }
                Ok(true)
            })?;
            let per_dev = per_dev
                .into_iter()
                .map(|(d, p)| (r.name(d).to_string(), p))
                .collect();
            plot_sojourn(per_dev, &class, out_dir)
        }
        other => Err(format!(
            "trace: unknown command \"{other}\"; try \"tclab trace --help\""
        )),
    }
}

/// `tclab trace export FILE`: the records `f` keeps as CSV on stdout, with a header line, for pandas
/// (`pd.read_csv`) and polars. A missing sojourn is an empty field (NaN in pandas), other missing
/// values `-` as in the text form.
pub fn export(file: &str, f: &Filter) -> Result<u8, String> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if writeln!(
        out,
        "time_ns,dev,event,flow,len,class,reason,sojourn_ns,filter"
    )
    .is_err()
    {
        return Ok(0);
    }
    let mut closed = false;
    let mut line = String::new();
    scan(file, f, |r, rec| {
        use std::fmt::Write as _;
        line.clear();
        let _ = write!(line, "{},", rec.time);
        csv_field(&mut line, r.name(rec.dev));
        line.push(',');
        line.push_str(rec.event.name());
        line.push(',');
        csv_field(&mut line, r.name(rec.flow));
        let _ = write!(line, ",{},", rec.len);
        csv_field(&mut line, r.name(rec.class));
        line.push(',');
        csv_field(&mut line, r.name(rec.reason));
        line.push(',');
        if let Some(s) = rec.sojourn {
            let _ = write!(line, "{s}");
        }
        line.push(',');
        csv_field(&mut line, r.name(rec.filter));
        line.push('\n');
        closed = out.write_all(line.as_bytes()).is_err();
        Ok(!closed)
    })?;
    if !closed {
        let _ = out.flush();
    }
    Ok(0)
}

/// A CSV field, quoted (RFC 4180) only if it must be: names come from the scenario file.
fn csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// A string the user asked for, and its number once the trace has it.
struct Want<'a> {
    name: Option<&'a str>,
    sym: Option<Sym>,
}

impl Want<'_> {
    /// Look for the name among the strings from `from` on (each string has one number, given once).
    fn resolve(&mut self, names: &[String], from: usize) {
        if let (Some(n), None) = (self.name, self.sym) {
            self.sym = names[from..]
                .iter()
                .position(|s| s == n)
                .map(|i| (from + i) as Sym);
        }
    }
    fn keeps(&self, s: Sym) -> bool {
        self.name.is_none() || self.sym == Some(s)
    }
}

/// Read FILE (or stdin) once, record by record, giving `each` the records `f` keeps; `each` answers
/// false to stop. A progress bar shows for long reads. Afterwards, a filter that named something the
/// trace does not have is an error (a typo more often than a question). The reader is returned for its
/// string table.
fn scan(
    file: &str,
    f: &Filter,
    mut each: impl FnMut(&Reader<Box<dyn Read>>, &Rec) -> Result<bool, String>,
) -> Result<Reader<Box<dyn Read>>, String> {
    let (input, size): (Box<dyn Read>, Option<u64>) = if file == "-" {
        (Box::new(std::io::stdin()), None)
    } else {
        let h = std::fs::File::open(file).map_err(|e| format!("cannot read {file}: {e}"))?;
        let size = h.metadata().ok().map(|m| m.len());
        (Box::new(h), size)
    };
    let mut r = Reader::new(input).map_err(|e| format!("{file}: {e}"))?;
    let mut progress = Progress::new(size, Unit::Bytes);
    let event = f.event.as_deref().and_then(Ev::parse);
    let mut wants = [
        Want {
            name: f.dev.as_deref(),
            sym: None,
        },
        Want {
            name: f.class.as_deref(),
            sym: None,
        },
        Want {
            name: f.flow.as_deref(),
            sym: None,
        },
        Want {
            name: f.filter.as_deref(),
            sym: None,
        },
    ];
    // Which strings appear as devices, classes, flows and filters, for the hint.
    let mut seen: [Vec<bool>; 4] = Default::default();
    let mut known = 0;
    let mut n: u64 = 0;
    while let Some(rec) = r.next().map_err(|e| format!("{file}: {e}"))? {
        let names = r.names().len();
        if names > known {
            for w in &mut wants {
                w.resolve(r.names(), known);
            }
            for s in &mut seen {
                s.resize(names, false);
            }
            known = names;
        }
        let fields = [rec.dev, rec.class, rec.flow, rec.filter];
        for (s, v) in seen.iter_mut().zip(fields) {
            s[v as usize] = true;
        }
        n += 1;
        if n.is_multiple_of(4096) {
            progress.tick(r.bytes_read());
        }
        if event.is_none_or(|e| e == rec.event)
            && wants.iter().zip(fields).all(|(w, v)| w.keeps(v))
            && !each(&r, &rec)?
        {
            return Ok(r);
        }
    }
    progress.finish();
    if let Some(w) = &r.cut_short {
        eprintln!("tclab: {file}: {w}");
    }
    for ((w, s), what) in wants
        .iter()
        .zip(&seen)
        .zip(["devices", "classes", "flows", "filters"])
    {
        let Some(g) = w.name.filter(|_| w.sym.is_none_or(|v| !s[v as usize])) else {
            continue;
        };
        let list: BTreeSet<&str> = s
            .iter()
            .enumerate()
            .filter(|(_, &on)| on)
            .map(|(i, _)| r.name(i as Sym))
            .filter(|n| *n != "-")
            .collect();
        return Err(format!(
            "trace: no line has {g}; the {what} in {file}: {}",
            if list.is_empty() {
                "none".into()
            } else {
                list.into_iter().collect::<Vec<_>>().join(", ")
            }
        ));
    }
    Ok(r)
}

#[derive(Default)]
struct Tally {
    enq: u64,
    deq: u64,
    /// Drops by reason (a string number).
    drops: BTreeMap<Sym, u64>,
    sojourn: Vec<u64>,
}

impl Tally {
    fn add(&mut self, rec: &Rec) {
        match rec.event {
            Ev::Enq => self.enq += 1,
            Ev::Deq => {
                self.deq += 1;
                if let Some(s) = rec.sojourn {
                    self.sojourn.push(s);
                }
            }
            Ev::Drop | Ev::RxDrop => *self.drops.entry(rec.reason).or_default() += 1,
        }
    }
}

/// Tallies by a pair of string numbers, in a table indexed by both: a record costs two array lookups,
/// not a search by name (the names are few; the records, millions).
#[derive(Default)]
struct Grid {
    at: Vec<Vec<u32>>,
    tallies: Vec<((Sym, Sym), Tally)>,
}

impl Grid {
    fn get(&mut self, a: Sym, b: Sym) -> &mut Tally {
        let (a, b) = (a as usize, b as usize);
        if self.at.len() <= a {
            self.at.resize(a + 1, Vec::new());
        }
        let row = &mut self.at[a];
        if row.len() <= b {
            row.resize(b + 1, u32::MAX);
        }
        if row[b] == u32::MAX {
            row[b] = self.tallies.len() as u32;
            self.tallies.push(((a as Sym, b as Sym), Tally::default()));
        }
        &mut self.tallies[row[b] as usize].1
    }
}

/// What `tclab trace stats` counts, as the records go by.
#[derive(Default)]
pub struct Stats {
    /// By device and side (0 egress, 1 ingress).
    by_dev: Grid,
    by_class: Grid,
    by_flow: Grid,
    /// Enqueues by device and filter: how many, how many refused.
    by_filter: BTreeMap<(Sym, Sym), (u64, u64)>,
}

impl Stats {
    pub fn add<R: Read>(&mut self, r: &Reader<R>, rec: &Rec) {
        self.by_dev
            .get(rec.dev, (rec.event == Ev::RxDrop).into())
            .add(rec);
        if r.name(rec.class) != "-" {
            self.by_class.get(rec.dev, rec.class).add(rec);
        }
        self.by_flow.get(rec.dev, rec.flow).add(rec);
        if rec.event == Ev::Enq {
            let e = self.by_filter.entry((rec.dev, rec.filter)).or_default();
            e.0 += 1;
            if r.name(rec.reason) != "ok" {
                e.1 += 1;
            }
        }
    }

    /// The tables of `tclab trace stats`: per device (egress qdisc, then what its ingress dropped), per
    /// class, per flow, per filter; rows in the order of their names.
    pub fn render(mut self, names: &[String]) -> String {
        let name = |s: Sym| names[s as usize].as_str();
        let mut out = String::new();
        let table = |title: &str, rows: Vec<(&str, &str, &mut Tally)>, out: &mut String| {
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
            for (dev, key, t) in rows {
                t.sojourn.sort_unstable();
                let dropped: u64 = t.drops.values().sum();
                let mut reasons: Vec<(&str, u64)> =
                    t.drops.iter().map(|(&r, &n)| (name(r), n)).collect();
                reasons.sort();
                let reasons = reasons
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
                // Sorted and printed: its memory goes back before the next row's sort.
                t.sojourn = Vec::new();
            }
        };
        table("side", rows(&mut self.by_dev, names, true), &mut out);
        if !self.by_class.tallies.is_empty() {
            out.push('\n');
            table("class", rows(&mut self.by_class, names, false), &mut out);
        }
        out.push('\n');
        table("flow", rows(&mut self.by_flow, names, false), &mut out);
        // Which filter classified how many of the enqueues (tc -s filter show's hit counters, per device).
        let mut by_filter: Vec<(&str, &str, u64, u64)> = self
            .by_filter
            .iter()
            .map(|((d, f), (n, refused))| (name(*d), name(*f), *n, *refused))
            .collect();
        by_filter.sort();
        if by_filter.iter().any(|(_, f, _, _)| *f != "-") {
            out.push_str(&format!(
                "\n{:<22} {:<10} {:>9} {:>9}\n",
                "dev", "filter", "enqueued", "refused"
            ));
            // Only the devices where filters classify: elsewhere every row would be `-`.
            let filtered: BTreeSet<&str> = by_filter
                .iter()
                .filter(|(_, f, _, _)| *f != "-")
                .map(|(d, _, _, _)| *d)
                .collect();
            for (dev, filter, n, refused) in &by_filter {
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
}

/// A grid's rows as (device, key, tally), in the order of their names; the key is the side (egress,
/// ingress) if `sides`, else a string.
fn rows<'a>(
    g: &'a mut Grid,
    names: &'a [String],
    sides: bool,
) -> Vec<(&'a str, &'a str, &'a mut Tally)> {
    let mut rows: Vec<(&str, &str, &mut Tally)> = g
        .tallies
        .iter_mut()
        .map(|((a, b), t)| {
            let key = match (sides, *b) {
                (true, 0) => "egress",
                (true, _) => "ingress",
                (false, b) => names[b as usize].as_str(),
            };
            (names[*a as usize].as_str(), key, t)
        })
        .collect();
    rows.sort_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
    rows
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

fn plot_sojourn(
    per_dev: Vec<(String, Vec<(f64, f64)>)>,
    class: &str,
    dir: &std::path::Path,
) -> Result<u8, String> {
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
    let mut series: Vec<plot::Series> = per_dev
        .into_iter()
        .map(|(dev, points)| plot::Series {
            name: dev,
            points,
            faint: false,
        })
        .collect();
    series.sort_by(|a, b| a.name.cmp(&b.name));
    let chart = plot::Chart {
        file_stem: format!("sojourn-{}", class.replace(':', "_")),
        title: format!("class {class}: sojourn of each packet sent"),
        y_desc: "sojourn (ms)".into(),
        series,
        rate_axis: false,
        size: (1400, 600),
    };
    for f in plot::render(dir, &chart)? {
        println!("{f}");
    }
    Ok(0)
}
