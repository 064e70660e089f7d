//! Entry files (`consolidated/memory.md`, `consolidated/history.md`): parse and render, keeping bytes.
//!
//! An entry is a header comment followed by its content:
//!
//! ```text
//! <!--m {"id":"m-7f3a9c","first_seen":"2026-05-27","updated":"2026-05-30","sources":["f-…"]}-->
//! Currently works at Microsoft (since 2026-05). Previously worked at Google.
//! ```
//!
//! The file is read with pulldown-cmark, using source offsets. Top-level markdown blocks
//! that follow each other without a blank line form one run; a header comment starts a
//! new run. A run that starts with a header is that entry; a run without one (a
//! paragraph a person typed) is an entry too and gets a header the next time memfold
//! writes the file. Runs made only of headings, rules or ordinary HTML comments are kept
//! as they are and are not entries. A header whose JSON does not parse is reported, and
//! its run is kept as the content of a headerless entry.
//!
//! Every item remembers the exact bytes it came from, so rendering an unchanged file gives
//! it back byte for byte; only entries memfold changed or added are rendered anew.

use std::collections::BTreeMap;
use std::ops::Range;

use chrono::NaiveDate;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

use super::{Problem, comment_json, content_hash};

/// Comment prefix of an entry header.
const HEADER: &str = "<!--m ";

/// Why a version in `history.md` stopped being current.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HistoryStatus {
    /// A REPLACE gave the entry new content (`superseded_by` is the entry itself).
    Replaced,
    /// A REMOVE folded the entry into `superseded_by`.
    Merged,
    /// Forgotten, or deleted from `memory.md` by hand; its facts are tombstoned.
    Deleted,
    /// A version an undo took back.
    Reverted,
    /// A run's copy of a version an undo put back (the version is current again).
    Restored,
    /// Set aside by `memfold rebuild`.
    Rebuilt,
    /// A status this build does not know (written by a person or a newer memfold); kept as is.
    Other(String),
}

impl HistoryStatus {
    pub fn as_str(&self) -> &str {
        match self {
            HistoryStatus::Replaced => "replaced",
            HistoryStatus::Merged => "merged",
            HistoryStatus::Deleted => "deleted",
            HistoryStatus::Reverted => "reverted",
            HistoryStatus::Restored => "restored",
            HistoryStatus::Rebuilt => "rebuilt",
            HistoryStatus::Other(s) => s,
        }
    }

    fn parse(s: &str) -> HistoryStatus {
        match s {
            "replaced" => HistoryStatus::Replaced,
            "merged" => HistoryStatus::Merged,
            "deleted" => HistoryStatus::Deleted,
            "reverted" => HistoryStatus::Reverted,
            "restored" => HistoryStatus::Restored,
            "rebuilt" => HistoryStatus::Rebuilt,
            other => HistoryStatus::Other(other.to_string()),
        }
    }

    /// Whether a block with this status says where its version went: a replaced or merged
    /// version lives on in `superseded_by`. Versions an undo or a rebuild set aside, and
    /// deleted ones, do not (the facts of deleted ones are tombstoned instead).
    pub fn leads_on(&self) -> bool {
        matches!(self, HistoryStatus::Replaced | HistoryStatus::Merged)
    }
}

impl Serialize for HistoryStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HistoryStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(HistoryStatus::parse(&s))
    }
}

impl std::fmt::Display for HistoryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Metadata in an entry header. Code owns all of it; the LLM never sees it as writable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryMeta {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<NaiveDate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<NaiveDate>,
    #[serde(default)]
    pub sources: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// History only: the last day this version was current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<NaiveDate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// History only: why this version is no longer current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<HistoryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Keys a person or a newer memfold added; kept as they are.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl EntryMeta {
    pub fn new(id: impl Into<String>) -> EntryMeta {
        EntryMeta {
            id: id.into(),
            first_seen: None,
            updated: None,
            sources: Vec::new(),
            pinned: false,
            kind: None,
            valid_until: None,
            superseded_by: None,
            status: None,
            run: None,
            extra: BTreeMap::new(),
        }
    }
}

/// One entry: metadata and markdown content.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub meta: EntryMeta,
    /// The markdown content, without the header and without a trailing newline.
    pub content: String,
    /// False for a block a person wrote without a header (its id is derived from content).
    pub has_header: bool,
    /// 1-based line where the entry starts in the file it was read from (0 for new entries).
    pub line: usize,
    /// The exact source of this entry including the blank lines after it; None once changed.
    raw: Option<String>,
}

impl Entry {
    /// A new entry; content is cleaned so that it stays one entry when written.
    pub fn new(meta: EntryMeta, content: &str) -> Entry {
        Entry { meta, content: clean_content(content), has_header: true, line: 0, raw: None }
    }

    /// A block read without a (valid) header: its id is derived from its content.
    fn headerless(content: String, line: usize, raw: String) -> Entry {
        Entry { meta: EntryMeta::new(derived_id(&content)), content, has_header: false, line, raw: Some(raw) }
    }

    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// Hash of what this entry says and claims (metadata + content), for the index and journal.
    pub fn hash(&self) -> String {
        content_hash(self.render())
    }

    /// Mark as changed so the next render writes it anew (e.g. after editing `meta`).
    pub fn touch(&mut self) {
        self.raw = None;
        self.has_header = true;
    }

    /// The canonical text: header line and content, ending in a newline.
    pub fn render(&self) -> String {
        format!("{HEADER}{}-->\n{}\n", comment_json(&self.meta), self.content)
    }
}

/// The id a headerless block gets: derived from its content, so it is stable until written.
pub fn derived_id(content: &str) -> String {
    format!("m-{}", &content_hash(content.trim())[..8])
}

/// The text that appends `blocks` to a file whose content ends with `tail`: each block
/// starts after one blank line (none at the very start of a file).
pub fn blocks_after(tail: &str, blocks: &[Entry]) -> String {
    let mut out = String::new();
    for block in blocks {
        let end = if out.is_empty() { tail } else { out.as_str() };
        if !end.is_empty() && !end.ends_with("\n\n") {
            out.push_str(if end.ends_with('\n') { "\n" } else { "\n\n" });
        }
        out.push_str(&block.render());
    }
    out
}

/// Make content safe to write as one entry: no blank lines outside code fences (they would
/// split it), no header look-alikes, fences closed, no surrounding whitespace.
pub fn clean_content(content: &str) -> String {
    let mut lines = Vec::new();
    let mut fence: Option<String> = None;
    for line in content.replace("\r\n", "\n").lines() {
        let trimmed = line.trim_start();
        let marker: String = trimmed.chars().take_while(|&c| c == '`' || c == '~').collect();
        if marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap_or('`')) {
            match &fence {
                Some(open)
                    if trimmed.trim_end().starts_with(open.as_str()) && trimmed.trim_end().len() == marker.len() =>
                {
                    fence = None
                }
                Some(_) => {}
                None => fence = Some(marker.clone()),
            }
            lines.push(line.to_string());
            continue;
        }
        if fence.is_none() && line.trim().is_empty() {
            continue;
        }
        lines.push(if fence.is_none() { line.replace(HEADER.trim_end(), "<!-- m") } else { line.to_string() });
    }
    if let Some(open) = fence {
        lines.push(open);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let start = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(lines.len());
    lines[start..].join("\n").trim_end().to_string()
}

/// What a run of blocks is.
// Nearly every item is an entry, so boxing would cost an allocation per entry for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Entry(Entry),
    /// Headings, rules and comments that are not entries, kept verbatim.
    Trivia(String),
}

/// A parsed entry file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryFile {
    pub items: Vec<Item>,
    pub problems: Vec<Problem>,
    /// Hash of the bytes parsed, for optimistic writes.
    pub hash: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Header,
    Trivia,
    Content,
}

/// Top-level blocks with their byte ranges, each extended to the end of its last line.
fn blocks(text: &str) -> Vec<(Range<usize>, BlockKind)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut kind = BlockKind::Content;
    // Byte searches: '\n' is ASCII, so the results are always char boundaries.
    let bytes = text.as_bytes();
    let to_line_end =
        |end: usize| bytes[end.min(bytes.len())..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| end + i + 1);
    let to_line_start = |at: usize| bytes[..at.min(bytes.len())].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    start = to_line_start(range.start);
                    kind = match tag {
                        Tag::Heading { .. } => BlockKind::Trivia,
                        Tag::HtmlBlock => {
                            let html = text[range.clone()].trim();
                            if html.starts_with(HEADER) {
                                BlockKind::Header
                            } else if html.starts_with("<!--") && html.ends_with("-->") {
                                BlockKind::Trivia
                            } else {
                                BlockKind::Content
                            }
                        }
                        _ => BlockKind::Content,
                    };
                }
                depth += 1;
            }
            Event::End(tag) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    // An HTML block holding a header and more lines is a header only if the
                    // header is its whole first line; pulldown ends type-2 blocks at `-->`.
                    let end = if matches!(tag, TagEnd::HtmlBlock) { range.end } else { range.end.max(start) };
                    out.push((start..to_line_end(end.saturating_sub(1).max(start)), kind));
                }
            }
            Event::Rule if depth == 0 => {
                out.push((to_line_start(range.start)..to_line_end(range.end.saturating_sub(1)), BlockKind::Trivia));
            }
            _ => {}
        }
    }
    out
}

/// Whether the text between two blocks holds a blank line.
fn has_blank_line(gap: &str) -> bool {
    gap.split('\n').skip(1).any(|l| l.trim().is_empty()) || gap.starts_with('\n')
}

impl EntryFile {
    /// Parse an entry file. `file` names it in problems.
    pub fn parse(text: &str, file: &str) -> EntryFile {
        let blocks = blocks(text);
        // Group blocks into runs.
        let mut runs: Vec<Vec<(Range<usize>, BlockKind)>> = Vec::new();
        let mut prev_end = 0;
        for (range, kind) in blocks {
            let gap = &text[prev_end.min(range.start)..range.start];
            let separated = has_blank_line(gap);
            let lone_header = runs.last().is_some_and(|r| r.len() == 1 && r[0].1 == BlockKind::Header);
            let starts_run = runs.is_empty()
                || kind == BlockKind::Header
                || (separated && !(lone_header && kind == BlockKind::Content));
            prev_end = range.end;
            if starts_run {
                runs.push(vec![(range, kind)]);
            } else if let Some(run) = runs.last_mut() {
                run.push((range, kind));
            }
        }
        let mut file_out = EntryFile { items: Vec::new(), problems: Vec::new(), hash: content_hash(text) };
        let starts: Vec<usize> = runs.iter().map(|r| r[0].0.start).collect();
        let (mut counted_line, mut counted_to) = (1usize, 0usize);
        for (i, run) in runs.iter().enumerate() {
            // The first item also owns anything before it; every item owns the gap after it.
            let raw_start = if i == 0 { 0 } else { starts[i] };
            let raw_end = starts.get(i + 1).copied().unwrap_or(text.len());
            let raw = text[raw_start..raw_end].to_string();
            let run_start = run[0].0.start;
            let run_end = run.last().map_or(run_start, |b| b.0.end);
            // Runs come in file order, so count newlines incrementally (not from the start each time).
            counted_line += text.as_bytes()[counted_to..run_start].iter().filter(|&&b| b == b'\n').count();
            counted_to = run_start;
            let line = counted_line;
            let body = |from: usize| text[from..run_end].trim_end_matches(['\n', '\r']).to_string();
            let item = if run[0].1 == BlockKind::Header {
                let header = text[run[0].0.clone()].trim();
                let json = header.trim_start_matches(HEADER).trim_end_matches("-->");
                match serde_json::from_str::<EntryMeta>(json) {
                    Ok(meta) if run.len() > 1 => Item::Entry(Entry {
                        meta,
                        content: body(run[1].0.start),
                        has_header: true,
                        line,
                        raw: Some(raw),
                    }),
                    Ok(meta) => {
                        file_out.problems.push(Problem::new(
                            file,
                            line,
                            format!("entry {} has no content; kept as is", meta.id),
                        ));
                        Item::Trivia(raw)
                    }
                    Err(e) => {
                        file_out.problems.push(Problem::new(
                            file,
                            line,
                            format!("broken entry header ({e}); block kept as content"),
                        ));
                        Item::Entry(Entry::headerless(body(run_start), line, raw))
                    }
                }
            } else if run.iter().all(|(_, k)| *k == BlockKind::Trivia) {
                Item::Trivia(raw)
            } else {
                Item::Entry(Entry::headerless(body(run_start), line, raw))
            };
            file_out.items.push(item);
        }
        if runs.is_empty() && !text.is_empty() {
            file_out.items.push(Item::Trivia(text.to_string()));
        }
        // History keeps every version of an entry under its id: only current blocks (no `status`) must be unique.
        let mut seen = std::collections::HashSet::new();
        let duplicates: Vec<Problem> = file_out
            .entries()
            .filter(|e| e.meta.status.is_none() && !seen.insert(e.id().to_string()))
            .map(|e| Problem::new(file, e.line, format!("entry id {} appears more than once", e.id())))
            .collect();
        file_out.problems.extend(duplicates);
        file_out
    }

    /// Read and parse a file; a missing file is empty.
    pub fn read(path: &std::path::Path, file: &str) -> std::io::Result<EntryFile> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(EntryFile::parse(&text, file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(EntryFile::parse("", file)),
            Err(e) => Err(e),
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.items.iter().filter_map(|i| match i {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        })
    }

    pub fn entries_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.items.iter_mut().filter_map(|i| match i {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        })
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries().find(|e| e.id() == id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Entry> {
        self.entries_mut().find(|e| e.id() == id)
    }

    /// Remove an entry, returning it.
    pub fn remove(&mut self, id: &str) -> Option<Entry> {
        let at = self.items.iter().position(|i| matches!(i, Item::Entry(e) if e.id() == id))?;
        match self.items.remove(at) {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        }
    }

    pub fn push(&mut self, entry: Entry) {
        self.items.push(Item::Entry(entry));
    }

    /// Give every headerless entry its header (with its derived id) at the next write. Its
    /// content is cleaned too, so a broken header kept as content cannot pose as a header.
    pub fn assign_headers(&mut self) {
        for entry in self.entries_mut().filter(|e| !e.has_header) {
            entry.content = clean_content(&entry.content);
            entry.touch();
        }
    }

    /// The file text: unchanged items byte for byte, changed and new ones rendered.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut prev_fresh = false;
        for item in &self.items {
            let (text, fresh) = match item {
                Item::Entry(Entry { raw: Some(raw), .. }) | Item::Trivia(raw) => (raw.clone(), false),
                Item::Entry(entry) => (entry.render(), true),
            };
            // A rendered entry carries no gap of its own: keep one blank line on both sides.
            if (fresh || prev_fresh) && !out.is_empty() && !out.ends_with("\n\n") {
                out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
            } else if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&text);
            prev_fresh = fresh;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn meta(id: &str) -> EntryMeta {
        EntryMeta {
            first_seen: Some(d("2026-05-27")),
            updated: Some(d("2026-05-30")),
            sources: vec!["f-1".into(), "f-2".into()],
            ..EntryMeta::new(id)
        }
    }

    const SAMPLE: &str = "<!--m {\"id\":\"m-7f3a9c\",\"first_seen\":\"2026-05-27\",\"updated\":\"2026-05-30\",\"sources\":[\"f-1\",\"f-2\"]}-->\nCurrently works at Microsoft (since 2026-05). Previously worked at Google.\n";

    #[test]
    fn parses_the_design_example() {
        let file = EntryFile::parse(SAMPLE, "memory.md");
        assert!(file.problems.is_empty(), "{:?}", file.problems);
        let entries: Vec<_> = file.entries().collect();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].meta, meta("m-7f3a9c"));
        assert_eq!(entries[0].content, "Currently works at Microsoft (since 2026-05). Previously worked at Google.");
        assert_eq!(file.render(), SAMPLE);
        assert_eq!(entries[0].render(), SAMPLE);
    }

    #[test]
    fn hand_written_paragraph_is_an_entry_of_its_own() {
        let text = format!("# My memory\n\n{SAMPLE}\nAllergic to peanuts.\n");
        let mut file = EntryFile::parse(&text, "memory.md");
        let ids: Vec<_> = file.entries().map(|e| (e.id().to_string(), e.has_header)).collect();
        assert_eq!(ids, [("m-7f3a9c".to_string(), true), (derived_id("Allergic to peanuts."), false)]);
        assert!(matches!(&file.items[0], Item::Trivia(t) if t == "# My memory\n\n"));
        assert_eq!(file.render(), text);
        file.assign_headers();
        let rendered = file.render();
        assert!(rendered.ends_with(&format!(
            "{HEADER}{{\"id\":\"{}\",\"sources\":[]}}-->\nAllergic to peanuts.\n",
            derived_id("Allergic to peanuts.")
        )));
        let again = EntryFile::parse(&rendered, "memory.md");
        assert!(again.entries().all(|e| e.has_header));
        assert_eq!(again.entries().count(), 2);
    }

    #[test]
    fn header_then_blank_line_then_content_still_belong_together() {
        let text = "<!--m {\"id\":\"m-1\"}-->\n\nLikes tea.\n";
        let file = EntryFile::parse(text, "memory.md");
        let e: Vec<_> = file.entries().collect();
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].id(), e[0].content.as_str()), ("m-1", "Likes tea."));
        assert_eq!(file.render(), text);
    }

    #[test]
    fn broken_header_is_reported_and_kept_as_content() {
        let text = "<!--m {\"id\":\"m-1\",}-->\nLikes tea.\n\n<!--m {\"id\":\"m-2\"}-->\nLikes coffee.\n";
        let file = EntryFile::parse(text, "consolidated/memory.md");
        assert_eq!(file.problems.len(), 1);
        assert!(
            file.problems[0].to_string().starts_with("consolidated/memory.md:1: broken entry header"),
            "{}",
            file.problems[0]
        );
        let e: Vec<_> = file.entries().collect();
        assert_eq!(e[0].content, "<!--m {\"id\":\"m-1\",}-->\nLikes tea.");
        assert!(!e[0].has_header);
        assert_eq!(e[1].id(), "m-2");
        assert_eq!(file.render(), text);
    }

    #[test]
    fn a_broken_header_gets_one_real_header_and_stays_stable() {
        let text = "<!--m {\"id\":\"m-1\",}-->\nLikes tea.\n";
        let mut file = EntryFile::parse(text, "memory.md");
        file.assign_headers();
        let once = file.render();
        let again = EntryFile::parse(&once, "memory.md");
        assert!(again.problems.is_empty(), "{:?}\n{once}", again.problems);
        assert_eq!(again.entries().count(), 1, "{once}");
        let mut twice = again.clone();
        twice.assign_headers();
        assert_eq!(twice.render(), once, "no header is added on later writes");
    }

    #[test]
    fn code_fence_with_blank_lines_and_comments_stay_in_one_entry() {
        let content = "Setup notes:\n```sh\nmake\n\n<!--m {\"id\":\"fake\"}-->\n\nmake install\n```\n<!-- a note, not a header -->";
        let entry = Entry::new(meta("m-1"), content);
        assert_eq!(entry.content, content, "already clean");
        let mut file = EntryFile::default();
        file.push(entry.clone());
        file.push(Entry::new(meta("m-2"), "Second."));
        let text = file.render();
        let back = EntryFile::parse(&text, "memory.md");
        assert!(back.problems.is_empty(), "{:?}", back.problems);
        let contents: Vec<_> = back.entries().map(|e| e.content.clone()).collect();
        assert_eq!(contents, [content, "Second."]);
    }

    #[test]
    fn clean_content_removes_what_would_split_an_entry() {
        assert_eq!(clean_content("\n\nFirst para.\n\nSecond para.\n\n"), "First para.\nSecond para.");
        assert_eq!(clean_content("x\n```\nopen fence"), "x\n```\nopen fence\n```");
        assert_eq!(clean_content("<!--m {\"id\":1}--> b"), "<!-- m {\"id\":1}--> b");
    }

    #[test]
    fn edits_render_only_the_changed_entry() {
        let text = format!("{SAMPLE}\n<!--m {{\"id\":\"m-2\",\"sources\":[]}}-->\n   Odd   spacing kept.\n");
        let mut file = EntryFile::parse(&text, "memory.md");
        let e = file.get_mut("m-7f3a9c").unwrap();
        e.content = "Works at Microsoft.".into();
        e.touch();
        let out = file.render();
        assert!(out.ends_with("\n\n<!--m {\"id\":\"m-2\",\"sources\":[]}-->\n   Odd   spacing kept.\n"), "{out}");
        assert!(out.contains("-->\nWorks at Microsoft.\n\n"));
    }

    #[test]
    fn new_entry_after_file_without_trailing_newline() {
        let mut file = EntryFile::parse("Hand written", "memory.md");
        file.push(Entry::new(meta("m-2"), "Added."));
        let out = file.render();
        assert!(out.starts_with("Hand written\n\n<!--m "), "{out}");
        assert_eq!(EntryFile::parse(&out, "memory.md").entries().count(), 2);
    }

    #[test]
    fn duplicate_ids_are_reported() {
        let text = "<!--m {\"id\":\"m-1\"}-->\nA.\n\n<!--m {\"id\":\"m-1\"}-->\nB.\n";
        let file = EntryFile::parse(text, "memory.md");
        assert_eq!(file.problems.len(), 1);
        assert!(file.problems[0].message.contains("more than once"));
        let history = "<!--m {\"id\":\"m-1\",\"status\":\"replaced\"}-->\nA.\n\n<!--m {\"id\":\"m-1\",\"status\":\"reverted\"}-->\nB.\n";
        assert!(EntryFile::parse(history, "history.md").problems.is_empty(), "versions of one entry in history");
    }

    #[test]
    fn unknown_header_keys_survive_a_rewrite() {
        let text = "<!--m {\"id\":\"m-1\",\"sources\":[],\"mood\":\"calm\"}-->\nA.\n";
        let mut file = EntryFile::parse(text, "memory.md");
        file.get_mut("m-1").unwrap().touch();
        assert_eq!(file.render(), text);
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z]{1,10}",
            "[àéîõüßçñ漢字日本語🙂]{1,4}",
            Just("**bold**".to_string()),
            Just("`code`".to_string()),
            Just("<!-- aside -->".to_string()),
            Just("2026-05-27".to_string()),
            Just("--".to_string()),
        ]
    }

    fn line() -> impl Strategy<Value = String> {
        prop::collection::vec(word(), 1..8).prop_map(|w| w.join(" "))
    }

    fn content() -> impl Strategy<Value = String> {
        let fence = prop::collection::vec(prop_oneof![line(), Just(String::new())], 1..4)
            .prop_map(|body| format!("```\n{}\n```", body.join("\n")));
        let list = prop::collection::vec(line(), 1..4)
            .prop_map(|items| items.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n"));
        let part = prop_oneof![4 => line(), 1 => fence, 1 => list, 1 => Just("<!-- not a header -->".to_string())];
        prop::collection::vec(part, 1..4).prop_map(|parts| parts.join("\n"))
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (content(), "[0-9a-f]{6}", prop::collection::vec("f-[0-9a-f]{12}", 0..4), any::<bool>(), 0u32..400).prop_map(
            |(content, id, sources, pinned, days)| {
                let first = d("2026-01-01") + chrono::Days::new(days as u64);
                let meta = EntryMeta {
                    first_seen: Some(first),
                    updated: Some(first),
                    sources,
                    pinned,
                    ..EntryMeta::new(format!("m-{id}"))
                };
                Entry::new(meta, &content)
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn rendered_files_parse_back_to_the_same_entries(entries in prop::collection::vec(entry(), 0..8), title in any::<bool>()) {
            let mut file = EntryFile::parse(if title { "# Memory\n\n" } else { "" }, "memory.md");
            let mut ids = std::collections::HashSet::new();
            for e in entries.iter().filter(|e| ids.insert(e.id().to_string())) {
                file.push(e.clone());
            }
            let text = file.render();
            let back = EntryFile::parse(&text, "memory.md");
            prop_assert!(back.problems.is_empty(), "{:?}\n{}", back.problems, text);
            let want: Vec<_> = file.entries().map(|e| (e.meta.clone(), e.content.clone())).collect();
            let got: Vec<_> = back.entries().map(|e| (e.meta.clone(), e.content.clone())).collect();
            prop_assert_eq!(got, want, "{}", text);
            prop_assert_eq!(back.render(), text);
        }

        #[test]
        fn any_text_renders_back_byte_for_byte(text in "(\\PC|\n| {4}|<!--m |-->|```|# ){0,200}") {
            prop_assert_eq!(EntryFile::parse(&text, "memory.md").render(), text);
        }
    }
}
