//! taprio's schedule: a traffic class that priorities map to but whose gate no entry opens (its
//! packets are never sent), and entries a `cycle-time` shorter than their sum cuts or never reaches.

use super::{DevCx, Finding};
use tclab_core::qdisc::QdiscOptions;

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in &cx.qdiscs {
        let QdiscOptions::Taprio(t) = &q.options else {
            continue;
        };
        let Some(m) = t.mqprio else { continue };
        let at = cx.qdisc_at(q);
        let line = cx.qdisc_line(q);
        // The entries as the cycle runs them: those starting at or past its end never do.
        let mut start = 0i64;
        let mut opened = 0u32;
        let mut cut = Vec::new();
        for (i, e) in t.entries.iter().enumerate() {
            if start < t.cycle_time {
                opened |= e.gate_mask;
            }
            if start + i64::from(e.interval) > t.cycle_time {
                cut.push(i);
            }
            start += i64::from(e.interval);
        }
        for tc in 0..m.num_tc {
            let prios: Vec<String> = (0..16)
                .filter(|&p| m.map[p] == tc)
                .map(|p| p.to_string())
                .collect();
            if opened & (1 << tc) != 0 || prios.is_empty() {
                continue;
            }
            out.push(
                Finding::new(
                    "taprio-gate-closed",
                    at.clone(),
                    format!(
                        "traffic class {tc} (priorities {}) is open in no entry of the schedule: its \
                         packets wait in its queues for ever, then are dropped",
                        prios.join(" ")
                    ),
                    format!(
                        "give the class a window: a `sched-entry S` whose gate mask has bit {tc} \
                         ({:#x}), or map those priorities to a class that has one",
                        1u32 << tc
                    ),
                )
                .line(line),
            );
        }
        if !cut.is_empty() {
            let sum: i64 = t.entries.iter().map(|e| i64::from(e.interval)).sum();
            let which: Vec<String> = cut.iter().map(|i| i.to_string()).collect();
            out.push(
                Finding::new(
                    "taprio-cycle-cut",
                    at,
                    format!(
                        "the entries' intervals add up to {sum} ns, more than the cycle-time {} ns: \
                         entry {} is cut at the cycle's end or never runs",
                        t.cycle_time,
                        which.join(", ")
                    ),
                    format!(
                        "make cycle-time the sum of the intervals ({sum}), or leave it out: taprio \
                         then takes the sum"
                    ),
                )
                .line(line),
            );
        }
    }
}
