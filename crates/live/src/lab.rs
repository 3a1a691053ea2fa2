//! `tclab lab`: seed 000's three machines as network namespaces on this one.
//!
//! ```text
//!   PREFIX-node-1            PREFIX-router                 PREFIX-node-2
//!   eth0 10.0.1.1/24 ──veth── eth0   tclab live   eth1 ──veth── eth0 10.0.1.2/24
//! ```
//!
//! The router's two interfaces have no address: `tclab live` bridges them in user space with the
//! policy given (written for the router's `eth0`, toward node-1, as seed 000 shaped its downloads; or
//! `eth1`, toward node-2). With `--kernel` the router is a Linux bridge instead and the policy runs on
//! this machine's own tc, for comparing the two on the same wires. IPv6 is off in every namespace (no
//! neighbour discovery chatter in the measurements); every veth end has its segmentation, GRO and
//! checksum offloads off, so that frames on the wire are what a shaper should see.
//!
//! Everything it makes carries the prefix (default `tclab`), and `down` removes every namespace with
//! that prefix and stops the bridge it started, also after a crash. The bridge's log and pid live in
//! `/run/tclab/lab-PREFIX/`.

use crate::sys;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The lab's nodes: (name, address) — the router has none.
pub const NODES: &[(&str, Option<&str>)] = &[
    ("node-1", Some("10.0.1.1")),
    ("router", None),
    ("node-2", Some("10.0.1.2")),
];

pub struct Lab {
    pub prefix: String,
}

/// How `up` shapes: tclab's bridge, or the kernel's bridge with this machine's tc.
pub enum Shaper<'a> {
    /// `tclab live` with this executable, the policy (a file's absolute path) and where it writes its
    /// samples and plots when it stops (`--out`), if any.
    Tclab {
        exe: &'a Path,
        policy: Option<&'a Path>,
        out: Option<&'a Path>,
        /// `--queues N`: threads, one per transmit queue.
        queues: u16,
        /// Receive and transmit rings (false: `--no-ring`, recvmmsg and sendmmsg).
        ring: bool,
        /// AF_XDP sockets instead (`--xdp`).
        xdp: bool,
    },
    /// A Linux bridge; the policy is a shell script or `tc -batch` file run in the router's namespace.
    Kernel { policy: Option<&'a Path> },
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{shown}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String, String> {
    run(Command::new("ip").args(args))
}

/// A process's start time, in clock ticks since boot (`/proc/PID/stat`'s 22nd field), if it runs
/// and is not a zombie. With its pid it names one process, whatever its executable is called.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's name, which may hold spaces and parentheses: state first.
    let mut rest = stat.rsplit(')').next()?.split_whitespace();
    if rest.next()? == "Z" {
        return None;
    }
    rest.nth(18)?.parse().ok()
}

/// Record the bridge's pid in `path` (the pid alone, as a pid file holds it: `kill $(cat
/// live.pid)`) and its start time beside it (`live.start`), so that [`running_pid`] knows it again.
fn write_pid(path: &Path, pid: u32) -> std::io::Result<()> {
    std::fs::write(path, format!("{pid}\n"))?;
    match start_time(pid as i32) {
        Some(t) => std::fs::write(path.with_extension("start"), format!("{t}\n")),
        None => Ok(()),
    }
}

/// The process a pid file written by [`write_pid`] names, while it runs: the same pid and start
/// time (a pid alone may since belong to another process). The executable's name is not looked
/// at: a tclab installed or copied under another name (`tclab-0.3`) is still its bridge, which
/// `down` would otherwise not stop but report crashed, and SIGKILL without its summary.
fn running_pid(path: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    let started = start_time(pid)?;
    match std::fs::read_to_string(path.with_extension("start")) {
        Ok(t) => (t.trim().parse::<u64>().ok()? == started).then_some(pid),
        // A lab of an older tclab, the pid alone: a running `tclab … live` is the bridge.
        Err(_) => {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (words.iter().any(|w| w.ends_with(b"tclab")) && words.contains(&&b"live"[..]))
                .then_some(pid)
        }
    }
}

/// What `down` found: the bridge's log, and its error if it stopped on one.
pub struct Down {
    pub log: String,
    pub bridge_error: Option<String>,
}

impl Lab {
    /// Namespaces, veths and packet sockets need root.
    pub fn check_root() -> Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("tclab lab needs root (network namespaces, veth pairs, packet sockets): run it with sudo".into());
        }
        Ok(())
    }

    pub fn new(prefix: &str) -> Result<Lab, String> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 8
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(format!(
                "--prefix \"{prefix}\": 1 to 8 letters, digits or dashes (it names namespaces and interfaces)"
            ));
        }
        // The names add their own dash (`PREFIX-node-1`): one of the prefix's would double it
        // (`x--node-1`), and a leading one makes `ip netns exec -x-router` read an option.
        // Refused rather than trimmed, so that one lab has one spelling.
        if prefix.starts_with('-') || prefix.ends_with('-') {
            let trimmed = prefix.trim_matches('-');
            let hint = if trimmed.is_empty() {
                String::new()
            } else {
                format!(": --prefix {trimmed} names {trimmed}-node-1, {trimmed}-router, {trimmed}-node-2")
            };
            return Err(format!(
                "--prefix \"{prefix}\": begins or ends with a dash, and tclab adds its own between the prefix and \
                 each node's name{hint}"
            ));
        }
        Ok(Lab {
            prefix: prefix.to_string(),
        })
    }

    /// The namespace of a node (`node-1`, `router`, `node-2`).
    pub fn ns(&self, node: &str) -> String {
        format!("{}-{node}", self.prefix)
    }

    pub fn run_dir(&self) -> PathBuf {
        PathBuf::from(format!("/run/tclab/lab-{}", self.prefix))
    }

    /// The namespaces of this lab that exist now.
    pub fn existing(&self) -> Vec<String> {
        let list = ip(&["netns", "list"]).unwrap_or_default();
        let want: Vec<String> = NODES.iter().map(|(n, _)| self.ns(n)).collect();
        list.lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| want.iter().any(|w| w == n))
            .map(String::from)
            .collect()
    }

    /// Build the lab and start its shaper. A lab of this prefix that exists already is refused.
    pub fn up(&self, shaper: Shaper) -> Result<(), String> {
        self.up_with(shaper, &[])
    }

    /// [`Lab::up`], the policy a script run with `script_args` (`lab up --policy wan.sh -- eth1 20000`).
    pub fn up_with(&self, shaper: Shaper, script_args: &[String]) -> Result<(), String> {
        if !self.existing().is_empty() {
            return Err(format!(
                "a lab with prefix \"{}\" exists already: tclab lab down{} first",
                self.prefix,
                self.prefix_flag()
            ));
        }
        let r = self.build(&shaper, script_args);
        if r.is_err() {
            let _ = self.down();
        }
        r
    }

    /// ` --prefix NAME` for a command line naming this lab, nothing for the default prefix.
    pub fn prefix_flag(&self) -> String {
        if self.prefix == "tclab" {
            String::new()
        } else {
            format!(" --prefix {}", self.prefix)
        }
    }

    fn build(&self, shaper: &Shaper, script_args: &[String]) -> Result<(), String> {
        for (n, _) in NODES {
            ip(&["netns", "add", &self.ns(n)])?;
        }
        let (n1, r, n2) = (self.ns("node-1"), self.ns("router"), self.ns("node-2"));
        // Temporary names carry the prefix (interface names are global until they move).
        let p = &self.prefix;
        let pairs = [
            (format!("{p}-a"), &n1, "eth0", format!("{p}-b"), &r, "eth0"),
            (format!("{p}-c"), &r, "eth1", format!("{p}-d"), &n2, "eth0"),
        ];
        for (a, ans, aname, b, bns, bname) in &pairs {
            ip(&[
                "link", "add", a, "netns", ans, "type", "veth", "peer", "name", b, "netns", bns,
            ])?;
            ip(&["-n", ans, "link", "set", a, "name", aname])?;
            ip(&["-n", bns, "link", "set", b, "name", bname])?;
        }
        for (node, addr) in NODES {
            let ns = self.ns(node);
            run(Command::new("ip").args([
                "netns",
                "exec",
                &ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]))?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let devs: &[&str] = if *node == "router" {
                &["eth0", "eth1"]
            } else {
                &["eth0"]
            };
            for d in devs {
                sys::in_netns(&format!("/run/netns/{ns}"), || sys::offloads_off(d))
                    .and_then(|r| r)
                    .map_err(|e| format!("{ns}: {e}"))?;
                ip(&["-n", &ns, "link", "set", d, "up"])?;
            }
            if let Some(a) = addr {
                ip(&["-n", &ns, "addr", "add", &format!("{a}/24"), "dev", "eth0"])?;
            }
        }
        std::fs::create_dir_all(self.run_dir())
            .map_err(|e| format!("{}: {e}", self.run_dir().display()))?;
        match shaper {
            Shaper::Tclab {
                exe,
                policy,
                out,
                queues,
                ring,
                xdp,
            } => self.start_bridge(exe, *policy, script_args, *out, *queues, (*ring, *xdp)),
            Shaper::Kernel { policy } => {
                ip(&["-n", &r, "link", "add", "br0", "type", "bridge"])?;
                for d in ["eth0", "eth1"] {
                    ip(&["-n", &r, "link", "set", d, "master", "br0"])?;
                }
                ip(&["-n", &r, "link", "set", "br0", "up"])?;
                if let Some(p) = policy {
                    let text =
                        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                    if text.trim_start().starts_with('{') {
                        return Err(format!(
                            "{}: --kernel applies a shell script or a tc -batch file with this machine's tc, not a tclab store",
                            p.display()
                        ));
                    }
                    let script = text.trim_start().starts_with("#!")
                        || text.lines().any(|l| l.trim_start().starts_with("tc "));
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", &r]);
                    if script {
                        c.arg("bash").args(kernel_script_args(p)).args(script_args);
                    } else if script_args.is_empty() {
                        c.args(["tc", "-batch"]).arg(p);
                    } else {
                        return Err(format!(
                            "{}: a tc -batch file, not a shell script: the arguments after `--` go to a script",
                            p.display()
                        ));
                    }
                    let out = c
                        .stdin(Stdio::null())
                        .output()
                        .map_err(|e| format!("{}: {e}", p.display()))?;
                    let said = String::from_utf8_lossy(&out.stderr);
                    // tc -batch stops at a refused line ("Command failed FILE:N") and exits 1; what
                    // it says is read too, so that an error printed on a line tc took (an extack
                    // message) is not missed; its warnings (`Warning: sch_htb: quantum of class … is
                    // big`) are not refusals. A script stops at the first (its exit status says so).
                    let refused = !script
                        && said
                            .lines()
                            .any(|l| !l.trim().is_empty() && !l.starts_with("Warning:"));
                    if !out.status.success() || refused {
                        return Err(format!(
                            "{}: this machine's tc did not apply the policy whole ({}):\n{}",
                            p.display(),
                            out.status,
                            said.trim_end()
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// Start `tclab live` in the router's namespace, detached, and wait until it bridges.
    fn start_bridge(
        &self,
        exe: &Path,
        policy: Option<&Path>,
        script_args: &[String],
        out: Option<&Path>,
        queues: u16,
        (ring, xdp): (bool, bool),
    ) -> Result<(), String> {
        let log_path = self.run_dir().join("live.log");
        let log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns("router")])
            .arg(exe)
            .args(["live", "--dev", "eth0", "--dev", "eth1"]);
        if let Some(p) = policy {
            c.arg("--policy").arg(p);
        }
        if let Some(o) = out {
            c.arg("--out").arg(o);
        }
        if queues > 1 {
            c.args(["--queues", &queues.to_string()]);
        }
        if !ring {
            c.arg("--no-ring");
        }
        if xdp {
            c.arg("--xdp");
        }
        // Last: everything after `--` is the script's.
        if !script_args.is_empty() {
            c.arg("--").args(script_args);
        }
        c.stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .env_remove("TCLAB_CONTROL");
        // Its own session: the shell that ran `tclab lab up` may exit, the bridge stays.
        // SAFETY: setsid is async-signal-safe and allocates nothing, as pre_exec requires.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = c.spawn().map_err(|e| format!("starting tclab live: {e}"))?;
        write_pid(&self.run_dir().join("live.pid"), child.id()).map_err(|e| e.to_string())?;
        let start = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if text.contains("tclab live: bridging") {
                // What the bridge warns about at its start (queues left unshaped) is the user's to see.
                for w in text
                    .lines()
                    .filter(|l| l.starts_with("tclab live: warning:"))
                {
                    eprintln!("{w}");
                }
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "tclab live stopped ({status}):\n{}",
                    text.trim_end()
                ));
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                return Err(format!(
                    "tclab live did not start within 30 s:\n{}",
                    text.trim_end()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The bridge's process, if it runs.
    pub fn bridge_pid(&self) -> Option<i32> {
        running_pid(&self.run_dir().join("live.pid"))
    }

    /// Stop the bridge (SIGTERM: it prints its summary to its log), stop every process left in the
    /// nodes (`exec node-1 -- iperf3 -s -D`), and remove every namespace of the lab and the bridge's
    /// control socket.
    pub fn down(&self) -> Result<Down, String> {
        let running = self.bridge_pid();
        if let Some(pid) = running {
            // SAFETY: plain kill(2) of the bridge we started (checked by bridge_pid).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let start = Instant::now();
            while self.bridge_pid().is_some() && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Some(pid) = self.bridge_pid() {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let log = std::fs::read_to_string(self.run_dir().join("live.log")).unwrap_or_default();
        // tclab prints its errors as "tclab: …"; a bridge that was started but is gone without its
        // summary crashed or was killed.
        let mut bridge_error = log
            .lines()
            .find(|l| l.starts_with("tclab: "))
            .map(|l| l.trim_start_matches("tclab: ").to_string());
        if bridge_error.is_none()
            && running.is_none()
            && self.run_dir().join("live.pid").exists()
            && !log.contains("tclab live: stopped after")
        {
            bridge_error = Some("the bridge had stopped before tclab lab down (crashed or killed); see its log above".into());
        }
        let mut errors = Vec::new();
        for ns in self.existing() {
            // What was started in the node (a daemon) would outlive its namespace's name.
            if let Ok(pids) = ip(&["netns", "pids", &ns]) {
                for pid in pids
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    // SAFETY: plain kill(2) of a process inside the lab's own namespace.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            if ns == self.ns("router") {
                // The bridge's control socket is named after the namespace's inode.
                use std::os::unix::fs::MetadataExt;
                if let Ok(m) = std::fs::metadata(format!("/run/netns/{ns}")) {
                    let _ = std::fs::remove_file(format!("/run/tclab/live-{}.sock", m.ino()));
                }
            }
            if let Err(e) = ip(&["netns", "del", &ns]) {
                errors.push(e);
            }
        }
        let _ = std::fs::remove_dir_all(self.run_dir());
        if errors.is_empty() {
            Ok(Down { log, bridge_error })
        } else {
            Err(errors.join("\n"))
        }
    }

    /// Whether the lab is whole: every node's namespace exists and, if a `tclab live` bridge was
    /// started, it still runs. `tclab lab status` exits 1 otherwise, so that scripts can test it.
    pub fn healthy(&self) -> bool {
        let existing = self.existing();
        let nodes = NODES.iter().all(|(n, _)| existing.contains(&self.ns(n)));
        let bridge = self.bridge_pid().is_some() || !self.run_dir().join("live.pid").exists();
        nodes && bridge
    }

    /// One line per node: its name, namespace and address; then the bridge's state.
    /// How the lab's bridge, no longer running, ended: read from its log ([`bridge_end`]).
    fn bridge_end(&self) -> String {
        bridge_end(&std::fs::read_to_string(self.run_dir().join("live.log")).unwrap_or_default())
    }

    pub fn status(&self) -> String {
        let existing = self.existing();
        if existing.is_empty() {
            return format!(
                "no lab with prefix \"{}\" (tclab lab up{} builds one)\n",
                self.prefix,
                self.prefix_flag()
            );
        }
        let mut s = String::new();
        for (n, addr) in NODES {
            let ns = self.ns(n);
            let here = if existing.contains(&ns) {
                ""
            } else {
                "  (missing)"
            };
            s.push_str(&format!("{n:<8} {:<10} {ns}{here}\n", addr.unwrap_or("-")));
        }
        match self.bridge_pid() {
            Some(pid) => s.push_str(&format!(
                "router bridged by tclab live (pid {pid}); log: {}\n",
                self.run_dir().join("live.log").display()
            )),
            None if self.run_dir().join("live.pid").exists() => s.push_str(&format!(
                "router: no tclab live running: {}; see {}; tclab lab{} down removes the lab\n",
                self.bridge_end(),
                self.run_dir().join("live.log").display(),
                self.prefix_flag()
            )),
            None => {
                s.push_str("router: no tclab live running (a kernel bridge: lab up --kernel)\n")
            }
        }
        s
    }

    /// The lab node this process's network namespace is, if it is one: a namespace under
    /// `/run/netns` that is this one (the same nsfs inode), named `PREFIX-NODE` for a lab whose run
    /// directory exists (so that a namespace of someone else's that happens to end in `-router` is
    /// not taken for a lab's).
    pub fn here() -> Option<(Lab, &'static str)> {
        use std::os::unix::fs::MetadataExt;
        let me = std::fs::metadata("/proc/self/ns/net").ok()?;
        for e in std::fs::read_dir("/run/netns").ok()?.flatten() {
            let Ok(m) = std::fs::metadata(e.path()) else {
                continue;
            };
            if (m.dev(), m.ino()) != (me.dev(), me.ino()) {
                continue;
            }
            let name = e.file_name();
            let Some((prefix, node)) = name.to_str().and_then(node_of) else {
                continue;
            };
            if let Ok(lab) = Lab::new(prefix) {
                if lab.run_dir().is_dir() {
                    return Some((lab, node));
                }
            }
        }
        None
    }

    /// Why `tclab tc` in `node`'s namespace has no tclab live to ask, and where the policy it wants
    /// is instead: node-1 and node-2 never have one (their qdiscs are the kernel's), the router has
    /// none in a `--kernel` lab, or its bridge stopped.
    pub fn no_bridge_here(&self, node: &str) -> String {
        let what = if node == "router" { "the router" } else { node };
        let at = format!(
            "this is {what} of the lab \"{}\" (namespace {}), where no tclab live runs",
            self.prefix,
            self.ns(node)
        );
        let bridged = self.run_dir().join("live.pid").exists();
        if node != "router" {
            let policy = if bridged {
                format!(
                    "the router's bridge's (`tclab lab{} exec router -- tclab tc …`)",
                    self.prefix_flag()
                )
            } else {
                format!(
                    "the router's kernel's, a --kernel lab (`tclab lab{} exec router -- tc …`)",
                    self.prefix_flag()
                )
            };
            return format!(
                "{at}: this node's qdiscs are this kernel's (`tc qdisc show`); the lab's policy is {policy}"
            );
        }
        if bridged {
            return format!(
                "{at}: its bridge is not running: {}; its log: {}; tclab lab{} down removes the lab",
                self.bridge_end(),
                self.run_dir().join("live.log").display(),
                self.prefix_flag()
            );
        }
        format!(
            "{at}: the kernel bridges it (lab up --kernel), so its policy is this kernel's, which `tc` \
             shows and changes"
        )
    }

    /// `ip netns exec` of `node`'s namespace.
    pub fn exec(&self, node: &str, argv: &[String]) -> Result<i32, String> {
        if !NODES.iter().any(|(n, _)| *n == node) {
            return Err(format!(
                "no node \"{node}\": the lab has node-1, router and node-2"
            ));
        }
        let ns = self.ns(node);
        if !self.existing().contains(&ns) {
            return Err(format!(
                "no lab with prefix \"{}\" is up (tclab lab up)",
                self.prefix
            ));
        }
        let (cmd, args) = argv
            .split_first()
            .ok_or("give the command to run: tclab lab exec NODE -- CMD …")?;
        // `ip netns exec` answers a command it cannot run with exit 1, as a failed command would; a
        // shell's 127 (not found) and 126 (not executable) tell a script which it was.
        match find_command(cmd) {
            Some(true) => {}
            Some(false) => {
                eprintln!("tclab lab exec: {cmd}: permission denied (not executable)");
                return Ok(126);
            }
            None => {
                eprintln!("tclab lab exec: {cmd}: command not found");
                return Ok(127);
            }
        }
        let status = Command::new("ip")
            .args(["netns", "exec", &ns, cmd])
            .args(args)
            .status()
            .map_err(|e| format!("ip netns exec: {e}"))?;
        Ok(status
            .code()
            .unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)))
    }
}

/// A lab namespace's name taken apart: (prefix, node) for `PREFIX-node-1`, `PREFIX-router`,
/// `PREFIX-node-2`.
fn node_of(name: &str) -> Option<(&str, &'static str)> {
    NODES.iter().find_map(|&(node, _)| {
        let prefix = name.strip_suffix(node)?.strip_suffix('-')?;
        Some((prefix, node))
    })
}

/// Whether `cmd` names a file to run, as a shell looks for it (a path if it has a slash, else each
/// directory of `PATH`): `Some(true)` executable, `Some(false)` there but not executable, `None`
/// nowhere.
fn find_command(cmd: &str) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.permissions().mode() & 0o111 != 0)
    };
    if cmd.contains('/') {
        return runnable(Path::new(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    let mut seen = None;
    for dir in std::env::split_paths(&path) {
        match runnable(&dir.join(cmd)) {
            Some(true) => return Some(true),
            Some(false) => seen = Some(false),
            None => {}
        }
    }
    seen
}

/// How `lab up --kernel` runs a policy script with this machine's tc: `bash ARGS SCRIPT_ARGS…`. Every command
/// must apply (`set -e`), but a tc deletion that fails is let through: the cleanup a script begins
/// with (`tc qdisc del dev $DEV root 2>/dev/null`) fails on a device that has only its default qdisc
/// and deletes nothing, and Linux's bash goes on past it, as `tclab script run` does. Any other
/// failure is named on stderr with its line and command, which a script that sends tc's message to
/// /dev/null would otherwise stop without. `tc` and its usual absolute paths are functions here, so
/// `$TC` set to either reaches them.
fn kernel_script_args(script: &Path) -> [std::ffi::OsString; 3] {
    const PRELUDE: &str = r#"set -e
exec 9>&2
trap '__tclab_rc=$?; [ -n "${__tclab_said-}" ] || echo "${BASH_SOURCE[0]}:$LINENO: \`$BASH_COMMAND\` exited $__tclab_rc" >&9' ERR
__tclab_tc() {
  command tc "$@" && return 0
  local rc=$? a=("$@")
  while [ ${#a[@]} -gt 0 ] && [ "${a[0]#-}" != "${a[0]}" ]; do a=("${a[@]:1}"); done
  case "${a[1]-}" in d|de|del|dele|delet|delete) return 0 ;; esac
  echo "${BASH_SOURCE[2]}:${BASH_LINENO[1]}: \`tc $*\` exited $rc" >&9
  __tclab_said=1
  return $rc
}
tc() { __tclab_tc "$@"; }
/sbin/tc() { __tclab_tc "$@"; }
/usr/sbin/tc() { __tclab_tc "$@"; }
/bin/tc() { __tclab_tc "$@"; }
/usr/bin/tc() { __tclab_tc "$@"; }
. "$0" "$@"
"#;
    ["-c".into(), PRELUDE.into(), script.into()]
}

/// How a bridge that is no longer running ended, from its log: with an error (tclab prints them as
/// `tclab: …`, after the summary when it stops on one: an interface that went away), stopped by a
/// signal (its summary is there: SIGINT, SIGTERM, SIGHUP), or neither (crashed or killed). Status
/// used to say "crashed or was killed" whatever the log said.
fn bridge_end(log: &str) -> String {
    if let Some(e) = log.lines().find(|l| l.starts_with("tclab: ")) {
        format!(
            "it stopped on an error: {}",
            e.trim_start_matches("tclab: ")
        )
    } else if log.contains("tclab live: stopped after") {
        "a signal stopped it (SIGINT, SIGTERM or SIGHUP)".to_string()
    } else {
        "it crashed or was killed".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid_file(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tclab-lab-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("live.pid")
    }

    /// What `status` and `tclab tc` in the router say of a bridge that stopped, from its log: the
    /// logs of a bridge stopped by SIGINT, one that stopped when a port was deleted, one killed.
    #[test]
    fn how_a_bridge_ended_is_read_from_its_log() {
        let summary =
            "tclab live: bridging eth0 <-> eth1 through htb.sh; SIGINT, SIGTERM or SIGHUP stops\n\n\
                       tclab live: stopped after 95.7 s\neth0: received 12855 frames\n";
        assert_eq!(
            bridge_end(summary),
            "a signal stopped it (SIGINT, SIGTERM or SIGHUP)"
        );
        assert_eq!(
            bridge_end(&format!("{summary}tclab: rlax0: the interface went away\n")),
            "it stopped on an error: rlax0: the interface went away"
        );
        assert_eq!(
            bridge_end("tclab live: bridging eth0 <-> eth1 through htb.sh\n"),
            "it crashed or was killed"
        );
        assert_eq!(bridge_end(""), "it crashed or was killed");
    }

    #[test]
    fn a_lab_namespace_is_taken_apart_into_prefix_and_node() {
        assert_eq!(node_of("tclab-node-1"), Some(("tclab", "node-1")));
        assert_eq!(node_of("a-b-router"), Some(("a-b", "router")));
        assert_eq!(node_of("x-node-2"), Some(("x", "node-2")));
        assert_eq!(node_of("xrouter"), None);
        assert_eq!(node_of("tclab-node-3"), None);
        // Not a prefix a lab can have: `here` then finds no lab (Lab::new refuses it).
        assert_eq!(node_of("-router"), Some(("", "router")));
        assert!(Lab::new("").is_err());
    }

    /// `lab up --kernel`'s script runner against a stand-in `tc` that refuses deletions and the rate
    /// `bogus` (exit 2, as tc does) and logs what it applies. Before, the runner was `bash -e`: a
    /// script's usual first line, `tc qdisc del dev $DEV root 2>/dev/null`, stopped it with an empty
    /// message (the lab's veth has no qdisc of its own to delete).
    #[test]
    fn a_kernel_lab_script_may_delete_what_is_not_there_and_a_refusal_is_named() {
        let dir = std::env::temp_dir().join(format!("tclab-lab-kscript-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("applied");
        let tc = dir.join("tc");
        std::fs::write(
            &tc,
            format!(
                "#!/bin/sh\ncase \" $* \" in *\" del \"*|*\" bogus \"*) echo refused >&2; exit 2 ;; esac\n\
                 echo \"$*\" >> {}\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&tc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let run = |name: &str, text: &str| {
            let script = dir.join(name);
            std::fs::write(&script, text).unwrap();
            let _ = std::fs::remove_file(&log);
            let path = format!(
                "{}:{}",
                dir.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let out = Command::new("bash")
                .args(kernel_script_args(&script))
                .env("PATH", path)
                .output()
                .unwrap();
            let applied = std::fs::read_to_string(&log).unwrap_or_default();
            (out, applied, script)
        };
        // The cleanup lines (tc's own name, an absolute path, an option first) fail and are passed.
        let (out, applied, _) = run(
            "clean.sh",
            "DEV=eth1\ntc qdisc del dev $DEV root 2>/dev/null >/dev/null\n\
             /sbin/tc -s qdisc del dev $DEV ingress 2>/dev/null\n\
             tc qdisc add dev $DEV root handle 1: htb\n",
        );
        assert!(out.status.success(), "{out:?}");
        assert_eq!(applied, "qdisc add dev eth1 root handle 1: htb\n");
        // Any other refusal stops the script there, named by line and command, though the script
        // sent tc's own message to /dev/null.
        let (out, applied, script) = run(
            "bad.sh",
            "DEV=eth1\ntc qdisc add dev $DEV root handle 1: htb\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate bogus 2>/dev/null\n\
             tc class add dev $DEV parent 1: classid 1:2 htb rate 1mbit\n",
        );
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(applied, "qdisc add dev eth1 root handle 1: htb\n");
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!(
            "{}:3: `tc class add dev eth1 parent 1: classid 1:1 htb rate bogus` exited 2",
            script.display()
        );
        assert_eq!(err.trim_end(), want);
        // The script's arguments follow it (`lab up --kernel --policy wan.sh -- eth7`).
        let script = dir.join("args.sh");
        std::fs::write(&script, "tc qdisc add dev $1 root htb\n").unwrap();
        let _ = std::fs::remove_file(&log);
        let out = Command::new("bash")
            .args(kernel_script_args(&script))
            .arg("eth7")
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "qdisc add dev eth7 root htb\n"
        );
        // A failing command that is not tc: its line and command.
        let (out, _, script) = run("other.sh", "true\nfalse\ntc qdisc add dev eth1 root htb\n");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            format!("{}:2: `false` exited 1", script.display())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_prefix_is_refused_with_a_dash_at_either_end() {
        assert_eq!(Lab::new("x-1").unwrap().ns("node-1"), "x-1-node-1");
        let e = Lab::new("x-").err().expect("refused");
        assert!(
            e.contains("ends with a dash") && e.contains("--prefix x names x-node-1"),
            "{e}"
        );
        assert!(Lab::new("-x").is_err());
        let e = Lab::new("--").err().expect("refused");
        assert!(!e.contains("names"), "no prefix to suggest: {e}");
        assert!(
            Lab::new("x_1").is_err() && Lab::new("").is_err() && Lab::new("123456789").is_err()
        );
    }

    #[test]
    fn the_bridge_is_known_by_pid_and_start_time_not_by_its_name() {
        // A process not named tclab stands for a bridge run from a renamed copy; under the
        // name check `down` took it for crashed and SIGKILLed it without its summary.
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        let path = pid_file("named");
        write_pid(&path, child.id()).unwrap();
        assert_eq!(running_pid(&path), Some(child.id() as i32));
        // The pid file holds the pid alone, for `kill $(cat live.pid)`.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", child.id())
        );

        // The same pid with another start time is another process (the pid reused): not ours.
        let start = start_time(child.id() as i32).unwrap();
        let reused = pid_file("reused");
        std::fs::write(&reused, format!("{}\n", child.id())).unwrap();
        std::fs::write(reused.with_extension("start"), format!("{}\n", start + 1)).unwrap();
        assert_eq!(running_pid(&reused), None);

        // Killed and not yet reaped (a zombie), then reaped: not running.
        child.kill().unwrap();
        while start_time(child.id() as i32).is_some() {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(running_pid(&path), None);
        child.wait().unwrap();
        assert_eq!(running_pid(&path), None);
        for p in [path, reused] {
            let _ = std::fs::remove_dir_all(p.parent().unwrap());
        }
    }
}
