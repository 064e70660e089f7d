//! The use table `.memfold/uses.tsv`: when each entry was last recalled and how often, kept
//! beyond the recall log's window (decay by use reads it: search ranking and `sweep --stale`).
//!
//! It is derived from the recall log and nothing else: the log's records are folded into it
//! (at most every [`FOLD_EVERY`] by the searches that append to the log, always before the log
//! drops records past its window, and in memory by every exact read, [`Uses::current`]). It
//! notes how many bytes of the log it holds and a hash of the log's first line, so a fold reads
//! only what was appended since, and a log rewritten under it is read again from the start.
//! Deleting the table rebuilds it from the log on the next fold: uses older than the log's
//! window are then forgotten, which can only make an entry look less used, never cost a fact.
//!
//! The file is text a search reads fast (at 100k entries, a few ms): a comment, a line
//! `@<TAB>offset<TAB>head`, then a line per entry, `id<TAB>last recall (unix seconds)<TAB>recalls`.
//! A line that does not read so is skipped.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::state::Recall;
use super::{Root, content_hash};

/// How stale the table may get before a search that appends to the log folds it.
pub const FOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// One entry's use: the last time a search returned it, and how many times one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Use(pub DateTime<Utc>, pub u64);

/// The first line of the file.
const COMMENT: &str = "# memfold's use table: entry, last recall (unix seconds), recalls; derived from recall.jsonl";

/// The table: uses by entry id, and how much of the log it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Uses {
    /// Bytes of the recall log folded in.
    offset: u64,
    /// Hash of the log's first line when it was folded.
    head: String,
    pub ids: BTreeMap<String, Use>,
}

impl Uses {
    pub fn path(root: &Root) -> PathBuf {
        root.state_dir().join("uses.tsv")
    }

    /// The table as saved (empty when missing or unreadable: the next fold rebuilds it).
    pub fn load(root: &Root) -> Uses {
        let text = std::fs::read_to_string(Uses::path(root)).unwrap_or_default();
        let mut uses = Uses::default();
        for line in text.lines() {
            let mut cols = line.split('\t');
            match (cols.next(), cols.next(), cols.next()) {
                (Some("@"), Some(offset), Some(head)) => {
                    uses.offset = offset.parse().unwrap_or(0);
                    uses.head = head.to_string();
                }
                (Some(id), Some(secs), Some(count)) => {
                    let time = secs.parse().ok().and_then(|s| DateTime::from_timestamp(s, 0));
                    if let (Some(time), Ok(count)) = (time, count.parse()) {
                        uses.ids.insert(id.to_string(), Use(time, count));
                    }
                }
                _ => {}
            }
        }
        uses
    }

    /// The last recall of each entry as saved, in unix seconds: what a search ranks with, read
    /// without building the whole table.
    pub fn last_seen(root: &Root) -> HashMap<String, i64> {
        let text = std::fs::read_to_string(Uses::path(root)).unwrap_or_default();
        let mut out = HashMap::with_capacity(text.len() / 24);
        for line in text.lines().skip_while(|l| l.starts_with('#') || l.starts_with("@\t")) {
            let mut cols = line.split('\t');
            if let (Some(id), Some(Ok(secs))) = (cols.next(), cols.next().map(str::parse::<i64>)) {
                out.insert(id.to_string(), secs);
            }
        }
        out
    }

    /// The table with every record of the log folded in, without saving it.
    pub fn current(root: &Root) -> Uses {
        let mut uses = Uses::load(root);
        uses.fold(root);
        uses
    }

    /// Save the table (atomically).
    pub fn save(&self, root: &Root) -> Result<(), super::atomic::WriteError> {
        use std::fmt::Write;
        let mut text = String::with_capacity(64 + self.ids.len() * 32);
        let _ = writeln!(text, "{COMMENT}\n@\t{}\t{}", self.offset, self.head);
        for (id, used) in &self.ids {
            // An id with a tab or a line break would not read back; ids never hold one.
            if !id.contains(['\t', '\n', '\r']) {
                let _ = writeln!(text, "{id}\t{}\t{}", used.0.timestamp(), used.1);
            }
        }
        super::atomic::write_atomic(&Uses::path(root), text.as_bytes(), None)
    }

    /// Whether the saved table is older than [`FOLD_EVERY`] (or missing).
    pub fn due(root: &Root) -> bool {
        let modified = std::fs::metadata(Uses::path(root)).and_then(|m| m.modified());
        modified.map_or(true, |t| t.elapsed().map_or(true, |age| age >= FOLD_EVERY))
    }

    /// Fold in the log's records after what the table holds (whole lines only; a line that does
    /// not read as a record is skipped). Whether anything was read.
    pub fn fold(&mut self, root: &Root) -> bool {
        let Ok(mut file) = std::fs::File::open(root.recall()) else { return false };
        let len = file.metadata().map_or(0, |m| m.len());
        let head = first_line_hash(&mut file);
        if head != self.head || len < self.offset {
            // A log this table has not seen (rebuilt, rewritten or new): read from the start.
            self.offset = 0;
            self.head = head;
        }
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut rest = Vec::new();
        if file.take(len - self.offset).read_to_end(&mut rest).is_err() {
            return false;
        }
        let Some(end) = rest.iter().rposition(|b| *b == b'\n') else { return false };
        for line in rest[..end].split(|b| *b == b'\n') {
            if let Ok(record) = serde_json::from_slice::<Recall>(line) {
                self.note(&record.id, record.time);
            }
        }
        self.offset += end as u64 + 1;
        true
    }

    /// Count one use of `id` at `time`.
    fn note(&mut self, id: &str, time: DateTime<Utc>) {
        match self.ids.get_mut(id) {
            Some(used) => *used = Use(used.0.max(time), used.1 + 1),
            None => {
                self.ids.insert(id.to_string(), Use(time, 1));
            }
        }
    }

    /// After the log was rewritten with only records this table holds: hold all of it.
    pub fn holds_whole_log(&mut self, root: &Root) {
        let Ok(mut file) = std::fs::File::open(root.recall()) else { return };
        self.offset = file.metadata().map_or(0, |m| m.len());
        self.head = first_line_hash(&mut file);
    }
}

/// The hash of a file's first line (empty for an empty file), leaving the file at its start.
fn first_line_hash(file: &mut std::fs::File) -> String {
    let mut line = Vec::new();
    let read = std::io::BufReader::new(&mut *file).read_until(b'\n', &mut line);
    let _ = file.seek(SeekFrom::Start(0));
    match read {
        Ok(_) if !line.is_empty() => content_hash(&line),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::append_jsonl;

    fn recall(id: &str, days_ago: i64) -> Recall {
        Recall { id: id.into(), time: Utc::now() - chrono::Duration::days(days_ago), query: "q".into() }
    }

    #[test]
    fn folds_read_only_what_was_appended_and_a_new_log_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        append_jsonl(&root.recall(), &[recall("m-1", 3), recall("m-2", 2)]).unwrap();
        let mut uses = Uses::default();
        assert!(uses.fold(&root));
        assert!(!uses.fold(&root), "nothing new");
        append_jsonl(&root.recall(), &[recall("m-1", 1)]).unwrap();
        // A torn last line waits for the rest of it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.recall())
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"id\":\"m-3\""))
            .unwrap();
        uses.fold(&root);
        assert_eq!(uses.ids["m-1"].1, 2);
        assert!(uses.ids["m-1"].0 > uses.ids["m-2"].0);
        assert!(!uses.ids.contains_key("m-3"));
        uses.save(&root).unwrap();
        let seconds = |u: &Uses| -> Vec<(String, i64, u64)> {
            u.ids.iter().map(|(id, x)| (id.clone(), x.0.timestamp(), x.1)).collect()
        };
        let loaded = Uses::load(&root);
        assert_eq!((seconds(&loaded), loaded.offset, &loaded.head), (seconds(&uses), uses.offset, &uses.head));
        assert_eq!(Uses::last_seen(&root)["m-1"], uses.ids["m-1"].0.timestamp());
        // The log rewritten with other records: read from its start, the old uses kept.
        std::fs::write(root.recall(), "").unwrap();
        append_jsonl(&root.recall(), &[recall("m-4", 0)]).unwrap();
        uses.fold(&root);
        assert_eq!((uses.ids["m-1"].1, uses.ids["m-4"].1), (2, 1));
        // Deleted, the table is rebuilt from the log.
        std::fs::remove_file(Uses::path(&root)).unwrap();
        assert_eq!(Uses::current(&root).ids.keys().collect::<Vec<_>>(), ["m-4"]);
    }
}
