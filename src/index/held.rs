//! The table's vectors held in memory by a long-running process, for the vector leg of
//! [`Index::search`] past the ANN threshold.
//!
//! lance answers a vector query in about 9 ms at 100k rows, most of it fixed cost (planning,
//! reading index partitions, handing work between threads), not distance arithmetic. A daemon
//! that searches often keeps instead, per row, its vector quantised to one byte per dimension
//! (384 bytes at MiniLM's and `local`'s width: 38 MB at 100k rows), its row id, kind and dates:
//! the leg scans them all (about 2.5 ms at 100k on one core), takes the best
//! `n` + [`super::rank::TIE_SLACK`] rows by that estimate from the table by row id, and ranks
//! those by their exact cosine distance. Scanning every row, it misses no neighbour the ANN
//! index's partitions would have hidden.
//!
//! **Never stale.** What is held belongs to one table version. Each search asks the table for
//! its latest version (the connection reads other processes' writes at once) and uses the held
//! vectors only when they are of that version; otherwise it searches with lance, as a process
//! without held vectors does. Once a search has seen the same version for
//! [`HOLD_AFTER_QUIET`], the vectors of that version are read again in the background (about
//! 0.5 s at 100k rows), so a steady stream of writes costs no rereading, only lance's speed.
//! A read that saw the version change under it is thrown away.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{Array, Date32Array, FixedSizeListArray, Float32Array};
use futures::TryStreamExt;
use chrono::NaiveDate;
use lancedb::Table;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use tracing::{debug, info, warn};

use super::rows::{self, KIND, VALID_FROM, VALID_UNTIL, VECTOR};
use super::{DbContext, DocKind, IndexError};

/// How long a table version must have been the latest a search saw before its vectors are read.
pub const HOLD_AFTER_QUIET: Duration = Duration::from_secs(1);

/// One table version's vectors, quantised, with what the search filters on.
pub(super) struct Held {
    version: u64,
    dim: usize,
    ids: Vec<u64>,
    kinds: Vec<DocKind>,
    from: Vec<i32>,
    /// `i32::MAX` for rows still valid.
    until: Vec<i32>,
    /// `dim` codes per row: the unit vector divided by the row's scale, rounded.
    codes: Vec<i8>,
    scales: Vec<f32>,
}

impl Held {
    /// Read every row's vector of the table's current version; `None` when a write made another
    /// version while reading.
    async fn read(table: &Table) -> Result<Option<Held>, IndexError> {
        let version = table.version().await.db("table version")?;
        let query = table.query().select(Select::columns(&[KIND, VALID_FROM, VALID_UNTIL, VECTOR])).with_row_id();
        let mut held = Held {
            version,
            dim: 0,
            ids: Vec::new(),
            kinds: Vec::new(),
            from: Vec::new(),
            until: Vec::new(),
            codes: Vec::new(),
            scales: Vec::new(),
        };
        // Batch by batch: the vectors as floats would take four times what is held.
        let mut stream = query.execute().await.db("read the vectors to hold")?;
        while let Some(batch) = stream.try_next().await.db("read the vectors to hold")? {
            let kinds = rows::strings(&batch, KIND)?;
            held.ids.extend(rows::row_ids(&batch)?);
            for kind in kinds {
                held.kinds.push(DocKind::parse(&kind).ok_or_else(|| IndexError::Corrupt(format!("row of kind {kind:?}")))?);
            }
            held.from.extend(days(&batch, VALID_FROM)?.into_iter().map(|d| d.unwrap_or(i32::MIN)));
            held.until.extend(days(&batch, VALID_UNTIL)?.into_iter().map(|d| d.unwrap_or(i32::MAX)));
            let (dim, values) = flat_vectors(&batch)?;
            held.dim = dim;
            for vector in values.chunks_exact(dim.max(1)) {
                held.scales.push(quantise(vector, &mut held.codes));
            }
        }
        let after = table.version().await.db("table version")?;
        held.codes.shrink_to_fit();
        Ok((after == version).then_some(held))
    }

    /// Row ids of the `m` rows passing the filter whose quantised vectors are nearest to
    /// `vector`, in no particular order.
    pub(super) fn candidates(&self, vector: &[f32], kinds: &[DocKind], as_of: Option<NaiveDate>, m: usize) -> Vec<u64> {
        if self.dim != vector.len() || m == 0 {
            return Vec::new();
        }
        let mut query = Vec::with_capacity(self.dim);
        let query_scale = quantise(vector, &mut query);
        let day = as_of.map(rows::date_to_days);
        let mut scores = vec![0i32; self.ids.len()];
        dots(&query, &self.codes, self.dim, &mut scores);
        let mut best: Vec<(f32, u64)> = (0..self.ids.len())
            .filter(|&i| kinds.contains(&self.kinds[i]) && day.is_none_or(|d| self.from[i] <= d && self.until[i] > d))
            .map(|i| (scores[i] as f32 * query_scale * self.scales[i], self.ids[i]))
            .collect();
        if best.len() > m {
            best.select_nth_unstable_by(m - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            best.truncate(m);
        }
        best.into_iter().map(|(_, id)| id).collect()
    }

    fn bytes(&self) -> usize {
        self.codes.len() + self.ids.len() * (8 + 4 + 4 + 4 + 1)
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
    pub(super) fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
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

    /// Read the table's vectors now and hold them (the daemon does this at start).
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

/// Append `vector`'s codes to `codes` and return its scale: the vector divided by its length,
/// each component as the nearest multiple of the scale (a zero vector: zeros, scale 0).
fn quantise(vector: &[f32], codes: &mut Vec<i8>) -> f32 {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0f32, |m, v| m.max(v.abs()));
    if norm == 0.0 || largest == 0.0 || !norm.is_finite() {
        codes.extend(std::iter::repeat_n(0, vector.len()));
        return 0.0;
    }
    let scale = largest / norm / 127.0;
    codes.extend(vector.iter().map(|v| (v / norm / scale).round().clamp(-127.0, 127.0) as i8));
    scale
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
        for row in &rows {
            scales.push(quantise(row, &mut codes));
        }
        let mut q = Vec::new();
        let qs = quantise(&query, &mut q);
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
        }
        // A zero vector is nobody's neighbour and breaks nothing.
        let mut zero = Vec::new();
        assert_eq!(quantise(&[0.0; 4], &mut zero), 0.0);
        assert_eq!(zero, [0; 4]);
    }
}
