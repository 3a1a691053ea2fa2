//! Filters that never match because an earlier one takes every packet they would: `tcf_classify` tries
//! a chain's instances in pref order and stops at the first that answers, and `u32_classify` tries a
//! table's nodes in handle order. A catch-all (`u32 match u32 0 0`, `matchall`) at pref 1 leaves every
//! later filter of its protocol idle; `match ip dst 10.0.0.0/8` before `match ip dst 10.0.1.5/32` takes
//! the host's packets into the /8's class. Scripts meet it when a "default" filter is written first,
//! or when generated filters all get one pref and the broad one's node comes first.
//!
//! Said only where it is sure: the earlier u32 node is terminal (a `flowid` or actions, every answer
//! of which ends the classification: [`ends_classification`]), links nowhere, reads no mark or input device, and each of its keys is implied by
//! a key of the later node at the same offset (the same header bytes, fixed to the same value); the
//! nodes read in the root tables, where every key's offset is the one written (no `offset`/`eat`
//! from a link), and no node before the earlier one links anywhere or reads further into the packet
//! than the later one (`u32_classify` gives up on the whole instance at a read past the packet's end)
//! or than the header every packet of its protocol has (an IPv4 one's 20 bytes: `match ip dst
//! 0.0.0.0/0`, read at offset 16, takes every packet `match ip protocol 1 0xff` would).

use super::{DevCx, Finding};
use std::collections::BTreeMap;
use tclab_core::action::gact::ProbType;
use tclab_core::action::{
    ext_is, ActionParams, ACT_FLAG_SKIP_SW, TC_ACT_GOTO_CHAIN, TC_ACT_JUMP, TC_ACT_PIPE,
    TC_ACT_RECLASSIFY, TC_ACT_REPEAT,
};
use tclab_core::filter::flower::{ETH_P_ARP, ETH_P_IPV6};
use tclab_core::filter::u32::{self as cu32, Hnode, Knode, TC_U32_TERMINAL};
use tclab_core::filter::{Block, Classifier, Exts, Tp, CLS_FLAGS_SKIP_SW, ETH_P_ALL};
use tclab_core::Handle;

/// Bytes of network header every packet worth classifying has (an IPv4 header's 20; ARP's are 28,
/// IPv6's 40): a catch-all whose keys read no further takes every such packet.
const ANY_PACKET: i64 = 20;

/// Bytes of network header every packet of `protocol` reaching a filter has: `ip_rcv` drops an IPv4
/// packet shorter than its 20-byte header (`ipv6_rcv` likewise below 40) before it is forwarded, and
/// the stack builds its own with the whole header, so a key in those bytes is always read. Any other
/// protocol: [`ANY_PACKET`].
fn header_bytes(protocol: u16) -> i64 {
    match protocol {
        ETH_P_IPV6 => 40,
        ETH_P_ARP => 28,
        _ => ANY_PACKET,
    }
}

pub(super) fn check(cx: &DevCx, out: &mut Vec<Finding>) {
    walk(cx, |f, _| out.push(f));
}

/// Each shadowed filter's finding with the classes it names: every filter of an instance shadowed
/// whole, a u32 node's own. Several nodes can share a class, so each is counted.
pub(super) fn named_classes(cx: &DevCx) -> Vec<(Finding, Vec<u32>)> {
    let mut out = Vec::new();
    walk(cx, |f, named| out.push((f, named)));
    out
}

fn walk(cx: &DevCx, mut found: impl FnMut(Finding, Vec<u32>)) {
    let mut seen: Vec<*const Block> = Vec::new();
    for &(parent, b) in &cx.blocks {
        if seen.contains(&std::ptr::from_ref(b)) {
            continue;
        }
        seen.push(b);
        let tables: BTreeMap<u32, &Hnode> =
            b.u32_common.hts.iter().map(|h| (h.handle, h)).collect();
        for tps in b.chains.values() {
            // Each instance's root nodes and what of them can take packets, read once: a policy has up
            // to 2 047 u32 instances on a block, and one of them may hold 10 000 nodes.
            let roots: Vec<Vec<&Knode>> = tps.iter().map(|tp| root_nodes(&tables, tp)).collect();
            let index: Vec<Takers> = roots.iter().map(|r| Takers::of(r)).collect();
            for (i, tp) in tps.iter().enumerate() {
                let earlier = || {
                    tps[..i]
                        .iter()
                        .zip(&index)
                        .zip(&roots)
                        .filter(|((a, _), _)| covers_protocol(a, tp))
                };
                if let Classifier::U32(_) = tp.cls {
                    let nodes = &roots[i];
                    let mut mine = Takers::default();
                    for (j, &n) in nodes.iter().enumerate() {
                        // A node behind a link may see its offsets moved (`off2` is not reset).
                        if j > 0 && nodes[j - 1].link.is_some() {
                            break;
                        }
                        let by = earlier()
                            .find_map(|((a, t), r)| takes(a, t, r, tp, Some(n)).map(|m| (a, m)))
                            .or_else(|| {
                                let floor = header_bytes(tp.protocol);
                                mine.first(nodes, Some(n), floor)
                                    .map(|m| (tp, Taker::U32(m)))
                            });
                        if let Some((a, m)) = by {
                            let named = n.classid.into_iter().collect();
                            found(finding(cx, parent, tp, Some(n), a, m), named);
                        }
                        mine.add(j, n);
                    }
                } else if let Some((a, m)) =
                    earlier().find_map(|((a, t), r)| takes(a, t, r, tp, None).map(|m| (a, m)))
                {
                    let named = b
                        .tp_filters(tp)
                        .into_iter()
                        .filter_map(|(c, _)| c)
                        .collect();
                    found(finding(cx, parent, tp, None, a, m), named);
                }
            }
        }
    }
}

/// The earlier instance `a` sees every packet `b` would: the same protocol, or all.
fn covers_protocol(a: &Tp, b: &Tp) -> bool {
    a.protocol == ETH_P_ALL || a.protocol == b.protocol
}

/// The nodes of a u32 instance's root table, in the order `u32_classify` tries them.
fn root_nodes<'a>(tables: &BTreeMap<u32, &'a Hnode>, tp: &Tp) -> Vec<&'a Knode> {
    let Classifier::U32(u) = &tp.cls else {
        return Vec::new();
    };
    tables
        .get(&u.root)
        .and_then(|h| h.buckets.first())
        .map(|b| b.iter().map(|n| &**n).collect())
        .unwrap_or_default()
}

/// What of instance `a` takes every packet u32 node `n` of instance `b` matches (`None`: every
/// packet `b` sees): a matchall filter, or a node of `a`'s root table (`roots`, indexed by `t`) whose
/// keys `n`'s imply (for every packet, keys all masked out), every node tried before it letting such
/// a packet by.
fn takes<'a>(
    a: &'a Tp,
    t: &Takers,
    roots: &[&'a Knode],
    b: &Tp,
    n: Option<&Knode>,
) -> Option<Taker<'a>> {
    match &a.cls {
        Classifier::Matchall(m) => m
            .filter
            .as_ref()
            .filter(|f| f.flags & CLS_FLAGS_SKIP_SW == 0 && ends_classification(&f.exts))
            .map(|f| Taker::Matchall(f.classid, &f.exts)),
        Classifier::U32(_) => t.first(roots, n, header_bytes(b.protocol)).map(Taker::U32),
        _ => None,
    }
}

/// The nodes of one root table that could take packets, by the bits their keys test: for each
/// signature (the keys' offsets and masks) the first node of each value. A node that links somewhere
/// ends the list (what follows may see other offsets), and the furthest any node up to each one
/// reads is kept (`u32_classify` gives up on the whole instance at a read past the packet's end).
/// The offsets and masks of a node's keys that test bits, in order.
type Signature = Vec<(i32, u32)>;

#[derive(Default)]
struct Takers {
    sigs: Vec<(Signature, BTreeMap<Vec<u32>, usize>)>,
    reads: Vec<i64>,
    ended: bool,
}

impl Takers {
    fn of(nodes: &[&Knode]) -> Takers {
        let mut t = Takers::default();
        for (j, &n) in nodes.iter().enumerate() {
            t.add(j, n);
        }
        t
    }

    /// Node `n`, the `j`th of its table (added in order).
    fn add(&mut self, j: usize, n: &Knode) {
        if self.ended {
            return;
        }
        if n.link.is_some() || n.sel.keys.iter().any(|k| k.off < 0) {
            self.ended = true;
            return;
        }
        let before = self.reads.last().copied().unwrap_or(0);
        self.reads.push(before.max(reads(n)));
        if !classifies_all(n) {
            return;
        }
        let mut keys: Vec<(i32, u32, u32)> = n
            .sel
            .keys
            .iter()
            .filter(|k| k.mask != 0)
            .map(|k| (k.off, k.mask, k.val & k.mask))
            .collect();
        keys.sort_unstable();
        let sig: Signature = keys.iter().map(|&(o, m, _)| (o, m)).collect();
        let vals: Vec<u32> = keys.iter().map(|&(_, _, v)| v).collect();
        let at = match self.sigs.iter().position(|(s, _)| *s == sig) {
            Some(i) => i,
            None => {
                self.sigs.push((sig, BTreeMap::new()));
                self.sigs.len() - 1
            }
        };
        self.sigs[at].1.entry(vals).or_insert(j);
    }

    /// The first node that takes every packet `n` matches (`None`: every packet) among packets of
    /// at least `floor` bytes of network header: one whose every key `n` implies — a key of `n` at
    /// the same offset with those mask bits, fixed to the same value — with no node up to it
    /// reading further than `n` or `floor` (a read past the end fails the whole instance).
    fn first<'a>(&self, nodes: &[&'a Knode], n: Option<&Knode>, floor: i64) -> Option<&'a Knode> {
        let need = n.map_or(0, reads).max(floor);
        let i = self
            .sigs
            .iter()
            .filter_map(|(sig, by_vals)| {
                let vals: Option<Vec<u32>> = sig
                    .iter()
                    .map(|&(off, mask)| {
                        let nk = n?
                            .sel
                            .keys
                            .iter()
                            .find(|k| k.off == off && k.mask & mask == mask)?;
                        Some(nk.val & mask)
                    })
                    .collect();
                by_vals.get(&vals?).copied()
            })
            .min()?;
        (self.reads[i] <= need).then(|| nodes[i])
    }
}

/// What of an earlier instance takes the packets: a u32 node, or a matchall filter.
enum Taker<'a> {
    U32(&'a Knode),
    Matchall(Option<u32>, &'a Exts),
}

impl Taker<'_> {
    fn classid(&self) -> Option<u32> {
        match self {
            Taker::U32(m) => m.classid,
            Taker::Matchall(c, _) => *c,
        }
    }

    fn exts(&self) -> &Exts {
        match self {
            Taker::U32(m) => &m.exts,
            Taker::Matchall(_, e) => e,
        }
    }
}

/// A node that, once its keys hold, answers for the packet: terminal, actions that end the
/// classification ([`ends_classification`]), no mark, input device or skip_sw.
fn classifies_all(m: &Knode) -> bool {
    m.sel.flags & TC_U32_TERMINAL != 0
        && ends_classification(&m.exts)
        && m.mark.is_none()
        && m.indev.is_none()
        && m.flags & CLS_FLAGS_SKIP_SW == 0
}

/// Whether a filter whose keys hold answers for the packet, whatever its actions do to it: every
/// answer its action list can give ends `tcf_classify`'s walk. `tcf_action_exec` runs the actions in
/// order, `pipe` going on to the next, and answers the first other code (the last action's `pipe`
/// when all pipe; `ok` for none); `tcf_classify` returns any answer >= 0 (`ok`, `shot`, `stolen`,
/// `queued`, `redirect`, `trap`, a trailing `pipe`: the packet is taken, to the filter's class or
/// away) and jumps to another chain on `goto chain`, but tries the next filter on `continue`
/// (`TC_ACT_UNSPEC`, negative) and starts the walk again on `reclassify`. An action's possible
/// answers are its control code, gact's random one, police's conform and exceed codes; the `shot`
/// most kinds answer on an error ends it too. A bpf action's program may answer anything, and a
/// `jump` or `repeat` is not followed: not said to end it.
fn ends_classification(exts: &Exts) -> bool {
    for a in &exts.actions {
        let a = a.borrow();
        if a.flags & ACT_FLAG_SKIP_SW != 0 {
            continue;
        }
        let answers = match &a.params {
            ActionParams::Gact(g) => match &g.prob {
                Some(p) if p.ptype != ProbType::None => vec![g.action, p.action],
                _ => vec![g.action],
            },
            ActionParams::Police(p) => vec![p.action, p.result],
            ActionParams::Bpf(_) => return false,
            ActionParams::Mirred(m) => vec![m.action],
            ActionParams::Skbedit(x) => vec![x.action],
            ActionParams::Connmark(x) => vec![x.action],
            ActionParams::Nat(x) => vec![x.action],
            ActionParams::Csum(x) => vec![x.action],
            ActionParams::Pedit(x) => vec![x.action],
            ActionParams::Simple(x) => vec![x.action],
            ActionParams::Skbmod(x) => vec![x.action],
            ActionParams::Vlan(x) => vec![x.action],
            ActionParams::Mpls(x) => vec![x.action],
            ActionParams::TunnelKey(x) => vec![x.action],
            ActionParams::Sample(x) => vec![x.action],
            ActionParams::Gate(x) => vec![x.action],
            ActionParams::Ctinfo(x) => vec![x.action],
            ActionParams::Ife(x) => vec![x.action],
            ActionParams::Ct(x) => vec![x.action],
        };
        for c in &answers {
            let ends = *c == TC_ACT_PIPE
                || ext_is(*c, TC_ACT_GOTO_CHAIN)
                || (*c >= 0
                    && ![TC_ACT_RECLASSIFY, TC_ACT_REPEAT].contains(c)
                    && !ext_is(*c, TC_ACT_JUMP));
            if !ends {
                return false;
            }
        }
        if !answers.contains(&TC_ACT_PIPE) {
            break;
        }
    }
    true
}

/// How far into the packet a node's keys read (`u32_classify` fetches a word for every key, masked
/// out or not).
fn reads(n: &Knode) -> i64 {
    n.sel
        .keys
        .iter()
        .map(|k| i64::from(k.off) + 4)
        .max()
        .unwrap_or(0)
}

fn finding(cx: &DevCx, parent: Handle, tp: &Tp, n: Option<&Knode>, a: &Tp, m: Taker) -> Finding {
    // As tc prints a node's handle: `800::801`, the bucket left out when it is 0.
    let fh = |n: &Knode| {
        let (ht, bucket) = (cu32::user_htid(n.handle), cu32::hash(n.handle));
        let bucket = if bucket == 0 {
            String::new()
        } else {
            format!("{bucket:x}")
        };
        format!("{ht:x}:{bucket}:{:x}", cu32::node(n.handle))
    };
    let at = match n {
        Some(n) => format!(
            "{} filter parent {parent} pref {} u32 fh {}",
            cx.name,
            tp.prio,
            fh(n)
        ),
        None => format!(
            "{} filter parent {parent} pref {} {}",
            cx.name,
            tp.prio,
            tp.cls.kind()
        ),
    };
    let same = std::ptr::eq(a, tp);
    let by = match &m {
        Taker::U32(m) if same => format!("node {} before it at the same pref", fh(m)),
        Taker::U32(m) => format!("u32 filter at pref {} (fh {})", a.prio, fh(m)),
        Taker::Matchall(..) => format!("matchall filter at pref {}", a.prio),
    };
    let by_line = if same {
        None
    } else {
        line(cx, parent, a, m.classid())
    };
    let by = match by_line {
        Some(l) => format!("{by}, {l}"),
        None => by,
    };
    let to = match m.classid() {
        Some(c) => format!("class {}", Handle(c)),
        None => "no class (the qdisc's default)".to_string(),
    };
    let actions: Vec<&str> = m.exts().actions.iter().map(|a| a.borrow().kind()).collect();
    let to = if actions.is_empty() {
        format!("which sends it to {to}")
    } else {
        format!(
            "which ends its classification with its actions ({}) and {to}",
            actions.join(", ")
        )
    };
    let own = n
        .and_then(|n| n.classid)
        .filter(|&c| Some(c) != m.classid());
    let lost = own
        .map(|c| format!(": class {} gets nothing through it", Handle(c)))
        .unwrap_or_default();
    let what = if n.is_some_and(|n| n.sel.keys.iter().all(|k| k.mask == 0)) || n.is_none() {
        "every packet it would see"
    } else {
        "every packet it matches"
    };
    let fix = if same {
        "tc tries the nodes of one pref in the order of their handles: add the narrower filter before \
         the broader one, or give it a smaller pref of its own"
            .to_string()
    } else {
        format!(
            "give this filter a smaller pref than {} (tc tries filters lowest pref first, and the first \
             that matches decides), or narrow the filter at pref {}",
            a.prio, a.prio
        )
    };
    Finding::new(
        "filter-shadowed",
        at,
        format!("never matches: {what} is taken first by the {by}, {to}{lost}"),
        fix,
    )
    .line(line(cx, parent, tp, n.and_then(|n| n.classid)))
}

/// The line that added a filter of instance `tp`: the u32 line of its pref naming `classid` when
/// there are several, else the pref's record.
fn line<'o>(cx: &DevCx<'o>, parent: Handle, tp: &Tp, classid: Option<u32>) -> Option<&'o str> {
    let of_pref: Vec<_> = cx
        .origins
        .filter_lines()
        .filter(|(_, l)| l.dev == Some(cx.name) && l.pref == Some(tp.prio))
        .collect();
    if of_pref.len() > 1 {
        if let Some((r, _)) = of_pref
            .iter()
            .find(|(_, l)| classid.is_some() && l.flowid() == classid)
        {
            return Some(r.at.as_str());
        }
    }
    cx.origins
        .filter(cx.name, parent, Some(tp.prio))
        .map(|r| r.at.as_str())
}
