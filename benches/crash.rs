//! Benchmark of the promises under stress, measured from outside with the real binary:
//! `kill -9` at random moments of consolidation passes, of a daemon under posting clients,
//! and hand edits of `memory.md` while passes run.
//!
//! `cargo bench --bench crash` (add `--profile dev` to skip the release build; the figures
//! are counts, not timings). Trials: MEMFOLD_BENCH_TRIALS (default 100 passes; a tenth as
//! many daemons and hand edits). For each killed pass it checks, without trusting memfold's
//! own bookkeeping, that after `verify` and one clean pass every archived fact is named by a
//! current entry of `memory.md` and no entry id is there twice; it also counts how often
//! `verify` said ok right after the kill. It prints one line per scenario.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use memfold::store::Root;
use memfold::store::archive;
use memfold::store::entries::EntryFile;
use memfold::testkit::{FakeOpenAi, FakeReply, churn_reply};
use serde_json::{Value, json};

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn memfold(root: &Path, llm: &FakeOpenAi) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memfold"));
    command.env("MEMFOLD_EMBEDDING__PROVIDER", "local");
    command
        .arg("--root")
        .arg(root)
        .env_remove("MEMFOLD_ROOT")
        .env("MEMFOLD_LOG", "error")
        .env("MEMFOLD_LLM__BASE_URL", llm.base_url())
        .env("MEMFOLD_LLM__MODEL", memfold::testkit::FAKE_CHAT_MODEL)
        .env("MEMFOLD_LLM__API_KEY_ENV", "")
        .env("MEMFOLD_LLM__MAX_RETRIES", "0");
    command
}

/// `memfold consolidate --force` on `root`, running, its output dropped.
fn start_pass(root: &Path, llm: &FakeOpenAi) -> std::process::Child {
    let mut command = memfold(root, llm);
    command.args(["consolidate", "--force"]).stdout(Stdio::null()).stderr(Stdio::null());
    command.spawn().expect("memfold starts")
}

fn run(root: &Path, llm: &FakeOpenAi, args: &[&str]) -> Output {
    memfold(root, llm).args(args).stdin(Stdio::null()).output().expect("memfold runs")
}

fn copy_dir(from: &Path, to: &Path) {
    memfold::testkit::copy_dir(from, to).unwrap();
}

/// A small deterministic random number generator (xorshift), so runs can be repeated.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Slow decisions (30 ms each) that add, replace and merge, so passes write history.
fn decide(request: &Value) -> FakeReply {
    std::thread::sleep(Duration::from_millis(30));
    churn_reply(request)
}

fn add(root: &Path, llm: &FakeOpenAi, date: &str, facts: &[String]) {
    let mut args = vec!["add", "--date", date];
    args.extend(facts.iter().map(String::as_str));
    assert!(run(root, llm, &args).status.success());
}

/// Every archived fact named by a current entry, and no entry id twice: checked from the files.
fn nothing_lost(root: &Path) -> Result<(), String> {
    let root = Root::new(root);
    let facts = archive::read_all(&root).map_err(|e| e.to_string())?.facts;
    let memory = EntryFile::read(&root.memory(), "memory.md").map_err(|e| e.to_string())?;
    let mut ids = HashSet::new();
    let mut held = HashSet::new();
    for e in memory.entries() {
        if !ids.insert(e.id().to_string()) {
            return Err(format!("entry id {} twice", e.id()));
        }
        held.extend(e.meta.sources.iter().cloned());
    }
    let lost: Vec<&str> = facts.iter().filter(|f| !held.contains(&f.id)).map(|f| f.id.as_str()).collect();
    if lost.is_empty() { Ok(()) } else { Err(format!("{} facts in no entry", lost.len())) }
}

fn verify_ok(root: &Path, llm: &FakeOpenAi) -> bool {
    let out = run(root, llm, &["verify", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| v["ok"] == true)
}

/// kill -9 of `consolidate --force` at a random moment of the pass.
fn killed_passes(base: &Path, llm: &FakeOpenAi, trials: usize, rng: &mut Rng) {
    let template = base.join("passes");
    assert!(run(&template, llm, &["init"]).status.success());
    let first: Vec<String> =
        (0..40).map(|i| format!("Cousin {i} lives in town {} and likes tea and {}", i % 5, i % 7)).collect();
    add(&template, llm, "2026-05-01", &first);
    assert!(run(&template, llm, &["consolidate", "--force"]).status.success());
    let news: Vec<String> =
        (0..40).map(|i| format!("Cousin {i} moved to town {} and likes coffee and {}", i % 6, i % 7)).collect();
    add(&template, llm, "2026-06-01", &news);
    let clean = base.join("passes-clean");
    copy_dir(&template, &clean);
    let started = Instant::now();
    assert!(run(&clean, llm, &["consolidate", "--force"]).status.success());
    let pass = started.elapsed();
    let (mut verified, mut whole, mut problems) = (0, 0, Vec::new());
    let (mut in_commit, mut before, mut after) = (0, 0, 0);
    let template_memory = std::fs::read_to_string(Root::new(&template).memory()).unwrap();
    let clean_memory = std::fs::read_to_string(Root::new(&clean).memory()).unwrap();
    for trial in 0..trials {
        let root = base.join(format!("pass-{trial}"));
        copy_dir(&template, &root);
        // Anywhere from the process's start-up to the end of the pass (promotion and reindex
        // come after the commit, so the kills fall before, inside and after it).
        let at = pass.mul_f64(0.2 + rng.below(800) as f64 / 1000.0);
        let mut child = start_pass(&root, llm);
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        // Where the kill landed: inside a commit (its record is left), or before or after it.
        if root.join(".memfold/commit.json").exists() {
            in_commit += 1;
        }
        if verify_ok(&root, llm) {
            verified += 1;
        }
        match std::fs::read_to_string(Root::new(&root).memory()).unwrap() {
            m if m == template_memory => before += 1,
            m if m == clean_memory => after += 1,
            _ => problems.push(format!("trial {trial}: memory.md neither as before nor as after the pass")),
        }
        let again = run(&root, llm, &["consolidate", "--force"]);
        match (again.status.success(), nothing_lost(&root)) {
            (true, Ok(())) if verify_ok(&root, llm) => whole += 1,
            (ok, result) => problems.push(format!("trial {trial}: pass ok {ok}, {result:?}")),
        }
        let _ = std::fs::remove_dir_all(&root);
    }
    println!(
        "kill -9 during a pass ({:.1}s clean, 40 new facts): {trials} trials ({in_commit} inside a commit; memory.md \
         as before the pass in {before}, as after it in {after}), verify ok after the kill in {verified}, nothing lost \
         after the next pass in {whole}",
        pass.as_secs_f64()
    );
    for p in problems.iter().take(10) {
        println!("  {p}");
    }
}

/// kill -9 of `serve` while three clients post facts: every acknowledged fact is archived.
fn killed_daemons(base: &Path, llm: &FakeOpenAi, trials: usize, rng: &mut Rng) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (mut acknowledged, mut missing) = (0usize, 0usize);
    for trial in 0..trials {
        let root = base.join(format!("serve-{trial}"));
        assert!(run(&root, llm, &["init"]).status.success());
        let token = std::fs::read_to_string(root.join(".memfold/token")).expect("init made the token");
        let token = token.trim().to_string();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = memfold(&root, llm)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let acked: Vec<String> = runtime.block_on(async {
            let client = reqwest::Client::new();
            let url = format!("http://127.0.0.1:{port}");
            while client.get(format!("{url}/healthz")).send().await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut tasks = tokio::task::JoinSet::new();
            for c in 0..3 {
                let (client, url, token) = (client.clone(), url.clone(), token.clone());
                tasks.spawn(async move {
                    let mut mine = Vec::new();
                    for n in 0.. {
                        let text = format!("Trial {trial} client {c} fact {n}");
                        let body = json!({"facts": [{"text": text}]});
                        match client.post(format!("{url}/facts")).bearer_auth(&token).json(&body).send().await {
                            Ok(r) if r.status() == 200 => mine.push(text),
                            _ => break,
                        }
                    }
                    mine
                });
            }
            tokio::time::sleep(Duration::from_millis(300 + rng.below(1500))).await;
            let _ = child.kill();
            let mut all = Vec::new();
            while let Some(Ok(mine)) = tasks.join_next().await {
                all.extend(mine);
            }
            all
        });
        let _ = child.wait();
        let archived: HashSet<String> =
            archive::read_all(&Root::new(&root)).unwrap().facts.into_iter().map(|f| f.text).collect();
        acknowledged += acked.len();
        missing += acked.iter().filter(|t| !archived.contains(*t)).count();
        let _ = std::fs::remove_dir_all(&root);
    }
    println!(
        "kill -9 of serve under 3 posting clients: {trials} trials, {missing} of {acknowledged} acknowledged facts lost"
    );
}

/// A paragraph typed into `memory.md` while a pass runs is never overwritten.
fn hand_edits(base: &Path, llm: &FakeOpenAi, trials: usize, rng: &mut Rng) {
    let template = base.join("passes");
    let mut kept = 0;
    for trial in 0..trials {
        let root = base.join(format!("edit-{trial}"));
        copy_dir(&template, &root);
        let mut child = start_pass(&root, llm);
        std::thread::sleep(Duration::from_millis(100 + rng.below(900)));
        let note = format!("A note typed by hand during trial {trial}.");
        let memory = Root::new(&root).memory();
        let text = std::fs::read_to_string(&memory).unwrap();
        std::fs::write(&memory, format!("{text}\n{note}\n")).unwrap();
        let _ = child.wait();
        // Whatever the pass did, the next one runs on the edited file.
        let _ = run(&root, llm, &["consolidate", "--force"]);
        if std::fs::read_to_string(&memory).unwrap().contains(&note) && verify_ok(&root, llm) {
            kept += 1;
        }
        let _ = std::fs::remove_dir_all(&root);
    }
    println!("hand edits of memory.md during a pass: {trials} trials, the edit kept and verify ok in {kept}");
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("crash bench: skipped (run with `cargo bench --bench crash`)");
        return;
    }
    let trials = knob("MEMFOLD_BENCH_TRIALS", 100);
    let dir = tempfile::tempdir().unwrap();
    let base: PathBuf = dir.path().to_path_buf();
    let llm = FakeOpenAi::start_in_thread();
    llm.set_chat_handler(decide);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    killed_passes(&base, &llm, trials, &mut rng);
    killed_daemons(&base, &llm, (trials / 10).max(1), &mut rng);
    hand_edits(&base, &llm, (trials / 10).max(1), &mut rng);
}
