//! `simple` (`net/sched/act_simple.c`): an action that does nothing to the packet but count it and answer
//! its control code (`pipe` by default); it carries a string (`sdata`, at most 31 bytes) that the kernel
//! logs with the packet count on every packet (`simple: STRING_N`). tclab keeps no kernel log: the count
//! is in the action's statistics (`tc -s actions ls action simple`).

use super::Control;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Simple {
    pub action: Control,
    /// `TCA_DEF_DATA`; `None` when the command gave none, which only binding an existing action allows.
    pub data: Option<String>,
}

impl Simple {
    /// `tcf_simp_init`'s check for a new action (or a replacement): it needs its string.
    pub fn validate(&self) -> Result<(), crate::KernelError> {
        match self.data {
            Some(_) => Ok(()),
            None => Err(crate::KernelError::new(crate::error::Errno::Invalid)),
        }
    }
}
