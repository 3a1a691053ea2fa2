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
//! Protocol: one connection per request; the client writes one JSON line
//! `{"state": FILE, "argv": ["tc", …], "stdin": TEXT|null}` and reads one JSON line
//! `{"stdout": …, "stderr": …, "code": N}`. A request for another store than the server's, or a server
//! that is gone, makes the client fall back to opening the store itself.

use crate::store::{Lock, Store};
use crate::Output;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The environment variable naming the socket.
pub const ENV: &str = "TCLAB_CONTROL";

#[derive(Serialize, Deserialize)]
pub struct Request {
    pub state: PathBuf,
    pub argv: Vec<String>,
    pub stdin: Option<String>,
    /// Where in the script the call was made (`FILE:LINE`), for the report.
    #[serde(default)]
    pub caller: Option<String>,
}

/// What a script's calls did: how many changes applied, and each refusal with where it came from.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub applied: usize,
    pub refused: Vec<Refusal>,
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
        self.refused.iter().filter(|r| !r.cleanup).count()
    }

    /// The summary `tclab script run` prints on stderr.
    pub fn summary(&self) -> String {
        let cleanups = self.refused.len() - self.failures();
        let mut s = format!(
            "tclab script: {} command{} applied, {} refused",
            self.applied,
            if self.applied == 1 { "" } else { "s" },
            self.refused.len()
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

/// A resident engine serving one store on a socket; stopped when dropped.
pub struct Server {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    /// Requests served so far (`tclab serve --idle` watches it).
    served: Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<Report>>,
}

impl Server {
    /// Serve the store at `state` on `dir/control.sock`; `dir` must be private to the caller.
    pub fn start(state: &Path, dir: &Path) -> Result<Server, String> {
        use std::os::unix::fs::PermissionsExt;
        let socket = dir.join("control.sock");
        let _ = std::fs::remove_file(&socket);
        let listener =
            UnixListener::bind(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let state = state.to_path_buf();
        let (flag, count) = (stop.clone(), served.clone());
        let thread = std::thread::spawn(move || serve(listener, state, flag, count));
        Ok(Server {
            socket,
            stop,
            served,
            thread: Some(thread),
        })
    }

    /// How many requests the server has answered.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stop serving and say what the calls did.
    pub fn finish(mut self) -> Report {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> Report {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = UnixStream::connect(&self.socket);
        let report = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&self.socket);
        report
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop_thread();
        }
    }
}

fn serve(
    listener: UnixListener,
    state: PathBuf,
    stop: Arc<AtomicBool>,
    served: Arc<std::sync::atomic::AtomicU64>,
) -> Report {
    let mut store: Option<Store> = None;
    let mut report = Report::default();
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(conn) = conn else { continue };
        let reply = match read_request(&conn) {
            Ok(req) if req.state == state => {
                let reply = handle(&mut store, &state, &req);
                if crate::store::changes_policy(&req.argv) {
                    if reply.code == 0 {
                        report.applied += 1;
                    } else {
                        report.refused.push(Refusal {
                            at: req.caller.clone().unwrap_or_else(|| "?".into()),
                            command: crate::script::shell_line(&req.argv),
                            message: reply.stderr.clone(),
                            cleanup: crate::store::is_removal(&req.argv),
                        });
                    }
                }
                reply
            }
            Ok(_) => Reply {
                stdout: String::new(),
                stderr: "tclab: this control socket serves another store\n".into(),
                code: -1,
            },
            Err(e) => Reply {
                stdout: String::new(),
                stderr: format!("tclab: bad control request: {e}\n"),
                code: -1,
            },
        };
        let mut w = &conn;
        let line = serde_json::to_string(&reply).expect("strings serialise") + "\n";
        let _ = w.write_all(line.as_bytes());
        served.fetch_add(1, Ordering::SeqCst);
    }
    report
}

fn read_request(conn: &UnixStream) -> Result<Request, String> {
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| e.to_string())
}

/// One request, under the store's lock, against the resident engine (re-read if the file changed).
fn handle(store: &mut Option<Store>, state: &Path, req: &Request) -> Reply {
    let failed = |e: String| Reply {
        stdout: String::new(),
        stderr: format!("tclab: {e}\n"),
        code: 1,
    };
    let _lock = match Lock::take(state, true) {
        Ok(l) => l,
        Err(e) => return failed(e),
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
            return failed(e);
        }
    }
    let s = store.as_mut().expect("opened above");
    match s.execute(&req.argv, req.stdin.as_deref()) {
        Ok(Output {
            stdout,
            stderr,
            code,
        }) => Reply {
            stdout,
            stderr: warnings + &stderr,
            code,
        },
        Err(e) => {
            // The engine may be ahead of the file now: read it again next time.
            *store = None;
            failed(e)
        }
    }
}

/// Why a request got no answer.
pub enum CallError {
    /// No server there, or it serves another store: the caller opens the store itself.
    Unreachable,
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

/// Send a request to the server at `socket`.
pub fn call(socket: &Path, req: &Request) -> Result<Reply, CallError> {
    let mut conn = UnixStream::connect(socket).map_err(|_| CallError::Unreachable)?;
    let line = serde_json::to_string(req).expect("strings serialise") + "\n";
    conn.write_all(line.as_bytes())
        .map_err(|_| CallError::Unreachable)?;
    let mut answer = String::new();
    BufReader::new(&conn)
        .read_line(&mut answer)
        .map_err(|e| CallError::Lost(e.to_string()))?;
    let reply: Reply = serde_json::from_str(&answer).map_err(|_| {
        CallError::Lost(format!(
            "the control server at {} did not answer",
            socket.display()
        ))
    })?;
    if reply.code < 0 {
        return Err(CallError::Unreachable);
    }
    Ok(reply)
}
