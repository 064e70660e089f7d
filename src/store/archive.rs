//! The append-only daily logs `archive/YYYY-MM-DD.md`: one fact per list item.
//!
//! A line memfold writes looks like
//! `- 14:03 Moved to Lisbon in October. <!--f {"id":"f-…","src":"chat","hash":"e0dd4929"}-->`.
//! The archive is read line by line: a fact is one line (its text has no line break), and its
//! comment is the last `<!--f ` on the line, whose JSON holds no `<` or `>`; so any text and
//! source read back exactly as written. `hash` is the start of the sha256 of the text: a line
//! whose text no longer matches it was edited in place, and is reported and flagged
//! ([`Fact::edited`]) so consolidation leaves it alone until a person resolves it. Lines
//! written before the hash existed have none and are trusted as before.
//!
//! A list item appended by hand without the comment is a fact too; its id is derived from
//! (date, text, occurrence of that text earlier in the day), the same rule memfold uses
//! when it writes one, so ids are stable across reads. Headings, blank lines and HTML
//! comments are ignored; any other line is reported with file and line and skipped. A line
//! memfold wrote is read even inside a comment a person left open, and the comment is reported:
//! an archived fact never drops out of sight silently.
//!
//! Appends take an exclusive lock on the day file (std `flock`), count earlier copies of
//! each text to derive ids, and write all new lines in one `write` followed by an fsync,
//! so concurrent appenders never interleave partial lines or lose a fact.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::{Problem, Root, comment_json, content_hash, visible_controls};

/// One archived fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub id: String,
    pub date: NaiveDate,
    /// `HH:MM` when the line carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// 1-based line in the day file.
    #[serde(skip)]
    pub line: usize,
    /// The text no longer matches the hash in the line's comment: edited in place after
    /// memfold wrote it. Reported by `verify`; consolidation leaves the fact alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
}

#[cfg(test)]
impl Fact {
    /// A fact as a test needs it: `text` archived on `date`, line 1, no source.
    pub fn sample(id: &str, date: &str, text: &str) -> Fact {
        Fact {
            id: id.into(),
            date: date.parse().unwrap(),
            time: None,
            text: text.into(),
            src: None,
            line: 1,
            edited: false,
        }
    }
}

/// A fact to be appended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewFact {
    pub text: String,
    #[serde(default)]
    pub date: Option<NaiveDate>,
    #[serde(default, alias = "src")]
    pub source: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    #[error("fact {index} is empty")]
    EmptyFact { index: usize },
    #[error("fact {index} has {bytes} bytes of {field}, more than ingest.max_fact_bytes = {max}; nothing was stored")]
    TooLong { index: usize, field: &'static str, bytes: usize, max: usize },
    #[error("fact {index} is dated {date}: a fact's day must fall in the years 1000 to 9999; nothing was stored")]
    DateOutOfRange { index: usize, date: NaiveDate },
    #[error("appending to {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// Everything read from the archive folder.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    /// All facts, by date then line.
    pub facts: Vec<Fact>,
    pub problems: Vec<Problem>,
}

/// Comment prefix of a fact line.
const FACT_COMMENT: &str = "<!--f ";

#[derive(Serialize, Deserialize)]
struct FactMeta {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    src: Option<String>,
    /// [`text_hash`] of the text as written; absent on lines older than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
}

/// The short hash an archive line carries of its text.
pub fn text_hash(text: &str) -> String {
    content_hash(text)[..8].to_string()
}

/// Check facts before anything is appended: each has text, and neither its text nor its
/// source is longer than `max_bytes` (`ingest.max_fact_bytes`) as stored. Every adapter that
/// takes facts (`memfold add`, `POST /facts`) calls this, so one refused fact stores nothing.
pub fn check_new(facts: &[NewFact], max_bytes: usize) -> Result<(), ArchiveError> {
    for (index, fact) in facts.iter().enumerate() {
        let text = stored_text(&fact.text);
        if text.is_empty() {
            return Err(ArchiveError::EmptyFact { index });
        }
        if let Some(date) = fact.date
            && !date_in_range(date)
        {
            return Err(ArchiveError::DateOutOfRange { index, date });
        }
        let source = fact.source.as_deref().map(stored_text).unwrap_or_default();
        for (field, value) in [("text", &text), ("source", &source)] {
            if value.len() > max_bytes {
                return Err(ArchiveError::TooLong { index, field, bytes: value.len(), max: max_bytes });
            }
        }
    }
    Ok(())
}

/// Whether a day may name a day file: years 1000 to 9999, so `archive/YYYY-MM-DD.md` has four
/// digits and no sign.
pub fn date_in_range(date: NaiveDate) -> bool {
    (1000..=9999).contains(&chrono::Datelike::year(&date))
}

/// A fact's text as read: one line, trimmed, inner whitespace collapsed.
pub fn clean_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A new fact's text (or source) as appended: [`clean_text`] with control characters made
/// visible ([`visible_controls`]). Lines written before keep what they hold, so they read and
/// verify as they always did.
pub fn stored_text(text: &str) -> String {
    visible_controls(&clean_text(text)).into_owned()
}

/// The id of the `occurrence`-th (0-based) copy of `text` on `date`.
pub fn fact_id(date: NaiveDate, text: &str, occurrence: usize) -> String {
    let hash = content_hash(format!("{date}\n{}\n{occurrence}", clean_text(text)));
    format!("f-{}", &hash[..12])
}

/// A list item's text without its marker, or None for lines that are not list items.
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None; // indented: a continuation or code, not a new item
    }
    ["- ", "* ", "+ "]
        .iter()
        .find_map(|m| t.strip_prefix(m))
        .or_else(|| (["-", "*", "+"].contains(&t.trim_end())).then_some(""))
}

/// Split a leading `HH:MM ` off an item.
fn split_time(item: &str) -> (Option<String>, &str) {
    let b = item.as_bytes();
    let is_time = b.len() >= 5
        && b[0].is_ascii_digit()
        && b[1].is_ascii_digit()
        && b[2] == b':'
        && b[3].is_ascii_digit()
        && b[4].is_ascii_digit()
        && (b.len() == 5 || b[5] == b' ');
    if is_time { (Some(item[..5].to_string()), item[5..].trim_start()) } else { (None, item) }
}

/// Counts texts already in a day file, so new ids continue the occurrence sequence.
#[derive(Debug, Default)]
struct Occurrences {
    by_text: HashMap<String, usize>,
    ids: HashSet<String>,
}

impl Occurrences {
    /// The id for the next copy of `text`, unique in this day.
    fn next_id(&mut self, date: NaiveDate, text: &str) -> String {
        let n = self.by_text.entry(clean_text(text)).or_insert(0);
        loop {
            let id = fact_id(date, text, *n);
            *n += 1;
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// Record a line that carries its own id.
    fn record(&mut self, text: &str, id: &str) {
        *self.by_text.entry(clean_text(text)).or_insert(0) += 1;
        self.ids.insert(id.to_string());
    }
}

/// Parse one day file. `file` names it in problems.
pub fn parse_day(date: NaiveDate, text: &str, file: &str) -> (Vec<Fact>, Vec<Problem>) {
    parse_on(date, text, file, &mut DayParse::default())
}

/// Where parsing the first lines of a day file left off: the ids and texts met, an HTML
/// comment still open, the lines read. [`parse_on`] parses the lines after them exactly as
/// [`parse_day`] would parse them in the whole file, without reading those lines again.
#[derive(Debug, Default)]
pub struct DayParse {
    occ: Occurrences,
    comment: Option<usize>,
    lines: usize,
}

/// Parse `text`, the lines of a day file that follow those `state` has read (from its start:
/// the whole file), and move `state` past them. `text` must start at the start of a line.
/// Problems of a comment still open are reported at the end of every call.
pub fn parse_on(date: NaiveDate, text: &str, file: &str, state: &mut DayParse) -> (Vec<Fact>, Vec<Problem>) {
    let mut facts = Vec::new();
    let mut problems = Vec::new();
    // A byte order mark some editors write is not text.
    let text = if state.lines == 0 { text.strip_prefix('\u{feff}').unwrap_or(text) } else { text };
    let (occ, first) = (&mut state.occ, state.lines);
    state.lines += text.matches('\n').count() + usize::from(!text.is_empty() && !text.ends_with('\n'));
    // The line an HTML comment still open was opened on.
    let comment = &mut state.comment;
    for (i, line) in text.lines().enumerate() {
        let lineno = first + i + 1;
        let trimmed = line.trim();
        if let Some(opened) = *comment {
            // A line memfold wrote is a fact, whatever a hand-written `<!--` before it left open.
            if !list_item(line).is_some_and(carries_fact_comment) {
                if trimmed.contains("-->") {
                    *comment = None;
                }
                continue;
            }
            problems.push(Problem::new(
                file,
                lineno,
                format!("the HTML comment opened on line {opened} is not closed before this fact; the fact is read and the comment ends here"),
            ));
            *comment = None;
        } else if trimmed.is_empty() || is_heading(trimmed) {
            continue;
        } else if trimmed.starts_with("<!--") {
            if !trimmed.contains("-->") {
                *comment = Some(lineno);
            }
            continue;
        }
        let Some(item) = list_item(line) else {
            problems.push(Problem::new(file, lineno, "not a list item; skipped (facts are `- text` lines)"));
            continue;
        };
        let (body, meta) = match item.rfind(FACT_COMMENT) {
            Some(at) if item.trim_end().ends_with("-->") => {
                let json = item[at + FACT_COMMENT.len()..].trim_end().trim_end_matches("-->");
                match serde_json::from_str::<FactMeta>(json) {
                    Ok(meta) if meta.id.starts_with("f-") => (&item[..at], Some(meta)),
                    Ok(meta) => {
                        problems.push(Problem::new(
                            file,
                            lineno,
                            format!("fact id {:?} does not start with f-; skipped", meta.id),
                        ));
                        continue;
                    }
                    Err(e) => {
                        problems.push(Problem::new(file, lineno, format!("broken fact comment ({e}); skipped")));
                        continue;
                    }
                }
            }
            _ => (item, None),
        };
        let (time, body) = split_time(body.trim());
        let text = clean_text(body);
        if text.is_empty() {
            problems.push(Problem::new(file, lineno, "empty fact; skipped"));
            continue;
        }
        let edited = meta.as_ref().and_then(|m| m.hash.as_deref()).is_some_and(|hash| hash != text_hash(&text));
        let (id, src) = match meta {
            Some(meta) if !occ.ids.contains(&meta.id) => {
                occ.record(&text, &meta.id);
                (meta.id, meta.src)
            }
            Some(meta) => {
                problems.push(Problem::new(
                    file,
                    lineno,
                    format!("fact id {} appears twice; this copy gets a derived id", meta.id),
                ));
                (occ.next_id(date, &text), meta.src)
            }
            None => (occ.next_id(date, &text), None),
        };
        if edited {
            problems.push(Problem::new(
                file,
                lineno,
                format!(
                    "fact {id} was edited in place: its text no longer matches the hash in its comment; \
                     consolidation leaves it alone until the text is put back or \"hash\" is removed from the comment"
                ),
            ));
        }
        facts.push(Fact { id, date, time, text, src, line: lineno, edited });
    }
    if let Some(opened) = *comment {
        problems.push(Problem::new(
            file,
            opened,
            "this HTML comment is never closed; every line after it is ignored (close it with `-->`)",
        ));
    }
    (facts, problems)
}

/// An ATX heading: one to six `#` and then a space or the end of the line.
fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && line[hashes..].chars().next().is_none_or(|c| c == ' ' || c == '\t')
}

/// Whether a list item ends in a fact comment memfold can read, i.e. memfold wrote it.
fn carries_fact_comment(item: &str) -> bool {
    let item = item.trim_end();
    item.ends_with("-->")
        && item.rfind(FACT_COMMENT).is_some_and(|at| {
            let json = item[at + FACT_COMMENT.len()..].trim_end_matches("-->");
            serde_json::from_str::<FactMeta>(json).is_ok_and(|meta| meta.id.starts_with("f-"))
        })
}

/// The date a day file is named for, if it is one.
pub fn day_of(path: &Path) -> Option<NaiveDate> {
    let name = path.file_name()?.to_str()?;
    NaiveDate::parse_from_str(name.strip_suffix(".md")?, "%Y-%m-%d").ok()
}

/// Read every day file under `archive/`, in date order.
pub fn read_all(root: &Root) -> Result<Archive, ArchiveError> {
    let dir = root.archive_dir();
    let read_err = |source| ArchiveError::Read { path: root.relative(&dir), source };
    let mut days = Vec::new();
    let mut archive = Archive::default();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(archive),
        Err(e) => return Err(read_err(e)),
    };
    for entry in entries {
        let path = entry.map_err(read_err)?.path();
        match day_of(&path) {
            Some(date) => days.push((date, path)),
            None if path.extension().is_some_and(|e| e == "md") => archive.problems.push(Problem::new(
                root.relative(&path),
                0,
                "not named YYYY-MM-DD.md; its facts are not read",
            )),
            None => {}
        }
    }
    days.sort();
    for (date, path) in days {
        let rel = root.relative(&path);
        let text = std::fs::read_to_string(&path).map_err(|source| ArchiveError::Read { path: rel.clone(), source })?;
        let (facts, problems) = parse_day(date, &text, &rel);
        archive.facts.extend(facts);
        archive.problems.extend(problems);
    }
    Ok(archive)
}

/// Read one day file; a missing file has no facts.
#[cfg(test)]
pub fn read_day(root: &Root, date: NaiveDate) -> Result<(Vec<Fact>, Vec<Problem>), ArchiveError> {
    let (text, rel) = read_day_text(root, date)?;
    Ok(parse_day(date, &text, &rel))
}

/// The text of one day file (empty when there is none) and its path relative to the root.
pub fn read_day_text(root: &Root, date: NaiveDate) -> Result<(String, String), ArchiveError> {
    let path = root.archive_file(date);
    let rel = root.relative(&path);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((text, rel)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((String::new(), rel)),
        Err(source) => Err(ArchiveError::Read { path: rel, source }),
    }
}

/// Render one fact line (with its newline).
pub fn render_line(fact: &Fact) -> String {
    let meta =
        comment_json(&FactMeta { id: fact.id.clone(), src: fact.src.clone(), hash: Some(text_hash(&fact.text)) });
    match &fact.time {
        Some(time) => format!("- {time} {} {FACT_COMMENT}{meta}-->\n", fact.text),
        None => format!("- {} {FACT_COMMENT}{meta}-->\n", fact.text),
    }
}

/// Append facts to their day files. `now` gives the default date and the `HH:MM` stamp. (Tests
/// and benches; memfold itself appends through an [`Appender`].)
#[cfg(any(test, feature = "testkit"))]
pub fn append(root: &Root, facts: &[NewFact], now: chrono::NaiveDateTime) -> Result<Vec<Fact>, ArchiveError> {
    Appender::default().append(root, facts, now)
}

/// Appends like [`append`], remembering between calls what it has read of each day file, so a
/// long-running writer (the daemon) does not re-read and re-parse the whole day for every
/// append. Per day it keeps the id state and the file's identity as its own last write left
/// it (device, inode, length, modification time, taken under the file lock). When the file is
/// no longer exactly that (another process appended, a person edited or replaced it), the
/// whole file is read again, as [`append`] always does, so the ids are the same either way.
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

impl Appender {
    /// As [`append`].
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
        let mut file = crate::sys::access::open_append(&path).map_err(io)?;
        file.lock().map_err(io)?;
        let stamp = FileStamp::of(&file.metadata().map_err(io)?);
        let mut day = match self.days.remove(&date).filter(|day| day.stamp == stamp) {
            Some(day) => day,
            None => {
                let mut existing = String::new();
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                file.read_to_string(&mut existing).map_err(io)?;
                let mut parsed = DayParse::default();
                let (_, _) = parse_on(date, &existing, &rel, &mut parsed);
                DayState {
                    occ: parsed.occ,
                    lines: existing.matches('\n').count(),
                    open_line: !existing.is_empty() && !existing.ends_with('\n'),
                    stamp,
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn now() -> chrono::NaiveDateTime {
        d("2026-11-22").and_hms_opt(14, 3, 0).unwrap()
    }

    fn new(text: &str) -> NewFact {
        NewFact { text: text.into(), ..Default::default() }
    }

    #[test]
    fn appended_lines_parse_back_identically() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let facts = vec![
            new("Moved to Lisbon in October."),
            NewFact { text: "Likes  \n green tea".into(), source: Some("chat --> 7".into()), date: None },
        ];
        let written = append(&root, &facts, now()).unwrap();
        assert_eq!(written[1].text, "Likes green tea");
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read, written);
        let text = std::fs::read_to_string(root.archive_file(d("2026-11-22"))).unwrap();
        assert!(text.starts_with("# 2026-11-22\n\n- 14:03 Moved to Lisbon in October. <!--f {\"id\":\"f-"), "{text}");
    }

    #[test]
    fn a_remembering_appender_writes_what_a_fresh_read_would() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let mut appender = Appender::default();
        let mut written = appender.append(&root, &[new("Likes tea"), new("Likes tea")], now()).unwrap();
        // Another writer appends behind the appender's back, by hand and without a newline.
        let path = root.archive_file(d("2026-11-22"));
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"- Likes tea").unwrap();
        drop(file);
        written.extend(appender.append(&root, &[new("Likes tea")], now()).unwrap());
        written.extend(appender.append(&root, &[new("Likes tea"), new("Has a cat")], now()).unwrap());
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read.len(), 6);
        let by_hand = read.iter().find(|f| f.time.is_none()).unwrap().clone();
        let mine: Vec<Fact> = read.into_iter().filter(|f| f.time.is_some()).collect();
        assert_eq!(mine, written, "ids and line numbers match a fresh read");
        assert!(written.iter().all(|f| f.id != by_hand.id));
        // A fresh appender continues the same sequence.
        let next = append(&root, &[new("Likes tea")], now()).unwrap();
        let again = Appender::default().append(&root, &[new("Likes tea")], now()).unwrap();
        assert_ne!(next[0].id, again[0].id);
        assert_eq!(read_day(&root, d("2026-11-22")).unwrap().0.len(), 8);
    }

    #[test]
    fn same_text_twice_gets_two_ids() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let a = append(&root, &[new("Likes tea")], now()).unwrap();
        let b = append(&root, &[new("Likes tea")], now()).unwrap();
        assert_ne!(a[0].id, b[0].id);
        assert_eq!(read_day(&root, d("2026-11-22")).unwrap().0.len(), 2);
    }

    #[test]
    fn hand_appended_lines_get_stable_ids() {
        let text = "# 2026-11-22\n\n- 09:00 Has a dog named Rex\n* Likes tea\n- Likes tea\n";
        let (a, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
        assert!(problems.is_empty());
        let (b, _) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
        assert_eq!(a, b);
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].time.as_deref(), Some("09:00"));
        assert_eq!(a[0].id, fact_id(d("2026-11-22"), "Has a dog named Rex", 0));
        assert_ne!(a[1].id, a[2].id);
    }

    #[test]
    fn hand_line_then_memfold_append_continue_the_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::create_dir_all(root.archive_dir()).unwrap();
        std::fs::write(root.archive_file(d("2026-11-22")), "- Likes tea").unwrap();
        let added = append(&root, &[new("Likes tea")], now()).unwrap();
        let (facts, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(facts.len(), 2);
        assert_eq!(facts[1], added[0]);
        assert_ne!(facts[0].id, facts[1].id);
    }

    #[test]
    fn malformed_lines_are_reported_and_skipped() {
        let text = "- Fine fact\nstray paragraph\n- Broken <!--f {\"id\":-->\n-  \n<!-- a\nnote -->\n- Also fine\n";
        let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
        assert_eq!(facts.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(), ["Fine fact", "Also fine"]);
        let places: Vec<_> = problems.iter().map(|p| p.line).collect();
        assert_eq!(places, [2, 3, 4]);
        assert!(problems[0].to_string().starts_with("archive/2026-11-22.md:2: "));
    }

    #[test]
    fn a_fact_written_after_an_unclosed_comment_is_read_and_the_comment_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        append(&root, &[new("Has a dog named Rex.")], now()).unwrap();
        let path = root.archive_dir().join("2026-11-22.md");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("<!-- todo: ask about the cat\n");
        std::fs::write(&path, text).unwrap();
        let written = append(&root, &[new("Has a cat named Miso."), new("Moved to Porto.")], now()).unwrap();
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert_eq!(
            read.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
            ["Has a dog named Rex.", "Has a cat named Miso.", "Moved to Porto."]
        );
        assert_eq!(read[1..], written[..]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].line, 5);
        assert!(problems[0].message.contains("line 4"), "{}", problems[0].message);
    }

    #[test]
    fn a_comment_that_never_closes_is_reported_with_what_it_hides() {
        let text = "- Kept\n<!-- draft\n- Hidden by hand\nmore words\n";
        let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
        assert_eq!(facts.len(), 1);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].line, 2);
        assert!(problems[0].message.contains("never closed"), "{}", problems[0].message);
        let closed = "<!-- a\n- commented out\n-->\n- Kept\n";
        let (facts, problems) = parse_day(d("2026-11-22"), closed, "archive/2026-11-22.md");
        assert_eq!(facts.len(), 1);
        assert!(problems.is_empty(), "{problems:?}");
    }

    /// Parsing a day file's new lines from where the old ones left off gives every fact what
    /// parsing the whole file gives it: ids of repeated texts, a copied id, an HTML comment left
    /// open across the cut, line numbers, a byte order mark at the start.
    #[test]
    fn parsing_on_from_a_cut_is_parsing_the_whole_file() {
        let date = d("2026-11-22");
        let mut written = String::from("\u{feff}# 2026-11-22\n\n");
        for text in ["Fed the cat", "Fed the cat", "Watered the ferns"] {
            let fact = Fact { id: fact_id(date, text, 0), date, time: None, text: text.into(), src: None, line: 0, edited: false };
            written.push_str(&render_line(&fact));
        }
        let copied = written.lines().nth(2).unwrap().to_string();
        let lines = [
            "- Fed the cat".to_string(),
            "<!-- a draft".to_string(),
            "- hidden by hand".to_string(),
            "-->".to_string(),
            copied,
            "- Fed the cat".to_string(),
            "<!-- left open".to_string(),
            "- also hidden".to_string(),
            "- Watered the ferns".to_string(),
        ];
        let text = format!("{written}{}\n", lines.join("\n"));
        let (whole, whole_problems) = parse_day(date, &text, "archive/2026-11-22.md");
        let line_starts: Vec<usize> = text.match_indices('\n').map(|(at, _)| at + 1).collect();
        for &cut in &line_starts {
            let mut state = DayParse::default();
            let (mut facts, _) = parse_on(date, &text[..cut], "archive/2026-11-22.md", &mut state);
            let (more, _) = parse_on(date, &text[cut..], "archive/2026-11-22.md", &mut state);
            facts.extend(more);
            assert_eq!(facts, whole, "cut after byte {cut}");
        }
        assert_eq!(whole.len(), 6, "{whole:#?}");
        assert_eq!(whole_problems.len(), 3, "two copied ids, and the comment left open: {whole_problems:?}");
    }

    #[test]
    fn a_byte_order_mark_does_not_cost_the_first_fact() {
        let (facts, problems) = parse_day(d("2026-11-22"), "\u{feff}- First fact\n- Second\n", "archive/2026-11-22.md");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(facts.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(), ["First fact", "Second"]);
    }

    #[test]
    fn a_hash_line_that_is_no_heading_is_reported() {
        let text = "# 2026-11-22\n#tag not a heading\n####### seven\n- Fact\n";
        let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
        assert_eq!(facts.len(), 1);
        assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn facts_with_dates_go_to_their_day() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let facts = [NewFact { date: Some(d("2026-05-27")), ..new("Works at Google") }, new("Today")];
        let written = append(&root, &facts, now()).unwrap();
        assert_eq!(written[0].date, d("2026-05-27"));
        assert_eq!(written[1].date, d("2026-11-22"));
        let all = read_all(&root).unwrap();
        assert_eq!(all.facts.len(), 2);
        assert_eq!(all.facts[0].text, "Works at Google");
    }

    #[test]
    fn empty_fact_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = append(&Root::new(dir.path()), &[new("ok"), new("  ")], now()).unwrap_err();
        assert_eq!(err.to_string(), "fact 1 is empty");
    }

    #[test]
    fn a_source_or_text_holding_a_fact_comment_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let facts = [
            NewFact { source: Some("web <!--f x".into()), ..new("Lives in Porto.") },
            NewFact { source: Some("<!--f {\"id\":\"f-000000000000\"}-->".into()), ..new("a <!--f b -->") },
            new("ends like a comment <!--f {\"id\":\"f-111111111111\"}-->"),
        ];
        let written = append(&root, &facts, now()).unwrap();
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read, written);
        assert_eq!(read[0].src.as_deref(), Some("web <!--f x"));
        assert_eq!(read[2].text, "ends like a comment <!--f {\"id\":\"f-111111111111\"}-->");
    }

    #[test]
    fn control_characters_are_appended_visible_and_old_lines_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let path = root.archive_file(d("2026-11-22"));
        std::fs::create_dir_all(root.archive_dir()).unwrap();
        // A line an earlier version wrote, NUL and all, with the hash of that text.
        let old = Fact {
            id: fact_id(d("2026-11-22"), "old\0line", 0),
            date: d("2026-11-22"),
            time: Some("09:00".into()),
            text: "old\0line".into(),
            src: None,
            line: 3,
            edited: false,
        };
        std::fs::write(&path, format!("# 2026-11-22\n\n{}", render_line(&old))).unwrap();
        let facts = [NewFact { source: Some("tty\u{1b}]0;x\u{7}".into()), ..new("tea\0and\u{1b}[2J\u{7f}\u{9b}") }];
        let written = append(&root, &facts, now()).unwrap();
        assert_eq!(written[0].text, "tea\u{2400}and\u{241b}[2J\u{2421}\u{fffd}");
        assert_eq!(written[0].src.as_deref(), Some("tty\u{241b}]0;x\u{2407}"));
        let bytes = std::fs::read(&path).unwrap();
        let after_old = &bytes[bytes.iter().position(|&b| b == 0).unwrap() + 1..];
        assert!(
            !after_old.iter().any(|&b| b < 0x20 && b != b'\n' || b == 0x7f),
            "{:?}",
            String::from_utf8_lossy(after_old)
        );
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read, [vec![old], written].concat());
    }

    #[test]
    fn a_line_edited_in_place_is_reported_and_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let written = append(&root, &[new("Lives in Porto."), new("Has a cat.")], now()).unwrap();
        let path = root.archive_file(d("2026-11-22"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("\"hash\":\"{}\"", text_hash("Lives in Porto."))), "{text}");
        std::fs::write(&path, text.replace("Porto", "Berlin")).unwrap();
        let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
        assert_eq!(
            (read[0].id.as_str(), read[0].text.as_str(), read[0].edited),
            (written[0].id.as_str(), "Lives in Berlin.", true)
        );
        assert!(!read[1].edited);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].to_string().starts_with(&format!(
                "archive/2026-11-22.md:3: fact {} was edited in place: its text no longer matches the hash",
                written[0].id
            )),
            "{}",
            problems[0]
        );
        // Removing the hash accepts the edit; a line without one was never checked.
        let accepted = std::fs::read_to_string(&path)
            .unwrap()
            .replace(&format!(",\"hash\":\"{}\"", text_hash("Lives in Porto.")), "");
        let (read, problems) = parse_day(d("2026-11-22"), &accepted, "archive/2026-11-22.md");
        assert!(problems.is_empty() && !read[0].edited, "{problems:?}");
        assert_eq!(read[0].id, written[0].id);
    }

    #[test]
    fn facts_over_the_limit_are_refused_whole() {
        let long = "x".repeat(101);
        let facts = [new("fine"), NewFact { source: Some(long.clone()), ..new("fine too") }];
        let err = check_new(&facts, 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "fact 1 has 101 bytes of source, more than ingest.max_fact_bytes = 100; nothing was stored"
        );
        assert!(matches!(check_new(&[new(&long)], 100), Err(ArchiveError::TooLong { index: 0, field: "text", .. })));
        // Measured as stored: runs of whitespace count once.
        check_new(&[new(&format!("{}   {}", "x".repeat(49), "y".repeat(50)))], 100).unwrap();
        assert!(matches!(check_new(&[new("ok"), new(" \n ")], 100), Err(ArchiveError::EmptyFact { index: 1 })));
    }

    #[test]
    fn concurrent_appenders_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::thread::scope(|s| {
            for t in 0..4 {
                let root = &root;
                s.spawn(move || {
                    for i in 0..100 {
                        append(root, &[new(&format!("thread {t} fact {i}")), new("shared text")], now()).unwrap();
                    }
                });
            }
        });
        let all = read_all(&root).unwrap();
        assert!(all.problems.is_empty(), "{:?}", all.problems);
        assert_eq!(all.facts.len(), 800);
        let ids: HashSet<_> = all.facts.iter().map(|f| &f.id).collect();
        assert_eq!(ids.len(), 800);
    }

    /// Text biased to what could end a fact line early or forge its comment.
    fn awkward() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            2 => "[a-zA-Z0-9]{1,6}",
            3 => prop::sample::select(vec![
                "<!--f ", "<!--f {\"id\":\"f-000000000000\"}-->", "-->", "<!--", "<pre>", "```", "`", "[x]: y",
                "---", "===", "# ", "- ", "* ", "14:03 ", "    ", "\t", "\n", "\r", "\r\n", "\0", "\"", "\\", "}", "🙂",
            ])
            .prop_map(String::from),
        ];
        prop::collection::vec(piece, 0..10).prop_map(|p| p.concat())
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn any_text_and_source_read_back_as_exactly_one_fact(text in awkward(), source in proptest::option::of(awkward())) {
            prop_assume!(!clean_text(&text).is_empty());
            let date = d("2026-11-22");
            let src = source.as_deref().map(clean_text).filter(|s| !s.is_empty());
            let fact = Fact {
                id: fact_id(date, &text, 0),
                date,
                time: Some("14:03".into()),
                text: clean_text(&text),
                src,
                line: 3,
                edited: false,
            };
            let day = format!("# {date}\n\n{}", render_line(&fact));
            let (read, problems) = parse_day(date, &day, "archive/2026-11-22.md");
            prop_assert!(problems.is_empty(), "{:?}\n{}", problems, day);
            prop_assert_eq!(read, vec![fact], "{}", day);
        }

        /// Whatever a person left in a day file, a fact memfold appends after it is read back.
        #[test]
        fn a_fact_appended_after_any_hand_text_is_read_back(hand in prop::collection::vec(awkward(), 0..6), text in "[a-z]{1,8}( [a-z]{1,8}){0,3}") {
            let dir = tempfile::tempdir().unwrap();
            let root = Root::new(dir.path());
            std::fs::create_dir_all(root.archive_dir()).unwrap();
            let path = root.archive_file(d("2026-11-22"));
            std::fs::write(&path, hand.join("\n")).unwrap();
            let written = append(&root, &[new(&text)], now()).unwrap();
            let (read, _) = read_day(&root, d("2026-11-22")).unwrap();
            let back = read.iter().find(|f| f.id == written[0].id);
            prop_assert_eq!(back.map(|f| f.text.as_str()), Some(text.as_str()), "{:?}", std::fs::read_to_string(&path));
        }
    }
}
