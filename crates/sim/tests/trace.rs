//! The per-packet trace (`tclab sim --trace`): identical across runs, and its counts equal the `tc -s`
//! counters of the same run.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use tclab_sim::builtin::find;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;
use tclab_sim::trace::{parse_line, Trace};

#[derive(Clone, Default)]
struct Sink(Rc<RefCell<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn traced(name: &str) -> (String, Outcome) {
    let b = find(name).expect("built in");
    let mut sc = load(name, &b.toml(), std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let sink = Sink::default();
    sc.net.trace = Some(Trace::new(Box::new(sink.clone())));
    let out = run(&mut sc, &mut |_| {}).expect("runs");
    sc.net.trace.as_mut().unwrap().finish().expect("written");
    let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
    (text, out)
}

#[test]
fn a_trace_is_the_same_every_run() {
    let (a, _) = traced("cake-adsl-upload-htb");
    let (b, _) = traced("cake-adsl-upload-htb");
    assert_eq!(a, b);
    assert!(a.starts_with("# tclab trace 2\n# flow upload tcp 32768\n# flow ping icmp 32769\n"));
    assert!(a.lines().count() > 10_000);
}

/// `Sent N pkt (dropped M` of a class line in `tc -s class show`.
fn class_counters(tc: &str, class: &str) -> (u64, u64) {
    let mut lines = tc.lines();
    while let Some(l) = lines.next() {
        if l.starts_with(&format!("class htb {class} ")) {
            let s = lines.next().unwrap();
            let w: Vec<&str> = s.split_whitespace().collect();
            let sent = w[3].parse().unwrap();
            let dropped = w[6].trim_end_matches(',').parse().unwrap();
            return (sent, dropped);
        }
    }
    panic!("no class {class} in\n{tc}")
}

#[test]
fn a_traces_counts_are_the_tc_counters() {
    // Seed 004's conditioner on the ATM line: the bulk class 1:20 (SFQ leaf) tail-drops the upload,
    // the interactive class 1:10 carries the pings. Every dequeue of a class is one packet of its `Sent`,
    // every drop one of its `dropped`.
    let (text, out) = traced("cake-adsl-upload-htb");
    let tc = &out
        .tc_show
        .iter()
        .find(|(n, d, _)| n == "router" && d == "ppp0")
        .expect("shown")
        .2;
    for class in ["1:10", "1:20"] {
        let (sent, dropped) = class_counters(tc, class);
        let (mut deq, mut drop) = (0, 0);
        for l in text.lines().filter_map(parse_line) {
            if l.dev == "router:ppp0" && l.class == class {
                match l.event.as_str() {
                    "deq" => deq += 1,
                    "drop" => drop += 1,
                    _ => {}
                }
            }
        }
        assert_eq!((deq, drop), (sent, dropped), "{class}");
    }
    // The bulk class's drops are tail drops at its SFQ leaf; the sojourns grow to the leaf's 127 frames
    // at 198 kbit/s: 127 × 1514 × 8 / 198 000 = 7.77 s at most.
    let drops: Vec<_> = text
        .lines()
        .filter_map(parse_line)
        .filter(|l| l.event == "drop" && l.class == "1:20")
        .collect();
    assert!(!drops.is_empty());
    assert!(drops
        .iter()
        .all(|l| l.reason == "tail_drop" && l.flow == "upload"));
    let max = text
        .lines()
        .filter_map(parse_line)
        .filter(|l| l.event == "deq" && l.class == "1:20")
        .filter_map(|l| l.sojourn)
        .max()
        .unwrap();
    assert!(max <= 7_770_000_000 && max > 7_000_000_000, "{max}");
    // An enqueue line names the class the packet went to (taken after the tree classified it) and the
    // filter that sent it there: the pings' 1:10 by the u32 at pref 10 (`match ip protocol 1`), the
    // upload's 1:20 by no filter (its data segments match none of seed 004's three; HTB's default).
    for (flow, class, filter) in [("ping", "1:10", "u32:10"), ("upload", "1:20", "-")] {
        let enq: Vec<_> = text
            .lines()
            .filter_map(parse_line)
            .filter(|l| l.flow == flow && l.dev == "router:ppp0" && l.event == "enq")
            .collect();
        assert!(!enq.is_empty(), "{flow}");
        assert!(
            enq.iter().all(|l| l.class == class && l.filter == filter),
            "{flow}"
        );
    }
    // The pings go through 1:10 with no drop.
    assert!(text
        .lines()
        .filter_map(parse_line)
        .filter(|l| l.flow == "ping" && l.dev == "router:ppp0" && l.event == "deq")
        .all(|l| l.class == "1:10"));
}
