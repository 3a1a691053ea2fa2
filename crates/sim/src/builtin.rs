//! Scenarios shipped with tclab: `tclab sim NAME` runs one, `tclab sim --show NAME` prints its file.

pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    pub toml: &'static str,
}

pub const BUILTIN: &[Builtin] = &[Builtin {
    name: "seed000-tbf",
    description: "seed 000's lab: TBF 180kbit latency 20ms buffer 1540 on the router, 30 UDP streams and a ping",
    toml: include_str!("../scenarios/seed000-tbf.toml"),
},
Builtin {
    name: "bench-htb",
    description: "the simulator benchmark: 60 s, 30 TCP streams through a 100 Mbit HTB bottleneck, a ping alongside",
    toml: include_str!("../scenarios/bench-htb.toml"),
}];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_loads() {
        for b in BUILTIN {
            if let Err(e) = crate::scenario::load(b.name, b.toml, std::path::Path::new(".")) {
                panic!("built-in {}: {e}", b.name);
            }
        }
    }
}
