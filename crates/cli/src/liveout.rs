//! What `tclab live --out DIR` leaves behind when it stops: tc.txt (the `tc -s` counters at the end),
//! the plots a `tclab sim` run has for the same series (sent rate per device, rate per class, backlog
//! per device), and an index.html showing them, beside the interfaces.csv and classes.csv the sampler
//! wrote as it ran.

use crate::plot::{self, Chart, Series};
use std::collections::BTreeMap;
use std::path::Path;
use tclab_live::sampler::Sampler;

/// The plotted series of one quantity, by name.
fn series(by: &BTreeMap<String, tclab_live::sampler::Series>) -> Vec<Series> {
    by.iter()
        .map(|(name, s)| Series {
            name: name.clone(),
            points: s.points.clone(),
            faint: false,
        })
        .collect()
}

/// Write the run's files into `dir`; the names written (the CSV files included).
pub fn write(
    dir: &Path,
    s: &Sampler,
    tc_text: &str,
    title: &str,
    plots: bool,
) -> Result<Vec<String>, String> {
    std::fs::write(dir.join("tc.txt"), tc_text)
        .map_err(|e| format!("{}: {e}", dir.join("tc.txt").display()))?;
    let mut written: Vec<String> = ["interfaces.csv", "classes.csv", "tc.txt"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !plots {
        return Ok(written);
    }
    if !plot::font_available() {
        eprintln!("tclab live: no TrueType font (install fonts-dejavu-core): plots skipped");
        return Ok(written);
    }
    let p = &s.plotted;
    let charts = [
        (
            Chart {
                file_stem: "throughput".into(),
                title: format!("{title}: sent by each device"),
                y_desc: "bit/s".into(),
                series: series(&p.tx_bps),
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
                series: series(&p.class_bps),
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
                series: series(&p.backlog),
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
