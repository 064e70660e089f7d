//! Related entries: a decider links an entry to the entries of its call it is related to but
//! distinct from (the LLM's `related`, the offline rules' shared name); the links live in both
//! entries' headers, follow an entry folded into another, are undone with their run, never
//! break parsing when a person garbles them (verify names them), and a search that finds one
//! entry brings the other within `k`.

use memfold::memory::SearchRequest;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::entries::EntryFile;
use serde_json::{Value, json};

use crate::common::{add, assert_verified, env, force, mem, memory};
use memfold::testkit::FakeReply;

fn cluster(request: &Value) -> Value {
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    serde_json::Deserializer::from_str(user).into_iter::<Value>().next().unwrap().unwrap()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect()
}

fn links_of(file: &EntryFile, words: &str) -> Vec<String> {
    let entry = file.entries().find(|e| e.content.contains(words)).unwrap_or_else(|| panic!("no entry with {words}"));
    entry.meta.links().into_iter().map(|l| l.id).collect()
}

fn id_of(file: &EntryFile, words: &str) -> String {
    file.entries().find(|e| e.content.contains(words)).unwrap().id().to_string()
}

#[tokio::test]
async fn an_llm_link_is_applied_both_ways_a_link_outside_the_call_refused_and_undo_takes_both_back() {
    let env = env().await;
    let distractors = [
        "Takes the train to work every morning.",
        "The morning standup is at nine before work starts.",
        "Works from home every Friday morning.",
        "Goes running every evening after work.",
    ];
    add(&env, "2026-06-01", &["Has a dog named Rex."]);
    add(&env, "2026-06-01", &distractors);
    env.llm.set_chat_handler(crate::common::add_everything);
    force(&env).await;
    env.llm.set_chat_handler(|request: &Value| {
        let doc = cluster(request);
        if doc.get("neighbors").is_none() {
            return crate::common::add_everything(request);
        }
        let facts = ids(&doc["candidates"]);
        let text = doc["candidates"][0]["text"].as_str().unwrap().to_string();
        let related: Vec<Value> = doc["neighbors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["content"].as_str().unwrap().contains("Rex"))
            .map(|n| json!({"id": n["id"], "shares": "Rex"}))
            .chain([json!("m-notinthiscall")])
            .collect();
        FakeReply::Content(
            json!({"ops": [{"op": "ADD", "facts": facts, "content": text, "related": related}]}).to_string(),
        )
    });
    force(&env).await;
    let before = std::fs::read(env.root.memory()).unwrap();
    add(&env, "2026-06-02", &["Walks Rex every morning before work."]);
    let report = force(&env).await;
    let file = memory(&env);
    let (dog, walks) = (id_of(&file, "named Rex"), id_of(&file, "Walks Rex"));
    assert_eq!(file.entries().count(), 2 + distractors.len(), "linked, not merged");
    assert_eq!(links_of(&file, "Walks Rex"), [dog.as_str()], "the link outside the call is refused");
    assert_eq!(links_of(&file, "named Rex"), [walks.as_str()], "and the link goes both ways");
    let text = std::fs::read_to_string(env.root.memory()).unwrap();
    assert!(text.contains(r#""related":[{"id":""#) && text.contains(r#""shares":"Rex""#), "{text}");
    assert_verified(&env);

    // A search that finds one brings the other within k, below the direct hits and marked.
    let memory = mem(&env).await;
    let query = "walks every morning before work";
    let direct = SearchRequest { k: Some(3), skip_recall: true, history: true, ..SearchRequest::default() };
    let direct: Vec<String> = memory.search(query, &direct).await.unwrap().into_iter().map(|h| h.id).collect();
    assert_eq!(direct[0], walks);
    assert!(!direct.contains(&dog), "the dog entry is no direct hit of the query: {direct:?}");
    let request = SearchRequest { k: Some(3), skip_recall: true, ..SearchRequest::default() };
    let hits = memory.search(query, &request).await.unwrap();
    let found: Vec<(&str, Option<&str>)> = hits.iter().map(|h| (h.id.as_str(), h.related_to.as_deref())).collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0], (walks.as_str(), None));
    assert_eq!(found[2], (dog.as_str(), Some(walks.as_str())), "below the direct hits: {found:?}");
    assert!(hits[2].score < hits[1].score);

    // Undo takes the entry and both sides of the link back, byte for byte.
    memory.undo(report.run.as_deref().unwrap()).await.unwrap();
    assert_eq!(std::fs::read(env.root.memory()).unwrap(), before);
    assert_verified(&env);
}

#[tokio::test]
async fn a_link_follows_an_entry_folded_into_another() {
    let env = env().await;
    add(&env, "2026-06-01", &["Ana is my sister."]);
    add(&env, "2026-06-01", &["Ana lives in Porto."]);
    env.llm.set_chat_handler(crate::common::add_everything);
    force(&env).await;
    let file = memory(&env);
    let (sister, porto) = (id_of(&file, "my sister"), id_of(&file, "Porto"));
    // A person links the two by hand (ids alone, as they may write them).
    let text = std::fs::read_to_string(env.root.memory()).unwrap();
    let linked = text
        .replacen(&format!(r#"{{"id":"{sister}""#), &format!(r#"{{"id":"{sister}","related":["{porto}"]"#), 1)
        .replacen(&format!(r#"{{"id":"{porto}""#), &format!(r#"{{"id":"{porto}","related":["{sister}"]"#), 1);
    assert_ne!(linked, text);
    std::fs::write(env.root.memory(), &linked).unwrap();
    assert_eq!(links_of(&memory(&env), "Porto"), [sister.as_str()]);
    // A new fact folds the sister entry into a new wording of it.
    add(&env, "2026-06-03", &["Ana is my younger sister."]);
    let sister_for_handler = sister.clone();
    env.llm.set_chat_handler(move |request: &Value| {
        let doc = cluster(request);
        if doc.get("neighbors").is_none() {
            return crate::common::add_everything(request);
        }
        let neighbours = ids(&doc["neighbors"]);
        if !neighbours.contains(&sister_for_handler) {
            return FakeReply::Content(json!({"ops": []}).to_string());
        }
        let facts = ids(&doc["candidates"]);
        FakeReply::Content(
            json!({"ops": [
                {"op": "ADD", "facts": facts, "content": "Ana is the user's younger sister."},
            ]})
            .to_string(),
        )
    });
    force(&env).await;
    let file = memory(&env);
    let younger = id_of(&file, "younger sister");
    // Fold the old sister entry into the new one, as a merge does.
    let memory_handle = mem(&env).await;
    memory_handle
        .supersede(&sister, memfold::planning::curate::Successor::Entry(younger.clone()), None)
        .await
        .unwrap_or_else(|e| panic!("supersede: {e}"));
    let file = memory(&env);
    assert!(file.entries().all(|e| e.id() != sister));
    assert_eq!(links_of(&file, "Porto"), [younger.as_str()], "the link followed the entry into {younger}");
    assert_eq!(links_of(&file, "younger sister"), [porto.as_str()]);
    assert_verified(&env);
}

#[tokio::test]
async fn garbled_and_dangling_links_are_named_by_verify_and_cost_nothing() {
    let env = env().await;
    add(&env, "2026-06-01", &["Has a dog named Rex.", "Likes green tea."]);
    env.llm.set_chat_handler(crate::common::add_everything);
    force(&env).await;
    let file = memory(&env);
    let (dog, tea) = (id_of(&file, "Rex"), id_of(&file, "green tea"));
    let text = std::fs::read_to_string(env.root.memory()).unwrap();
    let edited = text
        .replacen(&format!(r#"{{"id":"{dog}""#), &format!(r#"{{"id":"{dog}","related":"Rex's walks""#), 1)
        .replacen(&format!(r#"{{"id":"{tea}""#), &format!(r#"{{"id":"{tea}","related":[{{"id":"m-gone"}},42]"#), 1);
    std::fs::write(env.root.memory(), &edited).unwrap();
    let file = memory(&env);
    assert_eq!(file.entries().count(), 2, "{:?}", file.problems);
    assert!(file.problems.is_empty(), "{:?}", file.problems);
    let report = memfold::store::verify::verify(&memfold::store::ledger::Ledger::load(&env.root).unwrap(), Vec::new());
    assert!(report.ok, "a link holds no fact: {:?}", report.problems);
    let warned = report.warnings.join("\n");
    assert!(warned.contains(&format!("entry {dog}: its \"related\" holds something that is not a link")), "{warned}");
    assert!(warned.contains(&format!("entry {tea}: links to m-gone, which is not a current entry")), "{warned}");
    // A pass and a search go on; the hand edit stays as written.
    add(&env, "2026-06-02", &["Drinks coffee on Mondays."]);
    mem(&env).await.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
    let request = SearchRequest { k: Some(3), skip_recall: true, ..SearchRequest::default() };
    assert!(!mem(&env).await.search("green tea", &request).await.unwrap().is_empty());
    assert!(std::fs::read_to_string(env.root.memory()).unwrap().contains(r#""related":"Rex's walks""#));
}

#[tokio::test]
async fn offline_a_fact_that_adds_to_an_entry_about_the_same_name_is_linked_not_merged() {
    let mut env = env().await;
    env.config.llm = memfold::config::LlmConfig::default();
    add(&env, "2026-06-01", &["Has a dog named Rex."]);
    force(&env).await;
    add(&env, "2026-06-02", &["Walks Rex every morning before work."]);
    force(&env).await;
    let file = memory(&env);
    assert_eq!(file.entries().count(), 2, "both kept");
    let dog = id_of(&file, "named Rex");
    assert_eq!(links_of(&file, "Walks Rex"), [dog]);
    assert_eq!(links_of(&file, "named Rex").len(), 1);
    assert_verified(&env);
}

/// What linking did to one half of `fixtures/relations/pairs.tsv`.
#[derive(Debug, Default)]
struct Linking {
    related: usize,
    linked: usize,
    folded: usize,
    proposed: usize,
    links: usize,
    wrong: usize,
    /// Pairs whose entry the first pass did not place (proposed for review with another).
    unplaced: usize,
}

/// The pairs of `half` in one memory, with the offline decider (and MiniLM when its files are
/// here): the entries in one pass, the facts in the next.
async fn linking(half: &str) -> Linking {
    let mut env = env().await;
    env.config.llm = memfold::config::LlmConfig::default();
    if let Ok(dir) = std::env::var("MEMFOLD_TEST_MINILM_DIR") {
        env.config.embedding.provider = memfold::config::EmbeddingProvider::Minilm;
        env.config.embedding.model_dir = dir;
    }
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/relations/pairs.tsv")).unwrap();
    let pairs: Vec<(&str, &str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|cols| cols[0] == half)
        .map(|cols| (cols[1], cols[2], cols[3]))
        .collect();
    let entries: Vec<&str> = pairs.iter().map(|p| p.1).collect();
    let entry_facts = add(&env, "2026-06-01", &entries);
    force(&env).await;
    let facts: Vec<&str> = pairs.iter().map(|p| p.2).collect();
    let fact_facts = add(&env, "2026-06-02", &facts);
    force(&env).await;
    let file = memory(&env);
    // The entry that holds a fact, and the pair an entry holds a fact of.
    let holding = |fact: &str| file.entries().find(|e| e.meta.sources.iter().any(|s| s == fact));
    let pair_of = |id: &str| {
        let entry = file.entries().find(|e| e.id() == id)?;
        (0..pairs.len()).find(|i| entry.meta.sources.iter().any(|s| *s == entry_facts[*i] || *s == fact_facts[*i]))
    };
    let mut out = Linking { related: pairs.iter().filter(|p| p.0 == "related").count(), ..Linking::default() };
    for (i, pair) in pairs.iter().enumerate() {
        let Some(entry) = holding(&entry_facts[i]) else {
            // The first pass proposed folding the entry's fact into another entry, for review.
            out.unplaced += 1;
            println!("{half}: the entry itself was proposed for review: {pair:?}");
            continue;
        };
        let Some(fact) = holding(&fact_facts[i]) else {
            // Pending: a fold the decider proposed waits for a person's review.
            out.proposed += usize::from(pair.0 == "related");
            println!("{half}: proposed for review: {pair:?}");
            continue;
        };
        if pair.0 == "related" {
            if entry.id() == fact.id() {
                out.folded += 1;
                println!("{half}: folded: {pair:?}");
            } else if fact.meta.links().iter().any(|l| l.id == entry.id()) {
                out.linked += 1;
            } else {
                println!("{half}: not linked: {pair:?}");
            }
        }
        for link in fact.meta.links() {
            out.links += 1;
            if pair.0 != "related" || pair_of(&link.id) != Some(i) {
                out.wrong += 1;
                let other = file.entries().find(|e| e.id() == link.id).map(|e| e.content.clone());
                println!("{half}: a link joins unrelated topics: {:?} → {other:?}", pair.2);
            }
        }
    }
    assert_verified(&env);
    out
}

/// Pairs of an entry and a fact that adds to it, with hard unrelated pairs (a shared word of
/// another topic) beside them, all in one memory: related pairs are linked and never folded;
/// of the links made, few join entries of unrelated topics. Asserted on the half never tuned
/// on; the other half is printed.
#[tokio::test]
async fn offline_held_out_pairs_are_linked_not_merged_and_links_rarely_join_unrelated_topics() {
    let tune = linking("tune").await;
    println!("tune: {tune:?}");
    let held = linking("heldout").await;
    println!("held out: {held:?}");
    assert_eq!(held.folded, 0, "none merged or replaced");
    // The acceptance is MiniLM's (12 of 13 linked on the eleventh round, 21 of 26 on the ninth
    // and tenth); the built-in `local` embedder's letter n-grams may leave a few entries out of
    // the fact's neighbours (12 of 13 too, 7 of 12 on the sixth).
    let minilm = std::env::var("MEMFOLD_TEST_MINILM_DIR").is_ok();
    let share = if minilm { 6 } else { 5 };
    assert!(held.linked * 10 >= held.related * share, "≥ 0.{share} of related pairs linked: {held:?}");
    // The target is ≤ 5% and the offline rules do not meet it: reading what the words around a
    // name say it is (someone, a place, a word describing a thing) took the fifth round from
    // 11 of 17 links joining unrelated topics to 2 of 8, a verb after a word opening a sentence
    // the ninth from 11 of 20 to 3 of 12; the eleventh, written before the last change, has 5
    // of 17 (MiniLM and `local`): a dog called Marley and "Marley and Me", a cat called Pudding
    // and the pudding, a niece called Ivy and the ivy, an uncle called Cliff and cliff walks, a
    // friend called Phoenix and the city. Telling them apart takes meaning, which an LLM's
    // `related` brings. This bound keeps what holds from getting worse (docs/performance.md
    // has the numbers).
    assert!(held.wrong * 5 <= held.links * 2, "≤ 40% of links join unrelated topics: {held:?}");
}

/// `about NAME` from the command line on a memory of 1,000 entries and the people of
/// `fixtures/about/people.tsv` (written once, never tuned on): every entry naming the person,
/// few that do not.
#[test]
fn about_a_name_lists_the_entries_naming_that_person_among_a_thousand() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(crate::common::memfold(&root, &["init"], &[]).status.success());
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/about/people.tsv")).unwrap();
    let rows: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_once('\t').unwrap())
        .collect();
    let mut blocks: Vec<String> = crate::common::life::distractors(1_000 - rows.len());
    blocks.extend(rows.iter().map(|(_, t)| t.to_string()));
    // Blocks a person wrote without headers are entries too.
    std::fs::write(root.join("consolidated/memory.md"), blocks.join("\n\n") + "\n").unwrap();
    let people: Vec<&str> = {
        let mut p: Vec<&str> = rows.iter().map(|r| r.0).filter(|n| *n != "-").collect();
        p.dedup();
        p
    };
    let (mut found_right, mut found, mut wanted) = (0, 0, 0);
    for person in &people {
        let out = crate::common::memfold(&root, &["about", person, "--json"], &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        let texts: Vec<&str> =
            answer["entries"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
        let want: Vec<&str> = rows.iter().filter(|r| r.0 == *person).map(|r| r.1).collect();
        wanted += want.len();
        found += texts.len();
        found_right += texts.iter().filter(|t| want.contains(t)).count();
        for t in texts.iter().filter(|t| !want.contains(t)) {
            println!("about {person}: also {t:?}");
        }
    }
    let (recall, precision) = (found_right as f64 / wanted as f64, found_right as f64 / found as f64);
    println!("about, {} people at 1,000 entries: recall {recall:.3}, precision {precision:.3}", people.len());
    assert!(recall >= 0.95 && precision >= 0.9, "recall {recall:.3}, precision {precision:.3}");
    // Without a name: the names memory speaks of, each person with their entries, and no
    // verb that only opens sentences.
    let out = crate::common::memfold(&root, &["about", "--json"], &[]);
    let names: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(&str, u64)> = names["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["name"].as_str().unwrap(), n["entries"].as_u64().unwrap()))
        .collect();
    for person in ["Ana", "Tom", "Priya", "Kenji"] {
        let want = rows.iter().filter(|r| r.0 == person).count() as u64;
        assert!(listed.iter().any(|(n, count)| *n == person && *count >= want), "{person}: {listed:?}");
    }
    for verb in ["Sent", "Saw", "Made"] {
        assert!(!listed.iter().any(|(n, _)| *n == verb), "{verb} is no name: {listed:?}");
    }
}

#[tokio::test]
async fn get_about_answers_like_the_command_line() {
    let fixture = crate::common::daemon::Fixture::new();
    let daemon = fixture.serve(&[]).await;
    let (status, _) =
        daemon.post("/facts", json!({"facts": [{"text": "My sister Ana is a nurse."}, {"text": "Likes tea."}]})).await;
    assert_eq!(status, 200);
    let (status, _) = daemon.post("/consolidate", json!({"force": true})).await;
    assert!(status == 200 || status == 202, "{status}");
    let answer =
        crate::common::daemon::eventually(std::time::Duration::from_secs(30), "the entry about Ana", async || {
            let (_, answer) = daemon.get("/about?name=Ana").await;
            (answer["entries"].as_array().is_some_and(|e| !e.is_empty())).then_some(answer)
        })
        .await;
    assert_eq!(answer["entries"][0]["text"], "My sister Ana is a nurse.", "{answer}");
    let (status, answer) = daemon.get("/about?who=Ana").await;
    assert_eq!(status, 400, "an unknown parameter is refused: {answer}");
    daemon.stop().await;
}

/// Links live in `memory.md`; the index, the linked-entry cache and the use table are derived.
/// Rebuilt from nothing (`reindex --clear` with those files deleted), the same links are
/// followed and `about` answers the same, and a hand edit that drops a link is followed at once.
#[test]
fn rebuilding_the_index_gives_the_same_links_and_the_same_about() {
    use crate::common::{json, memfold};
    let dir = crate::common::init_root();
    let run = |args: &[&str]| json(&memfold(dir.path(), args, &[]));
    run(&["add", "Has a dog named Rex.", "--json"]);
    run(&["consolidate", "--force", "--json"]);
    run(&["add", "Walks Rex every morning before work.", "--json"]);
    run(&["consolidate", "--force", "--json"]);
    let about = || run(&["about", "Rex", "--json"]);
    // Hits, each with the entry whose link brought it (scores may differ after a rebuild).
    let search = || -> Vec<(String, Value)> {
        let out = run(&["search", "a dog named Rex", "-k", "2", "--json"]);
        out["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["id"].as_str().unwrap().to_string(), h["related_to"].clone()))
            .collect()
    };
    let (about_before, search_before) = (about(), search());
    assert_eq!(about_before["entries"].as_array().map(Vec::len), Some(2), "{about_before}");
    assert!(search_before.iter().any(|(_, to)| !to.is_null()) || search_before.len() == 2, "{search_before:?}");
    let state = dir.path().join(".memfold");
    std::fs::remove_dir_all(state.join("index")).unwrap();
    for derived in ["links.json", "uses.tsv", "status.json"] {
        let _ = std::fs::remove_file(state.join(derived));
    }
    run(&["reindex", "--clear", "--json"]);
    assert_eq!(about(), about_before);
    assert_eq!(search(), search_before);
    // A person deletes the link from one side by hand: `verify` names the other side's, and the
    // search from a fresh process reads the edit (the cache is keyed by memory.md).
    let path = dir.path().join("consolidated/memory.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let file = EntryFile::parse(&text, "memory.md");
    let walks = file.entries().find(|e| e.content.contains("Walks")).unwrap();
    let opening = format!("<!--m {{\"id\":\"{}\"", walks.id());
    let header = text.lines().find(|l| l.starts_with(&opening)).unwrap().to_string();
    let mut meta = walks.meta.clone();
    meta.set_links(Vec::new());
    let edited = text
        .replace(&header, memfold::store::entries::Entry::new(meta, &walks.content).render().lines().next().unwrap());
    std::fs::write(&path, edited).unwrap();
    let verified = crate::common::memfold(dir.path(), &["verify", "--json"], &[]);
    let report: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(report["ok"], true, "a link never holds a fact: {report}");
    assert!(report["warnings"].to_string().contains("does not link back"), "{report}");
}
