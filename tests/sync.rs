//! `memfold sync`: roots that sync through a bare repository on local disk converge, keep every
//! fact either side ever archived, and keep deleted facts deleted, whatever each side did
//! between syncs; a kill at any point of a sync loses nothing; a refused push is fetched,
//! merged and pushed again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::entry_with;
use memfold::config::{Config, EmbeddingProvider};
use memfold::memory::Memory;
use memfold::planning::consolidate::pass::PassOptions;
use memfold::store::Root;
use memfold::store::archive::NewFact;
use memfold::store::entries::EntryFile;
use memfold::store::ledger::{FactFate, Ledger};
use proptest::prelude::*;

/// A bare remote and roots beside it, each opened as the CLI opens it (no LLM: the offline
/// decider, the local embedder).
struct Lab {
    dir: tempfile::TempDir,
    remote: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("remote.git");
        let out = Command::new("git").args(["init", "--quiet", "--bare"]).arg(&remote).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Lab { dir, remote }
    }

    fn config(&self, name: &str) -> Config {
        let dir = self.dir.path().join(name);
        Root::new(&dir).init().unwrap();
        let mut config = Config { root: dir, ..Config::default() };
        config.embedding.provider = EmbeddingProvider::Local;
        config
    }

    async fn root(&self, name: &str) -> Memory {
        Memory::open(self.config(name)).await.unwrap()
    }

    fn url(&self) -> String {
        self.remote.display().to_string()
    }

    /// Roots `a` and `b`, each holding memory (a fact, consolidated) before they first sync:
    /// `a` sets up sync, and `b`'s `--init` joins the two. The facts archived.
    async fn joined(&self) -> (Memory, Memory, BTreeSet<String>) {
        let (a, b) = (self.root("a").await, self.root("b").await);
        let facts =
            BTreeSet::from([add(&a, "2026-11-19", "Ana lives in Lyon"), add(&b, "2026-11-19", "Ben likes green tea")]);
        pass(&a).await;
        pass(&b).await;
        a.sync(Some(self.url())).await.unwrap();
        b.sync(Some(self.url())).await.unwrap();
        (a, b, facts)
    }
}

fn dir(memory: &Memory) -> PathBuf {
    memory.config().root.clone()
}

/// Archive `text` on `date` ("today": the day it is; an earlier day only before the root's
/// first pass, as a backdated fact after one is reported by `verify` until a pass takes it).
fn add(memory: &Memory, date: &str, text: &str) -> String {
    let date = (date != "today").then(|| date.parse().unwrap());
    let fact = NewFact { text: text.to_string(), date, source: None };
    let checked = memory.check_facts(vec![fact]).unwrap();
    memory.add(checked).unwrap().remove(0).id
}

async fn pass(memory: &Memory) {
    memory.consolidate(PassOptions { force: true, dry_run: false }).await.unwrap();
}

async fn sync(memory: &Memory) -> memfold::memory::SyncReport {
    memory.sync(None).await.unwrap_or_else(|e| panic!("sync of {}: {e}", dir(memory).display()))
}

/// The memory files of a root (no `.memfold/`, no `.git`), by path, with their bytes.
fn markdown(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for (path, bytes) in crate::common::files(root) {
        if !path.starts_with(".memfold/") && !path.starts_with(".git/") {
            out.insert(path, bytes);
        }
    }
    out.insert("tombstones".into(), std::fs::read(root.join(".memfold/tombstones.jsonl")).unwrap_or_default());
    out
}

fn head(root: &Path) -> String {
    let out = Command::new("git").arg("-C").arg(root).args(["rev-parse", "HEAD"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// verify is ok, every fact in `facts` is archived, and no current entry names a tombstoned
/// fact or is itself tombstoned.
fn sound(root: &Path, facts: &BTreeSet<String>, context: &str) {
    let ledger = Ledger::load(&Root::new(root)).unwrap();
    let report = memfold::store::verify::verify(&ledger, Vec::new());
    assert!(report.ok, "{context}: verify of {}: {:?}", root.display(), report.problems);
    let archived: BTreeSet<&str> = ledger.facts.iter().map(|f| f.id.as_str()).collect();
    for id in facts {
        assert!(archived.contains(id.as_str()), "{context}: fact {id} is missing from {}", root.display());
    }
    let fates = ledger.fates();
    let tombstoned = ledger.tombstoned_ids();
    for entry in ledger.memory.entries() {
        assert!(!tombstoned.contains(entry.id()), "{context}: tombstoned entry {} is current", entry.id());
        for source in &entry.meta.sources {
            assert_ne!(
                fates.get(source.as_str()),
                Some(&FactFate::Tombstoned),
                "{context}: {source} is tombstoned but current in {}",
                entry.id()
            );
        }
    }
}

/// What one side does between syncs.
#[derive(Debug, Clone)]
enum Step {
    Add(usize),
    Pass,
    HandEdit,
    HandDelete,
    Forget,
    Pin,
    Undo,
    Sync,
}

fn step() -> impl Strategy<Value = (bool, Step)> {
    let step = prop_oneof![
        4 => (0usize..40).prop_map(Step::Add),
        3 => Just(Step::Pass),
        1 => Just(Step::HandEdit),
        1 => Just(Step::HandDelete),
        1 => Just(Step::Forget),
        1 => Just(Step::Pin),
        1 => Just(Step::Undo),
        2 => Just(Step::Sync),
    ];
    (any::<bool>(), step)
}

/// Facts that overlap between the sides: the same sentence on both, near duplicates, updates.
fn sentence(n: usize) -> String {
    let people = ["Ana", "Ben", "Chloe", "Dev"];
    let things = ["lives in Lyon", "lives in Oslo", "likes green tea", "works at the bakery", "has a dog called Rex"];
    format!("{} {}", people[n % people.len()], things[(n / people.len()) % things.len()])
}

/// Edit the first entry of `memory.md` by hand: `content` (from its old content) and `updated`.
/// Whether there was one.
fn edit_first_entry(root: &Path, content: impl FnOnce(&str) -> String, updated: &str) -> bool {
    edit_by_hand(root, |_| true, content, updated)
}

/// Edit the first entry of `memory.md` that `pick` chooses, by hand: `content` (from its old
/// content) and `updated`. Whether there was one.
fn edit_by_hand(
    root: &Path,
    pick: impl Fn(&memfold::store::entries::Entry) -> bool,
    content: impl FnOnce(&str) -> String,
    updated: &str,
) -> bool {
    let path = root.join("consolidated/memory.md");
    let mut file = EntryFile::read(&path, "memory.md").unwrap();
    let Some(entry) = file.entries_mut().find(|e| pick(e)) else { return false };
    entry.content = content(&entry.content);
    entry.meta.updated = Some(updated.parse().unwrap());
    entry.touch();
    std::fs::write(&path, file.render()).unwrap();
    true
}

async fn run_step(memory: &Memory, step: &Step, n: usize, facts: &mut BTreeSet<String>) {
    let root = dir(memory);
    let memory_md = root.join("consolidated/memory.md");
    let first = || crate::common::first_entry_id(&root);
    match step {
        Step::Add(k) => {
            facts.insert(add(memory, "today", &sentence(*k)));
        }
        Step::Pass => pass(memory).await,
        Step::HandEdit => {
            edit_first_entry(&root, |old| format!("{old} (checked {n})"), "2026-11-21");
        }
        Step::HandDelete => {
            let text = std::fs::read_to_string(&memory_md).unwrap();
            let mut file = EntryFile::parse(&text, "memory.md");
            if let Some(id) = file.entries().last().map(|e| e.id().to_string()) {
                file.remove(&id);
                std::fs::write(&memory_md, file.render()).unwrap();
            }
        }
        Step::Forget => {
            if let Some(id) = first() {
                memory.forget(&id, Some("test")).await.unwrap();
            }
        }
        Step::Pin => {
            if let Some(id) = first() {
                memory.pin(&id, true).await.unwrap();
            }
        }
        Step::Undo => {
            let runs = memory.runs().await.unwrap();
            if let Some(run) = runs.iter().find(|r| r.undone.is_none() && r.verb.is_none()) {
                // An undo refused because its entries changed since is a fine outcome too.
                let _ = memory.undo(&run.run).await;
            }
        }
        Step::Sync => {
            sync(memory).await;
        }
    }
}

/// Sync both ways (a, b, a) and check everything the issue promises.
async fn converge(a: &Memory, b: &Memory, facts: &BTreeSet<String>, context: &str) {
    sync(a).await;
    sync(b).await;
    sync(a).await;
    let (da, db) = (dir(a), dir(b));
    let (ma, mb) = (
        std::fs::read(da.join("consolidated/memory.md")).unwrap(),
        std::fs::read(db.join("consolidated/memory.md")).unwrap(),
    );
    assert!(
        ma == mb,
        "{context}: memory.md differs:\n--- a\n{}\n--- b\n{}",
        String::from_utf8_lossy(&ma),
        String::from_utf8_lossy(&mb)
    );
    assert_eq!(markdown(&da), markdown(&db), "{context}: the synced files differ");
    sound(&da, facts, context);
    sound(&db, facts, context);
    // Another round changes nothing: no file, no commit.
    let before = (markdown(&da), head(&da), head(&db));
    let again_a = sync(a).await;
    let again_b = sync(b).await;
    assert_eq!(again_a.merges + again_b.merges, 0, "{context}: another round merged again");
    assert_eq!(before, (markdown(&da), head(&da), head(&db)), "{context}: another round changed something");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(12),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Two roots doing anything between syncs, in any order, converge.
    #[test]
    fn two_roots_converge_whatever_each_does(steps in prop::collection::vec(step(), 1..10)) {
        runtime().block_on(async {
            let lab = Lab::new();
            let (a, b, mut facts) = lab.joined().await;
            for (n, (on_a, step)) in steps.iter().enumerate() {
                run_step(if *on_a { &a } else { &b }, step, n, &mut facts).await;
            }
            converge(&a, &b, &facts, &format!("{steps:?}")).await;
        });
    }
}

/// The case the property above found: an entry deleted by hand on one machine while the other
/// edits it and promotes it into MEMORY.md. The merge removes the entry on both; the machine
/// that had deleted it must not take the other's MEMORY.md line for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_deleted_here_and_promoted_there_leaves_no_memory_md_line_anywhere() {
    let lab = Lab::new();
    let (a, b, mut facts) = lab.joined().await;
    let steps = [
        (true, Step::Add(11)),
        (false, Step::HandDelete),
        (true, Step::HandEdit),
        (true, Step::Pass),
        (true, Step::Sync),
    ];
    for (n, (on_a, step)) in steps.iter().enumerate() {
        run_step(if *on_a { &a } else { &b }, step, n, &mut facts).await;
    }
    converge(&a, &b, &facts, &format!("{steps:?}")).await;
}

/// Three roots through one remote converge; each one's facts reach the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_roots_converge() {
    let lab = Lab::new();
    let roots = [lab.root("a").await, lab.root("b").await, lab.root("c").await];
    let mut facts = BTreeSet::new();
    for (i, root) in roots.iter().enumerate() {
        for k in 0..4 {
            facts.insert(add(root, "2026-11-20", &sentence(i * 7 + k)));
        }
        pass(root).await;
        root.sync(Some(lab.url())).await.unwrap();
    }
    // c searched before: its index exists and must catch up with what the syncs bring.
    let request = memfold::memory::SearchRequest { skip_recall: true, ..Default::default() };
    assert!(
        roots[2].search("Chloe moved to Oslo", &request).await.unwrap().iter().all(|h| !h.text.contains("Chloe moved"))
    );
    facts.insert(add(&roots[0], "today", "Chloe moved to Oslo"));
    pass(&roots[1]).await;
    for root in roots.iter().chain(roots.iter()) {
        sync(root).await;
    }
    let hits = roots[2].search("Chloe moved to Oslo", &request).await.unwrap();
    assert!(
        hits.iter().any(|h| h.text.contains("Chloe moved to Oslo")),
        "a fact from another machine is found: {hits:?}"
    );
    let first = markdown(&dir(&roots[0]));
    for root in &roots {
        assert_eq!(markdown(&dir(root)), first, "{} differs", dir(root).display());
        sound(&dir(root), &facts, "three roots");
    }
}

/// Someone pushed first: the push is refused, the sync fetches, merges and pushes again, and
/// both updates are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_is_merged_and_pushed_again() {
    let lab = Lab::new();
    let (a, b) = (lab.root("a").await, lab.root("b").await);
    let fa = add(&a, "2026-11-20", "Ana lives in Lyon");
    a.sync(Some(lab.url())).await.unwrap();
    b.sync(Some(lab.url())).await.unwrap();
    // b fetches what a has, then a pushes before b does: b's first push is refused.
    let fb = add(&b, "2026-11-20", "Ben works at the bakery");
    let fa2 = add(&a, "2026-11-20", "Ana likes green tea");
    let hook = dir(&b).join(".git/hooks/pre-push");
    let a_root = dir(&a);
    let exe = std::env::var("CARGO_BIN_EXE_memfold").unwrap();
    // The hook makes a push from a land between b's fetch and b's push, once.
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ ! -e {raced} ]; then touch {raced}; env -u GIT_DIR MEMFOLD_EMBEDDING__PROVIDER=local {exe} --root {} sync >/dev/null 2>&1; fi\nexit 0\n",
            a_root.display(),
            raced = dir(&b).join(".git/raced").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = sync(&b).await;
    assert!(dir(&b).join(".git/raced").exists(), "the hook did not run");
    assert!(report.merges >= 1 && report.pushed, "{report:?}");
    sync(&a).await;
    let facts: BTreeSet<String> = [fa, fb, fa2].into();
    for root in [&a, &b] {
        sound(&dir(root), &facts, "refused push");
    }
    assert_eq!(markdown(&dir(&a)), markdown(&dir(&b)));
}

/// Changed on both machines: the later version stays current, the other goes to history, and a
/// plan for review offers it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_changed_on_two_machines_goes_to_review() {
    let lab = Lab::new();
    let (a, b) = (lab.root("a").await, lab.root("b").await);
    add(&a, "2026-11-20", "Ana lives in Lyon");
    pass(&a).await;
    a.sync(Some(lab.url())).await.unwrap();
    b.sync(Some(lab.url())).await.unwrap();
    assert!(edit_first_entry(&dir(&a), |_| "Ana lives in Lyon, near the river".into(), "2026-11-21"));
    assert!(edit_first_entry(&dir(&b), |_| "Ana lives in Lyon, in the old town".into(), "2026-11-22"));
    sync(&a).await;
    let report = sync(&b).await;
    assert_eq!(report.merged.conflicts.len(), 1, "{report:?}");
    let plan = report.merged.plan.clone().expect("a plan for review");
    sync(&a).await;
    for root in [&a, &b] {
        let text = std::fs::read_to_string(dir(root).join("consolidated/memory.md")).unwrap();
        assert!(text.contains("in the old town"), "the later version is current: {text}");
        let history = std::fs::read_to_string(dir(root).join("consolidated/history.md")).unwrap();
        assert!(history.contains("near the river"), "the other version is in history: {history}");
    }
    let plans = b.plans().await.unwrap();
    let stored = plans.iter().find(|p| p.id == plan).expect("the plan is listed");
    assert_eq!(stored.reason.as_str(), "sync");
    b.apply_plan(&plan).await.unwrap();
    let text = std::fs::read_to_string(dir(&b).join("consolidated/memory.md")).unwrap();
    assert!(text.contains("near the river"), "applying the plan brings the other version back: {text}");
    sound(&dir(&b), &BTreeSet::new(), "after apply");
}

/// Edit the entry `id` of `memory.md` by hand.
fn edit_entry(root: &Path, id: &str, content: &str, updated: &str) {
    assert!(edit_by_hand(root, |e| e.id() == id, |_| content.to_string(), updated), "no entry {id}");
}

/// Removed on one machine (folded into another entry by a merge there; taken back by an undo
/// of its ADD there) and changed on the other: the change stays current on both, and a plan
/// for review removes it as the first machine did. Applied, both machines end without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_removed_on_one_machine_and_changed_on_the_other_goes_to_review() {
    let lab = Lab::new();
    let (a, b) = (lab.root("a").await, lab.root("b").await);
    let facts: BTreeSet<String> = ["Ana lives in Lyon", "Ben likes green tea", "Cleo plays chess on Sundays"]
        .into_iter()
        .map(|t| add(&a, "2026-11-20", t))
        .collect();
    pass(&a).await;
    a.sync(Some(lab.url())).await.unwrap();
    b.sync(Some(lab.url())).await.unwrap();
    let (da, db) = (dir(&a), dir(&b));
    let [ana, ben, cleo] = ["Ana", "Ben", "Cleo"].map(|w| entry_with(&da, w).expect(w));

    // On a: the ADD of Ana's entry undone, and Ben's entry folded into Cleo's.
    let run = a.runs().await.unwrap().into_iter().find(|r| r.verb.is_none()).unwrap().run;
    let journal = std::fs::read_to_string(da.join(".memfold/journal.jsonl")).unwrap();
    let seq = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["run"] == run.as_str() && r["op"] == "ADD" && r["changes"][0]["entry"] == ana.as_str())
        .map(|r| r["seq"].as_u64().unwrap() as usize + 1) // ops count from 1
        .expect("the ADD of Ana's entry");
    a.undo_part(&run, &memfold::memory::Undo { ops: vec![seq], ..Default::default() }).await.unwrap();
    a.merge(&[cleo.clone(), ben.clone()], Some("Cleo plays chess on Sundays; Ben likes green tea"), None)
        .await
        .unwrap();
    assert_eq!(entry_with(&da, "Ana"), None);
    assert_eq!(entry_with(&da, "Ben likes green tea; "), None, "ben's entry left a");
    // On b: both changed by hand.
    edit_entry(&db, &ana, "Ana lives in Lyon, near the river", "2026-11-21");
    edit_entry(&db, &ben, "Ben likes green tea, no sugar", "2026-11-21");

    sync(&a).await;
    let report = sync(&b).await;
    sync(&a).await;
    let plan = report.merged.plan.clone().expect("a plan for review");
    assert_eq!(report.merged.conflicts.len(), 2, "{report:?}");
    for root in [&da, &db] {
        let text = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
        assert!(text.contains("near the river") && text.contains("no sugar"), "nothing is lost meanwhile: {text}");
        sound(root, &facts, "before review");
    }
    let detail = b.plan_detail(&plan).await.unwrap();
    let ops: Vec<String> =
        detail.groups.iter().flat_map(|g| &g.ops).map(|o| memfold::doors::render::op_label(&o.op)).collect();
    assert!(ops.contains(&format!("RETIRE {ana}")), "{ops:?}");
    assert!(ops.contains(&format!("REMOVE {ben} into {cleo}")), "{ops:?}");

    b.apply_plan(&plan).await.unwrap();
    sync(&b).await;
    sync(&a).await;
    for root in [&da, &db] {
        assert_eq!(entry_with(root, "near the river"), None, "{}", root.display());
        assert_eq!(entry_with(root, "no sugar"), None, "{}", root.display());
        let cleo_now = EntryFile::read(&root.join("consolidated/memory.md"), "memory.md").unwrap();
        let cleo_now = cleo_now.get(&cleo).expect("cleo's entry stays");
        let ben_facts = facts.iter().filter(|f| !cleo_now.meta.sources.contains(f)).count();
        assert_eq!(ben_facts, 1, "cleo's entry holds ben's fact and its own, ana's is pending: {cleo_now:?}");
        sound(root, &facts, "after apply");
    }
    assert_eq!(markdown(&da), markdown(&db));
}

/// A person on one machine leaves a block of `memory.md` open (a code fence without its end),
/// which hides the entries after it there. The other machine's sync refuses to merge that file,
/// says where and what to do, and writes nothing; once it is mended there, both converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_left_open_on_one_machine_is_not_merged_until_it_is_mended() {
    let lab = Lab::new();
    let (a, b) = (lab.root("a").await, lab.root("b").await);
    let facts: BTreeSet<String> =
        ["Ana lives in Lyon", "Ben likes green tea"].into_iter().map(|t| add(&a, "2026-11-20", t)).collect();
    pass(&a).await;
    a.sync(Some(lab.url())).await.unwrap();
    b.sync(Some(lab.url())).await.unwrap();
    let (da, db) = (dir(&a), dir(&b));
    let memory_b = db.join("consolidated/memory.md");
    let text = std::fs::read_to_string(&memory_b).unwrap();
    let first = EntryFile::parse(&text, "memory.md").entries().next().unwrap().content.clone();
    std::fs::write(&memory_b, text.replacen(&first, &format!("{first}\n```sh\nmake"), 1)).unwrap();
    sync(&b).await;
    // On a, memory.md is changed too, so the merge is entry by entry.
    edit_first_entry(&da, |old| format!("{old} (checked)"), "2026-11-21");
    let before = markdown(&da);
    let err = a.sync(None).await.expect_err("the merge would hide entries");
    let message = err.to_string();
    assert!(message.contains("origin/main") && message.contains("left open"), "{message}");
    assert!(message.contains("mend"), "{message}");
    assert_eq!(markdown(&da), before, "nothing was written");
    sound(&da, &facts, "after the refused merge");
    let status = a.sync_status().await.unwrap();
    assert!(status.state.last_error.as_deref().is_some_and(|e| e.contains("left open")), "{status:?}");

    // Mended on b: both converge.
    let text = std::fs::read_to_string(&memory_b).unwrap();
    std::fs::write(&memory_b, text.replacen("```sh\nmake", "```sh\nmake\n```", 1)).unwrap();
    sync(&b).await;
    converge(&a, &b, &facts, "mended").await;
    let text = std::fs::read_to_string(da.join("consolidated/memory.md")).unwrap();
    assert!(text.contains("(checked)") && text.contains("Ben likes green tea"), "{text}");
}

/// A fact forgotten on one machine while the other consolidated it: after the sync it is
/// current nowhere, and the entry's other facts are pending again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_forgotten_on_one_machine_is_gone_on_both() {
    let lab = Lab::new();
    let (a, b) = (lab.root("a").await, lab.root("b").await);
    let secret = add(&a, "2026-11-20", "Ana's door code is 4512");
    a.sync(Some(lab.url())).await.unwrap();
    b.sync(Some(lab.url())).await.unwrap();
    a.forget(&secret, Some("not to keep")).await.unwrap();
    pass(&b).await; // b consolidates it meanwhile
    let entry_on_b = EntryFile::read(&dir(&b).join("consolidated/memory.md"), "memory.md").unwrap();
    assert!(entry_on_b.entries().any(|e| e.meta.sources.contains(&secret)));
    sync(&a).await;
    sync(&b).await;
    sync(&a).await;
    for root in [&a, &b] {
        let text = std::fs::read_to_string(dir(root).join("consolidated/memory.md")).unwrap();
        assert!(!text.contains("4512"), "{}: {text}", dir(root).display());
        sound(&dir(root), &[secret.clone()].into(), "forgotten");
    }
}

/// A root that is not set up says how to set it up; a remote that cannot be reached leaves
/// the files as they were and says why in `sync --status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_changes_nothing_and_says_why() {
    let lab = Lab::new();
    let a = lab.root("a").await;
    let err = a.sync(None).await.unwrap_err();
    assert!(err.to_string().contains("memfold sync --init"), "{err}");
    add(&a, "2026-11-20", "Ana lives in Lyon");
    let missing = lab.dir.path().join("nowhere.git").display().to_string();
    let before = markdown(&dir(&a));
    let err = a.sync(Some(missing)).await.unwrap_err();
    assert!(err.to_string().contains("sync:"), "{err}");
    // Setting up wrote `.gitignore`; no memory file changed.
    let mut after = markdown(&dir(&a));
    assert!(after.remove(".gitignore").is_some());
    assert_eq!(before, after);
    let status = a.sync_status().await.unwrap();
    assert!(status.enabled);
    assert!(
        status.state.last_error.as_deref().is_some_and(|e| e.contains("nowhere.git") || e.contains("repository")),
        "{status:?}"
    );
    assert!(status.state.last_sync.is_none());
}

/// kill -9 at every point a sync writes (the local commit, the merge change's record and each
/// file, the merge commit): `verify` is ok, and the next sync finishes with nothing lost.
#[test]
fn a_sync_killed_anywhere_loses_nothing() {
    let rt = runtime();
    let lab = Lab::new();
    let (template_a, facts) = rt.block_on(async {
        let (a, b, mut facts) = lab.joined().await;
        // b's changes since: an edit, a forget, new facts; a's too. a's next sync merges them.
        facts.insert(add(&b, "today", "Ben works at the bakery"));
        pass(&b).await;
        let first = crate::common::first_entry_id(&dir(&b)).unwrap();
        b.forget(&first, None).await.unwrap();
        sync(&b).await;
        facts.insert(add(&a, "today", "Ana has a dog called Rex"));
        (dir(&a), facts)
    });
    let points = [
        "sync:staged",
        "sync:committed",
        "sync:recorded",
        "sync:step1",
        "sync:step2",
        "sync:step3",
        "sync:step4",
        "sync:step5",
        "sync:step6",
        "sync:done",
        "sync:merge-staged",
        "sync:merged",
    ];
    let mut paused = 0;
    for (i, at) in points.iter().enumerate() {
        // Each trial on a copy of a (with its own copy of the remote, so trials do not meet).
        let trial = lab.dir.path().join(format!("trial-{i}"));
        std::fs::create_dir_all(&trial).unwrap();
        memfold::testkit::copy_dir(&template_a, &trial.join("a")).unwrap();
        memfold::testkit::copy_dir(&lab.remote, &trial.join("remote.git")).unwrap();
        let root = trial.join("a");
        let url = trial.join("remote.git").display().to_string();
        let set =
            Command::new("git").arg("-C").arg(&root).args(["remote", "set-url", "origin", &url]).output().unwrap();
        assert!(set.status.success());
        let mut cmd = crate::common::bin();
        cmd.arg("--root").arg(&root).arg("sync").env("MEMFOLD_LOG", "warn").env("MEMFOLD_TEST_PAUSE_AT", at);
        if !kill_when_paused(cmd) {
            continue;
        }
        paused += 1;
        let out = crate::common::memfold(&root, &["verify", "--json"], &[]);
        assert!(out.status.success(), "{at}: verify after the kill: {}", String::from_utf8_lossy(&out.stdout));
        let out = crate::common::memfold(&root, &["sync"], &[]);
        assert!(out.status.success(), "{at}: the next sync: {}", String::from_utf8_lossy(&out.stderr));
        sound(&root, &facts, at);
        // And what the remote now holds is what a fresh root gets.
        let fresh = trial.join("fresh");
        let out = crate::common::memfold(&fresh, &["init"], &[]);
        assert!(out.status.success());
        let out = crate::common::memfold(&fresh, &["sync", "--init", &url], &[]);
        assert!(out.status.success(), "{at}: {}", String::from_utf8_lossy(&out.stderr));
        sound(&fresh, &facts, &format!("{at} (fresh)"));
        assert_eq!(
            std::fs::read(root.join("consolidated/memory.md")).unwrap(),
            std::fs::read(fresh.join("consolidated/memory.md")).unwrap(),
            "{at}: the fresh root differs"
        );
    }
    assert!(paused >= 8, "only {paused} points were reached");
}

/// Run `cmd`, SIGKILL it once it says it paused; whether it paused (else it ran to its end).
fn kill_when_paused(mut cmd: Command) -> bool {
    use std::io::{BufRead, BufReader};
    let mut child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("memfold: paused at") {
                let _ = tx.send(());
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    let paused = rx.recv_timeout(std::time::Duration::from_secs(120)).is_ok();
    if paused {
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    let seen = reader.join().unwrap();
    if !paused {
        assert!(status.success(), "ran to its end but failed: {seen}");
    }
    paused
}

/// What the remote's branch holds in `path`, if it has the branch.
fn on_remote(remote: &Path, path: &str) -> Option<String> {
    let spec = format!("main:{path}");
    let out = Command::new("git").arg("--git-dir").arg(remote).args(["show", &spec]).output().unwrap();
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The daemon syncs on its schedule (the first tick, when it never synced) and after a pass
/// that applied something; `status` says when it last did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_syncs_on_its_schedule_and_after_a_pass() {
    use crate::common::daemon::{Fixture, eventually};
    use std::time::Duration;
    let lab = Lab::new();
    let fixture = Fixture::new();
    let url = lab.url();
    let env = [
        ("MEMFOLD_SYNC__REMOTE", url.as_str()),
        ("MEMFOLD_SYNC__INTERVAL_MINUTES", "60"),
        ("MEMFOLD_CONSOLIDATION__INTERVAL_SECONDS", "1"),
    ];
    let daemon = fixture.serve(&env).await;
    eventually(Duration::from_secs(60), "the first scheduled sync", async || on_remote(&lab.remote, ".gitignore"))
        .await;
    daemon.add(&["Ana lives in Lyon"]).await;
    let (code, report) = daemon.post("/consolidate", serde_json::json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    eventually(Duration::from_secs(60), "a sync after the pass", async || {
        on_remote(&lab.remote, "consolidated/memory.md").filter(|m| m.contains("Ana lives in Lyon"))
    })
    .await;
    let (_, status) = daemon.get("/status").await;
    assert!(status["sync"]["last_sync"].is_string(), "{status}");
    daemon.stop().await;
}

/// Each space of a home is a repository of its own, syncing with its own remote: what one space
/// holds never reaches another's remote.
#[test]
fn each_space_of_a_home_syncs_with_its_own_remote() {
    let lab = Lab::new();
    let home = crate::common::home::Home::new(&["work", "personal"], &[], "");
    let work_remote = lab.dir.path().join("work.git");
    let out = Command::new("git").args(["init", "--quiet", "--bare"]).arg(&work_remote).output().unwrap();
    assert!(out.status.success());
    home.ok(Some("work"), &["add", "The deploy runs on Fridays"]);
    home.ok(Some("personal"), &["add", "Ana's birthday is in May"]);
    home.ok(Some("work"), &["sync", "--init", &work_remote.display().to_string()]);
    home.ok(Some("personal"), &["sync", "--init", &lab.url()]);
    let day = |remote: &Path| {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(remote)
            .args(["ls-tree", "-r", "--name-only", "main"])
            .output()
            .unwrap();
        let files = String::from_utf8_lossy(&out.stdout).into_owned();
        let day = files.lines().find(|l| l.starts_with("archive/")).expect("a day file").to_string();
        on_remote(remote, &day).unwrap()
    };
    let (work, personal) = (day(&work_remote), day(&lab.remote));
    assert!(work.contains("deploy") && !work.contains("birthday"), "{work}");
    assert!(personal.contains("birthday") && !personal.contains("deploy"), "{personal}");
    assert!(home.space("work").join(".git").is_dir() && !home.path().join(".git").exists());
    let status = home.json(Some("work"), &["sync", "--status", "--json"]);
    assert_eq!(status["enabled"], true, "{status}");
    assert_eq!((status["ahead"].as_u64(), status["behind"].as_u64()), (Some(0), Some(0)), "{status}");
}

/// `[sync] remote` sets a root up the first time; a remote set since by `sync --init` stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_remote_sets_a_root_up_once() {
    let lab = Lab::new();
    let other = lab.dir.path().join("other.git");
    assert!(Command::new("git").args(["init", "--quiet", "--bare"]).arg(&other).status().unwrap().success());
    let mut config = lab.config("a");
    config.sync.remote = lab.url();
    let a = Memory::open(config).await.unwrap();
    add(&a, "today", "Ana lives in Lyon");
    assert_eq!(a.sync(None).await.unwrap().remote, lab.url(), "set up from the configuration");
    let other = other.display().to_string();
    a.sync(Some(other.clone())).await.unwrap();
    assert_eq!(a.sync(None).await.unwrap().remote, other, "--init's remote is kept");
    assert!(on_remote(Path::new(&other), ".gitignore").is_some());
}

/// A scratch clone of the remote, where a test writes commits no memfold would.
struct Forge {
    dir: PathBuf,
}

impl Forge {
    fn clone_of(lab: &Lab) -> Forge {
        let dir = lab.dir.path().join("forge");
        git(lab.dir.path(), &["clone", "--quiet", "--branch", "main", &lab.url(), "forge"]);
        git(&dir, &["config", "user.name", "forge"]);
        git(&dir, &["config", "user.email", "forge@example.org"]);
        Forge { dir }
    }

    /// Commit what `edit` does to the work tree and push it.
    fn push(&self, message: &str, edit: impl FnOnce(&Path)) {
        git(&self.dir, &["pull", "--quiet", "--no-rebase", "origin", "main"]);
        edit(&self.dir);
        git(&self.dir, &["add", "--all"]);
        git(&self.dir, &["commit", "--quiet", "-m", message]);
        git(&self.dir, &["push", "--quiet", "origin", "HEAD:main"]);
    }

    /// Push a commit whose tree is the remote's with `entries` added at its top, written as raw
    /// tree bytes (what `git mktree` would refuse): `(mode, name, object)`.
    fn push_raw_tree(&self, entries: &[(&str, &str, String)]) -> String {
        git(&self.dir, &["pull", "--quiet", "--no-rebase", "origin", "main"]);
        let mut raw: Vec<(String, Vec<u8>)> = Vec::new();
        for line in git(&self.dir, &["ls-tree", "HEAD"]).lines() {
            let (meta, name) = line.split_once('\t').unwrap();
            let mut parts = meta.split_whitespace();
            let (mode, _, id) = (parts.next().unwrap(), parts.next(), parts.next().unwrap());
            raw.push((name.to_string(), entry_bytes(mode, name, id)));
        }
        for (mode, name, id) in entries {
            raw.push((name.to_string(), entry_bytes(mode, name, id)));
        }
        raw.sort_by(|a, b| a.0.cmp(&b.0));
        let bytes: Vec<u8> = raw.into_iter().flat_map(|(_, b)| b).collect();
        let tree = git_stdin(&self.dir, &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"], &bytes);
        let commit = git(&self.dir, &["commit-tree", tree.trim(), "-p", "HEAD", "-m", "a tree git would refuse"]);
        git(&self.dir, &["push", "--quiet", "--force", "origin", &format!("{}:refs/heads/main", commit.trim())]);
        commit.trim().to_string()
    }

    fn blob(&self, text: &str) -> String {
        git_stdin(&self.dir, &["hash-object", "-w", "--stdin"], text.as_bytes()).trim().to_string()
    }

    fn tree(&self, entries: &[(&str, &str, String)]) -> String {
        let bytes: Vec<u8> = entries.iter().flat_map(|(mode, name, id)| entry_bytes(mode, name, id)).collect();
        git_stdin(&self.dir, &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"], &bytes).trim().to_string()
    }
}

fn entry_bytes(mode: &str, name: &str, id: &str) -> Vec<u8> {
    let mut out = format!("{} {name}\0", mode.trim_start_matches('0')).into_bytes();
    out.extend(hex_bytes(id));
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn git_stdin(dir: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a sync must leave alone: every file of the lab outside the roots, the remote and the
/// forge, and the memory files of each root.
fn tree_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = crate::common::files(dir)
        .into_iter()
        .filter(|(p, _)| !["a/", "b/", "remote.git/", "forge/"].iter().any(|top| p.starts_with(top)))
        .collect();
    for root in ["a", "b"] {
        for (path, bytes) in markdown(&dir.join(root)) {
            out.insert(format!("{root}/{path}"), bytes);
        }
    }
    out
}

#[tokio::test]
async fn a_remote_commit_with_paths_outside_memfolds_files_writes_none_of_them() {
    let lab = Lab::new();
    let (a, _b, facts) = lab.joined().await;
    sync(&a).await; // b's side of the join
    let forge = Forge::clone_of(&lab);
    let da = dir(&a);
    let token_before = std::fs::read(da.join(".memfold/token")).ok();

    // Trees git itself refuses when it checks what it fetches: `..`, `.git`, a name with a slash.
    let planted = forge.blob("ssh-ed25519 AAAA planted\n");
    let sub = forge.tree(&[("100644", "authorized_keys", planted.clone())]);
    for (mode, name, id) in [
        ("40000", "..", sub.clone()),
        ("40000", ".git", forge.tree(&[("100644", "config", planted.clone())])),
        ("100644", "../x", planted.clone()),
        ("100644", "/abs", planted.clone()),
    ] {
        let before = tree_bytes(lab.dir.path());
        let good = git(&forge.dir, &["rev-parse", "HEAD"]);
        forge.push_raw_tree(&[(mode, name, id)]);
        let err = a.sync(None).await.expect_err(&format!("a tree entry {name:?} is refused")).to_string();
        assert!(err.contains("fsck") || err.contains("has") || err.contains("contains"), "{name}: {err}");
        assert_eq!(tree_bytes(lab.dir.path()), before, "{name}: nothing was written anywhere");
        assert!(!lab.dir.path().join("x").exists() && !lab.dir.path().join("authorized_keys").exists());
        git(&forge.dir, &["push", "--quiet", "--force", "origin", &format!("{}:refs/heads/main", good.trim())]);
        git(&forge.dir, &["reset", "--quiet", "--hard", good.trim()]);
    }

    // Paths git lets through but that are not memfold's: named, never written.
    forge.push("plant settings", |w| {
        std::fs::write(w.join("memfold.toml"), "[llm]\nbase_url = \"http://attacker.example/v1\"\n").unwrap();
        std::fs::create_dir_all(w.join(".memfold/plans")).unwrap();
        std::fs::write(w.join(".memfold/token"), "planted\n").unwrap();
        std::fs::write(w.join(".memfold/plans/p.json"), "{}\n").unwrap();
        std::fs::write(w.join(".gitignore"), "").unwrap();
        std::fs::create_dir_all(w.join("notes")).unwrap();
        std::fs::write(w.join("notes/todo.md"), "- x\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", w.join("archive/2026-11-25.md")).unwrap();
    });
    let before = markdown(&da);
    let report = sync(&a).await;
    let refused = &report.merged.refused;
    for path in [
        ".memfold/plans/p.json",
        ".memfold/token",
        ".gitignore",
        "archive/2026-11-25.md",
        "memfold.toml",
        "notes/todo.md",
    ] {
        assert!(refused.iter().any(|p| p == path), "{path} is named: {refused:?}");
    }
    assert!(!da.join("memfold.toml").exists() && !da.join("notes").exists());
    assert!(std::fs::symlink_metadata(da.join("archive/2026-11-25.md")).is_err());
    assert_eq!(std::fs::read(da.join(".memfold/token")).ok(), token_before);
    assert!(!da.join(".memfold/plans/p.json").exists());
    assert_eq!(markdown(&da), before, "memory files unchanged by the refused paths");
    sound(&da, &facts, "after the planted commit");
}

#[tokio::test]
async fn a_remote_that_drops_tombstones_or_rewrites_a_fact_changes_nothing_here() {
    let lab = Lab::new();
    let (a, b, facts) = lab.joined().await;
    let gone = crate::common::first_entry_id(&dir(&a)).unwrap();
    a.forget(&gone, Some("no longer true")).await.unwrap();
    sync(&a).await;
    sync(&b).await;
    let db = dir(&b);
    let tombstones = std::fs::read(db.join(".memfold/tombstones.jsonl")).unwrap();
    assert!(!tombstones.is_empty());
    let forge = Forge::clone_of(&lab);

    // The tombstones emptied on the remote: none leaves here, and the report says so.
    forge.push("empty the tombstones", |w| std::fs::write(w.join(".memfold/tombstones.jsonl"), "").unwrap());
    let report = sync(&b).await;
    assert_eq!(std::fs::read(db.join(".memfold/tombstones.jsonl")).unwrap(), tombstones);
    assert!(report.merged.fewer.iter().any(|p| p == ".memfold/tombstones.jsonl"), "{:?}", report.merged);
    assert!(!std::fs::read_to_string(db.join("consolidated/memory.md")).unwrap().contains(&gone));
    sound(&db, &facts, "after the emptied tombstones");

    // An archived fact rewritten on the remote (same id, hash dropped): refused, named, nothing
    // written here.
    let day = std::fs::read_dir(db.join("archive")).unwrap().next().unwrap().unwrap().path();
    let name = format!("archive/{}", day.file_name().unwrap().to_string_lossy());
    let archived = std::fs::read(db.join(&name)).unwrap();
    forge.push("rewrite a fact", |w| {
        let text = std::fs::read_to_string(w.join(&name)).unwrap();
        let line = text.lines().find(|l| l.contains("<!--f ")).unwrap().to_string();
        let id = line.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        let forged = format!("- 09:00 Everything above was a mistake <!--f {{\"id\":\"{id}\"}}-->");
        std::fs::write(w.join(&name), text.replace(&line, &forged)).unwrap();
    });
    let before = markdown(&db);
    let err = b.sync(None).await.expect_err("a rewritten fact is refused").to_string();
    assert!(err.contains(&name) && err.contains("rewritten on origin/main"), "{err}");
    assert_eq!(std::fs::read(db.join(&name)).unwrap(), archived);
    assert_eq!(markdown(&db), before);
    let status = b.sync_status().await.unwrap();
    assert!(status.state.last_error.as_deref().is_some_and(|e| e.contains("rewritten")), "{status:?}");
    sound(&db, &facts, "after the refused rewrite");
}
