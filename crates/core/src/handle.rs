//! Qdisc and class handles: 32 bits, `major:minor`, both halves written in hexadecimal (`1:10` is minor 0x10).
//!
//! As in `include/uapi/linux/pkt_sched.h`: `TC_H_ROOT` (ffff:ffff) names the root of a device,
//! `TC_H_INGRESS` (ffff:fff1) the ingress hook, and a qdisc's own handle has minor 0.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct Handle(pub u32);

impl Handle {
    pub const ROOT: Handle = Handle(0xffff_ffff);
    pub const INGRESS: Handle = Handle(0xffff_fff1);
    pub const UNSPEC: Handle = Handle(0);

    pub const fn new(major: u16, minor: u16) -> Handle {
        Handle(((major as u32) << 16) | minor as u32)
    }
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }
    pub const fn minor(self) -> u16 {
        self.0 as u16
    }
    /// The qdisc handle this class handle belongs to (`1:10` → `1:`).
    pub const fn qdisc(self) -> Handle {
        Handle(self.0 & 0xffff_0000)
    }
    pub const fn is_root(self) -> bool {
        self.0 == Self::ROOT.0
    }
}

/// Prints as iproute2's `print_tc_classid`: `root`, `ingress`, `none`, `1:` for minor 0, `1:10` otherwise.
impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Handle::ROOT => write!(f, "root"),
            Handle::INGRESS => write!(f, "ingress"),
            Handle::UNSPEC => write!(f, "none"),
            h if h.minor() == 0 => write!(f, "{:x}:", h.major()),
            h => write!(f, "{:x}:{:x}", h.major(), h.minor()),
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({self})")
    }
}
