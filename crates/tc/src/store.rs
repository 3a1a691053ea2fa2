//! The policy store behind `TCLAB_STATE=FILE tclab tc …`.
//!
//! The file is a journal: a JSON document listing, in order, every command that was accepted (tc,
//! `link` and `iptables` lines). Loading replays the journal into a fresh engine; a refused command is never
//! written, so the file always describes a policy that applies cleanly. Replaying rather than snapshotting keeps what
//! only history determines — automatic handles, the kernel's listing order — exactly as a live kernel would
//! have it. Writes go to a temporary file that is renamed over the old one, so a crash cannot truncate it.
//!
//! ```json
//! { "tclab_store": 1, "journal": [ ["link", "set", "dev", "eth0", "mtu", "9000"],
//!                                  ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb"] ] }
//! ```

use serde::{Deserialize, Serialize};
use std::path::Path;
use tclab_core::Engine;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Store {
    pub tclab_store: u32,
    pub journal: Vec<Vec<String>>,
}

impl Store {
    /// Read FILE; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<Store, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a tclab store: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store {
                tclab_store: 1,
                journal: Vec::new(),
            }),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    pub fn save(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Rebuild the engine by replaying the journal. Entries that no longer apply are reported, not fatal.
    pub fn replay(&self) -> (Engine, Vec<String>) {
        let mut engine = Engine::new();
        let mut problems = Vec::new();
        for entry in &self.journal {
            let r = match entry.first().map(String::as_str) {
                Some("tc") => {
                    let out = crate::run(&mut engine, &entry[1..], 0);
                    if out.code == 0 {
                        Ok(())
                    } else {
                        Err(out.stderr)
                    }
                }
                Some("link") => link(&mut engine, &entry[1..]),
                Some("iptables") => {
                    let out = crate::iptables::run(&mut engine, &entry[1..]);
                    if out.code == 0 {
                        Ok(())
                    } else {
                        Err(out.stderr)
                    }
                }
                _ => Err("unknown journal entry".into()),
            };
            if let Err(e) = r {
                problems.push(format!(
                    "journal entry {:?} no longer applies: {}",
                    entry,
                    e.trim_end()
                ));
            }
        }
        (engine, problems)
    }
}

/// `link add|set|del dev DEV [mtu N] [txqueuelen N]`: the devices of an offline policy.
pub fn link(engine: &mut Engine, args: &[String]) -> Result<(), String> {
    let mut it = args.iter().map(String::as_str);
    let cmd = it
        .next()
        .ok_or("usage: link { add | set | del | show } dev DEV [ mtu N ] [ txqueuelen N ]")?;
    let mut dev = None;
    let (mut mtu, mut txq) = (None, None);
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> Result<u32, String> {
            let v = it.next().ok_or(format!("\"{what}\" needs a value"))?;
            v.parse::<u32>()
                .map_err(|_| format!("Error: argument \"{v}\" is wrong: Invalid \"{what}\" value"))
        };
        match a {
            "dev" | "name" => {
                dev = Some(it.next().ok_or("\"dev\" needs a device name")?.to_string())
            }
            "mtu" => mtu = Some(value("mtu")?),
            "txqueuelen" | "qlen" | "txqlen" => txq = Some(value("txqueuelen")?),
            "type" => {
                it.next();
            }
            "up" | "down" => {}
            other if dev.is_none() && !other.starts_with('-') => dev = Some(other.to_string()),
            other => return Err(format!("Error: unknown link option \"{other}\"")),
        }
    }
    let dev = dev.ok_or("Error: no device given (dev NAME)")?;
    if mtu == Some(0) {
        return Err("Error: mtu must be positive".into());
    }
    match cmd {
        "add" | "set" => {
            let d = engine.add_device(&dev, crate::DEFAULT_MTU, crate::DEFAULT_TXQUEUELEN);
            if let Some(m) = mtu {
                d.mtu = m;
            }
            if let Some(t) = txq {
                d.set_txqueuelen(t);
            }
            Ok(())
        }
        "del" | "delete" => engine
            .devices
            .remove(&dev)
            .map(|_| ())
            .ok_or(format!("Cannot find device \"{dev}\"")),
        other => Err(format!("Error: unknown link command \"{other}\"")),
    }
}
