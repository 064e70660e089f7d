//! What the index holds, derived from the files alone: current entries, history versions and pending facts.
//!
//! Consolidated facts are represented by their entries and tombstoned ones by nothing, so
//! neither is indexed; deleted, reverted and restored history blocks are not indexed either.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use chrono::NaiveDate;

use crate::{Doc, DocKind, Index, IndexError, Scope, SyncStats};
use memfold_store::Root;
use memfold_store::archive::{ArchiveError, Fact};
use memfold_store::entries::HistoryStatus;
use memfold_store::ledger::{FactFate, Ledger, LedgerError, Settled};
use memfold_store::sources::Sources;
use memfold_store::sys::blocking;

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
    /// Per day file (path relative to the root) read by an earlier catch-up: where parsing it
    /// left off, and the size and hash of what was parsed. A file that has only grown since is
    /// parsed from there on.
    days: HashMap<String, ParsedDay>,
}

impl Known {
    /// The files as looked at before the read this record comes from.
    pub fn seen(&self) -> &Sources {
        &self.seen
    }
}

#[derive(Debug)]
struct ParsedDay {
    size: u64,
    hash: String,
    state: memfold_store::archive::DayParse,
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
    let known = Known { settled: ledger.settled(), seen, days: HashMap::new() };
    Ok((ledger, stats, known))
}

/// [`refresh_all`] without progress, returning the ledger and what the sync did.
pub async fn refresh(root: &Root, index: &Index) -> Result<(Ledger, SyncStats), RefreshError> {
    let (ledger, stats, _) = refresh_all(root, index, None).await?;
    Ok((ledger, stats))
}

/// What a full read of the files tells the catch-ups that follow, learnt without syncing
/// anything, when the index is up to date with the files: a process that starts on such an
/// index (a restarted daemon) reads every file once before it answers, instead of in the
/// catch-up of its first write. The latest day file (the one the next write most likely
/// appends to) is parsed too, so that catch-up parses only the new lines. `None` when the
/// files changed since the rows were recorded: the next catch-up reads them all anyway.
pub async fn learn(root: &Root, index: &Index) -> Result<Option<(Known, Ledger)>, RefreshError> {
    let Some(before) = index.sources().await else { return Ok(None) };
    let root = root.clone();
    blocking(move || {
        let seen = Sources::look(&root, Some(&before))
            .map_err(|source| RefreshError::Look { path: root.dir().display().to_string(), source })?;
        if !seen.changed(&before).is_empty() {
            return Ok(None);
        }
        let ledger = Ledger::load(&root)?;
        let mut days = HashMap::new();
        let latest =
            seen.files.keys().filter_map(|rel| memfold_store::archive::day_of(std::path::Path::new(rel))).max();
        if let Some(day) = latest {
            let (text, rel) = memfold_store::archive::read_day_text(&root, day)?;
            let hash = memfold_store::content_hash(text.as_bytes());
            // Parsed as recorded, or not at all (a write since is read by the next catch-up).
            if seen.files.get(&rel).is_some_and(|s| s.hash == hash && s.size == text.len() as u64) {
                let mut state = memfold_store::archive::DayParse::default();
                let _ = memfold_store::archive::parse_on(day, &text, &rel, &mut state);
                days.insert(rel, ParsedDay { size: text.len() as u64, hash, state });
            }
        }
        Ok(Some((Known { settled: ledger.settled(), seen, days }, ledger)))
    })
    .await
}

/// Bring the index up to date reading as little as possible: nothing when no file's stat
/// changed since the rows were recorded as built ([`Sources`]); only the changed day files when
/// nothing else changed and `known` (from an earlier call in this process) still describes
/// the settling files; else every file, updating `known`. The ledger of a full read comes
/// back too, for the caller to derive more from.
pub async fn catch_up(
    root: &Root,
    index: &Index,
    known: &mut Option<Known>,
) -> Result<(Read, SyncStats, Option<Ledger>), RefreshError> {
    let Some(before) = index.sources().await else {
        let (ledger, stats, fresh) = refresh_all(root, index, None).await?;
        *known = Some(fresh);
        return Ok((Read::All, stats, Some(ledger)));
    };
    // Day files whose stat changed are read below anyway: hashed there, in the same pass.
    let mut seen = {
        let (owned, before) = (root.clone(), before.clone());
        blocking(move || Sources::look_deferring(&owned, Some(&before), |rel| rel.starts_with("archive/")))
            .await
            .map_err(|source| RefreshError::Look { path: root.dir().display().to_string(), source })?
    };
    let changed = seen.changed(&before);
    if changed.is_empty() {
        // Files read again only to find their recorded content: record their new stat, so
        // the next look does not read them again.
        if before.refreshed_by(&seen)
            && let Err(e) = index.refresh_sources(&seen).await
        {
            tracing::debug!(error = %e, "could not record the new stat of unchanged files");
        }
        return Ok((Read::Nothing, SyncStats::default(), None));
    }
    let days: Option<Vec<NaiveDate>> =
        changed.iter().map(|p| memfold_store::archive::day_of(std::path::Path::new(p))).collect();
    // A changed settling file is not a day file, so `days` is None then.
    let usable = known.as_mut().filter(|k| k.seen.same_settling(&seen));
    let (Some(days), Some(usable)) = (days, usable) else {
        let (ledger, stats, fresh) = refresh_all(root, index, None).await?;
        *known = Some(fresh);
        return Ok((Read::All, stats, Some(ledger)));
    };
    let (facts, appended, parsed, hashes) = {
        let (root, days, before) = (root.clone(), days.clone(), before.clone());
        let parsed = std::mem::take(&mut usable.days);
        blocking(move || read_days(&root, days, &before, parsed)).await?
    };
    usable.days = parsed;
    for (rel, size, hash) in hashes {
        seen.set_read(&rel, size, hash);
    }
    debug_assert!(seen.complete(), "every day file left unread was read and hashed");
    let docs: Vec<Doc> =
        facts.iter().flatten().filter(|f| usable.settled.fate(f) == FactFate::Pending).map(fact_doc).collect();
    let scope = if appended { Scope::Appended(changed) } else { Scope::Paths(changed) };
    let stats = index.sync_from(&docs, scope, None, &seen).await?;
    Ok((Read::DayFiles(days.len()), stats, None))
}

/// What one catch-up read of the changed day files: each day's facts (only the new lines' when
/// every file only grew), whether they all only grew, where parsing each left off, and each
/// file's size and hash.
type DaysRead = (Vec<Vec<memfold_store::archive::Fact>>, bool, HashMap<String, ParsedDay>, Vec<(String, u64, String)>);

/// Read the changed day files `days`, parsing on from `parsed` where a file only grew since
/// `before` recorded it.
fn read_days(
    root: &Root,
    days: Vec<NaiveDate>,
    before: &Sources,
    mut parsed: HashMap<String, ParsedDay>,
) -> Result<DaysRead, ArchiveError> {
    use memfold_store::archive::{DayParse, parse_on, read_day_text};
    let mut texts = Vec::with_capacity(days.len());
    for day in days {
        let (text, rel) = read_day_text(root, day)?;
        let grown = before.files.get(&rel).and_then(|old| grown_from(&text, old));
        texts.push((day, text, rel, grown));
    }
    // Only appended to, every one of them: the rows of their old lines stay as they are.
    let appended = texts.iter().all(|(_, _, _, grown)| grown.is_some());
    let mut facts = Vec::with_capacity(texts.len());
    let mut hashes = Vec::with_capacity(texts.len());
    // Only the days this catch-up reads are kept: usually today's file alone, so a daemon
    // that runs for months does not keep the ids of every day it ever saw.
    parsed.retain(|rel, _| texts.iter().any(|(_, _, r, _)| r == rel));
    for (day, text, rel, grown) in texts {
        let old = before.files.get(&rel);
        let from =
            parsed.remove(&rel).filter(|p| appended && old.is_some_and(|old| old.size == p.size && old.hash == p.hash));
        let (day_facts, state) = match from {
            // Parse only the new lines, from where the last catch-up left off.
            Some(ParsedDay { size, mut state, .. }) => {
                let (day_facts, _) = parse_on(day, &text[size as usize..], &rel, &mut state);
                (day_facts, state)
            }
            None => {
                let mut state = DayParse::default();
                let (mut day_facts, _) = parse_on(day, &text, &rel, &mut state);
                if let Some((size, _)) = grown.as_ref().filter(|_| appended) {
                    // The ids come from the whole file; the rows are those of the new lines.
                    let old_lines = text.as_bytes()[..*size].iter().filter(|b| **b == b'\n').count();
                    day_facts.retain(|f| f.line > old_lines);
                }
                (day_facts, state)
            }
        };
        // The hash of the grown file goes on from its old bytes' (one pass over them).
        let hash = match grown {
            Some((size, mut hasher)) => {
                hasher.update(&text.as_bytes()[size..]);
                hex::encode(hasher.finalize())
            }
            None => memfold_store::content_hash(text.as_bytes()),
        };
        hashes.push((rel.clone(), text.len() as u64, hash.clone()));
        parsed.insert(rel, ParsedDay { size: text.len() as u64, hash, state });
        facts.push(day_facts);
    }
    Ok((facts, appended, parsed, hashes))
}

/// For a day file that only grew since it was recorded as `old` (its first `old.size` bytes,
/// ending on a line, hash as recorded): that size, and the hasher over those bytes, to go on
/// over the rest. The rows of those bytes' lines are then as they were: a line's fact, id
/// included, depends only on the lines before it, and the settling files are unchanged (the
/// caller checks).
fn grown_from(text: &str, old: &memfold_store::sources::Seen) -> Option<(usize, Sha256)> {
    let size = usize::try_from(old.size).ok()?;
    let prefix = text.as_bytes().get(..size)?;
    let whole_lines = prefix.is_empty() || prefix.ends_with(b"\n");
    if size >= text.len() || !whole_lines {
        return None;
    }
    let hasher = Sha256::new_with_prefix(prefix);
    (hex::encode(hasher.clone().finalize()) == old.hash).then_some((size, hasher))
}

/// Open the index of a root with the configured embedder.
pub async fn open_index(
    root: &Root,
    config: &memfold_store::config::Config,
    models: &memfold_models::Models,
) -> Result<Index, OpenError> {
    let egress = memfold_store::egress::Egress::new(root.egress_file());
    let embedder = models.embedder(&config.embedding, &root.embed_cache_dir(), egress).await?;
    Ok(Index::open(&root.index_dir(), embedder).await?)
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Embed(#[from] memfold_models::embed::EmbedError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use memfold_models::embed::local::LocalEmbedder;
    use memfold_store::archive::{self, NewFact};
    use memfold_store::entries::{Entry, EntryFile, EntryMeta};

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

    /// Lines appended to a day file are all a refresh writes or even compares: the rows of the
    /// lines before them are left alone, however many. A hand-written line, a copy of an earlier
    /// line's id, or any change before the old end of the file takes the path that compares
    /// every row of the file; the rows are those of a full read every time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appended_lines_are_all_a_refresh_touches() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let day = "2026-11-21";
        let first = add(&root, day, "Walked the dog along the harbour.");
        for i in 0..40 {
            add(&root, day, &format!("Note number {i} about the garden."));
        }
        let index = Index::open(&root.index_dir(), Arc::new(LocalEmbedder::new(64))).await.unwrap();
        let mut known = None;
        catch_up(&root, &index, &mut known).await.unwrap();

        let tea = add(&root, day, "Prefers green tea in the morning.");
        let (read, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
        assert_eq!((read, stats.upserted, stats.unchanged, stats.deleted), (Read::DayFiles(1), 1, 0, 0));
        assert_eq!(index.digest().await.unwrap(), want(&root));
        assert!(index.digest().await.unwrap().contains_key(&tea));

        // A line written by hand, without an id, and a copy of the first line with its id: the
        // parse of the whole file gives them their ids, so they are still only appended lines.
        let path = root.archive_file(day.parse().unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        let copied = text.lines().find(|l| l.contains(&first)).unwrap().to_string();
        std::fs::write(&path, format!("{text}- Planted tulips by hand\n{copied}\n")).unwrap();
        let (_, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
        assert_eq!((stats.upserted, stats.unchanged), (2, 0), "{stats:?}");
        assert_eq!(index.digest().await.unwrap(), want(&root), "the copy gets the id a full read gives it");

        // A fact edited in place before the old end, and one appended: every row of the file
        // is compared, and the edited one rewritten.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("Note number 3 about", "Note number 33 about")).unwrap();
        add(&root, day, "Bought a blue bicycle.");
        let (_, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
        assert!(stats.unchanged >= 40 && stats.upserted >= 1, "{stats:?}");
        assert_eq!(index.digest().await.unwrap(), want(&root));

        // The file cut short (a line removed at the end): not an append; the row goes.
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: Vec<&str> = text.lines().collect();
        std::fs::write(&path, format!("{}\n", cut[..cut.len() - 1].join("\n"))).unwrap();
        let (_, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
        assert_eq!(stats.deleted, 1, "{stats:?}");
        assert_eq!(index.digest().await.unwrap(), want(&root));
    }

    /// A process that starts on an up-to-date index learns the files once (`learn`): its first
    /// write is then read alone, only its new lines parsed, as if it had read everything before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_start_learns_spares_the_first_write_a_full_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        add(&root, "2026-11-20", "Walked the dog along the harbour.");
        add(&root, "2026-11-21", "Bought a blue bicycle.");
        let index = Index::open(&root.index_dir(), Arc::new(LocalEmbedder::new(64))).await.unwrap();
        catch_up(&root, &index, &mut None).await.unwrap();

        // Another process, as a restarted daemon: nothing known, then what it learns.
        let (learnt, _) = learn(&root, &index).await.unwrap().expect("the index is up to date");
        assert!(learnt.days.contains_key("archive/2026-11-21.md"), "the latest day file is parsed");
        let mut known = Some(learnt);
        let tea = add(&root, "2026-11-21", "Prefers green tea in the morning.");
        let (read, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
        assert_eq!((read, stats.upserted), (Read::DayFiles(1), 1));
        assert_eq!(index.digest().await.unwrap(), want(&root));
        assert!(index.digest().await.unwrap().contains_key(&tea));

        // Files changed since the rows were recorded: nothing is learnt.
        add(&root, "2026-11-22", "Painted the fence.");
        assert!(learn(&root, &index).await.unwrap().is_none());
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
        let (read, stats, _) = catch_up(&root, &index, &mut known).await.unwrap();
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

    /// memory.md copied back over itself (a restored backup, a checkout, an editor saving it
    /// unchanged) is read once to find it unchanged, and its new stat recorded: later looks
    /// trust the stat instead of reading and hashing the file every time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_found_unchanged_under_a_new_stat_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let walked = add(&root, "2026-11-20", "Walked the dog along the harbour.");
        write_memory(&root, &[("m-dog", &walked, "Walks the dog along the harbour.")]);
        // Written a minute ago, so no look is racy.
        let ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = |path: &std::path::Path| {
            std::fs::File::options().write(true).open(path).unwrap().set_modified(ago).unwrap()
        };
        age(&root.memory());
        age(&root.history());
        age(&root.archive_file("2026-11-20".parse().unwrap()));
        let index = Index::open(&root.index_dir(), Arc::new(LocalEmbedder::new(64))).await.unwrap();
        let mut known = None;
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::All);

        let copy = root.consolidated_dir().join("memory.md.restored");
        std::fs::copy(root.memory(), &copy).unwrap();
        std::fs::rename(&copy, root.memory()).unwrap();
        age(&root.memory());
        let new_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(root.memory()).unwrap());
        let recorded = async || index.sources().await.unwrap().files["consolidated/memory.md"].inode;
        assert_ne!(recorded().await, new_inode);
        // While a writer holds the index lock, a reader does not wait for it to record.
        let writer =
            memfold_store::sys::lock::LockGuard::acquire(&root.index_dir().with_file_name("index.lock")).unwrap();
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::Nothing);
        assert_ne!(recorded().await, new_inode, "left to a later look");
        drop(writer);
        assert_eq!(catch_up(&root, &index, &mut known).await.unwrap().0, Read::Nothing);
        assert_eq!(recorded().await, new_inode, "the new stat is recorded");
        // Another process's look now trusts it: the stat matches, the entry is not racy.
        let before = index.sources().await.unwrap();
        let looked = memfold_store::sources::Sources::look(&root, Some(&before)).unwrap();
        assert_eq!(looked, before);
        assert_eq!(index.digest().await.unwrap(), want(&root));
    }
}
