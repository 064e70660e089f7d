//! Forgetting and pinning: `memfold forget`, `pin`, `unpin`, and entries a person deleted by hand.
//!
//! Forgetting an entry moves it to `history.md` with `status: deleted` and appends a
//! tombstone naming the entry, every fact in its sources, and a hash of its text;
//! forgetting a pending fact tombstones the fact. Tombstoned facts never enter a pass, the
//! index or a rebuild again, and a fact re-added word for word stays forgotten.
//!
//! memfold keeps `.memfold/memory.seen.md`, the text of `memory.md` as it last wrote or
//! reconciled it. An entry with a header that is in the seen copy but gone from
//! `memory.md` was deleted by a person; [`reconcile`] tombstones it the same way.

use chrono::Utc;
use serde::Serialize;

use crate::files::atomic::WriteError;
use crate::files::entries::{Entry, EntryFile};
use crate::files::{Root, write_memory};
use crate::ledger::{FactFate, Ledger, LedgerError, fact_text_hash};
use crate::lock::{LockError, LockGuard};
use crate::state::{StateError, Tombstone, append_jsonl};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgetError {
    #[error("no entry or pending fact has id {0}")]
    NotFound(String),
    #[error(transparent)]
    Busy(#[from] LockError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("appending to consolidated/history.md: {0}")]
    History(std::io::Error),
}

/// What `forget` did.
#[derive(Debug, Clone, Serialize)]
pub struct Forgotten {
    pub id: String,
    /// `entry` or `fact`.
    pub kind: &'static str,
    /// Every id the tombstone covers.
    pub tombstoned: Vec<String>,
}

/// Forget an entry or a pending fact.
pub fn forget(root: &Root, id: &str, reason: Option<&str>) -> Result<Forgotten, ForgetError> {
    let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
    reconcile_locked(root)?;
    let ledger = Ledger::load(root)?;
    if ledger.memory.get(id).is_some() {
        let mut memory = ledger.memory.clone();
        let entry = memory.remove(id).ok_or_else(|| ForgetError::NotFound(id.to_string()))?;
        let tombstone = bury(root, &entry, reason.unwrap_or("forgotten"))?;
        write_memory(root, &memory.render(), &ledger.memory.hash)?;
        crate::promote::drop_lines(root, &[id.to_string()]);
        return Ok(Forgotten { id: id.to_string(), kind: "entry", tombstoned: tombstone.ids });
    }
    let fates = ledger.fates();
    let fact = ledger
        .facts
        .iter()
        .find(|f| f.id == id && fates.get(f.id.as_str()) == Some(&FactFate::Pending))
        .ok_or_else(|| ForgetError::NotFound(id.to_string()))?;
    let tombstone = Tombstone {
        ids: vec![fact.id.clone()],
        text_hash: fact_text_hash(&fact.text),
        time: Utc::now(),
        reason: reason.map(str::to_string),
    };
    append_jsonl(&root.tombstones(), std::slice::from_ref(&tombstone))?;
    Ok(Forgotten { id: id.to_string(), kind: "fact", tombstoned: tombstone.ids })
}

/// Move an entry to history as deleted and tombstone it with its sources.
fn bury(root: &Root, entry: &Entry, reason: &str) -> Result<Tombstone, ForgetError> {
    let mut meta = entry.meta.clone();
    meta.status = Some("deleted".into());
    meta.valid_until = Some(chrono::Local::now().date_naive());
    meta.extra.insert("reason".into(), serde_json::Value::String(reason.to_string()));
    let block = Entry::new(meta, &entry.content);
    crate::files::append_history(root, std::slice::from_ref(&block)).map_err(ForgetError::History)?;
    let mut ids = vec![entry.id().to_string()];
    ids.extend(entry.meta.sources.iter().cloned());
    let tombstone = Tombstone {
        ids,
        text_hash: fact_text_hash(&entry.content),
        time: Utc::now(),
        reason: Some(reason.to_string()),
    };
    append_jsonl(&root.tombstones(), std::slice::from_ref(&tombstone))?;
    Ok(tombstone)
}

/// Set or clear `pinned` on an entry.
pub fn pin(root: &Root, id: &str, pinned: bool) -> Result<(), ForgetError> {
    let _lock = LockGuard::try_acquire(&root.consolidate_lock(), "consolidation")?;
    reconcile_locked(root)?;
    let ledger = Ledger::load(root)?;
    let mut memory = ledger.memory.clone();
    let entry = memory.get_mut(id).ok_or_else(|| ForgetError::NotFound(id.to_string()))?;
    if entry.meta.pinned == pinned {
        return Ok(());
    }
    entry.meta.pinned = pinned;
    entry.touch();
    write_memory(root, &memory.render(), &ledger.memory.hash)?;
    Ok(())
}

/// Tombstone entries a person deleted from `memory.md` by hand; returns their ids.
/// Skips quietly (returns nothing) while a pass holds the lock; the next call catches up.
pub fn reconcile(root: &Root) -> Result<Vec<String>, ForgetError> {
    match LockGuard::try_acquire(&root.consolidate_lock(), "consolidation") {
        Ok(_lock) => reconcile_locked(root),
        Err(LockError::Held { .. }) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// [`reconcile`] for a caller that holds the consolidation lock.
pub fn reconcile_locked(root: &Root) -> Result<Vec<String>, ForgetError> {
    let read = |path: std::path::PathBuf, name: &str| -> Result<Option<String>, ForgetError> {
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LedgerError::Read { path: name.to_string(), source }.into()),
        }
    };
    let current = read(root.memory(), "consolidated/memory.md")?.unwrap_or_default();
    let Some(seen) = read(root.memory_seen(), ".memfold/memory.seen.md")? else {
        write_seen(root, &current)?;
        return Ok(Vec::new());
    };
    if seen == current {
        return Ok(Vec::new());
    }
    let now = EntryFile::parse(&current, "consolidated/memory.md");
    let before = EntryFile::parse(&seen, ".memfold/memory.seen.md");
    let mut gone = Vec::new();
    for entry in before.entries().filter(|e| e.has_header && now.get(e.id()).is_none()) {
        tracing::info!(entry = entry.id(), "entry deleted by hand; tombstoning it");
        bury(root, entry, "deleted by hand")?;
        gone.push(entry.id().to_string());
    }
    crate::promote::drop_lines(root, &gone);
    write_seen(root, &current)?;
    Ok(gone)
}

fn write_seen(root: &Root, text: &str) -> Result<(), ForgetError> {
    crate::files::atomic::write_atomic(&root.memory_seen(), text.as_bytes(), None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::archive::{self, NewFact};
    use crate::files::entries::EntryMeta;

    fn setup() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        (dir, root)
    }

    fn entry_with_fact(root: &Root, text: &str) -> (String, String) {
        let now = chrono::NaiveDate::from_ymd_opt(2026, 6, 1).unwrap().and_hms_opt(9, 0, 0).unwrap();
        let fact =
            archive::append(root, &[NewFact { text: text.into(), ..Default::default() }], now).unwrap().remove(0);
        let mut memory = EntryFile::read(&root.memory(), "memory.md").unwrap();
        let meta = EntryMeta { sources: vec![fact.id.clone()], ..EntryMeta::new(format!("m-{}", &fact.id[2..10])) };
        let id = meta.id.clone();
        memory.push(Entry::new(meta, text));
        write_memory(root, &memory.render(), &memory.hash).unwrap();
        (id, fact.id)
    }

    #[test]
    fn forgetting_an_entry_moves_it_to_history_and_tombstones_its_facts() {
        let (_d, root) = setup();
        let (id, fact) = entry_with_fact(&root, "Lives at 12 Rua Augusta");
        let done = forget(&root, &id, Some("privacy")).unwrap();
        assert_eq!(done.tombstoned, [id.clone(), fact.clone()]);
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.memory.get(&id).is_none());
        let old = ledger.history.get(&id).unwrap();
        assert_eq!(old.meta.status.as_deref(), Some("deleted"));
        assert_eq!(ledger.fates()[fact.as_str()], FactFate::Tombstoned);
        assert!(crate::verify::verify(&ledger, Vec::new()).ok);
    }

    #[test]
    fn a_forgotten_fact_stays_forgotten_when_added_again() {
        let (_d, root) = setup();
        let now = chrono::Local::now().naive_local();
        let f = archive::append(&root, &[NewFact { text: "Secret: 1234".into(), ..Default::default() }], now).unwrap();
        forget(&root, &f[0].id, None).unwrap();
        archive::append(&root, &[NewFact { text: "secret:   1234".into(), ..Default::default() }], now).unwrap();
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.pending().is_empty(), "the copy is recognised by its text hash");
        assert!(matches!(forget(&root, "f-nope", None), Err(ForgetError::NotFound(_))));
    }

    #[test]
    fn an_entry_deleted_by_hand_is_tombstoned_once() {
        let (_d, root) = setup();
        let (keep, _) = entry_with_fact(&root, "Likes tea");
        let (gone, fact) = entry_with_fact(&root, "Dislikes opera");
        let memory = EntryFile::read(&root.memory(), "memory.md").unwrap();
        let mut edited = memory.clone();
        edited.remove(&gone);
        std::fs::write(root.memory(), edited.render()).unwrap();
        assert_eq!(reconcile(&root).unwrap(), std::slice::from_ref(&gone));
        assert!(reconcile(&root).unwrap().is_empty(), "noticed once");
        let ledger = Ledger::load(&root).unwrap();
        assert!(ledger.memory.get(&keep).is_some());
        assert_eq!(ledger.fates()[fact.as_str()], FactFate::Tombstoned);
        assert_eq!(ledger.history.get(&gone).unwrap().meta.status.as_deref(), Some("deleted"));
    }

    #[test]
    fn pin_and_unpin() {
        let (_d, root) = setup();
        let (id, _) = entry_with_fact(&root, "Name is John");
        pin(&root, &id, true).unwrap();
        assert!(Ledger::load(&root).unwrap().memory.get(&id).unwrap().meta.pinned);
        pin(&root, &id, false).unwrap();
        assert!(!Ledger::load(&root).unwrap().memory.get(&id).unwrap().meta.pinned);
        assert!(matches!(pin(&root, "m-none", true), Err(ForgetError::NotFound(_))));
    }
}
