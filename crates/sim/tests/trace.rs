//! The per-packet trace (`tclab sim --trace`): identical across runs, its counts equal the `tc -s`
//! counters of the same run, its binary form reads back to exactly the text form's lines, and a damaged
//! or cut file is refused or read up to the damage, never a panic.

use std::io::Write;
use tclab_sim::builtin::find;
use tclab_sim::run::{run, Outcome};
use tclab_sim::scenario::load;
use tclab_sim::trace::{parse_line, Form, Line, Reader, Trace};

mod common;
use common::Sink;

/// Run a built-in scenario with a trace in the text form (`text`) or the binary one: the trace's bytes.
fn traced_as(name: &str, text: bool) -> (Vec<u8>, Outcome) {
    let b = find(name).expect("built in");
    let mut sc = load(name, &b.toml(), std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let sink = Sink::default();
    let out: Box<dyn Write> = Box::new(sink.clone());
    sc.net.trace = Some(if text {
        Trace::text(out)
    } else {
        Trace::new(out)
    });
    let outcome = run(&mut sc, &mut |_| {}).expect("runs");
    sc.net.trace.as_mut().unwrap().finish().expect("written");
    let bytes = sink.0.borrow().clone();
    (bytes, outcome)
}

fn traced(name: &str) -> (String, Outcome) {
    let (b, out) = traced_as(name, true);
    (String::from_utf8(b).unwrap(), out)
}

/// Every record of a trace in either form, as lines; the reader's complaint if it stopped early.
fn read_back(bytes: &[u8]) -> Result<(Vec<Line>, Option<String>), String> {
    let mut r = Reader::new(bytes)?;
    let mut lines = Vec::new();
    while let Some(rec) = r.next()? {
        lines.push(r.line(&rec));
    }
    Ok((lines, r.cut_short.clone()))
}

/// The records of a binary trace as text lines, as `tclab trace show` prints them.
fn shown(bytes: &[u8]) -> Vec<String> {
    let mut r = Reader::new(bytes).expect("opens");
    assert_eq!(r.form(), Form::Binary);
    let mut out = Vec::new();
    while let Some(rec) = r.next().expect("reads") {
        let mut l = String::new();
        r.text_line(&rec, &mut l);
        out.push(l);
    }
    assert_eq!(r.cut_short, None);
    out
}

#[test]
fn a_trace_is_the_same_every_run() {
    let (a, _) = traced("cake-adsl-upload-htb");
    let (b, _) = traced("cake-adsl-upload-htb");
    assert_eq!(a, b);
    assert!(a.starts_with("# tclab trace 2\n# flow upload tcp 32768\n# flow ping icmp 32769\n"));
    assert!(a.lines().count() > 10_000);
    // The binary form too, byte for byte: strings are numbered in the order they first appear and the
    // compressor is deterministic.
    let (x, _) = traced_as("cake-adsl-upload-htb", false);
    let (y, _) = traced_as("cake-adsl-upload-htb", false);
    assert!(x == y, "two runs, two binary traces");
    assert!(x.starts_with(b"\x89tclabtr\x03"));
}

#[test]
fn the_binary_form_reads_back_to_the_text_forms_lines() {
    // seed004-download-conditioned has every kind of record but drop (its ingress policer's rxdrops
    // among them); cake-adsl-upload-htb has the drops (tail drops at an SFQ leaf), classes and filters.
    // Both runs are the same run in either form, so the records must be the same, line for line.
    for name in ["seed004-download-conditioned", "cake-adsl-upload-htb"] {
        let (text, _) = traced(name);
        let (bin, _) = traced_as(name, false);
        let want: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let got = shown(&bin);
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}: record {i}");
        }
        // The parsed form agrees as well (the reader of the text form against the binary one), and the
        // header's flows come through.
        let (from_text, _) = read_back(text.as_bytes()).unwrap();
        let (from_bin, _) = read_back(&bin).unwrap();
        assert!(from_text == from_bin, "{name}");
        let r = Reader::new(&bin[..]).unwrap();
        let flows: Vec<&str> = text.lines().filter(|l| l.starts_with("# flow ")).collect();
        assert_eq!(r.flow_lines(), flows.as_slice(), "{name}");
        // A thirtieth of the size, about (docs/TRACES.md): well under a tenth here.
        assert!(
            bin.len() * 10 < text.len(),
            "{name}: {} vs {}",
            bin.len(),
            text.len()
        );
    }
}

#[test]
fn more_records_than_a_block_read_back_in_order() {
    // seed000-htb-leaf writes 139 116 records: the file holds three blocks, each one's times
    // continuing from the one before and its strings adding to their table. (A UDP flood: TCP's
    // changes do not move the count, as they moved seed004-download-conditioned's below a block.)
    let (text, _) = traced("seed000-htb-leaf");
    let (bin, _) = traced_as("seed000-htb-leaf", false);
    let n = text.lines().filter(|l| !l.starts_with('#')).count();
    assert!(n > tclab_sim::trace::BLOCK_RECORDS, "{n}");
    let (lines, cut) = read_back(&bin).unwrap();
    assert_eq!((lines.len(), cut), (n, None));
    assert!(lines.windows(2).all(|w| w[0].time <= w[1].time));
}

#[test]
fn text_traces_of_version_1_and_2_still_read() {
    let (text, _) = traced("cake-adsl-upload-htb");
    let (v2, cut) = read_back(text.as_bytes()).unwrap();
    assert_eq!(cut, None);
    let want: Vec<Line> = text.lines().filter_map(parse_line).collect();
    assert_eq!(v2, want);
    assert!(v2.iter().any(|l| l.filter == "u32:10"));
    // Version 1 had no filter column.
    let v1: String = text
        .lines()
        .map(|l| match l {
            "# tclab trace 2" => "# tclab trace 1".to_string(),
            l if l.starts_with('#') => l.to_string(),
            l => l.rsplit_once(' ').unwrap().0.to_string(),
        })
        .map(|l| l + "\n")
        .collect();
    let mut r = Reader::new(v1.as_bytes()).unwrap();
    let mut n = 0;
    let mut v1_records = v1.lines().filter(|l| !l.starts_with('#'));
    while let Some(rec) = r.next().unwrap() {
        let l = r.line(&rec);
        assert_eq!(l.filter, "-");
        assert_eq!(
            Line {
                filter: want[n].filter.clone(),
                ..l
            },
            want[n]
        );
        // `show` prints a text trace's lines as they are.
        assert_eq!(r.raw_line(), v1_records.next());
        n += 1;
    }
    assert_eq!(r.form(), Form::Text(1));
    assert_eq!(n, want.len());
}

#[test]
fn a_cut_or_damaged_text_trace_is_reported() {
    let good = "# tclab trace 2\n# time_ns dev event flow len class reason sojourn_ns filter\n\
                5 r:e enq - 60 - ok - -\n6 r:e deq - 60 - - 1 -\n";
    // The last line half written (a run stopped mid-write): the lines before it stand.
    let cut = format!("{good}7 r:e en");
    let (lines, why) = read_back(cut.as_bytes()).unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        why.as_deref(),
        Some("line 5: the last line is cut short; ignored")
    );
    // A bad line with more after it is an error naming it.
    let bad = format!("{good}7 r:e boom - 60 - ok - -\n8 r:e deq - 60 - - 1 -\n");
    let e = read_back(bad.as_bytes()).unwrap_err();
    assert_eq!(e, "line 5: not a trace line: 7 r:e boom - 60 - ok - -");
    // Not a trace at all.
    for other in ["hello\n", "", "# a comment\n1 2 3\n"] {
        let e = read_back(other.as_bytes()).unwrap_err();
        assert!(e.starts_with("not a tclab trace"), "{other:?}: {e}");
    }
}

/// Where each frame of a binary trace ends (the header's first).
fn frame_ends(bin: &[u8]) -> Vec<usize> {
    let mut at = 9; // magic and version
    let mut ends = Vec::new();
    while at < bin.len() {
        let plen = u32::from_le_bytes(bin[at + 1..at + 5].try_into().unwrap()) as usize;
        at += 9 + plen;
        ends.push(at);
    }
    assert_eq!(at, bin.len());
    ends
}

#[test]
fn a_cut_binary_trace_reads_its_whole_blocks_with_a_warning() {
    let (bin, _) = traced_as("seed000-htb-leaf", false);
    let (all, _) = read_back(&bin).unwrap();
    let ends = frame_ends(&bin);
    assert_eq!(ends.len(), 5, "header, three blocks, end");
    // Cut anywhere (the first bytes one by one, then every frame's last bytes, and a sample between):
    // an error while the header is incomplete, then the records of the whole blocks so far and a
    // warning; never a panic, never a record that was not written.
    let mut cuts: Vec<usize> = (0..40).collect();
    for &e in &ends {
        cuts.extend(
            [e - 9, e - 1, e, e + 1, e + 9]
                .into_iter()
                .filter(|&c| c < bin.len()),
        );
    }
    cuts.extend((0..bin.len()).step_by(bin.len() / 50));
    for len in cuts {
        match read_back(&bin[..len]) {
            Err(e) => {
                assert!(len < ends[0], "{len}: {e}");
                assert!(
                    e.starts_with("not a tclab trace") || e.starts_with("cut short"),
                    "{len}: {e}"
                );
            }
            Ok((lines, why)) => {
                assert!(len >= ends[0], "{len}");
                let why = why.unwrap_or_else(|| panic!("{len}: no warning"));
                assert!(
                    why.starts_with(&format!("cut short after {} records", lines.len())),
                    "{why}"
                );
                let whole = ends.iter().filter(|&&e| e <= len).count() - 1;
                let expected = (whole * tclab_sim::trace::BLOCK_RECORDS).min(all.len());
                assert_eq!(lines.len(), expected, "{len}: the whole blocks");
                assert!(lines[..] == all[..lines.len()], "{len}");
            }
        }
    }
}

#[test]
fn a_damaged_binary_trace_is_an_error_not_a_panic() {
    let (bin, _) = traced_as("cake-adsl-upload-htb", false);
    let (all, _) = read_back(&bin).unwrap();
    // One byte changed (in every frame's head and tail, and every 31st elsewhere): refused with a
    // message, or (a frame length made longer than the file) read as cut short; never a record that
    // was not written, never a panic. The Adler-32 check in every frame is what catches a change inside
    // the compressed data.
    let ends = frame_ends(&bin);
    let near_edge = |at: usize| at < 40 || ends.iter().any(|&e| at + 12 > e && at < e + 12);
    for at in (0..bin.len()).filter(|&at| near_edge(at) || at % 31 == 0) {
        let mut bad = bin.clone();
        bad[at] ^= 0x5a;
        match read_back(&bad) {
            Err(e) => assert!(
                e.starts_with("corrupt")
                    || e.starts_with("not a tclab trace")
                    || e.starts_with("a binary trace of version")
                    || e.starts_with("cut short"),
                "byte {at}: {e}"
            ),
            // A change deflate ignores (the code length of a symbol no code uses) inflates to the
            // same bytes: the records are the ones written, and that is all a check can promise.
            Ok((lines, None)) => assert!(lines == all, "byte {at}: damage unnoticed"),
            Ok((lines, Some(_))) => assert!(lines[..] == all[..lines.len()], "byte {at}"),
        }
    }
    // Bytes after the end.
    let mut more = bin.clone();
    more.push(0);
    assert_eq!(
        read_back(&more).unwrap_err(),
        "corrupt: bytes after the end of the trace"
    );
    // A later version.
    let mut v4 = bin.clone();
    v4[8] = 4;
    assert!(read_back(&v4)
        .unwrap_err()
        .contains("a binary trace of version 4, which this tclab cannot read"));
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
    // every drop one of its `dropped`. Read from the binary form, as `tclab trace` reads a file.
    let (bin, out) = traced_as("cake-adsl-upload-htb", false);
    let (lines, _) = read_back(&bin).unwrap();
    let tc = &out
        .tc_show
        .iter()
        .find(|(n, d, _)| n == "router" && d == "ppp0")
        .expect("shown")
        .2;
    for class in ["1:10", "1:20"] {
        let (sent, dropped) = class_counters(tc, class);
        let (mut deq, mut drop) = (0, 0);
        for l in &lines {
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
    let drops: Vec<_> = lines
        .iter()
        .filter(|l| l.event == "drop" && l.class == "1:20")
        .collect();
    assert!(!drops.is_empty());
    assert!(drops
        .iter()
        .all(|l| l.reason == "tail_drop" && l.flow == "upload"));
    let max = lines
        .iter()
        .filter(|l| l.event == "deq" && l.class == "1:20")
        .filter_map(|l| l.sojourn)
        .max()
        .unwrap();
    assert!(max <= 7_770_000_000 && max > 7_000_000_000, "{max}");
    // An enqueue line names the class the packet went to (taken after the tree classified it) and the
    // filter that sent it there: the pings' 1:10 by the u32 at pref 10 (`match ip protocol 1`), the
    // upload's data segments 1:20 by no filter (they match none of seed 004's three; HTB's default).
    // The upload's last handshake ACK goes alone (Linux sends it at once, and iperf3 writes only once
    // `connect` returns): an ACK-only TCP packet under 64 bytes, the third filter's, 1:10.
    let is_ack = |l: &&Line| l.flow == "upload" && l.len == 66;
    for (flow, class, filter, acks) in [
        ("ping", "1:10", "u32:10", false),
        ("upload", "1:20", "-", false),
        ("upload", "1:10", "u32:10", true),
    ] {
        let enq: Vec<_> = lines
            .iter()
            .filter(|l| l.flow == flow && l.dev == "router:ppp0" && l.event == "enq")
            .filter(|l| is_ack(l) == acks)
            .collect();
        assert!(!enq.is_empty(), "{flow}");
        assert!(
            enq.iter().all(|l| l.class == class && l.filter == filter),
            "{flow}"
        );
    }
    // The pings go through 1:10 with no drop.
    assert!(lines
        .iter()
        .filter(|l| l.flow == "ping" && l.dev == "router:ppp0" && l.event == "deq")
        .all(|l| l.class == "1:10"));
}
