//! The table's rows held in memory by a long-running process, for [`Index::search`](crate::Index::search) past the
//! ANN threshold.
//!
//! lance answers a vector query in about 9 ms at 100k rows, most of it fixed cost (planning,
//! reading index partitions, handing work between threads), not distance arithmetic; reading
//! rows back by id costs about 70 us a row, and a full-text search that returns hits and
//! applies a filter about 6 ms where one that returns row ids and scores takes 2. A daemon
//! that searches often keeps instead, per row, its key, row id, kind, dates and hit (as
//! stored) and its unit vector in a byte and a half per dimension: a coarse code in half a
//! byte (the vector in steps of its largest component / 7) and a fine byte (what the coarse
//! step left, in steps 254 times smaller). The vector leg scans every row's coarse codes on two
//! threads (19 MB at 100k rows, which stay in a 32 MB cache where a byte per dimension did
//! not), keeps the best [`RERANK`] times `n` estimates, ranks those by the cosine of the query
//! with their fine-grained vectors (within about 1e-4 of the exact one) and cuts `n` by that
//! distance, then key. The text leg asks lance for row ids and scores, finds the rows here by
//! id and filters them here. Scanning every row, the vector leg misses no neighbour the ANN
//! index's partitions would hide: in the index bench at 100k its first 10 held 99.8% of the
//! exact 10 nearest, its 40 all of them. At MiniLM's and `local`'s 384 dimensions the vectors
//! take about 61 MB at 100k rows and the hits about 21 MB (a little more than the markdown).
//!
//! **Never stale.** What is held belongs to one table version. Each search asks the table for
//! its latest version (the connection reads other processes' writes at once) and uses the held
//! rows only when they are of that version; otherwise it searches with lance, as a process
//! without held rows does. A write of this process that only appended rows (a new fact, a new
//! entry: nothing deleted, rewritten or compacted) reads back just those rows by key and holds
//! them beside the others as the new version ([`Slot::extend`]), so the first search after it
//! is as fast as any, for up to [`TAIL_MAX`] appended rows. Otherwise, once a version has been
//! the latest for [`HOLD_AFTER_QUIET`], seen by a search or made by a write of this process,
//! its rows are read again in the background (about 0.7 s at 100k rows), searched or not; a
//! steady stream of other writes costs no rereading, only lance's speed. A settle (which runs as a daemon starts and once writes have been quiet
//! for a while) reads them at once: the writes it waited for are over. A read that saw the
//! version change under it is thrown away.

use memfold_store::sys::guard;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use futures::TryStreamExt;
use lancedb::Table;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use tracing::{debug, info, warn};

use super::rows::{self, HIT, KEY, KIND, VALID_FROM, VALID_UNTIL, VECTOR};
use super::{DbContext, DocKind, Hit, IndexError};

/// How long a table version must have been the latest a search saw before its vectors are read.
pub const HOLD_AFTER_QUIET: Duration = Duration::from_secs(1);

/// Rows appended by this process that the held rows take on top before they are read again.
pub const TAIL_MAX: usize = 20_000;

/// Free memory is handed back after every this many appends taken in.
const TRIM_EVERY: u64 = 16;

/// Candidates re-ranked by their fine codes per row a leg returns.
pub const RERANK: usize = 4;

/// One table version's rows as held: the rows read at once (`base`) and those this process
/// appended since (`tail`, see [`Slot::extend`]). Row numbers run through `base`, then `tail`.
pub(super) struct Held {
    version: u64,
    base: Arc<Rows>,
    tail: Option<Arc<Rows>>,
}

/// Rows' vectors, quantised, with what the search filters on and returns.
#[derive(Default)]
pub(super) struct Rows {
    dim: usize,
    ids: Vec<u64>,
    /// Rows in the order of their ids, to find a row by the id a full-text search returns.
    by_id: Vec<u32>,
    keys: Strings,
    /// Every row's hit as stored (JSON).
    hits: Strings,
    kinds: Vec<DocKind>,
    from: Vec<i32>,
    /// `i32::MAX` for rows still valid.
    until: Vec<i32>,
    /// Bytes of coarse codes per row: `dim` half-bytes, two per byte, dimension 2k in the low
    /// half of byte k's pair (see [`quantise`]).
    width: usize,
    coarse: Vec<u8>,
    /// `dim` fine codes per row: what the coarse codes left, in steps of scale / [`FINE`].
    fine: Vec<i8>,
    scales: Vec<f32>,
}

/// Fine steps per coarse step.
const FINE: f32 = 254.0;

/// A row's estimated cosine with the query, and the row; higher first, then lower row.
#[derive(PartialEq)]
struct Estimate(f32, usize);

impl Eq for Estimate {}

impl Ord for Estimate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Estimate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Which rows a search looks at: of one of `kinds`, current on day `as_of`, dated (their
/// `valid_from`) between the two days of `dated`, both included; days counted as the held
/// rows count them.
pub(super) struct Looked<'a> {
    kinds: &'a [DocKind],
    as_of: Option<i32>,
    dated: Option<(i32, i32)>,
}

impl<'a> Looked<'a> {
    pub(super) fn new(kinds: &'a [DocKind], as_of: Option<NaiveDate>, dated: Option<(NaiveDate, NaiveDate)>) -> Self {
        let dated = dated.map(|(first, last)| (rows::date_to_days(first), rows::date_to_days(last)));
        Looked { kinds, as_of: as_of.map(rows::date_to_days), dated }
    }
}

/// A row a held search returns: key, cosine distance, and what the search needs of it.
pub(super) struct Near {
    pub key: String,
    pub distance: f64,
    /// The row's place among the held rows (see [`Held::hit`]).
    pub row: usize,
    pub valid_from: NaiveDate,
}

impl Held {
    /// Read every row's vector of the table's current version; `None` when a write made another
    /// version while reading.
    async fn read(table: &Table) -> Result<Option<Held>, IndexError> {
        let version = table.version().await.db("table version")?;
        let rows = Rows::read(table, None).await?;
        let after = table.version().await.db("table version")?;
        Ok((after == version).then(|| Held { version, base: Arc::new(rows), tail: None }))
    }

    pub(super) fn version(&self) -> u64 {
        self.version
    }

    fn tail_len(&self) -> usize {
        self.tail.as_ref().map_or(0, |t| t.len())
    }

    /// The part holding row `row`, and the row's place in it.
    fn part(&self, row: usize) -> (&Rows, usize) {
        match &self.tail {
            Some(tail) if row >= self.base.len() => (tail, row - self.base.len()),
            _ => (&self.base, row),
        }
    }

    /// Row `row`'s hit, with score 0.
    pub(super) fn hit(&self, row: usize) -> Result<Hit, IndexError> {
        let (part, at) = self.part(row);
        rows::hit(part.hits.get(at))
    }

    /// The row with id `id`, with its key and `valid_from`, if it passes `looked`:
    /// `Some(None)` when it does not, `None` when no row held has that id.
    pub(super) fn row(&self, id: u64, looked: &Looked) -> Option<Option<(usize, &str, NaiveDate)>> {
        let offset = self.base.len();
        match self.base.row(id, looked) {
            Some(found) => Some(found),
            None => {
                let found = self.tail.as_ref()?.row(id, looked)?;
                Some(found.map(|(row, key, from)| (row + offset, key, from)))
            }
        }
    }

    /// The `n` rows passing the filter nearest to `vector`, best first, ties by key.
    pub(super) fn nearest(&self, vector: &[f32], looked: &Looked, n: usize) -> Vec<Near> {
        let mut near: Vec<(f32, usize)> = self.base.nearest(vector, looked, n);
        if let Some(tail) = &self.tail {
            let offset = self.base.len();
            near.extend(tail.nearest(vector, looked, n).into_iter().map(|(d, i)| (d, i + offset)));
            near.sort_by(|a, b| {
                let (pa, ia) = self.part(a.1);
                let (pb, ib) = self.part(b.1);
                a.0.total_cmp(&b.0).then_with(|| pa.key(ia).cmp(pb.key(ib)))
            });
            near.truncate(n);
        }
        near.into_iter()
            .map(|(distance, i)| {
                let (part, at) = self.part(i);
                Near {
                    key: part.key(at).to_string(),
                    distance: f64::from(distance),
                    row: i,
                    valid_from: rows::days_to_date(part.from[at]),
                }
            })
            .collect()
    }

    fn bytes(&self) -> usize {
        self.base.bytes() + self.tail.as_ref().map_or(0, |t| t.bytes())
    }

    /// These rows and `more`, appended by this process as the table's version `version`.
    fn extended(&self, version: u64, more: Rows) -> Held {
        let tail = match &self.tail {
            Some(tail) => tail.joined(more),
            None => more,
        };
        Held { version, base: self.base.clone(), tail: Some(Arc::new(tail)) }
    }
}

impl Rows {
    /// Read the vectors of the table's rows (those `filter` keeps, or all).
    async fn read(table: &Table, filter: Option<&str>) -> Result<Rows, IndexError> {
        let columns = [KEY, KIND, VALID_FROM, VALID_UNTIL, HIT, VECTOR];
        let mut query = table.query().select(Select::columns(&columns)).with_row_id();
        if let Some(filter) = filter {
            query = query.only_if(filter);
        }
        let mut held = Rows::default();
        // Batch by batch: the vectors as floats would take twice what is held.
        let mut stream = query.execute().await.db("read the vectors to hold")?;
        while let Some(batch) = stream.try_next().await.db("read the vectors to hold")? {
            held.keys.extend(rows::strings(&batch, KEY)?)?;
            held.hits.extend(rows::strings(&batch, HIT)?)?;
            for kind in rows::strings(&batch, KIND)? {
                held.kinds
                    .push(DocKind::parse(&kind).ok_or_else(|| IndexError::Corrupt(format!("row of kind {kind:?}")))?);
            }
            held.ids.extend(rows::row_ids(&batch)?);
            held.from.extend(rows::days(&batch, VALID_FROM)?.into_iter().map(|d| d.unwrap_or(i32::MIN)));
            held.until.extend(rows::days(&batch, VALID_UNTIL)?.into_iter().map(|d| d.unwrap_or(i32::MAX)));
            let (dim, values) = rows::flat_vectors(&batch, VECTOR)?;
            (held.dim, held.width) = (dim, dim.div_ceil(2));
            for vector in values.chunks_exact(dim.max(1)) {
                held.scales.push(quantise(vector, &mut held.coarse, &mut held.fine));
            }
        }
        held.index()?;
        held.shrink();
        Ok(held)
    }

    /// Sort the rows by id into `by_id`.
    fn index(&mut self) -> Result<(), IndexError> {
        let rows = u32::try_from(self.ids.len()).map_err(|_| IndexError::Corrupt("over 4 billion rows".into()))?;
        self.by_id = (0..rows).collect();
        let ids = &self.ids;
        self.by_id.sort_unstable_by_key(|&row| ids[row as usize]);
        Ok(())
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// These rows, then `more` (of the same width).
    fn joined(&self, more: Rows) -> Rows {
        let mut out = Rows { dim: self.dim.max(more.dim), width: self.width.max(more.width), ..Rows::default() };
        for part in [self, &more] {
            for row in 0..part.len() {
                out.keys.push(part.keys.get(row));
                out.hits.push(part.hits.get(row));
            }
            out.ids.extend(&part.ids);
            out.kinds.extend(&part.kinds);
            out.from.extend(&part.from);
            out.until.extend(&part.until);
            out.coarse.extend(&part.coarse);
            out.fine.extend(&part.fine);
            out.scales.extend(&part.scales);
        }
        // Fewer than 4 billion rows in two parts of a held table.
        let _ = out.index();
        out
    }

    fn shrink(&mut self) {
        self.ids.shrink_to_fit();
        self.by_id.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.hits.shrink_to_fit();
        self.kinds.shrink_to_fit();
        self.from.shrink_to_fit();
        self.until.shrink_to_fit();
        self.coarse.shrink_to_fit();
        self.fine.shrink_to_fit();
        self.scales.shrink_to_fit();
    }

    fn key(&self, row: usize) -> &str {
        self.keys.get(row)
    }

    /// Whether row `row` passes `looked`.
    fn passes(&self, row: usize, looked: &Looked) -> bool {
        let from = self.from[row];
        looked.kinds.contains(&self.kinds[row])
            && looked.as_of.is_none_or(|d| from <= d && d < self.until[row])
            && looked.dated.is_none_or(|(first, last)| first <= from && from <= last)
    }

    /// The row with id `id`, with its key and `valid_from`, if it passes `looked`:
    /// `Some(None)` when it does not, `None` when no row held has that id.
    fn row(&self, id: u64, looked: &Looked) -> Option<Option<(usize, &str, NaiveDate)>> {
        let at = self.by_id.binary_search_by_key(&id, |&row| self.ids[row as usize]).ok()?;
        let row = self.by_id[at] as usize;
        let passes = self.passes(row, looked);
        Some(passes.then(|| (row, self.key(row), rows::days_to_date(self.from[row]))))
    }

    /// The `n` rows passing `looked` nearest to `vector`, as (distance, row), best first,
    /// ties by key.
    fn nearest(&self, vector: &[f32], looked: &Looked, n: usize) -> Vec<(f32, usize)> {
        if self.dim != vector.len() || n == 0 || self.ids.is_empty() {
            return Vec::new();
        }
        let scan = Scan::new(vector);
        let mut scores = vec![0i32; self.ids.len()];
        // Two threads: one core alone cannot read the codes from memory as fast as two.
        let half = self.ids.len() / 2;
        let (first, second) = scores.split_at_mut(half);
        let (codes_first, codes_second) = self.coarse.split_at(half * self.width);
        std::thread::scope(|scope| {
            scope.spawn(|| dots(&scan, codes_second, self.width, second));
            dots(&scan, codes_first, self.width, first);
        });
        // The best m estimates, worst on top: most rows are turned away by one comparison.
        let m = n.saturating_mul(RERANK);
        let mut best: BinaryHeap<Reverse<Estimate>> = BinaryHeap::with_capacity(m + 1);
        for (i, score) in scores.iter().enumerate() {
            if !self.passes(i, looked) {
                continue;
            }
            let estimate = Estimate(*score as f32 * scan.scale * self.scales[i], i);
            if best.len() < m {
                best.push(Reverse(estimate));
            } else if best.peek().is_some_and(|Reverse(worst)| estimate > *worst) {
                best.pop();
                best.push(Reverse(estimate));
            }
        }
        let mut near: Vec<(f32, usize)> =
            best.into_iter().map(|Reverse(Estimate(_, i))| (self.distance(vector, i), i)).collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| self.key(a.1).cmp(self.key(b.1))));
        near.truncate(n);
        near
    }

    /// Cosine distance of `vector` to row `row` as its coarse and fine codes give it.
    fn distance(&self, vector: &[f32], row: usize) -> f32 {
        let coarse = &self.coarse[row * self.width..(row + 1) * self.width];
        let fine = &self.fine[row * self.dim..(row + 1) * self.dim];
        let scale = self.scales[row];
        let rebuilt = (0..self.dim).map(|j| (f32::from(half_byte(coarse, j)) + f32::from(fine[j]) / FINE) * scale);
        cosine_distance(vector, rebuilt)
    }

    fn bytes(&self) -> usize {
        // Per row: id, place in `by_id`, from, until, scale, kind.
        self.coarse.len()
            + self.fine.len()
            + self.keys.bytes()
            + self.hits.bytes()
            + self.ids.len() * (8 + 4 + 4 + 4 + 4 + 1)
    }
}

/// One string per row, one after another in a single buffer; row i's ends at `ends[i]`.
#[derive(Default)]
struct Strings {
    all: String,
    ends: Vec<u32>,
}

impl Strings {
    fn extend(&mut self, values: Vec<String>) -> Result<(), IndexError> {
        for value in values {
            self.all.push_str(&value);
            let end =
                u32::try_from(self.all.len()).map_err(|_| IndexError::Corrupt("a held column over 4 GB".into()))?;
            self.ends.push(end);
        }
        Ok(())
    }

    fn push(&mut self, value: &str) {
        self.all.push_str(value);
        self.ends.push(u32::try_from(self.all.len()).unwrap_or(u32::MAX));
    }

    fn get(&self, row: usize) -> &str {
        let start = if row == 0 { 0 } else { self.ends[row - 1] as usize };
        &self.all[start..self.ends[row] as usize]
    }

    fn shrink_to_fit(&mut self) {
        self.all.shrink_to_fit();
        self.ends.shrink_to_fit();
    }

    fn bytes(&self) -> usize {
        self.all.len() + 4 * self.ends.len()
    }
}

/// The held vectors of one index, and when to read them again.
#[derive(Default)]
pub(super) struct Slot {
    on: AtomicBool,
    state: Mutex<State>,
    /// Searches whose vector leg the held vectors answered.
    served: AtomicU64,
    /// Times appended rows were taken in ([`Slot::extend`]).
    extended: AtomicU64,
    /// Told when a read of the rows ends, for [`Slot::hold_now`] to wait for one under way.
    read_done: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    held: Option<Arc<Held>>,
    /// The latest version a search or a write of this process saw, and since when.
    seen: Option<(u64, Instant)>,
    reading: bool,
    /// A task waits for the table to be quiet to read its vectors.
    waiting: bool,
}

impl Slot {
    #[cfg(any(test, feature = "testkit"))]
    pub(super) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Turn holding on and, the first time, read the table's rows in the background once its
    /// version has been the latest for [`HOLD_AFTER_QUIET`] (a daemon settles its index as it
    /// starts: rows read before that would be thrown away).
    pub(super) fn hold(self: &Arc<Self>, table: &Table) {
        if !self.on.swap(true, Ordering::SeqCst) {
            self.start_waiting(&mut guard(&self.state), table);
        }
    }

    /// Turn holding on and read the table's rows now, before returning, unless a read is under
    /// way already: a daemon does this before it answers, so its first searches are answered
    /// from them rather than by lance.
    pub(super) async fn hold_now(self: &Arc<Self>, table: &Table) {
        self.on.store(true, Ordering::SeqCst);
        let done = self.read_done.notified();
        tokio::pin!(done);
        // Registered before the look, so a read that ends right after it is not missed.
        done.as_mut().enable();
        let start = {
            let mut state = guard(&self.state);
            !std::mem::replace(&mut state.reading, true)
        };
        if start {
            return self.clone().read(table.clone()).await;
        }
        // A read is under way (the settle before it started one): its rows are the ones to
        // answer with, so wait for it rather than answer from lance meanwhile (not for ever: a
        // read that never ends leaves the searches to lance, as before it).
        let _ = tokio::time::timeout(Duration::from_secs(60), done).await;
    }

    /// Read `table`'s vectors in the background, unless a read is already under way.
    fn start_reading(self: &Arc<Self>, state: &mut State, table: &Table) {
        if !state.reading {
            state.reading = true;
            tokio::spawn(self.clone().read(table.clone()));
        }
    }

    /// This process made a new table version: read its vectors once it has been the latest for
    /// [`HOLD_AFTER_QUIET`], searched or not.
    pub(super) fn changed(self: &Arc<Self>, table: &Table) {
        if self.on.load(Ordering::Relaxed) {
            self.start_waiting(&mut guard(&self.state), table);
        }
    }

    /// The index was settled: read the latest version's rows now, unless they are held or being
    /// read. A settle comes after the writes went quiet (or as the daemon starts), so the wait
    /// for quiet would only keep searches on lance for another [`HOLD_AFTER_QUIET`].
    pub(super) async fn settled(self: &Arc<Self>, table: &Table) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let Ok(version) = table.version().await else { return };
        let mut state = guard(&self.state);
        if state.held.as_ref().is_none_or(|h| h.version != version) {
            self.start_reading(&mut state, table);
        }
    }

    /// Wait in the background for the table to keep one version for [`HOLD_AFTER_QUIET`], then
    /// read it, unless a task already waits.
    fn start_waiting(self: &Arc<Self>, state: &mut State, table: &Table) {
        if !state.waiting {
            state.waiting = true;
            tokio::spawn(self.clone().read_when_quiet(table.clone()));
        }
    }

    async fn read_when_quiet(self: Arc<Self>, table: Table) {
        while let Some(wait) = self.quiet_step(&table, table.version().await.ok()) {
            tokio::time::sleep(wait).await;
        }
    }

    /// One look of [`Slot::read_when_quiet`] at the table's latest `version`: how long to wait
    /// before the next, or `None` when it is done (the version is held, is being read, or is
    /// unknown).
    fn quiet_step(self: &Arc<Self>, table: &Table, version: Option<u64>) -> Option<Duration> {
        let mut state = guard(&self.state);
        let version = version.filter(|v| state.held.as_ref().is_none_or(|h| h.version != *v));
        let Some(version) = version else {
            state.waiting = false;
            return None;
        };
        match state.seen {
            Some((seen, since)) if seen == version => match HOLD_AFTER_QUIET.checked_sub(since.elapsed()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => {
                    state.waiting = false;
                    self.start_reading(&mut state, table);
                    None
                }
            },
            _ => {
                state.seen = Some((version, Instant::now()));
                Some(HOLD_AFTER_QUIET)
            }
        }
    }

    /// This process appended the rows of `keys` to the table, making its latest version out of
    /// `before` without moving any other row (no delete, no update, no compaction): when the
    /// rows of `before` are held, read just the new rows and hold them on top, as the new
    /// version, instead of reading every row again once the writes are quiet. Past
    /// [`TAIL_MAX`] appended rows the next quiet read takes them all in again.
    pub(super) async fn extend(self: &Arc<Self>, table: &Table, before: u64, keys: &[String]) {
        if !self.on.load(Ordering::Relaxed) || keys.is_empty() {
            return;
        }
        let held = {
            let state = guard(&self.state);
            match state.held.as_ref().filter(|h| h.version == before && h.tail_len() + keys.len() <= TAIL_MAX) {
                Some(held) => held.clone(),
                None => return,
            }
        };
        let Ok(version) = table.version().await else { return };
        let filter = super::rank::key_list(keys, false);
        let more = match Rows::read(table, Some(&filter)).await {
            Ok(more) if more.len() == keys.len() => more,
            Ok(more) => {
                debug!(read = more.len(), appended = keys.len(), "appended rows not all found; reading them all later");
                return;
            }
            Err(e) => {
                debug!(error = %e, "could not read the appended rows; reading them all later");
                return;
            }
        };
        if table.version().await.ok() != Some(version) {
            return;
        }
        // A search that saw the new version before this dropped the old rows; they are still
        // the base of the new ones.
        let mut state = guard(&self.state);
        if state.held.as_ref().is_none_or(|h| h.version == before) {
            state.held = Some(Arc::new(held.extended(version, more)));
        }
        drop(state);
        // The filtered scans that found the rows freed what they read; a daemon taking posts is
        // never idle long enough to hand that back otherwise. Not after every one: handing
        // memory back takes the allocator's locks from the searches running meanwhile.
        if self.extended.fetch_add(1, Ordering::Relaxed) % TRIM_EVERY == TRIM_EVERY - 1 {
            tokio::task::spawn_blocking(memfold_store::sys::alloc::release_free_memory);
        }
    }

    #[cfg(test)]
    /// The version of the vectors held, without asking the table for its latest.
    pub(super) fn held_version(&self) -> Option<u64> {
        guard(&self.state).held.as_ref().map(|h| h.version)
    }

    pub(super) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    pub(super) fn count_served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
    }

    /// The held vectors if they are of the table's latest version. Otherwise `None`, and once
    /// that version has been the latest for [`HOLD_AFTER_QUIET`], a read of it in the background
    /// (started by this search or, when no search comes, by the task waiting for it).
    pub(super) async fn current(self: &Arc<Self>, table: &Table) -> Option<Arc<Held>> {
        if !self.on.load(Ordering::Relaxed) {
            return None;
        }
        let version = match table.version().await {
            Ok(v) => v,
            Err(e) => {
                debug!(error = %e, "table version unknown; searching without the held vectors");
                return None;
            }
        };
        let mut state = guard(&self.state);
        if let Some(held) = state.held.as_ref().filter(|h| h.version == version) {
            return Some(held.clone());
        }
        // Vectors of an older version are never used again. What they took goes back to the
        // system now: a stream of writes keeps a daemon from the idle moments when freed memory
        // is handed back otherwise.
        if let Some(old) = state.held.take() {
            tokio::task::spawn_blocking(move || {
                drop(old);
                memfold_store::sys::alloc::release_free_memory();
            });
        }
        match state.seen {
            Some((seen, since)) if seen == version => {
                if since.elapsed() >= HOLD_AFTER_QUIET {
                    self.start_reading(&mut state, table);
                }
            }
            _ => {
                state.seen = Some((version, Instant::now()));
                self.start_waiting(&mut state, table);
            }
        }
        None
    }

    /// Read the table's vectors now and hold them.
    async fn read(self: Arc<Self>, table: Table) {
        let started = Instant::now();
        let read = Held::read(&table).await;
        // The read's batches and grown vectors are free now: about twice what is held.
        let _ = tokio::task::spawn_blocking(memfold_store::sys::alloc::release_free_memory).await;
        let mut state = guard(&self.state);
        state.reading = false;
        match read {
            Ok(Some(held)) => {
                info!(
                    rows = held.base.len() + held.tail_len(),
                    version = held.version,
                    bytes = held.bytes(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "holding the index's vectors in memory"
                );
                state.held = Some(Arc::new(held));
            }
            Ok(None) => {
                debug!("the table changed while its vectors were read; reading them once it is quiet");
                self.start_waiting(&mut state, &table);
            }
            Err(e) => warn!(error = %e, "could not read the index's vectors; searching with lance"),
        }
        drop(state);
        self.read_done.notify_waiters();
    }
}

/// Half-byte steps of a row from its largest component to zero.
const COARSE: f32 = 7.0;
/// Added to a coarse code (-7..=7) to store it in a half byte.
const OFFSET: i8 = 8;

/// Append `vector`'s coarse codes to `coarse` and what they leave to `fine`, and return its
/// scale: the vector divided by its length, each component as the nearest multiple of the
/// scale, between -7 and 7 (stored plus [`OFFSET`], two to a byte), and the rest in
/// [`FINE`]ths of the scale. A zero vector: zeros, scale 0.
fn quantise(vector: &[f32], coarse: &mut Vec<u8>, fine: &mut Vec<i8>) -> f32 {
    let (norm, scale) = unit_step(vector, COARSE);
    let mut halves = Vec::with_capacity(vector.len() + 1);
    for v in vector {
        let x = if scale == 0.0 { 0.0 } else { v / norm / scale };
        let code = x.round().clamp(-COARSE, COARSE);
        halves.push((code as i8 + OFFSET) as u8);
        fine.push(((x - code) * FINE).round().clamp(-127.0, 127.0) as i8);
    }
    if halves.len() % 2 == 1 {
        halves.push(OFFSET as u8);
    }
    coarse.extend(halves.chunks_exact(2).map(|pair| pair[0] | (pair[1] << 4)));
    scale
}

/// `vector`'s length, and the step that puts its largest component of the unit vector at
/// `steps` steps from zero (0 for a zero or non-finite vector).
fn unit_step(vector: &[f32], steps: f32) -> (f32, f32) {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = if norm == 0.0 || largest == 0.0 || !norm.is_finite() { 0.0 } else { largest / norm / steps };
    (norm, scale)
}

/// `1 - cos(a, b)`, lance's cosine distance; 1 for a zero vector.
pub(super) fn cosine_distance(a: &[f32], b: impl IntoIterator<Item = f32>) -> f32 {
    let (mut dot, mut aa, mut bb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    match aa * bb {
        0.0 => 1.0,
        norms => 1.0 - dot / norms.sqrt(),
    }
}

/// The coarse code of dimension `j` of a row's packed codes.
fn half_byte(coarse: &[u8], j: usize) -> i8 {
    let byte = coarse[j / 2];
    let half = if j.is_multiple_of(2) { byte & 0x0f } else { byte >> 4 };
    half as i8 - OFFSET
}

/// A query as the scan reads it: its unit vector in steps of its largest component / 127,
/// the codes of even and of odd dimensions apart (they meet the low and the high half of each
/// byte of a row), their sum, and the step.
struct Scan {
    even: Vec<i8>,
    odd: Vec<i8>,
    sum: i32,
    scale: f32,
}

impl Scan {
    fn new(vector: &[f32]) -> Scan {
        let (norm, scale) = unit_step(vector, 127.0);
        let code = |v: f32| if scale == 0.0 { 0 } else { (v / norm / scale).round().clamp(-127.0, 127.0) as i8 };
        let width = vector.len().div_ceil(2);
        let at = |j: usize| vector.get(j).map_or(0, |v| code(*v));
        let even: Vec<i8> = (0..width).map(|k| at(2 * k)).collect();
        let odd: Vec<i8> = (0..width).map(|k| at(2 * k + 1)).collect();
        let sum = even.iter().chain(&odd).map(|c| i32::from(*c)).sum();
        Scan { even, odd, sum, scale }
    }
}

/// `out[i]` = the dot product of the query's codes with the coarse codes of the i-th row of
/// `coarse` (`width` bytes per row).
fn dots(scan: &Scan, coarse: &[u8], width: usize, out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { dots_avx2(scan, coarse, width, out) };
    }
    dots_any(scan, coarse, width, out)
}

fn dots_any(scan: &Scan, coarse: &[u8], width: usize, out: &mut [i32]) {
    for (row, score) in coarse.chunks_exact(width).zip(out.iter_mut()) {
        *score = tail(scan, row, 0) - i32::from(OFFSET) * scan.sum;
    }
}

/// The stored (offset) codes' dot product with the query from byte `from` of a row on.
fn tail(scan: &Scan, row: &[u8], from: usize) -> i32 {
    row[from..]
        .iter()
        .zip(&scan.even[from..])
        .zip(&scan.odd[from..])
        .map(|((b, e), o)| i32::from(*e) * i32::from(b & 0x0f) + i32::from(*o) * i32::from(b >> 4))
        .sum()
}

/// [`dots_any`] 32 bytes (64 dimensions) at a time: the half bytes times the query's codes,
/// summed in pairs into 16 bits (at most 2 x 2 x 15 x 127), then into 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_avx2(scan: &Scan, coarse: &[u8], width: usize, out: &mut [i32]) {
    use std::arch::x86_64::*;
    let steps = width / 32;
    let low = _mm256_set1_epi8(0x0f);
    let ones = _mm256_set1_epi16(1);
    macro_rules! load {
        ($bytes:expr) => {{
            let bytes: &[u8] = $bytes;
            assert!(bytes.len() >= 32);
            // SAFETY: 32 bytes are there to read (checked above); unaligned loads are allowed.
            unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
        }};
    }
    let (even, odd): (&[u8], &[u8]) = (bytemuck_i8(&scan.even), bytemuck_i8(&scan.odd));
    for (row, score) in coarse.chunks_exact(width).zip(out.iter_mut()) {
        let mut acc = _mm256_setzero_si256();
        for s in 0..steps {
            let at = s * 32;
            let v = load!(&row[at..]);
            let lo = _mm256_and_si256(v, low);
            let hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            let pairs = _mm256_add_epi16(
                _mm256_maddubs_epi16(lo, load!(&even[at..])),
                _mm256_maddubs_epi16(hi, load!(&odd[at..])),
            );
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        }
        let sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        let sum = _mm_hadd_epi32(sum, sum);
        let sum = _mm_hadd_epi32(sum, sum);
        *score = _mm_cvtsi128_si32(sum) + tail(scan, row, steps * 32) - i32::from(OFFSET) * scan.sum;
    }
}

/// The same bytes read as unsigned (the intrinsics take the query's codes as bytes).
#[cfg(target_arch = "x86_64")]
fn bytemuck_i8(codes: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have the same size and alignment, and every bit pattern is valid.
    unsafe { std::slice::from_raw_parts(codes.as_ptr().cast(), codes.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_dots_rank_like_exact_cosines() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        // 131: odd, and not a multiple of 64 dimensions: the tail and the padding count too.
        for dim in [131usize, 384] {
            let width = dim.div_ceil(2);
            let rows: Vec<Vec<f32>> = (0..300).map(|_| (0..dim).map(|_| next()).collect()).collect();
            let query: Vec<f32> = (0..dim).map(|_| next()).collect();
            let (mut coarse, mut fine, mut scales) = (Vec::new(), Vec::new(), Vec::new());
            for row in &rows {
                scales.push(quantise(row, &mut coarse, &mut fine));
            }
            assert_eq!((coarse.len(), fine.len()), (rows.len() * width, rows.len() * dim));
            let scan = Scan::new(&query);
            let mut out = vec![0; rows.len()];
            dots(&scan, &coarse, width, &mut out);
            let mut any = vec![0; rows.len()];
            dots_any(&scan, &coarse, width, &mut any);
            assert_eq!(out, any);
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            for (i, row) in rows.iter().enumerate() {
                let exact = row.iter().zip(&query).map(|(a, b)| a * b).sum::<f32>() / norm(row) / norm(&query);
                // The dot product of the codes, as the scan computes it.
                let codes: i32 = (0..dim)
                    .map(|j| {
                        i32::from(half_byte(&coarse[i * width..], j))
                            * i32::from(if j.is_multiple_of(2) { scan.even[j / 2] } else { scan.odd[j / 2] })
                    })
                    .sum();
                assert_eq!(out[i], codes, "row {i}");
                let estimate = out[i] as f32 * scan.scale * scales[i];
                assert!((exact - estimate).abs() < 0.1, "row {i}: {exact} vs {estimate}");
                // With the fine codes the vector is all but exact.
                let rebuilt: Vec<f32> = (0..dim)
                    .map(|j| {
                        (f32::from(half_byte(&coarse[i * width..], j)) + f32::from(fine[i * dim + j]) / FINE)
                            * scales[i]
                    })
                    .collect();
                let close = 1.0 - cosine_distance(&query, rebuilt);
                assert!((exact - close).abs() < 1e-4, "row {i}: {exact} vs {close}");
            }
        }
        // A zero vector is nobody's neighbour and breaks nothing.
        let (mut coarse, mut fine) = (Vec::new(), Vec::new());
        assert_eq!(quantise(&[0.0; 3], &mut coarse, &mut fine), 0.0);
        assert_eq!((coarse, fine), (vec![0x88, 0x08 | 0x80], vec![0; 3]));
    }
}
