//! The table's vectors held in memory by a long-running process, for the vector leg of
//! [`Index::search`] past the ANN threshold.
//!
//! lance answers a vector query in about 9 ms at 100k rows, most of it fixed cost (planning,
//! reading index partitions, handing work between threads), not distance arithmetic; reading
//! rows back by id costs about 70 us a row. A daemon that searches often keeps instead, per row,
//! its key, row id, kind and dates and its unit vector in two bytes per dimension: a coarse
//! code (the vector in steps of its largest component / 127) and a fine one (what the coarse
//! step left, in steps 254 times smaller). The leg scans every row's coarse codes (about 2.5 ms
//! at 100k on one core), keeps the best [`RERANK`] times `n`, ranks those by the cosine of the
//! query with their fine-grained vectors (within about 1e-5 of the exact one: the order of
//! rows that are not tied) and cuts `n` by that distance, then key. It reads nothing from
//! lance; the search takes the hits of the rows it returns by row id. Scanning every row, it
//! misses no neighbour the ANN index's partitions would hide (the coarse scan alone ranked
//! only 94% of the exact 10 nearest first at 100k, hence the fine codes). At MiniLM's and
//! `local`'s 384 dimensions that is about 80 MB at 100k rows.
//!
//! **Never stale.** What is held belongs to one table version. Each search asks the table for
//! its latest version (the connection reads other processes' writes at once) and uses the held
//! vectors only when they are of that version; otherwise it searches with lance, as a process
//! without held vectors does. Once a search has seen the same version for
//! [`HOLD_AFTER_QUIET`], the vectors of that version are read again in the background (about
//! 0.5 s at 100k rows), so a steady stream of writes costs no rereading, only lance's speed.
//! A read that saw the version change under it is thrown away.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{Array, Date32Array, FixedSizeListArray, Float32Array};
use futures::TryStreamExt;
use chrono::NaiveDate;
use lancedb::Table;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use tracing::{debug, info, warn};

use super::rows::{self, KEY, KIND, VALID_FROM, VALID_UNTIL, VECTOR};
use super::{DbContext, DocKind, IndexError};

/// How long a table version must have been the latest a search saw before its vectors are read.
pub const HOLD_AFTER_QUIET: Duration = Duration::from_secs(1);

/// Candidates re-ranked by their fine codes per row a leg returns.
pub const RERANK: usize = 4;

/// One table version's vectors, quantised, with what the search filters on and returns.
pub(super) struct Held {
    version: u64,
    dim: usize,
    ids: Vec<u64>,
    /// Every row's key, one after another; row i's ends at `key_ends[i]`.
    keys: String,
    key_ends: Vec<u32>,
    kinds: Vec<DocKind>,
    from: Vec<i32>,
    /// `i32::MAX` for rows still valid.
    until: Vec<i32>,
    /// `dim` coarse codes per row: the unit vector divided by the row's scale, rounded.
    codes: Vec<i8>,
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

/// A row a held search returns: key, cosine distance, and what the search needs of it.
pub(super) struct Near {
    pub key: String,
    pub distance: f64,
    pub id: u64,
    pub valid_from: NaiveDate,
}

impl Held {
    /// Read every row's vector of the table's current version; `None` when a write made another
    /// version while reading.
    async fn read(table: &Table) -> Result<Option<Held>, IndexError> {
        let version = table.version().await.db("table version")?;
        let columns = [KEY, KIND, VALID_FROM, VALID_UNTIL, VECTOR];
        let query = table.query().select(Select::columns(&columns)).with_row_id();
        let mut held = Held {
            version,
            dim: 0,
            ids: Vec::new(),
            keys: String::new(),
            key_ends: Vec::new(),
            kinds: Vec::new(),
            from: Vec::new(),
            until: Vec::new(),
            codes: Vec::new(),
            fine: Vec::new(),
            scales: Vec::new(),
        };
        // Batch by batch: the vectors as floats would take twice what is held.
        let mut stream = query.execute().await.db("read the vectors to hold")?;
        while let Some(batch) = stream.try_next().await.db("read the vectors to hold")? {
            for key in rows::strings(&batch, KEY)? {
                held.keys.push_str(&key);
                let end = u32::try_from(held.keys.len()).map_err(|_| IndexError::Corrupt("keys over 4 GB".into()))?;
                held.key_ends.push(end);
            }
            for kind in rows::strings(&batch, KIND)? {
                held.kinds.push(DocKind::parse(&kind).ok_or_else(|| IndexError::Corrupt(format!("row of kind {kind:?}")))?);
            }
            held.ids.extend(rows::row_ids(&batch)?);
            held.from.extend(days(&batch, VALID_FROM)?.into_iter().map(|d| d.unwrap_or(i32::MIN)));
            held.until.extend(days(&batch, VALID_UNTIL)?.into_iter().map(|d| d.unwrap_or(i32::MAX)));
            let (dim, values) = flat_vectors(&batch)?;
            held.dim = dim;
            for vector in values.chunks_exact(dim.max(1)) {
                held.scales.push(quantise(vector, &mut held.codes, Some(&mut held.fine)));
            }
        }
        let after = table.version().await.db("table version")?;
        held.shrink();
        Ok((after == version).then_some(held))
    }

    fn shrink(&mut self) {
        self.ids.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.key_ends.shrink_to_fit();
        self.kinds.shrink_to_fit();
        self.from.shrink_to_fit();
        self.until.shrink_to_fit();
        self.codes.shrink_to_fit();
        self.fine.shrink_to_fit();
        self.scales.shrink_to_fit();
    }

    fn key(&self, row: usize) -> &str {
        let start = if row == 0 { 0 } else { self.key_ends[row - 1] as usize };
        &self.keys[start..self.key_ends[row] as usize]
    }

    /// The `n` rows passing the filter nearest to `vector`, best first, ties by key.
    pub(super) fn nearest(&self, vector: &[f32], kinds: &[DocKind], as_of: Option<NaiveDate>, n: usize) -> Vec<Near> {
        if self.dim != vector.len() || n == 0 {
            return Vec::new();
        }
        let mut query = Vec::with_capacity(self.dim);
        let query_scale = quantise(vector, &mut query, None);
        let day = as_of.map(rows::date_to_days);
        let mut scores = vec![0i32; self.ids.len()];
        // Two threads: one core alone cannot read the codes from memory as fast as two.
        let half = self.ids.len() / 2;
        let (first, second) = scores.split_at_mut(half);
        let (codes_first, codes_second) = self.codes.split_at(half * self.dim);
        std::thread::scope(|scope| {
            scope.spawn(|| dots(&query, codes_second, self.dim, second));
            dots(&query, codes_first, self.dim, first);
        });
        // The best m estimates, worst on top: most rows are turned away by one comparison.
        let m = n.saturating_mul(RERANK);
        let mut best: BinaryHeap<Reverse<Estimate>> = BinaryHeap::with_capacity(m + 1);
        for (i, score) in scores.iter().enumerate() {
            if !kinds.contains(&self.kinds[i]) || day.is_some_and(|d| self.from[i] > d || self.until[i] <= d) {
                continue;
            }
            let estimate = Estimate(*score as f32 * query_scale * self.scales[i], i);
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
        near.into_iter()
            .map(|(distance, i)| Near {
                key: self.key(i).to_string(),
                distance: f64::from(distance),
                id: self.ids[i],
                valid_from: rows::days_to_date(self.from[i]),
            })
            .collect()
    }

    /// Cosine distance of `vector` to row `row` as its coarse and fine codes give it.
    fn distance(&self, vector: &[f32], row: usize) -> f32 {
        let range = row * self.dim..(row + 1) * self.dim;
        let scale = self.scales[row];
        let rebuilt = self.codes[range.clone()]
            .iter()
            .zip(&self.fine[range])
            .map(|(c, f)| (f32::from(*c) + f32::from(*f) / FINE) * scale);
        let (mut dot, mut vv, mut rr) = (0f32, 0f32, 0f32);
        for (x, r) in vector.iter().zip(rebuilt) {
            dot += x * r;
            vv += x * x;
            rr += r * r;
        }
        match vv * rr {
            0.0 => 1.0,
            norms => 1.0 - dot / norms.sqrt(),
        }
    }

    fn bytes(&self) -> usize {
        self.codes.len() + self.fine.len() + self.keys.len() + self.ids.len() * (8 + 4 + 4 + 4 + 4 + 1)
    }
}

/// The held vectors of one index, and when to read them again.
#[derive(Default)]
pub(super) struct Slot {
    on: AtomicBool,
    state: Mutex<State>,
    /// Searches whose vector leg the held vectors answered.
    served: AtomicU64,
}

#[derive(Default)]
struct State {
    held: Option<Arc<Held>>,
    /// The latest version a search saw, and since when.
    seen: Option<(u64, Instant)>,
    reading: bool,
}

impl Slot {
    #[cfg(test)]
    pub(super) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Turn holding on; true if it was off.
    pub(super) fn enable(&self) -> bool {
        !self.on.swap(true, Ordering::SeqCst)
    }

    #[cfg(test)]
    pub(super) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    pub(super) fn count_served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
    }

    /// The held vectors if they are of the table's latest version. Otherwise `None`, and once
    /// that version has been the latest for [`HOLD_AFTER_QUIET`], a read of it in the background.
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
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = state.held.as_ref().filter(|h| h.version == version) {
            return Some(held.clone());
        }
        // Vectors of an older version are never used again.
        state.held = None;
        match state.seen {
            Some((seen, since)) if seen == version => {
                if since.elapsed() >= HOLD_AFTER_QUIET && !state.reading {
                    state.reading = true;
                    tokio::spawn(self.clone().read(table.clone()));
                }
            }
            _ => state.seen = Some((version, Instant::now())),
        }
        None
    }

    /// Read the table's vectors now and hold them.
    pub(super) async fn read(self: Arc<Self>, table: Table) {
        let started = Instant::now();
        let read = Held::read(&table).await;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.reading = false;
        match read {
            Ok(Some(held)) => {
                info!(
                    rows = held.ids.len(),
                    version = held.version,
                    bytes = held.bytes(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "holding the index's vectors in memory"
                );
                state.held = Some(Arc::new(held));
            }
            Ok(None) => debug!("the table changed while its vectors were read; reading them later"),
            Err(e) => warn!(error = %e, "could not read the index's vectors; searching with lance"),
        }
    }
}

/// Append `vector`'s codes to `codes` (and what they leave to `fine`) and return its scale:
/// the vector divided by its length, each component as the nearest multiple of the scale (a
/// zero vector: zeros, scale 0).
fn quantise(vector: &[f32], codes: &mut Vec<i8>, fine: Option<&mut Vec<i8>>) -> f32 {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0f32, |m, v| m.max(v.abs()));
    if norm == 0.0 || largest == 0.0 || !norm.is_finite() {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        if let Some(fine) = fine {
            fine.extend(std::iter::repeat_n(0, vector.len()));
        }
        return 0.0;
    }
    let scale = largest / norm / 127.0;
    let steps = vector.iter().map(|v| v / norm / scale);
    match fine {
        None => codes.extend(steps.map(|x| x.round().clamp(-127.0, 127.0) as i8)),
        Some(fine) => {
            for x in steps {
                let coarse = x.round().clamp(-127.0, 127.0);
                codes.push(coarse as i8);
                fine.push(((x - coarse) * FINE).round().clamp(-127.0, 127.0) as i8);
            }
        }
    }
    scale
}

/// `1 - cos(a, b)`, lance's cosine distance; 1 for a zero vector.
#[cfg(test)]
pub(super) fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
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

/// `out[i]` = the dot product of `query` with the i-th row of `codes` (`dim` codes per row).
fn dots(query: &[i8], codes: &[i8], dim: usize, out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { dots_avx2(query, codes, dim, out) };
    }
    dots_any(query, codes, dim, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_avx2(query: &[i8], codes: &[i8], dim: usize, out: &mut [i32]) {
    dots_any(query, codes, dim, out)
}

/// Written so that the compiler vectorises it: 16 independent sums per row.
#[inline(always)]
fn dots_any(query: &[i8], codes: &[i8], dim: usize, out: &mut [i32]) {
    const LANES: usize = 16;
    let whole = dim / LANES * LANES;
    for (row, score) in codes.chunks_exact(dim).zip(out.iter_mut()) {
        let mut acc = [0i32; LANES];
        for (q, c) in query[..whole].chunks_exact(LANES).zip(row[..whole].chunks_exact(LANES)) {
            for lane in 0..LANES {
                acc[lane] += i32::from(q[lane]) * i32::from(c[lane]);
            }
        }
        let tail: i32 = query[whole..].iter().zip(&row[whole..]).map(|(q, c)| i32::from(*q) * i32::from(*c)).sum();
        *score = acc.iter().sum::<i32>() + tail;
    }
}

/// A `Date32` column as days since 1970 (`None` for nulls).
fn days(batch: &arrow_array::RecordBatch, name: &str) -> Result<Vec<Option<i32>>, IndexError> {
    let array = batch.column_by_name(name).ok_or_else(|| IndexError::Corrupt(format!("no column {name}")))?;
    let dates = array
        .as_any()
        .downcast_ref::<Date32Array>()
        .ok_or_else(|| IndexError::Corrupt(format!("column {name} has type {}", array.data_type())))?;
    Ok(dates.iter().collect())
}

/// The vector column's width and its values, row after row.
fn flat_vectors(batch: &arrow_array::RecordBatch) -> Result<(usize, &[f32]), IndexError> {
    let array = batch.column_by_name(VECTOR).ok_or_else(|| IndexError::Corrupt(format!("no column {VECTOR}")))?;
    let wrong = || IndexError::Corrupt(format!("column {VECTOR} has type {}", array.data_type()));
    let list = array.as_any().downcast_ref::<FixedSizeListArray>().ok_or_else(wrong)?;
    let values = list.values().as_any().downcast_ref::<Float32Array>().ok_or_else(wrong)?;
    let dim = list.value_length() as usize;
    let start = list.offset() * dim;
    Ok((dim, &values.values()[start..start + list.len() * dim]))
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
        let dim = 37; // not a multiple of the lanes: the tail counts too
        let rows: Vec<Vec<f32>> = (0..500).map(|_| (0..dim).map(|_| next()).collect()).collect();
        let query: Vec<f32> = (0..dim).map(|_| next()).collect();
        let (mut codes, mut scales) = (Vec::new(), Vec::new());
        let mut fine = Vec::new();
        for row in &rows {
            scales.push(quantise(row, &mut codes, Some(&mut fine)));
        }
        let mut q = Vec::new();
        let qs = quantise(&query, &mut q, None);
        let mut out = vec![0; rows.len()];
        dots(&q, &codes, dim, &mut out);
        let mut any = vec![0; rows.len()];
        dots_any(&q, &codes, dim, &mut any);
        assert_eq!(out, any);
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        for (i, row) in rows.iter().enumerate() {
            let exact = row.iter().zip(&query).map(|(a, b)| a * b).sum::<f32>() / norm(row) / norm(&query);
            let estimate = out[i] as f32 * qs * scales[i];
            assert!((exact - estimate).abs() < 0.02, "row {i}: {exact} vs {estimate}");
            // With the fine codes the vector is all but exact.
            let rebuilt: Vec<f32> = (0..dim)
                .map(|j| (f32::from(codes[i * dim + j]) + f32::from(fine[i * dim + j]) / FINE) * scales[i])
                .collect();
            let close = 1.0 - cosine_distance(&rebuilt, &query);
            assert!((exact - close).abs() < 1e-4, "row {i}: {exact} vs {close}");
        }
        // A zero vector is nobody's neighbour and breaks nothing.
        let mut zero = Vec::new();
        assert_eq!(quantise(&[0.0; 4], &mut zero, None), 0.0);
        assert_eq!(zero, [0; 4]);
    }
}
