//! `tclab report`: the tables of a Markdown file (docs/EXPERIMENTS.md) regenerated from the runs.
//!
//! A table that tclab's figures fill is written as a *block*: an HTML comment (which Markdown does
//! not show) holding the runs and the table's template, then what was generated from them, then an
//! end marker:
//!
//! ```text
//! <!-- report
//! run: seed000-htb-rates --set policy.router0.rate=2mbit,128mbit
//! | HTB rate | seed 000's pings | tclab ping p99 |
//! |---|---:|---:|
//! | {policy.router0.rate} | 5 982–6 007 ms | {ping.rtt_p99_ms ~4 ms} |
//! | {policy.router0.rate} | 100–105 ms | {ping.rtt_p99_ms ~4 ms} |
//! -->
//! (the command and the filled table, written by tclab report)
//! <!-- /report -->
//! ```
//!
//! Each `run:` line is a sweep's scenario and `--set` lists (none: the scenario as written) and
//! perhaps a `--seed`; its points follow the previous run's. The table's rows after the alignment
//! row that hold a placeholder without `@` are filled from the points in order, one row a point;
//! `{NAME@K}` reads point K of the block wherever it stands. What is not a placeholder — the seed's
//! figures, the hand-derived ones — is the author's text, copied as written. So a report holds the
//! seed's table beside tclab's, and only tclab's cells change when the code does.
//!
//! NAME is a swept key (its value, as text), a metric of `tclab sweep` (`ping.rtt_p99_ms`,
//! `iperf-udp.goodput_bps`, `drops`), or a path into the run's summary.json
//! (`classes[classid=1:10].avg_bps`, `flows[0].delivered_bytes`); `*K` or `/K` after it scales a
//! number. The format after a space: `.N` decimals or `~N` significant digits, then a unit;
//! `bit/s` picks kbit/s, Mbit/s or Gbit/s. Integers print whole unless a precision is given.
//!
//! A `plot: CHART@K CAPTION` line in the block draws one of point K's charts (`tclab sim`'s:
//! throughput, classes, backlog, ping, flows) as an SVG in `report/` beside the Markdown file, named
//! by the run and the point, and shows it under the table.
//!
//! Every point of every block runs once, on every core; the simulator is deterministic, so running
//! the report twice writes the same file, and `--check` tells whether a file is what its runs give.

use crate::args::{usage, CmdResult, Failure, ReportArgs};
use crate::sweep::{run_indexed, PointRun, Sweep};
use serde_json::Value;
use std::path::Path;

/// `tclab report --help`'s text after the options.
pub const HELP: &str = "\
A block is an HTML comment that starts with `<!-- report`, holds one or more `run: SCENARIO [--set
KEY=V1,V2,…]… [--seed N]` lines and a Markdown table whose cells may be placeholders, and is followed by
the generated text and `<!-- /report -->`. Placeholders: {NAME} or {NAME FORMAT}, NAME a swept key, a
metric of tclab sweep (ping.rtt_p99_ms, FLOW.goodput_bps, drops) or a path into summary.json
(classes[classid=1:10].avg_bps) or a sample (tx_bps(router0:eth1,1.5), tx_bps(router0:eth1,3..10).min, .max, .mean, .p50;
rx_bps, backlog_pkts, class_bps(IFACE,CLASSID,T)), optionally scaled (*1000, /1000), subtracted from a number
(100-ping.loss_pct) and pinned to a point (@K: the block's points counted from 0 across its runs);
or {= EXPR | FORMAT}: names, numbers, + - * / and parentheses between spaces, sum( … ) min( … )
max( … ) mean( … ) jain( … ). FORMAT `.N` decimals or `~N` significant digits, then a unit (bit/s
scales itself); a text value (a swept key's) takes none. Rows after the table's alignment row with an
unpinned placeholder take the block's points in order. A `plot: CHART@K CAPTION` line (CHART:
throughput, classes, backlog, ping, flows) draws point K's chart as report/NAME.svg beside the file and
shows it under the table. A run's SCENARIO is a built-in name or a file path read from the current
directory (as tclab sim reads it), not from the Markdown file's. docs/EXPERIMENTS.md is written this
way; see the top of crates/cli/src/report.rs.
Exit status: 0; 1 if --check finds a table or chart that differs (the first differing line shown), or a run
fails; 64 if a block cannot be read (its line named; nothing written).";

const OPEN: &str = "<!-- report";
const CLOSE: &str = "<!-- /report -->";

/// One block of the file.
#[derive(Debug)]
struct Block {
    /// Line number (1-based) of its `<!-- report`.
    line: usize,
    runs: Vec<Run>,
    /// The template's lines (the table and any text beside it), each with its line number.
    template: Vec<(usize, String)>,
    /// `plot: STEM@K CAPTION` lines: a chart of point K under the table.
    plots: Vec<PlotLine>,
    /// Byte range of the generated text (between the comment's end and the end marker).
    generated: std::ops::Range<usize>,
}

/// One `plot:` line.
#[derive(Debug)]
struct PlotLine {
    line: usize,
    stem: String,
    point: usize,
    caption: String,
}

/// Read `plot: STEM@K CAPTION`.
fn parse_plot(line: usize, rest: &str) -> Result<PlotLine, String> {
    let rest = rest.trim();
    let (head, caption) = rest.split_once(' ').unwrap_or((rest, ""));
    let (stem, k) = head.split_once('@').ok_or_else(|| {
        format!("line {line}: write plot: CHART@POINT CAPTION (e.g. plot: ping@0 …)")
    })?;
    if !crate::plot::STEMS.contains(&stem) {
        return Err(format!(
            "line {line}: {stem}: the charts are {}",
            crate::plot::STEMS.join(", ")
        ));
    }
    let point = k
        .parse()
        .map_err(|_| format!("line {line}: @{k} is not a point number"))?;
    Ok(PlotLine {
        line,
        stem: stem.to_string(),
        point,
        caption: caption.trim().to_string(),
    })
}

/// One `run:` line.
#[derive(Debug)]
struct Run {
    scenario: String,
    sets: Vec<String>,
    seed: Option<u64>,
}

/// Split a `run:` line's words as a shell would: spaces separate, quotes ('…' and "…") and a
/// backslash keep what they hold.
fn shell_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => cur.push(c),
                            None => return Err("a \" is not closed".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next().ok_or("a \\ ends the line")?);
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// A word as a shell reads it back: quoted when it holds anything but plain characters.
fn shell_quote(w: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:=/+%@".contains(c);
    if !w.is_empty() && w.chars().all(plain) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn parse_run(words: &[String]) -> Result<Run, String> {
    let mut run = Run {
        scenario: String::new(),
        sets: Vec::new(),
        seed: None,
    };
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--set" => run
                .sets
                .push(it.next().ok_or("--set needs KEY=V1,V2,…")?.clone()),
            "--seed" => {
                let v = it.next().ok_or("--seed needs a number")?;
                run.seed = Some(
                    v.parse()
                        .map_err(|_| format!("--seed {v}: not a whole number"))?,
                );
            }
            o if o.starts_with('-') => {
                return Err(format!("{o}: a run takes --set and --seed only"))
            }
            s if run.scenario.is_empty() => run.scenario = s.to_string(),
            s => return Err(format!("{s}: a run has one scenario ({})", run.scenario)),
        }
    }
    if run.scenario.is_empty() {
        return Err("no scenario: write run: SCENARIO [--set KEY=V1,V2,…]".into());
    }
    Ok(run)
}

/// The blocks of `text`, or what is wrong with one (its line named).
fn parse_blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut pos = 0;
    while let Some(off) = text[pos..].find(OPEN) {
        let start = pos + off;
        let line = text[..start].matches('\n').count() + 1;
        let at = |m: String| format!("line {line}: {m}");
        let after = &text[start + OPEN.len()..];
        if !after.starts_with(['\n', ' ', '\r']) {
            // `<!-- reports …` or similar: not a block.
            pos = start + OPEN.len();
            continue;
        }
        let end_comment = after
            .find("-->")
            .ok_or_else(|| at("the block's comment is not closed by -->".into()))?;
        let body = &after[..end_comment];
        let gen_start = start + OPEN.len() + end_comment + 3;
        let close = text[gen_start..]
            .find(CLOSE)
            .ok_or_else(|| at(format!("no {CLOSE} after the block")))?;
        if let Some(o) = text[gen_start..gen_start + close].find(OPEN) {
            let l2 = text[..gen_start + o].matches('\n').count() + 1;
            return Err(at(format!(
                "the block ends at line {l2}'s next block: write {CLOSE} after each block"
            )));
        }
        let mut runs = Vec::new();
        let mut template = Vec::new();
        let mut plots = Vec::new();
        for (k, l) in body.lines().enumerate() {
            let l = l.trim_end();
            if let Some(r) = l.trim_start().strip_prefix("run:") {
                let words = shell_words(r).map_err(|e| format!("line {}: {e}", line + k))?;
                runs.push(parse_run(&words).map_err(|e| format!("line {}: {e}", line + k))?);
            } else if let Some(r) = l.trim_start().strip_prefix("plot:") {
                plots.push(parse_plot(line + k, r)?);
            } else if !(k == 0 && l.trim().is_empty()) {
                template.push((line + k, l.to_string()));
            }
        }
        while template.last().is_some_and(|(_, l)| l.trim().is_empty()) {
            template.pop();
        }
        if runs.is_empty() {
            return Err(at("the block has no run: line".into()));
        }
        blocks.push(Block {
            line,
            runs,
            template,
            plots,
            generated: gen_start..gen_start + close,
        });
        pos = gen_start + close + CLOSE.len();
    }
    if let Some(off) = text[pos..].find(CLOSE) {
        let line = text[..pos + off].matches('\n').count() + 1;
        return Err(format!("line {line}: {CLOSE} without a block before it"));
    }
    Ok(blocks)
}

// ---- Placeholders ---------------------------------------------------------------------------------

/// A placeholder: `{NAME[*K|/K][@P] [FORMAT]}`, `{K-NAME …}`, or `{= EXPR | FORMAT}`.
struct Placeholder {
    expr: Expr,
    format: Format,
}

/// What a placeholder computes. Names are read at a point: their own (`@P`) or their row's.
#[derive(Debug, PartialEq)]
enum Expr {
    Num(f64),
    Name(String, Option<usize>),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    /// `sum( … )`, `min( … )`, `max( … )`, `mean( … )`, `jain( … )` (Jain's fairness index).
    Call(String, Vec<Expr>),
}

const FUNCTIONS: [&str; 5] = ["sum", "min", "max", "mean", "jain"];

#[derive(Default)]
struct Format {
    decimals: Option<usize>,
    significant: Option<usize>,
    unit: String,
}

/// A name with its `@P`, if it has one.
fn name_at(tok: &str) -> Result<Expr, String> {
    match tok.rsplit_once('@') {
        Some((n, p)) if !n.is_empty() => Ok(Expr::Name(
            n.to_string(),
            Some(
                p.parse::<usize>()
                    .map_err(|_| format!("@{p} is not a point number"))?,
            ),
        )),
        _ if tok.is_empty() => Err("no name".into()),
        _ => Ok(Expr::Name(tok.to_string(), None)),
    }
}

/// `EXPR`: words separated by spaces; `+ - * /` and parentheses are words of their own (a name may
/// hold `-`, as `iperf-udp.goodput_bps`); a function is `NAME(` … `)`.
fn parse_expr(text: &str) -> Result<Expr, String> {
    let toks: Vec<&str> = text.split_whitespace().collect();
    let mut pos = 0;
    let e = expr_sum(&toks, &mut pos)?;
    match toks.get(pos) {
        None => Ok(e),
        Some(t) => Err(format!(
            "{t}: an operator (+ - * /) or the end was expected"
        )),
    }
}

/// Operands of `next` joined left to right by any of `ops` (one precedence level).
fn expr_level(
    t: &[&str],
    pos: &mut usize,
    ops: [&str; 2],
    next: fn(&[&str], &mut usize) -> Result<Expr, String>,
) -> Result<Expr, String> {
    let mut e = next(t, pos)?;
    while let Some(op) = t.get(*pos).filter(|o| ops.contains(o)) {
        *pos += 1;
        let r = next(t, pos)?;
        e = Expr::Bin(op.chars().next().unwrap_or('+'), Box::new(e), Box::new(r));
    }
    Ok(e)
}

fn expr_sum(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    expr_level(t, pos, ["+", "-"], expr_product)
}

fn expr_product(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    expr_level(t, pos, ["*", "/"], expr_unit)
}

fn expr_unit(t: &[&str], pos: &mut usize) -> Result<Expr, String> {
    let tok = *t.get(*pos).ok_or("the expression ends too soon")?;
    *pos += 1;
    if tok == "-" {
        return Ok(Expr::Neg(Box::new(expr_unit(t, pos)?)));
    }
    let close = |pos: &mut usize| match t.get(*pos) {
        Some(&")") => {
            *pos += 1;
            Ok(())
        }
        _ => Err(format!("a {tok} without its )")),
    };
    if tok == "(" {
        let e = expr_sum(t, pos)?;
        close(pos)?;
        return Ok(e);
    }
    if let Some(f) = tok.strip_suffix('(').filter(|f| FUNCTIONS.contains(f)) {
        let mut args = Vec::new();
        while t.get(*pos).is_some_and(|&x| x != ")") {
            args.push(expr_unit(t, pos)?);
        }
        close(pos)?;
        if args.is_empty() {
            return Err(format!("{f}( ) takes one value or more"));
        }
        return Ok(Expr::Call(f.to_string(), args));
    }
    if let Some(f) = tok.strip_suffix('(') {
        return Err(format!(
            "{f}( is no function (sum, min, max, mean, jain; a ( alone groups)"
        ));
    }
    if let Ok(v) = tok.parse::<f64>() {
        return Ok(Expr::Num(v));
    }
    if ["+", "*", "/", ")"].contains(&tok) {
        return Err(format!("{tok}: a value was expected"));
    }
    name_at(tok)
}

fn parse_placeholder(inner: &str) -> Result<Placeholder, String> {
    let inner = inner.trim();
    let at = |e: String| format!("{{{inner}}}: {e}");
    let (expr, fmt) = if let Some(rest) = inner.strip_prefix('=') {
        let (e, f) = rest.split_once('|').unwrap_or((rest, ""));
        (parse_expr(e).map_err(at)?, f)
    } else {
        let (head, fmt) = inner.split_once(' ').unwrap_or((inner, ""));
        // K-NAME: the value subtracted from K (the share of pings answered from the share lost).
        let (minus_from, head) = match head.split_once('-') {
            Some((k, rest)) if !k.is_empty() && k.parse::<f64>().is_ok() => (k.parse().ok(), rest),
            _ => (None, head),
        };
        let (head, point) = match head.rsplit_once('@') {
            Some((h, p)) => (h, Some(format!("@{p}"))),
            None => (head, None),
        };
        let (name, scale) = match head.find(['*', '/']) {
            Some(k) => {
                let v: f64 = head[k + 1..]
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite() && *v != 0.0)
                    .ok_or_else(|| at(format!("{} is not a scale", &head[k..])))?;
                let op = if head[k..].starts_with('*') { '*' } else { '/' };
                (&head[..k], Some((op, v)))
            }
            None => (head, None),
        };
        let mut e = name_at(&format!("{name}{}", point.unwrap_or_default())).map_err(at)?;
        if let Some((op, v)) = scale {
            e = Expr::Bin(op, Box::new(e), Box::new(Expr::Num(v)));
        }
        if let Some(k) = minus_from {
            e = Expr::Bin('-', Box::new(Expr::Num(k)), Box::new(e));
        }
        (e, fmt)
    };
    let mut format = Format::default();
    let fmt = fmt.trim();
    let mut unit = fmt;
    if let Some(first) = fmt.split(' ').next() {
        let digits = |s: &str| {
            s.parse::<usize>()
                .ok()
                .filter(|&n| n <= 12)
                .ok_or_else(|| at(format!("{first}: give 0 to 12 digits")))
        };
        if let Some(n) = first.strip_prefix('.') {
            format.decimals = Some(digits(n)?);
            unit = fmt[first.len()..].trim();
        } else if let Some(n) = first.strip_prefix('~') {
            format.significant = Some(digits(n)?.max(1));
            unit = fmt[first.len()..].trim();
        }
    }
    if unit.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(at(format!(
            "{unit}: a format is .N (decimals) or ~N (significant digits), then a unit"
        )));
    }
    if unit.contains('|') {
        return Err(at(format!(
            "{unit}: a unit cannot hold | (a table would split the cell there)"
        )));
    }
    format.unit = unit.to_string();
    Ok(Placeholder { expr, format })
}

impl Expr {
    /// Every name's pinned point (`None` for a name that takes its row's).
    fn points(&self, out: &mut Vec<Option<usize>>) {
        match self {
            Expr::Num(_) => {}
            Expr::Name(_, p) => out.push(*p),
            Expr::Neg(e) => e.points(out),
            Expr::Bin(_, a, b) => {
                a.points(out);
                b.points(out);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.points(out)),
        }
    }

    /// The value at `row` (the point of the placeholder's row); `None` when a value it reads was not
    /// measured (a ping that got no answer), which shows as —.
    fn eval(&self, points: &[PointValues], row: Option<usize>) -> Result<Option<f64>, String> {
        Ok(match self {
            Expr::Num(v) => Some(*v),
            Expr::Name(n, p) => {
                let i = p.or(row).ok_or("checked by layout")?;
                match points[i].look(n).transpose()? {
                    Some(Looked::Number(v)) => v,
                    Some(Looked::Text(t)) => {
                        return Err(format!("{n}: \"{t}\" is text, not a number"))
                    }
                    None => return Err(points[i].unknown(n)),
                }
            }
            Expr::Neg(e) => e.eval(points, row)?.map(|v| -v),
            Expr::Bin(op, a, b) => {
                let (Some(x), Some(y)) = (a.eval(points, row)?, b.eval(points, row)?) else {
                    return Ok(None);
                };
                Some(match op {
                    '+' => x + y,
                    '-' => x - y,
                    '*' => x * y,
                    _ if y == 0.0 => return Ok(None),
                    _ => x / y,
                })
            }
            Expr::Call(f, args) => {
                let mut v = Vec::new();
                for a in args {
                    match a.eval(points, row)? {
                        Some(x) => v.push(x),
                        None => return Ok(None),
                    }
                }
                let n = v.len() as f64;
                let sum: f64 = v.iter().sum();
                Some(match f.as_str() {
                    "sum" => sum,
                    "min" => v.iter().copied().fold(f64::INFINITY, f64::min),
                    "max" => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    "mean" => sum / n,
                    _ => {
                        let sq: f64 = v.iter().map(|x| x * x).sum();
                        if sq == 0.0 {
                            return Ok(None);
                        }
                        sum * sum / (n * sq)
                    }
                })
            }
        })
    }
}

/// Every `{…}` of a line: its byte range and what it says.
fn placeholders(line: &str) -> Result<Vec<(std::ops::Range<usize>, Placeholder)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(o) = line[pos..].find('{') {
        let s = pos + o;
        let e = line[s..]
            .find('}')
            .map(|e| s + e)
            .ok_or_else(|| format!("a {{ without its }} in \"{line}\""))?;
        // `{a … {b}`: the first brace was left open; reading to the second's } would take the
        // cells between as a unit.
        if let Some(o) = line[s + 1..e].find('{') {
            return Err(format!(
                "a {{ without its }} before \"{}\"",
                &line[s + 1 + o..=e]
            ));
        }
        out.push((s..e + 1, parse_placeholder(&line[s + 1..e])?));
        pos = e + 1;
    }
    Ok(out)
}

/// Digits of the integer part in groups of three, as the docs write figures: a whole number from four
/// digits ("5 933"), one with decimals from five ("1595.7", "11 921.3").
fn grouped(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map_or(("", s), |r| ("-", r));
    let (int, frac) = rest
        .split_once('.')
        .map_or((rest, None), |(i, f)| (i, Some(f)));
    let from = if frac.is_some() { 5 } else { 4 };
    if int.len() < from || !int.bytes().all(|b| b.is_ascii_digit()) {
        return s.to_string();
    }
    let mut g = String::new();
    for (k, c) in int.chars().enumerate() {
        if k > 0 && (int.len() - k) % 3 == 0 {
            g.push(' ');
        }
        g.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{g}.{f}"),
        None => format!("{sign}{g}"),
    }
}

/// A number to `significant` digits, never rounding its integer part, trailing zeros dropped.
fn to_significant(v: f64, significant: usize) -> String {
    let mag = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i64
    };
    let decimals = (significant as i64 - 1 - mag).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

impl Format {
    fn number(&self, v: f64) -> String {
        let s = match (self.decimals, self.significant) {
            (Some(d), _) => format!("{v:.d$}"),
            (None, Some(n)) => to_significant(v, n),
            (None, None) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
            (None, None) => to_significant(v, 4),
        };
        grouped(&s)
    }

    fn show(&self, v: f64) -> String {
        if self.unit == "bit/s" {
            let (d, u) = [(1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")]
                .into_iter()
                .find(|(d, _)| v.abs() >= *d)
                .unwrap_or((1.0, "bit/s"));
            let f = Format {
                significant: self.significant.or(Some(4)),
                ..Format::default()
            };
            let f = if self.decimals.is_some() {
                Format {
                    decimals: self.decimals,
                    ..f
                }
            } else {
                f
            };
            return format!("{} {u}", f.number(v / d));
        }
        let n = self.number(v);
        if self.unit.is_empty() {
            n
        } else {
            format!("{n} {}", self.unit)
        }
    }
}

// ---- A point's values ------------------------------------------------------------------------------

/// What one point of a block gave.
struct PointValues {
    /// The swept keys' values at this point.
    keys: Vec<(String, String)>,
    run: PointRun,
}

enum Looked {
    Text(String),
    Number(Option<f64>),
}

/// Follow a summary.json path: `a.b[2].c`, `classes[classid=1:10,node=router0].bytes`.
fn json_path<'v>(root: &'v Value, path: &str) -> Option<&'v Value> {
    let mut v = root;
    let mut rest = path;
    while !rest.is_empty() {
        rest = rest.strip_prefix('.').unwrap_or(rest);
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        if !key.is_empty() {
            v = v.get(key)?;
        }
        rest = &rest[end..];
        while let Some(sel) = rest.strip_prefix('[') {
            let close = sel.find(']')?;
            let cond = &sel[..close];
            rest = &sel[close + 1..];
            let arr = v.as_array()?;
            v = if let Ok(k) = cond.parse::<usize>() {
                arr.get(k)?
            } else {
                arr.iter().find(|e| {
                    cond.split(',').all(|c| {
                        c.split_once('=').is_some_and(|(f, want)| match e.get(f) {
                            Some(Value::String(s)) => s == want,
                            Some(Value::Number(n)) => n.to_string() == want,
                            _ => false,
                        })
                    })
                })?
            };
        }
    }
    Some(v)
}

/// A time series' samples in a window: `tx_bps(router0:eth1,1.5)` is the sample ending at 1.5 s,
/// `tx_bps(router0:eth1,3..10).min` the least of those ending from 3 s to 10 s (`.max`, `.mean`);
/// `rx_bps`, `backlog_pkts` and `class_bps(IFACE,CLASSID,…)` alike. `None` if `name` is not one.
fn series(name: &str, run: &PointRun) -> Option<Result<f64, String>> {
    let open = name.find('(')?;
    let close = name.rfind(')')?;
    let field = &name[..open];
    let args: Vec<&str> = name[open + 1..close].split(',').map(str::trim).collect();
    let agg = name[close + 1..].strip_prefix('.');
    let (rows, window): (Vec<(f64, f64)>, &str) = match (field, args.as_slice()) {
        ("tx_bps" | "rx_bps" | "backlog_pkts", [iface, w]) => {
            let rows: Vec<(f64, f64)> = run
                .ifaces
                .iter()
                .filter(|x| x.iface == *iface)
                .map(|x| {
                    let v = match field {
                        "tx_bps" => x.tx_bps,
                        "rx_bps" => x.rx_bps,
                        _ => x.backlog_pkts,
                    };
                    (x.t, v)
                })
                .collect();
            if rows.is_empty() {
                // Samples interleave the interfaces: each name once, in first-sampled order.
                let mut names: Vec<&str> = Vec::new();
                for x in &run.ifaces {
                    if !names.contains(&x.iface.as_str()) {
                        names.push(&x.iface);
                    }
                }
                return Some(Err(format!(
                    "{name}: no interface {iface} sampled (these are: {})",
                    names.join(", ")
                )));
            }
            (rows, *w)
        }
        ("class_bps", [iface, classid, w]) => {
            let rows: Vec<(f64, f64)> = run
                .classes
                .iter()
                .filter(|x| x.iface == *iface && x.classid == *classid)
                .map(|x| (x.t, x.bps))
                .collect();
            if rows.is_empty() {
                return Some(Err(format!(
                    "{name}: no class {classid} of {iface} sampled"
                )));
            }
            (rows, *w)
        }
        _ => {
            return Some(Err(format!(
            "{name}: write tx_bps|rx_bps|backlog_pkts(IFACE,T) or class_bps(IFACE,CLASSID,T), T a \
                 sample's end in seconds or FROM..TO with .min, .max or .mean after it"
        )))
        }
    };
    let secs = |s: &str| {
        s.trim_end_matches('s')
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| format!("{name}: {s} is not a time in seconds"))
    };
    let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
    Some((|| match window.split_once("..") {
        None => {
            let t = secs(window)?;
            if agg.is_some() {
                return Err(format!("{name}: .min/.max/.mean take a window FROM..TO"));
            }
            rows.iter()
                .find(|(at, _)| near(*at, t))
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("{name}: no sample ends at {t} s"))
        }
        Some((a, b)) => {
            let (a, b) = (secs(a)?, secs(b)?);
            let vals: Vec<f64> = rows
                .iter()
                .filter(|(t, _)| *t >= a - 1e-6 && *t <= b + 1e-6)
                .map(|(_, v)| *v)
                .collect();
            if vals.is_empty() {
                return Err(format!("{name}: no sample ends from {a} s to {b} s"));
            }
            // `.pNN`: the NN-th percentile, the sorted samples' entry at (n − 1) × NN / 100.
            let pct = agg
                .and_then(|a| a.strip_prefix('p'))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= 100);
            match (agg, pct) {
                (_, Some(p)) => {
                    let mut v = vals;
                    v.sort_by(f64::total_cmp);
                    Ok(v[(v.len() - 1) * p / 100])
                }
                (Some("min"), _) => Ok(vals.iter().copied().fold(f64::INFINITY, f64::min)),
                (Some("max"), _) => Ok(vals.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                (Some("mean"), _) => Ok(vals.iter().sum::<f64>() / vals.len() as f64),
                _ => Err(format!(
                    "{name}: a window takes .min, .max, .mean or .pNN (a percentile) after it"
                )),
            }
        }
    })())
}

impl PointValues {
    /// Why `name` reads nothing: what this run has.
    fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self
            .keys
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(self.run.metrics.iter().map(|(k, _)| k.as_str()))
            .collect();
        let top: Vec<&str> = self
            .run
            .summary
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        format!(
            "{name}: no such key, metric or summary.json path (this run's keys and metrics: {}; \
             summary.json's fields: {})",
            names.join(", "),
            top.join(", ")
        )
    }

    fn look(&self, name: &str) -> Option<Result<Looked, String>> {
        if let Some((_, v)) = self.keys.iter().find(|(k, _)| k == name) {
            return Some(Ok(Looked::Text(v.clone())));
        }
        if let Some((_, v)) = self.run.metrics.iter().find(|(k, _)| k == name) {
            return Some(Ok(Looked::Number(*v)));
        }
        if let Some(r) = series(name, &self.run) {
            return Some(r.map(|v| Looked::Number(Some(v))));
        }
        Some(Ok(match json_path(&self.run.summary, name)? {
            Value::Number(n) => Looked::Number(n.as_f64()),
            Value::String(s) => Looked::Text(s.clone()),
            Value::Null => Looked::Number(None),
            Value::Bool(b) => Looked::Text(b.to_string()),
            _ => return None,
        }))
    }
}

/// A placeholder's text at row point `row`: a name that reads text is that text, a number is
/// formatted.
fn fill(p: &Placeholder, points: &[PointValues], row: Option<usize>) -> Result<String, String> {
    if let Expr::Name(n, at) = &p.expr {
        let i = at.or(row).ok_or("checked by layout")?;
        if let Some(Looked::Text(t)) = points[i].look(n).transpose()? {
            let f = &p.format;
            if f.decimals.is_some() || f.significant.is_some() || !f.unit.is_empty() {
                return Err(format!(
                    "{n} is text (\"{t}\"): a format and unit apply to numbers only"
                ));
            }
            return Ok(t);
        }
    }
    Ok(match p.expr.eval(points, row)? {
        Some(x) => p.format.show(x),
        None => "—".into(),
    })
}

/// Check a block's template against its number of points before anything runs: every placeholder
/// reads, unpinned ones stand in the table's rows, one such row a point, pinned ones name a point.
/// Which point each template line takes (`None`: pinned placeholders or none).
fn layout(b: &Block, points: usize) -> Result<Vec<Option<usize>>, String> {
    let align = b
        .template
        .iter()
        .position(|(_, l)| l.trim_start().starts_with("|-") || l.trim_start().starts_with("|:"));
    let mut next = 0;
    let mut rows = Vec::new();
    for (k, (at, line)) in b.template.iter().enumerate() {
        let ph = placeholders(line).map_err(|e| format!("line {at}: {e}"))?;
        let mut pinned = Vec::new();
        for (_, p) in &ph {
            p.expr.points(&mut pinned);
        }
        if let Some(i) = pinned.iter().find_map(|p| p.filter(|&i| i >= points)) {
            return Err(format!(
                "line {at}: @{i}: the block's runs give {points} point{} (0 to {})",
                if points == 1 { "" } else { "s" },
                points - 1
            ));
        }
        if pinned.contains(&None) {
            if align.is_none_or(|a| k <= a) {
                return Err(format!(
                    "line {at}: a placeholder without @POINT outside the table's rows"
                ));
            }
            rows.push(Some(next));
            next += 1;
        } else {
            rows.push(None);
        }
    }
    if let Some(p) = b.plots.iter().find(|p| p.point >= points) {
        return Err(format!(
            "line {}: {}@{}: the block's runs give {points} point{}",
            p.line,
            p.stem,
            p.point,
            if points == 1 { "" } else { "s" }
        ));
    }
    if next > 0 && next != points {
        return Err(format!(
            "line {}: the table has {next} row{} that take a point; the runs give {points}",
            b.line,
            if next == 1 { "" } else { "s" }
        ));
    }
    Ok(rows)
}

/// Where a block's chart of point `k` is written, beside the Markdown file: named by the run and the
/// point (not the block's line, which moves as the file is edited), so the same chart keeps its name.
fn plot_file(b: &Block, sweeps: &[Sweep], k: usize, stem: &str) -> String {
    let mut first = 0;
    for (r, sw) in b.runs.iter().zip(sweeps) {
        if k < first + sw.len() {
            // FNV-1a of the run's words and the point: stable across builds and machines.
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let words = std::iter::once(r.scenario.clone())
                .chain(r.sets.iter().cloned())
                .chain(std::iter::once(format!("{:?} {}", r.seed, k - first)));
            for w in words {
                for byte in w.bytes().chain([0]) {
                    h ^= u64::from(byte);
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
            let name: String = r
                .scenario
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            return format!("{PLOT_DIR}/{name}-{:08x}-{stem}.svg", h >> 32);
        }
        first += sw.len();
    }
    unreachable!("checked by layout")
}

/// The folder, beside the Markdown file, that holds its blocks' charts.
const PLOT_DIR: &str = "report";

/// The block's generated text: the commands, then the template filled from `points`, then its charts.
fn render(b: &Block, sweeps: &[Sweep], points: &[PointValues]) -> Result<String, String> {
    let mut out = String::from("\n```sh\n");
    for (r, sw) in b.runs.iter().zip(sweeps) {
        let mut words = vec![
            "tclab".to_string(),
            if sw.len() == 1 && r.sets.is_empty() {
                "sim"
            } else {
                "sweep"
            }
            .to_string(),
            shell_quote(&r.scenario),
        ];
        for s in &r.sets {
            words.push("--set".into());
            words.push(shell_quote(s));
        }
        if let Some(seed) = r.seed {
            words.push(format!("--seed {seed}"));
        }
        let line = words.join(" ");
        if line.len() <= 100 {
            out += &line;
        } else {
            // A long sweep: each --set on a line of its own, as one would type it.
            out += &line.replace(" --set ", " \\\n  --set ");
        }
        out.push('\n');
    }
    out += "```\n\n";
    let rows = layout(b, points.len())?;
    for ((at, line), row_point) in b.template.iter().zip(rows) {
        let ph = placeholders(line).map_err(|e| format!("line {at}: {e}"))?;
        let mut filled = String::new();
        let mut pos = 0;
        for (range, p) in &ph {
            filled += &line[pos..range.start];
            filled += &fill(p, points, row_point).map_err(|e| format!("line {at}: {e}"))?;
            pos = range.end;
        }
        filled += &line[pos..];
        out += &filled;
        out.push('\n');
    }
    if !b.plots.is_empty() {
        out.push('\n');
        for p in &b.plots {
            out += &format!(
                "![{}]({})\n",
                p.caption.replace(']', ")"),
                plot_file(b, sweeps, p.point, &p.stem)
            );
        }
    }
    out.push('\n');
    Ok(out)
}

/// Which blocks `--only` keeps: those whose runs mention `only` (every one without it).
fn chosen(blocks: &[Block], only: Option<&str>) -> Vec<bool> {
    blocks
        .iter()
        .map(|b| {
            only.is_none_or(|o| {
                b.runs
                    .iter()
                    .any(|r| r.scenario.contains(o) || r.sets.iter().any(|s| s.contains(o)))
            })
        })
        .collect()
}

pub fn cmd(a: ReportArgs) -> CmdResult {
    let path = a
        .file
        .as_deref()
        .unwrap_or(Path::new("docs/EXPERIMENTS.md"));
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let blocks = parse_blocks(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    if blocks.is_empty() {
        return Err(usage(format!(
            "{}: no <!-- report … --> block (tclab report --help)",
            path.display()
        )));
    }
    let keep = chosen(&blocks, a.only.as_deref());
    if !keep.iter().any(|&k| k) {
        return Err(usage(format!(
            "--only {}: no block's run names it",
            a.only.as_deref().unwrap_or_default()
        )));
    }
    // Every run checked before any starts: a refused value stops the report with nothing run.
    let mut sweeps: Vec<Vec<Sweep>> = Vec::new();
    let mut work: Vec<(usize, usize, usize, String, Vec<String>)> = Vec::new();
    for (bi, b) in blocks.iter().enumerate() {
        let mut these = Vec::new();
        if keep[bi] {
            for (ri, r) in b.runs.iter().enumerate() {
                // A refused run or value names the file and the block.
                let at_block = |e: Failure| match e {
                    Failure::Usage(m) => usage(format!("{}: line {}: {m}", path.display(), b.line)),
                    other => other,
                };
                let sw = Sweep::for_report(&r.scenario, &r.sets, r.seed).map_err(at_block)?;
                let first: usize = these.iter().map(Sweep::len).sum();
                for i in 0..sw.len() {
                    let text = sw.point_scenario(i).map_err(at_block)?;
                    let stems = b
                        .plots
                        .iter()
                        .filter(|p| p.point == first + i)
                        .map(|p| p.stem.clone())
                        .collect();
                    work.push((bi, ri, i, text, stems));
                }
                these.push(sw);
            }
            let points = these.iter().map(Sweep::len).sum();
            layout(b, points).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        }
        sweeps.push(these);
    }
    let jobs = a.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |j| j.get()),
        |j| j as usize,
    );
    let results = run_indexed(
        work.len(),
        jobs,
        "report",
        &|k| {
            let (bi, ri, i, ..) = &work[k];
            format!(
                "line {}: {} {}",
                blocks[*bi].line,
                blocks[*bi].runs[*ri].scenario,
                sweeps[*bi][*ri].point_name(*i)
            )
        },
        &|k| {
            let (bi, ri, i, text, stems) = &work[k];
            let sw = &sweeps[*bi][*ri];
            let run = sw.run_point_for_report(*i, text, stems)?;
            let keys = blocks[*bi].runs[*ri]
                .sets
                .iter()
                .filter_map(|s| s.split_once('='))
                .filter_map(|(key, _)| {
                    let key = key.trim();
                    sw.value_at(*i, key).map(|v| (key.to_string(), v))
                })
                .collect();
            Ok(PointValues { keys, run })
        },
    )?;
    // Assemble the new text, block by block.
    let mut per_block: Vec<Vec<PointValues>> = blocks.iter().map(|_| Vec::new()).collect();
    for ((bi, ..), v) in work.iter().zip(results) {
        per_block[*bi].push(v);
    }
    // The charts: (path relative to the Markdown file, SVG).
    let mut charts: Vec<(String, String)> = Vec::new();
    for (bi, b) in blocks.iter().enumerate() {
        if !keep[bi] {
            continue;
        }
        for p in &b.plots {
            let svg = per_block[bi][p.point]
                .run
                .svgs
                .iter()
                .find(|(stem, _)| *stem == p.stem)
                .map(|(_, svg)| svg.clone())
                .ok_or_else(|| {
                    usage(format!(
                        "{}: line {}: point {} draws no {} chart (a run without pings has no ping chart, \
                         one without a policy no classes chart)",
                        path.display(),
                        p.line,
                        p.point,
                        p.stem
                    ))
                })?;
            charts.push((plot_file(b, &sweeps[bi], p.point, &p.stem), svg));
        }
    }
    let base = path.parent().unwrap_or(Path::new(""));
    let stale_charts: Vec<&str> = charts
        .iter()
        .filter(|(f, svg)| {
            std::fs::read_to_string(base.join(f)).ok().as_deref() != Some(svg.as_str())
        })
        .map(|(f, _)| f.as_str())
        .collect();
    let mut new = String::new();
    let mut pos = 0;
    let mut differ = Vec::new();
    for (bi, b) in blocks.iter().enumerate() {
        new += &text[pos..b.generated.start];
        let part = if keep[bi] {
            render(b, &sweeps[bi], &per_block[bi])
                .map_err(|e| usage(format!("{}: {e}", path.display())))?
        } else {
            text[b.generated.clone()].to_string()
        };
        if part != text[b.generated.clone()] {
            differ.push((b.line, first_difference(&text, b.generated.start, &part)));
        }
        new += &part;
        pos = b.generated.end;
    }
    new += &text[pos..];
    let n = keep.iter().filter(|&&k| k).count();
    if a.check {
        for f in &stale_charts {
            eprintln!(
                "tclab: {}: the chart {f} is missing or differs from what its run draws",
                path.display()
            );
        }
        if differ.is_empty() && stale_charts.is_empty() {
            println!("{}: {n} tables, as their runs give them", path.display());
            return Ok(0);
        }
        for (line, what) in &differ {
            eprintln!(
                "tclab: {}: the block at line {line} differs from what its runs give: {what}",
                path.display()
            );
        }
        eprintln!(
            "tclab: {}: {} of {n} tables and {} charts differ (tclab report {} writes them)",
            path.display(),
            differ.len(),
            stale_charts.len(),
            path.display()
        );
        return Ok(1);
    }
    // The charts first: a Markdown file never names a chart that is not there.
    for (f, svg) in &charts {
        if stale_charts.contains(&f.as_str()) {
            let to = base.join(f);
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            write_atomic(&to, svg.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
    }
    if new != text {
        write_atomic(path, new.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    println!(
        "{}: {n} tables from {} runs, {} changed; {} charts, {} written",
        path.display(),
        work.len(),
        differ.len(),
        charts.len(),
        stale_charts.len()
    );
    Ok(0)
}

/// Where a block's generated text, starting at byte `start` of `text`, first differs from `new`: its
/// line number, the file's line and the runs' (so a reader sees which figure moved).
fn first_difference(text: &str, start: usize, new: &str) -> String {
    let old = text[start..].lines();
    let base = text[..start].matches('\n').count() + 1;
    let mut new_lines = new.lines();
    for (k, o) in old.enumerate() {
        let n = new_lines.next();
        if n != Some(o) {
            return format!(
                "line {}: the file has \"{o}\", the runs give \"{}\"",
                base + k,
                n.unwrap_or("")
            );
        }
    }
    format!("line {base}: the file's text ends before the runs'")
}

/// Write `path` whole or not at all: a temporary file beside it, then a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map_or("report".into(), |n| n.to_string_lossy().to_string());
    let tmp = path.with_file_name(format!(".{name}.tclab-report.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_splits_them() {
        let w = shell_words(r#"x --set 'policy.1.tc=a b,c d' --set "k=\"v\"" e\ f"#).unwrap();
        assert_eq!(
            w,
            [
                "x",
                "--set",
                "policy.1.tc=a b,c d",
                "--set",
                "k=\"v\"",
                "e f"
            ]
        );
        assert!(shell_words("'open").is_err());
        for word in ["plain", "a b", "it's", ""] {
            assert_eq!(shell_words(&shell_quote(word)).unwrap(), [word]);
        }
    }

    #[test]
    fn numbers_as_the_docs_write_them() {
        let f = |s: &str| parse_placeholder(&format!("x {s}")).unwrap().format;
        assert_eq!(f("~4 ms").show(5933.336), "5 933 ms");
        assert_eq!(f("~4 ms").show(93.15), "93.15 ms");
        assert_eq!(f("~4 ms").show(93.2), "93.2 ms");
        assert_eq!(f(".2 %").show(0.6666), "0.67 %");
        assert_eq!(f("").show(81524.0), "81 524");
        assert_eq!(f(".1").show(1595.66), "1595.7");
        assert_eq!(f(".1").show(11921.34), "11 921.3");
        assert_eq!(f("").show(-1234567.0), "-1 234 567");
        assert_eq!(f("bit/s").show(1_946_112.0), "1.946 Mbit/s");
        assert_eq!(f("~5 bit/s").show(124_351_923.2), "124.35 Mbit/s");
        assert_eq!(f("bit/s").show(999.0), "999 bit/s");
        assert_eq!(f(".1 bit/s").show(40_000_000.0), "40.0 Mbit/s");
    }

    #[test]
    fn placeholders_read_scale_point_and_format() {
        use Expr::*;
        let name = |n: &str, p| Box::new(Name(n.into(), p));
        let p = parse_placeholder("ping.rtt_p99_ms/1000@3 .2 s").unwrap();
        assert_eq!(
            p.expr,
            Bin('/', name("ping.rtt_p99_ms", Some(3)), Box::new(Num(1000.0)))
        );
        assert_eq!(p.format.show(5949.0 / 1000.0), "5.95 s");
        let q = parse_placeholder("100-ping.loss_pct ~3 %").unwrap();
        assert_eq!(
            q.expr,
            Bin('-', Box::new(Num(100.0)), name("ping.loss_pct", None))
        );
        let r = parse_placeholder("iperf-udp.lost_packets").unwrap();
        assert_eq!(r.expr, Name("iperf-udp.lost_packets".into(), None));
        assert!(parse_placeholder("x/0").is_err());
        assert!(parse_placeholder("x@one").is_err());
        assert!(parse_placeholder("x ~99").is_err());
        // A precision without its . or ~ would print as part of the unit ("21.6 3 ms"); a | in a
        // unit would split the table's cell.
        let e = parse_placeholder("ping.rtt_p99_ms 3 ms").err().unwrap();
        assert!(e.contains("3 ms: a format is .N"), "{e}");
        let e = parse_placeholder("x | .2").err().unwrap();
        assert!(e.contains("cannot hold |"), "{e}");
        let e = parse_placeholder("= x | .1 | ms").err().unwrap();
        assert!(e.contains("cannot hold |"), "{e}");
        assert_eq!(
            parse_placeholder("x ~3 %").ok().map(|p| p.format.unit),
            Some("%".into())
        );
        let e = parse_placeholder("= avg( 1 2 )").err().unwrap();
        assert!(e.contains("avg( is no function"), "{e}");
    }

    #[test]
    fn a_brace_left_open_is_named_not_read_to_the_next_close() {
        // Before: "{a ~3 ms | {b .2}" read as a with the unit "ms | {b .2", the cells between
        // swallowed into one.
        let e = placeholders("| {a ~3 ms | {b .2} |").err().unwrap();
        assert!(e.contains("a { without its } before \"{b .2}\""), "{e}");
        let e = placeholders("| {a ~3 ms |").err().unwrap();
        assert!(e.contains("a { without its }"), "{e}");
        assert_eq!(placeholders("| {a} | {b .2 ms} |").unwrap().len(), 2);
    }

    #[test]
    fn text_values_take_no_format() {
        let mut p = point(&[]);
        p.keys.push(("link.1.rate".into(), "5mbit".into()));
        let pts = [p];
        let show = |ph: &str| fill(&parse_placeholder(ph).unwrap(), &pts, Some(0));
        assert_eq!(show("link.1.rate"), Ok("5mbit".into()));
        let e = show("link.1.rate ~3 ms").unwrap_err();
        assert!(e.contains("is text (\"5mbit\"): a format"), "{e}");
    }

    #[test]
    fn the_first_differing_line_is_shown() {
        let text = "a\n-->\n| x | 1 |\n| y | 2 |\n<!-- /report -->\n";
        let start = text.find("-->").unwrap() + 3;
        let d = first_difference(text, start, "\n| x | 1 |\n| y | 3 |\n");
        assert_eq!(
            d,
            "line 4: the file has \"| y | 2 |\", the runs give \"| y | 3 |\""
        );
    }

    /// A point whose only values are the metrics given.
    fn point(metrics: &[(&str, Option<f64>)]) -> PointValues {
        PointValues {
            keys: Vec::new(),
            run: PointRun {
                metrics: metrics.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                summary: Value::Null,
                ifaces: Vec::new(),
                classes: Vec::new(),
                svgs: Vec::new(),
            },
        }
    }

    #[test]
    fn expressions_compute_across_names_and_points() {
        let pts = [
            point(&[
                ("a-up.goodput_bps", Some(1.0)),
                ("b.goodput_bps", Some(3.0)),
                ("ping.p50", None),
            ]),
            point(&[
                ("a-up.goodput_bps", Some(2.0)),
                ("b.goodput_bps", Some(2.0)),
                ("ping.p50", Some(5.0)),
            ]),
        ];
        let val = |e: &str, row| {
            parse_placeholder(&format!("= {e}"))
                .unwrap()
                .expr
                .eval(&pts, row)
                .unwrap()
        };
        // Precedence, parentheses, a name holding '-', unary minus.
        assert_eq!(
            val("a-up.goodput_bps + b.goodput_bps * 2", Some(0)),
            Some(7.0)
        );
        assert_eq!(
            val("( a-up.goodput_bps + b.goodput_bps ) * 2", Some(0)),
            Some(8.0)
        );
        assert_eq!(val("- a-up.goodput_bps - 1", Some(0)), Some(-2.0));
        // A share, by hand: 1 / (1 + 3) = 25 %.
        assert_eq!(
            val(
                "a-up.goodput_bps / ( a-up.goodput_bps + b.goodput_bps ) * 100",
                Some(0)
            ),
            Some(25.0)
        );
        // Jain's index of (1, 3): 4² / (2 × 10) = 0.8; of (2, 2): 1.
        assert_eq!(
            val("jain( a-up.goodput_bps b.goodput_bps )", Some(0)),
            Some(0.8)
        );
        assert_eq!(
            val("jain( a-up.goodput_bps b.goodput_bps )", Some(1)),
            Some(1.0)
        );
        assert_eq!(
            val("sum( a-up.goodput_bps@0 a-up.goodput_bps@1 )", None),
            Some(3.0)
        );
        assert_eq!(
            val(
                "max( b.goodput_bps@0 b.goodput_bps@1 ) - min( b.goodput_bps@0 b.goodput_bps@1 )",
                None
            ),
            Some(1.0)
        );
        assert_eq!(val("mean( 1 2 6 )", None), Some(3.0));
        // What was not measured, or a division by zero, shows as —.
        assert_eq!(val("ping.p50 + 1", Some(0)), None);
        assert_eq!(val("1 / ( b.goodput_bps - 2 )", Some(1)), None);
        let bad = |e: &str| parse_placeholder(&format!("= {e} | .1")).err().unwrap();
        assert!(
            bad("( 1 + 2").contains("without its )"),
            "{}",
            bad("( 1 + 2")
        );
        assert!(bad("1 +").contains("ends too soon"));
        assert!(bad("1 2").contains("an operator"));
        assert!(bad("jain( )").contains("one value or more"));
        assert!(bad("* 2").contains("a value was expected"));
        let unknown = parse_placeholder("= nope * 2")
            .unwrap()
            .expr
            .eval(&pts, Some(0));
        assert!(unknown.unwrap_err().contains("nope: no such key"));
    }

    #[test]
    fn summary_paths_select_by_field() {
        let v: Value = serde_json::json!({
            "classes": [
                {"node": "a", "classid": "1:10", "bytes": 5},
                {"node": "b", "classid": "1:10", "bytes": 7}
            ],
            "flows": [{"name": "up", "goodput_bps": 2.5}]
        });
        let get = |p| json_path(&v, p).cloned();
        assert_eq!(get("classes[classid=1:10].bytes"), Some(5.into()));
        assert_eq!(get("classes[classid=1:10,node=b].bytes"), Some(7.into()));
        assert_eq!(get("classes[1].node"), Some("b".into()));
        assert_eq!(get("flows[name=up].goodput_bps"), Some(2.5.into()));
        assert_eq!(get("classes[classid=9:9].bytes"), None);
        assert_eq!(get("nothing"), None);
    }

    #[test]
    fn series_read_a_sample_or_a_window() {
        use crate::sweep::{ClassSeries, IfaceSeries};
        let sample = |t: f64, tx: f64| IfaceSeries {
            iface: "r:eth1".into(),
            t,
            rx_bps: 0.0,
            tx_bps: tx,
            backlog_pkts: 3.0,
        };
        let run = PointRun {
            metrics: Vec::new(),
            summary: Value::Null,
            ifaces: vec![sample(0.5, 10.0), sample(1.0, 30.0), sample(1.5, 20.0)],
            classes: vec![ClassSeries {
                iface: "r:eth1".into(),
                classid: "1:10".into(),
                t: 1.0,
                bps: 7.0,
            }],
            svgs: Vec::new(),
        };
        let get = |n: &str| series(n, &run).expect("a series name");
        assert_eq!(get("tx_bps(r:eth1,1)"), Ok(30.0));
        assert_eq!(get("tx_bps(r:eth1,1.0s)"), Ok(30.0));
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).min"), Ok(10.0));
        assert_eq!(get("tx_bps(r:eth1,1..1.5).max"), Ok(30.0));
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).mean"), Ok(20.0));
        // Sorted 10, 20, 30: the entry at (3 − 1) × p / 100.
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).p50"), Ok(20.0));
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).p99"), Ok(20.0));
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).p100"), Ok(30.0));
        assert_eq!(get("tx_bps(r:eth1,0.5..1.5).p0"), Ok(10.0));
        assert!(get("tx_bps(r:eth1,0..1).p101")
            .unwrap_err()
            .contains(".pNN"));
        assert_eq!(get("backlog_pkts(r:eth1,1.5)"), Ok(3.0));
        assert_eq!(get("class_bps(r:eth1,1:10,1)"), Ok(7.0));
        assert!(get("tx_bps(r:eth1,0.75)")
            .unwrap_err()
            .contains("no sample ends at 0.75 s"));
        assert!(get("tx_bps(r:eth1,0..1)")
            .unwrap_err()
            .contains(".min, .max, .mean or .pNN"));
        assert!(get("tx_bps(r:eth1,2..3).min")
            .unwrap_err()
            .contains("no sample ends from 2 s"));
        // Each interface named once, though its samples interleave with others'.
        let on = |iface: &str, t: f64| IfaceSeries {
            iface: iface.into(),
            ..sample(t, 1.0)
        };
        let run2 = PointRun {
            ifaces: vec![
                on("r:eth1", 0.5),
                on("s:eth0", 0.5),
                on("r:eth1", 1.0),
                on("s:eth0", 1.0),
            ],
            metrics: Vec::new(),
            summary: Value::Null,
            classes: Vec::new(),
            svgs: Vec::new(),
        };
        let e = series("tx_bps(x:eth0,1)", &run2).unwrap().unwrap_err();
        assert!(e.ends_with("(these are: r:eth1, s:eth0)"), "{e}");
        assert!(get("tx_bps(x:eth0,1)")
            .unwrap_err()
            .contains("these are: r:eth1"));
        assert!(get("class_bps(r:eth1,1:20,1)")
            .unwrap_err()
            .contains("no class 1:20"));
        assert!(get("drops(r:eth1,1)").unwrap_err().contains("write tx_bps"));
        assert!(series("classes[0].bytes", &run).is_none());
    }

    #[test]
    fn blocks_are_found_with_their_lines() {
        let text = "intro\n<!-- report\nrun: a --set x=1,2\n| x | y |\n|---|---:|\n| {x} | {drops} |\n| {x} | {drops} |\n-->\nold\n<!-- /report -->\ntail\n";
        let b = parse_blocks(text).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].line, 2);
        assert_eq!(b[0].runs[0].sets, ["x=1,2"]);
        assert_eq!(b[0].template.len(), 4);
        assert_eq!(b[0].template[0], (4, "| x | y |".to_string()));
        assert_eq!(&text[b[0].generated.clone()], "\nold\n");
        let open = "<!-- report\nrun: a\n-->\n";
        assert!(parse_blocks(open).unwrap_err().contains("line 1"));
        assert!(parse_blocks("<!-- report\n| x |\n-->\n<!-- /report -->")
            .unwrap_err()
            .contains("no run:"));
        assert!(parse_blocks("x\n<!-- /report -->")
            .unwrap_err()
            .contains("line 2"));
        assert!(
            parse_blocks("<!-- report\nrun: a --jobs 2\n-->\n<!-- /report -->")
                .unwrap_err()
                .contains("--set and --seed only")
        );
    }
}
