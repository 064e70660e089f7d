//! Search and the index: freshness, hybrid search, reindex.

use memfold_store::sys::guard;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::views::Reindexed;
use super::{MAX_K, Memory, SearchRequest, blocking};
use crate::error::Error;
use memfold_index::corpus;
use memfold_index::{Hit, Index, SearchOpts, Settled, UseDays};
use memfold_store::caches::LinkCache;
use memfold_store::entries::Linked;
use memfold_store::ledger::Ledger;
use memfold_store::uses::Uses;

impl Memory {
    /// Say the files may have changed: the next search refreshes the index first.
    pub fn mark_dirty(&self) {
        self.inner.fresh.wanted.fetch_add(1, Ordering::SeqCst);
        self.inner.fresh.notify.notify_one();
    }

    /// Wait until the files may have changed.
    pub async fn changed(&self) {
        self.inner.fresh.notify.notified().await
    }

    /// How many refreshes have written rows to the index since this memory was opened, by
    /// whichever caller (the daemon settles the index once they stop coming).
    pub fn index_writes(&self) -> u64 {
        self.inner.fresh.writes.load(Ordering::SeqCst)
    }

    /// Bring the index up to date with the files, unless nothing changed since the last time.
    pub async fn refresh(&self) -> Result<(), Error> {
        let fresh = &self.inner.fresh;
        let target = fresh.wanted.load(Ordering::SeqCst);
        if fresh.done.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let index = self.index().await?;
        let mut known = fresh.refreshing.lock().await;
        if fresh.done.load(Ordering::SeqCst) >= target {
            return Ok(()); // someone refreshed while we waited
        }
        let generation = fresh.wanted.load(Ordering::SeqCst);
        let (read, stats, ledger) = corpus::catch_up(&self.inner.root, index, &mut known).await?;
        if let (Some(ledger), Some(known)) = (ledger, known.as_ref()) {
            self.cache_status_counts(ledger, known.seen().clone()).await;
        }
        if stats.upserted + stats.deleted > 0 {
            fresh.writes.fetch_add(1, Ordering::SeqCst);
        }
        fresh.done.fetch_max(generation, Ordering::SeqCst);
        tracing::debug!(
            ?read,
            upserted = stats.upserted,
            deleted = stats.deleted,
            unchanged = stats.unchanged,
            "index refreshed"
        );
        Ok(())
    }

    /// Bring the index up to date, then fold into its indices what small writes left outside
    /// them ([`memfold_index::Index::settle`]).
    pub async fn settle(&self) -> Result<Settled, Error> {
        self.refresh().await?;
        let writes = self.index_writes();
        let settled = self.index().await?.settle().await?;
        self.inner.fresh.settled_at.store(writes + 1, Ordering::SeqCst);
        Ok(settled)
    }

    /// Whether the index was settled since this process last wrote rows to it.
    fn is_settled(&self) -> bool {
        self.inner.fresh.settled_at.load(Ordering::SeqCst) == self.index_writes() + 1
    }

    /// [`Memory::settle`] unless the index was settled since this process last wrote rows to
    /// it (then `None`): a daemon that warmed up before listening has nothing to settle at start.
    pub async fn settle_if_unsettled(&self) -> Result<Option<Settled>, Error> {
        let _one = self.inner.fresh.settling.lock().await;
        self.refresh().await?;
        if self.is_settled() {
            return Ok(None);
        }
        self.settle().await.map(Some)
    }

    /// Make the index ready to answer searches at full speed, before a daemon answers any:
    /// caught up with the files, settled, its rows held in memory, what the files settle
    /// learnt, and today's archive file read for the first append.
    pub async fn warm_up(&self) -> Result<Option<Settled>, Error> {
        let settled = self.settle_if_unsettled().await?;
        let index = self.index().await?;
        index.hold_vectors_now().await;
        // What the first write's catch-up would otherwise read in full (at 100k, 2 s).
        let mut known = self.inner.fresh.refreshing.lock().await;
        if known.is_none()
            && let Some((learnt, ledger)) = corpus::learn(&self.inner.root, index).await?
        {
            self.cache_status_counts(ledger, learnt.seen().clone()).await;
            *known = Some(learnt);
        }
        drop(known);
        // And what the first append to today's file would read of it (at 100k facts in one
        // day, 250 ms): a failure only leaves that read to the append.
        let me = self.clone();
        blocking(move || {
            let today = me.inner.clock.wall_now().date();
            let primed = guard(&me.inner.appender).prime(&me.inner.root, today);
            if let Err(e) = primed {
                tracing::debug!(error = %e, "today's archive file not read ahead");
            }
            // The full read of the files is done with: what it took goes back to the system
            // before the daemon answers (at 100k, about 130 MiB).
            memfold_store::sys::alloc::release_free_memory();
        })
        .await;
        Ok(settled)
    }

    /// Hybrid search over entries and pending facts (and history on request); the hits are
    /// recorded in the recall log unless the request says `skip_recall`.
    pub async fn search(&self, query: &str, request: &SearchRequest) -> Result<Vec<Hit>, Error> {
        if query.trim().is_empty() {
            return Err(Error::BadInput("q (the query) is required".into()));
        }
        let mut opts = SearchOpts::new(&self.inner.config.search, self.inner.clock.today());
        opts.k = request.k.unwrap_or(self.inner.config.search.default_k);
        if opts.k == 0 || opts.k > MAX_K {
            return Err(Error::BadInput(format!("k must be between 1 and {MAX_K}")));
        }
        opts.as_of = request.as_of;
        opts.dated = request.dated;
        opts.history = request.history;
        let decay = &self.inner.config.decay;
        if decay.weight > 0.0 {
            (opts.decay_weight, opts.decay_half_life_days) = (decay.weight, decay.half_life_days);
            opts.uses = Some(self.use_days().await);
        }
        self.refresh().await?;
        let mut hits = self.index().await?.search(query, &opts).await?;
        if let Some(floor) = request.min_similarity {
            hits.retain(|hit| hit.similarity.is_some_and(|s| s >= floor));
        }
        if !opts.history && opts.as_of.is_none() {
            let linked = self.linked().await;
            if !linked.entries.is_empty() {
                hits = follow_links(hits, opts.k, &linked.entries);
            }
        }
        if request.skip_recall {
            return Ok(hits);
        }
        let ids: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
        let (root, query, window) = (self.inner.root.clone(), query.to_string(), self.inner.config.recall.window_days);
        if let Err(e) = blocking(move || memfold_store::recall::record(&root, &query, &ids, window)).await {
            tracing::warn!(error = %e, "could not record recall");
        }
        Ok(hits)
    }

    /// The current entries that have links, and the pinned ones (read again when `memory.md`
    /// changed size or time; a fresh process reads them from `.memfold/links.json`).
    async fn linked(&self) -> std::sync::Arc<LinkCache> {
        let root = self.inner.root.clone();
        let now = LinkCache::stat(&root);
        if let Some((seen, linked)) = guard(&self.inner.linked).as_ref()
            && *seen == now
        {
            return linked.clone();
        }
        let read = blocking(move || Ok::<_, std::io::Error>(LinkCache::current(&root))).await.unwrap_or_default();
        let linked = std::sync::Arc::new(read);
        *guard(&self.inner.linked) = Some((now, linked.clone()));
        linked
    }

    /// What decay by use ranks with: each entry's last recall from the use table as saved (at
    /// most [`memfold_store::uses::FOLD_EVERY`] behind the recall log), and the entries exempt
    /// (pinned, or a line of `MEMORY.md`). Read again when one of the three files changed.
    async fn use_days(&self) -> std::sync::Arc<UseDays> {
        let root = self.inner.root.clone();
        let linked = self.linked().await;
        let stat = |path: std::path::PathBuf| {
            std::fs::metadata(path).ok().map_or((0, 0), |m| memfold_store::caches::stat_of(&m))
        };
        let seen = [stat(Uses::path(&root)), (linked.size, linked.modified_ns), stat(root.memory_md())];
        if let Some((was, days)) = guard(&self.inner.uses).as_ref()
            && *was == seen
        {
            return days.clone();
        }
        let days = blocking(move || {
            let last = Uses::last_seen(&root);
            let mut exempt: std::collections::HashSet<String> = linked.pinned.iter().cloned().collect();
            exempt.extend(memfold_store::promoted::entry_ids(&root));
            Ok::<_, Error>(UseDays { last, exempt })
        })
        .await
        .unwrap_or_default();
        let days = std::sync::Arc::new(days);
        *guard(&self.inner.uses) = Some((seen, days.clone()));
        days
    }

    /// Keep what `status` derives from the files as a full read of the index found them, so the
    /// first `status` after a rebuild, a pass or a hand edit reads no large file.
    async fn cache_status_counts(&self, ledger: Ledger, seen: memfold_store::sources::Sources) {
        let root = self.inner.root.clone();
        let clock = self.inner.clock;
        let saved = blocking(move || crate::memory::status::cache_counts(&root, &ledger, seen, clock)).await;
        if let Err(e) = saved {
            tracing::debug!(error = %e, "could not cache the status counts");
        }
    }

    /// Bring every row of the index up to date with the files, or rebuild it (`clear`).
    /// `progress` is told (done, total) as documents are embedded.
    pub async fn reindex(
        &self,
        clear: bool,
        progress: Option<&(dyn Fn(usize, usize) + Send + Sync)>,
    ) -> Result<Reindexed, Error> {
        let started = Instant::now();
        let index = match self.index().await {
            // A table too damaged to open is made anew; the files are the truth.
            Err(Error::IndexUnreadable { .. }) if clear => {
                Index::discard(&self.inner.root.index_dir()).await?;
                self.index().await?
            }
            opened => opened?,
        };
        let fresh = &self.inner.fresh;
        let mut known = fresh.refreshing.lock().await;
        let generation = fresh.wanted.load(Ordering::SeqCst);
        if clear {
            index.clear().await?;
        }
        let (ledger, stats, learnt) = corpus::refresh_all(&self.inner.root, index, progress).await?;
        self.cache_status_counts(ledger, learnt.seen().clone()).await;
        *known = Some(learnt);
        fresh.done.fetch_max(generation, Ordering::SeqCst);
        let docs = stats.upserted + stats.unchanged;
        tracing::info!(clear, docs, upserted = stats.upserted, deleted = stats.deleted, "reindexed");
        Ok(Reindexed { docs, stats, seconds: started.elapsed().as_secs_f64() })
    }
}

/// The hits with each entry's linked entries brought in below them, one hop: while there is
/// room in `k`, the links of each direct hit (in rank order) that are not hits already join
/// the list, marked with the entry that brought them; the direct hits they displace are the
/// lowest ranked. A related entry never ranks above a direct hit.
fn follow_links(hits: Vec<Hit>, k: usize, linked: &HashMap<String, Linked>) -> Vec<Hit> {
    use std::collections::HashSet;
    let found: HashSet<&str> = hits.iter().take(k).map(|h| h.id.as_str()).collect();
    let mut direct: Vec<Hit> = Vec::new();
    let mut related: Vec<Hit> = Vec::new();
    let mut brought: HashSet<String> = HashSet::new();
    for hit in hits.iter() {
        if direct.len() + related.len() >= k {
            break;
        }
        direct.push(hit.clone());
        if hit.kind != memfold_index::DocKind::Entry || hit.space.is_some() {
            continue;
        }
        let Some(entry) = linked.get(&hit.id) else { continue };
        for link in &entry.links {
            if direct.len() + related.len() >= k {
                break;
            }
            if found.contains(link.id.as_str()) || !brought.insert(link.id.clone()) {
                continue;
            }
            let Some(other) = linked.get(&link.id) else { continue };
            related.push(Hit {
                key: link.id.clone(),
                id: link.id.clone(),
                kind: memfold_index::DocKind::Entry,
                text: other.content.clone(),
                score: 0.0,
                sources: other.sources.clone(),
                path: "consolidated/memory.md".into(),
                valid_from: other.first_seen.or(other.updated).unwrap_or(hit.valid_from),
                valid_until: None,
                space: None,
                similarity: None,
                related_to: Some(hit.id.clone()),
            });
        }
    }
    let lowest = direct.last().map_or(0.0, |h| h.score);
    for (i, hit) in related.iter_mut().enumerate() {
        hit.score = lowest - 1e-6 * (i as f64 + 1.0);
    }
    direct.extend(related);
    direct
}
