//! What flower's test files share: tc lines on an engine, an HTB root with four leaves to classify
//! into, and the class its filters at 1: give a packet.

use tclab_core::filter::{classify, Verdict};
use tclab_core::{Cx, Engine, Handle, Packet};

pub fn tc(e: &mut Engine, line: &str) -> tclab_tc::Output {
    let argv: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    tclab_tc::run(e, &argv, 0)
}

pub fn ok(e: &mut Engine, line: &str) {
    let out = tc(e, line);
    assert_eq!(out.code, 0, "tc {line}: {}", out.stderr);
}

/// An HTB root on eth0 with leaves 1:1..1:4, ready for filters at 1:.
pub fn htb() -> Engine {
    let mut e = Engine::new();
    ok(&mut e, "qdisc add dev eth0 root handle 1: htb");
    for c in 1..=4 {
        ok(
            &mut e,
            &format!("class add dev eth0 parent 1: classid 1:{c} htb rate 1mbit"),
        );
    }
    e
}

/// The class the filters at 1: give `pkt`, or `None` when nothing matched.
pub fn class_of(e: &mut Engine, mut pkt: Packet) -> Option<u32> {
    let (block, _) = e.filter_block("eth0", Handle(0x1_0000)).unwrap().unwrap();
    match classify(block, &mut pkt, &mut Cx::new(0)) {
        Verdict::Classified { classid, .. } => Some(classid & 0xffff),
        Verdict::Unclassified => None,
        v => panic!("unexpected verdict {v:?}"),
    }
}
