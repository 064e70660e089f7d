//! The ledger: every archived fact and where it went (pending, consolidated into an entry or history, or tombstoned).
//!
//! It is read fresh from the files whenever it is needed, so it is never out of date:
//! the archive, `memory.md`, `history.md`, the tombstones and `state.json`. `status`,
//! `verify` and the consolidation pass all work from it.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::files::Root;
use crate::files::archive::{self, ArchiveError, Fact};
use crate::files::entries::EntryFile;
use crate::files::{Problem, content_hash};
use crate::state::{State, StateError, Tombstone, read_jsonl};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// Where one fact went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FactFate {
    Pending,
    Consolidated,
    Tombstoned,
}

/// Everything read from a root at one moment.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub facts: Vec<Fact>,
    pub memory: EntryFile,
    pub history: EntryFile,
    pub tombstones: Vec<Tombstone>,
    pub state: State,
    /// Problems found while reading (bad lines, broken headers, unreadable log records).
    pub problems: Vec<Problem>,
}

impl Ledger {
    pub fn load(root: &Root) -> Result<Ledger, LedgerError> {
        let archive = archive::read_all(root)?;
        let read = |path: std::path::PathBuf| {
            let rel = root.relative(&path);
            EntryFile::read(&path, &rel).map_err(|source| LedgerError::Read { path: rel, source })
        };
        let memory = read(root.memory())?;
        let history = read(root.history())?;
        let (tombstones, tomb_problems) = read_jsonl::<Tombstone>(&root.tombstones(), ".memfold/tombstones.jsonl")?;
        let state = State::load(&root.state_json())?;
        let mut problems = archive.problems;
        problems.extend(memory.problems.iter().cloned());
        problems.extend(history.problems.iter().cloned());
        problems.extend(tomb_problems);
        Ok(Ledger { facts: archive.facts, memory, history, tombstones, state, problems })
    }

    /// Ids covered by a tombstone.
    pub fn tombstoned_ids(&self) -> HashSet<&str> {
        self.tombstones.iter().flat_map(|t| t.ids.iter().map(String::as_str)).collect()
    }

    /// Text hashes covered by a tombstone (a deleted fact re-added word for word stays deleted).
    pub fn tombstoned_hashes(&self) -> HashSet<&str> {
        self.tombstones.iter().map(|t| t.text_hash.as_str()).collect()
    }

    /// Fact ids named in the sources of any current or historical entry. History blocks set
    /// aside by an undo (`reverted`: the undone version; `restored`: the run's copy of a version
    /// the undo put back) or a rebuild (`rebuilt`) no longer account for their facts.
    pub fn sourced_ids(&self) -> HashSet<&str> {
        let counts = |e: &&crate::files::entries::Entry| {
            !matches!(e.meta.status.as_deref(), Some("reverted" | "restored" | "rebuilt"))
        };
        self.memory
            .entries()
            .chain(self.history.entries().filter(counts))
            .flat_map(|e| e.meta.sources.iter().map(String::as_str))
            .collect()
    }

    /// Where every fact went, by fact id.
    pub fn fates(&self) -> HashMap<&str, FactFate> {
        let tombstoned = self.tombstoned_ids();
        let hashes = self.tombstoned_hashes();
        let sourced = self.sourced_ids();
        self.facts
            .iter()
            .map(|f| {
                let fate = if tombstoned.contains(f.id.as_str()) || hashes.contains(fact_text_hash(&f.text).as_str()) {
                    FactFate::Tombstoned
                } else if sourced.contains(f.id.as_str()) {
                    FactFate::Consolidated
                } else {
                    FactFate::Pending
                };
                (f.id.as_str(), fate)
            })
            .collect()
    }

    /// Facts still waiting for consolidation, in archive order.
    pub fn pending(&self) -> Vec<&Fact> {
        let fates = self.fates();
        self.facts.iter().filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending)).collect()
    }

    /// Count of facts by fate.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::from([("pending", 0), ("consolidated", 0), ("tombstoned", 0)]);
        for fate in self.fates().values() {
            let key = match fate {
                FactFate::Pending => "pending",
                FactFate::Consolidated => "consolidated",
                FactFate::Tombstoned => "tombstoned",
            };
            *counts.entry(key).or_default() += 1;
        }
        counts
    }
}

/// The hash a tombstone records for a fact's text (normalised like the archive does).
pub fn fact_text_hash(text: &str) -> String {
    content_hash(archive::clean_text(text).to_lowercase())
}
