//! Appending facts: one write and one fsync per batch under the day file's lock, remembering
//! the day files it appended to so the next batch reads only what others added.

use super::*;
use crate::Root;
use chrono::NaiveDate;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};

/// Appends facts to their day files, remembering between calls what it has read of each day
/// file, so a long-running writer (the daemon) does not re-read and re-parse the whole day for
/// every append. Per day it keeps the id state and the file's identity as its own last write
/// left it (device, inode, length, modification time, taken under the file lock). When the
/// file is no longer exactly that (another process appended, a person edited or replaced it),
/// the whole file is read again, as a new `Appender` does, so the ids are the same either way.
#[derive(Debug, Default)]
pub struct Appender {
    days: HashMap<NaiveDate, DayState>,
}

/// Days an [`Appender`] remembers; more are forgotten (and re-read when appended to again).
const APPENDER_DAYS: usize = 4;

#[derive(Debug)]
struct DayState {
    occ: Occurrences,
    /// Newlines in the file.
    lines: usize,
    /// Whether the file is non-empty and does not end with a newline.
    open_line: bool,
    stamp: FileStamp,
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    dev_ino: (u64, u64),
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            dev_ino: (meta.dev(), meta.ino()),
        }
    }
}

impl DayState {
    /// The state of a day file as it is, read through `file` (locked, stamped `stamp`).
    fn read(file: &mut std::fs::File, date: NaiveDate, rel: &str, stamp: FileStamp) -> std::io::Result<DayState> {
        let mut existing = String::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_string(&mut existing)?;
        let mut parsed = DayParse::default();
        let (_, _) = parse_on(date, &existing, rel, &mut parsed);
        Ok(DayState {
            occ: parsed.occ,
            lines: existing.matches('\n').count(),
            open_line: !existing.is_empty() && !existing.ends_with('\n'),
            stamp,
        })
    }
}

impl Appender {
    /// Read `date`'s day file now, as the first append to it would (a daemon does this for
    /// today's file before it answers, so its first posted fact does not wait for a read of
    /// the whole day). Nothing to do when the file does not exist yet.
    pub fn prime(&mut self, root: &Root, date: NaiveDate) -> Result<(), ArchiveError> {
        let path = root.archive_file(date);
        if !path.exists() {
            return Ok(());
        }
        let rel = root.relative(&path);
        let io = |source| ArchiveError::Io { path: rel.clone(), source };
        let mut file = open_locked(&path).map_err(io)?;
        let stamp = FileStamp::of(&file.metadata().map_err(io)?);
        let day = DayState::read(&mut file, date, &rel, stamp).map_err(io)?;
        file.unlock().map_err(io)?;
        if self.days.len() >= APPENDER_DAYS {
            self.days.clear();
        }
        self.days.insert(date, day);
        Ok(())
    }

    /// Append `facts` to their day files, one write and one fsync per day under its lock; `now`
    /// gives the default date and the `HH:MM` stamp.
    pub fn append(
        &mut self,
        root: &Root,
        facts: &[NewFact],
        now: chrono::NaiveDateTime,
    ) -> Result<Vec<Fact>, ArchiveError> {
        check_new(facts, usize::MAX)?;
        // Group by day, remembering each fact's place so callers see them in the order given.
        let mut by_day: Vec<(NaiveDate, Vec<usize>)> = Vec::new();
        for (i, fact) in facts.iter().enumerate() {
            let date = fact.date.unwrap_or(now.date());
            match by_day.iter_mut().find(|(d, _)| *d == date) {
                Some((_, group)) => group.push(i),
                None => by_day.push((date, vec![i])),
            }
        }
        if self.days.len() + by_day.len() > APPENDER_DAYS {
            self.days.retain(|day, _| by_day.iter().any(|(d, _)| d == day));
        }
        let time = now.format("%H:%M").to_string();
        let mut placed: Vec<Option<Fact>> = vec![None; facts.len()];
        for (date, group) in by_day {
            let new: Vec<&NewFact> = group.iter().map(|&i| &facts[i]).collect();
            for (i, fact) in group.into_iter().zip(self.append_day(root, date, &new, &time)?) {
                placed[i] = Some(fact);
            }
        }
        Ok(placed.into_iter().flatten().collect())
    }

    fn append_day(
        &mut self,
        root: &Root,
        date: NaiveDate,
        group: &[&NewFact],
        time: &str,
    ) -> Result<Vec<Fact>, ArchiveError> {
        let path = root.archive_file(date);
        let rel = root.relative(&path);
        let io = |source| ArchiveError::Io { path: rel.clone(), source };
        crate::sys::access::create_dir(&root.archive_dir()).map_err(io)?;
        let mut file = open_locked(&path).map_err(io)?;
        let stamp = FileStamp::of(&file.metadata().map_err(io)?);
        let mut day = match self.days.remove(&date).filter(|day| day.stamp == stamp) {
            Some(day) => day,
            None => DayState::read(&mut file, date, &rel, stamp).map_err(io)?,
        };
        let mut out = String::new();
        if stamp.len == 0 {
            out.push_str(&format!("# {date}\n\n"));
        } else if day.open_line {
            out.push('\n');
        }
        let first_line = day.lines + out.matches('\n').count() + 1;
        let mut facts = Vec::with_capacity(group.len());
        for (i, new) in group.iter().enumerate() {
            let text = stored_text(&new.text);
            let src = new.source.as_deref().map(stored_text).filter(|s| !s.is_empty());
            let fact = Fact {
                id: day.occ.next_id(date, &text),
                date,
                time: Some(time.to_string()),
                text,
                src,
                line: first_line + i,
                edited: false,
            };
            out.push_str(&render_line(&fact));
            facts.push(fact);
        }
        file.write_all(out.as_bytes()).map_err(io)?;
        file.sync_data().map_err(io)?;
        // Only a complete write is remembered; after an error the next append reads the file.
        day.stamp = FileStamp::of(&file.metadata().map_err(io)?);
        day.lines += out.matches('\n').count();
        day.open_line = false;
        file.unlock().map_err(io)?;
        self.days.insert(date, day);
        Ok(facts)
    }
}

/// Open a day file for appending and take its lock, as the file at `path` is once the lock is
/// held: a sync may replace a day file (under its lock) while this waits for it, and an
/// append to the file it replaced would be lost.
pub(crate) fn open_locked(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    loop {
        let file = crate::sys::access::open_append(path)?;
        file.lock()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let (held, now) = (file.metadata()?, std::fs::metadata(path));
            if now.is_ok_and(|now| now.ino() != held.ino() || now.dev() != held.dev()) {
                continue; // replaced while we waited: lock the file that is there now
            }
        }
        return Ok(file);
    }
}
