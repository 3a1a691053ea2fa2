//! What `tclab live --out DIR` leaves behind: the sampler's interfaces.csv and classes.csv, tc.txt (the
//! `tc -s` counters at the end), the plots a `tclab sim` run has for the same series (sent rate per
//! device, rate per class, backlog per device), and an index.html showing them.

use crate::plot::{self, Chart, Series};
use std::collections::BTreeMap;
use std::path::Path;
use tclab_live::sampler::Sampler;

/// Series of `(time s, value)` per name, in name order.
fn series(points: impl Iterator<Item = (String, f64, f64)>) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (name, t, v) in points {
        by.entry(name).or_default().push((t, v));
    }
    by.into_iter()
        .map(|(name, points)| Series {
            name,
            points,
            faint: false,
        })
        .collect()
}

/// Write the run's files into `dir`; the names written.
pub fn write(dir: &Path, s: &Sampler, tc_text: &str, title: &str, plots: bool) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in [
        ("interfaces.csv", s.interfaces_csv()),
        ("classes.csv", s.classes_csv()),
        ("tc.txt", tc_text.to_string()),
    ] {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{}: {e}", dir.join(name).display()))?;
        written.push(name.to_string());
    }
    if !plots {
        return Ok(written);
    }
    if !plot::font_available() {
        eprintln!("tclab live: no TrueType font (install fonts-dejavu-core): plots skipped");
        return Ok(written);
    }
    let secs = |t: u64| t as f64 / 1e9;
    let charts = [
        (
            Chart {
                file_stem: "throughput".into(),
                title: format!("{title}: sent by each device"),
                y_desc: "bit/s".into(),
                series: series(s.devs.iter().map(|d| (d.dev.clone(), secs(d.t), d.tx_bps))),
                rate_axis: true,
                size: (1400, 600),
            },
            "What each device's root qdisc sent, per sample: the shaper's output.",
        ),
        (
            Chart {
                file_stem: "classes".into(),
                title: format!("{title}: rate of each class"),
                y_desc: "bit/s".into(),
                series: series(
                    s.classes
                        .iter()
                        .map(|c| (format!("{} {}", c.dev, c.class), secs(c.t), c.rate_bps)),
                ),
                rate_axis: true,
                size: (1400, 600),
            },
            "What each class sent, per sample (bytes sent between two samples over the time between them).",
        ),
        (
            Chart {
                file_stem: "backlog".into(),
                title: format!("{title}: backlog of each device"),
                y_desc: "bytes queued".into(),
                series: series(s.devs.iter().map(|d| (d.dev.clone(), secs(d.t), d.backlog_bytes as f64))),
                rate_axis: false,
                size: (1400, 600),
            },
            "Bytes queued in each device's tree at each sample: where the latency is.",
        ),
    ];
    let mut html = format!(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<title>{t}</title>\n<h1>{t}</h1>\n<p>Sampled every {} ms by tclab live. Data: <a href=\"interfaces.csv\">interfaces.csv</a>, <a href=\"classes.csv\">classes.csv</a>, <a href=\"tc.txt\">tc.txt</a>.</p>\n",
        s.every / 1_000_000,
        t = plot::escape(title)
    );
    for (chart, caption) in charts.iter().filter(|(c, _)| !c.series.is_empty()) {
        written.extend(plot::render(dir, chart)?);
        html.push_str(&format!(
            "<h2>{}</h2>\n<p>{}</p>\n<a href=\"{s}.svg\"><img src=\"{s}.png\" width=\"100%\" alt=\"{}\"></a>\n",
            plot::escape(&chart.title),
            plot::escape(caption),
            plot::escape(&chart.title),
            s = chart.file_stem
        ));
    }
    std::fs::write(dir.join("index.html"), html).map_err(|e| e.to_string())?;
    written.push("index.html".into());
    Ok(written)
}
