//! Seed 004's latency table, reproduced in the simulated lab (the built-in seed004-* scenarios that
//! `tclab demo` runs). The seed's figures come from one ADSL line in 2002; the lab is a model of it, so the
//! tests hold the simulator to the seed's *shape* — seconds of queueing without the conditioner, tens of
//! milliseconds with it — and to the idle RTT computed by hand to the nanosecond.

use tclab_sim::builtin::find;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

fn go(name: &str) -> Outcome {
    let b = find(name).expect("built in");
    let mut sc = load(name, &b.toml(), std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("runs")
}

#[test]
fn baseline_rtt_is_the_sum_of_the_hops() {
    // A ping is a 98-byte frame. Up: 100 Mbit (7 840 ns) + 0.1 ms, 10 Mbit (78 400 ns) + 0.1 ms,
    // 256 kbit (3 062 500 ns) + 4 ms, 100 Mbit (7 840 ns) + 2 ms. Down: 100 Mbit + 2 ms, 1 Mbit
    // (784 000 ns) + 4 ms, 10 Mbit + 0.1 ms, 100 Mbit + 0.1 ms. Total 16 434 660 ns (the seed: 14.4 min).
    let out = go("seed004-idle");
    let expected = 2 * (100_000 + 100_000 + 4_000_000 + 2_000_000)
        + 3_062_500
        + 784_000
        + 2 * (2 * 7_840 + 78_400);
    assert_eq!(expected, 16_434_660);
    for &(_, rtt) in &out.pings[0].samples {
        assert_eq!(rtt, expected);
    }
}

#[test]
fn without_the_conditioner_the_modem_and_isp_queues_cost_seconds() {
    // Seed: 573.6 ms average while downloading, 2332 ms while uploading. The ISP's 50-packet queue at
    // 1 Mbit/s is 0.6 s, the modem's at 256 kbit/s 2.4 s; TCP keeps them mostly full.
    let down = go("seed004-download");
    let up = go("seed004-upload");
    assert!(
        down.pings[0].rtt.avg_ms > 300.0,
        "download: {:?}",
        down.pings[0].rtt
    );
    assert!(
        down.pings[0].rtt.max_ms < 650.0,
        "never more than the ISP queue: {:?}",
        down.pings[0].rtt
    );
    assert!(
        up.pings[0].rtt.avg_ms > 1000.0,
        "upload: {:?}",
        up.pings[0].rtt
    );
    assert!(
        up.pings[0].rtt.max_ms < 2450.0,
        "never more than the modem queue: {:?}",
        up.pings[0].rtt
    );
    // The line is used: most of 1 Mbit/s down and 256 kbit/s up (payload 1448 of each 1514-byte frame).
    assert!(
        down.flows[0].goodput_bps > 0.85e6,
        "{}",
        down.flows[0].goodput_bps
    );
    assert!(
        up.flows[0].goodput_bps > 0.85 * 256e3 * 1448.0 / 1514.0,
        "{}",
        up.flows[0].goodput_bps
    );
}

#[test]
fn with_the_conditioner_pings_stay_in_tens_of_milliseconds() {
    // Seed: 51.8 ms average during an upload, 46.9 ms during a download.
    let up = go("seed004-upload-conditioned");
    let down = go("seed004-download-conditioned");
    for (what, o) in [("upload", &up), ("download", &down)] {
        let r = &o.pings[0].rtt;
        assert!(r.avg_ms < 80.0 && r.max_ms < 120.0, "{what}: {r:?}");
    }
    // Upstream the interactive class loses nothing; downstream the ingress policer drops whatever comes in
    // over 800 kbit/s, echo replies included, so a few pings may go.
    assert_eq!(up.pings[0].received, up.pings[0].sent);
    assert!(down.pings[0].received * 100 >= down.pings[0].sent * 95);
    // The price: the upload is shaped to 1:20's 198 kbit/s of frames (the seed: "uploads at around 90 %"),
    // and the ingress policer holds the download under 800 kbit/s.
    let up_rate = up.flows[0].goodput_bps;
    assert!(
        (0.8 * 198e3..198e3).contains(&up_rate),
        "upload goodput {up_rate}"
    );
    let down_rate = down.flows[0].goodput_bps;
    assert!(
        (0.6e6..0.8e6).contains(&down_rate),
        "download goodput {down_rate}"
    );
}
