//! `MEMORY.md`: the few highest-value facts, rewritten from entries and what gets recalled.
//!
//! memfold owns only the block between `<!-- memfold:begin -->` and `<!-- memfold:end -->`,
//! and in it only the lines that end in a `<!--p m-…-->` marker naming the entry they come
//! from. Everything else in the file is a person's and is kept as it is: text outside the
//! block byte for byte, unmarked lines inside it at the top of the block. The cap
//! `memory_max_lines` counts every non-blank line but the two markers, hand lines first, so
//! the file never exceeds it unless a person's own lines do.
//!
//! With an LLM, `prompts/promote.md` chooses and words the lines; a reply that names an
//! entry that is not current, exceeds the cap, is empty or does not parse is rejected and
//! the offline ranking is used instead: pinned first, then most recalled, then most
//! recently updated. Lines are regenerated from current entries after every pass, so a
//! corrected fact never outlives its correction here.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::Config;
use crate::files::atomic::{WriteError, write_atomic};
use crate::files::entries::Entry;
use crate::files::{Root, content_hash};
use crate::ledger::{Ledger, LedgerError};
use crate::llm::{ChatClient, Usage, parse_json_reply};

const BEGIN: &str = "<!-- memfold:begin: lines below marked <!--p …--> are rewritten; other lines are kept -->";
const BEGIN_PREFIX: &str = "<!-- memfold:begin";
const END: &str = "<!-- memfold:end -->";
const MARK: &str = "<!--p ";
/// What both block markers start with.
const MARKER_OPEN: &str = "<!-- memfold:";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromoteError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("reading MEMORY.md: {0}")]
    Read(std::io::Error),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

/// What a promotion wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PromoteReport {
    pub lines: usize,
    pub hand_lines: usize,
    /// `llm` or `offline`.
    pub source: &'static str,
    /// Why an LLM reply was not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    pub llm: Usage,
}

/// One generated line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub entry: String,
    pub text: String,
}

#[derive(Debug, Deserialize)]
struct Reply {
    lines: Vec<Line>,
}

/// MEMORY.md split into the person's text and memfold's lines.
#[derive(Debug, Default, PartialEq)]
struct Parsed {
    before: String,
    hand_inside: Vec<String>,
    generated: Vec<Line>,
    after: String,
}

fn parse(text: &str) -> Parsed {
    let mut p = Parsed::default();
    let Some(begin) = text.find(BEGIN_PREFIX) else {
        p.before = text.to_string();
        return p;
    };
    p.before = text[..begin].to_string();
    let body_start = text[begin..].find('\n').map_or(text.len(), |i| begin + i + 1);
    let (body, after) = match text[body_start..].find(END) {
        Some(i) => {
            let end = body_start + i;
            let after_start = text[end..].find('\n').map_or(text.len(), |j| end + j + 1);
            (&text[body_start..end], &text[after_start..])
        }
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

fn render(p: &Parsed) -> String {
    let mut out = p.before.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
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
    out.push('\n');
    out.push_str(&p.after);
    out
}

fn count_lines(text: &str) -> usize {
    text.lines().filter(|l| !l.trim().is_empty()).count()
}

/// One line of text for an entry, unable to end the managed block or pose as a marker: the
/// block is read line by line, so a flat line that holds no `<!--p ` and no `<!-- memfold:`
/// reads back as itself.
fn one_line(content: &str) -> String {
    let flat = content
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

/// The offline ranking: pinned, then most recalled, then most recently updated.
pub fn rank<'a>(entries: &[&'a Entry], recalled: &HashMap<String, usize>) -> Vec<&'a Entry> {
    let mut ranked = entries.to_vec();
    ranked.sort_by(|a, b| {
        let key = |e: &Entry| {
            (e.meta.pinned, recalled.get(e.id()).copied().unwrap_or(0), e.meta.updated.or(e.meta.first_seen))
        };
        key(b).cmp(&key(a)).then_with(|| a.id().cmp(b.id()))
    });
    ranked
}

/// Check an LLM reply: known current entries only, within the cap, not empty.
fn check_reply(reply: &Reply, current: &HashSet<&str>, budget: usize) -> Result<Vec<Line>, String> {
    if reply.lines.is_empty() {
        return Err("reply has no lines".into());
    }
    if reply.lines.len() > budget {
        return Err(format!("reply has {} lines, the cap leaves {budget}", reply.lines.len()));
    }
    let mut lines = Vec::with_capacity(reply.lines.len());
    for line in &reply.lines {
        if !current.contains(line.entry.as_str()) {
            return Err(format!("line names {}, which is not a current entry", line.entry));
        }
        let text = one_line(&line.text);
        if !text.chars().any(char::is_alphanumeric) {
            return Err(format!("line for {} is empty", line.entry));
        }
        lines.push(Line { entry: line.entry.clone(), text });
    }
    Ok(lines)
}

/// Rewrite MEMORY.md from the current entries and the recall log.
pub async fn promote(
    root: &Root,
    config: &Config,
    llm: Option<(&ChatClient, &str)>,
) -> Result<PromoteReport, PromoteError> {
    let ledger = Ledger::load(root)?;
    let recalled = crate::recall::summary(root, config.recall.window_days)?;
    let before_text = match std::fs::read_to_string(root.memory_md()) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(PromoteError::Read(e)),
    };
    let expected = content_hash(&before_text);
    let mut parsed = parse(&before_text);
    let hand_lines = count_lines(&parsed.before) + count_lines(&parsed.after) + parsed.hand_inside.len();
    let budget = config.promotion.memory_max_lines.saturating_sub(hand_lines);
    let entries: Vec<&Entry> = ledger.memory.entries().collect();
    let ranked = rank(&entries, &recalled);
    let mut report = PromoteReport { hand_lines, source: "offline", ..Default::default() };
    let mut lines: Option<Vec<Line>> = None;
    if let (Some((client, prompt)), true) = (llm, budget > 0 && !ranked.is_empty()) {
        let shown: Vec<_> = ranked
            .iter()
            .take(budget * 3)
            .map(|e| {
                json!({"id": e.id(), "content": e.content, "recalled": recalled.get(e.id()).copied().unwrap_or(0),
                       "updated": e.meta.updated, "pinned": e.meta.pinned})
            })
            .collect();
        let user = json!({"max_lines": budget, "entries": shown}).to_string();
        let current: HashSet<&str> = entries.iter().map(|e| e.id()).collect();
        match client.complete_json(prompt, &user).await {
            Ok(reply) => {
                report.llm.add(reply.usage);
                match parse_json_reply::<Reply>(&reply.content).and_then(|r| check_reply(&r, &current, budget)) {
                    Ok(ok) => {
                        lines = Some(ok);
                        report.source = "llm";
                    }
                    Err(why) => report.rejected = Some(why),
                }
            }
            Err(e) => report.rejected = Some(e.to_string()),
        }
        if let Some(why) = &report.rejected {
            tracing::warn!(reason = %why, "promotion reply rejected; using the offline ranking");
        }
    }
    parsed.generated = lines.unwrap_or_else(|| {
        ranked.iter().take(budget).map(|e| Line { entry: e.id().to_string(), text: one_line(&e.content) }).collect()
    });
    report.lines = parsed.generated.len();
    let text = render(&parsed);
    if text != before_text {
        write_atomic(&root.memory_md(), text.as_bytes(), Some(&expected))?;
    }
    Ok(report)
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
    use crate::files::entries::{EntryFile, EntryMeta};
    use crate::testkit::{FakeOpenAi, FakeReply};

    fn setup(entries: &[(&str, &str, bool, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let mut memory = EntryFile::default();
        for (id, text, pinned, updated) in entries {
            let meta = EntryMeta { pinned: *pinned, updated: Some(updated.parse().unwrap()), ..EntryMeta::new(*id) };
            memory.push(Entry::new(meta, text));
        }
        std::fs::write(root.memory(), memory.render()).unwrap();
        (dir, root)
    }

    fn config(cap: usize) -> Config {
        let mut c = Config::default();
        c.promotion.memory_max_lines = cap;
        c
    }

    fn generated(root: &Root) -> Vec<String> {
        parse(&std::fs::read_to_string(root.memory_md()).unwrap()).generated.into_iter().map(|l| l.entry).collect()
    }

    #[tokio::test]
    async fn offline_ranks_pinned_then_recalled_then_recent_within_the_cap() {
        let (_d, root) = setup(&[
            ("m-old", "Old fact", false, "2026-01-01"),
            ("m-new", "New fact", false, "2026-06-01"),
            ("m-pin", "Pinned fact", true, "2025-01-01"),
            ("m-hot", "Recalled fact", false, "2025-06-01"),
        ]);
        crate::recall::record(&root, "q", &["m-hot".into(), "m-hot".into()], 30).unwrap();
        let report = promote(&root, &config(3), None).await.unwrap();
        assert_eq!(report.lines, 3);
        assert_eq!(generated(&root), ["m-pin", "m-hot", "m-new"]);
    }

    #[tokio::test]
    async fn hand_lines_are_kept_and_count_against_the_cap() {
        let (_d, root) = setup(&[("m-a", "A", false, "2026-01-01"), ("m-b", "B", false, "2026-01-02")]);
        std::fs::write(root.memory_md(), "# About me\nAlways answer in French.\n").unwrap();
        promote(&root, &config(3), None).await.unwrap();
        let text = std::fs::read_to_string(root.memory_md()).unwrap();
        assert!(text.starts_with("# About me\nAlways answer in French.\n<!-- memfold:begin"), "{text}");
        assert_eq!(generated(&root), ["m-b"], "two hand lines leave room for one");
        // A line typed inside the block is kept too, and the rewrite is stable.
        let edited = text.replace(END, &format!("Call me Jo.\n{END}"));
        std::fs::write(root.memory_md(), &edited).unwrap();
        promote(&root, &config(10), None).await.unwrap();
        let again = std::fs::read_to_string(root.memory_md()).unwrap();
        assert!(again.contains("Call me Jo.\n"));
        assert_eq!(count_lines(&again) - 2, 5);
        promote(&root, &config(10), None).await.unwrap();
        assert_eq!(std::fs::read_to_string(root.memory_md()).unwrap(), again, "idempotent");
    }

    #[tokio::test]
    async fn llm_lines_are_used_when_valid_and_junk_falls_back() {
        let (_d, root) =
            setup(&[("m-a", "Works at Microsoft", false, "2026-01-01"), ("m-b", "Likes tea", false, "2026-01-02")]);
        let llm = FakeOpenAi::start().await;
        let client = ChatClient::from_config(&llm.llm_config()).unwrap().unwrap();
        llm.push_chat(FakeReply::Content(r#"{"lines":[{"entry":"m-a","text":"Works at Microsoft."}]}"#.into()));
        let report = promote(&root, &config(5), Some((&client, "p"))).await.unwrap();
        assert_eq!((report.source, report.lines), ("llm", 1));
        for junk in [
            r#"{"lines":[]}"#,
            "not json",
            r#"{"lines":[{"entry":"m-zzz","text":"Invented"}]}"#,
            r#"{"lines":[{"entry":"m-a","text":"1"},{"entry":"m-b","text":"2"},{"entry":"m-a","text":"3"}]}"#,
        ] {
            llm.push_chat(FakeReply::Content(junk.into()));
            let report = promote(&root, &config(2), Some((&client, "p"))).await.unwrap();
            assert_eq!(report.source, "offline", "{junk}");
            assert!(report.rejected.is_some());
            assert_eq!(generated(&root), ["m-b", "m-a"]);
        }
    }

    #[test]
    fn entry_text_cannot_end_the_block_or_pose_as_a_marker() {
        let tricky = [
            "Likes tea <!-- memfold:end --> after",
            "<!-- memfold:begin: lines below marked <!--p …--> are rewritten; other lines are kept -->",
            "x <!--p m-forged--> y",
            "- a list item",
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
}
