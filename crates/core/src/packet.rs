//! A packet as a qdisc sees it: the bytes on the wire plus the kernel's per-skb metadata.
//!
//! `data` starts at the network header (IPv4/IPv6), as an skb does when it reaches the egress qdisc, so that
//! a u32 filter's `at 0` is the first byte of the IP header. `len` is the length the qdiscs account
//! (`qdisc_pkt_len`: the L2 frame, 14 bytes of Ethernet header included), which may be more than `data`
//! carries when a simulated payload is not materialised.

use crate::Nanos;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Bytes from the network header on. May be shorter than `len`; never read past its end.
    pub data: Vec<u8>,
    /// Length on the wire in bytes (`qdisc_pkt_len`).
    pub len: u32,
    /// Netfilter mark (`skb->mark`).
    pub mark: u32,
    /// `skb->priority`: a socket priority (0..15) or, if its major equals a qdisc's handle, a classid.
    pub priority: u32,
    /// Class chosen by classification (`skb->tc_index`/`tc_classid`), 0 if none.
    pub classid: u32,
    /// EtherType (0x0800 IPv4, 0x86dd IPv6).
    pub protocol: u16,
    /// When the packet entered the root qdisc.
    pub enqueue_ns: Nanos,
    /// An identifier the driver can use to follow the packet (flow, sequence); qdiscs ignore it.
    pub tag: u64,
    /// The mark of the packet's connection-tracking entry, when netfilter tracked it (`skb->_nfct`'s
    /// `ct->mark`, read when the packet last passed a netfilter hook); `None` for an untracked packet.
    /// The `connmark` action restores `mark` from it.
    pub ct_mark: Option<u32>,
    /// `skb->skb_iif`: the driver's number (≥ 1) for the device a mirred action took the packet from; 0
    /// if none. An ifb gives a redirected packet back to that device.
    pub iif: u32,
    /// `skb->redirected` and `skb->from_ingress` ([`Packet::REDIRECTED`], [`Packet::FROM_INGRESS`]).
    pub redirect: u8,
    /// The packet's real length while a root size table has `len` say what the qdiscs charge for it
    /// (`qdisc_skb_cb(skb)->pkt_len` beside `skb->len`); restored when the packet leaves the root.
    pub wire_len: Option<u32>,
    /// `skb->tc_depth`: how many times the packet was re-enqueued at a root (netem's duplicate is 1, and
    /// is never duplicated again).
    pub tc_depth: u8,
}

impl Packet {
    /// `redirect` flag: a mirred redirect sent the packet (not a mirror's copy).
    pub const REDIRECTED: u8 = 1;
    /// `redirect` flag: it was redirected from a device's ingress hook.
    pub const FROM_INGRESS: u8 = 2;

    /// A packet of `len` wire bytes with no header bytes, for tests and benchmarks.
    pub fn of_len(len: u32) -> Packet {
        Packet {
            len,
            protocol: 0x0800,
            ..Default::default()
        }
    }

    /// The IPv4 TOS byte, if the packet carries an IPv4 header.
    pub fn ipv4_tos(&self) -> Option<u8> {
        if self.protocol != 0x0800 || self.data.len() < 2 || self.data[0] >> 4 != 4 {
            return None;
        }
        Some(self.data[1])
    }
}
