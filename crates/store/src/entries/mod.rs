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
//! paragraph a person typed) is an entry too, under an id derived from its text, and gets a
//! header the next time a consolidation pass (or an applied plan) writes the file; a forget,
//! pin or undo leaves it as typed. Runs made only of headings, rules or ordinary HTML comments are kept
//! as they are and are not entries. A header whose JSON does not parse is reported, and
//! its run is kept as the content of a headerless entry.
//!
//! Every item remembers the exact bytes it came from, so rendering an unchanged file gives
//! it back byte for byte; only entries memfold changed or added are rendered anew. Text that
//! no block holds (a link reference definition) is an item of its own, so rewriting the entry
//! beside it keeps it, and removing an entry keeps a blank line between what was around it,
//! so neighbours never run together.
//!
//! What memfold writes is made inert by the same block scan that reads it back
//! ([`clean_content`]): a new entry's content is rendered under a header, followed by another
//! entry, and parsed; it is written only if it reads back as exactly one entry with exactly
//! that content, and escaped further until it does (see docs/ARCHITECTURE.md, "What a block
//! is"). A header line that an unclosed block of an older or hand-edited file hides is
//! reported, so the hidden entry is not silently lost.

mod clean;
mod scan;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::{Problem, comment_json, content_hash};
pub use clean::{clean_content, newly_hidden};
use scan::{
    Block, BlockKind, blocks, ends_in_blank_line, first_text_line, has_blank_line, hidden_headers, lone_cr_as_lf,
    named_facts,
};

/// Comment prefix of an entry header.
const HEADER: &str = "<!--m ";

/// Why a version in `history.md` stopped being current.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HistoryStatus {
    /// A REPLACE gave the entry new content (`superseded_by` is the entry itself).
    Replaced,
    /// A REMOVE folded the entry into `superseded_by`.
    Merged,
    /// A person said `superseded_by` takes the entry's place (`memfold supersede`).
    Superseded,
    /// Forgotten, or deleted from `memory.md` by hand; its facts are tombstoned.
    Deleted,
    /// A version an undo took back.
    Reverted,
    /// A run's copy of a version an undo put back (the version is current again).
    Restored,
    /// Set aside by `memfold rebuild`.
    Rebuilt,
    /// Retired for disuse (`memfold sweep --stale`): its facts stay accounted for here.
    Retired,
    /// A status this build does not know (written by a person or a newer memfold); kept as is.
    Other(String),
}

impl HistoryStatus {
    pub fn as_str(&self) -> &str {
        match self {
            HistoryStatus::Replaced => "replaced",
            HistoryStatus::Merged => "merged",
            HistoryStatus::Superseded => "superseded",
            HistoryStatus::Deleted => "deleted",
            HistoryStatus::Reverted => "reverted",
            HistoryStatus::Restored => "restored",
            HistoryStatus::Rebuilt => "rebuilt",
            HistoryStatus::Retired => "retired",
            HistoryStatus::Other(s) => s,
        }
    }

    fn parse(s: &str) -> HistoryStatus {
        match s {
            "replaced" => HistoryStatus::Replaced,
            "merged" => HistoryStatus::Merged,
            "superseded" => HistoryStatus::Superseded,
            "deleted" => HistoryStatus::Deleted,
            "reverted" => HistoryStatus::Reverted,
            "restored" => HistoryStatus::Restored,
            "rebuilt" => HistoryStatus::Rebuilt,
            "retired" => HistoryStatus::Retired,
            other => HistoryStatus::Other(other.to_string()),
        }
    }

    /// Whether a block with this status says where its version went: a replaced, merged or
    /// superseded version lives on in `superseded_by`. Versions an undo or a rebuild set aside, and
    /// deleted ones, do not (the facts of deleted ones are tombstoned instead).
    pub fn leads_on(&self) -> bool {
        matches!(self, HistoryStatus::Replaced | HistoryStatus::Merged | HistoryStatus::Superseded)
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

    /// The entries this one is related to but distinct from (its `related` key: `[{"id":
    /// "m-…", "shares": "Rex"}]`, or ids alone as a person may write them). What cannot be
    /// read as a link is left out here and kept in the header as it is; `verify` names it.
    pub fn links(&self) -> Vec<Link> {
        let Some(serde_json::Value::Array(items)) = self.extra.get(RELATED) else { return Vec::new() };
        items
            .iter()
            .filter_map(|item| match item {
                serde_json::Value::String(id) => Some(Link { id: id.clone(), shares: None }),
                serde_json::Value::Object(o) => Some(Link {
                    id: o.get("id")?.as_str()?.to_string(),
                    shares: o.get("shares").and_then(|s| s.as_str()).map(str::to_string),
                }),
                _ => None,
            })
            .filter(|l| l.id.starts_with("m-") && l.id != self.id)
            .collect()
    }

    /// Whether the `related` key holds anything that is not a link (a hand edit garbled it).
    pub fn garbled_links(&self) -> bool {
        match self.extra.get(RELATED) {
            None => false,
            Some(serde_json::Value::Array(items)) => items.len() != self.links().len(),
            Some(_) => true,
        }
    }

    /// Set the links (none: the key goes), each id once, in the order given.
    pub fn set_links(&mut self, links: Vec<Link>) {
        let mut seen = std::collections::BTreeSet::new();
        let links: Vec<serde_json::Value> = links
            .into_iter()
            .filter(|l| l.id != self.id && seen.insert(l.id.clone()))
            .map(|l| match l.shares {
                Some(shares) => serde_json::json!({ "id": l.id, "shares": shares }),
                None => serde_json::json!({ "id": l.id }),
            })
            .collect();
        match links.is_empty() {
            true => self.extra.remove(RELATED),
            false => self.extra.insert(RELATED.to_string(), serde_json::Value::Array(links)),
        };
    }

    /// Add a link (or name what it shares, where it had none); whether anything changed.
    pub fn link(&mut self, to: &str, shares: Option<&str>) -> bool {
        let mut links = self.links();
        if to == self.id {
            return false;
        }
        match links.iter_mut().find(|l| l.id == to) {
            Some(l) if l.shares.is_none() && shares.is_some() => l.shares = shares.map(str::to_string),
            Some(_) => return false,
            None => links.push(Link { id: to.to_string(), shares: shares.map(str::to_string) }),
        }
        self.set_links(links);
        true
    }

    /// A link to `from` made to point at `to` (an entry folded into another), or dropped
    /// (`None`, or `to` is this entry); whether anything changed.
    pub fn relink(&mut self, from: &str, to: Option<&str>) -> bool {
        let links = self.links();
        if !links.iter().any(|l| l.id == from) {
            return false;
        }
        let links = links
            .into_iter()
            .filter_map(|l| match (l.id == from, to) {
                (false, _) => Some(l),
                (true, Some(to)) if to != self.id => Some(Link { id: to.to_string(), ..l }),
                (true, _) => None,
            })
            .collect();
        self.set_links(links);
        true
    }
}

/// The header key of an entry's links.
const RELATED: &str = "related";

/// A current entry that has links, as a search follows them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Linked {
    pub content: String,
    pub links: Vec<Link>,
    pub first_seen: Option<NaiveDate>,
    pub updated: Option<NaiveDate>,
    pub sources: Vec<String>,
}

/// The current entries of `memory.md`'s text that have links, by id, and the ids of pinned
/// entries (for a memory with neither, the cost of a scan for two words).
pub fn linked(text: &str) -> (std::collections::HashMap<String, Linked>, Vec<String>) {
    let mut out = std::collections::HashMap::new();
    let mut pinned = Vec::new();
    if !text.contains("\"related\"") && !text.contains("\"pinned\"") {
        return (out, pinned);
    }
    let file = EntryFile::parse(text, "consolidated/memory.md");
    for entry in file.entries() {
        if entry.meta.pinned {
            pinned.push(entry.id().to_string());
        }
        let links = entry.meta.links();
        if links.is_empty() {
            continue;
        }
        out.entry(entry.id().to_string()).or_insert_with(|| Linked {
            content: entry.content.clone(),
            links,
            first_seen: entry.meta.first_seen,
            updated: entry.meta.updated,
            sources: entry.meta.sources.clone(),
        });
    }
    (out, pinned)
}

/// A link from an entry to one it is related to but distinct from, and what they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub id: String,
    pub shares: Option<String>,
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
    /// Whether a person must mend this block before memfold touches it: an unclosed block in
    /// it hides another entry's header (see [`EntryFile::hidden`]), or its own header is broken.
    mend: bool,
}

impl Entry {
    /// A new entry; content is cleaned so that it stays one entry when written.
    pub fn new(meta: EntryMeta, content: &str) -> Entry {
        Entry { meta, content: clean_content(content), has_header: true, line: 0, raw: None, mend: false }
    }

    /// A block read without a (valid) header: its id is derived from its content.
    fn headerless(content: String, line: usize, raw: String) -> Entry {
        Entry {
            meta: EntryMeta::new(derived_id(&content)),
            content,
            has_header: false,
            line,
            raw: Some(raw),
            mend: false,
        }
    }

    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// Whether a person must mend this block (a broken header, or an unclosed block hiding
    /// another entry's header) before memfold gives it a header, changes it or shows it to a
    /// decider.
    pub fn needs_mending(&self) -> bool {
        self.mend
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
    /// Ids of entry headers hidden inside another block (an unclosed HTML block, fence or
    /// comment that an older memfold or a hand edit left): memfold does not see those entries.
    pub hidden: Vec<(String, usize)>,
    /// Facts named by entries memfold cannot read until a person mends the file: a header
    /// hidden inside another block, a header whose JSON an edit broke, a header with no content
    /// under it. The id is still in the file, so those facts are in an entry; a pass leaves them
    /// alone rather than add them a second time under the same id.
    pub unreadable_facts: std::collections::BTreeSet<String>,
}

impl EntryFile {
    /// Parse an entry file. `file` names it in problems.
    pub fn parse(text: &str, file: &str) -> EntryFile {
        // A byte order mark some editors write is not text: read after it, keep it in front.
        let Some(body) = text.strip_prefix('\u{feff}') else {
            return EntryFile::parse_text(text, file);
        };
        let mut parsed = EntryFile::parse_text(body, file);
        parsed.hash = content_hash(text);
        match parsed.items.first_mut() {
            Some(Item::Entry(Entry { raw: Some(raw), .. }) | Item::Trivia(raw)) => raw.insert(0, '\u{feff}'),
            _ => parsed.items.insert(0, Item::Trivia('\u{feff}'.into())),
        }
        parsed
    }

    /// The item a block run that starts with a header makes: an entry (its `content`), or,
    /// reported, a header with no content (kept as it is) or a broken header (the block kept
    /// whole, to be mended); facts either names are counted as unreadable.
    fn headed(
        &mut self,
        header: &str,
        content: Option<String>,
        (file, line): (&str, usize),
        raw: String,
        whole: impl FnOnce() -> String,
    ) -> Item {
        let json = header.trim_start_matches(HEADER).trim_end_matches("-->");
        match (serde_json::from_str::<EntryMeta>(json), content) {
            (Ok(meta), Some(content)) => {
                Item::Entry(Entry { meta, content, has_header: true, line, raw: Some(raw), mend: false })
            }
            (Ok(meta), None) => {
                self.problems.push(Problem::new(file, line, format!("entry {} has no content; kept as is", meta.id)));
                self.unreadable_facts.extend(meta.sources);
                Item::Trivia(raw)
            }
            (Err(e), _) => {
                self.problems.push(Problem::new(
                    file,
                    line,
                    format!("broken entry header ({e}); block kept as it is until the header is mended"),
                ));
                self.unreadable_facts.extend(named_facts(header));
                Item::Entry(Entry { mend: true, ..Entry::headerless(whole(), line, raw) })
            }
        }
    }

    fn parse_text(original: &str, file: &str) -> EntryFile {
        // A lone carriage return ends a line as `\n` does (an old Mac file, pasted text). The
        // scan reads it as `\n`, which keeps every offset; items keep the bytes as they were.
        let scanned = lone_cr_as_lf(original);
        let text = scanned.as_deref().unwrap_or(original);
        let runs = Self::runs_of(text);
        let mut file_out = EntryFile { hash: content_hash(original), ..EntryFile::default() };
        let starts: Vec<usize> = runs.iter().map(|r| r[0].range.start).collect();
        let (mut counted_line, mut counted_to) = (1usize, 0usize);
        for (i, run) in runs.iter().enumerate() {
            // The first item also owns blank lines before it; every item owns the blank lines
            // after it. Text no block holds (link reference definitions) is an item of its own,
            // so rewriting or removing the entry next to it keeps it.
            let run_start = run[0].range.start;
            let run_end = run.last().map_or(run_start, |b| b.range.end);
            let mut raw_start = if i == 0 { 0 } else { starts[i] };
            if i == 0 && !text[..run_start].trim().is_empty() {
                file_out.items.push(Item::Trivia(original[..run_start].to_string()));
                raw_start = run_start;
            }
            let next = starts.get(i + 1).copied().unwrap_or(text.len());
            let raw_end = first_text_line(text, run_end.min(next), next).unwrap_or(next);
            let raw = original[raw_start..raw_end].to_string();
            let loose = (raw_end < next).then(|| Item::Trivia(original[raw_end..next].to_string()));
            // Runs come in file order, so count newlines incrementally (not from the start each time).
            counted_line += text.as_bytes()[counted_to..run_start].iter().filter(|&&b| b == b'\n').count();
            counted_to = run_start;
            let line = counted_line;
            let body = |from: usize| text[from..run_end].trim_end_matches(['\n', '\r']).to_string();
            let mut item = if run[0].kind == BlockKind::Header {
                let content = run.get(1).map(|b| body(b.range.start));
                file_out.headed(text[run[0].range.clone()].trim(), content, (file, line), raw, || body(run_start))
            } else if run.iter().all(|b| b.kind == BlockKind::Trivia) {
                Item::Trivia(raw)
            } else {
                Item::Entry(Entry::headerless(body(run_start), line, raw))
            };
            for block in run {
                for (at, meta) in hidden_headers(text, block) {
                    let id = meta.id;
                    file_out.unreadable_facts.extend(meta.sources);
                    let opened = line + text[run_start..block.range.start].matches('\n').count();
                    let hidden_line = line + text[run_start..at].matches('\n').count();
                    file_out.problems.push(Problem::new(
                        file,
                        hidden_line,
                        format!(
                            "entry header of {id} is inside the block that starts at line {opened} (an unclosed \
                             HTML block, fence or comment), so that entry is hidden; close or escape what opens \
                             the block"
                        ),
                    ));
                    file_out.hidden.push((id, hidden_line));
                    if let Item::Entry(entry) = &mut item {
                        entry.mend = true;
                    }
                }
            }
            file_out.items.push(item);
            file_out.items.extend(loose);
        }
        if runs.is_empty() && !text.is_empty() {
            file_out.items.push(Item::Trivia(original.to_string()));
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

    /// Remove an entry, returning it. What came before it stays apart from what came after:
    /// a blank line is kept between them, or the text after (a headerless entry, a note) would
    /// read back as part of the entry before.
    pub fn remove(&mut self, id: &str) -> Option<Entry> {
        let at = self.items.iter().position(|i| matches!(i, Item::Entry(e) if e.id() == id))?;
        match self.remove_item(at) {
            Item::Entry(e) => Some(e),
            Item::Trivia(_) => None,
        }
    }

    /// Remove the item at `at` (an index into `items`), keeping what was around it apart as
    /// [`EntryFile::remove`] does.
    pub fn remove_item(&mut self, at: usize) -> Item {
        let removed = self.items.remove(at);
        let next_has_header = match self.items.get(at) {
            Some(Item::Entry(e)) => e.has_header,
            Some(Item::Trivia(_)) => false,
            None => true,
        };
        if !next_has_header && at > 0 {
            let raw = match &mut self.items[at - 1] {
                Item::Entry(Entry { raw: Some(raw), .. }) | Item::Trivia(raw) => Some(raw),
                Item::Entry(_) => None, // rendered fresh, with a blank line after it
            };
            if let Some(raw) = raw.filter(|raw| !ends_in_blank_line(raw)) {
                raw.push_str(if raw.ends_with('\n') { "\n" } else { "\n\n" });
            }
        }
        removed
    }

    pub fn push(&mut self, entry: Entry) {
        self.items.push(Item::Entry(entry));
    }

    /// Give every paragraph typed without a header its header (with its derived id) at the
    /// next write, its content cleaned. A block a person must mend is left as it is: cleaning a
    /// block that hides other entries' headers would fold them into it for good, and cleaning
    /// a broken header would turn it into text, its entry's facts added again beside it.
    pub fn assign_headers(&mut self) {
        for entry in self.entries_mut().filter(|e| !e.has_header && !e.mend) {
            entry.content = clean_content(&entry.content);
            entry.touch();
        }
    }

    /// The blocks of `text` grouped into runs, each the blocks of one item: a header starts a run,
    /// and so does a blank line, but for the content right after a header alone.
    fn runs_of(text: &str) -> Vec<Vec<Block>> {
        let mut runs: Vec<Vec<Block>> = Vec::new();
        let mut prev_end = 0;
        for block in blocks(text) {
            let gap = &text[prev_end.min(block.range.start)..block.range.start];
            let separated = has_blank_line(gap);
            let lone_header = runs.last().is_some_and(|r| r.len() == 1 && r[0].kind == BlockKind::Header);
            let starts_run = runs.is_empty()
                || block.kind == BlockKind::Header
                || (separated && !(lone_header && block.kind == BlockKind::Content));
            prev_end = block.range.end;
            if starts_run {
                runs.push(vec![block]);
            } else if let Some(run) = runs.last_mut() {
                run.push(block);
            }
        }
        runs
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
            } else if !out.is_empty() && !out.ends_with(['\n', '\r']) {
                out.push('\n');
            }
            out.push_str(&text);
            prev_fresh = fresh;
        }
        out
    }
}
