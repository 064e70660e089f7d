//! `memfold verify`: proves that every archived fact is accounted for, and reports what is not.
//!
//! Each fact must be pending, named in the `sources` of an entry in `memory.md` or
//! `history.md`, or tombstoned. A fact dated on or before the watermark may not be pending.
//! Parse problems in any file, sources that name no archived fact, and duplicate ids are
//! reported too. The report is `ok` only when there are no problems.

use std::collections::HashSet;

use serde::Serialize;

use crate::files::Problem;
use crate::ledger::{FactFate, Ledger};

/// The result of a verification (`verify --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub facts: usize,
    pub pending: usize,
    pub consolidated: usize,
    pub tombstoned: usize,
    pub problems: Vec<Problem>,
}

/// Check a ledger. `extra` adds problems found elsewhere (e.g. index vs files).
pub fn verify(ledger: &Ledger, extra: Vec<Problem>) -> Report {
    let mut problems = ledger.problems.clone();
    let fates = ledger.fates();
    let mut seen = HashSet::new();
    for fact in &ledger.facts {
        let file = format!("archive/{}.md", fact.date);
        if !seen.insert(fact.id.as_str()) {
            problems.push(Problem::new(&file, fact.line, format!("fact id {} is used on another day too", fact.id)));
        }
        if fates.get(fact.id.as_str()) == Some(&FactFate::Pending)
            && ledger.state.watermark.is_some_and(|w| fact.date <= w)
        {
            problems.push(Problem::new(
                &file,
                fact.line,
                format!("fact {} is before the watermark but in no entry, history block or tombstone", fact.id),
            ));
        }
    }
    let known: HashSet<&str> = ledger.facts.iter().map(|f| f.id.as_str()).collect();
    for (file, entries) in [("consolidated/memory.md", &ledger.memory), ("consolidated/history.md", &ledger.history)] {
        for entry in entries.entries() {
            for source in entry.meta.sources.iter().filter(|s| !known.contains(s.as_str())) {
                problems.push(Problem::new(
                    file,
                    entry.line,
                    format!("entry {} names source {source}, which is in no archive file", entry.id()),
                ));
            }
        }
    }
    problems.extend(extra);
    let count = |fate| fates.values().filter(|f| **f == fate).count();
    Report {
        ok: problems.is_empty(),
        facts: ledger.facts.len(),
        pending: count(FactFate::Pending),
        consolidated: count(FactFate::Consolidated),
        tombstoned: count(FactFate::Tombstoned),
        problems,
    }
}
