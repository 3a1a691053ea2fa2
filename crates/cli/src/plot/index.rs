//! `index.html`: a run on one page. The summary table, every plot with a caption saying what it shows
//! and how to read it, the policy as applied, and links to the data files beside it. Static HTML with
//! relative links and nothing from the wall clock or the output path, so the page is as deterministic
//! as the rest of the directory and still works when the directory is moved.

use super::Plot;
use tclab_sim::report;
use tclab_sim::run::Outcome;
use tclab_sim::scenario::Scenario;

/// `&`, `<`, `>` and `"` as entities: names and policies are the user's text.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;color:#222;max-width:1440px;margin:1em auto;\
padding:0 1em;line-height:1.45}img{max-width:100%;height:auto;border:1px solid #ddd}figure{margin:2em 0}\
figcaption{max-width:60em}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}nav a{margin-right:1em}";

/// The files every run writes beside its plots, and what each holds.
const DATA: &[(&str, &str)] = &[
    ("summary.json", "the summary"),
    ("interfaces.csv", "bit/s and backlog per interface"),
    (
        "classes.csv",
        "rate, backlog, drops per class (raw samples)",
    ),
    ("flows.csv", "goodput per flow"),
    ("ping.csv", "every ping's RTT"),
    ("tc.txt", "tc -s at the end"),
];

/// The page of a run whose plots are `plots`, written beside them.
pub fn index_html(sc: &Scenario, out: &Outcome, plots: &[Plot]) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str(&format!(
        "<title>{} — tclab sim</title>\n",
        escape(&sc.name)
    ));
    h.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    h.push_str(&format!("<h1>{}</h1>\n", escape(&sc.name)));
    h.push_str("<nav>");
    for p in plots {
        h.push_str(&format!(
            "<a href=\"#{}\">{}</a>",
            p.chart.file_stem,
            escape(&p.heading)
        ));
    }
    h.push_str("<a href=\"#policy\">Policy</a><a href=\"#files\">Files</a></nav>\n");
    h.push_str(&format!(
        "<h2 id=\"summary\">Summary</h2>\n<pre>{}</pre>\n",
        escape(&report::summary_text(sc, out))
    ));
    for p in plots {
        let stem = &p.chart.file_stem;
        let (w, ht) = p.chart.size;
        h.push_str(&format!(
            "<figure id=\"{stem}\">\n<h2>{}</h2>\n<a href=\"{stem}.svg\"><img src=\"{stem}.png\" \
             width=\"{w}\" height=\"{ht}\" alt=\"{}\"></a>\n<figcaption>{} <a href=\"{stem}.svg\">SVG</a>.\
             </figcaption>\n</figure>\n",
            escape(&p.heading),
            escape(&format!("{}: {}", p.chart.title, p.heading)),
            escape(&p.caption),
        ));
    }
    h.push_str("<h2 id=\"policy\">Policy</h2>\n");
    if sc.policies.iter().all(|(_, l)| l.is_empty()) {
        h.push_str("<p>None: every interface keeps its default qdisc.</p>\n");
    }
    for (node, lines) in sc.policies.iter().filter(|(_, l)| !l.is_empty()) {
        h.push_str(&format!(
            "<h3>{}</h3>\n<pre>{}</pre>\n",
            escape(node),
            escape(&lines.join("\n"))
        ));
    }
    h.push_str("<h2 id=\"files\">Files</h2>\n<ul>\n");
    for (f, what) in DATA {
        h.push_str(&format!("<li><a href=\"{f}\">{f}</a>: {what}</li>\n"));
    }
    h.push_str("</ul>\n</body>\n</html>\n");
    h
}

/// A page over several runs (`tclab demo`'s): `intro`, then a table whose rows are `(directory, cells)`,
/// each row's first cell linking to that run's own page.
pub fn runs_html(
    title: &str,
    intro: &str,
    header: &[&str],
    rows: &[(String, Vec<String>)],
) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str(&format!("<title>{}</title>\n", escape(title)));
    h.push_str(&format!(
        "<style>{STYLE}table{{border-collapse:collapse}}td,th{{padding:.3em .8em;text-align:left}}\
         tr:nth-child(even){{background:#f6f6f6}}</style>\n</head>\n<body>\n"
    ));
    h.push_str(&format!(
        "<h1>{}</h1>\n<p>{}</p>\n<table>\n<tr>",
        escape(title),
        escape(intro)
    ));
    for c in header {
        h.push_str(&format!("<th>{}</th>", escape(c)));
    }
    h.push_str("</tr>\n");
    for (dir, cells) in rows {
        h.push_str("<tr>");
        for (k, c) in cells.iter().enumerate() {
            if k == 0 {
                h.push_str(&format!(
                    "<td><a href=\"{}/{}\">{}</a></td>",
                    escape(dir),
                    super::INDEX,
                    escape(c)
                ));
            } else {
                h.push_str(&format!("<td>{}</td>", escape(c)));
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</body>\n</html>\n");
    h
}
