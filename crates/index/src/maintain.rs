//! Keeping the table small and fast under a stream of small writes: compaction, folding rows
//! into the indices, pruning old versions, and settling what small writes left behind.

use super::meta::Meta;
use super::rows::{KIND, TEXT, VALID_FROM, VALID_UNTIL, VECTOR};
use lancedb::index::scalar::{BTreeIndexBuilder, BitmapIndexBuilder, FtsIndexBuilder};
use lancedb::index::vector::IvfSqIndexBuilder;
use lancedb::index::{Index as LanceIndex, IndexType};
use lancedb::table::{CompactionOptions, OptimizeAction, OptimizeOptions};
use lancedb::{DistanceType, Table};
use memfold_store::sys::guard;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tracing::{debug, info};

use super::{DbContext, FTS_INDEX, Index, IndexError, Settled, TABLE, VECTOR_INDEX, connect, meta, writer_lock};

impl Index {
    /// Build or refresh the full-text and ANN indices and compact the table when due. Returns
    /// whether it changed anything.
    pub(super) async fn maintain(&self, table: &Table, meta: &mut Meta) -> Result<bool, IndexError> {
        let stats = table.stats().await.db("table statistics")?;
        let rows = stats.num_rows;
        if rows == 0 {
            return Ok(false);
        }
        let indices = table.list_indices().await.db("list indices")?;
        let on = |column: &str| indices.iter().find(|i| i.columns.len() == 1 && i.columns[0] == column);
        let mut built = build_filter_indices(table, &on).await?;
        built |= self.train_vector_index(table, meta, rows, on(VECTOR)).await?;

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
        let lag = outside.values().copied().max().unwrap_or(0);
        let folded = !built && lag > self.tuning.index_lag_rows && {
            self.fold_new_rows(table, lag, segments).await?;
            true
        };
        Ok(built || rebuild_text || compact || folded)
    }

    /// Train the vector (ANN) index past `ann_min_rows`: when there is none, when it is of
    /// another kind, or when the table has doubled since it was trained. Returns whether it did.
    async fn train_vector_index(
        &self,
        table: &Table,
        meta: &mut Meta,
        rows: usize,
        index: Option<&lancedb::index::IndexConfig>,
    ) -> Result<bool, IndexError> {
        if rows < self.tuning.ann_min_rows {
            return Ok(false);
        }
        let trained = meta.ann_trained_rows.or_else(|| index.and_then(|i| i.num_indexed_rows).map(|n| n as usize));
        let reason = match (index, trained) {
            (None, _) => "none yet",
            (Some(i), _) if i.index_type != IndexType::IvfSq => "it is of another kind",
            (Some(_), Some(trained)) if rows >= 2 * trained.max(1) => "the table has doubled since training",
            _ => return Ok(false),
        };
        info!(rows, reason, "building the vector index (IVF-SQ, cosine)");
        let started = Instant::now();
        let builder = IvfSqIndexBuilder::default().distance_type(DistanceType::Cosine);
        table
            .create_index(&[VECTOR], LanceIndex::IvfSq(builder))
            .name(VECTOR_INDEX.to_string())
            .replace(true)
            .execute()
            .await
            .db("build the vector index")?;
        info!(rows, elapsed_ms = started.elapsed().as_millis() as u64, "built the vector index");
        meta.ann_trained_rows = Some(rows);
        meta::write(&self.dir, meta).await?;
        Ok(true)
    }

    /// Fold the `lag` rows outside the indices into them. A fold adds a delta segment to the
    /// ANN index that every search then visits too: past a few, the deltas (small, so cheap to
    /// rebuild) and the new rows merge into one segment beside the base.
    async fn fold_new_rows(&self, table: &Table, lag: usize, segments: usize) -> Result<(), IndexError> {
        let started = Instant::now();
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
        Ok(())
    }

    /// Fold what a day of small writes leaves behind back into the indices, for the daemon to
    /// call at start and when it goes idle: rows outside the indices are folded in (each query
    /// scans and tokenises them), the vector index's delta segments are merged into its base
    /// (each is searched apart), the full-text index is rebuilt if rows it holds were deleted
    /// or rewritten, fragments of unindexed rows are compacted into one, and old versions are
    /// removed. Writes nothing when there is nothing to fold. Runs under the index writer lock.
    ///
    /// Below [`IndexTuning::ann_min_rows`](crate::IndexTuning::ann_min_rows) every sync already keeps the indices exact, so only
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
            let text_index =
                indices.iter().find(|i| i.columns.len() == 1 && i.columns[0] == TEXT).map(|i| i.name.clone());
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
    pub(super) async fn build_text_index(
        &self,
        table: &Table,
        name: Option<&str>,
        meta: &mut Meta,
    ) -> Result<(), IndexError> {
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
    pub(super) async fn resize_cache(&self) -> Result<(), IndexError> {
        let wanted = self.tuning.index_cache_for(index_files_bytes(&self.dir));
        let current = self.cache.load(Ordering::Relaxed);
        if wanted <= current * 2 && wanted >= current / 2 {
            return Ok(());
        }
        let uri = self.dir.to_string_lossy();
        let db = connect(&uri, &self.tuning, wanted).await?;
        let table = db.open_table(TABLE).execute().await.db("open table")?;
        *guard(&self.db) = db;
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
    pub(super) async fn prune(&self, table: &Table) -> Result<(), IndexError> {
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
}

/// Compact the table (see `maintain` for what lance merges); returns its fragments after.
pub(super) async fn compact_table(table: &Table) -> Result<usize, IndexError> {
    let options = CompactionOptions::default();
    table.optimize(OptimizeAction::Compact { options, remap_options: None }).await.db("compact the table")?;
    Ok(table.stats().await.db("table statistics")?.fragment_stats.num_fragments)
}

/// Bytes the table's index files take on disk (0 when there are none yet).
pub(super) fn index_files_bytes(dir: &Path) -> u64 {
    memfold_store::tree_bytes(&dir.join(format!("{TABLE}.lance")).join("_indices"))
}

/// Rows outside each index (by name), and the number of segments of the vector index (1 when
/// it has none).
async fn coverage(
    table: &Table,
    indices: &[lancedb::index::IndexConfig],
) -> Result<(HashMap<String, usize>, usize), IndexError> {
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

/// Scalar indices make the kind and as-of filters index lookups instead of scans of every row;
/// each builds in milliseconds. Returns whether one was built.
async fn build_filter_indices<'a>(
    table: &Table,
    on: &impl Fn(&str) -> Option<&'a lancedb::index::IndexConfig>,
) -> Result<bool, IndexError> {
    let mut built = false;
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
    Ok(built)
}
