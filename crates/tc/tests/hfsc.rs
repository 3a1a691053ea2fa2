//! HFSC in virtual time, configured by `tc` lines; packets are classified by `skb->priority` (a classid of
//! the qdisc). The driver plays a NIC of a given rate that dequeues whenever the link is free and, when
//! HFSC holds its packets back, sleeps until the wake-up it asked for. Every expectation is derived by hand
//! from the service curves in the test that checks it.

use tclab_core::qdisc::{Cx, Verdict};
use tclab_core::{Engine, Packet, NSEC_PER_SEC};

fn tc(e: &mut Engine, line: &str) -> String {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
    out.stdout
}

fn tc_fails(e: &mut Engine, line: &str) -> (i32, String) {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let out = tclab_tc::run(e, &argv, 0);
    (out.code as i32, out.stderr)
}

fn setup(lines: &[&str]) -> Engine {
    let mut e = Engine::new();
    e.add_device("eth0", 1500, 100_000);
    for l in lines {
        tc(&mut e, l);
    }
    e
}

fn pkt(classid: u32, len: u32) -> Packet {
    Packet {
        priority: classid,
        ..Packet::of_len(len)
    }
}

/// One departure: when its last bit left, its class, its length.
#[derive(Clone, Copy, Debug)]
struct Sent {
    end: u64,
    class: u32,
    len: u32,
}

/// Run the link at `rate` bit/s until `until` ns. `bulk` classes are kept backlogged (each packet sent
/// is replaced by another of the same class, `depth` queued to start with); `arrivals` are (time,
/// class, count) bursts of 1000-byte packets enqueued once. Returns the departures and the number of
/// times the qdisc asked to be woken.
fn run(
    e: &mut Engine,
    rate: u64,
    until: u64,
    bulk: &[u32],
    arrivals: &[(u64, u32, u32)],
) -> (Vec<Sent>, u32) {
    let dev = e.device_mut("eth0").unwrap();
    for &c in bulk {
        for _ in 0..5 {
            assert_eq!(dev.enqueue(pkt(c, 1000), &mut Cx::new(0)), Verdict::Success);
        }
    }
    let mut pending: Vec<(u64, u32, u32)> = arrivals.to_vec();
    let mut now = 0u64;
    let mut out = Vec::new();
    let mut wakes = 0;
    while now < until {
        pending.retain(|&(t, c, n)| {
            if t <= now {
                for _ in 0..n {
                    dev.enqueue(pkt(c, 1000), &mut Cx::new(now));
                }
                false
            } else {
                true
            }
        });
        let mut cx = Cx::new(now);
        match dev.dequeue(&mut cx) {
            Some(p) => {
                now += p.len as u64 * 8 * NSEC_PER_SEC / rate;
                out.push(Sent {
                    end: now,
                    class: p.priority,
                    len: p.len,
                });
                if bulk.contains(&p.priority) {
                    dev.enqueue(pkt(p.priority, p.len), &mut Cx::new(now));
                }
            }
            None => {
                let next_arrival = pending.iter().map(|a| a.0).min();
                let wake = cx.wake_at.inspect(|_| wakes += 1);
                match wake.into_iter().chain(next_arrival).min() {
                    Some(t) => {
                        assert!(t > now, "a wake-up in the future");
                        now = t;
                    }
                    None => break,
                }
            }
        }
    }
    (out, wakes)
}

fn bytes(sent: &[Sent], class: u32, from: u64, to: u64) -> u64 {
    sent.iter()
        .filter(|s| s.class == class && s.end > from && s.end <= to)
        .map(|s| s.len as u64)
        .sum()
}

const C10: u32 = 0x1_0010;
const C20: u32 = 0x1_0020;
const C30: u32 = 0x1_0030;
const MS: u64 = 1_000_000;

/// `rt m1 10mbit d 20ms m2 1mbit`: the class's deadline curve promises 10 Mbit/s × 20 ms = 25 000 bytes
/// within 20 ms of becoming backlogged, whatever the bulk class (which has the whole link's `ls`) wants.
/// The class arrives at 100 ms with 60 packets of 1000 bytes on a 20 Mbit/s link (a packet takes 0.4 ms).
/// Its curve is concave, so eligible = deadline curve: packet k (k = 1…) is eligible when the curve reaches
/// (k−1)·1000 bytes, at (k−1)·0.8 ms, and its deadline is k·0.8 ms; EDF meets each deadline to within one
/// packet on the wire. So the 25th packet has left by 100 + 20 + 0.4 ms, and not before 100 + 19.2 ms.
/// After the first segment the class gets m2 = 1 Mbit/s: 125 000 bytes a second, a packet every 8 ms.
#[test]
fn real_time_burst_then_rate_while_bulk_is_backlogged() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc",
        "class add dev eth0 parent 1: classid 1:10 hfsc rt m1 10mbit d 20ms m2 1mbit",
        "class add dev eth0 parent 1: classid 1:20 hfsc ls rate 20mbit",
    ]);
    let (sent, _) = run(
        &mut e,
        20_000_000,
        1500 * MS,
        &[C20],
        &[(100 * MS, C10, 200)],
    );
    let rt: Vec<&Sent> = sent.iter().filter(|s| s.class == C10).collect();
    let t25 = rt[24].end;
    assert!(
        t25 <= 120 * MS + 400_000,
        "25 000 bytes within 20 ms (+ one packet): the 25th left at {t25} ns"
    );
    assert!(
        t25 >= 119 * MS,
        "not faster than 10 Mbit/s: 25th at {t25} ns"
    );
    // Second segment: from 120 ms to 1120 ms, 1 Mbit/s = 125 000 bytes (± one packet).
    let b = bytes(&sent, C10, 120 * MS, 1120 * MS);
    assert!(
        b.abs_diff(125_000) <= 1000,
        "m2 = 1 Mbit/s: {b} bytes in 1 s"
    );
    // The bulk class had everything else: 20 Mbit/s over 1.5 s minus what 1:10 sent.
    let total: u64 = sent.iter().map(|s| s.len as u64).sum();
    assert!(
        total.abs_diff(20_000_000 / 8 * 3 / 2) <= 1000,
        "work conserving: {total}"
    );
    // The counters: 1:10's work was all real time.
    let out = tc(&mut e, "-s class show dev eth0 classid 1:10");
    let rt_bytes: u64 = rt.iter().map(|s| s.len as u64).sum();
    assert!(
        out.contains(&format!(
            "work {rt_bytes} bytes rtwork {rt_bytes} bytes level 0"
        )),
        "{out}"
    );
}

/// Link sharing splits the excess in proportion to `ls` m2. On 10 Mbit/s, 1:10 has only `rt rate 2mbit`
/// (real time, never link sharing); 1:20 has `ls rate 3mbit`, 1:30 `ls rate 1mbit`. All three
/// backlogged: 1:10 gets exactly its 2 Mbit/s, and the other 8 Mbit/s go 3:1, 6 and 2 Mbit/s (within 1 %).
#[test]
fn link_sharing_splits_the_excess_by_ls_m2() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc",
        "class add dev eth0 parent 1: classid 1:10 hfsc rt rate 2mbit",
        "class add dev eth0 parent 1: classid 1:20 hfsc ls rate 3mbit",
        "class add dev eth0 parent 1: classid 1:30 hfsc ls rate 1mbit",
    ]);
    let secs = 10;
    let (sent, _) = run(
        &mut e,
        10_000_000,
        secs * NSEC_PER_SEC,
        &[C10, C20, C30],
        &[],
    );
    let rate =
        |c| bytes(&sent, c, NSEC_PER_SEC, secs * NSEC_PER_SEC) as f64 * 8.0 / (secs - 1) as f64;
    let (r10, r20, r30) = (rate(C10), rate(C20), rate(C30));
    assert!((r10 / 2e6 - 1.0).abs() < 0.01, "rt 2 Mbit/s: {r10}");
    assert!((r20 / 6e6 - 1.0).abs() < 0.01, "3/4 of the excess: {r20}");
    assert!((r30 / 2e6 - 1.0).abs() < 0.01, "1/4 of the excess: {r30}");
    assert!((r20 / r30 / 3.0 - 1.0).abs() < 0.01, "3:1, {}", r20 / r30);
}

/// `ul rate 2mbit` caps the class over every window: however long or short, the bytes sent in
/// (t_i, t_j] never exceed 2 Mbit/s × (t_j − t_i) plus one packet (the fit time is checked before a
/// packet is sent). The class is alone on a 10 Mbit/s link, so HFSC must leave the link idle and ask to
/// be woken: the overlimits counter grows, and over 10 s the class gets its 2 Mbit/s (within 1 %).
#[test]
fn upper_limit_caps_a_class_over_any_window() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc",
        "class add dev eth0 parent 1: classid 1:10 hfsc ls rate 10mbit ul rate 2mbit",
    ]);
    let (sent, wakes) = run(&mut e, 10_000_000, 10 * NSEC_PER_SEC, &[C10], &[]);
    assert!(wakes > 1000, "it sleeps between packets: {wakes} wake-ups");
    let limit = 2_000_000u64 / 8;
    for i in 0..sent.len() {
        let mut sum = 0u64;
        for j in i..sent.len() {
            sum += sent[j].len as u64;
            // From the start of packet i (its end minus its time on the wire) to the end of packet j.
            let start = sent[i].end - sent[i].len as u64 * 800;
            let window = sent[j].end - start;
            let allowed = limit * window / NSEC_PER_SEC + 1000 + 1000;
            assert!(sum <= allowed, "{sum} bytes in {window} ns from packet {i}");
        }
    }
    let total: u64 = sent.iter().map(|s| s.len as u64).sum();
    assert!(
        (total as f64 / (limit * 10) as f64 - 1.0).abs() < 0.01,
        "{total}"
    );
    let out = tc(&mut e, "-s qdisc show dev eth0");
    let over: u64 = out
        .split("overlimits ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(over > 1000, "{out}");
}

/// The shaper people build with HFSC: one class `ls m2 LINE ul m2 LINE` below the line's rate, children
/// splitting it. On 10 Mbit/s, 1:1 is capped at 4 Mbit/s; 1:10 (`ls rate 3mbit`) and 1:20 (`ls rate
/// 1mbit`) share it 3:1, so 3 and 1 Mbit/s (within 1 %), and the link idles 60 % of the time.
#[test]
fn ul_on_a_parent_shapes_the_subtree() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc default 20",
        "class add dev eth0 parent 1: classid 1:1 hfsc ls m2 4mbit ul m2 4mbit",
        "class add dev eth0 parent 1:1 classid 1:10 hfsc ls rate 3mbit",
        "class add dev eth0 parent 1:1 classid 1:20 hfsc ls rate 1mbit",
    ]);
    let (sent, _) = run(&mut e, 10_000_000, 10 * NSEC_PER_SEC, &[C10, C20], &[]);
    let r = |c| bytes(&sent, c, NSEC_PER_SEC, 10 * NSEC_PER_SEC) as f64 * 8.0 / 9.0;
    assert!((r(C10) / 3e6 - 1.0).abs() < 0.01, "{}", r(C10));
    assert!((r(C20) / 1e6 - 1.0).abs() < 0.01, "{}", r(C20));
    // The inner class reports the total work of its subtree and its level.
    let out = tc(&mut e, "-s class show dev eth0 classid 1:1");
    assert!(out.contains("level 1"), "{out}");
}

/// `hfsc_classify`: a priority naming a leaf; else the default class; unclassified packets are dropped
/// and counted, and the sender told success (`__NET_XMIT_BYPASS`). Without children the root class is
/// itself the leaf every packet goes to (default 0 names it).
#[test]
fn classification_default_and_drops() {
    let mut e = setup(&["qdisc add dev eth0 root handle 1: hfsc"]);
    let dev = e.device_mut("eth0").unwrap();
    assert_eq!(dev.enqueue(pkt(0, 100), &mut Cx::new(0)), Verdict::Success);
    assert_eq!(dev.dequeue(&mut Cx::new(0)).map(|p| p.len), Some(100));

    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:10 hfsc ls rate 1mbit",
    );
    let dev = e.device_mut("eth0").unwrap();
    let mut cx = Cx::new(0);
    assert_eq!(dev.enqueue(pkt(0, 100), &mut cx), Verdict::Bypass);
    assert_eq!(cx.drops.len(), 1);
    assert_eq!(
        dev.enqueue(pkt(C10, 100), &mut Cx::new(0)),
        Verdict::Success
    );
    tc(
        &mut e,
        "qdisc change dev eth0 root handle 1: hfsc default 10",
    );
    let dev = e.device_mut("eth0").unwrap();
    assert_eq!(dev.enqueue(pkt(7, 100), &mut Cx::new(0)), Verdict::Success);
    let out = tc(&mut e, "-s qdisc show dev eth0");
    assert!(out.contains("default 10"), "{out}");
    assert!(out.contains("dropped 1,"), "{out}");
    assert!(out.contains("backlog 200b 2p"), "{out}");
    // A class that becomes a parent loses its queue; the qdisc's backlog follows.
    tc(
        &mut e,
        "class add dev eth0 parent 1:10 classid 1:11 hfsc ls rate 1mbit",
    );
    let out = tc(&mut e, "-s qdisc show dev eth0");
    assert!(out.contains("backlog 0b 0p"), "{out}");
}

/// Refusals: tc's own checks (exit 1) and the kernel's (exit 2), none of which changes anything.
#[test]
fn bad_input_is_refused_and_applies_nothing() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc",
        "class add dev eth0 parent 1: classid 1:1 hfsc sc rate 10mbit",
        "class add dev eth0 parent 1:1 classid 1:10 hfsc ls rate 5mbit",
    ]);
    let before = tc(&mut e, "class show dev eth0");
    for (line, code, msg) in [
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc ul rate 1mbit",
            1,
            "HFSC: Upper-limit Service Curve without Link-Share Service Curve",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc",
            1,
            "HFSC: no parameters given",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc rt m1 0 d 10ms m2 0",
            1,
            "HFSC: Service Curve has two zero slopes",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc rt umax 1500 rate 1mbit",
            1,
            "HFSC: umax given but dmax is zero.",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc rt m1 fast d 1ms m2 1mbit",
            1,
            "HFSC: Illegal \"m1\"\nHFSC: Illegal \"rt\"",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc rt m1 1mbit",
            255,
            "not complete",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc rt rate 40gbit",
            1,
            "Illegal \"rate\"",
        ),
        (
            "class add dev eth0 parent 1: classid 1:2 hfsc xx",
            1,
            "HFSC: What is \"xx\" ?",
        ),
        (
            "qdisc add dev eth1 root hfsc default 1 default 2",
            1,
            "HFSC: Double \"default\"",
        ),
        // The kernel: no such parent, the class exists, an inner class or the root cannot go.
        (
            "class add dev eth0 parent 1:99 classid 1:2 hfsc ls rate 1mbit",
            2,
            "No such file",
        ),
        (
            "class add dev eth0 parent 1: classid 1:10 hfsc ls rate 1mbit",
            2,
            "File exists",
        ),
        ("class del dev eth0 classid 1:1", 2, "HFSC class in use"),
        ("class del dev eth0 classid 1:", 2, "HFSC class in use"),
        (
            "class change dev eth0 parent 1: classid 1:10 hfsc ls rate 1mbit",
            2,
            "Invalid argument",
        ),
        (
            "qdisc add dev eth0 parent 1:1 handle 2: pfifo",
            2,
            "Invalid argument",
        ),
    ] {
        let (c, err) = tc_fails(&mut e, line);
        assert_eq!(c, code, "tc {line}: {err}");
        assert!(err.contains(msg), "tc {line}: {err:?} lacks {msg:?}");
    }
    assert_eq!(tc(&mut e, "class show dev eth0"), before);
    // A convex curve with no `d` (m1 below m2) is what tc and the kernel accept: the first segment
    // has no length, so the curve is its m2.
    tc(
        &mut e,
        "class add dev eth0 parent 1: classid 1:2 hfsc rt m1 1mbit m2 2mbit",
    );
    let out = tc(&mut e, "class show dev eth0 classid 1:2");
    assert!(out.contains("rt m1 1Mbit d 0us m2 2Mbit"), "{out}");
    // A filter bound to a class keeps it.
    tc(
        &mut e,
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match u32 0 0 flowid 1:2",
    );
    let (c, err) = tc_fails(&mut e, "class del dev eth0 classid 1:2");
    assert_eq!((c, err.contains("HFSC class in use")), (2, true), "{err}");
    // A filter in a leaf's block naming a sibling holds nothing (`hfsc_bind_tcf`: the block's class is
    // not above the class named), so the sibling can go, as in Linux.
    tc(
        &mut e,
        "class add dev eth0 parent 1:1 classid 1:11 hfsc ls rate 1mbit",
    );
    tc(
        &mut e,
        "filter add dev eth0 parent 1:11 protocol ip prio 1 u32 match u32 0 0 flowid 1:10",
    );
    tc(&mut e, "class del dev eth0 classid 1:10");
    let out = tc(&mut e, "class show dev eth0");
    assert!(!out.contains("1:10 "), "{out}");
}

/// A leaf's qdisc stays attached when the class gains a child (`hfsc_change_class` only purges it): the
/// kernel's qdisc hash keeps it, so `tc qdisc show` lists it and `qdisc change` reaches it, while `qdisc
/// del` by the class finds nothing (`cops->leaf` of an inner class is NULL).
#[test]
fn an_inner_class_keeps_its_old_leaf_qdisc_listed() {
    let mut e = setup(&[
        "qdisc add dev eth0 root handle 1: hfsc default 21",
        "class add dev eth0 parent 1: classid 1:21 hfsc ls rate 5mbit",
        "qdisc add dev eth0 parent 1:21 handle 21: fq_codel",
        "class add dev eth0 parent 1:21 classid 1:211 hfsc ls rate 1mbit",
    ]);
    let out = tc(&mut e, "qdisc show dev eth0");
    assert!(
        out.contains("qdisc fq_codel 21: parent 1:21 limit 10240p"),
        "{out}"
    );
    tc(
        &mut e,
        "qdisc change dev eth0 handle 21: fq_codel limit 100",
    );
    let out = tc(&mut e, "qdisc show dev eth0");
    assert!(
        out.contains("qdisc fq_codel 21: parent 1:21 limit 100p"),
        "{out}"
    );
    // By parent and handle, Linux grafts it back, which `hfsc_graft` refuses for an inner class; a
    // different kind is refused before that.
    let (code, err) = tc_fails(
        &mut e,
        "qdisc change dev eth0 parent 1:21 handle 21: fq_codel limit 50",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Invalid argument"), "{err}");
    let (code, err) = tc_fails(&mut e, "qdisc change dev eth0 parent 1:21 handle 21: pfifo");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Invalid qdisc name"), "{err}");
    let (code, err) = tc_fails(&mut e, "qdisc del dev eth0 parent 1:21 handle 21:");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("Cannot find specified qdisc on specified device"),
        "{err}"
    );
    let out = tc(&mut e, "class show dev eth0");
    assert!(
        !out.contains("leaf 21:"),
        "an inner class shows no leaf: {out}"
    );
}
