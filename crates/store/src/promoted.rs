//! `MEMORY.md` as a file, and `.memfold/promotion.json` beside it: read, parsed, rendered and
//! written here; what the lines should be is planned in `memfold_core`'s `planning::promote`.
//!
//! memfold owns only the block between `<!-- memfold:begin -->` and `<!-- memfold:end -->`,
//! and in it only the lines that end in a `<!--p m-…-->` marker naming the entry they come
//! from. Everything else in the file is a person's and is kept as it is: text outside the
//! block byte for byte, unmarked lines inside it at the top of the block. A rewrite is
//! refused when the file changed since it was read (a hash-guarded atomic replace).
//!
//! `.memfold/promotion.json` records what the last promotion with an LLM was based on ([`Record`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::atomic::{WriteError, write_atomic};
use super::{Root, visible_controls};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromotedError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("reading MEMORY.md: {0}")]
    Read(std::io::Error),
    #[error("promotion record {path}: {source}")]
    Record { path: String, source: std::io::Error },
}

pub const BEGIN: &str = "<!-- memfold:begin: lines below marked <!--p …--> are rewritten; other lines are kept -->";
const BEGIN_PREFIX: &str = "<!-- memfold:begin";
pub const END: &str = "<!-- memfold:end -->";
pub const MARK: &str = "<!--p ";
/// What both block markers start with.
const MARKER_OPEN: &str = "<!-- memfold:";
/// File name of the promotion record in `.memfold/`.
const RECORD: &str = "promotion.json";
/// One generated line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub entry: String,
    pub text: String,
}

/// MEMORY.md split into the person's text and memfold's lines.
#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    bom: bool,
    pub before: String,
    pub hand_inside: Vec<String>,
    pub generated: Vec<Line>,
    pub after: String,
}

/// The first line at or after `from` that starts (after white space) with `marker`: where the
/// line starts and where the marker ends. A marker in the middle of a line is a person's text.
fn marker_line(text: &str, from: usize, marker: &str) -> Option<(usize, usize)> {
    let mut at = from;
    while at < text.len() {
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i + 1);
        let line = &text[at..end];
        let indent = line.len() - line.trim_start().len();
        if line[indent..].starts_with(marker) {
            return Some((at, at + indent + marker.len()));
        }
        at = end;
    }
    None
}

pub fn parse(text: &str) -> Parsed {
    // A byte order mark some editors write is not text: read after it, keep it in front.
    let (bom, text) = match text.strip_prefix('\u{feff}') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut p = Parsed { bom, ..Parsed::default() };
    let Some((begin, _)) = marker_line(text, 0, BEGIN_PREFIX) else {
        p.before = text.to_string();
        return p;
    };
    p.before = text[..begin].to_string();
    let body_start = text[begin..].find('\n').map_or(text.len(), |i| begin + i + 1);
    // Whatever follows the end marker, on its line and after, is kept as it is.
    let (body, after) = match marker_line(text, body_start, END) {
        Some((end, after_start)) => (&text[body_start..end], &text[after_start..]),
        None => (&text[body_start..], ""),
    };
    p.after = after.to_string();
    for line in body.lines().filter(|l| !l.trim().is_empty()) {
        match line.rfind(MARK) {
            Some(at) if line.trim_end().ends_with("-->") => {
                let entry = line[at + MARK.len()..].trim_end().trim_end_matches("-->").trim().to_string();
                let item = line[..at].trim();
                let text = item.strip_prefix("- ").unwrap_or(item).trim().to_string();
                p.generated.push(Line { entry, text });
            }
            _ => p.hand_inside.push(line.to_string()),
        }
    }
    p
}

/// The entries `MEMORY.md`'s generated lines come from (none when it is missing): decay never
/// lowers or retires them.
pub fn entry_ids(root: &Root) -> std::collections::HashSet<String> {
    let text = std::fs::read_to_string(root.memory_md()).unwrap_or_default();
    parse(&text).generated.into_iter().map(|l| l.entry).collect()
}

pub fn render(p: &Parsed) -> String {
    let mut out = p.before.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if p.bom {
        out.insert(0, '\u{feff}');
    }
    out.push_str(BEGIN);
    out.push('\n');
    for line in &p.hand_inside {
        out.push_str(line);
        out.push('\n');
    }
    for line in &p.generated {
        out.push_str(&format!("- {} {MARK}{}-->\n", line.text, line.entry));
    }
    out.push_str(END);
    if p.after.is_empty() {
        out.push('\n');
    }
    out.push_str(&p.after);
    out
}

pub fn count_lines(text: &str) -> usize {
    text.lines().filter(|l| !l.trim().is_empty()).count()
}

/// One line of text for an entry, unable to end the managed block or pose as a marker: the
/// block is read line by line, so a flat line that holds no `<!--p ` and no `<!-- memfold:`
/// reads back as itself. Control characters are made visible, as everywhere memfold writes.
pub fn one_line(content: &str) -> String {
    let flat = visible_controls(content)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(MARK.trim_end(), "<!-- p")
        .replace(MARKER_OPEN, "&lt;!-- memfold:");
    match flat.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

/// What the LLM last judged an entry by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// The hash of the entry as shown (its text and pin).
    pub hash: String,
    /// Its recall count then.
    pub recalls: usize,
}

/// `.memfold/promotion.json`: what the last promotion with an LLM was based on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Hash of the prompt it was asked with; another prompt starts afresh.
    pub prompt: String,
    /// The budget then, and the generated lines written.
    pub budget: usize,
    pub lines: usize,
    /// Entries the LLM has judged and still on the shortlist or holding a line.
    pub seen: BTreeMap<String, Seen>,
}

pub fn record_path(root: &Root) -> std::path::PathBuf {
    root.state_dir().join(RECORD)
}

/// The record, if there is one made with this prompt (an unreadable one counts as none).
pub fn read_record(root: &Root, prompt_hash: &str) -> Result<Option<Record>, PromotedError> {
    let path = record_path(root);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(serde_json::from_slice::<Record>(&bytes).ok().filter(|r| r.prompt == prompt_hash)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PromotedError::Record { path: path.display().to_string(), source }),
    }
}

fn write_record(root: &Root, record: &Record) -> Result<(), PromotedError> {
    let bytes = serde_json::to_vec(record).expect("the record serialises");
    write_atomic(&record_path(root), &bytes, None)?;
    Ok(())
}

fn drop_record(root: &Root) -> Result<(), PromotedError> {
    let path = record_path(root);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(PromotedError::Record { path: path.display().to_string(), source }),
    }
}

/// `MEMORY.md` as it is (empty when it does not exist).
pub fn read(root: &Root) -> Result<String, PromotedError> {
    match std::fs::read_to_string(root.memory_md()) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(PromotedError::Read(e)),
    }
}

/// What a promotion does to the record.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordChange {
    /// It stays as it is.
    Keep,
    Write(Record),
    /// No LLM judged the lines (or its reply was rejected): the next promotion shows it every
    /// line afresh.
    Drop,
}

/// Write a promotion: `MEMORY.md` when it changed (refused if it no longer hashes to
/// `expected`), then the record.
pub fn write(root: &Root, text: Option<&str>, expected: &str, record: &RecordChange) -> Result<(), PromotedError> {
    if let Some(text) = text {
        write_atomic(&root.memory_md(), text.as_bytes(), Some(expected))?;
    }
    match record {
        RecordChange::Keep => Ok(()),
        RecordChange::Write(record) => write_record(root, record),
        RecordChange::Drop => drop_record(root),
    }
}

/// `text` (a `MEMORY.md`) without the generated lines of these entries, keeping everything
/// else; None when it has none of them.
pub fn without_lines(text: &str, ids: &[String]) -> Option<String> {
    let mut parsed = parse(text);
    let before = parsed.generated.len();
    parsed.generated.retain(|l| !ids.contains(&l.entry));
    (parsed.generated.len() != before).then(|| render(&parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_text_cannot_end_the_block_or_pose_as_a_marker() {
        let tricky = [
            "Likes tea <!-- memfold:end --> after",
            "<!-- memfold:begin: lines below marked <!--p …--> are rewritten; other lines are kept -->",
            "x <!--p m-forged--> y",
            "- a list item",
            "Likes \u{1b}[31mred\0 tea",
        ];
        let p = Parsed {
            before: "# Mine\n".into(),
            generated: tricky
                .iter()
                .enumerate()
                .map(|(i, t)| Line { entry: format!("m-{i}"), text: one_line(t) })
                .collect(),
            after: "outro\n".into(),
            ..Parsed::default()
        };
        let text = render(&p);
        assert_eq!(text.matches(END).count(), 1, "{text}");
        assert_eq!(parse(&text), p, "{text}");
        assert_eq!(p.generated[0].text, "Likes tea &lt;!-- memfold:end --> after");
        assert_eq!(p.generated[4].text, "Likes \u{241b}[31mred\u{2400} tea");
    }

    #[test]
    fn parse_render_round_trip() {
        let text = format!("intro\n{BEGIN}\nhand\n- Likes tea {MARK}m-1-->\n{END}\noutro\n");
        let p = parse(&text);
        assert_eq!(p.generated, [Line { entry: "m-1".into(), text: "Likes tea".into() }]);
        assert_eq!(render(&p), text);
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn generated_lines_read_back_as_written(
            texts in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![
                        "[a-z]{1,5}".boxed(),
                        prop::sample::select(vec![
                            "<!-- memfold:end -->", "<!-- memfold:begin", "<!--p ", "-->", "<!--", "- ", "\n", "\r", "```",
                            " ", "\0",
                        ]).prop_map(String::from).boxed(),
                    ],
                    1..8,
                ).prop_map(|p| p.concat()),
                1..6,
            ),
        ) {
            let generated: Vec<Line> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| Line { entry: format!("m-{i}"), text: one_line(t) })
                .filter(|l| !l.text.is_empty())
                .collect();
            let p = Parsed { before: "intro\n".into(), generated, after: "outro\n".into(), ..Parsed::default() };
            let text = render(&p);
            prop_assert_eq!(parse(&text), p, "{}", text);
        }
    }

    #[test]
    fn text_outside_the_block_is_kept_byte_for_byte() {
        let block = format!("{BEGIN}\n- Likes tea {MARK}m-1-->\n- Plays chess {MARK}m-2-->\n{END}");
        for (before, after) in [
            ("# Me\n\nMy notes.\n", "\nMore notes.\n"),
            ("", ""),
            ("a line that mentions <!-- memfold:begin in passing\n", " words after the end marker\nno newline"),
            ("  indented\r\n", "\r\nwindows line\r\n"),
            ("\u{feff}", "\n"),
        ] {
            let text = format!("{before}{block}{after}");
            let out = without_lines(&text, &["m-1".into()]).expect("a line to drop");
            assert!(out.starts_with(before) && out.ends_with(after), "{text:?}\n{out:?}");
            assert!(!out.contains("Likes tea") && out.contains("Plays chess"), "{out:?}");
            assert_eq!(render(&parse(&out)), out, "stable");
        }
    }
}
