//! Where things went: an entry's chain of versions, and one archived fact's fate.

use std::collections::BTreeSet;

use super::reports::{Chain, FactView, Version, VersionStatus};
use crate::error::Error;
use memfold_store::entries::{Entry, EntryFile};
use memfold_store::ledger::Ledger;

/// One archived fact by id: its text, place, fate and the current entries that name it.
pub fn fact_view(ledger: &Ledger, id: &str) -> Result<FactView, Error> {
    let fact = ledger
        .facts
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(|| Error::NotFound { message: format!("no archived fact has id {id}") })?;
    Ok(FactView {
        fact: fact.clone(),
        file: format!("archive/{}.md", fact.date),
        line: fact.line,
        fate: ledger.settled().fate(fact),
        entries: ledger
            .memory
            .entries()
            .filter(|e| e.meta.sources.iter().any(|s| s == id))
            .map(|e| e.id().to_string())
            .collect(),
    })
}

/// The chain of versions around entry `id`.
pub fn history_chain(memory: &EntryFile, history: &EntryFile, id: &str) -> Result<Chain, Error> {
    if id.trim().is_empty() || id.chars().any(char::is_whitespace) {
        return Err(Error::BadInput(format!("{id:?} is not an entry id")));
    }
    let history: Vec<&Entry> = history.entries().collect();
    let current: Vec<&Entry> = memory.entries().collect();
    // Grow the set of linked ids until nothing new joins.
    let mut ids: BTreeSet<String> = BTreeSet::from([id.to_string()]);
    loop {
        let mut grown = ids.clone();
        for e in &history {
            if let Some(next) = &e.meta.superseded_by {
                if ids.contains(e.id()) {
                    grown.insert(next.clone());
                }
                if ids.contains(next) {
                    grown.insert(e.id().to_string());
                }
            }
        }
        if grown.len() == ids.len() {
            break;
        }
        ids = grown;
    }
    let merged_into = |target: &str| -> Vec<String> {
        let set: BTreeSet<String> = history
            .iter()
            .filter(|e| e.id() != target && e.meta.superseded_by.as_deref() == Some(target))
            .map(|e| e.id().to_string())
            .collect();
        set.into_iter().collect()
    };
    let version = |e: &Entry, status: VersionStatus| Version {
        id: e.id().to_string(),
        status,
        content: e.content.clone(),
        first_seen: e.meta.first_seen,
        updated: e.meta.updated,
        valid_until: e.meta.valid_until,
        superseded_by: e.meta.superseded_by.clone(),
        supersedes: merged_into(e.id()),
        run: e.meta.run.clone(),
        sources: e.meta.sources.clone(),
        pinned: e.meta.pinned,
    };
    let mut versions: Vec<Version> = history
        .iter()
        .filter(|e| ids.contains(e.id()))
        .map(|e| version(e, VersionStatus::History(e.meta.status.clone())))
        .collect();
    versions.extend(current.iter().filter(|e| ids.contains(e.id())).map(|e| version(e, VersionStatus::Current)));
    if versions.is_empty() {
        return Err(Error::not_found("entry", id));
    }
    Ok(Chain { id: id.to_string(), versions })
}
