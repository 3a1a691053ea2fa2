//! `tclab`: Linux traffic control in user space.
//!
//! ```text
//! tclab tc [-s] [-d] [-j] [-p] [-r] [-batch FILE] qdisc|class …   the tc command language
//! tclab link add|set|del dev DEV [mtu N] [txqueuelen N]            devices of an offline policy
//! tclab iptables -t mangle …                                       packet marks, as iptables sets them
//! tclab script run FILE [ARGS]                                     a Linux shaping script, unmodified
//! tclab sim SCENARIO [--out DIR] [--seed N] [--json]               the simulated lab
//! tclab demo                                                       seed 004's conditioner, simulated
//! ```
//!
//! The policy lives in the file named by `TCLAB_STATE` (default `$XDG_STATE_HOME/tclab/policy.json`, or
//! `~/.local/state/tclab/policy.json`): see `tclab_tc::store`.

mod demo;
mod plot;
mod sim;

use std::path::PathBuf;
use std::process::ExitCode;
use tclab_tc::store::{Lock, Store};

const HELP: &str = "tclab — Linux traffic control in user space

Usage:
  tclab tc [OPTIONS] OBJECT COMMAND …   run a tc(8) command against the stored policy
  tclab tc [OPTIONS] -batch FILE         run a file of tc commands (one per line, without \"tc\")
  tclab link add|set|del dev DEV [mtu N] [txqueuelen N]
  tclab link show                        list the devices of the stored policy
  tclab iptables -t mangle …             iptables(8) for the mangle table (MARK, CONNMARK, CLASSIFY, DSCP, TOS)
  tclab script run FILE [ARGS…]          run a Linux shell script unmodified, tc/iptables resolved to tclab
  tclab sim SCENARIO [--out DIR] [--seed N] [--json] [--no-plots]
                                         run a scenario in the simulated lab (tclab sim --help)
  tclab demo                             seed 004's traffic conditioner in the simulated lab: the latency table
  tclab help | --version

The policy is kept in $TCLAB_STATE (default: $XDG_STATE_HOME/tclab/policy.json).
Devices are created on first use with mtu 1500 and txqueuelen 1000.
Exit codes are tc's: 0 ok, 1 bad options, 255 syntax error, 2 refused by the (simulated) kernel.";

fn state_path() -> PathBuf {
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
    let path = std::path::absolute(state_path()).map_err(|e| format!("state file: {e}"))?;
    if let Some(socket) = std::env::var_os(control::ENV).filter(|s| !s.is_empty()) {
        // `-batch FILE` is read here, where FILE's relative path means something.
        let mut words = argv.to_vec();
        let mut stdin = None;
        if argv[0] == "tc" {
            if let Some(i) = words
                .iter()
                .position(|a| a == "-batch" || a == "-b" || a == "--batch")
            {
                if let Some(file) = words.get(i + 1).cloned() {
                    let text = if file == "-" {
                        let mut t = String::new();
                        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
                            .map_err(|e| format!("standard input: {e}"))?;
                        t
                    } else {
                        match std::fs::read_to_string(&file) {
                            Ok(t) => t,
                            Err(e) => {
                                eprintln!("Cannot open file \"{file}\" for reading: {e}");
                                return Ok(1);
                            }
                        }
                    };
                    words[i + 1] = "-".into();
                    stdin = Some(text);
                }
            }
        }
        let req = control::Request {
            state: path.clone(),
            argv: words,
            stdin,
            caller: std::env::var("TCLAB_CALLER").ok().filter(|c| !c.is_empty()),
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
            Err(control::CallError::Unreachable) => {}
        }
    }
    let _lock = Lock::take(&path, tclab_tc::store::changes_policy(argv))?;
    let (mut store, problems) = Store::open(&path)?;
    for p in problems {
        eprintln!("tclab: warning: {p}");
    }
    let out = store.execute(argv, None)?;
    // The process ends here: freeing a large policy's engine piece by piece would only cost time.
    std::mem::forget(store);
    Ok(print_output(&out))
}

fn cmd_script(args: &[String]) -> Result<u8, String> {
    use tclab_tc::script::{Sandbox, HELP};
    let rest = match args.first().map(String::as_str) {
        Some("run") => &args[1..],
        None | Some("help") | Some("--help") | Some("-h") => {
            println!("{HELP}");
            return Ok(0);
        }
        Some(other) => {
            return Err(format!(
                "unknown script command \"{other}\"; try \"tclab script --help\""
            ))
        }
    };
    let strict = rest.first().is_some_and(|a| a == "--strict");
    let rest = &rest[usize::from(strict)..];
    let Some(file) = rest.first() else {
        println!("{HELP}");
        return Ok(2);
    };
    if file == "--help" || file == "-h" {
        println!("{HELP}");
        return Ok(0);
    }
    let script = PathBuf::from(file);
    if !script.is_file() {
        return Err(format!("{file}: no such script"));
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the tclab executable: {e}"))?;
    let state = std::path::absolute(state_path()).map_err(|e| format!("state file: {e}"))?;
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
    let server = tclab_tc::control::Server::start(&target, &sb.dir)?;
    let status = sb
        .command(&exe, &script, &rest[1..], &target)
        .env(tclab_tc::control::ENV, server.socket())
        .status()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let report = server.finish();
    eprint!("{}", report.summary());
    let code = status.code().unwrap_or(1).clamp(0, 255) as u8;
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

fn main() -> ExitCode {
    default_sigpipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("tc") | Some("link") | Some("iptables") => cmd_store(&args),
        Some("script") => cmd_script(&args[1..]),
        Some("demo") => demo::run(&args[1..]),
        Some("sim") => sim::cmd(&args[1..]),
        Some("--version") | Some("-V") => {
            println!("tclab {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        None | Some("help") | Some("--help") | Some("-h") => {
            println!("{HELP}");
            Ok(0)
        }
        Some(other) => Err(format!("unknown command \"{other}\"; try \"tclab help\"")),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tclab: {e}");
            ExitCode::from(1)
        }
    }
}
