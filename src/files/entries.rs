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

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use chrono::NaiveDate;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};

use super::{Problem, comment_json, content_hash, visible_controls};

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

/// Start of a header comment, with or without the space after `m`.
const HEADER_OPEN: &str = "<!--m";

/// The header a content is tried under, and the entry that must still follow it.
const PROBE: &str = "<!--m {\"id\":\"m-probe\"}-->\n";
const PROBE_NEXT: &str = "\n\n<!--m {\"id\":\"m-next\"}-->\nnext\n";

/// Make content safe to write as one entry, judged by the block scan that reads it back.
///
/// First the gentle part, which leaves inert text (paragraphs, lists, emphasis, inline code,
/// closed fences, comments that close) as it is: line ends become `\n`, blank lines between
/// blocks go (they would split the entry), header look-alikes outside fenced code become
/// `<!-- m`, and a fence the parser sees left open is closed. If the result, written under a
/// header and followed by another entry, does not read back as exactly this entry, lines
/// (outside code blocks) that open an HTML block or a link reference definition get a
/// backslash; if it still does not, every line's opening character does, and blank lines go.
/// Control characters that are not whitespace are made visible first ([`visible_controls`]).
pub fn clean_content(content: &str) -> String {
    let content = visible_controls(content);
    let content = content.as_ref();
    if let Some(line) = plain_line(content) {
        return line;
    }
    let gentle = settled(content);
    if gentle.is_empty() || fits(&gentle) {
        return gentle;
    }
    let escaped = settled(&escape_lines(&gentle, false));
    if fits(&escaped) {
        return escaped;
    }
    let strong = settled(&escape_lines(&gentle, true));
    debug_assert!(fits(&strong), "strongly escaped content is one entry: {strong:?}");
    if fits(&strong) {
        return strong;
    }
    // One paragraph line whose first character cannot open a block.
    escape_line(&strong.split_whitespace().collect::<Vec<_>>().join(" "), true)
}

/// A one-line content that starts with a letter or digit is a paragraph (or a list item): inert.
fn plain_line(content: &str) -> Option<String> {
    let plain = content.chars().next().is_some_and(char::is_alphanumeric)
        && !content.contains(['\n', '\r'])
        && !content.contains(HEADER_OPEN);
    plain.then(|| content.trim_end().to_string())
}

/// Whether `content`, written under a header and followed by another entry, reads back as
/// exactly that entry with exactly that content, and the next entry as itself.
fn fits(content: &str) -> bool {
    let text = format!("{PROBE}{content}{PROBE_NEXT}");
    let file = EntryFile::parse(&text, "");
    file.problems.is_empty()
        && match file.items.as_slice() {
            [Item::Entry(a), Item::Entry(b)] => {
                a.has_header && a.id() == "m-probe" && a.content == content && b.id() == "m-next" && b.content == "next"
            }
            _ => false,
        }
}

/// The lines of `content` with the top-level block (scanned as an entry's content) each starts in.
fn content_lines(content: &str) -> Vec<(&str, Option<Block>)> {
    let text = format!("{PROBE}{content}");
    let blocks = blocks(&text);
    let mut at = PROBE.len();
    let mut next = 0;
    content
        .split('\n')
        .map(|line| {
            let start = at;
            at += line.len() + 1;
            while next < blocks.len() && blocks[next].range.end <= start {
                next += 1;
            }
            (line, blocks.get(next).filter(|b| b.range.start <= start).cloned())
        })
        .collect()
}

/// [`tidy`] until it changes nothing, so that cleaning clean content leaves it as it is.
///
/// `tidy` reads the blocks of the text it is given, and dropping a blank line can change them:
/// in `"<div>A\n\n```<!--m …"` the fence is code, but once the blank line is gone the line
/// joins the HTML block above and its header look-alike is no longer inert.
fn settled(content: &str) -> String {
    let mut text = tidy(content);
    // Each round that changes something drops a blank line, closes a fence or rewrites a
    // header look-alike; a handful settles any real content, and the bound keeps it finite.
    for _ in 0..8 {
        let next = tidy(&text);
        if next == text {
            break;
        }
        text = next;
    }
    text
}

/// The gentle clean-up of [`clean_content`].
fn tidy(content: &str) -> String {
    let content = content.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<String> = Vec::new();
    let mut open_fence: Option<String> = None;
    for (line, block) in content_lines(&content) {
        match block {
            None if line.trim().is_empty() => continue,
            Some(Block { code: Code::Fenced { closed }, .. }) => {
                if !closed && open_fence.is_none() {
                    open_fence = fence_marker(line).map(|(c, n)| c.to_string().repeat(n));
                }
                lines.push(line.to_string());
            }
            _ => {
                if let Some(close) = open_fence.take() {
                    lines.push(close);
                }
                lines.push(line.replace(HEADER_OPEN, "<!-- m"));
            }
        }
    }
    if let Some(close) = open_fence {
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        lines.push(close);
    }
    let start = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(lines.len());
    lines[start..].join("\n").trim_end().to_string()
}

/// Put a backslash before the character that opens a block on each line: `<` and `[` (HTML
/// blocks, link reference definitions) outside code blocks, or with `strong` every opening
/// character on every line, dropping blank lines.
fn escape_lines(content: &str, strong: bool) -> String {
    let mut out = Vec::new();
    for (line, block) in content_lines(content) {
        let in_code = block.is_some_and(|b| b.code != Code::None);
        if strong && line.trim().is_empty() {
            continue;
        }
        out.push(if in_code && !strong { line.to_string() } else { escape_line(line, strong) });
    }
    out.join("\n")
}

fn escape_line(line: &str, strong: bool) -> String {
    let rest = line.trim_start_matches([' ', '\t']);
    let lead = &line[..line.len() - rest.len()];
    let opens = match rest.chars().next() {
        Some('<' | '[') => true,
        Some('`' | '~' | '#' | '>' | '-' | '+' | '*' | '=' | '_' | '|') => strong,
        _ => false,
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if opens {
        format!("{lead}\\{rest}")
    } else if strong && digits > 0 && matches!(rest.as_bytes().get(digits), Some(b'.' | b')')) {
        format!("{lead}{}\\{}", &rest[..digits], &rest[digits..])
    } else {
        line.to_string()
    }
}

/// The character and length of a code fence opening `line` (up to three spaces of indent).
fn fence_marker(line: &str) -> Option<(char, usize)> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return None;
    }
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// Whether a fenced code block's source ends with a fence that closes its opening one.
fn fence_closed(block: &str) -> bool {
    let mut lines = block.trim_end_matches(['\n', '\r']).lines();
    let (Some(open), Some(last)) = (lines.next(), lines.next_back()) else { return false };
    let Some((c, n)) = fence_marker(open) else { return false };
    let rest = last.trim_start_matches(' ');
    let run = rest.chars().take_while(|x| *x == c).count();
    last.len() - rest.len() <= 3 && run >= n && rest[run * c.len_utf8()..].trim_matches([' ', '\t']).is_empty()
}

/// The entry `after` would hide that `before` does not (counted per id), as a problem at its
/// line in `after`: writing `after` would put an entry where memfold cannot read it back. Only
/// a block memfold did not write itself (a hand edit, or a file an older version damaged) can
/// do that.
pub fn newly_hidden(before: &str, after: &str, file: &str) -> Option<Problem> {
    let parsed = EntryFile::parse(after, file);
    if parsed.hidden.is_empty() {
        return None;
    }
    let mut allowed: HashMap<String, usize> = HashMap::new();
    for (id, _) in EntryFile::parse(before, file).hidden {
        *allowed.entry(id).or_default() += 1;
    }
    parsed.hidden.into_iter().find_map(|(id, line)| {
        let left = allowed.entry(id.clone()).or_default();
        if *left > 0 {
            *left -= 1;
            return None;
        }
        Some(Problem::new(
            file,
            line,
            format!(
                "entry {id} would be written inside the unclosed block before it and be hidden; nothing was \
                 written (see `memfold verify`: close or escape that block by hand)"
            ),
        ))
    })
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Header,
    Trivia,
    Content,
}

/// Whether a top-level block is code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    None,
    Indented,
    /// `closed` when the block ends with its closing fence (not at the end of the text).
    Fenced {
        closed: bool,
    },
}

/// A top-level block: its byte range, extended to the end of its last line.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    range: Range<usize>,
    kind: BlockKind,
    code: Code,
}

/// Top-level blocks of `text`, as pulldown-cmark sees them. This is the one definition of a
/// block: the parser groups these into entries, and the cleaner checks what it writes with it.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut kind = BlockKind::Content;
    let mut code = Code::None;
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
                    code = Code::None;
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
                        Tag::CodeBlock(CodeBlockKind::Fenced(_)) => {
                            code = Code::Fenced { closed: fence_closed(&text[range.clone()]) };
                            BlockKind::Content
                        }
                        Tag::CodeBlock(CodeBlockKind::Indented) => {
                            code = Code::Indented;
                            BlockKind::Content
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
                    out.push(Block { range: start..to_line_end(end.saturating_sub(1).max(start)), kind, code });
                }
            }
            Event::Rule if depth == 0 => out.push(Block {
                range: to_line_start(range.start)..to_line_end(range.end.saturating_sub(1)),
                kind: BlockKind::Trivia,
                code: Code::None,
            }),
            _ => {}
        }
    }
    out
}

/// The fact ids a broken header still names: every `f-…` between two quotes in it (an edit
/// may have taken a quote away, so which pieces are strings is not known).
fn named_facts(header: &str) -> Vec<String> {
    header
        .split('"')
        .filter(|s| {
            s.len() > 2 && s.starts_with("f-") && s[2..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .map(str::to_string)
        .collect()
}

/// Header lines (offset, entry id) inside a block: a block that is not a closed fence and
/// holds a whole valid header line has swallowed the entry that header starts. A header
/// block's own first line is its header; a later one was swallowed by a header comment left
/// unclosed on its first line (a header a person began and did not finish).
fn hidden_headers(text: &str, block: &Block) -> Vec<(usize, EntryMeta)> {
    let source = &text[block.range.clone()];
    if block.code == (Code::Fenced { closed: true }) || !source.contains(HEADER) {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut at = block.range.start;
    let own = usize::from(block.kind == BlockKind::Header);
    for (i, line) in source.split_inclusive('\n').enumerate() {
        let rest = line.trim_start_matches(' ');
        let header = rest.trim_end();
        if i >= own
            && line.len() - rest.len() <= 3
            && header.starts_with(HEADER)
            && header.ends_with("-->")
            && let Ok(meta) = serde_json::from_str::<EntryMeta>(&header[HEADER.len()..header.len() - 3])
        {
            found.push((at, meta));
        }
        at += line.len();
    }
    found
}

/// The start of the first line in `text[from..to]` that holds more than white space, leaving
/// out the line `from` is in the middle of.
fn first_text_line(text: &str, from: usize, to: usize) -> Option<usize> {
    let mut at = if from == 0 || text[..from].ends_with('\n') { from } else { from + text[from..to].find('\n')? + 1 };
    while at < to {
        let end = text[at..to].find('\n').map_or(to, |i| at + i + 1);
        if !text[at..end].trim().is_empty() {
            return Some(at);
        }
        at = end;
    }
    None
}

/// `text` with every carriage return not followed by `\n` made a `\n`, if it has one.
fn lone_cr_as_lf(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let lone = |i: usize| bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n');
    if !(0..bytes.len()).any(lone) {
        return None;
    }
    let fixed: Vec<u8> = (0..bytes.len()).map(|i| if lone(i) { b'\n' } else { bytes[i] }).collect();
    Some(String::from_utf8(fixed).expect("one ASCII byte for another keeps UTF-8 valid"))
}

/// Whether `text` ends with a blank line (or is one), so that what follows starts a block.
fn ends_in_blank_line(text: &str) -> bool {
    text.strip_suffix('\n').is_some_and(|body| {
        let last = body.rsplit('\n').next().unwrap_or(body);
        last.trim().is_empty()
    })
}

/// Whether the text between two blocks holds a blank line.
fn has_blank_line(gap: &str) -> bool {
    gap.split('\n').skip(1).any(|l| l.trim().is_empty()) || gap.starts_with('\n')
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

    fn parse_text(original: &str, file: &str) -> EntryFile {
        // A lone carriage return ends a line as `\n` does (an old Mac file, pasted text). The
        // scan reads it as `\n`, which keeps every offset; items keep the bytes as they were.
        let scanned = lone_cr_as_lf(original);
        let text = scanned.as_deref().unwrap_or(original);
        // Group blocks into runs.
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
                let header = text[run[0].range.clone()].trim();
                let json = header.trim_start_matches(HEADER).trim_end_matches("-->");
                match serde_json::from_str::<EntryMeta>(json) {
                    Ok(meta) if run.len() > 1 => Item::Entry(Entry {
                        meta,
                        content: body(run[1].range.start),
                        has_header: true,
                        line,
                        raw: Some(raw),
                        mend: false,
                    }),
                    Ok(meta) => {
                        file_out.problems.push(Problem::new(
                            file,
                            line,
                            format!("entry {} has no content; kept as is", meta.id),
                        ));
                        file_out.unreadable_facts.extend(meta.sources);
                        Item::Trivia(raw)
                    }
                    Err(e) => {
                        file_out.problems.push(Problem::new(
                            file,
                            line,
                            format!("broken entry header ({e}); block kept as it is until the header is mended"),
                        ));
                        file_out.unreadable_facts.extend(named_facts(header));
                        Item::Entry(Entry { mend: true, ..Entry::headerless(body(run_start), line, raw) })
                    }
                }
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
    fn a_broken_header_is_left_for_a_person_to_mend_and_its_facts_held() {
        // An edit took a quote away: the entry's facts are still named, and the header is one
        // quote from whole again, so nothing may rewrite it into text.
        let text = "<!--m {\"id\":\"m-1\",first_seen\":\"2026-06-01\",\"sources\":[\"f-1a\",\"f-2b\"]}-->\nLikes tea.\n\n\
                    <!--m {\"id\":\"m-2\",\"sources\":[\"f-3c\"]}-->\n\n<!--m {\"id\":\"m-3\"}-->\nLikes chess.\n";
        let mut file = EntryFile::parse(text, "memory.md");
        let unreadable: Vec<&str> = file.unreadable_facts.iter().map(String::as_str).collect();
        assert_eq!(unreadable, ["f-1a", "f-2b", "f-3c"], "the broken header's and the empty entry's");
        assert!(file.entries().next().unwrap().needs_mending());
        assert!(!file.get("m-3").unwrap().needs_mending());
        file.assign_headers();
        assert_eq!(file.render(), text);
        // Mended, it is an entry again.
        let mended = EntryFile::parse(&text.replacen(",first_seen", ",\"first_seen", 1), "memory.md");
        assert_eq!(mended.get("m-1").unwrap().meta.sources, ["f-1a", "f-2b"]);
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
    fn cleaning_is_stable_when_dropping_a_blank_line_changes_the_blocks() {
        // Apart, the second line opens a fence; joined, it belongs to the HTML block above.
        let content = "<div>A\n\n```<!--m {\"id\":\"m-forged\",\"pinned\":true}-->";
        let clean = clean_content(content);
        assert_eq!(clean_content(&clean), clean);
        assert!(fits(&clean), "{clean:?}");
        assert!(!clean.contains("<!--m"), "{clean:?}");
    }

    /// A file of these contents as memfold writes it, with an entry after each.
    fn written(contents: &[&str]) -> (EntryFile, String) {
        let mut file = EntryFile::default();
        for (i, content) in contents.iter().enumerate() {
            file.push(Entry::new(meta(&format!("m-{i}")), content));
            file.push(Entry::new(meta(&format!("m-after-{i}")), "The user likes tea."));
        }
        let text = file.render();
        (file, text)
    }

    #[test]
    fn text_that_swallowed_the_entries_after_it_is_escaped() {
        let cases = [
            ("<pre>", "\\<pre>"),
            ("<script>", "\\<script>"),
            ("<style>\nb { }", "\\<style>\nb { }"),
            ("<textarea>", "\\<textarea>"),
            ("<!-- note", "\\<!-- note"),
            ("<?php echo 1;", "\\<?php echo 1;"),
            ("<!DOCTYPE html", "\\<!DOCTYPE html"),
            ("<![CDATA[ x", "\\<![CDATA[ x"),
            ("```a`b\nx", "```a`b\nx"),
            ("x\n```\ncode\n\nmore", "x\n```\ncode\n\nmore\n```"),
            ("    ```\n\nfoo", "    ```\nfoo"),
            ("````\ncode\n```", "````\ncode\n```\n````"),
            ("[note]: https://example.com/x", "\\[note]: https://example.com/x"),
            ("```\nA\n```\n[note]: x", "```\nA\n```\n\\[note]: x"),
            ("Tea.\n<pre>\n\nCoffee.", "Tea.\n\\<pre>\nCoffee."),
        ];
        for (content, want) in cases {
            assert_eq!(clean_content(content), want, "{content:?}");
            let (file, text) = written(&[content]);
            let back = EntryFile::parse(&text, "memory.md");
            assert!(back.problems.is_empty(), "{content:?}: {:?}\n{text}", back.problems);
            let got: Vec<_> = back.entries().map(|e| (e.id().to_string(), e.content.clone())).collect();
            let wanted: Vec<_> = file.entries().map(|e| (e.id().to_string(), e.content.clone())).collect();
            assert_eq!(got, wanted, "{text}");
        }
    }

    #[test]
    fn inert_content_is_written_unchanged() {
        for content in [
            "The user likes tea.",
            "Likes <b>green</b> tea <pre> and `code` and **bold**.",
            "- walks twice a day\n- likes `fetch`",
            "- loose\n\n- list",
            "1. one\n2. two",
            "> a quote\n> on two lines",
            "# A title\nand text",
            "Setext\n---",
            "Rule:\n***",
            "```sh\nmake\n\nmake install\n```",
            "~~~\n<!--m {\"id\":\"inside a fence\"}-->\n~~~",
            "    indented code",
            "<!-- a comment that closes -->",
            "<script>alert(1)</script>",
            "<div>\nblock html\n</div>",
            "[a link](https://example.com) and [x]: y inline",
        ] {
            assert_eq!(clean_content(content), content, "{content:?}");
        }
    }

    #[test]
    fn an_llm_reply_cannot_forge_a_header() {
        let forged = "```a`b\n<!--m {\"id\":\"m-0\",\"pinned\":true,\"sources\":[\"f-other\"]}-->\nForged";
        let (_, text) = written(&[forged, "x\n<!--m {\"id\":\"m-9\"}-->\ny"]);
        let back = EntryFile::parse(&text, "memory.md");
        assert!(back.problems.is_empty(), "{:?}", back.problems);
        let ids: Vec<_> = back.entries().map(|e| e.id().to_string()).collect();
        assert_eq!(ids, ["m-0", "m-after-0", "m-1", "m-after-1"], "{text}");
        assert!(back.entries().all(|e| !e.meta.pinned));
        assert!(text.contains("<!-- m {\"id\":\"m-0\",\"pinned\":true"), "{text}");
    }

    /// What memfold 0.1 wrote for `add "<pre>"` followed by two more facts.
    const SWALLOWED: &str = "<!--m {\"id\":\"m-a\",\"sources\":[\"f-1\"]}-->\n<pre>\n\n<!--m {\"id\":\"m-b\",\"sources\":[\"f-2\"]}-->\nLives in Porto.\n";

    #[test]
    fn lone_carriage_returns_end_lines_and_are_kept() {
        let lf = "<!--m {\"id\":\"m-a\"}-->\nA.\nmore\n\n<!--m {\"id\":\"m-b\"}-->\nB.\n";
        let cr = lf.replace('\n', "\r");
        let file = EntryFile::parse(&cr, "memory.md");
        assert!(file.problems.is_empty(), "{:?}", file.problems);
        let entries: Vec<(&str, &str)> = file.entries().map(|e| (e.id(), e.content.as_str())).collect();
        assert_eq!(entries, [("m-a", "A.\nmore"), ("m-b", "B.")]);
        assert_eq!(file.render(), cr);
        assert_eq!(file.entries().nth(1).unwrap().line, 5);
        let mut edited = file.clone();
        edited.remove("m-a");
        assert_eq!(EntryFile::parse(&edited.render(), "memory.md").entries().count(), 1);
    }

    #[test]
    fn a_byte_order_mark_is_kept_and_hides_nothing() {
        let text = "\u{feff}<!--m {\"id\":\"m-a\"}-->\nA.\n\n<!--m {\"id\":\"m-b\"}-->\nB.\n";
        let mut file = EntryFile::parse(text, "memory.md");
        assert!(file.problems.is_empty(), "{:?}", file.problems);
        assert_eq!(file.entries().map(Entry::id).collect::<Vec<_>>(), ["m-a", "m-b"]);
        assert_eq!((file.render().as_str(), file.hash.as_str()), (text, content_hash(text).as_str()));
        file.remove("m-b");
        assert!(file.render().starts_with("\u{feff}<!--m"));
        assert_eq!(EntryFile::parse("\u{feff}", "memory.md").render(), "\u{feff}");
    }

    #[test]
    fn removing_an_entry_never_joins_its_neighbours() {
        let a = "<!--m {\"id\":\"m-a\"}-->\nA.\n";
        let b = "<!--m {\"id\":\"m-b\"}-->\nB.\n";
        for after in ["\nNote.\n", "\n<!-- a comment -->\n", "\n[1]: https://example.com\n", "  \n\n- a list\n"] {
            let text = format!("{a}{b}{after}");
            let mut file = EntryFile::parse(&text, "memory.md");
            assert_eq!(file.render(), text);
            let before: Vec<String> = file.entries().filter(|e| e.id() != "m-b").map(|e| e.content.clone()).collect();
            file.remove("m-b").unwrap();
            let out = file.render();
            let back = EntryFile::parse(&out, "memory.md");
            let after_remove: Vec<String> = back.entries().map(|e| e.content.clone()).collect();
            assert_eq!(after_remove, before, "{out:?}");
            assert!(out.contains(after.trim()), "{out:?}");
        }
    }

    #[test]
    fn text_no_block_holds_survives_rewriting_or_removing_its_neighbour() {
        let text = "[top]: https://example.com/top\n\n<!--m {\"id\":\"m-a\"}-->\nA [x][1].\n\n[1]: https://example.com\n\n<!--m {\"id\":\"m-b\"}-->\n```\ncode\n```\n[2]: https://example.com/2\n";
        let file = EntryFile::parse(text, "memory.md");
        assert!(file.problems.is_empty(), "{:?}", file.problems);
        assert_eq!(file.render(), text);
        for (touch, remove) in [("m-a", None), ("m-b", None), ("m-a", Some("m-b")), ("m-b", Some("m-a"))] {
            let mut edited = file.clone();
            edited.get_mut(touch).unwrap().touch();
            if let Some(id) = remove {
                edited.remove(id);
            }
            let out = edited.render();
            for link in ["[top]: https://example.com/top", "[1]: https://example.com\n", "[2]: https://example.com/2"] {
                assert!(out.contains(link), "{link} lost after touching {touch}, removing {remove:?}:\n{out}");
            }
            let back = EntryFile::parse(&out, "memory.md");
            assert_eq!(back.entries().count(), 2 - usize::from(remove.is_some()), "{out}");
        }
    }

    #[test]
    fn a_header_hidden_by_an_unclosed_block_is_reported() {
        let file = EntryFile::parse(SWALLOWED, "consolidated/memory.md");
        assert_eq!(file.entries().count(), 1, "the file reads as it always did");
        assert_eq!(file.hidden, [("m-b".to_string(), 4)]);
        assert_eq!(
            file.problems[0].to_string(),
            "consolidated/memory.md:4: entry header of m-b is inside the block that starts at line 2 (an unclosed \
             HTML block, fence or comment), so that entry is hidden; close or escape what opens the block"
        );
        // A closed fence holding a header line hides nothing.
        let fenced = "<!--m {\"id\":\"m-a\"}-->\n```\n<!--m {\"id\":\"m-b\"}-->\n```\n";
        assert!(EntryFile::parse(fenced, "memory.md").problems.is_empty());
        // The same in a block without a header is left alone rather than folded together.
        let headerless = SWALLOWED.lines().skip(1).collect::<Vec<_>>().join("\n");
        let mut file = EntryFile::parse(&headerless, "memory.md");
        file.assign_headers();
        assert_eq!(file.render(), headerless);
    }

    #[test]
    fn a_header_swallowed_by_a_half_typed_header_is_hidden_and_left_alone() {
        // A person started a header and did not finish it: the comment runs on to the `-->`
        // that ends the next entry's header, so that entry reads as part of a broken header.
        let text = "<!--m {\"id\":\"m-a\"}-->\nA.\n\n<!--m {\"id\":\"m-12\n<!--m {\"id\":\"m-b\",\"sources\":[\"f-2\"]}-->\nLives in Porto.\n";
        let mut file = EntryFile::parse(text, "memory.md");
        assert_eq!(file.hidden, [("m-b".to_string(), 5)]);
        assert!(file.unreadable_facts.contains("f-2"));
        assert!(
            file.problems.iter().any(|p| p.to_string()
                == "memory.md:5: entry header of m-b is inside the block that starts at line 4 (an unclosed HTML \
                    block, fence or comment), so that entry is hidden; close or escape what opens the block"),
            "{:?}",
            file.problems
        );
        // Giving the typed text a header would clean m-b's header into `<!-- m` for good.
        file.assign_headers();
        assert_eq!(file.render(), text);
    }

    #[test]
    fn writing_after_a_swallowing_block_is_caught() {
        let mut file = EntryFile::parse(SWALLOWED, "memory.md");
        assert_eq!(newly_hidden(SWALLOWED, &file.render(), "memory.md"), None);
        file.push(Entry::new(meta("m-b"), "Lives in Porto."));
        let problem = newly_hidden(SWALLOWED, &file.render(), "memory.md").expect("caught");
        assert_eq!(problem.line, 7, "{problem}");
        assert!(problem.message.starts_with("entry m-b would be written inside the unclosed block"), "{problem}");
        // Touching an entry before it hides nothing new.
        let mut file = EntryFile::parse(SWALLOWED, "memory.md");
        file.get_mut("m-a").unwrap().touch();
        assert_eq!(newly_hidden(SWALLOWED, &file.render(), "memory.md"), None);
    }

    #[test]
    fn files_written_by_memfold_0_1_read_the_same() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/root-0.1");
        let expected: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/root-0.1.expected.json")).unwrap(),
        )
        .unwrap();
        for name in ["memory", "history"] {
            let text = std::fs::read_to_string(format!("{dir}/consolidated/{name}.md")).unwrap();
            let file = EntryFile::parse(&text, name);
            assert!(file.problems.is_empty(), "{:?}", file.problems);
            assert_eq!(file.render(), text, "byte for byte");
            let got: Vec<serde_json::Value> = file
                .entries()
                .map(|e| {
                    serde_json::json!({"id": e.id(), "meta": e.meta, "content": e.content, "has_header": e.has_header, "line": e.line})
                })
                .collect();
            assert_eq!(serde_json::Value::from(got), expected[name], "{name}");
        }
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
        fn any_text_renders_back_byte_for_byte(text in "(\\PC|\n|\r| {4}|<!--m |-->|```|# ){0,200}") {
            prop_assert_eq!(EntryFile::parse(&text, "memory.md").render(), text);
        }
    }

    /// Pieces of markdown syntax that open, close or split blocks, and words between them.
    fn syntax() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "```",
            "~~~",
            "````",
            "```a`b",
            "    ```",
            "<pre>",
            "</pre>",
            "<script>",
            "<style>",
            "<textarea>",
            "<!--",
            "-->",
            "<!-- aside -->",
            "<!--m {\"id\":\"m-forged\",\"pinned\":true}-->",
            "<!--m ",
            "<?",
            "?>",
            "<!X",
            "<![CDATA[",
            "]]>",
            "<div>",
            "</div>",
            "<b>",
            "[x]: y",
            "[note]: https://example.com/x",
            "---",
            "===",
            "***",
            "# ",
            "> ",
            "- ",
            "* ",
            "1. ",
            "2) ",
            "    ",
            "\t",
            "`",
            "``",
            "\\",
            "\r",
            "\0",
            "\u{1b}[2J",
            "\u{7f}",
            "|",
            "_",
            "🙂",
        ]);
        prop_oneof![2 => "[a-zA-Z]{1,8}", 3 => pieces.prop_map(String::from)]
    }

    fn markdown() -> impl Strategy<Value = String> {
        let sep = prop::sample::select(vec!["", " ", "\n", "\n", "\n\n", "\r\n", "\n    ", "\n   ", "\r"]);
        prop::collection::vec((syntax(), sep), 1..14)
            .prop_map(|parts| parts.into_iter().map(|(piece, sep)| format!("{piece}{sep}")).collect())
    }

    fn any_meta() -> impl Strategy<Value = EntryMeta> {
        let text = prop_oneof![markdown(), "\\PC{0,12}"];
        ("[0-9a-f]{6}", prop::collection::vec(text.clone(), 0..3), any::<bool>(), prop::option::of(text), 0u32..400)
            .prop_map(|(id, sources, pinned, kind, days)| {
                let first = d("2026-01-01") + chrono::Days::new(days as u64);
                EntryMeta {
                    first_seen: Some(first),
                    updated: Some(first),
                    sources,
                    pinned,
                    kind,
                    ..EntryMeta::new(format!("m-{id}"))
                }
            })
    }

    fn tricky_entry() -> impl Strategy<Value = Entry> {
        (any_meta(), markdown()).prop_map(|(meta, content)| Entry::new(meta, &content))
    }

    /// A file of distinct entries, after an optional title, with a paragraph typed by hand.
    fn tricky_file() -> impl Strategy<Value = EntryFile> {
        (prop::collection::vec(tricky_entry(), 1..7), any::<bool>(), any::<bool>()).prop_map(
            |(entries, title, hand)| {
                let mut text = if title { "# Memory\n\n".to_string() } else { String::new() };
                if hand {
                    text.push_str("Typed by hand.\n\n");
                }
                let mut file = EntryFile::parse(&text, "memory.md");
                let mut ids = std::collections::HashSet::new();
                for e in entries.into_iter().filter(|e| !e.content.is_empty() && ids.insert(e.id().to_string())) {
                    file.push(e);
                }
                file
            },
        )
    }

    fn summary(file: &EntryFile) -> Vec<(EntryMeta, String)> {
        file.entries().map(|e| (e.meta.clone(), e.content.clone())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn cleaned_content_is_always_one_entry_and_stays_clean(content in markdown()) {
            let clean = clean_content(&content);
            if !content.trim().is_empty() && !clean.is_empty() {
                prop_assert!(fits(&clean), "{:?} -> {:?}", content, clean);
            }
            prop_assert_eq!(clean_content(&clean), clean.clone(), "{:?}", content);
            prop_assert!(!clean.contains(|c: char| c.is_control() && !c.is_whitespace()), "{:?}", clean);
        }

        #[test]
        fn any_entries_render_and_parse_back_with_their_ids_and_metadata(file in tricky_file()) {
            let text = file.render();
            let back = EntryFile::parse(&text, "memory.md");
            prop_assert!(back.problems.is_empty(), "{:?}\n{}", back.problems, text);
            prop_assert_eq!(summary(&back), summary(&file), "{}", text);
            prop_assert_eq!(back.render(), text);
        }

        #[test]
        fn writing_one_entry_never_changes_another_entrys_bytes(
            file in tricky_file(),
            pick in any::<prop::sample::Index>(),
            edit in 0..3u8,
            new in tricky_entry(),
        ) {
            let text = file.render();
            let before = EntryFile::parse(&text, "memory.md");
            let ids: Vec<String> = before.entries().map(|e| e.id().to_string()).collect();
            prop_assume!(!ids.is_empty());
            let target = ids[pick.index(ids.len())].clone();
            let mut after = before.clone();
            match edit {
                0 if !new.content.is_empty() => {
                    let entry = after.get_mut(&target).unwrap();
                    *entry = Entry::new(entry.meta.clone(), &new.content);
                }
                1 => {
                    after.remove(&target);
                }
                _ if !new.content.is_empty() && !ids.contains(&new.meta.id) => after.push(new),
                _ => {}
            }
            let written = after.render();
            let back = EntryFile::parse(&written, "memory.md");
            prop_assert!(back.problems.is_empty(), "{:?}\n{}", back.problems, written);
            prop_assert_eq!(summary(&back), summary(&after), "{}", written);
            for old in before.entries().filter(|e| e.id() != target) {
                let kept = back.get(old.id()).expect("still there");
                prop_assert_eq!(
                    kept.raw.as_deref().map(str::trim_end),
                    old.raw.as_deref().map(str::trim_end),
                    "{}", written
                );
            }
        }
    }
}
