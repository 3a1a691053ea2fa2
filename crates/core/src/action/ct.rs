//! `ct` (`net/sched/act_ct.c`): send the packet through connection tracking from tc — look its
//! connection up (in a zone), optionally `commit` it (confirm the entry, set its mark and labels, NAT
//! it), or `clear` what conntrack attached to the packet. Open vSwitch's and the CNIs' datapaths are
//! built from it: `ct` then a `goto chain` whose flower filters read `ct_state`.
//!
//! On a simulated host the action works on the host's connection table (the driver lends it to the
//! call, [`crate::cx::Cx::conntrack`]), the one its netfilter hooks fill, as the kernel's act_ct and
//! hooks share their netns's — [`Ct::act_in`]:
//!
//! - A packet already carrying a connection of the action's zone keeps it (`tcf_ct_skb_nfct_cached`:
//!   on egress, the one OUTPUT or FORWARD gave it); one of another zone is let go and looked up again.
//! - Otherwise the packet is looked up in the zone's table and counted (`nf_conntrack_in`): a reply
//!   reaching the ingress hook before PREROUTING finds the connection the host's own request made
//!   (`+trk+est`, reply direction); a first packet gets `+trk+new` and an unconfirmed entry, which
//!   only `commit` puts in the table (`nf_conntrack_confirm`), so the next packet is new again
//!   without it. An IPv4 packet conntrack cannot track (no ports where there should be some, an ICMP
//!   message that is neither query nor error) gets `+trk+inv` and nothing to commit.
//! - Zones are separate tables (`nf_conntrack_zone`): `ct zone 5` finds nothing the hooks (zone 0)
//!   tracked. A packet the action gave a connection keeps it through the hooks after it (PREROUTING
//!   neither counts it again nor moves it to zone 0), as the kernel's `skb->_nfct` does; an entry the
//!   action left unconfirmed is confirmed there, as at the end of the kernel's hooks.
//! - `commit` sets the mark as `tcf_ct_act_set_mark` does — `mark | (ct->mark & ~mask)`: the value's
//!   bits outside the mask are set too, as in the kernel — and the labels as `nf_connlabels_replace`
//!   (`(old & ~mask) | (label & mask)`), on the entry: the connection's later packets, `-m connmark`
//!   and CONNMARK, `connmark`/`ctinfo` and flower's `ct_mark`/`ct_label` read them.
//! - `clear` untracks the packet (`nf_ct_set(skb, NULL, IP_CT_UNTRACKED)`): `ct_mark` becomes `None`,
//!   and a later `connmark`/`ctinfo` finds nothing to restore.
//! - A packet that is neither IPv4 nor IPv6 is dropped and counted (`tcf_ct_skb_nf_family` gives
//!   `NFPROTO_UNSPEC`, `goto drop`).
//!
//! Where there is no host table (tc's own tests, `tclab live`'s bridge; and IPv6, which tclab's
//! conntrack does not track) [`Ct::act`] tracks each packet alone: one the hooks tracked keeps its
//! state, an untracked one is `+trk+new` in the action's zone, and `commit` sets the mark and labels
//! on the packet's view of its connection only.
//!
//! Not modelled: NAT (the addresses and ports stay; the range is kept and shown), defragmentation, the
//! flow table offload, `force`, a cleared packet staying untracked through the hooks after it (it is
//! tracked there again). `mark` and `label` without `commit` are stored and shown but do nothing, as in
//! the kernel.

use super::Control;
use crate::error::{Errno, KernelError};
use crate::netfilter::conntrack::Conntrack;
use crate::packet::Packet;
use crate::wire::Ipv4Header;
use crate::Nanos;
use std::net::IpAddr;

/// `TCA_CT_ACT_*`: the `ct_action` flags.
pub const CT_ACT_COMMIT: u16 = 1;
pub const CT_ACT_FORCE: u16 = 2;
pub const CT_ACT_CLEAR: u16 = 4;
pub const CT_ACT_NAT: u16 = 8;
pub const CT_ACT_NAT_SRC: u16 = 16;
pub const CT_ACT_NAT_DST: u16 = 32;

/// The NAT range (`TCA_CT_NAT_*`): addresses of one family, ports in host order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CtNat {
    /// `TCA_CT_NAT_IPV4/IPV6_MIN` and `_MAX` (the minimum again when tc sent no maximum).
    pub addr: Option<(IpAddr, IpAddr)>,
    /// `TCA_CT_NAT_PORT_MIN` and `_MAX`.
    pub ports: Option<(u16, u16)>,
}

/// What tc sends (`TCA_CT_*`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ct {
    pub action: Control,
    /// `TCA_CT_ACTION`: [`CT_ACT_COMMIT`] … [`CT_ACT_NAT_DST`].
    pub ct_action: u16,
    pub zone: u16,
    /// `TCA_CT_MARK` and `TCA_CT_MARK_MASK` (0 when none was given: the kernel then dumps none).
    pub mark: u32,
    pub mark_mask: u32,
    /// `TCA_CT_LABELS` and `_MASK`: 128 bits each, shorter values zero-filled (`nla_memcpy`).
    pub labels: [u8; 16],
    pub labels_mask: [u8; 16],
    pub nat: CtNat,
}

impl Ct {
    pub fn has(&self, flag: u16) -> bool {
        self.ct_action & flag != 0
    }

    /// `tcf_ct_fill_params_nat`'s check (tc refuses the pair first).
    pub fn validate(&self) -> Result<(), KernelError> {
        if self.has(CT_ACT_NAT) && self.has(CT_ACT_NAT_SRC) && self.has(CT_ACT_NAT_DST) {
            return Err(KernelError::msg(
                Errno::NotSupported,
                "dnat and snat can't be enabled at the same time",
            ));
        }
        Ok(())
    }

    /// `tcf_ct_act`: the control code and whether the packet was dropped (counted by the caller).
    pub fn act(&self, pkt: &mut Packet) -> (Control, bool) {
        if self.has(CT_ACT_CLEAR) {
            pkt.ct_mark = None;
            pkt.ct_state = 0;
            pkt.set_ct_zone(0);
            set_labels(pkt, [0; 16]);
            return (self.action, false);
        }
        if !matches!(pkt.protocol, 0x0800 | 0x86dd) {
            return (super::TC_ACT_SHOT, true);
        }
        // `nf_conntrack_in` (or the connection the packet already has, `tcf_ct_skb_nfct_cached`):
        // a packet without one gets the new entry it creates (see the essay), in the action's zone.
        pkt.set_ct_zone(self.zone);
        if pkt.ct_state & Packet::CT_TRACKED == 0 || pkt.ct_state & Packet::CT_INVALID != 0 {
            if pkt.protocol == 0x0800 && !crate::netfilter::conntrack::trackable(&pkt.data) {
                // No connection: `post_ct` without one is what flower sees as +trk+inv, and there is
                // nothing to commit (`if (!ct) goto out_push`).
                pkt.ct_state = Packet::CT_TRACKED | Packet::CT_INVALID;
                return (self.action, false);
            }
            pkt.ct_state = Packet::CT_TRACKED | Packet::CT_NEW;
        }
        if self.has(CT_ACT_COMMIT) {
            self.commit_view(pkt);
        }
        (self.action, false)
    }
}

impl Ct {
    /// `tcf_ct_act` against the host's connection table (IPv4; [`Ct::act`] otherwise, and for
    /// `clear`): a connection of the action's zone the packet already has stays
    /// (`tcf_ct_skb_nfct_cached`); else the packet is looked up in the zone's table and counted
    /// (`nf_conntrack_in`), and a first packet gets `+trk+new` and an entry only `commit` confirms.
    /// `commit` sets the mark and labels on the entry itself, where the connection's later packets,
    /// the netfilter hooks (CONNMARK, `-m connmark`) and later `ct` actions find them.
    pub fn act_in(&self, pkt: &mut Packet, table: &mut Conntrack, now: Nanos) -> (Control, bool) {
        if self.has(CT_ACT_CLEAR) || pkt.protocol != 0x0800 {
            return self.act(pkt);
        }
        let Some(ip) = Ipv4Header::parse(&pkt.data) else {
            return self.act(pkt);
        };
        let (zone, commit) = (self.zone, self.has(CT_ACT_COMMIT));
        let cached = pkt.ct_state & Packet::CT_TRACKED != 0
            && pkt.ct_state & Packet::CT_INVALID == 0
            && pkt.ct_zone() == zone;
        pkt.set_ct_zone(zone);
        if !cached {
            if !crate::netfilter::conntrack::trackable(&pkt.data) {
                pkt.ct_state = Packet::CT_TRACKED | Packet::CT_INVALID;
                pkt.ct_mark = None;
                set_labels(pkt, [0; 16]);
                return (self.action, false);
            }
            let found = table.track_in(zone, &ip, &pkt.data, now, commit);
            let conn = found.and_then(|r| Some((r, table.get(r.id)?)));
            pkt.ct_state = conn.map_or(Packet::CT_TRACKED | Packet::CT_NEW, |(r, _)| {
                r.flower_state()
            });
            pkt.ct_mark = Some(conn.map_or(0, |(_, c)| c.mark));
            set_labels(pkt, conn.map_or([0; 16], |(_, c)| c.labels));
        }
        if commit {
            // `nf_conntrack_confirm`: the entry is in the table from here on (a cached view the
            // table lacks, from an earlier action's unconfirmed entry, is confirmed now).
            let id = match table.lookup_in(zone, &ip, &pkt.data, now) {
                Some(r) => Some(r.id),
                None => table
                    .track_in(zone, &ip, &pkt.data, now, true)
                    .map(|r| r.id),
            };
            self.commit_view(pkt);
            if let Some(c) = id.and_then(|id| table.get_mut(id)) {
                c.mark = pkt.ct_mark.unwrap_or(0);
                c.labels = pkt.ct_labels();
            }
        }
        (self.action, false)
    }

    /// `commit`'s mark (`tcf_ct_act_set_mark`) and labels (`tcf_ct_act_set_labels`) on the packet's
    /// view of its connection.
    fn commit_view(&self, pkt: &mut Packet) {
        let old = pkt.ct_mark.unwrap_or(0);
        // With no mark given the mask is 0 and the connection's mark stays.
        let new = if self.mark_mask == 0 {
            old
        } else {
            self.mark | (old & !self.mark_mask)
        };
        pkt.ct_mark = Some(new);
        // Nothing without a mask, else `nf_connlabels_replace`.
        if self.labels_mask != [0; 16] {
            let old = pkt.ct_labels();
            let m = &self.labels_mask;
            set_labels(
                pkt,
                std::array::from_fn(|i| (old[i] & !m[i]) | (self.labels[i] & m[i])),
            );
        }
    }
}

/// The labels of the packet's connection, kept in its extension only when there are some.
pub fn set_labels(pkt: &mut Packet, labels: [u8; 16]) {
    pkt.set_ct_labels(labels);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::{TC_ACT_PIPE, TC_ACT_SHOT};

    fn ct(ct_action: u16, mark: u32, mask: u32) -> Ct {
        Ct {
            action: TC_ACT_PIPE,
            ct_action,
            zone: 0,
            mark,
            mark_mask: mask,
            labels: [0; 16],
            labels_mask: [0; 16],
            nat: CtNat {
                addr: None,
                ports: None,
            },
        }
    }

    fn udp() -> Packet {
        Packet::udp4([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, 0, 200)
    }

    #[test]
    fn commit_sets_the_mark_as_the_kernel_does() {
        // tcf_ct_act_set_mark: 0x42 | (0x1234 & !0xf0) = 0x1246 — the value's 0x02 outside the mask
        // is set as well.
        let mut p = udp();
        p.ct_mark = Some(0x1234);
        assert_eq!(
            ct(CT_ACT_COMMIT, 0x42, 0xf0).act(&mut p),
            (TC_ACT_PIPE, false)
        );
        assert_eq!(p.ct_mark, Some(0x1246));
        // An untracked packet gets the entry commit creates (mark 0 before).
        let mut q = udp();
        ct(CT_ACT_COMMIT, 0x42, !0).act(&mut q);
        assert_eq!(q.ct_mark, Some(0x42));
        // Without commit the mark is not applied; without a mark commit keeps the connection's.
        let mut r = udp();
        r.ct_mark = Some(7);
        ct(0, 0x42, !0).act(&mut r);
        ct(CT_ACT_COMMIT, 0, 0).act(&mut r);
        assert_eq!(r.ct_mark, Some(7));
    }

    #[test]
    fn clear_untracks_and_non_ip_is_dropped() {
        let mut p = udp();
        p.ct_mark = Some(9);
        assert_eq!(ct(CT_ACT_CLEAR, 0, 0).act(&mut p), (TC_ACT_PIPE, false));
        assert_eq!(p.ct_mark, None);
        let mut arp = udp();
        arp.protocol = 0x0806;
        assert_eq!(ct(0, 0, 0).act(&mut arp), (TC_ACT_SHOT, true));
        // clear comes first: a non-IP packet is only untracked.
        assert_eq!(ct(CT_ACT_CLEAR, 0, 0).act(&mut arp), (TC_ACT_PIPE, false));
    }

    fn reply() -> Packet {
        Packet::udp4([10, 0, 0, 2], 2, [10, 0, 0, 1], 1, 0, 200)
    }

    /// Zone `zone`, with `commit` and a mark when `mark` is given.
    fn zoned(zone: u16, mark: Option<u32>) -> Ct {
        let mut c = match mark {
            Some(m) => ct(CT_ACT_COMMIT, m, !0),
            None => ct(0, 0, 0),
        };
        c.zone = zone;
        c
    }

    const NEW: u8 = Packet::CT_TRACKED | Packet::CT_NEW;
    const EST: u8 = Packet::CT_TRACKED | Packet::CT_ESTABLISHED;

    #[test]
    fn zones_are_separate_tables() {
        let mut t = Conntrack::new();
        // The host's hooks track the flow in zone 0 (OUTPUT), as a sent packet carries it to egress.
        let mut p = udp();
        let ip = Ipv4Header::parse(&p.data).unwrap();
        let r = t.track(&ip, &p.data, 0).unwrap();
        p.ct_state = r.flower_state();
        p.ct_mark = Some(0);
        // `ct zone 5`: another zone's connection is let go and the packet looked up in zone 5's
        // table, where it is new; without commit nothing is kept there.
        assert_eq!(
            zoned(5, None).act_in(&mut p, &mut t, 1),
            (TC_ACT_PIPE, false)
        );
        assert_eq!((p.ct_state, p.ct_zone()), (NEW, 5));
        assert_eq!(t.len(), 1, "an uncommitted entry is not confirmed");
        // Committed, it is: a second connection of the same tuple, zone 5's, with its mark.
        let mut p = udp();
        zoned(5, Some(0x42)).act_in(&mut p, &mut t, 2);
        assert_eq!((p.ct_state, p.ct_mark), (NEW, Some(0x42)));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.iter().map(|c| (c.zone, c.mark)).collect::<Vec<_>>(),
            [(0, 0), (5, 0x42)]
        );
        // The reply, in zone 5: established, in the reply direction, with the committed mark; the
        // next packet of the flow, through `ct zone 5` alone, sees the mark too.
        let mut q = reply();
        zoned(5, None).act_in(&mut q, &mut t, 3);
        assert_eq!(
            (q.ct_state, q.ct_mark),
            (EST | Packet::CT_REPLY, Some(0x42))
        );
        let mut p = udp();
        zoned(5, None).act_in(&mut p, &mut t, 4);
        assert_eq!((p.ct_state, p.ct_mark), (EST, Some(0x42)));
        // Zone 0's entry saw none of it: the reply and the later packets were zone 5's.
        let z0 = t.iter().find(|c| c.zone == 0).unwrap();
        assert_eq!(
            (z0.seen_reply, z0.acct[0].packets, z0.acct[1].packets),
            (false, 1, 0)
        );
    }

    #[test]
    fn ingress_finds_the_hosts_connection() {
        // A host sent a request (OUTPUT tracks it in zone 0); its reply reaches the ingress hook
        // untracked, before PREROUTING. `ct` there looks it up in the host's table, as the kernel's
        // shared table answers: established, reply direction — not new.
        let mut nf = crate::netfilter::Netfilter::default();
        let mut p = udp();
        nf.hook(
            crate::netfilter::Hook::LocalOut,
            &mut p,
            None,
            Some("eth0"),
            0,
        );
        let mut q = reply();
        ct(0, 0, 0).act_in(&mut q, &mut nf.conntrack, 1);
        assert_eq!(q.ct_state, EST | Packet::CT_REPLY);
        let c = nf.conntrack.iter().next().unwrap();
        assert_eq!(
            (c.acct[0].packets, c.acct[1].packets),
            (1, 1),
            "counted by the action"
        );
        // PREROUTING finds the connection the packet carries and does not count it again.
        nf.hook(
            crate::netfilter::Hook::PreRouting,
            &mut q,
            Some("eth0"),
            None,
            1,
        );
        let c = nf.conntrack.iter().next().unwrap();
        assert_eq!(c.acct[1].packets, 1);
        assert_eq!(q.ct_state, EST | Packet::CT_REPLY);
    }

    #[test]
    fn the_hooks_keep_a_zone_the_action_gave() {
        // `ct zone 7 commit` at ingress, then PREROUTING: the packet's connection is zone 7's, which
        // the hooks use (its mark for -m connmark), and zone 0's table stays empty.
        let mut nf = crate::netfilter::Netfilter::default();
        let mut p = udp();
        zoned(7, Some(9)).act_in(&mut p, &mut nf.conntrack, 0);
        nf.hook(
            crate::netfilter::Hook::PreRouting,
            &mut p,
            Some("eth0"),
            None,
            0,
        );
        assert_eq!((p.ct_zone(), p.ct_mark, p.ct_state), (7, Some(9), NEW));
        assert_eq!(nf.conntrack.len(), 1);
        let c = nf.conntrack.iter().next().unwrap();
        assert_eq!((c.zone, c.acct[0].packets), (7, 1));
        // Without the action, the same packet is zone 0's.
        let mut p = udp();
        nf.hook(
            crate::netfilter::Hook::PreRouting,
            &mut p,
            Some("eth0"),
            None,
            0,
        );
        assert_eq!((p.ct_zone(), nf.conntrack.len()), (0, 2));
    }

    #[test]
    fn snat_and_dnat_together_are_refused() {
        let both = ct(
            CT_ACT_COMMIT | CT_ACT_NAT | CT_ACT_NAT_SRC | CT_ACT_NAT_DST,
            0,
            0,
        );
        let e = both.validate().unwrap_err().to_string();
        assert!(
            e.contains("dnat and snat can't be enabled at the same time"),
            "{e}"
        );
        assert!(ct(CT_ACT_COMMIT | CT_ACT_NAT | CT_ACT_NAT_SRC, 0, 0)
            .validate()
            .is_ok());
    }
}
