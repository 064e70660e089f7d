//! What the index holds, derived from the files alone: current entries, history versions and pending facts.
//!
//! Consolidated facts are represented by their entries and tombstoned ones by nothing, so
//! neither is indexed; deleted, reverted and restored history blocks are not indexed either.

use std::collections::HashMap;

use chrono::NaiveDate;

use crate::files::Root;
use crate::files::entries::HistoryStatus;
use crate::index::{Doc, DocKind, Index, IndexError, Scope, SyncStats};
use crate::ledger::{FactFate, Ledger, LedgerError};

/// The day used for entries that carry no dates (hand-written blocks): always valid.
fn undated() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default()
}

/// The documents the index must contain for this ledger.
pub fn docs(ledger: &Ledger) -> Vec<Doc> {
    let mut docs = Vec::new();
    for e in ledger.memory.entries() {
        docs.push(Doc {
            key: e.id().to_string(),
            id: e.id().to_string(),
            kind: DocKind::Entry,
            text: e.content.clone(),
            path: "consolidated/memory.md".into(),
            sources: e.meta.sources.clone(),
            valid_from: e.meta.updated.or(e.meta.first_seen).unwrap_or_else(undated),
            valid_until: None,
            pinned: e.meta.pinned,
        });
    }
    let tombstoned = ledger.tombstoned_ids();
    let mut versions: HashMap<&str, usize> = HashMap::new();
    for e in ledger.history.entries() {
        let n = versions.entry(e.id()).or_default();
        *n += 1;
        // Every version of a forgotten entry leaves the index, not just the deleted one; a
        // version an undo took back (`reverted`) or put back (`restored`, now current again)
        // is not a past truth either.
        let set_aside =
            matches!(e.meta.status, Some(HistoryStatus::Deleted | HistoryStatus::Reverted | HistoryStatus::Restored));
        if set_aside || tombstoned.contains(e.id()) {
            continue;
        }
        docs.push(Doc {
            key: format!("{}@{n}", e.id()),
            id: e.id().to_string(),
            kind: DocKind::History,
            text: e.content.clone(),
            path: "consolidated/history.md".into(),
            sources: e.meta.sources.clone(),
            valid_from: e.meta.updated.or(e.meta.first_seen).unwrap_or_else(undated),
            valid_until: e.meta.valid_until,
            pinned: false,
        });
    }
    let fates = ledger.fates();
    for f in ledger.facts.iter().filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending)) {
        docs.push(Doc {
            key: f.id.clone(),
            id: f.id.clone(),
            kind: DocKind::Fact,
            text: f.text.clone(),
            path: format!("archive/{}.md", f.date),
            sources: vec![f.id.clone()],
            valid_from: f.date,
            valid_until: None,
            pinned: false,
        });
    }
    docs
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefreshError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// Bring the index up to date with the files (by content hash: unchanged rows cost nothing).
pub async fn refresh(root: &Root, index: &Index) -> Result<(Ledger, SyncStats), RefreshError> {
    let ledger = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || Ledger::load(&root))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?
    };
    let stats = index.sync(&docs(&ledger), Scope::All, None).await?;
    Ok((ledger, stats))
}

/// Open the index of a root with the configured embedder.
pub async fn open_index(root: &Root, config: &crate::config::Config) -> Result<Index, OpenError> {
    let embedder = crate::embed::connect(&config.embedding, &root.embed_cache_dir()).await?;
    Ok(Index::open(&root.index_dir(), embedder).await?)
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    #[error(transparent)]
    Index(#[from] IndexError),
}
