//! teql, LARTC's way of bonding lines (`sch_teql.c`): `tc qdisc add dev ethX root teql0` makes ethX a
//! slave of the master device `teql0`, and only what is routed out of teql0 while it is up goes round
//! robin over the slaves. Three ways it does less than its author meant: the master is never set up
//! (the lines stay apart, each slave's teql0 a plain FIFO for its own traffic); it has one slave (a
//! bond of one line); its slaves run at different rates (each packet goes to the next free line, so
//! consecutive packets take lines of unequal speed and arrive out of order).

use super::origins::Origins;
use super::{Finding, Options};
use tclab_core::qdisc::teql::MASTER;
use tclab_core::{Engine, Handle};

pub(super) fn check(engine: &Engine, origins: &Origins, opts: &Options, out: &mut Vec<Finding>) {
    let (Some(ring), Some(master)) = (engine.teql(), engine.device(MASTER)) else {
        return;
    };
    // The slaves in the order teql0 serves them, with the line that enslaved each.
    let slaves: Vec<(&str, Option<&str>)> = ring
        .slaves()
        .into_iter()
        .filter_map(|i| engine.device_by_ifindex(i))
        .map(|d| {
            let name = d.name.as_str();
            (name, origins.qdisc(name, d.root().handle, Handle::ROOT))
        })
        .collect();
    let Some(&(first, first_line)) = slaves.first() else {
        return;
    };
    let names = slaves.iter().map(|s| s.0).collect::<Vec<_>>().join(", ");
    let at = format!("{MASTER} (slaves {names})");
    if !master.up {
        out.push(
            Finding::new(
                "teql-down",
                at.clone(),
                format!(
                    "{names} {} of {MASTER}, but {MASTER} is never set up{}: nothing is routed \
                     through the master, so the lines are not bonded; each slave's teql0 qdisc is a \
                     plain FIFO of txqueuelen packets for what is routed out of that line alone",
                    if slaves.len() == 1 {
                        "is a slave"
                    } else {
                        "are slaves"
                    },
                    match origins.link_record(MASTER) {
                        Some(l) => format!(" (set down at {})", l.at),
                        None => String::new(),
                    }
                ),
                format!(
                    "bring it up after enslaving the lines, `ip link set dev {MASTER} up`, and route \
                     over it (`ip route add … dev {MASTER}`)"
                ),
            )
            .line(first_line),
        );
    }
    if slaves.len() == 1 {
        out.push(
            Finding::new(
                "teql-one-slave",
                at.clone(),
                format!(
                    "{MASTER} has one slave, {first}: it sends everything over that one line, bonding \
                     nothing, and adds its own queue in front of the line's"
                ),
                format!(
                    "enslave the other line too (`tc qdisc add dev ethY root {MASTER}`), or route over \
                     {first} without teql"
                ),
            )
            .line(first_line),
        );
        return;
    }
    // Each slave's line rate, where the caller gave one (`--link DEV=RATE`) or the device reports a
    // link speed (`link set … speed`).
    let rate = |dev: &str| {
        opts.device_rates
            .iter()
            .find(|(d, _)| d == dev)
            .map(|&(_, r)| r)
            .or_else(|| {
                engine
                    .device(dev)
                    .filter(|d| d.speed > 0)
                    .map(|d| u64::from(d.speed) * 125_000)
            })
    };
    let rated: Vec<(&str, u64, Option<&str>)> = slaves
        .iter()
        .filter_map(|&(n, l)| rate(n).map(|r| (n, r, l)))
        .collect();
    let (Some(slow), Some(fast)) = (
        rated.iter().min_by_key(|s| s.1),
        rated.iter().max_by_key(|s| s.1),
    ) else {
        return;
    };
    if slow.1 != fast.1 {
        out.push(
            Finding::new(
                "teql-unequal-slaves",
                at,
                format!(
                    "{MASTER}'s slaves run at different rates ({} {}, {} {}): {MASTER} hands each \
                     packet to the next free line, so consecutive packets of one flow take lines of \
                     unequal speed and arrive out of order, which TCP takes for loss",
                    fast.0,
                    crate::util::sprint_rate(fast.1),
                    slow.0,
                    crate::util::sprint_rate(slow.1),
                ),
                "bond only lines of the same rate (teql is for equal lines); spread flows over \
                 unequal ones by routing instead (a multipath route, or policy routing per flow)",
            )
            .line(slow.2),
        );
    }
}
