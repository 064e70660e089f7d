//! Bringing the table up to date with the files: rows added, changed and deleted by content
//! hash, and the record of what they were built from (see [`super`] for the rules).

use super::rows::{HASH, KEY, PATH, TEXT, VECTOR};
use arrow_array::RecordBatchIterator;
use lancedb::Table;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use memfold_store::sources::Sources;
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use tracing::{debug, info, warn};

use super::{
    DbContext, Doc, Existing, Index, IndexError, KEYS_PER_FILTER, Scope, SyncStats, collect, meta, rank, rows,
    writer_lock,
};

impl Index {
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
    /// ([`memfold_store::sources::SETTLING`]) are the ones the record describes (else the record is dropped).
    pub async fn sync_from(
        &self,
        docs: &[Doc],
        scope: Scope,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
        seen: &Sources,
    ) -> Result<SyncStats, IndexError> {
        self.sync_recording(docs, scope, progress, Some(seen)).await
    }

    pub(super) async fn sync_recording(
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
        let mut plan = SyncPlan::of(docs, &existing, &scope);
        let mut stats = SyncStats { unchanged: plan.unchanged, ..SyncStats::default() };
        let total = plan.delete.len() + plan.write.len();
        let report = |done: usize| {
            if let Some(progress) = progress {
                progress(done, total);
            }
        };

        // A delete, and an upsert of a stored key (lance deletes the old row), leaves the old row
        // in the full-text index's statistics until that index is rebuilt.
        let removes = !plan.delete.is_empty() || plan.write.iter().any(|(d, _)| existing.contains_key(&d.key));
        if removes && !meta.text_stale {
            meta.text_stale = true;
            meta::write(&self.dir, &meta).await?;
        }
        // Deleting every copy of a duplicated key before re-inserting it repairs the table.
        for chunk in plan.delete.chunks(KEYS_PER_FILTER).chain(plan.repair.chunks(KEYS_PER_FILTER)) {
            table.delete(rank::key_list(chunk, false).as_str()).await.db("delete rows")?;
        }
        if !plan.repair.is_empty() {
            warn!(keys = plan.repair.len(), "index held duplicate keys; rewrote them");
        }
        stats.deleted = plan.delete.len();
        if total > 0 {
            report(stats.deleted);
        }
        // Only appends (no row deleted or rewritten): the held rows can take the new ones on top.
        let appended: Option<Vec<String>> = (plan.delete.is_empty()
            && plan.repair.is_empty()
            && !plan.write.is_empty()
            && plan.write.len() <= KEYS_PER_FILTER
            && plan.write.iter().all(|(d, _)| !existing.contains_key(&d.key)))
        .then(|| plan.write.iter().map(|(d, _)| d.key.clone()).collect());
        let before = table.version().await.db("table version")?;
        stats.embedded = self.write_rows(&table, &mut plan, &existing, &|n| report(stats.deleted + n)).await?;
        stats.upserted = plan.write.len();
        let maintained = self.after_sync(&table, &mut meta, stats.upserted + stats.deleted > 0).await?;
        if let Some(keys) = appended.filter(|_| !maintained) {
            self.held.extend(&table, before, &keys).await;
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

    /// Write the rows `plan` holds, reporting how many are done: new keys are appended; stored
    /// keys are rewritten by a merge-insert, which replaces the old row in the same commit
    /// (and, unlike an append, reads the key column to find it). Returns the texts embedded.
    async fn write_rows(
        &self,
        table: &Table,
        plan: &mut SyncPlan<'_>,
        existing: &HashMap<String, Existing>,
        report: &(dyn Fn(usize) + Sync),
    ) -> Result<usize, IndexError> {
        let schema = rows::schema(self.want.dim);
        let repair = &plan.repair;
        let stored = |doc: &Doc| existing.contains_key(&doc.key) && !repair.contains(&doc.key);
        plan.write.sort_by_key(|(doc, _)| stored(doc));
        let (mut done, mut embedded) = (0, 0);
        for chunk in plan.write.chunks(self.tuning.write_batch.max(1)) {
            let (vectors, chunk_embedded) = self.vectors_for(table, chunk, existing, &|n| report(done + n)).await?;
            embedded += chunk_embedded;
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
        Ok(embedded)
    }

    /// After rows were written (`wrote`): maintain the table, prune old versions, and tell the
    /// held rows; after maintenance, size the cache to the new indices and hand back what
    /// building them freed.
    /// Whether the table was maintained (compacted, its rows folded: row ids may have moved).
    async fn after_sync(&self, table: &Table, meta: &mut meta::Meta, wrote: bool) -> Result<bool, IndexError> {
        let maintained = self.maintain(table, meta).await?;
        if wrote || maintained {
            self.prune(table).await?;
            self.held.changed(table);
        }
        if maintained {
            // A new or rebuilt index may no longer fit the cache sized for the old one, and a
            // partition that does not fit is read from disk again by every search.
            self.resize_cache().await?;
            // Folding rows into the indices and compacting free what they built with; a
            // daemon under a steady stream of writes is never idle long enough to hand it
            // back otherwise.
            let _ = tokio::task::spawn_blocking(memfold_store::sys::alloc::release_free_memory).await;
        }
        Ok(maintained)
    }

    /// Key → stored hash and path(s) of every row a sync of `docs` over `scope` may touch: all
    /// rows, or those of the scope's files and of the docs' keys (a key with several paths is
    /// duplicated).
    pub(super) async fn existing(
        &self,
        table: &Table,
        scope: &Scope,
        docs: &[Doc],
    ) -> Result<HashMap<String, Existing>, IndexError> {
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
    pub(super) async fn vectors_for(
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
    pub(super) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, IndexError> {
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
}

/// What a sync writes and deletes, from the docs and what the table holds of them.
struct SyncPlan<'a> {
    /// Docs whose row is missing or differs, with their content hash.
    write: Vec<(&'a Doc, String)>,
    /// Keys in the scope that no doc has any more, sorted.
    delete: Vec<String>,
    /// Keys stored more than once: every copy is deleted before the doc is written again.
    repair: Vec<String>,
    unchanged: usize,
}

impl<'a> SyncPlan<'a> {
    fn of(docs: &'a [Doc], existing: &HashMap<String, Existing>, scope: &Scope) -> SyncPlan<'a> {
        let in_scope = |path: &str| match scope {
            Scope::All => true,
            Scope::Paths(paths) => paths.iter().any(|p| p == path),
            Scope::Appended(_) => false,
        };
        let mut wanted: HashSet<&str> = HashSet::with_capacity(docs.len());
        let mut plan = SyncPlan { write: Vec::new(), delete: Vec::new(), repair: Vec::new(), unchanged: 0 };
        for doc in docs {
            if !wanted.insert(&doc.key) {
                warn!(key = %doc.key, path = %doc.path, "two documents share a key; indexing the first");
                continue;
            }
            let hash = rows::content_hash(doc);
            match existing.get(&doc.key) {
                Some(e) if e.paths.len() == 1 && e.hash == hash => plan.unchanged += 1,
                Some(e) => {
                    if e.paths.len() > 1 {
                        plan.repair.push(doc.key.clone());
                    }
                    plan.write.push((doc, hash));
                }
                None => plan.write.push((doc, hash)),
            }
        }
        plan.delete = existing
            .iter()
            .filter(|(key, e)| !wanted.contains(key.as_str()) && e.paths.iter().any(|p| in_scope(p)))
            .map(|(key, _)| key.clone())
            .collect();
        plan.delete.sort();
        plan
    }
}
