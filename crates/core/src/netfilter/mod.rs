//! # Netfilter's mangle table: the packet marks that `fw` filters and `skb->priority` classify by
//!
//! Shaping policies often classify on a mark that iptables put on the packet (`-j MARK`, `-j CONNMARK`), on a
//! class set directly (`-j CLASSIFY`), or on a TOS/DSCP rewritten on the way (`-j DSCP`, `-j TOS`). This
//! module is the part of netfilter that does that: the `mangle` table of `ip_tables`, its rules, and the
//! connection tracking that CONNMARK, connbytes and the state matches rely on.
//!
//! **The table.** Five built-in chains, one per hook a packet passes (PREROUTING on arrival, INPUT for the
//! host, FORWARD for a router, OUTPUT for locally generated packets, POSTROUTING just before the egress
//! qdisc), each with a policy (ACCEPT or DROP) and policy counters; any number of user chains reached by
//! jumps. A rule is an IP part (`-s -d -i -o -p`, each invertible), a list of matches that must all hold, a
//! target, and packet/byte counters.
//!
//! **Traversal** is modelled after `ipt_do_table` (net/ipv4/netfilter/ip_tables.c): rules in order; a rule
//! that matches counts the packet (its IP length, `skb->len` at layer 3) and applies its target. A
//! non-terminal target (MARK, CONNMARK, CLASSIFY, DSCP, TOS, or none) continues with the next rule; ACCEPT
//! and DROP end the table; a jump pushes the return point and enters the user chain; `-g` (goto) enters it
//! without pushing; RETURN, or the end of a user chain, pops; the end of a built-in chain, or a RETURN in
//! it, applies the policy. The jump stack is bounded as the kernel's is (one slot per user chain): a rule
//! set that loops drops the packet instead of spinning.
//!
//! **Matches** follow their `xt_*.c` files: `tcp`/`udp` ports and flags (`xt_tcpudp.c`: later fragments
//! never match, a truncated first fragment is dropped), `icmp`, `multiport`, `length` (IP total length),
//! `connbytes` (per-direction counters, the average packet size), `tos`/`dscp`, `mark`/`connmark`,
//! `state`/`conntrack --ctstate`. **Targets**: `xt_MARK.c` (`mark = (mark & ~mask) ^ value`),
//! `xt_CONNMARK.c` (set, save and restore with nfmask/ctmask), `xt_CLASSIFY.c` (`skb->priority`),
//! `xt_DSCP.c` (DSCP and TOS rewrite the header with an incremental checksum fix).
//!
//! Only IPv4 packets (`protocol == 0x0800`) meet these hooks; anything else passes untouched, as it would
//! pass ip_tables by. The module does no I/O and reads no clock: `now` is passed in, and all tables are
//! ordered maps, so a run is a pure function of its inputs.

pub mod conntrack;

use crate::packet::Packet;
use crate::wire::{self, Ipv4Header, L4};
use crate::Nanos;
use conntrack::{Conntrack, CtInfo, CtRef, Dir};
use std::collections::BTreeMap;
use std::fmt;

/// The five netfilter hooks of IPv4, in `NF_INET_*` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    PreRouting = 0,
    LocalIn = 1,
    Forward = 2,
    LocalOut = 3,
    PostRouting = 4,
}

impl Hook {
    pub const ALL: [Hook; 5] = [
        Hook::PreRouting,
        Hook::LocalIn,
        Hook::Forward,
        Hook::LocalOut,
        Hook::PostRouting,
    ];

    /// The built-in chain's name.
    pub fn chain(self) -> &'static str {
        match self {
            Hook::PreRouting => "PREROUTING",
            Hook::LocalIn => "INPUT",
            Hook::Forward => "FORWARD",
            Hook::LocalOut => "OUTPUT",
            Hook::PostRouting => "POSTROUTING",
        }
    }

    pub fn from_chain(name: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|h| h.chain() == name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NfVerdict {
    Accept,
    Drop,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
}

impl Counters {
    fn add(&mut self, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
    }
}

/// An address criterion (`-s`/`-d`): `(addr & mask) == net`, possibly inverted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AddrMatch {
    /// Already masked, as iptables stores it.
    pub addr: u32,
    pub mask: u32,
    pub invert: bool,
}

/// An interface criterion (`-i`/`-o`): a name, `+` at the end meaning "any suffix".
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IfaceMatch {
    pub name: String,
    pub invert: bool,
}

impl IfaceMatch {
    /// Modelled after `ifname_compare` with iptables' mask: `eth+` matches every name starting with `eth`.
    pub fn matches(&self, dev: Option<&str>) -> bool {
        let dev = dev.unwrap_or("");
        let hit = match self.name.strip_suffix('+') {
            Some(prefix) => dev.starts_with(prefix),
            None => dev == self.name,
        };
        hit != self.invert
    }
}

/// The IP part of a rule (`struct ipt_ip`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IpPart {
    pub src: Option<AddrMatch>,
    pub dst: Option<AddrMatch>,
    pub iniface: Option<IfaceMatch>,
    pub outiface: Option<IfaceMatch>,
    /// Protocol number (0 = all) and inversion.
    pub proto: Option<(u8, bool)>,
}

/// An inclusive port range and its inversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortRange {
    pub min: u16,
    pub max: u16,
    pub invert: bool,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        min: 0,
        max: 0xffff,
        invert: false,
    };
    pub fn is_any(&self) -> bool {
        *self == PortRange::ANY
    }
    fn matches(&self, p: u16) -> bool {
        (p >= self.min && p <= self.max) != self.invert
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpFlags {
    pub mask: u8,
    pub cmp: u8,
    pub invert: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MultiportKind {
    Source,
    Destination,
    Either,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConnbytesDir {
    Original,
    Reply,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConnbytesMode {
    Packets,
    Bytes,
    AvgPkt,
}

/// A match extension (`-m NAME ...`, or the implicit `tcp`/`udp`/`icmp` of `-p`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Match {
    /// `-m comment --comment TEXT`: matches every packet; the text is kept for the listings.
    Comment(String),
    Tcp {
        sport: PortRange,
        dport: PortRange,
        flags: Option<TcpFlags>,
    },
    Udp {
        sport: PortRange,
        dport: PortRange,
    },
    /// `--icmp-type`: type (255 = any), code range, inversion.
    Icmp {
        typ: u8,
        code: (u8, u8),
        invert: bool,
    },
    Multiport {
        kind: MultiportKind,
        /// Single ports are ranges of one.
        ports: Vec<(u16, u16)>,
        invert: bool,
    },
    /// IP total length in `[min, max]` (`xt_length`).
    Length {
        min: u16,
        max: u16,
        invert: bool,
    },
    /// `from > to` encodes an inverted range, as `xt_connbytes` stores it.
    Connbytes {
        from: u64,
        to: u64,
        dir: ConnbytesDir,
        mode: ConnbytesMode,
    },
    Tos {
        value: u8,
        mask: u8,
        invert: bool,
    },
    Dscp {
        dscp: u8,
        invert: bool,
    },
    Mark {
        mark: u32,
        mask: u32,
        invert: bool,
    },
    Connmark {
        mark: u32,
        mask: u32,
        invert: bool,
    },
    /// `-m state --state` (`conntrack == false`) or `-m conntrack --ctstate`: a mask of `conntrack::STATE_*`.
    State {
        mask: u8,
        invert: bool,
        conntrack: bool,
    },
}

/// What `CONNMARK` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConnmarkOp {
    /// `ct->mark = (ct->mark & ~ctmask) ^ ctmark`.
    Set { ctmark: u32, ctmask: u32 },
    /// `ct->mark = (ct->mark & ~ctmask) ^ (skb->mark & nfmask)`.
    Save { nfmask: u32, ctmask: u32 },
    /// `skb->mark = (skb->mark & ~nfmask) ^ (ct->mark & ctmask)`.
    Restore { ctmask: u32, nfmask: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    /// No `-j`: the rule only counts.
    None,
    Accept,
    Drop,
    Return,
    Jump(String),
    Goto(String),
    /// `skb->mark = (skb->mark & ~mask) ^ mark`.
    Mark {
        mark: u32,
        mask: u32,
    },
    Connmark(ConnmarkOp),
    /// `skb->priority = class` (a `major:minor` classid).
    Classify(u32),
    Dscp(u8),
    /// `tos = (tos & ~mask) ^ value`.
    Tos {
        value: u8,
        mask: u8,
    },
}

impl Target {
    /// The name in the `target` column and after `-j`.
    pub fn name(&self) -> &str {
        match self {
            Target::None => "",
            Target::Accept => "ACCEPT",
            Target::Drop => "DROP",
            Target::Return => "RETURN",
            Target::Jump(c) | Target::Goto(c) => c,
            Target::Mark { .. } => "MARK",
            Target::Connmark(_) => "CONNMARK",
            Target::Classify(_) => "CLASSIFY",
            Target::Dscp(_) => "DSCP",
            Target::Tos { .. } => "TOS",
        }
    }

    /// The hooks a target may be used from (`xt_target.hooks`); CLASSIFY only on the way out.
    fn hooks(&self) -> &'static [Hook] {
        match self {
            Target::Classify(_) => &[Hook::Forward, Hook::LocalOut, Hook::PostRouting],
            _ => &Hook::ALL,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rule {
    pub ip: IpPart,
    pub matches: Vec<Match>,
    pub target: Target,
    pub counters: Counters,
}

impl Rule {
    /// Equal as `-D chain RULE` and `-C` compare: everything but the counters.
    pub fn same(&self, other: &Rule) -> bool {
        self.ip == other.ip && self.matches == other.matches && self.target == other.target
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Policy {
    Accept,
    Drop,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Chain {
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Builtin {
    pub chain: Chain,
    pub policy: Policy,
    pub counters: Counters,
}

/// A refusal, worded as libiptc words it (`iptables: <text>.`, exit status 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NfError(pub &'static str);

impl NfError {
    pub const NO_CHAIN: NfError = NfError("No chain/target/match by that name.");
    pub const EXISTS: NfError = NfError("Chain already exists.");
    pub const DEL_INDEX: NfError = NfError("Index of deletion too big.");
    pub const INS_INDEX: NfError = NfError("Index of insertion too big.");
    pub const REPL_INDEX: NfError = NfError("Index of replacement too big.");
    pub const NOT_EMPTY: NfError = NfError("Directory not empty.");
    pub const REFERENCED: NfError = NfError("Too many links.");
    pub const BAD_BUILTIN: NfError = NfError("Bad built-in chain name.");
    pub const BAD_POLICY: NfError = NfError("Bad policy name. Run `dmesg' for more information.");
    pub const INVALID: NfError = NfError("Invalid argument. Run `dmesg' for more information.");
    pub const BAD_RULE: NfError = NfError("Bad rule (does a matching rule exist in that chain?).");
    pub const BUILTIN: NfError = NfError("Can't delete built-in chain.");
    /// `ELOOP` from the table replace (`mark_source_chains`): iptables-legacy prints strerror's text.
    pub const LOOP: NfError = NfError("Too many levels of symbolic links.");
}

impl fmt::Display for NfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iptables: {}", self.0)
    }
}

/// The mangle table: built-in chains by hook, user chains by name (listed sorted, as libiptc sorts them).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Table {
    pub builtin: [Builtin; 5],
    pub user: BTreeMap<String, Chain>,
}

impl Table {
    /// No rule, no user chain, every policy ACCEPT: as a fresh table.
    pub fn is_pristine(&self) -> bool {
        self.user.is_empty()
            && self
                .builtin
                .iter()
                .all(|b| b.chain.rules.is_empty() && b.policy == Policy::Accept)
    }
}

impl Default for Table {
    fn default() -> Table {
        let b = || Builtin {
            chain: Chain::default(),
            policy: Policy::Accept,
            counters: Counters::default(),
        };
        Table {
            builtin: [b(), b(), b(), b(), b()],
            user: BTreeMap::new(),
        }
    }
}

impl Table {
    /// `mark_source_chains`: does a chain reachable from a built-in chain jump (or go) back into itself?
    /// The kernel refuses such a table (ELOOP) when it is committed.
    pub fn has_reachable_loop(&self) -> bool {
        // Depth-first over user chains, colouring: 1 = on the current path, 2 = done.
        fn visit<'a>(t: &'a Table, name: &'a str, colour: &mut BTreeMap<&'a str, u8>) -> bool {
            match colour.get(name) {
                Some(1) => return true,
                Some(_) => return false,
                None => {}
            }
            colour.insert(name, 1);
            if let Some(chain) = t.user.get(name) {
                for (i, r) in chain.rules.iter().enumerate() {
                    // Measured on this kernel with iptables-legacy 1.8.9: a chain whose first rule jumps
                    // unconditionally to the chain itself is let through; any other cycle is refused.
                    let unconditional = r.matches.is_empty() && r.ip == IpPart::default();
                    if i == 0
                        && unconditional
                        && matches!(&r.target, Target::Jump(n) | Target::Goto(n) if n == name)
                    {
                        continue;
                    }
                    if let Target::Jump(next) | Target::Goto(next) = &r.target {
                        if t.user.contains_key(next.as_str()) && visit(t, next, colour) {
                            return true;
                        }
                    }
                }
            }
            colour.insert(name, 2);
            false
        }
        let mut colour = BTreeMap::new();
        self.builtin.iter().any(|b| {
            b.chain.rules.iter().any(|r| match &r.target {
                Target::Jump(next) | Target::Goto(next) => visit(self, next, &mut colour),
                _ => false,
            })
        })
    }

    pub fn chain(&self, name: &str) -> Option<&Chain> {
        match Hook::from_chain(name) {
            Some(h) => Some(&self.builtin[h as usize].chain),
            None => self.user.get(name),
        }
    }

    pub fn chain_mut(&mut self, name: &str) -> Option<&mut Chain> {
        match Hook::from_chain(name) {
            Some(h) => Some(&mut self.builtin[h as usize].chain),
            None => self.user.get_mut(name),
        }
    }

    /// Chain names in listing order: built-ins by hook, then user chains sorted.
    pub fn chain_names(&self) -> Vec<String> {
        Hook::ALL
            .iter()
            .map(|h| h.chain().to_string())
            .chain(self.user.keys().cloned())
            .collect()
    }

    /// How many rules jump or go to `name` (the "references" of `-L`).
    pub fn references(&self, name: &str) -> usize {
        self.all_rules()
            .filter(|r| matches!(&r.target, Target::Jump(c) | Target::Goto(c) if c == name))
            .count()
    }

    fn all_rules(&self) -> impl Iterator<Item = &Rule> {
        self.builtin
            .iter()
            .map(|b| &b.chain)
            .chain(self.user.values())
            .flat_map(|c| c.rules.iter())
    }

    fn get(&mut self, chain: &str) -> Result<&mut Chain, NfError> {
        self.chain_mut(chain).ok_or(NfError::NO_CHAIN)
    }

    fn check_target(&self, rule: &Rule) -> Result<(), NfError> {
        match &rule.target {
            Target::Jump(c) | Target::Goto(c) if !self.user.contains_key(c) => {
                Err(NfError::NO_CHAIN)
            }
            _ => Ok(()),
        }
    }

    /// `-A`. Like every operation here, a refused change leaves the table as it was.
    pub fn append(&mut self, chain: &str, rule: Rule) -> Result<(), NfError> {
        self.check_target(&rule)?;
        self.get(chain)?.rules.push(rule);
        self.validate().inspect_err(|_| {
            self.get(chain).map(|c| c.rules.pop()).ok();
        })
    }

    /// `-I chain [n]` (1-based; one past the end appends).
    pub fn insert(&mut self, chain: &str, n: usize, rule: Rule) -> Result<(), NfError> {
        self.check_target(&rule)?;
        let c = self.get(chain)?;
        if n == 0 || n > c.rules.len() + 1 {
            return Err(NfError::INS_INDEX);
        }
        c.rules.insert(n - 1, rule);
        self.validate().inspect_err(|_| {
            self.get(chain).map(|c| c.rules.remove(n - 1)).ok();
        })
    }

    /// `-R chain n`.
    pub fn replace(&mut self, chain: &str, n: usize, rule: Rule) -> Result<(), NfError> {
        self.check_target(&rule)?;
        let c = self.get(chain)?;
        if n == 0 || n > c.rules.len() {
            return Err(NfError::REPL_INDEX);
        }
        let old = std::mem::replace(&mut c.rules[n - 1], rule);
        self.validate().inspect_err(|_| {
            self.get(chain).map(|c| c.rules[n - 1] = old.clone()).ok();
        })
    }

    /// `-D chain n`.
    pub fn delete_num(&mut self, chain: &str, n: usize) -> Result<(), NfError> {
        let c = self.get(chain)?;
        if n == 0 || n > c.rules.len() {
            return Err(NfError::DEL_INDEX);
        }
        c.rules.remove(n - 1);
        Ok(())
    }

    /// `-D chain RULE`: the first rule equal to it.
    pub fn delete_rule(&mut self, chain: &str, rule: &Rule) -> Result<(), NfError> {
        let c = self.get(chain)?;
        let i = c
            .rules
            .iter()
            .position(|r| r.same(rule))
            .ok_or(NfError::NO_CHAIN)?;
        c.rules.remove(i);
        Ok(())
    }

    /// `-C chain RULE`.
    pub fn check(&self, chain: &str, rule: &Rule) -> Result<(), NfError> {
        let c = self.chain(chain).ok_or(NfError::NO_CHAIN)?;
        if c.rules.iter().any(|r| r.same(rule)) {
            Ok(())
        } else {
            Err(NfError::BAD_RULE)
        }
    }

    /// `-F [chain]`.
    pub fn flush(&mut self, chain: Option<&str>) -> Result<(), NfError> {
        match chain {
            Some(c) => self.get(c)?.rules.clear(),
            None => {
                for b in &mut self.builtin {
                    b.chain.rules.clear();
                }
                for c in self.user.values_mut() {
                    c.rules.clear();
                }
            }
        }
        Ok(())
    }

    /// `-Z [chain [n]]`.
    pub fn zero(&mut self, chain: Option<&str>, n: Option<usize>) -> Result<(), NfError> {
        match chain {
            Some(name) => {
                if let Some(h) = Hook::from_chain(name) {
                    if n.is_none() {
                        self.builtin[h as usize].counters = Counters::default();
                    }
                }
                let c = self.get(name)?;
                match n {
                    Some(n) => {
                        let r = c
                            .rules
                            .get_mut(n.wrapping_sub(1))
                            .ok_or(NfError::NO_CHAIN)?;
                        r.counters = Counters::default();
                    }
                    None => c
                        .rules
                        .iter_mut()
                        .for_each(|r| r.counters = Counters::default()),
                }
            }
            None => {
                for name in self.chain_names() {
                    self.zero(Some(&name), None)?;
                }
            }
        }
        Ok(())
    }

    /// `-N name` (the name was checked by the parser).
    pub fn new_chain(&mut self, name: &str) -> Result<(), NfError> {
        if self.chain(name).is_some() {
            return Err(NfError::EXISTS);
        }
        self.user.insert(name.to_string(), Chain::default());
        Ok(())
    }

    /// `-X [name]`: without a name, every user chain nobody references... as iptables does it, every user
    /// chain, one by one, refusing at the first that is still referenced or not empty.
    pub fn delete_chain(&mut self, name: Option<&str>) -> Result<(), NfError> {
        match name {
            Some(n) => {
                if Hook::from_chain(n).is_some() {
                    return Err(NfError::BUILTIN);
                }
                if !self.user.contains_key(n) {
                    return Err(NfError::NO_CHAIN);
                }
                if self.references(n) > 0 {
                    return Err(NfError::REFERENCED);
                }
                if !self.user[n].rules.is_empty() {
                    return Err(NfError::NOT_EMPTY);
                }
                self.user.remove(n);
                Ok(())
            }
            None => {
                let names: Vec<String> = self.user.keys().cloned().collect();
                for n in names {
                    // A chain referenced only by other user chains goes once they are gone: iptables
                    // deletes user chains in order and the kernel checks only the final table.
                    if !self.user[&n].rules.is_empty() {
                        return Err(NfError::NOT_EMPTY);
                    }
                }
                let referenced = self
                    .builtin
                    .iter()
                    .flat_map(|b| b.chain.rules.iter())
                    .any(|r| matches!(r.target, Target::Jump(_) | Target::Goto(_)));
                if referenced {
                    return Err(NfError::REFERENCED);
                }
                self.user.clear();
                Ok(())
            }
        }
    }

    /// `-E old new`.
    pub fn rename_chain(&mut self, old: &str, new: &str) -> Result<(), NfError> {
        if self.chain(new).is_some() {
            return Err(NfError::EXISTS);
        }
        if Hook::from_chain(old).is_some() {
            return Err(NfError::NO_CHAIN);
        }
        let c = self.user.remove(old).ok_or(NfError::NO_CHAIN)?;
        self.user.insert(new.to_string(), c);
        for b in &mut self.builtin {
            rename_refs(&mut b.chain, old, new);
        }
        for c in self.user.values_mut() {
            rename_refs(c, old, new);
        }
        Ok(())
    }

    /// `-P chain ACCEPT|DROP`.
    pub fn set_policy(&mut self, chain: &str, policy: &str) -> Result<(), NfError> {
        let h = Hook::from_chain(chain).ok_or(NfError::BAD_BUILTIN)?;
        self.builtin[h as usize].policy = match policy {
            "ACCEPT" => Policy::Accept,
            "DROP" => Policy::Drop,
            _ => return Err(NfError::BAD_POLICY),
        };
        Ok(())
    }

    /// What the kernel's `translate_table` checks on every table replacement: a target used only from the
    /// hooks it supports (CLASSIFY from FORWARD, OUTPUT and POSTROUTING), reachability followed through
    /// jumps (`mark_source_chains`).
    fn validate(&self) -> Result<(), NfError> {
        for h in Hook::ALL {
            let mut seen: Vec<&str> = Vec::new();
            let mut todo: Vec<&Chain> = vec![&self.builtin[h as usize].chain];
            while let Some(c) = todo.pop() {
                for r in &c.rules {
                    if !r.target.hooks().contains(&h) {
                        return Err(NfError::INVALID);
                    }
                    if let Target::Jump(n) | Target::Goto(n) = &r.target {
                        if !seen.contains(&n.as_str()) {
                            seen.push(n);
                            if let Some(uc) = self.user.get(n) {
                                todo.push(uc);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn rename_refs(c: &mut Chain, old: &str, new: &str) {
    for r in &mut c.rules {
        if let Target::Jump(n) | Target::Goto(n) = &mut r.target {
            if n == old {
                *n = new.to_string();
            }
        }
    }
}

/// Everything netfilter holds for one host: the mangle table and the connection tracker.
#[derive(Clone, Debug, Default)]
pub struct Netfilter {
    pub mangle: Table,
    pub conntrack: Conntrack,
    /// Connection tracking's hooks are registered in the host (`nf_ct_netns_get`, which a tc `ct`
    /// action's init calls): every packet is tracked at PREROUTING and OUTPUT even with no rule.
    pub ct_hooks: bool,
}

/// What one packet offers the matches at one hook.
struct Cx<'a> {
    hook: Hook,
    ip: Option<Ipv4Header>,
    in_dev: Option<&'a str>,
    out_dev: Option<&'a str>,
    ct: Option<CtRef>,
    /// Set by a match that found a truncated header (`par->hotdrop`).
    hotdrop: bool,
}

impl Netfilter {
    pub fn new() -> Netfilter {
        Netfilter::default()
    }

    /// True when no rule and no DROP policy exists: the hooks would change nothing (conntrack aside).
    pub fn is_empty(&self) -> bool {
        self.mangle.is_pristine()
    }

    /// True when the hooks would change nothing at all: no rule, no DROP policy, no conntrack hooks.
    /// A packet need not be offered to them (`host`'s hooks; the simulator's per-run `nf_idle`).
    pub fn is_idle(&self) -> bool {
        self.is_empty() && !self.ct_hooks
    }

    /// Run the packet through the mangle table's chain for `hook` (`ipt_do_table`), tracking its
    /// connection first at PREROUTING and OUTPUT (`nf_conntrack_in`). `in_dev` is the device it arrived on
    /// (PREROUTING, INPUT, FORWARD), `out_dev` the one it leaves by (FORWARD, OUTPUT, POSTROUTING).
    /// May rewrite `pkt.mark`, `pkt.priority` and the TOS byte of `pkt.data`.
    pub fn hook(
        &mut self,
        hook: Hook,
        pkt: &mut Packet,
        in_dev: Option<&str>,
        out_dev: Option<&str>,
        now: Nanos,
    ) -> NfVerdict {
        if pkt.protocol != 0x0800 {
            return NfVerdict::Accept;
        }
        let ip = Ipv4Header::parse(&pkt.data);
        // The zone of the connection a tc `ct zone N` action gave the packet before the hooks (at
        // ingress): the kernel's `skb->_nfct`, which every hook then uses; zone 0 otherwise.
        let attached =
            pkt.ct_state & Packet::CT_TRACKED != 0 && pkt.ct_state & Packet::CT_INVALID == 0;
        let zone = if attached { pkt.ct_zone() } else { 0 };
        let ct = match (ip, hook) {
            (Some(v), Hook::PreRouting | Hook::LocalOut) => {
                // `nf_conntrack_in` keeps a connection the packet has and counts nothing; one the
                // action made without committing it is confirmed here, as at the end of the hooks.
                match attached.then(|| self.conntrack.lookup_in(zone, &v, &pkt.data, now)) {
                    Some(Some(found)) => Some(found),
                    _ => self.conntrack.track_in(zone, &v, &pkt.data, now, true),
                }
            }
            (Some(v), _) => self.conntrack.lookup_in(zone, &v, &pkt.data, now),
            (None, _) => None,
        };
        let mut cx = Cx {
            hook,
            ip,
            in_dev,
            out_dev,
            ct,
            hotdrop: false,
        };
        let v = self.traverse(&mut cx, pkt);
        if v == NfVerdict::Drop {
            if let Some(ct) = &cx.ct {
                self.conntrack.unconfirm(ct);
            }
        }
        // The skb keeps a reference to its connection; tc's connmark action reads the mark through it,
        // flower's ct_* keys its state, zone and labels.
        let conn = cx.ct.and_then(|ct| self.conntrack.get(ct.id));
        pkt.ct_mark = conn.map(|c| c.mark);
        pkt.ct_state = match (cx.ct, conn) {
            (Some(ct), Some(_)) => ct.flower_state(),
            _ => 0,
        };
        pkt.set_ct_zone(conn.map_or(0, |c| c.zone));
        crate::action::ct::set_labels(pkt, conn.map_or([0; 16], |c| c.labels));
        v
    }

    fn traverse(&mut self, cx: &mut Cx, pkt: &mut Packet) -> NfVerdict {
        let bytes = cx.ip.map_or(pkt.data.len() as u64, |v| v.tot_len as u64);
        let hook = cx.hook;
        // The jump stack holds return points; the kernel sizes it by the number of user chains.
        let max_depth = self.mangle.user.len() + 1;
        let mut stack: Vec<(String, usize)> = Vec::new();
        let mut chain: String = hook.chain().to_string();
        let mut i = 0usize;
        loop {
            let Some(c) = self.mangle.chain(&chain) else {
                return NfVerdict::Drop;
            };
            if i >= c.rules.len() {
                // The end of a chain: a user chain returns, a built-in one applies its policy.
                match stack.pop() {
                    Some((ret, at)) => {
                        chain = ret;
                        i = at;
                        continue;
                    }
                    None => return self.policy(hook, bytes),
                }
            }
            let rule = &c.rules[i];
            let hit = self.rule_matches(rule, cx, pkt);
            if cx.hotdrop {
                return NfVerdict::Drop;
            }
            if !hit {
                i += 1;
                continue;
            }
            let target = rule.target.clone();
            if let Some(r) = self
                .mangle
                .chain_mut(&chain)
                .and_then(|c| c.rules.get_mut(i))
            {
                r.counters.add(bytes);
            }
            match target {
                Target::Accept => return NfVerdict::Accept,
                Target::Drop => return NfVerdict::Drop,
                Target::Return => match stack.pop() {
                    Some((ret, at)) => {
                        chain = ret;
                        i = at;
                    }
                    None => return self.policy(hook, bytes),
                },
                Target::Jump(to) => {
                    if stack.len() >= max_depth {
                        return NfVerdict::Drop;
                    }
                    stack.push((chain, i + 1));
                    chain = to;
                    i = 0;
                }
                Target::Goto(to) => {
                    chain = to;
                    i = 0;
                }
                t => {
                    self.apply(&t, cx, pkt);
                    if matches!(t, Target::Dscp(_) | Target::Tos { .. }) {
                        cx.ip = Ipv4Header::parse(&pkt.data);
                    }
                    i += 1;
                }
            }
        }
    }

    fn policy(&mut self, hook: Hook, bytes: u64) -> NfVerdict {
        let b = &mut self.mangle.builtin[hook as usize];
        b.counters.add(bytes);
        match b.policy {
            Policy::Accept => NfVerdict::Accept,
            Policy::Drop => NfVerdict::Drop,
        }
    }

    /// `ip_packet_match` and then every match of the rule.
    fn rule_matches(&self, rule: &Rule, cx: &mut Cx, pkt: &Packet) -> bool {
        let p = &rule.ip;
        if let Some(m) = &p.iniface {
            if !m.matches(cx.in_dev) {
                return false;
            }
        }
        if let Some(m) = &p.outiface {
            if !m.matches(cx.out_dev) {
                return false;
            }
        }
        let needs_ip = p.src.is_some() || p.dst.is_some() || p.proto.is_some();
        if needs_ip {
            let Some(ip) = cx.ip else { return false };
            for (m, a) in [(p.src, ip.src), (p.dst, ip.dst)] {
                if let Some(m) = m {
                    if ((a & m.mask) == m.addr) == m.invert {
                        return false;
                    }
                }
            }
            if let Some((proto, inv)) = p.proto {
                if proto != 0 && (ip.protocol == proto) == inv {
                    return false;
                }
            }
        }
        rule.matches.iter().all(|m| self.match_one(m, cx, pkt))
    }

    fn match_one(&self, m: &Match, cx: &mut Cx, pkt: &Packet) -> bool {
        let data = &pkt.data;
        match m {
            Match::Comment(_) => true,
            Match::Mark { mark, mask, invert } => ((pkt.mark & mask) == *mark) != *invert,
            Match::Connmark { mark, mask, invert } => match self.conn(cx) {
                Some(c) => ((c.mark & mask) == *mark) != *invert,
                None => false,
            },
            Match::State { mask, invert, .. } => {
                let bit = match cx.ct {
                    Some(ct) => ct.info.state_bit(),
                    None => CtInfo::Invalid.state_bit(),
                };
                (mask & bit != 0) != *invert
            }
            Match::Connbytes {
                from,
                to,
                dir,
                mode,
            } => {
                let Some(c) = self.conn(cx) else { return false };
                let [o, r] = c.acct;
                let (pk, by) = match dir {
                    ConnbytesDir::Original => (o.packets, o.bytes),
                    ConnbytesDir::Reply => (r.packets, r.bytes),
                    ConnbytesDir::Both => (o.packets + r.packets, o.bytes + r.bytes),
                };
                let what = match mode {
                    ConnbytesMode::Packets => pk,
                    ConnbytesMode::Bytes => by,
                    ConnbytesMode::AvgPkt => by.checked_div(pk).unwrap_or(0),
                };
                // Modelled after `connbytes_mt`: from > to is the inverted range.
                if to >= from {
                    what >= *from && what <= *to
                } else {
                    what < *to || what > *from
                }
            }
            _ => {
                let Some(ip) = cx.ip else { return false };
                match m {
                    Match::Length { min, max, invert } => {
                        (ip.tot_len >= *min && ip.tot_len <= *max) != *invert
                    }
                    Match::Tos {
                        value,
                        mask,
                        invert,
                    } => ((ip.tos & mask) == *value) != *invert,
                    Match::Dscp { dscp, invert } => ((ip.tos >> 2) == *dscp) != *invert,
                    Match::Tcp {
                        sport,
                        dport,
                        flags,
                    } => {
                        if ip.protocol != 6 {
                            return false;
                        }
                        let (s, d) = match wire::ports(&ip, data, 20) {
                            L4::Some(p) => p,
                            L4::Absent => return false,
                            L4::Truncated => {
                                cx.hotdrop = true;
                                return false;
                            }
                        };
                        if !sport.matches(s) || !dport.matches(d) {
                            return false;
                        }
                        match flags {
                            Some(f) => match wire::tcp_flags(&ip, data) {
                                L4::Some(b) => ((b & f.mask) == f.cmp) != f.invert,
                                _ => false,
                            },
                            None => true,
                        }
                    }
                    Match::Udp { sport, dport } => {
                        if ip.protocol != 17 {
                            return false;
                        }
                        match wire::ports(&ip, data, 8) {
                            L4::Some((s, d)) => sport.matches(s) && dport.matches(d),
                            L4::Absent => false,
                            L4::Truncated => {
                                cx.hotdrop = true;
                                false
                            }
                        }
                    }
                    Match::Icmp { typ, code, invert } => {
                        if ip.protocol != 1 {
                            return false;
                        }
                        match wire::icmp(&ip, data) {
                            L4::Some((t, c, _)) => {
                                let hit = *typ == 0xff || (t == *typ && c >= code.0 && c <= code.1);
                                hit != *invert
                            }
                            L4::Absent => false,
                            L4::Truncated => {
                                cx.hotdrop = true;
                                false
                            }
                        }
                    }
                    Match::Multiport {
                        kind,
                        ports,
                        invert,
                    } => {
                        if !matches!(ip.protocol, 6 | 17 | 33 | 132 | 136) {
                            return false;
                        }
                        match wire::ports(&ip, data, 4) {
                            L4::Some((s, d)) => {
                                let inr = |p: u16| ports.iter().any(|(a, b)| p >= *a && p <= *b);
                                let hit = match kind {
                                    MultiportKind::Source => inr(s),
                                    MultiportKind::Destination => inr(d),
                                    MultiportKind::Either => inr(s) || inr(d),
                                };
                                hit != *invert
                            }
                            L4::Absent => false,
                            L4::Truncated => {
                                cx.hotdrop = true;
                                false
                            }
                        }
                    }
                    _ => false,
                }
            }
        }
    }

    fn conn(&self, cx: &Cx) -> Option<&conntrack::Conn> {
        cx.ct
            .filter(|c| c.info != CtInfo::Invalid)
            .and_then(|c| self.conntrack.get(c.id))
    }

    fn apply(&mut self, t: &Target, cx: &Cx, pkt: &mut Packet) {
        match *t {
            // Modelled after `mark_tg`.
            Target::Mark { mark, mask } => pkt.mark = (pkt.mark & !mask) ^ mark,
            // Modelled after `connmark_tg_shift` with shift 0.
            Target::Connmark(op) => {
                let Some(id) = cx.ct.map(|c| c.id) else {
                    return;
                };
                let Some(c) = self.conntrack.get_mut(id) else {
                    return;
                };
                match op {
                    ConnmarkOp::Set { ctmark, ctmask } => c.mark = (c.mark & !ctmask) ^ ctmark,
                    ConnmarkOp::Save { nfmask, ctmask } => {
                        c.mark = (c.mark & !ctmask) ^ (pkt.mark & nfmask)
                    }
                    ConnmarkOp::Restore { ctmask, nfmask } => {
                        pkt.mark = (pkt.mark & !nfmask) ^ (c.mark & ctmask)
                    }
                }
            }
            // Modelled after `classify_tg`.
            Target::Classify(class) => pkt.priority = class,
            // Modelled after `dscp_tg`: keep the two ECN bits.
            Target::Dscp(d) => {
                if let Some(ip) = cx.ip {
                    if ip.tos >> 2 != d {
                        wire::change_dsfield(&mut pkt.data, 0x03, d << 2);
                    }
                }
            }
            // Modelled after `tos_tg`.
            Target::Tos { value, mask } => {
                if let Some(ip) = cx.ip {
                    let nv = (ip.tos & !mask) ^ value;
                    if nv != ip.tos {
                        wire::change_dsfield(&mut pkt.data, 0, nv);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The direction a packet travels in its connection, for tests and tools.
pub fn ct_dir(nf: &Netfilter, pkt: &Packet, now: Nanos) -> Option<Dir> {
    let ip = Ipv4Header::parse(&pkt.data)?;
    nf.conntrack.lookup(&ip, &pkt.data, now).map(|c| c.dir)
}

#[cfg(test)]
mod tests;
