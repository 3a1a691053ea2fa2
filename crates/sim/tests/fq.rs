//! sch_fq under simulated TCP: `maxrate 1mbit` holds each flow to 1 Mbit/s on the wire; a socket whose
//! packets a pacing fq takes is told (`SK_PACING_FQ`) and fq holds its packets to their departure times;
//! with `nopacing`, or another qdisc, the socket stays unpaced; `fq_rate` (SO_MAX_PACING_RATE) paces a
//! flow at its rate through fq or, without one, by the socket itself.

use tclab_core::qdisc::Xstats;
use tclab_sim::apps::App;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};
use tclab_tcp::PacingStatus;

/// a --(rate, 10 ms)-- b; `qdisc` at a's eth0; TCP entries from a to b (one stream each).
fn lab(rate: &str, qdisc: &str, flows: usize, duration: &str) -> Scenario {
    lab_with(rate, qdisc, flows, duration, "")
}

/// As [`lab`], with `extra` keys in each traffic entry.
fn lab_with(rate: &str, qdisc: &str, flows: usize, duration: &str, extra: &str) -> Scenario {
    let mut text = format!(
        r#"
duration = "{duration}"
[[node]]
name = "a"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "{rate}"
delay = "10ms"
[[policy]]
node = "a"
tc = "qdisc add dev eth0 root handle 1: {qdisc}"
"#
    );
    for _ in 0..flows {
        text.push_str("[[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\n");
        text.push_str(extra);
    }
    load("fq.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"))
}

fn go(sc: &mut Scenario) -> Outcome {
    run(sc, &mut |_| {}).expect("the run completes")
}

/// The senders' pacing status, and a's fq counters.
fn senders(sc: &Scenario) -> Vec<PacingStatus> {
    sc.net
        .apps
        .iter()
        .filter_map(|a| match a {
            App::Tcp(t) if t.stats().bytes_sent > 1000 => Some(t.conn.pacing_status()),
            _ => None,
        })
        .collect()
}

fn fq_throttled(sc: &Scenario) -> u64 {
    let a_eth0 = sc.net.iface_by_name(0, "eth0").unwrap();
    match sc.net.device(a_eth0).unwrap().root().q.xstats() {
        Some(Xstats::Fq(x)) => x.throttled,
        _ => panic!("a's root is fq"),
    }
}

#[test]
fn maxrate_1mbit_holds_each_tcp_flow_to_1_mbit() {
    // fq paces each socket's flow at maxrate: one 1514-byte frame per 1514 / 125 000 s = 12.112 ms.
    // TCP small queues keeps a segment or two of each socket in fq, so each flow is always backlogged
    // and sends exactly 125 000 B/s of frames, 1448 of each 1514 bytes payload: a goodput of
    // 1e6 × 1448 / 1514 = 956 407 bit/s, ±1 % (the handshake's first 20 ms are 0.2 % of the run).
    let mut sc = lab("100mbit", "fq maxrate 1mbit", 2, "10s");
    let out = go(&mut sc);
    for f in &out.flows {
        let g = f.goodput_bps;
        eprintln!("{}: {g:.0} bit/s", f.name);
        assert!(
            (g / 956_407.0 - 1.0).abs() < 0.01,
            "{}: {g} bit/s, not 956 407 ± 1 %",
            f.name
        );
    }
    assert_eq!(senders(&sc), [PacingStatus::Fq; 2]);
}

#[test]
fn a_pacing_fq_tells_the_socket_and_holds_its_packets_to_their_departure_times() {
    // On a 10 Gbit/s link of 20 ms round trip a CUBIC flow's window, not the link, sets its rate (the
    // path's BDP, 25 MB, is beyond tcp_rmem's 6 MB most: measured 1.05 Gbit/s in 2 s); fq holds its
    // packets to the departure times TCP stamps at its pacing rate, throttling the flow between them
    // (4 122 times). On 1 Gbit/s the window now outgrows the path within the 2 s (877 Mbit/s, 80
    // throttles), since a paced socket's HyStart exits later, as Linux's does.
    let mut sc = lab("10gbit", "fq", 1, "2s");
    go(&mut sc);
    assert_eq!(senders(&sc), [PacingStatus::Fq]);
    assert!(fq_throttled(&sc) > 100, "{}", fq_throttled(&sc));

    // nopacing: the socket is not told, TCP stamps every segment with its send time, fq holds nothing.
    let mut sc = lab("1gbit", "fq nopacing", 1, "2s");
    go(&mut sc);
    assert_eq!(senders(&sc), [PacingStatus::None]);
    assert_eq!(fq_throttled(&sc), 0);

    // Another qdisc never tells it: CUBIC is not paced (Linux paces a socket only when sch_fq does, or
    // when it asks for pacing: BBR, SO_MAX_PACING_RATE).
    let mut sc = lab("1gbit", "fq_codel", 1, "2s");
    go(&mut sc);
    assert_eq!(senders(&sc), [PacingStatus::None]);
}

#[test]
fn fq_rate_paces_a_flow_by_fq_or_by_itself() {
    // `fq_rate = "10mbit"` (SO_MAX_PACING_RATE, 1.25 MB/s) on a 1 Gbit/s path: the socket's pacing
    // rate is the cap once its window outgrows the path (CUBIC's own rate, twice the window's, is above
    // it from the first RTT), and departures are spaced by each segment's payload at that rate — so the
    // goodput is 10 Mbit/s, ±1 % (the first RTTs of slow start are under 1 % of 10 s). Through fq the
    // qdisc holds the packets to their departure times (SK_PACING_FQ); through pfifo the socket waits
    // itself (SK_PACING_NEEDED, internal pacing).
    for (qdisc, status) in [
        ("fq", PacingStatus::Fq),
        ("pfifo limit 1000", PacingStatus::Needed),
    ] {
        let mut sc = lab_with("1gbit", qdisc, 1, "10s", "fq_rate = \"10mbit\"\n");
        let out = go(&mut sc);
        let g = out.flows[0].goodput_bps;
        eprintln!("{qdisc}: {g:.0} bit/s");
        assert!((g / 1e7 - 1.0).abs() < 0.01, "{qdisc}: {g} bit/s");
        assert_eq!(senders(&sc), [status]);
    }
}

#[test]
fn paced_makes_the_socket_pace_itself_uncapped() {
    // `paced = true` (a socket BBR initialised before the application chose CUBIC): SK_PACING_NEEDED
    // through a plain pfifo, with no cap, so the flow still fills a 10 Mbit/s link: goodput within 1 %
    // of the unpaced flow's. The key is TCP's only.
    let mut goodput = Vec::new();
    for (extra, status) in [
        ("", PacingStatus::None),
        ("paced = true\n", PacingStatus::Needed),
    ] {
        let mut sc = lab_with("10mbit", "pfifo limit 100", 1, "5s", extra);
        goodput.push(go(&mut sc).flows[0].goodput_bps);
        assert_eq!(senders(&sc), [status]);
    }
    assert!((goodput[1] / goodput[0] - 1.0).abs() < 0.01, "{goodput:?}");
    let text = "duration = \"1s\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n[[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nrate = \"10mbit\"\n[[traffic]]\nkind = \"ping\"\nfrom = \"a\"\nto = \"b\"\npaced = true\n";
    let Err(e) = load("p.toml", text, std::path::Path::new(".")) else {
        panic!("paced on a ping was taken");
    };
    assert!(
        e.to_string()
            .contains("traffic.paced: does not apply to ping traffic"),
        "{e}"
    );
}
