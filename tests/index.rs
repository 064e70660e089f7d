//! The derived index against real files: rebuilt from nothing it answers the same; a fact
//! appended by hand is found after the watcher runs; a dead embedding endpoint loses nothing.

use std::path::Path;

mod common;
use common::{memfold, ok};
use std::time::{Duration, Instant};

use memfold::config::Config;
use memfold::corpus;
use memfold::files::Root;
use memfold::index::SearchOpts;
use memfold::watch::Watcher;

const QUERIES: &[&str] = &["tea", "where does she live", "dog", "job at a bank", "music", "allergy", "cello lessons"];

fn ranked(root: &Path) -> Vec<Vec<(String, String)>> {
    QUERIES
        .iter()
        .map(|q| {
            let hits = ok(memfold(root, &["search", "--json", "-k", "5", q], &[]));
            hits["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["id"].as_str().unwrap().to_string(), format!("{:.6}", h["score"].as_f64().unwrap())))
                .collect()
        })
        .collect()
}

#[test]
fn rm_rf_the_index_then_reindex_clear_gives_identical_rankings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    ok(memfold(root, &["init"], &[]));
    ok(memfold(
        root,
        &[
            "add",
            "--date",
            "2026-05-01",
            "Drinks green tea every morning",
            "Lives in Lisbon with her dog Rex",
            "Works at a bank",
        ],
        &[],
    ));
    ok(memfold(root, &["consolidate", "--force"], &[]));
    ok(memfold(root, &["add", "Takes cello lessons on Tuesdays", "Allergic to peanuts", "Listens to jazz music"], &[]));
    let before = ranked(root);
    assert!(before.iter().all(|hits| !hits.is_empty()));
    std::fs::remove_dir_all(root.join(".memfold/index")).unwrap();
    ok(memfold(root, &["reindex", "--clear"], &[]));
    assert_eq!(ranked(root), before);
    let verify = ok(memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["ok"], true, "{verify}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_appended_by_hand_is_found_after_the_watcher_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path().canonicalize().unwrap());
    root.init().unwrap();
    let config = Config { root: root.dir().to_path_buf(), ..Config::default() };
    let index = std::sync::Arc::new(corpus::open_index(&root, &config).await.unwrap());
    let mut watcher = Watcher::start(&root, Duration::from_millis(200)).unwrap();
    let (worker_root, worker_index) = (root.clone(), index.clone());
    let worker = tokio::spawn(async move {
        while watcher.next().await.is_some() {
            corpus::refresh(&worker_root, &worker_index).await.unwrap();
        }
    });
    let today = chrono::Local::now().date_naive();
    let path = root.archive_file(today);
    std::fs::write(&path, format!("# {today}\n\n- Keeps bees on the roof of the garage\n")).unwrap();

    let opts = SearchOpts::new(&config.search, today);
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let hits = index.search("bees on the roof", &opts).await.unwrap();
        if hits.first().is_some_and(|h| h.text.contains("bees")) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    worker.abort();
    assert!(found, "the watcher did not index the hand-written fact within 20 s");
}

#[test]
fn a_dead_embedding_endpoint_is_a_clear_error_and_loses_no_facts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    ok(memfold(root, &["init"], &[]));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let env = [
        ("MEMFOLD_EMBEDDING__PROVIDER", "openai"),
        ("MEMFOLD_EMBEDDING__BASE_URL", url.as_str()),
        ("MEMFOLD_EMBEDDING__MODEL", "some-embedder"),
        ("MEMFOLD_EMBEDDING__MAX_RETRIES", "1"),
        ("MEMFOLD_EMBEDDING__TIMEOUT_SECS", "2"),
    ];
    ok(memfold(root, &["add", "Speaks Dutch and Portuguese"], &env));
    let out = memfold(root, &["search", "languages"], &env);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")) && stderr.contains("unreachable"), "{stderr}");
    // The fact is in the archive and searchable once an embedder is reachable.
    let hits = ok(memfold(root, &["search", "--json", "Dutch"], &[]));
    assert!(hits["hits"][0]["text"].as_str().unwrap().contains("Dutch"), "{hits}");
    let verify = ok(memfold(root, &["verify", "--json"], &[]));
    assert_eq!(verify["facts"], 1);
}

#[test]
fn an_embedding_endpoint_that_fails_then_recovers_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    ok(memfold(root, &["init"], &[]));
    let server = memfold::testkit::FakeOpenAi::start_in_thread();
    let url = server.base_url();
    let env = [
        ("MEMFOLD_EMBEDDING__PROVIDER", "openai"),
        ("MEMFOLD_EMBEDDING__BASE_URL", url.as_str()),
        ("MEMFOLD_EMBEDDING__MODEL", memfold::testkit::FAKE_EMBEDDING_MODEL),
        ("MEMFOLD_EMBEDDING__MAX_RETRIES", "2"),
    ];
    ok(memfold(root, &["add", "Grows tomatoes on the balcony", "Runs a book club"], &env));
    server.fail_embeddings_next(1, 500);
    let hits = ok(memfold(root, &["search", "--json", "tomatoes balcony"], &env));
    assert!(hits["hits"][0]["text"].as_str().unwrap().contains("tomatoes"), "{hits}");
    let calls = server.embedding_calls();
    assert!(calls >= 3, "probe (failed once, retried), docs, query: {calls} calls");
    // Unchanged text is not embedded again: a second search embeds only the probe and the query.
    ok(memfold(root, &["search", "--json", "book club"], &env));
    assert_eq!(server.embedding_calls() - calls, 2, "probe + query; unchanged docs are not embedded again");
}
