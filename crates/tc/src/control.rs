//! The control channel: one resident engine that `tclab tc|iptables|link` calls reach through a Unix
//! socket.
//!
//! A shell script calls `tc` once per line; started afresh, each call would read and replay the whole
//! policy store, so a script of N commands would cost O(N²). `tclab script run` (and the simulator, for a
//! script policy) instead starts a [`Server`] holding the store open in memory, and sets `TCLAB_CONTROL`
//! to its socket in the script's environment; each `tclab` the script runs sends its words there and
//! prints the answer. The server applies requests one at a time, as the kernel's rtnl lock does, and each
//! change is durable in the store before its caller is answered, so nothing is lost if the script or
//! tclab is killed. Other processes may use the same store meanwhile: the server takes the store's lock
//! for each request and re-reads the store if someone else changed it.
//!
//! The socket lives in a directory only the caller can enter (mode 0700), and is itself mode 0600. This
//! is the channel a live shaper will take its policy changes on.
//!
//! A script's shell functions do not start a `tclab` to call: [`Server::start_for_script`] also listens
//! on a loopback TCP port, which bash opens itself (`/dev/tcp/127.0.0.1/PORT`), and answers only callers
//! that present the random token given in the script's environment (`TCLAB_SCRIPT_PORT`,
//! `TCLAB_SCRIPT_TOKEN`). There a request is NUL-terminated words — token, store, caller, argc, the
//! words, whether stdin follows, stdin — and the answer is the exit code, then stderr and stdout, each
//! inline or, when long, streamed (see `shell_reply`).
//!
//! Protocol on the Unix socket: one connection per request; the client writes one JSON line
//! `{"state": FILE, "argv": ["tc", …], "stdin": TEXT|null}` and reads one JSON line
//! `{"stdout": …, "stderr": …, "code": N}`. A request for another store than the server's, or a server
//! that is gone, makes the client fall back to opening the store itself.

use crate::store::{Lock, Store};
use crate::Output;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The environment variable naming the socket.
pub const ENV: &str = "TCLAB_CONTROL";

#[derive(Serialize, Deserialize, Default)]
pub struct Request {
    pub state: PathBuf,
    pub argv: Vec<String>,
    pub stdin: Option<String>,
    /// Where in the script the call was made (`FILE:LINE`), for the report.
    #[serde(default)]
    pub caller: Option<String>,
    /// Why the request is refused before it reaches the engine's commands (words that are not UTF-8);
    /// the refusal is still counted in the report.
    #[serde(skip)]
    pub refuse: Option<String>,
}

/// What a script's calls did: how many changes applied, and each refusal with where it came from.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub applied: usize,
    pub refused: Vec<Refusal>,
    /// Lines of batches refused beyond the first of each (a `-force` batch lists all its failures in
    /// one entry of `refused`).
    pub batch_lines_refused: usize,
    /// Calls that applied and printed on stderr all the same (tc's `Warning: sch_htb: quantum of class
    /// 10100 is small…`), with where they came from.
    pub warned: Vec<Warned>,
    /// What every call printed on stderr, in order: the part of the script's stderr that came from
    /// tclab, so that a caller showing both the report and the script's stderr can leave it out once.
    pub printed: Vec<String>,
    /// Every record the calls added to the journal, with the line of the call that added it, in order
    /// (kept by a script's server only: `tclab check` names the line that made each object).
    pub changes: Vec<Change>,
    keep_changes: bool,
}

/// A journal record and the call that added it.
#[derive(Debug, Clone)]
pub struct Change {
    /// `FILE:LINE` of the call, as in [`Refusal::at`].
    pub at: String,
    pub entry: Vec<String>,
}

/// A call that applied with a message on stderr.
#[derive(Debug, Clone)]
pub struct Warned {
    /// `FILE:LINE` of the call, as in [`Refusal::at`].
    pub at: String,
    /// The command as a shell line.
    pub command: String,
    /// What tc, iptables or tclab said.
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Refusal {
    /// `FILE:LINE` of the call, or `?` when the call did not come through the script's shell functions.
    pub at: String,
    /// The command as a shell line (`tc qdisc add …`).
    pub command: String,
    /// What tc, iptables or tclab said.
    pub message: String,
    /// A deletion or flush that found nothing to remove: what scripts do before they build
    /// (`tc qdisc del dev eth0 root 2>/dev/null`), harmless, and not fatal under `--strict`.
    pub cleanup: bool,
}

impl Report {
    /// Refusals other than clean-ups: what `--strict` makes fatal.
    pub fn failures(&self) -> usize {
        self.refused.iter().filter(|r| !r.cleanup).count() + self.batch_lines_refused
    }

    /// The summary `tclab script run` prints on stderr.
    pub fn summary(&self) -> String {
        let refused = self.refused.len() + self.batch_lines_refused;
        let cleanups = refused - self.failures();
        let mut s = format!(
            "tclab script: {} command{} applied, {refused} refused",
            self.applied,
            if self.applied == 1 { "" } else { "s" },
        );
        if cleanups > 0 {
            s.push_str(&format!(
                " ({cleanups} of them a deletion of something that was not there)"
            ));
        }
        s.push('\n');
        for r in &self.refused {
            s.push_str(&format!("  {}: {}\n", r.at, r.command));
            // tc follows some errors with its usage text: the first lines say what was wrong.
            for line in r
                .message
                .lines()
                .filter(|l| !l.trim().is_empty())
                .take_while(|l| !l.trim_start().starts_with("Usage:"))
                .take(3)
            {
                s.push_str(&format!("    {line}\n"));
            }
        }
        s
    }
}

#[derive(Serialize, Deserialize)]
pub struct Reply {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// The environment variables through which a script's shell functions reach the server without starting
/// a process: the loopback port and the token that proves a caller was given them.
pub const PORT_ENV: &str = "TCLAB_SCRIPT_PORT";
pub const TOKEN_ENV: &str = "TCLAB_SCRIPT_TOKEN";

/// A request on its way to the engine's thread, with where its answer goes.
type Job = (Request, std::sync::mpsc::Sender<Reply>);

/// A resident engine serving one store on a socket; stopped when dropped.
pub struct Server {
    socket: PathBuf,
    /// The loopback listener for bash (`/dev/tcp`), with its token, when started for a script.
    shell: Option<(u16, String)>,
    stop: Arc<AtomicBool>,
    /// Requests served so far (`tclab serve --idle` watches it).
    served: Arc<std::sync::atomic::AtomicU64>,
    /// The listeners' threads; the engine's thread (which owns the store: an engine is not `Send`)
    /// applies their requests one at a time, as the kernel's rtnl lock does, and says what they did.
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The listening sockets, kept open here so that stopping can shut them down: that wakes an
    /// `accept` blocked in a listener's thread even when the socket's file has been deleted.
    listeners: Vec<Arc<dyn AsRawFd + Send + Sync>>,
    engine: Option<std::thread::JoinHandle<Report>>,
    jobs: Option<std::sync::mpsc::Sender<Job>>,
}

impl Server {
    /// Serve the store at `state` on `dir/control.sock`; `dir` must be private to the caller.
    pub fn start(state: &Path, dir: &Path) -> Result<Server, String> {
        Server::start_with(state, dir, false)
    }

    /// [`Server::start`], and also on a loopback TCP port that bash reaches by itself
    /// (`exec {fd}<>/dev/tcp/127.0.0.1/PORT`), so that a script's `tc` costs no process at all: the
    /// shell functions of [`crate::script`] send their words there. Only a caller that presents the
    /// token (random, 128 bits, given in the script's environment) is answered.
    pub fn start_for_script(state: &Path, dir: &Path) -> Result<Server, String> {
        Server::start_with(state, dir, true)
    }

    fn start_with(state: &Path, dir: &Path, shell: bool) -> Result<Server, String> {
        use std::os::unix::fs::PermissionsExt;
        let socket = dir.join("control.sock");
        let _ = std::fs::remove_file(&socket);
        let listener =
            UnixListener::bind(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        let mut server = Server {
            socket,
            shell: None,
            stop: Arc::new(AtomicBool::new(false)),
            served: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            threads: Vec::new(),
            listeners: Vec::new(),
            engine: None,
            jobs: None,
        };
        let state = state.to_path_buf();
        let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
        server.engine = Some(std::thread::spawn(move || {
            let mut store: Option<Store> = None;
            let mut report = Report {
                keep_changes: shell,
                ..Report::default()
            };
            for (req, reply_to) in inbox {
                let _ = reply_to.send(answer(&mut store, &mut report, &state, &req));
            }
            report
        }));
        server.jobs = Some(jobs);
        let (stop, served, jobs) = server.parts();
        let listener = Arc::new(listener);
        server.listeners.push(listener.clone());
        server.threads.push(accept_loop(
            listener,
            |l| l.accept().map(|(c, _)| c),
            stop,
            move |conn: UnixStream| {
                let _ = conn.set_read_timeout(Some(CALLER_TIMEOUT));
                let reply = match read_request(&conn) {
                    Ok(req) => submit(&jobs, req),
                    Err(e) => Reply {
                        stdout: String::new(),
                        stderr: format!("tclab: bad control request: {e}\n"),
                        code: -1,
                    },
                };
                let line = serde_json::to_string(&reply).expect("strings serialise") + "\n";
                let _ = (&conn).write_all(line.as_bytes());
                served.fetch_add(1, Ordering::SeqCst);
            },
        ));
        if shell {
            let tcp = std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(|e| format!("cannot listen on the loopback interface: {e}"))?;
            let port = tcp.local_addr().map_err(|e| e.to_string())?.port();
            let token = Arc::new(random_token()?);
            let (stop, served, jobs) = server.parts();
            let expected = token.clone();
            let tcp = Arc::new(tcp);
            server.listeners.push(tcp.clone());
            server.threads.push(accept_loop(
                tcp,
                |l| l.accept().map(|(c, _)| c),
                stop,
                move |conn: std::net::TcpStream| {
                    let _ = conn.set_read_timeout(Some(CALLER_TIMEOUT));
                    // No token, or a request cut short: closed unanswered.
                    let Some(req) = read_shell_request(&conn, &expected) else {
                        return;
                    };
                    let _ = (&conn).write_all(&shell_reply(&submit(&jobs, req)));
                    served.fetch_add(1, Ordering::SeqCst);
                },
            ));
            server.shell = Some((port, token.to_string()));
        }
        Ok(server)
    }

    fn parts(
        &self,
    ) -> (
        Arc<AtomicBool>,
        Arc<std::sync::atomic::AtomicU64>,
        std::sync::mpsc::Sender<Job>,
    ) {
        (
            self.stop.clone(),
            self.served.clone(),
            self.jobs
                .clone()
                .expect("the engine runs until the server stops"),
        )
    }

    /// How many requests the server has answered.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The environment a script needs to reach this server: the socket for `tclab` processes, and the
    /// loopback port and token for the shell functions, if started for a script.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env = vec![(ENV.to_string(), self.socket.to_string_lossy().into_owned())];
        if let Some((port, token)) = &self.shell {
            env.push((PORT_ENV.to_string(), port.to_string()));
            env.push((TOKEN_ENV.to_string(), token.clone()));
        }
        env
    }

    /// Stop serving and say what the calls did.
    pub fn finish(mut self) -> Report {
        self.stop_threads()
    }

    fn stop_threads(&mut self) -> Report {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loops so that they see the flag: on Linux, shutting a listening socket down
        // makes a blocked accept return.
        extern "C" {
            fn shutdown(fd: i32, how: i32) -> i32;
        }
        const SHUT_RDWR: i32 = 2;
        for l in &self.listeners {
            // SAFETY: the descriptor belongs to a listener this server keeps open until after the join.
            unsafe {
                shutdown(l.as_raw_fd(), SHUT_RDWR);
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.listeners.clear();
        let _ = std::fs::remove_file(&self.socket);
        // The listeners are gone with their senders; this one closes the engine's inbox.
        self.jobs = None;
        self.engine
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.engine.is_some() {
            self.stop_threads();
        }
    }
}

/// Accept connections on `listener` until the server stops, each served by `serve` in a thread of its
/// own: a caller that connects and stalls holds up nobody else (the engine still applies requests one
/// at a time).
fn accept_loop<L, C>(
    listener: Arc<L>,
    accept: fn(&L) -> std::io::Result<C>,
    stop: Arc<AtomicBool>,
    serve: impl Fn(C) + Clone + Send + 'static,
) -> std::thread::JoinHandle<()>
where
    L: Send + Sync + 'static,
    C: Send + 'static,
{
    std::thread::spawn(move || loop {
        let conn = accept(&listener);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(conn) = conn else { continue };
        let serve = serve.clone();
        std::thread::spawn(move || serve(conn));
    })
}

/// How long a caller may take to send its request.
const CALLER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Above this, the shell functions are sent stdout as a stream they hand to `cat`, rather than a word
/// bash reads a byte at a time (a socket is not seekable, so bash's `read` cannot read ahead).
const SHELL_INLINE_MAX: usize = 2048;

/// The answer to the shell functions: `CODE\0`, then stderr and stdout, each either inline
/// (`i\0TEXT\0`) or, when long, streamed — stderr as `s\0LENGTH\0` and that many bytes (bash hands them to
/// `head -c`, which reads no further), stdout as `s\0` and the rest of the connection (to `cat`). A
/// request that could not be served (code -1 on the socket, where it tells a `tclab` client to open the
/// store itself) is a failure here: exit status 1.
fn shell_reply(reply: &Reply) -> Vec<u8> {
    let code = if reply.code < 0 {
        1
    } else {
        reply.code.min(255)
    };
    let mut out = format!("{code}\0").into_bytes();
    let err = reply.stderr.replace('\0', "");
    if err.len() > SHELL_INLINE_MAX {
        out.extend_from_slice(format!("s\0{}\0", err.len()).as_bytes());
        out.extend_from_slice(err.as_bytes());
    } else {
        out.extend_from_slice(b"i\0");
        out.extend_from_slice(err.as_bytes());
        out.push(0);
    }
    if reply.stdout.len() > SHELL_INLINE_MAX {
        out.extend_from_slice(b"s\0");
        out.extend_from_slice(reply.stdout.as_bytes());
    } else {
        out.extend_from_slice(b"i\0");
        out.extend_from_slice(reply.stdout.replace('\0', "").as_bytes());
        out.push(0);
    }
    out
}

/// 128 random bits as hex, from the kernel's generator.
fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(
        &mut File::open("/dev/urandom").map_err(|e| format!("/dev/urandom: {e}"))?,
        &mut bytes,
    )
    .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Hand a request to the engine's thread and wait for its answer.
fn submit(jobs: &std::sync::mpsc::Sender<Job>, req: Request) -> Reply {
    let (tx, rx) = std::sync::mpsc::channel();
    jobs.send((req, tx))
        .ok()
        .and_then(|()| rx.recv().ok())
        .unwrap_or(Reply {
            stdout: String::new(),
            stderr: "tclab: the control server is stopping\n".into(),
            code: -1,
        })
}

/// Apply one request and note it in the report.
fn answer(store: &mut Option<Store>, report: &mut Report, state: &Path, req: &Request) -> Reply {
    let refusal = |message: &str, cleanup: bool| Refusal {
        at: req.caller.clone().unwrap_or_else(|| "?".into()),
        command: crate::script::shell_line(&req.argv),
        message: message.to_string(),
        cleanup,
    };
    if let Some(why) = &req.refuse {
        let message = format!("tclab: {why}\n");
        report.refused.push(refusal(&message, false));
        report.printed.push(message.clone());
        return Reply {
            stdout: String::new(),
            stderr: message,
            code: 1,
        };
    }
    if req.state != state {
        return Reply {
            stdout: String::new(),
            stderr: "tclab: this control socket serves another store\n".into(),
            code: -1,
        };
    }
    let (mut reply, changes) = handle(store, state, req);
    // ethtool's notes of what tclab ignores name the script's line, as its refusals do.
    if let (Some(at), Some("ethtool")) = (&req.caller, req.argv.first().map(String::as_str)) {
        reply.stderr = reply.stderr.replace(
            "tclab script: ignoring",
            &format!("tclab script: {at}: ignoring"),
        );
    }
    let applied = changes.len();
    if report.keep_changes {
        let at = req.caller.clone().unwrap_or_else(|| "?".into());
        report
            .changes
            .extend(changes.into_iter().map(|entry| Change {
                at: at.clone(),
                entry,
            }));
    }
    if !reply.stderr.is_empty() {
        report.printed.push(reply.stderr.clone());
    }
    let args = req.argv.get(1..).unwrap_or_default();
    let is_batch =
        req.argv.first().is_some_and(|t| t == "tc") && crate::store::batch_arg(args).is_some();
    if !is_batch && !crate::store::changes_policy(&req.argv) {
        return reply;
    }
    if is_batch {
        // A batch counts its lines: those applied, and each that failed — it says `Command failed
        // FILE:N`, and `-force` goes on past it. One entry lists them all.
        report.applied += applied;
        if reply.code != 0 {
            report.batch_lines_refused +=
                reply.stderr.matches("Command failed ").count().max(1) - 1;
            report.refused.push(refusal(&reply.stderr, false));
        }
    } else if reply.code == 0 {
        report.applied += 1;
    } else {
        report
            .refused
            .push(refusal(&reply.stderr, is_teardown(&req.argv)));
    }
    if reply.code == 0 && !reply.stderr.trim().is_empty() {
        report.warned.push(Warned {
            at: req.caller.clone().unwrap_or_else(|| "?".into()),
            command: crate::script::shell_line(&req.argv),
            message: reply.stderr.clone(),
        });
    }
    reply
}

/// A command that takes something down: a removal ([`crate::store::is_removal`]), or `ip link set DEV
/// down` (`ifconfig DEV down`), which scripts run before they re-create a device. Refused, it found
/// nothing to take down: a clean-up, not a failure.
fn is_teardown(argv: &[String]) -> bool {
    crate::store::is_removal(argv)
        || (argv.first().is_some_and(|w| w == "link")
            && argv.get(1).is_some_and(|w| w == "set")
            && argv.iter().skip(2).any(|w| w == "down"))
}

/// A request from the shell functions: NUL-terminated fields `TOKEN STATE CALLER ARGC ARG… HAS_STDIN
/// STDIN` (bash's `printf '%s\0'`; a shell string cannot hold a NUL, so none is lost). `None` for a
/// caller without the token, or a request cut short; words that are not UTF-8 make a request the
/// engine refuses (`Request::refuse`).
fn read_shell_request(conn: &std::net::TcpStream, token: &str) -> Option<Request> {
    use std::io::Read;
    let mut r = BufReader::new(conn);
    let mut field = |limit: u64| -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        (&mut r).take(limit).read_until(0, &mut buf).ok()?;
        (buf.pop() == Some(0)).then_some(buf)
    };
    // The token first, read with a bound, before anything else is believed.
    if field(64)? != token.as_bytes() {
        return None;
    }
    const BIG: u64 = 1 << 30;
    // Words that are not UTF-8 make a request the engine refuses (and reports), shown as best it can.
    let mut refuse = None;
    let mut text = |b: Vec<u8>, what: &str| match String::from_utf8(b) {
        Ok(t) => t,
        Err(e) => {
            refuse.get_or_insert(format!("{what} is not valid UTF-8 text"));
            String::from_utf8_lossy(e.as_bytes()).into_owned()
        }
    };
    let asked_state = PathBuf::from(text(field(BIG)?, "the store's name"));
    // Only the report shows it: a script name that is not UTF-8 is shown as best it can be.
    let caller = String::from_utf8_lossy(&field(BIG)?).into_owned();
    let argc: usize = String::from_utf8_lossy(&field(32)?).parse().ok()?;
    let mut argv = Vec::new();
    for n in 0..argc {
        let w = field(BIG)?;
        argv.push(text(w, &format!("argument {n}")));
    }
    let has_stdin = field(8)? == b"1";
    let stdin = field(BIG)?;
    let stdin = has_stdin.then(|| text(stdin, "the batch"));
    Some(Request {
        state: asked_state,
        argv,
        stdin,
        caller: (!caller.is_empty()).then_some(caller),
        refuse,
    })
}

fn read_request(conn: &UnixStream) -> Result<Request, String> {
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| e.to_string())
}

/// One request, under the store's lock, against the resident engine (re-read if the file changed), and
/// the records it added.
fn handle(store: &mut Option<Store>, state: &Path, req: &Request) -> (Reply, Vec<Vec<String>>) {
    let failed = |e: String| Reply {
        stdout: String::new(),
        stderr: format!("tclab: {e}\n"),
        code: 1,
    };
    let _lock = match Lock::take(state, true) {
        Ok(l) => l,
        Err(e) => return (failed(e), Vec::new()),
    };
    let mut warnings = String::new();
    let open = match store.as_mut() {
        Some(s) => s.refresh(),
        None => Store::open(state).map(|(s, problems)| {
            *store = Some(s);
            problems
        }),
    };
    match open {
        Ok(problems) => {
            for p in problems {
                warnings.push_str(&format!("tclab: warning: {p}\n"));
            }
        }
        Err(e) => {
            *store = None;
            return (failed(e), Vec::new());
        }
    }
    let s = store.as_mut().expect("opened above");
    match s.execute(&req.argv, req.stdin.as_deref()) {
        Ok(Output {
            stdout,
            stderr,
            code,
        }) => (
            Reply {
                stdout,
                stderr: warnings + &stderr,
                code,
            },
            s.last_changes().to_vec(),
        ),
        Err(e) => {
            // The engine may be ahead of the file now: read it again next time.
            *store = None;
            (failed(e), Vec::new())
        }
    }
}

/// Why a request got no answer.
pub enum CallError {
    /// No server listening there (none started, or a stale socket).
    Unreachable,
    /// A server answered that it serves another store: the caller opens the store itself.
    Elsewhere,
    /// The server took the request and did not answer: whether it applied is unknown, so the caller must
    /// not apply it again.
    Lost(String),
}

/// Where `tclab serve` puts the socket of the store at `state`: a directory beside it that only its owner
/// may enter (`FILE.serve/control.sock`).
pub fn resident_dir(state: &Path) -> PathBuf {
    let mut name = state.file_name().unwrap_or_default().to_os_string();
    name.push(".serve");
    state.with_file_name(name)
}

/// Where a running `tclab live` listens for the `tclab tc|iptables|link` calls made in its network
/// namespace: `/run/tclab/live-INODE.sock`, INODE naming the namespace (`/proc/self/ns/net`), so that
/// `ip netns exec ROUTER tclab tc …` reaches the bridge of that namespace as `tc` would reach its
/// kernel. `None` where the namespace cannot be named.
pub fn live_socket() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata("/proc/self/ns/net").ok()?.ino();
    Some(PathBuf::from(format!("/run/tclab/live-{ino}.sock")))
}

/// Answer one request on a connection another loop accepted (`tclab live`'s): read its line within
/// `timeout`, answer it with `answer`. A caller that sends nothing in time, or garbage, is dropped.
pub fn serve_connection(
    conn: UnixStream,
    timeout: std::time::Duration,
    answer: impl FnOnce(&Request) -> Output,
) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(timeout));
    let _ = conn.set_write_timeout(Some(timeout));
    let mut line = String::new();
    if BufReader::new(&conn).read_line(&mut line).is_err() {
        return;
    }
    let Ok(req) = serde_json::from_str::<Request>(&line) else {
        return;
    };
    let out = answer(&req);
    let reply = Reply {
        stdout: out.stdout,
        stderr: out.stderr,
        code: out.code,
    };
    let text = serde_json::to_string(&reply).expect("strings serialise") + "\n";
    let _ = (&conn).write_all(text.as_bytes());
}

/// Send a request to the server at `socket`.
pub fn call(socket: &Path, req: &Request) -> Result<Reply, CallError> {
    let mut conn = UnixStream::connect(socket).map_err(|_| CallError::Unreachable)?;
    let line = serde_json::to_string(req).expect("strings serialise") + "\n";
    conn.write_all(line.as_bytes())
        .map_err(|_| CallError::Unreachable)?;
    let mut answer = String::new();
    BufReader::new(&conn).read_line(&mut answer).map_err(|e| {
        CallError::Lost(format!(
            "the control server at {} stopped before it answered ({e}): whether the command \
                 was applied is unknown (look with a show before repeating it)",
            socket.display()
        ))
    })?;
    let reply: Reply = serde_json::from_str(&answer).map_err(|_| {
        CallError::Lost(format!(
            "the control server at {} stopped before it answered: whether the command was applied \
             is unknown (look with a show before repeating it)",
            socket.display()
        ))
    })?;
    if reply.code < 0 {
        return Err(CallError::Elsewhere);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn shell_call(port: u16, fields: &[&str]) -> String {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut req = String::new();
        for f in fields {
            req.push_str(f);
            req.push('\0');
        }
        c.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        answer
    }

    /// The loopback listener answers the shell's words only with the token, as the Unix socket would.
    #[test]
    fn the_shell_channel_needs_the_token() {
        let dir = std::env::temp_dir().join(format!("tclab-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("policy.json");
        let server = Server::start_for_script(&state, &dir).unwrap();
        let env: std::collections::BTreeMap<_, _> = server.environment().into_iter().collect();
        let port: u16 = env[PORT_ENV].parse().unwrap();
        let token = env[TOKEN_ENV].as_str();
        assert_eq!(token.len(), 32);
        let st = state.to_str().unwrap();
        let add = ["7", "tc", "qdisc", "add", "dev", "eth0", "root", "sfq"];
        // A wrong token: the connection closes unanswered and nothing is applied.
        let mut wrong = vec!["0123456789abcdef0123456789abcdef", st, "x.sh:1"];
        wrong.extend(add.iter().chain(["0", ""].iter()));
        assert_eq!(shell_call(port, &wrong), "");
        assert!(!state.exists());
        // The right one: tc's answer (exit code, stderr, then stdout inline), and the change is made.
        let mut right = vec![token, st, "x.sh:1"];
        right.extend(add.iter().chain(["0", ""].iter()));
        assert_eq!(shell_call(port, &right), "0\0i\0\0i\0\0");
        let show = [
            token, st, "", "5", "tc", "qdisc", "show", "dev", "eth0", "0", "",
        ];
        let shown = shell_call(port, &show);
        assert!(
            shown.starts_with("0\0i\0\0i\0qdisc sfq 8001: root refcnt 2 limit 127p"),
            "{shown:?}"
        );
        // A refusal: tc's exit code and message; an argument that is not UTF-8: refused, code 1.
        let dup = [
            token, st, "", "7", "tc", "qdisc", "add", "dev", "eth0", "root", "sfq", "0", "",
        ];
        assert_eq!(
            shell_call(port, &dup),
            "2\0i\0Error: Exclusivity flag on, cannot modify.\n\0i\0\0"
        );
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut req = format!("{token}\0{st}\0\x003\0tc\0qdisc\0").into_bytes();
        req.extend_from_slice(b"\xff\x000\0\0");
        c.write_all(&req).unwrap();
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        assert_eq!(
            answer,
            "1\0i\0tclab: argument 2 is not valid UTF-8 text\n\0i\0\0"
        );
        // `tc -batch -` with the batch as stdin.
        let batch = [
            token,
            st,
            "",
            "3",
            "tc",
            "-batch",
            "-",
            "1",
            "qdisc del dev eth0 root\n",
        ];
        assert_eq!(shell_call(port, &batch), "0\0i\0\0i\0\0");
        let report = server.finish();
        assert_eq!(report.applied, 2);
        // The duplicate add, and the request that was not UTF-8 (refused, but reported all the same).
        assert_eq!(report.refused.len(), 2);
        assert_eq!(
            report.refused[1].message,
            "tclab: argument 2 is not valid UTF-8 text\n"
        );
        // What the calls printed on stderr, in order (the shows printed nothing there); no call that
        // applied printed anything.
        assert_eq!(
            report.printed,
            [
                "Error: Exclusivity flag on, cannot modify.\n",
                "tclab: argument 2 is not valid UTF-8 text\n"
            ]
        );
        assert!(report.warned.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
