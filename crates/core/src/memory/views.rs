//! The views the use cases return: what the CLI prints with `--json`, and the HTTP API and the
//! MCP tools answer with.
//!
//! Every door renders these same values (serde), so a field added here shows up everywhere at
//! once. Types from the layers below that a view carries (a pass report, a search hit, an
//! entry) are re-exported here, so a user of the crate finds every returned type in one place.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

pub use memfold_models::llm::Usage;

pub use crate::planning::about::{About, AboutEntry, Named};
pub use crate::planning::consolidate::gate::Gate;
pub use crate::planning::consolidate::pass::{
    ClusterReport, DroppedReport, OpReport, PassOptions, PassReport, Timings,
};
pub use crate::planning::curate::{Curated, Successor, TextFrom};
pub use crate::planning::diff::DiffStat;
pub use crate::planning::forget::Forgotten;
pub use crate::planning::promote::PromoteReport;
pub use crate::planning::review::{
    AppliedPlan, Chain, FactView, GroupView, OpDetail, PlanDetail, PlanView, RejectedPlan, RunDetail, RunView, Undone,
    Version, VersionStatus,
};
pub use crate::planning::run::plan::Change as EntryChange;
pub use crate::planning::run::records::{PlanReason, PlanStatus, SeenEntry};
pub use crate::planning::sync::ConflictKind;
pub use memfold_index::{DocKind, Hit, SyncStats};
pub use memfold_store::Problem;
pub use memfold_store::archive::{Fact, NewFact};
pub use memfold_store::caches::DeciderKind;
pub use memfold_store::egress::Sent;

/// What memfold sent off this machine from `root` since `since` (all without), oldest first
/// (`.memfold/egress.jsonl`; lines that do not parse are skipped). Read without opening the
/// memory: the CLI shows it with the daemon running.
pub fn sent_since(root: &memfold_store::Root, since: Option<chrono::NaiveDate>) -> Result<Vec<Sent>, String> {
    memfold_store::egress::read(&root.egress_file(), since).map_err(|e| format!("reading .memfold/egress.jsonl: {e}"))
}
pub use memfold_store::entries::{Entry, EntryMeta, Link};
pub use memfold_store::ledger::FactFate;
pub use memfold_store::state::LastRun;
pub use memfold_store::verify::Report;

/// Facts as they were appended (`memfold add --json`, `POST /facts`, the MCP tool `memory_add`):
/// `{"facts":[{"id","date","text"}]}`, and for a turn what extracting them cost.
#[derive(Debug, Clone, Serialize)]
pub struct Added {
    pub facts: Vec<AddedFact>,
    /// The extraction call of a turn (`POST /turns`, `memory_add_turn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<Usage>,
}

/// One appended fact as [`Added`] lists it.
#[derive(Debug, Clone, Serialize)]
pub struct AddedFact {
    pub id: String,
    pub date: NaiveDate,
    pub text: String,
}

impl Added {
    pub fn new(facts: &[Fact], llm: Option<Usage>) -> Added {
        let facts = facts.iter().map(|f| AddedFact { id: f.id.clone(), date: f.date, text: f.text.clone() }).collect();
        Added { facts, llm }
    }
}

/// What `reindex` did.
#[derive(Debug, Clone, Serialize)]
pub struct Reindexed {
    pub docs: usize,
    pub stats: SyncStats,
    pub seconds: f64,
}

/// What `status --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether a pass would start now, and why not.
    pub gate: Gate,
    /// Facts not yet consolidated or tombstoned.
    pub pending_facts: usize,
    /// Pending facts the gate does not count: in a pending plan, flagged by an undo or a
    /// rejected plan or given up after `max_attempts` unusable replies (they wait for a forced
    /// pass), or edited in place in the archive or named by an entry `memory.md` cannot show
    /// (hidden by an unclosed block, its header broken or without content: they wait for a
    /// person).
    pub held_facts: usize,
    /// Plans waiting for a person (`memfold plans`), and the ops they propose.
    pub plans_waiting: usize,
    pub proposals_waiting: usize,
    /// Current entries in `consolidated/memory.md`.
    pub entries: usize,
    pub last_run: Option<LastRun>,
    pub watermark: Option<NaiveDate>,
    /// Recoverable problems found while reading the files (see `memfold verify`).
    pub problems: usize,
    /// The embedder that runs, and why (`auto` picks MiniLM when its files are installed).
    pub embedder: EmbedderStatus,
    /// `memory.md` now: estimated tokens (characters / 4).
    pub memory_tokens: usize,
    /// When the last sweep finished, and whether one is due (`consolidation.sweep_interval_hours`).
    pub last_sweep: Option<DateTime<Utc>>,
    pub sweep_due: bool,
    /// How the last sync through git went, when the root syncs (`memfold sync --status` adds
    /// ahead/behind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<crate::memory::SyncState>,
    /// Totals over every run and plan (`memfold status`, `GET /status`, `/metrics`; not read
    /// when the daemon only looks at the gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curation: Option<CurationStats>,
    /// Current entries linked to others (`related`), naming a name `memfold about` lists, and
    /// unused for `decay.retire_after_days` (pinned ones and `MEMORY.md`'s left out; `sweep
    /// --stale` also leaves out those a pending plan holds or a person kept).
    pub related_entries: usize,
    pub named_entries: usize,
    pub stale_entries: usize,
}

/// What folding and curation did, over the life of a root.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CurationStats {
    pub runs: usize,
    /// Tokens of the entries merges folded away, in runs not undone.
    pub tokens_saved_by_merges: usize,
    /// Ops taken back by undos (whole runs and single ops).
    pub ops_undone: usize,
    /// Per decider: proposals people applied, rejected and let expire.
    pub deciders: Vec<DeciderStats>,
}

impl CurationStats {
    pub(crate) fn decider(&mut self, kind: DeciderKind) -> &mut DeciderStats {
        let at = match self.deciders.iter().position(|d| d.decider == kind) {
            Some(at) => at,
            None => {
                self.deciders.push(DeciderStats { decider: kind, ..DeciderStats::default() });
                self.deciders.len() - 1
            }
        };
        &mut self.deciders[at]
    }
}

/// One decider's proposals and how people decided them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeciderStats {
    pub decider: DeciderKind,
    pub proposals_applied: usize,
    pub proposals_rejected: usize,
    pub proposals_expired: usize,
    /// Rejected / (applied + rejected): how often its proposals were wrong; None before any was decided.
    pub rejected_share: Option<f64>,
}

/// Which embedder runs, and why.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedderStatus {
    /// `local`, `minilm` or `openai`.
    pub name: &'static str,
    pub why: String,
}

/// What `about` answers: the entries about a name, or (asked for none) the names memory
/// speaks of.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum AboutAnswer {
    About(crate::planning::about::About),
    Names { names: Vec<crate::planning::about::Named> },
}
