//! Support shared by the integration tests that run commands: a scratch directory removed on drop.
//! (Each test file uses what it needs of it.)
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system's temp dir, unique per process and call, deleted when dropped.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "tclab-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A path inside a scratch directory that is removed when this is dropped (the end of the test).
pub struct Scratch {
    _dir: TempDir,
    path: PathBuf,
}

impl Scratch {
    /// A fresh directory for `tag`; the path is `name` inside it (or the directory, for "").
    pub fn new(tag: &str, name: &str) -> Scratch {
        let dir = TempDir::new(tag);
        let path = if name.is_empty() {
            dir.path.clone()
        } else {
            dir.path.join(name)
        };
        Scratch { _dir: dir, path }
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

/// What a command did.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `Command::new(prog).args(args)`.
#[allow(dead_code)]
pub fn cmd(prog: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(prog);
    c.args(args);
    c
}

/// Run `c` with stdin closed and its output captured, in its own process group; after `timeout` the
/// whole group is killed and the result has exit code `timeout_code`. A death by signal N is 128 + N, as
/// a shell reports it.
pub fn run_with_timeout(
    mut c: std::process::Command,
    timeout: std::time::Duration,
    timeout_code: i32,
) -> RunResult {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Stdio;
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let what = format!("{c:?}");
    let child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            return RunResult {
                code: -1,
                stdout: String::new(),
                stderr: format!("cannot run {what}: {e}"),
            }
        }
    };
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(timeout) {
        Ok(o) => o,
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = rx.recv();
            return RunResult {
                code: timeout_code,
                stdout: String::new(),
                stderr: format!("timed out after {timeout:?}: {what}"),
            };
        }
    };
    match out {
        Ok(o) => RunResult {
            code: o
                .status
                .code()
                .unwrap_or_else(|| 128 + o.status.signal().unwrap_or(0)),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        },
        Err(e) => RunResult {
            code: -1,
            stdout: String::new(),
            stderr: format!("wait failed: {e}"),
        },
    }
}

/// `tclab ARGS…` against the policy store `state` (TCLAB_STATE), its output captured.
#[allow(dead_code)]
pub fn tclab(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tclab"))
        .args(args)
        .env("TCLAB_STATE", state)
        .output()
        .expect("run tclab")
}

/// A command's stdout as text.
#[allow(dead_code)]
pub fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The path of `tests/fixtures/NAME`.
#[allow(dead_code)]
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `shared/tdc` beside the workspace checkout (`<workspace>/../shared/tdc`), spelled without `..`
/// so that a skip line names a path a user can read; it need not exist.
#[allow(dead_code)]
pub fn shared_tdc() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    match root.parent() {
        Some(above) => above.join("shared/tdc"),
        None => root.join("../shared/tdc"),
    }
}

/// Says on the terminal why a test skips: `line` (`NAME: SKIPPED: why`) straight to stderr, once per
/// process. libtest captures print!/eprint! of a test that passes, so a skip printed that way was never
/// seen (README: tests needing what the machine lacks skip with a line).
pub fn skip(line: &str) {
    use std::io::Write;
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|l| l == line) {
        said.push(line.to_string());
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// Runs one test of this test binary in a child, as `cargo test` runs it (its output captured), with
/// `envs` set; its stdout and stderr. For checking what a skipping test says on the terminal.
pub fn run_test_in_child(test: &str, envs: &[(&str, &std::ffi::OsStr)]) -> (String, String) {
    let mut c = std::process::Command::new(std::env::current_exe().expect("this test binary"));
    c.args([test, "--exact"]);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("running this test binary");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{test} failed:\n{stdout}{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "{test} must have run: {stdout}"
    );
    (stdout, stderr)
}
