//! Planning `MEMORY.md`: the few highest-value facts, chosen from entries and what gets recalled.
//!
//! The file's format (the block of memfold's lines among a person's text) is
//! [`memfold_store::promoted`]'s; this module decides the lines and writes nothing. The cap
//! `memory_max_lines` counts every non-blank line but the two markers, hand lines first, so
//! the file never exceeds it unless a person's own lines do; the lines it leaves for memfold
//! are the *budget*.
//!
//! **Offline** (no LLM) every promotion writes the offline ranking: pinned first, then most
//! recalled, then most recently updated, each line its entry's current text.
//!
//! **With an LLM** (`prompts/promote.md`) the LLM chooses and words the lines, and is asked
//! only about what changed since it last looked. `.memfold/promotion.json` records the
//! entries it has judged (by a hash of their text and pin, and the recall count it saw). A
//! promotion drops the lines of entries that are gone and the least important lines over the
//! budget, then sends the LLM, as entries with their current text:
//! - every line whose entry changed (replaced, re-worded, pinned or unpinned), so a corrected
//!   fact never outlives its correction here;
//! - the entries of the offline ranking's top [`SHORTLIST`] × *budget* (the shortlist) that it
//!   has not judged, or not in their current form, or whose recall count has more than doubled
//!   (and reached 3) since;
//! - after lines were dropped from a full file, the best-ranked entries without a line.
//!
//! At most *budget* entries go in one call (changed lines first, then by rank; the rest wait
//! for the next promotion), with the least important unchanged lines (as many as entries, at
//! least [`POOL_MIN`]) that they may displace. The reply replaces those lines; the lines above
//! them stay in place (a changed one as the reply words it), and pinned lines move first. With
//! nothing to send there is no call and the lines stand. A call's size therefore follows what
//! changed, never the size of the memory.
//!
//! A reply that names an entry it was not shown, repeats one, exceeds the lines it may have,
//! is empty or does not parse is rejected: the offline ranking is written instead and the
//! record is dropped, so the next promotion with an LLM shows it every line afresh.

use memfold_store::egress::Purpose;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::json;

use memfold_models::llm::{ChatClient, Usage, parse_json_reply};
use memfold_store::config::Config;
use memfold_store::content_hash;
use memfold_store::entries::Entry;
use memfold_store::promoted::{Line, Record, RecordChange, Seen, count_lines, one_line, parse, render};

/// The offline ranking's top `SHORTLIST` × budget entries are the ones the LLM judges.
pub const SHORTLIST: usize = 3;
/// Current lines an LLM call shows at least (when there are that many), so that even one new
/// entry is weighed against some of what is there.
pub const POOL_MIN: usize = 5;

/// What a promotion wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PromoteReport {
    pub lines: usize,
    pub hand_lines: usize,
    /// `llm`, `offline`, or `kept` (an LLM is configured but nothing it would be asked about
    /// changed, so it was not asked).
    pub source: &'static str,
    /// Why an LLM reply was not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    pub llm: Usage,
}

#[derive(Debug, Deserialize)]
struct Reply {
    lines: Vec<Line>,
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

/// The offline lines: the first `budget` of the ranking, each its entry's text.
fn offline_lines(ranked: &[&Entry], budget: usize) -> Vec<Line> {
    ranked.iter().take(budget).map(|e| Line { entry: e.id().to_string(), text: one_line(&e.content) }).collect()
}

/// What the LLM judges an entry by, besides its recall count: its text and whether it is pinned.
fn entry_hash(e: &Entry) -> String {
    content_hash(format!("{}\n{}", e.meta.pinned, e.content))
}

/// Whether a recall count has moved enough since the LLM saw `then` to show the entry again:
/// to more than twice `then`, and to at least 3.
fn recall_moved(then: usize, now: usize) -> bool {
    now > 2 * then.max(1)
}

/// One question for the LLM, and how its answer fits into the current lines.
#[derive(Debug)]
struct Ask<'a> {
    /// The current lines (gone entries and lines over the budget dropped), in order.
    current: Vec<Line>,
    /// Entries of current lines that changed since the LLM judged them.
    changed: HashSet<String>,
    /// The least important unchanged lines, shown and replaced by the answer.
    pool: Vec<Line>,
    /// Entries to show with their text: changed lines first, then candidates by rank.
    send: Vec<&'a Entry>,
    /// Lines the answer may have: the budget less the lines it does not see.
    max_lines: usize,
}

/// Decide what to ask (pure): see the module documentation for the rules.
fn plan<'a>(
    generated: &[Line],
    ranked: &[&'a Entry],
    recalled: &HashMap<String, usize>,
    budget: usize,
    record: Option<&Record>,
) -> Ask<'a> {
    let by_id: HashMap<&str, &Entry> = ranked.iter().map(|e| (e.id(), *e)).collect();
    let mut held = HashSet::new();
    let mut current: Vec<Line> = generated
        .iter()
        .filter(|l| by_id.contains_key(l.entry.as_str()) && held.insert(l.entry.clone()))
        .cloned()
        .collect();
    current.truncate(budget);
    let seen = |id: &str| record.and_then(|r| r.seen.get(id));
    let changed: HashSet<String> = current
        .iter()
        .filter(|l| seen(&l.entry).is_none_or(|s| s.hash != entry_hash(by_id[l.entry.as_str()])))
        .map(|l| l.entry.clone())
        .collect();
    let has_line: HashSet<&str> = current.iter().map(|l| l.entry.as_str()).collect();

    let mut send: Vec<&Entry> =
        current.iter().filter(|l| changed.contains(&l.entry)).map(|l| by_id[l.entry.as_str()]).collect();
    // Candidates, best-ranked first: what the LLM has not judged in its current form or whose
    // recalls moved, and after lines were dropped from a full file, enough others to refill it.
    let was_full = record.is_some_and(|r| r.lines >= r.budget);
    let mut refill = if was_full { budget.saturating_sub(current.len()) } else { 0 };
    let mut candidates: Vec<&Entry> = Vec::new();
    for e in ranked.iter().take(SHORTLIST * budget).filter(|e| !has_line.contains(e.id())) {
        let recalls = recalled.get(e.id()).copied().unwrap_or(0);
        let stale = seen(e.id()).is_none_or(|s| s.hash != entry_hash(e) || recall_moved(s.recalls, recalls));
        if stale {
            candidates.push(e);
        } else if refill > 0 {
            refill -= 1;
            candidates.push(e);
        }
    }
    candidates.truncate(budget.saturating_sub(send.len()));
    send.extend(candidates);

    let unchanged: Vec<&Line> = current.iter().filter(|l| !changed.contains(&l.entry)).collect();
    let shown = unchanged.len().min(send.len().max(POOL_MIN));
    let pool: Vec<Line> = unchanged[unchanged.len() - shown..].iter().map(|l| (*l).clone()).collect();
    let max_lines = budget - (unchanged.len() - shown);
    Ask { current, changed, pool, send, max_lines }
}

impl Ask<'_> {
    /// The user message: `{"max_lines","lines":[{"entry","text"}],"entries":[{"id","content","updated",
    /// "pinned"?,"recalls"?}]}`.
    fn message(&self, recalled: &HashMap<String, usize>) -> String {
        let entries: Vec<serde_json::Value> = self
            .send
            .iter()
            .map(|e| {
                let mut v =
                    json!({"id": e.id(), "content": e.content, "updated": e.meta.updated.or(e.meta.first_seen)});
                if e.meta.pinned {
                    v["pinned"] = json!(true);
                }
                if let Some(&n) = recalled.get(e.id()).filter(|n| **n > 0) {
                    v["recalls"] = json!(n);
                }
                v
            })
            .collect();
        json!({"max_lines": self.max_lines, "lines": self.pool, "entries": entries}).to_string()
    }

    /// Check a reply: only shown entries, each once, within `max_lines`, not empty.
    fn check(&self, reply: &Reply) -> Result<Vec<Line>, String> {
        if reply.lines.is_empty() {
            return Err("reply has no lines".into());
        }
        if reply.lines.len() > self.max_lines {
            return Err(format!("reply has {} lines, {} are allowed", reply.lines.len(), self.max_lines));
        }
        let shown: HashSet<&str> =
            self.pool.iter().map(|l| l.entry.as_str()).chain(self.send.iter().map(|e| e.id())).collect();
        let mut named = HashSet::new();
        let mut lines = Vec::with_capacity(reply.lines.len());
        for line in &reply.lines {
            if !shown.contains(line.entry.as_str()) {
                return Err(format!("line names {}, which it was not shown", line.entry));
            }
            if !named.insert(line.entry.as_str()) {
                return Err(format!("line names {} twice", line.entry));
            }
            let text = one_line(&line.text);
            if !text.chars().any(char::is_alphanumeric) {
                return Err(format!("line for {} is empty", line.entry));
            }
            lines.push(Line { entry: line.entry.clone(), text });
        }
        Ok(lines)
    }

    /// The new lines: the lines above the first shown one stay in place (a changed one as the
    /// reply words it, or dropped), then the reply in its order, which ranks what it was shown;
    /// pinned entries' lines first.
    fn merge(&self, reply: Vec<Line>, pinned: &HashSet<&str>) -> Vec<Line> {
        let pool: HashSet<&str> = self.pool.iter().map(|l| l.entry.as_str()).collect();
        let mut answered: HashMap<String, Line> = reply.iter().map(|l| (l.entry.clone(), l.clone())).collect();
        let mut out = Vec::with_capacity(self.current.len() + reply.len());
        for line in self.current.iter().take_while(|l| !pool.contains(l.entry.as_str())) {
            match self.changed.contains(&line.entry) {
                true => out.extend(answered.remove(&line.entry)),
                false => out.push(line.clone()),
            }
        }
        // The pool is the last unchanged lines, so below its first line there are only pool
        // lines and changed ones, all of them shown.
        out.extend(reply.into_iter().filter(|l| answered.contains_key(&l.entry)));
        let (mut first, rest): (Vec<Line>, Vec<Line>) =
            out.into_iter().partition(|l| pinned.contains(l.entry.as_str()));
        first.extend(rest);
        first
    }
}

/// What a promotion read: the entries, their recall counts, `MEMORY.md` as it is, and the
/// record of the last promotion with the LLM's prompt (None without one, or without an LLM).
pub struct PromoteInput<'a> {
    pub entries: Vec<&'a Entry>,
    pub recalled: &'a HashMap<String, usize>,
    pub before_text: &'a str,
    pub last: Option<Record>,
}

/// A planned promotion: the new `MEMORY.md` (None when it stays as it is), the hash it must
/// still have when written, and what becomes of the record.
#[derive(Debug)]
pub struct Promotion {
    pub text: Option<String>,
    pub expected: String,
    pub record: RecordChange,
    pub report: PromoteReport,
}

/// Plan `MEMORY.md` from the current entries and the recall log; with an LLM, ask it about
/// what changed since it last looked (see the module documentation). Writes nothing.
pub async fn promote(input: PromoteInput<'_>, config: &Config, llm: Option<(&ChatClient, &str)>) -> Promotion {
    let PromoteInput { entries, recalled, before_text, last } = input;
    // A credential never goes into every prompt: an entry holding one (let in by
    // `ingest.secrets = "allow"`, or typed by hand) is never promoted.
    let entries: Vec<&Entry> =
        entries.into_iter().filter(|e| memfold_store::secrets::find(&e.content).is_empty()).collect();
    let recalled = recalled.clone();
    let expected = content_hash(before_text);
    let mut parsed = parse(before_text);
    let hand_lines = count_lines(&parsed.before) + count_lines(&parsed.after) + parsed.hand_inside.len();
    let budget = config.promotion.memory_max_lines.saturating_sub(hand_lines);
    let ranked = rank(&entries, &recalled);
    let mut report = PromoteReport { hand_lines, source: "offline", ..Default::default() };
    let mut record: Option<Record> = None;
    let mut unchanged_record: Option<Record> = None;
    let mut lines: Option<Vec<Line>> = None;
    if let (Some((client, prompt)), true) = (llm, budget > 0 && !ranked.is_empty()) {
        let prompt_hash = content_hash(prompt);
        unchanged_record = last.clone();
        let ask = plan(&parsed.generated, &ranked, &recalled, budget, last.as_ref());
        let mut judged: Vec<&Entry> = Vec::new();
        if ask.send.is_empty() {
            report.source = "kept";
            lines = Some(ask.current.clone());
        } else {
            match client.complete_json(Purpose::Promote, prompt, &ask.message(&recalled)).await {
                Ok(reply) => {
                    report.llm.add(reply.usage);
                    match parse_json_reply::<Reply>(&reply.content).and_then(|r| ask.check(&r)) {
                        Ok(answer) => {
                            let pinned: HashSet<&str> =
                                entries.iter().filter(|e| e.meta.pinned).map(|e| e.id()).collect();
                            lines = Some(ask.merge(answer, &pinned));
                            judged = ask.send.clone();
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
        if let Some(lines) = &lines {
            // Keep what the LLM judged while it still matters: on the shortlist or holding a
            // line; an entry that leaves the shortlist and comes back is shown again.
            let keep: HashSet<&str> = ranked
                .iter()
                .take(SHORTLIST * budget)
                .map(|e| e.id())
                .chain(lines.iter().map(|l| l.entry.as_str()))
                .collect();
            let mut seen: BTreeMap<String, Seen> = last
                .map(|r| r.seen)
                .unwrap_or_default()
                .into_iter()
                .filter(|(id, _)| keep.contains(id.as_str()))
                .collect();
            for e in judged {
                let recalls = recalled.get(e.id()).copied().unwrap_or(0);
                seen.insert(e.id().to_string(), Seen { hash: entry_hash(e), recalls });
            }
            record = Some(Record { prompt: prompt_hash, budget, lines: lines.len(), seen });
        }
    }
    parsed.generated = lines.unwrap_or_else(|| offline_lines(&ranked, budget));
    report.lines = parsed.generated.len();
    let text = render(&parsed);
    let record = match record {
        Some(record) if unchanged_record.as_ref() != Some(&record) => RecordChange::Write(record),
        Some(_) => RecordChange::Keep,
        None => RecordChange::Drop,
    };
    Promotion { text: (text != before_text).then_some(text), expected, record, report }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::promote_root as promote;
    use memfold_models::testkit::{FakeOpenAi, FakeReply};
    use memfold_store::Root;
    use memfold_store::entries::{EntryFile, EntryMeta};
    use memfold_store::ledger::Ledger;
    use memfold_store::promoted::{END, record_path};

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
        memfold_store::recall::record(&root, "q", &["m-hot".into(), "m-hot".into()], 30).unwrap();
        let report = promote(&root, &config(3), None).await.unwrap();
        assert_eq!(report.lines, 3);
        assert_eq!(generated(&root), ["m-pin", "m-hot", "m-new"]);
    }

    #[tokio::test]
    async fn a_block_to_mend_is_not_promoted() {
        let (_d, root) = setup(&[("m-a", "A", false, "2026-01-01"), ("m-b", "B", false, "2026-06-01")]);
        let text = std::fs::read_to_string(root.memory()).unwrap();
        std::fs::write(root.memory(), text.replacen("{\"id\":\"m-b\"", "{\"id\":\"m-b\",,", 1)).unwrap();
        assert!(Ledger::load(&root).unwrap().memory.entries().any(|e| e.needs_mending()));
        promote(&root, &config(5), None).await.unwrap();
        assert_eq!(generated(&root), ["m-a"]);
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
        assert!(record_path(&root).exists());
        for junk in [
            r#"{"lines":[]}"#,
            "not json",
            r#"{"lines":[{"entry":"m-zzz","text":"Invented"}]}"#,
            r#"{"lines":[{"entry":"m-a","text":"1"},{"entry":"m-b","text":"2"},{"entry":"m-a","text":"3"}]}"#,
            r#"{"lines":[{"entry":"m-a","text":"1"},{"entry":"m-a","text":"2"}]}"#,
        ] {
            // Without a record (a rejection drops it) every line is shown again, so there is a call.
            let _ = std::fs::remove_file(record_path(&root));
            llm.push_chat(FakeReply::Content(junk.into()));
            let calls = llm.chat_calls();
            let report = promote(&root, &config(2), Some((&client, "p"))).await.unwrap();
            assert_eq!(llm.chat_calls(), calls + 1, "{junk}");
            assert_eq!(report.source, "offline", "{junk}");
            assert!(report.rejected.is_some());
            assert_eq!(generated(&root), ["m-b", "m-a"]);
            assert!(!record_path(&root).exists(), "a rejected reply drops the record");
        }
    }

    fn replace_entry(root: &Root, id: &str, content: &str, updated: &str) {
        let text = std::fs::read_to_string(root.memory()).unwrap();
        let mut memory = EntryFile::parse(&text, "memory.md");
        let updated = Some(updated.parse().unwrap());
        let found = match memory.entries_mut().find(|e| e.id() == id) {
            Some(e) => {
                e.content = content.to_string();
                e.meta.updated = updated;
                e.touch();
                true
            }
            None => false,
        };
        if !found {
            memory.push(Entry::new(EntryMeta { updated, ..EntryMeta::new(id) }, content));
        }
        std::fs::write(root.memory(), memory.render()).unwrap();
    }

    fn remove_entry(root: &Root, id: &str) {
        let text = std::fs::read_to_string(root.memory()).unwrap();
        let mut memory = EntryFile::default();
        EntryFile::parse(&text, "memory.md").entries().filter(|e| e.id() != id).for_each(|e| memory.push(e.clone()));
        std::fs::write(root.memory(), memory.render()).unwrap();
    }

    /// The user message of the last chat request.
    fn last_ask(llm: &FakeOpenAi) -> serde_json::Value {
        let request = llm.chat_requests().pop().expect("a chat request");
        serde_json::from_str(request["messages"][1]["content"].as_str().unwrap()).unwrap()
    }

    fn ids(list: &serde_json::Value, field: &str) -> Vec<String> {
        list.as_array().unwrap().iter().map(|v| v[field].as_str().unwrap().to_string()).collect()
    }

    async fn scripted_llm() -> (FakeOpenAi, ChatClient) {
        let llm = FakeOpenAi::start().await;
        llm.set_chat_handler(|body| memfold_models::testkit::promotion_reply(body).unwrap_or(FakeReply::Status(500)));
        let client = ChatClient::from_config(&llm.llm_config()).unwrap().unwrap();
        (llm, client)
    }

    #[tokio::test]
    async fn the_llm_is_asked_only_when_something_that_can_change_memory_md_changed() {
        let (_d, root) = setup(&[
            ("m-01", "Fact 01.", false, "2026-01-01"),
            ("m-02", "Fact 02.", false, "2026-01-02"),
            ("m-03", "Fact 03.", false, "2026-01-03"),
            ("m-04", "Fact 04.", false, "2026-01-04"),
            ("m-05", "Fact 05.", false, "2026-01-05"),
        ]);
        let (llm, client) = scripted_llm().await;
        let cfg = config(5);
        let llm_of = Some((&client, "p"));

        // First look: every entry, no current lines.
        promote(&root, &cfg, llm_of).await.unwrap();
        let ask = last_ask(&llm);
        assert_eq!(ids(&ask["entries"], "id"), ["m-05", "m-04", "m-03", "m-02", "m-01"]);
        assert_eq!(ask["lines"], json!([]));
        assert_eq!(generated(&root), ["m-05", "m-04", "m-03", "m-02", "m-01"]);

        // Nothing changed: no call, no write.
        let before = std::fs::read_to_string(root.memory_md()).unwrap();
        let report = promote(&root, &cfg, llm_of).await.unwrap();
        assert_eq!((report.source, llm.chat_calls()), ("kept", 1));
        assert_eq!(std::fs::read_to_string(root.memory_md()).unwrap(), before);

        // A new entry: only it is sent, with the lines it may displace.
        replace_entry(&root, "m-06", "Fact 06.", "2026-01-06");
        promote(&root, &cfg, llm_of).await.unwrap();
        let ask = last_ask(&llm);
        assert_eq!(ids(&ask["entries"], "id"), ["m-06"]);
        assert_eq!(ids(&ask["lines"], "entry"), ["m-05", "m-04", "m-03", "m-02", "m-01"]);
        assert_eq!(ask["max_lines"], 5);
        assert_eq!(generated(&root), ["m-06", "m-05", "m-04", "m-03", "m-02"]);

        // A promoted entry is replaced: it is sent with its new text, the rest as lines.
        replace_entry(&root, "m-04", "Fact 04, corrected.", "2026-01-04");
        promote(&root, &cfg, llm_of).await.unwrap();
        let ask = last_ask(&llm);
        assert_eq!(ids(&ask["entries"], "id"), ["m-04"]);
        assert_eq!(ask["entries"][0]["content"], "Fact 04, corrected.");
        assert_eq!(ids(&ask["lines"], "entry"), ["m-06", "m-05", "m-03", "m-02"], "the unchanged lines");
        let lines = parse(&std::fs::read_to_string(root.memory_md()).unwrap()).generated;
        assert_eq!(lines[0], Line { entry: "m-04".into(), text: "Fact 04, corrected.".into() });
        assert_eq!(generated(&root), ["m-04", "m-06", "m-05", "m-03", "m-02"], "in the order of the reply");

        // A promoted entry is removed from a full file: the best-ranked entry without a line is
        // offered to fill it.
        remove_entry(&root, "m-05");
        promote(&root, &cfg, llm_of).await.unwrap();
        assert_eq!(ids(&last_ask(&llm)["entries"], "id"), ["m-01"]);
        assert_eq!(generated(&root), ["m-01", "m-04", "m-06", "m-03", "m-02"]);

        // An entry the LLM left out is searched for often since: it is sent again.
        replace_entry(&root, "m-07", "Fact 07.", "2026-01-07");
        promote(&root, &cfg, llm_of).await.unwrap();
        assert!(!generated(&root).contains(&"m-02".to_string()));
        memfold_store::recall::record(&root, "q", &["m-02".into(), "m-02".into(), "m-02".into()], 30).unwrap();
        promote(&root, &cfg, llm_of).await.unwrap();
        let ask = last_ask(&llm);
        assert_eq!(ids(&ask["entries"], "id"), ["m-02"]);
        assert_eq!(ask["entries"][0]["recalls"], 3);
        let calls = llm.chat_calls();
        let report = promote(&root, &cfg, llm_of).await.unwrap();
        assert_eq!((report.source, llm.chat_calls()), ("kept", calls), "and not again while nothing moves");
    }

    #[tokio::test]
    async fn the_promotion_prompt_does_not_grow_with_the_memory() {
        let mut sizes = Vec::new();
        for n in [40, 400] {
            let rows: Vec<(String, String)> =
                (0..n).map(|i| (format!("m-{i:04}"), format!("Old fact {i:04}."))).collect();
            let entries: Vec<(&str, &str, bool, &str)> =
                rows.iter().map(|(id, text)| (id.as_str(), text.as_str(), false, "2026-01-01")).collect();
            let (_d, root) = setup(&entries);
            let (llm, client) = scripted_llm().await;
            // The first looks cover the shortlist, at most a budget of entries per call.
            let mut looks = 0;
            while promote(&root, &config(10), Some((&client, "p"))).await.unwrap().source != "kept" {
                looks += 1;
                assert!(last_ask(&llm)["entries"].as_array().unwrap().len() <= 10);
            }
            assert_eq!(looks, SHORTLIST);
            for (i, day) in ["2026-02-01", "2026-02-02", "2026-02-03"].iter().enumerate() {
                replace_entry(&root, &format!("m-new{i}"), &format!("New fact {i}."), day);
            }
            promote(&root, &config(10), Some((&client, "p"))).await.unwrap();
            let ask = last_ask(&llm);
            assert_eq!(ids(&ask["entries"], "id"), ["m-new2", "m-new1", "m-new0"]);
            assert_eq!(ask["lines"].as_array().unwrap().len(), POOL_MIN);
            sizes.push(ask.to_string().len());
        }
        assert_eq!(sizes[0], sizes[1], "the same change costs the same prompt at 40 and 400 entries");
    }

    #[tokio::test]
    async fn a_corrected_entry_never_keeps_its_old_line() {
        let (_d, root) = setup(&[
            ("m-job", "Works at Google.", false, "2026-01-01"),
            ("m-tea", "Likes green tea.", false, "2026-01-02"),
        ]);
        let (llm, client) = scripted_llm().await;
        promote(&root, &config(5), Some((&client, "p"))).await.unwrap();
        assert!(std::fs::read_to_string(root.memory_md()).unwrap().contains("Works at Google."));
        // The correction, and an LLM that answers junk: the offline lines carry the new text.
        replace_entry(&root, "m-job", "Works at Microsoft (since 2026-05); previously Google.", "2026-05-30");
        llm.push_chat(FakeReply::Content("not json".into()));
        let report = promote(&root, &config(5), Some((&client, "p"))).await.unwrap();
        assert_eq!(report.source, "offline");
        let text = std::fs::read_to_string(root.memory_md()).unwrap();
        assert!(text.contains("Works at Microsoft") && !text.contains("- Works at Google."), "{text}");
    }

    #[tokio::test]
    async fn pinned_lines_come_first_whatever_the_reply_order() {
        let (_d, root) =
            setup(&[("m-pin", "Call me Jo.", true, "2025-01-01"), ("m-a", "Likes tea.", false, "2026-01-02")]);
        let llm = FakeOpenAi::start().await;
        let client = ChatClient::from_config(&llm.llm_config()).unwrap().unwrap();
        llm.push_chat(FakeReply::Content(
            r#"{"lines":[{"entry":"m-a","text":"Likes tea."},{"entry":"m-pin","text":"Call me Jo."}]}"#.into(),
        ));
        promote(&root, &config(5), Some((&client, "p"))).await.unwrap();
        assert_eq!(generated(&root), ["m-pin", "m-a"]);
    }

    #[tokio::test]
    async fn lines_over_a_lowered_cap_are_cut_from_the_least_important_without_a_call() {
        let (_d, root) = setup(&[
            ("m-a", "A.", false, "2026-01-01"),
            ("m-b", "B.", false, "2026-01-02"),
            ("m-c", "C.", false, "2026-01-03"),
        ]);
        let (llm, client) = scripted_llm().await;
        promote(&root, &config(3), Some((&client, "p"))).await.unwrap();
        assert_eq!(generated(&root), ["m-c", "m-b", "m-a"]);
        let report = promote(&root, &config(2), Some((&client, "p"))).await.unwrap();
        assert_eq!((report.source, llm.chat_calls()), ("kept", 1));
        assert_eq!(generated(&root), ["m-c", "m-b"]);
    }

    #[tokio::test]
    async fn a_changed_line_above_the_shown_ones_keeps_its_place() {
        let rows: Vec<(String, String, String)> =
            (1..=8).map(|i| (format!("m-{i}"), format!("Fact {i}."), format!("2026-01-0{i}"))).collect();
        let entries: Vec<(&str, &str, bool, &str)> =
            rows.iter().map(|(id, text, day)| (id.as_str(), text.as_str(), false, day.as_str())).collect();
        let (_d, root) = setup(&entries);
        let (llm, client) = scripted_llm().await;
        promote(&root, &config(8), Some((&client, "p"))).await.unwrap();
        assert_eq!(generated(&root), ["m-8", "m-7", "m-6", "m-5", "m-4", "m-3", "m-2", "m-1"]);
        replace_entry(&root, "m-7", "Fact 7, corrected.", "2026-01-07");
        promote(&root, &config(8), Some((&client, "p"))).await.unwrap();
        let ask = last_ask(&llm);
        assert_eq!(ids(&ask["entries"], "id"), ["m-7"]);
        assert_eq!(ids(&ask["lines"], "entry"), ["m-5", "m-4", "m-3", "m-2", "m-1"], "the five least important");
        assert_eq!(ask["max_lines"], 6, "eight less the two lines it does not see");
        let lines = parse(&std::fs::read_to_string(root.memory_md()).unwrap()).generated;
        assert_eq!(lines[1], Line { entry: "m-7".into(), text: "Fact 7, corrected.".into() });
        assert_eq!(generated(&root), ["m-8", "m-7", "m-6", "m-5", "m-4", "m-3", "m-2", "m-1"]);
    }

    #[test]
    fn plan_shows_entries_whose_pin_or_recalls_moved() {
        let entry = |id: &str, pinned: bool| {
            let meta = EntryMeta { pinned, updated: Some("2026-01-01".parse().unwrap()), ..EntryMeta::new(id) };
            Entry::new(meta, &format!("Text of {id}."))
        };
        let (a, b, c) = (entry("m-a", false), entry("m-b", false), entry("m-c", true));
        let seen = |e: &Entry, recalls: usize| (e.id().to_string(), Seen { hash: entry_hash(e), recalls });
        let record = Record {
            prompt: String::new(),
            budget: 3,
            lines: 0,
            seen: [seen(&a, 1), seen(&b, 1), seen(&entry("m-c", false), 0)].into_iter().collect(),
        };
        let ranked = [&c, &a, &b];
        let recalled: HashMap<String, usize> = [("m-a".to_string(), 3), ("m-b".to_string(), 2)].into_iter().collect();
        let ask = plan(&[], &ranked, &recalled, 3, Some(&record));
        let sent: Vec<&str> = ask.send.iter().map(|e| e.id()).collect();
        assert_eq!(sent, ["m-c", "m-a"], "m-c was pinned since, m-a's recalls went from 1 to 3, m-b's only to 2");
        assert!(recall_moved(0, 3) && !recall_moved(0, 2) && recall_moved(5, 11) && !recall_moved(5, 10));
    }
}
