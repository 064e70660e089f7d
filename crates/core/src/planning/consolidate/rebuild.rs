//! `memfold rebuild`: re-consolidate every archived fact that is not tombstoned into a fresh `memory.md`.
//!
//! The current entries move to `history.md` with `status: rebuilt`, except entries that
//! cannot be re-derived from the archive: pinned ones and blocks a person wrote (no sources),
//! which carry over. Versions set aside lead nowhere, so every fact that is not tombstoned and
//! not held by a carried-over entry is pending again, whatever older history says; a forced
//! pass over that ledger decides them all, and the set-aside blocks are written in the same
//! commit as its results. Tombstoned facts stay out, so nothing forgotten comes back. A
//! `memory.md` with a block a person must mend (a broken header, an unclosed block hiding
//! entries) is refused before this runs: rewriting it would cement the damage.

use chrono::NaiveDate;

use memfold_store::entries::{Entry, EntryFile, HistoryStatus};
use memfold_store::ledger::Ledger;

/// The ledger a rebuild plans against (current entries set aside as history), and the
/// set-aside versions to append to `history.md`.
pub fn set_aside(ledger: &Ledger, run: &str, today: NaiveDate) -> (Ledger, Vec<Entry>) {
    let mut fresh = EntryFile::default();
    let mut history = ledger.history.clone();
    let mut blocks = Vec::new();
    for entry in ledger.memory.entries() {
        if entry.meta.pinned || entry.meta.sources.is_empty() {
            fresh.push(Entry::new(entry.meta.clone(), &entry.content));
        } else {
            let mut meta = entry.meta.clone();
            meta.status = Some(HistoryStatus::Rebuilt);
            meta.valid_until = Some(today);
            meta.run = Some(run.to_string());
            let block = Entry::new(meta, &entry.content);
            history.push(block.clone());
            blocks.push(block);
        }
    }
    // The file as written, so that the pass plans against what it will replace.
    let fresh = EntryFile::parse(&fresh.render(), "consolidated/memory.md");
    (Ledger { memory: fresh, history, ..ledger.clone() }, blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memfold_store::archive::Fact;
    use memfold_store::entries::EntryMeta;
    use memfold_store::ledger::FactFate;

    fn fact(id: &str) -> Fact {
        Fact::sample(id, "2026-05-01", id)
    }

    #[test]
    fn facts_of_replaced_and_merged_versions_are_pending_again() {
        let mut ledger = Ledger::empty();
        ledger.facts = ["f-dog", "f-cat", "f-tea", "f-pin"].map(fact).to_vec();
        let with = |id: &str, sources: &[&str], text: &str| {
            Entry::new(
                EntryMeta { sources: sources.iter().map(|s| s.to_string()).collect(), ..EntryMeta::new(id) },
                text,
            )
        };
        // "Has a dog named Rex" was replaced by a version that also names the cat; tea was merged in.
        let mut old = with("m-pets", &["f-dog"], "Has a dog named Rex.");
        old.meta.status = Some(HistoryStatus::Replaced);
        old.meta.superseded_by = Some("m-pets".into());
        let mut tea = with("m-tea", &["f-tea"], "Likes tea.");
        tea.meta.status = Some(HistoryStatus::Merged);
        tea.meta.superseded_by = Some("m-pets".into());
        ledger.history.push(old);
        ledger.history.push(tea);
        ledger.memory.push(with("m-pets", &["f-dog", "f-cat", "f-tea"], "Has a dog named Rex and a cat named Miso."));
        let mut pinned = with("m-pin", &["f-pin"], "Allergic to peanuts.");
        pinned.meta.pinned = true;
        ledger.memory.push(pinned);
        assert!(ledger.pending().is_empty());

        let (rebuilt, blocks) = set_aside(&ledger, "rebuild-1", "2026-06-01".parse().unwrap());
        assert_eq!(blocks.len(), 1);
        let fates = rebuilt.fates();
        for f in ["f-dog", "f-cat", "f-tea"] {
            assert_eq!(fates[f], FactFate::Pending, "{f}");
        }
        assert_eq!(fates["f-pin"], FactFate::Consolidated, "a pinned entry carries over");
        assert!(memfold_store::verify::verify(&rebuilt, Vec::new()).problems.is_empty(), "a rebuild explains itself");
    }
}
