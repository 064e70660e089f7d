//! What an agent is handed for a prompt: the prompt hook's recall on LoCoMo questions and on
//! everyday coding prompts, measured as the issue "What the agent is handed" asks.
//!
//! LoCoMo (Maharana et al., 2024, `snap-research/LoCoMo`, CC BY-NC 4.0) is not in this
//! repository: point `MEMFOLD_BENCH_LOCOMO` at its `locomo10.json`. For each conversation a root
//! is built as a person's agent would have built it: each session's `observation` facts added,
//! dated by the session, with their dialogue id as source, and a forced pass (the offline
//! decider) after each session. Then every question (adversarial ones excepted) whose evidence
//! is among the facts is asked as a prompt, and the bench reports
//! - **evidence injected**: the share of questions whose recalled lines hold an evidence entry
//!   (an entry made from an evidence fact, or the fact itself while pending);
//! - **lines that are evidence**: the share of recalled lines that are evidence for their question;
//! - lines and characters per prompt, and the share of prompts with nothing recalled;
//! - for `fixtures/prompts/coding.txt` (prompts memory has nothing for), the prompts with
//!   anything recalled, per half (odd lines tuned on, even lines not).
//!
//! Roots are kept in `MEMFOLD_BENCH_ROOTS` (default: a folder under the system's temp dir) per
//! embedder and conversation, and reused when they exist (`MEMFOLD_BENCH_REBUILD=1` builds
//! them again). Each question is asked as a new session's first prompt, so nothing is held back
//! as told already, except what session start hands over: the head of `MEMORY.md`. A question
//! whose evidence entry is there is counted apart ("in MEMORY.md"), not as injected. The hook's
//! latency at 100k entries is `cargo bench --bench hooks`.
//!
//! Settings: `MEMFOLD_BENCH_CONVERSATIONS` (`0,1,2,3,4`), `MEMFOLD_BENCH_EMBEDDER` (`minilm`,
//! with `MEMFOLD_TEST_MINILM_DIR`, or `local`). Run: `cargo bench --bench recall --profile dev`.
//! With `MEMFOLD_BENCH_SWEEP=1`, settings are weighed on the questions instead;
//! `MEMFOLD_BENCH_MISSED=1` beside it prints each question with no evidence among its
//! candidates and its evidence entries, `MEMFOLD_BENCH_ANALYZE=1` where the first evidence
//! candidate ranks.

#[path = "common/locomo.rs"]
mod locomo;
#[path = "common/run.rs"]
#[allow(dead_code)]
mod run;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use memfold::config::{Config, EmbeddingProvider};
use memfold::memory::{Memory, RecallRequest};
use memfold::planning::consolidate::pass::PassOptions;
use memfold::planning::recall::{self, Candidate, Settings};
use memfold::store::Root;
use serde_json::{Value, json};

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty()).unwrap_or_else(|| default.to_string())
}

fn config(dir: &Path, embedder: &str) -> Config {
    let mut config = Config { root: dir.to_path_buf(), ..Config::default() };
    config.embedding.provider = if embedder == "minilm" { EmbeddingProvider::Minilm } else { EmbeddingProvider::Local };
    config.embedding.model_dir = std::env::var("MEMFOLD_TEST_MINILM_DIR").unwrap_or_default();
    config
}

/// The root of conversation `sample`, built session by session (or as it was built before).
async fn root(sample: &Value, dir: &Path, embedder: &str) -> Memory {
    let built = dir.join(".memfold/bench-built");
    if built.exists() && std::env::var("MEMFOLD_BENCH_REBUILD").is_err() {
        return Memory::open(config(dir, embedder)).await.unwrap();
    }
    let _ = std::fs::remove_dir_all(dir);
    let config = config(dir, embedder);
    Memory::init(&config).unwrap();
    let memory = Memory::open(config).await.unwrap();
    for news in locomo::sessions(sample) {
        memory.add(memory.check_facts(news).unwrap()).unwrap();
        memory.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
    }
    std::fs::write(&built, run::commit()).unwrap();
    memory
}

/// Fact ids by the dialogue turn they cite (a fact may cite several: "D1:3; D1:5").
fn facts_of_turns(root: &Path) -> HashMap<String, Vec<String>> {
    let archive = memfold::store::archive::read_all(&Root::new(root)).unwrap();
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for fact in archive.facts {
        for dia in locomo::turns(fact.src.as_deref().unwrap_or_default()) {
            out.entry(dia.to_string()).or_default().push(fact.id.clone());
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    questions: usize,
    evidence_injected: usize,
    lines: usize,
    evidence_lines: usize,
    chars: usize,
    empty: usize,
    /// Questions with no evidence injected whose evidence entry is in the MEMORY.md session
    /// start hands over.
    in_memory_md: usize,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.questions += other.questions;
        self.evidence_injected += other.evidence_injected;
        self.lines += other.lines;
        self.evidence_lines += other.evidence_lines;
        self.chars += other.chars;
        self.empty += other.empty;
        self.in_memory_md += other.in_memory_md;
    }

    fn line(&self) -> String {
        let q = self.questions.max(1) as f64;
        format!(
            "evidence in the agent's context {:.3}: injected {:.3} ({} of {}), in MEMORY.md instead {}; lines that are evidence {:.1}%, {:.2} lines and {:.0} chars per prompt, nothing injected {:.1}%",
            (self.evidence_injected + self.in_memory_md) as f64 / q,
            self.evidence_injected as f64 / q,
            self.evidence_injected,
            self.questions,
            self.in_memory_md,
            100.0 * self.evidence_lines as f64 / self.lines.max(1) as f64,
            self.lines as f64 / q,
            self.chars as f64 / q,
            100.0 * self.empty as f64 / q
        )
    }
}

/// The prompts of `fixtures/prompts/coding.txt`, with the half each is in (tuned: odd lines).
fn coding_prompts() -> Vec<(bool, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/prompts/coding.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| (i % 2 == 0, l.to_string()))
        .collect()
}

/// One question's candidates and which of them are evidence.
struct Asked {
    prompt: String,
    candidates: Vec<Candidate>,
    evidence: Vec<bool>,
    /// The candidates session start showed (the head of MEMORY.md): told already.
    told: HashMap<String, String>,
}

/// The candidates among `candidates` that the head of MEMORY.md session start shows holds.
fn shown(dir: &Path, candidates: &[Candidate]) -> HashMap<String, String> {
    let head: String =
        std::fs::read_to_string(dir.join("MEMORY.md")).unwrap_or_default().chars().take(10_000).collect();
    candidates.iter().filter(|c| head.contains(c.text.trim())).map(|c| (c.id.clone(), recall::told_key(c))).collect()
}

/// The settings to try (`MEMFOLD_BENCH_SWEEP=1`): every combination of these, with the bars of
/// `MEMFOLD_BENCH_BARS`.
fn grid(base: &Settings) -> Vec<Settings> {
    let mut out = Vec::new();
    let bars: Vec<f64> =
        setting("MEMFOLD_BENCH_BARS", "0.3,0.35,0.4").split(',').map(|b| b.trim().parse().unwrap()).collect();
    for bar in bars {
        for gap in [0.1, 0.15] {
            for words in [0.5, 0.75] {
                for dates in [0.3] {
                    for max_lines in [3, 4] {
                        out.push(Settings { bar, gap, words, dates, max_lines, ..base.clone() });
                    }
                }
            }
        }
    }
    out
}

/// Evidence in the agent's context (injected, or shown at session start), share of lines that
/// are evidence, lines per prompt, for `settings` over the questions; and coding prompts with
/// anything recalled.
fn evaluate(asked: &[Asked], coding: &[Asked], settings: &Settings) -> (f64, f64, f64, usize) {
    let (mut hit, mut lines, mut good) = (0usize, 0usize, 0usize);
    for a in asked {
        let chosen = recall::choose(&a.prompt, &a.candidates, settings, &a.told);
        let g = chosen.iter().filter(|c| a.evidence[c.at]).count();
        let shown = a.candidates.iter().zip(&a.evidence).any(|(c, e)| *e && a.told.contains_key(&c.id));
        hit += usize::from(g > 0 || shown);
        lines += chosen.len();
        good += g;
    }
    let noisy =
        coding.iter().filter(|c| !recall::choose(&c.prompt, &c.candidates, settings, &c.told).is_empty()).count();
    let n = asked.len().max(1) as f64;
    (hit as f64 / n, good as f64 / lines.max(1) as f64, lines as f64 / n, noisy)
}

#[tokio::main]
async fn main() {
    let Ok(path) = std::env::var("MEMFOLD_BENCH_LOCOMO") else {
        println!("recall: set MEMFOLD_BENCH_LOCOMO to LoCoMo's locomo10.json (github.com/snap-research/LoCoMo)");
        return;
    };
    let data: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).expect("locomo10.json")).unwrap();
    let conversations: Vec<usize> =
        setting("MEMFOLD_BENCH_CONVERSATIONS", "0,1,2,3,4").split(',').map(|n| n.trim().parse().unwrap()).collect();
    let embedder = setting("MEMFOLD_BENCH_EMBEDDER", "minilm");
    let roots = PathBuf::from(setting(
        "MEMFOLD_BENCH_ROOTS",
        &std::env::temp_dir().join("memfold-recall-roots").display().to_string(),
    ));
    println!("recall: conversations {conversations:?}, embedder {embedder}, commit {}", run::commit());
    let (mut all, mut coding_hits) = (Tally::default(), BTreeMap::<bool, (usize, usize)>::new());
    let mut examples: Vec<String> = Vec::new();
    let sweep = std::env::var("MEMFOLD_BENCH_SWEEP").is_ok();
    let (mut swept, mut swept_coding): (Vec<Asked>, Vec<Asked>) = (Vec::new(), Vec::new());
    let mut base_settings: Option<Settings> = None;
    for &n in &conversations {
        let sample = &data[n];
        let dir = roots.join(format!("{embedder}-{n}"));
        let started = Instant::now();
        let memory = root(sample, &dir, &embedder).await;
        let built = started.elapsed();
        let turns = facts_of_turns(&dir);
        let mut tally = Tally::default();
        for (question, evidence) in locomo::questions(sample, &turns) {
            if sweep {
                let candidates = memory.recall_candidates(question).await.unwrap();
                let wanted = evidence;
                let evidence: Vec<bool> = candidates
                    .iter()
                    .map(|c| wanted.contains(&c.id) || c.sources.iter().any(|s| wanted.contains(s)))
                    .collect();
                let told = shown(&dir, &candidates);
                if std::env::var("MEMFOLD_BENCH_MISSED").is_ok() && !evidence.iter().any(|e| *e) {
                    let text = std::fs::read_to_string(dir.join("consolidated/memory.md")).unwrap();
                    let file = memfold::store::entries::EntryFile::parse(&text, "memory.md");
                    println!("\nMISSED Q: {question}");
                    for e in file.entries().filter(|e| e.meta.sources.iter().any(|s| wanted.contains(s))) {
                        println!("   E {}", e.content.trim());
                    }
                }
                swept.push(Asked { prompt: question.to_string(), candidates, evidence, told });
                base_settings.get_or_insert_with(|| memory.recall_settings());
                continue;
            }
            let recalled = memory.recall(question, &RecallRequest::default()).await.unwrap();
            tally.questions += 1;
            let is_evidence = |id: &str, sources: &[String]| {
                evidence.contains(&id.to_string()) || sources.iter().any(|s| evidence.contains(s))
            };
            let good = recalled.lines.iter().filter(|l| is_evidence(&l.id, &l.sources)).count();
            tally.lines += recalled.lines.len();
            tally.evidence_lines += good;
            tally.chars += recalled.text.chars().count();
            tally.empty += usize::from(recalled.lines.is_empty());
            tally.evidence_injected += usize::from(good > 0);
            if good == 0 {
                let shown: String =
                    std::fs::read_to_string(dir.join("MEMORY.md")).unwrap_or_default().chars().take(10_000).collect();
                let candidates = memory.recall_candidates(question).await.unwrap();
                tally.in_memory_md += usize::from(
                    candidates.iter().any(|c| is_evidence(&c.id, &c.sources) && shown.contains(c.text.trim())),
                );
            }
            if good == 0 && examples.len() < 12 && std::env::var("MEMFOLD_BENCH_SHOW").is_ok() {
                examples.push(format!("Q: {question}\n{}", recalled.text));
            }
        }
        println!("conversation {n}: built or opened in {:.1}s; {}", built.as_secs_f64(), tally.line());
        all.add(&tally);
        for (tuned, prompt) in coding_prompts() {
            if sweep {
                if tuned {
                    let candidates = memory.recall_candidates(&prompt).await.unwrap();
                    let told = shown(&dir, &candidates);
                    swept_coding.push(Asked { evidence: vec![false; candidates.len()], prompt, candidates, told });
                }
                continue;
            }
            let recalled = memory.recall(&prompt, &RecallRequest::default()).await.unwrap();
            let entry = coding_hits.entry(tuned).or_default();
            entry.0 += 1;
            entry.1 += usize::from(!recalled.lines.is_empty());
            if !recalled.lines.is_empty() && std::env::var("MEMFOLD_BENCH_SHOW").is_ok() && tuned {
                println!("  coding prompt recalled: {prompt}\n{}", recalled.text);
            }
        }
    }
    if let (Some(base), true) = (&base_settings, std::env::var("MEMFOLD_BENCH_ANALYZE").is_ok()) {
        // Where the first evidence candidate ranks, by cosine and by the recall's score.
        for words in [0.0, 0.5, 1.0] {
            let settings = Settings { words, ..base.clone() };
            let mut at: BTreeMap<usize, usize> = BTreeMap::new();
            for a in &swept {
                let scores = recall::scores(&a.prompt, &a.candidates, &settings);
                let mut order: Vec<usize> = (0..a.candidates.len()).collect();
                order.sort_by(|&x, &y| scores[y].total_cmp(&scores[x]));
                let rank = order.iter().position(|&i| a.evidence[i]).map_or(99, |r| r.min(10));
                *at.entry(rank).or_default() += 1;
            }
            println!("words {words}: first evidence at rank (0-based; 10 = 10 or later; 99 = none): {at:?}");
        }
        if std::env::var("MEMFOLD_BENCH_SHOW").is_ok() {
            let settings = Settings { words: 0.5, ..base.clone() };
            for a in swept.iter().step_by(7).take(40) {
                let scores = recall::scores(&a.prompt, &a.candidates, &settings);
                let mut order: Vec<usize> = (0..a.candidates.len()).collect();
                order.sort_by(|&x, &y| scores[y].total_cmp(&scores[x]));
                let rank = order.iter().position(|&i| a.evidence[i]);
                if rank == Some(0) {
                    continue;
                }
                println!("\nQ: {} (evidence at {rank:?})", a.prompt);
                for &i in order.iter().take(3) {
                    println!(
                        "   {:.2} {:.2} {}",
                        scores[i],
                        a.candidates[i].similarity.unwrap_or(0.0),
                        a.candidates[i].text
                    );
                }
                if let Some(r) = rank {
                    let i = order[r];
                    println!(
                        " E {:.2} {:.2} {}",
                        scores[i],
                        a.candidates[i].similarity.unwrap_or(0.0),
                        a.candidates[i].text
                    );
                }
            }
        }
        return;
    }
    if let Some(base) = base_settings {
        let mut results: Vec<(Settings, (f64, f64, f64, usize))> = grid(&base)
            .into_iter()
            .map(|s| {
                let r = evaluate(&swept, &swept_coding, &s);
                (s, r)
            })
            .collect();
        // The most evidence injected with at least 35% of the lines evidence and at most 1 in 100
        // coding prompts recalling anything.
        let fits =
            |(precision, noisy): (f64, usize)| precision >= 0.35 && noisy as f64 <= 0.01 * swept_coding.len() as f64;
        for (s, (hit, precision, lines, noisy)) in results.iter().filter(|(_, r)| !fits((r.1, r.3))).take(8) {
            println!(
                "  (short of the targets) bar {:.2} gap {:.2} words {:.2} max {}: evidence {hit:.3}, precision {:.1}%, {lines:.2} lines, coding {noisy}",
                s.bar,
                s.gap,
                s.words,
                s.max_lines,
                100.0 * precision
            );
        }
        results.retain(|(_, (_, precision, _, noisy))| fits((*precision, *noisy)));
        results.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(b.1.1.total_cmp(&a.1.1)));
        println!(
            "sweep over {} questions and {} coding prompts (tuned half); evidence: in the agent's context (injected, or in MEMORY.md):",
            swept.len(),
            swept_coding.len()
        );
        for (s, (hit, precision, lines, noisy)) in results.iter().take(15) {
            println!(
                "  bar {:.2} gap {:.2} words {:.2} dates {:.2} max {}: evidence {hit:.3}, precision {:.1}%, {lines:.2} lines, coding {noisy}",
                s.bar,
                s.gap,
                s.words,
                s.dates,
                s.max_lines,
                100.0 * precision
            );
        }
        return;
    }
    println!("\nall: {}", all.line());
    for (tuned, (asked, with)) in &coding_hits {
        println!(
            "coding prompts ({} half): {with} of {asked} with anything recalled",
            if *tuned { "tuned" } else { "untouched" }
        );
    }
    for example in examples {
        println!("\n{example}");
    }
    let _ = json!({});
}
