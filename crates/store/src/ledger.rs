//! The ledger: every archived fact and where it went (pending, consolidated into an entry or history, retired, or tombstoned).
//!
//! It is read fresh from the files whenever it is needed, so it is never out of date:
//! the archive, `memory.md`, `history.md`, the tombstones and `state.json`. `status`,
//! `verify` and the consolidation pass all work from it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::Root;
use crate::archive::{self, ArchiveError, Fact};
use crate::entries::{Entry, EntryFile, HistoryStatus};
use crate::state::{State, StateError, Tombstone, read_jsonl};
use crate::{Problem, content_hash};

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
    /// Its entry retired for disuse (`sweep --stale`): in history, not pending.
    Retired,
}

/// Where the versions of one entry id ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// In `memory.md`, directly or through replaced/merged versions.
    Current,
    /// Forgotten or deleted by hand.
    Deleted,
    /// Retired for disuse (`sweep --stale`).
    Retired,
    /// Taken back by an undo, set aside by a rebuild, or given a status memfold does not know.
    SetAside,
    /// Replaced or merged into something that is nowhere: its facts were lost from memory.
    Lost,
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

/// One entry file of `root` (`memory.md`, `history.md`); a missing one is empty.
pub fn read_entries(root: &Root, path: &std::path::Path) -> Result<EntryFile, LedgerError> {
    let rel = root.relative(path);
    EntryFile::read(path, &rel).map_err(|source| LedgerError::Read { path: rel, source })
}

impl Ledger {
    pub fn load(root: &Root) -> Result<Ledger, LedgerError> {
        let read = |path: std::path::PathBuf| read_entries(root, &path);
        // The archive and the entry files are parsed side by side: each is about half the time.
        let (archive, memory) = std::thread::scope(|scope| {
            let archive = scope.spawn(|| archive::read_all(root));
            let memory = read(root.memory());
            (archive.join().unwrap_or_else(|e| std::panic::resume_unwind(e)), memory)
        });
        let (archive, memory) = (archive?, memory?);
        let history = read(root.history())?;
        let (tombstones, tomb_problems) = read_jsonl::<Tombstone>(&root.tombstones(), ".memfold/tombstones.jsonl")?;
        let state = State::load(&root.state_json())?;
        let mut problems = archive.problems;
        problems.extend(memory.problems.iter().cloned());
        problems.extend(history.problems.iter().cloned());
        problems.extend(tomb_problems);
        Ok(Ledger { facts: archive.facts, memory, history, tombstones, state, problems })
    }

    /// A ledger of an empty root.
    #[cfg(any(test, feature = "testkit"))]
    pub fn empty() -> Ledger {
        Ledger {
            facts: Vec::new(),
            memory: EntryFile::default(),
            history: EntryFile::default(),
            tombstones: Vec::new(),
            state: State::default(),
            problems: Vec::new(),
        }
    }

    /// Ids covered by a tombstone.
    pub fn tombstoned_ids(&self) -> HashSet<&str> {
        self.tombstones.iter().flat_map(|t| t.ids.iter().map(String::as_str)).collect()
    }

    /// Where each entry id's versions ended up (see [`End`]), for every id in `history.md`
    /// and `memory.md`.
    pub fn entry_ends(&self) -> HashMap<&str, End> {
        let current: HashSet<&str> = self.memory.entries().map(Entry::id).collect();
        // The last version of each id in history (file order is the order they were written).
        let mut last: HashMap<&str, &Entry> = HashMap::new();
        for e in self.history.entries() {
            last.insert(e.id(), e);
        }
        let mut ends: HashMap<&str, End> = HashMap::new();
        for id in current.iter().copied().chain(last.keys().copied()) {
            if ends.contains_key(id) {
                continue;
            }
            // Follow superseded_by until an id whose end is known or decided here.
            let mut path: Vec<&str> = Vec::new();
            let mut at = id;
            let end = loop {
                if let Some(end) = ends.get(at) {
                    break *end;
                }
                if current.contains(at) {
                    break End::Current;
                }
                if path.contains(&at) {
                    break End::Lost; // a cycle of superseded_by that never reaches memory.md
                }
                path.push(at);
                let Some(block) = last.get(at) else { break End::Lost };
                match &block.meta.status {
                    Some(HistoryStatus::Deleted) => break End::Deleted,
                    Some(HistoryStatus::Retired) => break End::Retired,
                    Some(status) if status.leads_on() => match block.meta.superseded_by.as_deref() {
                        Some(next) if next != at => at = next,
                        _ => break End::Lost,
                    },
                    // Set aside by an undo or a rebuild, or a status a person wrote.
                    _ => break End::SetAside,
                }
            };
            for p in path {
                ends.insert(p, end);
            }
            ends.entry(at).or_insert(end);
        }
        ends
    }

    /// Fact ids that live on in current memory: named by a current entry, or by a replaced or
    /// merged version whose `superseded_by` chain reaches a current entry.
    pub fn sourced_ids(&self) -> HashSet<&str> {
        let ends = self.entry_ends();
        let leads_to_current = |e: &&Entry| {
            e.meta.status.as_ref().is_some_and(HistoryStatus::leads_on) && ends.get(e.id()) == Some(&End::Current)
        };
        self.memory
            .entries()
            .chain(self.history.entries().filter(leads_to_current))
            .flat_map(|e| e.meta.sources.iter().map(String::as_str))
            .collect()
    }

    /// Fact ids of entries retired for disuse: named by a version of an id whose versions end
    /// in a `retired` block.
    pub fn retired_ids(&self) -> HashSet<&str> {
        let ends = self.entry_ends();
        self.history
            .entries()
            .filter(|e| ends.get(e.id()) == Some(&End::Retired))
            .flat_map(|e| e.meta.sources.iter().map(String::as_str))
            .collect()
    }

    /// Where every fact went, by fact id: tombstoned if a tombstone names it or its text;
    /// consolidated if it lives on in current memory ([`Ledger::sourced_ids`]); retired if its
    /// entry retired for disuse ([`Ledger::retired_ids`]); pending
    /// otherwise, including facts whose versions were all set aside (an undo, a rebuild) or
    /// lost (`verify` reports those), so the next pass takes them up again.
    pub fn fates(&self) -> HashMap<&str, FactFate> {
        let settled = self.settled();
        self.facts.iter().map(|f| (f.id.as_str(), settled.fate(f))).collect()
    }

    /// What decides every fact's fate apart from the fact itself (see [`Ledger::fates`]).
    pub fn settled(&self) -> Settled {
        Settled {
            tombstoned: Tombstoned::of(&self.tombstones),
            sourced: self.sourced_ids().into_iter().map(str::to_string).collect(),
            retired: self.retired_ids().into_iter().map(str::to_string).collect(),
        }
    }

    /// Facts still waiting for consolidation, in archive order.
    pub fn pending(&self) -> Vec<&Fact> {
        let fates = self.fates();
        self.facts.iter().filter(|f| fates.get(f.id.as_str()) == Some(&FactFate::Pending)).collect()
    }

    /// The watermark when exactly the facts in `pending` are pending: the last day before
    /// `today` and before the first day with a pending fact (every fact dated on or before it
    /// is consolidated or tombstoned), or None when there is no such day with facts.
    pub fn watermark(&self, pending: &HashSet<&str>, today: chrono::NaiveDate) -> Option<chrono::NaiveDate> {
        let first_open = self.facts.iter().filter(|f| pending.contains(f.id.as_str())).map(|f| f.date).min();
        let limit = first_open.unwrap_or(today).min(today);
        self.facts.iter().map(|f| f.date).filter(|d| *d < limit).max()
    }
}

/// The fact ids and text hashes `memory.md`, `history.md` and the tombstones settle: what a
/// fact's fate depends on besides the fact. Kept between index refreshes, it lets a day file
/// that changed alone be indexed without reading the rest of the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    tombstoned: Tombstoned,
    sourced: HashSet<String>,
    retired: HashSet<String>,
}

/// What the tombstones cover: the ids they name (entries and facts) and the texts they hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tombstoned {
    ids: HashSet<String>,
    hashes: HashSet<String>,
}

impl Tombstoned {
    pub fn of(tombstones: &[Tombstone]) -> Tombstoned {
        Tombstoned {
            ids: tombstones.iter().flat_map(|t| t.ids.iter().cloned()).collect(),
            hashes: tombstones.iter().map(|t| t.text_hash.clone()).collect(),
        }
    }

    /// Whether a tombstone names this id (an entry's or a fact's).
    pub fn names(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Whether a tombstone names the fact or its text (a deleted fact re-added word for word
    /// stays deleted).
    pub fn covers(&self, f: &Fact) -> bool {
        self.ids.contains(f.id.as_str()) || self.hashes.contains(&fact_text_hash(&f.text))
    }
}

impl Settled {
    /// Tombstoned if a tombstone names the fact or its text; consolidated if it lives on in
    /// current memory; retired if its entry retired for disuse; pending otherwise.
    pub fn fate(&self, f: &Fact) -> FactFate {
        if self.tombstoned.covers(f) {
            FactFate::Tombstoned
        } else if self.sourced.contains(f.id.as_str()) {
            FactFate::Consolidated
        } else if self.retired.contains(f.id.as_str()) {
            FactFate::Retired
        } else {
            FactFate::Pending
        }
    }
}

/// The hash a tombstone records for a fact's text (normalised like the archive does).
pub fn fact_text_hash(text: &str) -> String {
    content_hash(archive::clean_text(text).to_lowercase())
}
