//! What the files of a root looked like: for each file, the size, modification time (ns),
//! inode and content hash seen just before it was read. The index keeps such a record of what
//! its rows were built from (`sources.json` beside the table), and `status` of what its counts
//! were derived from (`.memfold/status.json`).
//!
//! A refresh stats the files ([`Sources::look`]) and compares them with the record: files whose
//! stat is unchanged are not read at all, so an index that is up to date costs a `stat` per
//! file to confirm. Timestamps are coarse (a write can land in the same tick as the look that
//! saw the file before it), so a file modified within [`RACY`] of being seen is hashed again
//! whatever its stat says, as git treats "racily clean" entries. The record is written only
//! under the index writer lock, together with the sync of rows derived from files read after
//! the look: if a file changes in between, the record holds the older state and the next look
//! sees the change, so the record can be behind the index but never ahead of it.
//!
//! A file read again and found with its recorded content (its stat changed: copied, restored,
//! touched, saved unchanged; or it was racy when recorded) has its new stat taken into the
//! record ([`Sources::refreshed`]) at the next sync, or at once by a refresh that found nothing
//! else to do: otherwise every later look would read and hash it again (at 100k entries,
//! `memory.md` is 17 MB).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Root, content_hash};

/// How long after a file's modification time a stat may still miss a change to it.
pub const RACY: i128 = 2_000_000_000;

/// The files outside `archive/` whose content decides the rows (which facts are pending, and
/// the entries and history versions).
pub const SETTLING: [&str; 3] = ["consolidated/memory.md", "consolidated/history.md", ".memfold/tombstones.jsonl"];

/// What one file looked like.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub size: u64,
    pub mtime_ns: i128,
    pub inode: u64,
    /// Hex sha256 of the content.
    pub hash: String,
    /// When the file was stat'ed (ns since the epoch), before it was read.
    pub seen_ns: i128,
}

impl Seen {
    fn same_stat(&self, other: &Seen) -> bool {
        self.size == other.size && self.mtime_ns == other.mtime_ns && self.inode == other.inode
    }

    /// Modified so shortly before it was seen that a later write may have kept its stat.
    fn racy(&self) -> bool {
        self.mtime_ns > self.seen_ns - RACY
    }

    /// Whether `new` saw the same content under a stat that spares a later look a read.
    fn refreshed_by(&self, new: &Seen) -> bool {
        new.hash == self.hash && (!self.same_stat(new) || (self.racy() && !new.racy()))
    }
}

/// The source files of a root as seen at one moment, by path relative to the root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    pub files: BTreeMap<String, Seen>,
}

impl Sources {
    /// Stat every source file of `root` (the archive's `.md` files and [`SETTLING`]). A file
    /// whose stat equals its entry in `before` and was not racy then keeps that entry's hash
    /// without being read; any other file is read and hashed.
    pub fn look(root: &Root, before: Option<&Sources>) -> std::io::Result<Sources> {
        Sources::look_deferring(root, before, |_| false)
    }

    /// As [`Sources::look`], except that a file `defer` names whose stat changed is not read:
    /// its hash is left empty (so it counts as changed) for the caller, which reads it anyway,
    /// to fill in with [`Sources::set_read`] before the record is written. A day file that
    /// grew is then read and hashed once, not twice.
    pub fn look_deferring(
        root: &Root,
        before: Option<&Sources>,
        defer: impl Fn(&str) -> bool,
    ) -> std::io::Result<Sources> {
        let mut paths: Vec<(String, PathBuf)> =
            SETTLING.iter().map(|rel| (rel.to_string(), root.dir().join(rel))).collect();
        match std::fs::read_dir(root.archive_dir()) {
            Ok(entries) => {
                for entry in entries {
                    let path = entry?.path();
                    // Day files, and misnamed markdown files, whose presence is a problem.
                    if path.extension().is_some_and(|e| e == "md") {
                        paths.push((root.relative(&path), path));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut files = BTreeMap::new();
        for (rel, path) in paths {
            if let Some(seen) = see(&path, before.and_then(|b| b.files.get(&rel)), defer(&rel))? {
                files.insert(rel, seen);
            }
        }
        Ok(Sources { files })
    }

    /// What the caller read of a file [`Sources::look_deferring`] left unread: its length and
    /// hash (a file that grew between the look and the read is recorded as read; its newer
    /// stat then makes the next look read it again).
    pub fn set_read(&mut self, path: &str, size: u64, hash: String) {
        if let Some(seen) = self.files.get_mut(path) {
            seen.size = size;
            seen.hash = hash;
        }
    }

    /// Whether every file has its hash (none left for the caller to fill in).
    pub fn complete(&self) -> bool {
        self.files.values().all(|seen| !seen.hash.is_empty())
    }

    /// Paths whose content differs between the two (by hash), or that exist in only one.
    pub fn changed(&self, other: &Sources) -> Vec<String> {
        let mut out: Vec<String> = self
            .files
            .iter()
            .filter(|(path, seen)| other.files.get(*path).is_none_or(|o| o.hash != seen.hash))
            .map(|(path, _)| path.clone())
            .collect();
        out.extend(other.files.keys().filter(|p| !self.files.contains_key(*p)).cloned());
        out.sort();
        out
    }

    /// Whether the files that decide which facts are pending ([`SETTLING`]) are the same.
    pub fn same_settling(&self, other: &Sources) -> bool {
        SETTLING.iter().all(|p| self.files.get(*p).map(|s| &s.hash) == other.files.get(*p).map(|s| &s.hash))
    }

    /// This record with the stat of every file `newer` found with the same content taken from
    /// `newer`, where that spares a later look a read: the stat differs, or the entry here is
    /// racy and the one in `newer` is not. Content stays as recorded, so the rows it describes
    /// are still the rows built from these files.
    pub fn refreshed(mut self, newer: &Sources) -> Sources {
        for (path, seen) in &mut self.files {
            if let Some(new) = newer.files.get(path).filter(|new| seen.refreshed_by(new)) {
                *seen = new.clone();
            }
        }
        self
    }

    /// Whether [`Sources::refreshed`] would take anything from `newer`.
    pub fn refreshed_by(&self, newer: &Sources) -> bool {
        self.files.iter().any(|(path, seen)| newer.files.get(path).is_some_and(|new| seen.refreshed_by(new)))
    }

    /// This record with the entries of `paths` taken from `newer` (absent there: removed).
    pub fn merged(mut self, newer: &Sources, paths: &[String]) -> Sources {
        for path in paths {
            match newer.files.get(path) {
                Some(seen) => self.files.insert(path.clone(), seen.clone()),
                None => self.files.remove(path),
            };
        }
        self
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

/// Stat `path` and take its hash from `before` when the stat matches and was not racy, else
/// read it (or, with `defer`, leave the hash empty for the caller). `None` when the file does
/// not exist.
fn see(path: &Path, before: Option<&Seen>, defer: bool) -> std::io::Result<Option<Seen>> {
    let seen_ns = now_ns();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    let mut seen = Seen { size: meta.len(), mtime_ns, inode: meta.ino(), hash: String::new(), seen_ns };
    match before {
        Some(b) if b.same_stat(&seen) && !b.racy() => {
            seen.hash = b.hash.clone();
            seen.seen_ns = b.seen_ns;
        }
        // Racy with its stat unchanged: most likely unchanged, and cheaper to confirm here
        // than for the caller to parse and sync it again.
        Some(b) if defer && !b.same_stat(&seen) => {}
        None if defer => {}
        _ => match std::fs::read(path) {
            Ok(bytes) => seen.hash = content_hash(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        },
    }
    Ok(Some(seen))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        (dir, root)
    }

    #[test]
    fn an_unchanged_file_is_not_read_and_a_changed_one_is_found() {
        let (_dir, root) = root();
        let day = root.archive_dir().join("2026-11-25.md");
        std::fs::write(&day, "- one\n").unwrap();
        let first = Sources::look(&root, None).unwrap();
        assert!(first.files.contains_key("archive/2026-11-25.md"));
        assert!(Sources::look(&root, Some(&first)).unwrap().changed(&first).is_empty());

        // Same size, same second: only the content (and, on most file systems, the ns) differ.
        std::fs::write(&day, "- two\n").unwrap();
        let second = Sources::look(&root, Some(&first)).unwrap();
        assert_eq!(second.changed(&first), vec!["archive/2026-11-25.md".to_string()]);
    }

    #[test]
    fn a_racy_entry_is_hashed_again_even_when_its_stat_matches() {
        let (_dir, root) = root();
        let day = root.archive_dir().join("2026-11-25.md");
        std::fs::write(&day, "- one\n").unwrap();
        let mut record = Sources::look(&root, None).unwrap();
        // A record whose stat matches the file but whose hash is of other content: were the
        // stat trusted, the change would be missed.
        let seen = record.files.get_mut("archive/2026-11-25.md").unwrap();
        seen.hash = "other".into();
        assert!(seen.racy(), "written just now");
        assert_eq!(Sources::look(&root, Some(&record)).unwrap().changed(&record), vec!["archive/2026-11-25.md"]);

        // Seen long after the write, the stat is trusted and the file is not read.
        let seen = record.files.get_mut("archive/2026-11-25.md").unwrap();
        seen.seen_ns += 10 * RACY;
        assert!(Sources::look(&root, Some(&record)).unwrap().changed(&record).is_empty());
    }

    #[test]
    fn a_file_found_unchanged_under_a_new_stat_is_recorded_with_it() {
        let (_dir, root) = root();
        let day = root.archive_dir().join("2026-11-25.md");
        std::fs::write(&day, "- one\n").unwrap();
        let mut record = Sources::look(&root, None).unwrap();
        record.files.get_mut("archive/2026-11-25.md").unwrap().seen_ns += 10 * RACY;
        // Copied back over itself: a new inode and time, the same bytes.
        let copy = root.archive_dir().join("copy");
        std::fs::write(&copy, "- one\n").unwrap();
        std::fs::rename(&copy, &day).unwrap();
        let looked = Sources::look(&root, Some(&record)).unwrap();
        assert!(looked.changed(&record).is_empty());
        let old = &record.files["archive/2026-11-25.md"];
        let new = &looked.files["archive/2026-11-25.md"];
        assert!(!old.same_stat(new), "the look read the file again");
        assert!(record.refreshed_by(&looked));
        let refreshed = record.clone().refreshed(&looked);
        assert_eq!(&refreshed.files["archive/2026-11-25.md"], new);
        assert!(!refreshed.refreshed_by(&looked), "nothing left to take");

        // Other content is never taken: that is a change for a sync to make.
        std::fs::write(&day, "- two, longer\n").unwrap();
        let looked = Sources::look(&root, Some(&refreshed)).unwrap();
        assert_eq!(refreshed.clone().refreshed(&looked), refreshed);

        // A racy entry is replaced by one that is not; a racy one by another racy one is not.
        let mut racy = refreshed.clone();
        let entry = racy.files.get_mut("archive/2026-11-25.md").unwrap();
        entry.seen_ns = entry.mtime_ns;
        let mut later = racy.clone();
        later.files.get_mut("archive/2026-11-25.md").unwrap().seen_ns += 10 * RACY;
        assert_eq!(racy.clone().refreshed(&later), later);
        let mut soon = racy.clone();
        soon.files.get_mut("archive/2026-11-25.md").unwrap().seen_ns += 1;
        assert_eq!(racy.clone().refreshed(&soon), racy);
    }

    #[test]
    fn new_and_removed_files_count_as_changed_and_merge_takes_only_the_given_paths() {
        let (_dir, root) = root();
        std::fs::write(root.archive_dir().join("2026-11-24.md"), "- a\n").unwrap();
        let before = Sources::look(&root, None).unwrap();
        std::fs::write(root.archive_dir().join("2026-11-25.md"), "- b\n").unwrap();
        std::fs::remove_file(root.archive_dir().join("2026-11-24.md")).unwrap();
        std::fs::write(root.memory(), "changed\n").unwrap();
        let after = Sources::look(&root, Some(&before)).unwrap();
        let changed = after.changed(&before);
        assert_eq!(changed, vec!["archive/2026-11-24.md", "archive/2026-11-25.md", "consolidated/memory.md"]);
        assert!(!after.same_settling(&before));

        let merged = before.clone().merged(&after, &changed[..2]);
        assert!(!merged.files.contains_key("archive/2026-11-24.md"));
        assert!(merged.files.contains_key("archive/2026-11-25.md"));
        assert!(merged.same_settling(&before), "memory.md was not among the paths");
    }

    #[test]
    fn a_deferred_file_is_left_unread_for_the_caller_and_counts_as_changed() {
        let (_dir, root) = root();
        let day = root.archive_dir().join("2026-11-25.md");
        std::fs::write(&day, "- one\n").unwrap();
        std::fs::write(root.memory(), "m\n").unwrap();
        let before = Sources::look(&root, None).unwrap();
        std::fs::write(&day, "- one\n- two\n").unwrap();
        std::fs::write(root.memory(), "m2\n").unwrap();
        let mut seen = Sources::look_deferring(&root, Some(&before), |rel| rel.starts_with("archive/")).unwrap();
        assert_eq!(seen.files["archive/2026-11-25.md"].hash, "", "the day file is left for the caller");
        assert_eq!(seen.files["consolidated/memory.md"].hash, content_hash("m2\n"), "the rest is read");
        assert!(!seen.complete());
        assert_eq!(seen.changed(&before), vec!["archive/2026-11-25.md", "consolidated/memory.md"]);
        seen.set_read("archive/2026-11-25.md", 12, content_hash("- one\n- two\n"));
        assert!(seen.complete());
        let read = Sources::look(&root, Some(&before)).unwrap();
        let (a, b) = (&seen.files["archive/2026-11-25.md"], &read.files["archive/2026-11-25.md"]);
        assert_eq!((a.size, &a.hash, a.mtime_ns, a.inode), (b.size, &b.hash, b.mtime_ns, b.inode));
        // A file whose stat is unchanged is never deferred, racy or not.
        let again = Sources::look_deferring(&root, Some(&seen), |_| true).unwrap();
        assert!(again.complete());
    }
}
