//! Tests against real LanceDB tables in temp dirs, with a deterministic bag-of-words embedder.

use std::collections::HashSet;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use futures::future::BoxFuture;
use lancedb::index::{Index as LanceIndex, IndexType};

use super::*;

/// Hashed bag of words: each lowercase word adds ±1 to one of `dim` buckets, then L2-normalised.
struct BagOfWords {
    id: String,
    dim: usize,
    /// Texts embedded so far.
    texts: AtomicUsize,
}

impl BagOfWords {
    fn new(id: &str, dim: usize) -> Arc<BagOfWords> {
        Arc::new(BagOfWords { id: id.to_string(), dim, texts: AtomicUsize::new(0) })
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dim];
        for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let h = word.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3));
            v[(h % self.dim as u64) as usize] += if (h >> 40) & 1 == 0 { 1.0 } else { -1.0 };
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            v[0] = 1.0;
        } else {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    fn embedded(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

impl Embedder for BagOfWords {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        let out = texts.iter().map(|t| self.vector(t)).collect();
        Box::pin(async move { Ok(out) })
    }
}

fn day(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn entry(id: &str, text: &str, from: &str) -> Doc {
    Doc {
        key: id.into(),
        id: id.into(),
        kind: DocKind::Entry,
        text: text.into(),
        path: "consolidated/memory.md".into(),
        sources: vec![format!("f-{id}")],
        valid_from: day(from),
        valid_until: None,
        pinned: false,
    }
}

fn fact(id: &str, text: &str, date: &str) -> Doc {
    Doc {
        key: id.into(),
        id: id.into(),
        kind: DocKind::Fact,
        text: text.into(),
        path: format!("archive/{date}.md"),
        sources: vec![],
        valid_from: day(date),
        valid_until: None,
        pinned: false,
    }
}

fn history(id: &str, n: u32, text: &str, from: &str, until: &str) -> Doc {
    Doc {
        key: format!("{id}@{n}"),
        id: id.into(),
        kind: DocKind::History,
        text: text.into(),
        path: "consolidated/history.md".into(),
        sources: vec![],
        valid_from: day(from),
        valid_until: Some(day(until)),
        pinned: false,
    }
}

fn corpus() -> Vec<Doc> {
    vec![
        entry("m-lisbon", "Moved to Lisbon in October and rents a flat in Alfama.", "2026-10-02"),
        entry("m-job", "Works at Microsoft (since 2026-05). Previously worked at Google.", "2026-05-30"),
        entry("m-cat", "Has a grey cat called Miso who likes boxes.", "2026-02-11"),
        entry("m-coffee", "Drinks black coffee, no sugar, two cups before noon.", "2026-03-15"),
        entry("m-rust", "Prefers Rust for systems work and Python for quick scripts.", "2026-04-01"),
        entry("m-bike", "Commutes by bike along the river every weekday.", "2026-10-20"),
        entry("m-sister", "Sister Ana lives in Porto and teaches chemistry.", "2026-01-05"),
        history("m-job", 1, "Works at Google as a site reliability engineer.", "2025-09-01", "2026-05-30"),
        fact("f-1", "Booked a dentist appointment for next Tuesday.", "2026-11-20"),
        fact("f-2", "Started learning Portuguese with an evening class.", "2026-11-20"),
        fact("f-3", "The cat Miso needs a vet check-up in December.", "2026-11-21"),
        fact("f-4", "Bought a new road bike with disc brakes.", "2026-11-21"),
    ]
}

fn opts(k: usize) -> SearchOpts {
    SearchOpts {
        k,
        as_of: None,
        dated: None,
        history: false,
        kinds: None,
        recency_weight: 0.0,
        recency_half_life_days: 90.0,
        today: day("2026-11-22"),
        uses: None,
        decay_weight: 0.0,
        decay_half_life_days: 180.0,
    }
}

fn index_dir(root: &Path) -> PathBuf {
    root.join(".memfold").join("index")
}

async fn open(root: &Path, embedder: Arc<BagOfWords>) -> Index {
    Index::open(&index_dir(root), embedder).await.unwrap()
}

/// [`open`] with a vector index from 300 rows (batches of 128), so a test's few hundred docs
/// are searched as a large memory is.
async fn open_past_ann(root: &Path, embedder: Arc<BagOfWords>) -> Index {
    let tuning = IndexTuning { ann_min_rows: 300, write_batch: 128, ..IndexTuning::default() };
    Index::open_with(&index_dir(root), embedder, tuning).await.unwrap()
}

fn keys(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.key.as_str()).collect()
}

fn expected_digest(docs: &[Doc]) -> BTreeMap<String, String> {
    docs.iter().map(|d| (d.key.clone(), Index::content_hash(d))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_then_search_finds_the_doc() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    let index = open(root.path(), embedder.clone()).await;
    let docs = corpus();
    let calls: StdMutex<Vec<(usize, usize)>> = StdMutex::new(Vec::new());
    let progress = |done: usize, total: usize| calls.lock().unwrap().push((done, total));
    let stats = index.sync(&docs, Scope::All, Some(&progress)).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: docs.len(), upserted: docs.len(), deleted: 0, unchanged: 0 });
    let calls = calls.into_inner().unwrap();
    assert_eq!(calls.last(), Some(&(docs.len(), docs.len())));
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "progress only grows: {calls:?}");

    let hits = index.search("Lisbon flat", &opts(5)).await.unwrap();
    assert_eq!(hits[0].key, "m-lisbon", "{hits:#?}");
    assert_eq!(hits[0].kind, DocKind::Entry);
    assert_eq!(hits[0].sources, vec!["f-m-lisbon".to_string()]);
    assert_eq!(hits[0].path, "consolidated/memory.md");
    assert!(hits.len() <= 5);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(!keys(&hits).contains(&"m-job@1"), "history is not searched by default");

    // Pending facts are searchable at once.
    let hits = index.search("dentist appointment", &opts(3)).await.unwrap();
    assert_eq!(hits[0].key, "f-1", "{hits:#?}");
    assert_eq!(hits[0].kind, DocKind::Fact);

    // Query syntax characters are plain text.
    index.search("C++ (what?) 'quote' AND OR \"x\" *", &opts(3)).await.unwrap();
    // The JSON shape of §7.
    let json = serde_json::to_value(&hits[0]).unwrap();
    for field in ["id", "kind", "text", "score", "sources"] {
        assert!(json.get(field).is_some(), "{json}");
    }
    assert_eq!(json["kind"], "fact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_with_the_same_docs_touches_nothing() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    let index = open(root.path(), embedder.clone()).await;
    let docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    let version = index.table().version().await.unwrap();
    let embedded = embedder.embedded();
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: 0, upserted: 0, deleted: 0, unchanged: docs.len() });
    assert_eq!(embedder.embedded(), embedded);
    assert_eq!(index.table().version().await.unwrap(), version, "no new table version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_text_reembeds_only_that_doc() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    let index = open(root.path(), embedder.clone()).await;
    let mut docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();

    docs[2].text = "Has a grey cat called Miso and a parrot called Kiwi.".into();
    let before = embedder.embedded();
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: 1, upserted: 1, deleted: 0, unchanged: docs.len() - 1 });
    assert_eq!(embedder.embedded() - before, 1);
    let hits = index.search("parrot Kiwi", &opts(3)).await.unwrap();
    assert_eq!(hits[0].key, "m-cat");
    assert!(hits[0].text.contains("parrot"));
    assert_eq!(index.len().await.unwrap(), docs.len());

    // A change that leaves the text alone keeps the stored vector.
    let old = index.vectors(&["m-cat".into()]).await.unwrap();
    docs[2].pinned = true;
    docs[2].sources.push("f-9".into());
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: 0, upserted: 1, deleted: 0, unchanged: docs.len() - 1 });
    assert_eq!(index.vectors(&["m-cat".into()]).await.unwrap(), old);
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_doc_disappears() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let mut docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    docs.retain(|d| d.key != "m-coffee");
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: 0, upserted: 0, deleted: 1, unchanged: docs.len() });
    let hits = index.search("black coffee sugar", &opts(20)).await.unwrap();
    assert!(!keys(&hits).contains(&"m-coffee"), "{hits:#?}");
    assert!(!index.digest().await.unwrap().contains_key("m-coffee"));
    assert!(index.lexical("coffee", &[], 5).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_paths_only_touches_those_paths() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();

    // The file of 2026-11-21 now holds f-3 (changed) and f-5 (new); f-4 is gone from it.
    let file = "archive/2026-11-21.md".to_string();
    let mut changed = fact("f-3", "The cat Miso needs a vet check-up on December 3rd.", "2026-11-21");
    changed.sources = vec![];
    let new = fact("f-5", "Ordered a rain jacket for cycling.", "2026-11-21");
    let stats = index.sync(&[changed.clone(), new.clone()], Scope::Paths(vec![file]), None).await.unwrap();
    assert_eq!(stats, SyncStats { embedded: 2, upserted: 2, deleted: 1, unchanged: 0 });

    let mut expected: Vec<Doc> = docs.into_iter().filter(|d| !["f-3", "f-4"].contains(&d.key.as_str())).collect();
    expected.extend([changed, new]);
    assert_eq!(index.digest().await.unwrap(), expected_digest(&expected), "rows of other files are untouched");

    // An empty scope touches nothing.
    let stats = index.sync(&[], Scope::Paths(vec![]), None).await.unwrap();
    assert_eq!(stats, SyncStats::default());
    assert_eq!(index.len().await.unwrap(), expected.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_of_dated_and_history_filters() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    let query = "works at Google";

    // Now: the current entry, not the old version.
    let hits = index.search(query, &opts(20)).await.unwrap();
    assert!(keys(&hits).contains(&"m-job") && !keys(&hits).contains(&"m-job@1"), "{:?}", keys(&hits));

    // Before the change: the old version, not the current entry.
    let before = SearchOpts { as_of: Some(day("2026-03-01")), ..opts(20) };
    let hits = index.search(query, &before).await.unwrap();
    assert_eq!(hits[0].key, "m-job@1", "{hits:#?}");
    assert_eq!(hits[0].text, "Works at Google as a site reliability engineer.");
    assert_eq!(hits[0].valid_until, Some(day("2026-05-30")));
    assert!(!keys(&hits).contains(&"m-job"));
    for hit in &hits {
        assert!(hit.valid_from <= day("2026-03-01"), "{hit:?}");
        assert!(hit.valid_until.is_none_or(|u| u > day("2026-03-01")), "{hit:?}");
    }
    assert!(!keys(&hits).contains(&"f-1"), "facts from later are not yet known");

    // On the day of the change the new version is current.
    let after = SearchOpts { as_of: Some(day("2026-05-30")), ..opts(20) };
    let hits = index.search(query, &after).await.unwrap();
    assert_eq!(hits[0].key, "m-job", "{hits:#?}");
    assert!(!keys(&hits).contains(&"m-job@1"));

    // history: both versions.
    let all = SearchOpts { history: true, ..opts(20) };
    let hits = index.search(query, &all).await.unwrap();
    assert!(keys(&hits).contains(&"m-job") && keys(&hits).contains(&"m-job@1"), "{:?}", keys(&hits));

    // Dated in November: only rows whose day falls in it, however near the others are.
    let november = SearchOpts { dated: Some((day("2026-11-01"), day("2026-11-30"))), ..opts(20) };
    let hits = index.search(query, &november).await.unwrap();
    let dated = |d: NaiveDate| d >= day("2026-11-01") && d <= day("2026-11-30");
    assert!(!hits.is_empty() && hits.iter().all(|h| dated(h.valid_from)), "{hits:#?}");
    let all = docs.iter().filter(|d| dated(d.valid_from) && d.kind != DocKind::History).count();
    assert_eq!(hits.len(), all, "every row of the month, by either leg");

    // Explicit kinds.
    let facts = SearchOpts { kinds: Some(vec![DocKind::Fact]), ..opts(20) };
    let hits = index.search("cat Miso", &facts).await.unwrap();
    assert!(!hits.is_empty() && hits.iter().all(|h| h.kind == DocKind::Fact), "{hits:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_and_resync_give_identical_rankings() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    let queries =
        ["cat", "bike river", "Google", "coffee", "Porto sister chemistry", "learning", "nothing matches zzz"];
    let search_opts = SearchOpts { history: true, recency_weight: 0.1, ..opts(6) };
    let mut before = Vec::new();
    for q in queries {
        before.push(index.search(q, &search_opts).await.unwrap());
    }

    index.clear().await.unwrap();
    assert!(index.is_empty().await.unwrap());
    assert!(has_primary_key(&index.table()).await.unwrap(), "the recreated table declares its key");
    assert!(index.search("cat", &search_opts).await.unwrap().is_empty());
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats.upserted, docs.len());
    for (q, old) in queries.iter().zip(&before) {
        let new = index.search(q, &search_opts).await.unwrap();
        assert_eq!(keys(&new), keys(old), "query {q:?}");
        for (a, b) in new.iter().zip(old) {
            assert!((a.score - b.score).abs() < 1e-9, "query {q:?}: {a:?} vs {b:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedder_change_drops_and_rebuilds() {
    let root = tempfile::tempdir().unwrap();
    let docs = corpus();
    {
        let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
        index.sync(&docs, Scope::All, None).await.unwrap();
    }
    // Same embedder: the rows stay.
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    assert_eq!(index.len().await.unwrap(), docs.len());
    drop(index);

    // Another embedder (and dimension): dropped, and the next sync embeds everything.
    let other = BagOfWords::new("bow:v2:32", 32);
    let index = open(root.path(), other.clone()).await;
    assert_eq!(index.len().await.unwrap(), 0);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(index_dir(root.path()).join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["embedder"], "bow:v2:32");
    assert_eq!(meta["dim"], 32);
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats.embedded, docs.len());
    assert_eq!(other.embedded(), docs.len());
    assert_eq!(index.search("Lisbon", &opts(1)).await.unwrap()[0].key, "m-lisbon");
    assert_eq!(index.vectors(&["m-cat".into()]).await.unwrap()["m-cat"].len(), 32);

    // A handle opened before another process switched embedders notices at its next write.
    let old = open(root.path(), BagOfWords::new("bow:v2:32", 32)).await;
    let switched = open(root.path(), BagOfWords::new("bow:v3:32", 32)).await;
    assert_eq!(switched.len().await.unwrap(), 0);
    let stats = old.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats.embedded, docs.len());
    assert_eq!(old.digest().await.unwrap(), expected_digest(&docs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_an_older_row_layout_is_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let docs = corpus();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    open(root.path(), embedder.clone()).await.sync(&docs, Scope::All, None).await.unwrap();
    // The table as an earlier version of memfold left it: same embedder, older rows.
    let meta_path = index_dir(root.path()).join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["schema_version"] = (rows::SCHEMA_VERSION - 1).into();
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();

    let index = open(root.path(), embedder).await;
    assert_eq!(index.len().await.unwrap(), 0, "rows of another layout are dropped, not misread");
    index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));
    let hits = index.search("Lisbon flat", &opts(1)).await.unwrap();
    assert_eq!((hits[0].key.as_str(), hits[0].sources.as_slice()), ("m-lisbon", ["f-m-lisbon".to_string()].as_slice()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_matches_content_hash_and_repairs_duplicates() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    assert!(has_primary_key(&index.table()).await.unwrap());
    let docs = corpus();
    assert!(index.digest().await.unwrap().is_empty());
    index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));

    // A key stored twice (as a racing writer without the lock could leave it) shows in the
    // digest and is repaired by the next sync.
    let schema = rows::schema(64);
    let dup = &docs[0];
    let batch = rows::batch(&schema, &[dup], &[Index::content_hash(dup)], &[vec![0.125; 64]]).unwrap();
    index.table().add(batch).execute().await.unwrap();
    assert_eq!(index.digest().await.unwrap()[&dup.key], "duplicated:2");
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(stats.upserted, 1);
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));
    assert_eq!(index.len().await.unwrap(), docs.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handles_writing_under_the_lock_do_not_duplicate_keys() {
    let root = tempfile::tempdir().unwrap();
    let a = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let b = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let base = corpus();
    for round in 0..4 {
        // Both writers upsert the same keys with different texts at the same time.
        let mut docs_a = base.clone();
        let mut docs_b = base.clone();
        for d in &mut docs_a {
            d.text = format!("{} (round {round}, writer a)", d.text);
        }
        for d in &mut docs_b {
            d.text = format!("{} (round {round}, writer b)", d.text);
        }
        docs_b.push(fact(&format!("f-b{round}"), "Only writer b knows this.", "2026-11-21"));
        let (ra, rb) = tokio::join!(a.sync(&docs_a, Scope::All, None), b.sync(&docs_b, Scope::All, None));
        ra.unwrap();
        rb.unwrap();
        let digest = a.digest().await.unwrap();
        assert!(digest.values().all(|h| !h.starts_with("duplicated")), "round {round}: {digest:?}");
        let rows = a.len().await.unwrap();
        assert_eq!(rows, digest.len(), "round {round}: one row per key");
        // Whoever wrote last wrote everything: the index equals one writer's docs.
        assert!(digest == expected_digest(&docs_a) || digest == expected_digest(&docs_b), "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_query_or_empty_index_gives_no_hits() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    let index = open(root.path(), embedder.clone()).await;
    assert!(index.search("anything at all", &opts(5)).await.unwrap().is_empty());
    assert!(index.search("", &opts(5)).await.unwrap().is_empty());
    assert!(index.lexical("anything", &[], 5).await.unwrap().is_empty());
    assert!(index.nearest(&embedder.vector("anything"), &[], 5, &[]).await.unwrap().is_empty());
    assert!(index.vectors(&["m-cat".into()]).await.unwrap().is_empty());
    index.sync(&corpus(), Scope::All, None).await.unwrap();
    assert!(index.search("   ", &opts(5)).await.unwrap().is_empty());
    assert!(index.search("cat", &SearchOpts { k: 0, ..opts(5) }).await.unwrap().is_empty());
    // Emptied again by a sync: still no error.
    index.sync(&[], Scope::All, None).await.unwrap();
    assert!(index.search("cat", &opts(5)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nearest_lexical_and_vectors() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:64", 64);
    let index = open(root.path(), embedder.clone()).await;
    let docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();

    let cat = &docs[2];
    let near = index.nearest(&embedder.vector(&cat.text), &[DocKind::Entry], 3, &[]).await.unwrap();
    assert_eq!(near[0].0, "m-cat");
    assert!((near[0].1 - 1.0).abs() < 1e-4, "{near:?}");
    assert!(near.windows(2).all(|w| w[0].1 >= w[1].1));
    let entries: HashSet<&str> = docs.iter().filter(|d| d.kind == DocKind::Entry).map(|d| d.key.as_str()).collect();
    assert!(near.iter().all(|(k, _)| entries.contains(k.as_str())), "{near:?}");

    let near = index.nearest(&embedder.vector(&cat.text), &[], 3, &["m-cat".into()]).await.unwrap();
    assert!(near.iter().all(|(k, _)| k != "m-cat"));
    assert_eq!(near.len(), 3);
    assert!(matches!(index.nearest(&[1.0; 3], &[], 3, &[]).await, Err(IndexError::Dimension { expected: 64, got: 3 })));

    let lex = index.lexical("Miso", &[DocKind::Fact], 5).await.unwrap();
    assert_eq!(lex.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["f-3"]);
    let lex = index.lexical("Miso", &[], 5).await.unwrap();
    assert_eq!(lex.len(), 2, "{lex:?}");
    assert!(lex[0].1 >= lex[1].1);

    let stored = index.vectors(&["m-cat".into(), "f-1".into(), "missing".into()]).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored["m-cat"], embedder.vector(&cat.text));
}

/// Many docs over a small ANN threshold: the IVF-SQ index is built, and kind and date
/// filters still hold with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ann_index_past_the_threshold_keeps_filters() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:32", 32);
    let index = open_past_ann(root.path(), embedder.clone()).await;
    let words = ["apple", "river", "train", "music", "garden", "winter", "paper", "coffee", "violin", "harbor"];
    let mut docs = Vec::new();
    for i in 0..400usize {
        let text = format!("note {i} about {} and {} {}", words[i % 10], words[(i / 10) % 10], words[(i * 7) % 10]);
        let doc = match i % 4 {
            0 => fact(&format!("f-{i}"), &text, "2026-11-20"),
            1 => history(&format!("m-{i}"), 1, &text, "2025-01-01", "2026-01-01"),
            _ => entry(&format!("m-{i}"), &text, "2026-02-01"),
        };
        docs.push(doc);
    }
    index.sync(&docs, Scope::All, None).await.unwrap();
    let indices = index.table().list_indices().await.unwrap();
    assert!(indices.iter().any(|i| i.columns == [VECTOR]), "{indices:?}");
    // A filtered vector query runs on the ANN index with the filter applied before it (a
    // prefilter), answered by the bitmap index on `kind` rather than a scan of every row.
    let plan = index
        .table()
        .query()
        .nearest_to(embedder.vector("apple").as_slice())
        .unwrap()
        .column(VECTOR)
        .distance_type(DistanceType::Cosine)
        .only_if("kind IN ('history')")
        .explain_plan(true)
        .await
        .unwrap();
    assert!(
        plan.contains("ANNSubIndex") && plan.contains("ScalarIndexQuery: query=[kind = history]@kind_idx"),
        "{plan}"
    );
    for column in ["kind", "valid_from", "valid_until"] {
        assert!(indices.iter().any(|i| i.columns == [column]), "no index on {column}: {indices:?}");
    }
    let meta = meta::read(&index_dir(root.path())).await.unwrap().unwrap();
    assert_eq!(meta.ann_trained_rows, Some(400));

    // Similarities keep the flat scale (1 - cosine distance) with the ANN index.
    let probe = &docs[6];
    let near = index.nearest(&embedder.vector(&probe.text), &[], 3, &[]).await.unwrap();
    assert_eq!(near[0].0, probe.key, "{near:?}");
    assert!((near[0].1 - 1.0).abs() < 0.05, "{near:?}");
    let ann = near[1].1;
    let exact: f32 = embedder
        .vector(&probe.text)
        .iter()
        .zip(embedder.vector(&docs.iter().find(|d| d.key == near[1].0).unwrap().text))
        .map(|(a, b)| a * b)
        .sum();
    assert!((ann - exact).abs() < 0.05, "ann {ann} vs exact {exact}");

    let near = index.nearest(&embedder.vector("apple river"), &[DocKind::History], 10, &[]).await.unwrap();
    assert_eq!(near.len(), 10);
    assert!(near.iter().all(|(k, _)| k.contains('@')), "{near:?}");
    let hits = index.search("apple river", &SearchOpts { as_of: Some(day("2025-06-01")), ..opts(10) }).await.unwrap();
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.kind == DocKind::History), "{hits:#?}");
    let hits = index.search("violin harbor", &opts(10)).await.unwrap();
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|h| h.kind != DocKind::History));

    // Growth below doubling folds rows in without retraining; the new rows are found.
    let mut more = docs.clone();
    more.push(entry("m-new", "a completely distinct xylophone quokka", "2026-11-01"));
    let stats = index.sync(&more, Scope::All, None).await.unwrap();
    assert_eq!(stats.upserted, 1);
    assert_eq!(meta::read(&index_dir(root.path())).await.unwrap().unwrap().ann_trained_rows, Some(400));
    assert_eq!(index.search("xylophone quokka", &opts(3)).await.unwrap()[0].key, "m-new");
}

/// An index built by an older memfold (IVF-HNSW-SQ) is replaced by the IVF-SQ one at the next
/// sync, even with no row changed, and search still finds what it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vector_index_of_another_kind_is_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let (index, docs) = small_ann_index(root.path()).await;
    let kind = |indices: &[lancedb::index::IndexConfig]| {
        indices.iter().find(|i| i.columns == [VECTOR]).map(|i| i.index_type.clone())
    };
    assert_eq!(kind(&index.table().list_indices().await.unwrap()), Some(IndexType::IvfSq));
    let builder = lancedb::index::vector::IvfHnswSqIndexBuilder::default().distance_type(DistanceType::Cosine);
    index
        .table()
        .create_index(&[VECTOR], LanceIndex::IvfHnswSq(builder))
        .name(VECTOR_INDEX.to_string())
        .replace(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(kind(&index.table().list_indices().await.unwrap()), Some(IndexType::IvfHnswSq));
    let stats = index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!((stats.upserted, stats.deleted), (0, 0));
    assert_eq!(kind(&index.table().list_indices().await.unwrap()), Some(IndexType::IvfSq));
    assert_eq!(index.search("note 7 about", &opts(3)).await.unwrap()[0].key, "m-7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_waits_for_the_writer_lock() {
    let root = tempfile::tempdir().unwrap();
    let index = Arc::new(open(root.path(), BagOfWords::new("bow:v1:64", 64)).await);
    let lock_path = root.path().join(".memfold").join("index.lock");
    let held = writer_lock::acquire(&lock_path).await.unwrap();
    assert!(memfold_store::sys::lock::holder(&lock_path).is_some());

    let writer = Arc::clone(&index);
    let sync = tokio::spawn(async move { writer.sync(&corpus(), Scope::All, None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!sync.is_finished(), "sync ran while another writer held the lock");
    assert!(index.is_empty().await.unwrap());
    let clear = {
        let writer = Arc::clone(&index);
        tokio::spawn(async move { writer.clear().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!clear.is_finished(), "clear ran while another writer held the lock");

    drop(held);
    sync.await.unwrap().unwrap();
    clear.await.unwrap().unwrap();
    assert!(memfold_store::sys::lock::holder(&lock_path).is_none(), "released after the writes");
}

/// Many small syncs: new rows are folded into the full-text index once they pile up, and the
/// table is compacted once fragments pile up; search keeps working throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_syncs_fold_rows_into_indices_and_compact() {
    let root = tempfile::tempdir().unwrap();
    let tuning = IndexTuning { index_lag_rows: 3, max_fragments: 6, ..IndexTuning::default() };
    let index = Index::open_with(&index_dir(root.path()), BagOfWords::new("bow:v1:64", 64), tuning).await.unwrap();
    let mut docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    let mut max_fragments = 0;
    let mut max_lag = 0;
    for i in 0..12 {
        docs.push(fact(&format!("f-x{i}"), &format!("Walked the dog number {i} along the harbour."), "2026-11-21"));
        index.sync(&docs, Scope::All, None).await.unwrap();
        let table = index.table();
        let stats = table.stats().await.unwrap();
        max_fragments = max_fragments.max(stats.fragment_stats.num_fragments);
        let lag = table.index_stats(FTS_INDEX).await.unwrap().unwrap().num_unindexed_rows;
        max_lag = max_lag.max(lag);
        let hits = index.search(&format!("dog number {i}"), &opts(3)).await.unwrap();
        assert_eq!(hits[0].key, format!("f-x{i}"), "{hits:#?}");
    }
    assert!(max_fragments <= 6, "compacted once past the limit: {max_fragments}");
    assert!(max_lag <= 3, "rows folded into the full-text index once past the limit: {max_lag}");
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));
}

/// Rows folded into the ANN index one small sync at a time: each fold adds a delta segment,
/// and the deltas are merged before they pile up, so searches visit a bounded number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ann_delta_segments_stay_bounded() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:32", 32);
    let tuning = IndexTuning {
        ann_min_rows: 300,
        index_lag_rows: 2,
        max_index_deltas: 2,
        max_fragments: 1_000,
        ..IndexTuning::default()
    };
    let index = Index::open_with(&index_dir(root.path()), embedder, tuning).await.unwrap();
    let words = ["apple", "river", "train", "music", "garden", "winter", "paper", "coffee", "violin", "harbor"];
    let mut docs: Vec<Doc> = (0..320usize)
        .map(|i| {
            entry(
                &format!("m-{i}"),
                &format!("note {i} about {} {}", words[i % 10], words[(i / 10) % 10]),
                "2026-02-01",
            )
        })
        .collect();
    index.sync(&docs, Scope::All, None).await.unwrap();
    let mut most = 0;
    for round in 0..8 {
        for j in 0..3 {
            docs.push(fact(
                &format!("f-{round}-{j}"),
                &format!("round {round} item {j} about a lighthouse"),
                "2026-11-21",
            ));
        }
        index.sync(&docs, Scope::All, None).await.unwrap();
        let stats = index.table().index_stats(VECTOR_INDEX).await.unwrap().unwrap();
        assert_eq!(stats.num_unindexed_rows, 0, "round {round}: folded at once past the lag");
        most = most.max(stats.num_indices.unwrap_or(1) as usize);
    }
    assert!(most <= 3, "a base segment and at most two deltas, saw {most}");
    let hits = index.search("round 7 item 2 lighthouse", &opts(3)).await.unwrap();
    assert_eq!(hits[0].key, "f-7-2", "{hits:#?}");
}

/// Rows of equal score (the same text: same vector, same BM25) are cut by key, not where lance
/// stops reading: written in reverse key order over several syncs, more of them than a leg
/// fetches, the search keeps the smallest keys every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_are_cut_by_key_whatever_order_the_rows_were_written_in() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let mut docs = corpus();
    for batch in (0..3).rev() {
        for i in (batch * 20..batch * 20 + 20).rev() {
            docs.push(fact(&format!("f-tie-{i:02}"), "Feeds the neighbour's goldfish on Sundays.", "2026-11-20"));
        }
        index.sync(&docs, Scope::All, None).await.unwrap();
    }
    let want = ["f-tie-00", "f-tie-01", "f-tie-02"];
    for _ in 0..5 {
        let hits = index.search("goldfish Sundays", &opts(3)).await.unwrap();
        assert_eq!(keys(&hits), want, "{hits:#?}");
        let lexical = index.lexical("goldfish", &[], 3).await.unwrap();
        assert_eq!(lexical.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), want);
        let vector = index.embedder().embed(&["goldfish on Sundays".into()]).await.unwrap().remove(0);
        let nearest = index.nearest(&vector, &[DocKind::Fact], 3, &["f-tie-01".into()]).await.unwrap();
        assert_eq!(nearest.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["f-tie-00", "f-tie-02", "f-tie-03"]);
    }
}

/// Rows tied at the text leg's cut: read until every tied row is seen when ties must be exact
/// (below the ANN threshold), else cut among the rows lance returned first: with more equal rows
/// than the leg fetches, still only rows of the best score, in key order among themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_past_the_ann_threshold_are_cut_among_the_rows_returned() {
    let root = tempfile::tempdir().unwrap();
    let index = open_past_ann(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let mut docs = corpus();
    for i in 0..320 {
        docs.push(fact(&format!("f-{i:03}"), &format!("Note {i} about the weather."), "2026-11-20"));
    }
    for i in (0..80).rev() {
        docs.push(fact(&format!("f-tie-{i:02}"), "Feeds the neighbour's goldfish on Sundays.", "2026-11-20"));
    }
    index.sync(&docs, Scope::All, None).await.unwrap();
    assert!(meta::read(&index_dir(root.path())).await.unwrap().unwrap().ann_trained_rows.is_some());
    let table = index.table();
    let leg = |exact_ties| query::text_hits(&table, "goldfish Sundays", None, 5, exact_ties);
    let exact: Vec<String> = leg(true).await.unwrap().into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(exact, ["f-tie-00", "f-tie-01", "f-tie-02", "f-tie-03", "f-tie-04"]);
    let got: Vec<String> = leg(false).await.unwrap().into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got.iter().all(|k| k.starts_with("f-tie-")), "{got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
}

/// BM25 scores are those of the rows the table holds: an index that saw rows deleted,
/// rewritten and added since its full-text index was built scores every query exactly as one
/// built from those rows at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_scores_do_not_depend_on_deleted_or_unindexed_rows() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let history = open(a.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let mut docs = corpus();
    for i in 0..40 {
        docs.push(fact(&format!("f-old-{i}"), &format!("Old note {i} about the cat and the bike."), "2026-01-01"));
    }
    history.sync(&docs, Scope::All, None).await.unwrap();
    // Delete a few notes (too few to compact the table), rewrite an entry, add a fact: the kind
    // of change a pass makes.
    docs.retain(|d| !["f-old-1", "f-old-2", "f-old-3", "f-old-4"].contains(&d.key.as_str()));
    docs[2].text = "Has a grey cat called Miso who sleeps on the bike seat.".into();
    docs.push(fact("f-new", "Took the cat to the vet by bike.", "2026-11-22"));
    history.sync(&docs, Scope::All, None).await.unwrap();

    let fresh = open(b.path(), BagOfWords::new("bow:v1:64", 64)).await;
    fresh.sync(&docs, Scope::All, None).await.unwrap();
    for q in ["cat", "bike", "cat bike", "Miso", "vet", "Lisbon flat", "coffee noon"] {
        let (x, y) = (history.lexical(q, &[], 10).await.unwrap(), fresh.lexical(q, &[], 10).await.unwrap());
        assert!(!x.is_empty(), "{q}");
        assert_eq!(x, y, "{q}");
    }
    let meta = meta::read(&index_dir(a.path())).await.unwrap().unwrap();
    assert!(!meta.text_stale, "the full-text index was rebuilt after the deletes");
}

/// Files under the table's directory `sub` (`_versions`, `data`) with extension `ext`.
fn files_in(root: &Path, sub: &str, ext: &str) -> usize {
    let dir = index_dir(root).join("docs.lance").join(sub);
    std::fs::read_dir(dir)
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == ext)).count())
}

/// Every write leaves only the latest table version on disk: the versions it made old and the
/// data files only they used are removed at once, not after a week.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_leave_only_the_latest_version_on_disk() {
    let root = tempfile::tempdir().unwrap();
    let tuning = IndexTuning { index_lag_rows: 3, max_fragments: 4, ..IndexTuning::default() };
    let index = Index::open_with(&index_dir(root.path()), BagOfWords::new("bow:v1:64", 64), tuning).await.unwrap();
    let mut docs = corpus();
    index.sync(&docs, Scope::All, None).await.unwrap();
    for i in 0..20 {
        docs.push(fact(&format!("f-x{i}"), &format!("Walked the dog number {i} along the harbour."), "2026-11-21"));
        if i % 3 == 0 {
            docs[0].text = format!("Works at Acme as engineer number {i}.");
        }
        if i % 5 == 4 {
            docs.remove(1);
        }
        index.sync(&docs, Scope::All, None).await.unwrap();
        assert_eq!(files_in(root.path(), "_versions", "manifest"), 1, "one version after write {i}");
        let fragments = index.table().stats().await.unwrap().fragment_stats.num_fragments;
        assert_eq!(files_in(root.path(), "data", "lance"), fragments, "no data file of an old version is left");
    }
    assert_eq!(index.digest().await.unwrap(), expected_digest(&docs));
    let hits = index.search("dog number 19", &opts(3)).await.unwrap();
    assert_eq!(hits[0].key, "f-x19");
}

/// The compaction threshold grows with the table and stays within its bounds.
#[test]
fn compaction_waits_longer_on_larger_tables() {
    let t = IndexTuning::default();
    assert_eq!(t.compact_after(0), t.max_fragments);
    assert_eq!(t.compact_after(10_000), 10);
    assert_eq!(t.compact_after(50_000), 50);
    assert_eq!(t.compact_after(10_000_000), t.max_fragments_cap);
}

/// A recording sync leaves its record; a path-scoped one merges its paths into it when the
/// settling files are the ones recorded and drops it otherwise; any other write drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_recording_syncs_leave_a_record_of_the_sources() {
    use memfold_store::sources::{Seen, Sources};
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let seen = |hash: &str| Seen { size: 1, mtime_ns: 0, inode: 1, hash: hash.into(), seen_ns: 0 };
    let record =
        |pairs: &[(&str, &str)]| Sources { files: pairs.iter().map(|(p, h)| (p.to_string(), seen(h))).collect() };
    let docs = corpus();
    let all = record(&[("consolidated/memory.md", "m1"), ("archive/2026-11-20.md", "a1")]);
    index.sync_from(&docs, Scope::All, None, &all).await.unwrap();
    assert_eq!(index.sources().await, Some(all.clone()));

    // A day file changed alone: its entry is merged in.
    let newer = record(&[("consolidated/memory.md", "m1"), ("archive/2026-11-20.md", "a2")]);
    let day = vec!["archive/2026-11-20.md".to_string()];
    index.sync_from(&docs, Scope::Paths(day.clone()), None, &newer).await.unwrap();
    assert_eq!(index.sources().await, Some(newer.clone()));

    // memory.md is not what the record says: the record cannot be merged, and is dropped.
    let other = record(&[("consolidated/memory.md", "m2"), ("archive/2026-11-20.md", "a3")]);
    index.sync_from(&docs, Scope::Paths(day), None, &other).await.unwrap();
    assert_eq!(index.sources().await, None);

    index.sync_from(&docs, Scope::All, None, &all).await.unwrap();
    index.sync(&docs, Scope::All, None).await.unwrap();
    assert_eq!(index.sources().await, None, "a sync that records nothing drops the record");
    index.sync_from(&docs, Scope::All, None, &all).await.unwrap();
    index.clear().await.unwrap();
    assert_eq!(index.sources().await, None, "clear drops it");
}

/// Words the single-row-write tests vary their texts with.
const WORDS: [&str; 10] =
    ["apple", "river", "train", "music", "garden", "winter", "paper", "coffee", "violin", "harbor"];

/// An index past a small ANN threshold with 400 entries synced, tuned so that, as with the
/// defaults, compaction comes due (every few writes) long before a fold does; and its docs.
async fn small_ann_index(root: &Path) -> (Index, Vec<Doc>) {
    let tuning = IndexTuning { ann_min_rows: 300, index_lag_rows: 20, max_fragments: 4, ..IndexTuning::default() };
    let index = Index::open_with(&index_dir(root), BagOfWords::new("bow:v1:32", 32), tuning).await.unwrap();
    let docs: Vec<Doc> = (0..400usize)
        .map(|i| {
            entry(
                &format!("m-{i}"),
                &format!("note {i} about {} {}", WORDS[i % 10], WORDS[(i / 10) % 10]),
                "2026-02-01",
            )
        })
        .collect();
    index.sync(&docs, Scope::All, None).await.unwrap();
    (index, docs)
}

/// Many single-row writes, as a daemon answering an agent makes them: every index keeps a
/// bounded number of segments, so what a search reads does not grow with the writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_segments_stay_bounded_under_single_row_writes() {
    let root = tempfile::tempdir().unwrap();
    let (index, mut docs) = small_ann_index(root.path()).await;
    let mut most: BTreeMap<String, usize> = BTreeMap::new();
    let mut most_fragments = 0;
    for i in 0..60 {
        docs.push(fact(&format!("f-{i}"), &format!("walked past the {} at {i}", WORDS[i % 10]), "2026-03-01"));
        index.sync(&docs, Scope::All, None).await.unwrap();
        let table = index.table();
        most_fragments = most_fragments.max(table.stats().await.unwrap().fragment_stats.num_fragments);
        for ix in table.list_indices().await.unwrap() {
            let segments = table.index_stats(&ix.name).await.unwrap().and_then(|s| s.num_indices).unwrap_or(1) as usize;
            let seen = most.entry(ix.name.clone()).or_default();
            *seen = (*seen).max(segments);
        }
    }
    assert!(most_fragments <= 8, "fragments reached {most_fragments}");
    let bound = IndexTuning::default().max_index_deltas + 2;
    for (name, n) in &most {
        assert!(*n <= bound, "{name} reached {n} segments: {most:?}");
    }
    let hits = index.search("walked past the river at 51", &opts(3)).await.unwrap();
    assert_eq!(hits[0].key, "f-51");
}

/// What the small writes of a day leave outside the indices (unindexed rows, vector deltas, a
/// stale full-text index, fragments of single rows) is folded back by `settle`, which changes
/// no row and no answer; a second settle finds nothing to do and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_folds_small_writes_back_into_the_indices() {
    let root = tempfile::tempdir().unwrap();
    let (index, mut docs) = small_ann_index(root.path()).await;
    for i in 0..50 {
        docs.push(fact(&format!("f-{i}"), &format!("walked past the {} at {i}", WORDS[i % 10]), "2026-03-01"));
        if i % 7 == 0 {
            docs.remove(i); // a rewrite of memory.md drops an entry now and then
        }
        index.sync(&docs, Scope::All, None).await.unwrap();
    }
    let unsettled = |index: &Index| {
        let table = index.table();
        async move {
            let mut outside = 0;
            let mut segments = 0;
            for ix in table.list_indices().await.unwrap() {
                let s = table.index_stats(&ix.name).await.unwrap().unwrap();
                outside += s.num_unindexed_rows;
                if ix.name == VECTOR_INDEX {
                    segments = s.num_indices.unwrap_or(1) as usize;
                }
            }
            (outside, segments)
        }
    };
    let (outside, segments) = unsettled(&index).await;
    assert!(outside > 0 && segments > 1, "the writes left work to settle: {outside} rows, {segments} segments");
    let digest = index.digest().await.unwrap();
    let queries = ["walked past the river at 43", "note 7 about garden", "violin harbor", "coffee"];
    let mut before = Vec::new();
    for q in queries {
        before.push(keys(&index.search(q, &opts(5)).await.unwrap()).iter().map(|k| k.to_string()).collect::<Vec<_>>());
    }

    let done = index.settle().await.unwrap();
    assert!(done.folded_rows > 0 && done.merged_segments == segments, "{done:?}");
    assert_eq!(unsettled(&index).await, (0, 1), "every row indexed, one vector segment");
    assert_eq!(index.digest().await.unwrap(), digest, "settling changes no row");
    let versions = files_in(root.path(), "_versions", "manifest");
    assert_eq!(versions, 1, "old versions removed");
    // The full-text index was stale (rows deleted); rebuilt, its statistics are the rows'
    // alone. The vector leg is exact enough here that the answers do not move.
    for (q, want) in queries.iter().zip(&before) {
        let got = index.search(q, &opts(5)).await.unwrap();
        assert_eq!(&keys(&got)[..1], &want[..1], "{q}");
    }
    let table = index.table();
    let version = table.version().await.unwrap();
    assert_eq!(index.settle().await.unwrap(), Settled::default(), "nothing left to settle");
    assert_eq!(index.table().version().await.unwrap(), version, "a settle with nothing to do writes nothing");
}

/// A memory of `n` docs of all three kinds with varied words, over the test's ANN threshold.
fn varied(n: usize) -> Vec<Doc> {
    let words = [
        "apple", "river", "train", "music", "garden", "winter", "paper", "coffee", "violin", "harbor", "salmon",
        "lantern", "copper", "meadow", "cousin", "dentist", "bicycle", "market",
    ];
    (0..n)
        .map(|i| {
            let text = format!(
                "{} {} near the {} with {}",
                words[i % 18],
                words[(i / 18) % 18],
                words[(i * 7 + 3) % 18],
                words[(i * 11 + 5) % 18]
            );
            match i % 4 {
                0 => fact(&format!("f-{i:03}"), &text, "2026-11-20"),
                1 => history(&format!("m-{i:03}"), 1, &text, "2025-01-01", "2026-01-01"),
                2 => entry(&format!("m-{i:03}"), &text, "2026-02-01"),
                _ => entry(&format!("m-{i:03}"), &text, "2026-03-01"),
            }
        })
        .collect()
}

/// An index past the ANN threshold over [`varied`]`(480)`, holding its rows: its temp dir,
/// embedder, docs and held rows.
async fn holding_varied() -> (tempfile::TempDir, Arc<BagOfWords>, Index, Vec<Doc>, Arc<held::Held>) {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:32", 32);
    let index = open_past_ann(root.path(), embedder.clone()).await;
    let docs = varied(480);
    index.sync(&docs, Scope::All, None).await.unwrap();
    let held = holding(&index).await;
    (root, embedder, index, docs, held)
}

/// A filter of the held-row tests: kinds, as of, dated between.
type Filter = (&'static [DocKind], Option<NaiveDate>, Option<(NaiveDate, NaiveDate)>);

/// The filters the held-row tests check: entries and facts (three rows in four of
/// [`varied`]), history rows (one in four), every kind as of 2025-06-01 (history rows only),
/// and entries and facts dated from March 2026 on (the facts and half the entries).
fn held_filters() -> [Filter; 4] {
    [
        (&[DocKind::Entry, DocKind::Fact], None, None),
        (&[DocKind::History], None, None),
        (&DocKind::ALL, Some(day("2025-06-01")), None),
        (&[DocKind::Entry, DocKind::Fact], None, Some((day("2026-03-01"), day("2026-12-31")))),
    ]
}

/// Whether `doc` passes a filter of the held-row tests.
fn passes(doc: &Doc, (kinds, as_of, dated): Filter) -> bool {
    kinds.contains(&doc.kind)
        && as_of.is_none_or(|day| doc.valid_from <= day && doc.valid_until.is_none_or(|u| u > day))
        && dated.is_none_or(|(first, last)| first <= doc.valid_from && doc.valid_from <= last)
}

/// Turn holding vectors on and wait until the latest version's are held.
async fn holding(index: &Index) -> Arc<held::Held> {
    index.hold_vectors();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(held) = index.held.current(&index.table()).await {
            return held;
        }
        assert!(Instant::now() < deadline, "the vectors were never held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The exact cosine distances of the `n` docs passing the filter nearest to `vector`, and the
/// distance of every doc by key.
fn brute_force(
    docs: &[Doc],
    embedder: &BagOfWords,
    vector: &[f32],
    filter: Filter,
    n: usize,
) -> (Vec<f32>, HashMap<String, f32>) {
    let all: HashMap<String, f32> = docs
        .iter()
        .filter(|d| passes(d, filter))
        .map(|d| (d.key.clone(), held::cosine_distance(vector, embedder.vector(&d.text))))
        .collect();
    let mut best: Vec<f32> = all.values().copied().collect();
    best.sort_by(f32::total_cmp);
    best.truncate(n);
    (best, all)
}

/// The 6 held rows nearest to `query` under the filter, checked against brute force: the
/// exact nearest (up to distances within 1e-4 of each other), each with its exact distance and
/// its doc's `valid_from`.
fn exact_nearest(
    held: &held::Held,
    docs: &[Doc],
    embedder: &BagOfWords,
    query: &str,
    filter: Filter,
) -> Vec<held::Near> {
    let vector = embedder.vector(query);
    let (kinds, as_of, dated) = filter;
    let got = held.nearest(&vector, &held::Looked::new(kinds, as_of, dated), 6);
    let (best, all) = brute_force(docs, embedder, &vector, filter, 6);
    assert_eq!(got.len(), best.len(), "{query} {filter:?}");
    for (row, want) in got.iter().zip(&best) {
        let exact = all.get(&row.key).unwrap_or_else(|| panic!("{} does not pass the filter", row.key));
        assert!((exact - want).abs() < 1e-4, "{query} {filter:?}: {} at {exact}, want {want}", row.key);
        assert!((row.distance as f32 - exact).abs() < 1e-4, "{}: {} vs {exact}", row.key, row.distance);
        let doc = docs.iter().find(|d| d.key == row.key).unwrap();
        assert_eq!(row.valid_from, doc.valid_from);
    }
    got
}

/// Held vectors answer the vector leg with the exact nearest rows (up to distances within
/// 1e-4 of each other), filters applied, where lance's ANN index only estimates them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_vectors_give_the_exact_nearest_rows() {
    let (_root, embedder, index, docs, held) = holding_varied().await;
    for query in ["apple river", "violin near the harbor", "winter coffee market", "cousin dentist bicycle salmon"] {
        let vector = embedder.vector(query);
        for filter in held_filters() {
            let got = exact_nearest(&held, &docs, &embedder, query, filter);
            if let (kinds, None, None) = filter {
                let near = index.nearest(&vector, kinds, 6, &[]).await.unwrap();
                assert_eq!(
                    near.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                    got.iter().map(|r| &r.key).collect::<Vec<_>>()
                );
            }
        }
    }
    let served = index.held.served();
    let hits = index.search("violin near the harbor", &opts(5)).await.unwrap();
    assert_eq!(hits.len(), 5);
    assert_eq!(index.held.served(), served + 1, "the search's vector leg scanned the held vectors");
    // Every hit is whole: the hits of rows the legs found among the held rows are the held
    // ones (words no doc has leave the text leg empty).
    assert!(index.lexical("zebra quokka", &[], 3).await.unwrap().is_empty());
    let only_held = index.search("zebra quokka", &opts(3)).await.unwrap();
    assert_eq!(only_held.len(), 3);
    for hit in hits.iter().chain(&only_held) {
        let doc = docs.iter().find(|d| d.key == hit.key).unwrap();
        assert_eq!((hit.text.as_str(), hit.kind, hit.valid_from), (doc.text.as_str(), doc.kind, doc.valid_from));
    }
}

/// Held vectors of an older table version are never used: after a write the search goes to
/// lance, and the new version's vectors are read once it has been the latest for a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_vectors_of_an_older_version_are_never_used() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:32", 32);
    let index = open_past_ann(root.path(), embedder.clone()).await;
    let mut docs = varied(400);
    docs.push(fact("f-lighthouse", "Painted the lighthouse keeper's boat.", "2026-11-21"));
    index.sync(&docs, Scope::All, None).await.unwrap();
    holding(&index).await;
    let lighthouse = SearchOpts { kinds: Some(vec![DocKind::Fact]), ..opts(3) };
    assert_eq!(keys(&index.search("lighthouse keeper boat", &lighthouse).await.unwrap())[0], "f-lighthouse");
    let served = index.held.served();
    assert_eq!(served, 1);

    docs.pop();
    index.sync(&docs, Scope::All, None).await.unwrap();
    for _ in 0..2 {
        let hits = index.search("lighthouse keeper boat", &lighthouse).await.unwrap();
        assert!(!keys(&hits).contains(&"f-lighthouse"), "{hits:#?}");
        assert_eq!(index.held.served(), served, "searched with the vectors of the version before the write");
    }
    // Seen for long enough, the new version's vectors are read and used.
    tokio::time::sleep(held::HOLD_AFTER_QUIET).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while index.held.served() == served {
        assert!(Instant::now() < deadline, "the new version's vectors were never held");
        let hits = index.search("lighthouse keeper boat", &lighthouse).await.unwrap();
        assert!(!keys(&hits).contains(&"f-lighthouse"), "{hits:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text leg over held rows finds what lance's filtered full-text search finds: the same
/// scores in the same order and, above the last score kept, the same rows; the filter applied
/// by the held rows, or given to lance when too few of the unfiltered rows pass it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_text_leg_finds_what_the_filtered_text_leg_finds() {
    let (_root, _, index, docs, held) = holding_varied().await;
    let table = index.table();
    // History rows (the only ones valid on 2025-06-01) are too few among the unfiltered best
    // for the held filter alone; with every kind and no date there is no filter at all.
    let filters = held_filters().into_iter().chain([(&DocKind::ALL[..], None, None)]);
    for query in ["apple river", "violin near the harbor", "winter coffee market dentist", "salmon"] {
        for looked @ (kinds, as_of, dated) in filters.clone() {
            let filter = rank::search_filter(kinds, as_of, dated);
            let n = 12;
            let got = query::held_text_rows(
                &table,
                &held,
                query,
                filter.as_deref(),
                &held::Looked::new(kinds, as_of, dated),
                n,
            )
            .await
            .unwrap()
            .expect("every row lance returned is held");
            let want = query::text_hits(&table, query, filter.as_deref(), n, false).await.unwrap();
            let label = format!("{query:?} {looked:?}");
            assert!(!want.is_empty(), "{label}");
            let scores = |rows: &[(String, f64)]| rows.iter().map(|(_, s)| *s).collect::<Vec<_>>();
            let got: Vec<(String, f64)> = got.into_iter().map(|(k, s, _)| (k, s)).collect();
            let want: Vec<(String, f64)> = want.into_iter().map(|(k, s, _)| (k, s)).collect();
            assert_eq!(scores(&got), scores(&want), "{label}");
            let last = want.last().unwrap().1;
            let above = |rows: &[(String, f64)]| {
                rows.iter().filter(|(_, s)| *s > last).map(|(k, _)| k.clone()).collect::<Vec<_>>()
            };
            assert_eq!(above(&got), above(&want), "{label}");
            for (key, _) in &got {
                let doc = docs.iter().find(|d| &d.key == key).unwrap();
                assert!(passes(doc, looked), "{label}: {key}");
            }
        }
    }
    // After a write the rows held are another version's: the held text leg declines.
    index.sync(&docs[..400], Scope::All, None).await.unwrap();
    let all = held::Looked::new(&DocKind::ALL, None, None);
    let after = query::held_text_rows(&index.table(), &held, "apple river", None, &all, 12).await;
    assert!(after.unwrap().is_none());
}

/// An index past the ANN threshold whose rows are held, after 30 small writes that leave a
/// settle something to fold.
async fn held_after_small_writes(root: &std::path::Path) -> Index {
    let (index, mut docs) = small_ann_index(root).await;
    holding(&index).await;
    for i in 0..30 {
        docs.push(fact(&format!("f-{i}"), &format!("walked past the {} at {i}", WORDS[i % 10]), "2026-03-01"));
        index.sync(&docs, Scope::All, None).await.unwrap();
    }
    index
}

/// A settle comes when writes have gone quiet (or as a daemon starts): the settled version's
/// rows are read at once, not after another [`held::HOLD_AFTER_QUIET`] of lance searches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_holds_the_settled_rows_at_once() {
    let root = tempfile::tempdir().unwrap();
    let index = held_after_small_writes(root.path()).await;
    let done = index.settle().await.unwrap();
    let settled = Instant::now();
    assert!(done.folded_rows > 0 || done.compacted, "the writes left work to settle: {done:?}");
    let latest = index.table().version().await.unwrap();
    while index.held.held_version() != Some(latest) {
        // Waiting for quiet, the rows would be read no sooner than HOLD_AFTER_QUIET after the
        // settle made its version.
        assert!(settled.elapsed() < held::HOLD_AFTER_QUIET / 2, "the settled version's rows were not read at once");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A daemon holds its rows before it answers (`Memory::warm_up`): when the settle before it
/// already started the read, `hold_vectors_now` waits for that read instead of returning with
/// nothing held (the first searches would then go to lance until it ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holding_now_waits_for_the_read_a_settle_started() {
    let root = tempfile::tempdir().unwrap();
    let index = held_after_small_writes(root.path()).await;
    index.settle().await.unwrap(); // starts reading the settled version's rows
    index.hold_vectors_now().await;
    let latest = index.table().version().await.unwrap();
    assert_eq!(index.held.held_version(), Some(latest), "the rows are held when it returns");
}

/// After this process writes, the new version's vectors are read once it has been quiet for
/// [`held::HOLD_AFTER_QUIET`], with no search asking for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_held_again_without_a_search() {
    let root = tempfile::tempdir().unwrap();
    let embedder = BagOfWords::new("bow:v1:32", 32);
    let index = open_past_ann(root.path(), embedder.clone()).await;
    let mut docs = varied(400);
    index.sync(&docs, Scope::All, None).await.unwrap();
    holding(&index).await;
    let before = index.held.held_version().unwrap();
    // Past any wait the first read started: what reads the next version is the write.
    tokio::time::sleep(2 * held::HOLD_AFTER_QUIET).await;
    let served = index.held.served();
    docs.push(fact("f-lighthouse", "Painted the lighthouse keeper's boat.", "2026-11-21"));
    index.sync(&docs, Scope::All, None).await.unwrap();
    let latest = index.table().version().await.unwrap();
    assert!(latest > before);
    let deadline = Instant::now() + Duration::from_secs(20);
    while index.held.held_version() != Some(latest) {
        assert!(Instant::now() < deadline, "the written version's vectors were never read");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(index.held.served(), served, "no search ran");
    let lighthouse = SearchOpts { kinds: Some(vec![DocKind::Fact]), ..opts(3) };
    assert_eq!(keys(&index.search("lighthouse keeper boat", &lighthouse).await.unwrap())[0], "f-lighthouse");
    assert_eq!(index.held.served(), served + 1, "the first search after the write scanned held vectors");
}

/// Rows this process appends are held on top of the rows read, as the new version, at once:
/// the first search after the write scans held vectors and finds the new rows by both legs,
/// and the held rows, old and new, still give the exact nearest rows of every doc.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_rows_are_held_at_once_and_searched_like_the_rest() {
    let (_root, embedder, index, mut docs, _) = holding_varied().await;
    let served = index.held.served();
    for (i, text) in ["Painted the lighthouse keeper's boat.", "Fed the lighthouse cat at dawn."].iter().enumerate() {
        docs.push(fact(&format!("f-new{i}"), text, "2026-11-21"));
        index.sync(&docs, Scope::All, None).await.unwrap();
        let latest = index.table().version().await.unwrap();
        assert_eq!(index.held.held_version(), Some(latest), "the appended rows are held at once");
    }
    let lighthouse = SearchOpts { kinds: Some(vec![DocKind::Fact]), ..opts(3) };
    assert_eq!(keys(&index.search("lighthouse keeper boat", &lighthouse).await.unwrap())[0], "f-new0");
    assert_eq!(index.held.served(), served + 1, "the first search after the writes scanned held vectors");
    let held = index.held.current(&index.table()).await.expect("held");
    for query in ["lighthouse cat", "apple river", "violin near the harbor"] {
        for filter in held_filters() {
            for row in exact_nearest(&held, &docs, &embedder, query, filter) {
                assert_eq!(held.hit(row.row).unwrap().key, row.key);
            }
        }
    }
    let all = held::Looked::new(&DocKind::ALL, None, None);
    let text = query::held_text_rows(&index.table(), &held, "lighthouse cat", None, &all, 12)
        .await
        .unwrap()
        .expect("every row lance returned is held, the appended ones too");
    assert_eq!(
        text.first().map(|(k, _, _)| k.as_str()),
        Some("f-new1"),
        "{:?}",
        text.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
}

/// Decay by use: of two rows equally similar to a query and equally old, the one recalled
/// more recently ranks first, an exempt one ranks as if used today, and a strong match still
/// beats both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recently_used_row_ranks_above_an_equal_unused_one() {
    let root = tempfile::tempdir().unwrap();
    let index = open(root.path(), BagOfWords::new("bow:v1:64", 64)).await;
    let docs = vec![
        entry("m-a", "Keeps the spare key under the blue flower pot.", "2025-01-10"),
        entry("m-b", "Keeps the spare key under the blue flower pot.", "2025-01-10"),
        entry("m-c", "Keeps the spare key under the blue flower pot.", "2025-01-10"),
        entry("m-d", "The bakery on the corner sells rye bread.", "2025-01-10"),
    ];
    index.sync(&docs, Scope::All, None).await.unwrap();
    let ranked = |uses: Option<UseDays>| {
        let opts =
            SearchOpts { uses: uses.map(std::sync::Arc::new), decay_weight: 0.1, today: day("2026-11-22"), ..opts(4) };
        let index = &index;
        async move {
            let hits = index.search("spare key flower pot", &opts).await.unwrap();
            keys(&hits).into_iter().map(str::to_string).collect::<Vec<_>>()
        }
    };
    let used = |list: &[(&str, &str)]| -> HashMap<String, i64> {
        list.iter()
            .map(|(key, when)| (key.to_string(), day(when).and_hms_opt(12, 0, 0).unwrap().and_utc().timestamp()))
            .collect()
    };
    assert_eq!(ranked(None).await[..3], ["m-a", "m-b", "m-c"], "without uses, ties go by key");
    let uses = UseDays { last: used(&[("m-c", "2026-10-01"), ("m-b", "2025-06-01")]), exempt: Default::default() };
    assert_eq!(ranked(Some(uses.clone())).await[..3], ["m-c", "m-b", "m-a"]);
    let pinned = UseDays { exempt: ["m-a".to_string()].into(), ..uses };
    assert_eq!(ranked(Some(pinned)).await[..3], ["m-a", "m-c", "m-b"]);
    // A strong match still wins: the unused bakery line is first for its own words.
    let recent = UseDays { last: used(&[("m-a", "2026-11-22")]), exempt: Default::default() };
    let bakery = SearchOpts { uses: Some(std::sync::Arc::new(recent)), decay_weight: 0.1, ..opts(4) };
    assert_eq!(keys(&index.search("rye bread bakery", &bakery).await.unwrap())[0], "m-d");
}
