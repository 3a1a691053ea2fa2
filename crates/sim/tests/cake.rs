//! CAKE's experiments in the simulated lab (the built-in `cake-*` scenarios; docs/EXPERIMENTS.md has
//! the table). Each assertion says which figure it holds and how the bound was derived.

use tclab_sim::builtin::find;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;

fn go_text(name: &str, text: &str) -> Outcome {
    let mut sc = load(name, text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run(&mut sc, &mut |_| {}).expect("runs")
}

fn go(name: &str) -> Outcome {
    go_text(name, &find(name).expect("built in").toml())
}

fn goodput(out: &Outcome, flow: &str) -> f64 {
    out.flows
        .iter()
        .find(|f| f.name == flow)
        .unwrap_or_else(|| panic!("flow {flow}"))
        .goodput_bps
}

/// A full segment on the ATM line: 1448 bytes of payload in a 1500-byte IP packet, + 40 bytes of
/// PPPoE/LLC encapsulation = 1540 bytes → 33 cells → 1749 bytes at the sync rate.
fn atm_payload_rate(line_bps: f64) -> f64 {
    line_bps * 1448.0 / 1749.0
}

#[test]
fn cake_at_the_line_rate_keeps_an_adsl_upload_fast_and_pings_short() {
    // Without a conditioner the modem's 50-packet FIFO holds 50 × 1749 B = 2.7 s at 256 kbit/s.
    let none = go("cake-adsl-upload");
    assert!(none.pings[0].rtt.avg_ms > 1000.0, "{:?}", none.pings[0].rtt);
    // The seed's HTB conditioner at 220 kbit/s (86 %): short pings, its bulk class's 198 kbit/s of
    // frames = 189.4 kbit/s of payload.
    let htb = go("cake-adsl-upload-htb");
    // CAKE at 256 kbit/s with pppoe-llcsnap charges exactly the cells the line sends: the payload
    // rate can reach 256k × 1448/1749 = 211.9 kbit/s, and the pings wait at most one cell train of a
    // full frame (54.7 ms) beyond the idle RTT — the seed's own bound for its conditioner.
    let cake = go("cake-adsl-upload-cake");
    let (g_htb, g_cake) = (goodput(&htb, "upload"), goodput(&cake, "upload"));
    assert!(
        g_cake > 0.95 * atm_payload_rate(256e3),
        "CAKE goodput {g_cake}"
    );
    assert!(g_cake > 1.05 * g_htb, "CAKE {g_cake} vs HTB {g_htb}");
    let r = &cake.pings[0].rtt;
    assert!(r.avg_ms < 80.0 && r.max_ms < 120.0, "CAKE pings {r:?}");
    // Every ping is answered, but the last one may still be on its way when the 60 s run ends: the seed
    // draws the pings' phase, so the last leaves up to one interval (500 ms) before the end, and a reply
    // takes up to 120 ms.
    let p = &cake.pings[0];
    let last_answered = p.samples.iter().map(|s| s.0).max().unwrap();
    let unanswered = p.sent - p.received;
    assert!(
        unanswered == 0 || (unanswered == 1 && last_answered + 620_000_000 > 60_000_000_000),
        "{unanswered} of {} pings unanswered, the last answered sent at {last_answered} ns",
        p.sent
    );
}

#[test]
fn cake_on_an_ifb_at_95_percent_keeps_an_adsl_download_short() {
    // No conditioner: the ISP's 50-packet FIFO at 1 Mbit/s of cells is 0.7 s.
    let none = go("cake-adsl-download");
    assert!(none.pings[0].rtt.avg_ms > 400.0, "{:?}", none.pings[0].rtt);
    // CAKE at 950 kbit/s of cells: payload at most 950k × 1448/1749 = 786.5 kbit/s; at least 90 % of it,
    // and pings in tens of milliseconds.
    let cake = go("cake-adsl-download-cake");
    let g = goodput(&cake, "download");
    assert!(g > 0.9 * atm_payload_rate(950e3), "goodput {g}");
    let r = &cake.pings[0].rtt;
    assert!(r.avg_ms < 80.0 && r.max_ms < 120.0, "pings {r:?}");
}

#[test]
fn triple_isolate_shares_an_uplink_by_host_not_by_flow() {
    // HTB + fq_codel is fair per flow: host a's 1 flow of 9 gets about 1/9 (11 %).
    let fq = go("cake-hosts-fq_codel");
    let share = |o: &Outcome| {
        let (a, b) = (goodput(o, "a-upload"), goodput(o, "b-upload"));
        a / (a + b)
    };
    let s_fq = share(&fq);
    assert!((0.08..0.16).contains(&s_fq), "fq_codel: host a {s_fq}");
    // CAKE triple-isolate divides b's quantum among its 8 flows. With TCP, host a's single CUBIC flow
    // cannot keep its queue backlogged through its window reductions, and what it leaves idle the other
    // host takes: a third of the line rather than half, three times fq_codel's share.
    let cake = go("cake-hosts-cake");
    let s_cake = share(&cake);
    assert!(s_cake > 0.3 && s_cake < 0.5, "CAKE: host a {s_cake}");
    assert!(s_cake > 2.5 * s_fq);
}

#[test]
fn triple_isolate_gives_always_backlogged_hosts_exact_halves() {
    // The same lab with UDP at 20 Mbit/s per entry (always backlogged): a's 1 flow and b's 8 flows
    // split the 10 Mbit/s uplink 50/50 (± 2 %): the host isolation itself, without TCP's dynamics.
    let text = find("cake-hosts-cake")
        .expect("built in")
        .toml()
        .replace("kind = \"tcp\"", "kind = \"udp\"\nrate = \"20mbit\"");
    let out = go_text("udp", &text);
    let (a, b) = (goodput(&out, "a-upload"), goodput(&out, "b-upload"));
    let s = a / (a + b);
    assert!((s - 0.5).abs() < 0.02, "host a {s}");
}

#[test]
fn the_ack_filter_lets_a_download_through_a_congested_uplink() {
    // Without the filter the download's ACK flow gets 1/5 of the 1 Mbit/s uplink (200 kbit/s), under the
    // ~450 kbit/s a 20 Mbit/s download's ACKs take; with it, redundant ACKs go and the download reaches
    // the downlink: 20 Mbit/s × 1448/1514 = 19.13 Mbit/s of payload at most.
    let off = go("cake-ack-filter-off");
    let on = go("cake-ack-filter-on");
    let (d_off, d_on) = (goodput(&off, "download"), goodput(&on, "download"));
    assert!(
        d_on > 0.97 * 20e6 * 1448.0 / 1514.0,
        "with the filter {d_on}"
    );
    assert!(d_on > 1.05 * d_off, "with {d_on} vs without {d_off}");
    // The uploads do not lose by it.
    assert!(goodput(&on, "upload") >= goodput(&off, "upload"));
    let tc = &on
        .tc_show
        .iter()
        .find(|(n, d, _)| n == "router" && d == "wan0")
        .expect("shown")
        .2;
    let acks: u64 = tc
        .lines()
        .find(|l| l.starts_with("  ack_drop"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse().ok())
        .expect("ack_drop row");
    assert!(acks > 1000, "{acks} ACKs filtered");
}
