//! How well new facts fold into the entries they are about, on the held-out set
//! `fixtures/heldout/` (pairs of an entry and a later fact about it, among thousands of entries
//! about the same person).
//!
//! For every pair it measures, per kind (update, duplicate, contradiction, additive) and style
//! (worded like the entry, or as people say it):
//! - **reach**: whether the fact's decision call showed the entry (a dry run with an LLM
//!   configured; the fake LLM answers no ops), and what the calls cost (calls and estimated
//!   prompt tokens per new fact);
//! - **the offline decider** (no LLM): merged (an applied DUPLICATE onto the entry), replaced
//!   (an applied REPLACE or REMOVE of the entry), proposed (an op on the entry stored for a
//!   person), proposed elsewhere (a proposal about another entry), and wrong (an applied op that
//!   names another entry, or that merges or replaces the entry of an additive pair).
//!
//! Facts are decided in passes of `MEMFOLD_BENCH_PASS_FACTS` (60, a busy day), each on a copy
//! of the same memory. Settings: `MEMFOLD_BENCH_SPLIT` (`report`, the default: the half nothing
//! was tuned on; `tune`; `all`), `MEMFOLD_BENCH_EMBEDDER` (`local`, or `minilm` with
//! `MEMFOLD_TEST_MINILM_DIR`), `MEMFOLD_BENCH_KEYS` (`offline`, the default; `none`: aspect
//! keys off; `llm`: besides the offline keys, a scripted LLM keys each fact and each pair's
//! entry with the set's own aspect, as a keyer that is always right would: the ceiling of what
//! LLM keys can bring), `MEMFOLD_BENCH_ASPECT_K` and `MEMFOLD_BENCH_NEIGHBOR_K`;
//! `MEMFOLD_BENCH_DECIDER=off` measures reach and cost only; `MEMFOLD_BENCH_DEBUG=miss` lists the
//! pairs whose entry a fact's call did not show (`2`: every pair's keys and rank, `ops`: the
//! offline decider's ops).
//! Run: `cargo bench --bench fold` (or `--profile dev`; it times nothing).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use memfold::config::{Config, EmbeddingProvider};
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::Root;
use memfold::store::archive::{self, NewFact};
use memfold::store::entries::{Entry, EntryFile, EntryMeta};
use memfold::testkit::{FakeOpenAi, FakeReply, copy_dir};

#[derive(Debug, Clone)]
struct Pair {
    split: String,
    kind: String,
    style: String,
    aspect: String,
    entry: String,
    fact: String,
}

fn fixtures() -> (Vec<Pair>, Vec<String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/heldout");
    let pairs = std::fs::read_to_string(dir.join("pairs.tsv")).expect("pairs.tsv");
    let pairs = pairs
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            assert_eq!(c.len(), 7, "pairs.tsv: {line}");
            Pair {
                split: c[0].into(),
                kind: c[1].into(),
                style: c[2].into(),
                aspect: c[4].into(),
                entry: c[5].into(),
                fact: c[6].into(),
            }
        })
        .collect();
    let distractors = std::fs::read_to_string(dir.join("distractors.txt")).expect("distractors.txt");
    (pairs, distractors.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect())
}

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// Counts of one kind × style.
#[derive(Debug, Default, Clone)]
struct Tally {
    pairs: usize,
    reached: usize,
    merged: usize,
    replaced: usize,
    proposed: usize,
    /// Proposals about another entry than the pair's.
    elsewhere: usize,
    wrong: usize,
}

#[tokio::main]
async fn main() {
    let (pairs, distractors) = fixtures();
    let split = setting("MEMFOLD_BENCH_SPLIT", "report");
    let per_pass: usize = setting("MEMFOLD_BENCH_PASS_FACTS", "60").parse().unwrap();
    let embedder = setting("MEMFOLD_BENCH_EMBEDDER", "local");
    let keys = setting("MEMFOLD_BENCH_KEYS", "offline");
    let aspect_k: usize =
        setting("MEMFOLD_BENCH_ASPECT_K", &Config::default().consolidation.aspect_k.to_string()).parse().unwrap();
    let chosen: Vec<usize> = (0..pairs.len()).filter(|&i| split == "all" || pairs[i].split == split).collect();
    println!(
        "fold: split {split}, {} pairs among {} entries, passes of {per_pass} facts, embedder {embedder}, keys {keys} (aspect_k {aspect_k})",
        chosen.len(),
        pairs.len() + distractors.len()
    );

    // One memory: every pair's entry, spread among the distractors.
    let base = tempfile::tempdir().unwrap();
    let root = Root::new(base.path());
    root.init().unwrap();
    let mut file = EntryFile::default();
    let every = (distractors.len() / pairs.len()).max(1);
    let mut next = 0;
    let push = |file: &mut EntryFile, id: String, text: &str| {
        let meta =
            EntryMeta { first_seen: Some(day("2026-01-10")), updated: Some(day("2026-01-10")), ..EntryMeta::new(id) };
        file.push(Entry::new(meta, text));
    };
    for (j, text) in distractors.iter().enumerate() {
        if j % every == 0 && next < pairs.len() {
            push(&mut file, format!("m-p{next:05}"), &pairs[next].entry);
            next += 1;
        }
        push(&mut file, format!("m-d{j:05}"), text);
    }
    for (i, pair) in pairs.iter().enumerate().skip(next) {
        push(&mut file, format!("m-p{i:05}"), &pair.entry);
    }
    std::fs::write(root.memory(), file.render()).unwrap();

    let llm = FakeOpenAi::start().await;
    if keys == "llm" {
        // What a keyer that is always right answers: each fact's own aspect; the pair entries
        // were made from facts keyed the same way.
        let aspect_of: HashMap<String, String> = pairs.iter().map(|p| (p.fact.clone(), p.aspect.clone())).collect();
        llm.set_keys_handler(move |request| {
            let user: serde_json::Value =
                serde_json::from_str(request["messages"][1]["content"].as_str().unwrap_or("{}")).unwrap_or_default();
            let mut keys = serde_json::Map::new();
            for fact in user["facts"].as_array().into_iter().flatten() {
                if let Some(aspect) = aspect_of.get(fact["text"].as_str().unwrap_or_default()) {
                    keys.insert(fact["id"].as_str().unwrap_or_default().to_string(), serde_json::json!([aspect]));
                }
            }
            FakeReply::Content(serde_json::json!({ "keys": keys }).to_string())
        });
        let lines: String = pairs
            .iter()
            .map(|p| {
                let text = memfold::store::content_hash(archive::clean_text(&p.entry));
                format!("{}\n", serde_json::json!({"text": text, "keys": [p.aspect]}))
            })
            .collect();
        std::fs::write(root.state_dir().join("aspects.jsonl"), lines).unwrap();
    }
    llm.set_chat_handler(|request| {
        let system = request["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("MEMORY.md") {
            return FakeReply::Content(r#"{"lines":[]}"#.into());
        }
        FakeReply::Content(r#"{"ops":[]}"#.into())
    });
    let config = |with_llm: bool, dir: &Path| {
        let mut config = Config { root: dir.to_path_buf(), ..Config::default() };
        config.embedding.provider = match embedder.as_str() {
            "minilm" => EmbeddingProvider::Minilm,
            _ => EmbeddingProvider::Local,
        };
        config.embedding.model_dir = std::env::var("MEMFOLD_TEST_MINILM_DIR").unwrap_or_default();
        config.consolidation.aspect_k = if keys == "none" { 0 } else { aspect_k };
        if let Ok(k) = std::env::var("MEMFOLD_BENCH_NEIGHBOR_K") {
            config.consolidation.neighbor_k = k.parse().unwrap();
        }
        if with_llm {
            config.llm = llm.llm_config();
        }
        config
    };
    // Entries embedded once, into the base root's cache, which every pass copies.
    {
        let index =
            memfold::index::corpus::open_index(&root, &config(false, base.path()), &Default::default()).await.unwrap();
        let texts: Vec<String> = file.entries().map(|e| e.content.clone()).collect();
        index.embedder().embed(&texts).await.unwrap();
    }

    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let (mut calls, mut prompt_tokens, mut facts_decided) = (0usize, 0u64, 0usize);
    for chunk in chosen.chunks(per_pass) {
        let news: Vec<NewFact> = chunk
            .iter()
            .map(|&i| NewFact { text: pairs[i].fact.clone(), date: Some(day("2026-06-01")), source: None })
            .collect();
        let entry_of = |i: usize| format!("m-p{i:05}");

        // Reach and cost: a dry run with the LLM decider.
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path()).unwrap();
        let added =
            archive::append(&Root::new(dir.path()), &news, day("2026-06-01").and_hms_opt(12, 0, 0).unwrap()).unwrap();
        let memory = Memory::open(config(true, dir.path())).await.unwrap();
        let report = memory.consolidate(PassOptions { force: true, dry_run: true }).await.unwrap();
        // Every call the pass made (decisions, and the keying call when the LLM keys facts).
        calls += report.llm.calls as usize;
        prompt_tokens += report.llm.prompt_tokens;
        facts_decided += chunk.len();
        let mut shown: HashMap<&str, Vec<&str>> = HashMap::new();
        for call in &report.clusters {
            for fact in &call.candidates {
                shown.entry(fact.as_str()).or_default().extend(call.neighbors.iter().map(String::as_str));
            }
        }
        for (n, &i) in chunk.iter().enumerate() {
            let tally = tallies.entry((pairs[i].kind.clone(), pairs[i].style.clone())).or_default();
            tally.pairs += 1;
            if shown.get(added[n].id.as_str()).is_some_and(|s| s.contains(&entry_of(i).as_str())) {
                tally.reached += 1;
            } else if std::env::var("MEMFOLD_BENCH_DEBUG").as_deref() == Ok("miss") {
                println!("MISS [{} {}] {}\t=> {}", pairs[i].kind, pairs[i].style, pairs[i].fact, pairs[i].entry);
            }
        }
        drop(memory);
        if std::env::var("MEMFOLD_BENCH_DECIDER").as_deref() == Ok("off") {
            continue;
        }

        // The offline decider, for real.
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path()).unwrap();
        let added =
            archive::append(&Root::new(dir.path()), &news, day("2026-06-01").and_hms_opt(12, 0, 0).unwrap()).unwrap();
        let memory = Memory::open(config(false, dir.path())).await.unwrap();
        let report = memory.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
        // What was applied is in the report with no confidence or one at least the review bar;
        // the rest went to a plan for a person.
        let bar = Config::default().consolidation.review_below_confidence;
        let plans = memory.plans().await.unwrap();
        let proposed: Vec<(String, String, Vec<String>)> = plans
            .iter()
            .flat_map(|p| p.ops.clone())
            .filter_map(|op| op.target.clone().map(|t| (op.op.to_string(), t, op.facts.clone())))
            .collect();
        if std::env::var("MEMFOLD_BENCH_DEBUG").as_deref() == Ok("ops") {
            let text_of: HashMap<String, String> =
                file.entries().map(|e| (e.id().to_string(), e.content.clone())).collect();
            let fact_text: HashMap<&str, (&str, &str, &str)> = chunk
                .iter()
                .enumerate()
                .map(|(n, &i)| {
                    (added[n].id.as_str(), (pairs[i].fact.as_str(), pairs[i].kind.as_str(), pairs[i].style.as_str()))
                })
                .collect();
            for op in report.ops.iter().filter(|o| o.op.as_str() != "ADD") {
                let (text, kind, style) = fact_text.get(op.facts[0].as_str()).copied().unwrap_or_default();
                let target = op.target.as_deref().unwrap_or_default();
                println!(
                    "OP {} {:?} {:?} [{kind} {style}] {text} => {} {}",
                    op.op,
                    op.confidence,
                    op.signals,
                    if target.starts_with("m-p") { "PAIR" } else { "other" },
                    text_of.get(target).map(String::as_str).unwrap_or("?")
                );
            }
        }
        for (n, &i) in chunk.iter().enumerate() {
            let fact = added[n].id.as_str();
            let entry = entry_of(i);
            let additive = pairs[i].kind == "additive";
            let tally = tallies.get_mut(&(pairs[i].kind.clone(), pairs[i].style.clone())).unwrap();
            let applied = report.ops.iter().filter(|o| o.confidence.is_none_or(|c| c >= bar));
            for op in applied.filter(|o| o.facts.iter().any(|f| f == fact)) {
                let Some(target) = op.target.as_deref() else { continue };
                match (op.op.as_str(), target == entry) {
                    (_, false) => tally.wrong += 1,
                    ("DUPLICATE", true) if additive => tally.wrong += 1,
                    ("REPLACE" | "REMOVE", true) if additive => tally.wrong += 1,
                    ("DUPLICATE", true) => tally.merged += 1,
                    ("REPLACE" | "REMOVE", true) => tally.replaced += 1,
                    _ => {}
                }
            }
            for (_, target, _) in proposed.iter().filter(|(_, _, facts)| facts.iter().any(|f| f == fact)) {
                if *target == entry {
                    tally.proposed += 1;
                } else {
                    tally.elsewhere += 1;
                }
            }
        }
    }

    if std::env::var("MEMFOLD_BENCH_DEBUG").is_ok() {
        debug_keys(&pairs, &chosen, &file, &config(false, base.path())).await;
    }
    println!("\n| kind | style | pairs | reach | merged | replaced | proposed | proposed elsewhere | wrong |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    for ((kind, style), t) in &tallies {
        println!(
            "| {kind} | {style} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |",
            t.pairs,
            share(t.reached, t.pairs),
            share(t.merged, t.pairs),
            share(t.replaced, t.pairs),
            share(t.proposed, t.pairs),
            t.elsewhere,
            t.wrong
        );
    }
    println!(
        "\ncost: {:.3} LLM calls and {:.0} prompt tokens per new fact, keying included ({calls} calls, {facts_decided} facts)",
        share(calls, facts_decided),
        prompt_tokens as f64 / facts_decided.max(1) as f64
    );
}

/// For every chosen pair: the keys of its fact and of its entry, whether they share an
/// attribute, and the entry's place among the fact's aspect candidates (to see why a fact
/// misses its entry).
async fn debug_keys(pairs: &[Pair], chosen: &[usize], file: &EntryFile, config: &Config) {
    use memfold::planning::consolidate::aspects::{Key, Keyer, KeyerParams, Names, Taxonomy, candidates};
    let root = Root::new(&config.root);
    let index = memfold::index::corpus::open_index(&root, config, &Default::default()).await.unwrap();
    let embedder = index.embedder();
    let keyer = Keyer::new(Taxonomy::builtin(), embedder.as_ref(), KeyerParams::default()).await.unwrap();
    let names = Names::learn(file.entries().map(|e| e.content.as_str()), keyer.taxonomy());
    let entry_texts: Vec<String> = file.entries().map(|e| e.content.clone()).collect();
    let entry_ids: Vec<String> = file.entries().map(|e| e.id().to_string()).collect();
    let fact_texts: Vec<String> = chosen.iter().map(|&i| pairs[i].fact.clone()).collect();
    let ev = embedder.embed(&entry_texts).await.unwrap();
    let fv = embedder.embed(&fact_texts).await.unwrap();
    let entry_keys = keyer.keys(&refs(&entry_texts), &slices(&ev), &names);
    let fact_keys = keyer.keys(&refs(&fact_texts), &slices(&fv), &names);
    let lists = candidates(&fact_keys, &entry_keys, &slices(&fv), &slices(&ev), 200);
    let show = |keys: &[Key]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    let mut ranks = BTreeMap::new();
    for (n, &i) in chosen.iter().enumerate() {
        let e = entry_ids.iter().position(|id| *id == format!("m-p{i:05}")).unwrap();
        let rank = lists[n].iter().position(|&x| x == e).map(|r| r + 1);
        let bucket = match rank {
            None => "none",
            Some(1..=4) => "1-4",
            Some(5..=8) => "5-8",
            Some(9..=16) => "9-16",
            Some(_) => "17+",
        };
        *ranks.entry((pairs[i].kind.clone(), pairs[i].style.clone(), bucket)).or_insert(0) += 1;
        if rank.is_none_or(|r| r > 8) && std::env::var("MEMFOLD_BENCH_DEBUG").as_deref() == Ok("2") {
            for &top in lists[n].iter().take(4) {
                println!("      beaten by: {}\t[{}]", entry_texts[top], show(&entry_keys[top]));
            }
        }
        let cos: f32 = fv[n].iter().zip(&ev[e]).map(|(a, b)| a * b).sum();
        println!(
            "{:?} cos {cos:.2} {} {}\t{}\t[{}]\t{}\t[{}]",
            rank,
            pairs[i].kind,
            pairs[i].style,
            pairs[i].fact,
            show(&fact_keys[n]),
            pairs[i].entry,
            show(&entry_keys[e])
        );
    }
    for ((kind, style, bucket), n) in ranks {
        println!("rank {kind} {style} {bucket}: {n}");
    }
}

fn refs(texts: &[String]) -> Vec<&str> {
    texts.iter().map(String::as_str).collect()
}

fn slices(vectors: &[Vec<f32>]) -> Vec<&[f32]> {
    vectors.iter().map(Vec::as_slice).collect()
}

fn day(s: &str) -> chrono::NaiveDate {
    s.parse().unwrap()
}
