//! A throwaway network namespace holding two veth pairs, `a0`–`b0` and `a1`–`b1`: where the live
//! driver's tests and benchmarks bridge real interfaces (`a0` and `a1`) and send and listen on the
//! far ends (`b1`, `b0`) without touching the host's. IPv6 is off in it, so that the kernel sends
//! nothing of its own on the veths, and every segmentation offload is off, so that a bridge opened
//! there has none to turn off (and forks no offload keeper from a multi-threaded test). The namespace
//! is deleted when the value is dropped, also when a test panics.

use crate::sys;

pub struct VethNs {
    /// The namespace's name: the caller's prefix and this process's id.
    pub name: String,
}

/// Run `ip ARGS`, its error output as the error.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

impl VethNs {
    /// Make `PREFIX-PID` with its veths up (root only).
    pub fn new(prefix: &str) -> Result<VethNs, String> {
        let ns = VethNs {
            name: format!("{prefix}-{}", std::process::id()),
        };
        ip(&["netns", "add", &ns.name])?;
        // From here on a failure drops `ns`, which deletes the namespace.
        for key in ["all", "default"] {
            let var = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            ip(&["netns", "exec", &ns.name, "sysctl", "-q", "-w", &var])?;
        }
        for (a, b) in [("a0", "b0"), ("a1", "b1")] {
            ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b])?;
            for d in [a, b] {
                ns.ip(&["link", "set", "dev", d, "up"])?;
            }
        }
        ns.enter(|| {
            ["a0", "a1", "b0", "b1"]
                .iter()
                .try_for_each(|d| sys::offloads_off(d).map(|_| ()))
        })?
        .map_err(|e| e.to_string())?;
        Ok(ns)
    }

    /// `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Run `f` inside the namespace (sockets opened there stay bound to its interfaces).
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> Result<T, String> {
        sys::in_netns(&format!("/run/netns/{}", self.name), f).map_err(|e| e.to_string())
    }
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}
