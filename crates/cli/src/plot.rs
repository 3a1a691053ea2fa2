//! Plots of a simulation run, PNG and SVG, drawn with plotters.
//!
//! The first is seed 000's picture: IN and OUT bit/s of the shaping router over time, raw and smoothed,
//! 1400×600, titled with the policy. The others show per-class rates, ping RTT over time, queue backlog and
//! per-flow goodput. Text needs a TrueType font: the DejaVu fonts Debian ships (`fonts-dejavu-core`) are
//! looked for in the usual places; without one, `tclab sim` and `tclab demo` skip the plots and say so.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use tclab_sim::net::Port;
use tclab_sim::report::fmt_bps;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::Scenario;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn thin and pale (raw samples under a smoothed line).
    pub faint: bool,
}

pub struct Chart {
    pub file_stem: String,
    pub title: String,
    pub y_desc: String,
    pub series: Vec<Series>,
    /// Format y labels as bit rates.
    pub rate_axis: bool,
    pub size: (u32, u32),
}

pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Register a font for bitmap text, once; false if none was found.
fn font_ready() -> bool {
    static READY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &Chart) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let x_max = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let y_max = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.08;
    let mut chart = ChartBuilder::on(&root)
        .caption(&c.title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(err)?;
    let rate_axis = c.rate_axis;
    let fmt_y = move |v: &f64| {
        if rate_axis {
            fmt_bps(*v)
        } else {
            format!("{v:.1}")
        }
    };
    chart
        .configure_mesh()
        .x_desc("time, s")
        .y_desc(c.y_desc.as_str())
        .y_label_formatter(&fmt_y)
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    for (k, s) in c.series.iter().enumerate() {
        let points = thin(&s.points, MAX_POINTS);
        let color = Palette99::pick(if s.faint { k + 1 } else { k }).to_rgba();
        let style = if s.faint {
            color.mix(0.35).stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        let legend_style = style;
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], legend_style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Is there a font to draw text with?
pub fn font_available() -> bool {
    font_ready()
}

/// Write `c` as DIR/STEM.svg and DIR/STEM.png. Returns the files written.
pub fn render(dir: &Path, c: &Chart) -> Result<Vec<String>, String> {
    // Both backends lay text out with the registered font.
    if !font_ready() {
        return Err(format!(
            "plots need a TrueType font and none was found in {} (install fonts-dejavu-core, or use --no-plots)",
            FONT_PATHS.join(", ")
        ));
    }
    let mut written = Vec::new();
    let svg = dir.join(format!("{}.svg", c.file_stem));
    draw(SVGBackend::new(&svg, c.size).into_drawing_area(), c)?;
    written.push(svg.display().to_string());
    let png = dir.join(format!("{}.png", c.file_stem));
    draw(BitMapBackend::new(&png, c.size).into_drawing_area(), c)?;
    written.push(png.display().to_string());
    Ok(written)
}

/// Seed 000's plots were titled with the policy: the scenario's title, then the tc lines that configured
/// the OUT interface (shortened to fit the picture).
fn titled_with_policy(sc: &Scenario, out_iface: usize) -> String {
    let ifc = &sc.net.ifaces[out_iface];
    let node = &sc.net.nodes[ifc.node].name;
    let dev = format!("dev {} ", ifc.name);
    let lines: Vec<String> = sc
        .policies
        .iter()
        .filter(|(n, _)| n == node)
        .flat_map(|(_, lines)| lines.iter())
        .filter(|l| format!("{l} ").contains(&dev))
        .map(|l| l.trim_start_matches("tc ").replace(&dev, ""))
        .collect();
    if lines.is_empty() {
        return sc.plot_title.clone();
    }
    // About 115 characters fit across 1400 pixels at the caption's size.
    const FITS: usize = 115;
    let room = FITS.saturating_sub(sc.plot_title.chars().count() + 3);
    if room < 20 {
        return sc.plot_title.clone();
    }
    let mut policy = lines.join("; ");
    if policy.chars().count() > room {
        policy = policy.chars().take(room - 1).collect::<String>() + "…";
    }
    format!("{} — {policy}", sc.plot_title)
}

/// The chart files a run may write (`STEM.png`, `STEM.svg`).
pub const STEMS: &[&str] = &["throughput", "classes", "backlog", "ping", "flows"];

/// The most points a line is drawn with: a picture 1400 pixels wide shows no more, and a million-sample
/// run would otherwise write a file of tens of megabytes.
const MAX_POINTS: usize = 4000;

/// Average consecutive points in buckets so that at most `max` remain (the shape, not every sample).
fn thin(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let per = points.len().div_ceil(max);
    points
        .chunks(per)
        .map(|c| {
            let n = c.len() as f64;
            (
                c.iter().map(|p| p.0).sum::<f64>() / n,
                c.iter().map(|p| p.1).sum::<f64>() / n,
            )
        })
        .collect()
}

/// Trailing moving average over `window` samples, as a running sum (one pass, whatever the window).
fn moving_average(points: &[(f64, f64)], window: usize) -> Vec<(f64, f64)> {
    let w = window.clamp(1, points.len().max(1));
    let mut sum = 0.0;
    let mut out = Vec::with_capacity(points.len());
    for (i, &(t, v)) in points.iter().enumerate() {
        sum += v;
        if i >= w {
            sum -= points[i - w].1;
        }
        out.push((t, sum / (i + 1).min(w) as f64));
    }
    out
}

/// The charts of a run.
pub fn charts(sc: &Scenario, out: &Outcome) -> Vec<Chart> {
    let rec = &out.recorder;
    let t = |ns: u64| ns as f64 / 1e9;
    let mut charts = Vec::new();
    if let (Some(i_in), Some(i_out)) = sc.plot_in_out {
        let rx: Vec<(f64, f64)> = rec
            .iface_samples
            .iter()
            .filter(|s| s.iface == Port::Iface(i_in))
            .map(|s| (t(s.t), s.rx_bps))
            .collect();
        let tx: Vec<(f64, f64)> = rec
            .iface_samples
            .iter()
            .filter(|s| s.iface == Port::Iface(i_out))
            .map(|s| (t(s.t), s.tx_bps))
            .collect();
        let w = sc.smooth as usize;
        charts.push(Chart {
            file_stem: "throughput".into(),
            title: titled_with_policy(sc, i_out),
            y_desc: "bit/s".into(),
            series: vec![
                Series {
                    name: format!("IN {} raw", sc.net.iface_label(i_in)),
                    points: rx.clone(),
                    faint: true,
                },
                Series {
                    name: format!("IN {} smoothed", sc.net.iface_label(i_in)),
                    points: moving_average(&rx, w),
                    faint: false,
                },
                Series {
                    name: format!("OUT {} raw", sc.net.iface_label(i_out)),
                    points: tx.clone(),
                    faint: true,
                },
                Series {
                    name: format!("OUT {} smoothed", sc.net.iface_label(i_out)),
                    points: moving_average(&tx, w),
                    faint: false,
                },
            ],
            rate_axis: true,
            size: (1400, 600),
        });
    }
    // Per-class rates, leaf and inner, of every shaped device.
    let mut class_series: Vec<Series> = Vec::new();
    let mut backlog_series: Vec<Series> = Vec::new();
    for s in &rec.class_samples {
        let name = format!("{} {}", sc.net.port_label(s.iface), s.classid);
        match class_series.iter_mut().find(|x| x.name == name) {
            Some(x) => x.points.push((t(s.t), s.bps)),
            None => class_series.push(Series {
                name,
                points: vec![(t(s.t), s.bps)],
                faint: false,
            }),
        }
    }
    if !class_series.is_empty() {
        charts.push(Chart {
            file_stem: "classes".into(),
            title: format!("{}: rate per class", sc.plot_title),
            y_desc: "bit/s".into(),
            series: class_series,
            rate_axis: true,
            size: (1400, 600),
        });
    }
    // The queues of the policies' interfaces, and of every ifb (where an ingress policy queues).
    let ports = sc
        .policies_ifaces()
        .into_iter()
        .map(|(_, i)| Port::Iface(i))
        .chain(
            rec.ifaces
                .iter()
                .copied()
                .filter(|p| matches!(p, Port::Ifb(_))),
        );
    for port in ports {
        let pts: Vec<(f64, f64)> = rec
            .iface_samples
            .iter()
            .filter(|s| s.iface == port)
            .map(|s| (t(s.t), s.backlog_bytes as f64 / 1000.0))
            .collect();
        backlog_series.push(Series {
            name: sc.net.port_label(port),
            points: pts,
            faint: false,
        });
    }
    if !backlog_series.is_empty() {
        charts.push(Chart {
            file_stem: "backlog".into(),
            title: format!("{}: queue backlog", sc.plot_title),
            y_desc: "kB queued".into(),
            series: backlog_series,
            rate_axis: false,
            size: (1400, 600),
        });
    }
    if out.pings.iter().any(|p| !p.samples.is_empty()) {
        charts.push(Chart {
            file_stem: "ping".into(),
            title: format!("{}: ping RTT", sc.plot_title),
            y_desc: "RTT, ms".into(),
            series: out
                .pings
                .iter()
                .map(|p| Series {
                    name: p.name.clone(),
                    points: p
                        .samples
                        .iter()
                        .map(|&(s, r)| (t(s), r as f64 / 1e6))
                        .collect(),
                    faint: false,
                })
                .collect(),
            rate_axis: false,
            size: (1400, 600),
        });
    }
    if !rec.flows.is_empty() {
        charts.push(Chart {
            file_stem: "flows".into(),
            title: format!("{}: goodput per flow", sc.plot_title),
            y_desc: "bit/s".into(),
            series: rec
                .flows
                .iter()
                .enumerate()
                .map(|(k, f)| Series {
                    name: f.name.clone(),
                    points: rec
                        .flow_samples
                        .iter()
                        .filter(|s| s.flow == k)
                        .map(|s| (t(s.t), s.goodput_bps))
                        .collect(),
                    faint: false,
                })
                .collect(),
            rate_axis: true,
            size: (1400, 600),
        });
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::{moving_average, thin};

    #[test]
    fn moving_average_by_hand() {
        let pts: Vec<(f64, f64)> = [2.0, 4.0, 6.0, 8.0]
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v))
            .collect();
        let avg: Vec<f64> = moving_average(&pts, 2).iter().map(|p| p.1).collect();
        assert_eq!(avg, vec![2.0, 3.0, 5.0, 7.0], "trailing window of two");
        let huge: Vec<f64> = moving_average(&pts, 4_000_000_000)
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(
            huge,
            vec![2.0, 3.0, 4.0, 5.0],
            "a window longer than the series is the running mean"
        );
        assert_eq!(
            moving_average(&pts, 0)[3].1,
            8.0,
            "a window of 0 is taken as 1"
        );
    }

    #[test]
    fn long_series_are_thinned_by_averaging() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, (i % 2) as f64)).collect();
        // 10 000 points into at most 5 000: buckets of two, each a 0 and a 1.
        let t = thin(&pts, 5000);
        assert_eq!(t.len(), 5000);
        assert!(thin(&pts, 4000).len() <= 4000);
        assert!(
            t.iter().all(|p| (p.1 - 0.5).abs() < 1e-9),
            "pairs of 0 and 1 average to 0.5"
        );
        assert_eq!(
            thin(&pts[..10], 4000).len(),
            10,
            "short series are untouched"
        );
    }
}
