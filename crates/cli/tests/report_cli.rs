//! `tclab report`: a Markdown file's blocks run and their tables filled (crates/cli/src/report.rs).
//! The filled figures are held to hand-derived values (a full 1000-packet queue at HTB's rate), the
//! file to being the same after a second run, and bad blocks to exit 64 with the file untouched.

use std::path::Path;
use std::process::{Command, Output};

mod common;

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tclab"))
        .arg("report")
        .args(args)
        .output()
        .expect("tclab runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

const HEAD: &str = "# A report\n\nText before, kept as written.\n\n";
const TAIL: &str = "\nText after, {not a placeholder outside a block}.\n";

/// seed000-htb-rates at 16 and 64 Mbit/s for 4 s: one HTB class flooded by UDP, its default leaf a
/// 1000-packet pfifo, pinged every 10 ms.
const BLOCK: &str = "<!-- report
run: seed000-htb-rates --set duration=4s --set policy.router0.rate=16mbit,64mbit
| rate | ping p99 | full queue by hand | goodput | answered |
|---|---:|---:|---:|---:|
| {policy.router0.rate} | {ping.rtt_p99_ms .2 ms} | 745.0 ms | {iperf-udp.goodput_bps ~4 bit/s} | {100-ping.loss_pct ~3 %} |
| {policy.router0.rate} | {ping.rtt_p99_ms .2 ms} | 186.3 ms | {iperf-udp.goodput_bps ~4 bit/s} | {100-ping.loss_pct ~3 %} |

The last point's class 1:20 is {classes[classid=1:20].kind@1}; it sent {classes[0].packets@1} packets.
plot: ping@1 The 64 Mbit/s point's pings.
-->
<!-- /report -->
";

/// The number before `unit` in `cell`, its digit groups' spaces removed.
fn number(cell: &str, unit: &str) -> f64 {
    let t = cell
        .trim()
        .strip_suffix(unit)
        .unwrap_or_else(|| panic!("{cell:?} ends in {unit}"));
    t.replace(' ', "")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{cell:?}: not a number"))
}

/// The rows of the first generated table (after the block's comment): cells by column.
fn generated_rows(text: &str) -> Vec<Vec<String>> {
    let after = &text[text.find("-->").unwrap()..text.find("<!-- /report -->").unwrap()];
    after
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| rate"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn a_block_is_filled_from_its_runs_and_a_second_run_changes_nothing() {
    let dir = common::Scratch::new("report-fill", "");
    let file = dir.join("EXP.md");
    std::fs::write(&file, format!("{HEAD}{BLOCK}{TAIL}")).unwrap();
    let f = file.to_str().unwrap();

    let o = report(&[f, "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = std::fs::read_to_string(&file).unwrap();
    assert!(
        first.starts_with(&format!(
            "{HEAD}{}",
            BLOCK.strip_suffix("<!-- /report -->\n").unwrap()
        )),
        "the text before and the block kept:\n{first}"
    );
    assert!(first.ends_with(TAIL), "the text after kept:\n{first}");
    // The command a reader can run.
    assert!(
        first.contains("```sh\ntclab sweep seed000-htb-rates --set duration=4s --set policy.router0.rate=16mbit,64mbit\n```"),
        "{first}"
    );
    let rows = generated_rows(&first);
    assert_eq!(rows.len(), 2, "{first}");
    // A ping behind the full leaf waits 1000 × 1490 bytes at the class's rate (745.0 ms at 16 Mbit/s,
    // 186.25 ms at 64), within 1 % (the path adds under a millisecond); the flood keeps the rate, of
    // which HTB charges whole 1504-byte frames carrying 1462 bytes of UDP payload each: within 1 %.
    for (row, (rate, full)) in rows.iter().zip([(16e6, 745.0), (64e6, 186.25)]) {
        let p99 = number(&row[1], "ms");
        assert!(
            (p99 - full).abs() < full * 0.01,
            "p99 {p99} ms against {full} ms: {row:?}"
        );
        let good = number(&row[3], "Mbit/s") * 1e6;
        let payload = rate * 1462.0 / 1504.0;
        assert!(
            (good - payload).abs() < payload * 0.01,
            "goodput {good} against {payload}: {row:?}"
        );
        let answered = number(&row[4], "%");
        assert!(answered > 0.0 && answered < 100.0, "{row:?}");
    }
    assert!(rows[0][0] == "16mbit" && rows[1][0] == "64mbit", "{rows:?}");
    assert!(
        first.contains("The last point's class 1:20 is htb; it sent "),
        "{first}"
    );

    // The chart: named under the table, drawn beside the file (SVG), the same bytes on every run.
    let link = first
        .lines()
        .find(|l| l.starts_with("![The 64 Mbit/s point's pings.](report/seed000-htb-rates-"))
        .unwrap_or_else(|| panic!("no chart line in\n{first}"));
    let chart = dir.join(&link[link.find("(").unwrap() + 1..link.len() - 1]);
    assert!(chart.to_str().unwrap().ends_with("-ping.svg"), "{link}");
    let svg = std::fs::read_to_string(&chart).expect("the chart is written");
    assert!(
        svg.starts_with("<svg") && svg.contains("ping"),
        "{}",
        &svg[..200.min(svg.len())]
    );

    // Deterministic: the same file again, and --check agrees.
    let o = report(&[f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
    let o = report(&["--check", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&chart).unwrap(), svg);
    // A chart gone: --check says which, a run draws it again.
    std::fs::remove_file(&chart).unwrap();
    let o = report(&["--check", f]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("-ping.svg is missing or differs"),
        "{}",
        stderr(&o)
    );
    let o = report(&[f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&chart).unwrap(), svg);

    // A figure edited by hand: --check says which block, writes nothing; a run puts it back.
    let p99 = &rows[0][1];
    let edited = first.replacen(&format!("| {p99} |"), "| 1.00 ms |", 1);
    assert_ne!(edited, first);
    std::fs::write(&file, &edited).unwrap();
    let o = report(&["--check", f]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // The block and the first line that moved, with both texts: the reader sees which figure.
    let line = edited
        .lines()
        .position(|l| l.contains("| 1.00 ms |"))
        .unwrap()
        + 1;
    let want = format!(
        "the block at line 5 differs from what its runs give: line {line}: the file has \"{}\", the runs give \"{}\"",
        edited.lines().nth(line - 1).unwrap(),
        first.lines().nth(line - 1).unwrap()
    );
    assert!(stderr(&o).contains(&want), "{} lacks {want}", stderr(&o));
    assert!(stderr(&o).contains("1 of 1 tables"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), edited);
    let o = report(&[f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
}

fn refused(name: &str, text: &str, args: &[&str], says: &str) {
    let dir = common::Scratch::new(&format!("report-{name}"), "");
    let file = dir.join("EXP.md");
    std::fs::write(&file, text).unwrap();
    let mut a = args.to_vec();
    a.push(file.to_str().unwrap());
    let o = report(&a);
    assert_eq!(o.status.code(), Some(64), "{name}: {}", stderr(&o));
    assert!(
        stderr(&o).contains(says),
        "{name}: {:?} lacks {says:?}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        text,
        "{name}: the file was written"
    );
    assert!(
        std::fs::read_dir(&*dir).unwrap().count() == 1,
        "{name}: something was left beside the file"
    );
}

#[test]
fn bad_blocks_are_named_and_nothing_is_written() {
    let block = |run: &str, row: &str| {
        format!("{HEAD}<!-- report\nrun: {run}\n| a |\n|---|\n{row}\n-->\nold\n<!-- /report -->\n")
    };
    let quick = "seed004-idle";
    refused(
        "metric",
        &block(quick, "| {ping.nothing_ms} |"),
        &[],
        "line 9: ping.nothing_ms: no such key, metric or summary.json path",
    );
    refused(
        "rows",
        &block(quick, "| {drops} |\n| {drops} |"),
        &[],
        "line 5: the table has 2 rows that take a point; the runs give 1",
    );
    refused(
        "scenario",
        &block("no-such-scenario", "| {drops} |"),
        &[],
        "no built-in scenario of that name",
    );
    refused(
        "key",
        &block(
            "seed004-idle --set link.nope=1,2",
            "| {drops} |\n| {drops} |",
        ),
        &[],
        "nope",
    );
    refused(
        "end",
        &format!("{HEAD}<!-- report\nrun: {quick}\n-->\nold\n"),
        &[],
        "line 5: no <!-- /report --> after the block",
    );
    refused(
        "no-run",
        &format!("{HEAD}<!-- report\n| a |\n-->\n<!-- /report -->\n"),
        &[],
        "line 5: the block has no run: line",
    );
    refused(
        "option",
        &block("seed004-idle --jobs 3", "| {drops} |"),
        &[],
        "--jobs: a run takes --set and --seed only",
    );
    refused(
        "quote",
        &block("seed004-idle --set 'duration=2s", "| {drops} |"),
        &[],
        "line 6: a ' is not closed",
    );
    refused(
        "pinned",
        &block(quick, "| {drops@3} |"),
        &[],
        "line 9: @3: the block's runs give 1 point (0 to 0)",
    );
    refused("none", "# no blocks here\n", &[], "no <!-- report");
    refused(
        "only",
        &block(quick, "| {drops} |"),
        &["--only", "rrul"],
        "--only rrul: no block's run names it",
    );
    refused(
        "placeholder",
        &block(quick, "| {drops .x} |"),
        &[],
        "give 0 to 12 digits",
    );
    // A brace left open: named, not read on to the next cell's } (which took the cells between as
    // the first placeholder's unit).
    refused(
        "brace",
        &block(quick, "| {ping.rtt_p99_ms ~3 ms | {drops} |"),
        &[],
        "line 9: a { without its } before \"{drops}\"",
    );
    // A precision without . or ~ printed as part of the unit ("16.4 3 ms").
    refused(
        "precision",
        &block(quick, "| {ping.rtt_p99_ms 3 ms} |"),
        &[],
        "3 ms: a format is .N (decimals) or ~N (significant digits), then a unit",
    );
    // A value a point's scenario refuses: the file and the block's line named with the point.
    refused(
        "value",
        &block(
            "seed004-idle --set duration=20s,2x",
            "| {drops} |\n| {drops} |",
        ),
        &[],
        "EXP.md: line 5: point 1 (duration=2x): builtin:seed004-idle refuses it",
    );
    // A swept key is text: a format for it is a mistake, said as one.
    refused(
        "text",
        &block("seed004-idle --set duration=11s", "| {duration .1 ms} |"),
        &[],
        "line 9: duration is text (\"11s\"): a format and unit apply to numbers only",
    );
    let o = report(&["/nonexistent/EXP.md"]);
    assert_eq!(o.status.code(), Some(64), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot read /nonexistent/EXP.md"),
        "{}",
        stderr(&o)
    );
}

/// docs/EXPERIMENTS.md is generated: its seed 004 table (five short runs) is what the code gives today.
/// After a change that moves these figures, `tclab report` rewrites the file.
#[test]
fn the_experiments_seed_004_table_is_current() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/EXPERIMENTS.md");
    let o = report(&["--check", "--only", "seed004-", doc.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "docs/EXPERIMENTS.md's seed 004 table is stale: run `tclab report --only seed004-` ({})",
        stderr(&o)
    );
}

/// A block comparing DCTCP with CUBIC (no ECN) reads `TCPDeliveredCE` at both points: CUBIC's
/// packets are Not-ECT, so nothing of its is marked and the counter is 0 (not absent, which made the
/// path unknown at that point and the block refused); DCTCP's through `ce_threshold 1ms` are marked.
#[test]
fn an_ecn_counter_reads_at_a_point_without_ecn() {
    let dir = common::Scratch::new("report-ce", "");
    let file = dir.join("EXP.md");
    let block = "<!-- report
run: dctcp-fq_codel --set duration=4s --set traffic.0.cc=dctcp,cubic
| cc | CE delivered |
|---|---:|
| {traffic.0.cc} | {flows[0].nstat.TCPDeliveredCE} |
| {traffic.0.cc} | {flows[0].nstat.TCPDeliveredCE} |
-->
<!-- /report -->
";
    std::fs::write(&file, block).unwrap();
    let o = report(&[file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    let after = &text[text.find("-->").unwrap()..];
    let cell = |cc: &str| -> u64 {
        let row = after
            .lines()
            .find(|l| l.starts_with(&format!("| {cc} |")))
            .unwrap_or_else(|| panic!("no {cc} row: {text}"));
        row.trim_matches('|')
            .split('|')
            .nth(1)
            .unwrap()
            .trim()
            .replace(' ', "")
            .parse()
            .unwrap()
    };
    assert_eq!(cell("cubic"), 0, "{text}");
    assert!(cell("dctcp") > 0, "{text}");
}
