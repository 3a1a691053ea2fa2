//! tclab's command line: every subcommand of its own (sim, check, explain, trace, script, serve, demo,
//! completions) declared once, with clap, so that `--help`, usage errors and shell completions come from
//! one description. `tclab tc`, `tclab link` and `tclab iptables` are listed here for help and completion
//! only: their words go to the tc crate untouched, since they keep iproute2's and iptables' own grammar,
//! messages and exit codes.
//!
//! Exit codes of tclab's own commands: 0 done, 1 the work failed, 64 (`EX_USAGE`) the command line or an
//! input file cannot be used — an unknown option, a missing value, a scenario, policy, script or trace
//! file that does not exist or does not load. `tclab check` adds its findings' 1 (warnings) and 2
//! (errors).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `EX_USAGE` from sysexits.h: the command was used incorrectly.
pub const EX_USAGE: u8 = 64;

/// Why a command stopped: its input could not be used (exit 64), or the work failed (exit 1).
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Failed(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Failed(s)
    }
}

impl From<&str> for Failure {
    fn from(s: &str) -> Failure {
        Failure::Failed(s.to_string())
    }
}

/// What a command returns: its exit code, or why it stopped.
pub type CmdResult = Result<u8, Failure>;

/// Mark an error as the input's fault (exit 64).
pub fn usage<E: std::fmt::Display>(e: E) -> Failure {
    Failure::Usage(e.to_string())
}

const AFTER_HELP: &str = "\
The policy is kept in $TCLAB_STATE (default: $XDG_STATE_HOME/tclab/policy.json); devices are created
on first use with mtu 1500 and txqueuelen 1000. tclab tc, link and iptables exit as tc and iptables do
(0 ok, 1 bad options, 255 syntax error, 2 refused by the simulated kernel); tclab's own commands exit
0, 1 when the work failed, 64 when the command line or an input file cannot be used.
Docs: README.md, docs/ (scenarios, checks, experiments). Shell completions: tclab completions bash.";

#[derive(Parser)]
#[command(
    name = "tclab",
    version,
    about = "Linux traffic control in user space: the tc language, a simulated lab, a policy checker, and a live bridge that shapes real traffic",
    after_help = AFTER_HELP,
    disable_help_subcommand = false,
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a tc(8) command against the stored policy (iproute2's grammar: tclab tc help)
    #[command(disable_help_flag = true)]
    Tc(Passthrough),
    /// Add, change, delete or list the policy's devices (tclab link add|set|del dev DEV …, link show)
    #[command(disable_help_flag = true)]
    Link(Passthrough),
    /// iptables(8) for the mangle table: MARK, CONNMARK, CLASSIFY, DSCP, TOS
    #[command(disable_help_flag = true)]
    Iptables(Passthrough),
    /// The realms of the policy's routes, for route filters (tclab route add PREFIX … realm R, route show)
    #[command(disable_help_flag = true)]
    Route(Passthrough),
    /// Run a Linux shell script unmodified, its tc/ip/iptables calls answered by tclab
    Script(ScriptCmd),
    /// What is wrong with a policy (script, tc -batch file or store), before it meets a link
    #[command(after_help = crate::CHECK_HELP)]
    Check(CheckArgs),
    /// The class tree, each class's share computed by the discipline's rule and simulated
    #[command(after_help = crate::EXPLAIN_HELP)]
    Explain(ExplainArgs),
    /// Run a scenario in the simulated lab: summary table, CSV files, plots
    #[command(after_help = crate::sim::HELP)]
    Sim(SimArgs),
    /// Run a scenario over a grid of values (any scenario key, or a tc option of a policy), in parallel
    #[command(after_help = crate::sweep::HELP)]
    Sweep(SweepArgs),
    /// Regenerate a Markdown file's tables (docs/EXPERIMENTS.md) from the runs its blocks name
    #[command(after_help = crate::report::HELP)]
    Report(ReportArgs),
    /// Read a per-packet trace written by tclab sim --trace
    Trace(TraceCmd),
    /// Seed 004's traffic conditioner in the simulated lab, with the seed's latency table
    Demo(DemoArgs),
    /// Shape real frames: bridge two interfaces through the policy, in real time
    #[command(after_help = LIVE_HELP)]
    Live(LiveArgs),
    /// Seed 000's lab of three machines as network namespaces, its router bridged by tclab live
    Lab(LabCmd),
    /// Keep the policy store in one resident engine for fast calls
    #[command(after_help = crate::SERVE_HELP)]
    Serve(ServeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Install, e.g.: tclab completions bash > /etc/bash_completion.d/tclab\n           tclab completions zsh > \"${fpath[1]}/_tclab\"\n           tclab completions fish > ~/.config/fish/completions/tclab.fish"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The words of `tclab tc|link|iptables`, passed on untouched.
#[derive(Args)]
pub struct Passthrough {
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct ScriptCmd {
    #[command(subcommand)]
    pub command: ScriptSub,
}

#[derive(Subcommand)]
pub enum ScriptSub {
    /// Run FILE under bash with tc, ip, iptables … resolved to tclab, then report what was refused
    #[command(after_help = script_help())]
    Run {
        /// A refused change is fatal: non-zero exit and nothing stored
        #[arg(long)]
        strict: bool,
        /// The shell script
        file: PathBuf,
        /// Arguments for the script
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `tclab script run --help`'s text after the options: the script module's help without its usage
/// line, which clap writes.
fn script_help() -> String {
    let h = tclab_tc::script::HELP;
    match h.split_once("\n\n") {
        Some((first, rest)) if first.starts_with("Usage:") => rest.to_string(),
        _ => h.to_string(),
    }
}

#[derive(Args)]
pub struct CheckArgs {
    /// The findings as a JSON array (code, severity, at, message, fix)
    #[arg(long)]
    pub json: bool,
    /// The line's rate (20mbit), or DEV=RATE for one device (repeatable)
    #[arg(long, value_name = "[DEV=]RATE")]
    pub link: Vec<String>,
    /// The line's link layer: atm (or adsl) checks that the shaper accounts for cells and overhead
    #[arg(long, value_name = "atm|ethernet", value_parser = parse_linklayer)]
    pub linklayer: Option<bool>,
    /// The kernel's timer frequency: judge every burst, tc's defaults too, against one tick of its rate
    #[arg(long, value_name = "HZ", value_parser = parse_hz)]
    pub hz: Option<u64>,
    /// The kernel the policy is for (5.10): kinds it lacks or no longer has, GSO as it builds it
    #[arg(long, value_name = "VERSION", value_parser = parse_kernel)]
    pub kernel: Option<(u32, u32)>,
    /// Make DEV a multiqueue device of N transmit queues before the policy runs (repeatable)
    #[arg(long, value_name = "DEV=N")]
    pub txqueues: Vec<String>,
    /// A shell script, a tc -batch file or a policy store (default: the store at $TCLAB_STATE)
    pub file: Option<PathBuf>,
    /// The script's arguments, after `--` (tclab check wan.sh -- eth0 20000)
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

fn parse_hz(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|h| (24..=100_000).contains(h))
        .ok_or_else(|| format!("--hz takes the kernel's CONFIG_HZ (100, 250, 300, 1000), not {s}"))
}

/// `5.10`, `6.1.0-13-amd64`: the major and minor version.
fn parse_kernel(s: &str) -> Result<(u32, u32), String> {
    let mut parts = s.split(['.', '-']);
    let major = parts.next().and_then(|p| p.parse().ok());
    let minor = parts.next().and_then(|p| p.parse().ok());
    match (major, minor) {
        (Some(a), Some(b)) if (2..=9).contains(&a) && b < 100 => Ok((a, b)),
        _ => Err(format!(
            "--kernel takes a version such as 5.10 or 6.1, not {s}"
        )),
    }
}

fn parse_linklayer(s: &str) -> Result<bool, String> {
    match s {
        "atm" | "adsl" => Ok(true),
        "ethernet" => Ok(false),
        _ => Err(format!("--linklayer takes atm or ethernet, not {s}")),
    }
}

#[derive(Args)]
pub struct ExplainArgs {
    /// What each leaf offers: CLASS=RATE or CLASS=max, comma-separated (default: every leaf backlogged)
    #[arg(long, value_name = "CLASS=RATE,…")]
    pub load: Option<String>,
    /// Every leaf always backlogged (the default)
    #[arg(long, hide = true, conflicts_with = "load")]
    pub all_backlogged: bool,
    /// The line's rate (e.g. 20mbit), or DEV=RATE for one device (repeatable)
    #[arg(long, value_name = "[DEV=]RATE")]
    pub link: Vec<String>,
    /// Only this device (default: every device whose root qdisc has classes)
    #[arg(long, value_name = "DEV")]
    pub dev: Option<String>,
    /// Make DEV a multiqueue device of N transmit queues before the policy runs (repeatable)
    #[arg(long, value_name = "DEV=N")]
    pub txqueues: Vec<String>,
    /// A shell script, a tc -batch file or a policy store (default: the store at $TCLAB_STATE)
    pub file: Option<PathBuf>,
    /// The script's arguments, after `--` (tclab explain wan.sh -- eth0 20000)
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct SimArgs {
    /// A scenario file (TOML, docs/SCENARIOS.md) or a built-in scenario's name (--list)
    #[arg(required_unless_present_any = ["list", "show"])]
    pub scenario: Option<String>,
    /// Where to write the results (default: ./tclab-out/NAME)
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the scenario's seed
    // A negative seed is the value, refused as one, not clap's "unexpected argument '-3'" and its tip.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Run the scenario once per seed (FIRST..LAST, both included) and report each metric's mean, min
    /// and max (a sweep of `seed`: tclab sweep's files too)
    #[arg(
        long,
        value_name = "FIRST..LAST",
        conflicts_with_all = ["seed", "trace"],
        allow_hyphen_values = true
    )]
    pub seeds: Option<String>,
    /// Print the summary as JSON on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// Write no plots
    #[arg(long)]
    pub no_plots: bool,
    /// Write every packet's fate at every qdisc to FILE (- for stdout)
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    /// List the built-in scenarios
    #[arg(long, conflicts_with_all = ["scenario", "show"])]
    pub list: bool,
    /// Print a built-in scenario's file (a starting point for your own)
    #[arg(long, value_name = "NAME", conflicts_with = "scenario")]
    pub show: Option<String>,
}

#[derive(Args)]
pub struct ReportArgs {
    /// The Markdown file whose blocks to run and fill (default: docs/EXPERIMENTS.md)
    pub file: Option<PathBuf>,
    /// Write nothing; exit 1 if a table differs from what its runs give
    #[arg(long)]
    pub check: bool,
    /// Only the blocks whose runs name this text (a scenario or a --set)
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// Points run at once (default: the number of cores)
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
}

#[derive(Args)]
pub struct SweepArgs {
    /// A scenario file (TOML, docs/SCENARIOS.md) or a built-in scenario's name (tclab sim --list)
    pub scenario: String,
    /// A key and the values it takes: link.rate=1mbit,10mbit or policy.router.burst=2k,15k (repeatable)
    #[arg(long, value_name = "KEY=V1,V2,…")]
    pub set: Vec<String>,
    /// Where to write the results (default: ./tclab-out/sweep-NAME)
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Points run at once (default: the number of cores)
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
    /// A metric to plot against each key (repeatable; default: every goodput and ping 99th percentile)
    #[arg(long, value_name = "NAME")]
    pub metric: Vec<String>,
    /// Replace the scenario's seed at every point
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Write no plots
    #[arg(long)]
    pub no_plots: bool,
    /// Print the number of points and stop
    #[arg(long, conflicts_with_all = ["point", "merge"])]
    pub points: bool,
    /// Run this point only and write its file into DIR/points (env: the job array's index)
    #[arg(long, value_name = "I|env", conflicts_with = "merge")]
    pub point: Option<String>,
    /// Assemble the table and plots from the point files in DIR/points, into DIR
    // --out beside it was ignored: the results go into DIR, where the points are.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub merge: Option<PathBuf>,
}

const TRACE_HELP: &str = "\
Reads a per-packet trace written by tclab sim SCENARIO --trace FILE (FILE - reads stdin): docs/TRACES.md.
Exit status: 0; 64 if the trace cannot be read or holds nothing the selection names.";

#[derive(Args)]
#[command(after_help = TRACE_HELP)]
pub struct TraceCmd {
    #[command(subcommand)]
    pub command: TraceSub,
}

#[derive(Subcommand)]
pub enum TraceSub {
    /// Per device and class, then per flow: packets enqueued, sent, dropped by reason, sojourn times
    Stats(TraceSelect),
    /// The trace lines that match, as text
    Show(TraceSelect),
    /// The records that match as CSV on stdout, with a header line (pandas: pd.read_csv)
    Export(TraceSelect),
    /// The sojourn time of every packet a class sent, over the run: sojourn-CLASS.png and .svg
    Plot {
        /// The trace file (- for stdin)
        file: String,
        /// A leaf class (of HTB, HFSC, CBQ, DRR, QFQ, PRIO, ETS)
        #[arg(long, value_name = "CLASS", value_parser = parse_classid)]
        class: String,
        /// One device (router:eth1)
        #[arg(long, value_name = "NODE:DEV")]
        dev: Option<String>,
        /// Where to write the plot (default: the current directory)
        #[arg(short, long, value_name = "DIR", default_value = ".")]
        out: PathBuf,
    },
}

/// The lines `tclab trace stats|show` read.
#[derive(Args)]
pub struct TraceSelect {
    /// The trace file (- for stdin)
    pub file: String,
    /// A leaf class (of HTB, HFSC, CBQ, DRR, QFQ, PRIO, ETS)
    #[arg(long, value_name = "CLASS", value_parser = parse_classid)]
    pub class: Option<String>,
    /// A traffic entry; NAME< is its reverse direction (a download's ACKs)
    #[arg(long, value_name = "NAME")]
    pub flow: Option<String>,
    /// One device (router:eth1)
    #[arg(long, value_name = "NODE:DEV")]
    pub dev: Option<String>,
    /// One kind of event
    #[arg(long, value_name = "E", value_parser = ["enq", "deq", "drop", "rxdrop"])]
    pub event: Option<String>,
    /// The filter (kind:pref, e.g. u32:1) that classified an enqueue (keeps enq lines only)
    #[arg(long, value_name = "KIND:PREF")]
    pub filter: Option<String>,
}

/// A classid as tc reads it (`1:20`), printed back as tc prints it.
fn parse_classid(s: &str) -> Result<String, String> {
    tclab_tc::util::get_tc_classid(s)
        .map(|id| tclab_core::Handle(id).to_string())
        .ok_or_else(|| format!("\"{s}\" is not a classid (e.g. 1:20)"))
}

#[derive(Args)]
pub struct DemoArgs {
    /// Where to write each run's results
    #[arg(short, long, value_name = "DIR", default_value = "tclab-out/demo")]
    pub out: PathBuf,
    /// Write no plots
    #[arg(long)]
    pub no_plots: bool,
}

const LIVE_HELP: &str = "\
A frame arriving on one device passes that device's ingress (filters, police, mirred to an ifb) and the
netfilter stage, takes its priority from its TOS byte as a router gives it, and leaves on the other
device through its egress qdisc tree: the engine tclab sim runs, on CLOCK_MONOTONIC. The devices' GRO,
LRO, TSO, GSO and checksum offloads are turned off (printed at the start): super-packets defeat
shapers. Needs root (CAP_NET_RAW, CAP_NET_ADMIN). SIGINT, SIGTERM or SIGHUP stops it with a summary: frames
each way and the tc -s counters of every device. While it is not running nothing passes between the
devices (unless the kernel bridges them).";

/// `tclab live --sample-ms`'s default.
pub const SAMPLE_MS: u64 = 500;

#[derive(Args)]
pub struct LiveArgs {
    /// A device to bridge: give two (--dev A --dev B)
    #[arg(long = "dev", value_name = "DEV", required = true, num_args = 1)]
    pub devs: Vec<String>,
    /// The policy: a shell script, a tc -batch file or a policy store, naming the devices as here
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Stop after this many seconds (default: until interrupted)
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Write interfaces.csv and classes.csv (as it runs), tc.txt, plots and index.html (when it stops)
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// How often to sample the counters for --out, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = SAMPLE_MS, value_parser = clap::value_parser!(u64).range(10..))]
    pub sample_ms: u64,
    /// With --out: CSV files and tc.txt only
    #[arg(long)]
    pub no_plots: bool,
    /// Transmit queues, one thread and engine each, frames spread over them by flow; the ports' roots
    /// must then be mq with a tree per queue (docs/LIVE.md)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Receive with recvmmsg and send with sendmmsg instead of the mmap'd rings (TPACKET_V2), to compare
    #[arg(long)]
    pub no_ring: bool,
    /// Move frames through AF_XDP sockets (copy mode, an XDP program attached in generic mode to
    /// each port while tclab runs) instead of the rings; one queue only
    #[arg(long, conflicts_with = "no_ring")]
    pub xdp: bool,
    /// The policy script's arguments, after `--` (tclab live --dev eth0 --dev eth1 --policy wan.sh -- eth1 20000)
    #[arg(last = true, value_name = "ARGS", requires = "policy")]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct LabCmd {
    #[command(subcommand)]
    pub command: LabSub,
    /// What the lab's namespaces and interfaces are named after (several labs can coexist)
    // A value that starts with a dash is taken, so that the prefix check names what is wrong with it
    // (clap would call `--prefix -x` an unexpected argument).
    #[arg(
        long,
        global = true,
        default_value = "tclab",
        value_name = "NAME",
        allow_hyphen_values = true
    )]
    pub prefix: String,
}

#[derive(Subcommand)]
pub enum LabSub {
    /// Build node-1 (10.0.1.1) — router — node-2 (10.0.1.2) and start the router's bridge
    Up {
        /// The router's policy (its eth0 faces node-1, eth1 node-2): script, tc -batch file or store
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Bridge with the kernel instead and apply the policy with this machine's tc (to compare)
        #[arg(long)]
        kernel: bool,
        /// tclab live writes its samples, plots and counters here when the lab goes down
        #[arg(short, long, value_name = "DIR", conflicts_with = "kernel")]
        out: Option<PathBuf>,
        /// tclab live's transmit queues (threads); the policy's roots must then be mq
        #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "kernel", value_parser = clap::value_parser!(u16).range(1..=64))]
        queues: u16,
        /// tclab live receives with recvmmsg and sends with sendmmsg instead of its rings, to compare
        #[arg(long, conflicts_with = "kernel")]
        no_ring: bool,
        /// tclab live moves frames through AF_XDP sockets instead of its rings (tclab live --xdp)
        #[arg(long, conflicts_with_all = ["kernel", "no_ring"])]
        xdp: bool,
        /// The policy script's arguments, after `--` (tclab lab up --policy wan.sh -- eth1 20000)
        #[arg(last = true, value_name = "ARGS", requires = "policy")]
        args: Vec<String>,
    },
    /// Stop the bridge (its summary is printed) and remove the lab's namespaces
    Down,
    /// Each node's name and address, and the bridge's state
    Status,
    /// One scenario (three nodes in a chain) simulated, then live in a lab: goodput and RTTs side by side
    Compare {
        /// A scenario file or built-in name (tclab sim --list), e.g. seed000-htb-2mbit
        scenario: String,
        /// Shorten the scenario to this many seconds (both runs)
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
    },
    /// Forwarding rate of tclab live against the kernel's bridge, in labs built and removed row by row (--prefix's: not one that is up)
    Bench {
        /// Seconds of traffic per measurement
        #[arg(long, default_value_t = 5, value_name = "SECONDS")]
        secs: u32,
        /// Instead: TBF and HTB at 500 Mbit/s and 1 Gbit/s, the rate node-1 receives against the configured (tclab's own traffic source)
        #[arg(long)]
        shaping: bool,
    },
    /// Run a command in a node: tclab lab exec node-2 -- iperf3 -c 10.0.1.1
    Exec {
        /// node-1, router or node-2
        node: String,
        /// The command and its arguments
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Args)]
pub struct ServeArgs {
    /// Stop after this many seconds without a call (default: run until interrupted)
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle: Option<u64>,
    /// As started by a call: silent, exits at once if an engine serves the store already
    #[arg(long)]
    pub auto: bool,
}

/// `tclab completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell) -> u8 {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "tclab", &mut std::io::stdout());
    0
}
