//! What the index holds, derived from the files alone: current entries, history versions and pending facts.
//!
//! Consolidated facts are represented by their entries and tombstoned ones by nothing, so
//! neither is indexed; deleted, reverted and restored history blocks are not indexed either.

use std::collections::HashMap;

use chrono::NaiveDate;

use crate::blocking;
use crate::files::Root;
use crate::files::archive::{ArchiveError, Fact};
use crate::files::entries::HistoryStatus;
use crate::index::sources::Sources;
use crate::index::{Doc, DocKind, Index, IndexError, Scope, SyncStats};
use crate::ledger::{FactFate, Ledger, LedgerError, Settled};

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
    docs.extend(ledger.facts.iter().filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending)).map(fact_doc));
    docs
}

/// The row of a pending fact.
fn fact_doc(f: &Fact) -> Doc {
    Doc {
        key: f.id.clone(),
        id: f.id.clone(),
        kind: DocKind::Fact,
        text: f.text.clone(),
        path: format!("archive/{}.md", f.date),
        sources: vec![f.id.clone()],
        valid_from: f.date,
        valid_until: None,
        pinned: false,
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefreshError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("looking at the files of {path}: {source}")]
    Look { path: String, source: std::io::Error },
    #[error(transparent)]
    Archive(#[from] ArchiveError),
}

/// What [`catch_up`] keeps between calls: the settled facts of the root as the record it was
/// derived with describes them.
#[derive(Debug, Default)]
pub struct Known {
    seen: Sources,
    settled: Settled,
}

/// How much of the root a refresh read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// No file changed since the index was built: only stats.
    Nothing,
    /// Only day files of the archive changed, and only they were read.
    DayFiles(usize),
    /// Every file.
    All,
}

/// Bring the index up to date with every file (by content hash: unchanged rows cost nothing),
/// returning the ledger it was derived from. `progress` as for [`Index::sync_from`].
pub async fn refresh_all(
    root: &Root,
    index: &Index,
    progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
) -> Result<(Ledger, SyncStats, Known), RefreshError> {
    let before = index.sources().await;
    let (seen, ledger) = {
        let root = root.clone();
        blocking(move || {
            // The look comes first: a file changed after it is read newer than recorded, and
            // the next look sees it changed again.
            let seen = Sources::look(&root, before.as_ref())
                .map_err(|source| RefreshError::Look { path: root.dir().display().to_string(), source })?;
            Ok::<_, RefreshError>((seen, Ledger::load(&root)?))
        })
        .await?
    };
    let stats = index.sync_from(&docs(&ledger), Scope::All, progress, &seen).await?;
    let known = Known { settled: ledger.settled(), seen };
    Ok((ledger, stats, known))
}

/// [`refresh_all`] without progress, returning the ledger and what the sync did.
pub async fn refresh(root: &Root, index: &Index) -> Result<(Ledger, SyncStats), RefreshError> {
    let (ledger, stats, _) = refresh_all(root, index, None).await?;
    Ok((ledger, stats))
}

/// Bring the index up to date reading as little as possible: nothing when no file's stat
/// changed since the rows were recorded as built ([`Sources`]); only the changed day files when
/// nothing else changed and `known` (from an earlier call in this process) still describes
/// the settling files; else every file, updating `known`.
pub async fn catch_up(root: &Root, index: &Index, known: &mut Option<Known>) -> Result<(Read, SyncStats), RefreshError> {
    let Some(before) = index.sources().await else {
        let (_, stats, fresh) = refresh_all(root, index, None).await?;
        *known = Some(fresh);
        return Ok((Read::All, stats));
    };
    let seen = {
        let (owned, before) = (root.clone(), before.clone());
        blocking(move || Sources::look(&owned, Some(&before)))
            .await
            .map_err(|source| RefreshError::Look { path: root.dir().display().to_string(), source })?
    };
    let changed = seen.changed(&before);
    if changed.is_empty() {
        return Ok((Read::Nothing, SyncStats::default()));
    }
    let days: Option<Vec<NaiveDate>> =
        changed.iter().map(|p| crate::files::archive::day_of(std::path::Path::new(p))).collect();
    // A changed settling file is not a day file, so `days` is None then.
    let usable = known.as_ref().filter(|k| k.seen.same_settling(&seen));
    let (Some(days), Some(usable)) = (days, usable) else {
        let (_, stats, fresh) = refresh_all(root, index, None).await?;
        *known = Some(fresh);
        return Ok((Read::All, stats));
    };
    let facts = {
        let (root, days) = (root.clone(), days.clone());
        blocking(move || {
            let mut facts = Vec::new();
            for day in days {
                facts.extend(crate::files::archive::read_day(&root, day)?.0);
            }
            Ok::<_, ArchiveError>(facts)
        })
        .await?
    };
    let docs: Vec<Doc> =
        facts.iter().filter(|f| usable.settled.fate(f) == FactFate::Pending).map(fact_doc).collect();
    let stats = index.sync_from(&docs, Scope::Paths(changed), None, &seen).await?;
    Ok((Read::DayFiles(days.len()), stats))
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::embed::local::LocalEmbedder;
    use crate::files::archive::{self, NewFact};
    use crate::files::entries::{Entry, EntryFile, EntryMeta};

    fn add(root: &Root, date: &str, text: &str) -> String {
        let date: NaiveDate = date.parse().unwrap();
        let fact = NewFact { text: text.into(), date: Some(date), source: None };
        archive::append(root, &[fact], date.and_hms_opt(12, 0, 0).unwrap()).unwrap().remove(0).id
    }

    fn write_memory(root: &Root, entries: &[(&str, &str, &str)]) {
        let mut file = EntryFile::default();
        for (id, source, text) in entries {
            file.push(Entry::new(EntryMeta { sources: vec![source.to_string()], ..EntryMeta::new(*id) }, text));
        }
        std::fs::write(root.memory(), file.render()).unwrap();
    }

    /// What the index must hold, from a full read of the files.
    fn want(root: &Root) -> BTreeMap<String, String> {
        docs(&Ledger::load(root).unwrap()).iter().map(|d| (d.key.clone(), Index::content_hash(d))).collect()
    }

    /// A refresh reads nothing when nothing changed, only the day file that changed when that
    /// is all, and everything when memory.md changed or the process has not read it yet; the
    /// rows are those of a full read every time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn catch_up_reads_only_what_changed_and_agrees_with_a_full_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let walked = add(&root, "2026-11-20", "Walked the dog along the harbour.");
        add(&root, "2026-11-21", "Bought a blue bicycle.");
        write_memory(&root, &[("m-dog", &walked, "Walks the dog along the harbour.")]);
        let index = Index::open(&root.index_dir(), Arc::new(LocalEmbedder::new(64))).await.unwrap();

        let mut known = None;
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::All, "nothing recorded yet");
        assert_eq!(index.digest().await.unwrap(), want(&root));
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::Nothing);

        let tea = add(&root, "2026-11-21", "Prefers green tea in the morning.");
        let (read, stats) = catch_up(&root, &index, &mut known).await.unwrap();
        assert_eq!((read, stats.upserted), (Read::DayFiles(1), 1));
        assert_eq!(index.digest().await.unwrap(), want(&root));
        assert!(index.digest().await.unwrap().contains_key(&tea));

        // The same file rewritten at once with other text of the same length: the stat may not
        // change, the content hash does.
        let path = root.archive_file("2026-11-21".parse().unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("blue bicycle", "teal bicycle")).unwrap();
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::DayFiles(1));
        assert_eq!(index.digest().await.unwrap(), want(&root));

        // memory.md now holds the tea fact: it is no longer pending, which only a full read knows.
        write_memory(
            &root,
            &[("m-dog", &walked, "Walks the dog along the harbour."), ("m-tea", &tea, "Drinks green tea mornings.")],
        );
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::All);
        assert_eq!(index.digest().await.unwrap(), want(&root));
        assert!(!index.digest().await.unwrap().contains_key(&tea));

        // Another process (no knowledge of the settling files) reads everything once.
        add(&root, "2026-11-22", "Started a pottery class.");
        let mut fresh = None;
        assert_eq!(catch_up(&root, &index, &mut fresh).await.unwrap().0, Read::All);
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::Nothing, "the record is shared");
        assert_eq!(index.digest().await.unwrap(), want(&root));

        // A day file removed by hand takes its facts' rows with it.
        std::fs::remove_file(root.archive_file("2026-11-22".parse().unwrap())).unwrap();
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::DayFiles(1));
        assert_eq!(index.digest().await.unwrap(), want(&root));
    }
}
