//! `mirred` (`net/sched/act_mirred.c`): send the packet, or a copy of it, to another device — out of it
//! (`egress`: `dev_queue_xmit`, through that device's root qdisc) or into it (`ingress`: as if the device
//! had received it). `redirect` hands the packet itself over and answers `stolen` by default: the qdisc
//! or ingress hook that classified it is done with it, no drop counted. `mirror` sends a copy and answers
//! `pipe` by default, so the original goes on.
//!
//! The kernel calls the target device's transmit or receive path from inside the action. tclab's engine
//! has no path to call: the action pushes the packet to deliver, its target and what the receiving side
//! needs to know onto [`crate::cx::Cx::mirred`] ([`Mirrored`]), and the driver delivers it as soon as the call that
//! classified it returns — before anything else happens, so the order of events is the kernel's.
//!
//! What the kernel bounds, tclab bounds the same way:
//! - a packet redirected out of a device whose own egress classification redirects it again nests
//!   `dev_queue_xmit` calls; the kernel keeps the devices of that nest (`sched_mirred_dev`) and refuses a
//!   redirect to a device already in it (a loop: the packet is shot, an overlimit counted) or one nest
//!   deeper than [`MIRRED_NEST_LIMIT`]. The driver hands the nest of a delivered packet back in
//!   [`MirredCx::set_nest`] while it enqueues that packet, so the check sees what the kernel's would.
//! - a packet sent to a device's ingress carries a depth (`skb->tc_depth`) that grows by one each time;
//!   at [`MIRRED_DEFER_LIMIT`] it is shot.
//!
//! A target device that is down (`ip link set dev ifb0 down`, or an `ifb` never set up) makes the action
//! count an overlimit, and a redirect shoot the packet (`tcf_mirred_to_dev`'s "to Houston"). When the
//! target device is deleted, the action keeps its name for `tc actions` to print and the driver treats the
//! packet as sent to a device that is gone.

use super::{Control, TC_ACT_QUEUED, TC_ACT_SHOT, TC_ACT_STOLEN, TC_ACT_TRAP};
pub use crate::cx::{MirredCx, Mirrored};
use crate::packet::Packet;

/// `TCA_EGRESS_REDIR` … `TCA_INGRESS_MIRROR` (`include/uapi/linux/tc_act/tc_mirred.h`).
pub const TCA_EGRESS_REDIR: u32 = 1;
pub const TCA_EGRESS_MIRROR: u32 = 2;
pub const TCA_INGRESS_REDIR: u32 = 3;
pub const TCA_INGRESS_MIRROR: u32 = 4;

/// `MIRRED_NEST_LIMIT`: nested egress redirects (`dev_queue_xmit` inside `dev_queue_xmit`).
pub const MIRRED_NEST_LIMIT: usize = 4;
/// `MIRRED_DEFER_LIMIT`: how many times a packet may be sent into a device's receive path.
pub const MIRRED_DEFER_LIMIT: u8 = 3;

/// The parameters of one mirred action (`struct tc_mirred` without the counters).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mirred {
    /// One of the `TCA_*_REDIR`/`TCA_*_MIRROR` codes.
    pub eaction: u32,
    /// The control code the action answers (`stolen` for a redirect, `pipe` for a mirror unless given).
    pub action: Control,
    /// The target device, by name (tc resolved it to an ifindex; tclab's devices are named).
    pub dev: String,
    /// Whether the target is up, down or gone: kept current by the engine
    /// (`Engine::refresh_mirred`, as the kernel's netdevice notifier does for a device that goes away).
    pub target: Target,
}

/// The state of a mirred action's target device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    #[default]
    Up,
    /// `IFF_UP` cleared: "tc mirred to Houston".
    Down,
    /// Unregistered: `tcfm_dev` is NULL.
    Gone,
}

impl Mirred {
    /// `tcf_mirred_is_act_redirect`.
    pub fn is_redirect(&self) -> bool {
        matches!(self.eaction, TCA_EGRESS_REDIR | TCA_INGRESS_REDIR)
    }

    /// `tcf_mirred_act_wants_ingress`.
    pub fn wants_ingress(&self) -> bool {
        matches!(self.eaction, TCA_INGRESS_REDIR | TCA_INGRESS_MIRROR)
    }

    /// `tcf_mirred_init`'s check of `eaction`.
    pub fn eaction_valid(&self) -> bool {
        (TCA_EGRESS_REDIR..=TCA_INGRESS_MIRROR).contains(&self.eaction)
    }

    /// `tcf_mirred_act`: push the packet (redirect) or a copy (mirror) for the driver to deliver, and
    /// answer the control code. The second value says how to count the packet: `None` not at all (past
    /// the recursion limits the kernel returns first), `Some(true)` with an overlimit (not sent).
    pub fn act(&self, pkt: &mut Packet, m: &mut MirredCx, index: u32) -> (Control, Option<bool>) {
        let retval = self.action;
        let redirect = self.is_redirect();
        let ingress = self.wants_ingress();
        let (nest, depth, at_ingress) = m.input();
        if nest.len() >= MIRRED_NEST_LIMIT || depth >= MIRRED_DEFER_LIMIT {
            // "Packet exceeded mirred recursion limit": shot, nothing counted by mirred itself.
            return (TC_ACT_SHOT, None);
        }
        if !ingress && nest.contains(&self.dev) {
            // "tc mirred: loop on device".
            return (if redirect { TC_ACT_SHOT } else { retval }, Some(true));
        }
        if self.target != Target::Up {
            // "tc mirred: target device is gone", or "tc mirred to Houston: device is down".
            return (if redirect { TC_ACT_SHOT } else { retval }, Some(true));
        }
        let mut nest = nest.to_vec();
        if !ingress {
            nest.push(self.dev.clone());
        }
        // At ingress a redirect whose control code lets the packet go hands the packet itself over
        // (`dont_clone`); anywhere else the kernel sends a clone and the original meets the code.
        let consumed = at_ingress
            && redirect
            && matches!(
                retval,
                TC_ACT_SHOT | TC_ACT_STOLEN | TC_ACT_QUEUED | TC_ACT_TRAP
            );
        let out = Mirrored {
            pkt: pkt.clone(),
            dev: self.dev.clone(),
            to_ingress: ingress,
            redirected: redirect,
            from_ingress: at_ingress,
            from_dev: String::new(),
            nest,
            depth: depth + ingress as u8,
            action: index,
        };
        m.push(out);
        // TC_ACT_CONSUMED: gone, and not a drop, whatever the code said.
        (if consumed { TC_ACT_STOLEN } else { retval }, Some(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::TC_ACT_PIPE;

    fn redirect(dev: &str) -> Mirred {
        Mirred {
            eaction: TCA_EGRESS_REDIR,
            action: TC_ACT_STOLEN,
            dev: dev.into(),
            target: Target::Up,
        }
    }

    #[test]
    fn egress_redirect_pushes_the_packet_and_steals_it() {
        let mut m = MirredCx::default();
        let mut p = Packet::of_len(100);
        assert_eq!(
            redirect("ifb0").act(&mut p, &mut m, 1),
            (TC_ACT_STOLEN, Some(false))
        );
        let out = m.take();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].nest, vec!["ifb0".to_string()]);
        assert!(out[0].redirected && !out[0].to_ingress);
    }

    #[test]
    fn a_loop_in_the_egress_nest_is_shot() {
        let mut m = MirredCx::default();
        m.set_nest(vec!["eth1".into(), "eth0".into()], 0);
        let mut p = Packet::of_len(100);
        assert_eq!(
            redirect("eth1").act(&mut p, &mut m, 1),
            (TC_ACT_SHOT, Some(true))
        );
        assert!(m.is_empty());
        let mirror = Mirred {
            eaction: TCA_EGRESS_MIRROR,
            action: TC_ACT_PIPE,
            dev: "eth1".into(),
            target: Target::Up,
        };
        assert_eq!(mirror.act(&mut p, &mut m, 1), (TC_ACT_PIPE, Some(true)));
    }

    #[test]
    fn nest_and_depth_limits() {
        let mut m = MirredCx::default();
        m.set_nest((0..MIRRED_NEST_LIMIT).map(|i| format!("d{i}")).collect(), 0);
        let mut p = Packet::of_len(100);
        assert_eq!(redirect("x").act(&mut p, &mut m, 1), (TC_ACT_SHOT, None));
        m.set_nest(Vec::new(), MIRRED_DEFER_LIMIT);
        assert_eq!(redirect("x").act(&mut p, &mut m, 1), (TC_ACT_SHOT, None));
    }

    #[test]
    fn a_device_that_is_down_refuses() {
        let mut m = MirredCx::default();
        let mut p = Packet::of_len(100);
        let down = Mirred {
            target: Target::Down,
            ..redirect("ifb0")
        };
        assert_eq!(down.act(&mut p, &mut m, 1), (TC_ACT_SHOT, Some(true)));
        assert!(m.is_empty());
    }
}
