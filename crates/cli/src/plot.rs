//! Plots of a simulation run, PNG and SVG, drawn with plotters, and the page that shows them.
//!
//! The first is seed 000's picture: IN and OUT bit/s of the shaping router over time, raw and smoothed,
//! 1400×600. The others show per-class rates, queue backlog, ping RTT and per-flow goodput. Each is titled
//! with the scenario's `[plot] title` (its `name` by default) and says below, in smaller type, what it
//! shows (the throughput chart: the policy, as much of it as fits). `index.html` shows them all with a
//! caption each (`index.rs`).
//!
//! Layout first, drawing second: [`layout`] measures the title and the legend's labels with the font's
//! real metrics (`text.rs`) and places the title, the plotting area and the legend — a column to the
//! right of the plotting area, never over the data — and [`draw`] draws exactly that. Lines use
//! Okabe and Ito's colour-blind-safe palette without its pale yellow. A line that runs along another one
//! (a parent class and its only busy child, IN and OUT of a router that forwards everything) is drawn
//! wider, under it, so both stay visible; the legend shows the same widths.
//!
//! Text needs a TrueType font: the DejaVu fonts Debian ships (`fonts-dejavu-core`) are looked for in the
//! usual places; without one, `tclab sim` and `tclab demo` skip the plots and say so.

mod index;
mod stroke;
#[cfg(test)]
mod tests;
mod text;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::Path;
use tclab_sim::net::Port;
use tclab_sim::report::fmt_bps;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::Scenario;

pub use index::{escape, index_html, runs_html};
pub use text::FONT_PATHS;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn thin and pale (raw samples under a smoothed line), in the colour of the next full line.
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

/// A chart of a run and what the run's page says about it.
pub struct Plot {
    pub chart: Chart,
    /// Below the title in small type: what the chart shows (the throughput chart: the policy).
    pub subtitle: String,
    /// The heading and the caption on `index.html`: what it shows, how to read it.
    pub heading: String,
    pub caption: String,
}

/// Is there a font to draw text with?
pub fn font_available() -> bool {
    text::font().is_some()
}

// ---- Layout -------------------------------------------------------------------------------------------

/// A rectangle in pixels: left, top, width, height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: i32,
    pub h: i32,
}

impl Rect {
    pub fn right(&self) -> i32 {
        self.x + self.w
    }
    pub fn bottom(&self) -> i32 {
        self.y + self.h
    }
    /// Do the two share a pixel?
    pub fn intersects(&self, o: &Rect) -> bool {
        self.x < o.right() && o.x < self.right() && self.y < o.bottom() && o.y < self.bottom()
    }
    pub fn contains(&self, o: &Rect) -> bool {
        o.x >= self.x && o.y >= self.y && o.right() <= self.right() && o.bottom() <= self.bottom()
    }
}

/// A line of text, centred on `x`, its top at `y`, `width` pixels wide as measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TextLine {
    pub text: String,
    pub size: f64,
    pub width: f64,
    pub x: i32,
    pub y: i32,
}

impl TextLine {
    fn new(text: String, size: f64, x: i32, y: i32) -> TextLine {
        TextLine {
            width: text::width(&text, size),
            text,
            size,
            x,
            y,
        }
    }
    /// The box the text is drawn in (ascent to descent).
    pub fn rect(&self) -> Rect {
        Rect {
            x: self.x - (self.width / 2.0).ceil() as i32,
            y: self.y,
            w: self.width.ceil() as i32,
            h: self.size.ceil() as i32,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dash {
    Solid,
    Dashed,
    Dotted,
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// Index into [`PALETTE`].
    pub colour: usize,
    pub width: u32,
    pub dash: Dash,
    pub faint: bool,
}

/// One row of the legend: the series, its label (shortened to fit) and where the row's swatch starts
/// (its left end, on the row's middle line).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub series: usize,
    pub label: String,
    pub at: (i32, i32),
}

/// Where everything of a chart goes; [`draw`] follows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub size: (u32, u32),
    pub title: TextLine,
    pub subtitle: Option<TextLine>,
    /// What plotters is given: the plotting area with the axes' labels around it.
    pub chart: Rect,
    /// The plotting area, where the series are drawn.
    pub plot: Rect,
    /// The legend's box, right of `chart`.
    pub legend: Option<Rect>,
    pub entries: Vec<Entry>,
    /// "… N more" below the last entry when not every series has a row.
    pub more: Option<(String, (i32, i32))>,
    /// Per series, in the chart's order.
    pub looks: Vec<Look>,
    /// The order the series are drawn in: faint lines, then the others, wider ones first.
    pub order: Vec<usize>,
    pub x_range: Range<f64>,
    pub y_range: Range<f64>,
}

/// Okabe and Ito's colour-blind-safe palette ("Color Universal Design", 2008) without its yellow
/// (#F0E442, too pale on white): blue, vermillion, bluish green, reddish purple, orange, sky blue, black.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x00, 0x00),
];

const MARGIN: i32 = 12;
pub const TITLE_SIZE: f64 = 24.0;
pub const SUBTITLE_SIZE: f64 = 16.0;
pub const LABEL_SIZE: f64 = 15.0;
/// Room for the y tick labels ("200.0Kbit") and the rotated y description.
const Y_LABELS: i32 = 100;
/// Room for the x tick labels and "time, s".
const X_LABELS: i32 = 48;
/// Above the plotting area, for half of the top tick label; right of it, for half of the last x label.
const CHART_TOP: i32 = 10;
const CHART_RIGHT: i32 = 24;
const LEGEND_GAP: i32 = 12;
const ROW: i32 = 22;
const SWATCH: i32 = 32;
const PAD: i32 = 8;
/// The legend takes at most this share of the width; longer labels end in "…".
const LEGEND_SHARE: f64 = 0.3;
/// Below this many characters a subtitle says too little to be worth a line.
const SUBTITLE_MIN_CHARS: usize = 16;
/// Two lines closer than this many pixels (a line's width and one) over most of their common samples
/// overlap: they run along each other.
const COINCIDE_PX: f64 = 4.0;

fn x_max(c: &Chart) -> f64 {
    c.series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-9)
}

fn y_max(c: &Chart) -> f64 {
    c.series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-9)
}

/// Lay `c` out with `subtitle` under its title. Needs the font (for the measures); without one, every
/// text is taken as zero pixels wide.
pub fn layout(c: &Chart, subtitle: &str) -> Layout {
    let (w, h) = (c.size.0 as i32, c.size.1 as i32);
    let room = (w - 2 * MARGIN) as f64;
    let title = TextLine::new(text::fit(&c.title, TITLE_SIZE, room), TITLE_SIZE, w / 2, 8);
    let mut top = title.rect().bottom() + 4;
    let subtitle = {
        let s = text::fit(subtitle, SUBTITLE_SIZE, room);
        let shown = s.trim_end_matches('…').chars().count();
        (!subtitle.is_empty() && (shown >= SUBTITLE_MIN_CHARS || s == subtitle))
            .then(|| TextLine::new(s, SUBTITLE_SIZE, w / 2, top))
    };
    if let Some(s) = &subtitle {
        top = s.rect().bottom() + 4;
    }
    top += 6;
    let plot_y = top + CHART_TOP;
    let plot_h = h - MARGIN - X_LABELS - plot_y;

    // The legend: as many rows a column as the plotting area is high, at most two columns.
    let n = c.series.len();
    let rows_per_col = ((plot_h - 2 * PAD) / ROW).max(1) as usize;
    let cols = n.div_ceil(rows_per_col).clamp(1, 2);
    let slots = rows_per_col * cols;
    let shown = if n > slots { slots - 1 } else { n };
    let natural = c
        .series
        .iter()
        .map(|s| text::width(&s.name, LABEL_SIZE))
        .fold(0.0f64, f64::max)
        .ceil() as i32;
    let fixed = PAD + SWATCH + PAD + PAD;
    let col_w = (fixed + natural).min((w as f64 * LEGEND_SHARE) as i32 / cols as i32);
    let label_room = (col_w - fixed) as f64;
    // Filled column by column; when not all fit, the last slot says how many are left out.
    let rows = if n > shown {
        rows_per_col
    } else {
        n.div_ceil(cols).max(1)
    };
    let legend = (n > 0).then(|| Rect {
        x: w - MARGIN - col_w * cols as i32,
        y: plot_y,
        w: col_w * cols as i32,
        h: rows as i32 * ROW + 2 * PAD,
    });
    let mut entries = Vec::new();
    let mut more = None;
    if let Some(l) = legend {
        let slot = |k: usize| {
            (
                l.x + (k / rows) as i32 * col_w + PAD,
                l.y + PAD + (k % rows) as i32 * ROW + ROW / 2,
            )
        };
        for (k, s) in c.series.iter().take(shown).enumerate() {
            entries.push(Entry {
                series: k,
                label: text::fit(&s.name, LABEL_SIZE, label_room),
                at: slot(k),
            });
        }
        if n > shown {
            more = Some((format!("… {} more", n - shown), slot(shown)));
        }
    }
    let chart_right = legend.map_or(w - MARGIN, |l| l.x - LEGEND_GAP);
    let chart = Rect {
        x: MARGIN,
        y: top,
        w: chart_right - MARGIN,
        h: h - MARGIN - top,
    };
    let plot = Rect {
        x: chart.x + Y_LABELS,
        y: plot_y,
        w: chart.w - Y_LABELS - CHART_RIGHT,
        h: plot_h,
    };
    debug_assert!(legend.is_none_or(|l| !l.intersects(&chart) && !l.intersects(&plot)));
    debug_assert!(chart.contains(&plot));
    // Lines at zero sit a little above the x axis rather than on it.
    let y_top = y_max(c) * 1.08;
    let y_range = -y_top * 0.015..y_top;
    let looks = looks(c, &plot, &y_range);
    let mut order: Vec<usize> = (0..n).filter(|&k| looks[k].faint).collect();
    order.extend((0..n).filter(|&k| !looks[k].faint));
    Layout {
        size: c.size,
        title,
        subtitle,
        chart,
        plot,
        legend,
        entries,
        more,
        looks,
        order,
        x_range: 0.0..x_max(c),
        y_range,
    }
}

/// Do `a` and `b` run along each other: within [`COINCIDE_PX`] at four in five of the instants both
/// have a sample at?
fn coincide(a: &Series, b: &Series, px_per_y: f64) -> bool {
    let (mut common, mut close) = (0usize, 0usize);
    let (mut i, mut j) = (0, 0);
    while i < a.points.len() && j < b.points.len() {
        let (pa, pb) = (a.points[i], b.points[j]);
        if pa.0 < pb.0 {
            i += 1;
        } else if pb.0 < pa.0 {
            j += 1;
        } else {
            common += 1;
            close += usize::from((pa.1 - pb.1).abs() * px_per_y <= COINCIDE_PX);
            i += 1;
            j += 1;
        }
    }
    common > 0 && close * 5 >= common * 4
}

/// Colours in palette order over the full lines, then dashes, then dots once the palette is used up;
/// a faint line takes the colour of the full line after it. A full line that another, later one runs
/// along is drawn 4 pixels wider per line over it, so that it shows on both sides of them.
fn looks(c: &Chart, plot: &Rect, y_range: &Range<f64>) -> Vec<Look> {
    let full: Vec<usize> = (0..c.series.len())
        .filter(|&k| !c.series[k].faint)
        .collect();
    let base = if full.len() <= PALETTE.len() { 3 } else { 2 };
    let px_per_y = plot.h as f64 / (y_range.end - y_range.start);
    let mut depth = vec![0u32; c.series.len()];
    for (a, &i) in full.iter().enumerate().rev() {
        for &j in &full[a + 1..] {
            if coincide(&c.series[i], &c.series[j], px_per_y) {
                depth[i] = depth[i].max(depth[j] + 1);
            }
        }
    }
    let mut looks = vec![
        Look {
            colour: 0,
            width: 1,
            dash: Dash::Solid,
            faint: true,
        };
        c.series.len()
    ];
    for (rank, &k) in full.iter().enumerate() {
        looks[k] = Look {
            colour: rank % PALETTE.len(),
            width: base + 4 * depth[k].min(3),
            dash: match rank / PALETTE.len() {
                0 => Dash::Solid,
                1 => Dash::Dashed,
                _ => Dash::Dotted,
            },
            faint: false,
        };
    }
    for k in (0..c.series.len()).filter(|&k| c.series[k].faint) {
        let next = full.iter().find(|&&f| f > k).or(full.last());
        looks[k].colour = next.map_or(0, |&f| looks[f].colour);
    }
    looks
}

// ---- Drawing ------------------------------------------------------------------------------------------

fn style_of(l: &Look) -> ShapeStyle {
    let c = PALETTE[l.colour];
    ShapeStyle {
        color: if l.faint { c.mix(0.45) } else { c.to_rgba() },
        filled: false,
        stroke_width: l.width,
    }
}

fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from((text::FAMILY, size).into_font()).color(&BLACK)
}

/// What a chart's x axis is.
pub enum XAxis {
    /// Seconds of a run.
    Time,
    /// The values of a swept key at x = 0, 1, 2…: the points are marked, the values are the labels.
    Values { desc: String, labels: Vec<String> },
}

/// What a chart is drawn on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// An SVG document: lines are `<polyline>`s, joined by the viewer.
    Svg,
    /// A bitmap: lines wider than a pixel are rasterised by `stroke.rs`, round-joined and kept inside
    /// the plotting area (plotters' own wide paths have mitre spikes, see there).
    Png,
}

/// The dash pattern of `d` in pixels (drawn, skipped); `None` for a solid line.
fn dash_pattern(d: Dash) -> Option<(i32, i32)> {
    match d {
        Dash::Solid => None,
        Dash::Dashed => Some((12, 6)),
        Dash::Dotted => Some((3, 5)),
    }
}

/// Draw `c` on the bitmap `root` as `l` lays it out. Returns the plotting area plotters drew in (x and
/// y pixel ranges, ends excluded), which is `l.plot`.
#[cfg(test)]
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    c: &Chart,
    l: &Layout,
) -> Result<(Range<i32>, Range<i32>), String>
where
    DB::ErrorType: 'static,
{
    draw_against(root, Target::Png, c, l, &XAxis::Time)
}

/// [`draw`] on `target` with the x axis `x`.
fn draw_against<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    target: Target,
    c: &Chart,
    l: &Layout,
    x: &XAxis,
) -> Result<(Range<i32>, Range<i32>), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let centred = Pos::new(HPos::Center, VPos::Top);
    root.draw(&Text::new(
        l.title.text.clone(),
        (l.title.x, l.title.y),
        font(l.title.size).pos(centred),
    ))
    .map_err(err)?;
    if let Some(s) = &l.subtitle {
        root.draw(&Text::new(
            s.text.clone(),
            (s.x, s.y),
            font(s.size).pos(centred).color(&RGBColor(0x40, 0x40, 0x40)),
        ))
        .map_err(err)?;
    }
    let area = root
        .clone()
        .shrink((l.chart.x, l.chart.y), (l.chart.w, l.chart.h));
    let mut chart = ChartBuilder::on(&area)
        .margin_top(CHART_TOP)
        .margin_right(CHART_RIGHT)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(l.x_range.clone(), l.y_range.clone())
        .map_err(err)?;
    let rate_axis = c.rate_axis;
    let fmt_y = move |v: &f64| {
        if rate_axis {
            tick_bps(*v)
        } else {
            format!("{v:.1}")
        }
    };
    let (x_desc, labels) = match x {
        XAxis::Time => ("time, s", &[][..]),
        XAxis::Values { desc, labels } => (desc.as_str(), &labels[..]),
    };
    // A value's label at its whole x; plotters' in-between ticks stay blank.
    let fmt_x = move |v: &f64| {
        let k = v.round();
        if (v - k).abs() < 1e-9 && k >= 0.0 {
            labels.get(k as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    if !labels.is_empty() {
        // Enough ticks that plotters' step is at most one value.
        mesh.x_labels(labels.len() + 2).x_label_formatter(&fmt_x);
    }
    mesh.x_desc(x_desc)
        .y_desc(c.y_desc.as_str())
        .y_label_formatter(&fmt_y)
        .label_style(font(LABEL_SIZE))
        .axis_desc_style(font(LABEL_SIZE))
        .bold_line_style(RGBColor(0xc8, 0xc8, 0xc8))
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .draw()
        .map_err(err)?;
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let plot = Rect {
        x: xs.start,
        y: ys.start,
        w: xs.end - xs.start,
        h: ys.end - ys.start,
    };
    for &k in &l.order {
        let points = thin(&c.series[k].points, MAX_POINTS);
        let look = &l.looks[k];
        let style = style_of(look);
        let dash = dash_pattern(look.dash);
        if target == Target::Png && look.width > 1 {
            let path: Vec<(f64, f64)> = points
                .iter()
                .map(|p| {
                    let (x, y) = chart.backend_coord(p);
                    (x as f64, y as f64)
                })
                .collect();
            let dash = dash.map(|(on, off)| (on as f64, off as f64));
            for (p, cover) in stroke::pixels(&path, look.width, dash, plot) {
                root.draw_pixel(p, &style.color.mix(cover)).map_err(err)?;
            }
        } else {
            match dash {
                None => chart
                    .draw_series(LineSeries::new(points, style))
                    .map(|_| ()),
                Some((on, off)) => chart
                    .draw_series(DashedLineSeries::new(points, on, off, style))
                    .map(|_| ()),
            }
            .map_err(err)?;
        }
        if matches!(x, XAxis::Values { .. }) {
            let dot = style_of(look).filled();
            chart
                .draw_series(c.series[k].points.iter().map(|&p| Circle::new(p, 5, dot)))
                .map_err(err)?;
        }
    }
    let drawn = (xs, ys);
    if let Some(b) = l.legend {
        root.draw(&Rectangle::new(
            [(b.x, b.y), (b.right(), b.bottom())],
            RGBColor(0x99, 0x99, 0x99).stroke_width(1),
        ))
        .map_err(err)?;
        for e in &l.entries {
            let look = &l.looks[e.series];
            let (x, y) = e.at;
            // The swatch is the line as drawn: its colour, width and dashes.
            let (dash, gap) = dash_pattern(look.dash).unwrap_or((SWATCH, 0));
            let mut x0 = x;
            while x0 < x + SWATCH {
                let x1 = (x0 + dash).min(x + SWATCH);
                root.draw(&PathElement::new(vec![(x0, y), (x1, y)], style_of(look)))
                    .map_err(err)?;
                x0 = x1 + gap;
                if gap == 0 {
                    break;
                }
            }
            root.draw(&Text::new(
                e.label.clone(),
                (x + SWATCH + PAD, y),
                font(LABEL_SIZE).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        }
        if let Some((t, (x, y))) = &l.more {
            root.draw(&Text::new(
                t.clone(),
                (*x, *y),
                font(LABEL_SIZE).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(drawn)
}

/// Write `c` as DIR/STEM.svg and DIR/STEM.png, `subtitle` under its title. Returns the files written.
pub fn render_with(dir: &Path, c: &Chart, subtitle: &str) -> Result<Vec<String>, String> {
    render_against(dir, c, subtitle, &XAxis::Time)
}

/// The error for a machine without the font the charts are laid out with; `or` ends its advice.
fn need_font(or: &str) -> Result<(), String> {
    if font_available() {
        return Ok(());
    }
    Err(format!(
        "plots need a TrueType font and none was found in {} (install fonts-dejavu-core{or})",
        FONT_PATHS.join(", ")
    ))
}

/// [`render_with`], the x axis `x` (`tclab sweep`'s charts: a metric against a key's values).
pub fn render_against(
    dir: &Path,
    c: &Chart,
    subtitle: &str,
    x: &XAxis,
) -> Result<Vec<String>, String> {
    // Both backends lay text out with the registered font.
    need_font(", or use --no-plots")?;
    let mut l = layout(c, subtitle);
    if let XAxis::Values { labels, .. } = x {
        // Half a step of room beside the first and the last value, for their marks and labels.
        l.x_range = -0.5..(labels.len().max(1) as f64 - 0.5);
    }
    let mut written = Vec::new();
    let svg = dir.join(format!("{}.svg", c.file_stem));
    draw_against(
        SVGBackend::new(&svg, c.size).into_drawing_area(),
        Target::Svg,
        c,
        &l,
        x,
    )?;
    written.push(svg.display().to_string());
    let png = dir.join(format!("{}.png", c.file_stem));
    draw_against(
        text::Glyphs(BitMapBackend::new(&png, c.size)).into_drawing_area(),
        Target::Png,
        c,
        &l,
        x,
    )?;
    written.push(png.display().to_string());
    Ok(written)
}

/// `c` as an SVG document, `subtitle` under its title (`tclab report`'s figures).
pub fn svg_text(c: &Chart, subtitle: &str) -> Result<String, String> {
    need_font("")?;
    let l = layout(c, subtitle);
    let mut s = String::new();
    {
        let area = SVGBackend::with_string(&mut s, c.size).into_drawing_area();
        draw_against(area, Target::Svg, c, &l, &XAxis::Time)?;
    }
    Ok(s)
}

/// Write `c` as DIR/STEM.svg and DIR/STEM.png. Returns the files written.
pub fn render(dir: &Path, c: &Chart) -> Result<Vec<String>, String> {
    render_with(dir, c, "")
}

/// Draw every chart of a run into `dir`, and `index.html` showing them. Returns the files written.
pub fn write_run(dir: &Path, sc: &Scenario, out: &Outcome) -> Result<Vec<String>, String> {
    let plots = charts(sc, out);
    let mut written = Vec::new();
    for p in &plots {
        written.extend(render_with(dir, &p.chart, &p.subtitle)?);
    }
    let page = index_html(sc, out, &plots);
    tclab_sim::report::write_files(dir, &[(INDEX.to_string(), page.into_bytes())])?;
    written.push(dir.join(INDEX).display().to_string());
    Ok(written)
}

/// The page of a run: every plot with its caption.
pub const INDEX: &str = "index.html";

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

// ---- Smoothing ----------------------------------------------------------------------------------------

/// Mean of the samples from `before` before each one to `after` after it (fewer at the ends), as a
/// running sum: one pass, whatever the window.
fn boxcar(v: &[f64], before: usize, after: usize) -> Vec<f64> {
    let n = v.len();
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for x in v {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + x);
    }
    (0..n)
        .map(|i| {
            let (a, b) = (i.saturating_sub(before), (i + after + 1).min(n));
            (prefix[b] - prefix[a]) / (b - a) as f64
        })
        .collect()
}

/// The centred triangular moving average of half-width `w` samples: weights 1, 2, …, w, …, 2, 1 over
/// 2w − 1 samples (a moving average of `w` samples taken twice, once leaning back and once forward).
/// A rate sampled as whole packets per interval is 8 packets in some samples and 9 in others when 8.2
/// fit; an average over a window slides that extra packet in and out one weight step at a time, so no
/// sample jumps by a packet. `w` of 1 leaves the samples as they are.
fn smooth(points: &[(f64, f64)], w: usize) -> Vec<(f64, f64)> {
    let w = w.clamp(1, points.len().max(1));
    let v: Vec<f64> = points.iter().map(|p| p.1).collect();
    let once = boxcar(&v, 0, w - 1);
    let twice = boxcar(&once, w - 1, 0);
    points.iter().zip(twice).map(|(p, y)| (p.0, y)).collect()
}

// ---- The charts of a run ------------------------------------------------------------------------------

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// "0.5 s", "200 ms".
fn fmt_secs(ns: u64) -> String {
    if ns >= 1_000_000_000 || !ns.is_multiple_of(1_000_000) {
        format!("{} s", tclab_tc::util::fmt_g(secs(ns), 6))
    } else {
        format!("{} ms", ns / 1_000_000)
    }
}

/// The policy's tc lines, by device: the OUT interface's first, as "NODE:DEV: line; line".
fn policy_text(sc: &Scenario, out_iface: Option<usize>) -> Vec<(String, Vec<String>)> {
    let mut by_dev: Vec<(String, Vec<String>)> = Vec::new();
    for (node, lines) in &sc.policies {
        for l in lines {
            let words: Vec<&str> = l.split_whitespace().collect();
            let Some(dev) = words.windows(2).find(|w| w[0] == "dev").map(|w| w[1]) else {
                continue;
            };
            let label = format!("{node}:{dev}");
            let short = l
                .trim_start_matches("tc ")
                .replace(&format!("dev {dev} "), "")
                .replace(&format!(" dev {dev}"), "");
            match by_dev.iter_mut().find(|(d, _)| *d == label) {
                Some((_, v)) => v.push(short),
                None => by_dev.push((label, vec![short])),
            }
        }
    }
    if let Some(i) = out_iface {
        let label = sc.net.iface_label(i);
        if let Some(k) = by_dev.iter().position(|(d, _)| *d == label) {
            let first = by_dev.remove(k);
            by_dev.insert(0, first);
        }
    }
    by_dev
}

/// The classes of every sampled device, sorted by device (in sampling order), then by major and minor
/// number: a parent (1:1) before its children (1:10, 1:20), as `tc class show` trees read.
fn class_series(sc: &Scenario, out: &Outcome) -> Vec<((usize, u32, u32), Series)> {
    let rec = &out.recorder;
    let mut v: Vec<((usize, u32, u32), Series)> = Vec::new();
    for s in &rec.class_samples {
        let port = rec.ifaces.iter().position(|&p| p == s.iface).unwrap_or(0);
        let (maj, min) = s
            .classid
            .split_once(':')
            .map(|(a, b)| {
                (
                    u32::from_str_radix(a, 16).unwrap_or(0),
                    u32::from_str_radix(b, 16).unwrap_or(0),
                )
            })
            .unwrap_or((0, 0));
        let key = (port, maj, min);
        let name = format!("{} {}", sc.net.port_label(s.iface), s.classid);
        let at = (secs(s.t), s.bps);
        match v.iter_mut().find(|(k, x)| *k == key && x.name == name) {
            Some((_, x)) => x.points.push(at),
            None => v.push((
                key,
                Series {
                    name,
                    points: vec![at],
                    faint: false,
                },
            )),
        }
    }
    v.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    v
}

/// A rate axis's tick label: tc's units as the tables print them, without the zeros after the point
/// ("900Mbit", "1Gbit", "2.5Mbit", where the ticks read "900.00Mbit" and "1.00Gbit").
fn tick_bps(bps: f64) -> String {
    let s = fmt_bps(bps);
    let unit_at = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (number, unit) = s.split_at(unit_at);
    let number = if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    };
    format!("{number}{unit}")
}

/// The most classes the classes plot draws a line for. Past a dozen the lines are a band no one can
/// tell apart (bench-isp's 1 002 classes were one stripe at the bottom, the legend "… 963 more"); the
/// summary table and classes.csv keep every class.
const MAX_CLASS_LINES: usize = 12;

/// The classes that get a line: all of them when they are at most `max`, else the `max` that sent the
/// most bytes (the sum of their samples; the earlier in tree order on a tie), kept in tree order.
fn busiest_classes<K>(classes: Vec<(K, Series)>, max: usize) -> Vec<(K, Series)> {
    if classes.len() <= max {
        return classes;
    }
    let sent = |s: &Series| s.points.iter().map(|p| p.1).sum::<f64>();
    let mut rank: Vec<(usize, f64)> = classes
        .iter()
        .enumerate()
        .map(|(i, (_, s))| (i, sent(s)))
        .collect();
    rank.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut keep = vec![false; classes.len()];
    for &(i, _) in &rank[..max] {
        keep[i] = true;
    }
    classes
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

/// The charts of a run.
pub fn charts(sc: &Scenario, out: &Outcome) -> Vec<Plot> {
    let rec = &out.recorder;
    let w = sc.smooth as usize; // at least 1: the scenario refuses 0
    let sample = fmt_secs(sc.sample);
    let window = format!(
        "a centred triangular moving average over {} samples ({})",
        2 * w - 1,
        fmt_secs(sc.sample * (2 * w as u64 - 1))
    );
    let size = (1400, 600);
    let mut plots = Vec::new();
    if let (Some(i_in), Some(i_out)) = sc.plot_in_out {
        let series_of = |i: usize, rx: bool| -> Vec<(f64, f64)> {
            rec.iface_samples
                .iter()
                .filter(|s| s.iface == Port::Iface(i))
                .map(|s| (secs(s.t), if rx { s.rx_bps } else { s.tx_bps }))
                .collect()
        };
        let (rx, tx) = (series_of(i_in, true), series_of(i_out, false));
        let (lin, lout) = (sc.net.iface_label(i_in), sc.net.iface_label(i_out));
        let policy = policy_text(sc, Some(i_out));
        let subtitle = policy
            .iter()
            .map(|(d, lines)| format!("{d}: {}", lines.join("; ")))
            .collect::<Vec<_>>()
            .join("  ·  ");
        let line = |name: String, points: Vec<(f64, f64)>, faint: bool| Series {
            name,
            points,
            faint,
        };
        plots.push(Plot {
            chart: Chart {
                file_stem: "throughput".into(),
                title: sc.plot_title.clone(),
                y_desc: "bit/s".into(),
                series: vec![
                    line(format!("IN {lin} raw"), rx.clone(), true),
                    line(format!("IN {lin} smoothed"), smooth(&rx, w), false),
                    line(format!("OUT {lout} raw"), tx.clone(), true),
                    line(format!("OUT {lout} smoothed"), smooth(&tx, w), false),
                ],
                rate_axis: true,
                size,
            },
            subtitle: if subtitle.is_empty() {
                format!("bit/s received on {lin} (IN) and sent on {lout} (OUT)")
            } else {
                subtitle
            },
            heading: "Throughput: IN and OUT".into(),
            caption: format!(
                "Bits per second received on {lin} (IN) and sent on {lout} (OUT): every sample of \
                 {sample} (faint lines) and smoothed ({window}; bold lines). A shaper on {lout} holds \
                 OUT at its rate; while IN is above OUT, the difference queues (see the backlog) or is \
                 dropped. A frame counts in the sample in which its transmission starts, so a faint \
                 line can step up and down by one frame from sample to sample. The subtitle shows as \
                 much of the policy as fits; all of it is below and in tc.txt."
            ),
        });
    }
    let classes = class_series(sc, out);
    let all_classes = classes.len();
    let classes = busiest_classes(classes, MAX_CLASS_LINES);
    // Said in the subtitle and the caption when not every class has a line.
    let (which, which_caption) = if classes.len() < all_classes {
        (
            format!(
                ": the {} of {all_classes} classes that sent most",
                classes.len()
            ),
            format!(
                " Of the run's {all_classes} classes only the {} that sent the most bytes have a \
                 line (more would be a band of lines no one can tell apart); classes.csv has every \
                 class.",
                classes.len()
            ),
        )
    } else {
        (String::new(), String::new())
    };
    if !classes.is_empty() {
        let mut devs: Vec<String> = Vec::new();
        for (_, s) in &classes {
            let d = s.name.split(' ').next().unwrap_or("").to_string();
            if !devs.contains(&d) {
                devs.push(d);
            }
        }
        // One 1514-byte frame (a 1500-byte packet with its Ethernet header) in one sample, as bit/s.
        let one_packet = fmt_bps(1514.0 * 8.0 / secs(sc.sample));
        plots.push(Plot {
            chart: Chart {
                file_stem: "classes".into(),
                title: sc.plot_title.clone(),
                y_desc: "bit/s".into(),
                series: classes
                    .into_iter()
                    .map(|(_, s)| Series {
                        points: smooth(&s.points, w),
                        ..s
                    })
                    .collect(),
                rate_axis: true,
                size,
            },
            subtitle: format!(
                "rate per class of {}, averaged over {}{which}",
                devs.join(", "),
                fmt_secs(sc.sample * (2 * w as u64 - 1))
            ),
            heading: "Rate per class".into(),
            caption: format!(
                "The rate each class of {} sent, inner classes included (a parent's line is the sum of \
                 its children's), as {window}. Averaged, because a class's byte counter grows by a \
                 whole packet when the packet is dequeued: each raw sample of {sample} holds a whole \
                 number of packets, and one 1500-byte packet more or less moves it by \
                 {one_packet}/s. Seed 004's class 1:20, for one, sends a 1514-byte packet every 61.2 ms \
                 (198 kbit/s): a sample of 0.5 s holds 8 of them most of the time and 9 in about one \
                 sample in six, a spike every 3 s that is the sampling, not the traffic. The raw \
                 samples are in classes.csv. A line drawn wider than the others has \
                 another line over it: the two carry the same rate, such as a parent and its only busy \
                 child.{which_caption}",
                devs.join(", ")
            ),
        });
    }
    // The queues of the policies' interfaces, and of every ifb (where an ingress policy queues) and
    // teql master.
    let ports: Vec<Port> = sc
        .policies_ifaces()
        .into_iter()
        .map(|(_, i)| Port::Iface(i))
        .chain(
            rec.ifaces
                .iter()
                .copied()
                .filter(|p| matches!(p, Port::Ifb(_) | Port::Teql(_))),
        )
        .collect();
    if !ports.is_empty() {
        let series = ports
            .iter()
            .map(|&port| Series {
                name: sc.net.port_label(port),
                points: rec
                    .iface_samples
                    .iter()
                    .filter(|s| s.iface == port)
                    .map(|s| (secs(s.t), s.backlog_bytes as f64 / 1000.0))
                    .collect(),
                faint: false,
            })
            .collect();
        plots.push(Plot {
            chart: Chart {
                file_stem: "backlog".into(),
                title: sc.plot_title.clone(),
                y_desc: "kB queued".into(),
                series,
                rate_axis: false,
                size,
            },
            subtitle: "queue backlog: bytes in each policy's root qdisc".into(),
            heading: "Queue backlog".into(),
            caption: format!(
                "Kilobytes queued in the root qdisc of every interface with a policy (and of every ifb \
                 device, where an ingress policy queues), read at each sample instant ({sample} apart). \
                 A queue that stays high is a standing queue: its size divided by the rate it drains at \
                 is the delay it adds to every packet through it (compare the ping RTT)."
            ),
        });
    }
    if out.pings.iter().any(|p| !p.samples.is_empty()) {
        plots.push(Plot {
            chart: Chart {
                file_stem: "ping".into(),
                title: sc.plot_title.clone(),
                y_desc: "RTT, ms".into(),
                series: out
                    .pings
                    .iter()
                    .map(|p| Series {
                        name: p.name.clone(),
                        points: p
                            .samples
                            .iter()
                            .map(|&(s, r)| (secs(s), r as f64 / 1e6))
                            .collect(),
                        faint: false,
                    })
                    .collect(),
                rate_axis: false,
                size,
            },
            subtitle: "ping round-trip time, by the time each probe was sent".into(),
            heading: "Ping RTT".into(),
            caption: "The round-trip time of every answered probe, in milliseconds, at the time it was \
                      sent. The lowest values are the path's own delay; everything above them is time \
                      spent waiting in queues on the way and back. A probe that was lost leaves a gap; \
                      ping.csv lists every answer."
                .into(),
        });
    }
    if !rec.flows.is_empty() {
        plots.push(Plot {
            chart: Chart {
                file_stem: "flows".into(),
                title: sc.plot_title.clone(),
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
                            .map(|s| (secs(s.t), s.goodput_bps))
                            .collect(),
                        faint: false,
                    })
                    .collect(),
                rate_axis: true,
                size,
            },
            subtitle: "goodput per flow: payload delivered to the receiving application".into(),
            heading: "Goodput per flow".into(),
            caption: format!(
                "Payload bits per second each traffic entry delivered to its receiving application (in \
                 order, for TCP), every sample of {sample}, unsmoothed. The dips and bursts of a TCP \
                 flow are its own: a loss holds delivery back until the lost segment is repaired, then \
                 the data held back arrives at once."
            ),
        });
    }
    plots
}
