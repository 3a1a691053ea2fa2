//! The store's snapshot: the engine a journal's first records build, kept in `FILE.snap` beside the
//! journal `FILE`, so that a call loads it and replays only the records after it (issue 26: a cold
//! `tc -s class show` of a 30 000-record store replayed all of them, 1.3 µs each).
//!
//! # The file
//!
//! ```text
//! "TCLABSNP"        8 bytes
//! version           u32 LE (1)
//! build             u32 LE length + bytes: the tclab executable that wrote it
//! journal_len       u64 LE: the journal's first bytes the engine stands for (whole records)
//! journal_records   u64 LE: the records in them
//! journal_crc       u32 LE: CRC-32 of those bytes
//! engine_len        u64 LE
//! engine            the engine ([`tclab_core::snapshot`], postcard)
//! crc               u32 LE: CRC-32 of everything before it
//! ```
//!
//! # When it is trusted
//!
//! Only when every check holds; otherwise it is ignored and the journal replayed whole, as without one —
//! a snapshot can make a call faster, never answer differently:
//!
//! - the magic, the version and the file's length are right, and its checksum holds (a torn or corrupt
//!   file, a write cut short);
//! - it was written by this very build of tclab (the executable's device, inode, size and modification
//!   time): the engine's bytes are its structures field by field, and another build may lay them out
//!   otherwise;
//! - the journal's first `journal_len` bytes are still the ones it was made from (CRC-32): a journal
//!   compacted, replaced or restored from a backup since is not the history the snapshot stands for.
//!   The engine a journal builds is a function of its bytes (replay is deterministic), so the same bytes
//!   mean the same engine, whatever happened to the file in between.
//!
//! # When it is written
//!
//! By a command that changed the store (under its exclusive lock), once [`SNAPSHOT_AFTER`] records or
//! more lie past the snapshot in force — a `tc -batch` of a large policy writes one at its end; a store
//! of a few commands never has one, since replaying it costs less than reading a file. It is written as
//! the journal's whole rewrites are: a temporary file, fsynced, renamed over `FILE.snap`, the directory
//! fsynced; a writer killed before the rename leaves the old snapshot (older, still valid for the
//! journal's first records) and a temporary file the next writer removes (or a reader that renews
//! the snapshot, once the writer's process is gone: [`renew`]). A policy the engine cannot
//! snapshot yet ([`tclab_core::snapshot`] says which kinds can) gets none, and a stale snapshot is
//! removed then.

use crate::store::ReadScope;
use std::path::{Path, PathBuf};
use tclab_core::Handle;

const MAGIC: &[u8; 8] = b"TCLABSNP";
const VERSION: u32 = 1;

/// Records past the snapshot (or in a journal without one) before a change writes a new one: replaying
/// this many costs about a millisecond, as much as writing a snapshot of a small policy.
pub const SNAPSHOT_AFTER: usize = 1000;

/// A snapshot found valid for a journal's first bytes, its engine decoded as `E`.
pub struct Snapshot<E = tclab_core::Engine> {
    /// The journal's bytes it stands for: records after them are replayed on top.
    pub journal_len: u64,
    pub journal_records: u64,
    pub engine: E,
}

/// A snapshot's engine as decoded for a read ([`load_to_read`]).
pub enum Decoded {
    /// The whole engine, or without its filters for a qdisc or class listing.
    Engine(tclab_core::Engine),
    /// For one filter listing alone, without the class trees it does not read.
    Listing(tclab_core::snapshot::FilterListing),
}

/// `FILE.snap` for the store `FILE`.
pub fn path_for(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".snap");
    store.with_file_name(name)
}

/// The build that writes and reads snapshots: the running executable's identity. `None` (no snapshot
/// used or written) if it cannot be told.
fn build_id() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    Some(format!(
        "{} {}:{}:{}:{}.{}",
        env!("CARGO_PKG_VERSION"),
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// The snapshot's bytes for an engine that `journal`'s bytes (whole records, `records` of them) built.
pub fn encode(engine_bytes: &[u8], journal: &[u8], records: u64) -> Option<Vec<u8>> {
    let build = build_id()?;
    let mut out = Vec::with_capacity(engine_bytes.len() + 64 + build.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(build.len() as u32).to_le_bytes());
    out.extend_from_slice(build.as_bytes());
    out.extend_from_slice(&(journal.len() as u64).to_le_bytes());
    out.extend_from_slice(&records.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(journal).to_le_bytes());
    out.extend_from_slice(&(engine_bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(engine_bytes);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// A cursor over the file's fields; every read is bounds-checked.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Why a snapshot was not used (for tests; a call just replays).
#[derive(Debug, PartialEq, Eq)]
pub enum Unused {
    Missing,
    /// Cut short, bad magic or checksum, another version or build.
    Corrupt(&'static str),
    /// The journal no longer begins with the bytes it was made from.
    Stale,
    /// The engine's bytes did not decode (another layout).
    Undecodable(String),
}

/// The journal a snapshot is checked against: its bytes in memory, or the open file, whose covered
/// bytes are then read in pieces into one small buffer and never held whole (a cold read of a
/// 30 000-record store needs only the records after the snapshot: 3.3 MB fewer bytes to allocate,
/// fault in and check as UTF-8).
#[derive(Clone, Copy)]
pub enum JournalRef<'a> {
    Bytes(&'a [u8]),
    File(&'a std::fs::File),
}

impl JournalRef<'_> {
    /// The journal's length in bytes, if it can be told.
    fn len(self) -> Option<u64> {
        match self {
            JournalRef::Bytes(b) => Some(b.len() as u64),
            JournalRef::File(f) => f.metadata().ok().map(|m| m.len()),
        }
    }

    /// Whether the journal's first `len` bytes have the CRC-32 `crc` and end a record (records end in a
    /// newline: a snapshot never stands for half of one).
    fn begins_with(self, len: u64, crc: u32) -> bool {
        match self {
            JournalRef::Bytes(b) => usize::try_from(len)
                .ok()
                .and_then(|n| b.get(..n))
                .is_some_and(|c| c.last() == Some(&b'\n') && crc32fast::hash(c) == crc),
            JournalRef::File(f) => {
                let mut h = crc32fast::Hasher::new();
                let mut last = None;
                let ok = read_prefix(f, len, |piece| {
                    h.update(piece);
                    last = piece.last().copied();
                });
                ok && last == Some(b'\n') && h.finalize() == crc
            }
        }
    }
}

/// Hand the first `len` bytes of `f` to `each` in pieces of at most 64 KiB (positioned reads: the
/// file's offset is left alone); `false` if the file is shorter or cannot be read.
pub(crate) fn read_prefix(f: &std::fs::File, len: u64, mut each: impl FnMut(&[u8])) -> bool {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 16];
    let mut off = 0;
    while off < len {
        let want = (len - off).min(buf.len() as u64) as usize;
        match f.read_at(&mut buf[..want], off) {
            Ok(0) => return false,
            Ok(n) => {
                each(&buf[..n]);
                off += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// The snapshot beside the store at `store`, if it holds for `journal` (the store as read now), its
/// whole engine decoded: what a writer starts from.
pub fn load(store: &Path, journal: JournalRef) -> Result<Snapshot, Unused> {
    let bytes = read_file(store)?;
    let s = checked(&bytes, journal)?;
    let engine = tclab_core::Engine::from_snapshot(s.engine).map_err(Unused::Undecodable)?;
    Ok(Snapshot {
        journal_len: s.journal_len,
        journal_records: s.journal_records,
        engine,
    })
}

/// Whether the snapshot beside `store` holds for `journal` (every check of [`load`]), its engine
/// left undecoded: what a compaction asks of it.
pub fn holds(store: &Path, journal: JournalRef) -> bool {
    read_file(store).is_ok_and(|bytes| checked(&bytes, journal).is_ok())
}

/// [`load`] for a read of `scope`, the engine decoded for that call alone: a qdisc or class listing's
/// without its filters, which that call's replay skips too ([`crate::store::ReadScope`]); a filter
/// listing's without the class trees when no record follows the snapshot and the listing's parent
/// is found without them ([`tclab_core::snapshot::FilterListing`]).
pub fn load_to_read(
    store: &Path,
    journal: JournalRef,
    scope: ReadScope,
) -> Result<Snapshot<Decoded>, Unused> {
    let bytes = read_file(store)?;
    load_bytes(&bytes, journal, scope)
}

/// The snapshot file's bytes: a regular file only — a device or FIFO in its place (a symlink to
/// /dev/zero, a review found) would be read for ever.
fn read_file(store: &Path) -> Result<Vec<u8>, Unused> {
    let path = path_for(store);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(Unused::Corrupt("not a regular file")),
        Err(_) => return Err(Unused::Missing),
    }
    std::fs::read(&path).map_err(|_| Unused::Missing)
}

fn load_bytes(
    bytes: &[u8],
    journal: JournalRef,
    scope: ReadScope,
) -> Result<Snapshot<Decoded>, Unused> {
    let s = checked(bytes, journal)?;
    let whole = || tclab_core::Engine::from_snapshot(s.engine);
    let engine = match scope {
        ReadScope::QdiscsAndClasses => Decoded::Engine(
            tclab_core::snapshot::without_filters(whole).map_err(Unused::Undecodable)?,
        ),
        // Classes left out only if no record after the snapshot is replayed onto the engine.
        ReadScope::Filters { dev, parent } if journal.len() == Some(s.journal_len) => {
            match tclab_core::snapshot::FilterListing::decode(s.engine, dev, Handle(parent))
                .map_err(Unused::Undecodable)?
            {
                Some(l) => Decoded::Listing(l),
                // A parent below the root: found only through the class trees.
                None => Decoded::Engine(whole().map_err(Unused::Undecodable)?),
            }
        }
        _ => Decoded::Engine(whole().map_err(Unused::Undecodable)?),
    };
    Ok(Snapshot {
        journal_len: s.journal_len,
        journal_records: s.journal_records,
        engine,
    })
}

/// Every check of the file and of the journal it stands for: its engine's bytes if they hold.
fn checked<'a>(bytes: &'a [u8], journal: JournalRef) -> Result<Snapshot<&'a [u8]>, Unused> {
    let corrupt = Unused::Corrupt;
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt("short"));
    };
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum"));
    }
    let mut f = Fields(body);
    if f.take(8) != Some(MAGIC) {
        return Err(corrupt("magic"));
    }
    if f.u32() != Some(VERSION) {
        return Err(corrupt("version"));
    }
    let build_len = f.u32().ok_or(corrupt("short"))? as usize;
    let build = f.take(build_len).ok_or(corrupt("short"))?;
    if build_id().is_none_or(|b| b.as_bytes() != build) {
        return Err(corrupt("another build"));
    }
    let journal_len = f.u64().ok_or(corrupt("short"))?;
    let journal_records = f.u64().ok_or(corrupt("short"))?;
    let journal_crc = f.u32().ok_or(corrupt("short"))?;
    let engine_len = f.u64().ok_or(corrupt("short"))?;
    if f.0.len() as u64 != engine_len {
        return Err(corrupt("length"));
    }
    if !journal.begins_with(journal_len, journal_crc) {
        return Err(Unused::Stale);
    }
    Ok(Snapshot {
        journal_len,
        journal_records,
        engine: f.0,
    })
}

/// Write the snapshot of `engine` for the journal at `store`, whose first `journal_len` bytes (read
/// back here: the caller holds the store's exclusive lock) hold `records` records and built it. An
/// engine that has no snapshot form removes any snapshot there is (it could only be stale). Temporary
/// files a killed writer left are removed first.
pub fn write(
    store: &Path,
    engine: &tclab_core::Engine,
    journal_len: u64,
    records: usize,
) -> Result<bool, String> {
    remove_leftovers(&path_for(store));
    renew(store, engine, journal_len, records)
}

/// Whether a read that found the snapshot unusable for `why` should write a fresh one
/// ([`renew`]): not when there is none (a policy without a snapshot form, or a small store), nor
/// when something other than a file stands in its place; for another build's only when that
/// snapshot was written before this build existed, so that two builds reading one store do not
/// each rewrite it at every call.
pub fn worth_renewing(store: &Path, why: &Unused) -> bool {
    match why {
        Unused::Missing | Unused::Corrupt("not a regular file") => false,
        Unused::Corrupt("another build") => {
            let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
            let exe = std::env::current_exe().ok();
            match (
                modified(&path_for(store)),
                exe.as_deref().and_then(modified),
            ) {
                (Some(snap), Some(exe)) => snap < exe,
                _ => false,
            }
        }
        _ => true,
    }
}

/// [`write`] by a read, under the store's shared lock, after it replayed every record because the
/// snapshot there was unusable ([`worth_renewing`]): without that, a rebuilt tclab replayed the
/// whole journal at every read until the next change.
///
/// Safe beside the other holders of the lock: they are readers too (a writer's exclusive lock
/// waits), so the journal's bytes cannot change under it, and any two readers that renew at once
/// write the same engine for the same bytes. Each writes its own temporary file and renames it
/// over `FILE.snap` (atomic: a reader loading the snapshot has the old file or the new one, never
/// a mix); the last rename stands, and a rename that fails changes nothing. Of the temporary
/// files killed processes left, it removes only those of processes that are gone
/// ([`remove_leftovers_of_the_gone`]): any other may be a live reader's, not yet renamed; the next
/// writer, alone under the exclusive lock, sweeps them all.
pub fn renew(
    store: &Path,
    engine: &tclab_core::Engine,
    journal_len: u64,
    records: usize,
) -> Result<bool, String> {
    let snap = path_for(store);
    let Ok(engine_bytes) = engine.snapshot() else {
        let _ = std::fs::remove_file(&snap);
        return Ok(false);
    };
    let journal = std::fs::read(store).map_err(|e| format!("{}: {e}", store.display()))?;
    let Some(covered) = usize::try_from(journal_len)
        .ok()
        .and_then(|n| journal.get(..n))
    else {
        return Ok(false);
    };
    let Some(bytes) = encode(&engine_bytes, covered, records as u64) else {
        return Ok(false);
    };
    remove_leftovers_of_the_gone(&snap);
    crate::store::write_atomically(&snap, &bytes)?;
    Ok(true)
}

/// Temporary files of snapshot writers that were killed (`.FILE.snap.PID.N.tmp`, as
/// [`crate::store::write_atomically`] names them): all of them, for a writer (no reader runs beside
/// its exclusive lock).
fn remove_leftovers(snap: &Path) {
    for (path, _) in leftovers(snap) {
        let _ = std::fs::remove_file(path);
    }
}

/// The temporary snapshot files beside `snap`, each with the process id its name gives (`None`
/// for a name that does not parse as a writer's).
fn leftovers(snap: &Path) -> Vec<(PathBuf, Option<u32>)> {
    let Some(name) = snap.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let prefix = format!(".{name}.");
    let dir = snap
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let n = e.file_name();
            let middle = n.to_str()?.strip_prefix(&prefix)?.strip_suffix(".tmp")?;
            let pid = middle.split_once('.').and_then(|(p, _)| p.parse().ok());
            Some((e.path(), pid))
        })
        .collect()
}

/// [`remove_leftovers`] for a reader under the shared lock, beside other readers that may be
/// writing their own temporary files: only a file whose writer is gone — its process id not ours
/// and not running, as `/proc` shows — and which this user owns (another user's processes may be
/// hidden from it: `hidepid`). Without `/proc` nothing is known to be gone and nothing is removed.
/// A process id reused since is taken as alive: the file stays for the next writer.
fn remove_leftovers_of_the_gone(snap: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::fs::metadata("/proc/self") else {
        return;
    };
    let ours = std::process::id();
    for (path, pid) in leftovers(snap) {
        let Some(pid) = pid.filter(|&p| p != ours) else {
            continue;
        };
        let owned = std::fs::symlink_metadata(&path).is_ok_and(|m| m.uid() == me.uid());
        if owned && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_bytes() -> Vec<u8> {
        let mut e = tclab_core::Engine::new();
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for c in [
            "qdisc add dev eth0 root handle 1: htb default 10",
            "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
        ] {
            assert_eq!(crate::run(&mut e, &w(c), 0).code, 0, "{c}");
        }
        e.snapshot().unwrap()
    }

    #[test]
    fn a_damaged_snapshot_is_never_used() {
        let journal = b"{\"tclab_store\":2}\n[\"tc\",\"qdisc\"]\n[\"tc\",\"class\"]\n";
        let engine = engine_bytes();
        let good = encode(&engine, journal, 2).unwrap();
        assert!(load_bytes(&good, JournalRef::Bytes(journal), ReadScope::Everything).is_ok());
        // The journal with more records after the covered ones: still valid (its tail is replayed).
        let mut longer = journal.to_vec();
        longer.extend_from_slice(b"[\"tc\",\"filter\"]\n");
        let mut snap = encode(&engine, journal, 2).unwrap();
        assert_eq!(
            load_bytes(&snap, JournalRef::Bytes(&longer), ReadScope::Everything)
                .unwrap()
                .journal_len,
            journal.len() as u64
        );
        // Every cut of the file (a write cut short) is refused.
        for n in 0..good.len() {
            assert!(
                load_bytes(
                    &good[..n],
                    JournalRef::Bytes(journal),
                    ReadScope::Everything
                )
                .is_err(),
                "cut at {n}"
            );
        }
        // Every single flipped byte is refused (the checksum covers the whole file).
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(
                load_bytes(&bad, JournalRef::Bytes(journal), ReadScope::Everything).is_err(),
                "byte {i}"
            );
        }
        // A journal whose first bytes changed (compacted, replaced) makes it stale, as does a shorter one.
        let mut other = journal.to_vec();
        other[20] = b'x';
        assert!(matches!(
            load_bytes(&good, JournalRef::Bytes(&other), ReadScope::Everything),
            Err(Unused::Stale)
        ));
        assert!(matches!(
            load_bytes(
                &good,
                JournalRef::Bytes(&journal[..journal.len() - 1]),
                ReadScope::Everything
            ),
            Err(Unused::Stale)
        ));
        // Another build's snapshot (its checksum made right again).
        let at = 8 + 4 + 4;
        snap[at] ^= 1;
        let n = snap.len() - 4;
        let crc = crc32fast::hash(&snap[..n]);
        snap[n..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            load_bytes(&snap, JournalRef::Bytes(journal), ReadScope::Everything),
            Err(Unused::Corrupt("another build"))
        ));
    }

    #[test]
    fn a_journal_file_is_checked_as_its_bytes() {
        // The file is read in 64 KiB pieces: a journal of several pieces, its last record straddling one.
        let mut journal = b"{\"tclab_store\":2}\n".to_vec();
        while journal.len() < 200_000 {
            journal.extend_from_slice(b"[\"tc\",\"class\",\"add\",\"dev\",\"eth0\"]\n");
        }
        let engine = engine_bytes();
        let good = encode(&engine, &journal, 2).unwrap();
        let path = std::env::temp_dir().join(format!("tclab-snap-file-{}", std::process::id()));
        let check = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            let by_file = load_bytes(&good, JournalRef::File(&f), ReadScope::Everything)
                .map(|s| s.journal_len);
            let by_bytes = load_bytes(&good, JournalRef::Bytes(bytes), ReadScope::Everything)
                .map(|s| s.journal_len);
            assert_eq!(by_file, by_bytes, "{} bytes", bytes.len());
            by_file
        };
        assert_eq!(check(&journal), Ok(journal.len() as u64));
        let mut longer = journal.clone();
        longer.extend_from_slice(b"[\"tc\",\"filter\"]\n");
        assert_eq!(check(&longer), Ok(journal.len() as u64));
        // One byte changed in the second piece, or the last one missing: stale either way.
        let mut other = journal.clone();
        other[70_000] ^= 1;
        assert_eq!(check(&other), Err(Unused::Stale));
        assert_eq!(check(&journal[..journal.len() - 1]), Err(Unused::Stale));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_snapshot_that_is_not_a_regular_file_is_not_read() {
        // A symlink to /dev/zero (endless) or a directory in the snapshot's place: passed over at once,
        // the journal replayed. Before, the read of /dev/zero never ended.
        let dir = std::env::temp_dir().join(format!("tclab-snap-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("store.json");
        std::os::unix::fs::symlink("/dev/zero", path_for(&store)).unwrap();
        let r = load(&store, JournalRef::Bytes(b"")).map(|s| s.journal_len);
        assert_eq!(r, Err(Unused::Corrupt("not a regular file")));
        std::fs::remove_file(path_for(&store)).unwrap();
        std::fs::create_dir(path_for(&store)).unwrap();
        let r = load(&store, JournalRef::Bytes(b"")).map(|s| s.journal_len);
        assert_eq!(r, Err(Unused::Corrupt("not a regular file")));
        let r = load(&dir.join("none.json"), JournalRef::Bytes(b"")).map(|s| s.journal_len);
        assert_eq!(r, Err(Unused::Missing));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_renewing_reader_removes_the_temporary_files_of_gone_processes_only() {
        // A reader killed mid-renewal leaves `.store.json.snap.PID.N.tmp`, a whole snapshot's size;
        // before, only the next writer removed it. A renewing reader now removes those of processes
        // that are gone, and keeps its own and a live process's (another reader, maybe still
        // writing it) and any name that gives no process.
        let dir = std::env::temp_dir().join(format!("tclab-snap-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = dir.join("store.json");
        let journal = b"{\"tclab_store\":2}\n[\"tc\",\"qdisc\"]\n";
        std::fs::write(&store, journal).unwrap();
        // A process that has exited and been reaped: its id names no process (unless reused).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        // N far above what this process's own writes number (its renewal writes `.{ours}.0.tmp` or so).
        let tmp = |who: &str| dir.join(format!(".store.json.snap.{who}.99999.tmp"));
        let live = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut live = Reaped(live);
        let names = [
            gone.to_string(),
            std::process::id().to_string(),
            live.0.id().to_string(),
            "x".to_string(),
        ];
        for n in &names {
            std::fs::write(tmp(n), b"half a snapshot").unwrap();
        }
        let mut e = tclab_core::Engine::new();
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            crate::run(&mut e, &w("qdisc add dev eth0 root pfifo"), 0).code,
            0
        );
        assert_eq!(renew(&store, &e, journal.len() as u64, 1), Ok(true));
        assert!(path_for(&store).is_file(), "the renewed snapshot");
        assert!(!tmp(&names[0]).exists(), "a gone process's file is removed");
        for n in &names[1..] {
            assert!(tmp(n).exists(), "{n}'s file is kept");
        }
        // A writer, alone under the exclusive lock, removes them all.
        let _ = live.0.kill();
        let _ = live.0.wait();
        assert_eq!(write(&store, &e, journal.len() as u64, 1), Ok(true));
        for n in &names {
            assert!(!tmp(n).exists(), "{n}'s file is removed by a writer");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A child killed when the test ends, even by a failed assertion.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_listing_decodes_the_engine_without_its_filters() {
        let mut e = tclab_core::Engine::new();
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for c in [
            "qdisc add dev eth0 root handle 1: htb default 10",
            "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit",
            "filter add dev eth0 parent 1: prio 1 protocol ip u32 match ip dst 10.0.0.1/32 flowid 1:10 action gact pass",
            "filter add dev eth0 parent 1:10 prio 2 protocol ip u32 match ip src 10.0.0.2/32 flowid 1:10",
        ] {
            assert_eq!(crate::run(&mut e, &w(c), 0).code, 0, "{c}");
        }
        let bytes = e.snapshot().unwrap();
        let show = |e: &mut tclab_core::Engine, c: &str| crate::run(e, &w(c), 0).stdout;
        let mut full = tclab_core::Engine::from_snapshot(&bytes).unwrap();
        let mut lean =
            tclab_core::snapshot::without_filters(|| tclab_core::Engine::from_snapshot(&bytes))
                .unwrap();
        for c in ["-s -d class show dev eth0", "-s -d qdisc show dev eth0"] {
            assert_eq!(show(&mut lean, c), show(&mut e, c), "{c}");
            assert_eq!(show(&mut full, c), show(&mut e, c), "{c}");
        }
        let filters = show(&mut e, "filter show dev eth0");
        assert!(filters.contains("flowid 1:10"), "{filters}");
        assert_eq!(show(&mut full, "filter show dev eth0"), filters);
        assert_eq!(show(&mut lean, "filter show dev eth0 parent 1:"), "");
        assert_eq!(show(&mut lean, "filter show dev eth0 parent 1:10"), "");
        // The skipping ends with the call: the next decode has its filters.
        let mut again = tclab_core::Engine::from_snapshot(&bytes).unwrap();
        assert_eq!(show(&mut again, "filter show dev eth0"), filters);
    }

    #[test]
    fn every_classful_kind_lists_its_filters_the_same_without_its_classes() {
        // A filter listing answered from the snapshot decoded without class trees (HTB's and
        // HFSC's classes, DRR's and QFQ's arenas skipped unread) prints what the whole engine
        // prints, for the root's block, a class's block, a class that does not exist and the
        // ingress block, under every kind that can be a root with classes; and asking it for a
        // class never panics (each kind keeps its classes' index by minor).
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let filter = |parent: &str, pref: u32, to: &str| {
            format!("filter add dev eth0 parent {parent} prio {pref} protocol ip u32 match ip dst 10.0.0.{pref}/32 flowid {to}")
        };
        let roots: &[&[&str]] = &[
            &["qdisc add dev eth0 root handle 1: htb default 10", "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit"],
            &["qdisc add dev eth0 root handle 1: hfsc default 10", "class add dev eth0 parent 1: classid 1:10 hfsc sc rate 1mbit ul rate 2mbit"],
            &["qdisc add dev eth0 root handle 1: drr", "class add dev eth0 parent 1: classid 1:10 drr quantum 1500"],
            &["qdisc add dev eth0 root handle 1: qfq", "class add dev eth0 parent 1: classid 1:10 qfq weight 10"],
            &["qdisc add dev eth0 root handle 1: cbq avpkt 1000 bandwidth 10mbit", "class add dev eth0 parent 1: classid 1:10 cbq rate 1mbit allot 1500 prio 5 bounded"],
            &["qdisc add dev eth0 root handle 1: prio bands 3"],
            &["qdisc add dev eth0 root handle 1: ets bands 3 strict 1"],
            &["qdisc add dev eth0 root handle 1: sfq"],
        ];
        for root in roots {
            let mut e = tclab_core::Engine::new();
            let mut lines: Vec<String> = root.iter().map(|l| l.to_string()).collect();
            let kind = root[0].split_whitespace().nth(7).unwrap();
            let classful = root.len() > 1;
            lines.push(filter("1:", 1, "1:10"));
            if classful {
                lines.push("qdisc add dev eth0 parent 1:10 handle 10: prio".into());
                lines.push(filter("10:", 3, "10:1"));
                if matches!(kind, "htb" | "hfsc" | "cbq") {
                    // These take filters on a class.
                    lines.push(filter("1:10", 2, "1:10"));
                }
            }
            lines.push("qdisc add dev eth0 ingress".into());
            lines.push(filter("ffff:", 4, "1:10"));
            for c in &lines {
                let r = crate::run(&mut e, &argv(c), 0);
                assert_eq!(r.code, 0, "{kind}: {c}: {}", r.stderr);
            }
            let bytes = e.snapshot().unwrap();
            for read in [
                "filter show dev eth0",
                "-s -d filter show dev eth0 parent 1:",
                "-j -p filter show dev eth0 parent 1:10",
                "filter show dev eth0 parent 1:3",
                "filter show dev eth0 parent 1:99",
                "-s filter show dev eth0 root",
                "filter show dev eth0 ingress",
                "filter show dev eth1",
            ] {
                let read = w(read);
                let want = crate::run(&mut e, &read, 0);
                let call = [&["tc".to_string()][..], &read].concat();
                let ReadScope::Filters { dev, parent } = ReadScope::of(&call) else {
                    panic!("{read:?} is a filter listing");
                };
                let mut l = tclab_core::snapshot::FilterListing::decode(
                    &bytes,
                    dev,
                    tclab_core::Handle(parent),
                )
                .unwrap()
                .unwrap_or_else(|| panic!("{kind}: {read:?} answered without classes"));
                let got = crate::list_filters(&mut l, &read, 0);
                assert_eq!(
                    (&got.stdout, &got.stderr, got.code),
                    (&want.stdout, &want.stderr, want.code),
                    "{kind}: {read:?}"
                );
            }
            // The root block's filter is listed (the test lists something).
            let all = crate::run(&mut e, &w("filter show dev eth0"), 0).stdout;
            assert!(all.contains("0a000001"), "{kind}: {all}");
            // A qdisc under a class is found only through the class trees: decoded whole.
            assert!(tclab_core::snapshot::FilterListing::decode(
                &bytes,
                "eth0",
                tclab_core::Handle(0x10_0000)
            )
            .unwrap()
            .is_none());
        }
    }

    /// Words, and one argument between single quotes (an ematch expression, a bpf program).
    fn argv(s: &str) -> Vec<String> {
        s.split('\'')
            .enumerate()
            .flat_map(|(i, part)| match i % 2 {
                0 => part.split_whitespace().map(String::from).collect(),
                _ => vec![part.to_string()],
            })
            .collect()
    }

    /// Enqueue a packet from each of `sports` into the engine's `eth0` at `at` (with a launch time a
    /// millisecond later if `launch`, for etf) and dequeue every millisecond for a second: when each
    /// left and which, and the listings after, which print each kind's counters and state.
    fn through(
        e: &mut tclab_core::Engine,
        at: u64,
        sports: &[u16],
        launch: bool,
    ) -> (Vec<(u64, u32, u16)>, String) {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let dev = e.device_mut("eth0").unwrap();
        for &sport in sports {
            let mut cx = tclab_core::qdisc::Cx::new(at);
            let mut pkt =
                tclab_core::packet::Packet::udp4([10, 0, 0, 1], sport, [10, 0, 0, 2], 2, 0, 1000);
            if launch {
                pkt.tstamp = at + 1_000_000;
            }
            dev.enqueue(pkt, &mut cx);
        }
        let root = &e.device("eth0").unwrap().root().q;
        let kind = root.kind();
        assert_eq!(root.stats().qlen, sports.len() as u32, "{kind}: queued");
        assert!(e.snapshot().is_err(), "{kind} holding a packet");
        let mut out = Vec::new();
        for step in 0..1000 {
            // As qdisc_run does: dequeue until the qdisc has nothing to give now.
            let mut cx = tclab_core::qdisc::Cx::new(at + step * 1_000_000);
            while let Some(p) = e.device_mut("eth0").unwrap().root_mut().q.dequeue(&mut cx) {
                // The UDP source port after the 20-byte IP header: which flow left.
                out.push((step, p.len, u16::from_be_bytes([p.data[20], p.data[21]])));
            }
        }
        let mut shown = String::new();
        for c in ["-s -d qdisc show dev eth0", "-s -d class show dev eth0"] {
            shown += &crate::run(e, &w(c), 0).stdout;
        }
        (out, shown)
    }

    #[test]
    fn a_qdisc_holding_a_packet_has_no_snapshot() {
        // A snapshot never carries traffic: each kind with a form refuses while a packet is queued in
        // it (the store then replays), and has one again once it is empty. The engine it saves then,
        // after that traffic, passes the next packets as the engine it came from does: the same
        // packets out at the same times, the same counters and state in the listings.
        let to_class = "filter add dev eth0 parent 1: protocol all prio 1 matchall classid 1:1";
        for policy in [
            &["qdisc add dev eth0 root handle 1: netem delay 100ms"][..],
            &[
                "qdisc add dev eth0 root handle 1: drr",
                "class add dev eth0 parent 1: classid 1:1 drr",
                to_class,
            ],
            &[
                "qdisc add dev eth0 root handle 1: qfq",
                "class add dev eth0 parent 1: classid 1:1 qfq weight 10",
                to_class,
            ],
            &["qdisc add dev eth0 root handle 1: ets bands 3"],
            &["qdisc add dev eth0 root handle 1: red limit 100000 min 10000 max 30000 avpkt 1000 burst 20 bandwidth 10mbit"],
            &["qdisc add dev eth0 root handle 1: cake bandwidth 1mbit diffserv4"],
            &[
                "qdisc add dev eth0 root handle 1: hfsc default 1",
                "class add dev eth0 parent 1: classid 1:1 hfsc sc rate 1mbit ul rate 1mbit",
            ],
            &[
                "qdisc add dev eth0 root handle 1: cbq avpkt 1000 bandwidth 10mbit",
                "class add dev eth0 parent 1: classid 1:1 cbq rate 1mbit allot 1500 prio 5 bounded isolated",
                "qdisc add dev eth0 parent 1:1 handle 10: sfq perturb 10",
                "filter add dev eth0 parent 1: protocol ip prio 1 basic match 'cmp(u8 at 9 layer network eq 17)' flowid 1:1",
            ],
            &["qdisc add dev eth0 root handle 1: codel target 1ms interval 10ms ecn"],
            &["qdisc add dev eth0 root handle 1: fq_codel target 1ms interval 10ms quantum 300"],
            &["qdisc add dev eth0 root handle 1: fq maxrate 100kbit quantum 1514 initial_quantum 1514"],
            &["qdisc add dev eth0 root handle 1: fq_pie target 1ms tupdate 5ms"],
            &["qdisc add dev eth0 root handle 1: pie target 1ms tupdate 5ms"],
            &["qdisc add dev eth0 root handle 1: choke limit 100 bandwidth 10mbit min 2 max 6 avpkt 1000 burst 4"],
            &["qdisc add dev eth0 root handle 1: sfb rehash 100 db 10 target 1 max 1 increment 0.1"],
            &[
                "qdisc add dev eth0 root handle 1: gred setup vqs 4 default 0",
                "qdisc change dev eth0 root handle 1: gred limit 60KB min 1500 max 4500 avpkt 1000 burst 2 bandwidth 10mbit DP 0 probability 0.5",
            ],
            &["qdisc add dev eth0 root handle 1: cbs idleslope 1000 sendslope -9000 hicredit 1500 locredit -1500"],
            &["qdisc add dev eth0 root handle 1: etf clockid CLOCK_TAI delta 300000 skip_sock_check"],
            &["qdisc add dev eth0 root handle 1: hhf admit_bytes 1500 hh_limit 10"],
            &[
                "qdisc add dev eth0 root handle 1: plug limit 10000",
                "qdisc change dev eth0 root handle 1: plug release_indefinite",
            ],
            &["qdisc add dev eth0 root handle 1: skbprio limit 10"],
            &["qdisc add dev eth0 root handle 1: pfifo_head_drop limit 5"],
        ] {
            let mut e = tclab_core::Engine::new();
            for c in policy {
                let r = crate::run(&mut e, &argv(c), 0);
                assert_eq!(r.code, 0, "{c}: {}", r.stderr);
            }
            assert!(e.snapshot().is_ok(), "{policy:?} empty");
            let launch = policy[0].contains(" etf ");
            let (first, _) = through(&mut e, 0, &[1], launch);
            assert_eq!(first.len(), 1, "{policy:?}: the packet left: {first:?}");
            let saved = e.snapshot();
            assert!(saved.is_ok(), "{policy:?} emptied: {saved:?}");
            let mut back = tclab_core::Engine::from_snapshot(&saved.unwrap()).unwrap();
            // Right after the first packet left: what it left behind (rates, idle times, deficits)
            // decides when the next ones go.
            let at = first[0].0 * 1_000_000 + 1_000_000;
            let want = through(&mut e, at, &[1, 2, 3], launch);
            let got = through(&mut back, at, &[1, 2, 3], launch);
            assert_eq!(got, want, "{policy:?}: restored after traffic");
            assert_eq!(want.0.len(), 3, "{policy:?}: the packets left: {want:?}");
        }
    }

    #[test]
    fn an_idle_hhf_saves_no_counters() {
        // HHF's 4 × 1 024 counters and valid bits are all zero until a packet passes (as in a store):
        // saved whole they were 9.4 KB a qdisc (a review: 100 HHF leaves, a 943 KB snapshot).
        let size = |lines: &[&str]| {
            let mut e = tclab_core::Engine::new();
            for c in lines {
                let r = crate::run(&mut e, &argv(c), 0);
                assert_eq!(r.code, 0, "{c}: {}", r.stderr);
            }
            e.snapshot().unwrap().len()
        };
        let base = size(&["qdisc add dev eth0 root handle 1: pfifo"]);
        let hhf = size(&["qdisc add dev eth0 root handle 1: hhf"]);
        // What is left is a byte for each of the 1 024 empty heavy-hitter lists, and the parameters.
        assert!(hhf < base + 2048, "an idle HHF costs {} bytes", hhf - base);
    }

    #[test]
    fn filters_and_actions_classify_the_same_after_a_snapshot() {
        // Every classifier kind and the actions that rewrite packets, restored from a snapshot taken
        // after traffic: the same packets go to the same classes with the same bytes, and every
        // counter (filters', actions', classes') reads the same. The flow classifier's perturbed
        // hash (its generator and next perturbation) and basic's ematch must come back exactly.
        let policy = [
            "qdisc add dev eth0 root handle 1: prio bands 3",
            "filter add dev eth0 parent 1: prio 1 protocol ip flower ip_proto udp dst_port 7 classid 1:1 action pedit ex munge ip ttl set 9 pipe action csum ip4h and udp",
            "filter add dev eth0 parent 1: prio 2 protocol ip u32 match ip dport 8 0xffff flowid 1:2 action nat egress 10.0.0.1 192.0.2.1",
            "filter add dev eth0 parent 1: prio 3 protocol ip route to 5 classid 1:3",
            "filter add dev eth0 parent 1: prio 4 protocol ip bpf bytecode '1,6 0 0 0' classid 1:3",
            "filter add dev eth0 parent 1: handle 1 prio 5 protocol ip cgroup match 'cmp(u8 at 9 layer network eq 17)' action pass",
            "filter add dev eth0 parent 1: prio 6 protocol ip basic match 'cmp(u16 at 2 layer transport eq 9)' classid 1:3 action vlan push id 5",
            "filter add dev eth0 parent 1: prio 7 protocol ip handle 1 flow hash keys src,dst,proto-src,proto-dst divisor 3 perturb 1 baseclass 1:1",
            // Tunnel options in the key and the mask (saved up to their last byte that is not zero).
            "filter add dev eth0 parent 1: prio 8 protocol ip flower geneve_opts 0102:80:00800000/ffff:ff:ffff0000 classid 1:2",
        ];
        let mut e = tclab_core::Engine::new();
        for c in policy {
            let r = crate::run(&mut e, &argv(c), 0);
            assert_eq!(r.code, 0, "{c}: {}", r.stderr);
        }
        // Packets to ports 7, 8, 9 and others, from several source ports, sent at `at`: what left
        // each band, byte for byte.
        let send = |e: &mut tclab_core::Engine, at: u64| {
            let mut out = Vec::new();
            for sport in 1..=6u16 {
                for dport in 6..=10u16 {
                    let dev = e.device_mut("eth0").unwrap();
                    let mut cx = tclab_core::qdisc::Cx::new(at);
                    let pkt = tclab_core::packet::Packet::udp4(
                        [10, 0, 0, 1],
                        sport,
                        [10, 0, 0, 2],
                        dport,
                        0,
                        100,
                    );
                    dev.enqueue(pkt, &mut cx);
                }
            }
            let mut cx = tclab_core::qdisc::Cx::new(at);
            while let Some(p) = e.device_mut("eth0").unwrap().root_mut().q.dequeue(&mut cx) {
                out.push((p.data.clone(), p.len));
            }
            let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
            let mut shown = String::new();
            for c in [
                "-s filter show dev eth0",
                "-s class show dev eth0",
                "-s qdisc show dev eth0",
            ] {
                shown += &crate::run(e, &w(c), 0).stdout;
            }
            (out, shown)
        };
        let (first, shown) = send(&mut e, 1_000_000_000);
        assert_eq!(first.len(), 30, "every packet left");
        for what in [
            "pedit",
            "nat",
            "csum",
            "vlan",
            "flower",
            "flow",
            "basic",
            "bpf",
            "route",
            "cgroup",
            "geneve_opts 0102:80:00800000/ffff:ff:ffff0000",
        ] {
            assert!(shown.contains(what), "{what} in {shown}");
        }
        let mut back = tclab_core::Engine::from_snapshot(&e.snapshot().unwrap()).unwrap();
        // Before and after the flow classifier's next perturbation (a second after the last).
        for at in [1_500_000_000, 3_000_000_000] {
            let (want, got) = (send(&mut e, at), send(&mut back, at));
            assert_eq!(got, want, "at {at}");
        }
    }
}
