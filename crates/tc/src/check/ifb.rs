//! Ingress through an ifb, sqm's way of shaping a download: a filter at a device's ingress hook
//! redirects every packet to an ifb device (`action mirred egress redirect dev ifb0`), whose root qdisc
//! shapes it. Four ways it silently fails: the ifb is down (the kernel's mirred drops what it cannot
//! send: "tc mirred to Houston: device ifb0 is down"); the shaper is on an ifb nothing redirects to;
//! it is on another ifb than the redirect's (or the filter mirrors a copy instead of redirecting); the
//! filter matches one protocol only (`protocol ip`), so the other family bypasses the shaper.

use super::origins::Origins;
use super::{FilterAction, Finding};
use tclab_core::action::mirred::Mirred;
use tclab_core::action::ActionParams;
use tclab_core::engine::DevKind;
use tclab_core::filter::ETH_P_ALL;
use tclab_core::{Engine, Handle};

/// One filter that sends packets to another device.
pub(super) struct Redirect {
    pub filter: FilterAction,
    pub mirred: Mirred,
}

impl Redirect {
    fn filter_at(&self) -> String {
        self.filter.at()
    }

    fn line<'a>(&self, origins: &'a Origins) -> Option<&'a str> {
        self.filter.line(origins)
    }
}

/// Every reachable filter that redirects or mirrors to a device.
pub(super) fn redirects(actions: &[FilterAction]) -> Vec<Redirect> {
    actions
        .iter()
        .filter_map(|a| match &a.params {
            ActionParams::Mirred(m) => Some(Redirect {
                filter: a.clone(),
                mirred: m.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The protocols that reach ifb `dev` by redirect (`ETH_P_ALL` for every one); empty if none.
pub(super) fn fed_protocols(redirects: &[Redirect], dev: &str) -> Vec<u16> {
    let mut p: Vec<u16> = redirects
        .iter()
        .filter(|r| r.mirred.dev == dev && r.mirred.is_redirect())
        .map(|r| r.filter.protocol)
        .collect();
    p.sort_unstable();
    p.dedup();
    p
}

fn protocol_name(p: u16) -> String {
    match p {
        0x0800 => "ip".into(),
        0x86dd => "ipv6".into(),
        0x0806 => "arp".into(),
        0x8100 => "802.1q".into(),
        ETH_P_ALL => "all".into(),
        _ => format!("0x{p:04x}"),
    }
}

pub(super) fn check(
    engine: &Engine,
    origins: &Origins,
    redirects: &[Redirect],
    out: &mut Vec<Finding>,
) {
    let shapes = |name: &str| {
        engine
            .device(name)
            .is_some_and(|d| d.root().handle != Handle::UNSPEC)
    };
    // Redirects to a device that is down: every packet they take is dropped.
    let mut reported: Vec<(&str, &str)> = Vec::new();
    for r in redirects.iter().filter(|r| r.mirred.is_redirect()) {
        let Some(target) = engine.device(&r.mirred.dev) else {
            continue;
        };
        if target.up || reported.contains(&(r.filter.dev.as_str(), r.mirred.dev.as_str())) {
            continue;
        }
        reported.push((&r.filter.dev, &r.mirred.dev));
        let dev = &r.mirred.dev;
        out.push(
            Finding::new(
                "ifb-down",
                r.filter_at(),
                format!(
                    "redirects {} packets to {dev}, which is down{}: mirred drops every packet it cannot \
                     send, so nothing it takes arrives",
                    protocol_name(r.filter.protocol),
                    match origins.link_record(dev) {
                        Some(l) if l.entry.get(1).is_some_and(|c| c == "add") => {
                            format!(" (made at {}, never set up)", l.at)
                        }
                        Some(l) => format!(" (set down at {})", l.at),
                        None => String::new(),
                    }
                ),
                format!("bring it up before the redirect: `ip link set dev {dev} up`"),
            )
            .line(r.line(origins)),
        );
    }
    // An ifb with a shaper that no redirect feeds.
    for (name, dev) in engine.devices() {
        if dev.kind != DevKind::Ifb || !shapes(name) {
            continue;
        }
        if redirects
            .iter()
            .any(|r| r.mirred.dev == name && r.mirred.is_redirect())
        {
            continue;
        }
        let root = dev.root();
        let elsewhere: Vec<&Redirect> = redirects
            .iter()
            .filter(|r| r.mirred.is_redirect() && r.mirred.dev != name)
            .filter(|r| {
                engine
                    .device(&r.mirred.dev)
                    .is_some_and(|d| d.kind == DevKind::Ifb && !shapes(&r.mirred.dev))
            })
            .collect();
        let mirrors: Vec<&Redirect> = redirects
            .iter()
            .filter(|r| !r.mirred.is_redirect() && r.mirred.dev == name)
            .collect();
        let why = if let Some(r) = elsewhere.first() {
            format!(
                ": {} ({}) redirects to {} instead, which has no qdisc of its own, so what it takes \
                 passes unshaped",
                r.filter_at(),
                r.line(origins).unwrap_or("?"),
                r.mirred.dev
            )
        } else if let Some(r) = mirrors.first() {
            format!(
                ": {} ({}) only mirrors copies to it; the packets themselves pass unshaped",
                r.filter_at(),
                r.line(origins).unwrap_or("?")
            )
        } else {
            ": the traffic it should shape passes unshaped".to_string()
        };
        let fix = if let Some(r) = elsewhere.first() {
            format!(
                "redirect to {name} (`action mirred egress redirect dev {name}`), or move the shaper \
                 to {}",
                r.mirred.dev
            )
        } else if !mirrors.is_empty() {
            format!("`action mirred egress redirect dev {name}`, not `mirror`")
        } else {
            format!(
                "redirect the device's ingress to it: `tc qdisc add dev eth0 handle ffff: ingress; tc \
                 filter add dev eth0 parent ffff: protocol all matchall action mirred egress redirect \
                 dev {name}`"
            )
        };
        out.push(
            Finding::new(
                "ifb-unfed",
                format!("{name} qdisc {} {}", root.q.kind(), root.handle),
                format!("{name} has a shaper but no filter redirects packets to it{why}"),
                fix,
            )
            .line(origins.qdisc(name, root.handle, Handle::ROOT)),
        );
    }
    // Redirects of one protocol only to a shaping ifb: the other family bypasses it.
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in redirects.iter().filter(|r| r.mirred.is_redirect()) {
        let pair = (r.filter.dev.as_str(), r.mirred.dev.as_str());
        if pairs.contains(&pair) {
            continue;
        }
        pairs.push(pair);
        let same: Vec<&Redirect> = redirects
            .iter()
            .filter(|x| {
                x.mirred.is_redirect() && (x.filter.dev.as_str(), x.mirred.dev.as_str()) == pair
            })
            .collect();
        let protocols: Vec<u16> = same.iter().map(|x| x.filter.protocol).collect();
        let ip4 = protocols.iter().any(|&p| p == ETH_P_ALL || p == 0x0800);
        let ip6 = protocols.iter().any(|&p| p == ETH_P_ALL || p == 0x86dd);
        if ip4 == ip6 || !shapes(&r.mirred.dev) {
            continue;
        }
        let (has, lacks) = if ip4 {
            ("ip", "IPv6")
        } else {
            ("ipv6", "IPv4")
        };
        out.push(
            Finding::new(
                "redirect-one-protocol",
                r.filter_at(),
                format!(
                    "redirects only `protocol {has}` packets to {}: {lacks} packets arriving on {} skip \
                     its shaper and come in at the line's full rate",
                    r.mirred.dev, r.filter.dev
                ),
                format!(
                    "match every protocol: `tc filter add dev {} parent ffff: protocol all …` (sqm-scripts' \
                     way), or add the same filter for `protocol {}`",
                    r.filter.dev,
                    if ip4 { "ipv6" } else { "ip" }
                ),
            )
            .line(r.line(origins)),
        );
    }
}
