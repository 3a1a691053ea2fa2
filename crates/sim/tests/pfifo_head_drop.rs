//! pfifo_head_drop in a simulated run: a full queue drops its oldest packet, so under overload a packet
//! waits at most `limit` arrivals, where pfifo's wait `limit` transmissions.
//!
//! a --(10 Mbit/s)-- r --(1 Mbit/s)-- b, UDP at 2 Mbit/s of 1000-byte datagrams from a to b, a 10-packet
//! FIFO on r's way to b. Frames are 1000 + 8 + 20 + 14 = 1042 bytes: 8.336 ms each at 1 Mbit/s, and
//! one arrives every 4 ms (1000 bytes at 2 Mbit/s; a's faster link keeps the spacing). The overload is
//! twice the line, so the queue fills and stays full.
//!
//! pfifo_head_drop (`pfifo_tail_enqueue`, net/sched/sch_fifo.c): each arrival is queued, so the queue
//! holds the newest arrivals; one that finds 10 there (the 10 before it, 4 ms apart) drops the oldest,
//! which came 10 × 4 = 40 ms earlier: every drop is a queued packet 40 ms old, answered NET_XMIT_CN,
//! and no packet leaves older than that. pfifo drops the arrival instead: a packet admitted joins 9
//! others and waits for them and the rest of the frame on the wire, at least 9 × 8.336 = 75.02 ms.

use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::{load, Scenario};

mod common;

fn lab(fifo: &str) -> String {
    format!(
        r#"
duration = "4s"
[[node]]
name = "a"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "b"
[[link]]
a = "a:eth0"
b = "r:eth0"
rate = "10mbit"
delay = "1ms"
[[link]]
a = "r:eth1"
b = "b:eth0"
rate = "1mbit"
delay = "1ms"
[[policy]]
node = "r"
tc = "qdisc add dev eth1 root handle 1: {fifo} limit 10"
[[traffic]]
kind = "udp"
name = "u"
from = "a"
to = "b"
rate = "2mbit"
length = 1000
stop = "3s"
"#
    )
}

/// One trace record at r:eth1.
struct Rec {
    at: u64,
    event: String,
    reason: String,
    sojourn: Option<u64>,
}

/// The run, and r:eth1's trace records.
fn traced(fifo: &str) -> (Scenario, Outcome, Vec<Rec>) {
    let mut sc = load(
        "pfifo_head_drop.toml",
        &lab(fifo),
        std::path::Path::new("."),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let sink = common::Sink::default();
    sc.net.trace = Some(tclab_sim::trace::Trace::text(Box::new(sink.clone())));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    sc.net.trace.as_mut().unwrap().finish().unwrap();
    let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
    // time_ns dev event flow len class reason sojourn_ns filter
    let records = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w[1] == "r:eth1")
        .map(|w| Rec {
            at: w[0].parse().unwrap(),
            event: w[2].to_string(),
            reason: w[6].to_string(),
            sojourn: w[7].parse().ok(),
        })
        .collect();
    (sc, out, records)
}

fn drops_at_r(sc: &Scenario) -> u64 {
    let eth1 = sc.net.iface_by_name(1, "eth1").unwrap();
    let s = sc.net.device(eth1).unwrap().root().q.stats();
    assert_eq!((s.qlen, s.backlog), (0, 0), "drained by the end");
    s.drops as u64
}

/// The longest a packet waited among those that left while datagrams still arrived (after the last
/// one the queue drains at the line's pace, as any FIFO does).
fn oldest_sent_under_load(recs: &[Rec]) -> Option<u64> {
    let last = recs
        .iter()
        .filter(|r| r.event == "enq")
        .map(|r| r.at)
        .max()?;
    recs.iter()
        .filter(|r| r.event == "deq" && r.at < last)
        .filter_map(|r| r.sojourn)
        .max()
}

#[test]
fn a_full_pfifo_head_drop_drops_its_oldest_packet_and_keeps_delay_to_limit_arrivals() {
    let (sc, out, recs) = traced("pfifo_head_drop");
    let drops = drops_at_r(&sc);
    let f = common::flow(&out, "u");
    assert!(drops > 300, "2 Mbit/s into 1 Mbit/s for 3 s: {drops} drops");
    assert_eq!(
        f.lost_packets, drops,
        "every datagram lost was a head drop at r"
    );
    let dropped: Vec<&Rec> = recs.iter().filter(|r| r.event == "drop").collect();
    assert_eq!(dropped.len() as u64, drops, "tc -s counts each head drop");
    for d in &dropped {
        assert_eq!(
            (d.reason.as_str(), d.sojourn),
            ("head_drop", Some(40_000_000)),
            "the oldest queued packet, 10 arrivals of 4 ms old, at {}",
            d.at
        );
    }
    let cn = recs.iter().filter(|r| r.event == "enq" && r.reason == "cn");
    assert_eq!(
        cn.count() as u64,
        drops,
        "each arrival that made room is answered NET_XMIT_CN"
    );
    let oldest = oldest_sent_under_load(&recs);
    assert!(
        oldest <= Some(40_000_000) && oldest > Some(36_000_000),
        "no packet leaves older than 10 arrivals: {oldest:?}"
    );
}

#[test]
fn pfifo_in_the_same_run_drops_arrivals_and_holds_packets_ten_transmissions() {
    let (sc, out, recs) = traced("pfifo");
    let drops = drops_at_r(&sc);
    assert_eq!(common::flow(&out, "u").lost_packets, drops);
    let dropped: Vec<&Rec> = recs.iter().filter(|r| r.event == "drop").collect();
    assert_eq!(dropped.len() as u64, drops);
    assert!(dropped
        .iter()
        .all(|r| r.reason == "tail_drop" && r.sojourn.is_none()));
    assert!(
        recs.iter().all(|r| r.reason != "cn"),
        "a tail drop is NET_XMIT_DROP"
    );
    let oldest = oldest_sent_under_load(&recs);
    assert!(
        oldest > Some(75_020_000),
        "a packet admitted behind 9 waits for them: {oldest:?}"
    );
}
