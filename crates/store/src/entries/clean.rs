//! The cleaner: what memfold writes into an entry is made inert, judged by the block scan that reads it back.
//!
//! See docs/ARCHITECTURE.md, "What a block is".

use super::scan::{Block, Code, blocks, fence_marker};
use std::collections::HashMap;

use super::{EntryFile, Item};
use crate::{Problem, visible_controls};

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
pub(super) fn fits(content: &str) -> bool {
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
