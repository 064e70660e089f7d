//! Helpers shared by the integration tests: the `memfold` binary, and a memory root with a fake LLM.
// Each test binary uses a different subset of these.
#![allow(dead_code)]

pub mod daemon;
pub mod home;
pub mod life;
pub mod mcp;
pub mod webdriver;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use chrono::NaiveDate;
use memfold::config::Config;
use memfold::error::Error;
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::{PassOptions, PassReport};
use memfold::store::Root;
use memfold::store::archive::{self, NewFact};
use memfold::store::entries::EntryFile;
use memfold::store::ledger::Ledger;
use memfold::testkit::{FakeOpenAi, FakeReply};
use serde_json::{Value, json};

/// The `memfold` binary, on the built-in local embedder whatever this machine has installed
/// (`embedding.provider = "auto"` would pick MiniLM where its files are), so tests do not depend
/// on the machine.
pub fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memfold"));
    command.env("MEMFOLD_EMBEDDING__PROVIDER", "local");
    command
}

/// Run the binary on `root` with extra environment; no LLM unless `env` configures one.
pub fn memfold(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    bin()
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("MEMFOLD_ROOT")
        .env_remove("MEMFOLD_LLM__BASE_URL")
        .env("MEMFOLD_LOG", "warn")
        .envs(env.iter().copied())
        .output()
        .expect("memfold runs")
}

/// A fresh memory root made by `memfold init`.
pub fn init_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(memfold(dir.path(), &["init"], &[]));
    dir
}

/// A file of a root, as text.
pub fn read(root: &Path, file: &str) -> String {
    std::fs::read_to_string(root.join(file)).unwrap()
}

/// Assert success and parse stdout as JSON (Null when it is not JSON).
pub fn ok(out: Output) -> serde_json::Value {
    assert!(out.status.success(), "exit {:?}\nstderr: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Assert success and parse stdout as JSON, which it must be.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "exit {:?}\nstderr: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

pub fn d(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

/// A fresh memory root whose LLM is a fake OpenAI-compatible server.
pub struct Env {
    _dir: tempfile::TempDir,
    pub root: Root,
    pub config: Config,
    pub llm: FakeOpenAi,
}

pub async fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    root.init().unwrap();
    let llm = FakeOpenAi::start().await;
    let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
    config.embedding.provider = memfold::config::EmbeddingProvider::Local;
    config.llm = llm.llm_config();
    Env { _dir: dir, root, config, llm }
}

/// Append facts dated `date`; their ids.
pub fn add(env: &Env, date: &str, texts: &[&str]) -> Vec<String> {
    let facts: Vec<NewFact> =
        texts.iter().map(|t| NewFact { text: t.to_string(), date: Some(d(date)), source: None }).collect();
    let now = d(date).and_hms_opt(12, 0, 0).unwrap();
    archive::append(&env.root, &facts, now).unwrap().into_iter().map(|f| f.id).collect()
}

/// The root of `env` opened as the CLI and the daemon open it.
pub async fn mem(env: &Env) -> Memory {
    Memory::open(env.config.clone()).await.unwrap()
}

/// One pass through the library, with the real index and the configured decider.
pub async fn pass(env: &Env, opts: PassOptions) -> Result<PassReport, Error> {
    mem(env).await.consolidate(opts).await
}

/// The HTTP status an error is answered with.
pub fn status(err: &Error) -> u16 {
    memfold::doors::http::status_of(err.kind()).as_u16()
}

pub async fn force(env: &Env) -> PassReport {
    pass(env, PassOptions { force: true, dry_run: false }).await.unwrap()
}

/// The id of the first entry of `root`'s `memory.md`, if it has one.
pub fn first_entry_id(root: &Path) -> Option<String> {
    let file = EntryFile::read(&Root::new(root).memory(), "memory.md").unwrap();
    file.entries().next().map(|e| e.id().to_string())
}

/// The id of the first entry of `root`'s `memory.md` whose text holds `words`.
pub fn entry_with(root: &Path, words: &str) -> Option<String> {
    let file = EntryFile::read(&Root::new(root).memory(), "memory.md").unwrap();
    file.entries().find(|e| e.content.contains(words)).map(|e| e.id().to_string())
}

pub fn memory(env: &Env) -> EntryFile {
    EntryFile::read(&env.root.memory(), "memory.md").unwrap()
}

pub fn history(env: &Env) -> EntryFile {
    EntryFile::read(&env.root.history(), "history.md").unwrap()
}

pub fn assert_verified(env: &Env) {
    let report = memfold::store::verify::verify(&Ledger::load(&env.root).unwrap(), Vec::new());
    assert!(report.ok, "verify: {:?}", report.problems);
}

/// Every file under `root`, `.memfold` included, by path relative to `root`, with its bytes.
pub fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.insert(path.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Environment pointing the daemon's LLM at the fake, with no retries and a long timeout.
pub fn llm_env(fake: &FakeOpenAi) -> Vec<(&'static str, String)> {
    vec![
        ("MEMFOLD_LLM__BASE_URL", fake.base_url()),
        ("MEMFOLD_LLM__MODEL", memfold::testkit::FAKE_CHAT_MODEL.to_string()),
        ("MEMFOLD_LLM__API_KEY_ENV", String::new()),
        ("MEMFOLD_LLM__TIMEOUT_SECS", "120".to_string()),
        ("MEMFOLD_LLM__MAX_RETRIES", "0".to_string()),
    ]
}

/// Fake LLM behaviour: every candidate of a decision call becomes an ADD of its own text;
/// anything else (promotion) is refused, so the offline ranking writes MEMORY.md.
pub fn add_everything(request: &Value) -> FakeReply {
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    let doc: Value = match serde_json::Deserializer::from_str(user).into_iter::<Value>().next() {
        Some(Ok(doc)) if doc.get("candidates").is_some() => doc,
        _ => return FakeReply::StatusMessage(400, "only consolidation is scripted".into()),
    };
    let ops: Vec<Value> = doc["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"op": "ADD", "facts": [c["id"]], "content": c["text"]}))
        .collect();
    FakeReply::Content(json!({ "ops": ops }).to_string())
}
