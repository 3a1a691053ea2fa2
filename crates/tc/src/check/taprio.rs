//! taprio's schedule: a traffic class that priorities map to but whose gate no entry opens (its
//! packets are never sent), one whose longest opening no full-size frame fits at the link speed, and
//! entries a `cycle-time` shorter than their sum cuts or never reaches.

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
        short(cx, t, &m, &at, line, out);
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

/// A class whose longest opening is no longer than a full frame at the link speed: software taprio
/// sends a frame only if it ends before its class's gate closes (`taprio_entry_allows_tx`), timing it
/// at the device's link speed (`taprio_set_picos_per_byte`: ethtool's, 10 Mbit/s when the device
/// reports none, as veth and dummy devices do). Not in txtime-assist mode, which gates by launch
/// times instead.
fn short(
    cx: &DevCx,
    t: &tclab_core::qdisc::taprio::TaprioOptions,
    m: &tclab_core::qdisc::mqprio::MqprioOptions,
    at: &str,
    line: Option<&str>,
    out: &mut Vec<Finding>,
) {
    if t.flags.is_some_and(|f| f & 1 != 0) {
        return;
    }
    let known = cx.dev.speed != 0 && cx.dev.speed != u32::MAX;
    let mbit = u64::from(if known { cx.dev.speed } else { 10 });
    for tc in 0..u32::from(m.num_tc) {
        let prios: Vec<String> = (0..16)
            .filter(|&p| u32::from(m.map[p]) == tc)
            .map(|p| p.to_string())
            .collect();
        let longest = t.longest_open_ns(tc);
        // A full frame (the MTU and the Ethernet header), or the class's max-sdu's if smaller.
        let sdu = t.max_sdu.get(tc as usize).copied().unwrap_or(0);
        let frame = match sdu {
            0 => u64::from(cx.mtu),
            s => u64::from(cx.mtu).min(u64::from(s) + 14),
        };
        let frame_ns = frame * 8000 / mbit;
        if prios.is_empty() || longest == 0 || longest > frame_ns {
            continue;
        }
        // The largest frame that ends before the gate closes: (longest − 1 ns) at the speed.
        let fits = (longest - 1) * mbit / 8000;
        out.push(
            Finding::new(
                "taprio-gate-short",
                at.to_string(),
                format!(
                    "traffic class {tc} (priorities {}): its longest opening, {longest} ns, is no \
                     longer than a {frame}-byte frame at {mbit} Mbit/s ({frame_ns} ns; {}), and a \
                     frame leaves only if it ends before the gate closes: no full-size frame is \
                     ever sent, only frames of up to {fits} bytes",
                    prios.join(" "),
                    if known {
                        "the device's link speed"
                    } else {
                        "the device reports no link speed, so taprio assumes 10 Mbit/s"
                    }
                ),
                format!(
                    "open the class's gate for more than {frame_ns} ns at a time, or give the \
                     device its real speed first (`ethtool -s {} speed N`) if it is faster",
                    cx.name
                ),
            )
            .line(line),
        );
    }
}
