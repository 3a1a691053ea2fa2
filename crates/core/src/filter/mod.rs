//! Filters (classifiers), after `net/sched/cls_api.c`.
//!
//! A classful qdisc — and, for HTB, each of its classes — owns a [`Block`]: numbered *chains*, each a list of
//! *filter instances* (`struct tcf_proto`, here [`Tp`]) ordered by preference (`prio`/`pref`, lower first).
//! Each instance has one kind (u32, fw, matchall, …), the protocol it applies to (`all` or an EtherType)
//! and any number of filters of that kind, told apart by their handle.
//!
//! Classification (`tcf_classify`, here [`Block::classify`]) walks chain 0 in order; instances whose
//! protocol does not match are skipped; the first filter that matches and whose actions do not answer
//! `continue` ends the walk with a *result* — a classid and a control code. `reclassify` restarts the walk
//! at the first filter (at most 4 times, then the packet is dropped, as the kernel's
//! `max_reclassify_loop`), and `goto chain N` restarts it at chain N. What the result means is up to the
//! qdisc: HTB takes a leaf, or descends into an inner class's own block; the ingress qdisc only cares
//! whether the packet was dropped.
//!
//! Configuration follows `tc_new_tfilter`/`tc_del_tfilter`: find or create the instance, then let the kind's
//! `change` validate everything and apply it whole, so a refused command leaves the block as it was.

pub mod basic;
pub mod bpf;
pub mod cgroup;
pub mod ematch;
pub mod flow;
pub mod flower;
pub mod flower_opts;
pub mod fw;
pub mod matchall;
pub mod route;
pub mod u32;

use crate::action::{
    exec_list, ext_is, ActionRef, ActionSpec, ActionTable, Control, TC_ACT_EXT_VAL_MASK,
    TC_ACT_GOTO_CHAIN, TC_ACT_OK, TC_ACT_RECLASSIFY, TC_ACT_SHOT, TC_ACT_UNSPEC,
};
use crate::cx::Cx;
pub use crate::cx::FilterMatch;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;
use std::collections::BTreeMap;

/// `ETH_P_ALL`: the protocol of a filter that applies to every packet.
pub const ETH_P_ALL: u16 = 0x0003;
/// `max_reclassify_loop`.
const MAX_RECLASSIFY: u32 = 4;

/// `TCA_CLS_FLAGS_*`.
pub const CLS_FLAGS_SKIP_HW: u32 = 1;
pub const CLS_FLAGS_SKIP_SW: u32 = 2;
pub const CLS_FLAGS_NOT_IN_HW: u32 = 8;

/// The actions a filter runs when it matches (`struct tcf_exts`). `police_compat` remembers that they came
/// from the old `police …` syntax, which the kernel dumps back the same way (`TCA_OLD_COMPAT`).
#[derive(Clone, Debug, Default)]
pub struct Exts {
    pub actions: Vec<ActionRef>,
    pub police_compat: bool,
}

impl Exts {
    /// The chains these actions may send a packet on to (`goto chain N`).
    pub fn goto_chains(&self) -> Vec<u32> {
        self.actions
            .iter()
            .flat_map(|a| a.borrow().params.controls())
            .filter(|&c| ext_is(c, TC_ACT_GOTO_CHAIN))
            .map(|c| c as u32 & TC_ACT_EXT_VAL_MASK)
            .collect()
    }

    /// `tcf_exts_exec`: no actions answer `ok`.
    pub fn exec(&self, pkt: &mut Packet, cx: &mut Cx) -> Control {
        if self.actions.is_empty() {
            TC_ACT_OK
        } else {
            exec_list(&self.actions, pkt, cx)
        }
    }
}

/// The actions a command attaches to a filter: `action …` lists, or one legacy `police …`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtsSpec {
    pub actions: Vec<ActionSpec>,
    pub police: Option<ActionSpec>,
    /// The filter's skip flags as `TCA_ACT_FLAGS_SKIP_*`: a shared action it binds must carry the same.
    pub cls_flags: u32,
}

impl ExtsSpec {
    fn specs(&self) -> (&[ActionSpec], bool) {
        match &self.police {
            Some(p) => (std::slice::from_ref(p), true),
            None => (&self.actions, false),
        }
    }
    /// `tcf_exts_validate`, check only.
    pub fn validate(&self, table: &ActionTable) -> Result<(), KernelError> {
        let (specs, _) = self.specs();
        table.validate(specs, true, false)?;
        table.check_offload_flags(specs, self.cls_flags)
    }
    /// `tcf_exts_validate`: create or bind the actions.
    pub fn instantiate(&self, table: &mut ActionTable, now: Nanos) -> Result<Exts, KernelError> {
        let (specs, compat) = self.specs();
        Ok(Exts {
            actions: table.instantiate(specs, true, false, now)?,
            police_compat: compat,
        })
    }
}

/// A filter's actions in a snapshot ([`crate::snapshot`]): by kind and index, the table holding them
/// (shared with other filters and `tc actions`), found there again when the snapshot is decoded.
impl serde::Serialize for Exts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let refs: Vec<(&'static str, u32)> = self
            .actions
            .iter()
            .map(|a| {
                let a = a.borrow();
                (a.kind(), a.index)
            })
            .collect();
        (refs, self.police_compat).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Exts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Exts, D::Error> {
        use serde::de::Error;
        // Kinds borrowed from the snapshot's bytes: no string per filter.
        let (refs, police_compat) = <(Vec<(&'de str, u32)>, bool)>::deserialize(d)?;
        let actions = refs
            .into_iter()
            .map(|(kind, index)| {
                crate::action::ActionTable::decoded(kind, index)
                    .ok_or_else(|| D::Error::custom(format!("no action {kind} {index}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Exts {
            actions,
            police_compat,
        })
    }
}

/// What a filter decided (`struct tcf_result`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcfResult {
    pub classid: u32,
    /// For `goto chain`: the chain to continue in.
    pub goto_chain: Option<u32>,
}

/// The options of each filter kind, as tc sends them.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterOptions {
    U32(u32::U32Options),
    Fw(fw::FwOptions),
    Matchall(matchall::MatchallOptions),
    Basic(basic::BasicOptions),
    Flow(flow::FlowOptions),
    /// Boxed: flower's keys and masks make it the largest by far.
    Flower(Box<flower::FlowerOptions>),
    Route(route::RouteOptions),
    Cgroup(cgroup::CgroupOptions),
    Bpf(bpf::BpfOptions),
}

impl FilterOptions {
    pub fn kind(&self) -> &'static str {
        match self {
            FilterOptions::U32(_) => "u32",
            FilterOptions::Fw(_) => "fw",
            FilterOptions::Matchall(_) => "matchall",
            FilterOptions::Basic(_) => "basic",
            FilterOptions::Flow(_) => "flow",
            FilterOptions::Flower(_) => "flower",
            FilterOptions::Route(_) => "route",
            FilterOptions::Cgroup(_) => "cgroup",
            FilterOptions::Bpf(_) => "bpf",
        }
    }
    fn exts(&self) -> &ExtsSpec {
        match self {
            FilterOptions::U32(o) => &o.exts,
            FilterOptions::Fw(o) => &o.exts,
            FilterOptions::Matchall(o) => &o.exts,
            FilterOptions::Basic(o) => &o.exts,
            FilterOptions::Flow(o) => &o.exts,
            FilterOptions::Flower(o) => &o.exts,
            FilterOptions::Route(o) => &o.exts,
            FilterOptions::Cgroup(o) => &o.exts,
            FilterOptions::Bpf(o) => &o.exts,
        }
    }
}

/// The filters of one instance, by kind; every kind has a snapshot form ([`crate::snapshot`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Classifier {
    U32(u32::U32Tp),
    Fw(fw::FwHead),
    Matchall(matchall::Matchall),
    Basic(basic::BasicHead),
    Flow(flow::FlowHead),
    Flower(flower::FlowerHead),
    Route(route::RouteHead),
    Cgroup(cgroup::CgroupHead),
    Bpf(bpf::BpfHead),
}

impl Classifier {
    pub fn kind(&self) -> &'static str {
        match self {
            Classifier::U32(_) => "u32",
            Classifier::Fw(_) => "fw",
            Classifier::Matchall(_) => "matchall",
            Classifier::Basic(_) => "basic",
            Classifier::Flow(_) => "flow",
            Classifier::Flower(_) => "flower",
            Classifier::Route(_) => "route",
            Classifier::Cgroup(_) => "cgroup",
            Classifier::Bpf(_) => "bpf",
        }
    }

    /// Whether the classifier reads a packet's route ([`Packet::route`]): route always, an ematch
    /// tree only through meta's `rt_classid`/`rt_iif`. A driver need attach routes only where one does.
    pub fn reads_route(&self) -> bool {
        match self {
            Classifier::Route(_) => true,
            Classifier::Basic(b) => b.filters.iter().any(|f| f.ematches.reads_route()),
            Classifier::Flow(f) => f.filters.iter().any(|f| f.ematches.reads_route()),
            Classifier::Cgroup(c) => c.filter.iter().any(|f| f.ematches.reads_route()),
            _ => false,
        }
    }
}

/// One filter instance (`struct tcf_proto`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Tp {
    /// The preference, 1..=65535 (`tcm_info`'s upper half).
    pub prio: u32,
    /// Host-order EtherType, or [`ETH_P_ALL`].
    pub protocol: u16,
    pub chain: u32,
    pub cls: Classifier,
}

/// Everything a `tc filter` request carries besides the device and parent.
#[derive(Clone, Debug)]
pub struct FilterRequest {
    pub prio: u32,
    pub protocol: u16,
    pub chain: u32,
    pub handle: u32,
    pub kind: Option<String>,
    pub opts: Option<FilterOptions>,
}

/// A block of chains (`struct tcf_block`).
#[derive(Clone, Debug, Default)]
pub struct Block {
    pub chains: BTreeMap<u32, Vec<Tp>>,
    /// The parent named by the last `tc filter add|change` on this block (`block->classid`), which a
    /// dump reports as each filter's parent; 0 before any.
    pub classid: u32,
    /// u32's hash tables are shared by every u32 instance of the block (`tc_u_common`).
    pub u32_common: u32::U32Common,
    /// The chains that exist, in the order they came to be (`block->chain_list`, what `tc chain show`
    /// lists): each one holding a filter instance or made by `tc chain add`.
    pub chain_list: Vec<u32>,
    /// The chains `tc chain add` made (`explicitly_created`): they stay, empty, until `tc chain del`.
    pub explicit_chains: Vec<u32>,
}

/// A block's fields in a snapshot ([`crate::snapshot`]), borrowed to save and owned when decoded.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedBlock<Chains, Common, List> {
    chains: Chains,
    classid: u32,
    u32_common: Common,
    chain_list: List,
    explicit_chains: List,
}

/// A block in a snapshot is one byte string, so that a read no filter can change (a qdisc or class
/// listing) skips it unread ([`crate::snapshot::without_filters`]): 10 000 u32 filters are a third
/// of a LibreQoS-sized engine's decoding.
impl serde::Serialize for Block {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = crate::snapshot::nested(&SavedBlock {
            chains: &self.chains,
            classid: self.classid,
            u32_common: &self.u32_common,
            chain_list: &self.chain_list,
            explicit_chains: &self.explicit_chains,
        })?;
        s.serialize_bytes(&bytes)
    }
}

impl<'de> serde::Deserialize<'de> for Block {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        let bytes = <&'de [u8]>::deserialize(d)?;
        if crate::snapshot::skipping_filters() {
            return Ok(Block::default());
        }
        let b: SavedBlock<BTreeMap<u32, Vec<Tp>>, u32::U32Common, Vec<u32>> =
            crate::snapshot::decode(bytes).map_err(<D::Error as serde::de::Error>::custom)?;
        Ok(Block {
            chains: b.chains,
            classid: b.classid,
            u32_common: b.u32_common,
            chain_list: b.chain_list,
            explicit_chains: b.explicit_chains,
        })
    }
}

/// What `tc chain` asks of a block (`RTM_NEWCHAIN`, `RTM_DELCHAIN`, `RTM_GETCHAIN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainOp {
    Add,
    Del,
    Get,
}

/// How a `tc filter add|change|replace` may act: the netlink flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterFlags {
    pub create: bool,
    pub excl: bool,
}

fn prio_not_found() -> KernelError {
    KernelError::invalid("Filter with specified priority/protocol not found")
}

impl Block {
    pub fn is_empty(&self) -> bool {
        self.chains.values().all(|c| c.is_empty())
    }

    /// Whether chain 0 has no filter: the kernel's `q->filter_list` (chain 0's head, kept by
    /// `tcf_chain0_head_change`) is NULL, and the disciplines that hash a packet when it is (SFQ,
    /// fq_codel, fq_pie, CAKE, SFB) or read the filters for their actions only (multiq) or fall back
    /// (CBQ) do so, even if other chains have filters (reachable only by `goto chain` from chain 0).
    pub fn filter_list_is_empty(&self) -> bool {
        self.chains.get(&0).is_none_or(|c| c.is_empty())
    }

    /// The class a filter of chain 0 sends every packet to, if one does: a `matchall` of protocol
    /// `all`, run in software, naming a class, whose actions (if any) only `pass`. Whether that class
    /// takes the packet (a leaf) is the caller's to judge.
    pub fn catch_all(&self) -> Option<u32> {
        self.chains.get(&0)?.iter().find_map(|tp| match &tp.cls {
            Classifier::Matchall(m) if tp.protocol == ETH_P_ALL => {
                let f = m.filter.as_ref()?;
                let passes = f
                    .exts
                    .actions
                    .iter()
                    .all(|a| a.borrow().params.controls().iter().all(|&c| c == TC_ACT_OK));
                (f.flags & CLS_FLAGS_SKIP_SW == 0 && passes)
                    .then_some(f.classid)
                    .flatten()
            }
            _ => None,
        })
    }

    /// The nodes of a u32 instance: from its root table through the tables its nodes link to (none
    /// for another kind).
    pub fn u32_nodes<'a>(&'a self, tp: &'a Tp) -> Vec<&'a u32::Knode> {
        let Classifier::U32(u) = &tp.cls else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut seen = vec![u.root];
        let mut todo = vec![u.root];
        while let Some(h) = todo.pop() {
            let Some(ht) = self.u32_common.hts.iter().find(|t| t.handle == h) else {
                continue;
            };
            for n in ht.buckets.iter().flatten() {
                out.push(&**n);
                if let Some(l) = n.link.filter(|l| !seen.contains(l)) {
                    seen.push(l);
                    todo.push(l);
                }
            }
        }
        out
    }

    /// Each filter of `tp`, as (the class it names, its actions).
    pub fn tp_filters<'a>(&'a self, tp: &'a Tp) -> Vec<(Option<u32>, &'a Exts)> {
        match &tp.cls {
            Classifier::U32(_) => self
                .u32_nodes(tp)
                .into_iter()
                .map(|n| (n.classid, &n.exts))
                .collect(),
            Classifier::Fw(f) => f
                .filters()
                .into_iter()
                .map(|x| (x.classid, &x.exts))
                .collect(),
            Classifier::Matchall(m) => m.filter.iter().map(|x| (x.classid, &x.exts)).collect(),
            Classifier::Basic(b) => b
                .filters
                .iter()
                .map(|x| ((x.classid != 0).then_some(x.classid), &x.exts))
                .collect(),
            // A flow filter maps packets onto a range of classes by their keys: no one class.
            Classifier::Flow(f) => f.filters.iter().map(|x| (None, &x.exts)).collect(),
            Classifier::Flower(f) => f.filters.values().map(|x| (x.classid, &x.exts)).collect(),
            Classifier::Route(r) => r.filters.iter().map(|x| (x.classid, &x.exts)).collect(),
            // The class is the sending cgroup's: no one class.
            Classifier::Cgroup(c) => c.filter.iter().map(|x| (None, &x.exts)).collect(),
            // A program may answer with any class.
            Classifier::Bpf(b) => b.filters.iter().map(|x| (None, &x.exts)).collect(),
        }
    }

    /// The chains a packet can reach: chain 0 (the filter list), and every chain a filter of a
    /// reachable chain may `goto`.
    pub fn reachable_chains(&self) -> Vec<u32> {
        let mut reached = vec![0];
        let mut todo = vec![0];
        while let Some(chain) = todo.pop() {
            for tp in self.chains.get(&chain).into_iter().flatten() {
                for (_, exts) in self.tp_filters(tp) {
                    for c in exts.goto_chains() {
                        if !reached.contains(&c) {
                            reached.push(c);
                            todo.push(c);
                        }
                    }
                }
            }
        }
        reached
    }

    /// The classes the filters a packet can reach name (where [`Block::binds`] counts every filter,
    /// reachable or not, as the kernel's bindings do); a `flow` filter with a divisor names the
    /// `divisor` classes from its baseclass on.
    pub fn reached_classes(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for chain in self.reachable_chains() {
            for tp in self.chains.get(&chain).into_iter().flatten() {
                out.extend(self.tp_filters(tp).into_iter().filter_map(|(c, _)| c));
                if let Classifier::Flow(f) = &tp.cls {
                    for x in f.filters.iter().filter(|x| x.divisor != 0) {
                        let major = x.baseclass & 0xffff_0000;
                        out.extend(
                            (0..x.divisor.min(0x1_0000))
                                .map(|n| major | (x.baseclass.wrapping_add(n) & 0xffff)),
                        );
                    }
                }
            }
        }
        out
    }

    /// Every instance of every chain, chains in index order.
    pub fn tps(&self) -> impl Iterator<Item = &Tp> {
        self.chains.values().flatten()
    }

    /// `tcf_classify`: walk the chains; `None` when nothing matched (`TC_ACT_UNSPEC`).
    pub fn classify(&self, pkt: &mut Packet, cx: &mut Cx) -> Option<(Control, TcfResult)> {
        let mut chain = 0u32;
        let mut loops = 0;
        'restart: loop {
            let tps = self.chains.get(&chain)?;
            for tp in tps {
                if tp.protocol != ETH_P_ALL && tp.protocol != pkt.tc_protocol() {
                    continue;
                }
                let mut res = TcfResult::default();
                let r = self.classify_tp(tp, pkt, cx, &mut res);
                if r == TC_ACT_RECLASSIFY {
                    loops += 1;
                    if loops > MAX_RECLASSIFY {
                        return Some((TC_ACT_SHOT, res));
                    }
                    chain = 0;
                    continue 'restart;
                }
                if ext_is(r, TC_ACT_GOTO_CHAIN) {
                    loops += 1;
                    if loops > MAX_RECLASSIFY * 4 {
                        return Some((TC_ACT_SHOT, res));
                    }
                    chain = r as u32 & TC_ACT_EXT_VAL_MASK;
                    continue 'restart;
                }
                if r >= 0 {
                    cx.matched = Some(FilterMatch {
                        kind: tp.cls.kind(),
                        chain: tp.chain,
                        pref: tp.prio,
                    });
                    return Some((r, res));
                }
            }
            return None;
        }
    }

    fn classify_tp(&self, tp: &Tp, pkt: &mut Packet, cx: &mut Cx, res: &mut TcfResult) -> Control {
        match &tp.cls {
            Classifier::U32(u) => u.classify(&self.u32_common, pkt, cx, res),
            Classifier::Fw(f) => f.classify(pkt, cx, res),
            Classifier::Matchall(m) => m.classify(pkt, cx, res),
            Classifier::Basic(b) => b.classify(pkt, cx, res),
            Classifier::Flow(f) => f.classify(pkt, cx, res),
            Classifier::Flower(f) => f.classify(pkt, cx, res),
            Classifier::Route(r) => r.classify(pkt, cx, res),
            Classifier::Cgroup(c) => c.classify(pkt, cx, res),
            Classifier::Bpf(b) => b.classify(pkt, cx, res),
        }
    }

    /// `tcf_auto_prio` on the instance where the search for 0x8000 stopped (`tcf_chain_tp_prev`): one less
    /// than the preference of the first instance above 0x8000, or 0xc000 if there is none.
    fn auto_prio(list: &[Tp]) -> u32 {
        match list.iter().find(|tp| tp.prio >= 0x8000) {
            Some(tp) => tp.prio - 1,
            None => 0xc000,
        }
    }

    /// `tc filter add|change|replace` on this block (`tc_new_tfilter` from the chain on). The chain
    /// comes to be with its first instance, and goes again if the request fails (`tcf_chain_put`).
    pub fn change(
        &mut self,
        req: &FilterRequest,
        flags: FilterFlags,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let r = self.change_tps(req, flags, actions, now);
        self.settle_chain(req.chain);
        r
    }

    /// A chain that holds an instance or was made by `tc chain add` is on the chain list (appended when
    /// it first is); any other is gone.
    fn settle_chain(&mut self, chain: u32) {
        let held = self.chains.get(&chain).is_some_and(|l| !l.is_empty());
        if !held {
            self.chains.remove(&chain);
        }
        let exists = held || self.explicit_chains.contains(&chain);
        let listed = self.chain_list.iter().position(|&c| c == chain);
        match (exists, listed) {
            (true, None) => self.chain_list.push(chain),
            (false, Some(i)) => {
                self.chain_list.remove(i);
            }
            _ => {}
        }
    }

    /// `tc chain add` (`tc_ctl_chain`, `RTM_NEWCHAIN` with `NLM_F_CREATE|NLM_F_EXCL`): an empty chain
    /// that stays until `tc chain del`.
    pub fn chain_add(&mut self, chain: u32) -> Result<(), KernelError> {
        check_chain_index(chain)?;
        if self.chain_list.contains(&chain) {
            return Err(KernelError::msg(
                Errno::Exists,
                "Filter chain already exists",
            ));
        }
        self.explicit_chains.push(chain);
        self.settle_chain(chain);
        Ok(())
    }

    /// `tc chain del` (`RTM_DELCHAIN`): the chain's filters flushed, the chain gone.
    pub fn chain_del(&mut self, chain: u32, actions: &mut ActionTable) -> Result<(), KernelError> {
        self.chain_get(chain)?;
        while self.chains.get(&chain).is_some_and(|l| !l.is_empty()) {
            self.remove_tp(chain, 0, actions);
        }
        self.explicit_chains.retain(|&c| c != chain);
        self.settle_chain(chain);
        Ok(())
    }

    /// `tc chain get` (`RTM_GETCHAIN`): the chain must exist.
    pub fn chain_get(&self, chain: u32) -> Result<(), KernelError> {
        check_chain_index(chain)?;
        if !self.chain_list.contains(&chain) {
            return Err(KernelError::invalid("Cannot find specified filter chain"));
        }
        Ok(())
    }

    fn change_tps(
        &mut self,
        req: &FilterRequest,
        flags: FilterFlags,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        if req.chain > TC_ACT_EXT_VAL_MASK {
            return Err(KernelError::invalid(
                "Specified chain index exceeds upper limit",
            ));
        }
        let prio_allocate = req.prio == 0;
        if prio_allocate && !flags.create {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Invalid filter command with priority of zero",
            ));
        }
        // `tcf_chain_tp_find`: the first instance at or above the preference asked for; without one, the
        // kernel searches for 0x8000, and an instance there already is an error.
        let search = if prio_allocate { 0x8000 } else { req.prio };
        let list = self.chains.entry(req.chain).or_default();
        let pos = list.iter().position(|tp| tp.prio >= search);
        let found = match pos {
            Some(i) if list[i].prio == search => {
                if prio_allocate || (req.protocol != 0 && list[i].protocol != req.protocol) {
                    return Err(prio_not_found());
                }
                Some(i)
            }
            _ => None,
        };
        let (idx, created) = match found {
            Some(i) => (i, false),
            None => {
                let kind = req
                    .kind
                    .as_deref()
                    .filter(|_| req.protocol != 0)
                    .ok_or_else(|| {
                        KernelError::invalid("Filter kind and protocol must be specified")
                    })?;
                if !flags.create {
                    return Err(KernelError::msg(
                        Errno::NoEntry,
                        "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter",
                    ));
                }
                let prio = if prio_allocate {
                    Self::auto_prio(list)
                } else {
                    req.prio
                };
                let cls = match kind {
                    "u32" => Classifier::U32(self.u32_common.new_tp(prio)),
                    "fw" => Classifier::Fw(fw::FwHead::default()),
                    "matchall" => Classifier::Matchall(matchall::Matchall::default()),
                    "basic" => Classifier::Basic(basic::BasicHead::default()),
                    "flow" => Classifier::Flow(flow::FlowHead::default()),
                    "flower" => Classifier::Flower(flower::FlowerHead::default()),
                    "route" => Classifier::Route(route::RouteHead::default()),
                    "cgroup" => Classifier::Cgroup(cgroup::CgroupHead::default()),
                    "bpf" => Classifier::Bpf(bpf::BpfHead::default()),
                    _ => return Err(KernelError::msg(Errno::NoEntry, "TC classifier not found")),
                };
                let list = self.chains.entry(req.chain).or_default();
                let at = list
                    .iter()
                    .position(|tp| tp.prio > prio)
                    .unwrap_or(list.len());
                list.insert(
                    at,
                    Tp {
                        prio,
                        protocol: req.protocol,
                        chain: req.chain,
                        cls,
                    },
                );
                (at, true)
            }
        };
        let r = self.change_tp(req.chain, idx, req, flags, actions, now);
        if r.is_err() && created {
            self.remove_tp(req.chain, idx, actions);
        }
        r
    }

    fn change_tp(
        &mut self,
        chain: u32,
        idx: usize,
        req: &FilterRequest,
        flags: FilterFlags,
        actions: &mut ActionTable,
        now: Nanos,
    ) -> Result<(), KernelError> {
        let tp = &self.chains[&chain][idx];
        if let Some(k) = &req.kind {
            if k != tp.cls.kind() {
                return Err(KernelError::invalid(
                    "Specified filter kind does not match existing one",
                ));
            }
        }
        let exists = self.get(tp, req.handle);
        if !exists && !flags.create {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter",
            ));
        }
        if exists && flags.excl {
            return Err(KernelError::msg(Errno::Exists, "Filter already exists"));
        }
        if let Some(o) = &req.opts {
            if o.kind() != tp.cls.kind() {
                return Err(KernelError::new(Errno::Invalid));
            }
            o.exts().validate(actions)?;
        }
        let prio = tp.prio;
        let Block {
            chains, u32_common, ..
        } = self;
        let tp = &mut chains.get_mut(&chain).expect("chain exists")[idx];
        match (&mut tp.cls, &req.opts) {
            (Classifier::U32(u), o) => {
                let o = match o {
                    Some(FilterOptions::U32(o)) => Some(o),
                    _ => None,
                };
                u.change(u32_common, prio, req.handle, o, actions, now)
            }
            (Classifier::Fw(f), o) => {
                let o = match o {
                    Some(FilterOptions::Fw(o)) => Some(o),
                    _ => None,
                };
                f.change(req.handle, o, actions, now)
            }
            (Classifier::Matchall(m), o) => {
                let o = match o {
                    Some(FilterOptions::Matchall(o)) => Some(o),
                    _ => None,
                };
                m.change(req.handle, o, actions, now)
            }
            (Classifier::Basic(b), o) => {
                let o = match o {
                    Some(FilterOptions::Basic(o)) => Some(o),
                    _ => None,
                };
                b.change(req.handle, o, actions, now)
            }
            (Classifier::Flow(f), o) => {
                let o = match o {
                    Some(FilterOptions::Flow(o)) => Some(o),
                    _ => None,
                };
                f.change(req.handle, o, actions, now)
            }
            (Classifier::Flower(f), o) => {
                let o = match o {
                    Some(FilterOptions::Flower(o)) => Some(&**o),
                    _ => None,
                };
                f.change(req.handle, o, actions, now)
            }
            (Classifier::Route(r), o) => {
                let o = match o {
                    Some(FilterOptions::Route(o)) => Some(o),
                    _ => None,
                };
                r.change(req.handle, o, actions, now)
            }
            (Classifier::Cgroup(c), o) => {
                let o = match o {
                    Some(FilterOptions::Cgroup(o)) => Some(o),
                    _ => None,
                };
                c.change(req.handle, o, actions, now)
            }
            (Classifier::Bpf(b), o) => {
                let o = match o {
                    Some(FilterOptions::Bpf(o)) => Some(o),
                    _ => None,
                };
                b.change(req.handle, o, actions, now)
            }
        }
    }

    /// `tp->ops->get`: does a filter with this handle exist in the instance?
    fn get(&self, tp: &Tp, handle: u32) -> bool {
        match &tp.cls {
            Classifier::U32(u) => u.get(&self.u32_common, handle),
            Classifier::Fw(f) => f.get(handle),
            Classifier::Matchall(m) => m.get(handle),
            Classifier::Basic(b) => b.get(handle),
            Classifier::Flow(f) => f.get(handle),
            Classifier::Flower(f) => f.get(handle),
            Classifier::Route(r) => r.get(handle),
            Classifier::Cgroup(c) => c.get(handle),
            Classifier::Bpf(b) => b.get(handle),
        }
    }

    fn remove_tp(&mut self, chain: u32, idx: usize, actions: &mut ActionTable) {
        let Some(list) = self.chains.get_mut(&chain) else {
            return;
        };
        if idx >= list.len() {
            return;
        }
        let tp = list.remove(idx);
        match tp.cls {
            Classifier::U32(u) => self.u32_common.destroy_tp(&u, actions),
            Classifier::Fw(f) => f.destroy(actions),
            Classifier::Matchall(m) => m.destroy(actions),
            Classifier::Basic(b) => b.destroy(actions),
            Classifier::Flow(f) => f.destroy(actions),
            Classifier::Flower(f) => f.destroy(actions),
            Classifier::Route(r) => r.destroy(actions),
            Classifier::Cgroup(c) => c.destroy(actions),
            Classifier::Bpf(b) => b.destroy(actions),
        }
        self.settle_chain(chain);
    }

    /// Does a filter of this block name `classid` as its result (`tcf_bind_filter` bound it, or
    /// `tc_bind_tclass` did when the class appeared)? The kernel counts these bindings in the class's
    /// `filter_cnt`; `qdisc_class_in_use` refuses to delete a class while it is non-zero. u32, fw,
    /// matchall, basic, flower, route and bpf (its `classid`) bind; flow's `baseclass` arithmetic and cgroup (whose class is
    /// the packet's) do not.
    pub fn binds(&self, classid: u32) -> bool {
        let u32_binds = self
            .u32_common
            .hts
            .iter()
            .flat_map(|h| h.buckets.iter().flatten())
            .any(|n| n.classid == Some(classid));
        u32_binds
            || self.tps().any(|tp| match &tp.cls {
                Classifier::U32(_) | Classifier::Flow(_) | Classifier::Cgroup(_) => false,
                Classifier::Fw(f) => f.filters().iter().any(|x| x.classid == Some(classid)),
                Classifier::Matchall(m) => m
                    .filter
                    .as_ref()
                    .is_some_and(|x| x.classid == Some(classid)),
                Classifier::Basic(b) => b.filters.iter().any(|x| x.classid == classid),
                Classifier::Flower(f) => f.filters.values().any(|x| x.classid == Some(classid)),
                Classifier::Route(r) => r.filters.iter().any(|x| x.classid == Some(classid)),
                Classifier::Bpf(b) => b.filters.iter().any(|x| x.classid == Some(classid)),
            })
    }

    /// Remove everything (the qdisc or class is going away).
    pub fn destroy(&mut self, actions: &mut ActionTable) {
        self.explicit_chains.clear();
        let chains: Vec<u32> = self.chains.keys().copied().collect();
        for c in chains {
            while self.chains.get(&c).is_some_and(|l| !l.is_empty()) {
                self.remove_tp(c, 0, actions);
            }
        }
        self.chain_list.clear();
    }

    /// `tc filter delete` (`tc_del_tfilter` from the chain on).
    pub fn delete(
        &mut self,
        req: &FilterRequest,
        actions: &mut ActionTable,
    ) -> Result<(), KernelError> {
        if req.chain > TC_ACT_EXT_VAL_MASK {
            return Err(KernelError::invalid(
                "Specified chain index exceeds upper limit",
            ));
        }
        let Some(list) = self.chains.get(&req.chain) else {
            if req.prio == 0 {
                return Ok(());
            }
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Cannot find specified filter chain",
            ));
        };
        if req.prio == 0 {
            while self.chains.get(&req.chain).is_some_and(|l| !l.is_empty()) {
                self.remove_tp(req.chain, 0, actions);
            }
            return Ok(());
        }
        let idx = list
            .iter()
            .position(|tp| {
                tp.prio == req.prio && (req.protocol == 0 || tp.protocol == req.protocol)
            })
            .ok_or_else(|| {
                KernelError::msg(
                    Errno::NoEntry,
                    "Filter with specified priority/protocol not found",
                )
            })?;
        if let Some(k) = &req.kind {
            if k != list[idx].cls.kind() {
                return Err(KernelError::invalid(
                    "Specified filter kind does not match existing one",
                ));
            }
        }
        if req.handle == 0 {
            self.remove_tp(req.chain, idx, actions);
            return Ok(());
        }
        if !self.get(&list[idx], req.handle) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified filter handle not found",
            ));
        }
        let prio = list[idx].prio;
        let Block {
            chains, u32_common, ..
        } = self;
        let tp = &mut chains.get_mut(&req.chain).expect("chain exists")[idx];
        let last = match &mut tp.cls {
            Classifier::U32(u) => u.delete(u32_common, prio, req.handle, actions)?,
            Classifier::Fw(f) => f.delete(req.handle, actions),
            Classifier::Matchall(m) => m.delete(actions),
            Classifier::Basic(b) => b.delete(req.handle, actions),
            Classifier::Flow(f) => f.delete(req.handle, actions),
            Classifier::Flower(f) => f.delete(req.handle, actions),
            Classifier::Route(r) => r.delete(req.handle, actions),
            Classifier::Cgroup(c) => c.delete(req.handle, actions),
            Classifier::Bpf(b) => b.delete(req.handle, actions),
        };
        if last {
            self.remove_tp(req.chain, idx, actions);
        }
        Ok(())
    }

    /// `tc filter get`: the instance with this preference and protocol, if the handle exists in it.
    pub fn find(&self, req: &FilterRequest) -> Result<&Tp, KernelError> {
        let list = self.chains.get(&req.chain).ok_or_else(|| {
            KernelError::msg(Errno::NoEntry, "Cannot find specified filter chain")
        })?;
        let tp = list
            .iter()
            .find(|tp| tp.prio == req.prio && (req.protocol == 0 || tp.protocol == req.protocol))
            .ok_or_else(|| {
                KernelError::msg(
                    Errno::NoEntry,
                    "Filter with specified priority/protocol not found",
                )
            })?;
        if req.kind.as_deref().is_some_and(|k| k != tp.cls.kind()) {
            return Err(KernelError::invalid(
                "Specified filter kind does not match existing one",
            ));
        }
        if !self.get(tp, req.handle) {
            return Err(KernelError::msg(
                Errno::NoEntry,
                "Specified filter handle not found",
            ));
        }
        Ok(tp)
    }
}

/// What classification decided for a qdisc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No filter matched (`TC_ACT_UNSPEC`).
    Unclassified,
    /// A filter matched: the class it named (0 if none) and the final control code.
    Classified { classid: u32, control: Control },
    /// An action dropped the packet.
    Shot,
    /// An action took the packet (`stolen`, `queued`, `trap`): it is gone but not a drop.
    Stolen,
}

/// Classify and interpret the codes the way the qdiscs' `*_classify` functions do.
pub fn classify(block: &Block, pkt: &mut Packet, cx: &mut Cx) -> Verdict {
    match block.classify(pkt, cx) {
        None => Verdict::Unclassified,
        Some((TC_ACT_SHOT, _)) => Verdict::Shot,
        Some((4 | 5 | 8, _)) => Verdict::Stolen,
        Some((c, res)) => Verdict::Classified {
            classid: res.classid,
            control: c,
        },
    }
}

/// A chain index above `TC_ACT_EXT_VAL_MASK` is refused.
/// `X_delete` of the kinds that keep their filters in a list (basic, flow, route): the filter with
/// `handle` goes and its actions are unbound; returns whether the instance is now empty.
fn delete_from<F>(
    filters: &mut Vec<F>,
    handle: u32,
    actions: &mut ActionTable,
    key: impl Fn(&F) -> (u32, &Exts),
) -> bool {
    if let Some(i) = filters.iter().position(|f| key(f).0 == handle) {
        let f = filters.remove(i);
        actions.release_bound(&key(&f).1.actions);
    }
    filters.is_empty()
}

/// `idr_alloc_u32` from 1 to `INT_MAX` for a filter made without a handle (basic, bpf): the lowest
/// handle `taken` does not hold.
fn alloc_handle(taken: impl Fn(u32) -> bool) -> Result<u32, KernelError> {
    let mut h = 1u32;
    while taken(h) {
        h += 1;
    }
    if h > i32::MAX as u32 {
        return Err(KernelError::new(Errno::NoSpace));
    }
    Ok(h)
}

/// `X_destroy` of the same kinds: every filter's actions unbound.
fn destroy_all<F>(filters: &[F], actions: &mut ActionTable, key: impl Fn(&F) -> (u32, &Exts)) {
    for f in filters {
        actions.release_bound(&key(f).1.actions);
    }
}

fn check_chain_index(chain: u32) -> Result<(), KernelError> {
    if chain > TC_ACT_EXT_VAL_MASK {
        return Err(KernelError::invalid(
            "Specified chain index exceeds upper limit",
        ));
    }
    Ok(())
}

/// `TC_ACT_UNSPEC` as a named constant for the kinds' matchers.
pub const NO_MATCH: Control = TC_ACT_UNSPEC;
