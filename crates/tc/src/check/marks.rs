//! What iptables does for the qdiscs: the classes CLASSIFY rules set, the marks MARK and CONNMARK rules
//! set, and which of those rules a packet can reach.

use tclab_core::netfilter::{IfaceMatch, Rule, Target};
use tclab_core::Engine;

/// The mangle table's rules that set a class, seen once for every device.
pub(super) struct MarkSetters {
    /// CLASSIFY rules: the class they set, and the out-interface they are limited to (`-o`).
    classify: Vec<(u32, Option<IfaceMatch>)>,
}

impl MarkSetters {
    pub(super) fn of(engine: &Engine) -> MarkSetters {
        let classify = rules(engine)
            .filter_map(|(_, r)| match r.target {
                Target::Classify(c) => Some((c, r.ip.outiface.clone())),
                _ => None,
            })
            .collect();
        MarkSetters { classify }
    }

    /// Whether any CLASSIFY rule exists: the policy classifies with iptables.
    pub(super) fn any_classify(&self) -> bool {
        !self.classify.is_empty()
    }

    /// The classes CLASSIFY rules may give a packet leaving `dev`.
    pub(super) fn classify_targets<'a>(&'a self, dev: &'a str) -> impl Iterator<Item = u32> + 'a {
        self.classify
            .iter()
            .filter(move |(_, out)| out.as_ref().is_none_or(|o| o.matches(Some(dev))))
            .map(|&(c, _)| c)
    }
}

/// Every rule of the mangle table, with its chain's name.
fn rules(engine: &Engine) -> impl Iterator<Item = (String, &Rule)> {
    let t = &engine.netfilter().mangle;
    t.builtin
        .iter()
        .zip(tclab_core::netfilter::Hook::ALL)
        .flat_map(|(b, h)| {
            b.chain
                .rules
                .iter()
                .map(move |r| (format!("{h:?}"), r))
        })
        .chain(
            t.user
                .iter()
                .flat_map(|(n, c)| c.rules.iter().map(move |r| (n.clone(), r))),
        )
}
