//! `tclab sim`: run a scenario in virtual time and report what the policy did.

use crate::args::{usage, CmdResult, Failure, SimArgs};
use crate::plot;
use crate::progress::{Progress, Unit};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tclab_sim::builtin::BUILTIN;
use tclab_sim::report;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load_with, LoadOptions, Scenario};

/// `tclab sim --help`'s text after the options.
pub const HELP: &str = "\
SCENARIO is a TOML file (see docs/SCENARIOS.md) or the name of a built-in scenario (--list).
Prints a summary table (flows, pings, classes) and writes into DIR (default ./tclab-out/NAME):
  summary.json      the summary (schema tclab-sim/1)
  interfaces.csv    rx/tx bit/s and root backlog of every interface and ifb device, per sample
  classes.csv       rate, backlog and drops of every class (ifb devices' included), per sample
  flows.csv         goodput of every flow, per sample
  ping.csv          every ping's RTT
  tc.txt            tc -s qdisc/class/filter show of every device of every node with a policy, at the end
  *.png, *.svg      throughput (IN/OUT, raw and smoothed), classes, backlog, ping, flows
  index.html        the run on one page: summary, every plot with a caption, the policy
--seeds FIRST..LAST runs the scenario once per seed (a sweep of `seed`, on every core) and prints each
metric's mean, min and max over the seeds; DIR (default ./tclab-out/seeds-NAME) gets seeds.csv and
seeds.md (metric, mean, min, max, seeds that gave it a value) beside the sweep's files (docs/SWEEP.md).
--trace FILE writes every packet's fate at every qdisc (enqueue and verdict, dequeue and sojourn, drop
and reason) to FILE; read it with tclab trace stats|show|plot.
Exit status: 0; 64 if the scenario cannot be used (no such file or built-in, or an error in it); 1 if
the run fails.";

/// The scenario's text, the name errors use, and the directory relative paths start from.
pub fn scenario_source(name: &str) -> Result<(String, String, PathBuf, String), String> {
    let p = Path::new(name);
    if p.exists() {
        let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {name}: {e}"))?;
        let stem = p
            .file_stem()
            .map_or("scenario".into(), |s| s.to_string_lossy().to_string());
        let base = p
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        return Ok((text, name.to_string(), base, stem));
    }
    match tclab_sim::builtin::find(name) {
        Some(b) => Ok((
            b.toml(),
            format!("builtin:{name}"),
            PathBuf::from("."),
            name.to_string(),
        )),
        None => Err(format!(
            "no scenario file \"{name}\" and no built-in scenario of that name (tclab sim --list)"
        )),
    }
}

/// Remove the files an earlier run left in `dir` under tclab's output names that this run did not write,
/// so that the directory never mixes two runs.
pub fn remove_stale_outputs(dir: &Path, files: &[(String, Vec<u8>)], plots: &[String]) {
    let mut known: Vec<String> = [
        "summary.json",
        "interfaces.csv",
        "classes.csv",
        "flows.csv",
        "ping.csv",
        "tc.txt",
        plot::INDEX,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for stem in plot::STEMS {
        for ext in ["png", "svg"] {
            known.push(format!("{stem}.{ext}"));
        }
    }
    for name in known {
        let written = files.iter().any(|(n, _)| *n == name)
            || plots.iter().any(|p| {
                Path::new(p)
                    .file_name()
                    .is_some_and(|f| f.to_string_lossy() == name)
            });
        if !written {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
}

/// Load and run; also used by `tclab demo`.
pub fn run_scenario(
    text: &str,
    file: &str,
    base: &Path,
    seed: Option<u64>,
) -> Result<(Scenario, Outcome, f64), Failure> {
    run_scenario_traced(text, file, base, seed, None)
}

/// [`run_scenario`], writing the per-packet trace to `trace` (a file, or `-` for stdout).
pub fn run_scenario_traced(
    text: &str,
    file: &str,
    base: &Path,
    seed: Option<u64>,
    trace: Option<&str>,
) -> Result<(Scenario, Outcome, f64), Failure> {
    let opts = LoadOptions { seed };
    let mut sc = load_with(file, text, base, &opts).map_err(usage)?;
    if let Some(path) = trace {
        // stdout gets the text form, for grep and the eye; a file the binary one (docs/TRACES.md).
        sc.net.trace = Some(if path == "-" {
            tclab_sim::trace::Trace::text(Box::new(std::io::BufWriter::new(std::io::stdout())))
        } else {
            let f = std::fs::File::create(path)
                .map_err(|e| format!("--trace: cannot create {path}: {e}"))?;
            tclab_sim::trace::Trace::new(Box::new(std::io::BufWriter::with_capacity(1 << 16, f)))
        });
    }
    for w in &sc.warnings {
        eprintln!("tclab: {w}");
    }
    let mut progress = Progress::new(Some(sc.duration), Unit::SimNanos);
    let wall = Instant::now();
    let out = run(&mut sc, &mut |t| progress.tick(t))?;
    progress.finish();
    if let Some(t) = sc.net.trace.as_mut() {
        let lines = t.finish()?;
        if trace != Some("-") {
            eprintln!(
                "tclab: trace: {lines} events written to {}",
                trace.unwrap_or("")
            );
        }
    }
    Ok((sc, out, wall.elapsed().as_secs_f64()))
}

/// Run a scenario already loaded (`tclab lab compare` shortens it first), with the progress bar.
pub fn run_scenario_loaded(mut sc: Scenario) -> Result<(Scenario, Outcome, f64), Failure> {
    for w in &sc.warnings {
        eprintln!("tclab: {w}");
    }
    let mut progress = Progress::new(Some(sc.duration), Unit::SimNanos);
    let wall = Instant::now();
    let out = run(&mut sc, &mut |t| progress.tick(t))?;
    progress.finish();
    Ok((sc, out, wall.elapsed().as_secs_f64()))
}

/// Every output file of a run, ready to be written.
pub fn output_files(sc: &Scenario, out: &Outcome) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let json =
        serde_json::to_string_pretty(&report::summary_json(sc, out)).map_err(|e| e.to_string())?;
    files.push(("summary.json".into(), (json + "\n").into_bytes()));
    for (name, text) in report::csv_files(sc, out) {
        files.push((name.to_string(), text.into_bytes()));
    }
    files.push(("tc.txt".into(), report::tc_text(out).into_bytes()));
    Ok(files)
}

/// Draw the run's charts and the page showing them (`index.html`) into `dir`. Without a font the run's
/// other results stand: say so once and go on.
pub fn write_plots(dir: &Path, sc: &Scenario, out: &Outcome) -> Result<Vec<String>, String> {
    if !plot::font_available() {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "tclab: warning: no TrueType font found ({}); plots skipped. Install fonts-dejavu-core to get them.",
                plot::FONT_PATHS.join(", ")
            )
        });
        return Ok(Vec::new());
    }
    plot::write_run(dir, sc, out)
}

/// The summary's count of the charts written: one plot per figure, though each is a PNG and an SVG
/// (and `index.html` shows them).
fn plots_said(written: &[String]) -> String {
    match written.iter().filter(|f| f.ends_with(".png")).count() {
        0 => "no plots".to_string(),
        1 => "1 plot, PNG and SVG".to_string(),
        n => format!("{n} plots, PNG and SVG"),
    }
}

pub fn cmd(a: SimArgs) -> CmdResult {
    if a.list {
        for b in BUILTIN {
            println!("{:<30} {}", b.name, b.description);
        }
        return Ok(0);
    }
    if let Some(name) = &a.show {
        let b = tclab_sim::builtin::find(name).ok_or_else(|| {
            usage(format!(
                "no built-in scenario \"{name}\" (tclab sim --list)"
            ))
        })?;
        print!("{}", b.toml());
        return Ok(0);
    }
    if a.trace.as_deref() == Some("-") && a.json {
        return Err(usage(
            "--trace - and --json both write to stdout: give the trace a file",
        ));
    }
    let name = a
        .scenario
        .clone()
        .ok_or_else(|| usage("give a scenario file or built-in name"))?;
    if let Some(range) = &a.seeds {
        return crate::sweep::seeds_cmd(name, range, a.out, a.no_plots, a.json);
    }
    let (text, file, base, stem) = scenario_source(&name).map_err(usage)?;
    let wall_start = Instant::now();
    let (sc, out, sim_wall) = run_scenario_traced(&text, &file, &base, a.seed, a.trace.as_deref())?;
    let dir = a
        .out
        .unwrap_or_else(|| PathBuf::from("tclab-out").join(&stem));
    let files = output_files(&sc, &out)?;
    report::write_files(&dir, &files)?;
    let plots = if !a.no_plots {
        write_plots(&dir, &sc, &out)?
    } else {
        Vec::new()
    };
    remove_stale_outputs(&dir, &files, &plots);
    let wall = wall_start.elapsed().as_secs_f64();
    if a.json {
        let json = serde_json::to_string_pretty(&report::summary_json(&sc, &out))
            .map_err(|e| e.to_string())?;
        println!("{json}");
    } else if a.trace.as_deref() == Some("-") {
        // stdout carries the trace: the summary goes to stderr.
        eprint!("{}", report::summary_text(&sc, &out));
    } else {
        print!("{}", report::summary_text(&sc, &out));
        println!(
            "\nwall time {:.2} s ({:.2} s simulating: {:.0} events/s, {:.0} frames/s). Results in {}/ ({}).",
            wall,
            sim_wall,
            out.events as f64 / sim_wall.max(1e-9),
            out.frames as f64 / sim_wall.max(1e-9),
            dir.display(),
            plots_said(&plots)
        );
    }
    Ok(0)
}
