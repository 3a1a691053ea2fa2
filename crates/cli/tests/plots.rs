//! The plots and pages `tclab sim` and `tclab demo` write, as a user opens them: every PNG on the run's
//! `index.html` with a caption, relative links only, 1400×600 pictures, and no page or picture left
//! from an earlier run. (The layout itself — legend beside the data, titles within the picture — is
//! tested in `src/plot/tests.rs`, where the layout can be asked for.)

mod common;
use std::path::Path;
use std::process::Command;

const TCLAB: &str = env!("CARGO_BIN_EXE_tclab");

fn tclab(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let o = Command::new(TCLAB)
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("tclab runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Plots need the font; without it these tests have nothing to look at and say so by failing.
fn need_font() {
    assert!(
        Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists(),
        "install fonts-dejavu-core to run the plot tests"
    );
}

fn names(dir: &Path, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext))
        .collect();
    v.sort();
    v
}

/// Width and height from a PNG's IHDR chunk (bytes 16..24, big-endian).
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{} is a PNG", path.display());
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

/// Every `attr="…"` value of the page.
fn links<'a>(page: &'a str, attr: &str) -> Vec<&'a str> {
    page.split(&format!("{attr}=\""))
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect()
}

#[test]
fn a_run_is_one_page_with_every_plot_and_its_caption() {
    need_font();
    let d = common::Scratch::new("plots-page", "");
    let (code, _, stderr) = tclab(&["sim", "seed004-upload-conditioned", "--out", "o"], &d);
    assert_eq!(code, 0, "{stderr}");
    let o = d.join("o");
    let pngs = names(&o, ".png");
    assert_eq!(
        pngs,
        [
            "backlog.png",
            "classes.png",
            "flows.png",
            "ping.png",
            "throughput.png"
        ],
        "the five charts of a run with classes, a flow and a ping"
    );
    let page = std::fs::read_to_string(o.join("index.html")).expect("index.html written");
    let mut shown: Vec<&str> = links(&page, "src");
    shown.sort();
    assert_eq!(shown, pngs, "every PNG on the page, and nothing else");
    assert_eq!(
        page.matches("<figcaption>").count(),
        pngs.len(),
        "a caption each"
    );
    for png in &pngs {
        assert_eq!(png_size(&o.join(png)), (1400, 600), "{png}");
    }
    // Links stay inside the directory, and each names a file the run wrote (or a section of the page).
    for l in links(&page, "href") {
        if let Some(anchor) = l.strip_prefix('#') {
            assert!(
                page.contains(&format!("id=\"{anchor}\"")),
                "#{anchor} exists"
            );
        } else {
            assert!(
                !l.contains("://") && !l.starts_with('/') && !l.contains(".."),
                "{l}"
            );
            assert!(o.join(l).is_file(), "{l} links to a written file");
        }
    }
    assert!(
        !page.contains(d.to_str().unwrap()),
        "no absolute path: the page works wherever the directory goes"
    );
    // The policy as applied, whole (the plot's subtitle shows only what fits).
    assert!(page.contains("tc qdisc add dev ppp0 root handle 1: htb default 20"));
    assert!(page.contains("rate 198kbit"));

    // The same directory without plots: no page or picture of the earlier run stays behind.
    let (code, _, stderr) = tclab(
        &[
            "sim",
            "seed004-upload-conditioned",
            "--out",
            "o",
            "--no-plots",
        ],
        &d,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(names(&o, ".png").is_empty() && names(&o, ".svg").is_empty());
    assert!(
        !o.join("index.html").exists(),
        "the page went with its plots"
    );
}

#[test]
fn the_demo_has_a_page_over_its_runs() {
    need_font();
    let d = common::Scratch::new("plots-demo", "");
    let (code, stdout, stderr) = tclab(&["demo", "--out", "demo"], &d);
    assert_eq!(code, 0, "{stderr}");
    let top = std::fs::read_to_string(d.join("demo/index.html")).expect("demo/index.html");
    let runs = links(&top, "href");
    assert_eq!(runs.len(), 5, "{runs:?}");
    for r in runs {
        assert!(r.ends_with("/index.html"), "{r}");
        let run = d.join("demo").join(r);
        let page = std::fs::read_to_string(&run).unwrap_or_else(|_| panic!("{r} written"));
        let dir = run.parent().unwrap();
        assert_eq!(
            page.matches("<img ").count(),
            names(dir, ".png").len(),
            "{r} shows every plot of its run"
        );
    }
    assert!(
        stdout.contains("demo/index.html"),
        "the demo names its page: {stdout}"
    );
}
