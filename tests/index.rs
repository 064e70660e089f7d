//! The derived index against real files: rebuilt from nothing it answers the same, question
//! for question, as the index built pass by pass; a fact appended by hand is found after the
//! watcher runs; a dead embedding endpoint loses nothing.

use std::path::Path;

use crate::common::{memfold, ok};
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use memfold::config::Config;
use memfold::index::corpus;
use memfold::index::{Index, SearchOpts};
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::service::watch::Watcher;
use memfold::store::Root;
use memfold::store::archive::{self, NewFact};

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
    let mut config = Config { root: root.dir().to_path_buf(), ..Config::default() };
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    let index = std::sync::Arc::new(corpus::open_index(&root, &config, &Default::default()).await.unwrap());
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

/// A deterministic stream of conversation-like facts with repeats and contradictions, so that
/// passes add, replace and drop rows the way a real memory does.
fn fact_stream(passes: usize, per_pass: usize) -> Vec<Vec<String>> {
    const NAMES: &[&str] = &["Alice", "Bruno", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun"];
    const PLACES: &[&str] = &["Lisbon", "Berlin", "Osaka", "Lagos", "Quito", "Oslo", "Hanoi", "Perth"];
    const THINGS: &[&str] =
        &["jazz records", "green tea", "old bicycles", "chess openings", "sourdough bread", "board games", "ramen"];
    const HOBBIES: &[&str] = &["paints", "repairs", "collects", "teaches", "studies", "reads about"];
    let mut seed: u64 = 0x5eed;
    let mut next = move |n: usize| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    let mut said: Vec<String> = Vec::new();
    (0..passes)
        .map(|p| {
            (0..per_pass)
                .map(|i| {
                    let name = NAMES[next(NAMES.len())];
                    let text = match next(7) {
                        0 if !said.is_empty() => said[next(said.len())].clone(),
                        1 => format!("{name} moved to {}.", PLACES[next(PLACES.len())]),
                        2 => format!("{name} likes {}.", THINGS[next(THINGS.len())]),
                        3 => format!("{name} dislikes {}.", THINGS[next(THINGS.len())]),
                        4 => format!("{name}'s phone number is 555-{:04}.", next(10_000)),
                        _ => format!(
                            "{name} {} {} in {} (pass {p}, note {i}).",
                            HOBBIES[next(HOBBIES.len())],
                            THINGS[next(THINGS.len())],
                            PLACES[next(PLACES.len())]
                        ),
                    };
                    said.push(text.clone());
                    text
                })
                .collect()
        })
        .collect()
}

/// A few hundred questions over the stream's vocabulary: single words, pairs, whole facts,
/// phrasings no fact uses, and words nothing contains.
fn questions(facts: &[Vec<String>]) -> Vec<String> {
    let words = [
        "Alice", "Bruno", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Lisbon", "Berlin", "Osaka",
        "Lagos", "Quito", "Oslo", "Hanoi", "Perth", "jazz", "tea", "bicycles", "chess", "bread", "games", "ramen",
        "phone", "moved", "likes", "dislikes", "paints", "repairs", "collects", "teaches", "studies", "note",
    ];
    let mut out: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    for (i, a) in words.iter().enumerate() {
        out.push(format!("{a} {}", words[(i * 7 + 3) % words.len()]));
        out.push(format!("where does {a} live now"));
    }
    out.extend(facts.iter().flatten().step_by(2).take(200).cloned());
    out.extend(["zeppelin", "quantum entanglement", "what is her phone number", "555"].map(String::from));
    out
}

/// Each question's top hits as `key kind score`.
async fn top_lists(index: &Index, questions: &[String], opts: &SearchOpts) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(questions.len());
    for q in questions {
        let hits = index.search(q, opts).await.unwrap();
        out.push(hits.iter().map(|h| format!("{} {} {:.12}", h.key, h.kind.as_str(), h.score)).collect());
    }
    out
}

/// The questions whose lists differ, with the first difference spelled out.
fn differences(questions: &[String], a: &[Vec<String>], b: &[Vec<String>]) -> Option<String> {
    let differ: Vec<usize> = (0..questions.len()).filter(|&i| a[i] != b[i]).collect();
    let first = *differ.first()?;
    Some(format!(
        "{} of {} questions, e.g. {:?}:\n{:#?}\nvs\n{:#?}",
        differ.len(),
        questions.len(),
        questions[first],
        a[first],
        b[first]
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_built_pass_by_pass_and_by_reindex_clear_ranks_every_question_alike() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    root.init().unwrap();
    let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    let memory = Memory::open(config.clone()).await.unwrap();
    let stream = fact_stream(24, 20);
    let start: NaiveDate = "2026-03-01".parse().unwrap();
    for (p, texts) in stream.iter().enumerate() {
        let date = start + chrono::Duration::days(p as i64);
        let facts: Vec<NewFact> =
            texts.iter().map(|t| NewFact { text: t.clone(), date: Some(date), source: None }).collect();
        archive::append(&root, &facts, date.and_hms_opt(12, 0, 0).unwrap()).unwrap();
        // A search between passes indexes the new facts first, as `memfold search` does; the
        // last day's facts stay pending.
        memory.mark_dirty();
        memory.refresh().await.unwrap();
        if p + 1 < stream.len() {
            memory.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
        }
    }
    drop(memory);
    let questions = questions(&stream);
    assert!(questions.len() >= 300, "{} questions", questions.len());
    let mut opts = SearchOpts::new(&config.search, "2026-04-01".parse().unwrap());
    opts.k = 10;
    opts.history = true;

    let index = corpus::open_index(&root, &config, &Default::default()).await.unwrap();
    let rows = index.len().await.unwrap();
    let first = top_lists(&index, &questions, &opts).await;
    assert!(first.iter().filter(|l| l.len() == 10).count() > 250, "most questions fill the top 10");
    let again = top_lists(&index, &questions, &opts).await;
    if let Some(d) = differences(&questions, &first, &again) {
        panic!("asked twice, answered differently: {d}");
    }
    drop(index);

    ok(memfold(dir.path(), &["reindex", "--clear"], &[]));
    let index = corpus::open_index(&root, &config, &Default::default()).await.unwrap();
    assert_eq!(index.len().await.unwrap(), rows);
    let rebuilt = top_lists(&index, &questions, &opts).await;
    if let Some(d) = differences(&questions, &first, &rebuilt) {
        panic!("ranked differently after reindex --clear: {d}");
    }
}

/// How many times the daemon has settled its index without an error (`/metrics`).
async fn settles(daemon: &crate::common::daemon::Daemon) -> u64 {
    let text = daemon.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(r#"memfold_index_settles_total{result="ok"} "#))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no settle counter in\n{text}"))
}

/// The daemon settles its index once at start and again once the files have been quiet for
/// `server.settle_idle_secs` after a write; between the two a new fact is searchable at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_settles_its_index_at_start_and_after_writes_go_quiet() {
    let fixture = crate::common::daemon::Fixture::new();
    let daemon = fixture.serve(&[("MEMFOLD_SERVER__SETTLE_IDLE_SECS", "1")]).await;
    let daemon = &daemon;
    let wait_for = |n: u64| async move {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = settles(daemon).await;
            if seen >= n {
                return seen;
            }
            assert!(Instant::now() < deadline, "{seen} settles, waited for {n}:\n{}", daemon.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert_eq!(wait_for(1).await, 1, "one settle at start");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(settles(daemon).await, 1, "no settle without a write");

    daemon.add(&["Keeps bees on the roof of the garage."]).await;
    let (status, body) = daemon.get("/search?q=bees%20on%20the%20roof").await;
    assert_eq!(status, 200, "{body}");
    assert!(body["hits"][0]["text"].as_str().unwrap().contains("bees"), "{body}");
    assert_eq!(wait_for(2).await, 2, "one settle once the writes went quiet");
}
