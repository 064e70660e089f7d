//! Forgetting and pinning: `memfold forget`, `pin`, `unpin`, and entries a person deleted by hand.
//!
//! Forgetting an entry moves it to `history.md` with `status: deleted` and appends a
//! tombstone naming the entry, every fact in its sources, and a hash of its text;
//! forgetting a pending fact tombstones the fact. Tombstoned facts never enter a pass, the
//! index or a rebuild again, and a fact re-added word for word stays forgotten.
//!
//! memfold keeps `.memfold/memory.seen.md`, the text of `memory.md` as it last wrote or
//! reconciled it (the commit writes it with every `memory.md` it writes). An entry with a
//! header that is in the seen copy but whose id is gone from `memory.md` was deleted by a
//! person; [`plan_reconcile`] tombstones it the same way. An id still in the text behind a
//! header an edit broke, or hidden in a block left open, is no deletion: reading reports it.
//!
//! Every function here is pure: it returns the [`Change`] that does it, for
//! [`memfold_store::commit`].

use chrono::{DateTime, NaiveDate, Utc};

use serde::Serialize;

use crate::error::Error;
use memfold_store::commit::{Change, EntryDelta, HistoryWrite, MemoryWrite};
use memfold_store::content_hash;
use memfold_store::entries::{Entry, EntryFile, HistoryStatus};
use memfold_store::ledger::{FactFate, Ledger, fact_text_hash};
use memfold_store::state::Tombstone;
use memfold_store::verify::DELETED_BY_HAND;

/// What `forget` did.
#[derive(Debug, Clone, Serialize)]
pub struct Forgotten {
    pub id: String,
    /// `entry` or `fact`.
    pub kind: &'static str,
    /// Every id the tombstone covers.
    pub tombstoned: Vec<String>,
}

/// `MEMORY.md` as it is now, for dropping the lines of entries that leave memory.
#[derive(Debug, Clone, Copy)]
pub struct Promoted<'a> {
    pub text: &'a str,
}

impl Promoted<'_> {
    /// The guarded `MEMORY.md` write that drops the lines of `ids`, if any are there.
    pub fn without(&self, ids: &[String]) -> Option<(String, String)> {
        memfold_store::promoted::without_lines(self.text, ids).map(|text| (content_hash(self.text), text))
    }
}

/// Forget an entry or a pending fact.
pub fn plan_forget(
    ledger: &Ledger,
    promoted: Promoted,
    id: &str,
    reason: Option<&str>,
    now: DateTime<Utc>,
    today: NaiveDate,
) -> Result<(Change, Forgotten), Error> {
    let mut change = Change::new(format!("forget {id}"));
    if let Some(entry) = ledger.memory.get(id) {
        left_to_mend(entry, "forgotten")?;
        let mut memory = ledger.memory.clone();
        memory.remove(id);
        let (block, tombstone) = bury(entry, reason.unwrap_or("forgotten"), now, today);
        let text = memory.render();
        change.memory = Some(MemoryWrite {
            before: ledger.memory.hash.clone(),
            text,
            entries: vec![EntryDelta::of(id, Some(&entry.render()), None)],
        });
        change.history = Some(HistoryWrite::Append(vec![block]));
        change.memory_md = promoted.without(&[id.to_string()]);
        let forgotten = Forgotten { id: id.to_string(), kind: "entry", tombstoned: tombstone.ids.clone() };
        change.tombstones.push(tombstone);
        return Ok((change, forgotten));
    }
    let fates = ledger.fates();
    let fact = ledger
        .facts
        .iter()
        .find(|f| f.id == id && fates.get(f.id.as_str()) == Some(&FactFate::Pending))
        .ok_or_else(|| Error::NotFound { message: format!("no entry or pending fact has id {id}") })?;
    let tombstone = Tombstone {
        ids: vec![fact.id.clone()],
        text_hash: fact_text_hash(&fact.text),
        time: now,
        reason: reason.map(str::to_string),
    };
    let forgotten = Forgotten { id: id.to_string(), kind: "fact", tombstoned: tombstone.ids.clone() };
    change.tombstones.push(tombstone);
    Ok((change, forgotten))
}

/// An entry's deleted version for `history.md` and the tombstone for it and its sources.
fn bury(entry: &Entry, reason: &str, now: DateTime<Utc>, today: NaiveDate) -> (Entry, Tombstone) {
    let mut meta = entry.meta.clone();
    meta.status = Some(HistoryStatus::Deleted);
    meta.valid_until = Some(today);
    meta.extra.insert("reason".into(), serde_json::Value::String(reason.to_string()));
    let block = Entry::new(meta, &entry.content);
    let mut ids = vec![entry.id().to_string()];
    ids.extend(entry.meta.sources.iter().cloned());
    let tombstone =
        Tombstone { ids, text_hash: fact_text_hash(&entry.content), time: now, reason: Some(reason.to_string()) };
    (block, tombstone)
}

/// Set or clear `pinned` on an entry (an empty change when it already is).
pub fn plan_pin(ledger: &Ledger, id: &str, pinned: bool) -> Result<Change, Error> {
    let mut memory = ledger.memory.clone();
    let entry = memory.get_mut(id).ok_or_else(|| Error::NotFound {
        message: format!("no entry in memory.md has id {id} (only entries can be pinned)"),
    })?;
    left_to_mend(entry, if pinned { "pinned" } else { "unpinned" })?;
    let mut change = Change::new(format!("{} {id}", if pinned { "pin" } else { "unpin" }));
    if entry.meta.pinned == pinned {
        return Ok(change);
    }
    let before = entry.render();
    entry.meta.pinned = pinned;
    entry.touch();
    let after = entry.render();
    change.memory = Some(MemoryWrite {
        before: ledger.memory.hash.clone(),
        text: memory.render(),
        entries: vec![EntryDelta::of(id, Some(&before), Some(&after))],
    });
    Ok(change)
}

/// Refuse to touch a block a person must mend (a broken header, an unclosed block hiding
/// entries): writing it anew would turn its header into text or fold hidden entries into it.
fn left_to_mend(entry: &Entry, done: &str) -> Result<(), Error> {
    if !entry.needs_mending() {
        return Ok(());
    }
    Err(Error::Conflict {
        message: format!(
            "{} at consolidated/memory.md:{} is a block to mend (see `memfold verify`), so it cannot be {done}; \
             mend it, or delete it from memory.md by hand",
            entry.id(),
            entry.line
        ),
        ids: vec![entry.id().to_string()],
    })
}

/// Tombstone entries a person deleted from `memory.md` by hand: those with a header in the
/// seen copy (`seen`, None when there is none yet) that are gone from the ledger's `memory.md`.
/// Returns the change (empty when there is nothing to record) and the ids.
pub fn plan_reconcile(
    ledger: &Ledger,
    seen: Option<&str>,
    promoted: Promoted,
    now: DateTime<Utc>,
    today: NaiveDate,
) -> (Change, Vec<String>) {
    let mut change = Change::new("record hand edits of memory.md");
    let current = ledger.memory.render();
    let Some(seen) = seen else {
        change.seen = Some(current);
        return (change, Vec::new());
    };
    if content_hash(seen) == ledger.memory.hash {
        return (change, Vec::new());
    }
    let before = EntryFile::parse(seen, ".memfold/memory.seen.md");
    let mut gone = Vec::new();
    let mut blocks = Vec::new();
    let ids: std::collections::HashSet<&str> = ledger.memory.entries().map(|e| e.id()).collect();
    for entry in before.entries().filter(|e| e.has_header && !ids.contains(e.id())) {
        if mentions_id(&current, entry.id()) {
            // A header broken by an edit or hidden in an unclosed block: reading reports it, and
            // the entry's text is still there; only an entry whose id is gone was deleted.
            tracing::warn!(
                entry = entry.id(),
                "entry header unreadable but its id is still in memory.md; not a deletion"
            );
            continue;
        }
        tracing::info!(entry = entry.id(), "entry deleted by hand; tombstoning it");
        let (block, tombstone) = bury(entry, DELETED_BY_HAND, now, today);
        blocks.push(block);
        change.tombstones.push(tombstone);
        gone.push(entry.id().to_string());
    }
    if !blocks.is_empty() {
        change.history = Some(HistoryWrite::Append(blocks));
        change.memory_md = promoted.without(&gone);
    }
    change.seen = Some(current);
    (change, gone)
}

/// Whether `text` holds `id` as a whole id, not as the start of a longer one.
fn mentions_id(text: &str, id: &str) -> bool {
    let id_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(id).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(id_char)
            && !text[at + id.len()..].chars().next().is_some_and(id_char)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use memfold_store::Root;
    use memfold_store::archive::{self, NewFact};
    use memfold_store::entries::EntryMeta;
    use memfold_store::sys::lock::LockGuard;

    fn setup() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        (dir, root)
    }

    fn write(root: &Root, change: &Change) {
        let lock = LockGuard::try_acquire(&root.consolidate_lock(), "test").unwrap();
        memfold_store::commit::commit(root, change, &lock).unwrap();
    }

    fn now() -> DateTime<Utc> {
        "2026-06-01T09:00:00Z".parse().unwrap()
    }

    fn today() -> NaiveDate {
        now().date_naive()
    }

    const NONE: Promoted = Promoted { text: "" };

    fn entry_with_fact(root: &Root, text: &str) -> (String, String) {
        let fact = archive::append(root, &[NewFact { text: text.into(), ..Default::default() }], now().naive_utc())
            .unwrap()
            .remove(0);
        let ledger = Ledger::load(root).unwrap();
        let mut memory = ledger.memory.clone();
        let meta = EntryMeta { sources: vec![fact.id.clone()], ..EntryMeta::new(format!("m-{}", &fact.id[2..10])) };
        let id = meta.id.clone();
        memory.push(Entry::new(meta, text));
        let mut change = Change::new("test");
        change.memory =
            Some(MemoryWrite { before: ledger.memory.hash.clone(), text: memory.render(), entries: Vec::new() });
        write(root, &change);
        (id, fact.id)
    }

    #[test]
    fn forgetting_an_entry_moves_it_to_history_and_tombstones_its_facts() {
        let (_d, root) = setup();
        let (id, fact) = entry_with_fact(&root, "Lives at 12 Rua Augusta");
        let (change, done) =
            plan_forget(&Ledger::load(&root).unwrap(), NONE, &id, Some("privacy"), now(), today()).unwrap();
        write(&root, &change);
        assert_eq!(done.tombstoned, [id.clone(), fact.clone()]);
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.memory.get(&id).is_none());
        let old = ledger.history.get(&id).unwrap();
        assert_eq!(old.meta.status, Some(HistoryStatus::Deleted));
        assert_eq!(ledger.fates()[fact.as_str()], FactFate::Tombstoned);
        assert!(memfold_store::verify::verify(&ledger, Vec::new()).ok);
    }

    #[test]
    fn a_forgotten_fact_stays_forgotten_when_added_again() {
        let (_d, root) = setup();
        let at = now().naive_utc();
        let f = archive::append(&root, &[NewFact { text: "Secret: 1234".into(), ..Default::default() }], at).unwrap();
        let (change, _) = plan_forget(&Ledger::load(&root).unwrap(), NONE, &f[0].id, None, now(), today()).unwrap();
        write(&root, &change);
        archive::append(&root, &[NewFact { text: "secret:   1234".into(), ..Default::default() }], at).unwrap();
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.pending().is_empty(), "the copy is recognised by its text hash");
        let err = plan_forget(&ledger, NONE, "f-nope", None, now(), today()).unwrap_err();
        assert_eq!(err.kind(), crate::error::Kind::NotFound);
    }

    #[test]
    fn an_entry_deleted_by_hand_is_tombstoned_once() {
        let (_d, root) = setup();
        let (keep, _) = entry_with_fact(&root, "Likes tea");
        let (gone, fact) = entry_with_fact(&root, "Dislikes opera");
        let mut edited = Ledger::load(&root).unwrap().memory;
        edited.remove(&gone);
        std::fs::write(root.memory(), edited.render()).unwrap();
        let seen = std::fs::read_to_string(root.memory_seen()).ok();
        let (change, ids) = plan_reconcile(&Ledger::load(&root).unwrap(), seen.as_deref(), NONE, now(), today());
        assert_eq!(ids, std::slice::from_ref(&gone));
        write(&root, &change);
        let seen = std::fs::read_to_string(root.memory_seen()).ok();
        let (change, ids) = plan_reconcile(&Ledger::load(&root).unwrap(), seen.as_deref(), NONE, now(), today());
        assert!(ids.is_empty() && change.is_empty(), "noticed once");
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.memory.get(&keep).is_some());
        assert_eq!(ledger.fates()[fact.as_str()], FactFate::Tombstoned);
        assert_eq!(ledger.history.get(&gone).unwrap().meta.status, Some(HistoryStatus::Deleted));
        assert!(memfold_store::verify::verify(&ledger, Vec::new()).ok);
    }

    #[test]
    fn an_entry_whose_header_broke_or_hid_is_not_taken_for_deleted() {
        let (_d, root) = setup();
        let (a, _) = entry_with_fact(&root, "Likes tea");
        let (b, _) = entry_with_fact(&root, "Dislikes opera");
        let (c, _) = entry_with_fact(&root, "Plays chess");
        let seen = std::fs::read_to_string(root.memory_seen()).unwrap();
        let text = std::fs::read_to_string(root.memory()).unwrap();
        let broken = text.replacen(&format!("\"id\":\"{b}\""), &format!("\"id\":\"{b}\",,"), 1);
        let hidden = text.replacen("Likes tea", "Likes tea\n```", 1);
        let carriage = text.replace('\n', "\r");
        // Old Mac line ends are read as line ends: that edit breaks nothing.
        for (edited, breaks) in [(broken, true), (hidden, true), (carriage, false)] {
            assert_ne!(edited, text);
            std::fs::write(root.memory(), &edited).unwrap();
            let ledger = Ledger::load(&root).unwrap();
            assert_eq!(!ledger.problems.is_empty(), breaks, "{:?}", ledger.problems);
            let (change, ids) = plan_reconcile(&ledger, Some(&seen), NONE, now(), today());
            assert!(ids.is_empty(), "{ids:?} tombstoned after\n{edited}");
            assert!(change.tombstones.is_empty());
        }
        assert!([a, b, c].iter().all(|id| text.contains(id.as_str())));
    }

    #[test]
    fn a_block_to_mend_is_neither_forgotten_nor_pinned() {
        let (_d, root) = setup();
        let (b, _) = entry_with_fact(&root, "Dislikes opera");
        let text = std::fs::read_to_string(root.memory()).unwrap();
        std::fs::write(root.memory(), text.replacen(&format!("\"id\":\"{b}\""), &format!("\"id\":\"{b}\",,"), 1))
            .unwrap();
        let ledger = Ledger::load(&root).unwrap();
        let block = ledger.memory.entries().next().unwrap();
        assert!(block.needs_mending());
        let id = block.id().to_string();
        let forget = plan_forget(&ledger, NONE, &id, None, now(), today()).unwrap_err();
        let pin = plan_pin(&ledger, &id, true).unwrap_err();
        for (err, done) in [(forget, "forgotten"), (pin, "pinned")] {
            assert_eq!(err.kind(), crate::error::Kind::Conflict);
            assert_eq!(
                err.to_string(),
                format!(
                    "{id} at consolidated/memory.md:1 is a block to mend (see `memfold verify`), so it cannot be \
                     {done}; mend it, or delete it from memory.md by hand"
                )
            );
        }
    }

    #[test]
    fn an_id_is_mentioned_only_whole() {
        assert!(mentions_id("<!--m {\"id\":\"m-ab12\",}-->", "m-ab12"));
        assert!(mentions_id("m-ab12", "m-ab12"));
        assert!(!mentions_id("<!--m {\"id\":\"m-ab123\"}-->", "m-ab12"));
        assert!(!mentions_id("xm-ab12", "m-ab12"));
    }

    #[test]
    fn pin_and_unpin() {
        let (_d, root) = setup();
        let (id, _) = entry_with_fact(&root, "Name is John");
        write(&root, &plan_pin(&Ledger::load(&root).unwrap(), &id, true).unwrap());
        assert!(Ledger::load(&root).unwrap().memory.get(&id).unwrap().meta.pinned);
        write(&root, &plan_pin(&Ledger::load(&root).unwrap(), &id, false).unwrap());
        assert!(!Ledger::load(&root).unwrap().memory.get(&id).unwrap().meta.pinned);
        assert!(plan_pin(&Ledger::load(&root).unwrap(), &id, false).unwrap().is_empty());
        let err = plan_pin(&Ledger::load(&root).unwrap(), "m-none", true).unwrap_err();
        assert_eq!(err.kind(), crate::error::Kind::NotFound);
        assert!(err.to_string().contains("no entry in memory.md has id m-none"), "{err}");
    }
}
