//! `tclab`: Linux traffic control in user space. The command line is declared in [`args`]; `tclab tc`,
//! `link` and `iptables` keep iproute2's and iptables' own grammar and go to the tc crate untouched.
//!
//! The policy lives in the file named by `TCLAB_STATE` (default `$XDG_STATE_HOME/tclab/policy.json`, or
//! `~/.local/state/tclab/policy.json`): see `tclab_tc::store`.

mod args;
mod compare;
mod demo;
mod labbench;
mod livecmd;
mod liveout;
mod plot;
mod progress;
mod report;
mod shapebench;
mod sim;
mod sweep;
mod trace;

use args::{usage, CmdResult, Failure, EX_USAGE};
use std::path::PathBuf;
use std::process::ExitCode;
use tclab_tc::store::{Lock, Store};

/// The store's path with symbolic links followed, so that a link to a store is written through (a whole
/// rewrite renames over the target, not over the link) and every name for one store shares its lock.
/// The store's absolute path, which must be UTF-8 text (it travels in control requests, and tclab's
/// messages name it).
fn store_path() -> Result<PathBuf, String> {
    let mut p = std::path::absolute(state_path()).map_err(|e| format!("state file: {e}"))?;
    // One spelling per store, whichever symlinked directory a caller reaches it through: a resident
    // engine answers only for the path it serves.
    if let (Some(dir), Some(name)) = (p.parent(), p.file_name()) {
        if let Ok(real) = std::fs::canonicalize(dir) {
            p = real.join(name);
        }
    }
    if p.to_str().is_none() {
        return Err(format!(
            "the store's path {} (TCLAB_STATE) is not UTF-8 text; choose another",
            p.to_string_lossy()
        ));
    }
    Ok(p)
}

fn state_path() -> PathBuf {
    let mut p = unresolved_state_path();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(t) if t.is_absolute() => p = t,
                Ok(t) => p = p.parent().unwrap_or(std::path::Path::new(".")).join(t),
                Err(_) => break,
            },
            _ => break,
        }
    }
    p
}

fn unresolved_state_path() -> PathBuf {
    if let Some(p) = std::env::var_os("TCLAB_STATE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("tclab/policy.json")
}

fn print_output(out: &tclab_tc::Output) -> u8 {
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    out.code.clamp(0, 255) as u8
}

/// `tclab tc|iptables|link …`: one command against the policy store, through the resident engine of a
/// running `tclab script run` if there is one (`TCLAB_CONTROL`), else by opening the store under its lock.
fn cmd_store(argv: &[String]) -> Result<u8, String> {
    use tclab_tc::control;
    let path = store_path()?;
    // A script's resident engine (`TCLAB_CONTROL`), else a `tclab serve` running for this store.
    let script_socket = std::env::var_os(control::ENV).filter(|s| !s.is_empty());
    let from_script = script_socket.is_some();
    // Then a `tclab live` bridging in this network namespace (its engine is the policy in force, as
    // the kernel's is for tc), unless TCLAB_LIVE=off; then a `tclab serve` for this store.
    let live =
        control::live_socket().filter(|s| !from_script && !env_off("TCLAB_LIVE") && s.exists());
    let through_live = script_socket.is_none() && live.is_some();
    // In a `tclab lab` node with no bridge to ask, the policy meant is that node's, not the store's:
    // showing the store there (as before) looked like the node's policy.
    if !from_script && live.is_none() && !env_off("TCLAB_LIVE") {
        if let Some((lab, node)) = tclab_live::lab::Lab::here() {
            return Err(format!(
                "{}; set TCLAB_LIVE=off to use the policy store ({}) here",
                lab.no_bridge_here(node),
                path.display()
            ));
        }
    }
    let socket = script_socket.map(PathBuf::from).or(live).or_else(|| {
        Some(control::resident_dir(&path).join("control.sock"))
            .filter(|s| auto_serve_enabled() && s.exists())
    });
    // `-batch FILE|-` is read here, where FILE's relative path means something, and before the store's
    // lock is taken (a slow producer on stdin must not hold other callers up).
    let mut stdin = None;
    if argv[0] == "tc" {
        if let Some(file) = tclab_tc::store::batch_arg(argv).and_then(|i| argv.get(i + 1)) {
            let text = if file == "-" {
                let mut t = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut t)
                    .map_err(|e| format!("standard input: {e}"))?;
                tclab_tc::store::batch_text(t, "-")
            } else {
                tclab_tc::store::read_batch_file(file)
            };
            match text {
                Ok(t) => stdin = Some(t),
                Err(message) => {
                    eprint!("{message}");
                    return Ok(1);
                }
            }
        }
    }
    if let Some(socket) = socket {
        let words = argv.to_vec();
        let req = control::Request {
            state: path.clone(),
            argv: words,
            stdin: stdin.clone(),
            caller: std::env::var("TCLAB_CALLER").ok().filter(|c| !c.is_empty()),
            ..Default::default()
        };
        match control::call(std::path::Path::new(&socket), &req) {
            Ok(r) => {
                return Ok(print_output(&tclab_tc::Output {
                    stdout: r.stdout,
                    stderr: r.stderr,
                    code: r.code,
                }))
            }
            Err(control::CallError::Lost(e)) => return Err(e),
            // A script's engine is gone: this is a job the script left running after it ended.
            // Applying it to the store would change the policy behind the script's report (and, under
            // `--strict`, write into a scratch store that no longer exists).
            Err(control::CallError::Unreachable) if from_script => {
                return Err(
                    "the script that started this call has ended; this call was not applied".into(),
                )
            }
            // A bridge's socket with no bridge behind it: it crashed or was killed. Its policy is
            // gone with it; applying the call to the store instead would change something else.
            Err(control::CallError::Unreachable) if through_live => {
                // In a lab's router, the lab's own `down` removes the socket with the rest.
                let lab = tclab_live::lab::Lab::here()
                    .filter(|(_, node)| *node == "router")
                    .map(|(lab, _)| {
                        format!(
                            " (the router of the lab \"{}\": tclab lab{} down removes the lab and it)",
                            lab.prefix,
                            lab.prefix_flag()
                        )
                    })
                    .unwrap_or_default();
                return Err(format!(
                    "a tclab live served this network namespace ({}) but is not running (it crashed or was killed); \
                     remove that socket{lab}, or set TCLAB_LIVE=off to use the store",
                    socket.display()
                ));
            }
            Err(control::CallError::Unreachable | control::CallError::Elsewhere) => {}
        }
    }
    // A batch of shows only is a read (`stdin` holds a tc batch's text).
    let changes = tclab_tc::store::changes_policy(argv)
        && stdin.as_deref().is_none_or(tclab_tc::store::batch_changes);
    let lock = Lock::take(&path, changes)?;
    let (mut store, problems) = if changes {
        Store::open(&path)?
    } else {
        Store::open_to_read(&path, argv)?
    };
    let out = store.execute(argv, stdin.as_deref())?;
    // The answer is built: other callers may go on while it is written out (as the kernel holds rtnl
    // for a dump, not while tc prints it — a `show | less` must not stop every writer).
    drop(lock);
    for p in problems {
        eprintln!("tclab: warning: {p}");
    }
    let replayed = store.records_read();
    // What a call cost in replay, for a reader checking that the store's snapshot is used.
    if std::env::var_os("TCLAB_TRACE_STORE").is_some() {
        eprintln!("tclab: store: {replayed} records replayed");
    }
    // A writer reads every record (a compaction rewrites the journal from them) and decodes the whole
    // engine, filters too, snapshot or not: one `tc class change` on a 30 000-record store took 88 ms
    // (53 ms of CPU), 6 ms through a resident engine.
    let large_write = changes && store.entries().len() >= AUTO_SERVE_RECORDS;
    // The process ends here: freeing a large policy's engine piece by piece would only cost time.
    std::mem::forget(store);
    let code = print_output(&out);
    if (replayed >= AUTO_SERVE_RECORDS || large_write) && auto_serve_enabled() {
        start_resident_engine(&path);
    }
    Ok(code)
}

/// A store this large is kept in a resident engine after a call that had to replay it, or that changed
/// it: the next call costs what its command costs, as with the kernel, whose policy is always resident.
/// (30 000 records: a replay takes some 40 ms; `tc -s class show` through the engine, under 30 ms all
/// told. A read from the snapshot costs less than the kernel's and needs none.)
const AUTO_SERVE_RECORDS: usize = 2_000;
/// How long that engine waits for the next call before it stops.
const AUTO_SERVE_IDLE_SECONDS: &str = "300";

/// `TCLAB_SERVE=off` (or `0`, `no`, `false`) keeps every call standalone: it neither starts a resident
/// engine nor uses one that is running.
fn auto_serve_enabled() -> bool {
    !env_off("TCLAB_SERVE")
}

/// An environment variable set to off (or 0, no, false).
fn env_off(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| {
        ["off", "0", "no", "false"]
            .iter()
            .any(|o| v.trim().eq_ignore_ascii_case(o))
    })
}

/// Start `tclab serve --auto` for the store at `state`, detached (its own process group, no terminal,
/// no inherited output), and do not wait for it: it loads the store in the background, quits at once if
/// another engine serves the store already, and stops when idle or when the store is deleted.
fn start_resident_engine(state: &std::path::Path) {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut c = std::process::Command::new(exe);
    c.args(["serve", "--auto", "--idle", AUTO_SERVE_IDLE_SECONDS])
        .env("TCLAB_STATE", state)
        .env_remove(tclab_tc::control::ENV)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Detached as a daemon is: its own session (no terminal, out of the caller's process group), at `/`
    // (no directory kept busy), and nothing of the caller's open — a pipe a test harness or a shell waits
    // on to close (a make jobserver's, a `$(tclab …)` substitution's) must not wait for the engine.
    c.current_dir("/");
    {
        extern "C" {
            fn setsid() -> i32;
            fn close(fd: i32) -> i32;
            fn syscall(num: i64, ...) -> i64;
        }
        const SYS_CLOSE_RANGE: i64 = 436;
        // SAFETY: setsid, close and close_range are async-signal-safe and allocate nothing, as
        // pre_exec requires; the descriptors closed are the new process's own copies.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                setsid();
                if syscall(SYS_CLOSE_RANGE, 3u32, u32::MAX, 0u32) != 0 {
                    for fd in 3..65536 {
                        close(fd);
                    }
                }
                Ok(())
            });
        }
    }
    let _ = c.spawn();
}

/// The script's process, which SIGINT, SIGTERM and SIGHUP sent to tclab go on to.
static SCRIPT_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

fn forward_signals_to(pid: u32) {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    extern "C" fn forward(sig: i32) {
        let pid = SCRIPT_PID.load(std::sync::atomic::Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) is async-signal-safe; the pid is the script's, which tclab still waits for.
            unsafe {
                kill(pid, sig);
            }
        }
    }
    SCRIPT_PID.store(pid as i32, std::sync::atomic::Ordering::SeqCst);
    const SIGHUP: i32 = 1;
    const SIGINT: i32 = 2;
    const SIGTERM: i32 = 15;
    for sig in [SIGHUP, SIGINT, SIGTERM] {
        // SAFETY: the handler only reads an atomic and calls kill(2), both async-signal-safe.
        unsafe {
            signal(sig, forward as extern "C" fn(i32) as usize);
        }
    }
}

fn cmd_script(cmd: args::ScriptCmd) -> CmdResult {
    use tclab_tc::script::Sandbox;
    let args::ScriptSub::Run {
        strict,
        file: script,
        args: script_args,
    } = cmd.command;
    if !script.is_file() {
        return Err(usage(format!("{}: no such script", script.display())));
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the tclab executable: {e}"))?;
    let state = store_path()?;
    let sb = Sandbox::new()?;
    // --strict: the script runs against a copy of the store, written back whole only if every change
    // applied; the real store stays locked meanwhile, so nothing else slips in between.
    let strict_lock = if strict {
        Some(Lock::take(&state, true)?)
    } else {
        None
    };
    let target = if strict {
        let scratch = sb.dir.join("policy.json");
        let journal = tclab_tc::store::read_journal(&state)?;
        tclab_tc::store::write_journal(&scratch, &journal.entries)?;
        scratch
    } else {
        state.clone()
    };
    let server = tclab_tc::control::Server::start_for_script(&target, &sb.dir)?;
    let mut child = sb
        .command(Some(&exe), &script, &script_args, &target)
        .envs(server.environment())
        .spawn()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    // Interrupted (Ctrl-C, `timeout`, `kill`), tclab passes the signal to the script and carries on:
    // the report is printed, the engine stopped and the scratch directory removed as on any other end.
    forward_signals_to(child.id());
    let status = child.wait().map_err(|e| format!("waiting for bash: {e}"))?;
    let report = server.finish();
    eprint!("{}", report.summary());
    // A script killed by a signal ends as bash reports it: 128 + the signal.
    let code = status
        .code()
        .or_else(|| std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
        .unwrap_or(1)
        .clamp(0, 255) as u8;
    if strict {
        if report.failures() > 0 || code != 0 {
            eprintln!(
                "tclab script: --strict: nothing was stored ({})",
                if code != 0 {
                    format!("the script exited with {code}")
                } else {
                    "a command was refused".to_string()
                }
            );
            return Ok(if code != 0 { code } else { 1 });
        }
        let journal = tclab_tc::store::read_journal(&target)?;
        tclab_tc::store::write_journal(&state, &journal.entries)?;
        drop(strict_lock);
    }
    Ok(code)
}

const CHECK_HELP: &str = "\
Applies the policy as tclab tc and tclab script run would, then reviews it: commands the kernel refuses
(one finding per cause), a script bash stops, default classes that do not exist, classes nothing
reaches, filters that name an inner class with no filters of its own (its packets fall to the default),
filters an earlier filter always answers for, u32 values with bits outside their mask, ifb devices that
are down or that nothing redirects to, redirects that let IPv6 bypass the shaper, token buckets smaller
than a packet or too large to act, policer bursts too short for TCP, bursts below a timer tick, HTB
ceilings above the parent's (never reached), quanta that distort the sharing, queues that hold seconds
of traffic, leaf FIFOs too short for a packet or a burst, CoDel targets at or above their interval, a
shaper anywhere at (or a tree, or an mq root's queues, whose rates add up to) the line's own rate, ATM
overhead missing, kinds the kernel lacks, mq queues left without the policy's tree. Each finding names
the device, class or filter and the script line. A shell script runs under bash as tclab script run
runs it: its tc, ip, iptables, ethtool… calls are tclab's, but any other command it calls runs for
real on this host.

--link DEV=RATE gives one device its own line (e.g. --link eth1=1mbit --link ifb0=8mbit for an uplink
shaped on eth1 and a download shaped on ifb0); the other devices take --link RATE. --hz judges every
burst, tc's defaults too, against the kernel's timer; --kernel 5.10 checks what that kernel has;
--txqueues eth1=4 makes the multiqueue devices an mq root needs.

Each finding has a stable code, explained in docs/checks/CODE.md. Exit status: 2 if any error, 1 if any
warning, 0 otherwise (notes only or nothing); 64 if the command line or FILE cannot be used, there is
no FILE and no store, or the policy makes nothing (a script that exits before it builds).";

/// A scenario file (the TOML `tclab sim` runs): how to give each of its `[[policy]]` entries to
/// `tclab CMD` instead, one line each (`None`: not a scenario). `f` is the scenario's path, which
/// a policy's `script` and `batch` are relative to.
fn scenario_policies(f: &str, text: &str, cmd: &str) -> Option<Vec<String>> {
    let doc: toml::Table = text.parse().ok()?;
    if !["node", "link", "policy", "traffic"]
        .iter()
        .any(|k| doc.contains_key(*k))
    {
        return None;
    }
    let base = std::path::Path::new(f)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    let entries = doc.get("policy").and_then(|p| p.as_array());
    let lines = entries
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_table())
        .map(|p| {
            let s = |k: &str| p.get(k).and_then(|v| v.as_str());
            let node = s("node").unwrap_or("?");
            let args: Vec<&str> = p
                .get("args")
                .and_then(|a| a.as_array())
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .collect();
            let args = if args.is_empty() {
                String::new()
            } else {
                format!(" -- {}", args.join(" "))
            };
            // `tclab live` takes its policy by --policy, beside the devices it bridges.
            let run = |file: &str| match cmd {
                "live" => format!("tclab live --dev A --dev B --policy {file}{args}"),
                _ => format!("tclab {cmd} {file}{args}"),
            };
            match (s("script"), s("batch")) {
                (Some(file), _) | (None, Some(file)) => {
                    format!(
                        "node {node}: {}",
                        run(&base.join(file).display().to_string())
                    )
                }
                (None, None) => format!(
                    "node {node}: its `tc` lines, saved as a file of their own: {}",
                    run("FILE")
                ),
            }
        })
        .collect();
    Some(lines)
}

/// What a file given to `tclab check` is.
fn policy_kind(text: &str) -> &'static str {
    let t = text.trim_start();
    if t.starts_with("{\"tclab_store\"") || t.starts_with('{') {
        return "store";
    }
    if t.starts_with("#!") {
        return "script";
    }
    let objects = ["qdisc", "class", "filter", "actions", "action", "chain"];
    // Commands as `tc -batch` reads them: a continued line is part of the one before.
    let batch = tclab_tc::store::batch_lines(text)
        .iter()
        .map(|(_, l)| l.trim())
        .filter(|l| !l.is_empty())
        .all(|l| {
            let w: Vec<&str> = l
                .split_whitespace()
                .skip_while(|w| w.starts_with('-'))
                .collect();
            w.first().is_some_and(|w| objects.contains(w))
        });
    if batch {
        "batch"
    } else {
        "script"
    }
}

const EXPLAIN_HELP: &str = "\
Draws the class tree of each device's root qdisc with each class's guaranteed rate and ceiling, computes
the share each class gets under a load from the discipline's rules (HTB: rates first, then each class's
excess borrowed from the nearest ancestor below its rate, by priority and quantum, up to every ceil; DRR
and ETS: strict bands first, then quanta; QFQ: weights; PRIO: bands in order; HFSC: real-time m2, then
link-sharing m2 under each upper limit), and runs the same load through the engine in virtual time:
both figures side by side (CBQ: the simulation alone). --link is needed by every discipline but HTB
(without it, HTB's policy alone shapes). A taprio root has gates, not a tree: each traffic class's
priorities and the share of the cycle its gate is open, at most that share of --link. --txqueues DEV=N
makes the multiqueue device taprio needs. A teql bond (teql0 and its slaves) is shown as its lines
in the order teql0 serves them, each line's rate (--link DEV=RATE) and, backlogged, their sum.

The simulation sends 1514-byte packets classified by skb->priority (the classid), so filters are not
consulted: explain shows how the tree shares the link, tclab check whether traffic reaches the classes
(a loaded class the policy sends nothing gets a note: every filter naming it shadowed by an earlier
one, named by no filter, CLASSIFY rule or skbedit priority and not the default, or the default behind
a catch-all filter; HTB and HFSC read skb->priority first, then the filters, then the default).
The computed column follows HTB's documented rule; HTB itself departs from it when several classes of
one priority borrow: each borrower's own bucket keeps refilling, so it turns green for a packet now and
then and leaves the round robin, and with default bursts the excess is split more evenly than the quanta
say (rates 3 and 1 Mbit/s borrowing from a 10 Mbit/s parent: 51:49 on Linux, 50:50 simulated, 75:25
computed). Trust the simulated column there; a note under the table says where the two differ by more
than 2 % and one packet over the simulated window.
A script that stops is said on stderr, with what it built before explained. Exit status: 0, or 64 if
the command line or FILE cannot be used, or the policy makes nothing (a script that exits before it
builds: its arguments go after `--`).";

/// `tclab explain`: every error is about its input (the command line, the policy, a class or device
/// it names), so every error exits 64.
fn cmd_explain(a: args::ExplainArgs) -> CmdResult {
    run_explain(a).map_err(|e| match e {
        Failure::Failed(m) => Failure::Usage(m),
        u => u,
    })
}

fn run_explain(a: args::ExplainArgs) -> CmdResult {
    let load = a
        .load
        .as_deref()
        .map(tclab_tc::explain::parse_load)
        .transpose()?;
    let (link, device_rates) = parse_links(&a.link)?;
    let dev = a.dev;
    let setup = txqueue_setup(&a.txqueues)?;
    let file = a.file.as_deref().map(path_text).transpose()?;
    let Loaded {
        mut engine,
        refusals,
        records,
        script_error,
        ..
    } = load_policy("explain", file, &setup, &a.args)?;
    // A script that stopped (on a missing argument: explain runs it with none) built part of its
    // policy or none of it: said, not explained as if it were the whole.
    let stopped = script_error
        .as_ref()
        .map(|e| format!("the script stopped at {}: {}", e.at, e.message));
    if records.is_empty() && refusals.is_empty() {
        return Err(usage(format!(
            "{}: the policy made no tc, ip or iptables change, so there is nothing to explain ({}; a \
             script's arguments go after `--`: tclab explain FILE -- ARGS)",
            file.unwrap_or("the store"),
            stopped.as_deref().unwrap_or("an empty file, or a script that exits before it builds")
        )));
    }
    known_devices(&engine, &device_rates)?;
    for (at, cmd, msg) in &refusals {
        let first = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        eprintln!("tclab explain: {at}: `{cmd}` did not apply: {first}");
    }
    if let Some(s) = &stopped {
        eprintln!("tclab explain: {s}; what it built before is explained below");
    }
    let names: Vec<String> = match &dev {
        Some(d) => {
            if engine.device(d).is_none() {
                return Err(usage(format!("Cannot find device \"{d}\"")));
            }
            vec![d.clone()]
        }
        None => engine
            .devices()
            .filter(|(_, d)| tclab_tc::explain::explains(d.root().q.kind()))
            .map(|(n, _)| n.to_string())
            .collect(),
    };
    // With a load and no --dev: each device that has some of the loaded classes, loaded with those
    // (an sqm policy's eth0 and ifb4eth0 share classids such as 1:11, and the rest of the load is for
    // the other device); a class no device has is refused before anything is printed.
    let (names, loads): (Vec<String>, Vec<Option<tclab_tc::explain::Load>>) = match (&load, &dev) {
        (Some(l), None) => {
            let has = |n: &String, id: u32| {
                engine
                    .device(n)
                    .is_some_and(|d| d.classes(0).iter().any(|c| c.classid.0 == id))
            };
            let missing: Vec<String> = l
                .offered
                .keys()
                .filter(|&&id| !names.iter().any(|n| has(n, id)))
                .map(|&k| tclab_core::Handle(k).to_string())
                .collect();
            if !missing.is_empty() && !names.is_empty() {
                return Err(usage(format!(
                    "--load: no device has class {}",
                    missing.join(", ")
                )));
            }
            names
                .iter()
                .filter_map(|n| {
                    let offered: std::collections::BTreeMap<u32, Option<u64>> = l
                        .offered
                        .iter()
                        .filter(|(&id, _)| has(n, id))
                        .map(|(&id, &r)| (id, r))
                        .collect();
                    (!offered.is_empty())
                        .then(|| (n.clone(), Some(tclab_tc::explain::Load { offered })))
                })
                .unzip()
        }
        _ => {
            let loads = vec![load.clone(); names.len()];
            (names, loads)
        }
    };
    // teql's bond, unless --dev names another device.
    let teql = dev
        .as_deref()
        .is_none_or(|d| d == tclab_core::qdisc::teql::MASTER)
        .then(|| {
            tclab_tc::explain::teql(&engine, |d| {
                device_rates
                    .iter()
                    .find(|(n, _)| n == d)
                    .map(|&(_, r)| r)
                    .or(link)
            })
        })
        .flatten();
    let names: Vec<String> = match &teql {
        Some(t) => {
            print!("{t}");
            let master = Some(tclab_core::qdisc::teql::MASTER);
            if dev.as_deref() == master || names.is_empty() {
                return Ok(0);
            }
            println!();
            names
        }
        None => names,
    };
    if names.is_empty() {
        println!(
            "no device has a root qdisc whose classes share the link ({}) or taprio's gates: nothing \
             to explain",
            tclab_tc::explain::SHARING.join(", ")
        );
        return Ok(0);
    }
    let origins = tclab_tc::check::origins::Origins::new(records);
    for (k, (name, load)) in names.iter().zip(&loads).enumerate() {
        let idle = tclab_tc::check::idle_classes(&engine, &origins, name);
        let d = engine.device_mut(name).expect("listed");
        if k > 0 {
            println!();
        }
        let link = device_rates
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, r)| r)
            .or(link);
        print!(
            "{}",
            tclab_tc::explain::explain(d, load.as_ref(), link, &idle)?
        );
    }
    Ok(0)
}

/// A file name from the command line as text (tclab's messages and control requests carry it).
fn path_text(p: &std::path::Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: the file name is not UTF-8 text", p.to_string_lossy()))
}

/// The commands that did not apply while loading a policy: (where, command, tc's message).
type Refusals = Vec<(String, String, String)>;

/// A policy loaded for `check`, `explain` or `live`.
struct Loaded {
    engine: tclab_core::Engine,
    refusals: Refusals,
    /// Every record that applied, with where it came from (a script's line, a batch file's, a store's
    /// record number).
    records: Vec<tclab_tc::check::origins::Record>,
    /// A script that stopped with an error: where (`FILE:LINE` when bash says) and bash's message.
    script_error: Option<tclab_tc::check::ScriptError>,
    /// The records that rebuild `engine` from nothing (`tclab_tc::store::replay`), setup included:
    /// `tclab live --queues N` replays them once per queue's thread.
    journal: Vec<Vec<String>>,
}

/// Load a policy the way `tclab check` and `tclab explain` read one: FILE is a store, a `tc -batch`
/// file or a shell script (run unmodified, as `tclab script run` runs it); no FILE is the store at
/// $TCLAB_STATE, which must exist. `setup` (`link add dev eth1 numtxqueues 2`) is the host a script or
/// batch file runs on.
fn load_policy(
    cmd: &str,
    file: Option<&str>,
    setup: &[Vec<String>],
    script_args: &[String],
) -> Result<Loaded, Failure> {
    use tclab_tc::check::origins::Record;
    let no_args = |name: &str| -> Result<(), Failure> {
        match script_args.is_empty() {
            true => Ok(()),
            false => Err(usage(format!(
                "{name} is not a shell script: the arguments after `--` ({}) go to a script",
                script_args.join(" ")
            ))),
        }
    };
    let from_store = |path: &std::path::Path, name: &str| -> Result<Loaded, Failure> {
        no_args(name)?;
        if !setup.is_empty() {
            return Err(usage(format!(
                "{name} is a store: its devices are already made (--txqueues is for a script or a batch \
                 file)"
            )));
        }
        let journal = tclab_tc::store::read_journal(path)?;
        let (engine, problems) = tclab_tc::store::replay(&journal.entries);
        let replayable = journal.entries.clone();
        let refusals = problems
            .into_iter()
            .map(|p| (name.to_string(), "journal entry".to_string(), p))
            .collect();
        let records = journal
            .entries
            .into_iter()
            .enumerate()
            .map(|(n, entry)| Record {
                at: format!("{name} record {}", n + 1),
                entry,
            })
            .collect();
        Ok(Loaded {
            engine,
            refusals,
            records,
            script_error: None,
            journal: replayable,
        })
    };
    let Some(f) = file else {
        let path = store_path()?;
        if !path.exists() {
            return Err(usage(format!(
                "no policy to read: give a script, a tc -batch file or a store, or set TCLAB_STATE to a \
                 store ({} does not exist)",
                path.display()
            )));
        }
        let name = path.display().to_string();
        return from_store(&path, &name);
    };
    let path = PathBuf::from(f);
    let text = std::fs::read_to_string(&path).map_err(|e| usage(format!("{f}: {e}")))?;
    if text.contains('\0') {
        // bash would refuse it as "cannot execute binary file": not a policy, whatever its bytes.
        return Err(usage(format!(
            "{f}: a binary file, not a shell script, a tc -batch file or a store"
        )));
    }
    // Run through bash, a scenario would fail on its first line (`name: command not found`).
    if let Some(policies) = scenario_policies(f, &text, cmd) {
        let how = if policies.is_empty() {
            "it has no [[policy]]".to_string()
        } else {
            format!("give them one by one:\n  {}", policies.join("\n  "))
        };
        return Err(usage(format!(
            "{f}: a scenario file (tclab sim runs it), not a policy: tclab {cmd} takes a shell \
             script, a tc -batch file or a store, such as a scenario's [[policy]] script or batch; {how}"
        )));
    }
    match policy_kind(&text) {
        "store" => from_store(&path, f),
        "batch" => {
            no_args(f)?;
            let mut engine = tclab_core::Engine::new();
            let mut refusals = Vec::new();
            let mut records = Vec::new();
            for entry in setup {
                tclab_tc::store::apply_record(&mut engine, entry).map_err(usage)?;
            }
            // Read as `tc -batch` reads it: comments, continued lines, quoted words.
            for (n, line) in tclab_tc::store::batch_lines(&text) {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let at = format!("{f}:{n}");
                let words = match tclab_tc::store::batch_words(line) {
                    Ok(w) => w,
                    Err(e) => {
                        refusals.push((at, format!("tc {line}"), e));
                        continue;
                    }
                };
                let out = tclab_tc::run(&mut engine, &words, 0);
                if out.code != 0 {
                    refusals.push((at, format!("tc {line}"), out.stderr));
                } else {
                    let mut entry = vec!["tc".to_string()];
                    entry.extend(words);
                    records.push(Record { at, entry });
                }
            }
            let journal = setup
                .iter()
                .cloned()
                .chain(records.iter().map(|r| r.entry.clone()))
                .collect();
            Ok(Loaded {
                engine,
                refusals,
                records,
                script_error: None,
                journal,
            })
        }
        _ => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find the tclab executable: {e}"))?;
            let run = tclab_tc::script::run_script_on(Some(&exe), &path, script_args, &[], setup)?;
            let (engine, _) = tclab_tc::store::replay(&run.journal);
            let refusals: Vec<_> = run
                .report
                .refused
                .iter()
                .filter(|r| !r.cleanup)
                .map(|r| (r.at.clone(), r.command.clone(), r.message.clone()))
                .collect();
            let script_error = (!run.success).then(|| script_error(f, &run));
            let records = run
                .report
                .changes
                .into_iter()
                .map(|c| Record {
                    at: c.at,
                    entry: c.entry,
                })
                .collect();
            Ok(Loaded {
                engine,
                refusals,
                records,
                script_error,
                journal: run.journal,
            })
        }
    }
}

/// How a script that failed ended, as bash said it: its first `FILE: line N: …` message (a syntax
/// error, a command not found) with the line, else the exit status and the last thing it printed
/// that was not tclab's.
fn script_error(f: &str, run: &tclab_tc::script::ScriptRun) -> tclab_tc::check::ScriptError {
    use tclab_tc::check::ScriptError;
    let printed: Vec<&str> = run.report.printed.iter().flat_map(|p| p.lines()).collect();
    let own: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !printed.contains(l))
        .collect();
    let line_no = |at: &str| at.rsplit_once(':').and_then(|(_, n)| n.parse::<u32>().ok());
    let last_change = run.report.changes.last().and_then(|c| line_no(&c.at));
    let bash = own.iter().enumerate().find_map(|(i, l)| {
        let (_, rest) = l.split_once(": line ")?;
        let (n, msg) = rest.split_once(": ")?;
        let n: u32 = n.parse().ok()?;
        // bash follows a syntax error with the line's text.
        let quoted = own
            .get(i + 1)
            .and_then(|next| next.split_once(&format!(": line {n}: ")))
            .map(|(_, q)| format!(" ({q})"))
            .unwrap_or_default();
        // Changes made after that line: bash went on (a command not found outside `set -e`), and the
        // script ended later, as its status says.
        let went_on = last_change.is_some_and(|c| c > n);
        let later = if went_on {
            format!(" (the script went on past it and {})", run.status)
        } else {
            String::new()
        };
        Some(ScriptError {
            at: format!("{f}:{n}"),
            message: format!("bash: {msg}{quoted}{later}"),
            located: true,
            went_on,
        })
    });
    // A teardown that found nothing to remove (`tc qdisc del dev eth0 root` on a fresh host), made after
    // every change the script applied: under `set -e` that failure is what ended the script.
    let teardown = run.report.refused.last().filter(|r| {
        r.cleanup
            && line_no(&r.at).is_some_and(|n| last_change.is_none_or(|c| n > c))
            && r.at.rsplit_once(':').is_some_and(|(file, _)| file == f)
    });
    let teardown = teardown.map(|r| ScriptError {
        at: r.at.clone(),
        message: format!(
            "the script {} at `{}`, a teardown that found nothing to remove ({}): under `set -e` its \
             failure stops the script (append `|| true` to teardown commands)",
            run.status,
            r.command,
            r.message.trim()
        ),
        located: true,
        went_on: false,
    });
    bash.or(teardown).unwrap_or_else(|| {
        let last = own.last().map(|l| format!(": {l}")).unwrap_or_default();
        ScriptError {
            at: f.to_string(),
            message: format!("the script {}{last}", run.status),
            located: false,
            went_on: false,
        }
    })
}

/// The line of every device (bytes/s), and the devices with one of their own.
type Links = (Option<u64>, Vec<(String, u64)>);

/// `--link [DEV=]RATE`, repeated.
fn parse_links(links: &[String]) -> Result<Links, Failure> {
    let mut all = None;
    let mut device_rates: Vec<(String, u64)> = Vec::new();
    for v in links {
        let (dev, rate) = match v.split_once('=') {
            Some((d, r)) => (Some(d), r),
            None => (None, v.as_str()),
        };
        let r = tclab_tc::util::get_rate(rate)
            .filter(|r| *r > 0)
            .ok_or_else(|| usage(format!("--link: \"{rate}\" is not a rate (e.g. 20mbit)")))?;
        match dev {
            Some("") => return Err(usage(format!("--link: \"{v}\" names no device"))),
            Some(d) if device_rates.iter().any(|(x, _)| x == d) => {
                return Err(usage(format!("--link given twice for {d}")))
            }
            Some(d) => device_rates.push((d.to_string(), r)),
            None if all.is_some() => return Err(usage("--link given twice")),
            None => all = Some(r),
        }
    }
    Ok((all, device_rates))
}

/// A device a `--link DEV=…` names must be one the policy has.
fn known_devices(engine: &tclab_core::Engine, named: &[(String, u64)]) -> Result<(), Failure> {
    match named.iter().find(|(d, _)| engine.device(d).is_none()) {
        Some((d, _)) => Err(usage(format!(
            "--link {d}=…: the policy has no device \"{d}\" (it has {})",
            engine
                .devices()
                .map(|(n, _)| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

/// `--txqueues DEV=N …` (check, explain): the `link add` commands that make those devices first.
fn txqueue_setup(txqueues: &[String]) -> Result<Vec<Vec<String>>, Failure> {
    let mut setup: Vec<Vec<String>> = Vec::new();
    for v in txqueues {
        let bad = || usage(format!("--txqueues: \"{v}\" is not DEV=N (e.g. eth1=4)"));
        let (d, n) = v.split_once('=').ok_or_else(bad)?;
        let n: u32 = n
            .parse()
            .ok()
            .filter(|n| (1..=4096).contains(n))
            .ok_or_else(bad)?;
        if d.is_empty() || setup.iter().any(|e| e[3] == d) {
            return Err(bad());
        }
        setup.push(
            ["link", "add", "dev", d, "numtxqueues", &n.to_string()]
                .map(String::from)
                .to_vec(),
        );
    }
    Ok(setup)
}

/// `tclab check`: a command line or FILE it cannot use exits 64 (`EX_USAGE`), apart from the findings'
/// 0, 1 and 2, so that a gate testing for "no errors" does not pass a mistyped command.
fn cmd_check(a: args::CheckArgs) -> CmdResult {
    run_check(a).map_err(|e| match e {
        Failure::Failed(m) => Failure::Usage(m),
        u => u,
    })
}

fn run_check(a: args::CheckArgs) -> CmdResult {
    use tclab_tc::check::{check, exit_status, origins::Origins, render, LineFacts, Options};
    let (rate, device_rates) = parse_links(&a.link)?;
    let setup = txqueue_setup(&a.txqueues)?;
    let file = a.file.as_deref().map(path_text).transpose()?;
    let loaded = load_policy("check", file, &setup, &a.args)?;
    // A policy that made nothing passes no review: "0 errors" would pass a CI gate on a script that
    // exited before it built (on a missing argument: check runs it with none) or an empty file.
    if loaded.records.is_empty() && loaded.refusals.is_empty() && loaded.script_error.is_none() {
        return Err(usage(format!(
            "{}: the policy made no tc, ip or iptables change, so there is nothing to check (a script \
             that exits before it builds — give its arguments after `--`: tclab check FILE -- ARGS — \
             or an empty file)",
            file.unwrap_or("the store")
        )));
    }
    known_devices(&loaded.engine, &device_rates)?;
    let opts = Options {
        line: LineFacts {
            rate,
            atm: a.linklayer.unwrap_or(false),
        },
        device_rates,
        hz: a.hz,
        kernel: a.kernel,
    };
    let origins = Origins::new(loaded.records);
    let findings = check(
        &loaded.engine,
        &loaded.refusals,
        loaded.script_error,
        &origins,
        &opts,
    );
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&findings).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", render(&findings));
    }
    Ok(exit_status(&findings))
}

const SERVE_HELP: &str = "\
Keeps the policy store ($TCLAB_STATE) open in one resident engine, so that every tclab tc, iptables and
link call on that store costs what the command costs, not a replay of the store: a provisioning system or
a monitoring loop calling tc thousands of times, or tc -s show on a large policy. Calls find the server by
its socket (FILE.serve/control.sock beside the store, in a directory only you may enter) and fall back to
the store itself when it is not running. Every change is still written to the store, fsynced, before the
call returns; other processes may use the store meanwhile.
A call that has to replay a store of 2 000 records or more, or that changes one, starts one by itself
(--auto --idle 300) as it exits. TCLAB_SERVE=off (or 0, no, false) in the environment keeps a call
standalone: it neither starts an engine nor uses a running one.";

/// `tclab serve`: the store's resident engine, until interrupted or idle.
fn cmd_serve(a: args::ServeArgs) -> CmdResult {
    let (idle, auto) = (a.idle, a.auto);
    let state = store_path()?;
    let dir = tclab_tc::control::resident_dir(&state);
    if auto {
        // Started by a call as it exited: the store may be gone already (a test's scratch directory);
        // then nothing is created where it was.
        if !state.exists() {
            return Ok(0);
        }
        if let Err(e) = std::fs::create_dir(&dir) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Ok(0);
            }
        }
    } else {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let socket = dir.join("control.sock");
    // One engine per store: held for the server's life, so that two started at once cannot both bind.
    let claim = dir.join("serve.lock");
    let claim = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&claim)
        .map_err(|e| format!("{}: {e}", claim.display()))?;
    if claim.try_lock().is_err() || std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        if auto {
            return Ok(0);
        }
        return Err(format!("a tclab serve is already running for {}", state.display()).into());
    }
    // Read the store once now, so that a broken store is reported here and not to the first caller.
    tclab_tc::store::read_journal(&state)?;
    let server = tclab_tc::control::Server::start(&state, &dir)?;
    // Load the engine now rather than on the first call.
    let _ = tclab_tc::control::call(
        server.socket(),
        &tclab_tc::control::Request {
            state: state.clone(),
            argv: vec!["link".into(), "show".into()],
            ..Default::default()
        },
    );
    if !auto {
        eprintln!(
            "tclab serve: {} on {}{}",
            state.display(),
            server.socket().display(),
            idle.map_or(String::new(), |s| format!(" (stops after {s} s idle)"))
        );
    }
    let (mut last, mut since) = (server.served(), std::time::Instant::now());
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = server.served();
        if now != last {
            last = now;
            since = std::time::Instant::now();
        }
        if idle.is_some_and(|s| since.elapsed().as_secs() >= s) {
            break;
        }
        // A store deleted (a test's scratch directory, a policy thrown away) leaves nothing to serve.
        if auto && !state.exists() {
            break;
        }
    }
    drop(server);
    let _ = std::fs::remove_file(dir.join("serve.lock"));
    let _ = std::fs::remove_dir(&dir);
    drop(claim);
    Ok(0)
}

/// Die quietly on a closed pipe (`tclab sim … | head`), as command-line tools do, instead of panicking
/// on the failed print: restore SIGPIPE's default action, which Rust's runtime sets to "ignore".
fn default_sigpipe() {
    #[cfg(unix)]
    {
        extern "C" {
            fn signal(signum: i32, handler: usize) -> usize;
        }
        const SIGPIPE: i32 = 13;
        const SIG_DFL: usize = 0;
        // SAFETY: signal(2) with SIG_DFL installs no Rust code as a handler.
        unsafe {
            signal(SIGPIPE, SIG_DFL);
        }
    }
}

/// mimalloc, not glibc's malloc: its 32 MiB segments are asked for as transparent huge pages, so a
/// simulation's per-subscriber state (bench-isp: 1 000 sockets, HTB classes and fq_codel leaves, 84 MB)
/// costs a TLB miss a 2 MB page rather than one a 4 KB page; glibc gives huge pages only when
/// `GLIBC_TUNABLES` says so before the process starts. docs/BENCHMARKS.md has the figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    default_sigpipe();
    let mut args: Vec<String> = Vec::new();
    for (n, a) in std::env::args_os().skip(1).enumerate() {
        match a.into_string() {
            Ok(a) => args.push(a),
            Err(a) => {
                eprintln!(
                    "tclab: argument {} ({}) is not valid UTF-8 text",
                    n + 1,
                    a.to_string_lossy()
                );
                return ExitCode::from(1);
            }
        }
    }
    // tc, link and iptables keep iproute2's and iptables' grammar, messages and exit codes: their
    // words go to the tc crate as they are, before clap sees them (and `route`, `ip route`'s words,
    // which a script's shell functions send here when they cannot reach its engine directly).
    if matches!(
        args.get(1).map(String::as_str),
        Some("help" | "--help" | "-h")
    ) {
        match args.first().map(String::as_str) {
            Some("link") => {
                println!("{}", tclab_tc::store::LINK_USAGE);
                return ExitCode::SUCCESS;
            }
            Some("route") => {
                println!("{}", tclab_tc::iproute::ROUTE_USAGE);
                return ExitCode::SUCCESS;
            }
            _ => {}
        }
    }
    if matches!(
        args.first().map(String::as_str),
        Some("tc" | "link" | "iptables" | "route" | "ethtool")
    ) {
        return match cmd_store(&args) {
            Ok(code) => ExitCode::from(code),
            Err(e) => {
                eprintln!("tclab: {}", without_os_error(&e));
                ExitCode::from(1)
            }
        };
    }
    let cli = match <args::Cli as clap::Parser>::try_parse_from(
        std::iter::once("tclab".to_string()).chain(args),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EX_USAGE),
            };
        }
    };
    use args::Command as C;
    let result: CmdResult = match cli.command {
        C::Tc(_) | C::Link(_) | C::Iptables(_) | C::Route(_) => unreachable!("dispatched above"),
        C::Script(a) => cmd_script(a),
        C::Check(a) => cmd_check(a),
        C::Explain(a) => cmd_explain(a),
        C::Serve(a) => cmd_serve(a),
        C::Demo(a) => demo::run(a),
        C::Live(a) => livecmd::live(a),
        C::Lab(a) => livecmd::lab(a),
        C::Sim(a) => sim::cmd(a),
        C::Sweep(a) => sweep::cmd(a),
        C::Report(a) => report::cmd(a),
        C::Trace(a) => trace::cmd(a),
        C::Completions { shell } => Ok(args::completions(shell)),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Usage(e)) => {
            eprintln!("tclab: {}", without_os_error(&e));
            ExitCode::from(EX_USAGE)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("tclab: {}", without_os_error(&e));
            ExitCode::from(1)
        }
    }
}

/// An error as a person reads it: `strerror`'s words without Rust's `(os error N)` after them.
fn without_os_error(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(i) = rest.find(" (os error ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + " (os error ".len()..];
        match after.find(')') {
            Some(j) if j > 0 && after[..j].bytes().all(|b| b.is_ascii_digit()) => {
                rest = &after[j + 1..];
            }
            _ => {
                out.push_str(" (os error ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}
