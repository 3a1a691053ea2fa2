//! The policy store behind `TCLAB_STATE=FILE tclab tc …`.
//!
//! # What is kept, and why a journal
//!
//! The file is a journal of the accepted commands (tc, `link`, `route` and `iptables` lines), one JSON
//! array per line after a header line:
//!
//! ```text
//! {"tclab_store":2}
//! ["link","set","dev","eth0","mtu","9000"]
//! ["tc","qdisc","add","dev","eth0","root","handle","1:","htb"]
//! ```
//!
//! Loading replays it into a fresh engine. The journal is the store, because commands are a stable
//! format: a store written by one tclab applies in the next even when the engine's insides change, and
//! what only history determines — automatic handles, the kernel's listing order, which filter shares
//! which action — comes out as a live kernel would have it. Beside it, `FILE.snap` may hold the engine
//! that the journal's first records build ([`crate::snapshot`]): a call loads it and replays only the
//! records after it. It is only ever a shortcut — written by this build of tclab for itself, checked
//! against the journal's bytes, ignored whenever anything about it is off.
//!
//! # No acknowledged write is lost
//!
//! - **Writers are serialised** (as the kernel's rtnl lock serialises changes): every read-modify-write
//!   holds an exclusive `flock` on `FILE.lock` from reading the journal to writing it; readers (`show`)
//!   hold a shared one.
//! - **A command is one record**, appended with one `write` ending in its newline and `fdatasync`ed before
//!   tclab exits 0. A writer killed mid-record leaves a last line without its newline: loading ignores
//!   that torn tail (the store is the policy before the command) and the next writer cuts it off.
//! - **Whole rewrites** (a new file, a migration from the version-1 format, a compaction) go to a unique
//!   temporary file, fsynced, renamed over the store, and the directory fsynced.
//! - A file that is not a tclab store is refused with its name, and never overwritten.
//!
//! # Cost that does not grow with history
//!
//! Replay is linear in the journal, and a journal is kept about as long as the policy it describes: when
//! a command returns a device to its pristine state (its root qdisc deleted, no ingress) or empties the
//! mangle table or the action tables, the entries that built what is gone are dropped — a policy
//! re-applied every boot (`del` then `add`) does not accumulate. A compaction is written only if replaying
//! the shorter journal gives exactly the same `tc -s -d` and `iptables -S` output and the same automatic
//! handle counter as the longer one; otherwise the journal stays whole. `tclab script run` goes further:
//! the script's `tc` calls reach one resident engine through [`crate::control`], so a script of N
//! commands costs O(N), not O(N²).

use crate::snapshot::{Decoded, JournalRef};
use crate::util::matches;
use crate::Output;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use tclab_core::Engine;

/// The header line of the current format.
const HEADER: &str = "{\"tclab_store\":2}";

/// The version-1 format: one JSON document `{"tclab_store": 1, "journal": [[…], …]}`, rewritten on every
/// command. Still read, and migrated to version 2 by the first write.
#[derive(serde::Deserialize)]
struct StoreV1 {
    tclab_store: u32,
    journal: Vec<Vec<String>>,
}

/// What was on disk when the journal was read: which file, how long, and when it last changed. A store
/// replaced behind tclab's back (`cp backup.json policy.json`, or `rm` and re-create, which may reuse the
/// inode and have the same size) differs in its change time at least: `ctime` cannot be set by any tool,
/// and every write or rename sets it. (Only a replacement within the same clock tick — a few
/// milliseconds — as tclab's own last read or write of the file would go unseen.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Seen {
    fn of(m: &std::fs::Metadata) -> Seen {
        use std::os::unix::fs::MetadataExt;
        Seen {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// A journal as read from disk.
pub struct Journal {
    pub entries: Vec<Vec<String>>,
    /// How many records the file held (kept in `entries` or not).
    pub records: usize,
    /// Bytes of the file that hold complete records (a torn last record lies beyond).
    valid_len: u64,
    /// The file is in the current format (appendable); `false` for a missing file or version 1.
    appendable: bool,
    seen: Option<Seen>,
}

fn seen(file: &File) -> std::io::Result<Seen> {
    Ok(Seen::of(&file.metadata()?))
}

fn seen_path(path: &Path) -> Option<Seen> {
    Some(Seen::of(&std::fs::metadata(path).ok()?))
}

/// Read FILE's journal; a missing file is an empty one.
pub fn read_journal(path: &Path) -> Result<Journal, String> {
    let mut entries = Vec::new();
    let mut journal = read_journal_with(path, |_| 0, |e, _| entries.push(std::mem::take(e)))?;
    journal.entries = entries;
    Ok(journal)
}

/// Read FILE's journal, handing each record to `sink` as it is read, with the file offset just past it
/// (the returned journal's `entries` stay empty): a reader that replays as it goes never holds the
/// whole journal in memory. The record is lent in one buffer whose strings the next record reuses (a
/// sink may take it). `start` is shown a current-format file and says where its records begin to
/// matter: those ending at or before that offset (a snapshot's, when it holds) are neither read nor
/// parsed nor counted; 0 reads them all.
fn read_journal_with(
    path: &Path,
    start: impl FnOnce(&File) -> u64,
    mut sink: impl FnMut(&mut Vec<String>, u64),
) -> Result<Journal, String> {
    let mut entry: Vec<String> = Vec::new();
    let mut records = 0;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Journal {
                entries: Vec::new(),
                records: 0,
                valid_len: 0,
                appendable: false,
                seen: None,
            })
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let before = seen(&file).map_err(|e| format!("{}: {e}", path.display()))?;
    // A current-format file's records that a snapshot stands for are skipped unread: only the bytes
    // after them are read (the snapshot's checks made sure the offset ends a record).
    let header = format!("{HEADER}\n");
    let mut head = vec![0u8; header.len()];
    let current = std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 0).is_ok()
        && head == header.as_bytes();
    let skip = if current { start(&file) } else { 0 };
    let skip = if skip > header.len() as u64 { skip } else { 0 };
    let mut bytes = Vec::new();
    std::io::Seek::seek(&mut &file, std::io::SeekFrom::Start(skip))
        .and_then(|_| std::io::Read::read_to_end(&mut &file, &mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let not_ours = |why: String| format!("{}: not a tclab store: {why}", path.display());
    let text = std::str::from_utf8(&bytes).map_err(|_| not_ours("not UTF-8 text".into()))?;
    let first = text.lines().next().unwrap_or("");
    if skip > 0 || first.trim() == HEADER {
        let (header_done, mut valid_len, mut rest) = if skip > 0 {
            (true, skip, text)
        } else {
            let after_header = &text[first.len().min(text.len())..];
            // A header without its newline (a file written by hand, or cut short) cannot be appended
            // to: the next write rewrites the file whole.
            let header_done = after_header.starts_with('\n');
            (
                header_done,
                first.len() as u64 + header_done as u64,
                after_header.strip_prefix('\n').unwrap_or(after_header),
            )
        };
        // Line numbers (for a corrupt record's message) count from the skipped records' end.
        let mut line_no = if skip > 0 { 0 } else { 1 };
        while !rest.is_empty() {
            line_no += 1;
            let Some(end) = rest.find('\n') else {
                // A record without its newline: a writer was killed mid-write. The command it carried
                // was never acknowledged; the store is what came before it.
                break;
            };
            let line = &rest[..end];
            if !line.trim().is_empty() {
                if !plain_record(line, &mut entry) {
                    entry = serde_json::from_str(line).map_err(|e| {
                    // Lines a snapshot stood for are counted only for this message.
                    let mut skipped_lines = 0;
                    if skip > 0 {
                        crate::snapshot::read_prefix(&file, skip, |p| {
                            skipped_lines += p.iter().filter(|&&b| b == b'\n').count()
                        });
                    }
                    let line_no = line_no + skipped_lines;
                    format!(
                        "{}:{line_no}: corrupt tclab store record ({e}); the file was left as it is",
                        path.display()
                    )
                    })?;
                }
                sink(&mut entry, valid_len + end as u64 + 1);
                records += 1;
            }
            valid_len += end as u64 + 1;
            rest = &rest[end + 1..];
        }
        return Ok(Journal {
            entries: Vec::new(),
            records,
            valid_len,
            appendable: header_done,
            seen: Some(before),
        });
    }
    if text.is_empty() {
        // A zero-length file (`TCLAB_STATE=$(mktemp)`) holds nothing to lose: an empty store, written
        // whole by the first change.
        return Ok(Journal {
            entries: Vec::new(),
            records: 0,
            valid_len: 0,
            appendable: false,
            seen: Some(before),
        });
    }
    if text.trim().is_empty() {
        return Err(not_ours("the file holds only blank space".into()));
    }
    // A later tclab's store (its header names a version this one does not know) says so.
    let first_line_version = serde_json::from_str::<serde_json::Value>(first)
        .ok()
        .and_then(|v| v.get("tclab_store").and_then(serde_json::Value::as_u64));
    if let Some(v) = first_line_version.filter(|v| *v > 2) {
        return Err(not_ours(format!(
            "store version {v}, written by a newer tclab (this one reads versions 1 and 2)"
        )));
    }
    let v1: StoreV1 = serde_json::from_str(text).map_err(|e| not_ours(e.to_string()))?;
    if v1.tclab_store != 1 {
        return Err(not_ours(format!(
            "unknown store version {}",
            v1.tclab_store
        )));
    }
    let records = v1.journal.len();
    for mut e in v1.journal {
        sink(&mut e, 0);
    }
    Ok(Journal {
        entries: Vec::new(),
        records,
        valid_len: bytes.len() as u64,
        appendable: false,
        seen: Some(before),
    })
}

/// Which of a store's records a read-only command needs replayed. The kernel changes a qdisc or a class
/// only on a qdisc, class or link message: filters and actions bind to classes (which only ever makes a
/// later class deletion fail, and a refused command is not in the journal) but change nothing a qdisc
/// or class listing prints, and netfilter's rules are not traffic control's. So `tc qdisc|class show`
/// skips filter, action and iptables records, any other `tc` read skips iptables records, and an
/// `iptables` read skips tc's. (10 000 classes, leaves and u32 filters: `tc -s class show` replays a
/// third fewer records.)
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum ReadScope<'a> {
    Everything,
    /// qdisc, class, link and state records.
    QdiscsAndClasses,
    /// Everything but iptables records.
    TrafficControl,
    /// A listing of one device's filters (`tc filter show dev DEV [root|ingress|parent P]`, `parent`
    /// 0 when none is named): the records of [`ReadScope::TrafficControl`]; a snapshot decoded for
    /// it leaves the class trees out when the parent is found without them
    /// ([`tclab_core::snapshot::FilterListing`]).
    Filters {
        dev: &'a str,
        parent: u32,
    },
    /// Everything but tc records.
    Netfilter,
}

impl ReadScope<'_> {
    pub fn of(argv: &[String]) -> ReadScope<'_> {
        match argv.first().map(String::as_str) {
            Some("tc") => match tc_object(&argv[1..]) {
                Some(o) if matches(o, "qdisc") || matches(o, "class") => {
                    ReadScope::QdiscsAndClasses
                }
                _ => match crate::filter::listing_of(&argv[1..]) {
                    Some((dev, parent)) => ReadScope::Filters { dev, parent },
                    None => ReadScope::TrafficControl,
                },
            },
            Some("iptables") => ReadScope::Netfilter,
            _ => ReadScope::Everything,
        }
    }

    pub fn needs(self, record: &[String]) -> bool {
        match (self, record.first().map(String::as_str)) {
            (ReadScope::Everything, _) => true,
            (ReadScope::Netfilter, Some("tc")) => false,
            (
                ReadScope::QdiscsAndClasses | ReadScope::TrafficControl | ReadScope::Filters { .. },
                Some("iptables"),
            ) => false,
            (ReadScope::QdiscsAndClasses, Some("tc")) => tc_object(&record[1..])
                .is_none_or(|o| !["filter", "actions", "chain"].iter().any(|w| matches(o, w))),
            _ => true,
        }
    }
}

/// The object word of a tc command line (`qdisc`, `class`, `filter`…): the first word after the options
/// (which, in a read or a record, take no values).
fn tc_object(args: &[String]) -> Option<&str> {
    args.iter()
        .map(String::as_str)
        .find(|a| !a.starts_with('-'))
}

/// An advisory lock on a store (`flock` on `FILE.lock`), held until dropped.
pub struct Lock {
    _file: Option<File>,
}

fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

fn parent_dir(path: &Path) -> Option<&Path> {
    path.parent().filter(|d| !d.as_os_str().is_empty())
}

impl Lock {
    /// Take the store's lock: exclusive for a command that may write, shared for one that only reads.
    /// Creates the store's directory if needed — for a writer: a read of a store that does not exist
    /// reads nothing and leaves nothing behind (no lock file, no directory).
    pub fn take(path: &Path, exclusive: bool) -> Result<Lock, String> {
        if !exclusive && !path.exists() {
            return Ok(Lock { _file: None });
        }
        if let Some(dir) = parent_dir(path) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let lp = lock_path(path);
        let file = match std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lp)
        {
            Ok(f) => f,
            // Another user's store that this one may read: a shared lock needs no write access
            // (`flock` takes any open descriptor); where not even that can be opened (a directory this
            // user cannot write, with no lock file yet), a read goes unlocked — it sees the store as
            // the last complete write left it, every write being an append or a rename.
            Err(e) if !exclusive && e.kind() == std::io::ErrorKind::PermissionDenied => {
                match File::open(&lp) {
                    Ok(f) => f,
                    Err(_) => return Ok(Lock { _file: None }),
                }
            }
            Err(e) => return Err(format!("{}: {e}", lp.display())),
        };
        let r = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        r.map_err(|e| format!("{}: cannot lock: {e}", lp.display()))?;
        Ok(Lock { _file: Some(file) })
    }
}

/// Write `data` to `path` atomically: a unique temporary file in the same directory, fsynced, renamed over
/// `path`, then the directory fsynced so that the rename itself survives a crash.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<(), String> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = parent_dir(path).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| format!("{}: {e}", path.display()))
}

/// The fast path of reading a record: a JSON array of strings without escapes, as nearly every tc word
/// is, scanned byte by byte (the quotes, commas and brackets are ASCII, so every cut falls between
/// characters). `false` sends the line to the full JSON parser, which also words any error.
fn plain_record(line: &str, words: &mut Vec<String>) -> bool {
    let b = line.as_bytes();
    let skip_space = |mut i: usize, end: usize| {
        while i < end && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let mut end = b.len();
    while end > 0 && b[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    let mut i = skip_space(0, end);
    if end < i + 2 || b[i] != b'[' || b[end - 1] != b']' {
        return false;
    }
    end -= 1;
    // An escape, or a control character JSON forbids: the full parser decides. (One pass the compiler
    // vectorises, rather than a test per byte of each word.)
    if b[i..end]
        .iter()
        .fold(false, |odd, &c| odd | (c == b'\\') | (c < 0x20))
    {
        return false;
    }
    i = skip_space(i + 1, end);
    let mut n = 0;
    while i < end {
        if b[i] != b'"' {
            return false;
        }
        let start = i + 1;
        let Some(len) = b[start..end].iter().position(|&c| c == b'"') else {
            return false;
        };
        let j = start + len;
        let word = &line[start..j];
        // The buffer's strings are reused record after record: no allocation once they are long enough.
        match words.get_mut(n) {
            Some(w) => {
                w.clear();
                w.push_str(word);
            }
            None => words.push(word.to_string()),
        }
        n += 1;
        i = skip_space(j + 1, end);
        if i < end {
            if b[i] != b',' {
                return false;
            }
            i = skip_space(i + 1, end);
            if i == end {
                return false;
            }
        }
    }
    words.truncate(n);
    true
}

fn record(entry: &[String]) -> String {
    serde_json::to_string(entry).expect("strings serialise") + "\n"
}

fn whole_file(entries: &[Vec<String>]) -> String {
    let mut text = String::from(HEADER);
    text.push('\n');
    for e in entries {
        text.push_str(&record(e));
    }
    text
}

/// Write a whole journal to `path` atomically (a new store, or `tclab script run --strict` committing).
pub fn write_journal(path: &Path, entries: &[Vec<String>]) -> Result<(), String> {
    write_atomically(path, whole_file(entries).as_bytes())
}

/// A store opened for commands: its journal and the engine the journal builds.
pub struct Store {
    path: PathBuf,
    journal: Journal,
    /// Empty when `listing` answers instead.
    engine: Engine,
    /// A filter listing's engine decoded from the snapshot without the class trees
    /// ([`crate::snapshot::Decoded::Listing`]): the one command such a store can answer.
    listing: Option<tclab_core::snapshot::FilterListing>,
    /// Opened by [`Store::open_to_read`]: the journal's records were not kept, so nothing may be written.
    read_only: bool,
    /// The records the last [`Store::execute`] appended (a batch's lines one each), before any
    /// compaction: what a script's report attributes to the call's line.
    last_new: Vec<Vec<String>>,
    /// How many records opening the store replayed (the rest came from its snapshot).
    replayed: usize,
    /// The journal's records the snapshot in force stands for (0: none); a new one is written once
    /// [`crate::snapshot::SNAPSHOT_AFTER`] more have come.
    snapshot_records: usize,
    /// Some record no longer applied when the journal was replayed: this engine is not what the
    /// journal builds, and no snapshot is made of it.
    replay_failed: bool,
}

impl Store {
    /// Read the store at `path` and build its engine: from its snapshot and the records after it when
    /// the snapshot holds ([`crate::snapshot`]), else by replaying every record. Hold a [`Lock`] around
    /// this and what follows.
    pub fn open(path: &Path) -> Result<(Store, Vec<String>), String> {
        let mut snap = None;
        let cut = std::cell::Cell::new(0);
        let (mut entries, mut before_cut) = (Vec::new(), 0);
        let mut journal = read_journal_with(
            path,
            |file| {
                if let Ok(s) = crate::snapshot::load(path, JournalRef::File(file)) {
                    cut.set(s.journal_len);
                    snap = Some(s);
                }
                // A writer keeps every record (compaction rewrites the journal from them).
                0
            },
            |e, end| {
                before_cut += (end <= cut.get()) as usize;
                entries.push(std::mem::take(e));
            },
        )?;
        journal.entries = entries;
        // The records the snapshot counted must be the ones before its offset.
        let snap = snap.filter(|s| s.journal_records == before_cut as u64);
        let (engine, problems, from) = match snap {
            Some(s) => {
                let mut engine = s.engine;
                let mut problems = Vec::new();
                for e in &journal.entries[before_cut..] {
                    apply_entry(&mut engine, e, &mut problems);
                }
                (engine, problems, before_cut)
            }
            None => {
                let (engine, problems) = replay(&journal.entries);
                (engine, problems, 0)
            }
        };
        Ok(Store::opened(path, journal, engine, false, from, problems))
    }

    fn opened(
        path: &Path,
        journal: Journal,
        engine: Engine,
        read_only: bool,
        snapshot_records: usize,
        problems: Vec<String>,
    ) -> (Store, Vec<String>) {
        let replayed = journal.records - if read_only { 0 } else { snapshot_records };
        let store = Store {
            path: path.to_path_buf(),
            journal,
            engine,
            listing: None,
            read_only,
            last_new: Vec::new(),
            replayed,
            snapshot_records,
            replay_failed: !problems.is_empty(),
        };
        let problems = problems
            .into_iter()
            .map(|p| format!("{}: {p}", path.display()))
            .collect();
        (store, problems)
    }

    /// Read and replay the store for `argv`, a command that changes nothing (`show`, `-s`): the engine
    /// comes from the store's snapshot when it holds, each record after it is applied as it is read and
    /// then dropped, so the call costs the policy's engine and not a copy of its whole history besides
    /// (a 30 000-record store: 40 % less memory, and as many fewer fresh pages for the kernel to zero),
    /// and records the answer cannot depend on are not replayed at all (see [`ReadScope`]). The store
    /// cannot be written through.
    pub fn open_to_read(path: &Path, argv: &[String]) -> Result<(Store, Vec<String>), String> {
        let scope = ReadScope::of(argv);
        let engine = std::cell::RefCell::new(Engine::new());
        let mut listing = None;
        // A snapshot beside the journal that no read can use (another build's, older than this
        // one; torn; older than a restored journal): this read replays every record instead of its
        // scope's, and writes a fresh one for the reads after it ([`crate::snapshot::renew`]).
        let renew = std::cell::Cell::new(false);
        let mut problems = Vec::new();
        let journal = read_journal_with(
            path,
            |file| match crate::snapshot::load_to_read(path, JournalRef::File(file), scope) {
                Ok(s) => {
                    match s.engine {
                        Decoded::Engine(e) => *engine.borrow_mut() = e,
                        Decoded::Listing(l) => listing = Some(l),
                    }
                    s.journal_len
                }
                Err(why) => {
                    renew.set(crate::snapshot::worth_renewing(path, &why));
                    0
                }
            },
            |e, _| {
                if renew.get() || scope.needs(e) {
                    apply_entry(&mut engine.borrow_mut(), e, &mut problems)
                }
            },
        )?;
        let (mut store, problems) =
            Store::opened(path, journal, engine.into_inner(), true, 0, problems);
        store.listing = listing;
        if renew.get()
            && !store.replay_failed
            && store.journal.appendable
            && store.journal.records >= crate::snapshot::SNAPSHOT_AFTER
        {
            // The answer does not depend on it: a snapshot that cannot be written (a directory
            // this reader may not write to) is left as it was.
            let _ = crate::snapshot::renew(
                path,
                &store.engine,
                store.journal.valid_len,
                store.journal.records,
            );
        }
        Ok((store, problems))
    }

    /// Re-read the store if another process changed it since this one last read or wrote it (the
    /// resident engine of `tclab script run` shares its store with other callers).
    pub fn refresh(&mut self) -> Result<Vec<String>, String> {
        if seen_path(&self.path) == self.journal.seen {
            return Ok(Vec::new());
        }
        let (fresh, problems) = Store::open(&self.path)?;
        *self = fresh;
        Ok(problems)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[Vec<String>] {
        &self.journal.entries
    }
    /// How many changes the last [`Store::execute`] applied: one for a command, one per line of a batch.
    pub fn last_applied(&self) -> usize {
        self.last_new.len()
    }
    /// The records the last [`Store::execute`] appended, in order.
    pub fn last_changes(&self) -> &[Vec<String>] {
        &self.last_new
    }
    /// How many records opening the store replayed (what a call without a resident engine costs; the
    /// records its snapshot stood for are not counted).
    pub fn records_read(&self) -> usize {
        self.replayed
    }
    /// The engine the journal builds; `None` for a store opened to answer one filter listing from
    /// its snapshot, which decoded no whole engine.
    pub fn engine(&self) -> Option<&Engine> {
        self.listing.is_none().then_some(&self.engine)
    }

    /// Make `new` records durable: appended to a current-format file, or the whole journal rewritten.
    fn append(&mut self, new: &[Vec<String>]) -> Result<(), String> {
        if new.is_empty() {
            return Ok(());
        }
        if self.read_only {
            return Err(format!(
                "{}: opened to read, not to change (a bug in tclab: nothing was written)",
                self.path.display()
            ));
        }
        let on_disk = seen_path(&self.path);
        if !self.journal.appendable || on_disk.is_none() || on_disk != self.journal.seen {
            self.journal.entries.extend(new.iter().cloned());
            return self.rewrite();
        }
        let io = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io)?;
        // Cut off a torn record left by a writer that was killed.
        if on_disk.is_some_and(|s| s.len != self.journal.valid_len) {
            f.set_len(self.journal.valid_len).map_err(io)?;
        }
        let text: String = new.iter().map(|e| record(e)).collect();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(self.journal.valid_len))
            .map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_data().map_err(io)?;
        self.journal.valid_len += text.len() as u64;
        self.journal.seen = Some(seen(&f).map_err(io)?);
        self.journal.entries.extend(new.iter().cloned());
        Ok(())
    }

    fn rewrite(&mut self) -> Result<(), String> {
        let text = whole_file(&self.journal.entries);
        write_atomically(&self.path, text.as_bytes())?;
        self.journal.valid_len = text.len() as u64;
        self.journal.appendable = true;
        self.journal.seen = seen_path(&self.path);
        Ok(())
    }

    /// Run one tclab command — `tc …`, `iptables …` or `link …` (the words after `tclab`) — against the
    /// store, and make what it changed durable before returning. `stdin` is what `tc -batch -` reads.
    pub fn execute(&mut self, argv: &[String], stdin: Option<&str>) -> Result<Output, String> {
        let (cmd, args) = match argv.split_first() {
            Some((c, a)) => (c.as_str(), a),
            None => return Err("no command".into()),
        };
        if let Some(listing) = self.listing.as_mut() {
            return match cmd {
                "tc" => Ok(crate::list_filters(listing, args, 0)),
                _ => Err(format!(
                    "{}: opened for a filter listing, not for \"{cmd}\" (a bug in tclab)",
                    self.path.display()
                )),
            };
        }
        let mut new = Vec::new();
        let out = match cmd {
            "tc" => self.tc(args, stdin, &mut new)?,
            "iptables" => {
                let out = crate::iptables::run(&mut self.engine, args);
                if out.code == 0 && crate::iptables::is_modifying(args) {
                    new.push(argv.to_vec());
                }
                out
            }
            "link" => {
                if args.is_empty() || args[0] == "show" || args[0] == "list" || args[0] == "ls" {
                    // `ip link show [type ifb] [[dev] NAME]`: only the devices of that kind, or that one.
                    let mut ifb_only = false;
                    let mut only: Option<&str> = None;
                    let mut it = args.iter().skip(1).map(String::as_str);
                    while let Some(w) = it.next() {
                        match (w, it.clone().next()) {
                            ("type", Some("ifb")) => {
                                ifb_only = true;
                                it.next();
                            }
                            ("dev", Some(name)) => {
                                only = Some(name);
                                it.next();
                            }
                            (name, _)
                                if only.is_none()
                                    && !name.starts_with('-')
                                    && w != "type"
                                    && w != "dev" =>
                            {
                                only = Some(name)
                            }
                            _ => {
                                return Ok(Output {
                                    stderr: format!(
                                        "usage: link show [type ifb] [[dev] NAME] (not \"{}\")\n",
                                        args[1..].join(" ")
                                    ),
                                    code: 1,
                                    ..Output::default()
                                })
                            }
                        }
                    }
                    if let Some(name) = only.filter(|n| self.engine.device(n).is_none()) {
                        return Ok(Output {
                            stderr: format!("Device \"{name}\" does not exist.\n"),
                            code: 1,
                            ..Output::default()
                        });
                    }
                    Output {
                        stdout: link_show(&self.engine, ifb_only, only),
                        ..Output::default()
                    }
                } else {
                    match link(&mut self.engine, args) {
                        Ok(()) => {
                            new.push(argv.to_vec());
                            Output::default()
                        }
                        Err(e) => Output {
                            // ip exits 2 when the kernel refuses (RTNETLINK), 1 on its own checks.
                            code: if e.starts_with("RTNETLINK")
                                || e == "Error: Unknown device type."
                                || e.starts_with("Error: mtu less")
                                || e.starts_with("Error: mtu greater")
                            {
                                2
                            } else {
                                1
                            },
                            stderr: e + "\n",
                            ..Output::default()
                        },
                    }
                }
            }
            "ethtool" => {
                let (out, entry) = ethtool(&mut self.engine, args);
                new.extend(entry);
                out
            }
            // `ip route … realm R` (script.rs sends route lines with realms): the record as given.
            "route" => {
                let out = crate::iproute::run(&mut self.engine, args);
                if out.code == 0 && out.stderr.is_empty() && changes_policy(argv) {
                    new.push(argv.to_vec());
                }
                out
            }
            other => return Err(format!("unknown store command \"{other}\"")),
        };
        let resets = new.iter().any(|e| is_removal(e));
        self.append(&new)?;
        self.last_new = new;
        if resets {
            self.compact()?;
        }
        if !self.last_new.is_empty() {
            self.snapshot();
        }
        Ok(out)
    }

    /// Write a snapshot if enough records lie past the one in force ([`crate::snapshot`] says why and
    /// how). The command is durable already: a snapshot that cannot be written is left out, and the
    /// next call replays a little more.
    fn snapshot(&mut self) {
        let records = self.journal.entries.len();
        if self.read_only
            || self.replay_failed
            || !self.journal.appendable
            || records < self.snapshot_records + crate::snapshot::SNAPSHOT_AFTER
        {
            return;
        }
        // Written, or the policy has no snapshot form: either way, not tried again before
        // SNAPSHOT_AFTER more records.
        let _ = self.write_snapshot();
    }

    /// Write the snapshot of this store's engine now, whatever the records since the last one: `false`
    /// if the engine has no snapshot form (any snapshot there was is removed) or this store may not
    /// write one (opened to read, a record that no longer applied, a journal not yet in the current
    /// format). Hold the store's exclusive lock.
    pub fn write_snapshot(&mut self) -> Result<bool, String> {
        if self.read_only || self.replay_failed || !self.journal.appendable {
            return Ok(false);
        }
        let records = self.journal.entries.len();
        let written =
            crate::snapshot::write(&self.path, &self.engine, self.journal.valid_len, records)?;
        self.snapshot_records = records;
        Ok(written)
    }

    /// Everything a user can see of the policy, as text (every device's `tc -s -d` qdisc, class and
    /// filter listings, actions, `iptables -S`, devices, the automatic handle counter): what a
    /// compaction, or a snapshot, must leave as it was.
    pub fn fingerprint(&mut self) -> String {
        fingerprint(&mut self.engine)
    }

    /// `tc [OPTIONS] …` or `tc [OPTIONS] -batch FILE|-`.
    fn tc(
        &mut self,
        args: &[String],
        stdin: Option<&str>,
        new: &mut Vec<Vec<String>>,
    ) -> Result<Output, String> {
        let journal_entry = |words: &[String]| {
            let mut e = vec!["tc".to_string()];
            e.extend(words.iter().cloned());
            e
        };
        let Some(i) = batch_arg(args) else {
            let out = crate::run(&mut self.engine, args, 0);
            if out.code == 0 && is_modifying(args) {
                new.push(journal_entry(args));
            }
            return Ok(out);
        };
        let Some(file) = args.get(i + 1) else {
            return Ok(Output {
                stderr: "Error: -batch needs a file name\n".into(),
                code: 1,
                ..Output::default()
            });
        };
        let force = args.iter().any(|a| a == "-force" || a == "-f");
        let globals: Vec<String> = args[..i]
            .iter()
            .chain(args[i + 2..].iter())
            .filter(|a| *a != "-force" && *a != "-f")
            .cloned()
            .collect();
        // The batch a caller read already (`-` from its stdin, or FILE, read before it took the store's
        // lock) comes as `stdin`; FILE still names it in messages.
        let text = match (file.as_str(), stdin) {
            (_, Some(s)) => s.to_string(),
            ("-", None) => {
                let mut s = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                    .map_err(|e| format!("standard input: {e}"))?;
                s
            }
            (f, None) => match read_batch_file(f) {
                Ok(t) => t,
                Err(stderr) => {
                    return Ok(Output {
                        stderr,
                        code: 1,
                        ..Output::default()
                    })
                }
            },
        };
        let mut total = Output::default();
        let (commands, unfinished) = read_batch(&text);
        // Each `break 'batch` is tc's loop ending before the text does.
        'batch: {
            for (n, line) in commands {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let mut words = globals.clone();
                match batch_words(line) {
                    Ok(w) => words.extend(w),
                    Err(e) => {
                        // makeargs exit(1)s: the batch ends there, `-force` or not.
                        total.stderr.push_str(&format!("{e}\n"));
                        total.code = 1;
                        break 'batch;
                    }
                }
                let (out, exits) = crate::run_batch_line(&mut self.engine, &words, 0);
                total.stdout.push_str(&out.stdout);
                total.stderr.push_str(&out.stderr);
                if exits {
                    // tc's syntax errors (`incomplete_command`, `invarg`) `exit()` the whole batch at
                    // once, `-force` or not, without a "Command failed" line.
                    total.code = out.code;
                    break 'batch;
                }
                if out.code != 0 {
                    total
                        .stderr
                        .push_str(&format!("Command failed {file}:{n}\n"));
                    total.code = 1;
                    if !force {
                        break 'batch;
                    }
                } else if is_modifying(&words) {
                    new.push(journal_entry(&words));
                }
            }
            if unfinished {
                total.stderr.push_str("Missing continuation line\n");
            }
        }
        Ok(total)
    }

    /// Drop the entries that built what a reset removed, if the shorter journal rebuilds exactly this
    /// state (see the module's essay).
    fn compact(&mut self) -> Result<(), String> {
        let Some(candidate) = compacted(&self.engine, &self.journal.entries) else {
            return Ok(());
        };
        let (mut rebuilt, problems) = replay(&candidate);
        if !problems.is_empty() || fingerprint(&mut rebuilt) != fingerprint(&mut self.engine) {
            return Ok(());
        }
        self.journal.entries = candidate;
        self.rewrite()?;
        // A snapshot of the longer journal's first records holds only if the shorter one still begins
        // with them (the compaction dropped records after it). One that no read can use any more
        // goes, rather than lie beside the store until SNAPSHOT_AFTER more records (1 MB at 10 000
        // classes), and a new one is due as if there were none.
        let snap = crate::snapshot::path_for(&self.path);
        if snap.exists() {
            let holds = File::open(&self.path).is_ok_and(|journal| {
                crate::snapshot::holds(&self.path, JournalRef::File(&journal))
            });
            if !holds {
                let _ = std::fs::remove_file(&snap);
                self.snapshot_records = 0;
            }
        } else {
            self.snapshot_records = 0;
        }
        Ok(())
    }
}

/// A batch's commands as iproute2's `getcmdline` reads them: a `#` starts a comment to the end of its
/// line, and a line ending in `\` goes on in the next (joined as they stand). Each command comes with the
/// number of its last line, which `Command failed FILE:N` names. A line is a C string there: a NUL byte
/// ends it (`htb\0 default 10` is `htb`), and a line cut so no longer ends in `\`+newline.
pub fn batch_lines(text: &str) -> Vec<(usize, String)> {
    read_batch(text).0
}

/// [`batch_lines`], and whether the text ends inside a continued command: tc then says `Missing
/// continuation line` and stops there, running none of that command.
pub fn read_batch(text: &str) -> (Vec<(usize, String)>, bool) {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let cut = raw.split('\0').next().unwrap_or("");
        let line = cut.split('#').next().unwrap_or("");
        let mut cmd = pending.take().unwrap_or_default();
        match line.strip_suffix('\\') {
            // A comment or a NUL ends the line: a backslash before it does not continue it.
            Some(head) if cut.len() == raw.len() && !raw.contains('#') => {
                cmd.push_str(head);
                pending = Some(cmd);
            }
            _ => {
                cmd.push_str(line);
                out.push((i + 1, cmd));
            }
        }
    }
    (out, pending.is_some())
}

/// The words of one batch command as iproute2's `makeargs` splits them: at blanks, except that a word
/// beginning with `'` or `"` runs to the next such quote, blanks included, and ends there (`tc -batch`
/// of `basic match 'cmp(u8 at 9 layer network eq 6)'` gives the ematch as one word, as a shell would).
/// A quote inside a word is an ordinary character. An unclosed quote is `makeargs`' error, which ends
/// tc's whole batch.
pub fn batch_words(line: &str) -> Result<Vec<String>, String> {
    let blank = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        rest = rest.trim_start_matches(blank);
        let Some(first) = rest.chars().next() else {
            return Ok(out);
        };
        if first == '\'' || first == '"' {
            let Some(end) = rest[1..].find(first) else {
                return Err("Unterminated quoted string".to_string());
            };
            out.push(rest[1..1 + end].to_string());
            // makeargs overwrites the closing quote with the word's end: what follows it is the
            // next word, blank or not.
            rest = &rest[end + 2..];
        } else {
            let end = rest.find(blank).unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
}

/// `tc -batch FILE`'s reading of FILE, with tc's message when it cannot be opened (`strerror`'s words,
/// without Rust's "(os error N)"). A directory opens and reads as nothing, as `fopen`/`getline` see it.
pub fn read_batch_file(f: &str) -> Result<String, String> {
    if Path::new(f).is_dir() {
        return Ok(String::new());
    }
    let bytes = std::fs::read(f).map_err(|e| {
        let why = e.to_string();
        let why = why.split(" (os error ").next().unwrap_or(&why).to_string();
        format!("Cannot open file \"{f}\" for reading: {why}\n")
    })?;
    batch_text(bytes, f)
}

/// A batch as text: tclab's names and words are UTF-8, so a batch that is not is refused whole rather
/// than have distinct bytes collapse into one replacement character.
pub fn batch_text(bytes: Vec<u8>, name: &str) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "tclab: batch \"{name}\" is not UTF-8 text (at byte {}); nothing was applied\n",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Does a batch's text hold a command that asks for a change? One that holds only shows is a read:
/// it takes the store's lock shared, and creates nothing where there is no store yet.
pub fn batch_changes(text: &str) -> bool {
    batch_lines(text)
        .iter()
        .any(|(_, line)| batch_words(line).map_or(true, |w| is_modifying(&w)))
}

/// Where tc's `-batch` option (`-b`, `--batch`) is among a tc command line's words (the words after
/// `tc`), if it is there: its file follows it.
pub fn batch_arg(args: &[String]) -> Option<usize> {
    args.iter()
        .position(|a| a == "-batch" || a == "-b" || a == "--batch")
}

/// Does this tclab command — `tc …`, `iptables …` or `link …` — ask for a change (as opposed to a show)?
/// Changes take the store's lock exclusively and are counted in a script's report.
pub fn changes_policy(argv: &[String]) -> bool {
    let args = argv.get(1..).unwrap_or_default();
    match argv.first().map(String::as_str) {
        Some("tc") => batch_arg(args).is_some() || is_modifying(args),
        Some("iptables") => crate::iptables::is_modifying(args),
        Some("link") => !args.is_empty() && !["show", "list", "ls"].contains(&args[0].as_str()),
        Some("ethtool") => args.first().is_some_and(|a| {
            ["-K", "--features", "--offload", "-s", "--change"].contains(&a.as_str())
        }),
        // A route line with a realm, one ip would refuse (a misspelt `realm`: a refusal a script's
        // report lists and --strict fails on), or a `del` (of a route that may have one).
        Some("route") => match args.split_first() {
            Some((c, rest)) => match crate::iproute::op(c) {
                Some(crate::iproute::Op::Del) => true,
                Some(op) => {
                    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
                    crate::iproute::parse(op, &rest).map_or(true, |l| l.has_realm)
                }
                None => false,
            },
            None => false,
        },
        _ => true,
    }
}

/// Does this tc command line modify the policy (as opposed to showing it)?
pub fn is_modifying(args: &[String]) -> bool {
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

/// A command that removes — `tc … del|delete|flush`, `iptables -D|-F|-X`, `link del`: after one, a
/// compaction may pay; refused, it is a script's clean-up of something that was not there.
pub fn is_removal(entry: &[String]) -> bool {
    let words: Vec<&str> = entry
        .iter()
        .skip(1)
        .map(String::as_str)
        .filter(|a| !a.starts_with('-') || entry[0] == "iptables")
        .collect();
    match entry.first().map(String::as_str) {
        Some("tc") => words
            .get(1)
            .is_some_and(|w| *w != "d" && ("delete".starts_with(w) || "flush".starts_with(w))),
        Some("iptables") => words.iter().any(|w| {
            matches!(
                *w,
                "-F" | "-X" | "-D" | "--flush" | "--delete" | "--delete-chain"
            )
        }),
        Some("link") => words.first().is_some_and(|w| w.starts_with("del")),
        _ => false,
    }
}

/// The device a tc entry names (`dev DEV`), if any.
fn entry_device(entry: &[String]) -> Option<&str> {
    let p = entry.iter().position(|w| w == "dev")?;
    entry.get(p + 1).map(String::as_str)
}

/// The journal without the entries that built what is gone: tc lines of devices back to their pristine
/// state (each replaced by a `link add` so that the device still exists), the mangle table's lines if it
/// is empty, `tc actions` lines if no action remains. `None` if nothing would be dropped.
fn compacted(engine: &Engine, entries: &[Vec<String>]) -> Option<Vec<Vec<String>>> {
    // A device's egress tree and its ingress qdisc are reset separately (`qdisc del … root`, `qdisc del …
    // ingress`): the lines that built either one go when it is back to the device's default.
    let root_default = |dev: &str| {
        engine
            .device(dev)
            .is_some_and(|d| d.root().handle == tclab_core::Handle::UNSPEC)
    };
    let no_ingress = |dev: &str| engine.device(dev).is_some_and(|d| d.ingress().is_none());
    let ingress_side = |e: &[String]| {
        e.iter().enumerate().any(|(i, w)| {
            w == "ingress"
                || w == "clsact"
                || w == "egress"
                || (w == "parent"
                    && e.get(i + 1)
                        .is_some_and(|p| p.to_ascii_lowercase().starts_with("ffff:")))
        })
    };
    let pristine = |e: &[String], dev: &str| {
        if e[0] == "tc" && ingress_side(e) {
            no_ingress(dev)
        } else {
            root_default(dev)
        }
    };
    let mangle_empty = engine.netfilter().mangle.is_pristine();
    let actions_empty = engine.actions().is_empty();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut kept_device: Vec<&str> = Vec::new();
    let mut dropped = 0;
    for e in entries {
        let drop = match e.first().map(String::as_str) {
            Some("state") => true,
            Some("iptables") => mangle_empty,
            Some("tc")
                if e.iter().skip(1).any(|w| w == "actions" || w == "action")
                    && entry_device(e).is_none() =>
            {
                actions_empty
            }
            // A bare `link add dev X` (what an earlier compaction left) counts as one of X's lines.
            Some("tc") | Some("link")
                if e[0] == "tc" || (e.len() == 4 && e[1] == "add" && e[2] == "dev") =>
            {
                match entry_device(e) {
                    Some(dev) if pristine(e, dev) => {
                        let placeholder: Vec<String> =
                            vec!["link".into(), "add".into(), "dev".into(), dev.into()];
                        if !kept_device.contains(&dev) && !out.contains(&placeholder) {
                            kept_device.push(dev);
                            out.push(placeholder);
                        }
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if drop {
            dropped += 1;
        } else {
            out.push(e.clone());
        }
    }
    // The counter goes last: the kept lines replay with the handles they had, then the count resumes
    // where history left it. (If a kept line took an automatic handle after a dropped one did, the
    // replay differs and the fingerprint check refuses the compaction.)
    if engine.autohandle() != 0 {
        out.push(vec![
            "state".into(),
            "autohandle".into(),
            engine.autohandle().to_string(),
        ]);
    }
    // Replacing each device's first line by a `link add` is no gain for a device with a single line.
    (out.len() < entries.len() && dropped > 0).then_some(out)
}

/// Everything a user can see of a policy, as text: what must not change when a journal is compacted.
fn fingerprint(engine: &mut Engine) -> String {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let words = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    for (dev, d) in engine.devices() {
        commands.push(words(&["-s", "-d", "qdisc", "show", "dev", dev]));
        commands.push(words(&["-s", "-d", "class", "show", "dev", dev]));
        let mut parents: Vec<String> = d
            .qdiscs()
            .iter()
            .filter(|q| q.handle != tclab_core::Handle::UNSPEC)
            .map(|q| q.handle.to_string())
            .collect();
        parents.extend(d.classes(0).iter().map(|c| c.classid.to_string()));
        if d.ingress().is_some() {
            parents.extend(["ffff:fff2".to_string(), "ffff:fff3".to_string()]);
        }
        for p in &parents {
            commands.push(words(&[
                "-s", "-d", "filter", "show", "dev", dev, "parent", p,
            ]));
        }
    }
    for kind in crate::action::KINDS {
        commands.push(words(&["-s", "actions", "list", "action", kind]));
    }
    let mut text = format!("autohandle {}\n", engine.autohandle());
    text.push_str(&link_show(engine, false, None));
    for c in &commands {
        let out = crate::run(engine, c, 0);
        text.push_str(&out.stdout);
        text.push_str(&out.stderr);
    }
    let out = crate::iptables::run(engine, &words(&["-t", "mangle", "-S"]));
    text.push_str(&out.stdout);
    text
}

/// `tclab link show`: the devices of the stored policy.
/// `ip link show [type ifb] [dev NAME]`: every device (or only the ifb ones, or one), numbered as listed.
pub fn link_show(engine: &Engine, ifb_only: bool, only: Option<&str>) -> String {
    let mut s = String::new();
    for (i, (name, d)) in engine.devices().enumerate() {
        if ifb_only && d.kind != tclab_core::engine::DevKind::Ifb || only.is_some_and(|o| o != name)
        {
            continue;
        }
        // As `ip link` prints it: a down device holds noop.
        let qdisc = if !d.up && d.root().handle == tclab_core::Handle::UNSPEC {
            "noop"
        } else {
            d.root().q.kind()
        };
        s.push_str(&format!(
            "{}: {name}: mtu {} qdisc {qdisc} state {} qlen {}\n",
            i + 1,
            d.mtu,
            if d.up { "UP" } else { "DOWN" },
            d.txqueuelen
        ));
    }
    s
}

/// Rebuild an engine by replaying a journal. Entries that no longer apply are reported, not fatal.
pub fn replay(journal: &[Vec<String>]) -> (Engine, Vec<String>) {
    let mut engine = Engine::new();
    let mut problems = Vec::new();
    for entry in journal {
        apply_entry(&mut engine, entry, &mut problems);
    }
    (engine, problems)
}

/// Apply one journal record (`tc …`, `iptables …`, `link …`, `route …`, `state autohandle N`) to
/// `engine`: the one policy loader of the store's replay, `tclab script run`'s journal and the
/// simulator's policies.
pub fn apply_record(engine: &mut Engine, entry: &[String]) -> Result<(), String> {
    match entry.first().map(String::as_str) {
        Some("tc") => {
            let out = crate::run(engine, &entry[1..], 0);
            (out.code == 0).then_some(()).ok_or(out.stderr)
        }
        Some("link") => link(engine, &entry[1..]),
        Some("route") => {
            let out = crate::iproute::run(engine, &entry[1..]);
            (out.code == 0).then_some(()).ok_or(out.stderr)
        }
        Some("iptables") => {
            let out = crate::iptables::run(engine, &entry[1..]);
            (out.code == 0).then_some(()).ok_or(out.stderr)
        }
        Some("state") => match (entry.get(1).map(String::as_str), entry.get(2)) {
            (Some("autohandle"), Some(v)) => v
                .parse()
                .map(|v| engine.set_autohandle(v))
                .map_err(|_| "bad automatic handle counter".to_string()),
            _ => Err("unknown state entry".into()),
        },
        _ => Err("unknown journal entry".into()),
    }
}

/// Apply one journal record to `engine`; one that no longer applies is added to `problems`.
fn apply_entry(engine: &mut Engine, entry: &[String], problems: &mut Vec<String>) {
    if let Err(e) = apply_record(engine, entry) {
        problems.push(format!(
            "journal entry {:?} no longer applies: {}",
            entry,
            e.trim_end()
        ));
    }
}

/// `tclab link`'s grammar (`ip link`'s, for the devices of a policy).
pub const LINK_USAGE: &str = "Usage: tclab link { add | set | del } dev DEV [ type ifb|veth [peer name PEER]|dummy|vlan… ]
                  [ mtu N ] [ txqueuelen N ] [ numtxqueues N ] [ gso_max_size N ] [ gso_max_segs N ]
                  [ tso|gso|sg|tx on|off ] [ speed MBIT ] [ up | down ]
       tclab link show [ type ifb ] [ [dev] DEV ]
The policy's devices (ip link's grammar): a device is created on first use by tc with mtu 1500 and
txqueuelen 1000; numtxqueues N makes it multiqueue (mq); an ifb starts down; speed is the link speed
ethtool reports (Mbit/s; none until set), which taprio and cbs time frames by; tso, gso, sg and tx take
ethtool's other names too (tcp-segmentation-offload, tx-tcp-segmentation, scatter-gather …); without sg
Linux keeps neither TSO nor GSO, without tx no TSO, whatever tso and gso say. Exit codes are ip's: 1 for
bad options, 2 when the (simulated) kernel refuses.";

/// The `ethtool -K` names of the offloads tclab models, as ethtool 6.1 takes them: its short and long
/// names (`off_flag_def`) and the kernel's feature string (`netdev_features_strings`). `tso` and
/// `tcp-segmentation-offload` switch every `tx-tcp*-segmentation` feature; tclab's TCP is IPv4, so
/// `tx-tcp-segmentation` (NETIF_F_TSO) alone decides whether a device takes its GSO packets whole
/// (`net_gso_ok` on `SKB_GSO_TCPV4`), and `tx-tcp6-…` and `tx-tcp-mangleid-segmentation` change
/// nothing here (nor `tx-tcp-ecn-segmentation`: tclab does not model the `SKB_GSO_TCP_ECN` of an
/// skb carrying CWR).
pub const ETHTOOL_TSO: &[&str] = &["tso", "tcp-segmentation-offload", "tx-tcp-segmentation"];
/// `gso`: NETIF_F_GSO.
pub const ETHTOOL_GSO: &[&str] = &[
    "gso",
    "generic-segmentation-offload",
    "tx-generic-segmentation",
];
/// `sg`: NETIF_F_SG. Without it Linux drops TSO and GSO (`netdev_fix_features`).
pub const ETHTOOL_SG: &[&str] = &["sg", "scatter-gather", "tx-scatter-gather"];
/// `tx`: every transmit checksum feature; without them Linux drops TSO (`netdev_fix_features`).
pub const ETHTOOL_TX: &[&str] = &["tx", "tx-checksumming"];
/// Every `ethtool -K` name tclab models: `link set` takes them.
pub const ETHTOOL_MODELLED: [&[&str]; 4] = [ETHTOOL_TSO, ETHTOOL_GSO, ETHTOOL_SG, ETHTOOL_TX];

/// The other names `ethtool -K` takes (ethtool 6.1 on Linux 6.12): its short and long names
/// (`off_flag_def`) and the kernel's feature strings (`netdev_features_strings`), less the offloads
/// tclab models ([`ETHTOOL_MODELLED`]). A script's call with
/// one of these is noted and does nothing; with any other name ethtool fails ("bit name not found").
pub const ETHTOOL_OTHER: &[&str] = &[
    "rx",
    "rx-checksumming",
    "ufo",
    "udp-fragmentation-offload",
    "gro",
    "generic-receive-offload",
    "lro",
    "large-receive-offload",
    "rxvlan",
    "rx-vlan-offload",
    "txvlan",
    "tx-vlan-offload",
    "ntuple",
    "ntuple-filters",
    "rxhash",
    "receive-hashing",
    "tx-checksum-ipv4",
    "tx-checksum-ip-generic",
    "tx-checksum-ipv6",
    "highdma",
    "tx-scatter-gather-fraglist",
    "tx-vlan-hw-insert",
    "rx-vlan-hw-parse",
    "rx-vlan-filter",
    "tx-vlan-stag-hw-insert",
    "rx-vlan-stag-hw-parse",
    "rx-vlan-stag-filter",
    "vlan-challenged",
    "rx-gro",
    "rx-gro-hw",
    "rx-lro",
    "tx-gso-robust",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-tcp6-segmentation",
    "tx-fcoe-segmentation",
    "tx-gre-segmentation",
    "tx-gre-csum-segmentation",
    "tx-ipxip4-segmentation",
    "tx-ipxip6-segmentation",
    "tx-udp_tnl-segmentation",
    "tx-udp_tnl-csum-segmentation",
    "tx-gso-partial",
    "tx-tunnel-remcsum-segmentation",
    "tx-sctp-segmentation",
    "tx-esp-segmentation",
    "tx-udp-segmentation",
    "tx-gso-list",
    "tx-checksum-fcoe-crc",
    "tx-checksum-sctp",
    "rx-ntuple-filter",
    "rx-hashing",
    "rx-checksum",
    "tx-nocache-copy",
    "loopback",
    "rx-fcs",
    "rx-all",
    "l2-fwd-offload",
    "hw-tc-offload",
    "esp-hw-offload",
    "esp-tx-csum-hw-offload",
    "rx-udp_tunnel-port-offload",
    "tls-hw-record",
    "tls-hw-tx-offload",
    "tls-hw-rx-offload",
    "rx-gro-list",
    "macsec-hw-offload",
    "rx-udp-gro-forwarding",
    "hsr-tag-ins-offload",
    "hsr-tag-rm-offload",
    "hsr-fwd-offload",
    "hsr-dup-offload",
];

/// `ethtool ARGS` in a policy script, as ethtool 6.1 answers on Linux 6.12 (checked on this machine's, on
/// a veth in a namespace): `-K DEV NAME on|off …` checks every pair before it changes anything (a value
/// other than on|off: exit 1; a name it does not know: exit 92, "bit name not found"), then sets the
/// offloads tclab models ([`ETHTOOL_MODELLED`], as `link set dev DEV …`, the record it returns) and notes
/// the others; `-s DEV speed N …` sets the speed and notes the other settings; `-k DEV` prints the
/// modelled features as ethtool does, "[requested on]" where Linux dropped one (`netdev_fix_features`).
/// An ifb that was never made is missing, as on Linux (the store makes other names on first use: they
/// stand for the host's interfaces). Other calls are noted and do nothing.
pub fn ethtool(engine: &mut Engine, args: &[String]) -> (Output, Option<Vec<String>>) {
    let out = |code: i32, stderr: &str| Output {
        code,
        stderr: stderr.to_string(),
        ..Output::default()
    };
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let what = match words.first() {
        Some(&("-K" | "--features" | "--offload")) => "feature",
        Some(&("-s" | "--change")) => "setting",
        Some(&("-k" | "--show-features" | "--show-offload")) => "show",
        _ => {
            let note = format!("tclab script: ignoring \"ethtool {}\"\n", words.join(" "));
            return (out(0, &note), None);
        }
    };
    let Some(&dev) = words.get(1) else {
        return (out(1, "ethtool: bad command line argument(s)\n"), None);
    };
    let pairs = &words[2..];
    if what == "feature" {
        if pairs.is_empty() {
            return (out(1, "Could not change any device features\n"), None);
        }
        for p in pairs.chunks(2) {
            let (k, v) = (p[0], p.get(1).copied());
            if !matches!(v, Some("on" | "off")) {
                let said = format!(
                    "ethtool (-K): flag '{}' for parameter '{k}' is not followed by 'on' or 'off'\n",
                    v.unwrap_or("(null)")
                );
                return (out(1, &said), None);
            }
            let mut known = ETHTOOL_MODELLED.iter().chain([&ETHTOOL_OTHER]);
            if !known.any(|names| names.contains(&k)) {
                let said =
                    "netlink error: bit name not found\nnetlink error: Operation not supported\n";
                return (out(92, said), None);
            }
        }
    }
    if dev.starts_with("ifb") && engine.device(dev).is_none() {
        let code = match what {
            "feature" => 92,
            "setting" => 75,
            _ => 1,
        };
        let said = "netlink error: no device matches name\nnetlink error: No such device\n";
        return (out(code, said), None);
    }
    if what == "show" {
        return (
            Output {
                stdout: features_shown(engine.device(dev), dev),
                ..Output::default()
            },
            None,
        );
    }
    let mut set = vec!["set".to_string(), "dev".to_string(), dev.to_string()];
    let mut notes = String::new();
    for p in pairs.chunks_exact(2) {
        let ours = match what {
            "feature" => ETHTOOL_MODELLED.iter().any(|names| names.contains(&p[0])),
            _ => p[0] == "speed",
        };
        if ours {
            set.extend([p[0].to_string(), p[1].to_string()]);
        } else {
            notes.push_str(&format!(
                "tclab script: ignoring ethtool {what} \"{} {}\"\n",
                p[0], p[1]
            ));
        }
    }
    if set.len() == 3 {
        return (out(0, &notes), None);
    }
    match link(engine, &set) {
        Ok(()) => {
            let mut entry = vec!["link".to_string()];
            entry.extend(set);
            (out(0, &notes), Some(entry))
        }
        Err(e) => (out(1, &format!("{notes}{e}\n")), None),
    }
}

/// `ethtool -k DEV`'s lines for the features tclab models, in ethtool's order; a device the store has
/// not made yet has Linux's defaults (all on).
fn features_shown(dev: Option<&tclab_core::engine::Device>, name: &str) -> String {
    let (tso, gso, sg, tx, tso_on, gso_on) = dev
        .map_or((true, true, true, true, true, true), |d| {
            (d.tso, d.gso, d.sg, d.tx_csum, d.tso_on(), d.gso_on())
        });
    let line = |what: &str, on: bool, wanted: bool| {
        let state = if on { "on" } else { "off" };
        let asked = if wanted && !on { " [requested on]" } else { "" };
        format!("{what}: {state}{asked}\n")
    };
    format!(
        "Features for {name}:\n{}{}{}{}",
        line("tx-checksumming", tx, tx),
        line("scatter-gather", sg, sg),
        line("tcp-segmentation-offload", tso_on, tso),
        line("generic-segmentation-offload", gso_on, gso)
    )
}

/// `link add|set|del dev DEV [type ifb] [mtu N] [txqueuelen N] [numtxqueues N] [gso_max_size N]
/// [gso_max_segs N] [tso|gso|sg|tx on|off] [speed MBIT] [up|down]`: the devices of an offline
/// policy. `add … type ifb` makes an ifb (down until `set … up`, as `ip link add` makes it) and refuses a
/// name in use, as RTNETLINK does; `del` removes a device with its qdiscs.
pub fn link(engine: &mut Engine, args: &[String]) -> Result<(), String> {
    let mut it = args.iter().map(String::as_str);
    let cmd = it.next().ok_or(LINK_USAGE)?;
    if !matches!(cmd, "add" | "set" | "change" | "del" | "delete") {
        return Err(format!(
            "Command \"{cmd}\" is unknown, try \"tclab link help\".\n{LINK_USAGE}"
        ));
    }
    let mut dev = None;
    let (mut mtu, mut txq, mut up, mut kind) = (None, None, None, None);
    let mut txqueues = None;
    let mut peer: Option<String> = None;
    // `ethtool -K DEV tso off gso off` in a script arrives as these.
    let (mut tso, mut gso, mut sg, mut tx_csum) = (None, None, None, None);
    let (mut gso_max_size, mut gso_max_segs) = (None, None);
    // `ethtool -s DEV speed N` in a script arrives as this.
    let mut speed = None;
    while let Some(a) = it.next() {
        let mut value = |what: &str| -> Result<u32, String> {
            let v = it.next().ok_or(format!("\"{what}\" needs a value"))?;
            v.parse::<u32>()
                .map_err(|_| format!("Error: argument \"{v}\" is wrong: Invalid \"{what}\" value"))
        };
        match a {
            // `ip link set DEV name NEW` renames: tclab's devices keep their names.
            "name" if cmd == "set" && dev.is_some() => {
                return Err(format!(
                    "Error: tclab cannot rename a device (name {})",
                    it.next().unwrap_or("")
                ))
            }
            "dev" | "name" => {
                dev = Some(it.next().ok_or("\"dev\" needs a device name")?.to_string())
            }
            "mtu" => mtu = Some(value("mtu")?),
            "txqueuelen" | "qlen" | "txqlen" => txq = Some(value("txqueuelen")?),
            "numtxqueues" => txqueues = Some(value("numtxqueues")?),
            "speed" => speed = Some(value("speed")?),
            // rtnetlink's checks against a veth's tso_max_size / tso_max_segs (`do_setlink`).
            "gso_max_size" => match value("gso_max_size")? {
                v if v > tclab_core::engine::GSO_MAX_SIZE => {
                    return Err("Error: too big gso_max_size.".into())
                }
                v => gso_max_size = Some(v),
            },
            "gso_max_segs" => match value("gso_max_segs")? {
                v if v > tclab_core::engine::GSO_MAX_SEGS => {
                    return Err("Error: too big gso_max_segs.".into())
                }
                v => gso_max_segs = Some(v),
            },
            a if ETHTOOL_MODELLED.iter().any(|names| names.contains(&a)) => {
                let v = match it.next() {
                    Some("on") => true,
                    Some("off") => false,
                    other => {
                        return Err(format!(
                            "\"{a}\" takes on or off, not {}",
                            other.unwrap_or("nothing")
                        ))
                    }
                };
                let which = if ETHTOOL_TSO.contains(&a) {
                    &mut tso
                } else if ETHTOOL_GSO.contains(&a) {
                    &mut gso
                } else if ETHTOOL_SG.contains(&a) {
                    &mut sg
                } else {
                    &mut tx_csum
                };
                *which = Some(v);
            }
            // Receive queues change nothing tclab models.
            "numrxqueues" => {
                value("numrxqueues")?;
            }
            "type" => kind = it.next(),
            // `type veth peer [name] NAME`: the other end is a device too.
            "peer" => {
                let mut v = it.next().ok_or("\"peer\" needs a device name")?;
                if v == "name" {
                    v = it.next().ok_or("\"name\" needs a device name")?;
                }
                peer = Some(v.to_string());
            }
            // Options that change nothing tclab models (`link eth0 … type vlan id 10`, `promisc on`).
            "link" | "id" | "address" | "mode" | "group" | "alias" | "master" | "promisc"
            | "arp" | "multicast" | "allmulticast" | "dynamic" | "carrier" | "state"
            | "gro_max_size" | "tso_max_size" | "tso_max_segs" | "netns" | "broadcast" | "brd"
            | "trailers" | "protodown" | "vrf" | "xdp" => {
                it.next().ok_or(format!("\"{a}\" needs a value"))?;
            }
            "nomaster" => {}
            "up" => up = Some(true),
            "down" => up = Some(false),
            other if dev.is_none() && !other.starts_with('-') => dev = Some(other.to_string()),
            other => return Err(format!("Error: unknown link option \"{other}\"")),
        }
    }
    let dev = dev.ok_or("Error: no device given (dev NAME)")?;
    if !crate::valid_ifname(&dev) {
        return Err(format!(
            "Error: argument \"{dev}\" is wrong: \"name\" not a valid ifname"
        ));
    }
    // The kinds `ip link add … type KIND` can make on Linux; any other is the kernel's "Unknown device
    // type" (rtnetlink finds no link ops for it).
    const KINDS: &[&str] = &[
        "ifb",
        "veth",
        "dummy",
        "vlan",
        "macvlan",
        "macvtap",
        "ipvlan",
        "bridge",
        "bond",
        "team",
        "vxlan",
        "geneve",
        "gre",
        "gretap",
        "ip6gre",
        "ip6gretap",
        "ipip",
        "sit",
        "ip6tnl",
        "vti",
        "vti6",
        "wireguard",
        "vrf",
        "nlmon",
        "netdevsim",
    ];
    if cmd == "add" && kind.is_some_and(|k| !KINDS.contains(&k)) {
        return Err("Error: Unknown device type.".into());
    }
    if cmd == "set" && txqueues.is_some() {
        // `numtxqueues` is fixed when a device is created (`ip link add`).
        return Err("Error: numtxqueues can only be given when the device is added".into());
    }
    if txqueues.is_some_and(|n| n == 0 || n > 4096) {
        return Err(format!(
            "Error: invalid numtxqueues {}",
            txqueues.unwrap_or(0)
        ));
    }
    let ifb = kind == Some("ifb");
    // An ifb exists only once made (`ip link add … type ifb`, `modprobe ifb`): setting one that was not
    // is Linux's error, which scripts test (`ip link set dev ifb0 up || ip link add ifb0 type ifb`).
    // Other names stand for the host's own interfaces, which an offline policy creates on first use.
    if cmd == "set" && dev.starts_with("ifb") && engine.device(&dev).is_none() {
        return Err(format!("Cannot find device \"{dev}\""));
    }
    // ifb_setup and dummy_setup clear the MTU bounds ether_setup gives.
    let unbounded = matches!(kind, Some("ifb" | "dummy"));
    if let Some(m) = mtu {
        use tclab_core::engine::Device;
        // Out of the device's bounds: refused before anything is made or changed.
        let mut made = Device::new(&dev, crate::DEFAULT_MTU, crate::DEFAULT_TXQUEUELEN);
        if unbounded {
            (made.min_mtu, made.max_mtu) = (0, 0);
        }
        let d = engine.device(&dev).unwrap_or(&made);
        // Linux takes 0 where there is no lower bound; tclab does not, as no frame fits.
        if m == 0 && d.min_mtu == 0 {
            return Err("Error: mtu must be positive".into());
        }
        tclab_core::engine::check_mtu(d, m).map_err(|e| e.to_string())?;
    }
    match cmd {
        "add" | "set" => {
            // `ip link add` names a type and refuses a name in use; tclab's own `link add dev X` (no type)
            // just makes sure the device exists.
            if cmd == "add" && kind.is_some() {
                for name in std::iter::once(&dev).chain(peer.as_ref()) {
                    if engine.device(name).is_some() {
                        return Err("RTNETLINK answers: File exists".into());
                    }
                }
            }
            if ifb && cmd == "add" {
                engine
                    .create_device(tclab_core::engine::Device::ifb(&dev))
                    .map_err(|_| "RTNETLINK answers: File exists".to_string())?;
            }
            if let Some(p) = peer.as_ref().filter(|_| cmd == "add") {
                engine.add_device(p, crate::DEFAULT_MTU, crate::DEFAULT_TXQUEUELEN);
            }
            let d = engine.add_device(&dev, crate::DEFAULT_MTU, crate::DEFAULT_TXQUEUELEN);
            if cmd == "add" && unbounded {
                (d.min_mtu, d.max_mtu) = (0, 0);
            }
            if cmd == "add" && kind == Some("netdevsim") {
                // netdevsim's mock PHC and taprio offload (taprio's full offload needs both).
                d.taprio_offload = true;
            }
            // IP tunnels and wireguard are not Ethernet-like: no IFF_BROADCAST (teql reads it).
            if cmd == "add"
                && kind.is_some_and(|k| {
                    matches!(
                        k,
                        "ipip" | "sit" | "gre" | "ip6gre" | "ip6tnl" | "vti" | "vti6" | "wireguard"
                    )
                })
            {
                d.broadcast = false;
            }
            if let Some(m) = mtu {
                // The teql master refuses an MTU above a slave's (`teql_master_mtu`).
                engine.set_mtu(&dev, m).map_err(|e| e.to_string())?;
            }
            let d = engine.add_device(&dev, crate::DEFAULT_MTU, crate::DEFAULT_TXQUEUELEN);
            if let Some(t) = txq {
                d.set_txqueuelen(t);
            }
            if let Some(v) = tso {
                d.tso = v;
            }
            if let Some(v) = gso {
                d.gso = v;
            }
            if let Some(v) = sg {
                d.sg = v;
            }
            if let Some(v) = tx_csum {
                d.tx_csum = v;
            }
            if let Some(v) = gso_max_size {
                d.gso_max_size = v;
            }
            if let Some(v) = gso_max_segs {
                d.gso_max_segs = v;
            }
            if let Some(n) = txqueues {
                d.txqueues = n;
            }
            if let Some(v) = speed {
                d.set_speed(v);
            }
            match up {
                // `teql_master_open` refuses a master without slaves.
                Some(true) => engine.open(&dev).map_err(|e| e.to_string())?,
                Some(false) => {
                    engine.set_up(&dev, false);
                }
                None => {}
            }
            Ok(())
        }
        // The teql master has no rtnl_link_ops: rtnetlink cannot delete it.
        "del" | "delete"
            if engine.device(&dev).map(|d| d.kind)
                == Some(tclab_core::engine::DevKind::TeqlMaster) =>
        {
            Err("RTNETLINK answers: Operation not supported".into())
        }
        "del" | "delete" => engine
            .remove_device(&dev)
            .map(|_| ())
            .ok_or(format!("Cannot find device \"{dev}\"")),
        other => Err(format!("Error: unknown link command \"{other}\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tclab_core::Handle;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn link_add_refuses_a_type_linux_does_not_have_and_creates_nothing() {
        let mut e = Engine::new();
        assert_eq!(
            link(&mut e, &words("add dev x0 type bogus")),
            Err("Error: Unknown device type.".to_string())
        );
        assert!(e.device("x0").is_none());
        // A refused numtxqueues changes nothing either.
        link(&mut e, &words("add dev eth0 type dummy")).unwrap();
        assert!(link(&mut e, &words("set dev eth0 mtu 9000 numtxqueues 4")).is_err());
        assert_eq!(e.device("eth0").map(|d| d.mtu), Some(1500));
    }

    #[test]
    fn an_mtu_out_of_the_devices_bounds_is_refused_and_changes_nothing() {
        // dev_validate_mtu with a veth's and teql0's bounds (68..=65535), the kernel's extack
        // messages as `ip link set` printed them on this machine's 6.18 kernel; an ifb has none.
        let mut e = Engine::new();
        link(&mut e, &words("add dev eth0 type veth peer eth1")).unwrap();
        for (mtu, msg) in [
            (0, "Error: mtu less than device minimum."),
            (67, "Error: mtu less than device minimum."),
            (65536, "Error: mtu greater than device maximum."),
        ] {
            let err = link(&mut e, &words(&format!("set dev eth0 mtu {mtu}"))).unwrap_err();
            assert_eq!(err, msg, "mtu {mtu}");
        }
        link(&mut e, &words("set dev eth0 mtu 68")).unwrap();
        link(&mut e, &words("set dev eth0 mtu 65535")).unwrap();
        assert_eq!(e.device("eth0").map(|d| d.mtu), Some(65535));
        // A refused `link add` makes nothing.
        assert!(link(&mut e, &words("add dev v0 type veth mtu 60")).is_err());
        assert!(e.device("v0").is_none());
        // teql0 (teql_master_setup: min_mtu 68, max_mtu 65535), checked before teql_master_mtu.
        let out = crate::run(&mut e, &words("qdisc add dev eth1 root teql0"), 0);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let err = link(&mut e, &words("set dev teql0 mtu 60")).unwrap_err();
        assert_eq!(err, "Error: mtu less than device minimum.");
        assert_eq!(e.device("teql0").map(|d| d.mtu), Some(1500));
        // ifb_setup and dummy_setup clear the bounds (tdc's qfq case 85ee sets a dummy's MTU to
        // 2147483647).
        link(&mut e, &words("add dev ifb0 type ifb")).unwrap();
        link(&mut e, &words("set dev ifb0 mtu 100000")).unwrap();
        link(&mut e, &words("add dev d0 type dummy")).unwrap();
        link(&mut e, &words("set dev d0 mtu 2147483647")).unwrap();
        link(&mut e, &words("set dev d0 mtu 10")).unwrap();
        assert_eq!(e.device("d0").map(|d| d.mtu), Some(10));
    }

    #[test]
    fn gso_limits_are_set_as_ip_link_sets_them() {
        // Linux's defaults (GSO_LEGACY_MAX_SIZE, GSO_MAX_SEGS); `ip link set … gso_max_segs 1` is what
        // makes TCP send one MSS per skb (ethtool -K only records the offload flags); values past a
        // veth's tso_max_size / tso_max_segs are refused and change nothing.
        let mut e = Engine::new();
        link(&mut e, &words("add dev eth0 type dummy")).unwrap();
        let d = e.device("eth0").unwrap();
        assert_eq!((d.gso_max_size, d.gso_max_segs), (65536, 65535));
        link(
            &mut e,
            &words("set dev eth0 gso_max_segs 1 gso_max_size 32768"),
        )
        .unwrap();
        let d = e.device("eth0").unwrap();
        assert_eq!((d.gso_max_size, d.gso_max_segs), (32768, 1));
        assert_eq!(
            link(&mut e, &words("set dev eth0 gso_max_segs 65536")),
            Err("Error: too big gso_max_segs.".to_string())
        );
        assert_eq!(
            link(&mut e, &words("set dev eth0 gso_max_size 524281")),
            Err("Error: too big gso_max_size.".to_string())
        );
        assert_eq!(e.device("eth0").map(|d| d.gso_max_segs), Some(1));
    }

    #[test]
    fn devices_have_names_linux_allows_and_keep_them() {
        // `dev_valid_name`: 1 to 15 bytes, no `/`, `:` or white space, not `.` or `..`.
        let mut e = Engine::new();
        for bad in ["", "a b", "x:1", "a/b", ".", "sixteen-letters!"] {
            assert!(
                link(
                    &mut e,
                    &[
                        "add".into(),
                        "dev".into(),
                        bad.into(),
                        "type".into(),
                        "ifb".into()
                    ]
                )
                .is_err(),
                "{bad:?}"
            );
            let out = crate::run(
                &mut e,
                &words(&format!("qdisc add dev {bad} root pfifo")),
                0,
            );
            assert_ne!(out.code, 0, "{bad:?}");
        }
        assert_eq!(e.devices().count(), 0);
        link(&mut e, &words("add dev fifteen-letters type ifb")).unwrap();
        // An ifb not made is not there to set.
        let err = link(&mut e, &words("set dev ifb9 up")).unwrap_err();
        assert_eq!(err, "Cannot find device \"ifb9\"");
        assert!(e.device("ifb9").is_none());
        // `ip link set DEV name NEW` renames on Linux; tclab says it cannot, and changes nothing.
        let err = link(&mut e, &words("set dev fifteen-letters name wan")).unwrap_err();
        assert!(err.contains("cannot rename"), "{err}");
        assert!(e.device("wan").is_none() && e.device("fifteen-letters").is_some());
    }

    #[test]
    fn a_batch_reads_as_getcmdline_reads_it() {
        // iproute2's getcmdline: `#` comments to the end of the line; `\` at the end continues the
        // command on the next line (not after a comment); a command is numbered by its last line.
        // A continued command the text ends in is none: tc says "Missing continuation line" (checked
        // with iproute2 6.1's tc -batch).
        let text = "qdisc add dev eth0 \\\n  root htb # a comment\n\nclass add # note \\\nclass add dev eth0 \\\n";
        assert_eq!(
            read_batch(text),
            (
                vec![
                    (2, "qdisc add dev eth0   root htb ".to_string()),
                    (3, String::new()),
                    (4, "class add ".to_string()),
                ],
                true
            )
        );
        // getline's line is a C string to getcmdline: a NUL ends it, so what follows is not read, and
        // a backslash before the NUL continues nothing (tc 6.1 -batch added `htb\0 default 10` as a
        // plain htb, "default 0").
        let text =
            "qdisc add dev eth0 root handle 1: htb\0 default 10\nqdisc show \\\0\nclass show\n";
        assert_eq!(
            read_batch(text),
            (
                vec![
                    (1, "qdisc add dev eth0 root handle 1: htb".to_string()),
                    (2, "qdisc show \\".to_string()),
                    (3, "class show".to_string()),
                ],
                false
            )
        );
    }

    #[test]
    fn a_batch_line_splits_as_makeargs_splits_it() {
        // iproute2's makeargs (lib/utils.c): a word that begins with a quote runs to the next one of
        // the same kind, blanks included; a quote inside a word is kept; an unclosed one is an error.
        // This machine's tc 6.1 takes `htb default '10'` in a batch as `default 10`, and refuses
        // `match 'ip dst' 10.0.0.1` as `Illegal "match"`: one word.
        let w = |l: &str| batch_words(l).unwrap();
        assert_eq!(w("  a\tb  "), ["a", "b"]);
        assert_eq!(
            w("basic match 'cmp(u8 at 9 layer network eq 6)' and \"meta(nf_mark gt 5)\""),
            [
                "basic",
                "match",
                "cmp(u8 at 9 layer network eq 6)",
                "and",
                "meta(nf_mark gt 5)"
            ]
        );
        assert_eq!(w("'' x"), ["", "x"]);
        assert_eq!(w("'a'b c"), ["a", "b", "c"]);
        assert_eq!(w("it's \"q'\""), ["it's", "q'"]);
        assert_eq!(
            batch_words("match 'ip dst 10.0.0.1"),
            Err("Unterminated quoted string".to_string())
        );
    }

    #[test]
    fn a_batch_goes_past_what_tc_returns_and_stops_where_it_exits() {
        let (dir, path) = store_with("batch-returned", &[]);
        let batch = dir.join("b");
        // Read by iproute2 6.1's tc -batch (in a namespace, the device renamed): an unknown object
        // is do_cmd's `return -1`, so the line "Command failed", exit status 1, and -force goes on;
        // an unfinished last command is "Missing continuation line" and not run.
        std::fs::write(
            &batch,
            "qdisc add dev eth0 root handle 1: htb\n\
             qdsic add dev eth0 root\n\
             qdisc add dev eth0 root root htb\n\
             class add dev eth0 parent 1: classid 1:1 htb rate 1mbit\n\
             qdisc show dev eth0 \\\n",
        )
        .unwrap();
        let (mut w, _) = Store::open(&path).unwrap();
        let run = |w: &mut Store, force: &str| {
            w.execute(
                &words(&format!("tc {force} -batch {}", batch.display())),
                None,
            )
            .unwrap()
        };
        let out = run(&mut w, "");
        let b = batch.display();
        assert_eq!(
            (out.code, out.stderr),
            (
                1,
                format!("Object \"qdsic\" is unknown, try \"tc help\".\nCommand failed {b}:2\n")
            )
        );
        let out = run(&mut w, "-force");
        assert_eq!(
            (out.code, out.stdout, out.stderr),
            (
                1,
                String::new(),
                format!(
                    "Error: Exclusivity flag on, cannot modify.\nCommand failed {b}:1\n\
                     Object \"qdsic\" is unknown, try \"tc help\".\nCommand failed {b}:2\n\
                     Error: \"root\" is duplicate parent ID\nCommand failed {b}:3\n\
                     Missing continuation line\n"
                )
            )
        );
        // Line 4 came after the refused ones: -force applied it.
        let shown = w.execute(&words("tc class show dev eth0"), None).unwrap();
        assert!(shown.stdout.contains("class htb 1:1 root"), "{shown:?}");
        // An `exit(-1)` (invarg) still ends the batch at once, without "Command failed".
        std::fs::write(&batch, "qdisc add dev eth0 handle x: root htb\nqdsic\n").unwrap();
        let out = run(&mut w, "-force");
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (255, "Error: argument \"x:\" is wrong: invalid qdisc ID\n")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_batch_applies_quoted_words_and_stops_at_an_unclosed_quote() {
        let (dir, path) = store_with(
            "batch-quotes",
            &["tc qdisc add dev eth0 root handle 1: prio"],
        );
        let batch = dir.join("b");
        std::fs::write(
            &batch,
            "filter add dev eth0 parent 1: prio 1 protocol ip basic match 'cmp(u8 at 9 layer network eq 6)' classid 1:1\n\
             qdisc add dev eth1 root handle '2:' pfifo\n\
             qdisc add dev eth2 root 'pfifo\n\
             qdisc add dev eth3 root pfifo\n",
        )
        .unwrap();
        let (mut w, _) = Store::open(&path).unwrap();
        let out = w
            .execute(
                &words(&format!("tc -force -batch {}", batch.display())),
                None,
            )
            .unwrap();
        // makeargs ends the batch at the unclosed quote, -force or not, as tc exits there.
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (1, "Unterminated quoted string\n")
        );
        let shown = w
            .execute(&words("tc filter show dev eth0"), None)
            .unwrap()
            .stdout;
        // (em_cmp's printer names the layer by number.)
        assert!(shown.contains("cmp(u8 at 9 layer 1 eq 6)"), "{shown}");
        let q = w.execute(&words("tc qdisc show"), None).unwrap().stdout;
        assert!(q.contains("qdisc pfifo 2: dev eth1 root"), "{q}");
        assert!(!q.contains("eth2") && !q.contains("eth3"), "{q}");
        // The journal holds the ematch as the one word tc gave the kernel.
        let j = read_journal(&path).unwrap().entries;
        assert!(j
            .iter()
            .any(|r| r.iter().any(|x| x == "cmp(u8 at 9 layer network eq 6)")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_fast_record_reader_agrees_with_json() {
        // Hand-picked: plain words, spacing JSON allows, and every shape the fast path must hand over.
        for line in [
            r#"["tc","qdisc","add","dev","eth0","root","htb"]"#,
            r#" [ "a" , "b",""]  "#,
            r#"[]"#,
            r#"["ü","é€"]"#,
            r#"["a\"b"]"#,
            r#"["a\u0041"]"#,
            r#"["a",]"#,
            r#"["a" "b"]"#,
            r#"["a"#,
            r#"[1,"a"]"#,
            "[\"tab\there\"]",
            r#"["a"],"#,
        ] {
            let mut fast = vec!["stale".to_string(); 3];
            let json: Result<Vec<String>, _> = serde_json::from_str(line);
            if plain_record(line, &mut fast) {
                assert_eq!(Some(&fast), json.as_ref().ok(), "{line}");
            } else {
                // Handed over: only lines with escapes or that JSON itself refuses.
                assert!(line.contains('\\') || json.is_err(), "{line}");
            }
        }
    }

    /// A store in a fresh directory of its own (`tclab-store-TAG-PID`) with `commands` applied, each
    /// of which must succeed: the directory and the store's path.
    fn store_with(tag: &str, commands: &[&str]) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("tclab-store-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let (mut w, _) = Store::open(&path).unwrap();
        for c in commands {
            let out = w.execute(&words(c), None).unwrap();
            assert_eq!(out.code, 0, "{c}: {}", out.stderr);
        }
        (dir, path)
    }

    #[test]
    fn a_read_replays_only_the_records_its_answer_depends_on() {
        let (dir, path) = store_with(
            "scope",
            &[
            "tc qdisc add dev eth0 root handle 1: htb default 10",
            "tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
            "tc class add dev eth0 parent 1: classid 1:20 htb rate 2mbit",
            "tc filter add dev eth0 parent 1: prio 1 protocol ip u32 match ip dst 10.0.0.1/32 flowid 1:20",
            "tc actions add action gact drop index 7",
            "iptables -t mangle -A POSTROUTING -p udp -j CLASSIFY --set-class 1:10",
            // A class deleted after a filter named another: the filter's absence changes nothing.
            "tc class del dev eth0 classid 1:10",
            ],
        );
        for read in [
            "tc -s class show dev eth0",
            "tc qdisc show",
            "tc filter show dev eth0",
            "tc actions list action gact",
            "iptables -t mangle -S",
            "link show",
        ] {
            let argv = words(read);
            let (mut r, problems) = Store::open_to_read(&path, &argv).unwrap();
            assert!(problems.is_empty(), "{read}: {problems:?}");
            let (mut full, _) = Store::open(&path).unwrap();
            let got = r.execute(&argv, None).unwrap();
            assert!(!got.stdout.is_empty(), "{read}");
            assert_eq!(
                got.stdout,
                full.execute(&argv, None).unwrap().stdout,
                "{read}"
            );
        }
        assert_eq!(
            ReadScope::of(&words("tc class show")),
            ReadScope::QdiscsAndClasses
        );
        let read = words("tc -s q ls");
        let scope = ReadScope::of(&read);
        assert!(!scope.needs(&words("tc filter add dev eth0 parent 1: matchall")));
        assert!(!scope.needs(&words("iptables -A POSTROUTING -j ACCEPT")));
        assert!(scope.needs(&words("link add dev ifb0 type ifb")));
        assert!(
            !ReadScope::of(&words("iptables -S")).needs(&words("tc qdisc add dev eth0 root sfq"))
        );
        assert!(ReadScope::of(&words("tc filter show")).needs(&words("tc actions add action drop")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_filter_listing_loads_no_htb_class_and_answers_the_same() {
        // A filter listing of a device, with nothing replayed after the snapshot, leaves the class
        // trees out when its parent is the root's or the ingress qdisc's; a parent below the root,
        // another command or a refused word decodes the whole engine.
        let filters = |dev, parent| ReadScope::Filters { dev, parent };
        for (read, scope) in [
            ("tc filter show dev eth0", filters("eth0", 0)),
            (
                "tc -s -j filter ls dev eth0 prio 1 protocol ip chain 0",
                filters("eth0", 0),
            ),
            ("tc -d filter lst dev eth0 pref 1", filters("eth0", 0)),
            (
                "tc filter show dev eth0 parent 1:",
                filters("eth0", 0x1_0000),
            ),
            (
                "tc filter show dev eth0 parent 1:10",
                filters("eth0", 0x1_0010),
            ),
            (
                "tc filter show dev eth0 root",
                filters("eth0", Handle::ROOT.0),
            ),
            // tc_filter_list: `ingress` is TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS).
            (
                "tc filter show dev eth0 ingress",
                filters("eth0", 0xffff_fff2),
            ),
            ("tc filter show", ReadScope::TrafficControl),
            ("tc filter show dev eth0 bogus", ReadScope::TrafficControl),
            (
                "tc filter get dev eth0 parent 1: prio 1 handle 800::800 protocol ip u32",
                ReadScope::TrafficControl,
            ),
            ("tc class show dev eth0", ReadScope::QdiscsAndClasses),
            ("tc -batch x", ReadScope::TrafficControl),
        ] {
            let w = words(read);
            let got = ReadScope::of(&w);
            assert_eq!(got, scope, "{read}");
            if let ReadScope::Filters { .. } = got {
                assert!(got.needs(&words(
                    "tc class add dev eth0 parent 1: classid 1:1 htb rate 1mbit"
                )));
                assert!(!got.needs(&words("iptables -A POSTROUTING -j ACCEPT")));
            }
        }
        let (dir, path) = store_with(
            "rootfilters",
            &[
            "tc qdisc add dev eth0 root handle 1: htb default 10",
            "tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
            "tc qdisc add dev eth0 parent 1:10 handle 10: prio",
            "tc filter add dev eth0 parent 1: prio 1 protocol ip u32 match ip dst 10.0.0.1/32 flowid 1:10",
            "tc filter add dev eth0 parent 1:10 prio 2 protocol ip u32 match ip src 10.0.0.2/32 flowid 1:10",
            "tc filter add dev eth0 parent 10: prio 3 protocol ip matchall classid 10:2",
            "tc qdisc add dev eth0 ingress",
            "tc filter add dev eth0 parent ffff: prio 4 protocol ip matchall action drop",
            ],
        );
        let (mut w, _) = Store::open(&path).unwrap();
        assert!(w.write_snapshot().unwrap());
        let loaded = |path: &Path, read: &[String]| {
            let file = File::open(path).unwrap();
            crate::snapshot::load_to_read(path, JournalRef::File(&file), ReadScope::of(read))
                .ok()
                .unwrap()
                .engine
        };
        // Each listing as the whole engine answers it; those found without the class trees from an
        // engine decoded without them, the others (a qdisc under a class) from a whole one.
        for (read, lean, has) in [
            (
                "tc -s filter show dev eth0",
                true,
                "match 0a000001/ffffffff at 16",
            ),
            ("tc filter show dev eth0 parent 1:", true, "0a000001"),
            (
                "tc -d -j filter show dev eth0 parent 1:10",
                true,
                "\"value\":\"a000002\"",
            ),
            // `root` is TC_H_ROOT, found by its major ffff: the ingress qdisc (`__tcf_qdisc_find`).
            ("tc filter show dev eth0 root", true, "gact action drop"),
            ("tc filter show dev eth0 ingress", true, "gact action drop"),
            (
                "tc filter show dev eth0 parent ffff:",
                true,
                "gact action drop",
            ),
            ("tc filter show dev eth0 parent 1:99", true, ""),
            // No such qdisc: only the index of the qdiscs under classes can say so.
            ("tc filter show dev eth0 parent 2:", false, ""),
            ("tc filter show dev eth1", true, ""),
            ("tc filter show dev eth0 parent 10:", false, "flowid 10:2"),
            ("tc filter show dev eth0 parent 10:2", false, ""),
        ] {
            let read = words(read);
            let want = w.execute(&read, None).unwrap();
            assert!(want.stdout.contains(has), "{read:?}: {}", want.stdout);
            let got = match loaded(&path, &read) {
                Decoded::Listing(mut l) => {
                    assert!(lean, "{read:?} decoded without classes");
                    crate::list_filters(&mut l, &read[1..], 0)
                }
                Decoded::Engine(mut e) => {
                    assert!(!lean, "{read:?} decoded whole");
                    crate::run(&mut e, &read[1..], 0)
                }
            };
            assert_eq!(
                (&got.stdout, &got.stderr, got.code),
                (&want.stdout, &want.stderr, want.code),
                "{read:?}"
            );
            let (mut r, _) = Store::open_to_read(&path, &read).unwrap();
            assert_eq!(r.engine().is_none(), lean, "{read:?}");
            assert_eq!(
                r.execute(&read, None).unwrap().stdout,
                got.stdout,
                "{read:?}"
            );
        }
        // The engine decoded for one listing answers that listing and nothing else: not another
        // parent (whose class it may not hold), not another command.
        let show = words("tc filter show dev eth0 parent 1:");
        let Decoded::Listing(mut l) = loaded(&path, &show) else {
            panic!("decoded whole");
        };
        let other = l
            .filter_block("eth0", Handle(0x1_0010))
            .map(|_| ())
            .unwrap_err();
        assert!(
            other
                .to_string()
                .contains("decoded for one filter listing only"),
            "{other}"
        );
        let other = crate::list_filters(&mut l, &words("class show dev eth0"), 0);
        assert_eq!(other.code, 1, "{}", other.stderr);
        assert!(
            other.stderr.contains("one filter listing"),
            "{}",
            other.stderr
        );
        let (mut r, _) = Store::open_to_read(&path, &show).unwrap();
        let refused = r.execute(&words("iptables -S"), None).unwrap_err();
        assert!(refused.contains("opened for a filter listing"), "{refused}");
        // A record after the snapshot is replayed onto a whole engine: the snapshot's classes kept.
        w.execute(
            &words("tc class add dev eth0 parent 1: classid 1:20 htb rate 2mbit"),
            None,
        )
        .unwrap();
        let Decoded::Engine(mut full) = loaded(&path, &show) else {
            panic!("decoded without classes");
        };
        assert!(crate::run(&mut full, &words("class show dev eth0"), 0)
            .stdout
            .contains("class htb 1:10"));
        let (mut r, _) = Store::open_to_read(&path, &show).unwrap();
        assert_eq!(
            r.execute(&show, None).unwrap().stdout,
            w.execute(&show, None).unwrap().stdout
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_opened_to_read_shows_the_policy_and_refuses_to_write() {
        let dir = std::env::temp_dir().join(format!("tclab-store-ro-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let (mut w, _) = Store::open(&path).unwrap();
        w.execute(
            &words("tc qdisc add dev eth0 root handle 1: htb default 10"),
            None,
        )
        .unwrap();
        w.execute(
            &words("tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit"),
            None,
        )
        .unwrap();
        let before = std::fs::read(&path).unwrap();
        // Replayed record by record, nothing kept: the same policy as the full open shows.
        let show = words("tc class show dev eth0");
        let (mut r, problems) = Store::open_to_read(&path, &show).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(r.entries().is_empty());
        let shown = r.execute(&show, None).unwrap().stdout;
        assert_eq!(
            shown,
            Store::open(&path)
                .unwrap()
                .0
                .execute(&show, None)
                .unwrap()
                .stdout
        );
        assert!(
            shown.starts_with("class htb 1:10 root prio 0 rate 1Mbit"),
            "{shown}"
        );
        // A change through it is an error, and the file is untouched.
        let err = r
            .execute(
                &words("tc class add dev eth0 parent 1: classid 1:20 htb rate 1mbit"),
                None,
            )
            .unwrap_err();
        assert!(err.contains("opened to read"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_record_after_a_snapshot_is_named_by_its_line_in_the_file() {
        // The records a snapshot stands for are not read, yet the message counts them (a blank line
        // among them too), as it did when the whole file was read.
        let (dir, path) = store_with(
            "line",
            &[
                "tc qdisc add dev eth0 root handle 1: htb default 10",
                "tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
            ],
        );
        // A blank line inside the covered records (a hand edit the reader tolerates).
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.insert(text.find('\n').unwrap() + 1, '\n');
        std::fs::write(&path, &text).unwrap();
        let (mut w, _) = Store::open(&path).unwrap();
        assert!(w.write_snapshot().unwrap());
        // Line 5: header, first record, blank, second record, then the corrupt one.
        text.push_str("[\"tc\",\n");
        std::fs::write(&path, &text).unwrap();
        let show = words("tc class show dev eth0");
        let err = Store::open_to_read(&path, &show).err().unwrap();
        assert!(
            err.contains("policy.json:5: corrupt tclab store record"),
            "{err}"
        );
        let err = Store::open(&path).err().unwrap();
        assert!(
            err.contains("policy.json:5: corrupt tclab store record"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
