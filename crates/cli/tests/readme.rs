//! The README, run as a newcomer runs it: every command line of its ```sh blocks, after the install line,
//! from a scratch directory; and every relative link of the repository's Markdown files.
//!
//! How a block reads (the conventions the README's blocks follow):
//! - A command line may end with a comment. A comment that starts with `exit N` says the command exits
//!   with N; any other command must exit 0.
//! - Full-line comments right under a command are its output: each must be a line of what the command
//!   printed (stdout or stderr; trailing blanks ignored). Any other full-line comment is a remark.
//! - A fenced block right under an HTML comment `<!-- output of `COMMAND` -->` (invisible on the page) is
//!   what that command of a ```sh block prints: each of its non-empty lines must be a line it printed.
//! - Build commands are checked for what they name, not run: `cargo install --locked --path DIR` (DIR's
//!   Cargo.toml builds a binary named `tclab`, and Cargo.lock is there to lock to), `bash .ci/run` (an executable file; running it would run
//!   this test again). `cargo run --release -- ARGS` runs `tclab ARGS`. Any other `cargo` line fails:
//!   the README says a command runs, so the test must know how to check it.
//! - The other lines run in order in one bash session, as in one terminal (an `export` holds for the
//!   lines after it), with `tclab` on PATH: a directory holding a symlink named `tclab` to this build's
//!   binary. The working directory is a scratch directory with a symlink to the repository's `examples/`,
//!   so `tclab-out/`, the files the README writes and the policy store (`TCLAB_STATE`, `HOME`,
//!   `XDG_STATE_HOME` and `TMPDIR` point inside it) stay there.
//!
//! - Every `tclab-out/…` path the README names (in prose or comments) exists once the commands have run.
//!
//! A failure names the README's line, the command, its exit status and what it printed.

mod common;
use common::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The two commands the README opens with (a project rule: the main job, then the whole test suite).
const FIRST_TWO: [&str; 2] = ["cargo run --release -- demo", "bash .ci/run"];

/// One command line of a ```sh block.
#[derive(Debug, Clone)]
struct Cmd {
    /// 1-based line in README.md.
    line: usize,
    /// The command without its comment.
    text: String,
    /// `# exit N` on the line, else 0.
    code: i32,
    /// The full-line comments right under it: lines it must print.
    output: Vec<String>,
}

/// The `#` that starts a shell comment on a line: at the start of a word, outside quotes.
fn comment_start(line: &str) -> Option<usize> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut prev_blank = true;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            prev_blank = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_blank => return Some(i),
            _ => {}
        }
        prev_blank = c.is_whitespace();
    }
    None
}

/// `exit N` at the start of a comment.
fn expected_code(comment: &str) -> Result<i32, String> {
    match comment.trim().strip_prefix("exit ") {
        None => Ok(0),
        Some(rest) => {
            let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
            n.parse()
                .map_err(|_| format!("`# exit` without a number: {comment:?}"))
        }
    }
}

/// The commands of every ```sh block, in order.
fn sh_commands(readme: &str) -> Result<Vec<Cmd>, String> {
    let mut cmds: Vec<Cmd> = Vec::new();
    let mut in_sh = false;
    let mut in_other = false;
    // Whether the previous line of the block was a command or its output (so a comment is output).
    let mut after_command = false;
    let mut pending: Option<(usize, String)> = None; // a line ending in `\`
    for (i, raw) in readme.lines().enumerate() {
        let n = i + 1;
        let t = raw.trim();
        if !in_sh && !in_other {
            if t.starts_with("```") {
                if t == "```sh" || t == "```bash" || t == "```shell" {
                    in_sh = true;
                    after_command = false;
                } else {
                    in_other = true;
                }
            }
            continue;
        }
        if in_other {
            if t == "```" {
                in_other = false;
            }
            continue;
        }
        if t == "```" {
            if let Some((l, _)) = pending {
                return Err(format!("README.md:{l}: a continued line ends the block"));
            }
            in_sh = false;
            continue;
        }
        if t.is_empty() {
            after_command = false;
            continue;
        }
        if pending.is_none() && t.starts_with('#') {
            if after_command {
                let shown = t.trim_start_matches('#');
                let shown = shown.strip_prefix(' ').unwrap_or(shown);
                cmds.last_mut()
                    .unwrap()
                    .output
                    .push(shown.trim_end().to_string());
            }
            continue;
        }
        let (code_part, comment) = match comment_start(raw) {
            Some(c) => (&raw[..c], &raw[c + 1..]),
            None => (raw, ""),
        };
        let code_part = code_part.trim_end();
        if let Some(body) = code_part.strip_suffix('\\') {
            let joined = match pending.take() {
                Some((l, s)) => (l, format!("{s} {}", body.trim())),
                None => (n, body.trim().to_string()),
            };
            pending = Some(joined);
            continue;
        }
        let (line, text) = match pending.take() {
            Some((l, s)) => (l, format!("{s} {}", code_part.trim())),
            None => (n, code_part.trim().to_string()),
        };
        let code = expected_code(comment).map_err(|e| format!("README.md:{line}: {e}"))?;
        cmds.push(Cmd {
            line,
            text,
            code,
            output: Vec::new(),
        });
        after_command = true;
    }
    if in_sh {
        return Err("README.md: a ```sh block is not closed".into());
    }
    Ok(cmds)
}

/// A fenced block the README marks as a command's output: (line of the marker, the command, its lines).
fn output_blocks(readme: &str) -> Result<Vec<(usize, String, Vec<String>)>, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim().strip_prefix("<!-- output of `") else {
            continue;
        };
        let cmd = rest.strip_suffix("` -->").ok_or_else(|| {
            format!(
                "README.md:{}: write the marker as <!-- output of `COMMAND` -->",
                i + 1
            )
        })?;
        if !lines
            .get(i + 1)
            .is_some_and(|f| f.trim_start().starts_with("```"))
        {
            return Err(format!(
                "README.md:{}: no fenced block right under the output marker",
                i + 1
            ));
        }
        let body: Vec<String> = lines[i + 2..]
            .iter()
            .take_while(|b| !b.trim_start().starts_with("```"))
            .filter(|b| !b.trim().is_empty())
            .map(|b| b.trim_end().to_string())
            .collect();
        if body.is_empty() {
            return Err(format!("README.md:{}: an empty output block", i + 1));
        }
        out.push((i + 1, cmd.to_string(), body));
    }
    Ok(out)
}

/// The `tclab-out/…` paths the README names, with their lines.
fn output_paths(readme: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, l) in readme.lines().enumerate() {
        let mut rest = l;
        while let Some(p) = rest.find("tclab-out/") {
            let path: String = rest[p..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_./*".contains(*c))
                .collect();
            rest = &rest[p + path.len()..];
            let path = path.trim_end_matches(['.', ',']).to_string();
            if !path.contains('*') {
                out.push((i + 1, path));
            }
        }
    }
    out
}

/// How a line is checked.
enum Check {
    /// Run in the session (the text to run).
    Run(String),
    /// Checked here; `Err` is the failure.
    Static(Result<(), String>),
}

fn classify(cmd: &Cmd) -> Check {
    let root = Path::new(ROOT);
    let words: Vec<&str> = cmd.text.split_whitespace().collect();
    match words.as_slice() {
        ["cargo", "run", "--release", "--", rest @ ..] => {
            Check::Run(format!("tclab {}", rest.join(" ")))
        }
        // --locked: the committed Cargo.lock's versions, as CI builds, not the newest that resolve.
        ["cargo", "install", "--locked", "--path", dir] => {
            Check::Static(builds_tclab(&root.join(dir)).and_then(|()| {
                match root.join("Cargo.lock").is_file() {
                    true => Ok(()),
                    false => Err("--locked with no Cargo.lock at the root".into()),
                }
            }))
        }
        ["cargo", "install", "--path", _] => Check::Static(Err(
            "cargo install without --locked ignores the committed Cargo.lock".into(),
        )),
        ["bash", ".ci/run"] => Check::Static(executable(&root.join(".ci/run"))),
        ["cargo", ..] | ["bash", ".ci/run", ..] => Check::Static(Err(
            "a build command this test has no rule for: add one to crates/cli/tests/readme.rs"
                .into(),
        )),
        _ => Check::Run(cmd.text.clone()),
    }
}

/// DIR/Cargo.toml builds a binary named `tclab`: a `[[bin]]` named so, or the package itself named so
/// with a `src/main.rs`.
fn builds_tclab(dir: &Path) -> Result<(), String> {
    let manifest = dir.join("Cargo.toml");
    let text =
        std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut section = String::new();
    let mut package_named = false;
    for l in text.lines() {
        let l = l.trim();
        if l.starts_with('[') {
            section = l.to_string();
            continue;
        }
        let Some(value) = l.strip_prefix("name").map(str::trim) else {
            continue;
        };
        if value.strip_prefix('=').map(str::trim) != Some("\"tclab\"") {
            continue;
        }
        if section == "[[bin]]" {
            return Ok(());
        }
        if section == "[package]" {
            package_named = true;
        }
    }
    if package_named && dir.join("src/main.rs").is_file() {
        return Ok(());
    }
    Err(format!(
        "{} builds no binary named tclab",
        manifest.display()
    ))
}

fn executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
        Ok(())
    } else {
        Err(format!("{} is not an executable file", path.display()))
    }
}

fn readme() -> String {
    let p = Path::new(ROOT).join("README.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// What one line of the session did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `lines` in one bash session in `work`, each with its output captured apart; `None` for a line
/// the session never reached.
fn run_session(lines: &[String], scratch: &Path) -> Vec<Ran> {
    let work = scratch.join("work");
    let bin = scratch.join("bin");
    let out = scratch.join("out");
    let tmp = scratch.join("tmp");
    for d in [
        &work,
        &bin,
        &out,
        &tmp,
        &scratch.join("home"),
        &scratch.join("state"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tclab"), bin.join("tclab")).unwrap();
    std::os::unix::fs::symlink(Path::new(ROOT).join("examples"), work.join("examples")).unwrap();
    let mut script = String::new();
    for (i, l) in lines.iter().enumerate() {
        // The newline before `}` ends a comment or a here-word the line might carry.
        script.push_str(&format!(
            "{{ {l}\n}} >'{o}/{i}.out' 2>'{o}/{i}.err' </dev/null; echo $? >'{o}/{i}.rc'\n",
            o = out.display()
        ));
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("--norc")
        .arg("--noprofile")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env("PATH", path)
        .env("HOME", scratch.join("home"))
        .env("XDG_STATE_HOME", scratch.join("state"))
        .env("TCLAB_STATE", scratch.join("state/policy.json"))
        .env("TMPDIR", &tmp)
        .env_remove("TCLAB_CONTROL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash");
    // Debug builds: the demo and three simulations take about a minute together.
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (0..lines.len())
        .map(|i| {
            let read = |ext: &str| std::fs::read_to_string(out.join(format!("{i}.{ext}")));
            Ran {
                code: read("rc").ok().and_then(|s| s.trim().parse().ok()),
                stdout: read("out").unwrap_or_default(),
                stderr: read("err").unwrap_or_default(),
            }
        })
        .collect()
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n    ")
}

#[test]
fn every_readme_command_runs_as_written() {
    let text = readme();
    let cmds = sh_commands(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        cmds.len() >= 10,
        "too few commands found in README.md: {cmds:?}"
    );
    let mut failures = Vec::new();
    // Output blocks become expected lines of their command.
    let mut cmds = cmds;
    for (line, cmd, body) in output_blocks(&text).unwrap_or_else(|e| panic!("{e}")) {
        match cmds.iter_mut().find(|c| c.text == cmd) {
            Some(c) => c.output.extend(body),
            None => failures.push(format!(
                "README.md:{line}: output of `{cmd}`, a command no ```sh block has"
            )),
        }
    }
    let cmds = cmds;
    let mut to_run: Vec<(Cmd, String)> = Vec::new();
    for c in &cmds {
        match classify(c) {
            Check::Static(Ok(())) => {}
            Check::Static(Err(e)) => {
                failures.push(format!("README.md:{}: `{}`: {e}", c.line, c.text))
            }
            Check::Run(s) => to_run.push((c.clone(), s)),
        }
    }
    let scratch = TempDir::new("readme");
    let lines: Vec<String> = to_run.iter().map(|(_, s)| s.clone()).collect();
    let ran = run_session(&lines, &scratch.path);
    for ((c, run_as), r) in to_run.iter().zip(&ran) {
        let at = format!("README.md:{}: `{}`", c.line, c.text);
        let shown = if *run_as == c.text {
            String::new()
        } else {
            format!(" (run as `{run_as}`)")
        };
        match r.code {
            None => failures.push(format!("{at}{shown}: never ran (an earlier line ended the shell, or the session timed out)")),
            Some(code) if code != c.code => failures.push(format!(
                "{at}{shown}: exit {code}, the README says {}\n    stderr: {}\n    stdout: {}",
                c.code,
                tail(&r.stderr),
                tail(&r.stdout)
            )),
            Some(_) => {}
        }
        for want in &c.output {
            let found = r
                .stdout
                .lines()
                .chain(r.stderr.lines())
                .any(|l| l.trim_end() == want);
            if !found {
                failures.push(format!(
                    "{at}: the README shows the line {want:?}, which it did not print\n    stdout: {}\n    stderr: {}",
                    tail(&r.stdout),
                    tail(&r.stderr)
                ));
            }
        }
    }
    for (line, path) in output_paths(&text) {
        if !scratch.path.join("work").join(&path).exists() {
            failures.push(format!(
                "README.md:{line}: names {path}, which the commands did not write"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn readme_opens_with_the_two_commands_and_installs_before_the_first_tclab_command() {
    let cmds = sh_commands(&readme()).unwrap_or_else(|e| panic!("{e}"));
    let first: Vec<&str> = cmds.iter().take(2).map(|c| c.text.as_str()).collect();
    assert_eq!(
        first, FIRST_TWO,
        "README.md's first two commands (a project rule)"
    );
    let install = cmds
        .iter()
        .position(|c| c.text.starts_with("cargo install"))
        .expect("README.md has no `cargo install` line");
    let first_tclab = cmds
        .iter()
        .position(|c| c.text.split_whitespace().any(|w| w == "tclab"))
        .expect("README.md runs no tclab command");
    assert!(
        install < first_tclab,
        "README.md:{}: `{}` comes before the install line (README.md:{}): `tclab: command not found`",
        cmds[first_tclab].line,
        cmds[first_tclab].text,
        cmds[install].line
    );
}

// ---- links ----

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The text outside fenced code blocks.
fn prose(md: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fenced = false;
    for l in md.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(l);
        }
    }
    out
}

/// The anchors a Markdown file's headings give (a repeated heading's get -1, -2…).
fn anchors(md: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for l in prose(md) {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !l[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&l[hashes..]);
        let n = seen
            .iter()
            .filter(|s| {
                **s == base
                    || s.strip_prefix(&format!("{base}-"))
                        .is_some_and(|r| r.parse::<u32>().is_ok())
            })
            .count();
        seen.push(if n == 0 { base } else { format!("{base}-{n}") });
    }
    seen
}

/// The targets of `[text](target)` links outside code.
fn link_targets(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, l) in md.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans hold no links.
        let mut text = String::new();
        for (k, part) in l.split('`').enumerate() {
            if k % 2 == 0 {
                text.push_str(part);
            }
        }
        let mut rest = text.as_str();
        while let Some(p) = rest.find("](") {
            let after = &rest[p + 2..];
            if let Some(end) = after.find(')') {
                out.push((i + 1, after[..end].trim().to_string()));
                rest = &after[end + 1..];
            } else {
                break;
            }
        }
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "tclab-out" || name == "corpus" {
            continue;
        }
        if p.is_dir() {
            markdown_files(&p, out);
        } else if name.ends_with(".md") {
            out.push(p);
        }
    }
}

#[test]
fn every_relative_link_in_the_markdown_files_resolves() {
    let root = Path::new(ROOT).canonicalize().unwrap();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")) && files.len() > 10,
        "{files:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for f in &files {
        let md = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        for (line, target) in link_targets(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            if !dest.exists() {
                broken.push(format!("{rel}:{line}: ({target}): no such file"));
                continue;
            }
            if let Some(a) = anchor {
                if dest.extension().is_some_and(|e| e == "md") {
                    let text = std::fs::read_to_string(&dest).unwrap();
                    if !anchors(&text).iter().any(|h| h == a) {
                        broken.push(format!("{rel}:{line}: ({target}): no heading gives #{a}"));
                    }
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} relative links found: is the parser right?"
    );
    assert!(broken.is_empty(), "\n{}\n", broken.join("\n"));
}

#[test]
fn the_conventions_parse_as_documented() {
    // Hand-written block: where each expectation comes from is the module doc above.
    let md = "text\n```sh\n# a remark\nexport X=1   # a comment\nfalse   # exit 1: why\n# shown line  \n\nls \\\n  -l\n```\n```\nnot # run\n```\n";
    let cmds = sh_commands(md).unwrap();
    let got: Vec<(usize, &str, i32, Vec<String>)> = cmds
        .iter()
        .map(|c| (c.line, c.text.as_str(), c.code, c.output.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, "export X=1", 0, vec![]),
            (5, "false", 1, vec!["shown line".to_string()]),
            (8, "ls -l", 0, vec![]),
        ]
    );
    assert_eq!(comment_start("echo 'a # b' \"#\" x#y # c"), Some(21));
    assert_eq!(
        slug("`tclab sim --trace` and `tclab trace`: every packet's fate"),
        "tclab-sim---trace-and-tclab-trace-every-packets-fate"
    );
    assert_eq!(
        slug("Seed 000: HFSC, the section the notes left empty"),
        "seed-000-hfsc-the-section-the-notes-left-empty"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not\n```\n## B b"),
        vec!["a", "a-1", "b-b"]
    );
    let marked = "<!-- output of `tclab demo` -->\n```\nrow 1  \n\nrow 2\n```\n";
    assert_eq!(
        output_blocks(marked).unwrap(),
        vec![(
            1,
            "tclab demo".to_string(),
            vec!["row 1".to_string(), "row 2".to_string()]
        )]
    );
    assert!(output_blocks("<!-- output of `x` -->\ntext\n").is_err());
    assert_eq!(
        output_paths("x\nopen `tclab-out/demo/index.html`, or tclab-out/a/. Not tclab-out/*.csv\n"),
        vec![
            (2, "tclab-out/demo/index.html".to_string()),
            (2, "tclab-out/a/".to_string())
        ]
    );
}

/// The README's "Simulated hosts" row names every congestion control a scenario's `cc` takes, as the
/// simulator lists them when it refuses another (`unknown "x" (cubic, reno, bbr or dctcp)`). The row
/// left DCTCP out after the simulator gained it.
#[test]
fn the_simulated_hosts_row_names_every_congestion_control() {
    let dir = TempDir::new("readme-cc");
    let toml = "duration = \"1s\"\n[[node]]\nname = \"a\"\n[[node]]\nname = \"b\"\n\
                [[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nrate = \"10mbit\"\n\
                [[traffic]]\nkind = \"tcp\"\nfrom = \"a\"\nto = \"b\"\ncc = \"no-such-cc\"\n";
    let file = dir.path.join("cc.toml");
    std::fs::write(&file, toml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tclab"))
        .args(["sim", file.to_str().unwrap(), "--no-plots"])
        .current_dir(&dir.path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let list = err
        .split("unknown \"no-such-cc\" (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no list of congestion controls in: {err}"));
    let names: Vec<&str> = list
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .collect();
    assert!(names.len() >= 4, "{list}");
    let readme = readme();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| Simulated hosts |"))
        .expect("the README's Simulated hosts row");
    for name in names {
        assert!(
            row.to_lowercase().contains(name),
            "README's Simulated hosts row lacks {name}: {row}"
        );
    }
}
