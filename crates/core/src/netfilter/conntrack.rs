//! Connection tracking, as much of `nf_conntrack` as CONNMARK, connbytes and the state matches need.
//!
//! A connection is known by the tuple of its first packet (the *original* direction) and answers to the
//! inverted tuple too (the *reply* direction): source and destination addresses, the protocol, and ports for
//! TCP and UDP or the identifier for ICMP echo, timestamp and information queries. Each connection carries
//! what the kernel keeps in `struct nf_conn` for the matches: a mark (`ct->mark`), per-direction packet and
//! byte counters (`nf_conn_acct`, always on here, as `xt_connbytes` forces it on), and whether a reply has
//! been seen (`IPS_SEEN_REPLY`), from which the state that `-m state`/`-m conntrack` see follows:
//! NEW until a reply was seen, then ESTABLISHED in both directions; an ICMP error quoting a tracked
//! connection is RELATED to it.
//!
//! The kernel looks a packet up once, in `nf_conntrack_in` at PREROUTING or OUTPUT (priority -200, before
//! mangle), counts it there, and attaches the connection to the skb for the later hooks. tclab's packet has
//! no such pointer, so later hooks look the connection up again by tuple without counting; the answer is the
//! same. A connection whose first packet is dropped before it leaves the box is never confirmed in Linux;
//! here it is forgotten ([`Conntrack::unconfirm`]).
//!
//! Zones (`nf_conntrack_zone`) are separate tables within one: a connection is known by its zone and
//! tuple, so the same packet is a different connection in zone 5 than in zone 0. The netfilter hooks
//! track in zone 0 unless a tc `ct zone N` action gave the packet its connection before them; the `ct`
//! action looks up and commits in its own zone ([`Conntrack::track_in`]).
//!
//! Not modelled: TCP window tracking and its INVALID verdicts, NAT, helpers (no RELATED data connections),
//! the table size limit. Idle timeouts are the kernel's defaults, applied lazily in virtual time.

use crate::wire::{self, Ipv4Header, L4};
use crate::{Nanos, NSEC_PER_SEC};
use std::collections::BTreeMap;

/// The tuple of one direction of a connection (`nf_conntrack_tuple`; the zone is kept beside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tuple {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    /// TCP/UDP source port, ICMP identifier, 0 otherwise.
    pub sport: u16,
    /// TCP/UDP destination port; for ICMP the query type of this direction.
    pub dport: u16,
}

impl Tuple {
    fn invert(&self) -> Tuple {
        let dport = if self.proto == 1 {
            icmp_reply_type(self.dport as u8).map_or(self.dport, |t| t as u16)
        } else {
            self.sport
        };
        Tuple {
            src: self.dst,
            dst: self.src,
            proto: self.proto,
            sport: if self.proto == 1 {
                self.sport
            } else {
                self.dport
            },
            dport,
        }
    }
}

/// ICMP queries and their answers (`invmap` in nf_conntrack_proto_icmp.c).
fn icmp_reply_type(t: u8) -> Option<u8> {
    match t {
        8 => Some(0),
        0 => Some(8),
        13 => Some(14),
        14 => Some(13),
        15 => Some(16),
        16 => Some(15),
        17 => Some(18),
        18 => Some(17),
        _ => None,
    }
}

fn is_icmp_error(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dir {
    Original = 0,
    Reply = 1,
}

/// What `nf_ct_get` tells the matches about a packet (`enum ip_conntrack_info`, folded as `XT_STATE_BIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtInfo {
    New,
    Established,
    Related,
    /// Not trackable (a malformed header, an ICMP message that is neither query nor error about us).
    Invalid,
}

impl CtInfo {
    /// The bit `-m state --state` tests (xt_state.h: INVALID 1, ESTABLISHED 2, RELATED 4, NEW 8).
    pub fn state_bit(self) -> u8 {
        match self {
            CtInfo::Invalid => STATE_INVALID,
            CtInfo::Established => STATE_ESTABLISHED,
            CtInfo::Related => STATE_RELATED,
            CtInfo::New => STATE_NEW,
        }
    }
}

pub const STATE_INVALID: u8 = 1;
pub const STATE_ESTABLISHED: u8 = 2;
pub const STATE_RELATED: u8 = 4;
pub const STATE_NEW: u8 = 8;
pub const STATE_UNTRACKED: u8 = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acct {
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    pub orig: Tuple,
    /// Counters of the original and reply directions.
    pub acct: [Acct; 2],
    /// `ct->mark`.
    pub mark: u32,
    /// The connection's labels (`nf_conn_labels`), as a `ct commit label` set them.
    pub labels: [u8; 16],
    /// Its zone (`nf_ct_zone(ct)->id`).
    pub zone: u16,
    pub seen_reply: bool,
    pub last_seen: Nanos,
}

impl Conn {
    /// Idle timeout: the kernel's defaults (`nf_conntrack_*_timeout*` sysctls).
    fn timeout(&self) -> Nanos {
        let secs = match (self.orig.proto, self.seen_reply) {
            (6, true) => 432_000, // tcp established
            (6, false) => 120,    // syn_sent
            (17, true) => 120,    // udp stream
            (17, false) => 30,
            (1, _) => 30,
            _ => 600,
        };
        secs * NSEC_PER_SEC
    }
}

/// One packet's connection as found by [`Conntrack::lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtRef {
    pub id: u64,
    pub dir: Dir,
    pub info: CtInfo,
}

impl CtRef {
    /// The packet's state as flower's `ct_state` sees it (`fl_ct_info_to_flower_map` over the
    /// `ip_conntrack_info` the kernel would give: a reply-direction packet is `*_REPLY`); an invalid
    /// packet has no connection attached, so no state (0).
    pub fn flower_state(&self) -> u8 {
        use crate::packet::Packet as P;
        let rpl = if self.dir == Dir::Reply {
            P::CT_REPLY
        } else {
            0
        };
        match self.info {
            CtInfo::New => P::CT_TRACKED | P::CT_NEW,
            CtInfo::Established => P::CT_TRACKED | P::CT_ESTABLISHED | rpl,
            CtInfo::Related => P::CT_TRACKED | P::CT_RELATED | rpl,
            CtInfo::Invalid => 0,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Conntrack {
    conns: BTreeMap<u64, Conn>,
    by_tuple: BTreeMap<(u16, Tuple), (u64, Dir)>,
    next_id: u64,
}

/// The tuple of a packet, or why it has none.
enum Key {
    Tuple(Tuple),
    /// An ICMP error: the tuple of the packet it quotes, as seen from the quoted packet's sender.
    Related(Tuple),
    None,
}

/// Whether conntrack can give this IPv4 packet a connection at all: a malformed header, TCP or UDP
/// without ports, or an ICMP message that is neither a query nor an error gets none (INVALID).
pub fn trackable(data: &[u8]) -> bool {
    Ipv4Header::parse(data).is_some_and(|ip| !matches!(key_of(&ip, data), Key::None))
}

fn key_of(ip: &Ipv4Header, data: &[u8]) -> Key {
    match ip.protocol {
        6 | 17 => match wire::ports(ip, data, 8) {
            L4::Some((s, d)) => Key::Tuple(Tuple {
                src: ip.src,
                dst: ip.dst,
                proto: ip.protocol,
                sport: s,
                dport: d,
            }),
            _ => Key::None,
        },
        1 => match wire::icmp(ip, data) {
            L4::Some((t, _, id)) if icmp_reply_type(t).is_some() => Key::Tuple(Tuple {
                src: ip.src,
                dst: ip.dst,
                proto: 1,
                sport: id,
                dport: t as u16,
            }),
            L4::Some((t, _, _)) if is_icmp_error(t) => {
                // The quoted header starts 8 bytes into the ICMP message.
                let inner = &data[(ip.ihl + 8).min(data.len())..];
                match Ipv4Header::parse(inner).map(|v| key_of(&v, inner)) {
                    Some(Key::Tuple(t)) => Key::Related(t),
                    _ => Key::None,
                }
            }
            _ => Key::None,
        },
        p => Key::Tuple(Tuple {
            src: ip.src,
            dst: ip.dst,
            proto: p,
            sport: 0,
            dport: 0,
        }),
    }
}

impl Conntrack {
    pub fn new() -> Conntrack {
        Conntrack::default()
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    pub fn get(&self, id: u64) -> Option<&Conn> {
        self.conns.get(&id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Conn> {
        self.conns.get_mut(&id)
    }

    /// Every connection, in creation order.
    pub fn iter(&self) -> impl Iterator<Item = &Conn> {
        self.conns.values()
    }

    fn find(&self, zone: u16, t: &Tuple, now: Nanos) -> Option<(u64, Dir)> {
        let (id, dir) = *self.by_tuple.get(&(zone, *t))?;
        let c = self.conns.get(&id)?;
        (now < c.last_seen.saturating_add(c.timeout())).then_some((id, dir))
    }

    fn remove(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            self.by_tuple.remove(&(c.zone, c.orig));
            self.by_tuple.remove(&(c.zone, c.orig.invert()));
        }
    }

    fn info(&self, id: u64, dir: Dir) -> CtInfo {
        match (dir, self.conns.get(&id).is_some_and(|c| c.seen_reply)) {
            (Dir::Reply, _) | (_, true) => CtInfo::Established,
            _ => CtInfo::New,
        }
    }

    /// `nf_conntrack_in`: find or create the packet's connection and count the packet (`ip_len` bytes) in
    /// its direction. Called at PREROUTING and OUTPUT, in zone 0.
    pub fn track(&mut self, ip: &Ipv4Header, data: &[u8], now: Nanos) -> Option<CtRef> {
        self.track_in(0, ip, data, now, true)
    }

    /// `nf_conntrack_in` in `zone`: find the packet's connection and count the packet in its direction;
    /// with `create`, make a connection for a first packet (confirmed at once: the hooks and `ct
    /// commit`), else answer `None` for it (`ct` without commit: an unconfirmed entry no later packet
    /// finds).
    pub fn track_in(
        &mut self,
        zone: u16,
        ip: &Ipv4Header,
        data: &[u8],
        now: Nanos,
        create: bool,
    ) -> Option<CtRef> {
        let len = ip.tot_len as u64;
        match key_of(ip, data) {
            Key::None => None,
            Key::Related(t) => {
                let (id, _) = self.find(zone, &t, now)?;
                Some(CtRef {
                    id,
                    dir: Dir::Original,
                    info: CtInfo::Related,
                })
            }
            Key::Tuple(t) => {
                let (id, dir) = match self.find(zone, &t, now) {
                    Some(found) => found,
                    None if !create => return None,
                    None => {
                        // An expired entry under either tuple goes first (`nf_ct_gc_expired`).
                        if let Some(&(old, _)) = self.by_tuple.get(&(zone, t)) {
                            self.remove(old);
                        }
                        if let Some(&(old, _)) = self.by_tuple.get(&(zone, t.invert())) {
                            self.remove(old);
                        }
                        let id = self.next_id;
                        self.next_id += 1;
                        self.conns.insert(
                            id,
                            Conn {
                                orig: t,
                                acct: [Acct::default(); 2],
                                mark: 0,
                                labels: [0; 16],
                                zone,
                                seen_reply: false,
                                last_seen: now,
                            },
                        );
                        self.by_tuple.insert((zone, t), (id, Dir::Original));
                        self.by_tuple.insert((zone, t.invert()), (id, Dir::Reply));
                        (id, Dir::Original)
                    }
                };
                let c = self.conns.get_mut(&id)?;
                let a = &mut c.acct[dir as usize];
                a.packets += 1;
                a.bytes += len;
                c.last_seen = now;
                if dir == Dir::Reply {
                    c.seen_reply = true;
                }
                Some(CtRef {
                    id,
                    dir,
                    info: self.info(id, dir),
                })
            }
        }
    }

    /// The packet's connection at a later hook (the kernel's `skb->_nfct`), without counting it, in
    /// zone 0.
    pub fn lookup(&self, ip: &Ipv4Header, data: &[u8], now: Nanos) -> Option<CtRef> {
        self.lookup_in(0, ip, data, now)
    }

    /// [`Conntrack::lookup`] in `zone`.
    pub fn lookup_in(&self, zone: u16, ip: &Ipv4Header, data: &[u8], now: Nanos) -> Option<CtRef> {
        match key_of(ip, data) {
            Key::None => None,
            Key::Related(t) => self.find(zone, &t, now).map(|(id, _)| CtRef {
                id,
                dir: Dir::Original,
                info: CtInfo::Related,
            }),
            Key::Tuple(t) => self.find(zone, &t, now).map(|(id, dir)| CtRef {
                id,
                dir,
                info: self.info(id, dir),
            }),
        }
    }

    /// A packet was dropped: if it was its connection's only packet, the connection was never confirmed
    /// (`nf_conntrack_confirm` runs last) and is forgotten.
    pub fn unconfirm(&mut self, ct: &CtRef) {
        let lone = self
            .conns
            .get(&ct.id)
            .is_some_and(|c| !c.seen_reply && c.acct[0].packets <= 1 && c.acct[1].packets == 0);
        if lone && ct.info == CtInfo::New {
            self.remove(ct.id);
        }
    }

    /// Drop connections idle past their timeout (`gc_worker`); lookups ignore them anyway.
    pub fn expire(&mut self, now: Nanos) {
        let dead: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| now >= c.last_seen.saturating_add(c.timeout()))
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            self.remove(id);
        }
    }
}
