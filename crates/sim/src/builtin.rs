//! Scenarios shipped with tclab: `tclab sim NAME` runs one, `tclab sim --show NAME` prints its file.
//!
//! A built-in scenario is the concatenation of TOML parts from `crates/sim/scenarios/`, so that seed 004's
//! lab, its conditioner and its traffic are each written once.

pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    parts: &'static [&'static str],
}

impl Builtin {
    /// The scenario file.
    pub fn toml(&self) -> String {
        self.parts.concat()
    }
}

const SEED000_LAB: &str = include_str!("../scenarios/seed000/lab.toml");
const SEED004_LAB: &str = include_str!("../scenarios/seed004/lab.toml");
const SEED004_CONDITIONER: &str = include_str!("../scenarios/seed004/conditioner.toml");
const SEED004_PING: &str = include_str!("../scenarios/seed004/ping.toml");
const SEED004_UPLOAD: &str = include_str!("../scenarios/seed004/upload.toml");
const SEED004_DOWNLOAD: &str = include_str!("../scenarios/seed004/download.toml");

pub const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "seed000-tbf",
        description: "seed 000's lab: TBF 180kbit latency 20ms buffer 1540 on the router, 30 UDP streams, a ping",
        parts: &[include_str!("../scenarios/seed000-tbf.toml")],
    },
    Builtin {
        name: "seed000-htb-180kbit",
        description: "seed 000: HTB one class 180kbit with its default pfifo leaf, UDP flood, ping (the seed: 65 s)",
        parts: &[
            "name = \"seed 000: HTB rate 180kbit, default leaf\"\nduration = \"100s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-180kbit.toml"),
        ],
    },
    Builtin {
        name: "seed000-htb-2mbit",
        description: "seed 000: HTB one class 2mbit with its default pfifo leaf, UDP flood, ping (the seed: 6 s)",
        parts: &[
            "name = \"seed 000: HTB rate 2mbit, default leaf\"\nduration = \"30s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-2mbit.toml"),
        ],
    },
    Builtin {
        name: "seed000-htb-128mbit",
        description: "seed 000: HTB one class 128mbit with its default pfifo leaf, UDP flood, ping (the seed: 100 ms)",
        parts: &[
            "name = \"seed 000: HTB rate 128mbit, default leaf\"\nduration = \"20s\"\n",
            SEED000_LAB,
            include_str!("../scenarios/seed000/htb-128mbit.toml"),
        ],
    },
    Builtin {
        name: "bench-htb",
        description: "the simulator benchmark: 60 s, 30 TCP streams through a 100 Mbit HTB bottleneck, a ping",
        parts: &[include_str!("../scenarios/bench-htb.toml")],
    },
    Builtin {
        name: "seed004-idle",
        description: "seed 004's ADSL lab, no conditioner, idle line: the baseline ping",
        parts: &["name = \"seed 004: baseline, idle line\"\n", SEED004_LAB, SEED004_PING],
    },
    Builtin {
        name: "seed004-download",
        description: "seed 004's ADSL lab, no conditioner, ping while downloading",
        parts: &["name = \"seed 004: downloading, no conditioner\"\n", SEED004_LAB, SEED004_DOWNLOAD, SEED004_PING],
    },
    Builtin {
        name: "seed004-upload",
        description: "seed 004's ADSL lab, no conditioner, ping while uploading",
        parts: &["name = \"seed 004: uploading, no conditioner\"\n", SEED004_LAB, SEED004_UPLOAD, SEED004_PING],
    },
    Builtin {
        name: "seed004-upload-conditioned",
        description: "seed 004's ADSL lab with the HTB conditioner, ping while uploading",
        parts: &[
            "name = \"seed 004: uploading, with the conditioner\"\n",
            SEED004_LAB,
            SEED004_CONDITIONER,
            SEED004_UPLOAD,
            SEED004_PING,
        ],
    },
    Builtin {
        name: "seed004-download-conditioned",
        description: "seed 004's ADSL lab with the HTB conditioner, ping while downloading",
        parts: &[
            "name = \"seed 004: downloading, with the conditioner\"\n",
            SEED004_LAB,
            SEED004_CONDITIONER,
            SEED004_DOWNLOAD,
            SEED004_PING,
        ],
    },
];

pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_loads() {
        for b in BUILTIN {
            if let Err(e) = crate::scenario::load(b.name, &b.toml(), std::path::Path::new(".")) {
                panic!("built-in {}: {e}", b.name);
            }
        }
    }
}
