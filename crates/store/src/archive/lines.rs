//! One day file's lines: read into facts (with their problems), and a fact written as a line.

use super::*;
use crate::{Problem, comment_json};
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

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
///
/// Texts and ids are kept as 64-bit keys, not as strings: a daemon keeps these counts for
/// today's file twice (its appender, its index catch-up), and at 100k facts in one day the
/// strings took about 20 MB each. A text key is a hash (two different texts of one day share
/// one with a chance of about 10⁻¹⁰ at 100k, and then only an occurrence number is skipped:
/// ids stay unique, and every reader in the process counts the same way); an id of the form
/// memfold writes (`f-` and 12 hex digits) is its own key.
#[derive(Debug, Default)]
pub(super) struct Occurrences {
    by_text: HashMap<u64, usize>,
    ids: HashSet<u64>,
}

/// The key of a (cleaned) text.
fn text_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The key of a fact id: its 48 bits for the ids memfold writes, a hash (with the top bit set,
/// so the two kinds never meet) for any other.
fn id_key(id: &str) -> u64 {
    match id.strip_prefix("f-") {
        Some(hex) if hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => {
            u64::from_str_radix(hex, 16).unwrap_or(0)
        }
        _ => text_key(id) | (1 << 63),
    }
}

impl Occurrences {
    /// The id for the next copy of `text`, unique in this day.
    pub(super) fn next_id(&mut self, date: NaiveDate, text: &str) -> String {
        let n = self.by_text.entry(text_key(&clean_text(text))).or_insert(0);
        loop {
            let id = fact_id(date, text, *n);
            *n += 1;
            if self.ids.insert(id_key(&id)) {
                return id;
            }
        }
    }

    /// Record a line that carries its own id.
    fn record(&mut self, text: &str, id: &str) {
        *self.by_text.entry(text_key(&clean_text(text))).or_insert(0) += 1;
        self.ids.insert(id_key(id));
    }

    fn has(&self, id: &str) -> bool {
        self.ids.contains(&id_key(id))
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
    pub(super) occ: Occurrences,
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
        let (body, meta) = match split_fact_comment(item) {
            Ok(split) => split,
            Err(problem) => {
                problems.push(Problem::new(file, lineno, problem));
                continue;
            }
        };
        let (time, body) = split_time(body.trim());
        let text = clean_text(body);
        if text.is_empty() {
            problems.push(Problem::new(file, lineno, "empty fact; skipped"));
            continue;
        }
        let edited = meta.as_ref().and_then(|m| m.hash.as_deref()).is_some_and(|hash| hash != text_hash(&text));
        let (id, src) = match meta {
            Some(meta) if !occ.has(&meta.id) => {
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

/// A list item's text and the fact comment memfold ended it with, if any; or why the line is
/// skipped (a comment that does not parse, or names no fact id).
fn split_fact_comment(item: &str) -> Result<(&str, Option<FactMeta>), String> {
    match item.rfind(FACT_COMMENT) {
        Some(at) if item.trim_end().ends_with("-->") => {
            let json = item[at + FACT_COMMENT.len()..].trim_end().trim_end_matches("-->");
            match serde_json::from_str::<FactMeta>(json) {
                Ok(meta) if meta.id.starts_with("f-") => Ok((&item[..at], Some(meta))),
                Ok(meta) => Err(format!("fact id {:?} does not start with f-; skipped", meta.id)),
                Err(e) => Err(format!("broken fact comment ({e}); skipped")),
            }
        }
        _ => Ok((item, None)),
    }
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

/// Render one fact line (with its newline).
pub fn render_line(fact: &Fact) -> String {
    let meta =
        comment_json(&FactMeta { id: fact.id.clone(), src: fact.src.clone(), hash: Some(text_hash(&fact.text)) });
    match &fact.time {
        Some(time) => format!("- {time} {} {FACT_COMMENT}{meta}-->\n", fact.text),
        None => format!("- {} {FACT_COMMENT}{meta}-->\n", fact.text),
    }
}
