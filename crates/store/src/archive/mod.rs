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

mod appender;
mod lines;
#[cfg(test)]
mod tests;

pub use appender::Appender;
pub(crate) use appender::open_locked;
use lines::Occurrences;
pub use lines::{DayParse, parse_day, parse_on, render_line};

use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::{Problem, Root, content_hash, visible_controls};

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

#[cfg(any(test, feature = "testkit"))]
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

/// A fact to be appended. An unknown field is refused (a misspelt `source` is not dropped
/// silently, and no field can name another space).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// Append facts to their day files. `now` gives the default date and the `HH:MM` stamp. (Tests
/// and benches; memfold itself appends through an [`Appender`].)
#[cfg(any(test, feature = "testkit"))]
pub fn append(root: &Root, facts: &[NewFact], now: chrono::NaiveDateTime) -> Result<Vec<Fact>, ArchiveError> {
    Appender::default().append(root, facts, now)
}
