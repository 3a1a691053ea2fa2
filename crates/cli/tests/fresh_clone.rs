//! The README's test command on a clone outside this workplace: no `../shared` beside it, so no kernel
//! tdc cases. `.ci/run` must still pass there, the tdc tests skipping with one line that says what is
//! missing and how to get it, and end with its summary line.
//!
//! The repository's files (tracked and untracked, as git lists them, without ignored ones such as
//! `target/`) are copied into a scratch directory that has no `shared/` beside it, and that copy's own
//! `.ci/run` runs the tdc target there (`bash .ci/run -p tclab --test tdc`: the same script, limited to the
//! one target whose behaviour depends on `../shared`; the whole suite from the copy would run this test
//! again). It builds into `target/fresh-clone` of this checkout, so only the first run compiles
//! everything.

mod common;
use common::TempDir;
use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The repository's files, relative to its root: git's list when this is a git checkout.
fn repository_files(root: &Path) -> Option<Vec<String>> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let list = String::from_utf8(out.stdout).ok()?;
    Some(
        list.split('\0')
            .filter(|f| !f.is_empty())
            .filter(|f| root.join(f).is_file())
            .map(String::from)
            .collect(),
    )
}

#[test]
fn ci_passes_on_a_clone_without_shared_and_skips_tdc_with_one_line() {
    if std::env::var_os("TCLAB_IN_FRESH_CLONE").is_some() {
        return;
    }
    let root = Path::new(ROOT).canonicalize().expect("workspace root");
    let Some(files) = repository_files(&root) else {
        eprintln!(
            "fresh_clone: SKIPPED: {} is not a git checkout",
            root.display()
        );
        return;
    };
    let scratch = TempDir::new("fresh-clone");
    let copy = scratch.path.join("tclab");
    for f in &files {
        let to = copy.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root.join(f), &to).unwrap_or_else(|e| panic!("copying {f}: {e}"));
    }
    assert!(
        !scratch.path.join("shared").exists(),
        "the copy must have no ../shared beside it"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("fresh-clone");
    let out = Command::new("bash")
        .args([".ci/run", "-p", "tclab", "--test", "tdc"])
        .current_dir(&copy)
        .env("CARGO_TARGET_DIR", &target)
        .env("TCLAB_IN_FRESH_CLONE", "1")
        .env_remove("TCLAB_TDC_DIR")
        .output()
        .expect("running bash .ci/run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        ".ci/run failed on a copy without ../shared:\n{text}"
    );
    let skips: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tdc: SKIPPED"))
        .collect();
    assert_eq!(
        skips.len(),
        1,
        "one line must say the tdc cases are missing:\n{text}"
    );
    assert!(
        skips[0].contains("scripts/fetch-tdc.sh") && skips[0].contains("TCLAB_TDC_DIR"),
        "the line must say how to get them: {}",
        skips[0]
    );
    // Every tdc test ran (as skipped) and passed; none panicked.
    let result = text
        .lines()
        .find(|l| l.starts_with("test result: "))
        .unwrap_or_else(|| panic!("no cargo test result line:\n{text}"));
    assert!(result.starts_with("test result: ok."), "{result}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(
        last.starts_with("summary: ") && last.contains(" passed, 0 failed"),
        ".ci/run must end with its summary line, not {last:?}"
    );
}
