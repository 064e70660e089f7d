//! Review page benchmark: how long `memfold serve` takes to answer each page under `/ui` at N
//! entries, timed end to end over loopback as a browser waits for it, and how big each page is.
//!
//! The root is built as an agent's use builds it: N facts through `memfold add --stdin` and a
//! pass (offline decider) that makes N entries with their run and journal; then 30 facts that
//! restate some of those entries and a pass in review mode, which stores a plan. The daemon
//! runs with `server.auth = false` (loopback), so the first visit gets a session, and pages are
//! timed once it has settled its index (it does at start). Each page is
//! fetched 30 times after one warm-up: the inbox, the plan, the runs, an entry, a fact and a
//! search. Prints the median and the slowest per page, its bytes (HTML, and the stylesheet
//! once), and the commit.
//!
//! Run: `cargo bench --bench ui` (release). Knob: `MEMFOLD_BENCH_ENTRIES` (default `10000`).
//! Targets (issue "A review inbox in the browser"): every page under 50 ms at 10k entries, and
//! under 30 KB of HTML and CSS.

#[path = "../tests/common/life.rs"]
#[allow(dead_code)]
mod life;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use run::memfold;
use serde_json::Value;

const FETCHES: usize = 30;
const RESTATED: usize = 30;

/// `memfold` with these arguments and environment, which must succeed; its stdout.
fn cli(root: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> String {
    let mut command = memfold(root);
    command.args(args).env("MEMFOLD_LOG", "warn").stdout(Stdio::piped()).stdin(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "memfold {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

struct Daemon {
    child: Child,
    base: String,
    client: reqwest::Client,
    /// The session cookie (`name=value`) the first visit got.
    cookie: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        run::stop(&mut self.child, Duration::from_secs(30));
    }
}

impl Daemon {
    async fn start(root: &Path) -> Daemon {
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let started = Instant::now();
        let env = [("MEMFOLD_SERVER__AUTH", "false"), ("MEMFOLD_CONSOLIDATION__MIN_HOURS", "100000")];
        let (child, base) = run::serve(root, &env, &client, Duration::from_secs(120)).await;
        let mut daemon = Daemon { child, base, client, cookie: String::new() };
        // The daemon settles its index once at start; pages are timed after that, as a person
        // opening the page meets a daemon that has been running.
        let limit = Duration::from_secs(300).saturating_sub(started.elapsed());
        run::settled(&daemon.client, &daemon.base, None, limit).await;
        // With auth off, the first visit gets a session.
        let first = daemon.client.get(format!("{}/ui", daemon.base)).send().await.unwrap();
        let cookie = first.headers().get(reqwest::header::SET_COOKIE).expect("a session cookie").to_str().unwrap();
        daemon.cookie = cookie.split(';').next().unwrap().to_string();
        daemon
    }

    /// One page: the time to its last byte, and its body.
    async fn page(&self, path: &str) -> (Duration, String) {
        let started = Instant::now();
        let request = self.client.get(format!("{}{path}", self.base)).header(reqwest::header::COOKIE, &self.cookie);
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        let body = response.text().await.unwrap();
        (started.elapsed(), body)
    }
}

/// The first `href` in `page` that starts with `prefix`.
fn link(page: &str, prefix: &str) -> String {
    let at = page.find(&format!("href=\"{prefix}")).unwrap_or_else(|| panic!("no link to {prefix}"));
    page[at + 6..].split('"').next().unwrap().to_string()
}

async fn bench(entries: usize) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    cli(&root, &["init"], &[], None);
    let texts = life::distractors(entries);
    cli(&root, &["add", "--stdin"], &[], Some(&texts.join("\n")));
    let started = Instant::now();
    cli(&root, &["consolidate", "--force"], &[], None);
    let first_pass = started.elapsed();
    // Restatements of some entries, decided in review mode: a stored plan.
    let restated: Vec<String> =
        texts.iter().step_by(entries / RESTATED).take(RESTATED).map(|t| format!("As I said: {t}")).collect();
    cli(&root, &["add", "--stdin"], &[], Some(&restated.join("\n")));
    let report: Value = serde_json::from_str(&cli(
        &root,
        &["consolidate", "--force", "--json"],
        &[("MEMFOLD_CONSOLIDATION__MODE", "review")],
        None,
    ))
    .unwrap();
    let plan = report["plans"][0].as_str().expect("the review pass stored a plan").to_string();

    let daemon = Daemon::start(&root).await;
    let (_, inbox) = daemon.page("/ui").await;
    let (_, plan_page) = daemon.page(&format!("/ui/plans/{plan}")).await;
    if let Ok(path) = std::env::var("MEMFOLD_BENCH_SAVE_PLAN") {
        std::fs::write(path, &plan_page).unwrap();
    }
    let entry = link(&plan_page, "/ui/entries/");
    let fact = link(&plan_page, "/ui/facts/");
    let query: String = texts[entries / 2].split_whitespace().take(4).collect::<Vec<_>>().join("+");
    let css = link(&inbox, "/ui/assets/");
    let (_, stylesheet) = daemon.page(&css).await;

    println!(
        "ui bench, {entries} entries (first pass {:.1} s), plan of {RESTATED} restated facts, commit {}",
        first_pass.as_secs_f64(),
        run::commit()
    );
    println!("  stylesheet {} bytes", stylesheet.len());
    let pages = [
        ("inbox", "/ui".to_string()),
        ("plan", format!("/ui/plans/{plan}")),
        ("runs", "/ui/runs".to_string()),
        ("entry", entry),
        ("fact", fact),
        ("search", format!("/ui/search?q={query}")),
    ];
    for (name, path) in pages {
        let (_, body) = daemon.page(&path).await; // warm-up
        let mut times = Vec::with_capacity(FETCHES);
        for _ in 0..FETCHES {
            times.push(daemon.page(&path).await.0);
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "  {name:<7} median {:>6.1} ms, slowest {:>6.1} ms, {:>6} bytes of HTML (+ CSS: {} bytes)",
            ms(times[FETCHES / 2]),
            ms(times[FETCHES - 1]),
            body.len(),
            body.len() + stylesheet.len()
        );
    }
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = match std::env::var("MEMFOLD_BENCH_ENTRIES") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![10_000],
    };
    for entries in sizes {
        bench(entries).await;
    }
}
