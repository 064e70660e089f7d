//! The embedded default, driven through the binary with no LLM and no network: the offline
//! decider, promotion to MEMORY.md, forgetting, hand deletes and rebuild.

use std::path::Path;

use crate::common::{init_root, memfold, ok, read};

fn search(root: &Path, q: &str) -> Vec<String> {
    let hits = ok(memfold(root, &["search", "--json", "-k", "20", q], &[]));
    hits["hits"].as_array().unwrap().iter().map(|h| h["text"].as_str().unwrap().to_string()).collect()
}

fn verify_ok(root: &Path) {
    let report = ok(memfold(root, &["verify", "--json"], &[]));
    assert_eq!(report["ok"], true, "{report}");
}

#[test]
fn add_consolidate_search_and_memory_md_with_no_network() {
    let dir = init_root();
    let root = dir.path();
    ok(memfold(
        root,
        &["add", "--date", "2026-05-27", "Works at Google", "Has a dog named Rex", "Favourite colour is purple"],
        &[],
    ));
    ok(memfold(root, &["add", "--date", "2026-05-28", "Has a dog named Rex"], &[]));
    let report = ok(memfold(root, &["consolidate", "--force", "--json"], &[]));
    assert_eq!(report["decider"], "offline");
    assert_eq!(report["applied"], true);
    assert_eq!(report["llm"]["calls"], 0);
    ok(memfold(root, &["add", "--date", "2026-05-30", "Now works at Microsoft", "Favourite colour is cyan"], &[]));
    let report = ok(memfold(root, &["consolidate", "--force", "--json"], &[]));
    let kinds: Vec<&str> = report["ops"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert!(kinds.iter().filter(|k| **k == "REPLACE").count() == 2, "{report}");

    let memory = read(root, "consolidated/memory.md");
    assert!(memory.contains("Microsoft") && memory.contains("previously"), "{memory}");
    assert_eq!(memory.matches("Has a dog named Rex").count(), 1, "duplicate merged: {memory}");
    assert!(read(root, "consolidated/history.md").contains("Favourite colour is purple"));
    let hits = search(root, "microsoft");
    assert!(hits[0].contains("Microsoft"), "{hits:?}");
    let promoted = read(root, "MEMORY.md");
    assert!(promoted.contains("Microsoft") && promoted.contains("<!--p m-"), "{promoted}");
    assert!(!promoted.contains("colour is purple;"), "no stale value stays promoted alone: {promoted}");
    verify_ok(root);
}

#[test]
fn forgotten_things_never_come_back() {
    let dir = init_root();
    let root = dir.path();
    ok(memfold(root, &["add", "--date", "2026-06-01", "Home address is 12 Rua Augusta", "Likes green tea"], &[]));
    ok(memfold(root, &["consolidate", "--force"], &[]));
    let memory = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
    let id = memory
        .lines()
        .zip(memory.lines().skip(1))
        .find(|(_, content)| content.contains("Rua Augusta"))
        .map(|(header, _)| header.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string())
        .unwrap();
    let forgot = ok(memfold(root, &["forget", "--json", "--reason", "privacy", &id], &[]));
    assert_eq!(forgot["kind"], "entry");
    assert!(!read(root, "MEMORY.md").contains("Rua Augusta"));
    // The same fact arrives again, word for word.
    ok(memfold(root, &["add", "Home address is 12 Rua Augusta"], &[]));
    // A pending fact forgotten directly.
    let added = ok(memfold(root, &["add", "--json", "Bank PIN is 4321"], &[]));
    ok(memfold(root, &["forget", added["facts"][0]["id"].as_str().unwrap()], &[]));
    // A hand-deleted entry.
    let memory = read(root, "consolidated/memory.md");
    let kept: Vec<&str> = memory.split("\n\n").filter(|b| !b.contains("green tea")).collect();
    std::fs::write(root.join("consolidated/memory.md"), kept.join("\n\n")).unwrap();

    let gone = |root: &Path| {
        for q in ["Rua Augusta address", "bank PIN", "green tea"] {
            let hits = search(root, q);
            assert!(
                hits.iter().all(|h| !h.contains("Augusta") && !h.contains("PIN") && !h.contains("green tea")),
                "{q}: {hits:?}"
            );
        }
        let memory = read(root, "consolidated/memory.md");
        assert!(!memory.contains("Augusta") && !memory.contains("PIN") && !memory.contains("green tea"), "{memory}");
    };
    ok(memfold(root, &["consolidate", "--force"], &[]));
    gone(root);
    ok(memfold(root, &["reindex", "--clear"], &[]));
    gone(root);
    ok(memfold(root, &["rebuild"], &[]));
    gone(root);
    let history = read(root, "consolidated/history.md");
    assert!(history.contains("\"status\":\"deleted\""), "kept in history, not lost: {history}");
    verify_ok(root);
}

#[test]
fn rebuild_reconsolidates_the_archive_and_keeps_pinned_and_hand_written_entries() {
    let dir = init_root();
    let root = dir.path();
    ok(memfold(root, &["add", "--date", "2026-06-01", "Plays the cello", "Name is John"], &[]));
    ok(memfold(root, &["consolidate", "--force"], &[]));
    let memory = read(root, "consolidated/memory.md");
    let name_id = memory
        .lines()
        .zip(memory.lines().skip(1))
        .find(|(_, c)| c.contains("John"))
        .map(|(h, _)| h.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string())
        .unwrap();
    ok(memfold(root, &["pin", &name_id], &[]));
    let mut memory = read(root, "consolidated/memory.md");
    memory.push_str("\nAlways answers in French.\n");
    std::fs::write(root.join("consolidated/memory.md"), memory).unwrap();
    let report = ok(memfold(root, &["rebuild", "--json"], &[]));
    assert_eq!(report["applied"], true);
    let after = read(root, "consolidated/memory.md");
    assert_eq!(after.matches("Plays the cello").count(), 1, "{after}");
    assert_eq!(after.matches("Name is John").count(), 1, "pinned carried over, not re-added: {after}");
    assert!(after.contains("Always answers in French."));
    assert!(read(root, "consolidated/history.md").contains("\"status\":\"rebuilt\""));
    verify_ok(root);
}

/// The id of the entry whose content contains `text`.
fn entry_id(root: &Path, text: &str) -> String {
    let memory = read(root, "consolidated/memory.md");
    let (header, _) = memory.lines().zip(memory.lines().skip(1)).find(|(_, content)| content.contains(text)).unwrap();
    header.split("\"id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string()
}

#[test]
fn a_certain_duplicate_applies_and_a_likely_fold_waits_for_a_person_who_decides_once() {
    let dir = init_root();
    let root = dir.path();
    ok(memfold(root, &["add", "--date", "2026-05-01", "Takes a pottery class at the community centre."], &[]));
    ok(memfold(root, &["consolidate", "--force"], &[]));
    let class = entry_id(root, "pottery class");

    // Every word of the fact is in the entry: merged, whatever the person or inflection.
    ok(memfold(root, &["add", "--date", "2026-05-10", "I take a pottery class at the community centre"], &[]));
    let report = ok(memfold(root, &["consolidate", "--force", "--json"], &[]));
    assert_eq!(report["ops"][0]["op"], "DUPLICATE", "{report}");
    assert_eq!(report["ops"][0]["target"], class.as_str());
    assert_eq!(report["proposals"], 0);
    assert_eq!(read(root, "consolidated/memory.md").matches("pottery").count(), 1);

    // An ended state is likely, not certain: proposed to a person, with its reason and confidence.
    let before = read(root, "consolidated/memory.md");
    ok(memfold(root, &["add", "--date", "2026-06-01", "Quit the pottery class at the community centre."], &[]));
    let report = ok(memfold(root, &["consolidate", "--force", "--json"], &[]));
    assert_eq!(report["proposals"], 1, "{report}");
    let plan = report["plans"][0].as_str().unwrap().to_string();
    assert_eq!(read(root, "consolidated/memory.md"), before, "a proposal changes nothing by itself");
    let status = ok(memfold(root, &["status", "--json"], &[]));
    assert_eq!(
        (status["plans_waiting"].clone(), status["proposals_waiting"].clone()),
        (1.into(), 1.into()),
        "{status}"
    );
    let plans = ok(memfold(root, &["plans", "--json"], &[]));
    let stored = &plans["plans"][0];
    assert_eq!(stored["reason"], "proposal", "{plans}");
    let op = &stored["ops"][0];
    assert_eq!((op["op"].as_str(), op["target"].as_str()), (Some("REPLACE"), Some(class.as_str())), "{plans}");
    assert_eq!(op["signals"], serde_json::json!(["negates"]));
    assert!(op["confidence"].as_f64().is_some_and(|c| c < 0.5), "{op}");

    // Rejected: the fact goes back to the next pass, which does not propose the same pair again.
    ok(memfold(root, &["reject", &plan], &[]));
    let status = ok(memfold(root, &["status", "--json"], &[]));
    assert_eq!((status["plans_waiting"].clone(), status["held_facts"].clone()), (0.into(), 0.into()), "{status}");
    let report = ok(memfold(root, &["consolidate", "--force", "--json"], &[]));
    assert_eq!(report["proposals"], 0, "{report}");
    assert_eq!(report["ops"][0]["op"], "ADD", "{report}");
    let memory = read(root, "consolidated/memory.md");
    assert!(memory.contains("Takes a pottery class") && memory.contains("Quit the pottery class"), "{memory}");
    verify_ok(root);
}
