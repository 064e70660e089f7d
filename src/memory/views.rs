//! The views the use cases return: what the CLI prints with `--json`, and the HTTP API and the
//! MCP tools answer with.
//!
//! Every door renders these same values (serde), so a field added here shows up everywhere at
//! once. Types from the layers below that a view carries (a pass report, a search hit, an
//! entry) are re-exported here, so a user of the crate finds every returned type in one place.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

pub use crate::models::llm::Usage;

pub use crate::index::{DocKind, Hit, SyncStats};
pub use crate::planning::consolidate::gate::Gate;
pub use crate::planning::consolidate::pass::{
    ClusterReport, DroppedReport, OpReport, PassOptions, PassReport, Timings,
};
pub use crate::planning::consolidate::plan::Change as EntryChange;
pub use crate::planning::consolidate::records::PlanStatus;
pub use crate::planning::diff::DiffStat;
pub use crate::planning::promote::PromoteReport;
pub use crate::store::Problem;
pub use crate::store::archive::{Fact, NewFact};
pub use crate::store::entries::{Entry, EntryMeta};
pub use crate::store::state::LastRun;
pub use crate::store::verify::Report;

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

/// A stored plan as shown to people (`memfold plans --json`, `GET /plans`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanView {
    pub id: String,
    pub status: PlanStatus,
    pub reason: String,
    pub created: DateTime<Utc>,
    pub rejected: Option<DateTime<Utc>>,
    pub pass: String,
    /// A pending plan whose `memory.md` changed since it was made: apply will rebase it or
    /// refuse. Never set on a rejected plan.
    pub stale: bool,
    pub ops: Vec<OpReport>,
    pub facts: Vec<String>,
    pub entries: Vec<String>,
    pub diff: String,
    pub stat: DiffStat,
    pub llm: Usage,
}

impl PlanView {
    /// The plan on one line: id, status, reason, when, ops, facts, lines, and whether it is stale.
    pub fn headline(&self) -> String {
        format!(
            "plan {} {} ({}), made {}: {} ops over {} facts, +{} -{} lines{}",
            self.id,
            self.status.as_str(),
            self.reason,
            self.created.format("%Y-%m-%d %H:%M:%SZ"),
            self.ops.len(),
            self.facts.len(),
            self.stat.added,
            self.stat.removed,
            if self.stale { "; memory.md changed since (applying rebases it or names what is in the way)" } else { "" }
        )
    }
}

/// What applying a stored plan did.
#[derive(Debug, Clone, Serialize)]
pub struct AppliedPlan {
    pub plan: String,
    pub run: String,
    /// `memory.md` had changed elsewhere since the plan was made; its ops were replayed on top.
    pub rebased: bool,
    pub ops: usize,
    pub facts: Vec<String>,
    pub entries: Vec<String>,
    /// The change made to `memory.md` (the plan's own diff unless rebased).
    pub diff: String,
    /// What rewriting `MEMORY.md` afterwards cost (also in the run's record).
    pub llm: Usage,
    /// The groups applied, when only some were (`POST /plans/{id}/apply {"groups": [...]}`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<usize>,
    /// Facts of the groups left out: pending again, as after a rejection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

/// A stored plan with everything a person needs to decide it: its ops in groups, each op with
/// the entries it changes before and after, and the facts as archived (`memfold plan <id>`,
/// `GET /plans/{id}`).
#[derive(Debug, Clone, Serialize)]
pub struct PlanDetail {
    #[serde(flatten)]
    pub plan: PlanView,
    /// The op groups, in journal order; a person applies or rejects whole groups.
    pub groups: Vec<GroupView>,
    /// The facts the ops name, as archived (text, date, time, source).
    pub fact_texts: Vec<Fact>,
}

/// One op group of a plan: ops connected by a shared fact or entry.
#[derive(Debug, Clone, Serialize)]
pub struct GroupView {
    /// 1-based, as `POST /plans/{id}/apply {"groups": [...]}` names it.
    pub group: usize,
    pub ops: Vec<OpDetail>,
    pub facts: Vec<String>,
    pub entries: Vec<String>,
    /// Entries ranked for the group's facts, shown to the decider, that no op of the plan
    /// changes, as the decider saw them.
    pub left_alone: Vec<crate::planning::consolidate::records::SeenEntry>,
}

/// One op of a plan and what it changes.
#[derive(Debug, Clone, Serialize)]
pub struct OpDetail {
    pub seq: usize,
    #[serde(flatten)]
    pub op: OpReport,
    /// Each entry the op changes, as rendered blocks before and after (None: absent).
    pub changes: Vec<EntryChange>,
}

/// One archived fact, where it is and where it went (`GET /facts/{id}`).
#[derive(Debug, Clone, Serialize)]
pub struct FactView {
    #[serde(flatten)]
    pub fact: Fact,
    /// The day file holding it, relative to the root, and its 1-based line there.
    pub file: String,
    pub line: usize,
    pub fate: crate::store::ledger::FactFate,
    /// Current entries that name it as a source.
    pub entries: Vec<String>,
}

/// What rejecting a plan did.
#[derive(Debug, Clone, Serialize)]
pub struct RejectedPlan {
    pub plan: String,
    /// Facts pending again, flagged so automatic passes leave them out.
    pub facts: Vec<String>,
}

/// An applied run as listed (`memfold runs --json`, `GET /runs`).
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub run: String,
    /// When the run finished (for runs without a record, when it was planned).
    pub time: DateTime<Utc>,
    pub started: Option<DateTime<Utc>>,
    /// The stored plan it applied, if any.
    pub plan: Option<String>,
    /// Ops by kind.
    pub ops: BTreeMap<String, usize>,
    pub facts: usize,
    pub entries: Vec<String>,
    /// Every LLM call of the run (decisions, re-asks, promotion), when recorded.
    pub llm: Option<Usage>,
    pub undone: Option<DateTime<Utc>>,
}

/// What an undo did.
#[derive(Debug, Clone, Serialize)]
pub struct Undone {
    pub run: String,
    /// `memory.md` is byte for byte what it was before the run.
    pub exact: bool,
    /// Entries put back to their version before the run.
    pub restored: Vec<String>,
    /// Entries the run added, now removed (their text is in history as `reverted`).
    pub removed: Vec<String>,
    /// Facts pending again, flagged so automatic passes leave them out.
    pub facts: Vec<String>,
    /// What rewriting `MEMORY.md` afterwards cost.
    pub llm: Usage,
}

/// One version of an entry, current or in history.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    pub id: String,
    /// `current`, or the history status (`replaced`, `merged`, `deleted`, `reverted`, …).
    pub status: String,
    pub content: String,
    pub first_seen: Option<NaiveDate>,
    pub updated: Option<NaiveDate>,
    pub valid_until: Option<NaiveDate>,
    pub superseded_by: Option<String>,
    /// Ids of other entries merged into this one (their history blocks name it in `superseded_by`).
    pub supersedes: Vec<String>,
    pub run: Option<String>,
    pub sources: Vec<String>,
    pub pinned: bool,
}

/// An entry's chain (`memfold history ID`, `GET /entries/{id}/history`): every version of it
/// and of the entries linked to it by `superseded_by`, history first (in the order written),
/// then the current ones.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    pub id: String,
    pub versions: Vec<Version>,
}

/// What `forget` did.
#[derive(Debug, Clone, Serialize)]
pub struct Forgotten {
    pub id: String,
    /// `entry` or `fact`.
    pub kind: &'static str,
    /// Every id the tombstone covers.
    pub tombstoned: Vec<String>,
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
}

/// Which embedder runs, and why.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedderStatus {
    /// `local`, `minilm` or `openai`.
    pub name: &'static str,
    pub why: String,
}
