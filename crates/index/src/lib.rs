//! The derived LanceDB index: current entries, their history versions and facts, one row per
//! document, kept equal to the markdown by content hash, with hybrid search.
//!
//! The index is a pure function of the files. The caller parses the markdown into [`Doc`]s
//! and hands the complete set (for everything, or for some files) to [`Index::sync_from`], which
//! deletes rows whose key is gone, re-embeds and upserts rows whose [`content_hash`](Index::content_hash) changed
//! and leaves equal rows alone. [`Index::digest`] returns key → hash for `verify`, and
//! [`Index::clear`] drops every row for `reindex --clear`.
//!
//! **Layout.** `<root>/.memfold/index/` holds the LanceDB table `docs` and `meta.json`
//! (schema version, embedder id and dimension). Opening with another embedder id or dimension
//! recreates the table empty, so vectors from different embedders are never mixed; the next
//! sync embeds everything again.
//!
//! **One index writer.** Every write (sync, clear, recreation) runs under an exclusive file
//! lock on `<root>/.memfold/index.lock` ([`memfold_store::sys::lock::LockGuard`], std's `File::lock`, taken
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
//! **What the rows were built from** ([`Index::sources`]): a recording sync ([`Index::sync_from`])
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
mod maintain;
mod meta;
mod query;
mod rank;
mod rows;
mod sync;
mod writer_lock;

use memfold_store::sys::guard;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use chrono::NaiveDate;
use futures::TryStreamExt;
use lancedb::database::CreateTableMode;
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::{Connection, DistanceType, Table};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use memfold_models::embed::{EmbedError, Embedder};
use memfold_store::config::SearchConfig;

use meta::Meta;
use rows::{DISTANCE, HASH, HIT, KEY, SCORE, TEXT, VECTOR};

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

/// One search result (read back by a client of the daemon's `GET /search`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The shared space a hit came from, when a space's search read one beside its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    /// Cosine similarity of the hit's vector to the query's, when the vector leg found it: an
    /// absolute measure of relevance where `score` is only a rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    /// The entry this one is linked to, when the search brings it for that link (one hop of an
    /// entry's `related`), below every hit it found itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_to: Option<String>,
}

/// What a search returns and how it ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOpts {
    /// Hits to return.
    pub k: usize,
    /// Return what was current on this day: entry and history rows valid then, facts dated
    /// then or earlier. Includes history rows unless `kinds` is given.
    pub as_of: Option<NaiveDate>,
    /// Only rows dated (`valid_from`) between these two days, both included: what a prompt
    /// naming a day or a month speaks of.
    pub dated: Option<(NaiveDate, NaiveDate)>,
    /// Also return history rows.
    pub history: bool,
    /// Kinds to return; `None` means entries and facts (plus history per the flags above).
    pub kinds: Option<Vec<DocKind>>,
    /// Weight of the recency term (0 disables it).
    pub recency_weight: f64,
    pub recency_half_life_days: f64,
    /// The day ages are counted to.
    pub today: NaiveDate,
    /// Decay by use (`[decay]`): each row gains `weight * 0.5^(days unused / half_life)`, a
    /// row's last use being the later of its `valid_from` and its last recall; exempt rows gain
    /// `weight`. None (or a weight of 0) disables it.
    pub uses: Option<std::sync::Arc<UseDays>>,
    pub decay_weight: f64,
    pub decay_half_life_days: f64,
}

/// What decay by use knows of the rows: when each was last recalled (unix seconds; its day
/// counted in UTC), by key, and the keys exempt from decay (pinned entries, `MEMORY.md`'s).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UseDays {
    pub last: HashMap<String, i64>,
    pub exempt: std::collections::HashSet<String>,
}

impl SearchOpts {
    /// The defaults of `[search]`: `default_k` hits, entries and facts, no date filter.
    pub fn new(config: &SearchConfig, today: NaiveDate) -> SearchOpts {
        SearchOpts {
            k: config.default_k,
            as_of: None,
            dated: None,
            history: false,
            kinds: None,
            recency_weight: config.recency_weight,
            recency_half_life_days: config.recency_half_life_days,
            today,
            uses: None,
            decay_weight: 0.0,
            decay_half_life_days: 1.0,
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
        (rows / self.rows_per_fragment_allowed.max(1))
            .clamp(self.max_fragments, self.max_fragments_cap.max(self.max_fragments))
    }
}

/// Errors from the index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    #[error("index {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("index writer {0}")]
    Lock(#[from] memfold_store::sys::lock::LockError),
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
        memfold_store::sys::access::create_dir(dir)
            .map_err(|source| IndexError::Io { path: dir.to_path_buf(), source })?;
        let uri = dir.to_str().ok_or_else(|| IndexError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other("the index path is not valid UTF-8"),
        })?;
        let cache = tuning.index_cache_for(maintain::index_files_bytes(dir));
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

    /// Keep the table's rows in memory for search from now on, reading them before returning
    /// (see [`Index::hold_vectors`], which reads them in the background).
    pub async fn hold_vectors_now(&self) {
        self.held.hold_now(&self.table()).await;
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

    #[cfg(any(test, feature = "testkit"))]
    /// Whether [`Index::hold_vectors`] was called.
    pub fn holds_vectors(&self) -> bool {
        self.held.enabled()
    }

    /// The content hash of `doc`, as [`Index::digest`] reports it for the doc's row.
    pub fn content_hash(doc: &Doc) -> String {
        rows::content_hash(doc)
    }

    fn table(&self) -> Table {
        guard(&self.table).clone()
    }

    fn set_table(&self, table: Table) {
        *guard(&self.table) = table;
    }

    fn db(&self) -> Connection {
        guard(&self.db).clone()
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

    /// Delete the table in `dir` without opening it, under the writer lock: for an index that
    /// cannot be opened at all (`reindex --clear` on a damaged table). The next open makes an
    /// empty one and the next sync fills it from the files.
    pub async fn discard(dir: &Path) -> Result<(), IndexError> {
        let _lock = writer_lock::acquire(&writer_lock::path(dir)).await?;
        for path in [dir.join(format!("{TABLE}.lance")), meta::path(dir)] {
            let removed = match tokio::fs::metadata(&path).await {
                Ok(m) if m.is_dir() => tokio::fs::remove_dir_all(&path).await,
                Ok(_) => tokio::fs::remove_file(&path).await,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            };
            removed.map_err(|source| IndexError::Io { path: path.clone(), source })?;
        }
        info!(dir = %dir.display(), "unreadable index discarded");
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
