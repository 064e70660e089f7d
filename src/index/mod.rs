//! The derived LanceDB index: current entries, their history versions and facts, one row per
//! document, kept equal to the markdown by content hash, with hybrid search.
//!
//! The index is a pure function of the files. The caller parses the markdown into [`Doc`]s
//! and hands the complete set (for everything, or for some files) to [`Index::sync_from`], which
//! deletes rows whose key is gone, re-embeds and upserts rows whose [`content_hash`] changed
//! and leaves equal rows alone. [`Index::digest`] returns key → hash for `verify`, and
//! [`Index::clear`] drops every row for `reindex --clear`.
//!
//! **Layout.** `<root>/.memfold/index/` holds the LanceDB table `docs` and `meta.json`
//! (schema version, embedder id and dimension). Opening with another embedder id or dimension
//! recreates the table empty, so vectors from different embedders are never mixed; the next
//! sync embeds everything again.
//!
//! **One index writer.** Every write (sync, clear, recreation) runs under an exclusive file
//! lock on `<root>/.memfold/index.lock` ([`crate::sys::lock::LockGuard`], std's `File::lock`, taken
//! in `spawn_blocking`); writers in this or any other process wait for each other. A writer
//! computes its changes only after taking the lock, against the rows as they are then. Readers
//! take no lock and open the database with `read_consistency_interval(0)`, so they see other
//! processes' writes.
//! The `key` column is also declared the table's unenforced primary key, which lance uses to
//! resolve concurrent merge-inserts.
//!
//! **Maintenance, at the end of every sync.** Once the table has rows it gets a full-text index
//! on `text`, a bitmap index on `kind` and B-tree indices on `valid_from` and `valid_until`, so
//! the kind and as-of filters are index lookups rather than scans of every row. Below
//! [`IndexTuning::ann_min_rows`] the full-text index is rebuilt whenever it does not hold
//! exactly the table's rows, so that BM25 statistics are those of the rows (see `maintain`).
//! Rows added later stay outside the other indices (and, from that size on, the full-text one)
//! and are searched unindexed until more than [`IndexTuning::index_lag_rows`] of them pile up;
//! then they are folded in (`optimize`). Each fold adds a delta segment to the ANN index, and
//! past [`IndexTuning::max_index_deltas`] the deltas are merged into one. From
//! [`IndexTuning::ann_min_rows`] rows on, an IVF-SQ cosine index serves vector search: the
//! vectors quantised to a byte per dimension in IVF partitions, scanned, and the best
//! candidates re-ranked by their exact distance ([`IndexTuning::vector_refine_factor`]). At 100k
//! rows it builds in about 1.5 s and its first 10 are the exact 10 nearest; the IVF-HNSW-SQ
//! index it replaced took about a minute to build (most of a `reindex`) and found 85-88% of
//! them, for the same search time. It is rebuilt when the table has doubled since it was
//! trained, or when it is of another kind (an index built by an older memfold), and filters
//! stay prefilters with it. More fragments than
//! [`IndexTuning::compact_after`] allows for the table's size (8 up to 8k rows, one per 1,000
//! rows beyond, at most 64), or more than a fifth of rows deleted, compacts the table: every
//! fragment costs each search another file to read. A compaction merges only fragments the same
//! index segments cover, so in practice it rewrites the rows not yet indexed (one fragment per
//! small write) and fragments with many deletions, not the indexed bulk of the table.
//!
//! **Old versions go at once.** Every write makes a table version, and each keeps its data
//! files, index segments and manifest on disk until pruned. After every sync that wrote
//! anything, every version but the latest is removed with the files only it used (`prune`,
//! under the writer lock, so no writer has a commit in flight); a search that was reading a
//! removed version fails and runs again on the latest. lance's caches are bounded
//! ([`IndexTuning::index_cache_per_byte`]): its defaults (6 GiB of index, 1 GiB of metadata)
//! let a long-running daemon keep every index delta and version it ever opened. The index
//! cache is sized to the index files on disk when the index is opened, and resized by
//! [`Index::settle`] when the index has grown or shrunk past a factor of two.
//!
//! **What the rows were built from** ([`sources`]): a recording sync ([`Index::sync_from`])
//! leaves `sources.json` with the stat and hash of every file the docs were derived from, so
//! the next refresh stats the files instead of reading them (see `corpus::catch_up`).
//!
//! **Search** ([`Index::search`]) fuses the vector top-N and the full-text top-N
//! (N = max(4k, 20)) by reciprocal rank fusion plus a recency term on `valid_from`; the exact
//! score is documented in `index/rank.rs`. Each leg cuts its N by score and then key, never
//! where lance stopped reading, so below the ANN threshold a search is a function of the rows
//! and the question. Above it, where vector search is approximate and BM25 statistics are the
//! full-text index's, the text leg breaks a tie at its cut among the rows lance returned
//! rather than reading every tied row (a common word ties thousands), and a process that
//! asked for it ([`Index::hold_vectors`], the daemon) scans vectors held in memory instead of
//! asking lance, asks lance's full-text search for row ids and scores only, and takes keys,
//! filters and hits from the rows it holds (`index/held.rs`). The two legs run on separate
//! tasks, so on two or more cores they run at the same time.

pub mod corpus;
mod held;
mod writer_lock;
mod query;
mod meta;
mod rank;
mod rows;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchIterator};
use chrono::NaiveDate;
use futures::TryStreamExt;
use lancedb::database::CreateTableMode;
use lancedb::index::{Index as LanceIndex, IndexType};
use lancedb::index::scalar::{BTreeIndexBuilder, BitmapIndexBuilder, FtsIndexBuilder, FullTextSearchQuery};
use lancedb::index::vector::IvfSqIndexBuilder;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::{CompactionOptions, OptimizeAction, OptimizeOptions};
use lancedb::{Connection, DistanceType, Table};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use crate::config::SearchConfig;
use crate::models::embed::{EmbedError, Embedder};

use meta::Meta;
use crate::store::sources::Sources;
use rows::{DISTANCE, HASH, HIT, KEY, KIND, PATH, SCORE, TEXT, VALID_FROM, VALID_UNTIL, VECTOR};

/// Name of the table inside the index folder.
const TABLE: &str = "docs";
/// Name of the full-text index on `text`.
const FTS_INDEX: &str = "text_idx";
/// Name of the ANN index on `vector`.
const VECTOR_INDEX: &str = "vector_idx";
/// Keys per `key IN (...)` filter.
const KEYS_PER_FILTER: usize = 1000;
/// Field metadata lance uses to mark the unenforced primary key.
const PK_METADATA: [&str; 2] = ["lance-schema:unenforced-primary-key:position", "lance-schema:unenforced-primary-key"];

/// What a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocKind {
    /// A current entry of `consolidated/memory.md`.
    Entry,
    /// A superseded or removed version of an entry (`consolidated/history.md`).
    History,
    /// A fact from the archive, searchable before consolidation.
    Fact,
}

impl DocKind {
    /// Every kind.
    pub const ALL: [DocKind; 3] = [DocKind::Entry, DocKind::History, DocKind::Fact];

    /// The stored (and JSON) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Entry => "entry",
            DocKind::History => "history",
            DocKind::Fact => "fact",
        }
    }

    /// The inverse of [`DocKind::as_str`].
    pub fn parse(s: &str) -> Option<DocKind> {
        match s {
            "entry" => Some(DocKind::Entry),
            "history" => Some(DocKind::History),
            "fact" => Some(DocKind::Fact),
            _ => None,
        }
    }
}

/// One document to index, as parsed from the markdown.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    /// Unique row key: the entry id for entries, the fact id for facts, a unique key per
    /// history version (e.g. `<entry id>@<n>`).
    pub key: String,
    /// The entry or fact id shown to users.
    pub id: String,
    pub kind: DocKind,
    pub text: String,
    /// File relative to the root, e.g. `consolidated/memory.md`, `archive/2026-11-22.md`.
    pub path: String,
    pub sources: Vec<String>,
    /// Entries: first seen (or updated, for the current version); facts: their date.
    pub valid_from: NaiveDate,
    /// History versions only: the day the version stopped being current.
    pub valid_until: Option<NaiveDate>,
    pub pinned: bool,
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hit {
    pub key: String,
    pub id: String,
    pub kind: DocKind,
    pub text: String,
    /// Fused rank score plus recency; higher is better, comparable within one search only.
    pub score: f64,
    pub sources: Vec<String>,
    pub path: String,
    pub valid_from: NaiveDate,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<NaiveDate>,
}

/// What a search returns and how it ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOpts {
    /// Hits to return.
    pub k: usize,
    /// Return what was current on this day: entry and history rows valid then, facts dated
    /// then or earlier. Includes history rows unless `kinds` is given.
    pub as_of: Option<NaiveDate>,
    /// Also return history rows.
    pub history: bool,
    /// Kinds to return; `None` means entries and facts (plus history per the flags above).
    pub kinds: Option<Vec<DocKind>>,
    /// Weight of the recency term (0 disables it).
    pub recency_weight: f64,
    pub recency_half_life_days: f64,
    /// The day ages are counted to.
    pub today: NaiveDate,
}

impl SearchOpts {
    /// The defaults of `[search]`: `default_k` hits, entries and facts, no date filter.
    pub fn new(config: &SearchConfig, today: NaiveDate) -> SearchOpts {
        SearchOpts {
            k: config.default_k,
            as_of: None,
            history: false,
            kinds: None,
            recency_weight: config.recency_weight,
            recency_half_life_days: config.recency_half_life_days,
            today,
        }
    }
}

/// Which rows a sync is responsible for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every row: rows whose key is not among the docs are deleted.
    All,
    /// Rows of these files only: rows of other files are left alone even if absent from the
    /// docs. Docs of other files are still upserted (a key may move between files).
    Paths(Vec<String>),
    /// Lines were only appended to these files since their rows were written: the docs are
    /// those of the new lines, and no row is deleted.
    Appended(Vec<String>),
}

/// What a sync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SyncStats {
    /// Texts sent to the embedder (a changed doc whose text did not change keeps its vector).
    pub embedded: usize,
    /// Rows written (new or changed).
    pub upserted: usize,
    /// Rows deleted because their key is gone.
    pub deleted: usize,
    /// Docs whose row was already up to date.
    pub unchanged: usize,
}

/// What [`Index::settle`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Settled {
    /// Rows that were outside an index and were folded in.
    pub folded_rows: usize,
    /// Segments of the vector index merged into one (0: none).
    pub merged_segments: usize,
    /// Whether the full-text index was rebuilt (rows it held had been deleted or rewritten).
    pub text_rebuilt: bool,
    /// Whether compaction merged fragments.
    pub compacted: bool,
}

/// Operational limits of the index; the defaults suit a personal memory of up to ~1M rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexTuning {
    /// Rows per merge-insert during a sync.
    pub write_batch: usize,
    /// Texts per embedder call during a sync; progress is reported after each call.
    pub embed_batch: usize,
    /// Rows from which vector search uses an ANN index instead of a flat scan.
    pub ann_min_rows: usize,
    /// Rows left outside the full-text and vector indices before a sync folds them in.
    pub index_lag_rows: usize,
    /// Table fragments before a sync compacts the table, at least; larger tables wait for one
    /// fragment per [`IndexTuning::rows_per_fragment_allowed`] rows (and at most
    /// [`IndexTuning::max_fragments_cap`]).
    pub max_fragments: usize,
    /// See [`IndexTuning::max_fragments`].
    pub rows_per_fragment_allowed: usize,
    /// See [`IndexTuning::max_fragments`].
    pub max_fragments_cap: usize,
    /// Delta segments an index may gather, one per fold, before a fold merges them into one.
    pub max_index_deltas: usize,
    /// Bytes of opened index files (vector partitions, full-text postings) kept in memory per
    /// byte the index files take on disk; within [`IndexTuning::index_cache_min`] and
    /// [`IndexTuning::index_cache_max`].
    pub index_cache_per_byte: usize,
    /// See [`IndexTuning::index_cache_per_byte`].
    pub index_cache_min: usize,
    /// See [`IndexTuning::index_cache_per_byte`].
    pub index_cache_max: usize,
    /// Bytes of table metadata (manifests, file footers, deletion files) kept in memory.
    pub metadata_cache_bytes: usize,
    /// The vector leg asks the ANN index for this many times the candidates it keeps and
    /// ranks them by their exact distance (lance's `refine_factor`; 0: by the quantised one,
    /// which at 100k rows put only 90% of the exact top 10 in the first 10).
    pub vector_refine_factor: u32,
}

impl Default for IndexTuning {
    fn default() -> Self {
        IndexTuning {
            write_batch: 5_000,
            embed_batch: 256,
            ann_min_rows: 5_000,
            index_lag_rows: 256,
            max_fragments: 8,
            rows_per_fragment_allowed: 1_000,
            max_fragments_cap: 64,
            max_index_deltas: 3,
            // lance's defaults (6 GiB and 1 GiB) let a long-running daemon grow by every index
            // delta and table version it has ever opened: entries of files a write made old
            // stay until the cache is full. Sized to what the index holds, that is at most a
            // few times the index itself.
            index_cache_per_byte: 2,
            index_cache_min: 32 << 20,
            index_cache_max: 512 << 20,
            metadata_cache_bytes: 16 << 20,
            vector_refine_factor: 2,
        }
    }
}

impl IndexTuning {
    /// Bytes of index cache for index files taking `on_disk` bytes.
    pub fn index_cache_for(&self, on_disk: u64) -> usize {
        let wanted = usize::try_from(on_disk).unwrap_or(usize::MAX).saturating_mul(self.index_cache_per_byte);
        wanted.clamp(self.index_cache_min, self.index_cache_max.max(self.index_cache_min))
    }

    /// Fragments a table of `rows` rows may have before a sync compacts it.
    pub fn compact_after(&self, rows: usize) -> usize {
        (rows / self.rows_per_fragment_allowed.max(1)).clamp(self.max_fragments, self.max_fragments_cap.max(self.max_fragments))
    }
}

/// Errors from the index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    #[error("index {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("index writer {0}")]
    Lock(#[from] crate::sys::lock::LockError),
    #[error("index meta {path}: {message}")]
    Meta { path: PathBuf, message: String },
    #[error("index {op}: {source}")]
    Db {
        op: &'static str,
        #[source]
        source: lancedb::Error,
    },
    #[error("index batch: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("embedding for the index: {0}")]
    Embed(#[from] EmbedError),
    #[error("embedder {embedder} {message}")]
    EmbedShape { embedder: String, message: String },
    #[error("vector has {got} dimensions, the index holds {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("index data: {0}")]
    Corrupt(String),
}

trait DbContext<T> {
    fn db(self, op: &'static str) -> Result<T, IndexError>;
}

impl<T> DbContext<T> for lancedb::Result<T> {
    fn db(self, op: &'static str) -> Result<T, IndexError> {
        self.map_err(|source| IndexError::Db { op, source })
    }
}

/// A handle on the index of one memory root. Cheap to share behind an `Arc`; every method
/// takes `&self`.
pub struct Index {
    dir: PathBuf,
    lock_path: PathBuf,
    db: Mutex<Connection>,
    /// Bytes of index cache `db` was opened with.
    cache: AtomicUsize,
    table: Mutex<Table>,
    embedder: Arc<dyn Embedder>,
    /// The meta this process's embedder requires.
    want: Meta,
    tuning: IndexTuning,
    /// Vectors held in memory for search, when [`Index::hold_vectors`] asked for them.
    held: Arc<held::Slot>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("dir", &self.dir).field("embedder", &self.want.embedder).finish_non_exhaustive()
    }
}

/// What is stored for one key, as far as sync needs to know.
struct Existing {
    hash: String,
    paths: Vec<String>,
}

impl Index {
    /// The embedder whose vectors this index holds.
    pub fn embedder(&self) -> Arc<dyn Embedder> {
        self.embedder.clone()
    }

    /// Open (creating if needed) the index at `dir` (`<root>/.memfold/index`).
    pub async fn open(dir: &Path, embedder: Arc<dyn Embedder>) -> Result<Index, IndexError> {
        Index::open_with(dir, embedder, IndexTuning::default()).await
    }

    /// [`Index::open`] with explicit limits.
    pub async fn open_with(dir: &Path, embedder: Arc<dyn Embedder>, tuning: IndexTuning) -> Result<Index, IndexError> {
        crate::sys::access::create_dir(dir).map_err(|source| IndexError::Io { path: dir.to_path_buf(), source })?;
        let uri = dir.to_str().ok_or_else(|| IndexError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other("the index path is not valid UTF-8"),
        })?;
        let cache = tuning.index_cache_for(index_files_bytes(dir));
        let db = connect(uri, &tuning, cache).await?;
        let want = Meta {
            schema_version: rows::SCHEMA_VERSION,
            embedder: embedder.id(),
            dim: embedder.dim(),
            ann_trained_rows: None,
            text_stale: false,
        };
        let lock_path = writer_lock::path(dir);
        let current = meta::read(dir).await?;
        let table = if current.as_ref().is_some_and(|m| m.compatible(&want)) && table_exists(&db).await? {
            let table = db.open_table(TABLE).execute().await.db("open table")?;
            if !has_primary_key(&table).await? {
                let _lock = writer_lock::acquire(&lock_path).await?;
                if !has_primary_key(&table).await? {
                    table.set_unenforced_primary_key([KEY]).await.db("declare the primary key")?;
                }
            }
            table
        } else {
            let _lock = writer_lock::acquire(&lock_path).await?;
            prepare_locked(&db, dir, &want).await?.0
        };
        Ok(Index {
            dir: dir.to_path_buf(),
            lock_path,
            db: Mutex::new(db),
            cache: AtomicUsize::new(cache),
            table: Mutex::new(table),
            embedder,
            want,
            tuning,
            held: Arc::default(),
        })
    }

    /// From now on keep the table's rows in memory for search (see `index/held.rs`), read in
    /// the background once the table has kept one version for a second; later calls do nothing.
    pub fn hold_vectors(&self) {
        self.held.hold(&self.table());
    }

    /// Searches whose vector leg scanned held vectors (the others asked lance).
    pub fn searches_with_held_vectors(&self) -> u64 {
        self.held.served()
    }

    #[cfg(any(test, feature = "testkit"))]
    /// Whether the vectors of the table's latest version are held (see [`Index::hold_vectors`]).
    pub async fn vectors_held(&self) -> bool {
        self.held.current(&self.table()).await.is_some()
    }

    #[cfg(test)]
    /// Whether [`Index::hold_vectors`] was called.
    pub fn holds_vectors(&self) -> bool {
        self.held.enabled()
    }

    /// The content hash of `doc`, as [`Index::digest`] reports it for the doc's row.
    pub fn content_hash(doc: &Doc) -> String {
        rows::content_hash(doc)
    }

    fn table(&self) -> Table {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_table(&self, table: Table) {
        *self.table.lock().unwrap_or_else(|e| e.into_inner()) = table;
    }

    fn db(&self) -> Connection {
        self.db.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Under the writer lock: make sure the table still belongs to this embedder (another
    /// process may have recreated it for a different one) and return it with the current meta.
    async fn table_locked(&self) -> Result<(Table, Meta), IndexError> {
        let (table, meta, recreated) = prepare_locked(&self.db(), &self.dir, &self.want).await?;
        if recreated {
            self.set_table(table.clone());
            Ok((table, meta))
        } else {
            Ok((self.table(), meta))
        }
    }

    /// [`Index::sync_from`] with docs not derived from files: drops the record of the sources
    /// (tests and benches; memfold itself always records).
    #[cfg(any(test, feature = "testkit"))]
    pub async fn sync(
        &self,
        docs: &[Doc],
        scope: Scope,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<SyncStats, IndexError> {
        self.sync_recording(docs, scope, progress, None).await
    }

    /// What the rows were built from ([`Sources`]), as the last recording sync left it; `None`
    /// after any other write.
    pub async fn sources(&self) -> Option<Sources> {
        meta::read_sources(&self.dir).await
    }

    /// Take into the record the new stat of files `seen` found with their recorded content
    /// ([`Sources::refreshed`]), if the writer lock is free: a reader never waits for a
    /// writer, and a writer's sync records them anyway. Whether the record was written.
    pub async fn refresh_sources(&self, seen: &Sources) -> Result<bool, IndexError> {
        let Some(_lock) = writer_lock::try_acquire(&self.lock_path).await? else { return Ok(false) };
        match meta::read_sources(&self.dir).await {
            Some(stored) if stored.refreshed_by(seen) => {
                meta::write_sources(&self.dir, &stored.refreshed(seen)).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Make the rows for `scope` equal to `docs` (see [`Scope`]). Rows whose key is absent are
    /// deleted, rows whose content hash differs are upserted (re-embedded only if their text
    /// changed), equal rows are untouched. `progress(done, total)` counts deleted keys and
    /// written docs; it is called after the deletes, after each embedder call and after each
    /// write. Runs under the index writer lock.
    ///
    /// The docs are derived from files read after `seen` was looked at, and `seen` is recorded
    /// as what the rows were built from: all of it for [`Scope::All`]; for [`Scope::Paths`] and [`Scope::Appended`] the
    /// entries of those paths, merged into the record if the files that settle facts
    /// ([`crate::store::sources::SETTLING`]) are the ones the record describes (else the record is dropped).
    pub async fn sync_from(
        &self,
        docs: &[Doc],
        scope: Scope,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
        seen: &Sources,
    ) -> Result<SyncStats, IndexError> {
        self.sync_recording(docs, scope, progress, Some(seen)).await
    }

    async fn sync_recording(
        &self,
        docs: &[Doc],
        scope: Scope,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
        seen: Option<&Sources>,
    ) -> Result<SyncStats, IndexError> {
        let started = Instant::now();
        let _lock = writer_lock::acquire(&self.lock_path).await?;
        let (table, mut meta) = self.table_locked().await?;
        // The record after this sync, computed before any row changes; until it is written
        // there is none, so a sync cut short leaves no record claiming rows it did not write.
        let record = match (seen, &scope) {
            (None, _) => None,
            (Some(seen), Scope::All) => Some(seen.clone()),
            (Some(seen), Scope::Paths(paths) | Scope::Appended(paths)) => meta::read_sources(&self.dir)
                .await
                .filter(|stored| stored.same_settling(seen))
                .map(|stored| stored.merged(seen, paths).refreshed(seen)),
        };
        meta::forget_sources(&self.dir).await?;
        let existing = self.existing(&table, &scope, docs).await?;
        let in_scope = |path: &str| match &scope {
            Scope::All => true,
            Scope::Paths(paths) => paths.iter().any(|p| p == path),
            Scope::Appended(_) => false,
        };

        let mut wanted: HashSet<&str> = HashSet::with_capacity(docs.len());
        let mut stats = SyncStats::default();
        let mut to_write: Vec<(&Doc, String)> = Vec::new();
        let mut repair: Vec<String> = Vec::new();
        for doc in docs {
            if !wanted.insert(&doc.key) {
                warn!(key = %doc.key, path = %doc.path, "two documents share a key; indexing the first");
                continue;
            }
            let hash = rows::content_hash(doc);
            match existing.get(&doc.key) {
                Some(e) if e.paths.len() == 1 && e.hash == hash => stats.unchanged += 1,
                Some(e) => {
                    if e.paths.len() > 1 {
                        repair.push(doc.key.clone());
                    }
                    to_write.push((doc, hash));
                }
                None => to_write.push((doc, hash)),
            }
        }
        let mut to_delete: Vec<String> = existing
            .iter()
            .filter(|(key, e)| !wanted.contains(key.as_str()) && e.paths.iter().any(|p| in_scope(p)))
            .map(|(key, _)| key.clone())
            .collect();
        to_delete.sort();
        let total = to_delete.len() + to_write.len();
        let report = |done: usize| {
            if let Some(progress) = progress {
                progress(done, total);
            }
        };

        // A delete, and an upsert of a stored key (lance deletes the old row), leaves the old row
        // in the full-text index's statistics until that index is rebuilt.
        let removes = !to_delete.is_empty() || to_write.iter().any(|(d, _)| existing.contains_key(&d.key));
        if removes && !meta.text_stale {
            meta.text_stale = true;
            meta::write(&self.dir, &meta).await?;
        }
        // Deleting every copy of a duplicated key before re-inserting it repairs the table.
        for chunk in to_delete.chunks(KEYS_PER_FILTER).chain(repair.chunks(KEYS_PER_FILTER)) {
            table.delete(rank::key_list(chunk, false).as_str()).await.db("delete rows")?;
        }
        if !repair.is_empty() {
            warn!(keys = repair.len(), "index held duplicate keys; rewrote them");
        }
        stats.deleted = to_delete.len();
        let mut done = to_delete.len();
        if total > 0 {
            report(done);
        }

        // New keys are appended; stored keys are rewritten by a merge-insert, which replaces the
        // old row in the same commit (and, unlike an append, reads the key column to find it).
        let schema = rows::schema(self.want.dim);
        let stored = |doc: &Doc| existing.contains_key(&doc.key) && !repair.contains(&doc.key);
        to_write.sort_by_key(|(doc, _)| stored(doc));
        for chunk in to_write.chunks(self.tuning.write_batch.max(1)) {
            let (vectors, embedded) = self.vectors_for(&table, chunk, &existing, &|n| report(done + n)).await?;
            stats.embedded += embedded;
            let (updates, appends): (Vec<usize>, Vec<usize>) = (0..chunk.len()).partition(|&i| stored(chunk[i].0));
            for (rows_at, update) in [(appends, false), (updates, true)] {
                if rows_at.is_empty() {
                    continue;
                }
                let docs: Vec<&Doc> = rows_at.iter().map(|&i| chunk[i].0).collect();
                let hashes: Vec<String> = rows_at.iter().map(|&i| chunk[i].1.clone()).collect();
                let vectors: Vec<Vec<f32>> = rows_at.iter().map(|&i| vectors[i].clone()).collect();
                let batch = rows::batch(&schema, &docs, &hashes, &vectors)?;
                if update {
                    let mut merge = table.merge_insert(&[KEY]);
                    merge.when_matched_update_all(None).when_not_matched_insert_all();
                    let reader = Box::new(RecordBatchIterator::new([Ok(batch)], schema.clone()));
                    merge.execute(reader).await.db("upsert rows")?;
                } else {
                    table.add(batch).execute().await.db("append rows")?;
                }
            }
            done += chunk.len();
            report(done);
        }
        stats.upserted = to_write.len();

        let maintained = self.maintain(&table, &mut meta).await?;
        if stats.upserted + stats.deleted > 0 || maintained {
            self.prune(&table).await?;
            self.held.changed(&table);
        }
        if maintained {
            // A new or rebuilt index may no longer fit the cache sized for the old one, and a
            // partition that does not fit is read from disk again by every search.
            self.resize_cache().await?;
            // Folding rows into the indices and compacting free what they built with; a
            // daemon under a steady stream of writes is never idle long enough to hand it
            // back otherwise.
            let _ = tokio::task::spawn_blocking(crate::sys::alloc::release_free_memory).await;
        }
        if let Some(record) = &record {
            meta::write_sources(&self.dir, record).await?;
        }
        if stats.upserted + stats.deleted > 0 {
            info!(
                embedded = stats.embedded,
                upserted = stats.upserted,
                deleted = stats.deleted,
                unchanged = stats.unchanged,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "index synced"
            );
        } else {
            debug!(unchanged = stats.unchanged, "index already up to date");
        }
        Ok(stats)
    }

    /// Key → stored hash and path(s) of every row a sync of `docs` over `scope` may touch: all
    /// rows, or those of the scope's files and of the docs' keys (a key with several paths is
    /// duplicated).
    async fn existing(&self, table: &Table, scope: &Scope, docs: &[Doc]) -> Result<HashMap<String, Existing>, IndexError> {
        let mut query = table.query().select(Select::columns(&[KEY, HASH, PATH]));
        if let Scope::Paths(paths) | Scope::Appended(paths) = scope {
            let keys: Vec<String> = docs.iter().map(|d| d.key.clone()).collect();
            let mut parts: Vec<String> = keys.chunks(KEYS_PER_FILTER).map(|c| rank::key_list(c, false)).collect();
            if matches!(scope, Scope::Paths(_)) {
                parts.push(rank::path_list(paths));
            }
            if parts.is_empty() {
                return Ok(HashMap::new());
            }
            query = query.only_if(parts.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" OR "));
        }
        let batches = collect(query.execute().await, "read keys").await?;
        let mut out: HashMap<String, Existing> = HashMap::new();
        for batch in &batches {
            let keys = rows::strings(batch, KEY)?;
            let hashes = rows::strings(batch, HASH)?;
            let paths = rows::strings(batch, PATH)?;
            for ((key, hash), path) in keys.into_iter().zip(hashes).zip(paths) {
                out.entry(key).or_insert_with(|| Existing { hash, paths: Vec::new() }).paths.push(path);
            }
        }
        Ok(out)
    }

    /// Vectors for docs about to be written: the stored vector when the row's text is
    /// unchanged, else a fresh embedding (each distinct text embedded once). Returns the
    /// vectors and the number of texts embedded; `report(n)` after each embedder call, with n
    /// the docs of this chunk that have a vector.
    async fn vectors_for(
        &self,
        table: &Table,
        chunk: &[(&Doc, String)],
        existing: &HashMap<String, Existing>,
        report: &(dyn Fn(usize) + Send + Sync),
    ) -> Result<(Vec<Vec<f32>>, usize), IndexError> {
        let stored_keys: Vec<String> = chunk
            .iter()
            .filter(|(d, _)| existing.get(&d.key).is_some_and(|e| e.paths.len() == 1))
            .map(|(d, _)| d.key.clone())
            .collect();
        let mut stored: HashMap<String, (String, Vec<f32>)> = HashMap::new();
        for keys in stored_keys.chunks(KEYS_PER_FILTER) {
            let query =
                table.query().only_if(rank::key_list(keys, false)).select(Select::columns(&[KEY, TEXT, VECTOR]));
            for batch in collect(query.execute().await, "read stored vectors").await? {
                let keys = rows::strings(&batch, KEY)?;
                let texts = rows::strings(&batch, TEXT)?;
                let vectors = rows::vectors(&batch, VECTOR)?;
                for ((key, text), vector) in keys.into_iter().zip(texts).zip(vectors) {
                    stored.insert(key, (text, vector));
                }
            }
        }

        let mut out: Vec<Option<Vec<f32>>> = Vec::with_capacity(chunk.len());
        let mut pending: Vec<&str> = Vec::new();
        let mut waiting: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (doc, _)) in chunk.iter().enumerate() {
            match stored.remove(&doc.key) {
                Some((text, vector)) if text == doc.text && vector.len() == self.want.dim => out.push(Some(vector)),
                _ => {
                    out.push(None);
                    let slots = waiting.entry(doc.text.as_str()).or_default();
                    if slots.is_empty() {
                        pending.push(doc.text.as_str());
                    }
                    slots.push(i);
                }
            }
        }
        let mut ready = out.iter().filter(|v| v.is_some()).count();
        for texts in pending.chunks(self.tuning.embed_batch.max(1)) {
            let owned: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
            let vectors = self.embed(&owned).await?;
            for (text, vector) in texts.iter().zip(vectors) {
                let slots = &waiting[text];
                ready += slots.len();
                for &i in slots {
                    out[i] = Some(vector.clone());
                }
            }
            report(ready);
        }
        let vectors = out.into_iter().map(|v| v.expect("every doc has a vector")).collect();
        Ok((vectors, pending.len()))
    }

    /// Embed `texts`, checking count and dimension.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, IndexError> {
        let vectors = self.embedder.embed(texts).await?;
        let shape = |message: String| IndexError::EmbedShape { embedder: self.want.embedder.clone(), message };
        if vectors.len() != texts.len() {
            return Err(shape(format!("returned {} vectors for {} texts", vectors.len(), texts.len())));
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != self.want.dim) {
            return Err(shape(format!("returned a vector of {} dimensions, expected {}", v.len(), self.want.dim)));
        }
        Ok(vectors)
    }

    /// Build or refresh the full-text and ANN indices and compact the table when due. Returns
    /// whether it changed anything.
    async fn maintain(&self, table: &Table, meta: &mut Meta) -> Result<bool, IndexError> {
        let stats = table.stats().await.db("table statistics")?;
        let rows = stats.num_rows;
        if rows == 0 {
            return Ok(false);
        }
        let indices = table.list_indices().await.db("list indices")?;
        let on = |column: &str| indices.iter().find(|i| i.columns.len() == 1 && i.columns[0] == column);
        let mut built = false;

        // Scalar indices make the kind and as-of filters index lookups instead of scans of
        // every row; each builds in milliseconds.
        for column in [KIND, VALID_FROM, VALID_UNTIL] {
            if on(column).is_none() {
                let index = match column {
                    KIND => LanceIndex::Bitmap(BitmapIndexBuilder::default()),
                    _ => LanceIndex::BTree(BTreeIndexBuilder::default()),
                };
                table
                    .create_index(&[column], index)
                    .name(format!("{column}_idx"))
                    .execute()
                    .await
                    .db("build a filter index")?;
                built = true;
            }
        }

        let vector_index = on(VECTOR);
        if rows >= self.tuning.ann_min_rows {
            let trained =
                meta.ann_trained_rows.or_else(|| vector_index.and_then(|i| i.num_indexed_rows).map(|n| n as usize));
            let reason = match (vector_index, trained) {
                (None, _) => Some("none yet"),
                (Some(i), _) if i.index_type != IndexType::IvfSq => Some("it is of another kind"),
                (Some(_), Some(trained)) if rows >= 2 * trained.max(1) => Some("the table has doubled since training"),
                _ => None,
            };
            if let Some(reason) = reason {
                info!(rows, reason, "building the vector index (IVF-SQ, cosine)");
                let started = Instant::now();
                let builder = IvfSqIndexBuilder::default().distance_type(DistanceType::Cosine);
                let index = LanceIndex::IvfSq(builder);
                table
                    .create_index(&[VECTOR], index)
                    .name(VECTOR_INDEX.to_string())
                    .replace(true)
                    .execute()
                    .await
                    .db("build the vector index")?;
                info!(rows, elapsed_ms = started.elapsed().as_millis() as u64, "built the vector index");
                meta.ann_trained_rows = Some(rows);
                meta::write(&self.dir, meta).await?;
                built = true;
            }
        }

        let deleted = stats.num_deleted_rows.unwrap_or(0);
        let fragments = stats.fragment_stats.num_fragments;
        let compact = fragments > self.tuning.compact_after(rows) || deleted > rows / 5;
        if compact {
            // lance merges only fragments that the same index segments cover: the rows not yet
            // in any index (one fragment per small write) become one fragment, indexed rows stay
            // where they are unless deletions make them worth rewriting. Folding the new rows
            // into the indices here would give every compaction its own index delta, and so
            // its own fragment that no later compaction could merge.
            let started = Instant::now();
            let after = compact_table(table).await?;
            info!(fragments, after, deleted, elapsed_ms = started.elapsed().as_millis() as u64, "compacted the index");
        }

        // lance scores full-text matches with the statistics (document count and lengths, term
        // frequencies) of the index that holds them: rows deleted or rewritten since the index
        // was built still count, and rows not yet in it are scored apart, with other statistics.
        // Where vector search is exact, below the ANN threshold, the full-text index is therefore
        // rebuilt whenever it does not hold exactly the table's rows, so that scores depend on
        // the rows alone: the same files give the same ranking however the index got there.
        // Larger tables fold new rows in (below) and rebuild the index when they compact.
        // Rows outside each index, and the ANN index's segments (read once, for this and the
        // fold below).
        let (mut outside, segments) = coverage(table, &indices).await?;
        let text_index = on(TEXT).map(|i| i.name.clone());
        let rebuild_text = match &text_index {
            None => true,
            Some(_) if rows >= self.tuning.ann_min_rows => compact && meta.text_stale,
            Some(name) => meta.text_stale || outside.get(name).is_some_and(|n| *n > 0),
        };
        if rebuild_text {
            let started = Instant::now();
            self.build_text_index(table, text_index.as_deref(), meta).await?;
            let elapsed_ms = started.elapsed().as_millis() as u64;
            if let Some(name) = &text_index {
                outside.remove(name);
                debug!(rows, elapsed_ms, "rebuilt the full-text index");
            } else {
                info!(rows, elapsed_ms, "built the full-text index");
                built = true;
            }
        }

        let mut folded = false;
        if !built {
            let lag = outside.values().copied().max().unwrap_or(0);
            if lag > self.tuning.index_lag_rows {
                let started = Instant::now();
                // A fold adds a delta segment to the ANN index that every search then visits
                // too. Past a few, the deltas (small, so cheap to rebuild) and the new rows merge
                // into one segment beside the base.
                if segments > self.tuning.max_index_deltas {
                    let merge = OptimizeOptions::merge(segments - 1).index_names(vec![VECTOR_INDEX.to_string()]);
                    table.optimize(OptimizeAction::Index(merge)).await.db("merge the vector index deltas")?;
                }
                table.optimize(OptimizeAction::Index(OptimizeOptions::default())).await.db("update the indices")?;
                info!(
                    unindexed = lag,
                    segments,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "folded new rows into the indices"
                );
                folded = true;
            }
        }
        Ok(built || rebuild_text || compact || folded)
    }

    /// Fold what a day of small writes leaves behind back into the indices, for the daemon to
    /// call at start and when it goes idle: rows outside the indices are folded in (each query
    /// scans and tokenises them), the vector index's delta segments are merged into its base
    /// (each is searched apart), the full-text index is rebuilt if rows it holds were deleted
    /// or rewritten, fragments of unindexed rows are compacted into one, and old versions are
    /// removed. Writes nothing when there is nothing to fold. Runs under the index writer lock.
    ///
    /// Below [`IndexTuning::ann_min_rows`] every sync already keeps the indices exact, so only
    /// the compaction applies.
    pub async fn settle(&self) -> Result<Settled, IndexError> {
        let started = Instant::now();
        let _lock = writer_lock::acquire(&self.lock_path).await?;
        let (table, mut meta) = self.table_locked().await?;
        let mut done = Settled::default();
        let version = table.version().await.db("table version")?;
        let rows = table.count_rows(None).await.db("count rows")?;
        if rows == 0 {
            return Ok(done);
        }
        let indices = table.list_indices().await.db("list indices")?;
        let (outside, segments) = coverage(&table, &indices).await?;
        let lag = outside.values().copied().max().unwrap_or(0);
        if rows >= self.tuning.ann_min_rows {
            let text_index = indices.iter().find(|i| i.columns.len() == 1 && i.columns[0] == TEXT).map(|i| i.name.clone());
            if meta.text_stale || text_index.is_none() {
                self.build_text_index(&table, text_index.as_deref(), &mut meta).await?;
                done.text_rebuilt = true;
            }
            if lag > 0 || segments > 1 {
                // Merging every segment folds the deltas into the base: the partitions keep
                // their trained centroids, only their contents are rewritten.
                let merge = OptimizeOptions::merge(segments.max(1));
                table.optimize(OptimizeAction::Index(merge)).await.db("fold rows into the indices")?;
                done.folded_rows = lag;
                done.merged_segments = segments;
            }
        }
        // Fragments covered by the same index segments can merge; after the fold above that is
        // every fragment but those with deletions too few to be worth a rewrite.
        let fragments = table.stats().await.db("table statistics")?.fragment_stats.num_fragments;
        if fragments > 1 {
            done.compacted = compact_table(&table).await? < fragments;
        }
        if table.version().await.db("table version")? != version {
            self.prune(&table).await?;
            info!(
                rows,
                folded = done.folded_rows,
                segments = done.merged_segments,
                text_rebuilt = done.text_rebuilt,
                compacted = done.compacted,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "settled the index"
            );
        }
        self.resize_cache().await?;
        self.held.settled(&table).await;
        Ok(done)
    }

    /// Build the full-text index on `text` over every row (replacing the one named `name`, if
    /// any), and record that it no longer counts deleted or rewritten rows.
    async fn build_text_index(&self, table: &Table, name: Option<&str>, meta: &mut Meta) -> Result<(), IndexError> {
        table
            .create_index(&[TEXT], LanceIndex::FTS(FtsIndexBuilder::default()))
            .name(name.unwrap_or(FTS_INDEX).to_string())
            .replace(true)
            .execute()
            .await
            .db("build the full-text index")?;
        if meta.text_stale {
            meta.text_stale = false;
            meta::write(&self.dir, meta).await?;
        }
        Ok(())
    }

    /// Under the writer lock: reopen the database with an index cache sized to the index as it
    /// is now, when that size is more than twice or less than half the cache's. Searches that
    /// hold the old table finish on it.
    async fn resize_cache(&self) -> Result<(), IndexError> {
        let wanted = self.tuning.index_cache_for(index_files_bytes(&self.dir));
        let current = self.cache.load(Ordering::Relaxed);
        if wanted <= current * 2 && wanted >= current / 2 {
            return Ok(());
        }
        let uri = self.dir.to_string_lossy();
        let db = connect(&uri, &self.tuning, wanted).await?;
        let table = db.open_table(TABLE).execute().await.db("open table")?;
        *self.db.lock().unwrap_or_else(|e| e.into_inner()) = db;
        self.set_table(table);
        self.cache.store(wanted, Ordering::Relaxed);
        debug!(from = current, to = wanted, "resized the index cache");
        Ok(())
    }

    /// Remove every table version but the latest, and the files only they use, as soon as a
    /// write made them old: each keeps data files, index segments and a manifest on disk (an
    /// index of 27 MB of markdown once took 881 MB), and nothing reads them. Runs under the
    /// writer lock, so no other writer has a commit in flight whose files could look unused.
    /// A search that was reading a pruned version fails and is run again on the latest
    /// ([`Index::search`]).
    async fn prune(&self, table: &Table) -> Result<(), IndexError> {
        let started = Instant::now();
        let prune = OptimizeAction::Prune {
            older_than: Some(chrono::Duration::zero()),
            delete_unverified: Some(true),
            error_if_tagged_old_versions: Some(false),
        };
        let stats = table.optimize(prune).await.db("remove old versions")?;
        if let Some(p) = stats.prune {
            debug!(
                versions = p.old_versions,
                bytes = p.bytes_removed,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "removed old index versions"
            );
        }
        Ok(())
    }

    /// Drop every row and every index (`reindex --clear`); the next sync rebuilds from the
    /// files. Runs under the index writer lock.
    pub async fn clear(&self) -> Result<(), IndexError> {
        let _lock = writer_lock::acquire(&self.lock_path).await?;
        let table = create_empty(&self.db(), &self.dir, self.want.dim).await?;
        meta::write(&self.dir, &self.want).await?;
        self.set_table(table);
        info!(dir = %self.dir.display(), "index cleared");
        Ok(())
    }
}

/// Compact the table (see `maintain` for what lance merges); returns its fragments after.
async fn compact_table(table: &Table) -> Result<usize, IndexError> {
    let options = CompactionOptions::default();
    table.optimize(OptimizeAction::Compact { options, remap_options: None }).await.db("compact the table")?;
    Ok(table.stats().await.db("table statistics")?.fragment_stats.num_fragments)
}

/// A connection whose reads see other processes' writes at once, with lance's caches bounded:
/// `index_cache` bytes of opened index files, [`IndexTuning::metadata_cache_bytes`] of
/// metadata.
async fn connect(uri: &str, tuning: &IndexTuning, index_cache: usize) -> Result<Connection, IndexError> {
    let session = Arc::new(lance::session::Session::new(
        index_cache,
        tuning.metadata_cache_bytes,
        Arc::new(lance::io::ObjectStoreRegistry::default()),
    ));
    lancedb::connect(uri).read_consistency_interval(Duration::ZERO).session(session).execute().await.db("connect")
}

/// Bytes the table's index files take on disk (0 when there are none yet).
fn index_files_bytes(dir: &Path) -> u64 {
    crate::store::tree_bytes(&dir.join(format!("{TABLE}.lance")).join("_indices"))
}

/// Rows outside each index (by name), and the number of segments of the vector index (1 when
/// it has none).
async fn coverage(table: &Table, indices: &[lancedb::index::IndexConfig]) -> Result<(HashMap<String, usize>, usize), IndexError> {
    let mut outside = HashMap::new();
    let mut segments = 1;
    for index in indices {
        if let Some(s) = table.index_stats(&index.name).await.db("index statistics")? {
            outside.insert(index.name.clone(), s.num_unindexed_rows);
            if index.name == VECTOR_INDEX {
                segments = s.num_indices.unwrap_or(1) as usize;
            }
        }
    }
    Ok((outside, segments))
}

async fn collect(
    stream: lancedb::Result<lancedb::arrow::SendableRecordBatchStream>,
    op: &'static str,
) -> Result<Vec<RecordBatch>, IndexError> {
    stream.db(op)?.try_collect::<Vec<RecordBatch>>().await.db(op)
}

async fn table_exists(db: &Connection) -> Result<bool, IndexError> {
    Ok(db.table_names().execute().await.db("list tables")?.iter().any(|n| n == TABLE))
}

async fn has_primary_key(table: &Table) -> Result<bool, IndexError> {
    let schema = table.schema().await.db("read the schema")?;
    let field = schema.field_with_name(KEY).map_err(|e| IndexError::Corrupt(e.to_string()))?;
    Ok(PK_METADATA.iter().any(|m| field.metadata().contains_key(*m)))
}

/// Create (or overwrite) the table empty, with `key` as its primary key. A table that does not
/// exist yet is created rather than overwritten, which lance would log as a warning.
async fn create_empty(db: &Connection, dir: &Path, dim: usize) -> Result<Table, IndexError> {
    let mode = match table_exists(db).await? {
        true => CreateTableMode::Overwrite,
        false => CreateTableMode::Create,
    };
    meta::forget_sources(dir).await?;
    let table = db.create_empty_table(TABLE, rows::schema(dim)).mode(mode).execute().await.db("create the table")?;
    table.set_unenforced_primary_key([KEY]).await.db("declare the primary key")?;
    Ok(table)
}

/// Under the writer lock: open the table if it exists and `meta.json` matches `want`, else
/// recreate it empty and write `want`. Returns the table, the current meta and whether it was
/// recreated.
async fn prepare_locked(db: &Connection, dir: &Path, want: &Meta) -> Result<(Table, Meta, bool), IndexError> {
    let current = meta::read(dir).await?;
    let exists = table_exists(db).await?;
    if exists && let Some(current) = current.as_ref().filter(|m| m.compatible(want)) {
        let table = db.open_table(TABLE).execute().await.db("open table")?;
        return Ok((table, current.clone(), false));
    }
    match (&current, exists) {
        (Some(old), true) => warn!(
            dir = %dir.display(),
            old_embedder = %old.embedder,
            old_dim = old.dim,
            embedder = %want.embedder,
            dim = want.dim,
            "index was built with another embedder or schema; dropping it, the next sync re-embeds everything"
        ),
        (None, true) => {
            warn!(dir = %dir.display(), "index has no readable meta.json; dropping it, the next sync re-embeds everything")
        }
        (_, false) => info!(dir = %dir.display(), embedder = %want.embedder, dim = want.dim, "creating the index"),
    }
    let table = create_empty(db, dir, want.dim).await?;
    meta::write(dir, want).await?;
    Ok((table, want.clone(), true))
}

#[cfg(test)]
mod tests;
