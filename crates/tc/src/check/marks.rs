//! What iptables does for the qdiscs: the classes CLASSIFY rules set, the marks MARK and CONNMARK rules
//! set and which of those rules a packet leaving a device can reach (`fw` filters on marks nothing sets
//! classify nothing); and HTB priorities that put interactive traffic behind the bulk.

use super::{DevCx, FilterAction, Finding};
use tclab_core::action::ActionParams;
use tclab_core::filter::Classifier;
use tclab_core::netfilter::{ConnmarkOp, Hook, IfaceMatch, Rule, Target};
use tclab_core::qdisc::{ClassInfo, ClassOptions};
use tclab_core::{Engine, Handle};

/// A way a packet's mark gets bits: `mark = (mark & !mask) ^ value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Setter {
    value: u32,
    mask: u32,
}

/// One rule of the mangle table and the chain it is in.
struct Placed<'a> {
    chain: String,
    rule: &'a Rule,
}

/// The mangle table's rules, seen once for every device.
pub(super) struct MarkSetters<'a> {
    /// CLASSIFY rules: the class they set, and the out-interface they are limited to (`-o`).
    classify: Vec<(u32, Option<IfaceMatch>)>,
    rules: Vec<Placed<'a>>,
    /// Mark values a connection's mark can hold (CONNMARK --set-mark, or any MARK a --save-mark
    /// copies), for a restore to put back on a packet.
    ct_values: Vec<Setter>,
}

impl<'a> MarkSetters<'a> {
    pub(super) fn of(engine: &'a Engine) -> MarkSetters<'a> {
        let rules: Vec<Placed> = rules(engine).collect();
        let classify = rules
            .iter()
            .filter_map(|p| match p.rule.target {
                Target::Classify(c) => Some((c, p.rule.ip.outiface.clone())),
                _ => None,
            })
            .collect();
        let saves = rules
            .iter()
            .any(|p| matches!(p.rule.target, Target::Connmark(ConnmarkOp::Save { .. })));
        let ct_values = rules
            .iter()
            .filter_map(|p| match p.rule.target {
                Target::Connmark(ConnmarkOp::Set { ctmark, ctmask }) => Some(Setter {
                    value: ctmark,
                    mask: ctmask,
                }),
                Target::Mark { mark, mask } if saves => Some(Setter { value: mark, mask }),
                _ => None,
            })
            .collect();
        MarkSetters {
            classify,
            rules,
            ct_values,
        }
    }

    /// Whether any CLASSIFY rule exists: the policy classifies with iptables.
    pub(super) fn any_classify(&self) -> bool {
        !self.classify.is_empty()
    }

    /// The classes CLASSIFY rules may give a packet leaving `dev`.
    pub(super) fn classify_targets<'b>(&'b self, dev: &'b str) -> impl Iterator<Item = u32> + 'b {
        self.classify
            .iter()
            .filter(move |(_, out)| out.as_ref().is_none_or(|o| o.matches(Some(dev))))
            .map(|&(c, _)| c)
    }

    /// Whether the policy sets marks at all (MARK or CONNMARK rules): if not, the marks its `fw`
    /// filters read come from elsewhere (nftables, an application's SO_MARK), and nothing is judged.
    fn sets_marks(&self, actions: &[FilterAction]) -> bool {
        self.rules
            .iter()
            .any(|p| matches!(p.rule.target, Target::Mark { .. } | Target::Connmark(_)))
            || actions.iter().any(|a| match &a.params {
                ActionParams::Skbedit(s) => s.mark.is_some(),
                ActionParams::Connmark(_) => true,
                _ => false,
            })
    }

    /// The chains a packet leaving `dev` passes through: the built-in chains on its way out
    /// (PREROUTING, FORWARD, OUTPUT, POSTROUTING) and the user chains their rules for `dev` jump to.
    fn reachable_chains(&self, dev: &str) -> Vec<String> {
        let mut reached: Vec<String> = [
            Hook::PreRouting,
            Hook::Forward,
            Hook::LocalOut,
            Hook::PostRouting,
        ]
        .iter()
        .map(|h| format!("{h:?}"))
        .collect();
        let mut i = 0;
        while i < reached.len() {
            let chain = reached[i].clone();
            for p in self.rules.iter().filter(|p| p.chain == chain) {
                if !applies(p.rule, dev) {
                    continue;
                }
                if let Target::Jump(c) | Target::Goto(c) = &p.rule.target {
                    if !reached.contains(c) {
                        reached.push(c.clone());
                    }
                }
            }
            i += 1;
        }
        reached
    }

    /// How a packet leaving `dev` can get mark bits from iptables: the MARK rules it reaches, and
    /// what a CONNMARK restore it reaches puts back.
    fn setters_for(&self, dev: &str) -> Vec<Setter> {
        let chains = self.reachable_chains(dev);
        let mut out = Vec::new();
        for p in self
            .rules
            .iter()
            .filter(|p| chains.contains(&p.chain) && applies(p.rule, dev))
        {
            match p.rule.target {
                Target::Mark { mark, mask } => out.push(Setter { value: mark, mask }),
                Target::Connmark(ConnmarkOp::Restore { .. }) => out.extend(&self.ct_values),
                _ => {}
            }
        }
        out
    }

    /// Where a rule that would set `want` is, when no reachable one does: its chain, and whether the
    /// chain is reached or the rule is limited to another device.
    fn unreached_setter(&self, dev: &str, want: impl Fn(&Setter) -> bool) -> Option<String> {
        let chains = self.reachable_chains(dev);
        self.rules.iter().find_map(|p| {
            let Target::Mark { mark, mask } = p.rule.target else {
                return None;
            };
            if !want(&Setter { value: mark, mask }) {
                return None;
            }
            Some(if !chains.contains(&p.chain) {
                format!(
                    "the MARK rule that sets it is in chain {}, which no rule for packets leaving {dev} \
                     jumps to",
                    p.chain
                )
            } else {
                format!(
                    "the MARK rule in chain {} is limited to {}",
                    p.chain,
                    p.rule
                        .ip
                        .outiface
                        .as_ref()
                        .map_or("another device".to_string(), |o| format!(
                            "`-o {}{}`",
                            if o.invert { "! " } else { "" },
                            o.name
                        ))
                )
            })
        })
    }
}

/// A rule limited to an out-interface applies to packets leaving `dev` only if it matches it.
fn applies(rule: &Rule, dev: &str) -> bool {
    rule.ip
        .outiface
        .as_ref()
        .is_none_or(|o| o.matches(Some(dev)))
}

/// Every rule of the mangle table, with its chain's name (`PreRouting`… for the built-in chains).
fn rules(engine: &Engine) -> impl Iterator<Item = Placed<'_>> {
    let t = &engine.netfilter().mangle;
    t.builtin
        .iter()
        .zip(Hook::ALL)
        .flat_map(|(b, h)| {
            b.chain.rules.iter().map(move |rule| Placed {
                chain: format!("{h:?}"),
                rule,
            })
        })
        .chain(t.user.iter().flat_map(|(n, c)| {
            c.rules.iter().map(move |rule| Placed {
                chain: n.clone(),
                rule,
            })
        }))
}

/// Whether a mark set by `s` can satisfy `fw`'s `(mark & mask) == id`: the bits `s` sets must agree
/// with `id` where the filter looks; bits it leaves alone may be anything.
fn can_match(s: &Setter, id: u32, mask: u32) -> bool {
    let both = s.mask & mask;
    s.value & both == id & both
}

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    unset_marks(cx, out);
    inverted_priorities(cx, out);
}

const ETH_P_IPV6: u16 = 0x86dd;

/// `fw` filters on marks nothing in the policy sets for packets on this device.
fn unset_marks(cx: &DevCx, out: &mut Vec<Finding>) {
    if !cx.marks.sets_marks(cx.actions) {
        return;
    }
    let ifb = cx.dev.kind == tclab_core::engine::DevKind::Ifb;
    // What marks packets can carry here. On an ifb fed from a device's ingress hook, iptables has not
    // run yet (PREROUTING comes after ingress): only the redirecting filter's own actions mark (tc's
    // `connmark` restores the connection's mark; `skbedit mark`). Elsewhere, iptables on the way out
    // and this device's own skbedit actions.
    let mut setters: Vec<Setter> = Vec::new();
    let redirects: Vec<&super::ifb::Redirect> = cx
        .redirects
        .iter()
        .filter(|r| r.mirred.dev == cx.name && r.mirred.is_redirect())
        .collect();
    let from_ingress = ifb && redirects.iter().all(|r| r.filter.parent.major() == 0xffff);
    if !from_ingress {
        setters.extend(cx.marks.setters_for(cx.name));
    }
    for a in cx.actions.iter().filter(|a| {
        a.dev == cx.name
            || redirects.iter().any(|r| {
                r.filter.dev == a.dev && r.filter.parent == a.parent && r.filter.pref == a.pref
            })
    }) {
        match &a.params {
            ActionParams::Skbedit(s) => {
                if let Some(m) = s.mark {
                    setters.push(Setter {
                        value: m,
                        mask: s.mask.unwrap_or(u32::MAX),
                    });
                }
            }
            ActionParams::Connmark(_) => setters.extend(&cx.marks.ct_values),
            _ => {}
        }
    }
    for q in &cx.qdiscs {
        let Some(b) = cx.dev.find(q.handle).and_then(|s| s.q.block(q.handle)) else {
            continue;
        };
        for chain in b.reachable_chains() {
            // tclab's netfilter is IPv4's: the marks ip6tables sets are not known, so a filter that
            // sees IPv6 packets alone is not judged (a dual-stack policy marks them by ip6tables).
            for tp in b
                .chains
                .get(&chain)
                .into_iter()
                .flatten()
                .filter(|tp| tp.protocol != ETH_P_IPV6)
            {
                let Classifier::Fw(head) = &tp.cls else {
                    continue;
                };
                let mask = head.mask.unwrap_or(u32::MAX);
                for f in head.filters() {
                    if setters.iter().any(|s| can_match(s, f.id, mask)) {
                        continue;
                    }
                    let elsewhere = cx
                        .marks
                        .unreached_setter(cx.name, |s| can_match(s, f.id, mask));
                    let why = match (&elsewhere, from_ingress) {
                        (_, true) => format!(
                            "packets reach {} from an ingress hook, before iptables' PREROUTING marks \
                             them, and the redirecting filter restores no mark (`action connmark`)",
                            cx.name
                        ),
                        (Some(w), false) => w.clone(),
                        (None, false) => "no MARK or CONNMARK rule of the policy sets it".to_string(),
                    };
                    let record = cx.origins.filter(cx.name, q.handle, Some(tp.prio));
                    out.push(
                        Finding::new(
                            "mark-unset",
                            format!("{} filter parent {} pref {} fw", cx.name, q.handle, tp.prio),
                            format!(
                                "reads mark {:#x}{} for class {}, which nothing sets on packets leaving \
                                 {}: {why}. The filter never matches, and that traffic goes where \
                                 unclassified traffic goes",
                                f.id,
                                if mask == u32::MAX {
                                    String::new()
                                } else {
                                    format!("/{mask:#x}")
                                },
                                f.classid.map_or("?".to_string(), |c| Handle(c).to_string()),
                                cx.name
                            ),
                            if from_ingress {
                                "restore the connection's mark on the redirect (`action connmark \
                                 action mirred egress redirect dev …`), saving it with `-j CONNMARK \
                                 --save-mark` where iptables marks"
                                    .to_string()
                            } else {
                                format!(
                                    "jump to the marking chain from a chain packets leaving {} pass \
                                     (`iptables -t mangle -A POSTROUTING -o {} -j CHAIN`), or fix the \
                                     rule's `-o`",
                                    cx.name, cx.name
                                )
                            },
                        )
                        .line(record.map(|r| r.at.as_str())),
                    );
                }
            }
        }
    }
}

/// Ports, protocols and TOS values that mark interactive traffic: ICMP, DNS, SSH, NTP, SIP, STUN,
/// TOS "minimize delay" and DSCP EF.
fn interactive_key(k: &tclab_core::filter::u32::Key) -> Option<&'static str> {
    const PORTS: &[(u32, &str)] = &[
        (22, "SSH"),
        (53, "DNS"),
        (123, "NTP"),
        (3478, "STUN"),
        (5060, "SIP"),
    ];
    if k.offmask != 0 {
        return None;
    }
    let byte = |shift: u32| (k.val >> shift) & 0xff;
    match (k.off, k.mask) {
        (8, 0x00ff_0000) if byte(16) == 1 => Some("ICMP"),
        (0, 0x00ff_0000) | (0, 0x00fc_0000) if byte(16) & 0xfc == 0x10 => {
            Some("TOS minimize-delay")
        }
        (0, 0x00ff_0000) | (0, 0x00fc_0000) if byte(16) & 0xfc == 0xb8 => Some("DSCP EF"),
        (20, 0x0000_ffff) => PORTS.iter().find(|p| p.0 == k.val & 0xffff).map(|p| p.1),
        (20, 0xffff_0000) => PORTS.iter().find(|p| p.0 == k.val >> 16).map(|p| p.1),
        _ => None,
    }
}

/// HTB serves the classes that borrow in order of `prio` (lower first): a class meant for interactive
/// traffic — the filters give it ICMP, DNS, SSH, VoIP's SIP, TOS 0x10 or DSCP EF, and its rate is at
/// most half a bulk sibling's (the default, or one no interactive filter picks) — with a worse prio than
/// that sibling gets the spare bandwidth only after the bulk has taken what it wants: when it needs
/// more than its rate, its packets wait.
fn inverted_priorities(cx: &DevCx, out: &mut Vec<Finding>) {
    for q in cx.qdiscs.iter().filter(|q| q.kind == "htb") {
        let Some(b) = cx.dev.find(q.handle).and_then(|s| s.q.block(q.handle)) else {
            continue;
        };
        // Each class the qdisc's filters pick with an interactive match, and what it is.
        let mut interactive: Vec<(Handle, &'static str, u32)> = Vec::new();
        for chain in b.reachable_chains() {
            for tp in b.chains.get(&chain).into_iter().flatten() {
                for n in b.u32_nodes(tp) {
                    let (Some(c), Some(what)) =
                        (n.classid, n.sel.keys.iter().find_map(interactive_key))
                    else {
                        continue;
                    };
                    if !interactive.iter().any(|x| x.0 == Handle(c)) {
                        interactive.push((Handle(c), what, tp.prio));
                    }
                }
            }
        }
        let defcls = match &q.options {
            tclab_core::qdisc::QdiscOptions::Htb(h) => h.defcls,
            _ => 0,
        };
        let prio_of = |c: &ClassInfo| match &c.options {
            Some(ClassOptions::Htb(o)) if o.level == 0 => Some(o.prio),
            _ => None,
        };
        let rate_of = |c: &ClassInfo| match &c.options {
            Some(ClassOptions::Htb(o)) => o.rate.rate,
            _ => 0,
        };
        for &(id, what, pref) in &interactive {
            let Some(c) = cx.class(id) else {
                continue;
            };
            let Some(p) = prio_of(c) else {
                continue;
            };
            let bulk = cx.classes_of(c.classid.major()).find(|k| {
                k.parent == c.parent
                    && k.classid != id
                    && !interactive.iter().any(|x| x.0 == k.classid)
                    && (k.classid == Handle(q.handle.0 | defcls) || defcls == 0)
                    && prio_of(k).is_some_and(|kp| kp < p)
                    // Meant for interactive traffic: a small class beside the bulk. (sqm's simple.qos
                    // sends ICMP to its equal-rate background tier on purpose.)
                    && rate_of(c) <= rate_of(k) / 2
            });
            let Some(bulk) = bulk else {
                continue;
            };
            let bp = prio_of(bulk).unwrap_or(0);
            let record = cx.origins.filter(cx.name, q.handle, Some(pref));
            out.push(
                Finding::new(
                    "prio-inverted",
                    format!("{} class htb {id}", cx.name),
                    format!(
                        "takes {what} traffic (filter {}) but has prio {p}, worse than the bulk class \
                         {}'s prio {bp}: when both want more than their rates, HTB lends the spare \
                         bandwidth to the bulk first, and the interactive packets wait",
                        record.map_or("pref ?".to_string(), |r| r.at.clone()),
                        bulk.classid
                    ),
                    if bp > 0 {
                        format!(
                            "give {id} a lower prio number than {} (`prio {}` or less)",
                            bulk.classid,
                            bp - 1
                        )
                    } else {
                        format!("give {id} `prio 0` and {} `prio 1` or more", bulk.classid)
                    },
                )
                .line(cx.class_line(id)),
            );
        }
    }
}
