//! Reading the index: hybrid search, nearest neighbours, the full-text leg, vectors and the
//! digest `verify` compares with the files.

use super::*;
use held::{Held, Looked};

impl Index {
    /// Hybrid search; see [`SearchOpts`] for the filters and `index/rank.rs` for the score. An
    /// empty query or an empty index gives no hits.
    pub async fn search(&self, query: &str, opts: &SearchOpts) -> Result<Vec<Hit>, IndexError> {
        match self.search_once(query, opts).await {
            // A writer may have removed the version this search was reading (see `prune`);
            // the second attempt starts from the latest one.
            Err(IndexError::Db { op, source }) => {
                debug!(op, error = %source, "search failed; running it again on the latest version");
                self.search_once(query, opts).await
            }
            result => result,
        }
    }

    async fn search_once(&self, query: &str, opts: &SearchOpts) -> Result<Vec<Hit>, IndexError> {
        let query = query.trim();
        if query.is_empty() || opts.k == 0 {
            return Ok(Vec::new());
        }
        let table = self.table();
        let n = (4 * opts.k).max(20);
        let kinds = rank::search_kinds(opts.kinds.as_deref(), opts.history, opts.as_of.is_some());
        let filter = rank::search_filter(&kinds, opts.as_of, opts.dated);
        let vector = self.embed(&[query.to_string()]).await?.remove(0);
        self.check_dim(&vector)?;
        // Above the ANN threshold the search is approximate anyway (and BM25 statistics are
        // those of the full-text index, not of the rows): a tie at the text leg's cut is broken
        // among the rows lance returned, instead of reading every tied row, and the vector leg
        // may scan vectors held in memory.
        let exact_ties = self.exact_ties().await?;
        let held = match exact_ties {
            true => None,
            false => self.held.current(&table).await,
        };
        // Both legs are CPU work done while their streams are polled; spawned, the vector leg
        // runs on another worker thread instead of taking turns with the text leg.
        let refine = self.tuning.vector_refine_factor;
        let by_vector = {
            let (table, filter, kinds, as_of, dated, held) =
                (table.clone(), filter.clone(), kinds.clone(), opts.as_of, opts.dated, held.clone());
            if held.is_some() {
                self.held.count_served();
            }
            tokio::spawn(async move {
                if let Some(held) = held {
                    let near = held.nearest(&vector, &Looked::new(&kinds, as_of, dated), n);
                    return Ok(near.into_iter().map(|r| (r.key, r.distance, Found::At(r.row, r.valid_from))).collect());
                }
                top_rows(n, false, |limit| {
                    let query = vector_query(&table, &vector, filter.as_deref(), limit, refine, &[HIT, DISTANCE]);
                    async move { found_rows(&collect(query?.execute().await, "vector search").await?, DISTANCE) }
                })
                .await
            })
        };
        let by_text: Result<Vec<LegRow>, IndexError> = async {
            if let Some(held) = &held
                && let Some(rows) = held_text_rows(
                    &table,
                    held,
                    query,
                    filter.as_deref(),
                    &Looked::new(&kinds, opts.as_of, opts.dated),
                    n,
                )
                .await?
            {
                return Ok(rows);
            }
            let rows = text_hits(&table, query, filter.as_deref(), n, exact_ties).await?;
            Ok(rows.into_iter().map(|(key, score, hit)| (key, score, Found::Hit(hit))).collect())
        }
        .await;
        let by_text = match by_text {
            Ok(rows) => rows,
            Err(e) => {
                by_vector.abort();
                return Err(e);
            }
        };
        let by_vector = by_vector.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;

        fuse_legs(by_vector, by_text, held.as_deref(), opts)
    }

    /// Whether search must be exact, ties included: below the ANN threshold (no vector index).
    async fn exact_ties(&self) -> Result<bool, IndexError> {
        Ok(meta::read(&self.dir).await?.is_none_or(|m| m.ann_trained_rows.is_none()))
    }

    fn check_dim(&self, vector: &[f32]) -> Result<(), IndexError> {
        match vector.len() == self.want.dim {
            true => Ok(()),
            false => Err(IndexError::Dimension { expected: self.want.dim, got: vector.len() }),
        }
    }

    #[cfg(any(test, feature = "testkit"))]
    /// The `k` rows of the given kinds (all kinds if empty) nearest to `vector`, skipping
    /// `exclude_keys`, with their cosine similarity, best first (ties by key).
    pub async fn nearest(
        &self,
        vector: &[f32],
        kinds: &[DocKind],
        k: usize,
        exclude_keys: &[String],
    ) -> Result<Vec<(String, f32)>, IndexError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        self.check_dim(vector)?;
        if exclude_keys.is_empty() && !self.exact_ties().await? {
            let table = self.table();
            if let Some(held) = self.held.current(&table).await {
                let kinds = if kinds.is_empty() { &DocKind::ALL[..] } else { kinds };
                return Ok(held
                    .nearest(vector, &Looked::new(kinds, None, None), k)
                    .into_iter()
                    .map(|r| (r.key, (1.0 - r.distance) as f32))
                    .collect());
            }
        }
        let mut parts: Vec<String> = rank::kind_filter(kinds).into_iter().collect();
        if !exclude_keys.is_empty() {
            parts.push(rank::key_list(exclude_keys, true));
        }
        let filter =
            (!parts.is_empty()).then(|| parts.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" AND "));
        let table = self.table();
        let rows = top_rows(k, false, |limit| {
            let query = vector_query(
                &table,
                vector,
                filter.as_deref(),
                limit,
                self.tuning.vector_refine_factor,
                &[KEY, DISTANCE],
            );
            async move { key_rows(&collect(query?.execute().await, "vector search").await?, DISTANCE) }
        })
        .await?;
        Ok(rows.into_iter().map(|(key, d, ())| (key, (1.0 - d) as f32)).collect())
    }

    #[cfg(any(test, feature = "testkit"))]
    /// The `k` best full-text (BM25) matches of the given kinds (all kinds if empty), with
    /// their BM25 score, best first (ties by key). An empty query gives none.
    pub async fn lexical(&self, query: &str, kinds: &[DocKind], k: usize) -> Result<Vec<(String, f32)>, IndexError> {
        let query = query.trim();
        if query.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let filter = rank::kind_filter(kinds);
        let table = self.table();
        let rows = top_rows(k, true, |limit| {
            let leg = text_leg(&table, query, filter.as_deref(), limit, &[KEY, SCORE], false);
            async move { key_rows(&leg.await?, SCORE) }
        })
        .await?;
        Ok(rows.into_iter().map(|(key, s, ())| (key, s as f32)).collect())
    }

    #[cfg(any(test, feature = "testkit"))]
    /// The stored vectors of `keys` (keys not in the index are absent from the map).
    pub async fn vectors(&self, keys: &[String]) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        let table = self.table();
        let mut out = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(KEYS_PER_FILTER) {
            let query = table.query().only_if(rank::key_list(chunk, false)).select(Select::columns(&[KEY, VECTOR]));
            for batch in collect(query.execute().await, "read vectors").await? {
                let keys = rows::strings(&batch, KEY)?;
                let vectors = rows::vectors(&batch, VECTOR)?;
                out.extend(keys.into_iter().zip(vectors));
            }
        }
        Ok(out)
    }

    /// Key → content hash of every row, to compare with [`Index::content_hash`] of the files'
    /// docs. A key stored more than once maps to `duplicated:<copies>`, which no doc hashes to.
    pub async fn digest(&self) -> Result<BTreeMap<String, String>, IndexError> {
        let table = self.table();
        let batches =
            collect(table.query().select(Select::columns(&[KEY, HASH])).execute().await, "read hashes").await?;
        let mut out = BTreeMap::new();
        let mut copies: HashMap<String, usize> = HashMap::new();
        for batch in &batches {
            let keys = rows::strings(batch, KEY)?;
            let hashes = rows::strings(batch, HASH)?;
            for (key, hash) in keys.into_iter().zip(hashes) {
                let n = copies.entry(key.clone()).or_default();
                *n += 1;
                out.insert(key, if *n > 1 { format!("duplicated:{n}") } else { hash });
            }
        }
        Ok(out)
    }

    /// Number of rows.
    pub async fn len(&self) -> Result<usize, IndexError> {
        self.table().count_rows(None).await.db("count rows")
    }

    /// Whether the index has no rows.
    pub async fn is_empty(&self) -> Result<bool, IndexError> {
        Ok(self.len().await? == 0)
    }
}

/// A search leg's rows as `(key, leg score, hit)`; the score is `_distance` or `_score`.
fn hit_rows(batches: &[RecordBatch], score_column: &str) -> Result<Vec<(String, f64, Hit)>, IndexError> {
    let mut out = Vec::new();
    for batch in batches {
        for (hit, score) in rows::hits(batch)?.into_iter().zip(rows::floats(batch, score_column)?) {
            out.push((hit.key.clone(), score, hit));
        }
    }
    Ok(out)
}

#[cfg(any(test, feature = "testkit"))]
/// A leg's rows as `(key, leg score, ())`.
fn key_rows(batches: &[RecordBatch], score_column: &str) -> Result<Vec<(String, f64, ())>, IndexError> {
    let mut out = Vec::new();
    for batch in batches {
        let keys = rows::strings(batch, KEY)?;
        out.extend(keys.into_iter().zip(rows::floats(batch, score_column)?).map(|(k, s)| (k, s, ())));
    }
    Ok(out)
}

/// The best `n` rows of one search leg, ties by key, whatever order lance returns equal scores
/// in: `fetch(limit)` runs the leg for `limit` rows, first `n` + [`rank::TIE_SLACK`], then twice
/// as many while rows tied with the n-th reach the limit (see [`rank::cut`]).
async fn top_rows<T, F, Fut>(n: usize, higher_better: bool, fetch: F) -> Result<Vec<(String, f64, T)>, IndexError>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<(String, f64, T)>, IndexError>>,
{
    top_rows_from(n + rank::TIE_SLACK, 2, n, higher_better, fetch).await
}

/// [`top_rows`] starting with a request of `limit` rows, asking `growth` times as many each
/// time.
async fn top_rows_from<T, F, Fut>(
    mut limit: usize,
    growth: usize,
    n: usize,
    higher_better: bool,
    mut fetch: F,
) -> Result<Vec<(String, f64, T)>, IndexError>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<(String, f64, T)>, IndexError>>,
{
    loop {
        if let Some(rows) = rank::cut(fetch(limit).await?, n, limit, higher_better) {
            return Ok(rows);
        }
        limit *= growth;
    }
}

/// The text leg's best `n` rows with their hits, as [`top_rows`] would give them, but cheaper
/// when many rows tie with the n-th (short queries over short entries often score alike: at
/// 100k rows one query had over 1,500 rows of its 40th score): the first request reads hits,
/// the larger ones only keys, scores and row ids, and the chosen rows' hits are then taken by
/// row id. Without `exact_ties` there are no larger requests: rows tied with the n-th are
/// chosen by key among those the first one returned (at 100k rows, reading every tied row made
/// the median search four times slower).
pub(super) async fn text_hits(
    table: &Table,
    query: &str,
    filter: Option<&str>,
    n: usize,
    exact_ties: bool,
) -> Result<Vec<(String, f64, Hit)>, IndexError> {
    let limit = n + rank::TIE_SLACK;
    let first = hit_rows(&text_leg(table, query, filter, limit, &[HIT, SCORE], false).await?, SCORE)?;
    let first_limit = if exact_ties { limit } else { usize::MAX };
    if let Some(rows) = rank::cut(first, n, first_limit, true) {
        return Ok(rows);
    }
    // Keys and scores are cheap to read, and a query that ties this many rows often ties
    // thousands (a common word in short entries): grow by 4 rather than 2.
    let chosen = top_rows_from(4 * limit, 4, n, true, |limit| {
        let leg = text_leg(table, query, filter, limit, &[KEY, SCORE], true);
        async move { id_rows(&leg.await?, SCORE) }
    })
    .await?;
    take_hits(table, chosen).await
}

/// The two legs' rows fused into the `k` best hits: reciprocal rank fusion plus the recency
/// and use terms (`index/rank.rs`), each hit with its score and its cosine when the vector
/// leg found it; a row found among the held rows has its hit parsed only if it is kept.
fn fuse_legs(
    by_vector: Vec<LegRow>,
    by_text: Vec<LegRow>,
    held: Option<&Held>,
    opts: &SearchOpts,
) -> Result<Vec<Hit>, IndexError> {
    let mut hits: HashMap<String, Hit> = HashMap::new();
    let mut at: HashMap<String, (usize, NaiveDate)> = HashMap::new();
    let mut legs: Vec<Vec<(String, f64)>> = Vec::new();
    let similarity: HashMap<String, f64> =
        by_vector.iter().map(|(key, distance, _)| (key.clone(), 1.0 - distance)).collect();
    for rows in [by_vector, by_text] {
        let mut keys = Vec::with_capacity(rows.len());
        for (key, score, found) in rows {
            keys.push((key.clone(), score));
            match found {
                Found::Hit(hit) => {
                    hits.entry(key).or_insert(hit);
                }
                Found::At(row, from) => {
                    at.entry(key).or_insert((row, from));
                }
            }
        }
        legs.push(keys);
    }
    let legs: Vec<&[(String, f64)]> = legs.iter().map(|l| l.as_slice()).collect();
    let mut scored: Vec<(String, f64)> = rank::fuse(&legs)
        .into_iter()
        .map(|(key, fused)| {
            let from = hits.get(&key).map_or_else(|| at[&key].1, |hit| hit.valid_from);
            let recency = rank::recency(from, opts.today, opts.recency_weight, opts.recency_half_life_days);
            let used = rank::used(&key, from, opts);
            (key, fused + recency + used)
        })
        .collect();
    scored.sort_by(rank::by_score_then_key);
    scored.truncate(opts.k);
    // Rows found among the held rows have their hits there; only the ones kept are parsed.
    for (key, _) in &scored {
        if !hits.contains_key(key)
            && let Some(held) = held
        {
            hits.insert(key.clone(), held.hit(at[key].0)?);
        }
    }
    Ok(scored
        .into_iter()
        .map(|(key, score)| {
            let mut hit = hits.remove(&key).expect("every fused key has a row");
            hit.score = score;
            hit.similarity = similarity.get(&key).copied();
            hit
        })
        .collect())
}

/// The text leg's best `n` rows (ties cut among the rows lance returned), found among the
/// held rows by row id instead of read from lance. lance's full-text search is asked for row
/// ids and scores only, and first without the filter, which the held rows then apply (at 100k
/// rows reading the hits cost about 2 ms of 6 and the filter 1); only when that leaves fewer
/// than `n` of the `limit` rows it asked for is the filter given to lance. `None` when a
/// writer made a new version meanwhile: lance returned a row id no held row has, or the
/// table's latest version is no longer the held one (a row id may name another row there).
pub(super) async fn held_text_rows(
    table: &Table,
    held: &Held,
    query: &str,
    filter: Option<&str>,
    looked: &Looked<'_>,
    n: usize,
) -> Result<Option<Vec<LegRow>>, IndexError> {
    let limit = n + rank::TIE_SLACK;
    let keep = |batches: Vec<RecordBatch>| -> Result<Option<Vec<LegRow>>, IndexError> {
        let mut out = Vec::new();
        for batch in &batches {
            for (id, score) in rows::row_ids(batch)?.into_iter().zip(rows::floats(batch, SCORE)?) {
                match held.row(id, looked) {
                    None => return Ok(None),
                    Some(None) => {}
                    Some(Some((row, key, from))) => out.push((key.to_string(), score, Found::At(row, from))),
                }
            }
        }
        Ok(Some(out))
    };
    let all = text_leg(table, query, None, limit, &[SCORE], true).await?;
    let fetched: usize = all.iter().map(RecordBatch::num_rows).sum();
    let mut rows = keep(all)?;
    if filter.is_some() && fetched == limit && rows.as_ref().is_some_and(|r| r.len() < n) {
        rows = keep(text_leg(table, query, filter, limit, &[SCORE], true).await?)?;
    }
    if table.version().await.db("table version")? != held.version() {
        return Ok(None);
    }
    Ok(rows.and_then(|rows| rank::cut(rows, n, usize::MAX, true)))
}

/// The hits of rows chosen by row id, `(key, score, id)`, as `(key, score, hit)` in the order
/// given.
async fn take_hits(table: &Table, chosen: Vec<(String, f64, u64)>) -> Result<Vec<(String, f64, Hit)>, IndexError> {
    let ids: Vec<u64> = chosen.iter().map(|(_, _, id)| *id).collect();
    let mut hits: HashMap<String, Hit> = HashMap::with_capacity(ids.len());
    let take = table.take_row_ids(ids).select(Select::columns(&[HIT]));
    for batch in collect(take.execute().await, "read search hits").await? {
        hits.extend(rows::hits(&batch)?.into_iter().map(|hit| (hit.key.clone(), hit)));
    }
    chosen
        .into_iter()
        .map(|(key, score, _)| match hits.remove(&key) {
            Some(hit) => Ok((key, score, hit)),
            // A writer changed the table between the two reads, so the row id named another
            // row or none: [`Index::search`] runs the search again.
            None => Err(IndexError::Db {
                op: "read search hits",
                source: lancedb::Error::Runtime { message: format!("row {key} moved between two reads") },
            }),
        })
        .collect()
}

/// One leg's row: key, leg score, and what the leg knows of it.
pub(super) type LegRow = (String, f64, Found);

/// What a search leg knows of a row: its hit, or its place among the held rows and its
/// `valid_from`, to take the hit from there if the row is kept.
pub(super) enum Found {
    Hit(Hit),
    At(usize, NaiveDate),
}

/// A vector leg's rows from lance, with their hits.
fn found_rows(batches: &[RecordBatch], score_column: &str) -> Result<Vec<LegRow>, IndexError> {
    Ok(hit_rows(batches, score_column)?.into_iter().map(|(key, score, hit)| (key, score, Found::Hit(hit))).collect())
}

/// A leg's rows as `(key, leg score, row id)`.
fn id_rows(batches: &[RecordBatch], score_column: &str) -> Result<Vec<(String, f64, u64)>, IndexError> {
    let mut out = Vec::new();
    for batch in batches {
        let keys = rows::strings(batch, KEY)?;
        let ids = rows::row_ids(batch)?;
        out.extend(keys.into_iter().zip(rows::floats(batch, score_column)?).zip(ids).map(|((k, s), id)| (k, s, id)));
    }
    Ok(out)
}

/// A flat (or, past the ANN threshold, approximate) cosine search for `vector`. The score
/// column is asked for by name, so lance adds nothing on its own.
fn vector_query(
    table: &Table,
    vector: &[f32],
    filter: Option<&str>,
    limit: usize,
    refine: u32,
    columns: &[&str],
) -> Result<lancedb::query::VectorQuery, IndexError> {
    let mut query = table
        .query()
        .nearest_to(vector)
        .db("vector search")?
        .column(VECTOR)
        .distance_type(DistanceType::Cosine)
        .limit(limit)
        .select(Select::columns(columns));
    if refine > 0 {
        query = query.refine_factor(refine);
    }
    if let Some(filter) = filter {
        query = query.only_if(filter);
    }
    Ok(query)
}

/// A full-text (BM25) search for `text` (with `_rowid` when `row_ids`); no rows before the table has a
/// full-text index.
async fn text_leg(
    table: &Table,
    text: &str,
    filter: Option<&str>,
    limit: usize,
    columns: &[&str],
    row_ids: bool,
) -> Result<Vec<RecordBatch>, IndexError> {
    let mut query = table
        .query()
        .full_text_search(FullTextSearchQuery::new(text.to_string()))
        .limit(limit)
        .select(Select::columns(columns));
    if row_ids {
        query = query.with_row_id();
    }
    if let Some(filter) = filter {
        query = query.only_if(filter);
    }
    match collect(query.execute().await, "full-text search").await {
        Ok(batches) => Ok(batches),
        // Before the first sync with data there is no full-text index to search.
        Err(e) => match table.list_indices().await.db("list indices")?.iter().any(|i| i.columns == [TEXT]) {
            true => Err(e),
            false => Ok(Vec::new()),
        },
    }
}
