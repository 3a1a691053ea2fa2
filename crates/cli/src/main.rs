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
use tclab_tc::store::{link, Store};

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

fn load() -> Result<(Store, tclab_core::Engine, PathBuf), String> {
    let path = state_path();
    let store = Store::load(&path)?;
    let (engine, problems) = store.replay();
    for p in problems {
        eprintln!("tclab: warning: {}: {p}", path.display());
    }
    Ok((store, engine, path))
}

fn is_modifying(args: &[String]) -> bool {
    let words: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .skip_while(|a| a.starts_with('-'))
        .collect();
    match words.get(1) {
        None => false,
        Some(w) => {
            ["add", "change", "replace", "link", "delete", "del", "flush"]
                .iter()
                .any(|c| c.starts_with(*w) || *w == *c)
                && !["show", "list", "ls"].contains(w)
        }
    }
}

fn cmd_tc(args: &[String]) -> Result<u8, String> {
    let (mut store, mut engine, path) = load()?;
    // -batch / -b FILE, possibly after other global options.
    let batch_at = args
        .iter()
        .position(|a| a == "-batch" || a == "-b" || a == "--batch");
    if let Some(i) = batch_at {
        let file = args.get(i + 1).ok_or("Error: -batch needs a file name")?;
        let force = args.iter().any(|a| a == "-force" || a == "-f");
        let globals: Vec<String> = args[..i]
            .iter()
            .chain(args[i + 2..].iter())
            .filter(|a| *a != "-force" && *a != "-f")
            .cloned()
            .collect();
        let text = if file == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| e.to_string())?;
            s
        } else {
            std::fs::read_to_string(file)
                .map_err(|e| format!("Cannot open file \"{file}\" for reading: {e}"))?
        };
        let mut code = 0u8;
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words: Vec<String> = globals.clone();
            words.extend(line.split_whitespace().map(str::to_string));
            let out = tclab_tc::run(&mut engine, &words, 0);
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            if out.code != 0 {
                eprintln!("Command failed {file}:{}", n + 1);
                code = 1;
                if !force {
                    break;
                }
            } else if is_modifying(&words) {
                let mut entry = vec!["tc".to_string()];
                entry.extend(words);
                store.journal.push(entry);
            }
        }
        store.save(&path)?;
        return Ok(code);
    }
    let out = tclab_tc::run(&mut engine, args, 0);
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    if out.code == 0 && is_modifying(args) {
        let mut entry = vec!["tc".to_string()];
        entry.extend(args.iter().cloned());
        store.journal.push(entry);
        store.save(&path)?;
    }
    Ok(out.code as u8)
}

fn cmd_iptables(args: &[String]) -> Result<u8, String> {
    let (mut store, mut engine, path) = load()?;
    let out = tclab_tc::iptables::run(&mut engine, args);
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    if out.code == 0 && tclab_tc::iptables::is_modifying(args) {
        let mut entry = vec!["iptables".to_string()];
        entry.extend(args.iter().cloned());
        store.journal.push(entry);
        store.save(&path)?;
    }
    Ok(out.code as u8)
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
    let sb = Sandbox::new()?;
    let status = sb
        .command(&exe, &script, &rest[1..], &state_path())
        .status()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    Ok(status.code().unwrap_or(1).clamp(0, 255) as u8)
}

fn cmd_link(args: &[String]) -> Result<u8, String> {
    let (mut store, mut engine, path) = load()?;
    if args.first().map(String::as_str) == Some("show") || args.is_empty() {
        for (i, (name, d)) in engine.devices.iter().enumerate() {
            let q = d.root().q.kind();
            println!(
                "{}: {name}: mtu {} qdisc {q} qlen {}",
                i + 1,
                d.mtu,
                d.txqueuelen
            );
        }
        return Ok(0);
    }
    link(&mut engine, args)?;
    let mut entry = vec!["link".to_string()];
    entry.extend(args.iter().cloned());
    store.journal.push(entry);
    store.save(&path)?;
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

fn main() -> ExitCode {
    default_sigpipe();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("tc") => cmd_tc(&args[1..]),
        Some("link") => cmd_link(&args[1..]),
        Some("iptables") => cmd_iptables(&args[1..]),
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
