use super::*;
use memfold_store::entries::EntryMeta;
use memfold_store::state::State;

fn entry(id: &str, text: &str, updated: &str, sources: &[&str]) -> Entry {
    let mut meta = EntryMeta::new(id);
    meta.updated = Some(updated.parse().unwrap());
    meta.sources = sources.iter().map(|s| s.to_string()).collect();
    Entry::new(meta, text)
}

fn file(entries: &[Entry]) -> String {
    let mut file = EntryFile::default();
    for e in entries {
        file.push(e.clone());
    }
    file.render()
}

fn side(base: &str, ours: &str, theirs: &str) -> Side {
    Side { base: Some(base.into()), ours: Some(ours.into()), theirs: Some(theirs.into()) }
}

fn ledger(memory: &str) -> Ledger {
    Ledger {
        facts: Vec::new(),
        memory: EntryFile::parse(memory, MEMORY),
        history: EntryFile::default(),
        tombstones: Vec::new(),
        state: State::default(),
        problems: Vec::new(),
    }
}

fn plan_of(ledger: &Ledger, files: &BTreeMap<String, Side>) -> (Change, Merged) {
    let request = Request {
        ledger,
        files,
        other: "origin/main abc",
        run: "r-20261128T000000Z-sync-abcd",
        now: "2026-11-28T00:00:00Z".parse().unwrap(),
        today: "2026-11-28".parse().unwrap(),
        secrets: SecretsPolicy::Redact,
    };
    plan(&request).unwrap()
}

fn plan_result(ledger: &Ledger, files: &BTreeMap<String, Side>) -> Result<(Change, Merged), Problem> {
    let request = Request {
        ledger,
        files,
        other: "origin/main abc",
        run: "r-20261128T000000Z-sync-abcd",
        now: "2026-11-28T00:00:00Z".parse().unwrap(),
        today: "2026-11-28".parse().unwrap(),
        secrets: SecretsPolicy::Redact,
    };
    plan(&request)
}

const DAY: &str = "archive/2026-11-20.md";

fn day(lines: &[&str]) -> String {
    let mut text = "# 2026-11-20\n\n".to_string();
    for l in lines {
        let fact = Fact::sample(&archive::fact_id("2026-11-20".parse().unwrap(), l, 0), "2026-11-20", l);
        text.push_str(&archive::render_line(&fact));
    }
    text
}

#[test]
fn a_day_file_changed_there_only_takes_its_bytes_and_changed_on_both_gets_what_it_lacks() {
    let base = day(&["tea"]);
    let theirs = day(&["lyon", "tea"]);
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &base, &theirs))]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert_eq!(merged.facts, 1);
    assert!(matches!(&change.files[..], [FileWrite::Replace { text, .. }] if *text == theirs), "{:?}", change.files);

    let ours = day(&["tea", "rex"]);
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &ours, &theirs))]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert_eq!(merged.facts, 1);
    match &change.files[..] {
        [FileWrite::Append { text, .. }] => assert!(text.contains("lyon") && !text.contains("tea")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_fact_deleted_by_hand_on_the_other_machine_stays_here() {
    let base = day(&["tea", "rex"]);
    let theirs = day(&["tea", "lyon"]); // rex deleted there, lyon added
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &base, &theirs))]);
    let (change, _) = plan_of(&ledger(""), &files);
    match &change.files[..] {
        [FileWrite::Append { text, .. }] => assert!(text.contains("lyon")),
        other => panic!("the archive keeps rex: {other:?}"),
    }
}

#[test]
fn entries_merge_by_id_and_a_conflict_keeps_the_later_and_offers_the_other() {
    let a = entry("m-a", "Ana lives in Lyon", "2026-11-01", &[]);
    let b = entry("m-b", "Ben likes tea", "2026-11-01", &[]);
    let base = file(&[a.clone(), b.clone()]);
    let ours = file(&[entry("m-a", "Ana lives in Lyon, near the river", "2026-11-02", &[]), b.clone()]);
    let theirs = file(&[
        entry("m-a", "Ana lives in Lyon, in the old town", "2026-11-03", &[]),
        entry("m-b", "Ben likes green tea", "2026-11-02", &[]),
        entry("m-c", "Chloe plays chess", "2026-11-02", &[]),
    ]);
    let files = BTreeMap::from([(MEMORY.to_string(), side(&base, &ours, &theirs))]);
    let (change, merged) = plan_of(&ledger(&ours), &files);
    let text = &change.memory.as_ref().unwrap().text;
    assert!(text.contains("in the old town") && text.contains("green tea") && text.contains("chess"), "{text}");
    assert_eq!(merged.entries, 3);
    assert_eq!(
        merged.conflicts,
        vec![Conflict { entry: "m-a".into(), kind: ConflictKind::ChangedOnBoth, theirs_kept: true }]
    );
    match &change.history {
        Some(HistoryWrite::Rewrite { text, .. }) => {
            assert!(text.contains("near the river") && text.contains("\"status\":\"replaced\""), "{text}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(merged.plan.as_deref(), Some("r-20261128T000000Z-sync-abcd"));
    let plan = change.records.iter().find(|(p, _)| p.contains("plans/")).and_then(|(_, t)| t.clone()).unwrap();
    assert!(plan.contains("near the river") && plan.contains("\"reason\": \"sync\""), "{plan}");
}

/// The stored review plan of a merge, as its JSON text.
fn stored_plan(change: &Change) -> serde_json::Value {
    let text = change.records.iter().find(|(p, _)| p.contains("plans/")).and_then(|(_, t)| t.clone()).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn removed_on_one_side_and_changed_on_the_other_keeps_the_change_and_offers_the_removal() {
    let a = entry("m-a", "Ana lives in Lyon", "2026-11-01", &[]);
    let b = entry("m-b", "Ben likes tea", "2026-11-01", &[]);
    let oslo = entry("m-a", "Ana lives in Oslo", "2026-11-02", &[]);
    let base = file(&[a.clone(), b.clone()]);
    let ours = file(std::slice::from_ref(&b)); // m-a removed here (an undo: no history leads on)
    let theirs = file(&[oslo.clone(), b.clone()]);
    let files = BTreeMap::from([(MEMORY.to_string(), side(&base, &ours, &theirs))]);
    let (change, merged) = plan_of(&ledger(&ours), &files);
    assert!(change.memory.as_ref().unwrap().text.contains("Oslo"), "nothing is lost meanwhile");
    assert_eq!(merged.conflicts[0].kind, ConflictKind::RemovedHere);
    assert_eq!(merged.plan.as_deref(), Some("r-20261128T000000Z-sync-abcd"));
    let plan = stored_plan(&change);
    assert_eq!(plan["reason"], "sync");
    let op = &plan["journal"][0];
    assert_eq!((op["op"].as_str(), op["target"].as_str()), (Some("RETIRE"), Some("m-a")), "{plan}");
    assert!(op["why"].as_str().unwrap().starts_with("removed on this machine, changed on origin/main abc"));

    // Folded into m-b here: the plan folds it the same way.
    let mut here = ledger(&ours);
    let mut folded = a.clone();
    folded.meta.status = Some(HistoryStatus::Merged);
    folded.meta.superseded_by = Some("m-b".into());
    here.history.push(folded.clone());
    let (change, _) = plan_of(&here, &files);
    let plan = stored_plan(&change);
    let op = &plan["journal"][0];
    assert_eq!((op["op"].as_str(), op["into"].as_str()), (Some("REMOVE"), Some("m-b")), "{plan}");

    // The other way round: removed there (folded into m-b, as its history says), changed here.
    let ours = theirs.clone();
    let theirs = file(std::slice::from_ref(&b));
    let mut files = BTreeMap::from([(MEMORY.to_string(), side(&base, &ours, &theirs))]);
    files.insert(HISTORY.to_string(), side("", "", &file(std::slice::from_ref(&folded))));
    let (change, merged) = plan_of(&ledger(&ours), &files);
    assert!(change.memory.is_none(), "this machine's change stays as it is");
    assert_eq!(merged.conflicts[0].kind, ConflictKind::RemovedThere);
    let plan = stored_plan(&change);
    let op = &plan["journal"][0];
    assert_eq!(
        (op["op"].as_str(), op["target"].as_str(), op["into"].as_str()),
        (Some("REMOVE"), Some("m-a"), Some("m-b"))
    );
    assert!(op["why"].as_str().unwrap().starts_with("removed on origin/main abc, changed on this machine"));

    // Removed there, unchanged here: removed, nothing to review.
    let files = BTreeMap::from([(MEMORY.to_string(), side(&base, &base, &theirs))]);
    let (change, merged) = plan_of(&ledger(&base), &files);
    assert!(!change.memory.as_ref().unwrap().text.contains("Lyon"));
    assert_eq!(merged.plan, None);
}

#[test]
fn an_entry_naming_a_tombstoned_fact_leaves_memory_wherever_it_came_from() {
    let e = entry("m-a", "Ana's door code is 4512", "2026-11-01", &["f-1"]);
    let memory = file(&[e, entry("m-b", "Ben likes tea", "2026-11-01", &["f-2"])]);
    let tomb = serde_json::to_string(&Tombstone {
        ids: vec!["f-1".into()],
        text_hash: "x".into(),
        time: "2026-11-27T00:00:00Z".parse().unwrap(),
        reason: None,
    })
    .unwrap();
    let files = BTreeMap::from([
        (MEMORY.to_string(), side(&memory, &memory, &memory)),
        (TOMBSTONES.to_string(), side("", "", &format!("{tomb}\n"))),
    ]);
    let (change, merged) = plan_of(&ledger(&memory), &files);
    assert_eq!(merged.buried, vec!["m-a".to_string()]);
    assert_eq!(merged.tombstones, 1);
    let text = &change.memory.as_ref().unwrap().text;
    assert!(!text.contains("4512") && text.contains("Ben likes tea"));
    assert!(
        matches!(&change.history, Some(HistoryWrite::Rewrite { text, .. }) if text.contains("\"status\":\"deleted\""))
    );
    assert!(matches!(&change.files[..], [FileWrite::Append { path, .. }] if path == TOMBSTONES));
}

#[test]
fn history_takes_the_other_sides_new_and_re_marked_blocks() {
    let mut old = entry("m-a", "Ana lives in Lyon", "2026-11-01", &[]);
    old.meta.status = Some(HistoryStatus::Replaced);
    old.meta.superseded_by = Some("m-a".into());
    let mut reverted = old.clone();
    reverted.meta.status = Some(HistoryStatus::Reverted);
    let mut theirs_new = entry("m-b", "Ben likes tea", "2026-11-01", &[]);
    theirs_new.meta.status = Some(HistoryStatus::Deleted);
    let mut ours_new = entry("m-c", "Chloe plays chess", "2026-11-01", &[]);
    ours_new.meta.status = Some(HistoryStatus::Deleted);
    let base = file(std::slice::from_ref(&old));
    let ours = file(&[old.clone(), ours_new.clone()]);
    let theirs = file(&[reverted.clone(), theirs_new.clone()]);
    let files = side(&base, &ours, &theirs);
    let merged =
        merge_history(&files, &EntryFile::parse(&ours, HISTORY), theirs_parsed(HISTORY, &files).as_ref(), &[]).unwrap();
    let parsed = EntryFile::parse(&merged, HISTORY);
    let statuses: Vec<(&str, &str)> =
        parsed.entries().map(|e| (e.id(), e.meta.status.as_ref().map_or("", |s| s.as_str()))).collect();
    assert_eq!(statuses, vec![("m-c", "deleted"), ("m-a", "reverted"), ("m-b", "deleted")]);
}

#[test]
fn memory_md_keeps_what_a_person_wrote_on_either_side() {
    let base = "# About me\n";
    let ours = "# About me\nAnswer in French.\n";
    let theirs = "# About me\nUse metric units.\n";
    let merged = merge_promoted(&side(base, ours, theirs)).unwrap();
    assert!(merged.contains("Answer in French.") && merged.contains("Use metric units."), "{merged}");
}

#[test]
fn only_memfolds_own_paths_may_be_written() {
    for path in [MEMORY, HISTORY, TOMBSTONES, PROMOTED, "archive/2026-11-20.md"] {
        assert!(allowed(path), "{path}");
    }
    for path in [
        "..",
        "../x",
        "/abs",
        "/etc/passwd",
        ".git/config",
        ".git/hooks/post-merge",
        "memfold.toml",
        ".gitignore",
        ".memfold/token",
        ".memfold/state.json",
        "archive/../../.bashrc",
        "archive/2026-11-20.md/../../x",
        "archive/sub/2026-11-20.md",
        "archive/2026-1-2.md",
        "archive/+2026-11-20.md",
        "archive/notes.md",
        "consolidated/other.md",
        "./MEMORY.md",
        "notes.txt",
    ] {
        assert!(!allowed(path), "{path}");
    }
}

#[test]
fn a_path_that_is_not_memfolds_is_named_and_never_written() {
    let files = BTreeMap::from([
        ("notes.txt".to_string(), side("a\n", "a\n", "a\nb\n")),
        (
            "memfold.toml".to_string(),
            Side { base: None, ours: None, theirs: Some("[llm]\nbase_url = \"http://evil\"\n".into()) },
        ),
        (".memfold/token".to_string(), side("", "", "planted\n")),
        ("../x".to_string(), side("", "", "x\n")),
    ]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert!(change.files.is_empty(), "{:?}", change.files);
    assert_eq!(merged.refused, vec!["../x", ".memfold/token", "memfold.toml", "notes.txt"]);
}

fn tombstone_line(id: &str) -> String {
    serde_json::to_string(&Tombstone {
        ids: vec![id.into()],
        text_hash: "x".into(),
        time: "2026-11-27T00:00:00Z".parse().unwrap(),
        reason: None,
    })
    .unwrap()
}

#[test]
fn tombstones_only_grow_whatever_the_other_side_holds() {
    let (t1, t2, t3) = (tombstone_line("f-1"), tombstone_line("f-2"), tombstone_line("f-3"));
    let ours = format!("{t1}\n{t2}\n");
    // Emptied there, or cut to one line: nothing is taken away here.
    for theirs in [String::new(), format!("{t2}\n")] {
        let files = BTreeMap::from([(TOMBSTONES.to_string(), side(&ours, &ours, &theirs))]);
        let (change, merged) = plan_of(&ledger(""), &files);
        assert!(change.files.is_empty(), "{:?}", change.files);
        assert_eq!(merged.tombstones, 0);
    }
    // One line dropped and one added there: the new one is appended, none removed.
    let files = BTreeMap::from([(TOMBSTONES.to_string(), side(&ours, &ours, &format!("{t2}\n{t3}\n")))]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert_eq!(merged.tombstones, 1);
    assert!(
        matches!(&change.files[..], [FileWrite::Append { path, text }] if path == TOMBSTONES && *text == format!("{t3}\n")),
        "{:?}",
        change.files
    );
    // Every line here and more there: their bytes, so both machines end the same.
    let theirs = format!("{t1}\n{t2}\n{t3}\n");
    let files = BTreeMap::from([(TOMBSTONES.to_string(), side(&ours, &ours, &theirs))]);
    let (change, _) = plan_of(&ledger(""), &files);
    assert!(matches!(&change.files[..], [FileWrite::Append { text, .. }] if *text == format!("{t3}\n")));
}

#[test]
fn a_fact_rewritten_on_the_other_machine_refuses_the_merge_and_names_its_line() {
    let base = day(&["tea", "rex"]);
    // The same id, another text, and the line's hash dropped so nothing flags it there.
    let id = archive::fact_id("2026-11-20".parse().unwrap(), "rex", 0);
    let forged = base.replace(
        &archive::render_line(&Fact::sample(&id, "2026-11-20", "rex")),
        &format!("- Rex was given away <!--f {{\"id\":\"{id}\"}}-->\n"),
    );
    assert_ne!(forged, base);
    let theirs = format!("{forged}{}", archive::render_line(&Fact::sample("f-000000000099", "2026-11-20", "lyon")));
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &base, &theirs))]);
    let problem = plan_result(&ledger(""), &files).unwrap_err();
    assert_eq!(problem.file, DAY);
    assert_eq!(problem.line, 4);
    assert!(
        problem.message.contains(&id) && problem.message.contains("rewritten on origin/main abc"),
        "{}",
        problem.message
    );
    // Rewritten here instead: the same refusal, naming this machine.
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &forged, &theirs.replace("Rex was given away", "rex")))]);
    let problem = plan_result(&ledger(""), &files).unwrap_err();
    assert!(problem.message.contains("rewritten on this machine"), "{}", problem.message);
}

#[test]
fn facts_from_the_other_machine_are_held_to_this_machines_secret_policy() {
    let base = day(&["tea"]);
    let secret = "the staging db password is s3cr3t-Staging";
    let theirs = day(&["tea", secret]);
    let files = BTreeMap::from([(DAY.to_string(), side(&base, &base, &theirs))]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert_eq!((merged.facts, merged.redacted), (1, 1));
    match &change.files[..] {
        [FileWrite::Append { text, .. }] => {
            assert!(!text.contains("s3cr3t-Staging") && text.contains("[secret: password]"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    // Merged again later, the redacted line here and the other's line say the same fact.
    let FileWrite::Append { text: appended, .. } = &change.files[0] else { unreachable!() };
    let ours_after = format!("{base}{appended}");
    let theirs_later = day(&["tea", secret, "lyon"]);
    let files = BTreeMap::from([(DAY.to_string(), side(&theirs, &ours_after, &theirs_later))]);
    let (change, merged) = plan_of(&ledger(""), &files);
    assert_eq!(merged.facts, 1);
    assert!(
        matches!(&change.files[..], [FileWrite::Append { text, .. }] if text.contains("lyon") && !text.contains("s3cr3t"))
    );
}

#[test]
fn history_never_loses_a_block_the_other_side_dropped() {
    let mut old = entry("m-a", "Ana lives in Lyon", "2026-11-01", &[]);
    old.meta.status = Some(HistoryStatus::Replaced);
    old.meta.superseded_by = Some("m-b".into());
    let mut gone = entry("m-c", "Chloe plays chess", "2026-11-01", &[]);
    gone.meta.status = Some(HistoryStatus::Deleted);
    let base = file(&[old.clone(), gone.clone()]);
    let theirs = file(std::slice::from_ref(&old));
    let files = side(&base, &base, &theirs);
    let merged = merge_history(&files, &EntryFile::parse(&base, HISTORY), theirs_parsed(HISTORY, &files).as_ref(), &[]);
    assert_eq!(merged, None, "this side's history stays whole");
}

#[test]
fn a_block_to_mend_on_a_side_the_merge_reads_refuses_the_merge_and_names_that_side() {
    let a = entry("m-a", "Ana lives in Lyon", "2026-11-01", &[]);
    let b = entry("m-b", "Ben likes tea", "2026-11-01", &[]);
    let base = file(&[a.clone(), b.clone()]);
    // A fence opened in m-a and never closed hides m-b's header.
    let open = base.replacen("Ana lives in Lyon", "Ana lives in Lyon\n```sh\nmake", 1);
    let changed = file(&[entry("m-a", "Ana lives in Oslo", "2026-11-02", &[]), b.clone()]);
    let request = |ours: &str, theirs: &str| {
        let files = BTreeMap::from([(MEMORY.to_string(), side(&base, ours, theirs))]);
        let ledger = ledger(ours);
        let request = Request {
            ledger: &ledger,
            files: &files,
            other: "origin/main abc",
            run: "r-20261128T000000Z-sync-abcd",
            now: "2026-11-28T00:00:00Z".parse().unwrap(),
            today: "2026-11-28".parse().unwrap(),
            secrets: SecretsPolicy::Redact,
        };
        plan(&request).map(|_| ()).map_err(|p| (p.line, p.message))
    };
    // Changed there only, and open there.
    let (line, message) = request(&base, &open).unwrap_err();
    assert!(message.starts_with("entry m-b is hidden") && message.contains("on origin/main abc"), "{message}");
    assert_eq!(line, open.lines().position(|l| l.contains("\"m-b\"")).unwrap() + 1);
    // Changed on both, open here.
    let (_, message) = request(&open, &changed).unwrap_err();
    assert!(message.contains("on this machine") && message.contains("nothing was merged"), "{message}");
    // Open here, unchanged there: nothing to read through, the merge goes on.
    assert_eq!(request(&open, &base), Ok(()));
}
