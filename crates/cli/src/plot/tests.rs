//! The plots' layout (legend beside the data, titles that fit), their drawing (what is drawn is what
//! was laid out), the smoothing of sampled rates, and the page of a run.

use super::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Layout and drawing measure text with the font; without one (no fonts-dejavu-core) these tests
/// cannot say anything and fail rather than pass silently.
fn need_font() {
    assert!(
        font_available(),
        "these tests need a TrueType font: install fonts-dejavu-core ({})",
        FONT_PATHS.join(", ")
    );
}

fn series(name: &str, f: impl Fn(f64) -> f64, faint: bool) -> Series {
    Series {
        name: name.into(),
        points: (0..120)
            .map(|i| i as f64 * 0.5)
            .map(|t| (t, f(t)))
            .collect(),
        faint,
    }
}

fn chart(title: &str, series: Vec<Series>) -> Chart {
    Chart {
        file_stem: "t".into(),
        title: title.into(),
        y_desc: "bit/s".into(),
        series,
        rate_axis: true,
        size: (1400, 600),
    }
}

/// The plotting area plotters draws in, drawing `c` into memory.
fn drawn_plot(c: &Chart, l: &Layout) -> Rect {
    let mut buf = vec![0u8; (c.size.0 * c.size.1 * 3) as usize];
    let (x, y) = draw(
        text::Glyphs(BitMapBackend::with_buffer(&mut buf, c.size)).into_drawing_area(),
        c,
        l,
    )
    .expect("draws");
    Rect {
        x: x.start,
        y: y.start,
        w: x.end - x.start,
        h: y.end - y.start,
    }
}

/// What every layout must satisfy, whatever the chart: the legend outside the plotting area (and the
/// axes' labels), inside the image; titles no wider than the image less its margins; the plotting area
/// the one plotters draws in.
fn check(c: &Chart, l: &Layout) {
    let image = Rect {
        x: 0,
        y: 0,
        w: c.size.0 as i32,
        h: c.size.1 as i32,
    };
    let room = (c.size.0 as i32 - 2 * MARGIN) as f64;
    assert!(
        l.title.width <= room && image.contains(&l.title.rect()),
        "title {:?} is {} px wide, {room} px fit",
        l.title.text,
        l.title.width
    );
    if let Some(s) = &l.subtitle {
        assert!(s.width <= room, "subtitle {:?}: {} px", s.text, s.width);
        assert!(
            !s.rect().intersects(&l.title.rect()),
            "subtitle under the title"
        );
        assert!(!s.rect().intersects(&l.chart), "subtitle above the chart");
    }
    assert!(!l.title.rect().intersects(&l.chart));
    assert!(l.chart.contains(&l.plot) && image.contains(&l.chart));
    if let Some(g) = l.legend {
        assert!(image.contains(&g), "legend {g:?} inside the image");
        assert!(
            !g.intersects(&l.plot) && !g.intersects(&l.chart),
            "legend {g:?} clear of the plotting area {:?} and its labels {:?}",
            l.plot,
            l.chart
        );
        for e in &l.entries {
            let w = text::width(&e.label, LABEL_SIZE).ceil() as i32;
            let row = Rect {
                x: e.at.0,
                y: e.at.1 - ROW / 2,
                w: SWATCH + PAD + w,
                h: ROW,
            };
            assert!(
                g.contains(&row),
                "legend row {:?} {row:?} inside {g:?}",
                e.label
            );
        }
    }
    assert_eq!(
        drawn_plot(c, l),
        l.plot,
        "plotters draws where the layout says"
    );
}

#[test]
fn legend_beside_the_data_and_titles_within_the_image() {
    need_font();
    let long = "x".repeat(300);
    let cases = vec![
        chart("one", vec![series("ping", |t| t, false)]),
        // seed 000's picture: faint raw lines under smoothed ones, a long policy as subtitle.
        chart(
            "seed 004: uploading, with the conditioner",
            vec![
                series("IN router:eth0 raw", |t| 3e5 + t, true),
                series("IN router:eth0 smoothed", |t| 3e5 + t, false),
                series("OUT router:ppp0 raw", |_| 2e5, true),
                series("OUT router:ppp0 smoothed", |_| 2e5, false),
            ],
        ),
        chart(
            &long,
            vec![series(&format!("a class named {long}"), |t| t, false)],
        ),
        // More series than rows: two columns, then "… N more".
        chart(
            "many",
            (0..80)
                .map(|k| series(&format!("router:eth0 1:{k}"), |t| t * k as f64, false))
                .collect(),
        ),
    ];
    for c in &cases {
        for sub in ["", "rate per class", long.as_str()] {
            let l = layout(c, sub);
            check(c, &l);
        }
    }
    let l = layout(&cases[2], &long);
    assert!(
        l.title.text.ends_with('…'),
        "a title too long is cut: {}",
        l.title.text
    );
    assert!(
        l.title.width > 1300.0 * 0.9,
        "and uses the width it has: {}",
        l.title.width
    );
    let l = layout(&cases[3], "");
    assert!(
        l.more.as_ref().is_some_and(|m| m.0.ends_with("more")),
        "80 series do not fit two columns of {} rows",
        (l.plot.h - 2 * PAD) / ROW
    );
    let more: usize = l
        .more
        .as_ref()
        .unwrap()
        .0
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        l.entries.len() + more,
        80,
        "each series has a row or is counted"
    );
}

#[test]
fn every_chart_of_a_run_is_laid_out_within_its_image() {
    need_font();
    let b = tclab_sim::builtin::find("seed004-upload-conditioned").expect("built in");
    let mut sc = tclab_sim::scenario::load_with_seed(
        "builtin:seed004-upload-conditioned",
        &b.toml(),
        std::path::Path::new("."),
        None,
    )
    .expect("loads");
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    let plots = charts(&sc, &out);
    let stems: Vec<&str> = plots.iter().map(|p| p.chart.file_stem.as_str()).collect();
    assert_eq!(stems, ["throughput", "classes", "backlog", "ping", "flows"]);
    for p in &plots {
        let l = layout(&p.chart, &p.subtitle);
        check(&p.chart, &l);
        assert_eq!(
            l.title.text, sc.plot_title,
            "the title is [plot] title (the name)"
        );
    }
    // The conditioner's policy is longer than the image: as much as fits, then "…".
    let l = layout(&plots[0].chart, &plots[0].subtitle);
    let sub = l.subtitle.expect("the policy fits in part");
    assert!(sub
        .text
        .starts_with("router:ppp0: qdisc add root handle 1: htb default 20"));
    assert!(sub.text.ends_with('…'));
    // Classes in tree order; 1:1 carries 1:20's rate (1:10 has a ping's), so it is drawn under it, wider.
    let classes = &plots[1].chart;
    let names: Vec<&str> = classes.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["router:ppp0 1:1", "router:ppp0 1:10", "router:ppp0 1:20"]
    );
    let l = layout(classes, &plots[1].subtitle);
    assert!(
        l.looks[0].width > l.looks[2].width && l.looks[1].width == l.looks[2].width,
        "{:?}",
        l.looks
    );
    assert_eq!(l.order, [0, 1, 2], "the wider line first, under the others");
    let page = index_html(&sc, &out, &plots);
    for stem in stems {
        assert!(
            page.contains(&format!("<img src=\"{stem}.png\"")),
            "{stem} on the page"
        );
    }
    assert_eq!(page.matches("<figcaption>").count(), plots.len());
}

#[test]
fn a_line_along_another_is_drawn_wider_under_it() {
    need_font();
    let same = chart(
        "same",
        vec![
            series("parent", |t| 1e5 + t, false),
            series("child", |t| 1e5 + t, false),
            series("other", |t| 5e4 + 100.0 * t, false),
        ],
    );
    let l = layout(&same, "");
    assert_eq!(
        l.looks.iter().map(|k| k.width).collect::<Vec<_>>(),
        [7, 3, 3],
        "the parent shows 2 px each side of the child"
    );
    assert_eq!(
        l.looks.iter().map(|k| k.colour).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    // Three equal lines stack: 11, 7, 3.
    let three = chart(
        "three",
        (0..3)
            .map(|k| series(&k.to_string(), |_| 1e5, false))
            .collect(),
    );
    let widths: Vec<u32> = layout(&three, "").looks.iter().map(|k| k.width).collect();
    assert_eq!(widths, [11, 7, 3]);
    // Past the palette's seven colours, dashes; a faint line takes the colour of the line after it.
    let many = chart(
        "many",
        (0..9)
            .map(|k| series(&k.to_string(), move |t| t * (k + 1) as f64 * 1e4, k == 0))
            .collect(),
    );
    let l = layout(&many, "");
    assert!(l.looks[0].faint && l.looks[0].colour == l.looks[1].colour);
    assert_eq!(l.looks[8].dash, Dash::Dashed, "{:?}", l.looks);
    assert_eq!(l.order[0], 0, "faint lines are drawn first");
}

/// A dense saw-tooth: 3 000 samples 10 ms apart of a queue that holds 0 or one 1514-byte frame (kB),
/// as dctcp-fq_codel's router:eth1 does, with one sample of two frames.
fn saw_tooth(name: &str) -> Series {
    Series {
        name: name.into(),
        points: (0..3000)
            .map(|i| {
                let kb = match i {
                    100 => 3.028,
                    _ if i % 7 < 3 => 1.514,
                    _ => 0.0,
                };
                (i as f64 * 0.01, kb)
            })
            .collect(),
        faint: false,
    }
}

/// Every line pixel of a PNG lies in the plotting area, no further than half the line's width (and
/// its one anti-aliased pixel) from the data's range. plotters-backend 0.3.7 fills a wide path as one
/// polygon with mitre joins, uncapped on the inner side of a turn: dctcp-fq_codel's backlog.png had
/// spikes to 4.5 kB of a queue of 0, 1.5 and 3 kB and lines down through the axis's labels to the
/// image's bottom edge.
#[test]
fn wide_lines_stay_within_the_data_and_the_plotting_area() {
    need_font();
    // Two equal series: the first is drawn 7 px wide under the second, 3 px wide.
    let c = Chart {
        y_desc: "kB queued".into(),
        rate_axis: false,
        ..chart("saw-tooth", vec![saw_tooth("under"), saw_tooth("over")])
    };
    let l = layout(&c, "");
    assert_eq!(l.looks.iter().map(|k| k.width).collect::<Vec<_>>(), [7, 3]);
    let (w, h) = c.size;
    let mut buf = vec![0u8; (w * h * 3) as usize];
    let (xs, ys) = draw(
        text::Glyphs(BitMapBackend::with_buffer(&mut buf, c.size)).into_drawing_area(),
        &c,
        &l,
    )
    .expect("draws");
    // The y pixel of a value, as plotters maps it (rounding aside).
    let y_of = |v: f64| {
        let (lo, hi) = (l.y_range.start, l.y_range.end);
        ys.start as f64 + (hi - v) / (hi - lo) * (ys.end - ys.start - 1) as f64
    };
    let half = 7.0 / 2.0 + 1.0 + 1.0; // the widest line's half, its anti-aliased pixel, rounding
    let (top, bottom) = (y_of(3.028) - half, y_of(0.0) + half);
    let legend = l.legend.expect("a legend");
    let (mut at_zero, mut at_top) = (false, false);
    for y in 0..h as i32 {
        for x in 0..w as i32 {
            let i = (y as usize * w as usize + x as usize) * 3;
            let (r, g, b) = (buf[i], buf[i + 1], buf[i + 2]);
            // The lines are blue and vermillion; text, axes and the grid are grey.
            if r == g && g == b {
                continue;
            }
            let inside_legend =
                x >= legend.x && x <= legend.right() && y >= legend.y && y <= legend.bottom();
            if inside_legend {
                continue;
            }
            assert!(
                xs.contains(&x) && ys.contains(&y),
                "line pixel ({x}, {y}) outside the plotting area {xs:?} × {ys:?}"
            );
            assert!(
                (top..=bottom).contains(&(y as f64)),
                "line pixel ({x}, {y}) outside the data's range: y {top:.1} to {bottom:.1}"
            );
            at_zero |= (y as f64 - y_of(0.0)).abs() < 1.0;
            at_top |= (y as f64 - y_of(3.028)).abs() < 1.0;
        }
    }
    assert!(at_zero && at_top, "the lines are drawn, at 0 and at 3 kB");
}

#[test]
fn glyphs_keep_their_side_bearings() {
    need_font();
    use ab_glyph::{Font, ScaleFont};
    // plotters 0.3.7 drew each glyph at the pen, without its left side bearing ("OU Trouter").
    let font = text::font().unwrap().as_scaled(LABEL_SIZE as f32);
    for c in ['r', 'l', 'U', 'n'] {
        let lsb = font.h_side_bearing(font.glyph_id(c));
        assert!(lsb >= 1.0, "{c}: a bearing to see ({lsb})");
        let (w, h) = (60u32, 40u32);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root =
                text::Glyphs(BitMapBackend::with_buffer(&mut buf, (w, h))).into_drawing_area();
            root.draw(&Text::new(
                c.to_string(),
                (10, 5),
                font_style().pos(Pos::new(HPos::Left, VPos::Top)),
            ))
            .unwrap();
            root.present().unwrap();
        }
        let inked = (0..w as usize)
            .find(|&x| (0..h as usize).any(|y| buf[(y * w as usize + x) * 3] < 128))
            .expect("ink");
        assert_eq!(
            inked as i32 - 10,
            lsb.round() as i32,
            "{c}: first dark column"
        );
    }
}

fn font_style() -> TextStyle<'static> {
    TextStyle::from((text::FAMILY, LABEL_SIZE).into_font()).color(&BLACK)
}

#[test]
fn fit_cuts_with_an_ellipsis_only_when_needed() {
    need_font();
    let w = text::width("tc qdisc add", 16.0);
    assert_eq!(text::fit("tc qdisc add", 16.0, w), "tc qdisc add");
    let cut = text::fit("tc qdisc add", 16.0, w - 1.0);
    assert!(
        cut.ends_with('…') && text::width(&cut, 16.0) <= w - 1.0,
        "{cut}"
    );
    assert!(
        text::width("WWW", 16.0) > text::width("iii", 16.0),
        "real advances, not a fixed width"
    );
}

/// One class sending a 1514-byte packet every 61.1717 ms (198 kbit/s, as seed 004's class 1:20 does
/// in the trace of `tclab sim seed004-upload-conditioned`), counted as the sampler counts: whole
/// packets at their dequeue, per 0.5 s sample.
fn sampled_steady_class() -> Vec<(f64, f64)> {
    let period = 0.061_171_7;
    let mut counts = vec![0u32; 120];
    let mut t = 0.03;
    while t < 60.0 {
        counts[(t / 0.5) as usize] += 1;
        t += period;
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| ((i + 1) as f64 * 0.5, n as f64 * 1514.0 * 8.0 / 0.5))
        .collect()
}

#[test]
fn smoothing_removes_the_packet_spikes_of_a_steady_class() {
    let raw = sampled_steady_class();
    let rate = 1514.0 * 8.0 / 0.061_171_7;
    let spread = |v: &[(f64, f64)]| {
        let s = &v[10..v.len() - 10];
        let max = s.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let min = s.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        (max - min) / rate
    };
    // 8.17 packets a sample: 8 most of the time (193.8 kbit/s), 9 now and then (218.0 kbit/s).
    assert!(spread(&raw) > 0.12, "raw: {}", spread(&raw));
    let smoothed = smooth(&raw, 5);
    assert!(spread(&smoothed) < 0.01, "smoothed: {}", spread(&smoothed));
    let mean = smoothed[10..110].iter().map(|p| p.1).sum::<f64>() / 100.0;
    assert!((mean / rate - 1.0).abs() < 0.005, "{mean} against {rate}");
}

#[test]
fn smoothing_by_hand() {
    let pts: Vec<(f64, f64)> = [0.0, 0.0, 0.0, 12.0, 0.0, 0.0, 0.0]
        .iter()
        .enumerate()
        .map(|(i, &v)| (i as f64, v))
        .collect();
    let y = |w| smooth(&pts, w).iter().map(|p| p.1).collect::<Vec<f64>>();
    // Half-width 2: weights 1, 2, 1 over 4.
    assert_eq!(y(2), [0.0, 0.0, 3.0, 6.0, 3.0, 0.0, 0.0]);
    // Half-width 3: weights 1, 2, 3, 2, 1 over 9; at the ends the mean of what there is.
    assert_eq!(y(3)[3], 12.0 * 3.0 / 9.0);
    assert_eq!(y(3)[5], 12.0 * 1.0 / 9.0);
    assert_eq!(
        y(1),
        [0.0, 0.0, 0.0, 12.0, 0.0, 0.0, 0.0],
        "half-width 1 is the samples"
    );
    assert_eq!(y(0), y(1), "0 is taken as 1");
    assert_eq!(
        smooth(&pts, 4_000_000_000).len(),
        7,
        "a window longer than the series"
    );
    // A step keeps its level on both sides, centred on where it happened (no lag).
    let step: Vec<(f64, f64)> = (0..20)
        .map(|i| (i as f64, if i < 10 { 0.0 } else { 8.0 }))
        .collect();
    let s = smooth(&step, 3);
    assert_eq!((s[6].1, s[13].1), (0.0, 8.0));
    assert!(
        (s[9].1 + s[10].1 - 8.0).abs() < 1e-9,
        "symmetric about the step"
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

#[test]
fn the_page_escapes_names() {
    assert_eq!(
        index::escape("a<b & \"c\">"),
        "a&lt;b &amp; &quot;c&quot;&gt;"
    );
}

#[test]
fn the_classes_plot_keeps_the_dozen_classes_that_sent_most() {
    // 31 classes in tree order: 1:i sends (i × 7) mod 30 kbit/s (0 to 29, each once) and 1:30 18 kbit/s.
    let rate = |i: u32| ((i * 7) % 30) as f64 * 1e3;
    let classes: Vec<(u32, Series)> = (0..30)
        .map(|i| (i, series(&format!("1:{i}"), move |_| rate(i), false)))
        .chain([(30, series("1:30", |_| 18e3, false))])
        .collect();
    let kept = busiest_classes(classes, MAX_CLASS_LINES);
    let ids: Vec<u32> = kept.iter().map(|(k, _)| *k).collect();
    // The eleven at 19..=29 kbit/s, then of the two at 18 (1:24 and 1:30) the first in tree order;
    // kept in tree order.
    let mut want: Vec<u32> = (0..30).filter(|&i| rate(i) >= 19e3).collect();
    want.push((0..30).find(|&i| rate(i) == 18e3).unwrap());
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(kept.len(), MAX_CLASS_LINES);
    // A few classes keep every line, in their order.
    let few: Vec<(u32, Series)> = (0..3)
        .map(|i| (i, series(&format!("1:{i}"), move |_| i as f64, false)))
        .collect();
    let ids: Vec<u32> = busiest_classes(few, MAX_CLASS_LINES)
        .iter()
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(ids, [0, 1, 2]);
}

#[test]
fn a_run_with_many_classes_plots_the_busiest_and_says_so() {
    need_font();
    // HTB with 20 leaves (1:100..1:113); UDP to ports 5201.. lands in 1:100.. by a u32 match each, at
    // 100, 200, … 2 000 kbit/s: the plot keeps 1:1 and the eleven busiest leaves.
    let mut tc = String::from("qdisc add dev eth1 root handle 1: htb\n");
    tc += "class add dev eth1 parent 1: classid 1:1 htb rate 100mbit\n";
    for i in 0..20 {
        tc += &format!(
            "class add dev eth1 parent 1:1 classid 1:{:x} htb rate 10mbit\n",
            0x100 + i
        );
        tc += &format!(
            "filter add dev eth1 parent 1: protocol ip u32 match ip dport {} 0xffff flowid 1:{:x}\n",
            5201 + i,
            0x100 + i
        );
    }
    let mut toml = format!(
        "duration = \"2s\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"r\"\n[[node]]\nname = \"b\"\n\
         [[link]]\na = \"a\"\nb = \"r\"\nrate = \"1gbit\"\n[[link]]\na = \"r\"\nb = \"b\"\n\
         rate = \"100mbit\"\n[[policy]]\nnode = \"r\"\ntc = \"\"\"\n{tc}\"\"\"\n"
    );
    for i in 0..20 {
        toml += &format!(
            "[[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nport = {}\nrate = \"{}kbit\"\n",
            5201 + i,
            100 * (i + 1)
        );
    }
    let mut sc = tclab_sim::scenario::load_with_seed("many.toml", &toml, Path::new("."), None)
        .expect("loads");
    let out = tclab_sim::run::run(&mut sc, &mut |_| {}).expect("runs");
    let plots = charts(&sc, &out);
    let p = plots
        .iter()
        .find(|p| p.chart.file_stem == "classes")
        .unwrap();
    let names: Vec<&str> = p.chart.series.iter().map(|s| s.name.as_str()).collect();
    let mut want = vec!["r:eth1 1:1".to_string()];
    want.extend((9..20).map(|i| format!("r:eth1 1:{:x}", 0x100 + i)));
    assert_eq!(names, want);
    assert!(
        p.subtitle
            .ends_with(": the 12 of 21 classes that sent most"),
        "{}",
        p.subtitle
    );
    assert!(p.caption.contains("classes.csv has every class"));
}

#[test]
fn rate_ticks_have_no_trailing_zeros() {
    assert_eq!(tick_bps(900e6), "900Mbit");
    assert_eq!(tick_bps(1e9), "1Gbit");
    assert_eq!(tick_bps(2.5e6), "2.5Mbit");
    assert_eq!(tick_bps(92.55e6), "92.55Mbit");
    assert_eq!(tick_bps(150e3), "150Kbit");
    assert_eq!(tick_bps(12.5e3), "12.5Kbit");
    assert_eq!(tick_bps(500.0), "500bit");
    assert_eq!(tick_bps(0.0), "0bit");
}
