//! Actions: what a filter does to a packet it matched, after `net/sched/act_api.c`.
//!
//! An action is a small program step — police the rate, set the mark, drop — that answers with a *control
//! code* saying what happens next (`TC_ACT_*`): `ok` ends classification with the filter's class, `shot`
//! drops, `reclassify` starts the filter walk again, `pipe` runs the next action of the list, `continue`
//! (`TC_ACT_UNSPEC`) makes the filter count as not matched so the walk goes on to the next filter, `jump N`
//! skips N actions and `goto chain N` continues in another filter chain. [`exec_list`] is `tcf_action_exec`.
//!
//! Actions live in a per-kind table indexed by a 32-bit number (the kernel's `tcf_idrinfo`): `tc actions
//! add` puts one there, a filter either creates its own (inline, counted as bound) or binds an existing one
//! by index, and several filters bound to the same police action share one token bucket. That sharing is why
//! an action is an [`ActionRef`] (`Rc<RefCell<_>>`): the table and every filter hold the same object. The
//! reference counts are the kernel's: `ref` counts the table's own hold plus every binding, `bind` the
//! bindings; an action whose `ref` drops to zero leaves the table.

pub mod bpf;
pub mod connmark;
pub mod csum;
pub mod ct;
pub mod ctinfo;
pub mod gact;
pub mod gate;
pub mod ife;
pub mod mirred;
pub mod mpls;
pub mod nat;
pub mod pedit;
pub mod police;
pub mod sample;
pub mod simple;
pub mod skbedit;
pub mod skbmod;
pub mod tunnel_key;
pub mod vlan;

use crate::cx::Cx;
use crate::error::{Errno, KernelError};
use crate::packet::Packet;
use crate::Nanos;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// `TC_ACT_*` control codes.
pub type Control = i32;
pub const TC_ACT_UNSPEC: Control = -1;
pub const TC_ACT_OK: Control = 0;
pub const TC_ACT_RECLASSIFY: Control = 1;
pub const TC_ACT_SHOT: Control = 2;
pub const TC_ACT_PIPE: Control = 3;
pub const TC_ACT_STOLEN: Control = 4;
pub const TC_ACT_QUEUED: Control = 5;
pub const TC_ACT_REPEAT: Control = 6;
pub const TC_ACT_REDIRECT: Control = 7;
pub const TC_ACT_TRAP: Control = 8;
pub const TC_ACT_JUMP: Control = 0x1000_0000;
pub const TC_ACT_GOTO_CHAIN: Control = 0x2000_0000;
pub const TC_ACT_EXT_VAL_MASK: u32 = 0x0fff_ffff;

/// `TC_ACT_EXT_CMP`: is `c` the extended opcode `op` (jump, goto chain) with any value?
pub fn ext_is(c: Control, op: Control) -> bool {
    (c as u32 & !TC_ACT_EXT_VAL_MASK) == op as u32
}

/// `tcf_action_valid`: a code the kernel accepts.
pub fn control_valid(c: Control) -> bool {
    ext_is(c, TC_ACT_JUMP)
        || ext_is(c, TC_ACT_GOTO_CHAIN)
        || (TC_ACT_UNSPEC..=TC_ACT_TRAP).contains(&c)
}

/// `TCA_ACT_FLAGS_*`.
pub const ACT_FLAG_NO_PERCPU: u32 = 1;
pub const ACT_FLAG_SKIP_HW: u32 = 2;
pub const ACT_FLAG_SKIP_SW: u32 = 4;

/// What an action of each kind is configured with; every kind has a snapshot form
/// ([`crate::snapshot`]): its configuration, its running state being the [`Action`]'s.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ActionParams {
    Gact(gact::Gact),
    Police(police::PoliceParams),
    Skbedit(skbedit::Skbedit),
    Connmark(connmark::Connmark),
    Mirred(mirred::Mirred),
    Nat(nat::Nat),
    Csum(csum::Csum),
    Pedit(pedit::Pedit),
    Simple(simple::Simple),
    Skbmod(skbmod::Skbmod),
    Vlan(vlan::Vlan),
    Bpf(bpf::Bpf),
    Mpls(mpls::Mpls),
    TunnelKey(tunnel_key::TunnelKey),
    Sample(sample::Sample),
    Gate(gate::Gate),
    Ctinfo(ctinfo::Ctinfo),
    Ife(ife::Ife),
    Ct(ct::Ct),
}

impl ActionParams {
    pub fn kind(&self) -> &'static str {
        match self {
            ActionParams::Gact(_) => "gact",
            ActionParams::Police(_) => "police",
            ActionParams::Skbedit(_) => "skbedit",
            ActionParams::Connmark(_) => "connmark",
            ActionParams::Mirred(_) => "mirred",
            ActionParams::Nat(_) => "nat",
            ActionParams::Csum(_) => "csum",
            ActionParams::Pedit(_) => "pedit",
            ActionParams::Simple(_) => "simple",
            ActionParams::Skbmod(_) => "skbmod",
            ActionParams::Vlan(_) => "vlan",
            ActionParams::Bpf(_) => "bpf",
            ActionParams::Mpls(_) => "mpls",
            ActionParams::TunnelKey(_) => "tunnel_key",
            ActionParams::Sample(_) => "sample",
            ActionParams::Gate(_) => "gate",
            ActionParams::Ctinfo(_) => "ctinfo",
            ActionParams::Ife(_) => "ife",
            ActionParams::Ct(_) => "ct",
        }
    }
    /// The control codes this action may answer with, for the goto-chain check.
    pub(crate) fn controls(&self) -> Vec<Control> {
        match self {
            ActionParams::Gact(g) => {
                let mut v = vec![g.action];
                if let Some(p) = &g.prob {
                    v.push(p.action);
                }
                v
            }
            ActionParams::Police(p) => vec![p.action, p.result],
            ActionParams::Skbedit(s) => vec![s.action],
            ActionParams::Connmark(c) => vec![c.action],
            ActionParams::Mirred(m) => vec![m.action],
            ActionParams::Nat(n) => vec![n.action],
            ActionParams::Csum(c) => vec![c.action],
            ActionParams::Pedit(p) => vec![p.action],
            ActionParams::Simple(p) => vec![p.action],
            ActionParams::Skbmod(p) => vec![p.action],
            ActionParams::Vlan(p) => vec![p.action],
            ActionParams::Bpf(p) => vec![p.action],
            ActionParams::Mpls(p) => vec![p.action],
            ActionParams::TunnelKey(p) => vec![p.action],
            ActionParams::Sample(p) => vec![p.action],
            ActionParams::Gate(p) => vec![p.action],
            ActionParams::Ctinfo(p) => vec![p.action],
            ActionParams::Ife(p) => vec![p.action],
            ActionParams::Ct(p) => vec![p.action],
        }
    }
}

/// The basic counters an action keeps (`tc -s actions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActionStats {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u32,
    pub overlimits: u32,
}

/// One action instance (`struct tc_action`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Action {
    pub index: u32,
    pub params: ActionParams,
    pub cookie: Option<Vec<u8>>,
    /// `TCA_ACT_FLAGS_*` as given.
    pub flags: u32,
    pub refcnt: u32,
    pub bindcnt: u32,
    pub stats: ActionStats,
    /// `struct tcf_t`: when the action was made, last used and first used. Making it counts as a use
    /// for `lastuse` (`tcf_idr_create` sets both to now), not for `firstuse` (0 there: none until a
    /// packet), so tc shows an unused action `installed N sec used N sec`.
    pub installed: Nanos,
    pub lastuse: Nanos,
    pub firstuse: Option<Nanos>,
    police: police::PoliceState,
    /// What a `sample` action sent to its PSAMPLE group (zero for other kinds).
    pub psample: sample::Psample,
    gate: gate::GateState,
    /// What a `ctinfo` action restored (zero for other kinds).
    pub ctinfo: ctinfo::CtinfoStats,
}

pub type ActionRef = Rc<RefCell<Action>>;

impl Action {
    pub fn kind(&self) -> &'static str {
        self.params.kind()
    }

    /// `tcf_lastuse_update`: a packet reached the action at `now`.
    fn used(&mut self, now: Nanos) {
        self.lastuse = now;
        self.firstuse.get_or_insert(now);
    }

    /// Run the action on `pkt` (`a->ops->act`) and return its control code.
    pub fn act(&mut self, pkt: &mut Packet, cx: &mut Cx) -> Control {
        let now = cx.now;
        if let ActionParams::Mirred(m) = &self.params {
            return self.act_mirred(m.clone(), pkt, cx);
        }
        self.used(now);
        let len = pkt.hook_len(cx.mirred.at_ingress());
        self.stats.bytes += len as u64;
        self.stats.packets += pkt.bstats_packets();
        if matches!(
            self.params,
            ActionParams::Nat(_) | ActionParams::Csum(_) | ActionParams::Pedit(_)
        ) {
            // The actions that rewrite what a transport checksum covers: a simulated packet's
            // implied checksums become real first, so the edit leaves them as the kernel would.
            csum::complete_implied(pkt);
        }
        let c = match &self.params {
            ActionParams::Gact(g) => g.act(pkt),
            ActionParams::Skbedit(s) => s.act(pkt),
            ActionParams::Connmark(c) => {
                let (c, marked) = c.act(pkt);
                if marked {
                    self.stats.overlimits += 1;
                }
                c
            }
            // Handled above (`act_mirred`).
            ActionParams::Mirred(m) => m.action,
            ActionParams::Nat(n) => n.act(pkt),
            ActionParams::Csum(c) => c.act(pkt),
            // pedit, simple, skbmod, vlan, tunnel_key, sample and ctinfo count no drop for a `drop` answer (their kernel
            // code does not).
            ActionParams::Vlan(v) => return v.act(pkt, cx.mirred.at_ingress()),
            ActionParams::TunnelKey(t) => return t.act(pkt),
            ActionParams::Sample(sa) => return sa.act(pkt, &mut self.psample),
            ActionParams::Ctinfo(ci) => return ci.act(pkt, &mut self.ctinfo),
            ActionParams::Ct(ct) => {
                let (c, drop) = match cx.conntrack.as_mut() {
                    Some(table) => ct.act_in(pkt, table, now),
                    None => ct.act(pkt),
                };
                self.stats.drops += u32::from(drop);
                return c;
            }
            ActionParams::Ife(i) => {
                let (c, drop, over) = i.act(pkt, cx.mirred.at_ingress());
                self.stats.drops += u32::from(drop);
                self.stats.overlimits += u32::from(over);
                return c;
            }
            ActionParams::Gate(g) => match self.gate.act(g, pkt.len, now) {
                Ok(c) => return c,
                Err(over) => {
                    self.stats.overlimits += u32::from(over);
                    TC_ACT_SHOT
                }
            },
            // bpf counts a drop only when its program answered `shot`, mpls when it could not edit.
            ActionParams::Bpf(b) => {
                let (c, drop) = b.act(pkt, cx.mirred.at_ingress());
                if drop {
                    self.stats.drops += 1;
                }
                return c;
            }
            ActionParams::Mpls(m) => {
                let (c, drop) = m.act(pkt, cx.mirred.at_ingress());
                if drop {
                    self.stats.drops += 1;
                }
                return c;
            }
            ActionParams::Pedit(p) => {
                let (c, bad) = p.act(pkt);
                if bad {
                    self.stats.overlimits += 1;
                }
                return c;
            }
            ActionParams::Simple(p) => return p.action,
            ActionParams::Skbmod(p) => {
                let (c, over) = p.act(pkt);
                if over {
                    self.stats.overlimits += 1;
                }
                return c;
            }
            ActionParams::Police(p) => {
                let (c, over) = self.police.act(p, len, now);
                if over {
                    self.stats.overlimits += 1;
                }
                c
            }
        };
        if c == TC_ACT_SHOT {
            self.stats.drops += 1;
        }
        c
    }

    /// `tcf_mirred_act`: past the recursion limits nothing is counted; a failure to send counts an
    /// overlimit, never a drop (mirred does not count what it shoots).
    #[cold]
    fn act_mirred(&mut self, m: mirred::Mirred, pkt: &mut Packet, cx: &mut Cx) -> Control {
        let len = pkt.hook_len(cx.mirred.at_ingress());
        let (c, counted) = m.act(pkt, &mut cx.mirred, self.index);
        if let Some(over) = counted {
            self.used(cx.now);
            self.stats.bytes += len as u64;
            self.stats.packets += 1;
            if over {
                self.stats.overlimits += 1;
            }
        }
        c
    }
}

/// An action as a command asks for it: new parameters, or an existing one named by index.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionSpec {
    pub kind: String,
    /// `None` when only `action KIND index N` was given (bind to an existing action).
    pub params: Option<ActionParams>,
    pub index: u32,
    pub cookie: Option<Vec<u8>>,
    pub flags: u32,
}

/// The per-kind action tables (`tcf_idrinfo` of every action kind) of one network namespace.
#[derive(Default)]
pub struct ActionTable {
    by_kind: BTreeMap<String, BTreeMap<u32, ActionRef>>,
}

thread_local! {
    /// The action table a snapshot is being decoded against: the filters' actions are saved as
    /// (kind, index) and found here again, shared as they were ([`crate::snapshot`]).
    static DECODING: RefCell<Option<ActionTable>> = const { RefCell::new(None) };
}

/// The actions of every table, by kind and index.
impl serde::Serialize for ActionTable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.by_kind.len()))?;
        for (kind, m) in &self.by_kind {
            let actions: Vec<std::cell::Ref<Action>> = m.values().map(|a| a.borrow()).collect();
            let actions: Vec<&Action> = actions.iter().map(|a| &**a).collect();
            seq.serialize_element(&(kind, actions))?;
        }
        seq.end()
    }
}

/// The table is made the one the filters decoded after it bind to ([`ActionTable::finish_decoding`]
/// ends that).
impl<'de> serde::Deserialize<'de> for ActionTable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ActionTable, D::Error> {
        let kinds = Vec::<(String, Vec<Action>)>::deserialize(d)?;
        let by_kind: BTreeMap<String, BTreeMap<u32, ActionRef>> = kinds
            .into_iter()
            .map(|(k, v)| {
                let m = v
                    .into_iter()
                    .map(|a| (a.index, Rc::new(RefCell::new(a))))
                    .collect();
                (k, m)
            })
            .collect();
        DECODING.with(|t| {
            *t.borrow_mut() = Some(ActionTable {
                by_kind: by_kind.clone(),
            })
        });
        Ok(ActionTable { by_kind })
    }
}

impl ActionTable {
    /// The end of a snapshot's decoding: filters no longer bind to the table decoded.
    pub(crate) fn finish_decoding() {
        DECODING.with(|t| t.borrow_mut().take());
    }

    /// A filter's action by kind and index, in the table a snapshot is being decoded against.
    pub(crate) fn decoded(kind: &str, index: u32) -> Option<ActionRef> {
        DECODING.with(|t| t.borrow().as_ref().and_then(|t| t.get(kind, index)))
    }
}

fn not_found() -> KernelError {
    KernelError::msg(Errno::NoEntry, "TC action with specified index not found")
}

impl ActionTable {
    /// No action of any kind.
    pub fn is_empty(&self) -> bool {
        self.by_kind.values().all(BTreeMap::is_empty)
    }

    pub fn get(&self, kind: &str, index: u32) -> Option<ActionRef> {
        self.by_kind.get(kind)?.get(&index).cloned()
    }

    /// Every action of a kind, by index (`tcf_dump_walker` order).
    pub fn list(&self, kind: &str) -> Vec<ActionRef> {
        self.by_kind
            .get(kind)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The lowest free index ≥ 1 (`idr_alloc_u32` from 1).
    fn free_index(&self, kind: &str) -> Option<u32> {
        let m = self.by_kind.get(kind);
        let mut want = 1u32;
        if let Some(m) = m {
            for &k in m.keys() {
                if k > want {
                    break;
                }
                if k == want {
                    want = want.checked_add(1)?;
                }
            }
        }
        Some(want)
    }

    /// Check a list of actions before anything is created: `tcf_action_init` validates each one, and a
    /// failure leaves the table as it was. `in_filter` says whether a filter (which can carry `goto
    /// chain`) will hold them.
    pub fn validate(
        &self,
        specs: &[ActionSpec],
        bind: bool,
        replace: bool,
    ) -> Result<(), KernelError> {
        for s in specs {
            let existing = (s.index != 0).then(|| self.get(&s.kind, s.index)).flatten();
            if existing.is_some() && bind {
                continue;
            }
            if let Some(ActionParams::Mirred(m)) = &s.params {
                // `tcf_mirred_init` checks the direction before it looks at whether the index exists.
                if !m.eaction_valid() {
                    return Err(KernelError::invalid("act_mirred: Unknown mirred option"));
                }
                if existing.is_none() && m.dev.is_empty() {
                    return Err(KernelError::invalid(
                        "act_mirred: Must specify device or block",
                    ));
                }
            }
            match (&existing, &s.params) {
                (Some(_), _) if bind => continue,
                (Some(_), _) if !replace => return Err(KernelError::new(Errno::Exists)),
                (None, None) => return Err(not_found()),
                _ => {}
            }
            if let Some(p) = &s.params {
                for c in p.controls() {
                    if !control_valid(c) {
                        return Err(KernelError::invalid("invalid control action"));
                    }
                    if ext_is(c, TC_ACT_GOTO_CHAIN) && !bind {
                        return Err(KernelError::invalid("can't use goto chain with NULL chain"));
                    }
                }
                if let ActionParams::Police(pp) = p {
                    pp.validate()?;
                }
                match p {
                    ActionParams::Pedit(pe) => pe.validate()?,
                    ActionParams::Simple(si) => si.validate()?,
                    ActionParams::Skbmod(sm) => sm.validate()?,
                    ActionParams::Vlan(v) => v.validate()?,
                    ActionParams::Bpf(b) => b.validate()?,
                    ActionParams::Mpls(m) => m.validate()?,
                    ActionParams::TunnelKey(t) => t.validate()?,
                    ActionParams::Sample(sa) => sa.validate()?,
                    ActionParams::Ctinfo(ci) => ci.validate()?,
                    ActionParams::Ct(ct) => ct.validate()?,
                    ActionParams::Gate(g) => g.validate(existing.is_none())?,
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// `tcf_action_init` for a filter: a standalone action it binds must have the filter's skip flags.
    pub fn check_offload_flags(
        &self,
        specs: &[ActionSpec],
        cls_flags: u32,
    ) -> Result<(), KernelError> {
        let mask = ACT_FLAG_SKIP_HW | ACT_FLAG_SKIP_SW;
        for s in specs {
            let Some(a) = (s.index != 0).then(|| self.get(&s.kind, s.index)).flatten() else {
                continue;
            };
            let a = a.borrow();
            let standalone = a.refcnt > a.bindcnt;
            if standalone && a.flags & mask != cls_flags & mask {
                return Err(KernelError::invalid(
                    "Mismatch between action and filter offload flags",
                ));
            }
        }
        Ok(())
    }

    /// Create, replace or bind each action (`tcf_action_init`), after [`ActionTable::validate`].
    /// With `bind`, every returned action counts one more binding.
    pub fn instantiate(
        &mut self,
        specs: &[ActionSpec],
        bind: bool,
        replace: bool,
        now: Nanos,
    ) -> Result<Vec<ActionRef>, KernelError> {
        self.validate(specs, bind, replace)?;
        let mut out = Vec::new();
        for s in specs {
            let existing = (s.index != 0).then(|| self.get(&s.kind, s.index)).flatten();
            let a = match existing {
                Some(a) => {
                    if !bind {
                        if let Some(p) = &s.params {
                            let mut m = a.borrow_mut();
                            m.params = match (p, &m.params) {
                                // A replace keeps what it does not give (`tcf_gate_init`).
                                (ActionParams::Gate(new), ActionParams::Gate(old)) => {
                                    ActionParams::Gate(new.replacing(old))
                                }
                                _ => p.clone(),
                            };
                            m.police = police::PoliceState::new(&m.params, now);
                            m.gate = gate::GateState::new_for(&m.params, now);
                            if s.cookie.is_some() {
                                m.cookie = s.cookie.clone();
                            }
                        }
                    }
                    a
                }
                None => {
                    let params = s.params.clone().ok_or_else(not_found)?;
                    let index = if s.index != 0 {
                        s.index
                    } else {
                        self.free_index(&s.kind)
                            .ok_or_else(|| KernelError::new(Errno::NoBuffers))?
                    };
                    let a = Rc::new(RefCell::new(Action {
                        index,
                        police: police::PoliceState::new(&params, now),
                        psample: sample::Psample::new(index),
                        gate: gate::GateState::new_for(&params, now),
                        ctinfo: ctinfo::CtinfoStats::default(),
                        params,
                        cookie: s.cookie.clone(),
                        flags: s.flags,
                        refcnt: 0,
                        bindcnt: 0,
                        stats: ActionStats::default(),
                        installed: now,
                        lastuse: now,
                        firstuse: None,
                    }));
                    // An inline action is owned by its filter alone: ref 1 bind 1.
                    a.borrow_mut().refcnt = if bind { 0 } else { 1 };
                    self.by_kind
                        .entry(s.kind.clone())
                        .or_default()
                        .insert(index, a.clone());
                    a
                }
            };
            if bind {
                let mut m = a.borrow_mut();
                m.refcnt += 1;
                m.bindcnt += 1;
            }
            out.push(a);
        }
        Ok(out)
    }

    /// A filter lets go of its actions (`tcf_exts_destroy`): unbind, and forget those nobody holds.
    pub fn release_bound(&mut self, actions: &[ActionRef]) {
        for a in actions {
            let (kind, index, gone) = {
                let mut m = a.borrow_mut();
                m.bindcnt = m.bindcnt.saturating_sub(1);
                m.refcnt = m.refcnt.saturating_sub(1);
                (m.kind(), m.index, m.refcnt == 0)
            };
            if gone {
                self.remove(kind, index);
            }
        }
    }

    fn remove(&mut self, kind: &str, index: u32) {
        if let Some(m) = self.by_kind.get_mut(kind) {
            m.remove(&index);
        }
    }

    /// `tc actions delete action KIND index N`: refused while a filter holds it.
    pub fn delete(&mut self, kind: &str, index: u32) -> Result<(), KernelError> {
        let a = self.get(kind, index).ok_or_else(not_found)?;
        let mut m = a.borrow_mut();
        if m.bindcnt > 0 {
            return Err(KernelError::msg(Errno::Perm, "Failed to delete TC action"));
        }
        m.refcnt = m.refcnt.saturating_sub(1);
        if m.refcnt == 0 {
            drop(m);
            self.remove(kind, index);
        }
        Ok(())
    }

    /// `tc actions flush action KIND` (`tcf_del_walker`): walks by index and stops at the first bound
    /// action. Returns how many were released and, if it stopped early, the error.
    pub fn flush(&mut self, kind: &str) -> (u32, Option<KernelError>) {
        let mut n = 0;
        for a in self.list(kind) {
            let (index, bound) = {
                let m = a.borrow();
                (m.index, m.bindcnt > 0)
            };
            if bound {
                return (n, Some(KernelError::new(Errno::Perm)));
            }
            let mut m = a.borrow_mut();
            m.refcnt = m.refcnt.saturating_sub(1);
            let gone = m.refcnt == 0;
            drop(m);
            if gone {
                self.remove(kind, index);
            }
            n += 1;
        }
        (n, None)
    }
}

/// Grow or shrink the packet's frame by `bytes` (a VLAN tag or an MPLS entry pushed or popped): at
/// ingress its length from here on; on egress the length it leaves its root with, since the root
/// charged it when it arrived (`qdisc_pkt_len`).
pub(crate) fn resize_frame(pkt: &mut Packet, bytes: i32, at_ingress: bool) {
    let by = |l: u32| l.saturating_add_signed(bytes);
    if at_ingress {
        pkt.len = by(pkt.len);
    } else {
        pkt.set_wire_len(Some(by(pkt.wire_len().unwrap_or(pkt.len))));
    }
}

/// `tcf_action_exec`: run a filter's actions in order. `pipe` goes on to the next; `jump N` restarts the
/// list skipping its first N actions (a jump of 0, past the end, or the 32nd jump ends with `ok`); any other
/// code ends the list and is the answer. An empty list answers `ok`.
pub fn exec_list(actions: &[ActionRef], pkt: &mut Packet, cx: &mut Cx) -> Control {
    if cx.mirred.take_skip_classify() {
        // A packet an ifb gives back skips the actions once (`skb_skip_tc_classify`).
        return TC_ACT_OK;
    }
    let mut ret = TC_ACT_OK;
    let mut i = 0;
    let mut jump_ttl = 32;
    while i < actions.len() {
        ret = actions[i].borrow_mut().act(pkt, cx);
        if ext_is(ret, TC_ACT_JUMP) {
            let n = (ret as u32 & TC_ACT_EXT_VAL_MASK) as usize;
            jump_ttl -= 1;
            if n == 0 || n > actions.len() || jump_ttl == 0 {
                return TC_ACT_OK;
            }
            i = n;
            continue;
        }
        if ret != TC_ACT_PIPE {
            return ret;
        }
        i += 1;
    }
    ret
}
