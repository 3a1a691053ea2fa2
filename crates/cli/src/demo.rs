//! `tclab demo`: seed 004's experiment — what "the ultimate traffic conditioner" does to the latency of an
//! ADSL line — run in the simulated lab in a few seconds.
//!
//! Five runs of the built-in seed004 scenarios (`tclab sim --list`): the idle line, then a download and
//! an upload without the conditioner, then both with it. Each prints its ping RTTs next to the figures the
//! seed's author measured on his xs4all line, and writes its CSV files, plots and page (`index.html`)
//! under `tclab-out/demo/NAME/` (or `--out DIR`), with a page over the five at `tclab-out/demo/index.html`.

use crate::args::{CmdResult, DemoArgs};
use crate::plot;
use crate::sim::{output_files, remove_stale_outputs, run_scenario, write_plots};
use std::path::PathBuf;
use tclab_sim::report::{fmt_bps, write_files};

/// What each run sends and when, as the seed 004 built-ins say (held to them by the test below).
const TIMING: &str = "  Each run lasts 60 s: one TCP transfer (CUBIC) throughout (none in the idle run), and a ping\n  \
                      every 0.5 s from lan to server from 10 s on.";

/// (built-in scenario, what it shows, the seed's min/avg/max RTT in ms).
const RUNS: &[(&str, &str, [f64; 3])] = &[
    (
        "seed004-idle",
        "Baseline latency (idle line)",
        [14.4, 17.1, 21.7],
    ),
    (
        "seed004-download",
        "Without conditioner, while downloading",
        [560.9, 573.6, 586.4],
    ),
    (
        "seed004-upload",
        "Without conditioner, while uploading",
        [2041.4, 2332.1, 2427.6],
    ),
    (
        "seed004-upload-conditioned",
        "With conditioner, during upload",
        [15.7, 51.8, 79.9],
    ),
    (
        "seed004-download-conditioned",
        "With conditioner, during download",
        [20.4, 46.9, 74.0],
    ),
];

pub fn run(a: DemoArgs) -> CmdResult {
    let (out_dir, plots) = (a.out, !a.no_plots);
    println!("tclab demo: seed 004, \"the ultimate traffic conditioner\" (LARTC 15.8), in the simulated lab");
    println!();
    println!(
        "  lan ─100M─ router (Linux, ppp0) ─10M─ modem ═ADSL 256k up / 1M down═ isp ─100M─ server"
    );
    println!("  modem and ISP queue 50 packets; the conditioner shapes ppp0 to 220 kbit/s with HTB + SFQ,");
    println!("  puts ICMP, TOS 0x10 and bare ACKs first, and polices downloads to 800 kbit/s on ingress.");
    println!("{TIMING}\n");
    println!(
        "{:<40} {:>26}   {:>26}   {:>12}",
        "ping lan → server, RTT ms", "seed 004 min/avg/max", "tclab min/avg/max", "TCP goodput"
    );
    let mut rows = Vec::new();
    for (name, title, seed) in RUNS {
        let b = tclab_sim::builtin::find(name)
            .ok_or_else(|| format!("built-in scenario {name} is missing"))?;
        let (sc, out, _) = run_scenario(
            &b.toml(),
            &format!("builtin:{name}"),
            &PathBuf::from("."),
            None,
        )?;
        let dir = out_dir.join(name);
        let files = output_files(&sc, &out)?;
        write_files(&dir, &files)?;
        let drawn = if plots {
            write_plots(&dir, &sc, &out)?
        } else {
            Vec::new()
        };
        remove_stale_outputs(&dir, &files, &drawn);
        let ping = out.pings.first().ok_or("the demo scenarios have a ping")?;
        let r = &ping.rtt;
        let goodput = out
            .flows
            .first()
            .map_or("—".to_string(), |f| fmt_bps(f.goodput_bps) + "/s");
        let cells = vec![
            title.to_string(),
            format!("{:.1}/{:.1}/{:.1}", seed[0], seed[1], seed[2]),
            format!("{:.1}/{:.1}/{:.1}", r.min_ms, r.avg_ms, r.max_ms),
            goodput,
        ];
        println!(
            "{:<40} {:>26}   {:>26}   {:>12}",
            cells[0], cells[1], cells[2], cells[3]
        );
        rows.push((name.to_string(), cells));
    }
    // A page over the five runs, each row linking to the run's own page; only beside those pages.
    let page = out_dir.join(plot::INDEX);
    let paged = plots && plot::font_available();
    if paged {
        let html = plot::runs_html(
            "tclab demo: seed 004's traffic conditioner",
            "Ping RTT from lan to server in ms, min/avg/max, as seed 004's author measured it on his ADSL \
             line and as the simulated lab gives it, with the TCP transfer's goodput. Each run's page has \
             its plots, captions and policy.",
            &["run", "seed 004", "tclab", "TCP goodput"],
            &rows,
        );
        write_files(&out_dir, &[(plot::INDEX.to_string(), html.into_bytes())])?;
    } else {
        let _ = std::fs::remove_file(&page);
    }
    println!(
        "\nThe conditioner moves the queue from the modem and the ISP into Linux, where the interactive class\n\
         goes first: tens of milliseconds instead of seconds, for about 10 % of the line's rate.\n\
         Per-run tables, CSV, plots and `tc -s` output: {}/*/{} (tclab sim --show seed004-upload-conditioned\n\
         prints a scenario to start from).",
        out_dir.display(),
        if paged {
            format!(", all on {}", page.display())
        } else {
            String::new()
        }
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The banner's figures are the scenarios': a new-user review found it saying the ping ran 60 s
    /// when it starts at 10 s.
    #[test]
    fn the_banner_says_what_the_runs_send() {
        for (name, _, _) in RUNS {
            let t: toml::Table = tclab_sim::builtin::find(name)
                .unwrap()
                .toml()
                .parse()
                .unwrap();
            assert_eq!(t["duration"].as_str(), Some("60s"), "{name}");
            let traffic = t["traffic"].as_array().unwrap();
            let of = |kind: &str| {
                traffic
                    .iter()
                    .filter(|x| x["kind"].as_str() == Some(kind))
                    .collect::<Vec<_>>()
            };
            let ping = of("ping");
            assert_eq!(ping.len(), 1, "{name}");
            assert_eq!(ping[0]["start"].as_str(), Some("10s"), "{name}");
            assert_eq!(ping[0]["interval"].as_str(), Some("500ms"), "{name}");
            let tcp = of("tcp");
            assert_eq!(tcp.len(), usize::from(*name != "seed004-idle"), "{name}");
            assert!(tcp.iter().all(|x| x.get("start").is_none()), "{name}");
        }
        assert!(TIMING.contains("60 s") && TIMING.contains("10 s on") && TIMING.contains("0.5 s"));
    }
}
