//! The block scan: the top-level markdown blocks of an entry file, as pulldown-cmark sees them.
//!
//! This is the one definition of a block: [`super::EntryFile::parse`] groups these into entries,
//! and the cleaner ([`super::clean`]) checks what it writes with it.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::{EntryMeta, HEADER};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockKind {
    Header,
    Trivia,
    Content,
}

/// Whether a top-level block is code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Code {
    None,
    Indented,
    /// `closed` when the block ends with its closing fence (not at the end of the text).
    Fenced {
        closed: bool,
    },
}

/// A top-level block: its byte range, extended to the end of its last line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    pub(super) range: Range<usize>,
    pub(super) kind: BlockKind,
    pub(super) code: Code,
}

/// Top-level blocks of `text`, as pulldown-cmark sees them. This is the one definition of a
/// block: the parser groups these into entries, and the cleaner checks what it writes with it.
pub(super) fn blocks(text: &str) -> Vec<Block> {
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
pub(super) fn named_facts(header: &str) -> Vec<String> {
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
pub(super) fn hidden_headers(text: &str, block: &Block) -> Vec<(usize, EntryMeta)> {
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
pub(super) fn first_text_line(text: &str, from: usize, to: usize) -> Option<usize> {
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
pub(super) fn lone_cr_as_lf(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let lone = |i: usize| bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n');
    if !(0..bytes.len()).any(lone) {
        return None;
    }
    let fixed: Vec<u8> = (0..bytes.len()).map(|i| if lone(i) { b'\n' } else { bytes[i] }).collect();
    Some(String::from_utf8(fixed).expect("one ASCII byte for another keeps UTF-8 valid"))
}

/// Whether `text` ends with a blank line (or is one), so that what follows starts a block.
pub(super) fn ends_in_blank_line(text: &str) -> bool {
    text.strip_suffix('\n').is_some_and(|body| {
        let last = body.rsplit('\n').next().unwrap_or(body);
        last.trim().is_empty()
    })
}

/// Whether the text between two blocks holds a blank line.
pub(super) fn has_blank_line(gap: &str) -> bool {
    gap.split('\n').skip(1).any(|l| l.trim().is_empty()) || gap.starts_with('\n')
}

/// The character and length of a code fence opening `line` (up to three spaces of indent).
pub(super) fn fence_marker(line: &str) -> Option<(char, usize)> {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return None;
    }
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

/// Whether a fenced code block's source ends with a fence that closes its opening one.
pub(super) fn fence_closed(block: &str) -> bool {
    let mut lines = block.trim_end_matches(['\n', '\r']).lines();
    let (Some(open), Some(last)) = (lines.next(), lines.next_back()) else { return false };
    let Some((c, n)) = fence_marker(open) else { return false };
    let rest = last.trim_start_matches(' ');
    let run = rest.chars().take_while(|x| *x == c).count();
    last.len() - rest.len() <= 3 && run >= n && rest[run * c.len_utf8()..].trim_matches([' ', '\t']).is_empty()
}
